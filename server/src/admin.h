/* admin.h -- /__admin routes (docs/admin.md §5) and /healthz. */
#ifndef FAKEGATE_ADMIN_H
#define FAKEGATE_ADMIN_H

#include "gateway.h"
#include "request.h"

/* The tenant an admin call names with X-Fakegate-Tenant (docs/tenants.md §9) into *t: NULL
 * when it names none (the whole server). An unknown one is created when `create` (a PUT or a
 * reset may name a tenant before its first request), else r is answered 404 NOT_FOUND; a key
 * the server would not accept is 400 INVALID_REQUEST. False when r was answered. Thread:
 * worker. */
bool admin_tenant(struct gateway *g, struct request *r, bool create, struct tenant **t);

/* Answer r with `status` and b's bytes as the body (b is consumed: its buffer passes to the
 * response); out of memory while b was built (b->oom) → 500 FAILED_INTERNAL_SYSTEM_PROCESSING
 * instead. Always H_RESPOND. Thread: worker. */
enum handler_result admin_respond(struct request *r, int status, struct buf *b);

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

/* A profile from the text (len bytes) of a PUT /__admin/profile body: {"name": "x"} alone names
 * a shipped or --profiles-dir profile; anything else is a whole profile. 0 with *out (caller
 * owns), or -1 with the message (with "request body:line:column") in err. Thread: any. */
int admin_parse_profile(struct gateway *g, const char *text, size_t len, struct profile **out,
                        char err[ERR_LEN]);

/* POST /__admin/reset [{"profile": NAME | {...}}]: gateway_reset, then apply the given
 * profile if any. Answers like GET /__admin/profile. Thread: worker. */
enum handler_result admin_reset(struct gateway *g, struct request *r);

/* GET /__admin/requests[?orderId=&paymentKey=&idempotencyKey=&route=&status=&outcome=
 * &since_id=&limit=]: the journal entries that match every filter given, newest last, as
 * {"requests":[...],"total":N} (N: the matches still in the ring; requests: the newest `limit`
 * of them). An unknown parameter or an invalid value → 400 INVALID_REQUEST naming it
 * (journal_filter_set). Always H_RESPOND. Thread: worker. */
enum handler_result admin_requests(struct gateway *g, struct request *r);

/* More query parameters than GET /__admin/requests has filters: one is repeated. */
#define ADMIN_MAX_FILTERS 16

/* The filters of GET /__admin/requests from r->query into *f (reset first, `limit` allowed up
 * to max_limit: the journal's size, --journal-size): each parameter name=value
 * (percent-decoded by request_query) through journal_filter_set. Returns how many
 * values it stored in `values` (caller frees each, also on failure); err is "" when every
 * parameter is a filter, else the message of the first that is not (no value, more than
 * ADMIN_MAX_FILTERS, an unknown name, an invalid value). Out of memory reads as a missing
 * value. Pure; thread: any. */
size_t admin_requests_filter(const struct request *r, size_t max_limit, struct journal_filter *f,
                             char *values[ADMIN_MAX_FILTERS], char err[ERR_LEN]);

/* GET /metrics: Prometheus text format 0.0.4. Thread: worker. */
enum handler_result admin_metrics(struct gateway *g, struct request *r);

/* GET /__admin/ui (the live page) and /__admin/ui/{file} (its script, styles and the vendored
 * uPlot with its licence), from the binary (admin_ui.c); no admin token needed for these, as
 * they hold no data. An unknown file → 404 NOT_FOUND. Thread: worker. */
enum handler_result admin_ui(struct gateway *g, struct request *r);

/* GET /__admin/timeline[?seconds=N]: the live page's data (docs/admin.md §5) -- per second of
 * the last N (1 ... 600, default 120) the requests by route and outcome class, the schedule
 * phase and the routes whose throttle window was closed; the routes in flight with their
 * peaks and caps; the profile, seed and phase; for the server scope the tenants' keys (first
 * 100). With X-Fakegate-Tenant, that tenant's (its counts start the first time it is asked
 * for: since_ms). A bad N → 400 INVALID_REQUEST. Thread: worker. */
enum handler_result admin_timeline(struct gateway *g, struct request *r);

/* GET /__admin/report: the retry-behaviour findings over every gateway request since the last
 * reset, with judged_requests, complete [, reason] and since (report_render_state). Always
 * H_RESPOND. Thread: worker. */
enum handler_result admin_report(struct gateway *g, struct request *r);

/* --- webhooks and the gateway clock (admin_webhooks.c; docs/webhooks.md §6) --- */

/* GET /__admin/webhooks: {"urls": [...], "success": "200"|"2xx"}. PUT with that object
 * replaces the receivers (each URL checked by webhook_url_check; at most 16; success default
 * "200"); invalid → 400 INVALID_REQUEST naming the field, and the receivers stay. Thread:
 * worker. */
enum handler_result admin_webhooks(struct gateway *g, struct request *r);

/* GET /__admin/webhooks/deliveries[?paymentKey=&orderId=&status=&limit=]: {"deliveries":
 * [...]} oldest first, the newest `limit` (1 ... 10000) matches; an unknown parameter or a bad
 * value → 400 INVALID_REQUEST naming it. Thread: worker. */
enum handler_result admin_deliveries(struct gateway *g, struct request *r);

/* POST /__admin/webhooks/deliveries/{id}/resend: webhooks_resend; 200 with the delivery as it
 * is before the resend, or 404 NOT_FOUND for an unknown id. Thread: worker. */
enum handler_result admin_delivery_resend(struct gateway *g, struct request *r);

/* GET /__admin/clock: {"now": "yyyy-MM-ddTHH:mm:ss+09:00", "offset_s": N}. POST {"advance_s":
 * N} (seconds >= 0, fractions to the µs; at most 100 years ahead in all) moves it forward
 * (gateway_clock_advance) and answers like GET; anything else → 400 INVALID_REQUEST. Thread:
 * worker. */
enum handler_result admin_clock(struct gateway *g, struct request *r);

#endif
