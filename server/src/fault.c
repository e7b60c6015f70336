/* fault.c -- the fault decision (see fault.h). Pure. */
#include "fault.h"

#include <stddef.h>

static bool eligible(const struct fault *f, uint32_t attempt)
{
    if (f->n_attempts == 0)
        return true;
    for (size_t i = 0; i < f->n_attempts; i++)
        if (f->attempts[i] == attempt)
            return true;
    return false;
}

void fault_decide(const struct route_profile *rp, uint32_t attempt, struct rng *rng,
                  fault_budget_fn take, void *ctx, struct plan *out)
{
    double u = rng_uniform01(rng);
    out->fault = NULL;
    double acc = 0;
    for (size_t i = 0; i < rp->n_faults; i++) {
        const struct fault *f = &rp->faults[i];
        if (!eligible(f, attempt))
            continue;
        acc += f->p;
        if (u < acc) {
            if (f->times < 0 || (take && take((int)i, ctx)))
                out->fault = f;
            break;
        }
    }
    out->queue_latency_ms = latency_sample_ms(&rp->queue_latency, rng);
    out->latency_ms = latency_sample_ms(&rp->latency, rng);
}

const char *fault_kind_name(enum fault_kind k)
{
    static const char *const names[] = {"none", "error", "drop_request", "drop_response", "drip"};
    return names[k];
}

const char *fault_how_name(enum fault_how h)
{
    static const char *const names[] = {"close", "reset", "hang", "truncate"};
    return names[h];
}
