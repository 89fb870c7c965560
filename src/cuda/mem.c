/* SPDX-License-Identifier: MIT */
/* Loading the CUDA driver lazily, and telling device pointers from host pointers. */
#include "cuda/cuda.h"
#include "cuda/devmem.h"
#include "cuda/driver.h"
#include "error.h"
#include "log.h"

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

static coll_cu_driver_t driver;
static pthread_once_t   driver_once = PTHREAD_ONCE_INIT;

static void *driver_sym(void *lib, const char *name, const char *fallback)
{
    void *p = dlsym(lib, name);
    if (p == NULL && fallback != NULL) {
        p = dlsym(lib, fallback);
    }
    return p;
}

static void driver_load(void)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        driver.why = "no CUDA driver (libcuda.so.1 not found)";
        return;
    }
    driver.init                  = driver_sym(lib, "cuInit", NULL);
    driver.pointer_get_attribute = driver_sym(lib, "cuPointerGetAttribute", NULL);
    driver.stream_wait_value32   = driver_sym(lib, "cuStreamWaitValue32_v2", "cuStreamWaitValue32");
    driver.get_error_string      = driver_sym(lib, "cuGetErrorString", NULL);
    driver.ctx_get_current       = driver_sym(lib, "cuCtxGetCurrent", NULL);
    driver.ctx_get_device        = driver_sym(lib, "cuCtxGetDevice", NULL);
    driver.device_get_attribute  = driver_sym(lib, "cuDeviceGetAttribute", NULL);
    driver.mem_get_address_range = driver_sym(lib, "cuMemGetAddressRange_v2", NULL);
    driver.mem_get_handle_for_address_range =
        driver_sym(lib, "cuMemGetHandleForAddressRange", NULL);
    if (driver.init == NULL || driver.pointer_get_attribute == NULL) {
        driver.why = "the CUDA driver lacks cuInit or cuPointerGetAttribute";
        return;
    }
    CUresult r = driver.init(0);
    if (r != CUDA_SUCCESS) {
        driver.why = r == CUDA_ERROR_NO_DEVICE ? "no CUDA device" : "cuInit failed";
        coll_debug(COLL, "CUDA driver: cuInit returned %d", (int)r);
        return;
    }
    driver.loaded = 1;
}

const coll_cu_driver_t *coll_cu_driver(void)
{
    pthread_once(&driver_once, driver_load);
    return &driver;
}

int coll_cuda_ptr_device(const void *p, int *device_p)
{
    const coll_cu_driver_t *d    = coll_cu_driver();
    unsigned                type = 0, managed = 0;
    int                     ordinal = 0;

    if (p == NULL || !d->loaded) {
        return 0;
    }
    /* fails for ordinary host memory (and when the process has no context: then p cannot be
     * device memory either) */
    if (d->pointer_get_attribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)p) !=
        CUDA_SUCCESS) {
        return 0;
    }
    d->pointer_get_attribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, (CUdeviceptr)p);
    if (type != CU_MEMORYTYPE_DEVICE && !managed) {
        return 0;
    }
    if (d->pointer_get_attribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, (CUdeviceptr)p) !=
        CUDA_SUCCESS) {
        ordinal = 0;
    }
    if (device_p != NULL) {
        *device_p = ordinal;
    }
    return 1;
}

int coll_cuda_ptr_managed(const void *p)
{
    const coll_cu_driver_t *d       = coll_cu_driver();
    unsigned                managed = 0;
    return p != NULL && d->loaded &&
           d->pointer_get_attribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, (CUdeviceptr)p) ==
               CUDA_SUCCESS &&
           managed != 0;
}

const char *coll_cuda_unavailable(void)
{
    const coll_cu_driver_t *d = coll_cu_driver();
    return d->loaded ? NULL : d->why;
}

int coll_cuda_current_busid(uint64_t *busid_p)
{
    const coll_cu_driver_t *d;
    CUcontext               ctx = NULL;
    CUdevice                dev;
    int                     dom = 0, bus = 0, slot = 0;
    void                   *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);

    /* not loaded: the process has no context, and loading the driver now (cuInit) would break
     * CUDA in the processes it forks later */
    if (lib == NULL) {
        return 0;
    }
    dlclose(lib);
    d = coll_cu_driver();
    if (!d->loaded || d->ctx_get_current == NULL || d->ctx_get_device == NULL ||
        d->device_get_attribute == NULL || d->ctx_get_current(&ctx) != CUDA_SUCCESS ||
        ctx == NULL || d->ctx_get_device(&dev) != CUDA_SUCCESS) {
        return 0;
    }
    if (d->device_get_attribute(&dom, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, dev) != CUDA_SUCCESS ||
        d->device_get_attribute(&bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, dev) != CUDA_SUCCESS ||
        d->device_get_attribute(&slot, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, dev) != CUDA_SUCCESS) {
        return 0;
    }
    *busid_p = ((uint64_t)dom << 16) | ((uint64_t)bus << 8) | ((uint64_t)slot << 3);
    return 1;
}

/* Make dm's device current; the previous one in *old_p (-1: none to restore). */
static void devmem_enter(const coll_devmem_t *dm, int *old_p)
{
    const coll_cu_driver_t *d   = coll_cu_driver();
    CUcontext               ctx = NULL;
    *old_p                      = -1;
    /* a thread without a context (cudaGetDevice would say 0) has nothing to restore: setting
     * device 0 back would make it a context there */
    if (d->ctx_get_current != NULL && d->ctx_get_current(&ctx) == CUDA_SUCCESS && ctx != NULL &&
        cudaGetDevice(old_p) != cudaSuccess) {
        cudaGetLastError();
        *old_p = -1;
    }
    if (*old_p != dm->device) {
        cudaSetDevice(dm->device);
    }
}

static void devmem_leave(const coll_devmem_t *dm, int old)
{
    if (old >= 0 && old != dm->device) {
        cudaSetDevice(old);
    }
}

/* One piece of a copy through dm->pin, waited for. */
static cudaError_t devmem_pin_piece(const coll_devmem_t *dm, char *dst, const char *src, size_t n,
                                    int to_device)
{
    cudaStream_t s = (cudaStream_t)dm->stream;
    cudaError_t  e;
    if (to_device) {
        memcpy(dm->pin, src, n);
        e = cudaMemcpyAsync(dst, dm->pin, n, cudaMemcpyHostToDevice, s);
    } else {
        e = cudaMemcpyAsync(dm->pin, src, n, cudaMemcpyDeviceToHost, s);
    }
    cudaError_t w = cudaStreamSynchronize(s); /* also after a failure: nothing runs on */
    e             = e != cudaSuccess ? e : w;
    if (e == cudaSuccess && !to_device) {
        memcpy(dst, dm->pin, n);
    }
    return e;
}

coll_result_t coll_cuda_copy_sync(const coll_devmem_t *dm, void *dst, const void *src, size_t n,
                                  int to_device)
{
    int         old;
    cudaError_t e = cudaSuccess;
    if (dm->device < 0) { /* host memory standing in */
        memcpy(dst, src, n);
        return COLL_OK;
    }
    devmem_enter(dm, &old);
    if (dm->pin != NULL && dm->pin_len > 0) {
        for (size_t off = 0; off < n && e == cudaSuccess; off += dm->pin_len) {
            size_t l = n - off < dm->pin_len ? n - off : dm->pin_len;
            e = devmem_pin_piece(dm, (char *)dst + off, (const char *)src + off, l, to_device);
        }
    } else { /* no pinned memory could be had (logged when the device state was set up) */
        cudaStream_t s = (cudaStream_t)dm->stream;
        e              = cudaMemcpyAsync(dst, src, n,
                            to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, s);
        cudaError_t w  = cudaStreamSynchronize(s);
        e              = e != cudaSuccess ? e : w;
    }
    devmem_leave(dm, old);
    if (e != cudaSuccess) {
        return coll_set_last_error(COLL_ERR_CUDA,
                                   "copying %zu bytes %p -> %p on CUDA device %d: %s", n, src, dst,
                                   dm->device, cudaGetErrorString(e));
    }
    return COLL_OK;
}

#if CUDA_VERSION >= 11070
static coll_result_t dmabuf_get(const void *addr, size_t len, int *fd_p, uintptr_t *base_p,
                                size_t *len_p)
{
    const coll_cu_driver_t *d     = coll_cu_driver();
    CUdeviceptr             abase = 0;
    size_t                  asize = 0;
    uintptr_t               page  = (uintptr_t)sysconf(_SC_PAGESIZE);
    const char             *what  = NULL;
    int                     fd    = -1;
    CUresult                r;

    if (!d->loaded || d->mem_get_address_range == NULL ||
        d->mem_get_handle_for_address_range == NULL) {
        return coll_set_last_error(COLL_ERR_UNSUPPORTED, "the CUDA driver exports no dma-bufs (%s)",
                                   d->loaded ? "no cuMemGetHandleForAddressRange" : d->why);
    }
    r = d->mem_get_address_range(&abase, &asize, (CUdeviceptr)(uintptr_t)addr);
    if (r != CUDA_SUCCESS) { /* this allocation's trouble (VMM, pool): others may export */
        return coll_set_last_error(COLL_ERR_INVALID_ARG, "%p: no device allocation range (%d)",
                                   addr, (int)r);
    }
    /* the pages around the range, within the allocation */
    uintptr_t lo  = (uintptr_t)addr & ~(page - 1);
    uintptr_t hi  = ((uintptr_t)addr + len + page - 1) & ~(page - 1);
    uintptr_t alo = (uintptr_t)abase, ahi = (uintptr_t)abase + asize;
    if (lo < alo || hi > ahi || (uintptr_t)addr + len > ahi) {
        return coll_set_last_error(COLL_ERR_INVALID_ARG,
                                   "%zu bytes at %p: the allocation [%#lx, %#lx) is not in whole "
                                   "host pages",
                                   len, addr, (unsigned long)alo, (unsigned long)ahi);
    }
    r = d->mem_get_handle_for_address_range(&fd, (CUdeviceptr)lo, hi - lo,
                                            CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
    if (r != CUDA_SUCCESS || fd < 0) {
        if (d->get_error_string == NULL || d->get_error_string(r, &what) != CUDA_SUCCESS) {
            what = "unknown error";
        }
        return coll_set_last_error(r == CUDA_ERROR_NOT_SUPPORTED   ? COLL_ERR_UNSUPPORTED
                                   : r == CUDA_ERROR_INVALID_VALUE ? COLL_ERR_INVALID_ARG
                                                                   : COLL_ERR_CUDA,
                                   "cuMemGetHandleForAddressRange (dma-buf) of %zu bytes at "
                                   "%#lx: %s",
                                   (size_t)(hi - lo), (unsigned long)lo, what);
    }
    *fd_p   = fd;
    *base_p = lo;
    *len_p  = hi - lo;
    return COLL_OK;
}
#else
static coll_result_t dmabuf_get(const void *addr, size_t len, int *fd_p, uintptr_t *base_p,
                                size_t *len_p)
{
    (void)addr;
    (void)len;
    (void)fd_p;
    (void)base_p;
    (void)len_p;
    return coll_set_last_error(COLL_ERR_UNSUPPORTED,
                               "built with CUDA headers older than 11.7: no dma-bufs");
}
#endif

coll_result_t coll_cuda_dmabuf_get(const coll_devmem_t *dm, const void *addr, size_t len, int *fd_p,
                                   uintptr_t *base_p, size_t *len_p)
{
    int old;
    devmem_enter(dm, &old);
    coll_result_t st = dmabuf_get(addr, len, fd_p, base_p, len_p);
    devmem_leave(dm, old);
    return st;
}
