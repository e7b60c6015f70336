/* crash -- the `make crash-test` runner: the crash test of crash.h (SIGKILL fakegate mid-load,
 * restart it on the same --state-file, compare the ledger with every answer), its figures on
 * stdout. Exit 0 without violations, 1 with any, 2 when the run could not be made.
 *
 *   crash [--threads N] [--payments N] [--kills N] [--min-gap-ms MS] [--max-gap-ms MS]
 *         [--hold-ms MS] [--seed N] [--fsync-always] [--quiet]
 */
#define _POSIX_C_SOURCE 200809L
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crash.h"

static void usage(void)
{
    fprintf(stderr, "usage: crash [--threads N] [--payments N] [--kills N] [--min-gap-ms MS] "
                    "[--max-gap-ms MS] [--hold-ms MS] [--seed N] [--fsync-always] [--quiet]\n");
}

int main(int argc, char **argv)
{
    cr_config c;
    cr_config_default(&c);
    c.verbose = true;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--quiet") == 0) {
            c.verbose = false;
            continue;
        }
        if (strcmp(a, "--fsync-always") == 0) {
            c.fsync_always = true;
            continue;
        }
        char *end = NULL;
        long long v = i + 1 < argc ? strtoll(argv[i + 1], &end, 10) : -1;
        if (!end || *end || v < 0) {
            usage();
            return 2;
        }
        i++;
        if (strcmp(a, "--threads") == 0)
            c.threads = (int)v;
        else if (strcmp(a, "--payments") == 0)
            c.payments = (int)v;
        else if (strcmp(a, "--kills") == 0)
            c.kills = (int)v;
        else if (strcmp(a, "--min-gap-ms") == 0)
            c.min_gap_ms = (long)v;
        else if (strcmp(a, "--max-gap-ms") == 0)
            c.max_gap_ms = (long)v;
        else if (strcmp(a, "--hold-ms") == 0)
            c.hold_ms = (long)v;
        else if (strcmp(a, "--seed") == 0)
            c.seed = (uint64_t)v;
        else {
            usage();
            return 2;
        }
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    char err[FG_ERR_LEN];
    cr_result r;
    if (cr_run(&c, &r, err) != 0) {
        fprintf(stderr, "crash: %s\n", err);
        return 2;
    }
    cr_print(stdout, &c, &r);
    curl_global_cleanup();
    return r.violations == 0 && r.kills == c.kills ? 0 : 1;
}
