/* SPDX-License-Identifier: MIT */
/*
 * What the one-shot and two-shot all-reduce share: when a call can use the windows, how a
 * vector is cut into pieces (one flag slot each), the trivial cases, and the reduction of one
 * piece of every window in rank order. Builds schedule steps only.
 */
#include "window/window.h"

#include "log.h"

int coll_win_fits(int nranks, const coll_args_t *args, uint64_t need)
{
    const coll_layout_t *l = args->layout;

    if (nranks < 1 || args->coll != COLL_OP_ALLREDUCE || coll_dtype_size(args->dtype) == 0 ||
        l == NULL || !l->shared_window) {
        return 0;
    }
    /* one rank copies at most: it needs no window */
    return nranks == 1 || args->count == 0 || need <= l->window_bytes;
}

size_t coll_win_piece(const coll_args_t *args, size_t count, uint32_t max_pieces)
{
    size_t ce = args->chunk_bytes / coll_dtype_size(args->dtype);

    if (count == 0) {
        return 0;
    }
    ce = (ce == 0) ? 1 : ce;
    if (max_pieces == 0) {
        max_pieces = 1;
    }
    if (count / ce + (count % ce != 0) > max_pieces) { /* fewer, larger pieces */
        ce = count / max_pieces + (count % max_pieces != 0);
    }
    return ce;
}

coll_result_t coll_win_trivial(int nranks, const coll_args_t *args, coll_sched_t *s)
{
    if (nranks == 1 && args->count > 0 && !args->in_place) { /* AVG over one rank: x / 1 = x */
        coll_sched_copy_chunked(s, args->chunk_bytes, COLL_BUF_RECV, 0, COLL_BUF_SEND, 0,
                                (uint64_t)args->count * coll_dtype_size(args->dtype));
    }
    return s->build_error;
}

int coll_win_reduce_chain(coll_sched_t *s, uint32_t slot, uint64_t off, uint64_t len,
                          coll_buf_id_t in, int after, int avg)
{
    int last, p;

    if (s->rank == 0) { /* x0 op x1 without a copy of x0 */
        last = coll_sched_get_reduce(s, 1, slot, off, COLL_BUF_RECV, off, in, off, len);
        p    = 2;
    } else {
        last = coll_sched_get(s, 0, slot, off, COLL_BUF_RECV, off, len);
        p    = 1;
    }
    coll_sched_dep(s, last, after);
    for (; p < s->nranks; p++) {
        int st =
            coll_sched_get_reduce(s, p, slot, off, COLL_BUF_RECV, off, COLL_BUF_RECV, off, len);
        coll_sched_dep(s, st, last);
        last = st;
    }
    if (avg) {
        int dv = coll_sched_div(s, COLL_BUF_RECV, off, len);
        coll_sched_dep(s, dv, last);
        last = dv;
    }
    return last;
}
