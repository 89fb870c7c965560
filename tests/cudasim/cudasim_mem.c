/* SPDX-License-Identifier: MIT */
/*
 * cudasim's memory (see cudasim.c): device and pool memory (a shared file mapped twice: without
 * access where handed out, readable and writable for the streams), pinned host memory, copies
 * and memsets with the runtime's return points, and IPC handles by file name.
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

static unsigned long file_seq;

/* ---- memory ---- */

/* The backing file of allocation seq of process pid: under CUDASIM_DIR, which every process of
 * a run shares (inherited), so that an IPC handle needs only the two numbers. */
static void sim_path(char *buf, size_t len, long pid, unsigned long seq)
{
    const char *dir = getenv("CUDASIM_DIR");
    snprintf(buf, len, "%s/cudasim.%ld.%lu", dir != NULL ? dir : "/dev/shm", pid, seq);
}

static cudaError_t dev_alloc(void **p, size_t size, int kind)
{
    long      pg  = sysconf(_SC_PAGESIZE);
    size_t    len = size == 0 ? (size_t)pg : (size + (size_t)pg - 1) / (size_t)pg * (size_t)pg;
    region_t *r   = calloc(1, sizeof *r);
    int       fd;

    if (r == NULL) {
        return cudaErrorMemoryAllocation;
    }
    pthread_mutex_lock(&sim_mu);
    unsigned long seq = ++file_seq;
    pthread_mutex_unlock(&sim_mu);
    r->seq = seq;
    sim_path(r->path, sizeof r->path, (long)getpid(), seq);
    fd = open(r->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)len) != 0) {
        sim_warn("cannot make %s: %s", r->path, strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(r->path);
        }
        free(r);
        return cudaErrorMemoryAllocation;
    }
    r->base  = mmap(NULL, len, PROT_NONE, MAP_SHARED, fd, 0);
    r->alias = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (r->base == MAP_FAILED || r->alias == MAP_FAILED) {
        if (r->base != MAP_FAILED) {
            munmap(r->base, len);
        }
        if (r->alias != MAP_FAILED) {
            munmap(r->alias, len);
        }
        unlink(r->path);
        free(r);
        return cudaErrorMemoryAllocation;
    }
    if (kind == R_POOL) { /* no IPC handle: nobody opens it by name */
        unlink(r->path);
        r->path[0] = '\0';
    }
    /* fresh device memory holds whatever was there: never zeros */
    memset(r->alias, 0xa5, len);
    r->size   = size;
    r->maplen = len;
    r->kind   = kind;
    pthread_mutex_lock(&sim_mu);
    r->next = regions;
    regions = r;
    pthread_mutex_unlock(&sim_mu);
    *p = r->base;
    return cudaSuccess;
}

SIM_EXPORT cudaError_t cudaMalloc(void **p, size_t size)
{
    ENTER();
    if (p == NULL) {
        return set_err(cudaErrorInvalidValue);
    }
    return set_err(dev_alloc(p, size, R_DEVICE));
}

SIM_EXPORT cudaError_t cudaFree(void *p)
{
    ENTER();
    if (p == NULL) {
        return cudaSuccess;
    }
    if (!region_starts(p, 1u << R_DEVICE | 1u << R_POOL)) {
        sim_warn("cudaFree(%p): not the start of a device allocation", p);
        return set_err(cudaErrorInvalidValue);
    }
    drain_all(); /* cudaFree synchronises the device */
    region_drop(p);
    return cudaSuccess;
}

SIM_EXPORT cudaError_t cudaMallocAsync(void **p, size_t size, cudaStream_t st)
{
    ENTER();
    (void)st;
    if (p == NULL) {
        return set_err(cudaErrorInvalidValue);
    }
    return set_err(dev_alloc(p, size, R_POOL));
}

SIM_EXPORT cudaError_t cudaFreeAsync(void *p, cudaStream_t st)
{
    ENTER();
    if (p == NULL) {
        return cudaSuccess;
    }
    if (!region_starts(p, 1u << R_DEVICE | 1u << R_POOL)) {
        return set_err(cudaErrorInvalidValue);
    }
    op_t *o = op_new(OP_FREE);
    if (o == NULL) {
        return set_err(cudaErrorMemoryAllocation);
    }
    o->dst = p;
    return set_err(stream_push(st, o, NULL));
}

static cudaError_t host_region(void *p, size_t size, int kind, unsigned flags)
{
    region_t *r = calloc(1, sizeof *r);
    if (r == NULL) {
        return cudaErrorMemoryAllocation;
    }
    r->base = r->alias = p;
    r->size = r->maplen = size;
    r->kind             = kind;
    r->flags            = flags;
    pthread_mutex_lock(&sim_mu);
    for (region_t *q = regions; q != NULL; q = q->next) {
        if ((char *)p < q->base + q->size && q->base < (char *)p + size) {
            pthread_mutex_unlock(&sim_mu);
            free(r);
            return cudaErrorHostMemoryAlreadyRegistered;
        }
    }
    r->next = regions;
    regions = r;
    pthread_mutex_unlock(&sim_mu);
    return cudaSuccess;
}

SIM_EXPORT cudaError_t cudaHostAlloc(void **p, size_t size, unsigned flags)
{
    ENTER();
    drain_all(); /* pinning may synchronise the device: the worst case */
    if (p == NULL) {
        return set_err(cudaErrorInvalidValue);
    }
    void *m = NULL;
    if (posix_memalign(&m, 4096, size ? size : 1) != 0) {
        return set_err(cudaErrorMemoryAllocation);
    }
    cudaError_t e = host_region(m, size ? size : 1, R_HOSTALLOC, flags);
    if (e != cudaSuccess) {
        free(m);
        return set_err(e);
    }
    *p = m;
    return cudaSuccess;
}

SIM_EXPORT cudaError_t cudaMallocHost(void **p, size_t size)
{
    return cudaHostAlloc(p, size, 0);
}

SIM_EXPORT cudaError_t cudaFreeHost(void *p)
{
    ENTER();
    if (p == NULL) {
        return cudaSuccess;
    }
    if (!region_starts(p, 1u << R_HOSTALLOC)) {
        return set_err(cudaErrorInvalidValue);
    }
    drain_all();
    region_drop(p);
    free(p);
    return cudaSuccess;
}

SIM_EXPORT cudaError_t cudaHostRegister(void *p, size_t size, unsigned flags)
{
    ENTER();
    drain_all(); /* as cudaHostAlloc */
    if (p == NULL || size == 0) {
        return set_err(cudaErrorInvalidValue);
    }
    return set_err(host_region(p, size, R_HOSTREG, flags));
}

SIM_EXPORT cudaError_t cudaHostUnregister(void *p)
{
    ENTER();
    if (!region_starts(p, 1u << R_HOSTREG)) {
        return set_err(cudaErrorHostMemoryNotRegistered);
    }
    drain_all();
    region_drop(p);
    return cudaSuccess;
}

SIM_EXPORT cudaError_t cudaHostGetDevicePointer(void **d, void *h, unsigned flags)
{
    ENTER();
    pthread_mutex_lock(&sim_mu);
    region_t *r  = region_find(h);
    int       ok = r != NULL && (r->kind == R_HOSTALLOC || r->kind == R_HOSTREG);
    pthread_mutex_unlock(&sim_mu);
    if (!ok || flags != 0 || d == NULL) {
        return set_err(cudaErrorInvalidValue);
    }
    *d = h; /* unified addressing */
    return cudaSuccess;
}

/* ---- copies ---- */

/* A copy, queued on st. When it returns (the runtime's rules, "API synchronization behavior"):
 *   cudaMemcpy (blocking): once done, except device to device (queued only);
 *   cudaMemcpyAsync: queued.
 * A copy between the device and pageable memory, either way, blocking or not, returns once done,
 * and holds one lock of the process until then: the runtime stages it through a buffer of its
 * own, which a thread holds for the whole copy, including its wait for the stream (on an H200,
 * a copy to pageable memory queued behind a receive held back the proxy's copy to pageable
 * staging). The runtime may return earlier; code must work either way, and this is the way
 * that hangs where it would. */
static pthread_mutex_t pageable_mu = PTHREAD_MUTEX_INITIALIZER;

static cudaError_t copy_async(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                              cudaStream_t st, int blocking, const char *fn)
{
    char       *d = NULL, *s = NULL;
    int         dk = 0, sk = 0, any = kind == cudaMemcpyDefault;
    int         ddev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    int         sdev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    cudaError_t e;

    if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault) {
        return cudaErrorInvalidMemcpyDirection;
    }
    if (n == 0) {
        return cudaSuccess;
    }
    if ((e = xlate(dst, n, ddev, any, &d, &dk, fn, "destination")) != cudaSuccess ||
        (e = xlate(src, n, sdev, any, &s, &sk, fn, "source")) != cudaSuccess) {
        return e;
    }
    int   to_dev = dk >= 0 && kind_device(dk), from_dev = sk >= 0 && kind_device(sk);
    op_t *o = op_new(OP_COPY);
    if (o == NULL) {
        return cudaErrorMemoryAllocation;
    }
    o->dst = d;
    o->src = s;
    o->n   = n;
    if ((sk < 0 && to_dev) || (dk < 0 && from_dev)) { /* pageable: see above */
        pthread_mutex_lock(&pageable_mu);
        e = op_submit(st, o, 1);
        pthread_mutex_unlock(&pageable_mu);
        return e;
    }
    int wait = blocking && !(to_dev && from_dev);
    if (!to_dev && !from_dev) { /* host to host: done by the call */
        wait = 1;
    }
    return op_submit(st, o, wait);
}

SIM_EXPORT cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n,
                                       enum cudaMemcpyKind kind, cudaStream_t st)
{
    ENTER();
    return set_err(copy_async(dst, src, n, kind, st, 0, __func__));
}

SIM_EXPORT cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
    ENTER();
    return set_err(copy_async(dst, src, n, kind, NULL, 1, __func__));
}

static cudaError_t set_async(void *p, int v, size_t n, cudaStream_t st, int sync)
{
    char       *d = NULL;
    cudaError_t e;
    if (n == 0) {
        return cudaSuccess;
    }
    int kind = 0;
    if ((e = xlate(p, n, 1, 0, &d, &kind, "cudaMemset", "destination")) != cudaSuccess) {
        return e;
    }
    sync    = sync && !kind_device(kind); /* cudaMemset waits only on (pinned) host memory */
    op_t *o = op_new(OP_SET);
    if (o == NULL) {
        return cudaErrorMemoryAllocation;
    }
    o->dst   = d;
    o->value = v;
    o->n     = n;
    return op_submit(st, o, sync);
}

/* Asynchronous on device memory (the runtime's rule): only queued on the legacy stream. */
SIM_EXPORT cudaError_t cudaMemset(void *p, int v, size_t n)
{
    ENTER();
    return set_err(set_async(p, v, n, NULL, 0));
}

SIM_EXPORT cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t st)
{
    ENTER();
    return set_err(set_async(p, v, n, st, 0));
}

/* ---- IPC ---- */

typedef struct {
    uint32_t magic;
    int32_t  pid;
    uint64_t seq; /* the allocation's file: sim_path(pid, seq) */
    uint64_t size;
} ipc_handle_t;
#define IPC_MAGIC 0x43534d31u

SIM_EXPORT cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *h, void *p)
{
    ENTER();
    _Static_assert(sizeof(ipc_handle_t) <= sizeof(cudaIpcMemHandle_t), "handle fits");
    pthread_mutex_lock(&sim_mu);
    region_t    *r = region_find(p);
    ipc_handle_t ih;
    memset(&ih, 0, sizeof ih);
    int ok = h != NULL && r != NULL && r->kind == R_DEVICE;
    if (ok) {
        ih.magic = IPC_MAGIC;
        ih.pid   = (int32_t)getpid();
        ih.size  = r->size;
        ih.seq   = r->seq;
    }
    pthread_mutex_unlock(&sim_mu);
    if (!ok) { /* pool memory and host memory have no legacy IPC handle */
        return set_err(cudaErrorInvalidValue);
    }
    memset(h, 0, sizeof *h);
    memcpy(h, &ih, sizeof ih);
    return cudaSuccess;
}

SIM_EXPORT cudaError_t cudaIpcOpenMemHandle(void **p, cudaIpcMemHandle_t h, unsigned flags)
{
    ENTER();
    ipc_handle_t ih;
    memcpy(&ih, &h, sizeof ih);
    if (p == NULL || ih.magic != IPC_MAGIC || flags != cudaIpcMemLazyEnablePeerAccess) {
        return set_err(cudaErrorInvalidValue); /* the flag is required */
    }
    if (ih.pid == (int32_t)getpid()) { /* the runtime refuses a process's own handle */
        return set_err(cudaErrorInvalidValue);
    }
    drain_all(); /* mapping may synchronise the device (it hung an H200 whose stream waited) */
    char path[512];
    sim_path(path, sizeof path, (long)ih.pid, (unsigned long)ih.seq);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        sim_warn("cudaIpcOpenMemHandle: %s: %s", path, strerror(errno));
        return set_err(cudaErrorInvalidResourceHandle);
    }
    struct stat st;
    region_t   *r = calloc(1, sizeof *r);
    if (r == NULL || fstat(fd, &st) != 0) {
        close(fd);
        free(r);
        return set_err(cudaErrorMemoryAllocation);
    }
    r->maplen = (size_t)st.st_size;
    r->size   = (size_t)ih.size;
    r->kind   = R_IPC;
    r->base   = mmap(NULL, r->maplen, PROT_NONE, MAP_SHARED, fd, 0);
    r->alias  = mmap(NULL, r->maplen, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (r->base == MAP_FAILED || r->alias == MAP_FAILED) {
        free(r);
        return set_err(cudaErrorMemoryAllocation);
    }
    snprintf(r->path, sizeof r->path, "%s", path);
    pthread_mutex_lock(&sim_mu);
    r->next = regions;
    regions = r;
    pthread_mutex_unlock(&sim_mu);
    *p = r->base;
    return cudaSuccess;
}

SIM_EXPORT cudaError_t cudaIpcCloseMemHandle(void *p)
{
    ENTER();
    if (!region_starts(p, 1u << R_IPC)) {
        return set_err(cudaErrorInvalidValue);
    }
    drain_all();
    region_drop(p);
    return cudaSuccess;
}
