/* answer.h -- what a request's planned fault does to its answer (docs/profiles.md §4 "Faults"):
 * at the fault decision, drop_request and an error with "when": "before" replace the request's
 * processing; on the way out, an error with "when": "after", drop_response, truncate and drip
 * act on whatever answer the request got (a success, a 409, a replay, a business error).
 * The way-out effect is applied once, by the request edge (router.c), where the answer leaves
 * for http.c. Pure: no store, no lock. Thread: whichever owns the request. */
#ifndef FAKEGATE_ANSWER_H
#define FAKEGATE_ANSWER_H

#include <stdbool.h>

#include "request.h"

/* At the fault decision: true if r's fault answered it (dropped, or an error at once) -- the
 * request then touches no idempotency record and no payment. */
bool answer_fault_before(struct request *r);

/* On the way out: apply r's fault to the answer in r->resp, unless it is fakegate's own
 * (resp.internal) or the fault acted before. Call exactly once per answer. */
void answer_way_out(struct request *r);

/* True when r's fault is an error after the latency that does not commit: the gateway never
 * processed the request, so the commit must not happen and its claim is released. */
bool answer_fault_uncommits(const struct request *r);

#endif
