/* SPDX-License-Identifier: MIT */
/*
 * NCCL's collectives and send/recv on libcoll. With a stream, the call goes to libcoll's
 * stream-ordered form (enqueued, NCCL's semantics) where libcoll has CUDA; otherwise, and for
 * host memory, it runs on the host: at once outside a group (returning when done), started
 * inside one and waited at ncclGroupEnd.
 */
#include "nccl_internal.h"

#include <stdint.h>
#include <stdlib.h>

#define NCCL_SHIM_VISIBLE __attribute__((visibility("default")))

typedef enum {
    K_ALLREDUCE,
    K_REDUCE_SCATTER,
    K_ALLGATHER,
    K_BROADCAST,
    K_REDUCE,
    K_SEND,
    K_RECV
} kind_t;

typedef struct {
    kind_t       kind;
    const void  *s;
    void        *r;
    size_t       count;
    coll_dtype_t dt;
    coll_redop_t op;
    int          root; /* or peer */
} call_t;

static coll_result_t start_host(const call_t *c, coll_comm_t *cc, coll_request_t **req)
{
    switch (c->kind) {
    case K_ALLREDUCE:
        return coll_iallreduce(c->s, c->r, c->count, c->dt, c->op, cc, req);
    case K_REDUCE_SCATTER:
        return coll_ireduce_scatter(c->s, c->r, c->count, c->dt, c->op, cc, req);
    case K_ALLGATHER:
        return coll_iallgather(c->s, c->r, c->count, c->dt, cc, req);
    case K_BROADCAST:
        return coll_ibroadcast(c->s, c->r, c->count, c->dt, c->root, cc, req);
    case K_REDUCE:
        return coll_ireduce(c->s, c->r, c->count, c->dt, c->op, c->root, cc, req);
    case K_SEND:
        return coll_isend(c->s, c->count, c->dt, c->root, cc, req);
    default:
        return coll_irecv(c->r, c->count, c->dt, c->root, cc, req);
    }
}

static coll_result_t start_stream(const call_t *c, coll_comm_t *cc, cudaStream_t st)
{
    coll_stream_t s = (coll_stream_t)st;
    switch (c->kind) {
    case K_ALLREDUCE:
        return coll_allreduce_stream(c->s, c->r, c->count, c->dt, c->op, cc, s);
    case K_REDUCE_SCATTER:
        return coll_reduce_scatter_stream(c->s, c->r, c->count, c->dt, c->op, cc, s);
    case K_ALLGATHER:
        return coll_allgather_stream(c->s, c->r, c->count, c->dt, cc, s);
    case K_BROADCAST:
        return coll_broadcast_stream(c->s, c->r, c->count, c->dt, c->root, cc, s);
    case K_REDUCE:
        return coll_reduce_stream(c->s, c->r, c->count, c->dt, c->op, c->root, cc, s);
    case K_SEND:
        return coll_send_stream(c->s, c->count, c->dt, c->root, cc, s);
    default:
        return coll_recv_stream(c->r, c->count, c->dt, c->root, cc, s);
    }
}

/* A send or receive between the calling rank and itself: as in NCCL, only with its partner in
 * the same group, copied at ncclGroupEnd (after the stream's earlier work); on memory the host
 * can read. */
static ncclResult_t self_call(const char *fn, const call_t *c, ncclComm_t comm, cudaStream_t stream)
{
    void        *buf   = c->kind == K_SEND ? (void *)c->s : c->r;
    size_t       es    = coll_dtype_size(c->dt);
    size_t       bytes = c->count * es;
    ncclResult_t r     = ncclSuccess;

    if (nccl_group_depth() == 0) {
        r = nccl_fail(NULL, ncclInvalidUsage,
                      "%s: peer %d is the calling rank itself: a send to itself and its receive "
                      "go in one ncclGroupStart/ncclGroupEnd",
                      fn, c->root);
    } else if (c->count > ((size_t)1 << 47) / es) {
        r = nccl_fail(NULL, ncclInvalidArgument, "%s: count %zu is too large", fn, c->count);
    } else if (c->count > 0 && buf == NULL) {
        r = nccl_fail(NULL, ncclInvalidArgument, "%s: %s is NULL", fn,
                      c->kind == K_SEND ? "sendbuff" : "recvbuff");
    } else if (c->count > 0 && !nccl_host_readable(buf, bytes)) {
        r = nccl_fail(NULL, ncclInvalidArgument,
                      "%s: a send to the rank itself takes memory the host can read; %p is not "
                      "(device memory?)",
                      fn, buf);
    } else {
        r = nccl_group_add_self(comm, c->kind == K_SEND, buf, bytes, stream);
    }
    if (r != ncclSuccess && nccl_group_depth() > 0) {
        nccl_group_note_error(r);
    }
    return r;
}

static ncclResult_t nccl_call(const char *fn, call_t c, ncclDataType_t dt, ncclRedOp_t op,
                              ncclComm_t comm, cudaStream_t stream)
{
    coll_request_t *req;
    void           *tmp = NULL;
    ncclResult_t    r   = nccl_check_comm(comm, fn);
    if (r == ncclSuccess && ((unsigned)dt >= ncclNumTypes)) {
        r = nccl_fail(comm, ncclInvalidArgument, "%s: datatype %d: expected 0 <= datatype < %d", fn,
                      (int)dt, ncclNumTypes);
    }
    c.dt = (coll_dtype_t)dt;
    if (r == ncclSuccess && (c.kind == K_SEND || c.kind == K_RECV) && c.root == comm->rank) {
        return self_call(fn, &c, comm, stream);
    }
    if (r == ncclSuccess &&
        (c.kind == K_ALLREDUCE || c.kind == K_REDUCE_SCATTER || c.kind == K_REDUCE)) {
        size_t n = c.count;
        if (c.kind == K_REDUCE_SCATTER && n > SIZE_MAX / (size_t)comm->nranks) {
            n = SIZE_MAX; /* refused as too large */
        } else if (c.kind == K_REDUCE_SCATTER) {
            n *= (size_t)comm->nranks;
        }
        r = nccl_premul_apply(comm, fn, op, dt, n, stream, &c.s, &tmp, &c.op);
    }
    if (r != ncclSuccess) {
        if (nccl_group_depth() > 0) {
            nccl_group_note_error(r);
        }
        return r;
    }
    if (stream != NULL && tmp == NULL) {
        coll_result_t st = start_stream(&c, comm->c, stream);
        if (st != COLL_ERR_UNSUPPORTED) { /* else: no CUDA here, run it on the host */
            return st == COLL_OK ? ncclSuccess
                                 : nccl_fail(comm, nccl_result(st), "%s: %s", fn,
                                             coll_comm_last_error(comm->c));
        }
    }
    coll_result_t st = start_host(&c, comm->c, &req);
    if (st == COLL_OK && nccl_group_depth() > 0) {
        return nccl_group_add(comm, req, tmp);
    }
    if (st == COLL_OK) {
        st = coll_wait(req);
    }
    free(tmp);
    if (st != COLL_OK) {
        r = nccl_fail(comm, nccl_result(st), "%s: %s", fn, coll_comm_last_error(comm->c));
        if (nccl_group_depth() > 0) {
            nccl_group_note_error(r);
        }
        return r;
    }
    return ncclSuccess;
}

NCCL_SHIM_VISIBLE ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                                             ncclDataType_t datatype, ncclRedOp_t op,
                                             ncclComm_t comm, cudaStream_t stream)
{
    call_t c = {.kind = K_ALLREDUCE, .s = sendbuff, .r = recvbuff, .count = count};
    return nccl_call("ncclAllReduce", c, datatype, op, comm, stream);
}

NCCL_SHIM_VISIBLE ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff,
                                                 size_t recvcount, ncclDataType_t datatype,
                                                 ncclRedOp_t op, ncclComm_t comm,
                                                 cudaStream_t stream)
{
    call_t c = {.kind = K_REDUCE_SCATTER, .s = sendbuff, .r = recvbuff, .count = recvcount};
    return nccl_call("ncclReduceScatter", c, datatype, op, comm, stream);
}

NCCL_SHIM_VISIBLE ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                                             ncclDataType_t datatype, ncclComm_t comm,
                                             cudaStream_t stream)
{
    call_t c = {.kind = K_ALLGATHER, .s = sendbuff, .r = recvbuff, .count = sendcount};
    return nccl_call("ncclAllGather", c, datatype, ncclSum, comm, stream);
}

NCCL_SHIM_VISIBLE ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                                             ncclDataType_t datatype, int root, ncclComm_t comm,
                                             cudaStream_t stream)
{
    call_t c = {.kind = K_BROADCAST, .s = sendbuff, .r = recvbuff, .count = count, .root = root};
    return nccl_call("ncclBroadcast", c, datatype, ncclSum, comm, stream);
}

NCCL_SHIM_VISIBLE ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype,
                                         int root, ncclComm_t comm, cudaStream_t stream)
{
    call_t c = {.kind = K_BROADCAST, .s = buff, .r = buff, .count = count, .root = root};
    return nccl_call("ncclBcast", c, datatype, ncclSum, comm, stream);
}

NCCL_SHIM_VISIBLE ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count,
                                          ncclDataType_t datatype, ncclRedOp_t op, int root,
                                          ncclComm_t comm, cudaStream_t stream)
{
    call_t c = {.kind = K_REDUCE, .s = sendbuff, .r = recvbuff, .count = count, .root = root};
    return nccl_call("ncclReduce", c, datatype, op, comm, stream);
}

NCCL_SHIM_VISIBLE ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype,
                                        int peer, ncclComm_t comm, cudaStream_t stream)
{
    call_t c = {.kind = K_SEND, .s = sendbuff, .count = count, .root = peer};
    return nccl_call("ncclSend", c, datatype, ncclSum, comm, stream);
}

NCCL_SHIM_VISIBLE ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype,
                                        int peer, ncclComm_t comm, cudaStream_t stream)
{
    call_t c = {.kind = K_RECV, .r = recvbuff, .count = count, .root = peer};
    return nccl_call("ncclRecv", c, datatype, ncclSum, comm, stream);
}
