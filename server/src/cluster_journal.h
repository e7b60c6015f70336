/* cluster_journal.h -- with --store redis://, the journal and the report shared by every
 * instance (docs/cluster.md §11.8): each finished gateway request's entry, naming its instance,
 * is appended to one capped Redis stream (fakegate:journal) by a writer thread of this
 * instance, in pipelined batches, off the request's path; GET /__admin/requests and GET
 * /__admin/report read the stream, so every instance lists the same requests and computes the
 * same report from them (a deterministic replay, report.c). Invariants: the stream's entries
 * are in the order of their cluster-wide ids (one script assigns the ids and appends a batch);
 * a request never waits for Redis here: a failure counts an error and the entry is lost, which
 * the report then says (`complete: false`). */
#ifndef FAKEGATE_CLUSTER_JOURNAL_H
#define FAKEGATE_CLUSTER_JOURNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "cluster.h"
#include "common.h"
#include "journal.h"

/* --cluster-journal-max: the stream's bound (entries; MAXLEN ~, so Redis may keep a little
 * more) by default, and the largest accepted (docs/cli.md §1). */
#define CLUSTER_JOURNAL_MAX_DEFAULT 200000
#define CLUSTER_JOURNAL_MAX_MAX 10000000
/* Entries waiting for the writer beyond this are dropped (counted as lost): a Redis that does
 * not keep up never grows this instance's memory without bound. */
#define CLUSTER_JOURNAL_QUEUE_MAX 100000
/* Entries the writer appends per round trip, at most. */
#define CLUSTER_JOURNAL_BATCH 256

struct cluster_journal;

/* Counters for /healthz and /metrics (cluster_journal_stats). */
struct cluster_journal_stats {
    uint64_t written;              /* entries appended to the stream by this instance */
    uint64_t lost;                 /* entries this instance could not append (Redis failed, or
                                      its queue was full) */
    uint64_t errors;               /* Redis commands of the journal that failed */
    size_t pending;                /* gateway requests of this instance that began and are not
                                      yet appended (in progress, or queued): 0 once every one
                                      that arrived so far is in the stream or lost */
};

/* Start the writer thread for Redis at *u (copied), naming this process `instance_id`, the
 * stream capped at `max_len` entries (1 ... CLUSTER_JOURNAL_MAX_MAX). Connects on first use;
 * an unreachable Redis is not an error here. Returns the handle, or NULL with a message in
 * err (out of memory, no thread). Thread: main, before the daemon starts. */
struct cluster_journal *cluster_journal_start(const struct cluster_url *u, uint64_t instance_id,
                                              size_t max_len, char err[ERR_LEN]);
/* Append what is still queued (one try per batch; once one fails, the rest is counted lost
 * rather than tried), stop the writer and free cj (NULL allowed). Thread: main, after the daemon stopped (no more cluster_journal_add). */
void cluster_journal_stop(struct cluster_journal *cj);

/* Queue entry e (borrowed for the call: its strings are copied; `e->tenant` is the tenant's
 * secret key or NULL; times are this process's monotonic clock, as observe.c keeps them) for
 * the stream. Never waits for Redis: one allocation and the queue's mutex. Thread: any
 * (completion callback). */
void cluster_journal_add(struct cluster_journal *cj, const struct journal_entry *e);

/* A gateway request began (observe_arrival): counted in `pending` until its entry is appended
 * (or lost, or skipped). One relaxed atomic increment. Thread: any. */
void cluster_journal_arrived(struct cluster_journal *cj);
/* A request that began will not be appended (a reset overtook it). Thread: any. */
void cluster_journal_skip(struct cluster_journal *cj);

/* POST /__admin/reset: forget the stream's entries (every tenant's, tenant_key NULL), or from
 * now on hide those of tenant `tenant_key` that arrived before `since_unix_us` (wall clock,
 * µs). Entries of requests that arrived before it and are appended later are hidden too.
 * Returns 0, or -1 when Redis failed (message in err). Thread: any. */
int cluster_journal_reset(struct cluster_journal *cj, const char *tenant_key,
                          int64_t since_unix_us, char err[ERR_LEN]);

/* Wait until every gateway request of this instance that began before the call is appended
 * (or lost, or skipped), up to `timeout_ms`: a reader on this instance then sees its own
 * requests, even one whose answer reached the client a moment before its completion ran.
 * Returns true when they were (false: one is still held, or Redis is slow). Thread: any but
 * the writer. */
bool cluster_journal_flush(struct cluster_journal *cj, int64_t timeout_ms);

/* GET /__admin/requests over the stream: {"requests":[...],"total":N} as journal_render
 * writes it, each entry with its "instance", oldest arrival first; ids are the cluster's, in
 * the order entries reached the stream. f as journal_filter_set
 * built it; f->tenant is a tenant's secret key compared as a string (NULL: every tenant);
 * `limit` 0 gives the newest `default_limit` matches. Returns 0, or -1 when Redis failed
 * (message in err). Thread: any. */
int cluster_journal_requests(struct cluster_journal *cj, const struct journal_filter *f,
                             size_t default_limit, struct buf *b, char err[ERR_LEN]);

/* GET /__admin/report over the stream: the report of every entry since the last reset (of
 * tenant `tenant_key` only, or every tenant's merged when NULL), replayed in stream order
 * through report.c's steps, one report per tenant, then rendered as report_render_merged
 * does; `complete` is false when the stream was trimmed or an instance lost entries.
 * The same stream gives the same bytes on every instance. Returns 0, or -1 when Redis failed
 * (message in err). Thread: any. */
int cluster_journal_report(struct cluster_journal *cj, const char *tenant_key, struct buf *b,
                           char err[ERR_LEN]);

/* This instance's counters now. Thread: any. */
void cluster_journal_stats(struct cluster_journal *cj, struct cluster_journal_stats *st);

#endif
