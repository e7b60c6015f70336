/* check_retry_lib.c -- unit tests of the reference retry client's pure parts (retry.h) and of the
 * experiments' pure helpers (experiment.h): classification, backoff and jitter bounds,
 * Retry-After parsing, the cap with its resend budget, the breaker's state machine, the
 * reconciler's verdicts, profile scaling. No sockets, no clocks: every "now" is an argument. */
#define _POSIX_C_SOURCE 200809L

#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "experiment.h"
#include "retry.h"

static rc_outcome answer(long status, const char *code)
{
    rc_outcome o = {RC_T_ANSWER, status, code};
    return o;
}

static rc_outcome transport(rc_transport t)
{
    rc_outcome o = {t, 0, NULL};
    return o;
}

/* ---- classification ------------------------------------------------------------------------- */

START_TEST(test_4xx_is_never_retried_except_409_processing_and_429)
{
    static const long never[] = {400, 401, 403, 404, 405, 413, 422, 431};
    for (size_t i = 0; i < sizeof never / sizeof never[0]; i++) {
        rc_outcome o = answer(never[i], "INVALID_REQUEST");
        ck_assert_msg(!rc_is_retryable(&o), "%ld must not be retried", never[i]);
        ck_assert_int_eq(rc_classify(&o), RC_C_PERMANENT);
        ck_assert_int_eq(rc_final_of(&o), RC_F_FAILED);
    }
    rc_outcome c409 = answer(409, "IDEMPOTENT_REQUEST_PROCESSING");
    ck_assert(rc_is_retryable(&c409));
    ck_assert_int_eq(rc_classify(&c409), RC_C_CONFLICT);
    ck_assert_int_eq(rc_final_of(&c409), RC_F_UNKNOWN); /* the first attempt may still commit */
    rc_outcome other409 = answer(409, "SOMETHING_ELSE");
    ck_assert(!rc_is_retryable(&other409));
    rc_outcome nocode409 = answer(409, NULL);
    ck_assert(!rc_is_retryable(&nocode409));
    rc_outcome t429 = answer(429, "TOO_MANY_REQUESTS");
    ck_assert(rc_is_retryable(&t429));
    ck_assert_int_eq(rc_final_of(&t429), RC_F_FAILED);
    /* business declines are 4xx too */
    rc_outcome decl = answer(403, "REJECT_CARD_PAYMENT");
    ck_assert(!rc_is_retryable(&decl));
    rc_outcome done = answer(400, "ALREADY_PROCESSED_PAYMENT");
    ck_assert(!rc_is_retryable(&done));
}
END_TEST

START_TEST(test_timeouts_connection_errors_and_5xx_are_retried)
{
    rc_outcome to = transport(RC_T_TIMEOUT), ce = transport(RC_T_CONN_ERROR);
    ck_assert(rc_is_retryable(&to));
    ck_assert(rc_is_retryable(&ce));
    static const long five[] = {500, 502, 503, 504};
    for (size_t i = 0; i < sizeof five / sizeof five[0]; i++) {
        rc_outcome o = answer(five[i], NULL);
        ck_assert_msg(rc_is_retryable(&o), "%ld must be retried", five[i]);
    }
    rc_outcome ok = answer(200, NULL);
    ck_assert(!rc_is_retryable(&ok));
    ck_assert_int_eq(rc_final_of(&ok), RC_F_SUCCESS);
    rc_outcome local = transport(RC_T_NOT_SENT);
    ck_assert(!rc_is_retryable(&local));
    ck_assert_int_eq(rc_final_of(&local), RC_F_FAILED);
}
END_TEST

START_TEST(test_no_answer_is_unknown_never_failed)
{
    rc_outcome to = transport(RC_T_TIMEOUT), ce = transport(RC_T_CONN_ERROR);
    ck_assert_int_eq(rc_final_of(&to), RC_F_UNKNOWN);
    ck_assert_int_eq(rc_final_of(&ce), RC_F_UNKNOWN);
    /* a 500 may have committed (flaky's commit:true); a 503 is a refusal before processing */
    rc_outcome e500 = answer(500, "FAILED_INTERNAL_SYSTEM_PROCESSING");
    ck_assert_int_eq(rc_final_of(&e500), RC_F_UNKNOWN);
    rc_outcome e503 = answer(503, "SERVICE_UNAVAILABLE");
    ck_assert_int_eq(rc_final_of(&e503), RC_F_FAILED);
}
END_TEST

START_TEST(test_policy_mask_narrows_but_never_widens)
{
    unsigned only_timeouts = RC_C_TIMEOUT;
    rc_outcome to = transport(RC_T_TIMEOUT), e503 = answer(503, NULL), e400 = answer(400, NULL);
    ck_assert(rc_should_retry(&to, only_timeouts));
    ck_assert(!rc_should_retry(&e503, only_timeouts));
    /* a mask naming 4xx cannot make a decline retryable */
    ck_assert(!rc_should_retry(&e400, RC_C_PERMANENT | RC_C_TIMEOUT));
    unsigned e3 = RC_C_TIMEOUT | RC_C_CONN | RC_C_UNAVAILABLE;
    rc_outcome e500 = answer(500, NULL);
    ck_assert(rc_should_retry(&e503, e3));
    ck_assert(!rc_should_retry(&e500, e3));
}
END_TEST

START_TEST(test_reconciler_verdicts)
{
    ck_assert_int_eq(rc_reconcile_verdict(200, "DONE"), RC_F_SUCCESS);
    ck_assert_int_eq(rc_reconcile_verdict(200, "PARTIAL_CANCELED"), RC_F_SUCCESS);
    ck_assert_int_eq(rc_reconcile_verdict(200, "IN_PROGRESS"), RC_F_FAILED);
    ck_assert_int_eq(rc_reconcile_verdict(200, "EXPIRED"), RC_F_FAILED);
    ck_assert_int_eq(rc_reconcile_verdict(200, "ABORTED"), RC_F_FAILED);
    ck_assert_int_eq(rc_reconcile_verdict(404, NULL), RC_F_FAILED); /* NOT_FOUND_PAYMENT */
    ck_assert_int_eq(rc_reconcile_verdict(503, NULL), RC_F_UNKNOWN); /* read again */
    ck_assert_int_eq(rc_reconcile_verdict(0, NULL), RC_F_UNKNOWN);   /* no answer */
    ck_assert_int_eq(rc_reconcile_verdict(200, NULL), RC_F_UNKNOWN); /* not a Payment */
}
END_TEST

/* ---- backoff -------------------------------------------------------------------------------- */

START_TEST(test_backoff_bases)
{
    rc_backoff none = {.kind = RC_BACKOFF_NONE, .base_ms = 100};
    rc_backoff fixed = {.kind = RC_BACKOFF_FIXED, .base_ms = 1000};
    rc_backoff exp = {.kind = RC_BACKOFF_EXPONENTIAL, .base_ms = 1000, .cap_ms = 4000};
    rc_rng rng;
    rc_rng_seed(&rng, 1);
    for (int r = 1; r <= 6; r++) {
        ck_assert(rc_backoff_delay_ms(&none, r, 0, &rng) == 0);
        ck_assert(rc_backoff_delay_ms(&fixed, r, 0, &rng) == 1000);
    }
    /* E3's client B: 1, 2, 4 s, then capped */
    ck_assert(rc_backoff_base_ms(&exp, 1) == 1000);
    ck_assert(rc_backoff_base_ms(&exp, 2) == 2000);
    ck_assert(rc_backoff_base_ms(&exp, 3) == 4000);
    ck_assert(rc_backoff_base_ms(&exp, 4) == 4000);
    ck_assert(rc_backoff_base_ms(&exp, 100000) == 4000); /* no overflow */
    rc_backoff exp3 = {.kind = RC_BACKOFF_EXPONENTIAL, .base_ms = 10, .multiplier = 3};
    ck_assert(rc_backoff_base_ms(&exp3, 3) == 90);
}
END_TEST

START_TEST(test_jitter_bounds)
{
    rc_rng rng;
    rc_rng_seed(&rng, 42);
    rc_backoff full = {.kind = RC_BACKOFF_EXPONENTIAL, .base_ms = 500, .cap_ms = 4000,
                       .jitter = RC_JITTER_FULL};
    rc_backoff equal = full, range = full, decor = full;
    equal.jitter = RC_JITTER_EQUAL;
    range.kind = RC_BACKOFF_FIXED;
    range.base_ms = 40;
    range.jitter = RC_JITTER_RANGE;
    range.lo = 0.5;
    range.hi = 1.5;
    decor.jitter = RC_JITTER_DECORRELATED;
    double min_eq[4] = {1e9, 1e9, 1e9, 1e9}, max_eq[4] = {0}, min_full = 1e9, max_full = 0;
    double prev = 0, min_r = 1e9, max_r = 0;
    for (int i = 0; i < 20000; i++) {
        for (int r = 1; r <= 4; r++) {
            double b = rc_backoff_base_ms(&full, r);
            double f = rc_backoff_delay_ms(&full, r, 0, &rng);
            ck_assert(f >= 0 && f <= b);
            if (r == 1) {
                min_full = fmin(min_full, f);
                max_full = fmax(max_full, f);
            }
            /* B of E2: base 0.5 s, cap 4 s, factor 0.5-1.0 */
            double e = rc_backoff_delay_ms(&equal, r, 0, &rng);
            ck_assert_msg(e >= b / 2 && e <= b, "equal jitter %g outside [%g, %g]", e, b / 2, b);
            min_eq[r - 1] = fmin(min_eq[r - 1], e);
            max_eq[r - 1] = fmax(max_eq[r - 1], e);
        }
        double d = rc_backoff_delay_ms(&decor, 2, prev, &rng);
        ck_assert(d >= 500 && d <= 4000);
        ck_assert(d <= fmax(prev, 500) * 3);
        prev = d;
        /* E1's resend wait: 20-60 ms */
        double w = rc_backoff_delay_ms(&range, 1, 0, &rng);
        ck_assert(w >= 20 && w <= 60);
        min_r = fmin(min_r, w);
        max_r = fmax(max_r, w);
    }
    /* the draws cover their range */
    ck_assert(min_full < 25 && max_full > 475);
    ck_assert(min_eq[0] < 255 && max_eq[0] > 495);
    ck_assert(min_eq[3] < 2050 && max_eq[3] > 3950);
    ck_assert(min_r < 21 && max_r > 59);
}
END_TEST

START_TEST(test_rng_is_reproducible)
{
    rc_rng a, b, c;
    rc_rng_seed(&a, 7);
    rc_rng_seed(&b, 7);
    rc_rng_seed(&c, 8);
    bool differs = false;
    for (int i = 0; i < 100; i++) {
        uint64_t x = rc_rng_next(&a);
        ck_assert(x == rc_rng_next(&b));
        differs |= x != rc_rng_next(&c);
        double u = rc_rng_uniform(&a);
        (void)rc_rng_uniform(&b);
        (void)rc_rng_uniform(&c);
        ck_assert(u >= 0 && u < 1);
    }
    ck_assert(differs);
}
END_TEST

/* ---- Retry-After ---------------------------------------------------------------------------- */

START_TEST(test_retry_after_seconds)
{
    double w = -1;
    ck_assert_int_eq(rc_parse_retry_after("120", 0, &w), 0);
    ck_assert(w == 120);
    ck_assert_int_eq(rc_parse_retry_after(" 0 ", 0, &w), 0);
    ck_assert(w == 0);
    ck_assert_int_eq(rc_parse_retry_after("99999999999999", 0, &w), 0);
    ck_assert(w == 2147483647.0);
    static const char *const bad[] = {"", " ", "-1", "1.5", "1e3", "10s", "+5", "abc", "1 2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(rc_parse_retry_after(bad[i], 0, &w) == -1, "\"%s\" must be rejected",
                      bad[i]);
    ck_assert_int_eq(rc_parse_retry_after(NULL, 0, &w), -1);
}
END_TEST

START_TEST(test_retry_after_http_date)
{
    time_t t;
    /* RFC 9110's example, all three forms: 784111777 */
    ck_assert_int_eq(rc_parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT", &t), 0);
    ck_assert(t == 784111777);
    ck_assert_int_eq(rc_parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT", &t), 0);
    ck_assert(t == 784111777);
    ck_assert_int_eq(rc_parse_http_date("Sun Nov  6 08:49:37 1994", &t), 0);
    ck_assert(t == 784111777);
    ck_assert_int_eq(rc_parse_http_date("Thu, 01 Jan 1970 00:00:00 GMT", &t), 0);
    ck_assert(t == 0);
    ck_assert_int_eq(rc_parse_http_date("Tue, 29 Feb 2028 23:59:59 GMT", &t), 0);
    ck_assert(t == 1835481599);
    static const char *const bad[] = {
        "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 6 Nov 1994 08:49:37 GMT",
        "Sun, 31 Nov 1994 08:49:37 GMT", "Sun, 06 Foo 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 24:49:37 GMT", "Sun, 06 Nov 1994 08:49:37 GMT x",
        "Mon, 29 Feb 2027 00:00:00 GMT", "06 Nov 1994 08:49:37 GMT", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(rc_parse_http_date(bad[i], &t) == -1, "\"%s\" must be rejected", bad[i]);

    double w;
    ck_assert_int_eq(rc_parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", 784111777 - 30, &w), 0);
    ck_assert(w == 30);
    /* a date in the past: retry now */
    ck_assert_int_eq(rc_parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", 784111777 + 5, &w), 0);
    ck_assert(w == 0);
}
END_TEST

START_TEST(test_retry_after_combined_with_backoff_and_cap)
{
    ck_assert(rc_delay_with_retry_after(500, -1, 4000) == 500);   /* no header */
    ck_assert(rc_delay_with_retry_after(500, 2000, 4000) == 2000); /* header wins */
    ck_assert(rc_delay_with_retry_after(3000, 1000, 4000) == 3000); /* backoff wins */
    ck_assert(rc_delay_with_retry_after(500, 60000, 4000) == 4000); /* capped */
    ck_assert(rc_delay_with_retry_after(500, 60000, 0) == 60000);   /* no cap */
}
END_TEST

/* ---- cap and budget ------------------------------------------------------------------------- */

START_TEST(test_cap_rejects_when_full)
{
    rc_sem s;
    rc_sem_init(&s, 3);
    ck_assert(rc_sem_try_acquire(&s));
    ck_assert(rc_sem_try_acquire(&s));
    ck_assert(rc_sem_try_acquire(&s));
    ck_assert_int_eq(rc_sem_free_slots(&s), 0);
    ck_assert(!rc_sem_try_acquire(&s));
    ck_assert_int_eq(s.rejected, 1);
    rc_sem_release(&s);
    ck_assert(rc_sem_try_acquire(&s));
    for (int i = 0; i < 5; i++)
        rc_sem_release(&s);
    ck_assert_int_eq(s.used, 0); /* never negative */
}
END_TEST

START_TEST(test_resend_budget_needs_n_free_slots)
{
    rc_sem s;
    rc_sem_init(&s, 40);
    for (int i = 0; i < 36; i++)
        ck_assert(rc_sem_try_acquire(&s));
    /* 4 free: allowed, takes one */
    ck_assert_int_eq(rc_sem_try_acquire_resend(&s, 4), RC_ACQ_OK);
    ck_assert_int_eq(rc_sem_free_slots(&s), 3);
    /* 3 free: skipped and counted, nothing taken */
    ck_assert_int_eq(rc_sem_try_acquire_resend(&s, 4), RC_ACQ_BUDGET);
    ck_assert_int_eq(s.resends_skipped, 1);
    ck_assert_int_eq(rc_sem_free_slots(&s), 3);
    /* first attempts are not subject to the budget */
    ck_assert(rc_sem_try_acquire(&s));
    ck_assert(rc_sem_try_acquire(&s));
    ck_assert(rc_sem_try_acquire(&s));
    /* full: with a budget it is a skip too (the report's counter) ... */
    ck_assert_int_eq(rc_sem_try_acquire_resend(&s, 4), RC_ACQ_BUDGET);
    ck_assert_int_eq(s.resends_skipped, 2);
    /* ... without one, a plain cap rejection */
    ck_assert_int_eq(rc_sem_try_acquire_resend(&s, 0), RC_ACQ_NO_SLOT);
    ck_assert_int_eq(s.resends_skipped, 2);
    ck_assert_int_eq(s.rejected, 1);
    rc_sem_release(&s);
    ck_assert_int_eq(rc_sem_try_acquire_resend(&s, 0), RC_ACQ_OK);
    ck_assert_int_eq(rc_sem_try_acquire_resend(&s, 1), RC_ACQ_NO_SLOT);
}
END_TEST

/* ---- breaker -------------------------------------------------------------------------------- */

START_TEST(test_breaker_opens_after_f_failures_within_w)
{
    static rc_breaker b;
    rc_breaker_init(&b, 10, 30000, 60000);
    /* 9 failures spread so that the oldest leaves the window before the 10th */
    for (int i = 0; i < 9; i++) {
        ck_assert_int_eq(rc_breaker_allow(&b, i * 1000.0), RC_BRK_ALLOW);
        rc_breaker_record(&b, i * 1000.0, false, false);
    }
    ck_assert_int_eq(b.state, RC_BRK_CLOSED);
    rc_breaker_record(&b, 30500, false, false); /* failure at 0 is now 30.5 s old */
    ck_assert_int_eq(b.state, RC_BRK_CLOSED);
    rc_breaker_record(&b, 30600, false, false); /* 10 within 30 s: 1000..30600 */
    ck_assert_int_eq(b.state, RC_BRK_OPEN);
    ck_assert_int_eq(b.opens, 1);
    /* successes do not count as failures and do not open it */
    rc_breaker c;
    rc_breaker_init(&c, 2, 1000, 1000);
    rc_breaker_record(&c, 0, true, false);
    rc_breaker_record(&c, 1, false, false);
    rc_breaker_record(&c, 2, true, false);
    ck_assert_int_eq(c.state, RC_BRK_CLOSED);
    rc_breaker_record(&c, 3, false, false);
    ck_assert_int_eq(c.state, RC_BRK_OPEN);
}
END_TEST

START_TEST(test_breaker_open_half_open_single_probe)
{
    static rc_breaker b;
    rc_breaker_init(&b, 3, 30000, 60000);
    for (int i = 0; i < 3; i++)
        rc_breaker_record(&b, 100.0 + i, false, false);
    ck_assert_int_eq(b.state, RC_BRK_OPEN);
    /* open: everything refused until D has passed */
    ck_assert_int_eq(rc_breaker_allow(&b, 200), RC_BRK_REJECT);
    ck_assert_int_eq(rc_breaker_allow(&b, 60101), RC_BRK_REJECT);
    ck_assert_int_eq(b.rejected, 2);
    /* results of calls let through before it opened are ignored */
    rc_breaker_record(&b, 300, true, false);
    ck_assert_int_eq(b.state, RC_BRK_OPEN);
    /* after D: exactly one probe */
    ck_assert_int_eq(rc_breaker_allow(&b, 60102), RC_BRK_PROBE);
    ck_assert_int_eq(b.state, RC_BRK_HALF_OPEN);
    ck_assert_int_eq(rc_breaker_allow(&b, 60103), RC_BRK_REJECT);
    ck_assert_int_eq(rc_breaker_allow(&b, 90000), RC_BRK_REJECT);
    /* a non-probe result while half-open changes nothing */
    rc_breaker_record(&b, 60104, true, false);
    ck_assert_int_eq(b.state, RC_BRK_HALF_OPEN);
    /* the probe fails: open again for another D */
    rc_breaker_record(&b, 60200, false, true);
    ck_assert_int_eq(b.state, RC_BRK_OPEN);
    ck_assert_int_eq(b.opens, 2);
    ck_assert_int_eq(rc_breaker_allow(&b, 120199), RC_BRK_REJECT);
    ck_assert_int_eq(rc_breaker_allow(&b, 120200), RC_BRK_PROBE);
    /* the probe succeeds: closed, with a clean failure count */
    rc_breaker_record(&b, 120250, true, true);
    ck_assert_int_eq(b.state, RC_BRK_CLOSED);
    ck_assert_int_eq(rc_breaker_allow(&b, 120300), RC_BRK_ALLOW);
    rc_breaker_record(&b, 120300, false, false);
    rc_breaker_record(&b, 120301, false, false);
    ck_assert_int_eq(b.state, RC_BRK_CLOSED);
    rc_breaker_record(&b, 120302, false, false);
    ck_assert_int_eq(b.state, RC_BRK_OPEN);
    ck_assert_int_eq(b.probes, 2);
    ck_assert_str_eq(rc_breaker_state_name(b.state), "open");
}
END_TEST

START_TEST(test_breaker_failure_classes)
{
    rc_outcome to = transport(RC_T_TIMEOUT), ce = transport(RC_T_CONN_ERROR);
    rc_outcome e503 = answer(503, NULL), e500 = answer(500, NULL), ok = answer(200, NULL);
    rc_outcome decl = answer(403, "REJECT_CARD_PAYMENT");
    ck_assert(rc_breaker_counts_failure(&to));
    ck_assert(rc_breaker_counts_failure(&ce));
    ck_assert(rc_breaker_counts_failure(&e503));
    ck_assert(rc_breaker_counts_failure(&e500));
    ck_assert(!rc_breaker_counts_failure(&ok));
    ck_assert(!rc_breaker_counts_failure(&decl)); /* the gateway answered: it is up */
}
END_TEST

/* ---- statistics and experiment helpers --------------------------------------------------------
 */

START_TEST(test_quantile_nearest_rank)
{
    double v[] = {5, 1, 4, 2, 3, 10, 9, 8, 7, 6};
    ck_assert(rc_quantile(v, 10, 0.5) == 5);
    ck_assert(rc_quantile(v, 10, 0.95) == 10);
    ck_assert(rc_quantile(v, 10, 0.0) == 1);
    ck_assert(rc_quantile(NULL, 0, 0.5) == 0);
}
END_TEST

START_TEST(test_scale_profile_scales_every_duration)
{
    json_error_t je;
    json_t *p = json_loads(
        "{\"name\":\"x\",\"routes\":{\"confirm\":{"
        "\"queue_latency\":{\"dist\":\"uniform\",\"min_ms\":1500,\"max_ms\":3000},"
        "\"latency\":{\"dist\":\"fixed\",\"ms\":20},"
        "\"faults\":[{\"kind\":\"drop_request\",\"p\":0.142857,\"how\":\"hang\",\"hang_ms\":30000}],"
        "\"throttle\":{\"kind\":\"window\",\"period_s\":2.5,\"throttled_s\":1.5,\"offset_s\":0,"
        "\"status\":503,\"retry_after\":{\"format\":\"seconds\",\"value\":1}},"
        "\"concurrency\":{\"max_in_flight\":40}},"
        "\"cancel\":{\"throttle\":{\"kind\":\"token_bucket\",\"rate_per_s\":20,\"burst\":10}}}}",
        0, &je);
    ck_assert_ptr_nonnull(p);
    json_t *s = ex_scale_profile(p, 0.1);
    json_t *c = json_object_get(json_object_get(s, "routes"), "confirm");
    json_t *q = json_object_get(c, "queue_latency");
    ck_assert(fabs(json_number_value(json_object_get(q, "min_ms")) - 150) < 1e-9);
    ck_assert(fabs(json_number_value(json_object_get(q, "max_ms")) - 300) < 1e-9);
    ck_assert(fabs(json_number_value(json_object_get(json_object_get(c, "latency"), "ms")) - 2) <
              1e-9);
    json_t *f = json_array_get(json_object_get(c, "faults"), 0);
    ck_assert(fabs(json_number_value(json_object_get(f, "hang_ms")) - 3000) < 1e-9);
    ck_assert(json_number_value(json_object_get(f, "p")) == 0.142857); /* not a duration */
    json_t *th = json_object_get(c, "throttle");
    ck_assert(fabs(json_number_value(json_object_get(th, "period_s")) - 0.25) < 1e-9);
    ck_assert(fabs(json_number_value(json_object_get(th, "throttled_s")) - 0.15) < 1e-9);
    ck_assert(json_integer_value(json_object_get(th, "status")) == 503);
    ck_assert(json_integer_value(
                  json_object_get(json_object_get(th, "retry_after"), "value")) == 1);
    ck_assert(json_integer_value(json_object_get(json_object_get(c, "concurrency"),
                                                 "max_in_flight")) == 40);
    json_t *tb = json_object_get(json_object_get(json_object_get(s, "routes"), "cancel"),
                                 "throttle");
    ck_assert(fabs(json_number_value(json_object_get(tb, "rate_per_s")) - 200) < 1e-9);
    ck_assert(json_integer_value(json_object_get(tb, "burst")) == 10);
    /* the original is untouched */
    ck_assert(json_integer_value(json_object_get(
                  json_object_get(json_object_get(json_object_get(p, "routes"), "confirm"),
                                  "queue_latency"),
                  "min_ms")) == 1500);

    json_decref(s);
    json_decref(p);
}
END_TEST

START_TEST(test_metrics_arrivals)
{
    const char *text =
        "# HELP fakegate_requests_total x\n"
        "fakegate_requests_total{route=\"confirm\",outcome=\"ok\"} 12\n"
        "fakegate_requests_total{route=\"confirm\",outcome=\"throttled\"} 30\n"
        "fakegate_requests_total{route=\"read\",outcome=\"ok\"} 7\n"
        "fakegate_in_flight{route=\"confirm\"} 5\n"
        "fakegate_in_flight_peak{route=\"confirm\"} 40\n";
    ck_assert_int_eq(ex_metrics_arrivals(text, "confirm"), 47);
    ck_assert_int_eq(ex_metrics_arrivals(text, "read"), 7);
    ck_assert_int_eq(ex_metrics_arrivals(text, "cancel"), -1);
    ck_assert_int_eq(ex_metrics_arrivals(NULL, "confirm"), -1);
}
END_TEST

Suite *make_suite(void)
{
    Suite *su = suite_create("retry_lib");
    TCase *tc = tcase_create("pure");
    tcase_add_test(tc, test_4xx_is_never_retried_except_409_processing_and_429);
    tcase_add_test(tc, test_timeouts_connection_errors_and_5xx_are_retried);
    tcase_add_test(tc, test_no_answer_is_unknown_never_failed);
    tcase_add_test(tc, test_policy_mask_narrows_but_never_widens);
    tcase_add_test(tc, test_reconciler_verdicts);
    tcase_add_test(tc, test_backoff_bases);
    tcase_add_test(tc, test_jitter_bounds);
    tcase_add_test(tc, test_rng_is_reproducible);
    tcase_add_test(tc, test_retry_after_seconds);
    tcase_add_test(tc, test_retry_after_http_date);
    tcase_add_test(tc, test_retry_after_combined_with_backoff_and_cap);
    tcase_add_test(tc, test_cap_rejects_when_full);
    tcase_add_test(tc, test_resend_budget_needs_n_free_slots);
    tcase_add_test(tc, test_breaker_opens_after_f_failures_within_w);
    tcase_add_test(tc, test_breaker_open_half_open_single_probe);
    tcase_add_test(tc, test_breaker_failure_classes);
    tcase_add_test(tc, test_quantile_nearest_rank);
    tcase_add_test(tc, test_scale_profile_scales_every_duration);
    tcase_add_test(tc, test_metrics_arrivals);
    suite_add_tcase(su, tc);
    return su;
}
