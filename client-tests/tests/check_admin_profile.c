/* check_admin_profile.c -- black-box tests of GET/PUT /__admin/profile (docs/admin.md §5 Admin
 * API): switching the profile while requests are held (50, then 1000: the PUT returns at once, held
 * requests keep the latency they were planned with, a request after the switch gets the new profile
 * and ends first), and profile validation over PUT (a typo'd key or malformed JSON is 400
 * INVALID_PROFILE with its line:column, bad or unknown names are rejected and leave the active
 * profile alone, a shipped name resolves to its file, an inline profile is shown as sent). Each
 * test starts its own server on port 0; held requests run on the testkit's libcurl multi loop on a
 * background thread, and ordering is asserted as order of events, never as wall-clock thresholds.
 */
#define _GNU_SOURCE

#include <check.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "check_main.h"
#include "testkit.h"

static void raise_nofile(void)
{
    struct rlimit rl;
    ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* ---- switching the profile while 50 requests are held ----------------------------------- */

START_TEST(test_switch_slow_to_fast_while_50_held)
{
    fg_server *s = start_admin_confirm("{'latency':{'dist':'fixed','ms':1500}}");
    enum { N = 50 };
    struct mrun m;
    mrun_init(&m, s, N);
    for (size_t i = 0; i < N; i++) {
        char pk[32], oid[32], key[32];
        snprintf(pk, sizeof pk, "pk_sw_%02zu", i);
        snprintf(oid, sizeof oid, "ord_sw_%02zu", i);
        snprintf(key, sizeof key, "key-sw-%02zu", i);
        mrun_confirm(&m, i, pk, oid, 1000 + (long long)i, key, 20000);
    }
    mrun_start(&m);
    size_t pending = wait_pending(s, "ord_sw_", N, 10000);
    ck_assert_msg(pending == N, "only %zu of %d confirms showed as pending", pending, N);
    ck_assert_msg(atomic_load(&m.n_done) == 0, "a held confirm ended before the switch");

    char *fast = dq("{'name':'fast','routes':{'confirm':{'latency':{'dist':'fixed','ms':0}},"
                    "'default':{'latency':{'dist':'fixed','ms':0}}}}");
    fg_response r;
    int64_t t0 = fg_now_ns();
    put_profile(s, fast, &r);
    int64_t t1 = fg_now_ns();
    size_t done_at_put = atomic_load(&m.n_done);
    assert_status(&r, 200);
    ck_assert_msg(json_is_str(r.json, "name", "fast"), "PUT answered %.400s", r.body);
    fg_response_fini(&r);
    printf("check_admin_profile: PUT /__admin/profile with 50 held: %.1f ms\n", (double)(t1 - t0) / 1e6);
    ck_assert_msg(done_at_put == 0, "%zu held confirms had ended when PUT returned", done_at_put);
    json_t *j = journal(s, 0);
    ck_assert_uint_eq(count_pending(j, "ord_sw_"), N);
    json_decref(j);

    /* A confirm sent after the switch gets the new profile and finishes before the held ones. */
    fg_response n;
    confirm_fresh(s, "pk_sw_new", "ord_sw_new", 777, "key-sw-new", 0, &n);
    long new_seq = atomic_fetch_add(&completion_seq, 1) + 1;
    size_t done_at_new = atomic_load(&m.n_done);
    assert_status(&n, 200);
    fg_response_fini(&n);
    ck_assert_msg(done_at_new == 0, "%zu held confirms ended before the post-switch one",
                  done_at_new);

    mrun_join(&m);
    for (size_t i = 0; i < N; i++) {
        struct mreq *q = &m.q[i];
        ck_assert_msg(q->code == CURLE_OK && q->status == 200, "%s: curl %d (%s) status %ld %.300s",
                      q->oid, (int)q->code, q->errbuf, q->status, q->out ? q->out : "");
        ck_assert_msg(q->total_us >= 1400000, "%s took %lld ms: it lost its planned 1500 ms",
                      q->oid, (long long)(q->total_us / 1000));
        ck_assert_msg(q->seq > new_seq, "%s finished before the post-switch confirm", q->oid);
    }
    j = journal(s, 0);
    json_t *e = entry_for(j, "ord_sw_new");
    ck_assert(e != NULL);
    ck_assert_msg(jnum(json_object_get(e, "decision"), "latency_ms") == 0,
                  "post-switch confirm planned %.1f ms", jnum(json_object_get(e, "decision"),
                                                             "latency_ms"));
    e = entry_for(j, "ord_sw_07");
    ck_assert(e != NULL);
    ck_assert(jnum(json_object_get(e, "decision"), "latency_ms") == 1500);
    json_decref(j);
    mrun_free(&m);
    free(fast);
    stop_server(s);
}
END_TEST

/* ---- the switch with 1000 requests held ----------------------------------------------------- */

START_TEST(test_switch_with_1000_held)
{
    raise_nofile();
    fg_server *s = start_admin_confirm("{'latency':{'dist':'fixed','ms':3000}}");
    enum { N = 1000 };
    struct mrun m;
    mrun_init(&m, s, N);
    for (size_t i = 0; i < N; i++) {
        char pk[32], oid[32], key[32];
        snprintf(pk, sizeof pk, "pk_k_%04zu", i);
        snprintf(oid, sizeof oid, "ord_k_%04zu", i);
        snprintf(key, sizeof key, "key-k-%04zu", i);
        mrun_confirm(&m, i, pk, oid, 1000, key, 60000);
    }
    mrun_start(&m);
    double in_flight = wait_metric(s, "fakegate_in_flight", "route", "confirm", N, 20000);
    ck_assert_msg(in_flight == N, "fakegate_in_flight{route=\"confirm\"} reached %g, not %d (%zu "
                  "done)", in_flight, N, atomic_load(&m.n_done));
    ck_assert_msg(atomic_load(&m.n_done) == 0, "a held confirm ended before the switch");

    char *fast = dq("{'name':'fast','routes':{'default':{'latency':{'dist':'fixed','ms':0}}}}");
    fg_response r;
    int64_t t0 = fg_now_ns();
    put_profile(s, fast, &r);
    int64_t t1 = fg_now_ns();
    size_t done_at_put = atomic_load(&m.n_done);
    assert_status(&r, 200);
    fg_response_fini(&r);
    printf("check_admin_profile: PUT /__admin/profile with 1000 held: %.1f ms\n",
           (double)(t1 - t0) / 1e6);
    ck_assert_msg(done_at_put == 0, "%zu held confirms had ended when PUT returned", done_at_put);
    in_flight = metric1(s, "fakegate_in_flight", "route", "confirm");
    ck_assert_msg(in_flight == N, "after the PUT returned, in flight %g (%zu done)", in_flight,
                  atomic_load(&m.n_done));
    json_t *prof = admin_json(s, "/__admin/profile");
    ck_assert(json_is_str(prof, "name", "fast"));
    json_decref(prof);

    mrun_join(&m);
    size_t bad = 0;
    const struct mreq *first_bad = NULL;
    for (size_t i = 0; i < N; i++)
        if (m.q[i].code != CURLE_OK || m.q[i].status != 200 || m.q[i].total_us < 2900000) {
            bad++;
            if (first_bad == NULL)
                first_bad = &m.q[i];
        }
    ck_assert_msg(bad == 0, "%zu of %d held confirms did not end 200 after their 3000 ms; first: "
                  "%s curl %d (%s) status %ld after %lld ms", bad, N, first_bad->oid,
                  (int)first_bad->code, first_bad->errbuf, first_bad->status,
                  (long long)(first_bad->total_us / 1000));
    ck_assert(wait_metric(s, "fakegate_in_flight", "route", "confirm", 0, 5000) == 0);
    ck_assert(metric1(s, "fakegate_in_flight_peak", "route", "confirm") == N);
    mrun_free(&m);
    free(fast);
    stop_server(s);
}
END_TEST

/* ---- profile validation over PUT ---------------------------------------------------------- */

static void assert_put_rejected(const fg_server *s, const char *body, const char *msg_part)
{
    fg_response r;
    put_profile(s, body, &r);
    assert_error(&r, 400, "INVALID_PROFILE");
    if (msg_part != NULL)
        ck_assert_msg(strstr(fg_json_str(r.json, "message"), msg_part) != NULL,
                      "PUT %s: message lacks \"%s\": %s", body, msg_part, r.body);
    fg_response_fini(&r);
}

static char *read_file_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    static char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *t = strdup(buf);
    ck_assert(t != NULL);
    return t;
}

START_TEST(test_put_profile_validation)
{
    const char *initial_q =
        "{'name':'initial','routes':{'confirm':{'latency':{'dist':'fixed','ms':7}},"
        "'default':{'latency':{'dist':'fixed','ms':0}}}}";
    char *initial = dq(initial_q);
    fg_server *s = start_q_args(initial_q, PROFILES_DIR_ARGS);
    assert_profile_is(s, "initial", initial);

    /* A typo'd key: 400 INVALID_PROFILE naming "request body:LINE:COLUMN" of the key. */
    const char *typo = "{\n"
                       "  \"name\": \"typo\",\n"
                       "  \"routes\": {\n"
                       "    \"confirm\": {\n"
                       "      \"latncy\": {\"dist\": \"fixed\", \"ms\": 5}\n"
                       "    }\n"
                       "  }\n"
                       "}\n";
    int line, col;
    line_col_of(typo, "\"latncy\"", &line, &col);
    ck_assert_int_eq(line, 5);
    ck_assert_int_eq(col, 7);
    char want[64];
    snprintf(want, sizeof want, "request body:%d:%d", line, col);
    assert_put_rejected(s, typo, want);
    assert_profile_is(s, "initial", initial);

    /* Malformed JSON: also a position. */
    const char *broken = "{\"name\": \"broken\",\n \"routes\": {\"default\": }}";
    line_col_of(broken, "}}", &line, &col);
    snprintf(want, sizeof want, "request body:%d:", line);
    assert_put_rejected(s, broken, want);
    assert_profile_is(s, "initial", initial);

    /* Names are [a-z0-9_-]{1,64}: no paths, no upper case; an unknown name is rejected. */
    assert_put_rejected(s, "{\"name\": \"../etc\"}", NULL);
    assert_put_rejected(s, "{\"name\": \"../profiles/normal\"}", NULL);
    assert_put_rejected(s, "{\"name\": \"/etc/passwd\"}", NULL);
    assert_put_rejected(s, "{\"name\": \"Normal\"}", NULL);
    assert_put_rejected(s, "{\"name\": \"\"}", NULL);
    assert_put_rejected(s, "{\"name\": \"no-such-profile\"}", NULL);
    assert_profile_is(s, "initial", initial);

    /* A shipped name: 200, and GET shows it, resolved (the file's profile). */
    fg_response r;
    put_profile(s, "{\"name\": \"slow\"}", &r);
    assert_status(&r, 200);
    ck_assert_msg(json_is_str(r.json, "name", "slow"), "PUT answered %.400s", r.body);
    fg_response_fini(&r);
    char path[1024];
    snprintf(path, sizeof path, "%s/slow.json", profiles_dir());
    char *slow = read_file_text(path);
    assert_profile_is(s, "slow", slow);
    free(slow);

    /* A whole inline profile: 200, and GET shows exactly it. */
    char *inline_p = dq("{'name':'inline-one','description':'d','routes':{'read':{'latency':"
                        "{'dist':'uniform','min_ms':1,'max_ms':2}}}}");
    put_profile(s, inline_p, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    assert_profile_is(s, "inline-one", inline_p);
    free(inline_p);
    free(initial);
    stop_server(s);
}
END_TEST

Suite *make_suite(void)
{
    Suite *su = suite_create("blackbox_admin_profile");

    TCase *tc = add_tcase(su, "switch", 60);
    tcase_add_test(tc, test_switch_slow_to_fast_while_50_held);
    tcase_add_test(tc, test_switch_with_1000_held);

    tc = add_tcase(su, "profile", 30);
    tcase_add_test(tc, test_put_profile_validation);
    return su;
}
