/* metrics.c -- counters and Prometheus text (see metrics.h). Label values here are fixed
 * identifiers (route, outcome, status, kind), so they never need escaping. */
#include "metrics.h"

#include <string.h>

static const double bounds[LATENCY_BUCKETS] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                               0.5,   1,    2.5,   5,    10};

void metrics_reset(struct metrics *m)
{
    /* Atomic stores, not memset: other threads count while a reset runs. The struct holds
     * nothing but atomic_ullong counters, so it is walked as an array of them. */
    _Static_assert(sizeof(struct metrics) % sizeof(atomic_ullong) == 0, "counters only");
    atomic_ullong *c = (atomic_ullong *)m;
    for (size_t i = 0; i < sizeof *m / sizeof *c; i++)
        atomic_store_explicit(&c[i], 0, memory_order_relaxed);
}

void metrics_observe_latency(struct metrics *m, double ms)
{
    double s = ms / 1000.0;
    for (int i = 0; i < LATENCY_BUCKETS; i++)
        if (s <= bounds[i]) {
            atomic_fetch_add(&m->latency_buckets[i], 1);
            break;
        }
    atomic_fetch_add(&m->latency_count, 1);
    atomic_fetch_add(&m->latency_sum_us, (unsigned long long)(ms * 1000.0 + 0.5));
}

/* A route's label: the profile's name, or "other" (ROUTE_OTHER). */
static const char *route_label(int r)
{
    return r == ROUTE_OTHER ? "other" : route_name((enum route_id)r);
}

static void family(struct buf *b, const char *name, const char *type, const char *help)
{
    buf_addf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void metrics_render(struct buf *b, struct metrics *m, struct flight *f, size_t idem_records)
{
    family(b, "fakegate_requests_total", "counter",
           "Gateway requests by route and outcome (admin, health and metrics excluded).");
    for (int r = 0; r < ROUTE_LABELS; r++)
        for (int o = 0; o < OUT_COUNT; o++)
            buf_addf(b, "fakegate_requests_total{route=\"%s\",outcome=\"%s\"} %llu\n",
                     route_label(r), outcome_name((enum outcome)o),
                     atomic_load(&m->requests[r][o]));
    family(b, "fakegate_in_flight", "gauge",
           "Requests inside fakegate now, from arrival to the end of the response.");
    for (int r = 0; r < ROUTE_COUNT; r++)
        buf_addf(b, "fakegate_in_flight{route=\"%s\"} %ld\n", route_name((enum route_id)r),
                 atomic_load(&f->in_flight[r]));
    family(b, "fakegate_in_flight_peak", "gauge",
           "The largest number of requests in flight at once since the last reset (exact).");
    for (int r = 0; r < ROUTE_COUNT; r++)
        buf_addf(b, "fakegate_in_flight_peak{route=\"%s\"} %ld\n", route_name((enum route_id)r),
                 atomic_load(&f->peak[r]));
    family(b, "fakegate_payments_total", "counter", "Payment status transitions.");
    for (int s = 0; s < PAY_STATUS_COUNT; s++)
        buf_addf(b, "fakegate_payments_total{status=\"%s\"} %llu\n",
                 pay_status_name((enum pay_status)s), atomic_load(&m->payments[s]));
    family(b, "fakegate_idempotent_replays_total", "counter",
           "Responses replayed from a stored Idempotency-Key record.");
    buf_addf(b, "fakegate_idempotent_replays_total %llu\n", atomic_load(&m->replays));
    family(b, "fakegate_idempotency_conflicts_total", "counter",
           "409 IDEMPOTENT_REQUEST_PROCESSING answers.");
    buf_addf(b, "fakegate_idempotency_conflicts_total %llu\n", atomic_load(&m->conflicts));
    family(b, "fakegate_idempotency_key_reuse_total", "counter",
           "An Idempotency-Key sent again with a different body.");
    buf_addf(b, "fakegate_idempotency_key_reuse_total %llu\n", atomic_load(&m->key_reuse));
    family(b, "fakegate_idempotency_records", "gauge",
           "Idempotency-Key records held now, every tenant's (expired ones go within a second).");
    buf_addf(b, "fakegate_idempotency_records %zu\n", idem_records);
    family(b, "fakegate_faults_total", "counter", "Injected faults that fired, by kind.");
    for (int k = FAULT_ERROR; k <= FAULT_DRIP; k++)
        buf_addf(b, "fakegate_faults_total{kind=\"%s\"} %llu\n",
                 fault_kind_name((enum fault_kind)k), atomic_load(&m->faults[k]));
    family(b, "fakegate_throttled_total", "counter", "Requests refused by a throttle.");
    for (int r = 0; r < ROUTE_COUNT; r++)
        buf_addf(b, "fakegate_throttled_total{route=\"%s\"} %llu\n", route_name((enum route_id)r),
                 atomic_load(&m->throttled[r]));
    family(b, "fakegate_admin_requests_total", "counter",
           "Admin, health and metrics requests.");
    buf_addf(b, "fakegate_admin_requests_total %llu\n", atomic_load(&m->admin_requests));
    family(b, "fakegate_injected_latency_seconds", "histogram",
           "Injected latency per request: queue_latency + latency.");
    unsigned long long cum = 0;
    for (int i = 0; i < LATENCY_BUCKETS; i++) {
        cum += atomic_load(&m->latency_buckets[i]);
        buf_addf(b, "fakegate_injected_latency_seconds_bucket{le=\"%g\"} %llu\n", bounds[i], cum);
    }
    unsigned long long count = atomic_load(&m->latency_count);
    buf_addf(b, "fakegate_injected_latency_seconds_bucket{le=\"+Inf\"} %llu\n", count);
    buf_addf(b, "fakegate_injected_latency_seconds_sum %.6f\n",
             (double)atomic_load(&m->latency_sum_us) / 1e6);
    buf_addf(b, "fakegate_injected_latency_seconds_count %llu\n", count);
}
