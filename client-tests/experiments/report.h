/* report.h -- results.json and RESULTS.md for the experiments runner. */
#ifndef FAKEGATE_EXP_REPORT_H
#define FAKEGATE_EXP_REPORT_H

#include <stdbool.h>

#include "experiment.h"

#define RP_EXPERIMENTS 4 /* E1 ... E4 */

typedef struct rp_timing {
    bool ran[RP_EXPERIMENTS];     /* its rows are in the table (run now, or kept) */
    bool kept[RP_EXPERIMENTS];    /* ... read back from results.json by rp_merge_json */
    double wall_s[RP_EXPERIMENTS]; /* real seconds each took */
} rp_timing;

/* 0 ... 3 for "E1" ... "E4", else -1. */
int rp_experiment_index(const char *experiment);

/* One object per run (issue 6's fields, plus a few more; E4's own), E1's rows first, each with
 * its experiment's wall time (`experiment_wall_s`). Returns 0 or -1. */
int rp_write_json(const char *path, const ex_table *t, const rp_timing *timing);

/* For --only: append to `t` the rows that `path` (a results.json written by rp_write_json) holds
 * for every experiment that did not run (!timing->ran[k]), and mark it ran and kept with its
 * recorded wall time, so that both files can be written whole again. A missing file keeps
 * nothing. Returns 0, or -1 with a message in err (not JSON, a row without experiment_wall_s,
 * too many rows). */
int rp_merge_json(const char *path, ex_table *t, rp_timing *timing, char err[EX_ERR_LEN]);

/* Tables with the published figures and ours side by side, and the mechanism. 0 or -1. */
int rp_write_markdown(const char *path, const ex_table *t, const ex_options *o,
                      const rp_timing *timing);

#endif
