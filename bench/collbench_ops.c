/* SPDX-License-Identifier: MIT */
/*
 * collbench_ops.c -- the six collectives as nccl-tests sees them (counts, bus factor, inputs,
 * expected outputs, the call), the dtype conversions, and the data patterns: small integers
 * chosen per (dtype, op, nranks) so that every partial result of any reduction order is
 * exactly representable, which makes the check exact for fp16 and bf16 too. Timing, output
 * and option parsing live in collbench.c.
 */
#include "collbench.h"

#include <math.h>
#include <string.h>

/* ---- dtypes ---- */

typedef struct {
    const char *name;      /* nccl-tests name */
    size_t      size;      /* bytes per element */
    int         is_signed; /* signed integer or floating point */
    long        sum_limit; /* integers up to this magnitude are exact, and sums stay below it */
    int         prod_twos; /* a product of up to this many factors 2 is exact */
    long        mv_range;  /* data-movement values: [-mv_off, mv_range - mv_off) */
    long        mv_off;
} cb_dtype_info_t;

static const cb_dtype_info_t cb_dtypes[COLL_DTYPE_COUNT] = {
    [COLL_INT8]     = {"int8", 1, 1, 127, 6, 201, 100},
    [COLL_UINT8]    = {"uint8", 1, 0, 255, 7, 251, 0},
    [COLL_INT32]    = {"int32", 4, 1, 1L << 30, 12, (1L << 21) + 1, 1L << 20},
    [COLL_UINT32]   = {"uint32", 4, 0, 1L << 30, 12, 1L << 21, 0},
    [COLL_INT64]    = {"int64", 8, 1, 1L << 30, 12, (1L << 21) + 1, 1L << 20},
    [COLL_UINT64]   = {"uint64", 8, 0, 1L << 30, 12, 1L << 21, 0},
    [COLL_FLOAT16]  = {"half", 2, 1, 2048, 12, 2049, 1024},
    [COLL_FLOAT32]  = {"float", 4, 1, 1L << 24, 12, (1L << 21) + 1, 1L << 20},
    [COLL_FLOAT64]  = {"double", 8, 1, 1L << 30, 12, (1L << 21) + 1, 1L << 20},
    [COLL_BFLOAT16] = {"bfloat16", 2, 1, 256, 12, 257, 128},
};

/* NCCL's alternative spellings (ncclChar, ncclInt, ncclFloat16, ...) plus common short ones. */
static const struct {
    const char  *alias;
    coll_dtype_t dtype;
} cb_dtype_aliases[] = {
    {"char", COLL_INT8},       {"int", COLL_INT32},       {"float16", COLL_FLOAT16},
    {"fp16", COLL_FLOAT16},    {"float32", COLL_FLOAT32}, {"fp32", COLL_FLOAT32},
    {"float64", COLL_FLOAT64}, {"fp64", COLL_FLOAT64},    {"bf16", COLL_BFLOAT16},
    {"bfloat", COLL_BFLOAT16},
};

static const char *const cb_op_names[COLL_REDOP_COUNT] = {
    [COLL_SUM] = "sum", [COLL_PROD] = "prod", [COLL_MAX] = "max",
    [COLL_MIN] = "min", [COLL_AVG] = "avg",
};

const char *cb_dtype_name(coll_dtype_t dtype)
{
    return ((unsigned)dtype < COLL_DTYPE_COUNT) ? cb_dtypes[dtype].name : "invalid";
}

size_t cb_dtype_size(coll_dtype_t dtype)
{
    return ((unsigned)dtype < COLL_DTYPE_COUNT) ? cb_dtypes[dtype].size : 0;
}

int cb_dtype_parse(const char *name)
{
    size_t i;

    for (i = 0; i < COLL_DTYPE_COUNT; i++) {
        if (strcmp(name, cb_dtypes[i].name) == 0) {
            return (int)i;
        }
    }
    for (i = 0; i < sizeof(cb_dtype_aliases) / sizeof(cb_dtype_aliases[0]); i++) {
        if (strcmp(name, cb_dtype_aliases[i].alias) == 0) {
            return (int)cb_dtype_aliases[i].dtype;
        }
    }
    return -1;
}

const char *cb_op_name(coll_redop_t op)
{
    return ((unsigned)op < COLL_REDOP_COUNT) ? cb_op_names[op] : "invalid";
}

int cb_op_parse(const char *name)
{
    int i;

    for (i = 0; i < COLL_REDOP_COUNT; i++) {
        if (strcmp(name, cb_op_names[i]) == 0) {
            return i;
        }
    }
    return -1;
}

/* ---- element conversions (round to nearest even, like the library's kernels) ---- */

static uint16_t cb_f32_to_f16(float f)
{
    uint32_t x, sign, m, hm, rem, shift;
    int32_t  e;

    memcpy(&x, &f, sizeof(x));
    sign = (x >> 16) & 0x8000u;
    m    = x & 0x7fffffu;
    if (((x >> 23) & 0xffu) == 0xffu) {
        return (uint16_t)(sign | 0x7c00u | (m != 0 ? 0x200u : 0));
    }
    e = (int32_t)((x >> 23) & 0xffu) - 127 + 15;
    if (e >= 31) {
        return (uint16_t)(sign | 0x7c00u);
    }
    if (e <= 0) { /* subnormal half, or zero */
        if (e < -10) {
            return (uint16_t)sign;
        }
        m |= 0x800000u;
        shift = (uint32_t)(14 - e);
        hm    = m >> shift;
        rem   = m & ((1u << shift) - 1);
        if (rem > (1u << (shift - 1)) || (rem == (1u << (shift - 1)) && (hm & 1u) != 0)) {
            hm++;
        }
        return (uint16_t)(sign | hm);
    }
    hm  = sign | ((uint32_t)e << 10) | (m >> 13);
    rem = m & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (hm & 1u) != 0)) {
        hm++; /* a carry into the exponent is still the right answer */
    }
    return (uint16_t)hm;
}

static float cb_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e    = (h >> 10) & 0x1fu;
    uint32_t m    = h & 0x3ffu;
    uint32_t x;
    float    f;

    if (e == 0) {
        f = (float)m * 0x1p-24f;
        return sign != 0 ? -f : f;
    }
    x = sign | (e == 31 ? 0x7f800000u | (m << 13) : ((e + 112) << 23) | (m << 13));
    memcpy(&f, &x, sizeof(f));
    return f;
}

static uint16_t cb_f32_to_bf16(float f)
{
    uint32_t x;

    memcpy(&x, &f, sizeof(x));
    if ((x & 0x7fffffffu) > 0x7f800000u) {
        return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
    }
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

static float cb_bf16_to_f32(uint16_t b)
{
    uint32_t x = (uint32_t)b << 16;
    float    f;

    memcpy(&f, &x, sizeof(f));
    return f;
}

void cb_store(void *buf, size_t i, coll_dtype_t dtype, double v)
{
    switch (dtype) {
    case COLL_INT8:
        ((int8_t *)buf)[i] = (int8_t)v;
        break;
    case COLL_UINT8:
        ((uint8_t *)buf)[i] = (uint8_t)v;
        break;
    case COLL_INT32:
        ((int32_t *)buf)[i] = (int32_t)v;
        break;
    case COLL_UINT32:
        ((uint32_t *)buf)[i] = (uint32_t)v;
        break;
    case COLL_INT64:
        ((int64_t *)buf)[i] = (int64_t)v;
        break;
    case COLL_UINT64:
        ((uint64_t *)buf)[i] = (uint64_t)v;
        break;
    case COLL_FLOAT16:
        ((uint16_t *)buf)[i] = cb_f32_to_f16((float)v);
        break;
    case COLL_FLOAT32:
        ((float *)buf)[i] = (float)v;
        break;
    case COLL_FLOAT64:
        ((double *)buf)[i] = v;
        break;
    case COLL_BFLOAT16:
        ((uint16_t *)buf)[i] = cb_f32_to_bf16((float)v);
        break;
    default:
        break;
    }
}

double cb_load(const void *buf, size_t i, coll_dtype_t dtype)
{
    switch (dtype) {
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
        return cb_f16_to_f32(((const uint16_t *)buf)[i]);
    case COLL_FLOAT32:
        return ((const float *)buf)[i];
    case COLL_FLOAT64:
        return ((const double *)buf)[i];
    case COLL_BFLOAT16:
        return cb_bf16_to_f32(((const uint16_t *)buf)[i]);
    default:
        return NAN;
    }
}

/* ---- patterns ----
 * Reductions: rank r holds value(r, j) at index i, j = (i + salt) mod CB_PERIOD, so the
 * expected result depends on j only and is computed once per test into a table.
 * sum:     magnitudes 1..amp (signs mixed where the dtype has them) with nranks * amp below
 *          the dtype's exact-integer limit, so every partial sum in any order is exact; when
 *          even amp = 1 is too much, only every stride-th rank holds a 1 (sparse mode).
 * avg:     ranks 2k and 2k+1 hold c + a and c - a, an odd last rank holds c: the sum is
 *          exactly nranks * c, so the result c is exact however the library divides.
 * prod:    factors 1 and 2 (and -1 where signed), at most prod_twos factors 2 per element.
 * max/min: small values; at each index one rank (j mod nranks) holds the extreme.
 * Data movement (allgather, broadcast, alltoall): a hash of (rank, index, dtype) reduced to
 * the dtype's exact-integer range, so a misplaced block is almost surely seen. */

static long cb_ceil_div(long a, long b)
{
    return (a + b - 1) / b;
}

static double cb_avg_value(const cb_test_t *t, long r, long j)
{
    const cb_pattern_t *p = &t->pat;
    long                c, a, k = r / 2;

    if (p->crange == 0) { /* sparse mode: mean 0, a few pairs hold +1 and -1 */
        c = 0;
        a = (p->amax > 0 && (k + j) % p->stride == 0) ? 1 : 0;
    } else {
        c = p->cmin + j % p->crange;
        a = (k + j) % (p->amax + 1);
    }
    if (r == t->nranks - 1 && t->nranks % 2 == 1) {
        return (double)c;
    }
    return (double)(r % 2 == 0 ? c + a : c - a);
}

static double cb_red_value(const cb_test_t *t, long r, long j)
{
    const cb_pattern_t *p   = &t->pat;
    int                 sgn = cb_dtypes[t->dtype].is_signed;
    long                v;

    switch (t->op) {
    case COLL_SUM:
        v = p->amp > 0 ? 1 + (r + 3 * j) % p->amp : ((r + j) % p->stride == 0 ? 1 : 0);
        return (double)((sgn && (r + j) % 3 == 2) ? -v : v);
    case COLL_PROD:
        v = ((r + j) % p->stride == 0) ? 2 : 1;
        return (double)((sgn && (2 * r + j) % 7 == 3) ? -v : v);
    case COLL_AVG:
        return cb_avg_value(t, r, j);
    default: /* max, min: rank j mod nranks holds the extreme, so every rank's data shows */
        v = (5 * r + 3 * j) % 11;
        if (r == j % t->nranks) {
            v = t->op == COLL_MAX ? 11 + j % 3 : -1 - j % 3;
        }
        return (double)(sgn ? v - 5 : v + 3);
    }
}

static void cb_pattern_params(cb_test_t *t)
{
    const cb_dtype_info_t *d   = &cb_dtypes[t->dtype];
    cb_pattern_t          *p   = &t->pat;
    long                   n   = t->nranks;
    long                   lim = d->sum_limit;
    long                   b, cmax;

    memset(p, 0, sizeof(*p));
    p->stride = 1;
    if (t->op == COLL_SUM) {
        p->amp = (int)(lim / n < 7 ? lim / n : 7);
        if (p->amp == 0) {
            p->stride = (int)cb_ceil_div(n, lim);
        }
    } else if (t->op == COLL_PROD) {
        p->stride = (int)cb_ceil_div(n, d->prod_twos);
        p->stride = p->stride < 2 ? 2 : p->stride;
    } else if (t->op == COLL_AVG) {
        b = lim / n < 8 ? lim / n : 8;
        if (b == 0) { /* sparse; unsigned types degrade to all zeros */
            p->amax   = d->is_signed ? 1 : 0;
            p->stride = (int)(cb_ceil_div(n, lim - 1) + 1);
        } else if (d->is_signed) {
            p->amax   = (int)(b / 2);
            cmax      = b - p->amax;
            p->cmin   = (int)-cmax;
            p->crange = (int)(2 * cmax + 1);
        } else {
            p->amax   = (int)(b / 3);
            p->cmin   = p->amax;
            p->crange = (int)(b - 2 * p->amax + 1);
        }
    }
}

void cb_pattern_init(cb_test_t *t, double *table)
{
    long   j, r;
    double acc, v;

    t->salt = (uint64_t)t->dtype * 37u + (uint64_t)t->op * 11u;
    cb_pattern_params(t);
    for (j = 0; j < CB_PERIOD; j++) {
        acc = cb_red_value(t, 0, j);
        for (r = 1; r < t->nranks; r++) {
            v = cb_red_value(t, r, j);
            switch (t->op) {
            case COLL_PROD:
                acc *= v;
                break;
            case COLL_MAX:
                acc = v > acc ? v : acc;
                break;
            case COLL_MIN:
                acc = v < acc ? v : acc;
                break;
            default:
                acc += v;
                break;
            }
        }
        /* The sum is a multiple of nranks by construction; trunc() is what integer avg does. */
        table[j] = t->op == COLL_AVG ? trunc(acc / (double)t->nranks) : acc;
    }
    t->table = table;
}

double cb_red_input(const cb_test_t *t, int rank, size_t i)
{
    return cb_red_value(t, rank, (long)((i + t->salt) % CB_PERIOD));
}

static double cb_red_expected(const cb_test_t *t, size_t i)
{
    return t->table[(i + t->salt) % CB_PERIOD];
}

static double cb_move_input(const cb_test_t *t, int rank, size_t i)
{
    const cb_dtype_info_t *d = &cb_dtypes[t->dtype];
    uint64_t               x = ((uint64_t)rank << 40) ^ (uint64_t)i ^ (t->salt << 56);

    /* splitmix64 finaliser: neighbouring indices and ranks get unrelated values */
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return (double)(x % (uint64_t)d->mv_range) - (double)d->mv_off;
}

/* ---- init and check, shared by all collectives ---- */

static size_t cb_recv_used(const cb_test_t *t)
{
    size_t n = t->c.recv_count;

    if (t->in_place && t->c.send_count > n) {
        n = t->c.send_count; /* the single buffer holds the larger side */
    }
    return n * t->esize;
}

void cb_init_data(cb_test_t *t, const cb_coll_t *coll)
{
    size_t used = cb_recv_used(t);
    size_t i;

    memset(t->rbuf - CB_GUARD_BYTES, CB_GUARD_BYTE, CB_GUARD_BYTES);
    memset(t->rbuf, CB_POISON_BYTE, used);
    memset(t->rbuf + used, CB_GUARD_BYTE, CB_GUARD_BYTES);
    if (!t->in_place) {
        memset(t->sbuf - CB_GUARD_BYTES, CB_GUARD_BYTE, CB_GUARD_BYTES);
        memset(t->sbuf + t->c.send_count * t->esize, CB_GUARD_BYTE, CB_GUARD_BYTES);
    }
    for (i = 0; i < t->c.send_count; i++) {
        cb_store(t->send, i, t->dtype, coll->input(t, t->rank, i));
    }
}

static uint64_t cb_count_changed(const char *p, size_t n, int byte)
{
    uint64_t bad = 0;
    size_t   i;

    for (i = 0; i < n; i++) {
        bad += ((unsigned char)p[i] != (unsigned char)byte);
    }
    return bad;
}

void cb_check(const cb_test_t *t, const cb_coll_t *coll, uint64_t *wrong_p, uint64_t *oob_p)
{
    const char *recv  = t->recv;
    uint64_t    wrong = 0, oob = 0;
    size_t      used = cb_recv_used(t);
    size_t      i;
    double      v;

    oob += cb_count_changed(t->rbuf - CB_GUARD_BYTES, CB_GUARD_BYTES, CB_GUARD_BYTE);
    oob += cb_count_changed(t->rbuf + used, CB_GUARD_BYTES, CB_GUARD_BYTE);
    if (!t->in_place) {
        oob += cb_count_changed(t->sbuf - CB_GUARD_BYTES, CB_GUARD_BYTES, CB_GUARD_BYTE);
        oob +=
            cb_count_changed(t->sbuf + t->c.send_count * t->esize, CB_GUARD_BYTES, CB_GUARD_BYTE);
        for (i = 0; i < t->c.send_count; i++) { /* sendbuf is const for the library */
            oob += (cb_load(t->sbuf, i, t->dtype) != coll->input(t, t->rank, i));
        }
    }
    for (i = 0; i < t->c.recv_count; i++) {
        if (coll->expect(t, i, &v) == CB_EXPECT_UNTOUCHED) {
            wrong += (cb_count_changed(recv + i * t->esize, t->esize, CB_POISON_BYTE) != 0);
        } else {
            wrong += (cb_load(recv, i, t->dtype) != v); /* NaN counts as wrong */
        }
    }
    *wrong_p = wrong;
    *oob_p   = oob;
}

/* ---- counts and bus factors (nccl-tests' rules) ---- */

static void cb_counts_same(size_t count, size_t esize, int nranks, cb_counts_t *c_p)
{
    memset(c_p, 0, sizeof(*c_p));
    c_p->count      = count;
    c_p->send_count = count;
    c_p->recv_count = count;
    c_p->bw_bytes   = count * esize;
}

/* Per-rank count: count / nranks rounded down to a multiple of 16 bytes. */
static size_t cb_per_rank(size_t count, size_t esize, int nranks)
{
    size_t per16 = esize >= 16 ? 1 : 16 / esize;

    return (count / (size_t)nranks) & ~(per16 - 1);
}

static void cb_counts_rs(size_t count, size_t esize, int nranks, cb_counts_t *c_p)
{
    size_t base = cb_per_rank(count, esize, nranks);

    memset(c_p, 0, sizeof(*c_p));
    c_p->count       = base;
    c_p->send_count  = base * (size_t)nranks;
    c_p->recv_count  = base;
    c_p->recv_ip_off = base;
    c_p->bw_bytes    = base * esize * (size_t)nranks;
}

static void cb_counts_ag(size_t count, size_t esize, int nranks, cb_counts_t *c_p)
{
    size_t base = cb_per_rank(count, esize, nranks);

    memset(c_p, 0, sizeof(*c_p));
    c_p->count       = base;
    c_p->send_count  = base;
    c_p->recv_count  = base * (size_t)nranks;
    c_p->send_ip_off = base;
    c_p->bw_bytes    = base * esize * (size_t)nranks;
}

static void cb_counts_a2a(size_t count, size_t esize, int nranks, cb_counts_t *c_p)
{
    size_t base = cb_per_rank(count, esize, nranks);

    memset(c_p, 0, sizeof(*c_p));
    c_p->count      = base;
    c_p->send_count = base * (size_t)nranks;
    c_p->recv_count = base * (size_t)nranks;
    c_p->bw_bytes   = base * esize * (size_t)nranks;
}

/* Allreduce moves 2(n-1)/n of the data over each rank's link (reduce-scatter + allgather). */
static double cb_factor_allreduce(int n)
{
    return 2.0 * (double)(n - 1) / (double)n;
}

/* Reduce-scatter, allgather and alltoall each move (n-1)/n of the data per link. */
static double cb_factor_nm1(int n)
{
    return (double)(n - 1) / (double)n;
}

/* Broadcast and reduce are bound by the root's link: factor 1. */
static double cb_factor_one(int n)
{
    return 1.0;
}

/* ---- expected outputs ---- */

static cb_expect_t cb_expect_allreduce(const cb_test_t *t, size_t i, double *v_p)
{
    *v_p = cb_red_expected(t, i);
    return CB_EXPECT_VALUE;
}

static cb_expect_t cb_expect_rs(const cb_test_t *t, size_t i, double *v_p)
{
    *v_p = cb_red_expected(t, (size_t)t->rank * t->c.count + i);
    return CB_EXPECT_VALUE;
}

static cb_expect_t cb_expect_reduce(const cb_test_t *t, size_t i, double *v_p)
{
    if (t->rank == t->root) {
        *v_p = cb_red_expected(t, i);
        return CB_EXPECT_VALUE;
    }
    if (!t->in_place) {
        return CB_EXPECT_UNTOUCHED; /* recvbuf is written only on the root */
    }
    *v_p = cb_red_input(t, t->rank, i);
    return CB_EXPECT_VALUE;
}

static cb_expect_t cb_expect_allgather(const cb_test_t *t, size_t i, double *v_p)
{
    *v_p = cb_move_input(t, (int)(i / t->c.count), i % t->c.count);
    return CB_EXPECT_VALUE;
}

static cb_expect_t cb_expect_broadcast(const cb_test_t *t, size_t i, double *v_p)
{
    *v_p = cb_move_input(t, t->root, i);
    return CB_EXPECT_VALUE;
}

static cb_expect_t cb_expect_alltoall(const cb_test_t *t, size_t i, double *v_p)
{
    size_t from = i / t->c.count;

    *v_p = cb_move_input(t, (int)from, (size_t)t->rank * t->c.count + i % t->c.count);
    return CB_EXPECT_VALUE;
}

/* ---- calls ---- */

static coll_result_t cb_run_allreduce(const cb_test_t *t, coll_comm_t *comm)
{
    return coll_allreduce(t->send, t->recv, t->c.count, t->dtype, t->op, comm);
}

static coll_result_t cb_run_rs(const cb_test_t *t, coll_comm_t *comm)
{
    return coll_reduce_scatter(t->send, t->recv, t->c.count, t->dtype, t->op, comm);
}

static coll_result_t cb_run_allgather(const cb_test_t *t, coll_comm_t *comm)
{
    return coll_allgather(t->send, t->recv, t->c.count, t->dtype, comm);
}

static coll_result_t cb_run_broadcast(const cb_test_t *t, coll_comm_t *comm)
{
    return coll_broadcast(t->send, t->recv, t->c.count, t->dtype, t->root, comm);
}

static coll_result_t cb_run_reduce(const cb_test_t *t, coll_comm_t *comm)
{
    return coll_reduce(t->send, t->recv, t->c.count, t->dtype, t->op, t->root, comm);
}

static coll_result_t cb_run_alltoall(const cb_test_t *t, coll_comm_t *comm)
{
    return coll_alltoall(t->send, t->recv, t->c.count, t->dtype, comm);
}

/* ---- the table ---- */

static coll_result_t cb_srun_allreduce(const cb_test_t *t, coll_comm_t *comm)
{
    return coll_allreduce_stream(t->send, t->recv, t->c.count, t->dtype, t->op, comm, t->stream);
}

static coll_result_t cb_srun_rs(const cb_test_t *t, coll_comm_t *comm)
{
    return coll_reduce_scatter_stream(t->send, t->recv, t->c.count, t->dtype, t->op, comm,
                                      t->stream);
}

static coll_result_t cb_srun_allgather(const cb_test_t *t, coll_comm_t *comm)
{
    return coll_allgather_stream(t->send, t->recv, t->c.count, t->dtype, comm, t->stream);
}

static coll_result_t cb_srun_broadcast(const cb_test_t *t, coll_comm_t *comm)
{
    return coll_broadcast_stream(t->send, t->recv, t->c.count, t->dtype, t->root, comm, t->stream);
}

static coll_result_t cb_srun_reduce(const cb_test_t *t, coll_comm_t *comm)
{
    return coll_reduce_stream(t->send, t->recv, t->c.count, t->dtype, t->op, t->root, comm,
                              t->stream);
}

static coll_result_t cb_srun_alltoall(const cb_test_t *t, coll_comm_t *comm)
{
    return coll_alltoall_stream(t->send, t->recv, t->c.count, t->dtype, comm, t->stream);
}

const cb_coll_t cb_colls[] = {
    {.name        = "allreduce",
     .nccl_name   = "all_reduce_perf",
     .api_name    = "coll_allreduce",
     .has_op      = 1,
     .rooted      = 0,
     .has_inplace = 1,
     .get_counts  = cb_counts_same,
     .bus_factor  = cb_factor_allreduce,
     .input       = cb_red_input,
     .expect      = cb_expect_allreduce,
     .run         = cb_run_allreduce,
     .run_stream  = cb_srun_allreduce},
    {.name        = "reduce_scatter",
     .nccl_name   = "reduce_scatter_perf",
     .api_name    = "coll_reduce_scatter",
     .has_op      = 1,
     .rooted      = 0,
     .has_inplace = 1,
     .get_counts  = cb_counts_rs,
     .bus_factor  = cb_factor_nm1,
     .input       = cb_red_input,
     .expect      = cb_expect_rs,
     .run         = cb_run_rs,
     .run_stream  = cb_srun_rs},
    {.name        = "allgather",
     .nccl_name   = "all_gather_perf",
     .api_name    = "coll_allgather",
     .has_op      = 0,
     .rooted      = 0,
     .has_inplace = 1,
     .get_counts  = cb_counts_ag,
     .bus_factor  = cb_factor_nm1,
     .input       = cb_move_input,
     .expect      = cb_expect_allgather,
     .run         = cb_run_allgather,
     .run_stream  = cb_srun_allgather},
    {.name        = "broadcast",
     .nccl_name   = "broadcast_perf",
     .api_name    = "coll_broadcast",
     .has_op      = 0,
     .rooted      = 1,
     .has_inplace = 1,
     .get_counts  = cb_counts_same,
     .bus_factor  = cb_factor_one,
     .input       = cb_move_input,
     .expect      = cb_expect_broadcast,
     .run         = cb_run_broadcast,
     .run_stream  = cb_srun_broadcast},
    {.name        = "reduce",
     .nccl_name   = "reduce_perf",
     .api_name    = "coll_reduce",
     .has_op      = 1,
     .rooted      = 1,
     .has_inplace = 1,
     .get_counts  = cb_counts_same,
     .bus_factor  = cb_factor_one,
     .input       = cb_red_input,
     .expect      = cb_expect_reduce,
     .run         = cb_run_reduce,
     .run_stream  = cb_srun_reduce},
    {.name        = "alltoall",
     .nccl_name   = "alltoall_perf",
     .api_name    = "coll_alltoall",
     .has_op      = 0,
     .rooted      = 0,
     .has_inplace = 0, /* libcoll has no in-place alltoall */
     .get_counts  = cb_counts_a2a,
     .bus_factor  = cb_factor_nm1,
     .input       = cb_move_input,
     .expect      = cb_expect_alltoall,
     .run         = cb_run_alltoall,
     .run_stream  = cb_srun_alltoall},
};

const int cb_ncolls = (int)(sizeof(cb_colls) / sizeof(cb_colls[0]));

/* Matches "allreduce", "all_reduce_perf", "all_reduce" and names that start with the nccl-tests
 * binary name (e.g. "all_reduce_perf_mpi"), so a symlink of any of those names works. */
const cb_coll_t *cb_coll_find(const char *name)
{
    size_t len;
    int    i;

    for (i = 0; i < cb_ncolls; i++) {
        len = strlen(cb_colls[i].nccl_name) - strlen("_perf");
        if (strcmp(name, cb_colls[i].name) == 0 ||
            strncmp(name, cb_colls[i].nccl_name, len + strlen("_perf")) == 0 ||
            (strlen(name) == len && strncmp(name, cb_colls[i].nccl_name, len) == 0)) {
            return &cb_colls[i];
        }
    }
    return NULL;
}
