/* check_timeline.c -- unit tests for timeline.c: the outcome classes, counting into the second
 * a request arrived in, recycling a bucket for a new second, ignoring a second the ring has
 * passed, and clearing. Pure: every time is a parameter. */
#include <check.h>
#include <string.h>

#include "check_main.h"
#include "common.h"
#include "timeline.h"

static int64_t at(int64_t s, int64_t ms)
{
    return s * NS_PER_S + ms * NS_PER_MS;
}

START_TEST(test_class_of_outcomes_then_statuses)
{
    ck_assert_int_eq(tl_class_of(OUT_OK, 200), TL_OK);
    ck_assert_int_eq(tl_class_of(OUT_REPLAYED, 200), TL_REPLAYED);
    ck_assert_int_eq(tl_class_of(OUT_REPLAYED, 400), TL_REPLAYED);
    ck_assert_int_eq(tl_class_of(OUT_CONFLICT, 409), TL_CONFLICT);
    ck_assert_int_eq(tl_class_of(OUT_BUSINESS_ERROR, 400), TL_4XX);
    ck_assert_int_eq(tl_class_of(OUT_BUSINESS_ERROR, 500), TL_5XX);
    ck_assert_int_eq(tl_class_of(OUT_INVALID, 400), TL_4XX);
    ck_assert_int_eq(tl_class_of(OUT_UNAUTHORIZED, 401), TL_4XX);
    ck_assert_int_eq(tl_class_of(OUT_THROTTLED, 429), TL_THROTTLED);
    ck_assert_int_eq(tl_class_of(OUT_THROTTLED, 503), TL_THROTTLED);
    ck_assert_int_eq(tl_class_of(OUT_CAPPED, 503), TL_CAPPED);
    ck_assert_int_eq(tl_class_of(OUT_DROPPED_REQUEST, 0), TL_DROPPED);
    ck_assert_int_eq(tl_class_of(OUT_DROPPED_RESPONSE, 200), TL_DROPPED);
    ck_assert_int_eq(tl_class_of(OUT_FAULT_ERROR, 503), TL_5XX);
    ck_assert_int_eq(tl_class_of(OUT_FAULT_ERROR, 404), TL_4XX);
    ck_assert_str_eq(tl_class_name(TL_OK), "ok");
    ck_assert_str_eq(tl_class_name(TL_4XX), "4xx");
    ck_assert_str_eq(tl_class_name(TL_DROPPED), "dropped");
}
END_TEST

START_TEST(test_counts_land_in_their_arrival_second)
{
    struct timeline *t = timeline_new();
    ck_assert_ptr_nonnull(t);
    timeline_count(t, at(1000, 0), ROUTE_CONFIRM, TL_OK);
    timeline_count(t, at(1000, 999), ROUTE_CONFIRM, TL_OK);
    timeline_count(t, at(1000, 500), ROUTE_CONFIRM, TL_THROTTLED);
    timeline_count(t, at(1001, 1), ROUTE_READ, TL_OK);
    timeline_count(t, at(1001, 2), ROUTE_OTHER, TL_4XX);
    uint32_t n[ROUTE_LABELS][TL_CLASSES];
    timeline_read(t, 1000, n);
    ck_assert_uint_eq(n[ROUTE_CONFIRM][TL_OK], 2);
    ck_assert_uint_eq(n[ROUTE_CONFIRM][TL_THROTTLED], 1);
    ck_assert_uint_eq(n[ROUTE_READ][TL_OK], 0);
    timeline_read(t, 1001, n);
    ck_assert_uint_eq(n[ROUTE_READ][TL_OK], 1);
    ck_assert_uint_eq(n[ROUTE_OTHER][TL_4XX], 1);
    ck_assert_uint_eq(n[ROUTE_CONFIRM][TL_OK], 0);
    timeline_read(t, 999, n); /* nothing counted then */
    for (int r = 0; r < ROUTE_LABELS; r++)
        for (int c = 0; c < TL_CLASSES; c++)
            ck_assert_uint_eq(n[r][c], 0);
    timeline_free(t);
}
END_TEST

/* Second s + TIMELINE_SECONDS takes s's bucket: s reads as empty, and a late count for s is
 * not added to the newer second. */
START_TEST(test_a_recycled_bucket_starts_empty_and_refuses_its_old_second)
{
    struct timeline *t = timeline_new();
    timeline_count(t, at(5000, 0), ROUTE_CONFIRM, TL_OK);
    timeline_count(t, at(5000 + TIMELINE_SECONDS, 0), ROUTE_CONFIRM, TL_5XX);
    uint32_t n[ROUTE_LABELS][TL_CLASSES];
    timeline_read(t, 5000, n);
    ck_assert_uint_eq(n[ROUTE_CONFIRM][TL_OK], 0);
    timeline_read(t, 5000 + TIMELINE_SECONDS, n);
    ck_assert_uint_eq(n[ROUTE_CONFIRM][TL_OK], 0);
    ck_assert_uint_eq(n[ROUTE_CONFIRM][TL_5XX], 1);
    timeline_count(t, at(5000, 10), ROUTE_CONFIRM, TL_OK); /* a held request from long ago */
    timeline_read(t, 5000 + TIMELINE_SECONDS, n);
    ck_assert_uint_eq(n[ROUTE_CONFIRM][TL_OK], 0);
    timeline_free(t);
}
END_TEST

START_TEST(test_clear_forgets_and_bad_input_counts_nothing)
{
    struct timeline *t = timeline_new();
    int64_t since = atomic_load(&t->since_unix_us);
    ck_assert_int_gt(since, 0);
    timeline_count(t, at(7000, 0), ROUTE_CANCEL, TL_OK);
    timeline_clear(t);
    ck_assert_int_ge(atomic_load(&t->since_unix_us), since);
    uint32_t n[ROUTE_LABELS][TL_CLASSES];
    timeline_read(t, 7000, n);
    ck_assert_uint_eq(n[ROUTE_CANCEL][TL_OK], 0);
    timeline_count(t, at(7000, 0), ROUTE_CANCEL, TL_OK); /* counts again after a clear */
    timeline_read(t, 7000, n);
    ck_assert_uint_eq(n[ROUTE_CANCEL][TL_OK], 1);
    timeline_count(t, at(7000, 0), -1, TL_OK);
    timeline_count(t, at(7000, 0), ROUTE_LABELS, TL_OK);
    timeline_count(t, 0, ROUTE_CANCEL, TL_OK);
    timeline_read(t, 7000, n);
    ck_assert_uint_eq(n[ROUTE_CANCEL][TL_OK], 1);
    timeline_free(t);
}
END_TEST

Suite *make_suite(void)
{
    Suite *s = suite_create("timeline");
    TCase *tc = tcase_create("timeline");
    tcase_add_test(tc, test_class_of_outcomes_then_statuses);
    tcase_add_test(tc, test_counts_land_in_their_arrival_second);
    tcase_add_test(tc, test_a_recycled_bucket_starts_empty_and_refuses_its_old_second);
    tcase_add_test(tc, test_clear_forgets_and_bad_input_counts_nothing);
    suite_add_tcase(s, tc);
    return s;
}
