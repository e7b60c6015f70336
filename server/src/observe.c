/* observe.c -- journal, metrics and access log (see observe.h). Counting and judging happen
 * once, when the answer is handed over (or at completion for one dripped, never sent, or -- the
 * judging -- sent to a client that had finished sending), from
 * what the request recorded in r->obs; the journal entry and the in-flight counts end at
 * completion; the payment counters come from the store's events, so no commit path counts by
 * hand. */
#include "observe.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "buf.h"
#include "cluster_journal.h"
#include "cluster_limits.h"
#include "common.h"

/* The report that judges r: its tenant's, or the server's own for a request refused before a
 * key was accepted. */
static struct report *report_of(struct gateway *g, const struct request *r)
{
    return r->adm.tenant ? &r->adm.tenant->report : &g->report;
}

static void on_payment_event(void *ctx, const struct payment_event *ev)
{
    struct gateway *g = ctx;
    atomic_fetch_add(&g->metrics.payments[ev->status], 1);
    if (ev->cause && ev->status != PAY_IN_PROGRESS && ev->status != PAY_EXPIRED)
        ev->cause->obs.committed = true; /* it changed the ledger, whatever answer it gets */
}

int observe_init(struct gateway *g)
{
    return gateway_subscribe(g, on_payment_event, g);
}

void observe_arrival(struct gateway *g, struct request *r)
{
    struct journal_entry e = {.arrived_unix_us = r->arrived_unix_us,
                              .arrived_mono_ns = r->arrived_ns,
                              .path = r->raw_uri ? r->raw_uri : r->path,
                              .route = (int)r->route,
                              .idempotency_key = r->idem_key_raw, /* the identity of a request
                                                                     refused before its body */
                              .tenant = tenant_key(r->adm.tenant),
                              .fault = "none"};
    copy_cstr(e.method, sizeof e.method, r->method_str);
    r->obs.journaled = true;
    r->obs.journal_id = journal_begin(&g->journal, &e);
    if (g->cjournal)
        cluster_journal_arrived(g->cjournal);
    report_begin(report_of(g, r), &r->obs.report, r->obs.journal_id, gateway_now_us(g));
}

/* What identifies r in its journal entry, the access log and the report: the orderId and
 * paymentKey of its body or its path, and its Idempotency-Key (validated, else as received).
 * Borrowed from r. */
static void identity_of(const struct request *r, struct journal_entry *e)
{
    e->order_id = r->order_id ? r->order_id : (r->kind == RK_GET_ORDER ? r->path_param : NULL);
    e->payment_key = r->payment_key ? r->payment_key
                                    : (r->kind == RK_GET_PAYMENT ? r->path_param : NULL);
    e->idempotency_key = r->adm.idem_key ? r->adm.idem_key : r->idem_key_raw;
}

void observe_planned(struct gateway *g, struct request *r)
{
    struct journal_entry e = {
        .body_hash = r->body_hash, .attempt = r->attempt,
        .queue_latency_ms = r->queue_latency_ms, .latency_ms = r->latency_ms,
        .fault = fault_kind_name(r->fault ? r->fault->kind : FAULT_NONE)};
    identity_of(r, &e);
    e.idempotency_key = r->adm.idem_key; /* a planned request's key was validated */
    journal_update(&g->journal, r->obs.journal_id, &e);
    e.route = (int)r->route;
    e.arrived_mono_ns = r->arrived_ns;
    /* A request lost before processing never holds its payment (new_key_resend). */
    bool will_process = !(r->fault && r->fault->kind == FAULT_DROP_REQUEST);
    report_identify(report_of(g, r), &r->obs.report, &e, will_process);
}

void observe_identity(struct gateway *g, struct request *r, const char *order_id,
                      const char *payment_key, uint64_t body_hash)
{
    /* journal_update copies the strings: the entry only borrows them here. */
    struct journal_entry e = {.order_id = (char *)order_id, .payment_key = (char *)payment_key,
                              .idempotency_key = r->adm.idem_key, .body_hash = body_hash};
    journal_update(&g->journal, r->obs.journal_id, &e);
    e.route = (int)r->route;
    e.arrived_mono_ns = r->arrived_ns;
    report_identify(report_of(g, r), &r->obs.report, &e, false);
}

void observe_fault(struct gateway *g, const struct request *r)
{
    if (r->obs.fault_acted && r->fault)
        atomic_fetch_add(&g->metrics.faults[r->fault->kind], 1);
}

static void access_log(struct gateway *g, const struct request *r, struct journal_entry *e)
{
    e->arrived_unix_us = r->arrived_unix_us;
    e->arrived_mono_ns = r->arrived_ns;
    copy_cstr(e->method, sizeof e->method, r->method_str);
    e->path = r->raw_uri ? r->raw_uri : r->path;
    e->route = (int)r->route;
    identity_of(r, e);
    e->fault = fault_kind_name(r->fault ? r->fault->kind : FAULT_NONE);
    struct buf line;
    buf_init(&line);
    journal_log_line(&line, e, g->cfg->log_json);
    if (line.data)
        fwrite(line.data, 1, line.len, stderr);
    buf_fini(&line);
}

/* What it really spent of its planned latencies (ms): the queue, and the processing latency
 * if it went on into it (0 for a replay or a 409 that waited in no queue). */
static double spent_latency_ms(const struct request *r)
{
    if (!r->obs.planned)
        return 0;
    return r->queue_latency_ms + (r->obs.latency_spent ? r->latency_ms : 0);
}

static bool wire_lost(const struct response *rs)
{
    return rs->wire == WIRE_CLOSE || rs->wire == WIRE_RESET || rs->wire == WIRE_HANG;
}

/* What reached the client (docs/admin.md §5, `delivered`). At completion (`completed_ok`:
 * libmicrohttpd wrote all of it), from the socket when it could be read: the whole answer
 * written and not refused by the client's TCP is yes; refused (a reset) or cut short, whatever
 * the client's TCP acknowledged of it says partial, or no when it took none. When the answer is
 * handed over (observe_sent passes true), it is what the client will get unless its connection
 * fails: observe_sent judges only answers to clients still sending. */
static enum delivered delivered_of(const struct request *r, bool completed_ok)
{
    const struct response *rs = &r->resp;
    if (wire_lost(rs) || (!completed_ok && !r->obs.sent_ns))
        return DELIVERED_NO; /* nothing was sent, or nothing was even queued */
    bool whole = completed_ok && rs->wire != WIRE_TRUNCATE;
    const struct tcp_fate *t = &r->obs.tcp;
    if (!t->known || (completed_ok && !t->reset))
        return whole ? DELIVERED_YES : DELIVERED_PARTIAL;
    if (t->acked_bytes == 0)
        return DELIVERED_NO;
    return whole && t->acked_bytes >= t->sent_bytes ? DELIVERED_YES : DELIVERED_PARTIAL;
}

/* r's ending as the journal and the report record it. */
static struct journal_entry ending_of(const struct request *r, bool completed_ok)
{
    const struct response *rs = &r->resp;
    bool lost = wire_lost(rs);
    struct journal_entry e = {.sent_mono_ns = r->obs.sent_ns,
                              .status = lost ? 0 : rs->status, .code = lost ? NULL : rs->code,
                              .retry_after_s = lost ? 0 : rs->retry_after_s,
                              .retry_after_until_mono_ns = lost ? 0 : rs->retry_after_until_ns,
                              .outcome = r->obs.outcome, .queue_latency_ms = r->queue_latency_ms,
                              .latency_ms = r->latency_ms, .key_reuse = r->obs.key_reuse,
                              .committed = r->obs.committed,
                              .spent_latency_ms = spent_latency_ms(r),
                              .delivered = delivered_of(r, completed_ok)};
    if (!lost)
        memcpy(e.trace_id, rs->trace_id, sizeof e.trace_id);
    return e;
}

static void count(struct metrics *m, const struct request *r)
{
    const struct observe_state *o = &r->obs;
    atomic_fetch_add(&m->requests[r->route][o->outcome], 1);
    if (o->outcome == OUT_REPLAYED)
        atomic_fetch_add(&m->replays, 1);
    if (o->outcome == OUT_CONFLICT)
        atomic_fetch_add(&m->conflicts, 1);
    if (o->outcome == OUT_THROTTLED)
        atomic_fetch_add(&m->throttled[r->route], 1);
    if (o->key_reuse)
        atomic_fetch_add(&m->key_reuse, 1);
    if (o->planned) /* what was really injected: the queue, and the latency if it got there */
        metrics_observe_latency(m, spent_latency_ms(r));
}

/* The request counted in the metrics and the timelines, once. */
static void count_once(struct gateway *g, struct request *r)
{
    if (r->obs.straddled_reset || r->obs.counted)
        return;
    r->obs.counted = true;
    count(&g->metrics, r);
    enum tl_class c = tl_class_of(r->obs.outcome, r->resp.status);
    timeline_count(g->timeline, r->arrived_ns, (int)r->route, c);
    struct timeline *own = r->adm.tenant ? atomic_load(&r->adm.tenant->timeline) : NULL;
    if (own)
        timeline_count(own, r->arrived_ns, (int)r->route, c);
}

/* The whole request, counted in the metrics (`count_it`) and judged by the report (identity
 * as the journal has it), each once: when its answer is handed over, so a client that reads
 * /metrics or the report right after its answer finds it there; else at completion. A
 * response held open and lost (hang) is counted only when it ends: until then it is in
 * flight, and fakegate_requests_total + fakegate_in_flight counts each arrival once. */
static void judge(struct gateway *g, struct request *r, const struct journal_entry *end,
                  bool count_it)
{
    if (r->obs.straddled_reset)
        return;
    if (count_it)
        count_once(g, r);
    if (r->obs.judged)
        return;
    r->obs.judged = true;
    struct journal_entry q = *end;
    q.route = (int)r->route;
    q.arrived_mono_ns = r->arrived_ns;
    identity_of(r, &q);
    q.body_hash = r->body_hash;
    report_end(report_of(g, r), &r->obs.report, &q);
}

void observe_sent(struct gateway *g, struct request *r)
{
    if (!r->obs.journaled || r->resp.wire == WIRE_DRIP)
        return;
    if (r->obs.client_done && !wire_lost(&r->resp)) {
        /* A client that has finished sending may have left or only half-closed: whether the
         * answer reached it is known once it is written, so the report judges it then. */
        count_once(g, r);
        return;
    }
    struct journal_entry e = ending_of(r, true);
    e.sent_mono_ns = now_mono_ns(); /* http.c stamps sent_ns just after this */
    judge(g, r, &e, r->resp.wire != WIRE_HANG);
}

/* The request is no longer in flight. */
static void end_flight(struct gateway *g, struct request *r)
{
    if (r->adm.in_flight) {
        flight_end(&g->flight, r->route);
        flight_end(&r->adm.tenant->flight, r->route);
        if (r->adm.cap_slot)
            cluster_limits_release(g->limits, r->adm.cap_slot);
        r->adm.cap_slot = NULL;
    }
    /* A confirm whose commit never ran (a reset overtook it, the store failed) gives its
     * payment's mark back here. */
    if (r->processing_mark)
        cluster_limits_release(g->limits, r->processing_mark);
    r->processing_mark = NULL;
    r->adm.in_flight = false;
}

/* --store redis://: r's whole entry, as its journal slot now holds it, for the shared journal
 * (docs/cluster.md §11.8). `end` is its ending (ending_of). */
static void share(struct gateway *g, const struct request *r, const struct journal_entry *end)
{
    struct journal_entry e = *end;
    e.id = r->obs.journal_id;
    e.arrived_unix_us = r->arrived_unix_us;
    e.arrived_mono_ns = r->arrived_ns;
    copy_cstr(e.method, sizeof e.method, r->method_str);
    e.path = r->raw_uri ? r->raw_uri : r->path;
    e.route = (int)r->route;
    identity_of(r, &e);
    e.tenant = tenant_key(r->adm.tenant);
    e.body_hash = r->body_hash;
    e.attempt = r->attempt;
    e.fault = fault_kind_name(r->fault ? r->fault->kind : FAULT_NONE);
    cluster_journal_add(g->cjournal, &e);
}

void observe_complete(struct gateway *g, struct request *r, bool completed_ok)
{
    if (!r->obs.journaled) {
        end_flight(g, r);
        atomic_fetch_add(&g->metrics.admin_requests, 1);
        return;
    }
    struct journal_entry e = ending_of(r, completed_ok);
    e.ended_mono_ns = now_mono_ns();
    /* Counted and judged now if observe_sent did not (a dripped answer, one to a client that
     * had finished sending, or one never sent); never when a reset overtook it: its counters
     * and report were emptied. Before its journal entry and its in-flight count end, so a
     * client that waits for either finds it judged. */
    judge(g, r, &e, true);
    journal_update(&g->journal, r->obs.journal_id, &e);
    if (g->cjournal) {
        if (r->obs.straddled_reset)
            cluster_journal_skip(g->cjournal);
        else
            share(g, r, &e);
    }
    if (!g->cfg->quiet)
        access_log(g, r, &e);
    end_flight(g, r);
}
