/* payments.h -- the Toss API handlers (SPEC §2, §3) and the gateway state they share: the
 * ledger and the idempotency records behind one store lock. Each handler validates the request,
 * plans it (latencies drawn from the active profile with the request's seeded generator) and
 * runs the state changes at the plan's instants: arrival, leaving the queue (the claim), and
 * the commit. A state change never waits for the client: the timer thread runs it at its
 * deadline whether or not the connection is still there. */
#ifndef FAKEGATE_PAYMENTS_H
#define FAKEGATE_PAYMENTS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "idem.h"
#include "journal.h"
#include "ledger.h"
#include "live.h"
#include "metrics.h"
#include "profile.h"
#include "request.h"

/* A profile as applied: its parsed form and its live state. */
struct applied {
    struct profile *profile;       /* the profile (owned only if `owns`) */
    bool owns;                     /* false for a re-application by reset */
    struct live *live;             /* owned */
    int64_t applied_unix_us;
    struct applied *prev;
};

struct gateway {
    pthread_mutex_t lock;          /* the store lock: ledger + idem */
    struct ledger ledger;
    struct idem_store idem;
    const struct config *cfg;      /* borrowed, lives as long as the gateway */
    struct live *_Atomic live;     /* the active profile's state; requests keep the one they
                                      arrived under */
    struct flight flight;          /* in-flight counts per route */
    struct attempts attempts;      /* attempt numbers per (route, identity) */
    struct journal journal;        /* the last 10 000 gateway requests */
    struct metrics metrics;
    uint64_t generation;           /* bumped by reset, under the store lock (an atomic store,
                                      so gateway_generation may read it without): a claim
                                      from an older generation points at freed records, and a
                                      request from one is not executed */
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
};

/* Initialise with the settings (borrowed) and apply the start profile (owned from now on).
 * `seed` is the effective seed, `instance_id` random per process. Returns 0, or -1 on out of
 * memory. Thread: main, before the daemon starts. */
int gateway_init(struct gateway *g, const struct config *cfg, struct profile *profile,
                 uint64_t seed, uint64_t instance_id);

/* Apply `p` (ownership passes to the gateway) to every request that arrives from now on;
 * requests in flight keep the state they arrived with. Returns 0, or -1 on out of memory (p
 * freed, the old profile stays). Thread: any. */
int gateway_apply(struct gateway *g, struct profile *p);

/* The state of the profile called `name` for X-Fakegate-Profile: loaded once through the
 * resolver and cached (its buckets and budgets are shared by the requests that name it).
 * Borrowed, or NULL with a message in err. Thread: any. */
struct live *gateway_named_live(struct gateway *g, const char *name, char err[ERR_LEN]);

/* POST /__admin/reset: empty the ledger, idempotency records, journal, counters, peaks
 * (restarted from the requests in flight now), attempt counts, and the state of the
 * profiles X-Fakegate-Profile named (reloaded when next named); then apply `p` (taking
 * ownership), or re-apply the active profile when p is NULL (fresh buckets, budgets,
 * windows) -- all as one step under apply_lock. Thread: any. */
void gateway_reset(struct gateway *g, struct profile *p);
/* The reset count now, without the store lock. A /v1 request is stamped with it when admitted
 * (request.generation); one whose body, queue or latency a reset runs into is answered 500
 * FAILED_INTERNAL_SYSTEM_PROCESSING without touching the new ledger, idempotency records,
 * attempt counts or counters (request.straddled_reset). Exact for the ledger and the records
 * (checked under the store lock where they are touched); for attempt counts, faults drawn and
 * reads, as of an unlocked check a few microseconds earlier. Thread: any. */
uint64_t gateway_generation(struct gateway *g);
void gateway_fini(struct gateway *g);
/* The profile in force: its name copied into `name`, and a malloc'd copy of the file it was
 * read from (the start profile, or one PUT or reset by name), or NULL when it was given inline
 * (a request body) or memory ran out. Thread: any. */
char *gateway_profile_file(struct gateway *g, char name[PROFILE_NAME_MAX + 1]);
/* Expire p if its session is over (--session-ttl), counting the transition in
 * fakegate_payments_total{status="EXPIRED"} once; true if p is EXPIRED. Thread: any, with the
 * store lock (g->lock) held. */
bool gateway_expire(struct gateway *g, struct payment *p);

/* POST /v1/payments/confirm, called once the whole body is in r->body (auth done).
 * Returns H_RESPOND (an error or an immediate result) or H_HOLD (r->hold_until_ns set).
 * Thread: worker. */
enum handler_result payments_confirm(struct gateway *g, struct request *r);

/* GET /v1/payments/{paymentKey} (r->kind RK_GET_PAYMENT), GET /v1/payments/orders/{orderId}
 * (RK_GET_ORDER; r->path_param holds the key) and GET /v1/transactions (RK_TRANSACTIONS,
 * SPEC §7 rules), after the read route's latency. H_RESPOND or H_HOLD. Thread: worker. */
enum handler_result payments_read(struct gateway *g, struct request *r);

/* The plan's next step at r->hold_until_ns: leave the queue (claim, or 409 / replay /
 * business error), or commit. With `draining` (server stopping) a queued request is answered
 * 503 SERVICE_UNAVAILABLE with Connection: close and not executed, and a processing one
 * commits at once. Never returns H_HOLD when draining. Thread: timer (or the draining thread). */
enum handler_result payments_on_deadline(struct gateway *g, struct request *r, bool draining);

/* POST /v1/payments/{paymentKey}/cancel (r->path_param): {cancelReason, cancelAmount?,
 * refundableAmount?}. Idempotency as for confirm; the checks of SPEC §7 run at the commit,
 * after the cancel route's latency. H_RESPOND or H_HOLD. Thread: worker. */
enum handler_result payments_cancel(struct gateway *g, struct request *r);

/* POST /__admin/sessions {orderId, amount, paymentKey?, orderName?}: registers a payment in
 * IN_PROGRESS (SPEC §2.1) and answers 200 with it; a paymentKey is generated in Toss's
 * tgen_yyyyMMddHHmmssXXXXX style when none is given. Always H_RESPOND. Thread: worker. */
enum handler_result payments_register_session(struct gateway *g, struct request *r);

#endif
