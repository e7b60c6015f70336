/* check_gateway.c -- the gateway's guard, its tenants and the store's events (gateway.c,
 * tenant.c, store.c): a section runs under the store lock only for a request of its tenant's
 * current reset generation; each key has its own ledger, reset and profile state; every
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

/* A request admitted under tenant `key` now. */
static void admit_as(struct request *r, const char *key)
{
    memset(r, 0, sizeof *r);
    r->adm.tenant = gateway_tenant(&gw, key, true, NULL);
    ck_assert_ptr_nonnull(r->adm.tenant);
    r->adm.generation = tenant_generation(r->adm.tenant);
}

START_TEST(test_txn_runs_for_the_current_generation_only)
{
    struct request r;
    admit_as(&r, "test_sk_a");
    int calls = 0;
    ck_assert_int_eq(gateway_txn(&gw, &r, bump, &calls), 1);
    gateway_reset(&gw, NULL);
    ck_assert_uint_eq(tenant_generation(r.adm.tenant), r.adm.generation + 1);
    ck_assert_int_eq(gateway_txn(&gw, &r, bump, &calls), GATEWAY_STRADDLED);
    ck_assert_int_eq(calls, 1); /* not run for the overtaken request */
    ck_assert_int_eq(gateway_tenant_txn(&gw, r.adm.tenant, bump, &calls), 2); /* admin */
}
END_TEST

START_TEST(test_the_first_key_adopts_the_default_tenant_and_others_get_their_own)
{
    struct tenant *def = gateway_tenant_next(&gw, NULL);
    ck_assert_ptr_null(tenant_key(def)); /* keyless until a key arrives */
    ck_assert_ptr_null(gateway_tenant(&gw, "test_sk_a", false, NULL)); /* no create: none */
    struct tenant *a = gateway_tenant(&gw, "test_sk_a", true, NULL);
    ck_assert_ptr_eq(a, def);
    ck_assert_str_eq(tenant_key(a), "test_sk_a");
    struct tenant *b = gateway_tenant(&gw, "test_sk_b", true, NULL);
    ck_assert_ptr_nonnull(b);
    ck_assert_ptr_ne(a, b);
    ck_assert_ptr_eq(gateway_tenant(&gw, "test_sk_b", false, NULL), b);
    ck_assert_ptr_eq(gateway_tenant_next(&gw, a), b);
    ck_assert_ptr_null(gateway_tenant_next(&gw, b));
    /* Two ledgers: the same paymentKey and orderId in both. */
    ck_assert_ptr_nonnull(store_create(&a->store, "pk_1", "order-0001", 100, 1, NULL, NULL));
    ck_assert_ptr_nonnull(store_create(&b->store, "pk_1", "order-0001", 100, 1, NULL, NULL));
    ck_assert_uint_eq(store_payment_count(&a->store), 1);
    ck_assert_uint_eq(store_payment_count(&b->store), 1);
    /* Different salts: their transaction keys differ. */
    ck_assert_uint_ne(store_ledger(&a->store)->salt, store_ledger(&b->store)->salt);
}
END_TEST

START_TEST(test_a_tenant_reset_overtakes_only_its_own_requests)
{
    struct request ra, rb;
    admit_as(&ra, "test_sk_a");
    admit_as(&rb, "test_sk_b");
    ck_assert_ptr_nonnull(store_create(&rb.adm.tenant->store, "pk_b", "order-b1", 1, 1, NULL,
                                       NULL));
    gateway_reset_tenant(&gw, ra.adm.tenant, NULL);
    int calls = 0;
    ck_assert_int_eq(gateway_txn(&gw, &ra, bump, &calls), GATEWAY_STRADDLED);
    ck_assert_int_eq(gateway_txn(&gw, &rb, bump, &calls), 1);
    ck_assert_uint_eq(store_payment_count(&rb.adm.tenant->store), 1); /* B's ledger stays */
    gateway_reset(&gw, NULL);                                          /* the whole server */
    ck_assert_int_eq(gateway_txn(&gw, &rb, bump, &calls), GATEWAY_STRADDLED);
    ck_assert_uint_eq(store_payment_count(&rb.adm.tenant->store), 0);
}
END_TEST

START_TEST(test_a_tenant_has_its_own_profile_state)
{
    struct tenant *a = gateway_tenant(&gw, "test_sk_a", true, NULL);
    struct tenant *b = gateway_tenant(&gw, "test_sk_b", true, NULL);
    /* The default tenant shares the server's state; another gets its own of the same profile. */
    ck_assert_ptr_eq(gateway_tenant_live(&gw, a), gateway_live(&gw));
    struct live *lb = gateway_tenant_live(&gw, b);
    ck_assert_ptr_ne(lb, gateway_live(&gw));
    ck_assert_ptr_eq(lb->profile, gateway_live(&gw)->profile);
    ck_assert_ptr_eq(gateway_tenant_live(&gw, b), lb); /* kept while the server's stays */
    static const char text[] = "{\"name\":\"own\",\"routes\":{}}";
    struct profile *p = NULL;
    char err[ERR_LEN];
    ck_assert_msg(profile_parse(text, strlen(text), "test", NULL, NULL, &p, err) == 0, "%s", err);
    ck_assert_int_eq(gateway_apply_tenant(&gw, b, p), 0);
    ck_assert_str_eq(gateway_tenant_live(&gw, b)->profile->name, "own");
    ck_assert_str_eq(gateway_tenant_live(&gw, a)->profile->name, "t"); /* A keeps the server's */
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
    admit_as(&r, "test_sk_a");
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
    ck_assert_int_eq(gateway_tenant_txn(&gw, gateway_tenant_next(&gw, NULL), expire_twice, NULL),
                     0);
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
    struct tenant *t = gateway_tenant_next(&gw, NULL);
    ck_assert_int_eq(gateway_tenant_txn(&gw, t, lifecycle, &l), 0);
    ck_assert_int_eq(gateway_tenant_txn(&gw, t, count_payments, NULL), 1);
    gateway_reset(&gw, NULL);
    ck_assert_int_eq(gateway_tenant_txn(&gw, t, count_payments, NULL), 0);
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
    tcase_add_test(tc, test_the_first_key_adopts_the_default_tenant_and_others_get_their_own);
    tcase_add_test(tc, test_a_tenant_reset_overtakes_only_its_own_requests);
    tcase_add_test(tc, test_a_tenant_has_its_own_profile_state);
    suite_add_tcase(s, tc);
    return s;
}

