/* check_fault.c -- unit tests for fault.c: fault_decide's rates over 100 000 seeded identities,
 * its determinism per (seed, identity, attempt), attempt eligibility, `times` budgets and the
 * latency draws. Deterministic: every statistic comes from the same seeded requests each run.
 * Routes come from profile JSON through profile_parse, except one pair of faults the parser
 * rejects, built by hand to pin fault_decide's order rule. */
#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "fault.h"
#include "profile.h"
#include "rng.h"

#define N_IDS 100000
#define SEED UINT64_C(20240213)

/* A profile whose confirm route has the given members (JSON text without the braces). */
#define CONFIRM(members) "{\"name\": \"t\", \"routes\": {\"confirm\": {" members "}}}"
#define DROP_REQ(p) "{\"kind\": \"drop_request\", \"p\": " p ", \"how\": \"close\""
#define DROP_RESP(p) "{\"kind\": \"drop_response\", \"p\": " p ", \"how\": \"reset\""
#define ERROR500(p) \
    "{\"kind\": \"error\", \"p\": " p ", \"status\": 500, " \
    "\"code\": \"FAILED_INTERNAL_SYSTEM_PROCESSING\""
#define DRIP(p) "{\"kind\": \"drip\", \"p\": " p ", \"duration_ms\": 2000"

static struct profile *parse_ok(const char *text)
{
    struct profile *p = NULL;
    char err[ERR_LEN] = "";
    int rc = profile_parse(text, strlen(text), "t.json", NULL, NULL, &p, err);
    ck_assert_msg(rc == 0, "unexpected rejection: %s", err);
    ck_assert_ptr_nonnull(p);
    return p;
}

static const struct route_profile *confirm(const struct profile *p)
{
    return profile_route(p, ROUTE_CONFIRM);
}

/* Seeds a generator for request "order-<i>" on confirm. */
static void seed_for(struct rng *r, uint64_t seed, int i, uint32_t attempt)
{
    char id[32];
    int n = snprintf(id, sizeof id, "order-%d", i);
    ck_assert_int_gt(n, 0);
    rng_seed_request(r, seed, ROUTE_CONFIRM, id, (size_t)n, attempt);
}

/* The plan of request "order-<i>", attempt `attempt`, under `seed`. */
static void decide(const struct route_profile *rp, uint64_t seed, int i, uint32_t attempt,
                   fault_budget_fn take, void *ctx, struct plan *out)
{
    struct rng r;
    seed_for(&r, seed, i, attempt);
    fault_decide(rp, attempt, &r, take, ctx, out);
}

/* The first uniform of request "order-<i>": the fault draw. */
static double fault_draw(uint64_t seed, int i, uint32_t attempt)
{
    struct rng r;
    seed_for(&r, seed, i, attempt);
    return rng_uniform01(&r);
}

static double pct(long count)
{
    return 100.0 * (double)count / (double)N_IDS;
}

/* A `times` budget per fault index, counting how often it is asked. */
struct budget {
    int64_t limit[4];
    int64_t used[4];
    int calls;
};

static bool take_counted(int index, void *ctx)
{
    struct budget *b = ctx;
    ck_assert_int_ge(index, 0);
    ck_assert_int_lt(index, 4);
    b->calls++;
    if (b->used[index] >= b->limit[index])
        return false;
    b->used[index]++;
    return true;
}

/* ---- rates ----------------------------------------------------------------------------------- */

START_TEST(test_fault_p_0_1429_fires_on_14_29_percent_of_identities_within_half_a_point)
{
    struct profile *p = parse_ok(CONFIRM("\"faults\": [" DROP_REQ("0.1429") "}]"));
    const struct route_profile *rp = confirm(p);
    long fired = 0;
    for (int i = 0; i < N_IDS; i++) {
        struct plan pl;
        decide(rp, SEED, i, 1, NULL, NULL, &pl);
        if (pl.fault) {
            ck_assert_ptr_eq(pl.fault, &rp->faults[0]);
            ck_assert_int_eq(pl.fault->kind, FAULT_DROP_REQUEST);
            fired++;
        }
    }
    ck_assert_msg(fabs(pct(fired) - 14.29) <= 0.5, "fired on %.3f %% of identities", pct(fired));
    profile_free(p);
}
END_TEST

START_TEST(test_fault_p_0_never_fires_and_p_1_always_fires)
{
    struct profile *p0 = parse_ok(CONFIRM("\"faults\": [" ERROR500("0") "}]"));
    struct profile *p1 = parse_ok(CONFIRM("\"faults\": [" ERROR500("1") "}]"));
    for (int i = 0; i < 10000; i++) {
        struct plan pl;
        decide(confirm(p0), SEED, i, 1, NULL, NULL, &pl);
        ck_assert_ptr_null(pl.fault);
        decide(confirm(p1), SEED, i, 1, NULL, NULL, &pl);
        ck_assert_ptr_eq(pl.fault, &confirm(p1)->faults[0]);
    }
    profile_free(p0);
    profile_free(p1);
}
END_TEST

START_TEST(test_route_without_faults_never_gets_a_fault_nor_latency)
{
    struct profile *p = parse_ok(CONFIRM(""));
    for (int i = 0; i < 1000; i++) {
        struct plan pl;
        decide(confirm(p), SEED, i, 1, NULL, NULL, &pl);
        ck_assert_ptr_null(pl.fault);
        ck_assert(pl.queue_latency_ms == 0);
        ck_assert(pl.latency_ms == 0);
    }
    profile_free(p);
}
END_TEST

START_TEST(test_two_faults_fire_at_10_and_20_percent_and_never_together)
{
    struct profile *p =
        parse_ok(CONFIRM("\"faults\": [" ERROR500("0.1") "}, " DROP_RESP("0.2") "}]"));
    const struct route_profile *rp = confirm(p);
    long a = 0, b = 0, none = 0;
    for (int i = 0; i < N_IDS; i++) {
        struct plan pl;
        decide(rp, SEED, i, 1, NULL, NULL, &pl);
        /* One uniform against the cumulative p: [0, 0.1) → first, [0.1, 0.3) → second. */
        double u = fault_draw(SEED, i, 1);
        const struct fault *want = u < 0.1 ? &rp->faults[0] : u < 0.3 ? &rp->faults[1] : NULL;
        ck_assert_ptr_eq(pl.fault, want);
        if (pl.fault == &rp->faults[0])
            a++;
        else if (pl.fault == &rp->faults[1])
            b++;
        else
            none++;
    }
    ck_assert_int_eq(a + b + none, N_IDS);
    ck_assert_msg(fabs(pct(a) - 10.0) <= 0.5, "p 0.1 fired on %.3f %%", pct(a));
    ck_assert_msg(fabs(pct(b) - 20.0) <= 0.5, "p 0.2 fired on %.3f %%", pct(b));
    profile_free(p);
}
END_TEST

/* ---- determinism ----------------------------------------------------------------------------- */

START_TEST(test_same_seed_identity_and_attempt_always_give_the_same_plan)
{
    struct profile *p = parse_ok(CONFIRM(
        "\"queue_latency\": {\"dist\": \"lognormal\", \"median_ms\": 40, \"p99_ms\": 900}, "
        "\"latency\": {\"dist\": \"lognormal\", \"median_ms\": 80, \"p99_ms\": 400}, "
        "\"faults\": [" DROP_RESP("0.3") "}]"));
    const struct route_profile *rp = confirm(p);
    long fired = 0;
    for (int i = 0; i < 10000; i++) {
        for (uint32_t attempt = 1; attempt <= 3; attempt++) {
            struct plan a, b;
            decide(rp, SEED, i, attempt, NULL, NULL, &a);
            decide(rp, SEED, i, attempt, NULL, NULL, &b);
            ck_assert_ptr_eq(a.fault, b.fault);
            ck_assert(a.queue_latency_ms == b.queue_latency_ms);
            ck_assert(a.latency_ms == b.latency_ms);
            ck_assert(a.latency_ms > 0);
            fired += a.fault != NULL;
        }
    }
    /* Not vacuous: both outcomes occur. */
    ck_assert_int_gt(fired, 0);
    ck_assert_int_lt(fired, 30000);
    profile_free(p);
}
END_TEST

START_TEST(test_another_seed_changes_the_decision_for_2p_1_minus_p_of_identities)
{
    struct profile *p = parse_ok(CONFIRM("\"latency\": {\"dist\": \"exponential\", \"mean_ms\": 50}, "
                                         "\"faults\": [" DROP_REQ("0.1429") "}]"));
    const struct route_profile *rp = confirm(p);
    long differ = 0, latency_differs = 0;
    for (int i = 0; i < N_IDS; i++) {
        struct plan a, b;
        decide(rp, SEED, i, 1, NULL, NULL, &a);
        decide(rp, SEED + 1, i, 1, NULL, NULL, &b);
        differ += (a.fault != NULL) != (b.fault != NULL);
        latency_differs += a.latency_ms != b.latency_ms;
    }
    /* Independent seeds disagree with probability 2p(1-p) = 24.49 %. */
    ck_assert_msg(fabs(pct(differ) - 24.49) <= 1.0, "decisions differ for %.3f %%", pct(differ));
    ck_assert_int_gt(latency_differs, N_IDS - 10);
    profile_free(p);
}
END_TEST

START_TEST(test_attempt_2_is_drawn_independently_of_attempt_1)
{
    const double prob = 0.1429;
    struct profile *p = parse_ok(CONFIRM("\"faults\": [" DROP_REQ("0.1429") "}]"));
    const struct route_profile *rp = confirm(p);
    long first = 0, second = 0, both = 0;
    for (int i = 0; i < N_IDS; i++) {
        struct plan a1, a2;
        decide(rp, SEED, i, 1, NULL, NULL, &a1);
        decide(rp, SEED, i, 2, NULL, NULL, &a2);
        first += a1.fault != NULL;
        second += a2.fault != NULL;
        both += a1.fault && a2.fault;
    }
    ck_assert_msg(fabs(pct(first) - 100 * prob) <= 0.5, "attempt 1: %.3f %%", pct(first));
    ck_assert_msg(fabs(pct(second) - 100 * prob) <= 0.5, "attempt 2: %.3f %%", pct(second));
    ck_assert_msg(fabs(pct(both) - 100 * prob * prob) <= 0.3, "both: %.3f %% (p^2 = %.3f %%)",
                  pct(both), 100 * prob * prob);
    profile_free(p);
}
END_TEST

/* ---- attempts and times ---------------------------------------------------------------------- */

START_TEST(test_fault_with_attempts_1_fires_on_attempt_1_only)
{
    struct profile *p = parse_ok(CONFIRM("\"faults\": [" DROP_REQ("1") ", \"attempts\": [1]}]"));
    const struct route_profile *rp = confirm(p);
    ck_assert_uint_eq(rp->faults[0].n_attempts, 1);
    for (int i = 0; i < 1000; i++) {
        struct plan pl;
        decide(rp, SEED, i, 1, NULL, NULL, &pl);
        ck_assert_ptr_eq(pl.fault, &rp->faults[0]);
        for (uint32_t attempt = 2; attempt <= 4; attempt++) {
            decide(rp, SEED, i, attempt, NULL, NULL, &pl);
            ck_assert_ptr_null(pl.fault);
        }
    }
    profile_free(p);
}
END_TEST

START_TEST(test_draw_is_made_against_the_faults_eligible_for_the_attempt_only)
{
    /* A on attempts 1 and 3, B on attempt 2, both p 1: if ineligible faults kept their slice of
     * the draw, B would sit at [1, 2) and never fire. */
    struct profile *p = parse_ok(CONFIRM("\"faults\": [" DROP_REQ("1") ", \"attempts\": [1, 3]}, "
                                         ERROR500("1") ", \"attempts\": [2]}]"));
    const struct route_profile *rp = confirm(p);
    for (int i = 0; i < 1000; i++) {
        struct plan pl;
        decide(rp, SEED, i, 1, NULL, NULL, &pl);
        ck_assert_ptr_eq(pl.fault, &rp->faults[0]);
        decide(rp, SEED, i, 2, NULL, NULL, &pl);
        ck_assert_ptr_eq(pl.fault, &rp->faults[1]);
        decide(rp, SEED, i, 3, NULL, NULL, &pl);
        ck_assert_ptr_eq(pl.fault, &rp->faults[0]);
        decide(rp, SEED, i, 4, NULL, NULL, &pl);
        ck_assert_ptr_null(pl.fault);
    }
    profile_free(p);
}
END_TEST

START_TEST(test_eligible_faults_share_the_draw_in_profile_order_from_zero)
{
    /* A{0.5, attempts [1]}, B{0.3, attempts [2]}, C{0.2}: attempt 1 draws against A then C
     * ([0, 0.5) → A, [0.5, 0.7) → C); attempt 2 against B then C ([0, 0.3) → B, [0.3, 0.5) → C).
     * An ineligible fault keeps no slice of the draw. */
    struct profile *p = parse_ok(CONFIRM("\"faults\": [" DROP_REQ("0.5") ", \"attempts\": [1]}, "
                                         ERROR500("0.3") ", \"attempts\": [2]}, " DRIP("0.2") "}]"));
    const struct route_profile *rp = confirm(p);
    const struct fault *fs = rp->faults;
    long count[2][3] = {{0}};
    for (int i = 0; i < N_IDS; i++) {
        for (uint32_t attempt = 1; attempt <= 2; attempt++) {
            struct plan pl;
            decide(rp, SEED, i, attempt, NULL, NULL, &pl);
            double u = fault_draw(SEED, i, attempt);
            const struct fault *first = attempt == 1 ? &fs[0] : &fs[1];
            double edge = attempt == 1 ? 0.5 : 0.3;
            const struct fault *want = u < edge ? first : u < edge + 0.2 ? &fs[2] : NULL;
            ck_assert_ptr_eq(pl.fault, want);
            if (pl.fault)
                count[attempt - 1][pl.fault - fs]++;
        }
    }
    ck_assert_int_eq(count[0][1], 0);
    ck_assert_int_eq(count[1][0], 0);
    ck_assert_msg(fabs(pct(count[0][0]) - 50.0) <= 0.5, "A on 1: %.3f %%", pct(count[0][0]));
    ck_assert_msg(fabs(pct(count[1][1]) - 30.0) <= 0.5, "B on 2: %.3f %%", pct(count[1][1]));
    ck_assert_msg(fabs(pct(count[0][2]) - 20.0) <= 0.5, "C on 1: %.3f %%", pct(count[0][2]));
    ck_assert_msg(fabs(pct(count[1][2]) - 20.0) <= 0.5, "C on 2: %.3f %%", pct(count[1][2]));
    profile_free(p);
}
END_TEST

START_TEST(test_scripted_attempts_fault_before_an_every_attempt_fault_wins_by_profile_order)
{
    /* A{p 1, attempts [1, 3]} then B{p 1}: on attempts 1 and 3 both are eligible and A, first in
     * profile order, takes the whole draw; on 2 and 4 only B is. The profile parser rejects this
     * pair (p sums to 2 on attempts 1 and 3), so it is built by hand. */
    uint32_t a_at[] = {1, 3};
    struct fault fs[2];
    memset(fs, 0, sizeof fs);
    fs[0] = (struct fault){.kind = FAULT_DROP_REQUEST, .p = 1, .times = -1,
                           .attempts = a_at, .n_attempts = 2};
    fs[1] = (struct fault){.kind = FAULT_DROP_RESPONSE, .p = 1, .times = -1};
    struct route_profile rp;
    memset(&rp, 0, sizeof rp);
    rp.present = true;
    rp.faults = fs;
    rp.n_faults = 2;
    for (int i = 0; i < 1000; i++) {
        struct plan pl;
        decide(&rp, SEED, i, 1, NULL, NULL, &pl);
        ck_assert_ptr_eq(pl.fault, &fs[0]);
        decide(&rp, SEED, i, 2, NULL, NULL, &pl);
        ck_assert_ptr_eq(pl.fault, &fs[1]);
        decide(&rp, SEED, i, 3, NULL, NULL, &pl);
        ck_assert_ptr_eq(pl.fault, &fs[0]);
        decide(&rp, SEED, i, 4, NULL, NULL, &pl);
        ck_assert_ptr_eq(pl.fault, &fs[1]);
    }
}
END_TEST

START_TEST(test_fault_with_times_2_fires_on_the_first_2_requests_then_never)
{
    struct profile *p = parse_ok(CONFIRM("\"faults\": [" DROP_REQ("1") ", \"times\": 2}]"));
    const struct route_profile *rp = confirm(p);
    ck_assert_int_eq(rp->faults[0].times, 2);
    struct budget b = {.limit = {2}};
    for (int i = 0; i < 10; i++) {
        struct plan pl;
        decide(rp, SEED, i, 1, take_counted, &b, &pl);
        if (i < 2)
            ck_assert_ptr_eq(pl.fault, &rp->faults[0]);
        else
            ck_assert_ptr_null(pl.fault);
    }
    ck_assert_int_eq(b.used[0], 2);
    ck_assert_int_eq(b.calls, 10);
    profile_free(p);
}
END_TEST

START_TEST(test_fault_with_times_0_never_fires)
{
    struct profile *p = parse_ok(CONFIRM("\"faults\": [" ERROR500("1") ", \"times\": 0}]"));
    struct budget b = {.limit = {0}};
    for (int i = 0; i < 100; i++) {
        struct plan pl;
        decide(confirm(p), SEED, i, 1, take_counted, &b, &pl);
        ck_assert_ptr_null(pl.fault);
    }
    ck_assert_int_eq(b.used[0], 0);
    profile_free(p);
}
END_TEST

START_TEST(test_budget_is_asked_only_when_its_fault_is_drawn)
{
    struct profile *p = parse_ok(CONFIRM("\"faults\": [" ERROR500("0.25") ", \"times\": 1000000}, "
                                         DROP_REQ("0.25") "}]"));
    const struct route_profile *rp = confirm(p);
    struct budget b = {.limit = {1000000, 0}};
    long fired0 = 0;
    for (int i = 0; i < N_IDS; i++) {
        struct plan pl;
        decide(rp, SEED, i, 1, take_counted, &b, &pl);
        fired0 += pl.fault == &rp->faults[0];
    }
    ck_assert_int_eq(b.calls, fired0);
    ck_assert_int_eq(b.used[0], fired0);
    ck_assert_int_eq(b.used[1], 0);
    ck_assert_msg(fabs(pct(fired0) - 25.0) <= 0.5, "fired on %.3f %%", pct(fired0));
    profile_free(p);
}
END_TEST

START_TEST(test_spent_budget_gives_no_fault_rather_than_the_next_fault)
{
    struct profile *p = parse_ok(CONFIRM("\"faults\": [" ERROR500("0.5") ", \"times\": 0}, "
                                         DROP_REQ("0.5") "}]"));
    const struct route_profile *rp = confirm(p);
    struct budget b = {.limit = {0}};
    long first = 0, second = 0;
    for (int i = 0; i < N_IDS; i++) {
        struct plan pl;
        decide(rp, SEED, i, 1, take_counted, &b, &pl);
        first += pl.fault == &rp->faults[0];
        second += pl.fault == &rp->faults[1];
    }
    ck_assert_int_eq(first, 0);
    ck_assert_msg(fabs(pct(second) - 50.0) <= 0.5, "second fault fired on %.3f %%", pct(second));
    profile_free(p);
}
END_TEST

/* ---- latency --------------------------------------------------------------------------------- */

START_TEST(test_fixed_latencies_are_exact_with_or_without_a_fault)
{
    struct profile *p = parse_ok(CONFIRM("\"queue_latency\": {\"dist\": \"fixed\", \"ms\": 7}, "
                                         "\"latency\": {\"dist\": \"fixed\", \"ms\": 25}, "
                                         "\"faults\": [" DROP_RESP("0.5") "}]"));
    long fired = 0;
    for (int i = 0; i < 1000; i++) {
        struct plan pl;
        decide(confirm(p), SEED, i, 1, NULL, NULL, &pl);
        ck_assert(pl.queue_latency_ms == 7.0);
        ck_assert(pl.latency_ms == 25.0);
        fired += pl.fault != NULL;
    }
    ck_assert_int_gt(fired, 0);
    ck_assert_int_lt(fired, 1000);
    profile_free(p);
}
END_TEST

#define LATENCIES \
    "\"queue_latency\": {\"dist\": \"lognormal\", \"median_ms\": 30, \"p99_ms\": 600}, " \
    "\"latency\": {\"dist\": \"uniform\", \"min_ms\": 10, \"max_ms\": 90}"

START_TEST(test_faults_do_not_change_the_latency_draws)
{
    /* Same identity, four profiles that differ only in their faults → the same latencies. */
    struct profile *ps[4] = {
        parse_ok(CONFIRM(LATENCIES)),
        parse_ok(CONFIRM(LATENCIES ", \"faults\": [" DROP_REQ("0") "}]")),
        parse_ok(CONFIRM(LATENCIES ", \"faults\": [" ERROR500("1") "}]")),
        parse_ok(CONFIRM(LATENCIES ", \"faults\": [" ERROR500("0.5") "}, " DRIP("0.5")
                         ", \"attempts\": [2]}]")),
    };
    for (int i = 0; i < 10000; i++) {
        for (uint32_t attempt = 1; attempt <= 2; attempt++) {
            struct plan base;
            decide(confirm(ps[0]), SEED, i, attempt, NULL, NULL, &base);
            ck_assert_ptr_null(base.fault);
            ck_assert(base.latency_ms >= 10 && base.latency_ms <= 90);
            for (size_t k = 1; k < 4; k++) {
                struct plan pl;
                decide(confirm(ps[k]), SEED, i, attempt, NULL, NULL, &pl);
                ck_assert(pl.queue_latency_ms == base.queue_latency_ms);
                ck_assert(pl.latency_ms == base.latency_ms);
            }
        }
    }
    for (size_t k = 0; k < 4; k++)
        profile_free(ps[k]);
}
END_TEST

START_TEST(test_draws_are_fault_uniform_then_queue_latency_then_latency)
{
    struct profile *p = parse_ok(
        CONFIRM("\"queue_latency\": {\"dist\": \"exponential\", \"mean_ms\": 100}, "
                "\"latency\": {\"dist\": \"normal\", \"mean_ms\": 50, \"stddev_ms\": 10}, "
                "\"faults\": [" ERROR500("0.2") "}]"));
    const struct route_profile *rp = confirm(p);
    for (int i = 0; i < 1000; i++) {
        struct plan pl;
        decide(rp, SEED, i, 1, NULL, NULL, &pl);
        struct rng r;
        seed_for(&r, SEED, i, 1);
        double u = rng_uniform01(&r);
        double q = latency_sample_ms(&rp->queue_latency, &r);
        double l = latency_sample_ms(&rp->latency, &r);
        ck_assert_ptr_eq(pl.fault, u < 0.2 ? &rp->faults[0] : NULL);
        ck_assert(pl.queue_latency_ms == q);
        ck_assert(pl.latency_ms == l);
    }
    profile_free(p);
}
END_TEST

START_TEST(test_kind_and_how_names_are_the_profile_words)
{
    ck_assert_str_eq(fault_kind_name(FAULT_NONE), "none");
    ck_assert_str_eq(fault_kind_name(FAULT_ERROR), "error");
    ck_assert_str_eq(fault_kind_name(FAULT_DROP_REQUEST), "drop_request");
    ck_assert_str_eq(fault_kind_name(FAULT_DROP_RESPONSE), "drop_response");
    ck_assert_str_eq(fault_kind_name(FAULT_DRIP), "drip");
    ck_assert_str_eq(fault_how_name(HOW_CLOSE), "close");
    ck_assert_str_eq(fault_how_name(HOW_RESET), "reset");
    ck_assert_str_eq(fault_how_name(HOW_HANG), "hang");
    ck_assert_str_eq(fault_how_name(HOW_TRUNCATE), "truncate");
}
END_TEST

Suite *make_suite(void)
{
    Suite *s = suite_create("fault");

    TCase *rates = tcase_create("rates");
    tcase_set_timeout(rates, 60);
    tcase_add_test(rates, test_fault_p_0_1429_fires_on_14_29_percent_of_identities_within_half_a_point);
    tcase_add_test(rates, test_fault_p_0_never_fires_and_p_1_always_fires);
    tcase_add_test(rates, test_route_without_faults_never_gets_a_fault_nor_latency);
    tcase_add_test(rates, test_two_faults_fire_at_10_and_20_percent_and_never_together);
    suite_add_tcase(s, rates);

    TCase *det = tcase_create("determinism");
    tcase_set_timeout(det, 60);
    tcase_add_test(det, test_same_seed_identity_and_attempt_always_give_the_same_plan);
    tcase_add_test(det, test_another_seed_changes_the_decision_for_2p_1_minus_p_of_identities);
    tcase_add_test(det, test_attempt_2_is_drawn_independently_of_attempt_1);
    suite_add_tcase(s, det);

    TCase *att = tcase_create("attempts_and_times");
    tcase_set_timeout(att, 60);
    tcase_add_test(att, test_fault_with_attempts_1_fires_on_attempt_1_only);
    tcase_add_test(att, test_draw_is_made_against_the_faults_eligible_for_the_attempt_only);
    tcase_add_test(att, test_eligible_faults_share_the_draw_in_profile_order_from_zero);
    tcase_add_test(att, test_scripted_attempts_fault_before_an_every_attempt_fault_wins_by_profile_order);
    tcase_add_test(att, test_fault_with_times_2_fires_on_the_first_2_requests_then_never);
    tcase_add_test(att, test_fault_with_times_0_never_fires);
    tcase_add_test(att, test_budget_is_asked_only_when_its_fault_is_drawn);
    tcase_add_test(att, test_spent_budget_gives_no_fault_rather_than_the_next_fault);
    suite_add_tcase(s, att);

    TCase *lat = tcase_create("latency");
    tcase_set_timeout(lat, 60);
    tcase_add_test(lat, test_fixed_latencies_are_exact_with_or_without_a_fault);
    tcase_add_test(lat, test_faults_do_not_change_the_latency_draws);
    tcase_add_test(lat, test_draws_are_fault_uniform_then_queue_latency_then_latency);
    tcase_add_test(lat, test_kind_and_how_names_are_the_profile_words);
    suite_add_tcase(s, lat);
    return s;
}
