/* profile.c -- profile JSON → struct profile, validated (SPEC §4).
 * jansson parses; the validator walks the tree keeping the path it is at, and on the first
 * problem a small scanner finds that path's key or value in the original text so the message
 * reads "origin:line:column: ...". Nothing is returned half-built: on error *out is NULL. */
#define _POSIX_C_SOURCE 200809L
#include "profile.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Largest time a profile may give, in ms: one day. */
#define MAX_MS 86400000.0
/* Largest profile file profile_load_file reads. */
#define MAX_FILE_BYTES (1024 * 1024)
/* Deepest path the validator can be at: routes.R.latency.of[i].key is 6. */
#define MAX_PATH 16

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

void profile_free(struct profile *p)
{
    if (p == NULL)
        return;
    for (int i = 0; i < ROUTE_COUNT; i++) {
        latency_dist_fini(&p->routes[i].queue_latency);
        latency_dist_fini(&p->routes[i].latency);
    }
    free(p->description);
    free(p);
}

/* ---- Finding a path in the text ----------------------------------------------------------
 * The text has already been accepted by jansson, so the scanner only needs to step over
 * tokens; it never has to diagnose anything. */

struct path_elem {
    const char *key; /* NULL: an array element */
    size_t index;
};

static bool is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static size_t skip_ws(const char *s, size_t len, size_t i)
{
    while (i < len && is_ws(s[i]))
        i++;
    return i;
}

/* s[i] is an opening quote; returns the offset just past the closing one. */
static size_t skip_string(const char *s, size_t len, size_t i)
{
    for (i++; i < len; i++) {
        if (s[i] == '\\')
            i++;
        else if (s[i] == '"')
            return i + 1;
    }
    return len;
}

/* Steps over one value (scalar, or a whole object/array) starting at or after i. */
static size_t skip_value(const char *s, size_t len, size_t i)
{
    size_t depth = 0;
    do {
        i = skip_ws(s, len, i);
        if (i >= len)
            return len;
        char c = s[i];
        if (c == '"') {
            i = skip_string(s, len, i);
        } else if (c == '{' || c == '[') {
            depth++;
            i++;
        } else if (c == '}' || c == ']') {
            depth--;
            i++;
        } else if (c == ',' || c == ':') {
            i++;
        } else {
            while (i < len && !is_ws(s[i]) && s[i] != ',' && s[i] != ']' && s[i] != '}')
                i++;
        }
    } while (depth > 0);
    return i;
}

/* Does the string token s[start, end) (quotes included) decode to `key`? */
static bool key_matches(const char *s, size_t start, size_t end, const char *key)
{
    const char *raw = s + start + 1;
    size_t n = end - start - 2;
    if (memchr(raw, '\\', n) == NULL)
        return strlen(key) == n && memcmp(raw, key, n) == 0;
    /* Escapes: let jansson decode the token (rare, and only on the error path). */
    json_t *j = json_loadb(s + start, end - start, JSON_DECODE_ANY, NULL);
    bool eq = j != NULL && json_is_string(j) && strcmp(json_string_value(j), key) == 0;
    json_decref(j);
    return eq;
}

/* Byte offset of the value at `path` (or of its last key, if want_key) in valid JSON `s`.
 * Returns the deepest position reached if the path is not found. */
static size_t find_offset(const char *s, size_t len, const struct path_elem *path, size_t depth,
                          bool want_key)
{
    size_t i = skip_ws(s, len, 0);
    for (size_t d = 0; d < depth; d++) {
        const struct path_elem *pe = &path[d];
        if (i >= len || s[i] != (pe->key != NULL ? '{' : '['))
            return i;
        size_t container = i, n = 0;
        i = skip_ws(s, len, i + 1);
        for (;;) {
            if (i >= len || s[i] == '}' || s[i] == ']')
                return container;
            if (pe->key != NULL) {
                size_t k = i, kend = skip_string(s, len, i);
                i = skip_ws(s, len, kend);
                i = skip_ws(s, len, i + 1); /* the ':' */
                if (key_matches(s, k, kend, pe->key)) {
                    if (want_key && d + 1 == depth)
                        return k;
                    break;
                }
            } else if (n++ == pe->index) {
                break;
            }
            i = skip_ws(s, len, skip_value(s, len, i));
            if (i < len && s[i] == ',')
                i = skip_ws(s, len, i + 1);
        }
    }
    return i;
}

static void offset_to_line_col(const char *s, size_t len, size_t off, size_t *line, size_t *col)
{
    size_t ln = 1, line_start = 0;
    if (off > len)
        off = len;
    for (size_t i = 0; i < off; i++) {
        if (s[i] == '\n') {
            ln++;
            line_start = i + 1;
        }
    }
    *line = ln;
    *col = off - line_start + 1;
}

/* ---- Validation context -------------------------------------------------------------------- */

struct ctx {
    const char *text;
    size_t len;
    const char *origin;
    char *err;
    struct path_elem path[MAX_PATH];
    size_t depth;
};

enum where { AT_VALUE, AT_KEY };

static void push_key(struct ctx *c, const char *key)
{
    if (c->depth < MAX_PATH)
        c->path[c->depth] = (struct path_elem){.key = key, .index = 0};
    c->depth++;
}

static void push_index(struct ctx *c, size_t index)
{
    if (c->depth < MAX_PATH)
        c->path[c->depth] = (struct path_elem){.key = NULL, .index = index};
    c->depth++;
}

static void pop(struct ctx *c)
{
    c->depth--;
}

/* "routes.confirm.latency.of[1].ms" */
static void path_str(const struct ctx *c, char *buf, size_t size)
{
    size_t used = 0, n = c->depth < MAX_PATH ? c->depth : MAX_PATH;
    buf[0] = '\0';
    for (size_t i = 0; i < n && used < size; i++) {
        int w;
        if (c->path[i].key != NULL)
            w = snprintf(buf + used, size - used, "%s%s", i > 0 ? "." : "", c->path[i].key);
        else
            w = snprintf(buf + used, size - used, "[%zu]", c->path[i].index);
        if (w < 0)
            break;
        used += (size_t)w;
    }
}

/* Writes "origin:line:column: [path: ]message" for the current path and returns -1. */
__attribute__((format(printf, 4, 5)))
static int fail(struct ctx *c, enum where where, bool with_path, const char *fmt, ...)
{
    size_t depth = c->depth < MAX_PATH ? c->depth : MAX_PATH;
    size_t off = find_offset(c->text, c->len, c->path, depth, where == AT_KEY);
    size_t line, col;
    offset_to_line_col(c->text, c->len, off, &line, &col);
    int w = snprintf(c->err, ERR_LEN, "%s:%zu:%zu: ", c->origin, line, col);
    size_t used = w < 0 ? 0 : (size_t)w;
    if (with_path && c->depth > 0 && used < ERR_LEN) {
        char p[160];
        path_str(c, p, sizeof(p));
        w = snprintf(c->err + used, ERR_LEN - used, "%s: ", p);
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

/* Levenshtein distance, or SIZE_MAX when either string is too long to bother. */
static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    size_t row[65];
    if (la > 64 || lb > 64)
        return SIZE_MAX;
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] == b[j - 1] ? 0 : 1);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

/* Rejects `key` (the current path's last element is pushed by the caller) as unknown, suggesting
 * the nearest of `known` (NULL-terminated) within two edits. */
static int fail_unknown_key(struct ctx *c, const char *what, const char *key,
                            const char *const *known)
{
    const char *best = NULL;
    size_t best_d = 3;
    for (size_t i = 0; known[i] != NULL; i++) {
        size_t d = edit_distance(key, known[i]);
        if (d < best_d && d < strlen(known[i])) {
            best = known[i];
            best_d = d;
        }
    }
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

/* ---- Values ---------------------------------------------------------------------------------- */

/* A time in ms at key `key` of `obj`: a finite number in [0, MAX_MS]. */
static int get_ms(struct ctx *c, json_t *obj, const char *key, double *out)
{
    json_t *v = json_object_get(obj, key);
    if (v == NULL)
        return fail(c, AT_VALUE, true, "missing \"%s\"", key);
    push_key(c, key);
    if (!json_is_number(v))
        return fail(c, AT_VALUE, true, "expected a number");
    double x = json_number_value(v);
    if (!isfinite(x))
        return fail(c, AT_VALUE, true, "must be a finite number");
    if (x < 0)
        return fail(c, AT_VALUE, true, "must not be negative");
    if (x > MAX_MS)
        return fail(c, AT_VALUE, true, "must be at most %.0f ms (one day)", MAX_MS);
    pop(c);
    *out = x;
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

/* ---- Objects --------------------------------------------------------------------------------- */

static const char *const ROUTE_KEYS[] = {"queue_latency", "latency", "faults", "throttle",
                                         "concurrency", NULL};
static const char *const NOT_YET_ROUTE_KEYS[] = {"faults", "throttle", "concurrency", NULL};

static int parse_route(struct ctx *c, json_t *obj, struct route_profile *rp)
{
    if (!json_is_object(obj))
        return fail(c, AT_VALUE, true, "expected an object");
    rp->present = true;
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        push_key(c, key);
        if (strcmp(key, "queue_latency") == 0 || strcmp(key, "latency") == 0) {
            struct latency_dist *d = key[0] == 'q' ? &rp->queue_latency : &rp->latency;
            if (parse_dist(c, v, d, false) != 0)
                return -1;
        } else if (in_list(key, NOT_YET_ROUTE_KEYS)) {
            return fail(c, AT_KEY, true, "not supported yet");
        } else {
            return fail_unknown_key(c, "key", key, ROUTE_KEYS);
        }
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

static const char *const TOP_KEYS[] = {"name", "description", "seed", "idempotency", "routes",
                                       "schedule", "repeat", NULL};

static int parse_top(struct ctx *c, json_t *root, struct profile *p)
{
    if (!json_is_object(root))
        return fail(c, AT_VALUE, false, "a profile must be a JSON object");
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
            free(p->description);
            p->description = strdup(json_string_value(v));
            if (p->description == NULL)
                return fail(c, AT_VALUE, true, "out of memory");
        } else if (strcmp(key, "seed") == 0) {
            if (!json_is_integer(v) || json_integer_value(v) < 0)
                return fail(c, AT_VALUE, true, "expected a non-negative integer");
            p->has_seed = true;
            p->seed = (uint64_t)json_integer_value(v);
        } else if (strcmp(key, "idempotency") == 0) {
            if (parse_idempotency(c, v, p) != 0)
                return -1;
        } else if (strcmp(key, "routes") == 0) {
            if (parse_routes(c, v, p) != 0)
                return -1;
        } else if (strcmp(key, "schedule") == 0 || strcmp(key, "repeat") == 0) {
            return fail(c, AT_KEY, true, "not supported yet");
        } else {
            return fail_unknown_key(c, "key", key, TOP_KEYS);
        }
        pop(c);
    }
    if (json_object_get(root, "name") == NULL)
        return fail(c, AT_VALUE, false, "missing required key \"name\"");
    if (json_object_get(root, "routes") == NULL)
        return fail(c, AT_VALUE, false, "missing required key \"routes\"");
    return 0;
}

/* ---- Parse errors ---------------------------------------------------------------------------- */

/* jansson reports the offset just past the token it stopped at, and quotes that token at the end
 * of its message ("... near 'tok'", cut short when long). Point at the token's first byte. */
static size_t parse_error_offset(const char *text, size_t len, const json_error_t *je)
{
    size_t off = je->position < 0 ? 0 : (size_t)je->position;
    if (off > len)
        off = len;
    const char *near = strstr(je->text, " near '");
    if (near == NULL)
        return off;
    const char *tok = near + 7;
    size_t n = strlen(tok);
    bool whole = n > 0 && tok[n - 1] == '\'';
    if (whole)
        n--;
    if (n == 0 || n > off)
        return off;
    if (whole)
        return memcmp(text + off - n, tok, n) == 0 ? off - n : off;
    for (size_t s = off - n + 1; s-- > 0;)
        if (memcmp(text + s, tok, n) == 0)
            return s;
    return off;
}

static void parse_error(const char *text, size_t len, const char *origin, const json_error_t *je,
                        char err[ERR_LEN])
{
    size_t line, col;
    offset_to_line_col(text, len, parse_error_offset(text, len, je), &line, &col);
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

int profile_parse(const char *text, size_t len, const char *origin, struct profile **out,
                  char err[ERR_LEN])
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
    struct profile *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        json_decref(root);
        snprintf(err, ERR_LEN, "%s: out of memory", origin);
        return -1;
    }
    struct ctx c = {.text = text, .len = len, .origin = origin, .err = err, .depth = 0};
    int rc = parse_top(&c, root, p);
    json_decref(root);
    if (rc != 0) {
        profile_free(p);
        return -1;
    }
    *out = p;
    return 0;
}

int profile_load_file(const char *path, struct profile **out, char err[ERR_LEN])
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
        rc = profile_parse(buf, n, path, out, err);
    free(buf);
    return rc;
}
