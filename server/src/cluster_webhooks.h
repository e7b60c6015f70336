/* cluster_webhooks.h -- webhook receivers and deliveries kept in the shared Redis of --store
 * redis:// (docs/cluster.md §11.7), so that every instance sees the cluster's deliveries and
 * each attempt is sent by exactly one of them. A delivery is a hash with its due time in a
 * sorted set (the real clock for a first attempt, the gateway clock for a retry, a third set
 * for resends asked for); a dispatcher claims due deliveries with one Lua script that also
 * takes a lease on each, and records the attempt's result with another that checks the lease
 * is still its own. A claimer that dies loses its leases after CWH_LEASE_MS and its deliveries
 * come back due. webhook.c keeps the rules (the schedule, faults, bodies); this file only
 * moves their state to and from Redis.
 * Threads: one connection for the dispatcher thread (cwh_file, cwh_claim, cwh_complete,
 * cwh_refresh_receivers) and one, behind a lock, for every other caller. */
#ifndef FAKEGATE_CLUSTER_WEBHOOKS_H
#define FAKEGATE_CLUSTER_WEBHOOKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "common.h"

/* A claim's lease: longer than an attempt may take (10 s, docs/webhooks.md §6.4), so a live
 * claimer always records its attempt first; a dead one's deliveries are due again after it. */
#define CWH_LEASE_MS 15000
/* How often an idle dispatcher looks for deliveries other instances filed or made due. */
#define CWH_POLL_MS 100
/* Receivers per list, as WEBHOOK_MAX_RECEIVERS. */
#define CWH_MAX_RECEIVERS 16

struct cwh;
struct cluster_url;

/* One receiver list as stored: the server's or a tenant's own. */
struct cwh_receivers {
    char *urls[CWH_MAX_RECEIVERS]; /* owned */
    size_t n;
    bool success_2xx;
};

/* A delivery to file (cwh_file). Strings borrowed for the call. */
struct cwh_filing {
    const char *url;
    bool success_2xx;
    const char *transmission_id;
    int event_type;            /* enum event_type (webhook_int.h) */
    const char *tenant_key;    /* the tenant's secret key, NULL for the keyless default */
    const char *payment_key, *order_id;
    const char *meta;          /* the listing's fields after "id": "url":...,"transaction_key":... */
    const char *body;
    size_t body_len;
    bool dropped;              /* the profile's drop: filed as dropped, never due */
    uint64_t duplicate_of;     /* 0: an original */
    int64_t due_unix_us;       /* the first attempt, on the real clock (wall, µs) */
};

/* A delivery claimed for one attempt (cwh_claim). The caller owns url and body (free). */
struct cwh_claim {
    uint64_t id;
    bool resend;               /* a resend asked for, not a scheduled attempt */
    int before;                /* enum delivery_status before a resend started it */
    char *url;
    bool success_2xx;
    char transmission_id[35];
    int event_type;
    char *body;
    size_t body_len;
    uint32_t n_attempts;       /* attempts recorded so far: this one's retried-count */
    uint32_t n_sched;          /* scheduled attempts made */
    int64_t sched_base_us;     /* gateway-clock time the last scheduled attempt was due */
};

/* A handle for the Redis at *u (copied; cluster_url_of) with this instance's id (the lease
 * token). NULL with err filled on out of memory. Nothing connects yet. Thread: main. */
struct cwh *cwh_new(const struct cluster_url *u, uint64_t instance_id, char err[ERR_LEN]);
/* Close the connections and free h (NULL allowed). Thread: main, the dispatcher stopped. */
void cwh_free(struct cwh *h);

/* "fakegate store redis://... unreachable: WHY" of the last failure, into out (n bytes): the
 * message of a 503. Thread: any. */
void cwh_message(struct cwh *h, char *out, size_t n);

/* The server's receivers, unless the cluster has some already (--webhook-url of the first
 * instance to start; a PUT made since stands). 0, or -1 if the store is down. Thread: main. */
int cwh_seed_receivers(struct cwh *h, const char *const *urls, size_t n);
/* PUT /__admin/webhooks: replace the server's (tenant_key NULL, server true) or a tenant's own
 * list (server false; tenant_key NULL for the keyless tenant). 0, or -1 store down. Thread:
 * any but the dispatcher. */
int cwh_set_receivers(struct cwh *h, bool server, const char *tenant_key,
                      const char *const *urls, size_t n, bool success_2xx);
/* The receivers of a tenant's events (server false: its own if it has them, *own says) or the
 * server's (server true), into *out (caller frees with cwh_receivers_clear). 0, or -1 store
 * down. Thread: any but the dispatcher. */
int cwh_get_receivers(struct cwh *h, bool server, const char *tenant_key,
                      struct cwh_receivers *out, bool *own);
void cwh_receivers_clear(struct cwh_receivers *rx);

/* The dispatcher's copy of every list: read again when the cluster's receivers changed since
 * the last look (one round trip when they did not). 0, or -1 store down (the copy stays).
 * Thread: the dispatcher. */
int cwh_refresh_receivers(struct cwh *h);
/* The receivers of events of the tenant of `tenant_key` (NULL: keyless) from that copy:
 * its own, else the server's. Borrowed until the next cwh_refresh_receivers. Thread: the
 * dispatcher. */
const struct cwh_receivers *cwh_receivers_of(struct cwh *h, const char *tenant_key);

/* File one delivery: a new cluster-wide id, its record, due at d->due_unix_us unless dropped;
 * over `max_pending` pending the oldest pending one is failed (evicted); the journal is kept
 * to `journal_max` (and every pending one). Returns the id, or 0 if the store is down.
 * Thread: the dispatcher. */
uint64_t cwh_file(struct cwh *h, const struct cwh_filing *d, size_t max_pending,
                  size_t journal_max);

/* Claim up to `max` deliveries due now -- resends asked for first, then first attempts due
 * by `now_unix_us`, then retries due by the gateway clock's `now_biz_us` -- each leased to
 * this instance for CWH_LEASE_MS; leases expired (a dead claimer's) are handed back first.
 * *out (caller frees with cwh_claims_free) receives *n claims. 0, or -1 store down.
 * Thread: the dispatcher. */
int cwh_claim(struct cwh *h, int64_t now_unix_us, int64_t now_biz_us, size_t max,
              struct cwh_claim **out, size_t *n);
void cwh_claims_free(struct cwh_claim *c, size_t n);

/* Record the attempt of claimed delivery `id`: its rendered attempt object (JSON, as
 * GET /__admin/webhooks/deliveries shows it), the delivery's status after it (enum
 * delivery_status), its scheduled-attempt count and base, and the next retry's gateway-clock
 * due time (`due_biz_us`; -1: unchanged); the lease is released. An evicted delivery keeps its
 * status. Returns 1, 0 when the lease was no longer ours (a reset dropped it, or it expired),
 * -1 store down. Thread: the dispatcher. */
int cwh_complete(struct cwh *h, uint64_t id, const char *attempt, size_t attempt_len,
                 int status, uint32_t n_sched, int64_t sched_base_us, int64_t due_biz_us);

/* GET /__admin/webhooks/deliveries over the cluster's journal: {"deliveries": [...]} into b,
 * oldest first, only tenant `tenant_key` (when `by_tenant`), paymentKey / orderId when not
 * NULL, status (enum delivery_status) when >= 0, the newest `limit` (0: all). `now_biz_us` is
 * the gateway clock, for a first attempt's next_attempt_at. 0, or -1 store down (b as it was
 * plus what was written). Thread: any but the dispatcher. */
int cwh_render_deliveries(struct cwh *h, bool by_tenant, const char *tenant_key,
                          const char *payment_key, const char *order_id, int status,
                          size_t limit, int64_t now_biz_us, struct buf *b);
/* POST .../{id}/resend: render delivery `id` (as it is) into b and ask for one more attempt,
 * which the first dispatcher free claims. Only tenant `tenant_key`'s when `by_tenant`.
 * 0, -1 no such delivery (or another tenant's), -2 store down. Thread: any but the
 * dispatcher. */
int cwh_resend(struct cwh *h, bool by_tenant, const char *tenant_key, uint64_t id,
               int64_t now_biz_us, struct buf *b);
/* POST /__admin/reset: drop the deliveries of every tenant (all) or of tenant `tenant_key`'s;
 * ids go on counting. 0, or -1 store down. Thread: any but the dispatcher. */
int cwh_reset(struct cwh *h, bool all, const char *tenant_key);
/* Pending deliveries and evictions cluster-wide, for /metrics. 0, or -1 store down. Thread:
 * any but the dispatcher. */
int cwh_counts(struct cwh *h, uint64_t *pending, uint64_t *evicted);

#endif
