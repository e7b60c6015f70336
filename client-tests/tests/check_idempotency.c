/* check_idempotency.c -- black-box tests of fakegate's idempotency edges (docs/idempotency.md §3)
 * and of the header / body limits and Idempotency-Key bytes of docs/api.md §2 and
 * docs/edge-rules.md §7: a client that leaves during a latency, body mismatch (replay / reject),
 * TTL expiry and the sweep that frees expired records, stored business errors, 431 and 413. Each test starts its own server on port 0
 * through the harness. Waits poll a condition with a bound; the one deliberate wait is the TTL
 * test's, the behaviour under test. */
#define _GNU_SOURCE

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "check_main.h"
#include "testkit.h"

/* ---- helpers ------------------------------------------------------------------------------ */

/* POST /v1/payments/confirm with this exact body, the default auth and, if not NULL, the key. */
static int post_confirm_body(const fg_server *s, const char *body, const char *key, fg_response *r)
{
    char line[512];
    snprintf(line, sizeof line, "Idempotency-Key: %s", key != NULL ? key : "");
    const char *headers[] = {s->auth_header, key != NULL ? line : NULL, NULL};
    fg_request req = {.method = "POST", .path = CONFIRM_PATH, .body = body, .headers = headers};
    return fg_http(s, NULL, &req, r);
}

/* A raw HTTP/1.1 confirm: `extra` (complete header lines, each ending "\r\n", may contain any
 * byte) after the default auth, then `body` with its Content-Length. Sends Connection: close so
 * that fg_raw returns when the answer is complete. Caller frees. */
static char *raw_confirm(const fg_server *s, const char *extra, const char *body, size_t *len)
{
    char *out = NULL;
    FILE *f = open_memstream(&out, len);
    ck_assert(f != NULL);
    fprintf(f,
            "POST " CONFIRM_PATH " HTTP/1.1\r\nHost: 127.0.0.1\r\n%s\r\nConnection: close\r\n"
            "Content-Type: application/json\r\n%sContent-Length: %zu\r\n\r\n%s",
            s->auth_header, extra, strlen(body), body);
    ck_assert(fclose(f) == 0);
    return out;
}

/* Send a raw request and require a Toss error with this status and code. */
static void raw_expect_error(const fg_server *s, const char *what, const char *req, size_t len,
                             int status, const char *code)
{
    fg_raw_response rr;
    char err[FG_ERR_LEN];
    ck_assert_msg(fg_raw(s, req, len, 5000, &rr, err) == 0, "[%s] %s", what, err);
    const char *got = fg_json_str(rr.json, "code");
    ck_assert_msg(rr.status == status && got != NULL && strcmp(got, code) == 0,
                  "[%s] want %d %s, got %d: %.600s", what, status, code, rr.status, rr.data);
    const char *msg = fg_json_str(rr.json, "message");
    ck_assert_msg(msg != NULL && msg[0] != '\0', "[%s] no message: %.600s", what, rr.data);
    fg_raw_response_fini(&rr);
}

/* "Name: " followed by `n` copies of 'a'. Caller frees. */
static char *long_header(const char *name, size_t n)
{
    size_t nl = strlen(name);
    char *h = malloc(nl + 2 + n + 1);
    ck_assert(h != NULL);
    memcpy(h, name, nl);
    memcpy(h + nl, ": ", 2);
    memset(h + nl + 2, 'a', n);
    h[nl + 2 + n] = '\0';
    return h;
}

/* ---- a client that leaves during a latency ------------------------------------------------ */

/* Send a confirm with key `key` that gives up after `give_up_ms`; require curl's timeout (28)
 * and that the payment, still IN_PROGRESS right after, reads DONE no earlier than `commit_ms`
 * after sending and within a bound; then the same key gets the stored success replayed. */
static void leave_then_check(const fg_server *s, const char *pk, const char *oid,
                             long long amount, const char *key, long give_up_ms, int64_t queue_ms,
                             int64_t commit_ms)
{
    fg_response lost;
    confirm_fresh(s, pk, oid, amount, key, give_up_ms, &lost);
    ck_assert_msg(lost.curl_code == CURLE_OPERATION_TIMEDOUT,
                  "want curl error 28 (timeout after %ld ms), got %d (%s) status %ld %.300s",
                  give_up_ms, (int)lost.curl_code, lost.curl_error, lost.status, lost.body);
    int64_t sent = lost.sent_ns;
    fg_response_fini(&lost);

    /* The client is gone; the payment exists and is not yet approved. */
    fg_response during;
    get_order(s, oid, &during);
    if (during.done_ns < sent + (commit_ms - 20) * MS) {
        assert_status(&during, 200);
        ck_assert_str_eq(json_str(during.json, "status"), "IN_PROGRESS");
    }
    fg_response_fini(&during);

    int64_t done_seen = wait_for_order_status(s, oid, "DONE", (int)commit_ms + 3000, 2);
    ck_assert_msg(done_seen != 0, "%s never read DONE after its client left (planned commit at "
                  "%lld ms)", oid, (long long)commit_ms);
    ck_assert_msg(done_seen >= sent + (commit_ms - 10) * MS,
                  "%s read DONE %lld ms after the confirm was sent, before its planned %lld ms",
                  oid, (long long)((done_seen - sent) / MS), (long long)commit_ms);

    /* The record ended DONE holding the success: the resend gets it. */
    fg_response again;
    fg_confirm(s, pk, oid, amount, key, &again);
    assert_done_amount(&again, pk, oid, amount);
    fg_response second;
    fg_confirm(s, pk, oid, amount, key, &second);
    assert_done_amount(&second, pk, oid, amount);
    ck_assert_msg(same_bytes(&again, &second), "replays differ:\n%s\n---\n%s", again.body,
                  second.body);
    fg_response now;
    get_order(s, oid, &now);
    assert_done_amount(&now, pk, oid, amount);
    ck_assert_str_eq(json_str(again.json, "lastTransactionKey"),
                     json_str(now.json, "lastTransactionKey"));
    fg_response_fini(&now);
    /* A replay waits its own queue_latency but no processing latency. */
    int64_t took = again.done_ns - again.sent_ns;
    ck_assert_msg(took >= (queue_ms - 10) * MS && took < (queue_ms + 400) * MS,
                  "replay took %lld ms (queue_latency %lld ms, no processing latency expected)",
                  (long long)(took / MS), (long long)queue_ms);
    fg_response_fini(&again);
    fg_response_fini(&second);

    json_t *e = the_ledger_entry(s, oid);
    ck_assert_int_eq(json_int(e, "charges"), 1);
    const json_t *keys = json_object_get(e, "idempotency_keys");
    ck_assert_msg(json_is_array(keys) && json_array_size(keys) == 1 &&
                      strcmp(json_string_value(json_array_get(keys, 0)), key) == 0,
                  "idempotency_keys is not [\"%s\"]", key);
    json_decref(e);
}

START_TEST(test_client_disconnect_during_latency_still_commits)
{
    fg_server *s = start_with_profile(
        "{\"name\":\"held800\",\"routes\":{\"confirm\":{\"latency\":{\"dist\":\"fixed\",\"ms\":800}},"
        "\"default\":{\"latency\":{\"dist\":\"fixed\",\"ms\":0}}}}");
    leave_then_check(s, "pk_gone_1", "order_gone_1", 8800, "key-gone-1", 200, 0, 800);
    stop_server(s);
}
END_TEST

START_TEST(test_client_disconnect_during_queue_latency_still_commits)
{
    fg_server *s = start_with_profile(
        "{\"name\":\"queued500\",\"routes\":{\"confirm\":{"
        "\"queue_latency\":{\"dist\":\"fixed\",\"ms\":500},\"latency\":{\"dist\":\"fixed\",\"ms\":300}},"
        "\"default\":{\"latency\":{\"dist\":\"fixed\",\"ms\":0}}}}");
    leave_then_check(s, "pk_gone_q1", "order_gone_q1", 5300, "key-gone-q1", 100, 500, 800);
    stop_server(s);
}
END_TEST

/* ---- same key, different body -------------------------------------------------------------- */

#define BODY_1000 "{\"paymentKey\":\"pk_mismatch_1\",\"orderId\":\"order_mismatch_1\",\"amount\":1000}"
#define BODY_2000 "{\"paymentKey\":\"pk_mismatch_1\",\"orderId\":\"order_mismatch_1\",\"amount\":2000}"
/* BODY_1000's fields, reordered and spaced: the same canonical JSON. */
#define BODY_1000_REORDERED                                                                    \
    "{\n  \"amount\" : 1000 ,\n\t\"orderId\":\"order_mismatch_1\",   \"paymentKey\" :\n"       \
    "\"pk_mismatch_1\"\n}\n"

START_TEST(test_same_key_different_body_is_replayed_by_default)
{
    fg_server *s = start_server(NULL);
    fg_response first, other, reordered;
    post_confirm_body(s, BODY_1000, "key-mismatch-1", &first);
    assert_done_amount(&first, "pk_mismatch_1", "order_mismatch_1", 1000);

    post_confirm_body(s, BODY_2000, "key-mismatch-1", &other);
    assert_status(&other, 200);
    ck_assert_msg(same_bytes(&other, &first), "amount 2000 under the same key is not the replay:\n"
                  "%s\n---\n%s", other.body, first.body);
    ck_assert_int_eq(json_int(other.json, "totalAmount"), 1000);
    ck_assert_str_ne(other.trace_id, first.trace_id);

    post_confirm_body(s, BODY_1000_REORDERED, "key-mismatch-1", &reordered);
    assert_status(&reordered, 200);
    ck_assert_msg(same_bytes(&reordered, &first), "reordered body is not the replay:\n%s",
                  reordered.body);

    assert_charged_once(s, "pk_mismatch_1", "order_mismatch_1");
    fg_response_fini(&first);
    fg_response_fini(&other);
    fg_response_fini(&reordered);
    stop_server(s);
}
END_TEST

START_TEST(test_same_key_different_body_rejected_with_reject_option)
{
    fg_server *s = start_with_profile(
        "{\"name\":\"reject\",\"idempotency\":{\"on_body_mismatch\":\"reject\"},"
        "\"routes\":{\"default\":{\"latency\":{\"dist\":\"fixed\",\"ms\":0}}}}");
    fg_response first, other, reordered, same;
    post_confirm_body(s, BODY_1000, "key-mismatch-1", &first);
    assert_done_amount(&first, "pk_mismatch_1", "order_mismatch_1", 1000);

    post_confirm_body(s, BODY_2000, "key-mismatch-1", &other);
    assert_error(&other, 422, "IDEMPOTENCY_KEY_REUSED");

    /* Whitespace and key order are not a different body. */
    post_confirm_body(s, BODY_1000_REORDERED, "key-mismatch-1", &reordered);
    assert_status(&reordered, 200);
    ck_assert_msg(same_bytes(&reordered, &first), "reordered body is not the replay:\n%s",
                  reordered.body);
    /* The 422 did not disturb the record. */
    post_confirm_body(s, BODY_1000, "key-mismatch-1", &same);
    assert_status(&same, 200);
    ck_assert(same_bytes(&same, &first));

    assert_charged_once(s, "pk_mismatch_1", "order_mismatch_1");
    fg_response_fini(&first);
    fg_response_fini(&other);
    fg_response_fini(&reordered);
    fg_response_fini(&same);
    stop_server(s);
}
END_TEST

/* ---- header block and body limits ---------------------------------------------------------- */

START_TEST(test_header_block_over_8k_gets_431_json)
{
    fg_server *s = start_server(NULL);

    /* ~8.6 KB of headers: parsed by libmicrohttpd, refused by fakegate with its JSON 431. */
    char *pad = long_header("X-Pad", 8500);
    const char *big[] = {s->auth_header, pad, "Idempotency-Key: hdr-1", NULL};
    fg_request req = {.method = "POST", .path = CONFIRM_PATH,
                      .body = "{\"paymentKey\":\"pk_hdr_1\",\"orderId\":\"order_hdr_1\",\"amount\":1000}",
                      .headers = big, .forbid_reuse = true};
    fg_response r;
    fg_http(s, NULL, &req, &r);
    assert_error(&r, 431, "REQUEST_HEADER_FIELDS_TOO_LARGE");
    ck_assert_msg(strcasecmp(r.connection, "close") == 0, "Connection: \"%s\"", r.connection);
    fg_response_fini(&r);
    free(pad);
    ck_assert_uint_eq(ledger_size(s), 0);

    /* ~7 KB of headers is under the cap: handled normally, and hdr-1 was not stored. */
    pad = long_header("X-Pad", 6800);
    const char *ok_headers[] = {s->auth_header, pad, "Idempotency-Key: hdr-1", NULL};
    req.headers = ok_headers;
    fg_http(s, NULL, &req, &r);
    assert_done_amount(&r, "pk_hdr_1", "order_hdr_1", 1000);
    /* The status line, not the whole block: a random trace id or the Date may contain "431". */
    ck_assert_msg(r.header_block != NULL && strncmp(r.header_block, "HTTP/1.1 200", 12) == 0,
                  "%s", r.header_block);
    fg_response_fini(&r);
    free(pad);

    /* 40 KB: beyond libmicrohttpd's own buffer. Its own 431/414 page, but never zero bytes. */
    pad = long_header("X-Pad", 40000);
    const char *huge[] = {s->auth_header, pad, NULL};
    fg_request get = {.method = "GET", .path = "/v1/payments/orders/order_hdr_1", .headers = huge,
                      .forbid_reuse = true};
    fg_http(s, NULL, &get, &r);
    ck_assert_msg(r.curl_code == CURLE_OK, "40 KB header block: no response (%d %s)",
                  (int)r.curl_code, r.curl_error);
    ck_assert_msg(r.status == 431 || r.status == 414, "40 KB header block: status %ld %.300s",
                  r.status, r.body);
    ck_assert_msg(r.body_len > 0, "40 KB header block: empty body");
    fg_response_fini(&r);
    free(pad);

    /* The server is still fine. */
    fg_response after;
    get_order(s, "order_hdr_1", &after);
    assert_done_amount(&after, "pk_hdr_1", "order_hdr_1", 1000);
    fg_response_fini(&after);
    stop_server(s);
}
END_TEST

static const char *const max_body_args[] = {"--max-body", "1024", NULL};

START_TEST(test_chunked_body_over_max_body_gets_413_and_close)
{
    fg_server *s = start_args(NULL, max_body_args);
    char *body = padded_body("pk_chunk_1", "order_chunk_1", 4000);

    /* curl, chunked in 64-byte pieces. */
    const char *headers[] = {s->auth_header, "Idempotency-Key: chunk-1", NULL};
    fg_request req = {.method = "POST", .path = CONFIRM_PATH, .body = body, .headers = headers,
                      .chunked = true, .forbid_reuse = true};
    fg_response r;
    fg_http(s, NULL, &req, &r);
    assert_error(&r, 413, "INVALID_REQUEST");
    ck_assert_msg(strcasecmp(r.connection, "close") == 0, "Connection: \"%s\"", r.connection);
    fg_response_fini(&r);

    /* Raw, four chunks of 1000 bytes, no Connection: close from us: the server must close. */
    char *raw = NULL;
    size_t raw_len = 0;
    FILE *f = open_memstream(&raw, &raw_len);
    ck_assert(f != NULL);
    fprintf(f, "POST " CONFIRM_PATH " HTTP/1.1\r\nHost: 127.0.0.1\r\n%s\r\n"
               "Content-Type: application/json\r\nIdempotency-Key: chunk-1\r\n"
               "Transfer-Encoding: chunked\r\n\r\n", s->auth_header);
    for (int i = 0; i < 4; i++) {
        fprintf(f, "3e8\r\n");
        fwrite(body + i * 1000, 1, 1000, f);
        fprintf(f, "\r\n");
    }
    fprintf(f, "0\r\n\r\n");
    ck_assert(fclose(f) == 0);
    fg_raw_response rr;
    char err[FG_ERR_LEN];
    ck_assert_msg(fg_raw(s, raw, raw_len, 5000, &rr, err) == 0, "%s", err);
    ck_assert_msg(rr.status == 413, "raw chunked: got %d: %.400s", rr.status, rr.data);
    ck_assert_str_eq(fg_json_str(rr.json, "code"), "INVALID_REQUEST");
    char conn[64] = "";
    fg_raw_header(&rr, "Connection", conn, sizeof conn);
    ck_assert_msg(strcasecmp(conn, "close") == 0, "raw chunked: Connection: \"%s\"", conn);
    ck_assert_msg(rr.closed, "raw chunked: connection left open after the 413");
    fg_raw_response_fini(&rr);
    free(raw);
    free(body);
    ck_assert_uint_eq(ledger_size(s), 0);

    /* Not stored under chunk-1: the corrected request runs. */
    fg_response ok;
    fg_confirm(s, "pk_chunk_1", "order_chunk_1", 1000, "chunk-1", &ok);
    assert_done_amount(&ok, "pk_chunk_1", "order_chunk_1", 1000);
    fg_response_fini(&ok);
    stop_server(s);
}
END_TEST

/* ---- TTL ------------------------------------------------------------------------------------- */

static const char *const ttl_args[] = {"--idempotency-ttl", "1", NULL};

START_TEST(test_idempotency_ttl_expiry_runs_again)
{
    fg_server *s = start_args(NULL, ttl_args);
    fg_response a, a_again, b, b_again;
    fg_confirm(s, "pk_ttl_a", "order_ttl_a", 1000, "key-ttl-1", &a);
    assert_done_amount(&a, "pk_ttl_a", "order_ttl_a", 1000);
    /* Within the TTL: the replay. */
    fg_confirm(s, "pk_ttl_a", "order_ttl_a", 1000, "key-ttl-1", &a_again);
    assert_status(&a_again, 200);
    ck_assert(same_bytes(&a, &a_again));

    /* The record was created before a's answer: wait until 1.2 s have passed since then. This
     * wait is the behaviour under test (a TTL), bounded. */
    int64_t until = a.done_ns + 1200 * MS;
    int64_t left_ms = (until - fg_now_ns()) / MS + 1;
    if (left_ms > 0)
        fg_pause_ms((long)left_ms);
    ck_assert(fg_now_ns() >= until);

    fg_confirm(s, "pk_ttl_b", "order_ttl_b", 2000, "key-ttl-1", &b);
    assert_done_amount(&b, "pk_ttl_b", "order_ttl_b", 2000);
    ck_assert_str_ne(json_str(b.json, "lastTransactionKey"), json_str(a.json, "lastTransactionKey"));
    /* The new run is now what the key holds. */
    fg_confirm(s, "pk_ttl_b", "order_ttl_b", 2000, "key-ttl-1", &b_again);
    assert_status(&b_again, 200);
    ck_assert(same_bytes(&b, &b_again));

    assert_charged_once(s, "pk_ttl_a", "order_ttl_a");
    assert_charged_once(s, "pk_ttl_b", "order_ttl_b");
    fg_response_fini(&a);
    fg_response_fini(&a_again);
    fg_response_fini(&b);
    fg_response_fini(&b_again);
    stop_server(s);
}
END_TEST

/* Memory falls back after the TTL with no further traffic: the once-a-second sweep frees the
 * expired records, so fakegate_idempotency_records returns to 0 on its own (polled with a
 * bound), and a resend under a swept key runs again instead of being replayed. */
START_TEST(test_idempotency_records_fall_back_to_zero_after_the_ttl_without_traffic)
{
    enum { N = 20 };
    fg_server *s = start_args(NULL, ttl_args);
    char pk[32], oid[32], key[32];
    for (int i = 0; i < N; i++) {
        snprintf(pk, sizeof pk, "pk_sweep_%02d", i);
        snprintf(oid, sizeof oid, "order_sweep_%02d", i);
        snprintf(key, sizeof key, "key-sweep-%02d", i);
        fg_response r;
        confirm_fresh(s, pk, oid, 1000, key, 0, &r);
        assert_done(&r, pk, oid);
        fg_response_fini(&r);
    }
    /* Just created: all of them still held (the TTL is 1 s; the sweep may at most have begun). */
    double held = metric1(s, "fakegate_idempotency_records", NULL, NULL);
    ck_assert_msg(held > 0 && held <= N, "records right after %d confirms: %g", N, held);
    double left = wait_metric(s, "fakegate_idempotency_records", NULL, NULL, 0, 5000);
    ck_assert_msg(left == 0, "records 5 s after the last claim: %g", left);
    /* Gone, not only hidden: the same key is a new request, which the ledger refuses. */
    fg_response again;
    confirm_fresh(s, "pk_sweep_00", "order_sweep_00", 1000, "key-sweep-00", 0, &again);
    assert_error(&again, 400, "ALREADY_PROCESSED_PAYMENT");
    fg_response_fini(&again);
    stop_server(s);
}
END_TEST

/* Moving the gateway clock past the TTL sweeps at once (POST /__admin/clock runs the sweep). */
START_TEST(test_clock_advance_past_the_ttl_frees_the_records_at_once)
{
    fg_server *s = start_args(NULL, NULL);
    fg_response r;
    confirm_fresh(s, "pk_sweep_clock", "order_sweep_clock", 1000, "key-sweep-clock", 0, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    ck_assert(metric1(s, "fakegate_idempotency_records", NULL, NULL) == 1);
    admin_call(s, "POST", "/__admin/clock", "{\"advance_s\": 1296001}", NULL, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    ck_assert(metric1(s, "fakegate_idempotency_records", NULL, NULL) == 0);
    stop_server(s);
}
END_TEST

/* An attempt count idle for the TTL is forgotten with the key's record (docs/profiles.md §4
 * "attempts"): the key resent after the clock moved one TTL on is attempt 1 again, and a fault
 * scripted for attempt 1 fires again, while resends inside the TTL count on. */
START_TEST(test_key_resent_after_its_ttl_starts_again_at_attempt_1)
{
    static const char *const args[] = {"--idempotency-ttl", "60", NULL};
    fg_server *s = start_q_args(
        "{'name': 'first-attempt-fails', 'routes': {'confirm': {'faults': [{'kind': 'error', "
        "'p': 1, 'code': 'FAILED_INTERNAL_SYSTEM_PROCESSING', 'when': 'before', "
        "'attempts': [1]}]}, 'default': {'latency': {'dist': 'fixed', 'ms': 0}}}}",
        args);
    static const long want_status[] = {500, 200, 200, 500, 400};
    static const int want_attempt[] = {1, 2, 3, 1, 2};
    for (int i = 0; i < 5; i++) {
        if (i == 3) { /* the record (made by the second) and the count (used by the third) expire */
            fg_response c;
            admin_call(s, "POST", "/__admin/clock", "{\"advance_s\": 60}", NULL, &c);
            assert_status(&c, 200);
            fg_response_fini(&c);
            ck_assert(metric1(s, "fakegate_idempotency_records", NULL, NULL) == 0);
        }
        fg_response r;
        confirm_fresh(s, "pk_attempt_ttl", "order_attempt_ttl", 1000, "key-attempt-ttl", 0, &r);
        assert_status(&r, want_status[i]);
        if (i == 4)
            assert_error(&r, 400, "ALREADY_PROCESSED_PAYMENT"); /* run again, not replayed */
        fg_response_fini(&r);
    }
    json_t *j = journal(s, 0);
    ck_assert_uint_eq(json_array_size(j), 5);
    for (size_t i = 0; i < 5; i++)
        ck_assert_msg(json_int(json_array_get(j, i), "attempt") == want_attempt[i],
                      "request %zu: attempt %lld, want %d", i + 1,
                      json_int(json_array_get(j, i), "attempt"), want_attempt[i]);
    json_decref(j);
    stop_server(s);
}
END_TEST

/* A payment lists its first 10 keys and counts the confirms that carried others
 * (docs/admin.md §5 GET /__admin/payments): a client that makes up a key per resend does not
 * grow one ledger entry without bound. */
START_TEST(test_ledger_lists_a_payments_first_10_keys_and_counts_the_rest)
{
    fg_server *s = start_server(NULL);
    char key[32];
    for (int i = 0; i < 13; i++) {
        snprintf(key, sizeof key, "key-many-%02d", i);
        fg_response r;
        fg_confirm(s, "pk_many_keys", "order_many_keys", 1000, key, &r);
        if (i == 0)
            assert_done(&r, "pk_many_keys", "order_many_keys");
        else
            assert_error(&r, 400, "ALREADY_PROCESSED_PAYMENT");
        fg_response_fini(&r);
    }
    fg_response r;
    fg_confirm(s, "pk_many_keys", "order_many_keys", 1000, "key-many-12", &r); /* unlisted again */
    fg_response_fini(&r);
    fg_confirm(s, "pk_many_keys", "order_many_keys", 1000, "key-many-04", &r); /* listed again */
    fg_response_fini(&r);
    fg_confirm(s, "pk_many_keys", "order_many_keys", 1000, NULL, &r);          /* no key */
    fg_response_fini(&r);
    json_t *e = the_ledger_entry(s, "order_many_keys");
    ck_assert_int_eq(json_int(e, "confirm_attempts"), 16);
    const json_t *keys = json_object_get(e, "idempotency_keys");
    ck_assert(json_is_array(keys));
    ck_assert_uint_eq(json_array_size(keys), 10);
    for (size_t i = 0; i < 10; i++) {
        snprintf(key, sizeof key, "key-many-%02zu", i);
        ck_assert_str_eq(json_string_value(json_array_get(keys, i)), key);
    }
    ck_assert_int_eq(json_int(e, "idempotency_keys_unlisted"), 4); /* 10, 11, 12 and 12 again */
    ck_assert_int_eq(json_int(e, "charges"), 1);
    json_decref(e);
    stop_server(s);
}
END_TEST

/* ---- Idempotency-Key bytes ----------------------------------------------------------------- */

#define KEYBODY(n) "{\"paymentKey\":\"pk_keybytes_" n "\",\"orderId\":\"order_keybytes_" n "\",\"amount\":1000}"

START_TEST(test_empty_and_folded_idempotency_key_rejected)
{
    fg_server *s = start_server(NULL);

    /* Empty, through curl ("Name;" sends an empty header). */
    const char *empty[] = {s->auth_header, "Idempotency-Key;", NULL};
    fg_request req = {.method = "POST", .path = CONFIRM_PATH, .body = KEYBODY("1"),
                      .headers = empty};
    fg_response r;
    fg_http(s, NULL, &req, &r);
    assert_error(&r, 400, "INVALID_IDEMPOTENCY_KEY");
    fg_response_fini(&r);

    /* Raw bytes curl would not send as given. */
    static const struct {
        const char *what;
        const char *line;
    } bad[] = {
        {"only spaces", "Idempotency-Key:    \r\n"},
        {"tab inside", "Idempotency-Key: key\tbytes\r\n"},
        {"0x80 inside", "Idempotency-Key: key\x80" "bytes\r\n"},
        {"UTF-8 inside", "Idempotency-Key: key\xed\x82\xa4\r\n"},
        {"0x01 inside", "Idempotency-Key: key\x01" "bytes\r\n"},
        {"space inside", "Idempotency-Key: key bytes\r\n"},
        {"0x7F inside", "Idempotency-Key: key\x7f" "bytes\r\n"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t len;
        char *raw = raw_confirm(s, bad[i].line, KEYBODY("1"), &len);
        raw_expect_error(s, bad[i].what, raw, len, 400, "INVALID_IDEMPOTENCY_KEY");
        free(raw);
    }
    ck_assert_uint_eq(ledger_size(s), 0);

    /* Surrounding spaces are trimmed: "  key-trim-1  " is "key-trim-1". */
    size_t len;
    char *raw = raw_confirm(s, "Idempotency-Key:    key-trim-1   \r\n", KEYBODY("2"), &len);
    fg_raw_response rr;
    char err[FG_ERR_LEN];
    ck_assert_msg(fg_raw(s, raw, len, 5000, &rr, err) == 0, "%s", err);
    ck_assert_msg(rr.status == 200, "spaced key: got %d %.400s", rr.status, rr.data);
    ck_assert_str_eq(fg_json_str(rr.json, "status"), "DONE");
    free(raw);
    fg_response replay;
    fg_confirm(s, "pk_keybytes_2", "order_keybytes_2", 1000, "key-trim-1", &replay);
    assert_status(&replay, 200);
    ck_assert_msg(replay.body_len == rr.body_len && memcmp(replay.body, rr.body, rr.body_len) == 0,
                  "\"key-trim-1\" did not get the replay of \"  key-trim-1  \": %.400s",
                  replay.body);
    fg_response_fini(&replay);
    fg_raw_response_fini(&rr);
    json_t *e = the_ledger_entry(s, "order_keybytes_2");
    ck_assert_int_eq(json_int(e, "charges"), 1);
    const json_t *keys = json_object_get(e, "idempotency_keys");
    ck_assert_msg(json_is_array(keys) && json_array_size(keys) == 1 &&
                      strcmp(json_string_value(json_array_get(keys, 0)), "key-trim-1") == 0,
                  "idempotency_keys is not [\"key-trim-1\"]");
    json_decref(e);

    /* A folded (obs-fold) Idempotency-Key → 400 INVALID_IDEMPOTENCY_KEY (docs/edge-rules.md §7),
     * not a request executed without a key. */
    raw = raw_confirm(s, "Idempotency-Key: key-fold-1\r\n key-fold-2\r\n", KEYBODY("3"), &len);
    raw_expect_error(s, "folded", raw, len, 400, "INVALID_IDEMPOTENCY_KEY");
    free(raw);
    ck_assert_uint_eq(ledger_size(s), 1);
    stop_server(s);
}
END_TEST

/* ---- stored business errors ---------------------------------------------------------------- */

START_TEST(test_replay_of_business_error_is_byte_identical)
{
    fg_server *s = start_server(NULL);
    fg_response first, dup, dup_again;
    fg_confirm(s, "pk_dup_1", "order_dup_1", 1000, "key-dup-1", &first);
    assert_done_amount(&first, "pk_dup_1", "order_dup_1", 1000);

    fg_confirm(s, "pk_dup_2", "order_dup_1", 1000, "key-dup-2", &dup);
    assert_error(&dup, 400, "DUPLICATED_ORDER_ID");
    fg_confirm(s, "pk_dup_2", "order_dup_1", 1000, "key-dup-2", &dup_again);
    assert_error(&dup_again, 400, "DUPLICATED_ORDER_ID");
    ck_assert_msg(same_bytes(&dup, &dup_again), "stored 400 not replayed byte for byte:\n%s\n---\n%s",
                  dup.body, dup_again.body);
    ck_assert_str_ne(dup.trace_id, dup_again.trace_id);

    assert_charged_once(s, "pk_dup_1", "order_dup_1");
    fg_response_fini(&first);
    fg_response_fini(&dup);
    fg_response_fini(&dup_again);
    stop_server(s);
}
END_TEST

Suite *make_suite(void)
{
    Suite *su = suite_create("blackbox_idempotency");

    TCase *tc = add_tcase(su, "client_leaves", 30);
    tcase_add_test(tc, test_client_disconnect_during_latency_still_commits);
    tcase_add_test(tc, test_client_disconnect_during_queue_latency_still_commits);

    tc = add_tcase(su, "records", 30);
    tcase_add_test(tc, test_same_key_different_body_is_replayed_by_default);
    tcase_add_test(tc, test_same_key_different_body_rejected_with_reject_option);
    tcase_add_test(tc, test_idempotency_ttl_expiry_runs_again);
    tcase_add_test(tc, test_idempotency_records_fall_back_to_zero_after_the_ttl_without_traffic);
    tcase_add_test(tc, test_clock_advance_past_the_ttl_frees_the_records_at_once);
    tcase_add_test(tc, test_key_resent_after_its_ttl_starts_again_at_attempt_1);
    tcase_add_test(tc, test_ledger_lists_a_payments_first_10_keys_and_counts_the_rest);
    tcase_add_test(tc, test_replay_of_business_error_is_byte_identical);

    tc = add_tcase(su, "wire_limits", 30);
    tcase_add_test(tc, test_header_block_over_8k_gets_431_json);
    tcase_add_test(tc, test_chunked_body_over_max_body_gets_413_and_close);
    tcase_add_test(tc, test_empty_and_folded_idempotency_key_rejected);
    return su;
}
