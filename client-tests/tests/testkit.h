/* testkit.h -- the helpers the black-box Check suites (client-tests/tests/check_*.c) share:
 * starting and stopping a server, asserting on responses (with the caller's line number through
 * the *_at(__LINE__) macros), reading the ledger and orders, strict JSON accessors, and the
 * process set-up hook of the shared main. Everything here may fail the current Check test
 * (ck_assert), so it is linked into the check_* binaries only, never into the experiments runner
 * (see the Makefile). */
#ifndef FAKEGATE_TESTKIT_H
#define FAKEGATE_TESTKIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <check.h>

#include "harness.h"

#define CONFIRM_PATH "/v1/payments/confirm"
#define MS (1000000LL) /* ns per ms */

/* --- servers ------------------------------------------------------------------------------- */

/* fg_start, failing the test (with the harness's message) if the server does not come up. */
fg_server *start_server(const fg_opts *o);
/* Start with this profile JSON (NULL: the harness's instant profile) and these extra arguments
 * (NULL-terminated, may be NULL). */
fg_server *start_args(const char *profile_json, const char *const *args);
fg_server *start_with_profile(const char *profile_json);

/* Profiles are written with ' for " to stay readable; this makes the JSON. Caller frees. */
char *dq(const char *s);
/* $FAKEGATE_PROFILES, or "profiles". */
const char *profiles_dir(void);
/* The arguments "--profiles-dir <profiles_dir()>", NULL-terminated (block-scope compound
 * literal: valid until the end of the enclosing block). */
#define PROFILES_DIR_ARGS ((const char *const[]){"--profiles-dir", profiles_dir(), NULL})

/* Start with a profile given in '-quoted JSON, and these extra arguments (may be NULL). */
fg_server *start_q_args(const char *squoted, const char *const *args);
fg_server *start_q(const char *squoted);
/* Start with a profile named `name` whose confirm route is `confirm` ('-quoted object) and
 * everything else instant, with these extra arguments (may be NULL). */
fg_server *start_confirm_as(const char *name, const char *confirm, const char *const *args);

/* SIGTERM and require exit status 0 (showing the server's stderr otherwise). Keeps `s`. */
void assert_clean_stop(fg_server *s);
/* assert_clean_stop, then fg_free. */
void stop_server(fg_server *s);

/* --- responses ----------------------------------------------------------------------------- */

#define assert_status(r, status) assert_status_at(__LINE__, (r), (status))
#define assert_error(r, status, code) assert_error_at(__LINE__, (r), (status), (code), NULL)
#define assert_error2(r, status, code, alt) assert_error_at(__LINE__, (r), (status), (code), (alt))
#define assert_curl(r, code) assert_curl_at(__LINE__, (r), (code))
#define assert_done(r, pk, oid) assert_done_at(__LINE__, (r), (pk), (oid))
#define assert_done_amount(r, pk, oid, amount) \
    assert_done_amount_at(__LINE__, (r), (pk), (oid), (amount))

/* An HTTP response with this status. */
void assert_status_at(int line, const fg_response *r, long status);
/* A Toss error {code, message}: this status, this code (or `alt` unless NULL), a non-empty
 * message and a JSON Content-Type. */
void assert_error_at(int line, const fg_response *r, long status, const char *code,
                     const char *alt);
/* No HTTP response but this curl error (CURLE_OK: any response). */
void assert_curl_at(int line, const fg_response *r, CURLcode code);
/* A 200 DONE Payment for this paymentKey and orderId (and amount: totalAmount, balanceAmount). */
void assert_done_at(int line, const fg_response *r, const char *pk, const char *oid);
void assert_done_amount_at(int line, const fg_response *r, const char *pk, const char *oid,
                           long long amount);

/* The two bodies are byte for byte the same. */
bool same_bytes(const fg_response *a, const fg_response *b);

/* --- JSON and text ------------------------------------------------------------------------- */

/* Member `key` of `obj`, failing the test unless it is a JSON integer / a string (borrowed). */
long long json_int(const json_t *obj, const char *key);
const char *json_str(const json_t *obj, const char *key);

/* `s` (not NULL) matches the extended regular expression `re`. */
bool matches(const char *re, const char *s);

/* 1-based line and byte column of the first `needle` in `text` (which must contain it). */
void line_col_of(const char *text, const char *needle, int *line, int *col);

/* --- confirms, orders and the ledger ------------------------------------------------------- */

/* A syntactically valid confirm body (amount 1000) of exactly `size` bytes. Caller frees. */
char *padded_body(const char *pk, const char *oid, size_t size);

/* POST /v1/payments/confirm on a fresh connection that is closed afterwards, with the server's
 * auth, `extra` header line ("Name: value"; NULL: none) and Idempotency-Key `key` (NULL: none).
 * timeout_ms 0: the harness default. Same returns as fg_http. */
int confirm_with(const fg_server *s, const char *pk, const char *oid, long long amount,
                 const char *key, const char *extra, long timeout_ms, fg_response *r);
/* confirm_with without an extra header. */
int confirm_fresh(const fg_server *s, const char *pk, const char *oid, long long amount,
                  const char *key, long timeout_ms, fg_response *r);

/* GET /v1/payments/orders/{oid} into *r (caller finis it). */
void get_order(const fg_server *s, const char *oid, fg_response *r);
/* The order's status now (copied into buf; "" unless it answers 200 with a status). */
void order_status(const fg_server *s, const char *oid, char *buf, size_t n);
/* GET the order, require 200; copy its status into `status` and, unless `ltk` is NULL, its
 * lastTransactionKey ("" if none) into `ltk`. */
void order_read(const fg_server *s, const char *oid, char *status, size_t n, char *ltk,
                size_t ln);
#define assert_order_status(s, oid, want) assert_order_status_at(__LINE__, (s), (oid), (want))
void assert_order_status_at(int line, const fg_server *s, const char *oid, const char *want);
/* Poll the order every poll_ms, at most timeout_ms, until it reads `status`. Returns the
 * CLOCK_MONOTONIC ns at which the read that saw it was sent, or 0 on timeout. */
int64_t wait_for_order_status(const fg_server *s, const char *oid, const char *status,
                              int timeout_ms, long poll_ms);

/* The only ledger entry for `oid`, asserting there is exactly one. New reference. */
#define the_ledger_entry(s, oid) the_ledger_entry_at(__LINE__, (s), (oid))
json_t *the_ledger_entry_at(int line, const fg_server *s, const char *oid);
/* Its charges. */
#define ledger_charges(s, oid) ledger_charges_at(__LINE__, (s), (oid))
long long ledger_charges_at(int line, const fg_server *s, const char *oid);
/* It is charged once, DONE, with this paymentKey. */
#define assert_charged_once(s, pk, oid) assert_charged_once_at(__LINE__, (s), (pk), (oid))
void assert_charged_once_at(int line, const fg_server *s, const char *pk, const char *oid);
/* How many entries the ledger holds. */
size_t ledger_size(const fg_server *s);

/* --- running ------------------------------------------------------------------------------- */

/* A new test case `name` with this timeout (seconds), already added to `su`. */
TCase *add_tcase(Suite *su, const char *name, double timeout_s);
/* Every black-box binary runs through the shared main (server/tests/check_main.h): a suite
 * defines make_suite(). testkit.c defines the check_main_setup() hook for all of them:
 * curl_global_init(CURL_GLOBAL_DEFAULT) once, before any test forks or starts a thread that
 * uses curl. */

#endif
