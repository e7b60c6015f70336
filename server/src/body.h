/* body.h -- the JSON bodies of the Toss API's POSTs (docs/api.md §2, docs/edge-rules.md §7):
 * parsed once, checked field by field, and hashed by meaning for idempotency. A rejection is
 * answered on the request as Toss does -- 400 with {code, message} -- and the message names the
 * field and where its value is, "(line L, column C)", in the same units as a JSON syntax
 * error's (columns in characters). The only module of the request path that reads JSON.
 * Thread: whichever owns the request (a worker, in its body phase); no locks, no I/O. */
#ifndef FAKEGATE_BODY_H
#define FAKEGATE_BODY_H

#include <stdbool.h>
#include <stdint.h>

#include "request.h"

struct body; /* a parsed body */

/* Parse r->body (JSON, duplicate keys rejected) as an object. Returns it (free with
 * body_free), or NULL with r answered 400 INVALID_REQUEST naming what and where. */
struct body *body_parse(struct request *r);
void body_free(struct body *b);

/* What identifies the request for the report even when its fields are invalid: its orderId
 * and paymentKey members if they are strings (else NULL; borrowed from b) and the canonical
 * hash of the whole body (docs/idempotency.md §3 "different body"). */
void body_identity(const struct body *b, const char **order_id, const char **payment_key,
                   uint64_t *hash);

/* The checks of a confirm {paymentKey, orderId, amount} (docs/api.md §2.1). True: r->payment_key
 * and r->order_id (owned), r->amount and r->body_hash are set and r->body's bytes are freed.
 * False: r is answered 400 (INVALID_PAYMENT_KEY, INVALID_ORDER_ID or INVALID_REQUEST). */
bool body_confirm(struct request *r, const struct body *b);

/* The checks of a cancel {cancelReason, cancelAmount?, refundableAmount?} (docs/api.md §2.2).
 * True: r->cancel_reason (owned), r->cancel_amount and r->refundable_amount (0 = absent) and
 * r->body_hash are set and the bytes freed. False: r is answered 400 INVALID_REQUEST. */
bool body_cancel(struct request *r, const struct body *b);

/* POST /__admin/sessions {orderId, amount, paymentKey?, orderName?} (docs/admin.md §5).
 * True: *order_id, *payment_key (NULL: generate one), *order_name (NULL: none) borrowed from
 * b, *amount set. False: r is answered 400. */
bool body_session(struct request *r, const struct body *b, const char **order_id,
                  int64_t *amount, const char **payment_key, const char **order_name);

/* Answer r 400 `code` with the Korean or English message (the request's language) and count
 * it as invalid. */
void body_invalid(struct request *r, const char *code, const char *ko, const char *en);

#endif
