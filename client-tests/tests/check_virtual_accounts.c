/* check_virtual_accounts.c -- black-box tests of virtual accounts (docs/virtual-accounts.md
 * §6.6, docs/webhooks.md §6.3's DEPOSIT_CALLBACK): the issue and its errors, an idempotent
 * replay, the simulated bank's deposit and deposit error through the admin API, due-date
 * expiry on the gateway clock, and the cancel rules before and after the deposit. A scripted
 * receiver (client-tests/receiver.h) on 127.0.0.1 port 0 records the webhooks; every wait is
 * bounded. */
#define _GNU_SOURCE

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check_main.h"
#include "deposit.h"
#include "receiver.h"
#include "testkit.h"

#define WAIT_MS 10000
#define VA_PATH "/v1/virtual-accounts"
#define KST_RE "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\+09:00$"

/* ---- helpers ------------------------------------------------------------------------------ */

static struct receiver *rx_200(void)
{
    struct rx_answer a = {RX_STATUS, 200};
    struct receiver *rx = receiver_start(&a, 1);
    ck_assert_msg(rx != NULL, "the receiver did not start");
    return rx;
}

static fg_server *start_rx(const struct receiver *rx)
{
    const char *args[] = {"--webhook-url", receiver_url(rx), NULL};
    return start_args(NULL, rx ? args : NULL);
}

/* POST /v1/virtual-accounts for 10 000 won at bank 88 (신한) with `extra` members (",..." or
 * "") and an optional Idempotency-Key. */
static void issue(const fg_server *s, const char *oid, const char *extra, const char *idem,
                  fg_response *r)
{
    char body[1024], idem_h[400];
    snprintf(body, sizeof body,
             "{\"amount\":10000,\"orderId\":\"%s\",\"orderName\":\"테스트 주문\","
             "\"customerName\":\"홍길동\",\"bank\":\"88\"%s}", oid, extra);
    const char *headers[] = {s->auth_header, NULL, NULL};
    if (idem) {
        snprintf(idem_h, sizeof idem_h, "Idempotency-Key: %s", idem);
        headers[1] = idem_h;
    }
    fg_request req = {.method = "POST", .path = VA_PATH, .body = body, .headers = headers};
    fg_http(s, NULL, &req, r);
}

/* An issue that must succeed; returns its paymentKey (caller frees). */
static char *issue_ok(const fg_server *s, const char *oid, const char *extra)
{
    fg_response r;
    issue(s, oid, extra, NULL, &r);
    assert_status(&r, 200);
    ck_assert_str_eq(json_str(r.json, "status"), "WAITING_FOR_DEPOSIT");
    char *pk = strdup(json_str(r.json, "paymentKey"));
    fg_response_fini(&r);
    return pk;
}

/* POST /__admin/virtual-accounts/<what> with `body`. */
static void bank(const fg_server *s, const char *what, const char *body, fg_response *r)
{
    char path[128];
    snprintf(path, sizeof path, "/__admin/virtual-accounts/%s", what);
    admin_call(s, "POST", path, body, NULL, r);
}

static void deposit_ok(const fg_server *s, const char *oid, long long amount)
{
    char body[160];
    snprintf(body, sizeof body, "{\"orderId\":\"%s\",\"amount\":%lld}", oid, amount);
    fg_response r;
    bank(s, "deposit", body, &r);
    assert_status(&r, 200);
    ck_assert_str_eq(json_str(r.json, "status"), "DONE");
    fg_response_fini(&r);
}

/* POST /v1/payments/{pk}/cancel with `extra` members. */
static void cancel(const fg_server *s, const char *pk, const char *extra, fg_response *r)
{
    char path[FG_PATH_LEN], body[512];
    snprintf(path, sizeof path, "/v1/payments/%s/cancel", pk);
    snprintf(body, sizeof body, "{\"cancelReason\":\"고객 변심\"%s}", extra);
    const char *headers[] = {s->auth_header, NULL};
    fg_request req = {.method = "POST", .path = path, .body = body, .headers = headers};
    fg_http(s, NULL, &req, r);
}

/* GET /v1/payments/orders/{oid} (must be 200): a new reference to the Payment. */
static json_t *payment(const fg_server *s, const char *oid)
{
    fg_response r;
    get_order(s, oid, &r);
    assert_status(&r, 200);
    json_t *p = json_incref(r.json);
    fg_response_fini(&r);
    return p;
}

static const char *va_str(const json_t *p, const char *key)
{
    return json_str(json_object_get(p, "virtualAccount"), key);
}

static void advance(const fg_server *s, double sec)
{
    char body[64];
    snprintf(body, sizeof body, "{\"advance_s\":%.3f}", sec);
    fg_response r;
    admin_call(s, "POST", "/__admin/clock", body, NULL, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
}

/* Wait for `n` webhooks; each body parsed into out[i] (caller decrefs). */
static void received(struct receiver *rx, size_t n, json_t **out)
{
    ck_assert_uint_ge(receiver_wait(rx, n, WAIT_MS), n);
    for (size_t i = 0; i < n; i++) {
        struct rx_request q;
        ck_assert(receiver_get(rx, i, &q));
        out[i] = json_loads(q.body, 0, NULL);
        ck_assert_msg(out[i] != NULL, "webhook %zu is not JSON: %s", i, q.body);
    }
}

/* The DEPOSIT_CALLBACK (no eventType) among bodies[0..n) with this status, or NULL. */
static json_t *callback(json_t **bodies, size_t n, const char *status)
{
    for (size_t i = 0; i < n; i++)
        if (!json_object_get(bodies[i], "eventType") &&
            strcmp(json_str(bodies[i], "status"), status) == 0)
            return bodies[i];
    return NULL;
}

/* The PAYMENT_STATUS_CHANGED among bodies[0..n) whose data has this status, or NULL. */
static json_t *status_changed(json_t **bodies, size_t n, const char *status)
{
    for (size_t i = 0; i < n; i++)
        if (json_is_str(bodies[i], "eventType", "PAYMENT_STATUS_CHANGED") &&
            json_is_str(json_object_get(bodies[i], "data"), "status", status))
            return bodies[i];
    return NULL;
}

static void free_all(json_t **b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        json_decref(b[i]);
}

/* Korea time `days` from the wall clock, as Toss writes a dueDate. */
static void kst_in_days(double days, char out[32])
{
    time_t t = time(NULL) + (time_t)(days * 86400) + 9 * 3600;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
}

/* ---- issue -------------------------------------------------------------------------------- */

START_TEST(test_issue_answers_waiting_for_deposit_with_its_virtual_account)
{
    fg_server *s = start_args(NULL, NULL);
    fg_response r;
    issue(s, "va-order-1", ",\"customerEmail\":\"a@example.com\"", NULL, &r);
    assert_status(&r, 200);
    json_t *p = r.json;
    ck_assert_str_eq(json_str(p, "method"), "가상계좌");
    ck_assert_str_eq(json_str(p, "status"), "WAITING_FOR_DEPOSIT");
    ck_assert_str_eq(json_str(p, "orderName"), "테스트 주문");
    ck_assert(matches("^ps_[A-Za-z0-9]{24}$", json_str(p, "secret")));
    ck_assert(json_is_null(json_object_get(p, "approvedAt")));
    ck_assert(json_is_null(json_object_get(p, "card")));
    ck_assert_str_eq(va_str(p, "accountType"), "일반");
    ck_assert(matches("^[0-9]{14}$", va_str(p, "accountNumber")));
    ck_assert_str_eq(va_str(p, "bankCode"), "88");
    ck_assert_str_eq(va_str(p, "customerName"), "홍길동");
    ck_assert(matches(KST_RE, va_str(p, "dueDate")));
    ck_assert_str_eq(va_str(p, "refundStatus"), "NONE");
    ck_assert_str_eq(va_str(p, "settlementStatus"), "INCOMPLETED");
    json_t *va = json_object_get(p, "virtualAccount");
    ck_assert(json_is_false(json_object_get(va, "expired")));
    ck_assert(json_is_null(json_object_get(va, "refundReceiveAccount")));
    /* The default due date: 7 days on the gateway clock. */
    char want[32];
    kst_in_days(7, want);
    ck_assert_msg(strncmp(va_str(p, "dueDate"), want, 13) == 0, "dueDate %s, want about %s",
                  va_str(p, "dueDate"), want);
    fg_response_fini(&r);
    /* The bank by its Korean name, and a dueDate with an offset. */
    char extra[128], due[32];
    kst_in_days(3, due);
    snprintf(extra, sizeof extra, ",\"dueDate\":\"%s+09:00\"", due);
    char body[512];
    snprintf(body, sizeof body,
             "{\"amount\":5000,\"orderId\":\"va-order-2\",\"orderName\":\"x\","
             "\"customerName\":\"김\",\"bank\":\"신한은행\"%s}", extra);
    const char *headers[] = {s->auth_header, NULL};
    fg_request req = {.method = "POST", .path = VA_PATH, .body = body, .headers = headers};
    fg_http(s, NULL, &req, &r);
    assert_status(&r, 200);
    ck_assert_str_eq(va_str(r.json, "bankCode"), "88");
    ck_assert_msg(strncmp(va_str(r.json, "dueDate"), due, 19) == 0, "dueDate %s, sent %s",
                  va_str(r.json, "dueDate"), due);
    fg_response_fini(&r);
    stop_server(s);
}
END_TEST

START_TEST(test_issue_errors_are_toss_codes_and_change_nothing)
{
    fg_server *s = start_args(NULL, NULL);
    struct {
        const char *extra;
        const char *code;
    } cases[] = {
        {",\"bank\":\"99\"", "INVALID_BANK"},
        {",\"validHours\":24,\"dueDate\":\"2099-01-01T00:00:00\"",
         "INVALID_VALID_HOURS_WITH_DUE_DATE_AND_SINGLE"},
        {",\"validHours\":721", "EXCEED_MAX_DUE_DATE"},
        {",\"validHours\":0", "INVALID_REQUEST"},
        {",\"dueDate\":\"2001-01-01T00:00:00\"", "INVALID_REQUEST"},
        {",\"customerName\":\"\"", "INVALID_REQUEST"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        /* Duplicate keys are 400 too: each body is built whole. */
        char body[512];
        const char *bankv = strstr(cases[i].extra, "\"bank\"") ? "" : ",\"bank\":\"88\"";
        const char *namev = strstr(cases[i].extra, "customerName") ? "" : ",\"customerName\":\"홍\"";
        snprintf(body, sizeof body,
                 "{\"amount\":10000,\"orderId\":\"va-bad-%zu\",\"orderName\":\"x\"%s%s%s}", i,
                 bankv, namev, cases[i].extra);
        const char *headers[] = {s->auth_header, "Idempotency-Key: bad-1", NULL};
        fg_request req = {.method = "POST", .path = VA_PATH, .body = body, .headers = headers};
        fg_response r;
        fg_http(s, NULL, &req, &r);
        assert_error(&r, 400, cases[i].code);
        fg_response_fini(&r);
    }
    char due[32], extra[96];
    kst_in_days(31, due);
    snprintf(extra, sizeof extra, ",\"dueDate\":\"%s\"", due);
    fg_response r;
    issue(s, "va-bad-due", extra, NULL, &r);
    assert_error(&r, 400, "EXCEED_MAX_DUE_DATE");
    fg_response_fini(&r);
    issue(s, "bad", "", NULL, &r); /* orderId shorter than 6 */
    assert_error(&r, 400, "INVALID_ORDER_ID");
    fg_response_fini(&r);
    ck_assert_uint_eq(ledger_size(s), 0);
    /* Not stored: the corrected request under the same key runs. */
    issue(s, "va-good-1", "", "bad-1", &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    ck_assert_uint_eq(ledger_size(s), 1);
    stop_server(s);
}
END_TEST

/* The profile's `virtual_account` route (docs/profiles.md) plans the issue like a confirm: a 503
 * fault there stores nothing, and the confirm route is not touched by it. */
START_TEST(test_issue_follows_the_virtual_account_route)
{
    fg_server *s = start_q("{'name':'va_route','routes':{'virtual_account':{'faults':["
                           "{'kind':'error','p':1,'status':503,'code':'SERVICE_UNAVAILABLE',"
                           "'when':'before'}]}}}");
    fg_response r;
    issue(s, "va-route-1", "", "va-route-key", &r);
    assert_error(&r, 503, "SERVICE_UNAVAILABLE");
    fg_response_fini(&r);
    ck_assert_uint_eq(ledger_size(s), 0);
    confirm_fresh(s, "pk_va_route", "order-va-route", 10000, NULL, 0, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    ck_assert_uint_eq(ledger_size(s), 1);
    stop_server(s);
}
END_TEST

START_TEST(test_issue_replays_under_its_idempotency_key_and_orders_are_unique)
{
    fg_server *s = start_args(NULL, NULL);
    fg_response a, b, c;
    issue(s, "va-idem-1", "", "idem-va-1", &a);
    issue(s, "va-idem-1", "", "idem-va-1", &b);
    assert_status(&a, 200);
    ck_assert(same_bytes(&a, &b));
    ck_assert_uint_eq(ledger_size(s), 1);
    issue(s, "va-idem-1", "", "idem-va-2", &c);
    assert_error(&c, 400, "DUPLICATED_ORDER_ID");
    ck_assert_uint_eq(ledger_size(s), 1);
    fg_response_fini(&a), fg_response_fini(&b), fg_response_fini(&c);
    stop_server(s);
}
END_TEST

/* ---- the bank ----------------------------------------------------------------------------- */

START_TEST(test_deposit_sends_both_events_with_the_secret_and_a_new_transaction_key)
{
    struct receiver *rx = rx_200();
    fg_server *s = start_rx(rx);
    char *pk = issue_ok(s, "va-dep-1", "");
    json_t *b[3];
    received(rx, 1, b);
    ck_assert_ptr_nonnull(status_changed(b, 1, "WAITING_FOR_DEPOSIT"));
    free_all(b, 1);
    /* A wrong amount changes nothing. */
    fg_response r;
    bank(s, "deposit", "{\"orderId\":\"va-dep-1\",\"amount\":9999}", &r);
    assert_error(&r, 400, "INVALID_REQUEST");
    fg_response_fini(&r);
    json_t *p = payment(s, "va-dep-1");
    ck_assert_str_eq(json_str(p, "status"), "WAITING_FOR_DEPOSIT");
    ck_assert(json_is_null(json_object_get(p, "lastTransactionKey")));
    /* The exact amount, by account number. */
    char body[160];
    snprintf(body, sizeof body, "{\"accountNumber\":\"%s\",\"amount\":10000}",
             va_str(p, "accountNumber"));
    const char *secret = json_str(p, "secret");
    bank(s, "deposit", body, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    json_t *after = payment(s, "va-dep-1");
    ck_assert_str_eq(json_str(after, "status"), "DONE");
    ck_assert(matches(KST_RE, json_str(after, "approvedAt")));
    const char *tx = json_str(after, "lastTransactionKey");
    ck_assert_uint_eq(strlen(tx), 32);
    received(rx, 3, b);
    json_t *cb = callback(b, 3, "DONE");
    ck_assert_msg(cb != NULL, "no DEPOSIT_CALLBACK DONE");
    ck_assert_str_eq(json_str(cb, "secret"), secret);
    ck_assert_str_eq(json_str(cb, "transactionKey"), tx);
    ck_assert_str_eq(json_str(cb, "orderId"), "va-dep-1");
    ck_assert_ptr_null(json_object_get(cb, "paymentKey"));
    ck_assert(matches("^[0-9-]{10}T[0-9:]{8}(\\.[0-9]{1,6})?$", json_str(cb, "createdAt")));
    json_t *ch = status_changed(b, 3, "DONE");
    ck_assert_msg(ch != NULL, "no PAYMENT_STATUS_CHANGED DONE");
    ck_assert_str_eq(json_str(json_object_get(ch, "data"), "lastTransactionKey"), tx);
    free_all(b, 3);
    /* One transaction row: the deposit. */
    char path[256], from[32], to[32];
    kst_in_days(-1, from);
    kst_in_days(2, to);
    snprintf(path, sizeof path, "/v1/transactions?startDate=%s&endDate=%s", from, to);
    fg_get(s, path, &r);
    assert_status(&r, 200);
    ck_assert_uint_eq(json_array_size(r.json), 1);
    ck_assert_str_eq(json_str(json_array_get(r.json, 0), "transactionKey"), tx);
    ck_assert_str_eq(json_str(json_array_get(r.json, 0), "method"), "가상계좌");
    fg_response_fini(&r);
    /* A second deposit is refused. */
    bank(s, "deposit", "{\"orderId\":\"va-dep-1\",\"amount\":10000}", &r);
    assert_error(&r, 400, "INVALID_REQUEST");
    fg_response_fini(&r);
    json_decref(p), json_decref(after);
    free(pk);
    stop_server(s);
    receiver_stop(rx);
}
END_TEST

START_TEST(test_deposit_error_returns_to_waiting_with_both_events)
{
    struct receiver *rx = rx_200();
    fg_server *s = start_rx(rx);
    char *pk = issue_ok(s, "va-err-1", "");
    fg_response r;
    bank(s, "deposit-error", "{\"orderId\":\"va-err-1\"}", &r); /* nothing to undo yet */
    assert_error(&r, 400, "INVALID_REQUEST");
    fg_response_fini(&r);
    deposit_ok(s, "va-err-1", 10000);
    json_t *done = payment(s, "va-err-1");
    bank(s, "deposit-error", "{\"orderId\":\"va-err-1\"}", &r);
    assert_status(&r, 200);
    ck_assert_str_eq(json_str(r.json, "status"), "WAITING_FOR_DEPOSIT");
    fg_response_fini(&r);
    json_t *b[5];
    received(rx, 5, b);
    json_t *cb = callback(b, 5, "WAITING_FOR_DEPOSIT");
    ck_assert_msg(cb != NULL, "no DEPOSIT_CALLBACK WAITING_FOR_DEPOSIT");
    ck_assert_str_eq(json_str(cb, "secret"), json_str(done, "secret"));
    ck_assert_uint_eq(strlen(json_str(cb, "transactionKey")), 32);
    ck_assert_str_ne(json_str(cb, "transactionKey"), json_str(done, "lastTransactionKey"));
    ck_assert_ptr_nonnull(callback(b, 5, "DONE"));
    /* Two PAYMENT_STATUS_CHANGED WAITING_FOR_DEPOSIT: the issue and the deposit error. */
    size_t waiting = 0;
    for (size_t i = 0; i < 5; i++)
        waiting += json_is_str(json_object_get(b[i], "data"), "status", "WAITING_FOR_DEPOSIT");
    ck_assert_uint_eq(waiting, 2);
    free_all(b, 5);
    /* It can be deposited again. */
    deposit_ok(s, "va-err-1", 10000);
    json_decref(done);
    free(pk);
    stop_server(s);
    receiver_stop(rx);
}
END_TEST

START_TEST(test_due_date_passing_expires_with_only_payment_status_changed)
{
    struct receiver *rx = rx_200();
    fg_server *s = start_rx(rx);
    char *pk = issue_ok(s, "va-exp-1", ",\"validHours\":1");
    json_t *b[2];
    received(rx, 1, b);
    free_all(b, 1);
    advance(s, 3601);
    json_t *p = payment(s, "va-exp-1");
    ck_assert_str_eq(json_str(p, "status"), "EXPIRED");
    ck_assert(json_is_true(json_object_get(json_object_get(p, "virtualAccount"), "expired")));
    received(rx, 2, b);
    ck_assert_ptr_nonnull(status_changed(b, 2, "EXPIRED"));
    free_all(b, 2);
    fg_response r;
    bank(s, "deposit", "{\"orderId\":\"va-exp-1\",\"amount\":10000}", &r);
    assert_error(&r, 400, "INVALID_REQUEST");
    fg_response_fini(&r);
    /* Nothing more than the two PAYMENT_STATUS_CHANGED: no DEPOSIT_CALLBACK for an expiry. */
    ck_assert_uint_eq(receiver_wait(rx, 3, 1500), 2);
    json_decref(p);
    free(pk);
    stop_server(s);
    receiver_stop(rx);
}
END_TEST

/* ---- cancel ------------------------------------------------------------------------------- */

START_TEST(test_cancel_before_the_deposit_is_whole_only)
{
    struct receiver *rx = rx_200();
    fg_server *s = start_rx(rx);
    char *pk = issue_ok(s, "va-can-1", "");
    fg_response r;
    cancel(s, pk, ",\"cancelAmount\":5000", &r);
    assert_error(&r, 403, "NOT_ALLOWED_PARTIAL_REFUND_WAITING_DEPOSIT");
    fg_response_fini(&r);
    json_t *p = payment(s, "va-can-1");
    ck_assert_str_eq(json_str(p, "status"), "WAITING_FOR_DEPOSIT");
    json_decref(p);
    cancel(s, pk, "", &r);
    assert_status(&r, 200);
    ck_assert_str_eq(json_str(r.json, "status"), "CANCELED");
    fg_response_fini(&r);
    json_t *b[3];
    received(rx, 3, b);
    ck_assert_ptr_nonnull(callback(b, 3, "CANCELED"));
    ck_assert_ptr_nonnull(status_changed(b, 3, "CANCELED"));
    free_all(b, 3);
    bank(s, "deposit", "{\"orderId\":\"va-can-1\",\"amount\":10000}", &r);
    assert_error(&r, 400, "INVALID_REQUEST");
    fg_response_fini(&r);
    free(pk);
    stop_server(s);
    receiver_stop(rx);
}
END_TEST

START_TEST(test_cancel_after_the_deposit_needs_a_refund_account)
{
    fg_server *s = start_args(NULL, NULL);
    char *pk = issue_ok(s, "va-ref-1", "");
    deposit_ok(s, "va-ref-1", 10000);
    fg_response r;
    cancel(s, pk, "", &r);
    assert_error(&r, 400, "INVALID_REFUND_ACCOUNT_INFO");
    fg_response_fini(&r);
    cancel(s, pk, ",\"refundReceiveAccount\":{\"bank\":\"88\",\"accountNumber\":\"12\"}", &r);
    assert_error(&r, 400, "INVALID_REFUND_ACCOUNT_INFO");
    fg_response_fini(&r);
    json_t *p = payment(s, "va-ref-1");
    ck_assert_str_eq(json_str(p, "status"), "DONE");
    ck_assert_int_eq(json_int(p, "balanceAmount"), 10000);
    json_decref(p);
    cancel(s, pk,
           ",\"cancelAmount\":4000,\"refundReceiveAccount\":{\"bank\":\"20\","
           "\"accountNumber\":\"1002123456789\",\"holderName\":\"홍길동\"}",
           &r);
    assert_status(&r, 200);
    ck_assert_str_eq(json_str(r.json, "status"), "PARTIAL_CANCELED");
    ck_assert_int_eq(json_int(r.json, "balanceAmount"), 6000);
    json_t *acct = json_object_get(json_object_get(r.json, "virtualAccount"),
                                   "refundReceiveAccount");
    ck_assert_str_eq(json_str(acct, "bankCode"), "20");
    ck_assert_str_eq(json_str(acct, "holderName"), "홍길동");
    fg_response_fini(&r);
    /* Transactions: the deposit and the refund. */
    char path[256], from[32], to[32];
    kst_in_days(-1, from);
    kst_in_days(2, to);
    snprintf(path, sizeof path, "/v1/transactions?startDate=%s&endDate=%s", from, to);
    fg_get(s, path, &r);
    assert_status(&r, 200);
    ck_assert_uint_eq(json_array_size(r.json), 2);
    ck_assert_str_eq(json_str(json_array_get(r.json, 0), "status"), "DONE");
    ck_assert_str_eq(json_str(json_array_get(r.json, 1), "status"), "PARTIAL_CANCELED");
    fg_response_fini(&r);
    free(pk);
    stop_server(s);
}
END_TEST

/* ---- the reference deposit handler (client-tests/deposit.h) -------------------------------- */

/* "http://127.0.0.1:PORT" of s into out. */
static const char *base_of(const fg_server *s, char out[64])
{
    snprintf(out, 64, "http://127.0.0.1:%d", s->port);
    return out;
}

/* Issue an account as orderId `oid` (with `extra` members) and store it in the handler's book. */
static void book_issue(const fg_server *s, dep_handler *d, const char *oid, const char *extra)
{
    fg_response r;
    issue(s, oid, extra, NULL, &r);
    assert_status(&r, 200);
    ck_assert_int_eq(dep_book_add(d, r.body), 0);
    fg_response_fini(&r);
}

/* Deliveries in the journal that are originals (not a duplicate fault's copy). */
static size_t originals(const fg_server *s)
{
    json_t *j = admin_json(s, "/__admin/webhooks/deliveries?limit=10000");
    json_t *all = json_object_get(j, "deliveries"), *d;
    size_t i, n = 0;
    json_array_foreach(all, i, d) n += json_is_null(json_object_get(d, "duplicate_of"));
    json_decref(j);
    return n;
}

/* Wait (bounded) until `events` events have their deliveries filed (one receiver: one original
 * each) and none is pending: every one delivered, failed or dropped. */
static void wait_settled(const fg_server *s, size_t events)
{
    double pending = -1;
    size_t filed = 0;
    for (int i = 0; i < WAIT_MS / 10; i++) {
        if ((filed = originals(s)) >= events &&
            (pending = metric1(s, "fakegate_webhook_pending", NULL, NULL)) == 0)
            return;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    ck_abort_msg("after %d ms: %zu of %zu events filed, %g deliveries pending", WAIT_MS, filed,
                 events, pending);
}

/* Feed the handler every request rx has received, in arrival order; returns how many. */
static size_t feed(struct receiver *rx, dep_handler *d)
{
    size_t n = receiver_count(rx);
    for (size_t i = 0; i < n; i++) {
        struct rx_request q;
        ck_assert(receiver_get(rx, i, &q));
        ck_assert_int_eq(dep_on_webhook(d, &q), 200);
    }
    return n;
}

/* The handler's view of every order equals the gateway's, and the side effect ran once per
 * deposit that stands. */
static void assert_book_agrees(const fg_server *s, const dep_handler *d)
{
    for (size_t i = 0; i < d->n; i++) {
        const dep_order *o = &d->orders[i];
        json_t *p = payment(s, o->order_id);
        ck_assert_msg(strcmp(o->status, json_str(p, "status")) == 0, "%s: handler %s, gateway %s",
                      o->order_id, o->status, json_str(p, "status"));
        ck_assert_int_eq(o->shipped, strcmp(o->status, "DONE") == 0);
        ck_assert_int_eq(o->shipments - o->reversals, o->shipped);
        json_decref(p);
    }
}

static long journal_count(const fg_server *s, const char *query)
{
    char path[160];
    snprintf(path, sizeof path, "/__admin/webhooks/deliveries?limit=10000%s", query);
    json_t *j = admin_json(s, path);
    long n = (long)json_array_size(json_object_get(j, "deliveries"));
    json_decref(j);
    return n;
}

/* Twelve accounts under duplicate, delay and drop faults (seeded): eight deposits, two of them
 * reversed by a deposit error and one of those deposited again, one cancel before the deposit.
 * The handler ends agreeing with the ledger, ships each standing deposit once, ignores every
 * duplicate by its transmission id, and the reconciler finds what the drops hid. */
START_TEST(test_deposit_handler_under_duplicate_delay_and_drop)
{
    struct receiver *rx = rx_200();
    char *profile = dq("{'name':'va_faults','routes':{'default':{'latency':{'dist':'fixed','ms':0}}},"
                       "'webhooks':{'delay':{'dist':'uniform','min_ms':0,'max_ms':150},"
                       "'duplicate':{'p':0.3,'after':{'dist':'fixed','ms':40}},"
                       "'drop':{'p':0.25}}}");
    const char *args[] = {"--webhook-url", receiver_url(rx), "--seed", "11", NULL};
    fg_server *s = start_args(profile, args);
    dep_handler d;
    char base[64];
    ck_assert_int_eq(dep_init(&d, base_of(s, base), s->auth_header), 0);
    char oid[12][32];
    for (int i = 0; i < 12; i++) {
        snprintf(oid[i], sizeof oid[i], "va-hf-%02d", i);
        book_issue(s, &d, oid[i], "");
    }
    for (int i = 0; i < 8; i++)
        deposit_ok(s, oid[i], 10000);
    for (int i = 0; i < 2; i++) {
        char body[512];
        snprintf(body, sizeof body, "{\"orderId\":\"%s\"}", oid[i]);
        fg_response r;
        bank(s, "deposit-error", body, &r);
        assert_status(&r, 200);
        fg_response_fini(&r);
    }
    deposit_ok(s, oid[0], 10000);
    fg_response r;
    cancel(s, d.orders[11].payment_key, "", &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    /* 12 issues, 9 deposits and 2 deposit errors (two events each), a cancel (two) */
    wait_settled(s, 12 + 9 * 2 + 2 * 2 + 2);
    long dropped = journal_count(s, "&status=dropped");
    long delivered = journal_count(s, "&status=delivered");
    size_t got = feed(rx, &d);
    ck_assert_uint_eq(got, (size_t)delivered);
    /* The faults did fire: there is something to handle. */
    ck_assert_int_gt(dropped, 0);
    ck_assert_int_gt(d.duplicates_ignored, 0);
    ck_assert_int_eq(d.forged, 0);
    ck_assert_int_eq(d.read_failures, 0);
    ck_assert_int_eq(dep_reconcile(&d), 0);
    assert_book_agrees(s, &d);
    ck_assert_str_eq(dep_order_of(&d, oid[0])->status, "DONE");
    ck_assert_int_eq(dep_order_of(&d, oid[1])->shipped, false);
    ck_assert_str_eq(dep_order_of(&d, oid[11])->status, "CANCELED");
    for (int i = 2; i < 8; i++)
        ck_assert_int_eq(dep_order_of(&d, oid[i])->shipments, 1);
    fprintf(stderr, "check_virtual_accounts: handler: %zu deliveries received (%ld dropped), "
            "%ld duplicates ignored, %ld callbacks trusted, %ld read-backs\n",
            got, dropped, d.duplicates_ignored, d.callbacks, d.read_backs);
    dep_fini(&d);
    stop_server(s);
    receiver_stop(rx);
    free(profile);
}
END_TEST

/* A due date passing sends PAYMENT_STATUS_CHANGED only: a handler that listened for
 * DEPOSIT_CALLBACK alone would never close the order; this one reads it back, and with every
 * delivery dropped the reconciler alone still finds it EXPIRED (and the deposit DONE). */
START_TEST(test_deposit_handler_sees_a_due_date_pass)
{
    for (int drop_all = 0; drop_all < 2; drop_all++) {
        struct receiver *rx = rx_200();
        char *profile = dq(drop_all ? "{'name':'va_drop','routes':{},'webhooks':{'drop':{'p':1}}}"
                                    : "{'name':'va_plain','routes':{}}");
        const char *args[] = {"--webhook-url", receiver_url(rx), NULL};
        fg_server *s = start_args(profile, args);
        dep_handler d;
        char base[64];
        ck_assert_int_eq(dep_init(&d, base_of(s, base), s->auth_header), 0);
        book_issue(s, &d, "va-due-1", ",\"validHours\":1");
        book_issue(s, &d, "va-due-2", ",\"validHours\":1");
        deposit_ok(s, "va-due-2", 10000);
        advance(s, 2 * 3600);
        json_t *p = payment(s, "va-due-1");
        ck_assert_str_eq(json_str(p, "status"), "EXPIRED");
        json_decref(p);
        wait_settled(s, 5); /* two issues, the deposit's two events, the expiry's one */
        feed(rx, &d);
        if (drop_all) {
            ck_assert_uint_eq(receiver_count(rx), 0);
            ck_assert_str_eq(dep_order_of(&d, "va-due-1")->status, "WAITING_FOR_DEPOSIT");
        } else {
            ck_assert_uint_eq(receiver_count(rx), 5); /* and no DEPOSIT_CALLBACK EXPIRED */
            ck_assert_int_eq(d.callbacks, 1);
            ck_assert_str_eq(dep_order_of(&d, "va-due-1")->status, "EXPIRED");
        }
        ck_assert_int_eq(dep_reconcile(&d), 0);
        ck_assert_str_eq(dep_order_of(&d, "va-due-1")->status, "EXPIRED");
        ck_assert_int_eq(dep_order_of(&d, "va-due-1")->shipments, 0);
        ck_assert_str_eq(dep_order_of(&d, "va-due-2")->status, "DONE");
        ck_assert_int_eq(dep_order_of(&d, "va-due-2")->shipments, 1);
        ck_assert_int_eq(dep_order_of(&d, "va-due-1")->polled, drop_all);
        assert_book_agrees(s, &d);
        dep_fini(&d);
        stop_server(s);
        receiver_stop(rx);
        free(profile);
    }
}
END_TEST

/* A callback with the wrong secret is refused without a read; one with the right secret that
 * claims DONE before any deposit is read back and changes nothing: the body is never trusted. */
START_TEST(test_deposit_handler_trusts_only_the_secret_and_the_read)
{
    fg_server *s = start_args(NULL, NULL);
    dep_handler d;
    char base[64];
    ck_assert_int_eq(dep_init(&d, base_of(s, base), s->auth_header), 0);
    book_issue(s, &d, "va-forge-1", "");
    char body[256];
    struct rx_request q = {.transmission_id = "whtrans_forged0000000000000000000", .body = body};
    snprintf(body, sizeof body, "{\"createdAt\":\"2024-02-13T12:18:07\",\"secret\":\"ps_%s\","
             "\"status\":\"DONE\",\"transactionKey\":null,\"orderId\":\"va-forge-1\"}",
             "notTheSecret000000000000");
    q.body_len = strlen(body);
    ck_assert_int_eq(dep_on_webhook(&d, &q), 200);
    ck_assert_int_eq(d.forged, 1);
    ck_assert_int_eq(d.read_backs, 0);
    snprintf(body, sizeof body, "{\"createdAt\":\"2024-02-13T12:18:07\",\"secret\":\"%s\","
             "\"status\":\"DONE\",\"transactionKey\":null,\"orderId\":\"va-forge-1\"}",
             dep_order_of(&d, "va-forge-1")->secret);
    q.body_len = strlen(body);
    q.transmission_id = "whtrans_replayed000000000000000000";
    ck_assert_int_eq(dep_on_webhook(&d, &q), 200);
    ck_assert_int_eq(d.callbacks, 1);
    ck_assert_int_eq(d.read_backs, 1);
    ck_assert_str_eq(dep_order_of(&d, "va-forge-1")->status, "WAITING_FOR_DEPOSIT");
    ck_assert_int_eq(dep_order_of(&d, "va-forge-1")->shipments, 0);
    /* An order the book does not have is forged too. */
    snprintf(body, sizeof body, "{\"secret\":\"x\",\"status\":\"DONE\",\"orderId\":\"va-other\"}");
    q.transmission_id = "whtrans_unknown0000000000000000000";
    ck_assert_int_eq(dep_on_webhook(&d, &q), 200);
    ck_assert_int_eq(d.forged, 2);
    dep_fini(&d);
    stop_server(s);
}
END_TEST

/* The simulated bank acts on the tenant X-Fakegate-Tenant names (docs/tenants.md §9): another
 * tenant's deposit does not find the account, and nothing changes. */
START_TEST(test_deposit_is_scoped_to_its_tenant)
{
    fg_server *s = start_args(NULL, NULL);
    char auth[320];
    fg_basic_auth("test_sk_va_b:", auth, sizeof auth);
    const char *headers[] = {auth, NULL};
    fg_request req = {.method = "POST", .path = VA_PATH, .headers = headers,
                      .body = "{\"amount\":10000,\"orderId\":\"va-ten-1\",\"orderName\":\"n\","
                              "\"customerName\":\"c\",\"bank\":\"88\"}"};
    fg_response r;
    fg_http(s, NULL, &req, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    /* Tenant a exists once its key has made a request (a read of an unknown payment). */
    char auth_a[320];
    fg_basic_auth("test_sk_va_a:", auth_a, sizeof auth_a);
    const char *headers_a[] = {auth_a, NULL};
    fg_request read_a = {.method = "GET", .path = "/v1/payments/orders/va-ten-1",
                         .headers = headers_a};
    fg_http(s, NULL, &read_a, &r);
    assert_error(&r, 404, "NOT_FOUND_PAYMENT");
    fg_response_fini(&r);
    const char *body = "{\"orderId\":\"va-ten-1\",\"amount\":10000}";
    admin_call(s, "POST", "/__admin/virtual-accounts/deposit", body,
               "X-Fakegate-Tenant: test_sk_va_a", &r);
    assert_error(&r, 404, "NOT_FOUND_PAYMENT");
    fg_response_fini(&r);
    fg_request get = {.method = "GET", .path = "/v1/payments/orders/va-ten-1", .headers = headers};
    fg_http(s, NULL, &get, &r);
    ck_assert_str_eq(json_str(r.json, "status"), "WAITING_FOR_DEPOSIT");
    fg_response_fini(&r);
    admin_call(s, "POST", "/__admin/virtual-accounts/deposit", body,
               "X-Fakegate-Tenant: test_sk_va_b", &r);
    assert_status(&r, 200);
    ck_assert_str_eq(json_str(r.json, "status"), "DONE");
    fg_response_fini(&r);
    /* Without the header: the default tenant, which b's key adopted by coming first. */
    admin_call(s, "POST", "/__admin/virtual-accounts/deposit", body, NULL, &r);
    assert_error(&r, 400, "INVALID_REQUEST"); /* b's account, already deposited */
    fg_response_fini(&r);
    stop_server(s);
}
END_TEST

Suite *make_suite(void)
{
    Suite *su = suite_create("virtual_accounts");
    TCase *tc = add_tcase(su, "issue", 30);
    tcase_add_test(tc, test_issue_answers_waiting_for_deposit_with_its_virtual_account);
    tcase_add_test(tc, test_issue_errors_are_toss_codes_and_change_nothing);
    tcase_add_test(tc, test_issue_replays_under_its_idempotency_key_and_orders_are_unique);
    tcase_add_test(tc, test_issue_follows_the_virtual_account_route);
    tc = add_tcase(su, "bank", 30);
    tcase_add_test(tc, test_deposit_sends_both_events_with_the_secret_and_a_new_transaction_key);
    tcase_add_test(tc, test_deposit_error_returns_to_waiting_with_both_events);
    tcase_add_test(tc, test_due_date_passing_expires_with_only_payment_status_changed);
    tc = add_tcase(su, "cancel", 30);
    tcase_add_test(tc, test_cancel_before_the_deposit_is_whole_only);
    tcase_add_test(tc, test_cancel_after_the_deposit_needs_a_refund_account);
    tcase_add_test(tc, test_deposit_is_scoped_to_its_tenant);
    tc = add_tcase(su, "reference deposit handler", 60);
    tcase_add_test(tc, test_deposit_handler_under_duplicate_delay_and_drop);
    tcase_add_test(tc, test_deposit_handler_sees_a_due_date_pass);
    tcase_add_test(tc, test_deposit_handler_trusts_only_the_secret_and_the_read);
    return su;
}
