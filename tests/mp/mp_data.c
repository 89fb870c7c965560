/* SPDX-License-Identifier: MIT */
/*
 * Value helpers of the correctness tests (see mp_data.h). The fp16/bf16 conversions here are
 * written independently of the library's kernels, so the tests check them too.
 */
#include "mp_data.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static uint16_t f2bf(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) {
        return (uint16_t)((x >> 16) | 0x40);
    }
    uint32_t lsb = (x >> 16) & 1u;
    return (uint16_t)((x + 0x7fffu + lsb) >> 16);
}

static float bf2f(uint16_t b)
{
    uint32_t x = (uint32_t)b << 16;
    float    f;
    memcpy(&f, &x, 4);
    return f;
}

static uint16_t f2h(float f)
{
    /* via frexp: exact RNE for the values the tests use (normal range and zero) */
    if (f == 0.0f) {
        return signbit(f) ? 0x8000 : 0;
    }
    uint16_t sign = f < 0 ? 0x8000 : 0;
    double   a    = fabs((double)f);
    int      e;
    double   m   = frexp(a, &e); /* a = m * 2^e, m in [0.5,1) */
    int      exp = e - 1 + 15;
    if (exp <= 0) { /* subnormal: units of 2^-24 */
        double q = nearbyint(a * 16777216.0);
        return (uint16_t)(sign | (uint16_t)q);
    }
    double q = nearbyint((m * 2.0 - 1.0) * 1024.0); /* RNE (default rounding mode) */
    if (q >= 1024.0) {
        q = 0;
        exp++;
    }
    if (exp >= 31) {
        return sign | 0x7c00;
    }
    return (uint16_t)(sign | (uint16_t)(exp << 10) | (uint16_t)q);
}

static float h2f(uint16_t h)
{
    int    exp  = (h >> 10) & 0x1f;
    int    mant = h & 0x3ff;
    double v    = exp == 0 ? ldexp(mant, -24) : ldexp(1024 + mant, exp - 25);
    if (exp == 31) {
        v = mant ? NAN : INFINITY;
    }
    return (float)((h & 0x8000) ? -v : v);
}

void mp_store(coll_dtype_t dt, void *buf, size_t i, double v)
{
    switch (dt) {
    case COLL_INT8:
        ((int8_t *)buf)[i] = (int8_t)(int64_t)v;
        break;
    case COLL_UINT8:
        ((uint8_t *)buf)[i] = (uint8_t)(int64_t)v;
        break;
    case COLL_INT32:
        ((int32_t *)buf)[i] = (int32_t)(int64_t)v;
        break;
    case COLL_UINT32:
        ((uint32_t *)buf)[i] = (uint32_t)(int64_t)v;
        break;
    case COLL_INT64:
        ((int64_t *)buf)[i] = (int64_t)v;
        break;
    case COLL_UINT64:
        ((uint64_t *)buf)[i] = (uint64_t)(int64_t)v;
        break;
    case COLL_FLOAT16:
        ((uint16_t *)buf)[i] = f2h((float)v);
        break;
    case COLL_BFLOAT16:
        ((uint16_t *)buf)[i] = f2bf((float)v);
        break;
    case COLL_FLOAT32:
        ((float *)buf)[i] = (float)v;
        break;
    case COLL_FLOAT64:
        ((double *)buf)[i] = v;
        break;
    default:
        break;
    }
}

double mp_load(coll_dtype_t dt, const void *buf, size_t i)
{
    switch (dt) {
    case COLL_INT8:
        return ((const int8_t *)buf)[i];
    case COLL_UINT8:
        return ((const uint8_t *)buf)[i];
    case COLL_INT32:
        return ((const int32_t *)buf)[i];
    case COLL_UINT32:
        return ((const uint32_t *)buf)[i];
    case COLL_INT64:
        return (double)((const int64_t *)buf)[i];
    case COLL_UINT64:
        return (double)((const uint64_t *)buf)[i];
    case COLL_FLOAT16:
        return h2f(((const uint16_t *)buf)[i]);
    case COLL_BFLOAT16:
        return bf2f(((const uint16_t *)buf)[i]);
    case COLL_FLOAT32:
        return ((const float *)buf)[i];
    case COLL_FLOAT64:
        return ((const double *)buf)[i];
    default:
        return NAN;
    }
}

double mp_input(coll_redop_t op, int rank, size_t i)
{
    if (op == COLL_PROD) {
        return ((i + (size_t)rank) % 5 == 0) ? 2.0 : 1.0;
    }
    return (double)(((size_t)rank * 3 + i * 7 + 1) % 8 + 1); /* 1..8 */
}

/* The value the library must produce: exact op, then AVG divided once in the dtype's way. */
double mp_expect(coll_dtype_t dt, coll_redop_t op, int n, size_t i)
{
    double acc = mp_input(op, 0, i);
    for (int r = 1; r < n; r++) {
        double v = mp_input(op, r, i);
        switch (op) {
        case COLL_PROD:
            acc *= v;
            break;
        case COLL_MIN:
            acc = v < acc ? v : acc;
            break;
        case COLL_MAX:
            acc = v > acc ? v : acc;
            break;
        default:
            acc += v;
            break;
        }
    }
    if (op == COLL_AVG) {
        switch (dt) {
        case COLL_FLOAT64:
            acc = acc / n;
            break;
        case COLL_FLOAT32:
        case COLL_FLOAT16:
        case COLL_BFLOAT16:
            acc = (double)((float)acc / (float)n);
            break;
        default:
            acc = (double)((int64_t)acc / n);
            break;
        }
    }
    /* round the way a store into dt does, so comparisons are bit-exact */
    uint64_t tmp[1];
    mp_store(dt, tmp, 0, acc);
    return mp_load(dt, tmp, 0);
}

void mp_fill(coll_dtype_t dt, coll_redop_t op, void *buf, size_t count, int rank, size_t index_base)
{
    for (size_t i = 0; i < count; i++) {
        mp_store(dt, buf, i, mp_input(op, rank, index_base + i));
    }
}

size_t mp_check(coll_dtype_t dt, const void *buf, size_t count, const char *what, int rank,
                double (*expect)(coll_dtype_t, coll_redop_t, int, size_t, void *), coll_redop_t op,
                int n, size_t index_base, void *ctx)
{
    size_t wrong = 0;
    for (size_t i = 0; i < count; i++) {
        double want = expect(dt, op, n, index_base + i, ctx);
        double got  = mp_load(dt, buf, i);
        if (!(got == want)) {
            if (wrong == 0) {
                fprintf(stderr, "rank %d: %s: %s/%s element %zu is %g, expected %g\n", rank, what,
                        coll_dtype_name(dt), coll_redop_name(op), i, got, want);
            }
            wrong++;
        }
    }
    return wrong;
}
