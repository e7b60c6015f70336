/* idem.c -- idempotency records (see idem.h). Invariant: a record in the map is either
 * PROCESSING with a non-NULL owner or DONE with owner NULL. Expiry is lazy (at lookup). */
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
}

struct idem_record *idem_lookup(struct idem_store *s, const char *scope, size_t len,
                                int64_t now_ns)
{
    struct idem_record *r = strmap_get(&s->map, scope, len);
    /* A PROCESSING record never expires: its owner will complete or release it. */
    if (r && r->state == IDEM_DONE && now_ns >= r->expires_ns) {
        strmap_del(&s->map, scope, len);
        record_free(r);
        return NULL;
    }
    return r;
}

struct idem_record *idem_claim(struct idem_store *s, const char *scope, size_t len,
                               const void *owner, uint64_t body_hash, int64_t now_ns)
{
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
    if (old) /* an expired record nobody looked up since: replaced */
        record_free(old);
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
    strmap_del(&s->map, rec->scope, rec->scope_len);
    record_free(rec);
    return 0;
}

size_t idem_count(const struct idem_store *s)
{
    return s->map.len;
}
