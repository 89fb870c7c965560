/* SPDX-License-Identifier: MIT */
/*
 * Pairwise alltoall: in round k rank r sends its block for (r+k)%n and receives the block from
 * (r-k)%n, chunked; the own block is a local copy. Rounds are ordered only by their position
 * in the step list (the engine posts in that order), not by dependencies, since no round reads
 * what another writes. Also the chunking helper of the basic algorithms. Builds one schedule.
 */
#include "basic/basic.h"

#include "error.h"
#include "log.h"

coll_result_t coll_basic_chunks(const coll_args_t *args, size_t count, const char *what,
                                size_t *chunk_elems_p, uint32_t *nchunks_p)
{
    size_t esize = coll_dtype_size(args->dtype), ce, nc;

    if (esize == 0) {
        coll_error(ALGO, "%s: invalid dtype %d", what, (int)args->dtype);
        return COLL_ERR_INVALID_ARG;
    }
    ce = args->chunk_bytes / esize;
    if (ce == 0) {
        ce = 1;
    }
    nc = count / ce + ((count % ce) != 0 ? 1 : 0);
    if ((uint64_t)nc > UINT32_MAX) {
        coll_error(ALGO,
                   "%s of %zu elements needs %zu chunks, more than 32-bit tags hold; "
                   "raise COLL_CHUNK_SIZE",
                   what, count, nc);
        return COLL_ERR_UNSUPPORTED;
    }
    *chunk_elems_p = ce;
    *nchunks_p     = (uint32_t)nc;
    return COLL_OK;
}

coll_result_t coll_pairwise_alltoall_build(int rank, int nranks, const coll_args_t *args,
                                           coll_sched_t *s)
{
    size_t   esize = coll_dtype_size(args->dtype), ce;
    uint64_t block = (uint64_t)args->count * esize, piece;
    uint32_t nc;

    if (args->in_place) {
        coll_error(ALGO, "pairwise alltoall does not run in place");
        return COLL_ERR_UNSUPPORTED;
    }
    COLL_CHECK(coll_basic_chunks(args, args->count, "pairwise alltoall", &ce, &nc));
    if (args->count == 0) {
        return COLL_OK;
    }
    piece = (uint64_t)ce * esize;
    for (int k = 1; k < nranks; k++) {
        int dst = (rank + k) % nranks, src = (rank - k + nranks) % nranks;

        for (uint32_t c = 0; c < nc; c++) {
            uint64_t off = (uint64_t)c * piece, len = (block - off < piece) ? block - off : piece;

            coll_sched_send(s, dst, c, COLL_BUF_SEND, (uint64_t)dst * block + off, len);
            coll_sched_recv(s, src, c, COLL_BUF_RECV, (uint64_t)src * block + off, len);
        }
    }
    for (uint32_t c = 0; c < nc; c++) { /* last: the network work goes first */
        uint64_t off = (uint64_t)c * piece, len = (block - off < piece) ? block - off : piece;

        coll_sched_copy(s, COLL_BUF_RECV, (uint64_t)rank * block + off, COLL_BUF_SEND,
                        (uint64_t)rank * block + off, len);
    }
    return s->build_error;
}
