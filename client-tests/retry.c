/* retry.c -- pure parts of the reference retry client (see retry.h). */
#define _POSIX_C_SOURCE 200809L
#include "retry.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- Random numbers ------------------------------------------------------------------------- */

void rc_rng_seed(rc_rng *r, uint64_t seed)
{
    r->s = seed ^ 0x9E3779B97F4A7C15ull;
}

uint64_t rc_rng_next(rc_rng *r)
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double rc_rng_uniform(rc_rng *r)
{
    return (double)(rc_rng_next(r) >> 11) * 0x1.0p-53;
}

double rc_rng_range(rc_rng *r, double lo, double hi)
{
    if (!(hi > lo))
        return lo;
    return lo + (hi - lo) * rc_rng_uniform(r);
}

double rc_rng_exponential(rc_rng *r, double mean)
{
    double u = rc_rng_uniform(r);
    return -mean * log1p(-u);
}

/* ---- Classification ------------------------------------------------------------------------- */

rc_class rc_classify(const rc_outcome *o)
{
    switch (o->transport) {
    case RC_T_TIMEOUT:
        return RC_C_TIMEOUT;
    case RC_T_CONN_ERROR:
        return RC_C_CONN;
    case RC_T_NOT_SENT:
        return RC_C_LOCAL;
    case RC_T_ANSWER:
        break;
    }
    long s = o->status;
    if (s >= 200 && s < 300)
        return RC_C_SUCCESS;
    if (s == 409 && o->code != NULL && strcmp(o->code, "IDEMPOTENT_REQUEST_PROCESSING") == 0)
        return RC_C_CONFLICT;
    if (s == 429)
        return RC_C_TOO_MANY;
    if (s >= 400 && s < 500)
        return RC_C_PERMANENT;
    if (s == 503)
        return RC_C_UNAVAILABLE;
    return RC_C_SERVER;
}

bool rc_is_retryable(const rc_outcome *o)
{
    return (rc_classify(o) & RC_RETRYABLE_DEFAULT) != 0;
}

bool rc_should_retry(const rc_outcome *o, unsigned mask)
{
    return rc_is_retryable(o) && ((unsigned)rc_classify(o) & mask) != 0;
}

rc_final rc_final_of(const rc_outcome *o)
{
    switch (rc_classify(o)) {
    case RC_C_SUCCESS:
        return RC_F_SUCCESS;
    case RC_C_PERMANENT:
    case RC_C_TOO_MANY:
    case RC_C_UNAVAILABLE:
    case RC_C_LOCAL:
        return RC_F_FAILED;
    case RC_C_CONFLICT:
    case RC_C_SERVER:
    case RC_C_TIMEOUT:
    case RC_C_CONN:
        return RC_F_UNKNOWN;
    }
    return RC_F_UNKNOWN;
}

rc_final rc_reconcile_verdict(long http_status, const char *payment_status)
{
    if (http_status == 200 && payment_status != NULL) {
        static const char *const ok[] = {"DONE", "CANCELED", "PARTIAL_CANCELED"};
        for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
            if (strcmp(payment_status, ok[i]) == 0)
                return RC_F_SUCCESS;
        return RC_F_FAILED; /* IN_PROGRESS after settling, READY, EXPIRED, ABORTED, ... */
    }
    if (http_status == 404)
        return RC_F_FAILED;
    return RC_F_UNKNOWN;
}

/* ---- Backoff -------------------------------------------------------------------------------- */

double rc_backoff_base_ms(const rc_backoff *b, int retry)
{
    if (retry < 1)
        retry = 1;
    double d;
    switch (b->kind) {
    case RC_BACKOFF_NONE:
        return 0;
    case RC_BACKOFF_FIXED:
        d = b->base_ms;
        break;
    case RC_BACKOFF_EXPONENTIAL: {
        double m = b->multiplier > 0 ? b->multiplier : 2.0;
        int e = retry - 1 > 1000 ? 1000 : retry - 1;
        d = b->base_ms * pow(m, (double)e);
        break;
    }
    default:
        return 0;
    }
    if (b->cap_ms > 0 && d > b->cap_ms)
        d = b->cap_ms;
    return d < 0 || !isfinite(d) ? (b->cap_ms > 0 ? b->cap_ms : 0) : d;
}

double rc_backoff_delay_ms(const rc_backoff *b, int retry, double prev_ms, rc_rng *rng)
{
    if (b->kind == RC_BACKOFF_NONE)
        return 0;
    double d = rc_backoff_base_ms(b, retry);
    switch (b->jitter) {
    case RC_JITTER_NONE:
        break;
    case RC_JITTER_FULL:
        d = rc_rng_range(rng, 0, d);
        break;
    case RC_JITTER_EQUAL:
        d = d / 2 + rc_rng_range(rng, 0, d / 2);
        break;
    case RC_JITTER_DECORRELATED: {
        double hi = (prev_ms > b->base_ms ? prev_ms : b->base_ms) * 3;
        d = rc_rng_range(rng, b->base_ms, hi);
        break;
    }
    case RC_JITTER_RANGE:
        d = d * rc_rng_range(rng, b->lo, b->hi);
        break;
    }
    if (b->cap_ms > 0 && d > b->cap_ms)
        d = b->cap_ms;
    return d > 0 ? d : 0;
}

/* ---- Retry-After ---------------------------------------------------------------------------- */

static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int month_of(const char *s)
{
    static const char *const names[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                        "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    for (int i = 0; i < 12; i++)
        if (strncmp(s, names[i], 3) == 0)
            return i + 1;
    return 0;
}

static int days_in_month(int64_t y, int m)
{
    static const int dm[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m == 2 && leap ? 29 : dm[m - 1];
}

/* Read exactly `n` digits. */
static bool digits(const char **p, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (!isdigit((unsigned char)(*p)[i]))
            return false;
        v = v * 10 + ((*p)[i] - '0');
    }
    *p += n;
    *out = v;
    return true;
}

static bool lit(const char **p, const char *s)
{
    size_t n = strlen(s);
    if (strncmp(*p, s, n) != 0)
        return false;
    *p += n;
    return true;
}

static bool hms(const char **p, int *h, int *mi, int *se)
{
    return digits(p, 2, h) && lit(p, ":") && digits(p, 2, mi) && lit(p, ":") && digits(p, 2, se);
}

int rc_parse_http_date(const char *s, time_t *out)
{
    static const char *const wkday[] = {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"};
    static const char *const weekday[] = {"Monday", "Tuesday", "Wednesday", "Thursday",
                                          "Friday", "Saturday", "Sunday"};
    const char *p = s;
    int day = 0, mon = 0, year = 0, h = 0, mi = 0, se = 0;
    bool ok = false;
    for (size_t i = 0; i < 7 && !ok; i++) {
        const char *q = p;
        if (lit(&q, wkday[i]) && lit(&q, ", ")) {
            /* IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT */
            if (!digits(&q, 2, &day) || !lit(&q, " ") || (mon = month_of(q)) == 0)
                return -1;
            q += 3;
            if (!lit(&q, " ") || !digits(&q, 4, &year) || !lit(&q, " ") ||
                !hms(&q, &h, &mi, &se) || !lit(&q, " GMT"))
                return -1;
            p = q;
            ok = true;
        } else if ((q = p, lit(&q, weekday[i])) && lit(&q, ", ")) {
            /* RFC 850: Sunday, 06-Nov-94 08:49:37 GMT */
            int yy;
            if (!digits(&q, 2, &day) || !lit(&q, "-") || (mon = month_of(q)) == 0)
                return -1;
            q += 3;
            if (!lit(&q, "-") || !digits(&q, 2, &yy) || !lit(&q, " ") ||
                !hms(&q, &h, &mi, &se) || !lit(&q, " GMT"))
                return -1;
            year = yy < 70 ? 2000 + yy : 1900 + yy; /* RFC 9110 7.1.1.1: 50-year rule, simplified */
            p = q;
            ok = true;
        } else if ((q = p, lit(&q, wkday[i])) && lit(&q, " ")) {
            /* asctime: Sun Nov  6 08:49:37 1994 */
            if ((mon = month_of(q)) == 0)
                return -1;
            q += 3;
            if (!lit(&q, " "))
                return -1;
            if (*q == ' ') {
                q++;
                if (!digits(&q, 1, &day))
                    return -1;
            } else if (!digits(&q, 2, &day)) {
                return -1;
            }
            if (!lit(&q, " ") || !hms(&q, &h, &mi, &se) || !lit(&q, " ") ||
                !digits(&q, 4, &year))
                return -1;
            p = q;
            ok = true;
        }
    }
    if (!ok || *p != '\0')
        return -1;
    if (day < 1 || day > days_in_month(year, mon) || h > 23 || mi > 59 || se > 60)
        return -1;
    int64_t t = days_from_civil(year, mon, day) * 86400 + h * 3600 + mi * 60 + se;
    *out = (time_t)t;
    return 0;
}

int rc_parse_retry_after(const char *value, time_t now, double *wait_s)
{
    if (value == NULL)
        return -1;
    while (*value == ' ' || *value == '\t')
        value++;
    size_t n = strlen(value);
    while (n > 0 && (value[n - 1] == ' ' || value[n - 1] == '\t'))
        n--;
    if (n == 0 || n >= 64)
        return -1;
    char buf[64];
    memcpy(buf, value, n);
    buf[n] = '\0';
    if (isdigit((unsigned char)buf[0])) {
        double v = 0;
        for (size_t i = 0; i < n; i++) {
            if (!isdigit((unsigned char)buf[i]))
                return -1;
            v = v * 10 + (buf[i] - '0');
        }
        if (v > 2147483647.0)
            v = 2147483647.0; /* RFC 9110: treat an overflow as a very long time */
        *wait_s = v;
        return 0;
    }
    time_t t;
    if (rc_parse_http_date(buf, &t) != 0)
        return -1;
    double d = difftime(t, now);
    *wait_s = d > 0 ? d : 0;
    return 0;
}

double rc_delay_with_retry_after(double backoff_ms, double retry_after_ms, double cap_ms)
{
    double d = backoff_ms;
    if (retry_after_ms >= 0) {
        double ra = retry_after_ms;
        if (cap_ms > 0 && ra > cap_ms)
            ra = cap_ms;
        if (ra > d)
            d = ra;
    }
    return d;
}

/* ---- Semaphore ------------------------------------------------------------------------------ */

void rc_sem_init(rc_sem *s, int capacity)
{
    memset(s, 0, sizeof *s);
    s->capacity = capacity;
}

int rc_sem_free_slots(const rc_sem *s)
{
    return s->capacity - s->used;
}

bool rc_sem_try_acquire(rc_sem *s)
{
    if (s->used >= s->capacity) {
        s->rejected++;
        return false;
    }
    s->used++;
    return true;
}

rc_acquire rc_sem_try_acquire_resend(rc_sem *s, int min_free)
{
    int free_slots = rc_sem_free_slots(s);
    if (min_free > 1 && free_slots < min_free) {
        s->resends_skipped++;
        return RC_ACQ_BUDGET;
    }
    if (free_slots <= 0) {
        s->rejected++;
        return RC_ACQ_NO_SLOT;
    }
    s->used++;
    return RC_ACQ_OK;
}

void rc_sem_release(rc_sem *s)
{
    if (s->used > 0)
        s->used--;
}

/* ---- Breaker -------------------------------------------------------------------------------- */

void rc_breaker_init(rc_breaker *b, int failures, double window_ms, double open_ms)
{
    memset(b, 0, sizeof *b);
    if (failures < 1)
        failures = 1;
    if (failures > RC_BREAKER_MAX_FAILURES)
        failures = RC_BREAKER_MAX_FAILURES;
    b->failures = failures;
    b->window_ms = window_ms;
    b->open_ms = open_ms;
    b->state = RC_BRK_CLOSED;
}

static void breaker_open(rc_breaker *b, double now_ms)
{
    b->state = RC_BRK_OPEN;
    b->opened_at_ms = now_ms;
    b->probe_in_flight = false;
    b->count = 0;
    b->head = 0;
    b->opens++;
}

rc_breaker_verdict rc_breaker_allow(rc_breaker *b, double now_ms)
{
    switch (b->state) {
    case RC_BRK_CLOSED:
        return RC_BRK_ALLOW;
    case RC_BRK_OPEN:
        if (now_ms - b->opened_at_ms < b->open_ms) {
            b->rejected++;
            return RC_BRK_REJECT;
        }
        b->state = RC_BRK_HALF_OPEN;
        b->probe_in_flight = false;
        /* fall through */
    case RC_BRK_HALF_OPEN:
        if (b->probe_in_flight) {
            b->rejected++;
            return RC_BRK_REJECT;
        }
        b->probe_in_flight = true;
        b->probes++;
        return RC_BRK_PROBE;
    }
    return RC_BRK_REJECT;
}

void rc_breaker_record(rc_breaker *b, double now_ms, bool success, bool probe)
{
    if (probe) {
        if (b->state != RC_BRK_HALF_OPEN)
            return;
        if (success) {
            b->state = RC_BRK_CLOSED;
            b->probe_in_flight = false;
            b->count = 0;
            b->head = 0;
        } else {
            breaker_open(b, now_ms);
        }
        return;
    }
    if (b->state != RC_BRK_CLOSED || success)
        return;
    /* drop failures older than the window, then add this one */
    while (b->count > 0) {
        int oldest = (b->head - b->count + RC_BREAKER_MAX_FAILURES) % RC_BREAKER_MAX_FAILURES;
        if (now_ms - b->fail_at[oldest] <= b->window_ms)
            break;
        b->count--;
    }
    b->fail_at[b->head] = now_ms;
    b->head = (b->head + 1) % RC_BREAKER_MAX_FAILURES;
    if (b->count < RC_BREAKER_MAX_FAILURES)
        b->count++;
    if (b->count >= b->failures)
        breaker_open(b, now_ms);
}

bool rc_breaker_counts_failure(const rc_outcome *o)
{
    rc_class c = rc_classify(o);
    return (c & (RC_C_TIMEOUT | RC_C_CONN | RC_C_UNAVAILABLE | RC_C_SERVER)) != 0;
}

const char *rc_breaker_state_name(rc_breaker_state s)
{
    switch (s) {
    case RC_BRK_CLOSED:
        return "closed";
    case RC_BRK_OPEN:
        return "open";
    case RC_BRK_HALF_OPEN:
        return "half-open";
    }
    return "?";
}

/* ---- Statistics ----------------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double rc_quantile(double *v, size_t n, double p)
{
    if (n == 0)
        return 0;
    qsort(v, n, sizeof *v, cmp_double);
    if (p <= 0)
        return v[0];
    if (p >= 1)
        return v[n - 1];
    size_t rank = (size_t)ceil(p * (double)n);
    if (rank < 1)
        rank = 1;
    return v[rank - 1];
}
