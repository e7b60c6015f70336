/* rng.h -- seeded pseudo-random numbers and latency distributions. Pure: no I/O, no global state.
 * Every random decision about a request is drawn from a generator seeded by (seed, route, identity,
 * attempt) so that a run is reproducible whatever the concurrency (docs/profiles.md §4
 * "Determinism"). Generator: xoshiro256** seeded through splitmix64. */
#ifndef FAKEGATE_RNG_H
#define FAKEGATE_RNG_H

#include <stddef.h>
#include <stdint.h>

struct rng {
    uint64_t s[4];
};

/* splitmix64's increment (the golden ratio in 64 bits). */
#define SPLITMIX64_GAMMA UINT64_C(0x9e3779b97f4a7c15)

/* One step of splitmix64: adds SPLITMIX64_GAMMA to *state and returns mix64 of it. Thread: any. */
uint64_t splitmix64(uint64_t *state);

/* Bijective 64-bit mixer (splitmix64's finaliser): distinct inputs give distinct outputs. */
uint64_t mix64(uint64_t x);

/* The inverse of mix64: unmix64(mix64(x)) == x for every x. Thread: any. */
uint64_t unmix64(uint64_t x);

/* 64-bit hash of `len` bytes of `data` with `seed` (not cryptographic; stable across runs and
 * platforms of the same endianness). */
uint64_t hash64(const void *data, size_t len, uint64_t seed);

/* Seed `r` from a single 64-bit value (the four words come from splitmix64). */
void rng_seed(struct rng *r, uint64_t seed);

/* Seed `r` for one request: a pure function of (seed, route index, identity bytes, attempt
 * number). `identity` need not be NUL-terminated; it may be NULL when `identity_len` is 0. */
void rng_seed_request(struct rng *r, uint64_t seed, int route, const char *identity,
                      size_t identity_len, uint32_t attempt);

/* Next 64 random bits. */
uint64_t rng_next(struct rng *r);

/* Uniform double in [0, 1) with 53 random bits. */
double rng_uniform01(struct rng *r);

/* Standard normal deviate (mean 0, stddev 1). */
double rng_normal(struct rng *r);

/* A latency distribution as a profile describes it (docs/profiles.md §4 "Latency dist"). All values
 * in ms. DIST_NONE means "no latency" (0 ms); it is what an absent latency object becomes. */
enum dist_kind {
    DIST_NONE = 0,
    DIST_FIXED,       /* a = ms */
    DIST_UNIFORM,     /* a = min_ms, b = max_ms */
    DIST_NORMAL,      /* a = mean_ms, b = stddev_ms; samples below 0 are clamped to 0 */
    DIST_LOGNORMAL,   /* a = mu, b = sigma of ln(ms) (derived from median_ms, p99_ms) */
    DIST_EXPONENTIAL, /* a = mean_ms */
    DIST_MIXTURE      /* parts[] with weights summing to 1 (normalised by the parser) */
};

struct latency_part;

struct latency_dist {
    enum dist_kind kind;
    double a, b;
    /* As written in the profile, for rendering it back (lognormal keeps median/p99 here). */
    double shown_a, shown_b;
    size_t n_parts;              /* DIST_MIXTURE only */
    struct latency_part *parts;  /* DIST_MIXTURE only; owned by the dist */
};

struct latency_part {
    double weight;               /* normalised: the parts' weights sum to 1 */
    struct latency_dist dist;    /* never DIST_MIXTURE (no nesting) */
};

/* Set `d` to a lognormal with the given median and 99th percentile (ms); requires
 * 0 < median_ms <= p99_ms (p99 == median gives sigma 0, i.e. fixed). */
void latency_lognormal_init(struct latency_dist *d, double median_ms, double p99_ms);

/* Draw one latency in ms (>= 0) from `d` using `r`. DIST_NONE returns 0 without drawing. */
double latency_sample_ms(const struct latency_dist *d, struct rng *r);

/* Free what `d` owns (mixture parts); leaves `d` as DIST_NONE. */
void latency_dist_fini(struct latency_dist *d);

#endif
