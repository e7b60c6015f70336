/* check_render_golden.c -- render.c's Payment against the renderer it replaced
 * (render_reference.inc, one checked append per part): the same bytes for every payment shape
 * (card and virtual account; before approval, approved, partly and fully cancelled, expired,
 * aborted; deposits and deposit errors, refund accounts), every view of it (each cancel prefix,
 * each deposit prefix, each status), hostile strings (quotes, control bytes, invalid UTF-8,
 * Korean, 4-byte characters, long ones) and times past 9999 or before 1000; and buf.c's JSON
 * string escaping against the reference's over random bytes. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "buf.h"
#include "common.h"
#include "ledger.h"
#include "render.h"
#include "rng.h"

#include "render_reference.inc"

#define US INT64_C(1000000)
#define T0_US (INT64_C(1707794277) * US + 123456) /* 2024-02-13T12:17:57.123456+09:00 */

/* Strings a paymentKey, orderId, order name, reason or name may hold. */
static const char *const STRINGS[] = {
    "pk_plain_0001",
    "",
    "with \"quotes\" and \\back\\slashes\\",
    "ctl \x01\x02\x1f tab\t nl\n cr\r bs\b ff\f del\x7f",
    "한국어 주문 🚀 €",
    "bad utf8 \xff \xc3\x28 \xe2\x82 \xed\xa0\x80 \xf4\x90\x80\x80 \xc0\xaf end\xc3",
    "</script><script>alert(1)</script>",
    "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567"
    "8901234567890123456789012345678901234567890123456789012345678901234567890123456789",
};
#define N_STRINGS (sizeof STRINGS / sizeof STRINGS[0])

static const char *const MIDS[] = {"tgen_fakegate", "", "m\"i\\d\x01", "상점_아이디"};
#define N_MIDS (sizeof MIDS / sizeof MIDS[0])

/* Times: ordinary, 0 (null), before 1000 and past 9999 (strftime's spelling), negative. */
static const int64_t TIMES_US[] = {T0_US, 0, INT64_C(-30000000000) * US,
                                   INT64_C(300000000000) * US, -US};
#define N_TIMES (sizeof TIMES_US / sizeof TIMES_US[0])

static size_t compared;

/* Render every view of p (cancel prefixes x deposit prefixes x statuses) both ways, each into
 * an empty buffer and after a prefix (a webhook's envelope), and require the same bytes. */
static void compare_views(const struct ledger *l, const struct payment *p)
{
    uint32_t n_dep = p->va ? p->va->n_deposits : 0;
    for (size_t m = 0; m < N_MIDS; m++)
        for (uint32_t vc = 0; vc <= p->n_cancels; vc++)
            for (uint32_t vd = 0; vd <= n_dep; vd++)
                for (int st = 0; st < PAY_STATUS_COUNT; st++)
                    for (int prefixed = 0; prefixed < 2; prefixed++) {
                        struct buf want, got;
                        buf_init(&want);
                        buf_init(&got);
                        if (prefixed) {
                            buf_adds(&want, "{\"eventType\":\"X\",\"data\":");
                            buf_adds(&got, "{\"eventType\":\"X\",\"data\":");
                        }
                        ref_render_payment_at(&want, l, MIDS[m], p, vc, vd, (enum pay_status)st);
                        render_payment_at(&got, l, MIDS[m], p, vc, vd, (enum pay_status)st);
                        ck_assert(!want.oom && !got.oom);
                        ck_assert_msg(got.len == want.len && memcmp(got.data, want.data, got.len) == 0,
                                      "payment %s view %u/%u status %d mid %zu:\nwant %.*s\ngot  %.*s",
                                      p->payment_key, vc, vd, st, m, (int)want.len, want.data,
                                      (int)got.len, got.data);
                        ck_assert_int_eq(got.data[got.len], '\0');
                        compared++;
                        buf_fini(&want);
                        buf_fini(&got);
                    }
}

static char *dup(const char *s)
{
    char *d = strdup(s);
    ck_assert_ptr_nonnull(d);
    return d;
}

START_TEST(test_render_card_payments_match_the_reference_bytes)
{
    struct ledger l;
    ledger_init(&l, UINT64_C(0x5eed5eed12345678));
    compared = 0;
    int n = 0;
    for (size_t si = 0; si < N_STRINGS; si++)
        for (size_t ti = 0; ti < N_TIMES; ti++) {
            char key[256], order[256];
            snprintf(key, sizeof key, "%s#%d", STRINGS[si], n);
            snprintf(order, sizeof order, "o%d_%s", n, STRINGS[(si + ti) % N_STRINGS]);
            n++;
            int64_t amount = ti == 1 ? 1 : ti == 2 ? INT64_C(9007199254740991) : 15000 + (int64_t)si;
            struct payment *p = ledger_create(&l, key, order, amount, TIMES_US[ti], NULL);
            ck_assert_ptr_nonnull(p);
            if (si % 2)
                p->order_name = dup(STRINGS[(si + 3) % N_STRINGS]);
            compare_views(&l, p); /* IN_PROGRESS, never approved */
            ck_assert_int_eq(ledger_approve(&l, p, TIMES_US[(ti + 1) % N_TIMES] + 1), 0);
            compare_views(&l, p);
            /* Partial cancels (reasons of every kind), then the rest. */
            for (size_t c = 0; c < 3 && p->balance > 1; c++) {
                int64_t part = p->balance / 3 > 0 ? p->balance / 3 : 1;
                ck_assert_int_eq(ledger_cancel(&l, p, part, STRINGS[(si + c) % N_STRINGS],
                                               TIMES_US[(ti + c) % N_TIMES] + (int64_t)c),
                                 0);
                compare_views(&l, p);
            }
            if (ti % 2) {
                ck_assert_int_eq(ledger_cancel(&l, p, p->balance, "전액 취소", T0_US + 9 * US), 0);
                compare_views(&l, p);
            }
        }
    /* A payment expired before its confirm (status EXPIRED, never approved). */
    struct payment *e = ledger_create(&l, "pk_expired", "order-expired", 5000, T0_US, NULL);
    ck_assert_ptr_nonnull(e);
    ck_assert(ledger_expire_if_stale(e, T0_US + 700 * US, 600 * US));
    compare_views(&l, e);
    ck_assert_uint_gt(compared, 10000);
    ledger_fini(&l);
}
END_TEST

/* A virtual account with the given strings, due at due_us (the ledger takes it). */
static struct payment *va_new(struct ledger *l, const char *key, const char *order,
                              const char *name, const char *order_name, int64_t due_us)
{
    struct payment_va *va = calloc(1, sizeof *va);
    ck_assert_ptr_nonnull(va);
    memcpy(va->bank_code, "88", 3);
    va->due_at_us = due_us;
    va->customer_name = dup(name);
    struct payment *p = ledger_create_va(l, key, order, 30000, order_name, va, T0_US, NULL);
    ck_assert_ptr_nonnull(p);
    return p;
}

START_TEST(test_render_virtual_accounts_match_the_reference_bytes)
{
    struct ledger l;
    ledger_init(&l, UINT64_C(0x0123456789abcdef));
    compared = 0;
    for (size_t si = 0; si < N_STRINGS; si++)
        for (size_t ti = 0; ti < N_TIMES; ti++) {
            char key[256], order[256];
            snprintf(key, sizeof key, "va_%zu_%zu_%s", si, ti, STRINGS[si]);
            snprintf(order, sizeof order, "ova_%zu_%zu", si, ti);
            struct payment *p = va_new(&l, key, order, STRINGS[(si + 1) % N_STRINGS],
                                       STRINGS[(si + 2) % N_STRINGS], TIMES_US[ti]);
            compare_views(&l, p); /* waiting for its deposit */
            if (si % 3 == 0) {    /* expired unpaid */
                if (ti == 0) {
                    ck_assert(ledger_expire_va(p, TIMES_US[ti] + US));
                    ck_assert_int_eq(p->status, PAY_EXPIRED);
                    compare_views(&l, p);
                }
                continue;
            }
            ck_assert_int_eq(ledger_deposit(&l, p, false, T0_US + 10 * US), 0);
            compare_views(&l, p);
            if (si % 3 == 1) { /* a deposit error, then the deposit again */
                ck_assert_int_eq(ledger_deposit(&l, p, true, T0_US + 20 * US), 0);
                compare_views(&l, p);
                ck_assert_int_eq(ledger_deposit(&l, p, false, T0_US + 30 * US), 0);
                compare_views(&l, p);
            }
            /* A cancel after the deposit gives a refund account. */
            p->va->refund_bank = dup("20");
            p->va->refund_account = dup(STRINGS[(si + 4) % N_STRINGS]);
            p->va->refund_holder = dup(STRINGS[(si + 5) % N_STRINGS]);
            ck_assert_int_eq(ledger_cancel(&l, p, 10000, STRINGS[si], T0_US + 40 * US), 0);
            compare_views(&l, p);
            ck_assert_int_eq(ledger_cancel(&l, p, p->balance, "환불", T0_US + 50 * US), 0);
            compare_views(&l, p);
        }
    ck_assert_uint_gt(compared, 10000);
    ledger_fini(&l);
}
END_TEST

/* buf.c's escaping (json_escaped_len, json_escape, buf_add_json_chars) against the reference's,
 * over random bytes biased towards UTF-8 lead and continuation bytes. */
START_TEST(test_json_escape_matches_the_reference_over_random_bytes)
{
    struct rng r;
    rng_seed(&r, 25);
    char s[64];
    for (int iter = 0; iter < 50000; iter++) {
        size_t n = (size_t)(rng_next(&r) % sizeof s);
        for (size_t i = 0; i < n; i++) {
            uint64_t x = rng_next(&r);
            s[i] = (char)(x % 4 == 0   ? 0x80 + (x >> 8) % 0x40
                          : x % 4 == 1 ? 0xc0 + (x >> 8) % 0x40
                          : x % 8 == 2 ? (x >> 8) % 0x20
                                       : (x >> 8) & 0xff);
        }
        struct buf want, got;
        buf_init(&want);
        buf_init(&got);
        ref_add_json_chars(&want, s, n);
        buf_add_json_chars(&got, s, n);
        ck_assert(!want.oom && !got.oom);
        ck_assert_uint_eq(json_escaped_len(s, n), want.len);
        ck_assert_msg(got.len == want.len && memcmp(got.data, want.data, got.len) == 0,
                      "iteration %d: %zu bytes escaped to %zu, want %zu", iter, n, got.len,
                      want.len);
        buf_fini(&want);
        buf_fini(&got);
    }
}
END_TEST

Suite *make_suite(void)
{
    Suite *s = suite_create("render_golden");
    TCase *tc = tcase_create("golden");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_render_card_payments_match_the_reference_bytes);
    tcase_add_test(tc, test_render_virtual_accounts_match_the_reference_bytes);
    tcase_add_test(tc, test_json_escape_matches_the_reference_over_random_bytes);
    suite_add_tcase(s, tc);
    return s;
}
