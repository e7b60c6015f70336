/* deposit.h -- a reference handler for virtual-account webhooks (docs/virtual-accounts.md §6.6),
 * for the tests and for users to copy. The merchant keeps an order book of the accounts it
 * issued (orderId, paymentKey, the Payment's `secret`, the amount); the handler then, for every
 * delivery it receives:
 *   - drops a transmission id it has already processed (a duplicate: acknowledged, ignored);
 *   - trusts a DEPOSIT_CALLBACK (a flat body: no eventType, no paymentKey) only when its
 *     orderId is in the book and its `secret` equals the one stored at issue -- anything else
 *     is forged or misrouted, acknowledged and ignored;
 *   - never acts on a body's status: it reads the payment back (GET
 *     /v1/payments/orders/{orderId}) and applies what the read says: DONE runs the order's side
 *     effect ("ship it") once, a deposit error (WAITING_FOR_DEPOSIT again after DONE) undoes it,
 *     EXPIRED and CANCELED close the order;
 *   - and at the end a reconciler reads every order still waiting, since a dropped callback or
 *     a due date passing (which sends no DEPOSIT_CALLBACK [Toss]) may be all that happened.
 * Invariant: an order's `status` is only ever what a read returned, and `shipped` is true
 * exactly when the last read said DONE. Single-threaded: a handler belongs to the thread that
 * feeds it. */
#ifndef FAKEGATE_CT_DEPOSIT_H
#define FAKEGATE_CT_DEPOSIT_H

#include <stdbool.h>
#include <stddef.h>

#include <curl/curl.h>

#include "receiver.h"
#include "reconcile.h"

#define DEP_ORDER_ID_LEN 65     /* Toss: orderId is 6-64 characters */
#define DEP_PAYMENT_KEY_LEN 201 /* docs/api.md §2.1: 1-200 characters */
#define DEP_SECRET_LEN 64
#define DEP_STATUS_LEN 24

/* One issued virtual account, as the merchant stored it. */
typedef struct dep_order {
    char order_id[DEP_ORDER_ID_LEN];
    char payment_key[DEP_PAYMENT_KEY_LEN];
    char secret[DEP_SECRET_LEN];
    long long amount;
    char status[DEP_STATUS_LEN]; /* the last read's; "WAITING_FOR_DEPOSIT" at issue */
    bool shipped;                /* the side effect is in force */
    int shipments;               /* times it ran (a deposit error and a new deposit: twice) */
    int reversals;               /* times a deposit error undid it */
    bool polled;                 /* the reconciler read it */
} dep_order;

typedef struct dep_handler {
    dep_order *orders;
    size_t n, cap;
    rcn_seen seen;               /* transmission ids processed */
    const char *base_url;        /* "http://127.0.0.1:PORT" (borrowed) */
    const char *auth_header;     /* "Authorization: Basic base64(secretKey:)" (borrowed) */
    CURL *h;
    long callbacks;              /* DEPOSIT_CALLBACKs trusted and handled */
    long status_changes;         /* PAYMENT_STATUS_CHANGEDs of a book's order handled */
    long duplicates_ignored;     /* deliveries whose transmission id was already processed */
    long forged;                 /* DEPOSIT_CALLBACKs refused: unknown orderId or wrong secret */
    long read_backs;             /* GET /v1/payments/orders/{orderId} sent */
    long read_failures;          /* reads that gave no Payment (the delivery was refused) */
} dep_handler;

/* `base_url` and `auth_header` are borrowed for the handler's life. 0, or -1 (no curl). */
int dep_init(dep_handler *d, const char *base_url, const char *auth_header);
void dep_fini(dep_handler *d);

/* Store an account the merchant issued: `payment` is the answer body (a Payment with
 * orderId, paymentKey, secret, totalAmount). 0, or -1 when a field is missing or memory ran
 * out. */
int dep_book_add(dep_handler *d, const char *payment_json);

/* The book's order, or NULL. Borrowed: valid until the book next grows. */
const dep_order *dep_order_of(const dep_handler *d, const char *order_id);

/* Handle one delivery. Returns the status to answer: 200 (handled, a duplicate, forged, or not
 * about a book's order), or 500 when the read-back failed (the id is not marked seen, so the
 * gateway's retry is processed). */
int dep_on_webhook(dep_handler *d, const struct rx_request *q);

/* The reconciler: read every order whose last read said WAITING_FOR_DEPOSIT. Returns the
 * number of reads that failed (0: the book agrees with the gateway). */
long dep_reconcile(dep_handler *d);

#endif
