/* admit.c -- admission (see admit.h): the checks in the order docs/profiles.md §4 gives
 * (auth → throttle → cap, on the headers), each answering what it refuses. */
#define _DEFAULT_SOURCE
#include "admit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cluster_limits.h"
#include "common.h"
#include "live.h"
#include "override.h"

char *base64_decode_strict(const char *in, size_t *out_len)
{
    size_t total = strlen(in), n = total;
    while (n > 0 && in[n - 1] == '=' && total - n < 2)
        n--;
    /* Unpadded input may end in 2 or 3 characters; padded input must be whole quads. */
    if (n % 4 == 1 || (total > n && total % 4 != 0))
        return NULL;
    char *out = malloc(n / 4 * 3 + 3);
    if (!out)
        return NULL;
    uint32_t acc = 0;
    int bits = 0;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char c = in[i];
        int v;
        if (c >= 'A' && c <= 'Z')
            v = c - 'A';
        else if (c >= 'a' && c <= 'z')
            v = c - 'a' + 26;
        else if (c >= '0' && c <= '9')
            v = c - '0' + 52;
        else if (c == '+')
            v = 62;
        else if (c == '/')
            v = 63;
        else {
            free(out);
            return NULL;
        }
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (char)((acc >> bits) & 0xff);
        }
    }
    out[o] = '\0';
    *out_len = o;
    return out;
}

static bool is_ows(char c)
{
    return c == ' ' || c == '\t';
}

enum basic_auth admit_basic_key(const char *authorization, char **key)
{
    *key = NULL;
    const char *h = authorization;
    while (is_ows(*h))
        h++;
    if (strncasecmp(h, "Basic", 5) != 0 || !is_ows(h[5]))
        return BASIC_AUTH_FORMAT;
    h += 5;
    while (is_ows(*h))
        h++;
    size_t n = strlen(h);
    while (n > 0 && is_ows(h[n - 1]))
        n--;
    char *cred = strndup(h, n);
    if (!cred)
        return BASIC_AUTH_OOM;
    size_t len;
    char *dec = base64_decode_strict(cred, &len);
    free(cred);
    char *colon = dec ? memchr(dec, ':', len) : NULL;
    if (!colon || memchr(dec, '\0', len)) {
        free(dec);
        return BASIC_AUTH_FORMAT;
    }
    *colon = '\0';
    *key = dec;
    return BASIC_AUTH_OK;
}

/* Authorization: Basic base64(secretKey + ":") (docs/api.md §2), read by admit_basic_key; the
 * key must be accepted and its tenant found or made. */
static bool authenticate(struct gateway *g, struct request *r)
{
    if (!r->authorization) {
        request_error(r, "UNAUTHORIZED_KEY", NULL);
        return false;
    }
    char *dec = NULL;
    switch (admit_basic_key(r->authorization, &dec)) {
    case BASIC_AUTH_OK:
        break;
    case BASIC_AUTH_FORMAT:
        request_error(r, "INCORRECT_BASIC_AUTH_FORMAT", NULL);
        return false;
    case BASIC_AUTH_OOM:
        request_error(r, "FAILED_INTERNAL_SYSTEM_PROCESSING", NULL);
        r->resp.internal = true;
        return false;
    }
    if (!admit_key_accepted(g->cfg, dec)) {
        free(dec);
        request_error(r, "UNAUTHORIZED_KEY", NULL);
        return false;
    }
    r->adm.secret_key = dec;
    bool full;
    if (!(r->adm.tenant = gateway_tenant(g, dec, true, &full))) {
        char msg[160];
        snprintf(msg, sizeof msg, "more than %zu tenants (secret keys) on this server "
                 "(--max-tenants)", g->max_tenants);
        request_reject(r, 503, "SERVICE_UNAVAILABLE", full ? msg : NULL, BODY_JSON, NULL, 0, 0);
        return false;
    }
    return true;
}

bool admit_key_accepted(const struct config *cfg, const char *key)
{
    if (cfg->n_secret_keys == 0)
        return strncmp(key, "test_sk_", 8) == 0 || strncmp(key, "test_gsk_", 9) == 0;
    for (size_t i = 0; i < cfg->n_secret_keys; i++)
        if (strcmp(key, cfg->secret_keys[i]) == 0)
            return true;
    return false;
}

/* Idempotency-Key: visible ASCII, at most 300 bytes after trimming surrounding spaces, one header
 * (docs/idempotency.md §3, docs/edge-rules.md §7). Sets r->idem_key; false (with resp set) if
 * invalid. */
bool admit_idempotency_key(struct request *r)
{
    if (r->idem_key_count == 0 || r->method == HM_GET)
        return true;
    const char *s = r->idem_key_raw ? r->idem_key_raw : "";
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    bool ok = r->idem_key_count == 1 && !r->idem_key_folded && n > 0 && n <= 300;
    for (size_t i = 0; ok && i < n; i++)
        ok = (unsigned char)s[i] >= 0x21 && (unsigned char)s[i] <= 0x7e;
    if (!ok) {
        const char *ko = n > 300 ? NULL : "멱등키는 1자 이상 300자 이하의 출력 가능한 ASCII 문자여야 합니다.";
        const char *en = n > 300 ? NULL
                                 : "The Idempotency-Key must be 1 to 300 visible ASCII characters "
                                   "in a single header.";
        request_error(r, "INVALID_IDEMPOTENCY_KEY", r->lang_en ? en : ko);
        r->obs.outcome = OUT_INVALID;
        return false;
    }
    r->adm.idem_key = strndup(s, n);
    return r->adm.idem_key != NULL;
}

/* The override headers, then the throttle and the concurrency cap, decided on the headers
 * (docs/profiles.md §4), under the profile state in force now. */
static bool admit_profile(struct gateway *g, struct request *r)
{
    int64_t now = now_mono_ns(), since;
    struct tenant *tenant = r->adm.tenant;
    struct live *root = gateway_tenant_live(g, tenant);
    char err[ERR_LEN];
    if (r->ovr_twice) { /* which one wins would be a guess: say so */
        char msg[96];
        snprintf(msg, sizeof msg, "%s: sent twice; send it once", r->ovr_twice);
        request_error(r, "INVALID_REQUEST", msg);
        r->obs.outcome = OUT_INVALID;
        return false;
    }
    if (r->ovr_profile && !(root = gateway_named_live(g, r->ovr_profile, err))) {
        char msg[ERR_LEN + 64];
        snprintf(msg, sizeof msg, "X-Fakegate-Profile: %s", err);
        request_error(r, "INVALID_REQUEST", msg);
        r->obs.outcome = OUT_INVALID;
        return false;
    }
    struct admit_state *adm = &r->adm;
    if ((r->ovr_fault && override_fault_parse(r->ovr_fault, &adm->ovr_fault_profile, err) != 0) ||
        (r->ovr_latency && override_latency_parse(r->ovr_latency, &adm->ovr_latency_ms, err) != 0)) {
        request_error(r, "INVALID_REQUEST", err);
        r->obs.outcome = OUT_INVALID;
        return false;
    }
    struct live *cur = live_current(root, now, &since);
    struct admission a;
    if (g->limits) /* --store redis://: the cluster's buckets and caps */
        cluster_limits_admit(g->limits, cur, since, &tenant->flight, tenant, r->route, now, &a,
                             &r->adm.cap_slot);
    else
        live_admit(cur, since, &tenant->flight, r->route, now, &a);
    if (a.result == ADMIT_THROTTLED) {
        const struct throttle *t = a.throttle;
        request_reject(r, t->status, t->code ? t->code : "SERVICE_UNAVAILABLE", NULL, t->body,
                       &t->retry_after, a.retry_after_auto_s, a.retry_after_wait_s);
        r->obs.outcome = OUT_THROTTLED;
        return false;
    }
    if (a.result == ADMIT_CAPPED) {
        const struct concurrency *c = a.cap;
        request_reject(r, c->status, c->code ? c->code : "SERVICE_UNAVAILABLE", NULL, BODY_JSON,
                       NULL, 0, 0);
        r->obs.outcome = OUT_CAPPED;
        return false;
    }
    r->adm.in_flight = true;
    flight_begin(&g->flight, r->route); /* the server's count: /metrics */
    r->adm.live = cur;
    /* docs/profiles.md §4 Determinism: --seed, or "seed" in the profile; a profile applied at run
     * time (PUT, reset, X-Fakegate-Profile) brings its seed with it. */
    r->adm.seed = gateway_seed(g, root->profile);
    r->adm.generation = tenant_generation(tenant);
    return true;
}

/* a equals b, in time that depends on their lengths only, not on where they first differ: the
 * admin token is a secret, and a timing difference per matching prefix would let a client
 * guess it a byte at a time. */
static bool same_secret(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), n = la > lb ? la : lb;
    unsigned char diff = (unsigned char)(la != lb);
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)((i < la ? a[i] : 0) ^ (i < lb ? b[i] : 0));
    return diff == 0;
}

bool admit_admin(struct gateway *g, struct request *r)
{
    const char *t = g->cfg->admin_token;
    if (!t || strncmp(r->path, "/__admin/", 9) != 0 || strcmp(r->path, "/__admin/health") == 0)
        return true;
    /* The live page's files hold no data (a browser cannot send the token on navigation); what
     * the page fetches with them asks for the token like any admin call. */
    if (strcmp(r->path, "/__admin/ui") == 0 || strncmp(r->path, "/__admin/ui/", 12) == 0)
        return true;
    const char *h = r->authorization;
    if (h && strncmp(h, "Bearer ", 7) == 0 && same_secret(h + 7, t))
        return true;
    request_error(r, "UNAUTHORIZED", NULL);
    return false;
}

bool admit_gateway(struct gateway *g, struct request *r)
{
    if (!authenticate(g, r)) {
        r->obs.outcome = OUT_UNAUTHORIZED;
        return false;
    }
    return admit_profile(g, r);
}

bool admit_framing(struct request *r)
{
    const char *ko = NULL, *en = NULL;
    if (r->header_too_large) {
        request_error(r, "REQUEST_HEADER_FIELDS_TOO_LARGE", NULL);
        r->resp.close = true;
        r->obs.outcome = OUT_INVALID;
        return false;
    }
    if (r->framing_error && strcmp(r->framing_error, "Content-Length") == 0) {
        ko = "Content-Length가 서로 다른 값으로 두 번 왔습니다.";
        en = "Content-Length is sent twice with different values.";
    } else if (r->framing_error) {
        ko = "Transfer-Encoding은 chunked만 지원합니다.";
        en = "Transfer-Encoding other than chunked is not supported.";
    } else if (r->chunked && r->has_content_length) {
        ko = "Transfer-Encoding와 Content-Length를 함께 보낼 수 없습니다.";
        en = "Transfer-Encoding and Content-Length must not both be sent.";
    } else {
        return true;
    }
    request_error(r, "INVALID_REQUEST", r->lang_en ? en : ko);
    r->resp.close = true;
    r->obs.outcome = OUT_INVALID;
    return false;
}

bool admit_body_size(struct gateway *g, struct request *r)
{
    if (!r->body_too_large && !(r->has_content_length && r->content_length > g->cfg->max_body))
        return true;
    char ko[160], en[160];
    snprintf(ko, sizeof ko, "요청 본문이 너무 큽니다. (최대 %zu 바이트)", g->cfg->max_body);
    snprintf(en, sizeof en, "The request body is larger than %zu bytes.", g->cfg->max_body);
    request_error(r, "INVALID_REQUEST", r->lang_en ? en : ko);
    r->resp.status = 413;
    r->resp.close = true;
    r->obs.outcome = OUT_INVALID;
    return false;
}

