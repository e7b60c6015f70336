/* check_render.c -- unit tests for render.c and buf.c's JSON writer: a rendered Payment parsed
 * back with jansson (fields, VAT rounding, KST times, derived keys, nulls before approval,
 * byte-identical re-render, hostile paymentKeys), {code, message} errors, string escaping. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <jansson.h>
#include <regex.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check_main.h"
#include "buf.h"
#include "common.h"
#include "ledger.h"
#include "render.h"
#include "rng.h"

#define SALT UINT64_C(0x5eed5eed12345678)
#define MID "tgen_fakegate"
#define US INT64_C(1000000)
/* 2024-02-13T03:17:57Z */
#define APPROVED_S INT64_C(1707794277)

/* Parse b's bytes as one JSON value; fails the test with jansson's message if invalid. */
static json_t *parse(const struct buf *b)
{
    json_error_t err;
    ck_assert(!b->oom);
    json_t *j = json_loadb(b->data ? b->data : "", b->len, JSON_DECODE_ANY, &err);
    ck_assert_msg(j != NULL, "invalid JSON (%s at %d): %.*s", err.text, err.position,
                  (int)b->len, b->data ? b->data : "");
    return j;
}

/* Render p's current state and parse it. The rendered bytes stay in *b (caller finis). */
static json_t *render_now(struct buf *b, const struct ledger *l, const struct payment *p)
{
    buf_init(b);
    render_payment(b, l, MID, p, p->n_cancels, p->status);
    return parse(b);
}

static const char *str_field(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    ck_assert_msg(json_is_string(v), "field %s is not a string", k);
    return json_string_value(v);
}

static json_int_t int_field(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    ck_assert_msg(json_is_integer(v), "field %s is not an integer", k);
    return json_integer_value(v);
}

static bool is_null_field(json_t *o, const char *k)
{
    return json_is_null(json_object_get(o, k));
}

static bool matches(const char *pattern, const char *s)
{
    regex_t re;
    ck_assert_int_eq(regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB), 0);
    int rc = regexec(&re, s, 0, NULL, 0);
    regfree(&re);
    return rc == 0;
}

static struct payment *approved(struct ledger *l, const char *key, int64_t amount)
{
    char order[96];
    snprintf(order, sizeof order, "order-%s", key);
    struct payment *p = ledger_create(l, key, order, amount, (APPROVED_S - 7) * US, NULL);
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(ledger_approve(l, p, APPROVED_S * US + 123456), 0);
    return p;
}

START_TEST(test_render_done_payment_is_valid_json_with_core_fields)
{
    struct ledger l;
    ledger_init(&l, SALT);
    struct payment *p = approved(&l, "tgen_20240213121750abcDE", 15000);
    struct buf b;
    json_t *j = render_now(&b, &l, p);
    ck_assert(json_is_object(j));
    ck_assert_str_eq(str_field(j, "paymentKey"), "tgen_20240213121750abcDE");
    ck_assert_str_eq(str_field(j, "orderId"), "order-tgen_20240213121750abcDE");
    ck_assert_str_eq(str_field(j, "status"), "DONE");
    ck_assert_int_eq(int_field(j, "totalAmount"), 15000);
    ck_assert_int_eq(int_field(j, "balanceAmount"), 15000);
    ck_assert_int_eq(int_field(j, "vat"), 1364);
    ck_assert_int_eq(int_field(j, "suppliedAmount"), 15000 - 1364);
    ck_assert_int_eq(int_field(j, "taxFreeAmount"), 0);
    ck_assert_int_eq(int_field(j, "taxExemptionAmount"), 0);
    ck_assert_str_eq(str_field(j, "method"), "카드");
    ck_assert_str_eq(str_field(j, "currency"), "KRW");
    ck_assert_str_eq(str_field(j, "version"), "2022-11-16");
    ck_assert_str_eq(str_field(j, "mId"), MID);
    ck_assert_str_eq(str_field(j, "type"), "NORMAL");
    ck_assert_str_eq(str_field(j, "country"), "KR");
    ck_assert(json_is_true(json_object_get(j, "isPartialCancelable")));
    ck_assert(json_is_false(json_object_get(j, "useEscrow")));
    ck_assert(is_null_field(j, "cancels"));
    ck_assert(is_null_field(j, "failure"));
    ck_assert(is_null_field(j, "easyPay"));
    ck_assert(is_null_field(j, "metadata"));
    ck_assert(is_null_field(j, "virtualAccount"));
    ck_assert_str_eq(str_field(json_object_get(j, "checkout"), "url"),
                     "https://api.tosspayments.com/v1/payments/tgen_20240213121750abcDE/checkout");
    json_decref(j);
    buf_fini(&b);
    ledger_fini(&l);
}
END_TEST

START_TEST(test_render_vat_is_amount_over_11_rounded)
{
    static const struct {
        int64_t amount, vat;
    } cases[] = {{1000, 91}, {15000, 1364}, {11, 1}, {5, 0}, {6, 1}, {0, 0}, {16, 1}, {17, 2},
                 {100, 9}, {1000000, 90909}};
    struct ledger l;
    ledger_init(&l, SALT);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char key[32];
        snprintf(key, sizeof key, "pk_vat_%zu", i);
        struct payment *p = approved(&l, key, cases[i].amount);
        struct buf b;
        json_t *j = render_now(&b, &l, p);
        ck_assert_msg(int_field(j, "vat") == cases[i].vat, "amount %lld: vat %lld, want %lld",
                      (long long)cases[i].amount, (long long)int_field(j, "vat"),
                      (long long)cases[i].vat);
        ck_assert_int_eq(int_field(j, "suppliedAmount"), cases[i].amount - cases[i].vat);
        ck_assert_int_eq(int_field(j, "totalAmount"), cases[i].amount);
        json_decref(j);
        buf_fini(&b);
    }
    ledger_fini(&l);
}
END_TEST

START_TEST(test_render_approved_at_is_kst_of_approved_at_us)
{
    struct ledger l;
    ledger_init(&l, SALT);
    struct payment *p = approved(&l, "pk_time", 1000);
    struct buf b;
    json_t *j = render_now(&b, &l, p);
    const char *at = str_field(j, "approvedAt");
    ck_assert(matches("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\+09:00$", at));
    ck_assert_str_eq(at, "2024-02-13T12:17:57+09:00"); /* .123456 s dropped */
    ck_assert_str_eq(str_field(j, "requestedAt"), "2024-02-13T12:17:50+09:00");
    json_decref(j);
    buf_fini(&b);

    /* 2024-02-13T20:00:00Z is already the 14th in Korea. */
    struct payment *q = ledger_create(&l, "pk_time2", "order-time2", 1000, 1707854400 * US, NULL);
    ck_assert_int_eq(ledger_approve(&l, q, 1707854400 * US), 0);
    j = render_now(&b, &l, q);
    ck_assert_str_eq(str_field(j, "approvedAt"), "2024-02-14T05:00:00+09:00");
    ck_assert_str_eq(str_field(j, "requestedAt"), "2024-02-14T05:00:00+09:00");
    json_decref(j);
    buf_fini(&b);
    ledger_fini(&l);
}
END_TEST

START_TEST(test_render_last_transaction_key_is_approval_tx_key)
{
    struct ledger l;
    ledger_init(&l, SALT);
    struct payment *p = approved(&l, "pk_tx", 1000);
    char tx[33];
    ledger_tx_key(&l, p, -1, tx);
    struct buf b;
    json_t *j = render_now(&b, &l, p);
    ck_assert_str_eq(str_field(j, "lastTransactionKey"), tx);
    char url[200];
    snprintf(url, sizeof url,
             "https://dashboard.tosspayments.com/receipt/redirection?transactionId=%s&ref=PX", tx);
    ck_assert_str_eq(str_field(json_object_get(j, "receipt"), "url"), url);
    json_decref(j);
    buf_fini(&b);
    ledger_fini(&l);
}
END_TEST

START_TEST(test_render_secret_is_ps_and_24_alphanumerics)
{
    struct ledger l;
    ledger_init(&l, SALT);
    struct payment *p = approved(&l, "pk_s1", 1000);
    struct payment *q = approved(&l, "pk_s2", 1000);
    struct buf b1, b2;
    json_t *j1 = render_now(&b1, &l, p);
    json_t *j2 = render_now(&b2, &l, q);
    const char *s1 = str_field(j1, "secret"), *s2 = str_field(j2, "secret");
    ck_assert(matches("^ps_[0-9A-Za-z]{24}$", s1));
    ck_assert(matches("^ps_[0-9A-Za-z]{24}$", s2));
    ck_assert_str_ne(s1, s2);
    json_decref(j1);
    json_decref(j2);
    buf_fini(&b1);
    buf_fini(&b2);
    ledger_fini(&l);
}
END_TEST

START_TEST(test_render_card_has_8_digit_approve_no_and_toss_constants)
{
    struct ledger l;
    ledger_init(&l, SALT);
    struct payment *p = approved(&l, "pk_card", 25000);
    struct buf b;
    json_t *j = render_now(&b, &l, p);
    json_t *card = json_object_get(j, "card");
    ck_assert(json_is_object(card));
    ck_assert(matches("^[0-9]{8}$", str_field(card, "approveNo")));
    ck_assert(matches("^[0-9]{8}\\*{4}[0-9]{3}\\*$", str_field(card, "number")));
    ck_assert_int_eq(int_field(card, "amount"), 25000);
    ck_assert_int_eq(int_field(card, "installmentPlanMonths"), 0);
    ck_assert(is_null_field(card, "interestPayer"));
    ck_assert_str_eq(str_field(card, "cardType"), "신용");
    ck_assert_str_eq(str_field(card, "ownerType"), "개인");
    ck_assert_str_eq(str_field(card, "acquireStatus"), "READY");
    json_decref(j);
    buf_fini(&b);
    ledger_fini(&l);
}
END_TEST

START_TEST(test_render_in_progress_has_null_approved_at_card_and_last_tx_key)
{
    struct ledger l;
    ledger_init(&l, SALT);
    struct payment *p = ledger_create(&l, "pk_wait", "order-wait", 3000, APPROVED_S * US, NULL);
    struct buf b;
    json_t *j = render_now(&b, &l, p);
    ck_assert_str_eq(str_field(j, "status"), "IN_PROGRESS");
    ck_assert(is_null_field(j, "approvedAt"));
    ck_assert(is_null_field(j, "card"));
    ck_assert(is_null_field(j, "lastTransactionKey"));
    ck_assert(is_null_field(j, "receipt"));
    ck_assert_str_eq(str_field(j, "requestedAt"), "2024-02-13T12:17:57+09:00");
    ck_assert_int_eq(int_field(j, "totalAmount"), 3000);
    ck_assert_int_eq(int_field(j, "balanceAmount"), 3000);
    json_decref(j);
    buf_fini(&b);
    ledger_fini(&l);
}
END_TEST

START_TEST(test_render_same_view_twice_is_byte_identical)
{
    struct ledger l;
    ledger_init(&l, SALT);
    struct payment *p = approved(&l, "pk_same", 1000);
    struct buf b1, b2;
    buf_init(&b1);
    buf_init(&b2);
    render_payment(&b1, &l, MID, p, 0, PAY_DONE);
    approved(&l, "pk_other", 2000); /* other ledger activity in between */
    render_payment(&b2, &l, MID, p, 0, PAY_DONE);
    ck_assert_uint_gt(b1.len, 0);
    ck_assert_uint_eq(b1.len, b2.len);
    ck_assert_int_eq(memcmp(b1.data, b2.data, b1.len), 0);
    buf_fini(&b1);
    buf_fini(&b2);
    ledger_fini(&l);
}
END_TEST

START_TEST(test_render_hostile_payment_key_is_escaped_and_round_trips)
{
    struct ledger l;
    ledger_init(&l, SALT);
    struct payment *p = approved(&l, "pk\"q\\b\xff" "x", 1000);
    struct buf b;
    json_t *j = render_now(&b, &l, p);
    ck_assert_ptr_nonnull(strstr(b.data, "\"paymentKey\":\"pk\\\"q\\\\b\\u00ffx\""));
    /* 0xff is not UTF-8: it is written as U+00FF, which decodes to C3 BF. */
    ck_assert_str_eq(str_field(j, "paymentKey"), "pk\"q\\b\xc3\xbf" "x");
    ck_assert_str_eq(str_field(j, "orderId"), "order-pk\"q\\b\xc3\xbf" "x");
    ck_assert_str_eq(str_field(json_object_get(j, "checkout"), "url"),
                     "https://api.tosspayments.com/v1/payments/pk\"q\\b\xc3\xbf" "x/checkout");
    json_decref(j);
    buf_fini(&b);
    ledger_fini(&l);
}
END_TEST

START_TEST(test_render_control_chars_in_order_id_and_mid_stay_valid_json)
{
    struct ledger l;
    ledger_init(&l, SALT);
    struct payment *p = ledger_create(&l, "pk_ctl", "o\n\t\x01\x1f", 1000, 1, NULL);
    ledger_approve(&l, p, 2);
    struct buf b;
    buf_init(&b);
    render_payment(&b, &l, "m\"id\x7f", p, 0, PAY_DONE);
    json_t *j = parse(&b);
    ck_assert_str_eq(str_field(j, "orderId"), "o\n\t\x01\x1f");
    ck_assert_str_eq(str_field(j, "mId"), "m\"id\x7f");
    json_decref(j);
    buf_fini(&b);
    ledger_fini(&l);
}
END_TEST

START_TEST(test_render_error_is_code_and_escaped_message)
{
    struct buf b;
    buf_init(&b);
    render_error(&b, "NOT_FOUND_PAYMENT", "존재하지 않는 결제 정보 입니다.");
    ck_assert_str_eq(b.data,
                     "{\"code\":\"NOT_FOUND_PAYMENT\",\"message\":\"존재하지 않는 결제 정보 입니다.\"}");
    buf_fini(&b);

    buf_init(&b);
    render_error(&b, "INVALID_REQUEST", "bad \"field\"\\\n\x02");
    ck_assert_str_eq(b.data,
                     "{\"code\":\"INVALID_REQUEST\",\"message\":\"bad \\\"field\\\"\\\\\\n\\u0002\"}");
    json_t *j = parse(&b);
    ck_assert_uint_eq(json_object_size(j), 2);
    ck_assert_str_eq(str_field(j, "code"), "INVALID_REQUEST");
    ck_assert_str_eq(str_field(j, "message"), "bad \"field\"\\\n\x02");
    json_decref(j);
    buf_fini(&b);
}
END_TEST

/* buf_add_json_str of n bytes, as a NUL-terminated string the caller frees. */
static char *json_str(const char *s, size_t n)
{
    struct buf b;
    buf_init(&b);
    buf_add_json_str(&b, s, n);
    ck_assert(!b.oom);
    return buf_steal(&b, NULL);
}

#define CHECK_ESCAPE(in, want)                                                                    \
    do {                                                                                          \
        char *got_ = json_str(in, sizeof(in) - 1);                                                \
        ck_assert_str_eq(got_, want);                                                             \
        free(got_);                                                                               \
    } while (0)

START_TEST(test_buf_json_str_escapes_control_chars_as_u00xx)
{
    CHECK_ESCAPE("\x01", "\"\\u0001\"");
    CHECK_ESCAPE("\x08\x0b\x0c", "\"\\u0008\\u000b\\u000c\"");
    CHECK_ESCAPE("\x1f", "\"\\u001f\"");
    CHECK_ESCAPE("a\0b", "\"a\\u0000b\""); /* explicit length: the NUL is data */
    CHECK_ESCAPE("\n\t\r", "\"\\n\\t\\r\"");
    CHECK_ESCAPE("\"\\/", "\"\\\"\\\\/\"");
    CHECK_ESCAPE("\x7f~ ", "\"\x7f~ \"");
    CHECK_ESCAPE("", "\"\"");
}
END_TEST

START_TEST(test_buf_json_str_keeps_valid_utf8_verbatim)
{
    CHECK_ESCAPE("한글", "\"한글\"");
    CHECK_ESCAPE("é", "\"é\"");
    CHECK_ESCAPE("\xf0\x9f\x98\x80", "\"\xf0\x9f\x98\x80\""); /* U+1F600, 4 bytes */
    CHECK_ESCAPE("\xef\xbf\xbf", "\"\xef\xbf\xbf\"");         /* U+FFFF */
    CHECK_ESCAPE("a한\"b", "\"a한\\\"b\"");
}
END_TEST

START_TEST(test_buf_json_str_writes_invalid_utf8_bytes_as_latin1_escapes)
{
    CHECK_ESCAPE("\xff", "\"\\u00ff\"");
    CHECK_ESCAPE("a\xff" "b", "\"a\\u00ffb\"");
    CHECK_ESCAPE("\xc0\xaf", "\"\\u00c0\\u00af\"");             /* overlong '/' */
    CHECK_ESCAPE("\xe0\x80\xaf", "\"\\u00e0\\u0080\\u00af\""); /* overlong, 3 bytes */
    CHECK_ESCAPE("\xed\xa0\x80", "\"\\u00ed\\u00a0\\u0080\"");  /* surrogate D800 */
    CHECK_ESCAPE("\xf4\x90\x80\x80", "\"\\u00f4\\u0090\\u0080\\u0080\""); /* > U+10FFFF */
    CHECK_ESCAPE("\xed\x95", "\"\\u00ed\\u0095\"");            /* truncated 한 */
    CHECK_ESCAPE("\x80" "한", "\"\\u0080한\"");                 /* lone continuation */
}
END_TEST

START_TEST(test_buf_json_strz_null_writes_null)
{
    struct buf b;
    buf_init(&b);
    buf_add_json_strz(&b, NULL);
    buf_addc(&b, ',');
    buf_add_json_strz(&b, "x");
    ck_assert_str_eq(b.data, "null,\"x\"");
    buf_fini(&b);
}
END_TEST

START_TEST(test_buf_json_str_random_bytes_always_valid_json)
{
    struct rng r;
    rng_seed(&r, 2024);
    char s[48];
    for (int iter = 0; iter < 20000; iter++) {
        size_t n = (size_t)(rng_next(&r) % sizeof s);
        for (size_t i = 0; i < n; i++) {
            uint64_t x = rng_next(&r);
            /* Bias towards UTF-8 lead and continuation bytes so sequences sometimes form. */
            s[i] = (char)(x % 4 == 0 ? 0x80 + (x >> 8) % 0x40 : x % 4 == 1 ? 0xc0 + (x >> 8) % 0x40
                                                                           : (x >> 8) & 0xff);
        }
        struct buf b;
        buf_init(&b);
        buf_add_json_str(&b, s, n);
        json_error_t err;
        json_t *j = json_loadb(b.data, b.len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
        if (!j || !json_is_string(j))
            ck_abort_msg("iteration %d: invalid JSON string (%s): %.*s", iter, err.text,
                         (int)b.len, b.data);
        json_decref(j);
        buf_fini(&b);
    }
}
END_TEST

/* fmt_kst computes the civil date itself; it must spell every instant as gmtime_r + strftime
 * do, 9 hours ahead: leap days, century years, year ends, and the years (< 1000, > 9999)
 * where it hands over to strftime. */
START_TEST(test_fmt_kst_matches_strftime_over_five_millennia)
{
    int64_t checked = 0;
    for (int64_t day = -800000; day < 3000000; day += 17) {
        int64_t s = day * 86400 + (day * 7919) % 86400;
        if (s < 0)
            s -= 86400 * 3; /* some instants just before midnight on the negative side too */
        char want[64], got[40];
        time_t t = (time_t)(s + 9 * 3600);
        struct tm tm;
        ck_assert_ptr_nonnull(gmtime_r(&t, &tm));
        strftime(want, sizeof want, "%Y-%m-%dT%H:%M:%S+09:00", &tm);
        fmt_kst(s * 1000000 + (s >= 0 ? 999999 : 0), got); /* µs are dropped, not rounded */
        if (strcmp(got, want) != 0)
            ck_abort_msg("unix %lld: fmt_kst %s, strftime %s", (long long)s, got, want);
        checked++;
    }
    ck_assert_int_gt(checked, 200000);
    char t[32];
    fmt_kst(INT64_C(951836399) * 1000000, t); /* 2000-02-29T23:59:59+09:00 */
    ck_assert_str_eq(t, "2000-02-29T23:59:59+09:00");
    fmt_kst(INT64_C(1735657200) * 1000000, t);
    ck_assert_str_eq(t, "2025-01-01T00:00:00+09:00");
}
END_TEST

START_TEST(test_buf_add_i64_matches_printf)
{
    static const int64_t v[] = {0, 1, -1, 9, 10, -10, 15000, 9007199254740991, INT64_MAX, INT64_MIN,
                                INT64_MIN + 1, 1000000000000000000};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        char want[32];
        snprintf(want, sizeof want, "%lld", (long long)v[i]);
        struct buf b;
        buf_init(&b);
        buf_adds(&b, "x");
        buf_add_i64(&b, v[i]);
        ck_assert_str_eq(b.data + 1, want);
        buf_fini(&b);
    }
}
END_TEST

START_TEST(test_buf_addf_grows_past_reserved_room)
{
    struct buf b;
    buf_init(&b);
    ck_assert(buf_reserve(&b, 8));
    size_t cap = b.cap;
    buf_addf(&b, "%s-%d", "abc", 42); /* fits in the reserved room: one pass */
    ck_assert_uint_eq(b.cap, cap);
    buf_addf(&b, "%0*d", (int)cap * 3, 7); /* does not fit: grows, then writes */
    ck_assert_uint_eq(b.len, 6 + cap * 3);
    ck_assert_str_eq(b.data + b.len - 2, "07");
    ck_assert_int_eq(memcmp(b.data, "abc-42000", 9), 0);
    buf_fini(&b);
}
END_TEST

Suite *make_suite(void)
{
    Suite *s = suite_create("render");
    TCase *pay = tcase_create("payment");
    tcase_add_test(pay, test_render_done_payment_is_valid_json_with_core_fields);
    tcase_add_test(pay, test_render_vat_is_amount_over_11_rounded);
    tcase_add_test(pay, test_render_approved_at_is_kst_of_approved_at_us);
    tcase_add_test(pay, test_render_last_transaction_key_is_approval_tx_key);
    tcase_add_test(pay, test_render_secret_is_ps_and_24_alphanumerics);
    tcase_add_test(pay, test_render_card_has_8_digit_approve_no_and_toss_constants);
    tcase_add_test(pay, test_render_in_progress_has_null_approved_at_card_and_last_tx_key);
    tcase_add_test(pay, test_render_same_view_twice_is_byte_identical);
    tcase_add_test(pay, test_render_hostile_payment_key_is_escaped_and_round_trips);
    tcase_add_test(pay, test_render_control_chars_in_order_id_and_mid_stay_valid_json);
    tcase_add_test(pay, test_render_error_is_code_and_escaped_message);
    suite_add_tcase(s, pay);

    TCase *buf = tcase_create("buf_json");
    tcase_add_test(buf, test_buf_json_str_escapes_control_chars_as_u00xx);
    tcase_add_test(buf, test_buf_json_str_keeps_valid_utf8_verbatim);
    tcase_add_test(buf, test_buf_json_str_writes_invalid_utf8_bytes_as_latin1_escapes);
    tcase_add_test(buf, test_buf_json_strz_null_writes_null);
    tcase_add_test(buf, test_buf_json_str_random_bytes_always_valid_json);
    tcase_add_test(buf, test_buf_add_i64_matches_printf);
    tcase_add_test(buf, test_buf_addf_grows_past_reserved_room);
    tcase_add_test(buf, test_fmt_kst_matches_strftime_over_five_millennia);
    suite_add_tcase(s, buf);
    return s;
}
