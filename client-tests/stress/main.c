/* stress -- the `make stress` runner: start build/fakegate on port 0 (harness.h), run the stress
 * of stress.h against it, print its figures and fakegate's peak RSS. Exit 0 without violations,
 * 1 with any (or when fakegate does not exit 0 on SIGTERM afterwards), 2 when the run could not
 * be made.
 *
 *   stress [--requests N] [--threads N] [--payments N] [--window N] [--resets N] [--seed N]
 *          [--quiet]
 *
 * STRESS_REQUESTS=N in the environment sets --requests (the default is 10^6). */
#define _POSIX_C_SOURCE 200809L
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "stress.h"

static void usage(void)
{
    fprintf(stderr, "usage: stress [--requests N] [--threads N] [--payments N] [--window N] "
                    "[--resets N] [--seed N] [--quiet]\n");
}

static bool number(const char *s, long long *out)
{
    char *end;
    long long v = s ? strtoll(s, &end, 10) : -1;
    if (s == NULL || *s == '\0' || *end != '\0' || v < 0)
        return false;
    *out = v;
    return true;
}

int main(int argc, char **argv)
{
    st_config c;
    st_config_default(&c);
    c.verbose = true;
    long long v;
    const char *env = getenv("STRESS_REQUESTS");
    if (env && *env) {
        if (!number(env, &v)) {
            fprintf(stderr, "stress: STRESS_REQUESTS=%s: not a number of requests\n", env);
            return 2;
        }
        c.requests = (long)v;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--quiet") == 0) {
            c.verbose = false;
            continue;
        }
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage();
            return 0;
        }
        if (!number(val, &v)) {
            usage();
            return 2;
        }
        i++;
        if (strcmp(a, "--requests") == 0)
            c.requests = (long)v;
        else if (strcmp(a, "--threads") == 0)
            c.threads = (int)v;
        else if (strcmp(a, "--payments") == 0)
            c.payments = (int)v;
        else if (strcmp(a, "--window") == 0)
            c.window = (int)v;
        else if (strcmp(a, "--resets") == 0)
            c.resets = (int)v;
        else if (strcmp(a, "--seed") == 0)
            c.seed = (uint64_t)v;
        else {
            usage();
            return 2;
        }
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    char err[FG_ERR_LEN];
    fg_opts o = {.args = st_server_args};
    fg_server *s = fg_start(&o, err);
    if (s == NULL) {
        fprintf(stderr, "stress: %s\n", err);
        return 2;
    }
    st_result r;
    int rc = st_run(s, &c, &r, err);
    long rss = fg_proc_kb(s->pid, "VmHWM");
    int stopped = fg_stop(s);
    st_print(stdout, &c, &r, rss);
    if (rc != 0)
        fprintf(stderr, "stress: %s\n", err);
    if (stopped != 0)
        fprintf(stderr, "stress: fakegate exited with %d after SIGTERM\n", stopped);
    fg_free(s);
    curl_global_cleanup();
    if (rc != 0)
        return 2;
    return r.violations == 0 && stopped == 0 ? 0 : 1;
}
