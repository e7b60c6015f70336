/* report.h -- results.json and RESULTS.md for the experiments runner. */
#ifndef FAKEGATE_EXP_REPORT_H
#define FAKEGATE_EXP_REPORT_H

#include <stdbool.h>

#include "experiment.h"

typedef struct rp_timing {
    bool ran[3];       /* E1, E2, E3 */
    double wall_s[3];  /* real seconds each took */
} rp_timing;

/* One object per run (issue 6's fields, plus a few more). Returns 0 or -1. */
int rp_write_json(const char *path, const ex_table *t);

/* Tables with the published figures and ours side by side, and the mechanism. 0 or -1. */
int rp_write_markdown(const char *path, const ex_table *t, const ex_options *o,
                      const rp_timing *timing);

#endif
