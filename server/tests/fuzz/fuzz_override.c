/* fuzz_override.c -- the per-request override headers (override.c; docs/profiles.md §4): each
 * input, cut at its first NUL as a header value is, read as X-Fakegate-Fault ("KIND; key=value;
 * ...", turned into profile JSON and validated by profile.c) and as X-Fakegate-Latency-Ms.
 * Asserts, beyond no crash, no undefined behaviour and no leak:
 *   - a fault header either gives a profile whose default route holds exactly that one fault
 *     (a real kind, p in [0, 1]) and nothing else, or none and a message that names the header;
 *   - a latency header is accepted only as plain decimal (digits, then optionally '.' and
 *     digits) of at most 86 400 000 ms, and every refusal names the header. */
#define _DEFAULT_SOURCE
#include <stdbool.h>

#include "fuzz.h"
#include "override.h"
#include "profile.h"

static void fault_header(const char *h)
{
    struct profile *p = NULL;
    char err[ERR_LEN] = "";
    if (override_fault_parse(h, &p, err) != 0) {
        FUZZ_CHECK(p == NULL, "a refused fault gives no profile");
        FUZZ_CHECK(strncmp(err, "X-Fakegate-Fault: ", 18) == 0, "a refusal names the header");
        return;
    }
    FUZZ_CHECK(p != NULL, "an accepted fault gives a profile");
    for (int r = 0; r < ROUTE_COUNT; r++) {
        const struct route_profile *rp = &p->routes[r];
        if (r != ROUTE_DEFAULT) {
            FUZZ_CHECK(!rp->present, "only the default route is set");
            continue;
        }
        FUZZ_CHECK(rp->present && rp->n_faults == 1, "the default route has that one fault");
        FUZZ_CHECK(rp->faults[0].kind != FAULT_NONE, "the fault has a kind");
        FUZZ_CHECK(rp->faults[0].p >= 0 && rp->faults[0].p <= 1, "its p is in [0, 1]");
        FUZZ_CHECK(rp->throttle.kind == THROTTLE_NONE && rp->concurrency.max_in_flight == 0 &&
                       rp->latency.kind == DIST_NONE,
                   "nothing but the fault is set");
    }
    FUZZ_CHECK(p->phases == NULL, "a fault is never a schedule");
    profile_free(p);
}

static bool plain_decimal(const char *s)
{
    size_t n = strspn(s, "0123456789");
    if (n == 0)
        return false;
    if (s[n] == '.')
        n += 1 + strspn(s + n + 1, "0123456789");
    return s[n] == '\0';
}

static void latency_header(const char *h)
{
    double ms = -1;
    char err[ERR_LEN] = "";
    if (override_latency_parse(h, &ms, err) != 0) {
        FUZZ_CHECK(strncmp(err, "X-Fakegate-Latency-Ms: ", 23) == 0,
                   "a refusal names the header");
        return;
    }
    FUZZ_CHECK(plain_decimal(h), "only plain decimal is accepted");
    FUZZ_CHECK(ms >= 0 && ms <= 86400000, "the latency is 0 .. 86 400 000 ms");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *h = fuzz_cstr(data, size);
    fault_header(h);
    latency_header(h);
    free(h);
    return 0;
}
