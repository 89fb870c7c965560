/* SPDX-License-Identifier: MIT */
/*
 * cudasim: a host emulation of the CUDA runtime and driver entry points libcoll uses (see
 * cudasim.h). One device (ordinal 0). What it holds to, so that a bug that would hang or fault
 * on a GPU shows here too:
 * - device memory is not host memory: the address returned by cudaMalloc is mapped PROT_NONE, and
 *   a host access faults with a message naming the allocation;
 * - each stream runs its operations in order on a thread of its own, asynchronously to the
 *   caller; events, cuStreamWaitValue32 and host functions order work as on a GPU;
 * - copies check their kind and bounds and return as early as the runtime's rules allow;
 *   host functions run one at a time and may not call CUDA; calls that may synchronise the
 *   device wait for every stream;
 * - cudaIpcGetMemHandle / cudaIpcOpenMemHandle map an allocation in another process through a
 *   named file (CUDASIM_DIR, default /dev/shm); pool memory (cudaMallocAsync) has no handle;
 * - after fork() a child of a process that used CUDA gets cudaErrorInitializationError.
 * Not emulated: several devices, peer access, the legacy stream's implicit synchronisation
 * with blocking streams, graphs, timing.
 * This file: the allocations' table, pointers, initialisation, device queries, errors and the
 * driver's entry points (cudasim_int.h lists the others).
 */
#include "cudasim_int.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

pthread_mutex_t      sim_mu = PTHREAD_MUTEX_INITIALIZER;
region_t            *regions;
int                  used;
int                  broken;
__thread int         tls_ctx, tls_in_hostfn;
__thread cudaError_t tls_last;
pthread_once_t       sim_once = PTHREAD_ONCE_INIT;

/* under sim_mu */
region_t *region_find(const void *p)
{
    for (region_t *r = regions; r != NULL; r = r->next) {
        if ((const char *)p >= r->base && (const char *)p < r->base + (r->size ? r->size : 1)) {
            return r;
        }
    }
    return NULL;
}

/* Is p the start of an allocation of one of the kinds in mask (1 << kind)? */
int region_starts(const void *p, unsigned mask)
{
    pthread_mutex_lock(&sim_mu);
    region_t *r  = region_find(p);
    int       ok = r != NULL && r->base == p && (mask & (1u << r->kind)) != 0;
    pthread_mutex_unlock(&sim_mu);
    return ok;
}

void sim_warn(const char *fmt, ...)
{
    va_list ap;
    char    line[512];
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "cudasim[%d]: %s\n", (int)getpid(), line);
}

static void segv_handler(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    const char *a = si->si_addr;
    /* no lock: the process is about to end either way */
    for (region_t *r = regions; r != NULL; r = r->next) {
        if (kind_device(r->kind) && a >= r->base && a < r->base + r->maplen) {
            char msg[160];
            int  n = snprintf(msg, sizeof msg,
                              "cudasim[%d]: host code touched device memory at %p "
                               "(allocation %p, %zu bytes)\n",
                              (int)getpid(), (const void *)a, (void *)r->base, r->size);
            if (write(2, msg, (size_t)n) < 0) {
                /* nothing left to do */
            }
            break;
        }
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

static void sim_atfork_child(void)
{
    if (used) {
        broken = 1;
    }
    hostfn_forget();
}

void sim_init_once(void)
{
    struct sigaction old, sa;
    pthread_atfork(NULL, NULL, sim_atfork_child);
    if (sigaction(SIGSEGV, NULL, &old) == 0 && old.sa_handler == SIG_DFL) {
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = segv_handler;
        sa.sa_flags     = SA_SIGINFO;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGSEGV, &sa, NULL);
    }
}

cudaError_t set_err(cudaError_t e)
{
    if (e != cudaSuccess) {
        tls_last = e;
    }
    return e;
}

/* A host function that calls CUDA: the runtime may return cudaErrorNotPermitted or deadlock.
 * Fatal here unless CUDASIM_HOSTFN_CUDA=error (test_cudasim checks the error). */
void hostfn_violation(const char *fn)
{
    const char *how = getenv("CUDASIM_HOSTFN_CUDA");
    sim_warn("%s called from a host function%s", fn,
             how != NULL && strcmp(how, "error") == 0 ? "" : ": aborting");
    if (how == NULL || strcmp(how, "error") != 0) {
        abort();
    }
}

void region_unmap(region_t *r)
{
    if (kind_device(r->kind)) {
        munmap(r->base, r->maplen);
        munmap(r->alias, r->maplen);
        if (r->path[0] != '\0' && r->kind != R_IPC) {
            unlink(r->path);
        }
    }
}

void region_drop(void *p)
{
    pthread_mutex_lock(&sim_mu);
    for (region_t **pp = &regions; *pp != NULL; pp = &(*pp)->next) {
        if ((*pp)->base == p) {
            region_t *r = *pp;
            *pp         = r->next;
            pthread_mutex_unlock(&sim_mu);
            region_unmap(r);
            free(r);
            return;
        }
    }
    pthread_mutex_unlock(&sim_mu);
}

/* ---- pointers ---- */

/* Translate [p, p + n) for a copy. dev_side: the side must be device-accessible (device
 * memory or pinned host memory); otherwise it must be host memory. *kind_p: the region's kind,
 * -1 for memory the emulation does not know (pageable). */
cudaError_t xlate(const void *p, size_t n, int dev_side, int any, char **out, int *kind_p,
                  const char *fn, const char *which)
{
    pthread_mutex_lock(&sim_mu);
    region_t *r = region_find(p);
    if (r == NULL) {
        pthread_mutex_unlock(&sim_mu);
        if (dev_side && !any) {
            sim_warn("%s: %s %p is not device memory", fn, which, p);
            return cudaErrorInvalidValue;
        }
        *out = (char *)p;
        if (kind_p != NULL) {
            *kind_p = -1; /* pageable */
        }
        return cudaSuccess;
    }
    size_t off = (size_t)((const char *)p - r->base);
    if (n > r->size - off) {
        sim_warn("%s: %s %p + %zu runs past its allocation (%p, %zu bytes)", fn, which, p, n,
                 (void *)r->base, r->size);
        pthread_mutex_unlock(&sim_mu);
        return cudaErrorInvalidValue;
    }
    if (!dev_side && !any && kind_device(r->kind)) {
        sim_warn("%s: %s %p is device memory where host memory was declared", fn, which, p);
        pthread_mutex_unlock(&sim_mu);
        return cudaErrorInvalidValue;
    }
    *out = r->alias + off;
    if (kind_p != NULL) {
        *kind_p = r->kind;
    }
    pthread_mutex_unlock(&sim_mu);
    return cudaSuccess;
}

SIM_EXPORT void *cudasim_view(const void *p, size_t len, const char *what)
{
    char *out = NULL;
    if (xlate(p, len, 1, 0, &out, NULL, "kernel", what) != cudaSuccess) {
        sim_warn("a kernel would read or write outside device memory: aborting");
        abort();
    }
    return out;
}

/* ---- device ---- */

SIM_EXPORT cudaError_t cudaGetDeviceCount(int *n)
{
    ENTER_NOCTX();
    if (n == NULL) {
        return set_err(cudaErrorInvalidValue);
    }
    *n = 1;
    return cudaSuccess;
}

SIM_EXPORT cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int d)
{
    ENTER_NOCTX();
    if (prop == NULL || d != 0) {
        return set_err(d != 0 ? cudaErrorInvalidDevice : cudaErrorInvalidValue);
    }
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "cudasim (host emulation)");
    prop->totalGlobalMem      = (size_t)16 << 30;
    prop->major               = 9;
    prop->minor               = 0;
    prop->multiProcessorCount = 4;
    prop->unifiedAddressing   = 1;
    prop->pciBusID            = 0x17;
    return cudaSuccess;
}

SIM_EXPORT cudaError_t cudaGetDevice(int *d)
{
    ENTER_NOCTX();
    if (d == NULL) {
        return set_err(cudaErrorInvalidValue);
    }
    *d = 0;
    return cudaSuccess;
}

SIM_EXPORT cudaError_t cudaSetDevice(int d)
{
    ENTER();
    return d == 0 ? cudaSuccess : set_err(cudaErrorInvalidDevice);
}

SIM_EXPORT cudaError_t cudaDeviceGetAttribute(int *v, enum cudaDeviceAttr attr, int d)
{
    ENTER_NOCTX();
    if (v == NULL || d != 0) {
        return set_err(d != 0 ? cudaErrorInvalidDevice : cudaErrorInvalidValue);
    }
    switch (attr) {
    case cudaDevAttrPciBusId:
        *v = 0x17;
        break;
    case cudaDevAttrMultiProcessorCount:
        *v = 4;
        break;
    default:
        *v = 0; /* no GPUDirect RDMA ordering or flush options, among others */
        break;
    }
    return cudaSuccess;
}

SIM_EXPORT cudaError_t cudaDeviceCanAccessPeer(int *can, int d, int peer)
{
    ENTER_NOCTX();
    if (can == NULL || d != 0 || peer != 0) {
        return set_err(cudaErrorInvalidDevice);
    }
    *can = 0; /* a device is not its own peer */
    return cudaSuccess;
}

SIM_EXPORT cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned flags)
{
    ENTER();
    (void)peer;
    (void)flags;
    return set_err(cudaErrorInvalidDevice);
}

SIM_EXPORT cudaError_t cudaDeviceFlushGPUDirectRDMAWrites(
    enum cudaFlushGPUDirectRDMAWritesTarget target, enum cudaFlushGPUDirectRDMAWritesScope scope)
{
    ENTER();
    (void)target;
    (void)scope;
    return set_err(cudaErrorNotSupported);
}

SIM_EXPORT cudaError_t cudaGetLastError(void)
{
    cudaError_t e = tls_last;
    tls_last      = cudaSuccess;
    return e;
}

SIM_EXPORT cudaError_t cudaPeekAtLastError(void)
{
    return tls_last;
}

SIM_EXPORT const char *cudaGetErrorString(cudaError_t e)
{
    switch (e) {
    case cudaSuccess:
        return "no error";
    case cudaErrorInvalidValue:
        return "invalid argument";
    case cudaErrorMemoryAllocation:
        return "out of memory";
    case cudaErrorInitializationError:
        return "initialization error";
    case cudaErrorInvalidDevice:
        return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle:
        return "invalid resource handle";
    case cudaErrorNotReady:
        return "device not ready";
    case cudaErrorNotPermitted:
        return "operation not permitted";
    case cudaErrorNotSupported:
        return "operation not supported";
    case cudaErrorHostMemoryAlreadyRegistered:
        return "part or all of the requested memory range is already mapped";
    case cudaErrorHostMemoryNotRegistered:
        return "pointer does not correspond to a registered memory region";
    case cudaErrorInvalidMemcpyDirection:
        return "invalid copy direction for memcpy";
    default:
        return "unknown error (cudasim)";
    }
}

SIM_EXPORT const char *cudaGetErrorName(cudaError_t e)
{
    return cudaGetErrorString(e);
}

/* ---- driver entry points (found by dlopen("libcuda.so.1")) ---- */

SIM_EXPORT CUresult cuInit(unsigned flags)
{
    pthread_once(&sim_once, sim_init_once);
    if (__atomic_load_n(&broken, __ATOMIC_RELAXED)) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    __atomic_store_n(&used, 1, __ATOMIC_RELAXED);
    return flags == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIM_EXPORT CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attr, CUdeviceptr ptr)
{
    if (__atomic_load_n(&broken, __ATOMIC_RELAXED)) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    pthread_mutex_lock(&sim_mu);
    region_t *r    = region_find((const void *)(uintptr_t)ptr);
    int       kind = r != NULL ? r->kind : -1;
    pthread_mutex_unlock(&sim_mu);
    if (kind < 0 || data == NULL) {
        return CUDA_ERROR_INVALID_VALUE; /* as for ordinary host memory */
    }
    switch (attr) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned *)data = kind_device(kind) ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        *(unsigned *)data = 0;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *(int *)data = 0;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_NOT_SUPPORTED;
    }
}

SIM_EXPORT CUresult cuStreamWaitValue32_v2(CUstream stream, CUdeviceptr addr, cuuint32_t value,
                                           unsigned flags)
{
    char *w = NULL;
    if (__atomic_load_n(&broken, __ATOMIC_RELAXED)) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (tls_in_hostfn) {
        hostfn_violation("cuStreamWaitValue32");
        return CUDA_ERROR_NOT_PERMITTED;
    }
    if ((uintptr_t)addr % 4 != 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (xlate((void *)(uintptr_t)addr, sizeof(uint32_t), 1, 0, &w, NULL, "cuStreamWaitValue32",
              "address") != cudaSuccess) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    op_t *o = op_new(OP_WAITVAL);
    if (o == NULL) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    o->dst    = w;
    o->wval   = value;
    o->wflags = flags;
    return stream_push((cudaStream_t)stream, o, NULL) == cudaSuccess ? CUDA_SUCCESS
                                                                     : CUDA_ERROR_INVALID_HANDLE;
}

SIM_EXPORT CUresult cuGetErrorString(CUresult r, const char **s)
{
    if (s == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *s = r == CUDA_SUCCESS ? "no error" : "cudasim driver error";
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxGetCurrent(CUcontext *ctx)
{
    static int the_context;
    if (ctx == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    *ctx = tls_ctx && !broken ? (CUcontext)(void *)&the_context : NULL;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxGetDevice(CUdevice *dev)
{
    if (dev == NULL) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!tls_ctx) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    *dev = 0;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute attr, CUdevice dev)
{
    if (v == NULL || dev != 0) {
        return CUDA_ERROR_INVALID_VALUE;
    }
    switch (attr) {
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
        *v = 0x17;
        break;
    default:
        *v = 0;
        break;
    }
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr ptr)
{
    pthread_mutex_lock(&sim_mu);
    region_t *r  = region_find((const void *)(uintptr_t)ptr);
    int       ok = r != NULL && kind_device(r->kind);
    if (ok) {
        if (base != NULL) {
            *base = (CUdeviceptr)(uintptr_t)r->base;
        }
        if (size != NULL) {
            *size = r->size;
        }
    }
    pthread_mutex_unlock(&sim_mu);
    return ok ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

SIM_EXPORT CUresult cuMemGetHandleForAddressRange(void *handle, CUdeviceptr ptr, size_t size,
                                                  CUmemRangeHandleType type,
                                                  unsigned long long   flags)
{
    (void)handle;
    (void)ptr;
    (void)size;
    (void)type;
    (void)flags;
    return CUDA_ERROR_NOT_SUPPORTED; /* no dma-buf: no GPUDirect RDMA here */
}

/* Files of device memory left by a process that ended without freeing it. */
__attribute__((destructor)) static void sim_fini(void)
{
    pid_t me = getpid();
    for (region_t *r = regions; r != NULL; r = r->next) {
        if (kind_device(r->kind) && r->kind != R_IPC && r->path[0] != '\0') {
            char mine[32];
            snprintf(mine, sizeof mine, "cudasim.%d.", (int)me);
            if (strstr(r->path, mine) != NULL) {
                unlink(r->path);
            }
        }
    }
}
