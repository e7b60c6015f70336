/* retry.h -- the pure parts of a reference retry client for a Toss-like payment gateway:
 * classification, backoff and jitter, Retry-After parsing, a concurrency cap with a resend
 * budget, a circuit breaker and the reconciler's verdict. Nothing here opens a socket or reads a
 * clock: every function that needs "now" takes it as an argument, so each piece is unit-tested
 * on its own (client-tests/tests/check_retry_lib.c). loadgen.h puts them together over libcurl.
 *
 * Rules the reference clients follow (issue 6):
 *  - never retry a 4xx, except 409 IDEMPOTENT_REQUEST_PROCESSING and 429;
 *  - retry timeouts, connection errors and 5xx;
 *  - a confirm that got no answer is UNKNOWN, never failed: a reconciler reads
 *    GET /v1/payments/orders/{orderId} once the run has settled;
 *  - a resend carries the same Idempotency-Key (one key per logical payment, never regenerated). */
#ifndef FAKEGATE_RETRY_H
#define FAKEGATE_RETRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* ---- Random numbers (seeded, reproducible) ------------------------------------------------- */

typedef struct rc_rng {
    uint64_t s;
} rc_rng;

void rc_rng_seed(rc_rng *r, uint64_t seed);
uint64_t rc_rng_next(rc_rng *r);         /* splitmix64 */
double rc_rng_uniform(rc_rng *r);        /* [0, 1) */
double rc_rng_range(rc_rng *r, double lo, double hi); /* [lo, hi) (lo when hi <= lo) */
double rc_rng_exponential(rc_rng *r, double mean);

/* ---- Classification ------------------------------------------------------------------------- */

/* What one attempt came back with, as the transport saw it. */
typedef enum rc_transport {
    RC_T_ANSWER = 0,   /* an HTTP response was received (see status) */
    RC_T_TIMEOUT,      /* the per-call timeout expired before a complete answer */
    RC_T_CONN_ERROR,   /* refused, reset, empty reply, truncated: no usable answer */
    RC_T_NOT_SENT      /* rejected on our side (cap, breaker): the gateway never saw it */
} rc_transport;

typedef struct rc_outcome {
    rc_transport transport;
    long status;        /* HTTP status when transport == RC_T_ANSWER */
    const char *code;   /* Toss error "code" of the body, or NULL */
} rc_outcome;

/* Coarse classes, used as a bit mask in retry policies (rc_policy.retry_on). */
typedef enum rc_class {
    RC_C_SUCCESS = 1 << 0,     /* 2xx */
    RC_C_PERMANENT = 1 << 1,   /* 4xx other than the two below: never retried */
    RC_C_CONFLICT = 1 << 2,    /* 409 IDEMPOTENT_REQUEST_PROCESSING: the first attempt runs */
    RC_C_TOO_MANY = 1 << 3,    /* 429 */
    RC_C_UNAVAILABLE = 1 << 4, /* 503 */
    RC_C_SERVER = 1 << 5,      /* any other 5xx (and 1xx/3xx, which a gateway never sends) */
    RC_C_TIMEOUT = 1 << 6,
    RC_C_CONN = 1 << 7,
    RC_C_LOCAL = 1 << 8        /* not sent (cap or breaker) */
} rc_class;

/* Everything the issue calls retryable: timeouts, connection errors, 5xx, 429 and the 409. */
#define RC_RETRYABLE_DEFAULT                                                                  \
    (RC_C_CONFLICT | RC_C_TOO_MANY | RC_C_UNAVAILABLE | RC_C_SERVER | RC_C_TIMEOUT | RC_C_CONN)

rc_class rc_classify(const rc_outcome *o);

/* true when the class may be retried at all (the fixed rule); a policy can narrow it with a
 * mask: rc_should_retry(o, mask) == rc_is_retryable(o) && (rc_classify(o) & mask). */
bool rc_is_retryable(const rc_outcome *o);
bool rc_should_retry(const rc_outcome *o, unsigned mask);

/* The final state of a logical confirm whose last attempt came back as `o`. */
typedef enum rc_final {
    RC_F_SUCCESS = 0,
    RC_F_FAILED,    /* certainly not charged: a 4xx decline, a 503/429 refusal, a local reject */
    RC_F_UNKNOWN    /* may or may not be charged: no answer, a 409, any other 5xx */
} rc_final;

rc_final rc_final_of(const rc_outcome *o);

/* The reconciler's verdict from GET /v1/payments/orders/{orderId} after the run settled:
 * http_status and the Payment's "status" (or NULL) / the error "code" (or NULL).
 * 200 DONE (and the cancel states, which imply an approval) -> success; 200 IN_PROGRESS,
 * READY, EXPIRED, ABORTED, 404 (NOT_FOUND_PAYMENT, NOT_FOUND_PAYMENT_SESSION) -> failed;
 * anything else (5xx, no answer) -> still unknown (read again later). */
rc_final rc_reconcile_verdict(long http_status, const char *payment_status);

/* ---- Backoff and jitter --------------------------------------------------------------------- */

typedef enum rc_backoff_kind {
    RC_BACKOFF_NONE = 0,   /* retry at once */
    RC_BACKOFF_FIXED,      /* base_ms every time */
    RC_BACKOFF_EXPONENTIAL /* base_ms * multiplier^(retry-1), at most cap_ms */
} rc_backoff_kind;

typedef enum rc_jitter {
    RC_JITTER_NONE = 0,
    RC_JITTER_FULL,        /* U(0, d) */
    RC_JITTER_EQUAL,       /* d/2 + U(0, d/2), i.e. d * U(0.5, 1) */
    RC_JITTER_DECORRELATED,/* min(cap, U(base, 3 * previous delay)) -- AWS's name */
    RC_JITTER_RANGE        /* d * U(lo, hi) (e.g. 0.5..1.5: "40 ms +- 50 %") */
} rc_jitter;

typedef struct rc_backoff {
    rc_backoff_kind kind;
    double base_ms;
    double cap_ms;          /* 0: no cap */
    double multiplier;      /* 0: 2 */
    rc_jitter jitter;
    double lo, hi;          /* RC_JITTER_RANGE factors */
} rc_backoff;

/* The un-jittered delay before retry number `retry` (1 = the first retry). */
double rc_backoff_base_ms(const rc_backoff *b, int retry);

/* The delay before retry number `retry`; `prev_ms` is the previous delay (decorrelated jitter
 * only; pass 0 before the first retry). Always >= 0 and <= cap_ms when a cap is set. */
double rc_backoff_delay_ms(const rc_backoff *b, int retry, double prev_ms, rc_rng *rng);

/* ---- Retry-After ---------------------------------------------------------------------------- */

/* Parse a Retry-After value: delta-seconds (1*DIGIT, optional surrounding blanks) or an
 * HTTP-date (IMF-fixdate "Sun, 06 Nov 1994 08:49:37 GMT", and the obsolete RFC 850 and asctime
 * forms). `now` is the current Unix time. On success stores the wait in seconds (a date in the
 * past waits 0) and returns 0; returns -1 for anything else ("-1", "1.5", "", garbage), which a
 * client must ignore (fall back to its own backoff). */
int rc_parse_retry_after(const char *value, time_t now, double *wait_s);

/* Parse an HTTP-date into Unix time. Returns 0 or -1. */
int rc_parse_http_date(const char *s, time_t *out);

/* The delay to use before a retry when the answer carried Retry-After: at least the backoff's
 * delay, at least Retry-After (in ms, as scaled by the caller) but never more than cap_ms
 * (cap_ms <= 0: no cap). retry_after_ms < 0 means "no usable header". */
double rc_delay_with_retry_after(double backoff_ms, double retry_after_ms, double cap_ms);

/* ---- Concurrency cap with a resend budget (a counting semaphore, never blocks) -------------- */

typedef struct rc_sem {
    int capacity;
    int used;
    long rejected;          /* acquisitions refused: no slot at all */
    long resends_skipped;   /* resends not sent because fewer than min_free slots were free */
} rc_sem;

void rc_sem_init(rc_sem *s, int capacity);
int rc_sem_free_slots(const rc_sem *s);
/* Take a slot for a first attempt; false (and rejected++) if none is free. */
bool rc_sem_try_acquire(rc_sem *s);

typedef enum rc_acquire {
    RC_ACQ_OK = 0,
    RC_ACQ_NO_SLOT,    /* no budget set and no slot at all (counted in rejected) */
    RC_ACQ_BUDGET      /* a budget is set and fewer than min_free slots are free, none
                          included (counted in resends_skipped) */
} rc_acquire;

/* Take a slot for a resend only if at least `min_free` slots are free before taking it. The
 * budget is checked first, so with min_free > 1 every resend not sent for lack of slots is a
 * skip (the field report's counter); min_free <= 1 behaves like rc_sem_try_acquire. */
rc_acquire rc_sem_try_acquire_resend(rc_sem *s, int min_free);
void rc_sem_release(rc_sem *s);

/* ---- Circuit breaker ------------------------------------------------------------------------ */

typedef enum rc_breaker_state {
    RC_BRK_CLOSED = 0,
    RC_BRK_OPEN,
    RC_BRK_HALF_OPEN
} rc_breaker_state;

typedef enum rc_breaker_verdict {
    RC_BRK_ALLOW = 0,  /* closed: go */
    RC_BRK_PROBE,      /* half-open: this call is the single probe; report it with probe=true */
    RC_BRK_REJECT      /* open, or half-open with the probe in flight: fail fast */
} rc_breaker_verdict;

#define RC_BREAKER_MAX_FAILURES 1024

/* Opens after `failures` failures within `window_ms`, stays open `open_ms`, then lets one probe
 * through: its success closes the breaker, its failure reopens it for another open_ms. Results of
 * calls that were let through before the breaker opened are ignored while it is not closed. */
typedef struct rc_breaker {
    int failures;           /* F, 1..RC_BREAKER_MAX_FAILURES */
    double window_ms;       /* W */
    double open_ms;         /* D */
    rc_breaker_state state;
    double opened_at_ms;
    bool probe_in_flight;
    double fail_at[RC_BREAKER_MAX_FAILURES]; /* ring of recent failure times */
    int head, count;
    long opens;             /* times it opened (including reopen after a failed probe) */
    long rejected;          /* calls refused while open / half-open */
    long probes;
} rc_breaker;

void rc_breaker_init(rc_breaker *b, int failures, double window_ms, double open_ms);
rc_breaker_verdict rc_breaker_allow(rc_breaker *b, double now_ms);
void rc_breaker_record(rc_breaker *b, double now_ms, bool success, bool probe);
/* What a breaker should count as a failure: timeouts, connection errors and 5xx. */
bool rc_breaker_counts_failure(const rc_outcome *o);
const char *rc_breaker_state_name(rc_breaker_state s);

/* ---- Small statistics ----------------------------------------------------------------------- */

/* The p-quantile (0..1) of n values by nearest rank; sorts `v` in place. 0 when n == 0. */
double rc_quantile(double *v, size_t n, double p);

#endif
