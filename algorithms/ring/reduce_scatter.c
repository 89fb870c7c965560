/* SPDX-License-Identifier: MIT */
/*
 * Ring reduce-scatter: the reduce-scatter phase shared with allreduce, and the reduce_scatter
 * collective built from it (result in recvbuf, or in sendbuf's own block in place). Builds one
 * rank's schedule; runs nothing.
 */
#include "ring/ring.h"

#include "error.h"
#include "log.h"
#include "util.h"

/* Where step t's partial sum of chunk c of block b lives. */
static uint64_t rs_acc_off(const coll_ring_layout_t *l, const coll_ring_rs_t *p, int t, int b,
                           uint32_t c)
{
    if (p->acc_by_step) {
        uint64_t slot = (uint64_t)coll_ring_block_count(l, 0) * l->esize; /* largest block */
        return (uint64_t)t * slot + (uint64_t)c * l->chunk_elems * l->esize;
    }
    return coll_ring_chunk_off(l, b, c);
}

/* The reduction of step t for chunk c (block b); returns the step that finished it. */
static int rs_reduce_step(coll_sched_t *s, const coll_ring_layout_t *l, const coll_ring_rs_t *p,
                          int t, int b, uint32_t c, uint64_t len)
{
    int           n    = l->nranks, idx, d;
    uint32_t      tag  = p->tag_base + (uint32_t)t * l->nchunks + c;
    uint64_t      in   = coll_ring_chunk_off(l, b, c);
    coll_buf_id_t dbuf = p->acc_buf;
    uint64_t      doff = rs_acc_off(l, p, t, b, c);

    if (t == n - 2) {
        dbuf = p->out_buf;
        doff = p->out_off + (uint64_t)c * l->chunk_elems * l->esize;
    }
    idx = coll_sched_recv_reduce(s, l->prev, tag, dbuf, doff, p->in_buf, in, len);
    if (t == n - 2 && p->avg_div) {
        d = coll_sched_div(s, dbuf, doff, len);
        coll_sched_dep(s, d, idx);
        idx = d;
    }
    return idx;
}

/*
 * At position p, step t sends the block of position p-t-1 (the input at t = 0, else the
 * partial written by step t-1's reduction: a RAW edge) and reduces the block of position p-t-2
 * into the accumulator, or into the output at the last step. The reduction at step t never
 * writes a region an earlier send read: that block is sent only later, at step t+1.
 */
coll_result_t coll_ring_rs_phase(coll_sched_t *s, const coll_ring_layout_t *l,
                                 const coll_ring_rs_t *p)
{
    int      n = l->nranks, pos = l->pos, next = l->next;
    uint32_t nc   = l->nchunks;
    int     *last = coll_malloc((size_t)nc * sizeof(int), "ring indices");

    if (last == NULL) {
        return COLL_ERR_NO_MEMORY;
    }
    for (int t = 0; t < n - 1; t++) {
        int sb = coll_ring_block_at(l, coll_ring_mod((long long)pos - t - 1, n)),
            rb = coll_ring_block_at(l, coll_ring_mod((long long)pos - t - 2, n));

        for (uint32_t c = 0; c < nc; c++) {
            uint64_t slen = coll_ring_chunk_count(l, sb, c) * l->esize;
            uint64_t rlen = coll_ring_chunk_count(l, rb, c) * l->esize;
            uint32_t tag  = p->tag_base + (uint32_t)t * nc + c;
            int      i    = -1;

            if (slen > 0 && t == 0) {
                i = coll_sched_send(s, next, tag, p->in_buf, coll_ring_chunk_off(l, sb, c), slen);
            } else if (slen > 0) {
                i = coll_sched_send(s, next, tag, p->acc_buf, rs_acc_off(l, p, t - 1, sb, c), slen);
                coll_sched_dep(s, i, last[c]);
            }
            if (p->send_idx != NULL) {
                p->send_idx[(size_t)t * nc + c] = i;
            }
            last[c] = (rlen > 0) ? rs_reduce_step(s, l, p, t, rb, c, rlen) : -1;
        }
    }
    if (p->final_idx != NULL) {
        for (uint32_t c = 0; c < nc; c++) {
            p->final_idx[c] = last[c];
        }
    }
    coll_free(last);
    return s->build_error;
}

/*
 * Blocks are recvcount elements each. Out of place the partial sums of steps 0 .. n-3 go to
 * scratch slots (recvbuf holds only the own block), one slot per step so that no slot is
 * reused and no extra ordering is needed. In place everything stays in sendbuf.
 */
coll_result_t coll_ring_reduce_scatter_build(int rank, int nranks, const coll_args_t *args,
                                             coll_sched_t *s)
{
    coll_ring_layout_t l;
    coll_ring_rs_t     rs;
    size_t             total = args->count * (size_t)nranks;

    if (nranks > 0 && total / (size_t)nranks != args->count) {
        coll_error(ALGO, "reduce_scatter of %zu x %d elements overflows", args->count, nranks);
        return COLL_ERR_INVALID_ARG;
    }
    COLL_CHECK(coll_ring_layout_init(&l, rank, nranks, args, total));
    if (args->count == 0) {
        return COLL_OK;
    }
    if (nranks == 1) {
        if (!args->in_place) {
            coll_sched_copy_chunked(s, args->chunk_bytes, COLL_BUF_RECV, 0, COLL_BUF_SEND, 0,
                                    (uint64_t)args->count * l.esize);
        }
        return s->build_error;
    }
    COLL_CHECK(coll_sched_tags_fit((uint64_t)(nranks - 1) * l.nchunks, "ring reduce_scatter"));
    rs = (coll_ring_rs_t){.in_buf = COLL_BUF_SEND, .avg_div = (args->op == COLL_AVG)};
    if (args->in_place) {
        rs.acc_buf = COLL_BUF_SEND;
        rs.out_buf = COLL_BUF_SEND;
        rs.out_off = (uint64_t)rank * args->count * l.esize;
    } else {
        rs.acc_buf       = COLL_BUF_SCRATCH;
        rs.acc_by_step   = 1;
        rs.out_buf       = COLL_BUF_RECV;
        rs.out_off       = 0;
        s->scratch_bytes = (size_t)(nranks - 2) * args->count * l.esize;
    }
    return coll_ring_rs_phase(s, &l, &rs);
}
