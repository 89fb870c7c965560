/* SPDX-License-Identifier: MIT */
/*
 * Recursive-halving reduce-scatter: log2(p) rounds, each sending the partner's half of the
 * current window to rank ^ mask and reducing the own half, after the recursive doubling fold
 * for rank counts that are not a power of two. For small and medium messages (log2(p)
 * messages instead of the ring's p - 1). Builds one rank's schedule; runs nothing.
 */
#include "rd/rd.h"

#include "error.h"
#include "log.h"
#include "util.h"

/*
 * Element offsets index the whole input vector (nranks blocks of count elements). Transfers are
 * cut at the boundaries of one global grid of ce-element cells and at block boundaries, so both
 * sides of a message cut a range alike (the last round's window splits at a block boundary).
 * last[g]: the step that last wrote cell g of the running result; pieces of one cell chain.
 */
typedef struct rh_ctx {
    int            rank;
    coll_rd_fold_t f;
    size_t         esize;
    size_t         count; /* elements per rank's block */
    uint64_t       total; /* elements of the vector */
    size_t         ce;    /* elements per cell, >= 1 */
    uint64_t       ncells;
    uint64_t       stride;  /* tag stride of a round: pieces cut at cells and blocks */
    coll_buf_id_t  in;      /* the input: always SEND */
    coll_buf_id_t  acc;     /* running result: SCRATCH out of place, SEND in place */
    coll_buf_id_t  out;     /* the finished own block ... */
    uint64_t       out_off; /* ... at this byte offset */
    int            avg;
    int            track_sends; /* 1: sends become last[cell] too (WAR before a receive) */
    int           *last;
} rh_ctx_t;

/* First element of core rank nr's blocks: the real blocks of the ranks it stands for. */
static uint64_t rh_core_start(const rh_ctx_t *x, int nr)
{
    int real = (nr < x->f.extra) ? 2 * nr : nr + x->f.extra;
    return (uint64_t)real * x->count;
}

static uint64_t rh_min(uint64_t a, uint64_t b)
{
    return (a < b) ? a : b;
}

typedef enum { RH_SEND, RH_RECV, RH_RECV_REDUCE } rh_kind_t;

/*
 * Elements [lo, hi) cell by cell: one step of kind per piece, tag tag_base + cell, waiting for
 * last[cell]; a reduction or receive becomes the new last[cell]. SEND reads src; RECV writes
 * dst; RECV_REDUCE writes dst = op(src, incoming). dst_shift: byte offset of element lo in dst
 * minus lo * esize (0 when dst is laid out like the vector). div: a DIV after each piece.
 */
static void rh_range(coll_sched_t *s, rh_ctx_t *x, rh_kind_t kind, int peer, uint64_t tag_base,
                     coll_buf_id_t src, coll_buf_id_t dst, int64_t dst_shift, uint64_t lo,
                     uint64_t hi, int div)
{
    for (uint64_t e = lo; e < hi;) {
        uint64_t g = e / x->ce, piece = g + e / x->count; /* piece: increasing with e */
        uint64_t end = rh_min(rh_min((g + 1) * x->ce, (e / x->count + 1) * x->count), hi);
        uint64_t off = e * x->esize, len = (end - e) * x->esize;
        uint64_t doff = (uint64_t)((int64_t)off + dst_shift);
        uint32_t tag  = (uint32_t)(tag_base + piece);
        int      st;

        if (kind == RH_SEND) {
            st = coll_sched_send(s, peer, tag, src, off, len);
        } else if (kind == RH_RECV) {
            st = coll_sched_recv(s, peer, tag, dst, doff, len);
        } else {
            st = coll_sched_recv_reduce(s, peer, tag, dst, doff, src, off, len);
        }
        coll_sched_dep(s, st, x->last[g]);
        if (kind != RH_SEND && div) {
            int dv = coll_sched_div(s, dst, doff, len);
            coll_sched_dep(s, dv, st);
            st = dv;
        }
        if (kind != RH_SEND || x->track_sends) {
            x->last[g] = st;
        }
        e = end;
    }
}

/*
 * A core rank. Round k (mask m = p2 >> (k + 1)) sends the partner's half of the window and
 * reduces the own half into acc; the last round's reduction of the own block lands in out
 * (with the DIV for AVG), the rest of the window (a folded partner's block) in acc, from where
 * it is sent down. Every reduction writes only the own half, which no send of the round reads.
 */
static void rh_core(coll_sched_t *s, rh_ctx_t *x)
{
    int           nr = x->f.newrank, keeps = coll_rd_fold_keeps(&x->f, x->rank);
    coll_buf_id_t src    = x->in;
    uint64_t      own_lo = (uint64_t)x->rank * x->count, own_hi = own_lo + x->count;
    int64_t       shift = (int64_t)x->out_off - (int64_t)(own_lo * x->esize);

    if (keeps) { /* fold: acc = op(input, partner's input) over the whole vector */
        rh_range(s, x, RH_RECV_REDUCE, x->rank + 1, 0, x->in, x->acc, 0, 0, x->total, 0);
        src = x->acc;
    }
    for (int k = 0; k < x->f.log2p; k++) {
        int      m = x->f.p2 >> (k + 1), pnr = nr ^ m, peer = coll_rd_fold_real(&x->f, pnr);
        uint64_t tb  = (uint64_t)(1 + k) * x->stride;
        uint64_t plo = rh_core_start(x, pnr & ~(m - 1)),
                 phi = rh_core_start(x, (pnr & ~(m - 1)) + m);
        uint64_t lo = rh_core_start(x, nr & ~(m - 1)), hi = rh_core_start(x, (nr & ~(m - 1)) + m);

        rh_range(s, x, RH_SEND, peer, tb, src, COLL_BUF_SEND, 0, plo, phi, 0);
        if (k < x->f.log2p - 1) {
            rh_range(s, x, RH_RECV_REDUCE, peer, tb, src, x->acc, 0, lo, hi, 0);
        } else { /* the window is now the own block, plus a folded partner's after it */
            rh_range(s, x, RH_RECV_REDUCE, peer, tb, src, x->out, shift, own_lo, own_hi, x->avg);
            rh_range(s, x, RH_RECV_REDUCE, peer, tb, src, x->acc, 0, own_hi, hi, 0);
        }
        src = x->acc;
    }
    if (keeps) {
        rh_range(s, x, RH_SEND, x->rank + 1, (uint64_t)(1 + x->f.log2p) * x->stride, x->acc,
                 COLL_BUF_SEND, 0, own_hi, own_hi + x->count, 0);
    }
}

/* A rank that sits out: its vector goes down, its reduced block comes back (in place only
 * after the send that read the same cell). */
static void rh_folded(coll_sched_t *s, rh_ctx_t *x)
{
    uint64_t own_lo = (uint64_t)x->rank * x->count;
    int64_t  shift  = (int64_t)x->out_off - (int64_t)(own_lo * x->esize);

    x->track_sends = (x->out == x->in);
    rh_range(s, x, RH_SEND, x->rank - 1, 0, x->in, COLL_BUF_SEND, 0, 0, x->total, 0);
    rh_range(s, x, RH_RECV, x->rank - 1, (uint64_t)(1 + x->f.log2p) * x->stride, x->in, x->out,
             shift, own_lo, own_lo + x->count, x->avg);
}

coll_result_t coll_rh_reduce_scatter_build(int rank, int nranks, const coll_args_t *args,
                                           coll_sched_t *s)
{
    rh_ctx_t x = {.rank = rank, .count = args->count, .in = COLL_BUF_SEND};
    size_t   total;

    x.esize = coll_dtype_size(args->dtype);
    total   = args->count * (size_t)nranks;
    if (x.esize == 0 || nranks < 1 || rank < 0 || rank >= nranks ||
        total / (size_t)nranks != args->count) {
        coll_error(ALGO, "bad recursive halving call: dtype %d, count %zu, rank %d of %d",
                   (int)args->dtype, args->count, rank, nranks);
        return COLL_ERR_INVALID_ARG;
    }
    if (args->count == 0) {
        return COLL_OK;
    }
    x.ce = args->chunk_bytes / x.esize;
    x.ce = (x.ce == 0) ? 1 : x.ce;
    if (nranks == 1) { /* AVG over one rank divides by one */
        for (size_t e = 0; e < args->count && !args->in_place; e += x.ce) {
            size_t n = (args->count - e < x.ce) ? args->count - e : x.ce;
            coll_sched_copy(s, COLL_BUF_RECV, e * x.esize, COLL_BUF_SEND, e * x.esize, n * x.esize);
        }
        return s->build_error;
    }
    coll_rd_fold_init(&x.f, rank, nranks);
    x.total  = total;
    x.ncells = total / x.ce + (total % x.ce != 0 ? 1 : 0);
    x.stride = x.ncells + (uint64_t)nranks;
    COLL_CHECK(coll_sched_tags_fit((uint64_t)(2 + x.f.log2p) * x.stride, "recursive halving"));
    x.avg     = (args->op == COLL_AVG);
    x.acc     = args->in_place ? COLL_BUF_SEND : COLL_BUF_SCRATCH;
    x.out     = args->in_place ? COLL_BUF_SEND : COLL_BUF_RECV;
    x.out_off = args->in_place ? (uint64_t)rank * args->count * x.esize : 0;
    if (!args->in_place && x.f.newrank >= 0) {
        s->scratch_bytes = total * x.esize;
    }
    x.last = coll_malloc(x.ncells * sizeof(int), "recursive halving cells");
    if (x.last == NULL) {
        return COLL_ERR_NO_MEMORY;
    }
    for (uint64_t g = 0; g < x.ncells; g++) {
        x.last[g] = -1;
    }
    if (x.f.newrank < 0) {
        rh_folded(s, &x);
    } else {
        rh_core(s, &x);
    }
    coll_free(x.last);
    return s->build_error;
}
