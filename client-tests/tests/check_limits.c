/* check_limits.c -- black-box tests of the bounds on what one server holds (docs/cli.md §1):
 * Idempotency-Key records per tenant (--max-idempotency-records, docs/idempotency.md §3
 * "Bounds"), payments per tenant (--max-payments, docs/api.md §2.1), the journal's size
 * (--journal-size, docs/admin.md §5), open connections (--max-connections, docs/edge-rules.md
 * §7 "Capacity") and how deeply JSON may nest (--max-json-depth, docs/api.md §2 "Request
 * bodies"; a profile's fixed 32, docs/profiles.md §4). Each test starts its own server with a small bound; for what a tenant stores it
 * shows that the request past the bound gets 503 SERVICE_UNAVAILABLE naming the bound and its
 * flag, that nothing changed, and that what is stored is still answered. Waits poll a
 * condition with a bound. */
#define _GNU_SOURCE

#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "check_main.h"
#include "testkit.h"

/* ---- helpers ------------------------------------------------------------------------------ */

/* A 503 SERVICE_UNAVAILABLE whose message names `flag`. */
#define assert_bound(r, flag) assert_bound_at(__LINE__, (r), (flag))
static void assert_bound_at(int line, const fg_response *r, const char *flag)
{
    assert_error_at(line, r, 503, "SERVICE_UNAVAILABLE", NULL);
    const char *msg = json_str(r->json, "message");
    ck_assert_msg(strstr(msg, flag) != NULL, "line %d: the message does not name %s: %s", line,
                  flag, r->body);
}

/* POST /v1/payments/{pk}/cancel {"cancelReason": "limits"} with Idempotency-Key `key` (NULL:
 * none) into *r. */
static void cancel_with(const fg_server *s, const char *pk, const char *key, fg_response *r)
{
    char path[128], line[128];
    snprintf(path, sizeof path, "/v1/payments/%s/cancel", pk);
    snprintf(line, sizeof line, "Idempotency-Key: %s", key ? key : "");
    const char *headers[] = {s->auth_header, key ? line : NULL, NULL};
    fg_request req = {.method = "POST", .path = path, .body = "{\"cancelReason\":\"limits\"}",
                      .headers = headers, .forbid_reuse = true};
    fg_http(s, NULL, &req, r);
}

/* The journal's entry on `route` for `oid` says 503, outcome capped, attempt 0 (refused before
 * its plan). */
static void assert_refused_in_journal(const fg_server *s, const char *route, const char *oid)
{
    json_t *j = journal(s, 0);
    const json_t *found = NULL;
    for (size_t i = 0; i < json_array_size(j); i++) {
        const json_t *e = json_array_get(j, i);
        if (json_is_str(e, "route", route) && json_is_str(e, "order_id", oid))
            found = e;
    }
    ck_assert_msg(found && json_is_str(found, "outcome", "capped") &&
                      json_int(found, "status") == 503 && json_int(found, "attempt") == 0,
                  "the journal's %s of %s: %s", route, oid, journal_text(s));
    json_decref(j);
}

/* POST /v1/virtual-accounts for 10 000 won at bank 88, due in 24 h, into *r. */
static void issue_va(const fg_server *s, const char *oid, fg_response *r)
{
    char body[512];
    snprintf(body, sizeof body,
             "{\"amount\":10000,\"orderId\":\"%s\",\"orderName\":\"limits\","
             "\"customerName\":\"홍길동\",\"bank\":\"88\",\"validHours\":24}", oid);
    const char *headers[] = {s->auth_header, NULL};
    fg_request req = {.method = "POST", .path = "/v1/virtual-accounts", .body = body,
                      .headers = headers};
    fg_http(s, NULL, &req, r);
}

/* POST /__admin/sessions {orderId, amount 1000, paymentKey} into *r. */
static void register_session(const fg_server *s, const char *pk, const char *oid, fg_response *r)
{
    char body[256];
    snprintf(body, sizeof body, "{\"paymentKey\":\"%s\",\"orderId\":\"%s\",\"amount\":1000}", pk,
             oid);
    admin_call(s, "POST", "/__admin/sessions", body, NULL, r);
}

/* fakegate_idempotency_records now. */
static double idem_records(const fg_server *s)
{
    return metric1(s, "fakegate_idempotency_records", NULL, NULL);
}

/* ---- --max-idempotency-records -------------------------------------------------------------- */

static const char *const idem3_args[] = {"--max-idempotency-records", "3", NULL};

START_TEST(test_new_idempotency_key_past_the_bound_gets_503_and_stores_nothing)
{
    fg_server *s = start_args(NULL, idem3_args);
    fg_response first, r;
    confirm_fresh(s, "pk_idb_1", "order_idb_1", 1000, "key-idb-1", 0, &first);
    assert_done(&first, "pk_idb_1", "order_idb_1");
    for (int i = 2; i <= 3; i++) {
        char pk[32], oid[32], key[32];
        snprintf(pk, sizeof pk, "pk_idb_%d", i);
        snprintf(oid, sizeof oid, "order_idb_%d", i);
        snprintf(key, sizeof key, "key-idb-%d", i);
        confirm_fresh(s, pk, oid, 1000, key, 0, &r);
        assert_done(&r, pk, oid);
        fg_response_fini(&r);
    }
    ck_assert(idem_records(s) == 3);

    /* The fourth key: refused, naming the bound; no payment, no record, no attempt. */
    confirm_fresh(s, "pk_idb_4", "order_idb_4", 1000, "key-idb-4", 0, &r);
    assert_bound(&r, "--max-idempotency-records");
    ck_assert_msg(strstr(json_str(r.json, "message"), "3 Idempotency-Key records"), "%s", r.body);
    fg_response_fini(&r);
    ck_assert_uint_eq(ledger_size(s), 3);
    ck_assert(idem_records(s) == 3);
    get_order(s, "order_idb_4", &r);
    assert_error(&r, 404, "NOT_FOUND_PAYMENT");
    fg_response_fini(&r);
    /* A cancel under a new key too. */
    cancel_with(s, "pk_idb_1", "key-idb-cancel", &r);
    assert_bound(&r, "--max-idempotency-records");
    fg_response_fini(&r);
    assert_order_status(s, "order_idb_1", "DONE");
    assert_refused_in_journal(s, "confirm", "order_idb_4");

    /* What is stored is still answered: the replay byte for byte, reads; no key still runs. */
    confirm_fresh(s, "pk_idb_1", "order_idb_1", 1000, "key-idb-1", 0, &r);
    assert_status(&r, 200);
    ck_assert(same_bytes(&first, &r));
    fg_response_fini(&r);
    assert_order_status(s, "order_idb_2", "DONE");
    confirm_fresh(s, "pk_idb_5", "order_idb_5", 1000, NULL, 0, &r);
    assert_done(&r, "pk_idb_5", "order_idb_5");
    fg_response_fini(&r);

    /* A reset makes room. */
    reset_now(s);
    confirm_fresh(s, "pk_idb_4", "order_idb_4", 1000, "key-idb-4", 0, &r);
    assert_done(&r, "pk_idb_4", "order_idb_4");
    fg_response_fini(&r);
    fg_response_fini(&first);
    stop_server(s);
}
END_TEST

/* Room comes back as records expire: the sweep frees them with no traffic, and the key that was
 * refused runs. */
START_TEST(test_idempotency_bound_frees_up_as_records_expire)
{
    const char *args[] = {"--max-idempotency-records", "1", "--idempotency-ttl", "1", NULL};
    fg_server *s = start_args(NULL, args);
    fg_response r;
    confirm_fresh(s, "pk_idx_1", "order_idx_1", 1000, "key-idx-1", 0, &r);
    assert_done(&r, "pk_idx_1", "order_idx_1");
    fg_response_fini(&r);
    confirm_fresh(s, "pk_idx_2", "order_idx_2", 1000, "key-idx-2", 0, &r);
    if (r.status == 503) { /* else the first record had already expired: nothing to show */
        assert_bound(&r, "--max-idempotency-records");
        ck_assert(wait_metric(s, "fakegate_idempotency_records", NULL, NULL, 0, 5000) == 0);
        fg_response_fini(&r);
        confirm_fresh(s, "pk_idx_2", "order_idx_2", 1000, "key-idx-2", 0, &r);
    }
    assert_done(&r, "pk_idx_2", "order_idx_2");
    fg_response_fini(&r);
    stop_server(s);
}
END_TEST

/* Two new keys arrive together while one place is left: both pass the arrival check, both wait
 * in a 300 ms queue_latency, and the second to leave it is refused at its claim -- no record,
 * nothing charged (its lenient payment, made at arrival, stays IN_PROGRESS). */
START_TEST(test_idempotency_bound_reached_during_the_queue_is_refused_at_the_claim)
{
    fg_server *s = start_confirm_as("limits", "{'queue_latency':{'dist':'fixed','ms':300}}",
                                    (const char *const[]){"--max-idempotency-records", "1", NULL});
    struct mrun m;
    mrun_init(&m, s, 2);
    mrun_confirm(&m, 0, "pk_idq_a", "order_idq_a", 1000, "key-idq-a", 5000);
    mrun_confirm(&m, 1, "pk_idq_b", "order_idq_b", 1000, "key-idq-b", 5000);
    mrun_perform(&m);
    size_t ok = m.q[0].status == 200 ? 0 : 1, refused = 1 - ok;
    ck_assert_msg(m.q[ok].status == 200 && m.q[refused].status == 503 &&
                      strstr(m.q[refused].out, "--max-idempotency-records"),
                  "%ld %s / %ld %s", m.q[0].status, m.q[0].out, m.q[1].status, m.q[1].out);
    ck_assert(idem_records(s) == 1);
    ck_assert_int_eq(ledger_charges(s, m.q[refused].oid), 0);
    assert_order_status(s, m.q[refused].oid, "IN_PROGRESS");
    assert_charged_once(s, m.q[ok].pk, m.q[ok].oid);
    mrun_free(&m);
    stop_server(s);
}
END_TEST

/* ---- --max-payments ------------------------------------------------------------------------- */

static const char *const pay3_args[] = {"--max-payments", "3", NULL};

START_TEST(test_fourth_payment_past_max_payments_gets_503_and_nothing_changes)
{
    fg_server *s = start_args(NULL, pay3_args);
    fg_response r;
    for (int i = 1; i <= 3; i++) {
        char pk[32], oid[32], key[32];
        snprintf(pk, sizeof pk, "pk_mp_%d", i);
        snprintf(oid, sizeof oid, "order_mp_%d", i);
        snprintf(key, sizeof key, "key-mp-%d", i);
        confirm_fresh(s, pk, oid, 1000, i == 1 ? key : NULL, 0, &r);
        assert_done(&r, pk, oid);
        fg_response_fini(&r);
    }
    double in_progress =
        metric1(s, "fakegate_payments_total", "status", "IN_PROGRESS");

    /* The fourth: refused, naming the bound and its value; nothing stored, no attempt. */
    confirm_fresh(s, "pk_mp_4", "order_mp_4", 1000, "key-mp-4", 0, &r);
    assert_bound(&r, "--max-payments");
    ck_assert_msg(strstr(json_str(r.json, "message"), "holds 3 payments"), "%s", r.body);
    fg_response_fini(&r);
    ck_assert_uint_eq(ledger_size(s), 3);
    ck_assert(idem_records(s) == 1); /* key-mp-4 left no record */
    ck_assert(metric1(s, "fakegate_payments_total", "status", "IN_PROGRESS") == in_progress);
    get_order(s, "order_mp_4", &r);
    assert_error(&r, 404, "NOT_FOUND_PAYMENT");
    fg_response_fini(&r);
    assert_refused_in_journal(s, "confirm", "order_mp_4");
    /* Every way of making a payment is refused the same way. */
    issue_va(s, "order_mp_va", &r);
    assert_bound(&r, "--max-payments");
    fg_response_fini(&r);
    register_session(s, "pk_mp_session", "order_mp_session", &r);
    assert_bound(&r, "--max-payments");
    fg_response_fini(&r);
    ck_assert_uint_eq(ledger_size(s), 3);

    /* The stored payments keep working: reads, a confirm answered by the ledger, a replay, a
     * cancel. */
    assert_order_status(s, "order_mp_2", "DONE");
    fg_get(s, "/v1/payments/pk_mp_3", &r);
    assert_done(&r, "pk_mp_3", "order_mp_3");
    fg_response_fini(&r);
    confirm_fresh(s, "pk_mp_3", "order_mp_3", 1000, NULL, 0, &r);
    assert_error(&r, 400, "ALREADY_PROCESSED_PAYMENT");
    fg_response_fini(&r);
    confirm_fresh(s, "pk_mp_1", "order_mp_1", 1000, "key-mp-1", 0, &r);
    assert_done(&r, "pk_mp_1", "order_mp_1");
    fg_response_fini(&r);
    cancel_with(s, "pk_mp_2", "key-mp-cancel", &r);
    assert_status(&r, 200);
    ck_assert_str_eq(json_str(r.json, "status"), "CANCELED");
    fg_response_fini(&r);
    ck_assert_uint_eq(ledger_size(s), 3);

    /* A reset empties the ledger: room again. */
    reset_now(s);
    confirm_fresh(s, "pk_mp_4", "order_mp_4", 1000, "key-mp-4", 0, &r);
    assert_done(&r, "pk_mp_4", "order_mp_4");
    fg_response_fini(&r);
    stop_server(s);
}
END_TEST

/* Strict sessions: a confirm creates nothing, so at the bound a registered payment is still
 * confirmed; only a new registration is refused. Bounds are per tenant: another key has room. */
START_TEST(test_max_payments_refuses_only_new_payments_and_counts_per_tenant)
{
    const char *args[] = {"--max-payments", "1", "--strict-sessions", NULL};
    fg_server *s = start_args(NULL, args);
    fg_response r;
    register_session(s, "pk_mps_1", "order_mps_1", &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    register_session(s, "pk_mps_2", "order_mps_2", &r);
    assert_bound(&r, "--max-payments");
    fg_response_fini(&r);
    confirm_fresh(s, "pk_mps_1", "order_mps_1", 1000, "key-mps-1", 0, &r);
    assert_done(&r, "pk_mps_1", "order_mps_1");
    fg_response_fini(&r);
    confirm_fresh(s, "pk_mps_2", "order_mps_2", 1000, NULL, 0, &r);
    assert_error(&r, 404, "NOT_FOUND_PAYMENT_SESSION"); /* strict: not a bound's answer */
    fg_response_fini(&r);
    /* Another tenant's ledger is its own. */
    admin_call(s, "POST", "/__admin/sessions",
               "{\"paymentKey\":\"pk_mps_t\",\"orderId\":\"order_mps_t\",\"amount\":1000}",
               "X-Fakegate-Tenant: test_sk_limits_other", &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    confirm_as_key(s, "test_sk_limits_other", "pk_mps_t", "order_mps_t", 1000, NULL, 0, &r);
    assert_done(&r, "pk_mps_t", "order_mps_t");
    fg_response_fini(&r);
    stop_server(s);
}
END_TEST

/* ---- --journal-size ------------------------------------------------------------------------- */

START_TEST(test_journal_size_keeps_the_newest_n_and_bounds_the_limit_filter)
{
    const char *args[] = {"--journal-size", "3", NULL};
    fg_server *s = start_args(NULL, args);
    fg_response r;
    for (int i = 1; i <= 5; i++) {
        char oid[32];
        snprintf(oid, sizeof oid, "order_js_%d", i);
        get_order(s, oid, &r);
        assert_error(&r, 404, "NOT_FOUND_PAYMENT");
        fg_response_fini(&r);
    }
    json_t *all = admin_json(s, "/__admin/requests");
    json_t *v = json_object_get(all, "requests");
    ck_assert_uint_eq(json_array_size(v), 3);
    ck_assert_int_eq(json_int(all, "total"), 3);
    for (size_t i = 0; i < 3; i++) {
        char want[32];
        snprintf(want, sizeof want, "order_js_%zu", i + 3);
        ck_assert(json_is_str(json_array_get(v, i), "order_id", want));
    }
    json_decref(all);
    admin_call(s, "GET", "/__admin/requests?limit=3", NULL, NULL, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    admin_call(s, "GET", "/__admin/requests?limit=4", NULL, NULL, &r);
    assert_error(&r, 400, "INVALID_REQUEST");
    ck_assert_msg(strstr(json_str(r.json, "message"), "limit: 1 .. 3") &&
                      strstr(json_str(r.json, "message"), "--journal-size"),
                  "%s", r.body);
    fg_response_fini(&r);
    stop_server(s);
}
END_TEST

/* ---- --max-connections ---------------------------------------------------------------------- */

/* A keep-alive connection that has had one GET /healthz answered (so the server holds it open);
 * returns its socket. */
static int held_connection(const fg_server *s)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)s->port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    static const char req[] = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    ck_assert_int_eq(send(fd, req, sizeof req - 1, MSG_NOSIGNAL), (ssize_t)(sizeof req - 1));
    char buf[1024];
    ssize_t n = recv(fd, buf, sizeof buf - 1, 0);
    ck_assert_msg(n > 12 && strncmp(buf, "HTTP/1.1 200", 12) == 0, "no answer on a held connection");
    return fd;
}

/* Past --max-connections a new connection is accepted by the kernel (the listen backlog) but
 * gets no answer until one of the open ones closes; then it is answered. The start-up note says
 * which limit is in force. */
START_TEST(test_connection_past_max_connections_waits_until_one_closes)
{
    const char *args[] = {"--max-connections", "2", "--threads", "1", NULL};
    fg_opts o = {.args = args, .access_log = true};
    fg_server *s = start_server(&o);
    char *err = NULL;
    for (int64_t until = fg_now_ms() + 5000; fg_now_ms() < until; fg_pause_ms(10)) {
        free(err);
        err = fg_server_stderr(s);
        if (strstr(err, "connection limit 2 (--max-connections)"))
            break;
    }
    ck_assert_msg(strstr(err, "connection limit 2 (--max-connections)"), "stderr: %s", err);
    free(err);
    int a = held_connection(s), b = held_connection(s);
    const char *headers[] = {s->auth_header, NULL};
    fg_request req = {.path = "/healthz", .headers = headers, .timeout_ms = 600,
                      .forbid_reuse = true};
    fg_response r;
    ck_assert_int_eq(fg_http(s, NULL, &req, &r), -1);
    assert_curl(&r, CURLE_OPERATION_TIMEDOUT); /* connected, never answered */
    fg_response_fini(&r);
    close(a);
    req.timeout_ms = 5000;
    ck_assert_int_eq(fg_http(s, NULL, &req, &r), 0);
    assert_status(&r, 200);
    fg_response_fini(&r);
    close(b);
    stop_server(s);
}
END_TEST

/* ---- --max-json-depth ----------------------------------------------------------------------- */

/* A confirm body {"paymentKey", "orderId", "amount", "extra": <levels nested arrays>}
 * (caller frees); the first '[' of "extra" is level 2. */
static char *deep_confirm(const char *pk, const char *oid, size_t levels)
{
    char head[160];
    int hl = snprintf(head, sizeof head,
                      "{\"paymentKey\":\"%s\",\"orderId\":\"%s\",\"amount\":1000,\"extra\":", pk,
                      oid);
    char *t = malloc((size_t)hl + 2 * levels + 2);
    ck_assert_ptr_nonnull(t);
    memcpy(t, head, (size_t)hl);
    memset(t + hl, '[', levels);
    memset(t + (size_t)hl + levels, ']', levels);
    strcpy(t + (size_t)hl + 2 * levels, "}");
    return t;
}

/* POST `path` with `body` and the server's auth (Accept-Language en-US) into *r. */
static void post_en(const fg_server *s, const char *path, const char *body, fg_response *r)
{
    const char *headers[] = {s->auth_header, "Accept-Language: en-US", NULL};
    fg_request req = {.method = "POST", .path = path, .body = body, .headers = headers};
    fg_http(s, NULL, &req, r);
}

START_TEST(test_body_nested_deeper_than_max_json_depth_gets_400_naming_the_depth)
{
    fg_server *s = start_args(NULL, NULL);
    fg_response r;
    /* The default, 32: "extra" nests 31 more (32 in all) and passes; 40 do not. */
    char *ok = deep_confirm("pk_deep_ok", "order_deep_ok", 31);
    post_en(s, CONFIRM_PATH, ok, &r);
    assert_done(&r, "pk_deep_ok", "order_deep_ok");
    fg_response_fini(&r);
    free(ok);
    char *deep = deep_confirm("pk_deep_no", "order_deep_no", 40);
    post_en(s, CONFIRM_PATH, deep, &r);
    assert_error(&r, 400, "INVALID_REQUEST");
    /* Level 33 is the 32nd '[' of "extra": its column is that of "extra"'s first '[' + 31. */
    char want[160];
    snprintf(want, sizeof want,
             "Invalid JSON: nested deeper than 32 levels (--max-json-depth) (line 1, column %zu)",
             (size_t)(strchr(deep, '[') - deep) + 1 + 31);
    ck_assert_str_eq(json_str(r.json, "message"), want);
    fg_response_fini(&r);
    free(deep);
    ck_assert_uint_eq(ledger_size(s), 1); /* the deep one made no payment */
    stop_server(s);

    /* --max-json-depth 2: a cancel's refundReceiveAccount (2 levels) still fits; 3 do not.
     * The admin API's JSON bodies follow the same flag. */
    const char *args[] = {"--max-json-depth", "2", NULL};
    s = start_args(NULL, args);
    confirm_fresh(s, "pk_deep_2", "order_deep_2", 1000, NULL, 0, &r);
    assert_done(&r, "pk_deep_2", "order_deep_2");
    fg_response_fini(&r);
    post_en(s, "/v1/payments/pk_deep_2/cancel",
            "{\"cancelReason\":\"x\",\"refundReceiveAccount\":{\"bank\":\"88\","
            "\"accountNumber\":\"12345678901234\",\"holderName\":\"홍길동\"}}", &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    post_en(s, CONFIRM_PATH, "{\"paymentKey\":\"pk_deep_3\",\"orderId\":\"order_deep_3\","
                             "\"amount\":1000,\"x\":[[1]]}", &r);
    assert_error(&r, 400, "INVALID_REQUEST");
    ck_assert_msg(strstr(json_str(r.json, "message"), "nested deeper than 2 levels"), "%s", r.body);
    fg_response_fini(&r);
    admin_call(s, "PUT", "/__admin/webhooks", "{\"urls\": [[\"http://127.0.0.1:1/h\"]]}", NULL, &r);
    assert_error(&r, 400, "INVALID_REQUEST");
    ck_assert_msg(strstr(json_str(r.json, "message"),
                         "request body:1:11: nested deeper than 2 levels (--max-json-depth)"),
                  "%s", r.body);
    fg_response_fini(&r);
    stop_server(s);
}
END_TEST

/* A profile has its own fixed limit, 32 levels: PUT /__admin/profile and a reset naming one
 * refuse deeper text with 400 INVALID_PROFILE and its place; the profile in force stays. */
START_TEST(test_profile_nested_deeper_than_32_levels_is_refused_over_the_admin_api)
{
    fg_server *s = start_args(NULL, NULL);
    size_t levels = 40;
    const char *head = "{\"name\": \"deep\", \"routes\": {}, \"description\": ";
    size_t hl = strlen(head);
    char *p = malloc(hl + 2 * levels + 2);
    ck_assert_ptr_nonnull(p);
    memcpy(p, head, hl);
    memset(p + hl, '[', levels);
    memset(p + hl + levels, ']', levels);
    strcpy(p + hl + 2 * levels, "}");
    fg_response r;
    put_profile(s, p, &r);
    assert_error(&r, 400, "INVALID_PROFILE");
    char want[160];
    snprintf(want, sizeof want,
             "request body:1:%zu: nested deeper than 32 levels (the most a profile may nest)",
             hl + 1 + 31);
    ck_assert_str_eq(json_str(r.json, "message"), want);
    fg_response_fini(&r);
    size_t bl = strlen("{\"profile\": ") + strlen(p) + 2;
    char *body = malloc(bl);
    ck_assert_ptr_nonnull(body);
    snprintf(body, bl, "{\"profile\": %s}", p);
    admin_call(s, "POST", "/__admin/reset", body, NULL, &r);
    assert_error(&r, 400, "INVALID_PROFILE");
    ck_assert_msg(strstr(json_str(r.json, "message"), "nested deeper than 32 levels"), "%s",
                  r.body);
    fg_response_fini(&r);
    assert_profile_is(s, "instant", NULL);
    free(body);
    free(p);
    stop_server(s);
}
END_TEST

Suite *make_suite(void)
{
    Suite *su = suite_create("blackbox_limits");
    TCase *tc = add_tcase(su, "idempotency_records", 30);
    tcase_add_test(tc, test_new_idempotency_key_past_the_bound_gets_503_and_stores_nothing);
    tcase_add_test(tc, test_idempotency_bound_frees_up_as_records_expire);
    tcase_add_test(tc, test_idempotency_bound_reached_during_the_queue_is_refused_at_the_claim);
    tc = add_tcase(su, "payments", 30);
    tcase_add_test(tc, test_fourth_payment_past_max_payments_gets_503_and_nothing_changes);
    tcase_add_test(tc, test_max_payments_refuses_only_new_payments_and_counts_per_tenant);
    tc = add_tcase(su, "journal", 30);
    tcase_add_test(tc, test_journal_size_keeps_the_newest_n_and_bounds_the_limit_filter);
    tc = add_tcase(su, "connections", 30);
    tcase_add_test(tc, test_connection_past_max_connections_waits_until_one_closes);
    tc = add_tcase(su, "json_depth", 30);
    tcase_add_test(tc, test_body_nested_deeper_than_max_json_depth_gets_400_naming_the_depth);
    tcase_add_test(tc, test_profile_nested_deeper_than_32_levels_is_refused_over_the_admin_api);
    return su;
}
