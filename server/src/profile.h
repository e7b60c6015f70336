/* profile.h -- a profile: the named set of behaviours fakegate applies per route (SPEC §4).
 * profile.c turns profile JSON into these plain structs and validates it; every rejection names
 * the place as `origin:line:column: message`. A parsed profile is immutable and may be shared by
 * threads without locks. */
#ifndef FAKEGATE_PROFILE_H
#define FAKEGATE_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "rng.h"

/* Routes as profiles name them. A request on a route the profile does not name uses `default`. */
enum route_id { ROUTE_CONFIRM = 0, ROUTE_CANCEL, ROUTE_READ, ROUTE_DEFAULT, ROUTE_COUNT };

/* "confirm", "cancel", "read", "default". */
const char *route_name(enum route_id r);

enum body_mismatch { BODY_MISMATCH_REPLAY = 0, BODY_MISMATCH_REJECT };

struct route_profile {
    bool present;                       /* named in the profile's "routes" */
    struct latency_dist queue_latency;  /* spent before the idempotency claim */
    struct latency_dist latency;        /* spent after the claim, while PROCESSING */
};

#define PROFILE_NAME_MAX 64

struct profile {
    char name[PROFILE_NAME_MAX + 1];     /* [a-z0-9_-]{1,64} */
    char *description;                  /* owned; may be NULL */
    bool has_seed;
    uint64_t seed;                      /* "seed" in the profile, if has_seed */
    enum body_mismatch on_body_mismatch; /* "idempotency": {"on_body_mismatch": ...} */
    struct route_profile routes[ROUTE_COUNT];
};

/* Parse and validate profile JSON `text` of `len` bytes. `origin` names the source in messages
 * (a file path, or e.g. "request body"). On success returns 0 and sets *out (caller owns it:
 * profile_free). On failure returns -1, sets *out to NULL and writes
 * "origin:line:column: message" to err (1-based line and column, pointing at the offending key
 * or value). Rejects: malformed JSON, duplicate keys, unknown keys, wrong types, a name not
 * matching [a-z0-9_-]{1,64}, negative or non-finite times, times above 86 400 000 ms,
 * min_ms > max_ms, p99_ms < median_ms, mixture weights <= 0, nested mixtures, unknown
 * "dist", and keys of SPEC §4 this build does not implement yet ("faults", "throttle",
 * "concurrency", "schedule": "not supported yet"). Thread: any. */
int profile_parse(const char *text, size_t len, const char *origin, struct profile **out,
                  char err[ERR_LEN]);

/* Read `path` and profile_parse it with `path` as origin. Same returns; a file that cannot be
 * read gives "path: strerror". */
int profile_load_file(const char *path, struct profile **out, char err[ERR_LEN]);

/* The settings for route `r`: routes[r] if present, else routes[ROUTE_DEFAULT] (which is all
 * zero — no latency — if the profile does not name it either). Borrowed from `p`. */
const struct route_profile *profile_route(const struct profile *p, enum route_id r);

/* True if `name` matches [a-z0-9_-]{1,64} (NUL-terminated). */
bool profile_name_valid(const char *name);

/* Free `p` and everything it owns. NULL is allowed. */
void profile_free(struct profile *p);

#endif
