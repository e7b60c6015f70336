/* check_journal.c -- unit tests for journal.c, the request journal ring: ids start at 1 and
 * increase in arrival order, a wrapped ring keeps the newest `cap` entries, journal_update
 * completes a pending entry (and leaves alone an id that is no longer in the ring), a reset
 * forgets every entry while ids carry on, journal_copy's limit keeps the newest, the `limit`
 * filter is bounded by the journal's size (--journal-size), journal_render's
 * {"requests":[...]} shape with non-UTF-8 bytes as \xNN, and journal_log_line's text and JSON
 * forms with their 8 KiB cap. No sockets, no clocks: every time is a value the test sets. */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "journal.h"

/* 2024-02-13T03:17:57.123456Z */
#define ARRIVED_US INT64_C(1707794277123456)
#define LOG_LINE_MAX 8192

static struct journal_entry pending_confirm(const char *order_id)
{
    struct journal_entry e = {0};
    e.arrived_unix_us = ARRIVED_US;
    e.arrived_mono_ns = INT64_C(5000000000);
    snprintf(e.method, sizeof e.method, "POST");
    e.path = (char *)"/v1/payments/confirm";
    e.route = 0; /* confirm */
    e.order_id = (char *)order_id;
    return e;
}

/* journal_copy of everything (limit larger than any ring here). */
static struct journal_entry *copy_all(struct journal *j, size_t *n)
{
    struct journal_entry *v = journal_copy(j, 1000, n);
    ck_assert_ptr_nonnull(v);
    return v;
}

/* Render v[0..n) and parse it; a new reference to the "requests" array. */
static json_t *rendered_requests(const struct journal_entry *v, size_t n)
{
    struct buf b;
    buf_init(&b);
    journal_render(&b, v, n, n);
    ck_assert(!b.oom);
    json_error_t je;
    json_t *root = json_loadb(b.data, b.len, 0, &je);
    ck_assert_msg(root != NULL, "journal_render is not JSON (%s): %.300s", je.text, b.data);
    ck_assert_int_eq((int)json_object_size(root), 2);
    ck_assert_int_eq((int)json_integer_value(json_object_get(root, "total")), (int)n);
    json_t *a = json_object_get(root, "requests");
    ck_assert(json_is_array(a));
    json_incref(a);
    json_decref(root);
    buf_fini(&b);
    return a;
}

static const char *str_of(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    ck_assert_msg(json_is_string(v), "\"%s\" is not a string", key);
    return json_string_value(v);
}

static double num_of(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    ck_assert_msg(json_is_number(v), "\"%s\" is not a number", key);
    return json_number_value(v);
}

/* ---- ids and the ring --------------------------------------------------------------------- */

START_TEST(test_journal_ids_start_at_one_and_increase_in_arrival_order)
{
    struct journal j;
    ck_assert_int_eq(journal_init(&j, 8), 0);
    struct journal_entry e = pending_confirm("ord_a");
    ck_assert_uint_eq(journal_begin(&j, &e), 1);
    e.order_id = (char *)"ord_b";
    ck_assert_uint_eq(journal_begin(&j, &e), 2);
    e.order_id = (char *)"ord_c";
    ck_assert_uint_eq(journal_begin(&j, &e), 3);
    size_t n;
    struct journal_entry *v = copy_all(&j, &n);
    ck_assert_uint_eq(n, 3);
    static const char *const want[] = {"ord_a", "ord_b", "ord_c"};
    for (size_t i = 0; i < 3; i++) {
        ck_assert_uint_eq(v[i].id, i + 1);
        ck_assert_str_eq(v[i].order_id, want[i]);
        ck_assert_str_eq(v[i].path, "/v1/payments/confirm");
        ck_assert_str_eq(v[i].method, "POST");
    }
    journal_free_copy(v, n);
    journal_fini(&j);
}
END_TEST

START_TEST(test_journal_keeps_newest_entries_when_ring_wraps)
{
    struct journal j;
    ck_assert_int_eq(journal_init(&j, 4), 0);
    for (int i = 1; i <= 10; i++) {
        char oid[16];
        snprintf(oid, sizeof oid, "ord_%d", i);
        struct journal_entry e = pending_confirm(oid); /* copied by journal_begin */
        ck_assert_uint_eq(journal_begin(&j, &e), (uint64_t)i);
    }
    size_t n;
    struct journal_entry *v = copy_all(&j, &n);
    ck_assert_uint_eq(n, 4);
    for (size_t i = 0; i < 4; i++) {
        char want[16];
        snprintf(want, sizeof want, "ord_%zu", i + 7);
        ck_assert_uint_eq(v[i].id, i + 7);
        ck_assert_str_eq(v[i].order_id, want);
    }
    journal_free_copy(v, n);
    journal_fini(&j);
}
END_TEST

START_TEST(test_journal_of_one_entry_keeps_only_the_newest)
{
    struct journal j;
    ck_assert_int_eq(journal_init(&j, 1), 0);
    for (int i = 1; i <= 3; i++) {
        char oid[16];
        snprintf(oid, sizeof oid, "ord_%d", i);
        struct journal_entry e = pending_confirm(oid);
        journal_begin(&j, &e);
    }
    size_t n;
    struct journal_entry *v = copy_all(&j, &n);
    ck_assert_uint_eq(n, 1);
    ck_assert_uint_eq(v[0].id, 3);
    ck_assert_str_eq(v[0].order_id, "ord_3");
    journal_free_copy(v, n);
    journal_fini(&j);
}
END_TEST

START_TEST(test_journal_filter_limit_is_bounded_by_the_journal_size)
{
    struct journal_filter f = {.route = -1, .status = -1, .outcome = -1, .max_limit = 4};
    char err[160] = "";
    ck_assert_int_eq(journal_filter_set(&f, "limit", "4", err, sizeof err), 0);
    ck_assert_uint_eq(f.limit, 4);
    ck_assert_int_eq(journal_filter_set(&f, "limit", "5", err, sizeof err), -1);
    ck_assert_msg(strstr(err, "limit: 1 .. 4") && strstr(err, "--journal-size"), "%s", err);
    ck_assert_int_eq(journal_filter_set(&f, "limit", "0", err, sizeof err), -1);
    /* Without a size: the default journal's. */
    f.max_limit = 0;
    ck_assert_int_eq(journal_filter_set(&f, "limit", "10000", err, sizeof err), 0);
    ck_assert_int_eq(journal_filter_set(&f, "limit", "10001", err, sizeof err), -1);
    f.max_limit = JOURNAL_SIZE_MAX;
    ck_assert_int_eq(journal_filter_set(&f, "limit", "1000000", err, sizeof err), 0);
    ck_assert_uint_eq(f.limit, 1000000);
}
END_TEST

START_TEST(test_journal_copy_with_limit_returns_the_newest_oldest_first)
{
    struct journal j;
    ck_assert_int_eq(journal_init(&j, 16), 0);
    for (int i = 1; i <= 5; i++) {
        char oid[16];
        snprintf(oid, sizeof oid, "ord_%d", i);
        struct journal_entry e = pending_confirm(oid);
        journal_begin(&j, &e);
    }
    size_t n;
    struct journal_entry *v = journal_copy(&j, 2, &n);
    ck_assert_uint_eq(n, 2);
    ck_assert_uint_eq(v[0].id, 4);
    ck_assert_str_eq(v[0].order_id, "ord_4");
    ck_assert_uint_eq(v[1].id, 5);
    ck_assert_str_eq(v[1].order_id, "ord_5");
    journal_free_copy(v, n);

    v = journal_copy(&j, 5, &n);
    ck_assert_uint_eq(n, 5);
    ck_assert_uint_eq(v[0].id, 1);
    ck_assert_uint_eq(v[4].id, 5);
    journal_free_copy(v, n);

    v = journal_copy(&j, 0, &n);
    ck_assert_uint_eq(n, 0);
    journal_free_copy(v, n);
    journal_fini(&j);
}
END_TEST

START_TEST(test_journal_copy_is_independent_of_the_ring)
{
    struct journal j;
    ck_assert_int_eq(journal_init(&j, 2), 0);
    struct journal_entry e = pending_confirm("ord_first");
    journal_begin(&j, &e);
    size_t n;
    struct journal_entry *v = copy_all(&j, &n);
    ck_assert_uint_eq(n, 1);
    /* Overwrite its slot (cap 2: ids 1 and 3 share one). */
    e.order_id = (char *)"ord_second";
    journal_begin(&j, &e);
    e.order_id = (char *)"ord_third";
    journal_begin(&j, &e);
    ck_assert_uint_eq(v[0].id, 1);
    ck_assert_str_eq(v[0].order_id, "ord_first");
    journal_free_copy(v, n);
    journal_fini(&j);
}
END_TEST

/* ---- journal_update ----------------------------------------------------------------------- */

START_TEST(test_journal_update_completes_a_pending_entry)
{
    struct journal j;
    ck_assert_int_eq(journal_init(&j, 8), 0);
    struct journal_entry e = pending_confirm(NULL); /* the body is not read yet */
    uint64_t id = journal_begin(&j, &e);

    /* The body's details and the decision: still pending. */
    struct journal_entry d = {0};
    d.order_id = (char *)"ord_upd";
    d.payment_key = (char *)"pk_upd";
    d.idempotency_key = (char *)"key-upd";
    d.body_hash = 0xabcdefu;
    d.attempt = 2;
    d.queue_latency_ms = 5;
    d.latency_ms = 250;
    d.fault = "error";
    journal_update(&j, id, &d);
    size_t n;
    struct journal_entry *v = copy_all(&j, &n);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(v[0].order_id, "ord_upd");
    ck_assert_str_eq(v[0].payment_key, "pk_upd");
    ck_assert_str_eq(v[0].idempotency_key, "key-upd");
    ck_assert_uint_eq(v[0].body_hash, 0xabcdefu);
    ck_assert_uint_eq(v[0].attempt, 2);
    ck_assert_double_eq(v[0].queue_latency_ms, 5);
    ck_assert_double_eq(v[0].latency_ms, 250);
    ck_assert_str_eq(v[0].fault, "error");
    ck_assert_int_eq(v[0].ended_mono_ns, 0);
    ck_assert_int_eq(v[0].status, 0);
    ck_assert_int_eq(v[0].delivered, DELIVERED_PENDING);
    journal_free_copy(v, n);

    /* The end: NULL strings keep what is stored. */
    struct journal_entry end = {0};
    end.queue_latency_ms = 5;
    end.latency_ms = 250;
    end.ended_mono_ns = e.arrived_mono_ns + INT64_C(300000000);
    end.sent_mono_ns = e.arrived_mono_ns + INT64_C(299000000);
    end.status = 500;
    end.code = "FAILED_INTERNAL_SYSTEM_PROCESSING";
    end.retry_after_s = 3;
    end.outcome = OUT_FAULT_ERROR;
    end.delivered = DELIVERED_YES;
    end.committed = true;
    journal_update(&j, id, &end);
    v = copy_all(&j, &n);
    ck_assert_uint_eq(n, 1);
    ck_assert_uint_eq(v[0].id, id);
    ck_assert_str_eq(v[0].order_id, "ord_upd");
    ck_assert_str_eq(v[0].payment_key, "pk_upd");
    ck_assert_str_eq(v[0].idempotency_key, "key-upd");
    ck_assert_uint_eq(v[0].attempt, 2);
    ck_assert_uint_eq(v[0].body_hash, 0xabcdefu);
    ck_assert_str_eq(v[0].fault, "error");
    ck_assert_int_eq(v[0].ended_mono_ns, end.ended_mono_ns);
    ck_assert_int_eq(v[0].sent_mono_ns, end.sent_mono_ns);
    ck_assert_int_eq(v[0].status, 500);
    ck_assert_str_eq(v[0].code, "FAILED_INTERNAL_SYSTEM_PROCESSING");
    ck_assert_uint_eq(v[0].retry_after_s, 3);
    ck_assert_int_eq(v[0].outcome, OUT_FAULT_ERROR);
    ck_assert_int_eq(v[0].delivered, DELIVERED_YES);
    ck_assert(v[0].committed);
    ck_assert_str_eq(v[0].path, "/v1/payments/confirm");
    journal_free_copy(v, n);
    journal_fini(&j);
}
END_TEST

START_TEST(test_journal_update_of_an_entry_no_longer_in_the_ring_changes_nothing)
{
    struct journal j;
    ck_assert_int_eq(journal_init(&j, 2), 0);
    struct journal_entry e = pending_confirm("ord_1");
    uint64_t old = journal_begin(&j, &e);
    e.order_id = (char *)"ord_2";
    journal_begin(&j, &e);
    e.order_id = (char *)"ord_3"; /* takes ord_1's slot */
    journal_begin(&j, &e);
    struct journal_entry end = {0};
    end.order_id = (char *)"ord_late";
    end.ended_mono_ns = INT64_C(9000000000);
    end.status = 200;
    end.outcome = OUT_OK;
    end.delivered = DELIVERED_YES;
    journal_update(&j, old, &end);
    size_t n;
    struct journal_entry *v = copy_all(&j, &n);
    ck_assert_uint_eq(n, 2);
    ck_assert_uint_eq(v[0].id, 2);
    ck_assert_str_eq(v[0].order_id, "ord_2");
    ck_assert_uint_eq(v[1].id, 3);
    ck_assert_str_eq(v[1].order_id, "ord_3");
    for (size_t i = 0; i < n; i++) {
        ck_assert_int_eq(v[i].status, 0);
        ck_assert_int_eq(v[i].ended_mono_ns, 0);
        ck_assert_int_eq(v[i].delivered, DELIVERED_PENDING);
    }
    journal_free_copy(v, n);
    journal_fini(&j);
}
END_TEST

/* ---- reset -------------------------------------------------------------------------------- */

START_TEST(test_journal_reset_forgets_entries_and_ids_keep_increasing)
{
    struct journal j;
    ck_assert_int_eq(journal_init(&j, 4), 0);
    struct journal_entry e = pending_confirm("ord_before");
    uint64_t held = 0;
    for (int i = 0; i < 3; i++)
        held = journal_begin(&j, &e);
    ck_assert_uint_eq(held, 3);
    journal_reset(&j);
    size_t n;
    struct journal_entry *v = copy_all(&j, &n);
    ck_assert_uint_eq(n, 0);
    journal_free_copy(v, n);

    e.order_id = (char *)"ord_after";
    uint64_t id = journal_begin(&j, &e);
    ck_assert_uint_eq(id, 4);
    /* The request held across the reset ends: it must not complete the new entry. */
    struct journal_entry end = {0};
    end.ended_mono_ns = INT64_C(9000000000);
    end.status = 500;
    end.outcome = OUT_FAULT_ERROR;
    end.delivered = DELIVERED_YES;
    journal_update(&j, held, &end);
    v = copy_all(&j, &n);
    ck_assert_uint_eq(n, 1);
    ck_assert_uint_eq(v[0].id, 4);
    ck_assert_str_eq(v[0].order_id, "ord_after");
    ck_assert_int_eq(v[0].status, 0);
    ck_assert_int_eq(v[0].delivered, DELIVERED_PENDING);
    journal_free_copy(v, n);
    journal_fini(&j);
}
END_TEST

/* ---- journal_render ----------------------------------------------------------------------- */

START_TEST(test_journal_render_shows_a_pending_and_a_completed_entry)
{
    struct journal_entry v[2];
    v[0] = pending_confirm("ord_p");
    v[0].id = 41;
    v[0].payment_key = (char *)"pk_p";
    v[0].idempotency_key = (char *)"key-p";
    v[0].attempt = 1;
    v[0].latency_ms = 800;
    v[0].fault = "none";
    v[1] = pending_confirm(NULL);
    v[1].id = 42;
    snprintf(v[1].method, sizeof v[1].method, "GET");
    v[1].path = (char *)"/v1/payments/orders/ord_x";
    v[1].route = 2; /* read */
    v[1].arrived_unix_us = ARRIVED_US + 1;
    v[1].ended_mono_ns = v[1].arrived_mono_ns + INT64_C(12500000); /* 12.5 ms */
    v[1].status = 404;
    v[1].code = "NOT_FOUND_PAYMENT";
    v[1].outcome = OUT_BUSINESS_ERROR;
    v[1].delivered = DELIVERED_YES;
    v[1].queue_latency_ms = 2;
    v[1].latency_ms = 10;
    v[1].spent_latency_ms = 2; /* the queue only: answered before its processing latency */
    snprintf(v[1].trace_id, sizeof v[1].trace_id, "0123456789abcdef0123456789abcdef");

    json_t *a = rendered_requests(v, 2);
    ck_assert_uint_eq(json_array_size(a), 2);
    const json_t *p = json_array_get(a, 0);
    ck_assert_int_eq(json_integer_value(json_object_get(p, "id")), 41);
    ck_assert_str_eq(str_of(p, "arrived_at"), "2024-02-13T03:17:57.123456Z");
    ck_assert_str_eq(str_of(p, "method"), "POST");
    ck_assert_str_eq(str_of(p, "path"), "/v1/payments/confirm");
    ck_assert_str_eq(str_of(p, "route"), "confirm");
    ck_assert_str_eq(str_of(p, "order_id"), "ord_p");
    ck_assert_str_eq(str_of(p, "payment_key"), "pk_p");
    ck_assert_str_eq(str_of(p, "idempotency_key"), "key-p");
    ck_assert_int_eq(json_integer_value(json_object_get(p, "attempt")), 1);
    const json_t *d = json_object_get(p, "decision");
    ck_assert_int_eq((int)json_object_size(d), 3);
    ck_assert_double_eq(num_of(d, "queue_latency_ms"), 0);
    ck_assert_double_eq(num_of(d, "latency_ms"), 800);
    ck_assert_str_eq(str_of(d, "fault"), "none");
    ck_assert(json_is_null(json_object_get(p, "status")));
    ck_assert(json_is_null(json_object_get(p, "code")));
    ck_assert(json_is_null(json_object_get(p, "outcome")));
    ck_assert_str_eq(str_of(p, "delivered"), "pending");
    ck_assert(json_is_null(json_object_get(p, "duration_ms")));
    /* Pending: no trace id sent and nothing spent yet; the plan is queue + processing. */
    ck_assert(json_is_null(json_object_get(p, "trace_id")));
    ck_assert(json_is_null(json_object_get(p, "latency_ms")));
    ck_assert_double_eq(num_of(p, "planned_latency_ms"), 800);
    ck_assert(json_is_null(json_object_get(p, "tenant"))); /* no tenant set on this entry */
    ck_assert_int_eq((int)json_object_size(p), 19);

    const json_t *c = json_array_get(a, 1);
    ck_assert_int_eq(json_integer_value(json_object_get(c, "id")), 42);
    ck_assert_str_eq(str_of(c, "arrived_at"), "2024-02-13T03:17:57.123457Z");
    ck_assert_str_eq(str_of(c, "method"), "GET");
    ck_assert_str_eq(str_of(c, "route"), "read");
    ck_assert(json_is_null(json_object_get(c, "order_id")));
    ck_assert(json_is_null(json_object_get(c, "payment_key")));
    ck_assert(json_is_null(json_object_get(c, "idempotency_key")));
    ck_assert_str_eq(str_of(json_object_get(c, "decision"), "fault"), "none"); /* NULL fault */
    ck_assert_int_eq(json_integer_value(json_object_get(c, "status")), 404);
    ck_assert_str_eq(str_of(c, "code"), "NOT_FOUND_PAYMENT");
    ck_assert_str_eq(str_of(c, "outcome"), "business_error");
    ck_assert_str_eq(str_of(c, "delivered"), "yes");
    ck_assert_double_eq_tol(num_of(c, "duration_ms"), 12.5, 1e-9);
    ck_assert_str_eq(str_of(c, "trace_id"), "0123456789abcdef0123456789abcdef");
    ck_assert_double_eq(num_of(c, "planned_latency_ms"), 12);
    ck_assert_double_eq(num_of(c, "latency_ms"), 2);
    ck_assert_double_eq(num_of(json_object_get(c, "decision"), "latency_ms"), 10); /* planned */
    json_decref(a);
}
END_TEST

START_TEST(test_journal_render_of_no_entries_is_an_empty_array)
{
    struct buf b;
    buf_init(&b);
    journal_render(&b, NULL, 0, 0);
    ck_assert_str_eq(b.data, "{\"requests\":[],\"total\":0}");
    buf_fini(&b);
}
END_TEST

START_TEST(test_journal_render_escapes_non_utf8_bytes_as_backslash_x)
{
    struct journal_entry e = pending_confirm("ord_\xff\xfe");
    e.id = 1;
    e.path = (char *)"/v1/payments/orders/caf\xc3\xa9-\xc3!\x01";
    e.idempotency_key = (char *)"key\x80 end";
    json_t *a = rendered_requests(&e, 1);
    const json_t *r = json_array_get(a, 0);
    /* Read back: the four characters \xNN; valid UTF-8 (é) kept; a space kept. */
    ck_assert_str_eq(str_of(r, "order_id"), "ord_\\xff\\xfe");
    ck_assert_str_eq(str_of(r, "path"), "/v1/payments/orders/caf\xc3\xa9-\\xc3!\\x01");
    ck_assert_str_eq(str_of(r, "idempotency_key"), "key\\x80 end");
    json_decref(a);
}
END_TEST

/* ---- journal_log_line --------------------------------------------------------------------- */

static struct journal_entry logged_confirm(void)
{
    struct journal_entry e = pending_confirm("ord 1");
    e.id = 7;
    e.idempotency_key = NULL;
    e.latency_ms = 250;
    e.ended_mono_ns = e.arrived_mono_ns + INT64_C(251000000); /* 251 ms */
    e.status = 200;
    e.outcome = OUT_OK;
    e.delivered = DELIVERED_YES;
    return e;
}

START_TEST(test_journal_log_line_text_form)
{
    struct journal_entry e = logged_confirm();
    struct buf b;
    buf_init(&b);
    journal_log_line(&b, &e, false);
    ck_assert_str_eq(b.data, "2024-02-13T03:17:57.123456Z POST /v1/payments/confirm route=confirm "
                             "order_id=ord\\x201 idempotency_key=- fault=none "
                             "queue_latency_ms=0.0 latency_ms=250.0 status=200 outcome=ok "
                             "delivered=yes duration_ms=251.0\n");
    buf_fini(&b);

    /* Pending: duration 0, delivered pending; a fault and a key are shown. */
    e = pending_confirm("ord_2");
    e.idempotency_key = (char *)"key-2";
    e.fault = "drop_response";
    e.queue_latency_ms = 12.25;
    buf_init(&b);
    journal_log_line(&b, &e, false);
    ck_assert_str_eq(b.data, "2024-02-13T03:17:57.123456Z POST /v1/payments/confirm route=confirm "
                             "order_id=ord_2 idempotency_key=key-2 fault=drop_response "
                             "queue_latency_ms=12.2 latency_ms=0.0 status=0 outcome=ok "
                             "delivered=pending duration_ms=0.0\n");
    buf_fini(&b);
}
END_TEST

START_TEST(test_journal_log_line_json_form)
{
    struct journal_entry e = logged_confirm();
    e.path = (char *)"/v1/\xff";
    struct buf b;
    buf_init(&b);
    journal_log_line(&b, &e, true);
    ck_assert_uint_gt(b.len, 0);
    ck_assert_int_eq(b.data[b.len - 1], '\n');
    ck_assert_ptr_eq(strchr(b.data, '\n'), b.data + b.len - 1); /* one line */
    json_error_t je;
    json_t *o = json_loadb(b.data, b.len - 1, 0, &je);
    ck_assert_msg(o != NULL, "not JSON (%s): %s", je.text, b.data);
    ck_assert_str_eq(str_of(o, "time"), "2024-02-13T03:17:57.123456Z");
    ck_assert_str_eq(str_of(o, "method"), "POST");
    ck_assert_str_eq(str_of(o, "path"), "/v1/\\xff");
    ck_assert_str_eq(str_of(o, "route"), "confirm");
    ck_assert_str_eq(str_of(o, "order_id"), "ord 1"); /* JSON needs no escape for a space */
    ck_assert(json_is_null(json_object_get(o, "idempotency_key")));
    const json_t *d = json_object_get(o, "decision");
    ck_assert_double_eq(num_of(d, "queue_latency_ms"), 0);
    ck_assert_double_eq(num_of(d, "latency_ms"), 250);
    ck_assert_str_eq(str_of(d, "fault"), "none");
    ck_assert_int_eq(json_integer_value(json_object_get(o, "status")), 200);
    ck_assert_str_eq(str_of(o, "outcome"), "ok");
    ck_assert_str_eq(str_of(o, "delivered"), "yes");
    ck_assert_double_eq_tol(num_of(o, "duration_ms"), 251, 1e-9);
    ck_assert_int_eq((int)json_object_size(o), 11);
    json_decref(o);
    buf_fini(&b);
}
END_TEST

/* Three free-text fields of 20 000 bytes each, of the byte that grows most when escaped. */
static void assert_log_line_capped(bool json, char fill)
{
    enum { FIELD = 20000 };
    char *big[3];
    for (int i = 0; i < 3; i++) {
        big[i] = malloc(FIELD + 1);
        ck_assert_ptr_nonnull(big[i]);
        memset(big[i], fill, FIELD);
        big[i][FIELD] = '\0';
    }
    struct journal_entry e = logged_confirm();
    e.path = big[0];
    e.order_id = big[1];
    e.idempotency_key = big[2];
    struct buf b;
    buf_init(&b);
    journal_log_line(&b, &e, json);
    ck_assert(!b.oom);
    ck_assert_msg(b.len <= LOG_LINE_MAX, "%s line of %zu bytes", json ? "JSON" : "text", b.len);
    ck_assert_uint_gt(b.len, 3000); /* cut, not dropped: each field keeps its first ~1 KiB */
    ck_assert_int_eq(b.data[b.len - 1], '\n');
    ck_assert_ptr_eq(strchr(b.data, '\n'), b.data + b.len - 1);
    ck_assert(strstr(b.data, "status=200") != NULL || strstr(b.data, "\"status\":200") != NULL);
    if (json) {
        json_error_t je;
        json_t *o = json_loadb(b.data, b.len - 1, 0, &je);
        ck_assert_msg(o != NULL, "capped JSON line is not JSON: %s", je.text);
        const char *path = str_of(o, "path");
        size_t pl = strlen(path);
        ck_assert_uint_gt(pl, 3);
        ck_assert_str_eq(path + pl - 3, "...");
        ck_assert_int_eq(path[0], fill == '\xff' ? '\\' : fill);
        json_decref(o);
    } else {
        ck_assert(strstr(b.data, "...") != NULL);
    }
    buf_fini(&b);
    for (int i = 0; i < 3; i++)
        free(big[i]);
}

START_TEST(test_journal_log_line_is_capped_at_8_kib)
{
    assert_log_line_capped(false, '\xff'); /* 1 byte -> 4 (\xff) */
    assert_log_line_capped(false, 'a');
    assert_log_line_capped(true, '\xff'); /* 1 byte -> 5 (\\xff) */
    assert_log_line_capped(true, '"');    /* 1 byte -> 2 (\") */
}
END_TEST

Suite *make_suite(void)
{
    Suite *s = suite_create("journal");
    TCase *ring = tcase_create("ring");
    tcase_add_test(ring, test_journal_ids_start_at_one_and_increase_in_arrival_order);
    tcase_add_test(ring, test_journal_keeps_newest_entries_when_ring_wraps);
    tcase_add_test(ring, test_journal_of_one_entry_keeps_only_the_newest);
    tcase_add_test(ring, test_journal_filter_limit_is_bounded_by_the_journal_size);
    tcase_add_test(ring, test_journal_copy_with_limit_returns_the_newest_oldest_first);
    tcase_add_test(ring, test_journal_copy_is_independent_of_the_ring);
    tcase_add_test(ring, test_journal_update_completes_a_pending_entry);
    tcase_add_test(ring, test_journal_update_of_an_entry_no_longer_in_the_ring_changes_nothing);
    tcase_add_test(ring, test_journal_reset_forgets_entries_and_ids_keep_increasing);
    suite_add_tcase(s, ring);
    TCase *render = tcase_create("render");
    tcase_add_test(render, test_journal_render_shows_a_pending_and_a_completed_entry);
    tcase_add_test(render, test_journal_render_of_no_entries_is_an_empty_array);
    tcase_add_test(render, test_journal_render_escapes_non_utf8_bytes_as_backslash_x);
    suite_add_tcase(s, render);
    TCase *log = tcase_create("log_line");
    tcase_add_test(log, test_journal_log_line_text_form);
    tcase_add_test(log, test_journal_log_line_json_form);
    tcase_add_test(log, test_journal_log_line_is_capped_at_8_kib);
    suite_add_tcase(s, log);
    return s;
}
