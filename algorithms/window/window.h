/* SPDX-License-Identifier: MIT */
/*
 * All-reduce through shared windows, for communicators whose ranks all share one host's memory
 * (args->layout->shared_window). One-shot: every rank puts its input in its window and reduces
 * all windows into its output. Two-shot: every rank puts its input, reduces one segment of
 * all windows, puts that back, and gathers every rank's reduced segment. Both reduce in rank
 * order 0, 1, ..., n-1 so every rank ends with the same bits. common.c holds what both share.
 */
#ifndef COLL_WINDOW_H
#define COLL_WINDOW_H

#include "algo.h"

int           coll_oneshot_supported(int nranks, const coll_args_t *args);
coll_result_t coll_oneshot_build(int rank, int nranks, const coll_args_t *args, coll_sched_t *s);
int           coll_twoshot_supported(int nranks, const coll_args_t *args);
coll_result_t coll_twoshot_build(int rank, int nranks, const coll_args_t *args, coll_sched_t *s);

/* ---- common.c ---- */

/* Can this all-reduce use the windows, needing `need` bytes of each rank's window? */
int coll_win_fits(int nranks, const coll_args_t *args, uint64_t need);
/* Elements per piece when count elements are cut into at most max_pieces pieces, each about
 * args->chunk_bytes (at least one element; 0 when count is 0). */
size_t coll_win_piece(const coll_args_t *args, size_t count, uint32_t max_pieces);
/* nranks == 1 or count == 0: the copy (out of place) that is all there is to do. */
coll_result_t coll_win_trivial(int nranks, const coll_args_t *args, coll_sched_t *s);
/*
 * Reduce bytes [off, off + len) of every rank's window, published under slot, into RECV at off,
 * in rank order. Rank 0 starts from its own input `in` (same bits as its window) instead of its
 * window. after: a step that must finish before RECV is written (-1: none). With avg the range
 * is divided by nranks at the end. Returns the last step.
 */
int coll_win_reduce_chain(coll_sched_t *s, uint32_t slot, uint64_t off, uint64_t len,
                          coll_buf_id_t in, int after, int avg);

#endif
