/* store.c -- the in-memory store (see store.h): ledger.c, idem.c and the attempt counters of
 * live.c, with every status change of a payment sent to the event sink. Invariant: a payment
 * changes status only here, so each change is announced exactly once. */
#define _DEFAULT_SOURCE
#include "store.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "statefile.h"

static void emit(struct store *s, struct payment *p, struct request *cause, int64_t at_us)
{
    struct payment_event ev = {.store = s, .status = p->status, .payment = p, .cause = cause, .at_us = at_us,
                               .seq = p->status == PAY_IN_PROGRESS ? 0 : p->n_events++};
    if (s->emit && !(s->log && s->log->replaying))
        s->emit(s->emit_ctx, &ev);
}

void store_init(struct store *s, uint64_t salt, int64_t idem_ttl_ns, store_event_fn fn,
                void *emit_ctx)
{
    ledger_init(&s->ledger, salt);
    idem_init(&s->idem, idem_ttl_ns);
    attempts_init(&s->attempts, idem_ttl_ns / 1000); /* idle counters go with the same TTL */
    s->emit = fn;
    s->emit_ctx = emit_ctx;
}

void store_set_limits(struct store *s, size_t max_idem_records, size_t max_payments)
{
    s->idem.max_records = max_idem_records;
    s->ledger.max_payments = max_payments;
}

void store_fini(struct store *s)
{
    attempts_fini(&s->attempts);
    idem_fini(&s->idem);
    ledger_fini(&s->ledger);
}

void store_reset(struct store *s)
{
    statefile_rec_reset(s->log, s);
    ledger_reset(&s->ledger);
    idem_reset(&s->idem);
}

int store_attempts_reset(struct store *s, bool shared)
{
    int rc = 0;
    if (shared && s->log && s->log->cluster)
        rc = cluster_attempts_reset(s->log->cluster,
                                    s->tenant_key ? __atomic_load_n(s->tenant_key, __ATOMIC_ACQUIRE) : NULL,
                                    false);
    attempts_reset(&s->attempts);
    return rc;
}

void store_rewind(struct store *s)
{
    store_reset(s);
    s->ledger.next_id = 1;
    s->ledger.next_seq = 1;
    s->log_salted = false;
}

struct payment *store_payment(struct store *s, const char *payment_key)
{
    return ledger_get(&s->ledger, payment_key);
}

struct payment *store_payment_by_order(struct store *s, const char *order_id)
{
    return ledger_get_by_order(&s->ledger, order_id);
}

bool store_payment_room(const struct store *s)
{
    return !s->ledger.max_payments || s->ledger.n_all < s->ledger.max_payments;
}

size_t store_payments_max(const struct store *s)
{
    return s->ledger.max_payments;
}

size_t store_payment_count(const struct store *s)
{
    return s->ledger.n_all;
}

struct payment *store_payment_at(struct store *s, size_t i)
{
    return s->ledger.all[i];
}

struct payment *store_create(struct store *s, const char *payment_key, const char *order_id,
                             int64_t amount, int64_t now_us, struct request *cause,
                             enum ledger_create_result *why)
{
    struct payment *p = ledger_create(&s->ledger, payment_key, order_id, amount, now_us, why);
    if (p) {
        statefile_rec_create(s->log, s, p);
        emit(s, p, cause, now_us);
    }
    return p;
}

int store_approve(struct store *s, struct payment *p, int64_t now_us, struct request *cause)
{
    assert(p->status == PAY_IN_PROGRESS && p->charges == 0); /* charges <= 1 */
    if (ledger_approve(&s->ledger, p, now_us) != 0)
        return -1;
    statefile_rec_approve(s->log, s, p);
    emit(s, p, cause, now_us);
    return 0;
}

int store_cancel(struct store *s, struct payment *p, int64_t amount, const char *reason,
                 int64_t now_us, struct request *cause)
{
    assert(amount >= 1 && amount <= p->balance);
    if (ledger_cancel(&s->ledger, p, amount, reason, now_us) != 0)
        return -1;
    statefile_rec_cancel(s->log, s, p);
    emit(s, p, cause, now_us);
    return 0;
}

bool store_expire(struct store *s, struct payment *p, int64_t now_us, int64_t ttl_us)
{
    bool was = p->status == PAY_EXPIRED;
    bool is = ledger_expire_if_stale(p, now_us, ttl_us);
    if (is && !was) {
        statefile_rec_expire(s->log, s, p, now_us);
        emit(s, p, NULL, now_us);
    }
    return is;
}

struct payment *store_create_va(struct store *s, const char *payment_key, const char *order_id,
                                int64_t amount, const char *order_name, struct payment_va *va,
                                int64_t now_us, struct request *cause,
                                enum ledger_create_result *why)
{
    struct payment *p = ledger_create_va(&s->ledger, payment_key, order_id, amount, order_name,
                                         va, now_us, why);
    if (p) {
        statefile_rec_create(s->log, s, p);
        emit(s, p, cause, now_us);
    }
    return p;
}

int store_deposit(struct store *s, struct payment *p, bool error, int64_t now_us,
                  struct request *cause)
{
    assert(p->va && p->status == (error ? PAY_DONE : PAY_WAITING_FOR_DEPOSIT));
    if (ledger_deposit(&s->ledger, p, error, now_us) != 0)
        return -1;
    statefile_rec_deposit(s->log, s, p, error, now_us);
    emit(s, p, cause, now_us);
    return 0;
}

bool store_expire_va(struct store *s, struct payment *p, int64_t now_us)
{
    bool was = p->status == PAY_EXPIRED;
    bool is = ledger_expire_va(p, now_us);
    if (is && !was) {
        statefile_rec_expire(s->log, s, p, now_us);
        emit(s, p, NULL, now_us);
    }
    return is;
}

struct payment *store_next_due(struct store *s, int64_t now_us)
{
    return ledger_next_due(&s->ledger, now_us);
}

int store_note_confirm(struct store *s, struct payment *p, const char *idem_key)
{
    p->confirm_attempts++;
    statefile_rec_arrive(s->log, s, p, idem_key);
    return idem_key ? ledger_note_idem_key(p, idem_key) : 0;
}

int store_register_session(struct store *s, struct payment *p, const char *order_name)
{
    p->registered = true;
    if (order_name && !(p->order_name = strdup(order_name)))
        return -1;
    statefile_rec_session(s->log, s, p);
    return 0;
}

size_t store_tx_count(const struct store *s)
{
    return s->ledger.n_txs;
}

const struct ledger_tx *store_tx_at(const struct store *s, size_t i)
{
    return &s->ledger.txs[i];
}

long store_tx_find(const struct store *s, const char *tx_key)
{
    return ledger_find_tx(&s->ledger, tx_key);
}

const struct ledger *store_ledger(const struct store *s)
{
    return &s->ledger;
}

struct idem_record *store_idem_lookup(struct store *s, const char *scope, size_t len,
                                      int64_t now_ns)
{
    return idem_lookup(&s->idem, scope, len, now_ns);
}

struct idem_record *store_idem_get(struct store *s, const char *scope, size_t len)
{
    return idem_get(&s->idem, scope, len);
}

struct idem_record *store_idem_claim(struct store *s, const char *scope, size_t len,
                                     const void *owner, uint64_t body_hash, int64_t now_ns)
{
    struct idem_record *rec = idem_claim(&s->idem, scope, len, owner, body_hash, now_ns);
    if (rec)
        statefile_rec_claim(s->log, s, rec, now_ns);
    return rec;
}

int store_idem_complete(struct store *s, struct idem_record *rec, const void *owner,
                        struct idem_response *resp)
{
    int rc = idem_complete(rec, owner, resp);
    assert(rc == 0); /* a record is completed only by its owner */
    if (rc == 0)
        statefile_rec_complete(s->log, s, rec);
    return rc;
}

int store_idem_release(struct store *s, struct idem_record *rec, const void *owner)
{
    if (s->log && !s->log->replaying)
        statefile_rec_release(s->log, s, rec->scope, rec->scope_len); /* before rec is freed */
    int rc = idem_release(&s->idem, rec, owner);
    assert(rc == 0); /* and released only by its owner */
    return rc;
}

size_t store_idem_sweep(struct store *s, int64_t now_ns, size_t budget, bool *more)
{
    return idem_sweep(&s->idem, now_ns, budget, more);
}

bool store_idem_room(struct store *s, int64_t now_ns)
{
    return idem_room(&s->idem, now_ns);
}

size_t store_idem_max(const struct store *s)
{
    return s->idem.max_records;
}

size_t store_idem_count(const struct store *s)
{
    return idem_count(&s->idem);
}

uint32_t store_attempts_next(struct store *s, enum route_id route, const char *identity,
                             int64_t now_us)
{
    uint32_t n;
    /* Shared: a fault with attempts [1] fires once per identity across the cluster. A store
     * that is down counts locally; the request's section fails with 503 anyway. */
    if (s->log && s->log->cluster &&
        cluster_attempts_next(s->log->cluster,
                              s->tenant_key ? __atomic_load_n(s->tenant_key, __ATOMIC_ACQUIRE) : NULL,
                              (int)route, identity, &n) == 0)
        return n;
    return attempts_next(&s->attempts, route, identity, now_us);
}

size_t store_attempts_sweep(struct store *s, int64_t now_us, size_t budget, bool *more)
{
    return attempts_sweep(&s->attempts, now_us, budget, more);
}

size_t store_attempts_count(struct store *s)
{
    return attempts_count(&s->attempts);
}
