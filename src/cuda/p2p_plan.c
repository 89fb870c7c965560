/* SPDX-License-Identifier: MIT */
/*
 * The p2p path's plan: rounds, phases and what each phase moves (see p2p_plan.h). Window
 * layout of a round: reduce-scatter and all-to-all keep block b's part in slot b (cj elements
 * each); all-gather, broadcast and reduce keep the round's input at the start; all-reduce keeps
 * the round's input in the first half and each rank's reduced slice at its place in the second.
 * Every slice of an all-reduce is reduced once, by its owner, in rank order, so every rank
 * holds bit-identical results.
 */
#include "cuda/p2p_plan.h"

#define P2P_ALIGN 256 /* all-reduce slices start at multiples of this many bytes where they can */

/* Elements of each rank's input (of each block) a round can take. */
static size_t plan_per_round(const coll_args_t *a, int n, size_t half)
{
    size_t es = coll_dtype_size(a->dtype);
    switch (a->coll) {
    case COLL_OP_ALLREDUCE:
        return half / es;
    case COLL_OP_REDUCE_SCATTER:
    case COLL_OP_ALLTOALL:
        return 2 * half / ((size_t)n * es);
    default:
        return 2 * half / es;
    }
}

int coll_p2p_plan_fits(const coll_args_t *a, int n, size_t half)
{
    size_t per = n >= 2 && n <= COLL_P2P_MAX_RANKS ? plan_per_round(a, n, half) : 0;
    return per > 0 && (a->count + per - 1) / per <= COLL_P2P_MAX_ROUNDS;
}

void coll_p2p_plan(coll_p2p_plan_t *p, const coll_args_t *a, int n, int me, size_t half)
{
    size_t per = plan_per_round(a, n, half);

    p->args   = *a;
    p->n      = n;
    p->me     = me;
    p->es     = coll_dtype_size(a->dtype);
    p->half   = half;
    p->chunk  = per == 0 ? 1 : per < a->count ? per : a->count;
    p->chunk  = p->chunk == 0 ? 1 : p->chunk;
    p->rounds = a->count == 0 ? 0 : (int)((a->count + p->chunk - 1) / p->chunk);
    p->nx     = 2 * p->rounds + (a->coll == COLL_OP_ALLREDUCE && p->rounds > 0);
}

/* Elements [lo, hi) of cnt that rank q owns in an all-reduce round. */
static void plan_slice(const coll_p2p_plan_t *p, size_t cnt, int q, size_t *lo, size_t *hi)
{
    size_t unit = p->es < P2P_ALIGN ? P2P_ALIGN / p->es : 1;
    *lo         = cnt * (size_t)q / (size_t)p->n / unit * unit;
    *hi         = q == p->n - 1 ? cnt : cnt * (size_t)(q + 1) / (size_t)p->n / unit * unit;
}

/* Elements of each rank's input (of each block) in round j. */
static size_t plan_round(const coll_p2p_plan_t *p, size_t j)
{
    size_t done = j * p->chunk;
    return p->args.count - done < p->chunk ? p->args.count - done : p->chunk;
}

#define IO_TRY(_call, _what)                                                                       \
    do {                                                                                           \
        int _r = (_call);                                                                          \
        if (_r != 0) {                                                                             \
            *what = (_what);                                                                       \
            return _r;                                                                             \
        }                                                                                          \
    } while (0)

static int plan_copy(const coll_p2p_io_t *io, void *dst, const void *src, size_t len,
                     const char **what)
{
    if (len > 0 && dst != src) {
        IO_TRY(io->copy(io->ctx, dst, src, len), "copy");
    }
    return 0;
}

/* dst[0, cnt) = op over q of win[q] + off bytes, in rank order (AVG: the sum, divided). */
static int plan_reduce(const coll_p2p_plan_t *p, const coll_p2p_io_t *io, void *dst,
                       void *const *win, size_t off, size_t cnt, const char **what)
{
    const void *srcs[COLL_P2P_MAX_RANKS];
    int         avg = p->args.op == COLL_AVG;

    if (cnt == 0) {
        return 0;
    }
    for (int q = 0; q < p->n; q++) {
        srcs[q] = (const char *)win[q] + off;
    }
    IO_TRY(io->reduce(io->ctx, p->args.dtype, avg ? COLL_SUM : p->args.op, dst, srcs, p->n, cnt),
           "reduction");
    if (avg) {
        IO_TRY(io->div(io->ctx, p->args.dtype, dst, cnt, p->n), "division");
    }
    return 0;
}

/* Round j of this rank's input into its window. */
static int plan_copy_in(const coll_p2p_plan_t *p, const coll_p2p_io_t *io, const char *in,
                        char *win, size_t j, const char **what)
{
    const coll_args_t *a  = &p->args;
    size_t             cj = plan_round(p, j), es = p->es;
    size_t             off = j * p->chunk * es;

    switch (a->coll) {
    case COLL_OP_REDUCE_SCATTER:
    case COLL_OP_ALLTOALL: /* block b's part into slot b */
        for (int b = 0; b < p->n; b++) {
            int r = plan_copy(io, win + (size_t)b * cj * es, in + (size_t)b * a->count * es + off,
                              cj * es, what);
            if (r != 0) {
                return r;
            }
        }
        return 0;
    case COLL_OP_BROADCAST:
        return p->me == a->root ? plan_copy(io, win, in + off, cj * es, what) : 0;
    default:
        return plan_copy(io, win, in + off, cj * es, what);
    }
}

/* Round j from the windows into the output (all but all-reduce). */
static int plan_consume(const coll_p2p_plan_t *p, const coll_p2p_io_t *io, const char *in,
                        char *out, void *const *win, size_t j, const char **what)
{
    const coll_args_t *a  = &p->args;
    size_t             cj = plan_round(p, j), es = p->es;
    size_t             off = j * p->chunk * es;
    int                n = p->n, me = p->me, r = 0;

    switch (a->coll) {
    case COLL_OP_REDUCE_SCATTER:
        return plan_reduce(p, io, out + off, win, (size_t)me * cj * es, cj, what);
    case COLL_OP_ALLGATHER:
        for (int k = 0; k < n && r == 0; k++) {
            int q = (me + k) % n;
            if (!(q == me && a->in_place)) {
                r = plan_copy(io, out + (size_t)q * a->count * es + off, win[q], cj * es, what);
            }
        }
        return r;
    case COLL_OP_BROADCAST: /* the root from its own input: the same bytes */
        return plan_copy(io, out + off, me == a->root ? in + off : (const char *)win[a->root],
                         cj * es, what);
    case COLL_OP_REDUCE:
        return me == a->root ? plan_reduce(p, io, out + off, win, 0, cj, what) : 0;
    case COLL_OP_ALLTOALL:
        for (int k = 0; k < n && r == 0; k++) {
            int q = (me + k) % n;
            r     = plan_copy(io, out + (size_t)q * a->count * es + off,
                              (const char *)win[q] + (size_t)me * cj * es, cj * es, what);
        }
        return r;
    default:
        *what = "a collective without a p2p plan";
        return -1;
    }
}

int coll_p2p_plan_phase(const coll_p2p_plan_t *p, int k, const void *sendbuf, void *recvbuf,
                        void *const *win, const coll_p2p_io_t *io, const char **what)
{
    const char *in  = sendbuf;
    char       *out = recvbuf, *own = win[p->me];
    size_t      es = p->es, lo, hi, j, cj;
    int         r  = 0;

    *what = "";
    if (k < 0 || k >= p->nx) {
        *what = "a phase out of range";
        return -1;
    }
    if (p->args.coll != COLL_OP_ALLREDUCE) {
        j = (size_t)k / 2;
        return k % 2 == 0 ? plan_copy_in(p, io, in, own, j, what)
                          : plan_consume(p, io, in, out, win, j, what);
    }
    if (k == 0) {
        return plan_copy_in(p, io, in, own, 0, what);
    }
    if (k % 2 == 1) { /* reduce round j: own slice into the second half, then the output */
        j  = (size_t)(k - 1) / 2;
        cj = plan_round(p, j);
        plan_slice(p, cj, p->me, &lo, &hi);
        r = plan_reduce(p, io, own + p->half + lo * es, win, lo * es, hi - lo, what);
        if (r == 0) {
            r = plan_copy(io, out + (j * p->chunk + lo) * es, own + p->half + lo * es,
                          (hi - lo) * es, what);
        }
        return r;
    }
    j  = (size_t)(k - 2) / 2; /* gather round j, copy round j + 1 in */
    cj = plan_round(p, j);
    for (int i = 1; i < p->n && r == 0; i++) {
        int q = (p->me + i) % p->n;
        plan_slice(p, cj, q, &lo, &hi);
        r = plan_copy(io, out + (j * p->chunk + lo) * es, (const char *)win[q] + p->half + lo * es,
                      (hi - lo) * es, what);
    }
    if (r == 0 && j + 1 < (size_t)p->rounds) {
        r = plan_copy_in(p, io, in, own, j + 1, what);
    }
    return r;
}
