/* check_admin_timeline.c -- black-box tests of the live page's server side (docs/admin.md §5):
 * GET /__admin/timeline counts every request in its arrival second by route and outcome class,
 * marks the seconds a window throttle was closed, reports in-flight counts with the routes'
 * caps, scopes to a tenant from the first time it is asked for, and refuses a bad `seconds`;
 * GET /__admin/ui serves the page and its files from the binary, without the admin token,
 * while the timeline needs it. Every wait is bounded. */
#define _GNU_SOURCE

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "testkit.h"

static const char *const CLASSES[] = {"ok",  "replayed",  "conflict", "4xx",
                                      "5xx", "throttled", "capped",   "dropped"};
#define N_CLASSES 8

static int class_index(const char *c)
{
    for (int i = 0; i < N_CLASSES; i++)
        if (strcmp(CLASSES[i], c) == 0)
            return i;
    ck_abort_msg("no class %s", c);
    return -1;
}

/* The timeline's sum over its buckets for (route, class), and how many seconds had `route` in
 * "throttled". */
static long sum_of(const json_t *tl, const char *route, const char *cls, long *closed_s)
{
    long n = 0, closed = 0;
    size_t i, j;
    json_t *b, *r;
    int k = class_index(cls);
    json_array_foreach(json_object_get(tl, "buckets"), i, b) {
        json_t *counts = json_object_get(json_object_get(b, "n"), route);
        if (counts)
            n += (long)json_integer_value(json_array_get(counts, (size_t)k));
        json_array_foreach(json_object_get(b, "throttled"), j, r) closed += strcmp(json_string_value(r), route) == 0;
    }
    if (closed_s)
        *closed_s = closed;
    return n;
}

static json_t *timeline(const fg_server *s, const char *query, const char *header)
{
    char path[128];
    snprintf(path, sizeof path, "/__admin/timeline%s", query);
    fg_response r;
    admin_call(s, "GET", path, NULL, header, &r);
    assert_status(&r, 200);
    json_t *j = json_incref(r.json);
    fg_response_fini(&r);
    return j;
}

START_TEST(test_timeline_counts_each_request_by_route_and_class)
{
    fg_server *s = start_q("{'name':'tl','routes':{}}");
    fg_response r;
    confirm_fresh(s, "pk_tl_1", "order-tl-1", 1000, "k-tl-1", 0, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    confirm_fresh(s, "pk_tl_1", "order-tl-1", 1000, "k-tl-1", 0, &r); /* replayed */
    assert_status(&r, 200);
    fg_response_fini(&r);
    confirm_fresh(s, "pk_tl_2", "order-tl-2", 1000, NULL, 0, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    confirm_fresh(s, "pk_tl_3", "order-tl-3", 0, NULL, 0, &r); /* amount 0: 400 */
    assert_status(&r, 400);
    fg_response_fini(&r);
    get_order(s, "order-none", &r); /* 404 */
    assert_status(&r, 404);
    fg_response_fini(&r);
    fg_get(s, "/v1/nothing-here", &r); /* no route: other */
    assert_status(&r, 404);
    fg_response_fini(&r);
    json_t *tl = timeline(s, "?seconds=30", NULL);
    ck_assert_int_eq(json_integer_value(json_object_get(tl, "seconds")), 30);
    ck_assert_uint_eq(json_array_size(json_object_get(tl, "buckets")), 30);
    ck_assert_int_eq(sum_of(tl, "confirm", "ok", NULL), 2);
    ck_assert_int_eq(sum_of(tl, "confirm", "replayed", NULL), 1);
    ck_assert_int_eq(sum_of(tl, "confirm", "4xx", NULL), 1);
    ck_assert_int_eq(sum_of(tl, "read", "4xx", NULL), 1);
    ck_assert_int_eq(sum_of(tl, "other", "4xx", NULL), 1);
    ck_assert_int_eq(sum_of(tl, "confirm", "5xx", NULL), 0);
    ck_assert_str_eq(json_str(json_object_get(tl, "profile"), "name"), "tl");
    /* Admin calls are not gateway requests: the timeline reads above added nothing. */
    json_t *again = timeline(s, "?seconds=30", NULL);
    ck_assert_int_eq(sum_of(again, "confirm", "ok", NULL), 2);
    ck_assert_int_eq(sum_of(again, "other", "4xx", NULL), 1);
    /* A reset clears it. */
    admin_call(s, "POST", "/__admin/reset", NULL, NULL, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    json_t *after = timeline(s, "", NULL);
    ck_assert_uint_eq(json_array_size(json_object_get(after, "buckets")), 120);
    ck_assert_int_eq(sum_of(after, "confirm", "ok", NULL), 0);
    json_decref(tl), json_decref(again), json_decref(after);
    stop_server(s);
}
END_TEST

/* A window throttle closed for the first 2 s of every 60 s: a confirm in it is counted as
 * throttled, and its second is marked for the confirm route only. */
START_TEST(test_timeline_marks_the_closed_window_and_counts_throttled)
{
    fg_server *s = start_q("{'name':'tlw','routes':{'confirm':{'throttle':{'kind':'window',"
                           "'period_s':60,'throttled_s':2}}}}");
    fg_response r;
    confirm_fresh(s, "pk_tlw_1", "order-tlw-1", 1000, "k-tlw-1", 0, &r);
    assert_status(&r, 503);
    fg_response_fini(&r);
    json_t *tl = timeline(s, "?seconds=5", NULL);
    long closed_confirm = 0, closed_read = 0;
    ck_assert_int_eq(sum_of(tl, "confirm", "throttled", &closed_confirm), 1);
    sum_of(tl, "read", "ok", &closed_read);
    ck_assert_int_ge(closed_confirm, 1);
    ck_assert_int_le(closed_confirm, 3);
    ck_assert_int_eq(closed_read, 0);
    json_decref(tl);
    stop_server(s);
}
END_TEST

START_TEST(test_timeline_in_flight_with_the_routes_caps)
{
    fg_server *s = start_admin_confirm("{'latency':{'dist':'fixed','ms':1500},"
                                       "'concurrency':{'max_in_flight':5}}");
    enum { N = 3 };
    struct mrun m;
    mrun_init(&m, s, N);
    for (size_t i = 0; i < N; i++) {
        char pk[32], oid[32];
        snprintf(pk, sizeof pk, "pk_tlf_%zu", i);
        snprintf(oid, sizeof oid, "order-tlf-%zu", i);
        mrun_confirm(&m, i, pk, oid, 1000, NULL, 10000);
    }
    mrun_start(&m);
    ck_assert(wait_metric(s, "fakegate_in_flight", "route", "confirm", N, 5000) == N);
    json_t *tl = timeline(s, "?seconds=2", NULL);
    json_t *f = json_object_get(tl, "in_flight"), *e;
    size_t i;
    bool saw = false;
    json_array_foreach(f, i, e) {
        if (json_is_str(e, "route", "confirm")) {
            saw = true;
            ck_assert_int_eq(json_int(e, "now"), N);
            ck_assert_int_eq(json_int(e, "peak"), N);
            ck_assert_int_eq(json_int(e, "cap"), 5);
        } else {
            ck_assert_int_eq(json_int(e, "now"), 0);
        }
    }
    ck_assert(saw);
    ck_assert_uint_eq(json_array_size(f), 4);
    json_decref(tl);
    mrun_join(&m);
    /* Counted once answered, in the second they arrived in. */
    json_t *after = timeline(s, "?seconds=10", NULL);
    ck_assert_int_eq(sum_of(after, "confirm", "ok", NULL), N);
    json_decref(after);
    mrun_free(&m);
    stop_server(s);
}
END_TEST

/* A tenant's timeline counts from the first time it is asked for; the server's counts all. */
START_TEST(test_timeline_of_a_tenant_starts_when_first_asked)
{
    fg_server *s = start_q("{'name':'tlt','routes':{}}");
    fg_response r;
    confirm_as_key(s, "test_sk_tl_a", "pk_tlt_1", "order-tlt-1", 1000, NULL, 0, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    json_t *a0 = timeline(s, "?seconds=10", "X-Fakegate-Tenant: test_sk_tl_a");
    ck_assert_int_eq(sum_of(a0, "confirm", "ok", NULL), 0);
    ck_assert_str_eq(json_str(a0, "tenant"), "test_sk_tl_a");
    ck_assert_ptr_null(json_object_get(a0, "tenants"));
    confirm_as_key(s, "test_sk_tl_a", "pk_tlt_2", "order-tlt-2", 1000, NULL, 0, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    confirm_as_key(s, "test_sk_tl_b", "pk_tlt_3", "order-tlt-3", 1000, NULL, 0, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    json_t *a1 = timeline(s, "?seconds=10", "X-Fakegate-Tenant: test_sk_tl_a");
    ck_assert_int_eq(sum_of(a1, "confirm", "ok", NULL), 1);
    json_t *all = timeline(s, "?seconds=10", NULL);
    ck_assert_int_eq(sum_of(all, "confirm", "ok", NULL), 3);
    json_t *keys = json_object_get(all, "tenants");
    ck_assert_uint_eq(json_array_size(keys), 2);
    admin_call(s, "GET", "/__admin/timeline", NULL, "X-Fakegate-Tenant: test_sk_nobody", &r);
    assert_status(&r, 404);
    fg_response_fini(&r);
    json_decref(a0), json_decref(a1), json_decref(all);
    stop_server(s);
}
END_TEST

START_TEST(test_timeline_refuses_a_bad_seconds)
{
    fg_server *s = start_q("{'name':'tlb','routes':{}}");
    const char *bad[] = {"0", "601", "abc", "12x", "-1", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char path[64];
        snprintf(path, sizeof path, "/__admin/timeline?seconds=%s", bad[i]);
        fg_response r;
        admin_call(s, "GET", path, NULL, NULL, &r);
        assert_error(&r, 400, "INVALID_REQUEST");
        ck_assert_msg(strstr(json_str(r.json, "message"), "seconds") != NULL, "%s", r.body);
        fg_response_fini(&r);
    }
    stop_server(s);
}
END_TEST

/* The page and its files come from the binary, need no admin token, and name no other origin;
 * the data they fetch does need it. */
START_TEST(test_ui_files_are_served_without_the_token)
{
    const char *args[] = {"--admin-token", "tok-ui", NULL};
    fg_server *s = start_args(NULL, args);
    struct {
        const char *path, *type, *must;
    } files[] = {
        {"/__admin/ui", "text/html", "<script src=\"/__admin/ui/app.js\">"},
        {"/__admin/ui/app.js", "text/javascript", "/__admin/timeline"},
        {"/__admin/ui/app.css", "text/css", "font"},
        {"/__admin/ui/uPlot.iife.min.js", "text/javascript", "uPlot"},
        {"/__admin/ui/uPlot.min.css", "text/css", ".uplot"},
        {"/__admin/ui/LICENSE-uPlot.txt", "text/plain", "MIT License"},
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        fg_response r;
        admin_call(s, "GET", files[i].path, NULL, NULL, &r);
        assert_status(&r, 200);
        ck_assert_msg(strncmp(r.content_type, files[i].type, strlen(files[i].type)) == 0,
                      "%s: %s", files[i].path, r.content_type);
        ck_assert_msg(strstr(r.body, files[i].must) != NULL, "%s lacks %s", files[i].path,
                      files[i].must);
        ck_assert_msg(strstr(r.body, "http://") == NULL || i >= 3, "%s names an origin",
                      files[i].path);
        fg_response_fini(&r);
    }
    fg_response r;
    admin_call(s, "GET", "/__admin/ui/missing.js", NULL, NULL, &r);
    assert_error(&r, 404, "NOT_FOUND");
    fg_response_fini(&r);
    admin_call(s, "GET", "/__admin/timeline", NULL, NULL, &r);
    assert_error(&r, 401, "UNAUTHORIZED");
    fg_response_fini(&r);
    admin_call(s, "GET", "/__admin/timeline", NULL, "Authorization: Bearer tok-ui", &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    stop_server(s);
}
END_TEST

Suite *make_suite(void)
{
    Suite *su = suite_create("admin_timeline");
    TCase *tc = add_tcase(su, "timeline", 30);
    tcase_add_test(tc, test_timeline_counts_each_request_by_route_and_class);
    tcase_add_test(tc, test_timeline_marks_the_closed_window_and_counts_throttled);
    tcase_add_test(tc, test_timeline_in_flight_with_the_routes_caps);
    tcase_add_test(tc, test_timeline_of_a_tenant_starts_when_first_asked);
    tcase_add_test(tc, test_timeline_refuses_a_bad_seconds);
    tc = add_tcase(su, "page", 30);
    tcase_add_test(tc, test_ui_files_are_served_without_the_token);
    return su;
}
