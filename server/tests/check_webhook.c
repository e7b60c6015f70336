/* check_webhook.c -- unit tests for webhook.h's pure parts (webhook_journal.c): which receiver
 * URLs webhook_url_check takes (docs/webhooks.md §6.2: http://host[:port][/path][?query] and
 * nothing else, at most 2048 bytes) and the delivery statuses a filter names. No server, no
 * sockets: libcurl only parses. */
#include <check.h>
#include <string.h>

#include "check_main.h"
#include "webhook.h"

START_TEST(test_receiver_urls_are_plain_http_to_a_host)
{
    static const char *const good[] = {"http://127.0.0.1:9001/hook", "http://localhost/hook?x=1",
                                       "HTTP://[::1]:8080/", "http://example.test", NULL};
    char err[ERR_LEN];
    for (int i = 0; good[i]; i++)
        ck_assert_msg(webhook_url_check(good[i], err) == 0, "%s: %s", good[i], err);
    static const char *const bad[] = {"https://127.0.0.1/hook", "http://user:pw@127.0.0.1/",
                                      "http://127.0.0.1/#frag", "http:/127.0.0.1/",
                                      "http:///127.0.0.1/", "http://127.0.0.1:0/", "not a url",
                                      NULL};
    for (int i = 0; bad[i]; i++) {
        err[0] = '\0';
        ck_assert_msg(webhook_url_check(bad[i], err) == -1, "%s accepted", bad[i]);
        ck_assert(err[0] != '\0');
    }
}
END_TEST

/* Found by fuzzing (server/tests/fuzz/corpus/webhook_url/regress_empty_fragment): libcurl
 * reports no fragment when it is empty, so a URL ending in '#' passed. */
START_TEST(test_receiver_url_with_an_empty_fragment_is_refused)
{
    static const char *const bad[] = {"HTTP://[::1]:80#", "http://127.0.0.1/hook#",
                                      "http://127.0.0.1/?a=b#", NULL};
    char err[ERR_LEN];
    for (int i = 0; bad[i]; i++) {
        ck_assert_msg(webhook_url_check(bad[i], err) == -1, "%s accepted", bad[i]);
        ck_assert_ptr_nonnull(strstr(err, "#fragment"));
    }
}
END_TEST

START_TEST(test_receiver_url_over_2048_bytes_is_refused)
{
    char url[2100] = "http://127.0.0.1/";
    memset(url + strlen(url), 'a', sizeof url - 1 - strlen(url));
    url[sizeof url - 1] = '\0';
    char err[ERR_LEN];
    ck_assert_int_eq(webhook_url_check(url, err), -1);
    url[2048] = '\0';
    ck_assert_msg(webhook_url_check(url, err) == 0, "%s", err);
}
END_TEST

START_TEST(test_delivery_statuses_are_the_four_names)
{
    ck_assert_int_eq(delivery_status_parse("pending"), DELIVERY_PENDING);
    ck_assert_int_eq(delivery_status_parse("delivered"), DELIVERY_DELIVERED);
    ck_assert_int_eq(delivery_status_parse("failed"), DELIVERY_FAILED);
    ck_assert_int_eq(delivery_status_parse("dropped"), DELIVERY_DROPPED);
    ck_assert_int_eq(delivery_status_parse("Delivered"), -1);
    ck_assert_int_eq(delivery_status_parse(""), -1);
}
END_TEST

Suite *make_suite(void)
{
    Suite *s = suite_create("webhook");
    TCase *tc = tcase_create("receivers");
    tcase_add_test(tc, test_receiver_urls_are_plain_http_to_a_host);
    tcase_add_test(tc, test_receiver_url_with_an_empty_fragment_is_refused);
    tcase_add_test(tc, test_receiver_url_over_2048_bytes_is_refused);
    tcase_add_test(tc, test_delivery_statuses_are_the_four_names);
    suite_add_tcase(s, tc);
    return s;
}
