/* cli_http.c -- a blocking HTTP/1.1 GET over a plain socket for the subcommands: non-blocking
 * connect and poll(2) against one deadline, read to EOF (the request asks for
 * "Connection: close"), then split the status line, the headers and the body (Content-Length or
 * chunked). Nothing here is used by the server itself. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cli_http.h"

static int ms_left(int64_t deadline_ns)
{
    int64_t left = (deadline_ns - now_mono_ns()) / NS_PER_MS;
    return left <= 0 ? 0 : left > 60 * 60 * 1000 ? 60 * 60 * 1000 : (int)left;
}

/* Connect to one address before the deadline. The socket, or -1 with errno set. */
static int connect_one(const struct addrinfo *ai, int64_t deadline_ns)
{
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
        return fd;
    if (errno != EINPROGRESS) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    int n;
    while ((n = poll(&p, 1, ms_left(deadline_ns))) < 0 && errno == EINTR)
        ;
    int soerr = 0;
    socklen_t len = sizeof soerr;
    if (n == 0)
        soerr = ETIMEDOUT;
    else if (n < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0)
        soerr = errno;
    if (soerr != 0) {
        close(fd);
        errno = soerr;
        return -1;
    }
    return fd;
}

/* Wait until fd is ready for `events` or the deadline passes: 1 ready, 0 timed out, -1 error. */
static int wait_fd(int fd, short events, int64_t deadline_ns)
{
    struct pollfd p = {.fd = fd, .events = events};
    for (;;) {
        int n = poll(&p, 1, ms_left(deadline_ns));
        if (n >= 0 || errno != EINTR)
            return n > 0 ? 1 : n;
    }
}

/* Decode a chunked body of `n` bytes at `in` into `out` (at least n bytes). Returns the decoded
 * length, or -1 if it is not well-formed or ends early. */
static ssize_t dechunk(const char *in, size_t n, char *out)
{
    size_t i = 0, w = 0;
    for (;;) {
        char *end;
        if (i >= n)
            return -1;
        unsigned long size = strtoul(in + i, &end, 16);
        const char *crlf = memmem(in + i, n - i, "\r\n", 2);
        if (end == in + i || !crlf)
            return -1;
        i = (size_t)(crlf - in) + 2;
        if (size == 0)
            return (ssize_t)w;
        if (size > n - i || n - i - size < 2)
            return -1;
        memcpy(out + w, in + i, size);
        w += size;
        i += size + 2;
    }
}

/* Find header `name`'s value in the header block [h, end). Its start (length in *len) or NULL. */
static const char *header_value(const char *h, const char *end, const char *name, size_t *len)
{
    size_t nl = strlen(name);
    for (const char *line = h; line < end;) {
        const char *eol = memmem(line, (size_t)(end - line), "\r\n", 2);
        if (!eol)
            eol = end;
        if ((size_t)(eol - line) > nl && line[nl] == ':' && strncasecmp(line, name, nl) == 0) {
            const char *v = line + nl + 1;
            while (v < eol && (*v == ' ' || *v == '\t'))
                v++;
            *len = (size_t)(eol - v);
            return v;
        }
        line = eol + 2;
    }
    return NULL;
}

/* Split the raw bytes of a response into *r. 0, or -1 with err set. */
static int parse_response(char *raw, size_t n, struct cli_http_response *r, char err[ERR_LEN])
{
    const char *hend = memmem(raw, n, "\r\n\r\n", 4);
    int status = 0;
    if (!hend || n < 12 || strncmp(raw, "HTTP/1.", 7) != 0 ||
        sscanf(raw + 9, "%3d", &status) != 1 || status < 100 || status > 599) {
        snprintf(err, ERR_LEN, "not an HTTP response");
        return -1;
    }
    const char *body = hend + 4;
    size_t body_len = n - (size_t)(body - raw), vlen;
    const char *te = header_value(raw, hend, "Transfer-Encoding", &vlen);
    const char *cl = header_value(raw, hend, "Content-Length", &vlen);
    char *out = malloc(body_len + 1);
    if (!out) {
        snprintf(err, ERR_LEN, "out of memory");
        return -1;
    }
    if (te && vlen >= 7 && strncasecmp(te, "chunked", 7) == 0) {
        ssize_t d = dechunk(body, body_len, out);
        if (d < 0) {
            free(out);
            snprintf(err, ERR_LEN, "the response's chunked body ends early");
            return -1;
        }
        body_len = (size_t)d;
    } else {
        if (cl) {
            unsigned long long want = strtoull(cl, NULL, 10);
            if (want > body_len) {
                free(out);
                snprintf(err, ERR_LEN, "the response ends after %zu of its %llu body bytes",
                         body_len, want);
                return -1;
            }
            body_len = (size_t)want;
        }
        memcpy(out, body, body_len);
    }
    out[body_len] = '\0';
    r->status = status;
    r->body = out;
    r->body_len = body_len;
    return 0;
}

int cli_http_get(const char *host, unsigned port, const char *path,
                 const char *const *headers, int64_t timeout_ms, struct cli_http_response *r,
                 char err[ERR_LEN])
{
    memset(r, 0, sizeof *r);
    int64_t deadline = now_mono_ns() + timeout_ms * NS_PER_MS;
    char port_s[16];
    snprintf(port_s, sizeof port_s, "%u", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV}, *ai = NULL;
    int gai = getaddrinfo(host, port_s, &hints, &ai);
    if (gai != 0) {
        snprintf(err, ERR_LEN, "cannot resolve %s: %s", host, gai_strerror(gai));
        return -1;
    }
    int fd = -1, e = 0;
    for (const struct addrinfo *a = ai; a && fd < 0; a = a->ai_next)
        if ((fd = connect_one(a, deadline)) < 0)
            e = errno;
    freeaddrinfo(ai);
    if (fd < 0) {
        if (e == ETIMEDOUT)
            snprintf(err, ERR_LEN, "timed out after %.1f s", (double)timeout_ms / 1000);
        else
            snprintf(err, ERR_LEN, "%s", strerror(e));
        return -1;
    }
    char req[4096];
    int len = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: %s\r\n", path,
                       strchr(host, ':') ? "localhost" : host);
    for (size_t i = 0; headers && headers[i] && len >= 0 && (size_t)len < sizeof req; i++)
        len += snprintf(req + len, sizeof req - (size_t)len, "%s\r\n", headers[i]);
    if (len >= 0 && (size_t)len < sizeof req)
        len += snprintf(req + len, sizeof req - (size_t)len, "Connection: close\r\n\r\n");
    int rc = -1;
    char *raw = NULL;
    size_t n = 0, cap = 0;
    if (len < 0 || (size_t)len >= sizeof req) {
        snprintf(err, ERR_LEN, "request too long");
        goto out;
    }
    for (size_t sent = 0; sent < (size_t)len;) {
        ssize_t w = send(fd, req + sent, (size_t)len - sent, MSG_NOSIGNAL);
        if (w > 0) {
            sent += (size_t)w;
            continue;
        }
        if (w < 0 && errno != EAGAIN && errno != EINTR) {
            snprintf(err, ERR_LEN, "%s", strerror(errno));
            goto out;
        }
        if (wait_fd(fd, POLLOUT, deadline) <= 0) {
            snprintf(err, ERR_LEN, "timed out after %.1f s", (double)timeout_ms / 1000);
            goto out;
        }
    }
    for (;;) {
        if (n + 4096 > cap) {
            if (cap >= CLI_HTTP_MAX_BYTES) {
                snprintf(err, ERR_LEN, "response larger than %u bytes", CLI_HTTP_MAX_BYTES);
                goto out;
            }
            size_t ncap = cap ? cap * 2 : 16384;
            char *nraw = realloc(raw, ncap + 1);
            if (!nraw) {
                snprintf(err, ERR_LEN, "out of memory");
                goto out;
            }
            raw = nraw;
            cap = ncap;
        }
        ssize_t got = recv(fd, raw + n, cap - n, 0);
        if (got > 0) {
            n += (size_t)got;
            continue;
        }
        if (got == 0)
            break;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN) {
            if (n > 0 && errno == ECONNRESET)
                break; /* what arrived before the reset may still be a whole response */
            snprintf(err, ERR_LEN, "%s", strerror(errno));
            goto out;
        }
        if (wait_fd(fd, POLLIN, deadline) <= 0) {
            snprintf(err, ERR_LEN, "timed out after %.1f s", (double)timeout_ms / 1000);
            goto out;
        }
    }
    if (n == 0) {
        snprintf(err, ERR_LEN, "the connection closed without an answer");
        goto out;
    }
    raw[n] = '\0';
    rc = parse_response(raw, n, r, err);
out:
    free(raw);
    close(fd);
    return rc;
}

void cli_http_response_fini(struct cli_http_response *r)
{
    free(r->body);
    memset(r, 0, sizeof *r);
}
