/* http.c -- libmicrohttpd glue (see http.h). One MHD polling thread runs every handler call
 * and the completion callback; held requests are suspended and resumed by the scheduler's
 * timer thread. Invariants: a request is in the scheduler at most once, and only while its
 * connection is suspended; per-request memory is freed only in on_completed; a suspended
 * connection is always resumed before MHD_stop_daemon (which would abort otherwise). */
#define _GNU_SOURCE
#include "http.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "request.h"
#include "rng.h"
#include "router.h"

#define HEADER_BLOCK_MAX 8192 /* SPEC §7: request line + header lines, with line ends */

/* Transport state of a request, beside the handler's r->phase. */
enum http_state { HS_NEW = 0, HS_BODY, HS_HELD, HS_READY, HS_QUEUED };

struct conn_state {
    struct request *req;
    struct MHD_Connection *conn;
    enum http_state state;
};

struct http_server {
    struct MHD_Daemon *daemon;
    struct sched *sched;
    const struct config *cfg;
    unsigned port;
    unsigned conn_limit;
    uint64_t trace_salt;
    atomic_uint_fast64_t trace_seq;
    atomic_bool stopping;
    MHD_socket listen_fd;
};

/* --- per-request state -------------------------------------------------------------------- */

/* First sight of a request: libmicrohttpd gives us the raw URI here (before decoding) and
 * uses our return value as the request's con_cls. on_completed frees it. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
    (void)cls;
    struct conn_state *cs = calloc(1, sizeof *cs);
    if (!cs)
        return NULL;
    cs->req = request_new();
    if (!cs->req) {
        free(cs);
        return NULL;
    }
    cs->conn = c;
    cs->req->raw_uri = strdup(uri);
    cs->req->arrived_ns = now_mono_ns();
    cs->req->arrived_unix_us = now_unix_us();
    return cs;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)c;
    (void)toe;
    struct conn_state *cs = *con_cls;
    if (!cs)
        return;
    request_free(cs->req);
    free(cs);
    *con_cls = NULL;
}

/* --- reading the request ------------------------------------------------------------------ */

struct header_scan {
    struct request *r;
    size_t block_len;
};

static enum MHD_Result scan_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                   const char *value)
{
    (void)kind;
    struct header_scan *hs = cls;
    struct request *r = hs->r;
    hs->block_len += strlen(key) + 2 + (value ? strlen(value) : 0) + 2;
    if (!value)
        value = "";
    if (strcasecmp(key, "Authorization") == 0 && !r->authorization) {
        r->authorization = strdup(value);
    } else if (strcasecmp(key, "Idempotency-Key") == 0) {
        r->idem_key_count++;
        if (!r->idem_key_raw)
            r->idem_key_raw = strdup(value);
    } else if (strcasecmp(key, "TossPayments-Test-Code") == 0 && !r->test_code) {
        r->test_code = strdup(value);
    } else if (strcasecmp(key, "Accept-Language") == 0) {
        r->lang_en = strncasecmp(value, "en", 2) == 0;
    } else if (strcasecmp(key, "Content-Length") == 0) {
        r->has_content_length = true;
        r->content_length = strtoull(value, NULL, 10);
    } else if (strcasecmp(key, "Transfer-Encoding") == 0) {
        r->chunked = true;
    }
    return MHD_YES;
}

static enum http_method parse_method(const char *m)
{
    static const char *const names[] = {"GET", "POST", "PUT", "DELETE", "PATCH", "HEAD"};
    for (int i = 0; i < 6; i++)
        if (strcmp(m, names[i]) == 0)
            return (enum http_method)i;
    return HM_OTHER;
}

static void read_headers(struct request *r, struct MHD_Connection *c, const char *url,
                         const char *method, const char *version)
{
    r->method = parse_method(method);
    snprintf(r->method_str, sizeof r->method_str, "%s", method);
    r->path = strdup(url);
    const char *q = r->raw_uri ? strchr(r->raw_uri, '?') : NULL;
    if (q)
        r->query = strdup(q + 1);
    struct header_scan hs = {r, strlen(method) + 1 + (r->raw_uri ? strlen(r->raw_uri) : 0) + 1 +
                                    strlen(version) + 2 + 2};
    MHD_get_connection_values(c, MHD_HEADER_KIND, scan_header, &hs);
    r->header_too_large = hs.block_len > HEADER_BLOCK_MAX;
}

/* --- answering ---------------------------------------------------------------------------- */

static struct http_server *srv; /* the one server of this process */

static void trace_id(char out[33])
{
    uint64_t n = atomic_fetch_add(&srv->trace_seq, 1);
    /* The low half is a bijection of the counter: unique per response within the process. */
    snprintf(out, 33, "%016llx%016llx", (unsigned long long)mix64(srv->trace_salt ^ n >> 20),
             (unsigned long long)mix64(n + srv->trace_salt));
}

static enum MHD_Result send_response(struct conn_state *cs)
{
    struct request *r = cs->req;
    if (!r->resp.body) {
        request_error(r, "FAILED_INTERNAL_SYSTEM_PROCESSING", NULL);
        if (!r->resp.body)
            return MHD_NO;
    }
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(r->resp.body_len, r->resp.body, MHD_RESPMEM_MUST_FREE);
    if (!resp)
        return MHD_NO;
    r->resp.body = NULL; /* the response owns it now */
    char tid[33];
    trace_id(tid);
    MHD_add_response_header(resp, "Content-Type", "application/json");
    MHD_add_response_header(resp, "x-tosspayments-trace-id", tid);
    MHD_add_response_header(resp, "Cache-Control", "no-cache, no-store, max-age=0, must-revalidate");
    if (r->resp.allow)
        MHD_add_response_header(resp, "Allow", r->resp.allow);
    if (r->resp.close || atomic_load(&srv->stopping))
        MHD_add_response_header(resp, "Connection", "close");
    enum MHD_Result ret = MHD_queue_response(cs->conn, (unsigned)r->resp.status, resp);
    MHD_destroy_response(resp);
    cs->state = HS_QUEUED;
    r->phase = PH_SENT;
    return ret;
}

/* Timer thread: the request's deadline. Run its state change, then resume the connection
 * (or re-arm for the next deadline). Never touches cs after resuming. */
static void on_deadline(void *arg, bool draining)
{
    struct conn_state *cs = arg;
    enum handler_result h = router_on_deadline(cs->req, draining);
    if (h == H_HOLD) {
        if (sched_add(srv->sched, cs->req->hold_until_ns, on_deadline, cs) == 0)
            return;
        h = router_on_deadline(cs->req, true); /* the scheduler is draining: finish now */
    }
    cs->state = HS_READY;
    MHD_resume_connection(cs->conn);
}

static enum MHD_Result hold(struct conn_state *cs)
{
    MHD_suspend_connection(cs->conn);
    cs->state = HS_HELD;
    if (sched_add(srv->sched, cs->req->hold_until_ns, on_deadline, cs) != 0)
        on_deadline(cs, true);
    return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    (void)cls;
    struct conn_state *cs = *con_cls;
    if (!cs)
        return MHD_NO; /* out of memory in on_uri */
    struct request *r = cs->req;
    switch (cs->state) {
    case HS_NEW:
        read_headers(r, c, url, method, version);
        if (router_on_headers(r) == H_RESPOND)
            return send_response(cs);
        cs->state = HS_BODY;
        return MHD_YES; /* libmicrohttpd sends 100 Continue now if asked */
    case HS_BODY:
        if (*upload_data_size > 0) {
            size_t n = *upload_data_size;
            if (!r->body_too_large && r->body.len + n <= srv->cfg->max_body)
                buf_add(&r->body, upload_data, n);
            else
                r->body_too_large = true; /* keep reading, discard (SPEC §2) */
            *upload_data_size = 0;
            return MHD_YES;
        }
        r->received_ns = now_mono_ns();
        switch (router_on_body(r)) {
        case H_HOLD:
            return hold(cs);
        case H_RESPOND:
        case H_CONTINUE:
            break;
        }
        return send_response(cs);
    case HS_READY:
        return send_response(cs);
    case HS_HELD:
    case HS_QUEUED:
        *upload_data_size = 0;
        return MHD_YES;
    }
    return MHD_NO;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    const struct config *cfg = cls;
    if (cfg->quiet)
        return;
    fputs("fakegate: libmicrohttpd: ", stderr);
    vfprintf(stderr, fmt, ap);
}

/* --- start / stop ------------------------------------------------------------------------- */

static unsigned raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return 1024;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > 1048576)
        return 1048576;
    return (unsigned)rl.rlim_cur;
}

struct http_server *http_start(const struct config *cfg, struct sched *s, uint64_t trace_salt,
                               char *err, size_t err_len)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    char port_s[16];
    snprintf(port_s, sizeof port_s, "%u", cfg->port);
    int gai = getaddrinfo(cfg->host, port_s, &hints, &ai);
    if (gai != 0) {
        snprintf(err, err_len, "--host %s: %s", cfg->host, gai_strerror(gai));
        return NULL;
    }
    struct http_server *h = calloc(1, sizeof *h);
    if (!h) {
        freeaddrinfo(ai);
        snprintf(err, err_len, "out of memory");
        return NULL;
    }
    h->sched = s;
    h->cfg = cfg;
    h->trace_salt = trace_salt;
    unsigned nofile = raise_nofile();
    /* Keep descriptors for the listen socket, epoll, the ITC pipe, files and logs. */
    h->conn_limit = nofile > 128 ? nofile - 64 : nofile / 2;
    srv = h;

    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
                     MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    h->daemon = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, NULL, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, (void *)cfg,
        MHD_OPTION_SOCK_ADDR, ai->ai_addr,
        MHD_OPTION_CONNECTION_LIMIT, h->conn_limit, MHD_OPTION_CONNECTION_TIMEOUT,
        cfg->idle_timeout_s, MHD_OPTION_LISTEN_BACKLOG_SIZE, 4096U, MHD_OPTION_NOTIFY_COMPLETED,
        on_completed, NULL, MHD_OPTION_URI_LOG_CALLBACK, on_uri, NULL, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!h->daemon) {
        snprintf(err, err_len,
                 "cannot listen on %s:%u (port in use, or the address is not on this host)",
                 cfg->host, cfg->port);
        free(h);
        srv = NULL;
        return NULL;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_BIND_PORT);
    h->port = info ? info->port : cfg->port;
    return h;
}

unsigned http_port(const struct http_server *h)
{
    return h->port;
}

unsigned http_connection_limit(const struct http_server *h)
{
    return h->conn_limit;
}

void http_stop(struct http_server *h, int64_t grace_ms)
{
    int64_t deadline = now_mono_ns() + grace_ms * NS_PER_MS;
    atomic_store(&h->stopping, true);
    h->listen_fd = MHD_quiesce_daemon(h->daemon);
    sched_drain(h->sched);
    for (;;) {
        const union MHD_DaemonInfo *info =
            MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
        if (!info || info->num_connections == 0 || now_mono_ns() >= deadline)
            break;
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL); /* polling a count, bounded by the grace period */
    }
    MHD_stop_daemon(h->daemon);
    if (h->listen_fd != MHD_INVALID_SOCKET)
        close(h->listen_fd);
    free(h);
    srv = NULL;
}
