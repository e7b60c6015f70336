/* admin.h -- /__admin routes (SPEC §5) and /healthz. */
#ifndef FAKEGATE_ADMIN_H
#define FAKEGATE_ADMIN_H

#include "payments.h"
#include "request.h"

/* GET /healthz, GET /__admin/health: {"status":"ok","pid":N,"instance":"<16 hex>",
 * "started_at":"<KST>"}. Always H_RESPOND. Thread: mhd. */
enum handler_result admin_health(struct gateway *g, struct request *r);

/* GET /__admin/payments[?orderId=]: {"payments":[{"payment":{...},"confirm_attempts":N,
 * "idempotency_keys":[...],"charges":N}]} in creation order; `order_id` NULL lists all.
 * Always H_RESPOND. Thread: mhd. */
enum handler_result admin_payments(struct gateway *g, struct request *r, const char *order_id);

#endif
