/* toss_errors.h -- the error-code table: code → HTTP status and Korean/English message
 * (docs/api.md §2.4). The table is data in toss_errors.c, the one place a code's status or wording
 * is defined. */
#ifndef FAKEGATE_TOSS_ERRORS_H
#define FAKEGATE_TOSS_ERRORS_H

#include <stddef.h>

struct toss_error {
    const char *code;   /* e.g. "ALREADY_PROCESSED_PAYMENT" */
    int status;         /* HTTP status */
    const char *ko;     /* message as Toss sends it (default) */
    const char *en;     /* message for Accept-Language: en-US */
};

/* The entry for `code` (exact, NUL-terminated), or NULL if the table has none.
 * Borrowed: static storage. Thread: any. */
const struct toss_error *toss_error_find(const char *code);

/* The whole table, for listing (README, tests). *n receives the entry count. */
const struct toss_error *toss_error_table(size_t *n);

#endif
