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
#include "ledger.h"
#include "live.h"
#include "profile.h"
#include "request.h"

struct gateway {
    pthread_mutex_t lock;          /* the store lock: ledger + idem */
    struct ledger ledger;
    struct idem_store idem;
    const struct config *cfg;      /* borrowed, lives as long as the gateway */
    const struct profile *profile; /* borrowed; the active profile */
    struct live *_Atomic live;     /* the active profile's state; requests keep the one they
                                      arrived under */
    struct flight flight;          /* in-flight counts per route */
    struct attempts attempts;      /* attempt numbers per (route, identity) */
    uint64_t seed;                 /* effective seed (--seed, the profile's, or random) */
    uint64_t instance_id;          /* random per process */
    int64_t started_unix_us;
};

/* Initialise with the settings and the active profile (both borrowed), applying the profile
 * now. `seed` is the effective seed, `instance_id` random per process. Returns 0, or -1 on out
 * of memory. Thread: main, before the daemon starts. */
int gateway_init(struct gateway *g, const struct config *cfg, const struct profile *profile,
                 uint64_t seed, uint64_t instance_id);
void gateway_fini(struct gateway *g);

/* POST /v1/payments/confirm, called once the whole body is in r->body (auth done).
 * Returns H_RESPOND (an error or an immediate result) or H_HOLD (r->hold_until_ns set).
 * Thread: mhd. */
enum handler_result payments_confirm(struct gateway *g, struct request *r);

/* GET /v1/payments/{paymentKey} (r->kind RK_GET_PAYMENT), GET /v1/payments/orders/{orderId}
 * (RK_GET_ORDER; r->path_param holds the key) and GET /v1/transactions (RK_TRANSACTIONS,
 * SPEC §7 rules), after the read route's latency. H_RESPOND or H_HOLD. Thread: mhd. */
enum handler_result payments_read(struct gateway *g, struct request *r);

/* The plan's next step at r->hold_until_ns: leave the queue (claim, or 409 / replay /
 * business error), or commit. With `draining` (server stopping) a queued request is answered
 * 503 SERVICE_UNAVAILABLE with Connection: close and not executed, and a processing one
 * commits at once. Never returns H_HOLD when draining. Thread: timer (or the draining thread). */
enum handler_result payments_on_deadline(struct gateway *g, struct request *r, bool draining);

/* POST /v1/payments/{paymentKey}/cancel (r->path_param): {cancelReason, cancelAmount?,
 * refundableAmount?}. Idempotency as for confirm; the checks of SPEC §7 run at the commit,
 * after the cancel route's latency. H_RESPOND or H_HOLD. Thread: mhd. */
enum handler_result payments_cancel(struct gateway *g, struct request *r);

/* POST /__admin/sessions {orderId, amount, paymentKey?, orderName?}: registers a payment in
 * IN_PROGRESS (SPEC §2.1) and answers 200 with it; a paymentKey is generated in Toss's
 * tgen_yyyyMMddHHmmssXXXXX style when none is given. Always H_RESPOND. Thread: mhd. */
enum handler_result payments_register_session(struct gateway *g, struct request *r);

#endif
