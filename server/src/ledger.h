/* ledger.h -- payments and their transactions: fakegate's ground truth (docs/api.md §2,
 * docs/admin.md §5). Pure data, no I/O, no lock: the gateway's store lock guards every call. A
 * payment is created IN_PROGRESS when its first valid confirm arrives (or a session is registered)
 * and changes status only through ledger_* calls, so `charges` counts real approvals: never more
 * than 1. */
#ifndef FAKEGATE_LEDGER_H
#define FAKEGATE_LEDGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "strmap.h"

enum pay_status {
    PAY_IN_PROGRESS = 0,
    PAY_DONE,
    PAY_CANCELED,
    PAY_PARTIAL_CANCELED,
    PAY_ABORTED,
    PAY_EXPIRED,
    PAY_WAITING_FOR_DEPOSIT, /* a virtual account issued, its deposit not (yet) made */
    PAY_STATUS_COUNT
};

/* "IN_PROGRESS", "DONE", ... as Toss spells them. */
const char *pay_status_name(enum pay_status s);

struct payment_cancel {
    int64_t amount;          /* cancelAmount, KRW */
    int64_t balance_after;   /* the balance after this cancel (its refundableAmount) */
    int64_t canceled_at_us;  /* commit time, µs since the Unix epoch */
    char *reason;            /* owned */
    uint32_t tx;             /* its row in ledger.txs */
};

/* One event of a virtual account's (simulated) bank: a deposit, or a deposit error that undoes
 * the deposit before it (docs/virtual-accounts.md §6.6). Each has its own transactionKey. */
struct va_deposit {
    int64_t at_us;           /* business time */
    bool error;              /* a deposit error (back to WAITING_FOR_DEPOSIT) */
    uint32_t tx;             /* its row in ledger.txs */
};

/* What a virtual account (method 가상계좌) has beyond a card payment. */
struct payment_va {
    char bank_code[3];       /* Toss's two-digit bank code ("88" 신한) */
    char account_number[15]; /* 14 digits, derived from the payment's id */
    int64_t due_at_us;       /* its dueDate, business time */
    char *customer_name;     /* owned */
    char *customer_email;    /* owned, or NULL */
    uint32_t n_deposits;
    struct va_deposit *deposits; /* owned, in commit order */
    char *refund_bank, *refund_account, *refund_holder; /* owned: the refundReceiveAccount of
                                                           a cancel after the deposit, or NULL */
};

/* The transaction-key index of a virtual account's deposit event k is LEDGER_DEPOSIT_INDEX + k;
 * cancels use 0 .. LEDGER_DEPOSIT_INDEX - 1 and an approval -1 (ledger_tx_key). */
#define LEDGER_DEPOSIT_INDEX 500000
#define LEDGER_MAX_DEPOSITS 1000

struct payment {
    char *payment_key;       /* in the payment's own allocation; also the by-key map's key */
    char *order_id;          /* the same; also the by-order map's key */
    uint64_t id;             /* ledger sequence; seeds the derived fields (card no., keys) */
    int64_t amount;          /* totalAmount, KRW */
    int64_t balance;         /* balanceAmount, KRW */
    enum pay_status status;
    bool processing;         /* a confirm holds the claim (between claim and commit) */
    uint8_t charges;         /* approvals committed: the invariant is charges <= 1 */
    char *order_name;        /* owned; from a registered session, or NULL (a default is shown) */
    bool registered;         /* created by POST /__admin/sessions */
    int64_t requested_at_us; /* creation (first confirm's arrival, or the session's) */
    int64_t approved_at_us;  /* commit of the approval; 0 before */
    uint32_t confirm_attempts;
    uint32_t n_events;       /* status changes announced after the creation (store.c) */
    uint32_t n_cancels;
    struct payment_cancel *cancels; /* owned, n_cancels entries in commit order */
    uint32_t n_idem_keys;    /* at most LEDGER_MAX_IDEM_KEYS */
    uint32_t idem_keys_unlisted; /* confirms whose key was not among idem_keys, once it was full
                                    (saturates at UINT32_MAX) */
    uint32_t approve_tx;     /* the approval's row in ledger.txs, once charges > 0 */
    char **idem_keys;        /* owned: the first distinct Idempotency-Keys seen on this
                                payment's confirms, in order of arrival */
    struct payment_va *va;   /* owned: a virtual account's fields, or NULL for a card payment */
};

/* One row of GET /v1/transactions: an approval (cancel_index -1), a cancel (0 ..
 * LEDGER_DEPOSIT_INDEX - 1) or a virtual account's deposit event (LEDGER_DEPOSIT_INDEX + k). */
struct ledger_tx {
    struct payment *payment;
    int32_t cancel_index;    /* the transaction-key index (ledger_tx_key) */
    uint64_t seq;            /* commit order */
};

/* One entry of the due-date index: a virtual account and its due date. */
struct ledger_due {
    int64_t due_at_us;
    struct payment *payment;
};

struct ledger {
    struct strmap by_key;    /* payment_key -> payment */
    struct strmap by_order;  /* order_id -> payment (first payment to use the orderId) */
    struct payment **all;    /* creation order; ids consecutive from all[0]->id */
    size_t n_all, cap_all;
    struct ledger_tx *txs;   /* commit order; at most UINT32_MAX rows */
    size_t n_txs, cap_txs;
    uint64_t next_id, next_seq;
    uint64_t salt;           /* per-instance: makes derived keys unique across runs */
    struct ledger_due *due;  /* a min-heap by due date of virtual accounts that were waiting
                                for a deposit when pushed (entries gone stale are skipped) */
    size_t n_due, cap_due;
    size_t max_payments;     /* --max-payments: creations beyond it are refused (LEDGER_FULL);
                                0 = no bound. Set after ledger_init; a reset keeps it */
};

void ledger_init(struct ledger *l, uint64_t salt);
/* Free every payment and index. */
void ledger_fini(struct ledger *l);
/* Empty the ledger (POST /__admin/reset); keeps the salt and continues the id and commit
 * sequences, so derived keys (transaction keys, secret) never repeat across a reset. */
void ledger_reset(struct ledger *l);

/* Payment by paymentKey / by orderId (NUL-terminated), or NULL. Borrowed: valid until reset. */
struct payment *ledger_get(const struct ledger *l, const char *payment_key);
struct payment *ledger_get_by_order(const struct ledger *l, const char *order_id);

/* What ledger_create did. */
enum ledger_create_result {
    LEDGER_CREATED, LEDGER_KEY_EXISTS, LEDGER_ORDER_TAKEN, LEDGER_NO_MEMORY,
    LEDGER_FULL                  /* it holds max_payments already */
};

/* Create a payment IN_PROGRESS (copies the strings), indexed by its paymentKey and its orderId
 * (one probe walk per index). Returns it, or NULL -- the ledger unchanged -- when the
 * paymentKey exists, another payment holds the orderId, the ledger holds max_payments already,
 * or memory ran out; *why (if not NULL) says which. */
struct payment *ledger_create(struct ledger *l, const char *payment_key, const char *order_id,
                              int64_t amount, int64_t now_us, enum ledger_create_result *why);

/* Create a virtual account (docs/virtual-accounts.md §6.6): a payment as ledger_create makes
 * it, but WAITING_FOR_DEPOSIT, with `va`'s fields (taken on success: the caller allocated it
 * and its strings; left to the caller on failure) and `order_name` copied. Its account number
 * is derived here. Returns it, or NULL with *why as for ledger_create. */
struct payment *ledger_create_va(struct ledger *l, const char *payment_key, const char *order_id,
                                 int64_t amount, const char *order_name, struct payment_va *va,
                                 int64_t now_us, enum ledger_create_result *why);

/* Record a virtual account's deposit (error false: WAITING_FOR_DEPOSIT → DONE, approved_at set)
 * or deposit error (error true: DONE → WAITING_FOR_DEPOSIT), each with a transaction row. The
 * caller has checked the status. 0, or -1 on out of memory or at the bounds (unchanged). */
int ledger_deposit(struct ledger *l, struct payment *p, bool error, int64_t now_us);

/* Expire virtual account p if it is WAITING_FOR_DEPOSIT and its due date is over at now_us.
 * True if it is EXPIRED now (whether by this call or before). */
bool ledger_expire_va(struct payment *p, int64_t now_us);

/* The next virtual account that is WAITING_FOR_DEPOSIT with its due date over at now_us,
 * taken off the due-date index, or NULL when there is none: O(log n) per entry, so a sweep
 * costs nothing for accounts not yet due, however many payments the ledger holds. An account
 * is on the index from its creation and again from each deposit error; entries of accounts
 * that have moved on (deposited, canceled, expired) are dropped as they come up. now_us is
 * business time (µs since the Unix epoch). The payment is borrowed from the ledger; the caller
 * expires it (ledger_expire_va). Pure; the caller holds the store lock. */
struct payment *ledger_next_due(struct ledger *l, int64_t now_us);

/* Free a payment_va and its strings (NULL allowed). */
void ledger_va_free(struct payment_va *va);

/* Record an approval: status DONE, approved_at, charges++, a transaction row. Requires status
 * IN_PROGRESS. Returns 0, or -1 on out of memory or with UINT32_MAX rows (payment unchanged). */
int ledger_approve(struct ledger *l, struct payment *p, int64_t now_us);

/* Record a cancel of `amount` (1 <= amount <= balance; the caller has checked the rules of
 * docs/edge-rules.md §7): balance drops, status becomes CANCELED at 0 else PARTIAL_CANCELED, a
 * transaction row is added. `reason` is copied. Returns 0, or -1 on out of memory or at UINT32_MAX
 * rows (payment unchanged). */
int ledger_cancel(struct ledger *l, struct payment *p, int64_t amount, const char *reason,
                  int64_t now_us);

/* Expire `p` if it is IN_PROGRESS, not being processed, and older than ttl_us at now_us
 * (docs/api.md §2.1 sessions). Returns true if it is EXPIRED now (whether by this call or before).
 */
bool ledger_expire_if_stale(struct payment *p, int64_t now_us, int64_t ttl_us);

/* Index in l->txs of the transaction whose key is `tx_key` (NUL-terminated), or -1 when no row
 * has that key (keys of rows dropped by a reset included). O(1): the key's derivation is undone
 * to find the payment and the index, then checked by deriving the key again. */
long ledger_find_tx(const struct ledger *l, const char *tx_key);

/* When row `tx` was committed: its approval's, cancel's or deposit event's time (µs). */
int64_t ledger_tx_at_us(const struct ledger_tx *tx);

/* The Idempotency-Keys a payment lists (GET /__admin/payments `idempotency_keys`, docs/admin.md
 * §5): a client that makes up a key per attempt must not grow one payment without bound. */
#define LEDGER_MAX_IDEM_KEYS 10

/* Remember that `idem_key` was used on a confirm of `p`: added to p->idem_keys if new and the
 * list holds fewer than LEDGER_MAX_IDEM_KEYS, else (not in the full list) counted in
 * p->idem_keys_unlisted. O(LEDGER_MAX_IDEM_KEYS). 0, or -1 on out of memory (neither kept nor
 * counted). */
int ledger_note_idem_key(struct payment *p, const char *idem_key);

/* Transaction key of an approval (cancel_index < 0), of cancel `cancel_index`, or of deposit
 * event k (cancel_index LEDGER_DEPOSIT_INDEX + k): 32 upper-case
 * hex characters derived from (salt, payment id, index) into out[33]. */
void ledger_tx_key(const struct ledger *l, const struct payment *p, int32_t cancel_index,
                   char out[33]);

#endif
