/* statefile.h -- --state-file: an append-only log of every change to the ledger and the
 * idempotency records (docs/state-file.md). The store (store.c) appends a record for each
 * change it makes to a pending buffer; when the store-lock section ends (gateway_txn), the
 * section's records go to the file as one line with one write(2), before the section's answer
 * can leave, so a section is in the file whole or not at all. At start the file is replayed
 * through the same store calls (statefile_replay.c); a record still PROCESSING at the end of
 * the file is released, since its request never got an answer. Invariant: the pending buffer
 * is touched only under the store lock; the file only by statefile_commit (store lock) and
 * statefile_clock (its own lock). */
#ifndef FAKEGATE_STATEFILE_H
#define FAKEGATE_STATEFILE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "common.h"

struct gateway;
struct idem_record;
struct idem_response;
struct payment;
struct store;

/* --state-fsync: when a section's line is durable. */
enum statefile_sync {
    STATEFILE_SYNC_NEVER = 0, /* write(2) before the answer: survives fakegate's own crash
                                 (SIGKILL included), not the machine's (the default) */
    STATEFILE_SYNC_ALWAYS     /* write(2) then fdatasync(2) before the answer: survives a power
                                 loss, at a disk flush per change */
};

/* What statefile_replay found. */
struct statefile_stats {
    uint64_t lines;               /* complete lines applied */
    uint64_t records;             /* records in them */
    size_t torn_bytes;            /* an incomplete last line dropped (a crash mid-write), or 0 */
    size_t payments;              /* payments in every tenant's ledger afterwards */
    size_t idem_records;          /* idempotency records afterwards */
    size_t released;              /* records released because they were PROCESSING */
    int64_t clock_offset_us;      /* the gateway clock's offset restored */
};

struct cluster;

struct statefile {
    int fd;                       /* open O_APPEND once statefile_open returned; -1 with a
                                     cluster (the log is in Redis) */
    struct cluster *cluster;      /* --store redis://: the section's line goes to the shared
                                     log (cluster.h) instead of the file; borrowed */
    char *path;                   /* owned */
    enum statefile_sync sync;
    struct buf pending;           /* the section's records, comma-separated (store lock) */
    bool replaying;               /* statefile_replay is applying the file: append nothing */
    _Atomic bool failed;          /* a write failed: fakegate is stopping (SIGTERM raised) */
    pthread_mutex_t clock_lock;   /* statefile_clock's writes */
    uint64_t lines;               /* lines written since start (store lock) */
    struct statefile_stats start; /* what the replay at start found (GET /healthz) */
};

/* Open (creating, mode 0600) the state file at `path` for reading and appending, with the
 * fsync policy `sync`. Nothing is read yet: call statefile_replay, then
 * gateway_attach_state. Returns the handle (statefile_free), or NULL with a message in err
 * ("--state-file PATH: Permission denied"). Thread: main. */
struct statefile *statefile_open(const char *path, enum statefile_sync sync, char err[ERR_LEN]);
/* A state log with no file, for --store redis:// (cluster.h): the records of each section
 * gather in the pending buffer as for a file, and cluster_commit takes them
 * (statefile_take_line). `name` (copied) names the log in replay errors ("redis://H:P/0 log").
 * NULL on out of memory. Thread: main. */
struct statefile *statefile_new_shared(const char *name, struct cluster *c);
/* Close and free (NULL allowed). Thread: main, after the daemon stopped. */
void statefile_free(struct statefile *sf);

/* Apply every complete line of the file to g's tenants (created as the records name them),
 * then release the idempotency records left PROCESSING (appending their release, so the
 * file stays consistent), restore the gateway clock's offset and drop an incomplete last line
 * (truncating the file to its last complete line). Stores emit no events while it runs: no
 * webhook is sent again, no metric counts it. Returns 0 with *st filled, or -1 with a message
 * in err: "PATH:LINE:COLUMN: ..." for a line that is not JSON, "PATH:LINE: record K (kind):
 * ..." for a record that is malformed or contradicts the state before it. Nothing is appended
 * or truncated then. Thread: main, before the daemon starts and before any request. */
int statefile_replay(struct statefile *sf, struct gateway *g, struct statefile_stats *st,
                     char err[ERR_LEN]);

/* Apply one line of the log (`line`, n bytes, a JSON array of records; a trailing newline
 * allowed) to g's tenants, as statefile_replay applies each line of a file: stores emit no
 * events and append nothing meanwhile. `lineno` (from 1) names it in errors. Returns 0 with
 * *records (may be NULL) increased by the records applied, or -1 with a message in err
 * ("NAME:LINE: record K (kind): ..."); the records before the bad one stay applied. Store lock
 * held (or main before the daemon starts). */
int statefile_apply_line(struct statefile *sf, struct gateway *g, const char *line, size_t n,
                         uint64_t lineno, uint64_t *records, char err[ERR_LEN]);
/* Release every record left PROCESSING by a claim of instance `instance` (as its log records
 * name it) in g's tenants, appending the releases to the pending line: after a replica's
 * rebuild, its own claims are nobody's. Returns how many. Store lock held. */
size_t statefile_release_instance(struct statefile *sf, struct gateway *g, uint64_t instance);
/* Release the PROCESSING records of store s claimed (in the log) by another instance that
 * `dead(ctx, instance)` says is gone (1 gone, 0 alive, -1 unknown: kept), appending the
 * releases. Returns how many. Store lock held. */
size_t statefile_release_dead(struct statefile *sf, struct store *s,
                              int (*dead)(void *ctx, uint64_t instance), void *ctx);
/* The section's pending records as one line (a JSON array, no newline), NUL-terminated, in
 * *len bytes; NULL when the section changed nothing. Borrowed until statefile_clear_line,
 * which empties the pending buffer. Store lock held. */
const char *statefile_take_line(struct statefile *sf, size_t *len);
void statefile_clear_line(struct statefile *sf);

/* Write the section's pending records (if any) as one line and clear them; with
 * STATEFILE_SYNC_ALWAYS also fdatasync. On a write error it prints the error once, marks the
 * file failed and raises SIGTERM, so main stops the server and exits 1. Store lock held (the
 * end of every gateway_txn section). */
void statefile_commit(struct statefile *sf);

/* Move the gateway clock's offset (*offset_us, µs) forward by add_us and write the new offset
 * as a line of its own (POST /__admin/clock), the two under one lock so concurrent advances
 * reach the file in the order they were made. sf may be NULL (no state file): only the add.
 * Thread: any, without the store lock. */
void statefile_clock(struct statefile *sf, _Atomic int64_t *offset_us, int64_t add_us);
/* The same, inside a store-lock section (a reset sets the offset to 0). */
void statefile_clock_locked(struct statefile *sf, int64_t offset_us);

/* --- records, appended by store.c for each change it makes (store lock held) --- */

void statefile_rec_create(struct statefile *sf, struct store *s, const struct payment *p);
void statefile_rec_session(struct statefile *sf, struct store *s, const struct payment *p);
void statefile_rec_arrive(struct statefile *sf, struct store *s, const struct payment *p,
                          const char *idem_key);
void statefile_rec_approve(struct statefile *sf, struct store *s, const struct payment *p);
void statefile_rec_cancel(struct statefile *sf, struct store *s, const struct payment *p);
void statefile_rec_expire(struct statefile *sf, struct store *s, const struct payment *p,
                          int64_t at_us);
void statefile_rec_deposit(struct statefile *sf, struct store *s, const struct payment *p,
                           bool error, int64_t at_us);
void statefile_rec_reset(struct statefile *sf, struct store *s);
void statefile_rec_claim(struct statefile *sf, struct store *s,
                         const struct idem_record *rec, int64_t now_ns);
void statefile_rec_complete(struct statefile *sf, struct store *s,
                            const struct idem_record *rec);
void statefile_rec_release(struct statefile *sf, struct store *s, const char *scope,
                           size_t len);

#endif
