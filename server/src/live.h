/* live.h -- the applied profile and its mutable state (docs/profiles.md §4, docs/admin.md §5):
 * token buckets and fault `times` budgets (fresh each time a profile is applied), the schedule
 * clock, the per-route in-flight counts with their peaks, and the attempt counters per (route,
 * identity). Thread-safe: buckets under the live's lock, budgets and in-flight counts atomic,
 * attempts under their own lock. */
#ifndef FAKEGATE_LIVE_H
#define FAKEGATE_LIVE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "fault.h"
#include "profile.h"
#include "strmap.h"
#include "throttle.h"

struct live_route {
    struct token_bucket bucket;
    atomic_llong *times_used;        /* one per fault of the route */
};

struct live {
    const struct profile *profile;   /* borrowed; outlives the live */
    int64_t origin_ns;               /* monotonic: when applied (a phase: when it starts) */
    pthread_mutex_t lock;            /* the buckets */
    struct live_route routes[ROUTE_COUNT];
    struct live *phases;             /* a schedule's phases, each with its own state */
    size_t n_phases;
    double cycle_s;                  /* sum of the phases' for_s */
    uint64_t version;                /* --store redis://: the shared profile version it was
                                        applied under (docs/cluster.md §11.1), naming its shared
                                        buckets and budgets; 0 without one */
    unsigned phase;                  /* 0 for the profile, i + 1 for its phase i */
};

/* Apply `p` at now_ns: full buckets, unused budgets, the schedule starting now. NULL on out of
 * memory. Caller frees with live_free. */
struct live *live_new(const struct profile *p, int64_t now_ns);
void live_free(struct live *l);
/* Stamp l and its phases with the shared profile version `version` (live.version). Before l
 * is published to requests. */
void live_set_version(struct live *l, uint64_t version);

/* The state in force at now_ns: for a schedule the current phase (a schedule without repeat
 * stays in its last phase), else `l`. *since_ns receives now_ns minus that state's origin (for
 * window throttles), counted from the start of the phase's current occurrence. Borrowed. */
struct live *live_current(struct live *l, int64_t now_ns, int64_t *since_ns);

/* Per-route in-flight counts: a request counts from arrival to the end of its response. */
struct flight {
    atomic_long in_flight[ROUTE_COUNT];
    atomic_long peak[ROUTE_COUNT];   /* exact maximum since the last reset */
};

enum admit { ADMIT_OK = 0, ADMIT_THROTTLED, ADMIT_CAPPED };

struct admission {
    enum admit result;
    const struct throttle *throttle;   /* ADMIT_THROTTLED: the rule that refused */
    const struct concurrency *cap;     /* ADMIT_CAPPED: the rule that refused */
    uint32_t retry_after_auto_s;       /* ADMIT_THROTTLED: the "auto" Retry-After, seconds */
    double retry_after_wait_s;         /* ADMIT_THROTTLED: the exact wait until admission, s */
};

/* Throttle, then the concurrency cap, for a request of `route` arriving at now_ns under the
 * state `cur` (live_current). On ADMIT_OK the request is counted in flight and the caller must
 * call flight_end(f, route) when its response has ended; a refused request is not counted. */
void live_admit(struct live *cur, int64_t since_ns, struct flight *f, enum route_id route,
                int64_t now_ns, struct admission *out);

/* The end of a counted request. */
void flight_end(struct flight *f, enum route_id route);
/* Count one more request of `route` in flight in f, with its peak (a count no cap reads: the
 * server's, for /metrics, beside the tenant's that live_admit counts). */
void flight_begin(struct flight *f, enum route_id route);

/* Restart the peaks from the current in-flight counts (POST /__admin/reset). */
void flight_reset_peaks(struct flight *f);

/* The plan of one request of `route` under `cur`: fault_decide with `cur`'s `times` budgets
 * (a fault's use is taken when it fires; budgets are shared by all requests, in arrival
 * order). */
void live_plan(struct live *cur, enum route_id route, uint32_t attempt, struct rng *rng,
               struct plan *out);

/* Attempt counters: the n-th request with an identity on a route since the last reset, or since
 * the identity was last used more than ttl_us ago (docs/profiles.md §4 "attempts"): a counter
 * idle for the TTL restarts at 1 (at its next use, or freed by attempts_sweep before). Split
 * into shards by the identity's hash, each with its own lock, so the two workers seldom wait
 * for each other here; each shard keeps its counters on a list in order of last use, so the
 * sweep looks only at the idle ones. Times are the gateway clock (µs since the epoch). */
#define ATTEMPTS_SHARDS 16
struct attempt_entry;
struct attempts {
    int64_t ttl_us;                  /* --idempotency-ttl; 0: counters never go idle */
    struct attempts_shard {
        pthread_mutex_t lock;
        struct strmap map;           /* "route\0identity" -> counter (owned entries) */
        struct attempt_entry *oldest, *newest; /* by last use */
    } shard[ATTEMPTS_SHARDS];
};

/* Empty counters that go idle after `ttl_us` (0: never). Thread: main, before use. */
void attempts_init(struct attempts *a, int64_t ttl_us);
void attempts_fini(struct attempts *a);
/* Drop every counter (POST /__admin/reset). Thread: any. */
void attempts_reset(struct attempts *a);
/* Count one more request of `identity` on `route` at now_us and return its attempt number: 1
 * for the first since the last reset, or when its previous request came ttl_us or more before
 * now_us. Returns 1 without counting if memory runs out. Thread: any. */
uint32_t attempts_next(struct attempts *a, enum route_id route, const char *identity,
                       int64_t now_us);
/* Free the counters idle for ttl_us at now_us, oldest first, at most `budget` per shard;
 * *more (if not NULL) set when some shard had more than that. Each shard's lock is held for
 * its part only. Returns how many went. Thread: any. */
size_t attempts_sweep(struct attempts *a, int64_t now_us, size_t budget, bool *more);
/* Counters held now, idle ones not yet swept included. Thread: any. */
size_t attempts_count(struct attempts *a);

#endif
