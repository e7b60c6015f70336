/* router.c -- the route table and the request edge (see router.h). Order (docs/profiles.md
 * §4): framing (431, TE/CL) → route (404/405) → auth → throttle → cap → 413 by Content-Length
 * → body → Idempotency-Key → the handler; a handler's answer leaves through leave(), the one
 * place a way-out fault acts on it. */
#define _DEFAULT_SOURCE
#include "router.h"

#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "admit.h"
#include "answer.h"
#include "cluster_limits.h"
#include "gateway.h"
#include "observe.h"
#include "payments.h"

typedef enum handler_result (*handler_fn)(struct gateway *g, struct request *r);

static enum handler_result admin_profile(struct gateway *g, struct request *r)
{
    return r->method == HM_PUT ? admin_put_profile(g, r) : admin_get_profile(g, r);
}

/* Rows are tried in order. A path that matches a row's pattern is answered by the row with its
 * method; when none has it, later rows with other patterns are tried too ("/v1/payments/confirm"
 * with GET reads the payment whose key is "confirm"), unless the row says `last`: a path under
 * /v1/payments/orders/ is an order read and nothing else, so POST .../orders/cancel is 405, not
 * a cancel of a payment called "orders". */
static const struct route_row {
    const char *pattern;
    enum http_method method;
    enum route_kind kind;
    enum route_id route;
    handler_fn handler;
    bool last;
} routes[] = {
    {"/healthz", HM_GET, RK_HEALTH, ROUTE_DEFAULT, admin_health, false},
    {"/healthz", HM_HEAD, RK_HEALTH, ROUTE_DEFAULT, admin_health, false},
    {"/__admin/health", HM_GET, RK_HEALTH, ROUTE_DEFAULT, admin_health, false},
    {"/__admin/health", HM_HEAD, RK_HEALTH, ROUTE_DEFAULT, admin_health, false},
    {"/__admin/payments", HM_GET, RK_ADMIN_PAYMENTS, ROUTE_DEFAULT, admin_payments, false},
    {"/__admin/profile", HM_GET, RK_ADMIN_PROFILE, ROUTE_DEFAULT, admin_profile, false},
    {"/__admin/profile", HM_PUT, RK_ADMIN_PROFILE, ROUTE_DEFAULT, admin_profile, false},
    {"/__admin/reset", HM_POST, RK_ADMIN_RESET, ROUTE_DEFAULT, admin_reset, false},
    {"/__admin/requests", HM_GET, RK_ADMIN_REQUESTS, ROUTE_DEFAULT, admin_requests, false},
    {"/__admin/report", HM_GET, RK_ADMIN_REPORT, ROUTE_DEFAULT, admin_report, false},
    {"/__admin/webhooks", HM_GET, RK_ADMIN_WEBHOOKS, ROUTE_DEFAULT, admin_webhooks, false},
    {"/__admin/webhooks", HM_PUT, RK_ADMIN_WEBHOOKS, ROUTE_DEFAULT, admin_webhooks, false},
    {"/__admin/webhooks/deliveries", HM_GET, RK_ADMIN_DELIVERIES, ROUTE_DEFAULT,
     admin_deliveries, false},
    {"/__admin/webhooks/deliveries/*/resend", HM_POST, RK_ADMIN_RESEND, ROUTE_DEFAULT,
     admin_delivery_resend, false},
    {"/__admin/ui", HM_GET, RK_ADMIN_UI, ROUTE_DEFAULT, admin_ui, false},
    {"/__admin/ui/*", HM_GET, RK_ADMIN_UI, ROUTE_DEFAULT, admin_ui, false},
    {"/__admin/timeline", HM_GET, RK_ADMIN_TIMELINE, ROUTE_DEFAULT, admin_timeline, false},
    {"/__admin/clock", HM_GET, RK_ADMIN_CLOCK, ROUTE_DEFAULT, admin_clock, false},
    {"/__admin/clock", HM_POST, RK_ADMIN_CLOCK, ROUTE_DEFAULT, admin_clock, false},
    {"/__admin/sessions", HM_POST, RK_ADMIN_SESSIONS, ROUTE_DEFAULT, payments_register_session,
     false},
    {"/metrics", HM_GET, RK_METRICS, ROUTE_DEFAULT, admin_metrics, false},
    {"/v1/transactions", HM_GET, RK_TRANSACTIONS, ROUTE_READ, payments_read, false},
    {"/v1/virtual-accounts", HM_POST, RK_VIRTUAL_ACCOUNT, ROUTE_VIRTUAL_ACCOUNT,
     payments_virtual_account, false},
    {"/__admin/virtual-accounts/deposit", HM_POST, RK_ADMIN_DEPOSIT, ROUTE_DEFAULT,
     payments_admin_deposit, false},
    {"/__admin/virtual-accounts/deposit-error", HM_POST, RK_ADMIN_DEPOSIT, ROUTE_DEFAULT,
     payments_admin_deposit, false},
    {"/v1/payments/confirm", HM_POST, RK_CONFIRM, ROUTE_CONFIRM, payments_confirm, false},
    {"/v1/payments/orders/*", HM_GET, RK_GET_ORDER, ROUTE_READ, payments_read, true},
    {"/v1/payments/*/cancel", HM_POST, RK_CANCEL, ROUTE_CANCEL, payments_cancel, false},
    {"/v1/payments/*", HM_GET, RK_GET_PAYMENT, ROUTE_READ, payments_read, false},
    /* Toss's older approve path, {orderId, amount}: the same confirm (docs/api.md §2.1). */
    {"/v1/payments/*", HM_POST, RK_CONFIRM, ROUTE_CONFIRM, payments_confirm, false},
};
#define N_ROUTES (sizeof routes / sizeof routes[0])

/* The Toss API routes: journaled, authenticated, admitted, planned. */
static bool is_v1(enum route_kind k)
{
    return k == RK_CONFIRM || k == RK_GET_PAYMENT || k == RK_GET_ORDER || k == RK_CANCEL ||
           k == RK_TRANSACTIONS || k == RK_VIRTUAL_ACCOUNT;
}

/* `path` matches `pattern`; *param and *len receive the "*" segment. */
static bool pattern_match(const char *pattern, const char *path, const char **param,
                          size_t *len)
{
    const char *star = strchr(pattern, '*');
    if (!star)
        return strcmp(pattern, path) == 0;
    size_t pre = (size_t)(star - pattern);
    if (strncmp(pattern, path, pre) != 0)
        return false;
    const char *seg = path + pre, *end = strchr(seg, '/');
    size_t n = end ? (size_t)(end - seg) : strlen(seg);
    if (n == 0 || strcmp(star + 1, seg + n) != 0)
        return false;
    *param = seg;
    *len = n;
    return true;
}

/* The raw path may not hide a '/' or a NUL inside a key (docs/edge-rules.md §7). */
static bool raw_path_ok(const char *raw)
{
    for (const char *p = raw; *p && *p != '?'; p++)
        if (p[0] == '%' && (p[1] == '2' && (p[2] == 'f' || p[2] == 'F')))
            return false;
        else if (p[0] == '%' && p[1] == '0' && p[2] == '0')
            return false;
    return true;
}

/* The Allow value of a set of methods (bit i = enum http_method i), static. */
static const char *allow_value(unsigned methods)
{
    static const char *const names[] = {"GET", "POST", "PUT", "DELETE", "PATCH", "HEAD"};
    static const struct {
        unsigned set;
        const char *allow;
    } known[] = {{1u << HM_GET, "GET"},
                 {1u << HM_POST, "POST"},
                 {1u << HM_GET | 1u << HM_POST, "GET, POST"},
                 {1u << HM_GET | 1u << HM_PUT, "GET, PUT"},
                 {1u << HM_GET | 1u << HM_HEAD, "GET, HEAD"}};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (known[i].set == methods)
            return known[i].allow;
    for (unsigned i = 0; i < 6; i++) /* a table row with a new combination: its first method */
        if (methods & 1u << i)
            return names[i];
    return "GET";
}

enum route_found router_match(enum http_method method, const char *path, const char *raw,
                              struct route_match *out)
{
    if (!raw_path_ok(raw ? raw : path))
        return ROUTE_NOT_FOUND;
    unsigned methods = 0;
    for (size_t i = 0; i < N_ROUTES; i++) {
        const char *param = NULL;
        size_t len = 0;
        /* Every pattern begins with two plain bytes ("/v", "/_", ...): a path that differs in
         * them matches no such row, so most rows cost two compares instead of a match. */
        const char *pat = routes[i].pattern;
        if (path[0] != pat[0] || path[1] != pat[1])
            continue;
        if (!pattern_match(pat, path, &param, &len))
            continue;
        if (routes[i].method != method) {
            methods |= 1u << routes[i].method;
            if (routes[i].last)
                break;
            continue;
        }
        *out = (struct route_match){.kind = routes[i].kind, .route = routes[i].route,
                                    .param = param, .param_len = len};
        return ROUTE_FOUND;
    }
    if (!methods)
        return ROUTE_NOT_FOUND;
    out->allow = allow_value(methods);
    return ROUTE_BAD_METHOD;
}

static const struct route_row *row_of(enum route_kind k, enum http_method m)
{
    for (size_t i = 0; i < N_ROUTES; i++)
        if (routes[i].kind == k && routes[i].method == m)
            return &routes[i];
    return NULL;
}

/* Set r->kind, r->route, r->path_param; or answer 404/405. */
static bool route(struct request *r)
{
    struct route_match m;
    switch (router_match(r->method, r->path, r->raw_uri, &m)) {
    case ROUTE_FOUND:
        r->kind = m.kind;
        r->route = m.route;
        if (m.param && !(r->path_param = strndup(m.param, m.param_len)))
            break;
        return true;
    case ROUTE_BAD_METHOD:
        request_error(r, "METHOD_NOT_ALLOWED", NULL);
        r->resp.allow = m.allow;
        r->obs.outcome = OUT_INVALID;
        return false;
    case ROUTE_NOT_FOUND:
        break;
    }
    request_error(r, "NOT_FOUND", NULL);
    r->obs.outcome = OUT_INVALID;
    return false;
}

/* Admin, health and metrics calls: never journaled, delayed or faulted (docs/admin.md §5). */
static bool is_admin_path(const char *p)
{
    return strncmp(p, "/__admin/", 9) == 0 || strcmp(p, "/__admin") == 0 ||
           strcmp(p, "/healthz") == 0 || strcmp(p, "/metrics") == 0;
}

/* The answer leaves for http.c: a planned fault acts on it here, once. */
static enum handler_result leave(struct gateway *g, struct request *r, enum handler_result h)
{
    if (h == H_RESPOND && r->obs.planned && !r->obs.fault_acted) {
        answer_way_out(r);
        observe_fault(g, r);
    }
    return h;
}

/* The header checks in order; true when the request may go on to its body. */
static bool headers_admitted(struct gateway *g, struct request *r)
{
    r->route = ROUTE_OTHER; /* until route() finds one: a 431 or a framing error has none */
    if (!admit_framing(r) || !route(r))
        return false;
    if (!is_v1(r->kind))
        r->route = ROUTE_DEFAULT;
    else if (!admit_gateway(g, r))
        return false;
    return admit_body_size(g, r);
}

enum handler_result router_on_headers(struct gateway *g, struct request *r)
{
    if (g->limits) /* --store redis://: a profile another instance published applies first */
        cluster_limits_sync(g->limits);
    if (r->path && is_admin_path(r->path))
        return admit_admin(g, r) && headers_admitted(g, r) ? H_CONTINUE : H_RESPOND;
    bool ok = headers_admitted(g, r);
    /* Journaled after admission stamped the reset generation: a reset that lands during
     * admission then either overtakes the request (it is answered 500, not counted) or comes
     * before its entry -- never empties the journal under an entry of a request that runs in
     * the new generation. */
    observe_arrival(g, r);
    return ok ? H_CONTINUE : H_RESPOND;
}

enum handler_result router_on_body(struct gateway *g, struct request *r)
{
    if (!admit_body_size(g, r))
        return H_RESPOND;
    if ((r->kind == RK_CONFIRM || r->kind == RK_CANCEL || r->kind == RK_VIRTUAL_ACCOUNT) &&
        !admit_idempotency_key(r))
        return H_RESPOND;
    const struct route_row *row = row_of(r->kind, r->method);
    if (!row) { /* cannot happen: route() found it */
        request_error(r, "NOT_FOUND", NULL);
        return H_RESPOND;
    }
    return leave(g, r, row->handler(g, r));
}

enum handler_result router_on_deadline(struct gateway *g, struct request *r, bool draining)
{
    return leave(g, r, payments_on_deadline(g, r, draining));
}

void router_on_send(struct gateway *g, struct request *r)
{
    observe_sent(g, r);
}

void router_on_complete(struct gateway *g, struct request *r, bool completed_ok)
{
    observe_complete(g, r, completed_ok);
}
