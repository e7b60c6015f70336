/* check_report.c -- unit tests for report.c, the retry-behaviour report: arrays of journal
 * entries built by hand (times are values, in ms from an arbitrary origin) and report_render's
 * JSON parsed back. One scenario per finding kind (retried_4xx, early_retry, new_key_resend,
 * key_reuse, synchronized_retries, retry_storm) with the near-misses that must not be flagged
 * next to it, the examples (orderId, else the identity; distinct; at most 10), the fixed order
 * of kinds, the empty {"findings":[]} of a well-behaved client, and report_replay (the shared
 * journal's report: the same entries in any order give the same bytes). */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "report.h"

#define MS_NS INT64_C(1000000)
#define NO_FINDINGS "{\"findings\":[]}"

/* A confirm of `oid` under `key` (NULL: none) that arrived at `at_ms`, was answered `status`
 * 1 ms later and was received; body hash 1. */
static struct journal_entry confirm(double at_ms, const char *oid, const char *key, int status)
{
    struct journal_entry e = {0};
    e.route = 0; /* confirm */
    snprintf(e.method, sizeof e.method, "POST");
    e.path = (char *)"/v1/payments/confirm";
    e.order_id = (char *)oid;
    e.payment_key = NULL;
    e.idempotency_key = (char *)key;
    e.body_hash = 1;
    e.attempt = 1;
    e.arrived_mono_ns = (int64_t)(at_ms * 1e6);
    e.ended_mono_ns = e.arrived_mono_ns + MS_NS;
    e.sent_mono_ns = e.ended_mono_ns;
    e.status = status;
    e.outcome = status < 300 ? OUT_OK : status == 429 || status == 503 ? OUT_THROTTLED
                : status >= 500                                     ? OUT_FAULT_ERROR
                                                                    : OUT_BUSINESS_ERROR;
    e.delivered = DELIVERED_YES;
    return e;
}

/* report_render(v, n) as text (caller frees). */
static char *render_text(const struct journal_entry *v, size_t n)
{
    struct buf b;
    buf_init(&b);
    report_render(&b, v, n);
    ck_assert(!b.oom);
    char *t = strdup(b.data != NULL ? b.data : "");
    ck_assert_ptr_nonnull(t);
    buf_fini(&b);
    return t;
}

/* report_render(v, n), parsed: a new reference to its "findings" array. */
static json_t *findings(const struct journal_entry *v, size_t n)
{
    char *t = render_text(v, n);
    json_error_t je;
    json_t *root = json_loads(t, 0, &je);
    ck_assert_msg(root != NULL, "report_render is not JSON (%s): %.400s", je.text, t);
    ck_assert_int_eq((int)json_object_size(root), 1);
    json_t *f = json_object_get(root, "findings");
    ck_assert_msg(json_is_array(f), "no findings array: %s", t);
    json_incref(f);
    json_decref(root);
    free(t);
    return f;
}

static void assert_no_findings(const struct journal_entry *v, size_t n)
{
    char *t = render_text(v, n);
    ck_assert_str_eq(t, NO_FINDINGS);
    free(t);
}

static const char *threshold_of(const char *kind)
{
    static const char *const k[][2] = {
        {"retried_4xx", "1 resend"},
        {"early_retry", "any resend earlier than Retry-After"},
        {"new_key_resend", "1 resend"},
        {"key_reuse", "1 request"},
        {"synchronized_retries", "4 identities, > 50% within 10 ms"},
        {"retry_storm", "> 3 arrivals per event"}};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (strcmp(k[i][0], kind) == 0)
            return k[i][1];
    ck_abort_msg("no such kind %s", kind);
    return NULL;
}

/* The report has exactly one finding, of `kind`, with this count and exactly these examples
 * (NULL-ended, in order). */
static void assert_only_finding(const struct journal_entry *v, size_t n, const char *kind,
                                long long count, const char *const *examples)
{
    json_t *f = findings(v, n);
    char *text = json_dumps(f, JSON_COMPACT);
    ck_assert_msg(json_array_size(f) == 1, "want only %s, got %s", kind, text);
    const json_t *x = json_array_get(f, 0);
    ck_assert_msg(strcmp(json_string_value(json_object_get(x, "kind")), kind) == 0,
                  "want %s, got %s", kind, text);
    ck_assert_int_eq((int)json_object_size(x), 5);
    const char *rule = json_string_value(json_object_get(x, "rule"));
    ck_assert(rule != NULL && strlen(rule) > 20);
    ck_assert_str_eq(json_string_value(json_object_get(x, "threshold")), threshold_of(kind));
    ck_assert_msg(json_integer_value(json_object_get(x, "count")) == count,
                  "%s: want count %lld: %s", kind, count, text);
    const json_t *ex = json_object_get(x, "examples");
    size_t ne = 0;
    while (examples[ne] != NULL)
        ne++;
    ck_assert_msg(json_array_size(ex) == ne, "%s: want %zu examples: %s", kind, ne, text);
    for (size_t i = 0; i < ne; i++)
        ck_assert_str_eq(json_string_value(json_array_get(ex, i)), examples[i]);
    free(text);
    json_decref(f);
}

#define EXAMPLES(...) ((const char *const[]){__VA_ARGS__, NULL})
#define N(a) (sizeof(a) / sizeof((a)[0]))

/* ---- nothing to report -------------------------------------------------------------------- */

START_TEST(test_report_of_no_entries_has_no_findings)
{
    assert_no_findings(NULL, 0);
}
END_TEST

START_TEST(test_report_of_a_well_behaved_client_has_no_findings)
{
    struct journal_entry v[6];
    /* A 503 with Retry-After: 1, resent under the same key after 1.5 s: 200. */
    v[0] = confirm(0, "ord_a", "key-a", 503);
    v[0].retry_after_s = 1;
    v[1] = confirm(1500, "ord_a", "key-a", 200);
    /* A 400, then the corrected body under the same key. */
    v[2] = confirm(2000, "ord_b", "key-b", 400);
    v[3] = confirm(2100, "ord_b", "key-b", 200);
    v[3].body_hash = 2;
    /* A lost answer resent under the same key: the replay. */
    v[4] = confirm(3000, "ord_c", "key-c", 200);
    v[4].delivered = DELIVERED_NO;
    v[4].outcome = OUT_DROPPED_RESPONSE;
    v[4].committed = true;
    v[5] = confirm(3200, "ord_c", "key-c", 200);
    v[5].outcome = OUT_REPLAYED;
    assert_no_findings(v, N(v));
}
END_TEST

/* ---- retried_4xx -------------------------------------------------------------------------- */

START_TEST(test_report_flags_a_4xx_resent_with_the_same_body_as_retried_4xx)
{
    struct journal_entry v[3];
    v[0] = confirm(0, "ord_ok", "key-ok", 200);
    v[1] = confirm(10, "ord_r4", "key-r4", 400);
    v[2] = confirm(20, "ord_r4", "key-r4", 400);
    assert_only_finding(v, N(v), "retried_4xx", 1, EXAMPLES("ord_r4"));

    /* No key: the identity is the orderId, else the paymentKey. */
    v[1] = confirm(10, NULL, NULL, 403);
    v[1].payment_key = (char *)"pk_only";
    v[2] = confirm(20, NULL, NULL, 403);
    v[2].payment_key = (char *)"pk_only";
    assert_only_finding(v, N(v), "retried_4xx", 1, EXAMPLES("pk_only"));
}
END_TEST

START_TEST(test_report_does_not_flag_a_corrected_body_a_409_or_an_unreceived_4xx)
{
    struct journal_entry v[2];
    v[0] = confirm(0, "ord_fix", "key-fix", 400); /* corrected body */
    v[1] = confirm(10, "ord_fix", "key-fix", 200);
    v[1].body_hash = 2;
    assert_no_findings(v, N(v));
    v[0] = confirm(0, "ord_409", "key-409", 409); /* still processing: resend is right */
    v[1] = confirm(10, "ord_409", "key-409", 200);
    assert_no_findings(v, N(v));
    v[0] = confirm(0, "ord_lost", "key-lost", 400); /* the client never got the 400 */
    v[0].delivered = DELIVERED_NO;
    v[0].outcome = OUT_DROPPED_RESPONSE;
    v[1] = confirm(10, "ord_lost", "key-lost", 400);
    assert_no_findings(v, N(v));
    v[0] = confirm(0, "ord_nb", "key-nb", 400); /* no body hash: not known to be the same */
    v[0].body_hash = 0;
    v[1] = confirm(10, "ord_nb", "key-nb", 400);
    v[1].body_hash = 0;
    assert_no_findings(v, N(v));
}
END_TEST

/* ---- early_retry -------------------------------------------------------------------------- */

START_TEST(test_report_flags_a_resend_before_retry_after_as_early_retry)
{
    struct journal_entry v[4];
    v[0] = confirm(0, "ord_early", "key-early", 503); /* sent at 1 ms, Retry-After: 1 */
    v[0].retry_after_s = 1;
    v[1] = confirm(0, "ord_wait", "key-wait", 503);
    v[1].retry_after_s = 1;
    v[2] = confirm(200, "ord_early", "key-early", 200); /* 199 ms after the answer */
    v[3] = confirm(1001, "ord_wait", "key-wait", 200);  /* exactly 1 s after it: not early */
    assert_only_finding(v, N(v), "early_retry", 1, EXAMPLES("ord_early"));

    /* Throttled before its body was read: the example is its identity, the key. */
    v[2].order_id = NULL;
    assert_only_finding(v, N(v), "early_retry", 1, EXAMPLES("key-early"));

    /* A Retry-After the client never got does not count. */
    v[0].delivered = DELIVERED_NO;
    v[0].outcome = OUT_DROPPED_RESPONSE;
    assert_no_findings(v, N(v));
}
END_TEST

/* ---- new_key_resend ----------------------------------------------------------------------- */

START_TEST(test_report_flags_a_new_key_for_a_committed_order_as_new_key_resend)
{
    struct journal_entry v[2];
    /* A 500 that hid a commit, then the same order under a new key. */
    v[0] = confirm(0, "ord_nk", "key-nk-1", 500);
    v[0].committed = true;
    v[1] = confirm(10, "ord_nk", "key-nk-2", 400);
    assert_only_finding(v, N(v), "new_key_resend", 1, EXAMPLES("ord_nk"));

    /* The same paymentKey under another orderId. */
    v[0] = confirm(0, "ord_pk_1", "key-pk-1", 200);
    v[0].payment_key = (char *)"pk_same";
    v[0].committed = true;
    v[1] = confirm(10, "ord_pk_2", "key-pk-2", 400);
    v[1].payment_key = (char *)"pk_same";
    assert_only_finding(v, N(v), "new_key_resend", 1, EXAMPLES("ord_pk_2"));

    /* While the first was still processing (no commit yet), and with no key at all. */
    v[0] = confirm(0, "ord_held", "key-held", 200);
    v[0].ended_mono_ns = 500 * MS_NS;
    v[1] = confirm(10, "ord_held", NULL, 409);
    assert_only_finding(v, N(v), "new_key_resend", 1, EXAMPLES("ord_held"));

    /* The replay of a success is a commit too. */
    v[0] = confirm(0, "ord_rp", "key-rp-1", 200);
    v[0].outcome = OUT_REPLAYED;
    v[1] = confirm(10, "ord_rp", "key-rp-2", 400);
    assert_only_finding(v, N(v), "new_key_resend", 1, EXAMPLES("ord_rp"));
}
END_TEST

START_TEST(test_report_does_not_flag_a_new_key_after_nothing_committed)
{
    struct journal_entry v[2];
    /* A stored 400 (no commit), then a new key: the only way on. */
    v[0] = confirm(0, "ord_400", "key-400-1", 400);
    v[1] = confirm(10, "ord_400", "key-400-2", 200);
    assert_no_findings(v, N(v));
    /* Throttled while "processing" (it never reached the ledger). */
    v[0] = confirm(0, "ord_thr", "key-thr-1", 503);
    v[0].ended_mono_ns = 500 * MS_NS;
    v[1] = confirm(10, "ord_thr", "key-thr-2", 200);
    assert_no_findings(v, N(v));
    /* The same key while the first is processing: the 409 is the right answer. */
    v[0] = confirm(0, "ord_same", "key-same", 200);
    v[0].ended_mono_ns = 500 * MS_NS;
    v[1] = confirm(10, "ord_same", "key-same", 409);
    assert_no_findings(v, N(v));
    /* Another route (a read of the order) is not a confirm. */
    v[0] = confirm(0, "ord_read", "key-read-1", 200);
    v[0].committed = true;
    v[1] = confirm(10, "ord_read", NULL, 200);
    v[1].route = 2;
    assert_no_findings(v, N(v));
}
END_TEST

/* docs/admin.md §5: a missing key differs from every key, including another missing one. */
START_TEST(test_report_flags_a_keyless_confirm_after_a_keyless_one_as_new_key_resend)
{
    struct journal_entry v[2];
    /* A 500 that committed, then the same order again without a key. */
    v[0] = confirm(0, "ord_nk0", NULL, 500);
    v[0].committed = true;
    v[1] = confirm(10, "ord_nk0", NULL, 400);
    v[1].body_hash = 2;
    assert_only_finding(v, N(v), "new_key_resend", 1, EXAMPLES("ord_nk0"));
    /* While the first (without a key) is still processing. */
    v[0] = confirm(0, "ord_nk1", NULL, 200);
    v[0].ended_mono_ns = 500 * MS_NS;
    v[1] = confirm(10, "ord_nk1", NULL, 400);
    v[1].body_hash = 2;
    assert_only_finding(v, N(v), "new_key_resend", 1, EXAMPLES("ord_nk1"));
}
END_TEST

/* ---- key_reuse ---------------------------------------------------------------------------- */

START_TEST(test_report_flags_a_key_sent_with_another_body_as_key_reuse)
{
    struct journal_entry v[2];
    v[0] = confirm(0, "ord_ku_one", "key-shared", 200);
    v[1] = confirm(10, "ord_ku_two", "key-shared", 200);
    v[1].body_hash = 2;
    v[1].outcome = OUT_REPLAYED;
    v[1].key_reuse = true;
    assert_only_finding(v, N(v), "key_reuse", 1, EXAMPLES("ord_ku_two"));
}
END_TEST

START_TEST(test_report_examples_are_distinct_and_at_most_10)
{
    struct journal_entry v[14];
    for (size_t i = 0; i < N(v); i++) {
        static char oid[14][16], key[14][16];
        snprintf(oid[i], sizeof oid[i], "ord_%02zu", i < 2 ? 0 : i); /* 0 and 1 share */
        snprintf(key[i], sizeof key[i], "key-%02zu", i);
        v[i] = confirm((double)i * 10, oid[i], key[i], 200);
        v[i].key_reuse = true;
    }
    assert_only_finding(v, N(v), "key_reuse", 14,
                        EXAMPLES("ord_00", "ord_02", "ord_03", "ord_04", "ord_05", "ord_06",
                                 "ord_07", "ord_08", "ord_09", "ord_10"));
}
END_TEST

/* ---- synchronized_retries ----------------------------------------------------------------- */

/* n identities fail (503) at 0..n-1 ms; identity i resends at at_ms[i] and gets 200. */
static void sync_scenario(struct journal_entry *v, size_t n, const double *at_ms)
{
    static char oid[16][16], key[16][16];
    ck_assert_uint_le(n, 16);
    for (size_t i = 0; i < n; i++) {
        snprintf(oid[i], sizeof oid[i], "ord_sy_%zu", i);
        snprintf(key[i], sizeof key[i], "key-sy-%zu", i);
        v[i] = confirm((double)i, oid[i], key[i], 503);
    }
    for (size_t i = 0; i < n; i++)
        v[n + i] = confirm(at_ms[i], oid[i], key[i], 200);
}

START_TEST(test_report_flags_resends_bunched_after_one_failure_as_synchronized_retries)
{
    struct journal_entry v[10];
    static const double four[] = {1000, 1003, 1006, 1009};
    sync_scenario(v, 4, four);
    assert_only_finding(v, 8, "synchronized_retries", 1, EXAMPLES("ord_sy_3"));
    /* 3 of 5 within 10 ms: more than half. */
    static const double five[] = {1000, 1004, 1008, 1500, 2000};
    sync_scenario(v, 5, five);
    assert_only_finding(v, 10, "synchronized_retries", 1, EXAMPLES("ord_sy_4"));
}
END_TEST

START_TEST(test_report_does_not_flag_spread_resends_or_fewer_than_4_identities)
{
    struct journal_entry v[8];
    static const double spread[] = {1000, 1100, 1200, 1300};
    sync_scenario(v, 4, spread);
    assert_no_findings(v, 8);
    static const double half[] = {1000, 1005, 1500, 2000}; /* 2 of 4: not more than half */
    sync_scenario(v, 4, half);
    assert_no_findings(v, 8);
    static const double three[] = {1000, 1001, 1002};
    sync_scenario(v, 3, three);
    assert_no_findings(v, 6);
}
END_TEST

/* ---- retry_storm -------------------------------------------------------------------------- */

START_TEST(test_report_flags_more_than_3_arrivals_in_one_failure_event_as_retry_storm)
{
    struct journal_entry v[4];
    for (size_t i = 0; i < 4; i++)
        v[i] = confirm((double)i * 20, "ord_storm", "key-storm", 503);
    assert_only_finding(v, 4, "retry_storm", 1, EXAMPLES("ord_storm"));
    assert_no_findings(v, 3); /* 3 arrivals: not more than 3 */
}
END_TEST

START_TEST(test_report_a_success_ends_the_failure_event)
{
    /* 2 + 2 arrivals of one identity, split by another client's success on the same route. */
    struct journal_entry v[5];
    v[0] = confirm(0, "ord_split", "key-split", 503);
    v[1] = confirm(20, "ord_split", "key-split", 503);
    v[2] = confirm(30, "ord_other", "key-other", 200);
    v[3] = confirm(40, "ord_split", "key-split", 503);
    v[4] = confirm(60, "ord_split", "key-split", 503);
    assert_no_findings(v, N(v));
    /* A success on another route does not end it. */
    v[2].route = 2;
    assert_only_finding(v, N(v), "retry_storm", 1, EXAMPLES("ord_split"));
}
END_TEST

/* ---- several findings --------------------------------------------------------------------- */

START_TEST(test_report_lists_kinds_in_a_fixed_order)
{
    /* A DONE payment; a second key gets a stored 400 and resends it as is. */
    struct journal_entry v[4];
    v[0] = confirm(0, "ord_kk", "key-kk-1", 200);
    v[0].committed = true;
    v[1] = confirm(10, "ord_kk", "key-kk-2", 400);
    v[2] = confirm(20, "ord_kk", "key-kk-2", 400);
    v[3] = confirm(30, "ord_reuse", "key-kk-1", 200);
    v[3].body_hash = 2;
    v[3].key_reuse = true;
    json_t *f = findings(v, N(v));
    char *text = json_dumps(f, JSON_COMPACT);
    static const char *const kinds[] = {"retried_4xx", "new_key_resend", "key_reuse"};
    static const long long counts[] = {1, 2, 1};
    static const char *const example[] = {"ord_kk", "ord_kk", "ord_reuse"};
    ck_assert_msg(json_array_size(f) == 3, "%s", text);
    for (size_t i = 0; i < 3; i++) {
        const json_t *x = json_array_get(f, i);
        ck_assert_str_eq(json_string_value(json_object_get(x, "kind")), kinds[i]);
        ck_assert_str_eq(json_string_value(json_object_get(x, "threshold")),
                         threshold_of(kinds[i]));
        ck_assert_msg(json_integer_value(json_object_get(x, "count")) == counts[i], "%s", text);
        const json_t *ex = json_object_get(x, "examples");
        ck_assert_uint_eq(json_array_size(ex), 1);
        ck_assert_str_eq(json_string_value(json_array_get(ex, 0)), example[i]);
    }
    free(text);
    json_decref(f);
}
END_TEST

/* Thousands of identities: the records' memory grows chunk by chunk (one page first, each
 * chunk twice the last) and the identity table doubles many times; an identity longer than a
 * chunk gets a chunk of its own in the middle. Every one is still found again: each 400
 * resent is counted once. */
START_TEST(test_report_counts_every_identity_across_chunks_and_table_growth)
{
    enum { IDS = 6000 };
    static char oid[IDS][16], key[IDS][16];
    static char long_key[6001];
    memset(long_key, 'k', sizeof long_key - 1);
    struct journal_entry *v = calloc(2 * IDS + 2, sizeof *v);
    ck_assert_ptr_nonnull(v);
    size_t n = 0;
    for (int i = 0; i < IDS; i++) {
        snprintf(oid[i], sizeof oid[i], "ord_%05d", i);
        snprintf(key[i], sizeof key[i], "key_%05d", i);
        v[n] = confirm((double)n, oid[i], key[i], 400);
        n++;
        if (i == IDS / 2) {
            v[n] = confirm((double)n, NULL, long_key, 400);
            n++;
        }
    }
    for (int i = 0; i < IDS; i++) {
        v[n] = confirm((double)n, oid[i], key[i], 400);
        n++;
        if (i == IDS / 2) {
            v[n] = confirm((double)n, NULL, long_key, 400);
            n++;
        }
    }
    assert_only_finding(v, n, "retried_4xx", IDS + 1,
                        EXAMPLES("ord_00000", "ord_00001", "ord_00002", "ord_00003", "ord_00004",
                                 "ord_00005", "ord_00006", "ord_00007", "ord_00008", "ord_00009"));
    free(v);
}
END_TEST

/* A request that arrives while a reset runs: its journal id is of the new run (the journal was
 * reset first), but it was identified in the report before the report's reset freed its
 * records. Its end must not touch them (it segfaulted under resets with requests in flight);
 * it belongs to the run that is gone, and the new run judges nothing of it. */
START_TEST(test_report_end_ignores_a_mark_identified_before_a_reset)
{
    struct report rp;
    ck_assert_int_eq(report_init(&rp, 1000, 0, 1, 0), 0);
    struct journal_entry e = confirm(0, "ord_straddle", "key-s", 400);
    struct report_mark first = {0}, m = {0};
    report_begin(&rp, &first, 1, 0); /* an earlier request of the same order: a record exists */
    report_identify(&rp, &first, &e, true);
    report_begin(&rp, &m, 5, 0);  /* id 5: the journal's first id after its reset */
    report_identify(&rp, &m, &e, true);
    ck_assert(m.identified && m.processing);
    report_reset(&rp, 0, 5);      /* the report's reset: every record freed */
    report_end(&rp, &m, &e);      /* must not reach the freed records */
    struct buf b;
    buf_init(&b);
    report_render_state(&rp, &b);
    ck_assert_ptr_nonnull(strstr(b.data, "\"findings\":[]"));
    ck_assert_ptr_nonnull(strstr(b.data, "\"judged_requests\":0"));
    buf_fini(&b);
    /* The next request of the same order in the new run is judged from scratch. */
    struct report_mark next = {0};
    report_begin(&rp, &next, 6, 0);
    report_identify(&rp, &next, &e, true);
    report_end(&rp, &next, &e);
    buf_init(&b);
    report_render_state(&rp, &b);
    ck_assert_ptr_nonnull(strstr(b.data, "\"judged_requests\":1"));
    buf_fini(&b);
    report_fini(&rp);
}
END_TEST

/* ---- identities forgotten after the TTL (docs/admin.md §5 GET /__admin/report) ------------- */

#define S_US INT64_C(1000000)
#define T0_US (INT64_C(1700000000) * S_US) /* the gateway clock at the first request */
#define TTL_US (30 * S_US)

/* One whole request of e through the three steps, arriving at T0_US + at_s (gateway clock),
 * with journal id `id`. */
static void run_one(struct report *rp, struct journal_entry e, double at_s, uint64_t id)
{
    e.arrived_mono_ns = (int64_t)(at_s * 1e9);
    e.ended_mono_ns = e.sent_mono_ns = e.arrived_mono_ns + MS_NS;
    struct report_mark m;
    report_begin(rp, &m, id, T0_US + (int64_t)(at_s * 1e6));
    report_identify(rp, &m, &e, e.status < 300);
    report_end(rp, &m, &e);
}

/* The count of finding `kind` in rp's state (0 if absent). */
static long long state_count(struct report *rp, const char *kind)
{
    struct buf b;
    buf_init(&b);
    report_render_state(rp, &b);
    json_error_t je;
    json_t *root = json_loads(b.data, 0, &je);
    ck_assert_msg(root != NULL, "not JSON: %s", b.data);
    long long n = 0;
    size_t i;
    json_t *f;
    json_array_foreach(json_object_get(root, "findings"), i, f)
        if (strcmp(json_string_value(json_object_get(f, "kind")), kind) == 0)
            n = json_integer_value(json_object_get(f, "count"));
    json_decref(root);
    buf_fini(&b);
    return n;
}

START_TEST(test_identity_unused_for_the_ttl_is_swept_and_its_resend_is_a_first_arrival)
{
    struct report rp;
    ck_assert_int_eq(report_init(&rp, 1000, 0, 1, TTL_US), 0);
    struct journal_entry e = confirm(0, "ord_idle", "key-idle", 400);
    run_one(&rp, e, 0, 1);
    run_one(&rp, e, 29, 2); /* the same 4xx request again inside the TTL: flagged */
    ck_assert_int_eq(state_count(&rp, "retried_4xx"), 1);
    ck_assert_uint_eq(report_identities(&rp), 2); /* the key's identity and the orderId's */
    bool more = true;
    ck_assert_uint_eq(report_sweep(&rp, T0_US + 59 * S_US - 1, 100, &more), 0);
    ck_assert(!more);
    ck_assert_uint_eq(report_sweep(&rp, T0_US + 59 * S_US, 100, &more), 1);
    ck_assert_uint_eq(report_identities(&rp), 1); /* the orderId's confirm history stays */
    run_one(&rp, e, 60, 3); /* after the TTL: nothing to be a resend of */
    ck_assert_int_eq(state_count(&rp, "retried_4xx"), 1);
    run_one(&rp, e, 61, 4); /* and it counts afresh from there */
    ck_assert_int_eq(state_count(&rp, "retried_4xx"), 2);
    report_fini(&rp);
}
END_TEST

START_TEST(test_identity_idle_for_the_ttl_is_a_first_arrival_before_any_sweep)
{
    struct report rp;
    ck_assert_int_eq(report_init(&rp, 1000, 0, 1, TTL_US), 0);
    struct journal_entry e = confirm(0, "ord_idle", "key-idle", 400);
    run_one(&rp, e, 0, 1);
    run_one(&rp, e, 30 - 1e-6, 2); /* 1 µs inside the TTL */
    ck_assert_int_eq(state_count(&rp, "retried_4xx"), 1);
    run_one(&rp, e, 60 - 1e-6, 3); /* idle exactly the TTL since the last: not a resend */
    ck_assert_int_eq(state_count(&rp, "retried_4xx"), 1);
    /* Without a TTL an identity is never forgotten. */
    struct report forever;
    ck_assert_int_eq(report_init(&forever, 1000, 0, 1, 0), 0);
    run_one(&forever, e, 0, 1);
    ck_assert_uint_eq(report_sweep(&forever, T0_US + 1000000 * S_US, 100, NULL), 0);
    run_one(&forever, e, 1000000, 2);
    ck_assert_int_eq(state_count(&forever, "retried_4xx"), 1);
    report_fini(&forever);
    report_fini(&rp);
}
END_TEST

START_TEST(test_identity_of_a_request_in_progress_is_not_swept_until_it_ends)
{
    struct report rp;
    ck_assert_int_eq(report_init(&rp, 1000, 0, 1, TTL_US), 0);
    struct journal_entry e = confirm(0, "ord_held", "key-held", 200);
    struct report_mark m;
    report_begin(&rp, &m, 1, T0_US);
    report_identify(&rp, &m, &e, true); /* held, say, by a hang for longer than the TTL */
    bool more = true;
    ck_assert_uint_eq(report_sweep(&rp, T0_US + 100 * S_US, 100, &more), 0);
    ck_assert(!more);
    ck_assert_uint_eq(report_identities(&rp), 2);
    report_end(&rp, &m, &e); /* its record was written here: it must still have been there */
    ck_assert_uint_eq(report_sweep(&rp, T0_US + 100 * S_US, 100, &more), 1);
    ck_assert_uint_eq(report_identities(&rp), 1);
    report_fini(&rp);
}
END_TEST

START_TEST(test_new_key_for_a_committed_order_is_flagged_after_the_ttl_too)
{
    struct report rp;
    ck_assert_int_eq(report_init(&rp, 1000, 0, 1, TTL_US), 0);
    struct journal_entry a = confirm(0, "ord_kept", "key-a", 200);
    a.committed = true;
    run_one(&rp, a, 0, 1);
    ck_assert_uint_eq(report_sweep(&rp, T0_US + 1000 * S_US, 100, NULL), 1);
    /* The orderId's history lives as the ledger's payment does: key-b 1000 s later is still a
     * second key for a committed order. */
    run_one(&rp, confirm(0, "ord_kept", "key-b", 400), 1000, 2);
    ck_assert_int_eq(state_count(&rp, "new_key_resend"), 1);
    report_fini(&rp);
}
END_TEST

START_TEST(test_identity_swept_while_a_failure_event_awaits_its_resend_lets_the_event_end)
{
    struct report rp;
    ck_assert_int_eq(report_init(&rp, 1000, 0, 1, TTL_US), 0);
    char oid[32], key[32];
    for (int i = 0; i < 4; i++) { /* four 500s: one failure event, four identities owe it */
        snprintf(oid, sizeof oid, "ord_fail_%d", i);
        snprintf(key, sizeof key, "key-fail-%d", i);
        run_one(&rp, confirm(0, oid, key, 500), i * 0.001, (uint64_t)i + 1);
    }
    run_one(&rp, confirm(0, "ord_ok", "key-ok", 200), 1, 5); /* a success closes it */
    ck_assert_ptr_nonnull(rp.unfinished); /* closed, still owed four resends */
    ck_assert_uint_eq(report_sweep(&rp, T0_US + 31 * S_US, 100, NULL), 5);
    ck_assert_ptr_null(rp.unfinished); /* nobody owes it anything now: judged and freed */
    ck_assert_int_eq(state_count(&rp, "synchronized_retries"), 0);
    report_fini(&rp);
}
END_TEST

START_TEST(test_memory_of_swept_identities_is_reused_by_new_ones)
{
    struct report rp;
    ck_assert_int_eq(report_init(&rp, 1000000, 0, 1, TTL_US), 0);
    char key[40];
    uint64_t id = 1;
    for (int round = 0; round < 5; round++) {
        for (int i = 0; i < 2000; i++) { /* a fresh key per request, each a 36-byte key */
            snprintf(key, sizeof key, "%08d-0000-4000-8000-%012d", round, i);
            struct journal_entry e = confirm(0, NULL, key, 400);
            e.payment_key = NULL;
            run_one(&rp, e, round * 60.0 + i * 0.001, id++);
        }
        ck_assert_uint_eq(report_identities(&rp), 2000);
        struct report_chunk *newest = rp.chunks;
        size_t used = rp.chunk_used;
        ck_assert_uint_eq(report_sweep(&rp, T0_US + (round * 60 + 32) * S_US, 100000, NULL),
                          2000);
        ck_assert_uint_eq(report_identities(&rp), 0);
        if (round > 0) { /* the second round on took every record from the spare lists */
            ck_assert_ptr_eq(rp.chunks, newest);
            ck_assert_uint_eq(rp.chunk_used, used);
        }
    }
    report_fini(&rp);
}
END_TEST

START_TEST(test_identities_larger_than_every_size_class_are_swept_and_freed)
{
    struct report rp;
    ck_assert_int_eq(report_init(&rp, 1000, 0, 1, TTL_US), 0);
    char key[2001];
    memset(key, 'k', 2000);
    key[2000] = '\0';
    struct journal_entry e = confirm(0, NULL, key, 400);
    run_one(&rp, e, 0, 1);
    run_one(&rp, e, 1, 2);
    ck_assert_int_eq(state_count(&rp, "retried_4xx"), 1);
    ck_assert_uint_eq(report_sweep(&rp, T0_US + 31 * S_US, 100, NULL), 1);
    run_one(&rp, e, 32, 3);
    ck_assert_int_eq(state_count(&rp, "retried_4xx"), 1);
    report_fini(&rp); /* one is held at the end: freed here (no leak under ASan) */
}
END_TEST

START_TEST(test_sweep_looks_at_most_at_its_budget)
{
    struct report rp;
    ck_assert_int_eq(report_init(&rp, 1000, 0, 1, TTL_US), 0);
    char key[32];
    for (int i = 0; i < 10; i++) {
        snprintf(key, sizeof key, "key-budget-%d", i);
        struct journal_entry e = confirm(0, NULL, key, 400);
        e.payment_key = NULL;
        run_one(&rp, e, i, (uint64_t)i + 1);
    }
    bool more = false;
    ck_assert_uint_eq(report_sweep(&rp, T0_US + 100 * S_US, 4, &more), 4);
    ck_assert(more);
    ck_assert_uint_eq(report_sweep(&rp, T0_US + 100 * S_US, 4, &more), 4);
    ck_assert(more);
    ck_assert_uint_eq(report_sweep(&rp, T0_US + 100 * S_US, 4, &more), 2);
    ck_assert(!more);
    ck_assert_uint_eq(report_identities(&rp), 0);
    report_fini(&rp);
}
END_TEST

/* ---- replay (the shared journal's report, docs/cluster.md §11.6) --------------------------- */

/* report_replay of v[0..n) into a fresh report dated `since_us`, rendered merged with
 * `incomplete` (caller frees). */
static char *replayed(const struct journal_entry *v, size_t n, const char *incomplete)
{
    struct report rp;
    ck_assert_int_eq(report_init(&rp, SIZE_MAX, INT64_C(1700000000000000), 1, 0), 0);
    ck_assert_int_eq(report_replay(&rp, v, n), 0);
    struct report *one = &rp;
    struct buf b;
    buf_init(&b);
    report_render_merged_reason(&one, 1, incomplete, &b);
    report_fini(&rp);
    size_t len;
    char *t = buf_steal(&b, &len);
    ck_assert(t != NULL);
    return t;
}

START_TEST(test_replay_judges_the_entries_by_their_times_whatever_their_order)
{
    /* A 400 resent as is (retried_4xx), and an order confirmed again under a new key after its
     * commit (new_key_resend): the same report whichever order the entries come in. */
    struct journal_entry v[] = {confirm(0, "ord_a", "k1", 400), confirm(10, "ord_a", "k1", 400),
                                confirm(20, "ord_b", "k2", 200), confirm(30, "ord_b", "k3", 400)};
    v[2].committed = true;
    struct journal_entry w[] = {v[3], v[1], v[2], v[0]};
    char *a = replayed(v, N(v), NULL), *b = replayed(w, N(w), NULL);
    ck_assert_str_eq(a, b);
    json_t *root = json_loads(a, 0, NULL);
    ck_assert_msg(root != NULL, "%s", a);
    ck_assert_int_eq(json_integer_value(json_object_get(root, "judged_requests")), 4);
    ck_assert(json_is_true(json_object_get(root, "complete")));
    json_t *f = json_object_get(root, "findings");
    ck_assert_msg(json_array_size(f) == 2, "%s", a);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(f, 0), "kind")),
                     "retried_4xx");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(f, 1), "kind")),
                     "new_key_resend");
    json_decref(root);
    free(a);
    free(b);
}
END_TEST

START_TEST(test_replay_rendered_with_a_reason_is_not_complete)
{
    struct journal_entry v[] = {confirm(0, "ord_c", "k1", 200)};
    char *t = replayed(v, N(v), "the shared journal holds 1 of the 3 requests");
    json_t *root = json_loads(t, 0, NULL);
    ck_assert_msg(root != NULL, "%s", t);
    ck_assert(json_is_false(json_object_get(root, "complete")));
    ck_assert_str_eq(json_string_value(json_object_get(root, "reason")),
                     "the shared journal holds 1 of the 3 requests");
    ck_assert_int_eq(json_integer_value(json_object_get(root, "judged_requests")), 1);
    json_decref(root);
    free(t);
}
END_TEST

Suite *make_suite(void)
{
    Suite *s = suite_create("report");
    TCase *none = tcase_create("no_findings");
    tcase_add_test(none, test_report_of_no_entries_has_no_findings);
    tcase_add_test(none, test_report_of_a_well_behaved_client_has_no_findings);
    suite_add_tcase(s, none);
    TCase *replay = tcase_create("replay");
    tcase_add_test(replay, test_replay_judges_the_entries_by_their_times_whatever_their_order);
    tcase_add_test(replay, test_replay_rendered_with_a_reason_is_not_complete);
    suite_add_tcase(s, replay);
    TCase *kinds = tcase_create("kinds");
    tcase_add_test(kinds, test_report_flags_a_4xx_resent_with_the_same_body_as_retried_4xx);
    tcase_add_test(kinds, test_report_does_not_flag_a_corrected_body_a_409_or_an_unreceived_4xx);
    tcase_add_test(kinds, test_report_flags_a_resend_before_retry_after_as_early_retry);
    tcase_add_test(kinds, test_report_flags_a_new_key_for_a_committed_order_as_new_key_resend);
    tcase_add_test(kinds, test_report_does_not_flag_a_new_key_after_nothing_committed);
    tcase_add_test(kinds, test_report_flags_a_keyless_confirm_after_a_keyless_one_as_new_key_resend);
    tcase_add_test(kinds, test_report_flags_a_key_sent_with_another_body_as_key_reuse);
    tcase_add_test(kinds, test_report_flags_resends_bunched_after_one_failure_as_synchronized_retries);
    tcase_add_test(kinds, test_report_does_not_flag_spread_resends_or_fewer_than_4_identities);
    tcase_add_test(kinds, test_report_flags_more_than_3_arrivals_in_one_failure_event_as_retry_storm);
    tcase_add_test(kinds, test_report_a_success_ends_the_failure_event);
    suite_add_tcase(s, kinds);
    TCase *aging = tcase_create("aging");
    tcase_add_test(aging, test_identity_unused_for_the_ttl_is_swept_and_its_resend_is_a_first_arrival);
    tcase_add_test(aging, test_identity_idle_for_the_ttl_is_a_first_arrival_before_any_sweep);
    tcase_add_test(aging, test_identity_of_a_request_in_progress_is_not_swept_until_it_ends);
    tcase_add_test(aging, test_new_key_for_a_committed_order_is_flagged_after_the_ttl_too);
    tcase_add_test(aging, test_identity_swept_while_a_failure_event_awaits_its_resend_lets_the_event_end);
    tcase_add_test(aging, test_memory_of_swept_identities_is_reused_by_new_ones);
    tcase_add_test(aging, test_identities_larger_than_every_size_class_are_swept_and_freed);
    tcase_add_test(aging, test_sweep_looks_at_most_at_its_budget);
    suite_add_tcase(s, aging);
    TCase *shape = tcase_create("shape");
    tcase_add_test(shape, test_report_examples_are_distinct_and_at_most_10);
    tcase_add_test(shape, test_report_lists_kinds_in_a_fixed_order);
    tcase_add_test(shape, test_report_counts_every_identity_across_chunks_and_table_growth);
    tcase_add_test(shape, test_report_end_ignores_a_mark_identified_before_a_reset);
    suite_add_tcase(s, shape);
    return s;
}
