/* check_admin.c -- black-box tests of fakegate's control plane (SPEC §5 Admin API, §7 "Metrics",
 * "Names"): switching the profile while requests are held (50, then 1000), profile validation
 * over PUT, reset, the journal, /metrics as Prometheus text with exact counter values, the admin
 * token, and the retry-behaviour report (one deliberately bad client per finding kind, and a
 * well-behaved client that gets no finding).
 * Each test starts its own server on port 0. Held requests are driven by one libcurl multi loop
 * on a background thread, one connection per request. Ordering is asserted as order of events
 * (what the journal / the gauge / the completion counter showed when a call returned), never
 * as wall-clock thresholds; waits poll a condition with a bound. The only deliberate waits are
 * where time is the behaviour under test (a client waiting its Retry-After, an early retry). */
#define _GNU_SOURCE

#include <check.h>
#include <ctype.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "check_main.h"
#include "testkit.h"

/* ---- small helpers ------------------------------------------------------------------------ */

/* A profile whose confirm route is `confirm` ('-quoted object) and everything else instant,
 * with --profiles-dir so that names resolve. */
static fg_server *start_confirm(const char *confirm)
{
    return start_confirm_as("admin", confirm, PROFILES_DIR_ARGS);
}

/* A request to an admin route, with an optional body and optional extra header. */
static int admin_call(const fg_server *s, const char *method, const char *path, const char *body,
                      const char *header, fg_response *r)
{
    const char *headers[] = {header, NULL};
    fg_request req = {.method = method, .path = path, .body = body, .headers = headers};
    return fg_http(s, NULL, &req, r);
}

static void put_profile(const fg_server *s, const char *json, fg_response *r)
{
    admin_call(s, "PUT", "/__admin/profile", json, NULL, r);
}

/* GET path (no auth), require 200 JSON; return a new reference to the parsed body. */
static json_t *admin_json(const fg_server *s, const char *path)
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
static json_t *journal(const fg_server *s, int limit)
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
static char *journal_text(const fg_server *s)
{
    fg_response r;
    admin_call(s, "GET", "/__admin/requests", NULL, NULL, &r);
    char *t = strdup(r.body != NULL ? r.body : "");
    fg_response_fini(&r);
    ck_assert(t != NULL);
    return t;
}

static bool json_is_str(const json_t *o, const char *key, const char *want)
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
static size_t count_pending(const json_t *entries, const char *prefix)
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
static size_t wait_pending(const fg_server *s, const char *prefix, size_t want, int timeout_ms)
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
static json_t *entry_for(const json_t *entries, const char *order_id)
{
    json_t *found = NULL, *e;
    size_t i;
    json_array_foreach(entries, i, e) {
        if (json_is_str(e, "order_id", order_id))
            found = e;
    }
    return found;
}

static double jnum(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    ck_assert_msg(json_is_number(v), "\"%s\" is not a number", key);
    return json_number_value(v);
}

/* ---- a libcurl multi loop: many requests at once, one connection each -------------------- */

static atomic_long completion_seq; /* global order of completions (multi loops and main) */

struct mreq {
    CURL *h;
    struct curl_slist *hdrs;
    char body[256];
    char pk[64], oid[80], key[80];
    char *out;
    size_t out_len, out_cap;
    char retry_after[64];
    char errbuf[CURL_ERROR_SIZE];
    long status;
    CURLcode code;
    int64_t total_us;
    int64_t done_ns;
    long seq;
};

struct mrun {
    const fg_server *s;
    struct mreq *q;
    size_t n;
    atomic_size_t n_done;
    int64_t started_ns;
    pthread_t thread;
    bool threaded;
};

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

static void mrun_init(struct mrun *m, const fg_server *s, size_t n)
{
    memset(m, 0, sizeof *m);
    m->s = s;
    m->n = n;
    m->q = calloc(n, sizeof *m->q);
    ck_assert(m->q != NULL);
}

/* Request i: a confirm of (pk, oid, amount) with Idempotency-Key `key` (NULL: none), on its own
 * connection, closed afterwards. */
static void mrun_confirm(struct mrun *m, size_t i, const char *pk, const char *oid,
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
static void mrun_perform(struct mrun *m)
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

static void mrun_start(struct mrun *m)
{
    curl_global_init(CURL_GLOBAL_DEFAULT); /* harmless if done; before any thread uses curl */
    m->threaded = true;
    ck_assert_int_eq(pthread_create(&m->thread, NULL, mrun_thread, m), 0);
}

static void mrun_join(struct mrun *m)
{
    if (m->threaded)
        pthread_join(m->thread, NULL);
    m->threaded = false;
}

static void mrun_free(struct mrun *m)
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

static void raise_nofile(void)
{
    struct rlimit rl;
    ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* ---- Prometheus text: a small strict parser ----------------------------------------------- */

#define PROM_MAX_LABELS 4

struct prom_sample {
    char name[96];
    size_t n_labels;
    char lname[PROM_MAX_LABELS][32];
    char lvalue[PROM_MAX_LABELS][64];
    double value;
};

struct prom_family {
    char name[96];
    char type[16];
    int n_help, n_type;
    bool closed; /* another family's lines came after its own */
};

struct prom {
    struct prom_sample *s;
    size_t n;
    struct prom_family f[64];
    size_t nf;
};

static bool prom_name_ok(const char *p, size_t n)
{
    if (n == 0 || !(isalpha((unsigned char)p[0]) || p[0] == '_' || p[0] == ':'))
        return false;
    for (size_t i = 1; i < n; i++)
        if (!(isalnum((unsigned char)p[i]) || p[i] == '_' || p[i] == ':'))
            return false;
    return true;
}

static struct prom_family *prom_family_get(struct prom *p, const char *name)
{
    for (size_t i = 0; i < p->nf; i++)
        if (strcmp(p->f[i].name, name) == 0)
            return &p->f[i];
    return NULL;
}

/* The family a sample named `name` belongs to (histograms: _bucket, _sum, _count). */
static struct prom_family *prom_family_of(struct prom *p, const char *name)
{
    struct prom_family *f = prom_family_get(p, name);
    if (f != NULL)
        return f;
    static const char *const suffixes[] = {"_bucket", "_sum", "_count"};
    for (size_t k = 0; k < 3; k++) {
        size_t nl = strlen(name), sl = strlen(suffixes[k]);
        if (nl > sl && strcmp(name + nl - sl, suffixes[k]) == 0) {
            char base[96];
            snprintf(base, sizeof base, "%.*s", (int)(nl - sl), name);
            f = prom_family_get(p, base);
            if (f != NULL && strcmp(f->type, "histogram") == 0)
                return f;
        }
    }
    return NULL;
}

static void prom_enter(struct prom *p, struct prom_family *cur)
{
    for (size_t i = 0; i < p->nf; i++)
        if (&p->f[i] != cur && !p->f[i].closed && (p->f[i].n_help || p->f[i].n_type))
            p->f[i].closed = true;
}

/* Parse `text`; false with a message in err. */
static bool prom_parse(const char *text, struct prom *p, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    size_t len = strlen(text), cap = 256;
    p->s = calloc(cap, sizeof *p->s);
    ck_assert(p->s != NULL);
    if (len == 0 || text[len - 1] != '\n') {
        snprintf(err, errlen, "no final newline");
        return false;
    }
    int lineno = 0;
    for (const char *line = text; *line != '\0';) {
        const char *eol = strchr(line, '\n');
        size_t n = (size_t)(eol - line);
        lineno++;
        char buf[512];
        if (n >= sizeof buf) {
            snprintf(err, errlen, "line %d too long", lineno);
            return false;
        }
        memcpy(buf, line, n);
        buf[n] = '\0';
        line = eol + 1;
        if (n == 0) {
            snprintf(err, errlen, "line %d is empty", lineno);
            return false;
        }
        if (buf[0] == '#') {
            bool help = strncmp(buf, "# HELP ", 7) == 0, type = strncmp(buf, "# TYPE ", 7) == 0;
            if (!help && !type) {
                snprintf(err, errlen, "line %d: comment that is neither HELP nor TYPE: %.120s",
                         lineno, buf);
                return false;
            }
            const char *name = buf + 7;
            const char *sp = strchr(name, ' ');
            if (sp == NULL || !prom_name_ok(name, (size_t)(sp - name)) || sp[1] == '\0') {
                snprintf(err, errlen, "line %d: malformed: %.120s", lineno, buf);
                return false;
            }
            char fname[96];
            snprintf(fname, sizeof fname, "%.*s", (int)(sp - name), name);
            struct prom_family *f = prom_family_get(p, fname);
            if (f == NULL) {
                if (p->nf == sizeof p->f / sizeof p->f[0]) {
                    snprintf(err, errlen, "too many families");
                    return false;
                }
                f = &p->f[p->nf++];
                snprintf(f->name, sizeof f->name, "%s", fname);
            }
            if (f->closed) {
                snprintf(err, errlen, "line %d: %.120s comes back after another family", lineno,
                         fname);
                return false;
            }
            prom_enter(p, f);
            if (help) {
                f->n_help++;
            } else {
                const char *t = sp + 1;
                if (strcmp(t, "counter") != 0 && strcmp(t, "gauge") != 0 &&
                    strcmp(t, "histogram") != 0) {
                    snprintf(err, errlen, "line %d: type \"%s\"", lineno, t);
                    return false;
                }
                snprintf(f->type, sizeof f->type, "%s", t);
                f->n_type++;
            }
            if (f->n_help > 1 || f->n_type > 1) {
                snprintf(err, errlen, "line %d: second %.120s for %.120s", lineno, help ? "HELP" : "TYPE",
                         fname);
                return false;
            }
            continue;
        }
        /* A sample: name[{labels}] value */
        if (p->n == cap) {
            cap *= 2;
            struct prom_sample *ns = realloc(p->s, cap * sizeof *p->s);
            ck_assert(ns != NULL);
            p->s = ns;
        }
        struct prom_sample *smp = &p->s[p->n];
        memset(smp, 0, sizeof *smp);
        const char *c = buf;
        size_t nl = strcspn(c, "{ ");
        if (!prom_name_ok(c, nl) || nl >= sizeof smp->name) {
            snprintf(err, errlen, "line %d: bad metric name: %.120s", lineno, buf);
            return false;
        }
        memcpy(smp->name, c, nl);
        c += nl;
        if (*c == '{') {
            c++;
            while (*c != '}') {
                size_t ln = strcspn(c, "=");
                if (smp->n_labels == PROM_MAX_LABELS || !prom_name_ok(c, ln) || ln >= 32 ||
                    c[ln] != '=' || c[ln + 1] != '"') {
                    snprintf(err, errlen, "line %d: bad label: %.120s", lineno, buf);
                    return false;
                }
                memcpy(smp->lname[smp->n_labels], c, ln);
                c += ln + 2;
                size_t vi = 0;
                while (*c != '"') {
                    if (*c == '\0' || vi + 2 >= 64) {
                        snprintf(err, errlen, "line %d: unterminated label value: %.120s", lineno,
                                 buf);
                        return false;
                    }
                    if (*c == '\\') {
                        if (c[1] != '\\' && c[1] != '"' && c[1] != 'n') {
                            snprintf(err, errlen, "line %d: bad escape in label value: %.120s",
                                     lineno, buf);
                            return false;
                        }
                        smp->lvalue[smp->n_labels][vi++] = c[1] == 'n' ? '\n' : c[1];
                        c += 2;
                    } else {
                        smp->lvalue[smp->n_labels][vi++] = *c++;
                    }
                }
                c++;
                for (size_t k = 0; k < smp->n_labels; k++)
                    if (strcmp(smp->lname[k], smp->lname[smp->n_labels]) == 0) {
                        snprintf(err, errlen, "line %d: label repeated: %.120s", lineno, buf);
                        return false;
                    }
                smp->n_labels++;
                if (*c == ',')
                    c++;
                else if (*c != '}') {
                    snprintf(err, errlen, "line %d: expected , or }: %.120s", lineno, buf);
                    return false;
                }
            }
            c++;
        }
        if (*c != ' ') {
            snprintf(err, errlen, "line %d: no space before the value: %.120s", lineno, buf);
            return false;
        }
        c++;
        if (strcmp(c, "+Inf") == 0) {
            smp->value = INFINITY;
        } else {
            char *end;
            smp->value = strtod(c, &end);
            if (end == c || *end != '\0' || isnan(smp->value)) {
                snprintf(err, errlen, "line %d: bad value: %.120s", lineno, buf);
                return false;
            }
        }
        struct prom_family *f = prom_family_of(p, smp->name);
        if (f == NULL || f->n_help != 1 || f->n_type != 1) {
            snprintf(err, errlen, "line %d: sample of a family without HELP and TYPE before it: %.120s",
                     lineno, buf);
            return false;
        }
        if (f->closed) {
            snprintf(err, errlen, "line %d: sample of %.120s after another family", lineno, f->name);
            return false;
        }
        prom_enter(p, f);
        if (strcmp(f->type, "counter") == 0 && smp->value < 0) {
            snprintf(err, errlen, "line %d: negative counter: %.120s", lineno, buf);
            return false;
        }
        /* No duplicate series. */
        for (size_t k = 0; k < p->n; k++) {
            const struct prom_sample *o = &p->s[k];
            if (strcmp(o->name, smp->name) != 0 || o->n_labels != smp->n_labels)
                continue;
            bool same = true;
            for (size_t a = 0; a < o->n_labels && same; a++) {
                bool found = false;
                for (size_t b = 0; b < smp->n_labels; b++)
                    found = found || (strcmp(o->lname[a], smp->lname[b]) == 0 &&
                                      strcmp(o->lvalue[a], smp->lvalue[b]) == 0);
                same = found;
            }
            if (same) {
                snprintf(err, errlen, "line %d: duplicate series: %.120s", lineno, buf);
                return false;
            }
        }
        p->n++;
    }
    for (size_t i = 0; i < p->nf; i++)
        if (p->f[i].n_help != 1 || p->f[i].n_type != 1) {
            snprintf(err, errlen, "family %.120s: %d HELP, %d TYPE", p->f[i].name, p->f[i].n_help,
                     p->f[i].n_type);
            return false;
        }
    return true;
}

static void prom_free(struct prom *p)
{
    free(p->s);
    memset(p, 0, sizeof *p);
}

static const char *prom_label(const struct prom_sample *s, const char *name)
{
    for (size_t i = 0; i < s->n_labels; i++)
        if (strcmp(s->lname[i], name) == 0)
            return s->lvalue[i];
    return NULL;
}

/* The value of series `name` with exactly the labels given as (name, value) pairs, NULL-ended;
 * NAN if absent. */
static double prom_get(const struct prom *p, const char *name, ...)
{
    const char *ln[PROM_MAX_LABELS], *lv[PROM_MAX_LABELS];
    size_t n = 0;
    va_list ap;
    va_start(ap, name);
    for (const char *k; n < PROM_MAX_LABELS && (k = va_arg(ap, const char *)) != NULL; n++) {
        ln[n] = k;
        lv[n] = va_arg(ap, const char *);
    }
    va_end(ap);
    for (size_t i = 0; i < p->n; i++) {
        const struct prom_sample *s = &p->s[i];
        if (strcmp(s->name, name) != 0 || s->n_labels != n)
            continue;
        bool ok = true;
        for (size_t k = 0; k < n && ok; k++) {
            const char *v = prom_label(s, ln[k]);
            ok = v != NULL && strcmp(v, lv[k]) == 0;
        }
        if (ok)
            return s->value;
    }
    return NAN;
}

/* GET /metrics (no auth) and parse it; the test fails if it is not valid Prometheus text. The
 * raw text is returned in *text if not NULL (caller frees). */
static void metrics(const fg_server *s, struct prom *p, char **text)
{
    fg_response r;
    admin_call(s, "GET", "/metrics", NULL, NULL, &r);
    assert_status(&r, 200);
    ck_assert_msg(strncmp(r.content_type, "text/plain", 10) == 0, "/metrics Content-Type \"%s\"",
                  r.content_type);
    char err[512];
    bool ok = prom_parse(r.body, p, err, sizeof err);
    ck_assert_msg(ok, "/metrics is not valid Prometheus text: %s\n%.4000s", err, r.body);
    if (text != NULL) {
        *text = strdup(r.body);
        ck_assert(*text != NULL);
    }
    fg_response_fini(&r);
}

static double metric1(const fg_server *s, const char *name, const char *lk, const char *lv)
{
    struct prom p;
    metrics(s, &p, NULL);
    double v = lk != NULL ? prom_get(&p, name, lk, lv, NULL) : prom_get(&p, name, NULL);
    prom_free(&p);
    return v;
}

/* Poll until the gauge/counter reaches `want`, at most timeout_ms. Returns the last value. */
static double wait_metric(const fg_server *s, const char *name, const char *lk, const char *lv,
                          double want, int timeout_ms)
{
    int64_t deadline = fg_now_ms() + timeout_ms;
    for (;;) {
        double v = metric1(s, name, lk, lv);
        if (v == want || fg_now_ms() > deadline)
            return v;
        fg_pause_ms(5);
    }
}

static const char *const ROUTES[] = {"confirm", "cancel", "read", "default"};
static const char *const OUTCOMES[] = {"ok", "replayed", "conflict", "business_error", "invalid",
                                       "unauthorized", "throttled", "capped", "dropped_request",
                                       "dropped_response", "fault_error"};
#define N_ROUTES 4
#define N_OUTCOMES 11

/* ---- 1. switching the profile while 50 requests are held -------------------------------- */

START_TEST(test_switch_slow_to_fast_while_50_held)
{
    fg_server *s = start_confirm("{'latency':{'dist':'fixed','ms':1500}}");
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
    printf("check_admin: PUT /__admin/profile with 50 held: %.1f ms\n", (double)(t1 - t0) / 1e6);
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

/* ---- 2. the switch with 1000 requests held -------------------------------------------------- */

START_TEST(test_switch_with_1000_held)
{
    raise_nofile();
    fg_server *s = start_confirm("{'latency':{'dist':'fixed','ms':3000}}");
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
    printf("check_admin: PUT /__admin/profile with 1000 held: %.1f ms\n",
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

/* ---- 3. profile validation over PUT ------------------------------------------------------- */

/* The active profile is still `name` with JSON equal to `profile_json`. */
static void assert_profile_is(const fg_server *s, const char *name, const char *profile_json)
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

/* ---- 4. reset ---------------------------------------------------------------------------- */

static bool all_requests_zero(const struct prom *p, char *which, size_t n)
{
    for (size_t r = 0; r < N_ROUTES; r++)
        for (size_t o = 0; o < N_OUTCOMES; o++) {
            double v = prom_get(p, "fakegate_requests_total", "route", ROUTES[r], "outcome",
                                OUTCOMES[o], NULL);
            if (v != 0) {
                snprintf(which, n, "requests_total{%s,%s} = %g", ROUTES[r], OUTCOMES[o], v);
                return false;
            }
        }
    return true;
}

/* Regression: a second reset re-applied a NULL profile (the first reset's record borrowed it). */
START_TEST(test_reset_three_times_in_a_row_keeps_serving)
{
    fg_server *s = start_confirm("{\"latency\":{\"dist\":\"fixed\",\"ms\":0}}");
    for (int i = 0; i < 3; i++) {
        fg_response r;
        admin_call(s, "POST", "/__admin/reset", NULL, NULL, &r);
        assert_status_at(__LINE__, &r, 200);
        fg_response_fini(&r);
    }
    fg_response r;
    confirm_fresh(s, "pk_rrr", "order_rrr_1", 1000, "rrr-1", 0, &r);
    assert_status_at(__LINE__, &r, 200);
    fg_response_fini(&r);
    json_t *p = admin_json(s, "/__admin/profile");
    ck_assert_ptr_nonnull(json_object_get(p, "profile"));
    ck_assert(json_is_object(json_object_get(p, "profile")));
    json_decref(p);
    stop_server(s);
}
END_TEST

START_TEST(test_reset_empties_everything)
{
    fg_server *s = start_confirm("{'latency':{'dist':'fixed','ms':0}}");
    fg_response r;
    confirm_fresh(s, "pk_rs_1", "ord_rs_1", 1000, "key-rs-1", 0, &r);
    assert_status(&r, 200);
    char ltk1[128];
    snprintf(ltk1, sizeof ltk1, "%s", fg_json_str(r.json, "lastTransactionKey"));
    fg_response_fini(&r);
    confirm_fresh(s, "pk_rs_1", "ord_rs_1", 1000, "key-rs-1", 0, &r); /* a replay */
    assert_status(&r, 200);
    ck_assert_str_eq(fg_json_str(r.json, "lastTransactionKey"), ltk1);
    fg_response_fini(&r);

    /* Two confirms held across the reset (the peak must restart from them). */
    char *held = dq("{'name':'held','routes':{'confirm':{'latency':{'dist':'fixed','ms':1500}},"
                    "'default':{'latency':{'dist':'fixed','ms':0}}}}");
    put_profile(s, held, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    struct mrun m;
    mrun_init(&m, s, 2);
    mrun_confirm(&m, 0, "pk_rs_h0", "ord_rs_h0", 1000, "key-rs-h0", 10000);
    mrun_confirm(&m, 1, "pk_rs_h1", "ord_rs_h1", 1000, "key-rs-h1", 10000);
    mrun_start(&m);
    ck_assert_uint_eq(wait_pending(s, "ord_rs_h", 2, 5000), 2);

    admin_call(s, "POST", "/__admin/reset", NULL, NULL, &r);
    assert_status(&r, 200);
    ck_assert_msg(json_is_str(r.json, "name", "held"), "reset changed the profile: %.300s",
                  r.body);
    fg_response_fini(&r);
    ck_assert_msg(atomic_load(&m.n_done) == 0, "held confirms ended before the checks");

    json_t *pays = fg_admin_payments(s, NULL);
    ck_assert(pays != NULL);
    ck_assert_msg(json_array_size(pays) == 0, "ledger not empty after reset");
    json_decref(pays);
    json_t *j = journal(s, 0);
    ck_assert_msg(json_array_size(j) == 0, "journal not empty after reset");
    json_decref(j);
    struct prom p;
    char which[160];
    metrics(s, &p, NULL);
    ck_assert_msg(all_requests_zero(&p, which, sizeof which), "after reset %s", which);
    const char *statuses[] = {"IN_PROGRESS", "DONE", "CANCELED", "PARTIAL_CANCELED", "ABORTED",
                              "EXPIRED"};
    for (size_t i = 0; i < 6; i++)
        ck_assert_msg(prom_get(&p, "fakegate_payments_total", "status", statuses[i], NULL) == 0,
                      "payments_total{%s} after reset", statuses[i]);
    ck_assert(prom_get(&p, "fakegate_idempotent_replays_total", NULL) == 0);
    ck_assert(prom_get(&p, "fakegate_injected_latency_seconds_count", NULL) == 0);
    double inflight = prom_get(&p, "fakegate_in_flight", "route", "confirm", NULL);
    double peak = prom_get(&p, "fakegate_in_flight_peak", "route", "confirm", NULL);
    ck_assert_msg(inflight == 2 && peak == 2, "after reset with 2 held: in flight %g, peak %g",
                  inflight, peak);
    prom_free(&p);
    mrun_join(&m);
    mrun_free(&m);
    ck_assert(wait_metric(s, "fakegate_in_flight", "route", "confirm", 0, 5000) == 0);

    /* An idle reset: peak 0. The key used before runs again: a NEW transaction. */
    char *instant = dq("{'name':'instant2','routes':{'default':{'latency':{'dist':'fixed','ms':0}}}}");
    put_profile(s, instant, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    admin_call(s, "POST", "/__admin/reset", NULL, NULL, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    metrics(s, &p, NULL);
    ck_assert_msg(all_requests_zero(&p, which, sizeof which), "after idle reset %s", which);
    for (size_t i = 0; i < N_ROUTES; i++) {
        ck_assert(prom_get(&p, "fakegate_in_flight", "route", ROUTES[i], NULL) == 0);
        ck_assert_msg(prom_get(&p, "fakegate_in_flight_peak", "route", ROUTES[i], NULL) == 0,
                      "idle reset: peak{%s} %g", ROUTES[i],
                      prom_get(&p, "fakegate_in_flight_peak", "route", ROUTES[i], NULL));
    }
    prom_free(&p);
    j = journal(s, 0);
    ck_assert_msg(json_array_size(j) == 0, "journal not empty after idle reset");
    json_decref(j);
    confirm_fresh(s, "pk_rs_1", "ord_rs_1", 1000, "key-rs-1", 0, &r);
    assert_status(&r, 200);
    const char *ltk2 = fg_json_str(r.json, "lastTransactionKey");
    ck_assert_msg(ltk2 != NULL && strcmp(ltk2, ltk1) != 0,
                  "the key used before reset replayed lastTransactionKey %s", ltk1);
    fg_response_fini(&r);
    j = journal(s, 0);
    ck_assert_int_eq((int)json_array_size(j), 1);
    ck_assert_int_eq((int)json_integer_value(json_object_get(json_array_get(j, 0), "attempt")), 1);
    json_decref(j);

    /* reset {"profile": NAME} applies it; {"profile": {...}} too; no body keeps it. */
    admin_call(s, "POST", "/__admin/reset", "{\"profile\": \"normal\"}", NULL, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    assert_profile_is(s, "normal", NULL);
    pays = fg_admin_payments(s, NULL);
    ck_assert_int_eq((int)json_array_size(pays), 0);
    json_decref(pays);
    admin_call(s, "POST", "/__admin/reset", NULL, NULL, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    assert_profile_is(s, "normal", NULL);
    char body[512];
    snprintf(body, sizeof body, "{\"profile\": %s}", instant);
    admin_call(s, "POST", "/__admin/reset", body, NULL, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    assert_profile_is(s, "instant2", instant);
    admin_call(s, "POST", "/__admin/reset", "{\"profile\": \"../etc\"}", NULL, &r);
    assert_error(&r, 400, "INVALID_PROFILE");
    fg_response_fini(&r);
    assert_profile_is(s, "instant2", instant);
    free(held);
    free(instant);
    stop_server(s);
}
END_TEST

/* A request that spans a reset must not touch the journal entries written after it. */
START_TEST(test_request_spanning_reset_leaves_new_journal_alone)
{
    fg_server *s = start_confirm("{'latency':{'dist':'fixed','ms':0}}");
    fg_response r;
    /* Entries 1..3 before the held one, so that it is entry 4. */
    for (int i = 0; i < 3; i++) {
        char pk[32], oid[32];
        snprintf(pk, sizeof pk, "pk_sp_%d", i);
        snprintf(oid, sizeof oid, "ord_sp_%d", i);
        confirm_fresh(s, pk, oid, 1000, NULL, 0, &r);
        assert_status(&r, 200);
        fg_response_fini(&r);
    }
    char *held = dq("{'name':'held','routes':{'confirm':{'latency':{'dist':'fixed','ms':1200}},"
                    "'read':{'latency':{'dist':'fixed','ms':0}}}}");
    put_profile(s, held, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    struct mrun m;
    mrun_init(&m, s, 1);
    mrun_confirm(&m, 0, "pk_sp_held", "ord_sp_held", 1000, "key-sp-held", 10000);
    mrun_start(&m);
    ck_assert_uint_eq(wait_pending(s, "ord_sp_held", 1, 5000), 1);
    admin_call(s, "POST", "/__admin/reset", NULL, NULL, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    /* Four new requests after the reset: ids 1..4 again. */
    for (int i = 0; i < 4; i++) {
        char path[64];
        snprintf(path, sizeof path, "/v1/payments/orders/ord_new_%d", i);
        fg_get(s, path, &r);
        assert_error(&r, 404, "NOT_FOUND_PAYMENT");
        fg_response_fini(&r);
    }
    mrun_join(&m);
    int64_t deadline = fg_now_ms() + 2000;
    while (metric1(s, "fakegate_in_flight", "route", "confirm") != 0 && fg_now_ms() < deadline)
        fg_pause_ms(5);
    json_t *j = journal(s, 0);
    char *text = journal_text(s);
    ck_assert_msg(json_array_size(j) == 4, "journal after reset: %s", text);
    size_t i;
    json_t *e;
    json_array_foreach(j, i, e) {
        ck_assert_msg(json_is_str(e, "route", "read") &&
                          json_integer_value(json_object_get(e, "status")) == 404 &&
                          json_is_str(e, "outcome", "business_error"),
                      "entry %zu was changed by the request held across the reset: %s", i, text);
    }
    free(text);
    json_decref(j);
    mrun_free(&m);
    free(held);
    stop_server(s);
}
END_TEST

/* One request on a thread of its own (a held request the test acts around). */
struct async_req {
    const fg_server *s;
    char path[96], body[160], key_line[96];
    fg_response r;
    pthread_t thread;
};

static void *async_req_main(void *arg)
{
    struct async_req *a = arg;
    const char *headers[] = {a->s->auth_header, "Content-Type: application/json",
                             a->key_line[0] ? a->key_line : NULL, NULL};
    fg_request req = {.method = "POST", .path = a->path, .body = a->body, .headers = headers};
    fg_http(a->s, NULL, &req, &a->r);
    return NULL;
}

/* POST `body` to `path` (Idempotency-Key `key` unless NULL) on its own thread. */
static void async_post(struct async_req *a, const fg_server *s, const char *path,
                       const char *body, const char *key)
{
    memset(a, 0, sizeof *a);
    a->s = s;
    snprintf(a->path, sizeof a->path, "%s", path);
    snprintf(a->body, sizeof a->body, "%s", body);
    if (key)
        snprintf(a->key_line, sizeof a->key_line, "Idempotency-Key: %s", key);
    curl_global_init(CURL_GLOBAL_DEFAULT); /* before a second thread uses curl */
    ck_assert_int_eq(pthread_create(&a->thread, NULL, async_req_main, a), 0);
}

static void async_join(struct async_req *a)
{
    pthread_join(a->thread, NULL);
}

/* fakegate_requests_total{route="confirm",outcome=...} (NAN if the series is absent). */
static double confirms_with_outcome(const fg_server *s, const char *outcome)
{
    struct prom p;
    metrics(s, &p, NULL);
    double v = prom_get(&p, "fakegate_requests_total", "route", "confirm", "outcome", outcome,
                        NULL);
    prom_free(&p);
    return v;
}

static void reset_now(const fg_server *s)
{
    fg_response r;
    admin_call(s, "POST", "/__admin/reset", NULL, NULL, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
}

/* A confirm in its latency when a reset runs belongs to the emptied ledger: it is answered 500
 * and must not approve a payment of the same paymentKey that a request after the reset created
 * and is processing (that request's Idempotency-Key record must end DONE, not stay PROCESSING),
 * and it is not counted in the new counters. */
START_TEST(test_confirm_held_across_reset_leaves_the_new_ledger_alone)
{
    fg_server *s = start_confirm("{'latency':{'dist':'fixed','ms':1500}}");
    const char *body = "{\"paymentKey\":\"pk_rs\",\"orderId\":\"ord_rs\",\"amount\":1000}";
    struct async_req old, fresh;
    async_post(&old, s, CONFIRM_PATH, body, "K-old");
    ck_assert_double_eq(wait_metric(s, "fakegate_in_flight", "route", "confirm", 1, 5000), 1);
    reset_now(s);
    async_post(&fresh, s, CONFIRM_PATH, body, "K-new");
    async_join(&old);
    async_join(&fresh);
    assert_error(&old.r, 500, "FAILED_INTERNAL_SYSTEM_PROCESSING");
    assert_done(&fresh.r, "pk_rs", "ord_rs");
    assert_charged_once(s, "pk_rs", "ord_rs");
    /* K-new's record is DONE: its resend replays the 200, byte for byte. */
    fg_response again;
    confirm_fresh(s, "pk_rs", "ord_rs", 1000, "K-new", 0, &again);
    assert_status(&again, 200);
    ck_assert_str_eq(again.body, fresh.r.body);
    fg_response_fini(&again);
    ck_assert_double_eq(confirms_with_outcome(s, "business_error"), 0);
    ck_assert_double_eq(confirms_with_outcome(s, "ok"), 1);
    ck_assert_double_eq(confirms_with_outcome(s, "replayed"), 1);
    fg_response_fini(&old.r);
    fg_response_fini(&fresh.r);
    stop_server(s);
}
END_TEST

/* A confirm whose headers came before a reset and its body after it is answered 500 and leaves
 * no trace in the new state: not even an attempt count (the next confirm of that order is its
 * attempt 1 again, so a fault with "attempts": [1] still fires for it). */
START_TEST(test_confirm_whose_body_comes_after_a_reset_counts_no_attempt)
{
    fg_server *s = start_confirm("{'latency':{'dist':'fixed','ms':0}}");
    const char *body = "{\"paymentKey\":\"pk_rb\",\"orderId\":\"ord_rb\",\"amount\":1000}";
    char head[512];
    int hn = snprintf(head, sizeof head,
                      "POST " CONFIRM_PATH " HTTP/1.1\r\nHost: 127.0.0.1\r\n%s\r\n"
                      "Content-Type: application/json\r\nContent-Length: %zu\r\n"
                      "Connection: close\r\n\r\n",
                      s->auth_header, strlen(body));
    ck_assert(hn > 0 && (size_t)hn < sizeof head);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)s->port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    ck_assert_int_eq((int)write(fd, head, (size_t)hn), hn);
    /* Admitted at its headers: counted in flight from then on. */
    ck_assert_double_eq(wait_metric(s, "fakegate_in_flight", "route", "confirm", 1, 5000), 1);
    reset_now(s);
    ck_assert_int_eq((int)write(fd, body, strlen(body)), (int)strlen(body));
    char resp[4096];
    size_t got = 0;
    for (ssize_t n; got < sizeof resp - 1 && (n = read(fd, resp + got, sizeof resp - 1 - got)) > 0;)
        got += (size_t)n;
    resp[got] = '\0';
    close(fd);
    ck_assert_msg(strncmp(resp, "HTTP/1.1 500", 12) == 0 &&
                      strstr(resp, "FAILED_INTERNAL_SYSTEM_PROCESSING") != NULL,
                  "the request straddling the reset: %.300s", resp);
    ck_assert_uint_eq(ledger_size(s), 0);

    fg_response r;
    confirm_fresh(s, "pk_rb", "ord_rb", 1000, NULL, 0, &r);
    assert_done(&r, "pk_rb", "ord_rb");
    fg_response_fini(&r);
    json_t *j = journal(s, 0);
    json_t *e = entry_for(j, "ord_rb");
    ck_assert_ptr_nonnull(e);
    ck_assert_int_eq((int)json_integer_value(json_object_get(e, "attempt")), 1);
    json_decref(j);
    stop_server(s);
}
END_TEST

/* A cancel in its latency when a reset runs must not cancel the payment of the same paymentKey
 * confirmed after the reset. */
START_TEST(test_cancel_held_across_reset_leaves_the_new_payment_alone)
{
    fg_server *s = start_confirm("{'latency':{'dist':'fixed','ms':0}}");
    char *slow_cancel = dq("{'name':'slow-cancel','routes':{'cancel':{'latency':{'dist':'fixed',"
                           "'ms':1500}}}}");
    fg_response r;
    put_profile(s, slow_cancel, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    confirm_fresh(s, "pk_rc", "ord_rc", 1000, NULL, 0, &r);
    assert_done(&r, "pk_rc", "ord_rc");
    fg_response_fini(&r);
    struct async_req cancel;
    async_post(&cancel, s, "/v1/payments/pk_rc/cancel", "{\"cancelReason\":\"old\"}", NULL);
    ck_assert_double_eq(wait_metric(s, "fakegate_in_flight", "route", "cancel", 1, 5000), 1);
    reset_now(s); /* keeps the profile */
    confirm_fresh(s, "pk_rc", "ord_rc", 1000, NULL, 0, &r);
    assert_done(&r, "pk_rc", "ord_rc");
    fg_response_fini(&r);
    async_join(&cancel);
    assert_error(&cancel.r, 500, "FAILED_INTERNAL_SYSTEM_PROCESSING");
    fg_response_fini(&cancel.r);
    fg_get(s, "/v1/payments/pk_rc", &r);
    assert_done(&r, "pk_rc", "ord_rc");
    ck_assert(json_is_null(json_object_get(r.json, "cancels")));
    fg_response_fini(&r);
    free(slow_cancel);
    stop_server(s);
}
END_TEST

/* A confirm still in its queue latency when a reset runs is answered 500 and charges nothing
 * in the new ledger, and no counter after the reset shows it. */
START_TEST(test_confirm_queued_across_reset_charges_nothing)
{
    fg_server *s = start_confirm("{'queue_latency':{'dist':'fixed','ms':1500}}");
    struct async_req q;
    async_post(&q, s, CONFIRM_PATH, "{\"paymentKey\":\"pk_rq\",\"orderId\":\"ord_rq\",\"amount\":1000}",
               "K-queued");
    ck_assert_double_eq(wait_metric(s, "fakegate_in_flight", "route", "confirm", 1, 5000), 1);
    reset_now(s);
    async_join(&q);
    assert_error(&q.r, 500, "FAILED_INTERNAL_SYSTEM_PROCESSING");
    fg_response_fini(&q.r);
    ck_assert_uint_eq(ledger_size(s), 0);
    ck_assert_double_eq(confirms_with_outcome(s, "business_error"), 0);
    ck_assert_double_eq(metric1(s, "fakegate_injected_latency_seconds_count", NULL, NULL), 0);
    ck_assert_double_eq(metric1(s, "fakegate_payments_total", "status", "IN_PROGRESS"), 0);
    /* The same confirm after the reset runs as new. */
    fg_response r;
    confirm_fresh(s, "pk_rq", "ord_rq", 1000, "K-queued", 10000, &r);
    assert_done(&r, "pk_rq", "ord_rq");
    fg_response_fini(&r);
    assert_charged_once(s, "pk_rq", "ord_rq");
    stop_server(s);
}
END_TEST

/* ---- 5. /metrics --------------------------------------------------------------------------- */

struct expect {
    const char *name, *lk1, *lv1, *lk2, *lv2;
    double want;
};

/* Every series of `fams` (requests_total, payments_total, faults, throttled, replays, conflicts,
 * key reuse) has exactly the value in `ex` or 0 when not listed. Returns a message or NULL. */
static bool counters_match(const struct prom *p, const struct expect *ex, size_t n_ex, char *why,
                           size_t wn)
{
    static const char *const fams[] = {"fakegate_requests_total", "fakegate_payments_total",
                                       "fakegate_faults_total", "fakegate_throttled_total",
                                       "fakegate_idempotent_replays_total",
                                       "fakegate_idempotency_conflicts_total",
                                       "fakegate_idempotency_key_reuse_total"};
    for (size_t i = 0; i < p->n; i++) {
        const struct prom_sample *s = &p->s[i];
        bool in = false;
        for (size_t f = 0; f < sizeof fams / sizeof fams[0]; f++)
            in = in || strcmp(s->name, fams[f]) == 0;
        if (!in)
            continue;
        double want = 0;
        for (size_t k = 0; k < n_ex; k++) {
            if (strcmp(ex[k].name, s->name) != 0)
                continue;
            const char *v1 = ex[k].lk1 ? prom_label(s, ex[k].lk1) : NULL;
            const char *v2 = ex[k].lk2 ? prom_label(s, ex[k].lk2) : NULL;
            if ((ex[k].lk1 == NULL || (v1 && strcmp(v1, ex[k].lv1) == 0)) &&
                (ex[k].lk2 == NULL || (v2 && strcmp(v2, ex[k].lv2) == 0)))
                want = ex[k].want;
        }
        if (s->value != want) {
            char labels[200] = "";
            size_t u = 0;
            for (size_t l = 0; l < s->n_labels; l++)
                u += (size_t)snprintf(labels + u, sizeof labels - u, "%s%s=\"%s\"", l ? "," : "",
                                      s->lname[l], s->lvalue[l]);
            snprintf(why, wn, "%s{%s} = %g, want %g", s->name, labels, s->value, want);
            return false;
        }
    }
    /* Every expected series exists. */
    for (size_t k = 0; k < n_ex; k++) {
        double v = ex[k].lk2   ? prom_get(p, ex[k].name, ex[k].lk1, ex[k].lv1, ex[k].lk2,
                                          ex[k].lv2, NULL)
                   : ex[k].lk1 ? prom_get(p, ex[k].name, ex[k].lk1, ex[k].lv1, NULL)
                               : prom_get(p, ex[k].name, NULL);
        if (isnan(v)) {
            snprintf(why, wn, "series %s %s=%s %s=%s missing", ex[k].name,
                     ex[k].lk1 ? ex[k].lk1 : "", ex[k].lv1 ? ex[k].lv1 : "",
                     ex[k].lk2 ? ex[k].lk2 : "", ex[k].lv2 ? ex[k].lv2 : "");
            return false;
        }
    }
    return true;
}

static void assert_histogram(const struct prom *p, const char *name)
{
    static const char *const les[] = {"0.005", "0.01", "0.025", "0.05", "0.1", "0.25",
                                      "0.5",   "1",    "2.5",   "5",    "10",  "+Inf"};
    char bucket[128], count[128], sum[128];
    snprintf(bucket, sizeof bucket, "%s_bucket", name);
    snprintf(count, sizeof count, "%s_count", name);
    snprintf(sum, sizeof sum, "%s_sum", name);
    double prev = 0;
    size_t n_buckets = 0;
    for (size_t i = 0; i < p->n; i++)
        n_buckets += strcmp(p->s[i].name, bucket) == 0;
    ck_assert_msg(n_buckets == 12, "%zu buckets, want the 12 of SPEC §7", n_buckets);
    for (size_t i = 0; i < 12; i++) {
        double v = prom_get(p, bucket, "le", les[i], NULL);
        ck_assert_msg(!isnan(v), "no bucket le=\"%s\"", les[i]);
        ck_assert_msg(v >= prev, "bucket le=%s (%g) below the one before (%g): not cumulative",
                      les[i], v, prev);
        prev = v;
    }
    double c = prom_get(p, count, NULL);
    ck_assert_msg(prev == c, "+Inf bucket %g != _count %g", prev, c);
    ck_assert(!isnan(prom_get(p, sum, NULL)));
}

START_TEST(test_metrics_exact_after_known_sequence)
{
    /* Confirms: 300 ms processing latency; a token bucket with 7 tokens that does not refill
     * within the test; a 500 before idempotency on the 3rd attempt of an identity. */
    fg_server *s = start_confirm(
        "{'latency':{'dist':'fixed','ms':300},"
        "'throttle':{'kind':'token_bucket','rate_per_s':0.001,'burst':7},"
        "'faults':[{'kind':'error','p':1,'attempts':[3],'status':500,"
        "'code':'FAILED_INTERNAL_SYSTEM_PROCESSING','when':'before'}]}");
    struct prom p;
    char why[400];
    metrics(s, &p, NULL);
    ck_assert_msg(counters_match(&p, NULL, 0, why, sizeof why), "fresh server: %s", why);
    assert_histogram(&p, "fakegate_injected_latency_seconds");
    prom_free(&p);

    fg_response r;
    confirm_fresh(s, "pk_m1", "ord_m1", 1000, "key-m1", 0, &r); /* token 1: ok */
    assert_status(&r, 200);
    fg_response_fini(&r);
    confirm_fresh(s, "pk_m1", "ord_m1", 1000, "key-m1", 0, &r); /* token 2: replayed */
    assert_status(&r, 200);
    fg_response_fini(&r);
    confirm_fresh(s, "pk_m2", "ord_m2", 2000, "key-m2", 0, &r); /* token 3: ok */
    assert_status(&r, 200);
    fg_response_fini(&r);

    struct mrun m; /* token 4: ok, held while token 5 gets a 409 */
    mrun_init(&m, s, 1);
    mrun_confirm(&m, 0, "pk_m4", "ord_m4", 4000, "key-m4", 10000);
    mrun_start(&m);
    ck_assert_uint_eq(wait_pending(s, "ord_m4", 1, 5000), 1);
    confirm_fresh(s, "pk_m4", "ord_m4", 4000, "key-m4", 0, &r);
    assert_error(&r, 409, "IDEMPOTENT_REQUEST_PROCESSING");
    fg_response_fini(&r);
    mrun_join(&m);
    ck_assert_msg(m.q[0].status == 200, "held confirm: %ld %s", m.q[0].status, m.q[0].errbuf);
    mrun_free(&m);

    char bad_auth[256];
    fg_basic_auth("live_sk_nope:", bad_auth, sizeof bad_auth);
    const char *h401[] = {bad_auth, "Idempotency-Key: key-m9", NULL};
    fg_request q401 = {.method = "POST", .path = CONFIRM_PATH, .headers = h401,
                       .body = "{\"paymentKey\":\"pk_m9\",\"orderId\":\"ord_m9\",\"amount\":1}"};
    fg_http(s, NULL, &q401, &r); /* no token: auth comes first */
    assert_error(&r, 401, "UNAUTHORIZED_KEY");
    fg_response_fini(&r);
    const char *h400[] = {s->auth_header, "Idempotency-Key: key-m5", NULL};
    fg_request q400 = {.method = "POST", .path = CONFIRM_PATH, .headers = h400,
                       .body = "{\"paymentKey\":\"pk_m5\",\"orderId\":\"ord_m5\",\"amount\":\"x\"}"};
    fg_http(s, NULL, &q400, &r); /* token 6: invalid */
    assert_error(&r, 400, "INVALID_REQUEST");
    fg_response_fini(&r);
    confirm_fresh(s, "pk_m1", "ord_m1", 1000, "key-m1", 0, &r); /* token 7: attempt 3, fault */
    assert_error(&r, 500, "FAILED_INTERNAL_SYSTEM_PROCESSING");
    fg_response_fini(&r);
    confirm_fresh(s, "pk_m6", "ord_m6", 1000, "key-m6", 0, &r); /* no token left */
    assert_error(&r, 503, "SERVICE_UNAVAILABLE");
    fg_response_fini(&r);
    confirm_fresh(s, "pk_m7", "ord_m7", 1000, "key-m7", 0, &r);
    assert_error(&r, 503, "SERVICE_UNAVAILABLE");
    fg_response_fini(&r);

    const struct expect ex[] = {
        {"fakegate_requests_total", "route", "confirm", "outcome", "ok", 3},
        {"fakegate_requests_total", "route", "confirm", "outcome", "replayed", 1},
        {"fakegate_requests_total", "route", "confirm", "outcome", "conflict", 1},
        {"fakegate_requests_total", "route", "confirm", "outcome", "unauthorized", 1},
        {"fakegate_requests_total", "route", "confirm", "outcome", "invalid", 1},
        {"fakegate_requests_total", "route", "confirm", "outcome", "fault_error", 1},
        {"fakegate_requests_total", "route", "confirm", "outcome", "throttled", 2},
        {"fakegate_idempotent_replays_total", NULL, NULL, NULL, NULL, 1},
        {"fakegate_idempotency_conflicts_total", NULL, NULL, NULL, NULL, 1},
        {"fakegate_idempotency_key_reuse_total", NULL, NULL, NULL, NULL, 0},
        {"fakegate_payments_total", "status", "IN_PROGRESS", NULL, NULL, 3},
        {"fakegate_payments_total", "status", "DONE", NULL, NULL, 3},
        {"fakegate_faults_total", "kind", "error", NULL, NULL, 1},
        {"fakegate_throttled_total", "route", "confirm", NULL, NULL, 2},
    };
    size_t n_ex = sizeof ex / sizeof ex[0];
    /* A request is counted when its response has ended on the server, a moment after the
     * client has it: poll (bounded) for the expected values. */
    char *text = NULL;
    bool ok = false;
    int64_t deadline = fg_now_ms() + 3000;
    for (;;) {
        free(text);
        metrics(s, &p, &text);
        ok = counters_match(&p, ex, n_ex, why, sizeof why);
        if (ok || fg_now_ms() > deadline)
            break;
        prom_free(&p);
        fg_pause_ms(10);
    }
    ck_assert_msg(ok, "%s\n%.5000s", why, text);
    free(text);
    assert_histogram(&p, "fakegate_injected_latency_seconds");
    double le025 = prom_get(&p, "fakegate_injected_latency_seconds_bucket", "le", "0.25", NULL);
    double le05 = prom_get(&p, "fakegate_injected_latency_seconds_bucket", "le", "0.5", NULL);
    ck_assert_msg(le05 - le025 >= 3, "the 3 confirms that waited 300 ms are not in (0.25, 0.5]: "
                  "%g, %g", le025, le05);
    ck_assert(prom_get(&p, "fakegate_injected_latency_seconds_sum", NULL) >= 0.9 - 1e-9);
    for (size_t i = 0; i < N_ROUTES; i++)
        ck_assert_msg(prom_get(&p, "fakegate_in_flight", "route", ROUTES[i], NULL) == 0,
                      "in flight{%s} at rest", ROUTES[i]);
    ck_assert_msg(prom_get(&p, "fakegate_in_flight_peak", "route", "confirm", NULL) == 2,
                  "peak %g, want 2 (the held confirm and its 409)",
                  prom_get(&p, "fakegate_in_flight_peak", "route", "confirm", NULL));
    double admin0 = prom_get(&p, "fakegate_admin_requests_total", NULL);
    ck_assert(admin0 > 0);
    prom_free(&p);

    /* Admin, health and metrics calls are not requests_total. */
    static const char *const paths[] = {"/healthz", "/__admin/health", "/__admin/profile",
                                        "/__admin/requests", "/__admin/report",
                                        "/__admin/payments", "/metrics"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        admin_call(s, "GET", paths[i], NULL, NULL, &r);
        assert_status(&r, 200);
        fg_response_fini(&r);
    }
    deadline = fg_now_ms() + 3000;
    double admin1;
    for (;;) {
        metrics(s, &p, NULL);
        admin1 = prom_get(&p, "fakegate_admin_requests_total", NULL);
        if (admin1 >= admin0 + 8 || fg_now_ms() > deadline)
            break;
        prom_free(&p);
        fg_pause_ms(10);
    }
    ck_assert_msg(admin1 >= admin0 + 8, "admin_requests_total %g -> %g after 8 admin calls",
                  admin0, admin1);
    ck_assert_msg(counters_match(&p, ex, n_ex, why, sizeof why), "after admin calls: %s", why);
    prom_free(&p);
    stop_server(s);
}
END_TEST

START_TEST(test_metrics_in_flight_peak_is_exact)
{
    fg_server *s = start_confirm("{'latency':{'dist':'fixed','ms':1500}}");
    enum { N = 7 };
    struct mrun m;
    mrun_init(&m, s, N);
    for (size_t i = 0; i < N; i++) {
        char pk[32], oid[32];
        snprintf(pk, sizeof pk, "pk_pk_%zu", i);
        snprintf(oid, sizeof oid, "ord_pk_%zu", i);
        mrun_confirm(&m, i, pk, oid, 1000, NULL, 10000);
    }
    mrun_start(&m);
    double v = wait_metric(s, "fakegate_in_flight", "route", "confirm", N, 5000);
    ck_assert_msg(v == N, "in flight %g, want %d", v, N);
    ck_assert_uint_eq(atomic_load(&m.n_done), 0);
    ck_assert(metric1(s, "fakegate_in_flight_peak", "route", "confirm") == N);
    ck_assert(metric1(s, "fakegate_in_flight", "route", "read") == 0);
    mrun_join(&m);
    for (size_t i = 0; i < N; i++)
        ck_assert_msg(m.q[i].status == 200, "%s: %ld %s", m.q[i].oid, m.q[i].status,
                      m.q[i].errbuf);
    ck_assert(wait_metric(s, "fakegate_in_flight", "route", "confirm", 0, 5000) == 0);
    ck_assert(metric1(s, "fakegate_in_flight_peak", "route", "confirm") == N);
    mrun_free(&m);
    stop_server(s);
}
END_TEST

START_TEST(test_metrics_text_is_prometheus)
{
    fg_server *s = start_confirm("{'latency':{'dist':'fixed','ms':0}}");
    fg_response r;
    confirm_fresh(s, "pk_pt", "ord_pt", 1000, "key-pt", 0, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    struct prom p;
    char *text;
    metrics(s, &p, &text);
    static const struct {
        const char *name, *type;
    } fams[] = {{"fakegate_requests_total", "counter"},
                {"fakegate_in_flight", "gauge"},
                {"fakegate_in_flight_peak", "gauge"},
                {"fakegate_payments_total", "counter"},
                {"fakegate_idempotent_replays_total", "counter"},
                {"fakegate_idempotency_conflicts_total", "counter"},
                {"fakegate_idempotency_key_reuse_total", "counter"},
                {"fakegate_faults_total", "counter"},
                {"fakegate_throttled_total", "counter"},
                {"fakegate_admin_requests_total", "counter"},
                {"fakegate_injected_latency_seconds", "histogram"}};
    for (size_t i = 0; i < sizeof fams / sizeof fams[0]; i++) {
        struct prom_family *f = prom_family_get(&p, fams[i].name);
        ck_assert_msg(f != NULL, "family %s missing:\n%s", fams[i].name, text);
        ck_assert_msg(strcmp(f->type, fams[i].type) == 0, "%s is a %s, want %s", fams[i].name,
                      f->type, fams[i].type);
    }
    /* Every (route, outcome) pair of SPEC §7 is exposed. */
    for (size_t ro = 0; ro < N_ROUTES; ro++)
        for (size_t o = 0; o < N_OUTCOMES; o++)
            ck_assert_msg(!isnan(prom_get(&p, "fakegate_requests_total", "route", ROUTES[ro],
                                          "outcome", OUTCOMES[o], NULL)),
                          "no fakegate_requests_total{route=\"%s\",outcome=\"%s\"}", ROUTES[ro],
                          OUTCOMES[o]);
    ck_assert(prom_get(&p, "fakegate_requests_total", "route", "confirm", "outcome", "ok", NULL) ==
              1);
    assert_histogram(&p, "fakegate_injected_latency_seconds");
    free(text);
    prom_free(&p);

    /* The parser itself rejects what it must. */
    char err[256];
    ck_assert(!prom_parse("# HELP a x\n# TYPE a counter\na 1", &p, err, sizeof err));
    prom_free(&p);
    ck_assert(!prom_parse("a 1\n# HELP a x\n# TYPE a counter\n", &p, err, sizeof err));
    prom_free(&p);
    ck_assert(!prom_parse("# HELP a x\n# HELP a y\n# TYPE a counter\na 1\n", &p, err, sizeof err));
    prom_free(&p);
    ck_assert(!prom_parse("# HELP a x\n# TYPE a counter\na{l=\"v} 1\n", &p, err, sizeof err));
    prom_free(&p);
    ck_assert(!prom_parse("# HELP a x\n# TYPE a counter\na{l=\"\\q\"} 1\n", &p, err, sizeof err));
    prom_free(&p);
    ck_assert(prom_parse("# HELP a x\n# TYPE a counter\na{l=\"\\\"\\n\\\\\"} 1\n", &p, err,
                         sizeof err));
    ck_assert_str_eq(p.s[0].lvalue[0], "\"\n\\");
    prom_free(&p);
    stop_server(s);
}
END_TEST

/* ---- 6. the journal ----------------------------------------------------------------------- */

static bool rfc3339_us(const char *s)
{
    /* 2024-02-13T03:17:57.123456Z, or with an offset +09:00 */
    static const char pat[] = "dddd-dd-ddTdd:dd:dd.dddddd";
    if (s == NULL || strlen(s) < sizeof pat)
        return false;
    for (size_t i = 0; i < sizeof pat - 1; i++)
        if (pat[i] == 'd' ? !isdigit((unsigned char)s[i]) : s[i] != pat[i])
            return false;
    const char *z = s + sizeof pat - 1;
    return strcmp(z, "Z") == 0 ||
           ((z[0] == '+' || z[0] == '-') && strlen(z) == 6 && isdigit((unsigned char)z[1]) &&
            isdigit((unsigned char)z[2]) && z[3] == ':' && isdigit((unsigned char)z[4]) &&
            isdigit((unsigned char)z[5]));
}

START_TEST(test_journal_held_request_and_limit)
{
    fg_server *s = start_confirm("{'latency':{'dist':'fixed','ms':800}}");
    struct mrun m;
    mrun_init(&m, s, 1);
    mrun_confirm(&m, 0, "pk_jr_1", "ord_jr_1", 4321, "key-jr-1", 10000);
    mrun_start(&m);
    ck_assert_uint_eq(wait_pending(s, "ord_jr_1", 1, 5000), 1);
    json_t *j = journal(s, 0);
    ck_assert_uint_eq(atomic_load(&m.n_done), 0);
    json_t *e = entry_for(j, "ord_jr_1");
    char *dump = json_dumps(e, JSON_COMPACT);
    ck_assert_msg(json_is_null(json_object_get(e, "status")), "%s", dump);
    ck_assert_msg(json_is_str(e, "delivered", "pending"), "%s", dump);
    ck_assert_msg(json_is_null(json_object_get(e, "outcome")), "%s", dump);
    ck_assert_msg(json_is_null(json_object_get(e, "duration_ms")), "%s", dump);
    ck_assert_msg(json_is_str(e, "method", "POST") && json_is_str(e, "path", CONFIRM_PATH) &&
                      json_is_str(e, "route", "confirm"),
                  "%s", dump);
    ck_assert_msg(json_is_str(e, "payment_key", "pk_jr_1") &&
                      json_is_str(e, "idempotency_key", "key-jr-1"),
                  "%s", dump);
    ck_assert_msg(json_integer_value(json_object_get(e, "attempt")) == 1, "%s", dump);
    ck_assert_msg(json_integer_value(json_object_get(e, "id")) >= 1, "%s", dump);
    ck_assert_msg(rfc3339_us(fg_json_str(e, "arrived_at")), "arrived_at: %s", dump);
    json_t *d = json_object_get(e, "decision");
    ck_assert_msg(json_is_object(d) && jnum(d, "latency_ms") == 800 &&
                      jnum(d, "queue_latency_ms") == 0 && json_is_str(d, "fault", "none"),
                  "decision: %s", dump);
    free(dump);
    json_decref(j);

    mrun_join(&m);
    ck_assert_int_eq(m.q[0].status, 200);
    /* The entry is completed when the response has ended on the server. */
    int64_t deadline = fg_now_ms() + 3000;
    for (;;) {
        j = journal(s, 0);
        e = entry_for(j, "ord_jr_1");
        if (!json_is_null(json_object_get(e, "status")) || fg_now_ms() > deadline)
            break;
        json_decref(j);
        fg_pause_ms(5);
    }
    dump = json_dumps(e, JSON_COMPACT);
    ck_assert_msg(json_integer_value(json_object_get(e, "status")) == 200, "%s", dump);
    ck_assert_msg(json_is_str(e, "delivered", "yes"), "%s", dump);
    ck_assert_msg(json_is_str(e, "outcome", "ok"), "%s", dump);
    ck_assert_msg(jnum(e, "duration_ms") >= 800, "%s", dump);
    free(dump);
    json_decref(j);
    mrun_free(&m);

    /* ?limit=2: the 2 newest, oldest first. */
    for (int i = 0; i < 3; i++) {
        char path[64];
        snprintf(path, sizeof path, "/v1/payments/orders/ord_lim_%d", i);
        fg_response r;
        fg_get(s, path, &r);
        assert_status(&r, 404);
        fg_response_fini(&r);
    }
    json_t *all = journal(s, 0);
    json_t *two = journal(s, 2);
    ck_assert_int_eq((int)json_array_size(all), 4);
    ck_assert_int_eq((int)json_array_size(two), 2);
    ck_assert(json_is_str(json_array_get(two, 0), "order_id", "ord_lim_1"));
    ck_assert(json_is_str(json_array_get(two, 1), "order_id", "ord_lim_2"));
    ck_assert(json_equal(json_array_get(two, 0), json_array_get(all, 2)));
    ck_assert(json_equal(json_array_get(two, 1), json_array_get(all, 3)));
    ck_assert(json_integer_value(json_object_get(json_array_get(two, 0), "id")) <
              json_integer_value(json_object_get(json_array_get(two, 1), "id")));
    json_decref(all);
    json_decref(two);

    /* A lost response: delivered "no", outcome "dropped_response". */
    char *drop = dq("{'name':'drop','routes':{'confirm':{'faults':[{'kind':'drop_response','p':1,"
                    "'how':'close'}]},'default':{'latency':{'dist':'fixed','ms':0}}}}");
    fg_response r;
    put_profile(s, drop, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    free(drop);
    confirm_fresh(s, "pk_jr_drop", "ord_jr_drop", 1000, "key-jr-drop", 0, &r);
    ck_assert_msg(r.curl_code == CURLE_GOT_NOTHING, "curl %d %s status %ld", (int)r.curl_code,
                  r.curl_error, r.status);
    fg_response_fini(&r);
    deadline = fg_now_ms() + 3000;
    for (;;) {
        j = journal(s, 0);
        e = entry_for(j, "ord_jr_drop");
        if (!json_is_str(e, "delivered", "pending") || fg_now_ms() > deadline)
            break;
        json_decref(j);
        fg_pause_ms(5);
    }
    dump = json_dumps(e, JSON_COMPACT);
    ck_assert_msg(json_is_str(e, "delivered", "no"), "%s", dump);
    ck_assert_msg(json_is_str(e, "outcome", "dropped_response"), "%s", dump);
    ck_assert_msg(json_is_str(json_object_get(e, "decision"), "fault", "drop_response"), "%s",
                  dump);
    free(dump);
    json_decref(j);

    admin_call(s, "GET", "/__admin/requests?limit=0", NULL, NULL, &r);
    assert_status(&r, 400);
    fg_response_fini(&r);
    stop_server(s);
}
END_TEST

/* ---- 7. --admin-token --------------------------------------------------------------------- */

START_TEST(test_admin_token)
{
    const char *args[] = {"--admin-token", "s3cr3t-T", NULL};
    fg_server *s = start_args(NULL, args);
    fg_response r;
    static const char *const guarded[][2] = {
        {"GET", "/__admin/profile"},  {"PUT", "/__admin/profile"}, {"POST", "/__admin/reset"},
        {"GET", "/__admin/requests"}, {"GET", "/__admin/report"},  {"GET", "/__admin/payments"}};
    const char *bad[] = {NULL, "Authorization: Bearer wrong", "Authorization: Bearer s3cr3t-",
                         "Authorization: Basic czNjcjN0LVQ6", "Authorization: bearer s3cr3t-T",
                         s->auth_header};
    for (size_t i = 0; i < sizeof guarded / sizeof guarded[0]; i++)
        for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
            const char *body = strcmp(guarded[i][0], "PUT") == 0 ? "{\"name\":\"normal\"}" : NULL;
            admin_call(s, guarded[i][0], guarded[i][1], body, bad[b], &r);
            ck_assert_msg(r.status == 401 && fg_error_code(&r) != NULL &&
                              strcmp(fg_error_code(&r), "UNAUTHORIZED") == 0,
                          "%s %s with %s: %ld %.300s", guarded[i][0], guarded[i][1],
                          bad[b] ? bad[b] : "no Authorization", r.status, r.body);
            fg_response_fini(&r);
        }
    admin_call(s, "GET", "/__admin/profile", NULL, "Authorization: Bearer s3cr3t-T", &r);
    assert_status(&r, 200);
    ck_assert(json_is_str(r.json, "name", "instant"));
    fg_response_fini(&r);
    admin_call(s, "GET", "/__admin/requests", NULL, "Authorization: Bearer s3cr3t-T", &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    static const char *const open_paths[] = {"/__admin/health", "/healthz", "/metrics"};
    for (size_t i = 0; i < 3; i++) {
        admin_call(s, "GET", open_paths[i], NULL, NULL, &r);
        assert_status(&r, 200);
        fg_response_fini(&r);
    }
    admin_call(s, "GET", "/__admin/health", NULL, NULL, &r);
    ck_assert(json_is_str(r.json, "status", "ok"));
    fg_response_fini(&r);
    /* The token does not guard /v1: a confirm works with its Basic key alone. */
    confirm_fresh(s, "pk_tok", "ord_tok", 1000, NULL, 0, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    stop_server(s);
}
END_TEST

/* ---- 8. the report ------------------------------------------------------------------------ */

/* GET /__admin/report; a new reference to its "findings" array. */
static json_t *findings(const fg_server *s)
{
    json_t *root = admin_json(s, "/__admin/report");
    json_t *f = json_object_get(root, "findings");
    ck_assert_msg(json_is_array(f), "/__admin/report has no findings array");
    json_incref(f);
    json_decref(root);
    return f;
}

/* Wait until no journal entry is pending (the report judges ended requests). */
static void wait_journal_settled(const fg_server *s)
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

/* The report has exactly the kinds in `kinds` (NULL-ended); the finding `kind` has count >= 1,
 * a rule and a threshold, and one of `examples` (NULL-ended) among its examples. */
static void assert_report(const fg_server *s, const char *const *kinds, const char *kind,
                          const char *const *examples)
{
    wait_journal_settled(s);
    json_t *f = findings(s);
    char *ftext = json_dumps(f, JSON_COMPACT);
    char *jtext = journal_text(s);
    size_t n_kinds = 0;
    while (kinds[n_kinds] != NULL)
        n_kinds++;
    bool ok = json_array_size(f) == n_kinds;
    for (size_t k = 0; k < n_kinds && ok; k++) {
        bool found = false;
        size_t i;
        json_t *x;
        json_array_foreach(f, i, x) found = found || json_is_str(x, "kind", kinds[k]);
        ok = found;
    }
    ck_assert_msg(ok, "report: want kinds {%s%s%s%s%s}, got %s\njournal: %.6000s", kinds[0],
                  n_kinds > 1 ? ", " : "", n_kinds > 1 ? kinds[1] : "", n_kinds > 2 ? ", " : "",
                  n_kinds > 2 ? kinds[2] : "", ftext, jtext);
    size_t i;
    json_t *x, *fd = NULL;
    json_array_foreach(f, i, x) if (json_is_str(x, "kind", kind)) fd = x;
    ck_assert(fd != NULL);
    ck_assert_msg(json_integer_value(json_object_get(fd, "count")) >= 1, "%s", ftext);
    ck_assert_msg(fg_json_str(fd, "rule") != NULL && fg_json_str(fd, "rule")[0] != '\0' &&
                      json_object_get(fd, "threshold") != NULL,
                  "finding without rule/threshold: %s", ftext);
    json_t *ex = json_object_get(fd, "examples");
    ck_assert_msg(json_is_array(ex) && json_array_size(ex) >= 1 && json_array_size(ex) <= 10,
                  "%s", ftext);
    bool hit = false;
    for (size_t k = 0; examples[k] != NULL; k++) {
        json_t *v;
        size_t a;
        json_array_foreach(ex, a, v) hit = hit || strcmp(json_string_value(v), examples[k]) == 0;
    }
    ck_assert_msg(hit, "%s: examples lack %s: %s\njournal: %.6000s", kind, examples[0], ftext,
                  jtext);
    free(ftext);
    free(jtext);
    json_decref(f);
}

static void assert_no_findings(const fg_server *s)
{
    wait_journal_settled(s);
    json_t *f = findings(s);
    char *ftext = json_dumps(f, JSON_COMPACT);
    char *jtext = journal_text(s);
    ck_assert_msg(json_array_size(f) == 0, "well-behaved client got findings %s\njournal: %.8000s",
                  ftext, jtext);
    free(ftext);
    free(jtext);
    json_decref(f);
}

START_TEST(test_report_retried_4xx)
{
    fg_server *s = start_confirm("{'latency':{'dist':'fixed','ms':0}}");
    fg_response r;
    confirm_fresh(s, "pk_r4", "ord_r4_aaa", 1000, NULL, 0, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    for (int i = 0; i < 2; i++) { /* the same body again, and again after its 400 */
        confirm_fresh(s, "pk_r4", "ord_r4_aaa", 1000, NULL, 0, &r);
        assert_error(&r, 400, "ALREADY_PROCESSED_PAYMENT");
        fg_response_fini(&r);
    }
    /* A corrected body after a 400 is not a retry. */
    const char *h[] = {s->auth_header, "Idempotency-Key: key-r4-fix", NULL};
    fg_request bad = {.method = "POST", .path = CONFIRM_PATH, .headers = h,
                      .body = "{\"paymentKey\":\"pk_r4_fix\",\"orderId\":\"ord_r4_fix\",\"amount\":\"x\"}"};
    fg_http(s, NULL, &bad, &r);
    assert_error(&r, 400, "INVALID_REQUEST");
    fg_response_fini(&r);
    confirm_fresh(s, "pk_r4_fix", "ord_r4_fix", 1000, "key-r4-fix", 0, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);

    const char *kinds[] = {"retried_4xx", NULL};
    const char *ex[] = {"ord_r4_aaa", NULL};
    assert_report(s, kinds, "retried_4xx", ex);
    stop_server(s);
}
END_TEST

START_TEST(test_report_retried_4xx_keyed)
{
    /* The same with an Idempotency-Key: a second key for a DONE payment gets a stored 400, and
     * the client resends it as is (also a new-key resend of a committed payment). */
    fg_server *s = start_confirm("{'latency':{'dist':'fixed','ms':0}}");
    fg_response r;
    confirm_fresh(s, "pk_r4k", "ord_r4_kkk", 1000, "key-r4k-1", 0, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    for (int i = 0; i < 2; i++) {
        confirm_fresh(s, "pk_r4k", "ord_r4_kkk", 1000, "key-r4k-2", 0, &r);
        assert_error(&r, 400, "ALREADY_PROCESSED_PAYMENT");
        fg_response_fini(&r);
    }
    const char *kinds[] = {"retried_4xx", "new_key_resend", NULL};
    const char *ex[] = {"ord_r4_kkk", NULL};
    assert_report(s, kinds, "retried_4xx", ex);
    stop_server(s);
}
END_TEST

START_TEST(test_report_early_retry)
{
    /* Brief's shape: a bucket of 1 token refilled at 1/s, Retry-After: 1; the throttled confirm
     * is resent 200 ms later with the same key (and is throttled again: fakegate never read its
     * body, so the example may be the identity, its Idempotency-Key). */
    fg_server *s = start_confirm(
        "{'throttle':{'kind':'token_bucket','rate_per_s':1,'burst':1,"
        "'retry_after':{'format':'seconds','value':1}}}");
    fg_response r;
    confirm_fresh(s, "pk_er_a", "ord_er_a", 1000, "key-er-a", 0, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    confirm_fresh(s, "pk_er_b", "ord_er_b", 1000, "key-er-b", 0, &r);
    assert_error(&r, 503, "SERVICE_UNAVAILABLE");
    ck_assert_str_eq(r.retry_after, "1");
    fg_response_fini(&r);
    fg_pause_ms(200); /* deliberate: the early retry is the behaviour under test */
    confirm_fresh(s, "pk_er_b", "ord_er_b", 1000, "key-er-b", 0, &r);
    ck_assert_msg(r.status == 503, "the early retry was admitted: %ld", r.status);
    fg_response_fini(&r);
    const char *kinds[] = {"early_retry", NULL};
    const char *ex[] = {"ord_er_b", "key-er-b", NULL};
    assert_report(s, kinds, "early_retry", ex);
    stop_server(s);

    /* A bucket that refills in 250 ms but announces 1 s: the early retry is admitted, so its
     * orderId is known and must be the example. */
    s = start_confirm("{'throttle':{'kind':'token_bucket','rate_per_s':4,'burst':1,"
                      "'retry_after':{'format':'seconds','value':1}}}");
    confirm_fresh(s, "pk_er_c", "ord_er_c", 1000, "key-er-c", 0, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    confirm_fresh(s, "pk_er_d", "ord_er_d", 1000, "key-er-d", 0, &r);
    assert_error(&r, 503, "SERVICE_UNAVAILABLE");
    fg_response_fini(&r);
    fg_pause_ms(300); /* deliberate: a token is back, the announced second is not over */
    confirm_fresh(s, "pk_er_d", "ord_er_d", 1000, "key-er-d", 0, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    const char *ex2[] = {"ord_er_d", NULL};
    assert_report(s, kinds, "early_retry", ex2);
    stop_server(s);
}
END_TEST

START_TEST(test_report_new_key_resend)
{
    fg_server *s = start_confirm(
        "{'faults':[{'kind':'drop_response','p':1,'times':1,'how':'close'}]}");
    fg_response r;
    confirm_fresh(s, "pk_nk", "ord_nk_lost", 1000, "key-nk-1", 0, &r);
    ck_assert_msg(r.curl_code == CURLE_GOT_NOTHING, "curl %d status %ld", (int)r.curl_code,
                  r.status);
    fg_response_fini(&r);
    confirm_fresh(s, "pk_nk", "ord_nk_lost", 1000, "key-nk-2", 0, &r); /* the double-charge risk */
    assert_error(&r, 400, "ALREADY_PROCESSED_PAYMENT");
    fg_response_fini(&r);
    const char *kinds[] = {"new_key_resend", NULL};
    const char *ex[] = {"ord_nk_lost", NULL};
    assert_report(s, kinds, "new_key_resend", ex);
    stop_server(s);
}
END_TEST

START_TEST(test_report_key_reuse)
{
    fg_server *s = start_confirm("{'latency':{'dist':'fixed','ms':0}}");
    fg_response r;
    confirm_fresh(s, "pk_ku_1", "ord_ku_one", 1000, "key-ku-shared", 0, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    confirm_fresh(s, "pk_ku_2", "ord_ku_two", 2000, "key-ku-shared", 0, &r);
    assert_status(&r, 200); /* replayed, as Toss does */
    ck_assert_str_eq(fg_json_str(r.json, "orderId"), "ord_ku_one");
    fg_response_fini(&r);
    const char *kinds[] = {"key_reuse", NULL};
    const char *ex[] = {"ord_ku_two", "ord_ku_one", NULL};
    assert_report(s, kinds, "key_reuse", ex);
    ck_assert(metric1(s, "fakegate_idempotency_key_reuse_total", NULL, NULL) == 1);
    stop_server(s);
}
END_TEST

START_TEST(test_report_synchronized_retries)
{
    fg_server *s = start_confirm(
        "{'throttle':{'kind':'window','period_s':2.5,'throttled_s':1.5}}");
    enum { N = 20 };
    fg_response r;
    admin_call(s, "POST", "/__admin/reset", NULL, NULL, &r); /* the window starts now */
    assert_status(&r, 200);
    fg_response_fini(&r);
    struct mrun m;
    mrun_init(&m, s, N);
    for (size_t i = 0; i < N; i++) {
        char pk[32], oid[32], key[32];
        snprintf(pk, sizeof pk, "pk_sy_%02zu", i);
        snprintf(oid, sizeof oid, "ord_sy_%02zu", i);
        snprintf(key, sizeof key, "key-sy-%02zu", i);
        mrun_confirm(&m, i, pk, oid, 1000, key, 10000);
    }
    mrun_perform(&m);
    int64_t last_ns = 0;
    long ra = 0;
    for (size_t i = 0; i < N; i++) {
        ck_assert_msg(m.q[i].status == 503, "%s: %ld %s", m.q[i].oid, m.q[i].status,
                      m.q[i].errbuf);
        ck_assert_msg(m.q[i].retry_after[0] != '\0', "%s: no Retry-After", m.q[i].oid);
        long v = strtol(m.q[i].retry_after, NULL, 10);
        ra = v > ra ? v : ra;
        last_ns = m.q[i].done_ns > last_ns ? m.q[i].done_ns : last_ns;
    }
    ck_assert_msg(ra >= 1 && ra <= 2, "Retry-After %ld", ra);
    /* Deliberate: the client waits exactly what it was told, then everybody resends at once. */
    int64_t wake = last_ns + ra * 1000 * MS + 5 * MS;
    while (fg_now_ns() < wake)
        fg_pause_ms(1);
    struct mrun m2;
    mrun_init(&m2, s, N);
    for (size_t i = 0; i < N; i++)
        mrun_confirm(&m2, i, m.q[i].pk, m.q[i].oid, 1000, m.q[i].key, 10000);
    mrun_perform(&m2);
    for (size_t i = 0; i < N; i++)
        ck_assert_msg(m2.q[i].status == 200, "%s resent when told: %ld %.200s", m2.q[i].oid,
                      m2.q[i].status, m2.q[i].out ? m2.q[i].out : "");
    /* The journal shows the resends bunched (print the spread for information). */
    json_t *j = journal(s, 0);
    double lo = 1e300, hi = 0;
    size_t i;
    json_t *e;
    json_array_foreach(j, i, e) {
        if (json_integer_value(json_object_get(e, "status")) != 200)
            continue;
        const char *at = fg_json_str(e, "arrived_at");
        double sec = atof(at + 17); /* seconds with the fraction; same minute in practice */
        lo = sec < lo ? sec : lo;
        hi = sec > hi ? sec : hi;
    }
    printf("check_admin: %d resends arrived within %.3f ms\n", N, (hi - lo) * 1000);
    json_decref(j);
    const char *kinds[] = {"synchronized_retries", NULL};
    const char *ex[N + 1];
    for (size_t k = 0; k < N; k++)
        ex[k] = m.q[k].oid;
    ex[N] = NULL;
    assert_report(s, kinds, "synchronized_retries", ex);
    mrun_free(&m);
    mrun_free(&m2);
    stop_server(s);
}
END_TEST

START_TEST(test_report_retry_storm)
{
    fg_server *s = start_confirm("{'faults':[{'kind':'error','p':1,'status':503,"
                                 "'code':'SERVICE_UNAVAILABLE','when':'before'}]}");
    fg_response r;
    for (int i = 0; i < 5; i++) {
        confirm_fresh(s, "pk_st", "ord_storm", 1000, "key-storm", 0, &r);
        assert_error(&r, 503, "SERVICE_UNAVAILABLE");
        fg_response_fini(&r);
    }
    const char *kinds[] = {"retry_storm", NULL};
    const char *ex[] = {"ord_storm", NULL};
    assert_report(s, kinds, "retry_storm", ex);
    stop_server(s);
}
END_TEST

/* A client that does everything right: one key per payment, resends under the same key,
 * waits the Retry-After plus jitter with exponential backoff, never resends a 4xx. */
struct good_client {
    const fg_server *s;
    int index;
    pthread_t t;
    int attempts;
    long final_status;
    char oid[32];
};

static void *good_client_main(void *arg)
{
    struct good_client *c = arg;
    char pk[32], key[48];
    snprintf(pk, sizeof pk, "pk_good_%d", c->index);
    snprintf(c->oid, sizeof c->oid, "ord_good_%d", c->index);
    snprintf(key, sizeof key, "key-good-%d-%08x", c->index, (unsigned)c->index * 2654435761u);
    unsigned seed = (unsigned)c->index * 7919u + 17u;
    long backoff_ms = 100;
    for (c->attempts = 1; c->attempts <= 6; c->attempts++) {
        fg_response r;
        confirm_fresh(c->s, pk, c->oid, 1000 + c->index, key, 0, &r);
        long status = r.curl_code == CURLE_OK ? r.status : 0;
        long ra = r.retry_after[0] != '\0' ? strtol(r.retry_after, NULL, 10) : 0;
        fg_response_fini(&r);
        c->final_status = status;
        if (status != 0 && status < 500 && status != 429)
            break; /* done, or a 4xx: never resend it */
        /* Deliberate: backoff is the behaviour. Jitter spreads the clients by >= 100 ms. */
        long wait = backoff_ms > ra * 1000 ? backoff_ms : ra * 1000;
        wait += 60 + 110L * c->index + (long)(rand_r(&seed) % 40);
        fg_pause_ms(wait);
        backoff_ms *= 2;
    }
    return NULL;
}

/* Only an answer the client got can be resent "after": a client that timed out never saw the
 * 503 or its Retry-After, so its resend under the same key is not an early retry. */
START_TEST(test_report_ignores_answers_the_client_never_got)
{
    fg_server *s = start_confirm("{'latency':{'dist':'fixed','ms':0}}");
    fg_response r;
    confirm_with(s, "pk_ud", "ord_ud", 1000, "key-ud",
                 "X-Fakegate-Fault: error; status=503; code=SERVICE_UNAVAILABLE; retry_after=5; "
                 "commit=false\r\nX-Fakegate-Latency-Ms: 600",
                 200, &r);
    ck_assert_msg(r.status == 0, "the client should have timed out, got %ld", r.status);
    fg_response_fini(&r);
    ck_assert_double_eq(wait_metric(s, "fakegate_in_flight", "route", "confirm", 0, 5000), 0);
    confirm_fresh(s, "pk_ud", "ord_ud", 1000, "key-ud", 0, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    assert_no_findings(s);
    stop_server(s);
}
END_TEST

/* A decline forced with TossPayments-Test-Code (the usual way a test makes a card decline) is
 * answered before the request is planned; sending the same request again after it is still a
 * retried 4xx. */
START_TEST(test_report_retried_4xx_after_a_test_code_decline)
{
    fg_server *s = start_confirm("{'latency':{'dist':'fixed','ms':0}}");
    for (int i = 0; i < 2; i++) {
        fg_response r;
        confirm_with(s, "pk_tc", "ord_tc", 1000, "key-tc", "TossPayments-Test-Code: REJECT_CARD_PAYMENT",
                     0, &r);
        assert_error(&r, 403, "REJECT_CARD_PAYMENT");
        fg_response_fini(&r);
    }
    const char *kinds[] = {"retried_4xx", NULL};
    const char *ex[] = {"ord_tc", NULL};
    assert_report(s, kinds, "retried_4xx", ex);
    stop_server(s);
}
END_TEST

/* new_key_resend looks at what committed, not at the answer: an error fault with commit true
 * hides a commit (flagged when a new key follows), and the replay of a stored 4xx is no commit
 * (not flagged: the old key can only replay the 400, so a new key is the way on). */
START_TEST(test_report_new_key_resend_follows_commits_not_answers)
{
    fg_server *s = start_confirm("{'latency':{'dist':'fixed','ms':0}}");
    fg_response r;
    confirm_with(s, "pk_ct", "ord_ct", 1000, "key-ct-1",
                 "X-Fakegate-Fault: error; status=500; code=FAILED_INTERNAL_SYSTEM_PROCESSING; "
                 "commit=true",
                 0, &r);
    assert_error(&r, 500, "FAILED_INTERNAL_SYSTEM_PROCESSING");
    fg_response_fini(&r);
    confirm_fresh(s, "pk_ct", "ord_ct", 1000, "key-ct-2", 0, &r);
    assert_error(&r, 400, "ALREADY_PROCESSED_PAYMENT");
    fg_response_fini(&r);
    const char *kinds[] = {"new_key_resend", NULL};
    const char *ex[] = {"ord_ct", NULL};
    assert_report(s, kinds, "new_key_resend", ex);

    reset_now(s);
    /* A wrong amount for a registered session: 400, stored; its replay; then the fix under a
     * new key. */
    fg_request reg = {.method = "POST", .path = "/__admin/sessions",
                      .body = "{\"orderId\":\"ord_rp\",\"amount\":1000,\"paymentKey\":\"pk_rp\"}"};
    fg_http(s, NULL, &reg, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    for (int i = 0; i < 2; i++) {
        confirm_fresh(s, "pk_rp", "ord_rp", 999, "key-rp-1", 0, &r);
        assert_error(&r, 400, "INVALID_REQUEST");
        fg_response_fini(&r);
    }
    confirm_fresh(s, "pk_rp", "ord_rp", 1000, "key-rp-2", 0, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    const char *kinds2[] = {"retried_4xx", NULL}; /* the same 400 resent: that, and only that */
    const char *ex2[] = {"ord_rp", NULL};
    assert_report(s, kinds2, "retried_4xx", ex2);
    stop_server(s);
}
END_TEST

/* SPEC §5: "the same orderId/paymentKey": a committed paymentKey confirmed again under a new
 * key with another orderId is the same double-charge risk. */
START_TEST(test_report_new_key_resend_by_payment_key)
{
    fg_server *s = start_confirm("{'latency':{'dist':'fixed','ms':0}}");
    fg_response r;
    confirm_fresh(s, "pk_sk", "ord_sk_1", 1000, "key-sk-1", 0, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    confirm_fresh(s, "pk_sk", "ord_sk_2", 1000, "key-sk-2", 0, &r);
    ck_assert_int_eq(r.status, 400);
    fg_response_fini(&r);
    const char *kinds[] = {"new_key_resend", NULL};
    const char *ex[] = {"ord_sk_2", NULL};
    assert_report(s, kinds, "new_key_resend", ex);
    stop_server(s);
}
END_TEST

/* A Retry-After given as an HTTP-date counts as much as one in seconds. */
START_TEST(test_report_early_retry_with_an_http_date)
{
    fg_server *s = start_confirm("{'latency':{'dist':'fixed','ms':0}}");
    fg_response r;
    confirm_with(s, "pk_hd", "ord_hd", 1000, "key-hd",
                 "X-Fakegate-Fault: error; status=429; code=COMMON_ERROR; retry_after=http-date; "
                 "when=before",
                 0, &r);
    ck_assert_int_eq(r.status, 429);
    ck_assert_msg(strstr(r.retry_after, " GMT") != NULL, "Retry-After \"%s\"", r.retry_after);
    fg_response_fini(&r);
    confirm_fresh(s, "pk_hd", "ord_hd", 1000, "key-hd", 0, &r); /* at once: before that date */
    assert_status(&r, 200);
    fg_response_fini(&r);
    const char *kinds[] = {"early_retry", NULL};
    const char *ex[] = {"ord_hd", NULL};
    assert_report(s, kinds, "early_retry", ex);
    stop_server(s);
}
END_TEST

START_TEST(test_report_well_behaved_client_has_no_findings)
{
    /* Every first attempt gets 503 with Retry-After: 1. */
    fg_server *s = start_confirm(
        "{'latency':{'dist':'fixed','ms':20},'faults':[{'kind':'error','p':1,'attempts':[1],"
        "'status':503,'code':'SERVICE_UNAVAILABLE','when':'before',"
        "'retry_after':{'format':'seconds','value':1}}]}");
    enum { N = 4 };
    struct good_client c[N];
    for (int i = 0; i < N; i++) {
        c[i] = (struct good_client){.s = s, .index = i};
        ck_assert_int_eq(pthread_create(&c[i].t, NULL, good_client_main, &c[i]), 0);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(c[i].t, NULL);
        ck_assert_msg(c[i].final_status == 200 && c[i].attempts == 2,
                      "%s: status %ld after %d attempts", c[i].oid, c[i].final_status,
                      c[i].attempts);
    }
    /* A lost answer, resent under the same key after a backoff: the replay is the 200. */
    char *lossy = dq("{'name':'lossy1','routes':{'confirm':{'faults':[{'kind':'drop_response',"
                     "'p':1,'times':1,'how':'close'}]},'default':{'latency':{'dist':'fixed','ms':0}}}}");
    fg_response r;
    put_profile(s, lossy, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    free(lossy);
    confirm_fresh(s, "pk_good_lost", "ord_good_lost", 5000, "key-good-lost", 0, &r);
    ck_assert_int_eq(r.curl_code, CURLE_GOT_NOTHING);
    fg_response_fini(&r);
    fg_pause_ms(150); /* deliberate: backoff */
    confirm_fresh(s, "pk_good_lost", "ord_good_lost", 5000, "key-good-lost", 0, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    /* A 4xx is not resent as is: the client fixes the body and sends it under the same key. */
    const char *h[] = {s->auth_header, "Idempotency-Key: key-good-fix", NULL};
    fg_request bad = {.method = "POST", .path = CONFIRM_PATH, .headers = h,
                      .body = "{\"paymentKey\":\"pk_good_fix\",\"orderId\":\"bad\",\"amount\":700}"};
    fg_http(s, NULL, &bad, &r);
    assert_error(&r, 400, "INVALID_ORDER_ID");
    fg_response_fini(&r);
    confirm_fresh(s, "pk_good_fix", "ord_good_fix", 700, "key-good-fix", 0, &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    assert_no_findings(s);
    stop_server(s);
}
END_TEST

Suite *make_suite(void)
{
    Suite *su = suite_create("blackbox_admin");

    TCase *tc = add_tcase(su, "switch", 60);
    tcase_add_test(tc, test_switch_slow_to_fast_while_50_held);
    tcase_add_test(tc, test_switch_with_1000_held);

    tc = add_tcase(su, "profile_and_reset", 30);
    tcase_add_test(tc, test_put_profile_validation);
    tcase_add_test(tc, test_reset_empties_everything);
    tcase_add_test(tc, test_reset_three_times_in_a_row_keeps_serving);
    tcase_add_test(tc, test_request_spanning_reset_leaves_new_journal_alone);
    tcase_add_test(tc, test_confirm_held_across_reset_leaves_the_new_ledger_alone);
    tcase_add_test(tc, test_cancel_held_across_reset_leaves_the_new_payment_alone);
    tcase_add_test(tc, test_confirm_queued_across_reset_charges_nothing);
    tcase_add_test(tc, test_confirm_whose_body_comes_after_a_reset_counts_no_attempt);

    tc = add_tcase(su, "metrics", 30);
    tcase_add_test(tc, test_metrics_text_is_prometheus);
    tcase_add_test(tc, test_metrics_exact_after_known_sequence);
    tcase_add_test(tc, test_metrics_in_flight_peak_is_exact);

    tc = add_tcase(su, "journal_and_token", 30);
    tcase_add_test(tc, test_journal_held_request_and_limit);
    tcase_add_test(tc, test_admin_token);

    tc = add_tcase(su, "report", 30);
    tcase_add_test(tc, test_report_retried_4xx);
    tcase_add_test(tc, test_report_retried_4xx_keyed);
    tcase_add_test(tc, test_report_early_retry);
    tcase_add_test(tc, test_report_new_key_resend);
    tcase_add_test(tc, test_report_key_reuse);
    tcase_add_test(tc, test_report_synchronized_retries);
    tcase_add_test(tc, test_report_retry_storm);
    tcase_add_test(tc, test_report_well_behaved_client_has_no_findings);
    tcase_add_test(tc, test_report_ignores_answers_the_client_never_got);
    tcase_add_test(tc, test_report_retried_4xx_after_a_test_code_decline);
    tcase_add_test(tc, test_report_new_key_resend_follows_commits_not_answers);
    tcase_add_test(tc, test_report_early_retry_with_an_http_date);
    tcase_add_test(tc, test_report_new_key_resend_by_payment_key);
    return su;
}
