/* live.c -- applied-profile state (see live.h). Invariants: a live's budgets array has one
 * counter per fault of its route; a schedule's phases are lives of their own whose origins are
 * offsets from the schedule's origin. */
#define _POSIX_C_SOURCE 200809L
#include "live.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

static int live_init(struct live *l, const struct profile *p, int64_t origin_ns)
{
    memset(l, 0, sizeof *l);
    l->profile = p;
    l->origin_ns = origin_ns;
    pthread_mutex_init(&l->lock, NULL);
    for (int r = 0; r < ROUTE_COUNT; r++) {
        const struct route_profile *rp = profile_route(p, (enum route_id)r);
        if (rp->throttle.kind == THROTTLE_TOKEN_BUCKET)
            bucket_init(&l->routes[r].bucket, rp->throttle.burst, origin_ns);
        if (rp->n_faults) {
            l->routes[r].times_used = calloc(rp->n_faults, sizeof(atomic_llong));
            if (!l->routes[r].times_used)
                return -1;
        }
    }
    if (p->n_phases) {
        l->phases = calloc(p->n_phases, sizeof *l->phases);
        if (!l->phases)
            return -1;
        l->n_phases = p->n_phases;
        double start = 0;
        for (size_t i = 0; i < p->n_phases; i++) {
            if (live_init(&l->phases[i], p->phases[i].profile,
                          origin_ns + (int64_t)(start * (double)NS_PER_S)) != 0)
                return -1;
            l->phases[i].phase = (unsigned)i + 1;
            start += p->phases[i].for_s;
        }
        l->cycle_s = start;
    }
    return 0;
}

static void live_fini(struct live *l)
{
    for (int r = 0; r < ROUTE_COUNT; r++)
        free(l->routes[r].times_used);
    for (size_t i = 0; i < l->n_phases; i++)
        live_fini(&l->phases[i]);
    free(l->phases);
    pthread_mutex_destroy(&l->lock);
}

struct live *live_new(const struct profile *p, int64_t now_ns)
{
    struct live *l = malloc(sizeof *l);
    if (!l)
        return NULL;
    if (live_init(l, p, now_ns) != 0) {
        live_fini(l);
        free(l);
        return NULL;
    }
    return l;
}

void live_free(struct live *l)
{
    if (!l)
        return;
    live_fini(l);
    free(l);
}

void live_set_version(struct live *l, uint64_t version)
{
    l->version = version;
    for (size_t i = 0; i < l->n_phases; i++)
        live_set_version(&l->phases[i], version);
}

struct live *live_current(struct live *l, int64_t now_ns, int64_t *since_ns)
{
    if (l->n_phases == 0) {
        *since_ns = now_ns - l->origin_ns;
        return l;
    }
    double t = (double)(now_ns - l->origin_ns) / (double)NS_PER_S;
    double cycles = 0;
    if (t >= l->cycle_s) {
        if (l->profile->repeat) {
            cycles = floor(t / l->cycle_s);
            t -= cycles * l->cycle_s;
        } else {
            struct live *last = &l->phases[l->n_phases - 1];
            *since_ns = now_ns - last->origin_ns;
            return last;
        }
    }
    size_t i = 0;
    double start = 0;
    while (i + 1 < l->n_phases && t >= start + l->profile->phases[i].for_s)
        start += l->profile->phases[i++].for_s;
    *since_ns = (int64_t)((t - start) * (double)NS_PER_S);
    return &l->phases[i];
}

void live_admit(struct live *cur, int64_t since_ns, struct flight *f, enum route_id route,
                int64_t now_ns, struct admission *out)
{
    memset(out, 0, sizeof *out);
    const struct route_profile *rp = profile_route(cur->profile, route);
    const struct throttle *t = &rp->throttle;
    double wait = 0;
    bool refused = false;
    if (t->kind == THROTTLE_TOKEN_BUCKET) {
        pthread_mutex_lock(&cur->lock);
        refused = !bucket_take(&cur->routes[route].bucket, t->rate_per_s, t->burst, now_ns, &wait);
        pthread_mutex_unlock(&cur->lock);
    } else if (t->kind == THROTTLE_WINDOW) {
        refused = window_throttled(t, since_ns, &wait);
    }
    if (refused) {
        out->result = ADMIT_THROTTLED;
        out->throttle = t;
        out->retry_after_auto_s = retry_after_ceil(wait);
        out->retry_after_wait_s = wait;
        return;
    }
    long n = atomic_fetch_add(&f->in_flight[route], 1) + 1;
    if (rp->concurrency.max_in_flight && n > (long)rp->concurrency.max_in_flight) {
        atomic_fetch_sub(&f->in_flight[route], 1);
        out->result = ADMIT_CAPPED;
        out->cap = &rp->concurrency;
        return;
    }
    long peak = atomic_load(&f->peak[route]);
    while (n > peak && !atomic_compare_exchange_weak(&f->peak[route], &peak, n))
        ;
}

void flight_begin(struct flight *f, enum route_id route)
{
    long n = atomic_fetch_add(&f->in_flight[route], 1) + 1;
    long peak = atomic_load(&f->peak[route]);
    while (n > peak && !atomic_compare_exchange_weak(&f->peak[route], &peak, n))
        ;
}

void flight_end(struct flight *f, enum route_id route)
{
    atomic_fetch_sub(&f->in_flight[route], 1);
}

void flight_reset_peaks(struct flight *f)
{
    for (int r = 0; r < ROUTE_COUNT; r++)
        atomic_store(&f->peak[r], atomic_load(&f->in_flight[r]));
}

struct budget_ctx {
    const struct route_profile *rp;
    struct live_route *lr;
};

static bool take_budget(int index, void *ctx)
{
    struct budget_ctx *b = ctx;
    long long used = atomic_fetch_add(&b->lr->times_used[index], 1);
    return used < b->rp->faults[index].times;
}

void live_plan(struct live *cur, enum route_id route, uint32_t attempt, struct rng *rng,
               struct plan *out)
{
    struct budget_ctx b = {profile_route(cur->profile, route), &cur->routes[route]};
    fault_decide(b.rp, attempt, rng, take_budget, &b, out);
}

/* An entry: the counter, its place on the shard's list, then the key bytes
 * ("route\0identity"). */
struct attempt_entry {
    struct attempt_entry *older, *newer;
    int64_t used_us;                 /* its last request (gateway clock) */
    uint32_t count;
    uint32_t key_len;
    char key[];
};

void attempts_init(struct attempts *a, int64_t ttl_us)
{
    a->ttl_us = ttl_us;
    for (int i = 0; i < ATTEMPTS_SHARDS; i++) {
        pthread_mutex_init(&a->shard[i].lock, NULL);
        strmap_init(&a->shard[i].map);
        a->shard[i].oldest = a->shard[i].newest = NULL;
    }
}

static void free_entry(void *e)
{
    free(e);
}

void attempts_fini(struct attempts *a)
{
    for (int i = 0; i < ATTEMPTS_SHARDS; i++) {
        strmap_each(&a->shard[i].map, free_entry);
        strmap_fini(&a->shard[i].map);
        pthread_mutex_destroy(&a->shard[i].lock);
    }
}

void attempts_reset(struct attempts *a)
{
    for (int i = 0; i < ATTEMPTS_SHARDS; i++) {
        struct attempts_shard *sh = &a->shard[i];
        pthread_mutex_lock(&sh->lock);
        strmap_each(&sh->map, free_entry);
        strmap_clear(&sh->map);
        sh->oldest = sh->newest = NULL;
        pthread_mutex_unlock(&sh->lock);
    }
}

static void unlink_entry(struct attempts_shard *sh, struct attempt_entry *e)
{
    if (e->older)
        e->older->newer = e->newer;
    else
        sh->oldest = e->newer;
    if (e->newer)
        e->newer->older = e->older;
    else
        sh->newest = e->older;
    e->older = e->newer = NULL;
}

static void append_entry(struct attempts_shard *sh, struct attempt_entry *e)
{
    e->newer = NULL;
    e->older = sh->newest;
    if (sh->newest)
        sh->newest->newer = e;
    else
        sh->oldest = e;
    sh->newest = e;
}

static bool idle(const struct attempts *a, const struct attempt_entry *e, int64_t now_us)
{
    return a->ttl_us > 0 && now_us - e->used_us >= a->ttl_us;
}

uint32_t attempts_next(struct attempts *a, enum route_id route, const char *identity,
                       int64_t now_us)
{
    size_t il = strlen(identity);
    size_t kl = 2 + il;
    if (kl > UINT32_MAX)
        return 1;
    /* The entry is built before the lookup, so a first attempt (the usual case) costs one
     * probe walk; a repeat frees it again. */
    struct attempt_entry *e = malloc(sizeof *e + kl);
    if (!e)
        return 1;
    e->count = 1;
    e->used_us = now_us;
    e->key_len = (uint32_t)kl;
    e->key[0] = (char)('0' + route);
    e->key[1] = '\0';
    memcpy(e->key + 2, identity, il);
    /* One hash: its high bits pick the shard, its low bits the slot inside the shard's map. */
    uint64_t h = strmap_hash(e->key, kl);
    struct attempts_shard *sh = &a->shard[(h >> 32) % ATTEMPTS_SHARDS];
    pthread_mutex_lock(&sh->lock);
    struct attempt_entry *had = strmap_add_hashed(&sh->map, h, e->key, kl, e);
    uint32_t n = 1;
    if (had && had != e) {
        /* Idle for the TTL: as if it had been swept (docs/profiles.md §4). */
        n = idle(a, had, now_us) ? 1 : had->count + 1;
        had->count = n;
        if (now_us > had->used_us)
            had->used_us = now_us;
        unlink_entry(sh, had);
        append_entry(sh, had);
    } else if (!had) {
        append_entry(sh, e);
    }
    pthread_mutex_unlock(&sh->lock);
    if (had)
        free(e); /* counted on the existing entry (or out of memory: counted as a first) */
    return n;
}

size_t attempts_sweep(struct attempts *a, int64_t now_us, size_t budget, bool *more)
{
    size_t freed = 0;
    if (more)
        *more = false;
    for (int i = 0; i < ATTEMPTS_SHARDS; i++) {
        struct attempts_shard *sh = &a->shard[i];
        pthread_mutex_lock(&sh->lock);
        size_t left = budget;
        /* The list is in order of last use but for requests that stamped a time read just
         * before another's: an entry a little out of place only waits for a later sweep. */
        while (sh->oldest && idle(a, sh->oldest, now_us)) {
            if (left-- == 0) {
                if (more)
                    *more = true;
                break;
            }
            struct attempt_entry *e = sh->oldest;
            unlink_entry(sh, e);
            strmap_del(&sh->map, e->key, e->key_len);
            free(e);
            freed++;
        }
        pthread_mutex_unlock(&sh->lock);
    }
    return freed;
}

size_t attempts_count(struct attempts *a)
{
    size_t n = 0;
    for (int i = 0; i < ATTEMPTS_SHARDS; i++) {
        pthread_mutex_lock(&a->shard[i].lock);
        n += a->shard[i].map.len;
        pthread_mutex_unlock(&a->shard[i].lock);
    }
    return n;
}
