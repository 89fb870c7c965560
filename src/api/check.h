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

#endif
