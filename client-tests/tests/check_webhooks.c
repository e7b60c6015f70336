/* check_webhooks.c -- black-box tests of webhooks and the gateway clock (docs/webhooks.md
 * §6.1-§6.5, §6.7; docs/edge-rules.md §7 "Webhooks"): retries on the gateway clock (1 and 4 minutes, at most 8 attempts), headers and
 * bodies, one event per transition with the Payment as it was, the profile's delay, duplicate
 * and drop faults and their determinism, resend, reset, the admin API's bad inputs, hostile
 * receivers, and the business timers the clock drives (session expiry, idempotency TTL). A
 * scripted receiver (client-tests/receiver.h) on 127.0.0.1 port 0 records what arrives; every
 * wait polls the receiver or the deliveries journal with a bound. */
#define _GNU_SOURCE

#include <check.h>
#include <arpa/inet.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "check_main.h"
#include "receiver.h"
#include "testkit.h"

#define WAIT_MS 10000
#define TID_RE "^whtrans_[a-z2-7]{26}$"
#define KST_RE "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\+09:00$"
#define CREATED_RE "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{1,6})?$"
#define EVENT "PAYMENT_STATUS_CHANGED"

#define RX(st) ((struct rx_answer){RX_STATUS, (st)})
#define RX_DO(act) ((struct rx_answer){(act), 0})

/* ---- helpers ------------------------------------------------------------------------------ */

static struct receiver *rx_start(const struct rx_answer *script, size_t n)
{
    struct receiver *rx = receiver_start(script, n);
    ck_assert_msg(rx != NULL, "the receiver did not start");
    return rx;
}

static struct receiver *rx_always(struct rx_answer a)
{
    return rx_start(&a, 1);
}

/* Start with `profile_json` (NULL: instant), --webhook-url rx's URL (rx NULL: none) and `more`
 * arguments (NULL-terminated, may be NULL). */
static fg_server *start_hooked(const struct receiver *rx, const char *profile_json,
                               const char *const *more)
{
    const char *args[32];
    size_t n = 0;
    if (rx) {
        args[n++] = "--webhook-url";
        args[n++] = receiver_url(rx);
    }
    for (size_t i = 0; more && more[i]; i++) {
        ck_assert(n < 31);
        args[n++] = more[i];
    }
    args[n] = NULL;
    return start_args(profile_json, args);
}

/* A profile with everything instant and this '-quoted "webhooks" section. Caller frees. */
static char *webhook_profile(const char *name, const char *section)
{
    char buf[1024];
    snprintf(buf, sizeof buf,
             "{'name':'%s','routes':{'default':{'latency':{'dist':'fixed','ms':0}}},"
             "'webhooks':%s}", name, section);
    return dq(buf);
}

/* A confirm that must succeed: its response in *r (caller finis it). */
static void confirm_ok(const fg_server *s, const char *pk, const char *oid, fg_response *r)
{
    confirm_fresh(s, pk, oid, 10000, NULL, 0, r);
    assert_done(r, pk, oid);
}

/* POST /v1/payments/{pk}/cancel of `amount` (0: the rest). */
static void cancel(const fg_server *s, const char *pk, long long amount, fg_response *r)
{
    char path[FG_PATH_LEN], body[160];
    snprintf(path, sizeof path, "/v1/payments/%s/cancel", pk);
    if (amount > 0)
        snprintf(body, sizeof body, "{\"cancelReason\":\"change of mind\",\"cancelAmount\":%lld}",
                 amount);
    else
        snprintf(body, sizeof body, "{\"cancelReason\":\"change of mind\"}");
    const char *headers[] = {s->auth_header, NULL};
    fg_request req = {.method = "POST", .path = path, .body = body, .headers = headers};
    fg_http(s, NULL, &req, r);
}

/* POST /__admin/clock {"advance_s": sec}; require 200. */
static void advance(const fg_server *s, double sec)
{
    char body[64];
    snprintf(body, sizeof body, "{\"advance_s\":%.6f}", sec);
    fg_response r;
    admin_call(s, "POST", "/__admin/clock", body, NULL, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
}

/* GET /__admin/clock's offset_s. */
static double clock_offset_s(const fg_server *s)
{
    json_t *c = admin_json(s, "/__admin/clock");
    ck_assert_msg(matches(KST_RE, json_str(c, "now")), "clock now \"%s\"", json_str(c, "now"));
    double off = jnum(c, "offset_s");
    json_decref(c);
    return off;
}

/* The deliveries journal, filtered by `query` ("paymentKey=..."; NULL: all): a new reference
 * to its "deliveries" array. */
static json_t *deliveries(const fg_server *s, const char *query)
{
    char path[512];
    snprintf(path, sizeof path, "/__admin/webhooks/deliveries%s%s", query ? "?" : "",
             query ? query : "");
    json_t *root = admin_json(s, path);
    json_t *d = json_object_get(root, "deliveries");
    ck_assert_msg(json_is_array(d), "%s: no \"deliveries\" array", path);
    json_incref(d);
    json_decref(root);
    return d;
}

static char *deliveries_text(const fg_server *s)
{
    json_t *d = deliveries(s, NULL);
    char *t = json_dumps(d, JSON_COMPACT);
    json_decref(d);
    return t;
}

/* The number of attempts of delivery `d` that have ended (duration_ms is set), and whether
 * every one of them has. */
static size_t ended_attempts(const json_t *d, bool *all_ended)
{
    json_t *a = json_object_get(d, "attempts");
    ck_assert(json_is_array(a));
    size_t n = 0;
    for (size_t i = 0; i < json_array_size(a); i++)
        if (json_is_number(json_object_get(json_array_get(a, i), "duration_ms")))
            n++;
    *all_ended = n == json_array_size(a);
    return n;
}

/* Poll until the only original delivery of paymentKey `pk` (no duplicate_of) has exactly `n`
 * attempts, all ended, at most WAIT_MS. A new reference to it. */
static json_t *wait_attempts(const fg_server *s, const char *pk, size_t n)
{
    char q[160];
    snprintf(q, sizeof q, "paymentKey=%s", pk);
    int64_t deadline = fg_now_ms() + WAIT_MS;
    for (;;) {
        json_t *all = deliveries(s, q);
        json_t *d = json_array_size(all) >= 1 ? json_array_get(all, 0) : NULL;
        bool ended = false;
        if (d && ended_attempts(d, &ended) == n && ended &&
            json_array_size(json_object_get(d, "attempts")) == n) {
            json_incref(d);
            json_decref(all);
            return d;
        }
        json_decref(all);
        if (fg_now_ms() > deadline) {
            char *t = deliveries_text(s);
            ck_abort_msg("%s: no delivery with %zu ended attempts within %d ms: %.3000s", pk, n,
                         WAIT_MS, t);
        }
        fg_pause_ms(5);
    }
}

/* Poll until the first delivery of `pk` has status `status`; a new reference to it. */
static json_t *wait_status(const fg_server *s, const char *pk, const char *status)
{
    char q[160];
    snprintf(q, sizeof q, "paymentKey=%s", pk);
    int64_t deadline = fg_now_ms() + WAIT_MS;
    for (;;) {
        json_t *all = deliveries(s, q);
        json_t *d = json_array_size(all) >= 1 ? json_array_get(all, 0) : NULL;
        if (d && json_is_str(d, "status", status)) {
            json_incref(d);
            json_decref(all);
            return d;
        }
        json_decref(all);
        if (fg_now_ms() > deadline) {
            char *t = deliveries_text(s);
            ck_abort_msg("%s: no delivery %s within %d ms: %.3000s", pk, status, WAIT_MS, t);
        }
        fg_pause_ms(5);
    }
}

/* Attempt i of delivery d (borrowed). */
static json_t *attempt(const json_t *d, size_t i)
{
    json_t *a = json_array_get(json_object_get(d, "attempts"), i);
    ck_assert_msg(json_is_object(a), "no attempt %zu", i);
    return a;
}

/* Seconds since the epoch of a Korea-time "yyyy-MM-ddTHH:mm:ss+09:00". */
static int64_t kst_s(const char *t)
{
    ck_assert_msg(t && matches(KST_RE, t), "not a Korea time: \"%s\"", t ? t : "(null)");
    struct tm tm = {0};
    ck_assert(sscanf(t, "%4d-%2d-%2dT%2d:%2d:%2d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                     &tm.tm_hour, &tm.tm_min, &tm.tm_sec) == 6);
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return (int64_t)timegm(&tm) - 9 * 3600;
}

static int64_t next_at_s(const json_t *d)
{
    return kst_s(json_str(d, "next_attempt_at"));
}

static int64_t attempt_at_s(const json_t *d, size_t i)
{
    return kst_s(json_str(attempt(d, i), "at"));
}

/* fakegate_webhook_attempts_total{event_type="PAYMENT_STATUS_CHANGED",result=...}. */
static double wh_attempts(const fg_server *s, const char *result)
{
    struct prom p;
    metrics(s, &p, NULL);
    double v = prom_get(&p, "fakegate_webhook_attempts_total", "event_type", EVENT, "result",
                        result, NULL);
    prom_free(&p);
    return v;
}

static double wh_pending(const fg_server *s)
{
    return metric1(s, "fakegate_webhook_pending", NULL, NULL);
}

/* Request i of rx (failing the test if it has not arrived). */
static struct rx_request got(struct receiver *rx, size_t i)
{
    struct rx_request q;
    ck_assert_msg(receiver_get(rx, i, &q), "request %zu has not arrived (%zu did)", i,
                  receiver_count(rx));
    return q;
}

/* Wait for exactly `n` requests (at most WAIT_MS) and require that many. */
static void expect_requests(struct receiver *rx, size_t n)
{
    size_t k = receiver_wait(rx, n, WAIT_MS);
    ck_assert_msg(k == n, "the receiver got %zu requests, want %zu", k, n);
}

/* A received body as JSON (new reference), with its "data" object checked for `pk`. */
static json_t *body_json(const struct rx_request *q)
{
    json_error_t e;
    json_t *b = json_loadb(q->body, q->body_len, JSON_REJECT_DUPLICATES, &e);
    ck_assert_msg(b != NULL, "webhook body is not JSON (%s): %.500s", e.text, q->body);
    ck_assert_msg(json_is_str(b, "eventType", EVENT), "eventType: %.500s", q->body);
    ck_assert_msg(json_is_object(json_object_get(b, "data")), "no data: %.500s", q->body);
    return b;
}

static const char *data_str(const json_t *body, const char *key)
{
    return json_str(json_object_get(body, "data"), key);
}

/* ---- retries on the gateway clock --------------------------------------------------------- */

START_TEST(test_500_500_200_retries_after_60_then_240_gateway_seconds)
{
    struct rx_answer script[] = {RX(500), RX(500), RX(200)};
    struct receiver *rx = rx_start(script, 3);
    fg_server *s = start_hooked(rx, NULL, NULL);
    fg_response r;
    confirm_ok(s, "pk_retry_1", "order_retry_1", &r);
    fg_response_fini(&r);

    expect_requests(rx, 1);
    json_t *d1 = wait_attempts(s, "pk_retry_1", 1);
    ck_assert(json_is_str(d1, "status", "pending"));
    ck_assert_int_eq(json_int(attempt(d1, 0), "http_status"), 500);
    ck_assert_int_eq(json_int(attempt(d1, 0), "retried_count"), 0);
    int64_t at0 = attempt_at_s(d1, 0), due1 = next_at_s(d1);
    ck_assert_msg(due1 == at0 + 60, "next_attempt_at %s, first attempt at %s",
                  json_str(d1, "next_attempt_at"), json_str(attempt(d1, 0), "at"));
    ck_assert_uint_eq(receiver_count(rx), 1);

    /* 59 s: not due yet (the attempt was made milliseconds ago, so 1 s of slack remains). */
    advance(s, 59);
    json_t *d = wait_attempts(s, "pk_retry_1", 1);
    ck_assert_str_eq(json_str(d, "next_attempt_at"), json_str(d1, "next_attempt_at"));
    ck_assert_uint_eq(receiver_count(rx), 1);
    json_decref(d);

    advance(s, 1);
    expect_requests(rx, 2);
    json_t *d2 = wait_attempts(s, "pk_retry_1", 2);
    ck_assert(json_is_str(d2, "status", "pending"));
    ck_assert_int_eq(json_int(attempt(d2, 1), "http_status"), 500);
    int64_t at1 = attempt_at_s(d2, 1), due2 = next_at_s(d2);
    ck_assert_msg(at1 >= due1 && at1 <= due1 + 30, "attempt 2 at %s, due %s",
                  json_str(attempt(d2, 1), "at"), json_str(d1, "next_attempt_at"));
    ck_assert_msg(due2 == due1 + 240, "after attempt 2 next_attempt_at %s, want %s + 240 s",
                  json_str(d2, "next_attempt_at"), json_str(d1, "next_attempt_at"));

    advance(s, 240);
    expect_requests(rx, 3);
    json_t *d3 = wait_status(s, "pk_retry_1", "delivered");
    ck_assert_uint_eq(json_array_size(json_object_get(d3, "attempts")), 3);
    ck_assert(json_is_null(json_object_get(d3, "next_attempt_at")));
    int want_status[] = {500, 500, 200};
    for (size_t i = 0; i < 3; i++) {
        json_t *a = attempt(d3, i);
        ck_assert_int_eq(json_int(a, "http_status"), want_status[i]);
        ck_assert_int_eq(json_int(a, "retried_count"), (long long)i);
        ck_assert(json_is_null(json_object_get(a, "error")));
    }
    ck_assert_msg(attempt_at_s(d3, 2) >= due2, "attempt 3 at %s before its due time",
                  json_str(attempt(d3, 2), "at"));

    const char *tid = json_str(d3, "transmission_id");
    ck_assert_msg(matches(TID_RE, tid), "transmission_id \"%s\"", tid);
    for (size_t i = 0; i < 3; i++) {
        struct rx_request q = got(rx, i);
        ck_assert_msg(q.transmission_id && strcmp(q.transmission_id, tid) == 0,
                      "request %zu: transmission id %s, the journal's %s", i,
                      q.transmission_id ? q.transmission_id : "(none)", tid);
        ck_assert_int_eq(q.retried_count, (int)i);
        ck_assert_int_eq(q.answered, want_status[i]);
        ck_assert_msg(q.transmission_time &&
                          strcmp(q.transmission_time, json_str(attempt(d3, i), "at")) == 0,
                      "request %zu: transmission time %s, the attempt's at %s", i,
                      q.transmission_time ? q.transmission_time : "(none)",
                      json_str(attempt(d3, i), "at"));
    }
    ck_assert(wh_attempts(s, "failed") == 2);
    ck_assert(wh_attempts(s, "delivered") == 1);
    ck_assert(wh_pending(s) == 0);
    json_decref(d1);
    json_decref(d2);
    json_decref(d3);
    stop_server(s);
    receiver_stop(rx);
}
END_TEST

/* The 59 s advance proven with a barrier: a second payment's event, confirmed after the advance,
 * is only attempted after the dispatcher has looked at its timers with the advanced clock. */
START_TEST(test_retry_not_fired_one_second_early)
{
    struct rx_answer script[] = {RX(500), RX(200), RX(200)};
    struct receiver *rx = rx_start(script, 3);
    fg_server *s = start_hooked(rx, NULL, NULL);
    fg_response r;
    confirm_ok(s, "pk_early_1", "order_early_1", &r);
    fg_response_fini(&r);
    json_t *d1 = wait_attempts(s, "pk_early_1", 1);
    advance(s, 59);
    confirm_ok(s, "pk_early_2", "order_early_2", &r);
    fg_response_fini(&r);
    json_decref(wait_status(s, "pk_early_2", "delivered"));
    ck_assert_uint_eq(receiver_count(rx), 2);
    struct rx_request q = got(rx, 1);
    json_t *b = body_json(&q);
    ck_assert_str_eq(data_str(b, "paymentKey"), "pk_early_2");
    json_decref(b);
    json_t *d = wait_attempts(s, "pk_early_1", 1);
    ck_assert_str_eq(json_str(d, "next_attempt_at"), json_str(d1, "next_attempt_at"));
    json_decref(d);
    advance(s, 1);
    expect_requests(rx, 3);
    json_decref(wait_status(s, "pk_early_1", "delivered"));
    json_decref(d1);
    stop_server(s);
    receiver_stop(rx);
}
END_TEST

/* After 8 failed attempts (1, 4, 16, 64, 256, 1024, 4096 minutes apart) the delivery is failed;
 * one large step of the clock fires them all, in due order. */
START_TEST(test_eight_attempts_then_failed)
{
    struct receiver *rx = rx_always(RX(503));
    fg_server *s = start_hooked(rx, NULL, NULL);
    fg_response r;
    confirm_ok(s, "pk_fail_8", "order_fail_8", &r);
    fg_response_fini(&r);
    json_t *d1 = wait_attempts(s, "pk_fail_8", 1);
    int64_t base = attempt_at_s(d1, 0);
    advance(s, 7 * 86400);
    json_t *d = wait_status(s, "pk_fail_8", "failed");
    ck_assert_uint_eq(json_array_size(json_object_get(d, "attempts")), 8);
    ck_assert(json_is_null(json_object_get(d, "next_attempt_at")));
    for (size_t i = 0; i < 8; i++) {
        ck_assert_int_eq(json_int(attempt(d, i), "retried_count"), (long long)i);
        ck_assert_int_eq(json_int(attempt(d, i), "http_status"), 503);
        if (i > 0)
            ck_assert(attempt_at_s(d, i) >= attempt_at_s(d, i - 1));
    }
    ck_assert(attempt_at_s(d, 7) >= base + 7 * 86400);
    expect_requests(rx, 8);
    for (size_t i = 0; i < 8; i++)
        ck_assert_int_eq(got(rx, i).retried_count, (int)i);
    ck_assert(wh_attempts(s, "failed") == 8);
    ck_assert(wh_pending(s) == 0);
    /* Nothing is left to fire. */
    advance(s, 30 * 86400);
    confirm_ok(s, "pk_fail_8b", "order_fail_8b", &r); /* a barrier: its attempt comes after */
    fg_response_fini(&r);
    json_decref(wait_attempts(s, "pk_fail_8b", 1));
    ck_assert_uint_eq(receiver_count(rx), 9);
    json_decref(d1);
    json_decref(d);
    stop_server(s);
    receiver_stop(rx);
}
END_TEST

/* ---- headers and bodies ------------------------------------------------------------------- */

START_TEST(test_headers_and_body_of_a_done_event)
{
    struct receiver *rx = rx_always(RX(200));
    fg_server *s = start_hooked(rx, NULL, NULL);
    fg_response r;
    confirm_ok(s, "pk_hdr_1", "order_hdr_1", &r);
    expect_requests(rx, 1);
    struct rx_request q = got(rx, 0);
    ck_assert_str_eq(q.path, "/hook");
    ck_assert_msg(q.content_type && strcmp(q.content_type, "application/json") == 0,
                  "Content-Type %s", q.content_type ? q.content_type : "(none)");
    ck_assert_msg(q.transmission_id && matches(TID_RE, q.transmission_id), "transmission id %s",
                  q.transmission_id ? q.transmission_id : "(none)");
    ck_assert_msg(q.transmission_time && matches(KST_RE, q.transmission_time),
                  "transmission time %s", q.transmission_time ? q.transmission_time : "(none)");
    ck_assert_int_eq(q.retried_count, 0);
    json_t *b = body_json(&q);
    ck_assert_uint_eq(json_object_size(b), 3);
    const char *created = json_str(b, "createdAt");
    ck_assert_msg(matches(CREATED_RE, created) && !matches("\\.[0-9]*0$", created),
                  "createdAt \"%s\"", created);
    json_t *data = json_object_get(b, "data");
    ck_assert_str_eq(json_str(data, "status"), "DONE");
    ck_assert_str_eq(json_str(data, "paymentKey"), "pk_hdr_1");
    ck_assert_str_eq(json_str(data, "orderId"), "order_hdr_1");
    ck_assert_str_eq(json_str(data, "lastTransactionKey"), json_str(r.json, "lastTransactionKey"));
    ck_assert_msg(json_equal(data, r.json), "data is not the confirm's Payment:\n%.2000s\n%.2000s",
                  q.body, r.body);
    /* The attempt's time is the gateway clock's: within a minute of it. */
    json_t *c = admin_json(s, "/__admin/clock");
    int64_t now = kst_s(json_str(c, "now")), sent = kst_s(q.transmission_time);
    ck_assert_msg(sent <= now && sent >= now - 60, "transmission time %s, clock %s",
                  q.transmission_time, json_str(c, "now"));
    json_decref(c);
    json_t *d = wait_status(s, "pk_hdr_1", "delivered");
    ck_assert_str_eq(json_str(d, "transmission_id"), q.transmission_id);
    ck_assert_str_eq(json_str(d, "event_type"), EVENT);
    ck_assert_str_eq(json_str(d, "url"), receiver_url(rx));
    ck_assert_str_eq(json_str(d, "order_id"), "order_hdr_1");
    ck_assert_str_eq(json_str(d, "transaction_key"), json_str(r.json, "lastTransactionKey"));
    ck_assert(json_is_null(json_object_get(d, "duplicate_of")));
    ck_assert_msg(json_equal(json_object_get(d, "body"), b), "journal body differs");
    ck_assert_str_eq(json_str(attempt(d, 0), "at"), q.transmission_time);
    json_decref(d);
    json_decref(b);
    fg_response_fini(&r);
    stop_server(s);
    receiver_stop(rx);
}
END_TEST

/* The request whose body's data.status is `status` (exactly one), as JSON. */
static json_t *request_with_status(struct receiver *rx, const char *status, size_t *index)
{
    json_t *found = NULL;
    for (size_t i = 0; i < receiver_count(rx); i++) {
        struct rx_request q = got(rx, i);
        json_t *b = body_json(&q);
        if (strcmp(data_str(b, "status"), status) == 0) {
            ck_assert_msg(found == NULL, "two %s events", status);
            found = b;
            *index = i;
        } else {
            json_decref(b);
        }
    }
    ck_assert_msg(found != NULL, "no %s event", status);
    return found;
}

START_TEST(test_confirm_and_partial_cancel_send_two_events)
{
    struct receiver *rx = rx_always(RX(200));
    const char *more[] = {"--consecutive-cancel-ms", "0", NULL};
    fg_server *s = start_hooked(rx, NULL, more);
    fg_response r, c;
    confirm_ok(s, "pk_pc_1", "order_pc_1", &r);
    cancel(s, "pk_pc_1", 3000, &c);
    assert_status(&c, 200);
    expect_requests(rx, 2);
    size_t i_done, i_pc;
    json_t *done = request_with_status(rx, "DONE", &i_done);
    json_t *pc = request_with_status(rx, "PARTIAL_CANCELED", &i_pc);
    const char *ltk_done = data_str(done, "lastTransactionKey");
    const char *ltk_pc = data_str(pc, "lastTransactionKey");
    ck_assert_uint_eq(strlen(ltk_done), 32);
    ck_assert_uint_eq(strlen(ltk_pc), 32);
    ck_assert_str_ne(ltk_done, ltk_pc);
    ck_assert_str_eq(ltk_done, json_str(r.json, "lastTransactionKey"));
    ck_assert_str_eq(ltk_pc, json_str(c.json, "lastTransactionKey"));
    ck_assert_str_eq(data_str(pc, "paymentKey"), "pk_pc_1");
    ck_assert_str_eq(data_str(pc, "orderId"), "order_pc_1");
    ck_assert_str_eq(data_str(done, "paymentKey"), "pk_pc_1");
    ck_assert_str_eq(data_str(done, "orderId"), "order_pc_1");
    json_t *cancels = json_object_get(json_object_get(pc, "data"), "cancels");
    ck_assert_uint_eq(json_array_size(cancels), 1);
    ck_assert_str_eq(json_str(json_array_get(cancels, 0), "transactionKey"), ltk_pc);
    ck_assert_int_eq(json_int(json_object_get(pc, "data"), "balanceAmount"), 7000);
    ck_assert(json_is_null(json_object_get(json_object_get(done, "data"), "cancels")) ||
              json_array_size(json_object_get(json_object_get(done, "data"), "cancels")) == 0);
    ck_assert_str_ne(got(rx, i_done).transmission_id, got(rx, i_pc).transmission_id);

    /* The rest: CANCELED, a third event with the second cancel's key. */
    fg_response c2;
    cancel(s, "pk_pc_1", 0, &c2);
    assert_status(&c2, 200);
    expect_requests(rx, 3);
    size_t i_c;
    json_t *canceled = request_with_status(rx, "CANCELED", &i_c);
    const char *ltk_c = data_str(canceled, "lastTransactionKey");
    ck_assert_str_eq(ltk_c, json_str(c2.json, "lastTransactionKey"));
    ck_assert_str_ne(ltk_c, ltk_pc);
    ck_assert_str_ne(ltk_c, ltk_done);
    json_t *cs = json_object_get(json_object_get(canceled, "data"), "cancels");
    ck_assert_uint_eq(json_array_size(cs), 2);
    ck_assert_str_eq(json_str(json_array_get(cs, 0), "transactionKey"), ltk_pc);
    ck_assert_str_eq(json_str(json_array_get(cs, 1), "transactionKey"), ltk_c);
    ck_assert_int_eq(json_int(json_object_get(canceled, "data"), "balanceAmount"), 0);

    /* The journal names each event's transaction. */
    json_t *ds = deliveries(s, "orderId=order_pc_1");
    ck_assert_uint_eq(json_array_size(ds), 3);
    const char *keys[3] = {ltk_done, ltk_pc, ltk_c};
    for (size_t k = 0; k < 3; k++) {
        bool seen = false;
        for (size_t i = 0; i < 3; i++)
            seen |= json_is_str(json_array_get(ds, i), "transaction_key", keys[k]);
        ck_assert_msg(seen, "no delivery with transaction_key %s", keys[k]);
    }
    json_decref(ds);
    json_decref(canceled);
    fg_response_fini(&c2);
    json_decref(done);
    json_decref(pc);
    fg_response_fini(&r);
    fg_response_fini(&c);
    stop_server(s);
    receiver_stop(rx);
}
END_TEST

/* A DONE event retried after a partial cancel still carries the payment as it was approved. */
START_TEST(test_retried_done_after_a_cancel_still_says_done)
{
    struct rx_answer script[] = {RX(500), RX(200)};
    struct receiver *rx = rx_start(script, 2);
    const char *more[] = {"--consecutive-cancel-ms", "0", NULL};
    fg_server *s = start_hooked(rx, NULL, more);
    fg_response r, c;
    confirm_ok(s, "pk_rd_1", "order_rd_1", &r);
    expect_requests(rx, 1);
    json_decref(wait_attempts(s, "pk_rd_1", 1));
    cancel(s, "pk_rd_1", 4000, &c);
    assert_status(&c, 200);
    expect_requests(rx, 2);
    struct rx_request first = got(rx, 0), second = got(rx, 1);
    json_t *b2 = body_json(&second);
    ck_assert_str_eq(data_str(b2, "status"), "PARTIAL_CANCELED");
    json_decref(b2);
    advance(s, 60);
    expect_requests(rx, 3);
    struct rx_request retry = got(rx, 2);
    ck_assert_str_eq(retry.transmission_id, first.transmission_id);
    ck_assert_int_eq(retry.retried_count, 1);
    ck_assert_msg(retry.body_len == first.body_len && memcmp(retry.body, first.body,
                                                             first.body_len) == 0,
                  "the retry's body differs:\n%s\n%s", first.body, retry.body);
    json_t *b = body_json(&retry);
    ck_assert_str_eq(data_str(b, "status"), "DONE");
    ck_assert_str_eq(data_str(b, "lastTransactionKey"), json_str(r.json, "lastTransactionKey"));
    ck_assert_int_eq(json_int(json_object_get(b, "data"), "balanceAmount"), 10000);
    json_decref(b);
    /* The payment itself has moved on. */
    char status[32];
    order_read(s, "order_rd_1", status, sizeof status, NULL, 0);
    ck_assert_str_eq(status, "PARTIAL_CANCELED");
    fg_response_fini(&r);
    fg_response_fini(&c);
    stop_server(s);
    receiver_stop(rx);
}
END_TEST

/* Confirm and cancel back to back, 20 times: each event is rendered as the payment was at its
 * own transition, however soon the next one follows. */
START_TEST(test_each_event_is_the_payment_at_its_transition)
{
    struct receiver *rx = rx_always(RX(200));
    const char *more[] = {"--consecutive-cancel-ms", "0", NULL};
    fg_server *s = start_hooked(rx, NULL, more);
    CURL *h = curl_easy_init();
    char approval[20][40];
    for (int i = 0; i < 20; i++) {
        char pk[32], oid[32], path[64];
        snprintf(pk, sizeof pk, "pk_race_%02d", i);
        snprintf(oid, sizeof oid, "order_race_%02d", i);
        fg_response r;
        fg_confirm_on(s, h, pk, oid, 10000, NULL, &r);
        assert_done(&r, pk, oid);
        snprintf(approval[i], sizeof approval[i], "%s", json_str(r.json, "lastTransactionKey"));
        fg_response_fini(&r);
        snprintf(path, sizeof path, "/v1/payments/%s/cancel", pk);
        const char *headers[] = {s->auth_header, NULL};
        fg_request req = {.method = "POST", .path = path, .headers = headers,
                          .body = "{\"cancelReason\":\"at once\"}"};
        fg_http(s, h, &req, &r);
        assert_status(&r, 200);
        fg_response_fini(&r);
    }
    curl_easy_cleanup(h);
    expect_requests(rx, 40);
    for (size_t i = 0; i < 40; i++) {
        struct rx_request q = got(rx, i);
        json_t *b = body_json(&q);
        json_t *data = json_object_get(b, "data");
        int k = atoi(json_str(data, "paymentKey") + strlen("pk_race_"));
        ck_assert(k >= 0 && k < 20);
        const char *status = json_str(data, "status");
        json_t *cancels = json_object_get(data, "cancels");
        if (strcmp(status, "DONE") == 0) {
            ck_assert_msg(json_is_null(cancels), "a DONE event with cancels: %s", q.body);
            ck_assert_int_eq(json_int(data, "balanceAmount"), 10000);
            ck_assert_str_eq(json_str(data, "lastTransactionKey"), approval[k]);
        } else {
            ck_assert_str_eq(status, "CANCELED");
            ck_assert_uint_eq(json_array_size(cancels), 1);
            ck_assert_int_eq(json_int(data, "balanceAmount"), 0);
            ck_assert_str_ne(json_str(data, "lastTransactionKey"), approval[k]);
        }
        json_decref(b);
    }
    stop_server(s);
    receiver_stop(rx);
}
END_TEST

/* ---- faults: drop, duplicate, delay, determinism ------------------------------------------ */

START_TEST(test_drop_p1_sends_nothing)
{
    struct receiver *rx = rx_always(RX(200));
    char *profile = webhook_profile("wh_drop", "{'drop':{'p':1}}");
    fg_server *s = start_hooked(rx, profile, NULL);
    fg_response r;
    confirm_ok(s, "pk_drop_1", "order_drop_1", &r);
    fg_response_fini(&r);
    /* A dropped delivery is settled when it is filed: no attempt is ever scheduled for it. */
    json_t *d = wait_status(s, "pk_drop_1", "dropped");
    ck_assert_uint_eq(json_array_size(json_object_get(d, "attempts")), 0);
    ck_assert(json_is_null(json_object_get(d, "next_attempt_at")));
    ck_assert_uint_eq(receiver_count(rx), 0);
    ck_assert(wh_attempts(s, "dropped") == 1);
    ck_assert(wh_attempts(s, "delivered") == 0);
    ck_assert(wh_pending(s) == 0);
    /* Not even a day later. */
    advance(s, 86400);
    json_t *again = wait_status(s, "pk_drop_1", "dropped");
    ck_assert_uint_eq(json_array_size(json_object_get(again, "attempts")), 0);
    ck_assert_uint_eq(receiver_count(rx), 0);
    json_decref(again);
    json_decref(d);

    /* The section follows the live profile: PUT one without it and the next event is sent. */
    put_profile(s, FG_PROFILE_INSTANT, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    confirm_ok(s, "pk_drop_2", "order_drop_2", &r);
    fg_response_fini(&r);
    json_decref(wait_status(s, "pk_drop_2", "delivered"));
    ck_assert_uint_eq(receiver_count(rx), 1);
    put_profile(s, profile, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    confirm_ok(s, "pk_drop_3", "order_drop_3", &r);
    fg_response_fini(&r);
    json_decref(wait_status(s, "pk_drop_3", "dropped"));
    ck_assert(wh_attempts(s, "dropped") == 2);
    free(profile);
    stop_server(s);
    receiver_stop(rx);
}
END_TEST

START_TEST(test_duplicate_p1_delivers_twice_with_the_same_id_and_body)
{
    struct receiver *rx = rx_always(RX(200));
    char *profile = webhook_profile(
        "wh_dup", "{'duplicate':{'p':1,'after':{'dist':'fixed','ms':200}}}");
    fg_server *s = start_hooked(rx, profile, NULL);
    fg_response r;
    confirm_ok(s, "pk_dup_1", "order_dup_1", &r);
    fg_response_fini(&r);
    expect_requests(rx, 2);
    struct rx_request a = got(rx, 0), b = got(rx, 1);
    ck_assert_str_eq(a.transmission_id, b.transmission_id);
    ck_assert_int_eq(a.retried_count, 0);
    ck_assert_int_eq(b.retried_count, 0);
    ck_assert(a.body_len == b.body_len && memcmp(a.body, b.body, a.body_len) == 0);
    double gap_ms = (double)(b.arrived_ns - a.arrived_ns) / 1e6;
    printf("check_webhooks: duplicate after 200 ms arrived %.1f ms after the original\n", gap_ms);
    ck_assert_msg(gap_ms >= 150, "the duplicate came %.1f ms after the original", gap_ms);

    json_t *ds = deliveries(s, "paymentKey=pk_dup_1");
    int64_t deadline = fg_now_ms() + WAIT_MS;
    while (!(json_array_size(ds) == 2 && json_is_str(json_array_get(ds, 0), "status", "delivered")
             && json_is_str(json_array_get(ds, 1), "status", "delivered"))) {
        ck_assert_msg(fg_now_ms() < deadline, "deliveries never both delivered");
        json_decref(ds);
        fg_pause_ms(5);
        ds = deliveries(s, "paymentKey=pk_dup_1");
    }
    json_t *d0 = json_array_get(ds, 0), *d1 = json_array_get(ds, 1);
    ck_assert(json_is_null(json_object_get(d0, "duplicate_of")));
    ck_assert_int_eq(json_int(d1, "duplicate_of"), json_int(d0, "id"));
    ck_assert_str_eq(json_str(d0, "transmission_id"), json_str(d1, "transmission_id"));
    ck_assert_str_eq(json_str(d0, "transmission_id"), a.transmission_id);
    ck_assert(wh_attempts(s, "duplicated") == 1);
    ck_assert(wh_attempts(s, "delivered") == 2);
    json_decref(ds);
    free(profile);
    stop_server(s);
    receiver_stop(rx);
}
END_TEST

START_TEST(test_delay_300ms_holds_the_first_attempt)
{
    struct receiver *rx = rx_always(RX(200));
    char *profile = webhook_profile("wh_delay", "{'delay':{'dist':'fixed','ms':300}}");
    fg_server *s = start_hooked(rx, profile, NULL);
    fg_response r;
    confirm_ok(s, "pk_delay_1", "order_delay_1", &r);
    int64_t answered = r.done_ns;
    fg_response_fini(&r);
    /* Filed and pending while it waits: read before the receiver has recorded anything, the
     * journal cannot show it delivered (the receiver records a request before answering it). */
    int64_t deadline = fg_now_ms() + WAIT_MS;
    json_t *ds;
    while (json_array_size(ds = deliveries(s, "paymentKey=pk_delay_1")) == 0) {
        ck_assert(fg_now_ms() < deadline);
        json_decref(ds);
        fg_pause_ms(5);
    }
    size_t seen = receiver_count(rx);
    json_t *d = json_array_get(ds, 0);
    ck_assert_msg(seen > 0 || json_is_str(d, "status", "pending"), "status %s",
                  json_str(d, "status"));
    json_decref(ds);
    expect_requests(rx, 1);
    double after_ms = (double)(got(rx, 0).arrived_ns - answered) / 1e6;
    printf("check_webhooks: delay 300 ms: arrived %.1f ms after the confirm's answer\n",
           after_ms);
    ck_assert_msg(after_ms >= 250, "arrived %.1f ms after the confirm's answer", after_ms);
    json_decref(wait_status(s, "pk_delay_1", "delivered"));
    free(profile);
    stop_server(s);
    receiver_stop(rx);
}
END_TEST

#define DET_N 40

struct det_row {
    char status[16];
    int duplicates;
};

/* One run of the determinism test: DET_N confirms with --seed 7, then per payment the status
 * of its original delivery and how many duplicates it has. */
static void det_run(const char *profile, struct det_row rows[DET_N])
{
    struct receiver *rx = rx_always(RX(200));
    const char *more[] = {"--seed", "7", NULL};
    fg_server *s = start_hooked(rx, profile, more);
    for (int i = 0; i < DET_N; i++) {
        char pk[32], oid[32];
        snprintf(pk, sizeof pk, "pk_det_%02d", i);
        snprintf(oid, sizeof oid, "order_det_%02d", i);
        fg_response r;
        confirm_ok(s, pk, oid, &r);
        fg_response_fini(&r);
    }
    /* Settled: every original filed and nothing pending. */
    int64_t deadline = fg_now_ms() + WAIT_MS;
    json_t *ds;
    for (;;) {
        ds = deliveries(s, NULL);
        size_t originals = 0, pending = 0;
        for (size_t i = 0; i < json_array_size(ds); i++) {
            json_t *d = json_array_get(ds, i);
            originals += json_is_null(json_object_get(d, "duplicate_of"));
            pending += json_is_str(d, "status", "pending");
        }
        if (originals == DET_N && pending == 0)
            break;
        ck_assert_msg(fg_now_ms() < deadline, "deliveries not settled: %zu originals, %zu pending",
                      originals, pending);
        json_decref(ds);
        fg_pause_ms(5);
    }
    memset(rows, 0, DET_N * sizeof *rows);
    size_t delivered = 0;
    for (size_t i = 0; i < json_array_size(ds); i++) {
        json_t *d = json_array_get(ds, i);
        int k = atoi(json_str(d, "payment_key") + strlen("pk_det_"));
        ck_assert(k >= 0 && k < DET_N);
        if (json_is_null(json_object_get(d, "duplicate_of")))
            snprintf(rows[k].status, sizeof rows[k].status, "%s", json_str(d, "status"));
        else
            rows[k].duplicates++;
        delivered += json_is_str(d, "status", "delivered");
        /* createdAt: the event's instant, approvedAt's second, its fraction trimmed. */
        json_t *body = json_object_get(d, "body");
        const char *created = json_str(body, "createdAt");
        const char *approved = json_str(json_object_get(body, "data"), "approvedAt");
        ck_assert_msg(matches(CREATED_RE, created) && !matches("\\.[0-9]*0$", created),
                      "createdAt \"%s\"", created);
        ck_assert_msg(strncmp(created, approved, 19) == 0, "createdAt %s, approvedAt %s",
                      created, approved);
    }
    ck_assert_uint_eq(receiver_count(rx), delivered);
    json_decref(ds);
    stop_server(s);
    receiver_stop(rx);
}

START_TEST(test_faults_repeat_with_the_same_seed)
{
    char *profile = webhook_profile("wh_det", "{'duplicate':{'p':0.3},'drop':{'p':0.3}}");
    struct det_row a[DET_N], b[DET_N];
    det_run(profile, a);
    det_run(profile, b);
    int dropped = 0, duplicated = 0, plain = 0;
    for (int i = 0; i < DET_N; i++) {
        ck_assert_msg(strcmp(a[i].status, b[i].status) == 0 && a[i].duplicates == b[i].duplicates,
                      "pk_det_%02d: run 1 %s with %d duplicates, run 2 %s with %d", i, a[i].status,
                      a[i].duplicates, b[i].status, b[i].duplicates);
        dropped += strcmp(a[i].status, "dropped") == 0;
        duplicated += a[i].duplicates > 0;
        plain += strcmp(a[i].status, "delivered") == 0 && a[i].duplicates == 0;
        ck_assert(a[i].duplicates <= 1);
        ck_assert(!(a[i].duplicates && strcmp(a[i].status, "dropped") == 0));
    }
    printf("check_webhooks: seed 7, %d events: %d dropped, %d duplicated, %d plain (both runs)\n",
           DET_N, dropped, duplicated, plain);
    ck_assert_msg(dropped > 0 && duplicated > 0 && plain > 0,
                  "%d dropped, %d duplicated, %d plain", dropped, duplicated, plain);
    free(profile);
}
END_TEST

/* A dropped delivery's body is rendered only when the journal shows it (it is never sent).
 * While events keep being filed, every listing must show each of its deliveries with its body.
 * The journal once listed a delivery filed between rendering the bodies and writing the list
 * with "body": null (found under make test SANITIZE=1, in test_faults_repeat_with_the_same_seed);
 * against that server this test failed in 4 of 30 runs, against the fixed one in none. */
#define FILED_N 300

struct filer {
    const fg_server *s;
    atomic_int failed;
    atomic_bool done;
};

static void *file_confirms(void *arg)
{
    struct filer *fl = arg;
    CURL *h = curl_easy_init();
    for (int i = 0; i < FILED_N; i++) {
        char pk[32], oid[32];
        snprintf(pk, sizeof pk, "pk_lb_%03d", i);
        snprintf(oid, sizeof oid, "order_lb_%03d", i);
        fg_response r;
        if (fg_confirm_on(fl->s, h, pk, oid, 1000, NULL, &r) != 0 || r.status != 200)
            atomic_fetch_add(&fl->failed, 1);
        fg_response_fini(&r);
    }
    curl_easy_cleanup(h);
    atomic_store(&fl->done, true);
    return NULL;
}

START_TEST(test_every_listed_delivery_has_its_body_while_events_are_filed)
{
    char *profile = webhook_profile("wh_lb", "{'drop':{'p':1}}");
    struct receiver *rx = rx_always(RX(200));
    fg_server *s = start_hooked(rx, profile, NULL);
    struct filer fl = {.s = s};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, file_confirms, &fl), 0);
    /* The whole journal each time: its bodies not yet rendered take a while to render, a
     * wide window for a filing to fall into. */
    size_t listings = 0, seen = 0;
    int64_t deadline = fg_now_ms() + 6 * WAIT_MS;
    while (seen < FILED_N) {
        ck_assert_msg(fg_now_ms() < deadline, "%zu of %d deliveries filed", seen, FILED_N);
        bool done = atomic_load(&fl.done);
        json_t *ds = deliveries(s, NULL);
        for (size_t i = 0; i < json_array_size(ds); i++) {
            json_t *d = json_array_get(ds, i);
            ck_assert_msg(json_is_str(d, "status", "dropped"), "delivery %lld is %s",
                          json_int(d, "id"), json_str(d, "status"));
            ck_assert_msg(json_is_object(json_object_get(d, "body")),
                          "listing %zu: delivery %lld (%s) has no body", listings,
                          json_int(d, "id"), json_str(d, "payment_key"));
        }
        seen = json_array_size(ds);
        json_decref(ds);
        listings++;
        if (done && seen < FILED_N)
            fg_pause_ms(1);
    }
    pthread_join(t, NULL);
    ck_assert_int_eq(atomic_load(&fl.failed), 0);
    ck_assert_uint_eq(receiver_count(rx), 0);
    printf("check_webhooks: %zu listings while %d dropped deliveries were filed\n", listings,
           FILED_N);
    stop_server(s);
    receiver_stop(rx);
    free(profile);
}
END_TEST

/* ---- resend and reset --------------------------------------------------------------------- */

START_TEST(test_resend_sends_the_same_event_with_the_next_retried_count)
{
    struct receiver *rx = rx_always(RX(200));
    fg_server *s = start_hooked(rx, NULL, NULL);
    fg_response r;
    confirm_ok(s, "pk_rs_1", "order_rs_1", &r);
    fg_response_fini(&r);
    json_t *d = wait_status(s, "pk_rs_1", "delivered");
    char path[128];
    snprintf(path, sizeof path, "/__admin/webhooks/deliveries/%lld/resend", json_int(d, "id"));
    for (int k = 1; k <= 2; k++) {
        admin_call(s, "POST", path, NULL, NULL, &r);
        assert_status(&r, 200);
        ck_assert_int_eq(json_int(r.json, "id"), json_int(d, "id"));
        fg_response_fini(&r);
        expect_requests(rx, (size_t)k + 1);
        json_decref(wait_attempts(s, "pk_rs_1", (size_t)k + 1));
    }
    struct rx_request q0 = got(rx, 0);
    for (size_t i = 1; i < 3; i++) {
        struct rx_request q = got(rx, i);
        ck_assert_str_eq(q.transmission_id, q0.transmission_id);
        ck_assert_int_eq(q.retried_count, (int)i);
        ck_assert(q.body_len == q0.body_len && memcmp(q.body, q0.body, q0.body_len) == 0);
    }
    json_t *after = wait_status(s, "pk_rs_1", "delivered");
    ck_assert_int_eq(json_int(attempt(after, 2), "retried_count"), 2);
    ck_assert_int_eq(json_int(attempt(after, 2), "http_status"), 200);
    json_decref(after);
    ck_assert(wh_attempts(s, "delivered") == 3);

    const char *bad[] = {"/__admin/webhooks/deliveries/999999/resend",
                         "/__admin/webhooks/deliveries/abc/resend",
                         "/__admin/webhooks/deliveries/-1/resend",
                         "/__admin/webhooks/deliveries/1x/resend"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        admin_call(s, "POST", bad[i], NULL, NULL, &r);
        assert_error(&r, 404, "NOT_FOUND");
        fg_response_fini(&r);
    }
    ck_assert_uint_eq(receiver_count(rx), 3);
    json_decref(d);
    stop_server(s);
    receiver_stop(rx);
}
END_TEST

/* A resend while retries are pending is an extra attempt: the schedule stays as it was. */
START_TEST(test_resend_of_a_pending_delivery_keeps_its_schedule)
{
    struct rx_answer script[] = {RX(500), RX(500), RX(200)};
    struct receiver *rx = rx_start(script, 3);
    fg_server *s = start_hooked(rx, NULL, NULL);
    fg_response r;
    confirm_ok(s, "pk_rp_1", "order_rp_1", &r);
    fg_response_fini(&r);
    json_t *d1 = wait_attempts(s, "pk_rp_1", 1);
    char path[128];
    snprintf(path, sizeof path, "/__admin/webhooks/deliveries/%lld/resend", json_int(d1, "id"));
    admin_call(s, "POST", path, NULL, NULL, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    json_t *d2 = wait_attempts(s, "pk_rp_1", 2);
    ck_assert(json_is_str(d2, "status", "pending"));
    ck_assert_int_eq(json_int(attempt(d2, 1), "retried_count"), 1);
    ck_assert_int_eq(json_int(attempt(d2, 1), "http_status"), 500);
    ck_assert_str_eq(json_str(d2, "next_attempt_at"), json_str(d1, "next_attempt_at"));
    advance(s, 60);
    json_t *d3 = wait_status(s, "pk_rp_1", "delivered");
    ck_assert_uint_eq(json_array_size(json_object_get(d3, "attempts")), 3);
    ck_assert_int_eq(json_int(attempt(d3, 2), "retried_count"), 2);
    ck_assert_uint_eq(receiver_count(rx), 3);
    ck_assert(wh_attempts(s, "failed") == 2 && wh_attempts(s, "delivered") == 1);
    json_decref(d1);
    json_decref(d2);
    json_decref(d3);
    stop_server(s);
    receiver_stop(rx);
}
END_TEST

/* A dropped event can still be sent by hand, once. */
START_TEST(test_resend_of_a_dropped_delivery_sends_it)
{
    struct receiver *rx = rx_always(RX(200));
    char *profile = webhook_profile("wh_drop", "{'drop':{'p':1}}");
    fg_server *s = start_hooked(rx, profile, NULL);
    fg_response r;
    confirm_ok(s, "pk_rdrop", "order_rdrop", &r);
    fg_response_fini(&r);
    json_t *d = wait_status(s, "pk_rdrop", "dropped");
    char path[128];
    snprintf(path, sizeof path, "/__admin/webhooks/deliveries/%lld/resend", json_int(d, "id"));
    admin_call(s, "POST", path, NULL, NULL, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    expect_requests(rx, 1);
    json_t *after = wait_status(s, "pk_rdrop", "delivered");
    ck_assert_uint_eq(json_array_size(json_object_get(after, "attempts")), 1);
    struct rx_request q = got(rx, 0);
    ck_assert_str_eq(q.transmission_id, json_str(d, "transmission_id"));
    ck_assert_int_eq(q.retried_count, 0);
    json_decref(after);
    json_decref(d);
    free(profile);
    stop_server(s);
    receiver_stop(rx);
}
END_TEST

START_TEST(test_reset_drops_pending_deliveries_and_the_clock_offset)
{
    struct receiver *rx = rx_always(RX(500));
    fg_server *s = start_hooked(rx, NULL, NULL);
    fg_response r;
    confirm_ok(s, "pk_reset_1", "order_reset_1", &r);
    fg_response_fini(&r);
    expect_requests(rx, 1);
    json_decref(wait_attempts(s, "pk_reset_1", 1));
    ck_assert(wh_pending(s) == 1);
    advance(s, 10);
    ck_assert(fabs(clock_offset_s(s) - 10) < 1e-6);
    reset_now(s);
    json_t *ds = deliveries(s, NULL);
    ck_assert_uint_eq(json_array_size(ds), 0);
    json_decref(ds);
    ck_assert(wh_pending(s) == 0);
    ck_assert(wh_attempts(s, "failed") == 0);
    ck_assert(clock_offset_s(s) == 0);

    advance(s, 86400);
    /* A barrier: an event filed after the advance is attempted only after the dispatcher has
     * looked at its timers with the advanced clock. */
    confirm_ok(s, "pk_reset_2", "order_reset_2", &r);
    fg_response_fini(&r);
    json_decref(wait_attempts(s, "pk_reset_2", 1));
    ck_assert_uint_eq(receiver_count(rx), 2);
    struct rx_request q = got(rx, 1);
    json_t *b = body_json(&q);
    ck_assert_str_eq(data_str(b, "paymentKey"), "pk_reset_2");
    json_decref(b);
    ds = deliveries(s, NULL);
    ck_assert_uint_eq(json_array_size(ds), 1);
    json_decref(ds);
    stop_server(s);
    receiver_stop(rx);
}
END_TEST

/* ---- bad input ---------------------------------------------------------------------------- */

START_TEST(test_bad_webhook_url_flag_exits_2_naming_it)
{
    const char *urls[] = {"ftp://x", "https://x", "http://user:pw@h/", "not a url",
                          "http:/127.0.0.1:1/one-slash", "http:///three-slashes", "http://h/#f",
                          "http://127.0.0.1:0/port-zero"};
    for (size_t i = 0; i < sizeof urls / sizeof urls[0]; i++) {
        const char *args[] = {"--port", "0", "--webhook-url", urls[i], NULL};
        fg_run_result rr;
        char err[FG_ERR_LEN];
        ck_assert_msg(fg_run(args, 10000, &rr, err) == 0, "%s", err);
        ck_assert_msg(rr.exit_status == 2 && strstr(rr.err, urls[i]) &&
                          strstr(rr.err, "--webhook-url"),
                      "--webhook-url %s: exit %d; stderr: %s", urls[i], rr.exit_status, rr.err);
        fg_run_result_fini(&rr);
    }
    /* The environment's list, comma-separated: the bad one is named. */
    setenv("FAKEGATE_WEBHOOK_URL", "http://127.0.0.1:9/a,ftp://bad.example", 1);
    const char *args[] = {"--port", "0", NULL};
    fg_run_result rr;
    char err[FG_ERR_LEN];
    ck_assert_msg(fg_run(args, 10000, &rr, err) == 0, "%s", err);
    unsetenv("FAKEGATE_WEBHOOK_URL");
    ck_assert_msg(rr.exit_status == 2 && strstr(rr.err, "ftp://bad.example"),
                  "FAKEGATE_WEBHOOK_URL: exit %d; stderr: %s", rr.exit_status, rr.err);
    fg_run_result_fini(&rr);
}
END_TEST

/* PUT /__admin/webhooks with `body` → 400 INVALID_REQUEST whose message contains `names`. */
static void put_webhooks_400(const fg_server *s, const char *body, const char *names)
{
    fg_response r;
    admin_call(s, "PUT", "/__admin/webhooks", body, NULL, &r);
    assert_error(&r, 400, "INVALID_REQUEST");
    ck_assert_msg(strstr(json_str(r.json, "message"), names), "%s: message %s", body,
                  json_str(r.json, "message"));
    fg_response_fini(&r);
}

START_TEST(test_put_webhooks_rejects_bad_lists_and_keeps_the_old_one)
{
    struct receiver *rx = rx_always(RX(200));
    fg_server *s = start_hooked(rx, NULL, NULL);
    json_t *before = admin_json(s, "/__admin/webhooks");
    ck_assert_str_eq(json_string_value(json_array_get(json_object_get(before, "urls"), 0)),
                     receiver_url(rx));
    ck_assert_str_eq(json_str(before, "success"), "200");
    put_webhooks_400(s, "{\"urls\":[\"https://x\"]}", "urls[0]");
    put_webhooks_400(s, "{\"urls\":[\"http://127.0.0.1:1/a\",\"ftp://x\"]}", "urls[1]");
    put_webhooks_400(s, "{\"urls\":[\"http:///x\"]}", "urls[0]");
    put_webhooks_400(s, "{\"urls\":\"x\"}", "urls");
    put_webhooks_400(s, "{\"urls\":[1]}", "urls[0]");
    put_webhooks_400(s, "{\"urls\":[],\"retry\":1}", "retry");
    put_webhooks_400(s, "{\"urls\":[],\"success\":\"3xx\"}", "success");
    put_webhooks_400(s, "{\"success\":\"2xx\"}", "urls");
    put_webhooks_400(s, "not json", "JSON");
    char body[2048] = "{\"urls\":[";
    for (int i = 0; i < 17; i++)
        snprintf(body + strlen(body), sizeof body - strlen(body), "%s\"http://127.0.0.1:1/%d\"",
                 i ? "," : "", i);
    strcat(body, "]}");
    put_webhooks_400(s, body, "16");
    json_t *after = admin_json(s, "/__admin/webhooks");
    ck_assert_msg(json_equal(before, after), "the receivers changed after refused PUTs");
    json_decref(after);

    /* A valid PUT replaces them; the old receiver gets nothing for a later event. */
    struct receiver *rx2 = rx_always(RX(204));
    snprintf(body, sizeof body, "{\"urls\":[\"%s\"],\"success\":\"2xx\"}", receiver_url(rx2));
    fg_response r;
    admin_call(s, "PUT", "/__admin/webhooks", body, NULL, &r);
    assert_status(&r, 200);
    ck_assert_str_eq(json_str(r.json, "success"), "2xx");
    ck_assert_str_eq(json_string_value(json_array_get(json_object_get(r.json, "urls"), 0)),
                     receiver_url(rx2));
    fg_response_fini(&r);
    confirm_ok(s, "pk_put_1", "order_put_1", &r);
    fg_response_fini(&r);
    json_t *d = wait_status(s, "pk_put_1", "delivered"); /* 204 counts under "2xx" */
    ck_assert_int_eq(json_int(attempt(d, 0), "http_status"), 204);
    json_decref(d);
    ck_assert_uint_eq(receiver_count(rx2), 1);
    ck_assert_uint_eq(receiver_count(rx), 0);
    json_decref(before);
    stop_server(s);
    receiver_stop(rx);
    receiver_stop(rx2);
}
END_TEST

/* Under the default success rule "200", a 204 is a failed attempt. */
START_TEST(test_204_fails_under_success_200)
{
    struct receiver *rx = rx_always(RX(204));
    fg_server *s = start_hooked(rx, NULL, NULL);
    fg_response r;
    confirm_ok(s, "pk_204", "order_204", &r);
    fg_response_fini(&r);
    json_t *d = wait_attempts(s, "pk_204", 1);
    ck_assert(json_is_str(d, "status", "pending"));
    ck_assert_int_eq(json_int(attempt(d, 0), "http_status"), 204);
    ck_assert(wh_attempts(s, "failed") == 1);
    json_decref(d);
    stop_server(s);
    receiver_stop(rx);
}
END_TEST

START_TEST(test_bad_clock_and_deliveries_input_is_400)
{
    fg_server *s = start_hooked(NULL, NULL, NULL);
    const char *bodies[] = {"{\"advance_s\":-1}", "{\"advance_s\":\"x\"}", "{}",
                            "{\"advance_s\":1,\"speed\":2}", "not json", "[1]",
                            "{\"advance_s\":null}", "{\"advance_s\":1e300}"};
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        fg_response r;
        admin_call(s, "POST", "/__admin/clock", bodies[i], NULL, &r);
        assert_error(&r, 400, "INVALID_REQUEST");
        fg_response_fini(&r);
        ck_assert_msg(clock_offset_s(s) == 0, "%s moved the clock", bodies[i]);
    }
    fg_response r;
    admin_call(s, "POST", "/__admin/clock", NULL, NULL, &r);
    assert_error(&r, 400, "INVALID_REQUEST");
    fg_response_fini(&r);
    advance(s, 1.5);
    ck_assert(fabs(clock_offset_s(s) - 1.5) < 1e-6);

    /* 100 years ahead in all, never more: the offset never wraps into the past and every
     * timestamp keeps its four-digit year. */
    admin_call(s, "POST", "/__admin/clock", "{\"advance_s\":3155759998.5}", NULL, &r);
    assert_status(&r, 200);
    ck_assert_msg(matches(KST_RE, json_str(r.json, "now")), "now %s", json_str(r.json, "now"));
    fg_response_fini(&r);
    for (int i = 0; i < 3; i++) {
        admin_call(s, "POST", "/__admin/clock", "{\"advance_s\":3155760000}", NULL, &r);
        assert_error(&r, 400, "INVALID_REQUEST");
        ck_assert(strstr(json_str(r.json, "message"), "advance_s") != NULL);
        fg_response_fini(&r);
    }
    ck_assert(clock_offset_s(s) == 3155760000.0);
    reset_now(s);
    ck_assert(clock_offset_s(s) == 0);
    advance(s, 1.5);

    const char *queries[] = {"foo=1", "status=bogus", "limit=0", "limit=-1", "limit=x",
                             "limit=10001", "status=pending&status=failed"};
    for (size_t i = 0; i < sizeof queries / sizeof queries[0]; i++) {
        char path[160];
        snprintf(path, sizeof path, "/__admin/webhooks/deliveries?%s", queries[i]);
        admin_call(s, "GET", path, NULL, NULL, &r);
        assert_error(&r, 400, "INVALID_REQUEST");
        fg_response_fini(&r);
    }
    json_t *ds = deliveries(s, "status=pending&limit=1");
    ck_assert_uint_eq(json_array_size(ds), 0);
    json_decref(ds);
    stop_server(s);
}
END_TEST

/* ---- hostile receivers -------------------------------------------------------------------- */

START_TEST(test_reset_by_the_receiver_is_a_failed_attempt)
{
    struct receiver *rx = rx_always(RX_DO(RX_RESET));
    fg_server *s = start_hooked(rx, NULL, NULL);
    fg_response r;
    confirm_ok(s, "pk_rst", "order_rst", &r);
    fg_response_fini(&r);
    json_t *d = wait_attempts(s, "pk_rst", 1);
    json_t *a = attempt(d, 0);
    ck_assert(json_is_null(json_object_get(a, "http_status")));
    ck_assert_msg(json_is_string(json_object_get(a, "error")) && json_str(a, "error")[0],
                  "no error for a reset");
    ck_assert(json_is_str(d, "status", "pending"));
    ck_assert(json_is_string(json_object_get(d, "next_attempt_at")));
    ck_assert(wh_attempts(s, "failed") == 1);
    ck_assert_uint_eq(receiver_count(rx), 1);
    ck_assert_int_eq(got(rx, 0).answered, 0);
    json_decref(d);
    stop_server(s);
    receiver_stop(rx);
}
END_TEST

/* One attempt is one request. Regression: the first attempt's 500 left its keep-alive
 * connection open, the second went out on it and was reset, and libcurl resent it by itself on a
 * new connection, so the receiver got two requests with retried-count 1 and the attempt was
 * journaled with the second one's 200. */
START_TEST(test_reset_on_a_reused_connection_is_one_failed_attempt)
{
    struct rx_answer script[] = {RX(500), RX_DO(RX_RESET), RX(200)};
    struct receiver *rx = rx_start(script, 3);
    fg_server *s = start_hooked(rx, NULL, NULL);
    fg_response r;
    confirm_ok(s, "pk_reuse", "order_reuse", &r);
    fg_response_fini(&r);
    json_decref(wait_attempts(s, "pk_reuse", 1));
    advance(s, 60);
    json_t *d = wait_attempts(s, "pk_reuse", 2);
    ck_assert_msg(receiver_count(rx) == 2, "one attempt, %zu requests: %s",
                  receiver_count(rx), json_dumps(d, JSON_COMPACT));
    ck_assert(json_is_null(json_object_get(attempt(d, 1), "http_status")));
    ck_assert(json_is_str(d, "status", "pending"));
    ck_assert(wh_attempts(s, "failed") == 2);
    json_decref(d);
    advance(s, 240);
    json_decref(wait_status(s, "pk_reuse", "delivered"));
    ck_assert_uint_eq(receiver_count(rx), 3);
    for (size_t i = 0; i < 3; i++)
        ck_assert_int_eq(got(rx, i).retried_count, (int)i);
    stop_server(s);
    receiver_stop(rx);
}
END_TEST

START_TEST(test_redirect_is_not_followed_and_fails)
{
    struct receiver *rx = rx_always(RX_DO(RX_REDIRECT));
    fg_server *s = start_hooked(rx, NULL, NULL);
    fg_response r;
    confirm_ok(s, "pk_302", "order_302", &r);
    fg_response_fini(&r);
    json_t *d = wait_attempts(s, "pk_302", 1);
    ck_assert_int_eq(json_int(attempt(d, 0), "http_status"), 302);
    ck_assert(json_is_string(json_object_get(attempt(d, 0), "error")));
    ck_assert(json_is_str(d, "status", "pending"));
    /* The attempt has ended: had curl followed the Location, that request would be in. */
    ck_assert_uint_eq(receiver_count(rx), 1);
    ck_assert(wh_attempts(s, "failed") == 1);
    json_decref(d);
    stop_server(s);
    receiver_stop(rx);
}
END_TEST

/* fakegate reads at most 64 KiB of an answer; the status it has read decides (webhook.c
 * attempt_done): a 200 with a 1 MiB body is delivered, the attempt noting the cut. */
START_TEST(test_huge_answer_body_the_status_decides)
{
    struct receiver *rx = rx_always(RX_DO(RX_HUGE_BODY));
    fg_server *s = start_hooked(rx, NULL, NULL);
    fg_response r;
    confirm_ok(s, "pk_huge", "order_huge", &r);
    fg_response_fini(&r);
    json_t *d = wait_status(s, "pk_huge", "delivered");
    ck_assert_uint_eq(json_array_size(json_object_get(d, "attempts")), 1);
    ck_assert_int_eq(json_int(attempt(d, 0), "http_status"), 200);
    ck_assert_msg(strstr(json_str(attempt(d, 0), "error"), "64 KiB"), "error %s",
                  json_str(attempt(d, 0), "error"));
    ck_assert(wh_attempts(s, "delivered") == 1);
    ck_assert(wh_attempts(s, "failed") == 0);
    json_decref(d);
    stop_server(s);
    receiver_stop(rx);
}
END_TEST

START_TEST(test_hanging_receiver_blocks_neither_answers_nor_shutdown)
{
    struct receiver *rx = rx_always(RX_DO(RX_HANG));
    fg_server *s = start_hooked(rx, NULL, NULL);
    fg_response r;
    confirm_ok(s, "pk_hang_0", "order_hang_0", &r);
    fg_response_fini(&r);
    expect_requests(rx, 1);
    double worst_ms = 0, sum_ms = 0;
    for (int i = 1; i <= 20; i++) {
        char pk[32], oid[32];
        snprintf(pk, sizeof pk, "pk_hang_%d", i);
        snprintf(oid, sizeof oid, "order_hang_%d", i);
        confirm_ok(s, pk, oid, &r);
        double ms = (double)(r.done_ns - r.sent_ns) / 1e6;
        worst_ms = ms > worst_ms ? ms : worst_ms;
        sum_ms += ms;
        fg_response_fini(&r);
    }
    printf("check_webhooks: 20 confirms while a receiver hangs: mean %.2f ms, worst %.2f ms\n",
           sum_ms / 20, worst_ms);
    expect_requests(rx, 21); /* every event's attempt hangs too, each on a connection of its own */
    ck_assert(wh_pending(s) == 21);
    json_t *ds = deliveries(s, "paymentKey=pk_hang_0");
    ck_assert(json_is_str(json_array_get(ds, 0), "status", "pending"));
    json_decref(ds);
    int64_t t0 = fg_now_ns();
    assert_clean_stop(s);
    printf("check_webhooks: SIGTERM with 21 deliveries hanging: exited in %.1f ms\n",
           (double)(fg_now_ns() - t0) / 1e6);
    fg_free(s);
    receiver_stop(rx);
}
END_TEST

/* A receiver that never answers fails the attempt after 10 s (docs/webhooks.md §6.4 [ours]). */
START_TEST(test_no_answer_within_10s_fails_the_attempt)
{
    struct receiver *rx = rx_always(RX_DO(RX_HANG));
    fg_server *s = start_hooked(rx, NULL, NULL);
    fg_response r;
    confirm_ok(s, "pk_to", "order_to", &r);
    fg_response_fini(&r);
    expect_requests(rx, 1);
    int64_t deadline = fg_now_ms() + 20000;
    json_t *d = NULL;
    for (;;) {
        json_t *ds = deliveries(s, "paymentKey=pk_to");
        bool ended = false;
        if (ended_attempts(json_array_get(ds, 0), &ended) == 1) {
            d = json_incref(json_array_get(ds, 0));
            json_decref(ds);
            break;
        }
        json_decref(ds);
        ck_assert_msg(fg_now_ms() < deadline, "the hung attempt never ended");
        fg_pause_ms(50);
    }
    json_t *a = attempt(d, 0);
    double ms = jnum(a, "duration_ms");
    ck_assert_msg(ms >= 9500 && ms < 15000, "the attempt ended after %.1f ms", ms);
    ck_assert(json_is_null(json_object_get(a, "http_status")));
    ck_assert(json_is_string(json_object_get(a, "error")));
    ck_assert(json_is_str(d, "status", "pending"));
    json_decref(d);
    stop_server(s);
    receiver_stop(rx);
}
END_TEST

/* No one listening: the attempt fails with a connection error and is retried. */
START_TEST(test_refused_connection_is_a_failed_attempt)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0); /* bound, not listening */
    socklen_t len = sizeof sa;
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/hook", (int)ntohs(sa.sin_port));
    const char *args[] = {"--webhook-url", url, NULL};
    fg_server *s = start_hooked(NULL, NULL, args);
    fg_response r;
    confirm_ok(s, "pk_refused", "order_refused", &r);
    fg_response_fini(&r);
    json_t *d = wait_attempts(s, "pk_refused", 1);
    json_t *a = attempt(d, 0);
    ck_assert(json_is_null(json_object_get(a, "http_status")));
    ck_assert_msg(json_is_string(json_object_get(a, "error")), "no error");
    ck_assert(json_is_str(d, "status", "pending"));
    ck_assert_int_eq(next_at_s(d), attempt_at_s(d, 0) + 60);
    json_decref(d);
    stop_server(s);
    close(fd);
}
END_TEST

/* Without --quiet, SIGTERM says how many deliveries it abandons (docs/webhooks.md §6.2). */
START_TEST(test_sigterm_names_the_abandoned_deliveries)
{
    struct receiver *rx = rx_always(RX(500));
    const char *args[] = {"--webhook-url", receiver_url(rx), NULL};
    fg_opts o = {.args = args, .access_log = true};
    fg_server *s = start_server(&o);
    fg_response r;
    confirm_ok(s, "pk_abandon", "order_abandon", &r);
    fg_response_fini(&r);
    json_decref(wait_attempts(s, "pk_abandon", 1));
    assert_clean_stop(s);
    char *err = fg_server_stderr(s);
    ck_assert_msg(strstr(err, "1 webhook deliveries pending at exit: abandoned") ||
                      strstr(err, "1 webhook delivery pending at exit: abandoned"),
                  "stderr: %.2000s", err);
    free(err);
    fg_free(s);
    receiver_stop(rx);
}
END_TEST

/* The receiver itself keeps a connection for several requests (libcurl's keep-alive). */
static size_t discard(char *p, size_t size, size_t n, void *ctx)
{
    (void)p;
    (void)ctx;
    return size * n;
}

START_TEST(test_receiver_serves_several_requests_on_one_connection)
{
    struct rx_answer script[] = {RX(201), RX(404)};
    struct receiver *rx = rx_start(script, 2);
    CURL *h = curl_easy_init();
    ck_assert(h != NULL);
    struct curl_slist *hs = curl_slist_append(NULL, "tosspayments-webhook-transmission-id: t1");
    hs = curl_slist_append(hs, "tosspayments-webhook-transmission-retried-count: 7");
    hs = curl_slist_append(hs, "Content-Type: application/json");
    long codes[3];
    for (int i = 0; i < 3; i++) {
        curl_easy_setopt(h, CURLOPT_URL, receiver_url(rx));
        curl_easy_setopt(h, CURLOPT_PROXY, "");
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, i == 1 ? "" : "{\"n\":1}");
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, i == 2 ? NULL : hs);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
        ck_assert_int_eq(curl_easy_perform(h), CURLE_OK);
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &codes[i]);
        long connects = -1;
        curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &connects);
        ck_assert_msg(connects == (i == 0 ? 1 : 0), "request %d opened %ld connections", i,
                      connects);
    }
    ck_assert_int_eq(codes[0], 201);
    ck_assert_int_eq(codes[1], 404);
    ck_assert_int_eq(codes[2], 404);
    curl_slist_free_all(hs);
    curl_easy_cleanup(h);
    ck_assert_uint_eq(receiver_count(rx), 3);
    struct rx_request q = got(rx, 0);
    ck_assert_str_eq(q.transmission_id, "t1");
    ck_assert_int_eq(q.retried_count, 7);
    ck_assert_str_eq(q.body, "{\"n\":1}");
    ck_assert_str_eq(q.content_type, "application/json");
    ck_assert_int_eq(q.answered, 201);
    q = got(rx, 1);
    ck_assert_uint_eq(q.body_len, 0);
    q = got(rx, 2);
    ck_assert_ptr_null(q.transmission_id);
    ck_assert_int_eq(q.retried_count, -1);
    ck_assert_int_eq(q.answered, 404);
    receiver_stop(rx);
}
END_TEST

/* ---- business timers on the gateway clock ------------------------------------------------- */

START_TEST(test_session_expiry_fires_expired_on_the_clock)
{
    struct receiver *rx = rx_always(RX(200));
    const char *more[] = {"--session-ttl", "600", NULL};
    fg_server *s = start_hooked(rx, NULL, more);
    fg_response r;
    fg_request req = {.method = "POST", .path = "/__admin/sessions",
                      .body = "{\"orderId\":\"order_exp_1\",\"amount\":10000,"
                              "\"paymentKey\":\"pk_exp_1\"}"};
    fg_http(s, NULL, &req, &r);
    assert_status(&r, 200);
    ck_assert_str_eq(json_str(r.json, "status"), "IN_PROGRESS");
    fg_response_fini(&r);
    advance(s, 599);
    /* A barrier: a payment confirmed now is delivered after the sweep at 599 s has run. */
    confirm_ok(s, "pk_exp_barrier", "order_exp_barrier", &r);
    fg_response_fini(&r);
    json_decref(wait_status(s, "pk_exp_barrier", "delivered"));
    /* An EXPIRED event of that sweep would have been filed before the barrier's. */
    json_t *ds = deliveries(s, NULL);
    ck_assert_uint_eq(json_array_size(ds), 1);
    json_decref(ds);
    ck_assert_uint_eq(receiver_count(rx), 1);
    advance(s, 2);
    expect_requests(rx, 2);
    struct rx_request q = got(rx, 1);
    json_t *b = body_json(&q);
    ck_assert_str_eq(data_str(b, "paymentKey"), "pk_exp_1");
    ck_assert_str_eq(data_str(b, "status"), "EXPIRED");
    json_decref(b);
    assert_order_status(s, "order_exp_1", "EXPIRED");
    stop_server(s);
    receiver_stop(rx);
}
END_TEST

START_TEST(test_idempotency_ttl_follows_the_clock)
{
    const char *more[] = {"--idempotency-ttl", "100", NULL};
    fg_server *s = start_hooked(NULL, NULL, more);
    fg_response a, b, c;
    confirm_fresh(s, "pk_ittl", "order_ittl", 10000, "key-ittl", 0, &a);
    assert_done(&a, "pk_ittl", "order_ittl");
    advance(s, 99);
    confirm_fresh(s, "pk_ittl", "order_ittl", 10000, "key-ittl", 0, &b);
    assert_status(&b, 200);
    ck_assert_msg(same_bytes(&a, &b), "not a replay 99 s later");
    advance(s, 2);
    confirm_fresh(s, "pk_ittl", "order_ittl", 10000, "key-ittl", 0, &c);
    assert_error(&c, 400, "ALREADY_PROCESSED_PAYMENT");
    ck_assert(metric1(s, "fakegate_idempotent_replays_total", NULL, NULL) == 1);
    fg_response_fini(&a);
    fg_response_fini(&b);
    fg_response_fini(&c);
    stop_server(s);
}
END_TEST

/* ---- more receivers, filters, the pending bound ------------------------------------------- */

START_TEST(test_each_receiver_gets_its_own_delivery_and_transmission_id)
{
    struct receiver *a = rx_always(RX(200)), *b = rx_always(RX(500));
    const char *more[] = {"--webhook-url", receiver_url(b), NULL};
    fg_server *s = start_hooked(a, NULL, more);
    fg_response r;
    confirm_ok(s, "pk_two_1", "order_two_1", &r);
    fg_response_fini(&r);
    expect_requests(a, 1);
    expect_requests(b, 1);
    struct rx_request qa = got(a, 0), qb = got(b, 0);
    ck_assert_str_ne(qa.transmission_id, qb.transmission_id);
    ck_assert(qa.body_len == qb.body_len && memcmp(qa.body, qb.body, qa.body_len) == 0);
    int64_t deadline = fg_now_ms() + WAIT_MS;
    json_t *ds;
    for (;;) {
        ds = deliveries(s, "paymentKey=pk_two_1");
        bool e0 = false, e1 = false;
        if (json_array_size(ds) == 2 && ended_attempts(json_array_get(ds, 0), &e0) == 1 &&
            ended_attempts(json_array_get(ds, 1), &e1) == 1)
            break;
        ck_assert(fg_now_ms() < deadline);
        json_decref(ds);
        fg_pause_ms(5);
    }
    /* One delivery each, its own fate: the second receiver's is retried, the first's is not. */
    for (size_t i = 0; i < 2; i++) {
        json_t *d = json_array_get(ds, i);
        bool to_a = strcmp(json_str(d, "url"), receiver_url(a)) == 0;
        ck_assert_str_eq(json_str(d, "transmission_id"),
                         to_a ? qa.transmission_id : qb.transmission_id);
        ck_assert_str_eq(json_str(d, "status"), to_a ? "delivered" : "pending");
    }
    json_decref(ds);
    ds = deliveries(s, "status=pending");
    ck_assert_uint_eq(json_array_size(ds), 1);
    ck_assert_str_eq(json_str(json_array_get(ds, 0), "url"), receiver_url(b));
    json_decref(ds);
    json_t *w = admin_json(s, "/__admin/webhooks");
    ck_assert_uint_eq(json_array_size(json_object_get(w, "urls")), 2);
    json_decref(w);
    stop_server(s);
    receiver_stop(a);
    receiver_stop(b);
}
END_TEST

/* Only transitions are events: a replay, an ALREADY_PROCESSED_PAYMENT and a refused cancel send
 * nothing. */
START_TEST(test_no_event_without_a_transition)
{
    struct receiver *rx = rx_always(RX(200));
    fg_server *s = start_hooked(rx, NULL, NULL);
    fg_response r;
    confirm_fresh(s, "pk_nt_1", "order_nt_1", 10000, "key-nt-1", 0, &r);
    assert_done(&r, "pk_nt_1", "order_nt_1");
    fg_response_fini(&r);
    confirm_fresh(s, "pk_nt_1", "order_nt_1", 10000, "key-nt-1", 0, &r); /* a replay */
    assert_status(&r, 200);
    fg_response_fini(&r);
    confirm_fresh(s, "pk_nt_1", "order_nt_1", 10000, NULL, 0, &r);
    assert_error(&r, 400, "ALREADY_PROCESSED_PAYMENT");
    fg_response_fini(&r);
    cancel(s, "pk_nt_1", 20000, &r);
    assert_error(&r, 403, "NOT_CANCELABLE_AMOUNT");
    fg_response_fini(&r);
    /* A barrier: events are filed in the order of their transitions, so once pk_nt_2's is filed
     * every event of pk_nt_1 is too; their attempts run side by side, so wait for both. */
    confirm_ok(s, "pk_nt_2", "order_nt_2", &r);
    fg_response_fini(&r);
    json_decref(wait_status(s, "pk_nt_2", "delivered"));
    json_decref(wait_status(s, "pk_nt_1", "delivered"));
    json_t *ds = deliveries(s, "paymentKey=pk_nt_1");
    ck_assert_uint_eq(json_array_size(ds), 1);
    json_decref(ds);
    ck_assert_uint_eq(receiver_count(rx), 2);
    stop_server(s);
    receiver_stop(rx);
}
END_TEST

START_TEST(test_deliveries_filters)
{
    struct rx_answer script[] = {RX(200), RX(500)};
    struct receiver *rx = rx_start(script, 2);
    fg_server *s = start_hooked(rx, NULL, NULL);
    fg_response r;
    confirm_ok(s, "pk_f_1", "order_f_1", &r);
    fg_response_fini(&r);
    json_decref(wait_status(s, "pk_f_1", "delivered"));
    confirm_ok(s, "pk_f_2", "order_f_2", &r);
    fg_response_fini(&r);
    json_decref(wait_attempts(s, "pk_f_2", 1));
    json_t *ds = deliveries(s, NULL);
    ck_assert_uint_eq(json_array_size(ds), 2);
    ck_assert(json_int(json_array_get(ds, 0), "id") < json_int(json_array_get(ds, 1), "id"));
    json_decref(ds);
    struct {
        const char *query, *pk; /* pk NULL: no match */
    } cases[] = {
        {"limit=1", "pk_f_2"},
        {"status=delivered", "pk_f_1"},
        {"status=pending", "pk_f_2"},
        {"status=failed", NULL},
        {"orderId=order_f_1", "pk_f_1"},
        {"paymentKey=pk_f_2&status=pending", "pk_f_2"},
        {"paymentKey=pk_f_2&status=delivered", NULL},
        {"paymentKey=nobody", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ds = deliveries(s, cases[i].query);
        ck_assert_msg(json_array_size(ds) == (cases[i].pk ? 1u : 0u), "%s: %zu deliveries",
                      cases[i].query, json_array_size(ds));
        if (cases[i].pk)
            ck_assert_str_eq(json_str(json_array_get(ds, 0), "payment_key"), cases[i].pk);
        json_decref(ds);
    }
    stop_server(s);
    receiver_stop(rx);
}
END_TEST

START_TEST(test_max_pending_fails_the_oldest)
{
    struct receiver *rx = rx_always(RX(500));
    const char *more[] = {"--webhook-max-pending", "2", NULL};
    fg_server *s = start_hooked(rx, NULL, more);
    for (int i = 1; i <= 3; i++) {
        char pk[32], oid[32];
        snprintf(pk, sizeof pk, "pk_mp_%d", i);
        snprintf(oid, sizeof oid, "order_mp_%d", i);
        fg_response r;
        confirm_ok(s, pk, oid, &r);
        fg_response_fini(&r);
        json_decref(wait_attempts(s, pk, 1));
    }
    json_t *d = wait_status(s, "pk_mp_1", "failed");
    ck_assert_msg(strstr(json_str(d, "note"), "--webhook-max-pending"), "note %s",
                  json_str(d, "note"));
    ck_assert(json_is_null(json_object_get(d, "next_attempt_at")));
    json_decref(d);
    ck_assert(wh_pending(s) == 2);
    ck_assert(metric1(s, "fakegate_webhook_evicted_total", NULL, NULL) == 1);
    /* The evicted one is not retried; the other two are. */
    advance(s, 60);
    expect_requests(rx, 5);
    json_decref(wait_attempts(s, "pk_mp_2", 2));
    json_decref(wait_attempts(s, "pk_mp_3", 2));
    d = wait_attempts(s, "pk_mp_1", 1);
    ck_assert(json_is_str(d, "status", "failed"));
    json_decref(d);
    stop_server(s);
    receiver_stop(rx);
}
END_TEST

/* A reset while an attempt is on the wire drops it too; later events go on normally. */
START_TEST(test_reset_during_an_attempt_in_flight)
{
    struct rx_answer script[] = {RX_DO(RX_HANG), RX(200)};
    struct receiver *rx = rx_start(script, 2);
    fg_server *s = start_hooked(rx, NULL, NULL);
    fg_response r;
    confirm_ok(s, "pk_rf_1", "order_rf_1", &r);
    fg_response_fini(&r);
    expect_requests(rx, 1);
    json_t *ds = deliveries(s, NULL);
    ck_assert_uint_eq(json_array_size(ds), 1);
    ck_assert(json_is_null(json_object_get(attempt(json_array_get(ds, 0), 0), "duration_ms")));
    json_decref(ds);
    reset_now(s);
    ds = deliveries(s, NULL);
    ck_assert_uint_eq(json_array_size(ds), 0);
    json_decref(ds);
    ck_assert(wh_pending(s) == 0);
    confirm_ok(s, "pk_rf_2", "order_rf_2", &r);
    fg_response_fini(&r);
    json_decref(wait_status(s, "pk_rf_2", "delivered"));
    ck_assert_uint_eq(receiver_count(rx), 2);
    ds = deliveries(s, NULL);
    ck_assert_uint_eq(json_array_size(ds), 1);
    json_decref(ds);
    ck_assert(wh_attempts(s, "delivered") == 1);
    ck_assert(wh_attempts(s, "failed") == 0);
    stop_server(s);
    receiver_stop(rx);
}
END_TEST

Suite *make_suite(void)
{
    Suite *su = suite_create("blackbox_webhooks");
    TCase *tc = add_tcase(su, "retries", 30);
    tcase_add_test(tc, test_500_500_200_retries_after_60_then_240_gateway_seconds);
    tcase_add_test(tc, test_retry_not_fired_one_second_early);
    tcase_add_test(tc, test_eight_attempts_then_failed);

    tc = add_tcase(su, "events", 30);
    tcase_add_test(tc, test_headers_and_body_of_a_done_event);
    tcase_add_test(tc, test_confirm_and_partial_cancel_send_two_events);
    tcase_add_test(tc, test_retried_done_after_a_cancel_still_says_done);
    tcase_add_test(tc, test_each_receiver_gets_its_own_delivery_and_transmission_id);
    tcase_add_test(tc, test_no_event_without_a_transition);
    tcase_add_test(tc, test_each_event_is_the_payment_at_its_transition);

    tc = add_tcase(su, "faults", 30);
    tcase_add_test(tc, test_drop_p1_sends_nothing);
    tcase_add_test(tc, test_delay_300ms_holds_the_first_attempt);
    tcase_add_test(tc, test_faults_repeat_with_the_same_seed);
    tcase_add_test(tc, test_every_listed_delivery_has_its_body_while_events_are_filed);

    tc = add_tcase(su, "admin", 30);
    tcase_add_test(tc, test_resend_sends_the_same_event_with_the_next_retried_count);
    tcase_add_test(tc, test_resend_of_a_pending_delivery_keeps_its_schedule);
    tcase_add_test(tc, test_resend_of_a_dropped_delivery_sends_it);
    tcase_add_test(tc, test_reset_drops_pending_deliveries_and_the_clock_offset);
    tcase_add_test(tc, test_bad_webhook_url_flag_exits_2_naming_it);
    tcase_add_test(tc, test_put_webhooks_rejects_bad_lists_and_keeps_the_old_one);
    tcase_add_test(tc, test_204_fails_under_success_200);
    tcase_add_test(tc, test_bad_clock_and_deliveries_input_is_400);
    tcase_add_test(tc, test_deliveries_filters);
    tcase_add_test(tc, test_max_pending_fails_the_oldest);
    tcase_add_test(tc, test_reset_during_an_attempt_in_flight);

    tc = add_tcase(su, "hostile", 60);
    tcase_add_test(tc, test_reset_by_the_receiver_is_a_failed_attempt);
    tcase_add_test(tc, test_reset_on_a_reused_connection_is_one_failed_attempt);
    tcase_add_test(tc, test_redirect_is_not_followed_and_fails);
    tcase_add_test(tc, test_huge_answer_body_the_status_decides);
    tcase_add_test(tc, test_hanging_receiver_blocks_neither_answers_nor_shutdown);
    tcase_add_test(tc, test_no_answer_within_10s_fails_the_attempt);
    tcase_add_test(tc, test_refused_connection_is_a_failed_attempt);
    tcase_add_test(tc, test_sigterm_names_the_abandoned_deliveries);
    tcase_add_test(tc, test_receiver_serves_several_requests_on_one_connection);

    tc = add_tcase(su, "clock", 30);
    tcase_add_test(tc, test_session_expiry_fires_expired_on_the_clock);
    tcase_add_test(tc, test_idempotency_ttl_follows_the_clock);
    /* Bounds on wall-clock time: not under make memcheck (testkit.h). */
    tc = add_timing_tcase(su, "faults_timing", 30);
    tcase_add_test(tc, test_duplicate_p1_delivers_twice_with_the_same_id_and_body);
    return su;
}
