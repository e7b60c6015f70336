/* stress.c -- `make stress` and check_stress's small form (stress.h): client threads send
 * requests over a set of paymentKeys under a profile that delays, loses requests and loses
 * responses, in epochs separated by resets, and each epoch's ledger is checked against every
 * answer the clients got in it.
 *
 * Resets. An epoch ends at a barrier: every client thread has had its last answer (or timeout)
 * and waits. The coordinator then waits until fakegate holds no request and has ended at least
 * as many as reached it (/metrics: fakegate_in_flight, fakegate_requests_total), so nothing of
 * the epoch can still change its ledger; switches to a fault-free profile; reads the ledger
 * (GET /__admin/payments) and every transaction (GET /v1/transactions) and checks them; lets the
 * threads probe every Idempotency-Key they used (a record left PROCESSING answers 409, a payment
 * left processing ALREADY_PROCESSING_REQUEST); only then resets (POST /__admin/reset with the
 * next epoch's profile), checks that the ledger is empty, and releases the threads. No request
 * crosses a reset and every answer belongs to the epoch it was sent in (the per-key state is
 * the epoch's, cleared at the barrier), so every epoch is checked in full and exactly, with no
 * time window or filter. paymentKeys and Idempotency-Keys are the same in every epoch: a reset
 * that kept a payment or a record would show as an answer its epoch cannot explain.
 *
 * The check. Answers prove lower bounds on a payment's progress (absent < IN_PROGRESS < DONE <
 * DONE with 1, 2, ... cancels): a confirm 200 or ALREADY_PROCESSED_PAYMENT proves DONE, a cancel
 * 200 its cancels, ALREADY_CANCELED_PAYMENT CANCELED, ... Reads show the progress at the time,
 * so a read sent after another answer was received must not show less (stale). At the end of
 * the epoch the ledger must be at least as far as every answer proved; charges <= 1 with one
 * approval transactionKey, the one every client was answered; each cancel request (its
 * cancelReason names it) applied at most once, every acknowledged one exactly once with its
 * transactionKey and amount; balance = total - cancels; the ledger's transactions,
 * confirm_attempts and idempotency_keys match what was sent. */
#define _GNU_SOURCE
#include "stress.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define TK_LEN 33          /* a transactionKey: 32 upper-case hex characters and a NUL */
#define LEVELS 24          /* progress levels tracked: 0 absent, 1 IN_PROGRESS, 2 DONE, 2 + c */
#define PROBE_TRIES 10     /* a probe answered 409 is sent again this many times, 100 ms apart */
#define PROBE_TIMEOUT_MS 2000L
#define SETTLE_TIMEOUT_MS 10000L
#define LISTED_KEYS 10     /* the Idempotency-Keys a ledger entry lists (docs/admin.md §5) */

const char *const st_server_args[] = {"--session-ttl", "86400", "--consecutive-cancel-ms", "10",
                                      NULL};

const char *const st_kind_names[ST_KINDS] = {
    "confirm same-key", "confirm new-key", "confirm keyless", "cancel partial", "cancel full",
    "cancel resend", "read by paymentKey", "read by orderId", "probe confirm", "probe cancel"};
const char *const st_outcome_names[ST_OUTCOMES] = {
    "200", "409", "ALREADY_PROCESSED_PAYMENT", "ALREADY_PROCESSING_REQUEST", "NOT_FOUND_PAYMENT",
    "NOT_CANCELABLE_PAYMENT", "ALREADY_CANCELED_PAYMENT", "FORBIDDEN_CONSECUTIVE_REQUEST",
    "NOT_CANCELABLE_AMOUNT", "timeout", "closed/reset", "other"};
const char *const st_violation_names[ST_VIOLATIONS] = {
    "charged twice", "answered but not in the ledger", "cancel applied twice", "stale read",
    "ledger inconsistent", "left PROCESSING", "unexpected answer", "unsettled"};
const char *const st_server_outcome_names[ST_SERVER_OUTCOMES] = {
    "ok", "replayed", "conflict", "business_error", "invalid", "unauthorized", "throttled",
    "capped", "dropped_request", "dropped_response", "fault_error"};

void st_config_default(st_config *c)
{
    *c = (st_config){.requests = 1000000, .threads = 32, .payments = 10000, .window = 256,
                     .resets = 4, .timeout_ms = 150, .hang_ms = 200, .seed = 42};
}

/* ---- per-paymentKey state of one epoch ----------------------------------------------------- */

struct cancel_req {
    int64_t amount;          /* cancelAmount; 0: the whole balance */
    char acked_tk[TK_LEN];   /* transactionKey of the first 200 a client got for it, or "" */
    char ledger_tk[TK_LEN];  /* the ledger's cancel of this request (set by the check), or "" */
};

struct seen_cancel {         /* a cancel some answer listed in its cancels[] */
    char tk[TK_LEN];
    int n;
    int64_t amount;
};

struct key {
    pthread_mutex_t lock;
    int n_keys;              /* confirm Idempotency-Keys <pk>-confirm-0 .. n_keys-1 handed out */
    uint64_t keys_arrived;   /* bit j: key j reached the server (j < 64) */
    bool keyless;            /* a confirm without a key was sent */
    long confirms_arrived;   /* confirms that reached the server */
    int n_cancels, cap_cancels;
    struct cancel_req *cancels;    /* cancel request n: <pk>-cancel-n, "stress cancel n" */
    int n_seen, cap_seen;
    struct seen_cancel *seen;
    char approval_tk[TK_LEN];      /* the approval some answer showed, or "" */
    char ledger_approval_tk[TK_LEN]; /* the ledger's (the check), for the probes */
    bool in_ledger;
    int max_proof;           /* the highest progress level an answer proved */
    bool proved_canceled;
    int64_t min_balance;     /* the lowest balance an answer showed (or implied) */
    int64_t proof_ns[LEVELS]; /* earliest receipt of an answer proving this level, 0: none */
    int64_t read_ns[LEVELS];  /* latest send of a read that showed exactly this level */
};

struct run {
    const fg_server *s;
    const st_config *c;
    st_result *out;
    struct key *keys;
    pthread_barrier_t bar;
    atomic_long next_op;     /* requests taken in this epoch */
    long quota;              /* this epoch's requests */
    int epoch;
    bool done;
    atomic_bool stop;        /* the run failed: threads skip to the barriers */
    char *err;               /* st_run's: why it failed (the first to fail writes it) */
    atomic_long arrived;     /* this epoch's requests that reached the server */
    atomic_long by[ST_KINDS][ST_OUTCOMES];
    pthread_mutex_t vlock;
    char probe_profile[256];
};

struct worker {
    struct run *r;
    int index;
    pthread_t thread;
    CURL *h;
    uint64_t rng;
};

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static void names(int k, char pk[24], char oid[24])
{
    snprintf(pk, 24, "pk_%05d", k);
    snprintf(oid, 24, "order_%05d", k);
}

static int64_t amount_of(int k)
{
    return 1000 + (int64_t)(k % 97) * 100;
}

static void violation(struct run *r, enum st_violation v, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void violation(struct run *r, enum st_violation v, const char *fmt, ...)
{
    char msg[280];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&r->vlock);
    st_result *o = r->out;
    o->violations++;
    o->by_violation[v]++;
    if (o->n_examples < ST_EXAMPLES)
        snprintf(o->examples[o->n_examples++], sizeof o->examples[0], "epoch %d, %s: %s",
                 r->epoch + 1, st_violation_names[v], msg);
    pthread_mutex_unlock(&r->vlock);
}

/* The run cannot go on (an admin call failed, fakegate is gone): every thread skips to the
 * barriers and st_run returns -1 with this message. */
static void fail(struct run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void fail(struct run *r, const char *fmt, ...)
{
    if (!atomic_exchange(&r->stop, true)) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->err, FG_ERR_LEN, fmt, ap);
        va_end(ap);
    }
}

static void level_name(int level, char buf[32])
{
    static const char *const low[] = {"absent", "IN_PROGRESS", "DONE"};
    if (level < 3)
        snprintf(buf, 32, "%s", low[level]);
    else
        snprintf(buf, 32, "%d cancel(s)%s", level - 2, level == LEVELS - 1 ? " or more" : "");
}

static bool is_tk(const char *s)
{
    if (s == NULL || strlen(s) != 32)
        return false;
    for (const char *p = s; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'A' && *p <= 'F')))
            return false;
    return true;
}

/* "stress cancel N" -> N, or -1. */
static int reason_index(const char *reason)
{
    int n, used = 0;
    if (reason == NULL || sscanf(reason, "stress cancel %d%n", &n, &used) != 1 ||
        reason[used] != '\0' || n < 0)
        return -1;
    return n;
}

static int64_t jint(const json_t *o, const char *key, int64_t dflt)
{
    const json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : dflt;
}

static bool str_is(const json_t *o, const char *key, const char *want)
{
    const char *v = fg_json_str(o, key);
    return v != NULL && strcmp(v, want) == 0;
}

/* ---- what one Payment (an answer's or the ledger's) says ---------------------------------- */

struct view {
    int level;
    bool canceled;
    int64_t balance;
    char approval_tk[TK_LEN];  /* from receipt.url, once approved */
    const char *last_tk;       /* lastTransactionKey (borrowed), or NULL */
    const json_t *cancels;     /* array or NULL (borrowed) */
    size_t n_cancels;
};

/* Read the Payment `p` of paymentKey k into *v, checking it is that payment and consistent in
 * itself (status, cancels, balance). False (a violation of kind `bad` filed) if it is not. */
static bool parse_payment(struct run *r, int k, const json_t *p, struct view *v,
                          enum st_violation bad, const char *what)
{
    char pk[24], oid[24];
    names(k, pk, oid);
    memset(v, 0, sizeof *v);
    const char *got_pk = fg_json_str(p, "paymentKey"), *got_oid = fg_json_str(p, "orderId");
    const char *status = fg_json_str(p, "status");
    int64_t total = jint(p, "totalAmount", -1), balance = jint(p, "balanceAmount", -1);
    const json_t *cancels = json_object_get(p, "cancels");
    if (got_pk == NULL || strcmp(got_pk, pk) != 0 || got_oid == NULL || strcmp(got_oid, oid) != 0 ||
        status == NULL || total != amount_of(k) || balance < 0 ||
        !(json_is_array(cancels) || json_is_null(cancels))) {
        violation(r, bad, "%s %s: not this payment: paymentKey %.24s, orderId %.24s, status "
                  "%.20s, totalAmount %" PRId64 " (want %" PRId64 "), balanceAmount %" PRId64, what,
                  pk, got_pk ? got_pk : "-", got_oid ? got_oid : "-", status ? status : "-", total,
                  amount_of(k), balance);
        return false;
    }
    v->cancels = json_is_array(cancels) ? cancels : NULL;
    v->n_cancels = v->cancels ? json_array_size(cancels) : 0;
    v->balance = balance;
    v->last_tk = fg_json_str(p, "lastTransactionKey");
    bool cancel_state = strcmp(status, "PARTIAL_CANCELED") == 0 || strcmp(status, "CANCELED") == 0;
    v->canceled = strcmp(status, "CANCELED") == 0;
    if (strcmp(status, "IN_PROGRESS") == 0 && v->n_cancels == 0 && v->last_tk == NULL) {
        v->level = 1;
    } else if ((strcmp(status, "DONE") == 0 && v->n_cancels == 0) ||
               (cancel_state && v->n_cancels > 0)) {
        size_t level = 2 + v->n_cancels;
        v->level = level < LEVELS ? (int)level : LEVELS - 1;
    } else {
        violation(r, bad, "%s %s: status %s with %zu cancels", what, pk, status, v->n_cancels);
        return false;
    }
    if (v->level >= 2) {
        const char *url = fg_json_str(json_object_get(p, "receipt"), "url");
        const char *id = url ? strstr(url, "transactionId=") : NULL;
        if (id)
            snprintf(v->approval_tk, TK_LEN, "%.32s", id + strlen("transactionId="));
        if (!is_tk(v->approval_tk) || !is_tk(v->last_tk)) {
            violation(r, bad, "%s %s: %s without its approval or last transactionKey", what, pk,
                      status);
            return false;
        }
    }
    int64_t left = total;
    for (size_t i = 0; i < v->n_cancels; i++) {
        const json_t *c = json_array_get(cancels, i);
        int64_t amount = jint(c, "cancelAmount", -1);
        left -= amount;
        if (!is_tk(fg_json_str(c, "transactionKey")) || amount <= 0 ||
            jint(c, "refundableAmount", -1) != left) {
            violation(r, bad, "%s %s: cancel #%zu malformed or its refundableAmount wrong", what,
                      pk, i + 1);
            return false;
        }
    }
    if (left != balance || (v->n_cancels > 0 && v->canceled != (balance == 0)) ||
        (v->n_cancels > 0 && strcmp(fg_json_str(json_array_get(cancels, v->n_cancels - 1),
                                                "transactionKey"), v->last_tk) != 0)) {
        violation(r, bad, "%s %s: balance %" PRId64 " (total less cancels %" PRId64 ") under "
                  "%s, or lastTransactionKey not the newest cancel", what, pk, balance, left,
                  status);
        return false;
    }
    return true;
}

/* ---- recording answers (the key's lock held) ---------------------------------------------- */

/* An answer received at at_ns proves level `level`: no read sent after it may show less. */
static void note_proof(struct run *r, struct key *ks, int k, int level, int64_t at_ns,
                       const char *what)
{
    for (int q = 0; q < level; q++)
        if (ks->read_ns[q] > at_ns) {
            char a[32], b[32];
            level_name(level, a);
            level_name(q, b);
            violation(r, ST_V_STALE, "pk_%05d: %s proved %s, a read sent %.1f ms after it "
                      "showed %s", k, what, a, (double)(ks->read_ns[q] - at_ns) / 1e6, b);
            break;
        }
    if (ks->proof_ns[level] == 0 || at_ns < ks->proof_ns[level])
        ks->proof_ns[level] = at_ns;
    if (level > ks->max_proof)
        ks->max_proof = level;
}

/* A read sent at sent_ns showed level `level`: no answer received before it may prove more. */
static void note_read(struct run *r, struct key *ks, int k, int level, int64_t sent_ns)
{
    for (int p = level + 1; p < LEVELS; p++)
        if (ks->proof_ns[p] != 0 && ks->proof_ns[p] < sent_ns) {
            char a[32], b[32];
            level_name(level, a);
            level_name(p, b);
            violation(r, ST_V_STALE, "pk_%05d: a read showed %s, %.1f ms after an answer "
                      "proved %s", k, a, (double)(sent_ns - ks->proof_ns[p]) / 1e6, b);
            break;
        }
    if (sent_ns > ks->read_ns[level])
        ks->read_ns[level] = sent_ns;
}

static void note_approval(struct run *r, struct key *ks, int k, const char *tk, const char *what)
{
    if (ks->approval_tk[0] == '\0')
        snprintf(ks->approval_tk, TK_LEN, "%s", tk);
    else if (strcmp(ks->approval_tk, tk) != 0)
        violation(r, ST_V_CHARGED_TWICE, "pk_%05d: %s shows approval %s, an earlier answer %s",
                  k, what, tk, ks->approval_tk);
}

static void note_seen_cancel(struct run *r, struct key *ks, int k, const json_t *c,
                             const char *what)
{
    const char *tk = fg_json_str(c, "transactionKey");
    int n = reason_index(fg_json_str(c, "cancelReason"));
    int64_t amount = jint(c, "cancelAmount", -1);
    if (n < 0 || n >= ks->n_cancels) {
        violation(r, ST_V_UNEXPECTED, "pk_%05d: %s lists a cancel no client sent (%.60s)", k,
                  what, fg_json_str(c, "cancelReason"));
        return;
    }
    for (int i = 0; i < ks->n_seen; i++) {
        struct seen_cancel *s = &ks->seen[i];
        if (strcmp(s->tk, tk) == 0) {
            if (s->n != n || s->amount != amount)
                violation(r, ST_V_UNEXPECTED, "pk_%05d: cancel %s changed: request %d %" PRId64
                          " won, now %d %" PRId64 " won", k, tk, s->n, s->amount, n, amount);
            return;
        }
        if (s->n == n) {
            violation(r, ST_V_CANCEL_TWICE, "pk_%05d: cancel request %d answered as %s and as %s",
                      k, n, s->tk, tk);
            return;
        }
    }
    if (ks->n_seen == ks->cap_seen) {
        ks->cap_seen = ks->cap_seen ? 2 * ks->cap_seen : 4;
        ks->seen = realloc(ks->seen, (size_t)ks->cap_seen * sizeof *ks->seen);
        if (!ks->seen)
            abort();
    }
    struct seen_cancel *s = &ks->seen[ks->n_seen++];
    snprintf(s->tk, TK_LEN, "%s", tk);
    s->n = n;
    s->amount = amount;
}

/* Everything a Payment answered at done_ns proves. */
static void note_view(struct run *r, struct key *ks, int k, const struct view *v, int64_t done_ns,
                      const char *what)
{
    if (v->level >= 2)
        note_approval(r, ks, k, v->approval_tk, what);
    if (v->balance < ks->min_balance)
        ks->min_balance = v->balance;
    ks->proved_canceled = ks->proved_canceled || v->canceled;
    for (size_t i = 0; i < v->n_cancels; i++)
        note_seen_cancel(r, ks, k, json_array_get(v->cancels, i), what);
    note_proof(r, ks, k, v->level, done_ns, what);
}

/* ---- requests ------------------------------------------------------------------------------- */

static void call(const struct run *r, CURL *h, const char *method, const char *path,
                 const char *body, const char *idem_key, long timeout_ms, fg_response *resp)
{
    char key_header[96];
    const char *headers[3] = {r->s->auth_header, NULL, NULL};
    if (idem_key) {
        snprintf(key_header, sizeof key_header, "Idempotency-Key: %s", idem_key);
        headers[1] = key_header;
    }
    fg_request req = {.method = method, .path = path, .body = body, .headers = headers,
                      .timeout_ms = timeout_ms};
    fg_http(r->s, h, &req, resp);
}

static enum st_outcome classify(const fg_response *resp)
{
    switch (resp->curl_code) {
    case CURLE_OK:
        break;
    case CURLE_OPERATION_TIMEDOUT:
        return ST_TIMEOUT;
    case CURLE_GOT_NOTHING:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_PARTIAL_FILE:
        return ST_CONNECTION;
    default:
        return ST_OTHER;
    }
    if (resp->status == 200)
        return resp->json ? ST_OK : ST_OTHER;
    static const struct {
        long status;
        const char *code;
        enum st_outcome o;
    } table[] = {
        {409, "IDEMPOTENT_REQUEST_PROCESSING", ST_CONFLICT},
        {400, "ALREADY_PROCESSED_PAYMENT", ST_ALREADY_PROCESSED},
        {400, "ALREADY_PROCESSING_REQUEST", ST_ALREADY_PROCESSING},
        {404, "NOT_FOUND_PAYMENT", ST_NOT_FOUND},
        {403, "NOT_CANCELABLE_PAYMENT", ST_NOT_CANCELABLE},
        {400, "ALREADY_CANCELED_PAYMENT", ST_ALREADY_CANCELED},
        {403, "FORBIDDEN_CONSECUTIVE_REQUEST", ST_CONSECUTIVE},
        {403, "NOT_CANCELABLE_AMOUNT", ST_NOT_CANCELABLE_AMOUNT},
    };
    const char *code = fg_error_code(resp);
    for (size_t i = 0; code && i < sizeof table / sizeof table[0]; i++)
        if (resp->status == table[i].status && strcmp(code, table[i].code) == 0)
            return table[i].o;
    return ST_OTHER;
}

/* Did the request reach the server? An answer, a timeout (the request was written: loopback),
 * or a connection the server closed or reset after reading it (a drop fault). */
static bool arrived(const fg_response *resp)
{
    return resp->status > 0 || resp->curl_code == CURLE_OPERATION_TIMEDOUT ||
           resp->curl_code == CURLE_GOT_NOTHING || resp->curl_code == CURLE_RECV_ERROR ||
           resp->curl_code == CURLE_PARTIAL_FILE;
}

#define BIT(o) (1u << (o))
static const unsigned allowed_mask[ST_KINDS] = {
    [ST_CONFIRM_SAME_KEY] = BIT(ST_OK) | BIT(ST_CONFLICT) | BIT(ST_ALREADY_PROCESSED) |
                            BIT(ST_ALREADY_PROCESSING) | BIT(ST_TIMEOUT) | BIT(ST_CONNECTION),
    [ST_CONFIRM_NEW_KEY] = BIT(ST_OK) | BIT(ST_CONFLICT) | BIT(ST_ALREADY_PROCESSED) |
                           BIT(ST_ALREADY_PROCESSING) | BIT(ST_TIMEOUT) | BIT(ST_CONNECTION),
    /* no key, no record: a 409 would be some other request's */
    [ST_CONFIRM_KEYLESS] = BIT(ST_OK) | BIT(ST_ALREADY_PROCESSED) | BIT(ST_ALREADY_PROCESSING) |
                           BIT(ST_TIMEOUT) | BIT(ST_CONNECTION),
#define CANCEL_ANSWERS                                                                        \
    (BIT(ST_OK) | BIT(ST_CONFLICT) | BIT(ST_NOT_FOUND) | BIT(ST_NOT_CANCELABLE) |             \
     BIT(ST_ALREADY_CANCELED) | BIT(ST_CONSECUTIVE) | BIT(ST_NOT_CANCELABLE_AMOUNT) |          \
     BIT(ST_TIMEOUT) | BIT(ST_CONNECTION))
    [ST_CANCEL_PARTIAL] = CANCEL_ANSWERS,
    [ST_CANCEL_FULL] = CANCEL_ANSWERS & ~BIT(ST_NOT_CANCELABLE_AMOUNT),
    [ST_CANCEL_RESEND] = CANCEL_ANSWERS,
    [ST_READ_BY_KEY] = BIT(ST_OK) | BIT(ST_NOT_FOUND) | BIT(ST_TIMEOUT) | BIT(ST_CONNECTION),
    [ST_READ_BY_ORDER] = BIT(ST_OK) | BIT(ST_NOT_FOUND) | BIT(ST_TIMEOUT) | BIT(ST_CONNECTION),
    [ST_PROBE_CONFIRM] = BIT(ST_OK) | BIT(ST_ALREADY_PROCESSED),
    [ST_PROBE_CANCEL] = (CANCEL_ANSWERS & ~(BIT(ST_CONFLICT) | BIT(ST_TIMEOUT) |
                                            BIT(ST_CONNECTION))),
};

/* Count the answer; false (a violation filed) if no rule allows it for this kind. */
static bool tally(struct run *r, enum st_kind kind, enum st_outcome o, int k, const char *detail,
                  const fg_response *resp)
{
    atomic_fetch_add_explicit(&r->by[kind][o], 1, memory_order_relaxed);
    if (resp->curl_code == CURLE_COULDNT_CONNECT) {
        fail(r, "fakegate stopped answering (%s pk_%05d: %s)", st_kind_names[kind], k,
             resp->curl_error);
        return false;
    }
    if (kind < ST_PROBE_CONFIRM && arrived(resp))
        atomic_fetch_add_explicit(&r->arrived, 1, memory_order_relaxed);
    if (allowed_mask[kind] & BIT(o))
        return true;
    if (kind >= ST_PROBE_CONFIRM && (o == ST_CONFLICT || o == ST_ALREADY_PROCESSING))
        return false; /* the probe's caller files it as left PROCESSING */
    violation(r, ST_V_UNEXPECTED, "%s pk_%05d%s: %ld %s %.100s", st_kind_names[kind], k, detail,
              resp->status, resp->status ? "" : resp->curl_error, resp->body);
    return false;
}

static void confirm_body(int k, char *buf, size_t size)
{
    char pk[24], oid[24];
    names(k, pk, oid);
    snprintf(buf, size, "{\"paymentKey\":\"%s\",\"orderId\":\"%s\",\"amount\":%" PRId64 "}", pk,
             oid, amount_of(k));
}

static void cancel_body(int n, int64_t amount, char *buf, size_t size)
{
    if (amount > 0)
        snprintf(buf, size, "{\"cancelReason\":\"stress cancel %d\",\"cancelAmount\":%" PRId64 "}",
                 n, amount);
    else
        snprintf(buf, size, "{\"cancelReason\":\"stress cancel %d\"}", n);
}

/* A confirm of k under key j (-1: none) was answered *resp. */
static void record_confirm(struct run *r, int k, int j, enum st_kind kind, const fg_response *resp)
{
    struct key *ks = &r->keys[k];
    enum st_outcome o = classify(resp);
    char detail[32];
    snprintf(detail, sizeof detail, " key %d", j);
    bool ok = tally(r, kind, o, k, j < 0 ? " (no key)" : detail, resp);
    pthread_mutex_lock(&ks->lock);
    if (arrived(resp)) {
        ks->confirms_arrived++;
        if (j >= 0 && j < 64)
            ks->keys_arrived |= UINT64_C(1) << j;
    }
    if (ok && o == ST_OK) {
        struct view v;
        if (parse_payment(r, k, resp->json, &v, ST_V_UNEXPECTED, "a confirm 200")) {
            if (v.level != 2 || strcmp(v.last_tk, v.approval_tk) != 0)
                violation(r, ST_V_UNEXPECTED, "pk_%05d: a confirm 200 that is not its DONE "
                          "approval", k);
            else
                note_view(r, ks, k, &v, resp->done_ns, "a confirm 200");
        }
    } else if (o == ST_ALREADY_PROCESSED) {
        note_proof(r, ks, k, 2, resp->done_ns, "ALREADY_PROCESSED_PAYMENT");
    } else if (ok && (o == ST_ALREADY_PROCESSING || o == ST_CONFLICT)) {
        note_proof(r, ks, k, 1, resp->done_ns, st_outcome_names[o]);
    }
    pthread_mutex_unlock(&ks->lock);
}

/* A cancel request n of k (cancelAmount `amount`, 0: whole) was answered *resp. */
static void record_cancel(struct run *r, int k, int n, int64_t amount, enum st_kind kind,
                          const fg_response *resp)
{
    struct key *ks = &r->keys[k];
    enum st_outcome o = classify(resp);
    char detail[32];
    snprintf(detail, sizeof detail, " cancel %d", n);
    bool ok = tally(r, kind, o, k, detail, resp);
    if (!ok)
        return;
    pthread_mutex_lock(&ks->lock);
    struct view v;
    switch (o) {
    case ST_OK:
        if (!parse_payment(r, k, resp->json, &v, ST_V_UNEXPECTED, "a cancel 200"))
            break;
        if (v.n_cancels == 0) {
            violation(r, ST_V_UNEXPECTED, "pk_%05d: a cancel 200 without cancels", k);
            break;
        }
        const json_t *mine = json_array_get(v.cancels, v.n_cancels - 1);
        if (reason_index(fg_json_str(mine, "cancelReason")) != n ||
            (amount > 0 ? jint(mine, "cancelAmount", -1) != amount
                        : jint(mine, "refundableAmount", -1) != 0)) {
            violation(r, ST_V_UNEXPECTED, "pk_%05d: cancel %d answered with another cancel "
                      "(%.40s, %" PRId64 " won)", k, n, fg_json_str(mine, "cancelReason"),
                      jint(mine, "cancelAmount", -1));
            break;
        }
        struct cancel_req *c = &ks->cancels[n];
        if (c->acked_tk[0] == '\0')
            snprintf(c->acked_tk, TK_LEN, "%s", v.last_tk);
        else if (strcmp(c->acked_tk, v.last_tk) != 0)
            violation(r, ST_V_CANCEL_TWICE, "pk_%05d: cancel %d answered 200 as %s and as %s", k,
                      n, c->acked_tk, v.last_tk);
        note_view(r, ks, k, &v, resp->done_ns, "a cancel 200");
        break;
    case ST_ALREADY_CANCELED:
        ks->proved_canceled = true;
        note_proof(r, ks, k, 3, resp->done_ns, "ALREADY_CANCELED_PAYMENT");
        break;
    case ST_CONSECUTIVE: /* DONE or PARTIAL_CANCELED with a previous cancel */
        note_proof(r, ks, k, 3, resp->done_ns, "FORBIDDEN_CONSECUTIVE_REQUEST");
        break;
    case ST_NOT_CANCELABLE_AMOUNT: /* approved, and the balance was below the amount */
        if (amount - 1 < ks->min_balance)
            ks->min_balance = amount - 1;
        note_proof(r, ks, k, 2, resp->done_ns, "NOT_CANCELABLE_AMOUNT");
        break;
    case ST_NOT_CANCELABLE:
        note_proof(r, ks, k, 1, resp->done_ns, "NOT_CANCELABLE_PAYMENT");
        break;
    default: /* 404 (perhaps stored before the payment existed), 409, no answer */
        break;
    }
    pthread_mutex_unlock(&ks->lock);
}

static void record_read(struct run *r, int k, enum st_kind kind, const fg_response *resp)
{
    struct key *ks = &r->keys[k];
    enum st_outcome o = classify(resp);
    if (!tally(r, kind, o, k, "", resp))
        return;
    pthread_mutex_lock(&ks->lock);
    struct view v;
    if (o == ST_OK && parse_payment(r, k, resp->json, &v, ST_V_UNEXPECTED, "a read")) {
        note_read(r, ks, k, v.level, resp->sent_ns);
        note_view(r, ks, k, &v, resp->done_ns, "a read");
    } else if (o == ST_NOT_FOUND) {
        note_read(r, ks, k, 0, resp->sent_ns);
    }
    pthread_mutex_unlock(&ks->lock);
}

/* ---- the client threads ---------------------------------------------------------------------- */

/* Per mille of each kind for a paymentKey that just entered the window, and for one that has
 * been in it a while: confirms first, then cancels; reads and resends all along. */
static const int kind_weights[2][ST_PROBE_CONFIRM] = {
    {420, 80, 80, 40, 10, 20, 180, 170},
    {150, 60, 60, 200, 50, 130, 180, 170},
};

static enum st_kind pick_kind(bool young, int pick)
{
    const int *w = kind_weights[young ? 0 : 1];
    for (int i = 0; i < ST_PROBE_CONFIRM; i++) {
        if (pick < w[i])
            return (enum st_kind)i;
        pick -= w[i];
    }
    return ST_READ_BY_ORDER;
}

static struct cancel_req *new_cancel(struct key *ks, int64_t amount, int *n)
{
    if (ks->n_cancels == ks->cap_cancels) {
        ks->cap_cancels = ks->cap_cancels ? 2 * ks->cap_cancels : 4;
        ks->cancels = realloc(ks->cancels, (size_t)ks->cap_cancels * sizeof *ks->cancels);
        if (!ks->cancels)
            abort();
    }
    *n = ks->n_cancels++;
    struct cancel_req *c = &ks->cancels[*n];
    memset(c, 0, sizeof *c);
    c->amount = amount;
    return c;
}

/* Request g of the epoch: its paymentKey from the window at g, its kind by the weights. */
static void one_request(struct worker *w, long g)
{
    struct run *r = w->r;
    const st_config *c = r->c;
    uint64_t x = splitmix64(&w->rng), y = splitmix64(&w->rng);
    long base = (long)((long long)g * c->payments / r->quota);
    int offset = (int)(x % (uint64_t)c->window);
    int k = (int)((base + offset) % c->payments);
    enum st_kind kind = pick_kind(offset >= c->window * 65 / 100, (int)((x >> 32) % 1000));
    struct key *ks = &r->keys[k];
    char pk[24], oid[24], path[96], body[192], key[64];
    names(k, pk, oid);
    fg_response resp;

    if (kind <= ST_CONFIRM_KEYLESS) {
        int j = -1;
        pthread_mutex_lock(&ks->lock);
        if (kind == ST_CONFIRM_SAME_KEY)
            j = ks->n_keys > 0 ? ks->n_keys - 1 : ks->n_keys++;
        else if (kind == ST_CONFIRM_NEW_KEY)
            j = ks->n_keys++;
        else
            ks->keyless = true;
        pthread_mutex_unlock(&ks->lock);
        snprintf(key, sizeof key, "%s-confirm-%d", pk, j);
        confirm_body(k, body, sizeof body);
        call(r, w->h, "POST", "/v1/payments/confirm", body, j >= 0 ? key : NULL, c->timeout_ms,
             &resp);
        record_confirm(r, k, j, kind, &resp);
    } else if (kind <= ST_CANCEL_RESEND) {
        int n;
        int64_t amount;
        pthread_mutex_lock(&ks->lock);
        if (kind == ST_CANCEL_RESEND && ks->n_cancels > 0) {
            n = (int)(y % (uint64_t)ks->n_cancels);
            amount = ks->cancels[n].amount;
        } else {
            if (kind == ST_CANCEL_RESEND)
                kind = ST_CANCEL_PARTIAL; /* nothing to resend yet */
            amount = kind == ST_CANCEL_FULL ? 0 : amount_of(k) / 10 * (int64_t)(1 + y % 3);
            new_cancel(ks, amount, &n);
        }
        pthread_mutex_unlock(&ks->lock);
        snprintf(key, sizeof key, "%s-cancel-%d", pk, n);
        snprintf(path, sizeof path, "/v1/payments/%s/cancel", pk);
        cancel_body(n, amount, body, sizeof body);
        call(r, w->h, "POST", path, body, key, c->timeout_ms, &resp);
        record_cancel(r, k, n, amount, kind, &resp);
    } else {
        if (kind == ST_READ_BY_KEY)
            snprintf(path, sizeof path, "/v1/payments/%s", pk);
        else
            snprintf(path, sizeof path, "/v1/payments/orders/%s", oid);
        call(r, w->h, "GET", path, NULL, NULL, c->timeout_ms, &resp);
        record_read(r, k, kind, &resp);
    }
    fg_response_fini(&resp);
}

/* Send a probe until it is answered something other than 409, ALREADY_PROCESSING_REQUEST or
 * nothing, at most PROBE_TRIES times. Returns its outcome (the last one). */
static enum st_outcome probe(struct worker *w, enum st_kind kind, int k, const char *path,
                             const char *body, const char *key, fg_response *resp)
{
    enum st_outcome o = ST_OTHER;
    for (int i = 0; i < PROBE_TRIES; i++) {
        if (i > 0) {
            fg_response_fini(resp);
            fg_pause_ms(100); /* polling a record's state, bounded */
        }
        call(w->r, w->h, "POST", path, body, key, PROBE_TIMEOUT_MS, resp);
        o = classify(resp);
        if (o != ST_CONFLICT && o != ST_ALREADY_PROCESSING && o != ST_TIMEOUT &&
            o != ST_CONNECTION)
            break; /* only the last try is counted */
    }
    char detail[80];
    snprintf(detail, sizeof detail, " %s", key ? key : "(no key)");
    if (!tally(w->r, kind, o, k, detail, resp))
        if (o == ST_CONFLICT || o == ST_ALREADY_PROCESSING)
            violation(w->r, ST_V_STUCK, "pk_%05d %s: %s %d times, 100 ms apart, after every "
                      "request had ended", k, key ? key : "(no key)", st_outcome_names[o],
                      PROBE_TRIES);
    return o;
}

/* After the check: every key this thread's paymentKeys used, once more, without faults: the
 * keyless confirm (if one was sent), each confirm key, each cancel key. */
static void run_probes(struct worker *w)
{
    struct run *r = w->r;
    for (int k = w->index; k < r->c->payments && !atomic_load(&r->stop); k += r->c->threads) {
        struct key *ks = &r->keys[k];
        char pk[24], oid[24], path[96], body[192], key[64], approval[TK_LEN];
        names(k, pk, oid);
        snprintf(approval, TK_LEN, "%s", ks->ledger_approval_tk);
        confirm_body(k, body, sizeof body);
        for (int j = -1; j < ks->n_keys; j++) {
            if (j < 0 && !(ks->keyless && ks->in_ledger))
                continue;
            snprintf(key, sizeof key, "%s-confirm-%d", pk, j);
            fg_response resp;
            enum st_outcome o = probe(w, ST_PROBE_CONFIRM, k, "/v1/payments/confirm", body,
                                      j >= 0 ? key : NULL, &resp);
            struct view v;
            if (o == ST_OK && parse_payment(r, k, resp.json, &v, ST_V_UNEXPECTED, "a probe")) {
                if (approval[0] == '\0')
                    snprintf(approval, TK_LEN, "%s", v.approval_tk); /* it had never run */
                else if (strcmp(approval, v.approval_tk) != 0)
                    violation(r, ST_V_CHARGED_TWICE, "%s: a probe of %s approved %s, the "
                              "ledger had %s", pk, j >= 0 ? key : "(no key)", v.approval_tk,
                              approval);
            } else if (o == ST_ALREADY_PROCESSED && approval[0] == '\0') {
                violation(r, ST_V_LEDGER, "%s: the ledger had it IN_PROGRESS, a probe of %s got "
                          "ALREADY_PROCESSED_PAYMENT", pk, j >= 0 ? key : "(no key)");
            }
            fg_response_fini(&resp);
        }
        snprintf(path, sizeof path, "/v1/payments/%s/cancel", pk);
        for (int n = 0; n < ks->n_cancels; n++) {
            const struct cancel_req *c = &ks->cancels[n];
            snprintf(key, sizeof key, "%s-cancel-%d", pk, n);
            cancel_body(n, c->amount, body, sizeof body);
            fg_response resp;
            enum st_outcome o = probe(w, ST_PROBE_CANCEL, k, path, body, key, &resp);
            struct view v;
            bool parsed = o == ST_OK &&
                          parse_payment(r, k, resp.json, &v, ST_V_UNEXPECTED, "a probe");
            if (c->ledger_tk[0] != '\0' && parsed && strcmp(v.last_tk, c->ledger_tk) != 0)
                violation(r, ST_V_CANCEL_TWICE, "%s: cancel %d is %s in the ledger, a resend of "
                          "its key applied it again as %s", pk, n, c->ledger_tk, v.last_tk);
            else if (c->ledger_tk[0] != '\0' && !parsed && o != ST_CONFLICT)
                violation(r, ST_V_LEDGER, "%s: cancel %d is %s in the ledger, but its key's "
                          "record does not replay it: a resend got %s", pk, n, c->ledger_tk,
                          st_outcome_names[o]);
            else if (c->ledger_tk[0] == '\0' && parsed &&
                     reason_index(fg_json_str(json_array_get(v.cancels, v.n_cancels - 1),
                                              "cancelReason")) != n)
                violation(r, ST_V_UNEXPECTED, "%s: a probe of cancel %d answered with another "
                          "cancel", pk, n);
            fg_response_fini(&resp);
        }
    }
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct run *r = w->r;
    for (;;) {
        pthread_barrier_wait(&r->bar); /* the epoch starts, or the run is over */
        if (r->done)
            break;
        w->rng = r->c->seed * UINT64_C(0x2545f4914f6cdd1d) ^
                 (uint64_t)(r->epoch + 1) * UINT64_C(0x9e3779b97f4a7c15) ^ (uint64_t)w->index;
        for (;;) {
            long g = atomic_fetch_add(&r->next_op, 1);
            if (g >= r->quota || atomic_load(&r->stop))
                break;
            one_request(w, g);
        }
        pthread_barrier_wait(&r->bar); /* every request of the epoch has its answer */
        pthread_barrier_wait(&r->bar); /* the ledger is checked */
        run_probes(w);
        pthread_barrier_wait(&r->bar); /* every probe is done */
    }
    return NULL;
}

/* ---- the coordinator: settle, check, reset ----------------------------------------------- */

/* The profile of epoch e: latency on every route; confirms and cancels lose 1 request in 70
 * and 1 response in 55 (held hang_ms, closed or reset), reads 1 in 250 of each. */
static void stress_profile(const st_config *c, int epoch, char *buf, size_t size)
{
    char faults[640];
    snprintf(faults, sizeof faults,
             "[{\"kind\":\"drop_request\",\"p\":0.01,\"how\":\"hang\",\"hang_ms\":%ld},"
             "{\"kind\":\"drop_request\",\"p\":0.004,\"how\":\"reset\"},"
             "{\"kind\":\"drop_response\",\"p\":0.01,\"how\":\"hang\",\"hang_ms\":%ld},"
             "{\"kind\":\"drop_response\",\"p\":0.004,\"how\":\"close\"},"
             "{\"kind\":\"drop_response\",\"p\":0.004,\"how\":\"reset\"}]",
             c->hang_ms, c->hang_ms);
    snprintf(buf, size,
             "{\"name\":\"stress-lossy\",\"seed\":%" PRIu64 ",\"routes\":{"
             "\"confirm\":{\"queue_latency\":{\"dist\":\"uniform\",\"min_ms\":0,\"max_ms\":1},"
             "\"latency\":{\"dist\":\"uniform\",\"min_ms\":0,\"max_ms\":4},\"faults\":%s},"
             "\"cancel\":{\"latency\":{\"dist\":\"uniform\",\"min_ms\":0,\"max_ms\":3},"
             "\"faults\":%s},"
             "\"read\":{\"latency\":{\"dist\":\"uniform\",\"min_ms\":0,\"max_ms\":1},\"faults\":["
             "{\"kind\":\"drop_request\",\"p\":0.004,\"how\":\"hang\",\"hang_ms\":%ld},"
             "{\"kind\":\"drop_response\",\"p\":0.004,\"how\":\"close\"}]},"
             "\"default\":{\"latency\":{\"dist\":\"fixed\",\"ms\":0}}}}",
             c->seed + (uint64_t)epoch, faults, faults, c->hang_ms);
}

static int admin_send(struct run *r, CURL *h, const char *method, const char *path,
                      const char *body)
{
    fg_request req = {.method = method, .path = path, .body = body};
    fg_response resp;
    fg_http(r->s, h, &req, &resp);
    int rc = resp.status == 200 ? 0 : -1;
    if (rc != 0)
        fail(r, "%s %s: %ld %s %.200s", method, path, resp.status, resp.curl_error,
             resp.body);
    fg_response_fini(&resp);
    return rc;
}

struct metrics_now {
    long in_flight, ended;
    long outcomes[ST_SERVER_OUTCOMES];
};

static int read_metrics(struct run *r, CURL *h, struct metrics_now *m)
{
    memset(m, 0, sizeof *m);
    fg_request req = {.path = "/metrics"};
    fg_response resp;
    int rc = fg_http(r->s, h, &req, &resp) == 0 && resp.status == 200 ? 0 : -1;
    char *save = NULL;
    for (char *line = rc == 0 ? strtok_r(resp.body, "\n", &save) : NULL; line;
         line = strtok_r(NULL, "\n", &save)) {
        const char *close = strchr(line, '}');
        if (close == NULL)
            continue;
        long v = (long)strtod(close + 1, NULL);
        if (strncmp(line, "fakegate_in_flight{", 19) == 0) {
            m->in_flight += v;
        } else if (strncmp(line, "fakegate_requests_total{", 24) == 0) {
            m->ended += v;
            const char *o = strstr(line, "outcome=\"");
            for (int i = 0; o && i < ST_SERVER_OUTCOMES; i++) {
                size_t len = strlen(st_server_outcome_names[i]);
                if (strncmp(o + 9, st_server_outcome_names[i], len) == 0 && o[9 + len] == '"')
                    m->outcomes[i] += v;
            }
        }
    }
    fg_response_fini(&resp);
    return rc;
}

/* Wait until fakegate holds no request and has ended every one that reached it: then nothing
 * of this epoch can change its ledger any more. */
static int settle(struct run *r, CURL *h, struct metrics_now *m)
{
    long want = atomic_load(&r->arrived);
    int64_t until = fg_now_ms() + SETTLE_TIMEOUT_MS + r->c->hang_ms;
    for (;;) {
        if (read_metrics(r, h, m) != 0) {
            fail(r, "GET /metrics failed");
            return -1;
        }
        if (m->in_flight == 0 && m->ended >= want)
            return 0;
        if (fg_now_ms() > until) {
            violation(r, ST_V_UNSETTLED, "%ld requests still in flight, %ld ended of %ld that "
                      "reached the server, %ld ms after the last answer", m->in_flight, m->ended,
                      want, SETTLE_TIMEOUT_MS + r->c->hang_ms);
            return 0;
        }
        fg_pause_ms(10); /* polling the server's counters, bounded */
    }
}

static int key_index(const struct run *r, const char *pk)
{
    int k, used = 0;
    if (pk == NULL || sscanf(pk, "pk_%5d%n", &k, &used) != 1 || used != 8 || pk[used] != '\0' ||
        k < 0 || k >= r->c->payments)
        return -1;
    return k;
}

struct txrow {
    int k;
    bool approval;
    int64_t amount;
    char tk[TK_LEN];
};

static int cmp_row(const void *a, const void *b)
{
    const struct txrow *x = a, *y = b;
    return x->k != y->k ? (x->k < y->k ? -1 : 1) : strcmp(x->tk, y->tk);
}

/* Every row of GET /v1/transactions, by paymentKey. Caller frees *rows. */
static int fetch_transactions(struct run *r, CURL *h, struct txrow **rows, size_t *n_rows)
{
    char after[TK_LEN] = "";
    size_t cap = 0;
    *rows = NULL;
    *n_rows = 0;
    for (;;) {
        char path[256];
        snprintf(path, sizeof path, "/v1/transactions?startDate=2000-01-01T00:00:00&"
                 "endDate=2099-12-31T23:59:59&limit=5000%s%s",
                 after[0] ? "&startingAfter=" : "", after);
        fg_response resp;
        call(r, h, "GET", path, NULL, NULL, 30000, &resp);
        if (resp.status != 200 || !json_is_array(resp.json)) {
            fail(r, "GET /v1/transactions: %ld %s %.200s", resp.status, resp.curl_error,
                 resp.body);
            fg_response_fini(&resp);
            return -1;
        }
        size_t m = json_array_size(resp.json);
        for (size_t i = 0; i < m; i++) {
            const json_t *t = json_array_get(resp.json, i);
            const char *tk = fg_json_str(t, "transactionKey");
            int k = key_index(r, fg_json_str(t, "paymentKey"));
            if (k < 0 || !is_tk(tk)) {
                violation(r, ST_V_LEDGER, "a transaction of no payment a client confirmed: "
                          "%.60s", fg_json_str(t, "paymentKey"));
                continue;
            }
            if (*n_rows == cap) {
                cap = cap ? 2 * cap : 4096;
                *rows = realloc(*rows, cap * sizeof **rows);
                if (*rows == NULL)
                    abort();
            }
            struct txrow *row = &(*rows)[(*n_rows)++];
            row->k = k;
            row->approval = str_is(t, "status", "DONE");
            row->amount = jint(t, "amount", -1);
            snprintf(row->tk, TK_LEN, "%s", tk);
        }
        if (m > 0)
            snprintf(after, TK_LEN, "%s",
                     fg_json_str(json_array_get(resp.json, m - 1), "transactionKey"));
        fg_response_fini(&resp);
        if (m < 5000)
            break;
    }
    qsort(*rows, *n_rows, sizeof **rows, cmp_row);
    return 0;
}

/* The ledger's entry for paymentKey k (NULL: none) and its transactions rows[lo, hi) against
 * everything the epoch's answers proved. Leaves the ledger's approval and cancels in the key
 * state for the probes. */
static void check_key(struct run *r, int k, const json_t *entry, const struct txrow *rows,
                      size_t lo, size_t hi)
{
    struct key *ks = &r->keys[k];
    st_result *o = r->out;
    char pk[24], oid[24], a[32], b[32];
    names(k, pk, oid);
    if (entry == NULL) {
        if (ks->max_proof >= 1 || ks->confirms_arrived > 0) {
            level_name(ks->max_proof, a);
            violation(r, ST_V_NOT_IN_LEDGER, "%s: not in the ledger, though %ld confirms "
                      "reached the server and answers proved %s", pk, ks->confirms_arrived, a);
        }
        if (hi > lo)
            violation(r, ST_V_LEDGER, "%s: %zu transactions, no payment", pk, hi - lo);
        return;
    }
    ks->in_ledger = true;
    o->payments++;
    int64_t charges = jint(entry, "charges", -1), attempts = jint(entry, "confirm_attempts", -1);
    o->charges += charges > 0 ? charges : 0;
    if (charges > o->max_charges)
        o->max_charges = charges;
    o->confirm_attempts += attempts > 0 ? attempts : 0;
    if (charges > 1)
        violation(r, ST_V_CHARGED_TWICE, "%s: charges %" PRId64, pk, charges);
    struct view v;
    if (!parse_payment(r, k, json_object_get(entry, "payment"), &v, ST_V_LEDGER, "the ledger's"))
        return;
    level_name(v.level, a);
    if (v.level == 1)
        o->left_in_progress++;
    if ((v.level >= 2) != (charges == 1))
        violation(r, ST_V_LEDGER, "%s: charges %" PRId64 " at %s", pk, charges, a);
    if (attempts < ks->confirms_arrived)
        violation(r, ST_V_LEDGER, "%s: confirm_attempts %" PRId64 ", but %ld confirms reached "
                  "the server", pk, attempts, ks->confirms_arrived);

    /* idempotency_keys: exactly the keys whose confirms reached the server */
    const json_t *keys = json_object_get(entry, "idempotency_keys");
    uint64_t listed = 0;
    size_t i;
    const json_t *kv;
    char prefix[32];
    int plen = snprintf(prefix, sizeof prefix, "%s-confirm-", pk);
    json_array_foreach(keys, i, kv) {
        const char *sk = json_string_value(kv);
        int j = -1, used = 0;
        if (sk == NULL || strncmp(sk, prefix, (size_t)plen) != 0 ||
            sscanf(sk + plen, "%d%n", &j, &used) != 1 || sk[plen + used] != '\0' || j < 0 ||
            j >= ks->n_keys)
            violation(r, ST_V_LEDGER, "%s: idempotency_keys lists %.60s, which no client sent",
                      pk, sk ? sk : "a non-string");
        else if (j < 64)
            listed |= UINT64_C(1) << j;
    }
    /* A payment lists its first LISTED_KEYS keys and counts confirms with others
     * (docs/admin.md §5): with fewer, exactly the keys that arrived; with that many, some of
     * them, and the rest counted. */
    int64_t unlisted = jint(entry, "idempotency_keys_unlisted", -1);
    uint64_t rest = ks->keys_arrived & ~listed;
    bool full = json_is_array(keys) && json_array_size(keys) == LISTED_KEYS;
    if (!json_is_array(keys) || unlisted < 0 || (listed & ~ks->keys_arrived) != 0 ||
        (!full && (rest != 0 || unlisted != 0)) ||
        (full && unlisted < __builtin_popcountll(rest)))
        violation(r, ST_V_LEDGER, "%s: idempotency_keys %#" PRIx64 " (bit j: key j) and %" PRId64
                  " unlisted, keys that reached the server %#" PRIx64, pk, listed, unlisted,
                  ks->keys_arrived);

    /* at least as far as every answer proved */
    level_name(ks->max_proof, b);
    if (v.level < ks->max_proof)
        violation(r, ST_V_NOT_IN_LEDGER, "%s: the ledger shows %s, an answer proved %s", pk, a,
                  b);
    if (ks->proved_canceled && !v.canceled)
        violation(r, ST_V_NOT_IN_LEDGER, "%s: answered CANCELED, the ledger shows %s", pk, a);
    if (v.balance > ks->min_balance)
        violation(r, ST_V_NOT_IN_LEDGER, "%s: balance %" PRId64 ", an answer showed or implied "
                  "at most %" PRId64, pk, v.balance, ks->min_balance);
    if (v.level >= 2) {
        snprintf(ks->ledger_approval_tk, TK_LEN, "%s", v.approval_tk);
        if (ks->approval_tk[0] != '\0') {
            o->approvals_answered++;
            if (strcmp(ks->approval_tk, v.approval_tk) != 0)
                violation(r, ST_V_CHARGED_TWICE, "%s: clients were answered approval %s, the "
                          "ledger's is %s", pk, ks->approval_tk, v.approval_tk);
        }
    }

    /* cancels: each request at most once, as asked, each with its transaction */
    for (size_t c = 0; c < v.n_cancels; c++) {
        const json_t *e = json_array_get(v.cancels, c);
        const char *tk = fg_json_str(e, "transactionKey");
        int n = reason_index(fg_json_str(e, "cancelReason"));
        int64_t amount = jint(e, "cancelAmount", -1);
        o->cancels_in_ledger++;
        if (n < 0 || n >= ks->n_cancels) {
            violation(r, ST_V_LEDGER, "%s: cancel %s (%.40s) that no client sent", pk, tk,
                      fg_json_str(e, "cancelReason"));
            continue;
        }
        struct cancel_req *q = &ks->cancels[n];
        if (q->ledger_tk[0] != '\0')
            violation(r, ST_V_CANCEL_TWICE, "%s: cancel request %d applied twice: %s and %s", pk,
                      n, q->ledger_tk, tk);
        else
            snprintf(q->ledger_tk, TK_LEN, "%s", tk);
        if (q->amount > 0 ? amount != q->amount : jint(e, "refundableAmount", -1) != 0)
            violation(r, ST_V_LEDGER, "%s: cancel %d of %" PRId64 " won, asked %" PRId64
                      " (0: the whole balance)", pk, n, amount, q->amount);
        bool found = false;
        for (size_t t = lo; t < hi && !found; t++)
            found = !rows[t].approval && strcmp(rows[t].tk, tk) == 0 && rows[t].amount == amount;
        if (!found)
            violation(r, ST_V_LEDGER, "%s: cancel %s has no transaction of %" PRId64 " won", pk,
                      tk, amount);
    }
    size_t approvals = 0, cancel_rows = 0;
    for (size_t t = lo; t < hi; t++) {
        if (!rows[t].approval) {
            cancel_rows++;
        } else if (++approvals, strcmp(rows[t].tk, v.approval_tk) != 0 ||
                   rows[t].amount != amount_of(k)) {
            violation(r, ST_V_LEDGER, "%s: approval transaction %s of %" PRId64 " won, the "
                      "payment's approval is %s", pk, rows[t].tk, rows[t].amount, v.approval_tk);
        }
    }
    if ((int64_t)approvals != charges)
        violation(r, approvals > 1 ? ST_V_CHARGED_TWICE : ST_V_LEDGER, "%s: %zu approval "
                  "transactions, charges %" PRId64, pk, approvals, charges);
    if (cancel_rows != v.n_cancels)
        violation(r, ST_V_LEDGER, "%s: %zu cancel transactions, %zu cancels", pk, cancel_rows,
                  v.n_cancels);

    /* every acknowledged cancel applied, every cancel an answer listed present */
    for (int n = 0; n < ks->n_cancels; n++) {
        const struct cancel_req *q = &ks->cancels[n];
        if (q->acked_tk[0] == '\0')
            continue;
        o->cancels_acked++;
        if (strcmp(q->acked_tk, q->ledger_tk) == 0)
            o->cancels_acked_applied++;
        else
            violation(r, ST_V_NOT_IN_LEDGER, "%s: cancel %d acknowledged as %s, the ledger has "
                      "%s", pk, n, q->acked_tk, q->ledger_tk[0] ? q->ledger_tk : "none");
    }
    for (int s = 0; s < ks->n_seen; s++) {
        const struct seen_cancel *sc = &ks->seen[s];
        if (sc->n >= ks->n_cancels || strcmp(ks->cancels[sc->n].ledger_tk, sc->tk) != 0)
            violation(r, ST_V_NOT_IN_LEDGER, "%s: an answer listed cancel %s (request %d), the "
                      "ledger does not", pk, sc->tk, sc->n);
    }
}

static int check_epoch(struct run *r, CURL *h)
{
    json_t *payments = fg_admin_payments(r->s, NULL);
    if (payments == NULL) {
        fail(r, "GET /__admin/payments failed");
        return -1;
    }
    const json_t **entry = calloc((size_t)r->c->payments, sizeof *entry);
    if (entry == NULL)
        abort();
    size_t i;
    json_t *e;
    json_array_foreach(payments, i, e) {
        const char *pk = fg_json_str(json_object_get(e, "payment"), "paymentKey");
        int k = key_index(r, pk);
        if (k < 0)
            violation(r, ST_V_LEDGER, "a payment no client confirmed: %.60s", pk ? pk : "-");
        else if (entry[k] != NULL)
            violation(r, ST_V_LEDGER, "%s twice in the ledger", pk);
        else
            entry[k] = e;
    }
    struct txrow *rows;
    size_t n_rows;
    int rc = fetch_transactions(r, h, &rows, &n_rows);
    if (rc == 0) {
        size_t t = 0;
        for (int k = 0; k < r->c->payments; k++) {
            size_t lo = t;
            while (t < n_rows && rows[t].k == k)
                t++;
            check_key(r, k, entry[k], rows, lo, t);
        }
        free(rows);
    }
    free(entry);
    json_decref(payments);
    return rc;
}

static int reset_to(struct run *r, CURL *h, int epoch)
{
    char profile[2048], body[2100];
    stress_profile(r->c, epoch, profile, sizeof profile);
    snprintf(body, sizeof body, "{\"profile\":%s}", profile);
    if (admin_send(r, h, "POST", "/__admin/reset", body) != 0)
        return -1;
    json_t *payments = fg_admin_payments(r->s, NULL);
    if (payments == NULL) {
        fail(r, "GET /__admin/payments failed after the reset");
        return -1;
    }
    if (json_array_size(payments) != 0)
        violation(r, ST_V_UNSETTLED, "the reset left %zu payments", json_array_size(payments));
    json_decref(payments);
    return 0;
}

static void clear_keys(struct run *r)
{
    for (int k = 0; k < r->c->payments; k++) {
        struct key *ks = &r->keys[k];
        free(ks->cancels);
        free(ks->seen);
        pthread_mutex_t lock = ks->lock;
        memset(ks, 0, sizeof *ks);
        ks->lock = lock;
        ks->min_balance = amount_of(k);
    }
}

int st_run(const fg_server *s, const st_config *cfg, st_result *out, char err[FG_ERR_LEN])
{
    st_config c = *cfg;
    if (c.threads < 1 || c.payments < 1 || c.payments > 99999 || c.window < 1 || c.resets < 0 ||
        c.requests < 0 || c.timeout_ms < 1) {
        snprintf(err, FG_ERR_LEN, "stress: threads, payments (1-99999), window and timeout must "
                 "be positive, resets and requests not negative");
        return -1;
    }
    if (c.window > c.payments)
        c.window = c.payments;
    memset(out, 0, sizeof *out);
    err[0] = '\0';
    struct run *r = calloc(1, sizeof *r);
    struct worker *w = calloc((size_t)c.threads, sizeof *w);
    if (r == NULL || w == NULL || (r->keys = calloc((size_t)c.payments, sizeof *r->keys)) == NULL)
        abort();
    r->s = s;
    r->c = &c;
    r->out = out;
    r->err = err;
    for (int k = 0; k < c.payments; k++)
        pthread_mutex_init(&r->keys[k].lock, NULL);
    pthread_mutex_init(&r->vlock, NULL);
    pthread_barrier_init(&r->bar, NULL, (unsigned)c.threads + 1);
    CURL *h = curl_easy_init();
    int64_t t0 = fg_now_ns();
    char profile[2048];
    stress_profile(&c, 0, profile, sizeof profile);
    admin_send(r, h, "PUT", "/__admin/profile", profile);
    for (int t = 0; t < c.threads; t++) {
        w[t] = (struct worker){.r = r, .index = t, .h = curl_easy_init()};
        if (w[t].h == NULL || pthread_create(&w[t].thread, NULL, worker_main, &w[t]) != 0)
            abort();
    }
    int epochs = c.resets + 1;
    for (int e = 0; e < epochs; e++) {
        r->epoch = e;
        clear_keys(r);
        r->quota = c.requests / epochs + (e == epochs - 1 ? c.requests % epochs : 0);
        atomic_store(&r->next_op, 0);
        atomic_store(&r->arrived, 0);
        st_result before = *out;
        int64_t t_start = fg_now_ns();
        pthread_barrier_wait(&r->bar); /* go */
        pthread_barrier_wait(&r->bar); /* every request of the epoch answered */
        int64_t t_sent = fg_now_ns();
        struct metrics_now m;
        if (!atomic_load(&r->stop) && settle(r, h, &m) == 0)
            for (int i = 0; i < ST_SERVER_OUTCOMES; i++)
                out->server_outcomes[i] += m.outcomes[i];
        if (!atomic_load(&r->stop))
            admin_send(r, h, "PUT", "/__admin/profile", "{\"name\":\"stress-probe\",\"routes\":"
                       "{\"default\":{\"latency\":{\"dist\":\"fixed\",\"ms\":0}}}}");
        if (!atomic_load(&r->stop))
            check_epoch(r, h);
        pthread_barrier_wait(&r->bar); /* probe */
        pthread_barrier_wait(&r->bar); /* probed */
        if (!atomic_load(&r->stop) && e + 1 < epochs)
            reset_to(r, h, e + 1);
        out->epochs++;
        if (c.verbose)
            fprintf(stderr, "stress: epoch %d/%d: %ld requests in %.1f s; %ld payments, %ld "
                    "charged, %ld cancels acknowledged; checked, probed and reset in %.1f s; "
                    "violations so far %ld\n", e + 1, epochs, r->quota,
                    (double)(t_sent - t_start) / 1e9, out->payments - before.payments,
                    out->charges - before.charges, out->cancels_acked - before.cancels_acked,
                    (double)(fg_now_ns() - t_sent) / 1e9, out->violations);
    }
    r->done = true;
    pthread_barrier_wait(&r->bar);
    for (int t = 0; t < c.threads; t++) {
        pthread_join(w[t].thread, NULL);
        curl_easy_cleanup(w[t].h);
    }
    curl_easy_cleanup(h);
    out->wall_s = (double)(fg_now_ns() - t0) / 1e9;
    for (int k = 0; k < ST_KINDS; k++)
        for (int o = 0; o < ST_OUTCOMES; o++) {
            out->by[k][o] = atomic_load(&r->by[k][o]);
            if (k < ST_PROBE_CONFIRM)
                out->requests += out->by[k][o];
            else
                out->probes += out->by[k][o];
        }
    bool failed = atomic_load(&r->stop);
    clear_keys(r);
    for (int k = 0; k < c.payments; k++)
        pthread_mutex_destroy(&r->keys[k].lock);
    pthread_barrier_destroy(&r->bar);
    pthread_mutex_destroy(&r->vlock);
    free(r->keys);
    free(r);
    free(w);
    return failed ? -1 : 0;
}

/* ---- the report ------------------------------------------------------------------------------ */

void st_print(FILE *f, const st_config *c, const st_result *r, long peak_rss_kb)
{
    fprintf(f, "stress: %ld requests from %d threads over %d paymentKeys in %d epochs (%d "
            "resets), profile stress-lossy (seed %" PRIu64 "), timeouts %ld ms, hangs %ld ms\n",
            r->requests, c->threads, c->payments, r->epochs, r->epochs - 1, c->seed,
            c->timeout_ms, c->hang_ms);
    fprintf(f, "wall time %.1f s (%.0f requests/s, probes and checks included)\n", r->wall_s,
            r->wall_s > 0 ? (double)(r->requests + r->probes) / r->wall_s : 0.0);
    fprintf(f, "requests by kind and outcome:\n");
    for (int k = 0; k < ST_KINDS; k++) {
        long total = 0;
        for (int o = 0; o < ST_OUTCOMES; o++)
            total += r->by[k][o];
        fprintf(f, "  %-20s %8ld ", st_kind_names[k], total);
        const char *sep = "";
        for (int o = 0; o < ST_OUTCOMES; o++)
            if (r->by[k][o] != 0) {
                fprintf(f, "%s%s %ld", sep, st_outcome_names[o], r->by[k][o]);
                sep = ", ";
            }
        fputc('\n', f);
    }
    fprintf(f, "server outcomes (fakegate_requests_total, before the probes):");
    const char *sep = " ";
    for (int i = 0; i < ST_SERVER_OUTCOMES; i++)
        if (r->server_outcomes[i] != 0) {
            fprintf(f, "%s%s %ld", sep, st_server_outcome_names[i], r->server_outcomes[i]);
            sep = ", ";
        }
    fprintf(f, "\nledgers: %ld payments, %ld charges (at most %ld per paymentKey), %ld approvals "
            "answered to a client, %ld left IN_PROGRESS (every confirm lost), %ld confirm "
            "attempts\n", r->payments, r->charges, r->max_charges, r->approvals_answered,
            r->left_in_progress, r->confirm_attempts);
    fprintf(f, "cancels: %ld acknowledged, %ld of them applied exactly once; %ld applied in "
            "all\n", r->cancels_acked, r->cancels_acked_applied, r->cancels_in_ledger);
    fprintf(f, "violations: %ld\n", r->violations);
    for (int v = 0; v < ST_VIOLATIONS; v++)
        if (r->by_violation[v] != 0)
            fprintf(f, "  %-32s %ld\n", st_violation_names[v], r->by_violation[v]);
    for (int i = 0; i < r->n_examples; i++)
        fprintf(f, "  e.g. %s\n", r->examples[i]);
    if (peak_rss_kb >= 0)
        fprintf(f, "fakegate peak RSS (VmHWM): %ld kB\n", peak_rss_kb);
}

