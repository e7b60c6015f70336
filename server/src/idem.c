/* idem.c -- idempotency records (see idem.h). Invariants: a record in the map is either
 * PROCESSING with a non-NULL owner or DONE with owner NULL; a record is in the map exactly when
 * it is on the expiry list. Expiry happens at lookup and in idem_sweep (the gateway's
 * once-a-second sweep), so memory falls back after the TTL without further traffic. */
#define _POSIX_C_SOURCE 200809L
#include "idem.h"

#include <stdlib.h>
#include <string.h>

char *idem_scope(const char *secret_key, const char *idem_key, const char *method,
                 const char *path, size_t *len)
{
    const char *parts[4] = {secret_key, idem_key, method, path};
    size_t n = 0;
    for (int i = 0; i < 4; i++)
        n += strlen(parts[i]) + 1;
    char *out = malloc(n);
    if (!out)
        return NULL;
    size_t off = 0;
    for (int i = 0; i < 4; i++) {
        size_t pl = strlen(parts[i]);
        memcpy(out + off, parts[i], pl + 1); /* the NUL separates the parts */
        off += pl + 1;
    }
    *len = n - 1;
    return out;
}

void idem_init(struct idem_store *s, int64_t ttl_ns)
{
    strmap_init(&s->map);
    s->ttl_ns = ttl_ns;
    s->oldest = s->newest = NULL;
    s->max_records = 0;
}

static void list_unlink(struct idem_store *s, struct idem_record *r)
{
    if (r->older)
        r->older->newer = r->newer;
    else
        s->oldest = r->newer;
    if (r->newer)
        r->newer->older = r->older;
    else
        s->newest = r->older;
    r->older = r->newer = NULL;
}

static void list_append(struct idem_store *s, struct idem_record *r)
{
    r->newer = NULL;
    r->older = s->newest;
    if (s->newest)
        s->newest->newer = r;
    else
        s->oldest = r;
    s->newest = r;
}

static void record_free(struct idem_record *r)
{
    free(r->resp.body);
    free(r->scope);
    free(r);
}

static void record_free_any(void *rec)
{
    record_free(rec);
}

static void free_all(struct idem_store *s)
{
    strmap_each(&s->map, record_free_any);
}

void idem_fini(struct idem_store *s)
{
    free_all(s);
    strmap_fini(&s->map);
}

void idem_reset(struct idem_store *s)
{
    free_all(s);
    strmap_clear(&s->map);
    s->oldest = s->newest = NULL;
}

/* Take r out of the map and the list, and free it. */
static void record_delete(struct idem_store *s, struct idem_record *r)
{
    strmap_del(&s->map, r->scope, r->scope_len);
    list_unlink(s, r);
    record_free(r);
}

struct idem_record *idem_lookup(struct idem_store *s, const char *scope, size_t len,
                                int64_t now_ns)
{
    struct idem_record *r = strmap_get(&s->map, scope, len);
    /* A PROCESSING record never expires: its owner will complete or release it. */
    if (r && r->state == IDEM_DONE && now_ns >= r->expires_ns) {
        record_delete(s, r);
        return NULL;
    }
    return r;
}

struct idem_record *idem_get(struct idem_store *s, const char *scope, size_t len)
{
    return strmap_get(&s->map, scope, len);
}

struct idem_record *idem_claim(struct idem_store *s, const char *scope, size_t len,
                               const void *owner, uint64_t body_hash, int64_t now_ns)
{
    if (s->max_records && s->map.len >= s->max_records)
        return NULL;
    struct idem_record *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->scope = malloc(len + 1);
    if (!r->scope) {
        free(r);
        return NULL;
    }
    memcpy(r->scope, scope, len);
    r->scope[len] = '\0';
    r->scope_len = len;
    r->state = IDEM_PROCESSING;
    r->owner = owner;
    r->expires_ns = now_ns + s->ttl_ns;
    r->body_hash = body_hash;
    struct idem_record *old = strmap_put(&s->map, r->scope, len, r);
    if (old == r) { /* out of memory: the map is unchanged */
        record_free(r);
        return NULL;
    }
    if (old) { /* an expired record nobody looked up since: replaced */
        list_unlink(s, old);
        record_free(old);
    }
    list_append(s, r);
    return r;
}

int idem_complete(struct idem_record *rec, const void *owner, struct idem_response *resp)
{
    if (rec->state != IDEM_PROCESSING || rec->owner != owner)
        return -1;
    rec->resp = *resp;
    resp->body = NULL;
    rec->state = IDEM_DONE;
    rec->owner = NULL;
    return 0;
}

int idem_release(struct idem_store *s, struct idem_record *rec, const void *owner)
{
    if (rec->state != IDEM_PROCESSING || rec->owner != owner)
        return -1;
    record_delete(s, rec);
    return 0;
}

size_t idem_count(const struct idem_store *s)
{
    return s->map.len;
}

size_t idem_sweep(struct idem_store *s, int64_t now_ns, size_t budget, bool *more)
{
    size_t deleted = 0;
    struct idem_record *moved = NULL; /* the first record moved to the end in this call */
    if (more)
        *more = false;
    while (s->oldest && s->oldest != moved && now_ns >= s->oldest->expires_ns) {
        if (budget-- == 0) {
            if (more)
                *more = true;
            break;
        }
        struct idem_record *r = s->oldest;
        if (r->state == IDEM_DONE) {
            record_delete(s, r);
            deleted++;
            continue;
        }
        /* PROCESSING: it never expires while its owner holds it. Out of the sweep's way, so
         * the DONE records behind it still go; once DONE it is expired at the first look. */
        list_unlink(s, r);
        list_append(s, r);
        if (!moved)
            moved = r;
    }
    return deleted;
}

/* Expired records idem_room looks at when the store is full: enough that a steady flow of new
 * keys at the bound finds the room expiry has made, few enough to keep a claim cheap. */
#define ROOM_SWEEP 64

bool idem_room(struct idem_store *s, int64_t now_ns)
{
    if (!s->max_records || s->map.len < s->max_records)
        return true;
    idem_sweep(s, now_ns, ROOM_SWEEP, NULL);
    return s->map.len < s->max_records;
}
