/* check_common.c -- unit tests for common.c's dates: parse_kst reads GET /v1/transactions'
 * startDate and endDate (docs/api.md §2.2) in Korea time, only as yyyy-MM-ddTHH:mm:ss with
 * digits and an optional fraction, and no day that is not in the calendar; fmt_kst writes it
 * back; copy_cstr copies a string cut to its buffer, as snprintf "%s" would. Pure. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check_main.h"
#include "common.h"

START_TEST(test_kst_date_reads_as_unix_seconds_and_writes_back)
{
    int64_t at = 0;
    ck_assert(parse_kst("2024-02-13T12:17:57", &at));
    ck_assert_int_eq(at, INT64_C(1707794277));
    ck_assert(parse_kst("2024-02-13T12:17:57.123456", &at));
    ck_assert_int_eq(at, INT64_C(1707794277));
    char back[32];
    fmt_kst(at * 1000000, back);
    ck_assert_str_eq(back, "2024-02-13T12:17:57+09:00");
}
END_TEST

START_TEST(test_kst_date_refuses_other_forms_and_no_calendar_day)
{
    static const char *const bad[] = {
        "2024-02-13", "2024-02-13T12:17", "2024-02-13T12:17:57+09:00", "2024-02-13T12:17:57.",
        "2024-02-13T12:17:57.1234567", "2026-02-30T00:00:00", "2023-02-29T00:00:00",
        "2024-13-01T00:00:00", "2024-02-13T24:00:00", "2024-02-13 12:17:57", NULL};
    for (int i = 0; bad[i]; i++) {
        int64_t at = 42;
        ck_assert_msg(!parse_kst(bad[i], &at), "%s accepted", bad[i]);
        ck_assert_int_eq(at, 42);
    }
    ck_assert(!parse_kst(NULL, &(int64_t){0}));
}
END_TEST

/* Found by fuzzing (server/tests/fuzz/corpus/query/regress_sign_in_hour): sscanf's %2d took
 * "+3" or " 3" as an hour, and "-1" as one that timegm carried into the day before. */
START_TEST(test_kst_date_fields_are_digits_only_without_sign_or_space)
{
    static const char *const bad[] = {
        "2099-12-31T+3:59:59", "2099-12-31T-1:59:59", "2099-12-31T 3:59:59",
        "2024-+2-13T12:17:57", "2024-02- 1T12:17:57", "2024-02-13T12:-1:57",
        "2024-02-13T12:17:+1", "+202-02-13T12:17:57", " 2024-02-13T12:17:57", NULL};
    for (int i = 0; bad[i]; i++) {
        int64_t at = 42;
        ck_assert_msg(!parse_kst(bad[i], &at), "%s accepted", bad[i]);
        ck_assert(!date_time_form(bad[i]));
    }
    ck_assert(date_time_form("2024-02-13T12:17:57"));
    ck_assert(date_time_form("2024-02-13T12:17:57+09:00")); /* the prefix only */
    ck_assert(!date_time_form("2024-02-13T12:17:5"));
}
END_TEST

START_TEST(test_copy_cstr_cuts_to_the_buffer_as_snprintf_does)
{
    static const char *const in[] = {"", "GET", "OPTIONS", "PROPFIND_X", "PROPFIND_XY",
                                     "ABCDEFGHIJKLMNOPQRSTUVWXYZ"};
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++)
        for (size_t size = 1; size <= 12; size++) {
            char got[12], want[12];
            memset(got, 'x', sizeof got);
            copy_cstr(got, size, in[i]);
            snprintf(want, size, "%s", in[i]);
            ck_assert_str_eq(got, want);
            ck_assert_uint_eq(strlen(got), strlen(in[i]) < size ? strlen(in[i]) : size - 1);
        }
}
END_TEST

Suite *make_suite(void)
{
    Suite *s = suite_create("common");
    TCase *tc = tcase_create("kst");
    tcase_add_test(tc, test_kst_date_reads_as_unix_seconds_and_writes_back);
    tcase_add_test(tc, test_kst_date_refuses_other_forms_and_no_calendar_day);
    tcase_add_test(tc, test_kst_date_fields_are_digits_only_without_sign_or_space);
    tcase_add_test(tc, test_copy_cstr_cuts_to_the_buffer_as_snprintf_does);
    suite_add_tcase(s, tc);
    return s;
}
