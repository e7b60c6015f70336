/* check_cluster.c -- `make cluster-test`: three fakegate instances sharing one Redis through
 * --store, behind nginx (testkit_cluster.c), show what issue 24 asks of a cluster: one
 * Idempotency-Key raced from 32 threads over the three gives one 200 and 409s, then the same
 * bytes from every instance and one charge; a response lost on one instance is replayed by
 * another, and `attempts: [1]` fires once per identity cluster-wide; a stress run through nginx
 * with an instance SIGKILLed and restarted charges no paymentKey twice and leaves one ledger,
 * the same from every instance, and one report, complete and the same from every instance,
 * judging every request answered; every instance lists every instance's requests, each naming
 * its instance, and a 400 resent to another instance is found in every instance's report;
 * Redis stopped gives 503s naming the store, no crash, and service back within a second of its
 * return; webhook deliveries come from one due-time queue in Redis: a retry after a 500 is sent
 * once though three dispatchers look, a delivery pending on a SIGKILLed instance is sent by
 * another, the journal, resend, reset and receivers are the same from every instance, and
 * faults are drawn as on one instance. A profile PUT on one instance is in force on all (and on
 * one started later); `times: 3` fires 3 times over the three; a token bucket and a
 * concurrency cap hold for the cluster's total; a confirm of a paymentKey another instance is
 * confirming is refused at its checks. Each case starts its own cluster on a fresh Redis. What
 * is shared, and what is not yet (metrics, the live page): docs/cluster.md §11.1; the webhooks'
 * queue: §11.7; the journal and the report: §11.8. Not in `make test`: it needs redis-server
 * and nginx (scripts/install-deps cluster). */
#define _GNU_SOURCE

#include <check.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "receiver.h"
#include "testkit.h"

#define RACE_THREADS 32
#define RACE_LATENCY_MS 1500
#define ATTEMPT_IDENTITIES 6
#define ATTEMPTS_EACH 3
#define STRESS_DEFAULT 10000L
#define STRESS_THREADS 16
#define STRESS_TIMEOUT_MS 20000L
#define RESENDS 3
/* Entries the SIGKILLed instance may have answered and not yet appended to the shared journal
 * (its writer's queue and the batch in flight): a bound, not an expectation. */
#define KILL_LOSS_MAX 300
#define OUTAGE_TIMEOUT_MS 10000L
#define BACK_WITHIN_MS 1000
#define POLL_MS 50

/* Every route instant but confirm, which takes `ms` (the record is PROCESSING meanwhile). */
static char *confirm_latency_profile(const char *name, int ms)
{
    char buf[512];
    snprintf(buf, sizeof buf,
             "{'name':'%s','routes':{'confirm':{'latency':{'dist':'fixed','ms':%d}},"
             "'default':{'latency':{'dist':'fixed','ms':0}}}}",
             name, ms);
    return dq(buf);
}

/* ---- same key from 32 threads over the three instances ------------------------------------ */

struct racer {
    const fg_cluster *c;
    int index;
    pthread_barrier_t *bar;
    fg_response r;
};

static void *race_one(void *arg)
{
    struct racer *w = arg;
    pthread_barrier_wait(w->bar);
    confirm_fresh(w->c->inst[w->index % CLUSTER_N], "pk_race", "order_race", 1000, "race-key",
                  10000, &w->r);
    return NULL;
}

START_TEST(test_same_key_from_32_threads_over_instances_one_200_rest_409_one_charge)
{
    fg_cluster *c = cluster_start(NULL);
    char *profile = confirm_latency_profile("cluster-slow-confirm", RACE_LATENCY_MS);
    cluster_put_profile(c, profile);
    free(profile);

    struct racer w[RACE_THREADS];
    pthread_t t[RACE_THREADS];
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, RACE_THREADS);
    for (int i = 0; i < RACE_THREADS; i++) {
        w[i] = (struct racer){.c = c, .index = i, .bar = &bar};
        ck_assert(pthread_create(&t[i], NULL, race_one, &w[i]) == 0);
    }
    for (int i = 0; i < RACE_THREADS; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&bar);

    int n_200 = 0, n_409 = 0, first = -1;
    int per_instance_200[CLUSTER_N] = {0};
    for (int i = 0; i < RACE_THREADS; i++) {
        const fg_response *r = &w[i].r;
        ck_assert_msg(r->curl_code == CURLE_OK, "thread %d (instance %d): no answer: %s", i,
                      i % CLUSTER_N + 1, r->curl_error);
        if (r->status == 200) {
            n_200++;
            per_instance_200[i % CLUSTER_N]++;
            if (first < 0)
                first = i;
        } else {
            assert_error(r, 409, "IDEMPOTENT_REQUEST_PROCESSING");
            n_409++;
        }
    }
    ck_assert_msg(n_200 == 1 && n_409 == RACE_THREADS - 1,
                  "%d answers 200 (instance 1: %d, 2: %d, 3: %d) and %d 409s: want exactly one "
                  "200 cluster-wide", n_200, per_instance_200[0], per_instance_200[1],
                  per_instance_200[2], n_409);
    assert_done(&w[first].r, "pk_race", "order_race");

    /* The record is DONE now: a resend to each instance is the stored 200, byte for byte. */
    for (int i = 0; i < CLUSTER_N; i++) {
        fg_response again;
        confirm_fresh(c->inst[i], "pk_race", "order_race", 1000, "race-key", 10000, &again);
        assert_status(&again, 200);
        ck_assert_msg(same_bytes(&again, &w[first].r),
                      "instance %d's replay differs from the 200 of instance %d:\n%s\n---\n%s",
                      i + 1, first % CLUSTER_N + 1, again.body, w[first].r.body);
        fg_response_fini(&again);
    }
    for (int i = 0; i < CLUSTER_N; i++) {
        ck_assert_msg(ledger_size(c->inst[i]) == 1, "instance %d's ledger holds %zu payments",
                      i + 1, ledger_size(c->inst[i]));
        assert_charged_once(c->inst[i], "pk_race", "order_race");
    }
    /* ... and that state is in this Redis (docs/cluster.md §11.2), not in each process. */
    ck_assert_msg(cluster_redis_dbsize(c) > 0, "Redis (%s) holds no key after a confirm",
                  c->store_url);
    for (int i = 0; i < RACE_THREADS; i++)
        fg_response_fini(&w[i].r);
    cluster_free(c);
}
END_TEST

/* One paymentKey confirmed at once on every instance under keys of their own (or none): no
 * record ties them, only the ledger rule "one approval per paymentKey" (docs/idempotency.md,
 * "is being processed" and "already approved"), which must hold across instances. */
#define MULTI_PAYMENTS 20
#define MULTI_EACH 6

struct multi {
    const fg_cluster *c;
    int index;
    pthread_barrier_t *bar;
    fg_response r[MULTI_PAYMENTS];
};

static void *multi_one(void *arg)
{
    struct multi *w = arg;
    for (int k = 0; k < MULTI_PAYMENTS; k++) {
        char pk[32], oid[32], key[48];
        snprintf(pk, sizeof pk, "pk_multi_%d", k);
        snprintf(oid, sizeof oid, "order_multi_%d", k);
        snprintf(key, sizeof key, "multi-%d-%d", k, w->index);
        pthread_barrier_wait(w->bar);
        confirm_fresh(w->c->inst[w->index % CLUSTER_N], pk, oid, 1000,
                      w->index % 2 == 0 ? key : NULL, 10000, &w->r[k]);
    }
    return NULL;
}

START_TEST(test_one_payment_under_different_keys_over_instances_approved_once)
{
    fg_cluster *c = cluster_start(NULL);
    struct multi w[MULTI_EACH];
    pthread_t t[MULTI_EACH];
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, MULTI_EACH);
    for (int i = 0; i < MULTI_EACH; i++) {
        w[i] = (struct multi){.c = c, .index = i, .bar = &bar};
        ck_assert(pthread_create(&t[i], NULL, multi_one, &w[i]) == 0);
    }
    for (int i = 0; i < MULTI_EACH; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&bar);
    for (int i = 0; i < CLUSTER_N; i++) {
        char *e = fg_server_stderr(c->inst[i]);
        ck_assert_msg(cluster_alive(c->inst[i]->pid),
                      "instance %d died under concurrent confirms of one paymentKey; its "
                      "stderr: %.1500s", i + 1, e);
        free(e);
    }
    for (int k = 0; k < MULTI_PAYMENTS; k++) {
        char pk[32], oid[32];
        snprintf(pk, sizeof pk, "pk_multi_%d", k);
        snprintf(oid, sizeof oid, "order_multi_%d", k);
        int n_200 = 0;
        for (int i = 0; i < MULTI_EACH; i++) {
            const fg_response *r = &w[i].r[k];
            ck_assert_msg(r->curl_code == CURLE_OK, "%s, thread %d (instance %d): no answer: %s",
                          pk, i, i % CLUSTER_N + 1, r->curl_error);
            if (r->status == 200)
                n_200++;
            else
                assert_error2(r, 400, "ALREADY_PROCESSED_PAYMENT", "ALREADY_PROCESSING_REQUEST");
        }
        ck_assert_msg(n_200 == 1, "%s: %d of %d concurrent confirms over the instances answered "
                      "200", pk, n_200, MULTI_EACH);
        for (int i = 0; i < CLUSTER_N; i++)
            assert_charged_once(c->inst[i], pk, oid);
        for (int i = 0; i < MULTI_EACH; i++)
            fg_response_fini(&w[i].r[k]);
    }
    cluster_free(c);
}
END_TEST

/* ---- a lost response, and attempts: [1] over the cluster ---------------------------------- */

/* Lose the response of attempt 1 of every identity (the payment commits): docs/profiles.md §4,
 * "Scripted faults". `how: close` on a fresh connection, so curl cannot resend it on its own. */
static const char lose_first_response[] =
    "{'name':'cluster-lose-first','routes':{'confirm':{'faults':[{'kind':'drop_response','p':1,"
    "'how':'close','attempts':[1]}]},'default':{'latency':{'dist':'fixed','ms':0}}}}";

/* The journal entry of instance `s` for the last request with this orderId (new reference). */
static json_t *last_entry(const fg_server *s, const char *oid)
{
    char path[160];
    snprintf(path, sizeof path, "/__admin/requests?orderId=%s", oid);
    json_t *root = admin_json(s, path);
    json_t *a = json_object_get(root, "requests");
    size_t n = json_array_size(a);
    ck_assert_msg(n > 0, "instance has no journal entry for %s", oid);
    json_t *e = json_incref(json_array_get(a, n - 1));
    json_decref(root);
    return e;
}

START_TEST(test_response_lost_on_instance_1_resent_to_instance_2_gets_the_stored_200)
{
    fg_cluster *c = cluster_start(NULL);
    char *profile = dq(lose_first_response);
    cluster_put_profile(c, profile);
    free(profile);

    fg_response lost, resent, third;
    confirm_fresh(c->inst[0], "pk_lost", "order_lost", 1000, "lost-key", 10000, &lost);
    assert_curl(&lost, CURLE_GOT_NOTHING);
    confirm_fresh(c->inst[1], "pk_lost", "order_lost", 1000, "lost-key", 10000, &resent);
    ck_assert_msg(resent.curl_code == CURLE_OK,
                  "the resend to instance 2 was lost too (%s): it was attempt 1 there, so the "
                  "attempt count is not shared", resent.curl_error);
    assert_done(&resent, "pk_lost", "order_lost");
    json_t *e = last_entry(c->inst[1], "order_lost");
    ck_assert_msg(json_is_str(e, "outcome", "replayed"),
                  "instance 2 did not replay the 200 committed on instance 1: %s",
                  json_dumps(e, JSON_COMPACT));
    ck_assert_int_eq(json_int(e, "attempt"), 2);
    json_decref(e);
    confirm_fresh(c->inst[2], "pk_lost", "order_lost", 1000, "lost-key", 10000, &third);
    assert_status(&third, 200);
    ck_assert_msg(same_bytes(&third, &resent), "instance 3's replay differs:\n%s\n---\n%s",
                  third.body, resent.body);
    for (int i = 0; i < CLUSTER_N; i++)
        assert_charged_once(c->inst[i], "pk_lost", "order_lost");
    fg_response_fini(&lost);
    fg_response_fini(&resent);
    fg_response_fini(&third);
    cluster_free(c);
}
END_TEST

START_TEST(test_attempts_1_fault_fires_once_per_identity_cluster_wide)
{
    fg_cluster *c = cluster_start(NULL);
    char *profile = dq(lose_first_response);
    cluster_put_profile(c, profile);
    free(profile);

    /* Identity j's attempt n goes to instance (j + n) % 3: each identity meets every instance. */
    for (int j = 0; j < ATTEMPT_IDENTITIES; j++) {
        char pk[32], oid[32], key[32];
        snprintf(pk, sizeof pk, "pk_att_%d", j);
        snprintf(oid, sizeof oid, "order_att_%d", j);
        snprintf(key, sizeof key, "att-key-%d", j);
        for (int n = 1; n <= ATTEMPTS_EACH; n++) {
            int i = (j + n) % CLUSTER_N;
            fg_response r;
            confirm_fresh(c->inst[i], pk, oid, 1000, key, 10000, &r);
            if (n == 1)
                ck_assert_msg(r.curl_code == CURLE_GOT_NOTHING,
                              "%s attempt 1 on instance %d: want the response lost, got %ld %s",
                              key, i + 1, r.status, r.body);
            else
                ck_assert_msg(r.curl_code == CURLE_OK && r.status == 200,
                              "%s attempt %d on instance %d: the attempts:[1] fault fired again "
                              "(%s %ld): the attempt count is per instance", key, n, i + 1,
                              r.curl_error, r.status);
            json_t *e = last_entry(c->inst[i], oid);
            ck_assert_msg(json_int(e, "attempt") == n, "%s: instance %d journaled attempt %lld, "
                          "the cluster's is %d", key, i + 1, json_int(e, "attempt"), n);
            json_decref(e);
            fg_response_fini(&r);
        }
        for (int i = 0; i < CLUSTER_N; i++)
            assert_charged_once(c->inst[i], pk, oid);
    }
    cluster_free(c);
}
END_TEST

/* ---- the journal and the report shared over the instances --------------------------------- */

#define JOURNAL_WAIT_MS 20000L

/* The /healthz of instance i (new reference), failing the test unless it answers 200. */
static json_t *health_of(const fg_cluster *c, int i)
{
    fg_response r;
    fg_request req = {.path = "/healthz", .timeout_ms = OUTAGE_TIMEOUT_MS};
    fg_http(c->inst[i], NULL, &req, &r);
    ck_assert_msg(r.curl_code == CURLE_OK && r.status == 200 && r.json != NULL,
                  "instance %d: /healthz did not answer 200 (%s %ld)", i + 1, r.curl_error,
                  r.status);
    json_t *h = json_incref(r.json);
    fg_response_fini(&r);
    return h;
}

/* Instance i's id as /healthz writes it (16 hex digits) into out. */
static void instance_id_of(const fg_cluster *c, int i, char out[17])
{
    json_t *h = health_of(c, i);
    snprintf(out, 17, "%s", json_str(h, "instance"));
    json_decref(h);
}

/* Wait (polling /healthz, the readiness probe of the shared journal) until every instance has
 * appended every gateway request that reached it: store.journal.pending 0 on each. */
static void wait_journals_written(const fg_cluster *c)
{
    for (int i = 0; i < CLUSTER_N; i++) {
        int64_t deadline = fg_now_ms() + JOURNAL_WAIT_MS;
        for (;;) {
            json_t *h = health_of(c, i);
            json_t *j = json_object_get(json_object_get(h, "store"), "journal");
            long long pending = json_int(j, "pending");
            char *text = json_dumps(h, JSON_COMPACT);
            json_decref(h);
            if (pending == 0) {
                free(text);
                break;
            }
            ck_assert_msg(fg_now_ms() < deadline, "instance %d: %lld journal entries still not "
                          "in the shared journal after %ld ms: %s", i + 1, pending,
                          JOURNAL_WAIT_MS, text);
            free(text);
            fg_pause_ms(POLL_MS);
        }
    }
}

/* GET /__admin/report of instance i (new reference). */
static json_t *report_from(const fg_cluster *c, int i)
{
    fg_response r;
    fg_request req = {.path = "/__admin/report", .timeout_ms = STRESS_TIMEOUT_MS};
    fg_http(c->inst[i], NULL, &req, &r);
    ck_assert_msg(r.curl_code == CURLE_OK && r.status == 200 && json_is_object(r.json),
                  "GET /__admin/report on instance %d: %s %ld %.500s", i + 1, r.curl_error,
                  r.status, r.body);
    json_t *v = json_incref(r.json);
    fg_response_fini(&r);
    return v;
}

/* The three instances' reports are one (nothing in the report is per instance), and complete;
 * returns instance 1's (new reference). */
static json_t *assert_same_report(const fg_cluster *c)
{
    json_t *rep[CLUSTER_N];
    for (int i = 0; i < CLUSTER_N; i++)
        rep[i] = report_from(c, i);
    for (int i = 1; i < CLUSTER_N; i++) {
        char *a = json_dumps(rep[0], JSON_COMPACT), *b = json_dumps(rep[i], JSON_COMPACT);
        ck_assert_msg(json_equal(rep[0], rep[i]), "the report of instance %d is not instance "
                      "1's:\n%.3000s\n---\n%.3000s", i + 1, b, a);
        free(a);
        free(b);
        json_decref(rep[i]);
    }
    char *text = json_dumps(rep[0], JSON_COMPACT);
    ck_assert_msg(json_is_true(json_object_get(rep[0], "complete")),
                  "the cluster's report is not complete: %.2000s", text);
    free(text);
    return rep[0];
}

/* The finding of `kind` in report `rep` (borrowed), or NULL. */
static json_t *finding_of(json_t *rep, const char *kind)
{
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(rep, "findings"), i, f) if (json_is_str(f, "kind", kind))
        return f;
    return NULL;
}

static bool has_example(json_t *finding, const char *example)
{
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(finding, "examples"), i, v)
        if (json_is_string(v) && strcmp(json_string_value(v), example) == 0)
            return true;
    return false;
}

START_TEST(test_journal_and_report_shared_requests_of_every_instance_named_seen_from_each)
{
    fg_cluster *c = cluster_start(NULL);
    char ids[CLUSTER_N][17];
    for (int i = 0; i < CLUSTER_N; i++)
        instance_id_of(c, i, ids[i]);
    /* One confirm to each instance. */
    for (int i = 0; i < CLUSTER_N; i++) {
        char pk[32], oid[32], key[32];
        snprintf(pk, sizeof pk, "pk_shared_%d", i);
        snprintf(oid, sizeof oid, "order_shared_%d", i);
        snprintf(key, sizeof key, "shared-key-%d", i);
        fg_response r;
        confirm_fresh(c->inst[i], pk, oid, 1000, key, 10000, &r);
        assert_done(&r, pk, oid);
        fg_response_fini(&r);
    }
    /* A client misbehaving over two instances: its payment approved on instance 1, it confirms
     * it again under a second key on instance 2 (400 ALREADY_PROCESSED_PAYMENT) and resends
     * that same request to instance 3 (retried_4xx, and new_key_resend). */
    fg_response r;
    confirm_fresh(c->inst[0], "pk_retry4", "order_retry4", 1000, "retry4-key-1", 10000, &r);
    assert_done(&r, "pk_retry4", "order_retry4");
    fg_response_fini(&r);
    for (int i = 1; i < CLUSTER_N; i++) {
        confirm_fresh(c->inst[i], "pk_retry4", "order_retry4", 1000, "retry4-key-2", 10000, &r);
        assert_error(&r, 400, "ALREADY_PROCESSED_PAYMENT");
        fg_response_fini(&r);
    }
    wait_journals_written(c);

    /* Every instance lists every instance's requests, each naming the instance it reached. */
    for (int i = 0; i < CLUSTER_N; i++) {
        json_t *root = admin_json(c->inst[i], "/__admin/requests");
        json_t *a = json_object_get(root, "requests");
        char *text = json_dumps(root, JSON_COMPACT);
        ck_assert_msg(json_array_size(a) == CLUSTER_N + 3 && json_int(root, "total") ==
                      CLUSTER_N + 3, "instance %d lists %zu requests, want %d: %.4000s", i + 1,
                      json_array_size(a), CLUSTER_N + 3, text);
        for (int j = 0; j < CLUSTER_N; j++) {
            char oid[32];
            snprintf(oid, sizeof oid, "order_shared_%d", j);
            bool found = false;
            size_t k;
            json_t *e;
            json_array_foreach(a, k, e) if (json_is_str(e, "order_id", oid)) {
                ck_assert_msg(!found, "instance %d lists %s twice: %.4000s", i + 1, oid, text);
                found = true;
                ck_assert_msg(json_is_str(e, "instance", ids[j]) &&
                              json_is_str(e, "outcome", "ok") && json_int(e, "status") == 200,
                              "instance %d: %s should be a 200 of instance %s: %.4000s", i + 1,
                              oid, ids[j], text);
            }
            ck_assert_msg(found, "instance %d does not list %s (sent to instance %d): %.4000s",
                          i + 1, oid, j + 1, text);
        }
        free(text);
        json_decref(root);
        /* A filter reads the cluster's entries too: the three confirms of order_retry4, oldest
         * first, on the instances they reached. */
        root = admin_json(c->inst[i], "/__admin/requests?orderId=order_retry4");
        a = json_object_get(root, "requests");
        text = json_dumps(root, JSON_COMPACT);
        ck_assert_msg(json_array_size(a) == 3, "instance %d: ?orderId=order_retry4 lists %zu, "
                      "want 3: %.3000s", i + 1, json_array_size(a), text);
        for (int j = 0; j < 3; j++) {
            json_t *e = json_array_get(a, (size_t)j);
            ck_assert_msg(json_is_str(e, "instance", ids[j]) &&
                          json_int(e, "status") == (j == 0 ? 200 : 400),
                          "instance %d: order_retry4's request %d should be instance %s's %d: "
                          "%.3000s", i + 1, j + 1, ids[j], j == 0 ? 200 : 400, text);
        }
        free(text);
        json_decref(root);
    }

    /* The same report from every instance, judging the six requests, with the resend that
     * crossed instances found. */
    json_t *rep = assert_same_report(c);
    char *text = json_dumps(rep, JSON_COMPACT);
    ck_assert_msg(json_int(rep, "judged_requests") == CLUSTER_N + 3, "judged: %s", text);
    json_t *f = finding_of(rep, "retried_4xx");
    ck_assert_msg(f != NULL && json_int(f, "count") == 1 && has_example(f, "order_retry4"),
                  "the 400 resent from instance 2 to instance 3 is not a retried_4xx: %s", text);
    f = finding_of(rep, "new_key_resend");
    ck_assert_msg(f != NULL && has_example(f, "order_retry4"),
                  "the second key's confirms of a payment approved on instance 1 are not a "
                  "new_key_resend: %s", text);
    free(text);
    json_decref(rep);

    /* A reset on one instance empties the shared journal for all. */
    fg_request reset = {.method = "POST", .path = "/__admin/reset", .timeout_ms = 10000};
    fg_http(c->inst[2], NULL, &reset, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    for (int i = 0; i < CLUSTER_N; i++) {
        json_t *root = admin_json(c->inst[i], "/__admin/requests");
        ck_assert_msg(json_int(root, "total") == 0, "instance %d still lists %lld requests after "
                      "a reset on instance 3", i + 1, json_int(root, "total"));
        json_decref(root);
    }
    rep = assert_same_report(c);
    ck_assert_int_eq(json_int(rep, "judged_requests"), 0);
    ck_assert_uint_eq(json_array_size(json_object_get(rep, "findings")), 0);
    json_decref(rep);
    cluster_free(c);
}
END_TEST

/* The requests the shared journal lists for tenant `key` (X-Fakegate-Tenant) on instance i:
 * their count, each of them that tenant's. */
static long long tenant_requests(const fg_cluster *c, int i, const char *key)
{
    char h[160];
    snprintf(h, sizeof h, "X-Fakegate-Tenant: %s", key);
    const char *headers[] = {h, NULL};
    fg_request req = {.path = "/__admin/requests", .headers = headers, .timeout_ms = 10000};
    fg_response r;
    fg_http(c->inst[i], NULL, &req, &r);
    ck_assert_msg(r.curl_code == CURLE_OK && r.status == 200, "instance %d: %s %ld %.300s",
                  i + 1, r.curl_error, r.status, r.body);
    size_t k;
    json_t *e;
    json_array_foreach(json_object_get(r.json, "requests"), k, e)
        ck_assert_msg(json_is_str(e, "tenant", key), "instance %d lists another tenant's request "
                      "for %s: %.1000s", i + 1, key, r.body);
    long long n = json_int(r.json, "total");
    fg_response_fini(&r);
    return n;
}

START_TEST(test_tenant_reset_on_one_instance_hides_its_requests_on_every_instance)
{
    fg_cluster *c = cluster_start(NULL);
    static const char *const keys[2] = {"test_sk_cluster_a", "test_sk_cluster_b"};
    /* Tenant a confirms on instance 1, tenant b on instances 2 and 3. */
    for (int i = 0; i < CLUSTER_N; i++) {
        char pk[32], oid[32];
        snprintf(pk, sizeof pk, "pk_tenant_%d", i);
        snprintf(oid, sizeof oid, "order_tenant_%d", i);
        fg_response r;
        confirm_as_key(c->inst[i], keys[i == 0 ? 0 : 1], pk, oid, 1000, NULL, 10000, &r);
        assert_done(&r, pk, oid);
        fg_response_fini(&r);
    }
    /* ... and reads one of them on instance 1, which so learns of tenant b (an instance learns
     * of a tenant at its next section, docs/cluster.md §11.1: an admin call naming one it has
     * not seen yet gets 404). */
    char auth[256];
    snprintf(auth, sizeof auth, "Authorization: Basic %s", "dGVzdF9za19jbHVzdGVyX2I6");
    const char *read_h[] = {auth, NULL};
    fg_request read = {.path = "/v1/payments/pk_tenant_1", .headers = read_h,
                       .timeout_ms = 10000};
    fg_response r;
    fg_http(c->inst[0], NULL, &read, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    wait_journals_written(c);
    for (int i = 0; i < CLUSTER_N; i++) {
        ck_assert_int_eq(tenant_requests(c, i, keys[0]), 1);
        ck_assert_int_eq(tenant_requests(c, i, keys[1]), 3);
    }
    /* Tenant b's reset on instance 1 hides its requests everywhere, and only its. */
    char h[160];
    snprintf(h, sizeof h, "X-Fakegate-Tenant: %s", keys[1]);
    const char *headers[] = {h, NULL};
    fg_request reset = {.method = "POST", .path = "/__admin/reset", .headers = headers,
                        .timeout_ms = 10000};
    fg_http(c->inst[0], NULL, &reset, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    for (int i = 0; i < CLUSTER_N; i++) {
        ck_assert_int_eq(tenant_requests(c, i, keys[0]), 1);
        ck_assert_int_eq(tenant_requests(c, i, keys[1]), 0);
    }
    json_t *rep = assert_same_report(c);
    ck_assert_int_eq(json_int(rep, "judged_requests"), 1);
    json_decref(rep);
    cluster_free(c);
}
END_TEST

/* ---- stress through nginx with an instance killed and restarted --------------------------- */

struct spay {
    pthread_mutex_t lock;
    int n_keys;           /* confirm keys <pk>-c-0 .. n_keys-1 handed out */
    int n_cancels;        /* cancel keys <pk>-x-0 .. */
    char approved_at[64]; /* of the first confirm 200, "" before */
    int approvals_seen;   /* distinct approvedAt values answered (1 unless charged twice) */
};

struct stress {
    fg_cluster *c;
    long total;
    int payments;
    struct spay *pay;
    atomic_long next, done, seeded;
    atomic_long n_200, n_4xx, n_502, n_503, n_other, n_curl, n_resent;
    atomic_long n_confirm_200, n_cancel_200;
    pthread_mutex_t lock;
    char first_other[1024];
};

static uint64_t mix64(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static void note_other(struct stress *st, const char *what, const fg_response *r)
{
    pthread_mutex_lock(&st->lock);
    if (st->first_other[0] == '\0')
        snprintf(st->first_other, sizeof st->first_other, "%s: curl %d %s, status %ld %.300s",
                 what, (int)r->curl_code, r->curl_error, r->status, r->body);
    pthread_mutex_unlock(&st->lock);
}

static void tally(struct stress *st, const char *what, const fg_response *r)
{
    if (r->curl_code != CURLE_OK) {
        atomic_fetch_add(&st->n_curl, 1);
        note_other(st, what, r);
    } else if (r->status == 200) {
        atomic_fetch_add(&st->n_200, 1);
    } else if (r->status >= 400 && r->status < 500) {
        atomic_fetch_add(&st->n_4xx, 1);
    } else if (r->status == 502) {
        atomic_fetch_add(&st->n_502, 1); /* nginx: the instance it picked was down */
    } else if (r->status == 503 && fg_error_code(r) != NULL &&
               strcmp(fg_error_code(r), "SERVICE_UNAVAILABLE") == 0) {
        atomic_fetch_add(&st->n_503, 1); /* the store refused: nothing charged, resent */
    } else {
        atomic_fetch_add(&st->n_other, 1);
        note_other(st, what, r);
    }
}

/* Send `req` through nginx; a keyed request answered 502 (its instance died, or lost the
 * answer: nginx passes on a closed upstream connection as 502) or 503 SERVICE_UNAVAILABLE (the
 * store could not be reached) is resent at once under its key, up to RESENDS times, so it lands
 * on another instance, which must answer from the store. */
static void send_resending(struct stress *st, CURL *h, const fg_request *req, bool keyed,
                           const char *what, fg_response *r)
{
    for (int n = 0;; n++) {
        fg_http(&st->c->lb, h, req, r);
        tally(st, what, r);
        if (!keyed || n == RESENDS || r->curl_code != CURLE_OK ||
            (r->status != 502 && r->status != 503))
            return;
        atomic_fetch_add(&st->n_resent, 1);
        fg_response_fini(r);
    }
}

static void *stress_worker(void *arg)
{
    struct stress *st = arg;
    CURL *h = curl_easy_init();
    ck_assert(h != NULL);
    uint64_t rng = UINT64_C(0x5eedc1a5) + (uint64_t)atomic_fetch_add(&st->seeded, 1) * 7919u;
    for (;;) {
        long g = atomic_fetch_add(&st->next, 1);
        if (g >= st->total)
            break;
        uint64_t x = mix64(&rng);
        /* A window that slides over the payments, so each gets confirmed, resent and
         * cancelled while it is in play. */
        int window = st->payments < 64 ? st->payments : 64;
        int k = (int)((g * st->payments / st->total + (long)(x % (uint64_t)window)) %
                      st->payments);
        int pick = (int)((x >> 32) % 100);
        struct spay *p = &st->pay[k];
        char pk[32], oid[32], key[64], key_h[96], path[96], body[192];
        snprintf(pk, sizeof pk, "pk_s%05d", k);
        snprintf(oid, sizeof oid, "order_s%05d", k);
        fg_response r;
        const char *headers[3] = {st->c->lb.auth_header, NULL, NULL};
        fg_request req = {.headers = headers, .timeout_ms = STRESS_TIMEOUT_MS};
        if (pick < 45) { /* confirm: resent under its last key, a new key, or none */
            int j = -1;
            pthread_mutex_lock(&p->lock);
            if (pick < 30)
                j = p->n_keys > 0 ? p->n_keys - 1 : p->n_keys++;
            else if (pick < 40)
                j = p->n_keys++;
            pthread_mutex_unlock(&p->lock);
            snprintf(key, sizeof key, "%s-c-%d", pk, j);
            snprintf(key_h, sizeof key_h, "Idempotency-Key: %s", key);
            if (j >= 0)
                headers[1] = key_h;
            snprintf(body, sizeof body,
                     "{\"paymentKey\":\"%s\",\"orderId\":\"%s\",\"amount\":10000}", pk, oid);
            req.method = "POST";
            req.path = CONFIRM_PATH;
            req.body = body;
            send_resending(st, h, &req, j >= 0, "confirm", &r);
            if (r.curl_code == CURLE_OK && r.status == 200) {
                atomic_fetch_add(&st->n_confirm_200, 1);
                const char *at = fg_json_str(r.json, "approvedAt");
                pthread_mutex_lock(&p->lock);
                if (at == NULL)
                    p->approvals_seen = 99;
                else if (p->approved_at[0] == '\0') {
                    snprintf(p->approved_at, sizeof p->approved_at, "%s", at);
                    p->approvals_seen = 1;
                } else if (strcmp(p->approved_at, at) != 0)
                    p->approvals_seen++;
                pthread_mutex_unlock(&p->lock);
            }
        } else if (pick < 65) { /* cancel: a new one (4 in 5 partial) or a resend of one */
            int n;
            pthread_mutex_lock(&p->lock);
            if (pick < 58 || p->n_cancels == 0)
                n = p->n_cancels++;
            else
                n = (int)((x >> 8) % (uint64_t)p->n_cancels);
            pthread_mutex_unlock(&p->lock);
            snprintf(key_h, sizeof key_h, "Idempotency-Key: %s-x-%d", pk, n);
            headers[1] = key_h;
            if (n % 5 == 4)
                snprintf(body, sizeof body, "{\"cancelReason\":\"cluster cancel %d\"}", n);
            else
                snprintf(body, sizeof body,
                         "{\"cancelReason\":\"cluster cancel %d\",\"cancelAmount\":1000}", n);
            snprintf(path, sizeof path, "/v1/payments/%s/cancel", pk);
            req.method = "POST";
            req.path = path;
            req.body = body;
            send_resending(st, h, &req, true, "cancel", &r);
            if (r.curl_code == CURLE_OK && r.status == 200)
                atomic_fetch_add(&st->n_cancel_200, 1);
        } else { /* reads */
            if (pick < 83)
                snprintf(path, sizeof path, "/v1/payments/%s", pk);
            else
                snprintf(path, sizeof path, "/v1/payments/orders/%s", oid);
            req.path = path;
            fg_http(&st->c->lb, h, &req, &r);
            tally(st, "read", &r);
        }
        fg_response_fini(&r);
        atomic_fetch_add(&st->done, 1);
    }
    curl_easy_cleanup(h);
    return NULL;
}

/* The ledger of instance i, sorted by paymentKey (new reference). */
static json_t *ledger_of(const fg_cluster *c, int i)
{
    fg_response r;
    fg_request req = {.path = "/__admin/payments", .timeout_ms = STRESS_TIMEOUT_MS};
    fg_http(c->inst[i], NULL, &req, &r);
    json_t *a = json_object_get(r.json, "payments");
    if (r.status != 200 || !json_is_array(a)) {
        char *e = fg_server_stderr(c->inst[i]);
        ck_abort_msg("GET /__admin/payments on instance %d: curl %s, %ld %.500s; its stderr: "
                     "%.1500s", i + 1, r.curl_error, r.status, r.body, e);
    }
    json_incref(a);
    fg_response_fini(&r);
    return a;
}

static const char *entry_pk(const json_t *e)
{
    return fg_json_str(json_object_get(e, "payment"), "paymentKey");
}

START_TEST(test_stress_through_nginx_instance_killed_and_restarted_charged_at_most_once)
{
    const char *n_env = getenv("CLUSTER_STRESS");
    long total = n_env != NULL && n_env[0] != '\0' ? strtol(n_env, NULL, 10) : STRESS_DEFAULT;
    ck_assert_msg(total >= 1000 && total <= 10000000, "CLUSTER_STRESS=%s: 1000 ... 10^7",
                  n_env);
    fg_cluster *c = cluster_start(NULL);
    /* A little processing latency, so that resends meet records still PROCESSING, and 1 answer
     * in 100 lost after the commit, so that resends meet the stored answer on other instances. */
    char *profile = dq("{'name':'cluster-stress','routes':{"
                       "'confirm':{'latency':{'dist':'uniform','min_ms':0,'max_ms':3},"
                       "'faults':[{'kind':'drop_response','p':0.01,'how':'close'}]},"
                       "'cancel':{'latency':{'dist':'uniform','min_ms':0,'max_ms':2},"
                       "'faults':[{'kind':'drop_response','p':0.01,'how':'close'}]},"
                       "'default':{'latency':{'dist':'fixed','ms':0}}}}");
    cluster_put_profile(c, profile);
    free(profile);

    struct stress st = {.c = c, .total = total};
    st.payments = (int)(total / 20 < 100 ? 100 : total / 20);
    st.pay = calloc((size_t)st.payments, sizeof *st.pay);
    ck_assert(st.pay != NULL);
    for (int k = 0; k < st.payments; k++)
        pthread_mutex_init(&st.pay[k].lock, NULL);
    pthread_mutex_init(&st.lock, NULL);

    int64_t t0 = fg_now_ms();
    pthread_t t[STRESS_THREADS];
    for (int i = 0; i < STRESS_THREADS; i++)
        ck_assert(pthread_create(&t[i], NULL, stress_worker, &st) == 0);
    /* Halfway through, instance 2 is SIGKILLed and started again on its port and the store
     * (on this thread: the instances are its children). */
    while (atomic_load(&st.done) < total / 2)
        fg_pause_ms(2);
    int64_t k0 = fg_now_ms();
    cluster_kill(c, 1);
    cluster_restart(c, 1);
    int64_t down_ms = fg_now_ms() - k0;
    for (int i = 0; i < STRESS_THREADS; i++)
        pthread_join(t[i], NULL);
    int64_t wall_ms = fg_now_ms() - t0;

    printf("cluster stress: %ld requests through nginx, %d threads, %d paymentKeys in %.1f s "
           "(%.0f req/s); instance 2 down %" PRId64 " ms; 200: %ld (confirms %ld, cancels %ld), "
           "4xx: %ld, 502: %ld, 503: %ld, resent after either: %ld, other: %ld, no answer: %ld\n",
           total, STRESS_THREADS, st.payments, (double)wall_ms / 1000.0,
           (double)total * 1000.0 / (double)(wall_ms > 0 ? wall_ms : 1), down_ms,
           atomic_load(&st.n_200), atomic_load(&st.n_confirm_200),
           atomic_load(&st.n_cancel_200), atomic_load(&st.n_4xx), atomic_load(&st.n_502),
           atomic_load(&st.n_503), atomic_load(&st.n_resent), atomic_load(&st.n_other),
           atomic_load(&st.n_curl));
    fflush(stdout);
    for (int i = 0; i < CLUSTER_N; i++) {
        char *e = fg_server_stderr(c->inst[i]);
        ck_assert_msg(cluster_alive(c->inst[i]->pid), "instance %d died during the stress (not "
                      "the kill); its stderr: %.1500s", i + 1, e);
        free(e);
    }
    ck_assert_msg(atomic_load(&st.n_other) == 0 && atomic_load(&st.n_curl) == 0,
                  "%ld answers neither 200, 4xx, nginx's 502 nor the store's 503, %ld without "
                  "an answer; the first: %s", atomic_load(&st.n_other), atomic_load(&st.n_curl),
                  st.first_other);

    /* Charged at most once, as the clients saw it: one approvedAt per paymentKey. */
    for (int k = 0; k < st.payments; k++)
        ck_assert_msg(st.pay[k].approvals_seen <= 1,
                      "pk_s%05d: confirms answered 200 with %d different approvals", k,
                      st.pay[k].approvals_seen);

    /* ... and as every instance's ledger says; the three ledgers are one. */
    json_t *ledger[CLUSTER_N];
    for (int i = 0; i < CLUSTER_N; i++)
        ledger[i] = ledger_of(c, i);
    size_t n_charged = 0;
    for (int i = 0; i < CLUSTER_N; i++) {
        size_t idx;
        json_t *e;
        json_array_foreach(ledger[i], idx, e) {
            long long charges = json_int(e, "charges");
            ck_assert_msg(charges <= 1, "instance %d: %s charged %lld times", i + 1, entry_pk(e),
                          charges);
            if (i == 0 && charges == 1)
                n_charged++;
        }
    }
    json_t *by_pk = json_object(); /* instance 1's entries by paymentKey (borrowed values) */
    size_t idx;
    json_t *e;
    json_array_foreach(ledger[0], idx, e) {
        const char *epk = entry_pk(e);
        ck_assert_msg(epk != NULL && json_object_get(by_pk, epk) == NULL,
                      "instance 1's ledger: entry %zu has no paymentKey or a repeated one", idx);
        json_object_set(by_pk, epk, e);
    }
    for (int k = 0; k < st.payments; k++) {
        if (st.pay[k].approved_at[0] == '\0')
            continue;
        char pk[32];
        snprintf(pk, sizeof pk, "pk_s%05d", k);
        e = json_object_get(by_pk, pk);
        ck_assert_msg(e != NULL, "%s: a client was answered 200, instance 1's ledger lacks it", pk);
        const char *at = fg_json_str(json_object_get(e, "payment"), "approvedAt");
        ck_assert_msg(json_int(e, "charges") == 1 && at != NULL &&
                      strcmp(at, st.pay[k].approved_at) == 0,
                      "%s: a client was answered the approval of %s, instance 1's ledger says "
                      "charges %lld approvedAt %s", pk, st.pay[k].approved_at,
                      json_int(e, "charges"), at != NULL ? at : "null");
    }
    json_decref(by_pk);
    for (int i = 1; i < CLUSTER_N; i++) {
        if (json_equal(ledger[0], ledger[i]))
            continue;
        size_t n0 = json_array_size(ledger[0]), ni = json_array_size(ledger[i]);
        size_t d = 0;
        while (d < n0 && d < ni && json_equal(json_array_get(ledger[0], d),
                                              json_array_get(ledger[i], d)))
            d++;
        char *a = json_dumps(json_array_get(ledger[0], d), JSON_COMPACT);
        char *b = json_dumps(json_array_get(ledger[i], d), JSON_COMPACT);
        ck_abort_msg("the ledger of instance %d (%zu payments) is not instance 1's (%zu); "
                     "first difference at entry %zu:\n%.800s\n---\n%.800s", i + 1, ni, n0, d,
                     a != NULL ? a : "(none)", b != NULL ? b : "(none)");
    }
    printf("cluster stress: checked in %.1f s after the run: %zu payments in the ledger, %zu "
           "charged once, none twice; the same ledger from all %d instances\n",
           (double)(fg_now_ms() - t0 - wall_ms) / 1000.0, json_array_size(ledger[0]),
           n_charged, CLUSTER_N);
    /* The report complete and the same from every instance (issue 24): each builds it from
     * the shared journal, which holds every request an instance answered -- its answer reached
     * the client (200, 4xx, the store's 503) or was lost by a drop_response fault (nginx's 502)
     * -- except those instance 2 had answered but not yet appended when it was SIGKILLed (its
     * writer's queue dies with it; requests it held never ended and are in no journal). */
    int64_t r0 = fg_now_ms();
    wait_journals_written(c);
    json_t *rep = assert_same_report(c);
    long long judged = json_int(rep, "judged_requests");
    json_t *dropped = admin_json(c->inst[0], "/__admin/requests?outcome=dropped_response&limit=1");
    long long n_dropped = json_int(dropped, "total");
    json_decref(dropped);
    long long answered = atomic_load(&st.n_200) + atomic_load(&st.n_4xx) + atomic_load(&st.n_503);
    long long lost_at_kill = answered + n_dropped - judged;
    printf("cluster stress: the report (the same from all %d instances, complete) judged %lld "
           "requests: %lld answered + %lld lost by drop_response - %lld answered by instance 2 "
           "but not yet in the shared journal when it was killed; read in %.1f s\n",
           CLUSTER_N, judged, answered, n_dropped, lost_at_kill,
           (double)(fg_now_ms() - r0) / 1000.0);
    fflush(stdout);
    ck_assert_msg(lost_at_kill >= 0 && lost_at_kill <= KILL_LOSS_MAX,
                  "the report judged %lld requests; the clients got %lld answers and %lld were "
                  "dropped by the profile: %lld missing (at most %d may be, those the killed "
                  "instance had not appended yet)", judged, answered, n_dropped, lost_at_kill,
                  KILL_LOSS_MAX);
    json_decref(rep);
    for (int i = 0; i < CLUSTER_N; i++)
        json_decref(ledger[i]);
    for (int k = 0; k < st.payments; k++)
        pthread_mutex_destroy(&st.pay[k].lock);
    free(st.pay);
    cluster_free(c);
}
END_TEST

/* ---- Redis stopped mid-run ---------------------------------------------------------------- */

/* /healthz of instance i: 200 with "store": {"kind": "redis", "state": want}. */
static void assert_store_state(const fg_cluster *c, int i, const char *want)
{
    fg_response r;
    fg_request req = {.path = "/healthz", .timeout_ms = OUTAGE_TIMEOUT_MS, .forbid_reuse = true};
    fg_http(c->inst[i], NULL, &req, &r);
    ck_assert_msg(r.curl_code == CURLE_OK && r.status == 200,
                  "instance %d: /healthz did not answer 200 (%s %ld)", i + 1, r.curl_error,
                  r.status);
    json_t *store = json_object_get(r.json, "store");
    ck_assert_msg(json_is_str(store, "kind", "redis") && json_is_str(store, "state", want),
                  "instance %d: /healthz should say store kind redis, state %s: %s", i + 1, want,
                  r.body);
    fg_response_fini(&r);
}

START_TEST(test_redis_stopped_gives_503_naming_the_store_no_crash_and_back_within_1s)
{
    fg_cluster *c = cluster_start(NULL);
    for (int i = 0; i < CLUSTER_N; i++) {
        char pk[32], oid[32];
        snprintf(pk, sizeof pk, "pk_before_%d", i);
        snprintf(oid, sizeof oid, "order_before_%d", i);
        fg_response r;
        confirm_fresh(c->inst[i], pk, oid, 1000, NULL, 10000, &r);
        assert_done(&r, pk, oid);
        fg_response_fini(&r);
        assert_store_state(c, i, "up");
    }

    cluster_signal_redis(c, SIGSTOP);
    for (int i = 0; i < CLUSTER_N; i++) {
        char pk[32], oid[32], key[32];
        snprintf(pk, sizeof pk, "pk_outage_%d", i);
        snprintf(oid, sizeof oid, "order_outage_%d", i);
        snprintf(key, sizeof key, "outage-key-%d", i);
        fg_response r;
        confirm_fresh(c->inst[i], pk, oid, 1000, key, OUTAGE_TIMEOUT_MS, &r);
        assert_error(&r, 503, "SERVICE_UNAVAILABLE");
        const char *msg = fg_json_str(r.json, "message");
        ck_assert_msg(strstr(msg, c->store_url) != NULL || strstr(msg, "redis://") != NULL,
                      "instance %d: the 503 does not name the store (%s): %s", i + 1,
                      c->store_url, msg);
        fg_response_fini(&r);
        ck_assert_msg(cluster_alive(c->inst[i]->pid), "instance %d died with Redis stopped",
                      i + 1);
        assert_store_state(c, i, "down");
    }

    cluster_signal_redis(c, SIGCONT);
    int64_t t0 = fg_now_ns();
    int64_t back_ms[CLUSTER_N];
    for (int i = 0; i < CLUSTER_N; i++) {
        for (int n = 0;; n++) {
            char pk[32], oid[32];
            snprintf(pk, sizeof pk, "pk_after_%d_%d", i, n);
            snprintf(oid, sizeof oid, "order_after_%d_%d", i, n);
            fg_response r;
            confirm_fresh(c->inst[i], pk, oid, 1000, NULL, OUTAGE_TIMEOUT_MS, &r);
            bool ok = r.curl_code == CURLE_OK && r.status == 200;
            int64_t now_ms = (r.done_ns - t0) / MS;
            fg_response_fini(&r);
            if (ok) {
                back_ms[i] = now_ms;
                break;
            }
            ck_assert_msg(now_ms < 5 * BACK_WITHIN_MS,
                          "instance %d: no confirm succeeded within %d ms of SIGCONT", i + 1,
                          5 * BACK_WITHIN_MS);
            fg_pause_ms(POLL_MS);
        }
    }
    printf("cluster outage: a confirm succeeded %" PRId64 ", %" PRId64 ", %" PRId64
           " ms after Redis's SIGCONT on instances 1, 2, 3\n", back_ms[0], back_ms[1],
           back_ms[2]);
    fflush(stdout);
    for (int i = 0; i < CLUSTER_N; i++)
        ck_assert_msg(back_ms[i] < BACK_WITHIN_MS, "instance %d: back %" PRId64 " ms after "
                      "Redis returned, want under %d ms", i + 1, back_ms[i], BACK_WITHIN_MS);
    for (int i = 0; i < CLUSTER_N; i++) {
        assert_store_state(c, i, "up");
        /* A 503 charged nothing anywhere: no local fallback. */
        for (int j = 0; j < CLUSTER_N; j++) {
            char oid[32];
            snprintf(oid, sizeof oid, "order_outage_%d", j);
            json_t *a = fg_admin_payments(c->inst[i], oid);
            ck_assert_msg(a != NULL && json_array_size(a) == 0,
                          "instance %d's ledger holds %s, answered 503", i + 1, oid);
            json_decref(a);
        }
    }
    cluster_free(c);
}
END_TEST

/* ---- webhook deliveries from the shared due-time queue (docs/cluster.md §11.7) ------------ */

#define HOOK_WAIT_MS 15000
#define RX(st) ((struct rx_answer){RX_STATUS, (st)})

/* A cluster whose instances all have --webhook-url rx's. */
static fg_cluster *hooked_cluster(const struct receiver *rx)
{
    static const char *args[3];
    args[0] = "--webhook-url";
    args[1] = receiver_url(rx);
    args[2] = NULL;
    return cluster_start(args);
}

/* Instance i's deliveries journal (filtered by `query`, or all): a new reference to its array. */
static json_t *deliveries_of(const fg_cluster *c, int i, const char *query)
{
    char path[256];
    snprintf(path, sizeof path, "/__admin/webhooks/deliveries%s%s", query ? "?" : "",
             query ? query : "");
    json_t *root = admin_json(c->inst[i], path);
    json_t *d = json_incref(json_object_get(root, "deliveries"));
    json_decref(root);
    ck_assert_msg(json_is_array(d), "instance %d: %s has no \"deliveries\" array", i + 1, path);
    return d;
}

/* Attempts of delivery d that have ended (duration_ms set). */
static size_t ended(const json_t *d)
{
    json_t *a = json_object_get(d, "attempts");
    size_t n = 0;
    for (size_t k = 0; k < json_array_size(a); k++)
        if (json_is_number(json_object_get(json_array_get(a, k), "duration_ms")))
            n++;
    return n;
}

/* Poll instance i's journal until the only delivery of `pk` has `status` and `n` attempts, all
 * ended; a new reference to it. */
static json_t *wait_delivery(const fg_cluster *c, int i, const char *pk, const char *status,
                             size_t n)
{
    char q[128];
    snprintf(q, sizeof q, "paymentKey=%s", pk);
    int64_t deadline = fg_now_ms() + HOOK_WAIT_MS;
    for (;;) {
        json_t *all = deliveries_of(c, i, q);
        json_t *d = json_array_size(all) == 1 ? json_array_get(all, 0) : NULL;
        if (d && json_is_str(d, "status", status) && ended(d) == n &&
            json_array_size(json_object_get(d, "attempts")) == n) {
            json_incref(d);
            json_decref(all);
            return d;
        }
        if (fg_now_ms() > deadline) {
            char *t = json_dumps(all, JSON_COMPACT);
            ck_abort_msg("instance %d: no delivery of %s %s with %zu ended attempts within %d "
                         "ms: %.3000s", i + 1, pk, status, n, HOOK_WAIT_MS, t);
        }
        json_decref(all);
        fg_pause_ms(POLL_MS / 5);
    }
}

static void advance_clock(const fg_cluster *c, int i, double s)
{
    char body[64];
    snprintf(body, sizeof body, "{\"advance_s\":%.3f}", s);
    fg_response r;
    admin_call(c->inst[i], "POST", "/__admin/clock", body, NULL, &r);
    ck_assert_msg(r.status == 200, "instance %d: POST /__admin/clock: %ld %s", i + 1, r.status,
                  r.body);
    fg_response_fini(&r);
}

/* The receiver's request k: it must have arrived. */
static struct rx_request request_at(struct receiver *rx, size_t k)
{
    struct rx_request q;
    ck_assert_msg(receiver_get(rx, k, &q), "the receiver has %zu requests, not %zu",
                  receiver_count(rx), k + 1);
    return q;
}

static void confirm_ok(const fg_server *s, const char *pk, const char *oid)
{
    fg_response r;
    confirm_fresh(s, pk, oid, 1000, NULL, 10000, &r);
    assert_done(&r, pk, oid);
    fg_response_fini(&r);
}

START_TEST(test_webhook_retry_after_500_sent_once_cluster_wide_with_three_dispatchers)
{
    const struct rx_answer script[] = {RX(500), RX(200)};
    struct receiver *rx = receiver_start(script, 2);
    ck_assert(rx != NULL);
    fg_cluster *c = hooked_cluster(rx);
    confirm_ok(c->inst[0], "pk_hook_retry", "order_hook_retry");

    /* Attempt 1 failed: the delivery is pending in the store, seen so from every instance. */
    for (int i = 0; i < CLUSTER_N; i++) {
        json_t *d = wait_delivery(c, i, "pk_hook_retry", "pending", 1);
        ck_assert_int_eq(json_int(json_array_get(json_object_get(d, "attempts"), 0),
                                  "http_status"), 500);
        ck_assert_msg(json_str(d, "next_attempt_at") != NULL,
                      "instance %d: the pending delivery shows no next_attempt_at", i + 1);
        json_decref(d);
        ck_assert_msg(metric1(c->inst[i], "fakegate_webhook_pending", NULL, NULL) == 1.0,
                      "instance %d: fakegate_webhook_pending is %g, the cluster has 1", i + 1,
                      metric1(c->inst[i], "fakegate_webhook_pending", NULL, NULL));
    }
    ck_assert_uint_eq(receiver_count(rx), 1);

    /* The retry falls due on the shared clock; all three dispatchers look for it. */
    advance_clock(c, 1, 60);
    for (int i = 0; i < CLUSTER_N; i++) {
        json_t *d = wait_delivery(c, i, "pk_hook_retry", "delivered", 2);
        json_t *a = json_object_get(d, "attempts");
        ck_assert_int_eq(json_int(json_array_get(a, 1), "http_status"), 200);
        ck_assert_int_eq(json_int(json_array_get(a, 1), "retried_count"), 1);
        json_decref(d);
    }
    /* A fence: a later event, delivered after every dispatcher has polled past the retry, and
     * the clock run through the whole schedule. A second send of the retry would be here. */
    advance_clock(c, 2, 5461 * 60);
    confirm_ok(c->inst[2], "pk_hook_fence", "order_hook_fence");
    json_decref(wait_delivery(c, 0, "pk_hook_fence", "delivered", 1));
    ck_assert_msg(receiver_wait(rx, 3, HOOK_WAIT_MS) == 3, "the fence's event did not arrive");
    ck_assert_msg(receiver_count(rx) == 3, "the receiver got %zu requests: want the 500, the "
                  "retry once and the fence", receiver_count(rx));
    struct rx_request q0 = request_at(rx, 0), q1 = request_at(rx, 1);
    ck_assert_str_eq(q0.transmission_id, q1.transmission_id);
    ck_assert_int_eq(q0.retried_count, 0);
    ck_assert_int_eq(q1.retried_count, 1);
    ck_assert_str_eq(q0.body, q1.body);
    for (int i = 0; i < CLUSTER_N; i++)
        ck_assert_msg(metric1(c->inst[i], "fakegate_webhook_pending", NULL, NULL) == 0.0,
                      "instance %d: deliveries still pending", i + 1);
    cluster_free(c);
    receiver_stop(rx);
}
END_TEST

START_TEST(test_webhook_pending_on_a_sigkilled_instance_is_delivered_by_another)
{
    const struct rx_answer script[] = {RX(500), RX(200)};
    struct receiver *rx = receiver_start(script, 2);
    ck_assert(rx != NULL);
    fg_cluster *c = hooked_cluster(rx);
    confirm_ok(c->inst[0], "pk_hook_kill", "order_hook_kill");
    json_decref(wait_delivery(c, 0, "pk_hook_kill", "pending", 1));

    /* The instance whose confirm made the event dies with its retry 1 minute away. */
    cluster_kill(c, 0);
    int64_t t0 = fg_now_ns();
    advance_clock(c, 1, 60);
    ck_assert_msg(receiver_wait(rx, 2, HOOK_WAIT_MS) == 2,
                  "the retry of a delivery filed by the killed instance never arrived (the "
                  "receiver has %zu requests)", receiver_count(rx));
    struct rx_request late = request_at(rx, 1);
    printf("cluster webhooks: the retry of a delivery filed by the SIGKILLed instance arrived "
           "%.1f ms after the clock step on another\n", (double)(late.arrived_ns - t0) / 1e6);
    fflush(stdout);
    for (int i = 1; i < CLUSTER_N; i++) {
        json_t *d = wait_delivery(c, i, "pk_hook_kill", "delivered", 2);
        json_decref(d);
    }
    struct rx_request q0 = request_at(rx, 0), q1 = request_at(rx, 1);
    ck_assert_str_eq(q0.transmission_id, q1.transmission_id);
    ck_assert_int_eq(q1.retried_count, 1);
    ck_assert_str_eq(q0.body, q1.body);
    ck_assert_uint_eq(receiver_count(rx), 2);
    cluster_free(c);
    receiver_stop(rx);
}
END_TEST

START_TEST(test_webhook_deliveries_listed_the_same_from_every_instance_resend_and_reset_shared)
{
    struct receiver *rx = receiver_start(&RX(200), 1);
    ck_assert(rx != NULL);
    fg_cluster *c = hooked_cluster(rx);
    char pk[CLUSTER_N][32];
    for (int i = 0; i < CLUSTER_N; i++) {
        char oid[32];
        snprintf(pk[i], sizeof pk[i], "pk_hook_list_%d", i);
        snprintf(oid, sizeof oid, "order_hook_list_%d", i);
        confirm_ok(c->inst[i], pk[i], oid);
    }
    for (int i = 0; i < CLUSTER_N; i++)
        json_decref(wait_delivery(c, (i + 1) % CLUSTER_N, pk[i], "delivered", 1));
    json_t *list[CLUSTER_N];
    for (int i = 0; i < CLUSTER_N; i++)
        list[i] = deliveries_of(c, i, NULL);
    ck_assert_uint_eq(json_array_size(list[0]), CLUSTER_N);
    for (int i = 1; i < CLUSTER_N; i++) {
        char *a = json_dumps(list[0], JSON_COMPACT), *b = json_dumps(list[i], JSON_COMPACT);
        ck_assert_msg(json_equal(list[0], list[i]), "instance %d lists other deliveries than "
                      "instance 1:\n%.2000s\n---\n%.2000s", i + 1, b, a);
        free(a);
        free(b);
    }
    /* Ids are the cluster's: one each, in filing order. */
    uint64_t id0 = (uint64_t)json_int(json_array_get(list[0], 0), "id");
    for (size_t k = 0; k < json_array_size(list[0]); k++)
        ck_assert_int_eq(json_int(json_array_get(list[0], k), "id"), (long long)(id0 + k));

    /* Instance 3 resends the delivery instance 1's confirm filed. */
    char path[96];
    snprintf(path, sizeof path, "/__admin/webhooks/deliveries/%llu/resend",
             (unsigned long long)id0);
    fg_response r;
    admin_call(c->inst[2], "POST", path, "", NULL, &r);
    ck_assert_msg(r.status == 200, "resend on instance 3: %ld %s", r.status, r.body);
    fg_response_fini(&r);
    ck_assert_msg(receiver_wait(rx, CLUSTER_N + 1, HOOK_WAIT_MS) == CLUSTER_N + 1,
                  "the resend did not arrive");
    json_decref(wait_delivery(c, 1, pk[0], "delivered", 2));
    struct rx_request q = request_at(rx, CLUSTER_N);
    ck_assert_int_eq(q.retried_count, 1);
    ck_assert_str_eq(q.transmission_id, json_str(json_array_get(list[0], 0), "transmission_id"));

    /* A reset on instance 2 drops them for everyone. */
    admin_call(c->inst[1], "POST", "/__admin/reset", "", NULL, &r);
    ck_assert_msg(r.status == 200, "reset: %ld %s", r.status, r.body);
    fg_response_fini(&r);
    for (int i = 0; i < CLUSTER_N; i++) {
        json_t *d = deliveries_of(c, i, NULL);
        ck_assert_msg(json_array_size(d) == 0, "instance %d lists %zu deliveries after a reset",
                      i + 1, json_array_size(d));
        json_decref(d);
    }
    for (int i = 0; i < CLUSTER_N; i++)
        json_decref(list[i]);
    cluster_free(c);
    receiver_stop(rx);
}
END_TEST

START_TEST(test_webhook_receivers_put_on_one_instance_apply_on_all)
{
    struct receiver *rx = receiver_start(&RX(200), 1);
    ck_assert(rx != NULL);
    fg_cluster *c = cluster_start(NULL);
    char body[256];
    snprintf(body, sizeof body, "{\"urls\":[\"%s\"],\"success\":\"2xx\"}", receiver_url(rx));
    fg_response r;
    admin_call(c->inst[0], "PUT", "/__admin/webhooks", body, NULL, &r);
    ck_assert_msg(r.status == 200, "PUT /__admin/webhooks: %ld %s", r.status, r.body);
    fg_response_fini(&r);
    for (int i = 0; i < CLUSTER_N; i++) {
        json_t *w = admin_json(c->inst[i], "/__admin/webhooks");
        json_t *urls = json_object_get(w, "urls");
        ck_assert_msg(json_array_size(urls) == 1 &&
                      strcmp(json_string_value(json_array_get(urls, 0)), receiver_url(rx)) == 0 &&
                      json_is_str(w, "success", "2xx"),
                      "instance %d: GET /__admin/webhooks does not show the PUT on instance 1: "
                      "%s", i + 1, json_dumps(w, JSON_COMPACT));
        json_decref(w);
    }
    /* ... and an event on instance 3 (started with no --webhook-url) goes to it. */
    confirm_ok(c->inst[2], "pk_hook_put", "order_hook_put");
    ck_assert_msg(receiver_wait(rx, 1, HOOK_WAIT_MS) == 1,
                  "instance 3 sent no event to the receivers PUT on instance 1");
    json_decref(wait_delivery(c, 0, "pk_hook_put", "delivered", 1));
    cluster_free(c);
    receiver_stop(rx);
}
END_TEST

/* The profile's webhook faults over the cluster: decided by (seed, paymentKey, event, receiver)
 * as on one instance (docs/webhooks.md §6.5), so a cluster and a single in-memory instance
 * with the same seed drop and duplicate the same events. */
#define FAULT_N 24
static const char hook_faults_profile[] =
    "{'name':'cluster-hook-faults','seed':7,'routes':{'default':{'latency':{'dist':'fixed',"
    "'ms':0}}},'webhooks':{'duplicate':{'p':0.3,'after':{'dist':'fixed','ms':50}},"
    "'drop':{'p':0.3}}}";

/* Per paymentKey pk_hook_f_NN: "dropped", "delivered" or "delivered+dup", from a journal in
 * which nothing is pending any more (polled until so). */
static void fault_outcomes(const fg_server *s, char out[FAULT_N][16])
{
    int64_t deadline = fg_now_ms() + HOOK_WAIT_MS;
    json_t *all;
    for (;;) {
        json_t *root = admin_json(s, "/__admin/webhooks/deliveries");
        all = json_incref(json_object_get(root, "deliveries"));
        json_decref(root);
        size_t pending = 0;
        for (size_t k = 0; k < json_array_size(all); k++)
            pending += json_is_str(json_array_get(all, k), "status", "pending");
        if (pending == 0 && json_array_size(all) >= FAULT_N)
            break;
        ck_assert_msg(fg_now_ms() < deadline, "deliveries still pending after %d ms",
                      HOOK_WAIT_MS);
        json_decref(all);
        fg_pause_ms(POLL_MS / 5);
    }
    for (int i = 0; i < FAULT_N; i++) {
        char pk[32];
        snprintf(pk, sizeof pk, "pk_hook_f_%02d", i);
        int originals = 0, dups = 0;
        const char *status = "none";
        const char *tid = NULL;
        for (size_t k = 0; k < json_array_size(all); k++) {
            json_t *d = json_array_get(all, k);
            if (strcmp(json_str(d, "payment_key"), pk) != 0)
                continue;
            if (json_is_null(json_object_get(d, "duplicate_of"))) {
                originals++;
                status = json_str(d, "status");
                tid = json_str(d, "transmission_id");
            } else {
                dups++;
                ck_assert_msg(tid != NULL && strcmp(tid, json_str(d, "transmission_id")) == 0,
                              "%s: a duplicate under another transmission id", pk);
            }
        }
        ck_assert_msg(originals == 1 && dups <= 1, "%s: %d originals, %d duplicates", pk,
                      originals, dups);
        snprintf(out[i], 16, "%s%s", status, dups ? "+dup" : "");
    }
    json_decref(all);
}

START_TEST(test_webhook_faults_over_instances_decided_as_on_one_instance_with_the_seed)
{
    struct receiver *rx = receiver_start(&RX(200), 1);
    ck_assert(rx != NULL);
    fg_cluster *c = hooked_cluster(rx);
    char *profile = dq(hook_faults_profile);
    cluster_put_profile(c, profile);
    for (int i = 0; i < FAULT_N; i++) {
        char pk[32], oid[32];
        snprintf(pk, sizeof pk, "pk_hook_f_%02d", i);
        snprintf(oid, sizeof oid, "order_hook_f_%02d", i);
        confirm_ok(c->inst[i % CLUSTER_N], pk, oid);
    }
    char in_cluster[FAULT_N][16], alone[FAULT_N][16];
    fault_outcomes(c->inst[1], in_cluster);
    size_t sent = 0;
    int dropped = 0, duplicated = 0;
    for (int i = 0; i < FAULT_N; i++) {
        dropped += strcmp(in_cluster[i], "dropped") == 0;
        duplicated += strstr(in_cluster[i], "+dup") != NULL;
        sent += strcmp(in_cluster[i], "dropped") == 0 ? 0 : strstr(in_cluster[i], "+dup") ? 2 : 1;
    }
    ck_assert_msg(receiver_wait(rx, sent, HOOK_WAIT_MS) == sent && receiver_count(rx) == sent,
                  "the receiver got %zu requests, the journal says %zu were delivered",
                  receiver_count(rx), sent);
    cluster_free(c);

    struct receiver *rx1 = receiver_start(&RX(200), 1);
    ck_assert(rx1 != NULL);
    const char *args[] = {"--webhook-url", receiver_url(rx1), NULL};
    fg_server *s = start_args(profile, args);
    for (int i = 0; i < FAULT_N; i++) {
        char pk[32], oid[32];
        snprintf(pk, sizeof pk, "pk_hook_f_%02d", i);
        snprintf(oid, sizeof oid, "order_hook_f_%02d", i);
        confirm_ok(s, pk, oid);
    }
    fault_outcomes(s, alone);
    for (int i = 0; i < FAULT_N; i++)
        ck_assert_msg(strcmp(in_cluster[i], alone[i]) == 0,
                      "pk_hook_f_%02d: %s over the cluster, %s on one instance with the same "
                      "seed", i, in_cluster[i], alone[i]);
    printf("cluster webhooks: seed 7, %d events: %d dropped, %d duplicated, the same over three "
           "instances as on one\n", FAULT_N, dropped, duplicated);
    fflush(stdout);
    ck_assert_msg(dropped > 0 && duplicated > 0, "%d dropped, %d duplicated", dropped,
                  duplicated);
    stop_server(s);
    free(profile);
    receiver_stop(rx1);
    receiver_stop(rx);
}
END_TEST

/* A claimer killed in the middle of an attempt: its lease (CWH_LEASE_MS, 15 s) runs out and
 * another instance makes that attempt again. Instances 2 and 3 are down while instance 1
 * files and claims, so the claimer is known. */
#define LEASE_WAIT_MS 40000

START_TEST(test_webhook_attempt_of_an_instance_killed_mid_attempt_is_made_again_after_its_lease)
{
    const struct rx_answer script[] = {{RX_HANG, 0}, RX(200)};
    struct receiver *rx = receiver_start(script, 2);
    ck_assert(rx != NULL);
    fg_cluster *c = hooked_cluster(rx);
    cluster_kill(c, 1);
    cluster_kill(c, 2);
    confirm_ok(c->inst[0], "pk_hook_lease", "order_hook_lease");
    ck_assert_msg(receiver_wait(rx, 1, HOOK_WAIT_MS) == 1, "the first attempt never arrived");
    cluster_restart(c, 1);
    cluster_restart(c, 2);
    cluster_kill(c, 0); /* with the attempt on the wire, its lease in Redis */
    ck_assert_msg(receiver_wait(rx, 2, LEASE_WAIT_MS) == 2,
                  "the attempt of the killed claimer was not made again within %d ms",
                  LEASE_WAIT_MS);
    struct rx_request q0 = request_at(rx, 0), q1 = request_at(rx, 1);
    printf("cluster webhooks: an attempt whose claimer was SIGKILLed mid-attempt was made again "
           "%.1f s after the first try (the lease is 15 s)\n",
           (double)(q1.arrived_ns - q0.arrived_ns) / 1e9);
    fflush(stdout);
    ck_assert_str_eq(q0.transmission_id, q1.transmission_id);
    ck_assert_int_eq(q1.retried_count, 0); /* the same attempt, not a retry */
    ck_assert_str_eq(q0.body, q1.body);
    json_t *d = wait_delivery(c, 1, "pk_hook_lease", "delivered", 1);
    ck_assert_int_eq(json_int(json_array_get(json_object_get(d, "attempts"), 0), "http_status"),
                     200);
    json_decref(d);
    cluster_free(c);
    receiver_stop(rx);
}
END_TEST

/* --webhook-max-pending bounds the cluster's pending deliveries: the oldest pending one,
 * whichever instance filed it, is failed with the eviction note, counted on every instance. */
START_TEST(test_webhook_max_pending_evicts_the_clusters_oldest_pending_delivery)
{
    struct receiver *rx = receiver_start(&RX(500), 1);
    ck_assert(rx != NULL);
    static const char *args[5];
    args[0] = "--webhook-url";
    args[1] = receiver_url(rx);
    args[2] = "--webhook-max-pending";
    args[3] = "2";
    args[4] = NULL;
    fg_cluster *c = cluster_start(args);
    for (int i = 0; i < 3; i++) {
        char pk[32], oid[32];
        snprintf(pk, sizeof pk, "pk_hook_evict_%d", i);
        snprintf(oid, sizeof oid, "order_hook_evict_%d", i);
        confirm_ok(c->inst[i], pk, oid);
        /* each waits for its retry before the next is filed: the eviction order is known */
        json_decref(wait_delivery(c, (i + 1) % CLUSTER_N, pk, "pending", 1));
    }
    for (int i = 0; i < CLUSTER_N; i++) {
        json_t *d = wait_delivery(c, i, "pk_hook_evict_0", "failed", 1);
        ck_assert_msg(json_str(d, "note") != NULL &&
                      strstr(json_str(d, "note"), "--webhook-max-pending") != NULL,
                      "instance %d: the evicted delivery's note: %s", i + 1,
                      json_dumps(d, JSON_COMPACT));
        json_decref(d);
        json_decref(wait_delivery(c, i, "pk_hook_evict_2", "pending", 1));
        ck_assert_msg(metric1(c->inst[i], "fakegate_webhook_pending", NULL, NULL) == 2.0 &&
                      metric1(c->inst[i], "fakegate_webhook_evicted_total", NULL, NULL) == 1.0,
                      "instance %d: pending %g, evicted %g; want the cluster's 2 and 1", i + 1,
                      metric1(c->inst[i], "fakegate_webhook_pending", NULL, NULL),
                      metric1(c->inst[i], "fakegate_webhook_evicted_total", NULL, NULL));
    }
    cluster_free(c);
    receiver_stop(rx);
}
END_TEST

/* ---- the profile in force, `times` budgets, throttles and caps over the cluster ---------- */

#define CLUSTER_TENANT "test_sk_cluster_tenant"
#define TIMES_BUDGET 3
#define TIMES_REQUESTS 12
#define THROTTLE_RATE 5
#define THROTTLE_BURST 5
#define THROTTLE_REQUESTS 45
#define THROTTLE_PACE_MS 50 /* about 4 times the rate: most are refused */
#define CAP_MAX 2
#define CAP_HELD 6
#define CAP_LATENCY_MS 2000

/* A confirm route that answers every confirm 400 REJECT_CARD_COMPANY, `times` times in all
 * (0: always). */
static char *reject_profile(const char *name, int times)
{
    char buf[512], budget[32] = "";
    if (times > 0)
        snprintf(budget, sizeof budget, "'times':%d,", times);
    snprintf(buf, sizeof buf,
             "{'name':'%s','routes':{'confirm':{'faults':[{'kind':'error','p':1,%s"
             "'status':400,'code':'REJECT_CARD_COMPANY'}]},"
             "'default':{'latency':{'dist':'fixed','ms':0}}}}",
             name, budget);
    return dq(buf);
}

/* GET /__admin/profile of instance i names `want`. */
static void assert_profile_name(const fg_cluster *c, int i, const char *want)
{
    json_t *p = admin_json(c->inst[i], "/__admin/profile");
    ck_assert_msg(strcmp(json_str(p, "name"), want) == 0,
                  "instance %d: GET /__admin/profile names '%s', want '%s' (the profile PUT on "
                  "another instance is not in force here)", i + 1, json_str(p, "name"), want);
    json_decref(p);
}

START_TEST(test_profile_put_on_instance_1_in_force_on_every_instance_and_a_later_one)
{
    fg_cluster *c = cluster_start(NULL);
    char *profile = reject_profile("cluster-shared", 0);
    fg_response r;
    int64_t t0 = fg_now_ms();
    put_profile(c->inst[0], profile, &r); /* instance 1 only */
    ck_assert_msg(r.status == 200, "PUT on instance 1: %ld %s", r.status, r.body);
    fg_response_fini(&r);
    free(profile);
    for (int i = 0; i < CLUSTER_N; i++)
        assert_profile_name(c, i, "cluster-shared");
    int64_t seen_ms = fg_now_ms() - t0;
    /* ... and acting there: every confirm on every instance is rejected. */
    for (int i = 0; i < CLUSTER_N; i++) {
        char pk[32], oid[32];
        snprintf(pk, sizeof pk, "pk_shared_%d", i);
        snprintf(oid, sizeof oid, "order_shared_%d", i);
        confirm_fresh(c->inst[i], pk, oid, 1000, NULL, 10000, &r);
        assert_error(&r, 400, "REJECT_CARD_COMPANY");
        fg_response_fini(&r);
    }
    /* A rejected profile on instance 2 changes nothing anywhere. */
    put_profile(c->inst[1], "{\"name\": 5}", &r);
    assert_error(&r, 400, "INVALID_PROFILE");
    fg_response_fini(&r);
    for (int i = 0; i < CLUSTER_N; i++)
        assert_profile_name(c, i, "cluster-shared");
    /* A tenant's own profile, PUT on instance 2, is that tenant's on every instance. */
    char *own = dq("{'name':'cluster-tenant','routes':{'default':{'latency':{'dist':'fixed',"
                   "'ms':0}}}}");
    admin_call(c->inst[1], "PUT", "/__admin/profile", own, "X-Fakegate-Tenant: " CLUSTER_TENANT,
               &r);
    ck_assert_msg(r.status == 200, "tenant PUT on instance 2: %ld %s", r.status, r.body);
    fg_response_fini(&r);
    free(own);
    /* An instance started after the PUTs adopts them. */
    cluster_kill(c, 2);
    cluster_restart(c, 2);
    assert_profile_name(c, 2, "cluster-shared");
    for (int i = 0; i < CLUSTER_N; i++) {
        admin_call(c->inst[i], "GET", "/__admin/profile", NULL,
                   "X-Fakegate-Tenant: " CLUSTER_TENANT, &r);
        ck_assert_msg(r.status == 200 && r.json && strcmp(json_str(r.json, "name"),
                                                          "cluster-tenant") == 0,
                      "instance %d: the tenant's profile is not the one PUT on instance 2: %ld "
                      "%.300s", i + 1, r.status, r.body);
        fg_response_fini(&r);
        char pk[32], oid[32];
        snprintf(pk, sizeof pk, "pk_tenant_%d", i);
        snprintf(oid, sizeof oid, "order_tenant_%d", i);
        confirm_as_key(c->inst[i], CLUSTER_TENANT, pk, oid, 1000, NULL, 10000, &r);
        assert_status(&r, 200); /* its own profile has no fault; the server's rejects */
        fg_response_fini(&r);
    }
    /* A reset on instance 3 with another profile: in force on 1 and 2. */
    admin_call(c->inst[2], "POST", "/__admin/reset", "{\"profile\": \"normal\"}", NULL, &r);
    ck_assert_msg(r.status == 200, "reset on instance 3: %ld %s", r.status, r.body);
    fg_response_fini(&r);
    for (int i = 0; i < CLUSTER_N; i++)
        assert_profile_name(c, i, "normal");
    printf("cluster profile: a PUT on instance 1 was in force on all 3 instances %" PRId64
           " ms after it was sent (each instance reads the version at its next request)\n",
           seen_ms);
    fflush(stdout);
    cluster_free(c);
}
END_TEST

START_TEST(test_times_3_fault_fires_exactly_3_times_over_requests_on_three_instances)
{
    fg_cluster *c = cluster_start(NULL);
    char *profile = reject_profile("cluster-times", TIMES_BUDGET);
    fg_response r;
    cluster_put_profile(c, profile); /* on each: this case needs no shared profile */
    free(profile);
    int fired = 0, per[CLUSTER_N] = {0};
    for (int k = 0; k < TIMES_REQUESTS; k++) {
        char pk[32], oid[32];
        snprintf(pk, sizeof pk, "pk_times_%d", k);
        snprintf(oid, sizeof oid, "order_times_%d", k);
        confirm_fresh(c->inst[k % CLUSTER_N], pk, oid, 1000, NULL, 10000, &r);
        ck_assert_msg(r.status == 200 || r.status == 400, "confirm %d: %ld %s", k, r.status,
                      r.body);
        if (r.status == 400) {
            assert_error(&r, 400, "REJECT_CARD_COMPANY");
            fired++;
            per[k % CLUSTER_N]++;
        }
        fg_response_fini(&r);
    }
    ck_assert_msg(fired == TIMES_BUDGET, "a `times: %d` fault fired %d times over %d confirms "
                  "spread on the instances (%d, %d, %d): the budget is per instance",
                  TIMES_BUDGET, fired, TIMES_REQUESTS, per[0], per[1], per[2]);
    /* A reset gives the budget back, cluster-wide. */
    reset_now(c->inst[1]);
    fired = 0;
    for (int k = 0; k < TIMES_REQUESTS; k++) {
        char pk[32], oid[32];
        snprintf(pk, sizeof pk, "pk_times2_%d", k);
        snprintf(oid, sizeof oid, "order_times2_%d", k);
        confirm_fresh(c->inst[(k + 1) % CLUSTER_N], pk, oid, 1000, NULL, 10000, &r);
        fired += r.status == 400;
        fg_response_fini(&r);
    }
    ck_assert_msg(fired == TIMES_BUDGET, "after a reset the budget fired %d times, want %d",
                  fired, TIMES_BUDGET);
    cluster_free(c);
}
END_TEST

START_TEST(test_token_bucket_throttle_limits_the_cluster_total_with_retry_after)
{
    fg_cluster *c = cluster_start(NULL);
    char buf[512];
    snprintf(buf, sizeof buf,
             "{'name':'cluster-throttle','routes':{'confirm':{'throttle':{'kind':'token_bucket',"
             "'rate_per_s':%d,'burst':%d,'status':503,'code':'SERVICE_UNAVAILABLE',"
             "'retry_after':{'format':'seconds','value':'auto'}}},"
             "'default':{'latency':{'dist':'fixed','ms':0}}}}",
             THROTTLE_RATE, THROTTLE_BURST);
    char *profile = dq(buf);
    fg_response r;
    cluster_put_profile(c, profile); /* on each: this case needs no shared profile */
    free(profile);
    int admitted = 0, throttled = 0;
    int64_t t0 = fg_now_ms();
    for (int k = 0; k < THROTTLE_REQUESTS; k++) {
        char pk[32], oid[32];
        snprintf(pk, sizeof pk, "pk_thr_%d", k);
        snprintf(oid, sizeof oid, "order_thr_%d", k);
        confirm_fresh(c->inst[k % CLUSTER_N], pk, oid, 1000, NULL, 10000, &r);
        if (r.status == 200) {
            admitted++;
        } else {
            assert_error(&r, 503, "SERVICE_UNAVAILABLE");
            ck_assert_msg(strcmp(r.retry_after, "1") == 0,
                          "a throttled confirm's Retry-After is '%s', want 1 (a token every "
                          "%.1f s)", r.retry_after, 1.0 / THROTTLE_RATE);
            throttled++;
        }
        fg_response_fini(&r);
        fg_pause_ms(THROTTLE_PACE_MS); /* paces the load; nothing waits on the server here */
    }
    double elapsed_s = (double)(fg_now_ms() - t0) / 1000.0;
    /* One bucket for the cluster: at most burst + rate x elapsed (+1 for the token refilled
     * while the last request was on its way); three buckets would admit about three times
     * that. */
    double most = THROTTLE_BURST + THROTTLE_RATE * elapsed_s + 1;
    printf("cluster throttle: %d of %d confirms over 3 instances admitted in %.2f s (%.1f/s; "
           "the bucket allows at most %.0f: burst %d + %d/s)\n", admitted, THROTTLE_REQUESTS,
           elapsed_s, admitted / elapsed_s, most, THROTTLE_BURST, THROTTLE_RATE);
    fflush(stdout);
    ck_assert_msg(admitted >= THROTTLE_BURST && admitted <= most,
                  "%d confirms admitted over the cluster in %.2f s, want %d..%.0f (burst %d, "
                  "%d/s): the bucket is per instance", admitted, elapsed_s, THROTTLE_BURST, most,
                  THROTTLE_BURST, THROTTLE_RATE);
    ck_assert_int_eq(admitted + throttled, THROTTLE_REQUESTS);
    cluster_free(c);
}
END_TEST

struct held {
    const fg_cluster *c;
    int index;
    pthread_barrier_t *bar;
    fg_response r;
};

static void *held_one(void *arg)
{
    struct held *w = arg;
    char pk[32], oid[32];
    snprintf(pk, sizeof pk, "pk_cap_%d", w->index);
    snprintf(oid, sizeof oid, "order_cap_%d", w->index);
    pthread_barrier_wait(w->bar);
    confirm_fresh(w->c->inst[w->index % CLUSTER_N], pk, oid, 1000, NULL, 20000, &w->r);
    return NULL;
}

START_TEST(test_cap_2_admits_2_of_6_held_confirms_spread_over_instances)
{
    fg_cluster *c = cluster_start(NULL);
    char buf[512];
    snprintf(buf, sizeof buf,
             "{'name':'cluster-cap','routes':{'confirm':{'latency':{'dist':'fixed','ms':%d},"
             "'concurrency':{'max_in_flight':%d,'status':503,'code':'SERVICE_UNAVAILABLE'}},"
             "'default':{'latency':{'dist':'fixed','ms':0}}}}",
             CAP_LATENCY_MS, CAP_MAX);
    char *profile = dq(buf);
    fg_response r;
    cluster_put_profile(c, profile); /* on each: this case needs no shared profile */
    free(profile);
    struct held w[CAP_HELD];
    pthread_t t[CAP_HELD];
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, CAP_HELD);
    for (int i = 0; i < CAP_HELD; i++) {
        w[i] = (struct held){.c = c, .index = i, .bar = &bar};
        ck_assert(pthread_create(&t[i], NULL, held_one, &w[i]) == 0);
    }
    for (int i = 0; i < CAP_HELD; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&bar);
    int admitted = 0, capped = 0;
    for (int i = 0; i < CAP_HELD; i++) {
        ck_assert_msg(w[i].r.curl_code == CURLE_OK, "confirm %d: %s", i, w[i].r.curl_error);
        if (w[i].r.status == 200) {
            admitted++;
        } else {
            assert_error(&w[i].r, 503, "SERVICE_UNAVAILABLE");
            /* Refused at once, while the admitted ones were held. */
            ck_assert_msg(w[i].r.total_us < CAP_LATENCY_MS * 1000LL,
                          "capped confirm %d took %lld us", i, (long long)w[i].r.total_us);
            capped++;
        }
        fg_response_fini(&w[i].r);
    }
    ck_assert_msg(admitted == CAP_MAX, "cap %d: %d of %d confirms held at once over the "
                  "instances were admitted (%d capped): the cap is per instance", CAP_MAX,
                  admitted, CAP_HELD, capped);
    /* The slots came back: the next confirm is admitted. */
    confirm_fresh(c->inst[1], "pk_cap_after", "order_cap_after", 1000, NULL, 20000, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    cluster_free(c);
}
END_TEST

/* Wait up to 5 s until instance i's ledger holds the payment of `oid`, made by the confirm
 * `what` when it passed its checks (its admission, and a cap slot, came before). */
static void wait_payment(const fg_cluster *c, int i, const char *oid, const char *what)
{
    int64_t deadline = fg_now_ms() + 5000;
    for (;;) {
        json_t *a = fg_admin_payments(c->inst[i], oid);
        size_t n = a ? json_array_size(a) : 0;
        json_decref(a);
        if (n == 1)
            return;
        ck_assert_msg(fg_now_ms() < deadline, "%s made no payment %s in 5 s", what, oid);
        fg_pause_ms(5);
    }
}

struct lease_hold {
    const fg_cluster *c;
    fg_response r;
};

static void *lease_holder(void *arg)
{
    struct lease_hold *w = arg;
    confirm_fresh(w->c->inst[0], "pk_lease_held", "order_lease_held", 1000, NULL, 30000, &w->r);
    return NULL;
}

START_TEST(test_cap_slot_of_a_killed_instance_lapses_within_its_lease)
{
    fg_cluster *c = cluster_start(NULL);
    char buf[512];
    snprintf(buf, sizeof buf,
             "{'name':'cluster-lease','routes':{'confirm':{'latency':{'dist':'fixed','ms':20000},"
             "'concurrency':{'max_in_flight':1,'status':503,'code':'SERVICE_UNAVAILABLE'}},"
             "'default':{'latency':{'dist':'fixed','ms':0}}}}");
    char *profile = dq(buf);
    cluster_put_profile(c, profile);
    free(profile);
    /* Instance 1 holds the one slot with a confirm of 20 s ... */
    struct lease_hold held = {.c = c};
    pthread_t t;
    ck_assert(pthread_create(&t, NULL, lease_holder, &held) == 0);
    /* Its payment exists once it has passed its checks, after its admission took the slot
     * (the shared journal lists only finished requests, so it cannot show a held one). */
    wait_payment(c, 0, "order_lease_held", "instance 1's held confirm");
    fg_response r;
    confirm_with(c->inst[1], "pk_lease_0", "order_lease_0", 1000, NULL,
                 "X-Fakegate-Latency-Ms: 0", 10000, &r);
    assert_error(&r, 503, "SERVICE_UNAVAILABLE");
    fg_response_fini(&r);
    /* ... and dies: its slot lapses with its lease (renewed every second, 3 s). */
    cluster_kill(c, 0);
    int64_t killed = fg_now_ms(), back = -1;
    for (int k = 1; back < 0; k++) {
        char pk[32], oid[32];
        snprintf(pk, sizeof pk, "pk_lease_%d", k);
        snprintf(oid, sizeof oid, "order_lease_%d", k);
        confirm_with(c->inst[1 + k % 2], pk, oid, 1000, NULL, "X-Fakegate-Latency-Ms: 0", 10000,
                     &r);
        if (r.status == 200)
            back = fg_now_ms() - killed;
        else
            assert_error(&r, 503, "SERVICE_UNAVAILABLE");
        fg_response_fini(&r);
        ck_assert_msg(back >= 0 || fg_now_ms() - killed < 10000,
                      "the killed instance's cap slot still held 10 s after its death");
        if (back < 0)
            fg_pause_ms(POLL_MS);
    }
    pthread_join(t, NULL);
    ck_assert_msg(held.r.curl_code != CURLE_OK, "the held confirm on the killed instance was "
                  "answered %ld", held.r.status);
    fg_response_fini(&held.r);
    printf("cluster cap: the slot of a SIGKILLed instance lapsed %" PRId64 " ms after its "
           "death (a 3 s lease, renewed every second)\n", back);
    fflush(stdout);
    cluster_free(c);
}
END_TEST

#define MARK_LATENCY_MS 1500

struct mark_first {
    const fg_cluster *c;
    fg_response r;
};

static void *mark_first_one(void *arg)
{
    struct mark_first *w = arg;
    confirm_fresh(w->c->inst[0], "pk_mark", "order_mark", 1000, "mark-key-1", 20000, &w->r);
    return NULL;
}

START_TEST(test_confirm_of_a_payment_in_progress_on_another_instance_refused_at_its_checks)
{
    fg_cluster *c = cluster_start(NULL);
    char *profile = confirm_latency_profile("cluster-mark", MARK_LATENCY_MS);
    cluster_put_profile(c, profile);
    free(profile);
    struct mark_first w = {.c = c};
    pthread_t t;
    ck_assert(pthread_create(&t, NULL, mark_first_one, &w) == 0);
    /* The payment exists once the first confirm has passed its checks (its section made it). */
    wait_payment(c, 0, "order_mark", "the first confirm");
    fg_response second;
    confirm_fresh(c->inst[1], "pk_mark", "order_mark", 1000, "mark-key-2", 20000, &second);
    pthread_join(t, NULL);
    assert_status(&w.r, 200);
    assert_error(&second, 400, "ALREADY_PROCESSING_REQUEST");
    /* At its checks, as on one instance: answered while the first was still held, not after a
     * latency of its own (where the commit's check would have caught it). */
    ck_assert_msg(second.done_ns < w.r.done_ns,
                  "the second confirm (instance 2) was answered %.0f ms after the first "
                  "(instance 1): it passed its checks and was caught only at its commit",
                  (double)(second.done_ns - w.r.done_ns) / 1e6);
    for (int i = 0; i < CLUSTER_N; i++)
        assert_charged_once(c->inst[i], "pk_mark", "order_mark");
    /* Not stored under its key: sent again now, it is judged again (already processed). */
    fg_response again;
    confirm_fresh(c->inst[2], "pk_mark", "order_mark", 1000, "mark-key-2", 20000, &again);
    assert_error(&again, 400, "ALREADY_PROCESSED_PAYMENT");
    fg_response_fini(&again);
    fg_response_fini(&second);
    fg_response_fini(&w.r);
    cluster_free(c);
}
END_TEST

Suite *make_suite(void)
{
    Suite *su = suite_create("cluster");
    TCase *tc = add_tcase(su, "same_key_over_instances", 60);
    tcase_add_test(tc, test_same_key_from_32_threads_over_instances_one_200_rest_409_one_charge);
    tcase_add_test(tc, test_one_payment_under_different_keys_over_instances_approved_once);
    tc = add_tcase(su, "lost_response_over_instances", 60);
    tcase_add_test(tc,
                   test_response_lost_on_instance_1_resent_to_instance_2_gets_the_stored_200);
    tcase_add_test(tc, test_attempts_1_fault_fires_once_per_identity_cluster_wide);
    tc = add_tcase(su, "journal_and_report_shared", 60);
    tcase_add_test(tc,
                   test_journal_and_report_shared_requests_of_every_instance_named_seen_from_each);
    tcase_add_test(tc, test_tenant_reset_on_one_instance_hides_its_requests_on_every_instance);
    tc = add_tcase(su, "limits_over_instances", 120);
    tcase_add_test(tc, test_profile_put_on_instance_1_in_force_on_every_instance_and_a_later_one);
    tcase_add_test(tc, test_times_3_fault_fires_exactly_3_times_over_requests_on_three_instances);
    tcase_add_test(tc, test_token_bucket_throttle_limits_the_cluster_total_with_retry_after);
    tcase_add_test(tc, test_cap_2_admits_2_of_6_held_confirms_spread_over_instances);
    tcase_add_test(tc, test_cap_slot_of_a_killed_instance_lapses_within_its_lease);
    tcase_add_test(tc,
                   test_confirm_of_a_payment_in_progress_on_another_instance_refused_at_its_checks);
    tc = add_tcase(su, "stress_with_instance_killed", 900);
    tcase_add_test(tc,
                   test_stress_through_nginx_instance_killed_and_restarted_charged_at_most_once);
    tc = add_tcase(su, "webhooks_over_instances", 180);
    tcase_add_test(tc, test_webhook_retry_after_500_sent_once_cluster_wide_with_three_dispatchers);
    tcase_add_test(tc, test_webhook_pending_on_a_sigkilled_instance_is_delivered_by_another);
    tcase_add_test(tc,
                   test_webhook_deliveries_listed_the_same_from_every_instance_resend_and_reset_shared);
    tcase_add_test(tc, test_webhook_receivers_put_on_one_instance_apply_on_all);
    tcase_add_test(tc, test_webhook_faults_over_instances_decided_as_on_one_instance_with_the_seed);
    tcase_add_test(
        tc, test_webhook_attempt_of_an_instance_killed_mid_attempt_is_made_again_after_its_lease);
    tcase_add_test(tc, test_webhook_max_pending_evicts_the_clusters_oldest_pending_delivery);
    tc = add_timing_tcase(su, "redis_stopped", 120);
    tcase_add_test(tc,
                   test_redis_stopped_gives_503_naming_the_store_no_crash_and_back_within_1s);
    return su;
}
