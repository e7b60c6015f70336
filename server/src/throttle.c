/* throttle.c -- token buckets, windows, Retry-After (see throttle.h). Invariant: a bucket's
 * tokens stay in [.., burst]; they may go fractional but a request needs a whole token. */
#define _DEFAULT_SOURCE
#include "throttle.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <time.h>

#include "common.h"

void bucket_init(struct token_bucket *b, double burst, int64_t now_ns)
{
    b->tokens = burst;
    b->last_ns = now_ns;
}

bool bucket_take(struct token_bucket *b, double rate_per_s, double burst, int64_t now_ns,
                 double *wait_s)
{
    if (now_ns > b->last_ns) {
        b->tokens += (double)(now_ns - b->last_ns) / (double)NS_PER_S * rate_per_s;
        if (b->tokens > burst)
            b->tokens = burst;
        b->last_ns = now_ns;
    }
    /* A tiny epsilon so that a client returning exactly when told (whole seconds from the
     * announcement) is not refused by floating-point rounding. */
    if (b->tokens >= 1.0 - 1e-9) {
        b->tokens -= 1.0;
        return true;
    }
    *wait_s = (1.0 - b->tokens) / rate_per_s;
    return false;
}

bool window_throttled(const struct throttle *t, int64_t since_ns, double *wait_s)
{
    double since = (double)since_ns / (double)NS_PER_S - t->offset_s;
    double phase = fmod(since, t->period_s);
    if (phase < 0)
        phase += t->period_s;
    if (phase >= t->throttled_s)
        return false;
    /* Announce a whole number of seconds that lands in an open part (docs/profiles.md §4: a client
     * that comes back exactly when told is admitted): with an open part under 1 s the end of this
     * window rounded up may fall into the next window. The parser rejects windows where no whole
     * second ever lands outside (a period dividing 1 s). */
    double end = t->throttled_s - phase;
    if (t->throttled_s >= t->period_s - 1e-9) { /* no open part: closed for good */
        *wait_s = end;
        return true;
    }
    double k = ceil(end - 1e-9);
    /* The phases reached by whole seconds repeat after at most period_s / gcd steps; a few
     * thousand covers every window the parser admits. */
    for (int i = 0; i < 4096; i++, k += 1) {
        double ph = fmod(phase + k, t->period_s);
        if (ph >= t->throttled_s - 1e-9 && ph < t->period_s - 1e-9) {
            *wait_s = k;
            return true;
        }
    }
    *wait_s = end;
    return true;
}

bool window_retry_reachable(const struct throttle *t)
{
    if (t->period_s - t->throttled_s >= 1.0)
        return true;
    for (double phase = 0; phase < t->throttled_s; phase += 0.001) {
        bool found = false;
        double k = ceil(t->throttled_s - phase - 1e-9);
        for (int i = 0; i < 1000 && !found; i++, k += 1) {
            double ph = fmod(phase + k, t->period_s);
            found = ph >= t->throttled_s - 1e-9 && ph < t->period_s - 1e-9;
        }
        if (!found)
            return false;
    }
    return true;
}

uint32_t retry_after_ceil(double wait_s)
{
    if (!(wait_s > 0))
        return 1;
    double c = ceil(wait_s - 1e-9);
    if (c < 1)
        return 1;
    if (c > 2147483647.0)
        return 2147483647u;
    return (uint32_t)c;
}

uint32_t retry_after_told_s(const struct retry_after *ra, uint32_t auto_s)
{
    if (ra->format == RA_RAW) { /* "30" sent raw reads as 30 s to any client */
        size_t digits = ra->raw ? strspn(ra->raw, "0123456789") : 0;
        return digits > 0 && digits < 10 && !ra->raw[digits] ? (uint32_t)strtoul(ra->raw, NULL, 10)
                                                             : 0;
    }
    if (ra->format != RA_SECONDS && ra->format != RA_HTTP_DATE)
        return 0;
    return ra->is_auto ? auto_s : ra->seconds;
}

int64_t retry_after_date_s(const struct retry_after *ra, double wait_s, int64_t now_unix_us)
{
    double w = ra->is_auto ? wait_s : (double)ra->seconds;
    int64_t due_us = now_unix_us + (int64_t)ceil((w > 0 ? w : 0) * 1e6);
    return (due_us + 999999) / 1000000; /* up: a date never names an instant before `due` */
}

bool retry_after_format(const struct retry_after *ra, uint32_t auto_s, int64_t now_unix_s,
                        char *out, size_t len)
{
    return retry_after_format_at(ra, auto_s, (double)auto_s, now_unix_s * 1000000, out, len);
}

bool retry_after_format_at(const struct retry_after *ra, uint32_t auto_s, double wait_s,
                           int64_t now_unix_us, char *out, size_t len)
{
    uint32_t s = ra->is_auto ? auto_s : ra->seconds;
    switch (ra->format) {
    case RA_NONE:
        break;
    case RA_SECONDS:
        snprintf(out, len, "%u", s);
        return true;
    case RA_HTTP_DATE: {
        time_t t = (time_t)retry_after_date_s(ra, wait_s, now_unix_us);
        struct tm tm;
        gmtime_r(&t, &tm);
        strftime(out, len, "%a, %d %b %Y %H:%M:%S GMT", &tm);
        return true;
    }
    case RA_RAW:
        snprintf(out, len, "%s", ra->raw ? ra->raw : "");
        return true;
    }
    if (len)
        out[0] = '\0';
    return false;
}
