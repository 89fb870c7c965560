/* SPDX-License-Identifier: MIT */
/*
 * The emulation itself (cudasim.h): what makes a bug in libcoll's device paths show here as on
 * a GPU. Device memory faults when host code touches it; copies check kind and bounds (more
 * strictly than the runtime, which may accept a wrong kind on pageable memory); a stream
 * runs its operations in order and asynchronously (an event stays unready while its stream waits
 * on a memory word, cuStreamWaitValue32); a host function may not call CUDA; a handle of
 * cudaIpcGetMemHandle maps the same memory in another process; pool memory has no handle; a
 * child forked after CUDA was used gets an initialization error; the pointer attributes tell
 * device memory from pinned and ordinary host memory; the reduction kernels of
 * kernels_host.c compute on device memory in stream order.
 */
#include "coll_test.h"
#include "cuda/kernels.h"

#include <cuda.h>
#include <cuda_runtime.h>
#include <signal.h>
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
    *(int *)arg   = 1;
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
        _exit(ipc_child(down[0], up[1]));
    }
    void              *d = NULL, *pool = NULL;
    unsigned char      buf[4096];
    cudaIpcMemHandle_t h;
    for (size_t i = 0; i < sizeof buf; i++) {
        buf[i] = (unsigned char)(i * 7);
    }
    CUDA_OK(cudaMalloc(&d, sizeof buf));
    CUDA_OK(cudaMemcpy(d, buf, sizeof buf, cudaMemcpyHostToDevice));
    CUDA_OK(cudaIpcGetMemHandle(&h, d));
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
    close(down[0]);
    close(down[1]);
    close(up[0]);
    close(up[1]);
    return 0;
}

/* A child that writes to device memory from the host dies of SIGSEGV. */
static int test_host_touch(void)
{
    int   wst = 0;
    pid_t pid = fork();
    ASSERT_(pid >= 0, "%s", "fork");
    if (pid == 0) {
        void *d = NULL;
        if (cudaMalloc(&d, 4096) != cudaSuccess) {
            _exit(2);
        }
        ((volatile char *)d)[100] = 1; /* must fault */
        _exit(0);
    }
    ASSERT_(waitpid(pid, &wst, 0) == pid, "%s", "waitpid");
    ASSERT_(WIFSIGNALED(wst) && WTERMSIG(wst) == SIGSEGV,
            "a host write to device memory did not fault (status %#x)", wst);
    return 0;
}

/* After CUDA was used, a forked child gets an initialization error. */
static int test_fork_after_use(void)
{
    int   wst = 0;
    pid_t pid = fork();
    ASSERT_(pid >= 0, "%s", "fork");
    if (pid == 0) {
        void *d = NULL;
        _exit(cudaMalloc(&d, 64) == cudaErrorInitializationError ? 0 : 1);
    }
    ASSERT_(waitpid(pid, &wst, 0) == pid && WIFEXITED(wst) && WEXITSTATUS(wst) == 0, "%s",
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
    CUDA_OK(cudaMemcpy(d, pinned, 256, cudaMemcpyDeviceToDevice)); /* pinned: device-accessible */
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
    *flag = 0;
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
    ASSERT_(cudaEventQuery(ev) == cudaErrorNotReady && ran == 0 && ha[1] == 1.0f,
            "the stream went past cuStreamWaitValue32 (ran %d, ha[1] %g)", ran, (double)ha[1]);
    *flag = 4;
    nap_ms(20);
    ASSERT_(cudaEventQuery(ev) == cudaErrorNotReady, "%s", "4 >= 5 was taken as true");
    *flag = 5;
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

int main(void)
{
    int rc = 0;
    rc |= test_host_touch(); /* both fork before this process uses CUDA */
    rc |= test_ipc();
    rc |= test_copies_and_pointers();
    rc |= test_stream_order();
    rc |= test_fork_after_use();
    printf("%s\n", rc ? "FAIL" : "cudasim: emulation checks passed");
    return rc ? 1 : 0;
}
