/* webhook_int.h -- internal to webhook.c and webhook_journal.c; nothing else includes it.
 * The structs both files share (an event, its deliveries and their attempts, the receiver
 * lists, the webhooks state and its locks) and the helpers each lends the other, named wh_*;
 * each helper's comment is at its definition. */
#ifndef FAKEGATE_WEBHOOK_INT_H
#define FAKEGATE_WEBHOOK_INT_H

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "cluster_webhooks.h"
#include "ledger.h"
#include "webhook.h"

enum event_type { EV_PAYMENT_STATUS_CHANGED = 0, EV_DEPOSIT_CALLBACK, EV_TYPES };
static const char *const EVENT_TYPE_NAMES[EV_TYPES] = {"PAYMENT_STATUS_CHANGED",
                                                       "DEPOSIT_CALLBACK"};

/* An event as the store announced it, waiting in the inbox to be filed. */
struct inbound {
    struct event *ev;              /* the inbox's reference (refs 1) */
    uint32_t seq;
    const struct webhook_faults *faults; /* the profile's, alive until exit */
    uint64_t seed;
};

/* One event, shared by its deliveries (refcounted under the webhooks lock). Its body is
 * rendered when an attempt or the journal first needs it (under the store lock, from the
 * payment and the view below), so an event that waits -- behind a receiver that never answers,
 * say -- holds ~150 bytes, not a 1.3 KB Payment: memory a run keeps is paid for in page faults,
 * and on a virtual machine one costs ~13 µs (a third of a confirm's CPU) to first touch. */
struct event {
    unsigned refs;
    bool unrenderable;          /* its ledger is gone or rendering ran out of memory */
    bool wanted;                /* on w->need */
    enum event_type type;
    struct tenant *tenant;
    uint64_t generation;
    const struct payment *payment; /* valid while `generation` is its tenant's */
    uint32_t view_cancels, view_deposits;
    enum pay_status view_status;
    int64_t at_us;
    char *payment_key, *order_id; /* in one allocation with the event */
    char *body;                 /* the JSON sent, malloc'd; NULL until rendered */
    size_t body_len;
    char tx_key[33];            /* the transaction the event is about, or "" */
};

struct attempt {
    int64_t at_us;              /* business time it started */
    uint32_t retried_count;
    int http_status;            /* 0: none received */
    double duration_ms;
    char *error;                /* owned, or NULL */
};

struct delivery {
    uint64_t id;
    struct event *ev;
    char *url;                  /* owned */
    bool success_2xx;
    char transmission_id[35];   /* whtrans_ + 26 */
    enum delivery_status status;
    uint64_t duplicate_of;      /* 0: an original */
    uint32_t version;           /* timer entries of another version are stale */
    int64_t due_mono_ns;        /* first attempt due (real clock); 0 once started */
    int64_t due_biz_us;         /* next retry due (gateway clock); 0 when none */
    int64_t sched_base_us;      /* business time the last scheduled attempt was due */
    uint32_t n_sched;           /* scheduled attempts made */
    bool in_flight, due_wanted;
    uint32_t resends_wanted;    /* resends asked for while an attempt was in flight */
    bool cur_resend;            /* the attempt in flight is a resend */
    enum delivery_status before_resend;
    bool orphan;                /* dropped by a reset while in flight */
    bool orphan_listed;         /* ...and on w->orphans (freed there), else freed when it ends */
    char *note;                 /* why it failed without a last attempt, or NULL */
    struct attempt *attempts;
    uint32_t n_attempts;
    size_t cap_attempts;
    struct delivery *pend_prev, *pend_next;
    struct transfer *xfer;      /* the attempt in flight (owned), or NULL */
};

struct timer {
    int64_t due;
    uint64_t id;
    uint32_t version;
};

struct heap {
    struct timer *t;
    size_t n, cap;
};

/* A receiver list and its success rule. */
struct receivers {
    struct tenant *tenant;       /* whose own list (NULL: the server's) */
    char *urls[WEBHOOK_MAX_RECEIVERS];
    size_t n;
    bool success_2xx;
    struct receivers *next;
};

struct webhooks {
    struct gateway *g;
    bool quiet;
    size_t max_pending;
    pthread_t thread;
    _Atomic bool stop;
    CURLM *multi;                /* driven by curl_multi_socket_action over `epfd` */
    int epfd;                    /* the transfers' sockets and `wakefd` */
    int wakefd;                  /* an eventfd: written to wake the thread */
    int64_t curl_due_ns;         /* libcurl's own timer (CURLMOPT_TIMERFUNCTION); 0: none */

    pthread_mutex_t inbox_lock;  /* leaf: taken under the store lock */
    struct inbound *inbox;
    size_t n_inbox, cap_inbox;
    struct inbound *spare;       /* the dispatcher's: the last batch's array, kept for reuse */
    size_t cap_spare;
    int64_t inbox_since_ns;      /* when the oldest event waiting arrived */
    int64_t inbox_poll_ns;       /* while polling: when the dispatcher looks at the inbox next */
    bool inbox_polling;          /* the dispatcher looks at the inbox by INBOX_WAIT_NS from now
                                    on its own: an event need not wake it (see drain_inbox) */
    struct buf scratch;          /* the dispatcher's: one body at a time, rendered */
    struct event **need_spare;   /* the dispatcher's: the last render_needed's array */
    size_t cap_need_spare;
    atomic_size_t n_receivers;   /* receivers anywhere (the server's, and tenants' own): read
                                    without a lock by the store's subscriber */

    pthread_mutex_t lock;        /* everything below */
    struct receivers server;     /* --webhook-url, PUT /__admin/webhooks */
    struct receivers *own;       /* tenants' own (PUT naming one), in a list */
    struct delivery **all;       /* the journal, id order */
    size_t n_all, cap_all;
    size_t trim_at;              /* trim's next scan once n_all passes this (0: the base) */
    uint64_t next_id, next_event;
    struct delivery *pend_head, *pend_tail;
    size_t n_pending;
    struct heap real, biz;       /* first attempts (mono ns), retries (business µs) */
    uint64_t *resends;           /* ids asked for by POST .../resend */
    size_t n_resends, cap_resends;
    struct event **need;         /* events whose bodies start_due wants (a reference each) */
    size_t n_need, cap_need;
    struct delivery **orphans;   /* dropped by a reset while in flight */
    size_t n_orphans, cap_orphans;
    size_t n_in_flight;
    uint64_t attempts_total[EV_TYPES][4]; /* [type][delivered, failed, dropped, duplicated] */
    uint64_t evicted_total;

    /* --store redis:// (cluster_webhooks.h): receivers and deliveries live in Redis; `all` and
     * the pending list then hold only the attempts this instance has claimed and is sending,
     * and the heaps and `resends` stay empty. NULL in memory. */
    struct cwh *cwh;
    int64_t claim_next_ns;       /* the dispatcher's: when it looks for due deliveries next */
    _Atomic bool claim_now;      /* look at once (the clock moved, a resend was asked for) */
};

enum { RES_DELIVERED = 0, RES_FAILED, RES_DROPPED, RES_DUPLICATED };
static const char *const RESULT_NAMES[] = {"delivered", "failed", "dropped", "duplicated"};

/* webhook.c */
bool wh_grow(void **arr, size_t *cap, size_t need, size_t elem);
bool wh_heap_push(struct heap *h, int64_t due, uint64_t id, uint32_t version);
void wh_heap_sift_down(struct heap *h, size_t i);
void wh_wake(struct webhooks *w);
void wh_ensure_bodies(struct webhooks *w, struct event **ev, size_t n, struct buf *scratch);

/* webhook_journal.c */
void wh_transmission_id(uint64_t salt, uint64_t n, char out[35]);
void wh_file_event_cluster(struct webhooks *w, struct event *e, const struct inbound *in);
struct delivery *wh_find(struct webhooks *w, uint64_t id);
/* Where delivery `id` is in w->all (kept in id order), or where it would go. Lock held. */
size_t wh_all_index(const struct webhooks *w, uint64_t id);
void wh_event_unref(struct event *e);
void wh_delivery_free(struct delivery *d);
void wh_pending_add(struct webhooks *w, struct delivery *d);
void wh_settle(struct webhooks *w, struct delivery *d, enum delivery_status st);
void wh_file_event(struct webhooks *w, struct event *e, const struct inbound *in);
void wh_receivers_clear(struct receivers *rx);
void wh_set_receivers_locked(struct webhooks *w, struct receivers *rx,
                             const char *const *urls, size_t n, bool success_2xx);

#endif
