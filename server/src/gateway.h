/* gateway.h -- the gateway's state and its lifecycle: the tenants (one per secret key, each
 * with its store -- ledger, idempotency records, attempt counters -- its reset generation,
 * profile state and report; tenant.c) behind the one store lock, the profile in force and the
 * profiles named by X-Fakegate-Profile, the journal, the metrics and the gateway clock.
 * Handler modules (payments.c, admin.c, admin_webhooks.c) and the request edge (admit.c,
 * observe.c, router.c) are siblings over it. Only gateway.c defines or takes the store lock: a
 * caller reaches a store through gateway_txn (the request's tenant's), which also refuses a
 * request that a reset has overtaken, or gateway_tenant_txn. */
#ifndef FAKEGATE_GATEWAY_H
#define FAKEGATE_GATEWAY_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "journal.h"
#include "live.h"
#include "metrics.h"
#include "profile.h"
#include "report.h"
#include "store.h"
#include "timeline.h"

struct cluster;
struct cluster_journal;
struct cluster_limits;
struct request;
struct statefile;

/* A profile as applied: its parsed form and its live state. */
struct applied {
    struct profile *profile;       /* the profile (owned only if `owns`) */
    bool owns;                     /* false for a re-application by reset */
    struct live *live;             /* owned */
    int64_t applied_unix_us;
    struct applied *prev;
};

#define GATEWAY_MAX_SUBSCRIBERS 4
/* Default of --max-tenants. */
#define GATEWAY_MAX_TENANTS_DEFAULT 10000
/* Default of --max-idempotency-records, per tenant: about 380 bytes a record (a stored
 * business error under a 20-character key, measured), so some 380 MB at the bound. */
#define GATEWAY_MAX_IDEM_RECORDS_DEFAULT 1000000
/* Default of --max-payments, per tenant: 937 bytes a payment with its Idempotency-Key record
 * (make bench, scenario 5), so about 940 MB at the bound. */
#define GATEWAY_MAX_PAYMENTS_DEFAULT 1000000

/* One merchant: the state of one secret key (docs/tenants.md §9). Created on its key's first
 * use (or by an admin call naming it) and kept until exit, so a pointer to it stays valid;
 * a reset empties it. The store is guarded by the store lock, `own`, `lives` and `live_for`
 * by apply_lock (read atomically on the request path). */
struct tenant {
    char *key;                     /* the secret key; NULL for the default tenant until the first
                                      key that arrives adopts it */
    uint32_t index;                /* creation order, from 0 */
    struct store store;            /* its ledger, idempotency records, attempt counters */
    uint64_t generation;           /* its reset count (the server's resets and its own): written
                                      under the store lock, read atomically */
    struct flight flight;          /* its requests in flight: its concurrency caps */
    struct report report;          /* its requests since its last reset, judged */
    struct timeline *_Atomic timeline; /* its requests per second, made when the live page
                                      first asks for this tenant (NULL until then) */
    _Atomic uint64_t journal_floor; /* its journal entries below this id were reset away */
    struct applied *own;           /* its own profile (PUT /__admin/profile naming it), newest
                                      first, or NULL: the server's profile */
    struct applied *lives;         /* its states of the server's profiles, newest first (requests
                                      in flight may still use old ones; freed at exit) */
    struct live *_Atomic live;     /* the state its new requests get */
    struct live *_Atomic live_for; /* the server's state `live` was made from (NULL when `own`
                                      is in force) */
    size_t expiry_cursor;          /* the session-expiry sweep's place (store lock) */
    struct payment **expiry_held;
    size_t n_expiry_held, cap_expiry_held;
    struct tenant *next;           /* creation order */
};

struct gateway {
    pthread_mutex_t lock;          /* the store lock; taken only by gateway.c */
    pthread_mutex_t tenants_lock;  /* the tenants map and list */
    struct strmap tenants;         /* secret key -> struct tenant */
    struct tenant *first, *last;   /* every tenant in creation order; `first` is the default */
    size_t n_tenants, max_tenants;
    const struct config *cfg;      /* borrowed, lives as long as the gateway */
    struct live *_Atomic live;     /* the active profile's state; requests keep the one they
                                      arrived under */
    struct flight flight;          /* in-flight counts per route */
    struct journal journal;        /* the last --journal-size gateway requests (default 10 000) */
    struct timeline *timeline;     /* every gateway request per second (the live page) */
    struct report report;          /* every gateway request since the last reset, judged */
    struct metrics metrics;
    uint64_t generation;           /* bumped by a server-wide reset, under the store lock */
    struct applied *applied;       /* every profile ever applied, newest first (in-flight
                                      requests may still use old ones; freed at exit) */
    pthread_mutex_t apply_lock;    /* serialises profile switches and resets */
    profile_resolver resolve;      /* loads a profile by name (from --profiles-dir) */
    void *resolve_ctx;
    struct applied *named;         /* X-Fakegate-Profile: profiles loaded by name, cached until
                                      the next reset */
    struct applied *retired;       /* named entries a reset dropped (requests in flight may
                                      still use them; freed at exit) */
    uint64_t seed;                 /* the seed at start (--seed, the start profile's, or random;
                                      printed); a profile applied later brings its own */
    uint64_t instance_id;          /* random per process */
    int64_t started_unix_us;
    struct {
        store_event_fn fn;
        void *ctx;
    } subscribers[GATEWAY_MAX_SUBSCRIBERS];
    size_t n_subscribers;
    _Atomic int64_t clock_offset_us; /* the gateway clock minus the wall clock, µs, >= 0
                                        (docs/webhooks.md §6.7); reset sets it to 0 */
    struct webhooks *webhooks;     /* the webhook dispatcher (webhook.h), or NULL; set by main
                                      before the daemon starts */
    struct statefile *state;       /* --state-file (statefile.h), or NULL; set by main before
                                      the daemon starts (gateway_attach_state) */
    struct cluster_limits *limits; /* --store redis://: the profile in force, its budgets,
                                      buckets and caps shared (cluster_limits.h), or NULL; set
                                      by main before the daemon starts */
    struct cluster *cluster;       /* --store redis:// (cluster.h), or NULL: every section then
                                      begins and commits through it; set by main before the
                                      daemon starts, with a shared state log in `state` */
    struct cluster_journal *cjournal; /* with `cluster`: the journal and report shared through
                                      Redis (cluster_journal.h), else NULL; set by main */
};

/* Initialise with the settings (borrowed), the profile resolver (for names; may be NULL: then
 * only inline profiles apply) and the start profile (owned from now on). `seed` is the
 * effective seed, `instance_id` random per process. Returns 0, or -1 on out of memory.
 * Thread: main, before the daemon starts. */
int gateway_init(struct gateway *g, const struct config *cfg, profile_resolver resolve,
                 void *resolve_ctx, struct profile *profile, uint64_t seed,
                 uint64_t instance_id);
void gateway_fini(struct gateway *g);

/* Append every change of every tenant's store to `sf` (--state-file; borrowed, outlives the
 * gateway's use of it) from now on, tenants created later included. Call it before
 * statefile_replay, which replays through the stores. Thread: main, before the daemon starts. */
void gateway_attach_state(struct gateway *g, struct statefile *sf);

/* Call fn(ctx, ev) for every payment status change from now on (store.h: under the store
 * lock; it must not block). At most GATEWAY_MAX_SUBSCRIBERS. Returns 0, or -1 when full.
 * Thread: main, before the daemon starts. */
int gateway_subscribe(struct gateway *g, store_event_fn fn, void *ctx);

/* gateway_txn's answer when fn did not run, or ran but its changes could not be kept: a reset
 * ran since the request was admitted, or (--store redis://) the shared store could not be
 * reached -- then r is answered already (503, gateway_refuse_store) and r->obs.store_down set.
 * Either way r's claim, if it held one, is gone with its ledger. */
#define GATEWAY_STRADDLED (-1000)
/* gateway_tenant_txn's answer when the shared store (--store redis://) could not be reached:
 * fn did not run, or its changes were not kept (the replica rebuilds from the log). */
#define GATEWAY_STORE_DOWN (-1001)

/* A section of work on the store: runs under the store lock, returns what gateway_txn returns
 * (any value but GATEWAY_STRADDLED). */
typedef int (*gateway_txn_fn)(struct gateway *g, struct store *s, struct request *r, void *arg);

/* Run fn(g, store of r's tenant, r, arg) under the store lock -- the one guard every store
 * access goes through. r is admitted (r->adm.tenant set). When a reset of its tenant has run
 * since r was admitted (r->adm.generation), fn is not run and GATEWAY_STRADDLED is returned:
 * r belongs to a ledger that is gone. Thread: any; fn must not call gateway_txn. */
int gateway_txn(struct gateway *g, struct request *r, gateway_txn_fn fn, void *arg);

/* Run fn(g, &t->store, NULL, arg) under the store lock (an admin call, the webhook thread).
 * Returns fn's value, or GATEWAY_STORE_DOWN. Thread: any; fn must not call gateway_txn. */
int gateway_tenant_txn(struct gateway *g, struct tenant *t, gateway_txn_fn fn, void *arg);

/* Answer r 503 SERVICE_UNAVAILABLE with a message naming the shared store and why it failed
 * ("fakegate store redis://127.0.0.1:6390/0 unreachable: Connection refused"), and mark it
 * store_down (not judged by the report, like a request a reset overtook). Thread: any. */
void gateway_refuse_store(struct gateway *g, struct request *r);
/* The same answer with the message `msg` (the store's part that failed says it: the webhooks'
 * queue, say). Thread: any. */
void gateway_refuse_store_msg(struct request *r, const char *msg);

/* The reset count of tenant t now, without the store lock. A /v1 request is stamped with its
 * tenant's when admitted. Exact where gateway_txn checks it; elsewhere (attempt counts,
 * faults drawn) as of an unlocked read a few microseconds earlier. Thread: any. */
uint64_t tenant_generation(const struct tenant *t);

/* t's secret key, or NULL (t NULL, or the default tenant before any key adopted it). Stable
 * once set: a journal entry may keep the pointer. Thread: any. */
const char *tenant_key(const struct tenant *t);

/* --- tenants (tenant.c; docs/tenants.md §9) --- */

/* Create the default tenant (for --secret-key's first key, else keyless). 0 or -1 (OOM). */
int gateway_tenants_init(struct gateway *g);
void gateway_tenants_fini(struct gateway *g);

/* The tenant of secret key `key`, or NULL. With `create`, an unknown key gets one (the
 * default tenant, while no key has adopted it, else a new one); NULL then means out of memory
 * or --max-tenants reached (*full true). Thread: any. */
struct tenant *gateway_tenant(struct gateway *g, const char *key, bool create, bool *full);

/* Iterate: gateway_tenant_next(g, NULL) is the first (default) tenant, then creation order;
 * NULL after the last. Tenants are never removed, so this needs no lock. Thread: any. */
struct tenant *gateway_tenant_next(struct gateway *g, struct tenant *t);

/* The profile state t's new requests get: its own profile's, or its state of the server's
 * profile in force (the default tenant shares the server's; another tenant gets buckets and
 * budgets of its own, counted from when the server's profile was applied). Borrowed, valid
 * until exit. Thread: any. */
struct live *gateway_tenant_live(struct gateway *g, struct tenant *t);

/* PUT /__admin/profile with X-Fakegate-Tenant: `p` (owned from now on) becomes t's own
 * profile, for its requests only. 0, or -1 on out of memory (p freed). Thread: any. */
int gateway_apply_tenant(struct gateway *g, struct tenant *t, struct profile *p);

/* fn(entry, ctx) with the applied entry t's requests get (its own, else the server's), under
 * apply_lock. Thread: any. */
void gateway_with_tenant_applied(struct gateway *g, struct tenant *t,
                                 void (*fn)(const struct applied *a, void *ctx), void *ctx);

/* POST /__admin/reset with X-Fakegate-Tenant: empty t's store, attempt counts, journal view,
 * report and profile state; then make `p` (owned, may be NULL) its own profile. Other
 * tenants are untouched. 0, or GATEWAY_STORE_DOWN (--store redis:// unreachable: nothing was
 * reset, p freed). Thread: any. */
int gateway_reset_tenant(struct gateway *g, struct tenant *t, struct profile *p);

/* --store redis://: empty every tenant's store as a replay finds it at start (store_rewind, the
 * gateway clock at 0), bumping each tenant's generation so requests in flight find their
 * ledger gone; the caller then applies the whole log again (cluster.c). The state log must be
 * replaying (no record appended). Store lock held. */
void gateway_replica_clear_locked(struct gateway *g);

/* gateway_txn sections of tenant.c, for gateway.c: one tenant's session sweep, its reset. */
int gateway_sweep_locked(struct gateway *g, struct store *s, struct request *r, void *arg);
int gateway_tenant_reset_locked(struct gateway *g, struct store *s, struct request *r,
                                void *arg);
/* A server-wide reset's part for t (apply_lock held): its own profile's state afresh, stamped
 * with shared profile version `version` (0 without --store redis://). */
void gateway_tenant_refresh_locked(struct gateway *g, struct tenant *t, uint64_t version);

/* A new applied entry for `p` (owned by it from now on): fresh state from now, not yet in any
 * list. NULL on out of memory (p freed). Thread: any. */
struct applied *gateway_applied_new(struct profile *p);

/* Apply `p` (ownership passes to the gateway) to every request that arrives from now on;
 * requests in flight keep the state they arrived with. Returns 0, or -1 on out of memory (p
 * freed, the old profile stays). Thread: any. */
int gateway_apply(struct gateway *g, struct profile *p);
/* gateway_apply, its state stamped with shared profile version `version` (--store redis://,
 * cluster_limits.h: names its shared buckets and budgets). */
int gateway_apply_shared(struct gateway *g, struct profile *p, uint64_t version);
/* gateway_apply_tenant, likewise stamped. */
int gateway_apply_tenant_shared(struct gateway *g, struct tenant *t, struct profile *p,
                                uint64_t version);

/* The state of the profile called `name` for X-Fakegate-Profile: loaded once through the
 * resolver and cached (its buckets and budgets are shared by the requests that name it).
 * Borrowed, or NULL with a message in err. Thread: any. */
struct live *gateway_named_live(struct gateway *g, const char *name, char err[ERR_LEN]);

/* Load profile `name` (shipped or --profiles-dir) through the resolver: 0 with *out (caller
 * owns), or -1 with a message in err. Thread: any. */
int gateway_resolve(struct gateway *g, const char *name, struct profile **out,
                    char err[ERR_LEN]);

/* POST /__admin/reset: empty the store, journal, counters, peaks (restarted from the requests
 * in flight now), attempt counts, and the state of the profiles X-Fakegate-Profile named
 * (reloaded when next named); then apply `p` (taking ownership), or re-apply the active
 * profile when p is NULL (fresh buckets, budgets, windows) -- all as one step under
 * apply_lock. With --store redis:// the stores' reset is one line of the log (every replica
 * empties them at its next catch-up) and the cluster's attempt counters are deleted. 0, or
 * GATEWAY_STORE_DOWN: the store was unreachable, nothing was reset (p freed). Thread: any. */
int gateway_reset(struct gateway *g, struct profile *p);
/* gateway_reset and gateway_reset_tenant with the new state stamped with shared profile version
 * `version` (--store redis://). */
int gateway_reset_shared(struct gateway *g, struct profile *p, uint64_t version);
int gateway_reset_tenant_shared(struct gateway *g, struct tenant *t, struct profile *p,
                                uint64_t version);
/* The profile part of a reset another instance made (--store redis://, cluster_limits.c):
 * gateway_reapply as gateway_reset does after emptying the stores (every tenant's own profile
 * state anew, then `p` (owned; NULL: the active profile anew)); gateway_tenant_reapply as
 * gateway_reset_tenant does (`p` becomes t's own, or t's state anew). Stamped with `version`.
 * Thread: any. */
void gateway_reapply(struct gateway *g, struct profile *p, uint64_t version);
void gateway_tenant_reapply(struct gateway *g, struct tenant *t, struct profile *p,
                            uint64_t version);

/* The profile in force: its name copied into `name`, and a malloc'd copy of the file it was
 * read from (the start profile, or one PUT or reset by name), or NULL when it was given inline
 * (a request body) or memory ran out. Thread: any. */
char *gateway_profile_file(struct gateway *g, char name[PROFILE_NAME_MAX + 1]);

/* The seed in force for a request planned under profile `p` (docs/profiles.md §4
 * "Determinism"): --seed, else p's "seed", else the seed at start. A request is stamped with it
 * at admission; GET /__admin/profile and /healthz show it for the applied profile. Thread: any. */
uint64_t gateway_seed(const struct gateway *g, const struct profile *p);

/* The server's profile state in force (what a tenant without a profile of its own follows).
 * Borrowed. */
struct live *gateway_live(struct gateway *g);

/* The applied entry in force, for GET /__admin/profile: fn(a, ctx) runs under apply_lock so
 * the entry cannot change meanwhile. Thread: any. */
void gateway_with_applied(struct gateway *g, void (*fn)(const struct applied *a, void *ctx),
                          void *ctx);

/* --- the gateway clock (docs/webhooks.md §6.7) --- */

/* Business time now: the wall clock plus the clock's offset, µs since the Unix epoch. Every
 * business timestamp (requestedAt, approvedAt, canceledAt, transactionAt, a webhook's
 * createdAt) and business timer (session expiry, idempotency TTL, webhook retries) reads it;
 * transport time (latencies, throttles, timeouts, the journal) never does. Thread: any. */
int64_t gateway_now_us(const struct gateway *g);

/* Move the gateway clock forward by `us` (>= 0) microseconds, then expire every session that is
 * over at the new time and free the idempotency records past their TTL (gateway_sweep_expired)
 * and wake the webhook dispatcher, so whatever fell due fires at once, in due order. With
 * --store redis:// the move is a section of its own (its clock record in the log: every replica
 * follows at its next catch-up). 0, or GATEWAY_STORE_DOWN (the clock did not move). Thread:
 * any (not under the store lock). */
int gateway_clock_advance(struct gateway *g, int64_t us);

/* Expire every session whose --session-ttl is over at gateway_now_us (docs/api.md §2.1), in
 * creation order, each with its EXPIRED event; a session a confirm holds is looked at again on
 * the next sweep. Amortised O(1) per payment. Then free the idempotency records whose
 * --idempotency-ttl is over (docs/idempotency.md §3), oldest first, in batches under the store
 * lock so no request waits long behind it, the attempt counters idle for that TTL
 * (docs/profiles.md §4 "attempts"), in batches under their own locks, and the report
 * identities idle for it (docs/admin.md §5 GET /__admin/report), in batches under each
 * report's lock. Returns how many sessions expired. Thread: any (not under the store lock); the webhook dispatcher calls it once a
 * second. */
size_t gateway_sweep_expired(struct gateway *g);

/* The idempotency records every tenant holds now (fakegate_idempotency_records). Takes the
 * store lock once per tenant. Thread: any (not under the store lock). */
size_t gateway_idem_records(struct gateway *g);

/* Expire p of store s if its session is over (--session-ttl; docs/api.md §2.1) or, for a
 * virtual account, its due date (docs/virtual-accounts.md §6.6). True if p is EXPIRED. Store
 * lock held (inside a gateway_txn section). */
bool gateway_expire(struct gateway *g, struct store *s, struct payment *p);

#endif
