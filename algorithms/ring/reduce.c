/* SPDX-License-Identifier: MIT */
/*
 * Chain reduce: from the rank after the root along the ring order (rank order without one) to
 * the root, chunked and pipelined. Each rank reduces the
 * incoming chunk with its own input on arrival and forwards it; the middle ranks keep partial
 * sums in scratch (recvbuf is not significant off the root), the root reduces into recvbuf and
 * divides for AVG. Builds one rank's schedule; runs nothing.
 */
#include "ring/ring.h"

#include "error.h"
#include "log.h"

coll_result_t coll_ring_reduce_build(int rank, int nranks, const coll_args_t *args, coll_sched_t *s)
{
    coll_ring_layout_t l;
    coll_buf_id_t      in = args->in_place ? COLL_BUF_RECV : COLL_BUF_SEND;
    int                pos, next, prev;

    if (args->root < 0 || args->root >= nranks) {
        coll_error(ALGO, "reduce root %d out of range (%d ranks)", args->root, nranks);
        return COLL_ERR_INVALID_ARG;
    }
    COLL_CHECK(coll_ring_layout_init(&l, 0, 1, args, args->count));
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
    COLL_CHECK(coll_sched_tags_fit(l.nchunks, "chain reduce"));
    coll_ring_chain(args, nranks, rank, args->root, &pos, &next, &prev);
    pos = coll_ring_mod((long long)pos - 1, nranks); /* 0: first, n-1: root */
    if (pos > 0 && pos < nranks - 1) {
        s->scratch_bytes = args->count * l.esize;
    }
    for (uint32_t c = 0; c < l.nchunks; c++) {
        uint64_t off = coll_ring_chunk_off(&l, 0, c),
                 len = coll_ring_chunk_count(&l, 0, c) * l.esize;
        int i;

        if (pos == 0) {
            coll_sched_send(s, next, c, in, off, len);
        } else if (pos < nranks - 1) {
            i = coll_sched_recv_reduce(s, prev, c, COLL_BUF_SCRATCH, off, in, off, len);
            coll_sched_dep(s, coll_sched_send(s, next, c, COLL_BUF_SCRATCH, off, len), i);
        } else {
            i = coll_sched_recv_reduce(s, prev, c, COLL_BUF_RECV, off, in, off, len);
            if (args->op == COLL_AVG) {
                coll_sched_dep(s, coll_sched_div(s, COLL_BUF_RECV, off, len), i);
            }
        }
    }
    return s->build_error;
}
