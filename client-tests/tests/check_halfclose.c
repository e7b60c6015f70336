/* check_halfclose.c -- black-box tests of clients that half-close: a complete confirm, then
 * shutdown(SHUT_WR), then a read until the server closes, as raw-socket harnesses and
 * conformance probes do (docs/edge-rules.md §7 "A client that half-closes"). Every such client
 * gets its whole answer, held or not, and the journal's `delivered` says it reached the client
 * (docs/admin.md §5), and so does the report; a client that closes its socket entirely before
 * the answer is journaled `delivered: no`, and its confirm still commits (docs/idempotency.md
 * §3 "The client going away"). Sockets are raw: curl never half-closes. Waits poll a condition
 * with a bound. */
#define _GNU_SOURCE

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check_main.h"
#include "testkit.h"

/* Ten clients at once: enough for several to be resumed in the same turn of a worker. */
#define N_CLIENTS 10

/* ---- helpers ------------------------------------------------------------------------------ */

/* A complete confirm of (pk, oid, 1000) with the server's auth and `extra` header line ("" for
 * none), on a new raw connection: its socket. */
static int send_confirm(const fg_server *s, const char *pk, const char *oid, const char *extra)
{
    char body[256], req[1024], err[FG_ERR_LEN];
    int blen = snprintf(body, sizeof body,
                        "{\"paymentKey\":\"%s\",\"orderId\":\"%s\",\"amount\":1000}", pk, oid);
    int len = snprintf(req, sizeof req,
                       "POST " CONFIRM_PATH " HTTP/1.1\r\nHost: 127.0.0.1\r\n%s\r\n"
                       "Content-Type: application/json\r\n%s%sContent-Length: %d\r\n\r\n%s",
                       s->auth_header, extra, extra[0] ? "\r\n" : "", blen, body);
    ck_assert(blen > 0 && len > 0 && (size_t)len < sizeof req);
    int fd = fg_raw_open(s, req, (size_t)len, err);
    ck_assert_msg(fd >= 0, "%s", err);
    return fd;
}

/* Journal entry `e` as compact JSON in buf, for failure messages. Returns buf. */
static const char *entry_text(const json_t *e, char *buf, size_t n)
{
    char *d = json_dumps(e, JSON_COMPACT);
    snprintf(buf, n, "%s", d ? d : "?");
    free(d);
    return buf;
}

/* N_CLIENTS confirms (order `prefix`-i), each half-closed right after its body, all sent before
 * any is read; then each read to its end. Every client got the whole 200 DONE of its own
 * payment, the journal says each was delivered, and each is charged once. */
static void run_half_closed(const fg_server *s, const char *prefix, const char *extra)
{
    int fd[N_CLIENTS];
    char pk[N_CLIENTS][64], oid[N_CLIENTS][64];
    for (int i = 0; i < N_CLIENTS; i++) {
        snprintf(pk[i], sizeof pk[i], "pk_%s_%d", prefix, i);
        snprintf(oid[i], sizeof oid[i], "%s_%d", prefix, i);
        fd[i] = send_confirm(s, pk[i], oid[i], extra);
        ck_assert_int_eq(shutdown(fd[i], SHUT_WR), 0);
    }
    int got = 0;
    char lost[N_CLIENTS * 80] = "";
    int64_t deadline = fg_now_ms() + 5000; /* the answers are due in 300 ms */
    for (int i = 0; i < N_CLIENTS; i++) {
        fg_raw_response rr;
        int64_t left = deadline - fg_now_ms();
        fg_raw_finish(fd[i], left > 0 ? (int)left : 1, &rr);
        const char *st = rr.json ? fg_json_str(rr.json, "status") : NULL;
        const char *o = rr.json ? fg_json_str(rr.json, "orderId") : NULL;
        if (rr.status == 200 && st && strcmp(st, "DONE") == 0 && o && strcmp(o, oid[i]) == 0 &&
            rr.closed)
            got++;
        else
            snprintf(lost + strlen(lost), sizeof lost - strlen(lost), " %s(%zu bytes%s)",
                     oid[i], rr.len, rr.closed ? "" : ", not closed");
        fg_raw_response_fini(&rr);
    }
    ck_assert_msg(got == N_CLIENTS, "%d of %d half-closed clients got no whole 200:%s",
                  N_CLIENTS - got, N_CLIENTS, lost);

    wait_journal_settled(s);
    json_t *entries = journal(s, 0);
    char text[1024];
    for (int i = 0; i < N_CLIENTS; i++) {
        json_t *e = entry_for(entries, oid[i]);
        ck_assert_msg(e != NULL, "no journal entry for %s", oid[i]);
        ck_assert_msg(json_is_str(e, "delivered", "yes") && json_is_str(e, "outcome", "ok") &&
                          json_int(e, "status") == 200,
                      "%s: journal says %s", oid[i], entry_text(e, text, sizeof text));
        assert_charged_once(s, pk[i], oid[i]);
    }
    json_decref(entries);
}

/* ---- tests -------------------------------------------------------------------------------- */

START_TEST(test_half_closed_clients_of_held_confirms_all_get_their_200_and_are_delivered)
{
    fg_server *s = start_args(NULL, NULL);
    run_half_closed(s, "held", "X-Fakegate-Latency-Ms: 300");
    stop_server(s);
}
END_TEST

START_TEST(test_half_closed_clients_of_instant_confirms_all_get_their_200_and_are_delivered)
{
    fg_server *s = start_args(NULL, NULL);
    run_half_closed(s, "instant", "");
    stop_server(s);
}
END_TEST

/* One worker thread: every connection is resumed by the same event loop. */
START_TEST(test_half_closed_clients_of_held_confirms_get_their_200_with_one_thread)
{
    fg_server *s = start_args(NULL, (const char *const[]){"--threads", "1", NULL});
    run_half_closed(s, "held1", "X-Fakegate-Latency-Ms: 300");
    stop_server(s);
}
END_TEST

/* A client that closes its socket before the held answer: the confirm commits as planned, the
 * answer reaches nobody, and the journal says so. */
START_TEST(test_client_that_closes_before_the_held_answer_is_journaled_not_delivered)
{
    fg_server *s = start_args(NULL, NULL);
    int fd = send_confirm(s, "pk_gone", "gone_1", "X-Fakegate-Latency-Ms: 300");
    ck_assert_uint_eq(wait_pending(s, "gone", 1, 5000), 1);
    close(fd);
    wait_journal_settled(s);
    json_t *entries = journal(s, 0);
    json_t *e = entry_for(entries, "gone_1");
    ck_assert(e != NULL);
    char text[1024];
    ck_assert_msg(json_is_str(e, "delivered", "no") && json_is_str(e, "outcome", "ok"),
                  "journal says %s", entry_text(e, text, sizeof text));
    json_decref(entries);
    assert_charged_once(s, "pk_gone", "gone_1");
    stop_server(s);
}
END_TEST

/* The report counts what a half-closed client got: a held 503 with Retry-After: 5 read by it,
 * then a resend under the same key at once, is an early retry (docs/admin.md §5). */
START_TEST(test_report_judges_the_answer_a_half_closed_client_got)
{
    fg_server *s = start_args(NULL, NULL);
    int fd = send_confirm(s, "pk_hc_503", "hc_503_1",
                          "X-Fakegate-Fault: error; status=503; code=SERVICE_UNAVAILABLE; "
                          "retry_after=5; commit=false\r\nX-Fakegate-Latency-Ms: 300\r\n"
                          "Idempotency-Key: key-hc-503");
    ck_assert_int_eq(shutdown(fd, SHUT_WR), 0);
    fg_raw_response rr;
    fg_raw_finish(fd, 5000, &rr);
    char ra[16] = "";
    ck_assert_msg(rr.status == 503 && fg_raw_header(&rr, "Retry-After", ra, sizeof ra) &&
                      strcmp(ra, "5") == 0 && rr.closed,
                  "got %d, Retry-After '%s', %zu bytes", rr.status, ra, rr.len);
    fg_raw_response_fini(&rr);
    fg_response r;
    confirm_with(s, "pk_hc_503", "hc_503_1", 1000, "key-hc-503", NULL, 0, &r);
    assert_done(&r, "pk_hc_503", "hc_503_1");
    fg_response_fini(&r);
    wait_journal_settled(s);
    json_t *entries = journal(s, 0);
    json_t *first = json_array_get(entries, 0);
    char text[1024];
    ck_assert_msg(json_is_str(first, "delivered", "yes") && json_int(first, "status") == 503,
                  "journal says %s", entry_text(first, text, sizeof text));
    json_decref(entries);
    json_t *rep = admin_json(s, "/__admin/report");
    json_t *f = json_object_get(rep, "findings");
    ck_assert_msg(json_array_size(f) == 1 &&
                      json_is_str(json_array_get(f, 0), "kind", "early_retry"),
                  "findings: %s", entry_text(f, text, sizeof text));
    json_decref(rep);
    stop_server(s);
}
END_TEST

Suite *make_suite(void)
{
    Suite *su = suite_create("blackbox_halfclose");
    TCase *tc = add_tcase(su, "half_closed", 30);
    tcase_add_test(tc, test_half_closed_clients_of_held_confirms_all_get_their_200_and_are_delivered);
    tcase_add_test(tc, test_half_closed_clients_of_instant_confirms_all_get_their_200_and_are_delivered);
    tcase_add_test(tc, test_half_closed_clients_of_held_confirms_get_their_200_with_one_thread);
    tc = add_tcase(su, "closed", 30);
    tcase_add_test(tc, test_client_that_closes_before_the_held_answer_is_journaled_not_delivered);
    tc = add_tcase(su, "report", 30);
    tcase_add_test(tc, test_report_judges_the_answer_a_half_closed_client_got);
    return su;
}
