/* SPDX-License-Identifier: MIT */
/*
 * What transports need of CUDA to move device memory themselves (GPUDirect RDMA, ib transport):
 * a synchronous copy that takes device or host pointers, and a dma-buf file descriptor of a
 * device range for ibv_reg_dmabuf_mr. No CUDA types here, so transports include it in every
 * build; built without CUDA (src/cuda/nocuda.c) both fail with a reason.
 */
#ifndef COLL_CUDA_DEVMEM_H
#define COLL_CUDA_DEVMEM_H

#include <stddef.h>
#include <stdint.h>

#include "coll.h"

/* Copy n bytes, either side device or host memory (cudaMemcpyDefault), on stream (a CUDA
 * stream that never waits for the legacy default stream: the callers' streams may be waiting for
 * this very call) and wait for it. COLL_ERR_CUDA with the last error set. */
coll_result_t coll_cuda_copy_sync(void *stream, void *dst, const void *src, size_t n);

/* A dma-buf of the device memory around [addr, addr + len): *fd_p (the caller closes it) covers
 * [*base_p, *base_p + *len_p), the range widened to host pages within addr's allocation. Fails
 * (COLL_ERR_CUDA or COLL_ERR_UNSUPPORTED, last error set: the driver, the device or the
 * allocation does not export dma-bufs) without side effects. */
coll_result_t coll_cuda_dmabuf_get(const void *addr, size_t len, int *fd_p, uintptr_t *base_p,
                                   size_t *len_p);

#endif
