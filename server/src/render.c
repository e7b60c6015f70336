/* render.c -- Payment and error JSON (see render.h). Field order follows Toss's Payment
 * (version 2022-11-16) as its API reference shows it. Derived fields (card number, approveNo,
 * secret, transaction keys) come from the payment's id and the ledger's salt, so they cost no
 * memory and never change between renders. */
#include "render.h"

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

static void add_kv_time(struct buf *b, const char *key, int64_t us)
{
    buf_adds(b, key);
    if (us == 0) {
        buf_adds(b, "null");
        return;
    }
    char t[32];
    fmt_kst(us, t);
    buf_addc(b, '"');
    buf_adds(b, t);
    buf_addc(b, '"');
}

void render_payment(struct buf *b, const struct ledger *l, const char *mid,
                    const struct payment *p, uint32_t view_cancels, enum pay_status view_status)
{
    bool approved = p->approved_at_us != 0 &&
                    (view_status == PAY_DONE || view_status == PAY_CANCELED ||
                     view_status == PAY_PARTIAL_CANCELED);
    int64_t balance = p->amount;
    for (uint32_t i = 0; i < view_cancels; i++)
        balance -= p->cancels[i].amount;
    char last_tx[33], approval_tx[33];
    ledger_tx_key(l, p, -1, approval_tx);
    if (view_cancels > 0)
        ledger_tx_key(l, p, (int32_t)view_cancels - 1, last_tx);
    else
        ledger_tx_key(l, p, -1, last_tx);

    buf_adds(b, "{\"mId\":");
    buf_add_json_strz(b, mid);
    buf_adds(b, ",\"lastTransactionKey\":");
    if (approved)
        buf_addf(b, "\"%s\"", last_tx);
    else
        buf_adds(b, "null");
    buf_adds(b, ",\"paymentKey\":");
    buf_add_json_strz(b, p->payment_key);
    buf_adds(b, ",\"orderId\":");
    buf_add_json_strz(b, p->order_id);
    buf_adds(b, ",\"orderName\":");
    buf_add_json_strz(b, p->order_name ? p->order_name : "fakegate 테스트 주문");
    buf_adds(b, ",\"taxExemptionAmount\":0,\"status\":\"");
    buf_adds(b, pay_status_name(view_status));
    buf_addc(b, '"');
    add_kv_time(b, ",\"requestedAt\":", p->requested_at_us);
    add_kv_time(b, ",\"approvedAt\":", approved ? p->approved_at_us : 0);
    buf_adds(b, ",\"useEscrow\":false,\"cultureExpense\":false,\"card\":");
    if (approved) {
        char num[8], appr[9];
        derived_digits(l->salt ^ mix64(p->id), num, 4);
        derived_digits(l->salt ^ mix64(p->id + 0x5bd1e995u), appr, 8);
        buf_addf(b,
                 "{\"issuerCode\":\"71\",\"acquirerCode\":\"71\",\"number\":\"4330%c%c%c%c****%c%c%c*\","
                 "\"installmentPlanMonths\":0,\"isInterestFree\":false,\"interestPayer\":null,"
                 "\"approveNo\":\"%s\",\"useCardPoint\":false,\"cardType\":\"신용\","
                 "\"ownerType\":\"개인\",\"acquireStatus\":\"READY\",\"amount\":",
                 num[0], num[1], num[2], num[3], num[1], num[2], num[3], appr);
        buf_add_i64(b, p->amount);
        buf_addc(b, '}');
    } else {
        buf_adds(b, "null");
    }
    buf_adds(b, ",\"virtualAccount\":null,\"transfer\":null,\"mobilePhone\":null,"
                "\"giftCertificate\":null,\"cashReceipt\":null,\"cashReceipts\":null,"
                "\"discount\":null,\"cancels\":");
    if (view_cancels == 0) {
        buf_adds(b, "null");
    } else {
        buf_addc(b, '[');
        for (uint32_t i = 0; i < view_cancels; i++) {
            const struct payment_cancel *c = &p->cancels[i];
            char tx[33];
            ledger_tx_key(l, p, (int32_t)i, tx);
            if (i)
                buf_addc(b, ',');
            buf_addf(b, "{\"transactionKey\":\"%s\",\"cancelReason\":", tx);
            buf_add_json_strz(b, c->reason);
            buf_adds(b, ",\"taxExemptionAmount\":0");
            add_kv_time(b, ",\"canceledAt\":", c->canceled_at_us);
            buf_adds(b, ",\"transferDiscountAmount\":0,\"easyPayDiscountAmount\":0,"
                        "\"receiptKey\":null,\"cancelAmount\":");
            buf_add_i64(b, c->amount);
            buf_adds(b, ",\"taxFreeAmount\":0,\"refundableAmount\":");
            buf_add_i64(b, c->balance_after);
            buf_adds(b, ",\"cancelStatus\":\"DONE\",\"cancelRequestId\":null}");
        }
        buf_addc(b, ']');
    }
    {
        char secret[25];
        static const char alnum[] =
            "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
        uint64_t st = l->salt ^ mix64(p->id ^ 0xa5a5a5a5u);
        for (int i = 0; i < 24; i++)
            secret[i] = alnum[splitmix64(&st) % 62];
        secret[24] = '\0';
        buf_addf(b, ",\"secret\":\"ps_%s\"", secret);
    }
    buf_adds(b, ",\"type\":\"NORMAL\",\"easyPay\":null,\"country\":\"KR\",\"failure\":");
    if (view_status == PAY_EXPIRED)
        buf_adds(b, "{\"code\":\"EXPIRED_PAYMENT\",\"message\":\"결제 유효 시간이 지나 만료되었습니다.\"}");
    else
        buf_adds(b, "null");
    buf_adds(b, ",\"isPartialCancelable\":true,\"receipt\":");
    if (approved)
        buf_addf(b,
                 "{\"url\":\"https://dashboard.tosspayments.com/receipt/redirection?"
                 "transactionId=%s&ref=PX\"}",
                 approval_tx);
    else
        buf_adds(b, "null");
    /* The checkout URL holds the paymentKey; printable ASCII without '"' or '\\' needs no
     * escaping, anything else goes through the escaper. */
    buf_adds(b, ",\"checkout\":{\"url\":");
    {
        struct buf u;
        buf_init(&u);
        buf_adds(&u, "https://api.tosspayments.com/v1/payments/");
        buf_adds(&u, p->payment_key);
        buf_adds(&u, "/checkout");
        buf_add_json_str(b, u.data ? u.data : "", u.len);
        buf_fini(&u);
    }
    buf_adds(b, "},\"currency\":\"KRW\",\"totalAmount\":");
    buf_add_i64(b, p->amount);
    buf_adds(b, ",\"balanceAmount\":");
    buf_add_i64(b, balance);
    int64_t vat = vat_of(balance);
    buf_adds(b, ",\"suppliedAmount\":");
    buf_add_i64(b, balance - vat);
    buf_adds(b, ",\"vat\":");
    buf_add_i64(b, vat);
    buf_adds(b, ",\"taxFreeAmount\":0,\"metadata\":null,\"method\":\"카드\","
                "\"version\":\"2022-11-16\"}");
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
    const struct payment_cancel *c = tx->cancel_index >= 0 ? &p->cancels[tx->cancel_index] : NULL;
    buf_adds(b, "{\"mId\":");
    buf_add_json_strz(b, mid);
    buf_addf(b, ",\"transactionKey\":\"%s\",\"paymentKey\":", key);
    buf_add_json_strz(b, p->payment_key);
    buf_adds(b, ",\"orderId\":");
    buf_add_json_strz(b, p->order_id);
    buf_addf(b,
             ",\"method\":\"카드\",\"customerKey\":null,\"useEscrow\":false,"
             "\"receiptUrl\":\"https://dashboard.tosspayments.com/receipt/redirection?"
             "transactionId=%s&ref=PX\",\"status\":\"%s\"",
             key, c ? (c->balance_after == 0 ? "CANCELED" : "PARTIAL_CANCELED") : "DONE");
    add_kv_time(b, ",\"transactionAt\":", c ? c->canceled_at_us : p->approved_at_us);
    buf_adds(b, ",\"currency\":\"KRW\",\"amount\":");
    buf_add_i64(b, c ? c->amount : p->amount);
    buf_addc(b, '}');
}
