/* check_rng.c -- unit tests for rng.c: generator reference values, request seeding purity, and
 * each latency distribution's shape over 100 000 draws from a fixed seed. Deterministic: no
 * clocks, no thresholds on time; every statistic comes from the same seeded sequence each run. */
#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "rng.h"

#define N_DRAWS 100000

static bool within(double got, double want, double rel)
{
    return fabs(got - want) <= rel * fabs(want);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Draws N_DRAWS samples of `d` from seed 42; caller frees. */
static double *draw(const struct latency_dist *d)
{
    struct rng r;
    rng_seed(&r, 42);
    double *xs = malloc(N_DRAWS * sizeof(*xs));
    ck_assert_ptr_nonnull(xs);
    for (size_t i = 0; i < N_DRAWS; i++)
        xs[i] = latency_sample_ms(d, &r);
    return xs;
}

static double mean_of(const double *xs, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += xs[i];
    return s / (double)n;
}

static double stddev_of(const double *xs, size_t n)
{
    double m = mean_of(xs, n), s = 0;
    for (size_t i = 0; i < n; i++)
        s += (xs[i] - m) * (xs[i] - m);
    return sqrt(s / (double)(n - 1));
}

START_TEST(test_splitmix64_from_zero_gives_reference_outputs)
{
    uint64_t st = 0;
    ck_assert_uint_eq(splitmix64(&st), UINT64_C(0xe220a8397b1dcdaf));
    ck_assert_uint_eq(splitmix64(&st), UINT64_C(0x6e789e6aa1b965f4));
    ck_assert_uint_eq(splitmix64(&st), UINT64_C(0x06c45d188009454f));
    ck_assert_uint_eq(splitmix64(&st), UINT64_C(0xf88bb8a8724c81ec));
}
END_TEST

START_TEST(test_mix64_is_splitmix_finaliser)
{
    ck_assert_uint_eq(mix64(0), 0);
    ck_assert_uint_eq(mix64(UINT64_C(0x9e3779b97f4a7c15)), UINT64_C(0xe220a8397b1dcdaf));
}
END_TEST

START_TEST(test_unmix64_inverts_mix64)
{
    uint64_t st = 42;
    for (int i = 0; i < 100000; i++) {
        uint64_t x = splitmix64(&st) >> (i % 64); /* small values too */
        ck_assert_uint_eq(unmix64(mix64(x)), x);
        ck_assert_uint_eq(mix64(unmix64(x)), x);
    }
    ck_assert_uint_eq(unmix64(UINT64_C(0xe220a8397b1dcdaf)), SPLITMIX64_GAMMA);
    ck_assert_uint_eq(mix64(unmix64(UINT64_MAX)), UINT64_MAX);
}
END_TEST

START_TEST(test_xoshiro_seeded_zero_gives_reference_outputs)
{
    /* xoshiro256** with s[] filled by splitmix64 from 0 (reference C implementation). */
    struct rng r;
    rng_seed(&r, 0);
    ck_assert_uint_eq(rng_next(&r), UINT64_C(0x99ec5f36cb75f2b4));
    ck_assert_uint_eq(rng_next(&r), UINT64_C(0xbf6e1f784956452a));
    ck_assert_uint_eq(rng_next(&r), UINT64_C(0x1a5f849d4933e6e0));
    ck_assert_uint_eq(rng_next(&r), UINT64_C(0x6aa594f1262d2d2c));
}
END_TEST

START_TEST(test_xoshiro_same_seed_same_sequence_other_seed_differs)
{
    struct rng a, b, c;
    rng_seed(&a, 12345);
    rng_seed(&b, 12345);
    rng_seed(&c, 12346);
    int same_as_c = 0;
    for (int i = 0; i < 1000; i++) {
        uint64_t x = rng_next(&a);
        ck_assert_uint_eq(x, rng_next(&b));
        same_as_c += x == rng_next(&c);
    }
    ck_assert_int_eq(same_as_c, 0);
}
END_TEST

START_TEST(test_hash64_is_stable_and_depends_on_data_and_seed)
{
    ck_assert_uint_eq(hash64("order-1", 7, 0), hash64("order-1", 7, 0));
    ck_assert_uint_ne(hash64("order-1", 7, 0), hash64("order-2", 7, 0));
    ck_assert_uint_ne(hash64("order-1", 7, 0), hash64("order-1", 7, 1));
    ck_assert_uint_ne(hash64("ab", 1, 0), hash64("ab", 2, 0));
    ck_assert_uint_eq(hash64(NULL, 0, 9), hash64("", 0, 9));
}
END_TEST

START_TEST(test_seed_request_is_pure_function_of_its_inputs)
{
    struct rng a, b;
    rng_seed_request(&a, 7, 0, "key-1", 5, 1);
    rng_seed_request(&b, 7, 0, "key-1xxx", 5, 1); /* only identity_len bytes count */
    for (int i = 0; i < 16; i++)
        ck_assert_uint_eq(rng_next(&a), rng_next(&b));
}
END_TEST

START_TEST(test_seed_request_differs_by_attempt_identity_route_and_seed)
{
    struct rng base, r;
    rng_seed_request(&base, 7, 0, "a", 1, 1);
    uint64_t x = rng_next(&base);

    rng_seed_request(&r, 7, 0, "a", 1, 2);
    ck_assert_uint_ne(x, rng_next(&r));
    rng_seed_request(&r, 7, 0, "b", 1, 1);
    ck_assert_uint_ne(x, rng_next(&r));
    rng_seed_request(&r, 7, 1, "a", 1, 1);
    ck_assert_uint_ne(x, rng_next(&r));
    rng_seed_request(&r, 8, 0, "a", 1, 1);
    ck_assert_uint_ne(x, rng_next(&r));
    rng_seed_request(&r, 7, 0, NULL, 0, 1);
    ck_assert_uint_ne(x, rng_next(&r));
}
END_TEST

START_TEST(test_uniform01_is_in_half_open_unit_interval)
{
    struct rng r;
    rng_seed(&r, 1);
    double lo = 1, hi = 0;
    for (int i = 0; i < N_DRAWS; i++) {
        double u = rng_uniform01(&r);
        ck_assert(u >= 0.0 && u < 1.0);
        lo = u < lo ? u : lo;
        hi = u > hi ? u : hi;
    }
    ck_assert(lo < 0.001 && hi > 0.999);
}
END_TEST

START_TEST(test_none_dist_is_zero_and_draws_nothing)
{
    struct latency_dist d = {0};
    struct rng r, untouched;
    rng_seed(&r, 5);
    untouched = r;
    ck_assert(latency_sample_ms(&d, &r) == 0.0);
    ck_assert_mem_eq(&r, &untouched, sizeof(r));
}
END_TEST

START_TEST(test_fixed_dist_is_exact)
{
    struct latency_dist d = {.kind = DIST_FIXED, .a = 12.5};
    double *xs = draw(&d);
    for (size_t i = 0; i < N_DRAWS; i++)
        ck_assert(xs[i] == 12.5);
    free(xs);
}
END_TEST

START_TEST(test_uniform_dist_mean_within_3_percent_and_stays_in_range)
{
    struct latency_dist d = {.kind = DIST_UNIFORM, .a = 20, .b = 180};
    double *xs = draw(&d);
    for (size_t i = 0; i < N_DRAWS; i++)
        ck_assert(xs[i] >= 20 && xs[i] < 180);
    ck_assert(within(mean_of(xs, N_DRAWS), 100, 0.03));
    free(xs);
}
END_TEST

START_TEST(test_normal_dist_mean_and_stddev_within_3_percent)
{
    struct latency_dist d = {.kind = DIST_NORMAL, .a = 200, .b = 40};
    double *xs = draw(&d);
    ck_assert(within(mean_of(xs, N_DRAWS), 200, 0.03));
    ck_assert(within(stddev_of(xs, N_DRAWS), 40, 0.03));
    free(xs);
}
END_TEST

START_TEST(test_normal_dist_is_clamped_at_zero)
{
    struct latency_dist d = {.kind = DIST_NORMAL, .a = 5, .b = 50};
    double *xs = draw(&d);
    size_t zeros = 0;
    for (size_t i = 0; i < N_DRAWS; i++) {
        ck_assert(xs[i] >= 0.0);
        zeros += xs[i] == 0.0;
    }
    /* P(N(5, 50) < 0) ≈ 0.46: clamping really happened. */
    ck_assert(zeros > N_DRAWS / 3);
    free(xs);
}
END_TEST

START_TEST(test_lognormal_dist_median_and_p99_within_3_percent)
{
    struct latency_dist d;
    latency_lognormal_init(&d, 80, 400);
    ck_assert_int_eq(d.kind, DIST_LOGNORMAL);
    ck_assert(d.shown_a == 80 && d.shown_b == 400);
    ck_assert(fabs(d.a - log(80)) < 1e-12);
    ck_assert(fabs(d.b - log(5) / 2.326347874) < 1e-9);
    double *xs = draw(&d);
    qsort(xs, N_DRAWS, sizeof(*xs), cmp_double);
    ck_assert(within(xs[N_DRAWS / 2], 80, 0.03));
    ck_assert(within(xs[N_DRAWS * 99 / 100], 400, 0.03));
    free(xs);
}
END_TEST

START_TEST(test_lognormal_with_p99_equal_median_is_fixed)
{
    struct latency_dist d;
    latency_lognormal_init(&d, 30, 30);
    struct rng r;
    rng_seed(&r, 3);
    for (int i = 0; i < 100; i++)
        ck_assert(fabs(latency_sample_ms(&d, &r) - 30) < 1e-9);
}
END_TEST

START_TEST(test_exponential_dist_mean_within_3_percent)
{
    struct latency_dist d = {.kind = DIST_EXPONENTIAL, .a = 150};
    double *xs = draw(&d);
    for (size_t i = 0; i < N_DRAWS; i++)
        ck_assert(xs[i] >= 0.0);
    ck_assert(within(mean_of(xs, N_DRAWS), 150, 0.03));
    free(xs);
}
END_TEST

START_TEST(test_mixture_dist_picks_parts_by_weight_within_1_percent)
{
    struct latency_part parts[2] = {
        {.weight = 0.3, .dist = {.kind = DIST_FIXED, .a = 10}},
        {.weight = 0.7, .dist = {.kind = DIST_FIXED, .a = 100}},
    };
    struct latency_dist d = {.kind = DIST_MIXTURE, .n_parts = 2, .parts = parts};
    double *xs = draw(&d);
    size_t fast = 0, slow = 0;
    for (size_t i = 0; i < N_DRAWS; i++) {
        fast += xs[i] == 10;
        slow += xs[i] == 100;
    }
    ck_assert_uint_eq(fast + slow, N_DRAWS);
    ck_assert(fabs((double)fast / N_DRAWS - 0.3) <= 0.01);
    free(xs);
}
END_TEST

START_TEST(test_samples_are_capped_at_one_day)
{
    struct latency_dist d = {.kind = DIST_EXPONENTIAL, .a = 86400000.0};
    double *xs = draw(&d);
    size_t capped = 0;
    for (size_t i = 0; i < N_DRAWS; i++) {
        ck_assert(xs[i] >= 0 && xs[i] <= 86400000.0);
        capped += xs[i] == 86400000.0;
    }
    ck_assert_uint_gt(capped, 0);
    free(xs);
}
END_TEST

START_TEST(test_same_request_seed_gives_same_latency)
{
    struct latency_dist d;
    latency_lognormal_init(&d, 80, 400);
    struct rng a, b;
    rng_seed_request(&a, 99, 0, "idem-key", 8, 1);
    rng_seed_request(&b, 99, 0, "idem-key", 8, 1);
    ck_assert(latency_sample_ms(&d, &a) == latency_sample_ms(&d, &b));
}
END_TEST

START_TEST(test_dist_fini_frees_parts_and_leaves_none)
{
    struct latency_dist d = {.kind = DIST_MIXTURE, .n_parts = 2};
    d.parts = calloc(2, sizeof(*d.parts));
    ck_assert_ptr_nonnull(d.parts);
    d.parts[0] = (struct latency_part){.weight = 0.5, .dist = {.kind = DIST_FIXED, .a = 1}};
    d.parts[1] = (struct latency_part){.weight = 0.5, .dist = {.kind = DIST_FIXED, .a = 2}};
    latency_dist_fini(&d);
    ck_assert_int_eq(d.kind, DIST_NONE);
    ck_assert_ptr_null(d.parts);
    ck_assert_uint_eq(d.n_parts, 0);
    latency_dist_fini(&d); /* idempotent */
}
END_TEST

Suite *make_suite(void)
{
    Suite *s = suite_create("rng");
    TCase *gen = tcase_create("generator");
    tcase_add_test(gen, test_splitmix64_from_zero_gives_reference_outputs);
    tcase_add_test(gen, test_mix64_is_splitmix_finaliser);
    tcase_add_test(gen, test_unmix64_inverts_mix64);
    tcase_add_test(gen, test_xoshiro_seeded_zero_gives_reference_outputs);
    tcase_add_test(gen, test_xoshiro_same_seed_same_sequence_other_seed_differs);
    tcase_add_test(gen, test_hash64_is_stable_and_depends_on_data_and_seed);
    tcase_add_test(gen, test_seed_request_is_pure_function_of_its_inputs);
    tcase_add_test(gen, test_seed_request_differs_by_attempt_identity_route_and_seed);
    tcase_add_test(gen, test_uniform01_is_in_half_open_unit_interval);
    suite_add_tcase(s, gen);

    TCase *dist = tcase_create("distributions");
    tcase_add_test(dist, test_none_dist_is_zero_and_draws_nothing);
    tcase_add_test(dist, test_fixed_dist_is_exact);
    tcase_add_test(dist, test_uniform_dist_mean_within_3_percent_and_stays_in_range);
    tcase_add_test(dist, test_normal_dist_mean_and_stddev_within_3_percent);
    tcase_add_test(dist, test_normal_dist_is_clamped_at_zero);
    tcase_add_test(dist, test_lognormal_dist_median_and_p99_within_3_percent);
    tcase_add_test(dist, test_lognormal_with_p99_equal_median_is_fixed);
    tcase_add_test(dist, test_exponential_dist_mean_within_3_percent);
    tcase_add_test(dist, test_mixture_dist_picks_parts_by_weight_within_1_percent);
    tcase_add_test(dist, test_samples_are_capped_at_one_day);
    tcase_add_test(dist, test_same_request_seed_gives_same_latency);
    tcase_add_test(dist, test_dist_fini_frees_parts_and_leaves_none);
    suite_add_tcase(s, dist);
    return s;
}
