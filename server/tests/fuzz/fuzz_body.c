/* fuzz_body.c -- request bodies (body.c): the bytes of a POST body through body_parse, then
 * through each checker of a body that comes from outside -- confirm, cancel, session,
 * virtual-account issue, deposit -- each on a request of its own built as http.c builds one
 * (request_new, the bytes in r->body, request_free). Asserts, beyond no crash, no undefined
 * behaviour and no leak:
 *   - every refusal is a 4xx whose body is a JSON object {code, message} of strings, with the
 *     outcome `invalid`; a JSON syntax error's message says where ("line L, column C");
 *   - what a checker accepts obeys its rules (docs/api.md §2.1, §2.2, docs/admin.md §5,
 *     docs/virtual-accounts.md §6.6): orderId 6..64 of [A-Za-z0-9_-], paymentKey 1..200
 *     visible ASCII without / ? # %, amounts 1 .. 2^53-1, a dueDate in the documented form
 *     yyyy-MM-ddTHH:mm:ss[.fraction][Z|+HH:MM|-HH:MM], and the body's bytes are freed. */
#define _DEFAULT_SOURCE
#include <jansson.h>
#include <stdbool.h>

#include "body.h"
#include "fuzz.h"
#include "ledger.h"

#define MAX_SAFE_INT INT64_C(9007199254740991)

/* 2024-02-13T12:00:00+09:00: the gateway clock of the virtual-account checks. */
#define NOW_US INT64_C(1707793200000000)

static struct request *new_request(const uint8_t *data, size_t size)
{
    struct request *r = request_new();
    if (!r)
        abort();
    r->method = HM_POST;
    r->lang_en = true;
    buf_add(&r->body, data, size);
    return r;
}

static bool is_order_id(const char *s)
{
    size_t n = strlen(s);
    if (n < 6 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              (s[i] >= '0' && s[i] <= '9') || s[i] == '-' || s[i] == '_'))
            return false;
    return true;
}

static bool is_payment_key(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n > 200)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x21 || c > 0x7e || strchr("/?#%", c))
            return false;
    }
    return true;
}

static bool is_amount(int64_t a)
{
    return a >= 1 && a <= MAX_SAFE_INT;
}

static bool digits(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return true;
}

/* yyyy-MM-ddTHH:mm:ss[.fraction (1-9 digits)][Z|+HH:MM|-HH:MM], character by character. */
static bool is_due_date_form(const char *s)
{
    if (strlen(s) < 19 || !digits(s, 4) || s[4] != '-' || !digits(s + 5, 2) || s[7] != '-' ||
        !digits(s + 8, 2) || s[10] != 'T' || !digits(s + 11, 2) || s[13] != ':' ||
        !digits(s + 14, 2) || s[16] != ':' || !digits(s + 17, 2))
        return false;
    s += 19;
    if (*s == '.') {
        size_t n = strspn(s + 1, "0123456789");
        if (n < 1 || n > 9)
            return false;
        s += 1 + n;
    }
    if (*s == 'Z')
        return s[1] == '\0';
    if (*s == '+' || *s == '-')
        return strlen(s) == 6 && digits(s + 1, 2) && s[3] == ':' && digits(s + 4, 2);
    return *s == '\0';
}

/* A refused request: 4xx, a {code, message} body of strings, outcome invalid. */
static void check_refusal(const struct request *r)
{
    if (r->resp.internal) /* out of memory: 500, nothing else to say */
        return;
    FUZZ_CHECK(r->resp.status >= 400 && r->resp.status < 500, "a refusal is a 4xx");
    FUZZ_CHECK(r->obs.outcome == OUT_INVALID, "a refusal counts as invalid");
    FUZZ_CHECK(r->resp.body != NULL && r->resp.code != NULL, "a refusal has a body and a code");
    json_error_t je;
    json_t *v = json_loadb(r->resp.body, r->resp.body_len, 0, &je);
    FUZZ_CHECK(v != NULL, "the refusal's body is JSON");
    FUZZ_CHECK(json_is_string(json_object_get(v, "code")) &&
                   json_is_string(json_object_get(v, "message")),
               "the refusal's body is {code, message}");
    FUZZ_CHECK(strcmp(json_string_value(json_object_get(v, "code")), r->resp.code) == 0,
               "the body's code is the code sent");
    json_decref(v);
}

/* body_parse, then `check` on what it parsed; the request and body freed. */
static void run(const uint8_t *data, size_t size, int which)
{
    struct request *r = new_request(data, size);
    struct body *b = body_parse(r, 0);
    if (!b) {
        check_refusal(r);
        if (!r->resp.internal && strstr(r->resp.body, "Invalid JSON"))
            FUZZ_CHECK(strstr(r->resp.body, "(line ") && strstr(r->resp.body, ", column "),
                       "a JSON syntax error says where");
        request_free(r);
        return;
    }
    const char *oid = NULL, *pk = NULL, *name = NULL, *num = NULL;
    int64_t amount = 0;
    bool ok = false;
    switch (which) {
    case 0:
    case 0x10: /* the older approve path: the paymentKey from the path */
        ok = body_confirm(r, b, which ? "pk_fuzz_path" : NULL);
        if (ok)
            FUZZ_CHECK(is_payment_key(r->payment_key) && is_order_id(r->order_id) &&
                           is_amount(r->amount),
                       "a confirm accepted obeys docs/api.md §2.1");
        if (ok && which)
            FUZZ_CHECK(strcmp(r->payment_key, "pk_fuzz_path") == 0,
                       "the older approve path confirms the path's paymentKey");
        break;
    case 1:
        ok = body_cancel(r, b);
        if (ok) {
            FUZZ_CHECK(r->cancel_reason && r->cancel_reason[0], "a cancel has its reason");
            FUZZ_CHECK((r->cancel_amount == 0 || is_amount(r->cancel_amount)) &&
                           (r->refundable_amount == 0 || is_amount(r->refundable_amount)),
                       "a cancel's amounts are absent or in range");
            FUZZ_CHECK(!r->refund_bank == !r->refund_account &&
                           !r->refund_account == !r->refund_holder,
                       "a refund account is whole or absent");
        }
        break;
    case 2:
        ok = body_session(r, b, &oid, &amount, &pk, &name);
        if (ok)
            FUZZ_CHECK(is_order_id(oid) && is_amount(amount) && (!pk || is_payment_key(pk)),
                       "a session accepted obeys docs/admin.md §5");
        break;
    case 3:
        ok = body_virtual_account(r, b, NOW_US);
        if (ok) {
            FUZZ_CHECK(is_order_id(r->order_id) && is_amount(r->amount) && r->va != NULL,
                       "a virtual account accepted obeys docs/virtual-accounts.md §6.6");
            FUZZ_CHECK(strlen(r->va->bank_code) == 2 && digits(r->va->bank_code, 2),
                       "a virtual account's bank is a two-digit code");
            json_t *root = json_loadb((const char *)data, size, 0, NULL);
            json_t *due = json_object_get(root, "dueDate");
            if (json_is_string(due)) {
                FUZZ_CHECK(is_due_date_form(json_string_value(due)),
                           "an accepted dueDate has the documented form");
                FUZZ_CHECK(r->va->due_at_us > NOW_US, "an accepted dueDate is in the future");
            }
            json_decref(root);
        }
        break;
    default:
        ok = body_deposit(r, b, &oid, &num, &amount);
        if (ok)
            FUZZ_CHECK((oid || num) && (amount == 0 || is_amount(amount)),
                       "a deposit names its account and an amount in range");
        break;
    }
    if (ok)
        FUZZ_CHECK(r->body.data == NULL, "the body's bytes are freed once checked");
    else
        check_refusal(r);
    body_free(b);
    request_free(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    for (int which = 0; which < 5; which++)
        run(data, size, which);
    run(data, size, 0x10);
    return 0;
}
