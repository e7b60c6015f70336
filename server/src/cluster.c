/* cluster.c -- the shared store over Redis (see cluster.h; docs/cluster.md). Keys, all under
 * "fakegate:": `log` (a list: one state-file line per committed section, oldest first),
 * `lock` (the lease: a token SET NX PX), `epoch` (a random id of this log: a Redis that came
 * back empty has another, and every replica rebuilds), `instance:<id>` (heartbeats) and
 * `attempts:<tenant>:<route>:<identity>` (shared attempt counters). Invariants: `applied`
 * counts the log lines this replica holds, in log order; a line is pushed only by the commit
 * script while the pusher's lease is still set. */
#define _GNU_SOURCE
#include "cluster.h"

#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "gateway.h"
#include "rng.h"
#include "statefile.h"

/* A connect or a command that takes longer than this counts as the store down: a request
 * waits at most about this long per round trip before its 503 (the store is on the same
 * network; a healthy round trip is tens of microseconds). */
#define CLUSTER_TIMEOUT_MS 500
/* A thread whose connect failed tries again no sooner than this: a Redis that is back is
 * found within this, and a dead one is not hammered. */
#define CLUSTER_RECONNECT_MS 50
/* The lease a section holds: long enough for a section and its catch-up (at most
 * CLUSTER_CATCHUP_CHUNK lines, a few milliseconds), short enough that an instance killed
 * mid-section holds the others up for at most this. */
#define CLUSTER_LEASE_MS 500
/* How long a section waits for a busy lease before its request gets 503. */
#define CLUSTER_BUSY_DEADLINE_MS 1000
/* A heartbeat key's lease; the 1 s sweep refreshes it, so a live instance's never lapses. An
 * instance is judged dead only when its key has been missing for this long too: a Redis that
 * came back empty has nobody's key until each instance's next refresh. */
#define CLUSTER_HEARTBEAT_MS 3000
/* Instances whose missing heartbeat is being timed at once (more are judged on a later sweep). */
#define CLUSTER_MISSING_MAX 64
/* Lines fetched per LRANGE when catching up without the lease, and the most a begin applies
 * while holding it: further behind, it catches up first and takes the lease again. */
#define CLUSTER_CATCHUP_CHUNK 1000
#define PREFIX "fakegate:"

/* begin: KEYS lock, log, epoch; ARGV token, lease_ms, applied, chunk, new_epoch.
 * -> {0} busy | {2, len, epoch} too far behind (lease not kept) | {1, len, epoch, lines} */
static const char BEGIN_LUA[] =
    "if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return {0} end\n"
    "local e = redis.call('GET', KEYS[3])\n"
    "if not e then redis.call('SET', KEYS[3], ARGV[5]); e = ARGV[5] end\n"
    "local n = redis.call('LLEN', KEYS[2])\n"
    "local from = tonumber(ARGV[3])\n"
    "if n < from or n - from > tonumber(ARGV[4]) then\n"
    "  redis.call('DEL', KEYS[1]); return {2, n, e}\n"
    "end\n"
    "return {1, n, e, redis.call('LRANGE', KEYS[2], from, -1)}\n";
/* commit: KEYS lock, log; ARGV token [, line]. -> the log's length, or -1: the lease is gone. */
static const char COMMIT_LUA[] =
    "if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end\n"
    "local n\n"
    "if #ARGV >= 2 then n = redis.call('RPUSH', KEYS[2], ARGV[2])\n"
    "else n = redis.call('LLEN', KEYS[2]) end\n"
    "redis.call('DEL', KEYS[1])\n"
    "return n\n";

/* One thread's connection. */
struct conn {
    redisContext *ctx;            /* NULL: not connected */
    int64_t next_try_ns;          /* no connect before this (monotonic) */
    unsigned rnd;                 /* the backoff's jitter */
    struct cluster *c;
    struct conn *prev, *next;     /* c->conns */
};

struct cluster {
    struct cluster_url url;
    uint64_t instance_id;
    int64_t idem_ttl_ms;
    char sha_begin[41], sha_commit[41]; /* SHA1s of the scripts (SCRIPT LOAD) */
    char epoch[17];                /* the log's epoch this replica applied (store lock) */
    pthread_key_t key;             /* this thread's struct conn */
    pthread_mutex_t conns_lock;
    struct conn *conns;
    _Atomic bool up;
    _Atomic uint64_t errors;
    pthread_mutex_t err_lock;
    char error[256];               /* the last failure, after "fakegate store URL " */
    struct statefile *sf;          /* the pending line and the line applier */
    struct gateway *g;
    uint64_t applied;              /* log lines applied (store lock) */
    _Atomic uint64_t applied_seen; /* the same, for /healthz */
    _Atomic uint64_t lines_seen;   /* the log's length when last seen */
    bool rebuild;                  /* empty every store and apply the whole log (store lock) */
    bool release_own;              /* after a rebuild: release our own PROCESSING records */
    bool rebuilt;                  /* the section in progress began with a rebuild */
    uint64_t seq;                  /* sections begun (store lock): the lease token */
    pthread_mutex_t missing_lock;
    struct {
        uint64_t id;
        int64_t since_ns;          /* monotonic: first seen without its heartbeat */
    } missing[CLUSTER_MISSING_MAX];
    size_t n_missing;
    char token[40];                /* the lease token of the section in progress */
};

/* --- the URL ------------------------------------------------------------------------------- */

static bool parse_uint(const char *s, size_t n, unsigned max, unsigned *v)
{
    if (n == 0 || n > 5)
        return false;
    unsigned x = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        x = x * 10 + (unsigned)(s[i] - '0');
    }
    *v = x;
    return x <= max;
}

/* "--store URL: why" into err; -1. */
__attribute__((format(printf, 3, 4))) static int bad_url(char *err, const char *url,
                                                         const char *fmt, ...)
{
    char why[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    snprintf(err, ERR_LEN, "--store %.300s: %s", url, why);
    return -1;
}

int cluster_parse_url(const char *s, struct cluster_url *u, char err[ERR_LEN])
{
    static const char scheme[] = "redis://";
    memset(u, 0, sizeof *u);
#define BAD(...) bad_url(err, s, __VA_ARGS__)
    if (strncmp(s, scheme, sizeof scheme - 1) != 0)
        return BAD("not memory or redis://HOST:PORT[/DB]");
    const char *host = s + sizeof scheme - 1;
    const char *colon = strchr(host, ':');
    const char *slash = strchr(host, '/');
    if (strpbrk(host, "@?#[]"))
        return BAD("a user, password, query or IPv6 address is not supported: redis://HOST:PORT[/DB]");
    if (!colon || (slash && slash < colon))
        return BAD("no port: redis://HOST:PORT[/DB]");
    size_t hn = (size_t)(colon - host);
    if (hn == 0 || hn > CLUSTER_HOST_MAX)
        return BAD("the host is 1-%d characters", CLUSTER_HOST_MAX);
    for (size_t i = 0; i < hn; i++) {
        char ch = host[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '-' || ch == '.' || ch == '_'))
            return BAD("the host has a character other than letters, digits, '-', '.', '_'");
    }
    const char *port = colon + 1;
    size_t pn = slash ? (size_t)(slash - port) : strlen(port);
    if (!parse_uint(port, pn, 65535, &u->port) || u->port == 0)
        return BAD("the port is 1-65535");
    if (slash && !parse_uint(slash + 1, strlen(slash + 1), 15, &u->db))
        return BAD("the database is a number 0-15");
#undef BAD
    memcpy(u->host, host, hn);
    snprintf(u->text, sizeof u->text, "redis://%s:%u/%u", u->host, u->port, u->db);
    return 0;
}

/* --- connections and errors ----------------------------------------------------------------- */

static void set_error(struct cluster *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_error(struct cluster *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&c->err_lock);
    vsnprintf(c->error, sizeof c->error, fmt, ap);
    pthread_mutex_unlock(&c->err_lock);
    va_end(ap);
    atomic_store(&c->up, false);
    atomic_fetch_add(&c->errors, 1);
}

static void conn_close(struct conn *k)
{
    if (k->ctx)
        redisFree(k->ctx);
    k->ctx = NULL;
}

static void conn_free(void *p)
{
    struct conn *k = p;
    struct cluster *c = k->c;
    pthread_mutex_lock(&c->conns_lock);
    if (k->prev)
        k->prev->next = k->next;
    else
        c->conns = k->next;
    if (k->next)
        k->next->prev = k->prev;
    pthread_mutex_unlock(&c->conns_lock);
    conn_close(k);
    free(k);
}

/* This thread's connection, connected; NULL (the error set) when Redis cannot be reached. */
struct redisContext *cluster_connect(const struct cluster_url *u, int timeout_ms, char *why,
                                     size_t n)
{
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    redisContext *ctx = redisConnectWithTimeout(u->host, (int)u->port, tv);
    if (!ctx || ctx->err) {
        snprintf(why, n, "%s", ctx ? ctx->errstr : "out of memory");
        if (ctx)
            redisFree(ctx);
        return NULL;
    }
    int one = 1;
    redisSetTimeout(ctx, tv);
    setsockopt(ctx->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (u->db) {
        redisReply *rep = redisCommand(ctx, "SELECT %u", u->db);
        bool ok = rep && rep->type == REDIS_REPLY_STATUS;
        if (!ok)
            snprintf(why, n, "SELECT %u: %s", u->db,
                     rep ? (rep->type == REDIS_REPLY_ERROR ? rep->str : "unexpected reply")
                         : ctx->errstr);
        freeReplyObject(rep);
        if (!ok) {
            redisFree(ctx);
            return NULL;
        }
    }
    return ctx;
}

static struct conn *conn_get(struct cluster *c)
{
    struct conn *k = pthread_getspecific(c->key);
    if (!k) {
        if (!(k = calloc(1, sizeof *k))) {
            set_error(c, "unreachable: out of memory");
            return NULL;
        }
        k->c = c;
        k->rnd = (unsigned)(c->instance_id ^ (uintptr_t)k);
        pthread_mutex_lock(&c->conns_lock);
        k->next = c->conns;
        if (c->conns)
            c->conns->prev = k;
        c->conns = k;
        pthread_mutex_unlock(&c->conns_lock);
        pthread_setspecific(c->key, k);
    }
    if (k->ctx)
        return k;
    int64_t now = now_mono_ns();
    if (now < k->next_try_ns)
        return NULL; /* the error of the last try stands */
    k->next_try_ns = now + CLUSTER_RECONNECT_MS * NS_PER_MS;
    char why[256];
    if (!(k->ctx = cluster_connect(&c->url, CLUSTER_TIMEOUT_MS, why, sizeof why))) {
        set_error(c, "unreachable: %s", why);
        return NULL;
    }
    /* A Redis that came back empty learns at once that this instance is alive. */
    freeReplyObject(redisCommand(k->ctx, "SET " PREFIX "instance:%016llx 1 PX %d",
                                 (unsigned long long)c->instance_id, CLUSTER_HEARTBEAT_MS));
    return k;
}

/* Run argv on this thread's connection. The reply (caller frees), or NULL with the error set
 * (an I/O error closes the connection; the next use reconnects). A Redis error reply is
 * returned as it is: the caller judges it. */
static redisReply *run(struct cluster *c, int argc, const char **argv, const size_t *lens)
{
    for (int tries = 0;; tries++) {
        struct conn *k = conn_get(c);
        if (!k)
            return NULL;
        redisReply *rep = redisCommandArgv(k->ctx, argc, argv, lens);
        if (rep) {
            atomic_store(&c->up, true);
            return rep;
        }
        /* A connection Redis closed while it was idle (Redis restarted) fails its next
         * command at once with EOF, the command unread: once, on a new connection. */
        bool stale = k->ctx->err == REDIS_ERR_EOF && tries == 0;
        if (!stale)
            set_error(c, "unreachable: %s", k->ctx->errstr[0] ? k->ctx->errstr : "no reply");
        conn_close(k);
        k->next_try_ns = 0; /* a dropped connection may reconnect at once */
        if (!stale)
            return NULL;
    }
}

static redisReply *run_strs(struct cluster *c, int argc, const char **argv)
{
    size_t lens[8];
    for (int i = 0; i < argc; i++)
        lens[i] = strlen(argv[i]);
    return run(c, argc, argv, lens);
}

/* SCRIPT LOAD src into sha. 0 or -1. */
static int load_script(struct cluster *c, const char *src, char sha[41])
{
    const char *argv[] = {"SCRIPT", "LOAD", src};
    redisReply *rep = run_strs(c, 3, argv);
    int rc = rep && rep->type == REDIS_REPLY_STRING && rep->len == 40 ? 0 : -1;
    if (rc == 0)
        memcpy(sha, rep->str, 41);
    else if (rep)
        set_error(c, "unreachable: SCRIPT LOAD: %s", rep->type == REDIS_REPLY_ERROR ? rep->str : "unexpected reply");
    freeReplyObject(rep);
    return rc;
}

/* EVALSHA of script `sha` (source `src`, loaded again on NOSCRIPT: Redis restarted) with
 * argv[2..] (argv[0], argv[1] filled here). The reply, or NULL with the error set; an error
 * reply is turned into NULL too. */
static redisReply *eval(struct cluster *c, char sha[41], const char *src, int argc,
                        const char **argv, size_t *lens)
{
    argv[0] = "EVALSHA";
    lens[0] = 7;
    for (int tries = 0; tries < 2; tries++) {
        argv[1] = sha;
        lens[1] = 40;
        redisReply *rep = run(c, argc, argv, lens);
        if (!rep || rep->type != REDIS_REPLY_ERROR)
            return rep;
        bool noscript = strncmp(rep->str, "NOSCRIPT", 8) == 0;
        if (!noscript)
            set_error(c, "unreachable: %s", rep->str);
        freeReplyObject(rep);
        if (!noscript || load_script(c, src, sha) != 0)
            return NULL;
    }
    return NULL;
}

/* --- handle --------------------------------------------------------------------------------- */

struct cluster *cluster_new(const struct cluster_url *u, uint64_t instance_id,
                            int64_t idem_ttl_ms)
{
    struct cluster *c = calloc(1, sizeof *c);
    if (!c || pthread_key_create(&c->key, conn_free) != 0) {
        free(c);
        return NULL;
    }
    c->url = *u;
    c->instance_id = instance_id;
    c->idem_ttl_ms = idem_ttl_ms > 0 ? idem_ttl_ms : 1;
    pthread_mutex_init(&c->conns_lock, NULL);
    pthread_mutex_init(&c->err_lock, NULL);
    pthread_mutex_init(&c->missing_lock, NULL);
    snprintf(c->error, sizeof c->error, "not connected yet");
    return c;
}

void cluster_free(struct cluster *c)
{
    if (!c)
        return;
    struct conn *mine = pthread_getspecific(c->key);
    pthread_setspecific(c->key, NULL);
    if (mine)
        conn_free(mine);
    /* Threads that ended freed theirs (the key's destructor); any left were never joined. */
    while (c->conns)
        conn_free(c->conns);
    pthread_key_delete(c->key);
    pthread_mutex_destroy(&c->conns_lock);
    pthread_mutex_destroy(&c->err_lock);
    pthread_mutex_destroy(&c->missing_lock);
    free(c);
}

const struct cluster_url *cluster_url_of(const struct cluster *c)
{
    return &c->url;
}

const char *cluster_url_text(const struct cluster *c)
{
    return c->url.text;
}

uint64_t cluster_instance(const struct cluster *c)
{
    return c->instance_id;
}

void cluster_message(struct cluster *c, char *out, size_t n)
{
    pthread_mutex_lock(&c->err_lock);
    snprintf(out, n, "fakegate store %s %s", c->url.text, c->error);
    pthread_mutex_unlock(&c->err_lock);
}

void cluster_status(struct cluster *c, struct cluster_status *st)
{
    st->up = atomic_load(&c->up);
    pthread_mutex_lock(&c->err_lock);
    snprintf(st->error, sizeof st->error, "%s", c->error);
    pthread_mutex_unlock(&c->err_lock);
    st->applied = atomic_load(&c->applied_seen);
    st->lines = atomic_load(&c->lines_seen);
    st->errors = atomic_load(&c->errors);
}

void cluster_mark_rebuild(struct cluster *c)
{
    c->rebuild = true;
}

/* --- the log -------------------------------------------------------------------------------- */

/* Apply the log lines in `rep` (an array of strings), numbered from c->applied + 1. 0, or -1
 * (the error set; the replica marked for a rebuild). */
static int apply_lines(struct cluster *c, const redisReply *rep)
{
    for (size_t i = 0; i < rep->elements; i++) {
        const redisReply *line = rep->element[i];
        char err[ERR_LEN];
        if (line->type != REDIS_REPLY_STRING ||
            statefile_apply_line(c->sf, c->g, line->str, line->len, c->applied + 1, NULL, err) != 0) {
            set_error(c, "log line %llu does not apply: %s", (unsigned long long)c->applied + 1,
                      line->type == REDIS_REPLY_STRING ? err : "not a string");
            c->rebuild = true;
            return -1;
        }
        c->applied++;
    }
    atomic_store(&c->applied_seen, c->applied);
    return 0;
}

/* Catch up without the lease, CLUSTER_CATCHUP_CHUNK lines at a time, until a chunk comes back
 * short (the log's end, as of then). 0 or -1. */
static int catch_up(struct cluster *c)
{
    for (;;) {
        char from[24], to[24];
        snprintf(from, sizeof from, "%llu", (unsigned long long)c->applied);
        snprintf(to, sizeof to, "%llu", (unsigned long long)c->applied + CLUSTER_CATCHUP_CHUNK - 1);
        const char *argv[] = {"LRANGE", PREFIX "log", from, to};
        redisReply *rep = run_strs(c, 4, argv);
        if (!rep)
            return -1;
        if (rep->type != REDIS_REPLY_ARRAY) {
            set_error(c, "unreachable: LRANGE: %s", rep->type == REDIS_REPLY_ERROR ? rep->str : "unexpected reply");
            freeReplyObject(rep);
            return -1;
        }
        size_t got = rep->elements;
        int rc = apply_lines(c, rep);
        freeReplyObject(rep);
        if (rc != 0)
            return -1;
        atomic_store(&c->lines_seen, c->applied);
        if (got < CLUSTER_CATCHUP_CHUNK)
            return 0;
    }
}

/* Empty every store (as a replay starts) and forget the applied lines: the whole log is
 * applied again. */
static void rebuild(struct cluster *c)
{
    c->sf->replaying = true;
    gateway_replica_clear_locked(c->g);
    c->sf->replaying = false;
    c->applied = 0;
    atomic_store(&c->applied_seen, 0);
    c->rebuild = false;
    c->release_own = true;
    c->rebuilt = true;
}

bool cluster_rebuilt(const struct cluster *c)
{
    return c->rebuilt;
}

void cluster_note_rebuilt(struct cluster *c)
{
    set_error(c, "rebuilt this instance's state from the shared log (it had changed or a "
                 "commit failed) while the request was in progress: send it again");
}

int cluster_start(struct cluster *c, struct statefile *sf, struct gateway *g, uint64_t *lines,
                  char err[ERR_LEN])
{
    c->sf = sf;
    c->g = g;
    uint64_t r = c->instance_id ^ (uint64_t)now_unix_us();
    snprintf(c->epoch, sizeof c->epoch, "%016llx", (unsigned long long)mix64(r));
    int rc = load_script(c, BEGIN_LUA, c->sha_begin) == 0 &&
                     load_script(c, COMMIT_LUA, c->sha_commit) == 0 ? 0 : -1;
    if (rc == 0) {
        /* The log's epoch: ours if the log has none yet. */
        const char *argv[] = {"SET", PREFIX "epoch", c->epoch, "NX", "GET"};
        redisReply *rep = run_strs(c, 5, argv);
        if (rep && rep->type == REDIS_REPLY_STRING && rep->len == 16)
            memcpy(c->epoch, rep->str, 17);
        else if (!rep || rep->type == REDIS_REPLY_ERROR)
            rc = -1;
        if (rep && rep->type == REDIS_REPLY_ERROR)
            set_error(c, "unreachable: SET epoch: %s", rep->str);
        freeReplyObject(rep);
    }
    if (rc == 0) {
        cluster_heartbeat(c);
        pthread_mutex_lock(&g->lock);
        rc = catch_up(c);
        pthread_mutex_unlock(&g->lock);
    }
    *lines = c->applied;
    if (rc != 0) {
        pthread_mutex_lock(&c->err_lock);
        snprintf(err, ERR_LEN, "--store %.240s: %.255s", c->url.text, c->error);
        pthread_mutex_unlock(&c->err_lock);
    }
    return rc;
}

/* Sleep about `us` microseconds, jittered to between half and all of it. */
static void backoff(struct conn *k, int64_t us)
{
    int64_t j = us / 2 + (int64_t)((unsigned)rand_r(&k->rnd) % (unsigned)(us / 2 + 1));
    struct timespec ts = {0, (long)(j * 1000)};
    nanosleep(&ts, NULL);
}

int cluster_begin(struct cluster *c)
{
    c->rebuilt = false;
    if (c->rebuild)
        rebuild(c);
    snprintf(c->token, sizeof c->token, "%016llx:%llu", (unsigned long long)c->instance_id,
             (unsigned long long)++c->seq);
    int64_t deadline = now_mono_ns() + CLUSTER_BUSY_DEADLINE_MS * NS_PER_MS;
    int64_t wait_us = 20;
    for (;;) {
        char from[24], chunk[24], lease[24];
        snprintf(from, sizeof from, "%llu", (unsigned long long)c->applied);
        snprintf(chunk, sizeof chunk, "%d", CLUSTER_CATCHUP_CHUNK);
        snprintf(lease, sizeof lease, "%d", CLUSTER_LEASE_MS);
        const char *argv[] = {NULL, NULL, "3", PREFIX "lock", PREFIX "log", PREFIX "epoch",
                              c->token, lease, from, chunk, c->epoch};
        size_t lens[11];
        for (int i = 2; i < 11; i++)
            lens[i] = strlen(argv[i]);
        redisReply *rep = eval(c, c->sha_begin, BEGIN_LUA, 11, argv, lens);
        if (!rep)
            return -1;
        long long status = rep->type == REDIS_REPLY_ARRAY && rep->elements >= 1 &&
                                   rep->element[0]->type == REDIS_REPLY_INTEGER
                               ? rep->element[0]->integer : -1;
        if (status == 0) { /* busy: another instance's section */
            freeReplyObject(rep);
            if (now_mono_ns() >= deadline) {
                set_error(c, "busy: the cluster lease was held for over %d ms", CLUSTER_BUSY_DEADLINE_MS);
                return -1;
            }
            backoff(pthread_getspecific(c->key), wait_us);
            wait_us = wait_us < 2000 ? wait_us * 2 : wait_us; /* sections take ~0.1 ms */
            continue;
        }
        bool shaped = status >= 1 && rep->elements >= 3 &&
                      rep->element[1]->type == REDIS_REPLY_INTEGER &&
                      rep->element[2]->type == REDIS_REPLY_STRING &&
                      (status == 2 || (rep->elements == 4 && rep->element[3]->type == REDIS_REPLY_ARRAY));
        if (!shaped) {
            freeReplyObject(rep);
            set_error(c, "unreachable: the begin script's reply is malformed");
            return -1;
        }
        uint64_t n = (uint64_t)rep->element[1]->integer;
        atomic_store(&c->lines_seen, n);
        if (strcmp(rep->element[2]->str, c->epoch) != 0 || n < c->applied) {
            /* Another log than the one applied (Redis came back empty, or was flushed):
             * follow it from its start. */
            snprintf(c->epoch, sizeof c->epoch, "%s", rep->element[2]->str);
            freeReplyObject(rep);
            if (status == 1)
                cluster_commit(c); /* give the lease back; no line is pending yet */
            rebuild(c);
            continue;
        }
        if (status == 2) { /* far behind: catch up without holding the others up */
            freeReplyObject(rep);
            if (catch_up(c) != 0)
                return -1;
            continue;
        }
        int rc = apply_lines(c, rep->element[3]);
        freeReplyObject(rep);
        if (rc != 0) {
            cluster_commit(c); /* the lease back; nothing of this section is pending */
            return -1;
        }
        if (c->release_own) {
            /* After a rebuild no request of ours holds a claim: the log's claims of this
             * instance left PROCESSING are nobody's; their releases go with this section. */
            c->release_own = false;
            statefile_release_instance(c->sf, c->g, c->instance_id);
        }
        return 0;
    }
}

int cluster_commit(struct cluster *c)
{
    size_t len = 0;
    const char *line = statefile_take_line(c->sf, &len);
    const char *argv[] = {NULL, NULL, "2", PREFIX "lock", PREFIX "log", c->token, line};
    size_t lens[7] = {0, 0, 1, strlen(argv[3]), strlen(argv[4]), strlen(c->token), len};
    redisReply *rep = eval(c, c->sha_commit, COMMIT_LUA, line ? 7 : 6, argv, lens);
    statefile_clear_line(c->sf);
    long long n = rep && rep->type == REDIS_REPLY_INTEGER ? rep->integer : -2;
    freeReplyObject(rep);
    uint64_t want = c->applied + (line ? 1 : 0);
    if (n >= 0 && (uint64_t)n >= want && (!line || (uint64_t)n == want)) {
        c->applied = want;
        atomic_store(&c->applied_seen, want);
        atomic_store(&c->lines_seen, (uint64_t)n);
        return 0;
    }
    if (n == -1)
        set_error(c, "lost: the cluster lease expired during a section (over %d ms)", CLUSTER_LEASE_MS);
    else if (n >= 0)
        set_error(c, "diverged: the log has %lld lines where %llu were expected", n,
                  (unsigned long long)want);
    else if (rep)
        set_error(c, "unreachable: the commit script's reply is malformed");
    /* The section's changes are in this replica and perhaps not in the log: start again from
     * the log. */
    c->rebuild = true;
    return -1;
}

/* --- attempt counters and heartbeats ---------------------------------------------------------- */

/* fakegate:attempts:<hex of the secret key, or "-">: into b (n bytes, at least 2 * key + 24). */
static void tenant_prefix(const char *tenant_key, char *b, size_t n)
{
    size_t k = (size_t)snprintf(b, n, PREFIX "attempts:");
    if (!tenant_key)
        b[k++] = '-';
    for (const char *p = tenant_key; p && *p && k + 3 < n; p++)
        k += (size_t)snprintf(b + k, n - k, "%02x", (unsigned char)*p);
    b[k] = '\0';
}

int cluster_attempts_next(struct cluster *c, const char *tenant_key, int route,
                          const char *identity, uint32_t *attempt)
{
    char pre[600];
    tenant_prefix(tenant_key, pre, sizeof pre);
    size_t il = strlen(identity), pl = strlen(pre);
    char *key = malloc(pl + il + 16);
    if (!key)
        return -1;
    int kl = snprintf(key, pl + il + 16, "%s:%d:%s", pre, route, identity);
    char ttl[24];
    snprintf(ttl, sizeof ttl, "%lld", (long long)c->idem_ttl_ms);
    int rc = -1;
    for (int tries = 0; tries < 2 && rc != 0; tries++) {
        struct conn *k = conn_get(c);
        if (!k)
            break;
        const char *a1[] = {"INCR", key};
        size_t l1[] = {4, (size_t)kl};
        const char *a2[] = {"PEXPIRE", key, ttl};
        size_t l2[] = {7, (size_t)kl, strlen(ttl)};
        redisAppendCommandArgv(k->ctx, 2, a1, l1);
        redisAppendCommandArgv(k->ctx, 3, a2, l2);
        redisReply *r1 = NULL, *r2 = NULL;
        if (redisGetReply(k->ctx, (void **)&r1) == REDIS_OK &&
            redisGetReply(k->ctx, (void **)&r2) == REDIS_OK) {
            atomic_store(&c->up, true);
            if (r1->type == REDIS_REPLY_INTEGER && r1->integer >= 1) {
                *attempt = r1->integer > UINT32_MAX ? UINT32_MAX : (uint32_t)r1->integer;
                rc = 0;
            } else {
                set_error(c, "unreachable: INCR: %s", r1->type == REDIS_REPLY_ERROR ? r1->str : "unexpected reply");
            }
            freeReplyObject(r1);
            freeReplyObject(r2);
            break;
        }
        /* As run(): a connection closed while idle fails at once with EOF; once more. */
        bool stale = k->ctx->err == REDIS_ERR_EOF && tries == 0;
        if (!stale)
            set_error(c, "unreachable: %s", k->ctx->errstr);
        conn_close(k);
        k->next_try_ns = 0;
        freeReplyObject(r1);
        freeReplyObject(r2);
        if (!stale)
            break;
    }
    free(key);
    return rc;
}

int cluster_attempts_reset(struct cluster *c, const char *tenant_key, bool all)
{
    char pattern[600];
    if (all)
        snprintf(pattern, sizeof pattern, PREFIX "attempts:*");
    else {
        tenant_prefix(tenant_key, pattern, sizeof pattern - 3);
        strcat(pattern, ":*");
    }
    char cursor[32] = "0";
    do {
        const char *argv[] = {"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"};
        redisReply *rep = run_strs(c, 6, argv);
        if (!rep)
            return -1;
        bool ok = rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 &&
                  rep->element[0]->type == REDIS_REPLY_STRING &&
                  rep->element[1]->type == REDIS_REPLY_ARRAY;
        if (!ok) {
            set_error(c, "unreachable: SCAN: unexpected reply");
            freeReplyObject(rep);
            return -1;
        }
        snprintf(cursor, sizeof cursor, "%s", rep->element[0]->str);
        const redisReply *keys = rep->element[1];
        if (keys->elements > 0) {
            const char **argv2 = calloc(keys->elements + 1, sizeof *argv2);
            size_t *lens = calloc(keys->elements + 1, sizeof *lens);
            redisReply *del = NULL;
            if (argv2 && lens) {
                argv2[0] = "UNLINK";
                lens[0] = 6;
                for (size_t i = 0; i < keys->elements; i++) {
                    argv2[i + 1] = keys->element[i]->str;
                    lens[i + 1] = keys->element[i]->len;
                }
                del = run(c, (int)keys->elements + 1, argv2, lens);
            }
            free(argv2);
            free(lens);
            bool deleted = del != NULL;
            freeReplyObject(del);
            if (!deleted) {
                freeReplyObject(rep);
                return -1;
            }
        }
        freeReplyObject(rep);
    } while (strcmp(cursor, "0") != 0);
    return 0;
}

void cluster_heartbeat(struct cluster *c)
{
    char key[64], ms[16];
    snprintf(key, sizeof key, PREFIX "instance:%016llx", (unsigned long long)c->instance_id);
    snprintf(ms, sizeof ms, "%d", CLUSTER_HEARTBEAT_MS);
    const char *argv[] = {"SET", key, "1", "PX", ms};
    freeReplyObject(run_strs(c, 5, argv));
}

int cluster_instance_gone(struct cluster *c, uint64_t id)
{
    char key[64];
    snprintf(key, sizeof key, PREFIX "instance:%016llx", (unsigned long long)id);
    const char *argv[] = {"EXISTS", key};
    redisReply *rep = run_strs(c, 2, argv);
    int alive = rep && rep->type == REDIS_REPLY_INTEGER ? rep->integer > 0 : -1;
    freeReplyObject(rep);
    if (alive < 0)
        return -1;
    int64_t now = now_mono_ns();
    int gone = 0;
    pthread_mutex_lock(&c->missing_lock);
    size_t i = 0;
    while (i < c->n_missing && c->missing[i].id != id)
        i++;
    if (alive) {
        if (i < c->n_missing) /* back: forget it */
            c->missing[i] = c->missing[--c->n_missing];
    } else if (i < c->n_missing) {
        gone = now - c->missing[i].since_ns >= CLUSTER_HEARTBEAT_MS * NS_PER_MS;
    } else if (c->n_missing < CLUSTER_MISSING_MAX) {
        c->missing[c->n_missing].id = id;
        c->missing[c->n_missing++].since_ns = now;
    }
    pthread_mutex_unlock(&c->missing_lock);
    return gone;
}

/* --- commands for other modules ------------------------------------------------------------- */

struct redisReply *cluster_run(struct cluster *c, int argc, const char **argv,
                               const size_t *lens)
{
    return run(c, argc, argv, lens);
}

/* The SHA1s of cluster_script_run's scripts: any thread may find one missing (NOSCRIPT, a
 * Redis that restarted) and load it again. */
static pthread_mutex_t scripts_lock = PTHREAD_MUTEX_INITIALIZER;

struct redisReply *cluster_script_run(struct cluster *c, struct cluster_script *s, int argc,
                                      const char **argv, size_t *lens)
{
    char sha[41];
    pthread_mutex_lock(&scripts_lock);
    memcpy(sha, s->sha, sizeof sha);
    pthread_mutex_unlock(&scripts_lock);
    redisReply *rep = eval(c, sha, s->src, argc, argv, lens);
    pthread_mutex_lock(&scripts_lock);
    memcpy(s->sha, sha, sizeof sha); /* loaded again, or as it was */
    pthread_mutex_unlock(&scripts_lock);
    return rep;
}

void cluster_fail(struct cluster *c, const char *why)
{
    set_error(c, "unreachable: %s", why);
}
