/* sessions.c -- POST /__admin/sessions (docs/api.md §2.1, docs/admin.md §5): a payment
 * registered before its confirm, as a Toss payment window would create it, in the tenant the
 * call names, and the generated paymentKeys (tgen_...) that sessions and virtual accounts share.
 * One gateway_tenant_txn section; nothing is stored when a field is invalid. */
#define _DEFAULT_SOURCE
#include "payments.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "body.h"
#include "common.h"
#include "payments_int.h"
#include "rng.h"

/* A paymentKey in Toss's current style: tgen_ + yyyyMMddHHmmss (Korea time) + 5 characters. */
void pay_session_key(struct gateway *g, uint64_t n, char out[32])
{
    static const char alnum[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    char t[32];
    fmt_kst(gateway_now_us(g), t); /* 2024-02-13T12:17:57+09:00 */
    uint64_t st = g->instance_id ^ mix64(n);
    snprintf(out, 32, "tgen_%.4s%.2s%.2s%.2s%.2s%.2s", t, t + 5, t + 8, t + 11, t + 14, t + 17);
    for (int i = 0; i < 5; i++)
        out[19 + i] = alnum[splitmix64(&st) % 62];
    out[24] = '\0';
}

struct session_args {
    const char *order_id, *payment_key, *order_name;
    int64_t amount;
    enum ledger_create_result why;
    char *body;
    size_t len;
};

static int session_locked(struct gateway *g, struct store *s, struct request *r, void *arg)
{
    (void)r;
    struct session_args *a = arg;
    char key[32];
    if (!a->payment_key) {
        pay_session_key(g, store_ledger(s)->next_id, key);
        a->payment_key = key;
    }
    struct payment *p = store_create(s, a->payment_key, a->order_id, a->amount, gateway_now_us(g),
                                     NULL, &a->why);
    a->payment_key = NULL; /* `key` ends here */
    if (!p)
        return -1;
    store_register_session(s, p, a->order_name);
    a->body = pay_render_view(g, s, p, 0, PAY_IN_PROGRESS, &a->len);
    return 0;
}

enum handler_result payments_register_session(struct gateway *g, struct request *r)
{
    struct body *b = body_parse(r, g->cfg->max_json_depth);
    if (!b)
        return H_RESPOND;
    struct session_args a = {.why = LEDGER_CREATED};
    if (!body_session(r, b, &a.order_id, &a.amount, &a.payment_key, &a.order_name)) {
        body_free(b);
        return H_RESPOND;
    }
    /* Its tenant: the one X-Fakegate-Tenant names, else the default one (docs/tenants.md §9). */
    struct tenant *t;
    if (!admin_tenant(g, r, true, &t)) {
        body_free(b);
        return H_RESPOND;
    }
    int rc = gateway_tenant_txn(g, t ? t : gateway_tenant_next(g, NULL), session_locked, &a);
    body_free(b);
    if (rc == GATEWAY_STORE_DOWN) {
        free(a.body);
        gateway_refuse_store(g, r);
    } else if (rc != 0 && a.why == LEDGER_KEY_EXISTS)
        body_invalid(r, "INVALID_REQUEST", "paymentKey: 이미 존재하는 결제입니다.",
                     "paymentKey: the payment already exists");
    else if (rc != 0 && a.why == LEDGER_ORDER_TAKEN)
        request_error(r, "DUPLICATED_ORDER_ID", NULL);
    else if (rc != 0 && a.why == LEDGER_FULL)
        pay_refuse_bound(r, &(t ? t : gateway_tenant_next(g, NULL))->store, BOUND_PAYMENTS);
    else if (rc != 0 || !a.body)
        request_internal(r, "FAILED_INTERNAL_SYSTEM_PROCESSING");
    else
        request_respond(r, 200, a.body, a.len);
    return H_RESPOND;
}
