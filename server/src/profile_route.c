/* profile_route.c -- one route of a profile (docs/profiles.md §4), validated into a struct
 * route_profile: latency distributions (mixtures one level deep), faults (with the per-attempt sum
 * of their probabilities kept <= 1), throttle, concurrency, and the Retry-After header an error
 * fault or a throttle may send. Failures go through the shared context (profile_ctx.h). */
#define _POSIX_C_SOURCE 200809L
#include "profile_route.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "throttle.h"
#include "toss_errors.h"

/* Bounds that keep validation (and fault.c's per-request scan) cheap; real scripts are short. */
#define MAX_FAULTS 64
#define MAX_ATTEMPTS 100
/* Largest Retry-After value (HTTP allows any delta-seconds; clients store it in an int). */
#define MAX_RETRY_AFTER_S 2147483647

/* ---- Retry-After ----------------------------------------------------------------------------- */

static const char *const RA_KEYS[] = {"format", "value", NULL};
static const char *const RA_FORMATS[] = {"seconds", "http-date", "none", "raw", NULL};
static const enum retry_after_format RA_FORMAT_IDS[] = {RA_SECONDS, RA_HTTP_DATE, RA_NONE,
                                                        RA_RAW};

/* "retry_after": {"format": ..., "value": N | "auto" | "raw"} of `obj`, if present; *out keeps
 * the caller's default when absent. */
static int get_retry_after(struct pctx *c, json_t *obj, struct retry_after *out)
{
    int rc;
    json_t *ra = pctx_enter(c, obj, "retry_after", false, &rc);
    if (ra == NULL)
        return rc;
    if (!json_is_object(ra))
        return pctx_fail(c, AT_VALUE, true, "expected an object {\"format\": ..., \"value\": ...}");
    if (pctx_check_keys(c, ra, RA_KEYS) != 0)
        return -1;
    int f;
    if (pctx_get_enum(c, ra, "format", true, RA_FORMATS, &f) != 0)
        return -1;
    free(out->raw);
    *out = (struct retry_after){.format = RA_FORMAT_IDS[f]};
    json_t *v = json_object_get(ra, "value");
    switch (out->format) {
    case RA_NONE:
        if (v != NULL) {
            pctx_push_key(c, "value");
            return pctx_fail(c, AT_KEY, false,
                             "format \"none\" sends no header and takes no value");
        }
        break;
    case RA_RAW: {
        if (v == NULL)
            return pctx_fail(c, AT_VALUE, true, "missing \"value\" (the header's bytes)");
        pctx_push_key(c, "value");
        const char *s = json_string_value(v);
        if (s == NULL)
            return pctx_fail(c, AT_VALUE, true, "expected a string (sent byte-for-byte)");
        for (size_t i = 0; s[i] != '\0'; i++)
            if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
                return pctx_fail(c, AT_VALUE, true,
                                 "must be printable ASCII (no CR, LF or control bytes)");
        if (pctx_set_str(c, s, &out->raw) != 0)
            return -1;
        pctx_pop(c);
        break;
    }
    case RA_SECONDS:
    case RA_HTTP_DATE:
        if (v == NULL || (json_is_string(v) && strcmp(json_string_value(v), "auto") == 0)) {
            out->is_auto = true;
            break;
        }
        pctx_push_key(c, "value");
        if (json_is_integer(v) && json_integer_value(v) > MAX_RETRY_AFTER_S)
            return pctx_fail(c, AT_VALUE, true, "Retry-After above 2^31-1");
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return pctx_fail(c, AT_VALUE, true,
                             "expected whole seconds (0..2147483647) or \"auto\" "
                             "(format \"raw\" sends anything else)");
        out->seconds = (uint32_t)json_integer_value(v);
        pctx_pop(c);
        break;
    }
    pctx_pop(c);
    return 0;
}

/* ---- Latency distributions ------------------------------------------------------------------- */

struct dist_spec {
    const char *name;
    enum dist_kind kind;
    const char *keys[4]; /* "dist" and the kind's own keys, NULL-terminated */
};

static const struct dist_spec DISTS[] = {
    {"fixed", DIST_FIXED, {"dist", "ms", NULL, NULL}},
    {"uniform", DIST_UNIFORM, {"dist", "min_ms", "max_ms", NULL}},
    {"normal", DIST_NORMAL, {"dist", "mean_ms", "stddev_ms", NULL}},
    {"lognormal", DIST_LOGNORMAL, {"dist", "median_ms", "p99_ms", NULL}},
    {"exponential", DIST_EXPONENTIAL, {"dist", "mean_ms", NULL, NULL}},
    {"mixture", DIST_MIXTURE, {"dist", "of", NULL, NULL}},
};

#define N_DISTS (sizeof(DISTS) / sizeof(DISTS[0]))

static int parse_dist(struct pctx *c, json_t *obj, struct latency_dist *out, bool in_mixture);

/* The "of" array of a mixture; `c`'s path is at the mixture object. */
static int parse_mixture(struct pctx *c, json_t *obj, struct latency_dist *out)
{
    json_t *of = json_object_get(obj, "of");
    if (of == NULL)
        return pctx_fail(c, AT_VALUE, true, "missing \"of\"");
    pctx_push_key(c, "of");
    if (!json_is_array(of))
        return pctx_fail(c, AT_VALUE, true, "expected an array");
    size_t n = json_array_size(of);
    if (n == 0)
        return pctx_fail(c, AT_VALUE, true, "a mixture needs at least one part");
    out->parts = calloc(n, sizeof(*out->parts));
    if (out->parts == NULL)
        return pctx_fail(c, AT_VALUE, true, "out of memory");
    out->n_parts = n;
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) {
        json_t *part = json_array_get(of, i);
        pctx_push_index(c, i);
        if (!json_is_object(part))
            return pctx_fail(c, AT_VALUE, true, "expected an object");
        json_t *w = json_object_get(part, "weight");
        if (w == NULL)
            return pctx_fail(c, AT_VALUE, true, "missing \"weight\"");
        pctx_push_key(c, "weight");
        if (!json_is_number(w))
            return pctx_fail(c, AT_VALUE, true, "expected a number");
        double x = json_number_value(w);
        if (!isfinite(x) || x <= 0)
            return pctx_fail(c, AT_VALUE, true, "must be a number greater than 0");
        pctx_pop(c);
        out->parts[i].weight = x;
        sum += x;
        if (parse_dist(c, part, &out->parts[i].dist, true) != 0)
            return -1;
        pctx_pop(c);
    }
    if (!isfinite(sum))
        return pctx_fail(c, AT_VALUE, true, "the weights' sum is too large");
    for (size_t i = 0; i < n; i++)
        out->parts[i].weight /= sum;
    pctx_pop(c);
    return 0;
}

/* A DIST object; `c`'s path is at it. On error *out may hold parts: the caller's fini frees
 * them. */
static int parse_dist(struct pctx *c, json_t *obj, struct latency_dist *out, bool in_mixture)
{
    if (!json_is_object(obj))
        return pctx_fail(c, AT_VALUE, true, "expected an object");
    json_t *dv = json_object_get(obj, "dist");
    if (dv == NULL)
        return pctx_fail(c, AT_VALUE, true, "missing \"dist\"");
    pctx_push_key(c, "dist");
    if (!json_is_string(dv))
        return pctx_fail(c, AT_VALUE, true, "expected a string");
    const struct dist_spec *spec = NULL;
    for (size_t i = 0; i < N_DISTS; i++)
        if (strcmp(json_string_value(dv), DISTS[i].name) == 0)
            spec = &DISTS[i];
    if (spec == NULL) {
        char q[80];
        pctx_quote_key(json_string_value(dv), q);
        return pctx_fail(c, AT_VALUE, true,
                         "unknown dist \"%s\" (expected fixed, uniform, normal, lognormal, "
                         "exponential or mixture)", q);
    }
    if (in_mixture && spec->kind == DIST_MIXTURE)
        return pctx_fail(c, AT_VALUE, true, "a mixture cannot contain a mixture");
    pctx_pop(c);

    const char *known[6];
    size_t nk = 0;
    for (; spec->keys[nk] != NULL; nk++)
        known[nk] = spec->keys[nk];
    if (in_mixture)
        known[nk++] = "weight";
    known[nk] = NULL;
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        if (!pctx_in_list(key, known)) {
            pctx_push_key(c, key);
            return pctx_fail_unknown_key(c, "key", key, known);
        }
    }

    out->kind = spec->kind;
    switch (spec->kind) {
    case DIST_FIXED:
        if (pctx_get_ms(c, obj, "ms", &out->a) != 0)
            return -1;
        break;
    case DIST_UNIFORM:
        if (pctx_get_ms(c, obj, "min_ms", &out->a) != 0 ||
            pctx_get_ms(c, obj, "max_ms", &out->b) != 0)
            return -1;
        if (out->a > out->b) {
            pctx_push_key(c, "max_ms");
            return pctx_fail(c, AT_VALUE, true, "must not be less than min_ms (%g < %g)",
                             out->b, out->a);
        }
        break;
    case DIST_NORMAL:
        if (pctx_get_ms(c, obj, "mean_ms", &out->a) != 0 ||
            pctx_get_ms(c, obj, "stddev_ms", &out->b) != 0)
            return -1;
        break;
    case DIST_LOGNORMAL: {
        double median, p99;
        if (pctx_get_ms(c, obj, "median_ms", &median) != 0 ||
            pctx_get_ms(c, obj, "p99_ms", &p99) != 0)
            return -1;
        if (median <= 0) {
            pctx_push_key(c, "median_ms");
            return pctx_fail(c, AT_VALUE, true, "must be greater than 0");
        }
        if (p99 < median) {
            pctx_push_key(c, "p99_ms");
            return pctx_fail(c, AT_VALUE, true, "must not be less than median_ms (%g < %g)",
                             p99, median);
        }
        latency_lognormal_init(out, median, p99);
        return 0; /* shown_a/shown_b already hold median/p99 */
    }
    case DIST_EXPONENTIAL:
        if (pctx_get_ms(c, obj, "mean_ms", &out->a) != 0)
            return -1;
        break;
    case DIST_MIXTURE:
        if (parse_mixture(c, obj, out) != 0)
            return -1;
        break;
    case DIST_NONE:
        break;
    }
    out->shown_a = out->a;
    out->shown_b = out->b;
    return 0;
}

int route_parse_latency(struct pctx *c, json_t *obj, struct latency_dist *out)
{
    return parse_dist(c, obj, out, false);
}

/* ---- Faults ---------------------------------------------------------------------------------- */

static const char *const FAULT_KINDS[] = {"error", "drop_request", "drop_response", "drip", NULL};
static const enum fault_kind FAULT_KIND_IDS[] = {FAULT_ERROR, FAULT_DROP_REQUEST,
                                                 FAULT_DROP_RESPONSE, FAULT_DRIP};
static const char *const ERROR_KEYS[] = {"kind", "p", "attempts", "times", "status", "code",
                                         "message", "body", "commit", "when", "retry_after",
                                         NULL};
static const char *const DROP_KEYS[] = {"kind", "p", "attempts", "times", "how", "hang_ms",
                                        NULL};
static const char *const DRIP_KEYS[] = {"kind", "p", "attempts", "times", "duration_ms", NULL};
static const char *const HOWS[] = {"close", "reset", "hang", "truncate", NULL};
static const enum fault_how HOW_IDS[] = {HOW_CLOSE, HOW_RESET, HOW_HANG, HOW_TRUNCATE};
static const char *const WHENS[] = {"after", "before", NULL};

/* "attempts": [n, ...] of a fault, if present: a non-empty array of attempt numbers >= 1. */
static int parse_attempts(struct pctx *c, json_t *obj, struct fault *f)
{
    int rc;
    json_t *a = pctx_enter(c, obj, "attempts", false, &rc);
    if (a == NULL)
        return rc < 0 ? -1 : 0;
    if (!json_is_array(a))
        return pctx_fail(c, AT_VALUE, true,
                         "expected an array of attempt numbers (1 is the first)");
    size_t n = json_array_size(a);
    if (n == 0)
        return pctx_fail(c, AT_VALUE, true,
                         "must not be empty (leave it out to fire on every attempt)");
    if (n > MAX_ATTEMPTS)
        return pctx_fail(c, AT_VALUE, true, "at most %d attempt numbers", MAX_ATTEMPTS);
    f->attempts = calloc(n, sizeof(*f->attempts));
    if (f->attempts == NULL)
        return pctx_fail(c, AT_VALUE, true, "out of memory");
    f->n_attempts = n;
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(a, i);
        pctx_push_index(c, i);
        if (!json_is_integer(v) || json_integer_value(v) < 1 ||
            json_integer_value(v) > UINT32_MAX)
            return pctx_fail(c, AT_VALUE, true, "expected a positive integer (an attempt number)");
        f->attempts[i] = (uint32_t)json_integer_value(v);
        for (size_t j = 0; j < i; j++)
            if (f->attempts[j] == f->attempts[i])
                return pctx_fail(c, AT_VALUE, true, "attempt %u is listed twice", f->attempts[i]);
        pctx_pop(c);
    }
    pctx_pop(c);
    return 0;
}

static int parse_error_fault(struct pctx *c, json_t *obj, struct fault *f)
{
    if (pctx_get_code(c, obj, "code", true, &f->code) != 0)
        return -1;
    int rc = pctx_get_status(c, obj, "status", false, &f->status);
    if (rc < 0)
        return -1;
    if (rc == 1) {
        const struct toss_error *te = toss_error_find(f->code);
        if (te == NULL) {
            pctx_push_key(c, "code");
            return pctx_fail(c, AT_VALUE, true,
                             "\"%s\" is not in the error table, so \"status\" is required",
                             f->code);
        }
        f->status = te->status;
    }
    json_t *m;
    if ((m = pctx_enter(c, obj, "message", false, &rc)) != NULL) {
        if (!json_is_string(m))
            return pctx_fail(c, AT_VALUE, true, "expected a string");
        if (pctx_set_str(c, json_string_value(m), &f->message) != 0)
            return -1;
        pctx_pop(c);
    }
    int when = 0;
    if (pctx_get_body(c, obj, &f->body) < 0 ||
        pctx_get_bool(c, obj, "commit", &f->commit) < 0 ||
        pctx_get_enum(c, obj, "when", false, WHENS, &when) < 0 ||
        get_retry_after(c, obj, &f->retry_after) < 0)
        return -1;
    f->when_before = when == 1;
    if (f->commit && f->when_before) {
        /* The payment can only commit if the request got as far as its latency. */
        pctx_push_key(c, "commit");
        return pctx_fail(c, AT_VALUE, false, "commit: true is only valid with when: after");
    }
    return 0;
}

static int parse_drop_fault(struct pctx *c, json_t *obj, struct fault *f)
{
    int how;
    if (pctx_get_enum(c, obj, "how", true, HOWS, &how) != 0)
        return -1;
    f->how = HOW_IDS[how];
    if (f->how == HOW_TRUNCATE && f->kind == FAULT_DROP_REQUEST) {
        /* A truncated response needs a response: a dropped request never produced one. */
        pctx_push_key(c, "how");
        return pctx_fail(c, AT_VALUE, true, "truncate is only valid for drop_response");
    }
    f->hang_ms = 30000;
    if (json_object_get(obj, "hang_ms") != NULL && f->how != HOW_HANG) {
        pctx_push_key(c, "hang_ms");
        return pctx_fail(c, AT_KEY, false, "hang_ms is only valid with how: hang");
    }
    return pctx_get_num(c, obj, "hang_ms", false, LOW_GE0, MAX_MS, "ms", &f->hang_ms) < 0 ? -1 : 0;
}

/* One fault object; `c`'s path is at it. */
static int parse_fault(struct pctx *c, json_t *obj, struct fault *f)
{
    f->times = -1;
    if (!json_is_object(obj))
        return pctx_fail(c, AT_VALUE, true, "expected an object");
    int kind;
    if (pctx_get_enum(c, obj, "kind", true, FAULT_KINDS, &kind) != 0)
        return -1;
    f->kind = FAULT_KIND_IDS[kind];
    const char *const *known = f->kind == FAULT_ERROR ? ERROR_KEYS
                               : f->kind == FAULT_DRIP ? DRIP_KEYS
                                                       : DROP_KEYS;
    if (pctx_check_keys(c, obj, known) != 0)
        return -1;

    if (pctx_get_prob(c, obj, "p", true, &f->p) != 0 || parse_attempts(c, obj, f) != 0 ||
        pctx_get_int(c, obj, "times", false, 0, INT64_MAX, "a non-negative integer", &f->times) < 0)
        return -1;

    switch (f->kind) {
    case FAULT_ERROR:
        return parse_error_fault(c, obj, f);
    case FAULT_DROP_REQUEST:
    case FAULT_DROP_RESPONSE:
        return parse_drop_fault(c, obj, f);
    case FAULT_DRIP:
        if (pctx_get_num(c, obj, "duration_ms", true, LOW_GT0, MAX_MS, "ms", &f->duration_ms) != 0)
            return -1;
        return 0;
    case FAULT_NONE:
        break;
    }
    return 0;
}

/* Running sums of p over a route's faults as they are added, per attempt: docs/profiles.md §4 draws
 * against the faults eligible for the attempt, so each attempt's sum, not the route's, must stay <=
 * 1. */
struct p_sums {
    double any;        /* faults without "attempts", eligible on every attempt */
    uint32_t *attempt; /* each attempt number some fault names... */
    double *named;     /* ...and the sum of p of the faults naming it */
    size_t n;
};

/* Adds `f`; sets *worst to the largest sum it took part in and *worst_attempt to that attempt
 * (0: the sum of the faults without "attempts"). Returns -1 when out of memory. */
static int p_sums_add(struct p_sums *s, const struct fault *f, double *worst,
                      uint32_t *worst_attempt)
{
    *worst_attempt = 0;
    if (f->n_attempts == 0) {
        s->any += f->p;
        *worst = s->any;
        for (size_t i = 0; i < s->n; i++) {
            if (s->any + s->named[i] > *worst) {
                *worst = s->any + s->named[i];
                *worst_attempt = s->attempt[i];
            }
        }
        return 0;
    }
    uint32_t *a = realloc(s->attempt, (s->n + f->n_attempts) * sizeof(*a));
    if (a == NULL)
        return -1;
    s->attempt = a;
    double *named = realloc(s->named, (s->n + f->n_attempts) * sizeof(*named));
    if (named == NULL)
        return -1;
    s->named = named;
    *worst = s->any;
    for (size_t k = 0; k < f->n_attempts; k++) {
        size_t i = 0;
        while (i < s->n && s->attempt[i] != f->attempts[k])
            i++;
        if (i == s->n) {
            s->attempt[s->n] = f->attempts[k];
            s->named[s->n++] = 0;
        }
        s->named[i] += f->p;
        if (s->any + s->named[i] > *worst) {
            *worst = s->any + s->named[i];
            *worst_attempt = f->attempts[k];
        }
    }
    return 0;
}

static int parse_faults_into(struct pctx *c, json_t *arr, struct route_profile *rp,
                             struct p_sums *sums)
{
    size_t n = json_array_size(arr);
    if (n > MAX_FAULTS)
        return pctx_fail(c, AT_VALUE, true, "at most %d faults per route", MAX_FAULTS);
    rp->faults = calloc(n, sizeof(*rp->faults));
    if (rp->faults == NULL)
        return pctx_fail(c, AT_VALUE, true, "out of memory");
    for (size_t i = 0; i < n; i++) {
        pctx_push_index(c, i);
        rp->n_faults = i + 1;
        if (parse_fault(c, json_array_get(arr, i), &rp->faults[i]) != 0)
            return -1;
        /* Checked as each fault is added, so the message points at the one that tips it. */
        double sum;
        uint32_t attempt;
        pctx_push_key(c, "p");
        if (p_sums_add(sums, &rp->faults[i], &sum, &attempt) != 0)
            return pctx_fail(c, AT_VALUE, true, "out of memory");
        if (sum > 1 + P_SUM_EPS && attempt != 0)
            return pctx_fail(c, AT_VALUE, true,
                             "the faults' p for attempt %u sum to %g, more than 1", attempt, sum);
        if (sum > 1 + P_SUM_EPS)
            return pctx_fail(c, AT_VALUE, true, "the faults' p sum to %g, more than 1", sum);
        pctx_pop(c);
        pctx_pop(c);
    }
    return 0;
}

/* "faults": [...] of a route; `c`'s path is at it. */
static int parse_faults(struct pctx *c, json_t *arr, struct route_profile *rp)
{
    if (!json_is_array(arr))
        return pctx_fail(c, AT_VALUE, true, "expected an array of faults");
    if (json_array_size(arr) == 0)
        return 0;
    struct p_sums sums = {0};
    int rc = parse_faults_into(c, arr, rp, &sums);
    free(sums.attempt);
    free(sums.named);
    return rc;
}

/* ---- Throttle and concurrency ---------------------------------------------------------------- */

static const char *const THROTTLE_KINDS[] = {"token_bucket", "window", NULL};
static const char *const BUCKET_KEYS[] = {"kind", "rate_per_s", "burst", "status", "code",
                                          "retry_after", "body", NULL};
static const char *const WINDOW_KEYS[] = {"kind", "period_s", "throttled_s", "offset_s",
                                          "status", "code", "retry_after", "body", NULL};

static int parse_throttle(struct pctx *c, json_t *obj, struct throttle *t)
{
    if (!json_is_object(obj))
        return pctx_fail(c, AT_VALUE, true, "expected an object");
    int kind;
    if (pctx_get_enum(c, obj, "kind", true, THROTTLE_KINDS, &kind) != 0)
        return -1;
    t->kind = kind == 0 ? THROTTLE_TOKEN_BUCKET : THROTTLE_WINDOW;
    if (pctx_check_keys(c, obj, t->kind == THROTTLE_TOKEN_BUCKET ? BUCKET_KEYS : WINDOW_KEYS) != 0)
        return -1;
    if (t->kind == THROTTLE_TOKEN_BUCKET) {
        if (pctx_get_num(c, obj, "rate_per_s", true, LOW_GT0, 0, NULL, &t->rate_per_s) != 0 ||
            pctx_get_num(c, obj, "burst", true, LOW_GE1, 0, NULL, &t->burst) != 0)
            return -1;
    } else {
        if (pctx_get_num(c, obj, "period_s", true, LOW_GT0, MAX_S, "s", &t->period_s) != 0 ||
            pctx_get_num(c, obj, "throttled_s", true, LOW_GT0, MAX_S, "s", &t->throttled_s) != 0 ||
            pctx_get_num(c, obj, "offset_s", false, LOW_GE0, MAX_S, "s", &t->offset_s) < 0)
            return -1;
        if (t->throttled_s > t->period_s) {
            pctx_push_key(c, "throttled_s");
            return pctx_fail(c, AT_VALUE, true, "must not be more than period_s (%g > %g)",
                             t->throttled_s, t->period_s);
        }
    }
    int64_t status = 503;
    if (pctx_get_int(c, obj, "status", false, 429, 503, "503 or 429", &status) < 0)
        return -1;
    if (status != 503 && status != 429) {
        pctx_push_key(c, "status");
        return pctx_fail(c, AT_VALUE, true, "expected 503 or 429");
    }
    t->status = (int)status;
    int rc = pctx_get_code(c, obj, "code", false, &t->code);
    if (rc < 0)
        return -1;
    if (rc == 1 &&
        pctx_set_str(c, t->status == 429 ? "TOO_MANY_REQUESTS" : "SERVICE_UNAVAILABLE",
                     &t->code) != 0)
        return -1;
    t->retry_after = (struct retry_after){.format = RA_SECONDS, .is_auto = true};
    if (get_retry_after(c, obj, &t->retry_after) < 0 || pctx_get_body(c, obj, &t->body) < 0)
        return -1;
    /* An "auto" Retry-After must be honest (docs/profiles.md §4: a client that comes back exactly
     * when told is admitted); with none, a fixed value or raw, the profile's author chose what to
     * say. */
    if (t->kind == THROTTLE_WINDOW && t->retry_after.is_auto &&
        t->retry_after.format != RA_NONE && t->retry_after.format != RA_RAW &&
        t->throttled_s < t->period_s && !window_retry_reachable(t)) {
        pctx_push_key(c, "period_s");
        return pctx_fail(c, AT_VALUE, true,
                         "no whole-second Retry-After can leave this window (the open part "
                         "%g s repeats every %g s, so a client returning after whole seconds "
                         "lands in the window again); use an open part of at least 1 s, a "
                         "period that does not divide 1 s, or \"retry_after\": "
                         "{\"format\": \"none\"}",
                         t->period_s - t->throttled_s, t->period_s);
    }
    return 0;
}

static int parse_concurrency(struct pctx *c, json_t *obj, struct concurrency *cc)
{
    static const char *const known[] = {"max_in_flight", "status", "code", NULL};
    if (!json_is_object(obj))
        return pctx_fail(c, AT_VALUE, true, "expected an object");
    if (pctx_check_keys(c, obj, known) != 0)
        return -1;
    int64_t max;
    if (pctx_get_int(c, obj, "max_in_flight", true, 1, UINT32_MAX, "a positive integer", &max) != 0)
        return -1;
    cc->max_in_flight = (uint32_t)max;
    cc->status = 503;
    if (pctx_get_status(c, obj, "status", false, &cc->status) < 0)
        return -1;
    int rc = pctx_get_code(c, obj, "code", false, &cc->code);
    if (rc < 0 || (rc == 1 && pctx_set_str(c, "SERVICE_UNAVAILABLE", &cc->code) != 0))
        return -1;
    return 0;
}

/* ---- The route object ------------------------------------------------------------------------ */

static const char *const ROUTE_KEYS[] = {"queue_latency", "latency", "faults", "throttle",
                                         "concurrency", NULL};

int route_parse(struct pctx *c, json_t *obj, struct route_profile *rp)
{
    if (!json_is_object(obj))
        return pctx_fail(c, AT_VALUE, true, "expected an object");
    rp->present = true;
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        pctx_push_key(c, key);
        int rc;
        if (strcmp(key, "queue_latency") == 0)
            rc = route_parse_latency(c, v, &rp->queue_latency);
        else if (strcmp(key, "latency") == 0)
            rc = route_parse_latency(c, v, &rp->latency);
        else if (strcmp(key, "faults") == 0)
            rc = parse_faults(c, v, rp);
        else if (strcmp(key, "throttle") == 0)
            rc = parse_throttle(c, v, &rp->throttle);
        else if (strcmp(key, "concurrency") == 0)
            rc = parse_concurrency(c, v, &rp->concurrency);
        else
            rc = pctx_fail_unknown_key(c, "key", key, ROUTE_KEYS);
        if (rc != 0)
            return -1;
        pctx_pop(c);
    }
    return 0;
}

void route_fini(struct route_profile *rp)
{
    latency_dist_fini(&rp->queue_latency);
    latency_dist_fini(&rp->latency);
    for (size_t i = 0; i < rp->n_faults; i++) {
        struct fault *f = &rp->faults[i];
        free(f->code);
        free(f->message);
        free(f->retry_after.raw);
        free(f->attempts);
    }
    free(rp->faults);
    free(rp->throttle.code);
    free(rp->throttle.retry_after.raw);
    free(rp->concurrency.code);
}
