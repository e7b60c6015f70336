/* store.h -- the gateway's state behind one interface: payments and their transactions (the
 * ledger), idempotency records and attempt counters. Handlers reach the state only through
 * these calls, so a shared store (several instances, one database) can replace today's
 * in-memory one without touching them. Every change of a payment's status leaves the store as
 * a `struct payment_event` through the sink given to store_init: the journal, metrics and
 * webhook deliveries subscribe there instead of each commit path calling them.
 * Locking: every call but the store_attempts_* calls and store_init/fini needs the gateway's
 * store lock, held through gateway_txn (gateway.h); the attempt counters have locks of their
 * own. */
#ifndef FAKEGATE_STORE_H
#define FAKEGATE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "idem.h"
#include "ledger.h"
#include "live.h"

struct request;

/* One status change of a payment, as the store made it. `payment` is borrowed for the call
 * only (the store lock is held): a subscriber that keeps anything copies it. `cause` is the
 * request whose plan made the change (NULL for an expiry seen by a read of another request,
 * or an admin call). */
struct payment_event {
    struct store *store;             /* the store that made it (its owner: the tenant) */
    enum pay_status status;          /* the status it changed to */
    const struct payment *payment;
    struct request *cause;
    int64_t at_us;                   /* business time of the change (the gateway clock) */
    uint32_t seq;                    /* its number among the payment's events, from 0; the
                                        creation (IN_PROGRESS) is not counted */
};

/* Receives every payment_event, under the store lock, on the thread that made the change: it
 * must not block or take the store lock. */
typedef void (*store_event_fn)(void *ctx, const struct payment_event *ev);

struct statefile;

struct store {
    struct ledger ledger;
    struct idem_store idem;
    struct attempts attempts;
    store_event_fn emit;
    void *emit_ctx;
    void *owner;                 /* whose state this is (the gateway's tenant); not used here */
    struct statefile *log;       /* --state-file: every change is appended to it (statefile.h),
                                    or NULL; while it replays, the store emits no events */
    char *const *tenant_key;     /* where the owner's secret key is (read atomically; NULL
                                    until one is adopted), named in the state file's records */
    bool log_salted;             /* the state file has this store's salt record */
};

/* Initialise an empty in-memory store: `salt` makes derived keys (transaction keys, secrets)
 * unique per process, `idem_ttl_ns` is how long an idempotency record lives (ns) and how long
 * an attempt counter may stay idle, events go to emit(emit_ctx, ...). Thread: main. */
void store_init(struct store *s, uint64_t salt, int64_t idem_ttl_ns, store_event_fn emit,
                void *emit_ctx);
void store_fini(struct store *s);
/* The store's bounds (docs/cli.md §1): at most `max_idem_records` idempotency records
 * (--max-idempotency-records) and `max_payments` payments (--max-payments); 0 = no bound.
 * Thread: main, before the store is used. */
void store_set_limits(struct store *s, size_t max_idem_records, size_t max_payments);
/* Empty the payments and the idempotency records (POST /__admin/reset); the id and commit
 * sequences carry on, so no derived key repeats. Store lock held. */
void store_reset(struct store *s);
/* Empty the attempt counters (POST /__admin/reset); with `shared`, the --store redis://
 * cluster's of this tenant too (cluster_attempts_reset). 0, or -1 when the shared ones could
 * not be deleted (the store is down). Its own locks: no store lock needed. */
int store_attempts_reset(struct store *s, bool shared);
/* store_reset, then the id and commit sequences start again from 1 and the salt record is to
 * be read again: the store as a replay finds it at start, for a replica that applies the whole
 * log again (cluster.h). Call it with the log replaying (no record appended). Store lock held. */
void store_rewind(struct store *s);

/* --- payments (docs/api.md §2) --- */

/* Payment by paymentKey / by orderId, or NULL. Borrowed: valid while the store lock is held
 * and no reset has run. */
struct payment *store_payment(struct store *s, const char *payment_key);
struct payment *store_payment_by_order(struct store *s, const char *order_id);
/* May a payment be created now (fewer than --max-payments stored)? A creation without room
 * fails with LEDGER_FULL. */
bool store_payment_room(const struct store *s);
/* The bound store_payment_room applies (0: none). */
size_t store_payments_max(const struct store *s);
/* Every payment in creation order: the i-th for i < store_payment_count. Borrowed. */
size_t store_payment_count(const struct store *s);
struct payment *store_payment_at(struct store *s, size_t i);
/* Create a payment IN_PROGRESS at now_us (µs since the epoch): see ledger_create for `why`.
 * Emits IN_PROGRESS on success. */
struct payment *store_create(struct store *s, const char *payment_key, const char *order_id,
                             int64_t amount, int64_t now_us, struct request *cause,
                             enum ledger_create_result *why);
/* Approve p (IN_PROGRESS, its confirm's claim held) at now_us. Emits DONE. 0, or -1 on out of
 * memory (nothing changed). */
int store_approve(struct store *s, struct payment *p, int64_t now_us, struct request *cause);
/* Cancel `amount` KRW of p at now_us (the caller checked docs/edge-rules.md §7's rules).
 * Emits CANCELED or PARTIAL_CANCELED. 0, or -1 on out of memory (nothing changed). */
int store_cancel(struct store *s, struct payment *p, int64_t amount, const char *reason,
                 int64_t now_us, struct request *cause);
/* Expire p if its session is older than ttl_us at now_us (docs/api.md §2.1); emits EXPIRED
 * the first time. True if p is EXPIRED now. */
bool store_expire(struct store *s, struct payment *p, int64_t now_us, int64_t ttl_us);
/* Create a virtual account WAITING_FOR_DEPOSIT (see ledger_create_va: `va` is taken on
 * success). Emits WAITING_FOR_DEPOSIT. */
struct payment *store_create_va(struct store *s, const char *payment_key, const char *order_id,
                                int64_t amount, const char *order_name, struct payment_va *va,
                                int64_t now_us, struct request *cause,
                                enum ledger_create_result *why);
/* A deposit (DONE) or a deposit error (WAITING_FOR_DEPOSIT) of virtual account p, the caller
 * having checked its status (docs/virtual-accounts.md §6.6). Emits the new status. 0, or -1 on
 * out of memory (nothing changed). */
int store_deposit(struct store *s, struct payment *p, bool error, int64_t now_us,
                  struct request *cause);
/* Expire virtual account p if its due date is over at now_us; emits EXPIRED the first time.
 * True if p is EXPIRED now. */
bool store_expire_va(struct store *s, struct payment *p, int64_t now_us);

/* ledger_next_due on the store's ledger: the next virtual account due for expiry at now_us
 * (business time, µs; still WAITING_FOR_DEPOSIT; borrowed), or NULL. Store lock held. */
struct payment *store_next_due(struct store *s, int64_t now_us);
/* A confirm of p arrived: count it (confirm_attempts) and remember its Idempotency-Key
 * `idem_key` (NULL: none) among p's first LEDGER_MAX_IDEM_KEYS, or count it as unlisted
 * (ledger_note_idem_key; GET /__admin/payments). 0, or -1 on out of memory (the count made,
 * the key not kept). */
int store_note_confirm(struct store *s, struct payment *p, const char *idem_key);
/* Mark p, just created, as a registered session (POST /__admin/sessions) with `order_name`
 * (copied; NULL: none). 0, or -1 on out of memory (p registered, without its name). */
int store_register_session(struct store *s, struct payment *p, const char *order_name);

/* --- transactions (docs/api.md §2.2) --- */

/* Rows in commit order: the i-th for i < store_tx_count. Borrowed. */
size_t store_tx_count(const struct store *s);
const struct ledger_tx *store_tx_at(const struct store *s, size_t i);
/* The index of the row whose transactionKey is `tx_key`, or -1 if none. */
long store_tx_find(const struct store *s, const char *tx_key);
/* What the renderers (render.h) read for derived keys. Borrowed. */
const struct ledger *store_ledger(const struct store *s);

/* --- idempotency records (docs/idempotency.md §3) --- */

/* The live record of `scope` at now_ns (the gateway clock, ns since the epoch), or NULL (an expired one is dropped). */
struct idem_record *store_idem_lookup(struct store *s, const char *scope, size_t len,
                                      int64_t now_ns);
/* idem_get: the record of `scope` in any state, expired or not, or NULL. */
struct idem_record *store_idem_get(struct store *s, const char *scope, size_t len);
/* A PROCESSING record owned by `owner`; none may exist. NULL on out of memory. */
struct idem_record *store_idem_claim(struct store *s, const char *scope, size_t len,
                                     const void *owner, uint64_t body_hash, int64_t now_ns);
/* Complete (DONE with *resp, whose body the record takes) or release (delete) rec: only its
 * owner may. 0, or -1 if `owner` does not hold it. */
int store_idem_complete(struct store *s, struct idem_record *rec, const void *owner,
                        struct idem_response *resp);
int store_idem_release(struct store *s, struct idem_record *rec, const void *owner);
/* idem_sweep on the store's records: delete those expired at now_ns (the gateway clock), oldest
 * first, looking at `budget` at most; *more set when the budget ran out first. Returns how many
 * went. */
size_t store_idem_sweep(struct store *s, int64_t now_ns, size_t budget, bool *more);
/* May a request claim a new idempotency record now (below --max-idempotency-records, after
 * freeing a few expired ones at the bound)? A claim without room fails: ask this first. */
bool store_idem_room(struct store *s, int64_t now_ns);
/* The bound store_idem_room applies (0: none). */
size_t store_idem_max(const struct store *s);
/* How many idempotency records the store holds (expired ones not yet swept included). */
size_t store_idem_count(const struct store *s);

/* --- attempt counters (docs/profiles.md §4 "attempts") --- */

/* One more request of `identity` on `route` at now_us (the gateway clock, µs since the epoch):
 * its attempt number -- 1 for the first since the last reset, or when the identity's previous
 * request on the route came --idempotency-ttl or more before (attempts_next). With --store
 * redis:// the count is the cluster's (cluster_attempts_next). Thread: any, without the store
 * lock. */
uint32_t store_attempts_next(struct store *s, enum route_id route, const char *identity,
                             int64_t now_us);
/* attempts_sweep on the store's counters: free those idle for --idempotency-ttl at now_us (the
 * gateway clock, µs), at most `budget` per shard; *more set when some shard had more. Returns
 * how many went. Thread: any, without the store lock (the counters' own locks). */
size_t store_attempts_sweep(struct store *s, int64_t now_us, size_t budget, bool *more);
/* How many attempt counters the store holds (idle ones not yet swept included). Thread: any,
 * without the store lock. */
size_t store_attempts_count(struct store *s);

#endif
