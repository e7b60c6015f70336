/* answer.c -- a planned fault's effect on the answer (see answer.h). */
#include "answer.h"

#include <stddef.h>

#include "profile.h"

/* An error fault's response: its status, code, message (default: the table's) and body kind,
 * with Retry-After as configured ("auto" has no window to measure here: 1 s). */
static void fault_error(struct request *r, const struct fault *f)
{
    request_reject(r, f->status, f->code, f->message, f->body, &f->retry_after, 1, 1.0);
    r->obs.outcome = OUT_FAULT_ERROR;
}

static enum wire how_to_wire(enum fault_how how)
{
    switch (how) {
    case HOW_RESET:
        return WIRE_RESET;
    case HOW_HANG:
        return WIRE_HANG;
    case HOW_TRUNCATE:
        return WIRE_TRUNCATE;
    case HOW_CLOSE:
        break;
    }
    return WIRE_CLOSE;
}

static bool acts_before(const struct fault *f)
{
    return f->kind == FAULT_DROP_REQUEST || (f->kind == FAULT_ERROR && f->when_before);
}

bool answer_fault_before(struct request *r)
{
    const struct fault *f = r->fault;
    if (!f || !acts_before(f))
        return false;
    if (f->kind == FAULT_DROP_REQUEST) {
        request_respond(r, 0, NULL, 0);
        r->resp.wire = how_to_wire(f->how);
        r->resp.wire_ms = f->hang_ms;
        r->obs.outcome = OUT_DROPPED_REQUEST;
    } else {
        fault_error(r, f);
    }
    r->obs.fault_acted = true;
    return true;
}

void answer_way_out(struct request *r)
{
    const struct fault *f = r->fault;
    if (!f || acts_before(f) || r->resp.internal)
        return;
    if (f->kind == FAULT_ERROR) {
        fault_error(r, f);
    } else if (f->kind == FAULT_DROP_RESPONSE) {
        r->resp.wire = how_to_wire(f->how);
        r->resp.wire_ms = f->hang_ms;
        r->obs.outcome = OUT_DROPPED_RESPONSE;
    } else if (f->kind == FAULT_DRIP) {
        r->resp.wire = WIRE_DRIP;
        r->resp.wire_ms = f->duration_ms;
    }
    r->obs.fault_acted = true;
}

bool answer_fault_uncommits(const struct request *r)
{
    const struct fault *f = r->fault;
    return f && f->kind == FAULT_ERROR && !f->when_before && !f->commit;
}
