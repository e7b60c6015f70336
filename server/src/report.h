/* report.h -- what the client under test did wrong (docs/admin.md §5 GET /__admin/report),
 * judged incrementally over every gateway request since the last reset, apart from the
 * journal's ring: observe.c feeds each request in three steps (begin, identify, end) and the
 * state keeps per identity only what the findings need. Its size is bounded by a number of
 * identities (--report-max-identities), and an identity idle for --idempotency-ttl is
 * forgotten (report_sweep). No I/O; one mutex, a leaf lock (nothing else is taken under it). */
#ifndef FAKEGATE_REPORT_H
#define FAKEGATE_REPORT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "journal.h"

/* The default of --report-max-identities (docs/cli.md §1). */
#define REPORT_MAX_IDENTITIES_DEFAULT 1000000

struct report_rec;                 /* report.c: one identity's state */
struct report_event;               /* report.c: one failure event's resends */
struct report_chunk;               /* report.c: a block of records */

/* One finding kind's tally: a count and up to 10 distinct examples (owned copies). */
struct report_finding {
    size_t count;
    char *examples[10];
    size_t n_examples;
};

#define REPORT_KINDS 6             /* retried_4xx ... retry_storm (report.c's table) */
#define REPORT_ROUTES 5            /* confirm, cancel, read, virtual_account, default: enum route_id */

/* Size classes of the records an aged-out identity leaves for reuse (16 bytes each; larger
 * records are allocated one by one and freed). */
#define REPORT_SPARE_CLASSES 32

struct report {
    pthread_mutex_t lock;
    size_t max_identities;         /* the bound on n_recs */
    int64_t idle_us;               /* an identity unused this long is forgotten (0: never) */
    uint64_t first_id;             /* journal ids below this belong to an earlier run */
    uint32_t epoch;                /* resets so far: a mark identified in another epoch points
                                      at records a reset freed */
    int64_t since_unix_us;         /* the last reset, or the start */
    uint64_t judged;               /* requests ended since then */
    uint64_t unjudged;             /* of those, requests whose identity found no room */
    struct report_rec **buckets;   /* chained hash table of identities */
    size_t n_buckets, n_recs;
    uint32_t event_seq;            /* failure events numbered 1, 2, ... */
    struct report_event *open[REPORT_ROUTES]; /* the failure event open on each route */
    struct report_event *unfinished; /* events whose resends may still come, newest first */
    struct report_finding f[REPORT_KINDS];
    struct report_chunk *chunks;   /* the records' memory: bump-allocated, freed by reset */
    size_t chunk_used, chunk_cap;  /* in the newest chunk */
    size_t chunk_next;             /* the next chunk's size (0: the first's) */
    struct report_rec *spare[REPORT_SPARE_CLASSES]; /* aged-out records' memory, by size */
    struct report_rec *oldest, *newest; /* the identities (one route each), by last arrival */
};

/* What a request carries for the report between its steps (embedded in struct request, or
 * in a caller's array; zero-initialised). Written only by report.c, under the report's lock. */
struct report_mark {
    uint64_t id;                   /* its journal id (0: not begun) */
    int64_t at_us;                 /* its arrival on the gateway clock (µs since the epoch) */
    bool identified;               /* report_identify ran (or report_end stood in for it) */
    uint32_t epoch;                /* the report's epoch when it was identified */
    bool processing;               /* counted as processing in its order's and paymentKey's
                                      state until it ends */
    uint64_t key_hash;             /* its Idempotency-Key's hash (with has_key) */
    uint64_t body_hash;            /* its canonical body's, as identified (0: none) */
    bool has_key;
    uint32_t storm_event;          /* the failure event its arrival was counted in (0: none) */
    struct report_rec *id_rec, *order_rec, *pk_rec; /* borrowed while id >= first_id; id_rec
                                      is pinned (never aged out) until report_end */
};

/* An empty report bounded by `max_identities` (>= 1), dated `since_unix_us`, judging journal
 * ids from `first_id` on, forgetting an identity (a request's Idempotency-Key, else orderId,
 * else paymentKey, on one route) that no request used for `idle_us` microseconds of the
 * gateway clock (--idempotency-ttl; 0: never; docs/admin.md §5 GET /__admin/report). The
 * confirm history of an orderId or paymentKey (new_key_resend) is kept until a reset, as the
 * ledger keeps the payment. Returns 0, or -1 on out of memory. Thread: main, before start. */
int report_init(struct report *rp, size_t max_identities, int64_t since_unix_us,
                uint64_t first_id, int64_t idle_us);
void report_fini(struct report *rp);

/* POST /__admin/reset: forget everything; judge journal ids from `first_id` on (the journal's
 * first id after its own reset), dated `since_unix_us`. Marks of earlier requests are ignored
 * from now on. Thread: any. */
void report_reset(struct report *rp, int64_t since_unix_us, uint64_t first_id);

/* Step 1, when the request's journal entry begins: m remembers its journal `id` and its
 * arrival `at_us` (the gateway clock, µs since the epoch: what an identity's idleness is
 * measured on). Thread: the request's. */
void report_begin(struct report *rp, struct report_mark *m, uint64_t id, int64_t at_us);

/* Step 2, once what identifies the request is known (its plan was drawn, or it was answered
 * before one): e's route, idempotency_key, order_id, payment_key, body_hash and
 * arrived_mono_ns (borrowed for the call). `will_process`: it can reach processing (false for
 * a drop_request fault, a throttle or a cap). Judges it as a resend (retried_4xx,
 * early_retry, new_key_resend, a failure event's arrivals). At most once per request; later
 * calls are ignored. Thread: the request's. */
void report_identify(struct report *rp, struct report_mark *m, const struct journal_entry *e,
                     bool will_process);

/* Step 3, when the request has ended: e is its complete entry (identity, status,
 * delivered, sent_mono_ns, retry_after_s, outcome, key_reuse, committed; borrowed). Runs
 * report_identify first if it never ran (will_process false). Counts it as judged. Thread:
 * the request's (completion). */
void report_end(struct report *rp, struct report_mark *m, const struct journal_entry *e);

/* Forget the identities no request used for rp->idle_us at now_us (the gateway clock, µs),
 * oldest first, looking at `budget` at most: what a later arrival of one would have been
 * judged against (its last answer, a failure event owing its resend) goes, the findings
 * already counted stay. An identity of a request still in progress is kept. *more (if not
 * NULL) is set when the budget ran out first. Returns how many went. Thread: any (the once-a-
 * second sweep, gateway_sweep_expired). */
size_t report_sweep(struct report *rp, int64_t now_us, size_t budget, bool *more);

/* Identities and order records held now (idle ones not yet swept included). Thread: any. */
size_t report_identities(struct report *rp);

/* Render GET /__admin/report: {"findings":[...],"judged_requests":N,"complete":true|false,
 * ["reason":"...",]"since":"<+09:00 time>"}. Thread: any. */
void report_render_state(struct report *rp, struct buf *b);

/* report_render_state over several reports as one (the whole server: every tenant's): the
 * findings' counts added, examples merged (at most 10 per kind), judged_requests summed,
 * complete only if every one is, since the earliest. Takes each report's lock in turn.
 * Thread: any. */
void report_render_merged(struct report *const *rps, size_t n, struct buf *b);

/* report_render_merged, and when `incomplete` is not NULL "complete":false with it as the
 * "reason" (unless too many identities is the reason already): what the caller knows is
 * missing from the requests judged (the shared journal trimmed, say). Thread: any. */
void report_render_merged_reason(struct report *const *rps, size_t n, const char *incomplete,
                                 struct buf *b);

/* Feed the entries v[0..n) (oldest first) into rp (initialised, judging ids from
 * rp->first_id) as the events they record: each arrival at arrived_mono_ns (begin and
 * identify), each end at ended_mono_ns (end), an end before an arrival at the same instant,
 * ties in the order of v -- so the same entries give the same report. Returns 0, or -1 on out
 * of memory (rp then holds part of them). Thread: any (rp's lock is taken per step). */
int report_replay(struct report *rp, const struct journal_entry *v, size_t n);

/* Render {"findings":[{"kind","rule","threshold","count","examples":[orderId...]}]} for the
 * entries v[0..n) (oldest first): they are replayed through a fresh report as the events they
 * record (each arrival at arrived_mono_ns, each end at ended_mono_ns; an end before an arrival
 * at the same instant), the same judging the server does. One finding per kind that occurred,
 * up to 10 examples each: retried_4xx, early_retry, new_key_resend, key_reuse,
 * synchronized_retries, retry_storm. Thread: any. */
void report_render(struct buf *b, const struct journal_entry *v, size_t n);

#endif
