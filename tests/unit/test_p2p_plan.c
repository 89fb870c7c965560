/* SPDX-License-Identifier: MIT */
/*
 * The p2p path's plan (src/cuda/p2p_plan.c) on host memory: n simulated ranks, each with its
 * buffers and a window, run the plan's phases in lockstep (every rank's phase k, then the
 * exchange, then phase k + 1), with data movers that copy and reduce on the host. Every
 * collective, in and out of place, 2-5 ranks, four types, SUM/MIN/AVG, counts from 1 to 4099
 * and windows from 64 bytes (many rounds) to 1 MiB (one round), on fresh random data, against
 * a reference computed with the same reduction. Each case runs twice, the ranks of a phase in
 * ascending and in descending order: a phase that read what another rank writes in the same
 * phase (a missing exchange) gives a different result in one order. Guard bytes past every
 * output and window must stay untouched. Built with and without CUDA.
 */
#include "coll_test.h"
#include "cuda/p2p_plan.h"
#include "reduce/reduce.h"

#include <stdint.h>
#include <string.h>

#define MAXN   5
#define GUARD  64
#define POISON 0xa5

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}

/* movers on host memory; reduce in index order into a temporary, then dst (dst may alias) */
static int io_copy(void *ctx, void *dst, const void *src, size_t len)
{
    (void)ctx;
    memmove(dst, src, len);
    return 0;
}

static int io_reduce(void *ctx, coll_dtype_t dt, coll_redop_t op, void *dst,
                     const void *const *srcs, int nsrc, size_t cnt)
{
    size_t bytes = cnt * coll_dtype_size(dt);
    void  *t     = malloc(bytes);
    (void)ctx;
    memcpy(t, srcs[0], bytes);
    for (int s = 1; s < nsrc; s++) {
        coll_reduce3(dt, op, t, t, srcs[s], cnt);
    }
    memcpy(dst, t, bytes);
    free(t);
    return 0;
}

static int io_div(void *ctx, coll_dtype_t dt, void *buf, size_t cnt, int divisor)
{
    (void)ctx;
    coll_reduce_div(dt, buf, cnt, divisor);
    return 0;
}

static const coll_p2p_io_t host_io = {NULL, io_copy, io_reduce, io_div};

static void fill(coll_dtype_t dt, void *p, size_t cnt)
{
    for (size_t i = 0; i < cnt; i++) {
        float v = (float)((int)(rng() % 61) - 30) / 4.0f;
        switch (dt) {
        case COLL_FLOAT32:
            ((float *)p)[i] = v;
            break;
        case COLL_FLOAT64:
            ((double *)p)[i] = (double)v / 3.0;
            break;
        case COLL_BFLOAT16:
            ((uint16_t *)p)[i] = coll_float_to_bf16(v / 3.0f);
            break;
        default:
            ((int32_t *)p)[i] = (int32_t)rng();
            break;
        }
    }
}

typedef struct {
    coll_args_t a;
    int         n;
    size_t      half;
    int         reverse;
} plan_case_t;

static void sizes(const coll_args_t *a, int n, size_t *in, size_t *out)
{
    size_t c = a->count;
    *in = *out = c;
    if (a->coll == COLL_OP_REDUCE_SCATTER || a->coll == COLL_OP_ALLTOALL) {
        *in = c * (size_t)n;
    }
    if (a->coll == COLL_OP_ALLGATHER || a->coll == COLL_OP_ALLTOALL) {
        *out = c * (size_t)n;
    }
}

/* Run one case; 0 when every output (and guard) is right. */
static int run_case(const plan_case_t *pc)
{
    const coll_args_t *a = &pc->a;
    int                n = pc->n, bad = 0;
    size_t             es = coll_dtype_size(a->dtype), in_n, out_n, c = a->count;
    char              *x[MAXN], *buf[MAXN], *send[MAXN], *recv[MAXN], *ref[MAXN];
    void              *win[MAXN];
    coll_p2p_plan_t    plan[MAXN];

    sizes(a, n, &in_n, &out_n);
    size_t big = (in_n > out_n ? in_n : out_n) * es;
    for (int r = 0; r < n; r++) { /* inputs, then the buffers as the call passes them */
        x[r] = malloc(in_n * es);
        fill(a->dtype, x[r], in_n);
        buf[r] = malloc(2 * big + GUARD);
        memset(buf[r], POISON, 2 * big + GUARD);
        win[r] = malloc(2 * pc->half + GUARD);
        memset(win[r], POISON, 2 * pc->half + GUARD);
        ref[r] = malloc(out_n * es);
        memset(ref[r], POISON, out_n * es);
        if (!a->in_place) {
            send[r] = buf[r];
            recv[r] = buf[r] + big;
        } else if (a->coll == COLL_OP_REDUCE_SCATTER) {
            send[r] = buf[r];
            recv[r] = buf[r] + (size_t)r * c * es;
        } else if (a->coll == COLL_OP_ALLGATHER) {
            recv[r] = buf[r];
            send[r] = buf[r] + (size_t)r * c * es;
        } else {
            send[r] = recv[r] = buf[r];
        }
        memcpy(send[r], x[r], in_n * es);
    }
    /* the reference */
    for (int r = 0; r < n; r++) {
        const void *srcs[MAXN];
        switch (a->coll) {
        case COLL_OP_ALLREDUCE:
        case COLL_OP_REDUCE:
        case COLL_OP_REDUCE_SCATTER: {
            size_t off = a->coll == COLL_OP_REDUCE_SCATTER ? (size_t)r * c * es : 0;
            for (int q = 0; q < n; q++) {
                srcs[q] = x[q] + off;
            }
            io_reduce(NULL, a->dtype, a->op == COLL_AVG ? COLL_SUM : a->op, ref[r], srcs, n, c);
            if (a->op == COLL_AVG) {
                io_div(NULL, a->dtype, ref[r], c, n);
            }
            break;
        }
        case COLL_OP_ALLGATHER:
            for (int q = 0; q < n; q++) {
                memcpy(ref[r] + (size_t)q * c * es, x[q], c * es);
            }
            break;
        case COLL_OP_BROADCAST:
            memcpy(ref[r], x[a->root], c * es);
            break;
        default: /* all-to-all */
            for (int q = 0; q < n; q++) {
                memcpy(ref[r] + (size_t)q * c * es, x[q] + (size_t)r * c * es, c * es);
            }
            break;
        }
    }
    /* the plan, in lockstep */
    for (int r = 0; r < n; r++) {
        coll_p2p_plan(&plan[r], a, n, r, pc->half);
        if (plan[r].nx != plan[0].nx) {
            fprintf(stderr, "rank %d plans %d exchanges, rank 0 %d\n", r, plan[r].nx, plan[0].nx);
            bad = 1;
        }
    }
    for (int k = 0; k < plan[0].nx && !bad; k++) {
        for (int i = 0; i < n; i++) {
            int         r    = pc->reverse ? n - 1 - i : i;
            const char *what = NULL;
            int rc = coll_p2p_plan_phase(&plan[r], k, send[r], recv[r], win, &host_io, &what);
            if (rc != 0) {
                fprintf(stderr, "rank %d phase %d: %s failed\n", r, k, what);
                bad = 1;
            }
        }
    }
    for (int r = 0; r < n && !bad; r++) {
        if (a->coll == COLL_OP_REDUCE && r != a->root) {
            continue;
        }
        if (memcmp(recv[r], ref[r], out_n * es) != 0) {
            size_t i = 0;
            while (memcmp(recv[r] + i * es, ref[r] + i * es, es) == 0) {
                i++;
            }
            fprintf(stderr, "rank %d: element %zu of %zu differs from the reference\n", r, i,
                    out_n);
            bad = 1;
        }
        for (int g = 0; g < GUARD; g++) {
            if ((unsigned char)buf[r][2 * big + g] != POISON ||
                ((unsigned char *)win[r])[2 * pc->half + g] != POISON) {
                fprintf(stderr, "rank %d: a guard byte past the buffers or window changed\n", r);
                bad = 1;
                break;
            }
        }
        if (!a->in_place && memcmp(send[r], x[r], in_n * es) != 0) {
            fprintf(stderr, "rank %d: the input changed\n", r);
            bad = 1;
        }
    }
    if (bad) {
        fprintf(stderr,
                "  case: %s count %zu %s op %d root %d n %d in_place %d window 2 x %zu, "
                "%d rounds, order %s\n",
                coll_op_name(a->coll), c, coll_dtype_name(a->dtype), (int)a->op, a->root, n,
                a->in_place, pc->half, plan[0].rounds, pc->reverse ? "descending" : "ascending");
    }
    for (int r = 0; r < n; r++) {
        free(x[r]);
        free(buf[r]);
        free(win[r]);
        free(ref[r]);
    }
    return bad;
}

int main(void)
{
    static const coll_op_t colls[]  = {COLL_OP_ALLREDUCE, COLL_OP_REDUCE_SCATTER, COLL_OP_ALLGATHER,
                                       COLL_OP_BROADCAST, COLL_OP_REDUCE,         COLL_OP_ALLTOALL};
    static const coll_dtype_t dts[] = {COLL_FLOAT32, COLL_INT32, COLL_BFLOAT16, COLL_FLOAT64};
    static const coll_redop_t ops[] = {COLL_SUM, COLL_MIN, COLL_AVG};
    static const size_t       counts[] = {1, 3, 64, 1000, 4099};
    static const size_t       halves[] = {64, 1000, 1 << 20};
    int                       cases = 0, failed = 0, multi_round = 0, staged = 0;

    for (size_t ci = 0; ci < sizeof(colls) / sizeof(colls[0]); ci++) {
        int red = colls[ci] == COLL_OP_ALLREDUCE || colls[ci] == COLL_OP_REDUCE_SCATTER ||
                  colls[ci] == COLL_OP_REDUCE;
        for (int n = 2; n <= MAXN; n++) {
            for (size_t di = 0; di < sizeof(dts) / sizeof(dts[0]); di++) {
                for (size_t oi = 0; oi < (red ? sizeof(ops) / sizeof(ops[0]) : 1); oi++) {
                    for (size_t ki = 0; ki < sizeof(counts) / sizeof(counts[0]); ki++) {
                        for (size_t hi = 0; hi < sizeof(halves) / sizeof(halves[0]); hi++) {
                            for (int ip = 0; ip < (colls[ci] == COLL_OP_ALLTOALL ? 1 : 2); ip++) {
                                plan_case_t pc;
                                memset(&pc, 0, sizeof(pc));
                                pc.a.coll     = colls[ci];
                                pc.a.count    = counts[ki];
                                pc.a.dtype    = dts[di];
                                pc.a.op       = ops[oi];
                                pc.a.root     = (int)((ki + hi) % (size_t)n);
                                pc.a.in_place = ip;
                                pc.n          = n;
                                pc.half       = halves[hi];
                                if (!coll_p2p_plan_fits(&pc.a, n, pc.half)) {
                                    /* only by the rounds cap: such calls are staged */
                                    coll_p2p_plan_t big;
                                    coll_p2p_plan(&big, &pc.a, n, 0, pc.half);
                                    ASSERT_TRUE(big.rounds > COLL_P2P_MAX_ROUNDS);
                                    staged++;
                                    continue;
                                }
                                coll_p2p_plan_t probe;
                                coll_p2p_plan(&probe, &pc.a, n, 0, pc.half);
                                multi_round += probe.rounds > 1;
                                for (pc.reverse = 0; pc.reverse < 2; pc.reverse++) {
                                    failed += run_case(&pc);
                                    cases++;
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    /* a window too small for one element of every block is refused */
    coll_args_t rs = {.coll = COLL_OP_REDUCE_SCATTER, .count = 10, .dtype = COLL_FLOAT64};
    ASSERT_TRUE(!coll_p2p_plan_fits(&rs, 5, 16));
    ASSERT_TRUE(coll_p2p_plan_fits(&rs, 5, 20));
    /* at most COLL_P2P_MAX_ROUNDS rounds: 16 floats a round in a 64-byte half */
    coll_args_t ar = {.coll = COLL_OP_ALLREDUCE, .dtype = COLL_FLOAT32};
    ar.count       = (size_t)COLL_P2P_MAX_ROUNDS * 16;
    ASSERT_TRUE(coll_p2p_plan_fits(&ar, 2, 64));
    ar.count++;
    ASSERT_TRUE(!coll_p2p_plan_fits(&ar, 2, 64));
    printf("p2p plan: %d cases (%d with several rounds), %d failed; %d over the rounds cap\n",
           cases, multi_round, failed, staged);
    ASSERT_EQ(failed, 0);
    ASSERT_TRUE(multi_round > cases / 8);
    return 0;
}
