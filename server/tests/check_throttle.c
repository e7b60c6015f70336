/* check_throttle.c -- unit tests for throttle.c: token buckets and periodic windows with the times
 * passed in (no clock is read), the Retry-After rounding ("a client that comes back exactly when
 * told is admitted", docs/profiles.md §4) and the header's formats. */
#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "common.h"
#include "throttle.h"

/* An arbitrary monotonic origin, far from 0 so that nothing depends on it being 0. */
#define T0 (INT64_C(987654321) * NS_PER_MS)

static int64_t ms(double v)
{
    return (int64_t)llround(v * (double)NS_PER_MS);
}

static int64_t secs(double v)
{
    return (int64_t)llround(v * (double)NS_PER_S);
}

static struct throttle window(double period_s, double throttled_s, double offset_s)
{
    struct throttle t;
    memset(&t, 0, sizeof t);
    t.kind = THROTTLE_WINDOW;
    t.period_s = period_s;
    t.throttled_s = throttled_s;
    t.offset_s = offset_s;
    t.status = 503;
    return t;
}

/* ---- token bucket ---------------------------------------------------------------------------- */

START_TEST(test_bucket_1_per_s_burst_5_admits_exactly_5_of_20_requests_in_100_ms)
{
    struct token_bucket b;
    bucket_init(&b, 5, T0);
    int admitted = 0;
    for (int i = 0; i < 20; i++) {
        double wait = -1;
        if (bucket_take(&b, 1, 5, T0 + ms(5.0 * i), &wait)) {
            ck_assert_int_lt(i, 5);
            admitted++;
        } else {
            ck_assert_int_ge(i, 5);
            ck_assert_msg(wait > 0.8 && wait <= 1.0, "wait %.9f s", wait);
            ck_assert_uint_eq(retry_after_ceil(wait), 1);
        }
    }
    ck_assert_int_eq(admitted, 5);
}
END_TEST

START_TEST(test_bucket_1_per_s_admits_exactly_one_more_a_second_later)
{
    struct token_bucket b;
    bucket_init(&b, 5, T0);
    double wait = -1;
    for (int i = 0; i < 20; i++)
        ck_assert(bucket_take(&b, 1, 5, T0 + ms(5.0 * i), &wait) == (i < 5));
    /* 5 taken, 1 s of refill since t0: exactly one token. */
    ck_assert(!bucket_take(&b, 1, 5, T0 + ms(999), &wait));
    ck_assert_double_eq_tol(wait, 0.001, 1e-9);
    ck_assert(bucket_take(&b, 1, 5, T0 + secs(1), &wait));
    ck_assert(!bucket_take(&b, 1, 5, T0 + secs(1), &wait));
    ck_assert_double_eq_tol(wait, 1.0, 1e-9);
    ck_assert_uint_eq(retry_after_ceil(wait), 1);
}
END_TEST

START_TEST(test_bucket_burst_5_all_taken_at_t0_gives_one_token_at_t0_plus_1_s)
{
    struct token_bucket b;
    bucket_init(&b, 5, T0);
    double wait = -1;
    for (int i = 0; i < 5; i++)
        ck_assert(bucket_take(&b, 1, 5, T0, &wait));
    ck_assert(!bucket_take(&b, 1, 5, T0, &wait));
    ck_assert_double_eq_tol(wait, 1.0, 1e-12);
    ck_assert(!bucket_take(&b, 1, 5, T0 + ms(999), &wait));
    ck_assert_double_eq_tol(wait, 0.001, 1e-9);
    ck_assert(bucket_take(&b, 1, 5, T0 + secs(1), &wait));
    ck_assert(!bucket_take(&b, 1, 5, T0 + secs(1), &wait));
}
END_TEST

START_TEST(test_bucket_half_a_token_per_s_announces_the_next_token_in_2_s)
{
    struct token_bucket b;
    bucket_init(&b, 1, T0);
    double wait = -1;
    ck_assert(bucket_take(&b, 0.5, 1, T0, &wait));
    ck_assert(!bucket_take(&b, 0.5, 1, T0, &wait));
    ck_assert_double_eq_tol(wait, 2.0, 1e-12);
    ck_assert_uint_eq(retry_after_ceil(wait), 2);
    ck_assert(!bucket_take(&b, 0.5, 1, T0 + secs(1), &wait));
    ck_assert_double_eq_tol(wait, 1.0, 1e-9);
    ck_assert(!bucket_take(&b, 0.5, 1, T0 + secs(1.999), &wait));
    ck_assert(bucket_take(&b, 0.5, 1, T0 + secs(2), &wait));
}
END_TEST

START_TEST(test_bucket_client_returning_at_the_announced_retry_after_is_admitted)
{
    struct token_bucket b;
    bucket_init(&b, 1, T0);
    double wait = -1;
    ck_assert(bucket_take(&b, 1, 1, T0, &wait));
    int64_t refused_at = T0 + ms(300);
    ck_assert(!bucket_take(&b, 1, 1, refused_at, &wait));
    ck_assert_double_eq_tol(wait, 0.7, 1e-9);
    uint32_t ra = retry_after_ceil(wait);
    ck_assert_uint_eq(ra, 1);
    ck_assert(bucket_take(&b, 1, 1, refused_at + (int64_t)ra * NS_PER_S, &wait));
}
END_TEST

START_TEST(test_bucket_client_returning_at_retry_after_is_admitted_for_any_rate_and_moment)
{
    static const double rates[] = {0.1, 0.3, 0.5, 0.7, 1, 1.5, 3, 7.5, 100, 1000};
    for (size_t k = 0; k < sizeof rates / sizeof rates[0]; k++) {
        /* Refused at every 0.5 ms step over the first 3 s after the only token went. */
        for (int step = 0; step < 6000; step++) {
            struct token_bucket b;
            bucket_init(&b, 1, T0);
            double wait = -1;
            ck_assert(bucket_take(&b, rates[k], 1, T0, &wait));
            int64_t at = T0 + step * (NS_PER_MS / 2);
            if (bucket_take(&b, rates[k], 1, at, &wait))
                continue;
            uint32_t ra = retry_after_ceil(wait);
            ck_assert_uint_ge(ra, 1);
            ck_assert_msg(bucket_take(&b, rates[k], 1, at + (int64_t)ra * NS_PER_S, &wait),
                          "rate %g/s, refused at +%d us, Retry-After %u: refused again", rates[k],
                          step * 500, ra);
        }
    }
}
END_TEST

START_TEST(test_bucket_never_holds_more_than_burst_after_a_long_idle)
{
    struct token_bucket b;
    bucket_init(&b, 3, T0);
    double wait = -1;
    ck_assert(bucket_take(&b, 2, 3, T0, &wait));
    int64_t later = T0 + secs(3600);
    for (int i = 0; i < 3; i++)
        ck_assert(bucket_take(&b, 2, 3, later, &wait));
    ck_assert(!bucket_take(&b, 2, 3, later, &wait));
    ck_assert_double_eq_tol(wait, 0.5, 1e-12);
}
END_TEST

START_TEST(test_bucket_earlier_time_than_last_update_adds_no_tokens)
{
    struct token_bucket b;
    bucket_init(&b, 1, T0);
    double wait = -1;
    ck_assert(bucket_take(&b, 1, 1, T0 + secs(2), &wait));
    /* A request whose clock reading is older than the last update (threads racing to the lock)
     * gets nothing back for the negative interval. */
    ck_assert(!bucket_take(&b, 1, 1, T0 + secs(1), &wait));
    ck_assert_double_eq_tol(wait, 1.0, 1e-12);
    ck_assert(bucket_take(&b, 1, 1, T0 + secs(3), &wait));
}
END_TEST

/* ---- window ---------------------------------------------------------------------------------- */

START_TEST(test_window_period_1_s_throttled_0_6_s_is_closed_then_open_then_closed)
{
    struct throttle t = window(1, 0.6, 0);
    double wait = -1;
    ck_assert(window_throttled(&t, secs(0), &wait));
    ck_assert_double_eq_tol(wait, 0.6, 1e-9);
    ck_assert(window_throttled(&t, secs(0.1), &wait));
    ck_assert_double_eq_tol(wait, 0.5, 1e-9);
    ck_assert_uint_eq(retry_after_ceil(wait), 1);
    ck_assert(window_throttled(&t, secs(0.599), &wait));
    ck_assert_double_eq_tol(wait, 0.001, 1e-9);
    ck_assert(!window_throttled(&t, secs(0.6), &wait));
    ck_assert(!window_throttled(&t, secs(0.7), &wait));
    ck_assert(!window_throttled(&t, secs(0.999), &wait));
    ck_assert(window_throttled(&t, secs(1.05), &wait));
    ck_assert_double_eq_tol(wait, 0.55, 1e-9);
    ck_assert_uint_eq(retry_after_ceil(wait), 1);
    ck_assert(window_throttled(&t, secs(3600.2), &wait));
    ck_assert_double_eq_tol(wait, 0.4, 1e-6);
}
END_TEST

START_TEST(test_window_offset_0_25_s_shifts_the_closed_part)
{
    struct throttle t = window(1, 0.6, 0.25);
    double wait = -1;
    /* since 0.1 s is 0.15 s before the first period: the previous period's open part (0.85). */
    ck_assert(!window_throttled(&t, secs(0.1), &wait));
    ck_assert(window_throttled(&t, secs(0.25), &wait));
    ck_assert_double_eq_tol(wait, 0.6, 1e-9);
    ck_assert(window_throttled(&t, secs(0.3), &wait));
    ck_assert_double_eq_tol(wait, 0.55, 1e-9);
    ck_assert(!window_throttled(&t, secs(0.85), &wait));
    ck_assert(window_throttled(&t, secs(1.3), &wait));
    ck_assert_double_eq_tol(wait, 0.55, 1e-9);
}
END_TEST

START_TEST(test_window_negative_since_counts_as_the_previous_period)
{
    struct throttle t = window(10, 3, 0);
    double wait = -1;
    ck_assert(!window_throttled(&t, secs(-1), &wait));    /* phase 9 */
    ck_assert(window_throttled(&t, secs(-8), &wait));     /* phase 2 */
    ck_assert_double_eq_tol(wait, 1.0, 1e-9);
    ck_assert(window_throttled(&t, secs(-10), &wait));    /* phase 0 */
    ck_assert_double_eq_tol(wait, 3.0, 1e-9);
}
END_TEST

START_TEST(test_window_dawn_peak_60_s_throttled_10_s_offset_5_s)
{
    struct throttle t = window(60, 10, 5);
    double wait = -1;
    ck_assert(!window_throttled(&t, secs(4.999), &wait));
    ck_assert(window_throttled(&t, secs(5), &wait));
    ck_assert_double_eq_tol(wait, 10.0, 1e-9);
    ck_assert_uint_eq(retry_after_ceil(wait), 10);
    ck_assert(window_throttled(&t, secs(12.4), &wait));
    ck_assert_uint_eq(retry_after_ceil(wait), 3);
    ck_assert(!window_throttled(&t, secs(15), &wait));
    /* 9.5 s left in the window: the announced wait is whole seconds, 10. */
    ck_assert(window_throttled(&t, secs(65.5), &wait));
    ck_assert_double_eq_tol(wait, 10.0, 1e-9);
    ck_assert(!window_throttled(&t, secs(65.5 + 10), &wait));
}
END_TEST

START_TEST(test_window_with_an_open_part_of_1_s_or_more_admits_a_client_at_retry_after)
{
    static const double shapes[][2] = {{60, 10}, {2.5, 1.5}, {2, 1}, {10, 0.3}, {1.7, 0.7}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        struct throttle t = window(shapes[k][0], shapes[k][1], 0.125);
        for (int step = 0; step < 20000; step++) {
            int64_t since = step * NS_PER_MS;
            double wait = -1;
            if (!window_throttled(&t, since, &wait))
                continue;
            uint32_t ra = retry_after_ceil(wait);
            ck_assert_msg(!window_throttled(&t, since + (int64_t)ra * NS_PER_S, &wait),
                          "period %g throttled %g: refused at %d ms, Retry-After %u, refused "
                          "again", shapes[k][0], shapes[k][1], step, ra);
        }
    }
}
END_TEST

/* docs/profiles.md §4 says "A client that comes back exactly when told is admitted". Retry-After
 * has whole seconds, so with an open part shorter than 1 s the rounded-up wait can land in the next
 * closed part: with period 1 s it lands on the very same phase one period later. This pins what
 * window_throttled + retry_after_ceil do today (reported as a violation of docs/profiles.md §4). */
START_TEST(test_window_with_a_sub_second_open_part_announces_a_retry_after_that_is_admitted)
{
    /* Period 1 s: no whole number of seconds leaves a 0.6 s window (the parser rejects it). */
    struct throttle t = window(1, 0.6, 0);
    ck_assert(!window_retry_reachable(&t));

    /* Period 1.5 s throttled 1 s: refused at 0.9 s, the end of the window (0.1 s) rounded up
     * would land at phase 0.4, closed again; 2 s lands at phase 1.4, open. */
    struct throttle t2 = window(1.5, 1, 0);
    ck_assert(window_retry_reachable(&t2));
    double wait = -1;
    ck_assert(window_throttled(&t2, secs(0.9), &wait));
    ck_assert_uint_eq(retry_after_ceil(wait), 2);
    ck_assert(!window_throttled(&t2, secs(2.9), &wait));

    /* Every refused moment of two reachable shapes is admitted at its Retry-After. */
    struct throttle shapes[2] = {window(1.5, 1, 0), window(2.5, 1.5, 0)};
    for (int k = 0; k < 2; k++) {
        int refused = 0, again = 0;
        for (int step = 0; step < 2500; step++) {
            int64_t since = step * NS_PER_MS;
            if (!window_throttled(&shapes[k], since, &wait))
                continue;
            refused++;
            again += window_throttled(&shapes[k], since + retry_after_ceil(wait) * NS_PER_S, &wait);
        }
        ck_assert_int_gt(refused, 0);
        ck_assert_int_eq(again, 0);
    }
}
END_TEST

START_TEST(test_window_closed_for_the_whole_period_answers_without_a_search)
{
    /* throttled_s == period_s: no open part; the wait is the rest of this period (the search for
     * an open second is skipped: it used to run 100 000 steps per refused request). */
    struct throttle t = window(2, 2, 0);
    double wait = -1;
    ck_assert(window_throttled(&t, secs(0.5), &wait));
    ck_assert_double_eq_tol(wait, 1.5, 1e-9);
    ck_assert(window_throttled(&t, secs(3.9), &wait));
    ck_assert_double_eq_tol(wait, 0.1, 1e-9);
}
END_TEST

/* ---- Retry-After ----------------------------------------------------------------------------- */

START_TEST(test_retry_after_ceil_rounds_up_and_is_never_0)
{
    ck_assert_uint_eq(retry_after_ceil(0), 1);
    ck_assert_uint_eq(retry_after_ceil(-3), 1);
    ck_assert_uint_eq(retry_after_ceil(NAN), 1);
    ck_assert_uint_eq(retry_after_ceil(1e-12), 1);
    ck_assert_uint_eq(retry_after_ceil(0.2), 1);
    ck_assert_uint_eq(retry_after_ceil(1.0), 1);
    ck_assert_uint_eq(retry_after_ceil(1.0000001), 2);
    ck_assert_uint_eq(retry_after_ceil(2.0), 2);
    ck_assert_uint_eq(retry_after_ceil(2.5), 3);
    ck_assert_uint_eq(retry_after_ceil(59.9), 60);
}
END_TEST

START_TEST(test_retry_after_ceil_caps_at_2_pow_31_minus_1)
{
    ck_assert_uint_eq(retry_after_ceil(2147483646.5), 2147483647u);
    ck_assert_uint_eq(retry_after_ceil(2147483647.0), 2147483647u);
    ck_assert_uint_eq(retry_after_ceil(2147483648.0), 2147483647u);
    ck_assert_uint_eq(retry_after_ceil(1e300), 2147483647u);
    ck_assert_uint_eq(retry_after_ceil(INFINITY), 2147483647u);
}
END_TEST

START_TEST(test_retry_after_seconds_fixed_7_is_7)
{
    struct retry_after ra = {.format = RA_SECONDS, .seconds = 7};
    char out[64];
    ck_assert(retry_after_format(&ra, 3, 784111777, out, sizeof out));
    ck_assert_str_eq(out, "7");
}
END_TEST

START_TEST(test_retry_after_seconds_auto_is_the_auto_value)
{
    struct retry_after ra = {.format = RA_SECONDS, .is_auto = true, .seconds = 7};
    char out[64];
    ck_assert(retry_after_format(&ra, 3, 784111777, out, sizeof out));
    ck_assert_str_eq(out, "3");
    ck_assert(retry_after_format(&ra, 2147483647u, 0, out, sizeof out));
    ck_assert_str_eq(out, "2147483647");
}
END_TEST

START_TEST(test_retry_after_http_date_is_imf_fixdate_of_now_plus_seconds)
{
    char out[64];
    struct retry_after ra = {.format = RA_HTTP_DATE, .seconds = 0};
    ck_assert(retry_after_format(&ra, 5, 784111777, out, sizeof out));
    ck_assert_str_eq(out, "Sun, 06 Nov 1994 08:49:37 GMT");
    ra.seconds = 60;
    ck_assert(retry_after_format(&ra, 5, 784111777, out, sizeof out));
    ck_assert_str_eq(out, "Sun, 06 Nov 1994 08:50:37 GMT");
    ra.is_auto = true;
    ck_assert(retry_after_format(&ra, 86400, 784111777, out, sizeof out));
    ck_assert_str_eq(out, "Mon, 07 Nov 1994 08:49:37 GMT");
}
END_TEST

/* docs/profiles.md §4: an http-date is the first whole second at or after the instant the client
 * is admitted -- never the current second rounded down plus the seconds. */
START_TEST(test_retry_after_http_date_rounds_the_admission_instant_up)
{
    struct retry_after fixed = {.format = RA_HTTP_DATE, .seconds = 5};
    ck_assert_int_eq(retry_after_date_s(&fixed, 0, INT64_C(784111777400000)), 784111783);
    ck_assert_int_eq(retry_after_date_s(&fixed, 0, INT64_C(784111777000000)), 784111782);
    struct retry_after autov = {.format = RA_HTTP_DATE, .is_auto = true};
    ck_assert_int_eq(retry_after_date_s(&autov, 2.2, INT64_C(784111777400000)), 784111780);
    ck_assert_int_eq(retry_after_date_s(&autov, 0.6, INT64_C(784111777400000)), 784111778);
    char out[64];
    ck_assert(retry_after_format_at(&fixed, 3, 3.0, INT64_C(784111777400000), out, sizeof out));
    ck_assert_str_eq(out, "Sun, 06 Nov 1994 08:49:43 GMT");
}
END_TEST

START_TEST(test_retry_after_raw_is_copied_byte_for_byte)
{
    char out[64];
    char raw15[] = "1.5", minus1[] = "-1", past[] = "Thu, 01 Jan 1970 00:00:00 GMT";
    struct retry_after ra = {.format = RA_RAW, .raw = raw15};
    ck_assert(retry_after_format(&ra, 9, 784111777, out, sizeof out));
    ck_assert_str_eq(out, "1.5");
    ra.raw = minus1;
    ck_assert(retry_after_format(&ra, 9, 784111777, out, sizeof out));
    ck_assert_str_eq(out, "-1");
    ra.raw = past;
    ck_assert(retry_after_format(&ra, 9, 784111777, out, sizeof out));
    ck_assert_str_eq(out, past);
}
END_TEST

START_TEST(test_retry_after_none_gives_false_and_an_empty_string)
{
    char out[64];
    memset(out, 'x', sizeof out);
    struct retry_after ra = {.format = RA_NONE, .seconds = 7};
    ck_assert(!retry_after_format(&ra, 3, 784111777, out, sizeof out));
    ck_assert_str_eq(out, "");
}
END_TEST

Suite *make_suite(void)
{
    Suite *s = suite_create("throttle");

    TCase *bucket = tcase_create("token_bucket");
    tcase_set_timeout(bucket, 60);
    tcase_add_test(bucket, test_bucket_1_per_s_burst_5_admits_exactly_5_of_20_requests_in_100_ms);
    tcase_add_test(bucket, test_bucket_1_per_s_admits_exactly_one_more_a_second_later);
    tcase_add_test(bucket, test_bucket_burst_5_all_taken_at_t0_gives_one_token_at_t0_plus_1_s);
    tcase_add_test(bucket, test_bucket_half_a_token_per_s_announces_the_next_token_in_2_s);
    tcase_add_test(bucket, test_bucket_client_returning_at_the_announced_retry_after_is_admitted);
    tcase_add_test(bucket,
                   test_bucket_client_returning_at_retry_after_is_admitted_for_any_rate_and_moment);
    tcase_add_test(bucket, test_bucket_never_holds_more_than_burst_after_a_long_idle);
    tcase_add_test(bucket, test_bucket_earlier_time_than_last_update_adds_no_tokens);
    suite_add_tcase(s, bucket);

    TCase *win = tcase_create("window");
    tcase_set_timeout(win, 60);
    tcase_add_test(win, test_window_period_1_s_throttled_0_6_s_is_closed_then_open_then_closed);
    tcase_add_test(win, test_window_offset_0_25_s_shifts_the_closed_part);
    tcase_add_test(win, test_window_closed_for_the_whole_period_answers_without_a_search);
    tcase_add_test(win, test_window_negative_since_counts_as_the_previous_period);
    tcase_add_test(win, test_window_dawn_peak_60_s_throttled_10_s_offset_5_s);
    tcase_add_test(win, test_window_with_an_open_part_of_1_s_or_more_admits_a_client_at_retry_after);
    tcase_add_test(win,
                   test_window_with_a_sub_second_open_part_announces_a_retry_after_that_is_admitted);
    suite_add_tcase(s, win);

    TCase *ra = tcase_create("retry_after");
    tcase_add_test(ra, test_retry_after_ceil_rounds_up_and_is_never_0);
    tcase_add_test(ra, test_retry_after_ceil_caps_at_2_pow_31_minus_1);
    tcase_add_test(ra, test_retry_after_seconds_fixed_7_is_7);
    tcase_add_test(ra, test_retry_after_seconds_auto_is_the_auto_value);
    tcase_add_test(ra, test_retry_after_http_date_is_imf_fixdate_of_now_plus_seconds);
    tcase_add_test(ra, test_retry_after_http_date_rounds_the_admission_instant_up);
    tcase_add_test(ra, test_retry_after_raw_is_copied_byte_for_byte);
    tcase_add_test(ra, test_retry_after_none_gives_false_and_an_empty_string);
    suite_add_tcase(s, ra);
    return s;
}
