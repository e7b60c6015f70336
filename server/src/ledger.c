/* ledger.c -- payments and transactions (see ledger.h). Invariants: every payment is in
 * `all` and `by_key`; `by_order` maps an orderId to the first payment that used it; `txs` is
 * in commit order and only grows until reset. */
#define _POSIX_C_SOURCE 200809L
#include "ledger.h"

#include <stdlib.h>
#include <string.h>

#include "rng.h"

const char *pay_status_name(enum pay_status s)
{
    static const char *const names[PAY_STATUS_COUNT] = {
        "IN_PROGRESS", "DONE", "CANCELED", "PARTIAL_CANCELED", "ABORTED", "EXPIRED",
        "WAITING_FOR_DEPOSIT"};
    return (unsigned)s < PAY_STATUS_COUNT ? names[s] : "UNKNOWN";
}

void ledger_init(struct ledger *l, uint64_t salt)
{
    memset(l, 0, sizeof *l);
    strmap_init(&l->by_key);
    strmap_init(&l->by_order);
    l->salt = salt;
    l->next_id = 1;
    l->next_seq = 1;
}

void ledger_va_free(struct payment_va *va)
{
    if (!va)
        return;
    free(va->customer_name);
    free(va->customer_email);
    free(va->deposits);
    free(va->refund_bank);
    free(va->refund_account);
    free(va->refund_holder);
    free(va);
}

static void payment_free(struct payment *p)
{
    ledger_va_free(p->va);
    for (uint32_t i = 0; i < p->n_cancels; i++)
        free(p->cancels[i].reason);
    for (uint32_t i = 0; i < p->n_idem_keys; i++)
        free(p->idem_keys[i]);
    free(p->cancels);
    free(p->idem_keys);
    free(p->order_name); /* payment_key and order_id live in p's own block */
    free(p);
}

void ledger_fini(struct ledger *l)
{
    for (size_t i = 0; i < l->n_all; i++)
        payment_free(l->all[i]);
    free(l->all);
    free(l->txs);
    free(l->due);
    strmap_fini(&l->by_key);
    strmap_fini(&l->by_order);
}

void ledger_reset(struct ledger *l)
{
    /* Ids and sequence numbers carry on, so keys derived after a reset never repeat one a
     * client saw before it. The salt is not written at all: a confirm renders its answer from
     * a copy of the payment after releasing the store lock, reading the salt meanwhile. */
    ledger_fini(l);
    strmap_init(&l->by_key);
    strmap_init(&l->by_order);
    l->all = NULL;
    l->n_all = l->cap_all = 0;
    l->txs = NULL;
    l->n_txs = l->cap_txs = 0;
    l->due = NULL;
    l->n_due = l->cap_due = 0;
}

/* Push (due, p) on the due-date index; room was made by the caller (grow). */
static void due_push(struct ledger *l, struct payment *p)
{
    struct ledger_due x = {p->va->due_at_us, p};
    size_t i = l->n_due++;
    while (i > 0 && l->due[(i - 1) / 2].due_at_us > x.due_at_us) {
        l->due[i] = l->due[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    l->due[i] = x;
}

static void due_pop(struct ledger *l)
{
    struct ledger_due x = l->due[--l->n_due];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= l->n_due)
            break;
        if (c + 1 < l->n_due && l->due[c + 1].due_at_us < l->due[c].due_at_us)
            c++;
        if (l->due[c].due_at_us >= x.due_at_us)
            break;
        l->due[i] = l->due[c];
        i = c;
    }
    if (l->n_due > 0)
        l->due[i] = x;
}

struct payment *ledger_next_due(struct ledger *l, int64_t now_us)
{
    while (l->n_due > 0 && l->due[0].due_at_us <= now_us) {
        struct payment *p = l->due[0].payment;
        due_pop(l);
        if (p->status == PAY_WAITING_FOR_DEPOSIT)
            return p;
    }
    return NULL;
}

struct payment *ledger_get(const struct ledger *l, const char *payment_key)
{
    return strmap_get(&l->by_key, payment_key, strlen(payment_key));
}

struct payment *ledger_get_by_order(const struct ledger *l, const char *order_id)
{
    return strmap_get(&l->by_order, order_id, strlen(order_id));
}

static int grow(void **arr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t ncap = *cap ? *cap * 2 : 64;
    void *n = realloc(*arr, ncap * elem);
    if (!n)
        return -1;
    *arr = n;
    *cap = ncap;
    return 0;
}

struct payment *ledger_create(struct ledger *l, const char *payment_key, const char *order_id,
                              int64_t amount, int64_t now_us, enum ledger_create_result *why)
{
    enum ledger_create_result dummy;
    if (!why)
        why = &dummy;
    if (l->max_payments && l->n_all >= l->max_payments) {
        *why = LEDGER_FULL;
        return NULL;
    }
    *why = LEDGER_NO_MEMORY;
    if (grow((void **)&l->all, &l->cap_all, l->n_all + 1, sizeof *l->all) != 0)
        return NULL;
    /* One block: the payment, then its paymentKey and orderId (fewer allocations on the
     * confirm path, and the keys the indexes compare sit next to the payment). */
    size_t kl = strlen(payment_key) + 1, ol = strlen(order_id) + 1;
    struct payment *p = calloc(1, sizeof *p + kl + ol);
    if (!p)
        return NULL;
    p->payment_key = (char *)(p + 1);
    p->order_id = p->payment_key + kl;
    memcpy(p->payment_key, payment_key, kl);
    memcpy(p->order_id, order_id, ol);
    p->id = l->next_id;
    p->amount = amount;
    p->balance = amount;
    p->status = PAY_IN_PROGRESS;
    p->requested_at_us = now_us;
    /* strmap_add is the lookup and the insert in one walk. */
    void *had = strmap_add(&l->by_key, p->payment_key, kl - 1, p);
    if (had) {
        if (had != p)
            *why = LEDGER_KEY_EXISTS;
        payment_free(p);
        return NULL;
    }
    had = strmap_add(&l->by_order, p->order_id, ol - 1, p);
    if (had) {
        if (had != p)
            *why = LEDGER_ORDER_TAKEN;
        strmap_del(&l->by_key, p->payment_key, kl - 1);
        payment_free(p);
        return NULL;
    }
    l->next_id++;
    l->all[l->n_all++] = p;
    *why = LEDGER_CREATED;
    return p;
}

struct payment *ledger_create_va(struct ledger *l, const char *payment_key, const char *order_id,
                                 int64_t amount, const char *order_name, struct payment_va *va,
                                 int64_t now_us, enum ledger_create_result *why)
{
    char *name = strdup(order_name);
    if (!name || grow((void **)&l->due, &l->cap_due, l->n_due + 1, sizeof *l->due) != 0) {
        free(name);
        if (why)
            *why = LEDGER_NO_MEMORY;
        return NULL;
    }
    struct payment *p = ledger_create(l, payment_key, order_id, amount, now_us, why);
    if (!p) {
        free(name);
        return NULL;
    }
    p->order_name = name;
    p->va = va;
    p->status = PAY_WAITING_FOR_DEPOSIT;
    /* 14 digits from (salt, id): stable across renders, distinct per payment in practice. */
    uint64_t st = l->salt ^ mix64(p->id ^ 0x76616363u); /* "vacc" */
    uint64_t v = splitmix64(&st);
    for (int i = 0; i < 14; i++) {
        va->account_number[i] = (char)('0' + (int)(v % 10));
        v /= 10;
        if (i == 6)
            v = splitmix64(&st);
    }
    va->account_number[14] = '\0';
    due_push(l, p);
    return p;
}

int ledger_deposit(struct ledger *l, struct payment *p, bool error, int64_t now_us)
{
    struct payment_va *va = p->va;
    if (!va || va->n_deposits >= LEDGER_MAX_DEPOSITS || l->n_txs >= UINT32_MAX ||
        grow((void **)&l->txs, &l->cap_txs, l->n_txs + 1, sizeof *l->txs) != 0 ||
        (error && grow((void **)&l->due, &l->cap_due, l->n_due + 1, sizeof *l->due) != 0))
        return -1;
    struct va_deposit *nd = realloc(va->deposits, (va->n_deposits + 1) * sizeof *nd);
    if (!nd)
        return -1;
    va->deposits = nd;
    nd[va->n_deposits] = (struct va_deposit){now_us, error, (uint32_t)l->n_txs};
    l->txs[l->n_txs++] = (struct ledger_tx){p, (int32_t)(LEDGER_DEPOSIT_INDEX + va->n_deposits),
                                            l->next_seq++};
    va->n_deposits++;
    p->status = error ? PAY_WAITING_FOR_DEPOSIT : PAY_DONE;
    if (!error)
        p->approved_at_us = now_us;
    else
        due_push(l, p); /* waiting again: its due date counts again */
    return 0;
}

bool ledger_expire_va(struct payment *p, int64_t now_us)
{
    if (p->va && p->status == PAY_WAITING_FOR_DEPOSIT && now_us >= p->va->due_at_us)
        p->status = PAY_EXPIRED;
    return p->status == PAY_EXPIRED;
}

int ledger_approve(struct ledger *l, struct payment *p, int64_t now_us)
{
    if (l->n_txs >= UINT32_MAX ||
        grow((void **)&l->txs, &l->cap_txs, l->n_txs + 1, sizeof *l->txs) != 0)
        return -1;
    p->approve_tx = (uint32_t)l->n_txs;
    p->status = PAY_DONE;
    p->approved_at_us = now_us;
    p->charges++;
    l->txs[l->n_txs++] = (struct ledger_tx){p, -1, l->next_seq++};
    return 0;
}

int ledger_cancel(struct ledger *l, struct payment *p, int64_t amount, const char *reason,
                  int64_t now_us)
{
    if (l->n_txs >= UINT32_MAX || p->n_cancels >= LEDGER_DEPOSIT_INDEX ||
        grow((void **)&l->txs, &l->cap_txs, l->n_txs + 1, sizeof *l->txs) != 0)
        return -1;
    struct payment_cancel *nc = realloc(p->cancels, (p->n_cancels + 1) * sizeof *nc);
    if (!nc)
        return -1;
    p->cancels = nc;
    char *r = strdup(reason);
    if (!r)
        return -1;
    p->balance -= amount;
    nc[p->n_cancels] = (struct payment_cancel){amount, p->balance, now_us, r, (uint32_t)l->n_txs};
    l->txs[l->n_txs++] = (struct ledger_tx){p, (int32_t)p->n_cancels, l->next_seq++};
    p->n_cancels++;
    p->status = p->balance == 0 ? PAY_CANCELED : PAY_PARTIAL_CANCELED;
    return 0;
}

bool ledger_expire_if_stale(struct payment *p, int64_t now_us, int64_t ttl_us)
{
    if (p->status == PAY_IN_PROGRESS && !p->processing && now_us - p->requested_at_us >= ttl_us)
        p->status = PAY_EXPIRED;
    return p->status == PAY_EXPIRED;
}

/* ledger_tx_key packs (payment id, cancel index) into one word this way. */
#define TX_INDEX_RADIX 1000003u

long ledger_find_tx(const struct ledger *l, const char *tx_key)
{
    /* The first 16 characters are the first splitmix64 output, low nibble first. */
    uint64_t w0 = 0;
    for (int i = 0; i < 16; i++) {
        const char *d = strchr("0123456789ABCDEF", tx_key[i]);
        if (!tx_key[i] || !d)
            return -1;
        w0 |= (uint64_t)(d - "0123456789ABCDEF") << (i * 4);
    }
    uint64_t packed = unmix64((unmix64(w0) - SPLITMIX64_GAMMA) ^ l->salt);
    uint64_t id = packed / TX_INDEX_RADIX;
    int64_t cancel_index = (int64_t)(packed % TX_INDEX_RADIX) - 1;
    if (l->n_all == 0 || id < l->all[0]->id || id - l->all[0]->id >= l->n_all)
        return -1;
    const struct payment *p = l->all[id - l->all[0]->id];
    uint32_t row;
    if (cancel_index < 0 && p->charges > 0)
        row = p->approve_tx;
    else if (cancel_index >= 0 && (uint64_t)cancel_index < p->n_cancels)
        row = p->cancels[cancel_index].tx;
    else if (cancel_index >= LEDGER_DEPOSIT_INDEX && p->va &&
             (uint64_t)(cancel_index - LEDGER_DEPOSIT_INDEX) < p->va->n_deposits)
        row = p->va->deposits[cancel_index - LEDGER_DEPOSIT_INDEX].tx;
    else
        return -1;
    /* Any 16 characters decode to some (id, index): only the whole key, derived again, says it
     * is this row's. */
    char k[33];
    ledger_tx_key(l, p, (int32_t)cancel_index, k);
    return strcmp(k, tx_key) == 0 ? (long)row : -1;
}

int64_t ledger_tx_at_us(const struct ledger_tx *tx)
{
    const struct payment *p = tx->payment;
    if (tx->cancel_index >= LEDGER_DEPOSIT_INDEX)
        return p->va->deposits[tx->cancel_index - LEDGER_DEPOSIT_INDEX].at_us;
    return tx->cancel_index >= 0 ? p->cancels[tx->cancel_index].canceled_at_us : p->approved_at_us;
}

int ledger_note_idem_key(struct payment *p, const char *idem_key)
{
    for (uint32_t i = 0; i < p->n_idem_keys; i++)
        if (strcmp(p->idem_keys[i], idem_key) == 0)
            return 0;
    if (p->n_idem_keys == LEDGER_MAX_IDEM_KEYS) {
        if (p->idem_keys_unlisted < UINT32_MAX)
            p->idem_keys_unlisted++;
        return 0;
    }
    char **n = realloc(p->idem_keys, (p->n_idem_keys + 1) * sizeof *n);
    if (!n)
        return -1;
    p->idem_keys = n;
    if (!(n[p->n_idem_keys] = strdup(idem_key)))
        return -1;
    p->n_idem_keys++;
    return 0;
}

void ledger_tx_key(const struct ledger *l, const struct payment *p, int32_t cancel_index,
                   char out[33])
{
    static const char hex[] = "0123456789ABCDEF";
    uint64_t st = l->salt ^ mix64(p->id * TX_INDEX_RADIX + (uint64_t)(int64_t)(cancel_index + 1));
    uint64_t w[2] = {splitmix64(&st), splitmix64(&st)}; /* ledger_find_tx undoes this */
    for (int i = 0; i < 32; i++)
        out[i] = hex[(w[i / 16] >> ((i % 16) * 4)) & 15];
    out[32] = '\0';
}
