/* fault.h -- the pure fault decision (docs/profiles.md §4): (route settings, attempt number, the
 * request's seeded generator, the `times` budgets) → the request's plan: its two latencies and at
 * most one fault. No I/O, no locks, no clock: the same inputs always give the same plan. */
#ifndef FAKEGATE_FAULT_H
#define FAKEGATE_FAULT_H

#include <stdbool.h>
#include <stdint.h>

#include "profile.h"
#include "rng.h"

struct plan {
    double queue_latency_ms;    /* >= 0 */
    double latency_ms;          /* >= 0 */
    const struct fault *fault;  /* NULL: none. Borrowed from the profile (profiles live until
                                   exit) */
};

/* Take one use of fault `index` of the route from its `times` budget (only called for faults
 * with times >= 0). Returns false if the budget is spent. */
typedef bool (*fault_budget_fn)(int index, void *ctx);

/* Draw the plan of one request into *out. The draws, in this order: one uniform for the fault
 * (always drawn, so latencies do not depend on which faults exist), then queue_latency, then
 * latency. Only faults whose `attempts` is empty or contains `attempt` take part, their p
 * added up in profile order (the draw is made against the eligible faults only). A chosen fault
 * with a `times` budget fires only if take() grants a use; otherwise the request gets no fault.
 * `take` may be NULL when no fault has a budget. */
void fault_decide(const struct route_profile *rp, uint32_t attempt, struct rng *rng,
                  fault_budget_fn take, void *ctx, struct plan *out);

/* "error", "drop_request", "drop_response", "drip" (and "none"). */
const char *fault_kind_name(enum fault_kind k);

/* "close", "reset", "hang", "truncate". */
const char *fault_how_name(enum fault_how h);

#endif
