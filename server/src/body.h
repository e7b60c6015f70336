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

/* Default of --max-json-depth: how deeply a request body may nest objects and arrays. The
 * deepest body the API takes is 2 (a cancel's refundReceiveAccount). */
#define BODY_MAX_JSON_DEPTH_DEFAULT 32
/* The largest --max-json-depth: jansson's own parsing depth (JSON_PARSER_MAX_DEPTH, 2048). */
#define BODY_MAX_JSON_DEPTH_MAX 2048

/* Parse r->body (JSON, duplicate keys rejected) as an object. A body nested deeper than
 * `max_depth` (--max-json-depth; 0: BODY_MAX_JSON_DEPTH_DEFAULT) is refused on its raw bytes,
 * before any tree is built. Returns it (free with body_free), or NULL with r answered 400
 * INVALID_REQUEST naming what and where. */
struct body *body_parse(struct request *r, size_t max_depth);
void body_free(struct body *b);

/* What identifies the request for the report even when its fields are invalid: its orderId
 * and paymentKey members if they are strings (else NULL; borrowed from b) and the canonical
 * hash of the whole body (docs/idempotency.md §3 "different body"). */
void body_identity(const struct body *b, const char **order_id, const char **payment_key,
                   uint64_t *hash);

/* The checks of a confirm {paymentKey, orderId, amount} (docs/api.md §2.1), or of the older
 * approve path's {orderId, amount} when `path_key` (the paymentKey from the path of
 * POST /v1/payments/{paymentKey}) is not NULL: a paymentKey in that body must then equal it.
 * True: r->payment_key and r->order_id (owned), r->amount and r->body_hash are set and
 * r->body's bytes are freed. False: r is answered 400 (INVALID_PAYMENT_KEY, INVALID_ORDER_ID or
 * INVALID_REQUEST). */
bool body_confirm(struct request *r, const struct body *b, const char *path_key);

/* The checks of a cancel {cancelReason, cancelAmount?, refundableAmount?,
 * refundReceiveAccount? {bank, accountNumber, holderName}} (docs/api.md §2.2,
 * docs/virtual-accounts.md §6.6). True: r->cancel_reason (owned), r->cancel_amount and
 * r->refundable_amount (0 = absent), r->refund_* (owned, or NULL when absent) and r->body_hash
 * are set and the bytes freed. False: r is answered 400 INVALID_REQUEST (an invalid refund
 * account: INVALID_REFUND_ACCOUNT_INFO). */
bool body_cancel(struct request *r, const struct body *b);

/* The two-digit code of a bank as Toss's bank code table names it (docs.tosspayments.com,
 * "은행 코드"): the code itself ("88"), its Korean name ("신한" or "신한은행") or its English
 * name ("SHINHAN"). NULL when unknown. The list is docs/virtual-accounts.md §6.6's. */
const char *body_bank_code(const char *name);

/* The checks of POST /v1/virtual-accounts {amount, orderId, orderName, customerName, bank,
 * validHours? | dueDate?, customerEmail?} (docs/virtual-accounts.md §6.6), dueDate read in
 * Korea time unless it has an offset and judged against now_us (the gateway clock). True:
 * r->order_id, r->order_name, r->va (owned: bank, customer, dueDate if given), r->va_valid_us
 * (the due date's distance from the commit when no dueDate was given), r->amount and
 * r->body_hash set. False: r is answered 400 (INVALID_REQUEST, INVALID_ORDER_ID, INVALID_BANK,
 * EXCEED_MAX_DUE_DATE, INVALID_VALID_HOURS_WITH_DUE_DATE_AND_SINGLE). */
bool body_virtual_account(struct request *r, const struct body *b, int64_t now_us);

/* POST /__admin/virtual-accounts/deposit[-error] {orderId | accountNumber, amount?}
 * (docs/virtual-accounts.md §6.6): *order_id or *account_number (the other NULL; borrowed from
 * b), *amount (0 when absent) set. False: r is answered 400 INVALID_REQUEST. */
bool body_deposit(struct request *r, const struct body *b, const char **order_id,
                  const char **account_number, int64_t *amount);

/* POST /__admin/sessions {orderId, amount, paymentKey?, orderName?} (docs/admin.md §5).
 * True: *order_id, *payment_key (NULL: generate one), *order_name (NULL: none) borrowed from
 * b, *amount set. False: r is answered 400. */
bool body_session(struct request *r, const struct body *b, const char **order_id,
                  int64_t *amount, const char **payment_key, const char **order_name);

/* Answer r 400 `code` with the Korean or English message (the request's language) and count
 * it as invalid. */
void body_invalid(struct request *r, const char *code, const char *ko, const char *en);

#endif
