/* loadgen.h -- an open-loop load harness built on retry.h and libcurl's multi interface.
 *
 * Logical confirms ("requests") arrive at `rate_per_s` for `duration_s`, whatever happens to the
 * earlier ones (open loop). Each gets one orderId, one paymentKey and one Idempotency-Key that
 * every resend reuses. Each attempt takes a slot of the client-side concurrency cap (a first
 * attempt that finds none fails at once; a resend that finds fewer than `resend_min_free` free
 * slots is skipped and counted), passes the circuit breaker, and has its own timeout. The retry
 * decision is retry.h's classification narrowed by the policy's mask; the delay is its backoff
 * (optionally at least Retry-After). A logical request ends SUCCESS, FAILED or UNKNOWN; after the
 * run has settled the reconciler reads GET /v1/payments/orders/{orderId} for every UNKNOWN.
 *
 * Time scale: every duration given here is in *model* time (what the experiment describes); the
 * harness runs it in real time multiplied by `time_scale` (arrival gaps, timeouts, backoff, the
 * breaker's window and open time, settle time, event times). Reported latencies are converted back
 * to model milliseconds. Counts do not depend on the scale: 30/s for 60 s is 1 800 requests at any
 * scale.
 *
 * Single-threaded: lg_run drives everything from one curl multi loop in the calling thread. */
#ifndef FAKEGATE_LOADGEN_H
#define FAKEGATE_LOADGEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "retry.h"

#define LG_MAX_PHASES 8
#define LG_ERR_LEN 256

typedef struct lg_policy {
    const char *name;
    int max_attempts;          /* attempts per logical request including the first, >= 1 */
    unsigned retry_on;         /* rc_class mask of what to retry; 0: RC_RETRYABLE_DEFAULT */
    rc_backoff backoff;        /* model ms */
    bool honour_retry_after;   /* wait at least Retry-After (read in real seconds) ... */
    double retry_after_cap_ms; /* ... but never more than this (model ms; 0: no cap) */
    int cap;                   /* client concurrency cap on gateway calls; 0: none */
    int resend_min_free;       /* resend only if at least this many cap slots are free; 0: any */
    bool breaker;              /* a circuit breaker in front of every attempt */
    int breaker_failures;      /* F */
    double breaker_window_ms;  /* W (model) */
    double breaker_open_ms;    /* D (model) */
} lg_policy;

/* Something to do at a model time during the run (e.g. switch the gateway's profile). Runs
 * inside the loop, so keep it short (an admin call). */
typedef struct lg_event {
    double at_s;
    void (*fn)(void *ctx, int index);
    void *ctx;
} lg_event;

typedef struct lg_config {
    const char *base_url;      /* "http://127.0.0.1:PORT" */
    const char *auth_header;   /* "Authorization: Basic ..." */
    const char *id_prefix;     /* orderId = "<prefix>-<6 digits>"; keep <= 40 characters */
    double rate_per_s;         /* model arrivals per second */
    double duration_s;         /* model seconds of arrivals */
    bool poisson;              /* exponential gaps instead of even spacing */
    double timeout_ms;         /* model per-call timeout */
    double time_scale;         /* real = model * time_scale; 0 means 1 */
    uint64_t seed;             /* client-side randomness (jitter, Poisson gaps) */
    long long amount;          /* KRW per payment; 0 means 15 000 */
    lg_policy policy;
    bool reconcile;            /* read every UNKNOWN once the run settled */
    double settle_s;           /* model seconds to wait after the last call before reading */
    /* Phases for per-phase statistics, by arrival time: phase k = [starts[k], starts[k+1]). */
    double phase_starts[LG_MAX_PHASES];
    size_t n_phases;
    const lg_event *events;    /* sorted by at_s */
    size_t n_events;
    bool reuse_connections;    /* keep-alive between attempts; default (false): a new connection
                                  per attempt, because libcurl silently resends a request whose
                                  reused connection is reset before answering, which would add
                                  gateway arrivals no policy decided */
    bool verbose;              /* progress on stderr */
} lg_config;

typedef struct lg_phase {
    long requests;
    long attempts_sent;        /* attempts that left the client (reached the gateway or tried) */
    long successes;
    long failed;
    long unknown;              /* before reconciliation */
    long breaker_rejected;
} lg_phase;

typedef struct lg_result {
    long requests;
    long successes;            /* final, after reconciliation */
    long failed;               /* final, after reconciliation */
    long failed_cap;           /* first attempt found no slot */
    long failed_breaker;       /* first attempt refused by the open breaker */
    long failed_declined;      /* a 4xx answer (never retried) */
    long failed_refused;       /* 503/429 after the last attempt */
    long failed_reconciled;    /* UNKNOWN that the reconciler found not charged */
    long unknown;              /* UNKNOWN before reconciliation */
    long unknown_resolved;     /* ... that the reconciler settled (success + failed_reconciled) */
    long unknown_resolved_success;
    long unknown_unresolved;   /* reads that never gave a verdict: counted as failed */
    long attempts_sent;
    long resends_sent;
    long resends_skipped;      /* budget: fewer than resend_min_free free slots */
    long resends_no_slot;      /* a resend that found no slot at all */
    long got_5xx;              /* logical requests that got at least one 5xx answer */
    long saved_5xx;            /* ... that still ended SUCCESS without the reconciler */
    long conflicts;            /* 409 IDEMPOTENT_REQUEST_PROCESSING answers */
    long timeouts;             /* attempts that timed out */
    long breaker_opens;
    long breaker_rejected;     /* attempts (first or retry) refused by the breaker */
    double p50_ms, p95_ms;     /* model ms from arrival to the last attempt's end, for requests
                                  that reached the gateway */
    double wall_s;             /* real seconds the run took, reconciliation included */
    lg_phase phases[LG_MAX_PHASES];
} lg_result;

/* Run one load. Returns 0, or -1 with a message in err. */
int lg_run(const lg_config *cfg, lg_result *out, char err[LG_ERR_LEN]);

double lg_failure_rate(const lg_result *r);

/* CLOCK_MONOTONIC in ns. */
int64_t lg_now_ns(void);

#endif
