/* fuzz_route.c -- the path rules and the Idempotency-Key (router.c, admit.c; docs/edge-rules.md
 * §7, docs/idempotency.md §3). Input: a method byte, a header-count byte, then the decoded path,
 * a NUL and the raw path as on the wire (optional). The path is routed by router_match; the
 * same bytes, cut at the NUL, are sent as an Idempotency-Key to admit_idempotency_key on a
 * request built as http.c builds one. Asserts, beyond no crash, no undefined behaviour and no
 * leak:
 *   - a route found has a kind and a profile route, and its path parameter is a non-empty
 *     segment of the path (no '/'); a raw path with %2F or %00 before the query is never found;
 *   - a 405's Allow names methods the path takes and not the one sent: the first of them is
 *     found on the same path;
 *   - an Idempotency-Key is kept only as 1..300 visible ASCII bytes (the value without its
 *     surrounding spaces), only from one unfolded header of a POST; any other is refused 400
 *     INVALID_IDEMPOTENCY_KEY with a JSON body. */
#define _DEFAULT_SOURCE
#include <jansson.h>
#include <stdbool.h>

#include "admit.h"
#include "fuzz.h"
#include "request.h"
#include "router.h"

static const char *const METHODS[] = {"GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OTHER"};

/* Does the raw path hide a '/' or a NUL (%2F, %2f, %00) before its query? */
static bool hides_slash_or_nul(const char *raw)
{
    size_t end = strcspn(raw, "?");
    for (size_t i = 0; i + 2 < end; i++)
        if (raw[i] == '%' &&
            ((raw[i + 1] == '2' && (raw[i + 2] == 'f' || raw[i + 2] == 'F')) ||
             (raw[i + 1] == '0' && raw[i + 2] == '0')))
            return true;
    return false;
}

static void route(enum http_method m, const char *path, const char *raw)
{
    struct route_match out;
    memset(&out, 0, sizeof out);
    enum route_found f = router_match(m, path, raw, &out);
    if (hides_slash_or_nul(raw ? raw : path))
        FUZZ_CHECK(f == ROUTE_NOT_FOUND, "an encoded '/' or NUL is 404");
    if (f == ROUTE_FOUND) {
        FUZZ_CHECK(out.kind != RK_NONE && (unsigned)out.route < ROUTE_COUNT,
                   "a route found has a kind and a profile route");
        if (out.param) {
            FUZZ_CHECK(out.param >= path && out.param + out.param_len <= path + strlen(path),
                       "the parameter lies in the path");
            FUZZ_CHECK(out.param_len > 0 && !memchr(out.param, '/', out.param_len),
                       "the parameter is one non-empty segment");
        }
    } else if (f == ROUTE_BAD_METHOD) {
        FUZZ_CHECK(out.allow != NULL, "a 405 has an Allow value");
        if (m != HM_OTHER)
            FUZZ_CHECK(strstr(out.allow, METHODS[m]) == NULL,
                       "Allow does not name the method refused");
        enum http_method first = HM_OTHER;
        for (int i = 0; i < HM_OTHER; i++)
            if (strncmp(out.allow, METHODS[i], strlen(METHODS[i])) == 0)
                first = (enum http_method)i;
        FUZZ_CHECK(first != HM_OTHER, "Allow starts with a method");
        struct route_match again;
        FUZZ_CHECK(router_match(first, path, raw, &again) == ROUTE_FOUND,
                   "the first method Allow names is found");
    } else {
        FUZZ_CHECK(f == ROUTE_NOT_FOUND, "found, 405 or 404");
    }
}

static void idempotency_key(enum http_method m, int count, bool folded, const char *key)
{
    struct request *r = request_new();
    if (!r)
        abort();
    r->method = m;
    r->lang_en = count == 2;
    r->idem_key_count = count;
    r->idem_key_folded = folded;
    r->idem_key_raw = strdup(key);
    if (!r->idem_key_raw)
        abort();
    const char *s = key + strspn(key, " \t");
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    if (admit_idempotency_key(r)) {
        if (count == 0 || m == HM_GET) {
            FUZZ_CHECK(r->adm.idem_key == NULL, "no key kept without one POSTed");
        } else {
            const char *k = r->adm.idem_key;
            FUZZ_CHECK(k != NULL && count == 1 && !folded, "a key from one unfolded header");
            FUZZ_CHECK(strlen(k) == n && strncmp(k, s, n) == 0,
                       "the key is the value without its surrounding spaces");
            FUZZ_CHECK(n >= 1 && n <= 300, "a key is 1..300 bytes");
            for (size_t i = 0; i < n; i++)
                FUZZ_CHECK((unsigned char)k[i] >= 0x21 && (unsigned char)k[i] <= 0x7e,
                           "a key is visible ASCII");
        }
    } else {
        FUZZ_CHECK(r->resp.status == 400 && r->resp.code &&
                       strcmp(r->resp.code, "INVALID_IDEMPOTENCY_KEY") == 0,
                   "a bad key is 400 INVALID_IDEMPOTENCY_KEY");
        json_t *v = json_loadb(r->resp.body, r->resp.body_len, 0, NULL);
        FUZZ_CHECK(json_is_string(json_object_get(v, "message")), "its body is {code, message}");
        json_decref(v);
    }
    request_free(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    enum http_method m = (enum http_method)(data[0] % 7);
    int count = data[1] % 3;
    bool folded = data[1] & 0x80;
    char *path = fuzz_cstr(data + 2, size - 2);
    size_t pl = strlen(path);
    size_t rest = size - 2 - pl; /* the NUL and the raw path, if there */
    char *raw = rest >= 1 ? fuzz_cstr(data + 3 + pl, rest - 1) : NULL;
    route(m, path, raw);
    idempotency_key(m, count, folded, path);
    free(raw);
    free(path);
    return 0;
}
