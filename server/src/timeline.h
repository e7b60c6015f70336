/* timeline.h -- gateway requests over time, for the live page (GET /__admin/timeline,
 * docs/admin.md §5): a ring of TIMELINE_SECONDS one-second buckets, each counting requests by
 * route and outcome class, bucketed by the second they arrived in and counted when their
 * outcome is known (with the metrics). Counting is one relaxed atomic increment; a bucket is
 * recycled under a mutex taken once a second, so no count is lost to the recycling. The
 * server has one; a tenant gets one when the page first asks for its scope. Thread-safe. */
#ifndef FAKEGATE_TIMELINE_H
#define FAKEGATE_TIMELINE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "buf.h"
#include "journal.h"
#include "profile.h"

#define TIMELINE_SECONDS 600 /* ten minutes of history */

/* The colours of the page's arrivals chart. */
enum tl_class {
    TL_OK = 0,     /* 2xx, first execution */
    TL_REPLAYED,   /* a stored answer replayed under its Idempotency-Key */
    TL_CONFLICT,   /* 409: the same key while the first is in progress, or another body */
    TL_4XX,        /* any other 4xx: invalid, unauthorized, a business error */
    TL_5XX,        /* an injected or internal 5xx (not a throttle or cap) */
    TL_THROTTLED,  /* refused by a throttle (token bucket or window) */
    TL_CAPPED,     /* refused by a concurrency cap */
    TL_DROPPED,    /* a lost request or lost response */
    TL_CLASSES
};

/* "ok", "replayed", "conflict", "4xx", "5xx", "throttled", "capped", "dropped". */
const char *tl_class_name(enum tl_class c);

/* The class of an answer with this outcome and HTTP status (0: none was sent). */
enum tl_class tl_class_of(enum outcome o, int status);

struct tl_bucket {
    _Atomic int64_t sec;         /* the monotonic second it counts; 0: never used */
    _Atomic uint32_t n[ROUTE_LABELS][TL_CLASSES];
};

struct timeline {
    pthread_mutex_t roll;        /* recycling a bucket for a new second */
    _Atomic int64_t since_unix_us; /* counting since: its creation or last clear */
    struct tl_bucket b[TIMELINE_SECONDS];
};

/* A new, empty timeline (about 120 KB), or NULL on out of memory. */
struct timeline *timeline_new(void);
void timeline_free(struct timeline *t);

/* Count one request of `route` (enum route_id or ROUTE_OTHER) that arrived at arrived_mono_ns
 * (CLOCK_MONOTONIC) with class c. A request older than the ring is not counted. Thread: any. */
void timeline_count(struct timeline *t, int64_t arrived_mono_ns, int route, enum tl_class c);

/* Forget everything counted (POST /__admin/reset). Thread: any. */
void timeline_clear(struct timeline *t);

/* The counts of monotonic second `sec` into out (zeros when the ring holds none for it).
 * Thread: any. */
void timeline_read(struct timeline *t, int64_t sec, uint32_t out[ROUTE_LABELS][TL_CLASSES]);

#endif
