/* SPDX-License-Identifier: MIT */
/* Internals of the NCCL-compatible library: the communicator wrapper, result mapping, groups. */
#ifndef COLL_NCCL_INTERNAL_H
#define COLL_NCCL_INTERNAL_H

#include "nccl.h"
#include <coll.h>

#define NCCL_SHIM_MAX_OPS 64 /* PreMulSum operators alive at once per communicator */

typedef struct {
    int                   used;
    ncclDataType_t        dtype;
    ncclScalarResidence_t residence;
    const void           *ptr;     /* ncclScalarDevice: read at each call */
    double                value;   /* ncclScalarHostImmediate, as a double */
    unsigned char         raw[16]; /* ... and its bytes, for the 64-bit integers */
} nccl_premul_t;

/* Ranks of one communicator created together in this process (ncclCommInitAll, or several
 * ncclCommInitRank in one group): libcoll's destroy is collective, so they are destroyed
 * together, concurrently, once the program has asked to destroy each of them. */
typedef struct nccl_siblings {
    int               n, left;
    struct ncclComm **comms;
} nccl_siblings_t;

struct ncclComm {
    coll_comm_t     *c;
    nccl_siblings_t *siblings;
    int              destroy_asked;
    int              rank, nranks, device;
    int              finalized;
    ncclResult_t     async; /* first error of a call that already returned */
    nccl_premul_t    ops[NCCL_SHIM_MAX_OPS];
};

/* libcoll's result as NCCL's; records nothing. */
ncclResult_t nccl_result(coll_result_t st);
/* The comm argument must be a live communicator. */
ncclResult_t nccl_check_comm(ncclComm_t comm, const char *fn);
/* Remember an error of comm for ncclGetLastError/ncclCommGetAsyncError; returns r. */
ncclResult_t nccl_fail(ncclComm_t comm, ncclResult_t r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Make comms[0..n) siblings (see nccl_siblings_t). */
void nccl_make_siblings(ncclComm_t *comms, int n);

/* ---- groups (nccl_group.c) ---- */
int nccl_group_depth(void);
/* Inside a group: keep req to be waited at ncclGroupEnd (and the temporary buffer to free). */
ncclResult_t nccl_group_add(ncclComm_t comm, coll_request_t *req, void *tmp);
/* Inside a group: a send (send = 1) or receive of bytes at buf to or from the calling rank
 * itself; at ncclGroupEnd the k-th send of comm to itself is copied into its k-th receive. */
ncclResult_t nccl_group_add_self(ncclComm_t comm, int send, void *buf, size_t bytes,
                                 cudaStream_t stream);

/* Inside a group: ncclCommSplit of comm, made at ncclGroupEnd (concurrently with the group's
 * other splits and inits, one thread each); *newcomm is set there. */
ncclResult_t nccl_group_defer_split(ncclComm_t comm, int color, int key, ncclComm_t *newcomm);
/* ncclCommSplit at once (arguments checked): *newcomm NULL for NCCL_SPLIT_NOCOLOR. */
ncclResult_t nccl_split_now(ncclComm_t comm, int color, int key, ncclComm_t *newcomm);
void         nccl_group_note_error(ncclResult_t r);

/* ---- buffers and streams seen from the host (nccl_mem.c) ---- */
/* Can this process read [p, p + n), n > 0? No for device memory; yes where it cannot tell. */
int nccl_host_readable(const void *p, size_t n);
/* Wait for the work queued on stream (NULL: the legacy default stream) so far, where the
 * process has the CUDA driver loaded. */
void nccl_stream_sync(cudaStream_t stream);

/* ---- PreMulSum (nccl_premul.c) ---- */
/* For op >= ncclNumOps: the scaled copy of sendbuff (count elements) to reduce with a sum,
 * malloc'd into *tmp_p; for a built-in op *tmp_p = NULL and *sendbuff_p is untouched. */
ncclResult_t nccl_premul_apply(ncclComm_t comm, const char *fn, ncclRedOp_t op, ncclDataType_t dt,
                               size_t count, cudaStream_t stream, const void **sendbuff_p,
                               void **tmp_p, coll_redop_t *cop_p);

#endif
