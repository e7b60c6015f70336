/* check_admin_token.c -- black-box test of --admin-token (docs/admin.md §5 Admin API): with it,
 * every guarded /__admin route answers 401 UNAUTHORIZED to no, a wrong, a truncated, a Basic or a
 * lower-case bearer Authorization (and to the /v1 Basic key), and 200 to the exact bearer token;
 * health and /metrics stay open, and the token does not guard /v1. */
#define _GNU_SOURCE

#include <check.h>
#include <stdio.h>
#include <string.h>

#include "check_main.h"
#include "testkit.h"

START_TEST(test_admin_token)
{
    const char *args[] = {"--admin-token", "s3cr3t-T", NULL};
    fg_server *s = start_args(NULL, args);
    fg_response r;
    static const char *const guarded[][2] = {
        {"GET", "/__admin/profile"},  {"PUT", "/__admin/profile"}, {"POST", "/__admin/reset"},
        {"GET", "/__admin/requests"}, {"GET", "/__admin/report"},  {"GET", "/__admin/payments"}};
    const char *bad[] = {NULL, "Authorization: Bearer wrong", "Authorization: Bearer s3cr3t-",
                         "Authorization: Basic czNjcjN0LVQ6", "Authorization: bearer s3cr3t-T",
                         s->auth_header};
    for (size_t i = 0; i < sizeof guarded / sizeof guarded[0]; i++)
        for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
            const char *body = strcmp(guarded[i][0], "PUT") == 0 ? "{\"name\":\"normal\"}" : NULL;
            admin_call(s, guarded[i][0], guarded[i][1], body, bad[b], &r);
            ck_assert_msg(r.status == 401 && fg_error_code(&r) != NULL &&
                              strcmp(fg_error_code(&r), "UNAUTHORIZED") == 0,
                          "%s %s with %s: %ld %.300s", guarded[i][0], guarded[i][1],
                          bad[b] ? bad[b] : "no Authorization", r.status, r.body);
            fg_response_fini(&r);
        }
    admin_call(s, "GET", "/__admin/profile", NULL, "Authorization: Bearer s3cr3t-T", &r);
    assert_status(&r, 200);
    ck_assert(json_is_str(r.json, "name", "instant"));
    fg_response_fini(&r);
    admin_call(s, "GET", "/__admin/requests", NULL, "Authorization: Bearer s3cr3t-T", &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    static const char *const open_paths[] = {"/__admin/health", "/healthz", "/metrics"};
    for (size_t i = 0; i < 3; i++) {
        admin_call(s, "GET", open_paths[i], NULL, NULL, &r);
        assert_status(&r, 200);
        fg_response_fini(&r);
    }
    admin_call(s, "GET", "/__admin/health", NULL, NULL, &r);
    ck_assert(json_is_str(r.json, "status", "ok"));
    fg_response_fini(&r);
    /* The token does not guard /v1: a confirm works with its Basic key alone. */
    confirm_fresh(s, "pk_tok", "ord_tok", 1000, NULL, 0, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    stop_server(s);
}
END_TEST

Suite *make_suite(void)
{
    Suite *su = suite_create("blackbox_admin_token");

    TCase *tc = add_tcase(su, "token", 30);
    tcase_add_test(tc, test_admin_token);
    return su;
}
