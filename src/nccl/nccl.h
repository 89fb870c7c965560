/* SPDX-License-Identifier: MIT */
/*
 * nccl.h of libcoll's NCCL-compatible library (libnccl.so.2, installed in its own directory,
 * $(libdir)/libcoll-nccl and $(includedir)/libcoll-nccl, so that it shadows no real NCCL by
 * accident). Programs written for NCCL's core API build against it unchanged and run on
 * libcoll: on host memory everywhere, on CUDA device memory and streams where libcoll was
 * built with CUDA. The types, values and semantics are NCCL's; see nccl(7) of libcoll
 * (README "Replace NCCL") for what differs.
 */
#ifndef NCCL_H_
#define NCCL_H_

#include <limits.h>
#include <stddef.h>

#if defined(__has_include)
#if __has_include(<cuda_runtime.h>)
#include <cuda_runtime.h>
#define NCCL_HAVE_CUDA_RUNTIME_H 1
#endif
#endif
#ifndef NCCL_HAVE_CUDA_RUNTIME_H
/* Without the CUDA headers a stream is an opaque pointer, as in CUDA's own headers. */
typedef struct CUstream_st *cudaStream_t;
#endif

#define NCCL_MAJOR        2
#define NCCL_MINOR        18
#define NCCL_PATCH        3
#define NCCL_SUFFIX       "libcoll"
#define NCCL_VERSION_CODE 21803
#define NCCL_VERSION(X, Y, Z)                                                                      \
    (((X) <= 2 && (Y) <= 8) ? (X)*1000 + (Y)*100 + (Z) : (X)*10000 + (Y)*100 + (Z))

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ncclComm *ncclComm_t;
#define NCCL_COMM_NULL NULL

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
    char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef enum {
    ncclSuccess            = 0,
    ncclUnhandledCudaError = 1,
    ncclSystemError        = 2,
    ncclInternalError      = 3,
    ncclInvalidArgument    = 4,
    ncclInvalidUsage       = 5,
    ncclRemoteError        = 6,
    ncclInProgress         = 7,
    ncclNumResults         = 8
} ncclResult_t;

#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
#define NCCL_SPLIT_NOCOLOR    -1

typedef struct ncclConfig_v21700 {
    size_t       size;
    unsigned int magic;
    unsigned int version;
    int          blocking;
    int          cgaClusterSize;
    int          minCTAs;
    int          maxCTAs;
    const char  *netName;
    int          splitShare;
} ncclConfig_t;

#define NCCL_CONFIG_INITIALIZER                                                                    \
    {                                                                                              \
        sizeof(ncclConfig_t), 0xcafebeef, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH),        \
            NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,                   \
            NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_PTR, NCCL_CONFIG_UNDEF_INT                    \
    }

typedef enum {
    ncclInt8     = 0,
    ncclChar     = 0,
    ncclUint8    = 1,
    ncclInt32    = 2,
    ncclInt      = 2,
    ncclUint32   = 3,
    ncclInt64    = 4,
    ncclUint64   = 5,
    ncclFloat16  = 6,
    ncclHalf     = 6,
    ncclFloat32  = 7,
    ncclFloat    = 7,
    ncclFloat64  = 8,
    ncclDouble   = 8,
    ncclBfloat16 = 9,
    ncclNumTypes = 10
} ncclDataType_t;

typedef enum {
    ncclSum      = 0,
    ncclProd     = 1,
    ncclMax      = 2,
    ncclMin      = 3,
    ncclAvg      = 4,
    ncclNumOps   = 5,
    ncclMaxRedOp = 0x7fffffff /* operators made by ncclRedOpCreatePreMulSum lie in between */
} ncclRedOp_t;

typedef enum {
    ncclScalarDevice        = 0, /* the scalar is read through its pointer at each call */
    ncclScalarHostImmediate = 1  /* the scalar is read once, when the operator is created */
} ncclScalarResidence_t;

ncclResult_t ncclGetVersion(int *version);
ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId);
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t *config);
ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist);
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                           ncclConfig_t *config);
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError);
const char  *ncclGetErrorString(ncclResult_t result);
const char  *ncclGetLastError(ncclComm_t comm);
ncclResult_t ncclCommCount(const ncclComm_t comm, int *count);
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank);

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm);
ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);

ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream);
ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream);
ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);

ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);

#ifdef __cplusplus
}
#endif

#endif
