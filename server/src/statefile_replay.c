/* statefile_replay.c -- reading the state file back at start (statefile_replay, statefile.h;
 * docs/state-file.md §10.3). Each record is applied through the store call that made it, with
 * the times it carries, so ids, commit sequence numbers and every derived key come out as
 * they were, and a stored answer replays byte for byte. Invariants: a record that does not fit
 * the state before it stops the start (nothing is served from a ledger that disagrees with its
 * log); only an incomplete last line -- a crash mid-write -- is dropped. */
#define _GNU_SOURCE
#include "statefile.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gateway.h"
#include "idem.h"
#include "ledger.h"
#include "store.h"

/* The owner of the claims a replay makes: no request is. */
static const char replay_owner;

struct replay {
    struct gateway *g;
    const char *path;
    uint64_t line;
    size_t index;          /* the record's place in its line, from 1 */
    const char *kind;      /* its "r" */
    char *err;
};

__attribute__((format(printf, 2, 3))) static int bad(struct replay *rp, const char *fmt, ...)
{
    char what[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(rp->err, ERR_LEN, "%s:%llu: record %zu (%s): %s", rp->path,
             (unsigned long long)rp->line, rp->index, rp->kind ? rp->kind : "?", what);
    return -1;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* rec[name], hex, decoded into a malloc'd buffer (NUL-terminated, caller frees). */
static char *unhex(struct replay *rp, const json_t *rec, const char *name, size_t *len)
{
    const char *h = json_string_value(json_object_get(rec, name));
    size_t n = h ? strlen(h) : 1;
    char *out = n % 2 == 0 ? malloc(n / 2 + 1) : NULL;
    for (size_t i = 0; out && i < n / 2; i++) {
        int hi = hexval(h[2 * i]), lo = hexval(h[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            free(out);
            out = NULL;
            break;
        }
        out[i] = (char)(hi << 4 | lo);
    }
    if (!out) {
        bad(rp, "\"%s\" is not a string of hex digits", name);
        return NULL;
    }
    out[n / 2] = '\0';
    *len = n / 2;
    return out;
}

static bool get_u64hex(struct replay *rp, const json_t *rec, const char *name, uint64_t *v)
{
    size_t len;
    char *b = unhex(rp, rec, name, &len);
    if (!b)
        return false;
    if (len != 8) {
        free(b);
        bad(rp, "\"%s\" is not 16 hex digits", name);
        return false;
    }
    *v = 0;
    for (size_t i = 0; i < 8; i++)
        *v = *v << 8 | (unsigned char)b[i];
    free(b);
    return true;
}

static bool get_int(struct replay *rp, const json_t *rec, const char *name, int64_t *v)
{
    const json_t *j = json_object_get(rec, name);
    if (!json_is_integer(j)) {
        bad(rp, "\"%s\" is not an integer", name);
        return false;
    }
    *v = (int64_t)json_integer_value(j);
    return true;
}

/* rec[name]: a string, NULL for null or absent (when `optional`). */
static bool get_str(struct replay *rp, const json_t *rec, const char *name, bool optional,
                    const char **v)
{
    const json_t *j = json_object_get(rec, name);
    *v = json_string_value(j);
    if (*v || (optional && (!j || json_is_null(j))))
        return true;
    bad(rp, "\"%s\" is not a string", name);
    return false;
}

static struct store *store_of(struct replay *rp, const json_t *rec)
{
    const json_t *tk = json_object_get(rec, "tk");
    if (json_is_null(tk))
        return &gateway_tenant_next(rp->g, NULL)->store;
    if (!json_is_string(tk)) {
        bad(rp, "\"tk\" is neither a secret key nor null");
        return NULL;
    }
    bool full = false;
    struct tenant *t = gateway_tenant(rp->g, json_string_value(tk), true, &full);
    if (!t)
        bad(rp, "tenant %s: %s", json_string_value(tk),
            full ? "more tenants than --max-tenants" : "out of memory");
    return t ? &t->store : NULL;
}

static struct payment *payment_of(struct replay *rp, struct store *s, const json_t *rec)
{
    const char *pk;
    if (!get_str(rp, rec, "pk", false, &pk))
        return NULL;
    struct payment *p = store_payment(s, pk);
    if (!p)
        bad(rp, "payment %s is not in the ledger", pk);
    return p;
}

static const char *create_failure(enum ledger_create_result why)
{
    switch (why) {
    case LEDGER_KEY_EXISTS: return "its paymentKey is in the ledger already";
    case LEDGER_ORDER_TAKEN: return "its orderId belongs to another payment";
    case LEDGER_FULL: return "the ledger holds --max-payments already";
    default: return "out of memory";
    }
}

static int apply_create(struct replay *rp, struct store *s, const json_t *rec, bool va)
{
    const char *pk, *oid, *name = NULL, *bank = NULL, *customer = NULL, *email = NULL;
    int64_t amount, at_us, due_us = 0;
    if (!get_str(rp, rec, "pk", false, &pk) || !get_str(rp, rec, "oid", false, &oid) ||
        !get_int(rp, rec, "amount", &amount) || !get_int(rp, rec, "at_us", &at_us))
        return -1;
    enum ledger_create_result why = LEDGER_NO_MEMORY;
    if (!va)
        return store_create(s, pk, oid, amount, at_us, NULL, &why) ? 0
                                                                    : bad(rp, "%s", create_failure(why));
    /* A virtual account always has its orderName (docs/virtual-accounts.md). */
    if (!get_str(rp, rec, "order_name", false, &name) || !get_str(rp, rec, "bank", false, &bank) ||
        !get_int(rp, rec, "due_us", &due_us) || !get_str(rp, rec, "customer", false, &customer) ||
        !get_str(rp, rec, "email", true, &email))
        return -1;
    if (strlen(bank) != 2)
        return bad(rp, "\"bank\" is not a two-digit bank code");
    struct payment_va *v = calloc(1, sizeof *v);
    if (v) {
        memcpy(v->bank_code, bank, 3);
        v->due_at_us = due_us;
        v->customer_name = strdup(customer);
        v->customer_email = email ? strdup(email) : NULL;
    }
    if (!v || !v->customer_name || (email && !v->customer_email)) {
        ledger_va_free(v);
        return bad(rp, "out of memory");
    }
    if (!store_create_va(s, pk, oid, amount, name, v, at_us, NULL, &why)) {
        ledger_va_free(v);
        return bad(rp, "%s", create_failure(why));
    }
    return 0;
}

/* free *slot, then a copy of rec[name] (absent: NULL). */
static int take_str(struct replay *rp, const json_t *rec, const char *name, char **slot)
{
    const char *v;
    if (!get_str(rp, rec, name, true, &v))
        return -1;
    free(*slot);
    *slot = v ? strdup(v) : NULL;
    return v && !*slot ? bad(rp, "out of memory") : 0;
}

static int apply_cancel(struct replay *rp, struct store *s, struct payment *p, const json_t *rec)
{
    const char *reason;
    int64_t amount, at_us;
    if (!get_int(rp, rec, "amount", &amount) || !get_str(rp, rec, "reason", false, &reason) ||
        !get_int(rp, rec, "at_us", &at_us))
        return -1;
    if (amount < 1 || amount > p->balance)
        return bad(rp, "a cancel of %lld KRW, the balance being %lld", (long long)amount,
                   (long long)p->balance);
    if (p->va && json_object_get(rec, "refund_account") &&
        (take_str(rp, rec, "refund_bank", &p->va->refund_bank) != 0 ||
         take_str(rp, rec, "refund_account", &p->va->refund_account) != 0 ||
         take_str(rp, rec, "refund_holder", &p->va->refund_holder) != 0))
        return -1;
    return store_cancel(s, p, amount, reason, at_us, NULL) == 0 ? 0 : bad(rp, "out of memory");
}

static int apply_payment(struct replay *rp, struct store *s, const json_t *rec)
{
    struct payment *p = payment_of(rp, s, rec);
    if (!p)
        return -1;
    const char *k = rp->kind, *str;
    int64_t at_us;
    if (strcmp(k, "session") == 0) {
        /* A session is registered with the payment it creates, once. */
        if (p->registered)
            return bad(rp, "payment %s has a session already", p->payment_key);
        return get_str(rp, rec, "order_name", true, &str) &&
                       store_register_session(s, p, str) == 0 ? 0 : bad(rp, "out of memory");
    }
    if (strcmp(k, "arrive") == 0)
        return get_str(rp, rec, "key", true, &str) && store_note_confirm(s, p, str) == 0
                   ? 0 : bad(rp, "out of memory");
    if (strcmp(k, "cancel") == 0)
        return apply_cancel(rp, s, p, rec);
    if (!get_int(rp, rec, "at_us", &at_us))
        return -1;
    if (strcmp(k, "approve") == 0) {
        if (p->status != PAY_IN_PROGRESS || p->charges != 0)
            return bad(rp, "payment %s is %s, with %u charges: it cannot be approved",
                       p->payment_key, pay_status_name(p->status), p->charges);
        return store_approve(s, p, at_us, NULL) == 0 ? 0 : bad(rp, "out of memory");
    }
    if (strcmp(k, "expire") == 0) {
        bool expired = p->va ? store_expire_va(s, p, at_us) : store_expire(s, p, at_us, 0);
        return expired ? 0 : bad(rp, "payment %s (%s) cannot expire at %lld", p->payment_key,
                                 pay_status_name(p->status), (long long)at_us);
    }
    /* deposit */
    const json_t *e = json_object_get(rec, "error");
    if (!json_is_boolean(e))
        return bad(rp, "\"error\" is not true or false");
    bool error = json_is_true(e);
    if (!p->va || p->status != (error ? PAY_DONE : PAY_WAITING_FOR_DEPOSIT))
        return bad(rp, "payment %s is %s: no deposit%s fits", p->payment_key,
                   pay_status_name(p->status), error ? " error" : "");
    return store_deposit(s, p, error, at_us, NULL) == 0 ? 0 : bad(rp, "out of memory");
}

static int apply_idem(struct replay *rp, struct store *s, const json_t *rec)
{
    size_t len;
    char *scope = unhex(rp, rec, "scope", &len);
    if (!scope)
        return -1;
    int rc = 0;
    struct idem_record *r = store_idem_get(s, scope, len);
    if (strcmp(rp->kind, "claim") == 0) {
        uint64_t hash;
        int64_t at_ns;
        if (!get_u64hex(rp, rec, "hash", &hash) || !get_int(rp, rec, "at_ns", &at_ns))
            rc = -1;
        else if (r && store_idem_lookup(s, scope, len, at_ns)) /* an expired one goes here */
            rc = bad(rp, "a claim of a key whose record is still live");
        /* At --max-idempotency-records, the records that had expired by then go first, as
         * the sweep made room for this claim when it was made. */
        else if (!store_idem_room(s, at_ns) ||
                 !(r = store_idem_claim(s, scope, len, &replay_owner, hash, at_ns)))
            rc = bad(rp, "no room for the record (--max-idempotency-records, or out of memory)");
        else if (json_object_get(rec, "inst") && !get_u64hex(rp, rec, "inst", &r->owner_instance))
            rc = -1;
    } else if (!r || r->state != IDEM_PROCESSING) {
        rc = bad(rp, "no record PROCESSING under this key");
    } else if (r->owner != &replay_owner) {
        /* --store redis://: another instance released a claim a request of this one still
         * holds (it took this instance for dead): the replica rebuilds from the log. */
        rc = bad(rp, "a claim a request of this instance still holds");
    } else if (strcmp(rp->kind, "release") == 0) {
        store_idem_release(s, r, &replay_owner);
    } else {
        int64_t status, vc = 0, vs = 0, vd = 0;
        struct idem_response resp = {.en = json_is_true(json_object_get(rec, "en"))};
        if (!get_int(rp, rec, "status", &status)) {
            rc = -1;
        } else if (json_object_get(rec, "pk")) {
            resp.payment = payment_of(rp, s, rec);
            if (!resp.payment || !get_int(rp, rec, "view_cancels", &vc) ||
                !get_int(rp, rec, "view_status", &vs) || !get_int(rp, rec, "view_deposits", &vd))
                rc = -1;
            else if (vc < 0 || vc > resp.payment->n_cancels || vs < 0 || vs >= PAY_STATUS_COUNT ||
                     vd < 0 || vd > (resp.payment->va ? resp.payment->va->n_deposits : 0))
                rc = bad(rp, "a view of payment %s it never had", resp.payment->payment_key);
        } else if (!(resp.body = unhex(rp, rec, "body", &resp.body_len))) {
            rc = -1;
        }
        if (rc == 0) {
            resp.status = (int)status;
            resp.view_cancels = (uint32_t)vc;
            resp.view_status = (uint8_t)vs;
            resp.view_deposits = (uint32_t)vd;
            store_idem_complete(s, r, &replay_owner, &resp);
        } else {
            free(resp.body);
        }
    }
    free(scope);
    return rc;
}

static int apply(struct replay *rp, const json_t *rec)
{
    static const char *const kinds[] = {"clock", "salt", "create", "va", "reset", "claim",
                                        "complete", "release", "session", "arrive", "approve",
                                        "cancel", "expire", "deposit"};
    enum { FIRST_IDEM = 5, FIRST_ON_PAYMENT = 8, N_KINDS = sizeof kinds / sizeof *kinds };
    rp->kind = json_string_value(json_object_get(rec, "r"));
    if (!json_is_object(rec) || !rp->kind)
        return bad(rp, "not an object with a string \"r\"");
    size_t kind = 0;
    while (kind < N_KINDS && strcmp(rp->kind, kinds[kind]) != 0)
        kind++;
    if (kind == N_KINDS)
        return bad(rp, "no such record");
    if (kind == 0) { /* clock */
        int64_t off;
        if (!get_int(rp, rec, "offset_us", &off))
            return -1;
        if (off < 0)
            return bad(rp, "a negative offset");
        atomic_store(&rp->g->clock_offset_us, off);
        return 0;
    }
    struct store *s = store_of(rp, rec);
    if (!s)
        return -1;
    if (kind == 1) { /* salt */
        uint64_t salt;
        if (!get_u64hex(rp, rec, "salt", &salt))
            return -1;
        if (s->ledger.next_id != 1 && s->ledger.salt != salt)
            return bad(rp, "a second salt for a ledger that has made payments");
        if (s->ledger.salt != salt) /* a replica adopts the log's before its first payment */
            s->ledger.salt = salt;
        s->log_salted = true;
        return 0;
    }
    if (!s->log_salted)
        return bad(rp, "a change before its tenant's salt record");
    if (kind == 2 || kind == 3)
        return apply_create(rp, s, rec, kind == 3);
    if (kind == 4)
        return gateway_tenant_reset_locked(rp->g, s, NULL, NULL);
    return kind < FIRST_ON_PAYMENT ? apply_idem(rp, s, rec) : apply_payment(rp, s, rec);
}

/* Parse one line and apply its records in order. 0, or -1 with rp->err filled. */
static int apply_line(struct replay *rp, const char *line, size_t n, uint64_t *records)
{
    json_error_t je;
    json_t *v = json_loadb(line, n, 0, &je);
    int rc = 0;
    if (!json_is_array(v)) {
        snprintf(rp->err, ERR_LEN, "%s:%llu:%d: %s", rp->path, (unsigned long long)rp->line,
                 v ? 1 : je.column, v ? "a line is an array of records" : je.text);
        rc = -1;
    }
    size_t i;
    json_t *rec;
    json_array_foreach(v, i, rec) {
        rp->index = i + 1;
        if (rc == 0 && (rc = apply(rp, rec)) == 0 && records)
            (*records)++;
    }
    json_decref(v);
    return rc;
}

int statefile_apply_line(struct statefile *sf, struct gateway *g, const char *line, size_t n,
                         uint64_t lineno, uint64_t *records, char err[ERR_LEN])
{
    struct replay rp = {.g = g, .path = sf->path, .err = err, .line = lineno};
    sf->replaying = true;
    int rc = apply_line(&rp, line, n, records);
    sf->replaying = false;
    return rc;
}

/* Release the PROCESSING records of store s a replayed claim made whose instance `gone` says
 * is gone. Returns how many; their releases are appended. */
static size_t release_if(struct store *s, int (*gone)(void *ctx, uint64_t instance), void *ctx)
{
    size_t n = 0;
    for (struct idem_record *r = s->idem.oldest, *next; r; r = next) {
        next = r->newer;
        if (r->state == IDEM_PROCESSING && r->owner == &replay_owner && r->owner_instance &&
            gone(ctx, r->owner_instance) == 1) {
            store_idem_release(s, r, &replay_owner);
            n++;
        }
    }
    return n;
}

static int is_instance(void *ctx, uint64_t instance)
{
    return instance == *(const uint64_t *)ctx;
}

size_t statefile_release_instance(struct statefile *sf, struct gateway *g, uint64_t instance)
{
    (void)sf;
    size_t n = 0;
    for (struct tenant *t = gateway_tenant_next(g, NULL); t; t = gateway_tenant_next(g, t))
        n += release_if(&t->store, is_instance, &instance);
    return n;
}

size_t statefile_release_dead(struct statefile *sf, struct store *s,
                              int (*dead)(void *ctx, uint64_t instance), void *ctx)
{
    (void)sf;
    return release_if(s, dead, ctx);
}

/* Release every record a replayed claim left PROCESSING (its request never got an answer),
 * appending the releases as one line. Returns how many. */
static size_t release_unanswered(struct statefile *sf, struct gateway *g)
{
    size_t n = 0;
    for (struct tenant *t = gateway_tenant_next(g, NULL); t; t = gateway_tenant_next(g, t))
        for (struct idem_record *r = t->store.idem.oldest, *next; r; r = next) {
            next = r->newer;
            if (r->state == IDEM_PROCESSING && r->owner == &replay_owner) {
                store_idem_release(&t->store, r, &replay_owner);
                n++;
            }
        }
    statefile_commit(sf);
    return n;
}

int statefile_replay(struct statefile *sf, struct gateway *g, struct statefile_stats *st,
                     char err[ERR_LEN])
{
    memset(st, 0, sizeof *st);
    FILE *f = fdopen(dup(sf->fd), "r");
    if (!f) {
        snprintf(err, ERR_LEN, "--state-file %s: %s", sf->path, strerror(errno));
        return -1;
    }
    struct replay rp = {.g = g, .path = sf->path, .err = err};
    char *line = NULL;
    size_t cap = 0;
    off_t good = 0;
    ssize_t n;
    int rc = 0;
    sf->replaying = true;
    while (rc == 0 && (n = getline(&line, &cap, f)) > 0) {
        rp.line++;
        if (line[n - 1] != '\n') { /* a crash mid-write: the line never completed */
            st->torn_bytes = (size_t)n;
            break;
        }
        rc = apply_line(&rp, line, (size_t)n, &st->records);
        good += n;
        if (rc == 0)
            st->lines++;
    }
    free(line);
    fclose(f);
    sf->replaying = false;
    if (rc != 0)
        return -1;
    if (st->torn_bytes && ftruncate(sf->fd, good) != 0) {
        snprintf(err, ERR_LEN, "--state-file %s: dropping an incomplete last line: %s", sf->path,
                 strerror(errno));
        return -1;
    }
    st->released = release_unanswered(sf, g);
    for (struct tenant *t = gateway_tenant_next(g, NULL); t; t = gateway_tenant_next(g, t)) {
        st->payments += store_payment_count(&t->store);
        st->idem_records += store_idem_count(&t->store);
    }
    st->clock_offset_us = atomic_load(&g->clock_offset_us);
    sf->start = *st;
    return 0;
}
