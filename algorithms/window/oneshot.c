/* SPDX-License-Identifier: MIT */
/*
 * One-shot all-reduce through shared windows: every rank puts its input into its window (in
 * pieces of about COLL_CHUNK_SIZE, one flag slot each) and reduces the same piece of every
 * window, in rank order, into its output. One synchronisation, and every rank reads all n
 * inputs: for small messages on one host. Builds one rank's schedule.
 */
#include "window/window.h"

#include "log.h"

int coll_oneshot_supported(int nranks, const coll_args_t *args)
{
    return coll_win_fits(nranks, args, (uint64_t)args->count * coll_dtype_size(args->dtype));
}

coll_result_t coll_oneshot_build(int rank, int nranks, const coll_args_t *args, coll_sched_t *s)
{
    size_t        esize = coll_dtype_size(args->dtype), pe;
    coll_buf_id_t in    = args->in_place ? COLL_BUF_RECV : COLL_BUF_SEND;
    uint32_t      slot  = 0;

    if (esize == 0 || rank < 0 || rank >= nranks) {
        coll_error(ALGO, "bad one-shot call: dtype %d, rank %d of %d", (int)args->dtype, rank,
                   nranks);
        return COLL_ERR_INVALID_ARG;
    }
    if (nranks == 1 || args->count == 0) {
        return coll_win_trivial(nranks, args, s);
    }
    pe = coll_win_piece(args, args->count, COLL_SCHED_WIN_SLOTS);
    for (size_t e = 0; e < args->count; e += pe, slot++) {
        uint64_t off = (uint64_t)e * esize;
        uint64_t len = (uint64_t)((args->count - e < pe) ? args->count - e : pe) * esize;
        int      put = coll_sched_put(s, slot, off, in, off, len);

        /* in place, the result overwrites the input the PUT reads */
        coll_win_reduce_chain(s, slot, off, len, in, args->in_place ? put : -1,
                              args->op == COLL_AVG);
    }
    return s->build_error;
}
