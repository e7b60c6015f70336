/* check_admin_journal.c -- black-box tests of GET /__admin/requests, the request journal
 * (docs/admin.md §5 Admin API): a held confirm shows as pending (status, outcome and duration null,
 * its decision already planned) and is completed when its response has ended; ?limit=N gives the N
 * newest, oldest first, and limit=0 is a 400; a dropped response is delivered "no" with outcome
 * dropped_response. The test starts its own server on port 0; waits poll the journal with a bound.
 */
#define _GNU_SOURCE

#include <check.h>
#include <ctype.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "testkit.h"

static bool rfc3339_us(const char *s)
{
    /* 2024-02-13T03:17:57.123456Z, or with an offset +09:00 */
    static const char pat[] = "dddd-dd-ddTdd:dd:dd.dddddd";
    if (s == NULL || strlen(s) < sizeof pat)
        return false;
    for (size_t i = 0; i < sizeof pat - 1; i++)
        if (pat[i] == 'd' ? !isdigit((unsigned char)s[i]) : s[i] != pat[i])
            return false;
    const char *z = s + sizeof pat - 1;
    return strcmp(z, "Z") == 0 ||
           ((z[0] == '+' || z[0] == '-') && strlen(z) == 6 && isdigit((unsigned char)z[1]) &&
            isdigit((unsigned char)z[2]) && z[3] == ':' && isdigit((unsigned char)z[4]) &&
            isdigit((unsigned char)z[5]));
}

START_TEST(test_journal_held_request_and_limit)
{
    fg_server *s = start_admin_confirm("{'latency':{'dist':'fixed','ms':800}}");
    struct mrun m;
    mrun_init(&m, s, 1);
    mrun_confirm(&m, 0, "pk_jr_1", "ord_jr_1", 4321, "key-jr-1", 10000);
    mrun_start(&m);
    ck_assert_uint_eq(wait_pending(s, "ord_jr_1", 1, 5000), 1);
    json_t *j = journal(s, 0);
    ck_assert_uint_eq(atomic_load(&m.n_done), 0);
    json_t *e = entry_for(j, "ord_jr_1");
    char *dump = json_dumps(e, JSON_COMPACT);
    ck_assert_msg(json_is_null(json_object_get(e, "status")), "%s", dump);
    ck_assert_msg(json_is_str(e, "delivered", "pending"), "%s", dump);
    ck_assert_msg(json_is_null(json_object_get(e, "outcome")), "%s", dump);
    ck_assert_msg(json_is_null(json_object_get(e, "duration_ms")), "%s", dump);
    ck_assert_msg(json_is_str(e, "method", "POST") && json_is_str(e, "path", CONFIRM_PATH) &&
                      json_is_str(e, "route", "confirm"),
                  "%s", dump);
    ck_assert_msg(json_is_str(e, "payment_key", "pk_jr_1") &&
                      json_is_str(e, "idempotency_key", "key-jr-1"),
                  "%s", dump);
    ck_assert_msg(json_integer_value(json_object_get(e, "attempt")) == 1, "%s", dump);
    ck_assert_msg(json_integer_value(json_object_get(e, "id")) >= 1, "%s", dump);
    ck_assert_msg(rfc3339_us(fg_json_str(e, "arrived_at")), "arrived_at: %s", dump);
    json_t *d = json_object_get(e, "decision");
    ck_assert_msg(json_is_object(d) && jnum(d, "latency_ms") == 800 &&
                      jnum(d, "queue_latency_ms") == 0 && json_is_str(d, "fault", "none"),
                  "decision: %s", dump);
    free(dump);
    json_decref(j);

    mrun_join(&m);
    ck_assert_int_eq(m.q[0].status, 200);
    /* The entry is completed when the response has ended on the server. */
    int64_t deadline = fg_now_ms() + 3000;
    for (;;) {
        j = journal(s, 0);
        e = entry_for(j, "ord_jr_1");
        if (!json_is_null(json_object_get(e, "status")) || fg_now_ms() > deadline)
            break;
        json_decref(j);
        fg_pause_ms(5);
    }
    dump = json_dumps(e, JSON_COMPACT);
    ck_assert_msg(json_integer_value(json_object_get(e, "status")) == 200, "%s", dump);
    ck_assert_msg(json_is_str(e, "delivered", "yes"), "%s", dump);
    ck_assert_msg(json_is_str(e, "outcome", "ok"), "%s", dump);
    ck_assert_msg(jnum(e, "duration_ms") >= 800, "%s", dump);
    free(dump);
    json_decref(j);
    mrun_free(&m);

    /* ?limit=2: the 2 newest, oldest first. */
    for (int i = 0; i < 3; i++) {
        char path[64];
        snprintf(path, sizeof path, "/v1/payments/orders/ord_lim_%d", i);
        fg_response r;
        fg_get(s, path, &r);
        assert_status(&r, 404);
        fg_response_fini(&r);
    }
    /* An entry is completed after its answer has left, so the last GET's may still be pending
     * here: settled first, or `all` and `two` could show it before and after its completion. */
    wait_journal_settled(s);
    json_t *all = journal(s, 0);
    json_t *two = journal(s, 2);
    ck_assert_int_eq((int)json_array_size(all), 4);
    ck_assert_int_eq((int)json_array_size(two), 2);
    ck_assert(json_is_str(json_array_get(two, 0), "order_id", "ord_lim_1"));
    ck_assert(json_is_str(json_array_get(two, 1), "order_id", "ord_lim_2"));
    ck_assert(json_equal(json_array_get(two, 0), json_array_get(all, 2)));
    ck_assert(json_equal(json_array_get(two, 1), json_array_get(all, 3)));
    ck_assert(json_integer_value(json_object_get(json_array_get(two, 0), "id")) <
              json_integer_value(json_object_get(json_array_get(two, 1), "id")));
    json_decref(all);
    json_decref(two);

    /* A lost response: delivered "no", outcome "dropped_response". */
    char *drop = dq("{'name':'drop','routes':{'confirm':{'faults':[{'kind':'drop_response','p':1,"
                    "'how':'close'}]},'default':{'latency':{'dist':'fixed','ms':0}}}}");
    fg_response r;
    put_profile(s, drop, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    free(drop);
    confirm_fresh(s, "pk_jr_drop", "ord_jr_drop", 1000, "key-jr-drop", 0, &r);
    ck_assert_msg(r.curl_code == CURLE_GOT_NOTHING, "curl %d %s status %ld", (int)r.curl_code,
                  r.curl_error, r.status);
    fg_response_fini(&r);
    deadline = fg_now_ms() + 3000;
    for (;;) {
        j = journal(s, 0);
        e = entry_for(j, "ord_jr_drop");
        if (!json_is_str(e, "delivered", "pending") || fg_now_ms() > deadline)
            break;
        json_decref(j);
        fg_pause_ms(5);
    }
    dump = json_dumps(e, JSON_COMPACT);
    ck_assert_msg(json_is_str(e, "delivered", "no"), "%s", dump);
    ck_assert_msg(json_is_str(e, "outcome", "dropped_response"), "%s", dump);
    ck_assert_msg(json_is_str(json_object_get(e, "decision"), "fault", "drop_response"), "%s",
                  dump);
    free(dump);
    json_decref(j);

    admin_call(s, "GET", "/__admin/requests?limit=0", NULL, NULL, &r);
    assert_status(&r, 400);
    fg_response_fini(&r);
    stop_server(s);
}
END_TEST

Suite *make_suite(void)
{
    Suite *su = suite_create("blackbox_admin_journal");

    TCase *tc = add_tcase(su, "journal", 30);
    tcase_add_test(tc, test_journal_held_request_and_limit);
    return su;
}
