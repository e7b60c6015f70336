/* report.h -- what the client under test did wrong, judged from the journal (docs/admin.md §5
 * GET /__admin/report). Pure: a function of the journal entries. */
#ifndef FAKEGATE_REPORT_H
#define FAKEGATE_REPORT_H

#include <stddef.h>

#include "buf.h"
#include "journal.h"

/* Render {"findings":[{"kind","rule","threshold","count","examples":[orderId...]}]} for the
 * entries v[0..n) (oldest first), one finding per kind that occurred, up to 10 examples each:
 * retried_4xx, early_retry, new_key_resend, key_reuse, synchronized_retries, retry_storm. */
void report_render(struct buf *b, const struct journal_entry *v, size_t n);

#endif
