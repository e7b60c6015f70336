/* cluster_journal.c -- the journal and the report shared through Redis (see cluster_journal.h,
 * docs/cluster.md §11.8). Request threads serialise an entry and queue it; one writer thread
 * appends the queue in batches with one script (ids, XADD MAXLEN ~, the lost count); readers
 * take a consistent header (sequence, reset base and time, lost count, length, tenants' reset
 * times) and then the stream in pages, each on a connection of its own call. Keys, under
 * fakegate:journal: the stream itself, :seq, :base, :since, :lost, :floors. */
#define _GNU_SOURCE
#include "cluster_journal.h"

#include <hiredis/hiredis.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fault.h"
#include "report.h"

#define CJ_TIMEOUT_MS 500
#define CJ_RECONNECT_MS 50
#define CJ_PAGE 5000       /* entries per XRANGE */

#define K_STREAM "fakegate:journal"
#define K_SEQ "fakegate:journal:seq"
#define K_LOST "fakegate:journal:lost"
#define K_BASE "fakegate:journal:base"
#define K_SINCE "fakegate:journal:since"
#define K_FLOORS "fakegate:journal:floors"

/* append: KEYS stream seq lost; ARGV maxlen lost e1 e2 ... -> the last id. The ids and the
 * entries go in together, so stream order is id order. */
static const char APPEND_LUA[] =
    "local n = #ARGV - 2\n"
    "local last = redis.call('INCRBY', KEYS[2], n)\n"
    "if tonumber(ARGV[2]) > 0 then redis.call('INCRBY', KEYS[3], ARGV[2]) end\n"
    "for i = 1, n do\n"
    "  redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', 'id', string.format('%d', "
    "last - n + i), 'e', ARGV[i + 2])\n"
    "end\n"
    "return last\n";
/* header: KEYS stream seq lost base since floors -> {seq, base, since, lost, xlen, floors}. */
static const char HEADER_LUA[] =
    "return {redis.call('GET', KEYS[2]) or '0', redis.call('GET', KEYS[4]) or '0',\n"
    "        redis.call('GET', KEYS[5]) or '0', redis.call('GET', KEYS[3]) or '0',\n"
    "        redis.call('XLEN', KEYS[1]), redis.call('HGETALL', KEYS[6])}\n";
/* reset all: KEYS stream seq lost base since floors; ARGV since. */
static const char RESET_LUA[] =
    "local seq = redis.call('GET', KEYS[2]) or '0'\n"
    "redis.call('DEL', KEYS[1], KEYS[3], KEYS[6])\n"
    "redis.call('SET', KEYS[4], seq)\n"
    "redis.call('SET', KEYS[5], ARGV[1])\n"
    "return 1\n";

struct item {
    struct item *next;
    char *json;
    size_t len;
};

struct cluster_journal {
    struct cluster_url url;
    uint64_t instance_id;
    char maxlen[24];
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake, done_cond;
    struct item *head, *tail;      /* the queue (lock) */
    size_t queued;                 /* its length (lock) */
    uint64_t enqueued, finished;   /* entries queued / appended or failed, ever (lock) */
    uint64_t lost_unreported;      /* lost, not yet added to K_LOST (lock) */
    bool stop;                     /* (lock) */
    char started[24];              /* this instance's start (wall clock, µs), as K_SINCE */
    redisContext *ctx;             /* the writer's connection (writer thread only) */
    int64_t next_try_ns;           /* (writer thread only) */
    _Atomic uint64_t arrived;      /* gateway requests that began (cluster_journal_arrived) */
    _Atomic uint64_t written, lost, errors;
};

/* --- connections ----------------------------------------------------------------------------- */

static redisContext *connect_to(const struct cluster_url *u, char err[ERR_LEN])
{
    char why[256];
    redisContext *ctx = cluster_connect(u, CJ_TIMEOUT_MS, why, sizeof why);
    if (!ctx)
        snprintf(err, ERR_LEN, "fakegate store %s unreachable: %.150s", u->text, why);
    return ctx;
}

/* A reply that is not what was asked for: the message into err, the reply freed, NULL. */
static redisReply *bad_reply(const struct cluster_url *u, redisContext *ctx, redisReply *rep,
                             const char *what, char err[ERR_LEN])
{
    snprintf(err, ERR_LEN, "fakegate store %s unreachable: %s: %s", u->text, what,
             !rep ? (ctx->errstr[0] ? ctx->errstr : "no reply")
                  : rep->type == REDIS_REPLY_ERROR ? rep->str : "unexpected reply");
    freeReplyObject(rep);
    return NULL;
}

/* --- the writer ------------------------------------------------------------------------------ */

/* Append items (n of them) with one script. 0, or -1 (the connection closed). */
static int append_batch(struct cluster_journal *cj, struct item *items, size_t n, uint64_t lost)
{
    char lost_s[24];
    snprintf(lost_s, sizeof lost_s, "%llu", (unsigned long long)lost);
    const char *head[6] = {"EVAL", APPEND_LUA, "3", K_STREAM, K_SEQ, K_LOST};
    size_t argc = 8 + n; /* ARGV: maxlen, lost, then the entries */
    const char **argv = malloc(argc * sizeof *argv);
    size_t *lens = malloc(argc * sizeof *lens);
    if (!argv || !lens) {
        free(argv);
        free(lens);
        return -1;
    }
    for (size_t i = 0; i < 6; i++)
        argv[i] = head[i], lens[i] = strlen(head[i]);
    argv[6] = cj->maxlen, lens[6] = strlen(cj->maxlen);
    argv[7] = lost_s, lens[7] = strlen(lost_s);
    size_t k = 8;
    for (struct item *it = items; it && k < argc; it = it->next, k++)
        argv[k] = it->json, lens[k] = it->len;
    bool ok = false;
    for (int tries = 0; tries < 2 && !ok; tries++) {
        int64_t now = now_mono_ns();
        char err[ERR_LEN];
        if (!cj->ctx && now >= cj->next_try_ns) {
            cj->next_try_ns = now + CJ_RECONNECT_MS * NS_PER_MS;
            cj->ctx = connect_to(&cj->url, err);
            if (cj->ctx)
                freeReplyObject(redisCommand(cj->ctx, "SET " K_SINCE " %s NX", cj->started));
        }
        if (!cj->ctx)
            break;
        redisReply *rep = redisCommandArgv(cj->ctx, (int)argc, argv, lens);
        ok = rep && rep->type == REDIS_REPLY_INTEGER;
        if (!rep) {
            /* A connection Redis closed while idle (a restart) fails at once with EOF, the
             * command unread: once more on a new connection. */
            bool stale = cj->ctx->err == REDIS_ERR_EOF;
            redisFree(cj->ctx);
            cj->ctx = NULL;
            cj->next_try_ns = 0;
            if (!stale)
                tries++;
        }
        freeReplyObject(rep);
        if (rep && !ok)
            break; /* a Redis error reply: not worth a second try */
    }
    free(argv);
    free(lens);
    return ok ? 0 : -1;
}

static void items_free(struct item *it)
{
    while (it) {
        struct item *next = it->next;
        free(it->json);
        free(it);
        it = next;
    }
}

static void *writer_main(void *arg)
{
    struct cluster_journal *cj = arg;
    pthread_mutex_lock(&cj->lock);
    for (;;) {
        while (!cj->head && !cj->stop)
            pthread_cond_wait(&cj->wake, &cj->lock);
        if (!cj->head)
            break; /* stopping, and nothing is left */
        struct item *batch = cj->head, *last = batch;
        size_t n = 1;
        while (last->next && n < CLUSTER_JOURNAL_BATCH)
            last = last->next, n++;
        cj->head = last->next;
        if (!cj->head)
            cj->tail = NULL;
        last->next = NULL;
        cj->queued -= n;
        uint64_t lost = cj->lost_unreported;
        pthread_mutex_unlock(&cj->lock);

        int rc = append_batch(cj, batch, n, lost);
        items_free(batch);

        pthread_mutex_lock(&cj->lock);
        if (rc == 0) {
            cj->lost_unreported -= lost;
            atomic_fetch_add(&cj->written, n);
        } else {
            cj->lost_unreported += n;
            atomic_fetch_add(&cj->lost, n);
            atomic_fetch_add(&cj->errors, 1);
        }
        cj->finished += n;
        if (rc != 0 && cj->stop) { /* stopping with the store down: the rest is lost too */
            size_t rest = cj->queued;
            items_free(cj->head);
            cj->head = cj->tail = NULL;
            cj->queued = 0;
            cj->lost_unreported += rest;
            atomic_fetch_add(&cj->lost, rest);
            cj->finished += rest;
        }
        pthread_cond_broadcast(&cj->done_cond);
    }
    pthread_mutex_unlock(&cj->lock);
    return NULL;
}

struct cluster_journal *cluster_journal_start(const struct cluster_url *u, uint64_t instance_id,
                                              size_t max_len, char err[ERR_LEN])
{
    struct cluster_journal *cj = calloc(1, sizeof *cj);
    if (!cj) {
        snprintf(err, ERR_LEN, "out of memory");
        return NULL;
    }
    cj->url = *u;
    cj->instance_id = instance_id;
    snprintf(cj->maxlen, sizeof cj->maxlen, "%zu", max_len);
    pthread_mutex_init(&cj->lock, NULL);
    pthread_cond_init(&cj->wake, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&cj->done_cond, &ca);
    pthread_condattr_destroy(&ca);
    /* The journal's start, unless an instance or a reset dated it already: before any request
     * of this instance arrived, so none is hidden as older than it. Again at each reconnect
     * of the writer, for a Redis that came back empty. */
    snprintf(cj->started, sizeof cj->started, "%lld", (long long)now_unix_us());
    redisContext *ctx = connect_to(u, err);
    if (ctx) {
        freeReplyObject(redisCommand(ctx, "SET " K_SINCE " %s NX", cj->started));
        redisFree(ctx);
    }
    int rc = pthread_create(&cj->thread, NULL, writer_main, cj);
    if (rc != 0) {
        snprintf(err, ERR_LEN, "the shared journal's thread: %s", strerror(rc));
        pthread_cond_destroy(&cj->wake);
        pthread_cond_destroy(&cj->done_cond);
        pthread_mutex_destroy(&cj->lock);
        free(cj);
        return NULL;
    }
    return cj;
}

void cluster_journal_stop(struct cluster_journal *cj)
{
    if (!cj)
        return;
    pthread_mutex_lock(&cj->lock);
    cj->stop = true;
    pthread_cond_signal(&cj->wake);
    pthread_mutex_unlock(&cj->lock);
    pthread_join(cj->thread, NULL);
    if (cj->ctx)
        redisFree(cj->ctx);
    items_free(cj->head);
    pthread_cond_destroy(&cj->wake);
    pthread_cond_destroy(&cj->done_cond);
    pthread_mutex_destroy(&cj->lock);
    free(cj);
}

/* --- entries as the stream holds them --------------------------------------------------------- */

/* Is s valid UTF-8 as JSON parsers take it (no overlong forms, no surrogates, <= U+10FFFF)? */
static bool utf8_valid(const unsigned char *s)
{
    while (*s) {
        unsigned c = *s;
        size_t n = c < 0x80 ? 0 : c >= 0xc2 && c <= 0xdf ? 1 : c >= 0xe0 && c <= 0xef ? 2
                 : c >= 0xf0 && c <= 0xf4 ? 3 : 9;
        if (n == 9)
            return false;
        for (size_t i = 1; i <= n; i++)
            if ((s[i] & 0xc0) != 0x80)
                return false;
        if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] > 0x9f) ||
            (c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] > 0x8f))
            return false;
        s += n + 1;
    }
    return true;
}

/* A string field: a JSON string, or {"x":"<hex>"} for bytes that are not UTF-8, so they read
 * back as the bytes received (the journal shows them as \xNN). */
static void add_bytes(struct buf *b, const char *s)
{
    if (!s || utf8_valid((const unsigned char *)s)) {
        buf_add_json_strz(b, s);
        return;
    }
    buf_adds(b, "{\"x\":\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        buf_addf(b, "%02x", *p);
    buf_adds(b, "\"}");
}

/* e as one JSON object: times as the wall clock of its arrival (µs) and offsets from it (ns),
 * so entries of several instances replay on one time line. */
static void encode(const struct cluster_journal *cj, const struct journal_entry *e,
                   struct buf *b)
{
    int64_t a = e->arrived_mono_ns;
    buf_addf(b, "{\"inst\":\"%016llx\",\"lid\":%llu,\"at\":%lld,\"m\":",
             (unsigned long long)cj->instance_id, (unsigned long long)e->id,
             (long long)e->arrived_unix_us);
    buf_add_json_strz(b, e->method);
    buf_adds(b, ",\"p\":");
    add_bytes(b, e->path);
    buf_addf(b, ",\"r\":%d,\"o\":", e->route);
    add_bytes(b, e->order_id);
    buf_adds(b, ",\"k\":");
    add_bytes(b, e->payment_key);
    buf_adds(b, ",\"i\":");
    add_bytes(b, e->idempotency_key);
    buf_adds(b, ",\"t\":");
    buf_add_json_strz(b, e->tenant);
    buf_addf(b, ",\"bh\":\"%016llx\",\"a\":%u,\"ql\":%.17g,\"l\":%.17g,\"sl\":%.17g,\"tr\":",
             (unsigned long long)e->body_hash, e->attempt, e->queue_latency_ms, e->latency_ms,
             e->spent_latency_ms);
    buf_add_json_strz(b, e->trace_id);
    buf_adds(b, ",\"f\":");
    buf_add_json_strz(b, e->fault ? e->fault : "none");
    buf_addf(b, ",\"s\":%d,\"c\":", e->status);
    buf_add_json_strz(b, e->code);
    buf_addf(b, ",\"ra\":%u,\"rau\":%lld,\"snd\":%lld,\"end\":%lld,\"out\":%d,\"d\":%d,"
                "\"kr\":%d,\"cm\":%d}",
             e->retry_after_s,
             (long long)(e->retry_after_until_mono_ns ? e->retry_after_until_mono_ns - a : 0),
             (long long)(e->sent_mono_ns ? e->sent_mono_ns - a : 0),
             (long long)(e->ended_mono_ns - a), (int)e->outcome, (int)e->delivered,
             e->key_reuse ? 1 : 0, e->committed ? 1 : 0);
}

void cluster_journal_add(struct cluster_journal *cj, const struct journal_entry *e)
{
    struct buf b;
    buf_init(&b);
    encode(cj, e, &b);
    size_t len;
    char *json = buf_steal(&b, &len);
    struct item *it = json ? malloc(sizeof *it) : NULL;
    pthread_mutex_lock(&cj->lock);
    cj->enqueued++;
    if (!it || cj->queued >= CLUSTER_JOURNAL_QUEUE_MAX) {
        cj->lost_unreported++;
        cj->finished++;
        atomic_fetch_add(&cj->lost, 1);
        pthread_mutex_unlock(&cj->lock);
        free(json);
        free(it);
        return;
    }
    *it = (struct item){.json = json, .len = len};
    if (cj->tail)
        cj->tail->next = it;
    else
        cj->head = it;
    cj->tail = it;
    cj->queued++;
    pthread_cond_signal(&cj->wake);
    pthread_mutex_unlock(&cj->lock);
}

bool cluster_journal_flush(struct cluster_journal *cj, int64_t timeout_ms)
{
    uint64_t target = atomic_load(&cj->arrived);
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L)
        until.tv_sec++, until.tv_nsec -= 1000000000L;
    pthread_mutex_lock(&cj->lock);
    int rc = 0;
    while (cj->finished < target && rc == 0)
        rc = pthread_cond_timedwait(&cj->done_cond, &cj->lock, &until);
    bool done = cj->finished >= target;
    pthread_mutex_unlock(&cj->lock);
    return done;
}

void cluster_journal_arrived(struct cluster_journal *cj)
{
    atomic_fetch_add_explicit(&cj->arrived, 1, memory_order_relaxed);
}

void cluster_journal_skip(struct cluster_journal *cj)
{
    pthread_mutex_lock(&cj->lock);
    cj->enqueued++;
    cj->finished++;
    pthread_cond_broadcast(&cj->done_cond);
    pthread_mutex_unlock(&cj->lock);
}

void cluster_journal_stats(struct cluster_journal *cj, struct cluster_journal_stats *st)
{
    pthread_mutex_lock(&cj->lock);
    uint64_t finished = cj->finished;
    pthread_mutex_unlock(&cj->lock);
    uint64_t arrived = atomic_load(&cj->arrived); /* after: never below finished */
    st->pending = (size_t)(arrived > finished ? arrived - finished : 0);
    st->written = atomic_load(&cj->written);
    st->lost = atomic_load(&cj->lost);
    st->errors = atomic_load(&cj->errors);
}

/* --- reset ----------------------------------------------------------------------------------- */

int cluster_journal_reset(struct cluster_journal *cj, const char *tenant_key,
                          int64_t since_unix_us, char err[ERR_LEN])
{
    redisContext *ctx = connect_to(&cj->url, err);
    if (!ctx) {
        atomic_fetch_add(&cj->errors, 1);
        return -1;
    }
    char at[24];
    snprintf(at, sizeof at, "%lld", (long long)since_unix_us);
    redisReply *rep;
    if (tenant_key)
        rep = redisCommand(ctx, "HSET " K_FLOORS " %s %s", tenant_key, at);
    else
        rep = redisCommand(ctx, "EVAL %s 6 %s %s %s %s %s %s %s", RESET_LUA, K_STREAM, K_SEQ,
                           K_LOST, K_BASE, K_SINCE, K_FLOORS, at);
    bool ok = rep && rep->type == REDIS_REPLY_INTEGER;
    if (!ok) {
        bad_reply(&cj->url, ctx, rep, "reset of the shared journal", err);
        atomic_fetch_add(&cj->errors, 1);
    } else
        freeReplyObject(rep);
    redisFree(ctx);
    return ok ? 0 : -1;
}

/* --- reading --------------------------------------------------------------------------------- */

/* An entry read back: the journal's fields (its strings owned here), and its instance. */
struct centry {
    struct journal_entry e;
    uint64_t instance;
    char *tenant, *code;
};

struct floor {
    char *tenant;
    int64_t since_us;
};

/* What one read found: the header and the entries in stream order. */
struct snapshot {
    uint64_t seq, base, lost, xlen;
    int64_t since_us;
    struct floor *floors;
    size_t n_floors;
    struct centry *v;
    size_t n, cap;
};

static void snapshot_fini(struct snapshot *s)
{
    for (size_t i = 0; i < s->n; i++) {
        struct centry *c = &s->v[i];
        free(c->e.path);
        free(c->e.order_id);
        free(c->e.payment_key);
        free(c->e.idempotency_key);
        free(c->tenant);
        free(c->code);
    }
    free(s->v);
    for (size_t i = 0; i < s->n_floors; i++)
        free(s->floors[i].tenant);
    free(s->floors);
}

static uint64_t str_u64(const redisReply *r)
{
    if (r->type == REDIS_REPLY_INTEGER)
        return r->integer > 0 ? (uint64_t)r->integer : 0;
    return r->type == REDIS_REPLY_STRING ? strtoull(r->str, NULL, 10) : 0;
}

static char *dup_str(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? strdup(s) : NULL;
}

/* A string field as add_bytes wrote it (owned copy, or NULL). */
static char *dup_bytes(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    const char *hex = json_string_value(json_object_get(v, "x"));
    if (!hex)
        return dup_str(o, k);
    size_t n = strlen(hex) / 2;
    char *out = malloc(n + 1);
    for (size_t i = 0; out && i < n; i++) {
        int hi = hex_digit(hex[2 * i]), lo = hex_digit(hex[2 * i + 1]);
        out[i] = (char)(hi < 0 || lo < 0 ? '?' : hi * 16 + lo);
    }
    if (out)
        out[n] = '\0';
    return out;
}

static long long get_ll(json_t *o, const char *k)
{
    return json_integer_value(json_object_get(o, k));
}

/* The static name of fault kind `s` (the journal keeps static names). */
static const char *fault_static(const char *s)
{
    for (int k = FAULT_NONE; s && k <= FAULT_DRIP; k++)
        if (strcmp(s, fault_kind_name((enum fault_kind)k)) == 0)
            return fault_kind_name((enum fault_kind)k);
    return "none";
}

/* Decode one stream entry (cluster id `id`, JSON `text`) into c. false: not an entry. */
static bool decode(uint64_t id, const char *text, size_t len, struct centry *c)
{
    json_t *o = json_loadb(text, len, 0, NULL);
    if (!json_is_object(o)) {
        json_decref(o);
        return false;
    }
    memset(c, 0, sizeof *c);
    struct journal_entry *e = &c->e;
    e->id = id;
    const char *inst = json_string_value(json_object_get(o, "inst"));
    c->instance = inst ? strtoull(inst, NULL, 16) : 0;
    e->arrived_unix_us = get_ll(o, "at");
    int64_t a = e->arrived_unix_us * 1000; /* one time line for every instance (ns) */
    e->arrived_mono_ns = a;
    copy_cstr(e->method, sizeof e->method,
              json_string_value(json_object_get(o, "m")) ? json_string_value(json_object_get(o, "m"))
                                                         : "");
    e->path = dup_bytes(o, "p");
    e->route = (int)get_ll(o, "r");
    e->order_id = dup_bytes(o, "o");
    e->payment_key = dup_bytes(o, "k");
    e->idempotency_key = dup_bytes(o, "i");
    c->tenant = dup_str(o, "t");
    e->tenant = c->tenant;
    const char *bh = json_string_value(json_object_get(o, "bh"));
    e->body_hash = bh ? strtoull(bh, NULL, 16) : 0;
    e->attempt = (uint32_t)get_ll(o, "a");
    e->queue_latency_ms = json_number_value(json_object_get(o, "ql"));
    e->latency_ms = json_number_value(json_object_get(o, "l"));
    e->spent_latency_ms = json_number_value(json_object_get(o, "sl"));
    copy_cstr(e->trace_id, sizeof e->trace_id,
              json_string_value(json_object_get(o, "tr")) ? json_string_value(json_object_get(o, "tr"))
                                                          : "");
    e->fault = fault_static(json_string_value(json_object_get(o, "f")));
    e->status = (int)get_ll(o, "s");
    c->code = dup_str(o, "c");
    e->code = c->code;
    e->retry_after_s = (uint32_t)get_ll(o, "ra");
    long long rau = get_ll(o, "rau"), snd = get_ll(o, "snd"), end = get_ll(o, "end");
    e->retry_after_until_mono_ns = rau ? a + rau : 0;
    e->sent_mono_ns = snd ? a + snd : 0;
    e->ended_mono_ns = a + (end > 0 ? end : 0);
    if (e->ended_mono_ns == 0)
        e->ended_mono_ns = 1; /* ended: never shown as pending */
    long long out = get_ll(o, "out"), d = get_ll(o, "d");
    e->outcome = out >= 0 && out < OUT_COUNT ? (enum outcome)out : OUT_OK;
    e->delivered = d >= 0 && d <= DELIVERED_PARTIAL ? (enum delivered)d : DELIVERED_PENDING;
    e->key_reuse = get_ll(o, "kr") != 0;
    e->committed = get_ll(o, "cm") != 0;
    json_decref(o);
    return true;
}

/* The tenant's reset time (0: none since the last server-wide reset). */
static int64_t floor_of(const struct snapshot *s, const char *tenant)
{
    for (size_t i = 0; tenant && i < s->n_floors; i++)
        if (strcmp(s->floors[i].tenant, tenant) == 0)
            return s->floors[i].since_us;
    return 0;
}

/* Is entry c still shown: it arrived after the last reset that covered it. */
static bool visible(const struct snapshot *s, const struct centry *c)
{
    int64_t at = c->e.arrived_unix_us;
    return at >= s->since_us && at >= floor_of(s, c->tenant);
}

static int read_header(const struct cluster_journal *cj, redisContext *ctx, struct snapshot *s,
                       char err[ERR_LEN])
{
    redisReply *rep = redisCommand(ctx, "EVAL %s 6 %s %s %s %s %s %s", HEADER_LUA, K_STREAM,
                                   K_SEQ, K_LOST, K_BASE, K_SINCE, K_FLOORS);
    if (!rep || rep->type != REDIS_REPLY_ARRAY || rep->elements != 6 ||
        rep->element[5]->type != REDIS_REPLY_ARRAY) {
        bad_reply(&cj->url, ctx, rep, "the shared journal", err);
        return -1;
    }
    s->seq = str_u64(rep->element[0]);
    s->base = str_u64(rep->element[1]);
    s->since_us = (int64_t)str_u64(rep->element[2]);
    s->lost = str_u64(rep->element[3]);
    s->xlen = str_u64(rep->element[4]);
    redisReply *f = rep->element[5];
    size_t nf = f->elements / 2;
    s->floors = nf ? calloc(nf, sizeof *s->floors) : NULL;
    for (size_t i = 0; s->floors && i < nf; i++) {
        if (f->element[2 * i]->type != REDIS_REPLY_STRING)
            continue;
        s->floors[s->n_floors].tenant = strdup(f->element[2 * i]->str);
        s->floors[s->n_floors].since_us = (int64_t)str_u64(f->element[2 * i + 1]);
        if (s->floors[s->n_floors].tenant)
            s->n_floors++;
    }
    freeReplyObject(rep);
    return 0;
}

/* Read the header and every entry after the last reset up to the header's sequence. */
static int snapshot_read(struct cluster_journal *cj, struct snapshot *s, char err[ERR_LEN])
{
    memset(s, 0, sizeof *s);
    redisContext *ctx = connect_to(&cj->url, err);
    if (!ctx) {
        atomic_fetch_add(&cj->errors, 1);
        return -1;
    }
    int rc = read_header(cj, ctx, s, err);
    char start[48] = "-";
    bool more = rc == 0;
    while (more) {
        redisReply *rep = redisCommand(ctx, "XRANGE " K_STREAM " %s + COUNT %d", start, CJ_PAGE);
        if (!rep || rep->type != REDIS_REPLY_ARRAY) {
            bad_reply(&cj->url, ctx, rep, "XRANGE of the shared journal", err);
            rc = -1;
            break;
        }
        more = rep->elements == CJ_PAGE;
        if (s->n + rep->elements > s->cap) {
            size_t cap = s->cap ? s->cap * 2 : 1024;
            while (cap < s->n + rep->elements)
                cap *= 2;
            struct centry *v = realloc(s->v, cap * sizeof *v);
            if (!v) {
                snprintf(err, ERR_LEN, "out of memory reading the shared journal");
                freeReplyObject(rep);
                rc = -1;
                break;
            }
            s->v = v, s->cap = cap;
        }
        for (size_t i = 0; i < rep->elements; i++) {
            redisReply *x = rep->element[i];
            if (x->type != REDIS_REPLY_ARRAY || x->elements != 2 ||
                x->element[0]->type != REDIS_REPLY_STRING)
                continue;
            snprintf(start, sizeof start, "(%s", x->element[0]->str);
            redisReply *fv = x->element[1];
            uint64_t id = 0;
            const char *text = NULL;
            size_t len = 0;
            for (size_t j = 0; fv->type == REDIS_REPLY_ARRAY && j + 1 < fv->elements; j += 2) {
                const char *name = fv->element[j]->str;
                if (!name)
                    continue;
                if (strcmp(name, "id") == 0)
                    id = str_u64(fv->element[j + 1]);
                else if (strcmp(name, "e") == 0 && fv->element[j + 1]->type == REDIS_REPLY_STRING)
                    text = fv->element[j + 1]->str, len = fv->element[j + 1]->len;
            }
            if (id > s->seq) {
                more = false; /* appended after the header: the next read has it */
                break;
            }
            if (id <= s->base || !text)
                continue;
            if (decode(id, text, len, &s->v[s->n]))
                s->n++;
        }
        freeReplyObject(rep);
    }
    redisFree(ctx);
    if (rc != 0)
        atomic_fetch_add(&cj->errors, 1);
    return rc;
}

/* --- GET /__admin/requests ----------------------------------------------------------------- */

/* qsort has no context argument: the entries being sorted (set around one call). */
static _Thread_local const struct centry *sort_v;

static int cmp_arrival(const void *a, const void *b)
{
    const struct centry *x = &sort_v[*(const size_t *)a], *y = &sort_v[*(const size_t *)b];
    if (x->e.arrived_unix_us != y->e.arrived_unix_us)
        return x->e.arrived_unix_us < y->e.arrived_unix_us ? -1 : 1;
    return x->e.id < y->e.id ? -1 : x->e.id > y->e.id;
}

int cluster_journal_requests(struct cluster_journal *cj, const struct journal_filter *f,
                             size_t default_limit, struct buf *b, char err[ERR_LEN])
{
    struct snapshot s;
    if (snapshot_read(cj, &s, err) != 0) {
        snapshot_fini(&s);
        return -1;
    }
    struct journal_filter g = *f;
    g.tenant = NULL; /* compared here, as a string */
    size_t total = 0;
    size_t *match = malloc((s.n ? s.n : 1) * sizeof *match);
    if (!match) {
        snapshot_fini(&s);
        snprintf(err, ERR_LEN, "out of memory reading the shared journal");
        return -1;
    }
    for (size_t i = 0; i < s.n; i++) {
        const struct centry *c = &s.v[i];
        if (!visible(&s, c) || !journal_filter_matches(&g, &c->e))
            continue;
        if (f->tenant && (!c->tenant || strcmp(f->tenant, c->tenant) != 0))
            continue;
        match[total++] = i;
    }
    /* Oldest first, as one instance's journal lists them: by arrival (one machine's wall
     * clock), ties in stream order. */
    sort_v = s.v;
    qsort(match, total, sizeof *match, cmp_arrival);
    sort_v = NULL;
    size_t limit = f->limit ? f->limit : default_limit;
    size_t keep = limit && limit < total ? limit : total;
    struct journal_entry *v = malloc((keep ? keep : 1) * sizeof *v);
    uint64_t *inst = malloc((keep ? keep : 1) * sizeof *inst);
    int rc = 0;
    if (!v || !inst) {
        snprintf(err, ERR_LEN, "out of memory reading the shared journal");
        rc = -1;
    } else {
        for (size_t k = 0; k < keep; k++) {
            const struct centry *c = &s.v[match[total - keep + k]];
            v[k] = c->e;
            inst[k] = c->instance;
        }
        journal_render_instances(b, v, inst, keep, total);
    }
    free(v);
    free(inst);
    free(match);
    snapshot_fini(&s);
    return rc;
}

/* --- GET /__admin/report ------------------------------------------------------------------- */

struct by_tenant {
    const char *tenant;            /* NULL sorts first */
    size_t i;                      /* stream order within a tenant */
};

static int cmp_tenant(const void *a, const void *b)
{
    const struct by_tenant *x = a, *y = b;
    if (x->tenant != y->tenant) {
        if (!x->tenant || !y->tenant)
            return x->tenant ? 1 : -1;
        int c = strcmp(x->tenant, y->tenant);
        if (c)
            return c;
    }
    return x->i < y->i ? -1 : x->i > y->i;
}

int cluster_journal_report(struct cluster_journal *cj, const char *tenant_key, struct buf *b,
                           char err[ERR_LEN])
{
    struct snapshot s;
    if (snapshot_read(cj, &s, err) != 0) {
        snapshot_fini(&s);
        return -1;
    }
    struct by_tenant *o = malloc((s.n ? s.n : 1) * sizeof *o);
    struct journal_entry *v = malloc((s.n ? s.n : 1) * sizeof *v);
    struct report *reps = calloc(s.n_floors + 2 + s.n, sizeof *reps);
    struct report **rps = calloc(s.n_floors + 2 + s.n, sizeof *rps);
    int rc = 0;
    if (!o || !v || !reps || !rps) {
        snprintf(err, ERR_LEN, "out of memory reading the shared journal");
        rc = -1;
        goto out;
    }
    size_t n = 0;
    for (size_t i = 0; i < s.n; i++) {
        const struct centry *c = &s.v[i];
        if (!visible(&s, c))
            continue;
        if (tenant_key && (!c->tenant || strcmp(c->tenant, tenant_key) != 0))
            continue;
        o[n++] = (struct by_tenant){c->tenant, i};
    }
    qsort(o, n, sizeof *o, cmp_tenant);
    /* One report per tenant, as each instance keeps them; the whole server's is their merge. */
    size_t n_reps = 0;
    for (size_t k = 0; k < n && rc == 0;) {
        size_t end = k;
        size_t m = 0;
        while (end < n && (o[end].tenant == o[k].tenant ||
                           (o[end].tenant && o[k].tenant &&
                            strcmp(o[end].tenant, o[k].tenant) == 0)))
            v[m++] = s.v[o[end++].i].e;
        int64_t since = s.since_us;
        int64_t fl = floor_of(&s, o[k].tenant);
        if (fl > since)
            since = fl;
        struct report *rp = &reps[n_reps];
        if (report_init(rp, SIZE_MAX, since, 1, 0) != 0) {
            snprintf(err, ERR_LEN, "out of memory judging the shared journal");
            rc = -1;
            break;
        }
        rps[n_reps++] = rp;
        if (report_replay(rp, v, m) != 0) {
            snprintf(err, ERR_LEN, "out of memory judging the shared journal");
            rc = -1;
        }
        k = end;
    }
    if (rc == 0 && n_reps == 0) { /* nothing yet: an empty report, dated as the stream is */
        int64_t since = s.since_us;
        int64_t fl = floor_of(&s, tenant_key);
        if (fl > since)
            since = fl;
        if (report_init(&reps[0], SIZE_MAX, since, 1, 0) != 0) {
            snprintf(err, ERR_LEN, "out of memory judging the shared journal");
            rc = -1;
        } else
            rps[n_reps++] = &reps[0];
    }
    if (rc == 0) {
        uint64_t appended = s.seq > s.base ? s.seq - s.base : 0;
        uint64_t trimmed = appended > s.xlen ? appended - s.xlen : 0;
        char reason[400] = "";
        if (trimmed || s.lost)
            snprintf(reason, sizeof reason,
                     "the shared journal holds %llu of the %llu requests since the last reset: "
                     "%llu trimmed (--cluster-journal-max), %llu lost by an instance that could "
                     "not reach the store",
                     (unsigned long long)(appended - trimmed), (unsigned long long)(appended + s.lost),
                     (unsigned long long)trimmed, (unsigned long long)s.lost);
        report_render_merged_reason(rps, n_reps, reason[0] ? reason : NULL, b);
    }
    for (size_t i = 0; i < n_reps; i++)
        report_fini(rps[i]);
out:
    free(o);
    free(v);
    free(reps);
    free(rps);
    snapshot_fini(&s);
    return rc;
}
