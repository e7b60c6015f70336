/* admin.c -- the /__admin routes, /healthz and /metrics (docs/admin.md §5): handlers over the
 * gateway's state, siblings of payments.c. Never delayed or faulted: they answer at once. */
#define _POSIX_C_SOURCE 200809L
#include "admin.h"

#include <jansson.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "cluster.h"
#include "cluster_limits.h"
#include "common.h"
#include "jsonpos.h"
#include "render.h"
#include "statefile.h"
#include "admit.h"
#include "report.h"
#include "cluster_journal.h"
#include "webhook.h"

/* How long a read of the shared journal waits for this instance's own requests to be
 * appended first (ms): long enough for a completion that trails its answer, short enough that
 * a request held by a latency fault delays the read only this much. */
#define SHARED_FLUSH_MS 300

struct seed_of {
    const struct gateway *g;
    uint64_t seed;
};

static void applied_seed(const struct applied *a, void *ctx)
{
    struct seed_of *s = ctx;
    s->seed = gateway_seed(s->g, a->profile);
}

enum handler_result admin_health(struct gateway *gw, struct request *r)
{
    struct buf b;
    buf_init(&b);
    char started[32];
    fmt_kst(gw->started_unix_us, started);
    struct seed_of s = {gw, gw->seed};
    gateway_with_applied(gw, applied_seed, &s);
    buf_addf(&b, "{\"status\":\"ok\",\"pid\":%ld,\"instance\":\"%016llx\",\"started_at\":\"%s\","
                 "\"seed\":%llu}",
             (long)getpid(), (unsigned long long)gw->instance_id, started,
             (unsigned long long)s.seed);
    b.len--; /* reopen the object */
    if (gw->cluster) {
        /* The shared store (docs/cluster.md): a harness or a balancer's check sees it down. */
        struct cluster_status cs;
        cluster_status(gw->cluster, &cs);
        buf_adds(&b, ",\"store\":{\"kind\":\"redis\",\"url\":");
        buf_add_json_strz(&b, cluster_url_text(gw->cluster));
        buf_addf(&b, ",\"state\":\"%s\"", cs.up ? "up" : "down");
        if (!cs.up) {
            buf_adds(&b, ",\"error\":");
            buf_add_json_strz(&b, cs.error);
        }
        buf_addf(&b, ",\"applied\":%llu,\"lines\":%llu", (unsigned long long)cs.applied,
                 (unsigned long long)cs.lines);
        if (gw->cjournal) {
            struct cluster_journal_stats js;
            cluster_journal_stats(gw->cjournal, &js);
            buf_addf(&b, ",\"journal\":{\"written\":%llu,\"pending\":%zu,\"lost\":%llu}",
                     (unsigned long long)js.written, js.pending, (unsigned long long)js.lost);
        }
        buf_adds(&b, "}}");
    } else {
        buf_adds(&b, ",\"store\":{\"kind\":\"memory\"}}");
    }
    if (gw->state && !gw->cluster) {
        /* What came back at start (docs/state-file.md §10.3): a harness can tell a restart
         * replayed, and how many unanswered requests it released. */
        const struct statefile_stats *st = &gw->state->start;
        b.len--;
        buf_adds(&b, ",\"state_file\":{\"path\":");
        buf_add_json_strz(&b, gw->state->path);
        buf_addf(&b, ",\"replayed_lines\":%llu,\"payments\":%zu,\"idempotency_records\":%zu,"
                     "\"released\":%zu,\"torn_bytes\":%zu}}",
                 (unsigned long long)st->lines, st->payments, st->idem_records, st->released,
                 st->torn_bytes);
    }
    size_t len;
    char *body = buf_steal(&b, &len);
    if (!body) {
        request_error(r, "FAILED_INTERNAL_SYSTEM_PROCESSING", NULL);
        return H_RESPOND;
    }
    request_respond(r, 200, body, len);
    return H_RESPOND;
}

bool admin_tenant(struct gateway *g, struct request *r, bool create, struct tenant **t)
{
    *t = NULL;
    char msg[200];
    if (r->ovr_twice && strcmp(r->ovr_twice, "X-Fakegate-Tenant") == 0) {
        request_error(r, "INVALID_REQUEST", "X-Fakegate-Tenant: sent twice; send it once");
        r->obs.outcome = OUT_INVALID;
        return false;
    }
    if (!r->ovr_tenant)
        return true;
    if (!admit_key_accepted(g->cfg, r->ovr_tenant)) {
        snprintf(msg, sizeof msg, "X-Fakegate-Tenant: '%.80s' is not a secret key this server "
                 "accepts (--secret-key, or any test_sk_/test_gsk_ key)", r->ovr_tenant);
        request_error(r, "INVALID_REQUEST", msg);
        r->obs.outcome = OUT_INVALID;
        return false;
    }
    bool full = false;
    *t = gateway_tenant(g, r->ovr_tenant, create, &full);
    if (*t)
        return true;
    if (full)
        snprintf(msg, sizeof msg, "X-Fakegate-Tenant: more than %zu tenants (--max-tenants)",
                 g->max_tenants);
    else
        snprintf(msg, sizeof msg, "X-Fakegate-Tenant: no tenant '%.80s' yet (its first request, "
                 "or a PUT or reset naming it, creates it)", r->ovr_tenant);
    request_error(r, full ? "SERVICE_UNAVAILABLE" : "NOT_FOUND", msg);
    r->obs.outcome = OUT_INVALID;
    return false;
}

static void admin_entry(struct buf *b, const struct store *s, const char *mid,
                        const struct payment *p)
{
    buf_adds(b, "{\"payment\":");
    render_payment(b, store_ledger(s), mid, p, p->n_cancels, p->status);
    buf_adds(b, ",\"confirm_attempts\":");
    buf_add_i64(b, p->confirm_attempts);
    buf_adds(b, ",\"idempotency_keys\":[");
    for (uint32_t i = 0; i < p->n_idem_keys; i++) {
        if (i)
            buf_addc(b, ',');
        buf_add_json_strz(b, p->idem_keys[i]);
    }
    buf_adds(b, "],\"idempotency_keys_unlisted\":");
    buf_add_i64(b, p->idem_keys_unlisted);
    buf_adds(b, ",\"charges\":");
    buf_add_i64(b, p->charges);
    buf_adds(b, ",\"tenant\":");
    const char *key = tenant_key(s->owner);
    if (key)
        buf_add_json_strz(b, key);
    else
        buf_adds(b, "null");
    buf_addc(b, '}');
}

struct listing {
    const char *order_id;          /* NULL: every payment */
    struct buf *b;
    bool first;
};

static int list_locked(struct gateway *g, struct store *s, struct request *r, void *arg)
{
    (void)r;
    struct listing *l = arg;
    for (size_t i = 0; i < store_payment_count(s); i++) {
        struct payment *p = store_payment_at(s, i);
        gateway_expire(g, s, p); /* an expiry seen first here is a transition too */
        if (l->order_id && strcmp(p->order_id, l->order_id) != 0)
            continue;
        if (!l->first)
            buf_addc(l->b, ',');
        l->first = false;
        admin_entry(l->b, s, g->cfg->mid, p);
    }
    return 0;
}

enum handler_result admin_payments(struct gateway *g, struct request *r)
{
    struct tenant *only;
    if (!admin_tenant(g, r, false, &only))
        return H_RESPOND;
    struct buf b;
    buf_init(&b);
    buf_adds(&b, "{\"payments\":[");
    char *order_id = request_query(r, "orderId");
    struct listing l = {order_id, &b, true};
    bool down = false;
    for (struct tenant *t = only ? only : gateway_tenant_next(g, NULL); t && !down;
         t = only ? NULL : gateway_tenant_next(g, t))
        down = gateway_tenant_txn(g, t, list_locked, &l) == GATEWAY_STORE_DOWN;
    free(order_id);
    if (down) {
        buf_fini(&b);
        gateway_refuse_store(g, r);
        return H_RESPOND;
    }
    buf_adds(&b, "]}");
    return admin_respond(r, 200, &b);
}

enum handler_result admin_respond(struct request *r, int status, struct buf *b)
{
    if (b->oom) {
        buf_fini(b);
        request_error(r, "FAILED_INTERNAL_SYSTEM_PROCESSING", NULL);
        return H_RESPOND;
    }
    size_t len;
    char *body = buf_steal(b, &len);
    request_respond(r, status, body ? body : strdup(""), body ? len : 0);
    return H_RESPOND;
}

struct describing {
    const struct gateway *g;
    struct buf *b;
};

static void describe_applied(const struct applied *a, void *ctx)
{
    const struct describing *d = ctx;
    struct buf *b = d->b;
    const struct live *root = a->live;
    char at[32];
    fmt_kst(a->applied_unix_us, at);
    buf_adds(b, "{\"name\":");
    buf_add_json_strz(b, root->profile->name);
    buf_addf(b, ",\"applied_at\":\"%s\",\"seed\":%llu,\"phase\":", at,
             (unsigned long long)gateway_seed(d->g, a->profile));
    if (root->n_phases) {
        int64_t since;
        struct live *cur = live_current(a->live, now_mono_ns(), &since);
        size_t i = (size_t)(cur - root->phases);
        double left = root->profile->phases[i].for_s - (double)since / 1e9;
        buf_addf(b, "{\"index\":%zu,\"name\":", i);
        buf_add_json_strz(b, cur->profile->name);
        buf_addf(b, ",\"remaining_s\":%.3f}", left > 0 ? left : 0);
    } else {
        buf_adds(b, "null");
    }
    buf_adds(b, ",\"profile\":");
    buf_adds(b, a->profile->source ? a->profile->source : "null");
    buf_addc(b, '}');
}

/* GET /__admin/profile's answer for tenant t (NULL: the server). */
static enum handler_result describe(struct gateway *g, struct request *r, struct tenant *t)
{
    struct buf b;
    buf_init(&b);
    struct describing d = {g, &b};
    if (t)
        gateway_with_tenant_applied(g, t, describe_applied, &d);
    else
        gateway_with_applied(g, describe_applied, &d);
    return admin_respond(r, 200, &b);
}

enum handler_result admin_get_profile(struct gateway *g, struct request *r)
{
    struct tenant *t;
    return admin_tenant(g, r, false, &t) ? describe(g, r, t) : H_RESPOND;
}

int admin_parse_profile(struct gateway *g, const char *text, size_t len, struct profile **out,
                        char err[ERR_LEN])
{
    struct profile *p = NULL;
    size_t deep;
    /* Too deep: not parsed here at all; profile_parse refuses it with its place. */
    json_t *v = jsonpos_too_deep(text, len, PROFILE_MAX_DEPTH, &deep)
                    ? NULL
                    : json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
    json_t *name = v ? json_object_get(v, "name") : NULL;
    if (v && json_is_object(v) && json_object_size(v) == 1 && json_is_string(name)) {
        const char *n = json_string_value(name);
        if (!profile_name_valid(n)) {
            snprintf(err, ERR_LEN, "request body: name: a profile name is [a-z0-9_-]{1,64}");
        } else if (gateway_resolve(g, n, &p, err) != 0) {
            p = NULL;
        }
    } else if (profile_parse(text, len, "request body", g->resolve, g->resolve_ctx, &p, err) != 0) {
        p = NULL;
    }
    json_decref(v);
    *out = p;
    return p ? 0 : -1;
}

/* admin_parse_profile, or NULL with r answered 400 INVALID_PROFILE (message with
 * line:column). */
static struct profile *profile_from(struct gateway *g, struct request *r, const char *text,
                                    size_t len)
{
    char err[ERR_LEN];
    struct profile *p;
    if (admin_parse_profile(g, text, len, &p, err) != 0) {
        request_error(r, "INVALID_PROFILE", err);
        r->obs.outcome = OUT_INVALID;
    }
    return p;
}

/* cluster_limits_publish's step after the version is taken: a PUT's apply. */
static int put_apply(struct gateway *g, struct tenant *t, struct profile *p, uint64_t version,
                     void *ctx)
{
    (void)ctx;
    return t ? gateway_apply_tenant_shared(g, t, p, version) : gateway_apply_shared(g, p, version);
}

enum handler_result admin_put_profile(struct gateway *g, struct request *r)
{
    struct tenant *t;
    if (!admin_tenant(g, r, true, &t))
        return H_RESPOND;
    const char *text = r->body.data ? r->body.data : "";
    struct profile *p = profile_from(g, r, text, r->body.len);
    if (!p)
        return H_RESPOND;
    /* --store redis://: published first, so a profile Redis did not take is in force nowhere. */
    int rc = g->limits ? cluster_limits_publish(g->limits, t, text, r->body.len, false, p,
                                                put_apply, NULL)
                       : put_apply(g, t, p, 0, NULL);
    if (rc != 0 && g->limits) {
        gateway_refuse_store(g, r);
        return H_RESPOND;
    }
    if (rc != 0) {
        request_error(r, "FAILED_INTERNAL_SYSTEM_PROCESSING", NULL);
        return H_RESPOND;
    }
    return describe(g, r, t);
}

/* The shared journal (--store redis://) could not be read or reset: 503 naming the store. */
static enum handler_result shared_journal_down(struct request *r, const char *err)
{
    gateway_refuse_store_msg(r, err);
    return H_RESPOND;
}

/* cluster_limits_publish's step after the version is taken: a reset. */
static int reset_apply(struct gateway *g, struct tenant *t, struct profile *p, uint64_t version,
                       void *ctx)
{
    (void)ctx;
    return t ? gateway_reset_tenant_shared(g, t, p, version) : gateway_reset_shared(g, p, version);
}

enum handler_result admin_reset(struct gateway *g, struct request *r)
{
    struct tenant *t;
    if (!admin_tenant(g, r, true, &t))
        return H_RESPOND;
    /* Optional body {"profile": NAME | {...}}: apply it after the reset. */
    struct profile *p = NULL;
    char *ptext = NULL; /* its text, for the other instances (--store redis://) */
    if (r->body.len > 0) {
        size_t deep, line, col;
        if (jsonpos_too_deep(r->body.data, r->body.len, PROFILE_MAX_DEPTH + 1, &deep)) {
            /* {"profile": {...}}: a profile one level down; refused before it is parsed. */
            char msg[ERR_LEN];
            jsonpos_line_col(r->body.data, r->body.len, deep, &line, &col);
            snprintf(msg, sizeof msg, "request body:%zu:%zu: nested deeper than %d levels (the "
                     "most a profile may nest, inside {\"profile\": ...})", line, col,
                     PROFILE_MAX_DEPTH);
            request_error(r, "INVALID_PROFILE", msg);
            r->obs.outcome = OUT_INVALID;
            return H_RESPOND;
        }
        json_error_t jerr;
        json_t *v = json_loadb(r->body.data, r->body.len, JSON_REJECT_DUPLICATES, &jerr);
        json_t *prof = v && json_is_object(v) ? json_object_get(v, "profile") : NULL;
        if (!v || !json_is_object(v) || (json_object_size(v) > 0 && !prof)) {
            json_decref(v);
            request_error(r, "INVALID_REQUEST",
                          "reset takes no body, or {\"profile\": NAME or a profile object}");
            r->obs.outcome = OUT_INVALID;
            return H_RESPOND;
        }
        if (prof) {
            char *text = json_is_string(prof) ? NULL : json_dumps(prof, JSON_COMPACT);
            if (json_is_string(prof)) {
                json_t *wrap = json_pack("{s:O}", "name", prof);
                text = json_dumps(wrap, JSON_COMPACT);
                json_decref(wrap);
            }
            p = text ? profile_from(g, r, text, strlen(text)) : NULL;
            if (!p) {
                free(text);
                json_decref(v);
                return H_RESPOND;
            }
            ptext = text;
        }
        json_decref(v);
    }
    /* --store redis://: the new version first (the reset's profile, or the one in force anew,
     * on every instance), then the reset. */
    int rc = g->limits ? cluster_limits_publish(g->limits, t, ptext, ptext ? strlen(ptext) : 0,
                                                true, p, reset_apply, NULL)
                       : reset_apply(g, t, p, 0, NULL);
    free(ptext);
    if (rc == GATEWAY_STORE_DOWN || (rc != 0 && g->limits)) {
        gateway_refuse_store(g, r);
        return H_RESPOND;
    }
    if (g->cjournal) { /* the cluster's journal too (docs/cluster.md §11.8) */
        char err[ERR_LEN];
        if (cluster_journal_reset(g->cjournal, t ? tenant_key(t) : NULL, now_unix_us(), err) != 0)
            return shared_journal_down(r, err);
    }
    if (g->webhooks)
        webhooks_reset(g->webhooks, t);
    return describe(g, r, t);
}

size_t admin_requests_filter(const struct request *r, size_t max_limit, struct journal_filter *f,
                             char *values[ADMIN_MAX_FILTERS], char err[ERR_LEN])
{
    *f = (struct journal_filter){.route = -1, .status = -1, .outcome = -1,
                                 .max_limit = max_limit};
    size_t n_values = 0;
    err[0] = '\0';
    /* Every parameter is a filter: a misspelt one must not silently match everything. */
    for (const char *p = r->query; p && *p && !err[0]; p += strcspn(p, "&"), p += *p == '&') {
        size_t len = strcspn(p, "=&");
        if (len == 0)
            continue;
        char name[32];
        snprintf(name, sizeof name, "%.*s", (int)(len < sizeof name ? len : sizeof name - 1), p);
        char *value = n_values < ADMIN_MAX_FILTERS ? request_query(r, name) : NULL;
        if (!value) {
            snprintf(err, ERR_LEN, "%s: %s", name,
                     n_values < ADMIN_MAX_FILTERS ? "a value is required" : "too many filters");
            break;
        }
        values[n_values++] = value;
        journal_filter_set(f, name, value, err, ERR_LEN);
    }
    return n_values;
}

/* --store redis://: every instance's requests, from the shared journal; this instance's own
 * appended first, so a client that asks the instance it used sees its request. */
static enum handler_result shared_requests(struct gateway *g, struct request *r, struct tenant *t,
                                           struct journal_filter *f)
{
    char err[ERR_LEN];
    struct buf b;
    buf_init(&b);
    cluster_journal_flush(g->cjournal, SHARED_FLUSH_MS);
    f->tenant = t ? tenant_key(t) : NULL;
    if (cluster_journal_requests(g->cjournal, f, g->journal.cap, &b, err) != 0) {
        buf_fini(&b);
        return shared_journal_down(r, err);
    }
    return admin_respond(r, 200, &b);
}

enum handler_result admin_requests(struct gateway *g, struct request *r)
{
    struct tenant *t;
    if (!admin_tenant(g, r, false, &t))
        return H_RESPOND;
    struct journal_filter f;
    char *values[ADMIN_MAX_FILTERS];
    char err[ERR_LEN];
    size_t n_values = admin_requests_filter(r, g->journal.cap, &f, values, err);
    enum handler_result h;
    if (err[0]) {
        request_error(r, "INVALID_REQUEST", err);
        h = H_RESPOND;
    } else {
        if (t && !g->cjournal) { /* its entries only, and none from before its last reset */
            f.tenant = tenant_key(t);
            uint64_t floor = atomic_load(&t->journal_floor);
            if (floor > 0 && f.since_id < floor - 1)
                f.since_id = floor - 1;
        }
        if (g->cjournal) {
            h = shared_requests(g, r, t, &f);
        } else {
            size_t n, total;
            struct journal_entry *v = journal_copy_filtered(&g->journal, &f, &n, &total);
            struct buf b;
            buf_init(&b);
            journal_render(&b, v, n, total);
            journal_free_copy(v, n);
            h = admin_respond(r, 200, &b);
        }
    }
    for (size_t i = 0; i < n_values; i++)
        free(values[i]);
    return h;
}

enum handler_result admin_metrics(struct gateway *g, struct request *r)
{
    struct buf b;
    buf_init(&b);
    metrics_render(&b, &g->metrics, &g->flight, gateway_idem_records(g));
    if (g->webhooks)
        webhooks_render_metrics(g->webhooks, &b);
    if (g->cluster) {
        struct cluster_status cs;
        cluster_status(g->cluster, &cs);
        buf_adds(&b, "# HELP fakegate_store_up 1 when the last command to the shared store "
                     "(--store redis://) reached it, else 0.\n# TYPE fakegate_store_up gauge\n");
        buf_addf(&b, "fakegate_store_up %d\n", cs.up ? 1 : 0);
        buf_adds(&b, "# HELP fakegate_store_errors_total Commands to the shared store that "
                     "failed (unreachable, timed out, busy lease, lost lease).\n"
                     "# TYPE fakegate_store_errors_total counter\n");
        buf_addf(&b, "fakegate_store_errors_total %llu\n", (unsigned long long)cs.errors);
        buf_adds(&b, "# HELP fakegate_store_log_applied Lines of the shared log this replica "
                     "has applied.\n# TYPE fakegate_store_log_applied gauge\n");
        buf_addf(&b, "fakegate_store_log_applied %llu\n", (unsigned long long)cs.applied);
        if (g->cjournal) {
            struct cluster_journal_stats js;
            cluster_journal_stats(g->cjournal, &js);
            buf_adds(&b, "# HELP fakegate_store_journal_written_total Journal entries this "
                         "instance appended to the shared journal.\n"
                         "# TYPE fakegate_store_journal_written_total counter\n");
            buf_addf(&b, "fakegate_store_journal_written_total %llu\n",
                     (unsigned long long)js.written);
            buf_adds(&b, "# HELP fakegate_store_journal_lost_total Journal entries this instance "
                         "could not append (the store failed, or its queue was full).\n"
                         "# TYPE fakegate_store_journal_lost_total counter\n");
            buf_addf(&b, "fakegate_store_journal_lost_total %llu\n", (unsigned long long)js.lost);
            buf_adds(&b, "# HELP fakegate_store_journal_errors_total Commands of the shared "
                         "journal that failed.\n"
                         "# TYPE fakegate_store_journal_errors_total counter\n");
            buf_addf(&b, "fakegate_store_journal_errors_total %llu\n",
                     (unsigned long long)js.errors);
        }
    }
    enum handler_result h = admin_respond(r, 200, &b);
    r->resp.content_type = "text/plain; version=0.0.4; charset=utf-8";
    return h;
}

enum handler_result admin_report(struct gateway *g, struct request *r)
{
    struct tenant *t;
    if (!admin_tenant(g, r, false, &t))
        return H_RESPOND;
    struct buf b;
    buf_init(&b);
    if (g->cjournal) { /* the whole cluster's requests (docs/cluster.md §11.8) */
        char err[ERR_LEN];
        cluster_journal_flush(g->cjournal, SHARED_FLUSH_MS);
        if (cluster_journal_report(g->cjournal, t ? tenant_key(t) : NULL, &b, err) != 0) {
            buf_fini(&b);
            return shared_journal_down(r, err);
        }
        return admin_respond(r, 200, &b);
    }
    if (t) {
        report_render_state(&t->report, &b);
        return admin_respond(r, 200, &b);
    }
    /* The whole server: every tenant's report and the one of requests with no key. The list
     * is walked, not n_tenants read: that is written under the tenants lock. */
    size_t cap = 1, n = 0;
    for (struct tenant *x = gateway_tenant_next(g, NULL); x; x = gateway_tenant_next(g, x))
        cap++;
    struct report **v = malloc(cap * sizeof *v);
    if (!v) {
        request_error(r, "FAILED_INTERNAL_SYSTEM_PROCESSING", NULL);
        return H_RESPOND;
    }
    v[n++] = &g->report;
    for (struct tenant *x = gateway_tenant_next(g, NULL); x && n < cap;
         x = gateway_tenant_next(g, x))
        v[n++] = &x->report;
    report_render_merged(v, n, &b);
    free(v);
    return admin_respond(r, 200, &b);
}
