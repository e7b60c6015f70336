/* gateway.c -- the gateway's state and lifecycle (see gateway.h). Invariants: the store lock
 * is defined, taken and released here alone, always through gateway_txn's one unlock path;
 * the generation changes only under it, so a section that found its request's generation
 * current works on the ledger that request was admitted to. */
#define _DEFAULT_SOURCE
#include "gateway.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "cluster_limits.h"
#include "common.h"
#include "request.h"
#include "rng.h"
#include "statefile.h"
#include "webhook.h"

/* The stores' event sink: every subscriber, in subscription order. */
void gateway_publish(void *ctx, const struct payment_event *ev);
void gateway_publish(void *ctx, const struct payment_event *ev)
{
    struct gateway *g = ctx;
    for (size_t i = 0; i < g->n_subscribers; i++)
        g->subscribers[i].fn(g->subscribers[i].ctx, ev);
}

int gateway_init(struct gateway *g, const struct config *cfg, profile_resolver resolve,
                 void *resolve_ctx, struct profile *profile, uint64_t seed,
                 uint64_t instance_id)
{
    memset(g, 0, sizeof *g);
    pthread_mutex_init(&g->lock, NULL);
    g->cfg = cfg;
    g->resolve = resolve;
    g->resolve_ctx = resolve_ctx;
    pthread_mutex_init(&g->apply_lock, NULL);
    metrics_reset(&g->metrics);
    g->seed = seed;
    g->instance_id = instance_id;
    g->started_unix_us = now_unix_us();
    size_t max_ids = cfg->report_max_identities ? cfg->report_max_identities
                                                : REPORT_MAX_IDENTITIES_DEFAULT;
    if (journal_init(&g->journal, cfg->journal_size ? cfg->journal_size : JOURNAL_SIZE_DEFAULT) != 0 ||
        report_init(&g->report, max_ids, g->started_unix_us, 1,
                    cfg->idempotency_ttl_s * 1000000) != 0 ||
        !(g->timeline = timeline_new()) || gateway_tenants_init(g) != 0) {
        profile_free(profile);
        return -1;
    }
    return gateway_apply(g, profile);
}

void gateway_attach_state(struct gateway *g, struct statefile *sf)
{
    g->state = sf;
    for (struct tenant *t = gateway_tenant_next(g, NULL); t; t = gateway_tenant_next(g, t))
        t->store.log = sf;
}

int gateway_subscribe(struct gateway *g, store_event_fn fn, void *ctx)
{
    if (g->n_subscribers == GATEWAY_MAX_SUBSCRIBERS)
        return -1;
    g->subscribers[g->n_subscribers].fn = fn;
    g->subscribers[g->n_subscribers].ctx = ctx;
    g->n_subscribers++;
    return 0;
}

uint64_t gateway_seed(const struct gateway *g, const struct profile *p)
{
    return !g->cfg->has_seed && p->has_seed ? p->seed : g->seed;
}

/* A section on the shared store (--store redis://, docs/cluster.md), store lock held: catch
 * up on the log under the cluster lease, run fn, commit its line. GATEWAY_STORE_DOWN when the
 * store could not be reached before fn (nothing ran) or after it (its changes are not kept:
 * the replica rebuilds from the log at its next section). */
static int shared_section(struct gateway *g, struct tenant *t, struct request *r,
                          gateway_txn_fn fn, void *arg)
{
    if (cluster_begin(g->cluster) != 0) {
        /* r's claim is in the log, and only r may release it: start again from the log, where
         * the rebuild finds it this instance's and nobody's. */
        if (r && r->claim)
            cluster_mark_rebuild(g->cluster);
        return GATEWAY_STORE_DOWN;
    }
    int rc;
    if (r && r->adm.generation != t->generation) {
        rc = GATEWAY_STRADDLED;
        if (cluster_rebuilt(g->cluster)) { /* not a reset: the replica's own rebuild */
            cluster_note_rebuilt(g->cluster);
            rc = GATEWAY_STORE_DOWN;
        }
    } else {
        rc = fn(g, &t->store, r, arg);
    }
    return cluster_commit(g->cluster) == 0 ? rc : GATEWAY_STORE_DOWN;
}

int gateway_txn(struct gateway *g, struct request *r, gateway_txn_fn fn, void *arg)
{
    struct tenant *t = r->adm.tenant;
    assert(t); /* admitted: authenticated, with its tenant */
    pthread_mutex_lock(&g->lock);
    int rc;
    if (g->cluster) {
        rc = shared_section(g, t, r, fn, arg);
    } else {
        rc = r->adm.generation != t->generation ? GATEWAY_STRADDLED : fn(g, &t->store, r, arg);
        statefile_commit(g->state); /* the section's changes reach the file before its answer */
    }
    pthread_mutex_unlock(&g->lock);
    if (rc == GATEWAY_STORE_DOWN) {
        gateway_refuse_store(g, r);
        rc = GATEWAY_STRADDLED;
    }
    return rc;
}

int gateway_tenant_txn(struct gateway *g, struct tenant *t, gateway_txn_fn fn, void *arg)
{
    pthread_mutex_lock(&g->lock);
    int rc;
    if (g->cluster) {
        rc = shared_section(g, t, NULL, fn, arg);
    } else {
        rc = fn(g, &t->store, NULL, arg);
        statefile_commit(g->state);
    }
    pthread_mutex_unlock(&g->lock);
    return rc;
}

void gateway_refuse_store_msg(struct request *r, const char *msg)
{
    request_error(r, "SERVICE_UNAVAILABLE", msg);
    r->resp.internal = true;
    r->obs.outcome = OUT_CAPPED;
    r->obs.store_down = true;
}

void gateway_refuse_store(struct gateway *g, struct request *r)
{
    char msg[400];
    cluster_message(g->cluster, msg, sizeof msg);
    gateway_refuse_store_msg(r, msg);
}

bool gateway_expire(struct gateway *g, struct store *s, struct payment *p)
{
    if (p->va)
        return store_expire_va(s, p, gateway_now_us(g));
    return store_expire(s, p, gateway_now_us(g), g->cfg->session_ttl_s * 1000000);
}

int64_t gateway_now_us(const struct gateway *g)
{
    return now_unix_us() + atomic_load(&g->clock_offset_us);
}

/* The clock's move as a section of the shared store: its record goes through the log. */
static int clock_locked(struct gateway *g, struct store *s, struct request *r, void *arg)
{
    (void)s;
    (void)r;
    int64_t us = *(const int64_t *)arg;
    statefile_clock_locked(g->state, atomic_fetch_add(&g->clock_offset_us, us) + us);
    return 0;
}

int gateway_clock_advance(struct gateway *g, int64_t us)
{
    assert(us >= 0);
    if (!g->cluster)
        statefile_clock(g->state, &g->clock_offset_us, us);
    else if (gateway_tenant_txn(g, g->first, clock_locked, &us) == GATEWAY_STORE_DOWN)
        return GATEWAY_STORE_DOWN;
    gateway_sweep_expired(g);
    if (g->webhooks)
        webhooks_wake(g->webhooks);
    return 0;
}

static int count_idem_locked(struct gateway *g, struct store *s, struct request *r, void *arg)
{
    (void)g;
    (void)r;
    *(size_t *)arg += store_idem_count(s);
    return 0;
}

/* Idempotency records freed per store-lock section, and sections per tenant per sweep: a
 * request waits behind one batch at most (a few hundred microseconds), and a sweep frees up to
 * 256 Ki records a tenant, far more than a second's worth of claims. */
#define IDEM_SWEEP_BATCH 4096
#define IDEM_SWEEP_BATCHES 64

static int idem_sweep_locked(struct gateway *g, struct store *s, struct request *r, void *arg)
{
    (void)r;
    bool *more = arg;
    store_idem_sweep(s, gateway_now_us(g) * 1000, IDEM_SWEEP_BATCH, more);
    return 0;
}

/* Attempt counters freed per shard-lock section (16 shards a batch): the counters have locks
 * of their own, so a batch holds up only the requests whose identity hashes to that shard. */
#define ATTEMPTS_SWEEP_BATCH 1024

/* Report identities forgotten per report-lock section (report_sweep): the report's lock is
 * taken by every request's judging, so a batch is short. */
#define REPORT_SWEEP_BATCH 4096

/* Forget the identities of report rp idle for the TTL, in batches. */
static void sweep_report(struct gateway *g, struct report *rp)
{
    bool more = true;
    for (int i = 0; i < IDEM_SWEEP_BATCHES && more; i++)
        report_sweep(rp, gateway_now_us(g), REPORT_SWEEP_BATCH, &more);
}

/* What one sweep learnt of other instances, so each is asked about once per tenant's pass
 * however many of its claims are PROCESSING. */
struct dead_judge {
    struct cluster *c;
    size_t n;
    struct {
        uint64_t id;
        int gone;
    } seen[16];
};

/* statefile_release_dead's judge: is instance `id` gone (its heartbeat lapsed)? */
static int instance_dead(void *ctx, uint64_t id)
{
    struct dead_judge *j = ctx;
    if (id == cluster_instance(j->c))
        return 0;
    for (size_t i = 0; i < j->n; i++)
        if (j->seen[i].id == id)
            return j->seen[i].gone;
    int gone = cluster_instance_gone(j->c, id);
    if (j->n < sizeof j->seen / sizeof *j->seen) {
        j->seen[j->n].id = id;
        j->seen[j->n++].gone = gone;
    }
    return gone;
}

/* The session sweep and, with --store redis://, the release of the claims of instances that
 * died holding them (their heartbeat lapsed), as a claim left PROCESSING by a crash is
 * released at a state file's replay (docs/cluster.md §11.2): one section a tenant. */
static int sweep_locked(struct gateway *g, struct store *s, struct request *r, void *arg)
{
    if (g->cluster) {
        struct dead_judge j = {.c = g->cluster};
        statefile_release_dead(g->state, s, instance_dead, &j);
    }
    return gateway_sweep_locked(g, s, r, arg);
}

size_t gateway_sweep_expired(struct gateway *g)
{
    size_t n = 0;
    if (g->cluster) /* once a second: this instance is alive (and each section catches up) */
        cluster_heartbeat(g->cluster);
    if (g->limits) /* the cap slots of requests in flight here are still held */
        cluster_limits_heartbeat(g->limits);
    for (struct tenant *t = gateway_tenant_next(g, NULL); t; t = gateway_tenant_next(g, t)) {
        gateway_tenant_txn(g, t, sweep_locked, &n);
        bool more = true;
        for (int i = 0; i < IDEM_SWEEP_BATCHES && more; i++)
            gateway_tenant_txn(g, t, idem_sweep_locked, &more);
        more = true;
        for (int i = 0; i < IDEM_SWEEP_BATCHES && more; i++)
            store_attempts_sweep(&t->store, gateway_now_us(g), ATTEMPTS_SWEEP_BATCH, &more);
        sweep_report(g, &t->report);
    }
    sweep_report(g, &g->report);
    return n;
}

size_t gateway_idem_records(struct gateway *g)
{
    size_t n = 0;
    for (struct tenant *t = gateway_tenant_next(g, NULL); t; t = gateway_tenant_next(g, t))
        gateway_tenant_txn(g, t, count_idem_locked, &n);
    return n;
}

struct live *gateway_live(struct gateway *g)
{
    return atomic_load(&g->live);
}

struct applied *gateway_applied_new(struct profile *p)
{
    struct applied *a = calloc(1, sizeof *a);
    if (a) {
        a->profile = p;
        a->owns = true;
        a->live = live_new(p, now_mono_ns());
        a->applied_unix_us = now_unix_us();
    }
    if (!a || !a->live) {
        free(a);
        profile_free(p);
        return NULL;
    }
    return a;
}

int gateway_apply(struct gateway *g, struct profile *p)
{
    return gateway_apply_shared(g, p, 0);
}

int gateway_apply_shared(struct gateway *g, struct profile *p, uint64_t version)
{
    struct applied *a = gateway_applied_new(p);
    if (!a)
        return -1;
    live_set_version(a->live, version);
    pthread_mutex_lock(&g->apply_lock);
    a->prev = g->applied;
    g->applied = a;
    atomic_store(&g->live, a->live);
    pthread_mutex_unlock(&g->apply_lock);
    return 0;
}

int gateway_resolve(struct gateway *g, const char *name, struct profile **out,
                    char err[ERR_LEN])
{
    if (!g->resolve) {
        snprintf(err, ERR_LEN, "no profiles directory");
        return -1;
    }
    return g->resolve(name, out, err, g->resolve_ctx);
}

struct live *gateway_named_live(struct gateway *g, const char *name, char err[ERR_LEN])
{
    if (!profile_name_valid(name)) {
        snprintf(err, ERR_LEN, "a profile name is [a-z0-9_-]{1,64}");
        return NULL;
    }
    pthread_mutex_lock(&g->apply_lock);
    struct applied *a = g->named;
    while (a && strcmp(a->profile->name, name) != 0)
        a = a->prev;
    if (!a) {
        struct profile *p = NULL;
        if (gateway_resolve(g, name, &p, err) == 0 && (a = calloc(1, sizeof *a)) &&
            (a->live = live_new(p, now_mono_ns()))) {
            a->profile = p;
            a->prev = g->named;
            g->named = a;
        } else {
            free(a);
            a = NULL;
            profile_free(p);
        }
    }
    pthread_mutex_unlock(&g->apply_lock);
    return a ? a->live : NULL;
}

char *gateway_profile_file(struct gateway *g, char name[PROFILE_NAME_MAX + 1])
{
    pthread_mutex_lock(&g->apply_lock);
    const struct profile *p = g->applied->profile; /* never NULL after init */
    snprintf(name, PROFILE_NAME_MAX + 1, "%s", p->name);
    char *file = p->file ? strdup(p->file) : NULL;
    pthread_mutex_unlock(&g->apply_lock);
    return file;
}

void gateway_with_applied(struct gateway *g, void (*fn)(const struct applied *a, void *ctx),
                          void *ctx)
{
    pthread_mutex_lock(&g->apply_lock);
    fn(g->applied, ctx);
    pthread_mutex_unlock(&g->apply_lock);
}

/* Every tenant's store emptied in one section (with --store redis://, one line of the log). */
static int reset_stores(struct gateway *g, struct store *s, struct request *r, void *arg)
{
    (void)s;
    (void)arg;
    if (atomic_exchange(&g->clock_offset_us, 0) != 0)
        statefile_clock_locked(g->state, 0);
    __atomic_store_n(&g->generation, g->generation + 1, __ATOMIC_RELEASE);
    for (struct tenant *t = gateway_tenant_next(g, NULL); t; t = gateway_tenant_next(g, t))
        gateway_tenant_reset_locked(g, &t->store, r, NULL);
    return 0;
}

/* The profile part of a server-wide reset (apply_lock held, `a` calloc'd or NULL): every
 * tenant's own profile state anew, the X-Fakegate-Profile cache dropped, then `p` (owned) or the
 * active profile anew, stamped with shared profile version `version`. */
static void reapply_locked(struct gateway *g, struct profile *p, struct applied *a,
                           uint64_t version)
{
    for (struct tenant *t = gateway_tenant_next(g, NULL); t; t = gateway_tenant_next(g, t))
        gateway_tenant_refresh_locked(g, t, version);
    /* Profiles named by X-Fakegate-Profile start afresh too: the next request that names one
     * loads it again, with full buckets and unused budgets. */
    if (g->named) {
        struct applied *last = g->named;
        while (last->prev)
            last = last->prev;
        last->prev = g->retired;
        g->retired = g->named;
        g->named = NULL;
    }
    /* Fresh buckets, budgets and window phases: the given profile, or the active one anew. */
    const struct profile *cur = p ? p : g->applied->profile; /* never NULL after init */
    struct live *l = a ? live_new(cur, now_mono_ns()) : NULL;
    if (l) {
        live_set_version(l, version);
        a->profile = (struct profile *)cur; /* the active one stays owned by its older entry */
        a->owns = p != NULL;
        a->live = l;
        a->applied_unix_us = now_unix_us();
        a->prev = g->applied;
        g->applied = a;
        atomic_store(&g->live, l);
    } else {
        free(a);
        profile_free(p); /* out of memory: the active profile stays, with its state */
    }
}

int gateway_reset(struct gateway *g, struct profile *p)
{
    return gateway_reset_shared(g, p, 0);
}

int gateway_reset_shared(struct gateway *g, struct profile *p, uint64_t version)
{
    /* One step under apply_lock: no profile change, other reset or named lookup can land
     * between emptying the store and applying the profile. */
    struct applied *a = calloc(1, sizeof *a);
    pthread_mutex_lock(&g->apply_lock);
    if (gateway_tenant_txn(g, g->first, reset_stores, NULL) == GATEWAY_STORE_DOWN) {
        pthread_mutex_unlock(&g->apply_lock);
        free(a);
        profile_free(p);
        return GATEWAY_STORE_DOWN;
    }
    /* The cluster's attempt counters, every tenant's (a replica may not know them all). */
    if (g->cluster)
        cluster_attempts_reset(g->cluster, NULL, true);
    journal_reset(&g->journal);
    uint64_t first = atomic_load(&g->journal.first_id);
    int64_t now = now_unix_us();
    report_reset(&g->report, now, first);
    timeline_clear(g->timeline);
    for (struct tenant *t = gateway_tenant_next(g, NULL); t; t = gateway_tenant_next(g, t)) {
        store_attempts_reset(&t->store, false);
        report_reset(&t->report, now, first);
        if (atomic_load(&t->timeline))
            timeline_clear(atomic_load(&t->timeline));
        atomic_store(&t->journal_floor, first);
    }
    metrics_reset(&g->metrics);
    flight_reset_peaks(&g->flight);
    reapply_locked(g, p, a, version);
    pthread_mutex_unlock(&g->apply_lock);
    return 0;
}

void gateway_reapply(struct gateway *g, struct profile *p, uint64_t version)
{
    struct applied *a = calloc(1, sizeof *a);
    pthread_mutex_lock(&g->apply_lock);
    reapply_locked(g, p, a, version);
    pthread_mutex_unlock(&g->apply_lock);
}

static void free_named(struct applied *a)
{
    for (struct applied *prev; a; a = prev) {
        prev = a->prev;
        live_free(a->live);
        profile_free(a->profile);
        free(a);
    }
}

void gateway_fini(struct gateway *g)
{
    free_named(g->named);
    free_named(g->retired);
    for (struct applied *a = g->applied, *prev; a; a = prev) {
        prev = a->prev;
        live_free(a->live);
        if (a->owns)
            profile_free(a->profile);
        free(a);
    }
    gateway_tenants_fini(g);
    journal_fini(&g->journal);
    report_fini(&g->report);
    timeline_free(g->timeline);
    pthread_mutex_destroy(&g->apply_lock);
    pthread_mutex_destroy(&g->lock);
}
