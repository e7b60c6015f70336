/* profile.h -- a profile: the named set of behaviours fakegate applies per route (docs/profiles.md
 * §4). profile.c (with profile_route.c and profile_ctx.c) turns profile JSON into these plain
 * structs and validates it; every rejection names the place as `origin:line:column: message`
 * (column in characters). A parsed profile is immutable and may be shared by threads without locks.
 */
#ifndef FAKEGATE_PROFILE_H
#define FAKEGATE_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "rng.h"

/* Routes as profiles name them. A request on a route the profile does not name uses `default`. */
enum route_id {
    ROUTE_CONFIRM = 0,
    ROUTE_CANCEL,
    ROUTE_READ,
    ROUTE_VIRTUAL_ACCOUNT, /* POST /v1/virtual-accounts (docs/virtual-accounts.md §6.6) */
    ROUTE_DEFAULT,
    ROUTE_COUNT
};

/* Not a profile route: a request that matched no route (404, 405) or was refused before routing
 * (431, framing). It is counted and journaled as "other" (docs/admin.md §5), never planned, and
 * no profile can name it. Metrics and the journal size their per-route arrays ROUTE_LABELS. */
#define ROUTE_OTHER ROUTE_COUNT
#define ROUTE_LABELS (ROUTE_COUNT + 1)

/* "confirm", "cancel", "read", "virtual_account", "default". */
const char *route_name(enum route_id r);

enum body_mismatch { BODY_MISMATCH_REPLAY = 0, BODY_MISMATCH_REJECT };

/* --- faults (docs/profiles.md §4) --- */
enum fault_kind { FAULT_NONE = 0, FAULT_ERROR, FAULT_DROP_REQUEST, FAULT_DROP_RESPONSE, FAULT_DRIP };
/* How a dropped request or response is lost on the wire. */
enum fault_how { HOW_CLOSE = 0, HOW_RESET, HOW_HANG, HOW_TRUNCATE };
/* The body of an injected error or throttle rejection. */
enum body_kind { BODY_JSON = 0, BODY_HTML, BODY_EMPTY };
enum retry_after_format { RA_NONE = 0, RA_SECONDS, RA_HTTP_DATE, RA_RAW };

/* A Retry-After header as configured: {"format": ..., "value": N | "auto" | "raw string"}. */
struct retry_after {
    enum retry_after_format format; /* RA_NONE: no header */
    bool is_auto;                   /* value "auto": time until the window ends / next token */
    uint32_t seconds;               /* fixed value, 0 .. 2^31-1 (seconds, http-date) */
    char *raw;                      /* RA_RAW: sent byte-for-byte; owned */
};

struct fault {
    enum fault_kind kind;
    double p;                       /* probability in [0,1]; per attempt number, the route's
                                     * faults eligible for it sum to <= 1 */
    /* drop_request / drop_response */
    enum fault_how how;             /* truncate only with drop_response */
    double hang_ms;                 /* how = hang: held this long, then closed (default 30000) */
    /* drip */
    double duration_ms;             /* body bytes spread over this long */
    /* error */
    int status;                     /* HTTP status 400..599; default: the table's for `code` */
    char *code;                     /* owned; [A-Z0-9_]+ */
    char *message;                  /* owned; NULL = the table's message for `code` (or code) */
    enum body_kind body;
    bool commit;                    /* only with when = after (validated) */
    bool when_before;               /* "when": "before" (at once) | "after" (default) */
    struct retry_after retry_after; /* default RA_NONE */
    /* any kind */
    uint32_t *attempts;             /* owned; fire only on these attempt numbers (1-based,
                                     * distinct, at most 100); a route has at most 64 faults */
    size_t n_attempts;              /* 0 = every attempt */
    int64_t times;                  /* fire at most this many times after apply; -1 = no limit */
};

enum throttle_kind { THROTTLE_NONE = 0, THROTTLE_TOKEN_BUCKET, THROTTLE_WINDOW };

struct throttle {
    enum throttle_kind kind;
    double rate_per_s, burst;       /* token_bucket: tokens per second (> 0), capacity (>= 1) */
    double period_s, throttled_s, offset_s; /* window: 0 < throttled_s <= period_s, offset >= 0 */
    int status;                     /* 503 (default) or 429 */
    char *code;                     /* owned; default SERVICE_UNAVAILABLE / TOO_MANY_REQUESTS */
    struct retry_after retry_after; /* default: seconds, auto */
    enum body_kind body;            /* default json */
};

struct concurrency {
    uint32_t max_in_flight;         /* 0 = no cap */
    int status;                     /* default 503 */
    char *code;                     /* owned; default SERVICE_UNAVAILABLE */
};

struct route_profile {
    bool present;                       /* named in the profile's "routes" */
    struct latency_dist queue_latency;  /* spent before the idempotency claim */
    struct latency_dist latency;        /* spent after the claim, while PROCESSING */
    struct fault *faults;               /* owned, in the order written */
    size_t n_faults;
    struct throttle throttle;
    struct concurrency concurrency;
};

struct profile;

/* One phase of a schedule: a profile (inline, or loaded by name) for for_s seconds. */
struct schedule_phase {
    double for_s;                       /* > 0 */
    struct profile *profile;            /* owned; never itself a schedule */
};

#define PROFILE_NAME_MAX 64
/* How deeply a profile's JSON may nest objects and arrays: fixed, since a valid profile's keys
 * allow about 9 levels (a schedule phase's inline profile, its route, its faults). Deeper text
 * is refused on its raw bytes, before jansson builds a tree of it. */
#define PROFILE_MAX_DEPTH 32

/* The profile's "webhooks" section (docs/profiles.md §4, docs/webhooks.md §6.5): what happens to
 * each webhook event before it reaches its receivers. Each decision is drawn per (seed,
 * paymentKey, the event's sequence number on that payment, receiver), so a run repeats. All zero
 * (DIST_NONE, p 0) when the section is absent: every event sent at once, once. */
struct webhook_faults {
    struct latency_dist delay;           /* waited (real time, ms) before an event's first
                                            attempt; DIST_NONE = none */
    double duplicate_p;                  /* [0,1]: the event is delivered a second time */
    struct latency_dist duplicate_after; /* the duplicate's first attempt this long (ms) after
                                            the original's first attempt; DIST_NONE = at once */
    double drop_p;                       /* [0,1]: the event is never sent; drop_p + duplicate_p
                                            <= 1 (one draw decides) */
};

struct profile {
    char name[PROFILE_NAME_MAX + 1];     /* [a-z0-9_-]{1,64} */
    char *description;                  /* owned; may be NULL */
    char *source;                       /* owned: the profile as compact JSON, keys in the
                                           order written (GET /__admin/profile) */
    char *file;                         /* owned: the file it was read from (profile_load_file;
                                           SIGHUP reloads it), or NULL (a request body) */
    bool has_seed;
    uint64_t seed;                      /* "seed" in the profile, if has_seed */
    enum body_mismatch on_body_mismatch; /* "idempotency": {"on_body_mismatch": ...} */
    struct route_profile routes[ROUTE_COUNT];
    struct webhook_faults webhooks;     /* "webhooks" beside "routes" (zero when absent) */
    struct schedule_phase *phases;      /* owned; non-NULL for a schedule profile */
    size_t n_phases;
    bool repeat;                        /* a schedule starts over after its last phase */
};

/* Loads the profile called `name` ([a-z0-9_-]{1,64}) for a schedule phase. Returns 0 and sets
 * *out (caller owns it), or -1 with a message in err (quoted after the phase's position). It
 * may call profile_load_file with itself: a parse started inside a resolver rejects a schedule
 * before resolving anything, so a schedule naming itself cannot recurse. */
typedef int (*profile_resolver)(const char *name, struct profile **out, char err[ERR_LEN],
                                void *ctx);

/* Parse and validate profile JSON `text` of `len` bytes. `origin` names the source in messages
 * (a file path, or e.g. "request body"). On success returns 0 and sets *out (caller owns it:
 * profile_free). On failure returns -1, sets *out to NULL and writes
 * "origin:line:column: message" to err (1-based line and column, pointing at the offending key
 * or value; the column counts characters, as jansson's own errors do). Rejects: text nested
 * deeper than PROFILE_MAX_DEPTH (before parsing it), malformed JSON, duplicate keys, unknown keys, wrong types, a name not matching [a-z0-9_-]{1,64},
 * negative or non-finite times, times above 86 400 000 ms,
 * min_ms > max_ms, p99_ms < median_ms, mixture weights <= 0, nested mixtures, unknown
 * "dist". Faults, throttle, concurrency, webhooks and schedules as docs/profiles.md §4
 * (validated there: probabilities in [0,1] whose sum over the faults eligible for any one
 * attempt is <= 1, webhooks' drop.p + duplicate.p <= 1, no "webhooks" or "idempotency" at a
 * schedule's top level, commit only with when=after, truncate only with
 * drop_response, Retry-After values <= 2^31-1, status ranges, a schedule phase naming a
 * profile that `resolve` cannot load → its position). `resolve` may be NULL: then a phase
 * given by name is an error ("schedule phases by name need a profiles directory").
 * Thread: any. */
int profile_parse(const char *text, size_t len, const char *origin, profile_resolver resolve,
                  void *resolve_ctx, struct profile **out, char err[ERR_LEN]);

/* Parse one fault object as a profile's faults list holds it (`fault_json`, `len` bytes), into a
 * profile whose default route has that fault only and no other setting: the X-Fakegate-Fault header
 * (docs/profiles.md §4) is validated by the same rules as a profile. Returns 0 and sets *out
 * (caller owns it), or -1 with *out NULL and a message in err that names fields from inside the
 * fault and carries no position ("how: expected ...", "missing \"code\""): the client wrote a
 * header, not this JSON. A fault nested deeper than PROFILE_MAX_DEPTH - 4 levels (the levels
 * of a profile above a fault) is refused before it is parsed. Thread: any. */
int profile_parse_fault(const char *fault_json, size_t len, struct profile **out,
                        char err[ERR_LEN]);

/* Read `path` and profile_parse it with `path` as origin; the profile keeps a copy of `path` in
 * `file` (owned; SIGHUP reloads it). Same returns; a file that cannot be read gives
 * "path: strerror". */
int profile_load_file(const char *path, profile_resolver resolve, void *resolve_ctx,
                      struct profile **out, char err[ERR_LEN]);

/* The settings for route `r`: routes[r] if present, else routes[ROUTE_DEFAULT] (which is all
 * zero — no latency — if the profile does not name it either). Borrowed from `p`. */
const struct route_profile *profile_route(const struct profile *p, enum route_id r);

/* True if `name` matches [a-z0-9_-]{1,64} (NUL-terminated). */
bool profile_name_valid(const char *name);

/* Free `p` and everything it owns. NULL is allowed. */
void profile_free(struct profile *p);

#endif
