/* SPDX-License-Identifier: MIT */
/*
 * The public collectives and point-to-point calls: check the arguments, start the operation
 * in the engine, and for the blocking forms wait for it. A blocking call is its non-blocking
 * twin followed by coll_wait, except where it takes a path of its own among the ranks of one
 * host (src/engine/small.c, src/engine/direct.c): there, as in MPI, it matches only blocking
 * calls.
 */
#include "api/check.h"
#include "bootstrap/bootstrap.h"
#include "cuda/cuda.h"
#include "engine/engine.h"
#include "error.h"
#include "util.h"

/* A rank's death must not go unnoticed when no call happens to wait on it (a reduce's senders,
 * a broadcast's root with a dead leaf finish at once): before starting a call, look at the
 * bootstrap's notices, at most once a millisecond (one poll(2) of a socket) and every 16th call. */
static void colls_notice_failures(coll_comm_t *comm)
{
    char   msg[256];
    double now;
    if (comm->bs == NULL || comm->error != COLL_OK || (comm->notices_calls++ & 15u) != 0) {
        return; /* the clock itself is read once every 16 calls */
    }
    now = coll_time_s();
    if (now - comm->notices_polled < 1e-3) {
        return;
    }
    comm->notices_polled = now;
    coll_result_t st     = coll_bootstrap_poll(comm->bs, msg, sizeof(msg));
    if (st != COLL_OK) {
        coll_comm_fail(comm, st, "rank %d: %s", comm->rank, msg);
    }
}

/* Start a call; *req_p NULL (with blocking set) when it already ran to the end. */
static coll_result_t colls_start_ex(coll_comm_t *comm, const char *fn, coll_args_t *a,
                                    const void *sendbuf, void *recvbuf, coll_request_t **req_p,
                                    int blocking)
{
    coll_task_t  *req;
    coll_result_t st;
    if (req_p == NULL) {
        COLL_CHECK(coll_comm_check_handle(comm, fn));
        return coll_comm_arg_error(comm, COLL_ERR_INVALID_ARG, "%s: req_p is NULL", fn);
    }
    *req_p = NULL;
    COLL_CHECK(coll_check_call(comm, fn, a, sendbuf, recvbuf));
    if (coll_cuda_call_on_device(comm, a, sendbuf, recvbuf)) {
        /* CUDA-aware MPI's semantics: after the legacy default stream's work, done at wait */
        return coll_cuda_start(comm, a, sendbuf, recvbuf, NULL, 0, req_p);
    }
    pthread_mutex_lock(&comm->lock);
    coll_comm_record_flags(comm);
    colls_notice_failures(comm);
    if (comm->error != COLL_OK) {
        pthread_mutex_unlock(&comm->lock);
        return coll_set_last_error(comm->error, "%s", comm->last_error);
    }
    if (blocking && coll_small_eligible(comm, a)) { /* done here: no request (src/engine/small.c) */
        st = coll_small_run(comm, a, sendbuf, recvbuf);
        if (st != COLL_OK) {
            coll_engine_fail_all(comm, st); /* in-flight calls end with it */
            st = coll_set_last_error(st, "%s", comm->last_error);
        }
        pthread_mutex_unlock(&comm->lock);
        return st;
    }
    if (blocking && coll_direct_eligible(comm, a)) { /* one host, one copy (src/engine/direct.c) */
        st = coll_direct_run(comm, a, sendbuf, recvbuf);
        if (st != COLL_INPROGRESS) {
            if (st != COLL_OK) {
                coll_engine_fail_all(comm, st);
                st = coll_set_last_error(st, "%s", comm->last_error);
            }
            pthread_mutex_unlock(&comm->lock);
            return st;
        }
    }
    st = coll_engine_start(comm, a, sendbuf, recvbuf, &req);
    pthread_mutex_unlock(&comm->lock);
    if (st == COLL_OK) {
        *req_p = req;
    }
    return st;
}

int coll_call_runs_inline(coll_comm_t *comm, int coll, const void *sendbuf, void *recvbuf,
                          size_t count, coll_dtype_t dtype, coll_redop_t op)
{
    coll_args_t a = {.coll = coll, .count = count, .dtype = dtype, .op = op, .root = -1};
    int         yes;

    if ((coll != COLL_OP_ALLREDUCE && coll != COLL_OP_REDUCE_SCATTER &&
         coll != COLL_OP_ALLGATHER) ||
        coll_check_call(comm, "coll_call_runs_inline", &a, sendbuf, recvbuf) != COLL_OK ||
        coll_cuda_call_on_device(comm, &a, sendbuf, recvbuf)) {
        return 0;
    }
    pthread_mutex_lock(&comm->lock);
    yes =
        comm->error == COLL_OK && (coll_small_eligible(comm, &a) || coll_direct_eligible(comm, &a));
    pthread_mutex_unlock(&comm->lock);
    return yes;
}

static coll_result_t colls_start(coll_comm_t *comm, const char *fn, coll_args_t *a,
                                 const void *sendbuf, void *recvbuf, coll_request_t **req_p)
{
    return colls_start_ex(comm, fn, a, sendbuf, recvbuf, req_p, 0);
}

static coll_result_t colls_run(coll_comm_t *comm, const char *fn, coll_args_t *a,
                               const void *sendbuf, void *recvbuf)
{
    coll_request_t *req;
    COLL_CHECK(colls_start_ex(comm, fn, a, sendbuf, recvbuf, &req, 1));
    if (req == NULL) {
        return COLL_OK;
    }
    return req->devop != NULL ? coll_cuda_wait(req) : coll_engine_wait(req);
}

#define COLLS_ARGS(_coll, _count, _dtype, _op, _root)                                              \
    {                                                                                              \
        .coll = (_coll), .count = (_count), .dtype = (_dtype), .op = (_op), .root = (_root)        \
    }

COLL_API coll_result_t coll_iallreduce(const void *sendbuf, void *recvbuf, size_t count,
                                       coll_dtype_t dtype, coll_redop_t op, coll_comm_t *comm,
                                       coll_request_t **req_p)
{
    coll_args_t a = COLLS_ARGS(COLL_OP_ALLREDUCE, count, dtype, op, -1);
    return colls_start(comm, "coll_iallreduce", &a, sendbuf, recvbuf, req_p);
}

COLL_API coll_result_t coll_allreduce(const void *sendbuf, void *recvbuf, size_t count,
                                      coll_dtype_t dtype, coll_redop_t op, coll_comm_t *comm)
{
    coll_args_t a = COLLS_ARGS(COLL_OP_ALLREDUCE, count, dtype, op, -1);
    return colls_run(comm, "coll_allreduce", &a, sendbuf, recvbuf);
}

COLL_API coll_result_t coll_ireduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                            coll_dtype_t dtype, coll_redop_t op, coll_comm_t *comm,
                                            coll_request_t **req_p)
{
    coll_args_t a = COLLS_ARGS(COLL_OP_REDUCE_SCATTER, recvcount, dtype, op, -1);
    return colls_start(comm, "coll_ireduce_scatter", &a, sendbuf, recvbuf, req_p);
}

COLL_API coll_result_t coll_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                           coll_dtype_t dtype, coll_redop_t op, coll_comm_t *comm)
{
    coll_args_t a = COLLS_ARGS(COLL_OP_REDUCE_SCATTER, recvcount, dtype, op, -1);
    return colls_run(comm, "coll_reduce_scatter", &a, sendbuf, recvbuf);
}

COLL_API coll_result_t coll_iallgather(const void *sendbuf, void *recvbuf, size_t sendcount,
                                       coll_dtype_t dtype, coll_comm_t *comm,
                                       coll_request_t **req_p)
{
    coll_args_t a = COLLS_ARGS(COLL_OP_ALLGATHER, sendcount, dtype, COLL_SUM, -1);
    return colls_start(comm, "coll_iallgather", &a, sendbuf, recvbuf, req_p);
}

COLL_API coll_result_t coll_allgather(const void *sendbuf, void *recvbuf, size_t sendcount,
                                      coll_dtype_t dtype, coll_comm_t *comm)
{
    coll_args_t a = COLLS_ARGS(COLL_OP_ALLGATHER, sendcount, dtype, COLL_SUM, -1);
    return colls_run(comm, "coll_allgather", &a, sendbuf, recvbuf);
}

COLL_API coll_result_t coll_ibroadcast(const void *sendbuf, void *recvbuf, size_t count,
                                       coll_dtype_t dtype, int root, coll_comm_t *comm,
                                       coll_request_t **req_p)
{
    coll_args_t a = COLLS_ARGS(COLL_OP_BROADCAST, count, dtype, COLL_SUM, root);
    return colls_start(comm, "coll_ibroadcast", &a, sendbuf, recvbuf, req_p);
}

COLL_API coll_result_t coll_broadcast(const void *sendbuf, void *recvbuf, size_t count,
                                      coll_dtype_t dtype, int root, coll_comm_t *comm)
{
    coll_args_t a = COLLS_ARGS(COLL_OP_BROADCAST, count, dtype, COLL_SUM, root);
    return colls_run(comm, "coll_broadcast", &a, sendbuf, recvbuf);
}

COLL_API coll_result_t coll_ireduce(const void *sendbuf, void *recvbuf, size_t count,
                                    coll_dtype_t dtype, coll_redop_t op, int root,
                                    coll_comm_t *comm, coll_request_t **req_p)
{
    coll_args_t a = COLLS_ARGS(COLL_OP_REDUCE, count, dtype, op, root);
    return colls_start(comm, "coll_ireduce", &a, sendbuf, recvbuf, req_p);
}

COLL_API coll_result_t coll_reduce(const void *sendbuf, void *recvbuf, size_t count,
                                   coll_dtype_t dtype, coll_redop_t op, int root, coll_comm_t *comm)
{
    coll_args_t a = COLLS_ARGS(COLL_OP_REDUCE, count, dtype, op, root);
    return colls_run(comm, "coll_reduce", &a, sendbuf, recvbuf);
}

COLL_API coll_result_t coll_ialltoall(const void *sendbuf, void *recvbuf, size_t count,
                                      coll_dtype_t dtype, coll_comm_t *comm, coll_request_t **req_p)
{
    coll_args_t a = COLLS_ARGS(COLL_OP_ALLTOALL, count, dtype, COLL_SUM, -1);
    return colls_start(comm, "coll_ialltoall", &a, sendbuf, recvbuf, req_p);
}

COLL_API coll_result_t coll_alltoall(const void *sendbuf, void *recvbuf, size_t count,
                                     coll_dtype_t dtype, coll_comm_t *comm)
{
    coll_args_t a = COLLS_ARGS(COLL_OP_ALLTOALL, count, dtype, COLL_SUM, -1);
    return colls_run(comm, "coll_alltoall", &a, sendbuf, recvbuf);
}

COLL_API coll_result_t coll_ibarrier(coll_comm_t *comm, coll_request_t **req_p)
{
    coll_args_t a = COLLS_ARGS(COLL_OP_BARRIER, 0, COLL_UINT8, COLL_SUM, -1);
    return colls_start(comm, "coll_ibarrier", &a, NULL, NULL, req_p);
}

COLL_API coll_result_t coll_barrier(coll_comm_t *comm)
{
    coll_args_t a = COLLS_ARGS(COLL_OP_BARRIER, 0, COLL_UINT8, COLL_SUM, -1);
    return colls_run(comm, "coll_barrier", &a, NULL, NULL);
}

COLL_API coll_result_t coll_isend(const void *buf, size_t count, coll_dtype_t dtype, int peer,
                                  coll_comm_t *comm, coll_request_t **req_p)
{
    coll_args_t a = COLLS_ARGS(COLL_OP_SEND, count, dtype, COLL_SUM, peer);
    return colls_start(comm, "coll_isend", &a, buf, NULL, req_p);
}

COLL_API coll_result_t coll_send(const void *buf, size_t count, coll_dtype_t dtype, int peer,
                                 coll_comm_t *comm)
{
    coll_args_t a = COLLS_ARGS(COLL_OP_SEND, count, dtype, COLL_SUM, peer);
    return colls_run(comm, "coll_send", &a, buf, NULL);
}

COLL_API coll_result_t coll_irecv(void *buf, size_t count, coll_dtype_t dtype, int peer,
                                  coll_comm_t *comm, coll_request_t **req_p)
{
    coll_args_t a = COLLS_ARGS(COLL_OP_RECV, count, dtype, COLL_SUM, peer);
    return colls_start(comm, "coll_irecv", &a, NULL, buf, req_p);
}

COLL_API coll_result_t coll_recv(void *buf, size_t count, coll_dtype_t dtype, int peer,
                                 coll_comm_t *comm)
{
    coll_args_t a = COLLS_ARGS(COLL_OP_RECV, count, dtype, COLL_SUM, peer);
    return colls_run(comm, "coll_recv", &a, NULL, buf);
}
