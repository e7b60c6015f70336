/* stress.h -- `make stress`: keep-alive client threads drive one fakegate with confirms (resent
 * under the same key, under a new key, without a key), cancels (full and partial, resent) and
 * reads under a profile that delays, loses requests and loses responses, with resets at barrier
 * points; the ledger of every reset epoch is then checked against what the clients were answered.
 * Shared by the runner (client-tests/stress/main.c) and check_stress.c's small form; the design,
 * and why the check is exact across resets, is in stress.c's header. */
#ifndef FAKEGATE_STRESS_H
#define FAKEGATE_STRESS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "harness.h"

/* The flags the server under stress is started with (NULL-terminated; fg_opts.args): sessions
 * that outlive any run (--session-ttl) and a 10 ms consecutive-cancel window, so partial cancels
 * of one payment commit a few ms apart and the rule still fires now and then. */
extern const char *const st_server_args[];

typedef struct st_config {
    long requests;         /* client requests over the whole run, probes not counted */
    int threads;           /* client threads, each with one curl easy handle (keep-alive) */
    int payments;          /* paymentKeys pk_00000 ...; orderIds order_00000 ... */
    int window;            /* paymentKeys in play at once (the window slides over all of them) */
    int resets;            /* POST /__admin/reset this many times: resets + 1 epochs */
    long timeout_ms;       /* each client request's timeout */
    long hang_ms;          /* the profile's hangs; longer than timeout_ms */
    uint64_t seed;         /* the profile's seed (epoch e uses seed + e) and the clients' */
    bool verbose;          /* one line per epoch on stderr */
} st_config;

/* 10^6 requests, 32 threads, 10 000 paymentKeys, a window of 256, 4 resets, 150 ms timeouts
 * against 200 ms hangs, seed 42. */
void st_config_default(st_config *c);

/* What the clients sent: by kind (rows) and by the answer they got (columns). */
enum st_kind {
    ST_CONFIRM_SAME_KEY, ST_CONFIRM_NEW_KEY, ST_CONFIRM_KEYLESS, ST_CANCEL_PARTIAL,
    ST_CANCEL_FULL, ST_CANCEL_RESEND, ST_READ_BY_KEY, ST_READ_BY_ORDER, ST_PROBE_CONFIRM,
    ST_PROBE_CANCEL, ST_KINDS
};
enum st_outcome {
    ST_OK, ST_CONFLICT, ST_ALREADY_PROCESSED, ST_ALREADY_PROCESSING, ST_NOT_FOUND,
    ST_NOT_CANCELABLE, ST_ALREADY_CANCELED, ST_CONSECUTIVE, ST_NOT_CANCELABLE_AMOUNT,
    ST_TIMEOUT, ST_CONNECTION, ST_OTHER, ST_OUTCOMES
};
/* What the check can find. */
enum st_violation {
    ST_V_CHARGED_TWICE,    /* charges > 1, two approvals, two approval keys answered */
    ST_V_NOT_IN_LEDGER,    /* an answer proved a payment, approval or cancel the ledger lacks */
    ST_V_CANCEL_TWICE,     /* one cancel request (its Idempotency-Key) applied more than once */
    ST_V_STALE,            /* a read sent after an answer showed an earlier state than it */
    ST_V_LEDGER,           /* the ledger disagrees with itself, its transactions or the keys */
    ST_V_STUCK,            /* a record or payment still PROCESSING after every request ended */
    ST_V_UNEXPECTED,       /* an answer no rule allows for that request */
    ST_V_UNSETTLED,        /* the server never settled, or a reset left state behind */
    ST_VIOLATIONS
};
extern const char *const st_kind_names[ST_KINDS];
extern const char *const st_outcome_names[ST_OUTCOMES];
extern const char *const st_violation_names[ST_VIOLATIONS];

/* The outcomes of fakegate_requests_total (docs/admin.md §5, Outcomes). */
enum st_server_outcome {
    ST_SRV_OK, ST_SRV_REPLAYED, ST_SRV_CONFLICT, ST_SRV_BUSINESS_ERROR, ST_SRV_INVALID,
    ST_SRV_UNAUTHORIZED, ST_SRV_THROTTLED, ST_SRV_CAPPED, ST_SRV_DROPPED_REQUEST,
    ST_SRV_DROPPED_RESPONSE, ST_SRV_FAULT_ERROR, ST_SERVER_OUTCOMES
};

#define ST_EXAMPLES 12

typedef struct st_result {
    long by[ST_KINDS][ST_OUTCOMES];
    long requests;                 /* the clients' (probes apart) */
    long probes;
    int epochs;
    double wall_s;                 /* the whole run: requests, checks, probes, resets */
    /* Summed over the epochs' ledgers, as each stood before its probes. */
    long payments;                 /* ledger entries */
    long charges;                  /* sum of charges */
    long max_charges;              /* the largest charges of one payment (1 unless violated) */
    long left_in_progress;         /* payments whose every confirm was lost */
    long approvals_answered;       /* payments whose approval some client was answered */
    long cancels_acked;            /* cancel requests a client got a 200 for */
    long cancels_acked_applied;    /* ... found in the ledger exactly once */
    long cancels_in_ledger;        /* every cancel applied (acknowledged or not) */
    long confirm_attempts;         /* sum of the ledger's confirm_attempts */
    /* fakegate_requests_total by outcome, summed over routes and epochs (client requests only,
     * read before the probes). */
    long server_outcomes[ST_SERVER_OUTCOMES];
    long violations;
    long by_violation[ST_VIOLATIONS];
    int n_examples;
    char examples[ST_EXAMPLES][320];
} st_result;
extern const char *const st_server_outcome_names[ST_SERVER_OUTCOMES];

/* Run the stress against the server `s` (started with st_server_args; its profile is replaced
 * at once with PUT /__admin/profile). Fills *out. Returns 0 when the run went through (its
 * violations are in *out), -1 with a message in `err` when it could not (an admin call failed).
 * Thread: the caller's; it starts c->threads threads and joins them before returning. */
int st_run(const fg_server *s, const st_config *c, st_result *out, char err[FG_ERR_LEN]);

/* Print the figures of a run: requests by kind and outcome, the server's outcomes, ledger
 * totals, violations with their first examples, and `peak_rss_kb` unless negative. */
void st_print(FILE *f, const st_config *c, const st_result *r, long peak_rss_kb);


#endif
