/* strmap.c -- open-addressing hash map with incremental growth (see strmap.h).
 * Invariants: cap is 0 or a power of two; live entries <= cap * 3/4 in `slots`, so a probe
 * always reaches an empty slot. While growing, `old` holds the previous table: every key is in
 * exactly one of the two tables; `old` gets no inserts, only tombstones (for keys deleted or
 * moved to `slots`), so its probe runs stay intact until it is freed. `slots` has no
 * tombstones (backward-shift deletion). */
#include "strmap.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"

#define EMPTY 0
#define TOMB 1 /* in `old` only */
#define MIGRATE_STEP 8 /* old slots moved per insert or delete while growing */

/* Eight bytes at a time (the keys are paymentKeys, orderIds and idempotency scopes of 20-300
 * bytes, hashed several times per request); hash64 (FNV-1a, a byte at a time) stays the
 * generator's seed hash, whose values the fault plans depend on. Never EMPTY or TOMB. */
uint64_t strmap_hash(const char *key, size_t len)
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
    return h > TOMB ? h : h + 2;
}

void strmap_init(struct strmap *m)
{
    memset(m, 0, sizeof *m);
}

void strmap_fini(struct strmap *m)
{
    free(m->slots);
    free(m->old);
    strmap_init(m);
}

/* A new table comes from calloc, i.e. from the kernel untouched for any large size. Linux maps
 * a page that is first read to its shared zero page, and the write that follows (an insert)
 * must then replace that mapping and flush it from the TLB of every CPU running this process:
 * with two worker threads, an inter-processor interrupt per page. A probe reads its home slot
 * first, so touch that slot with a write access before reading it: `lock or $0` changes no
 * bits, and makes a first touch a plain write fault, with no zero page and no flush (usually:
 * a probe that runs on into the next page still reads that page first). Measured at c50 with
 * two workers (six interleaved 5-s pairs): 62-121 -> 15-39 TLB-shootdown and function-call
 * IPIs per 1000 confirms, 0.7-2.4 us less system CPU per confirm, throughput higher in every
 * pair (median +9 %). Populating the table when it is allocated would do the same, but stall
 * the insert that grows it (~33 ms for a 64 MB table here). */
static void touch_for_write(const struct strmap_slot *s)
{
    __atomic_fetch_or((uint64_t *)&s->hash, 0, __ATOMIC_RELAXED);
}

static bool same(const struct strmap_slot *s, uint64_t h, const char *key, size_t len)
{
    return s->hash == h && s->key_len == len && memcmp(s->key, key, len) == 0;
}

/* The slot holding key in a table of cap slots (probing past tombstones), or NULL. */
static struct strmap_slot *probe(struct strmap_slot *slots, size_t cap, uint64_t h,
                                 const char *key, size_t len)
{
    if (cap == 0)
        return NULL;
    size_t mask = cap - 1;
    touch_for_write(&slots[(size_t)h & mask]);
    for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
        struct strmap_slot *s = &slots[i];
        if (s->hash == EMPTY)
            return NULL;
        if (same(s, h, key, len))
            return s;
    }
}

static struct strmap_slot *find(const struct strmap *m, uint64_t h, const char *key, size_t len)
{
    return probe(m->slots, m->cap, h, key, len);
}

static struct strmap_slot *find_old(const struct strmap *m, uint64_t h, const char *key,
                                    size_t len)
{
    return m->old ? probe(m->old, m->old_cap, h, key, len) : NULL;
}

void *strmap_get(const struct strmap *m, const char *key, size_t key_len)
{
    uint64_t h = strmap_hash(key, key_len);
    struct strmap_slot *s = find(m, h, key, key_len);
    if (!s)
        s = find_old(m, h, key, key_len);
    return s ? s->val : NULL;
}

static void place(struct strmap_slot *slots, size_t cap, const struct strmap_slot *src)
{
    size_t mask = cap - 1;
    size_t i = (size_t)src->hash & mask;
    touch_for_write(&slots[i]);
    while (slots[i].hash != EMPTY)
        i = (i + 1) & mask;
    slots[i] = *src;
}

/* Move up to n slots of `old` into `slots`; free `old` once it is drained. */
static void migrate(struct strmap *m, size_t n)
{
    for (; m->old && n > 0; n--) {
        struct strmap_slot *s = &m->old[m->old_pos++];
        if (s->hash > TOMB) {
            place(m->slots, m->cap, s);
            s->hash = TOMB;
            m->old_live--;
        }
        if (m->old_pos == m->old_cap || m->old_live == 0) {
            free(m->old);
            m->old = NULL;
            m->old_cap = m->old_pos = 0;
        }
    }
}

/* Start growing: a table twice the size becomes `slots`, the full one becomes `old`. Entries
 * move a few at a time with later inserts and deletes, so no single call rehashes the whole
 * map (at 10^6 entries that took ~130 ms). If a previous growth has not finished (it always
 * has: see insert), it is finished first. */
static int grow(struct strmap *m)
{
    size_t ncap = m->cap ? m->cap * 2 : 16;
    struct strmap_slot *ns = calloc(ncap, sizeof *ns);
    if (!ns)
        return -1;
    migrate(m, SIZE_MAX);
    if (m->cap && m->len > 0) {
        m->old = m->slots;
        m->old_cap = m->cap;
        m->old_pos = 0;
        m->old_live = m->len;
    } else {
        free(m->slots);
    }
    m->slots = ns;
    m->cap = ncap;
    return 0;
}

/* Insert (replace = false: only if absent); h is the key's hash. A key still in `old` is
 * updated there. */
static void *insert(struct strmap *m, uint64_t h, const char *key, size_t key_len, void *val,
                    bool replace)
{
    migrate(m, MIGRATE_STEP);
    struct strmap_slot *s = find_old(m, h, key, key_len);
    if (!s)
        s = find(m, h, key, key_len);
    if (s) {
        void *old = s->val;
        if (replace) {
            s->key = key; /* the new value may own a new copy of the key */
            s->val = val;
        }
        return old;
    }
    /* Entries in `slots` (moved or new) stay under 3/4 of it: a growth starts at 3/4 of the
     * old size, i.e. 3/8 of the new one, and `old` is drained within old_cap / MIGRATE_STEP
     * inserts, long before `slots` could fill. */
    size_t in_slots = m->len - m->old_live;
    if ((in_slots + 1) * 4 > m->cap * 3 && grow(m) != 0)
        return val;
    struct strmap_slot ns = {h, key, key_len, val};
    place(m->slots, m->cap, &ns);
    m->len++;
    return NULL;
}

void *strmap_put(struct strmap *m, const char *key, size_t key_len, void *val)
{
    return insert(m, strmap_hash(key, key_len), key, key_len, val, true);
}

void *strmap_add(struct strmap *m, const char *key, size_t key_len, void *val)
{
    return insert(m, strmap_hash(key, key_len), key, key_len, val, false);
}

void *strmap_add_hashed(struct strmap *m, uint64_t hash, const char *key, size_t key_len,
                        void *val)
{
    return insert(m, hash, key, key_len, val, false);
}

void *strmap_del(struct strmap *m, const char *key, size_t key_len)
{
    uint64_t h = strmap_hash(key, key_len);
    migrate(m, MIGRATE_STEP);
    struct strmap_slot *s = find_old(m, h, key, key_len);
    if (s) {
        void *val = s->val;
        s->hash = TOMB;
        m->old_live--;
        m->len--;
        return val;
    }
    s = find(m, h, key, key_len);
    if (!s)
        return NULL;
    void *val = s->val;
    size_t mask = m->cap - 1;
    size_t i = (size_t)(s - m->slots);
    /* Backward-shift: pull later entries of the probe run into the hole. */
    for (size_t j = (i + 1) & mask; m->slots[j].hash != EMPTY; j = (j + 1) & mask) {
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
    free(m->old);
    m->old = NULL;
    m->old_cap = m->old_pos = m->old_live = 0;
    if (m->slots)
        memset(m->slots, 0, m->cap * sizeof *m->slots);
    m->len = 0;
}

void strmap_each(const struct strmap *m, void (*fn)(void *val))
{
    for (size_t i = 0; i < m->cap; i++)
        if (m->slots[i].hash > TOMB)
            fn(m->slots[i].val);
    for (size_t i = 0; m->old && i < m->old_cap; i++)
        if (m->old[i].hash > TOMB)
            fn(m->old[i].val);
}
