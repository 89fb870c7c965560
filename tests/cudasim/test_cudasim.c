/* SPDX-License-Identifier: MIT */
/*
 * The emulation itself (cudasim.h): what makes a bug in libcoll's device paths show here as on
 * a GPU. Device memory faults when host code touches it; copies check kind and bounds (more
 * strictly than the runtime, which may accept a wrong kind on pageable memory); a stream
 * runs its operations in order and asynchronously (an event stays unready while its stream waits
 * on a memory word, cuStreamWaitValue32); a host function may not call CUDA; a handle of
 * cudaIpcGetMemHandle maps the same memory in another process; pool memory has no handle; a
 * child forked after CUDA was used gets an initialization error; a stream waiting on a word
 * holds only so many operations before queueing blocks; a copy between the device and pageable
 * memory returns once done and holds back other such copies; the pointer attributes tell
 * device memory from pinned and ordinary host memory; the reduction kernels of
 * kernels_host.c compute on device memory in stream order.
 */
#include "coll_test.h"
#include "cuda/devmem.h"
#include "cuda/kernels.h"
#include "reduce/reduce.h"

#include <cuda.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CUDA_OK(_x)                                                                                \
    do {                                                                                           \
        cudaError_t _e = (_x);                                                                     \
        ASSERT_(_e == cudaSuccess, "%s: %s", #_x, cudaGetErrorString(_e));                         \
    } while (0)

static cudaError_t hostfn_result = cudaSuccess;
static void        hostfn_calls_cuda(void *arg)
{
    void *p       = NULL;
    hostfn_result = cudaMalloc(&p, 64);
    __atomic_store_n((int *)arg, 1, __ATOMIC_RELEASE);
}

/* Child, forked before the parent used CUDA: opens the parent's handle, read from fd, checks the
 * parent's pattern and writes its own. */
static int ipc_child(int rfd, int wfd)
{
    cudaIpcMemHandle_t h;
    unsigned char      buf[4096];
    void              *p = NULL;
    if (read(rfd, &h, sizeof h) != (ssize_t)sizeof h ||
        cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess) != cudaSuccess ||
        cudaMemcpy(buf, p, sizeof buf, cudaMemcpyDeviceToHost) != cudaSuccess) {
        return 2;
    }
    for (size_t i = 0; i < sizeof buf; i++) {
        if (buf[i] != (unsigned char)(i * 7)) {
            return 3;
        }
    }
    memset(buf, 0x3c, sizeof buf);
    if (cudaMemcpy(p, buf, sizeof buf, cudaMemcpyHostToDevice) != cudaSuccess ||
        cudaIpcCloseMemHandle(p) != cudaSuccess) {
        return 4;
    }
    char ok = 1;
    return write(wfd, &ok, 1) == 1 ? 0 : 5;
}

static int test_ipc(void)
{
    int   down[2], up[2], wst = 0;
    pid_t pid;
    ASSERT_(pipe(down) == 0 && pipe(up) == 0, "%s", "pipe");
    pid = fork();
    ASSERT_(pid >= 0, "%s", "fork");
    if (pid == 0) {
        close(down[1]);
        close(up[0]);
        _exit(ipc_child(down[0], up[1]));
    }
    close(down[0]); /* a child that fails then ends the parent's read */
    close(up[1]);
    void              *d = NULL, *pool = NULL;
    unsigned char      buf[4096];
    cudaIpcMemHandle_t h;
    for (size_t i = 0; i < sizeof buf; i++) {
        buf[i] = (unsigned char)(i * 7);
    }
    CUDA_OK(cudaMalloc(&d, sizeof buf));
    CUDA_OK(cudaMemcpy(d, buf, sizeof buf, cudaMemcpyHostToDevice));
    CUDA_OK(cudaIpcGetMemHandle(&h, d));
    void *own = NULL;
    ASSERT_(cudaIpcOpenMemHandle(&own, h, cudaIpcMemLazyEnablePeerAccess) != cudaSuccess, "%s",
            "a process opened its own IPC handle");
    cudaGetLastError();
    ASSERT_(write(down[1], &h, sizeof h) == (ssize_t)sizeof h, "%s", "write handle");
    char ok = 0;
    ASSERT_(read(up[0], &ok, 1) == 1 && ok == 1, "%s", "the child did not report");
    ASSERT_(waitpid(pid, &wst, 0) == pid && WIFEXITED(wst) && WEXITSTATUS(wst) == 0,
            "IPC child failed (status %d)", wst);
    CUDA_OK(cudaMemcpy(buf, d, sizeof buf, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < sizeof buf; i++) {
        ASSERT_(buf[i] == 0x3c, "byte %zu is %#x after the child wrote 0x3c", i, buf[i]);
    }
    CUDA_OK(cudaFree(d));
    /* pool memory: no legacy IPC handle, as on a GPU */
    CUDA_OK(cudaMallocAsync(&pool, 4096, NULL));
    ASSERT_(cudaIpcGetMemHandle(&h, pool) != cudaSuccess, "%s", "pool memory got an IPC handle");
    cudaGetLastError();
    CUDA_OK(cudaFreeAsync(pool, NULL));
    CUDA_OK(cudaStreamSynchronize(NULL));
    close(down[1]);
    close(up[0]);
    return 0;
}

/* body() run in a forked child; the child's wait status. */
static int in_child(int (*body)(void))
{
    int   wst = 0;
    pid_t pid = fork();
    ASSERT_(pid >= 0, "%s", "fork");
    if (pid == 0) {
        _exit(body());
    }
    ASSERT_(waitpid(pid, &wst, 0) == pid, "%s", "waitpid");
    return wst;
}

static int host_touch(void)
{
    void *d = NULL;
    if (cudaMalloc(&d, 4096) != cudaSuccess) {
        return 2;
    }
    ((volatile char *)d)[100] = 1; /* must fault */
    return 0;
}

/* A child that writes to device memory from the host dies of SIGSEGV. */
static int test_host_touch(void)
{
    int wst = in_child(host_touch);
    ASSERT_(WIFSIGNALED(wst) && WTERMSIG(wst) == SIGSEGV,
            "a host write to device memory did not fault (status %#x)", wst);
    return 0;
}

static void hostfn_malloc(void *arg)
{
    void *p = NULL;
    (void)arg;
    cudaMalloc(&p, 64);
}

static int hostfn_calls_malloc(void)
{
    unsetenv("CUDASIM_HOSTFN_CUDA");
    if (cudaLaunchHostFunc(NULL, hostfn_malloc, NULL) != cudaSuccess) {
        return 2;
    }
    cudaStreamSynchronize(NULL);
    return 0;
}

/* A host function that calls CUDA aborts the process (CUDASIM_HOSTFN_CUDA unset). */
static int test_hostfn_abort(void)
{
    int wst = in_child(hostfn_calls_malloc);
    ASSERT_(WIFSIGNALED(wst) && WTERMSIG(wst) == SIGABRT,
            "a host function's CUDA call did not abort (status %#x)", wst);
    return 0;
}

/* Fresh device memory is not zeros; cudaFreeHost(NULL) is a no-op. */
static int test_fresh_memory(void)
{
    unsigned char *d = NULL, buf[512];
    CUDA_OK(cudaMalloc((void **)&d, sizeof buf));
    CUDA_OK(cudaMemcpy(buf, d, sizeof buf, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < sizeof buf; i++) {
        ASSERT_(buf[i] != 0, "fresh device memory has a zero at %zu", i);
    }
    CUDA_OK(cudaFree(d));
    CUDA_OK(cudaFreeHost(NULL));
    return 0;
}

/* The kernels' contract: AVG is refused (sum, then divide), as by the device kernels; fp16
 * over three sources is rounded once; dst may be a later source. */
static int test_kernels_contract(void)
{
    enum { N = 3 };
    uint16_t   *d[3], h[3][N], out[N];
    const void *srcs[3];
    /* 1 + 2^-11 + 2^-11: chained fp16 sums round 1 + 2^-11 back to 1 at each step (ties to
     * even), an fp32 accumulator reaches 1 + 2^-10, an fp16 */
    for (int s = 0; s < 3; s++) {
        CUDA_OK(cudaMalloc((void **)&d[s], sizeof h[s]));
        for (int i = 0; i < N; i++) {
            h[s][i] = coll_float_to_half(s == 0 ? 1.0f : 1.0f / 2048.0f);
        }
        CUDA_OK(cudaMemcpy(d[s], h[s], sizeof h[s], cudaMemcpyHostToDevice));
        srcs[s] = d[s];
    }
    ASSERT_(coll_cuda_reduce2(COLL_FLOAT16, COLL_AVG, d[0], d[1], d[2], N, NULL) ==
                (int)cudaErrorInvalidValue,
            "%s", "AVG was accepted by reduce2");
    ASSERT_(coll_cuda_reduce_n(COLL_FLOAT16, COLL_SUM, d[2], srcs, 3, N, NULL) == 0, "%s",
            "reduce_n");
    CUDA_OK(cudaMemcpy(out, d[2], sizeof out, cudaMemcpyDeviceToHost));
    float acc =
        coll_half_to_float(h[0][0]) + coll_half_to_float(h[1][0]) + coll_half_to_float(h[2][0]);
    uint16_t want = coll_float_to_half(acc);
    ASSERT_(want == coll_float_to_half(1.0f + 1.0f / 1024.0f), "%s", "the case rounds as planned");
    for (int i = 0; i < N; i++) {
        ASSERT_(out[i] == want, "fp16 reduce_n element %d is %#x, expected %#x (rounded once)", i,
                out[i], want);
    }
    for (int s = 0; s < 3; s++) {
        CUDA_OK(cudaFree(d[s]));
    }
    return 0;
}

static int malloc_refused(void)
{
    void *d = NULL;
    return cudaMalloc(&d, 64) == cudaErrorInitializationError ? 0 : 1;
}

/* After CUDA was used, a forked child gets an initialization error. */
static int test_fork_after_use(void)
{
    int wst = in_child(malloc_refused);
    ASSERT_(WIFEXITED(wst) && WEXITSTATUS(wst) == 0, "%s",
            "CUDA worked in a child forked after the parent used it");
    return 0;
}

static int test_copies_and_pointers(void)
{
    void    *d = NULL, *pinned = NULL;
    char     host[256];
    unsigned type = 0;
    CUDA_OK(cudaMalloc(&d, 256));
    CUDA_OK(cudaHostAlloc(&pinned, 256, cudaHostAllocPortable));
    /* bounds and kinds */
    ASSERT_(cudaMemcpy(d, host, 257, cudaMemcpyHostToDevice) == cudaErrorInvalidValue, "%s",
            "a copy past the allocation was accepted");
    ASSERT_(cudaMemcpy(host, host + 1, 16, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue, "%s",
            "a device-to-host copy from pageable memory was accepted");
    ASSERT_(cudaMemcpy(d, d, 16, cudaMemcpyHostToDevice) == cudaErrorInvalidValue, "%s",
            "a host-to-device copy from device memory was accepted");
    ASSERT_TRUE(cudaGetLastError() == cudaErrorInvalidValue);
    ASSERT_TRUE(cudaGetLastError() == cudaSuccess);
    memset(pinned, 0x5a, 256);
    CUDA_OK(cudaMemcpy(d, pinned, 256, cudaMemcpyDeviceToDevice)); /* pinned: device-accessible */
    CUDA_OK(cudaDeviceSynchronize()); /* device to device: only queued */
    memset(host, 0, sizeof host);
    CUDA_OK(cudaMemcpy(host, d, 256, cudaMemcpyDeviceToHost));
    for (int i = 0; i < 256; i++) {
        ASSERT_(host[i] == 0x5a, "byte %d is %#x after the copy of 0x5a", i, host[i]);
    }
    /* attributes */
    ASSERT_(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)d) ==
                    CUDA_SUCCESS &&
                type == CU_MEMORYTYPE_DEVICE,
            "device memory's type is %u", type);
    ASSERT_(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                  (CUdeviceptr)((char *)d + 255)) == CUDA_SUCCESS &&
                type == CU_MEMORYTYPE_DEVICE,
            "%s", "the last byte of device memory is not device memory");
    ASSERT_(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)pinned) ==
                    CUDA_SUCCESS &&
                type == CU_MEMORYTYPE_HOST,
            "pinned memory's type is %u", type);
    ASSERT_(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)host) !=
                CUDA_SUCCESS,
            "%s", "ordinary host memory has attributes");
    CUDA_OK(cudaFreeHost(pinned));
    CUDA_OK(cudaFree(d));
    return 0;
}

/* An event behind cuStreamWaitValue32 stays unready until the word is written; copies from
 * pinned memory, a kernel and a host function then run in stream order; the host function may
 * not call CUDA. */
static void nap_ms(int ms)
{
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

static int test_stream_order(void)
{
    enum { N = 1000 };
    cudaStream_t       s;
    cudaEvent_t        ev;
    volatile uint32_t *flag  = NULL;
    void              *dflag = NULL;
    float             *a = NULL, *b = NULL, *ha = NULL, *hb = NULL;
    int                ran = 0;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUDA_OK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    CUDA_OK(cudaHostAlloc((void **)&flag, sizeof *flag, cudaHostAllocMapped));
    __atomic_store_n(flag, 0u, __ATOMIC_RELEASE);
    CUDA_OK(cudaHostGetDevicePointer(&dflag, (void *)flag, 0));
    CUDA_OK(cudaHostAlloc((void **)&ha, N * sizeof *ha, cudaHostAllocPortable));
    CUDA_OK(cudaHostAlloc((void **)&hb, N * sizeof *hb, cudaHostAllocPortable));
    CUDA_OK(cudaMalloc((void **)&a, N * sizeof *a));
    CUDA_OK(cudaMalloc((void **)&b, N * sizeof *b));
    for (int i = 0; i < N; i++) {
        ha[i] = (float)i;
        hb[i] = (float)(2 * i + 1);
    }
    ASSERT_(cuStreamWaitValue32(s, (CUdeviceptr)dflag, 5, CU_STREAM_WAIT_VALUE_GEQ) == CUDA_SUCCESS,
            "%s", "cuStreamWaitValue32");
    CUDA_OK(cudaMemcpyAsync(a, ha, N * sizeof *a, cudaMemcpyHostToDevice, s));
    CUDA_OK(cudaMemcpyAsync(b, hb, N * sizeof *b, cudaMemcpyHostToDevice, s));
    ASSERT_(coll_cuda_reduce2(COLL_FLOAT32, COLL_SUM, a, a, b, N, s) == 0, "%s", "reduce2");
    CUDA_OK(cudaLaunchHostFunc(s, hostfn_calls_cuda, &ran));
    CUDA_OK(cudaMemcpyAsync(ha, a, N * sizeof *a, cudaMemcpyDeviceToHost, s));
    CUDA_OK(cudaEventRecord(ev, s));
    nap_ms(50);
    /* (the copy into ha is not read here: the event after it says it has not run) */
    int ran_early = __atomic_load_n(&ran, __ATOMIC_ACQUIRE);
    ASSERT_(cudaEventQuery(ev) == cudaErrorNotReady && ran_early == 0,
            "the stream went past cuStreamWaitValue32 (ran %d)", ran_early);
    __atomic_store_n(flag, 4u, __ATOMIC_RELEASE);
    nap_ms(20);
    ASSERT_(cudaEventQuery(ev) == cudaErrorNotReady, "%s", "4 >= 5 was taken as true");
    __atomic_store_n(flag, 5u, __ATOMIC_RELEASE);
    CUDA_OK(cudaEventSynchronize(ev));
    ASSERT_(ran == 1 && hostfn_result == cudaErrorNotPermitted,
            "host function ran %d, its cudaMalloc returned %d", ran, (int)hostfn_result);
    for (int i = 0; i < N; i++) {
        ASSERT_(ha[i] == (float)(3 * i + 1), "element %d is %g, expected %d", i, (double)ha[i],
                3 * i + 1);
    }
    CUDA_OK(cudaEventDestroy(ev));
    CUDA_OK(cudaStreamDestroy(s));
    CUDA_OK(cudaFree(a));
    CUDA_OK(cudaFree(b));
    CUDA_OK(cudaFreeHost(ha));
    CUDA_OK(cudaFreeHost(hb));
    CUDA_OK(cudaFreeHost((void *)flag));
    return 0;
}

/* A stream waiting on a word holds only so many operations: queueing more blocks the caller
 * (CUDASIM_STREAM_DEPTH, 16 unless set) until the word is written. */
typedef struct {
    cudaStream_t s;
    void        *dev;
    atomic_int   queued;
    int          n;
} depth_arg_t;

static void *depth_pusher(void *p)
{
    depth_arg_t *a = p;
    for (int i = 0; i < a->n; i++) {
        if (cudaMemsetAsync(a->dev, i, 64, a->s) != cudaSuccess) {
            break;
        }
        atomic_fetch_add(&a->queued, 1);
    }
    return NULL;
}

/* A copy between the device and pageable memory returns once done and holds the runtime's
 * staging until then: a second one, on an idle stream, waits for the first. */
typedef struct {
    cudaStream_t s;
    void        *dst, *src;
    atomic_int   done;
} copy_arg_t;

static void *pageable_copier(void *p)
{
    copy_arg_t *a = p;
    if (cudaMemcpyAsync(a->dst, a->src, 256, cudaMemcpyDeviceToHost, a->s) == cudaSuccess) {
        atomic_store(&a->done, 1);
    }
    return NULL;
}

/* A caller's pageable copy of 256 bytes from dev to page, on thread *t, queued on s behind a
 * wait for the word (flag, dflag) to reach 1: it holds the staging of pageable copies until the
 * word is written. Returns after settle_ms, for the copy to get there. */
static void pageable_copy_held(cudaStream_t s, volatile uint32_t *flag, void *dflag, void *dev,
                               char *page, copy_arg_t *c, pthread_t *t, int settle_ms)
{
    __atomic_store_n(flag, 0u, __ATOMIC_RELEASE);
    ASSERT_(cuStreamWaitValue32(s, (CUdeviceptr)dflag, 1, CU_STREAM_WAIT_VALUE_GEQ) == CUDA_SUCCESS,
            "%s", "cuStreamWaitValue32");
    *c = (copy_arg_t){.s = s, .dst = page, .src = dev};
    ASSERT_(pthread_create(t, NULL, pageable_copier, c) == 0, "%s", "pthread_create");
    nap_ms(settle_ms);
}

static int test_stream_depth_and_pageable(void)
{
    cudaStream_t       s, s2;
    volatile uint32_t *flag  = NULL;
    void              *dflag = NULL, *dev = NULL, *pinned = NULL;
    char               page1[256], page2[256];
    pthread_t          t, t1, t2;
    depth_arg_t        da = {.n = 40};
    copy_arg_t         c1, c2;

    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUDA_OK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    CUDA_OK(cudaHostAlloc((void **)&flag, sizeof *flag, cudaHostAllocMapped));
    CUDA_OK(cudaHostAlloc(&pinned, 256, cudaHostAllocPortable));
    __atomic_store_n(flag, 0u, __ATOMIC_RELEASE);
    CUDA_OK(cudaHostGetDevicePointer(&dflag, (void *)flag, 0));
    CUDA_OK(cudaMalloc(&dev, 256));
    /* the depth */
    ASSERT_(cuStreamWaitValue32(s, (CUdeviceptr)dflag, 1, CU_STREAM_WAIT_VALUE_GEQ) == CUDA_SUCCESS,
            "%s", "cuStreamWaitValue32");
    da.s   = s;
    da.dev = dev;
    atomic_init(&da.queued, 0);
    ASSERT_(pthread_create(&t, NULL, depth_pusher, &da) == 0, "%s", "pthread_create");
    nap_ms(50);
    int q = atomic_load(&da.queued);
    /* before any check can return: nothing is left waiting */
    __atomic_store_n(flag, 1u, __ATOMIC_RELEASE);
    pthread_join(t, NULL);
    ASSERT_(q > 0 && q < da.n, "%d of %d operations queued behind a wait (none should block?)", q,
            da.n);
    ASSERT_(atomic_load(&da.queued) == da.n, "%d of %d queued once the wait ended",
            atomic_load(&da.queued), da.n);
    CUDA_OK(cudaStreamSynchronize(s));
    /* the pageable copies */
    pageable_copy_held(s, flag, dflag, dev, page1, &c1, &t1, 20);
    c2 = (copy_arg_t){.s = s2, .dst = page2, .src = dev};
    ASSERT_(pthread_create(&t2, NULL, pageable_copier, &c2) == 0, "%s", "pthread_create");
    nap_ms(50);
    int early1 = atomic_load(&c1.done), early2 = atomic_load(&c2.done);
    /* pinned memory is not held back */
    cudaError_t pe = cudaMemcpyAsync(pinned, dev, 256, cudaMemcpyDeviceToHost, s2);
    if (pe == cudaSuccess) {
        pe = cudaStreamSynchronize(s2);
    }
    __atomic_store_n(flag, 1u, __ATOMIC_RELEASE); /* before any check can return */
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    ASSERT_(!early1 && !early2,
            "pageable copies returned (%d, %d) while the first waited for its stream", early1,
            early2);
    ASSERT_(pe == cudaSuccess, "a copy to pinned memory: %s", cudaGetErrorString(pe));
    ASSERT_(atomic_load(&c1.done) && atomic_load(&c2.done), "%s", "a pageable copy failed");
    CUDA_OK(cudaStreamDestroy(s));
    CUDA_OK(cudaStreamDestroy(s2));
    CUDA_OK(cudaFree(dev));
    CUDA_OK(cudaFreeHost(pinned));
    CUDA_OK(cudaFreeHost((void *)flag));
    return 0;
}

/* A transport's copy of device memory (coll_cuda_copy_sync: GPUDirect RDMA's small messages,
 * from and to its pageable buffers) goes through the device state's pinned memory, so that a
 * caller's pageable copy held behind a waiting stream does not hold it back; without that
 * memory it is held back, as on a GPU. */
typedef struct {
    coll_devmem_t dm;
    void         *dst;
    const void   *src;
    size_t        n;
    int           to_device;
    coll_result_t st;
    atomic_int    done;
} devcopy_arg_t;

static void *devcopier(void *p)
{
    devcopy_arg_t *a = p;
    a->st            = coll_cuda_copy_sync(&a->dm, a->dst, a->src, a->n, a->to_device);
    atomic_store(&a->done, 1);
    return NULL;
}

/* Runs a's copy on a thread of its own and waits up to limit_ms for it: 1 when it ended, 0 when
 * not (yet), -1 when no thread could be started (then *t is not to be joined). */
static int devcopy_within(devcopy_arg_t *a, pthread_t *t, int limit_ms)
{
    atomic_init(&a->done, 0);
    if (pthread_create(t, NULL, devcopier, a) != 0) {
        return -1;
    }
    for (int waited = 0; waited < limit_ms && !atomic_load(&a->done); waited += 5) {
        nap_ms(5);
    }
    return atomic_load(&a->done);
}

static int test_devmem_copy(void)
{
    const size_t       n    = 600u << 10; /* three pieces of the pin */
    const size_t       pinn = 256u << 10;
    cudaStream_t       s, s2;
    volatile uint32_t *flag  = NULL;
    void              *dflag = NULL, *dev = NULL, *pin = NULL;
    char               page[256];
    unsigned char     *in = malloc(n), *out = malloc(n);
    pthread_t          t1, ta, tb, tx;
    copy_arg_t         c1;

    ASSERT_(in != NULL && out != NULL, "%s", "malloc");
    for (size_t i = 0; i < n; i++) {
        in[i]  = (unsigned char)(i * 7 + 3);
        out[i] = 0;
    }
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUDA_OK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    CUDA_OK(cudaHostAlloc((void **)&flag, sizeof *flag, cudaHostAllocMapped));
    CUDA_OK(cudaHostAlloc(&pin, pinn, cudaHostAllocPortable));
    CUDA_OK(cudaHostGetDevicePointer(&dflag, (void *)flag, 0));
    CUDA_OK(cudaMalloc(&dev, n));
    /* a caller's pageable copy, queued behind a wait: it holds the driver's staging */
    pageable_copy_held(s, flag, dflag, dev, page, &c1, &t1, 100);
    /* without the pin: held back until the wait ends (that the hazard is there to be seen) */
    devcopy_arg_t x = {
        .dm = {.stream = s2, .device = 0}, .dst = dev, .src = in, .n = 256, .to_device = 1};
    int x_early = devcopy_within(&x, &tx, 50);
    /* through the pin, to the device and back, meanwhile */
    devcopy_arg_t a         = {.dm        = {.stream = s2, .device = 0, .pin = pin, .pin_len = pinn},
                               .dst       = dev,
                               .src       = in,
                               .n         = n,
                               .to_device = 1};
    devcopy_arg_t b         = {.dm = a.dm, .dst = out, .src = dev, .n = n, .to_device = 0};
    int           a_in_time = x_early == 0 ? devcopy_within(&a, &ta, 10000) : -1;
    int           b_in_time = a_in_time == 1 ? devcopy_within(&b, &tb, 10000) : -1;
    int           x_held    = x_early == 0 && !atomic_load(&x.done);
    __atomic_store_n(flag, 1u, __ATOMIC_RELEASE); /* before any check can return */
    pthread_join(t1, NULL);
    if (x_early >= 0) {
        pthread_join(tx, NULL);
    }
    if (a_in_time >= 0) {
        pthread_join(ta, NULL);
    }
    if (b_in_time >= 0) {
        pthread_join(tb, NULL);
    }
    ASSERT_(x_early == 0 && x_held,
            "a copy without the pin was not held back by another thread's pageable copy (%d, %d): "
            "the check below would show nothing",
            x_early, x_held);
    ASSERT_(a_in_time == 1 && b_in_time == 1,
            "copies through the pin waited for another thread's pageable copy (%d, %d)", a_in_time,
            b_in_time);
    ASSERT_(a.st == COLL_OK && b.st == COLL_OK && x.st == COLL_OK, "copies failed: %s",
            coll_last_error());
    ASSERT_(atomic_load(&c1.done), "%s", "the pageable copy failed");
    ASSERT_(memcmp(in, out, n) == 0, "%s", "the copies through the pin changed the data");
    CUDA_OK(cudaStreamDestroy(s));
    CUDA_OK(cudaStreamDestroy(s2));
    CUDA_OK(cudaFree(dev));
    CUDA_OK(cudaFreeHost(pin));
    CUDA_OK(cudaFreeHost((void *)flag));
    free(in);
    free(out);
    return 0;
}

int main(void)
{
    int rc = 0;
    /* these three fork before this process uses CUDA */
    rc |= test_host_touch();
    rc |= test_hostfn_abort();
    rc |= test_ipc();
    setenv("CUDASIM_HOSTFN_CUDA", "error", 1); /* test_stream_order checks the error */
    /* as libcoll does before any stream may wait: a launch before it synchronises the device
     * (lazy loading), which would deadlock test_stream_order */
    ASSERT_(coll_cuda_kernels_load() == 0, "%s", "coll_cuda_kernels_load");
    rc |= test_fresh_memory();
    rc |= test_kernels_contract();
    rc |= test_copies_and_pointers();
    rc |= test_stream_order();
    rc |= test_stream_depth_and_pageable();
    rc |= test_devmem_copy();
    rc |= test_fork_after_use();
    printf("%s\n", rc ? "FAIL" : "cudasim: emulation checks passed");
    return rc ? 1 : 0;
}
