/* testkit.c -- the helpers the black-box Check suites share (see testkit.h). */
#define _GNU_SOURCE

#include "testkit.h"

#include "check_main.h"

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- servers ------------------------------------------------------------------------------ */

fg_server *start_server(const fg_opts *o)
{
    char err[FG_ERR_LEN];
    fg_server *s = fg_start(o, err);
    ck_assert_msg(s != NULL, "fg_start: %s", err);
    return s;
}

fg_server *start_args(const char *profile_json, const char *const *args)
{
    fg_opts o = {.profile_json = profile_json, .args = args};
    return start_server(&o);
}

fg_server *start_with_profile(const char *profile_json)
{
    return start_args(profile_json, NULL);
}

char *dq(const char *s)
{
    char *o = strdup(s);
    ck_assert(o != NULL);
    for (char *p = o; *p; p++)
        if (*p == '\'')
            *p = '"';
    return o;
}

const char *profiles_dir(void)
{
    const char *dir = getenv("FAKEGATE_PROFILES");
    return dir != NULL && dir[0] != '\0' ? dir : "profiles";
}

fg_server *start_q_args(const char *squoted, const char *const *args)
{
    char *json = dq(squoted);
    fg_server *s = start_args(json, args);
    free(json);
    return s;
}

fg_server *start_q(const char *squoted)
{
    return start_q_args(squoted, NULL);
}

fg_server *start_confirm_as(const char *name, const char *confirm, const char *const *args)
{
    char buf[4096];
    snprintf(buf, sizeof buf,
             "{'name':'%s','routes':{'confirm':%s,'default':{'latency':{'dist':'fixed','ms':0}}}}",
             name, confirm);
    return start_q_args(buf, args);
}

void assert_clean_stop(fg_server *s)
{
    int st = fg_stop(s);
    if (st != 0) {
        char *e = fg_server_stderr(s);
        ck_assert_msg(st == 0, "fakegate exited with %d after SIGTERM; stderr: %.3000s", st, e);
        free(e);
    }
}

void stop_server(fg_server *s)
{
    assert_clean_stop(s);
    fg_free(s);
}

/* ---- responses ---------------------------------------------------------------------------- */

void assert_status_at(int line, const fg_response *r, long status)
{
    ck_assert_msg(r->curl_code == CURLE_OK, "line %d: no response: %d %s", line,
                  (int)r->curl_code, r->curl_error);
    ck_assert_msg(r->status == status, "line %d: want status %ld, got %ld %.600s", line, status,
                  r->status, r->body);
}

void assert_error_at(int line, const fg_response *r, long status, const char *code,
                     const char *alt)
{
    ck_assert_msg(r->curl_code == CURLE_OK, "line %d: no response: %d %s", line,
                  (int)r->curl_code, r->curl_error);
    const char *got = fg_error_code(r);
    bool code_ok = got != NULL && (strcmp(got, code) == 0 || (alt != NULL && strcmp(got, alt) == 0));
    ck_assert_msg(r->status == status && code_ok, "line %d: want %ld %s%s%s, got %ld %.600s", line,
                  status, code, alt != NULL ? " or " : "", alt != NULL ? alt : "", r->status,
                  r->body);
    const char *msg = fg_json_str(r->json, "message");
    ck_assert_msg(msg != NULL && msg[0] != '\0', "line %d: error without a message: %.400s", line,
                  r->body);
    ck_assert_msg(strncmp(r->content_type, "application/json", 16) == 0,
                  "line %d: Content-Type \"%s\"", line, r->content_type);
}

void assert_curl_at(int line, const fg_response *r, CURLcode code)
{
    ck_assert_msg(r->curl_code == code,
                  "line %d: want curl error %d (%s), got %d (%s) status %ld body %.300s", line,
                  (int)code, curl_easy_strerror(code), (int)r->curl_code, r->curl_error,
                  r->status, r->body);
}

void assert_done_at(int line, const fg_response *r, const char *pk, const char *oid)
{
    assert_status_at(line, r, 200);
    ck_assert_msg(json_is_object(r->json), "line %d: 200 body is not a JSON object: %.400s", line,
                  r->body);
    const char *st = fg_json_str(r->json, "status");
    const char *gpk = fg_json_str(r->json, "paymentKey");
    const char *goid = fg_json_str(r->json, "orderId");
    ck_assert_msg(st != NULL && strcmp(st, "DONE") == 0 && gpk != NULL && strcmp(gpk, pk) == 0 &&
                      goid != NULL && strcmp(goid, oid) == 0,
                  "line %d: not a DONE payment %s/%s: %.400s", line, pk, oid, r->body);
}

void assert_done_amount_at(int line, const fg_response *r, const char *pk, const char *oid,
                           long long amount)
{
    assert_done_at(line, r, pk, oid);
    long long total = json_int(r->json, "totalAmount"), balance = json_int(r->json, "balanceAmount");
    ck_assert_msg(total == amount && balance == amount,
                  "line %d: want totalAmount and balanceAmount %lld, got %lld and %lld", line,
                  amount, total, balance);
}

bool same_bytes(const fg_response *a, const fg_response *b)
{
    return a->body_len == b->body_len && memcmp(a->body, b->body, a->body_len) == 0;
}

/* ---- JSON and text ------------------------------------------------------------------------ */

long long json_int(const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);
    ck_assert_msg(json_is_integer(v), "\"%s\" is not a JSON integer", key);
    return (long long)json_integer_value(v);
}

const char *json_str(const json_t *obj, const char *key)
{
    const char *v = fg_json_str(obj, key);
    ck_assert_msg(v != NULL, "\"%s\" is not a string", key);
    return v;
}

bool matches(const char *re, const char *s)
{
    regex_t rx;
    if (s == NULL || regcomp(&rx, re, REG_EXTENDED | REG_NOSUB) != 0)
        return false;
    bool ok = regexec(&rx, s, 0, NULL, 0) == 0;
    regfree(&rx);
    return ok;
}

void line_col_of(const char *text, const char *needle, int *line, int *col)
{
    const char *at = strstr(text, needle);
    ck_assert_msg(at != NULL, "\"%s\" not in the text", needle);
    *line = 1;
    const char *line_start = text;
    for (const char *p = text; p < at; p++)
        if (*p == '\n') {
            (*line)++;
            line_start = p + 1;
        }
    *col = (int)(at - line_start) + 1;
}

/* ---- confirms, orders and the ledger ------------------------------------------------------ */

char *padded_body(const char *pk, const char *oid, size_t size)
{
    char head[256];
    int n = snprintf(head, sizeof head, "{\"paymentKey\":\"%s\",\"orderId\":\"%s\",\"amount\":1000,"
                     "\"pad\":\"", pk, oid);
    ck_assert(n > 0 && (size_t)n + 2 < size);
    char *b = malloc(size + 1);
    ck_assert(b != NULL);
    memcpy(b, head, (size_t)n);
    memset(b + n, 'x', size - (size_t)n - 2);
    memcpy(b + size - 2, "\"}", 2);
    b[size] = '\0';
    return b;
}

/* confirm_with under the Authorization line `auth`. */
static int confirm_auth(const fg_server *s, const char *auth, const char *pk, const char *oid,
                        long long amount, const char *key, const char *extra, long timeout_ms,
                        fg_response *r)
{
    char body[512], key_line[400];
    snprintf(body, sizeof body, "{\"paymentKey\":\"%s\",\"orderId\":\"%s\",\"amount\":%lld}", pk,
             oid, amount);
    snprintf(key_line, sizeof key_line, "Idempotency-Key: %s", key != NULL ? key : "");
    const char *headers[4] = {auth, NULL, NULL, NULL};
    size_t n = 1;
    if (extra != NULL)
        headers[n++] = extra;
    if (key != NULL)
        headers[n++] = key_line;
    fg_request req = {.method = "POST", .path = CONFIRM_PATH, .body = body, .headers = headers,
                      .timeout_ms = timeout_ms, .forbid_reuse = true};
    return fg_http(s, NULL, &req, r);
}

int confirm_with(const fg_server *s, const char *pk, const char *oid, long long amount,
                 const char *key, const char *extra, long timeout_ms, fg_response *r)
{
    return confirm_auth(s, s->auth_header, pk, oid, amount, key, extra, timeout_ms, r);
}

int confirm_as_key(const fg_server *s, const char *secret_key, const char *pk, const char *oid,
                   long long amount, const char *key, long timeout_ms, fg_response *r)
{
    char cred[200], auth[320];
    snprintf(cred, sizeof cred, "%s:", secret_key);
    fg_basic_auth(cred, auth, sizeof auth);
    return confirm_auth(s, auth, pk, oid, amount, key, NULL, timeout_ms, r);
}

int confirm_fresh(const fg_server *s, const char *pk, const char *oid, long long amount,
                  const char *key, long timeout_ms, fg_response *r)
{
    return confirm_with(s, pk, oid, amount, key, NULL, timeout_ms, r);
}

void get_order(const fg_server *s, const char *oid, fg_response *r)
{
    char path[256];
    snprintf(path, sizeof path, "/v1/payments/orders/%s", oid);
    fg_get(s, path, r);
}

void order_status(const fg_server *s, const char *oid, char *buf, size_t n)
{
    fg_response r;
    get_order(s, oid, &r);
    const char *st = r.status == 200 ? fg_json_str(r.json, "status") : NULL;
    snprintf(buf, n, "%s", st != NULL ? st : "");
    fg_response_fini(&r);
}

void order_read(const fg_server *s, const char *oid, char *status, size_t n, char *ltk,
                size_t ln)
{
    fg_response r;
    get_order(s, oid, &r);
    assert_status(&r, 200);
    snprintf(status, n, "%s", json_str(r.json, "status"));
    if (ltk != NULL) {
        const char *k = fg_json_str(r.json, "lastTransactionKey");
        snprintf(ltk, ln, "%s", k != NULL ? k : "");
    }
    fg_response_fini(&r);
}

void assert_order_status_at(int line, const fg_server *s, const char *oid, const char *want)
{
    char st[64];
    order_read(s, oid, st, sizeof st, NULL, 0);
    ck_assert_msg(strcmp(st, want) == 0, "line %d: %s reads \"%s\", want %s", line, oid, st, want);
}

int64_t wait_for_order_status(const fg_server *s, const char *oid, const char *status,
                              int timeout_ms, long poll_ms)
{
    int64_t deadline = fg_now_ms() + timeout_ms;
    for (;;) {
        fg_response r;
        get_order(s, oid, &r);
        bool ok = r.status == 200 && fg_json_str(r.json, "status") != NULL &&
                  strcmp(fg_json_str(r.json, "status"), status) == 0;
        int64_t sent = r.sent_ns;
        fg_response_fini(&r);
        if (ok)
            return sent;
        if (fg_now_ms() > deadline)
            return 0;
        fg_pause_ms(poll_ms);
    }
}

json_t *the_ledger_entry_at(int line, const fg_server *s, const char *oid)
{
    json_t *a = fg_admin_payments(s, oid);
    ck_assert_msg(a != NULL, "line %d: GET /__admin/payments?orderId=%s failed", line, oid);
    ck_assert_msg(json_array_size(a) == 1, "line %d: want 1 ledger entry for %s, got %zu", line,
                  oid, json_array_size(a));
    json_t *e = json_incref(json_array_get(a, 0));
    json_decref(a);
    return e;
}

long long ledger_charges_at(int line, const fg_server *s, const char *oid)
{
    json_t *e = the_ledger_entry_at(line, s, oid);
    long long c = json_int(e, "charges");
    json_decref(e);
    return c;
}

void assert_charged_once_at(int line, const fg_server *s, const char *pk, const char *oid)
{
    json_t *e = the_ledger_entry_at(line, s, oid);
    ck_assert_int_eq(json_int(e, "charges"), 1);
    const json_t *p = json_object_get(e, "payment");
    ck_assert_str_eq(json_str(p, "paymentKey"), pk);
    ck_assert_str_eq(json_str(p, "status"), "DONE");
    json_decref(e);
}

size_t ledger_size(const fg_server *s)
{
    json_t *a = fg_admin_payments(s, NULL);
    ck_assert_msg(a != NULL, "GET /__admin/payments failed");
    size_t n = json_array_size(a);
    json_decref(a);
    return n;
}

/* ---- running ------------------------------------------------------------------------------ */

TCase *add_tcase(Suite *su, const char *name, double timeout_s)
{
    TCase *tc = tcase_create(name);
    tcase_set_timeout(tc, timeout_s);
    suite_add_tcase(su, tc);
    return tc;
}

TCase *add_timing_tcase(Suite *su, const char *name, double timeout_s)
{
    TCase *tc = add_tcase(su, name, timeout_s);
    tcase_set_tags(tc, "timing");
    return tc;
}

void check_main_setup(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

void wait_journal_settled(const fg_server *s)
{
    int64_t deadline = fg_now_ms() + 5000;
    for (;;) {
        json_t *j = journal(s, 0);
        size_t pending = 0, i;
        json_t *e;
        json_array_foreach(j, i, e) pending += json_is_str(e, "delivered", "pending");
        json_decref(j);
        if (pending == 0 || fg_now_ms() > deadline)
            return;
        fg_pause_ms(5);
    }
}
