/* SPDX-License-Identifier: MIT */
/*
 * Device windows shared through CUDA IPC, and the synchronous copy and reduction that the
 * direct path's window and local steps run on device memory. With COLL_CUDA_DIRECT (ranks of
 * one host sharing shm windows) or COLL_CUDA_P2P (ranks of one host, p2p.c), every rank
 * allocates two halves of COLL_CUDA_WINDOW_SIZE bytes with its device state, before any call
 * of the communicator can be in flight. The communicator's first collective on device memory
 * maps them (devop.c), in two exchanges on host memory made by every rank whatever fails on it:
 * an all-gather of the IPC handles (with the window size, the device, and a token of the
 * process, whose other ranks use the pointer itself), then, once each rank tried to map every
 * other's window, an all-reduce of whether it could. Unless every rank could, every rank closes
 * what it mapped and the communicator keeps to staging. A window is freed only at
 * coll_cuda_comm_free, after every rank's destroy closed its mappings of it. On the direct path
 * the one-shot and two-shot all-reduce schedules run unchanged: their flags and
 * acknowledgements are the host windows', their data moves between device windows by copy
 * engine and reduction kernels.
 */
#include "cuda/devop.h"
#include "cuda/kernels.h"
#include "cuda/p2p.h"
#include "error.h"
#include "log.h"
#include "param.h"
#include "util.h"

#include <pthread.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    int32_t            ok;     /* the window allocated and exported */
    int32_t            pid;    /* for the log */
    int32_t            device; /* CUDA ordinal in its process */
    int32_t            pad;
    uint64_t           token; /* this process (random): ranks of one process use the pointer */
    uint64_t           bytes; /* COLL_CUDA_WINDOW_SIZE here: must be equal everywhere */
    uint64_t           ptr;
    uint64_t           p2p_min; /* COLL_CUDA_P2P_MIN here: the ranks take the largest */
    cudaIpcMemHandle_t handle;
} ipc_card_t;

static uint64_t       ipc_token;
static pthread_once_t ipc_token_once = PTHREAD_ONCE_INIT;

static void ipc_token_make(void)
{
    if (coll_random_bytes(&ipc_token, sizeof(ipc_token)) != COLL_OK || ipc_token == 0) {
        ipc_token = ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)&ipc_token ^
                    (uint64_t)(coll_time_s() * 1e9);
    }
}

/* Another rank of this process, on device dev: its window pointer works here once this device
 * may access dev's memory. cudaSuccess or why not. */
static cudaError_t ipc_same_process(int mydev, int dev)
{
    int can = 0;
    if (dev == mydev) {
        return cudaSuccess;
    }
    cudaError_t e = cudaDeviceCanAccessPeer(&can, mydev, dev);
    if (e == cudaSuccess && !can) {
        return cudaErrorPeerAccessUnsupported;
    }
    if (e == cudaSuccess) {
        e = cudaDeviceEnablePeerAccess(dev, 0);
    }
    if (e == cudaErrorPeerAccessAlreadyEnabled) {
        e = cudaSuccess;
    }
    cudaGetLastError();
    return e;
}

#define IPC_MAX_WINDOW ((size_t)1 << 40) /* per half; more is a mistake, not a window */

int coll_cuda_windows_wanted(const coll_comm_t *comm, const coll_cuda_comm_t *cc)
{
    return (coll_param_bool(COLL_P_CUDA_DIRECT) && comm->layout.shared_window) || cc->p2p_possible;
}

void coll_cuda_ipc_alloc(coll_comm_t *comm, coll_cuda_comm_t *cc)
{
    cudaError_t e;

    cc->win_bytes = coll_param_size(COLL_P_CUDA_WINDOW_SIZE);
    if (cc->win_bytes == 0 || cc->win_bytes > IPC_MAX_WINDOW ||
        !coll_cuda_windows_wanted(comm, cc)) {
        return;
    }
    e = cudaStreamCreateWithFlags(&cc->exec, cudaStreamNonBlocking);
    if (e == cudaSuccess) {
        e = cudaMalloc(&cc->win_own, 2 * cc->win_bytes);
    }
    if (e == cudaSuccess) {
        e = cudaIpcGetMemHandle(&cc->win_handle, cc->win_own);
    }
    cc->win_ready = e == cudaSuccess;
    if (!cc->win_ready) {
        coll_info(COLL, "rank %d: no device windows (%s); device calls use staging", comm->rank,
                  cudaGetErrorString(e));
        cudaGetLastError();
    }
}

/* Close the mappings of the other ranks' windows (not the own window). */
static void ipc_unmap(coll_cuda_comm_t *cc, int nranks, int me)
{
    for (int r = 0; cc->win != NULL && r < nranks; r++) {
        if (r != me && cc->win[r] != NULL && cc->owned_map != NULL && cc->owned_map[r]) {
            cudaIpcCloseMemHandle(cc->win[r]);
        }
    }
    coll_free(cc->win);
    coll_free(cc->owned_map);
    cc->win       = NULL;
    cc->owned_map = NULL;
}

coll_result_t coll_cuda_ipc_setup(coll_comm_t *comm, coll_cuda_comm_t *cc)
{
    int           n = comm->nranks, me = comm->rank;
    ipc_card_t   *all  = coll_calloc((size_t)n, sizeof(*all), "IPC handles");
    ipc_card_t    mine = {0};
    coll_result_t st;
    cudaError_t   e   = cudaSuccess;
    int           old = -1;
    int32_t       ok = 1, all_ok = 0;
    const char   *why = "";

    cc->ipc_tried = 1;
    if (all == NULL) { /* cannot take part: the others time out on the exchange */
        pthread_mutex_lock(&comm->lock);
        st = coll_comm_fail(comm, COLL_ERR_NO_MEMORY, "rank %d: no memory for %d IPC handles", me,
                            n);
        pthread_mutex_unlock(&comm->lock);
        return st;
    }
    pthread_once(&ipc_token_once, ipc_token_make);
    cc->win       = coll_calloc((size_t)n, sizeof(void *), "device windows");
    cc->owned_map = coll_calloc((size_t)n, sizeof(*cc->owned_map), "device windows");
    cudaGetDevice(&old);
    cudaSetDevice(cc->device);
    /* every rank takes part in both exchanges whatever fails here: it says so instead */
    mine.ok      = cc->win_ready && cc->win != NULL && cc->owned_map != NULL;
    mine.handle  = cc->win_handle;
    mine.pid     = (int32_t)getpid();
    mine.device  = cc->device;
    mine.token   = ipc_token;
    mine.bytes   = cc->win_bytes;
    mine.ptr     = (uint64_t)(uintptr_t)cc->win_own;
    mine.p2p_min = coll_param_size(COLL_P_CUDA_P2P_MIN);
    coll_debug(COLL, "rank %d: exchanging device windows", me);
    /* the same call on every rank: its first call on device memory (devop.c) */
    st = coll_allgather(&mine, all, sizeof(mine), COLL_UINT8, comm);
    ok = st == COLL_OK && mine.ok;

    cc->p2p_min = mine.p2p_min;
    for (int r = 0; r < n && st == COLL_OK; r++) { /* the same on every rank */
        cc->p2p_min = all[r].p2p_min > cc->p2p_min ? all[r].p2p_min : cc->p2p_min;
    }
    for (int r = 0; r < n && ok; r++) {
        if (!all[r].ok) {
            ok  = 0;
            why = "a rank has no window";
        } else if (all[r].bytes != mine.bytes) {
            ok  = 0;
            why = "COLL_CUDA_WINDOW_SIZE differs between ranks";
        }
    }
    for (int r = 0; r < n && ok; r++) {
        if (r == me) {
            cc->win[r] = cc->win_own;
        } else if (all[r].token == mine.token) { /* a rank of this process: its address */
            e = ipc_same_process(cc->device, all[r].device);
            if (e != cudaSuccess) {
                coll_info(COLL, "rank %d: rank %d's window on device %d: %s", me, r,
                          (int)all[r].device, cudaGetErrorString(e));
                ok  = 0;
                why = "ranks of one process on GPUs without peer access";
                break;
            }
            cc->win[r] = (void *)(uintptr_t)all[r].ptr;
        } else {
            e = cudaIpcOpenMemHandle(&cc->win[r], all[r].handle, cudaIpcMemLazyEnablePeerAccess);
            if (e != cudaSuccess) {
                cudaGetLastError();
                coll_info(COLL, "rank %d: mapping rank %d's device window (pid %d): %s", me, r,
                          (int)all[r].pid, cudaGetErrorString(e));
                cc->win[r] = NULL;
                ok         = 0;
                why        = "a rank could not map another's window (its log says why)";
                break;
            }
            cc->owned_map[r] = 1;
        }
    }
    /* the second exchange: every rank mapped every window, or none uses them */
    if (st == COLL_OK) {
        st = coll_allreduce(&ok, &all_ok, 1, COLL_INT32, COLL_MIN, comm);
    }
    cc->ipc_ok = st == COLL_OK && all_ok == 1;
    if (!cc->ipc_ok && cc->win != NULL) {
        ipc_unmap(cc, n, me);
    }
    cc->dev_layout               = comm->layout;
    cc->dev_layout.window_bytes  = cc->win_bytes;
    cc->dev_layout.shared_window = comm->layout.shared_window && cc->ipc_ok;
    if (old >= 0) {
        cudaSetDevice(old);
    }
    coll_info(COLL, "rank %d: device windows %s (%zu bytes per half)%s%s", me,
              cc->ipc_ok ? "mapped from every rank" : "not used; device calls are staged",
              cc->win_bytes, why[0] != '\0' ? ": " : "", why);
    if (cc->ipc_ok && cc->p2p_possible) {
        coll_p2p_log_links(comm);
        coll_info(COLL,
                  "rank %d: p2p: collectives from %zu bytes (COLL_CUDA_P2P_MIN, the "
                  "largest of the ranks'); smaller ones are staged",
                  me, cc->p2p_min);
        if (coll_param_bool(COLL_P_CUDA_DIRECT)) { /* devop.c says why */
            coll_info(COLL,
                      "rank %d: COLL_CUDA_DIRECT=1 unused: the p2p path holds the device "
                      "windows",
                      me);
        }
    }
    coll_free(all);
    return st;
}

void coll_cuda_ipc_close(coll_cuda_comm_t *cc, int nranks, int me)
{
    ipc_unmap(cc, nranks, me);
    if (cc->exec != NULL) {
        cudaStreamDestroy(cc->exec);
        cc->exec = NULL;
    }
}

void coll_cuda_ipc_free(coll_cuda_comm_t *cc)
{
    if (cc->win_own != NULL) {
        cudaFree(cc->win_own);
        cc->win_own = NULL;
    }
}

const coll_layout_t *coll_cuda_dev_layout(coll_comm_t *comm)
{
    return &comm->cuda->dev_layout;
}

const coll_algo_t *coll_cuda_dev_algo(coll_comm_t *comm, const coll_args_t *args, double *cost_p)
{
    coll_cuda_comm_t  *cc = comm->cuda;
    const coll_algo_t *cand[2], *best = NULL;
    double             best_cost = -1;

    if (cc == NULL || !cc->ipc_ok || args->coll != COLL_OP_ALLREDUCE) {
        return NULL;
    }
    cand[0] = coll_algo_registry_find("oneshot");
    cand[1] = coll_algo_registry_find("twoshot");
    if (comm->algo_override != NULL) {
        const coll_algo_t *a =
            coll_algo_select(comm->nranks, args, comm->algo_override, &comm->model, cost_p);
        if (a == cand[0] || a == cand[1]) {
            return a;
        }
    }
    for (int i = 0; i < 2; i++) {
        if (cand[i] == NULL || !coll_algo_applies(cand[i], comm->nranks, args)) {
            continue;
        }
        double c = cand[i]->cost_us(comm->nranks, args, &comm->model);
        if (best == NULL || c < best_cost) {
            best      = cand[i];
            best_cost = c;
        }
    }
    if (cost_p != NULL) {
        *cost_p = best_cost;
    }
    return best;
}

void *coll_cuda_win_ptr(coll_comm_t *comm, int rank, int parity)
{
    coll_cuda_comm_t *cc = comm->cuda;
    return (char *)cc->win[rank] + (size_t)parity * cc->win_bytes;
}

/* Run on the exec stream with the communicator's device current, then wait. */
static coll_result_t exec_sync(coll_comm_t *comm, cudaError_t e, const char *what)
{
    coll_cuda_comm_t *cc = comm->cuda;
    if (e == cudaSuccess) {
        e = cudaStreamSynchronize(cc->exec);
    }
    if (e != cudaSuccess) {
        return coll_comm_fail(comm, COLL_ERR_CUDA, "rank %d: %s on device memory: %s", comm->rank,
                              what, cudaGetErrorString(e));
    }
    return COLL_OK;
}

#define EXEC_ON_DEVICE(_cc, _old)                                                                  \
    int _old = -1;                                                                                 \
    cudaGetDevice(&_old);                                                                          \
    if (_old != (_cc)->device) {                                                                   \
        cudaSetDevice((_cc)->device);                                                              \
    }
#define EXEC_RESTORE(_cc, _old)                                                                    \
    if (_old >= 0 && _old != (_cc)->device) {                                                      \
        cudaSetDevice(_old);                                                                       \
    }

coll_result_t coll_cuda_dev_copy(coll_comm_t *comm, void *dst, const void *src, size_t len)
{
    coll_cuda_comm_t *cc = comm->cuda;
    coll_debug(COLL, "rank %d: device copy %zu bytes %p -> %p", comm->rank, len, src, dst);
    EXEC_ON_DEVICE(cc, old);
    coll_result_t st =
        exec_sync(comm, cudaMemcpyAsync(dst, src, len, cudaMemcpyDeviceToDevice, cc->exec), "copy");
    coll_debug(COLL, "rank %d: device copy done", comm->rank);
    EXEC_RESTORE(cc, old);
    return st;
}

coll_result_t coll_cuda_dev_reduce(coll_comm_t *comm, coll_dtype_t dt, coll_redop_t op, void *dst,
                                   const void *a, const void *b, size_t n)
{
    coll_cuda_comm_t *cc = comm->cuda;
    coll_debug(COLL, "rank %d: device reduction of %zu elements %p, %p -> %p", comm->rank, n, a, b,
               dst);
    EXEC_ON_DEVICE(cc, old);
    coll_result_t st = exec_sync(
        comm, (cudaError_t)coll_cuda_reduce2(dt, op, dst, a, b, n, cc->exec), "reduction");
    coll_debug(COLL, "rank %d: device reduction done", comm->rank);
    EXEC_RESTORE(cc, old);
    return st;
}

coll_result_t coll_cuda_dev_div(coll_comm_t *comm, coll_dtype_t dt, void *buf, size_t n,
                                int divisor)
{
    coll_cuda_comm_t *cc = comm->cuda;
    EXEC_ON_DEVICE(cc, old);
    coll_result_t st =
        exec_sync(comm, (cudaError_t)coll_cuda_div(dt, buf, n, divisor, cc->exec), "division");
    EXEC_RESTORE(cc, old);
    return st;
}
