/* render.c -- Payment and error JSON (see render.h). Field order follows Toss's Payment
 * (version 2022-11-16) as its API reference shows it. Derived fields (card number, approveNo,
 * secret, transaction keys) come from the payment's id and the ledger's salt, so they cost no
 * memory and never change between renders. */
#include "render.h"

#include <string.h>

#include "common.h"
#include "rng.h"

static int64_t vat_of(int64_t amount)
{
    return (amount * 2 + 11) / 22; /* round(amount / 11), halves up */
}

static void derived_digits(uint64_t seed, char *out, int n)
{
    uint64_t st = seed;
    uint64_t v = splitmix64(&st);
    for (int i = 0; i < n; i++) {
        out[i] = (char)('0' + (int)(v % 10));
        v /= 10;
    }
    out[n] = '\0';
}

static void add_kv_time(struct buf *b, const char *key, size_t key_len, int64_t us)
{
    buf_add(b, key, key_len);
    if (us == 0) {
        buf_add(b, "null", 4);
        return;
    }
    char t[34];
    t[0] = '"';
    fmt_kst(us, t + 1); /* 25 characters, more only for years past 9999 */
    size_t n = 1 + strlen(t + 1);
    t[n] = '"';
    buf_add(b, t, n + 1);
}

/* A string literal's bytes without its NUL. */
#define ADD_LIT(b, lit) buf_add((b), (lit), sizeof(lit) - 1)
#define ADD_KV_TIME(b, key, us) add_kv_time((b), (key), sizeof(key) - 1, (us))

/* 4330, four digits, ****, three of them again, * (Toss masks the middle of a card number). */
static void add_card(struct buf *b, const struct ledger *l, const struct payment *p)
{
    char num[8], appr[9];
    derived_digits(l->salt ^ mix64(p->id), num, 4);
    derived_digits(l->salt ^ mix64(p->id + 0x5bd1e995u), appr, 8);
    char masked[16] = {'4', '3', '3', '0', num[0], num[1], num[2], num[3],
                       '*', '*', '*', '*', num[1], num[2], num[3], '*'};
    ADD_LIT(b, "{\"issuerCode\":\"71\",\"acquirerCode\":\"71\",\"number\":\"");
    buf_add(b, masked, sizeof masked);
    ADD_LIT(b, "\",\"installmentPlanMonths\":0,\"isInterestFree\":false,\"interestPayer\":null,"
               "\"approveNo\":\"");
    buf_add(b, appr, 8);
    ADD_LIT(b, "\",\"useCardPoint\":false,\"cardType\":\"신용\",\"ownerType\":\"개인\","
               "\"acquireStatus\":\"READY\",\"amount\":");
    buf_add_i64(b, p->amount);
    buf_addc(b, '}');
}

/* The receipt link of a transaction (its key is 32 characters). */
static void add_receipt_url(struct buf *b, const char tx[33])
{
    ADD_LIT(b, "https://dashboard.tosspayments.com/receipt/redirection?transactionId=");
    buf_add(b, tx, 32);
    ADD_LIT(b, "&ref=PX");
}

void render_secret(const struct ledger *l, const struct payment *p, char out[28])
{
    static const char alnum[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    uint64_t st = l->salt ^ mix64(p->id ^ 0xa5a5a5a5u);
    memcpy(out, "ps_", 3);
    for (int i = 0; i < 24; i++)
        out[3 + i] = alnum[splitmix64(&st) % 62];
    out[27] = '\0';
}

bool render_last_tx(const struct ledger *l, const struct payment *p, uint32_t view_cancels,
                    uint32_t view_deposits, enum pay_status view_status, char out[33])
{
    out[0] = '\0';
    if (view_cancels > 0)
        ledger_tx_key(l, p, (int32_t)view_cancels - 1, out);
    else if (p->va && view_deposits > 0)
        ledger_tx_key(l, p, (int32_t)(LEDGER_DEPOSIT_INDEX + view_deposits - 1), out);
    else if (!p->va && p->approved_at_us != 0 &&
             (view_status == PAY_DONE || view_status == PAY_CANCELED ||
              view_status == PAY_PARTIAL_CANCELED))
        ledger_tx_key(l, p, -1, out);
    return out[0] != '\0';
}

/* A virtual account's approval (its deposit) in a view: the time of the view's last deposit
 * event if that is a deposit, not an error, and the view is past it; else 0. */
static int64_t va_approved_at(const struct payment *p, uint32_t view_deposits,
                              enum pay_status view_status)
{
    if (view_deposits == 0 || p->va->deposits[view_deposits - 1].error ||
        !(view_status == PAY_DONE || view_status == PAY_CANCELED ||
          view_status == PAY_PARTIAL_CANCELED))
        return 0;
    return p->va->deposits[view_deposits - 1].at_us;
}

/* virtualAccount {...} (docs/virtual-accounts.md §6.6; field names of Toss's Payment
 * 2022-11-16). The refund account shows once a cancel that gave one is in the view. */
static void add_virtual_account(struct buf *b, const struct payment *p, uint32_t view_cancels,
                                enum pay_status view_status)
{
    const struct payment_va *va = p->va;
    bool refunded = view_cancels > 0 && va->refund_account;
    ADD_LIT(b, "{\"accountType\":\"일반\",\"accountNumber\":\"");
    buf_add(b, va->account_number, 14);
    ADD_LIT(b, "\",\"bankCode\":\"");
    buf_add(b, va->bank_code, 2);
    ADD_LIT(b, "\",\"customerName\":");
    buf_add_json_strz(b, va->customer_name);
    ADD_KV_TIME(b, ",\"dueDate\":", va->due_at_us);
    ADD_LIT(b, ",\"refundStatus\":\"");
    buf_adds(b, refunded ? "COMPLETED" : "NONE");
    ADD_LIT(b, "\",\"expired\":");
    buf_adds(b, view_status == PAY_EXPIRED ? "true" : "false");
    ADD_LIT(b, ",\"settlementStatus\":\"INCOMPLETED\",\"refundReceiveAccount\":");
    if (refunded) {
        ADD_LIT(b, "{\"bankCode\":");
        buf_add_json_strz(b, va->refund_bank);
        ADD_LIT(b, ",\"accountNumber\":");
        buf_add_json_strz(b, va->refund_account);
        ADD_LIT(b, ",\"holderName\":");
        buf_add_json_strz(b, va->refund_holder);
        buf_addc(b, '}');
    } else {
        ADD_LIT(b, "null");
    }
    buf_addc(b, '}');
}

void render_payment(struct buf *b, const struct ledger *l, const char *mid,
                    const struct payment *p, uint32_t view_cancels, enum pay_status view_status)
{
    render_payment_at(b, l, mid, p, view_cancels, p->va ? p->va->n_deposits : 0, view_status);
}

void render_payment_at(struct buf *b, const struct ledger *l, const char *mid,
                       const struct payment *p, uint32_t view_cancels, uint32_t view_deposits,
                       enum pay_status view_status)
{
    int64_t approved_at = p->va ? va_approved_at(p, view_deposits, view_status)
                          : p->approved_at_us != 0 &&
                                    (view_status == PAY_DONE || view_status == PAY_CANCELED ||
                                     view_status == PAY_PARTIAL_CANCELED)
                              ? p->approved_at_us
                              : 0;
    bool approved = approved_at != 0;
    int64_t balance = p->amount;
    for (uint32_t i = 0; i < view_cancels; i++)
        balance -= p->cancels[i].amount;
    char last_tx[33], approval_tx[33];
    bool has_last = render_last_tx(l, p, view_cancels, view_deposits, view_status, last_tx);
    if (p->va && approved)
        ledger_tx_key(l, p, (int32_t)(LEDGER_DEPOSIT_INDEX + view_deposits - 1), approval_tx);
    else
        ledger_tx_key(l, p, -1, approval_tx);

    buf_reserve(b, 1536 + 384 * view_cancels); /* a DONE Payment is ~1.3 KB: one allocation */
    ADD_LIT(b, "{\"mId\":");
    buf_add_json_strz(b, mid);
    ADD_LIT(b, ",\"lastTransactionKey\":");
    if (has_last) {
        buf_addc(b, '"');
        buf_add(b, last_tx, 32);
        buf_addc(b, '"');
    } else {
        ADD_LIT(b, "null");
    }
    ADD_LIT(b, ",\"paymentKey\":");
    buf_add_json_strz(b, p->payment_key);
    ADD_LIT(b, ",\"orderId\":");
    buf_add_json_strz(b, p->order_id);
    ADD_LIT(b, ",\"orderName\":");
    buf_add_json_strz(b, p->order_name ? p->order_name : "fakegate 테스트 주문");
    ADD_LIT(b, ",\"taxExemptionAmount\":0,\"status\":\"");
    buf_adds(b, pay_status_name(view_status));
    buf_addc(b, '"');
    ADD_KV_TIME(b, ",\"requestedAt\":", p->requested_at_us);
    ADD_KV_TIME(b, ",\"approvedAt\":", approved_at);
    ADD_LIT(b, ",\"useEscrow\":false,\"cultureExpense\":false,\"card\":");
    if (approved && !p->va)
        add_card(b, l, p);
    else
        ADD_LIT(b, "null");
    ADD_LIT(b, ",\"virtualAccount\":");
    if (p->va)
        add_virtual_account(b, p, view_cancels, view_status);
    else
        ADD_LIT(b, "null");
    ADD_LIT(b, ",\"transfer\":null,\"mobilePhone\":null,"
               "\"giftCertificate\":null,\"cashReceipt\":null,\"cashReceipts\":null,"
               "\"discount\":null,\"cancels\":");
    if (view_cancels == 0) {
        ADD_LIT(b, "null");
    } else {
        buf_addc(b, '[');
        for (uint32_t i = 0; i < view_cancels; i++) {
            const struct payment_cancel *c = &p->cancels[i];
            char tx[33];
            ledger_tx_key(l, p, (int32_t)i, tx);
            if (i)
                buf_addc(b, ',');
            ADD_LIT(b, "{\"transactionKey\":\"");
            buf_add(b, tx, 32);
            ADD_LIT(b, "\",\"cancelReason\":");
            buf_add_json_strz(b, c->reason);
            ADD_LIT(b, ",\"taxExemptionAmount\":0");
            ADD_KV_TIME(b, ",\"canceledAt\":", c->canceled_at_us);
            ADD_LIT(b, ",\"transferDiscountAmount\":0,\"easyPayDiscountAmount\":0,"
                       "\"receiptKey\":null,\"cancelAmount\":");
            buf_add_i64(b, c->amount);
            ADD_LIT(b, ",\"taxFreeAmount\":0,\"refundableAmount\":");
            buf_add_i64(b, c->balance_after);
            ADD_LIT(b, ",\"cancelStatus\":\"DONE\",\"cancelRequestId\":null}");
        }
        buf_addc(b, ']');
    }
    {
        char secret[28];
        render_secret(l, p, secret);
        ADD_LIT(b, ",\"secret\":\"");
        buf_add(b, secret, 27);
        buf_addc(b, '"');
    }
    ADD_LIT(b, ",\"type\":\"NORMAL\",\"easyPay\":null,\"country\":\"KR\",\"failure\":");
    if (view_status == PAY_EXPIRED && !p->va)
        ADD_LIT(b, "{\"code\":\"EXPIRED_PAYMENT\",\"message\":\"결제 유효 시간이 지나 만료되었습니다.\"}");
    else
        ADD_LIT(b, "null");
    ADD_LIT(b, ",\"isPartialCancelable\":true,\"receipt\":");
    if (approved) {
        ADD_LIT(b, "{\"url\":\"");
        add_receipt_url(b, approval_tx);
        ADD_LIT(b, "\"}");
    } else {
        ADD_LIT(b, "null");
    }
    /* The checkout URL holds the paymentKey, escaped like any JSON string. */
    ADD_LIT(b, ",\"checkout\":{\"url\":\"https://api.tosspayments.com/v1/payments/");
    buf_add_json_chars(b, p->payment_key, strlen(p->payment_key));
    ADD_LIT(b, "/checkout\"},\"currency\":\"KRW\",\"totalAmount\":");
    buf_add_i64(b, p->amount);
    ADD_LIT(b, ",\"balanceAmount\":");
    buf_add_i64(b, balance);
    int64_t vat = vat_of(balance);
    ADD_LIT(b, ",\"suppliedAmount\":");
    buf_add_i64(b, balance - vat);
    ADD_LIT(b, ",\"vat\":");
    buf_add_i64(b, vat);
    ADD_LIT(b, ",\"taxFreeAmount\":0,\"metadata\":null,\"method\":");
    buf_adds(b, p->va ? "\"가상계좌\"" : "\"카드\"");
    ADD_LIT(b, ",\"version\":\"2022-11-16\"}");
}

void render_error(struct buf *b, const char *code, const char *message)
{
    buf_adds(b, "{\"code\":");
    buf_add_json_strz(b, code);
    buf_adds(b, ",\"message\":");
    buf_add_json_strz(b, message);
    buf_addc(b, '}');
}

void render_transaction(struct buf *b, const struct ledger *l, const char *mid,
                        const struct ledger_tx *tx)
{
    const struct payment *p = tx->payment;
    char key[33];
    ledger_tx_key(l, p, tx->cancel_index, key);
    const struct va_deposit *d = tx->cancel_index >= LEDGER_DEPOSIT_INDEX
                                     ? &p->va->deposits[tx->cancel_index - LEDGER_DEPOSIT_INDEX]
                                     : NULL;
    const struct payment_cancel *c =
        tx->cancel_index >= 0 && !d ? &p->cancels[tx->cancel_index] : NULL;
    buf_adds(b, "{\"mId\":");
    buf_add_json_strz(b, mid);
    ADD_LIT(b, ",\"transactionKey\":\"");
    buf_add(b, key, 32);
    ADD_LIT(b, "\",\"paymentKey\":");
    buf_add_json_strz(b, p->payment_key);
    ADD_LIT(b, ",\"orderId\":");
    buf_add_json_strz(b, p->order_id);
    buf_adds(b, p->va ? ",\"method\":\"가상계좌\"" : ",\"method\":\"카드\"");
    ADD_LIT(b, ",\"customerKey\":null,\"useEscrow\":false,\"receiptUrl\":\"");
    add_receipt_url(b, key);
    ADD_LIT(b, "\",\"status\":\"");
    buf_adds(b, c   ? (c->balance_after == 0 ? "CANCELED" : "PARTIAL_CANCELED")
                : d && d->error ? "WAITING_FOR_DEPOSIT"
                                : "DONE");
    buf_addc(b, '"');
    ADD_KV_TIME(b, ",\"transactionAt\":", ledger_tx_at_us(tx));
    buf_adds(b, ",\"currency\":\"KRW\",\"amount\":");
    buf_add_i64(b, c ? c->amount : p->amount);
    buf_addc(b, '}');
}
