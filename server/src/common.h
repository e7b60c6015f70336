/* common.h -- small definitions every module shares: error buffers, clocks, units.
 * Times inside fakegate are int64 nanoseconds on CLOCK_MONOTONIC unless a name says otherwise
 * (`_ms`, `_s`, `_unix_us`). */
#ifndef FAKEGATE_COMMON_H
#define FAKEGATE_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FAKEGATE_VERSION "0.1.0"

/* Size of the caller-provided buffer that start-up and configuration functions fill with a
 * one-line message when they return -1 (Redis anet style). */
#define ERR_LEN 512

#define NS_PER_MS INT64_C(1000000)
#define NS_PER_S INT64_C(1000000000)

/* Monotonic clock in ns. Thread: any. */
int64_t now_mono_ns(void);
/* Wall clock in µs since the Unix epoch (UTC). Thread: any. */
int64_t now_unix_us(void);

/* Copy the NUL-terminated `src` into dst[size] (size >= 1), cut to size - 1 bytes, always
 * NUL-terminated: snprintf(dst, size, "%s", src) without printf's cost on the request path.
 * Thread: any; pure. */
void copy_cstr(char *dst, size_t size, const char *src);

/* Format `unix_us` (µs since the epoch, UTC) as Korea time, seconds precision, with the offset
 * Toss writes: "2024-02-13T12:17:57+09:00" (25 chars + NUL), whatever the host's time zone
 * (docs/edge-rules.md §7 "Time"). */
void fmt_kst(int64_t unix_us, char out[32]);

/* True when `s` begins with "yyyy-MM-ddTHH:mm:ss" written in digits, which sscanf's %d alone
 * does not ensure: it also takes a sign or leading spaces ("T+1:00:00", "T 1:00:00").
 * Thread: any; pure. */
bool date_time_form(const char *s);

/* Read `s` ("yyyy-MM-ddTHH:mm:ss", optionally ".S" to ".SSSSSS", no offset: Korea time, as
 * GET /v1/transactions takes its startDate and endDate, docs/api.md §2.2) into *out, Unix
 * seconds (the fraction dropped). False, *out untouched, for NULL, another form or no calendar
 * day (2026-02-30). Thread: any; pure. */
bool parse_kst(const char *s, int64_t *out);

/* The value of hexadecimal digit `c` (either case), or -1 if it is none. Thread: any. */
int hex_digit(char c);

#endif
