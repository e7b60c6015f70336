/* check_toss_errors.c -- unit tests for the error-code table: every entry is found, the table is
 * strictly sorted (toss_error_find is a bsearch), every docs/api.md §2.4 code is present with its
 * status, Toss's exact idempotency wordings, ASCII English messages, unknown codes → NULL. */
#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "toss_errors.h"

/* docs/api.md §2.4, in the order the contract first listed them. */
static const struct {
    const char *code;
    int status;
} spec_codes[] = {
    {"ALREADY_PROCESSED_PAYMENT", 400},
    {"PROVIDER_ERROR", 400},
    {"INVALID_REQUEST", 400},
    {"INVALID_API_KEY", 400},
    {"INVALID_ORDER_ID", 400},
    {"INVALID_PAYMENT_KEY", 400},
    {"DUPLICATED_ORDER_ID", 400},
    {"INVALID_IDEMPOTENCY_KEY", 400},
    {"INVALID_TEST_CODE", 400},
    {"INCORRECT_BASIC_AUTH_FORMAT", 400},
    {"ALREADY_PROCESSING_REQUEST", 400},
    {"ALREADY_CANCELED_PAYMENT", 400},
    {"NOT_MATCHES_REFUNDABLE_AMOUNT", 400},
    {"INVALID_CARD_EXPIRATION", 400},
    {"INVALID_STOPPED_CARD", 400},
    {"EXCEED_MAX_DAILY_PAYMENT_COUNT", 400},
    {"BELOW_MINIMUM_AMOUNT", 400},
    {"INVALID_CARD_NUMBER", 400},
    {"EXCEED_MAX_PAYMENT_AMOUNT", 400},
    {"NOT_AVAILABLE_PAYMENT", 400},
    {"UNAPPROVED_ORDER_ID", 400},
    {"UNAUTHORIZED_KEY", 401},
    {"REJECT_CARD_PAYMENT", 403},
    {"REJECT_CARD_COMPANY", 403},
    {"FORBIDDEN_REQUEST", 403},
    {"FDS_ERROR", 403},
    {"FORBIDDEN_CONSECUTIVE_REQUEST", 403},
    {"NOT_CANCELABLE_AMOUNT", 403},
    {"NOT_CANCELABLE_PAYMENT", 403},
    {"NOT_FOUND_PAYMENT", 404},
    {"NOT_FOUND_PAYMENT_SESSION", 404},
    {"NOT_FOUND", 404},
    {"METHOD_NOT_ALLOWED", 405},
    {"IDEMPOTENT_REQUEST_PROCESSING", 409},
    {"IDEMPOTENCY_KEY_REUSED", 422},
    {"TOO_MANY_REQUESTS", 429},
    {"SERVICE_UNAVAILABLE", 503},
    {"UNAUTHORIZED", 401},
    {"INVALID_PROFILE", 400},
    {"REQUEST_HEADER_FIELDS_TOO_LARGE", 431},
    {"FAILED_PAYMENT_INTERNAL_SYSTEM_PROCESSING", 500},
    {"FAILED_INTERNAL_SYSTEM_PROCESSING", 500},
    {"UNKNOWN_PAYMENT_ERROR", 500},
    {"COMMON_ERROR", 500},
};

START_TEST(test_every_table_code_is_found_with_its_entry)
{
    size_t n = 0;
    const struct toss_error *t = toss_error_table(&n);
    ck_assert_ptr_nonnull(t);
    ck_assert_uint_ge(n, sizeof spec_codes / sizeof spec_codes[0]);
    for (size_t i = 0; i < n; i++) {
        const struct toss_error *e = toss_error_find(t[i].code);
        ck_assert_msg(e == &t[i], "%s: find returned %p, want entry %zu", t[i].code, (void *)e, i);
        ck_assert_int_eq(e->status, t[i].status);
        /* A copy of the code (not the table's pointer) is found too. */
        char copy[64];
        ck_assert_uint_lt(strlen(t[i].code), sizeof copy);
        strcpy(copy, t[i].code);
        ck_assert_ptr_eq(toss_error_find(copy), &t[i]);
    }
}
END_TEST

START_TEST(test_table_is_sorted_strictly_by_code)
{
    size_t n = 0;
    const struct toss_error *t = toss_error_table(&n);
    for (size_t i = 1; i < n; i++)
        ck_assert_msg(strcmp(t[i - 1].code, t[i].code) < 0, "entry %zu %s is not before %zu %s",
                      i - 1, t[i - 1].code, i, t[i].code);
}
END_TEST

START_TEST(test_every_entry_has_status_code_and_both_messages)
{
    size_t n = 0;
    const struct toss_error *t = toss_error_table(&n);
    for (size_t i = 0; i < n; i++) {
        ck_assert_msg(t[i].status >= 400 && t[i].status <= 599, "%s: status %d", t[i].code,
                      t[i].status);
        for (const char *c = t[i].code; *c; c++)
            ck_assert_msg((*c >= 'A' && *c <= 'Z') || *c == '_', "%s: bad character", t[i].code);
        ck_assert_msg(t[i].ko && t[i].ko[0], "%s: no Korean message", t[i].code);
        ck_assert_msg(t[i].en && t[i].en[0], "%s: no English message", t[i].code);
    }
}
END_TEST

START_TEST(test_spec_codes_present_with_their_statuses)
{
    char missing[2048] = "", wrong[2048] = "";
    for (size_t i = 0; i < sizeof spec_codes / sizeof spec_codes[0]; i++) {
        const struct toss_error *e = toss_error_find(spec_codes[i].code);
        char item[96];
        if (!e) {
            snprintf(item, sizeof item, " %s", spec_codes[i].code);
            strncat(missing, item, sizeof missing - strlen(missing) - 1);
        } else if (e->status != spec_codes[i].status) {
            snprintf(item, sizeof item, " %s=%d(want %d)", spec_codes[i].code, e->status,
                     spec_codes[i].status);
            strncat(wrong, item, sizeof wrong - strlen(wrong) - 1);
        }
    }
    ck_assert_msg(missing[0] == '\0', "docs/api.md §2.4 codes missing from the table:%s", missing);
    ck_assert_msg(wrong[0] == '\0', "docs/api.md §2.4 codes with another status:%s", wrong);
}
END_TEST

START_TEST(test_idempotency_messages_are_toss_wording)
{
    const struct toss_error *e = toss_error_find("IDEMPOTENT_REQUEST_PROCESSING");
    ck_assert_ptr_nonnull(e);
    ck_assert_str_eq(e->ko, "이전 멱등 요청이 처리중입니다.");
    e = toss_error_find("INVALID_IDEMPOTENCY_KEY");
    ck_assert_ptr_nonnull(e);
    ck_assert_str_eq(e->ko, "멱등키는 300자 이하여야 합니다.");
}
END_TEST

START_TEST(test_every_english_message_is_printable_ascii)
{
    size_t n = 0;
    const struct toss_error *t = toss_error_table(&n);
    for (size_t i = 0; i < n; i++)
        for (const unsigned char *c = (const unsigned char *)t[i].en; *c; c++)
            ck_assert_msg(*c >= 0x20 && *c < 0x7f, "%s: English message byte 0x%02x at %td",
                          t[i].code, *c, (const char *)c - t[i].en);
}
END_TEST

START_TEST(test_unknown_code_is_null)
{
    ck_assert_ptr_null(toss_error_find(""));
    ck_assert_ptr_null(toss_error_find("NOT_A_CODE"));
    ck_assert_ptr_null(toss_error_find("not_found")); /* case-sensitive */
    ck_assert_ptr_null(toss_error_find("NOT_FOUND "));
    ck_assert_ptr_null(toss_error_find("NOT_FOUN"));
    ck_assert_ptr_null(toss_error_find("NOT_FOUND_PAYMENTX"));
    ck_assert_ptr_null(toss_error_find("AAAA")); /* before the first entry */
    ck_assert_ptr_null(toss_error_find("ZZZZ")); /* after the last entry */
}
END_TEST

/* The README's error table is generated from this table; this keeps the two in step. Runs from
 * the repository root (make test's working directory). */
START_TEST(test_readme_lists_every_code_with_its_status)
{
    FILE *f = fopen("README.md", "r");
    ck_assert_msg(f != NULL, "README.md not found in the working directory");
    static char text[1 << 18];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    size_t count;
    const struct toss_error *t = toss_error_table(&count);
    for (size_t i = 0; i < count; i++) {
        char row[128];
        snprintf(row, sizeof row, "| %d | `%s`", t[i].status, t[i].code);
        ck_assert_msg(strstr(text, row) != NULL, "README.md lacks the row \"%s\"", row);
    }
}
END_TEST

Suite *make_suite(void)
{
    Suite *s = suite_create("toss_errors");
    TCase *tc = tcase_create("table");
    tcase_add_test(tc, test_every_table_code_is_found_with_its_entry);
    tcase_add_test(tc, test_table_is_sorted_strictly_by_code);
    tcase_add_test(tc, test_every_entry_has_status_code_and_both_messages);
    tcase_add_test(tc, test_spec_codes_present_with_their_statuses);
    tcase_add_test(tc, test_idempotency_messages_are_toss_wording);
    tcase_add_test(tc, test_every_english_message_is_printable_ascii);
    tcase_add_test(tc, test_unknown_code_is_null);
    tcase_add_test(tc, test_readme_lists_every_code_with_its_status);
    suite_add_tcase(s, tc);
    return s;
}
