/* check_cluster.c -- unit tests for cluster.c's pure part: the --store redis://HOST:PORT[/DB]
 * parser (docs/cluster.md "Flags"), which must write the URL back in full and refuse every
 * other form with a message naming the flag, the URL and what is wrong; and the state log's
 * line hand-off (statefile_take_line) the commit script pushes. No Redis is needed. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "check_main.h"
#include "cluster.h"
#include "statefile.h"

START_TEST(test_store_url_with_db_is_read_and_written_back)
{
    struct cluster_url u;
    char err[ERR_LEN] = "";
    ck_assert_int_eq(cluster_parse_url("redis://127.0.0.1:6390/3", &u, err), 0);
    ck_assert_str_eq(u.host, "127.0.0.1");
    ck_assert_uint_eq(u.port, 6390);
    ck_assert_uint_eq(u.db, 3);
    ck_assert_str_eq(u.text, "redis://127.0.0.1:6390/3");
}
END_TEST

START_TEST(test_store_url_without_db_is_db_0)
{
    struct cluster_url u;
    char err[ERR_LEN] = "";
    ck_assert_int_eq(cluster_parse_url("redis://redis-1.internal:65535", &u, err), 0);
    ck_assert_str_eq(u.host, "redis-1.internal");
    ck_assert_uint_eq(u.port, 65535);
    ck_assert_uint_eq(u.db, 0);
    ck_assert_str_eq(u.text, "redis://redis-1.internal:65535/0");
}
END_TEST

START_TEST(test_store_url_refusals_name_the_flag_the_url_and_why)
{
    static const struct {
        const char *url, *why;
    } bad[] = {
        {"http://127.0.0.1:6379", "not memory or redis://HOST:PORT[/DB]"},
        {"redis://127.0.0.1", "no port"},
        {"redis://127.0.0.1/0", "no port"},
        {"redis://:6379", "the host is 1-253 characters"},
        {"redis://127.0.0.1:0", "the port is 1-65535"},
        {"redis://127.0.0.1:65536", "the port is 1-65535"},
        {"redis://127.0.0.1:63x9", "the port is 1-65535"},
        {"redis://127.0.0.1:6379/", "the database is a number 0-15"},
        {"redis://127.0.0.1:6379/16", "the database is a number 0-15"},
        {"redis://127.0.0.1:6379/0/1", "the database is a number 0-15"},
        {"redis://user:pw@127.0.0.1:6379", "a user, password, query or IPv6"},
        {"redis://127.0.0.1:6379?db=1", "a user, password, query or IPv6"},
        {"redis://[::1]:6379", "a user, password, query or IPv6"},
        {"redis://ho st:6379", "the host has a character other than"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        struct cluster_url u;
        char err[ERR_LEN] = "";
        ck_assert_msg(cluster_parse_url(bad[i].url, &u, err) == -1, "%s accepted", bad[i].url);
        char want[ERR_LEN];
        snprintf(want, sizeof want, "--store %s: ", bad[i].url);
        ck_assert_msg(strncmp(err, want, strlen(want)) == 0, "%s: message '%s'", bad[i].url, err);
        ck_assert_msg(strstr(err, bad[i].why) != NULL, "%s: message '%s'", bad[i].url, err);
    }
}
END_TEST

START_TEST(test_store_url_host_of_253_characters_is_the_longest)
{
    char url[400], host[300];
    memset(host, 'a', 253);
    host[253] = '\0';
    snprintf(url, sizeof url, "redis://%s:1", host);
    struct cluster_url u;
    char err[ERR_LEN] = "";
    ck_assert_int_eq(cluster_parse_url(url, &u, err), 0);
    ck_assert_uint_eq(strlen(u.host), 253);
    snprintf(url, sizeof url, "redis://%sa:1", host);
    ck_assert_int_eq(cluster_parse_url(url, &u, err), -1);
    ck_assert_ptr_nonnull(strstr(err, "the host is 1-253 characters"));
}
END_TEST

START_TEST(test_shared_log_line_is_the_pending_records_closed_then_cleared)
{
    struct statefile *sf = statefile_new_shared("redis://127.0.0.1:1/0 log", NULL);
    ck_assert_ptr_nonnull(sf);
    size_t len = 99;
    ck_assert_ptr_null(statefile_take_line(sf, &len)); /* a section that changed nothing */
    ck_assert_uint_eq(len, 0);
    statefile_clock_locked(sf, 1500000);
    const char *line = statefile_take_line(sf, &len);
    ck_assert_str_eq(line, "[{\"r\":\"clock\",\"offset_us\":1500000}]");
    ck_assert_uint_eq(len, strlen(line));
    statefile_clear_line(sf);
    ck_assert_ptr_null(statefile_take_line(sf, &len));
    statefile_free(sf);
}
END_TEST

Suite *make_suite(void)
{
    Suite *s = suite_create("cluster");
    TCase *tc = tcase_create("url");
    tcase_add_test(tc, test_store_url_with_db_is_read_and_written_back);
    tcase_add_test(tc, test_store_url_without_db_is_db_0);
    tcase_add_test(tc, test_store_url_refusals_name_the_flag_the_url_and_why);
    tcase_add_test(tc, test_store_url_host_of_253_characters_is_the_longest);
    suite_add_tcase(s, tc);
    tc = tcase_create("line");
    tcase_add_test(tc, test_shared_log_line_is_the_pending_records_closed_then_cleared);
    suite_add_tcase(s, tc);
    return s;
}
