/* fuzz_query.c -- query strings (the bytes after '?', cut at a NUL): request_query's
 * percent-decoding (request.c), the startDate/endDate of GET /v1/transactions (parse_kst,
 * common.c; docs/api.md §2.2), the filters of GET /__admin/requests (admin_requests_filter over
 * journal_filter_set; docs/admin.md §5) and the status of GET /__admin/webhooks/deliveries
 * (delivery_status_parse). Asserts, beyond no crash, no undefined behaviour and no leak:
 *   - a decoded value is found only under its own name and is never longer than its raw text;
 *   - an accepted date is yyyy-MM-ddTHH:mm:ss[.S to .SSSSSS] and names that very time: written
 *     back in Korea time (fmt_kst) it reads the same (a leap second :60 aside);
 *   - filters either all pass, each within its documented range, or the first bad one is
 *     named in a message. */
#define _DEFAULT_SOURCE
#include <stdbool.h>

#include "admin.h"
#include "common.h"
#include "fuzz.h"
#include "journal.h"
#include "request.h"
#include "webhook.h"

static const char *const NAMES[] = {"startDate", "endDate", "startingAfter", "limit", "orderId",
                                    "paymentKey", "idempotencyKey", "route", "status",
                                    "outcome", "since_id", "seconds", NULL};

/* Does `query` have a parameter `name` (a segment "name=...")? */
static bool has_param(const char *query, const char *name)
{
    size_t nl = strlen(name);
    for (const char *q = query; q;) {
        if (strncmp(q, name, nl) == 0 && q[nl] == '=')
            return true;
        q = strchr(q, '&');
        q = q ? q + 1 : NULL;
    }
    return false;
}

static bool digits(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return true;
}

static void check_date(const char *s)
{
    int64_t at;
    if (!s || !parse_kst(s, &at))
        return;
    FUZZ_CHECK(strlen(s) >= 19 && digits(s, 4) && s[4] == '-' && digits(s + 5, 2) &&
                   s[7] == '-' && digits(s + 8, 2) && s[10] == 'T' && digits(s + 11, 2) &&
                   s[13] == ':' && digits(s + 14, 2) && s[16] == ':' && digits(s + 17, 2),
               "an accepted date is yyyy-MM-ddTHH:mm:ss");
    if (s[19]) {
        size_t n = strspn(s + 20, "0123456789");
        FUZZ_CHECK(s[19] == '.' && n >= 1 && n <= 6 && s[20 + n] == '\0',
                   "only a fraction of 1 to 6 digits may follow");
    }
    if (s[0] != '0' && strncmp(s + 17, "60", 2) != 0) { /* fmt_kst writes 4-digit years */
        char back[32];
        fmt_kst(at * 1000000, back);
        FUZZ_CHECK(strncmp(back, s, 19) == 0, "an accepted date names the time it says");
    }
}

static void check_filters(const struct request *r)
{
    struct journal_filter f;
    char *values[ADMIN_MAX_FILTERS];
    char err[ERR_LEN];
    size_t n = admin_requests_filter(r, JOURNAL_SIZE_DEFAULT, &f, values, err);
    FUZZ_CHECK(n <= ADMIN_MAX_FILTERS, "at most ADMIN_MAX_FILTERS values");
    if (!err[0]) {
        FUZZ_CHECK(f.route >= -1 && f.route < ROUTE_LABELS, "route: a known route or any");
        FUZZ_CHECK(f.status == -1 || (f.status >= 100 && f.status <= 599),
                   "status: 100 .. 599 or any");
        FUZZ_CHECK(f.outcome >= -1 && f.outcome < OUT_COUNT, "outcome: a known one or any");
        FUZZ_CHECK(f.limit <= 10000, "limit: 1 .. 10000 or all");
    }
    for (size_t i = 0; i < n; i++)
        free(values[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct request *r = request_new();
    if (!r)
        abort();
    r->method = HM_GET;
    r->query = fuzz_cstr(data, size);
    size_t qlen = strlen(r->query);
    for (size_t i = 0; NAMES[i]; i++) {
        char *v = request_query(r, NAMES[i]);
        if (!v)
            continue;
        FUZZ_CHECK(has_param(r->query, NAMES[i]), "a value is found under its own name");
        FUZZ_CHECK(strlen(v) < qlen, "a decoded value is shorter than the query");
        if (i <= 1)
            check_date(v);
        if (strcmp(NAMES[i], "status") == 0) {
            int st = delivery_status_parse(v);
            FUZZ_CHECK(st >= -1 && st <= 3, "a delivery status is one of four or none");
        }
        free(v);
    }
    check_filters(r);
    request_free(r);
    return 0;
}
