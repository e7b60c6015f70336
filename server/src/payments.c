/* payments.c -- confirm and reads (see payments.h). The order of decisions for a confirm is
 * SPEC §4's: body received → validation → queue_latency → idempotency (409 / replay / claim)
 * and the ledger's business checks → latency → commit. Invariants, under the store lock: a
 * payment has `processing` set by at most one request (the claim holder), and only that request
 * approves it, so charges <= 1 whatever the interleaving. */
#define _DEFAULT_SOURCE
#include "payments.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"
#include "render.h"
#include "rng.h"
#include "throttle.h"
#include "toss_errors.h"

#define MAX_SAFE_INT INT64_C(9007199254740991) /* 2^53 - 1 (SPEC §7 "Numbers") */

int gateway_init(struct gateway *g, const struct config *cfg, struct profile *profile,
                 uint64_t seed, uint64_t instance_id)
{
    memset(g, 0, sizeof *g);
    pthread_mutex_init(&g->lock, NULL);
    ledger_init(&g->ledger, mix64(instance_id));
    idem_init(&g->idem, cfg->idempotency_ttl_s * NS_PER_S);
    g->cfg = cfg;
    attempts_init(&g->attempts);
    pthread_mutex_init(&g->apply_lock, NULL);
    metrics_reset(&g->metrics);
    if (journal_init(&g->journal, 10000) != 0)
        return -1;
    if (gateway_apply(g, profile) != 0)
        return -1;
    g->seed = seed;
    g->instance_id = instance_id;
    g->started_unix_us = now_unix_us();
    return 0;
}

int gateway_apply(struct gateway *g, struct profile *p)
{
    struct applied *a = calloc(1, sizeof *a);
    if (a) {
        a->profile = p;
        a->owns = true;
        a->live = live_new(p, now_mono_ns());
        a->applied_unix_us = now_unix_us();
    }
    if (!a || !a->live) {
        free(a);
        profile_free(p);
        return -1;
    }
    pthread_mutex_lock(&g->apply_lock);
    a->prev = g->applied;
    g->applied = a;
    atomic_store(&g->live, a->live);
    pthread_mutex_unlock(&g->apply_lock);
    return 0;
}

struct live *gateway_named_live(struct gateway *g, const char *name, char err[ERR_LEN])
{
    if (!profile_name_valid(name)) {
        snprintf(err, ERR_LEN, "a profile name is [a-z0-9_-]{1,64}");
        return NULL;
    }
    pthread_mutex_lock(&g->apply_lock);
    struct applied *a = g->named;
    while (a && strcmp(a->profile->name, name) != 0)
        a = a->prev;
    if (!a) {
        struct profile *p = NULL;
        if (g->resolve && g->resolve(name, &p, err, g->resolve_ctx) == 0 &&
            (a = calloc(1, sizeof *a)) && (a->live = live_new(p, now_mono_ns()))) {
            a->profile = p;
            a->prev = g->named;
            g->named = a;
        } else {
            if (!g->resolve)
                snprintf(err, ERR_LEN, "no profiles directory");
            free(a);
            a = NULL;
            profile_free(p);
        }
    }
    pthread_mutex_unlock(&g->apply_lock);
    return a ? a->live : NULL;
}

char *gateway_profile_file(struct gateway *g, char name[PROFILE_NAME_MAX + 1])
{
    pthread_mutex_lock(&g->apply_lock);
    const struct profile *p = g->applied->profile; /* never NULL after init */
    snprintf(name, PROFILE_NAME_MAX + 1, "%s", p->name);
    char *file = p->file ? strdup(p->file) : NULL;
    pthread_mutex_unlock(&g->apply_lock);
    return file;
}

void gateway_reset(struct gateway *g, struct profile *p)
{
    /* One step under apply_lock: no profile change, other reset or named lookup can land
     * between emptying the store and applying the profile. */
    struct applied *a = calloc(1, sizeof *a);
    pthread_mutex_lock(&g->apply_lock);
    pthread_mutex_lock(&g->lock);
    ledger_reset(&g->ledger);
    idem_reset(&g->idem);
    __atomic_store_n(&g->generation, g->generation + 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&g->lock);
    attempts_reset(&g->attempts);
    journal_reset(&g->journal);
    metrics_reset(&g->metrics);
    flight_reset_peaks(&g->flight);
    /* Profiles named by X-Fakegate-Profile start afresh too: the next request that names one
     * loads it again, with full buckets and unused budgets. */
    if (g->named) {
        struct applied *last = g->named;
        while (last->prev)
            last = last->prev;
        last->prev = g->retired;
        g->retired = g->named;
        g->named = NULL;
    }
    /* Fresh buckets, budgets and window phases: the given profile, or the active one anew. */
    const struct profile *cur = p ? p : g->applied->profile; /* never NULL after init */
    struct live *l = a ? live_new(cur, now_mono_ns()) : NULL;
    if (l) {
        a->profile = (struct profile *)cur; /* the active one stays owned by its older entry */
        a->owns = p != NULL;
        a->live = l;
        a->applied_unix_us = now_unix_us();
        a->prev = g->applied;
        g->applied = a;
        atomic_store(&g->live, l);
    } else {
        free(a);
        profile_free(p); /* out of memory: the active profile stays, with its state */
    }
    pthread_mutex_unlock(&g->apply_lock);
}

static void free_named(struct applied *a)
{
    for (struct applied *prev; a; a = prev) {
        prev = a->prev;
        live_free(a->live);
        profile_free(a->profile);
        free(a);
    }
}

void gateway_fini(struct gateway *g)
{
    free_named(g->named);
    free_named(g->retired);
    for (struct applied *a = g->applied, *prev; a; a = prev) {
        prev = a->prev;
        live_free(a->live);
        if (a->owns)
            profile_free(a->profile);
        free(a);
    }
    journal_fini(&g->journal);
    pthread_mutex_destroy(&g->apply_lock);
    attempts_fini(&g->attempts);
    idem_fini(&g->idem);
    ledger_fini(&g->ledger);
    pthread_mutex_destroy(&g->lock);
}

/* --- validation ---------------------------------------------------------------------------- */

static void invalid(struct request *r, const char *code, const char *ko, const char *en)
{
    request_error(r, code, r->lang_en ? en : ko);
    r->outcome = OUT_INVALID;
}

/* Where the value of the top-level member `name` starts in `text` (a body that parsed as a JSON
 * object): its line and column, counted as jansson counts them for a parse error (from 1; a
 * column counts characters, so a UTF-8 sequence is one). False if the member is not there, or
 * its key is written with escapes (then the message names no place). */
static bool value_pos(const char *text, size_t len, const char *name, int *line, int *col)
{
    size_t name_len = strlen(name);
    int depth = 0, ln = 1, cl = 0;
    bool want_key = false;  /* at depth 1, the next string is a member's name */
    bool found_key = false; /* that name was `name`: its value is next */
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c == '\n') {
            ln++;
            cl = 0;
            continue;
        }
        if ((c & 0xc0) != 0x80)
            cl++;
        if (c == ' ' || c == '\t' || c == '\r')
            continue;
        if (found_key) {
            if (c == ':')
                continue;
            *line = ln;
            *col = cl;
            return true;
        }
        if (c == '"') {
            size_t start = i + 1, j = start;
            bool escaped = false;
            for (; j < len && text[j] != '"'; j++) {
                if (text[j] == '\\') {
                    escaped = true;
                    j++;
                }
            }
            if (depth == 1 && want_key)
                found_key = !escaped && j - start == name_len &&
                            memcmp(text + start, name, name_len) == 0;
            want_key = false;
            for (size_t k = start; k <= j && k < len; k++) /* the string's own characters */
                cl += ((unsigned char)text[k] & 0xc0) != 0x80;
            i = j;
            continue;
        }
        if (c == '{' || c == '[') {
            depth++;
            want_key = depth == 1 && c == '{';
        } else if (c == '}' || c == ']') {
            depth--;
        } else if (c == ',') {
            want_key = depth == 1;
        }
    }
    return false;
}

/* invalid() for a member's value: the message ends with " (line L, column C)", the place of the
 * value in the body (SPEC §2: the message says what and where). */
static void invalid_field(struct request *r, const char *code, const char *name, const char *ko,
                          const char *en)
{
    int line, col;
    if (!r->body.data || !value_pos(r->body.data, r->body.len, name, &line, &col)) {
        invalid(r, code, ko, en);
        return;
    }
    char ko_at[512], en_at[512];
    snprintf(ko_at, sizeof ko_at, "%s (line %d, column %d)", ko, line, col);
    snprintf(en_at, sizeof en_at, "%s (line %d, column %d)", en, line, col);
    invalid(r, code, ko_at, en_at);
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
            /* jansson names its own flag here; say what is wrong instead. */
            const char *what = strstr(err.text, "JSON_ALLOW_NUL")
                                   ? "\\u0000 (NUL) is not allowed in a string"
                                   : err.text;
            snprintf(ko, sizeof ko, "잘못된 요청입니다. JSON 형식 오류: %s (line %d, column %d)",
                     what, err.line, err.column);
            snprintf(en, sizeof en, "Invalid JSON: %s (line %d, column %d)", what, err.line,
                     err.column);
        }
        invalid(r, "INVALID_REQUEST", ko, en);
        return false;
    }
    /* The bytes stay until the fields are checked (their errors name a place in them); the
     * handler frees them then (done_with_body), so a held request does not keep them. */
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

/* The body's bytes, once its fields are checked. */
static void done_with_body(struct request *r)
{
    buf_fini(&r->body);
}

/* A required string field: missing or not a string → INVALID_REQUEST (SPEC §2: wrong types);
 * a string that is not a valid value → `code`. */
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
    if (!json_is_string(v)) {
        snprintf(ko, sizeof ko, "%s: 문자열이어야 합니다.", name);
        snprintf(en, sizeof en, "%s: must be a string", name);
        invalid_field(r, "INVALID_REQUEST", name, ko, en);
        return NULL;
    }
    if (!ok(json_string_value(v))) {
        snprintf(ko, sizeof ko, "%s: 올바르지 않은 값입니다.", name);
        snprintf(en, sizeof en, "%s: invalid value", name);
        invalid_field(r, code, name, ko, en);
        return NULL;
    }
    return json_string_value(v);
}

/* An amount (SPEC §7 "Numbers"): a JSON integer in 1 .. 2^53-1. An optional field that is
 * absent or null leaves *out at 0. */
static bool amount_field(struct request *r, json_t *root, const char *name, bool required,
                         int64_t *out)
{
    json_t *v = json_object_get(root, name);
    if (!required && (!v || json_is_null(v)))
        return true;
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
        invalid(r, "INVALID_REQUEST", ko, en);
        return false;
    }
    snprintf(ko, sizeof ko, "%s: 1 이상 %lld 이하의 정수여야 합니다.", name,
             (long long)MAX_SAFE_INT);
    snprintf(en, sizeof en, "%s: must be an integer from 1 to %lld", name,
             (long long)MAX_SAFE_INT);
    invalid_field(r, "INVALID_REQUEST", name, ko, en);
    return false;
}

/* A hash of the body's meaning, not its bytes (SPEC §3: the same request with its keys
 * reordered or spaced differently is the same request). Walks the parsed tree: an object is
 * the sum of its (key, value) pair hashes, so key order does not matter and no sorting or
 * serialising is needed (keys are unique: the parse rejects duplicates); each type has its own
 * tag, so 1, 1.0, "1" and true all differ, as their canonical JSON texts would. */
static uint64_t canonical_hash(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        uint64_t sum = 0;
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)v, k, x)
            sum += mix64(hash64(k, strlen(k), 0x6b) ^ canonical_hash(x));
        return mix64(sum ^ 0x0b1ec7);
    }
    case JSON_ARRAY: {
        uint64_t h = 0xa77a;
        for (size_t i = 0; i < json_array_size(v); i++)
            h = mix64(h ^ canonical_hash(json_array_get(v, i))) + i;
        return h;
    }
    case JSON_STRING:
        return hash64(json_string_value(v), json_string_length(v), 0x57);
    case JSON_INTEGER:
        return mix64((uint64_t)json_integer_value(v) ^ 0x1234567);
    case JSON_REAL: {
        double d = json_real_value(v);
        uint64_t bits;
        memcpy(&bits, &d, sizeof bits);
        return mix64(bits ^ 0x7ea1);
    }
    case JSON_TRUE:
        return 0x7c0e;
    case JSON_FALSE:
        return 0xfa15e;
    case JSON_NULL:
        return 0x9011;
    }
    return 0;
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

uint64_t gateway_generation(struct gateway *g)
{
    return __atomic_load_n(&g->generation, __ATOMIC_ACQUIRE);
}

/* A reset ran since r was admitted: r belongs to the ledger it emptied. Answer it as a gateway
 * that restarted under it would (500), and touch nothing. Exact under the store lock; without
 * it, as of the atomic read. */
static bool straddles_reset(struct gateway *g, const struct request *r)
{
    return r->generation != gateway_generation(g);
}

static enum handler_result answer_straddled(struct request *r)
{
    r->claim = NULL; /* freed by the reset */
    r->straddled_reset = true;
    request_error(r, "FAILED_INTERNAL_SYSTEM_PROCESSING", NULL);
    r->outcome = OUT_BUSINESS_ERROR;
    return H_RESPOND;
}

/* r's claim, unless a reset freed it since the claim was made. Lock held. */
static struct idem_record *claim_of(struct gateway *g, struct request *r)
{
    if (r->claim && r->generation != g->generation)
        r->claim = NULL;
    return r->claim;
}

/* The payment r found or created at arrival, unless a reset freed it since (payments leave
 * the ledger only by a reset). Saves the confirm's later lookups in a large table. Lock held. */
static struct payment *payment_of(struct gateway *g, struct request *r)
{
    if (r->payment && r->payment_gen == g->generation)
        return r->payment;
    struct payment *p = ledger_get(&g->ledger, r->payment_key);
    r->payment = p;
    r->payment_gen = g->generation;
    return p;
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

/* An error/when=after fault with commit false: the gateway never processed the request. */
static bool fault_uncommits(const struct request *r)
{
    return r->fault && r->fault->kind == FAULT_ERROR && !r->fault->when_before &&
           !r->fault->commit;
}

/* A business error decided by the ledger: answer it and, if r holds a claim, store it --
 * unless an error fault with commit false will replace the answer: that request was never
 * processed, so its record goes and a resend runs again (SPEC §3). */
static void business_error(struct gateway *g, struct request *r, const char *code,
                           const char *ko, const char *en)
{
    if (ko)
        invalid(r, code, ko, en);
    else
        request_error(r, code, NULL);
    r->outcome = OUT_BUSINESS_ERROR;
    if (claim_of(g, r) && fault_uncommits(r)) {
        idem_release(&g->idem, r->claim, r);
        r->claim = NULL;
    } else if (r->claim) {
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

/* --- faults ------------------------------------------------------------------------------- */

/* An error fault's response: its status, code, message (default: the table's) and body kind,
 * with Retry-After as configured ("auto" has no window to measure here: 1 s). */
static void fault_error(struct request *r, const struct fault *f)
{
    char ra[64] = "";
    retry_after_format(&f->retry_after, 1, now_unix_us() / 1000000, ra, sizeof ra);
    request_reject(r, f->status, f->code, f->message, f->body, ra);
}

static enum wire how_to_wire(enum fault_how how)
{
    switch (how) {
    case HOW_RESET:
        return WIRE_RESET;
    case HOW_HANG:
        return WIRE_HANG;
    case HOW_TRUNCATE:
        return WIRE_TRUNCATE;
    case HOW_CLOSE:
        break;
    }
    return WIRE_CLOSE;
}

/* At the fault decision (the request leaves its queue): drop_request and error/when=before act
 * here, before idempotency, so no record exists and nothing is charged (SPEC §3). Returns true
 * if r is answered (or dropped). */
static bool fault_before(struct gateway *g, struct request *r)
{
    const struct fault *f = r->fault;
    if (!f)
        return false;
    if (f->kind == FAULT_DROP_REQUEST) {
        request_respond(r, 0, NULL, 0);
        r->resp.wire = how_to_wire(f->how);
        r->resp.wire_ms = f->hang_ms;
        r->outcome = OUT_DROPPED_REQUEST;
    } else if (f->kind == FAULT_ERROR && f->when_before) {
        fault_error(r, f);
        r->outcome = OUT_FAULT_ERROR;
    } else {
        return false;
    }
    atomic_fetch_add(&g->metrics.faults[f->kind], 1);
    return true;
}

/* On the way out: whatever response r got (a success, a 409, a replay, an error) is replaced by
 * an error/when=after, or lost or slowed by drop_response / drip. */
static void way_out(struct gateway *g, struct request *r)
{
    const struct fault *f = r->fault;
    if (!f || f->kind == FAULT_DROP_REQUEST || (f->kind == FAULT_ERROR && f->when_before))
        return;
    if (f->kind == FAULT_ERROR) {
        fault_error(r, f);
        r->outcome = OUT_FAULT_ERROR;
    } else if (f->kind == FAULT_DROP_RESPONSE) {
        r->resp.wire = how_to_wire(f->how);
        r->resp.wire_ms = f->hang_ms;
        r->outcome = OUT_DROPPED_RESPONSE;
    } else if (f->kind == FAULT_DRIP) {
        r->resp.wire = WIRE_DRIP;
        r->resp.wire_ms = f->duration_ms;
    }
    atomic_fetch_add(&g->metrics.faults[f->kind], 1);
}

/* --- the idempotency gate and test codes -------------------------------------------------- */

static int64_t ms_to_ns(double ms)
{
    return (int64_t)(ms * (double)NS_PER_MS + 0.5);
}

/* TossPayments-Test-Code with a test_ key forces that error at once: nothing is stored and the
 * ledger is untouched (SPEC §2.5). Returns true if r is answered. */
static bool test_code(struct request *r)
{
    if (!r->test_code || strncmp(r->secret_key, "test_", 5) != 0)
        return false;
    const struct toss_error *e = toss_error_find(r->test_code);
    request_error(r, e ? e->code : "INVALID_TEST_CODE", NULL);
    r->outcome = e ? OUT_BUSINESS_ERROR : OUT_INVALID;
    return true;
}

enum gate { GATE_ANSWERED, GATE_PASS };

/* Idempotency at the moment a request leaves its queue (SPEC §3): PROCESSING → 409, DONE →
 * replay (or 422 with on_body_mismatch reject), none → claim (r->claim). Lock held. */
static enum gate idem_gate(struct gateway *g, struct request *r, const char *scope, size_t len,
                           int64_t now)
{
    if (!scope)
        return GATE_PASS;
    struct idem_record *rec = idem_lookup(&g->idem, scope, len, now);
    if (rec && rec->state == IDEM_PROCESSING) {
        request_error(r, "IDEMPOTENT_REQUEST_PROCESSING", NULL);
        r->outcome = OUT_CONFLICT;
        return GATE_ANSWERED;
    }
    if (rec) {
        r->key_reuse = rec->body_hash != r->body_hash;
        if (r->key_reuse && r->live->profile->on_body_mismatch == BODY_MISMATCH_REJECT) {
            request_error(r, "IDEMPOTENCY_KEY_REUSED", NULL);
            r->outcome = OUT_INVALID;
        } else {
            replay(g, r, rec);
            r->outcome = OUT_REPLAYED;
        }
        return GATE_ANSWERED;
    }
    r->claim = idem_claim(&g->idem, scope, len, r, r->body_hash, now);
    if (!r->claim) {
        request_error(r, "FAILED_INTERNAL_SYSTEM_PROCESSING", NULL);
        return GATE_ANSWERED;
    }
    return GATE_PASS;
}

/* Complete r's claim with the Payment view (status 200). Lock held. */
static void complete_success(struct gateway *g, struct request *r, struct payment *p)
{
    r->outcome = OUT_OK;
    if (!claim_of(g, r))
        return;
    struct idem_response s = {.status = 200, .payment = p, .view_cancels = p->n_cancels,
                              .view_status = (uint8_t)p->status, .en = r->lang_en};
    idem_complete(r->claim, r, &s);
    r->claim = NULL;
}

static void release_claim(struct gateway *g, struct request *r)
{
    if (claim_of(g, r))
        idem_release(&g->idem, r->claim, r);
    r->claim = NULL;
}

bool gateway_expire(struct gateway *g, struct payment *p)
{
    bool was = p->status == PAY_EXPIRED;
    bool now = ledger_expire_if_stale(p, now_unix_us(), g->cfg->session_ttl_s * 1000000);
    if (now && !was)
        atomic_fetch_add(&g->metrics.payments[PAY_EXPIRED], 1);
    return now;
}

/* --- confirm ------------------------------------------------------------------------------ */

static enum handler_result commit(struct gateway *g, struct request *r);

/* The ledger's checks for a confirm, at the claim (SPEC §3: a confirm's business errors are
 * decided at the claim and answered at once). Lock held. Returns true if r may process. */
static bool confirm_checks(struct gateway *g, struct request *r)
{
    struct payment *p = payment_of(g, r);
    struct payment *by_order = p && strcmp(p->order_id, r->order_id) == 0
                                   ? p /* a payment always holds its own orderId */
                                   : ledger_get_by_order(&g->ledger, r->order_id);
    if (by_order && by_order != p) {
        business_error(g, r, "DUPLICATED_ORDER_ID", NULL, NULL);
        return false;
    }
    if (!p) {
        /* Created at arrival unless a reset came in between, or strict mode. */
        if (g->cfg->strict_sessions) {
            business_error(g, r, "NOT_FOUND_PAYMENT_SESSION", NULL, NULL);
            return false;
        }
        p = ledger_create(&g->ledger, r->payment_key, r->order_id, r->amount, now_unix_us(),
                          NULL);
        if (!p) {
            business_error(g, r, "FAILED_INTERNAL_SYSTEM_PROCESSING", NULL, NULL);
            return false;
        }
        r->payment = p;
        atomic_fetch_add(&g->metrics.payments[PAY_IN_PROGRESS], 1);
    }
    if (gateway_expire(g, p) || p->status == PAY_ABORTED) {
        business_error(g, r, "NOT_FOUND_PAYMENT_SESSION", NULL, NULL);
        return false;
    }
    if (strcmp(p->order_id, r->order_id) != 0 || p->amount != r->amount) {
        business_error(g, r, "INVALID_REQUEST", "결제 정보의 금액 또는 주문번호가 일치하지 않습니다.",
                       "amount/orderId does not match the payment");
        return false;
    }
    if (p->status != PAY_IN_PROGRESS) {
        business_error(g, r, "ALREADY_PROCESSED_PAYMENT", NULL, NULL);
        return false;
    }
    if (p->processing) {
        /* Transient, like a 409: not stored under this request's key. */
        request_error(r, "ALREADY_PROCESSING_REQUEST", NULL);
        r->outcome = OUT_BUSINESS_ERROR;
        release_claim(g, r);
        return false;
    }
    p->processing = true;
    return true;
}

static enum handler_result cancel_commit(struct gateway *g, struct request *r);
static enum handler_result read_now(struct gateway *g, struct request *r);

static bool is_read(const struct request *r)
{
    return r->kind == RK_GET_PAYMENT || r->kind == RK_GET_ORDER || r->kind == RK_TRANSACTIONS;
}

/* The end of the processing latency: commit (confirm, cancel) or read. */
static enum handler_result finish(struct gateway *g, struct request *r)
{
    if (r->kind == RK_CANCEL)
        return cancel_commit(g, r);
    if (r->kind == RK_CONFIRM)
        return commit(g, r);
    return read_now(g, r);
}

/* Leaving the queue: the fault decision, then idempotency, then (confirm) the ledger's checks
 * and the claim, then the processing latency. A cancel's checks wait for its commit (SPEC §7). */
static enum handler_result leave_queue(struct gateway *g, struct request *r, bool draining)
{
    if (draining) {
        request_error(r, "SERVICE_UNAVAILABLE", NULL);
        r->resp.close = true;
        r->outcome = OUT_CAPPED;
        return H_RESPOND;
    }
    if (straddles_reset(g, r))
        return answer_straddled(r);
    if (fault_before(g, r))
        return H_RESPOND;
    if (is_read(r)) {
        r->phase = PH_PROCESSING;
        r->latency_spent = true;
        r->hold_until_ns += ms_to_ns(r->latency_ms);
        return r->latency_ms > 0 ? H_HOLD : finish(g, r);
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
    if (straddles_reset(g, r)) { /* since the check above */
        pthread_mutex_unlock(&g->lock);
        free(scope);
        return answer_straddled(r);
    }
    if (idem_gate(g, r, scope, scope_len, now) == GATE_PASS &&
        (r->kind == RK_CANCEL || confirm_checks(g, r))) {
        r->phase = PH_PROCESSING;
        r->latency_spent = true;
        r->hold_until_ns += ms_to_ns(r->latency_ms);
        res = H_HOLD;
    }
    pthread_mutex_unlock(&g->lock);
    free(scope);
    if (res == H_RESPOND) {
        way_out(g, r); /* a 409, a replay or a business error is what the network loses */
        return res;
    }
    return r->latency_ms > 0 ? res : finish(g, r);
}

static enum handler_result commit(struct gateway *g, struct request *r)
{
    pthread_mutex_lock(&g->lock);
    struct payment *p = straddles_reset(g, r) ? NULL : payment_of(g, r);
    if (!p) {
        /* The ledger was reset while this request was processing: that payment is gone, and
         * one of the same paymentKey now may be another request's (its `processing` set). */
        pthread_mutex_unlock(&g->lock);
        return answer_straddled(r);
    }
    p->processing = false;
    if (fault_uncommits(r)) {
        release_claim(g, r);
        pthread_mutex_unlock(&g->lock);
        way_out(g, r);
        return H_RESPOND;
    }
    if (ledger_approve(&g->ledger, p, now_unix_us()) != 0) {
        release_claim(g, r);
        pthread_mutex_unlock(&g->lock);
        request_error(r, "FAILED_INTERNAL_SYSTEM_PROCESSING", NULL);
        return H_RESPOND;
    }
    atomic_fetch_add(&g->metrics.payments[PAY_DONE], 1);
    r->committed = true;
    /* Render the answer after unlocking, from a copy: rendering is most of a confirm's work
     * under this lock, and the other worker waits for it (a futex sleep and wake). The copy
     * borrows the request's paymentKey and orderId (equal to the payment's: confirm_checks
     * passed); a payment with an order name renders under the lock, as before. */
    struct payment view = *p;
    bool copied = !p->order_name && strcmp(p->payment_key, r->payment_key) == 0 &&
                  strcmp(p->order_id, r->order_id) == 0;
    size_t len = 0;
    char *body = NULL;
    if (copied) {
        view.payment_key = r->payment_key;
        view.order_id = r->order_id;
        view.cancels = NULL; /* a view with no cancels (render reads view_cancels of them) */
        view.idem_keys = NULL;
    } else {
        body = render_view(g, p, 0, PAY_DONE, &len);
    }
    complete_success(g, r, p);
    pthread_mutex_unlock(&g->lock);
    if (copied)
        body = render_view(g, &view, 0, PAY_DONE, &len);
    if (!body) {
        /* Out of memory after the commit: the payment is approved (as when an answer is
         * lost), and a replay or GET renders it again. */
        request_error(r, "FAILED_INTERNAL_SYSTEM_PROCESSING", NULL);
        r->outcome = OUT_BUSINESS_ERROR;
        return H_RESPOND;
    }
    request_respond(r, 200, body, len);
    way_out(g, r);
    return H_RESPOND;
}

/* The request's plan (SPEC §4 "Determinism"): its attempt number for this identity on this
 * route, then the fault and latencies from a generator seeded by (seed, route, identity,
 * attempt) under the profile state the request arrived with. The identity is the
 * Idempotency-Key, else the orderId, else the paymentKey. */
static void plan(struct gateway *g, struct request *r, const char *identity)
{
    r->attempt = attempts_next(&g->attempts, r->route, identity);
    struct rng rng;
    rng_seed_request(&rng, r->seed, (int)r->route, identity, strlen(identity), r->attempt);
    struct plan pl;
    live_plan(r->live, r->route, r->attempt, &rng, &pl);
    if (r->ovr_fault_profile) {
        /* X-Fakegate-Fault replaces the profile's faults for this request (its own draw). */
        struct plan ov;
        struct rng orng;
        rng_seed_request(&orng, r->seed, (int)r->route + 16, identity, strlen(identity),
                         r->attempt);
        fault_decide(profile_route(r->ovr_fault_profile, ROUTE_DEFAULT), r->attempt, &orng, NULL,
                     NULL, &ov);
        pl.fault = ov.fault;
    }
    if (r->ovr_latency_ms >= 0) {
        pl.queue_latency_ms = 0;
        pl.latency_ms = r->ovr_latency_ms;
    }
    r->queue_latency_ms = pl.queue_latency_ms;
    r->latency_ms = pl.latency_ms;
    r->fault = pl.fault;
    r->planned = true;
    struct journal_entry e = {
        .order_id = r->order_id, .payment_key = r->payment_key, .idempotency_key = r->idem_key,
        .body_hash = r->body_hash, .attempt = r->attempt, .queue_latency_ms = r->queue_latency_ms,
        .latency_ms = r->latency_ms, .fault = fault_kind_name(r->fault ? r->fault->kind : FAULT_NONE)};
    if (r->kind == RK_GET_ORDER)
        e.order_id = r->path_param;
    else if (r->kind == RK_GET_PAYMENT)
        e.payment_key = r->path_param;
    journal_update(&g->journal, r->journal_id, &e);
}

/* Queue the planned request: hold for queue_latency, or leave the queue now. */
static enum handler_result enqueue(struct gateway *g, struct request *r)
{
    r->phase = PH_QUEUED;
    r->hold_until_ns = r->received_ns + ms_to_ns(r->queue_latency_ms);
    if (r->queue_latency_ms > 0)
        return H_HOLD;
    return leave_queue(g, r, false);
}

/* A request answered before its plan (a test code, an invalid field): journal what identifies
 * it and its body, as plan() does for the others, so the report can tell when the same request
 * is sent again after this 4xx (retried_4xx). */
static void journal_unplanned(struct gateway *g, struct request *r, json_t *root)
{
    json_t *pk = json_object_get(root, "paymentKey"), *oid = json_object_get(root, "orderId");
    /* journal_update copies the strings: the entry only borrows them here. */
    struct journal_entry e = {
        .order_id = json_is_string(oid) ? (char *)json_string_value(oid) : NULL,
        .payment_key = r->kind == RK_CANCEL ? r->path_param
                       : json_is_string(pk) ? (char *)json_string_value(pk) : NULL,
        .idempotency_key = r->idem_key, .body_hash = canonical_hash(root)};
    journal_update(&g->journal, r->journal_id, &e);
}

enum handler_result payments_confirm(struct gateway *g, struct request *r)
{
    json_t *root;
    if (!parse_body(r, &root))
        return H_RESPOND;
    const char *pk = NULL, *oid = NULL;
    int64_t amount = 0;
    if (test_code(r) ||
        !(pk = string_field(r, root, "paymentKey", "INVALID_PAYMENT_KEY", valid_payment_key)) ||
        !(oid = string_field(r, root, "orderId", "INVALID_ORDER_ID", valid_order_id)) ||
        !amount_field(r, root, "amount", true, &amount)) {
        journal_unplanned(g, r, root);
        json_decref(root);
        return H_RESPOND;
    }
    done_with_body(r);
    r->payment_key = strdup(pk);
    r->order_id = strdup(oid);
    r->amount = amount;
    r->body_hash = canonical_hash(root); /* idempotency and the report's "same request" */
    json_decref(root);
    if (!r->payment_key || !r->order_id) {
        request_error(r, "FAILED_INTERNAL_SYSTEM_PROCESSING", NULL);
        return H_RESPOND;
    }
    if (straddles_reset(g, r)) /* before plan: it would count in the new attempts */
        return answer_straddled(r);
    plan(g, r, r->idem_key ? r->idem_key : r->order_id);

    /* Lenient sessions: the payment exists from its first valid confirm (SPEC §2.1). Not in
     * a ledger newer than the request (it will be answered 500 when it leaves its queue). */
    pthread_mutex_lock(&g->lock);
    struct payment *p = straddles_reset(g, r) ? NULL : payment_of(g, r);
    if (!p && !g->cfg->strict_sessions && !straddles_reset(g, r) &&
        (p = ledger_create(&g->ledger, r->payment_key, r->order_id, r->amount, now_unix_us(),
                           NULL))) {
        r->payment = p;
        atomic_fetch_add(&g->metrics.payments[PAY_IN_PROGRESS], 1);
    }
    if (p) {
        p->confirm_attempts++;
        if (r->idem_key)
            ledger_note_idem_key(p, r->idem_key);
    }
    pthread_mutex_unlock(&g->lock);
    return enqueue(g, r);
}

/* --- cancel ------------------------------------------------------------------------------- */

static size_t utf8_chars(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xc0) != 0x80;
    return n;
}

enum handler_result payments_cancel(struct gateway *g, struct request *r)
{
    json_t *root;
    if (!parse_body(r, &root))
        return H_RESPOND;
    if (test_code(r)) {
        journal_unplanned(g, r, root);
        json_decref(root);
        return H_RESPOND;
    }
    json_t *reason = json_object_get(root, "cancelReason");
    bool ok = true;
    if (!reason || json_is_null(reason)) {
        invalid(r, "INVALID_REQUEST", "cancelReason: 필수 값입니다.", "cancelReason: required");
        ok = false;
    } else if (!json_is_string(reason) || json_string_length(reason) == 0 ||
               utf8_chars(json_string_value(reason)) > 200 ||
               strlen(json_string_value(reason)) != json_string_length(reason)) {
        invalid_field(r, "INVALID_REQUEST", "cancelReason",
                      "cancelReason: 1자 이상 200자 이하의 문자열이어야 합니다.",
                      "cancelReason: must be a string of 1 to 200 characters");
        ok = false;
    }
    ok = ok && amount_field(r, root, "cancelAmount", false, &r->cancel_amount) &&
         amount_field(r, root, "refundableAmount", false, &r->refundable_amount);
    if (!ok) {
        journal_unplanned(g, r, root);
        json_decref(root);
        return H_RESPOND;
    }
    done_with_body(r);
    r->cancel_reason = strdup(json_string_value(reason));
    r->payment_key = strdup(r->path_param);
    r->body_hash = canonical_hash(root); /* idempotency and the report's "same request" */
    json_decref(root);
    if (!r->cancel_reason || !r->payment_key) {
        request_error(r, "FAILED_INTERNAL_SYSTEM_PROCESSING", NULL);
        return H_RESPOND;
    }
    if (straddles_reset(g, r)) /* before plan: it would count in the new attempts */
        return answer_straddled(r);
    plan(g, r, r->idem_key ? r->idem_key : r->payment_key);
    return enqueue(g, r);
}

/* The cancel's checks, in SPEC §7's order, then the cancel itself; one commit at a time under
 * the store lock, so overlapping cancels are judged one after the other. */
static enum handler_result cancel_commit(struct gateway *g, struct request *r)
{
    pthread_mutex_lock(&g->lock);
    if (straddles_reset(g, r)) { /* the payment it was for is gone (SPEC §5 reset) */
        pthread_mutex_unlock(&g->lock);
        return answer_straddled(r);
    }
    if (fault_uncommits(r)) {
        release_claim(g, r);
        pthread_mutex_unlock(&g->lock);
        way_out(g, r);
        return H_RESPOND;
    }
    int64_t now_us = now_unix_us();
    struct payment *p = ledger_get(&g->ledger, r->payment_key);
    const char *code = NULL;
    if (!p)
        code = "NOT_FOUND_PAYMENT";
    else if (p->status == PAY_CANCELED)
        code = "ALREADY_CANCELED_PAYMENT";
    else if (p->status != PAY_DONE && p->status != PAY_PARTIAL_CANCELED)
        code = "NOT_CANCELABLE_PAYMENT";
    else if (g->cfg->consecutive_cancel_ms > 0 && p->n_cancels > 0 &&
             now_us - p->cancels[p->n_cancels - 1].canceled_at_us <
                 g->cfg->consecutive_cancel_ms * 1000)
        code = "FORBIDDEN_CONSECUTIVE_REQUEST";
    else if (r->refundable_amount && r->refundable_amount != p->balance)
        code = "NOT_MATCHES_REFUNDABLE_AMOUNT";
    else if (r->cancel_amount > p->balance)
        code = "NOT_CANCELABLE_AMOUNT";
    if (code) {
        business_error(g, r, code, NULL, NULL);
        pthread_mutex_unlock(&g->lock);
        way_out(g, r);
        return H_RESPOND;
    }
    int64_t amount = r->cancel_amount ? r->cancel_amount : p->balance;
    size_t len = 0;
    char *body = NULL;
    if (ledger_cancel(&g->ledger, p, amount, r->cancel_reason, now_us) == 0) {
        atomic_fetch_add(&g->metrics.payments[p->status], 1);
        r->committed = true;
        body = render_view(g, p, p->n_cancels, p->status, &len);
    }
    if (!body) {
        release_claim(g, r);
        pthread_mutex_unlock(&g->lock);
        request_error(r, "FAILED_INTERNAL_SYSTEM_PROCESSING", NULL);
        return H_RESPOND;
    }
    complete_success(g, r, p);
    pthread_mutex_unlock(&g->lock);
    request_respond(r, 200, body, len);
    way_out(g, r);
    return H_RESPOND;
}

/* --- reads -------------------------------------------------------------------------------- */

/* "yyyy-MM-ddTHH:mm:ss[.SSS]" read in Korea time → Unix seconds. */
static bool parse_kst(const char *s, int64_t *out)
{
    int y, mo, d, h, mi, se, n = 0;
    if (!s || sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &se, &n) != 6 ||
        n != 19)
        return false;
    const char *rest = s + n;
    if (*rest == '.') {
        rest++;
        size_t digits = strspn(rest, "0123456789");
        if (digits < 1 || digits > 6)
            return false;
        rest += digits;
    }
    static const int mdays[12] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    if (*rest || mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] || (mo == 2 && d == 29 && !leap) ||
        h > 23 || mi > 59 || se > 60)
        return false; /* 2026-02-30 is no day: timegm would read it as March 2 */
    struct tm tm = {.tm_year = y - 1900, .tm_mon = mo - 1, .tm_mday = d, .tm_hour = h,
                    .tm_min = mi, .tm_sec = se};
    *out = (int64_t)timegm(&tm) - 9 * 3600;
    return true;
}

static void transactions_now(struct gateway *g, struct request *r)
{
    char *start_s = request_query(r, "startDate"), *end_s = request_query(r, "endDate");
    char *after = request_query(r, "startingAfter"), *limit_s = request_query(r, "limit");
    int64_t start, end;
    long limit = 100;
    if (!parse_kst(start_s, &start) || !parse_kst(end_s, &end)) {
        invalid(r, "INVALID_REQUEST",
                "startDate, endDate: 필수 값이며 yyyy-MM-ddTHH:mm:ss 형식이어야 합니다.",
                "startDate and endDate are required, as yyyy-MM-ddTHH:mm:ss (Korea time)");
        goto out;
    }
    if (limit_s) {
        char *endp;
        limit = strtol(limit_s, &endp, 10);
        if (!*limit_s || *endp || limit < 1 || limit > 5000 || !strchr("123456789", *limit_s)) {
            invalid(r, "INVALID_REQUEST", "limit: 1 이상 5000 이하의 정수여야 합니다.",
                    "limit: must be an integer from 1 to 5000");
            goto out;
        }
    }
    struct buf b;
    buf_init(&b);
    buf_addc(&b, '[');
    pthread_mutex_lock(&g->lock);
    long from = 0;
    if (after) {
        from = ledger_find_tx(&g->ledger, after);
        if (from < 0) {
            pthread_mutex_unlock(&g->lock);
            buf_fini(&b);
            request_error(r, "INVALID_TRANSACTION_KEY", NULL);
            r->outcome = OUT_INVALID;
            goto out;
        }
        from++;
    }
    long n = 0;
    for (size_t i = (size_t)from; i < g->ledger.n_txs && n < limit; i++) {
        const struct ledger_tx *tx = &g->ledger.txs[i];
        int64_t at_us = tx->cancel_index >= 0
                            ? tx->payment->cancels[tx->cancel_index].canceled_at_us
                            : tx->payment->approved_at_us;
        int64_t at = at_us / 1000000;
        if (at < start || at > end)
            continue;
        if (n++)
            buf_addc(&b, ',');
        render_transaction(&b, &g->ledger, g->cfg->mid, tx);
    }
    pthread_mutex_unlock(&g->lock);
    buf_addc(&b, ']');
    if (b.oom) {
        buf_fini(&b);
        request_error(r, "FAILED_INTERNAL_SYSTEM_PROCESSING", NULL);
        goto out;
    }
    size_t len;
    char *body = buf_steal(&b, &len);
    request_respond(r, 200, body, len);
out:
    free(start_s);
    free(end_s);
    free(after);
    free(limit_s);
}

static void read_payment(struct gateway *g, struct request *r)
{
    pthread_mutex_lock(&g->lock);
    struct payment *p = r->kind == RK_GET_ORDER ? ledger_get_by_order(&g->ledger, r->path_param)
                                                : ledger_get(&g->ledger, r->path_param);
    if (!p) {
        pthread_mutex_unlock(&g->lock);
        request_error(r, "NOT_FOUND_PAYMENT", NULL);
        r->outcome = OUT_BUSINESS_ERROR;
        return;
    }
    gateway_expire(g, p);
    size_t len = 0;
    char *body = render_view(g, p, p->n_cancels, p->status, &len);
    pthread_mutex_unlock(&g->lock);
    if (!body)
        request_error(r, "FAILED_INTERNAL_SYSTEM_PROCESSING", NULL);
    else
        request_respond(r, 200, body, len);
}

static enum handler_result read_now(struct gateway *g, struct request *r)
{
    if (straddles_reset(g, r))
        return answer_straddled(r);
    if (r->kind == RK_TRANSACTIONS)
        transactions_now(g, r);
    else
        read_payment(g, r);
    way_out(g, r);
    return H_RESPOND;
}

enum handler_result payments_read(struct gateway *g, struct request *r)
{
    /* A transactions query has no key in its path: its identity is the path. */
    if (straddles_reset(g, r)) /* before plan: it would count in the new attempts */
        return answer_straddled(r);
    plan(g, r, r->path_param ? r->path_param : r->path);
    return enqueue(g, r);
}

enum handler_result payments_on_deadline(struct gateway *g, struct request *r, bool draining)
{
    if (r->phase == PH_QUEUED)
        return leave_queue(g, r, draining);
    return finish(g, r);
}

/* --- registered sessions (POST /__admin/sessions) ---------------------------------------- */

/* A paymentKey in Toss's current style: tgen_ + yyyyMMddHHmmss (Korea time) + 5 characters. */
static void session_key(struct gateway *g, char out[32])
{
    static const char alnum[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    char t[32];
    fmt_kst(now_unix_us(), t); /* 2024-02-13T12:17:57+09:00 */
    uint64_t st = g->instance_id ^ mix64(g->ledger.next_id);
    snprintf(out, 32, "tgen_%.4s%.2s%.2s%.2s%.2s%.2s", t, t + 5, t + 8, t + 11, t + 14, t + 17);
    for (int i = 0; i < 5; i++)
        out[19 + i] = alnum[splitmix64(&st) % 62];
    out[24] = '\0';
}

enum handler_result payments_register_session(struct gateway *g, struct request *r)
{
    json_t *root;
    if (!parse_body(r, &root))
        return H_RESPOND;
    const char *oid = string_field(r, root, "orderId", "INVALID_ORDER_ID", valid_order_id);
    int64_t amount = 0;
    json_t *pkv = json_object_get(root, "paymentKey"), *namev = json_object_get(root, "orderName");
    bool ok = oid && amount_field(r, root, "amount", true, &amount);
    if (ok && pkv && !json_is_null(pkv) &&
        (!json_is_string(pkv) || !valid_payment_key(json_string_value(pkv)))) {
        if (json_is_string(pkv))
            invalid_field(r, "INVALID_PAYMENT_KEY", "paymentKey",
                          "paymentKey: 올바르지 않은 값입니다.", "paymentKey: invalid value");
        else
            invalid_field(r, "INVALID_REQUEST", "paymentKey", "paymentKey: 문자열이어야 합니다.",
                          "paymentKey: must be a string");
        ok = false;
    }
    if (ok && namev && !json_is_null(namev) &&
        (!json_is_string(namev) || json_string_length(namev) == 0 ||
         utf8_chars(json_string_value(namev)) > 100)) {
        invalid_field(r, "INVALID_REQUEST", "orderName",
                      "orderName: 1자 이상 100자 이하의 문자열이어야 합니다.",
                      "orderName: must be a string of 1 to 100 characters");
        ok = false;
    }
    if (!ok) {
        json_decref(root);
        return H_RESPOND;
    }
    done_with_body(r);
    char key[32];
    const char *pk = pkv && json_is_string(pkv) ? json_string_value(pkv) : NULL;
    pthread_mutex_lock(&g->lock);
    if (!pk) {
        session_key(g, key);
        pk = key;
    }
    const char *code = NULL;
    struct payment *p = NULL;
    enum ledger_create_result why;
    if ((p = ledger_create(&g->ledger, pk, oid, amount, now_unix_us(), &why)))
        atomic_fetch_add(&g->metrics.payments[PAY_IN_PROGRESS], 1);
    else
        code = why == LEDGER_KEY_EXISTS     ? "INVALID_REQUEST"
               : why == LEDGER_ORDER_TAKEN ? "DUPLICATED_ORDER_ID"
                                           : "FAILED_INTERNAL_SYSTEM_PROCESSING";
    size_t len = 0;
    char *body = NULL;
    if (p) {
        p->registered = true;
        if (namev && json_is_string(namev))
            p->order_name = strdup(json_string_value(namev));
        body = render_view(g, p, 0, PAY_IN_PROGRESS, &len);
    }
    pthread_mutex_unlock(&g->lock);
    json_decref(root);
    if (code && strcmp(code, "INVALID_REQUEST") == 0)
        invalid(r, code, "paymentKey: 이미 존재하는 결제입니다.", "paymentKey: the payment already exists");
    else if (code || !body)
        request_error(r, code ? code : "FAILED_INTERNAL_SYSTEM_PROCESSING", NULL);
    else
        request_respond(r, 200, body, len);
    return H_RESPOND;
}
