/* strmap.h -- a hash map from byte-string keys to pointers (open addressing, linear probing,
 * backward-shift deletion: no tombstones, so lookups stay short after many deletions). It
 * grows incrementally: when full, a table twice the size takes new entries and the old one is
 * moved over a few slots per insert or delete, so no call pauses to rehash a large map.
 * The map does not own keys or values: a key's bytes must stay valid while it is in the map
 * (typically the key lives inside the value). Not thread-safe: the owner's lock guards it. */
#ifndef FAKEGATE_STRMAP_H
#define FAKEGATE_STRMAP_H

#include <stddef.h>
#include <stdint.h>

struct strmap_slot {
    uint64_t hash;       /* 0 = empty, 1 = deleted (only in `old`); real hashes are >= 2 */
    const char *key;
    size_t key_len;
    void *val;
};

struct strmap {
    struct strmap_slot *slots;
    size_t cap;          /* power of two, or 0 */
    size_t len;          /* entries, in both tables */
    struct strmap_slot *old; /* while growing: the previous table, being moved into slots */
    size_t old_cap, old_pos, old_live; /* its size, the next slot to move, entries left in it */
};

/* Initialise an empty map (no allocation until the first insert). */
void strmap_init(struct strmap *m);

/* Free the slot array (not keys or values). */
void strmap_fini(struct strmap *m);

/* Value stored under key, or NULL. */
void *strmap_get(const struct strmap *m, const char *key, size_t key_len);

/* Insert or replace. Returns the previous value (NULL if none), or `val` itself if memory ran
 * out (the map is then unchanged). */
void *strmap_put(struct strmap *m, const char *key, size_t key_len, void *val);

/* Insert only if key is absent: returns NULL when inserted, the value already stored under key
 * (the map unchanged), or `val` itself if memory ran out. One probe walk: a lookup and an
 * insert in one. */
void *strmap_add(struct strmap *m, const char *key, size_t key_len, void *val);
/* The hash the map uses for key (64 bits, never 0 or 1; the map's slot comes from its low
 * bits), for a caller that also picks one of several maps by it (use the high bits). */
uint64_t strmap_hash(const char *key, size_t key_len);
/* strmap_add for a key whose strmap_hash is already known: `hash` must be exactly that. */
void *strmap_add_hashed(struct strmap *m, uint64_t hash, const char *key, size_t key_len,
                        void *val);

/* Remove key; returns its value, or NULL if absent. */
void *strmap_del(struct strmap *m, const char *key, size_t key_len);

/* Remove every entry (keeps the allocation). */
void strmap_clear(struct strmap *m);

/* Call fn on every value (in no particular order); fn must not change the map. */
void strmap_each(const struct strmap *m, void (*fn)(void *val));

#endif
