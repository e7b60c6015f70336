/* check_gateway.c -- the gateway's guard and the store's events (gateway.c, store.c): a
 * section runs under the store lock only for a request of the current reset generation; every
 * status change of a payment is announced once, with its cause, to every subscriber. Pure: no
 * server, no sockets. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "gateway.h"
#include "request.h"

static const struct config cfg = {.mid = "tgen_test", .idempotency_ttl_s = 60,
                                  .session_ttl_s = 600};

static struct gateway gw;

static void setup(void)
{
    static const char text[] = "{\"name\":\"t\",\"routes\":{}}";
    struct profile *p = NULL;
    char err[ERR_LEN];
    ck_assert_msg(profile_parse(text, strlen(text), "test", NULL, NULL, &p, err) == 0, "%s", err);
    ck_assert_int_eq(gateway_init(&gw, &cfg, NULL, NULL, p, 7, 42), 0);
}

static void teardown(void)
{
    gateway_fini(&gw);
}

struct seen {
    int n;
    enum pay_status status[8];
    struct request *cause[8];
};

static void record(void *ctx, const struct payment_event *ev)
{
    struct seen *s = ctx;
    if (s->n < 8) {
        s->status[s->n] = ev->status;
        s->cause[s->n] = ev->cause;
    }
    s->n++;
}

static int bump(struct gateway *g, struct store *s, struct request *r, void *arg)
{
    (void)g;
    (void)s;
    (void)r;
    return ++*(int *)arg;
}

START_TEST(test_txn_runs_for_the_current_generation_only)
{
    struct request r;
    memset(&r, 0, sizeof r);
    r.adm.generation = gateway_generation(&gw);
    int calls = 0;
    ck_assert_int_eq(gateway_txn(&gw, &r, bump, &calls), 1);
    gateway_reset(&gw, NULL);
    ck_assert_uint_eq(gateway_generation(&gw), r.adm.generation + 1);
    ck_assert_int_eq(gateway_txn(&gw, &r, bump, &calls), GATEWAY_STRADDLED);
    ck_assert_int_eq(calls, 1); /* not run for the overtaken request */
    ck_assert_int_eq(gateway_txn(&gw, NULL, bump, &calls), 2); /* admin: no request */
}
END_TEST

struct life {
    struct request *r;
    int64_t t0_us;
};

static int lifecycle(struct gateway *g, struct store *s, struct request *r, void *arg)
{
    (void)g;
    struct life *l = arg;
    struct payment *p = store_create(s, "pk_1", "order-0001", 10000, l->t0_us, r, NULL);
    ck_assert_ptr_nonnull(p);
    ck_assert_ptr_null(store_create(s, "pk_1", "order-0002", 1, l->t0_us, r, NULL));
    p->processing = true;
    ck_assert_int_eq(store_approve(s, p, l->t0_us + 1, r), 0);
    p->processing = false;
    ck_assert_int_eq(store_cancel(s, p, 4000, "partial", l->t0_us + 2, r), 0);
    ck_assert_int_eq(store_cancel(s, p, 6000, "rest", l->t0_us + 3, NULL), 0);
    ck_assert_int_eq(p->balance, 0);
    ck_assert_uint_eq(store_tx_count(s), 3);
    return 0;
}

START_TEST(test_every_status_change_is_announced_once_with_its_cause)
{
    struct seen a = {0}, b = {0};
    ck_assert_int_eq(gateway_subscribe(&gw, record, &a), 0);
    ck_assert_int_eq(gateway_subscribe(&gw, record, &b), 0);
    struct request r;
    memset(&r, 0, sizeof r);
    r.adm.generation = gateway_generation(&gw);
    struct life l = {&r, 1700000000000000};
    ck_assert_int_eq(gateway_txn(&gw, &r, lifecycle, &l), 0);
    static const enum pay_status want[] = {PAY_IN_PROGRESS, PAY_DONE, PAY_PARTIAL_CANCELED,
                                           PAY_CANCELED};
    ck_assert_int_eq(a.n, 4);
    ck_assert_int_eq(b.n, 4);
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(a.status[i], want[i]);
        ck_assert_int_eq(b.status[i], want[i]);
    }
    ck_assert_ptr_eq(a.cause[0], &r);
    ck_assert_ptr_eq(a.cause[2], &r);
    ck_assert_ptr_null(a.cause[3]); /* the last cancel was made without a request */
}
END_TEST

static int expire_twice(struct gateway *g, struct store *s, struct request *r, void *arg)
{
    (void)g;
    (void)r;
    (void)arg;
    struct payment *p = store_create(s, "pk_old", "order-old1", 500, 0, NULL, NULL);
    ck_assert_ptr_nonnull(p);
    int64_t ttl_us = 600 * INT64_C(1000000);
    ck_assert(!store_expire(s, p, ttl_us - 1, ttl_us));
    ck_assert(store_expire(s, p, ttl_us + 1, ttl_us));
    ck_assert(store_expire(s, p, ttl_us + 2, ttl_us)); /* still expired: no second event */
    return 0;
}

START_TEST(test_an_expiry_is_announced_the_first_time_only)
{
    struct seen a = {0};
    ck_assert_int_eq(gateway_subscribe(&gw, record, &a), 0);
    ck_assert_int_eq(gateway_txn(&gw, NULL, expire_twice, NULL), 0);
    ck_assert_int_eq(a.n, 2);
    ck_assert_int_eq(a.status[0], PAY_IN_PROGRESS);
    ck_assert_int_eq(a.status[1], PAY_EXPIRED);
}
END_TEST

START_TEST(test_subscribers_are_bounded)
{
    struct seen a = {0};
    for (int i = 0; i < GATEWAY_MAX_SUBSCRIBERS; i++)
        ck_assert_int_eq(gateway_subscribe(&gw, record, &a), 0);
    ck_assert_int_eq(gateway_subscribe(&gw, record, &a), -1);
}
END_TEST

static int count_payments(struct gateway *g, struct store *s, struct request *r, void *arg)
{
    (void)g;
    (void)r;
    (void)arg;
    return (int)store_payment_count(s);
}

START_TEST(test_reset_empties_the_store)
{
    struct life l = {NULL, 1700000000000000};
    ck_assert_int_eq(gateway_txn(&gw, NULL, lifecycle, &l), 0);
    ck_assert_int_eq(gateway_txn(&gw, NULL, count_payments, NULL), 1);
    gateway_reset(&gw, NULL);
    ck_assert_int_eq(gateway_txn(&gw, NULL, count_payments, NULL), 0);
}
END_TEST

Suite *make_suite(void)
{
    Suite *s = suite_create("gateway");
    TCase *tc = tcase_create("guard_and_events");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_txn_runs_for_the_current_generation_only);
    tcase_add_test(tc, test_every_status_change_is_announced_once_with_its_cause);
    tcase_add_test(tc, test_an_expiry_is_announced_the_first_time_only);
    tcase_add_test(tc, test_subscribers_are_bounded);
    tcase_add_test(tc, test_reset_empties_the_store);
    suite_add_tcase(s, tc);
    return s;
}

