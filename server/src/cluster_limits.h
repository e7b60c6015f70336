/* cluster_limits.h -- --store redis://: the profile in force and what a profile's state counts,
 * shared by every instance on one Redis (docs/cluster.md §11.1): the profile each scope (the
 * server, or a tenant) runs, with a version; the `times` budgets, token buckets and concurrency
 * caps of that state, kept in Redis under the version, so a budget of N fires N times and a
 * bucket or a cap holds for the cluster's total. Invariants: an instance applies a scope's
 * profile only from the shared record (or its own publish, under the sync lock), in version
 * order; none of this runs without --store redis:// (the in-memory path never calls it). */
#ifndef FAKEGATE_CLUSTER_LIMITS_H
#define FAKEGATE_CLUSTER_LIMITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "fault.h"
#include "live.h"

struct cluster;
struct gateway;
struct profile;
struct tenant;

struct cluster_limits;

/* A handle over cluster c for gateway g (both borrowed; they outlive it). NULL on out of
 * memory. Thread: main. */
struct cluster_limits *cluster_limits_new(struct cluster *c, struct gateway *g);
/* Free l (NULL allowed). Thread: main, after every other thread that used it stopped. */
void cluster_limits_free(struct cluster_limits *l);

/* Adopt the profiles the cluster runs now (every scope's record, in version order), as an
 * instance starting later must. 0, or -1 with a message in err ("--store URL: unreachable:
 * ..."). A record this instance cannot parse (another --profiles-dir) is reported on stderr
 * and skipped. Thread: main, before the daemon starts. */
int cluster_limits_start(struct cluster_limits *l, char err[ERR_LEN]);

/* At every request: one GET of the shared profile version; when another instance published
 * since, apply every newer record (in version order) before this request is admitted.
 * A store that is down changes nothing (the request's section answers 503). Thread: any. */
void cluster_limits_sync(struct cluster_limits *l);

/* What cluster_limits_apply_fn does with a validated profile (owned) stamped `version`. */
typedef int (*cluster_limits_apply_fn)(struct gateway *g, struct tenant *t, struct profile *p,
                                       uint64_t version, void *ctx);

/* Publish a profile change of scope t (NULL: the server) and apply it here: one script takes
 * the next version and stores (version, reset?, text) for the scope; then apply(g, t, p,
 * version, ctx) runs, under the sync lock, so this instance's own sync never applies it
 * twice. `text` (len bytes) is what PUT /__admin/profile or a reset's "profile" carried (a
 * profile object or {"name": ...}), validated already into p (owned); NULL for a reset
 * without one (the scope's text is kept: every instance applies its profile anew). Returns
 * apply's value, or -1 when Redis could not be reached (p freed, nothing applied anywhere:
 * the caller answers 503, gateway_refuse_store). Thread: any. */
int cluster_limits_publish(struct cluster_limits *l, struct tenant *t, const char *text,
                           size_t len, bool reset, struct profile *p,
                           cluster_limits_apply_fn apply, void *ctx);

/* The plan of a request of `route` under `cur` (its tenant t): fault_decide as live_plan does,
 * but a fault's `times` use is taken from a Redis counter of (tenant, cur's version and phase,
 * route, fault): INCR, fired when the count is at most `times`. A store that is down grants
 * no use. Thread: any. */
void cluster_limits_plan(struct cluster_limits *l, struct live *cur, const struct tenant *t,
                         enum route_id route, uint32_t attempt, struct rng *rng,
                         struct plan *out);

/* live_admit for the cluster: a token-bucket throttle takes its token from a bucket in Redis
 * (a Lua script on Redis's clock, the semantics of throttle.c's bucket_take), a window throttle
 * is judged here; then the request is counted in flight in f and, under a concurrency cap,
 * takes one of max_in_flight slots of a shared set (a Lua script: slots past their lease are
 * dropped, then a slot added if fewer are held). *slot receives the slot taken (NULL when
 * none); the caller gives it back with cluster_limits_release when the response has ended.
 * A store that is down admits (the request's section answers 503). Thread: any. */
struct cluster_slot;
void cluster_limits_admit(struct cluster_limits *l, struct live *cur, int64_t since_ns,
                          struct flight *f, const struct tenant *t, enum route_id route,
                          int64_t now_ns, struct admission *out, struct cluster_slot **slot);

/* Give back (ZREM) and free a slot cluster_limits_admit took (NULL does nothing). Thread:
 * any. */
void cluster_limits_release(struct cluster_limits *l, struct cluster_slot *slot);

/* The `processing` mark of payment `payment_key` of tenant t, shared (a slot of a set of one,
 * as cluster_limits_admit takes: docs/cluster.md §11.1): 1 taken (*mark set: give it back with
 * cluster_limits_release at the commit), 0 held by a confirm on some instance (answer
 * ALREADY_PROCESSING_REQUEST), -1 store down (*mark NULL; the section fails or the commit's
 * check catches a race). Thread: any, inside a section (store lock held). */
int cluster_limits_mark(struct cluster_limits *l, const struct tenant *t,
                        const char *payment_key, struct cluster_slot **mark);

/* Renew the lease of every slot this instance holds (the 1 s sweep): a slot of an instance
 * that died lapses CLUSTER_LIMITS_SLOT_LEASE_MS after its last renewal. Thread: any. */
void cluster_limits_heartbeat(struct cluster_limits *l);

/* A cap slot's lease, ms: renewed every second while its request is in flight. */
#define CLUSTER_LIMITS_SLOT_LEASE_MS 3000

#endif
