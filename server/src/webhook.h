/* webhook.h -- webhook receivers and deliveries (docs/webhooks.md §6.2-§6.5): every status change
 * of a payment after its creation (DONE, CANCELED, PARTIAL_CANCELED, EXPIRED,
 * WAITING_FOR_DEPOSIT; a virtual account's bank events also as DEPOSIT_CALLBACK) becomes a
 * PAYMENT_STATUS_CHANGED event, rendered as the Payment was at the event, and one
 * delivery per receiver; deliveries are sent by a thread of their own over libcurl's multi
 * interface and retried 1, 4, 16, 64, 256, 1024 and 4096 minutes apart on the gateway clock, at
 * most 8 attempts. The profile's "webhooks" section delays, duplicates or drops them.
 *
 * Threads and locks: events arrive from the store (under the store lock) into an inbox behind a
 * leaf lock; the dispatcher thread renders them under the store lock, then files deliveries
 * under the webhooks lock. Admin calls take the webhooks lock only. Nothing takes the store lock
 * while holding the webhooks lock, and no call here waits on a receiver. With --store
 * redis:// receivers and deliveries are the cluster's, in Redis (cluster_webhooks.h): each
 * instance files the deliveries of its own events there and claims due ones from there. */
#ifndef FAKEGATE_WEBHOOK_H
#define FAKEGATE_WEBHOOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "common.h"

struct gateway;
struct tenant;
struct webhooks;

/* At most this many receivers (--webhook-url, PUT /__admin/webhooks). */
#define WEBHOOK_MAX_RECEIVERS 16
/* Default of --webhook-max-pending: deliveries waiting for an attempt or its result. */
#define WEBHOOK_MAX_PENDING_DEFAULT 10000
/* GET /__admin/webhooks/deliveries keeps the last this many deliveries (pending ones always). */
#define WEBHOOK_JOURNAL 10000

/* Check a receiver URL: http://host[:port][/path][?query], nothing else (no https, no user
 * name or password, no fragment), at most 2048 bytes. 0, or -1 with a message naming what is
 * wrong in err ("a receiver URL is http://host[:port]/path; got scheme \"https\""). Parsing
 * is libcurl's (curl_url). Thread: any. */
int webhook_url_check(const char *url, char err[ERR_LEN]);

/* Start the dispatcher for gateway `g`: subscribe to its payment events, set the receivers to
 * the `n_urls` URLs (each already checked; success rule "200") and start the delivery thread.
 * `max_pending` bounds pending deliveries (0 = WEBHOOK_MAX_PENDING_DEFAULT); `quiet` silences
 * the note on abandoned deliveries at exit. Sets g->webhooks. Returns the dispatcher, or NULL
 * with a message in err (out of memory, libcurl or thread start failed). Thread: main, before
 * the daemon starts. */
struct webhooks *webhooks_start(struct gateway *g, const char *const *urls, size_t n_urls,
                                size_t max_pending, bool quiet, char err[ERR_LEN]);

/* Stop the thread at once, abandoning pending deliveries (a line on stderr says how many), and
 * free everything. Never waits on a receiver. NULL is allowed. Thread: main. */
void webhooks_stop(struct webhooks *w);

/* Wake the dispatcher to look at its timers now (the gateway clock moved); with --store
 * redis:// it looks for due deliveries in the store at once, too. Thread: any. */
void webhooks_wake(struct webhooks *w);

/* POST /__admin/reset: drop the pending deliveries and the journal of deliveries of events
 * from ledgers a reset has emptied -- every tenant's (t NULL; the counters restart too) or
 * tenant t's; with --store redis:// the cluster's deliveries of every tenant or of t. Thread:
 * any. */
void webhooks_reset(struct webhooks *w, const struct tenant *t);

/* PUT /__admin/webhooks: replace the receivers -- the server's (t NULL), or tenant t's own,
 * which its events go to instead of the server's from now on -- with `n` URLs (checked by the
 * caller) and the success rule (`success_2xx`: any 2xx; else exactly 200). Deliveries already
 * filed keep their receiver. With --store redis:// the lists are the cluster's (every instance
 * files by them from its next batch on). 0, -1 on out of memory, -2 the store is down
 * (webhooks_store_message says why). Thread: any. */
int webhooks_set_receivers(struct webhooks *w, const struct tenant *t,
                           const char *const *urls, size_t n, bool success_2xx);

/* {"urls": [...], "success": "200" | "2xx"} into b: the server's, or (t) the receivers of t's
 * events, with "own": whether they are its own. 0, or -2 the store is down. Thread: any. */
int webhooks_render_receivers(struct webhooks *w, const struct tenant *t, struct buf *b);

/* GET /__admin/webhooks/deliveries filters; NULL / -1 / 0 = not filtered. */
struct delivery_filter {
    const struct tenant *tenant; /* only its deliveries; NULL: every tenant's */
    const char *payment_key;
    const char *order_id;
    int status;              /* enum delivery_status, or -1 */
    size_t limit;            /* the newest `limit` matches; 0 = all kept */
};

enum delivery_status { DELIVERY_PENDING = 0, DELIVERY_DELIVERED, DELIVERY_FAILED, DELIVERY_DROPPED };

/* "pending", "delivered", "failed", "dropped" → 0..3, or -1. */
int delivery_status_parse(const char *s);

/* {"deliveries": [...]} oldest first (docs/webhooks.md §6.4), matching `f`: this process's
 * journal, or with --store redis:// the cluster's (docs/cluster.md §11.7). 0, or -2 the store
 * is down. Thread: any. */
int webhooks_render_deliveries(struct webhooks *w, const struct delivery_filter *f,
                               struct buf *b);

/* POST /__admin/webhooks/deliveries/{id}/resend: send delivery `id` again now (the same
 * transmission id and body, retried-count one more than its last attempt's), after the attempt
 * in flight if there is one (each resend asked for is one attempt). Renders the delivery into
 * b and returns 0, or -1 when no delivery has that id (never filed, dropped by a reset or the
 * journal's bound, or -- t not NULL -- another tenant's), -2 the store is down. With
 * --store redis:// the attempt is sent by whichever instance claims it first. Thread: any. */
int webhooks_resend(struct webhooks *w, const struct tenant *t, uint64_t id, struct buf *b);

/* The webhook families for /metrics: fakegate_webhook_attempts_total{event_type,result} (this
 * process's attempts), fakegate_webhook_pending and fakegate_webhook_evicted_total (with
 * --store redis:// the cluster's; NaN while it is down). Thread: any. */
void webhooks_render_metrics(struct webhooks *w, struct buf *b);

/* Why the last call answered -2: "fakegate store redis://HOST:PORT/DB unreachable: WHY", into
 * out (n bytes), for a 503. Thread: any. */
void webhooks_store_message(struct webhooks *w, char *out, size_t n);

#endif
