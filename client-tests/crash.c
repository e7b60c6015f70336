/* crash.c -- the crash test (crash.h): SIGKILL fakegate mid-load, start it again on the same
 * --state-file, and check the ledger against every answer the clients received.
 *
 * The clients. Each thread owns the paymentKeys crash_<i> with i = thread (mod threads) and
 * takes each through three steps: a confirm, a partial cancel of 100 KRW and a cancel of the
 * rest, each under its own Idempotency-Key and resent under that key until it is answered, as
 * a correct client does after a timeout or a reset. A step is answered by a 200 or by any
 * other status (a violation: no step has a business reason to fail); a request that got no
 * HTTP answer (the server was killed holding it, the port was closed, the kept-alive
 * connection was dead) is resent at once, or after 10 ms while the port refuses.
 *
 * The kills. The coordinator kills the server with SIGKILL min_gap_ms .. max_gap_ms (seeded)
 * after each start, waits for it to die and starts it again on the same state file; clients
 * read the port afresh before every request. The profile holds confirms and cancels
 * 0 .. hold_ms, so kills land between a request's claim and its commit, and between a commit
 * and its answer.
 *
 * The check, on the last server. Every step's first 200 is the answer a client acted on, so
 * (1) a resend of every step under its key is answered 200 with the same bytes (the state file
 * kept the stored answer, or the step's claim was released and the request ran again for its
 * first answer); (2) the ledger holds exactly the payments the clients made, each charged once,
 * CANCELED with balance 0 and two cancels, whose transactionKeys and amounts are the ones the
 * cancel answers showed. */
#define _GNU_SOURCE
#include "crash.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define STEPS 3
#define REQUEST_TIMEOUT_MS 10000L
#define PARTIAL_CANCEL 100

void cr_config_default(cr_config *c)
{
    *c = (cr_config){.threads = 32, .payments = 5000, .kills = 20, .min_gap_ms = 150,
                     .max_gap_ms = 400, .hold_ms = 20, .seed = 7};
}

struct step {
    char *body;              /* the first 200's bytes (malloc'd), or NULL */
    size_t len;
    bool answered;
};

struct run {
    const cr_config *c;
    cr_result *out;
    struct step (*steps)[STEPS];
    atomic_int port;
    char auth[256];
    atomic_long requests, unanswered, refused, answered_200, resent_200;
    atomic_int workers_left;
    pthread_mutex_t vlock;
};

static void violation(struct run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void violation(struct run *r, const char *fmt, ...)
{
    pthread_mutex_lock(&r->vlock);
    if (r->out->violations++ == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->out->example, sizeof r->out->example, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&r->vlock);
}

static long amount_of(int i)
{
    return 1000 + i;
}

/* Step `step` of payment i as a request (path and body into the caller's buffers). */
static void step_request(int i, int step, char *path, size_t path_len, char *body,
                         size_t body_len, char *key, size_t key_len)
{
    if (step == 0) {
        snprintf(path, path_len, "/v1/payments/confirm");
        snprintf(body, body_len, "{\"paymentKey\":\"crash_%05d\",\"orderId\":\"crash-order-%05d\","
                 "\"amount\":%ld}", i, i, amount_of(i));
        snprintf(key, key_len, "crash_%05d-confirm", i);
    } else {
        snprintf(path, path_len, "/v1/payments/crash_%05d/cancel", i);
        if (step == 1)
            snprintf(body, body_len, "{\"cancelReason\":\"crash cancel 1\",\"cancelAmount\":%d}",
                     PARTIAL_CANCEL);
        else
            snprintf(body, body_len, "{\"cancelReason\":\"crash cancel 2\"}");
        snprintf(key, key_len, "crash_%05d-cancel-%d", i, step);
    }
}

/* Send step `step` of payment i until it is answered; a 200's bytes go to *keep (if not NULL),
 * else they are compared with the step's first 200. Returns the status. */
static long send_step(struct run *r, CURL *h, int i, int step, bool probe)
{
    char path[96], body[160], key[64], idem[96];
    step_request(i, step, path, sizeof path, body, sizeof body, key, sizeof key);
    snprintf(idem, sizeof idem, "Idempotency-Key: %s", key);
    const char *headers[] = {r->auth, idem, NULL};
    fg_request req = {.method = "POST", .path = path, .body = body, .headers = headers,
                      .timeout_ms = REQUEST_TIMEOUT_MS};
    bool lost = false;
    for (;;) {
        fg_server target = {.port = atomic_load(&r->port)};
        fg_response resp;
        fg_http(&target, h, &req, &resp);
        atomic_fetch_add(&r->requests, 1);
        long status = resp.status;
        if (status == 0) {
            /* Refused: fakegate is down, or libcurl's own retry of a request whose kept-alive
             * connection died with the server found the port closed. */
            bool refused = resp.curl_code == CURLE_COULDNT_CONNECT;
            atomic_fetch_add(refused ? &r->refused : &r->unanswered, 1);
            lost = true;
            fg_response_fini(&resp);
            if (refused)
                fg_pause_ms(10); /* the server is restarting: pace the resends */
            continue;
        }
        struct step *st = &r->steps[i][step];
        if (status == 200) {
            atomic_fetch_add(&r->answered_200, 1);
            if (lost)
                atomic_fetch_add(&r->resent_200, 1);
            if (!probe) {
                st->body = malloc(resp.body_len + 1);
                if (!st->body)
                    abort();
                memcpy(st->body, resp.body, resp.body_len + 1);
                st->len = resp.body_len;
                st->answered = true;
            } else if (resp.body_len != st->len || memcmp(resp.body, st->body, st->len) != 0) {
                violation(r, "%s: a resend after the run was answered other bytes than the "
                          "first 200 (%.200s, first %.200s)", key, resp.body, st->body);
            }
        } else {
            violation(r, "%s: answered %ld %.200s%s", key, status, resp.body,
                      probe ? " to the resend after the run" : "");
        }
        fg_response_fini(&resp);
        return status;
    }
}

struct worker {
    struct run *r;
    int index;
    pthread_t thread;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct run *r = w->r;
    CURL *h = curl_easy_init();
    if (!h)
        abort();
    for (int i = w->index; i < r->c->payments; i += r->c->threads)
        for (int step = 0; step < STEPS; step++)
            if (send_step(r, h, i, step, false) != 200)
                break; /* the rest of this payment would only add noise */
    curl_easy_cleanup(h);
    atomic_fetch_sub(&r->workers_left, 1);
    return NULL;
}

/* --- the coordinator ----------------------------------------------------------------------- */

static uint64_t next_rand(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static fg_server *start(const cr_config *c, const char *state, char err[FG_ERR_LEN])
{
    char profile[512];
    snprintf(profile, sizeof profile,
             "{\"name\":\"crash\",\"seed\":%llu,\"routes\":{\"default\":{\"latency\":{\"dist\":"
             "\"fixed\",\"ms\":0}},\"confirm\":{\"latency\":{\"dist\":\"uniform\",\"min_ms\":0,"
             "\"max_ms\":%ld}},\"cancel\":{\"latency\":{\"dist\":\"uniform\",\"min_ms\":0,"
             "\"max_ms\":%ld}}}}",
             (unsigned long long)c->seed, c->hold_ms, c->hold_ms);
    const char *args[] = {"--state-file", state, "--state-fsync",
                          c->fsync_always ? "always" : "never", "--consecutive-cancel-ms", "0",
                          "--session-ttl", "86400", NULL};
    fg_opts o = {.profile_json = profile, .args = args};
    return fg_start(&o, err);
}

/* What the restart's replay found (GET /healthz "state_file"). */
static void count_replay(struct run *r, const fg_server *s)
{
    fg_response resp;
    if (fg_get(s, "/healthz", &resp) == 0 && resp.json) {
        json_t *sf = json_object_get(resp.json, "state_file");
        r->out->released += (long)json_integer_value(json_object_get(sf, "released"));
        r->out->torn += json_integer_value(json_object_get(sf, "torn_bytes")) > 0;
    } else {
        violation(r, "GET /healthz after a restart failed");
    }
    fg_response_fini(&resp);
}

/* The ledger against the answers (the header's check, part 2). */
static void check_ledger(struct run *r, const fg_server *s)
{
    json_t *payments = fg_admin_payments(s, NULL);
    if (!payments) {
        violation(r, "GET /__admin/payments failed");
        return;
    }
    r->out->payments = (long)json_array_size(payments);
    bool *seen = calloc((size_t)r->c->payments, 1);
    size_t k;
    json_t *e;
    json_array_foreach(payments, k, e) {
        json_t *p = json_object_get(e, "payment");
        const char *pk = json_string_value(json_object_get(p, "paymentKey"));
        int i = -1, used = 0;
        if (!pk || sscanf(pk, "crash_%5d%n", &i, &used) != 1 || pk[used] || i < 0 ||
            i >= r->c->payments || seen[i]) {
            violation(r, "the ledger holds a payment no client made: %s", pk ? pk : "?");
            continue;
        }
        seen[i] = true;
        long charges = (long)json_integer_value(json_object_get(e, "charges"));
        json_t *cancels = json_object_get(p, "cancels");
        r->out->charges += charges;
        r->out->cancels += (long)json_array_size(cancels);
        const char *status = json_string_value(json_object_get(p, "status"));
        if (charges != 1 || !status || strcmp(status, "CANCELED") != 0 ||
            json_integer_value(json_object_get(p, "balanceAmount")) != 0 ||
            json_array_size(cancels) != 2) {
            violation(r, "%s: charges %ld, status %s, balance %lld, %zu cancels (want 1, "
                      "CANCELED, 0, 2)", pk, charges, status ? status : "?",
                      json_integer_value(json_object_get(p, "balanceAmount")),
                      json_array_size(cancels));
            continue;
        }
        for (int step = 1; step < STEPS; step++) {
            if (!r->steps[i][step].answered)
                continue; /* its answer was a violation already */
            json_t *answer = json_loads(r->steps[i][step].body, 0, NULL);
            json_t *acked = json_array_get(json_object_get(answer, "cancels"), (size_t)step - 1);
            json_t *have = json_array_get(cancels, (size_t)step - 1);
            const char *tk_a = json_string_value(json_object_get(acked, "transactionKey"));
            const char *tk_l = json_string_value(json_object_get(have, "transactionKey"));
            long long amount = json_integer_value(json_object_get(have, "cancelAmount"));
            long long want = step == 1 ? PARTIAL_CANCEL : amount_of(i) - PARTIAL_CANCEL;
            if (!tk_a || !tk_l || strcmp(tk_a, tk_l) != 0 || amount != want)
                violation(r, "%s: cancel %d in the ledger is %s of %lld KRW; its answer said "
                          "%s of %lld", pk, step, tk_l ? tk_l : "?", amount, tk_a ? tk_a : "?",
                          want);
            json_decref(answer);
        }
    }
    for (int i = 0; i < r->c->payments; i++)
        if (!seen[i])
            violation(r, "crash_%05d: answered, but not in the ledger", i);
    free(seen);
    json_decref(payments);
}

int cr_run(const cr_config *cfg, cr_result *out, char err[FG_ERR_LEN])
{
    const cr_config *c = cfg;
    if (c->threads < 1 || c->payments < 1 || c->payments > 99999 || c->kills < 0 ||
        c->min_gap_ms < 1 || c->max_gap_ms < c->min_gap_ms || c->hold_ms < 0) {
        snprintf(err, FG_ERR_LEN, "crash: threads, payments (1-99999) and gaps must be positive, "
                 "min_gap_ms <= max_gap_ms, kills and hold_ms not negative");
        return -1;
    }
    memset(out, 0, sizeof *out);
    char dir[] = "/tmp/fakegate-crash-XXXXXX", state[64];
    if (!mkdtemp(dir)) {
        snprintf(err, FG_ERR_LEN, "crash: mkdtemp: %s", strerror(errno));
        return -1;
    }
    snprintf(state, sizeof state, "%s/state.log", dir);
    int64_t t0 = fg_now_ns();
    fg_server *s = start(c, state, err);
    if (!s) {
        rmdir(dir);
        return -1;
    }
    struct run *r = calloc(1, sizeof *r);
    struct worker *w = calloc((size_t)c->threads, sizeof *w);
    if (!r || !w || !(r->steps = calloc((size_t)c->payments, sizeof *r->steps)))
        abort();
    r->c = c;
    r->out = out;
    atomic_store(&r->port, s->port);
    snprintf(r->auth, sizeof r->auth, "%s", s->auth_header);
    pthread_mutex_init(&r->vlock, NULL);
    atomic_store(&r->workers_left, c->threads);
    for (int t = 0; t < c->threads; t++) {
        w[t] = (struct worker){.r = r, .index = t};
        if (pthread_create(&w[t].thread, NULL, worker_main, &w[t]) != 0)
            abort();
    }
    uint64_t rng = c->seed;
    int rc = 0;
    for (int k = 0; k < c->kills && atomic_load(&r->workers_left) > 0; k++) {
        long gap = c->min_gap_ms +
                   (long)(next_rand(&rng) % (uint64_t)(c->max_gap_ms - c->min_gap_ms + 1));
        fg_pause_ms(gap); /* the kill's moment, seeded: not a synchronisation */
        if (atomic_load(&r->workers_left) == 0)
            break;
        int64_t k0 = fg_now_ns();
        fg_kill(s, 9);
        fg_wait(s, 5000);
        fg_free(s);
        out->kills++;
        if (!(s = start(c, state, err))) {
            rc = -1;
            break;
        }
        double ms = (double)(fg_now_ns() - k0) / 1e6;
        if (ms > out->replay_ms_max)
            out->replay_ms_max = ms;
        atomic_store(&r->port, s->port);
        count_replay(r, s);
        if (c->verbose)
            fprintf(stderr, "crash: kill %d/%d after %ld ms; restarted in %.1f ms; %ld requests "
                    "so far, %ld unanswered\n", k + 1, c->kills, gap, ms,
                    atomic_load(&r->requests), atomic_load(&r->unanswered));
    }
    if (rc != 0)
        atomic_store(&r->port, 1); /* no server: the workers' requests are refused ... */
    for (int t = 0; t < c->threads && rc == 0; t++)
        pthread_join(w[t].thread, NULL);
    if (rc == 0) {
        CURL *h = curl_easy_init();
        for (int i = 0; i < c->payments; i++)
            for (int step = 0; step < STEPS && r->steps[i][step].answered; step++)
                send_step(r, h, i, step, true);
        curl_easy_cleanup(h);
        check_ledger(r, s);
        struct stat sb;
        out->state_bytes = stat(state, &sb) == 0 ? (long)sb.st_size : -1;
        if (fg_stop(s) != 0)
            violation(r, "fakegate did not exit 0 on SIGTERM at the end");
    }
    /* ... and, the run failed, the process exits with the workers still trying (cr_run's caller
     * reports the error and exits). */
    out->requests = atomic_load(&r->requests);
    out->unanswered = atomic_load(&r->unanswered);
    out->refused = atomic_load(&r->refused);
    out->answered_200 = atomic_load(&r->answered_200);
    out->resent_200_same = atomic_load(&r->resent_200);
    out->wall_s = (double)(fg_now_ns() - t0) / 1e9;
    if (rc == 0) {
        fg_free(s);
        for (int i = 0; i < c->payments; i++)
            for (int step = 0; step < STEPS; step++)
                free(r->steps[i][step].body);
        free(r->steps);
        pthread_mutex_destroy(&r->vlock);
        free(r);
        free(w);
    }
    unlink(state);
    rmdir(dir);
    return rc;
}

void cr_print(FILE *f, const cr_config *c, const cr_result *r)
{
    fprintf(f, "crash test: %d client threads, %d paymentKeys (a confirm and two cancels each), "
            "%d SIGKILLs %ld-%ld ms apart, holds 0-%ld ms, --state-fsync %s, seed %llu\n",
            c->threads, c->payments, c->kills, c->min_gap_ms, c->max_gap_ms, c->hold_ms,
            c->fsync_always ? "always" : "never", (unsigned long long)c->seed);
    fprintf(f, "  requests           %ld: %ld cut off (reset or closed unanswered), %ld refused "
            "(fakegate down); each resent under its key\n",
            r->requests, r->unanswered, r->refused);
    fprintf(f, "  200s               %ld (%ld of them to a resend after a lost answer)\n",
            r->answered_200, r->resent_200_same);
    fprintf(f, "  kills              %d; restarts released %ld PROCESSING records, %ld dropped "
            "an incomplete last line; slowest restart %.1f ms\n",
            r->kills, r->released, r->torn, r->replay_ms_max);
    fprintf(f, "  ledger             %ld payments, %ld charges, %ld cancels\n", r->payments,
            r->charges, r->cancels);
    fprintf(f, "  state file         %ld bytes\n", r->state_bytes);
    fprintf(f, "  violations         %ld%s%s\n", r->violations, r->violations ? ": " : "",
            r->violations ? r->example : "");
    fprintf(f, "  wall time          %.1f s\n", r->wall_s);
}
