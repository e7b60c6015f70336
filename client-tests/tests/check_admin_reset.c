/* check_admin_reset.c -- black-box tests of POST /__admin/reset (docs/admin.md §5 Admin API): it
 * empties the ledger, the idempotency store, the journal and the counters (the in-flight peak
 * restarts from the requests still held), keeps or applies the profile it is given, can run several
 * times in a row, and a request that spans it (held in its latency or queue latency, or with its
 * body arriving after it) is answered 500 and leaves the new ledger, journal and counters alone.
 * Each test starts its own server on port 0; requests held across the reset run on threads of their
 * own, and waits poll a condition with a bound. */
#define _GNU_SOURCE

#include <check.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check_main.h"
#include "testkit.h"

/* ---- reset ------------------------------------------------------------------------------- */

static bool all_requests_zero(const struct prom *p, char *which, size_t n)
{
    for (size_t r = 0; r < N_ROUTES; r++)
        for (size_t o = 0; o < N_OUTCOMES; o++) {
            double v = prom_get(p, "fakegate_requests_total", "route", ROUTES[r], "outcome",
                                OUTCOMES[o], NULL);
            if (v != 0) {
                snprintf(which, n, "requests_total{%s,%s} = %g", ROUTES[r], OUTCOMES[o], v);
                return false;
            }
        }
    return true;
}

/* Regression: a second reset re-applied a NULL profile (the first reset's record borrowed it). */
START_TEST(test_reset_three_times_in_a_row_keeps_serving)
{
    fg_server *s = start_admin_confirm("{\"latency\":{\"dist\":\"fixed\",\"ms\":0}}");
    for (int i = 0; i < 3; i++) {
        fg_response r;
        admin_call(s, "POST", "/__admin/reset", NULL, NULL, &r);
        assert_status_at(__LINE__, &r, 200);
        fg_response_fini(&r);
    }
    fg_response r;
    confirm_fresh(s, "pk_rrr", "order_rrr_1", 1000, "rrr-1", 0, &r);
    assert_status_at(__LINE__, &r, 200);
    fg_response_fini(&r);
    json_t *p = admin_json(s, "/__admin/profile");
    ck_assert_ptr_nonnull(json_object_get(p, "profile"));
    ck_assert(json_is_object(json_object_get(p, "profile")));
    json_decref(p);
    stop_server(s);
}
END_TEST

START_TEST(test_reset_empties_everything)
{
    fg_server *s = start_admin_confirm("{'latency':{'dist':'fixed','ms':0}}");
    fg_response r;
    confirm_fresh(s, "pk_rs_1", "ord_rs_1", 1000, "key-rs-1", 0, &r);
    assert_status(&r, 200);
    char ltk1[128];
    snprintf(ltk1, sizeof ltk1, "%s", fg_json_str(r.json, "lastTransactionKey"));
    fg_response_fini(&r);
    confirm_fresh(s, "pk_rs_1", "ord_rs_1", 1000, "key-rs-1", 0, &r); /* a replay */
    assert_status(&r, 200);
    ck_assert_str_eq(fg_json_str(r.json, "lastTransactionKey"), ltk1);
    fg_response_fini(&r);

    /* Two confirms held across the reset (the peak must restart from them). */
    char *held = dq("{'name':'held','routes':{'confirm':{'latency':{'dist':'fixed','ms':1500}},"
                    "'default':{'latency':{'dist':'fixed','ms':0}}}}");
    put_profile(s, held, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    struct mrun m;
    mrun_init(&m, s, 2);
    mrun_confirm(&m, 0, "pk_rs_h0", "ord_rs_h0", 1000, "key-rs-h0", 10000);
    mrun_confirm(&m, 1, "pk_rs_h1", "ord_rs_h1", 1000, "key-rs-h1", 10000);
    mrun_start(&m);
    ck_assert_uint_eq(wait_pending(s, "ord_rs_h", 2, 5000), 2);

    admin_call(s, "POST", "/__admin/reset", NULL, NULL, &r);
    assert_status(&r, 200);
    ck_assert_msg(json_is_str(r.json, "name", "held"), "reset changed the profile: %.300s",
                  r.body);
    fg_response_fini(&r);
    ck_assert_msg(atomic_load(&m.n_done) == 0, "held confirms ended before the checks");

    json_t *pays = fg_admin_payments(s, NULL);
    ck_assert(pays != NULL);
    ck_assert_msg(json_array_size(pays) == 0, "ledger not empty after reset");
    json_decref(pays);
    json_t *j = journal(s, 0);
    ck_assert_msg(json_array_size(j) == 0, "journal not empty after reset");
    json_decref(j);
    struct prom p;
    char which[160];
    metrics(s, &p, NULL);
    ck_assert_msg(all_requests_zero(&p, which, sizeof which), "after reset %s", which);
    const char *statuses[] = {"IN_PROGRESS", "DONE", "CANCELED", "PARTIAL_CANCELED", "ABORTED",
                              "EXPIRED"};
    for (size_t i = 0; i < 6; i++)
        ck_assert_msg(prom_get(&p, "fakegate_payments_total", "status", statuses[i], NULL) == 0,
                      "payments_total{%s} after reset", statuses[i]);
    ck_assert(prom_get(&p, "fakegate_idempotent_replays_total", NULL) == 0);
    ck_assert(prom_get(&p, "fakegate_injected_latency_seconds_count", NULL) == 0);
    double inflight = prom_get(&p, "fakegate_in_flight", "route", "confirm", NULL);
    double peak = prom_get(&p, "fakegate_in_flight_peak", "route", "confirm", NULL);
    ck_assert_msg(inflight == 2 && peak == 2, "after reset with 2 held: in flight %g, peak %g",
                  inflight, peak);
    prom_free(&p);
    mrun_join(&m);
    mrun_free(&m);
    ck_assert(wait_metric(s, "fakegate_in_flight", "route", "confirm", 0, 5000) == 0);

    /* An idle reset: peak 0. The key used before runs again: a NEW transaction. */
    char *instant = dq("{'name':'instant2','routes':{'default':{'latency':{'dist':'fixed','ms':0}}}}");
    put_profile(s, instant, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    admin_call(s, "POST", "/__admin/reset", NULL, NULL, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    metrics(s, &p, NULL);
    ck_assert_msg(all_requests_zero(&p, which, sizeof which), "after idle reset %s", which);
    for (size_t i = 0; i < N_ROUTES; i++) {
        ck_assert(prom_get(&p, "fakegate_in_flight", "route", ROUTES[i], NULL) == 0);
        ck_assert_msg(prom_get(&p, "fakegate_in_flight_peak", "route", ROUTES[i], NULL) == 0,
                      "idle reset: peak{%s} %g", ROUTES[i],
                      prom_get(&p, "fakegate_in_flight_peak", "route", ROUTES[i], NULL));
    }
    prom_free(&p);
    j = journal(s, 0);
    ck_assert_msg(json_array_size(j) == 0, "journal not empty after idle reset");
    json_decref(j);
    confirm_fresh(s, "pk_rs_1", "ord_rs_1", 1000, "key-rs-1", 0, &r);
    assert_status(&r, 200);
    const char *ltk2 = fg_json_str(r.json, "lastTransactionKey");
    ck_assert_msg(ltk2 != NULL && strcmp(ltk2, ltk1) != 0,
                  "the key used before reset replayed lastTransactionKey %s", ltk1);
    fg_response_fini(&r);
    j = journal(s, 0);
    ck_assert_int_eq((int)json_array_size(j), 1);
    ck_assert_int_eq((int)json_integer_value(json_object_get(json_array_get(j, 0), "attempt")), 1);
    json_decref(j);

    /* reset {"profile": NAME} applies it; {"profile": {...}} too; no body keeps it. */
    admin_call(s, "POST", "/__admin/reset", "{\"profile\": \"normal\"}", NULL, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    assert_profile_is(s, "normal", NULL);
    pays = fg_admin_payments(s, NULL);
    ck_assert_int_eq((int)json_array_size(pays), 0);
    json_decref(pays);
    admin_call(s, "POST", "/__admin/reset", NULL, NULL, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    assert_profile_is(s, "normal", NULL);
    char body[512];
    snprintf(body, sizeof body, "{\"profile\": %s}", instant);
    admin_call(s, "POST", "/__admin/reset", body, NULL, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    assert_profile_is(s, "instant2", instant);
    admin_call(s, "POST", "/__admin/reset", "{\"profile\": \"../etc\"}", NULL, &r);
    assert_error(&r, 400, "INVALID_PROFILE");
    fg_response_fini(&r);
    assert_profile_is(s, "instant2", instant);
    free(held);
    free(instant);
    stop_server(s);
}
END_TEST

/* A request that spans a reset must not touch the journal entries written after it. */
START_TEST(test_request_spanning_reset_leaves_new_journal_alone)
{
    fg_server *s = start_admin_confirm("{'latency':{'dist':'fixed','ms':0}}");
    fg_response r;
    /* Entries 1..3 before the held one, so that it is entry 4. */
    for (int i = 0; i < 3; i++) {
        char pk[32], oid[32];
        snprintf(pk, sizeof pk, "pk_sp_%d", i);
        snprintf(oid, sizeof oid, "ord_sp_%d", i);
        confirm_fresh(s, pk, oid, 1000, NULL, 0, &r);
        assert_status(&r, 200);
        fg_response_fini(&r);
    }
    char *held = dq("{'name':'held','routes':{'confirm':{'latency':{'dist':'fixed','ms':1200}},"
                    "'read':{'latency':{'dist':'fixed','ms':0}}}}");
    put_profile(s, held, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    struct mrun m;
    mrun_init(&m, s, 1);
    mrun_confirm(&m, 0, "pk_sp_held", "ord_sp_held", 1000, "key-sp-held", 10000);
    mrun_start(&m);
    ck_assert_uint_eq(wait_pending(s, "ord_sp_held", 1, 5000), 1);
    admin_call(s, "POST", "/__admin/reset", NULL, NULL, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    /* Four new requests after the reset: ids 1..4 again. */
    for (int i = 0; i < 4; i++) {
        char path[64];
        snprintf(path, sizeof path, "/v1/payments/orders/ord_new_%d", i);
        fg_get(s, path, &r);
        assert_error(&r, 404, "NOT_FOUND_PAYMENT");
        fg_response_fini(&r);
    }
    mrun_join(&m);
    int64_t deadline = fg_now_ms() + 2000;
    while (metric1(s, "fakegate_in_flight", "route", "confirm") != 0 && fg_now_ms() < deadline)
        fg_pause_ms(5);
    json_t *j = journal(s, 0);
    char *text = journal_text(s);
    ck_assert_msg(json_array_size(j) == 4, "journal after reset: %s", text);
    size_t i;
    json_t *e;
    json_array_foreach(j, i, e) {
        ck_assert_msg(json_is_str(e, "route", "read") &&
                          json_integer_value(json_object_get(e, "status")) == 404 &&
                          json_is_str(e, "outcome", "business_error"),
                      "entry %zu was changed by the request held across the reset: %s", i, text);
    }
    free(text);
    json_decref(j);
    mrun_free(&m);
    free(held);
    stop_server(s);
}
END_TEST

/* One request on a thread of its own (a held request the test acts around). */
struct async_req {
    const fg_server *s;
    char path[96], body[160], key_line[96];
    fg_response r;
    pthread_t thread;
};

static void *async_req_main(void *arg)
{
    struct async_req *a = arg;
    const char *headers[] = {a->s->auth_header, "Content-Type: application/json",
                             a->key_line[0] ? a->key_line : NULL, NULL};
    fg_request req = {.method = "POST", .path = a->path, .body = a->body, .headers = headers};
    fg_http(a->s, NULL, &req, &a->r);
    return NULL;
}

/* POST `body` to `path` (Idempotency-Key `key` unless NULL) on its own thread. */
static void async_post(struct async_req *a, const fg_server *s, const char *path,
                       const char *body, const char *key)
{
    memset(a, 0, sizeof *a);
    a->s = s;
    snprintf(a->path, sizeof a->path, "%s", path);
    snprintf(a->body, sizeof a->body, "%s", body);
    if (key)
        snprintf(a->key_line, sizeof a->key_line, "Idempotency-Key: %s", key);
    curl_global_init(CURL_GLOBAL_DEFAULT); /* before a second thread uses curl */
    ck_assert_int_eq(pthread_create(&a->thread, NULL, async_req_main, a), 0);
}

static void async_join(struct async_req *a)
{
    pthread_join(a->thread, NULL);
}

/* fakegate_requests_total{route="confirm",outcome=...} (NAN if the series is absent). */
static double confirms_with_outcome(const fg_server *s, const char *outcome)
{
    struct prom p;
    metrics(s, &p, NULL);
    double v = prom_get(&p, "fakegate_requests_total", "route", "confirm", "outcome", outcome,
                        NULL);
    prom_free(&p);
    return v;
}

/* A confirm in its latency when a reset runs belongs to the emptied ledger: it is answered 500
 * and must not approve a payment of the same paymentKey that a request after the reset created
 * and is processing (that request's Idempotency-Key record must end DONE, not stay PROCESSING),
 * and it is not counted in the new counters. */
START_TEST(test_confirm_held_across_reset_leaves_the_new_ledger_alone)
{
    fg_server *s = start_admin_confirm("{'latency':{'dist':'fixed','ms':1500}}");
    const char *body = "{\"paymentKey\":\"pk_rs\",\"orderId\":\"ord_rs\",\"amount\":1000}";
    struct async_req old, fresh;
    async_post(&old, s, CONFIRM_PATH, body, "K-old");
    ck_assert_double_eq(wait_metric(s, "fakegate_in_flight", "route", "confirm", 1, 5000), 1);
    reset_now(s);
    async_post(&fresh, s, CONFIRM_PATH, body, "K-new");
    async_join(&old);
    async_join(&fresh);
    assert_error(&old.r, 500, "FAILED_INTERNAL_SYSTEM_PROCESSING");
    assert_done(&fresh.r, "pk_rs", "ord_rs");
    assert_charged_once(s, "pk_rs", "ord_rs");
    /* K-new's record is DONE: its resend replays the 200, byte for byte. */
    fg_response again;
    confirm_fresh(s, "pk_rs", "ord_rs", 1000, "K-new", 0, &again);
    assert_status(&again, 200);
    ck_assert_str_eq(again.body, fresh.r.body);
    fg_response_fini(&again);
    ck_assert_double_eq(confirms_with_outcome(s, "business_error"), 0);
    ck_assert_double_eq(confirms_with_outcome(s, "ok"), 1);
    ck_assert_double_eq(confirms_with_outcome(s, "replayed"), 1);
    fg_response_fini(&old.r);
    fg_response_fini(&fresh.r);
    stop_server(s);
}
END_TEST

/* A confirm whose headers came before a reset and its body after it is answered 500 and leaves
 * no trace in the new state: not even an attempt count (the next confirm of that order is its
 * attempt 1 again, so a fault with "attempts": [1] still fires for it). */
START_TEST(test_confirm_whose_body_comes_after_a_reset_counts_no_attempt)
{
    fg_server *s = start_admin_confirm("{'latency':{'dist':'fixed','ms':0}}");
    const char *body = "{\"paymentKey\":\"pk_rb\",\"orderId\":\"ord_rb\",\"amount\":1000}";
    char head[512];
    int hn = snprintf(head, sizeof head,
                      "POST " CONFIRM_PATH " HTTP/1.1\r\nHost: 127.0.0.1\r\n%s\r\n"
                      "Content-Type: application/json\r\nContent-Length: %zu\r\n"
                      "Connection: close\r\n\r\n",
                      s->auth_header, strlen(body));
    ck_assert(hn > 0 && (size_t)hn < sizeof head);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)s->port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    ck_assert_int_eq((int)write(fd, head, (size_t)hn), hn);
    /* Admitted at its headers: counted in flight from then on. */
    ck_assert_double_eq(wait_metric(s, "fakegate_in_flight", "route", "confirm", 1, 5000), 1);
    reset_now(s);
    ck_assert_int_eq((int)write(fd, body, strlen(body)), (int)strlen(body));
    char resp[4096];
    size_t got = 0;
    for (ssize_t n; got < sizeof resp - 1 && (n = read(fd, resp + got, sizeof resp - 1 - got)) > 0;)
        got += (size_t)n;
    resp[got] = '\0';
    close(fd);
    ck_assert_msg(strncmp(resp, "HTTP/1.1 500", 12) == 0 &&
                      strstr(resp, "FAILED_INTERNAL_SYSTEM_PROCESSING") != NULL,
                  "the request straddling the reset: %.300s", resp);
    ck_assert_uint_eq(ledger_size(s), 0);

    fg_response r;
    confirm_fresh(s, "pk_rb", "ord_rb", 1000, NULL, 0, &r);
    assert_done(&r, "pk_rb", "ord_rb");
    fg_response_fini(&r);
    json_t *j = journal(s, 0);
    json_t *e = entry_for(j, "ord_rb");
    ck_assert_ptr_nonnull(e);
    ck_assert_int_eq((int)json_integer_value(json_object_get(e, "attempt")), 1);
    json_decref(j);
    stop_server(s);
}
END_TEST

/* A cancel in its latency when a reset runs must not cancel the payment of the same paymentKey
 * confirmed after the reset. */
START_TEST(test_cancel_held_across_reset_leaves_the_new_payment_alone)
{
    fg_server *s = start_admin_confirm("{'latency':{'dist':'fixed','ms':0}}");
    char *slow_cancel = dq("{'name':'slow-cancel','routes':{'cancel':{'latency':{'dist':'fixed',"
                           "'ms':1500}}}}");
    fg_response r;
    put_profile(s, slow_cancel, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    confirm_fresh(s, "pk_rc", "ord_rc", 1000, NULL, 0, &r);
    assert_done(&r, "pk_rc", "ord_rc");
    fg_response_fini(&r);
    struct async_req cancel;
    async_post(&cancel, s, "/v1/payments/pk_rc/cancel", "{\"cancelReason\":\"old\"}", NULL);
    ck_assert_double_eq(wait_metric(s, "fakegate_in_flight", "route", "cancel", 1, 5000), 1);
    reset_now(s); /* keeps the profile */
    confirm_fresh(s, "pk_rc", "ord_rc", 1000, NULL, 0, &r);
    assert_done(&r, "pk_rc", "ord_rc");
    fg_response_fini(&r);
    async_join(&cancel);
    assert_error(&cancel.r, 500, "FAILED_INTERNAL_SYSTEM_PROCESSING");
    fg_response_fini(&cancel.r);
    fg_get(s, "/v1/payments/pk_rc", &r);
    assert_done(&r, "pk_rc", "ord_rc");
    ck_assert(json_is_null(json_object_get(r.json, "cancels")));
    fg_response_fini(&r);
    free(slow_cancel);
    stop_server(s);
}
END_TEST

/* A confirm still in its queue latency when a reset runs is answered 500 and charges nothing
 * in the new ledger, and no counter after the reset shows it. */
START_TEST(test_confirm_queued_across_reset_charges_nothing)
{
    fg_server *s = start_admin_confirm("{'queue_latency':{'dist':'fixed','ms':1500}}");
    struct async_req q;
    async_post(&q, s, CONFIRM_PATH, "{\"paymentKey\":\"pk_rq\",\"orderId\":\"ord_rq\",\"amount\":1000}",
               "K-queued");
    ck_assert_double_eq(wait_metric(s, "fakegate_in_flight", "route", "confirm", 1, 5000), 1);
    reset_now(s);
    async_join(&q);
    assert_error(&q.r, 500, "FAILED_INTERNAL_SYSTEM_PROCESSING");
    fg_response_fini(&q.r);
    ck_assert_uint_eq(ledger_size(s), 0);
    ck_assert_double_eq(confirms_with_outcome(s, "business_error"), 0);
    ck_assert_double_eq(metric1(s, "fakegate_injected_latency_seconds_count", NULL, NULL), 0);
    ck_assert_double_eq(metric1(s, "fakegate_payments_total", "status", "IN_PROGRESS"), 0);
    /* The same confirm after the reset runs as new. */
    fg_response r;
    confirm_fresh(s, "pk_rq", "ord_rq", 1000, "K-queued", 10000, &r);
    assert_done(&r, "pk_rq", "ord_rq");
    fg_response_fini(&r);
    assert_charged_once(s, "pk_rq", "ord_rq");
    stop_server(s);
}
END_TEST

Suite *make_suite(void)
{
    Suite *su = suite_create("blackbox_admin_reset");

    TCase *tc = add_tcase(su, "reset", 30);
    tcase_add_test(tc, test_reset_empties_everything);
    tcase_add_test(tc, test_reset_three_times_in_a_row_keeps_serving);
    tcase_add_test(tc, test_request_spanning_reset_leaves_new_journal_alone);
    tcase_add_test(tc, test_confirm_held_across_reset_leaves_the_new_ledger_alone);
    tcase_add_test(tc, test_cancel_held_across_reset_leaves_the_new_payment_alone);
    tcase_add_test(tc, test_confirm_queued_across_reset_charges_nothing);
    tcase_add_test(tc, test_confirm_whose_body_comes_after_a_reset_counts_no_attempt);
    return su;
}
