/* check_sched.c -- unit tests for sched.c's pure deadline heap (sched_heap_*; no timer thread is
 * started): pops in (deadline, insertion) order for seeded random deadlines, ties, peek vs pop,
 * empty heap, and 10^5 entries compared against a sorted reference. */
#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "rng.h"
#include "sched.h"

struct ref {
    int64_t deadline;
    size_t index; /* insertion order */
};

static int cmp_ref(const void *a, const void *b)
{
    const struct ref *x = a, *y = b;
    if (x->deadline != y->deadline)
        return x->deadline < y->deadline ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

static void fire_a(void *arg, bool draining)
{
    (void)arg;
    (void)draining;
}

static void fire_b(void *arg, bool draining)
{
    (void)arg;
    (void)draining;
}

/* Push n entries with deadlines from `gen` (arg = &slots[i]), then pop all and compare with the
 * reference order (deadline, then insertion). */
static void check_order(size_t n, uint64_t seed, uint64_t modulus)
{
    struct sched_heap h;
    sched_heap_init(&h);
    struct ref *refs = malloc(n * sizeof *refs);
    char *slots = malloc(n);
    ck_assert_ptr_nonnull(refs);
    ck_assert_ptr_nonnull(slots);
    struct rng r;
    rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) {
        uint64_t x = rng_next(&r);
        /* modulus 0: the whole int64 range, negatives included */
        int64_t d = modulus ? (int64_t)(x % modulus) : (int64_t)x;
        refs[i] = (struct ref){d, i};
        if (sched_heap_push(&h, d, fire_a, &slots[i]) != 0)
            ck_abort_msg("push %zu failed", i);
    }
    ck_assert_uint_eq(h.len, n);
    qsort(refs, n, sizeof *refs, cmp_ref);
    for (size_t i = 0; i < n; i++) {
        struct sched_entry peeked, e;
        if (!sched_heap_peek(&h, &peeked) || !sched_heap_pop(&h, &e))
            ck_abort_msg("heap empty after %zu of %zu pops", i, n);
        if (memcmp(&peeked, &e, sizeof e) != 0)
            ck_abort_msg("pop %zu: peek gave another entry than pop", i);
        if (e.deadline_ns != refs[i].deadline || e.arg != &slots[refs[i].index])
            ck_abort_msg("pop %zu: got deadline %lld entry %td, want deadline %lld entry %zu", i,
                         (long long)e.deadline_ns, (char *)e.arg - slots,
                         (long long)refs[i].deadline, refs[i].index);
        if (e.fire != fire_a)
            ck_abort_msg("pop %zu: fire callback lost", i);
    }
    struct sched_entry e;
    ck_assert(!sched_heap_pop(&h, &e));
    ck_assert_uint_eq(h.len, 0);
    sched_heap_fini(&h);
    free(refs);
    free(slots);
}

START_TEST(test_sched_heap_empty_pop_and_peek_return_false)
{
    struct sched_heap h;
    sched_heap_init(&h);
    struct sched_entry e;
    memset(&e, 0x5a, sizeof e);
    struct sched_entry before = e;
    ck_assert(!sched_heap_peek(&h, &e));
    ck_assert(!sched_heap_pop(&h, &e));
    ck_assert_int_eq(memcmp(&e, &before, sizeof e), 0); /* out untouched */
    /* Empty again after push + pop. */
    int x;
    ck_assert_int_eq(sched_heap_push(&h, 10, fire_a, &x), 0);
    ck_assert(sched_heap_pop(&h, &e));
    ck_assert(!sched_heap_pop(&h, &e));
    ck_assert(!sched_heap_peek(&h, &e));
    sched_heap_fini(&h);
}
END_TEST

START_TEST(test_sched_heap_entry_keeps_deadline_fire_and_arg)
{
    struct sched_heap h;
    sched_heap_init(&h);
    int a, b;
    ck_assert_int_eq(sched_heap_push(&h, 200, fire_b, &b), 0);
    ck_assert_int_eq(sched_heap_push(&h, 100, fire_a, &a), 0);
    struct sched_entry e;
    ck_assert(sched_heap_pop(&h, &e));
    ck_assert_int_eq(e.deadline_ns, 100);
    ck_assert_ptr_eq(e.arg, &a);
    ck_assert(e.fire == fire_a);
    ck_assert(sched_heap_pop(&h, &e));
    ck_assert_int_eq(e.deadline_ns, 200);
    ck_assert_ptr_eq(e.arg, &b);
    ck_assert(e.fire == fire_b);
    sched_heap_fini(&h);
}
END_TEST

START_TEST(test_sched_heap_pops_in_deadline_order_for_random_deadlines)
{
    check_order(1000, 42, 0);
    check_order(1000, 43, 1000000000);
}
END_TEST

START_TEST(test_sched_heap_ties_pop_in_insertion_order)
{
    struct sched_heap h;
    sched_heap_init(&h);
    int args[64];
    /* Interleave two deadlines so ties are not simply pushed in a block. */
    for (int i = 0; i < 64; i++)
        ck_assert_int_eq(sched_heap_push(&h, i % 2 ? 500 : 700, fire_a, &args[i]), 0);
    struct sched_entry e;
    uint64_t prev_seq = 0;
    for (int i = 1; i < 64; i += 2) {
        ck_assert(sched_heap_pop(&h, &e));
        ck_assert_int_eq(e.deadline_ns, 500);
        ck_assert_ptr_eq(e.arg, &args[i]);
        if (i > 1)
            ck_assert_uint_gt(e.seq, prev_seq);
        prev_seq = e.seq;
    }
    for (int i = 0; i < 64; i += 2) {
        ck_assert(sched_heap_pop(&h, &e));
        ck_assert_int_eq(e.deadline_ns, 700);
        ck_assert_ptr_eq(e.arg, &args[i]);
    }
    ck_assert(!sched_heap_pop(&h, &e));
    sched_heap_fini(&h);
}
END_TEST

START_TEST(test_sched_heap_all_equal_deadlines_pop_in_insertion_order)
{
    check_order(5000, 1, 1); /* every deadline is 0 */
}
END_TEST

START_TEST(test_sched_heap_peek_equals_next_pop_and_does_not_remove)
{
    struct sched_heap h;
    sched_heap_init(&h);
    int args[3];
    sched_heap_push(&h, 30, fire_a, &args[0]);
    sched_heap_push(&h, 10, fire_b, &args[1]);
    sched_heap_push(&h, 20, fire_a, &args[2]);
    struct sched_entry p1, p2, e;
    ck_assert(sched_heap_peek(&h, &p1));
    ck_assert(sched_heap_peek(&h, &p2));
    ck_assert_uint_eq(h.len, 3);
    ck_assert_int_eq(memcmp(&p1, &p2, sizeof p1), 0);
    ck_assert_int_eq(p1.deadline_ns, 10);
    ck_assert_ptr_eq(p1.arg, &args[1]);
    ck_assert(sched_heap_pop(&h, &e));
    ck_assert_int_eq(memcmp(&p1, &e, sizeof e), 0);
    ck_assert_uint_eq(h.len, 2);
    ck_assert(sched_heap_peek(&h, &p1));
    ck_assert_int_eq(p1.deadline_ns, 20);
    sched_heap_fini(&h);
}
END_TEST

START_TEST(test_sched_heap_interleaved_push_pop_keeps_order)
{
    /* Pop one after every two pushes, against a brute-force minimum over live entries. */
    enum { N = 4000 };
    struct sched_heap h;
    sched_heap_init(&h);
    static char slots[N];
    static struct ref live[N];
    size_t n_live = 0;
    struct rng r;
    rng_seed(&r, 99);
    for (size_t i = 0; i < N; i++) {
        int64_t d = (int64_t)(rng_next(&r) % 100);
        live[n_live++] = (struct ref){d, i};
        if (sched_heap_push(&h, d, fire_a, &slots[i]) != 0)
            ck_abort_msg("push failed");
        if (i % 2) {
            size_t best = 0;
            for (size_t j = 1; j < n_live; j++)
                if (cmp_ref(&live[j], &live[best]) < 0)
                    best = j;
            struct sched_entry e;
            if (!sched_heap_pop(&h, &e))
                ck_abort_msg("pop on non-empty heap failed");
            if (e.deadline_ns != live[best].deadline || e.arg != &slots[live[best].index])
                ck_abort_msg("after push %zu: popped %lld/%td, want %lld/%zu", i,
                             (long long)e.deadline_ns, (char *)e.arg - slots,
                             (long long)live[best].deadline, live[best].index);
            live[best] = live[--n_live];
        }
    }
    ck_assert_uint_eq(h.len, n_live);
    sched_heap_fini(&h);
}
END_TEST

START_TEST(test_sched_heap_100k_entries_pop_in_order)
{
    check_order(100000, 2024, 0);
    check_order(100000, 2025, 1000); /* many ties */
}
END_TEST

static int fired_draining, fired_on_time;

static void count_fire(void *arg, bool draining)
{
    (void)arg;
    if (draining)
        fired_draining++;
    else
        fired_on_time++;
}

/* After sched_drain, workers may still try to hold a request until the HTTP server stops: the
 * scheduler must still answer (-1, so the caller finishes the request itself) until
 * sched_fini. */
START_TEST(test_sched_drain_fires_pending_and_add_after_drain_fails_until_fini)
{
    struct sched s;
    char err[128];
    ck_assert_int_eq(sched_start(&s, err, sizeof err), 0);
    fired_draining = fired_on_time = 0;
    int64_t far = INT64_C(1) << 62; /* never due on its own */
    ck_assert_int_eq(sched_add(&s, far, count_fire, NULL), 0);
    ck_assert_int_eq(sched_add(&s, far, count_fire, NULL), 0);
    sched_drain(&s);
    ck_assert_int_eq(fired_draining, 2);
    ck_assert_int_eq(fired_on_time, 0);
    ck_assert_int_eq(sched_add(&s, far, count_fire, NULL), -1);
    ck_assert_int_eq(sched_add(&s, 0, count_fire, NULL), -1);
    ck_assert_int_eq(fired_draining + fired_on_time, 2);
    sched_fini(&s);
}
END_TEST

Suite *make_suite(void)
{
    Suite *s = suite_create("sched_heap");
    TCase *tc = tcase_create("heap");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_sched_heap_empty_pop_and_peek_return_false);
    tcase_add_test(tc, test_sched_heap_entry_keeps_deadline_fire_and_arg);
    tcase_add_test(tc, test_sched_heap_pops_in_deadline_order_for_random_deadlines);
    tcase_add_test(tc, test_sched_heap_ties_pop_in_insertion_order);
    tcase_add_test(tc, test_sched_heap_all_equal_deadlines_pop_in_insertion_order);
    tcase_add_test(tc, test_sched_heap_peek_equals_next_pop_and_does_not_remove);
    tcase_add_test(tc, test_sched_heap_interleaved_push_pop_keeps_order);
    tcase_add_test(tc, test_sched_heap_100k_entries_pop_in_order);
    tcase_add_test(tc, test_sched_drain_fires_pending_and_add_after_drain_fails_until_fini);
    suite_add_tcase(s, tc);
    return s;
}
