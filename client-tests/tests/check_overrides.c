/* check_overrides.c -- black-box tests of per-request overrides (docs/profiles.md §4 "Per-request
 * overrides": X-Fakegate-Latency-Ms, X-Fakegate-Fault, X-Fakegate-Profile), the SIGHUP reload of
 * the profile file (docs/cli.md §1), and the access log on stderr (docs/cli.md §1 --log/--quiet,
 * docs/edge-rules.md §7: bytes that are not UTF-8 escaped as \xNN, valid UTF-8 kept, at most 8 KiB
 * per line). Each test starts its own server on port 0. Requests whose connection-level error
 * matters use a fresh connection (CURLOPT_FORBID_REUSE). Timing assertions are lower bounds on
 * injected delays, or "fast" bounds far below a latency the override removed; waits poll a
 * condition with a bound. The access log is read after the server has stopped (SIGTERM, exit 0), so
 * every line it will ever write is in the file: no waiting on log writes. */
#define _GNU_SOURCE

#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "check_main.h"
#include "testkit.h"

#define LOG_LINE_MAX 8192

/* ---- helpers ------------------------------------------------------------------------------ */

/* A profile whose confirm route is `confirm` ('-quoted object), everything else instant. */
static fg_server *start_confirm(const char *confirm)
{
    return start_confirm_as("overrides", confirm, NULL);
}

/* The harness's instant profile (no latency, no faults anywhere). */
static fg_server *start_instant(void)
{
    return start_server(NULL);
}

static int64_t took_ms(const fg_response *r)
{
    return (r->done_ns - r->sent_ns) / MS;
}

/* The newest journal entry of a confirm for `oid` (a new reference), or fails. */
static json_t *journal_confirm(const fg_server *s, const char *oid)
{
    fg_response r;
    fg_get(s, "/__admin/requests", &r);
    assert_status(&r, 200);
    json_t *reqs = json_object_get(r.json, "requests");
    ck_assert_msg(json_is_array(reqs), "no requests array: %.300s", r.body);
    json_t *found = NULL;
    for (size_t i = json_array_size(reqs); i-- > 0 && found == NULL;) {
        json_t *e = json_array_get(reqs, i);
        const char *o = fg_json_str(e, "order_id"), *route = fg_json_str(e, "route");
        if (o != NULL && strcmp(o, oid) == 0 && route != NULL && strcmp(route, "confirm") == 0)
            found = json_incref(e);
    }
    ck_assert_msg(found != NULL, "no confirm of %s in the journal: %.600s", oid, r.body);
    fg_response_fini(&r);
    return found;
}

static double decision_num(const json_t *entry, const char *key)
{
    const json_t *v = json_object_get(json_object_get(entry, "decision"), key);
    ck_assert_msg(json_is_number(v), "decision.%s is not a number", key);
    return json_number_value(v);
}

/* A 400 INVALID_REQUEST whose message contains every needle (NULL-terminated). */
static void assert_invalid_naming(const fg_response *r, const char *what, const char *const *needles)
{
    ck_assert_msg(r->curl_code == CURLE_OK && r->status == 400 && fg_error_code(r) != NULL &&
                      strcmp(fg_error_code(r), "INVALID_REQUEST") == 0,
                  "%s: want 400 INVALID_REQUEST, got curl %d status %ld %.400s", what,
                  (int)r->curl_code, r->status, r->body);
    const char *msg = fg_json_str(r->json, "message");
    ck_assert_msg(msg != NULL, "%s: no message: %.300s", what, r->body);
    for (size_t i = 0; needles[i] != NULL; i++)
        ck_assert_msg(strstr(msg, needles[i]) != NULL, "%s: message \"%s\" does not name \"%s\"",
                      what, msg, needles[i]);
}

/* ---- X-Fakegate-Latency-Ms ---------------------------------------------------------------- */

struct call {
    const fg_server *s;
    const char *pk, *oid, *key, *extra;
    fg_response r;
};

static void *call_confirm(void *arg)
{
    struct call *c = arg;
    confirm_with(c->s, c->pk, c->oid, 1000, c->key, c->extra, 0, &c->r);
    return NULL;
}

START_TEST(test_latency_override_delays_and_reads_in_progress)
{
    fg_server *s = start_instant();
    struct call a = {.s = s, .pk = "pk_lat_1", .oid = "order_lat_1", .key = "key-lat-1",
                     .extra = "X-Fakegate-Latency-Ms: 300"};
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, call_confirm, &a), 0);
    /* Poll the read until the payment exists: while the confirm is in its latency it reads
     * IN_PROGRESS (and the read itself is not delayed: the override is for the confirm only). */
    char st[64] = "";
    int64_t read_done = 0, deadline = fg_now_ms() + 3000;
    while (fg_now_ms() < deadline) {
        order_status(s, "order_lat_1", st, sizeof st);
        if (st[0] != '\0') {
            read_done = fg_now_ns();
            break;
        }
        fg_pause_ms(5);
    }
    pthread_join(t, NULL);
    ck_assert_msg(read_done != 0, "the payment never appeared during the confirm");
    ck_assert_msg(strcmp(st, "IN_PROGRESS") == 0, "read during the latency shows \"%s\"", st);
    assert_done(&a.r, "pk_lat_1", "order_lat_1");
    ck_assert_msg(read_done < a.r.done_ns, "the read did not happen during the confirm");
    ck_assert_msg(took_ms(&a.r) >= 280, "confirm with X-Fakegate-Latency-Ms: 300 took %lld ms",
                  (long long)took_ms(&a.r));
    fg_response_fini(&a.r);
    assert_order_status(s, "order_lat_1", "DONE");

    json_t *e = journal_confirm(s, "order_lat_1");
    ck_assert_msg(decision_num(e, "latency_ms") == 300.0, "decision.latency_ms %g",
                  decision_num(e, "latency_ms"));
    ck_assert_msg(decision_num(e, "queue_latency_ms") == 0.0, "decision.queue_latency_ms %g",
                  decision_num(e, "queue_latency_ms"));
    json_decref(e);

    /* The override was for that request only: the next confirm is instant again. */
    fg_response r;
    confirm_with(s, "pk_lat_2", "order_lat_2", 1000, NULL, NULL, 0, &r);
    assert_done(&r, "pk_lat_2", "order_lat_2");
    ck_assert_msg(took_ms(&r) < 250, "the next confirm took %lld ms", (long long)took_ms(&r));
    fg_response_fini(&r);
    e = journal_confirm(s, "order_lat_2");
    ck_assert_msg(decision_num(e, "latency_ms") == 0.0, "decision.latency_ms %g",
                  decision_num(e, "latency_ms"));
    json_decref(e);
    stop_server(s);
}
END_TEST

START_TEST(test_latency_override_removes_queue_latency)
{
    fg_server *s = start_confirm("{'queue_latency':{'dist':'fixed','ms':1000}}");
    fg_response r;
    confirm_with(s, "pk_q_1", "order_q_1", 1000, "key-q-1", "X-Fakegate-Latency-Ms: 50", 0, &r);
    assert_done(&r, "pk_q_1", "order_q_1");
    ck_assert_msg(took_ms(&r) >= 45 && took_ms(&r) < 900,
                  "with X-Fakegate-Latency-Ms: 50 on a 1000 ms queue the confirm took %lld ms",
                  (long long)took_ms(&r));
    fg_response_fini(&r);
    json_t *e = journal_confirm(s, "order_q_1");
    ck_assert_msg(decision_num(e, "queue_latency_ms") == 0.0 && decision_num(e, "latency_ms") == 50.0,
                  "decision queue %g latency %g", decision_num(e, "queue_latency_ms"),
                  decision_num(e, "latency_ms"));
    json_decref(e);

    /* The profile's queue is there for a request without the header. */
    confirm_with(s, "pk_q_2", "order_q_2", 1000, "key-q-2", NULL, 0, &r);
    assert_done(&r, "pk_q_2", "order_q_2");
    ck_assert_msg(took_ms(&r) >= 950, "without the override the confirm took %lld ms",
                  (long long)took_ms(&r));
    fg_response_fini(&r);
    stop_server(s);
}
END_TEST

START_TEST(test_latency_override_invalid_values)
{
    fg_server *s = start_instant();
    static const char *const bad[] = {"-5", "abc", "1e12"};
    static const char *const needles[] = {"X-Fakegate-Latency-Ms", NULL};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char hdr[128], oid[64];
        snprintf(hdr, sizeof hdr, "X-Fakegate-Latency-Ms: %s", bad[i]);
        snprintf(oid, sizeof oid, "order_badlat_%zu", i);
        fg_response r;
        confirm_with(s, "pk_badlat", oid, 1000, "key-badlat", hdr, 0, &r);
        assert_invalid_naming(&r, hdr, needles);
        fg_response_fini(&r);
    }
    ck_assert_uint_eq(ledger_size(s), 0);
    /* Not stored under the key: the corrected request runs normally. */
    fg_response r;
    confirm_with(s, "pk_badlat", "order_badlat_0", 1000, "key-badlat", NULL, 0, &r);
    assert_done(&r, "pk_badlat", "order_badlat_0");
    fg_response_fini(&r);
    stop_server(s);
}
END_TEST

/* ---- X-Fakegate-Fault --------------------------------------------------------------------- */

/* One confirm with `fault` on an instant server; expects the curl error `want` (CURLE_OK: an
 * HTTP answer) and the order to read `status` afterwards with `charges` charges. */
static void fault_case(const char *fault, CURLcode want, long timeout_ms, const char *read_status,
                       long long charges, const char *tag)
{
    fg_server *s = start_instant();
    char hdr[256], pk[64], oid[64], key[64];
    snprintf(hdr, sizeof hdr, "X-Fakegate-Fault: %s", fault);
    snprintf(pk, sizeof pk, "pk_fo_%s", tag);
    snprintf(oid, sizeof oid, "order_fo_%s", tag);
    snprintf(key, sizeof key, "key-fo-%s", tag);
    fg_response r;
    confirm_with(s, pk, oid, 2500, key, hdr, timeout_ms, &r);
    assert_curl(&r, want);
    ck_assert_int_eq(r.status, 0);
    fg_response_fini(&r);
    assert_order_status(s, oid, read_status);
    ck_assert_int_eq(ledger_charges(s, oid), charges);
    stop_server(s);
}

START_TEST(test_fault_override_drop_response_reset)
{
    /* No p: it defaults to 1. */
    fault_case("drop_response; how=reset", CURLE_RECV_ERROR, 0, "DONE", 1, "dresp");
}
END_TEST

START_TEST(test_fault_override_drop_request_close)
{
    fault_case("drop_request; how=close", CURLE_GOT_NOTHING, 0, "IN_PROGRESS", 0, "dreq");
}
END_TEST

START_TEST(test_fault_override_drop_request_hang)
{
    fault_case("drop_request; how=hang; hang_ms=2000", CURLE_OPERATION_TIMEDOUT, 300,
               "IN_PROGRESS", 0, "hang");
}
END_TEST

START_TEST(test_fault_override_error_commit)
{
    fg_server *s = start_instant();
    fg_response r;
    confirm_with(s, "pk_fo_err", "order_fo_err", 3000, "key-fo-err",
                 "X-Fakegate-Fault: error; status=500; code=FAILED_INTERNAL_SYSTEM_PROCESSING; "
                 "commit=true",
                 0, &r);
    assert_error(&r, 500, "FAILED_INTERNAL_SYSTEM_PROCESSING");
    fg_response_fini(&r);
    assert_order_status(s, "order_fo_err", "DONE");
    ck_assert_int_eq(ledger_charges(s, "order_fo_err"), 1);
    /* commit=true stored the success: the resend with the key gets the 200. */
    confirm_with(s, "pk_fo_err", "order_fo_err", 3000, "key-fo-err", NULL, 0, &r);
    assert_done(&r, "pk_fo_err", "order_fo_err");
    fg_response_fini(&r);
    ck_assert_int_eq(ledger_charges(s, "order_fo_err"), 1);
    stop_server(s);
}
END_TEST

/* docs/idempotency.md §3: an error with when after and commit false means the gateway never
 * processed the request, so its record goes and a resend with the key runs again -- also when the
 * request had ended in a business error (here: no session yet), which must not be replayed. */
START_TEST(test_fault_override_error_uncommit_after_business_error_keeps_no_record)
{
    fg_server *s = start_args(NULL, (const char *const[]){"--strict-sessions", NULL});
    fg_response r;
    confirm_with(s, "pk_fo_unc", "order_fo_unc", 3000, "key-fo-unc",
                 "X-Fakegate-Fault: error; status=500; code=FAILED_INTERNAL_SYSTEM_PROCESSING; "
                 "commit=false",
                 0, &r);
    assert_error(&r, 500, "FAILED_INTERNAL_SYSTEM_PROCESSING");
    fg_response_fini(&r);
    fg_request reg = {.method = "POST", .path = "/__admin/sessions",
                      .body = "{\"orderId\":\"order_fo_unc\",\"amount\":3000,"
                              "\"paymentKey\":\"pk_fo_unc\"}"};
    fg_http(s, NULL, &reg, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    /* Not the 404 NOT_FOUND_PAYMENT_SESSION the client never saw: the confirm runs now. */
    confirm_with(s, "pk_fo_unc", "order_fo_unc", 3000, "key-fo-unc", NULL, 0, &r);
    assert_done(&r, "pk_fo_unc", "order_fo_unc");
    fg_response_fini(&r);
    ck_assert_int_eq(ledger_charges(s, "order_fo_unc"), 1);
    stop_server(s);
}
END_TEST

/* docs/profiles.md §4: the header takes a fault object's grammar; retry_after=N is whole seconds
 * (the object {"format":"seconds","value":N}), a word names the format, anything else is refused.
 */
START_TEST(test_fault_override_error_with_retry_after_seconds)
{
    fg_server *s = start_instant();
    fg_response r;
    confirm_with(s, "pk_fo_ra", "order_fo_ra", 3000, NULL,
                 "X-Fakegate-Fault: error; status=429; code=COMMON_ERROR; retry_after=5", 0, &r);
    assert_error(&r, 429, "COMMON_ERROR");
    ck_assert_str_eq(r.retry_after, "5");
    fg_response_fini(&r);
    confirm_with(s, "pk_fo_ra", "order_fo_ra", 3000, NULL,
                 "X-Fakegate-Fault: error; status=429; code=COMMON_ERROR; retry_after=none", 0,
                 &r);
    assert_error(&r, 429, "COMMON_ERROR");
    ck_assert_str_eq(r.retry_after, "");
    fg_response_fini(&r);
    confirm_with(s, "pk_fo_ra", "order_fo_ra", 3000, NULL,
                 "X-Fakegate-Fault: error; status=429; code=COMMON_ERROR; retry_after=auto", 0,
                 &r);
    assert_error(&r, 429, "COMMON_ERROR");
    ck_assert_msg(r.retry_after[0] >= '0' && r.retry_after[0] <= '9', "Retry-After \"%s\"",
                  r.retry_after);
    fg_response_fini(&r);
    static const char *const not_seconds[] = {"1.5", "0x10", "1e1"};
    for (size_t i = 0; i < 3; i++) {
        char hdr[128];
        snprintf(hdr, sizeof hdr,
                 "X-Fakegate-Fault: error; status=429; code=COMMON_ERROR; retry_after=%s",
                 not_seconds[i]);
        confirm_with(s, "pk_fo_ra", "order_fo_ra", 3000, NULL, hdr, 0, &r);
        assert_error(&r, 400, "INVALID_REQUEST");
        ck_assert_msg(strstr(fg_json_str(r.json, "message"), "retry_after") != NULL, "%s: %s",
                      not_seconds[i], r.body);
        fg_response_fini(&r);
    }
    stop_server(s);
}
END_TEST

START_TEST(test_fault_override_error_before_is_immediate)
{
    fg_server *s = start_confirm("{'latency':{'dist':'fixed','ms':1000}}");
    fg_response r;
    confirm_with(s, "pk_fo_bef", "order_fo_bef", 3000, "key-fo-bef",
                 "X-Fakegate-Fault: error; code=PROVIDER_ERROR; when=before", 0, &r);
    assert_error(&r, 400, "PROVIDER_ERROR");
    ck_assert_msg(took_ms(&r) < 500, "error when=before took %lld ms on a 1000 ms latency",
                  (long long)took_ms(&r));
    fg_response_fini(&r);
    ck_assert_int_eq(ledger_charges(s, "order_fo_bef"), 0);
    stop_server(s);
}
END_TEST

START_TEST(test_fault_override_drip)
{
    fg_server *s = start_instant();
    fg_response r;
    confirm_with(s, "pk_fo_drip", "order_fo_drip", 3000, NULL,
                 "X-Fakegate-Fault: drip; duration_ms=600", 0, &r);
    assert_done(&r, "pk_fo_drip", "order_fo_drip");
    ck_assert_msg(took_ms(&r) >= 550, "drip of 600 ms took %lld ms", (long long)took_ms(&r));
    fg_response_fini(&r);
    stop_server(s);
}
END_TEST

START_TEST(test_fault_override_p_zero_is_no_fault)
{
    fg_server *s = start_instant();
    fg_response r;
    confirm_with(s, "pk_fo_p0", "order_fo_p0", 3000, NULL,
                 "X-Fakegate-Fault: drop_response; how=reset; p=0", 0, &r);
    assert_done(&r, "pk_fo_p0", "order_fo_p0");
    fg_response_fini(&r);
    json_t *e = journal_confirm(s, "order_fo_p0");
    const char *f = fg_json_str(json_object_get(e, "decision"), "fault");
    ck_assert_msg(f != NULL && strcmp(f, "none") == 0, "decision.fault \"%s\"", f ? f : "(null)");
    json_decref(e);
    stop_server(s);
}
END_TEST

/* The header is one request's profile: `times` counts within it, so times=1 fires (once) and
 * times=0 never does. */
START_TEST(test_fault_override_times_is_the_requests_own_budget)
{
    fg_server *s = start_instant();
    fg_response r;
    confirm_with(s, "pk_fo_t1", "order_fo_t1", 3000, NULL,
                 "X-Fakegate-Fault: error; status=500; code=FAILED_INTERNAL_SYSTEM_PROCESSING; "
                 "commit=false; times=1", 0, &r);
    assert_error(&r, 500, "FAILED_INTERNAL_SYSTEM_PROCESSING");
    fg_response_fini(&r);
    ck_assert_int_eq(ledger_charges(s, "order_fo_t1"), 0);
    confirm_with(s, "pk_fo_t0", "order_fo_t0", 3000, NULL,
                 "X-Fakegate-Fault: error; status=500; code=FAILED_INTERNAL_SYSTEM_PROCESSING; "
                 "commit=false; times=0", 0, &r);
    assert_done(&r, "pk_fo_t0", "order_fo_t0");
    fg_response_fini(&r);
    stop_server(s);
}
END_TEST

/* The override replaces the profile's faults for its own request only. */
START_TEST(test_fault_override_wins_for_one_request)
{
    fg_server *s = start_confirm("{'faults':[{'kind':'error','p':1,'status':500,"
                                 "'code':'FAILED_INTERNAL_SYSTEM_PROCESSING','commit':false}]}");
    fg_response r;
    confirm_with(s, "pk_win_1", "order_win_1", 1000, "key-win-1",
                 "X-Fakegate-Fault: drip; duration_ms=1", 0, &r);
    assert_done(&r, "pk_win_1", "order_win_1");
    fg_response_fini(&r);
    ck_assert_int_eq(ledger_charges(s, "order_win_1"), 1);

    confirm_with(s, "pk_win_2", "order_win_2", 1000, "key-win-2", NULL, 0, &r);
    assert_error(&r, 500, "FAILED_INTERNAL_SYSTEM_PROCESSING");
    fg_response_fini(&r);
    ck_assert_int_eq(ledger_charges(s, "order_win_2"), 0);
    stop_server(s);
}
END_TEST

START_TEST(test_fault_override_malformed)
{
    static const struct {
        const char *header;
        const char *needles[4];
    } cases[] = {
        {"drop_response; how=sideways", {"X-Fakegate-Fault", "how", NULL}},
        {"how=close", {"X-Fakegate-Fault", "kind", NULL}},
        {"how=sideways", {"X-Fakegate-Fault", "kind", NULL}},
        {"frobnicate", {"X-Fakegate-Fault", "kind", NULL}},
        {"error; code=PROVIDER_ERROR; status=abc", {"X-Fakegate-Fault", "status", NULL}},
        {"drop_response; how=close; how=reset", {"X-Fakegate-Fault", "how", "twice"}},
        {"drop_response; how=close; p=2", {"X-Fakegate-Fault", "p", NULL}},
        {"drop_response; =x", {"X-Fakegate-Fault", NULL}},
    };
    fg_server *s = start_instant();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char hdr[256], oid[64];
        snprintf(hdr, sizeof hdr, "X-Fakegate-Fault: %s", cases[i].header);
        snprintf(oid, sizeof oid, "order_badf_%zu", i);
        fg_response r;
        confirm_with(s, "pk_badf", oid, 1000, NULL, hdr, 0, &r);
        assert_invalid_naming(&r, hdr, cases[i].needles);
        fg_response_fini(&r);
    }
    /* "error; status=abc" has two problems (status is not a number, code is missing): the
     * message names one of them. */
    fg_response r;
    confirm_with(s, "pk_badf", "order_badf_x", 1000, NULL, "X-Fakegate-Fault: error; status=abc",
                 0, &r);
    static const char *const fault_only[] = {"X-Fakegate-Fault", NULL};
    assert_invalid_naming(&r, "error; status=abc", fault_only);
    const char *msg = fg_json_str(r.json, "message");
    ck_assert_msg(strstr(msg, "status") != NULL || strstr(msg, "code") != NULL,
                  "\"error; status=abc\": message \"%s\" names neither status nor code", msg);
    fg_response_fini(&r);
    ck_assert_uint_eq(ledger_size(s), 0);
    stop_server(s);
}
END_TEST

/* A message about the header speaks of the header: no position inside the JSON the server
 * built from it internally ("h:1:83:"), no empty field path (": missing"). */
START_TEST(test_fault_override_messages_name_no_internal_json)
{
    static const char *const headers[] = {
        "drop_response; frob=1",
        "error; code=PROVIDER_ERROR; when=before; commit=true",
        "error; status=abc",
    };
    fg_server *s = start_instant();
    char bad[2048] = "";
    for (size_t i = 0; i < sizeof headers / sizeof headers[0]; i++) {
        char hdr[256];
        snprintf(hdr, sizeof hdr, "X-Fakegate-Fault: %s", headers[i]);
        fg_response r;
        confirm_with(s, "pk_msgf", "order_msgf", 1000, NULL, hdr, 0, &r);
        static const char *const needles[] = {"X-Fakegate-Fault: ", NULL};
        assert_invalid_naming(&r, hdr, needles);
        const char *msg = fg_json_str(r.json, "message");
        if (strstr(msg, "h:1:") != NULL || strstr(msg, ": :") != NULL) {
            size_t used = strlen(bad);
            snprintf(bad + used, sizeof bad - used, "\n  [%s] -> \"%s\"", headers[i], msg);
        }
        fg_response_fini(&r);
    }
    ck_assert_msg(bad[0] == '\0',
                  "messages show the internal JSON's position or an empty field path:%s", bad);
    stop_server(s);
}
END_TEST

/* ---- X-Fakegate-Profile ------------------------------------------------------------------- */

START_TEST(test_profile_override_slow_then_fast)
{
    fg_server *s = start_args(NULL, PROFILES_DIR_ARGS);
    fg_response r;
    confirm_with(s, "pk_slow_1", "order_slow_1", 1000, "key-slow-1", "X-Fakegate-Profile: slow",
                 0, &r);
    assert_done(&r, "pk_slow_1", "order_slow_1");
    ck_assert_msg(took_ms(&r) >= 1400, "confirm under X-Fakegate-Profile: slow took %lld ms",
                  (long long)took_ms(&r));
    fg_response_fini(&r);
    json_t *e = journal_confirm(s, "order_slow_1");
    ck_assert_msg(decision_num(e, "queue_latency_ms") >= 1500.0 &&
                      decision_num(e, "queue_latency_ms") <= 3000.0,
                  "decision.queue_latency_ms %g (slow: 1500-3000)",
                  decision_num(e, "queue_latency_ms"));
    json_decref(e);

    confirm_with(s, "pk_slow_2", "order_slow_2", 1000, "key-slow-2", NULL, 0, &r);
    assert_done(&r, "pk_slow_2", "order_slow_2");
    ck_assert_msg(took_ms(&r) < 500, "the next confirm without the header took %lld ms",
                  (long long)took_ms(&r));
    fg_response_fini(&r);

    /* The active profile is unchanged. */
    fg_get(s, "/__admin/profile", &r);
    assert_status(&r, 200);
    const char *name = fg_json_str(r.json, "name");
    ck_assert_msg(name != NULL && strcmp(name, "instant") == 0, "active profile: %.300s", r.body);
    fg_response_fini(&r);
    stop_server(s);
}
END_TEST

START_TEST(test_profile_override_invalid_names)
{
    fg_server *s = start_args(NULL, PROFILES_DIR_ARGS);
    static const char *const bad[] = {"../etc", "no-such-profile-here", "Slow"};
    static const char *const needles[] = {"X-Fakegate-Profile", NULL};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char hdr[128], oid[64];
        snprintf(hdr, sizeof hdr, "X-Fakegate-Profile: %s", bad[i]);
        snprintf(oid, sizeof oid, "order_badp_%zu", i);
        fg_response r;
        confirm_with(s, "pk_badp", oid, 1000, NULL, hdr, 0, &r);
        assert_invalid_naming(&r, hdr, needles);
        fg_response_fini(&r);
    }
    ck_assert_uint_eq(ledger_size(s), 0);
    stop_server(s);
}
END_TEST

/* An override header sent twice: which one was meant is a guess, so neither wins (as two
 * Idempotency-Key headers are refused). */
START_TEST(test_override_header_sent_twice_is_refused)
{
    fg_server *s = start_args(NULL, PROFILES_DIR_ARGS);
    static const char *const twice[][2] = {
        {"X-Fakegate-Profile: slow", "X-Fakegate-Profile: normal"}, /* both valid names */
        {"X-Fakegate-Fault: drop_request", "X-Fakegate-Fault: drip; duration_ms=10"},
        {"X-Fakegate-Latency-Ms: 1", "X-Fakegate-Latency-Ms: 2"},
    };
    for (size_t i = 0; i < sizeof twice / sizeof twice[0]; i++) {
        const char *headers[] = {s->auth_header, "Content-Type: application/json", twice[i][0],
                                 twice[i][1], NULL};
        char body[128];
        snprintf(body, sizeof body,
                 "{\"paymentKey\":\"pk_twice_%zu\",\"orderId\":\"order_twice_%zu\",\"amount\":1}",
                 i, i);
        fg_request req = {.method = "POST", .path = CONFIRM_PATH, .body = body, .headers = headers};
        fg_response r;
        fg_http(s, NULL, &req, &r);
        assert_error(&r, 400, "INVALID_REQUEST");
        char name[32];
        snprintf(name, sizeof name, "%.*s", (int)strcspn(twice[i][0], ":"), twice[i][0]);
        ck_assert_msg(strstr(fg_json_str(r.json, "message"), name) != NULL, "%s", r.body);
        fg_response_fini(&r);
    }
    ck_assert_uint_eq(ledger_size(s), 0);
    stop_server(s);
}
END_TEST

/* A profile named by X-Fakegate-Profile keeps its state (token bucket, `times` budgets)
 * between requests, and POST /__admin/reset starts it afresh, as it does the active one
 * (docs/admin.md §5: reset refills token buckets and resets `times` budgets). */
START_TEST(test_reset_refills_a_profile_named_by_the_header)
{
    char dir[] = "/tmp/fg-named-XXXXXX";
    ck_assert(mkdtemp(dir) != NULL);
    char path[64];
    snprintf(path, sizeof path, "%s/tb.json", dir);
    FILE *f = fopen(path, "w");
    ck_assert(f != NULL);
    /* A burst of 2 and a token every 100 s: nothing refills during the test. */
    fputs("{\"name\":\"tb\",\"routes\":{\"confirm\":{\"throttle\":{\"kind\":\"token_bucket\","
          "\"rate_per_s\":0.01,\"burst\":2}}}}",
          f);
    ck_assert_int_eq(fclose(f), 0);
    const char *args[] = {"--profiles-dir", dir, NULL};
    fg_server *s = start_args(NULL, args);
    long want[] = {200, 200, 503, -1, 200, 200, 503};
    for (int i = 0; i < 7; i++) {
        fg_response r;
        if (want[i] < 0) { /* the reset */
            fg_request req = {.method = "POST", .path = "/__admin/reset"};
            fg_http(s, NULL, &req, &r);
            assert_status(&r, 200);
            fg_response_fini(&r);
            continue;
        }
        char pk[32], oid[32];
        snprintf(pk, sizeof pk, "pk_tb_%d", i);
        snprintf(oid, sizeof oid, "order_tb_%d", i);
        confirm_with(s, pk, oid, 1000, NULL, "X-Fakegate-Profile: tb", 0, &r);
        ck_assert_msg(r.status == want[i], "confirm %d under tb: want %ld, got %ld %.200s", i,
                      want[i], r.status, r.body);
        fg_response_fini(&r);
    }
    stop_server(s);
    unlink(path);
    rmdir(dir);
}
END_TEST

/* ---- SIGHUP ------------------------------------------------------------------------------- */

/* Replace the server's profile file atomically (temp file in the same dir + rename). */
static void rewrite_profile(const fg_server *s, const char *json)
{
    char tmp[FG_PATH_LEN + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", s->profile_path);
    FILE *f = fopen(tmp, "w");
    ck_assert_msg(f != NULL, "fopen %s", tmp);
    ck_assert_int_eq(fputs(json, f) >= 0, 1);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_msg(rename(tmp, s->profile_path) == 0, "rename to %s", s->profile_path);
}

/* Poll GET /__admin/profile until its name is `name`, at most timeout_ms. */
static bool wait_profile_name(const fg_server *s, const char *name, int timeout_ms)
{
    int64_t deadline = fg_now_ms() + timeout_ms;
    for (;;) {
        fg_response r;
        fg_get(s, "/__admin/profile", &r);
        const char *n = r.status == 200 ? fg_json_str(r.json, "name") : NULL;
        bool ok = n != NULL && strcmp(n, name) == 0;
        fg_response_fini(&r);
        if (ok)
            return true;
        if (fg_now_ms() > deadline)
            return false;
        fg_pause_ms(10);
    }
}

/* Poll the child's stderr until it holds `needle`; returns the whole text (caller frees) or
 * NULL after timeout_ms. */
static char *wait_stderr(const fg_server *s, const char *needle, int timeout_ms)
{
    int64_t deadline = fg_now_ms() + timeout_ms;
    for (;;) {
        char *e = fg_server_stderr(s);
        if (strstr(e, needle) != NULL)
            return e;
        free(e);
        if (fg_now_ms() > deadline)
            return NULL;
        fg_pause_ms(10);
    }
}

START_TEST(test_sighup_reloads_and_keeps_on_invalid)
{
    char *fast = dq("{'name':'hup-fast','routes':{'confirm':{'latency':{'dist':'fixed','ms':0}},"
                    "'default':{'latency':{'dist':'fixed','ms':0}}}}");
    fg_server *s = start_with_profile(fast);
    free(fast);
    ck_assert_msg(s->profile_path[0] != '\0', "no profile file");
    ck_assert(wait_profile_name(s, "hup-fast", 0));

    fg_response r;
    confirm_with(s, "pk_hup_1", "order_hup_1", 1000, NULL, NULL, 0, &r);
    assert_done(&r, "pk_hup_1", "order_hup_1");
    ck_assert_msg(took_ms(&r) < 400, "confirm before the reload took %lld ms",
                  (long long)took_ms(&r));
    fg_response_fini(&r);

    char *slow = dq("{'name':'hup-slow','routes':{'confirm':{'latency':{'dist':'fixed','ms':500}},"
                    "'default':{'latency':{'dist':'fixed','ms':0}}}}");
    rewrite_profile(s, slow);
    free(slow);
    ck_assert_int_eq(fg_kill(s, SIGHUP), 0);
    ck_assert_msg(wait_profile_name(s, "hup-slow", 5000),
                  "GET /__admin/profile never showed hup-slow after SIGHUP");
    confirm_with(s, "pk_hup_2", "order_hup_2", 1000, NULL, NULL, 0, &r);
    assert_done(&r, "pk_hup_2", "order_hup_2");
    ck_assert_msg(took_ms(&r) >= 450, "confirm after the reload took %lld ms",
                  (long long)took_ms(&r));
    fg_response_fini(&r);

    /* An invalid profile (line 3: a negative latency): rejected, logged with file:line:column,
     * the previous one stays. */
    rewrite_profile(s, "{\n  \"name\": \"hup-bad\",\n"
                       "  \"routes\": {\"confirm\": {\"latency\": {\"dist\": \"fixed\", \"ms\": -1}}}\n"
                       "}\n");
    ck_assert_int_eq(fg_kill(s, SIGHUP), 0);
    char *err = wait_stderr(s, "keeping", 5000);
    ck_assert_msg(err != NULL, "no \"keeping\" line on stderr after an invalid SIGHUP reload");
    char *line = strstr(err, "keeping");
    while (line > err && line[-1] != '\n')
        line--;
    char *eol = strchr(line, '\n');
    if (eol != NULL)
        *eol = '\0';
    char want[FG_PATH_LEN + 8];
    snprintf(want, sizeof want, "%s:3:", s->profile_path);
    char *at = strstr(line, want);
    ck_assert_msg(at != NULL, "the line \"%s\" does not name %s", line, want);
    at += strlen(want);
    ck_assert_msg(at[0] >= '1' && at[0] <= '9', "no column after %s in \"%s\"", want, line);
    free(err);

    ck_assert_msg(wait_profile_name(s, "hup-slow", 0), "the previous profile is not in force");
    confirm_with(s, "pk_hup_3", "order_hup_3", 1000, NULL, NULL, 0, &r);
    assert_done(&r, "pk_hup_3", "order_hup_3");
    ck_assert_msg(took_ms(&r) >= 450, "confirm after the rejected reload took %lld ms",
                  (long long)took_ms(&r));
    fg_response_fini(&r);
    ck_assert_int_eq(fg_wait(s, 0), -2); /* still running */
    stop_server(s);
}
END_TEST

/* Write `json` to dir/name atomically (temp file + rename). */
static void write_profile_in(const char *dir, const char *name, const char *json)
{
    char tmp[FG_PATH_LEN], path[FG_PATH_LEN];
    snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, name);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(tmp, "w");
    ck_assert_msg(f != NULL, "fopen %s", tmp);
    ck_assert_int_eq(fputs(json, f) >= 0, 1);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_msg(rename(tmp, path) == 0, "rename to %s", path);
}

/* docs/cli.md §1: SIGHUP reloads the file of the profile in force: after PUT {"name": ...} that
 * profile's file, not the start one; a profile PUT inline has no file and stays. */
START_TEST(test_sighup_reloads_the_file_of_the_profile_in_force)
{
    char dir[] = "/tmp/fg-hup-XXXXXX";
    ck_assert(mkdtemp(dir) != NULL);
    write_profile_in(dir, "hup-b.json", "{\"name\":\"hup-b\",\"routes\":{}}");
    const char *args[] = {"--profiles-dir", dir, NULL};
    char *start = dq("{'name':'hup-a','routes':{}}");
    fg_server *s = start_args(start, args);
    free(start);
    ck_assert(wait_profile_name(s, "hup-a", 0));
    fg_response r;
    fg_request put = {.method = "PUT", .path = "/__admin/profile", .body = "{\"name\":\"hup-b\"}"};
    fg_http(s, NULL, &put, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    ck_assert(wait_profile_name(s, "hup-b", 0));

    write_profile_in(dir, "hup-b.json", "{\"name\":\"hup-b-edited\",\"routes\":{}}");
    ck_assert_int_eq(fg_kill(s, SIGHUP), 0);
    ck_assert_msg(wait_profile_name(s, "hup-b-edited", 5000),
                  "SIGHUP after PUT {\"name\":\"hup-b\"} did not reload hup-b.json");

    fg_request inl = {.method = "PUT", .path = "/__admin/profile",
                      .body = "{\"name\":\"hup-inline\",\"routes\":{}}"};
    fg_http(s, NULL, &inl, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    ck_assert_int_eq(fg_kill(s, SIGHUP), 0);
    char *err = wait_stderr(s, "no file to reload", 5000);
    ck_assert_msg(err != NULL, "no \"no file to reload\" line after SIGHUP with an inline profile");
    free(err);
    ck_assert_msg(wait_profile_name(s, "hup-inline", 0), "the inline profile is not in force");
    stop_server(s);
    char path[FG_PATH_LEN];
    snprintf(path, sizeof path, "%s/hup-b.json", dir);
    unlink(path);
    rmdir(dir);
}
END_TEST

/* ---- access log --------------------------------------------------------------------------- */

/* The access-log lines of `text`: every non-empty line that is not a "fakegate: " note. Each
 * entry is a malloc'd copy without its '\n'; *n lines; also the longest line's length with its
 * '\n'. Caller frees with free_lines. */
static char **access_lines(const char *text, size_t *n, size_t *longest)
{
    size_t cap = 16, k = 0;
    char **v = malloc(cap * sizeof *v);
    ck_assert(v != NULL);
    *longest = 0;
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl != NULL ? (size_t)(nl - p) : strlen(p);
        if (len + 1 > *longest)
            *longest = len + 1;
        if (len > 0 && strncmp(p, "fakegate: ", 10) != 0) {
            if (k == cap) {
                cap *= 2;
                v = realloc(v, cap * sizeof *v);
                ck_assert(v != NULL);
            }
            v[k++] = strndup(p, len);
        }
        p += len + (nl != NULL ? 1 : 0);
    }
    *n = k;
    return v;
}

static void free_lines(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static fg_server *start_logging(bool json)
{
    const char *args[] = {"--log", json ? "json" : "text", NULL};
    fg_opts o = {.access_log = true, .args = args};
    return start_server(&o);
}

/* On one keep-alive connection: a confirm, two reads, and the admin/health/metrics calls that
 * must not be logged. */
static void log_traffic(const fg_server *s)
{
    CURL *h = curl_easy_init();
    ck_assert(h != NULL);
    fg_response r;
    const char *hk[] = {s->auth_header, "Idempotency-Key: key-log-1", NULL};
    fg_request c = {.method = "POST", .path = CONFIRM_PATH, .headers = hk,
                    .body = "{\"paymentKey\":\"pk_log_1\",\"orderId\":\"order_log_1\",\"amount\":1200}"};
    fg_http(s, h, &c, &r);
    assert_done(&r, "pk_log_1", "order_log_1");
    fg_response_fini(&r);
    const char *ha[] = {s->auth_header, NULL};
    fg_request g1 = {.path = "/v1/payments/orders/order_log_1", .headers = ha};
    fg_http(s, h, &g1, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    fg_request g2 = {.path = "/v1/payments/pk_log_1", .headers = ha};
    fg_http(s, h, &g2, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    static const char *const quiet_paths[] = {"/healthz", "/__admin/health", "/__admin/profile",
                                              "/__admin/requests", "/__admin/payments", "/metrics"};
    for (size_t i = 0; i < sizeof quiet_paths / sizeof quiet_paths[0]; i++) {
        fg_request q = {.path = quiet_paths[i]};
        fg_http(s, h, &q, &r);
        assert_status(&r, 200);
        fg_response_fini(&r);
    }
    curl_easy_cleanup(h);
}

static void assert_contains(const char *line, const char *needle)
{
    ck_assert_msg(strstr(line, needle) != NULL, "log line lacks \"%s\":\n%.600s", needle, line);
}

/* Stop the server and return its access-log lines. */
static char **stopped_log(fg_server *s, size_t *n, size_t *longest, char **text)
{
    assert_clean_stop(s);
    *text = fg_server_stderr(s);
    return access_lines(*text, n, longest);
}

START_TEST(test_access_log_text)
{
    fg_server *s = start_logging(false);
    log_traffic(s);
    size_t n, longest;
    char *text;
    char **v = stopped_log(s, &n, &longest, &text);
    ck_assert_msg(n == 3, "want 3 access-log lines (confirm, 2 reads), got %zu:\n%s", n, text);
    assert_contains(v[0], " POST /v1/payments/confirm ");
    assert_contains(v[0], " route=confirm ");
    assert_contains(v[0], " order_id=order_log_1 ");
    assert_contains(v[0], " idempotency_key=key-log-1 ");
    assert_contains(v[0], " status=200 ");
    assert_contains(v[0], " outcome=ok ");
    assert_contains(v[0], " delivered=yes ");
    assert_contains(v[0], " duration_ms=");
    ck_assert_msg(v[0][0] >= '0' && v[0][0] <= '9', "no time first: %s", v[0]);
    assert_contains(v[1], " GET /v1/payments/orders/order_log_1 ");
    assert_contains(v[1], " route=read ");
    assert_contains(v[1], " order_id=order_log_1 ");
    assert_contains(v[1], " idempotency_key=");
    assert_contains(v[1], " status=200 ");
    assert_contains(v[1], " outcome=ok ");
    assert_contains(v[2], " GET /v1/payments/pk_log_1 ");
    assert_contains(v[2], " route=read ");
    assert_contains(v[2], " status=200 ");
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(strstr(v[i], "/__admin") == NULL && strstr(v[i], "/healthz") == NULL &&
                          strstr(v[i], "/metrics") == NULL,
                      "admin/health/metrics call logged: %s", v[i]);
    free_lines(v, n);
    free(text);
    fg_free(s);
}
END_TEST

START_TEST(test_access_log_json)
{
    fg_server *s = start_logging(true);
    log_traffic(s);
    size_t n, longest;
    char *text;
    char **v = stopped_log(s, &n, &longest, &text);
    ck_assert_msg(n == 3, "want 3 access-log lines, got %zu:\n%s", n, text);
    static const char *const want_path[] = {"/v1/payments/confirm",
                                            "/v1/payments/orders/order_log_1",
                                            "/v1/payments/pk_log_1"};
    for (size_t i = 0; i < n; i++) {
        json_error_t je;
        json_t *o = json_loads(v[i], 0, &je);
        ck_assert_msg(json_is_object(o), "line %zu is not a JSON object (%s): %s", i, je.text,
                      v[i]);
        json_str(o, "time");
        ck_assert_str_eq(json_str(o, "method"), i == 0 ? "POST" : "GET");
        ck_assert_str_eq(json_str(o, "path"), want_path[i]);
        ck_assert_str_eq(json_str(o, "route"), i == 0 ? "confirm" : "read");
        ck_assert_msg(json_object_get(o, "order_id") != NULL, "no order_id: %s", v[i]);
        ck_assert_msg(json_object_get(o, "idempotency_key") != NULL, "no idempotency_key: %s", v[i]);
        ck_assert_msg(json_integer_value(json_object_get(o, "status")) == 200, "status: %s", v[i]);
        ck_assert_str_eq(json_str(o, "outcome"), "ok");
        ck_assert_str_eq(json_str(o, "delivered"), "yes");
        ck_assert_msg(json_is_number(json_object_get(o, "duration_ms")) &&
                          json_number_value(json_object_get(o, "duration_ms")) >= 0,
                      "duration_ms: %s", v[i]);
        ck_assert_msg(json_is_object(json_object_get(o, "decision")), "decision: %s", v[i]);
        if (i < 2)
            ck_assert_str_eq(json_str(o, "order_id"), "order_log_1");
        if (i == 0)
            ck_assert_str_eq(json_str(o, "idempotency_key"), "key-log-1");
        json_decref(o);
    }
    free_lines(v, n);
    free(text);
    fg_free(s);
}
END_TEST

START_TEST(test_quiet_has_no_access_log)
{
    fg_server *s = start_instant(); /* the harness passes --quiet */
    log_traffic(s);
    size_t n, longest;
    char *text;
    char **v = stopped_log(s, &n, &longest, &text);
    ck_assert_msg(n == 0 && strstr(text, "route=") == NULL && strstr(text, "/v1/") == NULL,
                  "--quiet, yet stderr holds:\n%s", text);
    free_lines(v, n);
    free(text);
    fg_free(s);
}
END_TEST

/* A raw GET of `path` (bytes as given) on its own connection, closed by the server. */
static void raw_get(const fg_server *s, const char *path, size_t path_len, const char *extra)
{
    size_t cap = path_len + 1024 + (extra != NULL ? strlen(extra) : 0);
    char *req = malloc(cap);
    ck_assert(req != NULL);
    int k = snprintf(req, cap, "GET ");
    memcpy(req + k, path, path_len);
    size_t len = (size_t)k + path_len;
    len += (size_t)snprintf(req + len, cap - len,
                            " HTTP/1.1\r\nHost: 127.0.0.1\r\n%s\r\n%s%sConnection: close\r\n\r\n",
                            s->auth_header, extra != NULL ? extra : "", extra != NULL ? "\r\n" : "");
    fg_raw_response rr;
    char err[FG_ERR_LEN];
    ck_assert_msg(fg_raw(s, req, len, 5000, &rr, err) == 0, "raw: %s", err);
    ck_assert_msg(rr.status >= 200 && rr.closed, "raw GET: status %d closed %d: %.200s",
                  rr.status, (int)rr.closed, rr.data);
    fg_raw_response_fini(&rr);
    free(req);
}

static const char ffpath[] = "/v1/payments/ab\xff" "cd";
static const char utf8path[] = "/v1/payments/caf\xc3\xa9";
static const char badutf8path[] = "/v1/payments/x\xc3\x28y";

static void bytes_traffic(const fg_server *s)
{
    raw_get(s, ffpath, strlen(ffpath), NULL);
    raw_get(s, utf8path, strlen(utf8path), NULL);
    raw_get(s, badutf8path, strlen(badutf8path), NULL);
}

/* Text log: \xNN with one backslash, lower-case hex; valid UTF-8 as is. */
START_TEST(test_access_log_text_escapes_non_utf8)
{
    fg_server *s = start_logging(false);
    bytes_traffic(s);
    /* The journal shows the same escaping (a JSON string whose value is the 4 characters). */
    fg_response r;
    fg_get(s, "/__admin/requests", &r);
    assert_status(&r, 200);
    json_t *reqs = json_object_get(r.json, "requests");
    ck_assert_uint_eq(json_array_size(reqs), 3);
    ck_assert_str_eq(json_str(json_array_get(reqs, 0), "path"), "/v1/payments/ab\\xffcd");
    ck_assert_str_eq(json_str(json_array_get(reqs, 1), "path"), "/v1/payments/caf\xc3\xa9");
    ck_assert_str_eq(json_str(json_array_get(reqs, 2), "path"), "/v1/payments/x\\xc3(y");
    fg_response_fini(&r);

    size_t n, longest;
    char *text;
    char **v = stopped_log(s, &n, &longest, &text);
    ck_assert_msg(n == 3, "want 3 access-log lines, got %zu:\n%s", n, text);
    ck_assert_msg(strstr(v[0], "\\xFF") == NULL, "upper-case hex: %s", v[0]);
    ck_assert_msg(strstr(v[0], " /v1/payments/ab\\xffcd ") != NULL,
                  "the 0xff byte is not logged as \\xff: %s", v[0]);
    ck_assert_msg(strstr(v[1], " /v1/payments/caf\xc3\xa9 ") != NULL,
                  "valid UTF-8 not kept as is: %s", v[1]);
    ck_assert_msg(strstr(v[2], " /v1/payments/x\\xc3(y ") != NULL,
                  "0xc3 0x28 not logged as \\xc3(: %s", v[2]);
    free_lines(v, n);
    free(text);
    fg_free(s);
}
END_TEST

START_TEST(test_access_log_json_escapes_non_utf8)
{
    fg_server *s = start_logging(true);
    bytes_traffic(s);
    size_t n, longest;
    char *text;
    char **v = stopped_log(s, &n, &longest, &text);
    ck_assert_msg(n == 3, "want 3 access-log lines, got %zu:\n%s", n, text);
    static const char *const want[] = {"/v1/payments/ab\\xffcd", "/v1/payments/caf\xc3\xa9",
                                       "/v1/payments/x\\xc3(y"};
    for (size_t i = 0; i < n; i++) {
        json_error_t je;
        json_t *o = json_loads(v[i], 0, &je);
        ck_assert_msg(json_is_object(o), "line %zu is not JSON (%s): %s", i, je.text, v[i]);
        ck_assert_str_eq(json_str(o, "path"), want[i]);
        json_decref(o);
    }
    ck_assert_msg(strstr(v[1], "caf\xc3\xa9") != NULL, "é not written as UTF-8: %s", v[1]);
    free_lines(v, n);
    free(text);
    fg_free(s);
}
END_TEST

/* Long lines: a path of 2000 bytes 0xff (each escaped to 4+ characters) and an 7800-byte
 * Idempotency-Key (header block under 8 KiB): every line at most 8 KiB, one line per request. */
static void long_traffic(const fg_server *s)
{
    char path[2100];
    strcpy(path, "/v1/payments/");
    size_t k = strlen(path);
    memset(path + k, 0xff, 2000);
    path[k + 2000] = '\0';
    raw_get(s, path, strlen(path), NULL);

    char *key_line = malloc(8000);
    ck_assert(key_line != NULL);
    strcpy(key_line, "Idempotency-Key: ");
    size_t kl = strlen(key_line);
    memset(key_line + kl, 'k', 7800);
    key_line[kl + 7800] = '\0';
    const char *h[] = {s->auth_header, key_line, NULL};
    fg_request c = {.method = "POST", .path = CONFIRM_PATH, .headers = h, .forbid_reuse = true,
                    .body = "{\"paymentKey\":\"pk_long_1\",\"orderId\":\"order_long_1\",\"amount\":100}"};
    fg_response r;
    fg_http(s, NULL, &c, &r);
    assert_error(&r, 400, "INVALID_IDEMPOTENCY_KEY");
    fg_response_fini(&r);
    free(key_line);
}

START_TEST(test_access_log_text_line_at_most_8k)
{
    fg_server *s = start_logging(false);
    long_traffic(s);
    size_t n, longest;
    char *text;
    char **v = stopped_log(s, &n, &longest, &text);
    ck_assert_msg(n == 2, "want 2 access-log lines, got %zu", n);
    ck_assert_msg(longest <= LOG_LINE_MAX, "a log line of %zu bytes (with its newline)", longest);
    assert_contains(v[0], " GET /v1/payments/");
    /* The path as logged: escapes of whole bytes only, never a torn "\\xf" (a marker of the
     * cut, if any, is dots). */
    const char *p0 = strstr(v[0], " GET /v1/payments/") + strlen(" GET /v1/payments/");
    const char *p1 = strstr(p0, " route=");
    ck_assert_msg(p1 != NULL, "no route= after the path: %.300s", v[0]);
    while (p1 > p0 && p1[-1] == '.')
        p1--;
    ck_assert_msg(p1 - p0 >= 4 && (p1 - p0) % 4 == 0, "path field of %td bytes: %.300s", p1 - p0,
                  v[0]);
    for (const char *q = p0; q < p1; q += 4)
        ck_assert_msg(memcmp(q, "\\xff", 4) == 0, "not \\xff at offset %td: %.300s", q - p0,
                      v[0]);
    assert_contains(v[1], " POST /v1/payments/confirm ");
    assert_contains(v[1], " idempotency_key=kkkkkkkk");
    free_lines(v, n);
    free(text);
    fg_free(s);
}
END_TEST

START_TEST(test_access_log_json_long_line_is_json)
{
    fg_server *s = start_logging(true);
    long_traffic(s);
    size_t n, longest;
    char *text;
    char **v = stopped_log(s, &n, &longest, &text);
    ck_assert_msg(n == 2, "want 2 access-log lines, got %zu", n);
    ck_assert_msg(longest <= LOG_LINE_MAX, "a log line of %zu bytes (with its newline)", longest);
    for (size_t i = 0; i < n; i++) {
        json_error_t je;
        json_t *o = json_loads(v[i], 0, &je);
        ck_assert_msg(json_is_object(o), "line %zu (%zu bytes) is not JSON (%s): ...%s", i,
                      strlen(v[i]), je.text, v[i] + (strlen(v[i]) > 200 ? strlen(v[i]) - 200 : 0));
        ck_assert_msg(json_object_get(o, "status") != NULL, "no status in line %zu", i);
        json_decref(o);
    }
    free_lines(v, n);
    free(text);
    fg_free(s);
}
END_TEST

/* ---- suite -------------------------------------------------------------------------------- */

Suite *make_suite(void)
{
    Suite *su = suite_create("blackbox_overrides");

    TCase *tc = add_tcase(su, "latency", 30);
    tcase_add_test(tc, test_latency_override_delays_and_reads_in_progress);
    tcase_add_test(tc, test_latency_override_removes_queue_latency);
    tcase_add_test(tc, test_latency_override_invalid_values);

    tc = add_tcase(su, "fault", 30);
    tcase_add_test(tc, test_fault_override_drop_response_reset);
    tcase_add_test(tc, test_fault_override_drop_request_close);
    tcase_add_test(tc, test_fault_override_drop_request_hang);
    tcase_add_test(tc, test_fault_override_error_commit);
    tcase_add_test(tc, test_fault_override_error_with_retry_after_seconds);
    tcase_add_test(tc, test_fault_override_error_uncommit_after_business_error_keeps_no_record);
    tcase_add_test(tc, test_fault_override_error_before_is_immediate);
    tcase_add_test(tc, test_fault_override_drip);
    tcase_add_test(tc, test_fault_override_p_zero_is_no_fault);
    tcase_add_test(tc, test_fault_override_wins_for_one_request);
    tcase_add_test(tc, test_fault_override_times_is_the_requests_own_budget);
    tcase_add_test(tc, test_fault_override_malformed);
    tcase_add_test(tc, test_fault_override_messages_name_no_internal_json);

    tc = add_tcase(su, "profile", 30);
    tcase_add_test(tc, test_profile_override_slow_then_fast);
    tcase_add_test(tc, test_profile_override_invalid_names);
    tcase_add_test(tc, test_override_header_sent_twice_is_refused);
    tcase_add_test(tc, test_reset_refills_a_profile_named_by_the_header);

    tc = add_tcase(su, "sighup", 30);
    tcase_add_test(tc, test_sighup_reloads_and_keeps_on_invalid);
    tcase_add_test(tc, test_sighup_reloads_the_file_of_the_profile_in_force);

    tc = add_tcase(su, "access_log", 30);
    tcase_add_test(tc, test_access_log_text);
    tcase_add_test(tc, test_access_log_json);
    tcase_add_test(tc, test_quiet_has_no_access_log);
    tcase_add_test(tc, test_access_log_text_escapes_non_utf8);
    tcase_add_test(tc, test_access_log_json_escapes_non_utf8);
    tcase_add_test(tc, test_access_log_text_line_at_most_8k);
    tcase_add_test(tc, test_access_log_json_long_line_is_json);
    return su;
}
