/* SPDX-License-Identifier: MIT */
/*
 * The one argument checker of every public collective (NCCL's ArgsCheck): handle, dtype, op,
 * root/peer, counts that overflow, NULL buffers, partial overlap, and the in-place rules.
 * A failure names the function, the argument, the rank and what was expected.
 */
#ifndef COLL_API_CHECK_H
#define COLL_API_CHECK_H

#include "algo.h"
#include "api/comm.h"

coll_result_t coll_check_call(coll_comm_t *comm, const char *fn, coll_args_t *args,
                              const void *sendbuf, const void *recvbuf);
/* Bytes this rank reads from sendbuf and writes to recvbuf in a checked call (0: not used). */
void coll_call_bytes(const coll_comm_t *comm, const coll_args_t *a, size_t *sbytes, size_t *rbytes);
/* 1 when the blocking all-reduce, reduce-scatter or all-gather (coll: COLL_OP_*) with these
 * arguments would enter the inline paths among the ranks of one host (the small-call or direct
 * path, src/api/colls.c), a choice every rank makes alike (a direct call whose buffers the
 * ranks cannot reach still goes to the engine, after they agree on it); 0 otherwise, and for
 * arguments the call itself would refuse (warned about here too). Such a call matches only
 * blocking calls: a caller that keeps non-blocking calls in flight ends them first. */
int coll_call_runs_inline(coll_comm_t *comm, int coll, const void *sendbuf, void *recvbuf,
                          size_t count, coll_dtype_t dtype, coll_redop_t op);

#endif
