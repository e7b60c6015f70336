/* soak.c -- `make soak` (soak.h): keep-alive client threads send a long-lived CI server's mix of
 * requests to one fakegate whose TTLs are short, while its resident set is sampled.
 *
 * The workload. Everything fakegate keeps per Idempotency-Key, per request identity or per
 * session is meant to be bounded by a TTL or a documented bound, so the clients make those
 * without end: every confirm and cancel sent under a key takes a fresh random one (36
 * characters, as a UUID), except the resends that are the point of a key (the first key of a
 * payment's confirm or cancel sent again, which is a replay within the TTL and a new execution
 * after it; a failed request sent again). What fakegate keeps by design for as long as it runs
 * is the ledger: every payment, its cancels and transactions (docs/api.md, "How many payments a
 * tenant keeps": bounded by --max-payments). Its growth is kept out of the measurement by a
 * bounded pool of paymentKeys (sk_config.payments): new payments are confirmed, each under a
 * fresh key, until the pool is full (within the first seconds), and every later request is
 * about a payment of the pool; cancels are full cancels, so a payment has at most one. No
 * reset is sent: it would free what a leak holds.
 *
 *   new payment          a confirm of the pool's next paymentKey under a fresh key (while the
 *                        pool is not full; then a confirm under a new key instead)
 *   confirm new key      a confirm of a pool payment under a fresh key (400
 *                        ALREADY_PROCESSED_PAYMENT, stored under that key)
 *   confirm same key     the payment's first confirm key again: a replay, or after the TTL a
 *                        new execution
 *   confirm keyless      no key (the identity is the orderId; nothing stored)
 *   cancel new key       a full cancel under a fresh key (the first is a 200, then 400
 *                        ALREADY_CANCELED_PAYMENT stored under each key)
 *   cancel same key      the payment's first cancel key again
 *   cancel keyless       no key (the identity is the paymentKey)
 *   read by paymentKey, read by orderId
 *   resend after failure a 5xx or no answer is sent again at once, same key and body, one time
 *                        in two (the other time the client gives up, as a test that ends)
 *
 * The profile gives confirms and cancels 1 ms of latency (they pass through the scheduler) and
 * a few failures: 2 % of confirms 500 after processing (released), 1 % lose their answer
 * (closed: libcurl often resends on its own), 2 % of cancels 503 before processing with
 * Retry-After. So the report sees failure events, some never resent.
 *
 * The load is paced (sk_config.rate, 2500 requests/s by default, well within what fakegate
 * answers on 2 shared cores): what a TTL bounds is then about the same from one TTL to the
 * next, so the RSS measures what is kept, not how fast the machine happened to be (unpaced,
 * the records held followed the machine's load, and the RSS the highest of them).
 *
 * The measurement: VmRSS every sample_s seconds from the start of the load; the sample at the
 * end of the warm-up (warmup_ttls TTLs: by then the first records have expired and been swept
 * for a whole TTL) is the base, and every later sample must be within max_growth of it. */
#define _GNU_SOURCE
#include "soak.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *const sk_op_names[SK_OPS] = {
    "new payment", "confirm new key", "confirm same key", "confirm keyless", "cancel new key",
    "cancel same key", "cancel keyless", "read by paymentKey", "read by orderId",
    "resend after failure"};
const char *const sk_answer_names[SK_ANSWERS] = {"2xx", "409", "4xx", "5xx", "no answer"};

const char sk_profile_json[] =
    "{\"name\": \"soak\", \"routes\": {"
    "\"confirm\": {\"latency\": {\"dist\": \"fixed\", \"ms\": 1}, \"faults\": ["
    "{\"kind\": \"error\", \"p\": 0.02, \"code\": \"FAILED_INTERNAL_SYSTEM_PROCESSING\", "
    "\"when\": \"after\"},"
    "{\"kind\": \"drop_response\", \"p\": 0.01, \"how\": \"close\"}]},"
    "\"cancel\": {\"latency\": {\"dist\": \"fixed\", \"ms\": 1}, \"faults\": ["
    "{\"kind\": \"error\", \"p\": 0.02, \"code\": \"SERVICE_UNAVAILABLE\", \"when\": \"before\", "
    "\"retry_after\": {\"format\": \"seconds\", \"value\": 1}}]},"
    "\"default\": {\"latency\": {\"dist\": \"fixed\", \"ms\": 0}}}}";

/* Per mille of each kind a thread picks (SK_RESEND_AFTER_FAILURE is not picked: it follows a
 * failure). */
static const int op_weights[SK_RESEND_AFTER_FAILURE] = {120, 200, 100, 60, 120, 60, 30, 160, 150};

#define REQUEST_TIMEOUT_MS 5000L

void sk_config_default(sk_config *c)
{
    *c = (sk_config){.seconds = 600, .ttl_s = 30, .warmup_ttls = 2, .sample_s = 10,
                     .threads = 4, .payments = 1000, .rate = 2500, .max_growth = 0.10,
                     .seed = 42};
}

void sk_server_args(const sk_config *c, char store[2][24], const char *argv[10])
{
    snprintf(store[0], 24, "%d", c->ttl_s);
    snprintf(store[1], 24, "%" PRIu64, c->seed);
    const char *v[10] = {"--idempotency-ttl", store[0], "--session-ttl", store[0],
                         "--consecutive-cancel-ms", "0", "--seed", store[1], NULL, NULL};
    memcpy(argv, v, sizeof v);
}

struct run {
    const fg_server *s;
    const sk_config *c;
    atomic_bool stop;
    atomic_int created;          /* pool payments handed out to "new payment" so far */
    atomic_long requests;
    atomic_long fresh_keys;
    atomic_long by[SK_OPS][SK_ANSWERS];
};

struct worker {
    struct run *r;
    pthread_t thread;
    CURL *h;
    uint64_t rng;
};

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* A fresh key, UUID-shaped (36 characters). */
static void fresh_key(struct worker *w, char key[40])
{
    uint64_t a = splitmix64(&w->rng), b = splitmix64(&w->rng);
    snprintf(key, 40, "%08" PRIx64 "-%04" PRIx64 "-4%03" PRIx64 "-%04" PRIx64 "-%012" PRIx64,
             a >> 32, (a >> 16) & 0xffff, a & 0xfff, (b >> 48) | 0x8000, b & UINT64_C(0xffffffffffff));
    atomic_fetch_add(&w->r->fresh_keys, 1);
}

static enum sk_answer classify(const fg_response *resp)
{
    if (resp->curl_code != CURLE_OK || resp->status == 0)
        return SK_NO_ANSWER;
    if (resp->status == 409)
        return SK_409;
    if (resp->status >= 500)
        return SK_5XX;
    return resp->status >= 400 ? SK_4XX : SK_2XX;
}

/* Send one request and count its answer under `op`. */
static enum sk_answer send_one(struct worker *w, enum sk_op op, const char *method,
                               const char *path, const char *body, const char *idem_key)
{
    struct run *r = w->r;
    char key_header[64];
    const char *headers[3] = {r->s->auth_header, NULL, NULL};
    if (idem_key) {
        snprintf(key_header, sizeof key_header, "Idempotency-Key: %s", idem_key);
        headers[1] = key_header;
    }
    fg_request req = {.method = method, .path = path, .body = body, .headers = headers,
                      .timeout_ms = REQUEST_TIMEOUT_MS};
    fg_response resp;
    fg_http(r->s, w->h, &req, &resp);
    enum sk_answer a = classify(&resp);
    fg_response_fini(&resp);
    atomic_fetch_add(&r->by[op][a], 1);
    atomic_fetch_add(&r->requests, 1);
    return a;
}

static enum sk_op pick_op(struct worker *w)
{
    int pick = (int)(splitmix64(&w->rng) % 1000);
    for (int i = 0; i < SK_RESEND_AFTER_FAILURE; i++) {
        if (pick < op_weights[i])
            return (enum sk_op)i;
        pick -= op_weights[i];
    }
    return SK_READ_BY_ORDER;
}

static void one_op(struct worker *w)
{
    struct run *r = w->r;
    enum sk_op op = pick_op(w);
    int k;
    if (op == SK_NEW_PAYMENT) {
        k = atomic_fetch_add(&r->created, 1);
        if (k >= r->c->payments) {
            atomic_fetch_sub(&r->created, 1);
            op = SK_CONFIRM_NEW_KEY;
        }
    }
    if (op != SK_NEW_PAYMENT) {
        int n = atomic_load(&r->created);
        if (n == 0)
            return; /* nothing to resend yet */
        k = (int)(splitmix64(&w->rng) % (uint64_t)(n < r->c->payments ? n : r->c->payments));
    }
    char pk[32], oid[32], path[96], body[160], key[40];
    snprintf(pk, sizeof pk, "soak_pk_%06d", k);
    snprintf(oid, sizeof oid, "soak_order_%06d", k);
    const char *method = "POST", *idem = key;
    switch (op) {
    case SK_NEW_PAYMENT: /* a key never sent before, kept as the payment's "same key" */
        snprintf(key, sizeof key, "soak-%06d-confirm", k);
        atomic_fetch_add(&r->fresh_keys, 1);
        break;
    case SK_CONFIRM_NEW_KEY:
    case SK_CANCEL_NEW_KEY:
        fresh_key(w, key);
        break;
    case SK_CONFIRM_SAME_KEY:
        snprintf(key, sizeof key, "soak-%06d-confirm", k);
        break;
    case SK_CANCEL_SAME_KEY:
        snprintf(key, sizeof key, "soak-%06d-cancel", k);
        break;
    default:
        idem = NULL;
    }
    if (op <= SK_CONFIRM_KEYLESS) {
        snprintf(path, sizeof path, "/v1/payments/confirm");
        snprintf(body, sizeof body, "{\"paymentKey\":\"%s\",\"orderId\":\"%s\",\"amount\":%d}", pk,
                 oid, 1000 + (k % 97) * 100);
    } else if (op <= SK_CANCEL_KEYLESS) {
        snprintf(path, sizeof path, "/v1/payments/%s/cancel", pk);
        snprintf(body, sizeof body, "{\"cancelReason\":\"soak\"}");
    } else {
        method = "GET";
        if (op == SK_READ_BY_KEY)
            snprintf(path, sizeof path, "/v1/payments/%s", pk);
        else
            snprintf(path, sizeof path, "/v1/payments/orders/%s", oid);
    }
    bool is_get = method[0] == 'G';
    enum sk_answer a = send_one(w, op, method, path, is_get ? NULL : body, idem);
    if ((a == SK_5XX || a == SK_NO_ANSWER) && (splitmix64(&w->rng) & 1))
        send_one(w, SK_RESEND_AFTER_FAILURE, method, path, is_get ? NULL : body, idem);
}

/* A thread behind its pace catches up by at most this much: after a stall the rate does not
 * burst above the target for long. */
#define CATCH_UP_NS (100 * INT64_C(1000000))

static void sleep_until_ns(int64_t deadline_ns);

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    const sk_config *c = w->r->c;
    int64_t interval_ns = c->rate > 0 ? (int64_t)c->threads * 1000000000 / c->rate : 0;
    int64_t next_ns = fg_now_ns();
    while (!atomic_load(&w->r->stop)) {
        if (interval_ns > 0) { /* pacing the load, not waiting for the server */
            int64_t now = fg_now_ns();
            if (next_ns > now)
                sleep_until_ns(next_ns);
            else if (now - next_ns > CATCH_UP_NS)
                next_ns = now - CATCH_UP_NS;
            next_ns += interval_ns;
        }
        one_op(w);
    }
    return NULL;
}


/* fakegate_idempotency_records from /metrics, or -1. */
static long idem_records(const fg_server *s, CURL *h)
{
    fg_request req = {.path = "/metrics", .timeout_ms = REQUEST_TIMEOUT_MS};
    fg_response resp;
    long n = -1;
    if (fg_http(s, h, &req, &resp) == 0 && resp.status == 200) {
        const char *p = strstr(resp.body, "\nfakegate_idempotency_records ");
        if (p)
            n = strtol(p + strlen("\nfakegate_idempotency_records "), NULL, 10);
    }
    fg_response_fini(&resp);
    return n;
}

static void sleep_until_ns(int64_t deadline_ns)
{
    struct timespec ts = {.tv_sec = (time_t)(deadline_ns / 1000000000),
                          .tv_nsec = (long)(deadline_ns % 1000000000)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0)
        ;
}

void sk_print_sample(FILE *f, const sk_sample *sm)
{
    fprintf(f, "  t=%4ds  rss %7ld kB  requests %9ld  idempotency records %7ld\n", sm->t_s,
            sm->rss_kb, sm->requests, sm->idem_records);
}

/* The verdict from the samples. */
static void judge(const sk_config *c, sk_result *out)
{
    int warm = c->warmup_ttls * c->ttl_s;
    out->base = -1;
    for (int i = 0; i < out->n_samples; i++)
        if (out->samples[i].t_s >= warm) {
            out->base = i;
            break;
        }
    if (out->base < 0 || out->base == out->n_samples - 1) {
        out->base = -1;
        out->pass = false;
        return;
    }
    const sk_sample *b = &out->samples[out->base], *last = &out->samples[out->n_samples - 1];
    out->max_after_kb = 0;
    for (int i = out->base + 1; i < out->n_samples; i++)
        if (out->samples[i].rss_kb > out->max_after_kb)
            out->max_after_kb = out->samples[i].rss_kb;
    out->growth = (double)out->max_after_kb / (double)b->rss_kb - 1;
    long reqs = last->requests - b->requests;
    out->bytes_per_request = reqs > 0 ? (double)(last->rss_kb - b->rss_kb) * 1024 / (double)reqs
                                      : 0;
    out->pass = out->growth <= c->max_growth;
}

int sk_run(const fg_server *s, const sk_config *c, sk_result *out, FILE *progress,
           char err[FG_ERR_LEN])
{
    memset(out, 0, sizeof *out);
    out->base = -1;
    out->payments = -1;
    struct run r = {.s = s, .c = c};
    struct worker *ws = calloc((size_t)c->threads, sizeof *ws);
    CURL *probe = curl_easy_init();
    if (ws == NULL || probe == NULL) {
        snprintf(err, FG_ERR_LEN, "out of memory");
        free(ws);
        curl_easy_cleanup(probe);
        return -1;
    }
    if (fg_proc_kb(s->pid, "VmRSS") < 0) {
        snprintf(err, FG_ERR_LEN, "cannot read /proc/%d/status", (int)s->pid);
        free(ws);
        curl_easy_cleanup(probe);
        return -1;
    }
    out->samples[out->n_samples++] = (sk_sample){0, fg_proc_kb(s->pid, "VmRSS"), 0, idem_records(s, probe)};
    if (progress) {
        sk_print_sample(progress, &out->samples[0]);
        fflush(progress);
    }
    int64_t t0 = fg_now_ns();
    int started = 0;
    for (; started < c->threads; started++) {
        ws[started] = (struct worker){.r = &r, .h = curl_easy_init(),
                                      .rng = c->seed * 1000003u + (uint64_t)started};
        if (ws[started].h == NULL ||
            pthread_create(&ws[started].thread, NULL, worker_main, &ws[started]) != 0) {
            curl_easy_cleanup(ws[started].h);
            break;
        }
    }
    int rc = 0;
    if (started < c->threads) {
        snprintf(err, FG_ERR_LEN, "could not start client thread %d", started);
        rc = -1;
    }
    for (int i = 1; rc == 0 && i * c->sample_s <= c->seconds && out->n_samples < SK_MAX_SAMPLES;
         i++) {
        sleep_until_ns(t0 + (int64_t)i * c->sample_s * 1000000000);
        sk_sample sm = {i * c->sample_s, fg_proc_kb(s->pid, "VmRSS"), atomic_load(&r.requests),
                        idem_records(s, probe)};
        if (sm.rss_kb < 0) {
            snprintf(err, FG_ERR_LEN, "fakegate (pid %d) is gone at t=%ds", (int)s->pid, sm.t_s);
            rc = -1;
            break;
        }
        out->samples[out->n_samples++] = sm;
        if (progress) {
            sk_print_sample(progress, &sm);
            fflush(progress);
        }
    }
    atomic_store(&r.stop, true);
    for (int i = 0; i < started; i++) {
        pthread_join(ws[i].thread, NULL);
        curl_easy_cleanup(ws[i].h);
    }
    out->wall_s = (double)(fg_now_ns() - t0) / 1e9;
    for (int o = 0; o < SK_OPS; o++)
        for (int a = 0; a < SK_ANSWERS; a++)
            out->by[o][a] = atomic_load(&r.by[o][a]);
    out->requests = atomic_load(&r.requests);
    out->fresh_keys = atomic_load(&r.fresh_keys);
    json_t *pays = rc == 0 ? fg_admin_payments(s, NULL) : NULL;
    if (pays) {
        out->payments = (long)json_array_size(pays);
        json_decref(pays);
    }
    curl_easy_cleanup(probe);
    free(ws);
    judge(c, out);
    return rc;
}

void sk_print(FILE *f, const sk_config *c, const sk_result *r)
{
    fprintf(f, "soak: %d s, %d threads at %d requests/s in all%s, %d paymentKeys, "
               "--idempotency-ttl %d --session-ttl %d, warm-up %d s, a sample every %d s\n",
            c->seconds, c->threads, c->rate, c->rate ? "" : " (unpaced)", c->payments, c->ttl_s,
            c->ttl_s, c->warmup_ttls * c->ttl_s, c->sample_s);
    fprintf(f, "requests: %ld in %.1f s (%.0f/s), %ld fresh Idempotency-Keys, ledger %ld "
               "payments\n",
            r->requests, r->wall_s, r->wall_s > 0 ? (double)r->requests / r->wall_s : 0,
            r->fresh_keys, r->payments);
    fprintf(f, "  %-22s", "");
    for (int a = 0; a < SK_ANSWERS; a++)
        fprintf(f, " %10s", sk_answer_names[a]);
    fprintf(f, "\n");
    for (int o = 0; o < SK_OPS; o++) {
        fprintf(f, "  %-22s", sk_op_names[o]);
        for (int a = 0; a < SK_ANSWERS; a++)
            fprintf(f, " %10ld", r->by[o][a]);
        fprintf(f, "\n");
    }
    fprintf(f, "RSS series (VmRSS every %d s):\n", c->sample_s);
    for (int i = 0; i < r->n_samples; i++)
        sk_print_sample(f, &r->samples[i]);
    if (r->base < 0) {
        fprintf(f, "verdict: FAIL (no sample after the warm-up of %d s: run longer)\n",
                c->warmup_ttls * c->ttl_s);
        return;
    }
    long base_kb = r->samples[r->base].rss_kb;
    fprintf(f, "verdict: %s: max RSS after the warm-up %ld kB, %+.1f %% of %ld kB at t=%ds "
               "(limit %+.0f %%, %.0f kB); %+.1f bytes per request from t=%ds to the end\n",
            r->pass ? "PASS" : "FAIL", r->max_after_kb, r->growth * 100, base_kb,
            r->samples[r->base].t_s, c->max_growth * 100,
            (double)base_kb * (1 + c->max_growth), r->bytes_per_request, r->samples[r->base].t_s);
}
