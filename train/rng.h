/* SPDX-License-Identifier: MIT */
/*
 * rng.h -- ctrain's random numbers: splitmix64, uniform floats and Box-Muller normals. Small,
 * seedable and the same on every platform, so every rank draws the same initial weights and
 * the same data order from --seed. Not for cryptography.
 */
#ifndef CTRAIN_RNG_H
#define CTRAIN_RNG_H

#include <math.h>
#include <stdint.h>

typedef struct {
    uint64_t state;
} rng_t;

static inline void rng_seed(rng_t *r, uint64_t seed)
{
    r->state = seed;
}

static inline uint64_t rng_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline uint64_t rng_u64(rng_t *r)
{
    r->state += 0x9e3779b97f4a7c15ULL;
    return rng_mix(r->state);
}

/* Uniform in (0, 1]. */
static inline float rng_uniform(rng_t *r)
{
    return (float)((rng_u64(r) >> 40) + 1) / 16777216.0f;
}

static inline float rng_normal(rng_t *r)
{
    float u1 = rng_uniform(r), u2 = rng_uniform(r);
    return sqrtf(-2.0f * logf(u1)) * cosf(6.283185307179586f * u2);
}

#endif
