/* SPDX-License-Identifier: MIT */
/*
 * Two-shot all-reduce through shared windows: the vector is cut into n segments (sizes differ
 * by at most one element), each cut into K pieces with a flag slot each. Every rank puts its
 * input; rank q reduces segment q of every window in rank order, divides it for AVG, and puts
 * the result back over its own copy of that segment (which only it reads) under a second slot;
 * then every rank copies the other ranks' reduced segments. Each rank reads about 2 (n-1)/n of
 * the vector instead of n - 1 times it: for larger messages on one host. Builds one rank's
 * schedule.
 */
#include "window/window.h"

#include "log.h"

/* Slots: input piece (q, k) is q * K + k, reduced piece (q, k) is n * K + q * K + k. */
typedef struct twoshot_geom {
    int      n;
    size_t   base, rem; /* segment q has base + (q < rem) elements */
    uint32_t k;         /* pieces per segment */
    size_t   pe;        /* elements per piece */
    size_t   esize;
} twoshot_geom_t;

int coll_twoshot_supported(int nranks, const coll_args_t *args)
{
    return nranks <= (int)(COLL_SCHED_WIN_SLOTS / 2) &&
           coll_win_fits(nranks, args, (uint64_t)args->count * coll_dtype_size(args->dtype));
}

/* Byte range of piece k of segment q (len 0: the piece is empty). */
static void twoshot_piece(const twoshot_geom_t *g, int q, uint32_t k, uint64_t *off_p,
                          uint64_t *len_p)
{
    size_t start = (size_t)q * g->base + ((size_t)q < g->rem ? (size_t)q : g->rem);
    size_t seg = g->base + ((size_t)q < g->rem), first = (size_t)k * g->pe, n = 0;

    if (first < seg) {
        n = (seg - first < g->pe) ? seg - first : g->pe;
    }
    *off_p = (uint64_t)(start + first) * g->esize;
    *len_p = (uint64_t)n * g->esize;
}

coll_result_t coll_twoshot_build(int rank, int nranks, const coll_args_t *args, coll_sched_t *s)
{
    int            put_in[COLL_SCHED_WIN_SLOTS];
    coll_buf_id_t  in = args->in_place ? COLL_BUF_RECV : COLL_BUF_SEND;
    twoshot_geom_t g  = {.n = nranks, .esize = coll_dtype_size(args->dtype)};
    uint64_t       off, len;

    if (g.esize == 0 || rank < 0 || rank >= nranks || nranks > (int)COLL_SCHED_WIN_SLOTS / 2) {
        coll_error(ALGO, "bad two-shot call: dtype %d, rank %d of %d", (int)args->dtype, rank,
                   nranks);
        return COLL_ERR_INVALID_ARG;
    }
    if (nranks == 1 || args->count == 0) {
        return coll_win_trivial(nranks, args, s);
    }
    g.base = args->count / (size_t)nranks;
    g.rem  = args->count % (size_t)nranks;
    g.pe   = coll_win_piece(args, g.base + (g.rem > 0), COLL_SCHED_WIN_SLOTS / (2u * nranks));
    g.k    = (uint32_t)((g.base + (g.rem > 0) + g.pe - 1) / g.pe);
    for (int q = 0; q < nranks; q++) {
        for (uint32_t k = 0; k < g.k; k++) {
            twoshot_piece(&g, q, k, &off, &len);
            /* rank 0 reduces its own segment from its input, never from its window */
            put_in[q * g.k + k] = (len == 0 || (q == 0 && rank == 0))
                                      ? -1
                                      : coll_sched_put(s, (uint32_t)q * g.k + k, off, in, off, len);
        }
    }
    for (uint32_t k = 0; k < g.k; k++) { /* the own segment */
        uint32_t slot = (uint32_t)rank * g.k + k;
        int      last, put;

        twoshot_piece(&g, rank, k, &off, &len);
        if (len == 0) {
            continue;
        }
        last = coll_win_reduce_chain(s, slot, off, len, in, args->in_place ? put_in[slot] : -1,
                                     args->op == COLL_AVG);
        put  = coll_sched_put(s, (uint32_t)nranks * g.k + slot, off, COLL_BUF_RECV, off, len);
        coll_sched_dep(s, put, last);
    }
    for (int q = 0; q < nranks; q++) { /* the others' reduced segments */
        for (uint32_t k = 0; k < g.k && q != rank; k++) {
            uint32_t slot = (uint32_t)q * g.k + k;
            int      get;

            twoshot_piece(&g, q, k, &off, &len);
            if (len == 0) {
                continue;
            }
            get = coll_sched_get(s, q, (uint32_t)nranks * g.k + slot, off, COLL_BUF_RECV, off, len);
            coll_sched_dep(s, get, args->in_place ? put_in[slot] : -1);
        }
    }
    return s->build_error;
}
