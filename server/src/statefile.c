/* statefile.c -- writing the state file (see statefile.h; the format is docs/state-file.md §10.2).
 * One line per store-lock section: a JSON array of records, each an object whose "r" names
 * it, appended with one write(2) to a file opened O_APPEND, so a crash leaves at most one
 * incomplete last line. Records carry what replaying the change needs and no more: derived
 * fields (transaction keys, card numbers, secrets, account numbers) come back from the salt
 * and the payment's id, which replaying in order reproduces. */
#define _GNU_SOURCE
#include "statefile.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cluster.h"
#include "idem.h"
#include "ledger.h"
#include "store.h"

struct statefile *statefile_open(const char *path, enum statefile_sync sync, char err[ERR_LEN])
{
    struct statefile *sf = calloc(1, sizeof *sf);
    if (!sf || !(sf->path = strdup(path))) {
        free(sf);
        snprintf(err, ERR_LEN, "--state-file %s: out of memory", path);
        return NULL;
    }
    sf->fd = open(path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    struct stat st;
    /* A device or a pipe has no end to replay to (/dev/zero reads for ever): a regular file. */
    bool regular = sf->fd >= 0 && fstat(sf->fd, &st) == 0 && S_ISREG(st.st_mode);
    if (!regular) {
        snprintf(err, ERR_LEN, "--state-file %s: %s", path,
                 sf->fd < 0 ? strerror(errno) : "not a regular file");
        if (sf->fd >= 0)
            close(sf->fd);
        free(sf->path);
        free(sf);
        return NULL;
    }
    sf->sync = sync;
    buf_init(&sf->pending);
    pthread_mutex_init(&sf->clock_lock, NULL);
    return sf;
}

struct statefile *statefile_new_shared(const char *name, struct cluster *c)
{
    struct statefile *sf = calloc(1, sizeof *sf);
    if (!sf || !(sf->path = strdup(name))) {
        free(sf);
        return NULL;
    }
    sf->fd = -1;
    sf->cluster = c;
    buf_init(&sf->pending);
    pthread_mutex_init(&sf->clock_lock, NULL);
    return sf;
}

void statefile_free(struct statefile *sf)
{
    if (!sf)
        return;
    if (sf->fd >= 0)
        close(sf->fd);
    buf_fini(&sf->pending);
    pthread_mutex_destroy(&sf->clock_lock);
    free(sf->path);
    free(sf);
}

/* A write failed: the message once, the file marked failed, SIGTERM raised (main stops the
 * server and exits 1). `what` names the call, errno says why. */
static void fail(struct statefile *sf, const char *what)
{
    int e = errno;
    if (!atomic_exchange(&sf->failed, true)) {
        fprintf(stderr, "fakegate: --state-file %s: %s failed: %s; stopping (the file holds "
                        "every change before this one)\n", sf->path, what,
                e ? strerror(e) : "no progress");
        kill(getpid(), SIGTERM); /* process-directed: main sigwaits for it */
    }
}

/* Write all n bytes of p, then sync as the policy says. */
static void write_line(struct statefile *sf, const char *p, size_t n)
{
    if (atomic_load(&sf->failed))
        return;
    while (n > 0) {
        errno = 0;
        ssize_t w = write(sf->fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            fail(sf, "write");
            return;
        }
        p += w;
        n -= (size_t)w;
    }
    if (sf->sync == STATEFILE_SYNC_ALWAYS && fdatasync(sf->fd) != 0)
        fail(sf, "fdatasync");
}

void statefile_commit(struct statefile *sf)
{
    if (!sf || sf->pending.len == 0)
        return;
    buf_add(&sf->pending, "]\n", 2);
    if (sf->pending.oom) {
        errno = ENOMEM; /* nothing can be written whole */
        fail(sf, "buffering a record");
    } else {
        write_line(sf, sf->pending.data, sf->pending.len);
    }
    sf->lines++;
    sf->pending.len = 0;
    sf->pending.oom = false;
}

const char *statefile_take_line(struct statefile *sf, size_t *len)
{
    if (sf->pending.len == 0) {
        *len = 0;
        return NULL;
    }
    buf_add(&sf->pending, "]", 2); /* with its NUL, not counted */
    if (sf->pending.oom) {
        statefile_clear_line(sf);
        *len = 0;
        return NULL;
    }
    *len = sf->pending.len - 1;
    return sf->pending.data;
}

void statefile_clear_line(struct statefile *sf)
{
    sf->pending.len = 0;
    sf->pending.oom = false;
}

static void clock_record(struct buf *b, int64_t offset_us)
{
    buf_adds(b, "{\"r\":\"clock\",\"offset_us\":");
    buf_add_i64(b, offset_us);
    buf_addc(b, '}');
}

void statefile_clock(struct statefile *sf, _Atomic int64_t *offset_us, int64_t add_us)
{
    if (!sf || sf->replaying) {
        atomic_fetch_add(offset_us, add_us);
        return;
    }
    struct buf b;
    buf_init(&b);
    pthread_mutex_lock(&sf->clock_lock);
    int64_t now = atomic_fetch_add(offset_us, add_us) + add_us;
    buf_addc(&b, '[');
    clock_record(&b, now);
    buf_add(&b, "]\n", 2);
    if (b.oom) {
        errno = ENOMEM;
        fail(sf, "buffering a record");
    } else {
        write_line(sf, b.data, b.len);
    }
    pthread_mutex_unlock(&sf->clock_lock);
    buf_fini(&b);
}

/* --- records ---------------------------------------------------------------------------------- */

static void hex(struct buf *b, const void *p, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    const unsigned char *u = p;
    buf_addc(b, '"');
    for (size_t i = 0; i < n; i++) {
        char two[2] = {digits[u[i] >> 4], digits[u[i] & 15]};
        buf_add(b, two, 2);
    }
    buf_addc(b, '"');
}

static void hex_u64(struct buf *b, uint64_t v)
{
    unsigned char be[8];
    for (int i = 0; i < 8; i++)
        be[i] = (unsigned char)(v >> (56 - 8 * i));
    hex(b, be, sizeof be);
}

/* Open record `r` of store s: the separator, and first (once per store) its salt record. */
static struct buf *begin(struct statefile *sf, struct store *s, const char *r)
{
    struct buf *b = &sf->pending;
    const char *tk = s->tenant_key ? __atomic_load_n(s->tenant_key, __ATOMIC_ACQUIRE) : NULL;
    if (!s->log_salted) {
        s->log_salted = true;
        buf_addc(b, b->len ? ',' : '[');
        buf_adds(b, "{\"r\":\"salt\",\"tk\":");
        buf_add_json_strz(b, tk);
        buf_adds(b, ",\"salt\":");
        hex_u64(b, store_ledger(s)->salt);
        buf_addc(b, '}');
    }
    buf_addc(b, b->len ? ',' : '[');
    buf_adds(b, "{\"r\":\"");
    buf_adds(b, r);
    buf_adds(b, "\",\"tk\":");
    buf_add_json_strz(b, tk);
    return b;
}

static void field_i64(struct buf *b, const char *name, int64_t v)
{
    buf_adds(b, ",\"");
    buf_adds(b, name);
    buf_adds(b, "\":");
    buf_add_i64(b, v);
}

static void field_str(struct buf *b, const char *name, const char *v)
{
    buf_adds(b, ",\"");
    buf_adds(b, name);
    buf_adds(b, "\":");
    buf_add_json_strz(b, v);
}

static struct buf *begin_payment(struct statefile *sf, struct store *s, const char *r,
                                 const struct payment *p)
{
    struct buf *b = begin(sf, s, r);
    field_str(b, "pk", p->payment_key);
    return b;
}

void statefile_rec_create(struct statefile *sf, struct store *s, const struct payment *p)
{
    if (!sf || sf->replaying)
        return;
    struct buf *b = begin_payment(sf, s, p->va ? "va" : "create", p);
    field_str(b, "oid", p->order_id);
    field_i64(b, "amount", p->amount);
    field_i64(b, "at_us", p->requested_at_us);
    if (p->va) {
        field_str(b, "order_name", p->order_name);
        field_str(b, "bank", p->va->bank_code);
        field_i64(b, "due_us", p->va->due_at_us);
        field_str(b, "customer", p->va->customer_name);
        field_str(b, "email", p->va->customer_email);
    }
    buf_addc(b, '}');
}

void statefile_rec_session(struct statefile *sf, struct store *s, const struct payment *p)
{
    if (!sf || sf->replaying)
        return;
    struct buf *b = begin_payment(sf, s, "session", p);
    field_str(b, "order_name", p->order_name);
    buf_addc(b, '}');
}

void statefile_rec_arrive(struct statefile *sf, struct store *s, const struct payment *p,
                          const char *idem_key)
{
    if (!sf || sf->replaying)
        return;
    struct buf *b = begin_payment(sf, s, "arrive", p);
    if (idem_key)
        field_str(b, "key", idem_key);
    buf_addc(b, '}');
}

void statefile_rec_approve(struct statefile *sf, struct store *s, const struct payment *p)
{
    if (!sf || sf->replaying)
        return;
    struct buf *b = begin_payment(sf, s, "approve", p);
    field_i64(b, "at_us", p->approved_at_us);
    buf_addc(b, '}');
}

void statefile_rec_cancel(struct statefile *sf, struct store *s, const struct payment *p)
{
    if (!sf || sf->replaying)
        return;
    const struct payment_cancel *c = &p->cancels[p->n_cancels - 1];
    struct buf *b = begin_payment(sf, s, "cancel", p);
    field_i64(b, "amount", c->amount);
    field_str(b, "reason", c->reason);
    field_i64(b, "at_us", c->canceled_at_us);
    if (p->va && p->va->refund_account) {
        field_str(b, "refund_bank", p->va->refund_bank);
        field_str(b, "refund_account", p->va->refund_account);
        field_str(b, "refund_holder", p->va->refund_holder);
    }
    buf_addc(b, '}');
}

void statefile_rec_expire(struct statefile *sf, struct store *s, const struct payment *p,
                          int64_t at_us)
{
    if (!sf || sf->replaying)
        return;
    struct buf *b = begin_payment(sf, s, "expire", p);
    field_i64(b, "at_us", at_us);
    buf_addc(b, '}');
}

void statefile_rec_deposit(struct statefile *sf, struct store *s, const struct payment *p,
                           bool error, int64_t at_us)
{
    if (!sf || sf->replaying)
        return;
    struct buf *b = begin_payment(sf, s, "deposit", p);
    buf_adds(b, error ? ",\"error\":true" : ",\"error\":false");
    field_i64(b, "at_us", at_us);
    buf_addc(b, '}');
}

void statefile_rec_reset(struct statefile *sf, struct store *s)
{
    if (!sf || sf->replaying)
        return;
    buf_addc(begin(sf, s, "reset"), '}');
}

void statefile_rec_claim(struct statefile *sf, struct store *s, const struct idem_record *rec,
                         int64_t now_ns)
{
    if (!sf || sf->replaying)
        return;
    struct buf *b = begin(sf, s, "claim");
    buf_adds(b, ",\"scope\":");
    hex(b, rec->scope, rec->scope_len);
    buf_adds(b, ",\"hash\":");
    hex_u64(b, rec->body_hash);
    field_i64(b, "at_ns", now_ns);
    if (sf->cluster) { /* its owner, so a dead instance's claims can be released */
        buf_adds(b, ",\"inst\":");
        hex_u64(b, cluster_instance(sf->cluster));
    }
    buf_addc(b, '}');
}

void statefile_rec_complete(struct statefile *sf, struct store *s, const struct idem_record *rec)
{
    if (!sf || sf->replaying)
        return;
    const struct idem_response *r = &rec->resp;
    struct buf *b = begin(sf, s, "complete");
    buf_adds(b, ",\"scope\":");
    hex(b, rec->scope, rec->scope_len);
    field_i64(b, "status", r->status);
    if (r->en)
        buf_adds(b, ",\"en\":true");
    if (r->payment) {
        field_str(b, "pk", r->payment->payment_key);
        field_i64(b, "view_cancels", r->view_cancels);
        field_i64(b, "view_status", r->view_status);
        field_i64(b, "view_deposits", r->view_deposits);
    } else {
        /* The exact bytes, as hex: a stored answer is replayed byte for byte. */
        buf_adds(b, ",\"body\":");
        hex(b, r->body, r->body_len);
    }
    buf_addc(b, '}');
}

void statefile_rec_release(struct statefile *sf, struct store *s, const char *scope, size_t len)
{
    if (!sf || sf->replaying)
        return;
    struct buf *b = begin(sf, s, "release");
    buf_adds(b, ",\"scope\":");
    hex(b, scope, len);
    buf_addc(b, '}');
}

void statefile_clock_locked(struct statefile *sf, int64_t offset_us)
{
    if (!sf || sf->replaying)
        return;
    struct buf *b = &sf->pending;
    buf_addc(b, b->len ? ',' : '[');
    clock_record(b, offset_us);
}
