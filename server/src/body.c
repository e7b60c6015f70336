/* body.c -- request bodies: parse, check, hash (see body.h). A body stays as bytes only until
 * its fields are checked (their errors name a place in them); a held request keeps none. */
#define _DEFAULT_SOURCE
#include "body.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"
#include "jsonpos.h"
#include "ledger.h"
#include "rng.h"
#include "toss_errors.h"

#define MAX_SAFE_INT INT64_C(9007199254740991) /* 2^53 - 1 (docs/edge-rules.md §7 "Numbers") */

struct body {
    json_t *root;
};

void body_invalid(struct request *r, const char *code, const char *ko, const char *en)
{
    request_error(r, code, r->lang_en ? en : ko);
    r->obs.outcome = OUT_INVALID;
}

/* invalid() for a member's value: the message ends with " (line L, column C)", the place of the
 * value in the body (docs/api.md §2: the message says what and where). */
static void invalid_field(struct request *r, const char *code, const char *name, const char *ko,
                          const char *en)
{
    size_t off, line, col;
    if (!r->body.data || !jsonpos_member(r->body.data, r->body.len, name, &off)) {
        body_invalid(r, code, ko, en);
        return;
    }
    jsonpos_line_col(r->body.data, r->body.len, off, &line, &col);
    char ko_at[512], en_at[512];
    snprintf(ko_at, sizeof ko_at, "%s (line %zu, column %zu)", ko, line, col);
    snprintf(en_at, sizeof en_at, "%s (line %zu, column %zu)", en, line, col);
    body_invalid(r, code, ko_at, en_at);
}

/* A body nested deeper than max_depth (--max-json-depth) is refused on its raw bytes, before
 * jansson builds a tree of it: 400 INVALID_REQUEST naming the depth, the flag and where the
 * first level too many opens. True if it is within the depth. */
static bool depth_ok(struct request *r, const char *text, size_t max_depth)
{
    size_t off, line, col;
    if (!jsonpos_too_deep(text, r->body.len, max_depth, &off))
        return true;
    jsonpos_line_col(text, r->body.len, off, &line, &col);
    char ko[400], en[400];
    snprintf(ko, sizeof ko,
             "잘못된 요청입니다. JSON 형식 오류: nested deeper than %zu levels (--max-json-depth) "
             "(line %zu, column %zu)",
             max_depth, line, col);
    snprintf(en, sizeof en,
             "Invalid JSON: nested deeper than %zu levels (--max-json-depth) (line %zu, column %zu)",
             max_depth, line, col);
    body_invalid(r, "INVALID_REQUEST", ko, en);
    return false;
}

static bool parse_body(struct request *r, size_t max_depth, json_t **out)
{
    json_error_t err;
    const char *text = r->body.data ? r->body.data : "";
    if (!depth_ok(r, text, max_depth ? max_depth : BODY_MAX_JSON_DEPTH_DEFAULT))
        return false;
    json_t *root = json_loadb(text, r->body.len, JSON_REJECT_DUPLICATES, &err);
    char ko[400], en[400];
    if (!root) {
        char key[64];
        /* jansson reports an integer beyond 64 bits as a parse error: name its field */
        if (strstr(err.text, "too big integer") &&
            jsonpos_key_before(text, r->body.len, (size_t)(err.position > 0 ? err.position - 1 : 0),
                               key, sizeof key)) {
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
        body_invalid(r, "INVALID_REQUEST", ko, en);
        return false;
    }
    /* The bytes stay until the fields are checked (their errors name a place in them); the
     * handler frees them then (done_with_body), so a held request does not keep them. */
    if (!json_is_object(root)) {
        json_decref(root);
        body_invalid(r, "INVALID_REQUEST", "잘못된 요청입니다. 요청 본문은 JSON 객체여야 합니다.",
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

/* A required string field: missing or not a string → INVALID_REQUEST (docs/api.md §2: wrong types);
 * a string that is not a valid value → `code`. */
static const char *string_field(struct request *r, json_t *root, const char *name,
                                const char *code, bool (*ok)(const char *))
{
    char ko[320], en[320];
    json_t *v = json_object_get(root, name);
    if (!v || json_is_null(v)) {
        snprintf(ko, sizeof ko, "%s: 필수 값입니다.", name);
        snprintf(en, sizeof en, "%s: required", name);
        body_invalid(r, "INVALID_REQUEST", ko, en);
        return NULL;
    }
    if (!json_is_string(v)) {
        snprintf(ko, sizeof ko, "%s: 문자열이어야 합니다.", name);
        snprintf(en, sizeof en, "%s: must be a string", name);
        invalid_field(r, "INVALID_REQUEST", name, ko, en);
        return NULL;
    }
    if (!ok(json_string_value(v))) {
        /* the rule it broke, as the error table words it for `code` */
        const struct toss_error *te = toss_error_find(code);
        if (te) { /* "name: " unless the table's words begin with it */
            size_t n = strlen(name);
            snprintf(ko, sizeof ko, "%s%s%s", strncmp(te->ko, name, n) ? name : "",
                     strncmp(te->ko, name, n) ? ": " : "", te->ko);
            snprintf(en, sizeof en, "%s%s%s", strncmp(te->en, name, n) ? name : "",
                     strncmp(te->en, name, n) ? ": " : "", te->en);
        } else {
            snprintf(ko, sizeof ko, "%s: 올바르지 않은 값입니다.", name);
            snprintf(en, sizeof en, "%s: invalid value", name);
        }
        invalid_field(r, code, name, ko, en);
        return NULL;
    }
    return json_string_value(v);
}

/* An amount (docs/edge-rules.md §7 "Numbers"): a JSON integer in 1 .. 2^53-1. An optional field
 * that is absent or null leaves *out at 0. */
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
        body_invalid(r, "INVALID_REQUEST", ko, en);
        return false;
    }
    snprintf(ko, sizeof ko, "%s: 1 이상 %lld 이하의 정수여야 합니다.", name,
             (long long)MAX_SAFE_INT);
    snprintf(en, sizeof en, "%s: must be an integer from 1 to %lld", name,
             (long long)MAX_SAFE_INT);
    invalid_field(r, "INVALID_REQUEST", name, ko, en);
    return false;
}

/* A hash of the body's meaning, not its bytes (docs/idempotency.md §3: the same request with its
 * keys reordered or spaced differently is the same request). Walks the parsed tree: an object is
 * the sum of its (key, value) pair hashes, so key order does not matter and no sorting or
 * serialising is needed (keys are unique: the parse rejects duplicates); each type has its own tag,
 * so 1, 1.0, "1" and true all differ, as their canonical JSON texts would. */
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


struct body *body_parse(struct request *r, size_t max_depth)
{
    json_t *root;
    if (!parse_body(r, max_depth, &root))
        return NULL;
    struct body *b = malloc(sizeof *b);
    if (!b) {
        json_decref(root);
        request_error(r, "FAILED_INTERNAL_SYSTEM_PROCESSING", NULL);
        r->resp.internal = true;
        return NULL;
    }
    b->root = root;
    return b;
}

void body_free(struct body *b)
{
    if (b) {
        json_decref(b->root);
        free(b);
    }
}

void body_identity(const struct body *b, const char **order_id, const char **payment_key,
                   uint64_t *hash)
{
    json_t *pk = json_object_get(b->root, "paymentKey"), *oid = json_object_get(b->root, "orderId");
    *order_id = json_is_string(oid) ? json_string_value(oid) : NULL;
    *payment_key = json_is_string(pk) ? json_string_value(pk) : NULL;
    *hash = canonical_hash(b->root);
}

bool body_confirm(struct request *r, const struct body *b, const char *path_key)
{
    const char *pk = path_key, *oid;
    int64_t amount = 0;
    json_t *in_body = json_object_get(b->root, "paymentKey");
    if (path_key && !valid_payment_key(path_key)) {
        body_invalid(r, "INVALID_PAYMENT_KEY", NULL, NULL); /* the table's message */
        return false;
    }
    if (path_key && in_body && !json_is_null(in_body) &&
        !(json_is_string(in_body) && strcmp(json_string_value(in_body), path_key) == 0)) {
        invalid_field(r, "INVALID_REQUEST", "paymentKey",
                      "paymentKey: 경로의 paymentKey와 다릅니다.",
                      "paymentKey: differs from the paymentKey in the path");
        return false;
    }
    if ((!pk && !(pk = string_field(r, b->root, "paymentKey", "INVALID_PAYMENT_KEY",
                                    valid_payment_key))) ||
        !(oid = string_field(r, b->root, "orderId", "INVALID_ORDER_ID", valid_order_id)) ||
        !amount_field(r, b->root, "amount", true, &amount))
        return false;
    done_with_body(r);
    r->payment_key = strdup(pk);
    r->order_id = strdup(oid);
    r->amount = amount;
    r->body_hash = canonical_hash(b->root); /* idempotency and the report's "same request" */
    if (!r->payment_key || !r->order_id) {
        request_error(r, "FAILED_INTERNAL_SYSTEM_PROCESSING", NULL);
        r->resp.internal = true;
        return false;
    }
    return true;
}

static size_t utf8_chars(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xc0) != 0x80;
    return n;
}

/* Toss's bank code table (docs.tosspayments.com/codes/org-codes, "은행 코드"): two-digit code,
 * Korean short name, English name. */
static const struct bank {
    const char *code, *ko, *en;
} BANKS[] = {
    {"02", "산업", "KDBBANK"},      {"03", "기업", "IBK"},          {"06", "국민", "KOOKMIN"},
    {"07", "수협", "SUHYEOP"},      {"11", "농협", "NONGHYEOP"},    {"12", "단위농협", "LOCALNONGHYEOP"},
    {"20", "우리", "WOORI"},        {"23", "SC제일", "SC"},         {"27", "씨티", "CITI"},
    {"31", "대구", "DAEGUBANK"},    {"32", "부산", "BUSANBANK"},    {"34", "광주", "GWANGJUBANK"},
    {"35", "제주", "JEJUBANK"},     {"37", "전북", "JEONBUKBANK"},  {"39", "경남", "KYONGNAMBANK"},
    {"45", "새마을", "SAEMAUL"},    {"48", "신협", "SHINHYEOP"},    {"50", "저축", "SAVINGBANK"},
    {"54", "홍콩상하이", "HSBC"},   {"64", "산림", "SANLIM"},       {"71", "우체국", "POST"},
    {"81", "하나", "HANA"},         {"88", "신한", "SHINHAN"},      {"89", "케이", "KBANK"},
    {"90", "카카오", "KAKAOBANK"},  {"92", "토스", "TOSSBANK"},
};

const char *body_bank_code(const char *name)
{
    static const char suffix[] = "은행";
    for (size_t i = 0; i < sizeof BANKS / sizeof BANKS[0]; i++) {
        const struct bank *k = &BANKS[i];
        size_t n = strlen(k->ko);
        if (strcmp(name, k->code) == 0 || strcmp(name, k->en) == 0 || strcmp(name, k->ko) == 0 ||
            (strncmp(name, k->ko, n) == 0 && strcmp(name + n, suffix) == 0))
            return k->code;
    }
    if (strcmp(name, "KB국민") == 0 || strcmp(name, "KB국민은행") == 0 ||
        strcmp(name, "IBK기업") == 0 || strcmp(name, "IBK기업은행") == 0 ||
        strcmp(name, "NH농협") == 0 || strcmp(name, "NH농협은행") == 0)
        return name[0] == 'K' ? "06" : name[0] == 'I' ? "03" : "11";
    return NULL;
}

static bool bank_ok(const char *s)
{
    return body_bank_code(s) != NULL;
}

static bool account_number_ok(const char *s)
{
    size_t n = strlen(s), digits = strspn(s, "0123456789-");
    return n >= 6 && n <= 20 && digits == n;
}

static bool text_1_100(const char *s)
{
    size_t n = utf8_chars(s);
    return n >= 1 && n <= 100;
}

/* refundReceiveAccount {bank, accountNumber, holderName} of a cancel, if present; anything
 * wrong with it → INVALID_REFUND_ACCOUNT_INFO. */
static bool refund_account(struct request *r, json_t *root)
{
    json_t *v = json_object_get(root, "refundReceiveAccount");
    if (!v || json_is_null(v))
        return true;
    json_t *bank = json_object_get(v, "bank"), *num = json_object_get(v, "accountNumber"),
           *holder = json_object_get(v, "holderName");
    if (!json_is_object(v) || !json_is_string(bank) || !json_is_string(num) ||
        !json_is_string(holder) || !bank_ok(json_string_value(bank)) ||
        !account_number_ok(json_string_value(num)) || !text_1_100(json_string_value(holder))) {
        invalid_field(r, "INVALID_REFUND_ACCOUNT_INFO", "refundReceiveAccount",
                      "refundReceiveAccount: bank, accountNumber(숫자 6~20자), holderName 이 "
                      "필요합니다.",
                      "refundReceiveAccount: needs bank, accountNumber (6-20 digits) and "
                      "holderName");
        return false;
    }
    r->refund_bank = strdup(body_bank_code(json_string_value(bank)));
    r->refund_account = strdup(json_string_value(num));
    r->refund_holder = strdup(json_string_value(holder));
    if (!r->refund_bank || !r->refund_account || !r->refund_holder) {
        request_error(r, "FAILED_INTERNAL_SYSTEM_PROCESSING", NULL);
        r->resp.internal = true;
        return false;
    }
    return true;
}

bool body_cancel(struct request *r, const struct body *b)
{
    json_t *reason = json_object_get(b->root, "cancelReason");
    if (!reason || json_is_null(reason)) {
        body_invalid(r, "INVALID_REQUEST", "cancelReason: 필수 값입니다.", "cancelReason: required");
        return false;
    }
    if (!json_is_string(reason) || json_string_length(reason) == 0 ||
        utf8_chars(json_string_value(reason)) > 200 ||
        strlen(json_string_value(reason)) != json_string_length(reason)) {
        invalid_field(r, "INVALID_REQUEST", "cancelReason",
                      "cancelReason: 1자 이상 200자 이하의 문자열이어야 합니다.",
                      "cancelReason: must be a string of 1 to 200 characters");
        return false;
    }
    if (!amount_field(r, b->root, "cancelAmount", false, &r->cancel_amount) ||
        !amount_field(r, b->root, "refundableAmount", false, &r->refundable_amount) ||
        !refund_account(r, b->root))
        return false;
    done_with_body(r);
    r->cancel_reason = strdup(json_string_value(reason));
    r->body_hash = canonical_hash(b->root); /* idempotency and the report's "same request" */
    if (!r->cancel_reason) {
        request_error(r, "FAILED_INTERNAL_SYSTEM_PROCESSING", NULL);
        r->resp.internal = true;
        return false;
    }
    return true;
}

/* "yyyy-MM-ddTHH:mm:ss[.fraction][Z|±HH:MM]", Korea time without an offset → µs since the
 * epoch. */
static bool parse_due_date(const char *s, int64_t *out_us)
{
    int y, mo, d, h, mi, se, n = 0;
    if (!date_time_form(s) ||
        sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &se, &n) != 6 || n != 19)
        return false;
    const char *rest = s + n;
    if (*rest == '.') {
        size_t digits = strspn(rest + 1, "0123456789");
        if (digits < 1 || digits > 9)
            return false;
        rest += 1 + digits;
    }
    int64_t offset_s = 9 * 3600;
    if (*rest == 'Z') {
        offset_s = 0;
        rest++;
    } else if (*rest == '+' || *rest == '-') {
        int oh, om, m = 0;
        /* digits only: %2d alone also takes "+-9:00" or "+ 9:00" */
        if (strspn(rest + 1, "0123456789") != 2 || rest[3] != ':' ||
            strspn(rest + 4, "0123456789") < 2 ||
            sscanf(rest + 1, "%2d:%2d%n", &oh, &om, &m) != 2 || m != 5 || oh > 23 || om > 59)
            return false;
        offset_s = (*rest == '+' ? 1 : -1) * (oh * 3600 + om * 60);
        rest += 6;
    }
    static const int mdays[12] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    if (*rest || mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] || (mo == 2 && d == 29 && !leap) ||
        h > 23 || mi > 59 || se > 59)
        return false;
    struct tm tm = {.tm_year = y - 1900, .tm_mon = mo - 1, .tm_mday = d, .tm_hour = h,
                    .tm_min = mi, .tm_sec = se};
    *out_us = ((int64_t)timegm(&tm) - offset_s) * 1000000;
    return true;
}

#define US_PER_HOUR INT64_C(3600000000)
#define VA_DEFAULT_HOURS 168 /* 7 days [Toss: the default due date] */
#define VA_MAX_HOURS 720     /* 30 days [Toss: the longest due date] */

bool body_virtual_account(struct request *r, const struct body *b, int64_t now_us)
{
    json_t *root = b->root;
    const char *oid, *name, *customer, *bank;
    int64_t amount = 0;
    if (!amount_field(r, root, "amount", true, &amount) ||
        !(oid = string_field(r, root, "orderId", "INVALID_ORDER_ID", valid_order_id)) ||
        !(name = string_field(r, root, "orderName", "INVALID_REQUEST", text_1_100)) ||
        !(customer = string_field(r, root, "customerName", "INVALID_REQUEST", text_1_100)) ||
        !(bank = string_field(r, root, "bank", "INVALID_BANK", bank_ok)))
        return false;
    json_t *hours = json_object_get(root, "validHours"), *due = json_object_get(root, "dueDate"),
           *email = json_object_get(root, "customerEmail");
    bool has_hours = hours && !json_is_null(hours), has_due = due && !json_is_null(due);
    if (has_hours && has_due) {
        request_error(r, "INVALID_VALID_HOURS_WITH_DUE_DATE_AND_SINGLE", NULL);
        r->obs.outcome = OUT_INVALID;
        return false;
    }
    int64_t due_at_us = 0, valid_us = VA_DEFAULT_HOURS * US_PER_HOUR;
    if (has_hours) {
        if (!json_is_integer(hours) || json_integer_value(hours) < 1) {
            invalid_field(r, "INVALID_REQUEST", "validHours", "validHours: 1 이상의 정수여야 합니다.",
                          "validHours: must be an integer of at least 1");
            return false;
        }
        if (json_integer_value(hours) > VA_MAX_HOURS) {
            request_error(r, "EXCEED_MAX_DUE_DATE", NULL);
            r->obs.outcome = OUT_INVALID;
            return false;
        }
        valid_us = (int64_t)json_integer_value(hours) * US_PER_HOUR;
    }
    if (has_due) {
        if (!json_is_string(due) || !parse_due_date(json_string_value(due), &due_at_us) ||
            due_at_us <= now_us) {
            invalid_field(r, "INVALID_REQUEST", "dueDate",
                          "dueDate: 현재 이후의 yyyy-MM-ddTHH:mm:ss 형식이어야 합니다.",
                          "dueDate: must be a future yyyy-MM-ddTHH:mm:ss (Korea time)");
            return false;
        }
        if (due_at_us - now_us > VA_MAX_HOURS * US_PER_HOUR) {
            request_error(r, "EXCEED_MAX_DUE_DATE", NULL);
            r->obs.outcome = OUT_INVALID;
            return false;
        }
    }
    if (email && !json_is_null(email) &&
        (!json_is_string(email) || !text_1_100(json_string_value(email)))) {
        invalid_field(r, "INVALID_REQUEST", "customerEmail",
                      "customerEmail: 1자 이상 100자 이하의 문자열이어야 합니다.",
                      "customerEmail: must be a string of 1 to 100 characters");
        return false;
    }
    done_with_body(r);
    r->amount = amount;
    r->va_valid_us = due_at_us ? 0 : valid_us;
    r->order_id = strdup(oid);
    r->order_name = strdup(name);
    r->va = calloc(1, sizeof *r->va);
    if (r->va) {
        memcpy(r->va->bank_code, body_bank_code(bank), 3);
        r->va->due_at_us = due_at_us;
        r->va->customer_name = strdup(customer);
        if (json_is_string(email))
            r->va->customer_email = strdup(json_string_value(email));
    }
    r->body_hash = canonical_hash(root);
    if (!r->order_id || !r->order_name || !r->va || !r->va->customer_name ||
        (json_is_string(email) && !r->va->customer_email)) {
        request_error(r, "FAILED_INTERNAL_SYSTEM_PROCESSING", NULL);
        r->resp.internal = true;
        return false;
    }
    return true;
}

bool body_deposit(struct request *r, const struct body *b, const char **order_id,
                  const char **account_number, int64_t *amount)
{
    json_t *root = b->root;
    json_t *oid = json_object_get(root, "orderId"), *num = json_object_get(root, "accountNumber");
    *order_id = json_is_string(oid) ? json_string_value(oid) : NULL;
    *account_number = json_is_string(num) ? json_string_value(num) : NULL;
    *amount = 0;
    if (!*order_id && !*account_number) {
        body_invalid(r, "INVALID_REQUEST", "orderId 또는 accountNumber: 필수 값입니다.",
                     "orderId or accountNumber: required");
        return false;
    }
    if (!amount_field(r, root, "amount", false, amount))
        return false;
    done_with_body(r);
    return true;
}

bool body_session(struct request *r, const struct body *b, const char **order_id,
                  int64_t *amount, const char **payment_key, const char **order_name)
{
    json_t *root = b->root;
    const char *oid = string_field(r, root, "orderId", "INVALID_ORDER_ID", valid_order_id);
    json_t *pkv = json_object_get(root, "paymentKey"), *namev = json_object_get(root, "orderName");
    if (!oid || !amount_field(r, root, "amount", true, amount))
        return false;
    if (pkv && !json_is_null(pkv) &&
        (!json_is_string(pkv) || !valid_payment_key(json_string_value(pkv)))) {
        if (json_is_string(pkv))
            invalid_field(r, "INVALID_PAYMENT_KEY", "paymentKey",
                          "paymentKey: 올바르지 않은 값입니다.", "paymentKey: invalid value");
        else
            invalid_field(r, "INVALID_REQUEST", "paymentKey", "paymentKey: 문자열이어야 합니다.",
                          "paymentKey: must be a string");
        return false;
    }
    if (namev && !json_is_null(namev) &&
        (!json_is_string(namev) || json_string_length(namev) == 0 ||
         utf8_chars(json_string_value(namev)) > 100)) {
        invalid_field(r, "INVALID_REQUEST", "orderName",
                      "orderName: 1자 이상 100자 이하의 문자열이어야 합니다.",
                      "orderName: must be a string of 1 to 100 characters");
        return false;
    }
    done_with_body(r);
    *order_id = oid;
    *payment_key = json_is_string(pkv) ? json_string_value(pkv) : NULL;
    *order_name = json_is_string(namev) ? json_string_value(namev) : NULL;
    return true;
}
