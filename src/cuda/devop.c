/* SPDX-License-Identifier: MIT */
/*
 * Device operations: sizing and staging a call's buffers, ordering it on the caller's stream,
 * and completing it for the caller (a stream that waits, or a request).
 *
 * Order: a device operation takes its sequence number and schedule at the call, under the
 * communicator's lock, like every other call, so calls on host and device memory may be mixed
 * on one communicator in any order (the same on every rank). Its engine request is gated: it
 * posts nothing until the proxy thread (proxy.c) has seen the caller's stream reach the call
 * and copied the inputs to pinned staging.
 *
 * The caller's stream waits with a stream memory operation (cuStreamWaitValue32 on a mapped
 * word, no SM busy) for the proxy to write the call's ticket; where the driver refuses those,
 * a host function on the stream blocks until the call completes.
 */
#include "cuda/devop.h"
#include "cuda/p2p.h"
#include "api/check.h"
#include "cuda/driver.h"
#include "compiler.h"
#include "error.h"
#include "log.h"
#include "param.h"
#include "util.h"

#include <stddef.h>
#include <string.h>
#include <sys/mman.h>

#define CUDA_TRY(_call, _what)                                                                     \
    do {                                                                                           \
        cudaError_t _e = (_call);                                                                  \
        if (_e != cudaSuccess) {                                                                   \
            return coll_set_last_error(COLL_ERR_CUDA, "%s: %s", (_what), cudaGetErrorString(_e));  \
        }                                                                                          \
    } while (0)

int coll_cuda_call_on_device(const coll_comm_t *comm, const coll_args_t *a, const void *sendbuf,
                             const void *recvbuf)
{
    size_t s, r;
    coll_call_bytes(comm, a, &s, &r);
    return (s > 0 && coll_cuda_ptr_device(sendbuf, NULL)) ||
           (r > 0 && coll_cuda_ptr_device(recvbuf, NULL));
}

/* ---- pinned staging (proxy thread only) ---- */

/* Bytes of staging d needs (0: none), and where the receive part starts (*roff_p, or -1 when
 * send and receive share one region in place, starting at the lower of the two). */
static size_t stage_need(const coll_devop_t *d, size_t *roff_p)
{
    uintptr_t s = (uintptr_t)d->usend, r = (uintptr_t)d->urecv;

    *roff_p = 0;
    if (d->direct || d->gdr || (!d->send_dev && !d->recv_dev)) {
        return 0;
    }
    if (d->send_dev && d->recv_dev && s < r + d->recv_bytes && r < s + d->send_bytes) {
        uintptr_t lo = s < r ? s : r;
        uintptr_t hi =
            s + d->send_bytes > r + d->recv_bytes ? s + d->send_bytes : r + d->recv_bytes;
        *roff_p = (size_t)-1;
        return hi - lo;
    }
    *roff_p = d->send_dev ? (d->send_bytes + 255) & ~(size_t)255 : 0;
    return *roff_p + (d->recv_dev ? d->recv_bytes : 0);
}

/* Give the call its staging and the engine's buffer pointers (proxy; reserved at the call). */
coll_result_t coll_devop_stage(coll_cuda_comm_t *cc, coll_devop_t *d)
{
    uintptr_t s = (uintptr_t)d->usend, r = (uintptr_t)d->urecv;
    size_t    roff, need                 = stage_need(d, &roff);
    char     *base;

    d->esend = (void *)d->usend;
    d->erecv = d->urecv;
    if (need == 0) {
        return COLL_OK;
    }
    base = d->heap != NULL         ? d->heap
           : d->mpart != NULL      ? d->mpart
           : cc->stage_cap >= need ? cc->stage
                                   : NULL;
    if (base == NULL) {
        return coll_set_last_error(COLL_ERR_INTERNAL, "staging of %zu bytes was not reserved",
                                   need);
    }
    if (roff == (size_t)-1) { /* in place: one region keeps the offsets */
        uintptr_t lo = s < r ? s : r;
        d->esend     = base + (s - lo);
        d->erecv     = base + (r - lo);
        return COLL_OK;
    }
    if (d->send_dev) {
        d->esend = base;
    }
    if (d->recv_dev) {
        d->erecv = base + roff;
    }
    return COLL_OK;
}

/* ---- GPUDirect RDMA: the transports move the device buffers ---- */

/* A staged call that may skip staging instead: every buffer it touches here is device memory,
 * and its schedule (built, gate closed) never reduces on receipt and uses no host scratch or
 * window, every message over an endpoint that moves device memory (the ib transport with
 * GPUDirect RDMA; coll_sched_device_fits). Each rank decides for itself: the wire protocol is
 * the same either way. */
static void devop_gdr(coll_comm_t *comm, coll_cuda_comm_t *cc, coll_devop_t *d)
{
    char why[160];
    if ((d->send_bytes > 0 && !d->send_dev) || (d->recv_bytes > 0 && !d->recv_dev) ||
        cc->exec == NULL || d->req0 == NULL || d->req0->entry == NULL) {
        return;
    }
    /* host memory standing in (tests) is for host calls; managed memory does not register; a
     * device that neither orders GPUDirect writes nor flushes them cannot be trusted with them */
    if (coll_param_enum(COLL_P_IB_GDR) == COLL_GDR_HOST ||
        (d->send_bytes > 0 && coll_cuda_ptr_managed(d->usend)) ||
        (d->recv_bytes > 0 && coll_cuda_ptr_managed(d->urecv)) || cc->gdr_unsafe) {
        return;
    }
    if (!coll_sched_device_fits(&d->req0->entry->sched, coll_engine_peer_moves_device, comm, why,
                                sizeof(why))) {
        coll_debug(COLL, "rank %d: %s on device memory staged: %s", comm->rank,
                   coll_op_name(d->args.coll), why);
        return;
    }
    d->gdr       = 1;
    d->req0->dev = &cc->devmem;
    coll_free(d->heap); /* reserved for staging, not needed */
    coll_devop_mpart_release(cc, d);
    d->heap = NULL;
    coll_debug(COLL, "rank %d: %s on device memory by GPUDirect RDMA, no staging", comm->rank,
               coll_op_name(d->args.coll));
}

/* ---- per-communicator state ---- */

static coll_result_t cuda_comm_get(coll_comm_t *comm, int device, coll_cuda_comm_t **cc_p)
{
    coll_cuda_comm_t *cc = comm->cuda;
    int               old;

    if (cc != NULL) {
        if (device >= 0 && cc->device != device) {
            return coll_comm_arg_error(comm, COLL_ERR_INVALID_ARG,
                                       "rank %d: buffers are on CUDA device %d but this "
                                       "communicator's device operations use device %d",
                                       comm->rank, device, cc->device);
        }
        *cc_p = cc;
        return COLL_OK;
    }
    CUDA_TRY(cudaGetDevice(&old), "cudaGetDevice");
    cc = coll_calloc(1, sizeof(*cc), "CUDA communicator state");
    if (cc == NULL) {
        return COLL_ERR_NO_MEMORY;
    }
    cc->device = device >= 0 ? device : old;
    pthread_mutex_init(&cc->qlock, NULL);
    pthread_cond_init(&cc->qcond, NULL);
    coll_result_t st = coll_cuda_proxy_start(cc, comm);
    if (st != COLL_OK) {
        pthread_mutex_destroy(&cc->qlock);
        pthread_cond_destroy(&cc->qcond);
        coll_free(cc);
        return st;
    }
    comm->cuda = cc;
    *cc_p      = cc;
    coll_info(COLL, "rank %d: device operations on CUDA device %d, streams wait by %s", comm->rank,
              cc->device, cc->use_memops ? "stream memory operations" : "host functions");
    return COLL_OK;
}

static coll_result_t event_get(coll_cuda_comm_t *cc, cudaEvent_t *ev)
{
    if (cc->nevents > 0) {
        *ev = cc->events[--cc->nevents];
        return COLL_OK;
    }
    CUDA_TRY(cudaEventCreateWithFlags(ev, cudaEventDisableTiming | cudaEventBlockingSync),
             "cudaEventCreate");
    return COLL_OK;
}

/* No CUDA call here: it may run in a host function (see events in devop.h). */
static void event_put(coll_cuda_comm_t *cc, cudaEvent_t ev)
{
    if (cc->nevents == cc->events_cap) {
        int          cap = cc->events_cap > 0 ? 2 * cc->events_cap : 64;
        cudaEvent_t *np  = coll_realloc(cc->events, (size_t)cap * sizeof(*np), "event pool");
        if (np == NULL) {
            return; /* the event is lost, not destroyed: it would take a CUDA call */
        }
        cc->events     = np;
        cc->events_cap = cap;
    }
    cc->events[cc->nevents++] = ev;
}

/* ---- lifetime and completion ---- */

/* A send's or receive's part of the message staging, taken at the call (qlock held), or NULL
 * when it does not fit. */
static char *devop_mpart_take(coll_cuda_comm_t *cc, size_t need)
{
    size_t at = cc->mstage != NULL ? coll_parts_take(&cc->mparts, need) : COLL_PARTS_NONE;
    return at == COLL_PARTS_NONE ? NULL : (char *)cc->mstage + at;
}

/* The call is done with its part (its result copied out, or it failed: a failed call's late
 * transfers can only land in memory that later calls of the failed communicator never read). */
void coll_devop_mpart_release(coll_cuda_comm_t *cc, coll_devop_t *d)
{
    if (d->mpart == NULL) {
        return;
    }
    pthread_mutex_lock(&cc->qlock);
    d->mpart = NULL;
    coll_parts_give(&cc->mparts);
    pthread_mutex_unlock(&cc->qlock);
}

void coll_devop_put(coll_devop_t *d)
{
    if (atomic_fetch_sub(&d->refs, 1) != 1) {
        return;
    }
    coll_cuda_comm_t *cc = d->comm->cuda;
    coll_devop_mpart_release(cc, d);
    pthread_mutex_lock(&cc->qlock);
    if (d->ready != NULL) {
        event_put(cc, d->ready);
    }
    if (d->heap != NULL && d->status != COLL_OK) {
        /* a failed call's transfers may still land in its staging: keep it until the endpoints
         * close (coll_cuda_comm_free) */
        void **np = coll_realloc(cc->parked_heaps, (size_t)(cc->nparked_heaps + 1) * sizeof(*np),
                                 "parked staging");
        if (np != NULL) {
            cc->parked_heaps                      = np;
            cc->parked_heaps[cc->nparked_heaps++] = d->heap;
            d->heap                               = NULL;
        }
    }
    pthread_mutex_unlock(&cc->qlock);
    coll_free(d->heap);
    coll_p2p_op_free(d->p2p);
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->cv);
    coll_free(d);
}

/* A stream-ordered call that streams wait for by the flag (memops), in call order (the proxy
 * takes calls off its queue in that order). */
void coll_devop_track(coll_cuda_comm_t *cc, coll_devop_t *d)
{
    if (!d->stream_ordered || !cc->use_memops) {
        return;
    }
    atomic_fetch_add(&d->refs, 1); /* until the flag has passed it */
    coll_ticket_fifo_add(&cc->sq, &d->snode, d->ticket);
}

/* The call ended (on the proxy thread). Calls may end out of order (sends and receives in
 * flight together, proxy_msg.c): a waiter on a request or a host function goes on at once,
 * while the flag, which releases every stream waiting for a ticket up to its value, moves only
 * past stream-ordered calls that all ended. */
void coll_devop_finish(coll_devop_t *d, coll_result_t st)
{
    coll_cuda_comm_t *cc = d->comm->cuda;
    pthread_mutex_lock(&d->mu);
    d->status = st;
    atomic_store(&d->complete, 1);
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
    if (d->stream_ordered && cc->use_memops) {
        uint32_t            release = 0;
        coll_ticket_node_t *x       = coll_ticket_fifo_end(&cc->sq, &d->snode, &release);
        if (x != NULL) {
            __atomic_store_n(cc->flag, release, __ATOMIC_RELEASE);
        }
        while (x != NULL) {
            coll_ticket_node_t *next = x->next;
            /* never d's last reference: the proxy puts its own after this */
            coll_devop_put((coll_devop_t *)((char *)x - offsetof(coll_devop_t, snode)));
            x = next;
        }
    }
}

void coll_devop_engine_done(void *arg, coll_result_t st)
{
    coll_devop_t *d = arg;
    d->status       = st;
    d->req          = NULL;
    atomic_store_explicit(&d->engine_done, 1, memory_order_release);
}

static void CUDART_CB devop_host_wait(void *arg)
{
    coll_devop_t     *d  = arg;
    coll_cuda_comm_t *cc = d->comm->cuda;
    pthread_mutex_lock(&d->mu);
    while (!atomic_load(&d->complete)) {
        pthread_cond_wait(&d->cv, &d->mu);
    }
    pthread_mutex_unlock(&d->mu);
    coll_devop_put(d);
    atomic_fetch_sub(&cc->host_waiters, 1); /* last: the state stays until none is left */
}

/* Make the caller's stream wait for d (comm->lock not held: the driver may block here until
 * the stream moves, which takes the proxy, which takes the lock). */
static coll_result_t devop_stream_wait(coll_cuda_comm_t *cc, coll_devop_t *d)
{
    const coll_cu_driver_t *drv = coll_cu_driver();
    if (cc->use_memops) {
        CUresult r = drv->stream_wait_value32((CUstream)d->ustream, cc->flag_dev, d->ticket,
                                              CU_STREAM_WAIT_VALUE_GEQ);
        if (r == CUDA_SUCCESS) {
            return COLL_OK;
        }
        return coll_set_last_error(COLL_ERR_CUDA, "cuStreamWaitValue32 failed (CUresult %d)",
                                   (int)r);
    }
    atomic_fetch_add(&d->refs, 1);
    atomic_fetch_add(&cc->host_waiters, 1);
    cudaError_t e = cudaLaunchHostFunc(d->ustream, devop_host_wait, d);
    if (e != cudaSuccess) {
        atomic_fetch_sub(&cc->host_waiters, 1);
        atomic_fetch_sub(&d->refs, 1);
        return coll_set_last_error(COLL_ERR_CUDA, "cudaLaunchHostFunc: %s", cudaGetErrorString(e));
    }
    return COLL_OK;
}

/* Map the device windows of every rank, collectively, at the communicator's first collective
 * on device memory (the same call on every rank; send and receive are not made by every rank),
 * with comm->lock released (held at entry and at return). Only a send or receive of this
 * communicator on device memory made before it, or a call of another communicator, can then
 * have a stream waiting for a proxy; mapping may wait for the context's streams, but waiting
 * here for those calls to end could deadlock a program whose send is matched after this
 * collective, so it does not. */
static coll_result_t devop_windows(coll_comm_t *comm, coll_cuda_comm_t *cc)
{
    coll_result_t st = COLL_OK;
    if (!cc->ipc_tried) {
        pthread_mutex_unlock(&comm->lock);
        st = coll_cuda_ipc_setup(comm, cc);
        pthread_mutex_lock(&comm->lock);
    }
    return st;
}

coll_result_t coll_cuda_start(coll_comm_t *comm, const coll_args_t *a, const void *sendbuf,
                              void *recvbuf, void *stream, int stream_ordered, coll_task_t **req_p)
{
    const char       *why = coll_cuda_unavailable();
    coll_cuda_comm_t *cc  = NULL;
    coll_devop_t     *d;
    coll_result_t     st;
    int               dev = -1, sdev = -1, rdev = -1, old = -1, pushed = 0;

    if (why != NULL) {
        /* coll_comm_arg_error puts "rank N: " in front */
        return coll_comm_arg_error(comm, COLL_ERR_UNSUPPORTED, "%s on a CUDA stream: %s",
                                   coll_op_name(a->coll), why);
    }
    d = coll_calloc(1, sizeof(*d), "device operation");
    if (d == NULL) {
        return COLL_ERR_NO_MEMORY;
    }
    d->comm           = comm;
    d->args           = *a;
    d->usend          = sendbuf;
    d->urecv          = recvbuf;
    d->stream_ordered = stream_ordered;
    d->ustream        = stream_ordered ? (cudaStream_t)stream : cudaStreamLegacy;
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cv, NULL);
    atomic_init(&d->refs, 2); /* the proxy, and the caller's request or nobody */
    coll_call_bytes(comm, a, &d->send_bytes, &d->recv_bytes);
    d->send_dev = d->send_bytes > 0 && coll_cuda_ptr_device(sendbuf, &sdev);
    d->recv_dev = d->recv_bytes > 0 && coll_cuda_ptr_device(recvbuf, &rdev);
    if (d->send_dev && d->recv_dev && sdev != rdev) {
        st = coll_comm_arg_error(comm, COLL_ERR_INVALID_ARG,
                                 "rank %d: %s: sendbuf is on CUDA device %d, recvbuf on %d",
                                 comm->rank, coll_op_name(a->coll), sdev, rdev);
        goto free_d;
    }
    dev = d->send_dev ? sdev : d->recv_dev ? rdev : -1;

    pthread_mutex_lock(&comm->lock);
    st = cuda_comm_get(comm, dev, &cc);
    if (st != COLL_OK) {
        pthread_mutex_unlock(&comm->lock);
        goto free_d;
    }
    /* The device windows (p2p and direct paths): see devop_windows */
    if (!cc->ipc_tried && a->coll != COLL_OP_SEND && a->coll != COLL_OP_RECV &&
        a->coll != COLL_OP_BARRIER && coll_cuda_windows_wanted(comm, cc) &&
        (st = devop_windows(comm, cc)) != COLL_OK) {
        pthread_mutex_unlock(&comm->lock);
        goto free_d;
    }
    /* The p2p path (p2p.c): data moves between the ranks' device windows. */
    int p2p = coll_p2p_wanted(comm, d) && cc->ipc_ok &&
              coll_p2p_plan_fits(a, comm->nranks, cc->win_bytes);
    /* The direct path: an all-reduce whose buffers are all device memory on every rank (the
     * rule: one call passes the same kind of memory everywhere), ranks sharing a host, over the
     * windows mapped above, where the p2p path does not use them: the two paths keep the
     * windows by different rules (the direct path lets a half go once every rank acknowledged
     * it, at its next use; the p2p path ends each call with an exchange), so a p2p call after
     * a direct one could overwrite a window that a rank still reads. */
    if (!p2p && !(cc->p2p_possible && cc->ipc_ok) && a->coll == COLL_OP_ALLREDUCE && d->send_dev &&
        d->recv_dev && comm->layout.shared_window && coll_param_bool(COLL_P_CUDA_DIRECT)) {
        d->args.device = 1;
        d->args.layout = &cc->dev_layout;
        d->args.model  = &comm->model;
        d->direct      = coll_cuda_dev_algo(comm, &d->args, NULL) != NULL;
        d->args.device = d->direct;
        if (d->direct) { /* a chunk costs a copy-engine and kernel round: fewer, larger ones */
            size_t dc           = coll_param_size(COLL_P_CUDA_CHUNK_SIZE);
            d->args.chunk_bytes = dc > d->args.chunk_bytes ? dc : d->args.chunk_bytes;
        }
        if (d->direct && !cc->direct_logged) {
            cc->direct_logged = 1;
            coll_info(COLL,
                      "rank %d: allreduce of %zu bytes on device memory: direct path, device "
                      "windows",
                      comm->rank, d->send_bytes);
        }
        d->args.layout = NULL;
        d->args.model  = NULL;
    }
    cudaGetDevice(&old);
    if (old != cc->device) {
        cudaSetDevice(cc->device);
    }
    /* sends and receives are in flight together on the proxy (proxy_msg.c): parts of the
     * message staging, else heap staging of their own; the rest take the pinned region one
     * at a time unless it is too small */
    size_t roff, need = p2p ? 0 : stage_need(d, &roff);
    int    msg = need > 0 && (a->coll == COLL_OP_SEND || a->coll == COLL_OP_RECV);
    if (msg) {
        pthread_mutex_lock(&cc->qlock);
        d->mpart = devop_mpart_take(cc, need);
        pthread_mutex_unlock(&cc->qlock);
    }
    if ((!msg && need > cc->stage_cap) || (msg && d->mpart == NULL)) {
        d->heap = coll_malloc(need, "staging buffer");
        if (d->heap == NULL) {
            st = COLL_ERR_NO_MEMORY;
            goto unlock;
        }
    }
    pthread_mutex_lock(&cc->qlock);
    st = event_get(cc, &d->ready);
    pthread_mutex_unlock(&cc->qlock);
    /* Nothing is put on the caller's stream with comm->lock held: the driver may block such a
     * call until the stream moves (its queue full of calls waiting for the proxy), and the
     * proxy needs the lock to move them. The call's place in its stream is marked here; it is
     * numbered below, with the lock taken again. */
    pthread_mutex_unlock(&comm->lock);
    if (st == COLL_OK && cudaEventRecord(d->ready, d->ustream) != cudaSuccess) {
        st = coll_set_last_error(COLL_ERR_CUDA,
                                 "%s: cudaEventRecord on the caller's stream failed (stream of "
                                 "another device, or destroyed?)",
                                 coll_op_name(a->coll));
    }
    pthread_mutex_lock(&comm->lock);
    if (st == COLL_OK && p2p) {
        st = coll_p2p_prepare(comm, cc, d);
    } else if (st == COLL_OK) {
        /* the proxy points it at staging before opening the gate */
        st = coll_engine_start_gated(comm, &d->args, sendbuf, recvbuf, coll_devop_engine_done, d,
                                     &d->req);
        d->req0 = d->req;
        if (st == COLL_OK && !d->direct) {
            devop_gdr(comm, cc, d);
        }
    }
    if (st == COLL_OK) {
        d->ticket = ++cc->next_ticket;
        coll_cuda_proxy_push(cc, d);
        pushed = 1;
    }
unlock:
    pthread_mutex_unlock(&comm->lock);
    if (pushed && stream_ordered) {
        /* after the lock (above); the wait is for the counter to reach the ticket, so it may
         * come after the proxy ended the call. On failure the call still runs (it is
         * numbered); the stream just does not wait, and the error says so. */
        st = devop_stream_wait(cc, d);
    }
    if (old >= 0 && old != cc->device) {
        cudaSetDevice(old);
    }
    if (!pushed) {
        goto free_d; /* never started (d->req may already be NULL for a pushed call that ended) */
    }
    if (stream_ordered) {
        coll_devop_put(d); /* the proxy holds the other reference */
        return st;
    }
    coll_task_t *h = coll_calloc(1, sizeof(*h), "request");
    if (h == NULL) {
        coll_devop_put(d); /* runs on; nobody waits for it */
        return COLL_ERR_NO_MEMORY;
    }
    h->magic = COLL_REQUEST_MAGIC;
    h->comm  = comm;
    h->devop = d;
    *req_p   = h;
    return st;
free_d:
    if (comm->cuda != NULL) {
        coll_devop_mpart_release(comm->cuda, d);
    }
    if (d->ready != NULL && comm->cuda != NULL) {
        pthread_mutex_lock(&comm->cuda->qlock);
        event_put(comm->cuda, d->ready);
        pthread_mutex_unlock(&comm->cuda->qlock);
    }
    coll_free(d->heap);
    coll_p2p_op_free(d->p2p);
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->cv);
    coll_free(d);
    return st;
}

coll_result_t coll_cuda_wait(coll_task_t *h)
{
    coll_devop_t *d = h->devop;
    coll_result_t st;

    pthread_mutex_lock(&d->mu);
    while (!atomic_load(&d->complete)) {
        pthread_cond_wait(&d->cv, &d->mu);
    }
    st = d->status;
    pthread_mutex_unlock(&d->mu);
    coll_devop_put(d);
    h->magic = 0;
    coll_free(h);
    return st;
}

int coll_cuda_test(coll_task_t *h, coll_result_t *status_p)
{
    if (!atomic_load(&h->devop->complete)) {
        return 0;
    }
    *status_p = coll_cuda_wait(h);
    return 1;
}

void coll_cuda_comm_destroy(coll_comm_t *comm)
{
    coll_cuda_comm_t *cc = comm->cuda;
    if (cc == NULL || cc->stopped) {
        return;
    }
    cc->stopped = 1;
    coll_cuda_proxy_stop(cc);
    coll_cuda_ipc_close(cc, comm->nranks, comm->rank);
    /* the event pool stays: host functions may still put calls back (coll_cuda_comm_free) */
    if (cc->flag != NULL) {
        cudaFreeHost((void *)cc->flag);
        cc->flag = NULL;
    }
    if (cc->copy != NULL) {
        cudaStreamDestroy(cc->copy);
        cc->copy = NULL;
    }
}

void coll_cuda_comm_free(coll_comm_t *comm)
{
    coll_cuda_comm_t *cc = comm->cuda;
    if (cc == NULL) {
        return;
    }
    coll_cuda_comm_destroy(comm);
    /* host functions on the callers' streams release their calls last (devop_host_wait) */
    double until = coll_time_s() + comm->timeout_s;
    while (atomic_load(&cc->host_waiters) > 0 && coll_time_s() < until) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    if (atomic_load(&cc->host_waiters) > 0) {
        coll_warn(COLL,
                  "rank %d: %d host functions on CUDA streams still wait for calls of a "
                  "destroyed communicator; its device state is left allocated",
                  comm->rank, (int)atomic_load(&cc->host_waiters));
        comm->cuda = NULL;
        return;
    }
    /* no host function is left to put an event back */
    for (int i = 0; i < cc->nevents; i++) {
        cudaEventDestroy(cc->events[i]);
    }
    coll_free(cc->events);
    cc->events  = NULL;
    cc->nevents = cc->events_cap = 0;
    coll_cuda_ipc_free(cc);
    for (int i = 0; i < cc->nparked_heaps; i++) {
        coll_free(cc->parked_heaps[i]);
    }
    coll_free(cc->parked_heaps);
    coll_proxy_pinned_free(cc->stage, cc->stage_cap, cc->stage_mapped);
    coll_proxy_pinned_free(cc->mstage, cc->mparts.cap, cc->mstage_mapped);
    coll_proxy_bounce_free(cc);
    while (cc->p2p_parked != NULL) {
        coll_p2p_op_t *op = cc->p2p_parked;
        cc->p2p_parked    = op->next_parked;
        coll_p2p_op_free(op);
    }
    pthread_mutex_destroy(&cc->qlock);
    pthread_cond_destroy(&cc->qcond);
    coll_free(cc);
    comm->cuda = NULL;
}
