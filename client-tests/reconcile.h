/* reconcile.h -- two consumers of received webhooks (docs/webhooks.md §6.3), each keeping a local
 * orders table, for experiment E4 and for users to copy the second one:
 *   naive      trusts the arrival order and the body: keyed on orderId, table[orderId].status =
 *              data.status (the last one wins), and one side effect ("ship the order") per DONE
 *              it sees, so a duplicate ships twice and a late DONE undoes a cancel;
 *   reference  drops a transmission id it has already seen (acknowledged, ignored), keys on
 *              paymentKey, reads the payment back (GET /v1/payments/{paymentKey}) instead of
 *              trusting the body's status, applies the side effect once per paymentKey when a
 *              read shows the payment approved, and at the end polls every payment of its order
 *              list that no webhook named (a dropped delivery): a reconciler.
 * Single-threaded: a table and a consumer belong to the thread that feeds it. */
#ifndef FAKEGATE_CT_RECONCILE_H
#define FAKEGATE_CT_RECONCILE_H

#include <stdbool.h>
#include <stddef.h>

#include <curl/curl.h>
#include <jansson.h>

#include "receiver.h"

#define RCN_ORDER_ID_LEN 65     /* Toss: orderId is 6-64 characters */
#define RCN_PAYMENT_KEY_LEN 201 /* docs/api.md §2.1: 1-200 characters */
#define RCN_STATUS_LEN 24

/* One row of a consumer's orders table. */
typedef struct rcn_order {
    char order_id[RCN_ORDER_ID_LEN];
    char payment_key[RCN_PAYMENT_KEY_LEN];
    char status[RCN_STATUS_LEN];  /* what the consumer believes the payment's status is */
    int side_effects;             /* times the approval's side effect ran (should be 0 or 1) */
    bool polled;                  /* reference: no webhook named it; the reconciler read it */
} rcn_order;

typedef struct rcn_table {
    rcn_order *rows;
    size_t n, cap;
} rcn_table;

/* A payment the merchant created: its own order list, what the reconciler polls. */
typedef struct rcn_known {
    const char *order_id;
    const char *payment_key;
} rcn_known;

void rcn_table_init(rcn_table *t);
void rcn_table_fini(rcn_table *t);

/* The row for orderId / paymentKey, or NULL. Borrowed: valid until the table next grows. */
const rcn_order *rcn_by_order_id(const rcn_table *t, const char *order_id);
const rcn_order *rcn_by_payment_key(const rcn_table *t, const char *payment_key);

/* A Payment that was approved at some point: DONE, PARTIAL_CANCELED, or CANCELED with an
 * approvedAt (a cancel of an approved payment still moved money once). */
bool rcn_approved(const json_t *payment);

/* Transmission ids already handled, for a consumer's dedupe (a linear set: tests feed
 * hundreds, not millions). */
typedef struct rcn_seen {
    char **ids;
    size_t n, cap;
} rcn_seen;

bool rcn_seen_has(const rcn_seen *s, const char *id);
/* Remember a copy of `id` (out of memory: forgotten, so a retry is handled again). */
void rcn_seen_add(rcn_seen *s, const char *id);
void rcn_seen_fini(rcn_seen *s);

/* GET `url` with `auth_header` on `h` (reset first): the Payment it answers with 200 (caller
 * owns it), or NULL (another status, no JSON Payment, a transport error; 10 s timeout). */
json_t *rcn_get_payment(CURL *h, const char *url, const char *auth_header);

/* --- naive --------------------------------------------------------------------------------- */

/* Apply one delivery as received: status from the body, keyed on data.orderId; a DONE runs the
 * side effect. A body that is not a PAYMENT_STATUS_CHANGED with data.orderId is ignored.
 * Returns the status the receiver should answer (always 200: it never fails). */
int rcn_naive_on_webhook(rcn_table *t, const struct rx_request *d);

/* --- reference ----------------------------------------------------------------------------- */

typedef struct rcn_ref {
    rcn_table orders;             /* keyed on paymentKey */
    rcn_seen seen;                /* transmission ids already processed */
    const char *base_url;         /* "http://127.0.0.1:PORT" (borrowed) */
    const char *auth_header;      /* "Authorization: Basic base64(secretKey:)" (borrowed) */
    CURL *h;
    long read_backs;              /* GET /v1/payments/{paymentKey} sent */
    long duplicates_ignored;      /* deliveries whose transmission id was already processed */
    long read_failures;           /* reads that gave no Payment (the delivery was refused) */
} rcn_ref;

/* `base_url` and `auth_header` are borrowed for the consumer's life. 0, or -1 (no curl). */
int rcn_ref_init(rcn_ref *r, const char *base_url, const char *auth_header);
void rcn_ref_fini(rcn_ref *r);

/* Handle one delivery: an already-seen transmission id → 200, nothing else; otherwise read the
 * payment named by data.paymentKey back and store what the read says. Returns the status to
 * answer: 200, or 500 when the read failed (the id is not marked seen, so the gateway's retry
 * is processed). A body without data.paymentKey is acknowledged (200) and ignored. */
int rcn_ref_on_webhook(rcn_ref *r, const struct rx_request *d);

/* The reconciler: read every payment of `orders` that no webhook named. Returns the number of
 * reads that failed (0: the table has every payment). */
long rcn_ref_reconcile(rcn_ref *r, const rcn_known *orders, size_t n);

#endif
