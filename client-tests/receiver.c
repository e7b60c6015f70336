/* receiver.c -- a scripted webhook receiver over plain POSIX sockets (see receiver.h).
 * One accept thread and one thread per connection, at most RX_MAX_CONNS at once (the next waits
 * in the listen backlog); each connection reads HTTP/1.1 requests with Content-Length bodies one
 * after another (keep-alive, as libcurl reuses it) and answers each from the script. A request
 * is recorded, then answered. Every blocking wait polls the connection and a wake pipe that
 * receiver_stop makes readable, so stopping never waits on a peer. */
#define _GNU_SOURCE
#include "receiver.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RX_MAX_CONNS 64
#define RX_MAX_HEADER (64u * 1024u)       /* request line and headers, bytes */
#define RX_MAX_BODY (8u * 1024u * 1024u)  /* a longer body closes the connection */
#define RX_HUGE_BYTES (1024u * 1024u)     /* RX_HUGE_BODY's answer body */

struct conn {
    struct receiver *rx;
    int fd;
    pthread_t thread;
    bool started;
    atomic_bool done;           /* its thread has ended: join and reuse the slot */
};

struct receiver {
    int lfd;
    int wake[2];                /* wake[0] turns readable once, at stop, for every poller */
    int port;
    char url[64];
    pthread_t accept_thread;
    atomic_bool stop;

    pthread_mutex_t lock;       /* everything below */
    pthread_cond_t slot_free;
    struct rx_answer *script;
    size_t n_script;
    struct rx_request *reqs;
    size_t n_reqs, cap_reqs;
    struct conn conns[RX_MAX_CONNS];
};

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + (int64_t)ts.tv_nsec;
}

static const char *reason(int status)
{
    switch (status) {
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 302: return "Found";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 408: return "Request Timeout";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "Status";
    }
}

/* ---- connection I/O ---------------------------------------------------------------------- */

/* Wait until fd is readable (1), the receiver stops (0) or poll fails (-1). */
static int wait_readable(struct receiver *rx, int fd)
{
    struct pollfd p[2] = {{.fd = fd, .events = POLLIN}, {.fd = rx->wake[0], .events = POLLIN}};
    for (;;) {
        if (atomic_load(&rx->stop))
            return 0;
        int n = poll(p, 2, -1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 || (p[1].revents & POLLIN))
            return n < 0 ? -1 : 0;
        if (p[0].revents)
            return 1;
    }
}

/* All of `len` bytes, or false (peer gone, stopped). */
static bool send_all(struct receiver *rx, int fd, const char *data, size_t len)
{
    while (len > 0) {
        if (atomic_load(&rx->stop))
            return false;
        ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        data += n;
        len -= (size_t)n;
    }
    return true;
}

/* The value of header `name` in the header block [h, end) (after the request line), trimmed,
 * as a new string; NULL if absent (the last one wins). */
static char *header_value(const char *h, const char *end, const char *name)
{
    size_t nlen = strlen(name);
    char *found = NULL;
    const char *line = memchr(h, '\n', (size_t)(end - h));
    line = line ? line + 1 : end;
    while (line < end) {
        const char *eol = memchr(line, '\n', (size_t)(end - line));
        if (!eol)
            eol = end;
        const char *le = eol > line && eol[-1] == '\r' ? eol - 1 : eol;
        if ((size_t)(le - line) > nlen && line[nlen] == ':' && strncasecmp(line, name, nlen) == 0) {
            const char *v = line + nlen + 1;
            while (v < le && (*v == ' ' || *v == '\t'))
                v++;
            const char *ve = le;
            while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
                ve--;
            free(found);
            found = strndup(v, (size_t)(ve - v));
        }
        line = eol + 1;
    }
    return found;
}

static struct rx_answer answer_for(struct receiver *rx, size_t index)
{
    return rx->script[index < rx->n_script ? index : rx->n_script - 1];
}

/* Record request (taking ownership of its strings) and pick its answer. */
static struct rx_answer record(struct receiver *rx, struct rx_request *q)
{
    pthread_mutex_lock(&rx->lock);
    struct rx_answer a = answer_for(rx, rx->n_reqs);
    q->answered = a.action == RX_STATUS ? a.status
                : a.action == RX_REDIRECT ? 302
                : a.action == RX_HUGE_BODY ? 200 : 0;
    if (rx->n_reqs == rx->cap_reqs) {
        size_t cap = rx->cap_reqs ? rx->cap_reqs * 2 : 64;
        struct rx_request *p = realloc(rx->reqs, cap * sizeof *p);
        if (p) {
            rx->reqs = p;
            rx->cap_reqs = cap;
        }
    }
    if (rx->n_reqs < rx->cap_reqs) {
        rx->reqs[rx->n_reqs++] = *q;
    } else {
        fprintf(stderr, "receiver: out of memory, request not recorded\n");
        free(q->path), free(q->transmission_id), free(q->transmission_time);
        free(q->content_type), free(q->body);
    }
    pthread_mutex_unlock(&rx->lock);
    return a;
}

/* Answer per `a`. False: the connection is to be closed (without RST unless it was sent). */
static bool answer(struct receiver *rx, int fd, struct rx_answer a, bool keep_alive)
{
    char head[3072];
    const char *conn = keep_alive ? "" : "Connection: close\r\n";
    int n;
    switch (a.action) {
    case RX_STATUS:
        n = snprintf(head, sizeof head, "HTTP/1.1 %d %s\r\nContent-Length: 0\r\n%s\r\n",
                     a.status, reason(a.status), conn);
        return send_all(rx, fd, head, (size_t)n) && keep_alive;
    case RX_REDIRECT:
        n = snprintf(head, sizeof head, "HTTP/1.1 302 Found\r\nLocation: %s\r\n"
                     "Content-Length: 0\r\n%s\r\n", rx->url, conn);
        return send_all(rx, fd, head, (size_t)n) && keep_alive;
    case RX_HUGE_BODY: {
        n = snprintf(head, sizeof head, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                     "Content-Length: %u\r\n%s\r\n", RX_HUGE_BYTES, conn);
        if (!send_all(rx, fd, head, (size_t)n))
            return false;
        char chunk[16384];
        memset(chunk, 'x', sizeof chunk);
        for (size_t sent = 0; sent < RX_HUGE_BYTES; sent += sizeof chunk)
            if (!send_all(rx, fd, chunk, sizeof chunk))
                return false; /* the client stopped reading: fakegate reads at most 64 KiB */
        return keep_alive;
    }
    case RX_RESET: {
        struct linger l = {.l_onoff = 1, .l_linger = 0};
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l); /* close sends RST */
        return false;
    }
    case RX_HANG: {
        /* Never answer: wait for the stop, or for the peer to give up (EOF or reset). */
        char sink[4096];
        while (wait_readable(rx, fd) == 1) {
            ssize_t r = recv(fd, sink, sizeof sink, 0);
            if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN))
                break;
        }
        return false;
    }
    }
    return false;
}

/* One request from fd into *q, reading more into buf as needed. Returns 1 with a request,
 * 0 at a clean end (EOF between requests, stop), -1 on a protocol error or a broken peer.
 * Bytes after the request stay in buf (pipelining). */
static int read_request(struct receiver *rx, int fd, char **buf, size_t *len, size_t *cap,
                        struct rx_request *q, bool *keep_alive)
{
    char *hend = NULL;
    size_t need = 0;
    for (;;) {
        if (!hend) {
            hend = *len >= 4 ? memmem(*buf, *len, "\r\n\r\n", 4) : NULL;
            if (hend) {
                char *cl = header_value(*buf, hend + 2, "content-length");
                char *te = header_value(*buf, hend + 2, "transfer-encoding");
                char *ex = header_value(*buf, hend + 2, "expect");
                char *end = NULL;
                unsigned long long body = cl ? strtoull(cl, &end, 10) : 0;
                bool bad = te != NULL || (cl && (*end || cl[0] == '-' || body > RX_MAX_BODY));
                bool cont = ex && strcasecmp(ex, "100-continue") == 0;
                free(cl), free(te), free(ex);
                if (bad)
                    return -1; /* chunked bodies are not needed: fakegate sends Content-Length */
                need = (size_t)(hend + 4 - *buf) + (size_t)body;
                if (cont && *len < need &&
                    !send_all(rx, fd, "HTTP/1.1 100 Continue\r\n\r\n", 25))
                    return -1;
            } else if (*len > RX_MAX_HEADER) {
                return -1;
            }
        }
        if (hend && *len >= need)
            break;
        if (*len + 1 >= *cap) {
            size_t c = *cap * 2;
            ptrdiff_t at = hend ? hend - *buf : -1;
            char *p = realloc(*buf, c);
            if (!p)
                return -1;
            hend = at >= 0 ? p + at : NULL;
            *buf = p;
            *cap = c;
        }
        int w = wait_readable(rx, fd);
        if (w <= 0)
            return w;
        ssize_t n = recv(fd, *buf + *len, *cap - *len - 1, 0);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n <= 0)
            return n == 0 && *len == 0 ? 0 : -1;
        *len += (size_t)n;
    }
    const char *head = *buf, *hstop = hend + 2;
    const char *sp1 = memchr(head, ' ', (size_t)(hstop - head));
    const char *sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(hstop - sp1 - 1)) : NULL;
    const char *eol = memchr(head, '\r', (size_t)(hstop - head));
    if (!sp1 || !sp2 || !eol || sp2 > eol)
        return -1;
    bool http10 = strncmp(sp2 + 1, "HTTP/1.0", 8) == 0;
    char *connection = header_value(head, hstop, "connection");
    *keep_alive = connection ? strcasecmp(connection, "close") != 0 && (!http10 ||
                                   strcasecmp(connection, "keep-alive") == 0)
                             : !http10;
    free(connection);
    size_t body_off = (size_t)(hend + 4 - *buf), body_len = need - body_off;
    char *rc = header_value(head, hstop, "tosspayments-webhook-transmission-retried-count");
    char *end = NULL;
    long count = rc ? strtol(rc, &end, 10) : -1;
    *q = (struct rx_request){
        .arrived_ns = mono_ns(),
        .path = strndup(sp1 + 1, (size_t)(sp2 - sp1 - 1)),
        .transmission_id = header_value(head, hstop, "tosspayments-webhook-transmission-id"),
        .transmission_time = header_value(head, hstop, "tosspayments-webhook-transmission-time"),
        .retried_count = rc && rc[0] && !*end && count >= 0 && count <= 1000000 ? (int)count
                                                                                 : -1,
        .content_type = header_value(head, hstop, "content-type"),
        .body = malloc(body_len + 1),
        .body_len = body_len,
    };
    free(rc);
    if (q->body) {
        memcpy(q->body, *buf + body_off, body_len);
        q->body[body_len] = '\0';
    }
    memmove(*buf, *buf + need, *len - need);
    *len -= need;
    if (!q->path || !q->body) {
        free(q->path), free(q->transmission_id), free(q->transmission_time);
        free(q->content_type), free(q->body);
        return -1;
    }
    return 1;
}

static void *conn_main(void *arg)
{
    struct conn *c = arg;
    struct receiver *rx = c->rx;
    size_t len = 0, cap = 8192;
    char *buf = malloc(cap);
    bool more = buf != NULL;
    while (more) {
        struct rx_request q;
        bool keep_alive = true;
        if (read_request(rx, c->fd, &buf, &len, &cap, &q, &keep_alive) != 1)
            break;
        struct rx_answer a = record(rx, &q);
        more = answer(rx, c->fd, a, keep_alive);
    }
    free(buf);
    close(c->fd);
    pthread_mutex_lock(&rx->lock);
    atomic_store(&c->done, true);
    pthread_cond_signal(&rx->slot_free);
    pthread_mutex_unlock(&rx->lock);
    return NULL;
}

/* ---- the accept thread --------------------------------------------------------------------- */

/* A slot for a new connection (its old thread joined), waiting while all are taken; NULL once
 * the receiver stops. */
static struct conn *free_slot(struct receiver *rx)
{
    pthread_mutex_lock(&rx->lock);
    for (;;) {
        if (atomic_load(&rx->stop)) {
            pthread_mutex_unlock(&rx->lock);
            return NULL;
        }
        for (size_t i = 0; i < RX_MAX_CONNS; i++) {
            struct conn *c = &rx->conns[i];
            if (!c->started || atomic_load(&c->done)) {
                pthread_mutex_unlock(&rx->lock);
                if (c->started)
                    pthread_join(c->thread, NULL);
                c->started = false;
                atomic_store(&c->done, false);
                return c;
            }
        }
        pthread_cond_wait(&rx->slot_free, &rx->lock);
    }
}

static void *accept_main(void *arg)
{
    struct receiver *rx = arg;
    struct conn *c;
    while ((c = free_slot(rx))) {
        int w = wait_readable(rx, rx->lfd);
        if (w <= 0)
            break;
        int fd = accept4(rx->lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue; /* EINTR, ECONNABORTED, EMFILE: try again */
        c->rx = rx;
        c->fd = fd;
        if (pthread_create(&c->thread, NULL, conn_main, c) != 0) {
            close(fd);
            continue;
        }
        c->started = true;
    }
    return NULL;
}

/* ---- the interface ------------------------------------------------------------------------ */

static bool copy_script(struct receiver *rx, const struct rx_answer *script, size_t n)
{
    if (!script || n == 0)
        return false;
    struct rx_answer *s = malloc(n * sizeof *s);
    if (!s)
        return false;
    memcpy(s, script, n * sizeof *s);
    free(rx->script);
    rx->script = s;
    rx->n_script = n;
    return true;
}

struct receiver *receiver_start(const struct rx_answer *script, size_t n)
{
    struct receiver *rx = calloc(1, sizeof *rx);
    if (!rx || !copy_script(rx, script, n)) {
        fprintf(stderr, "receiver: %s\n", rx ? "a script needs at least one answer"
                                               : "out of memory");
        free(rx);
        return NULL;
    }
    rx->wake[0] = rx->wake[1] = -1;
    rx->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof sa;
    if (rx->lfd < 0 || bind(rx->lfd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        listen(rx->lfd, 128) != 0 || getsockname(rx->lfd, (struct sockaddr *)&sa, &sl) != 0 ||
        pipe2(rx->wake, O_CLOEXEC) != 0) {
        fprintf(stderr, "receiver: cannot listen on 127.0.0.1: %s\n", strerror(errno));
        goto fail;
    }
    rx->port = ntohs(sa.sin_port);
    snprintf(rx->url, sizeof rx->url, "http://127.0.0.1:%d/hook", rx->port);
    pthread_mutex_init(&rx->lock, NULL);
    pthread_cond_init(&rx->slot_free, NULL);
    if (pthread_create(&rx->accept_thread, NULL, accept_main, rx) != 0) {
        fprintf(stderr, "receiver: cannot start its thread\n");
        pthread_cond_destroy(&rx->slot_free);
        pthread_mutex_destroy(&rx->lock);
        goto fail;
    }
    return rx;
fail:
    if (rx->lfd >= 0)
        close(rx->lfd);
    if (rx->wake[0] >= 0)
        close(rx->wake[0]), close(rx->wake[1]);
    free(rx->script);
    free(rx);
    return NULL;
}

const char *receiver_url(const struct receiver *rx)
{
    return rx->url;
}

size_t receiver_count(struct receiver *rx)
{
    pthread_mutex_lock(&rx->lock);
    size_t n = rx->n_reqs;
    pthread_mutex_unlock(&rx->lock);
    return n;
}

size_t receiver_wait(struct receiver *rx, size_t n, int timeout_ms)
{
    int64_t deadline = mono_ns() + (int64_t)timeout_ms * 1000000;
    for (;;) {
        size_t got = receiver_count(rx);
        if (got >= n || mono_ns() >= deadline)
            return got;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 5000000};
        nanosleep(&ts, NULL);
    }
}

bool receiver_get(struct receiver *rx, size_t i, struct rx_request *out)
{
    pthread_mutex_lock(&rx->lock);
    bool ok = i < rx->n_reqs;
    if (ok)
        *out = rx->reqs[i];
    pthread_mutex_unlock(&rx->lock);
    return ok;
}

void receiver_script(struct receiver *rx, const struct rx_answer *script, size_t n)
{
    pthread_mutex_lock(&rx->lock);
    if (!copy_script(rx, script, n))
        fprintf(stderr, "receiver: script not replaced (empty, or out of memory)\n");
    pthread_mutex_unlock(&rx->lock);
}

void receiver_stop(struct receiver *rx)
{
    if (!rx)
        return;
    pthread_mutex_lock(&rx->lock);
    atomic_store(&rx->stop, true);
    pthread_cond_broadcast(&rx->slot_free);
    pthread_mutex_unlock(&rx->lock);
    ssize_t w;
    do
        w = write(rx->wake[1], "x", 1);
    while (w < 0 && errno == EINTR);
    pthread_join(rx->accept_thread, NULL);
    for (size_t i = 0; i < RX_MAX_CONNS; i++)
        if (rx->conns[i].started)
            pthread_join(rx->conns[i].thread, NULL);
    close(rx->lfd);
    close(rx->wake[0]);
    close(rx->wake[1]);
    for (size_t i = 0; i < rx->n_reqs; i++) {
        struct rx_request *q = &rx->reqs[i];
        free(q->path), free(q->transmission_id), free(q->transmission_time);
        free(q->content_type), free(q->body);
    }
    free(rx->reqs);
    free(rx->script);
    pthread_cond_destroy(&rx->slot_free);
    pthread_mutex_destroy(&rx->lock);
    free(rx);
}
