/* check_body.c -- unit tests for body.c's virtual-account issue body (docs/virtual-accounts.md
 * §6.6): a dueDate is yyyy-MM-ddTHH:mm:ss[.fraction][Z|±HH:MM] in digits, read in Korea time
 * without an offset; anything else is 400 INVALID_REQUEST naming dueDate. And the body hash
 * (Idempotency-Key reuse, the report's "same request") is the same for bodies that mean the
 * same (keys in another order, an escape for a plain character, whitespace). Requests are built
 * as http.c builds them (request_new, the body's bytes in r->body). Pure: no server, no
 * sockets. */
#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "body.h"
#include "check_main.h"
#include "ledger.h"
#include "request.h"

/* 2024-02-13T12:00:00+09:00, the gateway clock of these checks. */
#define NOW_US INT64_C(1707793200000000)

/* POST /v1/virtual-accounts with dueDate `due`: true if accepted, *due_at_us then set; else
 * the refusal's code in code[64]. */
static bool issue_with_due_date(const char *due, int64_t *due_at_us, char code[64])
{
    char text[512];
    snprintf(text, sizeof text,
             "{\"amount\":15000,\"orderId\":\"order-va-1\",\"orderName\":\"x\","
             "\"customerName\":\"y\",\"bank\":\"88\",\"dueDate\":\"%s\"}", due);
    struct request *r = request_new();
    ck_assert_ptr_nonnull(r);
    r->lang_en = true;
    buf_add(&r->body, text, strlen(text));
    struct body *b = body_parse(r, 0);
    ck_assert_ptr_nonnull(b);
    bool ok = body_virtual_account(r, b, NOW_US);
    if (ok) {
        *due_at_us = r->va->due_at_us;
    } else {
        ck_assert_int_eq(r->resp.status, 400);
        ck_assert_ptr_nonnull(strstr(r->resp.body, "dueDate"));
        snprintf(code, 64, "%s", r->resp.code);
    }
    body_free(b);
    request_free(r);
    return ok;
}

START_TEST(test_due_date_in_korea_time_or_with_its_offset_is_accepted)
{
    int64_t at = 0;
    char code[64];
    const int64_t want = INT64_C(1708398000000000); /* 2024-02-20T12:00:00+09:00 */
    ck_assert(issue_with_due_date("2024-02-20T12:00:00", &at, code));
    ck_assert_int_eq(at, want);
    ck_assert(issue_with_due_date("2024-02-20T12:00:00+09:00", &at, code));
    ck_assert_int_eq(at, want);
    ck_assert(issue_with_due_date("2024-02-20T03:00:00.5Z", &at, code));
    ck_assert_int_eq(at, want);
    ck_assert(issue_with_due_date("2024-02-19T22:00:00-05:00", &at, code));
    ck_assert_int_eq(at, want);
}
END_TEST

/* Found by fuzzing (server/tests/fuzz/corpus/body/regress_due_date_sign; the query fuzzer hit
 * the same sscanf habit in startDate): %2d took a sign or a space, so "T+1:00:00" was 01:00 and
 * an offset "+-9:00" was 9 hours west. */
START_TEST(test_due_date_fields_with_a_sign_or_space_are_refused)
{
    static const char *const bad[] = {
        "2024-02-20T+1:00:00", "2024-02-20T 1:00:00", "2024-02-20T12:-1:00",
        "2024-02-+2T12:00:00", "2024-02-20T12:00:00+-9:00", "2024-02-20T12:00:00+ 9:00",
        "2024-02-20T12:00:00+09:-1", "2024-02-20T12:00:00+09: 1", "2024-02-20T12:00:00+9:00",
        NULL};
    for (int i = 0; bad[i]; i++) {
        int64_t at = 0;
        char code[64] = "";
        ck_assert_msg(!issue_with_due_date(bad[i], &at, code), "%s accepted", bad[i]);
        ck_assert_str_eq(code, "INVALID_REQUEST");
    }
}
END_TEST

/* body_identity's hash of `text`, parsed as a request body. */
static uint64_t body_hash_of(const char *text)
{
    struct request *r = request_new();
    ck_assert_ptr_nonnull(r);
    buf_add(&r->body, text, strlen(text));
    struct body *b = body_parse(r, 0);
    ck_assert_msg(b != NULL, "refused: %s", text);
    const char *oid, *pk;
    uint64_t h = 0;
    body_identity(b, &oid, &pk, &h);
    body_free(b);
    request_free(r);
    return h;
}

START_TEST(test_body_hash_is_the_same_for_bodies_that_mean_the_same)
{
    /* The second of each pair means the same as the first: an escape for a plain character,
     * its keys in another order, whitespace. */
    static const char *const same[][2] = {
        {"{\"paymentKey\":\"pk_1\",\"orderId\":\"order_0001\",\"amount\":15000}",
         "{\"amount\":15000,\"orderId\":\"order\\u005f0001\",\"paymentKey\":\"pk_1\"}"},
        {"{\"a\":[1,{\"b\":null,\"t\":true}],\"c\":\"x\",\"f\":false,\"n\":-7}",
         "{\"n\":-7,\"c\":\"\\u0078\",\"f\":false,\"a\":[1,{\"t\":true,\"b\":null}]}"},
        {"{}", " {\n} "},
    };
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        ck_assert_msg(body_hash_of(same[i][0]) == body_hash_of(same[i][1]), "%s and %s differ",
                      same[i][0], same[i][1]);
    }
    /* Different requests hash differently. */
    uint64_t h = body_hash_of("{\"amount\":15000}");
    ck_assert_uint_ne(h, body_hash_of("{\"amount\":15001}"));
    ck_assert_uint_ne(h, body_hash_of("{\"amount\":\"15000\"}"));
    ck_assert_uint_ne(h, body_hash_of("{\"amount\":15000.0}")); /* a real */
    ck_assert_uint_ne(h, body_hash_of("{\"amount\":[15000]}"));
    ck_assert_uint_ne(body_hash_of("{\"a\":[1,2]}"), body_hash_of("{\"a\":[2,1]}"));
}
END_TEST

Suite *make_suite(void)
{
    Suite *s = suite_create("body");
    TCase *hash = tcase_create("hash");
    tcase_add_test(hash, test_body_hash_is_the_same_for_bodies_that_mean_the_same);
    suite_add_tcase(s, hash);
    TCase *tc = tcase_create("due_date");
    tcase_add_test(tc, test_due_date_in_korea_time_or_with_its_offset_is_accepted);
    tcase_add_test(tc, test_due_date_fields_with_a_sign_or_space_are_refused);
    suite_add_tcase(s, tc);
    return s;
}
