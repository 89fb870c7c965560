/* SPDX-License-Identifier: MIT */
/*
 * Simple point-to-point algorithms: pairwise alltoall, dissemination barrier and the direct
 * send/recv used by coll_send/coll_recv. Pure schedule construction; the cost model and the
 * algorithm table live in registry.c.
 */
#ifndef COLL_ALGO_BASIC_H
#define COLL_ALGO_BASIC_H

#include "algo.h"

/* Rounds k = 1 .. n-1: block (r+k)%n goes to rank (r+k)%n, block (r-k)%n arrives from there;
 * each block chunked; plus a local copy of the own block. In place is not supported. */
coll_result_t coll_pairwise_alltoall_build(int rank, int nranks, const coll_args_t *args,
                                           coll_sched_t *s);

/* ceil(log2 n) rounds of zero-byte messages to (r + 2^k) % n; round k waits for round k-1. */
coll_result_t coll_dissemination_barrier_build(int rank, int nranks, const coll_args_t *args,
                                               coll_sched_t *s);

/* Bruck allgather: ceil(log2 n) rounds; round k sends the first min(2^k, n - 2^k) blocks of a
 * rotated scratch copy to rank - 2^k and appends as many from rank + 2^k; then one local
 * rotation into recvbuf. Any n; for small and medium messages. */
coll_result_t coll_bruck_allgather_build(int rank, int nranks, const coll_args_t *args,
                                         coll_sched_t *s);

/* COLL_OP_SEND: sendbuf to args->root; COLL_OP_RECV: recvbuf from args->root; chunked. */
coll_result_t coll_direct_build(int rank, int nranks, const coll_args_t *args, coll_sched_t *s);

/* Elements per chunk (>= 1) and the chunk count of count elements; COLL_ERR_UNSUPPORTED (and
 * one log line) when the chunk indices would not fit in 32-bit tags. */
coll_result_t coll_basic_chunks(const coll_args_t *args, size_t count, const char *what,
                                size_t *chunk_elems_p, uint32_t *nchunks_p);

#endif
