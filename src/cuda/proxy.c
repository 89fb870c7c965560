/* SPDX-License-Identifier: MIT */
/*
 * The proxy thread of a communicator's device operations. In call order it waits for the
 * caller's stream to reach each call (a blocking-sync event), copies device inputs to pinned
 * staging on its own non-blocking stream, opens the engine request's gate and drives progress
 * until the engine is done with it, copies the results to the device, and releases the
 * caller's stream. It drives progress only when the communicator's lock is free: a thread
 * already waiting on the communicator progresses the opened request too.
 */
#include "cuda/devop.h"
#include "cuda/driver.h"
#include "cuda/kernels.h"
#include "cuda/p2p.h"
#include "error.h"
#include "log.h"
#include "param.h"
#include "util.h"
#include "compiler.h"
#include "api/comm.h"
#include "topo/local.h"

#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define PROXY_SLICE_S     0.002
#define PROXY_MSG_SLICE_S 0.0002

/* One pass of a polling wait: a pause, or a yield where the host has more ranks than CPUs. */
void coll_proxy_pause(const coll_comm_t *comm)
{
    if (comm->oversubscribed) {
        sched_yield();
    } else {
        coll_cpu_pause();
    }
}

/* A nap on the queue's condition: a new call (coll_cuda_proxy_push signals it) ends it. */
void coll_proxy_nap(coll_cuda_comm_t *cc, long ns)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += ns;
    while (until.tv_nsec >= 1000000000L) {
        until.tv_nsec -= 1000000000L;
        until.tv_sec++;
    }
    pthread_mutex_lock(&cc->qlock);
    if (cc->head == NULL && !cc->stop) {
        pthread_cond_timedwait(&cc->qcond, &cc->qlock, &until);
    }
    pthread_mutex_unlock(&cc->qlock);
}

coll_result_t coll_proxy_cuda_error(coll_devop_t *d, const char *what, cudaError_t e)
{
    coll_comm_t *comm = d->comm;
    pthread_mutex_lock(&comm->lock);
    coll_result_t st =
        coll_comm_fail(comm, COLL_ERR_CUDA, "rank %d: %s #%u: %s: %s", comm->rank,
                       coll_op_name(d->args.coll), d->ticket, what, cudaGetErrorString(e));
    pthread_mutex_unlock(&comm->lock);
    return st;
}

/* Drive progress until the engine is done with a request of d (*done set; *req is the
 * request until then). Like the engine's own waits (wait.c), it polls for COLL_SPIN_TIME
 * (yielding after each pass where the host has more ranks than CPUs) before it sleeps in the
 * transports in slices: an exchange of the p2p path is a few microseconds of shared memory,
 * and a sleep and wake-up on each side of each exchange cost more than the call. */
static void proxy_drive_until(coll_devop_t *d, atomic_int *done, coll_task_t *const *req)
{
    coll_comm_t      *comm  = d->comm;
    coll_cuda_comm_t *cc    = comm->cuda;
    double            spin  = coll_param_time(COLL_P_SPIN_TIME);
    double            start = coll_time_s(), next_check = start + COLL_PROXY_CHECK_S;

    while (!atomic_load_explicit(done, memory_order_acquire)) {
        if (cc->msgs != NULL && coll_proxy_msg_poll(cc)) {
            start = coll_time_s(); /* sends and receives moved: poll on */
        }
        double now     = coll_time_s();
        int    polling = now - start < spin;
        if (pthread_mutex_trylock(&comm->lock) == 0) {
            if (!atomic_load(done)) {
                coll_engine_progress(comm);
            }
            if (!atomic_load(done) && now >= next_check) {
                next_check = now + COLL_PROXY_CHECK_S;
                coll_engine_check(comm, *req);
                coll_engine_progress(comm); /* reaps it if the check failed the communicator */
            }
            if (!atomic_load(done) && !polling) {
                /* short sleeps while sends and receives wait for their streams */
                coll_engine_block(comm, cc->msgs != NULL ? PROXY_MSG_SLICE_S : PROXY_SLICE_S);
            }
            pthread_mutex_unlock(&comm->lock);
            if (polling) {
                coll_proxy_pause(comm);
            }
        } else if (polling) {
            coll_proxy_pause(comm); /* another thread waits on the communicator and progresses it */
        } else {
            /* another thread waits on the communicator and progresses this request too */
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        }
    }
}

/* Wait for an event of the caller's stream (a blocking-sync event): polled for COLL_SPIN_TIME
 * first, as above, since the blocking wait's wake-up costs tens of microseconds; polled
 * throughout while sends and receives are in flight (the stream may wait for them). */
static cudaError_t proxy_event_wait(coll_cuda_comm_t *cc, coll_comm_t *comm, cudaEvent_t ev)
{
    double      spin  = coll_param_time(COLL_P_SPIN_TIME);
    double      start = coll_time_s();
    cudaError_t e;

    long nap = COLL_PROXY_NAP_MIN_NS; /* while sends and receives wait */

    while ((e = cudaEventQuery(ev)) == cudaErrorNotReady) {
        if (cc->msgs != NULL) {
            if (coll_proxy_msg_poll(cc)) {
                start = coll_time_s();
                nap   = COLL_PROXY_NAP_MIN_NS;
            }
        } else if (coll_time_s() - start >= spin) {
            return cudaEventSynchronize(ev);
        }
        if (coll_time_s() - start < spin) {
            coll_proxy_pause(comm);
        } else {
            struct timespec ts = {0, nap};
            nanosleep(&ts, NULL);
            nap = nap * 2 > COLL_PROXY_NAP_MAX_NS ? COLL_PROXY_NAP_MAX_NS : nap * 2;
        }
    }
    return e;
}

static void proxy_drive(coll_devop_t *d)
{
    proxy_drive_until(d, &d->engine_done, &d->req);
}

/* Read without the lock, which a thread waiting on the communicator holds for the whole wait
 * (a wait that may need this call to go on). */
static coll_result_t proxy_comm_error(coll_comm_t *comm)
{
    return __atomic_load_n(&comm->error, __ATOMIC_ACQUIRE);
}

/* Fail the communicator for a p2p call that failed on rank bad (lock taken here). */
static coll_result_t proxy_p2p_fail(coll_devop_t *d, int bad, coll_result_t badst,
                                    const coll_p2p_card_t *c)
{
    coll_comm_t  *comm = d->comm;
    coll_result_t st;

    pthread_mutex_lock(&comm->lock);
    if (bad == comm->rank) {
        st = coll_comm_fail(comm, badst, "rank %d: %s #%u on device memory (p2p): %s", comm->rank,
                            coll_op_name(d->args.coll), d->ticket, d->p2p->why);
    } else if (badst == COLL_ERR_MISMATCH) {
        st = coll_comm_fail(comm, badst,
                            "rank %d: %s #%u on device memory (p2p): rank %d called %s with other "
                            "arguments",
                            comm->rank, coll_op_name(d->args.coll), d->ticket, bad,
                            c->coll >= 0 && c->coll < COLL_OP_COUNT ? coll_op_name(c->coll)
                                                                    : "something else");
    } else {
        st = coll_comm_fail(comm, badst,
                            "rank %d: %s #%u on device memory (p2p) failed on rank %d (%s; its "
                            "log says why)",
                            comm->rank, coll_op_name(d->args.coll), d->ticket, bad,
                            coll_strerror(badst));
    }
    pthread_mutex_unlock(&comm->lock);
    return st;
}

/* A call on the p2p path (p2p.c): each phase to its end, then its exchange. Every rank sees the
 * same cards at an exchange, so a failure or mismatch on any rank fails the communicator on
 * every rank at the same exchange; the exchanges after it are then reaped with that error.
 * No phase runs on a failed communicator: a peer may still read this rank's window. */
static void proxy_run_p2p(coll_cuda_comm_t *cc, coll_devop_t *d)
{
    coll_p2p_op_t *op   = d->p2p;
    coll_comm_t   *comm = d->comm;
    int            n    = comm->nranks;
    coll_result_t  st = COLL_OK, mine = COLL_OK;
    double         t0 = coll_time_s(), t_ready, t_phase = 0.0, t_x = 0.0, t_xmax = 0.0;
    cudaError_t    e = proxy_event_wait(cc, d->comm, d->ready);

    t_ready = coll_time_s();

    if (e != cudaSuccess) {
        st = coll_proxy_cuda_error(d, "waiting for the caller's stream", e);
    }
    for (int k = 0; k < op->plan.nx; k++) {
        if (st == COLL_OK && mine == COLL_OK) {
            /* failed meanwhile (an abort, a revoke, a dead peer's notice): no phase, no gate */
            st = proxy_comm_error(comm);
        }
        double tk = coll_time_s();
        if (st == COLL_OK && mine == COLL_OK) {
            mine = coll_p2p_phase(comm, cc, d, k);
            if (mine != COLL_OK) {
                coll_warn(COLL, "rank %d: %s #%u on device memory (p2p): %s", comm->rank,
                          coll_op_name(d->args.coll), d->ticket, op->why);
            }
        }
        op->mine[k].status = (int32_t)mine;
        if (st == COLL_OK && op->x[k].gate != NULL) {
            coll_engine_open_gate(op->x[k].gate);
        }
        double tx = coll_time_s();
        /* a failed communicator reaps a closed gate with its error */
        proxy_drive_until(d, &op->x[k].done, &op->x[k].req);
        double tz = coll_time_s();
        t_phase += tx - tk;
        t_x += tz - tx;
        t_xmax = tz - tx > t_xmax ? tz - tx : t_xmax;
        if (st == COLL_OK) {
            st = op->x[k].status;
        }
        for (int q = 0; q < n && st == COLL_OK; q++) {
            const coll_p2p_card_t *c = &op->cards[(size_t)k * (size_t)n + (size_t)q];
            if (c->status != COLL_OK) {
                st = proxy_p2p_fail(d, q, (coll_result_t)c->status, c);
            } else if (c->coll != op->mine[k].coll || c->print != op->mine[k].print) {
                st = proxy_p2p_fail(d, q, COLL_ERR_MISMATCH, c);
            }
        }
    }
    coll_debug(COLL,
               "rank %d: p2p %s #%u: %d exchanges, %.1f us: caller's stream %.1f, phases %.1f, "
               "exchanges %.1f (longest %.1f)",
               comm->rank, coll_op_name(d->args.coll), d->ticket, op->plan.nx,
               1e6 * (coll_time_s() - t0), 1e6 * (t_ready - t0), 1e6 * t_phase, 1e6 * t_x,
               1e6 * t_xmax);
    if (st != COLL_OK) {
        coll_warn(COLL, "rank %d: %s on device memory failed: %s", comm->rank,
                  coll_op_name(d->args.coll), comm->last_error);
        /* a failed exchange's transfers may still land in the cards: keep them */
        pthread_mutex_lock(&cc->qlock);
        op->next_parked = cc->p2p_parked;
        cc->p2p_parked  = op;
        d->p2p          = NULL;
        pthread_mutex_unlock(&cc->qlock);
    }
    coll_devop_finish(d, st);
    coll_devop_put(d);
}

coll_result_t coll_proxy_stage_in(coll_cuda_comm_t *cc, coll_devop_t *d, cudaError_t ready)
{
    coll_result_t st = COLL_OK;

    if (ready != cudaSuccess) {
        st = coll_proxy_cuda_error(d, "waiting for the caller's stream", ready);
    } else if (coll_devop_stage(cc, d) != COLL_OK) {
        pthread_mutex_lock(&d->comm->lock);
        st = coll_comm_fail(d->comm, COLL_ERR_NO_MEMORY, "rank %d: %s", d->comm->rank,
                            coll_last_error());
        pthread_mutex_unlock(&d->comm->lock);
    } else if (d->send_dev && !d->direct && !d->gdr) {
        cudaError_t e = coll_proxy_copy(cc, d->esend, d->usend, d->send_bytes, 0, d->heap != NULL);
        if (e != cudaSuccess) {
            st = coll_proxy_cuda_error(d, "copying the input to staging", e);
        }
    }
    /* a gated request is not freed before it ends (a failed one is parked), so req0 is valid
     * here even if a failure reaped it meanwhile. After a failure it stays closed (its buffers
     * are not host memory) and progress reaps it with the communicator's error. */
    if (st == COLL_OK) {
        d->req0->bufs[COLL_BUF_SEND] = d->esend;
        d->req0->bufs[COLL_BUF_RECV] = d->erecv;
        coll_engine_open_gate(d->req0);
    }
    return st;
}

coll_result_t coll_proxy_stage_out(coll_cuda_comm_t *cc, coll_devop_t *d, coll_result_t st)
{
    cudaError_t e;

    if (st == COLL_OK && d->gdr && d->recv_bytes > 0 && cc->gdr_flush) {
        /* the NIC wrote the results into device memory: make them visible to the context
         * before the caller's stream goes on (devices that do not order such writes) */
        e = cudaDeviceFlushGPUDirectRDMAWrites(cudaFlushGPUDirectRDMAWritesTargetCurrentDevice,
                                               cudaFlushGPUDirectRDMAWritesToOwner);
        if (e != cudaSuccess) {
            st = coll_proxy_cuda_error(d, "flushing GPUDirect RDMA writes", e);
        }
    }
    if (st == COLL_OK && d->recv_dev && !d->direct && !d->gdr) {
        e = coll_proxy_copy(cc, d->urecv, d->erecv, d->recv_bytes, 1, d->heap != NULL);
        if (e != cudaSuccess) {
            st = coll_proxy_cuda_error(d, "copying the result to the device", e);
        }
    }
    return st;
}

static void proxy_run(coll_cuda_comm_t *cc, coll_devop_t *d)
{
    cudaError_t   e;
    coll_result_t st = COLL_OK;

    double t0 = coll_time_s(), t1, t2, t3;
    coll_debug(COLL, "rank %d: proxy: %s ticket %u: waiting for the caller's stream", d->comm->rank,
               coll_op_name(d->args.coll), d->ticket);
    e  = proxy_event_wait(cc, d->comm, d->ready);
    t1 = coll_time_s();
    coll_debug(COLL, "rank %d: proxy: ticket %u: stream reached (%s)", d->comm->rank, d->ticket,
               d->direct ? "direct"
               : d->gdr  ? "GPUDirect RDMA"
                         : "staged");
    st = coll_proxy_stage_in(cc, d, e);
    t2 = coll_time_s();
    proxy_drive(d);
    t3 = coll_time_s();
    coll_debug(COLL, "rank %d: proxy: ticket %u: engine done (%d)", d->comm->rank, d->ticket,
               (int)d->status);
    if (st == COLL_OK) {
        st = d->status;
    }
    st = coll_proxy_stage_out(cc, d, st);
    coll_debug(COLL,
               "rank %d: proxy: %s ticket %u: %.1f us: caller's stream %.1f, input %.1f, engine "
               "%.1f, output %.1f",
               d->comm->rank, coll_op_name(d->args.coll), d->ticket, 1e6 * (coll_time_s() - t0),
               1e6 * (t1 - t0), 1e6 * (t2 - t1), 1e6 * (t3 - t2), 1e6 * (coll_time_s() - t3));
    if (st != COLL_OK) {
        coll_warn(COLL, "rank %d: %s on device memory failed: %s", d->comm->rank,
                  coll_op_name(d->args.coll), d->comm->last_error);
    }
    coll_devop_finish(d, st);
    coll_devop_put(d);
}

static void *proxy_main(void *arg)
{
    coll_cuda_comm_t *cc = arg;

    cudaSetDevice(cc->device);
    pthread_mutex_lock(&cc->qlock);
    for (;;) {
        while (cc->head == NULL && cc->msgs == NULL && !cc->stop) {
            pthread_cond_wait(&cc->qcond, &cc->qlock);
        }
        if (cc->head == NULL && cc->msgs == NULL) {
            break;
        }
        if (cc->head == NULL) { /* sends and receives in flight, no call queued */
            int stop = cc->stop;
            pthread_mutex_unlock(&cc->qlock);
            coll_proxy_msg_wait(cc, !stop);
            pthread_mutex_lock(&cc->qlock);
            continue;
        }
        coll_devop_t *d = cc->head;
        cc->head        = d->next;
        if (cc->head == NULL) {
            cc->tail = NULL;
        }
        pthread_mutex_unlock(&cc->qlock);
        coll_devop_track(cc, d);
        if (coll_proxy_msg_is(d)) {
            coll_proxy_msg_add(cc, d);
            coll_proxy_msg_poll(cc);
        } else if (d->p2p != NULL) {
            proxy_run_p2p(cc, d);
        } else {
            proxy_run(cc, d);
        }
        pthread_mutex_lock(&cc->qlock);
    }
    pthread_mutex_unlock(&cc->qlock);
    return NULL;
}

void coll_cuda_proxy_push(coll_cuda_comm_t *cc, coll_devop_t *d)
{
    pthread_mutex_lock(&cc->qlock);
    d->next = NULL;
    if (cc->tail != NULL) {
        cc->tail->next = d;
    } else {
        cc->head = d;
    }
    cc->tail = d;
    pthread_cond_signal(&cc->qcond);
    pthread_mutex_unlock(&cc->qlock);
    if (atomic_load(&cc->msgs_n) > 0) {
        coll_engine_wake(d->comm); /* the proxy may sleep in the transports (proxy_msg.c) */
    }
}

/* Can the caller's streams wait by stream memory operations here? Tried once on our stream. */
static int proxy_memops_work(coll_cuda_comm_t *cc)
{
    const coll_cu_driver_t *drv  = coll_cu_driver();
    int                     mode = coll_param_enum(COLL_P_CUDA_STREAM_WAIT); /* auto memop hostfn */

    if (mode == 2 || drv->stream_wait_value32 == NULL) {
        return 0;
    }
    if (drv->stream_wait_value32((CUstream)cc->copy, cc->flag_dev, 0, CU_STREAM_WAIT_VALUE_GEQ) !=
            CUDA_SUCCESS ||
        cudaStreamSynchronize(cc->copy) != cudaSuccess) {
        if (mode == 1) {
            coll_warn(COLL, "COLL_CUDA_STREAM_WAIT=memop: the driver refuses stream memory "
                            "operations; using host functions");
        }
        return 0;
    }
    return 1;
}

/*
 * Pinned staging of cap bytes whose pages sit on NUMA node node (os index; -1: where
 * cudaHostAlloc puts them). cudaHostAlloc faults its pages in at once, where no later mbind
 * moves them, so the region is mapped, given the node preference (coll_mem_prefer_node, as the
 * shm segment is), touched, and only then registered. A refused preference is logged by
 * coll_mem_prefer_node and the pages go where the kernel puts them; a failed map or
 * registration falls back to cudaHostAlloc. NULL when none could be had.
 */
static void *proxy_pinned_alloc(size_t cap, int *mapped, int node, int rank, const char *what)
{
    void *p = NULL;

    *mapped = 0;
    if (node >= 0) {
        p = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p != MAP_FAILED) {
            coll_mem_prefer_node(p, cap, node);
            memset(p, 0, cap); /* fault the pages in under the preference */
            if (cudaHostRegister(p, cap, cudaHostRegisterPortable) == cudaSuccess) {
                *mapped = 1;
                coll_info(MEM, "rank %d: pinned %s of %zu bytes on NUMA node %d", rank, what, cap,
                          node);
                return p;
            }
            cudaGetLastError();
            munmap(p, cap);
        }
        coll_info(MEM, "rank %d: %s on NUMA node %d failed (%s); allocating it anywhere", rank,
                  what, node, p == MAP_FAILED ? strerror(errno) : "cudaHostRegister failed");
    }
    if (cudaHostAlloc(&p, cap, cudaHostAllocPortable) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    return p;
}

void coll_proxy_pinned_free(void *p, size_t cap, int mapped)
{
    if (p != NULL && mapped) {
        cudaHostUnregister(p);
        munmap(p, cap);
    } else if (p != NULL) {
        cudaFreeHost(p);
    }
}

void coll_proxy_bounce_free(coll_cuda_comm_t *cc)
{
    for (int i = 0; i < 2; i++) {
        if (cc->bounce_ev[i] != NULL) {
            cudaEventDestroy(cc->bounce_ev[i]);
            cc->bounce_ev[i] = NULL;
        }
    }
    coll_proxy_pinned_free(cc->bounce, COLL_PROXY_BOUNCE_LEN, cc->bounce_mapped);
    cc->bounce         = NULL;
    cc->devmem.pin     = NULL;
    cc->devmem.pin_len = 0;
}

coll_result_t coll_cuda_proxy_start(coll_cuda_comm_t *cc, coll_comm_t *comm)
{
    void       *host = NULL, *dev = NULL;
    int         old = -1;
    cudaError_t e;

    cudaGetDevice(&old);
    e = cudaSetDevice(cc->device);
    if (e == cudaSuccess) {
        e = cudaStreamCreateWithFlags(&cc->copy, cudaStreamNonBlocking);
    }
    if (e == cudaSuccess) {
        e = cudaHostAlloc(&host, sizeof(uint32_t), cudaHostAllocMapped | cudaHostAllocPortable);
    }
    if (e == cudaSuccess) {
        *(volatile uint32_t *)host = 0;
        e                          = cudaHostGetDevicePointer(&dev, host, 0);
    }
    if (e != cudaSuccess) {
        if (old >= 0) {
            cudaSetDevice(old);
        }
        return coll_comm_arg_error(comm, COLL_ERR_CUDA,
                                   "rank %d: setting up device operations on CUDA device %d: %s",
                                   comm->rank, cc->device, cudaGetErrorString(e));
    }
    cc->devmem     = (coll_devmem_t){.stream = cc->copy, .device = cc->device};
    cc->flag       = host;
    cc->flag_dev   = (CUdeviceptr)dev;
    cc->use_memops = proxy_memops_work(cc);
#if CUDART_VERSION >= 11030
    int order = 0, flush = 0;
    if (cudaDeviceGetAttribute(&order, cudaDevAttrGPUDirectRDMAWritesOrdering, cc->device) !=
            cudaSuccess ||
        cudaDeviceGetAttribute(&flush, cudaDevAttrGPUDirectRDMAFlushWritesOptions, cc->device) !=
            cudaSuccess) {
        cudaGetLastError();
        order = flush = 0;
    }
    int ordered    = order >= (int)cudaGPUDirectRDMAWritesOrderingOwner;
    int flushes    = (flush & (int)cudaFlushGPUDirectRDMAWritesOptionHost) != 0;
    cc->gdr_flush  = !ordered && flushes;
    cc->gdr_unsafe = !ordered && !flushes;
#else
    cc->gdr_unsafe = 1; /* no way to ask the runtime whether GPUDirect writes are ordered */
#endif
    /* the pinned staging and the device windows, now that none of our calls is in flight */
    cc->stage_cap = coll_param_size(COLL_P_CUDA_STAGING_SIZE);
    int node =
        (comm->places != NULL) ? coll_topo_mem_node(comm->topo, comm->places[comm->rank].numa) : -1;
    if (cc->stage_cap > 0 && (cc->stage = proxy_pinned_alloc(cc->stage_cap, &cc->stage_mapped, node,
                                                             comm->rank, "staging")) == NULL) {
        coll_warn(COLL, "rank %d: no pinned staging of %zu bytes; staging from the heap",
                  comm->rank, cc->stage_cap);
        cc->stage_cap = 0;
    }
    cc->mparts.cap = coll_param_size(COLL_P_CUDA_MSG_STAGING);
    if (cc->mparts.cap > 0 &&
        (cc->mstage = proxy_pinned_alloc(cc->mparts.cap, &cc->mstage_mapped, node, comm->rank,
                                         "message staging")) == NULL) {
        coll_warn(COLL,
                  "rank %d: no pinned message staging of %zu bytes; device sends and receives "
                  "stage from the heap",
                  comm->rank, cc->mparts.cap);
        cc->mparts.cap = 0;
    }
    if ((cc->bounce = proxy_pinned_alloc(COLL_PROXY_BOUNCE_LEN, &cc->bounce_mapped, node,
                                         comm->rank, "bounce halves")) != NULL &&
        (cudaEventCreateWithFlags(&cc->bounce_ev[0], cudaEventDisableTiming) != cudaSuccess ||
         cudaEventCreateWithFlags(&cc->bounce_ev[1], cudaEventDisableTiming) != cudaSuccess)) {
        cudaGetLastError();
        coll_proxy_bounce_free(cc);
    }
    if (cc->bounce == NULL) {
        coll_warn(COLL,
                  "rank %d: no pinned bounce halves of %zu bytes; heap staging and GPUDirect "
                  "RDMA's small messages are copied directly, which another thread's copy to "
                  "or from pageable memory can hold back",
                  comm->rank, COLL_PROXY_BOUNCE_LEN);
    } else { /* the transports' copies (GPUDirect RDMA) go through the part after the halves */
        cc->devmem.pin     = (char *)cc->bounce + 2 * COLL_PROXY_BOUNCE_HALF;
        cc->devmem.pin_len = COLL_PROXY_DEVMEM_PIN;
    }
    /* once, whatever fails below: it decides whether this rank joins the windows' exchange */
    cc->p2p_possible = coll_p2p_possible(comm);
    /* the kernels, loaded while no stream waits for us (kernels.h) */
    e = (cudaError_t)coll_cuda_kernels_load();
    if (e == cudaSuccess) {
        coll_cuda_ipc_alloc(comm, cc);
        /* local steps of device calls (GPUDirect RDMA) need it even without windows */
        if (cc->exec == NULL &&
            cudaStreamCreateWithFlags(&cc->exec, cudaStreamNonBlocking) != cudaSuccess) {
            cudaGetLastError();
            cc->exec = NULL;
        }
    } else {
        cudaGetLastError();
        coll_info(COLL,
                  "rank %d: reduction kernels do not load on CUDA device %d (%s); device "
                  "calls use staging",
                  comm->rank, cc->device, cudaGetErrorString(e));
    }
    if (old >= 0) {
        cudaSetDevice(old);
    }
    if (pthread_create(&cc->thread, NULL, proxy_main, cc) != 0) {
        return coll_comm_arg_error(comm, COLL_ERR_INTERNAL, "rank %d: cannot start the CUDA proxy",
                                   comm->rank);
    }
    cc->started = 1;
    return COLL_OK;
}

void coll_cuda_proxy_stop(coll_cuda_comm_t *cc)
{
    if (!cc->started) {
        return;
    }
    pthread_mutex_lock(&cc->qlock);
    cc->stop = 1;
    pthread_cond_signal(&cc->qcond);
    pthread_mutex_unlock(&cc->qlock);
    pthread_join(cc->thread, NULL);
    cc->started = 0;
}
