/* rng.c -- splitmix64 / xoshiro256** and the latency distributions of docs/profiles.md §4.
 * Pure: no I/O, no globals. A generator's output depends only on its seed, so a request's draws
 * depend only on (seed, route, identity, attempt). Every sample is finite and within
 * [0, MAX_SAMPLE_MS], so callers can turn it into an int64 deadline without overflow. */
#include "rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Profiles cap every configured time at one day; heavy tails (lognormal, exponential) are cut
 * there too, so a sample never overflows a nanosecond deadline. */
#define MAX_SAMPLE_MS 86400000.0

/* Φ⁻¹(0.99): the p99 of a standard normal. */
#define Z_P99 2.326347874040841

#define TWO_PI 6.283185307179586

uint64_t mix64(uint64_t x)
{
    x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
    return x ^ (x >> 31);
}

/* Each step of mix64 undone in reverse order: x ^= x >> s is undone by xoring in x >> s and
 * x >> 2s (enough while 3s >= 64), a multiplication by the constant's inverse mod 2^64. */
uint64_t unmix64(uint64_t x)
{
    x ^= x >> 31 ^ x >> 62;
    x *= UINT64_C(0x319642b2d24d8ec3); /* 0x94d049bb133111eb^-1 mod 2^64 */
    x ^= x >> 27 ^ x >> 54;
    x *= UINT64_C(0x96de1b173f119089); /* 0xbf58476d1ce4e5b9^-1 mod 2^64 */
    return x ^ x >> 30 ^ x >> 60;
}

uint64_t splitmix64(uint64_t *state)
{
    *state += SPLITMIX64_GAMMA;
    return mix64(*state);
}

/* FNV-1a over the bytes, its basis perturbed by the seed, then mixed: FNV alone has weak high
 * bits for short inputs, and identities are short. */
uint64_t hash64(const void *data, size_t len, uint64_t seed)
{
    const unsigned char *p = data;
    uint64_t h = UINT64_C(0xcbf29ce484222325) ^ mix64(seed);
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= UINT64_C(0x100000001b3);
    }
    return mix64(h ^ (uint64_t)len);
}

void rng_seed(struct rng *r, uint64_t seed)
{
    uint64_t st = seed;
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&st);
}

void rng_seed_request(struct rng *r, uint64_t seed, int route, const char *identity,
                      size_t identity_len, uint32_t attempt)
{
    uint64_t st = mix64(seed ^ hash64(identity, identity_len, UINT64_C(0x66616b65)));
    st = mix64(st ^ (((uint64_t)(uint32_t)route << 32) | attempt));
    /* splitmix64 outputs of distinct counters are distinct, so s[] is never all zero. */
    rng_seed(r, st);
}

static inline uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

uint64_t rng_next(struct rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double rng_uniform01(struct rng *r)
{
    return (double)(rng_next(r) >> 11) * 0x1.0p-53;
}

/* Box–Muller, keeping one of the pair: always exactly two draws, so how many numbers a request
 * consumes does not depend on their values. */
double rng_normal(struct rng *r)
{
    double u1 = 1.0 - rng_uniform01(r); /* (0, 1]: log() stays finite */
    double u2 = rng_uniform01(r);
    return sqrt(-2.0 * log(u1)) * cos(TWO_PI * u2);
}

void latency_lognormal_init(struct latency_dist *d, double median_ms, double p99_ms)
{
    memset(d, 0, sizeof(*d));
    d->kind = DIST_LOGNORMAL;
    d->a = log(median_ms);
    d->b = (log(p99_ms) - log(median_ms)) / Z_P99;
    d->shown_a = median_ms;
    d->shown_b = p99_ms;
}

static double clamp_ms(double x)
{
    if (!(x >= 0.0)) /* also catches NaN */
        return 0.0;
    return x > MAX_SAMPLE_MS ? MAX_SAMPLE_MS : x;
}

double latency_sample_ms(const struct latency_dist *d, struct rng *r)
{
    switch (d->kind) {
    case DIST_NONE:
        return 0.0;
    case DIST_FIXED:
        return clamp_ms(d->a);
    case DIST_UNIFORM:
        return clamp_ms(d->a + (d->b - d->a) * rng_uniform01(r));
    case DIST_NORMAL:
        return clamp_ms(d->a + d->b * rng_normal(r));
    case DIST_LOGNORMAL:
        return clamp_ms(exp(d->a + d->b * rng_normal(r)));
    case DIST_EXPONENTIAL:
        return clamp_ms(-d->a * log(1.0 - rng_uniform01(r)));
    case DIST_MIXTURE: {
        if (d->n_parts == 0)
            return 0.0;
        double u = rng_uniform01(r), cum = 0.0;
        size_t i = 0;
        /* The last part takes whatever rounding leaves above the summed weights. */
        for (; i + 1 < d->n_parts; i++) {
            cum += d->parts[i].weight;
            if (u < cum)
                break;
        }
        return latency_sample_ms(&d->parts[i].dist, r);
    }
    }
    return 0.0;
}

void latency_dist_fini(struct latency_dist *d)
{
    for (size_t i = 0; i < d->n_parts; i++)
        latency_dist_fini(&d->parts[i].dist);
    free(d->parts);
    memset(d, 0, sizeof(*d));
}
