/* idem.h -- idempotency records: claim / complete / release / replay (docs/idempotency.md §3).
 * A record is keyed by its scope (secret key, Idempotency-Key, method, path) and is PROCESSING
 * from the claim until its owner completes it (DONE, holding the exact response) or releases
 * it (deleted). Only the owner may complete or release. Every record is also on a list in claim
 * order, which is expiry order (one TTL for all), so idem_sweep frees expired records oldest
 * first without looking at live ones. Pure data, no lock: the gateway's store lock guards every
 * call, so for one scope at most one request ever holds the claim. */
#ifndef FAKEGATE_IDEM_H
#define FAKEGATE_IDEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "strmap.h"

struct payment;

enum idem_state { IDEM_PROCESSING = 0, IDEM_DONE };

/* What a DONE record replays. A payment success is kept as a view of the ledger (payment plus
 * how many cancels it had and the status then) and re-rendered byte-identically, so a record
 * costs ~100 bytes instead of a ~1.5 KiB body; anything else is kept as bytes. */
struct idem_response {
    int status;                  /* HTTP status */
    struct payment *payment;     /* non-NULL: a Payment view */
    uint32_t view_cancels;       /* cancels included in the view */
    uint8_t view_status;         /* enum pay_status of the view */
    uint32_t view_deposits;      /* a virtual account's deposit events included in the view */
    bool en;                     /* rendered in English (Accept-Language: en-US) */
    char *body;                  /* owned, when payment == NULL */
    size_t body_len;
};

struct idem_record {
    char *scope;                 /* owned; the map's key */
    size_t scope_len;
    enum idem_state state;
    const void *owner;           /* the request holding the claim (PROCESSING only) */
    uint64_t owner_instance;     /* --store redis://: the instance whose claim the log holds,
                                    for a claim replayed from the log (0: none named) */
    int64_t expires_ns;          /* business time (the gateway clock), ns since the epoch */
    uint64_t body_hash;          /* hash of the first request's canonical body */
    struct idem_response resp;   /* DONE only */
    struct idem_record *older, *newer; /* the expiry list (claim order) */
};

struct idem_store {
    struct strmap map;
    int64_t ttl_ns;
    struct idem_record *oldest, *newest; /* the expiry list's ends, NULL when empty */
    size_t max_records;          /* --max-idempotency-records: claims beyond it are refused;
                                    0 = no bound (set after idem_init) */
};

/* Build the scope key into out (caller frees): the four parts joined by NUL bytes.
 * Returns NULL on out of memory; *len receives the length. */
char *idem_scope(const char *secret_key, const char *idem_key, const char *method,
                 const char *path, size_t *len);

void idem_init(struct idem_store *s, int64_t ttl_ns);
void idem_fini(struct idem_store *s);
/* Drop every record (POST /__admin/reset). */
void idem_reset(struct idem_store *s);

/* The live record for `scope`, or NULL; an expired record is deleted here and NULL returned.
 * Borrowed: valid until released or reset. */
struct idem_record *idem_lookup(struct idem_store *s, const char *scope, size_t len,
                                int64_t now_ns);

/* The record for `scope` whatever its state and expiry, or NULL: no record is deleted (the
 * state file's replay finds the record a logged claim made). Borrowed. */
struct idem_record *idem_get(struct idem_store *s, const char *scope, size_t len);
/* Create a PROCESSING record owned by `owner`. Requires that no live record exists (call
 * idem_lookup first, under the same lock). Returns NULL on out of memory, or when the store
 * already holds max_records (call idem_room first to tell the two apart). */
struct idem_record *idem_claim(struct idem_store *s, const char *scope, size_t len,
                               const void *owner, uint64_t body_hash, int64_t now_ns);

/* Mark `rec` DONE with `resp` (ownership of resp->body passes to the record). Returns 0, or -1
 * if `owner` does not hold the claim (the record is then unchanged and resp->body still the
 * caller's). */
int idem_complete(struct idem_record *rec, const void *owner, struct idem_response *resp);

/* Delete `rec` if `owner` holds its claim (the gateway never processed the request, so a
 * resend runs again). Returns 0, or -1 if not the owner. */
int idem_release(struct idem_store *s, struct idem_record *rec, const void *owner);

/* Number of live records (expired ones not yet swept included). */
size_t idem_count(const struct idem_store *s);

/* Delete the DONE records expired at now_ns, oldest first, looking at `budget` records at most,
 * and stop at the first one not yet expired: the cost is the expired records, never the live
 * ones. An expired record still PROCESSING cannot go (its owner will complete or release it):
 * it is moved to the newest end, and freed by a later sweep or lookup once it is DONE. Returns
 * how many were deleted; *more (if not NULL) is set when the budget ran out first. */
size_t idem_sweep(struct idem_store *s, int64_t now_ns, size_t budget, bool *more);

/* May a new record be claimed at now_ns (fewer than max_records held)? At the bound it first
 * sweeps a few expired records (idem_sweep), so an expired record never blocks a new one.
 * Thread: the caller's, under the store lock. */
bool idem_room(struct idem_store *s, int64_t now_ns);

#endif
