/* journal.c -- request journal ring (see journal.h). Invariant: ring[id % cap] holds entry id
 * while id > next_id - cap; older ids are gone. A slot's entry changes only under the slot's
 * lock, and only to a larger id (a writer that lost its slot to a newer id skips it) or, on a
 * reset, to empty. Ids are taken before the slot is locked, so a copy can momentarily show
 * entry N+1 without N (N has its id but has not written its slot yet); both are there once
 * both requests have arrived. Slot i is guarded by locks[i % JOURNAL_LOCKS] (journal.h). */
#define _POSIX_C_SOURCE 200809L
#include "journal.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"
#include "profile.h"

const char *outcome_name(enum outcome o)
{
    static const char *const names[OUT_COUNT] = {
        "ok", "replayed", "conflict", "business_error", "invalid", "unauthorized",
        "throttled", "capped", "dropped_request", "dropped_response", "fault_error"};
    return names[o];
}

/* enum route_id, then ROUTE_OTHER (profile.h). */
static const char *const route_labels[ROUTE_LABELS] = {"confirm", "cancel", "read",
                                                       "virtual_account", "default", "other"};

static const char *route_label(int r)
{
    return r >= 0 && r < ROUTE_LABELS ? route_labels[r] : "other";
}

/* A ring slot: the entry, and one reusable buffer per string field, so the request path
 * copies its strings into memory the slot already has instead of allocating them anew. */
enum { JS_PATH, JS_ORDER_ID, JS_PAYMENT_KEY, JS_IDEM_KEY, JS_N };
struct journal_slot {
    struct journal_entry e; /* its string fields point into buf[], or are NULL */
    char *buf[JS_N];
    size_t cap[JS_N];
};

static char **slot_field(struct journal_entry *e, int i)
{
    switch (i) {
    case JS_PATH:
        return &e->path;
    case JS_ORDER_ID:
        return &e->order_id;
    case JS_PAYMENT_KEY:
        return &e->payment_key;
    default:
        return &e->idempotency_key;
    }
}

/* Copy src into field i (NULL leaves the field as it is). */
static void slot_set(struct journal_slot *s, int i, const char *src)
{
    if (!src)
        return;
    size_t n = strlen(src) + 1;
    if (n > s->cap[i]) {
        char *nb = realloc(s->buf[i], n);
        if (!nb) {
            *slot_field(&s->e, i) = NULL;
            return;
        }
        s->buf[i] = nb;
        s->cap[i] = n;
    }
    memcpy(s->buf[i], src, n);
    *slot_field(&s->e, i) = s->buf[i];
}

/* The lock of ring slot i. */
static pthread_mutex_t *slot_lock(struct journal *j, size_t i)
{
    return &j->locks[i % JOURNAL_LOCKS].m;
}

int journal_init(struct journal *j, size_t cap)
{
    j->ring = calloc(cap, sizeof *j->ring); /* untouched until used: fresh zero pages */
    j->cap = cap;
    atomic_init(&j->next_id, 1);
    atomic_init(&j->first_id, 1);
    if (!j->ring)
        return -1;
    for (size_t i = 0; i < JOURNAL_LOCKS; i++)
        pthread_mutex_init(&j->locks[i].m, NULL);
    return 0;
}

static void entry_fini(struct journal_entry *e)
{
    free(e->path);
    free(e->order_id);
    free(e->payment_key);
    free(e->idempotency_key);
    memset(e, 0, sizeof *e);
}

void journal_fini(struct journal *j)
{
    for (size_t i = 0; i < j->cap; i++)
        for (int f = 0; f < JS_N; f++)
            free(j->ring[i].buf[f]);
    for (size_t i = 0; i < JOURNAL_LOCKS; i++)
        pthread_mutex_destroy(&j->locks[i].m);
    free(j->ring);
}

void journal_reset(struct journal *j)
{
    /* Ids carry on: a request held across the reset must not complete a newer entry. Entries
     * begun after first_id moves stay (a request arriving during the reset). */
    uint64_t first = atomic_load(&j->next_id);
    atomic_store(&j->first_id, first);
    for (size_t i = 0; i < j->cap; i++) {
        struct journal_slot *s = &j->ring[i];
        pthread_mutex_lock(slot_lock(j, i));
        if (s->e.id && s->e.id < first) /* an empty slot stays untouched */
            memset(&s->e, 0, sizeof s->e);
        pthread_mutex_unlock(slot_lock(j, i));
    }
}

static void copy_entry(struct journal_entry *dst, const struct journal_entry *src)
{
    *dst = *src;
    dst->path = src->path ? strdup(src->path) : NULL;
    dst->order_id = src->order_id ? strdup(src->order_id) : NULL;
    dst->payment_key = src->payment_key ? strdup(src->payment_key) : NULL;
    dst->idempotency_key = src->idempotency_key ? strdup(src->idempotency_key) : NULL;
}

uint64_t journal_begin(struct journal *j, const struct journal_entry *e)
{
    uint64_t id = atomic_fetch_add(&j->next_id, 1);
    struct journal_slot *slot = &j->ring[id % j->cap];
    pthread_mutex_t *lock = slot_lock(j, id % j->cap);
    pthread_mutex_lock(lock);
    if (slot->e.id > id) { /* a newer request took the slot first: this entry is gone */
        pthread_mutex_unlock(lock);
        return id;
    }
    slot->e = *e;
    slot->e.path = slot->e.order_id = slot->e.payment_key = slot->e.idempotency_key = NULL;
    slot_set(slot, JS_PATH, e->path);
    slot_set(slot, JS_ORDER_ID, e->order_id);
    slot_set(slot, JS_PAYMENT_KEY, e->payment_key);
    slot_set(slot, JS_IDEM_KEY, e->idempotency_key);
    slot->e.id = id;
    pthread_mutex_unlock(lock);
    return id;
}

void journal_update(struct journal *j, uint64_t id, const struct journal_entry *e)
{
    struct journal_slot *slot = &j->ring[id % j->cap];
    pthread_mutex_t *lock = slot_lock(j, id % j->cap);
    pthread_mutex_lock(lock);
    struct journal_entry *s = &slot->e;
    if (id && s->id == id) {
        slot_set(slot, JS_ORDER_ID, e->order_id);
        slot_set(slot, JS_PAYMENT_KEY, e->payment_key);
        slot_set(slot, JS_IDEM_KEY, e->idempotency_key);
        if (e->body_hash)
            s->body_hash = e->body_hash;
        if (e->attempt)
            s->attempt = e->attempt;
        s->queue_latency_ms = e->queue_latency_ms;
        s->latency_ms = e->latency_ms;
        if (e->fault)
            s->fault = e->fault;
        if (e->ended_mono_ns) {
            s->ended_mono_ns = e->ended_mono_ns;
            s->sent_mono_ns = e->sent_mono_ns;
            s->status = e->status;
            s->code = e->code;
            s->retry_after_s = e->retry_after_s;
            s->retry_after_until_mono_ns = e->retry_after_until_mono_ns;
            s->outcome = e->outcome;
            s->delivered = e->delivered;
            s->key_reuse = e->key_reuse;
            s->committed = e->committed;
            s->spent_latency_ms = e->spent_latency_ms;
            memcpy(s->trace_id, e->trace_id, sizeof s->trace_id);
        }
    }
    pthread_mutex_unlock(lock);
}

struct journal_entry *journal_copy(struct journal *j, size_t limit, size_t *n)
{
    uint64_t last = atomic_load(&j->next_id) - 1;
    uint64_t first = atomic_load(&j->first_id);
    uint64_t kept = last + 1 > first ? last + 1 - first : 0; /* ids handed out since the reset */
    uint64_t avail = kept < j->cap ? kept : j->cap;
    if (limit < avail)
        avail = limit;
    struct journal_entry *v = calloc(avail ? avail : 1, sizeof *v);
    size_t k = 0;
    if (v)
        for (uint64_t id = last - avail + 1; id <= last && k < avail; id++) {
            struct journal_slot *slot = &j->ring[id % j->cap];
            pthread_mutex_lock(slot_lock(j, id % j->cap));
            if (slot->e.id == id) /* else gone, or begun but not yet written */
                copy_entry(&v[k++], &slot->e);
            pthread_mutex_unlock(slot_lock(j, id % j->cap));
        }
    *n = k;
    return v;
}

int journal_filter_set(struct journal_filter *f, const char *name, const char *value,
                       char *err, size_t err_len)
{
    static const char *const strings[] = {"orderId", "paymentKey", "idempotencyKey"};
    const char **dst[] = {&f->order_id, &f->payment_key, &f->idempotency_key};
    if (!*value) {
        snprintf(err, err_len, "%s: a value is required", name);
        return -1;
    }
    for (size_t i = 0; i < 3; i++)
        if (strcmp(name, strings[i]) == 0) {
            *dst[i] = value;
            return 0;
        }
    if (strcmp(name, "route") == 0) {
        for (int i = 0; i < ROUTE_LABELS; i++)
            if (strcmp(value, route_labels[i]) == 0) {
                f->route = i;
                return 0;
            }
        snprintf(err, err_len, "route: confirm, cancel, read, virtual_account, default or other");
        return -1;
    }
    if (strcmp(name, "outcome") == 0) {
        for (int i = 0; i < OUT_COUNT; i++)
            if (strcmp(value, outcome_name((enum outcome)i)) == 0) {
                f->outcome = i;
                return 0;
            }
        snprintf(err, err_len, "outcome: one of ok, replayed, conflict, business_error, invalid, "
                               "unauthorized, throttled, capped, dropped_request, "
                               "dropped_response, fault_error");
        return -1;
    }
    char *end;
    bool digits = value[0] >= '0' && value[0] <= '9';
    unsigned long long v = strtoull(value, &end, 10);
    if (strcmp(name, "status") == 0) {
        if (!digits || *end || v < 100 || v > 599) {
            snprintf(err, err_len, "status: an HTTP status, 100 .. 599");
            return -1;
        }
        f->status = (int)v;
        return 0;
    }
    if (strcmp(name, "since_id") == 0) {
        if (!digits || *end || v == ULLONG_MAX) {
            snprintf(err, err_len, "since_id: a journal entry id, 0 or more");
            return -1;
        }
        f->since_id = v;
        return 0;
    }
    if (strcmp(name, "limit") == 0) {
        size_t max = f->max_limit ? f->max_limit : JOURNAL_SIZE_DEFAULT;
        if (!digits || *end || v < 1 || v > max) {
            snprintf(err, err_len, "limit: 1 .. %zu (the journal's size, --journal-size)", max);
            return -1;
        }
        f->limit = (size_t)v;
        return 0;
    }
    snprintf(err, err_len, "unknown filter \"%.64s\" (filters: orderId, paymentKey, idempotencyKey, "
                           "route, status, outcome, since_id, limit)", name);
    return -1;
}

static bool str_is(const char *want, const char *have)
{
    return !want || (have && strcmp(want, have) == 0);
}

bool journal_filter_matches(const struct journal_filter *f, const struct journal_entry *e)
{
    return str_is(f->order_id, e->order_id) && str_is(f->payment_key, e->payment_key) &&
           str_is(f->idempotency_key, e->idempotency_key) &&
           (f->route < 0 || f->route == e->route) &&
           (f->status < 0 || (e->ended_mono_ns && e->status == f->status)) &&
           (f->outcome < 0 || (e->ended_mono_ns && (int)e->outcome == f->outcome)) &&
           (!f->tenant || f->tenant == e->tenant) && e->id > f->since_id;
}

struct journal_entry *journal_copy_filtered(struct journal *j, const struct journal_filter *f,
                                            size_t *n, size_t *total)
{
    size_t all;
    struct journal_entry *v = journal_copy(j, SIZE_MAX, &all);
    size_t k = 0;
    for (size_t i = 0; v && i < all; i++) {
        if (journal_filter_matches(f, &v[i]))
            v[k++] = v[i];
        else
            entry_fini(&v[i]);
    }
    *total = k;
    size_t keep = f->limit && f->limit < k ? f->limit : k;
    for (size_t i = 0; i < k - keep; i++) /* the oldest matches beyond the limit */
        entry_fini(&v[i]);
    if (v && keep < k)
        memmove(v, v + (k - keep), keep * sizeof *v);
    *n = v ? keep : 0;
    return v;
}

void journal_free_copy(struct journal_entry *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        entry_fini(&v[i]);
    free(v);
}

/* Append s to b with bytes that are not valid UTF-8, and control characters (and spaces, with
 * escape_space), written as the four characters \xNN (lower-case hex; docs/edge-rules.md §7: never
 * dropped); valid UTF-8 is kept. Stops before `max` output bytes (then appends "..."), never inside
 * an escape or a character. */
static void escape_bytes(struct buf *b, const char *s, size_t max, bool escape_space)
{
    size_t start = b->len;
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        size_t len = 0;
        if (*p > 0x20 && *p < 0x7f)
            len = 1;
        else if (*p == ' ' && !escape_space)
            len = 1;
        else if (*p >= 0xc2 && *p <= 0xdf)
            len = 2;
        else if (*p >= 0xe0 && *p <= 0xef)
            len = 3;
        else if (*p >= 0xf0 && *p <= 0xf4)
            len = 4;
        bool ok = len > 0;
        for (size_t i = 1; ok && i < len; i++)
            ok = (p[i] & 0xc0) == 0x80;
        size_t need = ok ? len : 4;
        if (b->len - start + need > max) {
            buf_adds(b, "...");
            return;
        }
        if (ok) {
            buf_add(b, p, len);
            p += len;
        } else {
            buf_addf(b, "\\x%02x", *p);
            p++;
        }
    }
}

/* A JSON string holding escape_bytes(s) (so "\\xNN" on the wire, which reads back as \xNN). */
static void add_escaped_max(struct buf *b, const char *s, size_t max)
{
    if (!s) {
        buf_adds(b, "null");
        return;
    }
    struct buf t;
    buf_init(&t);
    escape_bytes(&t, s, max, false);
    buf_add_json_str(b, t.data ? t.data : "", t.len);
    buf_fini(&t);
}

static void add_escaped(struct buf *b, const char *s)
{
    add_escaped_max(b, s, SIZE_MAX);
}


/* A log line's free-text fields (path, orderId, key) are cut at 1200 bytes each: even if JSON
 * escaping doubled every byte of all three, a line stays under 8 KiB (docs/edge-rules.md §7). */
#define LOG_FIELD_MAX 1200

/* Text-log value: \xNN-escaped, not quoted. */
static void add_text(struct buf *b, const char *s)
{
    if (!s)
        buf_addc(b, '-');
    else
        escape_bytes(b, s, LOG_FIELD_MAX, true); /* a space would split the value */
}

void journal_log_line(struct buf *b, const struct journal_entry *e, bool json)
{
    static const char *const delivered[] = {"pending", "yes", "no", "partial"};
    time_t t = (time_t)(e->arrived_unix_us / 1000000);
    struct tm tm;
    gmtime_r(&t, &tm);
    char ts[40];
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
    double dur = e->ended_mono_ns ? (double)(e->ended_mono_ns - e->arrived_mono_ns) / 1e6 : 0;
    if (json) {
        buf_addf(b, "{\"time\":\"%s.%06lldZ\",\"method\":", ts,
                 (long long)(e->arrived_unix_us % 1000000));
        buf_add_json_strz(b, e->method);
        buf_adds(b, ",\"path\":");
        add_escaped_max(b, e->path, LOG_FIELD_MAX);
        buf_addf(b, ",\"route\":\"%s\",\"order_id\":", route_label(e->route));
        add_escaped_max(b, e->order_id, LOG_FIELD_MAX);
        buf_adds(b, ",\"idempotency_key\":");
        add_escaped_max(b, e->idempotency_key, LOG_FIELD_MAX);
        buf_addf(b, ",\"decision\":{\"queue_latency_ms\":%.3f,\"latency_ms\":%.3f,\"fault\":\"%s\"},"
                    "\"status\":%d,\"outcome\":\"%s\",\"delivered\":\"%s\",\"duration_ms\":%.3f}",
                 e->queue_latency_ms, e->latency_ms, e->fault ? e->fault : "none", e->status,
                 outcome_name(e->outcome), delivered[e->delivered], dur);
    } else {
        buf_addf(b, "%s.%06lldZ %s ", ts, (long long)(e->arrived_unix_us % 1000000), e->method);
        add_text(b, e->path);
        buf_addf(b, " route=%s order_id=", route_label(e->route));
        add_text(b, e->order_id);
        buf_adds(b, " idempotency_key=");
        add_text(b, e->idempotency_key);
        buf_addf(b, " fault=%s queue_latency_ms=%.1f latency_ms=%.1f status=%d outcome=%s "
                    "delivered=%s duration_ms=%.1f",
                 e->fault ? e->fault : "none", e->queue_latency_ms, e->latency_ms, e->status,
                 outcome_name(e->outcome), delivered[e->delivered], dur);
    }
    buf_addc(b, '\n');
}

void journal_render(struct buf *b, const struct journal_entry *v, size_t n, size_t total)
{
    journal_render_instances(b, v, NULL, n, total);
}

void journal_render_instances(struct buf *b, const struct journal_entry *v,
                              const uint64_t *instances, size_t n, size_t total)
{
    static const char *const delivered[] = {"pending", "yes", "no", "partial"};
    buf_adds(b, "{\"requests\":[");
    for (size_t i = 0; i < n; i++) {
        const struct journal_entry *e = &v[i];
        if (i)
            buf_addc(b, ',');
        time_t t = (time_t)(e->arrived_unix_us / 1000000);
        struct tm tm;
        gmtime_r(&t, &tm);
        char ts[40];
        strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
        buf_addf(b, "{\"id\":%llu,\"arrived_at\":\"%s.%06lldZ\",\"method\":",
                 (unsigned long long)e->id, ts, (long long)(e->arrived_unix_us % 1000000));
        buf_add_json_strz(b, e->method);
        buf_adds(b, ",\"path\":");
        add_escaped(b, e->path);
        buf_addf(b, ",\"route\":\"%s\",\"order_id\":", route_label(e->route));
        add_escaped(b, e->order_id);
        buf_adds(b, ",\"payment_key\":");
        add_escaped(b, e->payment_key);
        buf_adds(b, ",\"idempotency_key\":");
        add_escaped(b, e->idempotency_key);
        buf_adds(b, ",\"tenant\":");
        add_escaped(b, e->tenant);
        buf_addf(b, ",\"attempt\":%u,\"decision\":{\"queue_latency_ms\":%.3f,\"latency_ms\":%.3f,"
                    "\"fault\":\"%s\"},\"status\":",
                 e->attempt, e->queue_latency_ms, e->latency_ms, e->fault ? e->fault : "none");
        if (e->ended_mono_ns && e->status)
            buf_addf(b, "%d", e->status);
        else
            buf_adds(b, "null");
        buf_adds(b, ",\"code\":");
        buf_add_json_strz(b, e->code);
        buf_addf(b, ",\"outcome\":");
        if (e->ended_mono_ns)
            buf_addf(b, "\"%s\"", outcome_name(e->outcome));
        else
            buf_adds(b, "null");
        buf_addf(b, ",\"delivered\":\"%s\",\"duration_ms\":", delivered[e->delivered]);
        if (e->ended_mono_ns)
            buf_addf(b, "%.3f", (double)(e->ended_mono_ns - e->arrived_mono_ns) / 1e6);
        else
            buf_adds(b, "null");
        buf_adds(b, ",\"trace_id\":");
        buf_add_json_strz(b, e->trace_id[0] ? e->trace_id : NULL);
        buf_addf(b, ",\"planned_latency_ms\":%.3f,\"latency_ms\":",
                 e->queue_latency_ms + e->latency_ms);
        if (e->ended_mono_ns)
            buf_addf(b, "%.3f", e->spent_latency_ms);
        else
            buf_adds(b, "null");
        if (instances)
            buf_addf(b, ",\"instance\":\"%016llx\"", (unsigned long long)instances[i]);
        buf_addc(b, '}');
    }
    buf_addf(b, "],\"total\":%zu}", total);
}
