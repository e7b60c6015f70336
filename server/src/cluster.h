/* cluster.h -- --store redis://HOST:PORT[/DB]: one state shared by several fakegate instances
 * through one Redis (docs/cluster.md). Redis holds the ordered log of store-lock sections (the
 * state file's lines, docs/state-file.md §10.2) and a lease lock; every instance is a replica
 * of the whole state that catches up on the log before each section and commits the section's
 * line with one script that checks the lease, so sections on different instances are serial
 * and the C code stays the one implementation of the ledger and idempotency rules.
 * Invariants: nothing is applied locally that the log does not hold (a section that cannot
 * commit marks the replica for a rebuild from the log); `applied` and the pending line are
 * touched only under the store lock. Connections: one synchronous hiredis connection per
 * thread that uses the store, made on first use and again after a failure. */
#ifndef FAKEGATE_CLUSTER_H
#define FAKEGATE_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"

struct gateway;
struct statefile;

/* Longest HOST accepted in a --store URL (a DNS name is at most 253 characters). */
#define CLUSTER_HOST_MAX 253

/* A parsed --store redis://HOST:PORT[/DB]. */
struct cluster_url {
    char host[CLUSTER_HOST_MAX + 1];
    unsigned port;                  /* 1-65535 */
    unsigned db;                    /* 0-15 (SELECT); 0 when the URL has none */
    char text[CLUSTER_HOST_MAX + 32]; /* the URL written back in full: redis://HOST:PORT/DB */
};

/* Parse `s`, a --store value of the form redis://HOST:PORT[/DB] (HOST a name or an IPv4
 * address; PORT 1-65535; DB 0-15; no user, password, query or trailing slash). Returns 0 with
 * *u filled, or -1 with a message in err naming the flag and the URL ("--store redis://x:0: the
 * port is 1-65535"). Thread: any; pure. */
int cluster_parse_url(const char *s, struct cluster_url *u, char err[ERR_LEN]);

struct redisContext;

/* A new hiredis connection to Redis at *u: connected within `timeout_ms` (ms), the same timeout
 * on every command after, TCP_NODELAY, and SELECT of u->db when it is not 0. Returns it (the
 * caller redisFree()s it), or NULL with the reason in why (n bytes, no prefix: "Connection
 * refused", "SELECT 3: ERR DB index is out of range"). The one place the store's connections
 * are made (the sections', the shared journal's writer, the webhooks'). Thread: any. */
struct redisContext *cluster_connect(const struct cluster_url *u, int timeout_ms, char *why,
                                     size_t n);

struct cluster;

/* What /healthz shows of the store (cluster_status). */
struct cluster_status {
    bool up;                        /* the last command of any thread reached Redis */
    char error[256];                /* the last failure ("Connection refused"), when !up */
    uint64_t applied;               /* log lines this replica has applied */
    uint64_t lines;                 /* the log's length when last seen */
    uint64_t errors;                /* commands that failed since start (a counter) */
};

/* A cluster handle for Redis at *u (copied) with this process's `instance_id`; attempt
 * counters idle for `idem_ttl_ms` expire (--idempotency-ttl). Nothing is connected yet:
 * cluster_start does. Returns NULL on out of memory. Thread: main. */
struct cluster *cluster_new(const struct cluster_url *u, uint64_t instance_id,
                            int64_t idem_ttl_ms);
/* Close every connection and free c (NULL allowed). Thread: main, after every other thread
 * that used c has stopped. */
void cluster_free(struct cluster *c);

/* Connect, load the scripts and replay the whole log into g's tenants through sf's line
 * applier (statefile_apply_line), without taking the lease and without releasing PROCESSING
 * records (their owners may be alive). *lines receives how many lines were applied. Returns
 * 0, or -1 with a message in err ("--store redis://...: Connection refused", or the log line
 * that did not apply). Thread: main, before the daemon starts; sf attached to g. */
int cluster_start(struct cluster *c, struct statefile *sf, struct gateway *g, uint64_t *lines,
                  char err[ERR_LEN]);

/* The start of a store-lock section (store lock held): rebuild the replica first if it was
 * marked, take the cluster lease (retrying a busy one with jittered backoff up to
 * CLUSTER_BUSY_DEADLINE_MS), then apply the log lines after `applied`. Returns 0 (the lease
 * held: run the section, then cluster_commit), or -1 (the store is down or the log did not
 * apply: nothing was taken; cluster_message says why). Thread: any, store lock held. */
int cluster_begin(struct cluster *c);
/* The end of a section begun by cluster_begin: append the section's pending line (if any) to
 * the log and release the lease, in one script that checks the lease is still ours. Returns 0,
 * or -1 (Redis failed, or the lease had expired: the line may be missing, so the replica is
 * marked for a rebuild and the section's answer must not leave). The pending line is cleared
 * either way. Thread: any, store lock held. */
int cluster_commit(struct cluster *c);
/* Mark the replica for a rebuild at the next cluster_begin: every tenant's store emptied and
 * the whole log applied again (a request of this instance still holding a claim then finds its
 * tenant reset). Thread: any, store lock held. */
void cluster_mark_rebuild(struct cluster *c);

/* Did the section in progress begin with a rebuild (every tenant's generation bumped)? And
 * cluster_note_rebuilt: make that the message a request admitted before it is answered 503
 * with. Thread: any, store lock held. */
bool cluster_rebuilt(const struct cluster *c);
void cluster_note_rebuilt(struct cluster *c);

/* "fakegate store redis://HOST:PORT/DB unreachable: WHY" (or "... log line N: WHY") into
 * out (n bytes): the message of a 503 a section that could not reach the store answers.
 * Thread: any. */
void cluster_message(struct cluster *c, char *out, size_t n);
/* The store's state now, for /healthz and /metrics. Thread: any. */
void cluster_status(struct cluster *c, struct cluster_status *st);
/* The URL as written back (redis://HOST:PORT/DB). Borrowed, lives as long as c. */
const char *cluster_url_text(const struct cluster *c);
/* The URL as parsed (for the store's other connections: cluster_connect). Borrowed, lives as
 * long as c. */
const struct cluster_url *cluster_url_of(const struct cluster *c);
/* This process's instance id, as claim records name their owner. */
uint64_t cluster_instance(const struct cluster *c);

/* The next attempt number of `identity` on route number `route` for the tenant of secret key
 * `tenant_key` (NULL: the keyless default tenant): INCR of a shared counter whose idle expiry is
 * the idempotency TTL, in one pipelined round trip. Returns 0 with *attempt set, or -1 (store
 * down: the caller counts locally; the request's section then fails anyway). Thread: any,
 * without the store lock. */
int cluster_attempts_next(struct cluster *c, const char *tenant_key, int route,
                          const char *identity, uint32_t *attempt);
/* Delete the attempt counters of tenant `tenant_key` (NULL, all: false), or of every tenant
 * (all: true), with SCAN + UNLINK. 0, or -1 if the store is down. Thread: any. */
int cluster_attempts_reset(struct cluster *c, const char *tenant_key, bool all);

/* Refresh this instance's heartbeat key (fakegate:instance:<id>, CLUSTER_HEARTBEAT_MS lease).
 * Thread: any (the 1 s sweep). */
void cluster_heartbeat(struct cluster *c);
/* Is instance `id` gone: its heartbeat key missing, and missing already at a check
 * CLUSTER_HEARTBEAT_MS or more ago (a Redis that came back empty holds no key until each
 * instance's next refresh)? 1 gone, 0 not (yet), -1 store down. Thread: any. */
int cluster_instance_gone(struct cluster *c, uint64_t id);

/* --- commands for the modules that keep more state in the same Redis (cluster_limits.c) --- */

struct redisReply;

/* A Lua script: its source and its SHA1, loaded into Redis at first use (and again when Redis
 * answers NOSCRIPT: it restarted). Initialise with CLUSTER_SCRIPT(src). */
struct cluster_script {
    const char *src;
    char sha[41];
};
#define CLUSTER_SCRIPT(s) {(s), "0000000000000000000000000000000000000000"}

/* Run one command, argv[i] of lens[i] bytes, on this thread's connection (made or made again
 * here). The reply (caller frees with freeReplyObject; an error reply is returned as it is), or
 * NULL: Redis unreachable, the store's error set (cluster_message, /healthz). Thread: any. */
struct redisReply *cluster_run(struct cluster *c, int argc, const char **argv,
                               const size_t *lens);
/* EVALSHA of script s with argv[2..argc-1] (numkeys, keys, args; argv[0], argv[1] and their
 * lens are filled here). The reply (caller frees), or NULL: unreachable or a script error, the
 * store's error set. Thread: any. */
struct redisReply *cluster_script_run(struct cluster *c, struct cluster_script *s, int argc,
                                      const char **argv, size_t *lens);
/* Set the store's error ("unreachable: WHY"): a reply that was not what the caller asked for.
 * Thread: any. */
void cluster_fail(struct cluster *c, const char *why);

#endif
