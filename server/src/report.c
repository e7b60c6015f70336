/* report.c -- the retry-behaviour report (see report.h). A request's identity is its
 * Idempotency-Key, else its orderId, else its paymentKey (docs/profiles.md §4), per route. A
 * failure event is a run of 5xx / 429 / dropped answers on a route with no success between them
 * (docs/admin.md §5). */
#include "report.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum kind { K_RETRIED_4XX, K_EARLY_RETRY, K_NEW_KEY_RESEND, K_KEY_REUSE, K_SYNC, K_STORM, K_N };

static const struct {
    const char *kind, *rule, *threshold;
} rules[K_N] = {
    {"retried_4xx", "the same request (same identity, same body) sent again after a 4xx other than 409 or 429", "1 resend"},
    {"early_retry", "resent before the Retry-After it was given had elapsed (measured from when that answer was sent)", "any resend earlier than Retry-After"},
    {"new_key_resend", "the same orderId or paymentKey confirmed again under a different Idempotency-Key, or none, while an earlier attempt was processing or had committed", "1 resend"},
    {"key_reuse", "one Idempotency-Key sent with a different body after its first request was stored", "1 request"},
    {"synchronized_retries", "after one failure event, at least 4 identities resent and more than half of those resends fell inside one 10 ms window", "4 identities, > 50% within 10 ms"},
    {"retry_storm", "one identity arrived more than 3 times within one failure event", "> 3 arrivals per event"},
};

struct finding {
    size_t count;
    const char *examples[10];
    size_t n_examples;
};

static const char *identity(const struct journal_entry *e)
{
    if (e->idempotency_key && *e->idempotency_key)
        return e->idempotency_key;
    if (e->order_id && *e->order_id)
        return e->order_id;
    return e->payment_key;
}

static bool same_identity(const struct journal_entry *a, const struct journal_entry *b)
{
    const char *x = identity(a), *y = identity(b);
    return a->route == b->route && x && y && strcmp(x, y) == 0;
}

static bool same_str(const char *a, const char *b)
{
    return a && b && strcmp(a, b) == 0;
}

static void note(struct finding *f, const struct journal_entry *e)
{
    f->count++;
    const char *ex = e->order_id ? e->order_id : identity(e);
    if (!ex)
        return;
    for (size_t i = 0; i < f->n_examples; i++)
        if (strcmp(f->examples[i], ex) == 0)
            return;
    if (f->n_examples < 10)
        f->examples[f->n_examples++] = ex;
}

static bool failed(const struct journal_entry *e)
{
    return e->ended_mono_ns &&
           (e->status >= 500 || e->status == 429 || e->outcome == OUT_DROPPED_REQUEST ||
            e->outcome == OUT_DROPPED_RESPONSE || e->delivered == DELIVERED_NO);
}

static bool succeeded(const struct journal_entry *e)
{
    return e->ended_mono_ns && e->status >= 200 && e->status < 300 &&
           e->delivered == DELIVERED_YES;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* One failure event on `route`: entries [from, to] in arrival order. */
static void judge_event(const struct journal_entry *v, size_t n, size_t from, size_t to,
                        struct finding *f)
{
    int route = v[from].route;
    /* retry_storm: arrivals per identity within the event. */
    for (size_t i = from; i <= to; i++) {
        if (v[i].route != route || !identity(&v[i]))
            continue;
        bool first = true;
        for (size_t k = from; k < i && first; k++)
            first = !same_identity(&v[k], &v[i]);
        if (!first)
            continue;
        size_t arrivals = 0;
        for (size_t k = i; k <= to; k++)
            arrivals += same_identity(&v[k], &v[i]);
        if (arrivals > 3)
            note(&f[K_STORM], &v[i]);
    }
    /* synchronized_retries: each failed identity's next arrival after its first failure. */
    int64_t *t = malloc((to - from + 1) * sizeof *t);
    if (!t)
        return;
    size_t nt = 0;
    const struct journal_entry *example = NULL;
    for (size_t i = from; i <= to; i++) {
        if (v[i].route != route || !failed(&v[i]) || !identity(&v[i]))
            continue;
        bool first = true;
        for (size_t k = from; k < i && first; k++)
            first = !(same_identity(&v[k], &v[i]) && failed(&v[k]));
        if (!first)
            continue;
        for (size_t k = i + 1; k < n; k++)
            if (same_identity(&v[k], &v[i])) {
                t[nt++] = v[k].arrived_mono_ns;
                example = &v[k];
                break;
            }
    }
    if (nt >= 4) {
        qsort(t, nt, sizeof *t, cmp_i64);
        size_t best = 0;
        for (size_t a = 0, b = 0; b < nt; b++) {
            while (t[b] - t[a] > 10 * 1000000)
                a++;
            if (b - a + 1 > best)
                best = b - a + 1;
        }
        if (best * 2 > nt)
            note(&f[K_SYNC], example);
    }
    free(t);
}

void report_render(struct buf *b, const struct journal_entry *v, size_t n)
{
    struct finding f[K_N];
    memset(f, 0, sizeof f);
    for (size_t i = 0; i < n; i++) {
        const struct journal_entry *e = &v[i];
        if (e->key_reuse)
            note(&f[K_KEY_REUSE], e);
        if (!identity(e))
            continue;
        /* The next arrival of the same identity on the same route. */
        const struct journal_entry *next = NULL;
        for (size_t k = i + 1; k < n && !next; k++)
            if (same_identity(&v[k], e))
                next = &v[k];
        /* Only an answer the client got can be resent "after" (a timed-out client that resends
         * never saw the 4xx or the Retry-After). */
        bool got = e->delivered == DELIVERED_YES;
        if (next && got && e->status >= 400 && e->status < 500 && e->status != 409 &&
            e->status != 429 && e->body_hash && next->body_hash == e->body_hash)
            note(&f[K_RETRIED_4XX], next);
        if (next && got && e->retry_after_s && e->sent_mono_ns &&
            next->arrived_mono_ns < e->sent_mono_ns + (int64_t)e->retry_after_s * 1000000000)
            note(&f[K_EARLY_RETRY], next);
        /* new_key_resend: a confirm of the same orderId or paymentKey under another key (or
         * none) while an earlier attempt was processing (not yet ended) or had committed. */
        if (e->route == 0 && (e->order_id || e->payment_key)) {
            for (size_t k = 0; k < i; k++) {
                const struct journal_entry *p = &v[k];
                if (p->route != 0 || !(same_str(p->order_id, e->order_id) ||
                                       same_str(p->payment_key, e->payment_key)))
                    continue;
                /* A missing key differs from every key, including another missing one
                 * (docs/admin.md §5): two keyless confirms are two attempts. */
                bool same_key = p->idempotency_key && e->idempotency_key &&
                                strcmp(p->idempotency_key, e->idempotency_key) == 0;
                if (same_key)
                    continue;
                bool processing = !p->ended_mono_ns || p->ended_mono_ns > e->arrived_mono_ns;
                /* Approved by it (whatever answer it got: a drop_response or a commit:true
                 * error hides a commit), or the replay of a success (not of a stored 4xx). */
                bool committed = p->committed || (p->outcome == OUT_REPLAYED &&
                                                  p->status >= 200 && p->status < 300);
                if ((processing && p->outcome != OUT_DROPPED_REQUEST &&
                     p->outcome != OUT_THROTTLED && p->outcome != OUT_CAPPED) ||
                    committed) {
                    note(&f[K_NEW_KEY_RESEND], e);
                    break;
                }
            }
        }
    }
    /* Failure events, per route, in arrival order. */
    for (int route = 0; route < 4; route++) {
        size_t start = SIZE_MAX, last = 0;
        for (size_t i = 0; i <= n; i++) {
            bool end = i == n;
            if (!end && v[i].route != route)
                continue;
            if (!end && failed(&v[i])) {
                if (start == SIZE_MAX)
                    start = i;
                last = i;
            } else if (end || succeeded(&v[i])) {
                if (start != SIZE_MAX)
                    judge_event(v, n, start, last, f);
                start = SIZE_MAX;
            }
        }
    }
    buf_adds(b, "{\"findings\":[");
    bool first = true;
    for (int k = 0; k < K_N; k++) {
        if (!f[k].count)
            continue;
        if (!first)
            buf_addc(b, ',');
        first = false;
        buf_addf(b, "{\"kind\":\"%s\",\"rule\":", rules[k].kind);
        buf_add_json_strz(b, rules[k].rule);
        buf_adds(b, ",\"threshold\":");
        buf_add_json_strz(b, rules[k].threshold);
        buf_addf(b, ",\"count\":%zu,\"examples\":[", f[k].count);
        for (size_t i = 0; i < f[k].n_examples; i++) {
            if (i)
                buf_addc(b, ',');
            buf_add_json_strz(b, f[k].examples[i]);
        }
        buf_adds(b, "]}");
    }
    buf_adds(b, "]}");
}
