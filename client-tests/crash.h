/* crash.h -- `make crash-test` and check_state_file's small form: client threads drive one
 * fakegate started with --state-file through confirms and two cancels per paymentKey, each
 * resent under its Idempotency-Key until it is answered, while a coordinator kills fakegate
 * with SIGKILL at random moments and starts it again on the same state file. Afterwards the
 * ledger is compared with every answer the clients received (docs/state-file.md §10.4). */
#ifndef FAKEGATE_CRASH_H
#define FAKEGATE_CRASH_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "harness.h"

typedef struct cr_config {
    int threads;           /* client threads, each with its own paymentKeys and curl handle */
    int payments;          /* paymentKeys crash_00000 ...: a confirm and two cancels each */
    int kills;             /* SIGKILLs, each followed by a restart on the same state file */
    long min_gap_ms;       /* a kill comes min_gap_ms .. max_gap_ms after the restart before */
    long max_gap_ms;
    long hold_ms;          /* the profile holds each confirm and cancel 0 .. hold_ms (uniform),
                              so kills land between a claim and its commit */
    bool fsync_always;     /* --state-fsync always (default never) */
    uint64_t seed;         /* the kill times' and the profile's */
    bool verbose;          /* one line per kill on stderr */
} cr_config;

/* 32 threads, 5000 paymentKeys, 20 kills 150-400 ms apart, holds up to 20 ms, seed 7. */
void cr_config_default(cr_config *c);

typedef struct cr_result {
    long requests;         /* every request sent, resends included */
    long unanswered;       /* of them, those cut off: reset or closed without an answer */
    long refused;          /* those refused: fakegate was down (libcurl's own retry of a
                              request cut off on a kept-alive connection counts here) */
    long answered_200;     /* 200s received (first answers and resends' replays) */
    long resent_200_same;  /* 200s to a resend after an unanswered attempt */
    int kills;             /* SIGKILLs made */
    long released;         /* records the restarts released (PROCESSING at the kill), summed */
    long torn;             /* restarts that dropped an incomplete last line */
    long payments;         /* in the final ledger */
    long charges;          /* summed over the final ledger */
    long cancels;          /* cancels in the final ledger */
    long violations;
    char example[1024];    /* the first violation */
    long state_bytes;      /* the state file's size at the end */
    double replay_ms_max;  /* the longest restart: SIGKILL to a ready server (ms) */
    double wall_s;
} cr_result;

/* Run it: starts and kills fakegate itself ($FAKEGATE_BIN, harness.h) with a state file in a
 * private temp dir. Returns 0 when the run was made (violations counted in *out), -1 when it
 * could not be (message in err). Thread: the caller's (servers die with it). */
int cr_run(const cr_config *c, cr_result *out, char err[FG_ERR_LEN]);

/* Print the figures, one per line, to f. */
void cr_print(FILE *f, const cr_config *c, const cr_result *r);

#endif
