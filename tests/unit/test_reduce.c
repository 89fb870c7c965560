/* SPDX-License-Identifier: MIT */
/*
 * Unit test of the reduction kernels: every dtype x op on several sizes and alignments against a
 * scalar reference written independently here (fp16/bf16 decoded with ldexp and rounded with
 * floor, not with the library's bit tricks), exact aliasing, all 65536 fp16 and bf16 patterns,
 * rounding ties, and the AVG division. Links only src/reduce/reduce.c.
 */
#include "reduce/reduce.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_test.h"

#ifndef __SIZEOF_INT128__
int main(void)
{
    printf("test_reduce: skipped (the integer reference needs __int128)\n");
    return COLL_TEST_SKIP;
}
#else

typedef __int128          wide_t;
typedef unsigned __int128 uwide_t;

#define TEST_LEN(_a) (sizeof(_a) / sizeof((_a)[0]))
#define GUARD_BYTES  64
#define GUARD_FILL   0xa5

static const char *const dtype_names[COLL_DTYPE_COUNT] = {
    [COLL_INT8] = "int8",         [COLL_UINT8] = "uint8",     [COLL_INT32] = "int32",
    [COLL_UINT32] = "uint32",     [COLL_INT64] = "int64",     [COLL_UINT64] = "uint64",
    [COLL_FLOAT16] = "float16",   [COLL_FLOAT32] = "float32", [COLL_FLOAT64] = "float64",
    [COLL_BFLOAT16] = "bfloat16",
};
static const coll_redop_t test_ops[]   = {COLL_SUM, COLL_PROD, COLL_MIN, COLL_MAX};
static const char *const  op_names[]   = {"sum", "prod", "max", "min", "avg"};
static const size_t       test_sizes[] = {0, 1, 7, 64, 1000, 4099};

static uint64_t test_seed = 0x5eedc011ull;
static long     test_checks;

static size_t test_dtype_size(coll_dtype_t dt)
{
    switch (dt) {
    case COLL_INT8:
    case COLL_UINT8:
        return 1;
    case COLL_FLOAT16:
    case COLL_BFLOAT16:
        return 2;
    case COLL_INT32:
    case COLL_UINT32:
    case COLL_FLOAT32:
        return 4;
    default:
        return 8;
    }
}

/* ---- reference fp16/bf16 conversions (ldexp/frexp, no bit tricks) ---- */

/* Value of a binary format with mbits stored mantissa bits and exponent bias emax. */
static double ref_small_decode(uint16_t bits, int mbits, int emax)
{
    int    ebits = mbits == 10 ? 5 : 8;
    int    e     = (bits >> mbits) & ((1 << ebits) - 1);
    int    m     = bits & ((1 << mbits) - 1);
    double v;

    if (e == (1 << ebits) - 1) {
        v = m != 0 ? NAN : INFINITY;
    } else if (e == 0) {
        v = ldexp(m, 1 - emax - mbits);
    } else {
        v = ldexp(m + (1 << mbits), e - emax - mbits);
    }
    return (bits >> 15) != 0 ? -v : v;
}

/* Round |v| (not NaN) to nearest even in that format; returns the bits without the sign. */
static uint16_t ref_small_encode_mag(double v, int mbits, int emax)
{
    int    emin = 1 - emax;
    double one  = ldexp(1.0, mbits);
    double q, fl, rem;
    int    e;

    v = fabs(v);
    if (isinf(v)) {
        return (uint16_t)((2 * emax + 1) << mbits);
    }
    if (v == 0.0) {
        return 0;
    }
    (void)frexp(v, &e);
    e   = e - 1 < emin ? emin : e - 1; /* v = 1.f * 2^e, or a subnormal in units of 2^emin */
    q   = ldexp(v, mbits - e);         /* v in units of the last mantissa bit: exact */
    fl  = floor(q);
    rem = q - fl;
    if (rem > 0.5 || (rem == 0.5 && fmod(fl, 2.0) != 0.0)) {
        fl += 1.0;
    }
    if (fl >= 2.0 * one) { /* rounding carried into the next binade */
        fl /= 2.0;
        e++;
    }
    if (e > emax) {
        return (uint16_t)((2 * emax + 1) << mbits);
    }
    if (fl < one) { /* subnormal (e == emin), exponent field 0 */
        return (uint16_t)fl;
    }
    return (uint16_t)(((uint32_t)(e + emax) << mbits) + (uint32_t)(fl - one));
}

static int ref_is_half_nan(coll_dtype_t dt, uint16_t bits)
{
    return dt == COLL_FLOAT16 ? (bits & 0x7fff) > 0x7c00 : (bits & 0x7fff) > 0x7f80;
}

static double ref_decode16(coll_dtype_t dt, uint16_t bits)
{
    return dt == COLL_FLOAT16 ? ref_small_decode(bits, 10, 15) : ref_small_decode(bits, 7, 127);
}

/* Encoding of a non-NaN value; NaN results are compared by class only. */
static uint16_t ref_encode16(coll_dtype_t dt, double v)
{
    uint16_t sign = signbit(v) ? 0x8000 : 0;

    if (dt == COLL_FLOAT16) {
        return (uint16_t)(sign | ref_small_encode_mag(v, 10, 15));
    }
    return (uint16_t)(sign | ref_small_encode_mag(v, 7, 127));
}

/* ---- reference element operations ---- */

static wide_t ref_load_int(coll_dtype_t dt, const void *p, size_t i)
{
    switch (dt) {
    case COLL_INT8:
        return ((const int8_t *)p)[i];
    case COLL_UINT8:
        return ((const uint8_t *)p)[i];
    case COLL_INT32:
        return ((const int32_t *)p)[i];
    case COLL_UINT32:
        return ((const uint32_t *)p)[i];
    case COLL_INT64:
        return ((const int64_t *)p)[i];
    default:
        return ((const uint64_t *)p)[i];
    }
}

/* Stores the low bits of v: the wrapped-around result, whatever the signedness. */
static void ref_store_int(coll_dtype_t dt, void *p, size_t i, wide_t v)
{
    uwide_t u = (uwide_t)v;

    switch (test_dtype_size(dt)) {
    case 1:
        ((uint8_t *)p)[i] = (uint8_t)(u & 0xffu);
        break;
    case 4:
        ((uint32_t *)p)[i] = (uint32_t)(u & 0xffffffffu);
        break;
    default:
        ((uint64_t *)p)[i] = (uint64_t)(u & 0xffffffffffffffffull);
        break;
    }
}

static wide_t ref_int_op(coll_redop_t op, wide_t x, wide_t y)
{
    switch (op) {
    case COLL_SUM:
        return x + y;
    case COLL_PROD: /* |x|,|y| < 2^64: keep the product of the low 64 bits in range */
        return (wide_t)((uwide_t)x * (uwide_t)y);
    case COLL_MIN:
        return y < x ? y : x;
    default:
        return y > x ? y : x;
    }
}

/* Float MIN/MAX: NaN wins (a first), equal values (+0/-0) give b. */
static double ref_float_op(coll_redop_t op, double x, double y, int is_f32)
{
    if (op == COLL_SUM) {
        return is_f32 ? (double)((float)x + (float)y) : x + y;
    }
    if (op == COLL_PROD) {
        return is_f32 ? (double)((float)x * (float)y) : x * y;
    }
    if (isnan(x)) {
        return x;
    }
    if (isnan(y)) {
        return y;
    }
    if (op == COLL_MIN) {
        return x < y ? x : y;
    }
    return x > y ? x : y;
}

/* Expected out[i] = op(a[i], b[i]), stored in the dtype's own representation. */
static void ref_reduce_one(coll_dtype_t dt, coll_redop_t op, const void *a, const void *b,
                           void *out, size_t i)
{
    if (dt == COLL_FLOAT32) {
        float x = ((const float *)a)[i], y = ((const float *)b)[i];

        ((float *)out)[i] = (float)ref_float_op(op, x, y, 1);
    } else if (dt == COLL_FLOAT64) {
        double x = ((const double *)a)[i], y = ((const double *)b)[i];

        ((double *)out)[i] = ref_float_op(op, x, y, 0);
    } else if (dt == COLL_FLOAT16 || dt == COLL_BFLOAT16) {
        double   x   = ref_decode16(dt, ((const uint16_t *)a)[i]);
        double   y   = ref_decode16(dt, ((const uint16_t *)b)[i]);
        double   r   = ref_float_op(op, x, y, 1);
        uint16_t nan = dt == COLL_FLOAT16 ? 0x7e00 : 0x7fc0;

        ((uint16_t *)out)[i] = isnan(r) ? nan : ref_encode16(dt, r);
    } else {
        wide_t x = ref_load_int(dt, a, i), y = ref_load_int(dt, b, i);

        ref_store_int(dt, out, i, ref_int_op(op, x, y));
    }
}

/* Bitwise equality, except that any NaN equals any NaN. */
static int ref_same(coll_dtype_t dt, const void *got, const void *want, size_t i)
{
    size_t         sz = test_dtype_size(dt);
    const uint8_t *g  = (const uint8_t *)got + i * sz;
    const uint8_t *w  = (const uint8_t *)want + i * sz;

    if (dt == COLL_FLOAT32) {
        float x, y;

        memcpy(&x, g, 4);
        memcpy(&y, w, 4);
        if (isnan(y)) {
            return isnan(x);
        }
    } else if (dt == COLL_FLOAT64) {
        double x, y;

        memcpy(&x, g, 8);
        memcpy(&y, w, 8);
        if (isnan(y)) {
            return isnan(x);
        }
    } else if (dt == COLL_FLOAT16 || dt == COLL_BFLOAT16) {
        uint16_t x, y;

        memcpy(&x, g, 2);
        memcpy(&y, w, 2);
        if (ref_is_half_nan(dt, y)) {
            return ref_is_half_nan(dt, x);
        }
    }
    return memcmp(g, w, sz) == 0;
}

/* ---- random data ---- */

/* Floats: mostly close magnitudes (so sums really round), some anywhere, a few specials. */
static uint64_t gen_float_bits(int ebits, int mbits, uint64_t r, uint64_t r2)
{
    uint64_t emax = (1ull << ebits) - 1;
    uint64_t bias = emax >> 1;
    uint64_t sign = (r >> 63) << (ebits + mbits);
    uint64_t mant = r2 & ((1ull << mbits) - 1);
    uint64_t exp;

    switch (r % 64) {
    case 0:
        return sign | (emax << mbits) | mant | 1; /* NaN */
    case 1:
        return sign | (emax << mbits); /* infinity */
    case 2:
        return sign; /* signed zero */
    case 3:
        return sign | mant; /* subnormal */
    default:
        break;
    }
    if ((r >> 8) % 4 == 0) {
        exp = 1 + (r >> 16) % (emax - 1); /* any normal exponent */
    } else {
        exp = bias - 4 + (r >> 16) % 9; /* within 2^-4 .. 2^4 */
    }
    return sign | (exp << mbits) | mant;
}

static void gen_fill(coll_dtype_t dt, void *buf, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t r = coll_test_rand(&test_seed), r2 = coll_test_rand(&test_seed);

        switch (dt) {
        case COLL_FLOAT16: /* half the time any bit pattern at all */
            ((uint16_t *)buf)[i] = (uint16_t)((r >> 40) % 2 ? r2 : gen_float_bits(5, 10, r, r2));
            break;
        case COLL_BFLOAT16:
            ((uint16_t *)buf)[i] = (uint16_t)((r >> 40) % 2 ? r2 : gen_float_bits(8, 7, r, r2));
            break;
        case COLL_FLOAT32: {
            uint32_t u = (uint32_t)gen_float_bits(8, 23, r, r2);

            memcpy((float *)buf + i, &u, 4);
            break;
        }
        case COLL_FLOAT64: {
            uint64_t u = gen_float_bits(11, 52, r, r2);

            memcpy((double *)buf + i, &u, 8);
            break;
        }
        default: /* integers: full range, or small values of either sign */
            ref_store_int(dt, buf, i, r % 4 == 0 ? (wide_t)(int64_t)(r2 % 21) - 10 : (wide_t)r2);
            break;
        }
    }
}

/* ---- kernel checks ---- */

/* Buffers with a guard zone after the last element, started 'skew' elements in (unaligned). */
typedef struct {
    uint8_t *mem;
    void    *p;
} test_buf_t;

static void buf_alloc(test_buf_t *b, coll_dtype_t dt, size_t n, size_t skew)
{
    size_t bytes = (n + skew) * test_dtype_size(dt) + GUARD_BYTES;

    b->mem = malloc(bytes);
    ASSERT_TRUE(b->mem != NULL);
    memset(b->mem, GUARD_FILL, bytes);
    b->p = b->mem + skew * test_dtype_size(dt);
}

static void buf_check_guard(const test_buf_t *b, coll_dtype_t dt, size_t n)
{
    const uint8_t *g = (const uint8_t *)b->p + n * test_dtype_size(dt);

    for (size_t i = 0; i < GUARD_BYTES; i++) {
        ASSERT_(g[i] == GUARD_FILL, "%s: write past element %zu", dtype_names[dt], n);
    }
}

static void check_result(coll_dtype_t dt, coll_redop_t op, const void *got, const void *a,
                         const void *b, void *want, size_t n, const char *what)
{
    size_t sz = test_dtype_size(dt);

    for (size_t i = 0; i < n; i++) {
        ref_reduce_one(dt, op, a, b, want, i);
        if (!ref_same(dt, got, want, i)) {
            uint64_t g = 0, w = 0, x = 0, y = 0;

            memcpy(&g, (const uint8_t *)got + i * sz, sz);
            memcpy(&w, (const uint8_t *)want + i * sz, sz);
            memcpy(&x, (const uint8_t *)a + i * sz, sz);
            memcpy(&y, (const uint8_t *)b + i * sz, sz);
            ASSERT_(0, "%s %s %s n=%zu i=%zu: a=0x%llx b=0x%llx got 0x%llx want 0x%llx",
                    dtype_names[dt], op_names[op], what, n, i, (unsigned long long)x,
                    (unsigned long long)y, (unsigned long long)g, (unsigned long long)w);
        }
        test_checks++;
    }
}

/* Out of place: dst distinct from a and b, which must stay untouched. */
static void test_out_of_place(coll_dtype_t dt, coll_redop_t op, size_t n, size_t skew)
{
    size_t     bytes = n * test_dtype_size(dt);
    test_buf_t a, b, d, a0, b0, want;

    buf_alloc(&a, dt, n, skew);
    buf_alloc(&b, dt, n, skew);
    buf_alloc(&d, dt, n, skew);
    buf_alloc(&a0, dt, n, 0);
    buf_alloc(&b0, dt, n, 0);
    buf_alloc(&want, dt, n, 0);
    gen_fill(dt, a.p, n);
    gen_fill(dt, b.p, n);
    memcpy(a0.p, a.p, bytes);
    memcpy(b0.p, b.p, bytes);

    coll_reduce3(dt, op, d.p, a.p, b.p, n);
    check_result(dt, op, d.p, a0.p, b0.p, want.p, n, "out-of-place");
    ASSERT_TRUE(memcmp(a.p, a0.p, bytes) == 0 && memcmp(b.p, b0.p, bytes) == 0);
    buf_check_guard(&d, dt, n);
    buf_check_guard(&a, dt, n);
    buf_check_guard(&b, dt, n);

    free(a.mem);
    free(b.mem);
    free(d.mem);
    free(a0.mem);
    free(b0.mem);
    free(want.mem);
}

/* In place: dst == a, dst == b, and dst == a == b. */
static void test_aliasing(coll_dtype_t dt, coll_redop_t op, size_t n, size_t skew)
{
    size_t     bytes = n * test_dtype_size(dt);
    test_buf_t a, b, d, want;

    buf_alloc(&a, dt, n, 0);
    buf_alloc(&b, dt, n, 0);
    buf_alloc(&d, dt, n, skew);
    buf_alloc(&want, dt, n, 0);
    gen_fill(dt, a.p, n);
    gen_fill(dt, b.p, n);

    memcpy(d.p, a.p, bytes);
    coll_reduce3(dt, op, d.p, d.p, b.p, n);
    check_result(dt, op, d.p, a.p, b.p, want.p, n, "dst==a");

    memcpy(d.p, b.p, bytes);
    coll_reduce3(dt, op, d.p, a.p, d.p, n);
    check_result(dt, op, d.p, a.p, b.p, want.p, n, "dst==b");

    memcpy(d.p, a.p, bytes);
    coll_reduce3(dt, op, d.p, d.p, d.p, n);
    check_result(dt, op, d.p, a.p, a.p, want.p, n, "dst==a==b");
    buf_check_guard(&d, dt, n);

    free(a.mem);
    free(b.mem);
    free(d.mem);
    free(want.mem);
}

static void test_kernels(void)
{
    for (int dt = 0; dt < COLL_DTYPE_COUNT; dt++) {
        for (size_t o = 0; o < TEST_LEN(test_ops); o++) {
            for (size_t s = 0; s < TEST_LEN(test_sizes); s++) {
                test_out_of_place((coll_dtype_t)dt, test_ops[o], test_sizes[s], 0);
                test_out_of_place((coll_dtype_t)dt, test_ops[o], test_sizes[s], 1);
            }
            test_aliasing((coll_dtype_t)dt, test_ops[o], 1000, 0);
            test_aliasing((coll_dtype_t)dt, test_ops[o], 4099, 3);
        }
    }
}

/* ---- conversions ---- */

static uint32_t f32_bits(float f)
{
    uint32_t u;

    memcpy(&u, &f, 4);
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;

    memcpy(&f, &u, 4);
    return f;
}

/* Every fp16/bf16 pattern widens exactly and narrows back to itself; NaNs come back quiet with
 * sign and payload kept. */
static void test_roundtrip_all(coll_dtype_t dt)
{
    int      mshift = dt == COLL_FLOAT16 ? 13 : 16;
    uint16_t qbit   = dt == COLL_FLOAT16 ? 0x0200 : 0x0040;

    for (uint32_t v = 0; v <= 0xffff; v++) {
        uint16_t h    = (uint16_t)v;
        float    f    = dt == COLL_FLOAT16 ? coll_half_to_float(h) : coll_bf16_to_float(h);
        uint16_t back = dt == COLL_FLOAT16 ? coll_float_to_half(f) : coll_float_to_bf16(f);
        double   want = ref_decode16(dt, h);

        if (ref_is_half_nan(dt, h)) {
            uint32_t payload = dt == COLL_FLOAT16 ? (uint32_t)(h & 0x3ff) << mshift
                                                  : (uint32_t)(h & 0x7f) << mshift;
            uint32_t fbits   = ((uint32_t)(h & 0x8000) << 16) | 0x7fc00000u | payload;

            ASSERT_(isnan(f) && f32_bits(f) == fbits, "%s 0x%04x widened to 0x%08x",
                    dtype_names[dt], h, f32_bits(f));
            ASSERT_(back == (h | qbit), "%s NaN 0x%04x came back as 0x%04x", dtype_names[dt], h,
                    back);
        } else {
            ASSERT_((double)f == want && !signbit(f) == !signbit(want),
                    "%s 0x%04x widened to %a, want %a", dtype_names[dt], h, (double)f, want);
            ASSERT_(back == h, "%s 0x%04x came back as 0x%04x", dtype_names[dt], h, back);
        }
        test_checks += 2;
    }
}

static void check_narrow(uint32_t fbits)
{
    float    f = bits_f32(fbits);
    uint16_t h = coll_float_to_half(f), b = coll_float_to_bf16(f);

    if (isnan(f)) {
        ASSERT_(ref_is_half_nan(COLL_FLOAT16, h) && (h & 0x0200) != 0 &&
                    (h & 0x8000) == (fbits >> 16 & 0x8000),
                "fp16 of NaN 0x%08x is 0x%04x", fbits, h);
        ASSERT_(ref_is_half_nan(COLL_BFLOAT16, b) && (b & 0x0040) != 0 &&
                    (b & 0x8000) == (fbits >> 16 & 0x8000),
                "bf16 of NaN 0x%08x is 0x%04x", fbits, b);
    } else {
        uint16_t wh = ref_encode16(COLL_FLOAT16, f), wb = ref_encode16(COLL_BFLOAT16, f);

        ASSERT_(h == wh, "fp16 of 0x%08x (%a): got 0x%04x want 0x%04x", fbits, (double)f, h, wh);
        ASSERT_(b == wb, "bf16 of 0x%08x (%a): got 0x%04x want 0x%04x", fbits, (double)f, b, wb);
    }
    test_checks += 2;
}

/* fp32 -> fp16/bf16 over every exponent, with mantissas on and around both rounding points. */
static void test_narrow_sweep(void)
{
    static const uint32_t mants[] = {
        0x000000, 0x000001, 0x000002, 0x7fffff, 0x7ffffe, 0x400000, 0x000fff, 0x001000,
        0x001001, 0x002fff, 0x003000, 0x003001, 0x007fff, 0x008000, 0x008001, 0x017fff,
        0x018000, 0x018001, 0x7fe000, 0x7ff000, 0x7fefff, 0x7f8000, 0x7f7fff, 0x7f0000,
    };

    for (uint32_t sign = 0; sign < 2; sign++) {
        for (uint32_t e = 0; e < 256; e++) {
            uint32_t base = sign << 31 | e << 23;

            for (size_t m = 0; m < TEST_LEN(mants); m++) {
                check_narrow(base | mants[m]);
            }
            for (int k = 0; k < 48; k++) {
                check_narrow(base | (uint32_t)(coll_test_rand(&test_seed) & 0x7fffff));
            }
        }
    }
}

/* Named ties and limits, so that a failure says which rule broke. */
static void test_ties(void)
{
    static const struct {
        float    f;
        uint16_t half, bf16;
    } cases[] = {
        {1.0f, 0x3c00, 0x3f80},          /* exact */
        {-0.0f, 0x8000, 0x8000},         /* sign of zero kept */
        {0x1.002p0f, 0x3c00, 0x3f80},    /* fp16 tie, even is down */
        {0x1.006p0f, 0x3c02, 0x3f80},    /* fp16 tie, even is up */
        {0x1.01p0f, 0x3c04, 0x3f80},     /* bf16 tie, even is down */
        {0x1.03p0f, 0x3c0c, 0x3f82},     /* bf16 tie, even is up */
        {65504.0f, 0x7bff, 0x4780},      /* largest half */
        {65519.99f, 0x7bff, 0x4780},     /* just below the overflow tie */
        {65520.0f, 0x7c00, 0x4780},      /* tie with an odd mantissa: up to infinity */
        {0x1p-24f, 0x0001, 0x3380},      /* smallest half subnormal */
        {0x1p-25f, 0x0000, 0x3300},      /* tie between 0 and 2^-24: down to 0 */
        {0x1.8p-24f, 0x0002, 0x33c0},    /* 1.5 units: tie, up to 2 */
        {0x1.8p-25f, 0x0001, 0x3340},    /* 0.75 units: up */
        {0x1.ffcp-15f, 0x0400, 0x3880},  /* tie between 0x3ff and 0x400: 0x400 */
        {0x1.ff8p-15f, 0x03ff, 0x3880},  /* largest subnormal half */
        {3.4028235e38f, 0x7c00, 0x7f80}, /* FLT_MAX: both overflow */
        {0x1.fep127f, 0x7c00, 0x7f7f},   /* largest bf16 */
        {0x1p-149f, 0x0000, 0x0000},     /* smallest float subnormal */
        {0x1p-133f, 0x0000, 0x0001},     /* smallest bf16 subnormal */
        {INFINITY, 0x7c00, 0x7f80},      /* infinities stay */
        {-INFINITY, 0xfc00, 0xff80},     /* with their sign */
    };

    for (size_t i = 0; i < TEST_LEN(cases); i++) {
        uint16_t h = coll_float_to_half(cases[i].f), b = coll_float_to_bf16(cases[i].f);

        ASSERT_(h == cases[i].half, "fp16 of %a: got 0x%04x want 0x%04x", (double)cases[i].f, h,
                cases[i].half);
        ASSERT_(b == cases[i].bf16, "bf16 of %a: got 0x%04x want 0x%04x", (double)cases[i].f, b,
                cases[i].bf16);
        test_checks += 2;
    }
    /* Signalling NaN patterns come back quiet. */
    ASSERT_EQ(coll_float_to_bf16(bits_f32(0x7f800001u)), 0x7fc0);
    ASSERT_EQ(coll_float_to_half(bits_f32(0xff800001u)), 0xfe00);
    ASSERT_EQ(f32_bits(coll_bf16_to_float(0x7f81)), 0x7fc10000);
    ASSERT_EQ(f32_bits(coll_half_to_float(0x7c01)), 0x7fc02000);
}

/* ---- semantics chosen by the kernels ---- */

static uint16_t k16(coll_dtype_t dt, coll_redop_t op, uint16_t a, uint16_t b)
{
    uint16_t d;

    coll_reduce3(dt, op, &d, &a, &b, 1);
    test_checks++;
    return d;
}

static float k32(coll_redop_t op, float a, float b)
{
    float d;

    coll_reduce3(COLL_FLOAT32, op, &d, &a, &b, 1);
    test_checks++;
    return d;
}

static void test_semantics(void)
{
    int8_t   i8a = 127, i8b = 1, i8d;
    int32_t  i32a = INT32_MAX, i32b = 1, i32d;
    int64_t  i64a = INT64_MIN, i64b = -1, i64d;
    uint8_t  u8a = 200, u8b = 2, u8d;
    float    fa[3] = {1, 2, 3}, fb[3] = {4, 5, 6}, fd[3] = {-1, -1, -1}, fs[3];
    uint32_t bad = 0xdeadbeef;

    coll_reduce3(COLL_INT8, COLL_SUM, &i8d, &i8a, &i8b, 1);
    ASSERT_EQ(i8d, -128);
    coll_reduce3(COLL_INT32, COLL_SUM, &i32d, &i32a, &i32b, 1);
    ASSERT_EQ(i32d, INT32_MIN);
    coll_reduce3(COLL_INT64, COLL_PROD, &i64d, &i64a, &i64b, 1);
    ASSERT_EQ(i64d, INT64_MIN);
    coll_reduce3(COLL_UINT8, COLL_PROD, &u8d, &u8a, &u8b, 1);
    ASSERT_EQ(u8d, 144);

    /* MIN/MAX propagate NaN from either side; +0/-0 compare equal and give b. */
    ASSERT_TRUE(isnan(k32(COLL_MAX, NAN, 1.0f)) && isnan(k32(COLL_MAX, 1.0f, NAN)));
    ASSERT_TRUE(isnan(k32(COLL_MIN, NAN, 1.0f)) && isnan(k32(COLL_MIN, 1.0f, NAN)));
    ASSERT_TRUE(signbit(k32(COLL_MAX, 0.0f, -0.0f)) && !signbit(k32(COLL_MAX, -0.0f, 0.0f)));
    ASSERT_TRUE(k32(COLL_MIN, -INFINITY, 3.0f) == -INFINITY);
    ASSERT_EQ(k16(COLL_FLOAT16, COLL_MAX, 0x3c00, 0x7e00) & 0x7e00, 0x7e00);
    ASSERT_EQ(k16(COLL_BFLOAT16, COLL_MIN, 0x7fc0, 0x3f80) & 0x7fc0, 0x7fc0);

    /* Sums that land on a tie round to even after the fp32 combine. */
    ASSERT_EQ(k16(COLL_FLOAT16, COLL_SUM, 0x3c00, 0x1000), 0x3c00); /* 1 + 2^-11 */
    ASSERT_EQ(k16(COLL_FLOAT16, COLL_SUM, 0x3c01, 0x1000), 0x3c02);
    ASSERT_EQ(k16(COLL_FLOAT16, COLL_SUM, 0x7bff, 0x5000), 0x7c00);  /* 65504 + 32: overflow */
    ASSERT_EQ(k16(COLL_BFLOAT16, COLL_SUM, 0x3f80, 0x3b80), 0x3f80); /* 1 + 2^-8 */
    ASSERT_EQ(k16(COLL_BFLOAT16, COLL_SUM, 0x3f81, 0x3b80), 0x3f82);
    ASSERT_EQ(k16(COLL_FLOAT16, COLL_PROD, 0x0001, 0x3800), 0x0000); /* 2^-25: tie to 0 */

    /* AVG reduces as SUM; unknown dtypes and ops leave memory alone; count 0 touches nothing. */
    coll_reduce3(COLL_FLOAT32, COLL_AVG, fd, fa, fb, 3);
    coll_reduce3(COLL_FLOAT32, COLL_SUM, fs, fa, fb, 3);
    ASSERT_TRUE(memcmp(fd, fs, sizeof(fd)) == 0);
    coll_reduce3(COLL_DTYPE_COUNT, COLL_SUM, &bad, &bad, &bad, 1);
    coll_reduce3(COLL_INT32, COLL_REDOP_COUNT, &bad, &bad, &bad, 1);
    coll_reduce3((coll_dtype_t)-1, COLL_SUM, &bad, &bad, &bad, 1);
    ASSERT_EQ(bad, 0xdeadbeef);
    coll_reduce3(COLL_FLOAT32, COLL_SUM, NULL, NULL, NULL, 0);
    test_checks += 8;
}

/* ---- division ---- */

static void check_div(coll_dtype_t dt, const void *in, const void *got, size_t i, int n)
{
    uint8_t want[8] = {0};

    if (dt == COLL_FLOAT32) {
        /* double division rounded once to float is the correctly rounded fp32 quotient */
        ((float *)want)[0] = (float)((double)((const float *)in)[i] / n);
    } else if (dt == COLL_FLOAT64) {
        ((double *)want)[0] = ((const double *)in)[i] / n;
    } else if (dt == COLL_FLOAT16 || dt == COLL_BFLOAT16) {
        float q = (float)ref_decode16(dt, ((const uint16_t *)in)[i]) / (float)n;

        ((uint16_t *)want)[0] = isnan(q) ? 0x7fff : ref_encode16(dt, q);
    } else {
        wide_t x = ref_load_int(dt, in, i);
        wide_t q = (x < 0 ? -x : x) / n; /* magnitude, then the sign: truncation toward 0 */

        ref_store_int(dt, want, 0, x < 0 ? -q : q);
    }
    if (!ref_same(dt, (const uint8_t *)got + i * test_dtype_size(dt), want, 0)) {
        uint64_t g = 0, w = 0, x = 0;

        memcpy(&g, (const uint8_t *)got + i * test_dtype_size(dt), test_dtype_size(dt));
        memcpy(&w, want, test_dtype_size(dt));
        memcpy(&x, (const uint8_t *)in + i * test_dtype_size(dt), test_dtype_size(dt));
        ASSERT_(0, "%s div by %d, i=%zu: 0x%llx gave 0x%llx want 0x%llx", dtype_names[dt], n, i,
                (unsigned long long)x, (unsigned long long)g, (unsigned long long)w);
    }
    test_checks++;
}

static void test_div(void)
{
    static const int divisors[] = {1, 2, 3, 7, 8, 1000};
    enum { N = 1000 };
    uint8_t in[N * 8], buf[N * 8];

    for (int dt = 0; dt < COLL_DTYPE_COUNT; dt++) {
        size_t bytes = N * test_dtype_size((coll_dtype_t)dt);

        for (size_t k = 0; k < TEST_LEN(divisors); k++) {
            gen_fill((coll_dtype_t)dt, in, N);
            memcpy(buf, in, bytes);
            coll_reduce_div((coll_dtype_t)dt, buf, N, divisors[k]);
            for (size_t i = 0; i < N; i++) {
                check_div((coll_dtype_t)dt, in, buf, i, divisors[k]);
            }
        }
        memcpy(buf, in, bytes); /* n < 1 leaves the buffer alone */
        coll_reduce_div((coll_dtype_t)dt, buf, N, 0);
        coll_reduce_div((coll_dtype_t)dt, buf, N, -2);
        ASSERT_TRUE(memcmp(buf, in, bytes) == 0);
    }
    {
        int8_t   i8[4]  = {-7, -128, 127, 5};
        int32_t  i32[3] = {-7, INT32_MIN, 7};
        int64_t  i64[2] = {-9, INT64_MIN};
        uint64_t u64[1] = {UINT64_MAX};
        float    f32[2] = {1.0f, -6.0f};
        uint16_t f16[2] = {0x3c00, 0x4200}; /* 1.0, 3.0 */

        coll_reduce_div(COLL_INT8, i8, 4, 2);
        coll_reduce_div(COLL_INT32, i32, 3, 2);
        coll_reduce_div(COLL_INT64, i64, 2, 4);
        coll_reduce_div(COLL_UINT64, u64, 1, 3);
        coll_reduce_div(COLL_FLOAT32, f32, 2, 3);
        coll_reduce_div(COLL_FLOAT16, f16, 2, 3);
        ASSERT_TRUE(i8[0] == -3 && i8[1] == -64 && i8[2] == 63 && i8[3] == 2);
        ASSERT_TRUE(i32[0] == -3 && i32[1] == INT32_MIN / 2 && i32[2] == 3);
        ASSERT_TRUE(i64[0] == -2 && i64[1] == INT64_MIN / 4);
        ASSERT_TRUE(u64[0] == UINT64_MAX / 3);
        ASSERT_TRUE(f32[0] == 1.0f / 3.0f && f32[1] == -2.0f);
        ASSERT_EQ(f16[0], 0x3555); /* 1/3 in fp16 */
        ASSERT_EQ(f16[1], 0x3c00);
        test_checks += 7;
    }
}

int main(void)
{
    test_kernels();
    test_semantics();
    test_roundtrip_all(COLL_FLOAT16);
    test_roundtrip_all(COLL_BFLOAT16);
    test_ties();
    test_narrow_sweep();
    test_div();
    printf("test_reduce: ok, %ld checks (%d dtypes x %zu ops x %zu sizes, aliasing, "
           "all fp16/bf16 patterns, ties, div)\n",
           test_checks, (int)COLL_DTYPE_COUNT, TEST_LEN(test_ops), TEST_LEN(test_sizes));
    return 0;
}

#endif /* __SIZEOF_INT128__ */
