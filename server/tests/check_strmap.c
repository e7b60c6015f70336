/* check_strmap.c -- unit tests for strmap.c: put/add/get/del/clear, replacement, keys with NUL
 * bytes, 10^5 keys with every other one deleted (backward-shift deletion), and a seeded
 * random put/del workload on a small map checked against a plain array model. */
#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "rng.h"
#include "strmap.h"

static int vals[16];

START_TEST(test_strmap_empty_get_and_del_return_null)
{
    struct strmap m;
    strmap_init(&m);
    ck_assert_ptr_null(strmap_get(&m, "a", 1));
    ck_assert_ptr_null(strmap_del(&m, "a", 1));
    ck_assert_uint_eq(m.len, 0);
    ck_assert_uint_eq(m.cap, 0);
    strmap_fini(&m);
}
END_TEST

START_TEST(test_strmap_put_then_get)
{
    struct strmap m;
    strmap_init(&m);
    ck_assert_ptr_null(strmap_put(&m, "alpha", 5, &vals[0]));
    ck_assert_ptr_null(strmap_put(&m, "beta", 4, &vals[1]));
    ck_assert_ptr_eq(strmap_get(&m, "alpha", 5), &vals[0]);
    ck_assert_ptr_eq(strmap_get(&m, "beta", 4), &vals[1]);
    ck_assert_ptr_null(strmap_get(&m, "alph", 4)); /* prefix */
    ck_assert_ptr_null(strmap_get(&m, "gamma", 5));
    ck_assert_uint_eq(m.len, 2);
    strmap_fini(&m);
}
END_TEST

START_TEST(test_strmap_put_replacing_returns_old_value)
{
    struct strmap m;
    strmap_init(&m);
    char k1[] = "key", k2[] = "key";
    ck_assert_ptr_null(strmap_put(&m, k1, 3, &vals[0]));
    ck_assert_ptr_eq(strmap_put(&m, k2, 3, &vals[1]), &vals[0]);
    ck_assert_uint_eq(m.len, 1);
    ck_assert_ptr_eq(strmap_get(&m, "key", 3), &vals[1]);
    /* The map now points at the new key's bytes: the old copy may go away. */
    k1[0] = 'X';
    ck_assert_ptr_eq(strmap_get(&m, "key", 3), &vals[1]);
    strmap_fini(&m);
}
END_TEST

START_TEST(test_strmap_add_keeps_the_existing_value)
{
    struct strmap m;
    strmap_init(&m);
    ck_assert_ptr_null(strmap_add(&m, "key", 3, &vals[0]));
    ck_assert_ptr_eq(strmap_add(&m, "key", 3, &vals[1]), &vals[0]);
    ck_assert_ptr_eq(strmap_get(&m, "key", 3), &vals[0]);
    ck_assert_uint_eq(m.len, 1);
    /* 12 adds through a 16-slot table's growth point: every one still found */
    char k[16][4];
    for (int i = 0; i < 16; i++) {
        snprintf(k[i], sizeof k[i], "k%d", i);
        ck_assert_ptr_null(strmap_add(&m, k[i], strlen(k[i]), &vals[i]));
    }
    ck_assert_uint_eq(m.len, 17);
    ck_assert_uint_eq(m.cap, 32);
    for (int i = 0; i < 16; i++)
        ck_assert_ptr_eq(strmap_get(&m, k[i], strlen(k[i])), &vals[i]);
    strmap_fini(&m);
}
END_TEST

START_TEST(test_strmap_add_hashed_is_strmap_add_with_the_hash_given)
{
    struct strmap m;
    strmap_init(&m);
    uint64_t h = strmap_hash("pk_1", 4);
    ck_assert_uint_gt(h, 1); /* 0 and 1 mark empty and deleted slots */
    ck_assert_uint_eq(h, strmap_hash("pk_1", 4));
    ck_assert_uint_ne(h, strmap_hash("pk_2", 4));
    ck_assert_ptr_null(strmap_add_hashed(&m, h, "pk_1", 4, &vals[0]));
    /* found by the plain calls, which hash the key themselves */
    ck_assert_ptr_eq(strmap_get(&m, "pk_1", 4), &vals[0]);
    ck_assert_ptr_eq(strmap_add(&m, "pk_1", 4, &vals[1]), &vals[0]);
    ck_assert_ptr_eq(strmap_add_hashed(&m, h, "pk_1", 4, &vals[2]), &vals[0]);
    ck_assert_uint_eq(m.len, 1);
    ck_assert_ptr_eq(strmap_del(&m, "pk_1", 4), &vals[0]);
    ck_assert_ptr_null(strmap_get(&m, "pk_1", 4));
    strmap_fini(&m);
}
END_TEST

START_TEST(test_strmap_del_returns_value_and_removes_only_that_key)
{
    struct strmap m;
    strmap_init(&m);
    strmap_put(&m, "a", 1, &vals[0]);
    strmap_put(&m, "b", 1, &vals[1]);
    strmap_put(&m, "c", 1, &vals[2]);
    ck_assert_ptr_eq(strmap_del(&m, "b", 1), &vals[1]);
    ck_assert_ptr_null(strmap_get(&m, "b", 1));
    ck_assert_ptr_null(strmap_del(&m, "b", 1));
    ck_assert_ptr_eq(strmap_get(&m, "a", 1), &vals[0]);
    ck_assert_ptr_eq(strmap_get(&m, "c", 1), &vals[2]);
    ck_assert_uint_eq(m.len, 2);
    strmap_fini(&m);
}
END_TEST

START_TEST(test_strmap_clear_removes_everything_and_map_stays_usable)
{
    struct strmap m;
    strmap_init(&m);
    char keys[10][4];
    for (int i = 0; i < 10; i++) {
        snprintf(keys[i], sizeof keys[i], "k%d", i);
        strmap_put(&m, keys[i], strlen(keys[i]), &vals[i]);
    }
    size_t cap = m.cap;
    strmap_clear(&m);
    ck_assert_uint_eq(m.len, 0);
    ck_assert_uint_eq(m.cap, cap); /* keeps the allocation */
    for (int i = 0; i < 10; i++)
        ck_assert_ptr_null(strmap_get(&m, keys[i], strlen(keys[i])));
    ck_assert_ptr_null(strmap_put(&m, keys[3], strlen(keys[3]), &vals[11]));
    ck_assert_ptr_eq(strmap_get(&m, keys[3], strlen(keys[3])), &vals[11]);
    ck_assert_uint_eq(m.len, 1);
    strmap_fini(&m);
}
END_TEST

START_TEST(test_strmap_keys_with_nul_bytes_use_explicit_lengths)
{
    struct strmap m;
    strmap_init(&m);
    static const char k_a0b[] = {'a', '\0', 'b'};
    static const char k_a0c[] = {'a', '\0', 'c'};
    static const char k_a[] = {'a'};
    static const char k_a0[] = {'a', '\0'};
    static const char k_0[] = {'\0'};
    ck_assert_ptr_null(strmap_put(&m, k_a0b, 3, &vals[0]));
    ck_assert_ptr_null(strmap_put(&m, k_a0c, 3, &vals[1]));
    ck_assert_ptr_null(strmap_put(&m, k_a, 1, &vals[2]));
    ck_assert_ptr_null(strmap_put(&m, k_a0, 2, &vals[3]));
    ck_assert_ptr_null(strmap_put(&m, k_0, 1, &vals[4]));
    ck_assert_ptr_null(strmap_put(&m, "", 0, &vals[5]));
    ck_assert_uint_eq(m.len, 6);
    ck_assert_ptr_eq(strmap_get(&m, "a\0b", 3), &vals[0]);
    ck_assert_ptr_eq(strmap_get(&m, "a\0c", 3), &vals[1]);
    ck_assert_ptr_eq(strmap_get(&m, "a", 1), &vals[2]);
    ck_assert_ptr_eq(strmap_get(&m, "a\0", 2), &vals[3]);
    ck_assert_ptr_eq(strmap_get(&m, "\0", 1), &vals[4]);
    ck_assert_ptr_eq(strmap_get(&m, "", 0), &vals[5]);
    ck_assert_ptr_eq(strmap_del(&m, "a\0b", 3), &vals[0]);
    ck_assert_ptr_null(strmap_get(&m, "a\0b", 3));
    ck_assert_ptr_eq(strmap_get(&m, "a\0c", 3), &vals[1]);
    ck_assert_ptr_eq(strmap_get(&m, "a", 1), &vals[2]);
    strmap_fini(&m);
}
END_TEST

#define BIG 100000

START_TEST(test_strmap_100k_keys_every_other_deleted_rest_still_found)
{
    struct strmap m;
    strmap_init(&m);
    char (*keys)[16] = malloc(BIG * sizeof *keys);
    int *v = malloc(BIG * sizeof *v);
    ck_assert_ptr_nonnull(keys);
    ck_assert_ptr_nonnull(v);
    for (int i = 0; i < BIG; i++) {
        snprintf(keys[i], sizeof keys[i], "key-%d", i);
        v[i] = i;
        if (strmap_put(&m, keys[i], strlen(keys[i]), &v[i]) != NULL)
            ck_abort_msg("put %s: not new", keys[i]);
    }
    ck_assert_uint_eq(m.len, BIG);
    ck_assert_uint_le(m.len * 4, m.cap * 3); /* load factor <= 3/4 */
    for (int i = 0; i < BIG; i += 2)
        if (strmap_del(&m, keys[i], strlen(keys[i])) != &v[i])
            ck_abort_msg("del %s: wrong value", keys[i]);
    ck_assert_uint_eq(m.len, BIG / 2);
    for (int i = 0; i < BIG; i++) {
        void *got = strmap_get(&m, keys[i], strlen(keys[i]));
        if (got != (i % 2 ? &v[i] : NULL))
            ck_abort_msg("get %s after deleting the even keys: %p, want %p", keys[i], got,
                         i % 2 ? (void *)&v[i] : NULL);
    }
    /* Every occupied slot is reachable from its home without crossing an empty slot. */
    size_t mask = m.cap - 1, occupied = 0;
    for (size_t i = 0; i < m.cap; i++) {
        if (!m.slots[i].hash)
            continue;
        occupied++;
        for (size_t j = (size_t)m.slots[i].hash & mask; j != i; j = (j + 1) & mask)
            if (m.slots[j].hash == 0)
                ck_abort_msg("slot %zu unreachable: empty slot %zu on its probe run", i, j);
    }
    ck_assert_uint_eq(occupied, BIG / 2);
    /* Delete the rest: the map ends empty. */
    for (int i = 1; i < BIG; i += 2)
        if (strmap_del(&m, keys[i], strlen(keys[i])) != &v[i])
            ck_abort_msg("del %s: wrong value", keys[i]);
    ck_assert_uint_eq(m.len, 0);
    for (size_t i = 0; i < m.cap; i++)
        if (m.slots[i].hash != 0)
            ck_abort_msg("slot %zu still occupied in an empty map", i);
    strmap_fini(&m);
    free(keys);
    free(v);
}
END_TEST

#define NKEYS 11
#define NOPS 200000

START_TEST(test_strmap_random_put_del_on_small_map_matches_model)
{
    /* 11 keys fit a 16-slot map (11 * 4 <= 16 * 3), so probe runs wrap around its end. */
    struct strmap m;
    strmap_init(&m);
    static char keys[NKEYS][8];
    static int v[NKEYS];
    bool present[NKEYS] = {false};
    size_t n = 0, wrapped = 0;
    for (int i = 0; i < NKEYS; i++)
        snprintf(keys[i], sizeof keys[i], "s%d", i); /* "s0".."s10": with the map's hash,
                                                         some runs wrap (asserted below) */
    struct rng r;
    rng_seed(&r, 7);
    for (int op = 0; op < NOPS; op++) {
        uint64_t x = rng_next(&r);
        int k = (int)(x % NKEYS);
        size_t kl = strlen(keys[k]);
        if ((x >> 32) % 4 == 2) {
            /* add: inserts only when absent, else returns what is there */
            void *got = strmap_add(&m, keys[k], kl, &v[k]);
            if (got != (present[k] ? &v[k] : NULL))
                ck_abort_msg("op %d: add %s returned the wrong value", op, keys[k]);
            if (!present[k])
                n++;
            present[k] = true;
        } else if ((x >> 32) & 1) {
            void *old = strmap_put(&m, keys[k], kl, &v[k]);
            if (old != (present[k] ? &v[k] : NULL))
                ck_abort_msg("op %d: put %s returned the wrong old value", op, keys[k]);
            if (!present[k])
                n++;
            present[k] = true;
        } else {
            void *old = strmap_del(&m, keys[k], kl);
            if (old != (present[k] ? &v[k] : NULL))
                ck_abort_msg("op %d: del %s returned the wrong value", op, keys[k]);
            if (present[k])
                n--;
            present[k] = false;
        }
        if (m.len != n)
            ck_abort_msg("op %d: len %zu, model %zu", op, m.len, n);
        for (int j = 0; j < NKEYS; j++)
            if (strmap_get(&m, keys[j], strlen(keys[j])) != (present[j] ? &v[j] : NULL))
                ck_abort_msg("op %d: key %s %s in the model but get disagrees", op, keys[j],
                             present[j] ? "present" : "absent");
        for (size_t i = 0; i < m.cap; i++)
            if (m.slots[i].hash && i < ((size_t)m.slots[i].hash & (m.cap - 1))) {
                wrapped++; /* an entry sits past the array's end, before its home */
                break;
            }
    }
    ck_assert_uint_eq(m.cap, 16);
    ck_assert_uint_gt(wrapped, 0);
    strmap_fini(&m);
}
END_TEST

#define BIG_KEYS 60000
#define BIG_OPS 400000

static size_t visits;
static unsigned char *seen; /* per key index: how many times strmap_each visited it */
static int *big_vals;

static void visit(void *val)
{
    visits++;
    seen[(int *)val - big_vals]++;
}

/* Random put/add/del/get on up to 60 000 keys, through several growths: the map must agree
 * with a plain array model after every operation, also while a growth is half done (entries
 * in both tables), and strmap_each must visit every live value exactly once. */
START_TEST(test_strmap_incremental_growth_matches_model)
{
    struct strmap m;
    strmap_init(&m);
    static char keys[BIG_KEYS][16];
    static bool present[BIG_KEYS];
    static int bvals[BIG_KEYS];
    static unsigned char seen_buf[BIG_KEYS];
    big_vals = bvals;
    seen = seen_buf;
    memset(present, 0, sizeof present);
    for (int i = 0; i < BIG_KEYS; i++)
        snprintf(keys[i], sizeof keys[i], "pk_%d", i);
    struct rng r;
    rng_seed(&r, 11);
    size_t n = 0, ops_while_growing = 0, growths = 0;
    bool was_growing = false;
    for (int op = 0; op < BIG_OPS; op++) {
        uint64_t x = rng_next(&r);
        /* Inserts outnumber deletes 3:1 early on, so the map grows; then it churns. */
        int k = (int)(x % (uint64_t)(op < BIG_OPS / 2 ? 1 + op / 4 % BIG_KEYS : BIG_KEYS));
        size_t kl = strlen(keys[k]);
        int kind = (int)((x >> 32) % 8);
        void *want = present[k] ? &bvals[k] : NULL;
        void *got;
        if (kind < 3) {
            got = strmap_put(&m, keys[k], kl, &bvals[k]);
            n += !present[k];
            present[k] = true;
        } else if (kind < 5) {
            got = strmap_add(&m, keys[k], kl, &bvals[k]);
            n += !present[k];
            present[k] = true;
        } else if (kind < 6) {
            got = strmap_del(&m, keys[k], kl);
            n -= present[k];
            present[k] = false;
        } else {
            got = strmap_get(&m, keys[k], kl);
        }
        if (got != want)
            ck_abort_msg("op %d (kind %d) on %s: got %p, want %p", op, kind, keys[k], got, want);
        if (m.len != n)
            ck_abort_msg("op %d: len %zu, model %zu", op, m.len, n);
        if (m.old) {
            ops_while_growing++;
            if (!was_growing)
                growths++;
        }
        was_growing = m.old != NULL;
        if (op % 20011 == 0 || (m.old && op % 997 == 0)) {
            for (int j = 0; j < BIG_KEYS; j++)
                if (strmap_get(&m, keys[j], strlen(keys[j])) != (present[j] ? &bvals[j] : NULL))
                    ck_abort_msg("op %d: key %s disagrees with the model", op, keys[j]);
            visits = 0;
            memset(seen_buf, 0, sizeof seen_buf);
            strmap_each(&m, visit);
            ck_assert_uint_eq(visits, n);
            for (int j = 0; j < BIG_KEYS; j++)
                if (seen_buf[j] != (present[j] ? 1 : 0))
                    ck_abort_msg("op %d: strmap_each visited %s %d times", op, keys[j], seen_buf[j]);
        }
    }
    ck_assert_uint_ge(growths, 8);          /* 16 -> ... -> 65536 slots at least */
    ck_assert_uint_gt(ops_while_growing, 1000); /* checks ran with both tables in use */
    strmap_fini(&m);
}
END_TEST

Suite *make_suite(void)
{
    Suite *s = suite_create("strmap");
    TCase *basic = tcase_create("basic");
    tcase_add_test(basic, test_strmap_empty_get_and_del_return_null);
    tcase_add_test(basic, test_strmap_put_then_get);
    tcase_add_test(basic, test_strmap_put_replacing_returns_old_value);
    tcase_add_test(basic, test_strmap_add_keeps_the_existing_value);
    tcase_add_test(basic, test_strmap_add_hashed_is_strmap_add_with_the_hash_given);
    tcase_add_test(basic, test_strmap_del_returns_value_and_removes_only_that_key);
    tcase_add_test(basic, test_strmap_clear_removes_everything_and_map_stays_usable);
    tcase_add_test(basic, test_strmap_keys_with_nul_bytes_use_explicit_lengths);
    suite_add_tcase(s, basic);

    TCase *load = tcase_create("load");
    tcase_set_timeout(load, 60);
    tcase_add_test(load, test_strmap_100k_keys_every_other_deleted_rest_still_found);
    tcase_add_test(load, test_strmap_random_put_del_on_small_map_matches_model);
    tcase_add_test(load, test_strmap_incremental_growth_matches_model);
    suite_add_tcase(s, load);
    return s;
}
