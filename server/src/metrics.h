/* metrics.h -- counters and the Prometheus text exposition (docs/admin.md §5 GET /metrics,
 * docs/edge-rules.md §7 "Metrics"). Counters are atomics, so any thread may count; rendering reads
 * them without a lock (each value is exact, the set is not a snapshot). */
#ifndef FAKEGATE_METRICS_H
#define FAKEGATE_METRICS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "journal.h"
#include "ledger.h"
#include "live.h"
#include "profile.h"

#define LATENCY_BUCKETS 11 /* 0.005 … 10 s, then +Inf */

struct metrics {
    atomic_ullong requests[ROUTE_LABELS][OUT_COUNT]; /* ROUTE_OTHER included */
    atomic_ullong throttled[ROUTE_COUNT];
    atomic_ullong payments[PAY_STATUS_COUNT];          /* transitions into each enum pay_status */
    atomic_ullong replays, conflicts, key_reuse;
    atomic_ullong faults[5];            /* enum fault_kind (index 0 unused) */
    atomic_ullong admin_requests;
    atomic_ullong latency_buckets[LATENCY_BUCKETS]; /* non-cumulative counts per bucket */
    atomic_ullong latency_count;
    atomic_ullong latency_sum_us;
};

/* Zero every counter (POST /__admin/reset). */
void metrics_reset(struct metrics *m);

/* One injected latency (queue + processing, ms) into the histogram. */
void metrics_observe_latency(struct metrics *m, double ms);

/* The Prometheus text of every family (one HELP and one TYPE each, a final newline), with the
 * in-flight gauges and peaks read from `f` and the idempotency records held now,
 * `idem_records` (fakegate_idempotency_records). */
void metrics_render(struct buf *b, struct metrics *m, struct flight *f, size_t idem_records);

#endif
