/* cluster_limits.c -- the profile in force, budgets, buckets and caps shared over Redis (see
 * cluster_limits.h; docs/cluster.md §11.1). Keys, under "fakegate:": `profile:ver` (the last
 * version handed out), `profiles` (a hash: scope -> "VERSION FLAG TEXT", FLAG p for a PUT and
 * r for a reset, scope "-" the server's or "t" + the tenant's secret key), and, SCOPE "-" or
 * "t" + the key in hex (its first 259 bytes), `times:SCOPE:VERSION:PHASE:ROUTE:FAULT` (uses of
 * a budget), `bucket:SCOPE:VERSION:PHASE:ROUTE` (a token bucket), `cap:SCOPE:ROUTE` (the slots
 * in flight, a sorted set scored by lease expiry) and `processing:SCOPE:PAYMENTKEY` (a set of
 * at most one such slot: a confirm's mark). Invariant: `seen` is a version whose records this
 * instance has all applied. */
#define _GNU_SOURCE
#include "cluster_limits.h"

#include <hiredis/hiredis.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "cluster.h"
#include "gateway.h"

#define PREFIX "fakegate:"
/* A budget's uses are kept this long after its last take: far longer than a test run, and
 * gone by themselves once their profile version is long replaced. */
#define BUDGET_TTL_MS 86400000LL
/* Longest scope written ("t" + 2 hex digits a byte of a secret key, cut here). */
#define SCOPE_MAX 520

/* publish: KEYS ver, profiles; ARGV scope, flag [, text] -> the new version. Without text the
 * scope's is kept. */
static const char PUBLISH_LUA[] =
    "local v = redis.call('INCR', KEYS[1])\n"
    "local text = ARGV[3]\n"
    "if not text then\n"
    "  text = ''\n"
    "  local old = redis.call('HGET', KEYS[2], ARGV[1])\n"
    "  if old then\n"
    "    local a = string.find(old, ' ', 1, true)\n"
    "    local b = a and string.find(old, ' ', a + 1, true)\n"
    "    if b then text = string.sub(old, b + 1) end\n"
    "  end\n"
    "end\n"
    "redis.call('HSET', KEYS[2], ARGV[1], v .. ' ' .. ARGV[2] .. ' ' .. text)\n"
    "return v\n";
/* records: KEYS ver, profiles -> {version or false, {scope, record, ...}}. */
static const char RECORDS_LUA[] =
    "return {redis.call('GET', KEYS[1]), redis.call('HGETALL', KEYS[2])}\n";
/* take: KEYS budget; ARGV ttl_ms -> the uses so far, this one included. */
static const char TAKE_LUA[] =
    "local n = redis.call('INCR', KEYS[1])\n"
    "redis.call('PEXPIRE', KEYS[1], ARGV[1])\n"
    "return n\n";
/* bucket: KEYS bucket; ARGV rate_per_s, burst, ttl_ms -> {1, "0"} taken | {0, wait_s}. On
 * Redis's clock (every instance's token comes out of one bucket); a bucket starts full and
 * refills at rate up to burst, with throttle.c's epsilon. */
static const char BUCKET_LUA[] =
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000000 + tonumber(t[2])\n"
    "local rate, burst = tonumber(ARGV[1]), tonumber(ARGV[2])\n"
    "local v = redis.call('HMGET', KEYS[1], 'tokens', 'at')\n"
    "local tokens, at = tonumber(v[1]), tonumber(v[2])\n"
    "if not tokens then tokens = burst; at = now end\n"
    "if now > at then\n"
    "  tokens = math.min(burst, tokens + (now - at) / 1000000 * rate); at = now\n"
    "end\n"
    "local ok, wait = 0, 0\n"
    "if tokens >= 1 - 1e-9 then tokens = tokens - 1; ok = 1\n"
    "else wait = (1 - tokens) / rate end\n"
    "redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens), 'at', at)\n"
    "redis.call('PEXPIRE', KEYS[1], ARGV[3])\n"
    "return {ok, string.format('%.17g', wait)}\n";
/* cap: KEYS cap; ARGV max, member, lease_ms -> 1 taken | 0 full. */
static const char CAP_LUA[] =
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
    "redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)\n"
    "if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end\n"
    "redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[2])\n"
    "redis.call('PEXPIRE', KEYS[1], ARGV[3])\n"
    "return 1\n";
/* renew: KEYS cap...; ARGV lease_ms, member... (one per key) -> 0. */
static const char RENEW_LUA[] =
    "local t = redis.call('TIME')\n"
    "local at = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[1])\n"
    "for i = 1, #KEYS do\n"
    "  redis.call('ZADD', KEYS[i], 'XX', at, ARGV[i + 1])\n"
    "  redis.call('PEXPIRE', KEYS[i], ARGV[1])\n"
    "end\n"
    "return 0\n";

/* A cap slot held by a request of this instance: the set's key and the member. */
struct cluster_slot {
    char *key, *member;
    struct cluster_slot *prev, *next;
};

/* A scope's last applied version (a list: scopes are the server and the tenants with a
 * profile of their own, a few). */
struct scope_seen {
    char *scope;
    uint64_t version;
    struct scope_seen *next;
};

struct cluster_limits {
    struct cluster *c;
    struct gateway *g;
    _Atomic uint64_t seen;            /* the shared version as of the last sync */
    pthread_mutex_t sync_lock;        /* one sync or publish at a time; `scopes` */
    struct scope_seen *scopes;
    struct cluster_script publish, records, take, bucket, cap, renew;
    pthread_mutex_t slots_lock;
    struct cluster_slot *slots;       /* held by this instance's requests in flight */
    _Atomic uint64_t next_slot;
};

struct cluster_limits *cluster_limits_new(struct cluster *c, struct gateway *g)
{
    struct cluster_limits *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->c = c;
    l->g = g;
    pthread_mutex_init(&l->sync_lock, NULL);
    pthread_mutex_init(&l->slots_lock, NULL);
    l->publish = (struct cluster_script)CLUSTER_SCRIPT(PUBLISH_LUA);
    l->records = (struct cluster_script)CLUSTER_SCRIPT(RECORDS_LUA);
    l->take = (struct cluster_script)CLUSTER_SCRIPT(TAKE_LUA);
    l->bucket = (struct cluster_script)CLUSTER_SCRIPT(BUCKET_LUA);
    l->cap = (struct cluster_script)CLUSTER_SCRIPT(CAP_LUA);
    l->renew = (struct cluster_script)CLUSTER_SCRIPT(RENEW_LUA);
    return l;
}

void cluster_limits_free(struct cluster_limits *l)
{
    if (!l)
        return;
    for (struct scope_seen *s = l->scopes, *next; s; s = next) {
        next = s->next;
        free(s->scope);
        free(s);
    }
    for (struct cluster_slot *s = l->slots, *next; s; s = next) {
        next = s->next;
        free(s->key);
        free(s->member);
        free(s);
    }
    pthread_mutex_destroy(&l->sync_lock);
    pthread_mutex_destroy(&l->slots_lock);
    free(l);
}

/* --- scopes --------------------------------------------------------------------------------- */

/* "-" for no key, else "t" + the key in hex (cut to fit), into b (SCOPE_MAX + 1 bytes). */
static void scope_of_key(const char *key, char *b)
{
    size_t k = 0;
    if (!key) {
        b[k++] = '-';
    } else {
        b[k++] = 't';
        for (const char *p = key; *p && k + 2 < SCOPE_MAX; p++)
            k += (size_t)snprintf(b + k, SCOPE_MAX + 1 - k, "%02x", (unsigned char)*p);
    }
    b[k] = '\0';
}

/* A profile record's scope, whole (a field of the hash, so any length): "-" for no key, else
 * "t" + the key. Caller frees; NULL on out of memory. */
static char *record_scope(const char *key)
{
    size_t n = key ? strlen(key) : 0;
    char *s = malloc(n + 2);
    if (s) {
        s[0] = key ? 't' : '-';
        memcpy(s + 1, key ? key : "", n + 1);
    }
    return s;
}

/* The last version applied of `scope` (sync_lock held), 0 if none. */
static uint64_t scope_version(struct cluster_limits *l, const char *scope)
{
    for (struct scope_seen *s = l->scopes; s; s = s->next)
        if (strcmp(s->scope, scope) == 0)
            return s->version;
    return 0;
}

static void scope_set(struct cluster_limits *l, const char *scope, uint64_t version)
{
    for (struct scope_seen *s = l->scopes; s; s = s->next)
        if (strcmp(s->scope, scope) == 0) {
            if (version > s->version)
                s->version = version;
            return;
        }
    struct scope_seen *s = calloc(1, sizeof *s);
    if (!s || !(s->scope = strdup(scope))) {
        free(s);
        return; /* out of memory: applied again at the next sync, harmlessly */
    }
    s->version = version;
    s->next = l->scopes;
    l->scopes = s;
}

/* --- the profile in force ------------------------------------------------------------------- */

/* One record of `profiles`, parsed. */
struct record {
    const char *scope;
    uint64_t version;
    char flag;                        /* 'p' a PUT, 'r' a reset */
    const char *text;                 /* may be empty: the scope's start profile */
    size_t text_len;
};

static int by_version(const void *a, const void *b)
{
    const struct record *x = a, *y = b;
    return x->version < y->version ? -1 : x->version > y->version;
}

/* Apply record r here (sync_lock held): parsed as PUT /__admin/profile parses a body. */
static void apply_record(struct cluster_limits *l, const struct record *r)
{
    struct gateway *g = l->g;
    struct profile *p = NULL;
    char err[ERR_LEN];
    if (r->text_len > 0 && admin_parse_profile(g, r->text, r->text_len, &p, err) != 0) {
        fprintf(stderr, "fakegate: --store: the shared profile version %llu (scope %.40s) does "
                        "not load here, the one in force stays: %s\n",
                (unsigned long long)r->version, r->scope, err);
        scope_set(l, r->scope, r->version);
        return;
    }
    struct tenant *t = NULL;
    if (r->scope[0] == 't') {
        bool full = false;
        t = gateway_tenant(g, r->scope + 1, true, &full);
        if (!t) {
            fprintf(stderr, "fakegate: --store: the shared profile version %llu is for a tenant "
                            "this instance cannot hold (%s)\n", (unsigned long long)r->version,
                    full ? "--max-tenants" : "out of memory");
            profile_free(p);
            scope_set(l, r->scope, r->version);
            return;
        }
    }
    if (r->flag == 'r')
        t ? gateway_tenant_reapply(g, t, p, r->version) : gateway_reapply(g, p, r->version);
    else if (p)
        t ? gateway_apply_tenant_shared(g, t, p, r->version)
          : gateway_apply_shared(g, p, r->version);
    scope_set(l, r->scope, r->version);
}

/* Fetch every record and apply those newer than this instance's (sync_lock held). 0 or -1. */
static int catch_up(struct cluster_limits *l)
{
    const char *argv[] = {NULL, NULL, "2", PREFIX "profile:ver", PREFIX "profiles"};
    size_t lens[5] = {0, 0, 1, strlen(argv[3]), strlen(argv[4])};
    redisReply *rep = cluster_script_run(l->c, &l->records, 5, argv, lens);
    if (!rep)
        return -1;
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 ||
        rep->element[1]->type != REDIS_REPLY_ARRAY) {
        cluster_fail(l->c, "the profile records' reply is malformed");
        freeReplyObject(rep);
        return -1;
    }
    uint64_t ver = rep->element[0]->type == REDIS_REPLY_STRING
                       ? strtoull(rep->element[0]->str, NULL, 10) : 0;
    if (ver < atomic_load(&l->seen)) {
        /* Versions went back: a Redis that came back empty (or flushed). Its records, from 1
         * again, are all new here; the profile in force stays until one comes. */
        for (struct scope_seen *sc = l->scopes; sc; sc = sc->next)
            sc->version = 0;
    }
    const redisReply *h = rep->element[1];
    size_t n = h->elements / 2, k = 0;
    struct record *recs = calloc(n + 1, sizeof *recs);
    if (!recs) {
        freeReplyObject(rep);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        const redisReply *sc = h->element[2 * i], *rv = h->element[2 * i + 1];
        if (sc->type != REDIS_REPLY_STRING || rv->type != REDIS_REPLY_STRING)
            continue;
        char *end;
        struct record r = {.scope = sc->str, .version = strtoull(rv->str, &end, 10)};
        if (end[0] != ' ' || !end[1] || end[2] != ' ')
            continue;
        r.flag = end[1];
        r.text = end + 3;
        r.text_len = rv->len - (size_t)(r.text - rv->str);
        if (r.version > scope_version(l, r.scope))
            recs[k++] = r;
    }
    qsort(recs, k, sizeof *recs, by_version);
    for (size_t i = 0; i < k; i++)
        apply_record(l, &recs[i]);
    free(recs);
    freeReplyObject(rep);
    atomic_store(&l->seen, ver);
    return 0;
}

int cluster_limits_start(struct cluster_limits *l, char err[ERR_LEN])
{
    pthread_mutex_lock(&l->sync_lock);
    int rc = catch_up(l);
    pthread_mutex_unlock(&l->sync_lock);
    if (rc != 0) {
        char msg[400];
        cluster_message(l->c, msg, sizeof msg);
        snprintf(err, ERR_LEN, "%s (reading the shared profiles)", msg);
    }
    return rc;
}

void cluster_limits_sync(struct cluster_limits *l)
{
    const char *argv[] = {"GET", PREFIX "profile:ver"};
    size_t lens[] = {3, sizeof PREFIX "profile:ver" - 1};
    redisReply *rep = cluster_run(l->c, 2, argv, lens);
    if (!rep)
        return;
    uint64_t ver = rep->type == REDIS_REPLY_STRING ? strtoull(rep->str, NULL, 10) : 0;
    freeReplyObject(rep);
    if (ver == atomic_load(&l->seen))
        return;
    pthread_mutex_lock(&l->sync_lock);
    if (ver != atomic_load(&l->seen))
        catch_up(l);
    pthread_mutex_unlock(&l->sync_lock);
}

int cluster_limits_publish(struct cluster_limits *l, struct tenant *t, const char *text,
                           size_t len, bool reset, struct profile *p,
                           cluster_limits_apply_fn apply, void *ctx)
{
    char *scope = record_scope(t ? tenant_key(t) : NULL);
    if (!scope) {
        cluster_fail(l->c, "out of memory");
        profile_free(p);
        return -1;
    }
    const char *argv[] = {NULL, NULL, "2", PREFIX "profile:ver", PREFIX "profiles", scope,
                          reset ? "r" : "p", text};
    size_t lens[8] = {0, 0, 1, strlen(argv[3]), strlen(argv[4]), strlen(scope), 1, len};
    pthread_mutex_lock(&l->sync_lock);
    /* What others published before this goes first, so versions apply in order here too. */
    catch_up(l);
    redisReply *rep = cluster_script_run(l->c, &l->publish, text ? 8 : 7, argv, lens);
    uint64_t v = rep && rep->type == REDIS_REPLY_INTEGER && rep->integer > 0
                     ? (uint64_t)rep->integer : 0;
    if (rep && v == 0)
        cluster_fail(l->c, "the profile publish script's reply is malformed");
    freeReplyObject(rep);
    int rc = -1;
    if (v) {
        rc = apply(l->g, t, p, v, ctx);
        scope_set(l, scope, v);
    } else {
        profile_free(p);
    }
    pthread_mutex_unlock(&l->sync_lock);
    free(scope);
    return rc;
}

/* --- budgets -------------------------------------------------------------------------------- */

struct take_ctx {
    struct cluster_limits *l;
    const struct route_profile *rp;
    char prefix[SCOPE_MAX + 96];      /* times:SCOPE:VERSION:PHASE:ROUTE: */
};

static bool take_shared(int index, void *arg)
{
    struct take_ctx *tc = arg;
    char key[sizeof tc->prefix + 16], ttl[24];
    snprintf(key, sizeof key, "%s%d", tc->prefix, index);
    snprintf(ttl, sizeof ttl, "%lld", BUDGET_TTL_MS);
    const char *argv[] = {NULL, NULL, "1", key, ttl};
    size_t lens[5] = {0, 0, 1, strlen(key), strlen(ttl)};
    redisReply *rep = cluster_script_run(tc->l->c, &tc->l->take, 5, argv, lens);
    bool fire = rep && rep->type == REDIS_REPLY_INTEGER &&
                rep->integer <= tc->rp->faults[index].times;
    freeReplyObject(rep);
    return fire;
}

void cluster_limits_plan(struct cluster_limits *l, struct live *cur, const struct tenant *t,
                         enum route_id route, uint32_t attempt, struct rng *rng,
                         struct plan *out)
{
    struct take_ctx tc = {l, profile_route(cur->profile, route), ""};
    char scope[SCOPE_MAX + 1];
    scope_of_key(tenant_key(t), scope);
    snprintf(tc.prefix, sizeof tc.prefix, PREFIX "times:%s:%llu:%u:%d:", scope,
             (unsigned long long)cur->version, cur->phase, (int)route);
    fault_decide(tc.rp, attempt, rng, take_shared, &tc, out);
}

/* --- buckets and caps ----------------------------------------------------------------------- */

/* Take a token of the shared bucket of (t, cur, route). True if admitted; else *wait_s is the
 * time until the next token. A store that is down admits. */
static bool bucket_take_shared(struct cluster_limits *l, const struct live *cur,
                               const char *scope, enum route_id route, const struct throttle *th,
                               double *wait_s)
{
    char key[SCOPE_MAX + 96], rate[40], burst[40], ttl[24];
    snprintf(key, sizeof key, PREFIX "bucket:%s:%llu:%u:%d", scope,
             (unsigned long long)cur->version, cur->phase, (int)route);
    snprintf(rate, sizeof rate, "%.17g", th->rate_per_s);
    snprintf(burst, sizeof burst, "%.17g", th->burst);
    /* Past burst / rate the bucket is full again: as good as absent. */
    double full_ms = ceil(th->burst / th->rate_per_s * 1000.0) + 1000.0;
    snprintf(ttl, sizeof ttl, "%lld", full_ms < 9e15 ? (long long)full_ms : 9000000000000000LL);
    const char *argv[] = {NULL, NULL, "1", key, rate, burst, ttl};
    size_t lens[7] = {0, 0, 1, strlen(key), strlen(rate), strlen(burst), strlen(ttl)};
    redisReply *rep = cluster_script_run(l->c, &l->bucket, 7, argv, lens);
    bool ok = true;
    if (rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
        rep->element[0]->type == REDIS_REPLY_INTEGER &&
        rep->element[1]->type == REDIS_REPLY_STRING) {
        ok = rep->element[0]->integer == 1;
        *wait_s = strtod(rep->element[1]->str, NULL);
        if (!ok && !(*wait_s > 0))
            *wait_s = 1e-6;
    }
    freeReplyObject(rep);
    return ok;
}

/* Take a slot of the set `key`, which holds at most `max`. 1 taken (*out set), 0 full, -1
 * store down. */
static int slot_take(struct cluster_limits *l, const char *key, long max,
                     struct cluster_slot **out)
{
    char member[64], maxs[24], lease[24];
    snprintf(member, sizeof member, "%016llx:%llu",
             (unsigned long long)cluster_instance(l->c),
             (unsigned long long)atomic_fetch_add(&l->next_slot, 1));
    snprintf(maxs, sizeof maxs, "%ld", max);
    snprintf(lease, sizeof lease, "%d", CLUSTER_LIMITS_SLOT_LEASE_MS);
    const char *argv[] = {NULL, NULL, "1", key, maxs, member, lease};
    size_t lens[7] = {0, 0, 1, strlen(key), strlen(maxs), strlen(member), strlen(lease)};
    struct cluster_slot *s = calloc(1, sizeof *s);
    if (!s || !(s->key = strdup(key)) || !(s->member = strdup(member))) {
        if (s)
            free(s->key);
        free(s);
        return -1;
    }
    /* Listed before it is taken: a renewal never misses a slot that exists. */
    pthread_mutex_lock(&l->slots_lock);
    s->next = l->slots;
    if (l->slots)
        l->slots->prev = s;
    l->slots = s;
    pthread_mutex_unlock(&l->slots_lock);
    redisReply *rep = cluster_script_run(l->c, &l->cap, 7, argv, lens);
    int rc = rep && rep->type == REDIS_REPLY_INTEGER ? (int)rep->integer : -1;
    freeReplyObject(rep);
    if (rc == 1) {
        *out = s;
        return 1;
    }
    cluster_limits_release(l, s); /* nothing to give back, but unlisted and freed alike */
    return rc;
}

void cluster_limits_admit(struct cluster_limits *l, struct live *cur, int64_t since_ns,
                          struct flight *f, const struct tenant *t, enum route_id route,
                          int64_t now_ns, struct admission *out, struct cluster_slot **slot)
{
    (void)now_ns;
    memset(out, 0, sizeof *out);
    *slot = NULL;
    const struct route_profile *rp = profile_route(cur->profile, route);
    const struct throttle *th = &rp->throttle;
    char scope[SCOPE_MAX + 1];
    scope_of_key(tenant_key(t), scope);
    double wait = 0;
    bool refused = false;
    if (th->kind == THROTTLE_TOKEN_BUCKET)
        refused = !bucket_take_shared(l, cur, scope, route, th, &wait);
    else if (th->kind == THROTTLE_WINDOW)
        refused = window_throttled(th, since_ns, &wait);
    if (refused) {
        out->result = ADMIT_THROTTLED;
        out->throttle = th;
        out->retry_after_auto_s = retry_after_ceil(wait);
        out->retry_after_wait_s = wait;
        return;
    }
    char key[SCOPE_MAX + 64];
    snprintf(key, sizeof key, PREFIX "cap:%s:%d", scope, (int)route);
    if (rp->concurrency.max_in_flight &&
        slot_take(l, key, (long)rp->concurrency.max_in_flight, slot) == 0) {
        out->result = ADMIT_CAPPED;
        out->cap = &rp->concurrency;
        return;
    }
    flight_begin(f, route); /* this tenant's count here: its peaks, /metrics */
}

int cluster_limits_mark(struct cluster_limits *l, const struct tenant *t,
                        const char *payment_key, struct cluster_slot **mark)
{
    char scope[SCOPE_MAX + 1];
    scope_of_key(tenant_key(t), scope);
    size_t n = sizeof PREFIX + strlen(scope) + strlen(payment_key) + 16;
    char *key = malloc(n);
    if (!key)
        return -1;
    snprintf(key, n, PREFIX "processing:%s:%s", scope, payment_key);
    *mark = NULL;
    int rc = slot_take(l, key, 1, mark);
    free(key);
    return rc;
}

void cluster_limits_release(struct cluster_limits *l, struct cluster_slot *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&l->slots_lock);
    if (s->prev)
        s->prev->next = s->next;
    else
        l->slots = s->next;
    if (s->next)
        s->next->prev = s->prev;
    pthread_mutex_unlock(&l->slots_lock);
    const char *argv[] = {"ZREM", s->key, s->member};
    size_t lens[] = {4, strlen(s->key), strlen(s->member)};
    freeReplyObject(cluster_run(l->c, 3, argv, lens));
    free(s->key);
    free(s->member);
    free(s);
}

void cluster_limits_heartbeat(struct cluster_limits *l)
{
    /* The slots' names are copied out, so no request waits on the round trip. */
    pthread_mutex_lock(&l->slots_lock);
    size_t n = 0;
    for (struct cluster_slot *s = l->slots; s; s = s->next)
        n++;
    const char **argv = n ? calloc(2 * n + 4, sizeof *argv) : NULL;
    size_t *lens = n ? calloc(2 * n + 4, sizeof *lens) : NULL;
    char **own = n ? calloc(2 * n, sizeof *own) : NULL;
    char lease[24], nkeys[24];
    snprintf(lease, sizeof lease, "%d", CLUSTER_LIMITS_SLOT_LEASE_MS);
    snprintf(nkeys, sizeof nkeys, "%zu", n);
    bool ok = argv && lens && own;
    size_t i = 0;
    for (struct cluster_slot *s = l->slots; ok && s; s = s->next, i++) {
        own[i] = strdup(s->key);
        own[n + i] = strdup(s->member);
        ok = own[i] && own[n + i];
    }
    pthread_mutex_unlock(&l->slots_lock);
    if (ok) {
        argv[2] = nkeys;
        lens[2] = strlen(nkeys);
        for (size_t j = 0; j < n; j++) {
            argv[3 + j] = own[j];
            lens[3 + j] = strlen(own[j]);
            argv[4 + n + j] = own[n + j];
            lens[4 + n + j] = strlen(own[n + j]);
        }
        argv[3 + n] = lease;
        lens[3 + n] = strlen(lease);
        freeReplyObject(cluster_script_run(l->c, &l->renew, (int)(2 * n + 4), argv, lens));
    }
    for (size_t j = 0; own && j < 2 * n; j++)
        free(own[j]);
    free(own);
    free(argv);
    free(lens);
}
