/* SPDX-License-Identifier: MIT */
/*
 * Collectives on CUDA memory and on CUDA streams: what the API layer calls. A call whose
 * buffers are device memory, or that names a stream, becomes a device operation (devop.c):
 * it is numbered and its schedule built at the call, like any other, but runs on the
 * communicator's proxy thread once the caller's stream reaches it; the caller's stream then
 * waits for its end (NCCL's semantics: the call enqueues and returns). Data moves through
 * pinned host staging wherever no direct device path exists. Built without CUDA, or on a
 * machine without a driver, no pointer is device memory and the stream calls are refused.
 */
#ifndef COLL_CUDA_CUDA_H
#define COLL_CUDA_CUDA_H

#include "api/comm.h"
#include "engine/engine.h"

/* Is p CUDA device (or managed) memory? 0 without CUDA or a driver; never creates a context.
 * *device_p gets its device ordinal when it is. */
int coll_cuda_ptr_device(const void *p, int *device_p);

/* Is p managed (unified) memory? 0 without CUDA or a driver. */
int coll_cuda_ptr_managed(const void *p);

/* Does the calling thread have a current CUDA context? Then 1, and *busid_p gets its device's
 * PCI address as COLL_TOPO_BUSID packs it. 0 without CUDA, a driver or a context; never loads
 * the driver or creates a context. */
int coll_cuda_current_busid(uint64_t *busid_p);

/* Does the call touch device memory on this rank (its send or receive buffer)? */
int coll_cuda_call_on_device(const coll_comm_t *comm, const coll_args_t *a, const void *sendbuf,
                             const void *recvbuf);

/* Start a device operation. stream_ordered: the caller's stream waits for its end and the call
 * returns at once (*req_p unset); else it is ordered after the legacy default stream's work and
 * *req_p is a request for coll_wait/coll_test. comm->lock is not held. */
coll_result_t coll_cuda_start(coll_comm_t *comm, const coll_args_t *a, const void *sendbuf,
                              void *recvbuf, void *stream, int stream_ordered, coll_task_t **req_p);

/* coll_wait / coll_test of a request returned by coll_cuda_start. */
coll_result_t coll_cuda_wait(coll_task_t *req);
int           coll_cuda_test(coll_task_t *req, coll_result_t *status_p);

/* Destroy: let queued device operations end, stop the proxy, close the mappings of the other
 * ranks' device windows. Then, once every rank is past that (the bootstrap's closing exchange)
 * and the endpoints are closed, coll_cuda_comm_free frees the own window, staging and what
 * failed calls may still have referenced. Both may be called more than once. */
void coll_cuda_comm_destroy(coll_comm_t *comm);
void coll_cuda_comm_free(coll_comm_t *comm);

/* ---- the direct device path: schedules of window and local steps on device memory ----
 * Device windows: two halves per rank of COLL_CUDA_WINDOW_SIZE bytes of device memory, mapped
 * by every local rank through CUDA IPC; their flags and acknowledgements are the host
 * windows' (the shm transport's). Each function below runs synchronously. */
const coll_layout_t *coll_cuda_dev_layout(coll_comm_t *comm);
/* The algorithm of a device call (oneshot or twoshot all-reduce), or NULL; *cost_p its cost. */
const coll_algo_t *coll_cuda_dev_algo(coll_comm_t *comm, const coll_args_t *args, double *cost_p);
void              *coll_cuda_win_ptr(coll_comm_t *comm, int rank, int parity);
coll_result_t      coll_cuda_dev_copy(coll_comm_t *comm, void *dst, const void *src, size_t len);
/* dst = op(a, b), n elements (op never AVG) */
coll_result_t coll_cuda_dev_reduce(coll_comm_t *comm, coll_dtype_t dt, coll_redop_t op, void *dst,
                                   const void *a, const void *b, size_t n);
coll_result_t coll_cuda_dev_div(coll_comm_t *comm, coll_dtype_t dt, void *buf, size_t n,
                                int divisor);

/* Why stream calls are unavailable here, or NULL when they work. */
const char *coll_cuda_unavailable(void);

#endif
