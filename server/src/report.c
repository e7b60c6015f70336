/* report.c -- the retry-behaviour report (see report.h), judged as requests happen. A request's
 * identity is its Idempotency-Key, else its orderId, else its paymentKey (docs/profiles.md §4),
 * per route; a resend is its identity's next arrival; a failure event is a run of failed answers
 * on a route (5xx, 429, dropped, or not delivered) with no delivered 2xx between them
 * (docs/admin.md §5). Invariants: an orderId's or paymentKey's record lives until the next
 * reset; an identity's record lives until then or until it has been idle for idle_us with no
 * mark pinning it (a mark points at it from identify to end), and is then on the spare list of
 * its size class, never on a hash chain; an event lives while it is open or an identity still
 * owes it a resend. */
#define _GNU_SOURCE /* MAP_ANONYMOUS, MAP_POPULATE */
#include "report.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common.h"
#include "rng.h"

enum kind { K_RETRIED_4XX, K_EARLY_RETRY, K_NEW_KEY_RESEND, K_KEY_REUSE, K_SYNC, K_STORM, K_N };
_Static_assert(K_N == REPORT_KINDS, "one tally per kind");

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

#define ROUTE_CONFIRM_ID 0         /* enum route_id's ROUTE_CONFIRM (profile.h) */
#define SYNC_WINDOW_NS (10 * INT64_C(1000000))
#define STORM_ARRIVALS 4           /* "more than 3" */
#define FIRST_BUCKETS 64 /* doubled as records come (grow): a tenant that sent a few requests
                             holds 512 bytes of table, not 8 KiB */

enum rec_kind { REC_ID = 0, REC_ORDER, REC_PK };

/* A confirm processing now under one key (or none), and how many. */
struct proc {
    uint64_t key_hash;
    bool has_key;
    uint32_t n;
};

struct report_rec {
    struct report_rec *next;       /* hash chain; once aged out, the spare list of its class */
    struct report_rec *older, *newer; /* REC_ID: the identities by last arrival */
    int64_t used_us;               /* REC_ID: its last arrival (gateway clock, µs) */
    uint64_t hash;
    union {
        struct {                   /* REC_ID: one identity on one route */
            int64_t sent_ns;       /* its last answer, not yet followed by a resend: */
            uint64_t body_hash;
            int64_t retry_until_ns; /* told to wait until then (monotonic; 0: not told) */
            int16_t status;
            uint8_t delivered;
            bool answered;
            uint32_t storm_event, storm_n; /* arrivals within failure event storm_event */
            uint32_t failed_event; /* the last event it failed in */
            struct report_event *owes; /* the event awaiting its next arrival, or NULL */
        } id;
        struct {                   /* REC_ORDER, REC_PK: the confirms of one orderId/paymentKey */
            struct proc *proc;     /* processing now, one element per distinct key */
            uint32_t n_proc, cap_proc;
            uint64_t commit_key;   /* the first key a commit came under (commit_keyed) */
            bool commit_keyed, commit_other, commit_keyless;
        } pay;
    } u;
    uint8_t kind, route;
    uint8_t cls;                   /* its size class, or REPORT_SPARE_CLASSES: allocated alone */
    uint32_t len;
    uint32_t pins;                 /* REC_ID: requests in progress whose mark holds it */
    char key[];
};

struct report_event {
    struct report_event *prev, *next; /* the unfinished list */
    int route;
    uint32_t seq;
    bool open;
    size_t owed;                   /* identities that failed in it and have not arrived since */
    int64_t *t;                    /* their next arrivals (monotonic ns) */
    size_t nt, cap;
    char *example;                 /* the last of those arrivals' example */
};

/* --- identities and examples ---------------------------------------------------------------- */

static const char *identity(const struct journal_entry *e)
{
    if (e->idempotency_key && *e->idempotency_key)
        return e->idempotency_key;
    if (e->order_id && *e->order_id)
        return e->order_id;
    return e->payment_key;
}

static const char *example_of(const struct journal_entry *e)
{
    return e->order_id ? e->order_id : identity(e);
}

/* Add `ex` (may be NULL) to the examples if new and there is room; `own`: copy it. */
static void add_example(char **examples, size_t *n, const char *ex, bool own)
{
    if (!ex)
        return;
    for (size_t i = 0; i < *n; i++)
        if (strcmp(examples[i], ex) == 0)
            return;
    if (*n == 10)
        return;
    char *c = own ? strdup(ex) : (char *)ex;
    if (c)
        examples[(*n)++] = c;
}

static void note(struct report *rp, enum kind k, const char *ex)
{
    rp->f[k].count++;
    add_example(rp->f[k].examples, &rp->f[k].n_examples, ex, true);
}

/* --- the identity table --------------------------------------------------------------------- */

static uint64_t rec_hash(int kind, int route, const char *s, size_t len)
{
    return hash64(s, len, (uint64_t)(kind * REPORT_ROUTES + route) + 1);
}

/* Records come from chunks, each mapped and faulted in at once (one system call instead of a
 * page fault per 4 KiB on the request path), are reused through the spare lists when an
 * identity ages out (rec_alloc), and are unmapped only all together by a reset: a
 * calloc per record cost a quarter of the confirm throughput (40 k -> 30 k req/s at c50, unique
 * keys: three records per confirm). A report starts with a one-page chunk (about 30 records,
 * 10 confirms) and each new chunk is twice the last, up to 1 MiB: every tenant has a report,
 * and one that sent a few requests must not hold a whole faulted-in MiB (it did: 1 MiB per
 * idle tenant, `make bench` scenario 8). A busy report reaches 1 MiB chunks after nine
 * mappings, which the kernel merges with their neighbours as a rule (2000 one-chunk tenants:
 * about 200 mappings in all). */
#define FIRST_CHUNK_BYTES ((size_t)4 << 10)
#define CHUNK_BYTES ((size_t)1 << 20)

struct report_chunk {
    struct report_chunk *prev;
    size_t bytes;                  /* the mapping's size, this header included */
};

static void *chunk_alloc(struct report *rp, size_t size)
{
    size = (size + 15) & ~(size_t)15;
    if (!rp->chunks || rp->chunk_used + size > rp->chunk_cap) {
        size_t want = rp->chunk_next ? rp->chunk_next : FIRST_CHUNK_BYTES;
        size_t bytes = size + sizeof(struct report_chunk) > want
                           ? size + sizeof(struct report_chunk)
                           : want;
        struct report_chunk *c = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
        if (c == MAP_FAILED)
            return NULL;
        c->prev = rp->chunks;
        c->bytes = bytes;
        rp->chunks = c;
        rp->chunk_used = (sizeof *c + 15) & ~(size_t)15;
        rp->chunk_cap = bytes;
        rp->chunk_next = want < CHUNK_BYTES ? 2 * want : CHUNK_BYTES;
    }
    void *p = (char *)rp->chunks + rp->chunk_used;
    rp->chunk_used += size;
    return p; /* zeroed: fresh anonymous memory */
}

static void chunks_free(struct report *rp)
{
    for (struct report_chunk *c = rp->chunks, *prev; c; c = prev) {
        prev = c->prev;
        munmap(c, c->bytes);
    }
    rp->chunks = NULL;
    rp->chunk_used = rp->chunk_cap = rp->chunk_next = 0;
}

static bool grow(struct report *rp)
{
    size_t n = rp->n_buckets * 2;
    struct report_rec **b = malloc(n * sizeof *b);
    if (!b)
        return false;
    memset(b, 0, n * sizeof *b); /* written pages, not the shared zero page the rehash's reads
                                    would map and then fault out again */
    for (size_t i = 0; i < rp->n_buckets; i++)
        for (struct report_rec *r = rp->buckets[i], *next; r; r = next) {
            next = r->next;
            r->next = b[r->hash & (n - 1)];
            b[r->hash & (n - 1)] = r;
        }
    free(rp->buckets);
    rp->buckets = b;
    rp->n_buckets = n;
    return true;
}

/* A zeroed record of `size` bytes: an aged-out one of its size class if there is one, else
 * from the chunks; a record larger than every class is allocated alone (and freed when it
 * goes). */
static struct report_rec *rec_alloc(struct report *rp, size_t size)
{
    size_t rounded = (size + 15) & ~(size_t)15, cls = rounded / 16 - 1;
    struct report_rec *r;
    if (cls >= REPORT_SPARE_CLASSES) {
        r = calloc(1, size);
        if (r)
            r->cls = REPORT_SPARE_CLASSES;
        return r;
    }
    if ((r = rp->spare[cls])) {
        rp->spare[cls] = r->next;
        memset(r, 0, rounded);
    } else if (!(r = chunk_alloc(rp, rounded))) {
        return NULL;
    }
    r->cls = (uint8_t)cls;
    return r;
}

/* Give r's memory back: to its class's spare list, or to malloc. */
static void rec_release(struct report *rp, struct report_rec *r)
{
    if (r->cls == REPORT_SPARE_CLASSES) {
        free(r);
        return;
    }
    r->next = rp->spare[r->cls];
    rp->spare[r->cls] = r;
}

static void lru_unlink(struct report *rp, struct report_rec *r)
{
    if (r->older)
        r->older->newer = r->newer;
    else
        rp->oldest = r->newer;
    if (r->newer)
        r->newer->older = r->older;
    else
        rp->newest = r->older;
    r->older = r->newer = NULL;
}

static void lru_append(struct report *rp, struct report_rec *r)
{
    r->newer = NULL;
    r->older = rp->newest;
    if (rp->newest)
        rp->newest->newer = r;
    else
        rp->oldest = r;
    rp->newest = r;
}

/* Take r off its hash chain. */
static void chain_remove(struct report *rp, struct report_rec *r)
{
    struct report_rec **pp = &rp->buckets[r->hash & (rp->n_buckets - 1)];
    while (*pp != r)
        pp = &(*pp)->next;
    *pp = r->next;
}

/* The record of (kind, route, s), created if new; NULL when the bound leaves no room (then
 * *refused is set) or memory ran out. */
static struct report_rec *rec_get(struct report *rp, int kind, int route, const char *s,
                                  bool *refused)
{
    if (!rp->n_buckets) /* a reset ran out of memory: judge nothing new */
        return NULL;
    size_t len = strlen(s);
    uint64_t h = rec_hash(kind, route, s, len);
    for (struct report_rec *r = rp->buckets[h & (rp->n_buckets - 1)]; r; r = r->next)
        if (r->hash == h && r->kind == kind && r->route == route && r->len == len &&
            memcmp(r->key, s, len) == 0)
            return r;
    if (rp->n_recs >= rp->max_identities || len > UINT32_MAX) {
        *refused = true;
        return NULL;
    }
    if (rp->n_recs >= rp->n_buckets && !grow(rp))
        return NULL;
    struct report_rec *r = rec_alloc(rp, sizeof *r + len + 1);
    if (!r)
        return NULL;
    r->hash = h;
    r->kind = (uint8_t)kind;
    r->route = (uint8_t)route;
    r->len = (uint32_t)len;
    memcpy(r->key, s, len + 1);
    size_t i = h & (rp->n_buckets - 1);
    r->next = rp->buckets[i];
    rp->buckets[i] = r;
    rp->n_recs++;
    if (kind == REC_ID)
        lru_append(rp, r);
    return r;
}

/* --- confirms of one orderId or paymentKey (new_key_resend) --------------------------------- */

static bool other_key(bool has_a, uint64_t a, bool has_b, uint64_t b)
{
    /* A missing key differs from every key, including another missing one (docs/admin.md §5). */
    return !has_a || !has_b || a != b;
}

/* An earlier confirm under another key (or none) is processing, or one committed. */
static bool conflicts(const struct report_rec *r, const struct report_mark *m)
{
    if (!r)
        return false;
    for (uint32_t i = 0; i < r->u.pay.n_proc; i++)
        if (other_key(r->u.pay.proc[i].has_key, r->u.pay.proc[i].key_hash, m->has_key,
                      m->key_hash))
            return true;
    if (r->u.pay.commit_keyless)
        return true;
    return r->u.pay.commit_keyed &&
           (r->u.pay.commit_other || other_key(true, r->u.pay.commit_key, m->has_key, m->key_hash));
}

static void proc_add(struct report_rec *r, const struct report_mark *m)
{
    if (!r)
        return;
    for (uint32_t i = 0; i < r->u.pay.n_proc; i++) {
        struct proc *p = &r->u.pay.proc[i];
        if (p->has_key == m->has_key && (!p->has_key || p->key_hash == m->key_hash)) {
            p->n++;
            return;
        }
    }
    if (r->u.pay.n_proc == r->u.pay.cap_proc) {
        uint32_t cap = r->u.pay.cap_proc ? r->u.pay.cap_proc * 2 : 1;
        struct proc *np = realloc(r->u.pay.proc, cap * sizeof *np);
        if (!np)
            return;
        r->u.pay.proc = np;
        r->u.pay.cap_proc = cap;
    }
    r->u.pay.proc[r->u.pay.n_proc++] = (struct proc){m->key_hash, m->has_key, 1};
}

static void proc_remove(struct report_rec *r, const struct report_mark *m)
{
    if (!r)
        return;
    for (uint32_t i = 0; i < r->u.pay.n_proc; i++) {
        struct proc *p = &r->u.pay.proc[i];
        if (p->has_key != m->has_key || (p->has_key && p->key_hash != m->key_hash))
            continue;
        if (--p->n == 0) {
            *p = r->u.pay.proc[--r->u.pay.n_proc];
            if (r->u.pay.n_proc == 0) { /* most orders have one confirm at a time */
                free(r->u.pay.proc);
                r->u.pay.proc = NULL;
                r->u.pay.cap_proc = 0;
            }
        }
        return;
    }
}

static void commit_add(struct report_rec *r, const struct report_mark *m)
{
    if (!r)
        return;
    if (!m->has_key) {
        r->u.pay.commit_keyless = true;
    } else if (!r->u.pay.commit_keyed) {
        r->u.pay.commit_keyed = true;
        r->u.pay.commit_key = m->key_hash;
    } else if (r->u.pay.commit_key != m->key_hash) {
        r->u.pay.commit_other = true;
    }
}

/* --- failure events (synchronized_retries, retry_storm) ------------------------------------- */

static bool failed(const struct journal_entry *e)
{
    return e->status >= 500 || e->status == 429 || e->outcome == OUT_DROPPED_REQUEST ||
           e->outcome == OUT_DROPPED_RESPONSE || e->delivered == DELIVERED_NO;
}

static bool succeeded(const struct journal_entry *e)
{
    return e->status >= 200 && e->status < 300 && e->delivered == DELIVERED_YES;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* At least 4 identities resent after the event and more than half of those resends fell
 * inside one 10 ms window. Sorts ev->t. */
static bool bunched(struct report_event *ev)
{
    if (ev->nt < 4)
        return false;
    qsort(ev->t, ev->nt, sizeof *ev->t, cmp_i64);
    size_t best = 0;
    for (size_t a = 0, b = 0; b < ev->nt; b++) {
        while (ev->t[b] - ev->t[a] > SYNC_WINDOW_NS)
            a++;
        if (b - a + 1 > best)
            best = b - a + 1;
    }
    return best * 2 > ev->nt;
}

static void event_free(struct report_event *ev)
{
    free(ev->t);
    free(ev->example);
    free(ev);
}

static struct report_event *event_open(struct report *rp, int route)
{
    struct report_event *ev = calloc(1, sizeof *ev);
    if (!ev)
        return NULL;
    ev->route = route;
    ev->seq = ++rp->event_seq;
    if (ev->seq == 0) /* 0 means "none" in the records */
        ev->seq = ++rp->event_seq;
    ev->open = true;
    ev->next = rp->unfinished;
    if (ev->next)
        ev->next->prev = ev;
    rp->unfinished = ev;
    rp->open[route] = ev;
    return ev;
}

/* Closed, and no identity owes it a resend: judge it for good and free it. */
static void event_finish(struct report *rp, struct report_event *ev)
{
    if (ev->open || ev->owed)
        return;
    if (bunched(ev))
        note(rp, K_SYNC, ev->example);
    if (ev->prev)
        ev->prev->next = ev->next;
    else
        rp->unfinished = ev->next;
    if (ev->next)
        ev->next->prev = ev->prev;
    event_free(ev);
}

static void event_add(struct report_event *ev, int64_t t, const char *example)
{
    if (ev->nt == ev->cap) {
        size_t cap = ev->cap ? ev->cap * 2 : 8;
        int64_t *nt = realloc(ev->t, cap * sizeof *nt);
        if (!nt)
            return;
        ev->t = nt;
        ev->cap = cap;
    }
    ev->t[ev->nt++] = t;
    if (example) {
        char *c = strdup(example);
        if (c) {
            free(ev->example);
            ev->example = c;
        }
    }
}

/* One more arrival of rec's identity within ev, unless this request was counted in it. */
static void storm_count(struct report *rp, struct report_rec *rec, const struct report_event *ev,
                        struct report_mark *m, const struct journal_entry *e)
{
    if (m->storm_event == ev->seq)
        return;
    m->storm_event = ev->seq;
    if (rec->u.id.storm_event != ev->seq) {
        rec->u.id.storm_event = ev->seq;
        rec->u.id.storm_n = 0;
    }
    if (++rec->u.id.storm_n == STORM_ARRIVALS)
        note(rp, K_STORM, example_of(e));
}

/* --- aging: identities no request used for idle_us ------------------------------------------ */

static bool idle(const struct report *rp, const struct report_rec *r, int64_t now_us)
{
    return rp->idle_us > 0 && now_us - r->used_us >= rp->idle_us;
}

/* Forget what an identity's next arrival would be judged against: its last answer and the
 * failure event owing its resend (which is judged now if nothing else holds it open). */
static void forget_id(struct report *rp, struct report_rec *r)
{
    struct report_event *owed = r->u.id.owes;
    memset(&r->u.id, 0, sizeof r->u.id);
    if (owed) {
        owed->owed--;
        event_finish(rp, owed);
    }
}

size_t report_sweep(struct report *rp, int64_t now_us, size_t budget, bool *more)
{
    size_t gone = 0;
    if (more)
        *more = false;
    pthread_mutex_lock(&rp->lock);
    struct report_rec *moved = NULL; /* the first pinned record moved to the newest end */
    while (rp->oldest && rp->oldest != moved && idle(rp, rp->oldest, now_us)) {
        if (budget-- == 0) {
            if (more)
                *more = true;
            break;
        }
        struct report_rec *r = rp->oldest;
        lru_unlink(rp, r);
        if (r->pins) { /* a request of it is in progress: looked at again once it is idle */
            lru_append(rp, r);
            if (!moved)
                moved = r;
            continue;
        }
        forget_id(rp, r);
        chain_remove(rp, r);
        rp->n_recs--;
        rec_release(rp, r);
        gone++;
    }
    pthread_mutex_unlock(&rp->lock);
    return gone;
}

size_t report_identities(struct report *rp)
{
    pthread_mutex_lock(&rp->lock);
    size_t n = rp->n_recs;
    pthread_mutex_unlock(&rp->lock);
    return n;
}

/* --- the three steps ------------------------------------------------------------------------ */

/* e arrives as the next arrival of rec's identity: judge it against that identity's last
 * answer, pay what the identity owed a failure event, and count it in the open one. */
static void resend(struct report *rp, struct report_rec *rec, struct report_mark *m,
                   const struct journal_entry *e)
{
    if (rec->u.id.answered) {
        rec->u.id.answered = false;
        /* Only an answer the client got can be resent "after" (a timed-out client that resends
         * never saw the 4xx or the Retry-After). */
        bool got = rec->u.id.delivered == DELIVERED_YES;
        int st = rec->u.id.status;
        if (got && st >= 400 && st < 500 && st != 409 && st != 429 && rec->u.id.body_hash &&
            e->body_hash == rec->u.id.body_hash)
            note(rp, K_RETRIED_4XX, example_of(e));
        if (got && rec->u.id.retry_until_ns && e->arrived_mono_ns < rec->u.id.retry_until_ns)
            note(rp, K_EARLY_RETRY, example_of(e));
    }
    struct report_event *owed = rec->u.id.owes;
    if (owed) {
        rec->u.id.owes = NULL;
        event_add(owed, e->arrived_mono_ns, example_of(e));
        owed->owed--;
        event_finish(rp, owed);
    }
    if (rp->open[rec->route])
        storm_count(rp, rec, rp->open[rec->route], m, e);
}

static void identify_locked(struct report *rp, struct report_mark *m,
                            const struct journal_entry *e, bool will_process)
{
    m->identified = true;
    m->epoch = rp->epoch;
    m->body_hash = e->body_hash;
    if (e->route < 0 || e->route >= REPORT_ROUTES) /* route other: nothing to judge */
        return;
    bool refused = false;
    const char *ident = identity(e);
    if (ident && (m->id_rec = rec_get(rp, REC_ID, e->route, ident, &refused))) {
        struct report_rec *rec = m->id_rec;
        if (!rec->pins && idle(rp, rec, m->at_us))
            forget_id(rp, rec); /* as the sweep would have: this is a first arrival */
        if (m->at_us > rec->used_us)
            rec->used_us = m->at_us;
        lru_unlink(rp, rec);
        lru_append(rp, rec);
        rec->pins++;
        resend(rp, rec, m, e);
    }
    if (e->route == ROUTE_CONFIRM_ID && (e->order_id || e->payment_key)) {
        m->has_key = e->idempotency_key != NULL;
        m->key_hash = m->has_key ? hash64(e->idempotency_key, strlen(e->idempotency_key), 0) : 0;
        if (e->order_id)
            m->order_rec = rec_get(rp, REC_ORDER, e->route, e->order_id, &refused);
        if (e->payment_key)
            m->pk_rec = rec_get(rp, REC_PK, e->route, e->payment_key, &refused);
        if (conflicts(m->order_rec, m) || conflicts(m->pk_rec, m))
            note(rp, K_NEW_KEY_RESEND, example_of(e));
        if (will_process) {
            proc_add(m->order_rec, m);
            proc_add(m->pk_rec, m);
            m->processing = true;
        }
    }
    if (refused)
        rp->unjudged++;
}

void report_begin(struct report *rp, struct report_mark *m, uint64_t id, int64_t at_us)
{
    (void)rp;
    memset(m, 0, sizeof *m);
    m->id = id;
    m->at_us = at_us;
}

void report_identify(struct report *rp, struct report_mark *m, const struct journal_entry *e,
                     bool will_process)
{
    pthread_mutex_lock(&rp->lock);
    if (m->id >= rp->first_id && !m->identified)
        identify_locked(rp, m, e, will_process);
    pthread_mutex_unlock(&rp->lock);
}

void report_end(struct report *rp, struct report_mark *m, const struct journal_entry *e)
{
    pthread_mutex_lock(&rp->lock);
    /* Begun before the last reset, or identified before it (a request that arrived while the
     * reset ran): it belongs to that run, and its records are gone. */
    if (m->id < rp->first_id || (m->identified && m->epoch != rp->epoch)) {
        pthread_mutex_unlock(&rp->lock);
        return;
    }
    if (!m->identified)
        identify_locked(rp, m, e, false);
    rp->judged++;
    if (e->key_reuse)
        note(rp, K_KEY_REUSE, example_of(e));
    if (m->processing) {
        proc_remove(m->order_rec, m);
        proc_remove(m->pk_rec, m);
        m->processing = false;
    }
    /* Approved by it (whatever answer it got: a drop_response or a commit:true error hides a
     * commit), or the replay of a success (not of a stored 4xx). */
    if (e->committed || (e->outcome == OUT_REPLAYED && e->status >= 200 && e->status < 300)) {
        commit_add(m->order_rec, m);
        commit_add(m->pk_rec, m);
    }
    struct report_rec *rec = m->id_rec;
    if (rec) {
        rec->u.id.answered = true;
        rec->u.id.sent_ns = e->sent_mono_ns;
        rec->u.id.body_hash = e->body_hash ? e->body_hash : m->body_hash;
        /* Seconds count from when the answer was sent; an http-date names its own instant. */
        rec->u.id.retry_until_ns =
            e->retry_after_until_mono_ns ? e->retry_after_until_mono_ns
            : e->retry_after_s && e->sent_mono_ns
                ? e->sent_mono_ns + (int64_t)e->retry_after_s * INT64_C(1000000000)
                : 0;
        rec->u.id.status = (int16_t)e->status;
        rec->u.id.delivered = (uint8_t)e->delivered;
    }
    if (e->route >= 0 && e->route < REPORT_ROUTES) {
        struct report_event *ev = rp->open[e->route];
        if (failed(e)) {
            if (!ev)
                ev = event_open(rp, e->route);
            if (ev && rec) {
                storm_count(rp, rec, ev, m, e);
                if (rec->u.id.failed_event != ev->seq) { /* its first failure in ev */
                    rec->u.id.failed_event = ev->seq;
                    if (!rec->u.id.owes) {
                        rec->u.id.owes = ev;
                        ev->owed++;
                    }
                }
            }
        } else if (succeeded(e) && ev) {
            ev->open = false;
            rp->open[e->route] = NULL;
            event_finish(rp, ev);
        }
    }
    if (rec) { /* it may age out from now on */
        rec->pins--;
        m->id_rec = NULL;
    }
    pthread_mutex_unlock(&rp->lock);
}

/* --- lifecycle ------------------------------------------------------------------------------ */

static int state_init(struct report *rp)
{
    rp->buckets = calloc(FIRST_BUCKETS, sizeof *rp->buckets);
    rp->n_buckets = rp->buckets ? FIRST_BUCKETS : 0;
    return rp->buckets ? 0 : -1;
}

static void state_fini(struct report *rp)
{
    for (size_t i = 0; i < rp->n_buckets; i++)
        for (struct report_rec *r = rp->buckets[i], *next; r; r = next) {
            next = r->next;
            if (r->kind != REC_ID)
                free(r->u.pay.proc);
            if (r->cls == REPORT_SPARE_CLASSES)
                free(r);
        }
    chunks_free(rp); /* the spare lists too: they are in the chunks */
    memset(rp->spare, 0, sizeof rp->spare);
    rp->oldest = rp->newest = NULL;
    free(rp->buckets);
    rp->buckets = NULL;
    rp->n_buckets = rp->n_recs = 0;
    for (struct report_event *ev = rp->unfinished, *next; ev; ev = next) {
        next = ev->next;
        event_free(ev);
    }
    rp->unfinished = NULL;
    memset(rp->open, 0, sizeof rp->open);
    for (int k = 0; k < K_N; k++)
        for (size_t i = 0; i < rp->f[k].n_examples; i++)
            free(rp->f[k].examples[i]);
    memset(rp->f, 0, sizeof rp->f);
    rp->judged = rp->unjudged = 0;
}

int report_init(struct report *rp, size_t max_identities, int64_t since_unix_us,
                uint64_t first_id, int64_t idle_us)
{
    memset(rp, 0, sizeof *rp);
    pthread_mutex_init(&rp->lock, NULL);
    rp->max_identities = max_identities ? max_identities : 1;
    rp->idle_us = idle_us > 0 ? idle_us : 0;
    rp->since_unix_us = since_unix_us;
    rp->first_id = first_id;
    return state_init(rp);
}

void report_fini(struct report *rp)
{
    state_fini(rp);
    pthread_mutex_destroy(&rp->lock);
}

void report_reset(struct report *rp, int64_t since_unix_us, uint64_t first_id)
{
    pthread_mutex_lock(&rp->lock);
    state_fini(rp);
    state_init(rp); /* out of memory: no buckets, and rec_get creates nothing */
    rp->since_unix_us = since_unix_us;
    rp->first_id = first_id;
    rp->epoch++;
    pthread_mutex_unlock(&rp->lock);
}

/* --- rendering ------------------------------------------------------------------------------ */

/* The findings as of now, added into v (lock held): the tallies, and the events not yet
 * finished judged as they stand. Examples are copied when `own` (v outlives the lock). */
static void collect_findings(struct report *rp, struct report_finding v[K_N], bool own)
{
    for (int k = 0; k < K_N; k++) {
        v[k].count += rp->f[k].count;
        for (size_t i = 0; i < rp->f[k].n_examples; i++)
            add_example(v[k].examples, &v[k].n_examples, rp->f[k].examples[i], own);
    }
    for (struct report_event *ev = rp->unfinished; ev; ev = ev->next)
        if (bunched(ev)) {
            v[K_SYNC].count++;
            add_example(v[K_SYNC].examples, &v[K_SYNC].n_examples, ev->example, own);
        }
}

static void emit_findings(const struct report_finding v[K_N], struct buf *b)
{
    buf_adds(b, "{\"findings\":[");
    bool first = true;
    for (int k = 0; k < K_N; k++) {
        if (!v[k].count)
            continue;
        if (!first)
            buf_addc(b, ',');
        first = false;
        buf_addf(b, "{\"kind\":\"%s\",\"rule\":", rules[k].kind);
        buf_add_json_strz(b, rules[k].rule);
        buf_adds(b, ",\"threshold\":");
        buf_add_json_strz(b, rules[k].threshold);
        buf_addf(b, ",\"count\":%zu,\"examples\":[", v[k].count);
        for (size_t i = 0; i < v[k].n_examples; i++) {
            if (i)
                buf_addc(b, ',');
            buf_add_json_strz(b, v[k].examples[i]);
        }
        buf_adds(b, "]}");
    }
    buf_addc(b, ']');
}

void report_render_state(struct report *rp, struct buf *b)
{
    pthread_mutex_lock(&rp->lock);
    struct report_finding v[K_N];
    memset(v, 0, sizeof v);
    collect_findings(rp, v, false);
    emit_findings(v, b);
    buf_addf(b, ",\"judged_requests\":%llu,\"complete\":%s", (unsigned long long)rp->judged,
             rp->unjudged ? "false" : "true");
    if (rp->unjudged) {
        buf_addf(b, ",\"reason\":\"more identities than --report-max-identities (%zu) since the "
                    "last reset: %llu requests were judged only in part\"",
                 rp->max_identities, (unsigned long long)rp->unjudged);
    }
    char since[32];
    fmt_kst(rp->since_unix_us, since);
    buf_addf(b, ",\"since\":\"%s\"}", since);
    pthread_mutex_unlock(&rp->lock);
}

void report_render_merged(struct report *const *rps, size_t n, struct buf *b)
{
    report_render_merged_reason(rps, n, NULL, b);
}

void report_render_merged_reason(struct report *const *rps, size_t n, const char *incomplete,
                                 struct buf *b)
{
    struct report_finding v[K_N];
    memset(v, 0, sizeof v);
    uint64_t judged = 0, unjudged = 0;
    size_t max_ids = 0;
    int64_t since = INT64_MAX;
    for (size_t i = 0; i < n; i++) {
        struct report *rp = rps[i];
        pthread_mutex_lock(&rp->lock);
        collect_findings(rp, v, true);
        judged += rp->judged;
        unjudged += rp->unjudged;
        if (rp->unjudged && rp->max_identities > max_ids)
            max_ids = rp->max_identities;
        if (rp->since_unix_us < since)
            since = rp->since_unix_us;
        pthread_mutex_unlock(&rp->lock);
    }
    emit_findings(v, b);
    buf_addf(b, ",\"judged_requests\":%llu,\"complete\":%s", (unsigned long long)judged,
             unjudged || incomplete ? "false" : "true");
    if (unjudged)
        buf_addf(b, ",\"reason\":\"more identities than --report-max-identities (%zu) since the "
                    "last reset: %llu requests were judged only in part\"",
                 max_ids, (unsigned long long)unjudged);
    else if (incomplete) {
        buf_adds(b, ",\"reason\":");
        buf_add_json_strz(b, incomplete);
    }
    char at[32];
    fmt_kst(n ? since : 0, at);
    buf_addf(b, ",\"since\":\"%s\"}", at);
    for (int k = 0; k < K_N; k++)
        for (size_t i = 0; i < v[k].n_examples; i++)
            free(v[k].examples[i]);
}

/* One step of a replay: entry i arrives (end = false) or ends at time t. */
struct step {
    int64_t t;
    bool end;
    size_t i;
};

static int cmp_step(const void *a, const void *b)
{
    const struct step *x = a, *y = b;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    if (x->end != y->end)
        return x->end ? -1 : 1; /* an end at the instant of an arrival is before it */
    return x->i < y->i ? -1 : x->i > y->i;
}

int report_replay(struct report *rp, const struct journal_entry *v, size_t n)
{
    struct report_mark *m = calloc(n ? n : 1, sizeof *m);
    struct step *s = calloc(n ? 2 * n : 1, sizeof *s);
    if (!m || !s) {
        free(m);
        free(s);
        return -1;
    }
    size_t ns = 0;
    for (size_t i = 0; i < n; i++) {
        s[ns++] = (struct step){v[i].arrived_mono_ns, false, i};
        if (v[i].ended_mono_ns)
            s[ns++] = (struct step){v[i].ended_mono_ns, true, i};
    }
    qsort(s, ns, sizeof *s, cmp_step);
    uint64_t first = rp->first_id;
    for (size_t k = 0; k < ns; k++) {
        const struct journal_entry *e = &v[s[k].i];
        struct report_mark *mk = &m[s[k].i];
        if (!mk->id) { /* its arrival (first, even when it ended in the same instant) */
            report_begin(rp, mk, first + s[k].i, 0);
            bool will_process = e->outcome != OUT_DROPPED_REQUEST &&
                                e->outcome != OUT_THROTTLED && e->outcome != OUT_CAPPED;
            report_identify(rp, mk, e, will_process);
        }
        if (s[k].end)
            report_end(rp, mk, e);
    }
    free(m);
    free(s);
    return 0;
}

void report_render(struct buf *b, const struct journal_entry *v, size_t n)
{
    struct report rp;
    if (report_init(&rp, SIZE_MAX, 0, 1, 0) != 0) {
        b->oom = true;
        return;
    }
    if (report_replay(&rp, v, n) != 0)
        b->oom = true;
    struct report_finding found[K_N];
    memset(found, 0, sizeof found);
    collect_findings(&rp, found, false);
    emit_findings(found, b);
    buf_addc(b, '}');
    report_fini(&rp);
}
