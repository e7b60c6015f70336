/* fuzz_profile.c -- profile JSON (profile.c, profile_route.c, profile_webhooks.c,
 * profile_ctx.c, jsonpos.c): the one parser behind --profile files and PUT /__admin/profile,
 * its "webhooks" section included. A schedule phase given by name resolves only to a shipped
 * profile (profile_builtin.c, no file I/O); any other name is refused. Asserts, beyond no
 * crash, no undefined behaviour and no leak:
 *   - a parse either succeeds with a profile or fails with none and a message
 *     "fuzz.json:LINE:COLUMN: ..." whose line and column are inside the text (1-based; the
 *     column may be one past a line's last character);
 *   - an accepted profile's own source (GET /__admin/profile shows it) parses again, to the
 *     same name, routes, webhooks and phases: what the server shows it would also accept;
 *   - what is accepted obeys docs/profiles.md §4: probabilities in [0, 1], drop.p +
 *     duplicate.p <= 1, a name of [a-z0-9_-]{1,64}. */
#define _DEFAULT_SOURCE
#include <math.h>
#include <stdbool.h>

#include "fuzz.h"
#include "profile.h"
#include "profile_builtin.h"
#include "profile_ctx.h"

#define ORIGIN "fuzz.json"

/* Shipped profiles only: the same text the binary carries, parsed with this resolver again
 * (profile_parse refuses a schedule there, so nothing recurses). */
static int builtin_resolve(const char *name, struct profile **out, char err[ERR_LEN], void *ctx)
{
    size_t len;
    const char *text = profile_builtin_text(name, &len);
    if (!text) {
        snprintf(err, ERR_LEN, "no profile \"%s\" here", name);
        *out = NULL;
        return -1;
    }
    return profile_parse(text, len, name, builtin_resolve, ctx, out, err);
}

/* Lines in text[0, len) (1 + the '\n's) and the characters (not UTF-8 continuation bytes) of
 * its longest line. */
static void extent(const char *text, size_t len, size_t *lines, size_t *longest)
{
    size_t ln = 1, chars = 0, most = 0;
    for (size_t i = 0; i < len; i++) {
        if (text[i] == '\n') {
            ln++;
            chars = 0;
        } else if (((unsigned char)text[i] & 0xc0) != 0x80 && ++chars > most) {
            most = chars;
        }
    }
    *lines = ln;
    *longest = most;
}

static void check_error_place(const char *text, size_t len, const char *err)
{
    size_t ol = strlen(ORIGIN ":");
    FUZZ_CHECK(strncmp(err, ORIGIN ":", ol) == 0, "a failure names the origin");
    char *end;
    unsigned long line = strtoul(err + ol, &end, 10);
    FUZZ_CHECK(end > err + ol && *end == ':', "a failure has a line");
    const char *c = end + 1;
    unsigned long col = strtoul(c, &end, 10);
    FUZZ_CHECK(end > c && *end == ':', "a failure has a column");
    size_t lines, longest;
    extent(text, len, &lines, &longest);
    FUZZ_CHECK(line >= 1 && line <= lines, "the line is in the text");
    FUZZ_CHECK(col >= 1 && col <= longest + 1, "the column is on a line of the text");
}

static bool is_prob(double p)
{
    return p >= 0 && p <= 1;
}

static void check_profile(const struct profile *p)
{
    FUZZ_CHECK(profile_name_valid(p->name), "an accepted name matches [a-z0-9_-]{1,64}");
    const struct webhook_faults *w = &p->webhooks;
    FUZZ_CHECK(is_prob(w->drop_p) && is_prob(w->duplicate_p) &&
                   w->drop_p + w->duplicate_p <= 1 + P_SUM_EPS,
               "webhooks: probabilities in [0, 1], drop.p + duplicate.p <= 1");
    for (int r = 0; r < ROUTE_COUNT; r++)
        for (size_t i = 0; i < p->routes[r].n_faults; i++)
            FUZZ_CHECK(is_prob(p->routes[r].faults[i].p), "a fault's p is in [0, 1]");
    FUZZ_CHECK((p->phases == NULL) == (p->n_phases == 0), "a schedule has phases");
    for (size_t i = 0; i < p->n_phases; i++) {
        FUZZ_CHECK(p->phases[i].profile && !p->phases[i].profile->phases,
                   "a phase is a profile, never a schedule");
        FUZZ_CHECK(p->phases[i].for_s > 0, "a phase lasts");
        check_profile(p->phases[i].profile);
    }
}

/* Equal up to the 15 significant digits the source is written with. */
static bool near(double a, double b)
{
    return fabs(a - b) <= 1e-13 * fmax(1, fmax(fabs(a), fabs(b)));
}

static bool same_shape(const struct profile *a, const struct profile *b)
{
    if (strcmp(a->name, b->name) != 0 || a->has_seed != b->has_seed || a->seed != b->seed ||
        a->on_body_mismatch != b->on_body_mismatch || a->n_phases != b->n_phases ||
        a->repeat != b->repeat || !near(a->webhooks.drop_p, b->webhooks.drop_p) ||
        !near(a->webhooks.duplicate_p, b->webhooks.duplicate_p) ||
        a->webhooks.delay.kind != b->webhooks.delay.kind ||
        a->webhooks.duplicate_after.kind != b->webhooks.duplicate_after.kind)
        return false;
    for (int r = 0; r < ROUTE_COUNT; r++)
        if (a->routes[r].present != b->routes[r].present ||
            a->routes[r].n_faults != b->routes[r].n_faults ||
            a->routes[r].latency.kind != b->routes[r].latency.kind ||
            a->routes[r].throttle.kind != b->routes[r].throttle.kind ||
            a->routes[r].concurrency.max_in_flight != b->routes[r].concurrency.max_in_flight)
            return false;
    for (size_t i = 0; i < a->n_phases; i++)
        if (!near(a->phases[i].for_s, b->phases[i].for_s) ||
            !same_shape(a->phases[i].profile, b->phases[i].profile))
            return false;
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    struct profile *p = NULL;
    char err[ERR_LEN] = "";
    int rc = profile_parse(text, size, ORIGIN, builtin_resolve, NULL, &p, err);
    if (rc != 0) {
        FUZZ_CHECK(rc == -1 && p == NULL, "a failed parse returns -1 and no profile");
        check_error_place(text, size, err);
        return 0;
    }
    FUZZ_CHECK(p != NULL, "a parse that succeeds returns a profile");
    FUZZ_CHECK(p->source != NULL, "an accepted profile keeps its source"); /* not its phases */
    check_profile(p);
    struct profile *again = NULL;
    char err2[ERR_LEN] = "";
    int rc2 = profile_parse(p->source, strlen(p->source), ORIGIN, builtin_resolve, NULL, &again,
                            err2);
    if (rc2 != 0)
        fprintf(stderr, "source %s\nrefused: %s\n", p->source, err2);
    FUZZ_CHECK(rc2 == 0, "an accepted profile's source is accepted again");
    FUZZ_CHECK(same_shape(p, again), "its source parses to the same profile");
    profile_free(again);
    profile_free(p);
    return 0;
}
