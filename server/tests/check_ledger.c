/* check_ledger.c -- unit tests for ledger.c: payment creation and indexes, approval and its
 * transaction row, Idempotency-Key notes, derived transaction keys and finding a row by its
 * key, virtual accounts (deposits, deposit errors, expiry, the due-date index), the bound on
 * payments (--max-payments), and reset.
 * Pure: every time is a parameter. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "ledger.h"

#define SALT UINT64_C(0x1234567890abcdef)

START_TEST(test_ledger_create_sets_in_progress_amount_and_balance)
{
    struct ledger l;
    ledger_init(&l, SALT);
    struct payment *p = ledger_create(&l, "pk_1", "order-1", 15000, 1700000000000000, NULL);
    ck_assert_ptr_nonnull(p);
    ck_assert_str_eq(p->payment_key, "pk_1");
    ck_assert_str_eq(p->order_id, "order-1");
    ck_assert_int_eq(p->status, PAY_IN_PROGRESS);
    ck_assert_int_eq(p->amount, 15000);
    ck_assert_int_eq(p->balance, 15000);
    ck_assert_uint_eq(p->charges, 0);
    ck_assert_int_eq(p->requested_at_us, 1700000000000000);
    ck_assert_int_eq(p->approved_at_us, 0);
    ck_assert_uint_eq(p->n_cancels, 0);
    ck_assert_uint_eq(p->n_idem_keys, 0);
    ck_assert(!p->processing);
    ck_assert_ptr_eq(ledger_get(&l, "pk_1"), p);
    ck_assert_ptr_eq(ledger_get_by_order(&l, "order-1"), p);
    ck_assert_uint_eq(l.n_all, 1);
    ck_assert_ptr_eq(l.all[0], p);
    ck_assert_uint_eq(l.n_txs, 0);
    ledger_fini(&l);
}
END_TEST

START_TEST(test_ledger_create_copies_strings)
{
    struct ledger l;
    ledger_init(&l, SALT);
    char key[] = "pk_copy", order[] = "order-copy";
    struct payment *p = ledger_create(&l, key, order, 100, 1, NULL);
    ck_assert_ptr_ne(p->payment_key, key);
    ck_assert_ptr_ne(p->order_id, order);
    key[0] = 'X';
    order[0] = 'X';
    ck_assert_ptr_eq(ledger_get(&l, "pk_copy"), p);
    ck_assert_ptr_eq(ledger_get_by_order(&l, "order-copy"), p);
    ledger_fini(&l);
}
END_TEST

START_TEST(test_ledger_create_ids_increase)
{
    struct ledger l;
    ledger_init(&l, SALT);
    uint64_t prev = 0;
    char key[32], order[32];
    for (int i = 0; i < 200; i++) {
        snprintf(key, sizeof key, "pk_%d", i);
        snprintf(order, sizeof order, "order-%d", i);
        struct payment *p = ledger_create(&l, key, order, 1000 + i, 1, NULL);
        ck_assert_ptr_nonnull(p);
        ck_assert_uint_gt(p->id, prev);
        prev = p->id;
        ck_assert_ptr_eq(l.all[i], p); /* creation order */
    }
    ck_assert_uint_eq(l.n_all, 200);
    for (int i = 0; i < 200; i++) {
        snprintf(key, sizeof key, "pk_%d", i);
        struct payment *p = ledger_get(&l, key);
        ck_assert_ptr_nonnull(p);
        ck_assert_int_eq(p->amount, 1000 + i);
    }
    ledger_fini(&l);
}
END_TEST

START_TEST(test_ledger_create_duplicate_payment_key_is_null)
{
    struct ledger l;
    ledger_init(&l, SALT);
    struct payment *p = ledger_create(&l, "pk_dup", "order-a", 1000, 1, NULL);
    ck_assert_ptr_nonnull(p);
    enum ledger_create_result why = LEDGER_CREATED;
    ck_assert_ptr_null(ledger_create(&l, "pk_dup", "order-b", 2000, 2, &why));
    ck_assert_int_eq(why, LEDGER_KEY_EXISTS);
    ck_assert_uint_eq(l.n_all, 1);
    ck_assert_ptr_eq(ledger_get(&l, "pk_dup"), p);
    ck_assert_int_eq(p->amount, 1000);
    ck_assert_ptr_null(ledger_get_by_order(&l, "order-b"));
    ledger_fini(&l);
}
END_TEST

/* An orderId belongs to one payment: a second payment with it is refused and leaves no trace
 * (docs/api.md §2.1: DUPLICATED_ORDER_ID), and the first keeps it. */
START_TEST(test_ledger_same_order_id_is_refused_and_first_keeps_it)
{
    struct ledger l;
    ledger_init(&l, SALT);
    enum ledger_create_result why = LEDGER_NO_MEMORY;
    struct payment *a = ledger_create(&l, "pk_a", "order-same", 1000, 1, &why);
    ck_assert_ptr_nonnull(a);
    ck_assert_int_eq(why, LEDGER_CREATED);
    ck_assert_ptr_null(ledger_create(&l, "pk_b", "order-same", 2000, 2, &why));
    ck_assert_int_eq(why, LEDGER_ORDER_TAKEN);
    ck_assert_ptr_null(ledger_get(&l, "pk_b")); /* its paymentKey was taken back out */
    ck_assert_ptr_eq(ledger_get_by_order(&l, "order-same"), a);
    ck_assert_uint_eq(l.n_all, 1);
    /* pk_b can still be created with a free orderId, and takes the next id */
    struct payment *b = ledger_create(&l, "pk_b", "order-other", 2000, 2, &why);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(b->id, a->id + 1);
    ledger_fini(&l);
}
END_TEST

START_TEST(test_ledger_create_beyond_max_payments_is_refused_with_full_and_unchanged)
{
    struct ledger l;
    ledger_init(&l, SALT);
    l.max_payments = 2;
    enum ledger_create_result why = LEDGER_CREATED;
    ck_assert_ptr_nonnull(ledger_create(&l, "pk_m1", "order-m1", 100, 1, &why));
    ck_assert_ptr_nonnull(ledger_create(&l, "pk_m2", "order-m2", 100, 2, &why));
    uint64_t next = l.next_id;
    ck_assert_ptr_null(ledger_create(&l, "pk_m3", "order-m3", 100, 3, &why));
    ck_assert_int_eq(why, LEDGER_FULL);
    ck_assert_uint_eq(l.n_all, 2);
    ck_assert_uint_eq(l.next_id, next); /* no id used up */
    ck_assert_ptr_null(ledger_get(&l, "pk_m3"));
    ck_assert_ptr_null(ledger_get_by_order(&l, "order-m3"));
    /* A virtual account is a payment too; the va stays the caller's when refused. */
    struct payment_va *va = calloc(1, sizeof *va);
    ck_assert_ptr_nonnull(va);
    ck_assert_ptr_null(ledger_create_va(&l, "pk_m4", "order-m4", 100, "n", va, 4, &why));
    ck_assert_int_eq(why, LEDGER_FULL);
    ledger_va_free(va);
    /* A reset empties the ledger and keeps the bound. */
    ledger_reset(&l);
    ck_assert_uint_eq(l.max_payments, 2);
    ck_assert_ptr_nonnull(ledger_create(&l, "pk_m3", "order-m3", 100, 5, &why));
    ck_assert_ptr_nonnull(ledger_create(&l, "pk_m4", "order-m4", 100, 6, &why));
    ck_assert_ptr_null(ledger_create(&l, "pk_m5", "order-m5", 100, 7, &why));
    ck_assert_int_eq(why, LEDGER_FULL);
    ledger_fini(&l);
}
END_TEST

START_TEST(test_ledger_get_unknown_is_null)
{
    struct ledger l;
    ledger_init(&l, SALT);
    ck_assert_ptr_null(ledger_get(&l, "nope"));
    ck_assert_ptr_null(ledger_get_by_order(&l, "nope"));
    ledger_create(&l, "pk_1", "order-1", 1000, 1, NULL);
    ck_assert_ptr_null(ledger_get(&l, "pk_"));
    ck_assert_ptr_null(ledger_get(&l, "order-1")); /* the two indexes are separate */
    ck_assert_ptr_null(ledger_get_by_order(&l, "pk_1"));
    ledger_fini(&l);
}
END_TEST

START_TEST(test_ledger_approve_sets_done_charges_once_and_adds_tx_row)
{
    struct ledger l;
    ledger_init(&l, SALT);
    struct payment *p = ledger_create(&l, "pk_1", "order-1", 5000, 100, NULL);
    ck_assert_int_eq(ledger_approve(&l, p, 1707794277000000), 0);
    ck_assert_int_eq(p->status, PAY_DONE);
    ck_assert_uint_eq(p->charges, 1);
    ck_assert_int_eq(p->approved_at_us, 1707794277000000);
    ck_assert_int_eq(p->requested_at_us, 100);
    ck_assert_int_eq(p->balance, 5000);
    ck_assert_uint_eq(l.n_txs, 1);
    ck_assert_ptr_eq(l.txs[0].payment, p);
    ck_assert_int_eq(l.txs[0].cancel_index, -1);
    ledger_fini(&l);
}
END_TEST

START_TEST(test_ledger_approve_tx_rows_in_commit_order_with_increasing_seq)
{
    struct ledger l;
    ledger_init(&l, SALT);
    struct payment *ps[100];
    char key[32], order[32];
    for (int i = 0; i < 100; i++) {
        snprintf(key, sizeof key, "pk_%d", i);
        snprintf(order, sizeof order, "order-%d", i);
        ps[i] = ledger_create(&l, key, order, 1000, 1, NULL);
    }
    /* Approve in reverse creation order: rows follow commit order, not creation. */
    for (int i = 99; i >= 0; i--)
        ck_assert_int_eq(ledger_approve(&l, ps[i], 2), 0);
    ck_assert_uint_eq(l.n_txs, 100);
    for (size_t i = 0; i < 100; i++) {
        ck_assert_ptr_eq(l.txs[i].payment, ps[99 - i]);
        ck_assert_int_eq(l.txs[i].cancel_index, -1);
        if (i > 0)
            ck_assert_uint_gt(l.txs[i].seq, l.txs[i - 1].seq);
        ck_assert_uint_eq(ps[i]->charges, 1);
    }
    ledger_fini(&l);
}
END_TEST

START_TEST(test_ledger_note_idem_key_dedups)
{
    struct ledger l;
    ledger_init(&l, SALT);
    struct payment *p = ledger_create(&l, "pk_1", "order-1", 1000, 1, NULL);
    ck_assert_int_eq(ledger_note_idem_key(p, "key-a"), 0);
    ck_assert_int_eq(ledger_note_idem_key(p, "key-b"), 0);
    ck_assert_int_eq(ledger_note_idem_key(p, "key-a"), 0);
    ck_assert_int_eq(ledger_note_idem_key(p, "key-b"), 0);
    ck_assert_int_eq(ledger_note_idem_key(p, "key-c"), 0);
    ck_assert_uint_eq(p->n_idem_keys, 3);
    ck_assert_str_eq(p->idem_keys[0], "key-a");
    ck_assert_str_eq(p->idem_keys[1], "key-b");
    ck_assert_str_eq(p->idem_keys[2], "key-c");
    char mine[] = "key-d";
    ck_assert_int_eq(ledger_note_idem_key(p, mine), 0);
    ck_assert_ptr_ne(p->idem_keys[3], mine); /* copied */
    ledger_fini(&l);
}
END_TEST

START_TEST(test_ledger_lists_the_first_10_keys_and_counts_confirms_with_others)
{
    struct ledger l;
    ledger_init(&l, SALT);
    struct payment *p = ledger_create(&l, "pk_1", "order-1", 1000, 1, NULL);
    char key[32];
    for (int i = 0; i < 1000; i++) { /* a client that makes up a key per resend */
        snprintf(key, sizeof key, "key-%04d", i);
        ck_assert_int_eq(ledger_note_idem_key(p, key), 0);
    }
    ck_assert_uint_eq(LEDGER_MAX_IDEM_KEYS, 10);
    ck_assert_uint_eq(p->n_idem_keys, 10);
    for (int i = 0; i < 10; i++) {
        snprintf(key, sizeof key, "key-%04d", i);
        ck_assert_str_eq(p->idem_keys[i], key);
    }
    ck_assert_uint_eq(p->idem_keys_unlisted, 990);
    /* A listed key sent again is not counted; an unlisted one sent again is, each time. */
    ck_assert_int_eq(ledger_note_idem_key(p, "key-0003"), 0);
    ck_assert_uint_eq(p->idem_keys_unlisted, 990);
    ck_assert_int_eq(ledger_note_idem_key(p, "key-0500"), 0);
    ck_assert_int_eq(ledger_note_idem_key(p, "key-0500"), 0);
    ck_assert_uint_eq(p->idem_keys_unlisted, 992);
    ck_assert_uint_eq(p->n_idem_keys, 10);
    /* The count saturates instead of wrapping. */
    p->idem_keys_unlisted = UINT32_MAX - 1;
    ck_assert_int_eq(ledger_note_idem_key(p, "key-x"), 0);
    ck_assert_int_eq(ledger_note_idem_key(p, "key-y"), 0);
    ck_assert_uint_eq(p->idem_keys_unlisted, UINT32_MAX);
    /* Fewer than 10 keys: all listed, none counted. */
    struct payment *q = ledger_create(&l, "pk_2", "order-2", 1000, 1, NULL);
    for (int round = 0; round < 3; round++)
        for (int i = 0; i < 9; i++) {
            snprintf(key, sizeof key, "q-%d", i);
            ck_assert_int_eq(ledger_note_idem_key(q, key), 0);
        }
    ck_assert_uint_eq(q->n_idem_keys, 9);
    ck_assert_uint_eq(q->idem_keys_unlisted, 0);
    ledger_fini(&l);
}
END_TEST

static bool is_upper_hex32(const char *k)
{
    if (strlen(k) != 32)
        return false;
    for (int i = 0; i < 32; i++)
        if (!((k[i] >= '0' && k[i] <= '9') || (k[i] >= 'A' && k[i] <= 'F')))
            return false;
    return true;
}

START_TEST(test_ledger_tx_key_is_32_upper_case_hex)
{
    struct ledger l;
    ledger_init(&l, SALT);
    char key[32], order[32], tx[33];
    for (int i = 0; i < 50; i++) {
        snprintf(key, sizeof key, "pk_%d", i);
        snprintf(order, sizeof order, "order-%d", i);
        struct payment *p = ledger_create(&l, key, order, 1000, 1, NULL);
        for (int32_t idx = -1; idx < 5; idx++) {
            memset(tx, 'z', sizeof tx);
            ledger_tx_key(&l, p, idx, tx);
            ck_assert_msg(is_upper_hex32(tx), "tx key %.33s", tx);
        }
    }
    ledger_fini(&l);
}
END_TEST

START_TEST(test_ledger_tx_key_is_stable_for_same_payment_and_index)
{
    struct ledger l;
    ledger_init(&l, SALT);
    struct payment *p = ledger_create(&l, "pk_1", "order-1", 1000, 1, NULL);
    char a[33], b[33];
    ledger_tx_key(&l, p, -1, a);
    ledger_approve(&l, p, 5); /* state changes do not change the key */
    ledger_tx_key(&l, p, -1, b);
    ck_assert_str_eq(a, b);
    ledger_tx_key(&l, p, 3, a);
    ledger_tx_key(&l, p, 3, b);
    ck_assert_str_eq(a, b);
    ledger_fini(&l);
}
END_TEST

START_TEST(test_ledger_tx_key_differs_by_index_and_payment)
{
    struct ledger l;
    ledger_init(&l, SALT);
    enum { NP = 40, NI = 10 };
    static char keys[NP * NI][33];
    char key[32], order[32];
    for (int i = 0; i < NP; i++) {
        snprintf(key, sizeof key, "pk_%d", i);
        snprintf(order, sizeof order, "order-%d", i);
        struct payment *p = ledger_create(&l, key, order, 1000, 1, NULL);
        for (int j = 0; j < NI; j++)
            ledger_tx_key(&l, p, (int32_t)j - 1, keys[i * NI + j]);
    }
    for (int a = 0; a < NP * NI; a++)
        for (int b = a + 1; b < NP * NI; b++)
            ck_assert_msg(strcmp(keys[a], keys[b]) != 0, "keys %d and %d collide: %s", a, b,
                          keys[a]);
    ledger_fini(&l);
}
END_TEST

START_TEST(test_ledger_tx_key_differs_by_salt)
{
    struct ledger l1, l2;
    ledger_init(&l1, SALT);
    ledger_init(&l2, SALT + 1);
    struct payment *p1 = ledger_create(&l1, "pk_1", "order-1", 1000, 1, NULL);
    struct payment *p2 = ledger_create(&l2, "pk_1", "order-1", 1000, 1, NULL);
    ck_assert_uint_eq(p1->id, p2->id);
    char a[33], b[33];
    for (int32_t idx = -1; idx < 4; idx++) {
        ledger_tx_key(&l1, p1, idx, a);
        ledger_tx_key(&l2, p2, idx, b);
        ck_assert_str_ne(a, b);
    }
    ledger_fini(&l1);
    ledger_fini(&l2);
}
END_TEST

START_TEST(test_ledger_reset_empties_but_keeps_salt)
{
    struct ledger l;
    ledger_init(&l, SALT);
    struct payment *p = ledger_create(&l, "pk_1", "order-1", 1000, 1, NULL);
    ledger_note_idem_key(p, "k");
    ledger_approve(&l, p, 2);
    char before[33];
    ledger_tx_key(&l, p, -1, before);
    uint64_t id_before = p->id;
    ledger_create(&l, "pk_2", "order-2", 2000, 1, NULL);
    ledger_reset(&l);
    ck_assert_uint_eq(l.salt, SALT);
    ck_assert_uint_eq(l.n_all, 0);
    ck_assert_uint_eq(l.n_txs, 0);
    ck_assert_ptr_null(ledger_get(&l, "pk_1"));
    ck_assert_ptr_null(ledger_get(&l, "pk_2"));
    ck_assert_ptr_null(ledger_get_by_order(&l, "order-1"));
    /* Usable again, and a paymentKey seen before the reset may be reused. */
    struct payment *q = ledger_create(&l, "pk_1", "order-1", 3000, 3, NULL);
    ck_assert_ptr_nonnull(q);
    ck_assert_int_eq(q->status, PAY_IN_PROGRESS);
    ck_assert_int_eq(q->amount, 3000);
    ck_assert_ptr_eq(ledger_get_by_order(&l, "order-1"), q);
    /* Ids carry on across the reset: the same paymentKey gets a new approval key. */
    ck_assert_uint_gt(q->id, id_before);
    char after[33];
    ledger_tx_key(&l, q, -1, after);
    ck_assert_str_ne(before, after);
    ledger_fini(&l);
}
END_TEST

/* Payments interleaved with cancels, some left unapproved: every row's key finds that row. */
START_TEST(test_ledger_find_tx_finds_every_row_by_its_key)
{
    struct ledger l;
    ledger_init(&l, SALT);
    ledger_create(&l, "pk_unapproved_0", "order-u0", 1000, 1, NULL);
    for (int i = 0; i < 300; i++) {
        char pk[32], oid[32];
        snprintf(pk, sizeof pk, "pk_%d", i);
        snprintf(oid, sizeof oid, "order-%d", i);
        struct payment *p = ledger_create(&l, pk, oid, 10000, 1, NULL);
        ck_assert_ptr_nonnull(p);
        if (i % 7 == 3)
            continue; /* never approved */
        ck_assert_int_eq(ledger_approve(&l, p, 2), 0);
        for (int c = 0; c < i % 4; c++)
            ck_assert_int_eq(ledger_cancel(&l, p, 100, "r", 3), 0);
        if (i % 5 == 0 && i > 1) { /* a later cancel of an earlier payment */
            struct payment *e = ledger_get(&l, "pk_1");
            ck_assert_int_eq(ledger_cancel(&l, e, 1, "late", 4), 0);
        }
    }
    ck_assert_uint_gt(l.n_txs, 500);
    for (size_t i = 0; i < l.n_txs; i++) {
        char k[33];
        ledger_tx_key(&l, l.txs[i].payment, l.txs[i].cancel_index, k);
        ck_assert_int_eq(ledger_find_tx(&l, k), (long)i);
    }
    ledger_fini(&l);
}
END_TEST

START_TEST(test_ledger_find_tx_refuses_keys_of_no_row)
{
    struct ledger l;
    ledger_init(&l, SALT);
    struct payment *p = ledger_create(&l, "pk_1", "order-1", 1000, 1, NULL);
    struct payment *q = ledger_create(&l, "pk_2", "order-2", 1000, 1, NULL);
    ledger_approve(&l, p, 2);
    ledger_cancel(&l, p, 10, "r", 3);
    char k[33];
    ledger_tx_key(&l, p, 0, k);
    ck_assert_int_eq(ledger_find_tx(&l, k), 1);
    /* Well-formed keys of rows that do not exist: an unapproved payment's approval, a cancel
     * not made yet. */
    ledger_tx_key(&l, q, -1, k);
    ck_assert_int_eq(ledger_find_tx(&l, k), -1);
    ledger_tx_key(&l, p, 1, k);
    ck_assert_int_eq(ledger_find_tx(&l, k), -1);
    /* A real key altered: in its first half (decodes to another id), in its second half (the
     * first half still decodes to the row), lower-cased, cut short, made longer; garbage. */
    char good[33], bad[40];
    ledger_tx_key(&l, p, -1, good);
    ck_assert_int_eq(ledger_find_tx(&l, good), 0);
    for (int pos = 0; pos < 32; pos += 5) {
        memcpy(bad, good, 33);
        bad[pos] = bad[pos] == '0' ? '1' : '0';
        ck_assert_msg(ledger_find_tx(&l, bad) == -1, "changed at %d: %s", pos, bad);
    }
    for (int i = 0; i < 33; i++)
        bad[i] = (char)(good[i] >= 'A' && good[i] <= 'F' ? good[i] + 32 : good[i]);
    if (strcmp(bad, good) != 0)
        ck_assert_int_eq(ledger_find_tx(&l, bad), -1);
    memcpy(bad, good, 33);
    bad[31] = '\0';
    ck_assert_int_eq(ledger_find_tx(&l, bad), -1);
    memcpy(bad, good, 32);
    memcpy(bad + 32, "0", 2);
    ck_assert_int_eq(ledger_find_tx(&l, bad), -1);
    ck_assert_int_eq(ledger_find_tx(&l, ""), -1);
    ck_assert_int_eq(ledger_find_tx(&l, "ZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZ"), -1);
    ck_assert_int_eq(ledger_find_tx(&l, "00000000000000000000000000000000"), -1);
    /* Another ledger's key (another salt) is not this ledger's. */
    struct ledger other;
    ledger_init(&other, SALT + 1);
    struct payment *o = ledger_create(&other, "pk_1", "order-1", 1000, 1, NULL);
    ledger_approve(&other, o, 2);
    ledger_tx_key(&other, o, -1, k);
    ck_assert_int_eq(ledger_find_tx(&other, k), 0);
    ck_assert_int_eq(ledger_find_tx(&l, k), -1);
    ledger_fini(&other);
    /* After a reset, no old key finds anything, and new rows are found from index 0. */
    ledger_reset(&l);
    ck_assert_int_eq(ledger_find_tx(&l, good), -1);
    struct payment *r = ledger_create(&l, "pk_1", "order-1", 1000, 1, NULL);
    ledger_approve(&l, r, 2);
    ck_assert_int_eq(ledger_find_tx(&l, good), -1);
    ledger_tx_key(&l, r, -1, k);
    ck_assert_int_eq(ledger_find_tx(&l, k), 0);
    ledger_fini(&l);
}
END_TEST

/* ---- virtual accounts ---------------------------------------------------------------------- */

/* A virtual account due at `due_us`, created at time 1 (the ledger takes `va`). */
static struct payment *va_new(struct ledger *l, const char *key, const char *order, int64_t due_us)
{
    struct payment_va *va = calloc(1, sizeof *va);
    ck_assert_ptr_nonnull(va);
    memcpy(va->bank_code, "88", 3);
    va->due_at_us = due_us;
    va->customer_name = strdup("홍길동");
    struct payment *p = ledger_create_va(l, key, order, 10000, "주문", va, 1, NULL);
    ck_assert_ptr_nonnull(p);
    return p;
}

START_TEST(test_ledger_create_va_waits_for_deposit_with_a_derived_account_number)
{
    struct ledger l;
    ledger_init(&l, SALT);
    struct payment *p = va_new(&l, "pk_va_1", "order-va-1", 1000);
    struct payment *q = va_new(&l, "pk_va_2", "order-va-2", 1000);
    ck_assert_int_eq(p->status, PAY_WAITING_FOR_DEPOSIT);
    ck_assert_str_eq(p->order_name, "주문");
    ck_assert_uint_eq(p->charges, 0);
    ck_assert_uint_eq(l.n_txs, 0);
    ck_assert_uint_eq(strlen(p->va->account_number), 14);
    ck_assert_uint_eq(strspn(p->va->account_number, "0123456789"), 14);
    ck_assert_str_ne(p->va->account_number, q->va->account_number);
    ck_assert_ptr_eq(ledger_get_by_order(&l, "order-va-1"), p);
    ledger_fini(&l);
}
END_TEST

START_TEST(test_ledger_deposit_and_deposit_error_each_add_a_row_and_a_key)
{
    struct ledger l;
    ledger_init(&l, SALT);
    struct payment *p = va_new(&l, "pk_va_1", "order-va-1", 1000);
    ck_assert_int_eq(ledger_deposit(&l, p, false, 500), 0);
    ck_assert_int_eq(p->status, PAY_DONE);
    ck_assert_int_eq(p->approved_at_us, 500);
    ck_assert_int_eq(ledger_deposit(&l, p, true, 600), 0);
    ck_assert_int_eq(p->status, PAY_WAITING_FOR_DEPOSIT);
    ck_assert_int_eq(p->approved_at_us, 500); /* the deposit's, kept */
    ck_assert_int_eq(ledger_deposit(&l, p, false, 700), 0);
    ck_assert_int_eq(p->approved_at_us, 700);
    ck_assert_uint_eq(p->va->n_deposits, 3);
    ck_assert_uint_eq(l.n_txs, 3);
    char keys[3][33];
    for (int i = 0; i < 3; i++) {
        ck_assert_ptr_eq(l.txs[i].payment, p);
        ck_assert_int_eq(l.txs[i].cancel_index, LEDGER_DEPOSIT_INDEX + i);
        ck_assert_int_eq(p->va->deposits[i].error, i == 1);
        ck_assert_int_eq(ledger_tx_at_us(&l.txs[i]), 500 + 100 * i);
        ledger_tx_key(&l, p, LEDGER_DEPOSIT_INDEX + i, keys[i]);
        ck_assert_int_eq(ledger_find_tx(&l, keys[i]), i);
    }
    ck_assert_str_ne(keys[0], keys[1]);
    ck_assert_str_ne(keys[1], keys[2]);
    ledger_fini(&l);
}
END_TEST

START_TEST(test_ledger_expire_va_only_when_waiting_and_due)
{
    struct ledger l;
    ledger_init(&l, SALT);
    struct payment *p = va_new(&l, "pk_va_1", "order-va-1", 1000);
    ck_assert(!ledger_expire_va(p, 999));
    ck_assert_int_eq(p->status, PAY_WAITING_FOR_DEPOSIT);
    ck_assert(ledger_expire_va(p, 1000));
    ck_assert_int_eq(p->status, PAY_EXPIRED);
    ck_assert(ledger_expire_va(p, 2000)); /* still, and unchanged */
    struct payment *q = va_new(&l, "pk_va_2", "order-va-2", 1000);
    ck_assert_int_eq(ledger_deposit(&l, q, false, 10), 0);
    ck_assert(!ledger_expire_va(q, 5000)); /* deposited: a due date no longer applies */
    ck_assert_int_eq(q->status, PAY_DONE);
    struct payment *c = ledger_create(&l, "pk_card", "order-card", 1000, 1, NULL);
    ck_assert(!ledger_expire_va(c, 5000)); /* not a virtual account */
    ck_assert_int_eq(c->status, PAY_IN_PROGRESS);
    ledger_fini(&l);
}
END_TEST

/* The due-date index hands out what is due, earliest first, skips what moved on, and takes an
 * account back after a deposit error. */
START_TEST(test_ledger_next_due_in_due_order_skipping_the_settled)
{
    struct ledger l;
    ledger_init(&l, SALT);
    int64_t due[6] = {500, 100, 400, 200, 600, 300};
    struct payment *p[6];
    for (int i = 0; i < 6; i++) {
        char key[16], order[16];
        snprintf(key, sizeof key, "pk_va_%d", i);
        snprintf(order, sizeof order, "order-va-%d", i);
        p[i] = va_new(&l, key, order, due[i]);
    }
    ck_assert_ptr_null(ledger_next_due(&l, 99));
    ck_assert_int_eq(ledger_deposit(&l, p[3], false, 50), 0); /* due 200: deposited */
    ck_assert_ptr_eq(ledger_next_due(&l, 450), p[1]);           /* 100 */
    ck_assert_ptr_eq(ledger_next_due(&l, 450), p[5]);           /* 300 (200 skipped) */
    ck_assert_ptr_eq(ledger_next_due(&l, 450), p[2]);           /* 400 */
    ck_assert_ptr_null(ledger_next_due(&l, 450));
    /* Taken off the index but not expired by the caller: it is not handed out again. */
    ck_assert_ptr_null(ledger_next_due(&l, 450));
    /* A deposit error puts p[3] back, its due date long over. */
    ck_assert_int_eq(ledger_deposit(&l, p[3], true, 460), 0);
    ck_assert_ptr_eq(ledger_next_due(&l, 470), p[3]);
    ck_assert_ptr_null(ledger_next_due(&l, 470));
    ck_assert_ptr_eq(ledger_next_due(&l, 10000), p[0]);
    ck_assert_ptr_eq(ledger_next_due(&l, 10000), p[4]);
    ck_assert_ptr_null(ledger_next_due(&l, 10000));
    ck_assert_uint_eq(l.n_due, 0);
    /* A reset empties the index with the payments. */
    va_new(&l, "pk_va_x", "order-va-x", 1);
    ledger_reset(&l);
    ck_assert_ptr_null(ledger_next_due(&l, 10000));
    ledger_fini(&l);
}
END_TEST

START_TEST(test_pay_status_name_spells_every_status)
{
    ck_assert_str_eq(pay_status_name(PAY_IN_PROGRESS), "IN_PROGRESS");
    ck_assert_str_eq(pay_status_name(PAY_DONE), "DONE");
    ck_assert_str_eq(pay_status_name(PAY_CANCELED), "CANCELED");
    ck_assert_str_eq(pay_status_name(PAY_PARTIAL_CANCELED), "PARTIAL_CANCELED");
    ck_assert_str_eq(pay_status_name(PAY_ABORTED), "ABORTED");
    ck_assert_str_eq(pay_status_name(PAY_EXPIRED), "EXPIRED");
}
END_TEST

Suite *make_suite(void)
{
    Suite *s = suite_create("ledger");
    TCase *create = tcase_create("create");
    tcase_add_test(create, test_ledger_create_sets_in_progress_amount_and_balance);
    tcase_add_test(create, test_ledger_create_copies_strings);
    tcase_add_test(create, test_ledger_create_ids_increase);
    tcase_add_test(create, test_ledger_create_duplicate_payment_key_is_null);
    tcase_add_test(create, test_ledger_same_order_id_is_refused_and_first_keeps_it);
    tcase_add_test(create, test_ledger_get_unknown_is_null);
    tcase_add_test(create, test_ledger_create_beyond_max_payments_is_refused_with_full_and_unchanged);
    suite_add_tcase(s, create);

    TCase *approve = tcase_create("approve");
    tcase_add_test(approve, test_ledger_approve_sets_done_charges_once_and_adds_tx_row);
    tcase_add_test(approve, test_ledger_approve_tx_rows_in_commit_order_with_increasing_seq);
    tcase_add_test(approve, test_ledger_note_idem_key_dedups);
    tcase_add_test(approve, test_ledger_lists_the_first_10_keys_and_counts_confirms_with_others);
    suite_add_tcase(s, approve);

    TCase *keys = tcase_create("tx_keys");
    tcase_add_test(keys, test_ledger_tx_key_is_32_upper_case_hex);
    tcase_add_test(keys, test_ledger_tx_key_is_stable_for_same_payment_and_index);
    tcase_add_test(keys, test_ledger_tx_key_differs_by_index_and_payment);
    tcase_add_test(keys, test_ledger_tx_key_differs_by_salt);
    tcase_add_test(keys, test_ledger_find_tx_finds_every_row_by_its_key);
    tcase_add_test(keys, test_ledger_find_tx_refuses_keys_of_no_row);
    suite_add_tcase(s, keys);

    TCase *va = tcase_create("virtual_accounts");
    tcase_add_test(va, test_ledger_create_va_waits_for_deposit_with_a_derived_account_number);
    tcase_add_test(va, test_ledger_deposit_and_deposit_error_each_add_a_row_and_a_key);
    tcase_add_test(va, test_ledger_expire_va_only_when_waiting_and_due);
    tcase_add_test(va, test_ledger_next_due_in_due_order_skipping_the_settled);
    suite_add_tcase(s, va);

    TCase *misc = tcase_create("misc");
    tcase_add_test(misc, test_ledger_reset_empties_but_keeps_salt);
    tcase_add_test(misc, test_pay_status_name_spells_every_status);
    suite_add_tcase(s, misc);
    return s;
}
