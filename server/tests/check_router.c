/* check_router.c -- the route table (router.c router_match): which (method, path) reach which
 * handler kind and profile route, the path parameter, 404 for unknown paths and for keys that
 * hide a '/' or a NUL, and 405 with the Allow value of the methods the path takes. Pure: no
 * server, no sockets. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "router.h"

static enum route_found match(enum http_method m, const char *path, struct route_match *out)
{
    memset(out, 0, sizeof *out);
    return router_match(m, path, path, out);
}

static void assert_param(const struct route_match *m, const char *want)
{
    ck_assert_ptr_nonnull(m->param);
    ck_assert_uint_eq(m->param_len, strlen(want));
    ck_assert_int_eq(strncmp(m->param, want, m->param_len), 0);
}

START_TEST(test_confirm_post_is_the_confirm_route)
{
    struct route_match m;
    ck_assert_int_eq(match(HM_POST, "/v1/payments/confirm", &m), ROUTE_FOUND);
    ck_assert_int_eq(m.kind, RK_CONFIRM);
    ck_assert_int_eq(m.route, ROUTE_CONFIRM);
    ck_assert_ptr_null(m.param);
}
END_TEST

START_TEST(test_get_confirm_reads_a_payment_whose_key_is_confirm)
{
    struct route_match m;
    ck_assert_int_eq(match(HM_GET, "/v1/payments/confirm", &m), ROUTE_FOUND);
    ck_assert_int_eq(m.kind, RK_GET_PAYMENT);
    ck_assert_int_eq(m.route, ROUTE_READ);
    assert_param(&m, "confirm");
}
END_TEST

START_TEST(test_reads_and_cancel_carry_their_key)
{
    struct route_match m;
    ck_assert_int_eq(match(HM_GET, "/v1/payments/pk_123", &m), ROUTE_FOUND);
    ck_assert_int_eq(m.kind, RK_GET_PAYMENT);
    assert_param(&m, "pk_123");
    ck_assert_int_eq(match(HM_GET, "/v1/payments/orders/order-0001", &m), ROUTE_FOUND);
    ck_assert_int_eq(m.kind, RK_GET_ORDER);
    ck_assert_int_eq(m.route, ROUTE_READ);
    assert_param(&m, "order-0001");
    ck_assert_int_eq(match(HM_POST, "/v1/payments/pk_9/cancel", &m), ROUTE_FOUND);
    ck_assert_int_eq(m.kind, RK_CANCEL);
    ck_assert_int_eq(m.route, ROUTE_CANCEL);
    assert_param(&m, "pk_9");
    /* Toss's older approve path: a confirm with the paymentKey in its path */
    ck_assert_int_eq(match(HM_POST, "/v1/payments/pk_7", &m), ROUTE_FOUND);
    ck_assert_int_eq(m.kind, RK_CONFIRM);
    ck_assert_int_eq(m.route, ROUTE_CONFIRM);
    assert_param(&m, "pk_7");
    ck_assert_int_eq(match(HM_GET, "/v1/transactions", &m), ROUTE_FOUND);
    ck_assert_int_eq(m.kind, RK_TRANSACTIONS);
    ck_assert_int_eq(m.route, ROUTE_READ);
    /* "orders" alone is a paymentKey, as Toss's path grammar reads it */
    ck_assert_int_eq(match(HM_GET, "/v1/payments/orders", &m), ROUTE_FOUND);
    ck_assert_int_eq(m.kind, RK_GET_PAYMENT);
    assert_param(&m, "orders");
}
END_TEST

START_TEST(test_admin_routes_are_found_by_exact_path)
{
    static const struct {
        enum http_method m;
        const char *path;
        enum route_kind kind;
    } cases[] = {{HM_GET, "/healthz", RK_HEALTH},
                 {HM_HEAD, "/healthz", RK_HEALTH},
                 {HM_GET, "/__admin/health", RK_HEALTH},
                 {HM_GET, "/__admin/payments", RK_ADMIN_PAYMENTS},
                 {HM_GET, "/__admin/profile", RK_ADMIN_PROFILE},
                 {HM_PUT, "/__admin/profile", RK_ADMIN_PROFILE},
                 {HM_POST, "/__admin/reset", RK_ADMIN_RESET},
                 {HM_GET, "/__admin/requests", RK_ADMIN_REQUESTS},
                 {HM_GET, "/__admin/report", RK_ADMIN_REPORT},
                 {HM_POST, "/__admin/sessions", RK_ADMIN_SESSIONS},
                 {HM_GET, "/metrics", RK_METRICS}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct route_match m;
        ck_assert_msg(match(cases[i].m, cases[i].path, &m) == ROUTE_FOUND, "%s", cases[i].path);
        ck_assert_msg(m.kind == cases[i].kind, "%s: kind %d", cases[i].path, (int)m.kind);
        ck_assert_int_eq(m.route, ROUTE_DEFAULT);
    }
}
END_TEST

START_TEST(test_unknown_paths_and_empty_keys_are_404)
{
    static const char *const paths[] = {"/",
                                        "/v1",
                                        "/v1/payments",
                                        "/v1/payments/",
                                        "/v1/payments/orders/",
                                        "/v1/payments/a/b",
                                        "/v1/payments//cancel",
                                        "/v1/payments/pk/cancel/x",
                                        "/__admin/nope",
                                        "/healthz/",
                                        "/v1/transactions/x"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        struct route_match m;
        ck_assert_msg(match(HM_GET, paths[i], &m) == ROUTE_NOT_FOUND, "%s", paths[i]);
    }
}
END_TEST

START_TEST(test_encoded_slash_or_nul_in_a_key_is_404)
{
    struct route_match m;
    /* decoded, "/v1/payments/a/b" would be another path; the raw form says it was one key */
    ck_assert_int_eq(router_match(HM_GET, "/v1/payments/a/b", "/v1/payments/a%2Fb", &m),
                     ROUTE_NOT_FOUND);
    ck_assert_int_eq(router_match(HM_GET, "/v1/payments/ab", "/v1/payments/a%2fb", &m),
                     ROUTE_NOT_FOUND);
    ck_assert_int_eq(router_match(HM_GET, "/v1/payments/a", "/v1/payments/a%00b", &m),
                     ROUTE_NOT_FOUND);
    /* other escapes are fine, and a '?' ends the path part that is checked */
    ck_assert_int_eq(router_match(HM_GET, "/v1/payments/a b", "/v1/payments/a%20b", &m),
                     ROUTE_FOUND);
    ck_assert_int_eq(router_match(HM_GET, "/v1/transactions", "/v1/transactions?x=%2F", &m),
                     ROUTE_FOUND);
}
END_TEST

START_TEST(test_wrong_method_gets_405_with_the_paths_methods)
{
    static const struct {
        enum http_method m;
        const char *path, *allow;
    } cases[] = {{HM_PUT, "/v1/payments/confirm", "GET, POST"},
                 /* GET reads it; POST is Toss's older approve path (docs/api.md §2.1) */
                 {HM_DELETE, "/v1/payments/pk_1", "GET, POST"},
                 {HM_GET, "/v1/payments/pk_1/cancel", "POST"},
                 {HM_POST, "/v1/payments/orders/o-123456", "GET"},
                 /* under orders/ a path is an order read only, not a cancel of "orders" */
                 {HM_POST, "/v1/payments/orders/cancel", "GET"},
                 {HM_PUT, "/v1/payments/orders/cancel", "GET"},
                 {HM_POST, "/v1/transactions", "GET"},
                 {HM_POST, "/__admin/profile", "GET, PUT"},
                 {HM_GET, "/__admin/reset", "POST"},
                 {HM_PUT, "/__admin/sessions", "POST"},
                 {HM_POST, "/healthz", "GET, HEAD"},
                 {HM_DELETE, "/metrics", "GET"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct route_match m;
        ck_assert_msg(match(cases[i].m, cases[i].path, &m) == ROUTE_BAD_METHOD, "%s",
                      cases[i].path);
        ck_assert_str_eq(m.allow, cases[i].allow);
    }
}
END_TEST

Suite *make_suite(void)
{
    Suite *s = suite_create("router");
    TCase *tc = tcase_create("route_table");
    tcase_add_test(tc, test_confirm_post_is_the_confirm_route);
    tcase_add_test(tc, test_get_confirm_reads_a_payment_whose_key_is_confirm);
    tcase_add_test(tc, test_reads_and_cancel_carry_their_key);
    tcase_add_test(tc, test_admin_routes_are_found_by_exact_path);
    tcase_add_test(tc, test_unknown_paths_and_empty_keys_are_404);
    tcase_add_test(tc, test_encoded_slash_or_nul_in_a_key_is_404);
    tcase_add_test(tc, test_wrong_method_gets_405_with_the_paths_methods);
    suite_add_tcase(s, tc);
    return s;
}

