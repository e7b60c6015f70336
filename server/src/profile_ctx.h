/* profile_ctx.h -- the validation context the profile parser's files share (profile.c,
 * profile_route.c); not used outside them. A pctx is the path being validated (keys and
 * indices, pushed and popped as the validator walks the jansson tree) and where a failure goes:
 * pctx_fail finds the path's place in the text with jsonpos and writes
 * "origin:line:column: [path: ]message". Also the typed getters every part of a profile uses. */
#ifndef FAKEGATE_PROFILE_CTX_H
#define FAKEGATE_PROFILE_CTX_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jsonpos.h"
#include "profile.h"

/* Largest time a profile may give: one day, in ms and in s. */
#define MAX_MS 86400000.0
#define MAX_S 86400.0
/* Slack for a sum of probabilities that must be <= 1 (a route's faults, webhooks' drop and
 * duplicate): written as decimals, they do not add exactly. */
#define P_SUM_EPS 1e-9
/* Deepest path the validator can be at: schedule[i].profile.routes.R.latency.of[i].key is 9. */
#define MAX_PATH 16

/* One validation: owned by the parse that runs it (one thread), on its stack. */
struct pctx {
    const char *text;         /* the profile's text (borrowed) ... */
    size_t len;               /* ... of len bytes */
    const char *origin;       /* NULL: messages carry no position (profile_parse_fault) */
    size_t path_skip;         /* leading path elements left out of messages */
    char *err;                /* ERR_LEN bytes: where pctx_fail writes */
    struct jsonpos_step path[MAX_PATH]; /* keys borrowed from the jansson tree */
    size_t depth;             /* may exceed MAX_PATH: the extra steps are not recorded */
    profile_resolver resolve; /* NULL: schedule phases by name are rejected */
    void *resolve_ctx;
    bool loading_phase;       /* this parse was started by a resolver */
};

/* What a failure points at: the current path's value, or its last key. */
enum pctx_where { AT_VALUE, AT_KEY };

/* Push a member `key` (borrowed: it must outlive the step) or an array element `index` onto
 * the path; pop the last step. */
void pctx_push_key(struct pctx *c, const char *key);
void pctx_push_index(struct pctx *c, size_t index);
void pctx_pop(struct pctx *c);

/* Write "origin:line:column: [path: ]message" for the current path to c->err (the place of
 * its value, or of its last key) and return -1; without an origin, "[path: ]message". The
 * path is written only if `with_path`, from step c->path_skip on. */
__attribute__((format(printf, 4, 5)))
int pctx_fail(struct pctx *c, enum pctx_where where, bool with_path, const char *fmt, ...);

/* Reject `key` as an unknown `what` ("key", "route") at its place (the caller has pushed it),
 * suggesting the nearest of `known` (NULL-terminated) within two edits. Returns -1. */
int pctx_fail_unknown_key(struct pctx *c, const char *what, const char *key,
                          const char *const *known);

/* `key` as it may be quoted in a message: at most 64 bytes, then "...", control bytes shown
 * as '?'. */
void pctx_quote_key(const char *key, char out[80]);

/* True if `key` is one of `list` (NULL-terminated). */
bool pctx_in_list(const char *key, const char *const *list);

/* Push `key` and return its value in `obj`, *rc = 0. Absent: NULL, nothing pushed, and
 * *rc = -1 after failing with "missing" at `obj` if `required`, else *rc = 1. */
json_t *pctx_enter(struct pctx *c, json_t *obj, const char *key, bool required, int *rc);

/* Fail (-1) at the first key of `obj` not in `known` (NULL-terminated); else 0. */
int pctx_check_keys(struct pctx *c, json_t *obj, const char *const *known);

/* The getters. Each looks up `key` in `obj`. Present and valid: stores it in *out and returns
 * 0. Absent: returns 1 with *out untouched if optional, else fails with "missing" at `obj`.
 * Invalid: fails at the value. On failure the path is left pushed: the caller only returns
 * -1. */

/* Lower bounds of pctx_get_num: >= 0, > 0, >= 1. */
enum pctx_lower { LOW_GE0, LOW_GT0, LOW_GE1 };

/* A finite number, bounded below by `low` and, if `max_unit` is not NULL, above by `max` (a
 * duration: one day in that unit, named in the message). */
int pctx_get_num(struct pctx *c, json_t *obj, const char *key, bool required,
                 enum pctx_lower low, double max, const char *max_unit, double *out);
/* A probability: a number in [0, 1] ("expected a probability in [0, 1]" otherwise). */
int pctx_get_prob(struct pctx *c, json_t *obj, const char *key, bool required, double *out);
/* A required time in ms: a finite number in [0, MAX_MS]. */
int pctx_get_ms(struct pctx *c, json_t *obj, const char *key, double *out);
/* A JSON integer in [lo, hi]; anything else is rejected as "expected <what>". */
int pctx_get_int(struct pctx *c, json_t *obj, const char *key, bool required, int64_t lo,
                 int64_t hi, const char *what, int64_t *out);
/* An HTTP status for an injected rejection: an integer in 400..599. */
int pctx_get_status(struct pctx *c, json_t *obj, const char *key, bool required, int *out);
/* One of `names` (NULL-terminated); *out is its index. */
int pctx_get_enum(struct pctx *c, json_t *obj, const char *key, bool required,
                  const char *const *names, int *out);
/* An optional true or false. */
int pctx_get_bool(struct pctx *c, json_t *obj, const char *key, bool *out);
/* An error code as Toss writes them: [A-Z0-9_]+, stored as an owned copy in *out (replacing
 * what it held). */
int pctx_get_code(struct pctx *c, json_t *obj, const char *key, bool required, char **out);
/* An optional "body": "json" | "html" | "empty". */
int pctx_get_body(struct pctx *c, json_t *obj, enum body_kind *out);

/* Replace *out (owned) with a copy of `s`: 0, or -1 after failing at the current path when out
 * of memory. */
int pctx_set_str(struct pctx *c, const char *s, char **out);

#endif
