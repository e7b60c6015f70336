/* sched.c -- deadline heap + timer thread (see sched.h). Invariants: heap order on
 * (deadline, seq); `pending` counts entries pushed and not yet fired, including the one being
 * fired, so sched_drain can wait until no callback is running. */
#define _POSIX_C_SOURCE 200809L
#include "sched.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"

static bool before(const struct sched_entry *a, const struct sched_entry *b)
{
    return a->deadline_ns < b->deadline_ns ||
           (a->deadline_ns == b->deadline_ns && a->seq < b->seq);
}

void sched_heap_init(struct sched_heap *h)
{
    memset(h, 0, sizeof *h);
}

void sched_heap_fini(struct sched_heap *h)
{
    free(h->v);
    sched_heap_init(h);
}

int sched_heap_push(struct sched_heap *h, int64_t deadline_ns, sched_fire_fn fire, void *arg)
{
    if (h->len == h->cap) {
        size_t ncap = h->cap ? h->cap * 2 : 256;
        struct sched_entry *nv = realloc(h->v, ncap * sizeof *nv);
        if (!nv)
            return -1;
        h->v = nv;
        h->cap = ncap;
    }
    struct sched_entry e = {deadline_ns, h->next_seq++, fire, arg};
    size_t i = h->len++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!before(&e, &h->v[parent]))
            break;
        h->v[i] = h->v[parent];
        i = parent;
    }
    h->v[i] = e;
    return 0;
}

bool sched_heap_peek(const struct sched_heap *h, struct sched_entry *out)
{
    if (h->len == 0)
        return false;
    *out = h->v[0];
    return true;
}

bool sched_heap_pop(struct sched_heap *h, struct sched_entry *out)
{
    if (h->len == 0)
        return false;
    *out = h->v[0];
    struct sched_entry last = h->v[--h->len];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->len)
            break;
        if (c + 1 < h->len && before(&h->v[c + 1], &h->v[c]))
            c++;
        if (!before(&h->v[c], &last))
            break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->len > 0)
        h->v[i] = last;
    return true;
}

static void *timer_main(void *arg)
{
    struct sched *s = arg;
    pthread_mutex_lock(&s->lock);
    while (!s->stopping) {
        struct sched_entry e;
        if (!sched_heap_peek(&s->heap, &e)) {
            pthread_cond_wait(&s->cond, &s->lock);
            continue;
        }
        int64_t now = now_mono_ns();
        if (e.deadline_ns > now) {
            struct timespec ts = {(time_t)(e.deadline_ns / NS_PER_S),
                                  (long)(e.deadline_ns % NS_PER_S)};
            pthread_cond_timedwait(&s->cond, &s->lock, &ts);
            continue;
        }
        sched_heap_pop(&s->heap, &e);
        pthread_mutex_unlock(&s->lock);
        e.fire(e.arg, false);
        pthread_mutex_lock(&s->lock);
        s->pending--;
        pthread_cond_broadcast(&s->cond);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

int sched_start(struct sched *s, char *err, size_t err_len)
{
    memset(s, 0, sizeof *s);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, &ca);
    pthread_condattr_destroy(&ca);
    sched_heap_init(&s->heap);
    int rc = pthread_create(&s->thread, NULL, timer_main, s);
    if (rc != 0) {
        snprintf(err, err_len, "cannot start the timer thread: %s", strerror(rc));
        return -1;
    }
    s->started = true;
    return 0;
}

int sched_add(struct sched *s, int64_t deadline_ns, sched_fire_fn fire, void *arg)
{
    pthread_mutex_lock(&s->lock);
    int rc = -1;
    if (!s->stopping && sched_heap_push(&s->heap, deadline_ns, fire, arg) == 0) {
        s->pending++;
        if (s->heap.v[0].seq == s->heap.next_seq - 1)
            pthread_cond_broadcast(&s->cond); /* a new earliest deadline: re-arm the wait */
        rc = 0;
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

void sched_drain(struct sched *s)
{
    if (!s->started)
        return;
    pthread_mutex_lock(&s->lock);
    s->stopping = true;
    pthread_cond_broadcast(&s->cond);
    struct sched_entry e;
    while (sched_heap_pop(&s->heap, &e)) {
        pthread_mutex_unlock(&s->lock);
        e.fire(e.arg, true);
        pthread_mutex_lock(&s->lock);
        s->pending--;
    }
    /* A callback may still be running on the timer thread: wait for it. */
    while (s->pending > 0)
        pthread_cond_wait(&s->cond, &s->lock);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->thread, NULL);
    s->started = false;
    /* The lock and the heap stay: workers may still call sched_add (and get -1) until the
     * HTTP server has stopped; sched_fini frees them after that. */
}

void sched_fini(struct sched *s)
{
    sched_heap_fini(&s->heap);
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->lock);
}
