/* payments.h -- the Toss API's payment rules (docs/api.md §2, docs/idempotency.md §3): confirm,
 * cancel, reads and transactions, and registered sessions. Each handler validates the request
 * (body.h), plans it (latencies and a fault drawn from the profile it arrived under with its
 * seeded generator) and runs the state changes at the plan's instants: arrival, leaving the
 * queue (the claim), and the commit -- each one gateway_txn section over the store. A state
 * change never waits for the client: the timer thread runs it at its deadline whether or not
 * the connection is still there. A handler never applies a way-out fault itself: the request
 * edge does, once (answer.h). */
#ifndef FAKEGATE_PAYMENTS_H
#define FAKEGATE_PAYMENTS_H

#include <stdbool.h>

#include "gateway.h"
#include "request.h"

/* POST /v1/payments/confirm, called once the whole body is in r->body (auth done).
 * Returns H_RESPOND (an error or an immediate result) or H_HOLD (r->hold_until_ns set).
 * Thread: worker. */
enum handler_result payments_confirm(struct gateway *g, struct request *r);

/* GET /v1/payments/{paymentKey} (r->kind RK_GET_PAYMENT), GET /v1/payments/orders/{orderId}
 * (RK_GET_ORDER; r->path_param holds the key) and GET /v1/transactions (RK_TRANSACTIONS,
 * docs/edge-rules.md §7 rules), after the read route's latency. H_RESPOND or H_HOLD. Thread:
 * worker. */
enum handler_result payments_read(struct gateway *g, struct request *r);

/* The plan's next step at r->hold_until_ns: leave the queue (claim, or 409 / replay /
 * business error), or commit. With `draining` (server stopping) a queued request is answered
 * 503 SERVICE_UNAVAILABLE with Connection: close and not executed, and a processing one
 * commits at once. Never returns H_HOLD when draining. Thread: timer (or the draining thread). */
enum handler_result payments_on_deadline(struct gateway *g, struct request *r, bool draining);

/* POST /v1/payments/{paymentKey}/cancel (r->path_param): {cancelReason, cancelAmount?,
 * refundableAmount?}. Idempotency as for confirm; the checks of docs/edge-rules.md §7 run at the
 * commit, after the cancel route's latency. H_RESPOND or H_HOLD. Thread: worker. */
enum handler_result payments_cancel(struct gateway *g, struct request *r);

/* POST /__admin/sessions {orderId, amount, paymentKey?, orderName?}: registers a payment in
 * IN_PROGRESS (docs/api.md §2.1) and answers 200 with it; a paymentKey is generated in Toss's
 * tgen_yyyyMMddHHmmssXXXXX style when none is given. Always H_RESPOND. Thread: worker. */
enum handler_result payments_register_session(struct gateway *g, struct request *r);

/* POST /v1/virtual-accounts (docs/virtual-accounts.md §6.6): validate, plan on the
 * virtual_account route, then as a confirm (queue, idempotency, latency) issue a virtual
 * account WAITING_FOR_DEPOSIT at the commit, or DUPLICATED_ORDER_ID. Thread: worker (the
 * commit may run on the timer thread, as every commit). */
enum handler_result payments_virtual_account(struct gateway *g, struct request *r);

/* POST /__admin/virtual-accounts/deposit {orderId | accountNumber, amount} and
 * .../deposit-error {orderId | accountNumber}: the simulated bank (docs/virtual-accounts.md
 * §6.6) in the tenant X-Fakegate-Tenant names, else the default one. 200 with the Payment; 400
 * INVALID_REQUEST (wrong amount, expired, wrong status) or 404 NOT_FOUND_PAYMENT, nothing
 * changed. Always H_RESPOND. Thread: worker. */
enum handler_result payments_admin_deposit(struct gateway *g, struct request *r);

#endif
