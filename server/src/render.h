/* render.h -- the JSON bodies fakegate sends: the Toss Payment object (docs/api.md §2.3) and
 * {code, message} errors. Rendering is a pure function of the ledger's data and the view, so a
 * stored success re-renders byte-identically for a replay. Written into a buf as a template
 * (constant runs and hand-formatted numbers), not with jansson or printf: this is the hot path. */
#ifndef FAKEGATE_RENDER_H
#define FAKEGATE_RENDER_H

#include <stdbool.h>
#include <stdint.h>

#include "buf.h"
#include "ledger.h"

/* The Payment of `p` as it was after its first `view_cancels` cancels with status
 * `view_status` (for the current state pass p->n_cancels and p->status). `mid` is the
 * merchant id (--mid). Reads `l` for transaction keys. Caller holds the store lock. */
void render_payment(struct buf *b, const struct ledger *l, const char *mid,
                    const struct payment *p, uint32_t view_cancels, enum pay_status view_status);

/* render_payment, for a virtual account also as it was after its first `view_deposits` deposit
 * events (docs/virtual-accounts.md §6.6): method 가상계좌, a virtualAccount object, approvedAt
 * and lastTransactionKey of the view's deposit. render_payment passes all of them. */
void render_payment_at(struct buf *b, const struct ledger *l, const char *mid,
                       const struct payment *p, uint32_t view_cancels, uint32_t view_deposits,
                       enum pay_status view_status);

/* The payment's `secret` (docs/webhooks.md §6.1): "ps_" + 24 characters derived from the
 * payment's id and the ledger's salt, into out[28]. */
void render_secret(const struct ledger *l, const struct payment *p, char out[28]);

/* The transactionKey a view of p names last (its newest cancel, else for a virtual account its
 * newest deposit event, else its approval) into out[33]; false (out "") when it has none. */
bool render_last_tx(const struct ledger *l, const struct payment *p, uint32_t view_cancels,
                    uint32_t view_deposits, enum pay_status view_status, char out[33]);

/* One row of GET /v1/transactions (docs/api.md §2.2, docs/edge-rules.md §7): an approval has status
 * DONE and the payment's total; a cancel has its cancelAmount and the payment's status after it. */
void render_transaction(struct buf *b, const struct ledger *l, const char *mid,
                        const struct ledger_tx *tx);

/* {"code":"...","message":"..."}; message is escaped. */
void render_error(struct buf *b, const char *code, const char *message);

#endif
