/* SPDX-License-Identifier: MIT */
/* Loading the CUDA driver lazily, and telling device pointers from host pointers. */
#include "cuda/cuda.h"
#include "cuda/driver.h"
#include "log.h"

#include <dlfcn.h>
#include <pthread.h>

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
