/* virtual_accounts.c -- virtual accounts (docs/virtual-accounts.md §6.6): POST
 * /v1/virtual-accounts, validated, planned and queued as a confirm is (payments.c's helpers,
 * payments_int.h) and issued at its commit, and the simulated bank's POST
 * /__admin/virtual-accounts/deposit[-error]. Every store access is one gateway_txn section; an
 * issue's business errors are decided at its commit, as a cancel's are. */
#include "payments.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "answer.h"
#include "body.h"
#include "payments_int.h"

struct va_result {
    char *body;
    size_t len;
};

enum { VA_DONE = 0, VA_ANSWERED, VA_FAILED };

/* The commit: the orderId is free, so the account is made WAITING_FOR_DEPOSIT with its
 * due date counted from now; its business errors are decided here, as a cancel's are. */
static int va_locked(struct gateway *g, struct store *s, struct request *r, void *arg)
{
    struct va_result *out = arg;
    if (answer_fault_uncommits(r)) {
        pay_release_claim(s, r);
        return VA_ANSWERED;
    }
    if (store_payment_by_order(s, r->order_id)) {
        pay_business_error(s, r, "DUPLICATED_ORDER_ID", NULL, NULL);
        return VA_ANSWERED;
    }
    int64_t now_us = gateway_now_us(g);
    char key[32];
    pay_session_key(g, store_ledger(s)->next_id, key);
    if (!r->va->due_at_us)
        r->va->due_at_us = now_us + r->va_valid_us;
    enum ledger_create_result why;
    struct payment *p = store_create_va(s, key, r->order_id, r->amount, r->order_name, r->va,
                                        now_us, r, &why);
    if (!p) {
        if (why == LEDGER_ORDER_TAKEN) {
            pay_business_error(s, r, "DUPLICATED_ORDER_ID", NULL, NULL);
            return VA_ANSWERED;
        }
        if (why == LEDGER_FULL) { /* --max-payments, reached since r arrived: not stored */
            pay_release_claim(s, r);
            pay_refuse_bound(r, s, BOUND_PAYMENTS);
            return VA_ANSWERED;
        }
        pay_release_claim(s, r);
        return VA_FAILED;
    }
    r->va = NULL; /* the ledger's now */
    out->body = pay_render_view(g, s, p, 0, p->status, &out->len);
    if (!out->body) {
        pay_release_claim(s, r);
        return VA_FAILED;
    }
    pay_complete_success(s, r, p);
    return VA_DONE;
}

enum handler_result pay_va_commit(struct gateway *g, struct request *r)
{
    struct va_result res = {NULL, 0};
    int rc = gateway_txn(g, r, va_locked, &res);
    if (rc == GATEWAY_STRADDLED) {
        free(res.body); /* the shared store failed after the section ran */
        return pay_straddled(r);
    }
    if (rc == VA_FAILED)
        request_internal(r, "FAILED_INTERNAL_SYSTEM_PROCESSING");
    else if (rc == VA_DONE)
        request_respond(r, 200, res.body, res.len);
    return H_RESPOND;
}

enum handler_result payments_virtual_account(struct gateway *g, struct request *r)
{
    struct body *b = body_parse(r, g->cfg->max_json_depth);
    if (!b)
        return H_RESPOND;
    if (pay_test_code(r) || !body_virtual_account(r, b, gateway_now_us(g)) ||
        pay_over_bounds(g, r, true))
        return pay_unplanned(g, r, b);
    body_free(b);
    if (!pay_plan_current(g, r, r->adm.idem_key ? r->adm.idem_key : r->order_id))
        return pay_straddled(r);
    return pay_enqueue(g, r);
}

struct deposit_args {
    const char *order_id, *account_number;
    int64_t amount;
    bool error;                    /* deposit-error */
    const char *code, *ko, *en;    /* the refusal, or NULL */
    char *body;
    size_t len;
};

/* The virtual account a deposit names: by orderId, else by its account number (the newest
 * one with that number). */
static struct payment *deposit_target(struct store *s, const struct deposit_args *a)
{
    if (a->order_id)
        return store_payment_by_order(s, a->order_id);
    for (size_t i = store_payment_count(s); i-- > 0;) {
        struct payment *p = store_payment_at(s, i);
        if (p->va && strcmp(p->va->account_number, a->account_number) == 0)
            return p;
    }
    return NULL;
}

static int deposit_locked(struct gateway *g, struct store *s, struct request *r, void *arg)
{
    (void)r;
    struct deposit_args *a = arg;
    struct payment *p = deposit_target(s, a);
    if (!p || !p->va) {
        a->code = "NOT_FOUND_PAYMENT";
        return -1;
    }
    gateway_expire(g, s, p);
    a->code = "INVALID_REQUEST";
    if (a->error) {
        if (p->status != PAY_DONE) {
            a->ko = "입금 완료된 가상계좌가 아닙니다.";
            a->en = "the virtual account has no deposit to undo (status is not DONE)";
            return -1;
        }
    } else if (p->status == PAY_EXPIRED) {
        a->ko = "입금 기한이 지난 가상계좌입니다.";
        a->en = "the virtual account's due date has passed";
        return -1;
    } else if (p->status != PAY_WAITING_FOR_DEPOSIT) {
        a->ko = "입금 대기 중인 가상계좌가 아닙니다.";
        a->en = "the virtual account is not waiting for a deposit";
        return -1;
    } else if (a->amount != p->amount) {
        a->ko = "입금 금액이 결제 금액과 일치하지 않습니다.";
        a->en = "amount: a virtual account takes exactly its payment's amount";
        return -1;
    }
    a->code = NULL;
    if (store_deposit(s, p, a->error, gateway_now_us(g), NULL) != 0)
        return -2;
    a->body = pay_render_view(g, s, p, p->n_cancels, p->status, &a->len);
    return a->body ? 0 : -2;
}

enum handler_result payments_admin_deposit(struct gateway *g, struct request *r)
{
    struct body *b = body_parse(r, g->cfg->max_json_depth);
    if (!b)
        return H_RESPOND;
    struct deposit_args a = {.error = strstr(r->path, "deposit-error") != NULL};
    if (!body_deposit(r, b, &a.order_id, &a.account_number, &a.amount)) {
        body_free(b);
        return H_RESPOND;
    }
    /* Its tenant: the one X-Fakegate-Tenant names, else the default one (docs/tenants.md §9). */
    struct tenant *t;
    if (!admin_tenant(g, r, false, &t)) {
        body_free(b);
        return H_RESPOND;
    }
    int rc = gateway_tenant_txn(g, t ? t : gateway_tenant_next(g, NULL), deposit_locked, &a);
    body_free(b);
    if (rc == GATEWAY_STORE_DOWN) {
        free(a.body);
        gateway_refuse_store(g, r);
    } else if (rc == 0)
        request_respond(r, 200, a.body, a.len);
    else if (a.code && a.ko)
        body_invalid(r, a.code, a.ko, a.en);
    else if (a.code)
        request_error(r, a.code, NULL);
    else
        request_internal(r, "FAILED_INTERNAL_SYSTEM_PROCESSING");
    return H_RESPOND;
}
