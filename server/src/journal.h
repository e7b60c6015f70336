/* journal.h -- the request journal (docs/admin.md §5 GET /__admin/requests): a ring buffer of the
 * last N requests, each written when it arrives and completed when it ends, so a held request shows
 * as pending. It is also what the retry-behaviour report (report.c) reads. Thread-safe: ids come
 * from an atomic counter and each ring slot has its own mutex, so two workers writing different
 * requests never wait for each other; entries are copied out, never borrowed. */
#ifndef FAKEGATE_JOURNAL_H
#define FAKEGATE_JOURNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"

/* Every request has exactly one outcome (docs/admin.md §5, docs/edge-rules.md §7 "Metrics"). */
enum outcome {
    OUT_OK = 0, OUT_REPLAYED, OUT_CONFLICT, OUT_BUSINESS_ERROR, OUT_INVALID, OUT_UNAUTHORIZED,
    OUT_THROTTLED, OUT_CAPPED, OUT_DROPPED_REQUEST, OUT_DROPPED_RESPONSE, OUT_FAULT_ERROR,
    OUT_COUNT
};

/* "ok", "replayed", ... as metrics and the journal spell them. */
const char *outcome_name(enum outcome o);

enum delivered { DELIVERED_PENDING = 0, DELIVERED_YES, DELIVERED_NO, DELIVERED_PARTIAL };

struct journal_entry {
    uint64_t id;                 /* 1, 2, ... in arrival order (not restarted by reset);
                                    0 = empty slot */
    int64_t arrived_unix_us;
    int64_t arrived_mono_ns;
    int64_t ended_mono_ns;       /* 0 while pending */
    int64_t sent_mono_ns;        /* when the answer was handed to the network (0: none) */
    char method[12];
    char *path;                  /* owned; bytes as received (escaped when rendered) */
    int route;                   /* enum route_id, or ROUTE_OTHER (profile.h) */
    char *order_id, *payment_key, *idempotency_key; /* owned, may be NULL */
    const char *tenant;          /* the secret key of its tenant (borrowed: tenants live until
                                    exit), or NULL: refused before a key was accepted */
    uint64_t body_hash;          /* canonical body (0: none), for "same request" */
    uint32_t attempt;
    double queue_latency_ms, latency_ms; /* the plan's (ms) */
    double spent_latency_ms;     /* what it really spent of them (ms): the queue if it got
                                    there, the processing latency if it went on into it */
    char trace_id[33];           /* the x-tosspayments-trace-id sent ("" if none) */
    const char *fault;           /* static: "none", "error", "drop_request", ... */
    int status;                  /* 0 while pending or when nothing was sent */
    const char *code;            /* static or NULL: the error code sent, if known */
    uint32_t retry_after_s;      /* Retry-After sent (seconds; 0 = none) */
    int64_t retry_after_until_mono_ns; /* an http-date Retry-After: the instant it names
                                          (monotonic ns; 0 = none or seconds) */
    enum outcome outcome;
    enum delivered delivered;
    bool key_reuse;              /* its Idempotency-Key came with a different body */
    bool committed;              /* the ledger changed for it (a confirm approved, a cancel
                                    done), whatever answer it got */
};

struct journal_slot;              /* journal.c */

/* --journal-size: its default (docs/admin.md §5) and its largest value. The ring's slots are
 * allocated at start and become resident as requests first use them, about 300 bytes each,
 * plus some 90 bytes of strings once a slot holds a request, so the largest costs about 390 MB
 * once a million requests have passed. */
#define JOURNAL_SIZE_DEFAULT 10000
#define JOURNAL_SIZE_MAX 1000000

/* The ring's slots share this many mutexes, slot i taking lock i % JOURNAL_LOCKS: a lock per
 * slot made the start write to every page of the ring (pthread_mutex_init), 3.4 MB and ~11 ms
 * of page faults here at the default size before the port file; now the ring's pages are
 * touched as requests first use them. Neighbouring slots (requests at once) take different
 * locks, never two on one cache line. */
#define JOURNAL_LOCKS 64

struct journal_lock {
    pthread_mutex_t m;
    char pad[128 - sizeof(pthread_mutex_t)]; /* no two locks on one 64-byte cache line, however
                                                the gateway is aligned */
};

struct journal {
    struct journal_slot *ring;
    size_t cap;
    _Atomic uint64_t next_id;
    _Atomic uint64_t first_id;   /* the first id handed out since the last reset */
    struct journal_lock locks[JOURNAL_LOCKS];
};

/* A ring of `cap` entries, 1 ... JOURNAL_SIZE_MAX (--journal-size, default JOURNAL_SIZE_DEFAULT;
 * docs/admin.md §5). Returns 0, or -1 on out of memory. */
int journal_init(struct journal *j, size_t cap);
void journal_fini(struct journal *j);
/* Forget every entry. Ids carry on (a request held across the reset cannot complete a newer
 * entry). */
void journal_reset(struct journal *j);

/* Write a new pending entry from *e (strings are copied). Returns its id. */
uint64_t journal_begin(struct journal *j, const struct journal_entry *e);

/* Update entry `id` (if still in the ring) with the request's details and/or its end. Strings
 * are copied; NULL strings leave the stored ones. */
void journal_update(struct journal *j, uint64_t id, const struct journal_entry *e);

/* Copies of the newest `limit` entries, oldest first, into a new array (caller frees with
 * journal_free_copy). *n receives the count. */
struct journal_entry *journal_copy(struct journal *j, size_t limit, size_t *n);

/* GET /__admin/requests filters (docs/admin.md §5); a NULL string, a negative number or 0
 * since_id means "any". Strings are borrowed for the call. */
struct journal_filter {
    const char *order_id, *payment_key, *idempotency_key; /* equal to the entry's */
    int route;                   /* enum route_id or ROUTE_OTHER; -1: any */
    int status;                  /* the status sent; -1: any (a pending entry has none) */
    int outcome;                 /* enum outcome; -1: any (a pending entry has none) */
    uint64_t since_id;           /* only ids above it */
    const char *tenant;          /* only this tenant's (compared as a pointer: tenant_key) */
    size_t limit;                /* the newest `limit` matches (0: all of them) */
    size_t max_limit;            /* the largest `limit` accepted: the journal's size (0:
                                    JOURNAL_SIZE_DEFAULT); set before parsing */
};

/* Parse one filter from a query parameter `name` = `value` (percent-decoded) into *f; `limit`
 * is 1 ... f->max_limit. Returns 0, or -1 with a message naming the parameter in err (an
 * unknown name, an empty or invalid value). Thread: any. */
int journal_filter_set(struct journal_filter *f, const char *name, const char *value,
                       char *err, size_t err_len);

/* Does entry e pass filter f (every field of f that is set)? f->tenant is compared as a
 * pointer. Thread: any; pure. */
bool journal_filter_matches(const struct journal_filter *f, const struct journal_entry *e);

/* Copies of the newest f->limit entries that match f, oldest first (caller frees with
 * journal_free_copy); *n receives their count and *total the number of entries in the ring
 * that match f. Thread: any. */
struct journal_entry *journal_copy_filtered(struct journal *j, const struct journal_filter *f,
                                            size_t *n, size_t *total);
void journal_free_copy(struct journal_entry *v, size_t n);

/* Render entries as {"requests":[...],"total":N} (docs/admin.md §5 shape; `total`: the matching
 * entries in the ring, of which v[0..n) are the newest). Non-UTF-8 bytes are escaped as \xNN. */
void journal_render(struct buf *b, const struct journal_entry *v, size_t n, size_t total);
/* The same, each entry i with "instance": instances[i] as 16 hex digits (the /healthz
 * `instance` of the process that served it; --store redis://, docs/cluster.md §11.8), or
 * none when `instances` is NULL. */
void journal_render_instances(struct buf *b, const struct journal_entry *v,
                              const uint64_t *instances, size_t n, size_t total);

/* One access-log line for entry e (docs/cli.md §1 --log): time, method, path, route, orderId,
 * Idempotency-Key, decision, status, delivered, duration, as `key=value` text or one JSON
 * object; non-UTF-8 bytes as \xNN; at most 8 KiB including the newline. */
void journal_log_line(struct buf *b, const struct journal_entry *e, bool json);

#endif
