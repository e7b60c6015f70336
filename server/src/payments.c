/* payments.c -- confirm and reads (see payments.h). The order of decisions for a confirm is
 * SPEC §4's: body received → validation → queue_latency → idempotency (409 / replay / claim)
 * and the ledger's business checks → latency → commit. Invariants, under the store lock: a
 * payment has `processing` set by at most one request (the claim holder), and only that request
 * approves it, so charges <= 1 whatever the interleaving. */
#define _POSIX_C_SOURCE 200809L
#include "payments.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "render.h"
#include "rng.h"
#include "toss_errors.h"

#define MAX_SAFE_INT INT64_C(9007199254740991) /* 2^53 - 1 (SPEC §7 "Numbers") */

int gateway_init(struct gateway *g, const struct config *cfg, const struct profile *profile,
                 uint64_t seed, uint64_t instance_id)
{
    memset(g, 0, sizeof *g);
    pthread_mutex_init(&g->lock, NULL);
    ledger_init(&g->ledger, mix64(instance_id));
    idem_init(&g->idem, cfg->idempotency_ttl_s * NS_PER_S);
    g->cfg = cfg;
    g->profile = profile;
    g->seed = seed;
    g->instance_id = instance_id;
    g->started_unix_us = now_unix_us();
    return 0;
}

void gateway_fini(struct gateway *g)
{
    idem_fini(&g->idem);
    ledger_fini(&g->ledger);
    pthread_mutex_destroy(&g->lock);
}

/* --- validation ---------------------------------------------------------------------------- */

static void invalid(struct request *r, const char *code, const char *ko, const char *en)
{
    request_error(r, code, r->lang_en ? en : ko);
}

/* jansson reports an integer beyond 64 bits as a parse error; name the field it belongs to by
 * reading back from the error position to the key before the ':'. */
static bool key_before(const char *text, size_t pos, char *out, size_t out_len)
{
    size_t i = pos;
    while (i > 0 && strchr("0123456789-+.eE \t\r\n", text[i - 1]))
        i--;
    if (i == 0 || text[i - 1] != ':')
        return false;
    i--;
    while (i > 0 && strchr(" \t\r\n", text[i - 1]))
        i--;
    if (i == 0 || text[i - 1] != '"')
        return false;
    size_t end = --i;
    while (i > 0 && text[i - 1] != '"')
        i--;
    if (i == 0 || end - i >= out_len)
        return false;
    memcpy(out, text + i, end - i);
    out[end - i] = '\0';
    return true;
}

static bool parse_body(struct request *r, json_t **out)
{
    json_error_t err;
    const char *text = r->body.data ? r->body.data : "";
    json_t *root = json_loadb(text, r->body.len, JSON_REJECT_DUPLICATES, &err);
    char ko[400], en[400];
    if (!root) {
        char key[64];
        if (strstr(err.text, "too big integer") &&
            key_before(text, (size_t)(err.position > 0 ? err.position - 1 : 0), key, sizeof key)) {
            snprintf(ko, sizeof ko, "%s: 1 이상 %lld 이하의 정수여야 합니다. (line %d, column %d)",
                     key, (long long)MAX_SAFE_INT, err.line, err.column);
            snprintf(en, sizeof en, "%s: must be an integer from 1 to %lld (line %d, column %d)",
                     key, (long long)MAX_SAFE_INT, err.line, err.column);
        } else {
            snprintf(ko, sizeof ko, "잘못된 요청입니다. JSON 형식 오류: %s (line %d, column %d)",
                     err.text, err.line, err.column);
            snprintf(en, sizeof en, "Invalid JSON: %s (line %d, column %d)", err.text, err.line,
                     err.column);
        }
        invalid(r, "INVALID_REQUEST", ko, en);
        return false;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        invalid(r, "INVALID_REQUEST", "잘못된 요청입니다. 요청 본문은 JSON 객체여야 합니다.",
                "Invalid request: the body must be a JSON object.");
        return false;
    }
    *out = root;
    return true;
}

static bool key_char_ok(unsigned char c)
{
    return c >= 0x21 && c <= 0x7e && c != '/' && c != '?' && c != '#' && c != '%';
}

static bool valid_payment_key(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 200)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!key_char_ok((unsigned char)s[i]))
            return false;
    return true;
}

static bool valid_order_id(const char *s)
{
    size_t n = strlen(s);
    if (n < 6 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_'))
            return false;
    }
    return true;
}

/* A required string field: missing → INVALID_REQUEST; present but not a valid value → `code`. */
static const char *string_field(struct request *r, json_t *root, const char *name,
                                const char *code, bool (*ok)(const char *))
{
    char ko[160], en[160];
    json_t *v = json_object_get(root, name);
    if (!v || json_is_null(v)) {
        snprintf(ko, sizeof ko, "%s: 필수 값입니다.", name);
        snprintf(en, sizeof en, "%s: required", name);
        invalid(r, "INVALID_REQUEST", ko, en);
        return NULL;
    }
    if (!json_is_string(v) || !ok(json_string_value(v))) {
        snprintf(ko, sizeof ko, "%s: 올바르지 않은 값입니다.", name);
        snprintf(en, sizeof en, "%s: invalid value", name);
        invalid(r, code, ko, en);
        return NULL;
    }
    return json_string_value(v);
}

static bool amount_field(struct request *r, json_t *root, const char *name, int64_t *out)
{
    json_t *v = json_object_get(root, name);
    if (v && json_is_integer(v)) {
        json_int_t x = json_integer_value(v);
        if (x >= 1 && x <= MAX_SAFE_INT) {
            *out = (int64_t)x;
            return true;
        }
    }
    char ko[160], en[160];
    if (!v || json_is_null(v)) {
        snprintf(ko, sizeof ko, "%s: 필수 값입니다.", name);
        snprintf(en, sizeof en, "%s: required", name);
    } else {
        snprintf(ko, sizeof ko, "%s: 1 이상 %lld 이하의 정수여야 합니다.", name,
                 (long long)MAX_SAFE_INT);
        snprintf(en, sizeof en, "%s: must be an integer from 1 to %lld", name,
                 (long long)MAX_SAFE_INT);
    }
    invalid(r, "INVALID_REQUEST", ko, en);
    return false;
}

static uint64_t canonical_hash(json_t *root)
{
    char *c = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS);
    uint64_t h = c ? hash64(c, strlen(c), 0x243f6a8885a308d3u) : 0;
    free(c);
    return h;
}

/* --- responses from the store ------------------------------------------------------------- */

/* Render the payment view into a new body. Caller holds the store lock. */
static char *render_view(struct gateway *g, const struct payment *p, uint32_t cancels,
                         enum pay_status st, size_t *len)
{
    struct buf b;
    buf_init(&b);
    render_payment(&b, &g->ledger, g->cfg->mid, p, cancels, st);
    if (b.oom) {
        buf_fini(&b);
        return NULL;
    }
    return buf_steal(&b, len);
}

/* Replay a DONE record into r (byte-identical to the stored response). Lock held. */
static void replay(struct gateway *g, struct request *r, const struct idem_record *rec)
{
    const struct idem_response *s = &rec->resp;
    size_t len = 0;
    char *body;
    if (s->payment) {
        body = render_view(g, s->payment, s->view_cancels, (enum pay_status)s->view_status, &len);
    } else {
        body = malloc(s->body_len + 1);
        if (body) {
            memcpy(body, s->body, s->body_len);
            body[s->body_len] = '\0';
            len = s->body_len;
        }
    }
    if (!body) {
        request_error(r, "FAILED_INTERNAL_SYSTEM_PROCESSING", NULL);
        return;
    }
    request_respond(r, s->status, body, len);
}

/* A business error decided by the ledger: answer it and, if r holds a claim, store it. */
static void business_error(struct gateway *g, struct request *r, const char *code,
                           const char *ko, const char *en)
{
    if (ko)
        invalid(r, code, ko, en);
    else
        request_error(r, code, NULL);
    if (r->claim) {
        struct idem_response s = {.status = r->resp.status, .en = r->lang_en};
        s.body = malloc(r->resp.body_len + 1);
        if (s.body) {
            memcpy(s.body, r->resp.body, r->resp.body_len + 1);
            s.body_len = r->resp.body_len;
            idem_complete(r->claim, r, &s);
        } else {
            idem_release(&g->idem, r->claim, r);
        }
        r->claim = NULL;
    }
}

/* --- confirm ------------------------------------------------------------------------------ */

static int64_t ms_to_ns(double ms)
{
    return (int64_t)(ms * (double)NS_PER_MS + 0.5);
}

static enum handler_result commit(struct gateway *g, struct request *r);

/* Leaving the queue: idempotency first, then the ledger's checks, then the claim. */
static enum handler_result leave_queue(struct gateway *g, struct request *r, bool draining)
{
    if (draining) {
        request_error(r, "SERVICE_UNAVAILABLE", NULL);
        r->resp.close = true;
        return H_RESPOND;
    }
    int64_t now = now_mono_ns();
    char *scope = NULL;
    size_t scope_len = 0;
    if (r->idem_key) {
        scope = idem_scope(r->secret_key, r->idem_key, r->method_str, r->path, &scope_len);
        if (!scope) {
            request_error(r, "FAILED_INTERNAL_SYSTEM_PROCESSING", NULL);
            return H_RESPOND;
        }
    }
    enum handler_result res = H_RESPOND;
    pthread_mutex_lock(&g->lock);
    struct idem_record *rec = scope ? idem_lookup(&g->idem, scope, scope_len, now) : NULL;
    if (rec && rec->state == IDEM_PROCESSING) {
        request_error(r, "IDEMPOTENT_REQUEST_PROCESSING", NULL);
        goto out;
    }
    if (rec) {
        if (rec->body_hash != r->body_hash &&
            g->profile->on_body_mismatch == BODY_MISMATCH_REJECT)
            request_error(r, "IDEMPOTENCY_KEY_REUSED", NULL);
        else
            replay(g, r, rec);
        goto out;
    }
    struct payment *p = ledger_get(&g->ledger, r->payment_key);
    struct payment *by_order = ledger_get_by_order(&g->ledger, r->order_id);
    if (scope) {
        r->claim = idem_claim(&g->idem, scope, scope_len, r, r->body_hash, now);
        if (!r->claim) {
            request_error(r, "FAILED_INTERNAL_SYSTEM_PROCESSING", NULL);
            goto out;
        }
    }
    if (by_order && by_order != p) {
        business_error(g, r, "DUPLICATED_ORDER_ID", NULL, NULL);
        goto out;
    }
    if (!p) {
        /* Created at arrival unless a reset came in between, or strict mode. */
        if (g->cfg->strict_sessions) {
            business_error(g, r, "NOT_FOUND_PAYMENT_SESSION", NULL, NULL);
            goto out;
        }
        p = ledger_create(&g->ledger, r->payment_key, r->order_id, r->amount, now_unix_us());
        if (!p) {
            business_error(g, r, "FAILED_INTERNAL_SYSTEM_PROCESSING", NULL, NULL);
            goto out;
        }
    }
    if (strcmp(p->order_id, r->order_id) != 0 || p->amount != r->amount) {
        business_error(g, r, "INVALID_REQUEST", "결제 정보의 금액 또는 주문번호가 일치하지 않습니다.",
                       "amount/orderId does not match the payment");
        goto out;
    }
    if (p->status == PAY_EXPIRED || p->status == PAY_ABORTED) {
        business_error(g, r, "NOT_FOUND_PAYMENT_SESSION", NULL, NULL);
        goto out;
    }
    if (p->status != PAY_IN_PROGRESS) {
        business_error(g, r, "ALREADY_PROCESSED_PAYMENT", NULL, NULL);
        goto out;
    }
    if (p->processing) {
        /* Transient, like a 409: not stored under this request's key. */
        request_error(r, "ALREADY_PROCESSING_REQUEST", NULL);
        if (r->claim)
            idem_release(&g->idem, r->claim, r);
        r->claim = NULL;
        goto out;
    }
    p->processing = true;
    r->holds_payment = true;
    r->phase = PH_PROCESSING;
    r->hold_until_ns = r->hold_until_ns + ms_to_ns(r->latency_ms);
    res = H_HOLD;
out:
    pthread_mutex_unlock(&g->lock);
    free(scope);
    if (res == H_HOLD && r->latency_ms <= 0)
        return commit(g, r);
    return res;
}

static enum handler_result commit(struct gateway *g, struct request *r)
{
    pthread_mutex_lock(&g->lock);
    struct payment *p = ledger_get(&g->ledger, r->payment_key);
    if (!p || !p->processing) {
        /* The ledger was reset while this request was processing. */
        pthread_mutex_unlock(&g->lock);
        r->claim = NULL;
        r->holds_payment = false;
        request_error(r, "FAILED_INTERNAL_SYSTEM_PROCESSING", NULL);
        return H_RESPOND;
    }
    p->processing = false;
    r->holds_payment = false;
    size_t len = 0;
    char *body = NULL;
    if (ledger_approve(&g->ledger, p, now_unix_us()) == 0)
        body = render_view(g, p, 0, PAY_DONE, &len);
    if (!body) {
        if (r->claim)
            idem_release(&g->idem, r->claim, r);
        r->claim = NULL;
        pthread_mutex_unlock(&g->lock);
        request_error(r, "FAILED_INTERNAL_SYSTEM_PROCESSING", NULL);
        return H_RESPOND;
    }
    if (r->claim) {
        struct idem_response s = {.status = 200, .payment = p, .view_cancels = 0,
                                  .view_status = PAY_DONE, .en = r->lang_en};
        idem_complete(r->claim, r, &s);
        r->claim = NULL;
    }
    pthread_mutex_unlock(&g->lock);
    request_respond(r, 200, body, len);
    return H_RESPOND;
}

/* Seed the request's generator: identity is the Idempotency-Key, else the orderId, else the
 * paymentKey (SPEC §4 "Determinism"). */
static void plan_latency(struct gateway *g, struct request *r, const char *identity)
{
    struct rng rng;
    rng_seed_request(&rng, g->seed, (int)r->route, identity, identity ? strlen(identity) : 0, 1);
    const struct route_profile *rp = profile_route(g->profile, r->route);
    r->queue_latency_ms = latency_sample_ms(&rp->queue_latency, &rng);
    r->latency_ms = latency_sample_ms(&rp->latency, &rng);
}

enum handler_result payments_confirm(struct gateway *g, struct request *r)
{
    json_t *root;
    if (!parse_body(r, &root))
        return H_RESPOND;
    const char *pk = string_field(r, root, "paymentKey", "INVALID_PAYMENT_KEY", valid_payment_key);
    const char *oid = pk ? string_field(r, root, "orderId", "INVALID_ORDER_ID", valid_order_id)
                         : NULL;
    int64_t amount = 0;
    if (!pk || !oid || !amount_field(r, root, "amount", &amount)) {
        json_decref(root);
        return H_RESPOND;
    }
    r->payment_key = strdup(pk);
    r->order_id = strdup(oid);
    r->amount = amount;
    if (r->idem_key)
        r->body_hash = canonical_hash(root);
    json_decref(root);
    if (!r->payment_key || !r->order_id) {
        request_error(r, "FAILED_INTERNAL_SYSTEM_PROCESSING", NULL);
        return H_RESPOND;
    }
    plan_latency(g, r, r->idem_key ? r->idem_key : r->order_id);

    /* Lenient sessions: the payment exists from its first valid confirm (SPEC §2.1). */
    pthread_mutex_lock(&g->lock);
    struct payment *p = ledger_get(&g->ledger, r->payment_key);
    if (!p && !g->cfg->strict_sessions && !ledger_get_by_order(&g->ledger, r->order_id))
        p = ledger_create(&g->ledger, r->payment_key, r->order_id, r->amount, now_unix_us());
    if (p) {
        p->confirm_attempts++;
        if (r->idem_key)
            ledger_note_idem_key(p, r->idem_key);
    }
    pthread_mutex_unlock(&g->lock);

    r->phase = PH_QUEUED;
    r->hold_until_ns = r->received_ns + ms_to_ns(r->queue_latency_ms);
    if (r->queue_latency_ms > 0)
        return H_HOLD;
    return leave_queue(g, r, false);
}

/* --- reads -------------------------------------------------------------------------------- */

static void read_now(struct gateway *g, struct request *r)
{
    pthread_mutex_lock(&g->lock);
    struct payment *p = r->kind == RK_GET_ORDER ? ledger_get_by_order(&g->ledger, r->path_param)
                                                : ledger_get(&g->ledger, r->path_param);
    if (!p) {
        pthread_mutex_unlock(&g->lock);
        request_error(r, "NOT_FOUND_PAYMENT", NULL);
        return;
    }
    size_t len = 0;
    char *body = render_view(g, p, p->n_cancels, p->status, &len);
    pthread_mutex_unlock(&g->lock);
    if (!body)
        request_error(r, "FAILED_INTERNAL_SYSTEM_PROCESSING", NULL);
    else
        request_respond(r, 200, body, len);
}

enum handler_result payments_read(struct gateway *g, struct request *r)
{
    plan_latency(g, r, r->path_param);
    double total = r->queue_latency_ms + r->latency_ms;
    if (total > 0) {
        r->phase = PH_PROCESSING;
        r->hold_until_ns = r->received_ns + ms_to_ns(total);
        return H_HOLD;
    }
    read_now(g, r);
    return H_RESPOND;
}

enum handler_result payments_on_deadline(struct gateway *g, struct request *r, bool draining)
{
    if (r->kind == RK_GET_PAYMENT || r->kind == RK_GET_ORDER) {
        read_now(g, r);
        return H_RESPOND;
    }
    if (r->phase == PH_QUEUED)
        return leave_queue(g, r, draining);
    return commit(g, r);
}

/* --- admin -------------------------------------------------------------------------------- */

static void admin_entry(struct gateway *g, struct buf *b, const struct payment *p)
{
    buf_adds(b, "{\"payment\":");
    render_payment(b, &g->ledger, g->cfg->mid, p, p->n_cancels, p->status);
    buf_adds(b, ",\"confirm_attempts\":");
    buf_add_i64(b, p->confirm_attempts);
    buf_adds(b, ",\"idempotency_keys\":[");
    for (uint32_t i = 0; i < p->n_idem_keys; i++) {
        if (i)
            buf_addc(b, ',');
        buf_add_json_strz(b, p->idem_keys[i]);
    }
    buf_adds(b, "],\"charges\":");
    buf_add_i64(b, p->charges);
    buf_addc(b, '}');
}

enum handler_result payments_admin_list(struct gateway *g, struct request *r,
                                        const char *order_id)
{
    struct buf b;
    buf_init(&b);
    buf_adds(&b, "{\"payments\":[");
    pthread_mutex_lock(&g->lock);
    bool first = true;
    for (size_t i = 0; i < g->ledger.n_all; i++) {
        const struct payment *p = g->ledger.all[i];
        if (order_id && strcmp(p->order_id, order_id) != 0)
            continue;
        if (!first)
            buf_addc(&b, ',');
        first = false;
        admin_entry(g, &b, p);
    }
    pthread_mutex_unlock(&g->lock);
    buf_adds(&b, "]}");
    if (b.oom) {
        buf_fini(&b);
        request_error(r, "FAILED_INTERNAL_SYSTEM_PROCESSING", NULL);
        return H_RESPOND;
    }
    size_t len;
    char *body = buf_steal(&b, &len);
    request_respond(r, 200, body, len);
    return H_RESPOND;
}
