/* check_faults.c -- black-box tests of fakegate's fault profiles (docs/idempotency.md §3 "Faults
 * decide what is stored", docs/profiles.md §4 Profiles): every fault kind as the client sees it and
 * as the ledger holds it, scripted sequences with attempts/times, throttles (token bucket, window,
 * Retry-After formats, bodies), the concurrency cap, seeded determinism under concurrency, and the
 * shipped profiles. Each test starts its own server on port 0. Requests whose connection-level
 * error matters use a fresh connection (CURLOPT_FORBID_REUSE): libcurl silently resends on a dead
 * reused one. Timing assertions are lower bounds on injected delays, or "answered at once" bounds
 * far below an injected latency; waits poll a condition with a bound. */
#define _GNU_SOURCE

#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "check_main.h"
#include "testkit.h"

/* ---- helpers ------------------------------------------------------------------------------ */

/* A profile whose confirm route is `confirm` ('-quoted object) and everything else instant. */
static fg_server *start_confirm(const char *confirm)
{
    return start_confirm_as("faults", confirm, NULL);
}

/* The raw header line `name: ...` (name case-insensitive) of the response, value bytes exactly
 * as sent after "name:" (leading OWS included), without CRLF. Returns false if absent. */
static bool raw_header_value(const fg_response *r, const char *name, char *out, size_t n)
{
    size_t nl = strlen(name);
    bool found = false;
    for (const char *p = r->header_block; p != NULL && *p != '\0';) {
        const char *eol = strstr(p, "\r\n");
        size_t len = eol != NULL ? (size_t)(eol - p) : strlen(p);
        if (len > nl && p[nl] == ':' && strncasecmp(p, name, nl) == 0) {
            size_t vl = len - nl - 1;
            if (vl >= n)
                vl = n - 1;
            memcpy(out, p + nl + 1, vl);
            out[vl] = '\0';
            found = true;
        }
        p = eol != NULL ? eol + 2 : p + len;
    }
    return found;
}

/* "Retry-After: <value>" exactly (one space, no trailing bytes). */
#define assert_retry_after(r, v) assert_retry_after_at(__LINE__, (r), (v))
static void assert_retry_after_at(int line, const fg_response *r, const char *value)
{
    char got[256];
    ck_assert_msg(raw_header_value(r, "Retry-After", got, sizeof got),
                  "line %d: no Retry-After header in:\n%s", line, r->header_block);
    char want[256];
    snprintf(want, sizeof want, " %s", value);
    ck_assert_msg(strcmp(got, want) == 0, "line %d: want \"Retry-After: %s\", got \"Retry-After:%s\"",
                  line, value, got);
}

/* Parse an IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT") strictly; -1 if it is not one. */
static long long imf_fixdate(const char *v)
{
    if (strlen(v) != 29 || strcmp(v + 25, " GMT") != 0 || v[3] != ',')
        return -1;
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    const char *end = strptime(v, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    if (end == NULL || *end != '\0')
        return -1;
    char back[64];
    strftime(back, sizeof back, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    if (strcmp(back, v) != 0) /* zero-padded day, English names */
        return -1;
    return (long long)timegm(&tm);
}

/* An http-date Retry-After about `ahead` seconds after now (±1 s of whole-second rounding). */
static void assert_http_date_ahead(const fg_response *r, long long ahead)
{
    char got[256];
    ck_assert_msg(raw_header_value(r, "Retry-After", got, sizeof got), "no Retry-After:\n%s",
                  r->header_block);
    ck_assert_msg(got[0] == ' ', "Retry-After value not after \": \": \"%s\"", got);
    long long t = imf_fixdate(got + 1);
    ck_assert_msg(t > 0, "Retry-After \"%s\" is not an IMF-fixdate", got + 1);
    long long now = (long long)time(NULL);
    ck_assert_msg(t - now >= ahead - 2 && t - now <= ahead + 1,
                  "Retry-After %s is %lld s from now, want about %lld", got + 1, t - now, ahead);
}

/* Content-Length of the response's header block, or -1. */
static long long content_length(const fg_response *r)
{
    char v[64];
    if (!raw_header_value(r, "Content-Length", v, sizeof v))
        return -1;
    return atoll(v);
}

/* ---- every fault kind: what the client sees, what the ledger holds ------------------------ */

/* drop_request (lost before processing) on attempt 1: the client sees `want` and the payment is
 * IN_PROGRESS with nothing charged; the same key then runs (no record existed) → 200 DONE. */
static void drop_request_case(const char *how_json, CURLcode want, long timeout_ms,
                              const char *tag)
{
    char confirm[512];
    snprintf(confirm, sizeof confirm,
             "{'faults':[{'kind':'drop_request','p':1,%s,'attempts':[1]}]}", how_json);
    fg_server *s = start_confirm(confirm);
    char pk[64], oid[64], key[64];
    snprintf(pk, sizeof pk, "pk_dropreq_%s", tag);
    snprintf(oid, sizeof oid, "order_dropreq_%s", tag);
    snprintf(key, sizeof key, "key-dropreq-%s", tag);

    fg_response lost;
    confirm_fresh(s, pk, oid, 5000, key, timeout_ms, &lost);
    assert_curl(&lost, want);
    ck_assert_int_eq(lost.status, 0);
    fg_response_fini(&lost);

    assert_order_status(s, oid, "IN_PROGRESS");
    ck_assert_int_eq(ledger_charges(s, oid), 0);

    fg_response again;
    confirm_fresh(s, pk, oid, 5000, key, 0, &again);
    assert_done(&again, pk, oid);
    ck_assert_int_eq(json_int(again.json, "totalAmount"), 5000);
    fg_response_fini(&again);
    assert_order_status(s, oid, "DONE");
    ck_assert_int_eq(ledger_charges(s, oid), 1);
    stop_server(s);
}

START_TEST(test_drop_request_close)
{
    drop_request_case("'how':'close'", CURLE_GOT_NOTHING, 0, "close");
}
END_TEST

START_TEST(test_drop_request_reset)
{
    drop_request_case("'how':'reset'", CURLE_RECV_ERROR, 0, "reset");
}
END_TEST

START_TEST(test_drop_request_hang)
{
    drop_request_case("'how':'hang','hang_ms':3000", CURLE_OPERATION_TIMEDOUT, 300, "hang");
}
END_TEST

/* drop_response: committed, then the answer is lost. The same key gets the stored 200; no key
 * gets 400 ALREADY_PROCESSED_PAYMENT. */
static void drop_response_case(const char *how, CURLcode want)
{
    char confirm[256];
    snprintf(confirm, sizeof confirm,
             "{'faults':[{'kind':'drop_response','p':1,'how':'%s','attempts':[1]}]}", how);
    fg_server *s = start_confirm(confirm);
    char pk[64], oid[64], key[64];
    snprintf(pk, sizeof pk, "pk_dropresp_%s", how);
    snprintf(oid, sizeof oid, "order_dropresp_%s", how);
    snprintf(key, sizeof key, "key-dropresp-%s", how);

    fg_response lost;
    confirm_fresh(s, pk, oid, 7000, key, 0, &lost);
    assert_curl(&lost, want);
    fg_response_fini(&lost);

    char st[64], ltk[128];
    order_read(s, oid, st, sizeof st, ltk, sizeof ltk);
    ck_assert_str_eq(st, "DONE");
    ck_assert_msg(ltk[0] != '\0', "DONE payment without a lastTransactionKey");
    ck_assert_int_eq(ledger_charges(s, oid), 1);

    fg_response again;
    confirm_fresh(s, pk, oid, 7000, key, 0, &again);
    assert_done(&again, pk, oid);
    ck_assert_str_eq(json_str(again.json, "lastTransactionKey"), ltk);
    fg_response_fini(&again);

    /* Without a key the identity is the orderId, whose attempt 1 loses its answer too (a
     * business error is what the network loses); attempt 2 shows it. */
    fg_response nokey;
    confirm_fresh(s, pk, oid, 7000, NULL, 0, &nokey);
    assert_curl(&nokey, want);
    fg_response_fini(&nokey);
    confirm_fresh(s, pk, oid, 7000, NULL, 0, &nokey);
    assert_error(&nokey, 400, "ALREADY_PROCESSED_PAYMENT");
    fg_response_fini(&nokey);
    ck_assert_int_eq(ledger_charges(s, oid), 1);
    stop_server(s);
}

START_TEST(test_drop_response_close)
{
    drop_response_case("close", CURLE_GOT_NOTHING);
}
END_TEST

START_TEST(test_drop_response_reset)
{
    drop_response_case("reset", CURLE_RECV_ERROR);
}
END_TEST

START_TEST(test_drop_response_truncate)
{
    fg_server *s = start_confirm("{'faults':[{'kind':'drop_response','p':1,'how':'truncate'}]}");
    fg_response r;
    confirm_fresh(s, "pk_trunc_1", "order_trunc_1", 3000, "key-trunc-1", 0, &r);
    assert_curl(&r, CURLE_PARTIAL_FILE);
    ck_assert_msg(strncmp(r.header_block, "HTTP/1.1 200", 12) == 0, "status line: %.100s",
                  r.header_block);
    long long cl = content_length(&r);
    ck_assert_msg(cl > 0, "no Content-Length in:\n%s", r.header_block);
    ck_assert_msg(r.body_len > 0 && (long long)r.body_len < cl,
                  "received %zu body bytes of Content-Length %lld", r.body_len, cl);
    ck_assert_msg(r.body[0] == '{', "truncated body does not start as the JSON: %.80s", r.body);
    fg_response_fini(&r);
    assert_order_status(s, "order_trunc_1", "DONE");
    ck_assert_int_eq(ledger_charges(s, "order_trunc_1"), 1);
    stop_server(s);
}
END_TEST

START_TEST(test_drip_spreads_the_body)
{
    fg_server *s = start_confirm("{'faults':[{'kind':'drip','p':1,'duration_ms':1000}]}");
    fg_response r;
    confirm_fresh(s, "pk_drip_1", "order_drip_1", 4000, "key-drip-1", 0, &r);
    assert_done(&r, "pk_drip_1", "order_drip_1");
    ck_assert_int_eq(json_int(r.json, "totalAmount"), 4000);
    ck_assert_int_eq(content_length(&r), (long long)r.body_len);
    int64_t took_ms = (r.done_ns - r.sent_ns) / MS;
    ck_assert_msg(took_ms >= 900, "drip of 1000 ms took only %lld ms", (long long)took_ms);
    ck_assert_msg(r.starttransfer_us > 0 && r.starttransfer_us + 500000 < r.total_us,
                  "headers at %lld us, transfer ended at %lld us: headers not sent at once",
                  (long long)r.starttransfer_us, (long long)r.total_us);
    fg_response_fini(&r);
    ck_assert_int_eq(ledger_charges(s, "order_drip_1"), 1);
    stop_server(s);
}
END_TEST

START_TEST(test_error_after_without_commit)
{
    fg_server *s = start_confirm(
        "{'latency':{'dist':'fixed','ms':50},'faults':[{'kind':'error','p':1,'status':500,"
        "'code':'FAILED_PAYMENT_INTERNAL_SYSTEM_PROCESSING','commit':false,'attempts':[1]}]}");
    fg_response r;
    confirm_fresh(s, "pk_eafter_1", "order_eafter_1", 2000, "key-eafter-1", 0, &r);
    assert_error(&r, 500, "FAILED_PAYMENT_INTERNAL_SYSTEM_PROCESSING");
    ck_assert_msg(r.done_ns - r.sent_ns >= 45 * MS, "error after came before the latency");
    fg_response_fini(&r);
    assert_order_status(s, "order_eafter_1", "IN_PROGRESS");
    ck_assert_int_eq(ledger_charges(s, "order_eafter_1"), 0);

    fg_response again;
    confirm_fresh(s, "pk_eafter_1", "order_eafter_1", 2000, "key-eafter-1", 0, &again);
    assert_done(&again, "pk_eafter_1", "order_eafter_1");
    fg_response_fini(&again);
    ck_assert_int_eq(ledger_charges(s, "order_eafter_1"), 1);
    stop_server(s);
}
END_TEST

START_TEST(test_error_after_with_commit)
{
    fg_server *s = start_confirm(
        "{'faults':[{'kind':'error','p':1,'status':500,'code':'FAILED_INTERNAL_SYSTEM_PROCESSING',"
        "'commit':true,'when':'after','attempts':[1]}]}");
    fg_response r;
    confirm_fresh(s, "pk_ecommit_1", "order_ecommit_1", 2000, "key-ecommit-1", 0, &r);
    assert_error(&r, 500, "FAILED_INTERNAL_SYSTEM_PROCESSING");
    fg_response_fini(&r);
    char st[64], ltk[128];
    order_read(s, "order_ecommit_1", st, sizeof st, ltk, sizeof ltk);
    ck_assert_str_eq(st, "DONE");
    ck_assert_int_eq(ledger_charges(s, "order_ecommit_1"), 1);

    /* The resend gets the stored success the client missed, byte for byte each time. */
    fg_response again, twice;
    confirm_fresh(s, "pk_ecommit_1", "order_ecommit_1", 2000, "key-ecommit-1", 0, &again);
    assert_done(&again, "pk_ecommit_1", "order_ecommit_1");
    ck_assert_str_eq(json_str(again.json, "lastTransactionKey"), ltk);
    confirm_fresh(s, "pk_ecommit_1", "order_ecommit_1", 2000, "key-ecommit-1", 0, &twice);
    ck_assert_msg(same_bytes(&again, &twice), "stored success not replayed byte for byte");
    fg_response_fini(&again);
    fg_response_fini(&twice);
    ck_assert_int_eq(ledger_charges(s, "order_ecommit_1"), 1);
    stop_server(s);
}
END_TEST

START_TEST(test_error_before_is_immediate_and_not_stored)
{
    fg_server *s = start_confirm(
        "{'latency':{'dist':'fixed','ms':2000},'faults':[{'kind':'error','p':1,'status':503,"
        "'code':'SERVICE_UNAVAILABLE','when':'before','attempts':[1]}]}");
    fg_response r;
    confirm_fresh(s, "pk_ebefore_1", "order_ebefore_1", 2000, "key-ebefore-1", 0, &r);
    assert_error(&r, 503, "SERVICE_UNAVAILABLE");
    int64_t took = (r.done_ns - r.sent_ns) / MS;
    ck_assert_msg(took < 700, "error before took %lld ms (confirm latency 2000 ms)",
                  (long long)took);
    fg_response_fini(&r);
    assert_order_status(s, "order_ebefore_1", "IN_PROGRESS");
    ck_assert_int_eq(ledger_charges(s, "order_ebefore_1"), 0);

    fg_response again;
    confirm_fresh(s, "pk_ebefore_1", "order_ebefore_1", 2000, "key-ebefore-1", 0, &again);
    assert_done(&again, "pk_ebefore_1", "order_ebefore_1");
    ck_assert_msg(again.done_ns - again.sent_ns >= 1900 * MS,
                  "the resend did not run (took %lld ms, latency 2000)",
                  (long long)((again.done_ns - again.sent_ns) / MS));
    fg_response_fini(&again);
    ck_assert_int_eq(ledger_charges(s, "order_ebefore_1"), 1);
    stop_server(s);
}
END_TEST

START_TEST(test_error_bodies_and_retry_after)
{
    /* html body, raw Retry-After */
    fg_server *s = start_confirm(
        "{'faults':[{'kind':'error','p':1,'status':503,'code':'SERVICE_UNAVAILABLE',"
        "'when':'before','body':'html','retry_after':{'format':'raw','value':'1.5'}}]}");
    fg_response r;
    confirm_fresh(s, "pk_ebody_1", "order_ebody_1", 1000, "key-ebody-1", 0, &r);
    assert_status(&r, 503);
    ck_assert_msg(strncmp(r.content_type, "text/html", 9) == 0, "Content-Type \"%s\"",
                  r.content_type);
    ck_assert_msg(r.json == NULL && strstr(r.body, "<html") != NULL && strstr(r.body, "503"),
                  "not an HTML 503 page: %.300s", r.body);
    assert_retry_after(&r, "1.5");
    fg_response_fini(&r);
    stop_server(s);

    /* empty body, http-date Retry-After */
    s = start_confirm(
        "{'faults':[{'kind':'error','p':1,'status':500,'code':'FAILED_INTERNAL_SYSTEM_PROCESSING',"
        "'when':'before','body':'empty','retry_after':{'format':'http-date','value':5}}]}");
    confirm_fresh(s, "pk_ebody_2", "order_ebody_2", 1000, "key-ebody-2", 0, &r);
    assert_status(&r, 500);
    ck_assert_msg(r.body_len == 0, "want an empty body, got %zu bytes: %.200s", r.body_len, r.body);
    ck_assert_int_eq(content_length(&r), 0);
    assert_http_date_ahead(&r, 5);
    fg_response_fini(&r);
    stop_server(s);

    /* json body with a seconds Retry-After and a message of its own */
    s = start_confirm(
        "{'faults':[{'kind':'error','p':1,'status':502,'code':'PROVIDER_ERROR','message':'down',"
        "'when':'before','retry_after':{'format':'seconds','value':7}}]}");
    confirm_fresh(s, "pk_ebody_3", "order_ebody_3", 1000, "key-ebody-3", 0, &r);
    assert_error(&r, 502, "PROVIDER_ERROR");
    ck_assert_str_eq(json_str(r.json, "message"), "down");
    assert_retry_after(&r, "7");
    fg_response_fini(&r);
    stop_server(s);
}
END_TEST

/* A ways-out fault loses a replay: the second request with K would have been the stored 200. */
START_TEST(test_fault_applies_to_replay)
{
    fg_server *s = start_confirm(
        "{'faults':[{'kind':'drop_response','p':1,'how':'close','attempts':[2]}]}");
    fg_response first, second, third;
    confirm_fresh(s, "pk_rep_1", "order_rep_1", 1000, "key-rep-1", 0, &first);
    assert_done(&first, "pk_rep_1", "order_rep_1");
    confirm_fresh(s, "pk_rep_1", "order_rep_1", 1000, "key-rep-1", 0, &second);
    assert_curl(&second, CURLE_GOT_NOTHING);
    confirm_fresh(s, "pk_rep_1", "order_rep_1", 1000, "key-rep-1", 0, &third);
    assert_done(&third, "pk_rep_1", "order_rep_1");
    ck_assert_msg(same_bytes(&first, &third), "attempt 3 is not the stored response");
    fg_response_fini(&first);
    fg_response_fini(&second);
    fg_response_fini(&third);
    ck_assert_int_eq(ledger_charges(s, "order_rep_1"), 1);
    stop_server(s);
}
END_TEST

struct call {
    const fg_server *s;
    const char *pk, *oid, *key;
    fg_response r;
};

static void *call_confirm(void *arg)
{
    struct call *c = arg;
    confirm_fresh(c->s, c->pk, c->oid, 1000, c->key, 0, &c->r);
    return NULL;
}

/* ...and a 409: the second request with K arrives while the first is processing. */
START_TEST(test_fault_applies_to_409)
{
    fg_server *s = start_confirm(
        "{'latency':{'dist':'fixed','ms':800},"
        "'faults':[{'kind':'drop_response','p':1,'how':'reset','attempts':[2]}]}");
    struct call a = {.s = s, .pk = "pk_c409_1", .oid = "order_c409_1", .key = "key-c409-1"};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, call_confirm, &a), 0);
    ck_assert_msg(wait_for_order_status(s, "order_c409_1", "IN_PROGRESS", 3000, 5),
                  "first confirm never arrived");
    fg_pause_ms(50); /* the claim is taken in the same handler call as the payment's creation */
    fg_response second;
    confirm_fresh(s, "pk_c409_1", "order_c409_1", 1000, "key-c409-1", 0, &second);
    int64_t second_ms = (second.done_ns - second.sent_ns) / MS;
    pthread_join(t, NULL);
    assert_curl(&second, CURLE_RECV_ERROR);
    ck_assert_msg(second_ms < 500, "the would-be 409 waited %lld ms", (long long)second_ms);
    assert_done(&a.r, "pk_c409_1", "order_c409_1");
    ck_assert_msg(second.done_ns < a.r.done_ns, "the second request was not answered while the "
                  "first was processing");
    fg_response third;
    confirm_fresh(s, "pk_c409_1", "order_c409_1", 1000, "key-c409-1", 0, &third);
    ck_assert_msg(same_bytes(&a.r, &third), "attempt 3 is not the stored response");
    fg_response_fini(&third);
    fg_response_fini(&second);
    fg_response_fini(&a.r);
    ck_assert_int_eq(ledger_charges(s, "order_c409_1"), 1);
    stop_server(s);
}
END_TEST

/* ---- attempts and times ------------------------------------------------------------------- */

START_TEST(test_attempts_script_first_two_fail)
{
    fg_server *s = start_confirm(
        "{'faults':[{'kind':'error','p':1,'status':503,'code':'SERVICE_UNAVAILABLE',"
        "'when':'before','attempts':[1,2]}]}");
    /* Per identity: two keys interleaved, and a keyless request identified by its orderId. */
    const char *keys[] = {"key-att-a", "key-att-b", NULL};
    const char *pks[] = {"pk_att_a", "pk_att_b", "pk_att_c"};
    const char *oids[] = {"order_att_a", "order_att_b", "order_att_c"};
    for (int attempt = 1; attempt <= 3; attempt++) {
        for (int i = 0; i < 3; i++) {
            fg_response r;
            confirm_fresh(s, pks[i], oids[i], 1000, keys[i], 0, &r);
            if (attempt <= 2) {
                assert_error(&r, 503, "SERVICE_UNAVAILABLE");
            } else {
                assert_done(&r, pks[i], oids[i]);
            }
            fg_response_fini(&r);
            if (attempt == 2)
                ck_assert_int_eq(ledger_charges(s, oids[i]), 0);
        }
    }
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(ledger_charges(s, oids[i]), 1);
    stop_server(s);
}
END_TEST

START_TEST(test_times_budget_first_n_requests)
{
    fg_server *s = start_confirm(
        "{'faults':[{'kind':'error','p':1,'status':503,'code':'SERVICE_UNAVAILABLE',"
        "'when':'before','times':2}]}");
    for (int i = 0; i < 6; i++) {
        char pk[32], oid[32], key[32];
        snprintf(pk, sizeof pk, "pk_times_%d", i);
        snprintf(oid, sizeof oid, "order_times_%d", i);
        snprintf(key, sizeof key, "key-times-%d", i);
        fg_response r;
        confirm_fresh(s, pk, oid, 1000, key, 0, &r);
        if (i < 2)
            assert_error(&r, 503, "SERVICE_UNAVAILABLE");
        else
            assert_done(&r, pk, oid);
        fg_response_fini(&r);
    }
    /* The first identity again: the budget is spent. */
    fg_response r;
    confirm_fresh(s, "pk_times_0", "order_times_0", 1000, "key-times-0", 0, &r);
    assert_done(&r, "pk_times_0", "order_times_0");
    fg_response_fini(&r);
    ck_assert_uint_eq(ledger_size(s), 6);
    stop_server(s);
}
END_TEST

/* Is this a throttle rejection (503 SERVICE_UNAVAILABLE from the bucket)? */
static bool is_throttled(const fg_response *r)
{
    const char *c = fg_error_code(r);
    return r->curl_code == CURLE_OK && r->status == 503 && c != NULL &&
           strcmp(c, "SERVICE_UNAVAILABLE") == 0;
}

START_TEST(test_throttled_requests_are_not_attempts)
{
    /* One token, refilled at 4/s; the fault (500, distinguishable from the 503 throttle) acts on
     * attempt 1 of each identity. */
    fg_server *s = start_confirm(
        "{'throttle':{'kind':'token_bucket','rate_per_s':4,'burst':1},"
        "'faults':[{'kind':'error','p':1,'status':500,'code':'FAILED_INTERNAL_SYSTEM_PROCESSING',"
        "'when':'before','attempts':[1]}]}");
    fg_response r;
    confirm_fresh(s, "pk_thr_a", "order_thr_a", 1000, "key-thr-a", 0, &r);
    assert_error(&r, 500, "FAILED_INTERNAL_SYSTEM_PROCESSING"); /* takes the token */
    fg_response_fini(&r);

    /* B, sent until admitted: every throttled try is not an attempt, so the admitted one is
     * attempt 1 and gets the fault. */
    int throttled = 0;
    int64_t deadline = fg_now_ms() + 3000;
    for (;;) {
        confirm_fresh(s, "pk_thr_b", "order_thr_b", 1000, "key-thr-b", 0, &r);
        if (!is_throttled(&r))
            break;
        throttled++;
        fg_response_fini(&r);
        ck_assert_msg(fg_now_ms() < deadline, "still throttled after 3 s");
        fg_pause_ms(20);
    }
    ck_assert_msg(throttled >= 1, "B was never throttled: the test shows nothing");
    assert_error(&r, 500, "FAILED_INTERNAL_SYSTEM_PROCESSING");
    fg_response_fini(&r);

    deadline = fg_now_ms() + 3000;
    for (;;) {
        confirm_fresh(s, "pk_thr_b", "order_thr_b", 1000, "key-thr-b", 0, &r);
        if (!is_throttled(&r))
            break;
        fg_response_fini(&r);
        ck_assert_msg(fg_now_ms() < deadline, "still throttled after 3 s");
        fg_pause_ms(20);
    }
    assert_done(&r, "pk_thr_b", "order_thr_b");
    fg_response_fini(&r);
    ck_assert_int_eq(ledger_charges(s, "order_thr_b"), 1);
    stop_server(s);
}
END_TEST

/* ---- throttle ----------------------------------------------------------------------------- */

START_TEST(test_token_bucket_burst_then_refuse)
{
    fg_server *s = start_confirm("{'throttle':{'kind':'token_bucket','rate_per_s':1,'burst':5}}");
    enum { N = 20 };
    int ok = 0, refused = 0;
    int64_t t0 = fg_now_ns(), t_end = 0;
    for (int i = 0; i < N; i++) {
        char pk[32], oid[32], key[32];
        snprintf(pk, sizeof pk, "pk_tb_%d", i);
        snprintf(oid, sizeof oid, "order_tb_%d", i);
        snprintf(key, sizeof key, "key-tb-%d", i);
        fg_response r;
        confirm_fresh(s, pk, oid, 1000, key, 0, &r);
        t_end = r.done_ns;
        if (i < 5) {
            assert_done(&r, pk, oid);
            ok++;
        } else {
            assert_error(&r, 503, "SERVICE_UNAVAILABLE");
            assert_retry_after(&r, "1");
            refused++;
        }
        fg_response_fini(&r);
    }
    ck_assert_msg(t_end - t0 < 900 * MS, "20 confirms took %lld ms: too slow to test a bucket "
                  "of 1/s", (long long)((t_end - t0) / MS));
    ck_assert_int_eq(ok, 5);
    ck_assert_int_eq(refused, 15);
    /* Nothing of the refused ones reached the ledger. */
    ck_assert_uint_eq(ledger_size(s), 5);
    json_t *none = fg_admin_payments(s, "order_tb_5");
    ck_assert(none != NULL);
    ck_assert_uint_eq(json_array_size(none), 0);
    json_decref(none);

    /* A refused key, after the bucket refills, runs normally (nothing was stored under it). */
    fg_response r;
    int64_t deadline = fg_now_ms() + 3000;
    for (;;) {
        confirm_fresh(s, "pk_tb_5", "order_tb_5", 1000, "key-tb-5", 0, &r);
        if (!is_throttled(&r))
            break;
        fg_response_fini(&r);
        ck_assert_msg(fg_now_ms() < deadline, "still throttled after 3 s at 1 token/s");
        fg_pause_ms(50);
    }
    assert_done(&r, "pk_tb_5", "order_tb_5");
    fg_response_fini(&r);
    ck_assert_int_eq(ledger_charges(s, "order_tb_5"), 1);
    ck_assert_uint_eq(ledger_size(s), 6);
    stop_server(s);
}
END_TEST

START_TEST(test_window_throttle_retry_after_and_reopen)
{
    /* The window's origin is when the profile was applied: between fg_start's call and return.
     * (Not period 2 / throttled 1.5: the validator rejects an open part under 1 s, which no
     * whole-second Retry-After can reach; 2.5 / 1.5 is what the shipped dawn-peak uses.) */
    int64_t t_call = fg_now_ns();
    fg_server *s = start_confirm(
        "{'throttle':{'kind':'window','period_s':2.5,'throttled_s':1.5,'offset_s':0}}");
    int64_t t_ret = fg_now_ns();
    bool saw_throttled = false, saw_ok = false;
    int n = 0;
    int64_t deadline = fg_now_ms() + 6000;
    while (!saw_ok) {
        ck_assert_msg(fg_now_ms() < deadline, "no 200 within 6 s of a 1.5 s window");
        fg_response r;
        confirm_fresh(s, "pk_win_1", "order_win_1", 1000, "key-win-1", 0, &r);
        n++;
        /* Bounds on the time since the origin at which the server decided. */
        double lo = (double)(r.sent_ns - t_ret) / 1e9, hi = (double)(r.done_ns - t_call) / 1e9;
        if (lo < 0)
            lo = 0;
        if (r.status == 200) {
            ck_assert_msg(hi >= 1.5, "admitted %.3f s at most after the origin, inside the 1.5 s "
                          "window", hi);
            assert_done(&r, "pk_win_1", "order_win_1");
            saw_ok = true;
        } else {
            assert_error(&r, 503, "SERVICE_UNAVAILABLE");
            ck_assert_msg(lo < 1.5, "refused at least %.3f s after the origin (window 1.5 s)", lo);
            char ra[64];
            ck_assert(raw_header_value(&r, "Retry-After", ra, sizeof ra));
            int v = atoi(ra);
            ck_assert_msg(strcmp(ra, " 1") == 0 || strcmp(ra, " 2") == 0,
                          "Retry-After:%s, want 1 or 2", ra);
            if (hi < 1.5) {
                saw_throttled = true;
                int min = (int)ceil(1.5 - hi), max = (int)ceil(1.5 - lo);
                ck_assert_msg(v >= min && v <= max,
                              "Retry-After %d at %.3f..%.3f s into a 1.5 s window (want %d..%d)",
                              v, lo, hi, min, max);
            }
            fg_pause_ms(20);
        }
        fg_response_fini(&r);
    }
    ck_assert_msg(saw_throttled, "no request was certainly inside the window (server startup "
                  "took %lld ms)", (long long)((t_ret - t_call) / MS));
    ck_assert_msg(n >= 2, "only %d requests", n);
    ck_assert_uint_eq(ledger_size(s), 1);
    ck_assert_int_eq(ledger_charges(s, "order_win_1"), 1);
    stop_server(s);
}
END_TEST

/* "A client that comes back exactly when told is admitted": wait the announced whole seconds
 * after a window refusal, and the resend is admitted. */
START_TEST(test_window_client_returning_when_told_is_admitted)
{
    fg_server *s = start_confirm(
        "{'throttle':{'kind':'window','period_s':2.5,'throttled_s':1.5,'offset_s':0}}");
    fg_response r;
    confirm_fresh(s, "pk_win_2", "order_win_2", 1000, "key-win-2", 0, &r);
    assert_error(&r, 503, "SERVICE_UNAVAILABLE");
    char ra[64];
    ck_assert(raw_header_value(&r, "Retry-After", ra, sizeof ra));
    int v = atoi(ra);
    ck_assert_msg(v == 1 || v == 2, "Retry-After:%s", ra);
    int64_t back_at = r.done_ns + v * 1000 * MS;
    fg_response_fini(&r);
    while (fg_now_ns() < back_at)
        fg_pause_ms(1);
    confirm_fresh(s, "pk_win_2", "order_win_2", 1000, "key-win-2", 0, &r);
    assert_done(&r, "pk_win_2", "order_win_2");
    fg_response_fini(&r);
    stop_server(s);
}
END_TEST

/* A bucket of one token that practically never refills: the 2nd confirm is throttled. */
static void throttle_second(const char *extra, fg_response *r, fg_server **out)
{
    char confirm[512];
    snprintf(confirm, sizeof confirm,
             "{'throttle':{'kind':'token_bucket','rate_per_s':0.01,'burst':1%s}}", extra);
    fg_server *s = start_confirm(confirm);
    fg_response first;
    confirm_fresh(s, "pk_fmt_1", "order_fmt_1", 1000, "key-fmt-1", 0, &first);
    assert_done(&first, "pk_fmt_1", "order_fmt_1");
    fg_response_fini(&first);
    confirm_fresh(s, "pk_fmt_2", "order_fmt_2", 1000, "key-fmt-2", 0, r);
    *out = s;
}

START_TEST(test_throttle_retry_after_formats_status_and_bodies)
{
    fg_server *s;
    fg_response r;

    /* 429 + default code TOO_MANY_REQUESTS; auto Retry-After = time to the next token (100 s). */
    throttle_second(",'status':429", &r, &s);
    assert_error(&r, 429, "TOO_MANY_REQUESTS");
    char ra[64];
    ck_assert(raw_header_value(&r, "Retry-After", ra, sizeof ra));
    ck_assert_msg(strcmp(ra, " 100") == 0 || strcmp(ra, " 99") == 0,
                  "Retry-After:%s, want 99 or 100 (next token at 0.01/s)", ra);
    fg_response_fini(&r);
    ck_assert_uint_eq(ledger_size(s), 1);
    stop_server(s);

    /* raw: byte-for-byte */
    throttle_second(",'retry_after':{'format':'raw','value':'1.5'}", &r, &s);
    assert_error(&r, 503, "SERVICE_UNAVAILABLE");
    assert_retry_after(&r, "1.5");
    fg_response_fini(&r);
    stop_server(s);

    throttle_second(",'retry_after':{'format':'raw','value':'-1'}", &r, &s);
    assert_retry_after(&r, "-1");
    fg_response_fini(&r);
    stop_server(s);

    /* http-date */
    throttle_second(",'retry_after':{'format':'http-date','value':5}", &r, &s);
    assert_error(&r, 503, "SERVICE_UNAVAILABLE");
    assert_http_date_ahead(&r, 5);
    fg_response_fini(&r);
    stop_server(s);

    /* none */
    throttle_second(",'retry_after':{'format':'none'}", &r, &s);
    assert_error(&r, 503, "SERVICE_UNAVAILABLE");
    ck_assert_msg(!raw_header_value(&r, "Retry-After", ra, sizeof ra), "Retry-After:%s with "
                  "format none", ra);
    fg_response_fini(&r);
    stop_server(s);

    /* a configured code */
    throttle_second(",'status':503,'code':'PROVIDER_ERROR'", &r, &s);
    assert_error(&r, 503, "PROVIDER_ERROR");
    fg_response_fini(&r);
    stop_server(s);

    /* html body, as a load balancer sends */
    throttle_second(",'status':429,'body':'html'", &r, &s);
    assert_status(&r, 429);
    ck_assert_msg(strncmp(r.content_type, "text/html", 9) == 0, "Content-Type \"%s\"",
                  r.content_type);
    ck_assert_msg(r.json == NULL && strstr(r.body, "<html") != NULL && strstr(r.body, "429"),
                  "not an HTML 429 page: %.300s", r.body);
    fg_response_fini(&r);
    stop_server(s);

    /* empty body */
    throttle_second(",'body':'empty'", &r, &s);
    assert_status(&r, 503);
    ck_assert_msg(r.body_len == 0, "want an empty body, got %.200s", r.body);
    ck_assert_int_eq(content_length(&r), 0);
    fg_response_fini(&r);
    ck_assert_uint_eq(ledger_size(s), 1);
    stop_server(s);
}
END_TEST

/* ---- concurrency cap ---------------------------------------------------------------------- */

START_TEST(test_concurrency_cap)
{
    fg_server *s = start_confirm(
        "{'latency':{'dist':'fixed','ms':1000},'concurrency':{'max_in_flight':3}}");
    struct call c[3] = {
        {.s = s, .pk = "pk_cap_a", .oid = "order_cap_a", .key = "key-cap-a"},
        {.s = s, .pk = "pk_cap_b", .oid = "order_cap_b", .key = "key-cap-b"},
        {.s = s, .pk = "pk_cap_c", .oid = "order_cap_c", .key = "key-cap-c"},
    };
    pthread_t t[3];
    ck_assert_int_eq(pthread_create(&t[0], NULL, call_confirm, &c[0]), 0);
    ck_assert_msg(wait_for_order_status(s, "order_cap_a", "IN_PROGRESS", 3000, 5),
                  "A never arrived");
    fg_pause_ms(300); /* B and C end 300 ms after A: a slot frees while they are held */
    for (int i = 1; i < 3; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, call_confirm, &c[i]), 0);
    for (int i = 1; i < 3; i++)
        ck_assert_msg(wait_for_order_status(s, c[i].oid, "IN_PROGRESS", 3000, 5),
                      "%s never arrived", c[i].oid);

    /* The 4th: rejected at once, nothing of it reaches the ledger. */
    fg_response d;
    confirm_fresh(s, "pk_cap_d", "order_cap_d", 1000, "key-cap-d", 0, &d);
    assert_error(&d, 503, "SERVICE_UNAVAILABLE");
    int64_t took = (d.done_ns - d.sent_ns) / MS;
    ck_assert_msg(took < 500, "cap rejection took %lld ms", (long long)took);
    fg_response_fini(&d);
    json_t *none = fg_admin_payments(s, "order_cap_d");
    ck_assert(none != NULL);
    ck_assert_uint_eq(json_array_size(none), 0);
    json_decref(none);

    /* A finishes; then a new one is admitted while B and C are still held. The slot is freed
     * when A's response ends on the server, a moment after the client has it: allow 200 ms. */
    pthread_join(t[0], NULL);
    assert_done(&c[0].r, "pk_cap_a", "order_cap_a");
    int64_t a_done = c[0].r.done_ns;
    fg_response e;
    for (;;) {
        confirm_fresh(s, "pk_cap_e", "order_cap_e", 1000, "key-cap-e", 0, &e);
        if (e.status != 503 || e.sent_ns - a_done > 200 * MS)
            break;
        fg_response_fini(&e);
        fg_pause_ms(5);
    }
    int64_t e_sent = e.sent_ns;
    assert_done(&e, "pk_cap_e", "order_cap_e");
    fg_response_fini(&e);
    for (int i = 1; i < 3; i++) {
        pthread_join(t[i], NULL);
        assert_done(&c[i].r, c[i].pk, c[i].oid);
        ck_assert_msg(c[i].r.done_ns > e_sent, "%s had ended before E was sent: the test shows "
                      "nothing", c[i].oid);
        fg_response_fini(&c[i].r);
    }
    fg_response_fini(&c[0].r);
    ck_assert_uint_eq(ledger_size(s), 4);
    stop_server(s);
}
END_TEST

/* ---- determinism -------------------------------------------------------------------------- */

enum { DET_N = 200, DET_THREADS = 8 };

/* Per key: the status, or -(curl error) when no response came. */
struct det_run {
    const fg_server *s;
    atomic_int next;
    int outcome[DET_N];
};

static int det_one(const fg_server *s, int i)
{
    char pk[32], oid[32], key[32];
    snprintf(pk, sizeof pk, "pk_det_%03d", i);
    snprintf(oid, sizeof oid, "order_det_%03d", i);
    snprintf(key, sizeof key, "key-det-%03d", i);
    fg_response r;
    confirm_fresh(s, pk, oid, 1000 + i, key, 5000, &r);
    int o;
    if (r.curl_code != CURLE_OK) {
        o = -(int)r.curl_code;
    } else {
        o = (int)r.status;
        const char *c = fg_error_code(&r);
        const char *want = r.status == 500 ? "FAILED_INTERNAL_SYSTEM_PROCESSING"
                           : r.status == 503 ? "SERVICE_UNAVAILABLE" : NULL;
        if (want != NULL && (c == NULL || strcmp(c, want) != 0))
            o = -1000; /* not the configured fault */
    }
    fg_response_fini(&r);
    return o;
}

static void *det_worker(void *arg)
{
    struct det_run *d = arg;
    for (;;) {
        int i = atomic_fetch_add(&d->next, 1);
        if (i >= DET_N)
            break;
        d->outcome[i] = det_one(d->s, i);
    }
    return NULL;
}

/* The determinism profile with this seed, as JSON (caller frees). */
static char *det_profile(int seed)
{
    char prof[1024];
    snprintf(prof, sizeof prof,
             "{'name':'det','seed':%d,'routes':{'confirm':{"
             "'latency':{'dist':'uniform','min_ms':0,'max_ms':20},'faults':["
             "{'kind':'error','p':0.2,'status':500,'code':'FAILED_INTERNAL_SYSTEM_PROCESSING',"
             "'when':'before'},"
             "{'kind':'error','p':0.2,'status':503,'code':'SERVICE_UNAVAILABLE','when':'before'},"
             "{'kind':'drop_request','p':0.1,'how':'close'}]},"
             "'default':{'latency':{'dist':'fixed','ms':0}}}}",
             seed);
    return dq(prof);
}

static fg_server *det_server(int seed)
{
    char *json = det_profile(seed);
    fg_opts o = {.profile_json = json, .capture_stdout = true};
    fg_server *s = start_server(&o);
    free(json);
    char want[64];
    snprintf(want, sizeof want, " seed=%d", seed);
    ck_assert_msg(strstr(s->ready_line, want) != NULL, "ready line \"%s\" lacks%s", s->ready_line,
                  want);
    return s;
}

static void det_sequential(int seed, int *out)
{
    fg_server *s = det_server(seed);
    for (int i = 0; i < DET_N; i++)
        out[i] = det_one(s, i);
    stop_server(s);
}

START_TEST(test_seeded_outcomes_repeat_under_concurrency)
{
    static int seq[DET_N], other[DET_N];
    static struct det_run par;
    det_sequential(42, seq);

    int n200 = 0, n500 = 0, n503 = 0, n52 = 0;
    for (int i = 0; i < DET_N; i++) {
        ck_assert_msg(seq[i] == 200 || seq[i] == 500 || seq[i] == 503 ||
                          seq[i] == -(int)CURLE_GOT_NOTHING,
                      "request %d: unexpected outcome %d", i, seq[i]);
        n200 += seq[i] == 200;
        n500 += seq[i] == 500;
        n503 += seq[i] == 503;
        n52 += seq[i] == -(int)CURLE_GOT_NOTHING;
    }
    /* p 0.2/0.2/0.1 of 200: loose bounds, each kind seen. */
    ck_assert_msg(n200 >= 60 && n500 >= 15 && n503 >= 15 && n52 >= 5,
                  "implausible mix: 200×%d 500×%d 503×%d dropped×%d", n200, n500, n503, n52);

    fg_server *s = det_server(42);
    par.s = s;
    atomic_store(&par.next, 0);
    pthread_t t[DET_THREADS];
    for (int i = 0; i < DET_THREADS; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, det_worker, &par), 0);
    for (int i = 0; i < DET_THREADS; i++)
        pthread_join(t[i], NULL);
    stop_server(s);
    for (int i = 0; i < DET_N; i++)
        ck_assert_msg(par.outcome[i] == seq[i],
                      "key-det-%03d: %d sequentially, %d from %d threads (same seed)", i, seq[i],
                      par.outcome[i], DET_THREADS);

    det_sequential(43, other);
    int differ = 0;
    for (int i = 0; i < DET_N; i++)
        differ += other[i] != seq[i];
    ck_assert_msg(differ > 0, "seed 43 gave the same %d outcomes as seed 42", DET_N);
}
END_TEST

/* docs/profiles.md §4: "with a seed (--seed, or "seed" in the profile)": a seeded profile applied
 * while the server runs (PUT /__admin/profile) draws the same decisions as when the server started
 * with it, whatever seed the server started with. */
START_TEST(test_seed_of_a_profile_applied_at_run_time_is_used)
{
    static int at_start[DET_N], applied[DET_N];
    det_sequential(42, at_start);
    fg_server *s = start_server(NULL); /* no --seed, a start profile without one: random */
    char *json = det_profile(42);
    fg_request req = {.method = "PUT", .path = "/__admin/profile", .body = json};
    fg_response r;
    fg_http(s, NULL, &req, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    for (int i = 0; i < DET_N; i++)
        applied[i] = det_one(s, i);
    stop_server(s);
    free(json);
    for (int i = 0; i < DET_N; i++)
        ck_assert_msg(applied[i] == at_start[i],
                      "key-det-%03d: %d with seed 42 at start, %d with it applied by PUT", i,
                      at_start[i], applied[i]);
}
END_TEST

/* ---- shipped profiles --------------------------------------------------------------------- */

START_TEST(test_shipped_profiles_load_by_name)
{
    const char *dir = getenv("FAKEGATE_PROFILES");
    if (dir == NULL || dir[0] == '\0')
        dir = "profiles";
    static const char *const names[] = {"normal", "slow", "lossy", "throttled",
                                        "outage", "flaky", "saturated", "dawn-peak"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *args[] = {"--profile", names[i], "--profiles-dir", dir, NULL};
        fg_opts o = {.args = args, .capture_stdout = true};
        fg_server *s = start_server(&o);
        char want[256];
        snprintf(want, sizeof want, "fakegate listening on http://127.0.0.1:%d profile=%s seed=",
                 s->port, names[i]);
        ck_assert_msg(strncmp(s->ready_line, want, strlen(want)) == 0,
                      "ready line \"%s\", want \"%s<N>\"", s->ready_line, want);
        const char *seed = s->ready_line + strlen(want);
        ck_assert_msg(seed[0] >= '0' && seed[0] <= '9' && strspn(seed, "0123456789") ==
                                                              strlen(seed),
                      "seed \"%s\" is not a number", seed);
        stop_server(s);
    }
}
END_TEST

Suite *make_suite(void)
{
    Suite *su = suite_create("blackbox_faults");

    TCase *tc = add_tcase(su, "fault_kinds", 30);
    tcase_add_test(tc, test_drop_request_close);
    tcase_add_test(tc, test_drop_request_reset);
    tcase_add_test(tc, test_drop_request_hang);
    tcase_add_test(tc, test_drop_response_close);
    tcase_add_test(tc, test_drop_response_reset);
    tcase_add_test(tc, test_drop_response_truncate);
    tcase_add_test(tc, test_drip_spreads_the_body);
    tcase_add_test(tc, test_error_after_without_commit);
    tcase_add_test(tc, test_error_after_with_commit);
    tcase_add_test(tc, test_error_before_is_immediate_and_not_stored);
    tcase_add_test(tc, test_error_bodies_and_retry_after);
    tcase_add_test(tc, test_fault_applies_to_replay);
    tcase_add_test(tc, test_fault_applies_to_409);

    tc = add_tcase(su, "scripted", 30);
    tcase_add_test(tc, test_attempts_script_first_two_fail);
    tcase_add_test(tc, test_times_budget_first_n_requests);
    tcase_add_test(tc, test_throttled_requests_are_not_attempts);

    tc = add_tcase(su, "throttle", 30);
    tcase_add_test(tc, test_token_bucket_burst_then_refuse);
    tcase_add_test(tc, test_window_client_returning_when_told_is_admitted);
    tcase_add_test(tc, test_throttle_retry_after_formats_status_and_bodies);

    tc = add_tcase(su, "concurrency", 30);
    tcase_add_test(tc, test_concurrency_cap);

    tc = add_tcase(su, "determinism", 60);
    tcase_add_test(tc, test_seeded_outcomes_repeat_under_concurrency);
    tcase_add_test(tc, test_seed_of_a_profile_applied_at_run_time_is_used);

    tc = add_tcase(su, "shipped", 60);
    tcase_add_test(tc, test_shipped_profiles_load_by_name);
    /* Bounds on wall-clock time: not under make memcheck (testkit.h). */
    tc = add_timing_tcase(su, "throttle_timing", 30);
    tcase_add_test(tc, test_window_throttle_retry_after_and_reopen);
    return su;
}
