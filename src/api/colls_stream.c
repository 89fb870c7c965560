/* SPDX-License-Identifier: MIT */
/* The stream-ordered collectives (coll.h): check the arguments, then enqueue (src/cuda/). */
#include "api/check.h"
#include "cuda/cuda.h"
#include "error.h"

static coll_result_t stream_start(coll_comm_t *comm, const char *fn, coll_args_t *a,
                                  const void *sendbuf, void *recvbuf, coll_stream_t stream)
{
    COLL_CHECK(coll_check_call(comm, fn, a, sendbuf, recvbuf));
    return coll_cuda_start(comm, a, sendbuf, recvbuf, stream, 1, NULL);
}

#define STREAM_ARGS(_coll, _count, _dtype, _op, _root)                                             \
    {                                                                                              \
        .coll = (_coll), .count = (_count), .dtype = (_dtype), .op = (_op), .root = (_root)        \
    }

COLL_API coll_result_t coll_allreduce_stream(const void *sendbuf, void *recvbuf, size_t count,
                                             coll_dtype_t dtype, coll_redop_t op, coll_comm_t *comm,
                                             coll_stream_t stream)
{
    coll_args_t a = STREAM_ARGS(COLL_OP_ALLREDUCE, count, dtype, op, -1);
    return stream_start(comm, "coll_allreduce_stream", &a, sendbuf, recvbuf, stream);
}

COLL_API coll_result_t coll_reduce_scatter_stream(const void *sendbuf, void *recvbuf,
                                                  size_t recvcount, coll_dtype_t dtype,
                                                  coll_redop_t op, coll_comm_t *comm,
                                                  coll_stream_t stream)
{
    coll_args_t a = STREAM_ARGS(COLL_OP_REDUCE_SCATTER, recvcount, dtype, op, -1);
    return stream_start(comm, "coll_reduce_scatter_stream", &a, sendbuf, recvbuf, stream);
}

COLL_API coll_result_t coll_allgather_stream(const void *sendbuf, void *recvbuf, size_t sendcount,
                                             coll_dtype_t dtype, coll_comm_t *comm,
                                             coll_stream_t stream)
{
    coll_args_t a = STREAM_ARGS(COLL_OP_ALLGATHER, sendcount, dtype, COLL_SUM, -1);
    return stream_start(comm, "coll_allgather_stream", &a, sendbuf, recvbuf, stream);
}

COLL_API coll_result_t coll_broadcast_stream(const void *sendbuf, void *recvbuf, size_t count,
                                             coll_dtype_t dtype, int root, coll_comm_t *comm,
                                             coll_stream_t stream)
{
    coll_args_t a = STREAM_ARGS(COLL_OP_BROADCAST, count, dtype, COLL_SUM, root);
    return stream_start(comm, "coll_broadcast_stream", &a, sendbuf, recvbuf, stream);
}

COLL_API coll_result_t coll_reduce_stream(const void *sendbuf, void *recvbuf, size_t count,
                                          coll_dtype_t dtype, coll_redop_t op, int root,
                                          coll_comm_t *comm, coll_stream_t stream)
{
    coll_args_t a = STREAM_ARGS(COLL_OP_REDUCE, count, dtype, op, root);
    return stream_start(comm, "coll_reduce_stream", &a, sendbuf, recvbuf, stream);
}

COLL_API coll_result_t coll_alltoall_stream(const void *sendbuf, void *recvbuf, size_t count,
                                            coll_dtype_t dtype, coll_comm_t *comm,
                                            coll_stream_t stream)
{
    coll_args_t a = STREAM_ARGS(COLL_OP_ALLTOALL, count, dtype, COLL_SUM, -1);
    return stream_start(comm, "coll_alltoall_stream", &a, sendbuf, recvbuf, stream);
}

COLL_API coll_result_t coll_send_stream(const void *buf, size_t count, coll_dtype_t dtype, int peer,
                                        coll_comm_t *comm, coll_stream_t stream)
{
    coll_args_t a = STREAM_ARGS(COLL_OP_SEND, count, dtype, COLL_SUM, peer);
    return stream_start(comm, "coll_send_stream", &a, buf, NULL, stream);
}

COLL_API coll_result_t coll_recv_stream(void *buf, size_t count, coll_dtype_t dtype, int peer,
                                        coll_comm_t *comm, coll_stream_t stream)
{
    coll_args_t a = STREAM_ARGS(COLL_OP_RECV, count, dtype, COLL_SUM, peer);
    return stream_start(comm, "coll_recv_stream", &a, NULL, buf, stream);
}
