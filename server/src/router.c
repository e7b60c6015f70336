/* router.c -- routing and the checks shared by /v1 routes (see router.h). Order (SPEC §4):
 * route (404/405) → auth → 413 by Content-Length → body → Idempotency-Key → the handler. */
#define _DEFAULT_SOURCE /* timegm */
#include "router.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "admin.h"
#include "common.h"
#include "live.h"
#include "override.h"
#include "throttle.h"

static struct gateway *gw;

void router_init(struct gateway *g)
{
    gw = g;
}

char *base64_decode_strict(const char *in, size_t *out_len)
{
    size_t total = strlen(in), n = total;
    while (n > 0 && in[n - 1] == '=' && total - n < 2)
        n--;
    /* Unpadded input may end in 2 or 3 characters; padded input must be whole quads. */
    if (n % 4 == 1 || (total > n && total % 4 != 0))
        return NULL;
    char *out = malloc(n / 4 * 3 + 3);
    if (!out)
        return NULL;
    uint32_t acc = 0;
    int bits = 0;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char c = in[i];
        int v;
        if (c >= 'A' && c <= 'Z')
            v = c - 'A';
        else if (c >= 'a' && c <= 'z')
            v = c - 'a' + 26;
        else if (c >= '0' && c <= '9')
            v = c - '0' + 52;
        else if (c == '+')
            v = 62;
        else if (c == '/')
            v = 63;
        else {
            free(out);
            return NULL;
        }
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (char)((acc >> bits) & 0xff);
        }
    }
    out[o] = '\0';
    *out_len = o;
    return out;
}

/* Authorization: Basic base64(secretKey + ":") (SPEC §2). */
static bool authenticate(struct request *r)
{
    if (!r->authorization) {
        request_error(r, "UNAUTHORIZED_KEY", NULL);
        return false;
    }
    const char *h = r->authorization;
    if (strncmp(h, "Basic ", 6) != 0) {
        request_error(r, "INCORRECT_BASIC_AUTH_FORMAT", NULL);
        return false;
    }
    h += 6;
    while (*h == ' ')
        h++;
    size_t len;
    char *dec = base64_decode_strict(h, &len);
    char *colon = dec ? memchr(dec, ':', len) : NULL;
    if (!colon || memchr(dec, '\0', len)) {
        free(dec);
        request_error(r, "INCORRECT_BASIC_AUTH_FORMAT", NULL);
        return false;
    }
    *colon = '\0';
    const struct config *cfg = gw->cfg;
    bool ok = false;
    if (cfg->n_secret_keys == 0) {
        ok = strncmp(dec, "test_sk_", 8) == 0 || strncmp(dec, "test_gsk_", 9) == 0;
    } else {
        for (size_t i = 0; i < cfg->n_secret_keys && !ok; i++)
            ok = strcmp(dec, cfg->secret_keys[i]) == 0;
    }
    if (!ok) {
        free(dec);
        request_error(r, "UNAUTHORIZED_KEY", NULL);
        return false;
    }
    r->secret_key = dec;
    return true;
}

/* Idempotency-Key: visible ASCII, at most 300 bytes after trimming surrounding spaces, one
 * header (SPEC §3, §7). Sets r->idem_key; false (with resp set) if invalid. */
static bool check_idem_key(struct request *r)
{
    if (r->idem_key_count == 0 || r->method == HM_GET)
        return true;
    const char *s = r->idem_key_raw ? r->idem_key_raw : "";
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    bool ok = r->idem_key_count == 1 && !r->idem_key_folded && n > 0 && n <= 300;
    for (size_t i = 0; ok && i < n; i++)
        ok = (unsigned char)s[i] >= 0x21 && (unsigned char)s[i] <= 0x7e;
    if (!ok) {
        const char *ko = n > 300 ? NULL : "멱등키는 1자 이상 300자 이하의 출력 가능한 ASCII 문자여야 합니다.";
        const char *en = n > 300 ? NULL
                                 : "The Idempotency-Key must be 1 to 300 visible ASCII characters "
                                   "in a single header.";
        request_error(r, "INVALID_IDEMPOTENCY_KEY", r->lang_en ? en : ko);
        return false;
    }
    r->idem_key = strndup(s, n);
    return r->idem_key != NULL;
}

/* The raw path may not hide a '/' or a NUL inside a key (SPEC §7 "Bytes on the wire"). */
static bool raw_path_ok(const char *raw)
{
    for (const char *p = raw; *p && *p != '?'; p++)
        if (p[0] == '%' && (p[1] == '2' && (p[2] == 'f' || p[2] == 'F')))
            return false;
        else if (p[0] == '%' && p[1] == '0' && p[2] == '0')
            return false;
    return true;
}

static enum handler_result method_not_allowed(struct request *r, const char *allow)
{
    request_error(r, "METHOD_NOT_ALLOWED", NULL);
    r->resp.allow = allow;
    return H_RESPOND;
}

static enum handler_result not_found(struct request *r)
{
    request_error(r, "NOT_FOUND", NULL);
    return H_RESPOND;
}

/* Set r->kind, r->route, r->path_param; or answer 404/405. */
static enum handler_result route(struct request *r)
{
    const char *p = r->path;
    if (!raw_path_ok(r->raw_uri ? r->raw_uri : p))
        return not_found(r);
    if (strcmp(p, "/healthz") == 0 || strcmp(p, "/__admin/health") == 0) {
        if (r->method != HM_GET && r->method != HM_HEAD)
            return method_not_allowed(r, "GET");
        r->kind = RK_HEALTH;
        return H_CONTINUE;
    }
    if (strcmp(p, "/__admin/payments") == 0) {
        if (r->method != HM_GET)
            return method_not_allowed(r, "GET");
        r->kind = RK_ADMIN_PAYMENTS;
        return H_CONTINUE;
    }
    if (strcmp(p, "/__admin/profile") == 0) {
        if (r->method != HM_GET && r->method != HM_PUT)
            return method_not_allowed(r, "GET, PUT");
        r->kind = RK_ADMIN_PROFILE;
        return H_CONTINUE;
    }
    static const struct {
        const char *path;
        enum http_method method;
        const char *allow;
        enum route_kind kind;
    } fixed[] = {{"/__admin/reset", HM_POST, "POST", RK_ADMIN_RESET},
                 {"/__admin/requests", HM_GET, "GET", RK_ADMIN_REQUESTS},
                 {"/__admin/report", HM_GET, "GET", RK_ADMIN_REPORT},
                 {"/metrics", HM_GET, "GET", RK_METRICS}};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        if (strcmp(p, fixed[i].path) == 0) {
            if (r->method != fixed[i].method)
                return method_not_allowed(r, fixed[i].allow);
            r->kind = fixed[i].kind;
            return H_CONTINUE;
        }
    if (strcmp(p, "/__admin/sessions") == 0) {
        if (r->method != HM_POST)
            return method_not_allowed(r, "POST");
        r->kind = RK_ADMIN_SESSIONS;
        return H_CONTINUE;
    }
    if (strcmp(p, "/v1/transactions") == 0) {
        if (r->method != HM_GET)
            return method_not_allowed(r, "GET");
        r->kind = RK_TRANSACTIONS;
        r->route = ROUTE_READ;
        return H_CONTINUE;
    }
    static const char prefix[] = "/v1/payments/";
    if (strncmp(p, prefix, sizeof prefix - 1) != 0)
        return not_found(r);
    const char *rest = p + sizeof prefix - 1;
    if (strcmp(rest, "confirm") == 0) {
        if (r->method == HM_POST) {
            r->kind = RK_CONFIRM;
            r->route = ROUTE_CONFIRM;
            return H_CONTINUE;
        }
        if (r->method != HM_GET)
            return method_not_allowed(r, "GET, POST");
        /* GET /v1/payments/confirm reads a payment whose key is "confirm". */
    }
    if (strncmp(rest, "orders/", 7) == 0 && rest[7] && !strchr(rest + 7, '/')) {
        if (r->method != HM_GET)
            return method_not_allowed(r, "GET");
        r->kind = RK_GET_ORDER;
        r->route = ROUTE_READ;
        r->path_param = strdup(rest + 7);
        return r->path_param ? H_CONTINUE : not_found(r);
    }
    const char *slash = strchr(rest, '/');
    if (slash && slash > rest && strcmp(slash, "/cancel") == 0) {
        if (r->method != HM_POST)
            return method_not_allowed(r, "POST");
        r->kind = RK_CANCEL;
        r->route = ROUTE_CANCEL;
        r->path_param = strndup(rest, (size_t)(slash - rest));
        return r->path_param ? H_CONTINUE : not_found(r);
    }
    if (*rest && !slash) {
        if (r->method != HM_GET)
            return method_not_allowed(r, strcmp(rest, "confirm") == 0 ? "GET, POST" : "GET");
        r->kind = RK_GET_PAYMENT;
        r->route = ROUTE_READ;
        r->path_param = strdup(rest);
        return r->path_param ? H_CONTINUE : not_found(r);
    }
    return not_found(r);
}

/* Throttle, then the concurrency cap, decided on the headers (SPEC §4), under the profile state
 * in force now; an admitted request is counted in flight until router_on_complete. */
static bool admit(struct request *r)
{
    int64_t now = now_mono_ns(), since;
    struct live *root = atomic_load(&gw->live);
    char err[ERR_LEN];
    if (r->ovr_twice) { /* which one wins would be a guess: say so */
        char msg[96];
        snprintf(msg, sizeof msg, "%s: sent twice; send it once", r->ovr_twice);
        request_error(r, "INVALID_REQUEST", msg);
        r->outcome = OUT_INVALID;
        return false;
    }
    if (r->ovr_profile && !(root = gateway_named_live(gw, r->ovr_profile, err))) {
        char msg[ERR_LEN + 64];
        snprintf(msg, sizeof msg, "X-Fakegate-Profile: %s", err);
        request_error(r, "INVALID_REQUEST", msg);
        r->outcome = OUT_INVALID;
        return false;
    }
    if ((r->ovr_fault && override_fault_parse(r->ovr_fault, &r->ovr_fault_profile, err) != 0) ||
        (r->ovr_latency && override_latency_parse(r->ovr_latency, &r->ovr_latency_ms, err) != 0)) {
        request_error(r, "INVALID_REQUEST", err);
        r->outcome = OUT_INVALID;
        return false;
    }
    struct live *cur = live_current(root, now, &since);
    struct admission a;
    live_admit(cur, since, &gw->flight, r->route, now, &a);
    if (a.result == ADMIT_THROTTLED) {
        const struct throttle *t = a.throttle;
        char ra[64] = "";
        retry_after_format(&t->retry_after, a.retry_after_auto_s, now_unix_us() / 1000000, ra,
                           sizeof ra);
        request_reject(r, t->status, t->code ? t->code : "SERVICE_UNAVAILABLE", NULL, t->body, ra);
        r->outcome = OUT_THROTTLED;
        atomic_fetch_add(&gw->metrics.throttled[r->route], 1);
        return false;
    }
    if (a.result == ADMIT_CAPPED) {
        const struct concurrency *c = a.cap;
        request_reject(r, c->status, c->code ? c->code : "SERVICE_UNAVAILABLE", NULL, BODY_JSON,
                       "");
        r->outcome = OUT_CAPPED;
        return false;
    }
    r->in_flight = true;
    r->live = cur;
    /* SPEC §4 Determinism: --seed, or "seed" in the profile; a profile applied at run time
     * (PUT, reset, X-Fakegate-Profile) brings its seed with it. */
    r->seed = !gw->cfg->has_seed && root->profile->has_seed ? root->profile->seed : gw->seed;
    r->generation = gateway_generation(gw);
    return true;
}

/* The Retry-After fakegate sent, as whole seconds from now_s (Unix seconds): its digits, or
 * for an HTTP-date ("Sun, 06 Nov 1994 08:49:37 GMT", as throttle.c writes it) the seconds
 * until then, rounded up; 0 for anything else (a raw value) or a date already past. For the
 * report's early_retry. */
static uint32_t retry_after_seconds(const char *v, int64_t now_s)
{
    size_t digits = strspn(v, "0123456789");
    if (digits > 0 && digits < 10 && !v[digits])
        return (uint32_t)strtoul(v, NULL, 10);
    static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
    char mon[4];
    int d, y, h, mi, s, n = 0;
    if (sscanf(v, "%*3[A-Za-z], %2d %3[A-Za-z] %4d %2d:%2d:%2d GMT%n", &d, mon, &y, &h, &mi, &s,
               &n) != 6 || v[n] != '\0')
        return 0;
    const char *m = strstr(months, mon);
    if (!m || (m - months) % 3 != 0)
        return 0;
    struct tm tm = {.tm_year = y - 1900, .tm_mon = (int)(m - months) / 3, .tm_mday = d,
                    .tm_hour = h, .tm_min = mi, .tm_sec = s};
    int64_t at = (int64_t)timegm(&tm);
    return at > now_s ? (uint32_t)(at - now_s) : 0;
}

void router_on_complete(struct request *r, bool completed_ok)
{
    if (r->in_flight)
        flight_end(&gw->flight, r->route);
    r->in_flight = false;
    struct metrics *m = &gw->metrics;
    if (!r->journaled) {
        atomic_fetch_add(&m->admin_requests, 1);
        return;
    }
    const struct response *rs = &r->resp;
    bool lost = rs->wire == WIRE_CLOSE || rs->wire == WIRE_RESET || rs->wire == WIRE_HANG;
    struct journal_entry e = {.ended_mono_ns = now_mono_ns(), .sent_mono_ns = r->sent_ns,
                              .status = lost ? 0 : rs->status, .code = lost ? NULL : rs->code,
                              .outcome = r->outcome, .queue_latency_ms = r->queue_latency_ms,
                              .latency_ms = r->latency_ms, .key_reuse = r->key_reuse,
                              .committed = r->committed};
    if (!lost && rs->retry_after[0])
        e.retry_after_s = retry_after_seconds(rs->retry_after, now_unix_us() / 1000000);
    if (lost || r->client_gone)
        e.delivered = DELIVERED_NO;
    else if (rs->wire == WIRE_TRUNCATE)
        e.delivered = DELIVERED_PARTIAL;
    else if (completed_ok)
        e.delivered = DELIVERED_YES;
    else
        e.delivered = r->sent_ns ? DELIVERED_PARTIAL : DELIVERED_NO;
    journal_update(&gw->journal, r->journal_id, &e);
    if (!gw->cfg->quiet) {
        e.arrived_unix_us = r->arrived_unix_us;
        e.arrived_mono_ns = r->arrived_ns;
        snprintf(e.method, sizeof e.method, "%s", r->method_str);
        e.path = r->raw_uri ? r->raw_uri : r->path;
        e.route = (int)r->route;
        e.order_id = r->order_id ? r->order_id
                                 : (r->kind == RK_GET_ORDER ? r->path_param : NULL);
        e.idempotency_key = r->idem_key ? r->idem_key : r->idem_key_raw;
        e.fault = fault_kind_name(r->fault ? r->fault->kind : FAULT_NONE);
        struct buf line;
        buf_init(&line);
        journal_log_line(&line, &e, gw->cfg->log_json);
        if (line.data)
            fwrite(line.data, 1, line.len, stderr);
        buf_fini(&line);
    }
    if (r->straddled_reset)
        return; /* its journal entry and counters were emptied by the reset: it is not counted
                   into the new ones */
    atomic_fetch_add(&m->requests[r->route][r->outcome], 1);
    if (r->outcome == OUT_REPLAYED)
        atomic_fetch_add(&m->replays, 1);
    if (r->outcome == OUT_CONFLICT)
        atomic_fetch_add(&m->conflicts, 1);
    if (r->key_reuse)
        atomic_fetch_add(&m->key_reuse, 1);
    if (r->planned) /* what was really injected: the queue, and the latency if it got there */
        metrics_observe_latency(m, r->queue_latency_ms + (r->latency_spent ? r->latency_ms : 0));
}

/* Admin, health and metrics calls: never journaled, delayed or faulted (SPEC §5). */
static bool is_admin_path(const char *p)
{
    return strncmp(p, "/__admin/", 9) == 0 || strcmp(p, "/__admin") == 0 ||
           strcmp(p, "/healthz") == 0 || strcmp(p, "/metrics") == 0;
}

/* --admin-token: every /__admin route but /__admin/health needs "Authorization: Bearer T". */
static bool admin_authorized(const struct request *r)
{
    const char *t = gw->cfg->admin_token;
    if (!t || strncmp(r->path, "/__admin/", 9) != 0 || strcmp(r->path, "/__admin/health") == 0)
        return true;
    const char *h = r->authorization;
    return h && strncmp(h, "Bearer ", 7) == 0 && strcmp(h + 7, t) == 0;
}

static enum handler_result on_headers(struct request *r);

enum handler_result router_on_headers(struct request *r)
{
    if (r->path && is_admin_path(r->path)) {
        if (!admin_authorized(r)) {
            request_error(r, "UNAUTHORIZED", NULL);
            return H_RESPOND;
        }
        return on_headers(r);
    }
    r->journaled = true;
    enum handler_result h = on_headers(r);
    if (h == H_RESPOND && r->outcome == OUT_OK)
        r->outcome = OUT_INVALID; /* 404, 405, 413, 431, TE with CL */
    struct journal_entry e = {.arrived_unix_us = r->arrived_unix_us,
                              .arrived_mono_ns = r->arrived_ns,
                              .path = r->raw_uri ? r->raw_uri : r->path,
                              .route = (int)r->route,
                              .idempotency_key = r->idem_key_raw, /* the identity of a request
                                                                     refused before its body */
                              .fault = "none"};
    snprintf(e.method, sizeof e.method, "%s", r->method_str);
    r->journal_id = journal_begin(&gw->journal, &e);
    return h;
}

static enum handler_result on_headers(struct request *r)
{
    if (r->header_too_large) {
        request_error(r, "REQUEST_HEADER_FIELDS_TOO_LARGE", NULL);
        r->resp.close = true;
        return H_RESPOND;
    }
    if (r->framing_error) {
        bool cl = strcmp(r->framing_error, "Content-Length") == 0;
        request_error(r, "INVALID_REQUEST",
                      cl ? (r->lang_en ? "Content-Length is sent twice with different values."
                                       : "Content-Length가 서로 다른 값으로 두 번 왔습니다.")
                         : (r->lang_en ? "Transfer-Encoding other than chunked is not supported."
                                       : "Transfer-Encoding은 chunked만 지원합니다."));
        r->resp.close = true;
        return H_RESPOND;
    }
    if (r->chunked && r->has_content_length) {
        request_error(r, "INVALID_REQUEST",
                      r->lang_en ? "Transfer-Encoding and Content-Length must not both be sent."
                                 : "Transfer-Encoding와 Content-Length를 함께 보낼 수 없습니다.");
        r->resp.close = true;
        return H_RESPOND;
    }
    enum handler_result h = route(r);
    if (h != H_CONTINUE)
        return h;
    bool v1 = r->kind == RK_CONFIRM || r->kind == RK_GET_PAYMENT || r->kind == RK_GET_ORDER ||
              r->kind == RK_CANCEL || r->kind == RK_TRANSACTIONS;
    if (!v1)
        r->route = ROUTE_DEFAULT;
    if (v1 && !authenticate(r)) {
        r->outcome = OUT_UNAUTHORIZED;
        return H_RESPOND;
    }
    if (v1 && !admit(r))
        return H_RESPOND;
    if (r->has_content_length && r->content_length > gw->cfg->max_body) {
        char ko[160], en[160];
        snprintf(ko, sizeof ko, "요청 본문이 너무 큽니다. (최대 %zu 바이트)", gw->cfg->max_body);
        snprintf(en, sizeof en, "The request body is larger than %zu bytes.", gw->cfg->max_body);
        request_error(r, "INVALID_REQUEST", r->lang_en ? en : ko);
        r->resp.status = 413;
        r->resp.close = true;
        return H_RESPOND;
    }
    return H_CONTINUE;
}

enum handler_result router_on_body(struct request *r)
{
    if (r->body_too_large) {
        r->outcome = OUT_INVALID;
        char ko[160], en[160];
        snprintf(ko, sizeof ko, "요청 본문이 너무 큽니다. (최대 %zu 바이트)", gw->cfg->max_body);
        snprintf(en, sizeof en, "The request body is larger than %zu bytes.", gw->cfg->max_body);
        request_error(r, "INVALID_REQUEST", r->lang_en ? en : ko);
        r->resp.status = 413;
        r->resp.close = true;
        return H_RESPOND;
    }
    switch (r->kind) {
    case RK_HEALTH:
        return admin_health(gw, r);
    case RK_ADMIN_PAYMENTS: {
        char *oid = request_query(r, "orderId");
        enum handler_result h = admin_payments(gw, r, oid);
        free(oid);
        return h;
    }
    case RK_ADMIN_SESSIONS:
        return payments_register_session(gw, r);
    case RK_ADMIN_PROFILE:
        return r->method == HM_PUT ? admin_put_profile(gw, r) : admin_get_profile(gw, r);
    case RK_ADMIN_RESET:
        return admin_reset(gw, r);
    case RK_ADMIN_REQUESTS:
        return admin_requests(gw, r);
    case RK_ADMIN_REPORT:
        return admin_report(gw, r);
    case RK_METRICS:
        return admin_metrics(gw, r);
    case RK_CONFIRM:
    case RK_CANCEL:
        if (!check_idem_key(r)) {
            r->outcome = OUT_INVALID;
            return H_RESPOND;
        }
        return r->kind == RK_CONFIRM ? payments_confirm(gw, r) : payments_cancel(gw, r);
    case RK_GET_PAYMENT:
    case RK_GET_ORDER:
    case RK_TRANSACTIONS:
        return payments_read(gw, r);
    case RK_NONE:
        break;
    }
    return not_found(r);
}

enum handler_result router_on_deadline(struct request *r, bool draining)
{
    return payments_on_deadline(gw, r, draining);
}
