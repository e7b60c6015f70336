/* throttle.h -- token buckets, periodic throttle windows and Retry-After arithmetic
 * (docs/profiles.md §4 "Throttle"). Pure: time is passed in (monotonic ns), no locks; the caller
 * (live.c) guards a bucket with its lock. */
#ifndef FAKEGATE_THROTTLE_H
#define FAKEGATE_THROTTLE_H

#include <stdbool.h>
#include <stdint.h>

#include "profile.h"

struct token_bucket {
    double tokens;      /* available now (<= burst) */
    int64_t last_ns;    /* when tokens was last brought up to date */
};

/* A full bucket at now_ns ("starts full"). */
void bucket_init(struct token_bucket *b, double burst, int64_t now_ns);

/* Take one token at now_ns. Returns true if admitted. Otherwise false, and *wait_s is the time
 * until the next token (seconds, > 0). rate_per_s > 0, burst >= 1. */
bool bucket_take(struct token_bucket *b, double rate_per_s, double burst, int64_t now_ns,
                 double *wait_s);

/* Is a window throttle closed `since_ns` after its phase origin (the profile's application)?
 * Throttled for the first throttled_s of every period_s, shifted by offset_s. If throttled,
 * *wait_s is the smallest whole number of seconds (>= the time until this window ends) after
 * which a client lands in an open part, so that Retry-After: ceil(*wait_s) is honest even when
 * the open part is shorter than 1 s. since_ns may be negative (before the origin + offset:
 * counted as the previous period). */
bool window_throttled(const struct throttle *t, int64_t since_ns, double *wait_s);

/* True if, from every moment of a window throttle's closed part, some whole number of seconds
 * later falls in an open part (checked at 1 ms steps), so an honest Retry-After exists. False
 * e.g. for period 1 s with an open part under 1 s. */
bool window_retry_reachable(const struct throttle *t);

/* Seconds to announce for a wait of wait_s: rounded up, never 0 (a client that comes back
 * exactly when told is admitted), at most 2^31-1. */
uint32_t retry_after_ceil(double wait_s);

/* Format the Retry-After header value for `ra` into out (len bytes): the configured seconds, or
 * `auto_s` when is_auto; http-date is now_unix_s + seconds in IMF-fixdate
 * ("Sun, 06 Nov 1994 08:49:37 GMT"); raw is copied as is. Returns false (out empty) for
 * RA_NONE. */
bool retry_after_format(const struct retry_after *ra, uint32_t auto_s, int64_t now_unix_s,
                        char *out, size_t len);

/* retry_after_format for an answer sent at now_unix_us (µs since the epoch), `wait_s` being the
 * exact time (seconds) until the client is admitted again, of which auto_s is the announced
 * whole seconds (retry_after_ceil). An http-date is retry_after_date_s: the first whole second
 * at or after the admission (docs/profiles.md §4: never earlier, so a client that obeys it is
 * admitted), not the current second rounded down plus the seconds. */
bool retry_after_format_at(const struct retry_after *ra, uint32_t auto_s, double wait_s,
                           int64_t now_unix_us, char *out, size_t len);

/* The whole second (Unix seconds) an http-date Retry-After of `ra` names for an answer at
 * now_unix_us: now plus the wait (`wait_s` for "auto", the configured seconds otherwise),
 * rounded up. */
int64_t retry_after_date_s(const struct retry_after *ra, double wait_s, int64_t now_unix_us);

/* The whole seconds the Retry-After of `ra` tells a client to wait (`auto_s` for "auto"):
 * its value for the seconds and http-date formats, a raw value's if it is 1-9 decimal digits,
 * else 0 (none, or a raw value no client reads as seconds). */
uint32_t retry_after_told_s(const struct retry_after *ra, uint32_t auto_s);

#endif
