/* check_admin_metrics.c -- black-box tests of GET /metrics (docs/edge-rules.md §7 "Metrics",
 * "Names"): after a known sequence of confirms (ok, replayed, 409 conflict, 401, 400, a fault,
 * throttled) every counter has exactly the expected value and admin calls are counted apart; the
 * in-flight gauge and its peak are exact with requests held; the text is valid Prometheus
 * exposition format with every family, type, (route, outcome) pair and histogram bucket of
 * docs/edge-rules.md §7 (checked by the testkit's strict parser, whose own rejections are tested
 * here too). Each test starts its own server on port 0; counters are polled with a bound, never
 * read after a sleep. */
#define _GNU_SOURCE

#include <check.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "testkit.h"

struct expect {
    const char *name, *lk1, *lv1, *lk2, *lv2;
    double want;
};

/* Every series of `fams` (requests_total, payments_total, faults, throttled, replays, conflicts,
 * key reuse) has exactly the value in `ex` or 0 when not listed. Returns a message or NULL. */
static bool counters_match(const struct prom *p, const struct expect *ex, size_t n_ex, char *why,
                           size_t wn)
{
    static const char *const fams[] = {"fakegate_requests_total", "fakegate_payments_total",
                                       "fakegate_faults_total", "fakegate_throttled_total",
                                       "fakegate_idempotent_replays_total",
                                       "fakegate_idempotency_conflicts_total",
                                       "fakegate_idempotency_key_reuse_total"};
    for (size_t i = 0; i < p->n; i++) {
        const struct prom_sample *s = &p->s[i];
        bool in = false;
        for (size_t f = 0; f < sizeof fams / sizeof fams[0]; f++)
            in = in || strcmp(s->name, fams[f]) == 0;
        if (!in)
            continue;
        double want = 0;
        for (size_t k = 0; k < n_ex; k++) {
            if (strcmp(ex[k].name, s->name) != 0)
                continue;
            const char *v1 = ex[k].lk1 ? prom_label(s, ex[k].lk1) : NULL;
            const char *v2 = ex[k].lk2 ? prom_label(s, ex[k].lk2) : NULL;
            if ((ex[k].lk1 == NULL || (v1 && strcmp(v1, ex[k].lv1) == 0)) &&
                (ex[k].lk2 == NULL || (v2 && strcmp(v2, ex[k].lv2) == 0)))
                want = ex[k].want;
        }
        if (s->value != want) {
            char labels[200] = "";
            size_t u = 0;
            for (size_t l = 0; l < s->n_labels; l++)
                u += (size_t)snprintf(labels + u, sizeof labels - u, "%s%s=\"%s\"", l ? "," : "",
                                      s->lname[l], s->lvalue[l]);
            snprintf(why, wn, "%s{%s} = %g, want %g", s->name, labels, s->value, want);
            return false;
        }
    }
    /* Every expected series exists. */
    for (size_t k = 0; k < n_ex; k++) {
        double v = ex[k].lk2   ? prom_get(p, ex[k].name, ex[k].lk1, ex[k].lv1, ex[k].lk2,
                                          ex[k].lv2, NULL)
                   : ex[k].lk1 ? prom_get(p, ex[k].name, ex[k].lk1, ex[k].lv1, NULL)
                               : prom_get(p, ex[k].name, NULL);
        if (isnan(v)) {
            snprintf(why, wn, "series %s %s=%s %s=%s missing", ex[k].name,
                     ex[k].lk1 ? ex[k].lk1 : "", ex[k].lv1 ? ex[k].lv1 : "",
                     ex[k].lk2 ? ex[k].lk2 : "", ex[k].lv2 ? ex[k].lv2 : "");
            return false;
        }
    }
    return true;
}

static void assert_histogram(const struct prom *p, const char *name)
{
    static const char *const les[] = {"0.005", "0.01", "0.025", "0.05", "0.1", "0.25",
                                      "0.5",   "1",    "2.5",   "5",    "10",  "+Inf"};
    char bucket[128], count[128], sum[128];
    snprintf(bucket, sizeof bucket, "%s_bucket", name);
    snprintf(count, sizeof count, "%s_count", name);
    snprintf(sum, sizeof sum, "%s_sum", name);
    double prev = 0;
    size_t n_buckets = 0;
    for (size_t i = 0; i < p->n; i++)
        n_buckets += strcmp(p->s[i].name, bucket) == 0;
    ck_assert_msg(n_buckets == 12, "%zu buckets, want the 12 of docs/edge-rules.md §7", n_buckets);
    for (size_t i = 0; i < 12; i++) {
        double v = prom_get(p, bucket, "le", les[i], NULL);
        ck_assert_msg(!isnan(v), "no bucket le=\"%s\"", les[i]);
        ck_assert_msg(v >= prev, "bucket le=%s (%g) below the one before (%g): not cumulative",
                      les[i], v, prev);
        prev = v;
    }
    double c = prom_get(p, count, NULL);
    ck_assert_msg(prev == c, "+Inf bucket %g != _count %g", prev, c);
    ck_assert(!isnan(prom_get(p, sum, NULL)));
}

START_TEST(test_metrics_exact_after_known_sequence)
{
    /* Confirms: 300 ms processing latency; a token bucket with 7 tokens that does not refill
     * within the test; a 500 before idempotency on the 3rd attempt of an identity. */
    fg_server *s = start_admin_confirm(
        "{'latency':{'dist':'fixed','ms':300},"
        "'throttle':{'kind':'token_bucket','rate_per_s':0.001,'burst':7},"
        "'faults':[{'kind':'error','p':1,'attempts':[3],'status':500,"
        "'code':'FAILED_INTERNAL_SYSTEM_PROCESSING','when':'before'}]}");
    struct prom p;
    char why[400];
    metrics(s, &p, NULL);
    ck_assert_msg(counters_match(&p, NULL, 0, why, sizeof why), "fresh server: %s", why);
    assert_histogram(&p, "fakegate_injected_latency_seconds");
    prom_free(&p);

    fg_response r;
    confirm_fresh(s, "pk_m1", "ord_m1", 1000, "key-m1", 0, &r); /* token 1: ok */
    assert_status(&r, 200);
    fg_response_fini(&r);
    confirm_fresh(s, "pk_m1", "ord_m1", 1000, "key-m1", 0, &r); /* token 2: replayed */
    assert_status(&r, 200);
    fg_response_fini(&r);
    confirm_fresh(s, "pk_m2", "ord_m2", 2000, "key-m2", 0, &r); /* token 3: ok */
    assert_status(&r, 200);
    fg_response_fini(&r);

    struct mrun m; /* token 4: ok, held while token 5 gets a 409 */
    mrun_init(&m, s, 1);
    mrun_confirm(&m, 0, "pk_m4", "ord_m4", 4000, "key-m4", 10000);
    mrun_start(&m);
    ck_assert_uint_eq(wait_pending(s, "ord_m4", 1, 5000), 1);
    confirm_fresh(s, "pk_m4", "ord_m4", 4000, "key-m4", 0, &r);
    assert_error(&r, 409, "IDEMPOTENT_REQUEST_PROCESSING");
    fg_response_fini(&r);
    mrun_join(&m);
    ck_assert_msg(m.q[0].status == 200, "held confirm: %ld %s", m.q[0].status, m.q[0].errbuf);
    mrun_free(&m);

    char bad_auth[256];
    fg_basic_auth("live_sk_nope:", bad_auth, sizeof bad_auth);
    const char *h401[] = {bad_auth, "Idempotency-Key: key-m9", NULL};
    fg_request q401 = {.method = "POST", .path = CONFIRM_PATH, .headers = h401,
                       .body = "{\"paymentKey\":\"pk_m9\",\"orderId\":\"ord_m9\",\"amount\":1}"};
    fg_http(s, NULL, &q401, &r); /* no token: auth comes first */
    assert_error(&r, 401, "UNAUTHORIZED_KEY");
    fg_response_fini(&r);
    const char *h400[] = {s->auth_header, "Idempotency-Key: key-m5", NULL};
    fg_request q400 = {.method = "POST", .path = CONFIRM_PATH, .headers = h400,
                       .body = "{\"paymentKey\":\"pk_m5\",\"orderId\":\"ord_m5\",\"amount\":\"x\"}"};
    fg_http(s, NULL, &q400, &r); /* token 6: invalid */
    assert_error(&r, 400, "INVALID_REQUEST");
    fg_response_fini(&r);
    confirm_fresh(s, "pk_m1", "ord_m1", 1000, "key-m1", 0, &r); /* token 7: attempt 3, fault */
    assert_error(&r, 500, "FAILED_INTERNAL_SYSTEM_PROCESSING");
    fg_response_fini(&r);
    confirm_fresh(s, "pk_m6", "ord_m6", 1000, "key-m6", 0, &r); /* no token left */
    assert_error(&r, 503, "SERVICE_UNAVAILABLE");
    fg_response_fini(&r);
    confirm_fresh(s, "pk_m7", "ord_m7", 1000, "key-m7", 0, &r);
    assert_error(&r, 503, "SERVICE_UNAVAILABLE");
    fg_response_fini(&r);

    const struct expect ex[] = {
        {"fakegate_requests_total", "route", "confirm", "outcome", "ok", 3},
        {"fakegate_requests_total", "route", "confirm", "outcome", "replayed", 1},
        {"fakegate_requests_total", "route", "confirm", "outcome", "conflict", 1},
        {"fakegate_requests_total", "route", "confirm", "outcome", "unauthorized", 1},
        {"fakegate_requests_total", "route", "confirm", "outcome", "invalid", 1},
        {"fakegate_requests_total", "route", "confirm", "outcome", "fault_error", 1},
        {"fakegate_requests_total", "route", "confirm", "outcome", "throttled", 2},
        {"fakegate_idempotent_replays_total", NULL, NULL, NULL, NULL, 1},
        {"fakegate_idempotency_conflicts_total", NULL, NULL, NULL, NULL, 1},
        {"fakegate_idempotency_key_reuse_total", NULL, NULL, NULL, NULL, 0},
        {"fakegate_payments_total", "status", "IN_PROGRESS", NULL, NULL, 3},
        {"fakegate_payments_total", "status", "DONE", NULL, NULL, 3},
        {"fakegate_faults_total", "kind", "error", NULL, NULL, 1},
        {"fakegate_throttled_total", "route", "confirm", NULL, NULL, 2},
    };
    size_t n_ex = sizeof ex / sizeof ex[0];
    /* A request is counted when its response has ended on the server, a moment after the
     * client has it: poll (bounded) for the expected values. */
    char *text = NULL;
    bool ok = false;
    int64_t deadline = fg_now_ms() + 3000;
    for (;;) {
        free(text);
        metrics(s, &p, &text);
        ok = counters_match(&p, ex, n_ex, why, sizeof why);
        if (ok || fg_now_ms() > deadline)
            break;
        prom_free(&p);
        fg_pause_ms(10);
    }
    ck_assert_msg(ok, "%s\n%.5000s", why, text);
    free(text);
    assert_histogram(&p, "fakegate_injected_latency_seconds");
    double le025 = prom_get(&p, "fakegate_injected_latency_seconds_bucket", "le", "0.25", NULL);
    double le05 = prom_get(&p, "fakegate_injected_latency_seconds_bucket", "le", "0.5", NULL);
    ck_assert_msg(le05 - le025 >= 3, "the 3 confirms that waited 300 ms are not in (0.25, 0.5]: "
                  "%g, %g", le025, le05);
    ck_assert(prom_get(&p, "fakegate_injected_latency_seconds_sum", NULL) >= 0.9 - 1e-9);
    for (size_t i = 0; i < N_ROUTES; i++)
        ck_assert_msg(prom_get(&p, "fakegate_in_flight", "route", ROUTES[i], NULL) == 0,
                      "in flight{%s} at rest", ROUTES[i]);
    ck_assert_msg(prom_get(&p, "fakegate_in_flight_peak", "route", "confirm", NULL) == 2,
                  "peak %g, want 2 (the held confirm and its 409)",
                  prom_get(&p, "fakegate_in_flight_peak", "route", "confirm", NULL));
    double admin0 = prom_get(&p, "fakegate_admin_requests_total", NULL);
    ck_assert(admin0 > 0);
    prom_free(&p);

    /* Admin, health and metrics calls are not requests_total. */
    static const char *const paths[] = {"/healthz", "/__admin/health", "/__admin/profile",
                                        "/__admin/requests", "/__admin/report",
                                        "/__admin/payments", "/metrics"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        admin_call(s, "GET", paths[i], NULL, NULL, &r);
        assert_status(&r, 200);
        fg_response_fini(&r);
    }
    deadline = fg_now_ms() + 3000;
    double admin1;
    for (;;) {
        metrics(s, &p, NULL);
        admin1 = prom_get(&p, "fakegate_admin_requests_total", NULL);
        if (admin1 >= admin0 + 8 || fg_now_ms() > deadline)
            break;
        prom_free(&p);
        fg_pause_ms(10);
    }
    ck_assert_msg(admin1 >= admin0 + 8, "admin_requests_total %g -> %g after 8 admin calls",
                  admin0, admin1);
    ck_assert_msg(counters_match(&p, ex, n_ex, why, sizeof why), "after admin calls: %s", why);
    prom_free(&p);
    stop_server(s);
}
END_TEST

START_TEST(test_metrics_in_flight_peak_is_exact)
{
    fg_server *s = start_admin_confirm("{'latency':{'dist':'fixed','ms':1500}}");
    enum { N = 7 };
    struct mrun m;
    mrun_init(&m, s, N);
    for (size_t i = 0; i < N; i++) {
        char pk[32], oid[32];
        snprintf(pk, sizeof pk, "pk_pk_%zu", i);
        snprintf(oid, sizeof oid, "ord_pk_%zu", i);
        mrun_confirm(&m, i, pk, oid, 1000, NULL, 10000);
    }
    mrun_start(&m);
    double v = wait_metric(s, "fakegate_in_flight", "route", "confirm", N, 5000);
    ck_assert_msg(v == N, "in flight %g, want %d", v, N);
    ck_assert_uint_eq(atomic_load(&m.n_done), 0);
    ck_assert(metric1(s, "fakegate_in_flight_peak", "route", "confirm") == N);
    ck_assert(metric1(s, "fakegate_in_flight", "route", "read") == 0);
    mrun_join(&m);
    for (size_t i = 0; i < N; i++)
        ck_assert_msg(m.q[i].status == 200, "%s: %ld %s", m.q[i].oid, m.q[i].status,
                      m.q[i].errbuf);
    ck_assert(wait_metric(s, "fakegate_in_flight", "route", "confirm", 0, 5000) == 0);
    ck_assert(metric1(s, "fakegate_in_flight_peak", "route", "confirm") == N);
    mrun_free(&m);
    stop_server(s);
}
END_TEST

START_TEST(test_metrics_text_is_prometheus)
{
    fg_server *s = start_admin_confirm("{'latency':{'dist':'fixed','ms':0}}");
    fg_response r;
    confirm_fresh(s, "pk_pt", "ord_pt", 1000, "key-pt", 0, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    struct prom p;
    char *text;
    metrics(s, &p, &text);
    static const struct {
        const char *name, *type;
    } fams[] = {{"fakegate_requests_total", "counter"},
                {"fakegate_in_flight", "gauge"},
                {"fakegate_in_flight_peak", "gauge"},
                {"fakegate_payments_total", "counter"},
                {"fakegate_idempotent_replays_total", "counter"},
                {"fakegate_idempotency_conflicts_total", "counter"},
                {"fakegate_idempotency_key_reuse_total", "counter"},
                {"fakegate_idempotency_records", "gauge"},
                {"fakegate_faults_total", "counter"},
                {"fakegate_throttled_total", "counter"},
                {"fakegate_admin_requests_total", "counter"},
                {"fakegate_injected_latency_seconds", "histogram"}};
    for (size_t i = 0; i < sizeof fams / sizeof fams[0]; i++) {
        struct prom_family *f = prom_family_get(&p, fams[i].name);
        ck_assert_msg(f != NULL, "family %s missing:\n%s", fams[i].name, text);
        ck_assert_msg(strcmp(f->type, fams[i].type) == 0, "%s is a %s, want %s", fams[i].name,
                      f->type, fams[i].type);
    }
    /* Every (route, outcome) pair of docs/edge-rules.md §7 is exposed. */
    for (size_t ro = 0; ro < N_ROUTES; ro++)
        for (size_t o = 0; o < N_OUTCOMES; o++)
            ck_assert_msg(!isnan(prom_get(&p, "fakegate_requests_total", "route", ROUTES[ro],
                                          "outcome", OUTCOMES[o], NULL)),
                          "no fakegate_requests_total{route=\"%s\",outcome=\"%s\"}", ROUTES[ro],
                          OUTCOMES[o]);
    ck_assert(prom_get(&p, "fakegate_requests_total", "route", "confirm", "outcome", "ok", NULL) ==
              1);
    assert_histogram(&p, "fakegate_injected_latency_seconds");
    free(text);
    prom_free(&p);

    /* The parser itself rejects what it must. */
    char err[256];
    ck_assert(!prom_parse("# HELP a x\n# TYPE a counter\na 1", &p, err, sizeof err));
    prom_free(&p);
    ck_assert(!prom_parse("a 1\n# HELP a x\n# TYPE a counter\n", &p, err, sizeof err));
    prom_free(&p);
    ck_assert(!prom_parse("# HELP a x\n# HELP a y\n# TYPE a counter\na 1\n", &p, err, sizeof err));
    prom_free(&p);
    ck_assert(!prom_parse("# HELP a x\n# TYPE a counter\na{l=\"v} 1\n", &p, err, sizeof err));
    prom_free(&p);
    ck_assert(!prom_parse("# HELP a x\n# TYPE a counter\na{l=\"\\q\"} 1\n", &p, err, sizeof err));
    prom_free(&p);
    ck_assert(prom_parse("# HELP a x\n# TYPE a counter\na{l=\"\\\"\\n\\\\\"} 1\n", &p, err,
                         sizeof err));
    ck_assert_str_eq(p.s[0].lvalue[0], "\"\n\\");
    prom_free(&p);
    stop_server(s);
}
END_TEST

Suite *make_suite(void)
{
    Suite *su = suite_create("blackbox_admin_metrics");

    TCase *tc = add_tcase(su, "metrics", 30);
    tcase_add_test(tc, test_metrics_text_is_prometheus);
    tcase_add_test(tc, test_metrics_exact_after_known_sequence);
    tcase_add_test(tc, test_metrics_in_flight_peak_is_exact);
    return su;
}
