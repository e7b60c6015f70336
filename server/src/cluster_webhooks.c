/* cluster_webhooks.c -- webhook receivers and deliveries in the shared Redis (see
 * cluster_webhooks.h; docs/cluster.md §11.7). Keys, all under "fakegate:wh:": `d:<id>` (a hash:
 * one delivery's record, its rendered attempts and, while claimed, its lease token), `ids` (the
 * journal: every delivery kept, by id), `pending` (those pending, by id: the oldest is evicted),
 * `real` (first attempts due, by wall-clock µs), `biz` (retries due, by gateway-clock µs), `rs`
 * (resends asked for), `lease` (claimed ones, by the lease's wall-clock expiry), `next` (the
 * last id), `evicted` (a counter), `rx` (receiver lists: "server", "t:<tenant>") and `rxv` (their
 * version). Invariants: a delivery is in `pending` exactly while its status is pending; it is in
 * at most one of `real`, `biz` and `lease`; only the script that claimed it (the token in
 * `tok`) records its attempt, and every change of a record is one script, so dispatchers on
 * different instances never both send one attempt. */
#define _GNU_SOURCE
#include "cluster_webhooks.h"

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"

/* As cluster.c's: a round trip slower than this is the store down. */
#define CWH_TIMEOUT_MS 500
#define CWH_RECONNECT_MS 50
/* Receiver lists held in the dispatcher's copy: the server's and tenants' own. */
#define CWH_LISTS_MAX 256

static const char *const STATUS[] = {"pending", "delivered", "failed", "dropped"};

/* file: ARGV tid url s2xx type tenant pk oid meta body status dup due_real max_pending
 * evict_note journal_max -> the new id. */
static const char FILE_LUA[] =
    "local P = 'fakegate:wh:'\n"
    "local id = redis.call('INCR', P..'next')\n"
    "local k = P..'d:'..id\n"
    "redis.call('HSET', k, 'tid', ARGV[1], 'url', ARGV[2], 's2xx', ARGV[3], 'type', ARGV[4],\n"
    "  'tenant', ARGV[5], 'pk', ARGV[6], 'oid', ARGV[7], 'meta', ARGV[8], 'body', ARGV[9],\n"
    "  'status', ARGV[10], 'dup', ARGV[11], 'n_att', 0, 'n_sched', 0, 'base', 0,\n"
    "  'resends', 0, 'att', '')\n"
    "redis.call('ZADD', P..'ids', id, id)\n"
    "if ARGV[10] == 'pending' then\n"
    "  if redis.call('ZCARD', P..'pending') >= tonumber(ARGV[13]) then\n"
    "    local old = redis.call('ZRANGE', P..'pending', 0, 0)[1]\n"
    "    local ok = P..'d:'..old\n"
    "    redis.call('HSET', ok, 'status', 'failed', 'note', ARGV[14], 'evicted', '1')\n"
    "    redis.call('HDEL', ok, 'due_real', 'due_biz')\n"
    "    for _, z in ipairs({'pending', 'real', 'biz'}) do redis.call('ZREM', P..z, old) end\n"
    "    redis.call('INCR', P..'evicted')\n"
    "  end\n"
    "  redis.call('HSET', k, 'due_real', ARGV[12])\n"
    "  redis.call('ZADD', P..'pending', id, id)\n"
    "  redis.call('ZADD', P..'real', ARGV[12], id)\n"
    "end\n"
    "local J = tonumber(ARGV[15])\n"
    "local n = redis.call('ZCARD', P..'ids')\n"
    "if n > J + math.floor(J / 8) then\n"
    "  local excess = n - J\n"
    "  for _, x in ipairs(redis.call('ZRANGE', P..'ids', 0, -1)) do\n"
    "    if excess <= 0 then break end\n"
    "    if not redis.call('ZSCORE', P..'pending', x) and not redis.call('ZSCORE', P..'lease', x) then\n"
    "      redis.call('DEL', P..'d:'..x)\n"
    "      redis.call('ZREM', P..'ids', x)\n"
    "      redis.call('ZREM', P..'rs', x)\n"
    "      excess = excess - 1\n"
    "    end\n"
    "  end\n"
    "end\n"
    "return id\n";

/* claim: ARGV now_unix_us now_biz_us lease_expiry_unix_us token max -> {{id, kind, before,
 * url, s2xx, tid, type, body, n_att, n_sched, base}, ...}. Expired leases are handed back
 * first: a scheduled attempt is due again at once, a resend is wanted again. */
static const char CLAIM_LUA[] =
    "local P = 'fakegate:wh:'\n"
    "local now_w, now_b, max = ARGV[1], ARGV[2], tonumber(ARGV[5])\n"
    "for _, id in ipairs(redis.call('ZRANGEBYSCORE', P..'lease', '-inf', now_w)) do\n"
    "  redis.call('ZREM', P..'lease', id)\n"
    "  local k = P..'d:'..id\n"
    "  if redis.call('EXISTS', k) == 1 then\n"
    "    local f = redis.call('HMGET', k, 'kind', 'before', 'status')\n"
    "    redis.call('HDEL', k, 'tok', 'cur', 'kind')\n"
    "    if f[1] == 'resend' then\n"
    "      redis.call('HINCRBY', k, 'resends', 1)\n"
    "      redis.call('ZADD', P..'rs', 0, id)\n"
    "      if f[2] and f[2] ~= 'pending' and f[3] == 'pending' then\n"
    "        redis.call('HSET', k, 'status', f[2])\n"
    "        redis.call('ZREM', P..'pending', id)\n"
    "      end\n"
    "    elseif f[3] == 'pending' then\n"
    "      redis.call('HSET', k, 'due_real', now_w)\n"
    "      redis.call('ZADD', P..'real', now_w, id)\n"
    "    end\n"
    "  end\n"
    "end\n"
    "local out = {}\n"
    "local function take(id, kind)\n"
    "  local k = P..'d:'..id\n"
    "  local f = redis.call('HMGET', k, 'status', 'tok', 'url', 's2xx', 'tid', 'type', 'body',\n"
    "                       'n_att', 'n_sched', 'base')\n"
    "  if not f[1] then return 'gone' end\n"
    "  if f[2] then return 'busy' end\n"
    "  local before = f[1]\n"
    "  if kind == 'resend' then\n"
    "    if redis.call('HINCRBY', k, 'resends', -1) <= 0 then redis.call('ZREM', P..'rs', id) end\n"
    "    if before ~= 'pending' then\n"
    "      redis.call('HSET', k, 'status', 'pending')\n"
    "      redis.call('ZADD', P..'pending', id, id)\n"
    "    end\n"
    "    redis.call('HSET', k, 'before', before)\n"
    "  elseif before ~= 'pending' then\n"
    "    return 'gone'\n"
    "  end\n"
    "  redis.call('HDEL', k, 'evicted')\n"
    "  redis.call('HSET', k, 'tok', ARGV[4], 'kind', kind, 'cur', now_b)\n"
    "  redis.call('ZADD', P..'lease', ARGV[3], id)\n"
    "  out[#out + 1] = {id, kind, before, f[3], f[4], f[5], f[6], f[7], f[8], f[9], f[10]}\n"
    "  return 'taken'\n"
    "end\n"
    "for _, id in ipairs(redis.call('ZRANGE', P..'rs', 0, -1)) do\n"
    "  if #out >= max then return out end\n"
    "  if take(id, 'resend') == 'gone' then redis.call('ZREM', P..'rs', id) end\n"
    "end\n"
    "for _, z in ipairs({{'real', now_w, 'due_real'}, {'biz', now_b, 'due_biz'}}) do\n"
    "  for _, id in ipairs(redis.call('ZRANGEBYSCORE', P..z[1], '-inf', z[2], 'LIMIT', 0, max)) do\n"
    "    if #out >= max then return out end\n"
    "    if take(id, 'sched') ~= 'busy' then\n"
    "      redis.call('ZREM', P..z[1], id)\n"
    "      redis.call('HDEL', P..'d:'..id, z[3])\n"
    "    end\n"
    "  end\n"
    "end\n"
    "return out\n";

/* complete: ARGV id token attempt status n_sched base due_biz ('' unchanged) -> 1, or 0: the
 * lease is not ours (any more). */
static const char COMPLETE_LUA[] =
    "local P = 'fakegate:wh:'\n"
    "local id = ARGV[1]\n"
    "local k = P..'d:'..id\n"
    "if redis.call('HGET', k, 'tok') ~= ARGV[2] then return 0 end\n"
    "redis.call('ZREM', P..'lease', id)\n"
    "local f = redis.call('HMGET', k, 'att', 'evicted')\n"
    "redis.call('HDEL', k, 'tok', 'cur', 'kind')\n"
    "redis.call('HSET', k, 'att', (f[1] and f[1] ~= '') and (f[1]..','..ARGV[3]) or ARGV[3])\n"
    "redis.call('HINCRBY', k, 'n_att', 1)\n"
    "if f[2] then return 1 end\n"
    "redis.call('HSET', k, 'status', ARGV[4], 'n_sched', ARGV[5], 'base', ARGV[6])\n"
    "if ARGV[4] == 'pending' then\n"
    "  if ARGV[7] ~= '' then\n"
    "    redis.call('HSET', k, 'due_biz', ARGV[7])\n"
    "    redis.call('ZADD', P..'biz', ARGV[7], id)\n"
    "  end\n"
    "else\n"
    "  redis.call('HDEL', k, 'due_real', 'due_biz')\n"
    "  for _, z in ipairs({'pending', 'real', 'biz'}) do redis.call('ZREM', P..z, id) end\n"
    "end\n"
    "return 1\n";

/* resend: ARGV id -> 1, or 0: no such delivery. */
static const char RESEND_LUA[] =
    "local k = 'fakegate:wh:d:'..ARGV[1]\n"
    "if redis.call('EXISTS', k) == 0 then return 0 end\n"
    "redis.call('HINCRBY', k, 'resends', 1)\n"
    "redis.call('ZADD', 'fakegate:wh:rs', 0, ARGV[1])\n"
    "return 1\n";

/* reset: ARGV all ('1'/'0') tenant -> deliveries dropped. */
static const char RESET_LUA[] =
    "local P = 'fakegate:wh:'\n"
    "local zs = {'ids', 'pending', 'real', 'biz', 'rs', 'lease'}\n"
    "local n = 0\n"
    "for _, id in ipairs(redis.call('ZRANGE', P..'ids', 0, -1)) do\n"
    "  local k = P..'d:'..id\n"
    "  if ARGV[1] == '1' or redis.call('HGET', k, 'tenant') == ARGV[2] then\n"
    "    redis.call('DEL', k)\n"
    "    if ARGV[1] ~= '1' then for _, z in ipairs(zs) do redis.call('ZREM', P..z, id) end end\n"
    "    n = n + 1\n"
    "  end\n"
    "end\n"
    "if ARGV[1] == '1' then\n"
    "  for _, z in ipairs(zs) do redis.call('DEL', P..z) end\n"
    "  redis.call('DEL', P..'evicted')\n"
    "end\n"
    "return n\n";

/* set receivers: ARGV field value [nx] -> 1 when set. */
static const char RX_SET_LUA[] =
    "local set\n"
    "if ARGV[3] == 'nx' then set = redis.call('HSETNX', 'fakegate:wh:rx', ARGV[1], ARGV[2])\n"
    "else redis.call('HSET', 'fakegate:wh:rx', ARGV[1], ARGV[2]); set = 1 end\n"
    "if set == 1 then redis.call('INCR', 'fakegate:wh:rxv') end\n"
    "return set\n";

struct wconn {
    redisContext *ctx;
    int64_t next_try_ns;
};

struct rx_list {
    char field[600];              /* "server" or "t:<tenant>" */
    struct cwh_receivers rx;
};

struct cwh {
    struct cluster_url url;
    char token[24];
    struct wconn disp;            /* the dispatcher's */
    pthread_mutex_t adm_lock;     /* adm */
    struct wconn adm;
    pthread_mutex_t err_lock;
    char error[256];
    char rx_version[32];          /* the dispatcher's copy: of this version ("" none yet) */
    struct rx_list *lists;
    size_t n_lists;
};

/* ---- connections ------------------------------------------------------------------------------ */

static void set_error(struct cwh *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_error(struct cwh *h, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&h->err_lock);
    vsnprintf(h->error, sizeof h->error, fmt, ap);
    pthread_mutex_unlock(&h->err_lock);
    va_end(ap);
}

static void wconn_close(struct wconn *k)
{
    if (k->ctx)
        redisFree(k->ctx);
    k->ctx = NULL;
}

/* k connected, or false with the error set. */
static bool wconn_ready(struct cwh *h, struct wconn *k)
{
    if (k->ctx)
        return true;
    int64_t now = now_mono_ns();
    if (now < k->next_try_ns)
        return false;
    k->next_try_ns = now + CWH_RECONNECT_MS * NS_PER_MS;
    char why[256];
    if (!(k->ctx = cluster_connect(&h->url, CWH_TIMEOUT_MS, why, sizeof why))) {
        set_error(h, "unreachable: %s", why);
        return false;
    }
    return true;
}

/* argv on k: the reply (caller frees), or NULL with the error set; an error reply is NULL too.
 * A connection Redis closed while idle is tried once more on a new one. */
static redisReply *run(struct cwh *h, struct wconn *k, int argc, const char **argv,
                       const size_t *lens)
{
    for (int tries = 0; tries < 2; tries++) {
        if (!wconn_ready(h, k))
            return NULL;
        redisReply *rep = redisCommandArgv(k->ctx, argc, argv, lens);
        if (rep && rep->type == REDIS_REPLY_ERROR) {
            set_error(h, "unreachable: %s", rep->str);
            freeReplyObject(rep);
            return NULL;
        }
        if (rep)
            return rep;
        bool stale = k->ctx->err == REDIS_ERR_EOF && tries == 0;
        set_error(h, "unreachable: %s", k->ctx->errstr[0] ? k->ctx->errstr : "no reply");
        wconn_close(k);
        k->next_try_ns = 0;
        if (!stale)
            return NULL;
    }
    return NULL;
}

/* EVAL src 0 args... (n strings, lens[i] or strlen when lens is NULL). */
static redisReply *eval(struct cwh *h, struct wconn *k, const char *src, int n,
                        const char **args, const size_t *lens)
{
    const char *argv[24];
    size_t l[24];
    argv[0] = "EVAL";
    l[0] = 4;
    argv[1] = src;
    l[1] = strlen(src);
    argv[2] = "0";
    l[2] = 1;
    for (int i = 0; i < n && i < 21; i++) {
        argv[3 + i] = args[i];
        l[3 + i] = lens ? lens[i] : strlen(args[i]);
    }
    return run(h, k, 3 + n, argv, l);
}

/* The admin connection's command, under its lock. */
static redisReply *adm_eval(struct cwh *h, const char *src, int n, const char **args,
                            const size_t *lens)
{
    pthread_mutex_lock(&h->adm_lock);
    redisReply *rep = eval(h, &h->adm, src, n, args, lens);
    pthread_mutex_unlock(&h->adm_lock);
    return rep;
}

static redisReply *adm_run(struct cwh *h, int argc, const char **argv)
{
    size_t l[8];
    for (int i = 0; i < argc && i < 8; i++)
        l[i] = strlen(argv[i]);
    pthread_mutex_lock(&h->adm_lock);
    redisReply *rep = run(h, &h->adm, argc, argv, l);
    pthread_mutex_unlock(&h->adm_lock);
    return rep;
}

struct cwh *cwh_new(const struct cluster_url *u, uint64_t instance_id, char err[ERR_LEN])
{
    struct cwh *h = calloc(1, sizeof *h);
    if (!h) {
        snprintf(err, ERR_LEN, "out of memory");
        return NULL;
    }
    h->url = *u;
    snprintf(h->token, sizeof h->token, "%016llx", (unsigned long long)instance_id);
    pthread_mutex_init(&h->adm_lock, NULL);
    pthread_mutex_init(&h->err_lock, NULL);
    snprintf(h->error, sizeof h->error, "not connected yet");
    return h;
}

void cwh_receivers_clear(struct cwh_receivers *rx)
{
    for (size_t i = 0; i < rx->n; i++)
        free(rx->urls[i]);
    rx->n = 0;
}

static void lists_clear(struct cwh *h)
{
    for (size_t i = 0; i < h->n_lists; i++)
        cwh_receivers_clear(&h->lists[i].rx);
    free(h->lists);
    h->lists = NULL;
    h->n_lists = 0;
}

void cwh_free(struct cwh *h)
{
    if (!h)
        return;
    wconn_close(&h->disp);
    wconn_close(&h->adm);
    lists_clear(h);
    pthread_mutex_destroy(&h->adm_lock);
    pthread_mutex_destroy(&h->err_lock);
    free(h);
}

void cwh_message(struct cwh *h, char *out, size_t n)
{
    pthread_mutex_lock(&h->err_lock);
    snprintf(out, n, "fakegate store %s %s", h->url.text, h->error);
    pthread_mutex_unlock(&h->err_lock);
}

/* ---- receivers -------------------------------------------------------------------------------- */

/* A tenant as stored: the hex of its secret key, "-" for the keyless one. */
static void tenant_hex(const char *key, char *out, size_t n)
{
    size_t k = 0;
    if (!key)
        out[k++] = '-';
    for (const char *p = key; p && *p && k + 3 < n; p++)
        k += (size_t)snprintf(out + k, n - k, "%02x", (unsigned char)*p);
    out[k] = '\0';
}

static void list_field(bool server, const char *tenant_key, char *out, size_t n)
{
    if (server) {
        snprintf(out, n, "server");
        return;
    }
    char hex[560];
    tenant_hex(tenant_key, hex, sizeof hex);
    snprintf(out, n, "t:%s", hex);
}

/* "200\nURL\nURL..." or "2xx\n..." into a malloc'd string, or NULL. */
static char *encode_list(const char *const *urls, size_t n, bool success_2xx)
{
    struct buf b;
    buf_init(&b);
    buf_adds(&b, success_2xx ? "2xx" : "200");
    for (size_t i = 0; i < n && i < CWH_MAX_RECEIVERS; i++) {
        buf_addc(&b, '\n');
        buf_adds(&b, urls[i]);
    }
    buf_addc(&b, '\0');
    if (b.oom) {
        buf_fini(&b);
        return NULL;
    }
    size_t len;
    return buf_steal(&b, &len);
}

static void decode_list(const char *s, size_t len, struct cwh_receivers *rx)
{
    rx->n = 0;
    rx->success_2xx = len >= 3 && strncmp(s, "2xx", 3) == 0;
    const char *p = memchr(s, '\n', len), *end = s + len;
    while (p && p < end && rx->n < CWH_MAX_RECEIVERS) {
        const char *u = p + 1;
        const char *nl = memchr(u, '\n', (size_t)(end - u));
        size_t ul = (size_t)((nl ? nl : end) - u);
        if (ul > 0 && (rx->urls[rx->n] = strndup(u, ul)))
            rx->n++;
        p = nl;
    }
}

static int set_list(struct cwh *h, const char *field, const char *const *urls, size_t n,
                    bool success_2xx, bool nx)
{
    char *v = encode_list(urls, n, success_2xx);
    if (!v) {
        set_error(h, "unreachable: out of memory");
        return -1;
    }
    const char *args[] = {field, v, nx ? "nx" : ""};
    redisReply *rep = adm_eval(h, RX_SET_LUA, 3, args, NULL);
    free(v);
    int rc = rep ? 0 : -1;
    freeReplyObject(rep);
    return rc;
}

int cwh_seed_receivers(struct cwh *h, const char *const *urls, size_t n)
{
    if (n == 0)
        return 0;
    return set_list(h, "server", urls, n, false, true);
}

int cwh_set_receivers(struct cwh *h, bool server, const char *tenant_key,
                      const char *const *urls, size_t n, bool success_2xx)
{
    char field[600];
    list_field(server, tenant_key, field, sizeof field);
    return set_list(h, field, urls, n, success_2xx, false);
}

int cwh_get_receivers(struct cwh *h, bool server, const char *tenant_key,
                      struct cwh_receivers *out, bool *own)
{
    char field[600];
    list_field(server, tenant_key, field, sizeof field);
    const char *argv[] = {"HMGET", "fakegate:wh:rx", field, "server"};
    redisReply *rep = adm_run(h, 4, argv);
    if (!rep)
        return -1;
    out->n = 0;
    out->success_2xx = false;
    bool ok = rep->type == REDIS_REPLY_ARRAY && rep->elements == 2;
    const redisReply *mine = ok ? rep->element[0] : NULL, *srv = ok ? rep->element[1] : NULL;
    if (own)
        *own = mine && mine->type == REDIS_REPLY_STRING && !server;
    const redisReply *use = mine && mine->type == REDIS_REPLY_STRING ? mine : srv;
    if (use && use->type == REDIS_REPLY_STRING)
        decode_list(use->str, use->len, out);
    freeReplyObject(rep);
    if (!ok)
        set_error(h, "unreachable: HMGET: unexpected reply");
    return ok ? 0 : -1;
}

int cwh_refresh_receivers(struct cwh *h)
{
    size_t l[2] = {3, 16};
    const char *argv[] = {"GET", "fakegate:wh:rxv"};
    redisReply *rep = run(h, &h->disp, 2, argv, l);
    if (!rep)
        return -1;
    char v[32];
    snprintf(v, sizeof v, "%s", rep->type == REDIS_REPLY_STRING ? rep->str : "0");
    freeReplyObject(rep);
    if (strcmp(v, h->rx_version) == 0)
        return 0;
    const char *argv2[] = {"HGETALL", "fakegate:wh:rx"};
    size_t l2[2] = {7, 14};
    if (!(rep = run(h, &h->disp, 2, argv2, l2)))
        return -1;
    if (rep->type != REDIS_REPLY_ARRAY) {
        freeReplyObject(rep);
        set_error(h, "unreachable: HGETALL: unexpected reply");
        return -1;
    }
    lists_clear(h);
    size_t n = rep->elements / 2;
    if (n > CWH_LISTS_MAX)
        n = CWH_LISTS_MAX;
    h->lists = calloc(n ? n : 1, sizeof *h->lists);
    for (size_t i = 0; h->lists && i < n; i++) {
        const redisReply *f = rep->element[2 * i], *val = rep->element[2 * i + 1];
        if (f->type != REDIS_REPLY_STRING || val->type != REDIS_REPLY_STRING)
            continue;
        struct rx_list *x = &h->lists[h->n_lists++];
        snprintf(x->field, sizeof x->field, "%s", f->str);
        decode_list(val->str, val->len, &x->rx);
    }
    freeReplyObject(rep);
    snprintf(h->rx_version, sizeof h->rx_version, "%s", v);
    return 0;
}

const struct cwh_receivers *cwh_receivers_of(struct cwh *h, const char *tenant_key)
{
    static const struct cwh_receivers none = {.n = 0};
    char field[600];
    list_field(false, tenant_key, field, sizeof field);
    const struct cwh_receivers *server = &none;
    for (size_t i = 0; i < h->n_lists; i++) {
        if (strcmp(h->lists[i].field, field) == 0)
            return &h->lists[i].rx;
        if (strcmp(h->lists[i].field, "server") == 0)
            server = &h->lists[i].rx;
    }
    return server;
}

/* ---- deliveries ------------------------------------------------------------------------------- */

uint64_t cwh_file(struct cwh *h, const struct cwh_filing *d, size_t max_pending,
                  size_t journal_max)
{
    char type[8], dup[24], due[24], maxp[24], jmax[24], note[160], hex[560];
    snprintf(type, sizeof type, "%d", d->event_type);
    snprintf(dup, sizeof dup, "%llu", (unsigned long long)d->duplicate_of);
    snprintf(due, sizeof due, "%lld", (long long)d->due_unix_us);
    snprintf(maxp, sizeof maxp, "%zu", max_pending);
    snprintf(jmax, sizeof jmax, "%zu", journal_max);
    snprintf(note, sizeof note,
             "evicted: more than %zu deliveries pending (--webhook-max-pending)", max_pending);
    tenant_hex(d->tenant_key, hex, sizeof hex);
    const char *args[] = {d->transmission_id, d->url, d->success_2xx ? "1" : "0", type, hex,
                          d->payment_key, d->order_id, d->meta, d->body,
                          d->dropped ? "dropped" : "pending", dup, due, maxp, note, jmax};
    size_t lens[15];
    for (int i = 0; i < 15; i++)
        lens[i] = i == 8 ? d->body_len : strlen(args[i]);
    redisReply *rep = eval(h, &h->disp, FILE_LUA, 15, args, lens);
    uint64_t id = rep && rep->type == REDIS_REPLY_INTEGER && rep->integer > 0
                      ? (uint64_t)rep->integer : 0;
    if (rep && !id)
        set_error(h, "unreachable: the filing script's reply is malformed");
    freeReplyObject(rep);
    return id;
}

static int status_of(const redisReply *r)
{
    if (!r || r->type != REDIS_REPLY_STRING)
        return -1;
    for (int i = 0; i < 4; i++)
        if (strcmp(r->str, STATUS[i]) == 0)
            return i;
    return -1;
}

static long long int_of(const redisReply *r)
{
    if (r && r->type == REDIS_REPLY_STRING)
        return strtoll(r->str, NULL, 10);
    if (r && r->type == REDIS_REPLY_INTEGER)
        return r->integer;
    return 0;
}

void cwh_claims_free(struct cwh_claim *c, size_t n)
{
    for (size_t i = 0; c && i < n; i++) {
        free(c[i].url);
        free(c[i].body);
    }
    free(c);
}

int cwh_claim(struct cwh *h, int64_t now_unix_us, int64_t now_biz_us, size_t max,
              struct cwh_claim **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (max == 0)
        return 0;
    char now_w[24], now_b[24], exp[24], m[24];
    snprintf(now_w, sizeof now_w, "%lld", (long long)now_unix_us);
    snprintf(now_b, sizeof now_b, "%lld", (long long)now_biz_us);
    snprintf(exp, sizeof exp, "%lld", (long long)(now_unix_us + CWH_LEASE_MS * 1000LL));
    snprintf(m, sizeof m, "%zu", max);
    const char *args[] = {now_w, now_b, exp, h->token, m};
    redisReply *rep = eval(h, &h->disp, CLAIM_LUA, 5, args, NULL);
    if (!rep)
        return -1;
    if (rep->type != REDIS_REPLY_ARRAY) {
        freeReplyObject(rep);
        set_error(h, "unreachable: the claim script's reply is malformed");
        return -1;
    }
    struct cwh_claim *c = rep->elements ? calloc(rep->elements, sizeof *c) : NULL;
    size_t k = 0;
    for (size_t i = 0; c && i < rep->elements; i++) {
        const redisReply *e = rep->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 8)
            continue;
        struct cwh_claim *x = &c[k];
        x->id = (uint64_t)int_of(e->element[0]);
        x->resend = e->element[1]->type == REDIS_REPLY_STRING &&
                    strcmp(e->element[1]->str, "resend") == 0;
        x->before = status_of(e->element[2]);
        const redisReply *url = e->element[3], *body = e->element[7];
        if (url->type != REDIS_REPLY_STRING || body->type != REDIS_REPLY_STRING)
            continue;
        x->url = strndup(url->str, url->len);
        x->body = malloc(body->len + 1);
        if (!x->url || !x->body) {
            free(x->url);
            free(x->body);
            x->url = x->body = NULL;
            continue; /* out of memory: its lease runs out and it comes back */
        }
        memcpy(x->body, body->str, body->len);
        x->body[body->len] = '\0';
        x->body_len = body->len;
        x->success_2xx = int_of(e->element[4]) == 1;
        if (e->element[5]->type == REDIS_REPLY_STRING)
            snprintf(x->transmission_id, sizeof x->transmission_id, "%s", e->element[5]->str);
        x->event_type = (int)int_of(e->element[6]);
        x->n_attempts = e->elements > 8 ? (uint32_t)int_of(e->element[8]) : 0;
        x->n_sched = e->elements > 9 ? (uint32_t)int_of(e->element[9]) : 0;
        x->sched_base_us = e->elements > 10 ? int_of(e->element[10]) : 0;
        if (x->before < 0)
            x->before = 0;
        k++;
    }
    freeReplyObject(rep);
    *out = c;
    *n = k;
    return 0;
}

int cwh_complete(struct cwh *h, uint64_t id, const char *attempt, size_t attempt_len,
                 int status, uint32_t n_sched, int64_t sched_base_us, int64_t due_biz_us)
{
    char ids[24], ns[16], base[24], due[24];
    snprintf(ids, sizeof ids, "%llu", (unsigned long long)id);
    snprintf(ns, sizeof ns, "%u", n_sched);
    snprintf(base, sizeof base, "%lld", (long long)sched_base_us);
    if (due_biz_us >= 0)
        snprintf(due, sizeof due, "%lld", (long long)due_biz_us);
    else
        due[0] = '\0';
    const char *args[] = {ids, h->token, attempt, STATUS[status & 3], ns, base, due};
    size_t lens[7];
    for (int i = 0; i < 7; i++)
        lens[i] = i == 2 ? attempt_len : strlen(args[i]);
    redisReply *rep = eval(h, &h->disp, COMPLETE_LUA, 7, args, lens);
    if (!rep)
        return -1;
    int rc = rep->type == REDIS_REPLY_INTEGER ? (int)rep->integer : -1;
    freeReplyObject(rep);
    return rc;
}

/* ---- the journal's views ---------------------------------------------------------------------- */

/* HMGET fields of a delivery, in this order. */
enum { F_META, F_STATUS, F_DUP, F_DUE_REAL, F_DUE_BIZ, F_TOK, F_NOTE, F_BODY, F_ATT, F_CUR,
       F_N_ATT, F_TENANT, F_PK, F_OID, F_N };
static const char *const FIELDS[F_N] = {"meta", "status", "dup", "due_real", "due_biz", "tok",
                                        "note", "body", "att", "cur", "n_att", "tenant", "pk",
                                        "oid"};

static bool is_str(const redisReply *r)
{
    return r && r->type == REDIS_REPLY_STRING;
}

static void add_kst(struct buf *b, int64_t us)
{
    char t[32];
    fmt_kst(us, t);
    buf_add_json_strz(b, t);
}

/* One delivery's HMGET reply `f` as the listing's object. */
static void render_one(struct buf *b, uint64_t id, const redisReply *f, int64_t now_biz_us)
{
    redisReply *const *e = f->element;
    int st = status_of(e[F_STATUS]);
    buf_addf(b, "{\"id\":%llu,", (unsigned long long)id);
    if (is_str(e[F_META]))
        buf_add(b, e[F_META]->str, e[F_META]->len);
    buf_adds(b, ",\"status\":\"");
    buf_adds(b, STATUS[st < 0 ? 0 : st]);
    buf_adds(b, "\",\"duplicate_of\":");
    long long dup = int_of(e[F_DUP]);
    if (dup > 0)
        buf_addf(b, "%lld", dup);
    else
        buf_adds(b, "null");
    buf_adds(b, ",\"next_attempt_at\":");
    bool claimed = is_str(e[F_TOK]);
    if (st == 0 && !claimed && is_str(e[F_DUE_BIZ]))
        add_kst(b, int_of(e[F_DUE_BIZ]));
    else if (st == 0 && !claimed && is_str(e[F_DUE_REAL]))
        add_kst(b, now_biz_us + (int_of(e[F_DUE_REAL]) - now_unix_us()));
    else
        buf_adds(b, "null");
    buf_adds(b, ",\"note\":");
    if (is_str(e[F_NOTE]))
        buf_add_json_str(b, e[F_NOTE]->str, e[F_NOTE]->len);
    else
        buf_adds(b, "null");
    buf_adds(b, ",\"body\":");
    if (is_str(e[F_BODY]) && e[F_BODY]->len > 0)
        buf_add(b, e[F_BODY]->str, e[F_BODY]->len);
    else
        buf_adds(b, "null");
    buf_adds(b, ",\"attempts\":[");
    bool any = is_str(e[F_ATT]) && e[F_ATT]->len > 0;
    if (any)
        buf_add(b, e[F_ATT]->str, e[F_ATT]->len);
    if (is_str(e[F_CUR])) { /* the attempt in flight */
        if (any)
            buf_addc(b, ',');
        buf_adds(b, "{\"at\":");
        add_kst(b, int_of(e[F_CUR]));
        buf_addf(b, ",\"retried_count\":%lld,\"http_status\":null,\"error\":null,"
                    "\"duration_ms\":null}", int_of(e[F_N_ATT]));
    }
    buf_adds(b, "]}");
}

struct view_filter {
    bool by_tenant;
    const char *tenant_hex;
    const char *payment_key, *order_id;
    int status;
};

static bool view_matches(const redisReply *f, const struct view_filter *v)
{
    redisReply *const *e = f->element;
    if (!is_str(e[F_STATUS]))
        return false; /* gone between the listing and its read (a reset, the journal's bound) */
    return (!v->by_tenant || (is_str(e[F_TENANT]) && strcmp(e[F_TENANT]->str, v->tenant_hex) == 0)) &&
           (!v->payment_key || (is_str(e[F_PK]) && strcmp(e[F_PK]->str, v->payment_key) == 0)) &&
           (!v->order_id || (is_str(e[F_OID]) && strcmp(e[F_OID]->str, v->order_id) == 0)) &&
           (v->status < 0 || status_of(e[F_STATUS]) == v->status);
}

/* HMGET of every id in `ids` (strings), pipelined on the admin connection (its lock held):
 * an array of replies (caller frees each and the array), or NULL with the error set. */
static redisReply **read_records(struct cwh *h, const redisReply *ids)
{
    size_t n = ids->elements;
    redisReply **out = calloc(n ? n : 1, sizeof *out);
    if (!out || !wconn_ready(h, &h->adm)) {
        if (!out)
            set_error(h, "unreachable: out of memory");
        free(out);
        return NULL;
    }
    char key[48];
    const char *argv[2 + F_N];
    size_t lens[2 + F_N];
    argv[0] = "HMGET";
    lens[0] = 5;
    for (int i = 0; i < F_N; i++) {
        argv[2 + i] = FIELDS[i];
        lens[2 + i] = strlen(FIELDS[i]);
    }
    for (size_t i = 0; i < n; i++) {
        snprintf(key, sizeof key, "fakegate:wh:d:%s", ids->element[i]->str);
        argv[1] = key;
        lens[1] = strlen(key);
        redisAppendCommandArgv(h->adm.ctx, 2 + F_N, argv, lens);
    }
    for (size_t i = 0; i < n; i++) {
        void *r = NULL;
        if (redisGetReply(h->adm.ctx, &r) != REDIS_OK) {
            set_error(h, "unreachable: %s", h->adm.ctx->errstr);
            wconn_close(&h->adm);
            for (size_t j = 0; j < i; j++)
                freeReplyObject(out[j]);
            free(out);
            return NULL;
        }
        out[i] = r;
    }
    return out;
}

static bool record_shaped(const redisReply *r)
{
    return r && r->type == REDIS_REPLY_ARRAY && r->elements == F_N;
}

int cwh_render_deliveries(struct cwh *h, bool by_tenant, const char *tenant_key,
                          const char *payment_key, const char *order_id, int status,
                          size_t limit, int64_t now_biz_us, struct buf *b)
{
    char hex[560];
    tenant_hex(tenant_key, hex, sizeof hex);
    struct view_filter v = {by_tenant, hex, payment_key, order_id, status};
    const char *argv[] = {"ZRANGE", "fakegate:wh:ids", "0", "-1"};
    size_t l[] = {6, 15, 1, 2};
    pthread_mutex_lock(&h->adm_lock);
    redisReply *ids = run(h, &h->adm, 4, argv, l);
    redisReply **rec = ids && ids->type == REDIS_REPLY_ARRAY ? read_records(h, ids) : NULL;
    pthread_mutex_unlock(&h->adm_lock);
    if (!rec) {
        freeReplyObject(ids);
        return -1;
    }
    size_t n = ids->elements, from = n, found = 0;
    while (from > 0 && (limit == 0 || found < limit)) {
        from--;
        if (record_shaped(rec[from]) && view_matches(rec[from], &v))
            found++;
    }
    buf_adds(b, "{\"deliveries\":[");
    bool first = true;
    for (size_t i = from; i < n; i++) {
        if (!record_shaped(rec[i]) || !view_matches(rec[i], &v))
            continue;
        if (!first)
            buf_addc(b, ',');
        first = false;
        render_one(b, (uint64_t)strtoull(ids->element[i]->str, NULL, 10), rec[i], now_biz_us);
    }
    buf_adds(b, "]}");
    for (size_t i = 0; i < n; i++)
        freeReplyObject(rec[i]);
    free(rec);
    freeReplyObject(ids);
    return 0;
}

int cwh_resend(struct cwh *h, bool by_tenant, const char *tenant_key, uint64_t id,
               int64_t now_biz_us, struct buf *b)
{
    char hex[560], ids[24];
    tenant_hex(tenant_key, hex, sizeof hex);
    snprintf(ids, sizeof ids, "%llu", (unsigned long long)id);
    struct view_filter v = {by_tenant, hex, NULL, NULL, -1};
    redisReply one = {.type = REDIS_REPLY_STRING, .str = ids, .len = strlen(ids)};
    redisReply *elem[1] = {&one};
    redisReply list = {.type = REDIS_REPLY_ARRAY, .elements = 1, .element = elem};
    pthread_mutex_lock(&h->adm_lock);
    redisReply **rec = read_records(h, &list);
    pthread_mutex_unlock(&h->adm_lock);
    if (!rec)
        return -2;
    int rc = -1;
    if (record_shaped(rec[0]) && view_matches(rec[0], &v)) {
        const char *args[] = {ids};
        redisReply *rep = adm_eval(h, RESEND_LUA, 1, args, NULL);
        if (!rep)
            rc = -2;
        else if (rep->type == REDIS_REPLY_INTEGER && rep->integer == 1)
            rc = 0;
        freeReplyObject(rep);
        if (rc == 0)
            render_one(b, id, rec[0], now_biz_us);
    }
    freeReplyObject(rec[0]);
    free(rec);
    return rc;
}

int cwh_reset(struct cwh *h, bool all, const char *tenant_key)
{
    char hex[560];
    tenant_hex(tenant_key, hex, sizeof hex);
    const char *args[] = {all ? "1" : "0", hex};
    redisReply *rep = adm_eval(h, RESET_LUA, 2, args, NULL);
    int rc = rep ? 0 : -1;
    freeReplyObject(rep);
    return rc;
}

int cwh_counts(struct cwh *h, uint64_t *pending, uint64_t *evicted)
{
    pthread_mutex_lock(&h->adm_lock);
    int rc = -1;
    if (wconn_ready(h, &h->adm)) {
        redisAppendCommand(h->adm.ctx, "ZCARD fakegate:wh:pending");
        redisAppendCommand(h->adm.ctx, "GET fakegate:wh:evicted");
        redisReply *a = NULL, *e = NULL;
        if (redisGetReply(h->adm.ctx, (void **)&a) == REDIS_OK &&
            redisGetReply(h->adm.ctx, (void **)&e) == REDIS_OK) {
            *pending = a->type == REDIS_REPLY_INTEGER ? (uint64_t)a->integer : 0;
            *evicted = (uint64_t)int_of(e);
            rc = 0;
        } else {
            set_error(h, "unreachable: %s", h->adm.ctx->errstr);
            wconn_close(&h->adm);
        }
        freeReplyObject(a);
        freeReplyObject(e);
    }
    pthread_mutex_unlock(&h->adm_lock);
    return rc;
}
