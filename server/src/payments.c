/* payments.c -- the Toss API's payment rules (see payments.h): confirm, cancel, reads and
 * transactions (registered sessions are in sessions.c). The order of decisions for a confirm is
 * docs/profiles.md §4's: body received → validation → queue_latency → the fault decision →
 * idempotency (409 / replay / claim) and the ledger's business checks → latency → commit.
 * Every store access is one gateway_txn section, so a request a reset has overtaken touches
 * nothing. Invariant, under the store lock: a payment has `processing` set by at most one
 * request of this process (the claim holder) -- on a shared store, of the cluster, through its
 * mark in Redis -- and a commit approves only a payment still IN_PROGRESS and uncharged (on a
 * shared store another instance may have approved it meanwhile), so charges <= 1. */
#define _DEFAULT_SOURCE
#include "payments.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "admin.h"
#include "answer.h"
#include "body.h"
#include "cluster_limits.h"
#include "common.h"
#include "observe.h"
#include "payments_int.h"
#include "render.h"
#include "rng.h"
#include "toss_errors.h"

/* A reset ran since r was admitted: r belongs to the ledger it emptied. Answer it as a gateway
 * that restarted under it would (500), and touch nothing. */
enum handler_result pay_straddled(struct request *r)
{
    r->claim = NULL; /* freed by the reset (or the replica's rebuild from the shared log) */
    if (r->obs.store_down)
        return H_RESPOND; /* answered 503 naming the store (gateway_refuse_store) */
    r->obs.straddled_reset = true;
    request_internal(r, "FAILED_INTERNAL_SYSTEM_PROCESSING");
    r->obs.outcome = OUT_BUSINESS_ERROR;
    return H_RESPOND;
}

static int64_t ms_to_ns(double ms)
{
    return (int64_t)(ms * (double)NS_PER_MS + 0.5);
}

/* Render the payment view into a new body, or NULL on out of memory. Store lock held (or a
 * private copy of the payment). */
static char *render_view_at(struct gateway *g, const struct store *s, const struct payment *p,
                            uint32_t cancels, uint32_t deposits, enum pay_status st, size_t *len)
{
    struct buf b;
    buf_init(&b);
    render_payment_at(&b, store_ledger(s), g->cfg->mid, p, cancels, deposits, st);
    if (b.oom) {
        buf_fini(&b);
        return NULL;
    }
    return buf_steal(&b, len);
}

/* render_view_at with every deposit event of a virtual account (its current deposits). */
char *pay_render_view(struct gateway *g, const struct store *s, const struct payment *p,
                      uint32_t cancels, enum pay_status st, size_t *len)
{
    return render_view_at(g, s, p, cancels, p->va ? p->va->n_deposits : 0, st, len);
}

/* --- idempotency records held by a request (store lock held) ------------------------------ */

/* Replay a DONE record into r (byte-identical to the stored response). */
static void replay(struct gateway *g, struct request *r, const struct idem_record *rec)
{
    const struct idem_response *s = &rec->resp;
    size_t len = 0;
    char *body;
    if (s->payment) {
        body = render_view_at(g, &r->adm.tenant->store, s->payment, s->view_cancels,
                              s->view_deposits, (enum pay_status)s->view_status, &len);
    } else {
        body = malloc(s->body_len + 1);
        if (body) {
            memcpy(body, s->body, s->body_len);
            body[s->body_len] = '\0';
            len = s->body_len;
        }
    }
    if (!body) {
        request_internal(r, "FAILED_INTERNAL_SYSTEM_PROCESSING");
        return;
    }
    request_respond(r, s->status, body, len);
}

void pay_release_claim(struct store *s, struct request *r)
{
    if (r->claim)
        store_idem_release(s, r->claim, r);
    r->claim = NULL;
}

/* Complete r's claim with the Payment view (status 200). */
void pay_complete_success(struct store *s, struct request *r, struct payment *p)
{
    r->obs.outcome = OUT_OK;
    if (!r->claim)
        return;
    struct idem_response resp = {.status = 200, .payment = p, .view_cancels = p->n_cancels,
                                 .view_status = (uint8_t)p->status, .en = r->lang_en,
                                 .view_deposits = p->va ? p->va->n_deposits : 0};
    store_idem_complete(s, r->claim, r, &resp);
    r->claim = NULL;
}

/* A business error decided by the ledger: answer it and, if r holds a claim, store it --
 * unless an error fault with commit false will replace the answer: that request was never
 * processed, so its record goes and a resend runs again (docs/idempotency.md §3). */
void pay_business_error(struct store *s, struct request *r, const char *code,
                        const char *ko, const char *en)
{
    if (ko)
        body_invalid(r, code, ko, en);
    else
        request_error(r, code, NULL);
    r->obs.outcome = OUT_BUSINESS_ERROR;
    if (!r->claim)
        return;
    if (answer_fault_uncommits(r)) {
        pay_release_claim(s, r);
        return;
    }
    struct idem_response resp = {.status = r->resp.status, .en = r->lang_en};
    resp.body = malloc(r->resp.body_len + 1);
    if (resp.body) {
        memcpy(resp.body, r->resp.body, r->resp.body_len + 1);
        resp.body_len = r->resp.body_len;
        store_idem_complete(s, r->claim, r, &resp);
        r->claim = NULL;
    } else {
        pay_release_claim(s, r);
    }
}

/* --- memory bounds (docs/cli.md §1: --max-idempotency-records, --max-payments) ------------ */

/* Refuse r because its tenant's store is at bound `b`: 503 SERVICE_UNAVAILABLE whose message
 * names the bound and its flag [ours]. Called before anything is stored for r; fakegate's own
 * answer, so no fault acts on it. Store lock held. */
void pay_refuse_bound(struct request *r, const struct store *s, enum pay_bound b)
{
    char msg[400];
    if (b == BOUND_PAYMENTS)
        snprintf(msg, sizeof msg,
                 "this secret key's ledger holds %zu payments, the most --max-payments allows: "
                 "reads, cancels and confirms of stored payments still work; POST /__admin/reset "
                 "empties it",
                 store_payments_max(s));
    else
        snprintf(msg, sizeof msg,
                 "this secret key holds %zu Idempotency-Key records, the most "
                 "--max-idempotency-records allows: a stored key is still answered and a request "
                 "without a key still runs, but a new key is refused until records expire "
                 "(--idempotency-ttl) or POST /__admin/reset",
                 store_idem_max(s));
    request_error(r, "SERVICE_UNAVAILABLE", msg);
    r->resp.internal = true;
    r->obs.outcome = OUT_CAPPED;
}

struct bound_args {
    const char *scope;             /* r's idempotency scope, or NULL: no key */
    size_t scope_len;
    bool creates;                  /* r creates its payment unless r->payment_key is stored */
};

static int bounds_locked(struct gateway *g, struct store *s, struct request *r, void *arg)
{
    const struct bound_args *a = arg;
    int64_t now_ns = gateway_now_us(g) * 1000;
    if (a->creates && (!r->payment_key || !store_payment(s, r->payment_key)) &&
        !store_payment_room(s)) {
        pay_refuse_bound(r, s, BOUND_PAYMENTS);
        return 1;
    }
    if (a->scope && !store_idem_lookup(s, a->scope, a->scope_len, now_ns) &&
        !store_idem_room(s, now_ns)) {
        pay_refuse_bound(r, s, BOUND_IDEM_RECORDS);
        return 1;
    }
    return 0;
}

/* r's idempotency scope (idem_scope of its secret key, Idempotency-Key, method and path) into
 * *scope (caller frees; NULL when r has no Idempotency-Key) and *len. False, with r answered
 * 500, when memory ran out. */
static bool scope_of(struct request *r, char **scope, size_t *len)
{
    *scope = NULL;
    *len = 0;
    if (!r->adm.idem_key)
        return true;
    *scope = idem_scope(r->adm.secret_key, r->adm.idem_key, r->method_str, r->path, len);
    if (!*scope) {
        request_internal(r, "FAILED_INTERNAL_SYSTEM_PROCESSING");
        return false;
    }
    return true;
}

/* At arrival, before the plan: would r need a payment (`creates`: a new paymentKey) or an
 * idempotency record (a new Idempotency-Key) that its tenant's store has no room for? Then r is
 * answered 503 (pay_refuse_bound) and true is returned: nothing is stored, no attempt counted.
 * A request that passes may still find a bound reached further on (others took the last places
 * meanwhile): the claim and every creation check again there. */
bool pay_over_bounds(struct gateway *g, struct request *r, bool creates)
{
    struct bound_args a = {NULL, 0, creates};
    char *scope;
    if (!scope_of(r, &scope, &a.scope_len))
        return true;
    a.scope = scope;
    int rc = a.scope || creates ? gateway_txn(g, r, bounds_locked, &a) : 0;
    free(scope);
    /* A reset overtook r (GATEWAY_STRADDLED): it is answered further on; the shared store down:
     * answered 503 now. */
    return rc == 1 || r->obs.store_down;
}

/* Idempotency at the moment a request leaves its queue (docs/idempotency.md §3): PROCESSING
 * → 409, DONE → replay (or 422 with on_body_mismatch reject), none → claim (r->claim).
 * True if r may go on. */
static bool idem_gate(struct gateway *g, struct store *s, struct request *r, const char *scope,
                      size_t len, int64_t now)
{
    if (!scope)
        return true;
    struct idem_record *rec = store_idem_lookup(s, scope, len, now);
    if (rec && rec->state == IDEM_PROCESSING) {
        request_error(r, "IDEMPOTENT_REQUEST_PROCESSING", NULL);
        r->obs.outcome = OUT_CONFLICT;
        return false;
    }
    if (rec) {
        r->obs.key_reuse = rec->body_hash != r->body_hash;
        if (r->obs.key_reuse && r->adm.live->profile->on_body_mismatch == BODY_MISMATCH_REJECT) {
            request_error(r, "IDEMPOTENCY_KEY_REUSED", NULL);
            r->obs.outcome = OUT_INVALID;
        } else {
            replay(g, r, rec);
            r->obs.outcome = OUT_REPLAYED;
        }
        return false;
    }
    if (!store_idem_room(s, now)) {
        pay_refuse_bound(r, s, BOUND_IDEM_RECORDS); /* --max-idempotency-records */
        return false;
    }
    r->claim = store_idem_claim(s, scope, len, r, r->body_hash, now);
    if (!r->claim) {
        request_error(r, "FAILED_INTERNAL_SYSTEM_PROCESSING", NULL);
        return false;
    }
    return true;
}

/* --- confirm ------------------------------------------------------------------------------ */

/* The payment r found or created at arrival, or looked up now (it may have been registered
 * since, or a strict-sessions confirm has none). */
static struct payment *payment_of(struct store *s, struct request *r)
{
    if (!r->payment)
        r->payment = store_payment(s, r->payment_key);
    return r->payment;
}

/* The ledger's checks for a confirm, at the claim (docs/idempotency.md §3: a confirm's
 * business errors are decided at the claim and answered at once). True if r may process. */
static bool confirm_checks(struct gateway *g, struct store *s, struct request *r)
{
    struct payment *p = payment_of(s, r);
    struct payment *by_order = p && strcmp(p->order_id, r->order_id) == 0
                                   ? p /* a payment always holds its own orderId */
                                   : store_payment_by_order(s, r->order_id);
    if (by_order && by_order != p) {
        pay_business_error(s, r, "DUPLICATED_ORDER_ID", NULL, NULL);
        return false;
    }
    if (!p) {
        /* Created at arrival unless strict mode. */
        if (g->cfg->strict_sessions) {
            pay_business_error(s, r, "NOT_FOUND_PAYMENT_SESSION", NULL, NULL);
            return false;
        }
        enum ledger_create_result why;
        p = store_create(s, r->payment_key, r->order_id, r->amount, gateway_now_us(g), r, &why);
        if (!p && why == LEDGER_FULL) {
            /* --max-payments, reached since r arrived: not a business outcome, not stored. */
            pay_release_claim(s, r);
            pay_refuse_bound(r, s, BOUND_PAYMENTS);
            return false;
        }
        if (!p) {
            pay_business_error(s, r, "FAILED_INTERNAL_SYSTEM_PROCESSING", NULL, NULL);
            return false;
        }
        r->payment = p;
    }
    if (gateway_expire(g, s, p) || p->status == PAY_ABORTED) {
        pay_business_error(s, r, "NOT_FOUND_PAYMENT_SESSION", NULL, NULL);
        return false;
    }
    if (strcmp(p->order_id, r->order_id) != 0 || p->amount != r->amount) {
        pay_business_error(s, r, "INVALID_REQUEST", "결제 정보의 금액 또는 주문번호가 일치하지 않습니다.",
                       "amount/orderId does not match the payment");
        return false;
    }
    if (p->status != PAY_IN_PROGRESS) {
        pay_business_error(s, r, "ALREADY_PROCESSED_PAYMENT", NULL, NULL);
        return false;
    }
    /* --store redis://: the mark is the cluster's too, so a confirm of p on another instance
     * is refused here as on one (a store that is down leaves the commit's check). */
    if (p->processing ||
        (g->limits && cluster_limits_mark(g->limits, r->adm.tenant, p->payment_key,
                                          &r->processing_mark) == 0)) {
        /* Transient, like a 409: not stored under this request's key. */
        request_error(r, "ALREADY_PROCESSING_REQUEST", NULL);
        r->obs.outcome = OUT_BUSINESS_ERROR;
        pay_release_claim(s, r);
        return false;
    }
    p->processing = true;
    return true;
}

struct claim_args {
    const char *scope;
    size_t scope_len;
};

/* Leaving the queue, under the lock: idempotency, then (confirm) the ledger's checks. A
 * cancel's checks wait for its commit (docs/edge-rules.md §7). 1: go on into the latency. */
static int claim_locked(struct gateway *g, struct store *s, struct request *r, void *arg)
{
    const struct claim_args *a = arg;
    return idem_gate(g, s, r, a->scope, a->scope_len, gateway_now_us(g) * 1000) &&
           (r->kind == RK_CANCEL || r->kind == RK_VIRTUAL_ACCOUNT || confirm_checks(g, s, r));
}

struct commit_view {
    struct payment copy;           /* the approved payment, to render after unlocking */
    bool copied;
    char *body;                    /* rendered under the lock instead */
    size_t len;
};

enum { COMMIT_OK = 0, COMMIT_UNCOMMITTED, COMMIT_FAILED, COMMIT_RACED };

static int commit_locked(struct gateway *g, struct store *s, struct request *r, void *arg)
{
    struct commit_view *v = arg;
    struct payment *p = payment_of(s, r);
    assert(p && p->processing); /* the claim holder's payment, set at its claim */
    p->processing = false;
    if (r->processing_mark) {
        cluster_limits_release(g->limits, r->processing_mark);
        r->processing_mark = NULL;
    }
    if (answer_fault_uncommits(r)) {
        pay_release_claim(s, r);
        return COMMIT_UNCOMMITTED;
    }
    if (p->status != PAY_IN_PROGRESS || p->charges != 0) {
        /* The backstop of the shared `processing` mark (docs/cluster.md): when Redis could not
         * be asked for it, a confirm of the same payment on another instance, under another
         * Idempotency-Key or none, can pass its checks too and commit first (this section's
         * catch-up applied it). This one ran beside it, so it gets what a second confirm gets
         * on one instance: transient, not stored. */
        request_error(r, "ALREADY_PROCESSING_REQUEST", NULL);
        r->obs.outcome = OUT_BUSINESS_ERROR;
        pay_release_claim(s, r);
        return COMMIT_RACED;
    }
    if (store_approve(s, p, gateway_now_us(g), r) != 0) {
        pay_release_claim(s, r);
        return COMMIT_FAILED;
    }
    /* Render the answer after unlocking, from a copy: rendering is most of a confirm's work
     * under this lock, and the other worker waits for it (a futex sleep and wake). The copy
     * borrows the request's paymentKey and orderId (equal to the payment's: confirm_checks
     * passed); a payment with an order name renders under the lock. */
    v->copy = *p;
    v->copied = !p->order_name && strcmp(p->payment_key, r->payment_key) == 0 &&
                strcmp(p->order_id, r->order_id) == 0;
    if (v->copied) {
        v->copy.payment_key = r->payment_key;
        v->copy.order_id = r->order_id;
        v->copy.cancels = NULL; /* a view with no cancels (render reads view_cancels of them) */
        v->copy.idem_keys = NULL;
    } else {
        v->body = pay_render_view(g, s, p, 0, PAY_DONE, &v->len);
    }
    pay_complete_success(s, r, p);
    return COMMIT_OK;
}

static enum handler_result confirm_commit(struct gateway *g, struct request *r)
{
    struct commit_view v = {.body = NULL};
    int rc = gateway_txn(g, r, commit_locked, &v);
    if (rc == GATEWAY_STRADDLED) {
        free(v.body); /* rendered when the shared store failed only after the section ran */
        return pay_straddled(r);
    }
    if (rc == COMMIT_FAILED) {
        request_internal(r, "FAILED_INTERNAL_SYSTEM_PROCESSING");
        return H_RESPOND;
    }
    if (rc == COMMIT_UNCOMMITTED)
        return H_RESPOND; /* the error fault answers it on the way out */
    if (rc == COMMIT_RACED)
        return H_RESPOND; /* ALREADY_PROCESSING_REQUEST, set under the lock */
    if (v.copied)
        v.body = pay_render_view(g, &r->adm.tenant->store, &v.copy, 0, PAY_DONE, &v.len);
    if (!v.body) {
        /* Out of memory after the commit: the payment is approved (as when an answer is
         * lost), and a replay or GET renders it again. */
        request_internal(r, "FAILED_INTERNAL_SYSTEM_PROCESSING");
        r->obs.outcome = OUT_BUSINESS_ERROR;
        return H_RESPOND;
    }
    request_respond(r, 200, v.body, v.len);
    return H_RESPOND;
}

/* --- cancel ------------------------------------------------------------------------------- */

struct cancel_result {
    char *body;
    size_t len;
};

enum { CANCEL_DONE = 0, CANCEL_ANSWERED, CANCEL_FAILED };

/* The cancel's checks, in docs/edge-rules.md §7's order, then the cancel itself; one commit
 * at a time under the store lock, so overlapping cancels are judged one after the other. */
static int cancel_locked(struct gateway *g, struct store *s, struct request *r, void *arg)
{
    struct cancel_result *out = arg;
    if (answer_fault_uncommits(r)) {
        pay_release_claim(s, r);
        return CANCEL_ANSWERED;
    }
    int64_t now_us = gateway_now_us(g);
    struct payment *p = store_payment(s, r->payment_key);
    const char *code = NULL;
    if (p && p->va)
        gateway_expire(g, s, p); /* its due date may have passed since the last sweep */
    /* A virtual account waiting for its deposit cancels whole; after the deposit the money
     * goes back to a refund account (docs/virtual-accounts.md §6.6). */
    bool waiting = p && p->va && p->status == PAY_WAITING_FOR_DEPOSIT;
    if (!p)
        code = "NOT_FOUND_PAYMENT";
    else if (p->status == PAY_CANCELED)
        code = "ALREADY_CANCELED_PAYMENT";
    else if (waiting && r->cancel_amount && r->cancel_amount != p->balance)
        code = "NOT_ALLOWED_PARTIAL_REFUND_WAITING_DEPOSIT";
    else if (p->status != PAY_DONE && p->status != PAY_PARTIAL_CANCELED && !waiting)
        code = "NOT_CANCELABLE_PAYMENT";
    else if (p->va && !waiting && !r->refund_account)
        code = "INVALID_REFUND_ACCOUNT_INFO";
    else if (g->cfg->consecutive_cancel_ms > 0 && p->n_cancels > 0 &&
             now_us - p->cancels[p->n_cancels - 1].canceled_at_us <
                 g->cfg->consecutive_cancel_ms * 1000)
        code = "FORBIDDEN_CONSECUTIVE_REQUEST";
    else if (r->refundable_amount && r->refundable_amount != p->balance)
        code = "NOT_MATCHES_REFUNDABLE_AMOUNT";
    else if (r->cancel_amount > p->balance)
        code = "NOT_CANCELABLE_AMOUNT";
    if (code) {
        pay_business_error(s, r, code, NULL, NULL);
        return CANCEL_ANSWERED;
    }
    int64_t amount = r->cancel_amount ? r->cancel_amount : p->balance;
    if (p->va && r->refund_account) {
        /* Kept for the render (refundReceiveAccount): the newest cancel's account. */
        free(p->va->refund_bank), free(p->va->refund_account), free(p->va->refund_holder);
        p->va->refund_bank = r->refund_bank, p->va->refund_account = r->refund_account;
        p->va->refund_holder = r->refund_holder;
        r->refund_bank = r->refund_account = r->refund_holder = NULL;
    }
    if (store_cancel(s, p, amount, r->cancel_reason, now_us, r) == 0)
        out->body = pay_render_view(g, s, p, p->n_cancels, p->status, &out->len);
    if (!out->body) {
        pay_release_claim(s, r);
        return CANCEL_FAILED;
    }
    pay_complete_success(s, r, p);
    return CANCEL_DONE;
}

static enum handler_result cancel_commit(struct gateway *g, struct request *r)
{
    struct cancel_result res = {NULL, 0};
    int rc = gateway_txn(g, r, cancel_locked, &res);
    if (rc == GATEWAY_STRADDLED) {
        free(res.body); /* the shared store failed after the section ran */
        return pay_straddled(r); /* the payment it was for is gone (docs/admin.md §5 reset) */
    }
    if (rc == CANCEL_FAILED)
        request_internal(r, "FAILED_INTERNAL_SYSTEM_PROCESSING");
    else if (rc == CANCEL_DONE)
        request_respond(r, 200, res.body, res.len);
    return H_RESPOND;
}

/* --- reads -------------------------------------------------------------------------------- */

struct tx_query {
    const char *after;             /* startingAfter, or NULL */
    int64_t start, end;            /* Unix seconds, inclusive */
    long limit;
    struct buf b;
};

static int transactions_locked(struct gateway *g, struct store *s, struct request *r, void *arg)
{
    (void)r;
    struct tx_query *q = arg;
    long from = 0;
    if (q->after) {
        from = store_tx_find(s, q->after);
        if (from < 0)
            return -1;
        from++;
    }
    long n = 0;
    for (size_t i = (size_t)from; i < store_tx_count(s) && n < q->limit; i++) {
        const struct ledger_tx *tx = store_tx_at(s, i);
        int64_t at_us = ledger_tx_at_us(tx);
        int64_t at = at_us / 1000000;
        if (at < q->start || at > q->end)
            continue;
        if (n++)
            buf_addc(&q->b, ',');
        render_transaction(&q->b, store_ledger(s), g->cfg->mid, tx);
    }
    return 0;
}

static enum handler_result transactions_now(struct gateway *g, struct request *r)
{
    char *start_s = request_query(r, "startDate"), *end_s = request_query(r, "endDate");
    char *after = request_query(r, "startingAfter"), *limit_s = request_query(r, "limit");
    struct tx_query q = {.after = after, .limit = 100};
    buf_init(&q.b);
    if (!parse_kst(start_s, &q.start) || !parse_kst(end_s, &q.end)) {
        body_invalid(r, "INVALID_REQUEST",
                     "startDate, endDate: 필수 값이며 yyyy-MM-ddTHH:mm:ss 형식이어야 합니다.",
                     "startDate and endDate are required, as yyyy-MM-ddTHH:mm:ss (Korea time)");
        goto out;
    }
    if (limit_s) {
        char *endp;
        q.limit = strtol(limit_s, &endp, 10);
        if (!*limit_s || *endp || q.limit < 1 || q.limit > 5000 ||
            !strchr("123456789", *limit_s)) {
            body_invalid(r, "INVALID_REQUEST", "limit: 1 이상 5000 이하의 정수여야 합니다.",
                         "limit: must be an integer from 1 to 5000");
            goto out;
        }
    }
    buf_addc(&q.b, '[');
    int rc = gateway_txn(g, r, transactions_locked, &q);
    if (rc == GATEWAY_STRADDLED) {
        buf_fini(&q.b);
        free(start_s), free(end_s), free(after), free(limit_s);
        return pay_straddled(r);
    }
    if (rc < 0) {
        request_error(r, "INVALID_TRANSACTION_KEY", NULL);
        r->obs.outcome = OUT_INVALID;
        goto out;
    }
    buf_addc(&q.b, ']');
    if (q.b.oom) {
        request_internal(r, "FAILED_INTERNAL_SYSTEM_PROCESSING");
        goto out;
    }
    size_t len;
    char *body = buf_steal(&q.b, &len);
    request_respond(r, 200, body, len);
out:
    buf_fini(&q.b);
    free(start_s);
    free(end_s);
    free(after);
    free(limit_s);
    return H_RESPOND;
}

struct read_result {
    char *body;
    size_t len;
};

static int read_locked(struct gateway *g, struct store *s, struct request *r, void *arg)
{
    struct read_result *out = arg;
    struct payment *p = r->kind == RK_GET_ORDER ? store_payment_by_order(s, r->path_param)
                                                : store_payment(s, r->path_param);
    if (!p)
        return -1;
    gateway_expire(g, s, p);
    out->body = pay_render_view(g, s, p, p->n_cancels, p->status, &out->len);
    return 0;
}

static enum handler_result read_now(struct gateway *g, struct request *r)
{
    if (tenant_generation(r->adm.tenant) != r->adm.generation)
        return pay_straddled(r);
    if (r->kind == RK_TRANSACTIONS)
        return transactions_now(g, r);
    struct read_result res = {NULL, 0};
    int rc = gateway_txn(g, r, read_locked, &res);
    if (rc == GATEWAY_STRADDLED) {
        free(res.body); /* the shared store failed after the section ran */
        return pay_straddled(r);
    }
    if (rc < 0) {
        request_error(r, "NOT_FOUND_PAYMENT", NULL);
        r->obs.outcome = OUT_BUSINESS_ERROR;
    } else if (!res.body) {
        request_internal(r, "FAILED_INTERNAL_SYSTEM_PROCESSING");
    } else {
        request_respond(r, 200, res.body, res.len);
    }
    return H_RESPOND;
}

/* --- the plan and the queue --------------------------------------------------------------- */

static bool is_read(const struct request *r)
{
    return r->kind == RK_GET_PAYMENT || r->kind == RK_GET_ORDER || r->kind == RK_TRANSACTIONS;
}

/* The end of the processing latency: commit (confirm, cancel, virtual-account issue) or read. */
static enum handler_result finish(struct gateway *g, struct request *r)
{
    if (r->kind == RK_CANCEL)
        return cancel_commit(g, r);
    if (r->kind == RK_VIRTUAL_ACCOUNT)
        return pay_va_commit(g, r);
    if (r->kind == RK_CONFIRM)
        return confirm_commit(g, r);
    return read_now(g, r);
}

/* Into the processing latency: hold until it ends, or finish now. */
static enum handler_result process(struct gateway *g, struct request *r)
{
    r->phase = PH_PROCESSING;
    r->obs.latency_spent = true;
    r->hold_until_ns += ms_to_ns(r->latency_ms);
    return r->latency_ms > 0 ? H_HOLD : finish(g, r);
}

/* Leaving the queue: the fault decision, then idempotency, then (confirm) the ledger's checks
 * and the claim, then the processing latency. */
static enum handler_result leave_queue(struct gateway *g, struct request *r, bool draining)
{
    if (draining) {
        request_internal(r, "SERVICE_UNAVAILABLE");
        r->resp.close = true;
        r->obs.outcome = OUT_CAPPED;
        return H_RESPOND;
    }
    if (tenant_generation(r->adm.tenant) != r->adm.generation)
        return pay_straddled(r);
    if (answer_fault_before(r)) {
        observe_fault(g, r);
        return H_RESPOND;
    }
    if (is_read(r))
        return process(g, r);
    struct claim_args a = {NULL, 0};
    char *scope;
    if (!scope_of(r, &scope, &a.scope_len))
        return H_RESPOND;
    a.scope = scope;
    int rc = gateway_txn(g, r, claim_locked, &a);
    free(scope);
    if (rc == GATEWAY_STRADDLED)
        return pay_straddled(r);
    return rc ? process(g, r) : H_RESPOND;
}

/* The budget of an X-Fakegate-Fault fault: the header is one request's profile, so its
 * `times` is that request's alone -- it fires while times >= 1. */
static bool override_budget(int fault_index, void *ctx)
{
    const struct route_profile *rp = ctx;
    return rp->faults[fault_index].times > 0;
}

/* The request's plan (docs/profiles.md §4 "Determinism"): its attempt number for this
 * identity on this route, then the fault and latencies from a generator seeded by (seed,
 * route, identity, attempt) under the profile state the request arrived with. The identity is
 * the Idempotency-Key, else the orderId, else the paymentKey. */
static void plan(struct gateway *g, struct request *r, const char *identity)
{
    r->attempt = store_attempts_next(&r->adm.tenant->store, r->route, identity,
                                     gateway_now_us(g));
    struct rng rng;
    rng_seed_request(&rng, r->adm.seed, (int)r->route, identity, strlen(identity), r->attempt);
    struct plan pl;
    if (g->limits) /* --store redis://: `times` budgets counted cluster-wide */
        cluster_limits_plan(g->limits, r->adm.live, r->adm.tenant, r->route, r->attempt, &rng,
                            &pl);
    else
        live_plan(r->adm.live, r->route, r->attempt, &rng, &pl);
    if (r->adm.ovr_fault_profile) {
        /* X-Fakegate-Fault replaces the profile's faults for this request (its own draw). */
        struct plan ov;
        struct rng orng;
        rng_seed_request(&orng, r->adm.seed, (int)r->route + 16, identity, strlen(identity),
                         r->attempt);
        const struct route_profile *orp = profile_route(r->adm.ovr_fault_profile, ROUTE_DEFAULT);
        fault_decide(orp, r->attempt, &orng, override_budget, (void *)orp, &ov);
        pl.fault = ov.fault;
    }
    if (r->adm.ovr_latency_ms >= 0) {
        pl.queue_latency_ms = 0;
        pl.latency_ms = r->adm.ovr_latency_ms;
    }
    r->queue_latency_ms = pl.queue_latency_ms;
    r->latency_ms = pl.latency_ms;
    r->fault = pl.fault;
    r->obs.planned = true;
    observe_planned(g, r);
}

/* Queue the planned request: hold for queue_latency, or leave the queue now. */
enum handler_result pay_enqueue(struct gateway *g, struct request *r)
{
    r->phase = PH_QUEUED;
    r->hold_until_ns = r->received_ns + ms_to_ns(r->queue_latency_ms);
    if (r->queue_latency_ms > 0)
        return H_HOLD;
    return leave_queue(g, r, false);
}

/* Plan r, unless a reset ran since it was admitted (it would count in the new attempts). */
bool pay_plan_current(struct gateway *g, struct request *r, const char *identity)
{
    if (tenant_generation(r->adm.tenant) != r->adm.generation)
        return false;
    plan(g, r, identity);
    return true;
}

/* TossPayments-Test-Code with a test_ key forces that error at once: nothing is stored and the
 * ledger is untouched (docs/api.md §2.5). Returns true if r is answered. */
bool pay_test_code(struct request *r)
{
    if (!r->test_code || strncmp(r->adm.secret_key, "test_", 5) != 0)
        return false;
    const struct toss_error *e = toss_error_find(r->test_code);
    request_error(r, e ? e->code : "INVALID_TEST_CODE", NULL);
    r->obs.outcome = e ? OUT_BUSINESS_ERROR : OUT_INVALID;
    return true;
}

/* Toss's minimum for a card payment, in won; an account transfer's would be 200, but every
 * fakegate payment is a card payment (docs/api.md §2.1, §2.3 method 카드). */
#define CARD_MINIMUM_AMOUNT 100

/* A confirm below the card minimum → 400 BELOW_MINIMUM_AMOUNT with Toss's message (docs/api.md
 * §2.1). A validation error, checked with the fields and before the plan, not a business error
 * at the claim: it depends on the body alone, never on the ledger, so nothing needs to run to
 * decide it. Like every invalid request it is not stored under an Idempotency-Key
 * (docs/idempotency.md §3 "What is not stored"), creates no lenient payment and counts no
 * attempt, and the corrected amount under the same key runs normally; what is stored at the
 * claim is what the ledger decides (ALREADY_PROCESSED_PAYMENT, DUPLICATED_ORDER_ID, ...).
 * Returns true if r is answered. */
static bool below_minimum(struct request *r)
{
    if (r->amount >= CARD_MINIMUM_AMOUNT)
        return false;
    request_error(r, "BELOW_MINIMUM_AMOUNT", NULL);
    r->obs.outcome = OUT_INVALID;
    return true;
}

/* A request answered before its plan (a test code, an invalid field): journal what identifies
 * it and its body, so the report can tell when the same request is sent again after this 4xx
 * (retried_4xx). */
enum handler_result pay_unplanned(struct gateway *g, struct request *r, struct body *b)
{
    const char *order_id, *payment_key;
    uint64_t hash;
    body_identity(b, &order_id, &payment_key, &hash);
    if (r->kind == RK_CANCEL || (r->kind == RK_CONFIRM && r->path_param))
        payment_key = r->path_param;
    observe_identity(g, r, order_id, payment_key, hash);
    body_free(b);
    return H_RESPOND;
}

/* At arrival, lenient sessions: the payment exists from its first valid confirm
 * (docs/api.md §2.1); its confirm attempts and Idempotency-Keys are counted. */
static int arrive_locked(struct gateway *g, struct store *s, struct request *r, void *arg)
{
    (void)arg;
    struct payment *p = store_payment(s, r->payment_key);
    if (!p && !g->cfg->strict_sessions)
        p = store_create(s, r->payment_key, r->order_id, r->amount, gateway_now_us(g), r, NULL);
    r->payment = p;
    if (p)
        store_note_confirm(s, p, r->adm.idem_key);
    return 0;
}

enum handler_result payments_confirm(struct gateway *g, struct request *r)
{
    struct body *b = body_parse(r, g->cfg->max_json_depth);
    if (!b)
        return H_RESPOND;
    /* POST /v1/payments/{paymentKey}, Toss's older approve path, has the key in its path. */
    if (pay_test_code(r) || !body_confirm(r, b, r->path_param) || below_minimum(r) ||
        pay_over_bounds(g, r, !g->cfg->strict_sessions))
        return pay_unplanned(g, r, b);
    body_free(b);
    if (!pay_plan_current(g, r, r->adm.idem_key ? r->adm.idem_key : r->order_id))
        return pay_straddled(r);
    if (gateway_txn(g, r, arrive_locked, NULL) == GATEWAY_STRADDLED) {
        if (r->obs.store_down)
            return H_RESPOND; /* answered 503 naming the store */
        r->payment = NULL; /* it will be answered 500 when it leaves its queue */
    }
    return pay_enqueue(g, r);
}

enum handler_result payments_cancel(struct gateway *g, struct request *r)
{
    struct body *b = body_parse(r, g->cfg->max_json_depth);
    if (!b)
        return H_RESPOND;
    if (pay_test_code(r) || !body_cancel(r, b) || pay_over_bounds(g, r, false))
        return pay_unplanned(g, r, b);
    body_free(b);
    r->payment_key = strdup(r->path_param);
    if (!r->payment_key) {
        request_internal(r, "FAILED_INTERNAL_SYSTEM_PROCESSING");
        return H_RESPOND;
    }
    if (!pay_plan_current(g, r, r->adm.idem_key ? r->adm.idem_key : r->payment_key))
        return pay_straddled(r);
    return pay_enqueue(g, r);
}

enum handler_result payments_read(struct gateway *g, struct request *r)
{
    /* A transactions query has no key in its path: its identity is the path. */
    if (!pay_plan_current(g, r, r->path_param ? r->path_param : r->path))
        return pay_straddled(r);
    return pay_enqueue(g, r);
}

enum handler_result payments_on_deadline(struct gateway *g, struct request *r, bool draining)
{
    if (r->phase == PH_QUEUED)
        return leave_queue(g, r, draining);
    return finish(g, r);
}
