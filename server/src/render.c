/* render.c -- Payment and error JSON (see render.h). Field order follows Toss's Payment
 * (version 2022-11-16) as its API reference shows it. Derived fields (card number, approveNo,
 * secret, transaction keys) come from the payment's id and the ledger's salt, so they cost no
 * memory and never change between renders. The Payment is written as a pre-split template:
 * constant runs memcpy'd between the variable parts through one cursor (struct out), with no
 * printf; check_render_golden holds it to the bytes of the append-per-part renderer before it. */
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

/* The receipt link of a transaction: RECEIPT_URL, its key (32 characters), RECEIPT_REF. */
#define RECEIPT_URL "https://dashboard.tosspayments.com/receipt/redirection?transactionId="
#define RECEIPT_REF "&ref=PX"

static void add_receipt_url(struct buf *b, const char tx[33])
{
    ADD_LIT(b, RECEIPT_URL);
    buf_add(b, tx, 32);
    ADD_LIT(b, RECEIPT_REF);
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

/* The Payment's writer: a cursor into the buffer's reserved room. Constant runs are memcpy'd
 * with their length known at compile time and numbers formatted in place; the only check per
 * part is whether the room lasts (it does, but for long strings: then it grows as buf_add
 * would). Out of memory leaves p NULL and makes every later part a no-op. */
struct out {
    struct buf *b;
    char *p, *end;
};

static void out_init(struct out *o, struct buf *b, size_t hint)
{
    o->b = b;
    buf_reserve(b, hint);
    o->p = buf_space(b, 0);
    o->end = o->p ? b->data + b->cap - 1 : NULL; /* one byte stays for the NUL */
}

/* Make room for n more bytes: the written part is handed to the buffer, which grows. */
static bool out_grow(struct out *o, size_t n)
{
    if (!o->p)
        return false;
    buf_wrote(o->b, o->p);
    o->p = buf_space(o->b, n);
    o->end = o->p ? o->b->data + o->b->cap - 1 : NULL;
    return o->p != NULL;
}

static inline bool out_room(struct out *o, size_t n)
{
    return (o->p && (size_t)(o->end - o->p) >= n) || out_grow(o, n);
}

static inline void put(struct out *o, const void *s, size_t n)
{
    if (out_room(o, n)) {
        memcpy(o->p, s, n);
        o->p += n;
    }
}

static inline void put_c(struct out *o, char c)
{
    if (out_room(o, 1))
        *o->p++ = c;
}

/* A string literal's bytes without its NUL. */
#define PUT_LIT(o, lit) put((o), (lit), sizeof(lit) - 1)

static void put_i64(struct out *o, int64_t v)
{
    char tmp[20];
    size_t i = sizeof tmp;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        tmp[--i] = (char)('0' + (int)(u % 10));
        u /= 10;
    } while (u);
    if (v < 0)
        tmp[--i] = '-';
    put(o, tmp + i, sizeof tmp - i);
}

/* s's JSON escape (buf_add_json_chars' bytes), without quotes. */
static void put_json_chars(struct out *o, const char *s, size_t n)
{
    size_t m = json_escaped_len(s, n);
    if (m == n) {
        put(o, s, n);
    } else if (out_room(o, m)) {
        o->p = json_escape(o->p, s, n);
    }
}

/* s as a JSON string with quotes; NULL writes null (buf_add_json_strz). */
static void put_json_strz(struct out *o, const char *s)
{
    if (!s) {
        PUT_LIT(o, "null");
        return;
    }
    put_c(o, '"');
    put_json_chars(o, s, strlen(s));
    put_c(o, '"');
}

/* key, then the time in KST quoted, or null for 0. */
static void put_kv_time(struct out *o, const char *key, size_t key_len, int64_t us)
{
    put(o, key, key_len);
    if (us == 0) {
        PUT_LIT(o, "null");
        return;
    }
    if (!out_room(o, 34))
        return;
    o->p[0] = '"';
    fmt_kst(us, o->p + 1); /* 25 characters, more only for years past 9999 (at most 31) */
    size_t n = 1 + strlen(o->p + 1);
    o->p[n] = '"';
    o->p += n + 1;
}
#define PUT_KV_TIME(o, key, us) put_kv_time((o), (key), sizeof(key) - 1, (us))

/* A 32-character transaction key in quotes. */
static void put_tx(struct out *o, const char tx[33])
{
    if (out_room(o, 34)) {
        o->p[0] = '"';
        memcpy(o->p + 1, tx, 32);
        o->p[33] = '"';
        o->p += 34;
    }
}

/* 4330, four digits, ****, three of them again, * (Toss masks the middle of a card number). */
static void put_card(struct out *o, const struct ledger *l, const struct payment *p)
{
    char num[8], appr[9];
    derived_digits(l->salt ^ mix64(p->id), num, 4);
    derived_digits(l->salt ^ mix64(p->id + 0x5bd1e995u), appr, 8);
    char masked[16] = {'4', '3', '3', '0', num[0], num[1], num[2], num[3],
                       '*', '*', '*', '*', num[1], num[2], num[3], '*'};
    PUT_LIT(o, "{\"issuerCode\":\"71\",\"acquirerCode\":\"71\",\"number\":\"");
    put(o, masked, sizeof masked);
    PUT_LIT(o, "\",\"installmentPlanMonths\":0,\"isInterestFree\":false,\"interestPayer\":null,"
               "\"approveNo\":\"");
    put(o, appr, 8);
    PUT_LIT(o, "\",\"useCardPoint\":false,\"cardType\":\"신용\",\"ownerType\":\"개인\","
               "\"acquireStatus\":\"READY\",\"amount\":");
    put_i64(o, p->amount);
    put_c(o, '}');
}

/* virtualAccount {...} (docs/virtual-accounts.md §6.6; field names of Toss's Payment
 * 2022-11-16). The refund account shows once a cancel that gave one is in the view. */
static void put_virtual_account(struct out *o, const struct payment *p, uint32_t view_cancels,
                                enum pay_status view_status)
{
    const struct payment_va *va = p->va;
    bool refunded = view_cancels > 0 && va->refund_account;
    PUT_LIT(o, "{\"accountType\":\"일반\",\"accountNumber\":\"");
    put(o, va->account_number, 14);
    PUT_LIT(o, "\",\"bankCode\":\"");
    put(o, va->bank_code, 2);
    PUT_LIT(o, "\",\"customerName\":");
    put_json_strz(o, va->customer_name);
    PUT_KV_TIME(o, ",\"dueDate\":", va->due_at_us);
    if (refunded)
        PUT_LIT(o, ",\"refundStatus\":\"COMPLETED\",\"expired\":");
    else
        PUT_LIT(o, ",\"refundStatus\":\"NONE\",\"expired\":");
    if (view_status == PAY_EXPIRED)
        PUT_LIT(o, "true,\"settlementStatus\":\"INCOMPLETED\",\"refundReceiveAccount\":");
    else
        PUT_LIT(o, "false,\"settlementStatus\":\"INCOMPLETED\",\"refundReceiveAccount\":");
    if (refunded) {
        PUT_LIT(o, "{\"bankCode\":");
        put_json_strz(o, va->refund_bank);
        PUT_LIT(o, ",\"accountNumber\":");
        put_json_strz(o, va->refund_account);
        PUT_LIT(o, ",\"holderName\":");
        put_json_strz(o, va->refund_holder);
        PUT_LIT(o, "}}");
    } else {
        PUT_LIT(o, "null}");
    }
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
    if (approved) { /* only the receipt shows it; a card's is the last one until a cancel */
        int32_t index = p->va ? (int32_t)(LEDGER_DEPOSIT_INDEX + view_deposits - 1) : -1;
        if (has_last && view_cancels == 0)
            memcpy(approval_tx, last_tx, sizeof approval_tx);
        else
            ledger_tx_key(l, p, index, approval_tx);
    }

    struct out o;
    out_init(&o, b, 1536 + 384 * view_cancels); /* a DONE Payment is ~1.3 KB: one allocation */
    PUT_LIT(&o, "{\"mId\":");
    put_json_strz(&o, mid);
    PUT_LIT(&o, ",\"lastTransactionKey\":");
    if (has_last)
        put_tx(&o, last_tx);
    else
        PUT_LIT(&o, "null");
    PUT_LIT(&o, ",\"paymentKey\":");
    put_json_strz(&o, p->payment_key);
    PUT_LIT(&o, ",\"orderId\":");
    put_json_strz(&o, p->order_id);
    PUT_LIT(&o, ",\"orderName\":");
    put_json_strz(&o, p->order_name ? p->order_name : "fakegate 테스트 주문");
    PUT_LIT(&o, ",\"taxExemptionAmount\":0,\"status\":\"");
    const char *st = pay_status_name(view_status);
    put(&o, st, strlen(st));
    put_c(&o, '"');
    PUT_KV_TIME(&o, ",\"requestedAt\":", p->requested_at_us);
    PUT_KV_TIME(&o, ",\"approvedAt\":", approved_at);
    PUT_LIT(&o, ",\"useEscrow\":false,\"cultureExpense\":false,\"card\":");
    if (approved && !p->va)
        put_card(&o, l, p);
    else
        PUT_LIT(&o, "null");
    PUT_LIT(&o, ",\"virtualAccount\":");
    if (p->va)
        put_virtual_account(&o, p, view_cancels, view_status);
    else
        PUT_LIT(&o, "null");
    PUT_LIT(&o, ",\"transfer\":null,\"mobilePhone\":null,"
                "\"giftCertificate\":null,\"cashReceipt\":null,\"cashReceipts\":null,"
                "\"discount\":null,\"cancels\":");
    if (view_cancels == 0) {
        PUT_LIT(&o, "null");
    } else {
        put_c(&o, '[');
        for (uint32_t i = 0; i < view_cancels; i++) {
            const struct payment_cancel *c = &p->cancels[i];
            char tx[33];
            ledger_tx_key(l, p, (int32_t)i, tx);
            if (i)
                put_c(&o, ',');
            PUT_LIT(&o, "{\"transactionKey\":");
            put_tx(&o, tx);
            PUT_LIT(&o, ",\"cancelReason\":");
            put_json_strz(&o, c->reason);
            PUT_KV_TIME(&o, ",\"taxExemptionAmount\":0,\"canceledAt\":", c->canceled_at_us);
            PUT_LIT(&o, ",\"transferDiscountAmount\":0,\"easyPayDiscountAmount\":0,"
                        "\"receiptKey\":null,\"cancelAmount\":");
            put_i64(&o, c->amount);
            PUT_LIT(&o, ",\"taxFreeAmount\":0,\"refundableAmount\":");
            put_i64(&o, c->balance_after);
            PUT_LIT(&o, ",\"cancelStatus\":\"DONE\",\"cancelRequestId\":null}");
        }
        put_c(&o, ']');
    }
    char secret[28];
    render_secret(l, p, secret);
    PUT_LIT(&o, ",\"secret\":\"");
    put(&o, secret, 27);
    PUT_LIT(&o, "\",\"type\":\"NORMAL\",\"easyPay\":null,\"country\":\"KR\",\"failure\":");
    if (view_status == PAY_EXPIRED && !p->va)
        PUT_LIT(&o, "{\"code\":\"EXPIRED_PAYMENT\",\"message\":\"결제 유효 시간이 지나 만료되었습니다.\"}"
                    ",\"isPartialCancelable\":true,\"receipt\":");
    else
        PUT_LIT(&o, "null,\"isPartialCancelable\":true,\"receipt\":");
    if (approved) {
        PUT_LIT(&o, "{\"url\":\"" RECEIPT_URL);
        put(&o, approval_tx, 32);
        PUT_LIT(&o, RECEIPT_REF "\"}");
    } else {
        PUT_LIT(&o, "null");
    }
    /* The checkout URL holds the paymentKey, escaped like any JSON string. */
    PUT_LIT(&o, ",\"checkout\":{\"url\":\"https://api.tosspayments.com/v1/payments/");
    put_json_chars(&o, p->payment_key, strlen(p->payment_key));
    PUT_LIT(&o, "/checkout\"},\"currency\":\"KRW\",\"totalAmount\":");
    put_i64(&o, p->amount);
    PUT_LIT(&o, ",\"balanceAmount\":");
    put_i64(&o, balance);
    int64_t vat = vat_of(balance);
    PUT_LIT(&o, ",\"suppliedAmount\":");
    put_i64(&o, balance - vat);
    PUT_LIT(&o, ",\"vat\":");
    put_i64(&o, vat);
    if (p->va)
        PUT_LIT(&o, ",\"taxFreeAmount\":0,\"metadata\":null,\"method\":\"가상계좌\","
                    "\"version\":\"2022-11-16\"}");
    else
        PUT_LIT(&o, ",\"taxFreeAmount\":0,\"metadata\":null,\"method\":\"카드\","
                    "\"version\":\"2022-11-16\"}");
    if (o.p)
        buf_wrote(b, o.p);
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
