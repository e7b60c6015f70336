/* http.c -- libmicrohttpd glue (see http.h). --threads N libmicrohttpd worker threads (a
 * thread pool when N > 1; "Thread: worker" in the headers) run the handler and completion
 * callbacks, each connection always on the same worker, so a conn_state is touched by one
 * worker at a time; what they share below router.c is locked or atomic. Held requests are
 * suspended and resumed by the scheduler's timer thread. Invariants: a request is in the
 * scheduler at most once, and only while its connection is suspended; per-request memory is
 * freed only in on_completed; a suspended connection is always resumed before
 * MHD_stop_daemon (which would abort otherwise). */
#define _GNU_SOURCE
#include "http.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/tcp.h> /* struct tcp_info with tcpi_bytes_acked (glibc's lacks it) */
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "request.h"
#include "rng.h"
#include "router.h"

/* docs/edge-rules.md §7: the request line and header lines, with their line ends. */
#define HEADER_BLOCK_MAX 8192

/* libmicrohttpd's per-connection pool (default 32 KiB, all of it resident: it is zeroed). It holds
 * the read buffer the header block is parsed in, then the response headers. Measured here: 10 KiB
 * is the smallest size at which every block up to HEADER_BLOCK_MAX is answered by fakegate (200, or
 * its JSON 431 just above the cap) and never by libmicrohttpd's own 431 page; 10 000 held
 * connections then take ~3x less memory than with the default. Above the cap, libmicrohttpd 0.9.75
 * answers some sizes with nothing (docs/edge-rules.md "Known limits": a ~250-byte band is closed
 * without a byte, and up to 10 325 bytes no answer until the idle timeout); a larger pool only
 * moves those bands up, it does not remove them. */
#define CONNECTION_POOL_BYTES 10240

/* Transport state of a request, beside the handler's r->phase. One table for all of them:
 *
 *   state      entered when                         suspended  touched by       next
 *   HS_NEW     on_uri allocated it                  no         worker           BODY QUEUED DROP
 *   HS_BODY    the headers were accepted            no         worker           HELD QUEUED DROP
 *   HS_HELD    hold(): a queue or latency deadline  yes        timer            READY
 *   HS_READY   on_deadline ran the plan's step      resuming   worker           QUEUED DROP HANG
 *   HS_HANG    drop(): a hang fault holds it open   yes        timer            DROP
 *   HS_DROP    drop(): close without a byte         no         worker           (completion)
 *   HS_QUEUED  send_response queued the answer      drip only  worker, timer    (completion)
 * (NEW, BODY and READY may also go to HANG; a drip is suspended between its chunks.)
 *
 * Invariants: the scheduler holds at most one entry per connection, and only while it is
 * suspended (HELD, HANG, or a drip between chunks); the timer thread never touches cs after
 * MHD_resume_connection; on_completed alone frees cs and its request. */
enum http_state {
    HS_NEW = 0,
    HS_BODY,
    HS_HELD,
    HS_READY,
    HS_HANG,
    HS_DROP,
    HS_QUEUED
};

struct conn_state {
    struct http_server *srv;  /* the server it arrived on (libmicrohttpd's closure) */
    struct request *req;
    struct MHD_Connection *conn;
    enum http_state state;
    /* WIRE_DRIP pacing */
    int64_t drip_next_ns;   /* when the next chunk may go (monotonic) */
    int64_t drip_step_ns;
    size_t drip_chunk;      /* bytes per chunk */
    bool drip_waiting;      /* suspended until drip_next_ns */
    bool was_held;          /* it was suspended for a latency */
    /* The socket's counts when the answer was queued (tcp_counts), to tell at completion how
     * much of this answer the client's TCP took. */
    bool tcp_base;
    uint64_t tcp_sent0, tcp_acked0;
};

struct http_server {
    struct MHD_Daemon *daemon;
    struct gateway *gw;       /* borrowed: what the router dispatches to */
    struct sched *sched;
    const struct config *cfg;
    unsigned port;
    unsigned conn_limit;      /* MHD_OPTION_CONNECTION_LIMIT: --max-connections, at most... */
    unsigned conn_limit_fd;   /* ... what the open-files limit allows */
    uint64_t trace_salt;
    atomic_uint_fast64_t trace_seq;
    atomic_bool stopping;
    MHD_socket listen_fd;
    /* While MHD_start_daemon runs, libmicrohttpd's messages are kept here instead of printed
     * (it says "Failed to bind to port 0" for the port we asked for): http_start words the
     * failure itself, with the reason taken from the first message. */
    atomic_bool starting;
    char start_msg[256];
};

/* --- per-request state -------------------------------------------------------------------- */

/* First sight of a request: libmicrohttpd gives us the raw URI here (before decoding) and
 * uses our return value as the request's con_cls. on_completed frees it. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
    struct conn_state *cs = calloc(1, sizeof *cs);
    if (!cs)
        return NULL;
    cs->req = request_new();
    if (!cs->req) {
        free(cs);
        return NULL;
    }
    cs->conn = c;
    cs->srv = cls;
    cs->req->raw_uri = strdup(uri);
    cs->req->arrived_ns = now_mono_ns();
    cs->req->arrived_unix_us = now_unix_us();
    return cs;
}

/* The kernel's state of TCP connection `c`: bytes written to it, bytes the peer's TCP has
 * acknowledged (both since it opened) and whether it was reset (state TCP_CLOSE, 7 in the
 * kernel's include/net/tcp_states.h, while libmicrohttpd still holds it open: only a reset
 * gets it there; `reset` may be NULL). False if it cannot be read (not a TCP socket). */
#define TCP_STATE_CLOSE 7
static bool tcp_counts(struct MHD_Connection *c, uint64_t *sent, uint64_t *acked, bool *reset)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    struct tcp_info ti;
    socklen_t len = sizeof ti;
    memset(&ti, 0, sizeof ti);
    if (!ci || getsockopt(ci->connect_fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 ||
        len < offsetof(struct tcp_info, tcpi_bytes_sent) + sizeof ti.tcpi_bytes_sent)
        return false;
    *sent = ti.tcpi_bytes_sent;
    *acked = ti.tcpi_bytes_acked;
    if (reset)
        *reset = ti.tcpi_state == TCP_STATE_CLOSE;
    return true;
}

/* libmicrohttpd calls this before it shuts the socket down or reuses it, so the socket still
 * says what became of the answer: how much of it the client's TCP acknowledged, and whether it
 * reset the connection (a client that closed its socket resets what arrives after). On
 * loopback that answer comes within the write itself. */
static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    struct http_server *h = cls;
    struct conn_state *cs = *con_cls;
    if (!cs)
        return;
    uint64_t sent, acked;
    bool reset;
    if (cs->tcp_base && tcp_counts(c, &sent, &acked, &reset)) {
        cs->req->obs.tcp.known = true;
        cs->req->obs.tcp.reset = reset;
        cs->req->obs.tcp.sent_bytes = sent - cs->tcp_sent0;
        cs->req->obs.tcp.acked_bytes = acked - cs->tcp_acked0;
    }
    router_on_complete(h->gw, cs->req, toe == MHD_REQUEST_TERMINATED_COMPLETED_OK);
    request_free(cs->req);
    free(cs);
    *con_cls = NULL;
}

/* --- reading the request ------------------------------------------------------------------ */

struct header_scan {
    struct request *r;
    size_t block_len;
};

/* Header name `key` (klen bytes) is `lit`, case-insensitively. The length test first: most
 * headers of a request match none of the names below. */
#define HEADER_IS(key, klen, lit) ((klen) == sizeof(lit) - 1 && strcasecmp((key), (lit)) == 0)

static enum MHD_Result scan_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                   const char *value)
{
    (void)kind;
    struct header_scan *hs = cls;
    struct request *r = hs->r;
    size_t klen = strlen(key);
    hs->block_len += klen + 2 + (value ? strlen(value) : 0) + 2;
    if (!value)
        value = "";
    if (HEADER_IS(key, klen, "Authorization")) {
        if (!r->authorization)
            r->authorization = strdup(value);
    } else if (HEADER_IS(key, klen, "Idempotency-Key")) {
        r->idem_key_count++;
        if (!r->idem_key_raw)
            r->idem_key_raw = strdup(value);
    } else if (klen > 15 && strncasecmp(key, "Idempotency-Key", 15) == 0) {
        /* libmicrohttpd 0.9.75 appends a folded continuation line to the header's name, so a folded
         * Idempotency-Key arrives as "Idempotency-Key<continuation>" (docs/edge-rules.md §7: 400).
         */
        r->idem_key_count++;
        r->idem_key_folded = true;
    } else if (HEADER_IS(key, klen, "TossPayments-Test-Code")) {
        if (!r->test_code)
            r->test_code = strdup(value);
    } else if (HEADER_IS(key, klen, "X-Fakegate-Profile")) {
        if (r->ovr_profile)
            r->ovr_twice = "X-Fakegate-Profile";
        else
            r->ovr_profile = strdup(value);
    } else if (HEADER_IS(key, klen, "X-Fakegate-Tenant")) {
        if (r->ovr_tenant)
            r->ovr_twice = "X-Fakegate-Tenant";
        else
            r->ovr_tenant = strdup(value);
    } else if (HEADER_IS(key, klen, "X-Fakegate-Fault")) {
        if (r->ovr_fault)
            r->ovr_twice = "X-Fakegate-Fault";
        else
            r->ovr_fault = strdup(value);
    } else if (HEADER_IS(key, klen, "X-Fakegate-Latency-Ms")) {
        if (r->ovr_latency)
            r->ovr_twice = "X-Fakegate-Latency-Ms";
        else
            r->ovr_latency = strdup(value);
    } else if (HEADER_IS(key, klen, "Accept-Language")) {
        r->lang_en = strncasecmp(value, "en", 2) == 0;
    } else if (HEADER_IS(key, klen, "Content-Length")) {
        uint64_t n = strtoull(value, NULL, 10);
        if (r->has_content_length && n != r->content_length)
            r->framing_error = "Content-Length";
        r->has_content_length = true;
        r->content_length = n;
    } else if (HEADER_IS(key, klen, "Transfer-Encoding")) {
        /* libmicrohttpd 0.9.75 reads any other coding as a body until the connection closes:
         * the request would wait for ever. */
        if (strcasecmp(value, "chunked") != 0)
            r->framing_error = "Transfer-Encoding";
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
    copy_cstr(r->method_str, sizeof r->method_str, method);
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

static void trace_id(struct http_server *h, char out[33])
{
    static const char hex[] = "0123456789abcdef";
    uint64_t n = atomic_fetch_add(&h->trace_seq, 1);
    /* The low half is a bijection of the counter: unique per response within the process. */
    uint64_t w[2] = {mix64(h->trace_salt ^ n >> 20), mix64(n + h->trace_salt)};
    for (int i = 0; i < 32; i++)
        out[i] = hex[(w[i / 16] >> (60 - 4 * (i % 16))) & 15];
    out[32] = '\0';
}

/* WIRE_TRUNCATE: the status line, the headers (with the full Content-Length) and the first half
 * of the body, then the connection is closed. */
static ssize_t truncate_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct conn_state *cs = cls;
    const struct response *rs = &cs->req->resp;
    size_t cut = rs->body_len / 2;
    if (pos >= cut)
        return MHD_CONTENT_READER_END_WITH_ERROR;
    size_t n = cut - (size_t)pos < max ? cut - (size_t)pos : max;
    memcpy(buf, rs->body + pos, n);
    return (ssize_t)n;
}

static void on_drip_tick(void *arg, bool draining);

/* WIRE_DRIP: the headers at once, then a chunk every drip_step_ns, the last at wire_ms. Between
 * chunks the connection is suspended and the scheduler resumes it (a reader that returned 0
 * without suspending would spin). */
static ssize_t drip_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct conn_state *cs = cls;
    const struct response *rs = &cs->req->resp;
    if (pos >= rs->body_len)
        return MHD_CONTENT_READER_END_OF_STREAM;
    if (cs->drip_waiting)
        return 0;
    if (now_mono_ns() < cs->drip_next_ns) {
        cs->drip_waiting = true;
        MHD_suspend_connection(cs->conn);
        if (sched_add(cs->srv->sched, cs->drip_next_ns, on_drip_tick, cs) != 0)
            on_drip_tick(cs, true);
        return 0;
    }
    size_t n = rs->body_len - (size_t)pos;
    if (n > cs->drip_chunk)
        n = cs->drip_chunk;
    if (n > max)
        n = max;
    memcpy(buf, rs->body + pos, n);
    cs->drip_next_ns += cs->drip_step_ns;
    return (ssize_t)n;
}

static void on_drip_tick(void *arg, bool draining)
{
    struct conn_state *cs = arg;
    if (draining) { /* stopping: send the rest at once */
        cs->drip_next_ns = 0;
        cs->drip_chunk = SIZE_MAX;
    }
    cs->drip_waiting = false;
    MHD_resume_connection(cs->conn);
}

static void on_hang_end(void *arg, bool draining)
{
    (void)draining;
    struct conn_state *cs = arg;
    cs->state = HS_DROP;
    MHD_resume_connection(cs->conn);
}

/* Lose the response: close now (FIN), reset (RST), or hold the connection for wire_ms first. */
static enum MHD_Result drop(struct conn_state *cs)
{
    const struct response *rs = &cs->req->resp;
    cs->req->phase = PH_SENT;
    if (rs->wire == WIRE_RESET) {
        /* libmicrohttpd shuts the socket down (FIN) before closing it, which would turn
         * SO_LINGER 0 into a plain close. Disconnecting the socket first (connect with
         * AF_UNSPEC) makes Linux send the RST now; libmicrohttpd's own close then finds it
         * already reset. */
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(cs->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (ci) {
            struct linger lg = {1, 0};
            setsockopt(ci->connect_fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
            struct sockaddr unspec = {.sa_family = AF_UNSPEC};
            connect(ci->connect_fd, &unspec, sizeof unspec);
        }
    } else if (rs->wire == WIRE_HANG && cs->state != HS_DROP) {
        MHD_suspend_connection(cs->conn);
        cs->state = HS_HANG;
        int64_t until = now_mono_ns() + (int64_t)(rs->wire_ms * (double)NS_PER_MS);
        if (sched_add(cs->srv->sched, until, on_hang_end, cs) != 0)
            on_hang_end(cs, true);
        return MHD_YES;
    }
    cs->state = HS_DROP;
    return MHD_NO; /* libmicrohttpd closes the connection without sending anything */
}

/* Has the client finished sending: end-of-file (or a reset) waiting on the socket? It may be
 * gone, or only have half-closed and be reading (shutdown(SHUT_WR)): the two look the same
 * here. Either way it sends nothing more, so its answer says Connection: close and
 * libmicrohttpd closes after sending it; on a keep-alive connection it would wait for the
 * client's next request until --idle-timeout, as it never sees an end-of-file that arrived with
 * the request (its epoll is edge-triggered, and the read that took the request took the edge). */
static bool client_done_sending(struct conn_state *cs)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(cs->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci)
        return false;
    char c;
    ssize_t n = recv(ci->connect_fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

static enum MHD_Result send_response(struct conn_state *cs)
{
    struct request *r = cs->req;
    struct response *rs = &r->resp;
    bool client_done = client_done_sending(cs);
    r->obs.client_done = client_done;
    router_on_send(cs->srv->gw, r);
    if (rs->wire == WIRE_CLOSE || rs->wire == WIRE_RESET || rs->wire == WIRE_HANG)
        return drop(cs);
    if (!rs->body) {
        request_error(r, "FAILED_INTERNAL_SYSTEM_PROCESSING", NULL);
        if (!rs->body)
            return MHD_NO;
    }
    struct MHD_Response *resp;
    if (rs->wire == WIRE_TRUNCATE) {
        resp = MHD_create_response_from_callback(rs->body_len, 4096, truncate_reader, cs, NULL);
    } else if (rs->wire == WIRE_DRIP && rs->body_len > 0) {
        size_t chunks = (size_t)(rs->wire_ms / 50);
        if (chunks < 1)
            chunks = 1;
        if (chunks > rs->body_len)
            chunks = rs->body_len;
        cs->drip_chunk = (rs->body_len + chunks - 1) / chunks;
        cs->drip_step_ns = (int64_t)(rs->wire_ms * (double)NS_PER_MS) / (int64_t)chunks;
        cs->drip_next_ns = now_mono_ns() + cs->drip_step_ns;
        resp = MHD_create_response_from_callback(rs->body_len, 4096, drip_reader, cs, NULL);
    } else {
        resp = MHD_create_response_from_buffer(rs->body_len, rs->body, MHD_RESPMEM_MUST_FREE);
        if (resp)
            rs->body = NULL; /* the response owns it now */
    }
    if (!resp)
        return MHD_NO;
    trace_id(cs->srv, rs->trace_id); /* kept in the response: the journal shows it */
    if (!rs->content_type)
        MHD_add_response_header(resp, "Content-Type", "application/json");
    else if (rs->content_type[0])
        MHD_add_response_header(resp, "Content-Type", rs->content_type);
    MHD_add_response_header(resp, "x-tosspayments-trace-id", rs->trace_id);
    MHD_add_response_header(resp, "Cache-Control", "no-cache, no-store, max-age=0, must-revalidate");
    if (rs->retry_after[0])
        MHD_add_response_header(resp, "Retry-After", rs->retry_after);
    if (rs->allow)
        MHD_add_response_header(resp, "Allow", rs->allow);
    if (rs->close || client_done || rs->wire == WIRE_TRUNCATE || atomic_load(&cs->srv->stopping))
        MHD_add_response_header(resp, "Connection", "close");
    if (cs->was_held) /* back from HELD_TIMEOUT_S (see hold) */
        MHD_set_connection_option(cs->conn, MHD_CONNECTION_OPTION_TIMEOUT,
                                  cs->srv->cfg->idle_timeout_s);
    /* The socket's counts only where a client can have left unnoticed: it had finished sending,
     * or its answer was held. For a client still sending, libmicrohttpd's report decides
     * (skipping the two getsockopt calls for those answers: +7 % confirm throughput, wrk). */
    cs->tcp_base = (client_done || cs->was_held) &&
                   tcp_counts(cs->conn, &cs->tcp_sent0, &cs->tcp_acked0, NULL);
    r->obs.sent_ns = now_mono_ns();
    enum MHD_Result ret = MHD_queue_response(cs->conn, (unsigned)rs->status, resp);
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
    enum handler_result h = router_on_deadline(cs->srv->gw, cs->req, draining);
    if (h == H_HOLD) {
        if (sched_add(cs->srv->sched, cs->req->hold_until_ns, on_deadline, cs) == 0)
            return;
        /* the scheduler is draining: finish now */
        h = router_on_deadline(cs->srv->gw, cs->req, true);
    }
    cs->state = HS_READY;
    MHD_resume_connection(cs->conn);
}

/* The resumed connection's answer must be queued before libmicrohttpd 0.9.75 reads from its
 * socket again. It suspends a request in its final call with the event-loop state of the body
 * read still at "read" (MHD_connection_update_event_loop_info returns early for a suspended
 * connection), marks it read-ready on resume (resume_suspended_connections), and call_handlers
 * then reads before it calls the handler: a client that half-closed after its request (FIN
 * waiting) makes that read return 0, and MHD_connection_handle_read closes a connection in
 * FULL_REQ_RECEIVED (MHD_REQUEST_TERMINATED_WITH_ERROR) without sending the answer the plan has
 * just committed. MHD_epoll, though, runs MHD_connection_handle_idle on every connection of its
 * manual-timeout list before call_handlers, and a resumed connection joins that list when its
 * timeout is not the daemon's: it is then given one, HELD_TIMEOUT_S, while held, and the daemon's
 * own back when its answer is queued (send_response), in the same turn. One more second than
 * --idle-timeout's largest value, so never the daemon's, and never reached in that turn. */
#define HELD_TIMEOUT_S 86401U

static enum MHD_Result hold(struct conn_state *cs)
{
    assert(cs->state == HS_BODY); /* in the scheduler only while suspended, at most once */
    MHD_set_connection_option(cs->conn, MHD_CONNECTION_OPTION_TIMEOUT, HELD_TIMEOUT_S);
    MHD_suspend_connection(cs->conn);
    cs->state = HS_HELD;
    cs->was_held = true;
    if (sched_add(cs->srv->sched, cs->req->hold_until_ns, on_deadline, cs) != 0)
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
        if (router_on_headers(cs->srv->gw, r) == H_RESPOND) {
            /* libmicrohttpd discards a pending body and closes after this reply: say so. */
            if ((r->has_content_length && r->content_length > 0) || r->chunked)
                r->resp.close = true;
            return send_response(cs);
        }
        cs->state = HS_BODY;
        return MHD_YES; /* libmicrohttpd sends 100 Continue now if asked */
    case HS_BODY:
        if (*upload_data_size > 0) {
            size_t n = *upload_data_size;
            if (!r->body_too_large && r->body.len + n <= cs->srv->cfg->max_body) {
                if (r->body.cap == 0 && r->has_content_length &&
                    r->content_length <= cs->srv->cfg->max_body)
                    buf_reserve(&r->body, (size_t)r->content_length); /* one exact allocation */
                buf_add(&r->body, upload_data, n);
            } else {
                r->body_too_large = true; /* keep reading, discard (docs/api.md §2) */
            }
            *upload_data_size = 0;
            return MHD_YES;
        }
        r->received_ns = now_mono_ns();
        switch (router_on_body(cs->srv->gw, r)) {
        case H_HOLD:
            return hold(cs);
        case H_RESPOND:
        case H_CONTINUE:
            break;
        }
        return send_response(cs);
    case HS_READY:
        return send_response(cs);
    case HS_DROP:
        return drop(cs);
    case HS_HELD:
    case HS_HANG:
    case HS_QUEUED:
        *upload_data_size = 0;
        return MHD_YES;
    }
    return MHD_NO;
}

/* A printf-like logger (libmicrohttpd's format, its arguments): saying so lets clang's
 * -Wformat-nonliteral accept the format passed on to vsnprintf and vfprintf. */
__attribute__((format(printf, 2, 0))) static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    struct http_server *h = cls;
    if (atomic_load(&h->starting)) {
        /* MHD_start_daemon's own thread: workers have served nothing yet. http_start reads it
         * only after a failed start, when no worker is left. */
        if (h->start_msg[0] == '\0')
            vsnprintf(h->start_msg, sizeof h->start_msg, fmt, ap);
        return;
    }
    if (h->cfg->quiet)
        return;
    /* Locked, so lines from different worker threads never interleave. */
    flockfile(stderr);
    fputs("fakegate: libmicrohttpd: ", stderr);
    vfprintf(stderr, fmt, ap);
    funlockfile(stderr);
}

/* The reason in libmicrohttpd's start-up message "Failed to bind to port 0: Address already in
 * use\n": the text after its last ": ", without the newline; "" if there is none. */
static void start_reason(const char *msg, char *out, size_t size)
{
    const char *r = NULL;
    for (const char *p = strstr(msg, ": "); p; p = strstr(p + 2, ": "))
        r = p + 2;
    snprintf(out, size, "%.*s", r ? (int)strcspn(r, "\r\n") : 0, r ? r : "");
}

/* --- the 128-event stall (libmicrohttpd 0.9.75) ------------------------------------------- */

/* libmicrohttpd 0.9.75's epoll loop (MHD_epoll in daemon.c) reads at most 128 events per
 * epoll_wait and, when it got exactly 128, calls epoll_wait again, with the same blocking
 * timeout, before it handles any of them. When exactly 128 connections of one worker became
 * readable together and nothing else follows, their requests wait for the next event on that
 * worker: up to the idle timeout, after which libmicrohttpd closes some of them unanswered.
 * Reproduced here with one worker: 128 keep-alive connections each send a confirm while the
 * process is stopped (SIGSTOP/SIGCONT), and none is answered within 3 s (without this
 * workaround, 127 or 129 were all answered within 4 ms); in the bench, 128 of 1000 held
 * connections answered 2 s late. The workaround: while 128 or more connections are open, wake
 * every worker every POKE_INTERVAL_MS by handing it a connection whose peer is already closed
 * (a socketpair end; MHD_add_connection signals the worker's inter-thread channel, and the
 * connection ends at its first read, before any request: no handler, no journal entry). A
 * stall then lasts at most about POKE_INTERVAL_MS (a poke can itself be the 128th event: 127
 * ready requests plus one poke waited ~52 ms in a trial). The pokes are a recurring entry of the
 * scheduler's timer thread; they end when sched_drain runs in http_stop, so a stall in the
 * shutdown grace period lasts until its deadline. */
#define POKE_INTERVAL_MS 50
#define POKE_MIN_CONNECTIONS 128

int http_closed_socket_for(unsigned w, unsigned n)
{
    int sv[2];
    if (n == 0 || w >= n || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return -1;
    /* Either end will do (the other is closed, so a reader gets end-of-file); if neither has
     * the right remainder, duplicate one onto a free descriptor that has. */
    if ((unsigned)sv[0] % n == w) {
        close(sv[1]);
        return sv[0];
    }
    if ((unsigned)sv[1] % n == w) {
        close(sv[0]);
        return sv[1];
    }
    close(sv[1]);
    int fd = -1;
    int want = sv[0] + (int)((w + n - (unsigned)sv[0] % n) % n);
    for (int tries = 0; tries < 4 && fd < 0; tries++, want += (int)n) {
        int d = fcntl(sv[0], F_DUPFD_CLOEXEC, want); /* the lowest free one >= want */
        if (d < 0)
            break;
        if ((unsigned)d % n == w)
            fd = d;
        else
            close(d); /* taken meanwhile by another thread */
    }
    close(sv[0]);
    return fd;
}

/* Wake worker `w` of `n`: libmicrohttpd 0.9.75 gives an added socket to worker fd % n (while
 * that worker is below its connection limit) and signals its inter-thread channel. */
static void poke_worker(struct http_server *h, unsigned w, unsigned n)
{
    int fd = http_closed_socket_for(w, n);
    if (fd < 0)
        return; /* the next round tries again */
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    MHD_add_connection(h->daemon, fd, (const struct sockaddr *)&sun, sizeof(sa_family_t));
    /* On failure libmicrohttpd has closed fd ("The socket will be closed in any case"). */
}

/* The timer thread, every POKE_INTERVAL_MS: poke every worker while POKE_MIN_CONNECTIONS or
 * more connections are open, then re-arm. Not once the server is stopping. */
static void on_poke_tick(void *arg, bool draining)
{
    struct http_server *h = arg;
    if (draining || atomic_load(&h->stopping))
        return;
    const union MHD_DaemonInfo *info =
        MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
    if (info && info->num_connections >= POKE_MIN_CONNECTIONS) {
        unsigned n = h->cfg->threads > 1 ? h->cfg->threads : 1;
        for (unsigned w = 0; w < n; w++)
            poke_worker(h, w, n);
    }
    sched_add(h->sched, now_mono_ns() + POKE_INTERVAL_MS * NS_PER_MS, on_poke_tick, h);
}

/* --- start / stop ------------------------------------------------------------------------- */

unsigned http_connection_limit_for(unsigned nofile, unsigned max_connections)
{
    /* Keep descriptors for the listen socket, epoll, the ITC pipe, files and logs. */
    unsigned fd_limit = nofile > 128 ? nofile - 64 : nofile / 2;
    return max_connections && max_connections < fd_limit ? max_connections : fd_limit;
}

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

struct http_server *http_start(const struct config *cfg, struct sched *s, struct gateway *gw,
                               uint64_t trace_salt, char *err, size_t err_len)
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
    h->gw = gw;
    h->cfg = cfg;
    h->trace_salt = trace_salt;
    unsigned nofile = raise_nofile();
    h->conn_limit_fd = http_connection_limit_for(nofile, 0);
    h->conn_limit = http_connection_limit_for(nofile, cfg->max_connections);

    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
                     MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    /* One thread: the plain internal polling thread (libmicrohttpd warns about a pool of 1). */
    struct MHD_OptionItem pool[] = {{MHD_OPTION_THREAD_POOL_SIZE, (intptr_t)cfg->threads, NULL},
                                    {MHD_OPTION_END, 0, NULL}};
    atomic_store(&h->starting, true);
    h->daemon = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, h, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, (void *)h,
        MHD_OPTION_ARRAY, cfg->threads > 1 ? pool : pool + 1,
        MHD_OPTION_SOCK_ADDR, ai->ai_addr,
        MHD_OPTION_CONNECTION_LIMIT, h->conn_limit, MHD_OPTION_CONNECTION_TIMEOUT,
        cfg->idle_timeout_s, MHD_OPTION_LISTEN_BACKLOG_SIZE, 4096U,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONNECTION_POOL_BYTES,
        MHD_OPTION_NOTIFY_COMPLETED,
        on_completed, h, MHD_OPTION_URI_LOG_CALLBACK, on_uri, h, MHD_OPTION_END);
    freeaddrinfo(ai);
    atomic_store(&h->starting, false);
    if (!h->daemon) {
        char why[200];
        start_reason(h->start_msg, why, sizeof why);
        snprintf(err, err_len,
                 "cannot listen on %s%s%s:%u: %s", strchr(cfg->host, ':') ? "[" : "", cfg->host,
                 strchr(cfg->host, ':') ? "]" : "", cfg->port,
                 why[0] ? why : "port in use, or the address is not on this host");
        free(h);
        return NULL;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_BIND_PORT);
    h->port = info ? info->port : cfg->port;
    sched_add(s, now_mono_ns() + POKE_INTERVAL_MS * NS_PER_MS, on_poke_tick, h);
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

unsigned http_connection_limit_fd(const struct http_server *h)
{
    return h->conn_limit_fd;
}

void http_stop(struct http_server *h, int64_t grace_ms)
{
    int64_t deadline = now_mono_ns() + grace_ms * NS_PER_MS;
    atomic_store(&h->stopping, true); /* the poke tick stops re-arming */
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
}
