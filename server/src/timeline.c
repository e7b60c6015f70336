/* timeline.c -- the per-second ring of request counts (see timeline.h). Invariant: a bucket's
 * counts belong to the second in its `sec`; `sec` is written (release) only after the counts
 * were zeroed, under `roll`, so a writer that reads the current second (acquire) counts into a
 * bucket already cleared for it. */
#include "timeline.h"

#include <stdlib.h>
#include <string.h>

#include "common.h"

static const char *const CLASS_NAMES[TL_CLASSES] = {"ok",  "replayed",  "conflict", "4xx",
                                                    "5xx", "throttled", "capped",   "dropped"};

const char *tl_class_name(enum tl_class c)
{
    return CLASS_NAMES[c];
}

enum tl_class tl_class_of(enum outcome o, int status)
{
    switch (o) {
    case OUT_REPLAYED:
        return TL_REPLAYED;
    case OUT_CONFLICT:
        return TL_CONFLICT;
    case OUT_THROTTLED:
        return TL_THROTTLED;
    case OUT_CAPPED:
        return TL_CAPPED;
    case OUT_DROPPED_REQUEST:
    case OUT_DROPPED_RESPONSE:
        return TL_DROPPED;
    default:
        return status >= 500 ? TL_5XX : status >= 400 ? TL_4XX : TL_OK;
    }
}

struct timeline *timeline_new(void)
{
    struct timeline *t = calloc(1, sizeof *t);
    if (t) {
        pthread_mutex_init(&t->roll, NULL);
        atomic_store(&t->since_unix_us, now_unix_us());
    }
    return t;
}

void timeline_free(struct timeline *t)
{
    if (!t)
        return;
    pthread_mutex_destroy(&t->roll);
    free(t);
}

static void zero(struct tl_bucket *b)
{
    for (int r = 0; r < ROUTE_LABELS; r++)
        for (int c = 0; c < TL_CLASSES; c++)
            atomic_store_explicit(&b->n[r][c], 0, memory_order_relaxed);
}

void timeline_count(struct timeline *t, int64_t arrived_mono_ns, int route, enum tl_class c)
{
    int64_t s = arrived_mono_ns / NS_PER_S;
    if (s <= 0 || route < 0 || route >= ROUTE_LABELS)
        return;
    struct tl_bucket *b = &t->b[s % TIMELINE_SECONDS];
    int64_t cur = atomic_load_explicit(&b->sec, memory_order_acquire);
    if (cur != s) {
        if (cur > s)
            return; /* the ring has moved past its second */
        pthread_mutex_lock(&t->roll);
        if (atomic_load_explicit(&b->sec, memory_order_relaxed) < s) {
            zero(b);
            atomic_store_explicit(&b->sec, s, memory_order_release);
        }
        cur = atomic_load_explicit(&b->sec, memory_order_relaxed);
        pthread_mutex_unlock(&t->roll);
        if (cur != s)
            return;
    }
    atomic_fetch_add_explicit(&b->n[route][c], 1, memory_order_relaxed);
}

void timeline_clear(struct timeline *t)
{
    pthread_mutex_lock(&t->roll);
    for (size_t i = 0; i < TIMELINE_SECONDS; i++) {
        atomic_store_explicit(&t->b[i].sec, 0, memory_order_release);
        zero(&t->b[i]);
    }
    atomic_store(&t->since_unix_us, now_unix_us());
    pthread_mutex_unlock(&t->roll);
}

void timeline_read(struct timeline *t, int64_t sec, uint32_t out[ROUTE_LABELS][TL_CLASSES])
{
    memset(out, 0, sizeof(uint32_t) * ROUTE_LABELS * TL_CLASSES);
    if (sec <= 0)
        return;
    struct tl_bucket *b = &t->b[sec % TIMELINE_SECONDS];
    if (atomic_load_explicit(&b->sec, memory_order_acquire) != sec)
        return;
    for (int r = 0; r < ROUTE_LABELS; r++)
        for (int c = 0; c < TL_CLASSES; c++)
            out[r][c] = atomic_load_explicit(&b->n[r][c], memory_order_relaxed);
    /* Recycled meanwhile: what was read may mix two seconds. */
    if (atomic_load_explicit(&b->sec, memory_order_acquire) != sec)
        memset(out, 0, sizeof(uint32_t) * ROUTE_LABELS * TL_CLASSES);
}
