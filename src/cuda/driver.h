/* SPDX-License-Identifier: MIT */
/*
 * The few CUDA driver entry points libcoll needs, loaded from libcuda.so.1 at first use so
 * that the library loads and runs on machines without a driver, and so that asking whether a
 * pointer is device memory never creates a CUDA context in a process that made none.
 */
#ifndef COLL_CUDA_DRIVER_H
#define COLL_CUDA_DRIVER_H

#include <cuda.h>

typedef struct coll_cu_driver {
    int         loaded; /* 1: every entry point below resolved and cuInit succeeded */
    const char *why;    /* why not, when loaded == 0 */
    CUresult (*init)(unsigned flags);
    CUresult (*pointer_get_attribute)(void *data, CUpointer_attribute attr, CUdeviceptr ptr);
    CUresult (*stream_wait_value32)(CUstream stream, CUdeviceptr addr, cuuint32_t value,
                                    unsigned flags);
    CUresult (*get_error_string)(CUresult error, const char **str);
    /* optional: the device of the calling thread's current context (NULL when missing) */
    CUresult (*ctx_get_current)(CUcontext *ctx);
    CUresult (*ctx_get_device)(CUdevice *dev);
    CUresult (*device_get_attribute)(int *value, CUdevice_attribute attr, CUdevice dev);
    /* optional: dma-bufs of device memory (GPUDirect RDMA through ibv_reg_dmabuf_mr) */
    CUresult (*mem_get_address_range)(CUdeviceptr *base, size_t *size, CUdeviceptr ptr);
    CUresult (*mem_get_handle_for_address_range)(void *handle, CUdeviceptr ptr, size_t size,
                                                 int type, unsigned long long flags);
} coll_cu_driver_t;

/* The driver table, loaded once (thread-safe). */
const coll_cu_driver_t *coll_cu_driver(void);

#endif
