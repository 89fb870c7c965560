/* SPDX-License-Identifier: MIT */
/*
 * Chain broadcast: from the root along the ring order (rank order without one) back to the
 * rank before the root, cut into chunks that each rank forwards as
 * soon as they arrived, so the chain pipelines. The root never receives; the last rank never
 * sends. Builds one rank's schedule; runs nothing.
 */
#include "ring/ring.h"

#include "error.h"
#include "log.h"

coll_result_t coll_ring_broadcast_build(int rank, int nranks, const coll_args_t *args,
                                        coll_sched_t *s)
{
    coll_ring_layout_t l;
    int                pos, next, prev;

    if (args->root < 0 || args->root >= nranks) {
        coll_error(ALGO, "broadcast root %d out of range (%d ranks)", args->root, nranks);
        return COLL_ERR_INVALID_ARG;
    }
    coll_ring_chain(args, nranks, rank, args->root, &pos, &next, &prev);
    /* one "rank" in the layout: a single block holding the whole buffer */
    COLL_CHECK(coll_ring_layout_init(&l, 0, 1, args, args->count));
    if (args->count == 0) {
        return COLL_OK;
    }
    COLL_CHECK(coll_sched_tags_fit(l.nchunks, "chain broadcast"));

    if (pos == 0) {
        coll_buf_id_t src = args->in_place ? COLL_BUF_RECV : COLL_BUF_SEND;

        for (uint32_t c = 0; c < l.nchunks && nranks > 1; c++) {
            coll_sched_send(s, next, c, src, coll_ring_chunk_off(&l, 0, c),
                            coll_ring_chunk_count(&l, 0, c) * l.esize);
        }
        if (!args->in_place) { /* after the sends, so the network starts first */
            coll_sched_copy_chunked(s, args->chunk_bytes, COLL_BUF_RECV, 0, COLL_BUF_SEND, 0,
                                    (uint64_t)args->count * l.esize);
        }
        return s->build_error;
    }
    for (uint32_t c = 0; c < l.nchunks; c++) {
        uint64_t off = coll_ring_chunk_off(&l, 0, c),
                 len = coll_ring_chunk_count(&l, 0, c) * l.esize;
        int r        = coll_sched_recv(s, prev, c, COLL_BUF_RECV, off, len);

        if (pos < nranks - 1) {
            coll_sched_dep(s, coll_sched_send(s, next, c, COLL_BUF_RECV, off, len), r);
        }
    }
    return s->build_error;
}
