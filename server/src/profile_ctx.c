/* profile_ctx.c -- the profile validator's context (profile_ctx.h): the path it is at, a
 * failure as "origin:line:column: path: message" (the place found by jsonpos), and the typed
 * getters for numbers, probabilities, times, integers, statuses, enums, booleans and error
 * codes. */
#define _POSIX_C_SOURCE 200809L
#include "profile_ctx.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- The path and failures ------------------------------------------------------------------- */

void pctx_push_key(struct pctx *c, const char *key)
{
    if (c->depth < MAX_PATH)
        c->path[c->depth] = (struct jsonpos_step){.key = key, .index = 0};
    c->depth++;
}

void pctx_push_index(struct pctx *c, size_t index)
{
    if (c->depth < MAX_PATH)
        c->path[c->depth] = (struct jsonpos_step){.key = NULL, .index = index};
    c->depth++;
}

void pctx_pop(struct pctx *c)
{
    c->depth--;
}

/* "routes.confirm.latency.of[1].ms", from element c->path_skip on */
static void path_str(const struct pctx *c, char *buf, size_t size)
{
    size_t n = c->depth < MAX_PATH ? c->depth : MAX_PATH;
    if (c->path_skip >= n) {
        buf[0] = '\0';
        return;
    }
    jsonpos_path_str(c->path + c->path_skip, n - c->path_skip, buf, size);
}

int pctx_fail(struct pctx *c, enum pctx_where where, bool with_path, const char *fmt, ...)
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

void pctx_quote_key(const char *key, char out[80])
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

int pctx_fail_unknown_key(struct pctx *c, const char *what, const char *key,
                          const char *const *known)
{
    const char *best = jsonpos_suggest(key, known);
    char q[80];
    pctx_quote_key(key, q);
    if (best != NULL)
        return pctx_fail(c, AT_KEY, false, "unknown %s \"%s\" (did you mean \"%s\"?)", what,
                         q, best);
    return pctx_fail(c, AT_KEY, false, "unknown %s \"%s\"", what, q);
}

bool pctx_in_list(const char *key, const char *const *list)
{
    for (size_t i = 0; list[i] != NULL; i++)
        if (strcmp(key, list[i]) == 0)
            return true;
    return false;
}

/* ---- Values ---------------------------------------------------------------------------------- */

json_t *pctx_enter(struct pctx *c, json_t *obj, const char *key, bool required, int *rc)
{
    json_t *v = json_object_get(obj, key);
    if (v == NULL) {
        *rc = required ? pctx_fail(c, AT_VALUE, true, "missing \"%s\"", key) : 1;
        return NULL;
    }
    pctx_push_key(c, key);
    *rc = 0;
    return v;
}

int pctx_check_keys(struct pctx *c, json_t *obj, const char *const *known)
{
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        if (!pctx_in_list(key, known)) {
            pctx_push_key(c, key);
            return pctx_fail_unknown_key(c, "key", key, known);
        }
    }
    return 0;
}

int pctx_get_num(struct pctx *c, json_t *obj, const char *key, bool required,
                 enum pctx_lower low, double max, const char *max_unit, double *out)
{
    int rc;
    json_t *v = pctx_enter(c, obj, key, required, &rc);
    if (v == NULL)
        return rc;
    if (!json_is_number(v))
        return pctx_fail(c, AT_VALUE, true, "expected a number");
    double x = json_number_value(v);
    if (!isfinite(x))
        return pctx_fail(c, AT_VALUE, true, "must be a finite number");
    if (low == LOW_GE0 && x < 0)
        return pctx_fail(c, AT_VALUE, true, "must not be negative");
    if (low == LOW_GT0 && x <= 0)
        return pctx_fail(c, AT_VALUE, true, "must be greater than 0");
    if (low == LOW_GE1 && x < 1)
        return pctx_fail(c, AT_VALUE, true, "must be at least 1");
    if (max_unit != NULL && x > max)
        return pctx_fail(c, AT_VALUE, true, "must be at most %.0f %s (one day)", max, max_unit);
    pctx_pop(c);
    *out = x;
    return 0;
}

int pctx_get_prob(struct pctx *c, json_t *obj, const char *key, bool required, double *out)
{
    int rc;
    json_t *v = pctx_enter(c, obj, key, required, &rc);
    if (v == NULL)
        return rc;
    if (!json_is_number(v) || !(json_number_value(v) >= 0 && json_number_value(v) <= 1))
        return pctx_fail(c, AT_VALUE, true, "expected a probability in [0, 1]");
    pctx_pop(c);
    *out = json_number_value(v);
    return 0;
}

int pctx_get_ms(struct pctx *c, json_t *obj, const char *key, double *out)
{
    return pctx_get_num(c, obj, key, true, LOW_GE0, MAX_MS, "ms", out);
}

int pctx_get_int(struct pctx *c, json_t *obj, const char *key, bool required, int64_t lo,
                 int64_t hi, const char *what, int64_t *out)
{
    int rc;
    json_t *v = pctx_enter(c, obj, key, required, &rc);
    if (v == NULL)
        return rc;
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return pctx_fail(c, AT_VALUE, true, "expected %s", what);
    pctx_pop(c);
    *out = json_integer_value(v);
    return 0;
}

int pctx_get_status(struct pctx *c, json_t *obj, const char *key, bool required, int *out)
{
    int64_t s = 0;
    int rc = pctx_get_int(c, obj, key, required, 400, 599, "an HTTP status in 400..599", &s);
    if (rc == 0)
        *out = (int)s;
    return rc;
}

int pctx_get_enum(struct pctx *c, json_t *obj, const char *key, bool required,
                  const char *const *names, int *out)
{
    int rc;
    json_t *v = pctx_enter(c, obj, key, required, &rc);
    if (v == NULL)
        return rc;
    const char *s = json_string_value(v); /* NULL if not a string */
    for (int i = 0; s != NULL && names[i] != NULL; i++) {
        if (strcmp(s, names[i]) == 0) {
            pctx_pop(c);
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
    return pctx_fail(c, AT_VALUE, true, "expected %s", list);
}

int pctx_get_bool(struct pctx *c, json_t *obj, const char *key, bool *out)
{
    int rc;
    json_t *v = pctx_enter(c, obj, key, false, &rc);
    if (v == NULL)
        return rc;
    if (!json_is_boolean(v))
        return pctx_fail(c, AT_VALUE, true, "expected true or false");
    pctx_pop(c);
    *out = json_is_true(v);
    return 0;
}

int pctx_set_str(struct pctx *c, const char *s, char **out)
{
    char *copy = strdup(s);
    if (copy == NULL)
        return pctx_fail(c, AT_VALUE, true, "out of memory");
    free(*out);
    *out = copy;
    return 0;
}

int pctx_get_code(struct pctx *c, json_t *obj, const char *key, bool required, char **out)
{
    int rc;
    json_t *v = pctx_enter(c, obj, key, required, &rc);
    if (v == NULL)
        return rc;
    const char *s = json_string_value(v);
    bool ok = s != NULL && s[0] != '\0';
    for (size_t i = 0; ok && s[i] != '\0'; i++)
        ok = (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_';
    if (!ok)
        return pctx_fail(c, AT_VALUE, true, "expected an error code ([A-Z0-9_]+)");
    if (pctx_set_str(c, s, out) != 0)
        return -1;
    pctx_pop(c);
    return 0;
}

static const char *const BODIES[] = {"json", "html", "empty", NULL};
static const enum body_kind BODY_KINDS[] = {BODY_JSON, BODY_HTML, BODY_EMPTY};

int pctx_get_body(struct pctx *c, json_t *obj, enum body_kind *out)
{
    int i;
    int rc = pctx_get_enum(c, obj, "body", false, BODIES, &i);
    if (rc == 0)
        *out = BODY_KINDS[i];
    return rc;
}

