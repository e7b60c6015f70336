/* strmap.c -- open-addressing hash map (see strmap.h). Invariant: cap is 0 or a power of two,
 * and len <= cap * 3/4, so a probe always reaches an empty slot. */
#include "strmap.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

/* Eight bytes at a time (the keys are paymentKeys, orderIds and idempotency scopes of 20-300
 * bytes, hashed several times per request); hash64 (FNV-1a, a byte at a time) stays the
 * generator's seed hash, whose values the fault plans depend on. Never 0 (= empty slot). */
static uint64_t key_hash(const char *key, size_t len)
{
    const unsigned char *p = (const unsigned char *)key;
    uint64_t h = UINT64_C(0x9e3779b97f4a7c15) ^ len, w;
    size_t n = len;
    for (; n >= 8; n -= 8, p += 8) {
        memcpy(&w, p, 8);
        h = (h ^ w) * UINT64_C(0xbf58476d1ce4e5b9);
        h ^= h >> 31;
    }
    w = 0;
    for (size_t i = 0; i < n; i++)
        w |= (uint64_t)p[i] << (8 * i);
    h = mix64((h ^ w) * UINT64_C(0x94d049bb133111eb));
    return h ? h : 1;
}

void strmap_init(struct strmap *m)
{
    m->slots = NULL;
    m->cap = 0;
    m->len = 0;
}

void strmap_fini(struct strmap *m)
{
    free(m->slots);
    strmap_init(m);
}

static struct strmap_slot *find(const struct strmap *m, uint64_t h, const char *key, size_t len)
{
    if (m->cap == 0)
        return NULL;
    size_t mask = m->cap - 1;
    for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
        struct strmap_slot *s = &m->slots[i];
        if (s->hash == 0)
            return NULL;
        if (s->hash == h && s->key_len == len && memcmp(s->key, key, len) == 0)
            return s;
    }
}

void *strmap_get(const struct strmap *m, const char *key, size_t key_len)
{
    struct strmap_slot *s = find(m, key_hash(key, key_len), key, key_len);
    return s ? s->val : NULL;
}

static void place(struct strmap_slot *slots, size_t cap, const struct strmap_slot *src)
{
    size_t mask = cap - 1;
    size_t i = (size_t)src->hash & mask;
    while (slots[i].hash != 0)
        i = (i + 1) & mask;
    slots[i] = *src;
}

static int grow(struct strmap *m)
{
    size_t ncap = m->cap ? m->cap * 2 : 16;
    struct strmap_slot *ns = calloc(ncap, sizeof *ns);
    if (!ns)
        return -1;
    for (size_t i = 0; i < m->cap; i++)
        if (m->slots[i].hash)
            place(ns, ncap, &m->slots[i]);
    free(m->slots);
    m->slots = ns;
    m->cap = ncap;
    return 0;
}

/* The slot holding key, or the empty slot where it would go. Requires a free slot. */
static struct strmap_slot *find_or_free(const struct strmap *m, uint64_t h, const char *key,
                                        size_t len)
{
    size_t mask = m->cap - 1;
    for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
        struct strmap_slot *s = &m->slots[i];
        if (s->hash == 0 || (s->hash == h && s->key_len == len && memcmp(s->key, key, len) == 0))
            return s;
    }
}

/* Insert (replace = false: only if absent). One probe walk; the table grows first if the new
 * entry could push it past 3/4 full. */
static void *insert(struct strmap *m, const char *key, size_t key_len, void *val, bool replace)
{
    uint64_t h = key_hash(key, key_len);
    if ((m->len + 1) * 4 > m->cap * 3 && grow(m) != 0) {
        struct strmap_slot *s = find(m, h, key, key_len); /* full: an update may still fit */
        if (!s)
            return val;
        void *old = s->val;
        if (replace) {
            s->key = key;
            s->val = val;
        }
        return old;
    }
    struct strmap_slot *s = find_or_free(m, h, key, key_len);
    if (s->hash) {
        void *old = s->val;
        if (replace) {
            s->key = key; /* the new value may own a new copy of the key */
            s->val = val;
        }
        return old;
    }
    *s = (struct strmap_slot){h, key, key_len, val};
    m->len++;
    return NULL;
}

void *strmap_put(struct strmap *m, const char *key, size_t key_len, void *val)
{
    return insert(m, key, key_len, val, true);
}

void *strmap_add(struct strmap *m, const char *key, size_t key_len, void *val)
{
    return insert(m, key, key_len, val, false);
}

void *strmap_del(struct strmap *m, const char *key, size_t key_len)
{
    struct strmap_slot *s = find(m, key_hash(key, key_len), key, key_len);
    if (!s)
        return NULL;
    void *val = s->val;
    size_t mask = m->cap - 1;
    size_t i = (size_t)(s - m->slots);
    /* Backward-shift: pull later entries of the probe run into the hole. */
    for (size_t j = (i + 1) & mask; m->slots[j].hash; j = (j + 1) & mask) {
        size_t home = (size_t)m->slots[j].hash & mask;
        /* Move j into i if its home is not in the cyclic range (i, j]. */
        if (((j - home) & mask) >= ((j - i) & mask)) {
            m->slots[i] = m->slots[j];
            i = j;
        }
    }
    memset(&m->slots[i], 0, sizeof m->slots[i]);
    m->len--;
    return val;
}

void strmap_clear(struct strmap *m)
{
    if (m->slots)
        memset(m->slots, 0, m->cap * sizeof *m->slots);
    m->len = 0;
}
