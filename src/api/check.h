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

#endif
