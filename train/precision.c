/* SPDX-License-Identifier: MIT */
/*
 * precision.c -- rounding to bf16 and fp16 on fp32 bit patterns, and the dynamic loss scaler
 * (see precision.h).
 */
#include "precision.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

static uint32_t f2u(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

static float u2f(uint32_t u)
{
    float x;
    memcpy(&x, &u, 4);
    return x;
}

/* bf16 keeps the top 16 bits: round the low 16 to nearest, ties to even. */
static float round_bf16(float x)
{
    uint32_t u = f2u(x);
    if ((u & 0x7f800000u) == 0x7f800000u) {
        return x; /* inf and NaN as they are */
    }
    u += 0x7fffu + ((u >> 16) & 1u);
    return u2f(u & 0xffff0000u);
}

/* fp16: 1 sign, 5 exponent, 10 mantissa bits; normals down to 2^-14, subnormals in steps of
 * 2^-24, largest 65504; beyond, infinity. */
static float round_fp16(float x)
{
    float a = fabsf(x);
    if (!(a == a) || a == INFINITY) {
        return x;
    }
    if (a >= 65520.0f) { /* halfway between 65504 and the next power: rounds to infinity */
        return copysignf(INFINITY, x);
    }
    int   e;
    float m = frexpf(a, &e); /* a = m * 2^e, 0.5 <= m < 1 */
    if (a == 0.0f) {
        return x;
    }
    /* spacing of fp16 numbers around a: 2^(e - 11) for normals, 2^-24 below 2^-14 */
    int   qexp = e - 1 >= -14 ? e - 11 : -24;
    float q    = ldexpf(1.0f, qexp);
    float r    = nearbyintf(a / q) * q; /* current rounding mode: to nearest, ties to even */
    (void)m;
    return copysignf(r, x);
}

float prec_round(prec_t p, float x)
{
    return p == PREC_BF16 ? round_bf16(x) : p == PREC_FP16 ? round_fp16(x) : x;
}

void prec_round_array(prec_t p, float *x, size_t n)
{
    if (p == PREC_FP32) {
        return;
    }
    for (size_t i = 0; i < n; i++) {
        x[i] = prec_round(p, x[i]);
    }
}

int prec_all_finite(const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(x[i])) {
            return 0;
        }
    }
    return 1;
}

int loss_scaler_update(loss_scaler_t *s, float *grads, size_t n)
{
    if (!prec_all_finite(grads, n)) {
        s->scale = s->scale > 1.0f ? s->scale / 2.0f : 1.0f;
        s->good  = 0;
        s->skipped++;
        return 0;
    }
    float inv = 1.0f / s->scale;
    for (size_t i = 0; i < n; i++) {
        grads[i] *= inv;
    }
    if (++s->good >= s->window && s->scale < 1.6e38f) {
        s->scale *= 2.0f;
        s->good = 0;
    }
    return 1;
}
