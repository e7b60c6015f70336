/* webhook_journal.c -- the deliveries journal and the admin side of webhooks (see webhook.h):
 * an event filed as one delivery per receiver (its fault drawn), the pending list, trimming, a
 * reset's drop; receiver URLs, the journal's views, resends and the metrics. Invariants, under
 * the webhooks lock: `all` is in id order; a delivery is on the pending list exactly while its
 * status is pending. Nothing here takes the store lock while holding the webhooks lock. */
#define _GNU_SOURCE
#include "webhook.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway.h"
#include "rng.h"
#include "webhook_int.h"

#define RNG_ROUTE_WEBHOOK 64    /* rng_seed_request's route for webhook decisions (no route's) */

static const char *const STATUS_NAMES[] = {"pending", "delivered", "failed", "dropped"};

/* ---- the journal ----------------------------------------------------------------------------- */

size_t wh_all_index(const struct webhooks *w, uint64_t id)
{
    size_t lo = 0, hi = w->n_all;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (w->all[mid]->id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

struct delivery *wh_find(struct webhooks *w, uint64_t id)
{
    size_t i = wh_all_index(w, id);
    return i < w->n_all && w->all[i]->id == id ? w->all[i] : NULL;
}

void wh_event_unref(struct event *e)
{
    if (e && --e->refs == 0) {
        free(e->body);
        free(e); /* its strings are in the same allocation */
    }
}

void wh_delivery_free(struct delivery *d)
{
    for (uint32_t i = 0; i < d->n_attempts; i++)
        free(d->attempts[i].error);
    free(d->attempts);
    wh_event_unref(d->ev);
    free(d->url);
    free(d->note);
    free(d);
}

void wh_pending_add(struct webhooks *w, struct delivery *d)
{
    d->status = DELIVERY_PENDING;
    d->pend_prev = w->pend_tail;
    d->pend_next = NULL;
    if (w->pend_tail)
        w->pend_tail->pend_next = d;
    else
        w->pend_head = d;
    w->pend_tail = d;
    w->n_pending++;
}

/* Leave the pending list with status `st`; every timer of d goes stale. */
void wh_settle(struct webhooks *w, struct delivery *d, enum delivery_status st)
{
    if (d->status == DELIVERY_PENDING) {
        if (d->pend_prev)
            d->pend_prev->pend_next = d->pend_next;
        else
            w->pend_head = d->pend_next;
        if (d->pend_next)
            d->pend_next->pend_prev = d->pend_prev;
        else
            w->pend_tail = d->pend_prev;
        d->pend_prev = d->pend_next = NULL;
        w->n_pending--;
    }
    d->status = st;
    d->version++;
    d->due_mono_ns = 0;
    d->due_biz_us = 0;
}

/* Keep the last WEBHOOK_JOURNAL deliveries, and every pending or in-flight one. A scan walks
 * the whole journal, so it runs once WEBHOOK_JOURNAL / 8 more have been filed since the last,
 * not at every filing: with more pending than WEBHOOK_JOURNAL (a receiver that never answers,
 * --webhook-max-pending above it) nothing can go, and a scan per event made filing cost
 * O(pending). */
static void trim(struct webhooks *w)
{
    size_t at = WEBHOOK_JOURNAL + WEBHOOK_JOURNAL / 8;
    if (w->n_all <= at || w->n_all <= w->trim_at)
        return;
    size_t excess = w->n_all - WEBHOOK_JOURNAL, keep = 0;
    for (size_t i = 0; i < w->n_all; i++) {
        struct delivery *d = w->all[i];
        if (excess > 0 && d->status != DELIVERY_PENDING && !d->in_flight) {
            wh_delivery_free(d);
            excess--;
        } else {
            w->all[keep++] = d;
        }
    }
    w->n_all = keep;
    w->trim_at = keep + WEBHOOK_JOURNAL / 8;
}

/* ---- filing deliveries ----------------------------------------------------------------------- */

void wh_transmission_id(uint64_t salt, uint64_t n, char out[35])
{
    static const char b32[] = "abcdefghijklmnopqrstuvwxyz234567";
    uint64_t st = salt ^ mix64(n);
    memcpy(out, "whtrans_", 8);
    uint64_t v = splitmix64(&st);
    for (int i = 0; i < 26; i++) {
        if (i == 12)
            v = splitmix64(&st);
        out[8 + i] = b32[v & 31];
        v >>= 5;
    }
    out[34] = '\0';
}

/* The oldest pending delivery is failed to make room (the bound of --webhook-max-pending). */
static void evict_oldest(struct webhooks *w)
{
    struct delivery *d = w->pend_head;
    char note[160];
    snprintf(note, sizeof note,
             "evicted: more than %zu deliveries pending (--webhook-max-pending)", w->max_pending);
    free(d->note);
    d->note = strdup(note);
    wh_settle(w, d, DELIVERY_FAILED);
    w->evicted_total++;
}

static struct delivery *file_one(struct webhooks *w, struct event *e,
                                 const struct receivers *rx, const char *url,
                                 const char tid[35], uint64_t duplicate_of)
{
    struct delivery *d = calloc(1, sizeof *d);
    if (!d || !(d->url = strdup(url)) ||
        !wh_grow((void **)&w->all, &w->cap_all, w->n_all + 1, sizeof *w->all)) {
        if (d)
            wh_delivery_free(d);
        return NULL;
    }
    d->id = ++w->next_id;
    d->ev = e;
    e->refs++;
    d->success_2xx = rx->success_2xx;
    memcpy(d->transmission_id, tid, 35);
    d->duplicate_of = duplicate_of;
    w->all[w->n_all++] = d;
    return d;
}

/* The receivers of tenant t's events (lock held): its own list if it set one, else the
 * server's. With `create`, t's own list (made empty if it had none), or NULL on OOM. */
static struct receivers *receivers_of(struct webhooks *w, const struct tenant *t, bool create)
{
    if (!t)
        return &w->server;
    for (struct receivers *x = w->own; x; x = x->next)
        if (x->tenant == t)
            return x;
    if (!create)
        return &w->server;
    struct receivers *x = calloc(1, sizeof *x);
    if (x) {
        x->tenant = (struct tenant *)t;
        x->next = w->own;
        w->own = x;
    }
    return x;
}

/* One delivery per receiver for event `e` (webhooks lock held), each with its fault drawn. */
void wh_file_event(struct webhooks *w, struct event *e, const struct inbound *in)
{
    int64_t now = now_mono_ns();
    uint64_t salt = mix64(w->g->instance_id ^ 0x77686b73u); /* "whks": per process */
    uint64_t n_event = w->next_event++;
    const struct receivers *rx = receivers_of(w, e->tenant, false);
    for (size_t i = 0; i < rx->n; i++) {
        struct rng rng;
        rng_seed_request(&rng, in->seed,
                         RNG_ROUTE_WEBHOOK + (int)(e->type * WEBHOOK_MAX_RECEIVERS + i),
                         e->payment_key,
                         strlen(e->payment_key), in->seq);
        double u = rng_uniform01(&rng);
        const struct webhook_faults *f = in->faults;
        char tid[35];
        wh_transmission_id(salt, n_event * WEBHOOK_MAX_RECEIVERS + i, tid);
        struct delivery *d = file_one(w, e, rx, rx->urls[i], tid, 0);
        if (!d)
            continue;
        if (f && u < f->drop_p) {
            d->status = DELIVERY_DROPPED;
            w->attempts_total[e->type][RES_DROPPED]++;
            continue;
        }
        bool dup = f && u < f->drop_p + f->duplicate_p;
        double delay_ms = f ? latency_sample_ms(&f->delay, &rng) : 0;
        double after_ms = dup ? latency_sample_ms(&f->duplicate_after, &rng) : 0;
        for (int k = 0; k < (dup ? 2 : 1); k++) {
            struct delivery *x = k == 0 ? d : file_one(w, e, rx, rx->urls[i], tid, d->id);
            if (!x)
                break;
            if (w->n_pending >= w->max_pending)
                evict_oldest(w);
            wh_pending_add(w, x);
            x->due_mono_ns = now + (int64_t)((delay_ms + (k ? after_ms : 0)) * 1e6);
            if (!wh_heap_push(&w->real, x->due_mono_ns, x->id, x->version)) {
                free(x->note);
                x->note = strdup("out of memory");
                wh_settle(w, x, DELIVERY_FAILED);
            }
            if (k)
                w->attempts_total[e->type][RES_DUPLICATED]++;
        }
    }
    trim(w);
}

/* The listing's fields of a delivery after its id, for the shared journal: "url":...,
 * "event_type":...,"transmission_id":...,"tenant":...,"payment_key":...,"order_id":...,
 * "transaction_key":... (as render_delivery writes them). */
static void cluster_meta(struct buf *b, const struct event *e, const char *url, const char *tid)
{
    buf_adds(b, "\"url\":");
    buf_add_json_strz(b, url);
    buf_adds(b, ",\"event_type\":\"");
    buf_adds(b, EVENT_TYPE_NAMES[e->type]);
    buf_adds(b, "\",\"transmission_id\":\"");
    buf_adds(b, tid);
    buf_adds(b, "\",\"tenant\":");
    const char *key = tenant_key(e->tenant);
    if (key)
        buf_add_json_strz(b, key);
    else
        buf_adds(b, "null");
    buf_adds(b, ",\"payment_key\":");
    buf_add_json_strz(b, e->payment_key);
    buf_adds(b, ",\"order_id\":");
    buf_add_json_strz(b, e->order_id);
    buf_adds(b, ",\"transaction_key\":");
    if (e->tx_key[0])
        buf_add_json_strz(b, e->tx_key);
    else
        buf_adds(b, "null");
}

/* wh_file_event for --store redis://: one delivery per receiver of the cluster's lists, filed
 * in Redis with its fault drawn exactly as wh_file_event draws it (the same seed, paymentKey,
 * event number and receiver give the same drop, duplicate, delay and after on every instance),
 * due on the real clock. `e` has its body (wh_ensure_bodies) or is skipped: its ledger went in
 * a reset. The dispatcher's; no lock held (the counters take the webhooks lock). */
void wh_file_event_cluster(struct webhooks *w, struct event *e, const struct inbound *in)
{
    if (!e->body)
        return;
    const char *key = tenant_key(e->tenant);
    const struct cwh_receivers *rx = cwh_receivers_of(w->cwh, key);
    uint64_t salt = mix64(w->g->instance_id ^ 0x77686b73u);
    pthread_mutex_lock(&w->lock);
    uint64_t n_event = w->next_event++;
    pthread_mutex_unlock(&w->lock);
    struct buf meta;
    buf_init(&meta);
    for (size_t i = 0; i < rx->n; i++) {
        struct rng rng;
        rng_seed_request(&rng, in->seed,
                         RNG_ROUTE_WEBHOOK + (int)(e->type * WEBHOOK_MAX_RECEIVERS + i),
                         e->payment_key, strlen(e->payment_key), in->seq);
        double u = rng_uniform01(&rng);
        const struct webhook_faults *f = in->faults;
        char tid[35];
        wh_transmission_id(salt, n_event * WEBHOOK_MAX_RECEIVERS + i, tid);
        meta.len = 0;
        cluster_meta(&meta, e, rx->urls[i], tid);
        if (meta.oom) {
            meta.oom = false;
            continue;
        }
        struct cwh_filing d = {
            .url = rx->urls[i],
            .success_2xx = rx->success_2xx,
            .transmission_id = tid,
            .event_type = (int)e->type,
            .tenant_key = key,
            .payment_key = e->payment_key,
            .order_id = e->order_id,
            .meta = meta.data,
            .body = e->body,
            .body_len = e->body_len,
            .due_unix_us = now_unix_us(),
        };
        int result = -1;
        if (f && u < f->drop_p) {
            d.dropped = true;
            if (cwh_file(w->cwh, &d, w->max_pending, WEBHOOK_JOURNAL))
                result = RES_DROPPED;
        } else {
            bool dup = f && u < f->drop_p + f->duplicate_p;
            double delay_ms = f ? latency_sample_ms(&f->delay, &rng) : 0;
            double after_ms = dup ? latency_sample_ms(&f->duplicate_after, &rng) : 0;
            d.due_unix_us += (int64_t)(delay_ms * 1000);
            uint64_t id = cwh_file(w->cwh, &d, w->max_pending, WEBHOOK_JOURNAL);
            if (id && dup) {
                d.duplicate_of = id;
                d.due_unix_us += (int64_t)(after_ms * 1000);
                if (cwh_file(w->cwh, &d, w->max_pending, WEBHOOK_JOURNAL))
                    result = RES_DUPLICATED;
            }
        }
        /* A filing the store refused is lost, as an event is on out of memory: its change
         * answered already. */
        if (result >= 0) {
            pthread_mutex_lock(&w->lock);
            w->attempts_total[e->type][result]++;
            pthread_mutex_unlock(&w->lock);
        }
    }
    buf_fini(&meta);
}

/* ---- the interface --------------------------------------------------------------------------- */

int webhook_url_check(const char *url, char err[ERR_LEN])
{
    if (strlen(url) > 2048) {
        snprintf(err, ERR_LEN, "a receiver URL is at most 2048 bytes");
        return -1;
    }
    CURLU *u = curl_url();
    char *scheme = NULL, *host = NULL, *user = NULL, *port = NULL;
    int rc = -1;
    if (!u) {
        snprintf(err, ERR_LEN, "out of memory");
        return -1;
    }
    CURLUcode uc = curl_url_set(u, CURLUPART_URL, url, CURLU_NON_SUPPORT_SCHEME);
    if (uc != CURLUE_OK) {
        snprintf(err, ERR_LEN, "'%.200s' is not a URL (%s); a receiver is http://host[:port]/path",
                 url, curl_url_strerror(uc));
    } else if (curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
               strcmp(scheme, "http") != 0) {
        snprintf(err, ERR_LEN, "'%.200s': a receiver is http://host[:port]/path (scheme %s%s%s "
                 "is not supported)", url, scheme ? "\"" : "", scheme ? scheme : "none",
                 scheme ? "\"" : "");
    } else if (strncmp(url + 4, "://", 3) != 0 || url[7] == '/') {
        /* After the scheme (url[0..3], "http" in some case) libcurl reads "http:/h/p" and
         * "http:///h/p" as http://h/p: not what was written */
        snprintf(err, ERR_LEN, "'%.200s': a receiver is http://host[:port]/path (two slashes, "
                 "then the host)", url);
    } else if (curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK || host[0] == '\0') {
        snprintf(err, ERR_LEN, "'%.200s': a receiver URL needs a host", url);
    } else if (curl_url_get(u, CURLUPART_PORT, &port, 0) == CURLUE_OK && strcmp(port, "0") == 0) {
        snprintf(err, ERR_LEN, "'%.200s': port 0 is no receiver's port", url);
    } else if (curl_url_get(u, CURLUPART_USER, &user, 0) == CURLUE_OK) {
        snprintf(err, ERR_LEN, "'%.200s': a receiver URL takes no user name or password", url);
    } else if (strchr(url, '#')) {
        /* A '#' starts the fragment wherever it is (RFC 3986 §3.5); libcurl reports none for an
         * empty one ("http://h/#"). */
        snprintf(err, ERR_LEN, "'%.200s': a receiver URL takes no #fragment", url);
    } else {
        rc = 0;
    }
    curl_free(scheme);
    curl_free(host);
    curl_free(user);
    curl_free(port);
    curl_url_cleanup(u);
    return rc;
}

int delivery_status_parse(const char *s)
{
    for (int i = 0; i < 4; i++)
        if (strcmp(s, STATUS_NAMES[i]) == 0)
            return i;
    return -1;
}

void wh_receivers_clear(struct receivers *rx)
{
    for (size_t i = 0; i < rx->n; i++)
        free(rx->urls[i]);
    rx->n = 0;
}

void wh_set_receivers_locked(struct webhooks *w, struct receivers *rx,
                             const char *const *urls, size_t n, bool success_2xx)
{
    wh_receivers_clear(rx);
    for (size_t i = 0; i < n && i < WEBHOOK_MAX_RECEIVERS; i++)
        if ((rx->urls[rx->n] = strdup(urls[i])))
            rx->n++;
    rx->success_2xx = success_2xx;
    size_t any = w->server.n;
    for (struct receivers *x = w->own; x; x = x->next)
        any += x->n;
    atomic_store(&w->n_receivers, any);
}

/* Keep only timers of deliveries still in the journal. */
static void heap_filter(struct webhooks *w, struct heap *h)
{
    size_t keep = 0;
    for (size_t i = 0; i < h->n; i++)
        if (wh_find(w, h->t[i].id))
            h->t[keep++] = h->t[i];
    h->n = keep;
    for (size_t i = keep / 2; i-- > 0;)
        wh_heap_sift_down(h, i);
}

/* Does the reset of `t` (NULL: every tenant) drop what belongs to tenant `of` at generation
 * `gen`? Only what a reset has overtaken: events of the tenant's current ledger stay. */
static bool dropped_by_reset(const struct tenant *t, const struct tenant *of, uint64_t gen)
{
    return (!t || t == of) && gen < tenant_generation(of);
}

void webhooks_reset(struct webhooks *w, const struct tenant *t)
{
    pthread_mutex_lock(&w->inbox_lock);
    size_t keep = 0;
    for (size_t i = 0; i < w->n_inbox; i++)
        if (!dropped_by_reset(t, w->inbox[i].ev->tenant, w->inbox[i].ev->generation))
            w->inbox[keep++] = w->inbox[i];
        else
            wh_event_unref(w->inbox[i].ev); /* only the inbox's: not filed yet */
    w->n_inbox = keep;
    pthread_mutex_unlock(&w->inbox_lock);

    if (w->cwh) { /* the cluster's deliveries; claimed ones find their lease gone */
        cwh_reset(w->cwh, t == NULL, t ? tenant_key(t) : NULL);
        if (!t) {
            pthread_mutex_lock(&w->lock);
            memset(w->attempts_total, 0, sizeof w->attempts_total);
            pthread_mutex_unlock(&w->lock);
        }
        return;
    }
    pthread_mutex_lock(&w->lock);
    keep = 0;
    for (size_t i = 0; i < w->n_all; i++) {
        struct delivery *d = w->all[i];
        if (!dropped_by_reset(t, d->ev->tenant, d->ev->generation)) {
            w->all[keep++] = d;
            continue;
        }
        wh_settle(w, d, DELIVERY_FAILED);
        if (d->in_flight && wh_grow((void **)&w->orphans, &w->cap_orphans, w->n_orphans + 1,
                                    sizeof *w->orphans)) {
            d->orphan = d->orphan_listed = true;
            w->orphans[w->n_orphans++] = d;
        } else if (d->in_flight) {
            d->orphan = true; /* no room to list it: collect_done frees it when it ends */
        } else {
            wh_delivery_free(d);
        }
    }
    w->n_all = keep;
    w->trim_at = 0;
    heap_filter(w, &w->real);
    heap_filter(w, &w->biz);
    if (!t) { /* the server's counters restart with a server-wide reset only */
        w->n_resends = 0;
        memset(w->attempts_total, 0, sizeof w->attempts_total);
        w->evicted_total = 0;
    }
    pthread_mutex_unlock(&w->lock);
    wh_wake(w);
}

int webhooks_set_receivers(struct webhooks *w, const struct tenant *t,
                           const char *const *urls, size_t n, bool success_2xx)
{
    if (w->cwh)
        return cwh_set_receivers(w->cwh, t == NULL, t ? tenant_key(t) : NULL, urls, n,
                                 success_2xx) == 0 ? 0 : -2;
    pthread_mutex_lock(&w->lock);
    struct receivers *rx = receivers_of(w, t, true);
    if (rx)
        wh_set_receivers_locked(w, rx, urls, n, success_2xx);
    pthread_mutex_unlock(&w->lock);
    return rx ? 0 : -1;
}

/* webhooks_render_receivers of the cluster's lists. */
static int render_receivers_cluster(struct webhooks *w, const struct tenant *t, struct buf *b)
{
    struct cwh_receivers rx;
    bool own = false;
    if (cwh_get_receivers(w->cwh, t == NULL, t ? tenant_key(t) : NULL, &rx, &own) != 0)
        return -2;
    buf_adds(b, "{\"urls\":[");
    for (size_t i = 0; i < rx.n; i++) {
        if (i)
            buf_addc(b, ',');
        buf_add_json_strz(b, rx.urls[i]);
    }
    buf_adds(b, "],\"success\":");
    buf_adds(b, rx.success_2xx ? "\"2xx\"" : "\"200\"");
    if (t)
        buf_adds(b, own ? ",\"own\":true}" : ",\"own\":false}");
    else
        buf_addc(b, '}');
    cwh_receivers_clear(&rx);
    return 0;
}

int webhooks_render_receivers(struct webhooks *w, const struct tenant *t, struct buf *b)
{
    if (w->cwh)
        return render_receivers_cluster(w, t, b);
    pthread_mutex_lock(&w->lock);
    const struct receivers *rx = receivers_of(w, t, false);
    buf_adds(b, "{\"urls\":[");
    for (size_t i = 0; i < rx->n; i++) {
        if (i)
            buf_addc(b, ',');
        buf_add_json_strz(b, rx->urls[i]);
    }
    buf_adds(b, "],\"success\":");
    buf_adds(b, rx->success_2xx ? "\"2xx\"" : "\"200\"");
    if (t)
        buf_adds(b, rx->tenant ? ",\"own\":true}" : ",\"own\":false}");
    else
        buf_addc(b, '}');
    pthread_mutex_unlock(&w->lock);
    return 0;
}

static void add_time(struct buf *b, int64_t us)
{
    char t[32];
    fmt_kst(us, t);
    buf_add_json_strz(b, t);
}

static void render_delivery(struct webhooks *w, struct buf *b, const struct delivery *d)
{
    buf_addf(b, "{\"id\":%llu,\"url\":", (unsigned long long)d->id);
    buf_add_json_strz(b, d->url);
    buf_adds(b, ",\"event_type\":\"");
    buf_adds(b, EVENT_TYPE_NAMES[d->ev->type]);
    buf_adds(b, "\",\"transmission_id\":\"");
    buf_adds(b, d->transmission_id);
    buf_adds(b, "\",\"tenant\":");
    const char *key = tenant_key(d->ev->tenant);
    if (key)
        buf_add_json_strz(b, key);
    else
        buf_adds(b, "null");
    buf_adds(b, ",\"payment_key\":");
    buf_add_json_strz(b, d->ev->payment_key);
    buf_adds(b, ",\"order_id\":");
    buf_add_json_strz(b, d->ev->order_id);
    buf_adds(b, ",\"transaction_key\":");
    if (d->ev->tx_key[0])
        buf_add_json_strz(b, d->ev->tx_key);
    else
        buf_adds(b, "null");
    buf_adds(b, ",\"status\":\"");
    buf_adds(b, STATUS_NAMES[d->status]);
    buf_adds(b, "\",\"duplicate_of\":");
    if (d->duplicate_of)
        buf_add_u64(b, d->duplicate_of);
    else
        buf_adds(b, "null");
    buf_adds(b, ",\"next_attempt_at\":");
    if (d->status == DELIVERY_PENDING && !d->in_flight && d->due_biz_us)
        add_time(b, d->due_biz_us);
    else if (d->status == DELIVERY_PENDING && !d->in_flight && d->due_mono_ns)
        add_time(b, gateway_now_us(w->g) + (d->due_mono_ns - now_mono_ns()) / 1000);
    else
        buf_adds(b, "null");
    buf_adds(b, ",\"note\":");
    if (d->note)
        buf_add_json_strz(b, d->note);
    else
        buf_adds(b, "null");
    buf_adds(b, ",\"body\":");
    if (d->ev->body)
        buf_add(b, d->ev->body, d->ev->body_len);
    else
        buf_adds(b, "null"); /* its payment went in a reset a moment ago */
    buf_adds(b, ",\"attempts\":[");
    for (uint32_t i = 0; i < d->n_attempts; i++) {
        const struct attempt *a = &d->attempts[i];
        bool done = !(d->in_flight && i == d->n_attempts - 1);
        if (i)
            buf_addc(b, ',');
        buf_adds(b, "{\"at\":");
        add_time(b, a->at_us);
        buf_addf(b, ",\"retried_count\":%u,\"http_status\":", a->retried_count);
        if (done && a->http_status)
            buf_addf(b, "%d", a->http_status);
        else
            buf_adds(b, "null");
        buf_adds(b, ",\"error\":");
        if (done && a->error)
            buf_add_json_strz(b, a->error);
        else
            buf_adds(b, "null");
        buf_adds(b, ",\"duration_ms\":");
        if (done)
            buf_addf(b, "%.3f", a->duration_ms);
        else
            buf_adds(b, "null");
        buf_addc(b, '}');
    }
    buf_adds(b, "]}");
}

static bool matches(const struct delivery *d, const struct delivery_filter *f)
{
    return (!f->tenant || f->tenant == d->ev->tenant) &&
           (!f->payment_key || strcmp(f->payment_key, d->ev->payment_key) == 0) &&
           (!f->order_id || strcmp(f->order_id, d->ev->order_id) == 0) &&
           (f->status < 0 || (int)d->status == f->status);
}

/* The deliveries the journal shows, as w->all[*from, *end): those with ids up to `upto` (the
 * newest when the listing began), of which the newest `f->limit` (0: all) matching `f`. Lock
 * held. */
static void journal_range(struct webhooks *w, const struct delivery_filter *f, uint64_t upto,
                          size_t *from, size_t *end)
{
    size_t e = w->n_all, found = 0;
    while (e > 0 && w->all[e - 1]->id > upto)
        e--;
    size_t at = e;
    while (at > 0 && (f->limit == 0 || found < f->limit))
        if (matches(w->all[--at], f))
            found++;
    *from = at;
    *end = e;
}

/* The events of w->all[from, end) matching `f` whose body was never needed yet (neither
 * rendered nor unrenderable), each with a reference taken, into a new array *ev (NULL when
 * none; out of memory: fewer). Lock held. Returns how many. */
static size_t missing_bodies(struct webhooks *w, const struct delivery_filter *f, size_t from,
                             size_t end, struct event ***ev)
{
    size_t n = 0, cap = 0;
    *ev = NULL;
    for (size_t i = from; i < end; i++) {
        struct delivery *d = w->all[i];
        if (!matches(d, f) || d->ev->body || d->ev->unrenderable ||
            !wh_grow((void **)ev, &cap, n + 1, sizeof **ev))
            continue;
        d->ev->refs++;
        (*ev)[n++] = d->ev;
    }
    return n;
}

/* Render ev[0..n)'s bodies, drop the references missing_bodies took and free ev. Called
 * without the webhooks lock: rendering takes the store lock, then the webhooks lock, one at a
 * time. */
static void render_missing(struct webhooks *w, struct event **ev, size_t n)
{
    struct buf scratch;
    buf_init(&scratch);
    wh_ensure_bodies(w, ev, n, &scratch);
    buf_fini(&scratch);
    pthread_mutex_lock(&w->lock);
    for (size_t i = 0; i < n; i++)
        wh_event_unref(ev[i]);
    pthread_mutex_unlock(&w->lock);
    free(ev);
}

int webhooks_render_deliveries(struct webhooks *w, const struct delivery_filter *f,
                               struct buf *b)
{
    if (w->cwh)
        return cwh_render_deliveries(w->cwh, f->tenant != NULL,
                                     f->tenant ? tenant_key(f->tenant) : NULL, f->payment_key,
                                     f->order_id, f->status, f->limit, gateway_now_us(w->g), b)
                       == 0 ? 0 : -2;
    /* Bodies are rendered lazily (a dropped delivery's only here), and outside the webhooks
     * lock; so the listing is written in the same lock section that found none of its
     * deliveries without a body. It shows the journal as of its start: a delivery filed while
     * bodies were being rendered waits for the next call (the set is fixed, so this ends). */
    pthread_mutex_lock(&w->lock);
    uint64_t upto = w->n_all ? w->all[w->n_all - 1]->id : 0;
    size_t from, end, n;
    struct event **ev;
    for (;;) {
        journal_range(w, f, upto, &from, &end);
        if ((n = missing_bodies(w, f, from, end, &ev)) == 0)
            break;
        pthread_mutex_unlock(&w->lock);
        render_missing(w, ev, n);
        pthread_mutex_lock(&w->lock);
    }
    buf_adds(b, "{\"deliveries\":[");
    bool first = true;
    for (size_t i = from; i < end; i++) {
        if (!matches(w->all[i], f))
            continue;
        if (!first)
            buf_addc(b, ',');
        first = false;
        render_delivery(w, b, w->all[i]);
    }
    buf_adds(b, "]}");
    pthread_mutex_unlock(&w->lock);
    return 0;
}

int webhooks_resend(struct webhooks *w, const struct tenant *t, uint64_t id, struct buf *b)
{
    if (w->cwh) {
        int rc = cwh_resend(w->cwh, t != NULL, t ? tenant_key(t) : NULL, id,
                            gateway_now_us(w->g), b);
        if (rc == 0) {
            atomic_store(&w->claim_now, true);
            wh_wake(w);
        }
        return rc;
    }
    pthread_mutex_lock(&w->lock);
    struct delivery *d;
    /* Its body first, as in webhooks_render_deliveries (and for the same reason). */
    while ((d = wh_find(w, id)) && !d->ev->body && !d->ev->unrenderable) {
        struct event **ev = malloc(sizeof *ev);
        if (!ev)
            break;
        d->ev->refs++;
        ev[0] = d->ev;
        pthread_mutex_unlock(&w->lock);
        render_missing(w, ev, 1);
        pthread_mutex_lock(&w->lock);
    }
    if (d && t && d->ev->tenant != t)
        d = NULL; /* another tenant's: not this one's to see */
    bool ok = d && wh_grow((void **)&w->resends, &w->cap_resends, w->n_resends + 1,
                           sizeof *w->resends);
    if (ok) {
        w->resends[w->n_resends++] = id;
        render_delivery(w, b, d);
    }
    pthread_mutex_unlock(&w->lock);
    if (ok)
        wh_wake(w);
    return ok ? 0 : -1;
}

void webhooks_store_message(struct webhooks *w, char *out, size_t n)
{
    if (w->cwh)
        cwh_message(w->cwh, out, n);
    else
        snprintf(out, n, "the webhook store is this process's memory");
}

void webhooks_render_metrics(struct webhooks *w, struct buf *b)
{
    uint64_t c_pending = 0, c_evicted = 0;
    bool c_up = w->cwh && cwh_counts(w->cwh, &c_pending, &c_evicted) == 0;
    pthread_mutex_lock(&w->lock);
    buf_adds(b, "# HELP fakegate_webhook_attempts_total Webhook delivery attempts by result "
                "(delivered, failed), events never sent (dropped) and duplicates filed "
                "(duplicated).\n# TYPE fakegate_webhook_attempts_total counter\n");
    for (int t = 0; t < EV_TYPES; t++)
        for (int r = 0; r < 4; r++)
            buf_addf(b, "fakegate_webhook_attempts_total{event_type=\"%s\",result=\"%s\"} %llu\n",
                     EVENT_TYPE_NAMES[t], RESULT_NAMES[r],
                     (unsigned long long)w->attempts_total[t][r]);
    buf_adds(b, "# HELP fakegate_webhook_pending Webhook deliveries waiting for an attempt or "
                "its answer.\n# TYPE fakegate_webhook_pending gauge\nfakegate_webhook_pending ");
    if (!w->cwh)
        buf_addf(b, "%zu\n", w->n_pending);
    else if (c_up) /* the cluster's (docs/cluster.md §11.7) */
        buf_addf(b, "%llu\n", (unsigned long long)c_pending);
    else
        buf_adds(b, "NaN\n"); /* the store is down: unknown, not this instance's share */
    buf_adds(b, "# HELP fakegate_webhook_evicted_total Pending deliveries failed to stay under "
                "--webhook-max-pending.\n# TYPE fakegate_webhook_evicted_total counter\n"
                "fakegate_webhook_evicted_total ");
    if (!w->cwh)
        buf_addf(b, "%llu\n", (unsigned long long)w->evicted_total);
    else if (c_up)
        buf_addf(b, "%llu\n", (unsigned long long)c_evicted);
    else
        buf_adds(b, "NaN\n");
    pthread_mutex_unlock(&w->lock);
}
