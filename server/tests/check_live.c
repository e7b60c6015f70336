/* check_live.c -- unit tests for live.c: admission (throttle, then the concurrency cap) with exact
 * in-flight counts and peaks, the schedule clock, attempt counters and the `times` budgets that a
 * fresh live (a re-applied profile) resets. Times are passed in; no clock is read. Profiles are
 * parsed from JSON with profile_parse. */
#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "common.h"
#include "live.h"
#include "profile.h"
#include "rng.h"

#define T0 (INT64_C(5000) * NS_PER_S)

static struct profile *parse_ok(const char *text)
{
    struct profile *p = NULL;
    char err[ERR_LEN] = "";
    int rc = profile_parse(text, strlen(text), "t.json", NULL, NULL, &p, err);
    ck_assert_msg(rc == 0, "unexpected rejection: %s", err);
    ck_assert_ptr_nonnull(p);
    return p;
}

static void flight_zero(struct flight *f)
{
    for (int r = 0; r < ROUTE_COUNT; r++) {
        atomic_init(&f->in_flight[r], 0);
        atomic_init(&f->peak[r], 0);
    }
}

static long in_flight(struct flight *f, enum route_id r)
{
    return atomic_load(&f->in_flight[r]);
}

static long peak(struct flight *f, enum route_id r)
{
    return atomic_load(&f->peak[r]);
}

/* live_current then live_admit, as the request path does. */
static enum admit admit_at(struct live *l, struct flight *f, enum route_id route, int64_t now,
                           struct admission *out)
{
    int64_t since;
    struct live *cur = live_current(l, now, &since);
    live_admit(cur, since, f, route, now, out);
    return out->result;
}

/* ---- admission and in-flight counts ---------------------------------------------------------- */

static const char CAP3[] =
    "{\"name\": \"cap\", \"routes\": {\"confirm\": {\"concurrency\": {\"max_in_flight\": 3, "
    "\"status\": 503, \"code\": \"PROVIDER_ERROR\"}}}}";

START_TEST(test_cap_of_3_admits_3_and_refuses_the_4th_without_counting_it)
{
    struct profile *p = parse_ok(CAP3);
    struct live *l = live_new(p, T0);
    ck_assert_ptr_nonnull(l);
    struct flight f;
    flight_zero(&f);
    struct admission a;
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(admit_at(l, &f, ROUTE_CONFIRM, T0 + i, &a), ADMIT_OK);
        ck_assert_ptr_null(a.cap);
        ck_assert_ptr_null(a.throttle);
    }
    ck_assert_int_eq(in_flight(&f, ROUTE_CONFIRM), 3);
    ck_assert_int_eq(peak(&f, ROUTE_CONFIRM), 3);
    ck_assert_int_eq(admit_at(l, &f, ROUTE_CONFIRM, T0 + 10, &a), ADMIT_CAPPED);
    ck_assert_ptr_eq(a.cap, &profile_route(p, ROUTE_CONFIRM)->concurrency);
    ck_assert_uint_eq(a.cap->max_in_flight, 3);
    ck_assert_str_eq(a.cap->code, "PROVIDER_ERROR");
    ck_assert_int_eq(in_flight(&f, ROUTE_CONFIRM), 3);
    ck_assert_int_eq(peak(&f, ROUTE_CONFIRM), 3);
    ck_assert_int_eq(admit_at(l, &f, ROUTE_CONFIRM, T0 + 11, &a), ADMIT_CAPPED);
    ck_assert_int_eq(in_flight(&f, ROUTE_CONFIRM), 3);
    live_free(l);
    profile_free(p);
}
END_TEST

START_TEST(test_flight_end_frees_a_slot_and_the_peak_stays_exact)
{
    struct profile *p = parse_ok(CAP3);
    struct live *l = live_new(p, T0);
    struct flight f;
    flight_zero(&f);
    struct admission a;
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(admit_at(l, &f, ROUTE_CONFIRM, T0, &a), ADMIT_OK);
    ck_assert_int_eq(admit_at(l, &f, ROUTE_CONFIRM, T0, &a), ADMIT_CAPPED);
    flight_end(&f, ROUTE_CONFIRM);
    ck_assert_int_eq(in_flight(&f, ROUTE_CONFIRM), 2);
    ck_assert_int_eq(peak(&f, ROUTE_CONFIRM), 3);
    ck_assert_int_eq(admit_at(l, &f, ROUTE_CONFIRM, T0, &a), ADMIT_OK);
    ck_assert_int_eq(in_flight(&f, ROUTE_CONFIRM), 3);
    ck_assert_int_eq(peak(&f, ROUTE_CONFIRM), 3);
    ck_assert_int_eq(admit_at(l, &f, ROUTE_CONFIRM, T0, &a), ADMIT_CAPPED);
    for (int i = 0; i < 3; i++)
        flight_end(&f, ROUTE_CONFIRM);
    ck_assert_int_eq(in_flight(&f, ROUTE_CONFIRM), 0);
    ck_assert_int_eq(peak(&f, ROUTE_CONFIRM), 3);
    live_free(l);
    profile_free(p);
}
END_TEST

START_TEST(test_reset_peaks_sets_each_peak_to_the_current_in_flight_count)
{
    struct profile *p = parse_ok(CAP3);
    struct live *l = live_new(p, T0);
    struct flight f;
    flight_zero(&f);
    struct admission a;
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(admit_at(l, &f, ROUTE_CONFIRM, T0, &a), ADMIT_OK);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(admit_at(l, &f, ROUTE_READ, T0, &a), ADMIT_OK);
    flight_end(&f, ROUTE_CONFIRM);
    flight_end(&f, ROUTE_CONFIRM);
    for (int i = 0; i < 5; i++)
        flight_end(&f, ROUTE_READ);
    flight_reset_peaks(&f);
    ck_assert_int_eq(peak(&f, ROUTE_CONFIRM), 1);
    ck_assert_int_eq(peak(&f, ROUTE_READ), 0);
    ck_assert_int_eq(peak(&f, ROUTE_CANCEL), 0);
    ck_assert_int_eq(admit_at(l, &f, ROUTE_CONFIRM, T0, &a), ADMIT_OK);
    ck_assert_int_eq(peak(&f, ROUTE_CONFIRM), 2);
    live_free(l);
    profile_free(p);
}
END_TEST

START_TEST(test_routes_without_a_cap_admit_any_number_and_are_counted_separately)
{
    struct profile *p = parse_ok(CAP3);
    struct live *l = live_new(p, T0);
    struct flight f;
    flight_zero(&f);
    struct admission a;
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(admit_at(l, &f, ROUTE_CONFIRM, T0, &a), ADMIT_OK);
    for (int i = 0; i < 1000; i++) {
        ck_assert_int_eq(admit_at(l, &f, ROUTE_CANCEL, T0, &a), ADMIT_OK);
        ck_assert_int_eq(admit_at(l, &f, ROUTE_DEFAULT, T0, &a), ADMIT_OK);
    }
    ck_assert_int_eq(in_flight(&f, ROUTE_CONFIRM), 3);
    ck_assert_int_eq(in_flight(&f, ROUTE_CANCEL), 1000);
    ck_assert_int_eq(peak(&f, ROUTE_DEFAULT), 1000);
    ck_assert_int_eq(in_flight(&f, ROUTE_READ), 0);
    live_free(l);
    profile_free(p);
}
END_TEST

START_TEST(test_throttled_requests_are_not_counted_in_flight)
{
    struct profile *p = parse_ok(
        "{\"name\": \"thr\", \"routes\": {\"confirm\": {"
        "\"throttle\": {\"kind\": \"token_bucket\", \"rate_per_s\": 1, \"burst\": 1}, "
        "\"concurrency\": {\"max_in_flight\": 3}}}}");
    struct live *l = live_new(p, T0);
    struct flight f;
    flight_zero(&f);
    struct admission a;
    ck_assert_int_eq(admit_at(l, &f, ROUTE_CONFIRM, T0, &a), ADMIT_OK);
    for (int i = 1; i <= 5; i++) {
        ck_assert_int_eq(admit_at(l, &f, ROUTE_CONFIRM, T0 + i * 100 * NS_PER_MS, &a),
                         ADMIT_THROTTLED);
        ck_assert_ptr_eq(a.throttle, &profile_route(p, ROUTE_CONFIRM)->throttle);
        ck_assert_ptr_null(a.cap);
        ck_assert_uint_eq(a.retry_after_auto_s, 1);
    }
    ck_assert_int_eq(in_flight(&f, ROUTE_CONFIRM), 1);
    ck_assert_int_eq(peak(&f, ROUTE_CONFIRM), 1);
    /* Back at the announced second: admitted and counted. */
    ck_assert_int_eq(admit_at(l, &f, ROUTE_CONFIRM, T0 + 500 * NS_PER_MS + NS_PER_S, &a),
                     ADMIT_OK);
    ck_assert_int_eq(in_flight(&f, ROUTE_CONFIRM), 2);
    live_free(l);
    profile_free(p);
}
END_TEST

START_TEST(test_fresh_live_starts_with_full_buckets)
{
    struct profile *p = parse_ok(
        "{\"name\": \"thr\", \"routes\": {\"default\": {"
        "\"throttle\": {\"kind\": \"token_bucket\", \"rate_per_s\": 0.5, \"burst\": 2}}}}");
    struct flight f;
    flight_zero(&f);
    struct admission a;
    struct live *l = live_new(p, T0);
    ck_assert_int_eq(admit_at(l, &f, ROUTE_READ, T0, &a), ADMIT_OK);
    ck_assert_int_eq(admit_at(l, &f, ROUTE_CANCEL, T0, &a), ADMIT_OK);
    /* read and cancel fall back to `default` but each route has its own bucket. */
    ck_assert_int_eq(admit_at(l, &f, ROUTE_READ, T0, &a), ADMIT_OK);
    ck_assert_int_eq(admit_at(l, &f, ROUTE_READ, T0, &a), ADMIT_THROTTLED);
    ck_assert_uint_eq(a.retry_after_auto_s, 2);
    live_free(l);
    l = live_new(p, T0 + NS_PER_MS);
    ck_assert_int_eq(admit_at(l, &f, ROUTE_READ, T0 + NS_PER_MS, &a), ADMIT_OK);
    ck_assert_int_eq(admit_at(l, &f, ROUTE_READ, T0 + NS_PER_MS, &a), ADMIT_OK);
    ck_assert_int_eq(admit_at(l, &f, ROUTE_READ, T0 + NS_PER_MS, &a), ADMIT_THROTTLED);
    live_free(l);
    profile_free(p);
}
END_TEST

START_TEST(test_window_throttle_counts_from_the_moment_the_profile_was_applied)
{
    struct profile *p = parse_ok(
        "{\"name\": \"dawn\", \"routes\": {\"confirm\": {\"throttle\": {\"kind\": \"window\", "
        "\"period_s\": 60, \"throttled_s\": 10, \"offset_s\": 5, \"status\": 429}}}}");
    struct live *l = live_new(p, T0);
    struct flight f;
    flight_zero(&f);
    struct admission a;
    ck_assert_int_eq(admit_at(l, &f, ROUTE_CONFIRM, T0 + 4 * NS_PER_S, &a), ADMIT_OK);
    ck_assert_int_eq(admit_at(l, &f, ROUTE_CONFIRM, T0 + 5 * NS_PER_S, &a), ADMIT_THROTTLED);
    ck_assert_uint_eq(a.retry_after_auto_s, 10);
    ck_assert_int_eq(a.throttle->status, 429);
    ck_assert_int_eq(admit_at(l, &f, ROUTE_CONFIRM, T0 + 12500 * NS_PER_MS, &a),
                     ADMIT_THROTTLED);
    ck_assert_uint_eq(a.retry_after_auto_s, 3);
    ck_assert_int_eq(admit_at(l, &f, ROUTE_CONFIRM, T0 + 15 * NS_PER_S, &a), ADMIT_OK);
    ck_assert_int_eq(admit_at(l, &f, ROUTE_CONFIRM, T0 + 66 * NS_PER_S, &a), ADMIT_THROTTLED);
    ck_assert_uint_eq(a.retry_after_auto_s, 9);
    ck_assert_int_eq(in_flight(&f, ROUTE_CONFIRM), 2);
    live_free(l);
    profile_free(p);
}
END_TEST

/* ---- schedules ------------------------------------------------------------------------------- */

static const char SCHEDULE_REPEAT[] =
    "{\"name\": \"sched\", \"schedule\": ["
    "{\"for_s\": 10, \"profile\": {\"name\": \"a\", \"routes\": {}}}, "
    "{\"for_s\": 5, \"profile\": {\"name\": \"b\", \"routes\": {}}}], \"repeat\": true}";
static const char SCHEDULE_ONCE[] =
    "{\"name\": \"sched\", \"schedule\": ["
    "{\"for_s\": 10, \"profile\": {\"name\": \"a\", \"routes\": {}}}, "
    "{\"for_s\": 5, \"profile\": {\"name\": \"b\", \"routes\": {}}}], \"repeat\": false}";

/* The phase name in force at T0 + at_ms, and since_ns in *since. */
static const char *phase_at(struct live *l, int64_t at_ms, int64_t *since)
{
    struct live *cur = live_current(l, T0 + at_ms * NS_PER_MS, since);
    ck_assert_ptr_nonnull(cur);
    return cur->profile->name;
}

START_TEST(test_plain_profile_is_its_own_state_with_since_from_apply)
{
    struct profile *p = parse_ok(CAP3);
    struct live *l = live_new(p, T0);
    int64_t since = -1;
    ck_assert_ptr_eq(live_current(l, T0 + 1234, &since), l);
    ck_assert_int_eq(since, 1234);
    ck_assert_ptr_eq(live_current(l, T0 + 86400 * NS_PER_S, &since), l);
    ck_assert_int_eq(since, 86400 * NS_PER_S);
    live_free(l);
    profile_free(p);
}
END_TEST

START_TEST(test_repeating_schedule_goes_a_b_a_with_since_from_the_phase_occurrence)
{
    struct profile *p = parse_ok(SCHEDULE_REPEAT);
    ck_assert(p->repeat);
    struct live *l = live_new(p, T0);
    int64_t since = -1;
    ck_assert_str_eq(phase_at(l, 0, &since), "a");
    ck_assert_int_eq(since, 0);
    ck_assert_str_eq(phase_at(l, 9900, &since), "a");
    ck_assert_int_eq(since, 9900 * NS_PER_MS);
    ck_assert_str_eq(phase_at(l, 10000, &since), "b");
    ck_assert_int_eq(since, 0);
    ck_assert_str_eq(phase_at(l, 14999, &since), "b");
    ck_assert_int_eq(since, 4999 * NS_PER_MS);
    ck_assert_str_eq(phase_at(l, 15000, &since), "a");
    ck_assert_int_eq(since, 0);
    ck_assert_str_eq(phase_at(l, 27000, &since), "b");
    ck_assert_int_eq(since, 2000 * NS_PER_MS);
    ck_assert_str_eq(phase_at(l, 15000 * 1000 + 3000, &since), "a");
    ck_assert_int_eq(since, 3000 * NS_PER_MS);
    /* The returned states are the schedule's own phases, the same one each occurrence. */
    ck_assert_ptr_eq(live_current(l, T0, &since), &l->phases[0]);
    ck_assert_ptr_eq(live_current(l, T0 + 15 * NS_PER_S, &since), &l->phases[0]);
    ck_assert_ptr_eq(live_current(l, T0 + 10 * NS_PER_S, &since), &l->phases[1]);
    live_free(l);
    profile_free(p);
}
END_TEST

START_TEST(test_schedule_without_repeat_stays_in_its_last_phase)
{
    struct profile *p = parse_ok(SCHEDULE_ONCE);
    ck_assert(!p->repeat);
    struct live *l = live_new(p, T0);
    int64_t since = -1;
    ck_assert_str_eq(phase_at(l, 9999, &since), "a");
    ck_assert_str_eq(phase_at(l, 10000, &since), "b");
    ck_assert_int_eq(since, 0);
    ck_assert_str_eq(phase_at(l, 15000, &since), "b");
    ck_assert_int_eq(since, 5 * NS_PER_S);
    ck_assert_str_eq(phase_at(l, 20000, &since), "b");
    ck_assert_int_eq(since, 10 * NS_PER_S);
    ck_assert_str_eq(phase_at(l, 3600 * 1000, &since), "b");
    ck_assert_int_eq(since, 3590 * NS_PER_S);
    live_free(l);
    profile_free(p);
}
END_TEST

START_TEST(test_schedule_phase_throttle_uses_the_phase_state)
{
    /* Phase "a": no throttle for 10 s; phase "b": bucket of 1 for 5 s; repeat. */
    struct profile *p = parse_ok(
        "{\"name\": \"sched\", \"schedule\": ["
        "{\"for_s\": 10, \"profile\": {\"name\": \"a\", \"routes\": {}}}, "
        "{\"for_s\": 5, \"profile\": {\"name\": \"b\", \"routes\": {\"confirm\": {\"throttle\": "
        "{\"kind\": \"token_bucket\", \"rate_per_s\": 0.01, \"burst\": 1}}}}}], \"repeat\": true}");
    struct live *l = live_new(p, T0);
    struct flight f;
    flight_zero(&f);
    struct admission a;
    for (int i = 0; i < 50; i++)
        ck_assert_int_eq(admit_at(l, &f, ROUTE_CONFIRM, T0 + i * 100 * NS_PER_MS, &a),
                         ADMIT_OK);
    ck_assert_int_eq(admit_at(l, &f, ROUTE_CONFIRM, T0 + 11 * NS_PER_S, &a), ADMIT_OK);
    ck_assert_int_eq(admit_at(l, &f, ROUTE_CONFIRM, T0 + 12 * NS_PER_S, &a), ADMIT_THROTTLED);
    ck_assert_uint_eq(a.retry_after_auto_s, 99);
    ck_assert_int_eq(admit_at(l, &f, ROUTE_CONFIRM, T0 + 16 * NS_PER_S, &a), ADMIT_OK);
    live_free(l);
    profile_free(p);
}
END_TEST

/* ---- attempts -------------------------------------------------------------------------------- */

START_TEST(test_attempts_count_1_2_3_for_the_same_route_and_identity)
{
    struct attempts at;
    attempts_init(&at, 0);
    ck_assert_uint_eq(attempts_next(&at, ROUTE_CONFIRM, "order-1", 0), 1);
    ck_assert_uint_eq(attempts_next(&at, ROUTE_CONFIRM, "order-1", 0), 2);
    ck_assert_uint_eq(attempts_next(&at, ROUTE_CONFIRM, "order-1", 0), 3);
    attempts_fini(&at);
}
END_TEST

START_TEST(test_attempts_are_independent_across_routes_and_identities)
{
    struct attempts at;
    attempts_init(&at, 0);
    ck_assert_uint_eq(attempts_next(&at, ROUTE_CONFIRM, "k", 0), 1);
    ck_assert_uint_eq(attempts_next(&at, ROUTE_CONFIRM, "k", 0), 2);
    ck_assert_uint_eq(attempts_next(&at, ROUTE_CANCEL, "k", 0), 1);
    ck_assert_uint_eq(attempts_next(&at, ROUTE_READ, "k", 0), 1);
    ck_assert_uint_eq(attempts_next(&at, ROUTE_DEFAULT, "k", 0), 1);
    ck_assert_uint_eq(attempts_next(&at, ROUTE_CONFIRM, "k2", 0), 1);
    ck_assert_uint_eq(attempts_next(&at, ROUTE_CONFIRM, "", 0), 1);
    ck_assert_uint_eq(attempts_next(&at, ROUTE_CONFIRM, "", 0), 2);
    ck_assert_uint_eq(attempts_next(&at, ROUTE_CANCEL, "k", 0), 2);
    ck_assert_uint_eq(attempts_next(&at, ROUTE_CONFIRM, "k", 0), 3);
    /* Many identities: each its own counter (the map grows past its first sizes). */
    for (int round = 1; round <= 3; round++) {
        for (int i = 0; i < 5000; i++) {
            char id[32];
            snprintf(id, sizeof id, "order-%d", i);
            ck_assert_uint_eq(attempts_next(&at, ROUTE_CONFIRM, id, 0), (uint32_t)round);
        }
    }
    attempts_fini(&at);
}
END_TEST

START_TEST(test_attempts_reset_restarts_every_counter_at_1)
{
    struct attempts at;
    attempts_init(&at, 0);
    for (int i = 0; i < 4; i++)
        attempts_next(&at, ROUTE_CONFIRM, "order-1", 0);
    attempts_next(&at, ROUTE_READ, "pk-1", 0);
    attempts_reset(&at);
    ck_assert_uint_eq(attempts_next(&at, ROUTE_CONFIRM, "order-1", 0), 1);
    ck_assert_uint_eq(attempts_next(&at, ROUTE_READ, "pk-1", 0), 1);
    ck_assert_uint_eq(attempts_next(&at, ROUTE_CONFIRM, "order-1", 0), 2);
    attempts_reset(&at);
    attempts_reset(&at);
    ck_assert_uint_eq(attempts_next(&at, ROUTE_CONFIRM, "order-1", 0), 1);
    attempts_fini(&at);
}
END_TEST

START_TEST(test_attempts_work_for_identities_longer_than_320_bytes)
{
    /* 318 and 319 bytes sit either side of the 320-byte key buffer (2 bytes of route prefix). */
    static const size_t lens[] = {317, 318, 319, 320, 321, 1000, 70000};
    struct attempts at;
    attempts_init(&at, 0);
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
        char *a = malloc(lens[k] + 1), *b = malloc(lens[k] + 1);
        ck_assert_ptr_nonnull(a);
        ck_assert_ptr_nonnull(b);
        memset(a, 'x', lens[k]);
        a[lens[k]] = '\0';
        memcpy(b, a, lens[k] + 1);
        b[lens[k] - 1] = 'y';   /* differs only in its last byte */
        ck_assert_uint_eq(attempts_next(&at, ROUTE_CONFIRM, a, 0), 1);
        ck_assert_uint_eq(attempts_next(&at, ROUTE_CONFIRM, a, 0), 2);
        ck_assert_uint_eq(attempts_next(&at, ROUTE_CONFIRM, b, 0), 1);
        ck_assert_uint_eq(attempts_next(&at, ROUTE_CANCEL, a, 0), 1);
        ck_assert_uint_eq(attempts_next(&at, ROUTE_CONFIRM, a, 0), 3);
        free(a);   /* the counters own their key bytes */
        free(b);
    }
    attempts_reset(&at);
    char big[2001];
    memset(big, 'z', 2000);
    big[2000] = '\0';
    ck_assert_uint_eq(attempts_next(&at, ROUTE_CONFIRM, big, 0), 1);
    attempts_fini(&at);
}
END_TEST

#define S_US INT64_C(1000000)

START_TEST(test_attempts_idle_for_the_ttl_restart_at_1_and_busy_ones_keep_counting)
{
    struct attempts at;
    attempts_init(&at, 30 * S_US);
    const int64_t t0 = 1700000000 * S_US; /* the gateway clock: µs since the epoch */
    ck_assert_uint_eq(attempts_next(&at, ROUTE_CONFIRM, "key-1", t0), 1);
    ck_assert_uint_eq(attempts_next(&at, ROUTE_CONFIRM, "key-1", t0 + 10 * S_US), 2);
    /* Idle 1 µs less than the TTL since its last request: still counting. */
    ck_assert_uint_eq(attempts_next(&at, ROUTE_CONFIRM, "key-1", t0 + 40 * S_US - 1), 3);
    /* Idle exactly the TTL: a first attempt again, then counting from there. */
    ck_assert_uint_eq(attempts_next(&at, ROUTE_CONFIRM, "key-1", t0 + 70 * S_US - 1), 1);
    ck_assert_uint_eq(attempts_next(&at, ROUTE_CONFIRM, "key-1", t0 + 71 * S_US), 2);
    /* Used every 29 s for 10 minutes: never idle for the TTL, so never restarted. */
    for (int i = 1; i <= 20; i++)
        ck_assert_uint_eq(attempts_next(&at, ROUTE_READ, "pk-1", t0 + i * 29 * S_US),
                          (uint32_t)i);
    /* Without a TTL nothing goes idle. */
    struct attempts forever;
    attempts_init(&forever, 0);
    ck_assert_uint_eq(attempts_next(&forever, ROUTE_CONFIRM, "k", t0), 1);
    ck_assert_uint_eq(attempts_next(&forever, ROUTE_CONFIRM, "k", t0 + 1000000 * S_US), 2);
    ck_assert_uint_eq(attempts_sweep(&forever, t0 + 1000000 * S_US, 100, NULL), 0);
    ck_assert_uint_eq(attempts_count(&forever), 1);
    attempts_fini(&forever);
    attempts_fini(&at);
}
END_TEST

START_TEST(test_attempts_sweep_frees_the_counters_idle_for_the_ttl_and_no_other)
{
    struct attempts at;
    attempts_init(&at, 30 * S_US);
    const int64_t t0 = 1700000000 * S_US;
    attempts_next(&at, ROUTE_CONFIRM, "a", t0);
    attempts_next(&at, ROUTE_CONFIRM, "b", t0 + 5 * S_US);
    attempts_next(&at, ROUTE_CONFIRM, "c", t0 + 10 * S_US);
    attempts_next(&at, ROUTE_CANCEL, "a", t0 + 20 * S_US);
    attempts_next(&at, ROUTE_CONFIRM, "a", t0 + 21 * S_US); /* "a" on confirm used again */
    ck_assert_uint_eq(attempts_count(&at), 4);
    bool more = true;
    ck_assert_uint_eq(attempts_sweep(&at, t0 + 35 * S_US - 1, 100, &more), 0);
    ck_assert(!more);
    /* At t0 + 35 s: "b" (idle 30 s) goes; "c" (25 s), cancel "a" (15 s), confirm "a" (14 s)
     * stay. */
    ck_assert_uint_eq(attempts_sweep(&at, t0 + 35 * S_US, 100, &more), 1);
    ck_assert_uint_eq(attempts_count(&at), 3);
    ck_assert_uint_eq(attempts_sweep(&at, t0 + 51 * S_US, 100, &more), 3);
    ck_assert_uint_eq(attempts_count(&at), 0);
    ck_assert(!more);
    /* Swept counters start again at 1. */
    ck_assert_uint_eq(attempts_next(&at, ROUTE_CONFIRM, "a", t0 + 52 * S_US), 1);
    ck_assert_uint_eq(attempts_next(&at, ROUTE_CONFIRM, "a", t0 + 53 * S_US), 2);
    attempts_fini(&at);
}
END_TEST

START_TEST(test_attempts_sweep_takes_at_most_its_budget_per_shard_and_says_more)
{
    struct attempts at;
    attempts_init(&at, 30 * S_US);
    const int64_t t0 = 1700000000 * S_US;
    /* 100 identities over 16 shards: some shard holds two or more. */
    for (int i = 0; i < 100; i++) {
        char id[32];
        snprintf(id, sizeof id, "key-%d", i);
        ck_assert_uint_eq(attempts_next(&at, ROUTE_CONFIRM, id, t0 + i), 1);
    }
    bool more = false;
    size_t first = attempts_sweep(&at, t0 + 60 * S_US, 1, &more);
    ck_assert_uint_le(first, ATTEMPTS_SHARDS);
    ck_assert_uint_ge(first, 1);
    ck_assert(more);
    size_t total = first;
    for (int round = 0; more && round < 100; round++)
        total += attempts_sweep(&at, t0 + 60 * S_US, 1, &more);
    ck_assert(!more);
    ck_assert_uint_eq(total, 100);
    ck_assert_uint_eq(attempts_count(&at), 0);
    attempts_fini(&at);
}
END_TEST

/* ---- times budgets --------------------------------------------------------------------------- */

/* A profile whose confirm route has one fault {p 1, times `times`} (times < 0: no "times"). */
static struct profile *budget_profile(int times)
{
    char text[256];
    char times_member[32] = "";
    if (times >= 0)
        snprintf(times_member, sizeof times_member, ", \"times\": %d", times);
    snprintf(text, sizeof text,
             "{\"name\": \"scripted\", \"routes\": {\"confirm\": {\"faults\": ["
             "{\"kind\": \"drop_request\", \"p\": 1, \"how\": \"reset\"%s}]}}}",
             times_member);
    return parse_ok(text);
}

/* live_plan for request "order-<i>" attempt 1 on confirm; true if it got the fault. */
static bool plan_fires(struct live *l, int i)
{
    char id[32];
    int n = snprintf(id, sizeof id, "order-%d", i);
    struct rng r;
    rng_seed_request(&r, 7, ROUTE_CONFIRM, id, (size_t)n, 1);
    int64_t since;
    struct live *cur = live_current(l, T0, &since);
    struct plan pl;
    live_plan(cur, ROUTE_CONFIRM, 1, &r, &pl);
    return pl.fault != NULL;
}

START_TEST(test_times_2_budget_is_shared_by_all_requests_in_arrival_order)
{
    struct profile *p = budget_profile(2);
    ck_assert_int_eq(profile_route(p, ROUTE_CONFIRM)->faults[0].times, 2);
    struct live *l = live_new(p, T0);
    ck_assert_ptr_nonnull(l);
    /* Different identities: the budget is the route's, not the identity's. */
    ck_assert(plan_fires(l, 100));
    ck_assert(plan_fires(l, 200));
    for (int i = 0; i < 50; i++)
        ck_assert(!plan_fires(l, 300 + i));
    ck_assert(!plan_fires(l, 100));
    /* Other routes are untouched (no faults there). */
    struct rng r;
    rng_seed(&r, 1);
    struct plan pl;
    live_plan(l, ROUTE_CANCEL, 1, &r, &pl);
    ck_assert_ptr_null(pl.fault);
    live_free(l);
    profile_free(p);
}
END_TEST

START_TEST(test_live_new_gives_fresh_budgets_and_lives_do_not_share_them)
{
    struct profile *p = budget_profile(3);
    struct live *l = live_new(p, T0);
    for (int i = 0; i < 3; i++)
        ck_assert(plan_fires(l, i));
    ck_assert(!plan_fires(l, 3));
    live_free(l);
    /* Re-applying the profile: the budget is full again. */
    l = live_new(p, T0 + NS_PER_S);
    struct live *other = live_new(p, T0 + NS_PER_S);
    for (int i = 0; i < 3; i++)
        ck_assert(plan_fires(l, i));
    ck_assert(!plan_fires(l, 3));
    for (int i = 0; i < 3; i++)
        ck_assert(plan_fires(other, i));
    ck_assert(!plan_fires(other, 3));
    live_free(other);
    live_free(l);
    profile_free(p);
}
END_TEST

START_TEST(test_unlimited_fault_fires_every_time_under_live_plan)
{
    struct profile *p = budget_profile(-1);
    ck_assert_int_eq(profile_route(p, ROUTE_CONFIRM)->faults[0].times, -1);
    struct live *l = live_new(p, T0);
    for (int i = 0; i < 1000; i++)
        ck_assert(plan_fires(l, i));
    live_free(l);
    profile_free(p);
}
END_TEST

Suite *make_suite(void)
{
    Suite *s = suite_create("live");

    TCase *adm = tcase_create("admission");
    tcase_add_test(adm, test_cap_of_3_admits_3_and_refuses_the_4th_without_counting_it);
    tcase_add_test(adm, test_flight_end_frees_a_slot_and_the_peak_stays_exact);
    tcase_add_test(adm, test_reset_peaks_sets_each_peak_to_the_current_in_flight_count);
    tcase_add_test(adm, test_routes_without_a_cap_admit_any_number_and_are_counted_separately);
    tcase_add_test(adm, test_throttled_requests_are_not_counted_in_flight);
    tcase_add_test(adm, test_fresh_live_starts_with_full_buckets);
    tcase_add_test(adm, test_window_throttle_counts_from_the_moment_the_profile_was_applied);
    suite_add_tcase(s, adm);

    TCase *sched = tcase_create("schedule");
    tcase_add_test(sched, test_plain_profile_is_its_own_state_with_since_from_apply);
    tcase_add_test(sched, test_repeating_schedule_goes_a_b_a_with_since_from_the_phase_occurrence);
    tcase_add_test(sched, test_schedule_without_repeat_stays_in_its_last_phase);
    tcase_add_test(sched, test_schedule_phase_throttle_uses_the_phase_state);
    suite_add_tcase(s, sched);

    TCase *att = tcase_create("attempts");
    tcase_add_test(att, test_attempts_count_1_2_3_for_the_same_route_and_identity);
    tcase_add_test(att, test_attempts_are_independent_across_routes_and_identities);
    tcase_add_test(att, test_attempts_reset_restarts_every_counter_at_1);
    tcase_add_test(att, test_attempts_work_for_identities_longer_than_320_bytes);
    tcase_add_test(att, test_attempts_idle_for_the_ttl_restart_at_1_and_busy_ones_keep_counting);
    tcase_add_test(att, test_attempts_sweep_frees_the_counters_idle_for_the_ttl_and_no_other);
    tcase_add_test(att, test_attempts_sweep_takes_at_most_its_budget_per_shard_and_says_more);
    suite_add_tcase(s, att);

    TCase *bud = tcase_create("budgets");
    tcase_add_test(bud, test_times_2_budget_is_shared_by_all_requests_in_arrival_order);
    tcase_add_test(bud, test_live_new_gives_fresh_budgets_and_lives_do_not_share_them);
    tcase_add_test(bud, test_unlimited_fault_fires_every_time_under_live_plan);
    suite_add_tcase(s, bud);
    return s;
}
