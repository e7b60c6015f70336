/* check_admin_verdict.c -- black-box tests of what makes a CI verdict trustworthy
 * (docs/admin.md §5): the report judges every request since the last reset, not only the
 * journal's ring, and says when its bound (--report-max-identities) left it incomplete; the
 * journal's filters and total, its trace_id and spent latency; route `other` for a request
 * that matches no route; the seed in force in /healthz and GET /__admin/profile. Each test
 * starts its own server on port 0; the waits poll a condition with a deadline. */
#define _GNU_SOURCE

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "testkit.h"

/* GET /__admin/report once `judged_requests` reaches `want` (polled, at most 10 s: a request's
 * end is recorded just after its answer leaves). New reference to the whole answer. */
static json_t *report_after(const fg_server *s, long long want)
{
    int64_t deadline = fg_now_ms() + 10000;
    for (;;) {
        json_t *root = admin_json(s, "/__admin/report");
        long long judged = json_int(root, "judged_requests");
        if (judged >= want || fg_now_ms() > deadline) {
            ck_assert_msg(judged == want, "judged_requests %lld, want %lld", judged, want);
            return root;
        }
        json_decref(root);
        fg_pause_ms(5);
    }
}

/* The finding of `kind` in a report answer (borrowed), or NULL. */
static json_t *finding(const json_t *report, const char *kind)
{
    size_t i;
    json_t *x;
    json_array_foreach(json_object_get(report, "findings"), i, x) if (json_is_str(x, "kind", kind))
        return x;
    return NULL;
}

/* A keep-alive GET of `path` with the server's auth on handle h; require `status`. */
static void get_on(const fg_server *s, CURL *h, const char *path, long status)
{
    const char *hd[] = {s->auth_header, NULL};
    fg_request q = {.method = "GET", .path = path, .headers = hd};
    fg_response r;
    fg_http(s, h, &q, &r);
    assert_status(&r, status);
    fg_response_fini(&r);
}

/* The answer of GET path (no auth): its status into *status, and its parsed JSON (new
 * reference). */
static json_t *get_json(const fg_server *s, const char *path, long *status)
{
    fg_response r;
    ck_assert_int_eq(admin_call(s, "GET", path, NULL, NULL, &r), 0);
    *status = r.status;
    json_t *j = json_incref(r.json);
    ck_assert_msg(j != NULL, "%s: not JSON: %s", path, r.body);
    fg_response_fini(&r);
    return j;
}

/* ---- the report over the whole run ------------------------------------------------------- */

START_TEST(test_report_keeps_a_key_reuse_after_20000_reads)
{
    fg_server *s = start_admin_confirm("{'latency':{'dist':'fixed','ms':0}}");
    fg_response r;
    confirm_fresh(s, "pk_ku_a", "ord_ku_a", 1000, "key-ku", 0, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    confirm_fresh(s, "pk_ku_b", "ord_ku_b", 2000, "key-ku", 0, &r); /* the key, another body */
    assert_status(&r, 200);
    fg_response_fini(&r);
    CURL *h = curl_easy_init();
    for (int i = 0; i < 20000; i++)
        get_on(s, h, "/v1/payments/orders/ord_ku_a", 200);
    curl_easy_cleanup(h);

    json_t *rep = report_after(s, 20002);
    char *text = json_dumps(rep, JSON_COMPACT);
    const json_t *f = finding(rep, "key_reuse");
    ck_assert_msg(f != NULL && json_int(f, "count") == 1, "key_reuse lost: %s", text);
    ck_assert_msg(json_array_size(json_object_get(rep, "findings")) == 1,
                  "20000 reads are not retries: %s", text);
    ck_assert_msg(json_is_true(json_object_get(rep, "complete")), "%s", text);
    ck_assert_msg(json_object_get(rep, "reason") == NULL, "%s", text);
    ck_assert_msg(matches("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\+09:00$",
                          json_str(rep, "since")),
                  "since: %s", text);
    /* The ring no longer holds the confirms: the report did not need them. */
    json_t *j = admin_json(s, "/__admin/requests?route=confirm");
    ck_assert_int_eq(json_int(j, "total"), 0);
    json_decref(j);
    free(text);
    json_decref(rep);

    /* A reset starts a new run: nothing judged, no findings, a later `since`. */
    reset_now(s);
    rep = admin_json(s, "/__admin/report");
    ck_assert_int_eq(json_int(rep, "judged_requests"), 0);
    ck_assert_int_eq((int)json_array_size(json_object_get(rep, "findings")), 0);
    ck_assert(json_is_true(json_object_get(rep, "complete")));
    json_decref(rep);
    stop_server(s);
}
END_TEST

START_TEST(test_report_past_its_identity_bound_says_incomplete)
{
    const char *args[] = {"--report-max-identities", "4", NULL};
    fg_server *s = start_args(NULL, args);
    fg_response r;
    /* Each keyed confirm is 3 identities (its key, its orderId, its paymentKey). */
    for (int i = 0; i < 3; i++) {
        char pk[16], oid[16], key[16];
        snprintf(pk, sizeof pk, "pk_b%d", i);
        snprintf(oid, sizeof oid, "ord_bound%d", i);
        snprintf(key, sizeof key, "key-b%d", i);
        confirm_fresh(s, pk, oid, 1000, key, 0, &r);
        assert_status(&r, 200);
        fg_response_fini(&r);
    }
    json_t *rep = report_after(s, 3);
    char *text = json_dumps(rep, JSON_COMPACT);
    ck_assert_msg(json_is_false(json_object_get(rep, "complete")), "%s", text);
    ck_assert_msg(json_object_get(rep, "reason") != NULL &&
                      strstr(json_str(rep, "reason"), "--report-max-identities") != NULL,
                  "%s", text);
    free(text);
    json_decref(rep);
    stop_server(s);

    /* Within the bound: complete. */
    s = start_args(NULL, args);
    confirm_fresh(s, "pk_b", "ord_bound", 1000, "key-b", 0, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    rep = report_after(s, 1);
    ck_assert(json_is_true(json_object_get(rep, "complete")));
    json_decref(rep);
    stop_server(s);
}
END_TEST

/* ---- the journal ------------------------------------------------------------------------- */

/* GET /__admin/requests?<query>: require 200; its total, and the ids of its entries. */
static long long filtered(const fg_server *s, const char *query, long long *ids, size_t max,
                          size_t *n)
{
    char path[256];
    snprintf(path, sizeof path, "/__admin/requests?%s", query);
    json_t *j = admin_json(s, path);
    json_t *a = json_object_get(j, "requests");
    ck_assert(json_is_array(a));
    *n = json_array_size(a);
    size_t i;
    json_t *e;
    json_array_foreach(a, i, e) if (i < max) ids[i] = json_int(e, "id");
    long long total = json_int(j, "total");
    json_decref(j);
    return total;
}

START_TEST(test_journal_filters_and_total)
{
    fg_server *s = start_admin_confirm("{'latency':{'dist':'fixed','ms':0}}");
    fg_response r;
    confirm_fresh(s, "pk_f1", "ord_f1", 1000, "key-f1", 0, &r); /* id 1: 200 */
    fg_response_fini(&r);
    confirm_fresh(s, "pk_f1", "ord_f1", 1000, "key-f1", 0, &r); /* id 2: replayed */
    fg_response_fini(&r);
    confirm_fresh(s, "pk_f2", "ord_f2", 1000, NULL, 0, &r);     /* id 3: 200 */
    fg_response_fini(&r);
    get_on(s, NULL, "/v1/payments/orders/ord_f1", 200);         /* id 4: read */
    get_on(s, NULL, "/v1/payments/orders/ord_none", 404);       /* id 5: read, 404 */
    json_decref(report_after(s, 5));                             /* all five ended */

    long long ids[16];
    size_t n;
    ck_assert_int_eq(filtered(s, "orderId=ord_f1", ids, 16, &n), 3);
    ck_assert_uint_eq(n, 3);
    ck_assert(ids[0] == 1 && ids[1] == 2 && ids[2] == 4);
    ck_assert_int_eq(filtered(s, "orderId=ord_f1&route=confirm", ids, 16, &n), 2);
    ck_assert_int_eq(filtered(s, "paymentKey=pk_f2", ids, 16, &n), 1);
    ck_assert(ids[0] == 3);
    ck_assert_int_eq(filtered(s, "idempotencyKey=key-f1", ids, 16, &n), 2);
    ck_assert_int_eq(filtered(s, "outcome=replayed", ids, 16, &n), 1);
    ck_assert(ids[0] == 2);
    ck_assert_int_eq(filtered(s, "status=404", ids, 16, &n), 1);
    ck_assert(ids[0] == 5);
    ck_assert_int_eq(filtered(s, "route=read&status=200", ids, 16, &n), 1);
    ck_assert_int_eq(filtered(s, "since_id=3", ids, 16, &n), 2);
    ck_assert(ids[0] == 4 && ids[1] == 5);
    /* limit keeps the newest matches; total counts them all. */
    ck_assert_int_eq(filtered(s, "route=confirm&limit=2", ids, 16, &n), 3);
    ck_assert_uint_eq(n, 2);
    ck_assert(ids[0] == 2 && ids[1] == 3);
    ck_assert_int_eq(filtered(s, "orderId=ord_nobody", ids, 16, &n), 0);
    ck_assert_uint_eq(n, 0);

    /* An invalid value, or a filter that does not exist, is a 400 naming it. */
    static const char *const bad[][2] = {
        {"route=confrim", "route"}, {"outcome=fine", "outcome"}, {"status=2xx", "status"},
        {"since_id=-1", "since_id"}, {"limit=0", "limit"}, {"order_id=ord_f1", "order_id"},
        {"orderId=", "orderId"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char path[128];
        snprintf(path, sizeof path, "/__admin/requests?%s", bad[i][0]);
        admin_call(s, "GET", path, NULL, NULL, &r);
        assert_error(&r, 400, "INVALID_REQUEST");
        const char *msg = fg_json_str(r.json, "message");
        ck_assert_msg(msg && strstr(msg, bad[i][1]), "%s: message %s", path, r.body);
        fg_response_fini(&r);
    }
    stop_server(s);
}
END_TEST

START_TEST(test_journal_trace_id_is_the_header_sent_and_latency_is_what_was_spent)
{
    fg_server *s = start_admin_confirm("{'latency':{'dist':'fixed','ms':60}}");
    fg_response first, replay;
    confirm_fresh(s, "pk_t", "ord_trace", 1000, "key-t", 0, &first);
    assert_status(&first, 200);
    confirm_fresh(s, "pk_t", "ord_trace", 1000, "key-t", 0, &replay);
    assert_status(&replay, 200);
    ck_assert_str_ne(first.trace_id, replay.trace_id);

    /* Wait until both entries ended (their end is recorded just after the answer leaves). */
    json_t *j = NULL;
    for (int64_t deadline = fg_now_ms() + 5000;;) {
        j = admin_json(s, "/__admin/requests?orderId=ord_trace&outcome=replayed");
        if (json_int(j, "total") == 1 || fg_now_ms() > deadline)
            break;
        json_decref(j);
        fg_pause_ms(5);
    }
    json_decref(j);
    j = journal(s, 0);
    ck_assert_uint_eq(json_array_size(j), 2);
    const json_t *a = json_array_get(j, 0), *b = json_array_get(j, 1);
    ck_assert_str_eq(json_str(a, "trace_id"), first.trace_id);
    ck_assert_str_eq(json_str(b, "trace_id"), replay.trace_id);
    /* The first spent its 60 ms; the replay spent nothing of the 60 ms it was planned. */
    ck_assert_double_eq_tol(jnum(a, "latency_ms"), 60, 1e-6);
    ck_assert_double_eq_tol(jnum(a, "planned_latency_ms"), 60, 1e-6);
    ck_assert_str_eq(json_str(b, "outcome"), "replayed");
    ck_assert_double_eq(jnum(b, "latency_ms"), 0);
    ck_assert_double_eq_tol(jnum(b, "planned_latency_ms"), 60, 1e-6);
    ck_assert_double_eq_tol(jnum(json_object_get(b, "decision"), "latency_ms"), 60, 1e-6);
    json_decref(j);
    fg_response_fini(&first);
    fg_response_fini(&replay);
    stop_server(s);
}
END_TEST

/* ---- route other ------------------------------------------------------------------------- */

START_TEST(test_a_request_to_no_route_is_counted_and_journaled_as_other)
{
    fg_server *s = start_admin_confirm("{'latency':{'dist':'fixed','ms':0}}");
    get_on(s, NULL, "/v1/payments/nope/more", 404);
    fg_response r;
    const char *hd[] = {s->auth_header, NULL};
    fg_request del = {.method = "DELETE", .path = CONFIRM_PATH, .headers = hd};
    fg_http(s, NULL, &del, &r); /* a known path, no such method: matches no route either */
    assert_status(&r, 405);
    fg_response_fini(&r);
    json_decref(report_after(s, 2)); /* both ended, so both are counted */
    struct prom p;
    metrics(s, &p, NULL);
    ck_assert_double_eq(
        prom_get(&p, "fakegate_requests_total", "route", "other", "outcome", "invalid", NULL), 2);
    ck_assert_double_eq(
        prom_get(&p, "fakegate_requests_total", "route", "confirm", "outcome", "invalid", NULL), 0);
    ck_assert(!isnan(
        prom_get(&p, "fakegate_requests_total", "route", "other", "outcome", "ok", NULL)));
    prom_free(&p);
    json_t *j = admin_json(s, "/__admin/requests?route=other");
    ck_assert_int_eq(json_int(j, "total"), 2);
    json_t *a = json_object_get(j, "requests");
    ck_assert_str_eq(json_str(json_array_get(a, 0), "path"), "/v1/payments/nope/more");
    ck_assert_str_eq(json_str(json_array_get(a, 0), "route"), "other");
    json_decref(j);
    j = admin_json(s, "/__admin/requests?route=confirm");
    ck_assert_int_eq(json_int(j, "total"), 0);
    json_decref(j);
    stop_server(s);
}
END_TEST

/* ---- the seed in force ------------------------------------------------------------------- */

static void assert_seed(const fg_server *s, unsigned long long want, int line)
{
    long st;
    json_t *h = get_json(s, "/healthz", &st);
    json_t *p = get_json(s, "/__admin/profile", &st);
    ck_assert_msg(json_is_integer(json_object_get(h, "seed")) &&
                      (unsigned long long)json_integer_value(json_object_get(h, "seed")) == want,
                  "line %d: /healthz seed, want %llu", line, want);
    ck_assert_msg(json_is_integer(json_object_get(p, "seed")) &&
                      (unsigned long long)json_integer_value(json_object_get(p, "seed")) == want,
                  "line %d: /__admin/profile seed, want %llu", line, want);
    json_decref(h);
    json_decref(p);
}

START_TEST(test_the_seed_in_force_is_in_healthz_and_the_profile)
{
    /* --seed wins over every profile's "seed". */
    const char *args[] = {"--seed", "42", NULL};
    fg_server *s = start_q_args("{'name':'seeded','seed':7,'routes':{'default':{'latency':{'dist':'fixed','ms':0}}}}", args);
    assert_seed(s, 42, __LINE__);
    fg_response r;
    put_profile(s, "{\"name\":\"s9\",\"seed\":9,\"routes\":{\"default\":{\"latency\":{\"dist\":\"fixed\",\"ms\":0}}}}", &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    assert_seed(s, 42, __LINE__);
    stop_server(s);

    /* Without --seed: the applied profile's "seed", which a PUT brings with it. */
    s = start_q("{'name':'seeded','seed':7,'routes':{'default':{'latency':{'dist':'fixed','ms':0}}}}");
    assert_seed(s, 7, __LINE__);
    put_profile(s, "{\"name\":\"s9\",\"seed\":9,\"routes\":{\"default\":{\"latency\":{\"dist\":\"fixed\",\"ms\":0}}}}", &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    assert_seed(s, 9, __LINE__);
    stop_server(s);

    /* Neither: the start seed, the one the ready line printed. */
    fg_opts o = {.capture_stdout = true, .args = NULL};
    s = start_server(&o);
    const char *at = strstr(s->ready_line, "seed=");
    ck_assert_msg(at != NULL, "ready line: %s", s->ready_line);
    assert_seed(s, strtoull(at + 5, NULL, 10), __LINE__);
    stop_server(s);
}
END_TEST

Suite *make_suite(void)
{
    Suite *s = suite_create("admin_verdict");
    TCase *tc = tcase_create("verdict");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_report_keeps_a_key_reuse_after_20000_reads);
    tcase_add_test(tc, test_report_past_its_identity_bound_says_incomplete);
    tcase_add_test(tc, test_journal_filters_and_total);
    tcase_add_test(tc, test_journal_trace_id_is_the_header_sent_and_latency_is_what_was_spent);
    tcase_add_test(tc, test_a_request_to_no_route_is_counted_and_journaled_as_other);
    tcase_add_test(tc, test_the_seed_in_force_is_in_healthz_and_the_profile);
    suite_add_tcase(s, tc);
    return s;
}
