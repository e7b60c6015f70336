/* check_admin_report.c -- black-box tests of GET /__admin/report, the retry-behaviour report
 * (docs/admin.md §5 Admin API): one deliberately bad client per finding kind (retried_4xx,
 * early_retry, new_key_resend, key_reuse, synchronized_retries, retry_storm), the edge cases the
 * report must get right (answers the client never got, a Test-Code decline, commits rather than
 * answers, paymentKey identity, an HTTP-date Retry-After), and a well-behaved client that gets no
 * finding. Each test starts its own server on port 0. The only deliberate waits are where time is
 * the behaviour under test (a client waiting its Retry-After, an early retry, backoff). */
#define _GNU_SOURCE

#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check_main.h"
#include "retry.h"
#include "testkit.h"

/* GET /__admin/report; a new reference to its "findings" array. */
static json_t *findings(const fg_server *s)
{
    json_t *root = admin_json(s, "/__admin/report");
    json_t *f = json_object_get(root, "findings");
    ck_assert_msg(json_is_array(f), "/__admin/report has no findings array");
    json_incref(f);
    json_decref(root);
    return f;
}


/* The report has exactly the kinds in `kinds` (NULL-ended); the finding `kind` has count >= 1,
 * a rule and a threshold, and one of `examples` (NULL-ended) among its examples. */
static void assert_report(const fg_server *s, const char *const *kinds, const char *kind,
                          const char *const *examples)
{
    wait_journal_settled(s);
    json_t *f = findings(s);
    char *ftext = json_dumps(f, JSON_COMPACT);
    char *jtext = journal_text(s);
    size_t n_kinds = 0;
    while (kinds[n_kinds] != NULL)
        n_kinds++;
    bool ok = json_array_size(f) == n_kinds;
    for (size_t k = 0; k < n_kinds && ok; k++) {
        bool found = false;
        size_t i;
        json_t *x;
        json_array_foreach(f, i, x) found = found || json_is_str(x, "kind", kinds[k]);
        ok = found;
    }
    ck_assert_msg(ok, "report: want kinds {%s%s%s%s%s}, got %s\njournal: %.6000s", kinds[0],
                  n_kinds > 1 ? ", " : "", n_kinds > 1 ? kinds[1] : "", n_kinds > 2 ? ", " : "",
                  n_kinds > 2 ? kinds[2] : "", ftext, jtext);
    size_t i;
    json_t *x, *fd = NULL;
    json_array_foreach(f, i, x) if (json_is_str(x, "kind", kind)) fd = x;
    ck_assert(fd != NULL);
    ck_assert_msg(json_integer_value(json_object_get(fd, "count")) >= 1, "%s", ftext);
    ck_assert_msg(fg_json_str(fd, "rule") != NULL && fg_json_str(fd, "rule")[0] != '\0' &&
                      json_object_get(fd, "threshold") != NULL,
                  "finding without rule/threshold: %s", ftext);
    json_t *ex = json_object_get(fd, "examples");
    ck_assert_msg(json_is_array(ex) && json_array_size(ex) >= 1 && json_array_size(ex) <= 10,
                  "%s", ftext);
    bool hit = false;
    for (size_t k = 0; examples[k] != NULL; k++) {
        json_t *v;
        size_t a;
        json_array_foreach(ex, a, v) hit = hit || strcmp(json_string_value(v), examples[k]) == 0;
    }
    ck_assert_msg(hit, "%s: examples lack %s: %s\njournal: %.6000s", kind, examples[0], ftext,
                  jtext);
    free(ftext);
    free(jtext);
    json_decref(f);
}

static void assert_no_findings(const fg_server *s)
{
    wait_journal_settled(s);
    json_t *f = findings(s);
    char *ftext = json_dumps(f, JSON_COMPACT);
    char *jtext = journal_text(s);
    ck_assert_msg(json_array_size(f) == 0, "well-behaved client got findings %s\njournal: %.8000s",
                  ftext, jtext);
    free(ftext);
    free(jtext);
    json_decref(f);
}

START_TEST(test_report_retried_4xx)
{
    fg_server *s = start_admin_confirm("{'latency':{'dist':'fixed','ms':0}}");
    fg_response r;
    confirm_fresh(s, "pk_r4", "ord_r4_aaa", 1000, NULL, 0, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    for (int i = 0; i < 2; i++) { /* the same body again, and again after its 400 */
        confirm_fresh(s, "pk_r4", "ord_r4_aaa", 1000, NULL, 0, &r);
        assert_error(&r, 400, "ALREADY_PROCESSED_PAYMENT");
        fg_response_fini(&r);
    }
    /* A corrected body after a 400 is not a retry. */
    const char *h[] = {s->auth_header, "Idempotency-Key: key-r4-fix", NULL};
    fg_request bad = {.method = "POST", .path = CONFIRM_PATH, .headers = h,
                      .body = "{\"paymentKey\":\"pk_r4_fix\",\"orderId\":\"ord_r4_fix\",\"amount\":\"x\"}"};
    fg_http(s, NULL, &bad, &r);
    assert_error(&r, 400, "INVALID_REQUEST");
    fg_response_fini(&r);
    confirm_fresh(s, "pk_r4_fix", "ord_r4_fix", 1000, "key-r4-fix", 0, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);

    /* Keyless confirms of a DONE payment are also new-key resends (a missing key differs from
     * every key, including another missing one). */
    const char *kinds[] = {"retried_4xx", "new_key_resend", NULL};
    const char *ex[] = {"ord_r4_aaa", NULL};
    assert_report(s, kinds, "retried_4xx", ex);
    stop_server(s);
}
END_TEST

START_TEST(test_report_retried_4xx_keyed)
{
    /* The same with an Idempotency-Key: a second key for a DONE payment gets a stored 400, and
     * the client resends it as is (also a new-key resend of a committed payment). */
    fg_server *s = start_admin_confirm("{'latency':{'dist':'fixed','ms':0}}");
    fg_response r;
    confirm_fresh(s, "pk_r4k", "ord_r4_kkk", 1000, "key-r4k-1", 0, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    for (int i = 0; i < 2; i++) {
        confirm_fresh(s, "pk_r4k", "ord_r4_kkk", 1000, "key-r4k-2", 0, &r);
        assert_error(&r, 400, "ALREADY_PROCESSED_PAYMENT");
        fg_response_fini(&r);
    }
    const char *kinds[] = {"retried_4xx", "new_key_resend", NULL};
    const char *ex[] = {"ord_r4_kkk", NULL};
    assert_report(s, kinds, "retried_4xx", ex);
    stop_server(s);
}
END_TEST

/* The count of finding `kind` now (0: none). */
static long long finding_count(const fg_server *s, const char *kind)
{
    wait_journal_settled(s);
    json_t *f = findings(s);
    long long n = 0;
    size_t i;
    json_t *x;
    json_array_foreach(f, i, x) if (json_is_str(x, "kind", kind)) n = json_int(x, "count");
    json_decref(f);
    return n;
}

/* An identity unused for --idempotency-ttl is forgotten (docs/admin.md §5 GET /__admin/report):
 * the same 4xx request sent after the clock moved one TTL on is a first arrival, not a
 * retried_4xx, while the orderId's history still flags its second key (new_key_resend). */
START_TEST(test_report_forgets_an_identity_unused_for_the_ttl)
{
    static const char *const args[] = {"--idempotency-ttl", "60", NULL};
    fg_server *s = start_q_args("{'name': 'instant', 'routes': {'default': {'latency': "
                                "{'dist': 'fixed', 'ms': 0}}}}", args);
    fg_response r;
    confirm_fresh(s, "pk_ttl_r", "ord_ttl_r", 1000, "key-ttl-a", 0, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    wait_journal_settled(s);
    confirm_fresh(s, "pk_ttl_r", "ord_ttl_r", 1000, "key-ttl-b", 0, &r);
    assert_error(&r, 400, "ALREADY_PROCESSED_PAYMENT");
    fg_response_fini(&r);
    ck_assert_int_eq(finding_count(s, "new_key_resend"), 1);
    admin_call(s, "POST", "/__admin/clock", "{\"advance_s\": 60}", NULL, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    /* key-ttl-b's record and identity are gone: run again, judged as a first arrival. */
    confirm_fresh(s, "pk_ttl_r", "ord_ttl_r", 1000, "key-ttl-b", 0, &r);
    assert_error(&r, 400, "ALREADY_PROCESSED_PAYMENT");
    fg_response_fini(&r);
    ck_assert_int_eq(finding_count(s, "retried_4xx"), 0);
    ck_assert_int_eq(finding_count(s, "new_key_resend"), 2);
    /* Inside the TTL the same resend is a retry again. */
    confirm_fresh(s, "pk_ttl_r", "ord_ttl_r", 1000, "key-ttl-b", 0, &r);
    assert_error(&r, 400, "ALREADY_PROCESSED_PAYMENT");
    fg_response_fini(&r);
    ck_assert_int_eq(finding_count(s, "retried_4xx"), 1);
    ck_assert_int_eq(finding_count(s, "new_key_resend"), 3);
    stop_server(s);
}
END_TEST

START_TEST(test_report_early_retry)
{
    /* Brief's shape: a bucket of 1 token refilled at 1/s, Retry-After: 1; the throttled confirm
     * is resent 200 ms later with the same key (and is throttled again: fakegate never read its
     * body, so the example may be the identity, its Idempotency-Key). */
    fg_server *s = start_admin_confirm(
        "{'throttle':{'kind':'token_bucket','rate_per_s':1,'burst':1,"
        "'retry_after':{'format':'seconds','value':1}}}");
    fg_response r;
    confirm_fresh(s, "pk_er_a", "ord_er_a", 1000, "key-er-a", 0, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    confirm_fresh(s, "pk_er_b", "ord_er_b", 1000, "key-er-b", 0, &r);
    assert_error(&r, 503, "SERVICE_UNAVAILABLE");
    ck_assert_str_eq(r.retry_after, "1");
    fg_response_fini(&r);
    fg_pause_ms(200); /* deliberate: the early retry is the behaviour under test */
    confirm_fresh(s, "pk_er_b", "ord_er_b", 1000, "key-er-b", 0, &r);
    ck_assert_msg(r.status == 503, "the early retry was admitted: %ld", r.status);
    fg_response_fini(&r);
    const char *kinds[] = {"early_retry", NULL};
    const char *ex[] = {"ord_er_b", "key-er-b", NULL};
    assert_report(s, kinds, "early_retry", ex);
    stop_server(s);

    /* A bucket that refills in 250 ms but announces 1 s: the early retry is admitted, so its
     * orderId is known and must be the example. */
    s = start_admin_confirm("{'throttle':{'kind':'token_bucket','rate_per_s':4,'burst':1,"
                      "'retry_after':{'format':'seconds','value':1}}}");
    confirm_fresh(s, "pk_er_c", "ord_er_c", 1000, "key-er-c", 0, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    confirm_fresh(s, "pk_er_d", "ord_er_d", 1000, "key-er-d", 0, &r);
    assert_error(&r, 503, "SERVICE_UNAVAILABLE");
    fg_response_fini(&r);
    fg_pause_ms(300); /* deliberate: a token is back, the announced second is not over */
    confirm_fresh(s, "pk_er_d", "ord_er_d", 1000, "key-er-d", 0, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    const char *ex2[] = {"ord_er_d", NULL};
    assert_report(s, kinds, "early_retry", ex2);
    stop_server(s);
}
END_TEST

START_TEST(test_report_new_key_resend)
{
    fg_server *s = start_admin_confirm(
        "{'faults':[{'kind':'drop_response','p':1,'times':1,'how':'close'}]}");
    fg_response r;
    confirm_fresh(s, "pk_nk", "ord_nk_lost", 1000, "key-nk-1", 0, &r);
    ck_assert_msg(r.curl_code == CURLE_GOT_NOTHING, "curl %d status %ld", (int)r.curl_code,
                  r.status);
    fg_response_fini(&r);
    confirm_fresh(s, "pk_nk", "ord_nk_lost", 1000, "key-nk-2", 0, &r); /* the double-charge risk */
    assert_error(&r, 400, "ALREADY_PROCESSED_PAYMENT");
    fg_response_fini(&r);
    const char *kinds[] = {"new_key_resend", NULL};
    const char *ex[] = {"ord_nk_lost", NULL};
    assert_report(s, kinds, "new_key_resend", ex);
    stop_server(s);
}
END_TEST

START_TEST(test_report_key_reuse)
{
    fg_server *s = start_admin_confirm("{'latency':{'dist':'fixed','ms':0}}");
    fg_response r;
    confirm_fresh(s, "pk_ku_1", "ord_ku_one", 1000, "key-ku-shared", 0, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    confirm_fresh(s, "pk_ku_2", "ord_ku_two", 2000, "key-ku-shared", 0, &r);
    assert_status(&r, 200); /* replayed, as Toss does */
    ck_assert_str_eq(fg_json_str(r.json, "orderId"), "ord_ku_one");
    fg_response_fini(&r);
    const char *kinds[] = {"key_reuse", NULL};
    const char *ex[] = {"ord_ku_two", "ord_ku_one", NULL};
    assert_report(s, kinds, "key_reuse", ex);
    ck_assert(metric1(s, "fakegate_idempotency_key_reuse_total", NULL, NULL) == 1);
    stop_server(s);
}
END_TEST

START_TEST(test_report_synchronized_retries)
{
    fg_server *s = start_admin_confirm(
        "{'throttle':{'kind':'window','period_s':2.5,'throttled_s':1.5}}");
    enum { N = 20 };
    fg_response r;
    admin_call(s, "POST", "/__admin/reset", NULL, NULL, &r); /* the window starts now */
    assert_status(&r, 200);
    fg_response_fini(&r);
    struct mrun m;
    mrun_init(&m, s, N);
    for (size_t i = 0; i < N; i++) {
        char pk[32], oid[32], key[32];
        snprintf(pk, sizeof pk, "pk_sy_%02zu", i);
        snprintf(oid, sizeof oid, "ord_sy_%02zu", i);
        snprintf(key, sizeof key, "key-sy-%02zu", i);
        mrun_confirm(&m, i, pk, oid, 1000, key, 10000);
    }
    mrun_perform(&m);
    int64_t last_ns = 0;
    long ra = 0;
    for (size_t i = 0; i < N; i++) {
        ck_assert_msg(m.q[i].status == 503, "%s: %ld %s", m.q[i].oid, m.q[i].status,
                      m.q[i].errbuf);
        ck_assert_msg(m.q[i].retry_after[0] != '\0', "%s: no Retry-After", m.q[i].oid);
        long v = strtol(m.q[i].retry_after, NULL, 10);
        ra = v > ra ? v : ra;
        last_ns = m.q[i].done_ns > last_ns ? m.q[i].done_ns : last_ns;
    }
    ck_assert_msg(ra >= 1 && ra <= 2, "Retry-After %ld", ra);
    /* Deliberate: the client waits exactly what it was told, then everybody resends at once. */
    int64_t wake = last_ns + ra * 1000 * MS + 5 * MS;
    while (fg_now_ns() < wake)
        fg_pause_ms(1);
    struct mrun m2;
    mrun_init(&m2, s, N);
    for (size_t i = 0; i < N; i++)
        mrun_confirm(&m2, i, m.q[i].pk, m.q[i].oid, 1000, m.q[i].key, 10000);
    mrun_perform(&m2);
    for (size_t i = 0; i < N; i++)
        ck_assert_msg(m2.q[i].status == 200, "%s resent when told: %ld %.200s", m2.q[i].oid,
                      m2.q[i].status, m2.q[i].out ? m2.q[i].out : "");
    /* The journal shows the resends bunched (print the spread for information). */
    json_t *j = journal(s, 0);
    double lo = 1e300, hi = 0;
    size_t i;
    json_t *e;
    json_array_foreach(j, i, e) {
        if (json_integer_value(json_object_get(e, "status")) != 200)
            continue;
        const char *at = fg_json_str(e, "arrived_at");
        double sec = atof(at + 17); /* seconds with the fraction; same minute in practice */
        lo = sec < lo ? sec : lo;
        hi = sec > hi ? sec : hi;
    }
    printf("check_admin_report: %d resends arrived within %.3f ms\n", N, (hi - lo) * 1000);
    json_decref(j);
    const char *kinds[] = {"synchronized_retries", NULL};
    const char *ex[N + 1];
    for (size_t k = 0; k < N; k++)
        ex[k] = m.q[k].oid;
    ex[N] = NULL;
    assert_report(s, kinds, "synchronized_retries", ex);
    mrun_free(&m);
    mrun_free(&m2);
    stop_server(s);
}
END_TEST

START_TEST(test_report_retry_storm)
{
    fg_server *s = start_admin_confirm("{'faults':[{'kind':'error','p':1,'status':503,"
                                 "'code':'SERVICE_UNAVAILABLE','when':'before'}]}");
    fg_response r;
    for (int i = 0; i < 5; i++) {
        confirm_fresh(s, "pk_st", "ord_storm", 1000, "key-storm", 0, &r);
        assert_error(&r, 503, "SERVICE_UNAVAILABLE");
        fg_response_fini(&r);
    }
    const char *kinds[] = {"retry_storm", NULL};
    const char *ex[] = {"ord_storm", NULL};
    assert_report(s, kinds, "retry_storm", ex);
    stop_server(s);
}
END_TEST

/* A client that does everything right: one key per payment, resends under the same key,
 * waits the Retry-After plus jitter with exponential backoff, never resends a 4xx. */
struct good_client {
    const fg_server *s;
    int index;
    pthread_t t;
    int attempts;
    long final_status;
    char oid[32];
};

static void *good_client_main(void *arg)
{
    struct good_client *c = arg;
    char pk[32], key[48];
    snprintf(pk, sizeof pk, "pk_good_%d", c->index);
    snprintf(c->oid, sizeof c->oid, "ord_good_%d", c->index);
    snprintf(key, sizeof key, "key-good-%d-%08x", c->index, (unsigned)c->index * 2654435761u);
    unsigned seed = (unsigned)c->index * 7919u + 17u;
    long backoff_ms = 100;
    for (c->attempts = 1; c->attempts <= 6; c->attempts++) {
        fg_response r;
        confirm_fresh(c->s, pk, c->oid, 1000 + c->index, key, 0, &r);
        long status = r.curl_code == CURLE_OK ? r.status : 0;
        long ra = r.retry_after[0] != '\0' ? strtol(r.retry_after, NULL, 10) : 0;
        fg_response_fini(&r);
        c->final_status = status;
        if (status != 0 && status < 500 && status != 429)
            break; /* done, or a 4xx: never resend it */
        /* Deliberate: backoff is the behaviour. Jitter spreads the clients by >= 100 ms. */
        long wait = backoff_ms > ra * 1000 ? backoff_ms : ra * 1000;
        wait += 60 + 110L * c->index + (long)(rand_r(&seed) % 40);
        fg_pause_ms(wait);
        backoff_ms *= 2;
    }
    return NULL;
}

/* Only an answer the client got can be resent "after": a client that timed out never saw the
 * 503 or its Retry-After, so its resend under the same key is not an early retry. */
START_TEST(test_report_ignores_answers_the_client_never_got)
{
    fg_server *s = start_admin_confirm("{'latency':{'dist':'fixed','ms':0}}");
    fg_response r;
    confirm_with(s, "pk_ud", "ord_ud", 1000, "key-ud",
                 "X-Fakegate-Fault: error; status=503; code=SERVICE_UNAVAILABLE; retry_after=5; "
                 "commit=false\r\nX-Fakegate-Latency-Ms: 600",
                 200, &r);
    ck_assert_msg(r.status == 0, "the client should have timed out, got %ld", r.status);
    fg_response_fini(&r);
    ck_assert_double_eq(wait_metric(s, "fakegate_in_flight", "route", "confirm", 0, 5000), 0);
    confirm_fresh(s, "pk_ud", "ord_ud", 1000, "key-ud", 0, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    assert_no_findings(s);
    stop_server(s);
}
END_TEST

/* A decline forced with TossPayments-Test-Code (the usual way a test makes a card decline) is
 * answered before the request is planned; sending the same request again after it is still a
 * retried 4xx. */
START_TEST(test_report_retried_4xx_after_a_test_code_decline)
{
    fg_server *s = start_admin_confirm("{'latency':{'dist':'fixed','ms':0}}");
    for (int i = 0; i < 2; i++) {
        fg_response r;
        confirm_with(s, "pk_tc", "ord_tc", 1000, "key-tc", "TossPayments-Test-Code: REJECT_CARD_PAYMENT",
                     0, &r);
        assert_error(&r, 403, "REJECT_CARD_PAYMENT");
        fg_response_fini(&r);
    }
    const char *kinds[] = {"retried_4xx", NULL};
    const char *ex[] = {"ord_tc", NULL};
    assert_report(s, kinds, "retried_4xx", ex);
    stop_server(s);
}
END_TEST

/* new_key_resend looks at what committed, not at the answer: an error fault with commit true
 * hides a commit (flagged when a new key follows), and the replay of a stored 4xx is no commit
 * (not flagged: the old key can only replay the 400, so a new key is the way on). */
START_TEST(test_report_new_key_resend_follows_commits_not_answers)
{
    fg_server *s = start_admin_confirm("{'latency':{'dist':'fixed','ms':0}}");
    fg_response r;
    confirm_with(s, "pk_ct", "ord_ct", 1000, "key-ct-1",
                 "X-Fakegate-Fault: error; status=500; code=FAILED_INTERNAL_SYSTEM_PROCESSING; "
                 "commit=true",
                 0, &r);
    assert_error(&r, 500, "FAILED_INTERNAL_SYSTEM_PROCESSING");
    fg_response_fini(&r);
    confirm_fresh(s, "pk_ct", "ord_ct", 1000, "key-ct-2", 0, &r);
    assert_error(&r, 400, "ALREADY_PROCESSED_PAYMENT");
    fg_response_fini(&r);
    const char *kinds[] = {"new_key_resend", NULL};
    const char *ex[] = {"ord_ct", NULL};
    assert_report(s, kinds, "new_key_resend", ex);

    reset_now(s);
    /* A wrong amount for a registered session: 400, stored; its replay; then the fix under a
     * new key. */
    fg_request reg = {.method = "POST", .path = "/__admin/sessions",
                      .body = "{\"orderId\":\"ord_rp\",\"amount\":1000,\"paymentKey\":\"pk_rp\"}"};
    fg_http(s, NULL, &reg, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    for (int i = 0; i < 2; i++) {
        confirm_fresh(s, "pk_rp", "ord_rp", 999, "key-rp-1", 0, &r);
        assert_error(&r, 400, "INVALID_REQUEST");
        fg_response_fini(&r);
    }
    confirm_fresh(s, "pk_rp", "ord_rp", 1000, "key-rp-2", 0, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    const char *kinds2[] = {"retried_4xx", NULL}; /* the same 400 resent: that, and only that */
    const char *ex2[] = {"ord_rp", NULL};
    assert_report(s, kinds2, "retried_4xx", ex2);
    stop_server(s);
}
END_TEST

/* docs/admin.md §5: a missing key differs from every key, including another missing one: a
 * keyless confirm after a keyless one that answered 500 but committed is the double-charge
 * risk. */
START_TEST(test_report_new_key_resend_without_any_key_after_a_committed_500)
{
    fg_server *s = start_admin_confirm("{'latency':{'dist':'fixed','ms':0}}");
    fg_response r;
    confirm_with(s, "pk_nk0", "ord_nk0", 1000, NULL,
                 "X-Fakegate-Fault: error; status=500; code=FAILED_INTERNAL_SYSTEM_PROCESSING; "
                 "commit=true",
                 0, &r);
    assert_error(&r, 500, "FAILED_INTERNAL_SYSTEM_PROCESSING");
    fg_response_fini(&r);
    confirm_fresh(s, "pk_nk0", "ord_nk0", 1000, NULL, 0, &r);
    assert_error(&r, 400, "ALREADY_PROCESSED_PAYMENT");
    fg_response_fini(&r);
    const char *kinds[] = {"new_key_resend", NULL};
    const char *ex[] = {"ord_nk0", NULL};
    assert_report(s, kinds, "new_key_resend", ex);
    stop_server(s);
}
END_TEST

/* docs/admin.md §5: "the same orderId/paymentKey": a committed paymentKey confirmed again under a
 * new key with another orderId is the same double-charge risk. */
START_TEST(test_report_new_key_resend_by_payment_key)
{
    fg_server *s = start_admin_confirm("{'latency':{'dist':'fixed','ms':0}}");
    fg_response r;
    confirm_fresh(s, "pk_sk", "ord_sk_1", 1000, "key-sk-1", 0, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    confirm_fresh(s, "pk_sk", "ord_sk_2", 1000, "key-sk-2", 0, &r);
    ck_assert_int_eq(r.status, 400);
    fg_response_fini(&r);
    const char *kinds[] = {"new_key_resend", NULL};
    const char *ex[] = {"ord_sk_2", NULL};
    assert_report(s, kinds, "new_key_resend", ex);
    stop_server(s);
}
END_TEST

/* A Retry-After given as an HTTP-date counts as much as one in seconds. */
START_TEST(test_report_early_retry_with_an_http_date)
{
    fg_server *s = start_admin_confirm("{'latency':{'dist':'fixed','ms':0}}");
    fg_response r;
    confirm_with(s, "pk_hd", "ord_hd", 1000, "key-hd",
                 "X-Fakegate-Fault: error; status=429; code=COMMON_ERROR; retry_after=http-date; "
                 "when=before",
                 0, &r);
    ck_assert_int_eq(r.status, 429);
    ck_assert_msg(strstr(r.retry_after, " GMT") != NULL, "Retry-After \"%s\"", r.retry_after);
    fg_response_fini(&r);
    confirm_fresh(s, "pk_hd", "ord_hd", 1000, "key-hd", 0, &r); /* at once: before that date */
    assert_status(&r, 200);
    fg_response_fini(&r);
    const char *kinds[] = {"early_retry", NULL};
    const char *ex[] = {"ord_hd", NULL};
    assert_report(s, kinds, "early_retry", ex);
    stop_server(s);
}
END_TEST

/* A client that waits until the HTTP-date it was given is admitted and is no early_retry: the
 * date is the first whole second at or after now + the seconds, never the current second rounded
 * down plus them (which could name an instant up to 1 s too early). */
START_TEST(test_report_client_obeying_an_http_date_is_not_early)
{
    fg_server *s = start_admin_confirm(
        "{'latency':{'dist':'fixed','ms':0},'faults':[{'kind':'error','p':1,'attempts':[1],"
        "'status':503,'code':'SERVICE_UNAVAILABLE','when':'before',"
        "'retry_after':{'format':'http-date','value':1}}]}");
    for (int i = 0; i < 2; i++) {
        char pk[32], oid[32], key[32];
        snprintf(pk, sizeof pk, "pk_hdok_%d", i);
        snprintf(oid, sizeof oid, "ord_hdok_%d", i);
        snprintf(key, sizeof key, "key-hdok-%d", i);
        fg_response r;
        struct timespec before;
        clock_gettime(CLOCK_REALTIME, &before);
        confirm_with(s, pk, oid, 1000, key, NULL, 0, &r);
        ck_assert_int_eq(r.status, 503);
        time_t date;
        ck_assert_msg(rc_parse_http_date(r.retry_after, &date) == 0, "Retry-After \"%s\"",
                      r.retry_after);
        /* never earlier than 1 s after the request was sent */
        double ahead = (double)date - ((double)before.tv_sec + (double)before.tv_nsec / 1e9);
        ck_assert_msg(ahead >= 1.0 && ahead < 2.5, "the date is %.3f s after sending", ahead);
        fg_response_fini(&r);
        for (;;) { /* the client under test obeys the date, to the wall clock's second */
            struct timespec now;
            clock_gettime(CLOCK_REALTIME, &now);
            if (now.tv_sec >= date)
                break;
            struct timespec nap = {0, 20 * 1000 * 1000};
            nanosleep(&nap, NULL);
        }
        confirm_fresh(s, pk, oid, 1000, key, 0, &r);
        assert_status(&r, 200);
        fg_response_fini(&r);
    }
    assert_no_findings(s);
    stop_server(s);
}
END_TEST

START_TEST(test_report_well_behaved_client_has_no_findings)
{
    /* Every first attempt gets 503 with Retry-After: 1. */
    fg_server *s = start_admin_confirm(
        "{'latency':{'dist':'fixed','ms':20},'faults':[{'kind':'error','p':1,'attempts':[1],"
        "'status':503,'code':'SERVICE_UNAVAILABLE','when':'before',"
        "'retry_after':{'format':'seconds','value':1}}]}");
    enum { N = 4 };
    struct good_client c[N];
    for (int i = 0; i < N; i++) {
        c[i] = (struct good_client){.s = s, .index = i};
        ck_assert_int_eq(pthread_create(&c[i].t, NULL, good_client_main, &c[i]), 0);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(c[i].t, NULL);
        ck_assert_msg(c[i].final_status == 200 && c[i].attempts == 2,
                      "%s: status %ld after %d attempts", c[i].oid, c[i].final_status,
                      c[i].attempts);
    }
    /* A lost answer, resent under the same key after a backoff: the replay is the 200. */
    char *lossy = dq("{'name':'lossy1','routes':{'confirm':{'faults':[{'kind':'drop_response',"
                     "'p':1,'times':1,'how':'close'}]},'default':{'latency':{'dist':'fixed','ms':0}}}}");
    fg_response r;
    put_profile(s, lossy, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    free(lossy);
    confirm_fresh(s, "pk_good_lost", "ord_good_lost", 5000, "key-good-lost", 0, &r);
    ck_assert_int_eq(r.curl_code, CURLE_GOT_NOTHING);
    fg_response_fini(&r);
    fg_pause_ms(150); /* deliberate: backoff */
    confirm_fresh(s, "pk_good_lost", "ord_good_lost", 5000, "key-good-lost", 0, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    /* A 4xx is not resent as is: the client fixes the body and sends it under the same key. */
    const char *h[] = {s->auth_header, "Idempotency-Key: key-good-fix", NULL};
    fg_request bad = {.method = "POST", .path = CONFIRM_PATH, .headers = h,
                      .body = "{\"paymentKey\":\"pk_good_fix\",\"orderId\":\"bad\",\"amount\":700}"};
    fg_http(s, NULL, &bad, &r);
    assert_error(&r, 400, "INVALID_ORDER_ID");
    fg_response_fini(&r);
    confirm_fresh(s, "pk_good_fix", "ord_good_fix", 700, "key-good-fix", 0, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    assert_no_findings(s);
    stop_server(s);
}
END_TEST

Suite *make_suite(void)
{
    Suite *su = suite_create("blackbox_admin_report");

    TCase *tc = add_tcase(su, "report", 30);
    tcase_add_test(tc, test_report_retried_4xx);
    tcase_add_test(tc, test_report_retried_4xx_keyed);
    tcase_add_test(tc, test_report_forgets_an_identity_unused_for_the_ttl);
    tcase_add_test(tc, test_report_early_retry);
    tcase_add_test(tc, test_report_new_key_resend);
    tcase_add_test(tc, test_report_key_reuse);
    tcase_add_test(tc, test_report_retry_storm);
    tcase_add_test(tc, test_report_well_behaved_client_has_no_findings);
    tcase_add_test(tc, test_report_ignores_answers_the_client_never_got);
    tcase_add_test(tc, test_report_retried_4xx_after_a_test_code_decline);
    tcase_add_test(tc, test_report_new_key_resend_follows_commits_not_answers);
    tcase_add_test(tc, test_report_early_retry_with_an_http_date);
    tcase_add_test(tc, test_report_client_obeying_an_http_date_is_not_early);
    tcase_add_test(tc, test_report_new_key_resend_by_payment_key);
    tcase_add_test(tc, test_report_new_key_resend_without_any_key_after_a_committed_500);
    /* Bounds on wall-clock time: not under make memcheck (testkit.h). */
    tc = add_timing_tcase(su, "report_timing", 30);
    tcase_add_test(tc, test_report_synchronized_retries);
    return su;
}
