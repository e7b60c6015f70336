/* admin_webhooks.c -- /__admin/webhooks, its deliveries and /__admin/clock (docs/webhooks.md
 * §6.2, §6.4, §6.7): the admin face of webhook.c and of the gateway clock. Never delayed or
 * faulted; a bad value is 400 INVALID_REQUEST naming it, and changes nothing. */
#define _POSIX_C_SOURCE 200809L
#include "admin.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "body.h"
#include "buf.h"
#include "common.h"
#include "jsonpos.h"
#include "webhook.h"

/* The farthest the gateway clock goes ahead of the wall clock, in all: 100 years, in seconds.
 * Beyond year 9999 the timestamps lose their yyyy form, and the offset must never wrap. Two
 * concurrent steps may overshoot it by one step at most. */
#define MAX_ADVANCE_S 3155760000.0

static enum handler_result invalid(struct request *r, const char *message)
{
    request_error(r, "INVALID_REQUEST", message);
    r->obs.outcome = OUT_INVALID;
    return H_RESPOND;
}

/* The body as a JSON object, or NULL with r answered 400 naming what is wrong: a body nested
 * deeper than --max-json-depth is refused before it is parsed. */
static json_t *object_body(struct gateway *g, struct request *r, const char *expected)
{
    size_t depth = g->cfg->max_json_depth ? g->cfg->max_json_depth : BODY_MAX_JSON_DEPTH_DEFAULT;
    size_t off, line, col;
    if (r->body.len && jsonpos_too_deep(r->body.data, r->body.len, depth, &off)) {
        char msg[ERR_LEN];
        jsonpos_line_col(r->body.data, r->body.len, off, &line, &col);
        snprintf(msg, sizeof msg,
                 "request body:%zu:%zu: nested deeper than %zu levels (--max-json-depth); "
                 "expected %s",
                 line, col, depth, expected);
        invalid(r, msg);
        return NULL;
    }
    json_error_t je;
    json_t *v = r->body.len ? json_loadb(r->body.data, r->body.len, JSON_REJECT_DUPLICATES, &je)
                            : NULL;
    if (!v || !json_is_object(v)) {
        char msg[ERR_LEN];
        if (!v && r->body.len)
            snprintf(msg, sizeof msg, "request body:%d:%d: invalid JSON: %s; expected %s",
                     je.line, je.column, je.text, expected);
        else
            snprintf(msg, sizeof msg, "expected a JSON object %s", expected);
        json_decref(v);
        invalid(r, msg);
        return NULL;
    }
    return v;
}

/* An unknown key of `v` not in `known` (NULL-terminated), or NULL. */
static const char *unknown_key(json_t *v, const char *const *known)
{
    const char *key;
    json_t *x;
    json_object_foreach(v, key, x) {
        size_t i = 0;
        while (known[i] && strcmp(known[i], key) != 0)
            i++;
        if (!known[i])
            return key;
    }
    return NULL;
}

/* 503 SERVICE_UNAVAILABLE naming the shared store the webhooks could not reach
 * (docs/cluster.md §11.3), as a section that cannot reach it answers. */
static enum handler_result store_down(struct gateway *g, struct request *r)
{
    char msg[400];
    webhooks_store_message(g->webhooks, msg, sizeof msg);
    gateway_refuse_store_msg(r, msg);
    return H_RESPOND;
}

static enum handler_result get_receivers(struct gateway *g, struct request *r,
                                         struct tenant *t)
{
    struct buf b;
    buf_init(&b);
    if (webhooks_render_receivers(g->webhooks, t, &b) != 0) {
        buf_fini(&b);
        return store_down(g, r);
    }
    return admin_respond(r, 200, &b);
}

static enum handler_result put_receivers(struct gateway *g, struct request *r,
                                         struct tenant *t)
{
    static const char *const known[] = {"urls", "success", NULL};
    const char *shape = "{\"urls\": [\"http://host:port/path\", ...], \"success\": \"200\" | \"2xx\"}";
    json_t *v = object_body(g, r, shape);
    if (!v)
        return H_RESPOND;
    char msg[ERR_LEN + 32], err[ERR_LEN];
    const char *bad = unknown_key(v, known);
    json_t *urls = json_object_get(v, "urls"), *success = json_object_get(v, "success");
    const char *list[WEBHOOK_MAX_RECEIVERS];
    size_t n = 0;
    bool two_xx = false;
    msg[0] = '\0';
    if (bad) {
        snprintf(msg, sizeof msg, "unknown key \"%.60s\"; expected %s", bad, shape);
    } else if (!json_is_array(urls)) {
        snprintf(msg, sizeof msg, "urls: expected an array of http:// URLs (may be empty)");
    } else if (json_array_size(urls) > WEBHOOK_MAX_RECEIVERS) {
        snprintf(msg, sizeof msg, "urls: at most %d receivers", WEBHOOK_MAX_RECEIVERS);
    } else if (success && !(json_is_string(success) &&
                            (strcmp(json_string_value(success), "200") == 0 ||
                             (two_xx = strcmp(json_string_value(success), "2xx") == 0)))) {
        snprintf(msg, sizeof msg, "success: expected \"200\" or \"2xx\"");
    } else {
        for (size_t i = 0; i < json_array_size(urls) && !msg[0]; i++) {
            const char *u = json_string_value(json_array_get(urls, i));
            if (!u)
                snprintf(msg, sizeof msg, "urls[%zu]: expected a string", i);
            else if (webhook_url_check(u, err) != 0)
                snprintf(msg, sizeof msg, "urls[%zu]: %s", i, err);
            else
                list[n++] = u;
        }
    }
    if (msg[0]) {
        json_decref(v);
        return invalid(r, msg);
    }
    int rc = webhooks_set_receivers(g->webhooks, t, list, n, two_xx);
    json_decref(v);
    if (rc == -2)
        return store_down(g, r);
    if (rc != 0) {
        request_error(r, "FAILED_INTERNAL_SYSTEM_PROCESSING", NULL);
        return H_RESPOND;
    }
    return get_receivers(g, r, t);
}

enum handler_result admin_webhooks(struct gateway *g, struct request *r)
{
    struct tenant *t;
    if (!admin_tenant(g, r, r->method == HM_PUT, &t))
        return H_RESPOND;
    return r->method == HM_PUT ? put_receivers(g, r, t) : get_receivers(g, r, t);
}

enum handler_result admin_deliveries(struct gateway *g, struct request *r)
{
    static const char *const known[] = {"paymentKey", "orderId", "status", "limit", NULL};
    struct tenant *t;
    if (!admin_tenant(g, r, false, &t))
        return H_RESPOND;
    struct delivery_filter f = {.tenant = t, .status = -1};
    char *values[4] = {NULL, NULL, NULL, NULL};
    char msg[ERR_LEN] = "";
    for (const char *p = r->query; p && *p && !msg[0]; p += strcspn(p, "&"), p += *p == '&') {
        size_t n = strcspn(p, "=&");
        size_t i = 0;
        while (known[i] && (strlen(known[i]) != n || strncmp(known[i], p, n) != 0))
            i++;
        if (n == 0)
            continue;
        if (p[n] != '=')
            snprintf(msg, sizeof msg, "%.*s: a value is required", (int)(n < 60 ? n : 60), p);
        else if (!known[i])
            snprintf(msg, sizeof msg, "unknown parameter \"%.*s\"; expected paymentKey, orderId, "
                     "status or limit", (int)(n < 60 ? n : 60), p);
        else if (values[i])
            snprintf(msg, sizeof msg, "%s: given twice", known[i]);
        else
            values[i] = request_query(r, known[i]);
    }
    if (!msg[0] && values[2] && (f.status = delivery_status_parse(values[2])) < 0)
        snprintf(msg, sizeof msg, "status: expected pending, delivered, failed or dropped");
    if (!msg[0] && values[3]) {
        char *end;
        errno = 0;
        unsigned long long n = strtoull(values[3], &end, 10);
        if (errno || *end || values[3][0] == '-' || n < 1 || n > WEBHOOK_JOURNAL + 0ULL)
            snprintf(msg, sizeof msg, "limit: expected an integer in 1 ... %d", WEBHOOK_JOURNAL);
        f.limit = (size_t)n;
    }
    enum handler_result h;
    if (msg[0]) {
        h = invalid(r, msg);
    } else {
        f.payment_key = values[0];
        f.order_id = values[1];
        struct buf b;
        buf_init(&b);
        if (webhooks_render_deliveries(g->webhooks, &f, &b) != 0) {
            buf_fini(&b);
            h = store_down(g, r);
        } else {
            h = admin_respond(r, 200, &b);
        }
    }
    for (int i = 0; i < 4; i++)
        free(values[i]);
    return h;
}

enum handler_result admin_delivery_resend(struct gateway *g, struct request *r)
{
    struct tenant *t;
    if (!admin_tenant(g, r, false, &t))
        return H_RESPOND;
    const char *s = r->path_param ? r->path_param : "";
    char *end;
    errno = 0;
    unsigned long long id = strtoull(s, &end, 10);
    struct buf b;
    buf_init(&b);
    int rc = s[0] < '0' || s[0] > '9' || *end || errno ? -1 : webhooks_resend(g->webhooks, t, id, &b);
    if (rc == -2) {
        buf_fini(&b);
        return store_down(g, r);
    }
    if (rc != 0) {
        buf_fini(&b);
        char msg[160];
        snprintf(msg, sizeof msg, "no webhook delivery %.40s (GET /__admin/webhooks/deliveries "
                 "lists them)", s);
        request_error(r, "NOT_FOUND", msg);
        r->obs.outcome = OUT_INVALID;
        return H_RESPOND;
    }
    return admin_respond(r, 200, &b);
}

static enum handler_result render_clock(struct gateway *g, struct request *r)
{
    char now[32];
    fmt_kst(gateway_now_us(g), now);
    struct buf b;
    buf_init(&b);
    buf_addf(&b, "{\"now\":\"%s\",\"offset_s\":%.6f}", now,
             (double)atomic_load(&g->clock_offset_us) / 1e6);
    return admin_respond(r, 200, &b);
}

enum handler_result admin_clock(struct gateway *g, struct request *r)
{
    if (r->method == HM_GET)
        return render_clock(g, r);
    static const char *const known[] = {"advance_s", NULL};
    json_t *v = object_body(g, r, "{\"advance_s\": N} (seconds, N >= 0, fractions allowed)");
    if (!v)
        return H_RESPOND;
    const char *bad = unknown_key(v, known);
    json_t *adv = json_object_get(v, "advance_s");
    double s = json_is_number(adv) ? json_number_value(adv) : -1;
    double ahead_s = (double)atomic_load(&g->clock_offset_us) / 1e6;
    char msg[ERR_LEN] = "";
    if (bad)
        snprintf(msg, sizeof msg, "unknown key \"%.60s\"; expected {\"advance_s\": N}", bad);
    else if (!adv)
        snprintf(msg, sizeof msg, "advance_s: required (seconds to move the gateway clock "
                 "forward)");
    else if (!json_is_number(adv) || !isfinite(s) || s < 0 || s > MAX_ADVANCE_S)
        snprintf(msg, sizeof msg, "advance_s: expected a number of seconds in 0 ... %.0f (the "
                 "clock only moves forward; POST /__admin/reset sets it back)", MAX_ADVANCE_S);
    else if (s + ahead_s > MAX_ADVANCE_S)
        snprintf(msg, sizeof msg, "advance_s: the gateway clock is already %.6f s ahead and "
                 "goes at most %.0f s (100 years) ahead in all; POST /__admin/reset sets it back",
                 ahead_s, MAX_ADVANCE_S);
    json_decref(v);
    if (msg[0])
        return invalid(r, msg);
    if (gateway_clock_advance(g, (int64_t)llround(s * 1e6)) == GATEWAY_STORE_DOWN) {
        gateway_refuse_store(g, r);
        return H_RESPOND;
    }
    return render_clock(g, r);
}
