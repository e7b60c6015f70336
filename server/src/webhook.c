/* webhook.c -- receivers, deliveries and the dispatcher thread (see webhook.h); the
 * journal's filing and bookkeeping and the admin calls are in webhook_journal.c.
 *
 * A payment event goes: store (under the store lock, where its identifiers and view are
 * copied) → inbox (leaf lock) → the dispatcher, which checks the event's ledger generation →
 * one delivery per receiver under the webhooks lock, its fault drawn from (seed, paymentKey,
 * event sequence number, receiver) → its body rendered, under the store lock, when its first
 * attempt is due (or the journal shows it) → attempts on libcurl's multi handle, each due on
 * a timer: the real clock
 * for the first attempt (the profile's `delay` is a latency), the gateway clock for retries (so
 * a test moves them forward). Timers are two binary heaps of (due, id, version) entries; an
 * entry whose delivery has moved on (another version) or left the journal is skipped when it
 * comes up. Invariants: a delivery has at most one attempt in flight; it is on the pending list
 * exactly while its status is pending; `all` is in id order. */
#define _GNU_SOURCE
#include "webhook.h"

#include <assert.h>
#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "cluster.h"
#include "gateway.h"
#include "ledger.h"
#include "render.h"
#include "request.h"
#include "store.h"
#include "webhook_int.h"

#define MAX_ATTEMPTS 8          /* scheduled attempts before a delivery is failed [Toss] */
#define MAX_IN_FLIGHT 64        /* attempts on the wire at once; the rest wait their turn */
#define ATTEMPT_TIMEOUT_MS 10000 /* an answer slower than this fails the attempt [ours] */
#define ANSWER_BODY_MAX 65536   /* bytes of a receiver's answer read, at most */
#define SWEEP_INTERVAL_NS NS_PER_S
/* Events are taken from the inbox in batches: at most this long after the first one arrived
 * (or once INBOX_BATCH are waiting), so a burst of confirms costs one pass of the dispatcher
 * (a render under the store lock, a pass over the transfers) per batch, not per event. */
#define INBOX_WAIT_NS (2 * NS_PER_MS)
#define INBOX_BATCH 512
#define IDLE_WAIT_MS 1000

/* Minutes between a failed attempt and the next [Toss developer guide, webhooks]. */
static const int64_t RETRY_MIN[MAX_ATTEMPTS - 1] = {1, 4, 16, 64, 256, 1024, 4096};

/* An attempt on the wire: kept apart from its delivery, which lives in the journal far longer
 * (at most MAX_IN_FLIGHT transfers exist at once; thousands of deliveries may wait). */
struct transfer {
    CURL *easy;
    struct curl_slist *headers;
    size_t answer_bytes;
    int64_t started_ns;
    char errbuf[CURL_ERROR_SIZE];
};

/* ---- small helpers --------------------------------------------------------------------------- */

bool wh_grow(void **arr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    size_t n = *cap ? *cap * 2 : 16;
    while (n < need)
        n *= 2;
    void *p = realloc(*arr, n * elem);
    if (!p)
        return false;
    *arr = p;
    *cap = n;
    return true;
}

/* Korea time without an offset, fraction digits trimmed of trailing zeros (Toss's webhook
 * createdAt: "2024-02-13T12:17:57.123"). */
static void fmt_created_at(int64_t us, char out[40])
{
    char t[32];
    fmt_kst(us, t);
    size_t n = strlen(t) - 6; /* without "+09:00" */
    memcpy(out, t, n);
    int64_t frac = us % 1000000;
    if (frac < 0)
        frac += 1000000;
    if (frac) {
        char f[8];
        snprintf(f, sizeof f, "%06lld", (long long)frac);
        size_t k = 6;
        while (f[k - 1] == '0')
            k--;
        out[n++] = '.';
        memcpy(out + n, f, k);
        n += k;
    }
    out[n] = '\0';
}

/* ---- timers ---------------------------------------------------------------------------------- */

bool wh_heap_push(struct heap *h, int64_t due, uint64_t id, uint32_t version)
{
    if (!wh_grow((void **)&h->t, &h->cap, h->n + 1, sizeof *h->t))
        return false;
    size_t i = h->n++;
    while (i > 0 && h->t[(i - 1) / 2].due > due) {
        h->t[i] = h->t[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->t[i] = (struct timer){due, id, version};
    return true;
}

void wh_heap_sift_down(struct heap *h, size_t i)
{
    struct timer x = h->t[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && h->t[c + 1].due < h->t[c].due)
            c++;
        if (h->t[c].due >= x.due)
            break;
        h->t[i] = h->t[c];
        i = c;
    }
    h->t[i] = x;
}

static void heap_pop(struct heap *h)
{
    h->t[0] = h->t[--h->n];
    if (h->n)
        wh_heap_sift_down(h, 0);
}

/* ---- the event loop: epoll over libcurl's sockets ------------------------------------------ */

/* Only the sockets libcurl names, and only when they are ready, cost a pass: a receiver that
 * hangs 64 transfers costs nothing while it hangs (curl_multi_perform would poll each one on
 * every pass). */

void wh_wake(struct webhooks *w)
{
    uint64_t one = 1;
    ssize_t n = write(w->wakefd, &one, sizeof one); /* fails only when already signalled */
    (void)n;
}

static int on_curl_socket(CURL *easy, curl_socket_t s, int what, void *ctx, void *sockp)
{
    (void)easy;
    (void)sockp;
    struct webhooks *w = ctx;
    if (what == CURL_POLL_REMOVE) {
        epoll_ctl(w->epfd, EPOLL_CTL_DEL, s, NULL);
        return 0;
    }
    struct epoll_event ev = {.events = (what & CURL_POLL_IN ? EPOLLIN : 0u) |
                                       (what & CURL_POLL_OUT ? EPOLLOUT : 0u),
                             .data.fd = s};
    if (epoll_ctl(w->epfd, EPOLL_CTL_MOD, s, &ev) != 0)
        epoll_ctl(w->epfd, EPOLL_CTL_ADD, s, &ev);
    return 0;
}

static int on_curl_timer(CURLM *multi, long timeout_ms, void *ctx)
{
    (void)multi;
    struct webhooks *w = ctx;
    w->curl_due_ns = timeout_ms < 0 ? 0 : now_mono_ns() + timeout_ms * NS_PER_MS;
    return 0;
}

/* ---- the store's subscriber and the inbox ---------------------------------------------------- */

/* Queue one inbound event (the inbox lock is taken here); wake the dispatcher only when it is
 * not polling the inbox already, or when a batch is full. */
static void inbox_add(struct webhooks *w, const struct inbound *in)
{
    pthread_mutex_lock(&w->inbox_lock);
    bool first = w->n_inbox == 0, full = false, wake = first && !w->inbox_polling;
    bool queued = wh_grow((void **)&w->inbox, &w->cap_inbox, w->n_inbox + 1, sizeof *w->inbox);
    if (queued) {
        w->inbox[w->n_inbox++] = *in;
        full = w->n_inbox == INBOX_BATCH;
    }
    if (first)
        w->inbox_since_ns = now_mono_ns();
    pthread_mutex_unlock(&w->inbox_lock);
    if (!queued)
        wh_event_unref(in->ev); /* out of memory: the event is lost, as any allocation's */
    if (wake || full) /* the dispatcher wakes once per burst, not once per event */
        wh_wake(w);
}

/* A virtual account's transition that its bank announces with DEPOSIT_CALLBACK
 * (docs/webhooks.md §6.3): a deposit (DONE), a deposit error (WAITING_FOR_DEPOSIT) and a
 * cancel to CANCELED -- not the issue itself, a partial cancel, or an expiry [Toss]. */
static bool has_deposit_callback(const struct payment_event *ev)
{
    const struct payment *p = ev->payment;
    if (!p->va)
        return false;
    if (ev->status == PAY_WAITING_FOR_DEPOSIT)
        return p->va->n_deposits > 0;
    return ev->status == PAY_DONE || ev->status == PAY_CANCELED;
}

/* A new event (refs 1) for the payment change `ev` (store lock held): its identifiers and
 * transactionKey copied now, its body left for later; NULL when out of memory. */
static struct event *event_new(const struct payment_event *ev, enum event_type type)
{
    const struct payment *p = ev->payment;
    size_t lk = strlen(p->payment_key) + 1, lo = strlen(p->order_id) + 1;
    struct event *e = malloc(sizeof *e + lk + lo);
    if (!e)
        return NULL;
    struct tenant *t = ev->store->owner;
    *e = (struct event){
        .refs = 1,
        .type = type,
        .tenant = t,
        .generation = t->generation,
        .payment = p,
        .view_cancels = p->n_cancels,
        .view_deposits = p->va ? p->va->n_deposits : 0,
        .view_status = ev->status,
        .at_us = ev->at_us,
    };
    e->payment_key = (char *)(e + 1);
    e->order_id = e->payment_key + lk;
    memcpy(e->payment_key, p->payment_key, lk);
    memcpy(e->order_id, p->order_id, lo);
    render_last_tx(store_ledger(ev->store), p, e->view_cancels, e->view_deposits,
                   e->view_status, e->tx_key);
    return e;
}

/* Under the store lock, on the thread that changed the payment: note the event, nothing more
 * (a small copy; the body is rendered when a delivery first needs it). */
static void on_payment_event(void *ctx, const struct payment_event *ev)
{
    struct webhooks *w = ctx;
    if (ev->status == PAY_IN_PROGRESS || atomic_load(&w->n_receivers) == 0)
        return;
    struct gateway *g = w->g;
    struct live *l = ev->cause && ev->cause->adm.live ? ev->cause->adm.live : gateway_live(g);
    int64_t since;
    const struct profile *p = live_current(l, now_mono_ns(), &since)->profile;
    struct inbound in = {
        .seq = ev->seq,
        .faults = &p->webhooks,
        .seed = ev->cause ? ev->cause->adm.seed : gateway_seed(g, p),
    };
    if ((in.ev = event_new(ev, EV_PAYMENT_STATUS_CHANGED)))
        inbox_add(w, &in);
    if (has_deposit_callback(ev) && (in.ev = event_new(ev, EV_DEPOSIT_CALLBACK)))
        inbox_add(w, &in);
}

/* The body of event `e` (store lock held, its generation current) into `b`. */
static void render_body(struct gateway *g, const struct event *e, struct buf *b)
{
    const struct payment *p = e->payment;
    const struct ledger *l = store_ledger(&e->tenant->store);
    char created[40];
    fmt_created_at(e->at_us, created);
    if (e->type == EV_DEPOSIT_CALLBACK) {
        /* Flat, no eventType and no paymentKey: the secret is how a receiver trusts it. */
        char secret[28];
        render_secret(l, p, secret);
        buf_adds(b, "{\"createdAt\":\"");
        buf_adds(b, created);
        buf_adds(b, "\",\"secret\":\"");
        buf_adds(b, secret);
        buf_adds(b, "\",\"status\":\"");
        buf_adds(b, pay_status_name(e->view_status));
        buf_adds(b, "\",\"transactionKey\":");
        if (e->tx_key[0]) {
            buf_addc(b, '"');
            buf_adds(b, e->tx_key);
            buf_addc(b, '"');
        } else {
            buf_adds(b, "null");
        }
        buf_adds(b, ",\"orderId\":");
        buf_add_json_strz(b, p->order_id);
        buf_addc(b, '}');
    } else {
        buf_adds(b, "{\"eventType\":\"");
        buf_adds(b, EVENT_TYPE_NAMES[e->type]);
        buf_adds(b, "\",\"createdAt\":\"");
        buf_adds(b, created);
        buf_adds(b, "\",\"data\":");
        render_payment_at(b, l, g->cfg->mid, p, e->view_cancels, e->view_deposits,
                          e->view_status);
        buf_addc(b, '}');
    }
}

/* Events rendered per store-lock section: a burst of confirms waits for at most this many
 * renders at a time. */
#define LOCK_CHUNK 32

struct body_batch {
    struct event **ev;
    size_t n;
    char **body;                /* out: malloc'd, or NULL (ledger gone, out of memory) */
    size_t *len;
    struct buf *scratch;
};

static int bodies_locked(struct gateway *g, struct store *s, struct request *r, void *arg)
{
    (void)s;
    (void)r;
    struct body_batch *bb = arg;
    for (size_t i = 0; i < bb->n; i++) {
        const struct event *e = bb->ev[i];
        bb->body[i] = NULL;
        if (e->generation != e->tenant->generation)
            continue;
        bb->scratch->len = 0;
        render_body(g, e, bb->scratch);
        if (bb->scratch->oom) {
            bb->scratch->oom = false;
            continue;
        }
        /* The copy is made here, under the lock: a malloc of reused memory is cheap, and the
         * scratch buffer is the caller's for the next event. */
        if ((bb->body[i] = malloc(bb->scratch->len)) != NULL) {
            memcpy(bb->body[i], bb->scratch->data, bb->scratch->len);
            bb->len[i] = bb->scratch->len;
        }
    }
    return 0;
}

/* Give each of ev[0..n) that has none its body, LOCK_CHUNK a store-lock section; an event
 * whose ledger is gone (or out of memory) is marked unrenderable. The caller holds a
 * reference on each, and neither the webhooks lock nor the store lock. `scratch` is the
 * calling thread's. */
void wh_ensure_bodies(struct webhooks *w, struct event **ev, size_t n, struct buf *scratch)
{
    for (size_t at = 0; at < n; at += LOCK_CHUNK) {
        size_t k = n - at < LOCK_CHUNK ? n - at : LOCK_CHUNK;
        char *body[LOCK_CHUNK];
        size_t len[LOCK_CHUNK];
        for (size_t i = 0; i < k; i++)
            body[i] = NULL; /* a section the shared store refused renders none */
        struct body_batch bb = {ev + at, k, body, len, scratch};
        gateway_tenant_txn(w->g, gateway_tenant_next(w->g, NULL), bodies_locked, &bb);
        pthread_mutex_lock(&w->lock);
        for (size_t i = 0; i < k; i++) {
            struct event *e = ev[at + i];
            if (e->body || !body[i]) {
                free(body[i]);
                e->unrenderable = !e->body;
                continue;
            }
            e->body = body[i];
            e->body_len = len[i];
        }
        pthread_mutex_unlock(&w->lock);
    }
}

/* drain_inbox with --store redis://: the batch's events of current ledgers get their bodies
 * now (their payment is this replica's to render only while its generation holds), then are
 * filed in Redis by the cluster's receiver lists, which any instance's dispatcher claims from.
 * The inbox's references are dropped. No lock held. */
static void file_cluster(struct webhooks *w, struct inbound *in, size_t n)
{
    struct event **ev = malloc(n * sizeof *ev);
    size_t k = 0;
    (void)cwh_refresh_receivers(w->cwh); /* down: the last lists, and the filing fails */
    pthread_mutex_lock(&w->lock);
    for (size_t i = 0; i < n; i++) {
        struct event *e = in[i].ev;
        /* No receiver, no body: rendering is a section on the shared store. */
        if (ev && e->generation == tenant_generation(e->tenant) &&
            cwh_receivers_of(w->cwh, tenant_key(e->tenant))->n > 0) {
            in[k] = in[i];
            ev[k++] = e;
        } else {
            wh_event_unref(e);
        }
    }
    pthread_mutex_unlock(&w->lock);
    if (k > 0) {
        wh_ensure_bodies(w, ev, k, &w->scratch);
        for (size_t i = 0; i < k; i++)
            wh_file_event_cluster(w, ev[i], &in[i]);
        atomic_store(&w->claim_now, true); /* the first attempts are due (or soon) */
    }
    pthread_mutex_lock(&w->lock);
    for (size_t i = 0; i < k; i++)
        wh_event_unref(ev[i]);
    pthread_mutex_unlock(&w->lock);
    free(ev);
}

/* Take the inbox's events once the batch is due; else *wait_ms (if smaller) is set to when it
 * will be. While events keep coming the thread polls: after a batch it looks again
 * INBOX_WAIT_NS later on its own, and the confirms that fill the inbox meanwhile do not wake
 * it (an eventfd write and a wake-up each, which cost a confirm more than filing its event);
 * a look that finds the inbox empty ends the polling, and the next event wakes it. An event
 * waits at most INBOX_WAIT_NS either way. */
static void drain_inbox(struct webhooks *w, int64_t *wait_ms)
{
    pthread_mutex_lock(&w->inbox_lock);
    int64_t now = now_mono_ns();
    if (w->n_inbox == 0) {
        w->inbox_polling = false;
        pthread_mutex_unlock(&w->inbox_lock);
        return;
    }
    int64_t due = w->inbox_since_ns + INBOX_WAIT_NS;
    if (w->inbox_polling && w->inbox_poll_ns < due)
        due = w->inbox_poll_ns;
    if (w->n_inbox < INBOX_BATCH && now < due && !atomic_load(&w->stop)) {
        w->inbox_polling = true; /* it looks by `due` anyway */
        w->inbox_poll_ns = due;
        pthread_mutex_unlock(&w->inbox_lock);
        int64_t ms = (due - now) / NS_PER_MS + 1;
        *wait_ms = ms < *wait_ms ? ms : *wait_ms;
        return;
    }
    w->inbox_polling = true;
    w->inbox_poll_ns = now + INBOX_WAIT_NS;
    int64_t poll_ms = INBOX_WAIT_NS / NS_PER_MS + 1;
    *wait_ms = poll_ms < *wait_ms ? poll_ms : *wait_ms;
    /* Swap in the spare array, so the confirms' appends reuse its capacity. */
    struct inbound *in = w->inbox;
    size_t n = w->n_inbox, cap = w->cap_inbox;
    w->inbox = w->spare;
    w->cap_inbox = w->cap_spare;
    w->n_inbox = 0;
    pthread_mutex_unlock(&w->inbox_lock);
    if (w->cwh) {
        file_cluster(w, in, n);
        w->spare = in;
        w->cap_spare = cap;
        return;
    }
    pthread_mutex_lock(&w->lock);
    for (size_t i = 0; i < n; i++) {
        struct event *e = in[i].ev;
        if (e->generation == tenant_generation(e->tenant))
            wh_file_event(w, e, &in[i]);
        wh_event_unref(e); /* the inbox's reference */
    }
    pthread_mutex_unlock(&w->lock);
    w->spare = in;
    w->cap_spare = cap;
}

/* ---- attempts -------------------------------------------------------------------------------- */

static size_t on_answer_body(char *data, size_t size, size_t n, void *ctx)
{
    (void)data;
    struct transfer *x = ctx;
    x->answer_bytes += size * n;
    return x->answer_bytes > ANSWER_BODY_MAX ? 0 : size * n; /* 0 ends the transfer */
}

/* Put d's next attempt on the wire (webhooks lock held). */
static void start_attempt(struct webhooks *w, struct delivery *d, bool resend)
{
    if (!d->ev->body) { /* unrenderable: its ledger went in a reset, or memory ran out */
        if (d->status == DELIVERY_PENDING) {
            free(d->note);
            d->note = strdup("its payment could not be rendered (reset, or out of memory)");
            wh_settle(w, d, DELIVERY_FAILED);
        }
        return;
    }
    if (!wh_grow((void **)&d->attempts, &d->cap_attempts, d->n_attempts + 1, sizeof *d->attempts))
        return;
    int64_t now_us = gateway_now_us(w->g);
    struct attempt *a = &d->attempts[d->n_attempts];
    *a = (struct attempt){.at_us = now_us, .retried_count = d->n_attempts};
    char h_tid[80], h_time[80], h_count[80], t[32];
    fmt_kst(now_us, t);
    snprintf(h_tid, sizeof h_tid, "tosspayments-webhook-transmission-id: %s",
             d->transmission_id);
    snprintf(h_time, sizeof h_time, "tosspayments-webhook-transmission-time: %s", t);
    snprintf(h_count, sizeof h_count, "tosspayments-webhook-transmission-retried-count: %u",
             a->retried_count);
    struct curl_slist *hs = NULL, *next;
    const char *const lines[] = {"Content-Type: application/json", h_tid, h_time, h_count,
                                 "Expect:", "User-Agent: fakegate"};
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        if (!(next = curl_slist_append(hs, lines[i]))) {
            curl_slist_free_all(hs);
            return;
        }
        hs = next;
    }
    struct transfer *x = malloc(sizeof *x);
    CURL *c = x ? curl_easy_init() : NULL;
    if (!c) {
        free(x);
        curl_slist_free_all(hs);
        return;
    }
    x->errbuf[0] = '\0';
    x->answer_bytes = 0;
    curl_easy_setopt(c, CURLOPT_URL, d->url);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http");
    curl_easy_setopt(c, CURLOPT_PROXY, "");            /* never an environment's proxy */
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);   /* a redirect fails the attempt */
    /* One attempt, one request: on a reused keep-alive connection that the receiver resets
     * before answering, libcurl would resend the request by itself on a new one. */
    curl_easy_setopt(c, CURLOPT_FORBID_REUSE, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)ATTEMPT_TIMEOUT_MS);
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, d->ev->body);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)d->ev->body_len);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hs);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_answer_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, x->errbuf);
    curl_easy_setopt(c, CURLOPT_PRIVATE, d);
#if LIBCURL_VERSION_NUM >= 0x075700
    curl_easy_setopt(c, CURLOPT_QUICK_EXIT, 1L);       /* stopping never waits on a resolver */
#endif
    if (curl_multi_add_handle(w->multi, c) != CURLM_OK) {
        curl_easy_cleanup(c);
        curl_slist_free_all(hs);
        free(x);
        return;
    }
    if (d->status != DELIVERY_PENDING) {
        d->before_resend = d->status;
        wh_pending_add(w, d);
    } else {
        d->before_resend = DELIVERY_PENDING;
    }
    if (!resend) {
        if (d->n_sched == 0)
            d->sched_base_us = now_us; /* the schedule counts from the first attempt */
        d->due_mono_ns = 0;
        d->due_biz_us = 0;
    }
    d->n_attempts++;
    x->easy = c;
    x->headers = hs;
    d->xfer = x;
    d->in_flight = true;
    d->cur_resend = resend;
    x->started_ns = now_mono_ns();
    w->n_in_flight++;
}

static void end_transfer(struct webhooks *w, struct delivery *d)
{
    struct transfer *x = d->xfer;
    curl_multi_remove_handle(w->multi, x->easy);
    curl_easy_cleanup(x->easy);
    curl_slist_free_all(x->headers);
    free(x);
    d->xfer = NULL;
    d->in_flight = false;
    w->n_in_flight--;
}

/* ---- --store redis://: claimed deliveries ------------------------------------------------------ */


static void all_remove(struct webhooks *w, const struct delivery *d)
{
    size_t i = wh_all_index(w, d->id);
    if (i < w->n_all && w->all[i] == d) {
        memmove(&w->all[i], &w->all[i + 1], (w->n_all - i - 1) * sizeof *w->all);
        w->n_all--;
    }
}

/* One attempt object as the deliveries journal shows an ended one. */
static void render_attempt(struct buf *b, const struct attempt *a)
{
    char t[32];
    fmt_kst(a->at_us, t);
    buf_adds(b, "{\"at\":");
    buf_add_json_strz(b, t);
    buf_addf(b, ",\"retried_count\":%u,\"http_status\":", a->retried_count);
    if (a->http_status)
        buf_addf(b, "%d", a->http_status);
    else
        buf_adds(b, "null");
    buf_adds(b, ",\"error\":");
    if (a->error)
        buf_add_json_strz(b, a->error);
    else
        buf_adds(b, "null");
    buf_addf(b, ",\"duration_ms\":%.3f}", a->duration_ms);
}

/* attempt_done for a claimed delivery: the same rules (a success delivers; a failed resend of
 * a finished delivery restores its status; a failed scheduled attempt is retried RETRY_MIN
 * later on the gateway clock, the 8th fails it), recorded in Redis under the claim's lease;
 * then the local copy goes (collect_done frees it). A record the store refused is not lost
 * for good: the lease runs out and the attempt is made again. Lock held. */
static void cluster_attempt_done(struct webhooks *w, struct delivery *d, bool ok)
{
    w->attempts_total[d->ev->type][ok ? RES_DELIVERED : RES_FAILED]++;
    enum delivery_status st = DELIVERY_PENDING;
    uint32_t n_sched = d->n_sched;
    int64_t base = d->sched_base_us, due = -1;
    if (ok) {
        st = DELIVERY_DELIVERED;
    } else if (d->cur_resend && d->before_resend != DELIVERY_PENDING) {
        st = d->before_resend == DELIVERY_DELIVERED ? DELIVERY_DELIVERED : DELIVERY_FAILED;
    } else if (!d->cur_resend) {
        if (++n_sched >= MAX_ATTEMPTS) {
            st = DELIVERY_FAILED;
        } else {
            base += RETRY_MIN[n_sched - 1] * 60 * 1000000;
            due = base;
        }
    }
    struct buf b;
    buf_init(&b);
    render_attempt(&b, &d->attempts[d->n_attempts - 1]);
    if (!b.oom)
        (void)cwh_complete(w->cwh, d->id, b.data, b.len, (int)st, n_sched, base, due);
    buf_fini(&b);
    all_remove(w, d);
    wh_settle(w, d, st);
    d->orphan = true; /* not listed: collect_done frees it */
}

/* A local copy of claim c to send (its url and body taken), or NULL on out of memory. */
static struct delivery *claimed_delivery(struct cwh_claim *c)
{
    struct event *e = calloc(1, sizeof *e + 1);
    struct delivery *d = e ? calloc(1, sizeof *d) : NULL;
    struct attempt *a = d ? calloc(c->n_attempts + 1, sizeof *a) : NULL;
    if (!a) {
        free(d);
        free(e);
        return NULL;
    }
    e->refs = 1;
    e->type = c->event_type == EV_DEPOSIT_CALLBACK ? EV_DEPOSIT_CALLBACK
                                                   : EV_PAYMENT_STATUS_CHANGED;
    e->payment_key = e->order_id = (char *)(e + 1); /* "": the store has them */
    e->body = c->body;
    e->body_len = c->body_len;
    c->body = NULL;
    d->id = c->id;
    d->ev = e;
    d->url = c->url;
    c->url = NULL;
    d->success_2xx = c->success_2xx;
    memcpy(d->transmission_id, c->transmission_id, sizeof d->transmission_id);
    d->n_sched = c->n_sched;
    d->sched_base_us = c->sched_base_us;
    d->attempts = a;
    d->n_attempts = c->n_attempts;
    d->cap_attempts = c->n_attempts + 1;
    return d;
}

/* Claim what is due in the store while there is room on the wire, and start each: every
 * CWH_POLL_MS, or at once after a filing, a clock step or a resend. Lock held. */
static void claim_cluster(struct webhooks *w)
{
    int64_t now = now_mono_ns();
    if (!atomic_exchange(&w->claim_now, false) && now < w->claim_next_ns)
        return;
    w->claim_next_ns = now + CWH_POLL_MS * NS_PER_MS;
    if (w->n_in_flight >= MAX_IN_FLIGHT)
        return;
    struct cwh_claim *c;
    size_t n;
    if (cwh_claim(w->cwh, now_unix_us(), gateway_now_us(w->g),
                  MAX_IN_FLIGHT - w->n_in_flight, &c, &n) != 0)
        return;
    for (size_t i = 0; i < n; i++) {
        size_t at = wh_all_index(w, c[i].id);
        if (at < w->n_all && w->all[at]->id == c[i].id)
            continue; /* sending it already (a lease that ran out on a live claimer) */
        struct delivery *d = claimed_delivery(&c[i]);
        if (!d || !wh_grow((void **)&w->all, &w->cap_all, w->n_all + 1, sizeof *w->all)) {
            if (d)
                wh_delivery_free(d);
            continue; /* out of memory: its lease runs out and it comes back */
        }
        memmove(&w->all[at + 1], &w->all[at], (w->n_all - at) * sizeof *w->all);
        w->all[at] = d;
        w->n_all++;
        wh_pending_add(w, d);
        start_attempt(w, d, c[i].resend);
        if (!d->in_flight) {
            all_remove(w, d);
            wh_settle(w, d, DELIVERY_FAILED);
            wh_delivery_free(d);
            continue;
        }
        d->before_resend = (enum delivery_status)c[i].before;
    }
    cwh_claims_free(c, n);
}

/* The attempt of d ended with `code`: record it, then deliver, retry or fail. Lock held. */
static void attempt_done(struct webhooks *w, struct delivery *d, CURLcode code)
{
    long status = 0;
    curl_easy_getinfo(d->xfer->easy, CURLINFO_RESPONSE_CODE, &status);
    struct attempt *a = &d->attempts[d->n_attempts - 1];
    a->http_status = (int)status;
    a->duration_ms = (double)(now_mono_ns() - d->xfer->started_ns) / 1e6;
    bool answered = status > 0;
    bool ok = d->success_2xx ? status >= 200 && status <= 299 : status == 200;
    if (code != CURLE_OK && !(code == CURLE_WRITE_ERROR && answered)) {
        ok = false;
        a->error = strdup(d->xfer->errbuf[0] ? d->xfer->errbuf : curl_easy_strerror(code));
    } else if (code == CURLE_WRITE_ERROR) {
        a->error = strdup("answer body over 64 KiB: connection ended, its status decides");
    } else if (status >= 300 && status <= 399) {
        a->error = strdup("redirect not followed");
    }
    end_transfer(w, d);
    if (d->orphan)
        return; /* freed by the caller */
    if (w->cwh) {
        cluster_attempt_done(w, d, ok);
        return;
    }
    w->attempts_total[d->ev->type][ok ? RES_DELIVERED : RES_FAILED]++;
    bool resend = d->cur_resend;
    if (d->status != DELIVERY_PENDING) {
        /* Evicted while in flight: the attempt is kept, the delivery stays failed. */
    } else if (ok) {
        wh_settle(w, d, DELIVERY_DELIVERED);
    } else if (resend && d->before_resend != DELIVERY_PENDING) {
        wh_settle(w, d, d->before_resend == DELIVERY_DELIVERED ? DELIVERY_DELIVERED
                                                               : DELIVERY_FAILED);
    } else if (!resend) {
        d->n_sched++;
        if (d->n_sched >= MAX_ATTEMPTS) {
            wh_settle(w, d, DELIVERY_FAILED);
        } else {
            d->sched_base_us += RETRY_MIN[d->n_sched - 1] * 60 * 1000000;
            d->due_biz_us = d->sched_base_us;
            d->version++;
            wh_heap_push(&w->biz, d->due_biz_us, d->id, d->version);
        }
    }
    if (d->status == DELIVERY_PENDING && (d->resends_wanted || d->due_wanted)) {
        bool as_resend = d->resends_wanted > 0;
        if (as_resend)
            d->resends_wanted--;
        else
            d->due_wanted = false;
        start_attempt(w, d, as_resend);
    } else if (d->resends_wanted) {
        d->resends_wanted--;
        start_attempt(w, d, true);
    }
}

static void collect_done(struct webhooks *w)
{
    CURLMsg *m;
    int left;
    pthread_mutex_lock(&w->lock);
    /* Transfers a reset dropped end first: removing a handle also drops its messages. */
    for (size_t i = 0; i < w->n_orphans; i++) {
        if (w->orphans[i]->in_flight)
            end_transfer(w, w->orphans[i]);
        wh_delivery_free(w->orphans[i]);
    }
    w->n_orphans = 0;
    while ((m = curl_multi_info_read(w->multi, &left))) {
        if (m->msg != CURLMSG_DONE)
            continue;
        struct delivery *d = NULL;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&d);
        CURLcode code = m->data.result;
        attempt_done(w, d, code); /* m is invalid from here on */
        if (d->orphan && !d->orphan_listed)
            wh_delivery_free(d);
    }
    pthread_mutex_unlock(&w->lock);
}

/* An event whose body is not rendered yet: note it for the dispatcher's next wh_ensure_bodies
 * pass (lock held). False when it is noted (or cannot be: out of memory) and the attempt
 * must wait; true when the body is there, or never will be (start_attempt fails it). */
static bool body_ready(struct webhooks *w, struct event *e)
{
    if (e->body || e->unrenderable)
        return true;
    if (!e->wanted && wh_grow((void **)&w->need, &w->cap_need, w->n_need + 1, sizeof *w->need)) {
        e->wanted = true;
        e->refs++;
        w->need[w->n_need++] = e;
    }
    return false;
}

/* Start what is due, oldest due first, while there is room on the wire. Lock held. A due
 * delivery whose body is not rendered yet stays due: its event is noted (body_ready) and the
 * dispatcher comes back at once after rendering it. */
static void start_due(struct webhooks *w)
{
    size_t keep = 0;
    for (size_t i = 0; i < w->n_resends; i++) {
        struct delivery *d = wh_find(w, w->resends[i]);
        if (!d)
            continue;
        if (d->in_flight)
            d->resends_wanted++;
        else if (body_ready(w, d->ev))
            start_attempt(w, d, true);
        else
            w->resends[keep++] = w->resends[i];
    }
    w->n_resends = keep;
    int64_t now_ns = now_mono_ns(), now_us = gateway_now_us(w->g);
    struct heap *heaps[2] = {&w->real, &w->biz};
    int64_t nows[2] = {now_ns, now_us};
    struct timer later[LOCK_CHUNK];
    for (int k = 0; k < 2; k++) {
        struct heap *h = heaps[k];
        size_t n_later = 0;
        while (h->n > 0 && h->t[0].due <= nows[k] && w->n_in_flight < MAX_IN_FLIGHT &&
               n_later < LOCK_CHUNK) {
            struct timer t = h->t[0];
            heap_pop(h);
            struct delivery *d = wh_find(w, t.id);
            if (!d || d->version != t.version || d->status != DELIVERY_PENDING)
                continue;
            if (d->in_flight)
                d->due_wanted = true;
            else if (body_ready(w, d->ev))
                start_attempt(w, d, false);
            else
                later[n_later++] = t;
        }
        for (size_t i = 0; i < n_later; i++) /* pushed back: room was just made */
            (void)wh_heap_push(h, later[i].due, later[i].id, later[i].version);
    }
}

/* Render the bodies start_due asked for (no lock held; the dispatcher's). */
static void render_needed(struct webhooks *w)
{
    pthread_mutex_lock(&w->lock);
    struct event **need = w->need;
    size_t n = w->n_need, cap = w->cap_need;
    w->need = w->need_spare;
    w->cap_need = w->cap_need_spare;
    w->n_need = 0;
    pthread_mutex_unlock(&w->lock);
    if (n == 0) {
        w->need_spare = need;
        w->cap_need_spare = cap;
        return;
    }
    wh_ensure_bodies(w, need, n, &w->scratch);
    pthread_mutex_lock(&w->lock);
    for (size_t i = 0; i < n; i++) {
        need[i]->wanted = false;
        wh_event_unref(need[i]);
    }
    pthread_mutex_unlock(&w->lock);
    w->need_spare = need;
    w->cap_need_spare = cap;
}

/* How long the thread may sleep (ms): until the earliest timer, at most IDLE_WAIT_MS. */
static int next_wait_ms(struct webhooks *w)
{
    int64_t wait_ms = IDLE_WAIT_MS;
    if (w->n_in_flight >= MAX_IN_FLIGHT)
        return (int)wait_ms; /* a transfer's end wakes the poll */
    if (w->real.n > 0) {
        int64_t ms = (w->real.t[0].due - now_mono_ns()) / NS_PER_MS + 1;
        wait_ms = ms < wait_ms ? ms : wait_ms;
    }
    if (w->biz.n > 0) {
        int64_t ms = (w->biz.t[0].due - gateway_now_us(w->g)) / 1000 + 1;
        wait_ms = ms < wait_ms ? ms : wait_ms;
    }
    return wait_ms < 0 ? 0 : (int)wait_ms;
}

/* Wait up to wait_ms for the sockets, the wake eventfd or libcurl's timer, and let libcurl
 * act on what is ready. */
static void wait_and_act(struct webhooks *w, int wait_ms)
{
    if (w->curl_due_ns) {
        int64_t ms = (w->curl_due_ns - now_mono_ns() + NS_PER_MS - 1) / NS_PER_MS;
        if (ms < wait_ms)
            wait_ms = ms < 0 ? 0 : (int)ms;
    }
    struct epoll_event evs[64];
    int n = epoll_wait(w->epfd, evs, 64, wait_ms);
    int running;
    for (int i = 0; i < n; i++) {
        if (evs[i].data.fd == w->wakefd) {
            uint64_t v;
            ssize_t r = read(w->wakefd, &v, sizeof v);
            (void)r;
            continue;
        }
        int flags = (evs[i].events & EPOLLIN ? CURL_CSELECT_IN : 0) |
                    (evs[i].events & EPOLLOUT ? CURL_CSELECT_OUT : 0) |
                    (evs[i].events & (EPOLLERR | EPOLLHUP) ? CURL_CSELECT_ERR : 0);
        curl_multi_socket_action(w->multi, evs[i].data.fd, flags, &running);
    }
    if (w->curl_due_ns && now_mono_ns() >= w->curl_due_ns) {
        w->curl_due_ns = 0;
        curl_multi_socket_action(w->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    }
}

static void *dispatch_main(void *arg)
{
    struct webhooks *w = arg;
    int64_t next_sweep = 0;
    while (!atomic_load(&w->stop)) {
        int64_t inbox_wait = IDLE_WAIT_MS;
        drain_inbox(w, &inbox_wait);
        if (now_mono_ns() >= next_sweep) {
            gateway_sweep_expired(w->g);
            next_sweep = now_mono_ns() + SWEEP_INTERVAL_NS;
        }
        collect_done(w);
        pthread_mutex_lock(&w->lock);
        start_due(w);
        int wait_ms = w->n_need > 0 ? 0 : next_wait_ms(w);
        if (w->cwh) {
            claim_cluster(w);
            if (wait_ms > CWH_POLL_MS)
                wait_ms = CWH_POLL_MS;
        }
        pthread_mutex_unlock(&w->lock);
        render_needed(w);
        if (inbox_wait < wait_ms)
            wait_ms = (int)inbox_wait;
        wait_and_act(w, wait_ms);
    }
    return NULL;
}

/* ---- the interface --------------------------------------------------------------------------- */

struct webhooks *webhooks_start(struct gateway *g, const char *const *urls, size_t n_urls,
                                size_t max_pending, bool quiet, char err[ERR_LEN])
{
    struct webhooks *w = calloc(1, sizeof *w);
    if (!w) {
        snprintf(err, ERR_LEN, "out of memory");
        return NULL;
    }
    w->epfd = epoll_create1(EPOLL_CLOEXEC);
    w->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    struct epoll_event wev = {.events = EPOLLIN, .data.fd = w->wakefd};
    if (w->epfd < 0 || w->wakefd < 0 || epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->wakefd, &wev) != 0 ||
        curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK || !(w->multi = curl_multi_init())) {
        snprintf(err, ERR_LEN, "webhooks: cannot start the delivery loop (epoll, libcurl)");
        if (w->epfd >= 0)
            close(w->epfd);
        if (w->wakefd >= 0)
            close(w->wakefd);
        if (w->multi)
            curl_multi_cleanup(w->multi);
        free(w);
        return NULL;
    }
    curl_multi_setopt(w->multi, CURLMOPT_SOCKETFUNCTION, on_curl_socket);
    curl_multi_setopt(w->multi, CURLMOPT_SOCKETDATA, w);
    curl_multi_setopt(w->multi, CURLMOPT_TIMERFUNCTION, on_curl_timer);
    curl_multi_setopt(w->multi, CURLMOPT_TIMERDATA, w);
    w->g = g;
    w->quiet = quiet;
    w->max_pending = max_pending ? max_pending : WEBHOOK_MAX_PENDING_DEFAULT;
    pthread_mutex_init(&w->inbox_lock, NULL);
    pthread_mutex_init(&w->lock, NULL);
    buf_init(&w->scratch);
    wh_set_receivers_locked(w, &w->server, urls, n_urls, false);
    if (g->cluster) {
        /* The cluster's lists decide who gets an event, so every event is noted. */
        if (!(w->cwh = cwh_new(cluster_url_of(g->cluster), g->instance_id, err)) ||
            cwh_seed_receivers(w->cwh, urls, n_urls) != 0) {
            if (w->cwh)
                cwh_message(w->cwh, err, ERR_LEN);
            cwh_free(w->cwh);
            wh_receivers_clear(&w->server);
            curl_multi_cleanup(w->multi);
            close(w->epfd);
            close(w->wakefd);
            free(w);
            return NULL;
        }
        atomic_store(&w->n_receivers, (size_t)1);
    }
    if (gateway_subscribe(g, on_payment_event, w) != 0 ||
        pthread_create(&w->thread, NULL, dispatch_main, w) != 0) {
        snprintf(err, ERR_LEN, "webhooks: cannot start the delivery thread");
        curl_multi_cleanup(w->multi);
        close(w->epfd);
        close(w->wakefd);
        free(w);
        return NULL;
    }
    g->webhooks = w;
    return w;
}

void webhooks_stop(struct webhooks *w)
{
    if (!w)
        return;
    atomic_store(&w->stop, true);
    wh_wake(w);
    pthread_join(w->thread, NULL);
    if (w->n_pending > 0 && !w->quiet && !w->cwh) /* claimed ones come back to the cluster */
        fprintf(stderr, "fakegate: %zu webhook deliver%s pending at exit: abandoned\n",
                w->n_pending, w->n_pending == 1 ? "y" : "ies");
    for (size_t i = 0; i < w->n_orphans; i++) {
        end_transfer(w, w->orphans[i]);
        wh_delivery_free(w->orphans[i]);
    }
    for (size_t i = 0; i < w->n_all; i++) {
        if (w->all[i]->in_flight)
            end_transfer(w, w->all[i]);
        wh_delivery_free(w->all[i]);
    }
    curl_multi_cleanup(w->multi);
    curl_global_cleanup();
    close(w->epfd);
    close(w->wakefd);
    wh_receivers_clear(&w->server);
    for (struct receivers *x = w->own, *next; x; x = next) {
        next = x->next;
        wh_receivers_clear(x);
        free(x);
    }
    free(w->all);
    for (size_t i = 0; i < w->n_inbox; i++)
        wh_event_unref(w->inbox[i].ev);
    free(w->inbox);
    free(w->spare);
    for (size_t i = 0; i < w->n_need; i++)
        wh_event_unref(w->need[i]);
    free(w->need);
    free(w->need_spare);
    buf_fini(&w->scratch);
    free(w->real.t);
    free(w->biz.t);
    free(w->resends);
    free(w->orphans);
    cwh_free(w->cwh);
    pthread_mutex_destroy(&w->lock);
    pthread_mutex_destroy(&w->inbox_lock);
    w->g->webhooks = NULL;
    free(w);
}

void webhooks_wake(struct webhooks *w)
{
    atomic_store(&w->claim_now, true);
    wh_wake(w);
}
