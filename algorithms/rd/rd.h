/* SPDX-License-Identifier: MIT */
/*
 * Recursive doubling and Rabenseifner allreduce: the rank fold that reduces any rank count to a
 * power of two, and the two builders. Pure schedule construction; the cost model and the
 * algorithm table live in registry.c.
 */
#ifndef COLL_ALGO_RD_H
#define COLL_ALGO_RD_H

#include "algo.h"

/*
 * The fold for n ranks that are not a power of two: p2 is the largest power of two <= n and
 * extra = n - p2. Of the first 2 * extra ranks the odd ones hand their vector to the even one
 * below, sit out the power-of-two core and get the result back at the end. The others take part
 * in the core under a new rank: r / 2 below 2 * extra, r - extra above.
 */
typedef struct coll_rd_fold {
    int p2;      /* power of two taking part in the core */
    int extra;   /* n - p2: pairs that fold */
    int newrank; /* rank in the core, -1 for a rank that sits out */
    int log2p;   /* log2(p2) */
} coll_rd_fold_t;

static inline void coll_rd_fold_init(coll_rd_fold_t *f, int rank, int nranks)
{
    f->p2    = 1;
    f->log2p = 0;
    while (f->p2 * 2 <= nranks) {
        f->p2 *= 2;
        f->log2p++;
    }
    f->extra = nranks - f->p2;
    if (rank < 2 * f->extra) {
        f->newrank = (rank % 2 == 0) ? rank / 2 : -1;
    } else {
        f->newrank = rank - f->extra;
    }
}

/* Communicator rank of core rank nr. */
static inline int coll_rd_fold_real(const coll_rd_fold_t *f, int nr)
{
    return (nr < f->extra) ? 2 * nr : nr + f->extra;
}

/* 1 for an even rank that receives a folded vector (and sends the result back). */
static inline int coll_rd_fold_keeps(const coll_rd_fold_t *f, int rank)
{
    return rank < 2 * f->extra && f->newrank >= 0;
}

coll_result_t coll_rd_allreduce_build(int rank, int nranks, const coll_args_t *args,
                                      coll_sched_t *s);
coll_result_t coll_rab_allreduce_build(int rank, int nranks, const coll_args_t *args,
                                       coll_sched_t *s);
/* Recursive-halving reduce_scatter (count: the per-rank block), after the same fold. */
coll_result_t coll_rh_reduce_scatter_build(int rank, int nranks, const coll_args_t *args,
                                           coll_sched_t *s);

#endif
