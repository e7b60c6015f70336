/* experiments -- run E1-E3 of issue 6 and E4 (webhook consumers) against build/fakegate and
 * write results.json and RESULTS.md. `make experiments [SCALE=0.1] [ONLY=E4]` runs it; see
 * client-tests/README.md.
 *
 *   experiments [--scale S] [--seed N] [--only E1,E2,E3,E4] [--json PATH] [--md PATH] [--quiet]
 *               [--e1-duration S] [--e2-duration S] [--e3-phases B,O,A] [--e4-payments N]
 *
 * Every row is printed as it finishes (one row per run). With --only, the rows the existing
 * --json file holds for the experiments that did not run are kept: both files are written whole,
 * the other sections as they were recorded. */
#define _POSIX_C_SOURCE 200809L
#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "experiment.h"
#include "report.h"

static void usage(void)
{
    fprintf(stderr,
            "usage: experiments [--scale S] [--seed N] [--only E1,E2,E3,E4] [--json PATH] "
            "[--md PATH] [--quiet] [--e1-duration S] [--e2-duration S] [--e3-phases B,O,A] "
            "[--e4-payments N]\n");
}

int main(int argc, char **argv)
{
    ex_options o;
    ex_options_default(&o);
    o.verbose = true;
    const char *json_path = NULL, *md_path = NULL, *only = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--scale") == 0 && v) {
            o.scale = strtod(v, NULL);
            i++;
        } else if (strcmp(a, "--seed") == 0 && v) {
            o.seed = strtoull(v, NULL, 10);
            i++;
        } else if (strcmp(a, "--only") == 0 && v) {
            only = v;
            i++;
        } else if (strcmp(a, "--json") == 0 && v) {
            json_path = v;
            i++;
        } else if (strcmp(a, "--md") == 0 && v) {
            md_path = v;
            i++;
        } else if (strcmp(a, "--e1-duration") == 0 && v) {
            o.e1_duration_s = strtod(v, NULL);
            i++;
        } else if (strcmp(a, "--e2-duration") == 0 && v) {
            o.e2_duration_s = strtod(v, NULL);
            i++;
        } else if (strcmp(a, "--e3-phases") == 0 && v) {
            if (sscanf(v, "%lf,%lf,%lf", &o.e3_before_s, &o.e3_outage_s, &o.e3_after_s) != 3) {
                usage();
                return 2;
            }
            i++;
        } else if (strcmp(a, "--e4-payments") == 0 && v) {
            o.e4_payments = atoi(v);
            i++;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage();
            return 0;
        } else if (strcmp(a, "--quiet") == 0) {
            o.verbose = false;
        } else {
            usage();
            return 2;
        }
    }
    if (!(o.scale > 0) || o.scale > 10) {
        fprintf(stderr, "experiments: --scale must be in (0, 10]\n");
        return 2;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    ex_table t;
    memset(&t, 0, sizeof t);
    rp_timing timing;
    memset(&timing, 0, sizeof timing);
    char err[EX_ERR_LEN];
    int (*const fns[RP_EXPERIMENTS])(const ex_options *, ex_table *, char[EX_ERR_LEN]) = {
        ex_run_e1, ex_run_e2, ex_run_e3, ex_run_e4};
    static const char *const names[RP_EXPERIMENTS] = {"E1", "E2", "E3", "E4"};
    int rc = 0;
    printf("fakegate experiments: scale %g, seed %llu\n", o.scale, (unsigned long long)o.seed);
    if (!only || strstr(only, "E1") || strstr(only, "E2") || strstr(only, "E3"))
        ex_print_header(stdout); /* E4 prints its own */
    for (int k = 0; k < RP_EXPERIMENTS; k++) {
        if (only && !strstr(only, names[k]))
            continue;
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        if (fns[k](&o, &t, err) != 0) {
            fprintf(stderr, "experiments: %s: %s\n", names[k], err);
            rc = 1;
            break;
        }
        clock_gettime(CLOCK_MONOTONIC, &b);
        timing.ran[k] = true;
        timing.wall_s[k] = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
        printf("# %s took %.1f s\n", names[k], timing.wall_s[k]);
    }
    if (rc == 0 && only && json_path && rp_merge_json(json_path, &t, &timing, err) != 0) {
        fprintf(stderr, "experiments: --only: %s\n", err);
        rc = 1;
    }
    if (rc == 0 && json_path && rp_write_json(json_path, &t, &timing) != 0) {
        fprintf(stderr, "experiments: cannot write %s\n", json_path);
        rc = 1;
    }
    if (rc == 0 && md_path && rp_write_markdown(md_path, &t, &o, &timing) != 0) {
        fprintf(stderr, "experiments: cannot write %s\n", md_path);
        rc = 1;
    }
    if (rc == 0 && json_path)
        printf("wrote %s%s%s\n", json_path, md_path ? " and " : "", md_path ? md_path : "");
    curl_global_cleanup();
    return rc;
}
