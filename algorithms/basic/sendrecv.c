/* SPDX-License-Identifier: MIT */
/*
 * Direct point-to-point: coll_send is chunked SEND steps to the peer, coll_recv the matching
 * RECV steps, tagged 0 .. k-1, the last one with COLL_TAG_P2P_END (transport.h: a send and a
 * receive of different lengths then clash instead of matching chunk by chunk; the engine adds
 * the per-peer sequence number that orders successive calls). Sending to oneself is not a schedule;
 * it is rejected. One schedule.
 */
#include "basic/basic.h"
#include "transport.h"

#include "error.h"
#include "log.h"

coll_result_t coll_direct_build(int rank, int nranks, const coll_args_t *args, coll_sched_t *s)
{
    size_t   esize = coll_dtype_size(args->dtype), ce;
    uint64_t total = (uint64_t)args->count * esize, piece;
    uint32_t nc;
    int      is_send = (args->coll == COLL_OP_SEND);

    if (args->coll != COLL_OP_SEND && args->coll != COLL_OP_RECV) {
        coll_error(ALGO, "direct: %s is not send or recv", coll_op_name(args->coll));
        return COLL_ERR_UNSUPPORTED;
    }
    if (args->root < 0 || args->root >= nranks || args->root == rank) {
        coll_error(ALGO, "direct %s: bad peer %d (rank %d of %d)", coll_op_name(args->coll),
                   args->root, rank, nranks);
        return COLL_ERR_UNSUPPORTED;
    }
    COLL_CHECK(coll_basic_chunks(args, args->count, "direct send/recv", &ce, &nc));
    if (nc > COLL_TAG_P2P_END - 1) { /* chunk numbers must stay clear of the end bit */
        coll_error(ALGO,
                   "direct %s: %llu elements make %u chunks of %zu, more than %llu: raise "
                   "COLL_CHUNK_SIZE",
                   coll_op_name(args->coll), (unsigned long long)args->count, nc, ce,
                   (unsigned long long)(COLL_TAG_P2P_END - 1));
        return COLL_ERR_INVALID_ARG;
    }
    /* a count of 0 is one empty message: it still meets its receive, so that 0 against another
     * count is seen (the length check) */
    uint32_t nmsg = nc > 0 ? nc : 1;
    piece         = (uint64_t)ce * esize;
    for (uint32_t c = 0; c < nmsg; c++) {
        uint64_t off = (uint64_t)c * piece, len = (total - off < piece) ? total - off : piece;
        uint32_t tag = c | (c + 1 == nmsg ? (uint32_t)COLL_TAG_P2P_END : 0u);
        if (is_send) {
            coll_sched_send(s, args->root, tag, COLL_BUF_SEND, off, len);
        } else {
            coll_sched_recv(s, args->root, tag, COLL_BUF_RECV, off, len);
        }
    }
    return s->build_error;
}
