/* tenant.c -- tenants: one merchant's state per secret key (docs/tenants.md §9), kept by the
 * gateway (gateway.h). A tenant is created on its key's first use and lives until exit, so a
 * request, a journal entry or a delivery may keep a pointer to it; a reset empties it. The
 * first tenant is the default one: it exists from the start (for --secret-key's first key, or
 * keyless until the first key that arrives adopts it), holds the sessions registered without
 * X-Fakegate-Tenant, and shares the server's profile state, so a server used with one key works
 * exactly as one without tenants. Invariants: the map and the list change only under the
 * tenants lock (written), and a tenant is never removed from them. */
#define _DEFAULT_SOURCE
#include "gateway.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "rng.h"

/* The store's event sink is the gateway's (gateway.c). */
void gateway_publish(void *ctx, const struct payment_event *ev);

static struct tenant *tenant_new(struct gateway *g, const char *key)
{
    struct tenant *t = calloc(1, sizeof *t);
    if (!t || (key && !(t->key = strdup(key)))) {
        free(t);
        return NULL;
    }
    size_t max_ids = g->cfg->report_max_identities ? g->cfg->report_max_identities
                                                   : REPORT_MAX_IDENTITIES_DEFAULT;
    if (report_init(&t->report, max_ids, now_unix_us(), atomic_load(&g->journal.first_id),
                    g->cfg->idempotency_ttl_s * 1000000) != 0) {
        free(t->key);
        free(t);
        return NULL;
    }
    t->index = (uint32_t)g->n_tenants;
    /* Each ledger its own salt: no two tenants' transaction keys or secrets are alike. */
    store_init(&t->store, mix64(g->instance_id ^ mix64(t->index + 1)),
               g->cfg->idempotency_ttl_s * NS_PER_S, gateway_publish, g);
    t->store.owner = t;
    t->store.log = g->state;
    t->store.tenant_key = &t->key;
    const struct config *cfg = g->cfg;
    store_set_limits(&t->store,
                     cfg->max_idempotency_records ? cfg->max_idempotency_records
                                                  : GATEWAY_MAX_IDEM_RECORDS_DEFAULT,
                     cfg->max_payments ? cfg->max_payments : GATEWAY_MAX_PAYMENTS_DEFAULT);
    t->generation = g->generation;
    atomic_store(&t->journal_floor, atomic_load(&g->journal.first_id));
    return t;
}

static void free_applied(struct applied *a)
{
    for (struct applied *prev; a; a = prev) {
        prev = a->prev;
        live_free(a->live);
        if (a->owns)
            profile_free(a->profile);
        free(a);
    }
}

static void tenant_free(struct tenant *t)
{
    free_applied(t->own);
    free_applied(t->lives);
    free(t->expiry_held);
    report_fini(&t->report);
    timeline_free(atomic_load(&t->timeline));
    store_fini(&t->store);
    free(t->key);
    free(t);
}

int gateway_tenants_init(struct gateway *g)
{
    pthread_mutex_init(&g->tenants_lock, NULL);
    strmap_init(&g->tenants);
    g->max_tenants = g->cfg->max_tenants ? g->cfg->max_tenants : GATEWAY_MAX_TENANTS_DEFAULT;
    const char *key = g->cfg->n_secret_keys ? g->cfg->secret_keys[0] : NULL;
    struct tenant *t = tenant_new(g, key);
    if (!t || (key && strmap_put(&g->tenants, t->key, strlen(t->key), t) == t)) {
        if (t)
            tenant_free(t);
        return -1;
    }
    g->first = g->last = t;
    g->n_tenants = 1;
    return 0;
}

void gateway_tenants_fini(struct gateway *g)
{
    for (struct tenant *t = g->first, *next; t; t = next) {
        next = t->next;
        tenant_free(t);
    }
    strmap_fini(&g->tenants);
    pthread_mutex_destroy(&g->tenants_lock);
}

struct tenant *gateway_tenant(struct gateway *g, const char *key, bool create, bool *full)
{
    if (full)
        *full = false;
    size_t len = strlen(key);
    pthread_mutex_lock(&g->tenants_lock);
    struct tenant *t = strmap_get(&g->tenants, key, len);
    pthread_mutex_unlock(&g->tenants_lock);
    if (t || !create)
        return t;
    pthread_mutex_lock(&g->tenants_lock);
    t = strmap_get(&g->tenants, key, len);
    if (!t && !g->first->key) {
        /* The default tenant, keyless until now: the first key adopts it. */
        char *k = strdup(key);
        if (k && strmap_put(&g->tenants, k, len, g->first) != g->first) {
            __atomic_store_n(&g->first->key, k, __ATOMIC_RELEASE);
            t = g->first;
        } else {
            free(k);
        }
    } else if (!t && g->n_tenants >= g->max_tenants) {
        if (full)
            *full = true;
    } else if (!t) {
        t = tenant_new(g, key);
        if (t && strmap_put(&g->tenants, t->key, len, t) == t) {
            tenant_free(t);
            t = NULL;
        }
        if (t) {
            g->n_tenants++;
            __atomic_store_n(&g->last->next, t, __ATOMIC_RELEASE);
            g->last = t;
        }
    }
    pthread_mutex_unlock(&g->tenants_lock);
    return t;
}

struct tenant *gateway_tenant_next(struct gateway *g, struct tenant *t)
{
    return t ? __atomic_load_n(&t->next, __ATOMIC_ACQUIRE) : g->first;
}

uint64_t tenant_generation(const struct tenant *t)
{
    return __atomic_load_n(&t->generation, __ATOMIC_ACQUIRE);
}

const char *tenant_key(const struct tenant *t)
{
    return t ? __atomic_load_n(&t->key, __ATOMIC_ACQUIRE) : NULL;
}

/* A fresh state of the server's profile (src) for t (apply_lock held), counted from
 * `origin_ns`, stamped with the shared profile version `version`. 0, or -1 on out of memory
 * (t keeps the one it has). */
static int derive_live(struct tenant *t, struct live *src, int64_t origin_ns, uint64_t version)
{
    struct applied *a = calloc(1, sizeof *a);
    if (!a || !(a->live = live_new(src->profile, origin_ns))) {
        free(a);
        return -1;
    }
    live_set_version(a->live, version);
    a->profile = (struct profile *)src->profile; /* owned by the server's applied entry */
    a->applied_unix_us = now_unix_us();
    a->prev = t->lives;
    t->lives = a;
    t->live_for = src;
    atomic_store(&t->live, a->live);
    return 0;
}

struct live *gateway_tenant_live(struct gateway *g, struct tenant *t)
{
    struct live *server = atomic_load(&g->live);
    struct live *l = atomic_load(&t->live);
    if (l && (t->live_for == NULL || t->live_for == server))
        return l; /* its own profile, or its state of the server's current one */
    pthread_mutex_lock(&g->apply_lock);
    server = atomic_load(&g->live);
    if (!atomic_load(&t->live) || (t->live_for && t->live_for != server)) {
        if (t == g->first) {
            /* The default tenant shares the server's state: one key, no difference. */
            t->live_for = server;
            atomic_store(&t->live, server);
        } else if (derive_live(t, server, server->origin_ns, server->version) != 0 && !atomic_load(&t->live)) {
            t->live_for = server;
            atomic_store(&t->live, server); /* out of memory: share rather than fail */
        }
    }
    l = atomic_load(&t->live);
    pthread_mutex_unlock(&g->apply_lock);
    return l;
}

/* t's own profile in force, or NULL (apply_lock held). */
static const struct applied *own_of(const struct tenant *t)
{
    return t->live_for == NULL ? t->own : NULL;
}

int gateway_apply_tenant(struct gateway *g, struct tenant *t, struct profile *p)
{
    return gateway_apply_tenant_shared(g, t, p, 0);
}

int gateway_apply_tenant_shared(struct gateway *g, struct tenant *t, struct profile *p,
                                uint64_t version)
{
    struct applied *a = gateway_applied_new(p);
    if (!a)
        return -1;
    live_set_version(a->live, version);
    pthread_mutex_lock(&g->apply_lock);
    a->prev = t->own;
    t->own = a;
    t->live_for = NULL;
    atomic_store(&t->live, a->live);
    pthread_mutex_unlock(&g->apply_lock);
    return 0;
}

void gateway_with_tenant_applied(struct gateway *g, struct tenant *t,
                                 void (*fn)(const struct applied *a, void *ctx), void *ctx)
{
    pthread_mutex_lock(&g->apply_lock);
    const struct applied *own = own_of(t);
    fn(own ? own : g->applied, ctx);
    pthread_mutex_unlock(&g->apply_lock);
}

/* Fresh buckets, budgets and windows for t (apply_lock held): its own profile applied anew,
 * or (all_of_it) a fresh state of the server's; stamped with shared profile version
 * `version`. */
static void refresh_live(struct gateway *g, struct tenant *t, bool all_of_it, uint64_t version)
{
    struct applied *own = (struct applied *)own_of(t);
    if (own) {
        struct applied *a = calloc(1, sizeof *a);
        if (a && (a->live = live_new(own->profile, now_mono_ns()))) {
            live_set_version(a->live, version);
            a->profile = own->profile; /* owned by the older entry */
            a->applied_unix_us = now_unix_us();
            a->prev = t->own;
            t->own = a;
            atomic_store(&t->live, a->live);
        } else {
            free(a);
        }
        return;
    }
    if (all_of_it)
        derive_live(t, atomic_load(&g->live), now_mono_ns(), version);
}

void gateway_tenant_refresh_locked(struct gateway *g, struct tenant *t, uint64_t version)
{
    refresh_live(g, t, false, version); /* the server's state is applied anew by the reset */
}

void gateway_tenant_reapply(struct gateway *g, struct tenant *t, struct profile *p,
                            uint64_t version)
{
    if (p) {
        gateway_apply_tenant_shared(g, t, p, version);
        return;
    }
    pthread_mutex_lock(&g->apply_lock);
    refresh_live(g, t, true, version);
    pthread_mutex_unlock(&g->apply_lock);
}

/* Sweep one tenant's expired sessions (see gateway_sweep_expired). */
static bool sweep_one(struct gateway *g, struct store *s, struct payment *p, int64_t now_us,
                      size_t *n)
{
    if (p->status != PAY_IN_PROGRESS)
        return true;
    if (p->processing)
        return false;
    if (store_expire(s, p, now_us, g->cfg->session_ttl_s * 1000000)) {
        (*n)++;
        return true;
    }
    return false;
}

int gateway_sweep_locked(struct gateway *g, struct store *s, struct request *r, void *arg)
{
    (void)r;
    struct tenant *t = s->owner;
    size_t *n = arg;
    int64_t now_us = gateway_now_us(g), ttl_us = g->cfg->session_ttl_s * 1000000;
    size_t keep = 0;
    for (size_t i = 0; i < t->n_expiry_held; i++)
        if (!sweep_one(g, s, t->expiry_held[i], now_us, n))
            t->expiry_held[keep++] = t->expiry_held[i];
    t->n_expiry_held = keep;
    /* Sessions were created in business-time order: stop at the first one not yet over. */
    while (t->expiry_cursor < store_payment_count(s)) {
        struct payment *p = store_payment_at(s, t->expiry_cursor);
        if (p->status == PAY_IN_PROGRESS && now_us - p->requested_at_us < ttl_us)
            break;
        if (!sweep_one(g, s, p, now_us, n)) {
            if (t->n_expiry_held == t->cap_expiry_held) {
                size_t cap = t->cap_expiry_held ? 2 * t->cap_expiry_held : 16;
                struct payment **grown = realloc(t->expiry_held, cap * sizeof *grown);
                if (!grown)
                    break; /* looked at again on the next sweep */
                t->expiry_held = grown;
                t->cap_expiry_held = cap;
            }
            t->expiry_held[t->n_expiry_held++] = p;
        }
        t->expiry_cursor++;
    }
    /* Virtual accounts past their due date (docs/virtual-accounts.md §6.6), from the ledger's
     * due-date index: only the accounts now due are looked at. */
    for (struct payment *p; (p = store_next_due(s, now_us));)
        if (store_expire_va(s, p, now_us))
            (*n)++;
    return 0;
}

/* Empty t's store and bump its generation (store lock held). */
int gateway_tenant_reset_locked(struct gateway *g, struct store *s, struct request *r, void *arg)
{
    (void)g;
    (void)r;
    (void)arg;
    struct tenant *t = s->owner;
    store_reset(s);
    t->expiry_cursor = 0;
    t->n_expiry_held = 0;
    __atomic_store_n(&t->generation, t->generation + 1, __ATOMIC_RELEASE);
    return 0;
}

void gateway_replica_clear_locked(struct gateway *g)
{
    atomic_store(&g->clock_offset_us, 0);
    for (struct tenant *t = gateway_tenant_next(g, NULL); t; t = gateway_tenant_next(g, t)) {
        gateway_tenant_reset_locked(g, &t->store, NULL, NULL);
        store_rewind(&t->store);
    }
}

int gateway_reset_tenant(struct gateway *g, struct tenant *t, struct profile *p)
{
    return gateway_reset_tenant_shared(g, t, p, 0);
}

int gateway_reset_tenant_shared(struct gateway *g, struct tenant *t, struct profile *p,
                                uint64_t version)
{
    pthread_mutex_lock(&g->apply_lock);
    if (gateway_tenant_txn(g, t, gateway_tenant_reset_locked, NULL) == GATEWAY_STORE_DOWN) {
        pthread_mutex_unlock(&g->apply_lock);
        profile_free(p);
        return GATEWAY_STORE_DOWN;
    }
    store_attempts_reset(&t->store, true);
    uint64_t next = atomic_load(&g->journal.next_id);
    atomic_store(&t->journal_floor, next);
    report_reset(&t->report, now_unix_us(), next);
    if (atomic_load(&t->timeline))
        timeline_clear(atomic_load(&t->timeline));
    pthread_mutex_unlock(&g->apply_lock);
    gateway_tenant_reapply(g, t, p, version);
    return 0;
}
