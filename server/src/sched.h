/* sched.h -- a min-heap of deadlines and one timer thread (docs/profiles.md §4: latency is served
 * without holding a thread). At each deadline the thread calls the entry's `fire` callback outside
 * the heap's lock; the callback carries out the request's state change and resumes its connection.
 * sched_drain fires every pending entry at once with draining = true and refuses new entries, so a
 * stopping server never holds a suspended connection. */
#ifndef FAKEGATE_SCHED_H
#define FAKEGATE_SCHED_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Called on the timer thread (or the draining thread) when an entry is due. `draining` is
 * true when the server is stopping and the entry fires early. */
typedef void (*sched_fire_fn)(void *arg, bool draining);

struct sched_entry {
    int64_t deadline_ns;  /* monotonic */
    uint64_t seq;         /* ties broken in insertion order */
    sched_fire_fn fire;
    void *arg;
};

struct sched_heap {
    struct sched_entry *v;
    size_t len, cap;
    uint64_t next_seq;
};

/* The pure heap (unit-tested without threads). push returns 0 or -1 on out of memory;
 * pop/peek return false when empty. */
void sched_heap_init(struct sched_heap *h);
void sched_heap_fini(struct sched_heap *h);
int sched_heap_push(struct sched_heap *h, int64_t deadline_ns, sched_fire_fn fire, void *arg);
bool sched_heap_peek(const struct sched_heap *h, struct sched_entry *out);
bool sched_heap_pop(struct sched_heap *h, struct sched_entry *out);

struct sched {
    pthread_mutex_t lock;
    pthread_cond_t cond;   /* CLOCK_MONOTONIC */
    struct sched_heap heap;
    pthread_t thread;
    bool started;
    bool stopping;         /* set by sched_drain: no new entries */
    size_t pending;        /* entries pushed and not yet fired */
};

/* Initialise and start the timer thread. Returns 0, or -1 with a message in err. */
int sched_start(struct sched *s, char *err, size_t err_len);

/* Schedule fire(arg, false) at deadline_ns (monotonic; a past deadline fires at once).
 * Returns 0, or -1 if the scheduler is draining or memory ran out: the caller must then
 * finish the request itself. Thread: any. */
int sched_add(struct sched *s, int64_t deadline_ns, sched_fire_fn fire, void *arg);

/* Refuse new entries, fire every pending entry now with draining = true (on the caller's
 * thread, outside the lock), wait for a firing in progress on the timer thread to finish, and
 * join the thread. After it returns no callback runs, and sched_add returns -1. Thread: any
 * but the timer thread. */
void sched_drain(struct sched *s);

/* Free the scheduler's lock and heap, after sched_drain and once no thread can call sched_add
 * any more (the HTTP server has stopped: its workers call sched_add until then). */
void sched_fini(struct sched *s);

#endif
