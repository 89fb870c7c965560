/* SPDX-License-Identifier: MIT */
/*
 * Argument validation for every collective and point-to-point call. Computes the in-place
 * flag by NCCL's rules and rejects buffers that overlap any other way, since the result would
 * be silently wrong.
 */
#include "api/check.h"
#include "api/tune.h"
#include "error.h"

#include <stdint.h>

/* Bytes of the send and receive buffers for the call; 0 on overflow via *ovf. */
static void check_sizes(const coll_args_t *a, int n, size_t esz, size_t *sbytes, size_t *rbytes,
                        int *ovf)
{
    size_t one = a->count * esz;
    *ovf       = a->count != 0 && one / a->count != esz;
    size_t all = one * (size_t)n;
    if (one != 0 && all / (size_t)n != one) {
        *ovf = 1;
    }
    switch (a->coll) {
    case COLL_OP_REDUCE_SCATTER:
        *sbytes = all;
        *rbytes = one;
        break;
    case COLL_OP_ALLGATHER:
        *sbytes = one;
        *rbytes = all;
        break;
    case COLL_OP_ALLTOALL:
        *sbytes = all;
        *rbytes = all;
        break;
    default:
        *sbytes = one;
        *rbytes = one;
    }
}

/* Which buffers the call reads (send) and writes (recv) on rank r. */
static void check_needs(const coll_args_t *a, int r, int *need_send, int *need_recv)
{
    int is_root = a->root == r;
    *need_send  = a->coll != COLL_OP_RECV && a->coll != COLL_OP_BARRIER &&
                 (a->coll != COLL_OP_BROADCAST || is_root);
    *need_recv = a->coll != COLL_OP_SEND && a->coll != COLL_OP_BARRIER &&
                 (a->coll != COLL_OP_REDUCE || is_root);
}

void coll_call_bytes(const coll_comm_t *comm, const coll_args_t *a, size_t *sbytes, size_t *rbytes)
{
    int ovf, need_send, need_recv;
    check_sizes(a, comm->nranks, coll_dtype_size(a->dtype), sbytes, rbytes, &ovf);
    check_needs(a, comm->rank, &need_send, &need_recv);
    *sbytes = need_send ? *sbytes : 0;
    *rbytes = need_recv ? *rbytes : 0;
}

static int check_overlap(const void *a, size_t alen, const void *b, size_t blen)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return alen > 0 && blen > 0 && x < y + blen && y < x + alen;
}

static coll_result_t check_buffers(coll_comm_t *comm, const char *fn, coll_args_t *a,
                                   const void *sendbuf, const void *recvbuf, size_t sbytes,
                                   size_t rbytes)
{
    int    r   = comm->rank;
    size_t esz = coll_dtype_size(a->dtype);
    int    need_send, need_recv;
    check_needs(a, r, &need_send, &need_recv);
    if (need_send && sbytes > 0 && sendbuf == NULL) {
        return coll_comm_arg_error(comm, COLL_ERR_INVALID_ARG, "%s: sendbuf is NULL", fn);
    }
    if (need_recv && rbytes > 0 && recvbuf == NULL) {
        return coll_comm_arg_error(comm, COLL_ERR_INVALID_ARG, "%s: recvbuf is NULL", fn);
    }
    if (!need_send || !need_recv || sbytes == 0) {
        return COLL_OK;
    }
    const char *s = sendbuf, *d = recvbuf;
    switch (a->coll) {
    case COLL_OP_REDUCE_SCATTER:
        a->in_place = d == s + (size_t)r * a->count * esz;
        break;
    case COLL_OP_ALLGATHER:
        a->in_place = s == d + (size_t)r * a->count * esz;
        break;
    case COLL_OP_ALLTOALL:
        if (s == d) {
            return coll_comm_arg_error(comm, COLL_ERR_UNSUPPORTED,
                                       "%s: in-place all-to-all is not supported", fn);
        }
        break;
    default:
        a->in_place = s == d;
    }
    if (!a->in_place && check_overlap(s, sbytes, d, rbytes)) {
        return coll_comm_arg_error(comm, COLL_ERR_INVALID_ARG,
                                   "%s: sendbuf and recvbuf overlap but the call is not in place "
                                   "(see coll.h for the in-place rule)",
                                   fn);
    }
    return COLL_OK;
}

coll_result_t coll_check_call(coll_comm_t *comm, const char *fn, coll_args_t *a,
                              const void *sendbuf, const void *recvbuf)
{
    size_t sbytes, rbytes;
    int    ovf;
    COLL_CHECK(coll_comm_check_handle(comm, fn));
    if (comm->error != COLL_OK) {
        return coll_set_last_error(comm->error, "%s: communicator already failed: %s", fn,
                                   comm->last_error);
    }
    if ((unsigned)a->dtype >= COLL_DTYPE_COUNT) {
        return coll_comm_arg_error(comm, COLL_ERR_INVALID_ARG,
                                   "%s: dtype %d is invalid (expected 0..%d)", fn, (int)a->dtype,
                                   COLL_DTYPE_COUNT - 1);
    }
    if ((unsigned)a->op >= COLL_REDOP_COUNT) {
        return coll_comm_arg_error(comm, COLL_ERR_INVALID_ARG,
                                   "%s: op %d is invalid (expected 0..%d)", fn, (int)a->op,
                                   COLL_REDOP_COUNT - 1);
    }
    int rooted = a->coll == COLL_OP_BROADCAST || a->coll == COLL_OP_REDUCE;
    int p2p    = a->coll == COLL_OP_SEND || a->coll == COLL_OP_RECV;
    if ((rooted || p2p) && (a->root < 0 || a->root >= comm->nranks)) {
        return coll_comm_arg_error(comm, COLL_ERR_INVALID_ARG,
                                   "%s: %s %d is out of range (communicator has %d ranks)", fn,
                                   p2p ? "peer" : "root", a->root, comm->nranks);
    }
    if (p2p && a->root == comm->rank) {
        return coll_comm_arg_error(comm, COLL_ERR_INVALID_ARG,
                                   "%s: peer %d is the calling rank itself", fn, a->root);
    }
    check_sizes(a, comm->nranks, coll_dtype_size(a->dtype), &sbytes, &rbytes, &ovf);
    if (ovf || sbytes > ((size_t)1 << 47) || rbytes > ((size_t)1 << 47)) {
        return coll_comm_arg_error(comm, COLL_ERR_INVALID_ARG,
                                   "%s: count %zu of %s is too large (byte size overflows)", fn,
                                   a->count, coll_dtype_name(a->dtype));
    }
    a->chunk_bytes = coll_tune_chunk_bytes();
    return check_buffers(comm, fn, a, sendbuf, recvbuf, sbytes, rbytes);
}
