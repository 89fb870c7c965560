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

/* The values of COLL_IB_GDR (coll_param_enum): GPUDirect RDMA where possible, never, where
 * possible with a warning where not, and host memory standing in for device memory (tests). */
enum { COLL_GDR_AUTO = 0, COLL_GDR_OFF = 1, COLL_GDR_ON = 2, COLL_GDR_HOST = 3 };

/* Device memory a transport moves: where its copies go (a stream that never waits for the
 * legacy default stream: the callers' streams may be waiting for this very call), the device
 * to make current for them, and pinned memory to copy through. Owned by the communicator's
 * device state (src/cuda/). */
typedef struct coll_devmem {
    void  *stream;
    int    device; /* -1: host memory standing in for device memory (COLL_IB_GDR=host, tests) */
    void  *pin;    /* pinned, pin_len bytes, only for coll_cuda_copy_sync; NULL: none */
    size_t pin_len;
} coll_devmem_t;

/* Copy n bytes between device memory and host memory (to_device: dst is the device side), on
 * dm's stream with its device current (restored after), and wait for it. The host side is a
 * transport's buffer, which CUDA sees as pageable: the copy goes through dm->pin, so that it
 * never takes the driver's staging for pageable memory, which another thread's pageable copy
 * can hold while its stream waits for this very call (src/cuda/bounce.c). COLL_ERR_CUDA with
 * the last error set. With dm->device -1, memcpy. */
coll_result_t coll_cuda_copy_sync(const coll_devmem_t *dm, void *dst, const void *src, size_t n,
                                  int to_device);

/* A dma-buf of the device memory around [addr, addr + len) (dm's device current meanwhile):
 * *fd_p (the caller closes it) covers [*base_p, *base_p + *len_p), the range widened to host
 * pages within addr's allocation. Fails without side effects, last error set:
 * COLL_ERR_INVALID_ARG when this allocation is not in whole host pages (a small one carved out
 * of a larger block: others may still export), COLL_ERR_UNSUPPORTED or COLL_ERR_CUDA when the
 * driver or the device exports none. */
coll_result_t coll_cuda_dmabuf_get(const coll_devmem_t *dm, const void *addr, size_t len, int *fd_p,
                                   uintptr_t *base_p, size_t *len_p);

#endif
