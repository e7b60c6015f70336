/* observe.h -- what happened, for the people and tests watching: the journal
 * (GET /__admin/requests, and what the report judges), the metrics (GET /metrics) and the
 * access log (--log), in the role h2o's logger plays. The request edge calls it at a
 * request's arrival and completion, payments.c when a request is planned, and the store's
 * events reach it as a gateway subscriber (a payment's status changes). Docs: docs/admin.md §5,
 * docs/cli.md §1 (--log). */
#ifndef FAKEGATE_OBSERVE_H
#define FAKEGATE_OBSERVE_H

#include <stdbool.h>
#include <stdint.h>

#include "gateway.h"
#include "request.h"

/* Subscribe to g's payment events (payments_total{status}, and the causing request's
 * `committed`). 0, or -1 when g has no room for a subscriber. Thread: main, before start. */
int observe_init(struct gateway *g);

/* A gateway (/v1 or unknown) request's headers are in and routed: its journal entry begins
 * (pending). Thread: worker. */
void observe_arrival(struct gateway *g, struct request *r);

/* r's plan was drawn: its identity, attempt, latencies and fault go into its entry. */
void observe_planned(struct gateway *g, struct request *r);

/* r was answered before a plan (a test code, an invalid field): what identifies it (strings
 * copied; any may be NULL) and its canonical body hash go into its entry, for the report's
 * retried_4xx. */
void observe_identity(struct gateway *g, struct request *r, const char *order_id,
                      const char *payment_key, uint64_t body_hash);

/* r's planned fault has just acted on its answer (r->obs.fault_acted): count it in
 * fakegate_faults_total{kind} now, not when a hang ends. */
void observe_fault(struct gateway *g, const struct request *r);

/* r's answer is being handed to libmicrohttpd now (r->obs.client_done already looked at), or
 * lost on the wire: it is counted in the metrics and judged by the report here, so a resend,
 * or a read of /metrics, that comes right after the client read its answer finds it there
 * (docs/admin.md §5). An answer dripped over time (WIRE_DRIP) is counted and judged at
 * completion instead: the client has it only then. One to a client that had finished sending
 * is counted here and judged at completion, when the socket has said whether it reached the
 * client. Thread: worker. */
void observe_sent(struct gateway *g, struct request *r);

/* r's response has ended (or its connection closed); `completed_ok`: libmicrohttpd wrote all
 * of it, and r->obs.tcp holds what the socket said of it. Counts and judges it if observe_sent
 * did not (unless a reset overtook it: the counters it belonged to are gone), completes its
 * journal entry with what reached the client (`delivered`), writes its access-log line, and
 * then ends its in-flight count. Admin calls are only counted in
 * fakegate_admin_requests_total. Thread: worker (completion callback). */
void observe_complete(struct gateway *g, struct request *r, bool completed_ok);

#endif
