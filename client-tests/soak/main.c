/* soak -- the `make soak` runner: start build/fakegate on port 0 (harness.h) with the soak's
 * TTLs and profile, run the load of soak.h against it while sampling its RSS, print the figures
 * and the verdict. Exit 0 when the RSS stayed within the bound after the warm-up, 1 when it did
 * not (or fakegate did not exit 0 on SIGTERM afterwards), 2 when the run could not be made.
 *
 *   soak [--seconds N] [--ttl N] [--threads N] [--payments N] [--rate N] [--sample N]
 *        [--seed N]
 *
 * SOAK_SECONDS=N in the environment sets --seconds (default 600); it must leave at least one
 * sample after the warm-up of 2 TTLs. */
#define _POSIX_C_SOURCE 200809L
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "soak.h"

static void usage(void)
{
    fprintf(stderr, "usage: soak [--seconds N] [--ttl N] [--threads N] [--payments N] "
                    "[--rate N] [--sample N] [--seed N]\n");
}

/* A whole number 0 ... 10^9 (0 means "unpaced" for --rate and is refused for the rest). */
static bool number(const char *s, long long *out)
{
    char *end;
    long long v = s ? strtoll(s, &end, 10) : -1;
    if (s == NULL || *s == '\0' || *end != '\0' || v < 0 || v > 1000000000)
        return false;
    *out = v;
    return true;
}

/* The result is large (its sample array): static, not on the stack. */
static sk_result result;

int main(int argc, char **argv)
{
    sk_config c;
    sk_config_default(&c);
    long long v;
    const char *env = getenv("SOAK_SECONDS");
    if (env && *env) {
        if (!number(env, &v) || v == 0) {
            fprintf(stderr, "soak: SOAK_SECONDS=%s: not a number of seconds\n", env);
            return 2;
        }
        c.seconds = (int)v;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage();
            return 0;
        }
        if (!number(val, &v) || (v == 0 && strcmp(a, "--rate") != 0)) {
            usage();
            return 2;
        }
        i++;
        if (strcmp(a, "--seconds") == 0)
            c.seconds = (int)v;
        else if (strcmp(a, "--ttl") == 0)
            c.ttl_s = (int)v;
        else if (strcmp(a, "--threads") == 0)
            c.threads = (int)v;
        else if (strcmp(a, "--payments") == 0)
            c.payments = (int)v;
        else if (strcmp(a, "--rate") == 0)
            c.rate = (int)v;
        else if (strcmp(a, "--sample") == 0)
            c.sample_s = (int)v;
        else if (strcmp(a, "--seed") == 0)
            c.seed = (uint64_t)v;
        else {
            usage();
            return 2;
        }
    }
    int warm = c.warmup_ttls * c.ttl_s;
    if (c.seconds < warm + c.sample_s) {
        fprintf(stderr, "soak: %d s leaves no sample after the warm-up (%d s, 2 TTLs of %d s) "
                        "and one sample interval (%d s): run at least %d s\n",
                c.seconds, warm, c.ttl_s, c.sample_s, warm + c.sample_s);
        return 2;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    char err[FG_ERR_LEN], store[2][24];
    const char *args[10];
    sk_server_args(&c, store, args);
    fg_opts o = {.args = args, .profile_json = sk_profile_json};
    fg_server *s = fg_start(&o, err);
    if (s == NULL) {
        fprintf(stderr, "soak: %s\n", err);
        return 2;
    }
    printf("soak: fakegate pid %d on port %d; samples as they come:\n", (int)s->pid, s->port);
    fflush(stdout);
    int rc = sk_run(s, &c, &result, stdout, err);
    int stopped = fg_stop(s);
    sk_print(stdout, &c, &result);
    if (rc != 0)
        fprintf(stderr, "soak: %s\n", err);
    if (stopped != 0)
        fprintf(stderr, "soak: fakegate exited with %d after SIGTERM\n", stopped);
    fg_free(s);
    curl_global_cleanup();
    if (rc != 0)
        return 2;
    return result.pass && stopped == 0 ? 0 : 1;
}
