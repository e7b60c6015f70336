/* profile.c -- profile JSON → struct profile, validated (SPEC §4).
 * jansson parses; the validator walks the tree keeping the path it is at, and on the first
 * problem jsonpos finds that path's key or value in the original text so the message reads
 * "origin:line:column: ..." (columns in characters, as jansson's own errors count them).
 * Nothing is returned half-built: on error *out is NULL.
 * Schedules nest one level only: a phase's profile (inline or resolved by name) is never a
 * schedule, and a parse started by a resolver may not resolve further (no cycles). */
#define _POSIX_C_SOURCE 200809L
#include "profile.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonpos.h"
#include "throttle.h"
#include "toss_errors.h"

/* Largest time a profile may give: one day, in ms and in s. */
#define MAX_MS 86400000.0
#define MAX_S 86400.0
/* Largest profile file profile_load_file reads. */
#define MAX_FILE_BYTES (1024 * 1024)
/* Deepest path the validator can be at: schedule[i].profile.routes.R.latency.of[i].key is 9. */
#define MAX_PATH 16
/* Slack for the sum of a route's probabilities, written as decimals that do not add exactly. */
#define P_SUM_EPS 1e-9
/* Bounds that keep validation (and fault.c's per-request scan) cheap; real scripts are short. */
#define MAX_FAULTS 64
#define MAX_ATTEMPTS 100
/* Largest Retry-After value (HTTP allows any delta-seconds; clients store it in an int). */
#define MAX_RETRY_AFTER_S 2147483647

/* How many profile_parse calls are running on this thread: a parse started from inside a
 * resolver (depth 2) is loading a schedule phase, which may not itself be a schedule. This also
 * stops a schedule that names itself from recursing through its resolver. */
static _Thread_local unsigned parse_depth;

const char *route_name(enum route_id r)
{
    switch (r) {
    case ROUTE_CONFIRM: return "confirm";
    case ROUTE_CANCEL: return "cancel";
    case ROUTE_READ: return "read";
    case ROUTE_DEFAULT: return "default";
    case ROUTE_COUNT: break;
    }
    return "unknown";
}

bool profile_name_valid(const char *name)
{
    size_t n = 0;
    for (; name[n] != '\0'; n++) {
        char c = name[n];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
            return false;
        if (n >= PROFILE_NAME_MAX)
            return false;
    }
    return n > 0;
}

const struct route_profile *profile_route(const struct profile *p, enum route_id r)
{
    if ((unsigned)r < ROUTE_COUNT && p->routes[r].present)
        return &p->routes[r];
    return &p->routes[ROUTE_DEFAULT];
}

static void route_fini(struct route_profile *rp)
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

void profile_free(struct profile *p)
{
    if (p == NULL)
        return;
    for (int i = 0; i < ROUTE_COUNT; i++)
        route_fini(&p->routes[i]);
    for (size_t i = 0; i < p->n_phases; i++)
        profile_free(p->phases[i].profile);
    free(p->phases);
    free(p->description);
    free(p->source);
    free(p->file);
    free(p);
}

/* ---- Validation context -------------------------------------------------------------------- */

struct ctx {
    const char *text;
    size_t len;
    const char *origin;       /* NULL: messages carry no position (profile_parse_fault) */
    size_t path_skip;         /* leading path elements left out of messages */
    char *err;
    struct jsonpos_step path[MAX_PATH];
    size_t depth;
    profile_resolver resolve; /* NULL: schedule phases by name are rejected */
    void *resolve_ctx;
    bool loading_phase;       /* this parse was started by a resolver */
};

enum where { AT_VALUE, AT_KEY };

static void push_key(struct ctx *c, const char *key)
{
    if (c->depth < MAX_PATH)
        c->path[c->depth] = (struct jsonpos_step){.key = key, .index = 0};
    c->depth++;
}

static void push_index(struct ctx *c, size_t index)
{
    if (c->depth < MAX_PATH)
        c->path[c->depth] = (struct jsonpos_step){.key = NULL, .index = index};
    c->depth++;
}

static void pop(struct ctx *c)
{
    c->depth--;
}

/* "routes.confirm.latency.of[1].ms", from element c->path_skip on */
static void path_str(const struct ctx *c, char *buf, size_t size)
{
    size_t n = c->depth < MAX_PATH ? c->depth : MAX_PATH;
    if (c->path_skip >= n) {
        buf[0] = '\0';
        return;
    }
    jsonpos_path_str(c->path + c->path_skip, n - c->path_skip, buf, size);
}

/* Writes "origin:line:column: [path: ]message" for the current path and returns -1; without
 * an origin, "[path: ]message". */
__attribute__((format(printf, 4, 5)))
static int fail(struct ctx *c, enum where where, bool with_path, const char *fmt, ...)
{
    size_t used = 0;
    c->err[0] = '\0';
    if (c->origin) {
        size_t depth = c->depth < MAX_PATH ? c->depth : MAX_PATH;
        size_t off, line, col;
        (void)jsonpos_find(c->text, c->len, c->path, depth, where == AT_KEY, &off);
        jsonpos_line_col(c->text, c->len, off, &line, &col);
        int w = snprintf(c->err, ERR_LEN, "%s:%zu:%zu: ", c->origin, line, col);
        used = w < 0 ? 0 : (size_t)w;
    }
    if (with_path && c->depth > c->path_skip && used < ERR_LEN) {
        char p[160];
        path_str(c, p, sizeof(p));
        int w = snprintf(c->err + used, ERR_LEN - used, "%s: ", p);
        used += w < 0 ? 0 : (size_t)w;
    }
    if (used < ERR_LEN) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err + used, ERR_LEN - used, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* A key as it may be quoted in a message: at most 64 bytes, control bytes shown as '?'. */
static void quote_key(const char *key, char out[80])
{
    size_t n = 0;
    for (; key[n] != '\0' && n < 64; n++)
        out[n] = (unsigned char)key[n] < 0x20 || key[n] == 0x7f ? '?' : key[n];
    if (key[n] != '\0') {
        memcpy(out + n, "...", 3);
        n += 3;
    }
    out[n] = '\0';
}

/* Rejects `key` (the current path's last element is pushed by the caller) as unknown, suggesting
 * the nearest of `known` (NULL-terminated) within two edits. */
static int fail_unknown_key(struct ctx *c, const char *what, const char *key,
                            const char *const *known)
{
    const char *best = jsonpos_suggest(key, known);
    char q[80];
    quote_key(key, q);
    if (best != NULL)
        return fail(c, AT_KEY, false, "unknown %s \"%s\" (did you mean \"%s\"?)", what, q, best);
    return fail(c, AT_KEY, false, "unknown %s \"%s\"", what, q);
}

static bool in_list(const char *key, const char *const *list)
{
    for (size_t i = 0; list[i] != NULL; i++)
        if (strcmp(key, list[i]) == 0)
            return true;
    return false;
}

/* ---- Values ----------------------------------------------------------------------------------
 * Each getter looks up `key` in `obj`. Present and valid: stores it and returns 0. Absent:
 * returns 1 with *out untouched if optional, else fails with "missing" at `obj`. Invalid: fails
 * at the value. On failure the path is left pushed: the caller only returns -1. */

/* Pushes `key` and returns its value; absent → NULL with *rc = 1 (optional) or -1 (required). */
static json_t *enter(struct ctx *c, json_t *obj, const char *key, bool required, int *rc)
{
    json_t *v = json_object_get(obj, key);
    if (v == NULL) {
        *rc = required ? fail(c, AT_VALUE, true, "missing \"%s\"", key) : 1;
        return NULL;
    }
    push_key(c, key);
    *rc = 0;
    return v;
}

/* Fails at the first key of `obj` not in `known`. */
static int check_keys(struct ctx *c, json_t *obj, const char *const *known)
{
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        if (!in_list(key, known)) {
            push_key(c, key);
            return fail_unknown_key(c, "key", key, known);
        }
    }
    return 0;
}

enum lower { LOW_GE0, LOW_GT0, LOW_GE1 };

/* A finite number, bounded below by `low` and, if `max_unit` is not NULL, above by `max` (a
 * duration: one day in that unit). */
static int get_num(struct ctx *c, json_t *obj, const char *key, bool required, enum lower low,
                   double max, const char *max_unit, double *out)
{
    int rc;
    json_t *v = enter(c, obj, key, required, &rc);
    if (v == NULL)
        return rc;
    if (!json_is_number(v))
        return fail(c, AT_VALUE, true, "expected a number");
    double x = json_number_value(v);
    if (!isfinite(x))
        return fail(c, AT_VALUE, true, "must be a finite number");
    if (low == LOW_GE0 && x < 0)
        return fail(c, AT_VALUE, true, "must not be negative");
    if (low == LOW_GT0 && x <= 0)
        return fail(c, AT_VALUE, true, "must be greater than 0");
    if (low == LOW_GE1 && x < 1)
        return fail(c, AT_VALUE, true, "must be at least 1");
    if (max_unit != NULL && x > max)
        return fail(c, AT_VALUE, true, "must be at most %.0f %s (one day)", max, max_unit);
    pop(c);
    *out = x;
    return 0;
}

/* A required time in ms: a finite number in [0, MAX_MS]. */
static int get_ms(struct ctx *c, json_t *obj, const char *key, double *out)
{
    return get_num(c, obj, key, true, LOW_GE0, MAX_MS, "ms", out);
}

/* A JSON integer in [lo, hi]; anything else is rejected as "expected <what>". */
static int get_int(struct ctx *c, json_t *obj, const char *key, bool required, int64_t lo,
                   int64_t hi, const char *what, int64_t *out)
{
    int rc;
    json_t *v = enter(c, obj, key, required, &rc);
    if (v == NULL)
        return rc;
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return fail(c, AT_VALUE, true, "expected %s", what);
    pop(c);
    *out = json_integer_value(v);
    return 0;
}

/* An HTTP status for an injected rejection: an integer in 400..599. */
static int get_status(struct ctx *c, json_t *obj, const char *key, bool required, int *out)
{
    int64_t s;
    int rc = get_int(c, obj, key, required, 400, 599, "an HTTP status in 400..599", &s);
    if (rc == 0)
        *out = (int)s;
    return rc;
}

/* One of `names` (NULL-terminated); *out is its index. */
static int get_enum(struct ctx *c, json_t *obj, const char *key, bool required,
                    const char *const *names, int *out)
{
    int rc;
    json_t *v = enter(c, obj, key, required, &rc);
    if (v == NULL)
        return rc;
    const char *s = json_string_value(v); /* NULL if not a string */
    for (int i = 0; s != NULL && names[i] != NULL; i++) {
        if (strcmp(s, names[i]) == 0) {
            pop(c);
            *out = i;
            return 0;
        }
    }
    char list[160] = "";
    size_t used = 0;
    for (size_t i = 0; names[i] != NULL && used < sizeof(list); i++) {
        const char *sep = i == 0 ? "" : names[i + 1] == NULL ? " or " : ", ";
        int w = snprintf(list + used, sizeof(list) - used, "%s\"%s\"", sep, names[i]);
        used += w < 0 ? 0 : (size_t)w;
    }
    return fail(c, AT_VALUE, true, "expected %s", list);
}

static int get_bool(struct ctx *c, json_t *obj, const char *key, bool *out)
{
    int rc;
    json_t *v = enter(c, obj, key, false, &rc);
    if (v == NULL)
        return rc;
    if (!json_is_boolean(v))
        return fail(c, AT_VALUE, true, "expected true or false");
    pop(c);
    *out = json_is_true(v);
    return 0;
}

/* Replaces *out (owned) with a copy of `s`; fails at the current path when out of memory. */
static int set_str(struct ctx *c, const char *s, char **out)
{
    char *copy = strdup(s);
    if (copy == NULL)
        return fail(c, AT_VALUE, true, "out of memory");
    free(*out);
    *out = copy;
    return 0;
}

/* An error code as Toss writes them: [A-Z0-9_]+. Stored as an owned copy in *out. */
static int get_code(struct ctx *c, json_t *obj, const char *key, bool required, char **out)
{
    int rc;
    json_t *v = enter(c, obj, key, required, &rc);
    if (v == NULL)
        return rc;
    const char *s = json_string_value(v);
    bool ok = s != NULL && s[0] != '\0';
    for (size_t i = 0; ok && s[i] != '\0'; i++)
        ok = (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_';
    if (!ok)
        return fail(c, AT_VALUE, true, "expected an error code ([A-Z0-9_]+)");
    if (set_str(c, s, out) != 0)
        return -1;
    pop(c);
    return 0;
}

static const char *const BODIES[] = {"json", "html", "empty", NULL};
static const enum body_kind BODY_KINDS[] = {BODY_JSON, BODY_HTML, BODY_EMPTY};

static int get_body(struct ctx *c, json_t *obj, enum body_kind *out)
{
    int i;
    int rc = get_enum(c, obj, "body", false, BODIES, &i);
    if (rc == 0)
        *out = BODY_KINDS[i];
    return rc;
}

/* ---- Retry-After ----------------------------------------------------------------------------- */

static const char *const RA_KEYS[] = {"format", "value", NULL};
static const char *const RA_FORMATS[] = {"seconds", "http-date", "none", "raw", NULL};
static const enum retry_after_format RA_FORMAT_IDS[] = {RA_SECONDS, RA_HTTP_DATE, RA_NONE,
                                                        RA_RAW};

/* "retry_after": {"format": ..., "value": N | "auto" | "raw"} of `obj`, if present; *out keeps
 * the caller's default when absent. */
static int get_retry_after(struct ctx *c, json_t *obj, struct retry_after *out)
{
    int rc;
    json_t *ra = enter(c, obj, "retry_after", false, &rc);
    if (ra == NULL)
        return rc;
    if (!json_is_object(ra))
        return fail(c, AT_VALUE, true, "expected an object {\"format\": ..., \"value\": ...}");
    if (check_keys(c, ra, RA_KEYS) != 0)
        return -1;
    int f;
    if (get_enum(c, ra, "format", true, RA_FORMATS, &f) != 0)
        return -1;
    free(out->raw);
    *out = (struct retry_after){.format = RA_FORMAT_IDS[f]};
    json_t *v = json_object_get(ra, "value");
    switch (out->format) {
    case RA_NONE:
        if (v != NULL) {
            push_key(c, "value");
            return fail(c, AT_KEY, false, "format \"none\" sends no header and takes no value");
        }
        break;
    case RA_RAW: {
        if (v == NULL)
            return fail(c, AT_VALUE, true, "missing \"value\" (the header's bytes)");
        push_key(c, "value");
        const char *s = json_string_value(v);
        if (s == NULL)
            return fail(c, AT_VALUE, true, "expected a string (sent byte-for-byte)");
        for (size_t i = 0; s[i] != '\0'; i++)
            if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
                return fail(c, AT_VALUE, true, "must be printable ASCII (no CR, LF or control "
                                               "bytes)");
        if (set_str(c, s, &out->raw) != 0)
            return -1;
        pop(c);
        break;
    }
    case RA_SECONDS:
    case RA_HTTP_DATE:
        if (v == NULL || (json_is_string(v) && strcmp(json_string_value(v), "auto") == 0)) {
            out->is_auto = true;
            break;
        }
        push_key(c, "value");
        if (json_is_integer(v) && json_integer_value(v) > MAX_RETRY_AFTER_S)
            return fail(c, AT_VALUE, true, "Retry-After above 2^31-1");
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return fail(c, AT_VALUE, true, "expected whole seconds (0..2147483647) or \"auto\" "
                                           "(format \"raw\" sends anything else)");
        out->seconds = (uint32_t)json_integer_value(v);
        pop(c);
        break;
    }
    pop(c);
    return 0;
}

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

static int parse_dist(struct ctx *c, json_t *obj, struct latency_dist *out, bool in_mixture);

/* The "of" array of a mixture; `c`'s path is at the mixture object. */
static int parse_mixture(struct ctx *c, json_t *obj, struct latency_dist *out)
{
    json_t *of = json_object_get(obj, "of");
    if (of == NULL)
        return fail(c, AT_VALUE, true, "missing \"of\"");
    push_key(c, "of");
    if (!json_is_array(of))
        return fail(c, AT_VALUE, true, "expected an array");
    size_t n = json_array_size(of);
    if (n == 0)
        return fail(c, AT_VALUE, true, "a mixture needs at least one part");
    out->parts = calloc(n, sizeof(*out->parts));
    if (out->parts == NULL)
        return fail(c, AT_VALUE, true, "out of memory");
    out->n_parts = n;
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) {
        json_t *part = json_array_get(of, i);
        push_index(c, i);
        if (!json_is_object(part))
            return fail(c, AT_VALUE, true, "expected an object");
        json_t *w = json_object_get(part, "weight");
        if (w == NULL)
            return fail(c, AT_VALUE, true, "missing \"weight\"");
        push_key(c, "weight");
        if (!json_is_number(w))
            return fail(c, AT_VALUE, true, "expected a number");
        double x = json_number_value(w);
        if (!isfinite(x) || x <= 0)
            return fail(c, AT_VALUE, true, "must be a number greater than 0");
        pop(c);
        out->parts[i].weight = x;
        sum += x;
        if (parse_dist(c, part, &out->parts[i].dist, true) != 0)
            return -1;
        pop(c);
    }
    if (!isfinite(sum))
        return fail(c, AT_VALUE, true, "the weights' sum is too large");
    for (size_t i = 0; i < n; i++)
        out->parts[i].weight /= sum;
    pop(c);
    return 0;
}

/* A DIST object; `c`'s path is at it. On error *out may hold parts: the caller's fini frees
 * them. */
static int parse_dist(struct ctx *c, json_t *obj, struct latency_dist *out, bool in_mixture)
{
    if (!json_is_object(obj))
        return fail(c, AT_VALUE, true, "expected an object");
    json_t *dv = json_object_get(obj, "dist");
    if (dv == NULL)
        return fail(c, AT_VALUE, true, "missing \"dist\"");
    push_key(c, "dist");
    if (!json_is_string(dv))
        return fail(c, AT_VALUE, true, "expected a string");
    const struct dist_spec *spec = NULL;
    for (size_t i = 0; i < N_DISTS; i++)
        if (strcmp(json_string_value(dv), DISTS[i].name) == 0)
            spec = &DISTS[i];
    if (spec == NULL) {
        char q[80];
        quote_key(json_string_value(dv), q);
        return fail(c, AT_VALUE, true,
                    "unknown dist \"%s\" (expected fixed, uniform, normal, lognormal, "
                    "exponential or mixture)", q);
    }
    if (in_mixture && spec->kind == DIST_MIXTURE)
        return fail(c, AT_VALUE, true, "a mixture cannot contain a mixture");
    pop(c);

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
        if (!in_list(key, known)) {
            push_key(c, key);
            return fail_unknown_key(c, "key", key, known);
        }
    }

    out->kind = spec->kind;
    switch (spec->kind) {
    case DIST_FIXED:
        if (get_ms(c, obj, "ms", &out->a) != 0)
            return -1;
        break;
    case DIST_UNIFORM:
        if (get_ms(c, obj, "min_ms", &out->a) != 0 || get_ms(c, obj, "max_ms", &out->b) != 0)
            return -1;
        if (out->a > out->b) {
            push_key(c, "max_ms");
            return fail(c, AT_VALUE, true, "must not be less than min_ms (%g < %g)", out->b,
                        out->a);
        }
        break;
    case DIST_NORMAL:
        if (get_ms(c, obj, "mean_ms", &out->a) != 0 ||
            get_ms(c, obj, "stddev_ms", &out->b) != 0)
            return -1;
        break;
    case DIST_LOGNORMAL: {
        double median, p99;
        if (get_ms(c, obj, "median_ms", &median) != 0 || get_ms(c, obj, "p99_ms", &p99) != 0)
            return -1;
        if (median <= 0) {
            push_key(c, "median_ms");
            return fail(c, AT_VALUE, true, "must be greater than 0");
        }
        if (p99 < median) {
            push_key(c, "p99_ms");
            return fail(c, AT_VALUE, true, "must not be less than median_ms (%g < %g)", p99,
                        median);
        }
        latency_lognormal_init(out, median, p99);
        return 0; /* shown_a/shown_b already hold median/p99 */
    }
    case DIST_EXPONENTIAL:
        if (get_ms(c, obj, "mean_ms", &out->a) != 0)
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
static int parse_attempts(struct ctx *c, json_t *obj, struct fault *f)
{
    int rc;
    json_t *a = enter(c, obj, "attempts", false, &rc);
    if (a == NULL)
        return rc < 0 ? -1 : 0;
    if (!json_is_array(a))
        return fail(c, AT_VALUE, true, "expected an array of attempt numbers (1 is the first)");
    size_t n = json_array_size(a);
    if (n == 0)
        return fail(c, AT_VALUE, true, "must not be empty (leave it out to fire on every "
                                       "attempt)");
    if (n > MAX_ATTEMPTS)
        return fail(c, AT_VALUE, true, "at most %d attempt numbers", MAX_ATTEMPTS);
    f->attempts = calloc(n, sizeof(*f->attempts));
    if (f->attempts == NULL)
        return fail(c, AT_VALUE, true, "out of memory");
    f->n_attempts = n;
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(a, i);
        push_index(c, i);
        if (!json_is_integer(v) || json_integer_value(v) < 1 ||
            json_integer_value(v) > UINT32_MAX)
            return fail(c, AT_VALUE, true, "expected a positive integer (an attempt number)");
        f->attempts[i] = (uint32_t)json_integer_value(v);
        for (size_t j = 0; j < i; j++)
            if (f->attempts[j] == f->attempts[i])
                return fail(c, AT_VALUE, true, "attempt %u is listed twice", f->attempts[i]);
        pop(c);
    }
    pop(c);
    return 0;
}

static int parse_error_fault(struct ctx *c, json_t *obj, struct fault *f)
{
    if (get_code(c, obj, "code", true, &f->code) != 0)
        return -1;
    int rc = get_status(c, obj, "status", false, &f->status);
    if (rc < 0)
        return -1;
    if (rc == 1) {
        const struct toss_error *te = toss_error_find(f->code);
        if (te == NULL) {
            push_key(c, "code");
            return fail(c, AT_VALUE, true,
                        "\"%s\" is not in the error table, so \"status\" is required", f->code);
        }
        f->status = te->status;
    }
    json_t *m;
    if ((m = enter(c, obj, "message", false, &rc)) != NULL) {
        if (!json_is_string(m))
            return fail(c, AT_VALUE, true, "expected a string");
        if (set_str(c, json_string_value(m), &f->message) != 0)
            return -1;
        pop(c);
    }
    int when = 0;
    if (get_body(c, obj, &f->body) < 0 || get_bool(c, obj, "commit", &f->commit) < 0 ||
        get_enum(c, obj, "when", false, WHENS, &when) < 0 ||
        get_retry_after(c, obj, &f->retry_after) < 0)
        return -1;
    f->when_before = when == 1;
    if (f->commit && f->when_before) {
        /* The payment can only commit if the request got as far as its latency. */
        push_key(c, "commit");
        return fail(c, AT_VALUE, false, "commit: true is only valid with when: after");
    }
    return 0;
}

static int parse_drop_fault(struct ctx *c, json_t *obj, struct fault *f)
{
    int how;
    if (get_enum(c, obj, "how", true, HOWS, &how) != 0)
        return -1;
    f->how = HOW_IDS[how];
    if (f->how == HOW_TRUNCATE && f->kind == FAULT_DROP_REQUEST) {
        /* A truncated response needs a response: a dropped request never produced one. */
        push_key(c, "how");
        return fail(c, AT_VALUE, true, "truncate is only valid for drop_response");
    }
    f->hang_ms = 30000;
    if (json_object_get(obj, "hang_ms") != NULL && f->how != HOW_HANG) {
        push_key(c, "hang_ms");
        return fail(c, AT_KEY, false, "hang_ms is only valid with how: hang");
    }
    return get_num(c, obj, "hang_ms", false, LOW_GE0, MAX_MS, "ms", &f->hang_ms) < 0 ? -1 : 0;
}

/* One fault object; `c`'s path is at it. */
static int parse_fault(struct ctx *c, json_t *obj, struct fault *f)
{
    f->times = -1;
    if (!json_is_object(obj))
        return fail(c, AT_VALUE, true, "expected an object");
    int kind;
    if (get_enum(c, obj, "kind", true, FAULT_KINDS, &kind) != 0)
        return -1;
    f->kind = FAULT_KIND_IDS[kind];
    const char *const *known = f->kind == FAULT_ERROR ? ERROR_KEYS
                               : f->kind == FAULT_DRIP ? DRIP_KEYS
                                                       : DROP_KEYS;
    if (check_keys(c, obj, known) != 0)
        return -1;

    int rc;
    json_t *p = enter(c, obj, "p", true, &rc);
    if (p == NULL)
        return -1;
    if (!json_is_number(p) || !(json_number_value(p) >= 0 && json_number_value(p) <= 1))
        return fail(c, AT_VALUE, true, "expected a probability in [0, 1]");
    f->p = json_number_value(p);
    pop(c);
    if (parse_attempts(c, obj, f) != 0 ||
        get_int(c, obj, "times", false, 0, INT64_MAX, "a non-negative integer", &f->times) < 0)
        return -1;

    switch (f->kind) {
    case FAULT_ERROR:
        return parse_error_fault(c, obj, f);
    case FAULT_DROP_REQUEST:
    case FAULT_DROP_RESPONSE:
        return parse_drop_fault(c, obj, f);
    case FAULT_DRIP:
        if (get_num(c, obj, "duration_ms", true, LOW_GT0, MAX_MS, "ms", &f->duration_ms) != 0)
            return -1;
        return 0;
    case FAULT_NONE:
        break;
    }
    return 0;
}

/* Running sums of p over a route's faults as they are added, per attempt: SPEC §4 draws against
 * the faults eligible for the attempt, so each attempt's sum, not the route's, must stay <= 1. */
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

static int parse_faults_into(struct ctx *c, json_t *arr, struct route_profile *rp,
                             struct p_sums *sums)
{
    size_t n = json_array_size(arr);
    if (n > MAX_FAULTS)
        return fail(c, AT_VALUE, true, "at most %d faults per route", MAX_FAULTS);
    rp->faults = calloc(n, sizeof(*rp->faults));
    if (rp->faults == NULL)
        return fail(c, AT_VALUE, true, "out of memory");
    for (size_t i = 0; i < n; i++) {
        push_index(c, i);
        rp->n_faults = i + 1;
        if (parse_fault(c, json_array_get(arr, i), &rp->faults[i]) != 0)
            return -1;
        /* Checked as each fault is added, so the message points at the one that tips it. */
        double sum;
        uint32_t attempt;
        push_key(c, "p");
        if (p_sums_add(sums, &rp->faults[i], &sum, &attempt) != 0)
            return fail(c, AT_VALUE, true, "out of memory");
        if (sum > 1 + P_SUM_EPS && attempt != 0)
            return fail(c, AT_VALUE, true, "the faults' p for attempt %u sum to %g, more than 1",
                        attempt, sum);
        if (sum > 1 + P_SUM_EPS)
            return fail(c, AT_VALUE, true, "the faults' p sum to %g, more than 1", sum);
        pop(c);
        pop(c);
    }
    return 0;
}

/* "faults": [...] of a route; `c`'s path is at it. */
static int parse_faults(struct ctx *c, json_t *arr, struct route_profile *rp)
{
    if (!json_is_array(arr))
        return fail(c, AT_VALUE, true, "expected an array of faults");
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

static int parse_throttle(struct ctx *c, json_t *obj, struct throttle *t)
{
    if (!json_is_object(obj))
        return fail(c, AT_VALUE, true, "expected an object");
    int kind;
    if (get_enum(c, obj, "kind", true, THROTTLE_KINDS, &kind) != 0)
        return -1;
    t->kind = kind == 0 ? THROTTLE_TOKEN_BUCKET : THROTTLE_WINDOW;
    if (check_keys(c, obj, t->kind == THROTTLE_TOKEN_BUCKET ? BUCKET_KEYS : WINDOW_KEYS) != 0)
        return -1;
    if (t->kind == THROTTLE_TOKEN_BUCKET) {
        if (get_num(c, obj, "rate_per_s", true, LOW_GT0, 0, NULL, &t->rate_per_s) != 0 ||
            get_num(c, obj, "burst", true, LOW_GE1, 0, NULL, &t->burst) != 0)
            return -1;
    } else {
        if (get_num(c, obj, "period_s", true, LOW_GT0, MAX_S, "s", &t->period_s) != 0 ||
            get_num(c, obj, "throttled_s", true, LOW_GT0, MAX_S, "s", &t->throttled_s) != 0 ||
            get_num(c, obj, "offset_s", false, LOW_GE0, MAX_S, "s", &t->offset_s) < 0)
            return -1;
        if (t->throttled_s > t->period_s) {
            push_key(c, "throttled_s");
            return fail(c, AT_VALUE, true, "must not be more than period_s (%g > %g)",
                        t->throttled_s, t->period_s);
        }
    }
    int64_t status = 503;
    if (get_int(c, obj, "status", false, 429, 503, "503 or 429", &status) < 0)
        return -1;
    if (status != 503 && status != 429) {
        push_key(c, "status");
        return fail(c, AT_VALUE, true, "expected 503 or 429");
    }
    t->status = (int)status;
    int rc = get_code(c, obj, "code", false, &t->code);
    if (rc < 0)
        return -1;
    if (rc == 1 &&
        set_str(c, t->status == 429 ? "TOO_MANY_REQUESTS" : "SERVICE_UNAVAILABLE", &t->code) != 0)
        return -1;
    t->retry_after = (struct retry_after){.format = RA_SECONDS, .is_auto = true};
    if (get_retry_after(c, obj, &t->retry_after) < 0 || get_body(c, obj, &t->body) < 0)
        return -1;
    /* An "auto" Retry-After must be honest (SPEC §4: a client that comes back exactly when told
     * is admitted); with none, a fixed value or raw, the profile's author chose what to say. */
    if (t->kind == THROTTLE_WINDOW && t->retry_after.is_auto &&
        t->retry_after.format != RA_NONE && t->retry_after.format != RA_RAW &&
        t->throttled_s < t->period_s && !window_retry_reachable(t)) {
        push_key(c, "period_s");
        return fail(c, AT_VALUE, true,
                    "no whole-second Retry-After can leave this window (the open part "
                    "%g s repeats every %g s, so a client returning after whole seconds "
                    "lands in the window again); use an open part of at least 1 s, a "
                    "period that does not divide 1 s, or \"retry_after\": {\"format\": \"none\"}",
                    t->period_s - t->throttled_s, t->period_s);
    }
    return 0;
}

static int parse_concurrency(struct ctx *c, json_t *obj, struct concurrency *cc)
{
    static const char *const known[] = {"max_in_flight", "status", "code", NULL};
    if (!json_is_object(obj))
        return fail(c, AT_VALUE, true, "expected an object");
    if (check_keys(c, obj, known) != 0)
        return -1;
    int64_t max;
    if (get_int(c, obj, "max_in_flight", true, 1, UINT32_MAX, "a positive integer", &max) != 0)
        return -1;
    cc->max_in_flight = (uint32_t)max;
    cc->status = 503;
    if (get_status(c, obj, "status", false, &cc->status) < 0)
        return -1;
    int rc = get_code(c, obj, "code", false, &cc->code);
    if (rc < 0 || (rc == 1 && set_str(c, "SERVICE_UNAVAILABLE", &cc->code) != 0))
        return -1;
    return 0;
}

/* ---- Routes ---------------------------------------------------------------------------------- */

static const char *const ROUTE_KEYS[] = {"queue_latency", "latency", "faults", "throttle",
                                         "concurrency", NULL};

static int parse_route(struct ctx *c, json_t *obj, struct route_profile *rp)
{
    if (!json_is_object(obj))
        return fail(c, AT_VALUE, true, "expected an object");
    rp->present = true;
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        push_key(c, key);
        int rc;
        if (strcmp(key, "queue_latency") == 0)
            rc = parse_dist(c, v, &rp->queue_latency, false);
        else if (strcmp(key, "latency") == 0)
            rc = parse_dist(c, v, &rp->latency, false);
        else if (strcmp(key, "faults") == 0)
            rc = parse_faults(c, v, rp);
        else if (strcmp(key, "throttle") == 0)
            rc = parse_throttle(c, v, &rp->throttle);
        else if (strcmp(key, "concurrency") == 0)
            rc = parse_concurrency(c, v, &rp->concurrency);
        else
            rc = fail_unknown_key(c, "key", key, ROUTE_KEYS);
        if (rc != 0)
            return -1;
        pop(c);
    }
    return 0;
}

static int parse_routes(struct ctx *c, json_t *obj, struct profile *p)
{
    if (!json_is_object(obj))
        return fail(c, AT_VALUE, true, "expected an object");
    static const char *const names[] = {"confirm", "cancel", "read", "default", NULL};
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        push_key(c, key);
        int r = 0;
        while (names[r] != NULL && strcmp(names[r], key) != 0)
            r++;
        if (names[r] == NULL)
            return fail_unknown_key(c, "route", key, names);
        if (parse_route(c, v, &p->routes[r]) != 0)
            return -1;
        pop(c);
    }
    return 0;
}

static int parse_idempotency(struct ctx *c, json_t *obj, struct profile *p)
{
    static const char *const known[] = {"on_body_mismatch", NULL};
    if (!json_is_object(obj))
        return fail(c, AT_VALUE, true, "expected an object");
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        push_key(c, key);
        if (!in_list(key, known))
            return fail_unknown_key(c, "key", key, known);
        const char *s = json_string_value(v); /* NULL if not a string */
        if (s != NULL && strcmp(s, "replay") == 0)
            p->on_body_mismatch = BODY_MISMATCH_REPLAY;
        else if (s != NULL && strcmp(s, "reject") == 0)
            p->on_body_mismatch = BODY_MISMATCH_REJECT;
        else
            return fail(c, AT_VALUE, true, "expected \"replay\" or \"reject\"");
        pop(c);
    }
    return 0;
}

/* ---- Profiles and schedules ------------------------------------------------------------------ */

static int parse_top(struct ctx *c, json_t *root, struct profile *p, bool is_phase);

/* A phase's "profile" given by name; `c`'s path is at that value. */
static int resolve_phase(struct ctx *c, const char *name, struct schedule_phase *ph)
{
    if (!profile_name_valid(name)) {
        char q[80];
        quote_key(name, q);
        return fail(c, AT_VALUE, true, "\"%s\" is not a valid name ([a-z0-9_-]{1,64})", q);
    }
    if (c->resolve == NULL || c->loading_phase)
        return fail(c, AT_VALUE, true, "schedule phases by name need a profiles directory");
    char rerr[ERR_LEN] = "";
    struct profile *loaded = NULL;
    if (c->resolve(name, &loaded, rerr, c->resolve_ctx) != 0 || loaded == NULL) {
        profile_free(loaded);
        return fail(c, AT_VALUE, true, "%s", rerr[0] != '\0' ? rerr : "cannot load the profile");
    }
    ph->profile = loaded;
    if (loaded->phases != NULL)
        return fail(c, AT_VALUE, true, "profile \"%s\" is a schedule: a schedule's phases "
                                       "cannot be schedules", name);
    return 0;
}

/* "schedule": [{"for_s": ..., "profile": NAME | {...}}, ...]; `c`'s path is at it. */
static int parse_schedule(struct ctx *c, json_t *arr, struct profile *p)
{
    static const char *const known[] = {"for_s", "profile", NULL};
    if (!json_is_array(arr))
        return fail(c, AT_VALUE, true, "expected an array of phases");
    size_t n = json_array_size(arr);
    if (n == 0)
        return fail(c, AT_VALUE, true, "a schedule needs at least one phase");
    p->phases = calloc(n, sizeof(*p->phases));
    if (p->phases == NULL)
        return fail(c, AT_VALUE, true, "out of memory");
    p->n_phases = n;
    for (size_t i = 0; i < n; i++) {
        json_t *obj = json_array_get(arr, i);
        struct schedule_phase *ph = &p->phases[i];
        push_index(c, i);
        if (!json_is_object(obj))
            return fail(c, AT_VALUE, true, "expected an object {\"for_s\": ..., \"profile\": ...}");
        if (check_keys(c, obj, known) != 0 ||
            get_num(c, obj, "for_s", true, LOW_GT0, MAX_S, "s", &ph->for_s) != 0)
            return -1;
        int rc;
        json_t *v = enter(c, obj, "profile", true, &rc);
        if (v == NULL)
            return -1;
        if (json_is_string(v)) {
            if (resolve_phase(c, json_string_value(v), ph) != 0)
                return -1;
        } else if (json_is_object(v)) {
            ph->profile = calloc(1, sizeof(*ph->profile));
            if (ph->profile == NULL)
                return fail(c, AT_VALUE, true, "out of memory");
            if (parse_top(c, v, ph->profile, true) != 0)
                return -1;
        } else {
            return fail(c, AT_VALUE, true, "expected a profile name or an inline profile object");
        }
        pop(c);
        pop(c);
    }
    return 0;
}

static const char *const TOP_KEYS[] = {"name", "description", "seed", "idempotency", "routes",
                                       "schedule", "repeat", NULL};

/* A whole profile, or a phase's inline profile (is_phase: `c`'s path is at it). */
static int parse_top(struct ctx *c, json_t *root, struct profile *p, bool is_phase)
{
    if (!json_is_object(root))
        return fail(c, AT_VALUE, false, "a profile must be a JSON object");
    bool is_schedule = json_object_get(root, "schedule") != NULL;
    if (is_schedule && (is_phase || c->loading_phase)) {
        push_key(c, "schedule");
        return fail(c, AT_KEY, true, "a schedule phase cannot itself be a schedule");
    }
    if (is_schedule && json_object_get(root, "routes") != NULL) {
        push_key(c, "schedule");
        return fail(c, AT_KEY, true, "a profile has either \"routes\" or \"schedule\", not both");
    }
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        push_key(c, key);
        if (strcmp(key, "name") == 0) {
            if (!json_is_string(v))
                return fail(c, AT_VALUE, true, "expected a string");
            if (!profile_name_valid(json_string_value(v))) {
                char q[80];
                quote_key(json_string_value(v), q);
                return fail(c, AT_VALUE, true, "\"%s\" is not a valid name ([a-z0-9_-]{1,64})",
                            q);
            }
            strcpy(p->name, json_string_value(v));
        } else if (strcmp(key, "description") == 0) {
            if (!json_is_string(v))
                return fail(c, AT_VALUE, true, "expected a string");
            if (set_str(c, json_string_value(v), &p->description) != 0)
                return -1;
        } else if (strcmp(key, "seed") == 0) {
            if (!json_is_integer(v) || json_integer_value(v) < 0)
                return fail(c, AT_VALUE, true, "expected a non-negative integer");
            p->has_seed = true;
            p->seed = (uint64_t)json_integer_value(v);
        } else if (strcmp(key, "idempotency") == 0) {
            /* Which phase's policy applies is the phase's business: one place to set it. */
            if (is_schedule)
                return fail(c, AT_KEY, true, "a schedule takes \"idempotency\" from its phases' "
                                             "profiles");
            if (parse_idempotency(c, v, p) != 0)
                return -1;
        } else if (strcmp(key, "routes") == 0) {
            if (parse_routes(c, v, p) != 0)
                return -1;
        } else if (strcmp(key, "schedule") == 0) {
            if (parse_schedule(c, v, p) != 0)
                return -1;
        } else if (strcmp(key, "repeat") == 0) {
            if (!is_schedule)
                return fail(c, AT_KEY, true, "only a schedule can repeat");
            if (!json_is_boolean(v))
                return fail(c, AT_VALUE, true, "expected true or false");
            p->repeat = json_is_true(v);
        } else {
            return fail_unknown_key(c, "key", key, TOP_KEYS);
        }
        pop(c);
    }
    if (json_object_get(root, "name") == NULL)
        return fail(c, AT_VALUE, true, "missing required key \"name\"");
    if (!is_schedule && json_object_get(root, "routes") == NULL)
        return fail(c, AT_VALUE, true, "missing required key \"routes\"");
    return 0;
}

/* ---- Parse errors ---------------------------------------------------------------------------- */

static void parse_error(const char *text, size_t len, const char *origin, const json_error_t *je,
                        char err[ERR_LEN])
{
    size_t line, col;
    jsonpos_line_col(text, len, jsonpos_error_offset(text, len, je), &line, &col);
    const char *near = strstr(je->text, " near '");
    if (json_error_code(je) == json_error_duplicate_key && near != NULL) {
        /* near + 7 is the key token with its quotes, then jansson's closing '\''. */
        int n = (int)strlen(near + 7) - 1;
        snprintf(err, ERR_LEN, "%s:%zu:%zu: duplicate key %.*s", origin, line, col,
                 n > 0 ? n : 0, near + 7);
    } else if (strncmp(je->text, "'}' expected", 12) == 0) {
        /* jansson says this where a ',' is missing between members, the usual slip. */
        snprintf(err, ERR_LEN, "%s:%zu:%zu: invalid JSON: ',' or %s", origin, line, col,
                 je->text);
    } else if (strncmp(je->text, "']' expected", 12) == 0) {
        snprintf(err, ERR_LEN, "%s:%zu:%zu: invalid JSON: ',' or %s", origin, line, col,
                 je->text);
    } else {
        snprintf(err, ERR_LEN, "%s:%zu:%zu: invalid JSON: %s", origin, line, col, je->text);
    }
}

/* ---- Entry points ---------------------------------------------------------------------------- */

/* Validate `root` (consumed) with `c` into *out. 0, or -1 with the message in c->err. */
static int parse_root(struct ctx *c, json_t *root, struct profile **out)
{
    struct profile *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        json_decref(root);
        snprintf(c->err, ERR_LEN, "%s: out of memory", c->origin ? c->origin : "profile");
        return -1;
    }
    parse_depth++;
    int rc = parse_top(c, root, p, false);
    parse_depth--;
    if (rc == 0)
        p->source = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15));
    json_decref(root);
    if (rc != 0) {
        profile_free(p);
        return -1;
    }
    *out = p;
    return 0;
}

int profile_parse(const char *text, size_t len, const char *origin, profile_resolver resolve,
                  void *resolve_ctx, struct profile **out, char err[ERR_LEN])
{
    *out = NULL;
    if (text == NULL) {
        text = "";
        len = 0;
    }
    if (origin == NULL)
        origin = "profile";
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (root == NULL) {
        parse_error(text, len, origin, &je, err);
        return -1;
    }
    struct ctx c = {.text = text,
                    .len = len,
                    .origin = origin,
                    .err = err,
                    .resolve = resolve,
                    .resolve_ctx = resolve_ctx,
                    .loading_phase = parse_depth > 0};
    return parse_root(&c, root, out);
}

int profile_parse_fault(const char *fault_json, size_t len, struct profile **out,
                        char err[ERR_LEN])
{
    *out = NULL;
    json_error_t je;
    json_t *fault = json_loadb(fault_json, len, JSON_REJECT_DUPLICATES, &je);
    if (fault == NULL) {
        snprintf(err, ERR_LEN, "invalid JSON: %s", je.text);
        return -1;
    }
    /* The fault as the only one of the default route; messages name fields from inside it. */
    json_t *root = json_pack("{s:s,s:{s:{s:[o]}}}", "name", "x-fakegate-fault", "routes",
                             "default", "faults", fault);
    if (root == NULL) {
        snprintf(err, ERR_LEN, "out of memory");
        return -1;
    }
    struct ctx c = {.origin = NULL, .path_skip = 4, .err = err}; /* routes.default.faults[0] */
    return parse_root(&c, root, out);
}

int profile_load_file(const char *path, profile_resolver resolve, void *resolve_ctx,
                      struct profile **out, char err[ERR_LEN])
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(err, ERR_LEN, "%s: %s", path, strerror(errno));
        return -1;
    }
    char *buf = malloc(MAX_FILE_BYTES + 1);
    if (buf == NULL) {
        fclose(f);
        snprintf(err, ERR_LEN, "%s: out of memory", path);
        return -1;
    }
    /* Read one byte past the cap to tell "exactly the cap" from "larger". */
    size_t n = fread(buf, 1, MAX_FILE_BYTES + 1, f);
    int read_errno = ferror(f) ? errno : 0;
    fclose(f);
    int rc = -1;
    if (read_errno != 0)
        snprintf(err, ERR_LEN, "%s: %s", path, strerror(read_errno));
    else if (n > MAX_FILE_BYTES)
        snprintf(err, ERR_LEN, "%s: larger than %d bytes, not a profile", path, MAX_FILE_BYTES);
    else
        rc = profile_parse(buf, n, path, resolve, resolve_ctx, out, err);
    free(buf);
    if (rc == 0 && !((*out)->file = strdup(path))) {
        profile_free(*out);
        *out = NULL;
        snprintf(err, ERR_LEN, "%s: out of memory", path);
        rc = -1;
    }
    return rc;
}
