/* check_ledger_api.c -- black-box tests of fakegate's ledger routes: cancel (docs/api.md §2.2,
 * docs/edge-rules.md §7 "Cancel"), transactions (§2.2, §7 "Transactions"), registered payment
 * sessions (§2.1), test codes (§2.5) and paths with hidden bytes (§7 "Bytes on the wire"). Each
 * test starts its own server on port 0 through the harness. Waits poll a condition with a bound;
 * the only timed waits are where a time window is the behaviour under test. */
#define _GNU_SOURCE

#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check_main.h"
#include "testkit.h"

#define MS_NS INT64_C(1000000)

#define ARGS_NO_WINDOW ((const char *const[]){"--consecutive-cancel-ms", "0", NULL})

/* Cancel held `ms` in its processing latency; everything else instant. */
#define PROFILE_CANCEL_MS(ms)                                                                  \
    "{\"name\":\"cancel_held\",\"routes\":{\"cancel\":{\"latency\":{\"dist\":\"fixed\",\"ms\":" \
    #ms "}},\"default\":{\"latency\":{\"dist\":\"fixed\",\"ms\":0}}}}"

#define TS_RE "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\+09:00$"
#define TX_KEY_RE "^[0-9A-F]{32}$"
#define REASON_KO "고객 변심으로 인한 취소"

/* ---- helpers ------------------------------------------------------------------------------ */

static double elapsed_ms(const fg_response *r)
{
    return (double)(r->done_ns - r->sent_ns) / 1e6;
}

/* POST `body` to `path` with the server's auth, an optional Idempotency-Key and one optional
 * extra header line. */
static void post(const fg_server *s, const char *path, const char *body, const char *idem_key,
                 const char *extra, fg_response *r)
{
    char idem[400];
    const char *headers[4];
    size_t n = 0;
    headers[n++] = s->auth_header;
    if (idem_key != NULL) {
        snprintf(idem, sizeof idem, "Idempotency-Key: %s", idem_key);
        headers[n++] = idem;
    }
    if (extra != NULL)
        headers[n++] = extra;
    headers[n] = NULL;
    fg_request req = {.method = "POST", .path = path, .body = body, .headers = headers};
    fg_http(s, NULL, &req, r);
}

/* POST /v1/payments/{pk}/cancel with `body`. */
static void cancel_raw(const fg_server *s, const char *pk, const char *body, const char *idem_key,
                       const char *extra, fg_response *r)
{
    char path[FG_PATH_LEN];
    snprintf(path, sizeof path, "/v1/payments/%s/cancel", pk);
    post(s, path, body, idem_key, extra, r);
}

/* Cancel `amount` (0: no cancelAmount, the rest) with REASON_KO. */
static void cancel(const fg_server *s, const char *pk, long long amount, const char *idem_key,
                   fg_response *r)
{
    char body[256];
    if (amount > 0)
        snprintf(body, sizeof body, "{\"cancelReason\":\"%s\",\"cancelAmount\":%lld}", REASON_KO,
                 amount);
    else
        snprintf(body, sizeof body, "{\"cancelReason\":\"%s\"}", REASON_KO);
    cancel_raw(s, pk, body, idem_key, NULL, r);
}

/* Confirm and require 200 DONE. Returns the approval's transaction key in `tx` (33 bytes). */
static void confirm_ok(const fg_server *s, const char *pk, const char *oid, long long amount,
                       char tx[33])
{
    fg_response r;
    fg_confirm(s, pk, oid, amount, NULL, &r);
    assert_status(&r, 200);
    ck_assert_str_eq(json_str(r.json, "status"), "DONE");
    ck_assert_int_eq(json_int(r.json, "balanceAmount"), amount);
    const char *k = json_str(r.json, "lastTransactionKey");
    ck_assert_msg(matches(TX_KEY_RE, k), "approval transactionKey \"%s\"", k);
    if (tx != NULL)
        snprintf(tx, 33, "%s", k);
    fg_response_fini(&r);
}

static void get_payment(const fg_server *s, const char *pk, fg_response *r)
{
    char path[FG_PATH_LEN];
    snprintf(path, sizeof path, "/v1/payments/%s", pk);
    fg_get(s, path, r);
}

/* GET the payment and require this status, balance and number of cancels. */
#define assert_payment(s, pk, st, bal, nc) assert_payment_at(__LINE__, (s), (pk), (st), (bal), (nc))

static void assert_payment_at(int line, const fg_server *s, const char *pk, const char *status,
                              long long balance, size_t n_cancels)
{
    fg_response r;
    get_payment(s, pk, &r);
    ck_assert_msg(r.status == 200, "line %d: GET %s: %ld %.400s", line, pk, r.status, r.body);
    const char *st = fg_json_str(r.json, "status");
    const json_t *bal = json_object_get(r.json, "balanceAmount");
    const json_t *c = json_object_get(r.json, "cancels");
    size_t nc = json_is_array(c) ? json_array_size(c) : 0;
    ck_assert_msg(st != NULL && strcmp(st, status) == 0 && json_is_integer(bal) &&
                      json_integer_value(bal) == balance && nc == n_cancels &&
                      (n_cancels > 0 || json_is_null(c)),
                  "line %d: want %s balance %lld with %zu cancels, got %.1500s", line, status,
                  balance, n_cancels, r.body);
    fg_response_fini(&r);
}

/* balanceAmount, vat = round(balance/11) and suppliedAmount = balance - vat (docs/edge-rules.md
 * §7). */
static void assert_amounts(const json_t *p, long long total, long long balance)
{
    long long vat = llround((double)balance / 11.0);
    ck_assert_int_eq(json_int(p, "totalAmount"), total);
    ck_assert_int_eq(json_int(p, "balanceAmount"), balance);
    ck_assert_int_eq(json_int(p, "vat"), vat);
    ck_assert_int_eq(json_int(p, "suppliedAmount"), balance - vat);
}

/* POST /__admin/sessions with `body` (no auth: the admin routes have none without a token). */
static void register_session(const fg_server *s, const char *body, fg_response *r)
{
    fg_request req = {.method = "POST", .path = "/__admin/sessions", .body = body};
    fg_http(s, NULL, &req, r);
}

/* Korea time now + offset_s as yyyy-MM-ddTHH:mm:ss. */
static void kst_now(long offset_s, char out[32])
{
    /* The server's clock (CLOCK_REALTIME): time() reads the kernel's coarse clock, which can
     * still show the previous second for a few ms after the server has moved on. */
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    time_t t = now.tv_sec + 9 * 3600 + offset_s;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
}

/* A transactionAt "yyyy-MM-ddTHH:mm:ss+09:00" moved by delta_s, without the offset. */
static void shift_ts(const char *ts, long delta_s, char out[32])
{
    struct tm tm = {0};
    int n = sscanf(ts, "%4d-%2d-%2dT%2d:%2d:%2d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                   &tm.tm_hour, &tm.tm_min, &tm.tm_sec);
    ck_assert_int_eq(n, 6);
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    time_t t = timegm(&tm) + delta_s;
    gmtime_r(&t, &tm);
    strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
}

/* GET /v1/transactions?<query>. */
static void transactions(const fg_server *s, const char *query, fg_response *r)
{
    char path[FG_PATH_LEN];
    ck_assert_msg(strlen(query) < 400, "query too long");
    snprintf(path, sizeof path, "/v1/transactions?%.400s", query);
    fg_get(s, path, r);
}

/* GET transactions over [now-1d, now+1d] (plus `more`, may be ""), require 200 and an array.
 * Returns a new reference. */
static json_t *all_transactions(const fg_server *s, const char *more)
{
    char from[32], to[32], q[FG_PATH_LEN];
    kst_now(-86400, from);
    kst_now(86400, to);
    snprintf(q, sizeof q, "startDate=%s&endDate=%s%s", from, to, more);
    fg_response r;
    transactions(s, q, &r);
    assert_status(&r, 200);
    ck_assert_msg(json_is_array(r.json), "transactions is not an array: %.400s", r.body);
    json_t *a = json_incref(r.json);
    fg_response_fini(&r);
    return a;
}

/* A cancel request sent from its own thread. */
struct bg_cancel {
    const fg_server *s;
    const char *pk, *key;
    long long amount;
    fg_response r;
    pthread_t thread;
};

static void *bg_cancel_main(void *arg)
{
    struct bg_cancel *b = arg;
    cancel(b->s, b->pk, b->amount, b->key, &b->r);
    return NULL;
}

static void bg_start(struct bg_cancel *b, const fg_server *s, const char *pk, long long amount,
                     const char *key)
{
    b->s = s;
    b->pk = pk;
    b->amount = amount;
    b->key = key;
    ck_assert_int_eq(pthread_create(&b->thread, NULL, bg_cancel_main, b), 0);
}

static void bg_join(struct bg_cancel *b)
{
    ck_assert_int_eq(pthread_join(b->thread, NULL), 0);
}

/* ---- cancel ------------------------------------------------------------------------------- */

START_TEST(test_full_cancel_returns_canceled_payment_with_one_cancel)
{
    fg_server *s = start_args(NULL, ARGS_NO_WINDOW);
    char approval_tx[33];
    confirm_ok(s, "pk_full_1", "order_full_1", 15000, approval_tx);

    fg_response r;
    cancel(s, "pk_full_1", 0, NULL, &r);
    assert_status(&r, 200);
    const json_t *p = r.json;
    ck_assert_str_eq(json_str(p, "paymentKey"), "pk_full_1");
    ck_assert_str_eq(json_str(p, "orderId"), "order_full_1");
    ck_assert_str_eq(json_str(p, "status"), "CANCELED");
    assert_amounts(p, 15000, 0);
    ck_assert_int_eq(json_int(p, "vat"), 0);
    ck_assert_int_eq(json_int(p, "suppliedAmount"), 0);
    const json_t *cs = json_object_get(p, "cancels");
    ck_assert_msg(json_is_array(cs) && json_array_size(cs) == 1, "cancels: %.600s", r.body);
    const json_t *c = json_array_get(cs, 0);
    ck_assert_int_eq(json_int(c, "cancelAmount"), 15000);
    ck_assert_int_eq(json_int(c, "refundableAmount"), 0);
    const char *tx = json_str(c, "transactionKey");
    ck_assert_msg(matches(TX_KEY_RE, tx), "cancel transactionKey \"%s\"", tx);
    ck_assert_str_ne(tx, approval_tx);
    ck_assert_str_eq(json_str(p, "lastTransactionKey"), tx);
    const char *at = json_str(c, "canceledAt");
    ck_assert_msg(matches(TS_RE, at), "canceledAt \"%s\"", at);
    ck_assert_str_eq(json_str(c, "cancelReason"), REASON_KO);
    fg_response_fini(&r);

    assert_payment(s, "pk_full_1", "CANCELED", 0, 1);
    stop_server(s);
}
END_TEST

START_TEST(test_two_partial_cancels_then_the_rest)
{
    fg_server *s = start_args(NULL, ARGS_NO_WINDOW);
    char approval_tx[33];
    confirm_ok(s, "pk_part_1", "order_part_1", 10000, approval_tx);
    static const struct {
        long long amount, cancel_amount, balance, vat, supplied;
        const char *status;
    } steps[] = {
        {3000, 3000, 7000, 636, 6364, "PARTIAL_CANCELED"},
        {2000, 2000, 5000, 455, 4545, "PARTIAL_CANCELED"},
        {0, 5000, 0, 0, 0, "CANCELED"},
    };
    char keys[3][33];
    for (size_t i = 0; i < 3; i++) {
        fg_response r;
        cancel(s, "pk_part_1", steps[i].amount, NULL, &r);
        assert_status(&r, 200);
        const json_t *p = r.json;
        ck_assert_str_eq(json_str(p, "status"), steps[i].status);
        ck_assert_int_eq(json_int(p, "totalAmount"), 10000);
        ck_assert_int_eq(json_int(p, "balanceAmount"), steps[i].balance);
        ck_assert_int_eq(json_int(p, "vat"), steps[i].vat);
        ck_assert_int_eq(json_int(p, "suppliedAmount"), steps[i].supplied);
        const json_t *cs = json_object_get(p, "cancels");
        ck_assert_msg(json_is_array(cs) && json_array_size(cs) == i + 1, "cancels: %.800s",
                      r.body);
        /* Earlier cancels unchanged, in order; the newest last. */
        for (size_t j = 0; j <= i; j++) {
            const json_t *c = json_array_get(cs, j);
            ck_assert_int_eq(json_int(c, "cancelAmount"), steps[j].cancel_amount);
            ck_assert_int_eq(json_int(c, "refundableAmount"), steps[j].balance);
            ck_assert_str_eq(json_str(c, "cancelReason"), REASON_KO);
            if (j < i)
                ck_assert_str_eq(json_str(c, "transactionKey"), keys[j]);
        }
        const char *tx = json_str(json_array_get(cs, i), "transactionKey");
        ck_assert_msg(matches(TX_KEY_RE, tx), "transactionKey \"%s\"", tx);
        ck_assert_str_ne(tx, approval_tx);
        for (size_t j = 0; j < i; j++)
            ck_assert_str_ne(tx, keys[j]);
        snprintf(keys[i], sizeof keys[i], "%s", tx);
        ck_assert_str_eq(json_str(p, "lastTransactionKey"), tx);
        fg_response_fini(&r);
    }
    assert_payment(s, "pk_part_1", "CANCELED", 0, 3);
    stop_server(s);
}
END_TEST

START_TEST(test_cancel_reason_of_200_korean_characters_is_accepted)
{
    fg_server *s = start_args(NULL, ARGS_NO_WINDOW);
    confirm_ok(s, "pk_reason200", "order_reason200", 5000, NULL);
    char reason[200 * 3 + 1] = "";
    for (int i = 0; i < 200; i++)
        strcat(reason, "가");
    char body[800];
    snprintf(body, sizeof body, "{\"cancelReason\":\"%s\"}", reason);
    fg_response r;
    cancel_raw(s, "pk_reason200", body, NULL, NULL, &r);
    assert_status(&r, 200);
    ck_assert_str_eq(json_str(json_array_get(json_object_get(r.json, "cancels"), 0),
                              "cancelReason"),
                     reason);
    fg_response_fini(&r);
    stop_server(s);
}
END_TEST

/* Each error with its status and code; none changes the payment. */
START_TEST(test_cancel_errors_leave_the_payment_unchanged)
{
    fg_server *s = start_args(NULL, ARGS_NO_WINDOW);
    confirm_ok(s, "pk_cerr_1", "order_cerr_1", 10000, NULL);
    fg_response r;

    /* Unknown payment. */
    cancel(s, "pk_cerr_nobody", 1000, NULL, &r);
    assert_error(&r, 404, "NOT_FOUND_PAYMENT");
    fg_response_fini(&r);

    /* A canceled payment. */
    confirm_ok(s, "pk_cerr_2", "order_cerr_2", 3000, NULL);
    cancel(s, "pk_cerr_2", 0, NULL, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    cancel(s, "pk_cerr_2", 0, NULL, &r);
    assert_error(&r, 400, "ALREADY_CANCELED_PAYMENT");
    fg_response_fini(&r);
    cancel(s, "pk_cerr_2", 1000, NULL, &r);
    assert_error(&r, 400, "ALREADY_CANCELED_PAYMENT");
    fg_response_fini(&r);
    assert_payment(s, "pk_cerr_2", "CANCELED", 0, 1);

    /* A registered session never confirmed: IN_PROGRESS. */
    register_session(s, "{\"orderId\":\"order_cerr_3\",\"amount\":4000,\"paymentKey\":\"pk_cerr_3\"}",
                     &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    cancel(s, "pk_cerr_3", 0, NULL, &r);
    assert_error(&r, 403, "NOT_CANCELABLE_PAYMENT");
    fg_response_fini(&r);
    cancel(s, "pk_cerr_3", 1000, NULL, &r);
    assert_error(&r, 403, "NOT_CANCELABLE_PAYMENT");
    fg_response_fini(&r);
    assert_payment(s, "pk_cerr_3", "IN_PROGRESS", 4000, 0);

    /* Amount errors on a DONE payment, then on a PARTIAL_CANCELED one. */
    static const struct {
        const char *what, *body, *code, *field;
        long status;
    } cases[] = {
        {"cancelAmount > balance", "{\"cancelReason\":\"r\",\"cancelAmount\":10001}",
         "NOT_CANCELABLE_AMOUNT", NULL, 403},
        {"refundableAmount below balance",
         "{\"cancelReason\":\"r\",\"cancelAmount\":100,\"refundableAmount\":9999}",
         "NOT_MATCHES_REFUNDABLE_AMOUNT", NULL, 400},
        {"refundableAmount above balance", "{\"cancelReason\":\"r\",\"refundableAmount\":10001}",
         "NOT_MATCHES_REFUNDABLE_AMOUNT", NULL, 400},
        {"cancelReason missing", "{\"cancelAmount\":100}", "INVALID_REQUEST", "cancelReason", 400},
        {"cancelReason null", "{\"cancelReason\":null}", "INVALID_REQUEST", "cancelReason", 400},
        {"cancelReason of 201", "{\"cancelReason\":\"{R201}\",\"cancelAmount\":100}",
         "INVALID_REQUEST", "cancelReason", 400},
        {"cancelReason a number", "{\"cancelReason\":5}", "INVALID_REQUEST", "cancelReason", 400},
        {"cancelAmount 0", "{\"cancelReason\":\"r\",\"cancelAmount\":0}", "INVALID_REQUEST",
         "cancelAmount", 400},
        {"cancelAmount -1", "{\"cancelReason\":\"r\",\"cancelAmount\":-1}", "INVALID_REQUEST",
         "cancelAmount", 400},
        {"cancelAmount 1.5", "{\"cancelReason\":\"r\",\"cancelAmount\":1.5}", "INVALID_REQUEST",
         "cancelAmount", 400},
        {"cancelAmount 100.0", "{\"cancelReason\":\"r\",\"cancelAmount\":100.0}",
         "INVALID_REQUEST", "cancelAmount", 400},
        {"cancelAmount \"100\"", "{\"cancelReason\":\"r\",\"cancelAmount\":\"100\"}",
         "INVALID_REQUEST", "cancelAmount", 400},
        {"cancelAmount 2^53", "{\"cancelReason\":\"r\",\"cancelAmount\":9007199254740992}",
         "INVALID_REQUEST", "cancelAmount", 400},
        {"refundableAmount 0", "{\"cancelReason\":\"r\",\"refundableAmount\":0}",
         "INVALID_REQUEST", "refundableAmount", 400},
        {"malformed JSON", "{\"cancelReason\":\"r\",", "INVALID_REQUEST", NULL, 400},
    };
    char r201[202];
    memset(r201, 'r', 201);
    r201[201] = '\0';
    for (int round = 0; round < 2; round++) {
        long long balance = round == 0 ? 10000 : 7000;
        const char *status = round == 0 ? "DONE" : "PARTIAL_CANCELED";
        if (round == 1) {
            cancel(s, "pk_cerr_1", 3000, NULL, &r);
            assert_status(&r, 200);
            fg_response_fini(&r);
        }
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            char body[512];
            const char *hole = strstr(cases[i].body, "{R201}");
            if (hole != NULL)
                snprintf(body, sizeof body, "%.*s%s%s", (int)(hole - cases[i].body),
                         cases[i].body, r201, hole + 6);
            else
                snprintf(body, sizeof body, "%s", cases[i].body);
            /* Round 1 uses amounts relative to the new balance for the balance checks. */
            if (round == 1 && strcmp(cases[i].code, "NOT_CANCELABLE_AMOUNT") == 0)
                snprintf(body, sizeof body, "{\"cancelReason\":\"r\",\"cancelAmount\":7001}");
            cancel_raw(s, "pk_cerr_1", body, NULL, NULL, &r);
            ck_assert_msg(r.status == cases[i].status && fg_error_code(&r) != NULL &&
                              strcmp(fg_error_code(&r), cases[i].code) == 0,
                          "[%s, %s] want %ld %s, got %ld %.400s", cases[i].what, status,
                          cases[i].status, cases[i].code, r.status, r.body);
            const char *msg = fg_json_str(r.json, "message");
            ck_assert_msg(msg != NULL && msg[0] != '\0', "[%s] no message", cases[i].what);
            if (cases[i].field != NULL)
                ck_assert_msg(strstr(msg, cases[i].field) != NULL,
                              "[%s] message does not name %s: %s", cases[i].what, cases[i].field,
                              msg);
            fg_response_fini(&r);
            assert_payment(s, "pk_cerr_1", status, balance, (size_t)round);
        }
    }
    /* refundableAmount equal to the balance is accepted. */
    cancel_raw(s, "pk_cerr_1", "{\"cancelReason\":\"r\",\"cancelAmount\":1000,\"refundableAmount\":7000}",
               NULL, NULL, &r);
    assert_status(&r, 200);
    ck_assert_int_eq(json_int(r.json, "balanceAmount"), 6000);
    fg_response_fini(&r);
    /* cancelAmount and refundableAmount null are treated as absent: the rest. */
    cancel_raw(s, "pk_cerr_1",
               "{\"cancelReason\":\"r\",\"cancelAmount\":null,\"refundableAmount\":null}", NULL,
               NULL, &r);
    assert_status(&r, 200);
    ck_assert_str_eq(json_str(r.json, "status"), "CANCELED");
    ck_assert_int_eq(json_int(r.json, "balanceAmount"), 0);
    fg_response_fini(&r);
    stop_server(s);
}
END_TEST

/* docs/edge-rules.md §7's order: NOT_FOUND_PAYMENT, ALREADY_CANCELED_PAYMENT,
 * NOT_CANCELABLE_PAYMENT, FORBIDDEN_CONSECUTIVE_REQUEST, NOT_MATCHES_REFUNDABLE_AMOUNT,
 * NOT_CANCELABLE_AMOUNT. */
START_TEST(test_cancel_checks_run_in_spec_order)
{
    /* Window off: the balance checks. */
    fg_server *s = start_args(NULL, ARGS_NO_WINDOW);
    static const char both_bad[] =
        "{\"cancelReason\":\"r\",\"cancelAmount\":999999,\"refundableAmount\":1}";
    fg_response r;
    confirm_ok(s, "pk_order_1", "order_order_1", 10000, NULL);
    cancel_raw(s, "pk_order_1", both_bad, NULL, NULL, &r);
    assert_error(&r, 400, "NOT_MATCHES_REFUNDABLE_AMOUNT");
    fg_response_fini(&r);
    cancel_raw(s, "pk_order_nobody", both_bad, NULL, NULL, &r);
    assert_error(&r, 404, "NOT_FOUND_PAYMENT");
    fg_response_fini(&r);
    register_session(s, "{\"orderId\":\"order_order_2\",\"amount\":4000,\"paymentKey\":\"pk_order_2\"}",
                     &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    cancel_raw(s, "pk_order_2", both_bad, NULL, NULL, &r);
    assert_error(&r, 403, "NOT_CANCELABLE_PAYMENT");
    fg_response_fini(&r);
    assert_payment(s, "pk_order_1", "DONE", 10000, 0);
    stop_server(s);

    /* Window on (default 1000 ms): a canceled payment is ALREADY_CANCELED_PAYMENT, not
     * FORBIDDEN_CONSECUTIVE_REQUEST; the window comes before the balance checks. */
    s = start_args(NULL, NULL);
    confirm_ok(s, "pk_order_3", "order_order_3", 5000, NULL);
    cancel(s, "pk_order_3", 0, NULL, &r);
    assert_status(&r, 200);
    int64_t committed_before = r.done_ns;
    fg_response_fini(&r);
    cancel(s, "pk_order_3", 0, NULL, &r);
    ck_assert_msg(r.sent_ns - committed_before < 900 * MS_NS, "test too slow to be in the window");
    assert_error(&r, 400, "ALREADY_CANCELED_PAYMENT");
    fg_response_fini(&r);

    confirm_ok(s, "pk_order_4", "order_order_4", 5000, NULL);
    cancel(s, "pk_order_4", 1000, NULL, &r);
    assert_status(&r, 200);
    committed_before = r.done_ns;
    fg_response_fini(&r);
    cancel_raw(s, "pk_order_4", both_bad, NULL, NULL, &r);
    ck_assert_msg(r.sent_ns - committed_before < 900 * MS_NS, "test too slow to be in the window");
    assert_error(&r, 403, "FORBIDDEN_CONSECUTIVE_REQUEST");
    fg_response_fini(&r);
    assert_payment(s, "pk_order_4", "PARTIAL_CANCELED", 4000, 1);
    stop_server(s);
}
END_TEST

/* Poll with cancels of 1000 every 10 ms until one is accepted (each rejection must be
 * FORBIDDEN_CONSECUTIVE_REQUEST). Returns the accepted response in *ok; false on timeout. */
static bool cancel_until_accepted(const fg_server *s, const char *pk, int timeout_ms,
                                  fg_response *ok, int *rejections)
{
    int64_t deadline = fg_now_ms() + timeout_ms;
    *rejections = 0;
    for (;;) {
        fg_response r;
        cancel(s, pk, 1000, NULL, &r);
        if (r.status == 200) {
            *ok = r;
            return true;
        }
        assert_error(&r, 403, "FORBIDDEN_CONSECUTIVE_REQUEST");
        fg_response_fini(&r);
        (*rejections)++;
        if (fg_now_ms() > deadline)
            return false;
        fg_pause_ms(10);
    }
}

START_TEST(test_consecutive_cancel_window_500ms_measured_from_the_commit)
{
    fg_server *s = start_args(NULL, (const char *const[]){"--consecutive-cancel-ms", "500", NULL});
    confirm_ok(s, "pk_win_1", "order_win_1", 10000, NULL);
    fg_response first, r;
    cancel(s, "pk_win_1", 1000, NULL, &first);
    assert_status(&first, 200);
    cancel(s, "pk_win_1", 1000, NULL, &r);
    ck_assert_msg(r.done_ns - first.sent_ns < 400 * MS_NS, "test too slow to be in the window");
    assert_error(&r, 403, "FORBIDDEN_CONSECUTIVE_REQUEST");
    fg_response_fini(&r);
    assert_payment(s, "pk_win_1", "PARTIAL_CANCELED", 9000, 1);

    /* Rejections every 10 ms do not restart the window: one is accepted 500 ms after the
     * first commit (which lies between first.sent_ns and first.done_ns). */
    fg_response ok;
    int rejections = 0;
    ck_assert_msg(cancel_until_accepted(s, "pk_win_1", 3000, &ok, &rejections),
                  "no cancel accepted within 3 s of the first (%d rejected): rejected cancels "
                  "restart the window?", rejections);
    double after_ms = (double)(ok.done_ns - first.sent_ns) / 1e6;
    double sent_after_ms = (double)(ok.sent_ns - first.done_ns) / 1e6;
    ck_assert_msg(after_ms >= 500.0, "accepted %.1f ms after the first cancel (window 500)",
                  after_ms);
    ck_assert_msg(sent_after_ms < 500.0 + 300.0,
                  "accepted only when sent %.1f ms after the first commit", sent_after_ms);
    ck_assert_msg(rejections >= 5, "only %d rejections polled", rejections);
    ck_assert_int_eq(json_int(ok.json, "balanceAmount"), 8000);
    fg_response_fini(&ok);
    fg_response_fini(&first);
    assert_payment(s, "pk_win_1", "PARTIAL_CANCELED", 8000, 2);
    stop_server(s);
}
END_TEST

START_TEST(test_consecutive_cancel_window_defaults_to_1000ms)
{
    fg_server *s = start_args(NULL, NULL);
    confirm_ok(s, "pk_win_2", "order_win_2", 10000, NULL);
    fg_response first, r;
    cancel(s, "pk_win_2", 1000, NULL, &first);
    assert_status(&first, 200);
    cancel(s, "pk_win_2", 1000, NULL, &r);
    assert_error(&r, 403, "FORBIDDEN_CONSECUTIVE_REQUEST");
    fg_response_fini(&r);
    fg_response ok;
    int rejections = 0;
    ck_assert_msg(cancel_until_accepted(s, "pk_win_2", 4000, &ok, &rejections),
                  "no cancel accepted within 4 s (%d rejected)", rejections);
    double after_ms = (double)(ok.done_ns - first.sent_ns) / 1e6;
    double sent_after_ms = (double)(ok.sent_ns - first.done_ns) / 1e6;
    ck_assert_msg(after_ms >= 1000.0, "accepted %.1f ms after the first (default window 1000)",
                  after_ms);
    ck_assert_msg(sent_after_ms < 1000.0 + 300.0, "accepted only when sent %.1f ms after",
                  sent_after_ms);
    fg_response_fini(&ok);
    fg_response_fini(&first);
    assert_payment(s, "pk_win_2", "PARTIAL_CANCELED", 8000, 2);
    stop_server(s);
}
END_TEST

START_TEST(test_overlapping_cancels_loser_judged_against_winners_balance)
{
    fg_server *s = start_args(PROFILE_CANCEL_MS(500), ARGS_NO_WINDOW);
    confirm_ok(s, "pk_ovl_1", "order_ovl_1", 10000, NULL);
    struct bg_cancel a, b;
    bg_start(&a, s, "pk_ovl_1", 6000, NULL);
    bg_start(&b, s, "pk_ovl_1", 6000, "ovl-key-b");
    bg_join(&a);
    bg_join(&b);
    assert_status(&a.r, a.r.status == 200 ? 200 : 403);
    assert_status(&b.r, b.r.status == 200 ? 200 : 403);
    /* They overlapped, and each waited its latency: the checks run at the commit. */
    int64_t last_sent = a.r.sent_ns > b.r.sent_ns ? a.r.sent_ns : b.r.sent_ns;
    int64_t first_done = a.r.done_ns < b.r.done_ns ? a.r.done_ns : b.r.done_ns;
    ck_assert_msg(last_sent < first_done, "the two cancels did not overlap");
    ck_assert_msg(elapsed_ms(&a.r) >= 500.0 && elapsed_ms(&b.r) >= 500.0,
                  "a cancel was answered before its 500 ms latency (%.1f, %.1f ms)",
                  elapsed_ms(&a.r), elapsed_ms(&b.r));
    ck_assert_msg((a.r.status == 200) != (b.r.status == 200), "want one 200, got %ld and %ld",
                  a.r.status, b.r.status);
    const fg_response *win = a.r.status == 200 ? &a.r : &b.r;
    const fg_response *lose = a.r.status == 200 ? &b.r : &a.r;
    ck_assert_int_eq(json_int(win->json, "balanceAmount"), 4000);
    ck_assert_str_eq(json_str(win->json, "status"), "PARTIAL_CANCELED");
    assert_error(lose, 403, "NOT_CANCELABLE_AMOUNT");
    fg_response_fini(&a.r);
    fg_response_fini(&b.r);
    assert_payment(s, "pk_ovl_1", "PARTIAL_CANCELED", 4000, 1);
    stop_server(s);
}
END_TEST

START_TEST(test_cancel_resend_with_same_key_is_replayed)
{
    fg_server *s = start_args(NULL, ARGS_NO_WINDOW);
    confirm_ok(s, "pk_cidem_1", "order_cidem_1", 10000, NULL);
    fg_response a, b;
    cancel(s, "pk_cidem_1", 3000, "cancel-key-1", &a);
    assert_status(&a, 200);
    ck_assert_int_eq(json_int(a.json, "balanceAmount"), 7000);
    cancel(s, "pk_cidem_1", 3000, "cancel-key-1", &b);
    assert_status(&b, 200);
    ck_assert_msg(same_bytes(&a, &b), "replay differs:\n%.800s\n%.800s", a.body, b.body);
    fg_response_fini(&b);
    assert_payment(s, "pk_cidem_1", "PARTIAL_CANCELED", 7000, 1);
    /* A later cancel under another key changes the payment; the replay of key 1 still shows
     * the payment as it was after that cancel. */
    cancel(s, "pk_cidem_1", 1000, "cancel-key-2", &b);
    assert_status(&b, 200);
    ck_assert_int_eq(json_int(b.json, "balanceAmount"), 6000);
    fg_response_fini(&b);
    cancel(s, "pk_cidem_1", 3000, "cancel-key-1", &b);
    assert_status(&b, 200);
    ck_assert_msg(same_bytes(&a, &b), "replay after a later cancel differs:\n%.800s\n%.800s",
                  a.body, b.body);
    fg_response_fini(&b);
    fg_response_fini(&a);
    assert_payment(s, "pk_cidem_1", "PARTIAL_CANCELED", 6000, 2);

    /* A business error is stored too: the same key gets it again even once it would pass. */
    cancel(s, "pk_cidem_1", 9000, "cancel-key-3", &a);
    assert_error(&a, 403, "NOT_CANCELABLE_AMOUNT");
    cancel(s, "pk_cidem_1", 9000, "cancel-key-3", &b);
    ck_assert(same_bytes(&a, &b));
    ck_assert_int_eq(b.status, 403);
    fg_response_fini(&a);
    fg_response_fini(&b);
    assert_payment(s, "pk_cidem_1", "PARTIAL_CANCELED", 6000, 2);
    stop_server(s);
}
END_TEST

START_TEST(test_cancel_same_key_in_flight_gets_409)
{
    fg_server *s = start_args(PROFILE_CANCEL_MS(800), ARGS_NO_WINDOW);
    confirm_ok(s, "pk_cidem_2", "order_cidem_2", 10000, NULL);
    struct bg_cancel a;
    bg_start(&a, s, "pk_cidem_2", 3000, "inflight-key");
    fg_response b;
    cancel(s, "pk_cidem_2", 3000, "inflight-key", &b);
    bg_join(&a);
    /* Whichever arrived first holds the claim for 800 ms; the other gets 409 at once. */
    ck_assert_msg((a.r.status == 200 && b.status == 409) || (a.r.status == 409 && b.status == 200),
                  "want one 200 and one 409, got %ld %.300s / %ld %.300s", a.r.status, a.r.body,
                  b.status, b.body);
    const fg_response *ok = a.r.status == 200 ? &a.r : &b;
    const fg_response *conflict = a.r.status == 200 ? &b : &a.r;
    assert_error(conflict, 409, "IDEMPOTENT_REQUEST_PROCESSING");
    ck_assert_msg(elapsed_ms(conflict) < 700.0, "409 took %.1f ms", elapsed_ms(conflict));
    ck_assert_msg(elapsed_ms(ok) >= 800.0, "200 took %.1f ms", elapsed_ms(ok));
    ck_assert_int_eq(json_int(ok->json, "balanceAmount"), 7000);
    fg_response c;
    cancel(s, "pk_cidem_2", 3000, "inflight-key", &c);
    assert_status(&c, 200);
    ck_assert_msg(same_bytes(ok, &c), "replay differs");
    ck_assert_msg(elapsed_ms(&c) < 700.0, "replay took %.1f ms", elapsed_ms(&c));
    fg_response_fini(&c);
    fg_response_fini(&a.r);
    fg_response_fini(&b);
    assert_payment(s, "pk_cidem_2", "PARTIAL_CANCELED", 7000, 1);
    stop_server(s);
}
END_TEST

/* ---- transactions ------------------------------------------------------------------------- */

struct want_tx {
    const char *pk, *oid, *status;
    long long amount;
    char key[33];
};

static void assert_tx_row(const json_t *row, const struct want_tx *w, size_t i)
{
    ck_assert_msg(json_is_object(row), "row %zu is not an object", i);
    ck_assert_str_eq(json_str(row, "mId"), "tgen_fakegate");
    ck_assert_str_eq(json_str(row, "transactionKey"), w->key);
    ck_assert_str_eq(json_str(row, "paymentKey"), w->pk);
    ck_assert_str_eq(json_str(row, "orderId"), w->oid);
    ck_assert_str_eq(json_str(row, "method"), "카드");
    ck_assert_str_eq(json_str(row, "status"), w->status);
    ck_assert_str_eq(json_str(row, "currency"), "KRW");
    ck_assert_int_eq(json_int(row, "amount"), w->amount);
    const char *at = json_str(row, "transactionAt");
    ck_assert_msg(matches(TS_RE, at), "row %zu transactionAt \"%s\"", i, at);
    ck_assert_msg(json_object_get(row, "customerKey") != NULL, "row %zu: no customerKey", i);
    ck_assert_msg(json_is_false(json_object_get(row, "useEscrow")), "row %zu: useEscrow", i);
    ck_assert_msg(json_is_string(json_object_get(row, "receiptUrl")), "row %zu: receiptUrl", i);
}

/* Two payments: A approved 10000, B approved 5000, A cancel 3000, A cancel rest, B cancel rest.
 * Fills w[5] in commit order. */
static void make_ledger(const fg_server *s, struct want_tx w[5])
{
    w[0] = (struct want_tx){"pk_tx_a", "order_tx_a", "DONE", 10000, ""};
    w[1] = (struct want_tx){"pk_tx_b", "order_tx_b", "DONE", 5000, ""};
    w[2] = (struct want_tx){"pk_tx_a", "order_tx_a", "PARTIAL_CANCELED", 3000, ""};
    w[3] = (struct want_tx){"pk_tx_a", "order_tx_a", "CANCELED", 7000, ""};
    w[4] = (struct want_tx){"pk_tx_b", "order_tx_b", "CANCELED", 5000, ""};
    confirm_ok(s, w[0].pk, w[0].oid, 10000, w[0].key);
    confirm_ok(s, w[1].pk, w[1].oid, 5000, w[1].key);
    long long amounts[] = {3000, 0, 0};
    for (size_t i = 2; i < 5; i++) {
        fg_response r;
        cancel(s, w[i].pk, amounts[i - 2], NULL, &r);
        assert_status(&r, 200);
        snprintf(w[i].key, sizeof w[i].key, "%s", json_str(r.json, "lastTransactionKey"));
        fg_response_fini(&r);
    }
}

START_TEST(test_transactions_list_approvals_and_cancels_in_commit_order)
{
    fg_server *s = start_args(NULL, ARGS_NO_WINDOW);
    json_t *a = all_transactions(s, "");
    ck_assert_uint_eq(json_array_size(a), 0);
    json_decref(a);

    struct want_tx w[5];
    make_ledger(s, w);
    a = all_transactions(s, "");
    ck_assert_msg(json_array_size(a) == 5, "want 5 rows, got %zu", json_array_size(a));
    for (size_t i = 0; i < 5; i++)
        assert_tx_row(json_array_get(a, i), &w[i], i);
    for (size_t i = 1; i < 5; i++)
        ck_assert_msg(strcmp(json_str(json_array_get(a, i - 1), "transactionAt"),
                             json_str(json_array_get(a, i), "transactionAt")) <= 0,
                      "rows %zu and %zu out of time order", i - 1, i);
    json_decref(a);

    /* A walk with limit=1 returns every row exactly once, in order, then []. */
    char after[33] = "";
    for (size_t i = 0; i <= 5; i++) {
        char more[128];
        if (i == 0)
            snprintf(more, sizeof more, "&limit=1");
        else
            snprintf(more, sizeof more, "&limit=1&startingAfter=%s", after);
        json_t *page = all_transactions(s, more);
        if (i == 5) {
            ck_assert_msg(json_array_size(page) == 0, "walk: %zu rows after the last",
                          json_array_size(page));
        } else {
            ck_assert_msg(json_array_size(page) == 1, "walk step %zu: %zu rows", i,
                          json_array_size(page));
            assert_tx_row(json_array_get(page, 0), &w[i], i);
            snprintf(after, sizeof after, "%s", w[i].key);
        }
        json_decref(page);
    }
    /* startingAfter without a limit: exactly the rows after that one. */
    char more[128];
    snprintf(more, sizeof more, "&startingAfter=%s", w[1].key);
    a = all_transactions(s, more);
    ck_assert_uint_eq(json_array_size(a), 3);
    for (size_t i = 0; i < 3; i++)
        assert_tx_row(json_array_get(a, i), &w[i + 2], i + 2);
    json_decref(a);
    stop_server(s);
}
END_TEST

START_TEST(test_transactions_date_bounds)
{
    fg_server *s = start_args(NULL, ARGS_NO_WINDOW);
    struct want_tx w[5];
    make_ledger(s, w);
    json_t *all = all_transactions(s, "");
    ck_assert_uint_eq(json_array_size(all), 5);
    const char *last_at = json_str(json_array_get(all, 4), "transactionAt");
    size_t before_last = 0; /* rows in an earlier second than the last row's */
    for (size_t i = 0; i < 5; i++)
        if (strcmp(json_str(json_array_get(all, i), "transactionAt"), last_at) < 0)
            before_last++;

    char from[32], to[32], q[FG_PATH_LEN], t_last[32], t_before[32];
    fg_response r;
    kst_now(-86400, from);
    shift_ts(last_at, 0, t_last);
    shift_ts(last_at, -1, t_before);

    /* startDate after now → []. */
    kst_now(3600, to);
    char far[32];
    kst_now(7200, far);
    snprintf(q, sizeof q, "startDate=%s&endDate=%s", to, far);
    transactions(s, q, &r);
    assert_status(&r, 200);
    ck_assert_msg(json_is_array(r.json) && json_array_size(r.json) == 0, "%.400s", r.body);
    fg_response_fini(&r);

    /* endDate = the last row's transactionAt: included; one second before: excluded. */
    snprintf(q, sizeof q, "startDate=%s&endDate=%s", from, t_last);
    transactions(s, q, &r);
    assert_status(&r, 200);
    ck_assert_msg(json_array_size(r.json) == 5, "endDate=%s: %zu rows, want 5", t_last,
                  json_array_size(r.json));
    fg_response_fini(&r);
    snprintf(q, sizeof q, "startDate=%s&endDate=%s", from, t_before);
    transactions(s, q, &r);
    assert_status(&r, 200);
    ck_assert_msg(json_array_size(r.json) == before_last, "endDate=%s: %zu rows, want %zu",
                  t_before, json_array_size(r.json), before_last);
    fg_response_fini(&r);

    /* Dates with .SSS, and a %-encoded ':'. */
    snprintf(q, sizeof q, "startDate=%s.000&endDate=%s.999", from, t_last);
    transactions(s, q, &r);
    assert_status(&r, 200);
    ck_assert_uint_eq(json_array_size(r.json), 5);
    fg_response_fini(&r);
    snprintf(q, sizeof q, "startDate=%.13s%%3A%s&endDate=%s", from, from + 14, t_last);
    transactions(s, q, &r);
    assert_status(&r, 200);
    ck_assert_uint_eq(json_array_size(r.json), 5);
    fg_response_fini(&r);

    /* Missing or malformed dates → 400 INVALID_REQUEST. */
    const char *bad[] = {
        "",
        "endDate=2100-01-01T00:00:00",
        "startDate=2000-01-01T00:00:00",
        "startDate=&endDate=2100-01-01T00:00:00",
        "startDate=2000-01-01&endDate=2100-01-01T00:00:00",
        "startDate=2000-01-01T00:00:00&endDate=2100-13-01T00:00:00",
        "startDate=2000-01-01T00:00:00&endDate=yesterday",
        "startDate=2000-01-01T00:00:00%2B09:00&endDate=2100-01-01T00:00:00",
        "startDate=2000-01-01 00:00:00&endDate=2100-01-01T00:00:00",
        "startDate=2026-02-30T00:00:00&endDate=2100-01-01T00:00:00", /* no such day */
        "startDate=2000-01-01T00:00:00&endDate=2027-02-29T00:00:00", /* not a leap year */
        "startDate=2000-04-31T00:00:00&endDate=2100-01-01T00:00:00",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char path[FG_PATH_LEN];
        snprintf(path, sizeof path, "/v1/transactions%s%s", bad[i][0] ? "?" : "", bad[i]);
        /* A raw space is not valid in a request line; send it %-encoded. */
        char enc[FG_PATH_LEN];
        size_t o = 0;
        for (const char *p = path; *p && o + 4 < sizeof enc; p++) {
            if (*p == ' ')
                o += (size_t)snprintf(enc + o, sizeof enc - o, "%%20");
            else
                enc[o++] = *p;
        }
        enc[o] = '\0';
        fg_get(s, enc, &r);
        ck_assert_msg(r.status == 400 && fg_error_code(&r) != NULL &&
                          strcmp(fg_error_code(&r), "INVALID_REQUEST") == 0,
                      "[%s] want 400 INVALID_REQUEST, got %ld %.300s", enc, r.status, r.body);
        fg_response_fini(&r);
    }
    json_decref(all);
    stop_server(s);
}
END_TEST

START_TEST(test_transactions_bad_cursor_and_limits)
{
    fg_server *s = start_args(NULL, ARGS_NO_WINDOW);
    struct want_tx w[5];
    make_ledger(s, w);
    char from[32], to[32], q[FG_PATH_LEN];
    kst_now(-86400, from);
    kst_now(86400, to);
    fg_response r;

    const char *cursors[] = {"NOPE", "0123456789ABCDEF0123456789ABCDEF", ""};
    for (size_t i = 0; i < sizeof cursors / sizeof cursors[0]; i++) {
        snprintf(q, sizeof q, "startDate=%s&endDate=%s&startingAfter=%s", from, to, cursors[i]);
        transactions(s, q, &r);
        ck_assert_msg(r.status == 400 && fg_error_code(&r) != NULL &&
                          strcmp(fg_error_code(&r), "INVALID_TRANSACTION_KEY") == 0,
                      "[startingAfter=%s] want 400 INVALID_TRANSACTION_KEY, got %ld %.300s",
                      cursors[i], r.status, r.body);
        fg_response_fini(&r);
    }
    /* A real row's key with a percent-encoded NUL after it is not that key. */
    const char *tails[] = {"%00", "%00JUNK"};
    for (size_t i = 0; i < sizeof tails / sizeof tails[0]; i++) {
        snprintf(q, sizeof q, "startDate=%s&endDate=%s&startingAfter=%s%s", from, to, w[1].key,
                 tails[i]);
        transactions(s, q, &r);
        ck_assert_msg(r.status == 400 && fg_error_code(&r) != NULL &&
                          strcmp(fg_error_code(&r), "INVALID_TRANSACTION_KEY") == 0,
                      "[startingAfter=%s%s] want 400 INVALID_TRANSACTION_KEY, got %ld %.300s",
                      w[1].key, tails[i], r.status, r.body);
        fg_response_fini(&r);
    }
    const char *limits[] = {"0", "5001", "abc", "1.5", "-1", "", "1e3", "99999999999999999999",
                            "1%00"};
    for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) {
        snprintf(q, sizeof q, "startDate=%s&endDate=%s&limit=%s", from, to, limits[i]);
        transactions(s, q, &r);
        ck_assert_msg(r.status == 400 && fg_error_code(&r) != NULL &&
                          strcmp(fg_error_code(&r), "INVALID_REQUEST") == 0,
                      "[limit=%s] want 400 INVALID_REQUEST, got %ld %.300s", limits[i], r.status,
                      r.body);
        fg_response_fini(&r);
    }
    json_t *a = all_transactions(s, "&limit=5000");
    ck_assert_uint_eq(json_array_size(a), 5);
    json_decref(a);
    a = all_transactions(s, "&limit=2");
    ck_assert_uint_eq(json_array_size(a), 2);
    assert_tx_row(json_array_get(a, 0), &w[0], 0);
    assert_tx_row(json_array_get(a, 1), &w[1], 1);
    json_decref(a);
    stop_server(s);
}
END_TEST

START_TEST(test_transactions_default_limit_is_100)
{
    fg_server *s = start_args(NULL, ARGS_NO_WINDOW);
    char keys[101][33];
    for (int i = 0; i < 101; i++) {
        char pk[32], oid[32];
        snprintf(pk, sizeof pk, "pk_lim_%03d", i);
        snprintf(oid, sizeof oid, "order_lim_%03d", i);
        confirm_ok(s, pk, oid, 1000 + i, keys[i]);
    }
    json_t *a = all_transactions(s, "");
    ck_assert_msg(json_array_size(a) == 100, "default limit: %zu rows", json_array_size(a));
    for (size_t i = 0; i < 100; i++)
        ck_assert_str_eq(json_str(json_array_get(a, i), "transactionKey"), keys[i]);
    json_decref(a);
    char more[128];
    snprintf(more, sizeof more, "&startingAfter=%s", keys[99]);
    a = all_transactions(s, more);
    ck_assert_uint_eq(json_array_size(a), 1);
    ck_assert_str_eq(json_str(json_array_get(a, 0), "transactionKey"), keys[100]);
    ck_assert_int_eq(json_int(json_array_get(a, 0), "amount"), 1100);
    json_decref(a);
    a = all_transactions(s, "&limit=5000");
    ck_assert_uint_eq(json_array_size(a), 101);
    json_decref(a);
    stop_server(s);
}
END_TEST

/* ---- sessions ----------------------------------------------------------------------------- */

START_TEST(test_registered_session_confirm_must_match_order_and_amount)
{
    fg_server *s = start_server(NULL);
    char before[32], after[32];
    kst_now(0, before);
    fg_response r;
    register_session(s, "{\"orderId\":\"order_sess_1\",\"amount\":12000}", &r);
    kst_now(0, after);
    assert_status(&r, 200);
    ck_assert_str_eq(json_str(r.json, "status"), "IN_PROGRESS");
    ck_assert_str_eq(json_str(r.json, "orderId"), "order_sess_1");
    ck_assert_int_eq(json_int(r.json, "totalAmount"), 12000);
    char pk[64];
    snprintf(pk, sizeof pk, "%s", json_str(r.json, "paymentKey"));
    ck_assert_msg(matches("^tgen_[0-9]{14}[A-Za-z0-9]{5}$", pk), "paymentKey \"%s\"", pk);
    /* The 14 digits are the Korea-time registration instant, yyyyMMddHHmmss. */
    char lo[16], hi[16];
    snprintf(lo, sizeof lo, "%.4s%.2s%.2s%.2s%.2s%.2s", before, before + 5, before + 8,
             before + 11, before + 14, before + 17);
    snprintf(hi, sizeof hi, "%.4s%.2s%.2s%.2s%.2s%.2s", after, after + 5, after + 8, after + 11,
             after + 14, after + 17);
    ck_assert_msg(strncmp(pk + 5, lo, 14) >= 0 && strncmp(pk + 5, hi, 14) <= 0,
                  "paymentKey time %.14s not within [%s, %s]", pk + 5, lo, hi);
    fg_response_fini(&r);
    assert_payment(s, pk, "IN_PROGRESS", 12000, 0);

    /* Another amount → 400 INVALID_REQUEST naming the mismatch; payment unchanged. */
    char body[256];
    snprintf(body, sizeof body, "{\"paymentKey\":\"%s\",\"orderId\":\"order_sess_1\",\"amount\":12001}",
             pk);
    post(s, "/v1/payments/confirm", body, NULL, "Accept-Language: en-US", &r);
    assert_error(&r, 400, "INVALID_REQUEST");
    ck_assert_msg(strstr(json_str(r.json, "message"), "amount/orderId") != NULL, "message: %s",
                  json_str(r.json, "message"));
    fg_response_fini(&r);
    fg_confirm(s, pk, "order_sess_1", 12001, NULL, &r);
    assert_error(&r, 400, "INVALID_REQUEST");
    ck_assert_msg(strstr(json_str(r.json, "message"), "금액") != NULL, "message: %s",
                  json_str(r.json, "message"));
    fg_response_fini(&r);
    assert_payment(s, pk, "IN_PROGRESS", 12000, 0);

    /* Another orderId → 400 INVALID_REQUEST; payment unchanged, no new payment. */
    fg_confirm(s, pk, "order_sess_other", 12000, NULL, &r);
    assert_error(&r, 400, "INVALID_REQUEST");
    fg_response_fini(&r);
    assert_payment(s, pk, "IN_PROGRESS", 12000, 0);
    json_t *other = fg_admin_payments(s, "order_sess_other");
    ck_assert_msg(other != NULL && json_array_size(other) == 0, "a payment for the other orderId");
    json_decref(other);

    /* Matching confirm → 200 DONE with the registered key. */
    fg_confirm(s, pk, "order_sess_1", 12000, NULL, &r);
    assert_status(&r, 200);
    ck_assert_str_eq(json_str(r.json, "status"), "DONE");
    ck_assert_str_eq(json_str(r.json, "paymentKey"), pk);
    fg_response_fini(&r);
    assert_payment(s, pk, "DONE", 12000, 0);

    /* A given paymentKey is used as is. */
    register_session(s, "{\"orderId\":\"order_sess_2\",\"amount\":3000,\"paymentKey\":\"my_own_key_1\"}",
                     &r);
    assert_status(&r, 200);
    ck_assert_str_eq(json_str(r.json, "paymentKey"), "my_own_key_1");
    ck_assert_str_eq(json_str(r.json, "status"), "IN_PROGRESS");
    fg_response_fini(&r);
    fg_confirm(s, "my_own_key_1", "order_sess_2", 3000, NULL, &r);
    assert_status(&r, 200);
    ck_assert_str_eq(json_str(r.json, "status"), "DONE");
    fg_response_fini(&r);

    /* Two generated keys differ. */
    register_session(s, "{\"orderId\":\"order_sess_3\",\"amount\":3000}", &r);
    assert_status(&r, 200);
    char pk3[64];
    snprintf(pk3, sizeof pk3, "%s", json_str(r.json, "paymentKey"));
    fg_response_fini(&r);
    ck_assert_str_ne(pk3, pk);
    ck_assert_msg(matches("^tgen_[0-9]{14}[A-Za-z0-9]{5}$", pk3), "paymentKey \"%s\"", pk3);
    stop_server(s);
}
END_TEST

START_TEST(test_duplicate_session_order_id_gets_duplicated_order_id)
{
    fg_server *s = start_server(NULL);
    fg_response r;
    register_session(s, "{\"orderId\":\"order_dup_1\",\"amount\":1000}", &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    register_session(s, "{\"orderId\":\"order_dup_1\",\"amount\":1000}", &r);
    assert_error(&r, 400, "DUPLICATED_ORDER_ID");
    fg_response_fini(&r);
    register_session(s, "{\"orderId\":\"order_dup_1\",\"amount\":2000,\"paymentKey\":\"pk_dup_x\"}",
                     &r);
    assert_error(&r, 400, "DUPLICATED_ORDER_ID");
    fg_response_fini(&r);
    /* Also against an orderId first used by a (lenient) confirm. */
    confirm_ok(s, "pk_dup_2", "order_dup_2", 1000, NULL);
    register_session(s, "{\"orderId\":\"order_dup_2\",\"amount\":1000}", &r);
    assert_error(&r, 400, "DUPLICATED_ORDER_ID");
    fg_response_fini(&r);
    json_t *a = fg_admin_payments(s, NULL);
    ck_assert_uint_eq(json_array_size(a), 2);
    json_decref(a);
    stop_server(s);
}
END_TEST

/* docs/edge-rules.md §7: fakegate_payments_total counts transitions, so an expiry is counted once
 * wherever it is first seen, the admin listing included. */
START_TEST(test_expiry_seen_first_by_the_admin_listing_is_counted)
{
    fg_server *s = start_args(NULL, (const char *const[]){"--session-ttl", "1", NULL});
    fg_response r;
    register_session(s, "{\"orderId\":\"order_ttl_a\",\"amount\":5000,\"paymentKey\":\"pk_ttl_a\"}",
                     &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    register_session(s, "{\"orderId\":\"order_ttl_b\",\"amount\":5000,\"paymentKey\":\"pk_ttl_b\"}",
                     &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    /* Poll the listing only (bounded) until both read EXPIRED. */
    int64_t deadline = fg_now_ms() + 5000;
    for (;;) {
        json_t *all = fg_admin_payments(s, NULL);
        ck_assert_ptr_nonnull(all);
        size_t expired = 0, i;
        json_t *e;
        json_array_foreach(all, i, e) {
            const char *st = json_str(json_object_get(e, "payment"), "status");
            expired += st != NULL && strcmp(st, "EXPIRED") == 0;
        }
        json_decref(all);
        if (expired == 2)
            break;
        ck_assert_msg(fg_now_ms() < deadline, "sessions never expired with --session-ttl 1");
        fg_pause_ms(20);
    }
    get_payment(s, "pk_ttl_a", &r); /* seen again: not a new transition */
    assert_status(&r, 200);
    fg_response_fini(&r);
    fg_get(s, "/metrics", &r);
    assert_status(&r, 200);
    static const char want[] = "\nfakegate_payments_total{status=\"EXPIRED\"} 2\n";
    const char *line = strstr(r.body, "\nfakegate_payments_total{status=\"EXPIRED\"} ");
    ck_assert_msg(line != NULL && strncmp(line, want, sizeof want - 1) == 0,
                  "want EXPIRED 2, got: %.60s", line ? line + 1 : "(no EXPIRED series)");
    fg_response_fini(&r);
    stop_server(s);
}
END_TEST

START_TEST(test_session_expires_after_session_ttl)
{
    fg_server *s = start_args(NULL, (const char *const[]){"--session-ttl", "1", NULL});
    fg_response r;
    register_session(s, "{\"orderId\":\"order_ttl_1\",\"amount\":5000,\"paymentKey\":\"pk_ttl_1\"}",
                     &r);
    assert_status(&r, 200);
    int64_t registered_ns = r.sent_ns;
    fg_response_fini(&r);
    /* Poll until EXPIRED (bounded): the TTL is the behaviour under test. */
    const char *status = NULL;
    int64_t deadline = fg_now_ms() + 5000;
    for (;;) {
        get_payment(s, "pk_ttl_1", &r);
        assert_status(&r, 200);
        status = fg_json_str(r.json, "status");
        ck_assert_ptr_nonnull(status);
        if (strcmp(status, "EXPIRED") == 0)
            break;
        ck_assert_str_eq(status, "IN_PROGRESS");
        fg_response_fini(&r);
        ck_assert_msg(fg_now_ms() < deadline, "session never expired with --session-ttl 1");
        fg_pause_ms(20);
    }
    double age_ms = (double)(r.done_ns - registered_ns) / 1e6;
    ck_assert_msg(age_ms >= 1000.0, "EXPIRED after only %.1f ms (ttl 1 s)", age_ms);
    const json_t *failure = json_object_get(r.json, "failure");
    ck_assert_msg(json_is_object(failure), "no failure object: %.600s", r.body);
    ck_assert_str_eq(json_str(failure, "code"), "EXPIRED_PAYMENT");
    fg_response_fini(&r);

    fg_confirm(s, "pk_ttl_1", "order_ttl_1", 5000, NULL, &r);
    assert_error(&r, 404, "NOT_FOUND_PAYMENT_SESSION");
    fg_response_fini(&r);
    cancel(s, "pk_ttl_1", 0, NULL, &r);
    assert_error(&r, 403, "NOT_CANCELABLE_PAYMENT");
    fg_response_fini(&r);
    assert_payment(s, "pk_ttl_1", "EXPIRED", 5000, 0);
    stop_server(s);
}
END_TEST

START_TEST(test_strict_sessions_require_a_registered_session)
{
    fg_server *s = start_args(NULL, (const char *const[]){"--strict-sessions", NULL});
    fg_response r;
    fg_confirm(s, "pk_strict_unknown", "order_strict_1", 1000, NULL, &r);
    assert_error(&r, 404, "NOT_FOUND_PAYMENT_SESSION");
    fg_response_fini(&r);
    get_payment(s, "pk_strict_unknown", &r);
    assert_error(&r, 404, "NOT_FOUND_PAYMENT");
    fg_response_fini(&r);
    json_t *a = fg_admin_payments(s, NULL);
    ck_assert_uint_eq(json_array_size(a), 0);
    json_decref(a);

    register_session(s, "{\"orderId\":\"order_strict_2\",\"amount\":2500,\"paymentKey\":\"pk_strict_2\"}",
                     &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    fg_confirm(s, "pk_strict_2", "order_strict_2", 2500, NULL, &r);
    assert_status(&r, 200);
    ck_assert_str_eq(json_str(r.json, "status"), "DONE");
    fg_response_fini(&r);
    assert_payment(s, "pk_strict_2", "DONE", 2500, 0);
    stop_server(s);
}
END_TEST

/* ---- test codes --------------------------------------------------------------------------- */

static const struct {
    const char *code;
    long status;
    const char *want_code;
} test_codes[] = {
    {"REJECT_CARD_PAYMENT", 403, "REJECT_CARD_PAYMENT"},
    {"INVALID_CARD_EXPIRATION", 400, "INVALID_CARD_EXPIRATION"},
    {"FAILED_INTERNAL_SYSTEM_PROCESSING", 500, "FAILED_INTERNAL_SYSTEM_PROCESSING"},
    {"NO_SUCH_TEST_CODE", 400, "INVALID_TEST_CODE"},
};

START_TEST(test_test_code_on_confirm_forces_error_and_stores_nothing)
{
    fg_server *s = start_server(NULL);
    for (size_t i = 0; i < sizeof test_codes / sizeof test_codes[0]; i++) {
        char pk[32], oid[32], key[32], hdr[128], body[256];
        snprintf(pk, sizeof pk, "pk_tc_%zu", i);
        snprintf(oid, sizeof oid, "order_tc_%zu", i);
        snprintf(key, sizeof key, "tc-confirm-%zu", i);
        snprintf(hdr, sizeof hdr, "TossPayments-Test-Code: %s", test_codes[i].code);
        snprintf(body, sizeof body, "{\"paymentKey\":\"%s\",\"orderId\":\"%s\",\"amount\":7000}",
                 pk, oid);
        fg_response r;
        post(s, "/v1/payments/confirm", body, key, hdr, &r);
        ck_assert_msg(r.status == test_codes[i].status && fg_error_code(&r) != NULL &&
                          strcmp(fg_error_code(&r), test_codes[i].want_code) == 0,
                      "[%s] want %ld %s, got %ld %.300s", test_codes[i].code,
                      test_codes[i].status, test_codes[i].want_code, r.status, r.body);
        fg_response_fini(&r);
        /* Before field validation: an invalid body still gets the forced error. */
        post(s, "/v1/payments/confirm", "{\"amount\":\"x\"}", NULL, hdr, &r);
        ck_assert_msg(r.status == test_codes[i].status && fg_error_code(&r) != NULL &&
                          strcmp(fg_error_code(&r), test_codes[i].want_code) == 0,
                      "[%s, invalid body] got %ld %.300s", test_codes[i].code, r.status, r.body);
        fg_response_fini(&r);
        /* No ledger change. */
        json_t *a = fg_admin_payments(s, NULL);
        ck_assert_msg(json_array_size(a) == i, "[%s] ledger has %zu payments, want %zu",
                      test_codes[i].code, json_array_size(a), i);
        json_decref(a);
        get_payment(s, pk, &r);
        assert_error(&r, 404, "NOT_FOUND_PAYMENT");
        fg_response_fini(&r);
        /* Nothing stored under the key: without the header it runs normally. */
        fg_confirm(s, pk, oid, 7000, key, &r);
        assert_status(&r, 200);
        ck_assert_str_eq(json_str(r.json, "status"), "DONE");
        fg_response_fini(&r);
    }
    stop_server(s);
}
END_TEST

START_TEST(test_test_code_on_cancel_forces_error_and_stores_nothing)
{
    fg_server *s = start_args(NULL, ARGS_NO_WINDOW);
    confirm_ok(s, "pk_tcc_1", "order_tcc_1", 10000, NULL);
    long long balance = 10000;
    for (size_t i = 0; i < sizeof test_codes / sizeof test_codes[0]; i++) {
        char key[32], hdr[128];
        snprintf(key, sizeof key, "tc-cancel-%zu", i);
        snprintf(hdr, sizeof hdr, "TossPayments-Test-Code: %s", test_codes[i].code);
        fg_response r;
        cancel_raw(s, "pk_tcc_1", "{\"cancelReason\":\"r\",\"cancelAmount\":1000}", key, hdr, &r);
        ck_assert_msg(r.status == test_codes[i].status && fg_error_code(&r) != NULL &&
                          strcmp(fg_error_code(&r), test_codes[i].want_code) == 0,
                      "[%s] want %ld %s, got %ld %.300s", test_codes[i].code,
                      test_codes[i].status, test_codes[i].want_code, r.status, r.body);
        fg_response_fini(&r);
        /* Also on an unknown payment and with an invalid body: the forced error first. */
        cancel_raw(s, "pk_tcc_nobody", "{}", NULL, hdr, &r);
        ck_assert_msg(r.status == test_codes[i].status && fg_error_code(&r) != NULL &&
                          strcmp(fg_error_code(&r), test_codes[i].want_code) == 0,
                      "[%s, unknown payment, no reason] got %ld %.300s", test_codes[i].code,
                      r.status, r.body);
        fg_response_fini(&r);
        assert_payment(s, "pk_tcc_1", i == 0 ? "DONE" : "PARTIAL_CANCELED", balance, i);
        /* The same key without the header runs normally. */
        cancel_raw(s, "pk_tcc_1", "{\"cancelReason\":\"r\",\"cancelAmount\":1000}", key, NULL, &r);
        assert_status(&r, 200);
        balance -= 1000;
        ck_assert_int_eq(json_int(r.json, "balanceAmount"), balance);
        fg_response_fini(&r);
    }
    assert_payment(s, "pk_tcc_1", "PARTIAL_CANCELED", 6000, 4);
    json_t *a = fg_admin_payments(s, NULL);
    ck_assert_uint_eq(json_array_size(a), 1);
    json_decref(a);
    stop_server(s);
}
END_TEST

START_TEST(test_test_code_is_ignored_for_a_live_key)
{
    fg_opts o = {.secret_key = "live_sk_x", .args = ARGS_NO_WINDOW};
    fg_server *s = start_server(&o);
    fg_response r;
    post(s, "/v1/payments/confirm",
         "{\"paymentKey\":\"pk_live_1\",\"orderId\":\"order_live_1\",\"amount\":8000}", NULL,
         "TossPayments-Test-Code: REJECT_CARD_PAYMENT", &r);
    assert_status(&r, 200);
    ck_assert_str_eq(json_str(r.json, "status"), "DONE");
    fg_response_fini(&r);
    cancel_raw(s, "pk_live_1", "{\"cancelReason\":\"r\",\"cancelAmount\":1000}", NULL,
               "TossPayments-Test-Code: FAILED_INTERNAL_SYSTEM_PROCESSING", &r);
    assert_status(&r, 200);
    ck_assert_int_eq(json_int(r.json, "balanceAmount"), 7000);
    fg_response_fini(&r);
    post(s, "/v1/payments/confirm",
         "{\"paymentKey\":\"pk_live_2\",\"orderId\":\"order_live_2\",\"amount\":8000}", NULL,
         "TossPayments-Test-Code: NO_SUCH_TEST_CODE", &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    assert_payment(s, "pk_live_1", "PARTIAL_CANCELED", 7000, 1);
    assert_payment(s, "pk_live_2", "DONE", 8000, 0);
    stop_server(s);
}
END_TEST

/* ---- bytes on the wire -------------------------------------------------------------------- */

START_TEST(test_paths_hiding_a_slash_or_nul_get_404_not_found)
{
    fg_server *s = start_server(NULL);
    confirm_ok(s, "abc", "order_abc_1", 1000, NULL);
    const char *paths[] = {
        "/v1/payments/abc%2Fdef", "/v1/payments/abc%2fdef", "/v1/payments/abc%00def",
        "/v1/payments/abc%00",    "/v1/payments/orders/order_abc_1%2Fx",
    };
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        fg_response r;
        fg_get(s, paths[i], &r);
        ck_assert_msg(r.status == 404 && fg_error_code(&r) != NULL &&
                          strcmp(fg_error_code(&r), "NOT_FOUND") == 0,
                      "GET %s: want 404 NOT_FOUND, got %ld %.300s", paths[i], r.status, r.body);
        fg_response_fini(&r);
    }
    fg_response r;
    post(s, "/v1/payments/abc%2Fdef/cancel", "{\"cancelReason\":\"r\"}", NULL, NULL, &r);
    assert_error(&r, 404, "NOT_FOUND");
    fg_response_fini(&r);
    post(s, "/v1/payments/abc%00/cancel", "{\"cancelReason\":\"r\"}", NULL, NULL, &r);
    assert_error(&r, 404, "NOT_FOUND");
    fg_response_fini(&r);
    assert_payment(s, "abc", "DONE", 1000, 0);
    stop_server(s);
}
END_TEST

Suite *make_suite(void)
{
    Suite *su = suite_create("blackbox_ledger_api");

    TCase *tc = add_tcase(su, "cancel", 30);
    tcase_add_test(tc, test_full_cancel_returns_canceled_payment_with_one_cancel);
    tcase_add_test(tc, test_two_partial_cancels_then_the_rest);
    tcase_add_test(tc, test_cancel_reason_of_200_korean_characters_is_accepted);
    tcase_add_test(tc, test_cancel_errors_leave_the_payment_unchanged);
    tcase_add_test(tc, test_cancel_checks_run_in_spec_order);
    tcase_add_test(tc, test_consecutive_cancel_window_500ms_measured_from_the_commit);
    tcase_add_test(tc, test_consecutive_cancel_window_defaults_to_1000ms);
    tcase_add_test(tc, test_overlapping_cancels_loser_judged_against_winners_balance);
    tcase_add_test(tc, test_cancel_resend_with_same_key_is_replayed);
    tcase_add_test(tc, test_cancel_same_key_in_flight_gets_409);

    tc = add_tcase(su, "transactions", 30);
    tcase_add_test(tc, test_transactions_list_approvals_and_cancels_in_commit_order);
    tcase_add_test(tc, test_transactions_date_bounds);
    tcase_add_test(tc, test_transactions_bad_cursor_and_limits);
    tcase_add_test(tc, test_transactions_default_limit_is_100);

    tc = add_tcase(su, "sessions", 30);
    tcase_add_test(tc, test_registered_session_confirm_must_match_order_and_amount);
    tcase_add_test(tc, test_duplicate_session_order_id_gets_duplicated_order_id);
    tcase_add_test(tc, test_session_expires_after_session_ttl);
    tcase_add_test(tc, test_expiry_seen_first_by_the_admin_listing_is_counted);
    tcase_add_test(tc, test_strict_sessions_require_a_registered_session);

    tc = add_tcase(su, "test_codes_and_paths", 30);
    tcase_add_test(tc, test_test_code_on_confirm_forces_error_and_stores_nothing);
    tcase_add_test(tc, test_test_code_on_cancel_forces_error_and_stores_nothing);
    tcase_add_test(tc, test_test_code_is_ignored_for_a_live_key);
    tcase_add_test(tc, test_paths_hiding_a_slash_or_nul_get_404_not_found);
    return su;
}
