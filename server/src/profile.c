/* profile.c -- profile JSON → struct profile, validated (docs/profiles.md §4): the entry points,
 * the top level (name, seed, idempotency, routes, webhooks) and schedules; one route's settings
 * are profile_route.c's, the "webhooks" section's profile_webhooks.c's, the path and the
 * messages profile_ctx.c's. Nothing is returned half-built: on error *out is NULL. Schedules
 * nest one level only: a phase's profile is never a schedule, and a parse started by a resolver
 * may not resolve further (no cycles). */
#define _POSIX_C_SOURCE 200809L
#include "profile.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonpos.h"
#include "profile_ctx.h"
#include "profile_route.h"
#include "profile_webhooks.h"

/* Largest profile file profile_load_file reads. */
#define MAX_FILE_BYTES (1024 * 1024)

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
    case ROUTE_VIRTUAL_ACCOUNT: return "virtual_account";
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
    for (int i = 0; i < ROUTE_COUNT; i++)
        route_fini(&p->routes[i]);
    webhooks_fini(&p->webhooks);
    for (size_t i = 0; i < p->n_phases; i++)
        profile_free(p->phases[i].profile);
    free(p->phases);
    free(p->description);
    free(p->source);
    free(p->file);
    free(p);
}

/* ---- Routes and idempotency ------------------------------------------------------------------ */

static int parse_routes(struct pctx *c, json_t *obj, struct profile *p)
{
    if (!json_is_object(obj))
        return pctx_fail(c, AT_VALUE, true, "expected an object");
    static const char *const names[] = {"confirm", "cancel", "read", "virtual_account",
                                        "default", NULL};
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        pctx_push_key(c, key);
        int r = 0;
        while (names[r] != NULL && strcmp(names[r], key) != 0)
            r++;
        if (names[r] == NULL)
            return pctx_fail_unknown_key(c, "route", key, names);
        if (route_parse(c, v, &p->routes[r]) != 0)
            return -1;
        pctx_pop(c);
    }
    return 0;
}

static int parse_idempotency(struct pctx *c, json_t *obj, struct profile *p)
{
    static const char *const known[] = {"on_body_mismatch", NULL};
    if (!json_is_object(obj))
        return pctx_fail(c, AT_VALUE, true, "expected an object");
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        pctx_push_key(c, key);
        if (!pctx_in_list(key, known))
            return pctx_fail_unknown_key(c, "key", key, known);
        const char *s = json_string_value(v); /* NULL if not a string */
        if (s != NULL && strcmp(s, "replay") == 0)
            p->on_body_mismatch = BODY_MISMATCH_REPLAY;
        else if (s != NULL && strcmp(s, "reject") == 0)
            p->on_body_mismatch = BODY_MISMATCH_REJECT;
        else
            return pctx_fail(c, AT_VALUE, true, "expected \"replay\" or \"reject\"");
        pctx_pop(c);
    }
    return 0;
}

/* ---- Profiles and schedules ------------------------------------------------------------------ */

static int parse_top(struct pctx *c, json_t *root, struct profile *p, bool is_phase);

/* A phase's "profile" given by name; `c`'s path is at that value. */
static int resolve_phase(struct pctx *c, const char *name, struct schedule_phase *ph)
{
    if (!profile_name_valid(name)) {
        char q[80];
        pctx_quote_key(name, q);
        return pctx_fail(c, AT_VALUE, true, "\"%s\" is not a valid name ([a-z0-9_-]{1,64})", q);
    }
    if (c->resolve == NULL || c->loading_phase)
        return pctx_fail(c, AT_VALUE, true, "schedule phases by name need a profiles directory");
    char rerr[ERR_LEN] = "";
    struct profile *loaded = NULL;
    if (c->resolve(name, &loaded, rerr, c->resolve_ctx) != 0 || loaded == NULL) {
        profile_free(loaded);
        return pctx_fail(c, AT_VALUE, true, "%s",
                         rerr[0] != '\0' ? rerr : "cannot load the profile");
    }
    ph->profile = loaded;
    if (loaded->phases != NULL)
        return pctx_fail(c, AT_VALUE, true,
                         "profile \"%s\" is a schedule: a schedule's phases cannot be schedules",
                         name);
    return 0;
}

/* "schedule": [{"for_s": ..., "profile": NAME | {...}}, ...]; `c`'s path is at it. */
static int parse_schedule(struct pctx *c, json_t *arr, struct profile *p)
{
    static const char *const known[] = {"for_s", "profile", NULL};
    if (!json_is_array(arr))
        return pctx_fail(c, AT_VALUE, true, "expected an array of phases");
    size_t n = json_array_size(arr);
    if (n == 0)
        return pctx_fail(c, AT_VALUE, true, "a schedule needs at least one phase");
    p->phases = calloc(n, sizeof(*p->phases));
    if (p->phases == NULL)
        return pctx_fail(c, AT_VALUE, true, "out of memory");
    p->n_phases = n;
    for (size_t i = 0; i < n; i++) {
        json_t *obj = json_array_get(arr, i);
        struct schedule_phase *ph = &p->phases[i];
        pctx_push_index(c, i);
        if (!json_is_object(obj))
            return pctx_fail(c, AT_VALUE, true,
                             "expected an object {\"for_s\": ..., \"profile\": ...}");
        if (pctx_check_keys(c, obj, known) != 0 ||
            pctx_get_num(c, obj, "for_s", true, LOW_GT0, MAX_S, "s", &ph->for_s) != 0)
            return -1;
        int rc;
        json_t *v = pctx_enter(c, obj, "profile", true, &rc);
        if (v == NULL)
            return -1;
        if (json_is_string(v)) {
            if (resolve_phase(c, json_string_value(v), ph) != 0)
                return -1;
        } else if (json_is_object(v)) {
            ph->profile = calloc(1, sizeof(*ph->profile));
            if (ph->profile == NULL)
                return pctx_fail(c, AT_VALUE, true, "out of memory");
            if (parse_top(c, v, ph->profile, true) != 0)
                return -1;
        } else {
            return pctx_fail(c, AT_VALUE, true,
                             "expected a profile name or an inline profile object");
        }
        pctx_pop(c);
        pctx_pop(c);
    }
    return 0;
}

static const char *const TOP_KEYS[] = {"name", "description", "seed", "idempotency", "routes",
                                       "webhooks", "schedule", "repeat", NULL};

/* A whole profile, or a phase's inline profile (is_phase: `c`'s path is at it). */
static int parse_top(struct pctx *c, json_t *root, struct profile *p, bool is_phase)
{
    if (!json_is_object(root))
        return pctx_fail(c, AT_VALUE, false, "a profile must be a JSON object");
    bool is_schedule = json_object_get(root, "schedule") != NULL;
    if (is_schedule && (is_phase || c->loading_phase)) {
        pctx_push_key(c, "schedule");
        return pctx_fail(c, AT_KEY, true, "a schedule phase cannot itself be a schedule");
    }
    if (is_schedule && json_object_get(root, "routes") != NULL) {
        pctx_push_key(c, "schedule");
        return pctx_fail(c, AT_KEY, true,
                         "a profile has either \"routes\" or \"schedule\", not both");
    }
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        pctx_push_key(c, key);
        if (strcmp(key, "name") == 0) {
            if (!json_is_string(v))
                return pctx_fail(c, AT_VALUE, true, "expected a string");
            if (!profile_name_valid(json_string_value(v))) {
                char q[80];
                pctx_quote_key(json_string_value(v), q);
                return pctx_fail(c, AT_VALUE, true,
                                 "\"%s\" is not a valid name ([a-z0-9_-]{1,64})", q);
            }
            strcpy(p->name, json_string_value(v));
        } else if (strcmp(key, "description") == 0) {
            if (!json_is_string(v))
                return pctx_fail(c, AT_VALUE, true, "expected a string");
            if (pctx_set_str(c, json_string_value(v), &p->description) != 0)
                return -1;
        } else if (strcmp(key, "seed") == 0) {
            if (!json_is_integer(v) || json_integer_value(v) < 0)
                return pctx_fail(c, AT_VALUE, true, "expected a non-negative integer");
            p->has_seed = true;
            p->seed = (uint64_t)json_integer_value(v);
        } else if (strcmp(key, "idempotency") == 0) {
            /* Which phase's policy applies is the phase's business: one place to set it. */
            if (is_schedule)
                return pctx_fail(c, AT_KEY, true,
                                 "a schedule takes \"idempotency\" from its phases' profiles");
            if (parse_idempotency(c, v, p) != 0)
                return -1;
        } else if (strcmp(key, "routes") == 0) {
            if (parse_routes(c, v, p) != 0)
                return -1;
        } else if (strcmp(key, "webhooks") == 0) {
            if (is_schedule)
                return pctx_fail(c, AT_KEY, true,
                                 "a schedule takes \"webhooks\" from its phases' profiles");
            if (webhooks_parse(c, v, &p->webhooks) != 0)
                return -1;
        } else if (strcmp(key, "schedule") == 0) {
            if (parse_schedule(c, v, p) != 0)
                return -1;
        } else if (strcmp(key, "repeat") == 0) {
            if (!is_schedule)
                return pctx_fail(c, AT_KEY, true, "only a schedule can repeat");
            if (!json_is_boolean(v))
                return pctx_fail(c, AT_VALUE, true, "expected true or false");
            p->repeat = json_is_true(v);
        } else {
            return pctx_fail_unknown_key(c, "key", key, TOP_KEYS);
        }
        pctx_pop(c);
    }
    if (json_object_get(root, "name") == NULL)
        return pctx_fail(c, AT_VALUE, true, "missing required key \"name\"");
    if (!is_schedule && json_object_get(root, "routes") == NULL)
        return pctx_fail(c, AT_VALUE, true, "missing required key \"routes\"");
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
static int parse_root(struct pctx *c, json_t *root, struct profile **out)
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
    size_t deep;
    if (jsonpos_too_deep(text, len, PROFILE_MAX_DEPTH, &deep)) {
        size_t line, col;
        jsonpos_line_col(text, len, deep, &line, &col);
        snprintf(err, ERR_LEN, "%s:%zu:%zu: nested deeper than %d levels (the most a profile "
                 "may nest)", origin, line, col, PROFILE_MAX_DEPTH);
        return -1;
    }
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (root == NULL) {
        parse_error(text, len, origin, &je, err);
        return -1;
    }
    struct pctx c = {.text = text,
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
    size_t deep;
    if (jsonpos_too_deep(fault_json, len, PROFILE_MAX_DEPTH - 4, &deep)) {
        snprintf(err, ERR_LEN, "nested deeper than %d levels (the most a fault may nest)",
                 PROFILE_MAX_DEPTH - 4);
        return -1;
    }
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
    struct pctx c = {.origin = NULL, .path_skip = 4, .err = err}; /* routes.default.faults[0] */
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

