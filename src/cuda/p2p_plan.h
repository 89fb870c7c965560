/* SPDX-License-Identifier: MIT */
/*
 * The p2p path's plan (p2p_plan.c): how a device collective among ranks of one host moves
 * through the ranks' device windows, in rounds of at most a window's worth, phase by phase with
 * an exchange after each. Plain C over a table of data movers, so that the same plan runs on
 * device memory (p2p.c: copy engines and kernels) and, in the unit test, on host memory.
 *
 * Window: 2 * half bytes per rank. All-reduce rounds use the first half for inputs and the
 * second for reduced slices; every other collective uses the whole window for inputs.
 *
 * Phases (k = 0 .. nx - 1; exchange k follows phase k on every rank, and phase k + 1 starts
 * only after exchange k, so a phase may read what any rank wrote before the exchange):
 *   all-reduce  k = 0: copy round 0 in; k = 2j + 1: reduce own slice of round j from every
 *               window into the own second half and the output; k = 2j + 2: copy the others'
 *               slices of round j from their second halves into the output, copy round j + 1 in.
 *               nx = 2 * rounds + 1.
 *   others      k = 2j: copy round j in; k = 2j + 1: read round j from the windows into the
 *               output. nx = 2 * rounds.
 */
#ifndef COLL_CUDA_P2P_PLAN_H
#define COLL_CUDA_P2P_PLAN_H

#include "algo.h"

#include <stddef.h>

/* Data movers; each returns 0 or an error code of its own (the caller reports it). */
typedef struct coll_p2p_io {
    void *ctx;
    int (*copy)(void *ctx, void *dst, const void *src, size_t len);
    /* dst[i] = op over s of srcs[s][i] in index order, cnt elements; op never AVG */
    int (*reduce)(void *ctx, coll_dtype_t dt, coll_redop_t op, void *dst, const void *const *srcs,
                  int nsrc, size_t cnt);
    int (*div)(void *ctx, coll_dtype_t dt, void *buf, size_t cnt, int divisor);
} coll_p2p_io_t;

typedef struct coll_p2p_plan {
    coll_args_t args; /* coll, count, dtype, op, root, in_place */
    int         n, me;
    size_t      es, half; /* bytes of each half of a window */
    size_t      chunk;    /* elements of each rank's input (of each block) in a round */
    int         rounds, nx;
} coll_p2p_plan_t;

/* The most ranks a plan takes (one reduction reads every rank's window at once). */
#define COLL_P2P_MAX_RANKS 16
/* The most rounds: each takes two engine exchanges, all created at the call. Larger calls are
 * staged (with the default 64 MiB windows: all-reduces of more than 64 GiB). */
#define COLL_P2P_MAX_ROUNDS 1024

/* Can windows of 2 * half bytes take this call on n ranks: a round of at least one element
 * (every element of a reduce-scatter's or all-to-all's n blocks needs a slot), and at most
 * COLL_P2P_MAX_ROUNDS rounds? */
int coll_p2p_plan_fits(const coll_args_t *a, int n, size_t half);

/* Plan a call of rank me of n (2 <= n <= COLL_P2P_MAX_RANKS) with windows of 2 * half bytes
 * that fit it. */
void coll_p2p_plan(coll_p2p_plan_t *p, const coll_args_t *a, int n, int me, size_t half);

/* Phase k of the plan on this rank: its own buffers, every rank's window (win[q]). 0, or the
 * first mover's error with *what naming the step. */
int coll_p2p_plan_phase(const coll_p2p_plan_t *p, int k, const void *sendbuf, void *recvbuf,
                        void *const *win, const coll_p2p_io_t *io, const char **what);

#endif
