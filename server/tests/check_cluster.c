/* check_cluster.c -- unit tests for the parts of --store redis:// that need no Redis
 * (docs/cluster.md §11): the URL parser, which writes the URL back in full and refuses every
 * other form with a message naming the flag, the URL and what is wrong; the state log's line
 * hand-off (statefile_take_line) the commit script pushes; and a replica's catch-up
 * (statefile_apply_line): it adopts the log's salt before its first payment, emits no event,
 * names a line that does not apply, and after a rebuild releases its own claims only. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "check_main.h"
#include "cluster.h"
#include "gateway.h"
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

/* --- a replica's catch-up -------------------------------------------------------------------- */

static const struct config cfg = {.mid = "tgen_test", .idempotency_ttl_s = 60,
                                  .session_ttl_s = 600};
static struct gateway gw;
static struct statefile *log_sf;
static int events;

static void count_event(void *ctx, const struct payment_event *ev)
{
    (void)ctx;
    (void)ev;
    events++;
}

static void replica_setup(void)
{
    static const char text[] = "{\"name\":\"t\",\"routes\":{}}";
    struct profile *p = NULL;
    char err[ERR_LEN];
    ck_assert_msg(profile_parse(text, strlen(text), "test", NULL, NULL, &p, err) == 0, "%s", err);
    ck_assert_int_eq(gateway_init(&gw, &cfg, NULL, NULL, p, 7, 42), 0);
    ck_assert_int_eq(gateway_subscribe(&gw, count_event, NULL), 0);
    events = 0;
    log_sf = statefile_new_shared("redis://127.0.0.1:1/0 log", NULL);
    ck_assert_ptr_nonnull(log_sf);
    gateway_attach_state(&gw, log_sf);
}

static void replica_teardown(void)
{
    gateway_fini(&gw);
    statefile_free(log_sf);
}

/* Another instance's first section for tenant test_sk_a: its salt, a payment, a claim. */
static const char LINE1[] =
    "[{\"r\":\"salt\",\"tk\":\"test_sk_a\",\"salt\":\"00000000000000ff\"},"
    "{\"r\":\"create\",\"tk\":\"test_sk_a\",\"pk\":\"pk_1\",\"oid\":\"order-1\","
    "\"amount\":1000,\"at_us\":1000000},"
    "{\"r\":\"claim\",\"tk\":\"test_sk_a\",\"scope\":\"6b31\",\"hash\":\"0000000000000001\","
    "\"at_ns\":1000000000,\"inst\":\"00000000000000aa\"}]";

START_TEST(test_replica_adopts_the_logs_salt_before_its_first_payment_without_events)
{
    /* This replica met the key first (its own random salt), but made no payment yet. */
    struct tenant *t = gateway_tenant(&gw, "test_sk_a", true, NULL);
    ck_assert_ptr_nonnull(t);
    ck_assert_uint_ne(t->store.ledger.salt, 0xff);
    char err[ERR_LEN] = "";
    uint64_t records = 0;
    ck_assert_msg(statefile_apply_line(log_sf, &gw, LINE1, strlen(LINE1), 1, &records, err) == 0,
                  "%s", err);
    ck_assert_uint_eq(records, 3);
    ck_assert_uint_eq(t->store.ledger.salt, 0xff);
    ck_assert(t->store.log_salted); /* its own salt record is never written now */
    struct payment *p = store_payment(&t->store, "pk_1");
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(p->amount, 1000);
    ck_assert_int_eq(events, 0); /* a catch-up announces nothing: no webhook is sent twice */
    size_t len;
    ck_assert_ptr_null(statefile_take_line(log_sf, &len)); /* and appends nothing */
    struct idem_record *rec = store_idem_get(&t->store, "k1", 2);
    ck_assert_ptr_nonnull(rec);
    ck_assert_int_eq(rec->state, IDEM_PROCESSING);
    ck_assert_uint_eq(rec->owner_instance, 0xaa);
}
END_TEST

START_TEST(test_replica_refuses_a_line_that_does_not_fit_naming_it)
{
    char err[ERR_LEN] = "";
    ck_assert_int_eq(statefile_apply_line(log_sf, &gw, LINE1, strlen(LINE1), 1, NULL, err), 0);
    static const char bad[] =
        "[{\"r\":\"approve\",\"tk\":\"test_sk_a\",\"pk\":\"pk_9\",\"at_us\":2000000}]";
    ck_assert_int_eq(statefile_apply_line(log_sf, &gw, bad, strlen(bad), 2, NULL, err), -1);
    ck_assert_str_eq(err, "redis://127.0.0.1:1/0 log:2: record 1 (approve): payment pk_9 is "
                          "not in the ledger");
    static const char salt2[] = "[{\"r\":\"salt\",\"tk\":\"test_sk_a\",\"salt\":\"0000000000000001\"}]";
    ck_assert_int_eq(statefile_apply_line(log_sf, &gw, salt2, strlen(salt2), 3, NULL, err), -1);
    ck_assert_ptr_nonnull(strstr(err, "a second salt for a ledger that has made payments"));
}
END_TEST

START_TEST(test_rebuilt_replica_applies_the_log_again_and_releases_only_its_own_claims)
{
    char err[ERR_LEN] = "";
    ck_assert_int_eq(statefile_apply_line(log_sf, &gw, LINE1, strlen(LINE1), 1, NULL, err), 0);
    struct tenant *t = gateway_tenant(&gw, "test_sk_a", false, NULL);
    uint64_t gen = t->generation;
    log_sf->replaying = true;
    gateway_replica_clear_locked(&gw);
    log_sf->replaying = false;
    ck_assert_uint_eq(t->generation, gen + 1); /* requests in flight find their ledger gone */
    ck_assert_uint_eq(store_payment_count(&t->store), 0);
    ck_assert_int_eq(statefile_apply_line(log_sf, &gw, LINE1, strlen(LINE1), 1, NULL, err), 0);
    struct payment *p = store_payment(&t->store, "pk_1");
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq(p->id, 1); /* the same id as the first time: the same derived keys */
    ck_assert_uint_eq(statefile_release_instance(log_sf, &gw, 0xbb), 0); /* another's */
    ck_assert_ptr_nonnull(store_idem_get(&t->store, "k1", 2));
    ck_assert_uint_eq(statefile_release_instance(log_sf, &gw, 0xaa), 1);
    ck_assert_ptr_null(store_idem_get(&t->store, "k1", 2));
    size_t len;
    const char *line = statefile_take_line(log_sf, &len);
    ck_assert_ptr_nonnull(line);
    ck_assert_ptr_nonnull(strstr(line, "{\"r\":\"release\",\"tk\":\"test_sk_a\",\"scope\":\"6b31\"}"));
    statefile_clear_line(log_sf);
}
END_TEST

START_TEST(test_replica_refuses_a_release_of_a_claim_its_own_request_holds)
{
    /* Another instance took this one for dead and released its claim: the replica must not
     * free what a request of its own still points at, but rebuild (the line does not apply). */
    struct tenant *t = gateway_tenant(&gw, "test_sk_a", true, NULL);
    static const char salt[] = "[{\"r\":\"salt\",\"tk\":\"test_sk_a\",\"salt\":\"00000000000000ff\"}]";
    char err[ERR_LEN] = "";
    ck_assert_int_eq(statefile_apply_line(log_sf, &gw, salt, strlen(salt), 1, NULL, err), 0);
    static const char owner = 0;
    struct idem_record *rec = store_idem_claim(&t->store, "k1", 2, &owner, 1, 1000000000);
    ck_assert_ptr_nonnull(rec);
    statefile_clear_line(log_sf);
    static const char rel[] = "[{\"r\":\"release\",\"tk\":\"test_sk_a\",\"scope\":\"6b31\"}]";
    ck_assert_int_eq(statefile_apply_line(log_sf, &gw, rel, strlen(rel), 2, NULL, err), -1);
    ck_assert_str_eq(err, "redis://127.0.0.1:1/0 log:2: record 1 (release): a claim a request of "
                          "this instance still holds");
    ck_assert_ptr_eq(store_idem_get(&t->store, "k1", 2), rec);
    ck_assert_ptr_eq(rec->owner, &owner);
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
    tc = tcase_create("replica");
    tcase_add_checked_fixture(tc, replica_setup, replica_teardown);
    tcase_add_test(tc, test_replica_adopts_the_logs_salt_before_its_first_payment_without_events);
    tcase_add_test(tc, test_replica_refuses_a_line_that_does_not_fit_naming_it);
    tcase_add_test(tc, test_rebuilt_replica_applies_the_log_again_and_releases_only_its_own_claims);
    tcase_add_test(tc, test_replica_refuses_a_release_of_a_claim_its_own_request_holds);
    suite_add_tcase(s, tc);
    return s;
}
