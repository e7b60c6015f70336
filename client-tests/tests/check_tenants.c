/* check_tenants.c -- black-box tests of tenants (docs/tenants.md §9): each secret key has its
 * own ledger, idempotency records, attempt counts, profile state (buckets, `times` budgets,
 * caps), report and receivers; X-Fakegate-Tenant scopes the admin reads, reset, profile,
 * receivers and sessions, and the whole server (no header) merges every tenant's; --max-tenants;
 * `fakegate report --tenant`; and a stress run of 8 tenants under a lossy profile with scoped
 * resets in the middle, after which every tenant sees only its own. Each test starts its own
 * server on port 0; waits poll a condition with a bound. */
#define _GNU_SOURCE

#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "receiver.h"
#include "testkit.h"

#define KA "test_sk_a"
#define KB "test_sk_b"
#define KC "test_sk_c"
#define HA "X-Fakegate-Tenant: " KA
#define HB "X-Fakegate-Tenant: " KB
#define HC "X-Fakegate-Tenant: " KC
#define CANCEL_BODY "{\"cancelReason\":\"change of mind\"}"
#define WAIT_MS 10000

/* ---- helpers ------------------------------------------------------------------------------ */

static bool has_prefix(const char *s, const char *prefix)
{
    return s != NULL && strncmp(s, prefix, strlen(prefix)) == 0;
}

/* "Authorization: Basic base64(key:)" into buf; returns buf. */
static char *auth_of(const char *key, char *buf, size_t size)
{
    char cred[200];
    snprintf(cred, sizeof cred, "%s:", key);
    return fg_basic_auth(cred, buf, size);
}

/* A /v1 request as secret key `key` on a fresh connection (body NULL: none; idem NULL: no
 * Idempotency-Key), into *r (caller finis it). `h` may be NULL (a fresh handle). */
static int v1_as(const fg_server *s, CURL *h, const char *key, const char *method,
                 const char *path, const char *body, const char *idem, long timeout_ms,
                 fg_response *r)
{
    char auth[320], idem_line[200];
    auth_of(key, auth, sizeof auth);
    snprintf(idem_line, sizeof idem_line, "Idempotency-Key: %s", idem ? idem : "");
    const char *headers[] = {auth, idem ? idem_line : NULL, NULL};
    fg_request req = {.method = method, .path = path, .body = body, .headers = headers,
                      .timeout_ms = timeout_ms, .forbid_reuse = true};
    return fg_http(s, h, &req, r);
}

static void get_as(const fg_server *s, const char *key, const char *path, fg_response *r)
{
    v1_as(s, NULL, key, "GET", path, NULL, NULL, 0, r);
}

static void cancel_as(const fg_server *s, const char *key, const char *pk, fg_response *r)
{
    char path[FG_PATH_LEN];
    snprintf(path, sizeof path, "/v1/payments/%s/cancel", pk);
    v1_as(s, NULL, key, "POST", path, CANCEL_BODY, NULL, 0, r);
}

/* A confirm as `key` that must succeed; its response in *r (caller finis it). */
static void confirm_ok_as(const fg_server *s, const char *key, const char *pk, const char *oid,
                          const char *idem, fg_response *r)
{
    confirm_as_key(s, key, pk, oid, 1000, idem, 0, r);
    assert_done(r, pk, oid);
}

/* "X-Fakegate-Tenant: T" into buf, or NULL for tenant NULL (the whole server). */
static const char *tenant_line(const char *tenant, char *buf, size_t size)
{
    if (!tenant)
        return NULL;
    snprintf(buf, size, "X-Fakegate-Tenant: %s", tenant);
    return buf;
}

/* GET path scoped to `tenant` (NULL: none); require 200 JSON; a new reference to it. */
static json_t *admin_get_as(const fg_server *s, const char *path, const char *tenant)
{
    char line[256];
    fg_response r;
    admin_call(s, "GET", path, NULL, tenant_line(tenant, line, sizeof line), &r);
    ck_assert_msg(r.status == 200 && r.json != NULL, "GET %s as %s: %ld %.400s", path,
                  tenant ? tenant : "the server", r.status, r.body);
    json_t *v = json_incref(r.json);
    fg_response_fini(&r);
    return v;
}

/* Member `member` (an array) of GET path scoped to `tenant`: a new reference. */
static json_t *list_as(const fg_server *s, const char *path, const char *tenant,
                       const char *member)
{
    json_t *root = admin_get_as(s, path, tenant);
    json_t *a = json_object_get(root, member);
    ck_assert_msg(json_is_array(a), "GET %s: no \"%s\" array", path, member);
    json_incref(a);
    json_decref(root);
    return a;
}

static json_t *payments_as(const fg_server *s, const char *tenant)
{
    return list_as(s, "/__admin/payments", tenant, "payments");
}

static json_t *journal_as(const fg_server *s, const char *tenant)
{
    return list_as(s, "/__admin/requests", tenant, "requests");
}

static json_t *findings_as(const fg_server *s, const char *tenant)
{
    return list_as(s, "/__admin/report", tenant, "findings");
}

static json_t *deliveries_as(const fg_server *s, const char *tenant)
{
    return list_as(s, "/__admin/webhooks/deliveries", tenant, "deliveries");
}

/* The finding of this kind (borrowed from `findings`), or NULL. */
static json_t *finding_of(const json_t *findings, const char *kind)
{
    size_t i;
    json_t *f;
    json_array_foreach(findings, i, f) if (json_is_str(f, "kind", kind)) return f;
    return NULL;
}

/* Its examples include `oid`. */
static bool has_example(const json_t *finding, const char *oid)
{
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(finding, "examples"), i, v)
        if (json_is_string(v) && strcmp(json_string_value(v), oid) == 0)
            return true;
    return false;
}

/* The same invalid confirm (amount -5) twice as `key`, the second once the first has ended on
 * the server: one retried_4xx finding with example `oid`. */
static void retry_a_4xx(const fg_server *s, const char *key, const char *pk, const char *oid)
{
    for (int i = 0; i < 2; i++) {
        fg_response r;
        confirm_as_key(s, key, pk, oid, -5, NULL, 0, &r);
        assert_status(&r, 400);
        fg_response_fini(&r);
        wait_journal_settled(s);
    }
}

/* The scoped report has exactly one finding, retried_4xx, with count `count` and these examples
 * (NULL-ended). */
static void assert_retried_4xx(const fg_server *s, const char *tenant, long long count,
                               const char *const *examples)
{
    json_t *f = findings_as(s, tenant);
    char *text = json_dumps(f, JSON_COMPACT);
    json_t *r4 = finding_of(f, "retried_4xx");
    ck_assert_msg(json_array_size(f) == 1 && r4 != NULL, "%s: findings %s",
                  tenant ? tenant : "server", text);
    ck_assert_msg(json_int(r4, "count") == count, "%s: want count %lld: %s",
                  tenant ? tenant : "server", count, text);
    size_t n = 0;
    for (; examples[n]; n++)
        ck_assert_msg(has_example(r4, examples[n]), "%s: no example %s: %s",
                      tenant ? tenant : "server", examples[n], text);
    ck_assert_msg(json_array_size(json_object_get(r4, "examples")) == n, "%s: examples %s",
                  tenant ? tenant : "server", text);
    free(text);
    json_decref(f);
}

/* POST /__admin/reset scoped to `tenant` (NULL: the whole server), with `body` (NULL: none);
 * require 200. */
static void reset_as(const fg_server *s, const char *tenant, const char *body)
{
    char line[256];
    fg_response r;
    admin_call(s, "POST", "/__admin/reset", body, tenant_line(tenant, line, sizeof line), &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
}

/* PUT /__admin/profile scoped to `tenant` (NULL: the server's) with a '-quoted profile;
 * require 200. */
static void put_profile_as(const fg_server *s, const char *tenant, const char *squoted)
{
    char line[256], *json = dq(squoted);
    fg_response r;
    admin_call(s, "PUT", "/__admin/profile", json, tenant_line(tenant, line, sizeof line), &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    free(json);
}

/* The name of the profile GET /__admin/profile shows for `tenant` (copied into buf). */
static const char *profile_name_as(const fg_server *s, const char *tenant, char *buf,
                                   size_t size)
{
    json_t *p = admin_get_as(s, "/__admin/profile", tenant);
    snprintf(buf, size, "%s", json_str(p, "name"));
    json_decref(p);
    return buf;
}

/* Every entry of `a` has "tenant" equal to `key`. */
static void assert_all_tenant(const json_t *a, const char *key, const char *what)
{
    size_t i;
    json_t *e;
    json_array_foreach(a, i, e) {
        char *t = json_dumps(e, JSON_COMPACT);
        ck_assert_msg(json_is_str(e, "tenant", key), "%s of %s: entry of another tenant: %.600s",
                      what, key, t);
        free(t);
    }
}

/* ---- ledgers ------------------------------------------------------------------------------ */

START_TEST(test_two_tenants_confirming_the_same_order_get_two_payments)
{
    fg_server *s = start_server(NULL);
    fg_response ra, rb;
    /* The same paymentKey, orderId and even Idempotency-Key: two merchants, two payments. */
    confirm_ok_as(s, KA, "pk_same_1", "order-same-1", "same-key-1", &ra);
    confirm_ok_as(s, KB, "pk_same_1", "order-same-1", "same-key-1", &rb);
    const char *la = json_str(ra.json, "lastTransactionKey");
    const char *lb = json_str(rb.json, "lastTransactionKey");
    ck_assert_str_ne(la, lb);

    json_t *all = payments_as(s, NULL);
    ck_assert_uint_eq(json_array_size(all), 2);
    bool seen_a = false, seen_b = false;
    size_t i;
    json_t *e;
    json_array_foreach(all, i, e) {
        ck_assert_int_eq(json_int(e, "charges"), 1);
        ck_assert_str_eq(json_str(json_object_get(e, "payment"), "paymentKey"), "pk_same_1");
        seen_a = seen_a || json_is_str(e, "tenant", KA);
        seen_b = seen_b || json_is_str(e, "tenant", KB);
    }
    ck_assert_msg(seen_a && seen_b, "tenants not both in the ledger");
    json_decref(all);

    const char *const keys[2] = {KA, KB}, *const ltks[2] = {la, lb};
    for (int k = 0; k < 2; k++) {
        json_t *own = payments_as(s, keys[k]);
        ck_assert_uint_eq(json_array_size(own), 1);
        json_t *p = json_array_get(own, 0);
        ck_assert(json_is_str(p, "tenant", keys[k]));
        ck_assert_str_eq(json_str(json_object_get(p, "payment"), "lastTransactionKey"), ltks[k]);
        ck_assert_int_eq(json_int(p, "confirm_attempts"), 1);
        json_decref(own);
        /* Each reads its own. */
        fg_response r;
        get_as(s, keys[k], "/v1/payments/orders/order-same-1", &r);
        assert_done(&r, "pk_same_1", "order-same-1");
        ck_assert_str_eq(json_str(r.json, "lastTransactionKey"), ltks[k]);
        fg_response_fini(&r);
        json_t *j = journal_as(s, keys[k]);
        ck_assert_uint_eq(json_array_size(j), 2); /* its confirm and its read */
        assert_all_tenant(j, keys[k], "journal");
        json_decref(j);
    }
    fg_response_fini(&ra);
    fg_response_fini(&rb);
    stop_server(s);
}
END_TEST

START_TEST(test_a_tenant_cannot_read_or_cancel_another_tenants_payment)
{
    fg_server *s = start_server(NULL);
    fg_response r;
    confirm_ok_as(s, KB, "pk_b_only", "order-b-only", "b-only-1", &r);
    fg_response_fini(&r);
    get_as(s, KA, "/v1/payments/pk_b_only", &r);
    assert_error(&r, 404, "NOT_FOUND_PAYMENT");
    fg_response_fini(&r);
    get_as(s, KA, "/v1/payments/orders/order-b-only", &r);
    assert_error(&r, 404, "NOT_FOUND_PAYMENT");
    fg_response_fini(&r);
    cancel_as(s, KA, "pk_b_only", &r);
    assert_error(&r, 404, "NOT_FOUND_PAYMENT");
    fg_response_fini(&r);
    /* B's payment is untouched, and A's ledger got nothing. */
    get_as(s, KB, "/v1/payments/pk_b_only", &r);
    assert_done_amount(&r, "pk_b_only", "order-b-only", 1000);
    fg_response_fini(&r);
    json_t *pa = payments_as(s, KA);
    ck_assert_uint_eq(json_array_size(pa), 0);
    json_decref(pa);
    /* B's orderId is not taken in A's ledger. */
    confirm_ok_as(s, KA, "pk_a_other", "order-b-only", "a-other-1", &r);
    fg_response_fini(&r);
    cancel_as(s, KA, "pk_a_other", &r);
    assert_status(&r, 200);
    ck_assert_str_eq(json_str(r.json, "status"), "CANCELED");
    fg_response_fini(&r);
    get_order(s, "order-b-only", &r); /* the server's key: a third tenant, with nothing */
    assert_error(&r, 404, "NOT_FOUND_PAYMENT");
    fg_response_fini(&r);
    stop_server(s);
}
END_TEST

START_TEST(test_a_tenant_reset_leaves_other_tenants_intact)
{
    fg_server *s = start_server(NULL);
    fg_response r, rb;
    confirm_ok_as(s, KA, "pk_rs_a", "order-rs-a", "rs-a-1", &r);
    fg_response_fini(&r);
    confirm_ok_as(s, KB, "pk_rs_b", "order-rs-b", "rs-b-1", &rb);
    retry_a_4xx(s, KA, "pk_rs_a4", "order-rs-a4");
    retry_a_4xx(s, KB, "pk_rs_b4", "order-rs-b4");
    json_t *jb = journal_as(s, KB);
    size_t n_b = json_array_size(jb);
    ck_assert_uint_eq(n_b, 3);
    json_decref(jb);

    reset_as(s, KA, NULL);

    /* A: an empty ledger, journal view and report. */
    json_t *v = payments_as(s, KA);
    ck_assert_uint_eq(json_array_size(v), 0);
    json_decref(v);
    v = journal_as(s, KA);
    ck_assert_uint_eq(json_array_size(v), 0);
    json_decref(v);
    v = findings_as(s, KA);
    ck_assert_uint_eq(json_array_size(v), 0);
    json_decref(v);
    /* B: its ledger, journal and report as they were. */
    v = payments_as(s, KB);
    ck_assert_uint_eq(json_array_size(v), 1); /* an invalid confirm makes no payment */
    json_decref(v);
    jb = journal_as(s, KB);
    ck_assert_uint_eq(json_array_size(jb), n_b);
    assert_all_tenant(jb, KB, "journal");
    json_decref(jb);
    assert_retried_4xx(s, KB, 1, (const char *const[]){"order-rs-b4", NULL});
    /* The whole server: B's finding only; A's old entries stay in the server's journal. */
    assert_retried_4xx(s, NULL, 1, (const char *const[]){"order-rs-b4", NULL});
    v = journal_as(s, NULL);
    size_t n_a_old = 0, i;
    json_t *e;
    json_array_foreach(v, i, e) n_a_old += json_is_str(e, "tenant", KA);
    ck_assert_uint_eq(n_a_old, 3);
    json_decref(v);

    /* B keeps working: its record replays, its attempt count goes on, a new payment commits. */
    fg_response again;
    confirm_as_key(s, KB, "pk_rs_b", "order-rs-b", 1000, "rs-b-1", 0, &again);
    assert_done(&again, "pk_rs_b", "order-rs-b");
    ck_assert(same_bytes(&again, &rb));
    fg_response_fini(&again);
    fg_response_fini(&rb);
    jb = journal_as(s, KB);
    json_t *last = json_array_get(jb, json_array_size(jb) - 1);
    ck_assert_str_eq(json_str(last, "outcome"), "replayed");
    ck_assert_int_eq(json_int(last, "attempt"), 2);
    json_decref(jb);
    confirm_ok_as(s, KB, "pk_rs_b2", "order-rs-b2", "rs-b-2", &r);
    fg_response_fini(&r);

    /* A's ledger is empty: the same orderId and key commit anew, as attempt 1. */
    confirm_ok_as(s, KA, "pk_rs_a", "order-rs-a", "rs-a-1", &r);
    fg_response_fini(&r);
    json_t *ea = the_ledger_entry_at(__LINE__, s, "order-rs-a");
    ck_assert(json_is_str(ea, "tenant", KA));
    ck_assert_int_eq(json_int(ea, "charges"), 1);
    ck_assert_int_eq(json_int(ea, "confirm_attempts"), 1);
    json_decref(ea);
    v = journal_as(s, KA);
    ck_assert_uint_eq(json_array_size(v), 1);
    ck_assert_int_eq(json_int(json_array_get(v, 0), "attempt"), 1);
    json_decref(v);
    stop_server(s);
}
END_TEST

/* A confirm as `key` on a thread of its own (it is held by its tenant's latency). */
struct held {
    const fg_server *s;
    const char *key, *pk, *oid;
    pthread_t thread;
    fg_response r;
};

static void *held_run(void *arg)
{
    struct held *h = arg;
    confirm_as_key(h->s, h->key, h->pk, h->oid, 1000, h->pk, 10000, &h->r);
    return NULL;
}

#define HELD_1500 \
    "{'name':'held','routes':{'confirm':{'latency':{'dist':'fixed','ms':1500}}," \
    "'default':{'latency':{'dist':'fixed','ms':0}}}}"

START_TEST(test_a_tenant_reset_fails_only_its_own_held_requests)
{
    fg_server *s = start_q(HELD_1500);
    struct held h[2] = {{.s = s, .key = KA, .pk = "pk_hd_a", .oid = "order-hd-a"},
                        {.s = s, .key = KB, .pk = "pk_hd_b", .oid = "order-hd-b"}};
    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&h[i].thread, NULL, held_run, &h[i]), 0);
    ck_assert_uint_eq(wait_pending(s, "order-hd-", 2, 5000), 2);
    reset_as(s, KA, NULL);
    for (int i = 0; i < 2; i++)
        pthread_join(h[i].thread, NULL);
    /* A's spans its tenant's reset: 500, and A's new ledger stays empty. B's is not touched. */
    assert_error(&h[0].r, 500, "FAILED_INTERNAL_SYSTEM_PROCESSING");
    assert_done(&h[1].r, "pk_hd_b", "order-hd-b");
    for (int i = 0; i < 2; i++)
        fg_response_fini(&h[i].r);
    json_t *v = payments_as(s, KA);
    ck_assert_uint_eq(json_array_size(v), 0);
    json_decref(v);
    v = journal_as(s, KA);
    ck_assert_uint_eq(json_array_size(v), 0);
    json_decref(v);
    v = findings_as(s, KA);
    ck_assert_uint_eq(json_array_size(v), 0);
    json_decref(v);
    assert_charged_once(s, "pk_hd_b", "order-hd-b");
    v = journal_as(s, KB);
    ck_assert_uint_eq(json_array_size(v), 1);
    ck_assert_int_eq(json_int(json_array_get(v, 0), "status"), 200);
    json_decref(v);
    stop_server(s);
}
END_TEST

/* ---- profiles ----------------------------------------------------------------------------- */

#define FAILS_503 \
    "{'name':'a-fails','routes':{'confirm':{'faults':[{'kind':'error','p':1,'status':503," \
    "'code':'SERVICE_UNAVAILABLE','when':'before'}]}," \
    "'default':{'latency':{'dist':'fixed','ms':0}}}}"
#define FAILS_500 \
    "{'name':'server-fails','routes':{'confirm':{'faults':[{'kind':'error','p':1,'status':500," \
    "'code':'FAILED_INTERNAL_SYSTEM_PROCESSING','when':'before'}]}," \
    "'default':{'latency':{'dist':'fixed','ms':0}}}}"

START_TEST(test_a_tenant_profile_applies_to_its_requests_only)
{
    fg_server *s = start_server(NULL);
    fg_response r;
    confirm_ok_as(s, KB, "pk_pb_0", "order-pb-0", NULL, &r); /* B exists */
    fg_response_fini(&r);
    put_profile_as(s, KA, FAILS_503);
    char name[80];
    ck_assert_str_eq(profile_name_as(s, KA, name, sizeof name), "a-fails");
    ck_assert_str_eq(profile_name_as(s, KB, name, sizeof name), "instant");
    ck_assert_str_eq(profile_name_as(s, NULL, name, sizeof name), "instant");
    for (int i = 0; i < 3; i++) {
        char pk[32], oid[32];
        snprintf(pk, sizeof pk, "pk_pa_%d", i);
        snprintf(oid, sizeof oid, "order-pa-%d", i);
        confirm_as_key(s, KA, pk, oid, 1000, NULL, 0, &r);
        assert_error(&r, 503, "SERVICE_UNAVAILABLE");
        fg_response_fini(&r);
        snprintf(pk, sizeof pk, "pk_pb_%d", i + 1);
        snprintf(oid, sizeof oid, "order-pb-%d", i + 1);
        confirm_ok_as(s, KB, pk, oid, NULL, &r);
        fg_response_fini(&r);
    }
    /* A's own profile wins over the server's; B follows the server's. */
    put_profile_as(s, NULL, FAILS_500);
    confirm_as_key(s, KA, "pk_pa_9", "order-pa-9", 1000, NULL, 0, &r);
    assert_error(&r, 503, "SERVICE_UNAVAILABLE");
    fg_response_fini(&r);
    confirm_as_key(s, KB, "pk_pb_9", "order-pb-9", 1000, NULL, 0, &r);
    assert_error(&r, 500, "FAILED_INTERNAL_SYSTEM_PROCESSING");
    fg_response_fini(&r);
    ck_assert_str_eq(profile_name_as(s, KB, name, sizeof name), "server-fails");
    /* A reset without a body keeps A's profile; one with a profile sets it. */
    reset_as(s, KA, NULL);
    ck_assert_str_eq(profile_name_as(s, KA, name, sizeof name), "a-fails");
    confirm_as_key(s, KA, "pk_pa_10", "order-pa-10", 1000, NULL, 0, &r);
    assert_error(&r, 503, "SERVICE_UNAVAILABLE");
    fg_response_fini(&r);
    char *body = dq("{'profile':{'name':'a-ok','routes':{'default':{'latency':{'dist':'fixed',"
                    "'ms':0}}}}}");
    reset_as(s, KA, body);
    free(body);
    ck_assert_str_eq(profile_name_as(s, KA, name, sizeof name), "a-ok");
    ck_assert_str_eq(profile_name_as(s, NULL, name, sizeof name), "server-fails");
    confirm_ok_as(s, KA, "pk_pa_11", "order-pa-11", NULL, &r);
    fg_response_fini(&r);
    stop_server(s);
}
END_TEST

START_TEST(test_a_tenant_throttle_bucket_does_not_refuse_another)
{
    fg_server *s = start_q("{'name':'bucket','routes':{'confirm':{'throttle':{'kind':"
                           "'token_bucket','rate_per_s':0.001,'burst':2,'status':429}},"
                           "'default':{'latency':{'dist':'fixed','ms':0}}}}");
    fg_response r;
    const char *const keys[2] = {KA, KB};
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < 3; i++) {
            char pk[32], oid[32];
            snprintf(pk, sizeof pk, "pk_tb_%d_%d", k, i);
            snprintf(oid, sizeof oid, "order-tb-%d-%d", k, i);
            confirm_as_key(s, keys[k], pk, oid, 1000, NULL, 0, &r);
            if (i < 2)
                assert_done(&r, pk, oid);
            else
                assert_error(&r, 429, "TOO_MANY_REQUESTS");
            fg_response_fini(&r);
        }
    }
    /* A reset of A refills A's bucket only. */
    reset_as(s, KA, NULL);
    confirm_ok_as(s, KA, "pk_tb_a_after", "order-tb-a-after", NULL, &r);
    fg_response_fini(&r);
    confirm_as_key(s, KB, "pk_tb_b_after", "order-tb-b-after", 1000, NULL, 0, &r);
    assert_error(&r, 429, "TOO_MANY_REQUESTS");
    fg_response_fini(&r);
    stop_server(s);
}
END_TEST

START_TEST(test_a_times_budget_is_per_tenant)
{
    fg_server *s = start_q("{'name':'once','routes':{'confirm':{'faults':[{'kind':'error','p':1,"
                           "'status':503,'code':'SERVICE_UNAVAILABLE','when':'before','times':1}]},"
                           "'default':{'latency':{'dist':'fixed','ms':0}}}}");
    fg_response r;
    const char *const keys[3] = {KA, KB, KC};
    for (int k = 0; k < 3; k++) {
        char pk[32], oid[32];
        snprintf(pk, sizeof pk, "pk_tm_%d", k);
        snprintf(oid, sizeof oid, "order-tm-%d", k);
        confirm_as_key(s, keys[k], pk, oid, 1000, "tm-key", 0, &r);
        assert_error(&r, 503, "SERVICE_UNAVAILABLE"); /* each tenant's one time */
        fg_response_fini(&r);
        confirm_as_key(s, keys[k], pk, oid, 1000, "tm-key", 0, &r);
        assert_done(&r, pk, oid);
        fg_response_fini(&r);
    }
    stop_server(s);
}
END_TEST

START_TEST(test_a_tenant_concurrency_cap_does_not_refuse_another)
{
    fg_server *s = start_q("{'name':'cap1','routes':{'confirm':{'latency':{'dist':'fixed',"
                           "'ms':1500},'concurrency':{'max_in_flight':1}},"
                           "'default':{'latency':{'dist':'fixed','ms':0}}}}");
    /* Tenant A is the server's default key, held in a multi loop of its own. */
    struct mrun m;
    mrun_init(&m, s, 1);
    mrun_confirm(&m, 0, "pk_cap_a_1", "order-cap-a-1", 1000, "cap-a-1", 5000);
    mrun_start(&m);
    ck_assert_uint_eq(wait_pending(s, "order-cap-a-", 1, 5000), 1);
    fg_response r;
    confirm_fresh(s, "pk_cap_a_2", "order-cap-a-2", 1000, "cap-a-2", 0, &r);
    assert_error(&r, 503, "SERVICE_UNAVAILABLE"); /* A's cap of 1 */
    fg_response_fini(&r);
    confirm_ok_as(s, KB, "pk_cap_b_1", "order-cap-b-1", "cap-b-1", &r); /* B's own cap */
    fg_response_fini(&r);
    mrun_join(&m);
    ck_assert_int_eq(m.q[0].status, 200);
    mrun_free(&m);
    json_t *j = journal_as(s, KB);
    ck_assert_uint_eq(json_array_size(j), 1);
    ck_assert_str_eq(json_str(json_array_get(j, 0), "outcome"), "ok");
    json_decref(j);
    stop_server(s);
}
END_TEST

/* ---- the admin header --------------------------------------------------------------------- */

START_TEST(test_tenant_header_errors)
{
    fg_server *s = start_server(NULL);
    fg_response r;
    confirm_ok_as(s, KA, "pk_h_1", "order-h-1", NULL, &r);
    fg_response_fini(&r);
    static const char *const reads[] = {"/__admin/requests", "/__admin/payments",
                                        "/__admin/report", "/__admin/profile",
                                        "/__admin/webhooks", "/__admin/webhooks/deliveries"};
    for (size_t i = 0; i < sizeof reads / sizeof *reads; i++) {
        /* A key the server would not accept as a secret key. */
        admin_call(s, "GET", reads[i], NULL, "X-Fakegate-Tenant: live_sk_x", &r);
        assert_error(&r, 400, "INVALID_REQUEST");
        ck_assert_msg(strstr(json_str(r.json, "message"), "X-Fakegate-Tenant"), "%s", r.body);
        fg_response_fini(&r);
        /* A key never used. */
        admin_call(s, "GET", reads[i], NULL, "X-Fakegate-Tenant: test_sk_never", &r);
        assert_error(&r, 404, "NOT_FOUND");
        ck_assert_msg(strstr(json_str(r.json, "message"), "test_sk_never"), "%s", r.body);
        fg_response_fini(&r);
    }
    /* The header twice, even with the same value. */
    const char *twice[] = {HA, HA, NULL};
    fg_request req = {.method = "GET", .path = "/__admin/requests", .headers = twice};
    fg_http(s, NULL, &req, &r);
    assert_error(&r, 400, "INVALID_REQUEST");
    ck_assert_msg(strstr(json_str(r.json, "message"), "twice"), "%s", r.body);
    fg_response_fini(&r);
    /* An unknown key on a reset of it is a usage error too: nothing is created. */
    admin_call(s, "POST", "/__admin/reset", NULL, "X-Fakegate-Tenant: live_sk_x", &r);
    assert_error(&r, 400, "INVALID_REQUEST");
    fg_response_fini(&r);
    /* A PUT naming an unknown tenant creates it: then its reads work. */
    put_profile_as(s, "test_sk_new", FAILS_503);
    char name[80];
    ck_assert_str_eq(profile_name_as(s, "test_sk_new", name, sizeof name), "a-fails");
    json_t *j = journal_as(s, "test_sk_new");
    ck_assert_uint_eq(json_array_size(j), 0);
    json_decref(j);
    confirm_as_key(s, "test_sk_new", "pk_h_new", "order-h-new", 1000, NULL, 0, &r);
    assert_error(&r, 503, "SERVICE_UNAVAILABLE"); /* its profile from its first request */
    fg_response_fini(&r);
    /* And so does a reset. */
    reset_as(s, "test_sk_reset", NULL);
    j = payments_as(s, "test_sk_reset");
    ck_assert_uint_eq(json_array_size(j), 0);
    json_decref(j);
    ck_assert_str_eq(profile_name_as(s, "test_sk_reset", name, sizeof name), "instant");
    stop_server(s);
}
END_TEST

START_TEST(test_tenant_header_with_secret_keys_accepts_only_those)
{
    const char *args[] = {"--secret-key", "test_sk_one", "--secret-key", "live_sk_two", NULL};
    fg_opts o = {.secret_key = NULL, .args = args};
    fg_server *s = start_server(&o);
    fg_response r;
    /* The first key's tenant exists from the start. */
    json_t *j = journal_as(s, "test_sk_one");
    ck_assert_uint_eq(json_array_size(j), 0);
    json_decref(j);
    admin_call(s, "GET", "/__admin/requests", NULL, "X-Fakegate-Tenant: test_sk_other", &r);
    assert_error(&r, 400, "INVALID_REQUEST");
    fg_response_fini(&r);
    admin_call(s, "GET", "/__admin/requests", NULL, "X-Fakegate-Tenant: live_sk_two", &r);
    assert_error(&r, 404, "NOT_FOUND");
    fg_response_fini(&r);
    confirm_ok_as(s, "live_sk_two", "pk_two_1", "order-two-1", NULL, &r);
    fg_response_fini(&r);
    j = payments_as(s, "live_sk_two");
    ck_assert_uint_eq(json_array_size(j), 1);
    assert_all_tenant(j, "live_sk_two", "payments");
    json_decref(j);
    j = payments_as(s, "test_sk_one");
    ck_assert_uint_eq(json_array_size(j), 0);
    json_decref(j);
    stop_server(s);
}
END_TEST

START_TEST(test_max_tenants_refuses_a_new_key_with_503)
{
    const char *args[] = {"--max-tenants", "2", NULL};
    fg_server *s = start_args(NULL, args);
    fg_response r;
    confirm_ok_as(s, KA, "pk_mx_a", "order-mx-a", NULL, &r);
    fg_response_fini(&r);
    confirm_ok_as(s, KB, "pk_mx_b", "order-mx-b", NULL, &r);
    fg_response_fini(&r);
    confirm_as_key(s, KC, "pk_mx_c", "order-mx-c", 1000, NULL, 0, &r);
    assert_error(&r, 503, "SERVICE_UNAVAILABLE");
    ck_assert_msg(strstr(json_str(r.json, "message"), "--max-tenants"), "%s", r.body);
    fg_response_fini(&r);
    /* An admin PUT naming a third tenant is refused the same way; a read is a 404. */
    char *json = dq(FAILS_503);
    admin_call(s, "PUT", "/__admin/profile", json, HC, &r);
    free(json);
    assert_error(&r, 503, "SERVICE_UNAVAILABLE");
    ck_assert_msg(strstr(json_str(r.json, "message"), "--max-tenants"), "%s", r.body);
    fg_response_fini(&r);
    admin_call(s, "GET", "/__admin/requests", NULL, HC, &r);
    assert_error(&r, 404, "NOT_FOUND");
    fg_response_fini(&r);
    /* The two known tenants keep working. */
    confirm_ok_as(s, KA, "pk_mx_a2", "order-mx-a2", NULL, &r);
    fg_response_fini(&r);
    confirm_ok_as(s, KB, "pk_mx_b2", "order-mx-b2", NULL, &r);
    fg_response_fini(&r);
    ck_assert_uint_eq(ledger_size(s), 4);
    stop_server(s);
}
END_TEST

/* ---- sessions ----------------------------------------------------------------------------- */

/* POST /__admin/sessions {paymentKey, orderId, amount 1000} scoped to `tenant` (NULL: none);
 * require 200. */
static void register_session(const fg_server *s, const char *tenant, const char *pk,
                             const char *oid)
{
    char body[256], line[256];
    snprintf(body, sizeof body, "{\"paymentKey\":\"%s\",\"orderId\":\"%s\",\"amount\":1000}", pk,
             oid);
    fg_response r;
    admin_call(s, "POST", "/__admin/sessions", body, tenant_line(tenant, line, sizeof line), &r);
    assert_status(&r, 200);
    ck_assert_str_eq(json_str(r.json, "status"), "IN_PROGRESS");
    fg_response_fini(&r);
}

START_TEST(test_a_session_registered_for_a_tenant_is_only_its_own_strict)
{
    const char *args[] = {"--strict-sessions", NULL};
    fg_server *s = start_args(NULL, args);
    /* A comes first: its key adopts the default tenant. */
    fg_response r;
    confirm_as_key(s, KA, "pk_ss_none", "order-ss-none", 1000, NULL, 0, &r);
    assert_error(&r, 404, "NOT_FOUND_PAYMENT_SESSION");
    fg_response_fini(&r);
    /* Without the header: the default tenant's (A's). */
    register_session(s, NULL, "pk_ss_def", "order-ss-def");
    register_session(s, KB, "pk_ss_b", "order-ss-b");
    confirm_ok_as(s, KA, "pk_ss_def", "order-ss-def", NULL, &r);
    fg_response_fini(&r);
    confirm_as_key(s, KA, "pk_ss_b", "order-ss-b", 1000, NULL, 0, &r);
    assert_error(&r, 404, "NOT_FOUND_PAYMENT_SESSION");
    fg_response_fini(&r);
    confirm_as_key(s, KB, "pk_ss_def", "order-ss-def", 1000, NULL, 0, &r);
    assert_error(&r, 404, "NOT_FOUND_PAYMENT_SESSION");
    fg_response_fini(&r);
    confirm_ok_as(s, KB, "pk_ss_b", "order-ss-b", NULL, &r);
    fg_response_fini(&r);
    json_t *pa = payments_as(s, KA), *pb = payments_as(s, KB);
    ck_assert_uint_eq(json_array_size(pa), 1);
    ck_assert_uint_eq(json_array_size(pb), 1);
    ck_assert_str_eq(json_str(json_object_get(json_array_get(pa, 0), "payment"), "paymentKey"),
                     "pk_ss_def");
    ck_assert_str_eq(json_str(json_object_get(json_array_get(pb, 0), "payment"), "paymentKey"),
                     "pk_ss_b");
    json_decref(pa);
    json_decref(pb);
    stop_server(s);
}
END_TEST

START_TEST(test_a_session_registered_for_a_tenant_is_only_its_own_lenient)
{
    fg_server *s = start_server(NULL);
    register_session(s, KA, "pk_sl_a", "order-sl-a");
    /* Lenient: B's confirm of the same key is B's own payment, made on arrival. */
    fg_response r;
    confirm_ok_as(s, KB, "pk_sl_a", "order-sl-a", NULL, &r);
    fg_response_fini(&r);
    json_t *pa = payments_as(s, KA);
    ck_assert_uint_eq(json_array_size(pa), 1);
    ck_assert_str_eq(json_str(json_object_get(json_array_get(pa, 0), "payment"), "status"),
                     "IN_PROGRESS");
    json_decref(pa);
    confirm_ok_as(s, KA, "pk_sl_a", "order-sl-a", NULL, &r);
    fg_response_fini(&r);
    json_t *all = payments_as(s, NULL);
    ck_assert_uint_eq(json_array_size(all), 2);
    size_t i;
    json_t *e;
    json_array_foreach(all, i, e) ck_assert_int_eq(json_int(e, "charges"), 1);
    json_decref(all);
    stop_server(s);
}
END_TEST

/* ---- webhooks ----------------------------------------------------------------------------- */

/* The tenant's deliveries journal holds exactly one delivery, in `status`, with no attempt in
 * flight (a pending one waits for its next attempt). */
static bool one_delivery_is(const fg_server *s, const char *tenant, const char *status)
{
    json_t *d = deliveries_as(s, tenant);
    json_t *e = json_array_get(d, 0);
    bool ok = json_array_size(d) == 1 && json_is_str(e, "status", status);
    if (ok && strcmp(status, "pending") == 0)
        ok = json_is_string(json_object_get(e, "next_attempt_at"));
    json_decref(d);
    return ok;
}

START_TEST(test_a_tenant_receivers_get_only_its_events)
{
    struct rx_answer ok = {RX_STATUS, 200};
    struct receiver *rx = receiver_start(&ok, 1);
    ck_assert_msg(rx != NULL, "the receiver did not start");
    fg_server *s = start_server(NULL);
    char body[300];
    snprintf(body, sizeof body, "{\"urls\":[\"%s\"]}", receiver_url(rx));
    fg_response r;
    admin_call(s, "PUT", "/__admin/webhooks", body, HA, &r); /* creates A */
    assert_status(&r, 200);
    fg_response_fini(&r);
    json_t *w = admin_get_as(s, "/__admin/webhooks", KA);
    char *wt = json_dumps(w, JSON_COMPACT);
    ck_assert_msg(strstr(wt, receiver_url(rx)) && strstr(wt, "\"own\":true"), "%s", wt);
    free(wt);
    json_decref(w);

    confirm_ok_as(s, KB, "pk_wh_b", "order-wh-b", NULL, &r); /* the server's receivers: none */
    fg_response_fini(&r);
    confirm_ok_as(s, KA, "pk_wh_a", "order-wh-a", NULL, &r);
    fg_response_fini(&r);
    ck_assert_uint_eq(receiver_wait(rx, 1, WAIT_MS), 1);
    /* B's event came first: had it been filed for anyone, the journal would show it by now. */
    int64_t deadline = fg_now_ms() + WAIT_MS;
    while (!one_delivery_is(s, KA, "delivered")) {
        ck_assert_msg(fg_now_ms() < deadline, "A's delivery never delivered");
        fg_pause_ms(10);
    }
    json_t *da = deliveries_as(s, KA);
    json_t *d = json_array_get(da, 0);
    ck_assert(json_is_str(d, "tenant", KA));
    ck_assert(json_is_str(d, "order_id", "order-wh-a"));
    json_decref(da);
    struct rx_request got;
    ck_assert(receiver_get(rx, 0, &got));
    ck_assert_msg(strstr(got.body, "order-wh-a") && !strstr(got.body, "order-wh-b"), "%s",
                  got.body);
    ck_assert_uint_eq(receiver_count(rx), 1);
    json_t *db = deliveries_as(s, KB);
    ck_assert_uint_eq(json_array_size(db), 0);
    json_decref(db);
    json_t *dall = deliveries_as(s, NULL);
    ck_assert_uint_eq(json_array_size(dall), 1);
    assert_all_tenant(dall, KA, "deliveries");
    json_decref(dall);
    stop_server(s);
    receiver_stop(rx);
}
END_TEST

START_TEST(test_a_tenant_reset_drops_only_its_deliveries)
{
    struct rx_answer fail = {RX_STATUS, 500};
    struct receiver *rx = receiver_start(&fail, 1);
    ck_assert_msg(rx != NULL, "the receiver did not start");
    const char *args[] = {"--webhook-url", receiver_url(rx), NULL};
    fg_server *s = start_args(NULL, args);
    fg_response r;
    confirm_ok_as(s, KA, "pk_dr_a", "order-dr-a", NULL, &r);
    fg_response_fini(&r);
    confirm_ok_as(s, KB, "pk_dr_b", "order-dr-b", NULL, &r);
    fg_response_fini(&r);
    ck_assert_uint_eq(receiver_wait(rx, 2, WAIT_MS), 2);
    /* Both failed their first attempt and wait for the next, a minute later. */
    int64_t deadline = fg_now_ms() + WAIT_MS;
    while (!one_delivery_is(s, KA, "pending") || !one_delivery_is(s, KB, "pending")) {
        ck_assert_msg(fg_now_ms() < deadline, "deliveries never both waiting for a retry");
        fg_pause_ms(10);
    }
    reset_as(s, KA, NULL);
    json_t *d = deliveries_as(s, KA);
    ck_assert_uint_eq(json_array_size(d), 0);
    json_decref(d);
    d = deliveries_as(s, KB);
    ck_assert_uint_eq(json_array_size(d), 1);
    ck_assert(json_is_str(json_array_get(d, 0), "status", "pending"));
    json_decref(d);
    d = deliveries_as(s, NULL);
    ck_assert_uint_eq(json_array_size(d), 1);
    assert_all_tenant(d, KB, "deliveries");
    json_decref(d);
    /* B's retry still comes when due; A's never does. */
    struct rx_answer ok = {RX_STATUS, 200};
    receiver_script(rx, &ok, 1);
    admin_call(s, "POST", "/__admin/clock", "{\"advance_s\":61}", NULL, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    ck_assert_uint_eq(receiver_wait(rx, 3, WAIT_MS), 3);
    deadline = fg_now_ms() + WAIT_MS;
    while (!one_delivery_is(s, KB, "delivered")) {
        ck_assert_msg(fg_now_ms() < deadline, "B's retry never delivered");
        fg_pause_ms(10);
    }
    struct rx_request got;
    ck_assert(receiver_get(rx, 2, &got));
    ck_assert_msg(strstr(got.body, "order-dr-b") != NULL, "%s", got.body);
    ck_assert_int_eq(got.retried_count, 1);
    ck_assert_uint_eq(receiver_count(rx), 3);
    stop_server(s);
    receiver_stop(rx);
}
END_TEST

/* ---- the report --------------------------------------------------------------------------- */

START_TEST(test_the_server_report_sums_the_tenants)
{
    fg_server *s = start_server(NULL);
    retry_a_4xx(s, KA, "pk_sum_a", "order-sum-a");
    retry_a_4xx(s, KB, "pk_sum_b", "order-sum-b");
    assert_retried_4xx(s, NULL, 2, (const char *const[]){"order-sum-a", "order-sum-b", NULL});
    assert_retried_4xx(s, KA, 1, (const char *const[]){"order-sum-a", NULL});
    assert_retried_4xx(s, KB, 1, (const char *const[]){"order-sum-b", NULL});
    json_t *rep = admin_get_as(s, "/__admin/report", NULL);
    ck_assert_int_eq(json_int(rep, "judged_requests"), 4);
    json_decref(rep);
    rep = admin_get_as(s, "/__admin/report", KA);
    ck_assert_int_eq(json_int(rep, "judged_requests"), 2);
    json_decref(rep);
    stop_server(s);
}
END_TEST

/* ---- fakegate report --tenant ------------------------------------------------------------- */

static void run_report(const char *const *args, fg_run_result *rr)
{
    char err[FG_ERR_LEN];
    ck_assert_msg(fg_run(args, 10000, rr, err) == 0, "%s", err);
}

START_TEST(test_cli_report_tenant_reads_that_tenants_report)
{
    fg_server *s = start_server(NULL);
    retry_a_4xx(s, KA, "pk_cli_a", "order-cli-a");
    fg_response r;
    confirm_ok_as(s, KB, "pk_cli_b", "order-cli-b", "cli-b-1", &r);
    fg_response_fini(&r);
    fg_run_result rr;
    const char *a[] = {"report", "--port-file", s->port_file, "--tenant", KA, NULL};
    run_report(a, &rr);
    ck_assert_msg(rr.exit_status == 1 && strstr(rr.out, "retried_4xx: 1 time") &&
                      strstr(rr.out, "order-cli-a"),
                  "report --tenant A: exit %d; stdout: %s; stderr: %s", rr.exit_status, rr.out,
                  rr.err);
    fg_run_result_fini(&rr);
    const char *b[] = {"report", "--port-file", s->port_file, "--tenant=" KB, NULL};
    run_report(b, &rr);
    ck_assert_msg(rr.exit_status == 0 && strstr(rr.out, "no findings"),
                  "report --tenant B: exit %d; stdout: %s; stderr: %s", rr.exit_status, rr.out,
                  rr.err);
    fg_run_result_fini(&rr);
    const char *none[] = {"report", "--port-file", s->port_file, NULL};
    run_report(none, &rr);
    ck_assert_msg(rr.exit_status == 1 && strstr(rr.out, "order-cli-a"),
                  "report: exit %d; stdout: %s; stderr: %s", rr.exit_status, rr.out, rr.err);
    fg_run_result_fini(&rr);
    /* A tenant the server does not know: exit 2 with the server's message. */
    const char *unknown[] = {"report", "--port-file", s->port_file, "--tenant", "test_sk_never",
                             NULL};
    run_report(unknown, &rr);
    ck_assert_msg(rr.exit_status == 2 && strstr(rr.err, "404") && strstr(rr.err, "NOT_FOUND") &&
                      strstr(rr.err, "no tenant 'test_sk_never'"),
                  "report --tenant unknown: exit %d; stdout: %s; stderr: %s", rr.exit_status,
                  rr.out, rr.err);
    fg_run_result_fini(&rr);
    /* A key that cannot be a header value is a usage error. */
    const char *bad[] = {"report", "--port-file", s->port_file, "--tenant", "test_sk_a\r\nX: y",
                         NULL};
    run_report(bad, &rr);
    ck_assert_msg(rr.exit_status == 2 && strstr(rr.err, "--tenant"),
                  "report --tenant CRLF: exit %d; stderr: %s", rr.exit_status, rr.err);
    fg_run_result_fini(&rr);
    stop_server(s);
}
END_TEST

START_TEST(test_cli_report_tenant_with_the_admin_token)
{
    const char *sargs[] = {"--admin-token", "s3cret", NULL};
    fg_server *s = start_args(NULL, sargs);
    fg_response r;
    confirm_ok_as(s, KB, "pk_tok_b", "order-tok-b", NULL, &r);
    fg_response_fini(&r);
    fg_run_result rr;
    const char *with[] = {"report", "--port-file", s->port_file, "--admin-token", "s3cret",
                          "--tenant", KB, NULL};
    run_report(with, &rr);
    ck_assert_msg(rr.exit_status == 0, "exit %d; stdout: %s; stderr: %s", rr.exit_status, rr.out,
                  rr.err);
    fg_run_result_fini(&rr);
    const char *without[] = {"report", "--port-file", s->port_file, "--tenant", KB, NULL};
    run_report(without, &rr);
    ck_assert_msg(rr.exit_status == 2 && strstr(rr.err, "401"), "exit %d; stderr: %s",
                  rr.exit_status, rr.err);
    fg_run_result_fini(&rr);
    stop_server(s);
}
END_TEST

/* ---- stress: 8 tenants x 4 threads under a lossy profile, scoped resets in the middle ---- */

#define ST_TENANTS 8
#define ST_THREADS 4
#define ST_RESET_TENANTS 3    /* tenants 0 .. 2 are reset in the middle, the others never */
#define ST_RUN_MS 8000        /* traffic for this long ... */
#define ST_MAX_PAYMENTS 120   /* ... or this many payments per thread, whichever comes first */
#define ST_MAX_OK 256         /* confirmed paymentKeys a thread remembers */

#define ST_PROFILE \
    "{'name':'lossy-short','seed':7,'routes':{" \
    "'confirm':{'latency':{'dist':'uniform','min_ms':0,'max_ms':3},'faults':[" \
    "{'kind':'drop_request','p':0.12,'how':'close'}," \
    "{'kind':'drop_response','p':0.12,'how':'close'}," \
    "{'kind':'error','p':0.05,'status':500,'code':'FAILED_INTERNAL_SYSTEM_PROCESSING'}]}," \
    "'cancel':{'faults':[{'kind':'drop_response','p':0.15,'how':'close'}]}," \
    "'default':{'latency':{'dist':'fixed','ms':0}}}}"

struct st_worker {
    const fg_server *s;
    int tenant, thread;
    char key[32];
    int64_t deadline_ms;
    atomic_int *stop;
    /* What this thread saw: paymentKeys answered 200 DONE by a confirm (tenants never reset). */
    char ok[ST_MAX_OK][48];
    size_t n_ok;
    size_t n_requests, n_no_answer;
};

static void st_prefix(int tenant, char *buf, size_t size)
{
    snprintf(buf, size, "st%d", tenant);
}

/* One attempt of a confirm; true if it was answered (status in *status). */
static bool st_confirm(struct st_worker *w, CURL *h, const char *pk, const char *oid,
                       long long amount, const char *idem, long *status)
{
    char body[256];
    snprintf(body, sizeof body, "{\"paymentKey\":\"%s\",\"orderId\":\"%s\",\"amount\":%lld}", pk,
             oid, amount);
    fg_response r;
    v1_as(w->s, h, w->key, "POST", CONFIRM_PATH, body, idem, 3000, &r);
    bool answered = r.curl_code == CURLE_OK;
    *status = r.status;
    w->n_requests++;
    w->n_no_answer += !answered;
    fg_response_fini(&r);
    return answered;
}

static bool st_cancel(struct st_worker *w, CURL *h, const char *pk, const char *idem,
                      long *status)
{
    char path[FG_PATH_LEN];
    snprintf(path, sizeof path, "/v1/payments/%s/cancel", pk);
    fg_response r;
    v1_as(w->s, h, w->key, "POST", path, CANCEL_BODY, idem, 3000, &r);
    bool answered = r.curl_code == CURLE_OK;
    *status = r.status;
    w->n_requests++;
    w->n_no_answer += !answered;
    fg_response_fini(&r);
    return answered;
}

static void *st_run(void *arg)
{
    struct st_worker *w = arg;
    CURL *h = curl_easy_init();
    if (!h)
        return NULL;
    char pre[16];
    st_prefix(w->tenant, pre, sizeof pre);
    char bad_pk[64] = "", bad_oid[80] = "";
    for (int n = 0; n < ST_MAX_PAYMENTS && fg_now_ms() < w->deadline_ms && !atomic_load(w->stop);
         n++) {
        char pk[48], oid[64], idem[64];
        snprintf(pk, sizeof pk, "%s_pk_%d_%d", pre, w->thread, n);
        snprintf(oid, sizeof oid, "%s-o-%d-%d", pre, w->thread, n);
        snprintf(idem, sizeof idem, "%s-k-%d-%d", pre, w->thread, n);
        if (n % 9 == 4) { /* an invalid confirm, sent again after the next payment: retried_4xx */
            snprintf(bad_pk, sizeof bad_pk, "%s_bad_%d_%d", pre, w->thread, n);
            snprintf(bad_oid, sizeof bad_oid, "%s-bad-%d-%d", pre, w->thread, n);
            long st;
            st_confirm(w, h, bad_pk, bad_oid, -5, NULL, &st);
        }
        long status = 0;
        bool done = false;
        for (int attempt = 0; attempt < 4 && !done; attempt++) {
            char key[80];
            /* Every 5th payment resends under a new key (the client's bug the report names). */
            if (n % 5 == 0 && attempt > 0)
                snprintf(key, sizeof key, "%s-r%d", idem, attempt);
            else
                snprintf(key, sizeof key, "%s", idem);
            if (st_confirm(w, h, pk, oid, 1000, key, &status) &&
                (status == 200 || (status >= 400 && status < 500)))
                done = true;
        }
        if (done && status == 200 && w->n_ok < ST_MAX_OK)
            snprintf(w->ok[w->n_ok++], sizeof w->ok[0], "%s", pk);
        if (done && status == 200 && n % 3 == 1) {
            char ckey[80];
            snprintf(ckey, sizeof ckey, "%s-c", idem);
            for (int attempt = 0; attempt < 3; attempt++)
                if (st_cancel(w, h, pk, ckey, &status) && status != 500)
                    break;
        }
        if (bad_pk[0] && n % 9 == 5) {
            long st;
            st_confirm(w, h, bad_pk, bad_oid, -5, NULL, &st);
            bad_pk[0] = '\0';
        }
    }
    curl_easy_cleanup(h);
    return NULL;
}

/* Every string member `key` of the entries of `a` (nested under `sub` unless NULL) that is
 * not null starts with `prefix`. */
static void assert_member_prefix(const json_t *a, const char *sub, const char *key,
                                 const char *prefix, const char *what)
{
    size_t i;
    json_t *e;
    json_array_foreach(a, i, e) {
        const json_t *o = sub ? json_object_get(e, sub) : e;
        const json_t *v = json_object_get(o, key);
        if (json_is_null(v) || v == NULL)
            continue;
        ck_assert_msg(json_is_string(v) && has_prefix(json_string_value(v), prefix),
                      "%s: %s \"%s\" is not %s's", what, key,
                      json_is_string(v) ? json_string_value(v) : "?", prefix);
    }
}

START_TEST(test_stress_tenants_see_only_their_own_under_loss_and_resets)
{
    char *profile = dq(ST_PROFILE);
    const char *args[] = {"--threads", "4", NULL};
    fg_server *s = start_args(profile, args);
    free(profile);
    static struct st_worker w[ST_TENANTS][ST_THREADS];
    pthread_t th[ST_TENANTS][ST_THREADS];
    atomic_int stop = 0;
    int64_t t0 = fg_now_ms();
    for (int t = 0; t < ST_TENANTS; t++)
        for (int k = 0; k < ST_THREADS; k++) {
            struct st_worker *x = &w[t][k];
            memset(x, 0, sizeof *x);
            x->s = s;
            x->tenant = t;
            x->thread = k;
            snprintf(x->key, sizeof x->key, "test_sk_st%d", t);
            x->deadline_ms = t0 + ST_RUN_MS;
            x->stop = &stop;
            ck_assert_int_eq(pthread_create(&th[t][k], NULL, st_run, x), 0);
        }
    /* Scoped resets of tenants 0 .. 2 at a third and two thirds of the run, while they work. */
    for (int round = 1; round <= 2; round++) {
        while (fg_now_ms() < t0 + round * ST_RUN_MS / 3)
            fg_pause_ms(20);
        for (int t = 0; t < ST_RESET_TENANTS; t++) {
            char key[32];
            snprintf(key, sizeof key, "test_sk_st%d", t);
            reset_as(s, key, NULL);
        }
    }
    for (int t = 0; t < ST_TENANTS; t++)
        for (int k = 0; k < ST_THREADS; k++)
            pthread_join(th[t][k], NULL);
    wait_journal_settled(s);

    size_t n_requests = 0, n_lost = 0, n_scoped_payments = 0;
    long long sum_counts[8] = {0};
    static const char *const kinds[8] = {"retried_4xx", "early_retry", "new_key_resend",
                                         "key_reuse", "synchronized_retries", "retry_storm",
                                         NULL, NULL};
    for (int t = 0; t < ST_TENANTS; t++) {
        char key[32], pre[16], what[64];
        snprintf(key, sizeof key, "test_sk_st%d", t);
        st_prefix(t, pre, sizeof pre);
        for (int k = 0; k < ST_THREADS; k++) {
            n_requests += w[t][k].n_requests;
            n_lost += w[t][k].n_no_answer;
        }
        /* Its ledger: only its paymentKeys and orderIds, never charged twice. */
        json_t *p = payments_as(s, key);
        snprintf(what, sizeof what, "payments of %s", key);
        assert_all_tenant(p, key, what);
        assert_member_prefix(p, "payment", "paymentKey", pre, what);
        assert_member_prefix(p, "payment", "orderId", pre, what);
        size_t i;
        json_t *e;
        json_array_foreach(p, i, e) ck_assert_msg(json_int(e, "charges") <= 1, "%s: charged %lld",
                                                  what, json_int(e, "charges"));
        n_scoped_payments += json_array_size(p);
        /* A tenant never reset still has every payment a confirm saw DONE, charged once. */
        if (t >= ST_RESET_TENANTS) {
            ck_assert_msg(json_array_size(p) > 0, "%s: empty", what);
            for (int k = 0; k < ST_THREADS; k++)
                for (size_t o = 0; o < w[t][k].n_ok; o++) {
                    json_t *hit = NULL;
                    json_array_foreach(p, i, e) if (json_is_str(json_object_get(e, "payment"),
                                                                "paymentKey", w[t][k].ok[o]))
                        hit = e;
                    ck_assert_msg(hit != NULL, "%s: %s answered DONE but is not in the ledger",
                                  what, w[t][k].ok[o]);
                    ck_assert_int_eq(json_int(hit, "charges"), 1);
                }
        }
        json_decref(p);
        /* Its journal view: only its entries. */
        json_t *j = journal_as(s, key);
        snprintf(what, sizeof what, "journal of %s", key);
        assert_all_tenant(j, key, what);
        assert_member_prefix(j, NULL, "order_id", pre, what);
        assert_member_prefix(j, NULL, "payment_key", pre, what);
        if (t >= ST_RESET_TENANTS)
            ck_assert_msg(json_array_size(j) > 0, "%s: empty", what);
        json_decref(j);
        /* Its report: only its orderIds as examples. */
        json_t *f = findings_as(s, key);
        json_array_foreach(f, i, e) {
            snprintf(what, sizeof what, "report of %s, %s", key, json_str(e, "kind"));
            size_t a;
            json_t *ex;
            json_array_foreach(json_object_get(e, "examples"), a, ex)
                ck_assert_msg(has_prefix(json_string_value(ex), pre), "%s: example %s", what,
                              json_string_value(ex));
            for (size_t kd = 0; kinds[kd]; kd++)
                if (json_is_str(e, "kind", kinds[kd]))
                    sum_counts[kd] += json_int(e, "count");
        }
        if (t >= ST_RESET_TENANTS) { /* it sent invalid confirms twice */
            char *ft = json_dumps(f, JSON_COMPACT);
            ck_assert_msg(finding_of(f, "retried_4xx") != NULL, "%s: no retried_4xx: %s", key, ft);
            free(ft);
        }
        json_decref(f);
    }
    ck_assert_msg(n_lost > 0 && n_lost < n_requests, "%zu of %zu requests unanswered", n_lost,
                  n_requests);
    /* The whole server: the tenants' ledgers together, and their reports summed. */
    json_t *all = payments_as(s, NULL);
    ck_assert_uint_eq(json_array_size(all), n_scoped_payments);
    json_decref(all);
    json_t *f = findings_as(s, NULL);
    for (size_t kd = 0; kinds[kd]; kd++) {
        json_t *x = finding_of(f, kinds[kd]);
        long long c = x ? json_int(x, "count") : 0;
        ck_assert_msg(c == sum_counts[kd], "%s: the server counts %lld, its tenants %lld",
                      kinds[kd], c, sum_counts[kd]);
    }
    json_decref(f);
    json_t *j = journal_as(s, NULL);
    size_t i;
    json_t *e;
    json_array_foreach(j, i, e) ck_assert_msg(has_prefix(fg_json_str(e, "tenant"), "test_sk_st"),
                                              "journal entry %zu without a tenant", i);
    json_decref(j);
    stop_server(s);
}
END_TEST

Suite *make_suite(void)
{
    Suite *su = suite_create("tenants");
    TCase *tc = add_tcase(su, "ledgers", 30);
    tcase_add_test(tc, test_two_tenants_confirming_the_same_order_get_two_payments);
    tcase_add_test(tc, test_a_tenant_cannot_read_or_cancel_another_tenants_payment);
    tcase_add_test(tc, test_a_tenant_reset_leaves_other_tenants_intact);
    tcase_add_test(tc, test_a_tenant_reset_fails_only_its_own_held_requests);
    tc = add_tcase(su, "profiles", 30);
    tcase_add_test(tc, test_a_tenant_profile_applies_to_its_requests_only);
    tcase_add_test(tc, test_a_tenant_throttle_bucket_does_not_refuse_another);
    tcase_add_test(tc, test_a_times_budget_is_per_tenant);
    tcase_add_test(tc, test_a_tenant_concurrency_cap_does_not_refuse_another);
    tc = add_tcase(su, "admin header", 30);
    tcase_add_test(tc, test_tenant_header_errors);
    tcase_add_test(tc, test_tenant_header_with_secret_keys_accepts_only_those);
    tcase_add_test(tc, test_max_tenants_refuses_a_new_key_with_503);
    tc = add_tcase(su, "sessions", 30);
    tcase_add_test(tc, test_a_session_registered_for_a_tenant_is_only_its_own_strict);
    tcase_add_test(tc, test_a_session_registered_for_a_tenant_is_only_its_own_lenient);
    tc = add_tcase(su, "webhooks", 30);
    tcase_add_test(tc, test_a_tenant_receivers_get_only_its_events);
    tcase_add_test(tc, test_a_tenant_reset_drops_only_its_deliveries);
    tc = add_tcase(su, "report", 30);
    tcase_add_test(tc, test_the_server_report_sums_the_tenants);
    tcase_add_test(tc, test_cli_report_tenant_reads_that_tenants_report);
    tcase_add_test(tc, test_cli_report_tenant_with_the_admin_token);
    tc = add_tcase(su, "stress", 90);
    tcase_add_test(tc, test_stress_tenants_see_only_their_own_under_loss_and_resets);
    return su;
}
