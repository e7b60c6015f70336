/* admin.h -- /__admin routes (docs/admin.md §5) and /healthz. */
#ifndef FAKEGATE_ADMIN_H
#define FAKEGATE_ADMIN_H

#include "gateway.h"
#include "request.h"

/* GET /healthz, GET /__admin/health: {"status":"ok","pid":N,"instance":"<16 hex>",
 * "started_at":"<KST>","seed":N} (seed: gateway_seed of the applied profile). Always H_RESPOND.
 * Thread: worker. */
enum handler_result admin_health(struct gateway *g, struct request *r);

/* GET /__admin/payments[?orderId=]: {"payments":[{"payment":{...},"confirm_attempts":N,
 * "idempotency_keys":[...],"charges":N}]} in creation order; ?orderId= lists that order's only.
 * Always H_RESPOND. Thread: worker. */
enum handler_result admin_payments(struct gateway *g, struct request *r);

/* GET /__admin/profile: {"name", "applied_at", "seed" (the seed in force: gateway_seed),
 * "phase": {index, name, remaining_s} | null, "profile": <the applied profile's JSON>}.
 * Thread: worker. */
enum handler_result admin_get_profile(struct gateway *g, struct request *r);

/* PUT /__admin/profile: {"name": "slow"} (a shipped or --profiles-dir profile) or a whole
 * profile object. Applies to requests that arrive after the response; in-flight requests keep
 * theirs. Invalid → 400 INVALID_PROFILE whose message has "request body:line:column" and the
 * old profile stays. Answers like GET. Thread: worker. */
enum handler_result admin_put_profile(struct gateway *g, struct request *r);

/* POST /__admin/reset [{"profile": NAME | {...}}]: gateway_reset, then apply the given
 * profile if any. Answers like GET /__admin/profile. Thread: worker. */
enum handler_result admin_reset(struct gateway *g, struct request *r);

/* GET /__admin/requests[?orderId=&paymentKey=&idempotencyKey=&route=&status=&outcome=
 * &since_id=&limit=]: the journal entries that match every filter given, newest last, as
 * {"requests":[...],"total":N} (N: the matches still in the ring; requests: the newest `limit`
 * of them). An unknown parameter or an invalid value → 400 INVALID_REQUEST naming it
 * (journal_filter_set). Always H_RESPOND. Thread: worker. */
enum handler_result admin_requests(struct gateway *g, struct request *r);

/* GET /metrics: Prometheus text format 0.0.4. Thread: worker. */
enum handler_result admin_metrics(struct gateway *g, struct request *r);

/* GET /__admin/report: the retry-behaviour findings over every gateway request since the last
 * reset, with judged_requests, complete [, reason] and since (report_render_state). Always
 * H_RESPOND. Thread: worker. */
enum handler_result admin_report(struct gateway *g, struct request *r);

#endif
