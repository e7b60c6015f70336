/* experiment.h -- the published experiments E1-E3 (issue 6), and E4 (a naive and a reference
 * webhook consumer, reconcile.h), run against a fakegate started by the black-box harness. Shared
 * by the `make experiments` runner (client-tests/experiments/) and the scaled-down assertions in
 * client-tests/tests/check_experiments.c.
 *
 * Profiles: each condition uses a shipped profile file from profiles/ (the files users get). At
 * time scale 1 it is applied by name (PUT /__admin/profile {"name": ...}: the server reads the
 * shipped file itself). At another scale the runner reads the shipped file, multiplies every
 * duration in it (keys `ms`, `*_ms`, `*_s`; `rate_per_s` is divided) by the scale and PUTs that
 * copy (dawn-peak's 1 s window becomes an S s window; it sends no Retry-After, so the server
 * accepts any period). */
#ifndef FAKEGATE_EXPERIMENT_H
#define FAKEGATE_EXPERIMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "loadgen.h"

#define EX_ERR_LEN 512
#define EX_MAX_ROWS 24
#define EX_MAX_SECONDS 300 /* E3: the longest run whose per-second arrivals a row keeps */

typedef struct ex_options {
    double scale;          /* time scale, > 0 (1: real time) */
    uint64_t seed;         /* fakegate --seed and the client's seed */
    double e1_duration_s;  /* model seconds of arrivals (published: 60) */
    double e2_duration_s;  /* (60) */
    double e3_before_s, e3_outage_s, e3_after_s; /* (30, 30, 90) */
    int e4_payments;       /* payments per E4 run (300) */
    const char *profiles_dir; /* NULL: $FAKEGATE_PROFILES, else "profiles" */
    bool verbose;
} ex_options;

/* Defaults: scale 1, seed 42, the published durations, 300 payments per E4 run. */
void ex_options_default(ex_options *o);

/* E4: one consumer over one run's deliveries, judged against the ledger. The first group is the
 * run's (the same in both consumers' rows), the second the consumer's. */
typedef struct ex_wh_result {
    long payments, partial_cancels, full_cancels;
    long events;               /* events fakegate filed (one per transition; originals) */
    long duplicates_filed, dropped; /* the profile's duplicate and drop, per the journal */
    long received;             /* deliveries the receiver got */
    long duplicates_received;  /* ... whose transmission id had already arrived */
    long reordered;            /* payments whose DONE arrived after one of their cancels */
    long wrong_status;         /* table status != the ledger's (payments in the table) */
    long stale;                /* ... still DONE in the table: a DONE that arrived after a cancel */
    long side_effect_twice;    /* payments whose side effect ran more than once */
    long side_effect_never;    /* approved payments whose side effect never ran */
    long missed;               /* payments the table does not have at all */
    long polled;               /* reference: payments the reconciler read (no webhook named them) */
    long read_backs;           /* reference: GET /v1/payments/{paymentKey} sent */
    long duplicates_ignored;   /* reference: deliveries dropped by transmission id */
    double wall_s;             /* real seconds of the run (payments, settling, both consumers) */
} ex_wh_result;

typedef struct ex_row {
    char experiment[8];
    char condition[48];
    char policy[48];
    char profile[256];        /* which file and how it was applied */
    double scale;
    uint64_t seed;
    double rate_per_s, duration_s, timeout_ms;
    lg_result res;
    long gateway_arrivals;    /* confirm requests fakegate counted (GET /metrics) */
    size_t n_phases;
    char phase_names[LG_MAX_PHASES][16];
    long phase_gateway_arrivals[LG_MAX_PHASES]; /* /metrics deltas by wall-clock phase */
    double retry_success_rate; /* saved_5xx / got_5xx, or -1 where it does not apply */
    double phase_start_s[LG_MAX_PHASES]; /* model s from the run's start to each phase */
    /* E3: confirms fakegate counted in each model second [k, k+1) of the run (GET /metrics
     * read at every whole second; the last second runs to the run's end), n_seconds of them;
     * they add up to gateway_arrivals. 0 seconds: not kept (longer than EX_MAX_SECONDS). */
    size_t n_seconds;
    long arrivals_per_s[EX_MAX_SECONDS];
    ex_wh_result wh;           /* E4 rows only (res is unused there) */
} ex_row;

typedef struct ex_table {
    ex_row rows[EX_MAX_ROWS];
    size_t n;
    double wall_s;
} ex_table;

/* Each starts its own fakegate (harness), runs every condition x policy, and appends rows.
 * Returns 0, or -1 with a message in err. */
int ex_run_e1(const ex_options *o, ex_table *t, char err[EX_ERR_LEN]);
int ex_run_e2(const ex_options *o, ex_table *t, char err[EX_ERR_LEN]);
int ex_run_e3(const ex_options *o, ex_table *t, char err[EX_ERR_LEN]);
/* E4 (experiment_e4.c): two runs, "webhook-faults" and "no-faults", each with rows "naive" and
 * "reference". */
int ex_run_e4(const ex_options *o, ex_table *t, char err[EX_ERR_LEN]);

/* The row of (experiment, condition, policy), or NULL. */
const ex_row *ex_find(const ex_table *t, const char *experiment, const char *condition,
                      const char *policy);

/* Gateway arrivals per logical request of a phase (client attribution by arrival time). */
double ex_phase_attempts_per_request(const ex_row *r, size_t phase);

/* One row per run, as the load harness prints it (header first with ex_print_header). */
void ex_print_header(FILE *f);
void ex_print_row(FILE *f, const ex_row *r);
/* E4's rows have columns of their own: ex_print_row prints them under this header. */
void ex_print_webhook_header(FILE *f);

/* --- pure helpers (unit-tested) ---------------------------------------------------------- */

/* A deep copy of profile `p` with every duration multiplied by `scale`: numeric members named
 * `ms`, `*_ms` or `*_s` (hang_ms, period_s, for_s, ...), and `rate_per_s` divided by it. Other
 * numbers (p, burst, max_in_flight, status, Retry-After values) are kept. New reference. */
json_t *ex_scale_profile(const json_t *p, double scale);

/* Requests that arrived at `route` according to a Prometheus text from GET /metrics: the sum of
 * fakegate_requests_total{route=...} (counted when a request ends) plus fakegate_in_flight
 * {route=...} (arrived, not ended: a lossy profile holds dropped requests for 30 s). -1 if
 * neither family has the route. */
long ex_metrics_arrivals(const char *text, const char *route);

#endif
