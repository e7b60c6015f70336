/* check_api.c -- black-box tests of fakegate's Toss-like API, idempotency and CLI (docs/cli.md §1,
 * docs/api.md §2, docs/idempotency.md §3, §5 health/payments, §7). Each test starts its own server
 * on port 0 through the harness and stops it; the harness kills it if the test dies first. Waits
 * poll a condition with a bound. */
#define _GNU_SOURCE

#include <check.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check_main.h"
#include "testkit.h"

#define NO_CACHE "no-cache, no-store, max-age=0, must-revalidate"

/* confirm held 1000 ms in its processing latency; everything else instant. */
#define PROFILE_CONFIRM_1000MS                                                                 \
    "{\"name\":\"held\",\"routes\":{\"confirm\":{\"latency\":{\"dist\":\"fixed\",\"ms\":1000}}," \
    "\"default\":{\"latency\":{\"dist\":\"fixed\",\"ms\":0}}}}"

/* ---- helpers ------------------------------------------------------------------------------ */

static bool is_trace_id(const char *t)
{
    if (strlen(t) != 32)
        return false;
    for (const char *p = t; *p != '\0'; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return false;
    return true;
}

/* Every /v1 response: JSON type, a 32-lowercase-hex trace id, no-cache (docs/api.md §2). */
static void assert_common_headers(const fg_response *r)
{
    ck_assert_msg(strncmp(r->content_type, "application/json", 16) == 0 &&
                      (r->content_type[16] == '\0' || r->content_type[16] == ';'),
                  "Content-Type \"%s\"", r->content_type);
    ck_assert_msg(r->trace_id_count == 1 && is_trace_id(r->trace_id),
                  "x-tosspayments-trace-id \"%s\" (seen %d times)", r->trace_id, r->trace_id_count);
    ck_assert_str_eq(r->cache_control, NO_CACHE);
}

/* A confirmed Payment (docs/api.md §2.3) for this request. */
static void assert_done_payment(const json_t *p, const char *pk, const char *oid,
                                long long amount, const char *mid)
{
    ck_assert_msg(json_is_object(p), "payment is not an object");
    ck_assert_str_eq(json_str(p, "paymentKey"), pk);
    ck_assert_str_eq(json_str(p, "orderId"), oid);
    ck_assert_str_eq(json_str(p, "status"), "DONE");
    ck_assert_int_eq(json_int(p, "totalAmount"), amount);
    ck_assert_int_eq(json_int(p, "balanceAmount"), amount);
    ck_assert_int_eq(json_int(p, "vat"), llround((double)amount / 11.0));
    const char *approved = json_str(p, "approvedAt");
    ck_assert_msg(matches("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\+09:00$", approved),
                  "approvedAt \"%s\"", approved);
    ck_assert_str_eq(json_str(p, "method"), "카드");
    ck_assert_str_eq(json_str(p, "currency"), "KRW");
    ck_assert_msg(json_str(p, "lastTransactionKey")[0] != '\0', "empty lastTransactionKey");
    ck_assert_str_eq(json_str(p, "mId"), mid);
}

/* A confirm sent from its own thread. */
struct bg_confirm {
    const fg_server *s;
    const char *pk, *oid, *key;
    long long amount;
    fg_response r;
    pthread_t thread;
    atomic_bool done;
};

static void *bg_confirm_main(void *arg)
{
    struct bg_confirm *b = arg;
    fg_confirm(b->s, b->pk, b->oid, b->amount, b->key, &b->r);
    atomic_store(&b->done, true);
    return NULL;
}

static void bg_start(struct bg_confirm *b, const fg_server *s, const char *pk, const char *oid,
                     long long amount, const char *key)
{
    b->s = s;
    b->pk = pk;
    b->oid = oid;
    b->amount = amount;
    b->key = key;
    atomic_init(&b->done, false);
    ck_assert_int_eq(pthread_create(&b->thread, NULL, bg_confirm_main, b), 0);
}

static void bg_join(struct bg_confirm *b)
{
    ck_assert_int_eq(pthread_join(b->thread, NULL), 0);
}

/* Send n confirms at once, one thread each, and wait for all. */
static void burst(struct bg_confirm *b, size_t n, const fg_server *s, const char *pk,
                  const char *oid, long long amount, const char *key)
{
    for (size_t i = 0; i < n; i++)
        bg_start(&b[i], s, pk, oid, amount, key);
    for (size_t i = 0; i < n; i++)
        bg_join(&b[i]);
}

/* Start confirm #1 in the background and wait until its payment reads IN_PROGRESS. */
static void start_held_confirm(struct bg_confirm *first, const fg_server *s, const char *pk,
                               const char *oid, long long amount, const char *key)
{
    bg_start(first, s, pk, oid, amount, key);
    ck_assert_msg(wait_for_order_status(s, oid, "IN_PROGRESS", 3000, 2),
                  "%s never read IN_PROGRESS while its confirm was held", oid);
    ck_assert_msg(!atomic_load(&first->done), "confirm #1 finished before the test could act");
}

/* Replace {PK} {OID} {PK201} {OID65} in tmpl. Caller frees. */
static char *subst(const char *tmpl, const char *pk, const char *oid)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    ck_assert(f != NULL);
    for (const char *p = tmpl; *p != '\0';) {
        if (strncmp(p, "{PK}", 4) == 0) {
            fputs(pk, f);
            p += 4;
        } else if (strncmp(p, "{OID}", 5) == 0) {
            fputs(oid, f);
            p += 5;
        } else if (strncmp(p, "{PK201}", 7) == 0) {
            for (int i = 0; i < 201; i++)
                fputc('p', f);
            p += 7;
        } else if (strncmp(p, "{OID65}", 7) == 0) {
            for (int i = 0; i < 65; i++)
                fputc('o', f);
            p += 7;
        } else {
            fputc(*p++, f);
        }
    }
    fclose(f);
    return out;
}

/* True if `text` contains the decimal number n not as part of a longer number. */
static bool mentions_number(const char *text, int n)
{
    char num[16];
    snprintf(num, sizeof num, "%d", n);
    size_t nl = strlen(num);
    for (const char *p = strstr(text, num); p != NULL; p = strstr(p + 1, num)) {
        bool left = p == text || p[-1] < '0' || p[-1] > '9';
        bool right = p[nl] < '0' || p[nl] > '9';
        if (left && right)
            return true;
    }
    return false;
}

static bool is_ascii(const char *s)
{
    for (; *s != '\0'; s++)
        if ((unsigned char)*s >= 0x80)
            return false;
    return true;
}

static int post_confirm_raw_body(const fg_server *s, const char *body, const char *const *headers,
                                 fg_response *r)
{
    fg_request req = {.method = "POST", .path = CONFIRM_PATH, .body = body, .headers = headers};
    return fg_http(s, NULL, &req, r);
}

/* ---- confirm and reads ------------------------------------------------------------------ */

START_TEST(test_confirm_returns_done_payment_matching_request)
{
    fg_server *s = start_server(NULL);
    fg_response r;
    fg_confirm(s, "pk_basic_1", "order_basic_1", 15000, NULL, &r);
    assert_status(&r, 200);
    assert_common_headers(&r);
    assert_done_payment(r.json, "pk_basic_1", "order_basic_1", 15000, "tgen_fakegate");
    const char *ltk = json_str(r.json, "lastTransactionKey");

    /* The same payment through both reads, each with its own trace id. */
    fg_response by_key, by_order;
    fg_get(s, "/v1/payments/pk_basic_1", &by_key);
    get_order(s, "order_basic_1", &by_order);
    assert_status(&by_key, 200);
    assert_status(&by_order, 200);
    assert_common_headers(&by_key);
    assert_done_payment(by_key.json, "pk_basic_1", "order_basic_1", 15000, "tgen_fakegate");
    assert_done_payment(by_order.json, "pk_basic_1", "order_basic_1", 15000, "tgen_fakegate");
    ck_assert_str_eq(json_str(by_key.json, "lastTransactionKey"), ltk);
    ck_assert_str_ne(r.trace_id, by_key.trace_id);
    ck_assert_str_ne(by_key.trace_id, by_order.trace_id);
    fg_response_fini(&by_key);
    fg_response_fini(&by_order);
    fg_response_fini(&r);
    assert_charged_once(s, "pk_basic_1", "order_basic_1");
    stop_server(s);
}
END_TEST

START_TEST(test_error_responses_carry_json_type_trace_id_and_no_cache)
{
    fg_server *s = start_server(NULL);
    fg_response a, b, c;
    fg_get(s, "/v1/payments/pk_nobody", &a);
    assert_error(&a, 404, "NOT_FOUND_PAYMENT");
    assert_common_headers(&a);
    post_confirm_raw_body(s, "{\"paymentKey\":\"pk\",\"orderId\":\"order_1\",\"amount\":1}", NULL, &b);
    assert_error(&b, 401, "UNAUTHORIZED_KEY");
    assert_common_headers(&b);
    fg_confirm(s, "pk_h", "bad", 1000, NULL, &c);
    assert_error(&c, 400, "INVALID_ORDER_ID");
    assert_common_headers(&c);
    ck_assert_str_ne(a.trace_id, b.trace_id);
    ck_assert_str_ne(b.trace_id, c.trace_id);
    ck_assert_str_ne(a.trace_id, c.trace_id);
    fg_response_fini(&a);
    fg_response_fini(&b);
    fg_response_fini(&c);
    stop_server(s);
}
END_TEST

START_TEST(test_confirm_mid_flag_sets_mid)
{
    const char *args[] = {"--mid", "tgen_othermall", NULL};
    fg_server *s = start_args(NULL, args);
    fg_response r;
    fg_confirm(s, "pk_mid_1", "order_mid_1", 1100, NULL, &r);
    assert_status(&r, 200);
    assert_done_payment(r.json, "pk_mid_1", "order_mid_1", 1100, "tgen_othermall");
    fg_response_fini(&r);
    stop_server(s);
}
END_TEST

START_TEST(test_confirm_chunked_body_gets_200)
{
    fg_server *s = start_server(NULL);
    const char *body = "{\"paymentKey\": \"pk_chunked_1\",   \"orderId\": \"order_chunked_1\", "
                       "\"amount\": 23456, \"padding\": \"0123456789012345678901234567890123456789"
                       "01234567890123456789012345678901234567890123456789\"}";
    const char *headers[] = {s->auth_header, NULL};
    fg_request req = {.method = "POST", .path = CONFIRM_PATH, .body = body, .headers = headers,
                      .chunked = true};
    fg_response r;
    fg_http(s, NULL, &req, &r);
    assert_status(&r, 200);
    assert_done_payment(r.json, "pk_chunked_1", "order_chunked_1", 23456, "tgen_fakegate");
    fg_response_fini(&r);
    assert_charged_once(s, "pk_chunked_1", "order_chunked_1");
    stop_server(s);
}
END_TEST

START_TEST(test_confirm_ignores_unknown_fields)
{
    fg_server *s = start_server(NULL);
    const char *headers[] = {s->auth_header, NULL};
    fg_response r;
    post_confirm_raw_body(s, "{\"paymentKey\":\"pk_extra_1\",\"orderId\":\"order_extra_1\","
                             "\"amount\":5000,\"customerName\":\"x\",\"nested\":{\"a\":[1,2]}}",
                          headers, &r);
    assert_status(&r, 200);
    assert_done_payment(r.json, "pk_extra_1", "order_extra_1", 5000, "tgen_fakegate");
    fg_response_fini(&r);
    stop_server(s);
}
END_TEST

START_TEST(test_read_unknown_payment_gets_404_not_found_payment)
{
    fg_server *s = start_server(NULL);
    fg_response a, b;
    fg_get(s, "/v1/payments/pk_never_seen", &a);
    assert_error(&a, 404, "NOT_FOUND_PAYMENT");
    get_order(s, "order_never_seen", &b);
    assert_error(&b, 404, "NOT_FOUND_PAYMENT");
    fg_response_fini(&a);
    fg_response_fini(&b);
    stop_server(s);
}
END_TEST

START_TEST(test_health_reports_ok_and_the_child_pid)
{
    fg_server *s = start_server(NULL);
    const char *paths[] = {"/healthz", "/__admin/health"};
    for (size_t i = 0; i < 2; i++) {
        fg_request req = {.path = paths[i]};
        fg_response r;
        fg_http(s, NULL, &req, &r);
        assert_status(&r, 200);
        ck_assert_msg(strncmp(r.content_type, "application/json", 16) == 0, "%s: Content-Type %s",
                      paths[i], r.content_type);
        ck_assert_str_eq(json_str(r.json, "status"), "ok");
        ck_assert_msg(json_int(r.json, "pid") == (long long)s->pid, "%s: pid %lld, started %d",
                      paths[i], json_int(r.json, "pid"), (int)s->pid);
        fg_response_fini(&r);
    }
    stop_server(s);
}
END_TEST

/* ---- idempotency under a held confirm ----------------------------------------------------- */

START_TEST(test_confirm_same_key_in_flight_gets_409_then_replay)
{
    fg_server *s = start_with_profile(PROFILE_CONFIRM_1000MS);
    const char *pk = "pk_inflight_1", *oid = "order_inflight_1", *key = "key-inflight-1";
    struct bg_confirm first;
    start_held_confirm(&first, s, pk, oid, 12000, key);

    /* The read during the latency shows the payment, not yet approved. */
    fg_response during;
    get_order(s, oid, &during);
    assert_status(&during, 200);
    ck_assert_str_eq(json_str(during.json, "status"), "IN_PROGRESS");
    ck_assert_str_eq(json_str(during.json, "paymentKey"), pk);
    fg_response_fini(&during);

    static struct bg_confirm again[15];
    burst(again, 15, s, pk, oid, 12000, key);
    bg_join(&first);
    for (size_t i = 0; i < 15; i++) {
        assert_error(&again[i].r, 409, "IDEMPOTENT_REQUEST_PROCESSING");
        ck_assert_msg(again[i].r.done_ns < first.r.done_ns, "409 #%zu came after #1 finished", i);
        ck_assert_msg(again[i].r.done_ns - again[i].r.sent_ns < 500 * 1000000LL,
                      "409 #%zu took %lld ms (no processing latency expected)", i,
                      (long long)((again[i].r.done_ns - again[i].r.sent_ns) / 1000000));
        fg_response_fini(&again[i].r);
    }

    assert_status(&first.r, 200);
    assert_done_payment(first.r.json, pk, oid, 12000, "tgen_fakegate");
    ck_assert_msg(first.r.done_ns - first.r.sent_ns >= 990 * 1000000LL, "held only %lld ms",
                  (long long)((first.r.done_ns - first.r.sent_ns) / 1000000));

    fg_response replay;
    fg_confirm(s, pk, oid, 12000, key, &replay);
    assert_status(&replay, 200);
    ck_assert_msg(same_bytes(&replay, &first.r), "replay differs:\n%s\n---\n%s", replay.body,
                  first.r.body);
    ck_assert_msg(is_trace_id(replay.trace_id), "trace id %s", replay.trace_id);
    ck_assert_str_ne(replay.trace_id, first.r.trace_id);

    fg_response after;
    get_order(s, oid, &after);
    assert_status(&after, 200);
    ck_assert_str_eq(json_str(after.json, "status"), "DONE");
    ck_assert_str_eq(json_str(after.json, "lastTransactionKey"),
                     json_str(first.r.json, "lastTransactionKey"));
    assert_charged_once(s, pk, oid);
    fg_response_fini(&after);
    fg_response_fini(&replay);
    fg_response_fini(&first.r);
    stop_server(s);
}
END_TEST

START_TEST(test_confirm_without_key_in_flight_gets_already_processing_then_processed)
{
    fg_server *s = start_with_profile(PROFILE_CONFIRM_1000MS);
    const char *pk = "pk_nokey_1", *oid = "order_nokey_1";
    struct bg_confirm first;
    start_held_confirm(&first, s, pk, oid, 7000, NULL);

    static struct bg_confirm again[15];
    burst(again, 15, s, pk, oid, 7000, NULL);
    bg_join(&first);
    for (size_t i = 0; i < 15; i++) {
        assert_error(&again[i].r, 400, "ALREADY_PROCESSING_REQUEST");
        ck_assert_msg(again[i].r.done_ns < first.r.done_ns, "#%zu came after #1 finished", i);
        fg_response_fini(&again[i].r);
    }
    assert_status(&first.r, 200);
    assert_done_payment(first.r.json, pk, oid, 7000, "tgen_fakegate");

    fg_response after;
    fg_confirm(s, pk, oid, 7000, NULL, &after);
    assert_error(&after, 400, "ALREADY_PROCESSED_PAYMENT");
    ck_assert(wait_for_order_status(s, oid, "DONE", 0, 2));
    assert_charged_once(s, pk, oid);
    fg_response_fini(&after);
    fg_response_fini(&first.r);
    stop_server(s);
}
END_TEST

START_TEST(test_confirm_other_key_in_flight_gets_already_processing_then_processed)
{
    fg_server *s = start_with_profile(PROFILE_CONFIRM_1000MS);
    const char *pk = "pk_otherkey_1", *oid = "order_otherkey_1";
    struct bg_confirm first;
    start_held_confirm(&first, s, pk, oid, 3300, "key-a");

    fg_response during;
    fg_confirm(s, pk, oid, 3300, "key-b", &during);
    assert_error(&during, 400, "ALREADY_PROCESSING_REQUEST");
    ck_assert(!atomic_load(&first.done));
    bg_join(&first);
    assert_status(&first.r, 200);

    /* key-b was not stored while in flight (transient); now it gets the business outcome, which
     * is stored and replayed byte for byte. */
    fg_response after, after_again, replay_a;
    fg_confirm(s, pk, oid, 3300, "key-b", &after);
    assert_error(&after, 400, "ALREADY_PROCESSED_PAYMENT");
    fg_confirm(s, pk, oid, 3300, "key-b", &after_again);
    assert_error(&after_again, 400, "ALREADY_PROCESSED_PAYMENT");
    ck_assert_msg(same_bytes(&after, &after_again), "stored 400 not replayed byte for byte");
    fg_confirm(s, pk, oid, 3300, "key-a", &replay_a);
    assert_status(&replay_a, 200);
    ck_assert(same_bytes(&replay_a, &first.r));
    assert_charged_once(s, pk, oid);
    fg_response_fini(&during);
    fg_response_fini(&after);
    fg_response_fini(&after_again);
    fg_response_fini(&replay_a);
    fg_response_fini(&first.r);
    stop_server(s);
}
END_TEST

START_TEST(test_confirm_same_key_leaving_queue_after_commit_gets_replay)
{
    fg_server *s = start_with_profile(
        "{\"name\":\"queued\",\"routes\":{\"confirm\":{\"queue_latency\":{\"dist\":\"fixed\","
        "\"ms\":500}},\"default\":{\"latency\":{\"dist\":\"fixed\",\"ms\":0}}}}");
    const char *pk = "pk_queued_1", *oid = "order_queued_1", *key = "key-queued-1";
    const int64_t queue_ns = 500 * 1000000LL;
    struct bg_confirm first;
    /* Lenient sessions: the payment reads IN_PROGRESS while its confirm waits in the queue. */
    start_held_confirm(&first, s, pk, oid, 4400, key);

    static struct bg_confirm wave1[6], wave2[3];
    for (size_t i = 0; i < 6; i++)
        bg_start(&wave1[i], s, pk, oid, 4400, key);
    bg_join(&first);
    assert_status(&first.r, 200);
    assert_done_payment(first.r.json, pk, oid, 4400, "tgen_fakegate");
    ck_assert_msg(first.r.done_ns - first.r.sent_ns >= queue_ns - 10000000LL, "queued only %lld ms",
                  (long long)((first.r.done_ns - first.r.sent_ns) / 1000000));
    /* Sent after #1 committed: they certainly leave the queue after it. */
    burst(wave2, 3, s, pk, oid, 4400, key);
    for (size_t i = 0; i < 6; i++) {
        bg_join(&wave1[i]);
        fg_response *r = &wave1[i].r;
        ck_assert_msg(r->done_ns - r->sent_ns >= queue_ns - 10000000LL,
                      "wave1 #%zu skipped its own queue (%lld ms)", i,
                      (long long)((r->done_ns - r->sent_ns) / 1000000));
        if (r->sent_ns + queue_ns > first.r.done_ns) {
            /* It left the queue after #1's answer was out, so after #1 committed. */
            assert_status(r, 200);
            ck_assert_msg(same_bytes(r, &first.r), "wave1 #%zu is not #1's replay: %s", i, r->body);
        } else if (r->status == 200) {
            ck_assert_msg(same_bytes(r, &first.r), "wave1 #%zu is not #1's replay: %s", i, r->body);
        } else {
            assert_error(r, 409, "IDEMPOTENT_REQUEST_PROCESSING");
        }
        fg_response_fini(r);
    }
    for (size_t i = 0; i < 3; i++) {
        assert_status(&wave2[i].r, 200);
        ck_assert_msg(same_bytes(&wave2[i].r, &first.r), "wave2 #%zu is not #1's replay", i);
        ck_assert_str_ne(wave2[i].r.trace_id, first.r.trace_id);
        fg_response_fini(&wave2[i].r);
    }
    assert_charged_once(s, pk, oid);
    fg_response_fini(&first.r);
    stop_server(s);
}
END_TEST

/* ---- bad requests ------------------------------------------------------------------------- */

enum idem_kind { IDEM_NORMAL = 0, IDEM_EMPTY, IDEM_301, IDEM_TWO };

struct bad_case {
    const char *what;
    const char *auth;      /* NULL: the default key; "": no Authorization; else a header line */
    const char *body;      /* template ({PK} {OID} {PK201} {OID65}); NULL: the good body */
    enum idem_kind idem;   /* IDEM_NORMAL sends "Idempotency-Key: fix-<i>" */
    long status;
    const char *code;
    const char *alt_code;  /* also acceptable where the docs leave the choice, else NULL */
    const char *mentions;  /* the message must contain this, or NULL */
    enum {
        NOWHERE,           /* the message names no place */
        AT_PARSE_ERROR,    /* it names jansson's column for this body (which must not parse) */
        AT_VALUE,          /* it names the column where the value of member `mentions` starts */
    } where;
};

#define GOOD_BODY "{\"paymentKey\":\"{PK}\",\"orderId\":\"{OID}\",\"amount\":1000}"
#define AMOUNT_BODY(v) "{\"paymentKey\":\"{PK}\",\"orderId\":\"{OID}\",\"amount\":" v "}"

static const struct bad_case bad_cases[] = {
    {"no Authorization", "", NULL, IDEM_NORMAL, 401, "UNAUTHORIZED_KEY", NULL, NULL, NOWHERE},
    {"Basic without colon", "Authorization: Basic dGVzdF9za194", NULL, IDEM_NORMAL, 400,
     "INCORRECT_BASIC_AUTH_FORMAT", NULL, NULL, NOWHERE},
    {"Bearer", "Authorization: Bearer x", NULL, IDEM_NORMAL, 400, "INCORRECT_BASIC_AUTH_FORMAT",
     NULL, NULL, NOWHERE},
    {"bad base64", "Authorization: Basic !!!!", NULL, IDEM_NORMAL, 400,
     "INCORRECT_BASIC_AUTH_FORMAT", NULL, NULL, NOWHERE},
    {"key not test_sk_/test_gsk_", "Authorization: Basic bGl2ZV9za19hYmM6", NULL, IDEM_NORMAL, 401,
     "UNAUTHORIZED_KEY", NULL, NULL, NOWHERE},
    {"malformed JSON", NULL, "{\"paymentKey\": \"{PK}\", \"orderId\" \"{OID}\", \"amount\": 1000}",
     IDEM_NORMAL, 400, "INVALID_REQUEST", NULL, NULL, AT_PARSE_ERROR},
    {"NUL in a string", NULL, "{\"paymentKey\":\"{PK}\\u0000\",\"orderId\":\"{OID}\",\"amount\":1}",
     IDEM_NORMAL, 400, "INVALID_REQUEST", NULL, "(NUL)", AT_PARSE_ERROR},
    {"duplicate keys", NULL,
     "{\"paymentKey\":\"{PK}\",\"orderId\":\"{OID}\",\"amount\":1000,\"amount\":1000}", IDEM_NORMAL,
     400, "INVALID_REQUEST", NULL, NULL, NOWHERE},
    {"empty body", NULL, "", IDEM_NORMAL, 400, "INVALID_REQUEST", NULL, NULL, NOWHERE},
    {"body not an object", NULL, "[]", IDEM_NORMAL, 400, "INVALID_REQUEST", NULL, NULL, NOWHERE},
    {"amount as string", NULL, AMOUNT_BODY("\"1000\""), IDEM_NORMAL, 400, "INVALID_REQUEST", NULL,
     "amount", AT_VALUE},
    {"amount 10.5", NULL, AMOUNT_BODY("10.5"), IDEM_NORMAL, 400, "INVALID_REQUEST", NULL, "amount",
     AT_VALUE},
    {"amount 0", NULL, AMOUNT_BODY("0"), IDEM_NORMAL, 400, "INVALID_REQUEST", NULL, "amount",
     AT_VALUE},
    {"amount -5", NULL, AMOUNT_BODY("-5"), IDEM_NORMAL, 400, "INVALID_REQUEST", NULL, "amount",
     AT_VALUE},
    {"amount beyond 64 bits", NULL, AMOUNT_BODY("99999999999999999999"), IDEM_NORMAL, 400,
     "INVALID_REQUEST", NULL, "amount", AT_PARSE_ERROR},
    {"amount 2^53", NULL, AMOUNT_BODY("9007199254740992"), IDEM_NORMAL, 400, "INVALID_REQUEST",
     NULL, "amount", AT_VALUE},
    {"amount 1e3", NULL, AMOUNT_BODY("1e3"), IDEM_NORMAL, 400, "INVALID_REQUEST", NULL, "amount",
     AT_VALUE},
    {"amount 15000.0", NULL, AMOUNT_BODY("15000.0"), IDEM_NORMAL, 400, "INVALID_REQUEST", NULL,
     "amount", AT_VALUE},
    {"amount -0", NULL, AMOUNT_BODY("-0"), IDEM_NORMAL, 400, "INVALID_REQUEST", NULL, "amount",
     AT_VALUE},
    {"amount 99", NULL, AMOUNT_BODY("99"), IDEM_NORMAL, 400, "BELOW_MINIMUM_AMOUNT", NULL, NULL,
     NOWHERE},
    {"amount 1", NULL, AMOUNT_BODY("1"), IDEM_NORMAL, 400, "BELOW_MINIMUM_AMOUNT", NULL, NULL,
     NOWHERE},
    {"amount missing", NULL, "{\"paymentKey\":\"{PK}\",\"orderId\":\"{OID}\"}", IDEM_NORMAL, 400,
     "INVALID_REQUEST", NULL, "amount", NOWHERE},
    {"orderId of 5", NULL, "{\"paymentKey\":\"{PK}\",\"orderId\":\"abcde\",\"amount\":1000}",
     IDEM_NORMAL, 400, "INVALID_ORDER_ID", NULL, "orderId", AT_VALUE},
    {"orderId of 65", NULL, "{\"paymentKey\":\"{PK}\",\"orderId\":\"{OID65}\",\"amount\":1000}",
     IDEM_NORMAL, 400, "INVALID_ORDER_ID", NULL, "orderId", AT_VALUE},
    {"orderId with /", NULL, "{\"paymentKey\":\"{PK}\",\"orderId\":\"order/1\",\"amount\":1000}",
     IDEM_NORMAL, 400, "INVALID_ORDER_ID", NULL, "orderId", AT_VALUE},
    {"orderId with space", NULL,
     "{\"paymentKey\":\"{PK}\",\"orderId\":\"order 12\",\"amount\":1000}", IDEM_NORMAL, 400,
     "INVALID_ORDER_ID", NULL, "orderId", AT_VALUE},
    {"orderId missing", NULL, "{\"paymentKey\":\"{PK}\",\"amount\":1000}", IDEM_NORMAL, 400,
     "INVALID_ORDER_ID", "INVALID_REQUEST", "orderId", NOWHERE},
    {"paymentKey empty", NULL, "{\"paymentKey\":\"\",\"orderId\":\"{OID}\",\"amount\":1000}",
     IDEM_NORMAL, 400, "INVALID_PAYMENT_KEY", NULL, "paymentKey", AT_VALUE},
    {"paymentKey of 201", NULL, "{\"paymentKey\":\"{PK201}\",\"orderId\":\"{OID}\",\"amount\":1000}",
     IDEM_NORMAL, 400, "INVALID_PAYMENT_KEY", NULL, "paymentKey", AT_VALUE},
    {"paymentKey missing", NULL, "{\"orderId\":\"{OID}\",\"amount\":1000}", IDEM_NORMAL, 400,
     "INVALID_PAYMENT_KEY", "INVALID_REQUEST", "paymentKey", NOWHERE},
    {"paymentKey a number", NULL, "{\"paymentKey\":12345,\"orderId\":\"{OID}\",\"amount\":1000}",
     IDEM_NORMAL, 400, "INVALID_REQUEST", NULL, "paymentKey", AT_VALUE},
    {"empty Idempotency-Key", NULL, NULL, IDEM_EMPTY, 400, "INVALID_IDEMPOTENCY_KEY", NULL, NULL,
     NOWHERE},
    {"Idempotency-Key of 301", NULL, NULL, IDEM_301, 400, "INVALID_IDEMPOTENCY_KEY", NULL, NULL,
     NOWHERE},
    {"two Idempotency-Key headers", NULL, NULL, IDEM_TWO, 400, "INVALID_IDEMPOTENCY_KEY", NULL,
     NULL, NOWHERE},
};

/* The column where the value of `"name":` starts in a one-line ASCII body (byte offset + 1),
 * or -1. Not inlined: GCC 12 then takes `body` (from open_memstream in subst) for a pointer
 * to subst's local and warns (-Wdangling-pointer), wrongly. */
__attribute__((noinline)) static int value_column(const char *body, const char *name)
{
    char member[48];
    snprintf(member, sizeof member, "\"%s\":", name);
    const char *at = strstr(body, member);
    return at ? (int)(at - body) + (int)strlen(member) + 1 : -1;
}

START_TEST(test_bad_confirms_get_their_error_and_leave_no_trace)
{
    fg_server *s = start_server(NULL);
    size_t committed = 0;
    char long_key[301 + 32];
    memcpy(long_key, "Idempotency-Key: ", 17);
    memset(long_key + 17, 'k', 301);
    long_key[17 + 301] = '\0';

    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        const struct bad_case *c = &bad_cases[i];
        char pk[32], oid[32], key[32], key_line[64];
        snprintf(pk, sizeof pk, "pk_fix_%02zu", i);
        snprintf(oid, sizeof oid, "order_fix_%02zu", i);
        snprintf(key, sizeof key, "fix-%02zu", i);
        snprintf(key_line, sizeof key_line, "Idempotency-Key: %s", key);
        char *body = subst(c->body != NULL ? c->body : GOOD_BODY, pk, oid);

        const char *headers[4];
        size_t nh = 0;
        if (c->auth == NULL)
            headers[nh++] = s->auth_header;
        else if (c->auth[0] != '\0')
            headers[nh++] = c->auth;
        switch (c->idem) {
        case IDEM_NORMAL: headers[nh++] = key_line; break;
        case IDEM_EMPTY: headers[nh++] = "Idempotency-Key;"; break;
        case IDEM_301: headers[nh++] = long_key; break;
        case IDEM_TWO:
            headers[nh++] = key_line;
            headers[nh++] = "Idempotency-Key: fix-other";
            break;
        }
        headers[nh] = NULL;

        fg_response r;
        post_confirm_raw_body(s, body, headers, &r);
        ck_assert_msg(r.curl_code == CURLE_OK, "[%s] no response: %s", c->what, r.curl_error);
        const char *got = fg_error_code(&r);
        bool code_ok = got != NULL && (strcmp(got, c->code) == 0 ||
                                       (c->alt_code != NULL && strcmp(got, c->alt_code) == 0));
        ck_assert_msg(r.status == c->status && code_ok, "[%s] want %ld %s, got %ld %.400s", c->what,
                      c->status, c->code, r.status, r.body);
        const char *msg = fg_json_str(r.json, "message");
        ck_assert_msg(msg != NULL && msg[0] != '\0', "[%s] no message: %.400s", c->what, r.body);
        if (c->mentions != NULL)
            ck_assert_msg(strstr(msg, c->mentions) != NULL, "[%s] message does not name %s: %s",
                          c->what, c->mentions, msg);
        if (c->where == AT_PARSE_ERROR) {
            json_error_t je;
            json_t *j = json_loads(body, 0, &je);
            ck_assert_msg(j == NULL, "[%s] test body parses", c->what);
            ck_assert_msg(mentions_number(msg, je.column),
                          "[%s] message does not name column %d (jansson: %s): %s", c->what,
                          je.column, je.text, msg);
        } else if (c->where == AT_VALUE) {
            int col = value_column(body, c->mentions);
            ck_assert_msg(col > 0, "[%s] no \"%s\": in the test body", c->what, c->mentions);
            char want[48];
            snprintf(want, sizeof want, "(line 1, column %d)", col);
            ck_assert_msg(strstr(msg, want) != NULL, "[%s] message does not say %s: %s", c->what,
                          want, msg);
        }
        fg_response_fini(&r);
        free(body);

        /* No ledger change. */
        json_t *all = fg_admin_payments(s, NULL);
        ck_assert_msg(all != NULL, "[%s] GET /__admin/payments failed", c->what);
        ck_assert_msg(json_array_size(all) == committed, "[%s] ledger has %zu payments, want %zu",
                      c->what, json_array_size(all), committed);
        size_t idx;
        json_t *e;
        json_array_foreach(all, idx, e) {
            const json_t *p = json_object_get(e, "payment");
            const char *epk = fg_json_str(p, "paymentKey");
            ck_assert_msg(epk == NULL || strcmp(epk, pk) != 0, "[%s] left a payment", c->what);
        }
        json_decref(all);

        /* No idempotency record: the corrected request under the same key runs normally. */
        long long amount = 1000 + (long long)i;
        fg_response ok;
        fg_confirm(s, pk, oid, amount, key, &ok);
        ck_assert_msg(ok.status == 200, "[%s] corrected request under %s: got %ld %.400s", c->what,
                      key, ok.status, ok.body);
        assert_done_payment(ok.json, pk, oid, amount, "tgen_fakegate");
        fg_response_fini(&ok);
        committed++;
        ck_assert_uint_eq(ledger_size(s), committed);
    }
    stop_server(s);
}
END_TEST

/* docs/api.md §2: a wrong value's message says where it is, on the line it is on, counting
 * characters as jansson does for a parse error (a Korean syllable, three bytes, is one column); a
 * member of the same name inside a nested object is not the one meant. */
START_TEST(test_wrong_value_message_names_its_line_and_column_in_characters)
{
    fg_server *s = start_server(NULL);
    static const struct {
        const char *body, *want_code, *want_at;
    } cases[] = {
        {"{\n  \"paymentKey\": \"pk_where_1\",\n  \"orderId\": \"order_where_1\",\n"
         "  \"amount\": \"1000\"\n}",
         "INVALID_REQUEST", "(line 4, column 13)"},
        {"{\"memo\":{\"amount\":1},\"orderName\":\"결제 테스트\",\"paymentKey\":\"pk_where_2\","
         "\"orderId\":\"order_where_2\",\"amount\":-0}",
         "INVALID_REQUEST", "(line 1, column 104)"},
        {"{\"orderName\":\"결제\", \"paymentKey\" : \"키\", \"orderId\":\"order_where_3\","
         "\"amount\":1}",
         "INVALID_PAYMENT_KEY", "(line 1, column 35)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *headers[] = {s->auth_header, NULL};
        fg_response r;
        post_confirm_raw_body(s, cases[i].body, headers, &r);
        assert_status(&r, 400);
        ck_assert_str_eq(fg_error_code(&r), cases[i].want_code);
        const char *msg = fg_json_str(r.json, "message");
        ck_assert_msg(msg != NULL && strstr(msg, cases[i].want_at) != NULL,
                      "case %zu: want %s in %s", i, cases[i].want_at, r.body);
        fg_response_fini(&r);
    }
    ck_assert_uint_eq(ledger_size(s), 0);
    stop_server(s);
}
END_TEST

START_TEST(test_idempotency_key_of_300_chars_is_accepted)
{
    fg_server *s = start_server(NULL);
    char key[301];
    memset(key, 'k', 300);
    key[300] = '\0';
    fg_response a, b;
    fg_confirm(s, "pk_key300", "order_key300", 3000, key, &a);
    assert_status(&a, 200);
    fg_confirm(s, "pk_key300", "order_key300", 3000, key, &b);
    assert_status(&b, 200);
    ck_assert(same_bytes(&a, &b));
    fg_response_fini(&a);
    fg_response_fini(&b);
    stop_server(s);
}
END_TEST

START_TEST(test_wrong_secret_key_gets_401_unauthorized_key)
{
    fg_opts o = {.secret_key = "test_sk_right"};
    fg_server *s = start_server(&o);
    char wrong[128];
    fg_basic_auth("test_sk_wrong:", wrong, sizeof wrong);
    const char *headers[] = {wrong, "Idempotency-Key: wrong-1", NULL};
    fg_response r;
    post_confirm_raw_body(s, "{\"paymentKey\":\"pk_wrong_1\",\"orderId\":\"order_wrong_1\","
                             "\"amount\":2000}", headers, &r);
    assert_error(&r, 401, "UNAUTHORIZED_KEY");
    fg_response_fini(&r);
    ck_assert_uint_eq(ledger_size(s), 0);

    /* The configured key works, under the same Idempotency-Key. */
    fg_response ok;
    fg_confirm(s, "pk_wrong_1", "order_wrong_1", 2000, "wrong-1", &ok);
    assert_status(&ok, 200);
    assert_done_payment(ok.json, "pk_wrong_1", "order_wrong_1", 2000, "tgen_fakegate");
    fg_response_fini(&ok);
    stop_server(s);
}
END_TEST

/* FAKEGATE_SECRET_KEY is a comma-separated list; spaces around a key are not part of it (a list
 * is written "a, b" in YAML and compose files). A value with no key in it is an error, not a
 * silent "any test_sk_ key"; so is an empty --mid. */
START_TEST(test_secret_key_list_trims_spaces_and_empty_values_exit_2)
{
    ck_assert_int_eq(setenv("FAKEGATE_SECRET_KEY", "live_sk_abc, test_sk_only ,", 1), 0);
    fg_server *s = start_server(NULL);
    ck_assert_int_eq(unsetenv("FAKEGATE_SECRET_KEY"), 0);
    static const struct {
        const char *cred;
        long status;
    } cases[] = {{"live_sk_abc:", 200}, {"test_sk_only:", 200}, {"test_sk_other:", 401}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char auth[128], body[160];
        fg_basic_auth(cases[i].cred, auth, sizeof auth);
        const char *headers[] = {auth, NULL};
        snprintf(body, sizeof body,
                 "{\"paymentKey\":\"pk_list_%zu\",\"orderId\":\"order_list_%zu\",\"amount\":100}",
                 i, i);
        fg_response r;
        post_confirm_raw_body(s, body, headers, &r);
        ck_assert_msg(r.status == cases[i].status, "%s: want %ld, got %ld %.200s", cases[i].cred,
                      cases[i].status, r.status, r.body);
        fg_response_fini(&r);
    }
    stop_server(s);

    static const char *const bad[][2] = {{"--secret-key", " , "}, {"--secret-key", ""},
                                         {"--mid", ""}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *args[] = {"--port", "0", "--quiet", bad[i][0], bad[i][1], NULL};
        fg_run_result rr;
        char err[FG_ERR_LEN];
        ck_assert_msg(fg_run(args, 5000, &rr, err) == 0, "%s", err);
        ck_assert_msg(rr.exit_status == 2 && strstr(rr.err, bad[i][0]) != NULL,
                      "%s '%s': exit %d (want 2, naming the flag); stderr: %s", bad[i][0],
                      bad[i][1], rr.exit_status, rr.err);
        fg_run_result_fini(&rr);
    }
}
END_TEST

START_TEST(test_test_gsk_key_is_accepted_without_secret_key_flag)
{
    fg_server *s = start_server(NULL);
    char gsk[128];
    fg_basic_auth("test_gsk_group1:", gsk, sizeof gsk);
    const char *headers[] = {gsk, NULL};
    fg_response r;
    post_confirm_raw_body(s, "{\"paymentKey\":\"pk_gsk_1\",\"orderId\":\"order_gsk_1\","
                             "\"amount\":2500}", headers, &r);
    assert_status(&r, 200);
    assert_done_payment(r.json, "pk_gsk_1", "order_gsk_1", 2500, "tgen_fakegate");
    fg_response_fini(&r);
    stop_server(s);
}
END_TEST

/* HTTP's scheme names are case-insensitive and optional whitespace around a field value is not
 * part of it (RFC 9110 §11.1, §5.5; docs/api.md §2): each spelling below is the default key. What
 * is not Basic credentials stays 400. */
START_TEST(test_basic_scheme_in_any_case_and_spaces_around_credentials_are_accepted)
{
    fg_server *s = start_server(NULL);
    char b64[128];
    fg_base64("test_sk_case:", strlen("test_sk_case:"), b64, sizeof b64);
    static const struct {
        const char *before, *after; /* the Authorization line is before + credentials + after; */
        long status;                /* after NULL: no credentials */
    } cases[] = {
        {"Authorization: basic ", "", 200},    {"Authorization: BASIC ", "", 200},
        {"Authorization: bAsIc ", "", 200},    {"Authorization: Basic    ", "", 200},
        {"Authorization: Basic ", " ", 200},   {"Authorization: BASIC   ", "   ", 200},
        {"Authorization: Basic ", "\t", 200},  {"Authorization: Basic\t", "", 200},
        {"Authorization: Basic", "", 400},     {"Authorization: Basic ", " x", 400},
        {"Authorization: Basics ", "", 400},   {"Authorization: Basic", NULL, 400},
    };
    size_t ok = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char auth[256], body[160];
        snprintf(auth, sizeof auth, "%s%s%s", cases[i].before, cases[i].after ? b64 : "",
                 cases[i].after ? cases[i].after : "");
        snprintf(body, sizeof body,
                 "{\"paymentKey\":\"pk_case_%zu\",\"orderId\":\"order_case_%zu\",\"amount\":1000}",
                 i, i);
        const char *headers[] = {auth, NULL};
        fg_response r;
        post_confirm_raw_body(s, body, headers, &r);
        ck_assert_msg(r.status == cases[i].status, "'%s': want %ld, got %ld %.200s", auth,
                      cases[i].status, r.status, r.body);
        if (cases[i].status == 400)
            assert_error(&r, 400, "INCORRECT_BASIC_AUTH_FORMAT");
        else
            ok++;
        fg_response_fini(&r);
    }
    ck_assert_uint_eq(ledger_size(s), ok);
    stop_server(s);
}
END_TEST

/* Toss's card minimum (docs/api.md §2.1): 99 won is refused with Toss's message, in either
 * language, before anything runs; 100 won is approved. */
START_TEST(test_confirm_below_100_won_gets_below_minimum_amount_with_toss_message)
{
    fg_server *s = start_server(NULL);
    fg_response r;
    fg_confirm(s, "pk_min_1", "order_min_1", 99, "min-1", &r);
    assert_error(&r, 400, "BELOW_MINIMUM_AMOUNT");
    ck_assert_str_eq(fg_json_str(r.json, "message"),
                     "신용카드는 결제금액이 100원 이상, 계좌는 200원이상부터 결제가 가능합니다.");
    fg_response_fini(&r);

    const char *en[] = {s->auth_header, "Accept-Language: en-US", NULL};
    post_confirm_raw_body(s, "{\"paymentKey\":\"pk_min_1\",\"orderId\":\"order_min_1\","
                             "\"amount\":50}", en, &r);
    assert_error(&r, 400, "BELOW_MINIMUM_AMOUNT");
    ck_assert_str_eq(fg_json_str(r.json, "message"),
                     "Card payments require at least 100 KRW, account payments at least 200 KRW.");
    fg_response_fini(&r);
    fg_response gone;
    get_order(s, "order_min_1", &gone);
    assert_error(&gone, 404, "NOT_FOUND_PAYMENT");
    fg_response_fini(&gone);

    fg_confirm(s, "pk_min_1", "order_min_1", 100, "min-1", &r);
    assert_status(&r, 200);
    assert_done_payment(r.json, "pk_min_1", "order_min_1", 100, "tgen_fakegate");
    fg_response_fini(&r);
    assert_charged_once(s, "pk_min_1", "order_min_1");
    stop_server(s);
}
END_TEST

static const char *const max_body_args[] = {"--max-body", "1024", NULL};

START_TEST(test_body_over_max_body_gets_413)
{
    fg_server *s = start_args(NULL, max_body_args);
    char *body = padded_body("pk_big_1", "order_big_1", 2000);
    const char *headers[] = {s->auth_header, "Idempotency-Key: big-1", NULL};
    fg_response r;
    post_confirm_raw_body(s, body, headers, &r);
    assert_error(&r, 413, "INVALID_REQUEST");
    fg_response_fini(&r);
    free(body);
    ck_assert_uint_eq(ledger_size(s), 0);

    fg_response ok;
    fg_confirm(s, "pk_big_1", "order_big_1", 1500, "big-1", &ok);
    assert_status(&ok, 200);
    assert_done_payment(ok.json, "pk_big_1", "order_big_1", 1500, "tgen_fakegate");
    fg_response_fini(&ok);
    stop_server(s);
}
END_TEST

START_TEST(test_body_over_max_body_with_expect_gets_413_before_body)
{
    fg_server *s = start_args(NULL, max_body_args);

    /* curl sends the headers and waits up to 10 s for 100 Continue before sending the body. */
    char *body = padded_body("pk_big_2", "order_big_2", 2000);
    const char *headers[] = {s->auth_header, "Expect: 100-continue", NULL};
    fg_request req = {.method = "POST", .path = CONFIRM_PATH, .body = body, .headers = headers,
                      .expect_100_timeout_ms = 10000, .timeout_ms = 8000};
    fg_response r;
    fg_http(s, NULL, &req, &r);
    assert_error(&r, 413, "INVALID_REQUEST");
    ck_assert_msg(r.done_ns - r.sent_ns < 5000 * 1000000LL, "413 took %lld ms",
                  (long long)((r.done_ns - r.sent_ns) / 1000000));
    fg_response_fini(&r);
    free(body);

    /* The same on a raw socket that never sends the body at all. */
    char raw[1024];
    int n = snprintf(raw, sizeof raw,
                     "POST " CONFIRM_PATH " HTTP/1.1\r\nHost: 127.0.0.1\r\n%s\r\n"
                     "Content-Type: application/json\r\nContent-Length: 2000\r\n"
                     "Expect: 100-continue\r\n\r\n", s->auth_header);
    ck_assert(n > 0 && (size_t)n < sizeof raw);
    fg_raw_response rr;
    char err[FG_ERR_LEN];
    ck_assert_msg(fg_raw(s, raw, (size_t)n, 5000, &rr, err) == 0, "%s", err);
    ck_assert_msg(rr.status == 413, "raw: got %d: %s", rr.status, rr.data);
    ck_assert_str_eq(fg_json_str(rr.json, "code"), "INVALID_REQUEST");
    char conn[64] = "";
    fg_raw_header(&rr, "Connection", conn, sizeof conn);
    ck_assert_msg(rr.closed, "connection left open after the 413");
    ck_assert_msg(strcasecmp(conn, "close") == 0, "Connection: \"%s\"", conn);
    fg_raw_response_fini(&rr);
    ck_assert_uint_eq(ledger_size(s), 0);
    stop_server(s);
}
END_TEST

START_TEST(test_transfer_encoding_with_content_length_gets_400_and_close)
{
    fg_server *s = start_server(NULL);
    const char *json = "{\"paymentKey\":\"pk_tecl_1\",\"orderId\":\"order_tecl_1\",\"amount\":1000}";
    char raw[1024];
    int n = snprintf(raw, sizeof raw,
                     "POST " CONFIRM_PATH " HTTP/1.1\r\nHost: 127.0.0.1\r\n%s\r\n"
                     "Content-Type: application/json\r\nIdempotency-Key: tecl-1\r\n"
                     "Content-Length: %zu\r\nTransfer-Encoding: chunked\r\n\r\n%zx\r\n%s\r\n0\r\n\r\n",
                     s->auth_header, strlen(json), strlen(json), json);
    ck_assert(n > 0 && (size_t)n < sizeof raw);
    fg_raw_response rr;
    char err[FG_ERR_LEN];
    ck_assert_msg(fg_raw(s, raw, (size_t)n, 5000, &rr, err) == 0, "%s", err);
    ck_assert_msg(rr.status == 400, "got %d: %s", rr.status, rr.data);
    char conn[64] = "";
    fg_raw_header(&rr, "Connection", conn, sizeof conn);
    ck_assert_msg(strcasecmp(conn, "close") == 0, "Connection: \"%s\" in %s", conn, rr.data);
    ck_assert_msg(rr.closed, "connection left open");
    fg_raw_response_fini(&rr);
    ck_assert_uint_eq(ledger_size(s), 0);

    fg_response ok;
    fg_confirm(s, "pk_tecl_1", "order_tecl_1", 1000, "tecl-1", &ok);
    assert_status(&ok, 200);
    fg_response_fini(&ok);
    stop_server(s);
}
END_TEST

/* POST a confirm with these framing header lines ("Name: value\r\n"...) and body bytes, read
 * until the server closes (the request says Connection: close). */
static void raw_framed_confirm(const fg_server *s, const char *framing, const char *body,
                               fg_raw_response *rr)
{
    char raw[1024];
    int n = snprintf(raw, sizeof raw,
                     "POST " CONFIRM_PATH " HTTP/1.1\r\nHost: 127.0.0.1\r\n%s\r\n"
                     "Content-Type: application/json\r\nConnection: close\r\n%s\r\n%s",
                     s->auth_header, framing, body);
    ck_assert(n > 0 && (size_t)n < sizeof raw);
    char err[FG_ERR_LEN];
    ck_assert_msg(fg_raw(s, raw, (size_t)n, 5000, rr, err) == 0, "%s", err);
}

/* RFC 9112 §6.3 (and docs/edge-rules.md §7's "never zero bytes"): a body whose length cannot be
 * known -- two Content-Length headers that disagree, or a Transfer-Encoding other than chunked --
 * gets 400 INVALID_REQUEST and a close, and nothing runs. Before, the first took the first length
 * and read the rest as the next request; the second waited for the body until the idle timeout. */
START_TEST(test_unknowable_body_length_gets_400_and_close)
{
    fg_server *s = start_server(NULL);
    static const char *const framing[] = {
        "Content-Length: 62\r\nContent-Length: 63\r\n",
        "Transfer-Encoding: gzip\r\n",
        "Transfer-Encoding: gzip, chunked\r\n",
    };
    const char *json = "{\"paymentKey\":\"pk_frm_1\",\"orderId\":\"order_frm_1\",\"amount\":100}";
    ck_assert_uint_eq(strlen(json), 62);
    for (size_t i = 0; i < sizeof framing / sizeof framing[0]; i++) {
        fg_raw_response rr;
        raw_framed_confirm(s, framing[i], json, &rr);
        ck_assert_msg(rr.status == 400 && rr.json != NULL &&
                          strcmp(fg_json_str(rr.json, "code"), "INVALID_REQUEST") == 0,
                      "[%zu] got %d: %s", i, rr.status, rr.data);
        char conn[64] = "";
        fg_raw_header(&rr, "Connection", conn, sizeof conn);
        ck_assert_msg(strcasecmp(conn, "close") == 0, "[%zu] Connection: \"%s\"", i, conn);
        ck_assert_msg(rr.closed, "[%zu] connection left open", i);
        fg_raw_response_fini(&rr);
    }
    ck_assert_uint_eq(ledger_size(s), 0);
    /* What is not ambiguous still works: the same length twice, and the coding's name in
     * another case (RFC 9112: case-insensitive). */
    fg_raw_response rr;
    raw_framed_confirm(s, "Content-Length: 62\r\nContent-Length: 62\r\n", json, &rr);
    ck_assert_msg(rr.status == 200, "the same Content-Length twice: got %d: %s", rr.status,
                  rr.data);
    fg_raw_response_fini(&rr);
    char chunked[256];
    snprintf(chunked, sizeof chunked, "%zx\r\n%s\r\n0\r\n\r\n", strlen(json), json);
    raw_framed_confirm(s, "Transfer-Encoding: Chunked\r\n", chunked, &rr);
    /* The same confirm again: its body was read, so the ledger answers. */
    const char *code = rr.json ? fg_json_str(rr.json, "code") : NULL;
    ck_assert_msg(rr.status == 400 && code != NULL &&
                      strcmp(code, "ALREADY_PROCESSED_PAYMENT") == 0,
                  "Transfer-Encoding: Chunked: got %d: %s", rr.status, rr.data);
    fg_raw_response_fini(&rr);
    stop_server(s);
}
END_TEST

START_TEST(test_unknown_route_gets_404_not_found)
{
    fg_server *s = start_server(NULL);
    const char *paths[] = {"/nope", "/v1/nope", "/v1/payments/pk_x/nope"};
    for (size_t i = 0; i < 3; i++) {
        fg_response r;
        fg_get(s, paths[i], &r);
        ck_assert_msg(r.status == 404, "%s: %ld %s", paths[i], r.status, r.body);
        assert_error(&r, 404, "NOT_FOUND");
        fg_response_fini(&r);
    }
    ck_assert_uint_eq(ledger_size(s), 0);
    stop_server(s);
}
END_TEST

START_TEST(test_get_on_confirm_path_reads_payment_key_confirm)
{
    fg_server *s = start_server(NULL);
    fg_response r;
    fg_get(s, CONFIRM_PATH, &r);
    assert_error(&r, 404, "NOT_FOUND_PAYMENT");
    fg_response_fini(&r);
    ck_assert_uint_eq(ledger_size(s), 0);
    stop_server(s);
}
END_TEST

START_TEST(test_wrong_method_gets_405_with_allow)
{
    fg_server *s = start_server(NULL);
    const char *headers[] = {s->auth_header, NULL};
    struct {
        const char *method, *path, *allows;
    } cases[] = {
        {"DELETE", CONFIRM_PATH, "POST"},
        {"PUT", "/v1/payments/pk_x", "GET, POST"}, /* a read, or the older approve path */
        {"POST", "/v1/payments/orders/order_x", "GET"},
    };
    for (size_t i = 0; i < 3; i++) {
        fg_request req = {.method = cases[i].method, .path = cases[i].path, .headers = headers};
        fg_response r;
        fg_http(s, NULL, &req, &r);
        ck_assert_msg(r.status == 405, "%s %s: %ld %s", cases[i].method, cases[i].path, r.status,
                      r.body);
        assert_error(&r, 405, "METHOD_NOT_ALLOWED");
        ck_assert_msg(strstr(r.allow, cases[i].allows) != NULL, "%s %s: Allow \"%s\"",
                      cases[i].method, cases[i].path, r.allow);
        fg_response_fini(&r);
    }
    ck_assert_uint_eq(ledger_size(s), 0);
    stop_server(s);
}
END_TEST

START_TEST(test_accept_language_en_us_gives_english_message)
{
    fg_server *s = start_server(NULL);
    const char *bodies[] = {
        "{\"paymentKey\":\"pk_en\",\"orderId\":\"bad\",\"amount\":1000}",
        "{\"paymentKey\": \"pk_en\", \"orderId\" \"order_en_1\", \"amount\": 1000}",
    };
    const char *codes[] = {"INVALID_ORDER_ID", "INVALID_REQUEST"};
    for (size_t i = 0; i < 2; i++) {
        const char *en[] = {s->auth_header, "Accept-Language: en-US", NULL};
        const char *ko[] = {s->auth_header, NULL};
        fg_response e, k;
        post_confirm_raw_body(s, bodies[i], en, &e);
        post_confirm_raw_body(s, bodies[i], ko, &k);
        assert_error(&e, 400, codes[i]);
        assert_error(&k, 400, codes[i]);
        const char *em = fg_json_str(e.json, "message"), *km = fg_json_str(k.json, "message");
        ck_assert_msg(is_ascii(em), "en-US message is not ASCII: %s", em);
        ck_assert_msg(!is_ascii(km), "default message is not Korean: %s", km);
        if (i == 1) {
            json_error_t je;
            ck_assert(json_loads(bodies[i], 0, &je) == NULL);
            ck_assert_msg(strcasestr(em, "column") != NULL && mentions_number(em, je.column),
                          "en-US message does not name column %d: %s", je.column, em);
        }
        fg_response_fini(&e);
        fg_response_fini(&k);
    }
    /* Errors outside the body checks too. */
    const char *en[] = {"Accept-Language: en-US", NULL};
    fg_response u;
    post_confirm_raw_body(s, "{}", en, &u);
    assert_error(&u, 401, "UNAUTHORIZED_KEY");
    ck_assert_msg(is_ascii(fg_json_str(u.json, "message")), "%s", u.body);
    fg_response_fini(&u);
    stop_server(s);
}
END_TEST

/* ---- CLI and lifecycle -------------------------------------------------------------------- */

static void assert_profile_rejected(const char *profile, const char *needle)
{
    char *path = fg_write_profile(profile);
    ck_assert(path != NULL);
    int line, col;
    line_col_of(profile, needle, &line, &col);
    char want[FG_PATH_LEN + 64];
    snprintf(want, sizeof want, "%s:%d:%d:", path, line, col);

    const char *args[] = {"--port", "0", "--quiet", "--profile", path, NULL};
    fg_run_result rr;
    char err[FG_ERR_LEN];
    ck_assert_msg(fg_run(args, 5000, &rr, err) == 0, "%s", err);
    ck_assert_msg(rr.exit_status == 2, "exit %d (want 2); stderr: %s", rr.exit_status, rr.err);
    ck_assert_msg(strstr(rr.err, want) != NULL, "stderr does not contain \"%s\": %s", want, rr.err);
    fg_run_result_fini(&rr);

    const char *check_args[] = {"--check-profile", path, NULL};
    ck_assert_msg(fg_run(check_args, 5000, &rr, err) == 0, "%s", err);
    ck_assert_msg(rr.exit_status == 2, "--check-profile exit %d (want 2); stderr: %s",
                  rr.exit_status, rr.err);
    ck_assert_msg(strstr(rr.err, want) != NULL, "--check-profile stderr lacks \"%s\": %s", want,
                  rr.err);
    fg_run_result_fini(&rr);
    fg_remove_profile(path);
}

/* README's flag table is copied from --help: every flag's row there must be the help text
 * word for word (the argument's '|' escaped for Markdown), so the two cannot drift apart.
 * Runs from the repository root (make test's working directory). */
START_TEST(test_readme_flag_table_matches_help)
{
    FILE *f = fopen("README.md", "r");
    ck_assert_msg(f != NULL, "README.md not found in the working directory");
    static char readme[1 << 18];
    size_t n = fread(readme, 1, sizeof readme - 1, f);
    fclose(f);
    readme[n] = '\0';
    const char *args[] = {"--help", NULL};
    fg_run_result rr;
    char err[FG_ERR_LEN];
    ck_assert_msg(fg_run(args, 5000, &rr, err) == 0, "%s", err);
    ck_assert_int_eq(rr.exit_status, 0);
    int flags = 0;
    for (char *line = rr.out; line && *line;) {
        char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        if (len > 4 && strncmp(line, "  --", 4) == 0) {
            /* "  --flag [ARG]   help  [FAKEGATE_FLAG]": the argument is the word after the
             * flag when it has no lower-case letter (N, PATH, NAME|PATH, ...). */
            const char *l = line + 2, *gap = l + strcspn(l, " \n");
            const char *arg = gap + (*gap == ' ');
            size_t arg_len = strcspn(arg, " \n");
            bool is_arg = arg_len > 0;
            for (size_t i = 0; i < arg_len; i++)
                is_arg = is_arg && !(arg[i] >= 'a' && arg[i] <= 'z');
            if (is_arg)
                gap = arg + arg_len;
            const char *h = gap;
            while (*h == ' ')
                h++;
            ck_assert_msg(h < line + len, "--help line without a help text: %.*s", (int)len,
                          line);
            const char *env = strstr(h, "  [FAKEGATE_");
            const char *hend = env && env < line + len ? env : line + len;
            char row[1024];
            size_t k = 0;
            k += (size_t)snprintf(row + k, sizeof row - k, "| `");
            for (const char *c = l; c < gap && k + 3 < sizeof row; c++) {
                if (*c == '|')
                    row[k++] = '\\';
                row[k++] = *c;
            }
            snprintf(row + k, sizeof row - k, "` | %.*s |", (int)(hend - h), h);
            ck_assert_msg(strstr(readme, row) != NULL, "README.md lacks the row \"%s\"", row);
            flags++;
        }
        line = end ? end + 1 : NULL;
    }
    ck_assert_int_ge(flags, 20); /* every flag of docs/cli.md §1 but the webhook ones */
    fg_run_result_fini(&rr);
}
END_TEST

START_TEST(test_profile_with_unknown_key_exits_2_naming_line_and_column)
{
    assert_profile_rejected("{\n"
                            "  \"name\": \"typo\",\n"
                            "  \"routes\": {\n"
                            "    \"confirm\": {\n"
                            "      \"latncy\": {\"dist\": \"fixed\", \"ms\": 5}\n"
                            "    }\n"
                            "  }\n"
                            "}\n",
                            "\"latncy\"");
}
END_TEST

START_TEST(test_profile_with_negative_latency_exits_2_naming_line_and_column)
{
    assert_profile_rejected("{\n"
                            "  \"name\": \"negative\",\n"
                            "  \"routes\": {\n"
                            "    \"confirm\": {\n"
                            "      \"latency\": {\"dist\": \"fixed\", \"ms\": -5}\n"
                            "    }\n"
                            "  }\n"
                            "}\n",
                            "-5");
}
END_TEST

START_TEST(test_check_profile_accepts_a_valid_profile)
{
    char *path = fg_write_profile(PROFILE_CONFIRM_1000MS);
    ck_assert(path != NULL);
    const char *args[] = {"--check-profile", path, NULL};
    fg_run_result rr;
    char err[FG_ERR_LEN];
    ck_assert_msg(fg_run(args, 5000, &rr, err) == 0, "%s", err);
    ck_assert_msg(rr.exit_status == 0, "exit %d; stderr: %s", rr.exit_status, rr.err);
    fg_run_result_fini(&rr);
    fg_remove_profile(path);
}
END_TEST

START_TEST(test_port_file_written_after_listening_and_removed_at_exit)
{
    /* fg_start connects the moment the file appears, without retrying. */
    fg_server *s = start_server(NULL);
    FILE *f = fopen(s->port_file, "r");
    ck_assert(f != NULL);
    int port = 0;
    ck_assert_int_eq(fscanf(f, "%d", &port), 1);
    fclose(f);
    ck_assert_int_eq(port, s->port);
    assert_clean_stop(s);
    ck_assert_msg(access(s->port_file, F_OK) != 0 && errno == ENOENT,
                  "port file %s still exists after exit", s->port_file);
    fg_free(s);
}
END_TEST

START_TEST(test_ready_line_is_exact)
{
    const char *args[] = {"--seed", "42", NULL};
    fg_opts o = {.profile_json = "{\"name\":\"readyline\",\"routes\":{\"default\":{\"latency\":"
                                 "{\"dist\":\"fixed\",\"ms\":0}}}}",
                 .args = args,
                 .capture_stdout = true};
    fg_server *s = start_server(&o);
    char want[128];
    snprintf(want, sizeof want, "fakegate listening on http://127.0.0.1:%d profile=readyline seed=42",
             s->port);
    ck_assert_str_eq(s->ready_line, want);
    assert_clean_stop(s);
    char *rest = fg_read_rest_of_stdout(s, 2000);
    ck_assert_msg(rest[0] == '\0', "more on stdout after the ready line: %s", rest);
    free(rest);
    fg_free(s);
}
END_TEST

START_TEST(test_sigterm_answers_held_request_and_exits_0)
{
    fg_server *s = start_with_profile(
        "{\"name\":\"held2s\",\"routes\":{\"confirm\":{\"latency\":{\"dist\":\"fixed\",\"ms\":2000}},"
        "\"default\":{\"latency\":{\"dist\":\"fixed\",\"ms\":0}}}}");
    struct bg_confirm held;
    start_held_confirm(&held, s, "pk_term_1", "order_term_1", 9000, "term-1");
    int64_t t0 = fg_now_ns();
    ck_assert_int_eq(fg_kill(s, SIGTERM), 0);
    int st = fg_wait(s, 5000);
    int64_t exited = fg_now_ns();
    bg_join(&held);
    if (st != 0) {
        char *e = fg_server_stderr(s);
        ck_assert_msg(st == 0, "exit status %d after SIGTERM; stderr: %.3000s", st, e);
        free(e);
    }
    ck_assert_msg(exited - t0 <= 3000 * 1000000LL, "exit took %lld ms",
                  (long long)((exited - t0) / 1000000));
    assert_status(&held.r, 200);
    assert_done_payment(held.r.json, "pk_term_1", "order_term_1", 9000, "tgen_fakegate");
    /* Committed at once, not at the end of its 2 s latency. */
    ck_assert_msg(held.r.done_ns - t0 < 1000 * 1000000LL, "held request answered %lld ms after SIGTERM",
                  (long long)((held.r.done_ns - t0) / 1000000));
    ck_assert_msg(access(s->port_file, F_OK) != 0, "port file left behind");
    fg_response_fini(&held.r);
    fg_free(s);
}
END_TEST

START_TEST(test_probe_exits_0_against_running_server)
{
    fg_server *s = start_server(NULL);
    char port[16];
    snprintf(port, sizeof port, "%d", s->port);
    const char *args[] = {"probe", "--port", port, NULL};
    fg_run_result rr;
    char err[FG_ERR_LEN];
    ck_assert_msg(fg_run(args, 10000, &rr, err) == 0, "%s", err);
    ck_assert_msg(rr.exit_status == 0, "probe exit %d; stderr: %s", rr.exit_status, rr.err);
    fg_run_result_fini(&rr);
    stop_server(s);
}
END_TEST

START_TEST(test_probe_exits_nonzero_when_nothing_listens)
{
    /* A port bound but not listening: connections are refused and nobody else can take it. */
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    socklen_t len = sizeof sa;
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    char port[16];
    snprintf(port, sizeof port, "%d", (int)ntohs(sa.sin_port));
    const char *args[] = {"probe", "--port", port, NULL};
    fg_run_result rr;
    char err[FG_ERR_LEN];
    ck_assert_msg(fg_run(args, 10000, &rr, err) == 0, "%s", err);
    ck_assert_msg(rr.exit_status == 1, "probe exit %d against a closed port", rr.exit_status);
    fg_run_result_fini(&rr);
    close(fd);
}
END_TEST

/* A bad --port is a usage error, as for the server: exit 2 naming the flag. */
START_TEST(test_probe_with_a_bad_port_exits_2_naming_it)
{
    static const char *const bad[] = {"abc", "0", "65536"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *args[] = {"probe", "--port", bad[i], NULL};
        fg_run_result rr;
        char err[FG_ERR_LEN];
        ck_assert_msg(fg_run(args, 10000, &rr, err) == 0, "%s", err);
        ck_assert_msg(rr.exit_status == 2 && strstr(rr.err, "--port") != NULL,
                      "probe --port %s: exit %d; stderr: %s", bad[i], rr.exit_status, rr.err);
        fg_run_result_fini(&rr);
    }
}
END_TEST

/* POST /v1/payments/{paymentKey} {orderId, amount}, Toss's older approve path (docs/api.md
 * §2.1): the same confirm, charged once, under an idempotency scope of its own path. */
START_TEST(test_older_approve_path_is_the_same_confirm_with_its_own_idempotency_scope)
{
    fg_server *s = start_server(NULL);
    const char *headers[] = {s->auth_header, "Idempotency-Key: older-1", NULL};
    fg_request req = {.method = "POST", .path = "/v1/payments/pk_older_1",
                      .body = "{\"orderId\":\"order-older-1\",\"amount\":12000}",
                      .headers = headers};
    fg_response first, again, r;
    fg_http(s, NULL, &req, &first);
    assert_done_amount_at(__LINE__, &first, "pk_older_1", "order-older-1", 12000);
    fg_http(s, NULL, &req, &again);
    ck_assert(same_bytes(&first, &again)); /* replayed */
    /* The same key on /v1/payments/confirm is another scope: it runs, and finds it approved. */
    confirm_fresh(s, "pk_older_1", "order-older-1", 12000, "older-1", 0, &r);
    assert_error(&r, 400, "ALREADY_PROCESSED_PAYMENT");
    fg_response_fini(&r);
    assert_charged_once(s, "pk_older_1", "order-older-1");
    json_t *j = journal(s, 0);
    ck_assert_uint_eq(json_array_size(j), 3);
    ck_assert(json_is_str(json_array_get(j, 0), "route", "confirm"));
    ck_assert(json_is_str(json_array_get(j, 1), "outcome", "replayed"));
    json_decref(j);
    /* A paymentKey in the body must be the path's; the path's must be a valid one. */
    req.headers = (const char *const[]){s->auth_header, NULL};
    req.body = "{\"orderId\":\"order-older-2\",\"amount\":1000,\"paymentKey\":\"pk_other\"}";
    fg_http(s, NULL, &req, &r);
    assert_error(&r, 400, "INVALID_REQUEST");
    ck_assert_ptr_nonnull(strstr(r.body, "paymentKey"));
    fg_response_fini(&r);
    req.path = "/v1/payments/pk%20older"; /* a space: no paymentKey has one */
    req.body = "{\"orderId\":\"order-older-2\",\"amount\":1000}";
    fg_http(s, NULL, &req, &r);
    assert_error(&r, 400, "INVALID_PAYMENT_KEY");
    fg_response_fini(&r);
    ck_assert_uint_eq(ledger_size(s), 1);
    fg_response_fini(&first);
    fg_response_fini(&again);
    stop_server(s);
}
END_TEST

Suite *make_suite(void)
{
    Suite *su = suite_create("blackbox_api");

    TCase *tc = add_tcase(su, "confirm_and_reads", 30);
    tcase_add_test(tc, test_confirm_returns_done_payment_matching_request);
    tcase_add_test(tc, test_error_responses_carry_json_type_trace_id_and_no_cache);
    tcase_add_test(tc, test_confirm_mid_flag_sets_mid);
    tcase_add_test(tc, test_confirm_chunked_body_gets_200);
    tcase_add_test(tc, test_confirm_ignores_unknown_fields);
    tcase_add_test(tc, test_older_approve_path_is_the_same_confirm_with_its_own_idempotency_scope);
    tcase_add_test(tc, test_read_unknown_payment_gets_404_not_found_payment);
    tcase_add_test(tc, test_health_reports_ok_and_the_child_pid);

    tc = add_tcase(su, "idempotency", 30);
    tcase_add_test(tc, test_confirm_same_key_in_flight_gets_409_then_replay);
    tcase_add_test(tc, test_confirm_without_key_in_flight_gets_already_processing_then_processed);
    tcase_add_test(tc, test_confirm_other_key_in_flight_gets_already_processing_then_processed);
    tcase_add_test(tc, test_confirm_same_key_leaving_queue_after_commit_gets_replay);
    tcase_add_test(tc, test_idempotency_key_of_300_chars_is_accepted);

    tc = add_tcase(su, "bad_requests", 30);
    tcase_add_test(tc, test_bad_confirms_get_their_error_and_leave_no_trace);
    tcase_add_test(tc, test_wrong_value_message_names_its_line_and_column_in_characters);
    tcase_add_test(tc, test_wrong_secret_key_gets_401_unauthorized_key);
    tcase_add_test(tc, test_test_gsk_key_is_accepted_without_secret_key_flag);
    tcase_add_test(tc, test_basic_scheme_in_any_case_and_spaces_around_credentials_are_accepted);
    tcase_add_test(tc, test_confirm_below_100_won_gets_below_minimum_amount_with_toss_message);
    tcase_add_test(tc, test_secret_key_list_trims_spaces_and_empty_values_exit_2);
    tcase_add_test(tc, test_body_over_max_body_gets_413);
    tcase_add_test(tc, test_body_over_max_body_with_expect_gets_413_before_body);
    tcase_add_test(tc, test_transfer_encoding_with_content_length_gets_400_and_close);
    tcase_add_test(tc, test_unknowable_body_length_gets_400_and_close);
    tcase_add_test(tc, test_unknown_route_gets_404_not_found);
    tcase_add_test(tc, test_get_on_confirm_path_reads_payment_key_confirm);
    tcase_add_test(tc, test_wrong_method_gets_405_with_allow);
    tcase_add_test(tc, test_accept_language_en_us_gives_english_message);

    tc = add_tcase(su, "cli", 30);
    tcase_add_test(tc, test_readme_flag_table_matches_help);
    tcase_add_test(tc, test_profile_with_unknown_key_exits_2_naming_line_and_column);
    tcase_add_test(tc, test_profile_with_negative_latency_exits_2_naming_line_and_column);
    tcase_add_test(tc, test_check_profile_accepts_a_valid_profile);
    tcase_add_test(tc, test_port_file_written_after_listening_and_removed_at_exit);
    tcase_add_test(tc, test_ready_line_is_exact);
    tcase_add_test(tc, test_sigterm_answers_held_request_and_exits_0);
    tcase_add_test(tc, test_probe_exits_0_against_running_server);
    tcase_add_test(tc, test_probe_exits_nonzero_when_nothing_listens);
    tcase_add_test(tc, test_probe_with_a_bad_port_exits_2_naming_it);
    return su;
}
