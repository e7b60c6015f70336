/* payments_int.h -- internal to payments.c, virtual_accounts.c and sessions.c; nothing else
 * includes it.
 * The steps of payments.c's request path that the virtual-account handlers share (answers,
 * idempotency records, the plan and the queue), and the virtual-account commit that
 * payments.c's finish() dispatches to. Each one's comment is at its definition. */
#ifndef FAKEGATE_PAYMENTS_INT_H
#define FAKEGATE_PAYMENTS_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gateway.h"
#include "request.h"
#include "store.h"

struct body;

/* payments.c */
enum handler_result pay_straddled(struct request *r);
char *pay_render_view(struct gateway *g, const struct store *s, const struct payment *p,
                      uint32_t cancels, enum pay_status st, size_t *len);
void pay_release_claim(struct store *s, struct request *r);
void pay_complete_success(struct store *s, struct request *r, struct payment *p);
void pay_business_error(struct store *s, struct request *r, const char *code,
                        const char *ko, const char *en);
enum handler_result pay_enqueue(struct gateway *g, struct request *r);
bool pay_plan_current(struct gateway *g, struct request *r, const char *identity);
bool pay_test_code(struct request *r);
enum handler_result pay_unplanned(struct gateway *g, struct request *r, struct body *b);
/* The store's bounds a request can run into (pay_refuse_bound). */
enum pay_bound { BOUND_IDEM_RECORDS, BOUND_PAYMENTS };
void pay_refuse_bound(struct request *r, const struct store *s, enum pay_bound b);
bool pay_over_bounds(struct gateway *g, struct request *r, bool creates);

/* sessions.c */
void pay_session_key(struct gateway *g, uint64_t n, char out[32]);

/* virtual_accounts.c */
enum handler_result pay_va_commit(struct gateway *g, struct request *r);

#endif
