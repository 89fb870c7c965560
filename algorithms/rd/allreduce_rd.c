/* SPDX-License-Identifier: MIT */
/*
 * Recursive doubling allreduce: log2(p) rounds in which every rank exchanges its whole running
 * result with rank ^ 2^k and reduces the incoming copy into it, after the fold for rank counts
 * that are not a power of two. Every chunk runs through the rounds on its own. For small
 * messages (latency-bound); it sends log2(p) full vectors. Builds one rank's schedule.
 */
#include "rd/rd.h"

#include "error.h"
#include "log.h"

/* Per-call constants shared by every chunk. */
typedef struct rd_ctx {
    int            rank;
    coll_rd_fold_t f;
    coll_buf_id_t  in; /* the input: SEND out of place, RECV in place */
    int            in_place;
    int            avg;     /* AVG: DIV once the sum is complete */
    int            nwrites; /* reductions into the running result on this rank */
    uint32_t       nchunks;
} rd_ctx_t;

/*
 * Where the running result lives after its i-th reduction (i >= 1): RECV and SCRATCH
 * alternate so that a round never reduces into the buffer its own send still reads, and the
 * last one is RECV.
 */
static coll_buf_id_t rd_loc(const rd_ctx_t *x, int i)
{
    return ((x->nwrites - i) % 2 == 0) ? COLL_BUF_RECV : COLL_BUF_SCRATCH;
}

/* A rank that sits out: its vector goes to the even rank below, the result comes back. */
static void rd_chunk_folded(coll_sched_t *s, const rd_ctx_t *x, uint64_t off, uint64_t len,
                            uint32_t c)
{
    uint32_t tag_out = (uint32_t)(1 + x->f.log2p) * x->nchunks + c;
    int      sd      = coll_sched_send(s, x->rank - 1, c, x->in, off, len);
    int      rv      = coll_sched_recv(s, x->rank - 1, tag_out, COLL_BUF_RECV, off, len);

    if (x->in_place) {
        coll_sched_dep(s, rv, sd); /* the result overwrites the vector being sent */
    }
}

/*
 * One chunk on a rank of the core. cur/cur_w: where the running result is and the step that
 * wrote it; last_send: the previous round's send, which read the buffer the next reduction
 * writes (WAR). Both partners compute op(own, incoming) elementwise; the reduction kernels are
 * commutative bit for bit, so both hold the same bits after every round.
 */
static void rd_chunk(coll_sched_t *s, const rd_ctx_t *x, uint64_t off, uint64_t len, uint32_t c)
{
    coll_buf_id_t cur   = x->in;
    int           cur_w = -1, last_send = -1, nw = 0, sd, rr;
    int           keeps = coll_rd_fold_keeps(&x->f, x->rank);

    if (x->in_place && x->nwrites % 2 == 1) {
        /* the first reduction must land in RECV too: move the input out of its way */
        cur_w = coll_sched_copy(s, COLL_BUF_SCRATCH, off, COLL_BUF_RECV, off, len);
        cur   = COLL_BUF_SCRATCH;
    }
    if (keeps) {
        rr = coll_sched_recv_reduce(s, x->rank + 1, c, rd_loc(x, ++nw), off, cur, off, len);
        coll_sched_dep(s, rr, cur_w);
        cur   = rd_loc(x, nw);
        cur_w = rr;
    }
    for (int k = 0; k < x->f.log2p; k++) {
        int      peer = coll_rd_fold_real(&x->f, x->f.newrank ^ (1 << k));
        uint32_t tag  = (uint32_t)(1 + k) * x->nchunks + c;

        sd = coll_sched_send(s, peer, tag, cur, off, len);
        coll_sched_dep(s, sd, cur_w);
        rr = coll_sched_recv_reduce(s, peer, tag, rd_loc(x, ++nw), off, cur, off, len);
        coll_sched_dep(s, rr, cur_w);
        coll_sched_dep(s, rr, last_send);
        last_send = sd;
        cur       = rd_loc(x, nw);
        cur_w     = rr;
    }
    if (x->avg) {
        int dv = coll_sched_div(s, COLL_BUF_RECV, off, len);
        coll_sched_dep(s, dv, cur_w);
        cur_w = dv;
    }
    if (keeps) { /* the folded partner gets the finished (divided) result */
        sd = coll_sched_send(s, x->rank + 1, (uint32_t)(1 + x->f.log2p) * x->nchunks + c,
                             COLL_BUF_RECV, off, len);
        coll_sched_dep(s, sd, cur_w);
    }
}

coll_result_t coll_rd_allreduce_build(int rank, int nranks, const coll_args_t *args,
                                      coll_sched_t *s)
{
    size_t   esize = coll_dtype_size(args->dtype), ce;
    uint64_t nchunks;
    rd_ctx_t x;

    if (esize == 0 || nranks < 1 || rank < 0 || rank >= nranks) {
        coll_error(ALGO, "bad recursive doubling call: dtype %d, rank %d of %d", (int)args->dtype,
                   rank, nranks);
        return COLL_ERR_INVALID_ARG;
    }
    if (args->count == 0) {
        return COLL_OK;
    }
    ce = args->chunk_bytes / esize;
    ce = (ce == 0) ? 1 : ce;
    if (nranks == 1) { /* AVG over one rank divides by one: nothing to do */
        if (!args->in_place) {
            coll_sched_copy_chunked(s, args->chunk_bytes, COLL_BUF_RECV, 0, COLL_BUF_SEND, 0,
                                    (uint64_t)args->count * esize);
        }
        return s->build_error;
    }
    nchunks = args->count / ce + (args->count % ce != 0 ? 1 : 0);
    x.rank  = rank;
    coll_rd_fold_init(&x.f, rank, nranks);
    COLL_CHECK(coll_sched_tags_fit((uint64_t)(2 + x.f.log2p) * nchunks, "recursive doubling"));
    x.nchunks  = (uint32_t)nchunks;
    x.in_place = args->in_place;
    x.in       = args->in_place ? COLL_BUF_RECV : COLL_BUF_SEND;
    x.avg      = (args->op == COLL_AVG);
    x.nwrites  = x.f.log2p + coll_rd_fold_keeps(&x.f, rank);
    if (x.f.newrank >= 0 && (x.nwrites >= 2 || x.in_place)) {
        s->scratch_bytes = args->count * esize;
    }
    for (uint32_t c = 0; c < x.nchunks; c++) {
        size_t   e   = (size_t)c * ce;
        uint64_t off = (uint64_t)e * esize;
        uint64_t len = (uint64_t)((args->count - e < ce) ? args->count - e : ce) * esize;

        if (x.f.newrank < 0) {
            rd_chunk_folded(s, &x, off, len, c);
        } else {
            rd_chunk(s, &x, off, len, c);
        }
    }
    return s->build_error;
}
