/* admin_ui.c -- the live page (GET /__admin/ui and its files, built into the binary) and the
 * compact data it polls once a second (GET /__admin/timeline): requests per second by route
 * and outcome class, with the schedule phase and the closed throttle windows of each second,
 * and the routes in flight against their caps (docs/admin.md §5). The timeline reads counters
 * and the applied profile only -- no journal scan -- so it stays cheap however many requests
 * are held. */
#define _GNU_SOURCE
#include "admin.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "gateway.h"
#include "throttle.h"
#include "timeline.h"
#include "ui_assets.h"

#define TIMELINE_DEFAULT_S 120
#define TIMELINE_TENANTS_LISTED 100

enum handler_result admin_ui(struct gateway *g, struct request *r)
{
    (void)g;
    const char *name = r->path_param ? r->path_param : "";
    const char *data, *type;
    size_t len;
    if (!ui_asset(name, &data, &len, &type)) {
        request_error(r, "NOT_FOUND", "no such file of the live page (GET /__admin/ui)");
        return H_RESPOND;
    }
    char *copy = malloc(len ? len : 1);
    if (!copy) {
        request_error(r, "FAILED_INTERNAL_SYSTEM_PROCESSING", NULL);
        return H_RESPOND;
    }
    memcpy(copy, data, len);
    request_respond(r, 200, copy, len);
    r->resp.content_type = type;
    return H_RESPOND;
}

struct tl_render {
    struct gateway *g;
    struct tenant *t;            /* NULL: the server */
    struct timeline *tl;
    int seconds;
    struct buf *b;
    int64_t now_ns, now_unix_us;
};

/* The real routes a request can have (not "default", which only settles the others). */
static const enum route_id LISTED[] = {ROUTE_CONFIRM, ROUTE_CANCEL, ROUTE_READ,
                                       ROUTE_VIRTUAL_ACCOUNT};
#define N_LISTED (sizeof LISTED / sizeof LISTED[0])

/* Where in a second the closed windows are looked for: every 100 ms, so a window as short as
 * that shows (the profile language allows shorter; they may then go unmarked). */
#define WINDOW_STEP_NS (100 * NS_PER_MS)

/* For the second starting at mono time s_ns: the phase name (or null) at its first moment
 * under the applied state `root`, and the routes whose window throttle was closed at some
 * moment of it, from root's application to now_ns (before root was applied another profile
 * was in force: null and []). */
static void add_second_state(struct buf *b, const struct live *root, int64_t s_ns, int64_t now_ns)
{
    int64_t from = s_ns > root->origin_ns ? s_ns : root->origin_ns;
    int64_t to = s_ns + NS_PER_S < now_ns ? s_ns + NS_PER_S : now_ns;
    if (from > to) {
        buf_adds(b, ",\"phase\":null,\"throttled\":[]");
        return;
    }
    int64_t since;
    struct live *cur = live_current((struct live *)root, from, &since);
    buf_adds(b, ",\"phase\":");
    if (root->n_phases)
        buf_add_json_strz(b, cur->profile->name);
    else
        buf_adds(b, "null");
    buf_adds(b, ",\"throttled\":[");
    bool first = true;
    for (size_t i = 0; i < N_LISTED; i++) {
        bool closed = false;
        for (int64_t t = from; t <= to && !closed; t += WINDOW_STEP_NS) {
            struct live *at = live_current((struct live *)root, t, &since);
            const struct throttle *th = &profile_route(at->profile, LISTED[i])->throttle;
            double wait;
            closed = th->kind == THROTTLE_WINDOW && window_throttled(th, since, &wait);
        }
        if (!closed)
            continue;
        if (!first)
            buf_addc(b, ',');
        first = false;
        buf_addc(b, '"');
        buf_adds(b, route_name(LISTED[i]));
        buf_addc(b, '"');
    }
    buf_addc(b, ']');
}

static void render_timeline(const struct applied *a, void *ctx)
{
    struct tl_render *x = ctx;
    struct buf *b = x->b;
    const struct live *root = a->live;
    int64_t since;
    struct live *cur = live_current((struct live *)root, x->now_ns, &since);
    int64_t now_ms = x->now_unix_us / 1000;
    buf_addf(b, "{\"now_ms\":%lld,\"seconds\":%d,\"since_ms\":%lld,\"tenant\":", (long long)now_ms,
             x->seconds, (long long)(atomic_load(&x->tl->since_unix_us) / 1000));
    if (x->t && tenant_key(x->t))
        buf_add_json_strz(b, tenant_key(x->t));
    else
        buf_adds(b, "null");
    buf_adds(b, ",\"routes\":[");
    for (int i = 0; i < ROUTE_LABELS; i++)
        buf_addf(b, "%s\"%s\"", i ? "," : "", i == ROUTE_OTHER ? "other" : route_name((enum route_id)i));
    buf_adds(b, "],\"classes\":[");
    for (int c = 0; c < TL_CLASSES; c++)
        buf_addf(b, "%s\"%s\"", c ? "," : "", tl_class_name((enum tl_class)c));
    buf_adds(b, "],\"profile\":{\"name\":");
    buf_add_json_strz(b, root->profile->name);
    buf_addf(b, ",\"seed\":\"%llu\",\"schedule\":%s,\"phase\":",
             (unsigned long long)gateway_seed(x->g, a->profile), root->n_phases ? "true" : "false");
    if (root->n_phases)
        buf_add_json_strz(b, cur->profile->name);
    else
        buf_adds(b, "null");
    buf_adds(b, "},\"in_flight\":[");
    const struct flight *f = x->t ? &x->t->flight : &x->g->flight;
    for (size_t i = 0; i < N_LISTED; i++) {
        enum route_id rt = LISTED[i];
        uint32_t cap = profile_route(cur->profile, rt)->concurrency.max_in_flight;
        buf_addf(b, "%s{\"route\":\"%s\",\"now\":%ld,\"peak\":%ld,\"cap\":", i ? "," : "",
                 route_name(rt), atomic_load(&f->in_flight[rt]), atomic_load(&f->peak[rt]));
        if (cap)
            buf_addf(b, "%u}", cap);
        else
            buf_adds(b, "null}");
    }
    buf_addc(b, ']');
    if (!x->t) {
        buf_adds(b, ",\"tenants\":[");
        size_t n = 0;
        for (struct tenant *t = gateway_tenant_next(x->g, NULL); t && n < TIMELINE_TENANTS_LISTED;
             t = gateway_tenant_next(x->g, t)) {
            if (!tenant_key(t))
                continue;
            if (n++)
                buf_addc(b, ',');
            buf_add_json_strz(b, tenant_key(t));
        }
        buf_addc(b, ']');
    }
    /* The buckets, oldest first: a monotonic second s is shown at its wall-clock start. */
    int64_t now_s = x->now_ns / NS_PER_S;
    int64_t off_ms = now_ms - x->now_ns / NS_PER_MS;
    buf_adds(b, ",\"buckets\":[");
    for (int64_t s = now_s - x->seconds + 1; s <= now_s; s++) {
        uint32_t n[ROUTE_LABELS][TL_CLASSES];
        timeline_read(x->tl, s, n);
        buf_addf(b, "%s{\"t\":%.3f", s > now_s - x->seconds + 1 ? "," : "",
                 (double)(s * 1000 + off_ms) / 1000.0);
        add_second_state(b, root, s * NS_PER_S, x->now_ns);
        buf_adds(b, ",\"n\":{");
        bool first = true;
        for (int rt = 0; rt < ROUTE_LABELS; rt++) {
            uint32_t sum = 0;
            for (int c = 0; c < TL_CLASSES; c++)
                sum += n[rt][c];
            if (!sum)
                continue;
            buf_addf(b, "%s\"%s\":[", first ? "" : ",",
                     rt == ROUTE_OTHER ? "other" : route_name((enum route_id)rt));
            first = false;
            for (int c = 0; c < TL_CLASSES; c++)
                buf_addf(b, "%s%u", c ? "," : "", n[rt][c]);
            buf_addc(b, ']');
        }
        buf_adds(b, "}}");
    }
    buf_adds(b, "]}");
}

/* The tenant's timeline, made the first time it is asked for; NULL on out of memory. */
static struct timeline *tenant_timeline(struct tenant *t)
{
    struct timeline *tl = atomic_load(&t->timeline);
    if (tl)
        return tl;
    struct timeline *made = timeline_new();
    if (!made)
        return NULL;
    if (!atomic_compare_exchange_strong(&t->timeline, &tl, made)) {
        timeline_free(made); /* another request made it first */
        return tl;
    }
    return made;
}

enum handler_result admin_timeline(struct gateway *g, struct request *r)
{
    struct tenant *t;
    if (!admin_tenant(g, r, false, &t))
        return H_RESPOND;
    int seconds = TIMELINE_DEFAULT_S;
    char *v = request_query(r, "seconds");
    if (v) {
        char *end;
        errno = 0;
        long n = strtol(v, &end, 10);
        bool ok = !errno && *v && !*end && n >= 1 && n <= TIMELINE_SECONDS;
        free(v);
        if (!ok) {
            char msg[96];
            snprintf(msg, sizeof msg, "seconds: expected an integer in 1 ... %d", TIMELINE_SECONDS);
            request_error(r, "INVALID_REQUEST", msg);
            r->obs.outcome = OUT_INVALID;
            return H_RESPOND;
        }
        seconds = (int)n;
    }
    struct timeline *tl = t ? tenant_timeline(t) : g->timeline;
    if (!tl) {
        request_error(r, "FAILED_INTERNAL_SYSTEM_PROCESSING", NULL);
        return H_RESPOND;
    }
    struct buf b;
    buf_init(&b);
    struct tl_render x = {g, t, tl, seconds, &b, now_mono_ns(), now_unix_us()};
    if (t)
        gateway_with_tenant_applied(g, t, render_timeline, &x);
    else
        gateway_with_applied(g, render_timeline, &x);
    return admin_respond(r, 200, &b);
}
