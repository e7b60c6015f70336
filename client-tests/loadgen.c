/* loadgen.c -- open-loop load over curl multi with the reference retry policy (see loadgen.h). */
#define _POSIX_C_SOURCE 200809L
#include "loadgen.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>
#include <jansson.h>

enum req_state { RS_PENDING = 0, RS_ACTIVE, RS_SUCCESS, RS_FAILED, RS_UNKNOWN };

typedef struct lreq {
    int64_t arrival_ns;        /* planned arrival (real) */
    int64_t end_ns;            /* end of the last attempt that reached the gateway */
    int attempts;              /* attempts that left the client */
    int retries_started;
    double prev_delay_ms;
    enum req_state state;
    bool got_5xx;
    bool reached;              /* at least one attempt left the client */
    rc_outcome last;           /* last gateway outcome (code not kept) */
    size_t phase;
} lreq;

typedef struct call {
    size_t req;
    int attempt;
    bool probe;
    bool has_slot;
    CURL *h;
    struct curl_slist *headers;
    char body[1024];
    size_t body_len;
    char retry_after[64];
    int64_t sent_ns;
} call;

typedef struct timer {
    int64_t due_ns;
    size_t req;
} timer;

typedef struct run {
    const lg_config *cfg;
    const lg_policy *pol;
    double scale;
    int64_t t0;
    CURLM *m;
    lreq *reqs;
    size_t n;
    rc_sem sem;
    rc_breaker *brk;
    rc_rng rng;
    timer *heap;
    size_t heap_len, heap_cap;
    long in_flight;
    lg_result *res;
} run;

int64_t lg_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

double lg_failure_rate(const lg_result *r)
{
    return r->requests > 0 ? (double)r->failed / (double)r->requests : 0;
}

static int64_t model_ms_to_ns(const run *R, double ms)
{
    return (int64_t)llround(ms * R->scale * 1e6);
}

static double model_now_ms(const run *R, int64_t now_ns)
{
    return (double)(now_ns - R->t0) / 1e6 / R->scale;
}

/* ---- timer heap ------------------------------------------------------------------------------ */

static int heap_push(run *R, int64_t due, size_t req)
{
    if (R->heap_len == R->heap_cap) {
        size_t cap = R->heap_cap ? R->heap_cap * 2 : 256;
        timer *h = realloc(R->heap, cap * sizeof *h);
        if (!h)
            return -1;
        R->heap = h;
        R->heap_cap = cap;
    }
    size_t i = R->heap_len++;
    R->heap[i] = (timer){due, req};
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (R->heap[p].due_ns <= R->heap[i].due_ns)
            break;
        timer t = R->heap[p];
        R->heap[p] = R->heap[i];
        R->heap[i] = t;
        i = p;
    }
    return 0;
}

static timer heap_pop(run *R)
{
    timer top = R->heap[0];
    R->heap[0] = R->heap[--R->heap_len];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, s = i;
        if (l < R->heap_len && R->heap[l].due_ns < R->heap[s].due_ns)
            s = l;
        if (r < R->heap_len && R->heap[r].due_ns < R->heap[s].due_ns)
            s = r;
        if (s == i)
            break;
        timer t = R->heap[s];
        R->heap[s] = R->heap[i];
        R->heap[i] = t;
        i = s;
    }
    return top;
}

/* ---- curl callbacks -------------------------------------------------------------------------- */

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
    call *c = ud;
    size_t len = size * n;
    size_t room = sizeof c->body - 1 - c->body_len;
    size_t take = len < room ? len : room;
    memcpy(c->body + c->body_len, p, take);
    c->body_len += take;
    c->body[c->body_len] = '\0';
    return len;
}

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
    call *c = ud;
    size_t len = size * n;
    static const char name[] = "retry-after:";
    if (len > sizeof name - 1 && strncasecmp(p, name, sizeof name - 1) == 0) {
        const char *v = p + sizeof name - 1;
        size_t vl = len - (sizeof name - 1);
        while (vl > 0 && (v[vl - 1] == '\r' || v[vl - 1] == '\n'))
            vl--;
        if (vl >= sizeof c->retry_after)
            vl = sizeof c->retry_after - 1;
        memcpy(c->retry_after, v, vl);
        c->retry_after[vl] = '\0';
    } else if (len >= 5 && strncmp(p, "HTTP/", 5) == 0) {
        c->retry_after[0] = '\0'; /* a new (final or interim) response starts */
    }
    return len;
}

/* ---- request lifecycle ----------------------------------------------------------------------- */

static void order_id(const run *R, size_t i, char *buf, size_t size)
{
    snprintf(buf, size, "%s-%06zu", R->cfg->id_prefix, i);
}

static void finish(run *R, lreq *q, enum req_state st)
{
    q->state = st;
    lg_phase *ph = &R->res->phases[q->phase];
    switch (st) {
    case RS_SUCCESS:
        R->res->successes++;
        ph->successes++;
        break;
    case RS_FAILED:
        R->res->failed++;
        ph->failed++;
        break;
    case RS_UNKNOWN:
        R->res->unknown++;
        ph->unknown++;
        break;
    default:
        break;
    }
}

static void finish_final(run *R, lreq *q, const rc_outcome *o)
{
    rc_final f = rc_final_of(o);
    if (f == RC_F_FAILED && o->transport == RC_T_ANSWER) {
        rc_class c = rc_classify(o);
        if (c == RC_C_PERMANENT)
            R->res->failed_declined++;
        else
            R->res->failed_refused++;
    }
    finish(R, q, f == RC_F_SUCCESS ? RS_SUCCESS : f == RC_F_FAILED ? RS_FAILED : RS_UNKNOWN);
}

/* A resend (or retry) that could not be sent: the request ends as its last gateway answer says. */
static void finish_unsent_retry(run *R, lreq *q)
{
    finish_final(R, q, &q->last);
}

static int start_attempt(run *R, size_t idx, int64_t now)
{
    lreq *q = &R->reqs[idx];
    const lg_policy *P = R->pol;
    int attempt = q->attempts + 1;
    bool has_slot = false;
    if (P->cap > 0) {
        if (attempt == 1) {
            if (!rc_sem_try_acquire(&R->sem)) {
                R->res->failed_cap++;
                finish(R, q, RS_FAILED);
                return 0;
            }
        } else {
            rc_acquire a = rc_sem_try_acquire_resend(&R->sem, P->resend_min_free);
            if (a != RC_ACQ_OK) {
                if (a == RC_ACQ_BUDGET)
                    R->res->resends_skipped++;
                else
                    R->res->resends_no_slot++;
                finish_unsent_retry(R, q);
                return 0;
            }
        }
        has_slot = true;
    }
    bool probe = false;
    if (R->brk) {
        rc_breaker_verdict v = rc_breaker_allow(R->brk, model_now_ms(R, now));
        if (v == RC_BRK_REJECT) {
            if (has_slot)
                rc_sem_release(&R->sem);
            R->res->breaker_rejected++;
            R->res->phases[q->phase].breaker_rejected++;
            if (attempt == 1) {
                R->res->failed_breaker++;
                finish(R, q, RS_FAILED);
            } else {
                finish_unsent_retry(R, q);
            }
            return 0;
        }
        probe = v == RC_BRK_PROBE;
    }

    call *c = calloc(1, sizeof *c);
    if (!c)
        return -1;
    c->req = idx;
    c->attempt = attempt;
    c->probe = probe;
    c->has_slot = has_slot;
    c->h = curl_easy_init();
    if (!c->h) {
        free(c);
        return -1;
    }
    char oid[64], url[256], hdr[160], body[256];
    order_id(R, idx, oid, sizeof oid);
    snprintf(url, sizeof url, "%s/v1/payments/confirm", R->cfg->base_url);
    snprintf(body, sizeof body, "{\"paymentKey\":\"pk_%s\",\"orderId\":\"%s\",\"amount\":%lld}",
             oid, oid, R->cfg->amount > 0 ? R->cfg->amount : 15000LL);
    snprintf(hdr, sizeof hdr, "Idempotency-Key: %s-confirm", oid);
    c->headers = curl_slist_append(NULL, R->cfg->auth_header);
    c->headers = curl_slist_append(c->headers, hdr);
    c->headers = curl_slist_append(c->headers, "Content-Type: application/json");
    c->headers = curl_slist_append(c->headers, "Expect:");
    long tmo = (long)llround(R->cfg->timeout_ms * R->scale);
    if (tmo < 1)
        tmo = 1;
    curl_easy_setopt(c->h, CURLOPT_URL, url);
    curl_easy_setopt(c->h, CURLOPT_COPYPOSTFIELDS, body);
    curl_easy_setopt(c->h, CURLOPT_HTTPHEADER, c->headers);
    curl_easy_setopt(c->h, CURLOPT_TIMEOUT_MS, tmo);
    curl_easy_setopt(c->h, CURLOPT_NOSIGNAL, 1L);
    if (!R->cfg->reuse_connections) {
        /* One connection per attempt: libcurl resends a request on its own when a reused
         * keep-alive connection dies before any byte of the answer (an outage's resets), and
         * those hidden resends would be gateway arrivals that no retry policy decided. */
        curl_easy_setopt(c->h, CURLOPT_FRESH_CONNECT, 1L);
        curl_easy_setopt(c->h, CURLOPT_FORBID_REUSE, 1L);
    }
    curl_easy_setopt(c->h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c->h, CURLOPT_WRITEDATA, c);
    curl_easy_setopt(c->h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c->h, CURLOPT_HEADERDATA, c);
    curl_easy_setopt(c->h, CURLOPT_PRIVATE, c);
    if (curl_multi_add_handle(R->m, c->h) != CURLM_OK) {
        curl_slist_free_all(c->headers);
        curl_easy_cleanup(c->h);
        free(c);
        return -1;
    }
    c->sent_ns = now;
    q->attempts = attempt;
    q->reached = true;
    q->state = RS_ACTIVE;
    R->in_flight++;
    R->res->attempts_sent++;
    R->res->phases[q->phase].attempts_sent++;
    if (attempt > 1)
        R->res->resends_sent++;
    return 0;
}

static void outcome_of(call *c, CURLcode cc, rc_outcome *o, char *code, size_t code_size)
{
    memset(o, 0, sizeof *o);
    code[0] = '\0';
    if (cc == CURLE_OK) {
        long st = 0;
        curl_easy_getinfo(c->h, CURLINFO_RESPONSE_CODE, &st);
        o->transport = RC_T_ANSWER;
        o->status = st;
        if (st >= 400 && c->body_len > 0) {
            json_t *j = json_loadb(c->body, c->body_len, 0, NULL);
            const char *s = j ? json_string_value(json_object_get(j, "code")) : NULL;
            if (s) {
                snprintf(code, code_size, "%s", s);
                o->code = code;
            }
            json_decref(j);
        }
    } else if (cc == CURLE_OPERATION_TIMEDOUT) {
        o->transport = RC_T_TIMEOUT;
    } else {
        o->transport = RC_T_CONN_ERROR;
    }
}

static int complete(run *R, call *c, CURLcode cc, int64_t now)
{
    lreq *q = &R->reqs[c->req];
    const lg_policy *P = R->pol;
    char code[64];
    rc_outcome o;
    outcome_of(c, cc, &o, code, sizeof code);
    R->in_flight--;
    if (c->has_slot)
        rc_sem_release(&R->sem);
    if (R->brk)
        rc_breaker_record(R->brk, model_now_ms(R, now), !rc_breaker_counts_failure(&o), c->probe);
    q->end_ns = now;
    rc_class cls = rc_classify(&o);
    if (cls == RC_C_TIMEOUT)
        R->res->timeouts++;
    if (cls == RC_C_CONFLICT)
        R->res->conflicts++;
    if (cls == RC_C_UNAVAILABLE || cls == RC_C_SERVER)
        q->got_5xx = true;
    q->last = o;
    q->last.code = NULL;

    unsigned mask = P->retry_on ? P->retry_on : RC_RETRYABLE_DEFAULT;
    int rc = 0;
    if (cls == RC_C_SUCCESS) {
        if (q->got_5xx)
            R->res->saved_5xx++;
        finish(R, q, RS_SUCCESS);
    } else if (rc_should_retry(&o, mask) && c->attempt < P->max_attempts) {
        int retry = c->attempt; /* 1 = first retry */
        double d = rc_backoff_delay_ms(&P->backoff, retry, q->prev_delay_ms, &R->rng);
        q->prev_delay_ms = d;
        if (P->honour_retry_after && c->retry_after[0] != '\0') {
            double wait_s;
            if (rc_parse_retry_after(c->retry_after, time(NULL), &wait_s) == 0)
                /* Retry-After is real seconds; convert to model ms for the comparison */
                d = rc_delay_with_retry_after(d, wait_s * 1000.0 / R->scale,
                                              P->retry_after_cap_ms);
        }
        q->state = RS_PENDING;
        rc = heap_push(R, now + model_ms_to_ns(R, d), c->req);
    } else {
        finish_final(R, q, &o);
    }
    curl_multi_remove_handle(R->m, c->h);
    curl_easy_cleanup(c->h);
    curl_slist_free_all(c->headers);
    free(c);
    return rc;
}

/* ---- reconciliation -------------------------------------------------------------------------- */

typedef struct rcall {
    size_t req;
    CURL *h;
    struct curl_slist *headers;
    char *body;
    size_t len;
} rcall;

static size_t on_rbody(char *p, size_t size, size_t n, void *ud)
{
    rcall *c = ud;
    size_t len = size * n;
    char *b = realloc(c->body, c->len + len + 1);
    if (!b)
        return 0;
    memcpy(b + c->len, p, len);
    c->len += len;
    b[c->len] = '\0';
    c->body = b;
    return len;
}

/* Read every UNKNOWN; up to `rounds` passes for reads that gave no verdict. */
static int reconcile(run *R)
{
    const int rounds = 5, parallel = 16;
    size_t *todo = malloc((R->n + 1) * sizeof *todo);
    if (!todo)
        return -1;
    size_t n_todo = 0;
    for (size_t i = 0; i < R->n; i++)
        if (R->reqs[i].state == RS_UNKNOWN)
            todo[n_todo++] = i;
    for (int round = 0; round < rounds && n_todo > 0; round++) {
        if (round > 0) {
            struct timespec ts = {0, 200 * 1000000L};
            nanosleep(&ts, NULL);
        }
        size_t next = 0, kept = 0;
        int running = 0, active = 0;
        while (next < n_todo || active > 0) {
            while (next < n_todo && active < parallel) {
                rcall *c = calloc(1, sizeof *c);
                if (!c) {
                    free(todo);
                    return -1;
                }
                c->req = todo[next++];
                c->h = curl_easy_init();
                char oid[64], url[256];
                order_id(R, c->req, oid, sizeof oid);
                snprintf(url, sizeof url, "%s/v1/payments/orders/%s", R->cfg->base_url, oid);
                c->headers = curl_slist_append(NULL, R->cfg->auth_header);
                curl_easy_setopt(c->h, CURLOPT_URL, url);
                curl_easy_setopt(c->h, CURLOPT_HTTPHEADER, c->headers);
                curl_easy_setopt(c->h, CURLOPT_TIMEOUT_MS, 10000L);
                curl_easy_setopt(c->h, CURLOPT_NOSIGNAL, 1L);
                curl_easy_setopt(c->h, CURLOPT_WRITEFUNCTION, on_rbody);
                curl_easy_setopt(c->h, CURLOPT_WRITEDATA, c);
                curl_easy_setopt(c->h, CURLOPT_PRIVATE, c);
                curl_multi_add_handle(R->m, c->h);
                active++;
            }
            curl_multi_perform(R->m, &running);
            CURLMsg *msg;
            int left;
            while ((msg = curl_multi_info_read(R->m, &left)) != NULL) {
                if (msg->msg != CURLMSG_DONE)
                    continue;
                rcall *c;
                curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&c);
                long st = 0;
                const char *ps = NULL;
                json_t *j = NULL;
                if (msg->data.result == CURLE_OK) {
                    curl_easy_getinfo(c->h, CURLINFO_RESPONSE_CODE, &st);
                    j = c->body ? json_loads(c->body, 0, NULL) : NULL;
                    ps = j ? json_string_value(json_object_get(j, "status")) : NULL;
                }
                rc_final v = rc_reconcile_verdict(st, ps);
                json_decref(j);
                lreq *q = &R->reqs[c->req];
                lg_phase *ph = &R->res->phases[q->phase];
                if (v == RC_F_SUCCESS) {
                    q->state = RS_SUCCESS;
                    R->res->successes++;
                    ph->successes++;
                    R->res->unknown_resolved++;
                    R->res->unknown_resolved_success++;
                } else if (v == RC_F_FAILED) {
                    q->state = RS_FAILED;
                    R->res->failed++;
                    ph->failed++;
                    R->res->failed_reconciled++;
                    R->res->unknown_resolved++;
                } else {
                    todo[kept++] = c->req;
                }
                curl_multi_remove_handle(R->m, c->h);
                curl_easy_cleanup(c->h);
                curl_slist_free_all(c->headers);
                free(c->body);
                free(c);
                active--;
            }
            if (active > 0)
                curl_multi_poll(R->m, NULL, 0, 50, NULL);
        }
        n_todo = kept;
    }
    for (size_t k = 0; k < n_todo; k++) {
        lreq *q = &R->reqs[todo[k]];
        q->state = RS_FAILED;
        R->res->failed++;
        R->res->phases[q->phase].failed++;
        R->res->unknown_unresolved++;
    }
    free(todo);
    return 0;
}

/* ---- the loop -------------------------------------------------------------------------------- */

static void set_err(char err[LG_ERR_LEN], const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, LG_ERR_LEN, fmt, ap);
    va_end(ap);
}

int lg_run(const lg_config *cfg, lg_result *out, char err[LG_ERR_LEN])
{
    memset(out, 0, sizeof *out);
    err[0] = '\0';
    run R;
    memset(&R, 0, sizeof R);
    R.cfg = cfg;
    R.pol = &cfg->policy;
    R.scale = cfg->time_scale > 0 ? cfg->time_scale : 1.0;
    R.res = out;
    rc_rng_seed(&R.rng, cfg->seed);
    if (cfg->rate_per_s <= 0 || cfg->duration_s <= 0 || cfg->policy.max_attempts < 1) {
        set_err(err, "rate, duration and max_attempts must be positive");
        return -1;
    }
    if (cfg->n_phases > LG_MAX_PHASES) {
        set_err(err, "at most %d phases", LG_MAX_PHASES);
        return -1;
    }
    rc_sem_init(&R.sem, cfg->policy.cap);
    if (cfg->policy.breaker) {
        R.brk = malloc(sizeof *R.brk);
        if (!R.brk) {
            set_err(err, "out of memory");
            return -1;
        }
        rc_breaker_init(R.brk, cfg->policy.breaker_failures, cfg->policy.breaker_window_ms,
                        cfg->policy.breaker_open_ms);
    }

    /* Arrival times (model seconds), planned up front so that they depend only on the seed. */
    size_t cap_n = (size_t)ceil(cfg->rate_per_s * cfg->duration_s * (cfg->poisson ? 2.0 : 1.0)) + 16;
    R.reqs = calloc(cap_n, sizeof *R.reqs);
    if (!R.reqs) {
        free(R.brk);
        set_err(err, "out of memory");
        return -1;
    }
    rc_rng arr_rng;
    rc_rng_seed(&arr_rng, cfg->seed ^ 0xA5A5A5A5DEADBEEFull);
    double t = 0;
    for (;;) {
        double at = cfg->poisson ? t : (double)R.n / cfg->rate_per_s;
        if (at >= cfg->duration_s - 1e-12 || R.n >= cap_n)
            break;
        lreq *q = &R.reqs[R.n++];
        q->arrival_ns = (int64_t)llround(at * 1e9 * R.scale);
        size_t ph = 0;
        for (size_t k = 0; k < cfg->n_phases; k++)
            if (at >= cfg->phase_starts[k])
                ph = k;
        q->phase = ph;
        if (cfg->poisson)
            t += rc_rng_exponential(&arr_rng, 1.0 / cfg->rate_per_s);
    }
    out->requests = (long)R.n;
    for (size_t i = 0; i < R.n; i++)
        out->phases[R.reqs[i].phase].requests++;

    R.m = curl_multi_init();
    if (!R.m) {
        free(R.reqs);
        free(R.brk);
        set_err(err, "curl_multi_init failed");
        return -1;
    }
    curl_multi_setopt(R.m, CURLMOPT_MAXCONNECTS, 256L);

    int64_t wall0 = lg_now_ns();
    R.t0 = wall0 + 20 * 1000000LL;
    for (size_t i = 0; i < R.n; i++)
        R.reqs[i].arrival_ns += R.t0;
    size_t next = 0, ev = 0;
    int rc = 0, running = 0;
    int64_t last_progress = wall0;
    while (rc == 0) {
        int64_t now = lg_now_ns();
        while (ev < cfg->n_events &&
               R.t0 + (int64_t)llround(cfg->events[ev].at_s * 1e9 * R.scale) <= now) {
            cfg->events[ev].fn(cfg->events[ev].ctx, (int)ev);
            ev++;
        }
        while (rc == 0 && next < R.n && R.reqs[next].arrival_ns <= now)
            rc = start_attempt(&R, next++, now);
        while (rc == 0 && R.heap_len > 0 && R.heap[0].due_ns <= now) {
            timer tm = heap_pop(&R);
            rc = start_attempt(&R, tm.req, now);
        }
        if (rc != 0)
            break;
        curl_multi_perform(R.m, &running);
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(R.m, &left)) != NULL) {
            if (msg->msg != CURLMSG_DONE)
                continue;
            call *c;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&c);
            if (complete(&R, c, msg->data.result, lg_now_ns()) != 0)
                rc = -1;
        }
        if (next >= R.n && R.in_flight == 0 && R.heap_len == 0)
            break;
        now = lg_now_ns();
        if (cfg->verbose && now - last_progress > 1000000000LL) {
            fprintf(stderr, "  ... %zu/%zu arrived, %ld in flight, %zu waiting to retry\n", next,
                    R.n, R.in_flight, R.heap_len);
            last_progress = now;
        }
        int64_t wake = now + 100 * 1000000LL;
        if (next < R.n && R.reqs[next].arrival_ns < wake)
            wake = R.reqs[next].arrival_ns;
        if (R.heap_len > 0 && R.heap[0].due_ns < wake)
            wake = R.heap[0].due_ns;
        if (ev < cfg->n_events) {
            int64_t e = R.t0 + (int64_t)llround(cfg->events[ev].at_s * 1e9 * R.scale);
            if (e < wake)
                wake = e;
        }
        int64_t wait_ms = (wake - now) / 1000000LL;
        if (wait_ms > 0)
            curl_multi_poll(R.m, NULL, 0, (int)wait_ms, NULL);
    }
    if (rc != 0)
        set_err(err, "out of memory or curl failure during the run");
    /* events planned after the last request: fire them now (e.g. "back to normal") */
    while (rc == 0 && ev < cfg->n_events) {
        cfg->events[ev].fn(cfg->events[ev].ctx, (int)ev);
        ev++;
    }

    /* latency of requests that reached the gateway, model ms */
    double *lat = malloc((R.n + 1) * sizeof *lat);
    size_t nl = 0;
    if (lat) {
        for (size_t i = 0; i < R.n; i++)
            if (R.reqs[i].reached)
                lat[nl++] = (double)(R.reqs[i].end_ns - R.reqs[i].arrival_ns) / 1e6 / R.scale;
        out->p50_ms = rc_quantile(lat, nl, 0.50);
        out->p95_ms = rc_quantile(lat, nl, 0.95);
        free(lat);
    }
    for (size_t i = 0; i < R.n; i++)
        if (R.reqs[i].got_5xx)
            out->got_5xx++;

    if (rc == 0 && cfg->reconcile && out->unknown > 0) {
        struct timespec ts;
        double settle = cfg->settle_s * R.scale;
        ts.tv_sec = (time_t)settle;
        ts.tv_nsec = (long)((settle - (double)ts.tv_sec) * 1e9);
        nanosleep(&ts, NULL);
        if (reconcile(&R) != 0) {
            rc = -1;
            set_err(err, "out of memory during reconciliation");
        }
    } else if (rc == 0) {
        for (size_t i = 0; i < R.n; i++)
            if (R.reqs[i].state == RS_UNKNOWN) {
                /* not reconciled: an UNKNOWN stays a failure for the rate */
                out->failed++;
                out->phases[R.reqs[i].phase].failed++;
                out->unknown_unresolved++;
            }
    }
    if (R.brk) {
        out->breaker_opens = R.brk->opens;
    }
    out->wall_s = (double)(lg_now_ns() - wall0) / 1e9;
    curl_multi_cleanup(R.m);
    free(R.heap);
    free(R.reqs);
    free(R.brk);
    return rc;
}
