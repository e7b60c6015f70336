/* testkit_admin.c -- the testkit's helpers for the control-plane suites (check_admin_*.c): admin
 * calls and the journal, a libcurl multi loop that holds many requests at once (one connection
 * each), the active profile and reset. Declared in testkit.h. */
#define _GNU_SOURCE

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "testkit.h"

/* ---- admin calls and the journal ---------------------------------------------------------- */

/* A profile whose confirm route is `confirm` ('-quoted object) and everything else instant,
 * with --profiles-dir so that names resolve. */
fg_server *start_admin_confirm(const char *confirm)
{
    return start_confirm_as("admin", confirm, PROFILES_DIR_ARGS);
}

/* A request to an admin route, with an optional body and optional extra header. */
int admin_call(const fg_server *s, const char *method, const char *path, const char *body,
               const char *header, fg_response *r)
{
    const char *headers[] = {header, NULL};
    fg_request req = {.method = method, .path = path, .body = body, .headers = headers};
    return fg_http(s, NULL, &req, r);
}

void put_profile(const fg_server *s, const char *json, fg_response *r)
{
    admin_call(s, "PUT", "/__admin/profile", json, NULL, r);
}

/* GET path (no auth), require 200 JSON; return a new reference to the parsed body. */
json_t *admin_json(const fg_server *s, const char *path)
{
    fg_response r;
    admin_call(s, "GET", path, NULL, NULL, &r);
    assert_status(&r, 200);
    ck_assert_msg(r.json != NULL, "%s: not JSON: %.400s", path, r.body);
    json_t *v = json_incref(r.json);
    fg_response_fini(&r);
    return v;
}

/* The journal (newest last), a new reference to the "requests" array. */
json_t *journal(const fg_server *s, int limit)
{
    char path[64];
    if (limit > 0)
        snprintf(path, sizeof path, "/__admin/requests?limit=%d", limit);
    else
        snprintf(path, sizeof path, "/__admin/requests");
    json_t *root = admin_json(s, path);
    json_t *a = json_object_get(root, "requests");
    ck_assert_msg(json_is_array(a), "/__admin/requests has no \"requests\" array");
    json_incref(a);
    json_decref(root);
    return a;
}

/* The journal as text, for failure messages. Caller frees. */
char *journal_text(const fg_server *s)
{
    fg_response r;
    admin_call(s, "GET", "/__admin/requests", NULL, NULL, &r);
    char *t = strdup(r.body != NULL ? r.body : "");
    fg_response_fini(&r);
    ck_assert(t != NULL);
    return t;
}

bool json_is_str(const json_t *o, const char *key, const char *want)
{
    const char *v = fg_json_str(o, key);
    return v != NULL && strcmp(v, want) == 0;
}

static bool has_prefix(const char *s, const char *prefix)
{
    return s != NULL && strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Confirm entries of the journal whose order_id starts with `prefix` and whose status is null
 * (pending). */
size_t count_pending(const json_t *entries, const char *prefix)
{
    size_t n = 0, i;
    json_t *e;
    json_array_foreach(entries, i, e) {
        if (json_is_str(e, "route", "confirm") && has_prefix(fg_json_str(e, "order_id"), prefix) &&
            json_is_null(json_object_get(e, "status")))
            n++;
    }
    return n;
}

/* Poll the journal until `want` confirms with order_id prefix `prefix` are pending, at most
 * timeout_ms. Returns the last count seen. */
size_t wait_pending(const fg_server *s, const char *prefix, size_t want, int timeout_ms)
{
    int64_t deadline = fg_now_ms() + timeout_ms;
    for (;;) {
        json_t *j = journal(s, 0);
        size_t n = count_pending(j, prefix);
        json_decref(j);
        if (n == want || fg_now_ms() > deadline)
            return n;
        fg_pause_ms(5);
    }
}

/* The last journal entry with this order_id (borrowed from `entries`), or NULL. */
json_t *entry_for(const json_t *entries, const char *order_id)
{
    json_t *found = NULL, *e;
    size_t i;
    json_array_foreach(entries, i, e) {
        if (json_is_str(e, "order_id", order_id))
            found = e;
    }
    return found;
}

double jnum(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    ck_assert_msg(json_is_number(v), "\"%s\" is not a number", key);
    return json_number_value(v);
}

/* ---- a libcurl multi loop: many requests at once, one connection each -------------------- */

atomic_long completion_seq;

static size_t mreq_body(char *p, size_t size, size_t nmemb, void *ud)
{
    struct mreq *q = ud;
    size_t n = size * nmemb;
    if (q->out_len + n + 1 > q->out_cap) {
        size_t cap = q->out_cap ? q->out_cap * 2 : 1024;
        while (cap < q->out_len + n + 1)
            cap *= 2;
        char *np = realloc(q->out, cap);
        if (np == NULL)
            return 0;
        q->out = np;
        q->out_cap = cap;
    }
    memcpy(q->out + q->out_len, p, n);
    q->out_len += n;
    q->out[q->out_len] = '\0';
    return n;
}

static size_t mreq_header(char *p, size_t size, size_t nmemb, void *ud)
{
    struct mreq *q = ud;
    size_t n = size * nmemb;
    if (n > 12 && strncasecmp(p, "Retry-After:", 12) == 0) {
        const char *v = p + 12;
        size_t vn = n - 12;
        while (vn > 0 && (*v == ' ' || *v == '\t')) {
            v++;
            vn--;
        }
        while (vn > 0 && (v[vn - 1] == '\r' || v[vn - 1] == '\n' || v[vn - 1] == ' '))
            vn--;
        if (vn >= sizeof q->retry_after)
            vn = sizeof q->retry_after - 1;
        memcpy(q->retry_after, v, vn);
        q->retry_after[vn] = '\0';
    }
    return n;
}

void mrun_init(struct mrun *m, const fg_server *s, size_t n)
{
    memset(m, 0, sizeof *m);
    m->s = s;
    m->n = n;
    m->q = calloc(n, sizeof *m->q);
    ck_assert(m->q != NULL);
}

/* Request i: a confirm of (pk, oid, amount) with Idempotency-Key `key` (NULL: none), on its own
 * connection, closed afterwards. */
void mrun_confirm(struct mrun *m, size_t i, const char *pk, const char *oid,
                  long long amount, const char *key, long timeout_ms)
{
    struct mreq *q = &m->q[i];
    memset(q, 0, sizeof *q);
    snprintf(q->pk, sizeof q->pk, "%s", pk);
    snprintf(q->oid, sizeof q->oid, "%s", oid);
    snprintf(q->key, sizeof q->key, "%s", key != NULL ? key : "");
    snprintf(q->body, sizeof q->body, "{\"paymentKey\":\"%s\",\"orderId\":\"%s\",\"amount\":%lld}",
             pk, oid, amount);
    char url[128], key_line[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", m->s->port, CONFIRM_PATH);
    q->hdrs = curl_slist_append(q->hdrs, m->s->auth_header);
    q->hdrs = curl_slist_append(q->hdrs, "Content-Type: application/json");
    q->hdrs = curl_slist_append(q->hdrs, "Expect:");
    if (key != NULL) {
        snprintf(key_line, sizeof key_line, "Idempotency-Key: %s", key);
        q->hdrs = curl_slist_append(q->hdrs, key_line);
    }
    ck_assert(q->hdrs != NULL);
    q->h = curl_easy_init();
    ck_assert(q->h != NULL);
    CURL *h = q->h;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(h, CURLOPT_PROXY, "");
    curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 20000L);
    curl_easy_setopt(h, CURLOPT_FORBID_REUSE, 1L);
    curl_easy_setopt(h, CURLOPT_FRESH_CONNECT, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, q->body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(q->body));
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, q->hdrs);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, mreq_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, q);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, mreq_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, q);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, q->errbuf);
    curl_easy_setopt(h, CURLOPT_PRIVATE, q);
}

/* Run every request to its end in one multi loop (this thread). */
void mrun_perform(struct mrun *m)
{
    CURLM *multi = curl_multi_init();
    if (multi == NULL)
        abort();
    m->started_ns = fg_now_ns();
    for (size_t i = 0; i < m->n; i++)
        curl_multi_add_handle(multi, m->q[i].h);
    int running = 1;
    while (running > 0) {
        if (curl_multi_perform(multi, &running) != CURLM_OK)
            break;
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(multi, &left)) != NULL) {
            if (msg->msg != CURLMSG_DONE)
                continue;
            char *priv = NULL;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &priv);
            struct mreq *q = (struct mreq *)(void *)priv;
            q->done_ns = fg_now_ns();
            q->seq = atomic_fetch_add(&completion_seq, 1) + 1;
            q->code = msg->data.result;
            if (q->code == CURLE_OK)
                curl_easy_getinfo(q->h, CURLINFO_RESPONSE_CODE, &q->status);
            curl_off_t total = 0;
            curl_easy_getinfo(q->h, CURLINFO_TOTAL_TIME_T, &total);
            q->total_us = (int64_t)total;
            atomic_fetch_add(&m->n_done, 1);
        }
        if (running > 0)
            curl_multi_poll(multi, NULL, 0, 50, NULL);
    }
    for (size_t i = 0; i < m->n; i++)
        curl_multi_remove_handle(multi, m->q[i].h);
    curl_multi_cleanup(multi);
}

static void *mrun_thread(void *arg)
{
    mrun_perform(arg);
    return NULL;
}

void mrun_start(struct mrun *m)
{
    curl_global_init(CURL_GLOBAL_DEFAULT); /* harmless if done; before any thread uses curl */
    m->threaded = true;
    ck_assert_int_eq(pthread_create(&m->thread, NULL, mrun_thread, m), 0);
}

void mrun_join(struct mrun *m)
{
    if (m->threaded)
        pthread_join(m->thread, NULL);
    m->threaded = false;
}

void mrun_free(struct mrun *m)
{
    mrun_join(m);
    for (size_t i = 0; i < m->n; i++) {
        if (m->q[i].h != NULL)
            curl_easy_cleanup(m->q[i].h);
        curl_slist_free_all(m->q[i].hdrs);
        free(m->q[i].out);
    }
    free(m->q);
    memset(m, 0, sizeof *m);
}

/* ---- the active profile and reset ---------------------------------------------------------- */

/* The active profile is still `name` with JSON equal to `profile_json`. */
void assert_profile_is(const fg_server *s, const char *name, const char *profile_json)
{
    json_t *g = admin_json(s, "/__admin/profile");
    ck_assert_msg(json_is_str(g, "name", name), "active profile %s, want %s",
                  fg_json_str(g, "name"), name);
    if (profile_json != NULL) {
        json_t *want = json_loads(profile_json, 0, NULL);
        ck_assert(want != NULL);
        char *got = json_dumps(json_object_get(g, "profile"), JSON_COMPACT | JSON_SORT_KEYS);
        char *exp = json_dumps(want, JSON_COMPACT | JSON_SORT_KEYS);
        ck_assert_msg(json_equal(json_object_get(g, "profile"), want),
                      "GET /__admin/profile \"profile\" is %s, want %s", got, exp);
        free(got);
        free(exp);
        json_decref(want);
    }
    json_decref(g);
}

void reset_now(const fg_server *s)
{
    fg_response r;
    admin_call(s, "POST", "/__admin/reset", NULL, NULL, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
}
