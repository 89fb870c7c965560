/* SPDX-License-Identifier: MIT */
/* Device operations and the per-communicator CUDA state behind them (internal to src/cuda/). */
#ifndef COLL_CUDA_DEVOP_H
#define COLL_CUDA_DEVOP_H

#include "cuda/cuda.h"
#include "cuda/order.h"
#include "cuda/devmem.h"

#include <cuda.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdatomic.h>

typedef struct coll_devop {
    coll_comm_t        *comm;
    coll_args_t         args;
    const void         *usend; /* the caller's buffers */
    void               *urecv;
    size_t              send_bytes; /* read and written on this rank; 0 when unused here */
    size_t              recv_bytes;
    int                 direct;   /* 1: runs on device memory in place (ipc.c), no staging */
    int                 gdr;      /* 1: the transports move the device buffers (GPUDirect RDMA) */
    struct coll_p2p_op *p2p;      /* the p2p path (p2p.c): through the device windows */
    int                 send_dev; /* 1: the buffer is device memory (staged unless direct) */
    int                 recv_dev;
    void               *esend; /* what the engine reads and writes */
    void               *erecv;
    void               *heap;  /* staging from the heap when the pinned region is too small */
    char               *mpart; /* a send's or receive's part of the pinned message staging */
    cudaEvent_t         ready; /* recorded on the caller's stream at the call */
    cudaStream_t        ustream;
    int                 stream_ordered;
    uint32_t            ticket; /* the caller's stream waits for flag >= ticket */
    coll_task_t        *req;    /* the gated engine request, until it ends */
    coll_task_t        *req0; /* the same, kept: the memory stays valid until destroy or its end */

    atomic_int         engine_done; /* on_done ran: status holds the engine's result */
    atomic_int         complete;    /* results are in the caller's buffers (or it failed) */
    coll_result_t      status;
    atomic_int         refs; /* proxy + request handle or host-function waiter */
    pthread_mutex_t    mu;
    pthread_cond_t     cv;
    struct coll_devop *next;       /* proxy queue, then the proxy's sends and receives */
    coll_ticket_node_t snode;      /* stream-ordered calls in flight on the proxy (order.h) */
    int                msg_state;  /* sends and receives (proxy_msg.c): COLL_MSG_* */
    coll_result_t      msg_status; /* their start's result */
} coll_devop_t;

enum { COLL_MSG_QUEUED, COLL_MSG_STARTED };

typedef struct coll_cuda_comm {
    int             device;
    pthread_t       thread;
    int             started;
    pthread_mutex_t qlock;
    pthread_cond_t  qcond;
    int             stop;
    coll_devop_t   *head, *tail;
    cudaStream_t    copy;   /* non-blocking: never waits for the legacy default stream */
    coll_devmem_t   devmem; /* {copy, device}: transports' copies of GPUDirect RDMA calls */
    int gdr_flush;  /* the device does not order GPUDirect RDMA writes: flush after receiving */
    int gdr_unsafe; /* it neither orders nor flushes them: no GPUDirect RDMA calls */
    /* the caller's streams wait on this word (mapped pinned memory) */
    volatile uint32_t *flag;
    CUdeviceptr        flag_dev;
    uint32_t           next_ticket;
    int                use_memops; /* 0: a host function on the stream waits instead */
    /* Pinned staging of COLL_CUDA_STAGING_SIZE bytes, allocated with the state (when no call of
     * ours can be in flight) and used by the proxy alone, one call at a time. Calls that need
     * more get pageable heap memory at the call. Nothing here allocates pinned or device memory
     * while calls are in flight: such allocations may synchronise the device, that is wait for
     * the callers' streams, which wait for the proxy. */
    void  *stage;
    size_t stage_cap;
    int    stage_mapped; /* 1: mmap on the rank's NUMA node + cudaHostRegister; 0: cudaHostAlloc */
    /* Pinned staging of COLL_CUDA_MSG_STAGING bytes for sends and receives, which are in flight
     * together (proxy_msg.c), allocated likewise: each takes the next part at the call (under
     * qlock), and the region is whole again once no call holds a part */
    void        *mstage;
    coll_parts_t mparts; /* its cap (0: none), the parts held */
    int          mstage_mapped;
    /* two pinned halves through which the proxy copies to and from heap staging (bounce.c),
     * allocated likewise, then devmem's pin (COLL_PROXY_BOUNCE_LEN in all); NULL: none could be
     * had, heap staging and the transports' device copies are copied directly */
    void       *bounce;
    int         bounce_mapped;
    cudaEvent_t bounce_ev[2];
    /* device windows of every rank, mapped here (ipc.c; the direct and p2p paths) */
    int                ipc_tried, ipc_ok;
    size_t             win_bytes; /* per half */
    void              *win_own;   /* this rank's two halves */
    int                win_ready; /* win_own allocated and exported */
    cudaIpcMemHandle_t win_handle;
    void             **win;       /* by rank: base of its two halves here */
    unsigned char     *owned_map; /* by rank: win[r] was opened by CUDA IPC (closed at destroy) */
    coll_layout_t      dev_layout;
    cudaStream_t       exec; /* window and local steps of device calls */
    /* free ready-events; the pool only grows until the communicator ends, since a call may be
     * put back from a host function (COLL_CUDA_STREAM_WAIT=hostfn), which may not call CUDA */
    cudaEvent_t        *events;
    int                 nevents, events_cap;
    unsigned            p2p_logged; /* the p2p path (p2p.c): by collective, its first call logged */
    int                 direct_logged; /* the direct path's first all-reduce logged */
    int                 p2p_possible;  /* coll_p2p_possible, with the state (equal on every rank) */
    size_t              p2p_min;       /* COLL_CUDA_P2P_MIN, the largest of the ranks' (ipc.c) */
    struct coll_p2p_op *p2p_parked;    /* calls whose failed exchanges may still be written into:
                                          freed with the communicator, after its endpoints */
    int        stopped;                /* coll_cuda_comm_destroy ran */
    void     **parked_heaps;           /* failed staged calls' heap staging, likewise */
    int        nparked_heaps;
    atomic_int host_waiters; /* host functions on callers' streams not yet returned */
    /* sends and receives in flight on the proxy (proxy_msg.c; the proxy thread's own) */
    coll_devop_t *msgs, *msgs_tail;
    double        msgs_next_check;
    atomic_int    msgs_n; /* how many: read by callers (a new call wakes a proxy asleep) */
    /* stream-ordered calls in flight (memops): the flag moves past a ticket only once every
     * such call up to it has ended (the proxy thread's own; each holds a reference) */
    coll_ticket_fifo_t sq;
} coll_cuda_comm_t;

/* proxy.c */
coll_result_t coll_cuda_proxy_start(coll_cuda_comm_t *cc, coll_comm_t *comm);
void          coll_cuda_proxy_push(coll_cuda_comm_t *cc, coll_devop_t *d);
void          coll_cuda_proxy_stop(coll_cuda_comm_t *cc);
#define COLL_PROXY_CHECK_S 0.02 /* control plane and deadline checks while polling */
/* naps of the proxy while it waits for a CUDA event (which wakes nobody), doubling from
 * COLL_PROXY_NAP_MIN_NS up to COLL_PROXY_NAP_MAX_NS */
#define COLL_PROXY_NAP_MIN_NS 20000L
#define COLL_PROXY_NAP_MAX_NS 500000L
/* the communicator failed for d's CUDA error e while doing what (lock taken here) */
coll_result_t coll_proxy_cuda_error(coll_devop_t *d, const char *what, cudaError_t e);
void          coll_proxy_pause(const coll_comm_t *comm); /* one pass of a polling wait */
/* Staged calls on the proxy: once the caller's stream reached d (ready: how that wait ended),
 * its staging, its input copied there and its gate opened; a failure fails the communicator
 * and the gate stays closed. Then, after the engine, its result to the device (st: the call's
 * status so far; returned updated). */
coll_result_t coll_proxy_stage_in(coll_cuda_comm_t *cc, coll_devop_t *d, cudaError_t ready);
coll_result_t coll_proxy_stage_out(coll_cuda_comm_t *cc, coll_devop_t *d, coll_result_t st);
/* sleep ns nanoseconds at most, or until a call is pushed for the proxy (proxy thread) */
void coll_proxy_nap(coll_cuda_comm_t *cc, long ns);
void coll_proxy_pinned_free(void *p, size_t cap, int mapped); /* staging (proxy_pinned_alloc) */
void coll_proxy_bounce_free(coll_cuda_comm_t *cc); /* the bounce halves and their events */

/* proxy_msg.c: sends and receives in flight together, on the proxy thread */
int  coll_proxy_msg_is(const coll_devop_t *d);
void coll_proxy_msg_add(coll_cuda_comm_t *cc, coll_devop_t *d);
int  coll_proxy_msg_poll(coll_cuda_comm_t *cc); /* one pass; nonzero when a call moved */
/* poll until none is left, or (until_call) a call is queued or the proxy is stopping */
void coll_proxy_msg_wait(coll_cuda_comm_t *cc, int until_call);

/* ipc.c: allocate this rank's device windows (with the state), then exchange them
 * (collective over comm, at its first collective on device memory: devop.c) */
/* equal on every rank */
int           coll_cuda_windows_wanted(const coll_comm_t *comm, const struct coll_cuda_comm *cc);
void          coll_cuda_ipc_alloc(coll_comm_t *comm, coll_cuda_comm_t *cc);
coll_result_t coll_cuda_ipc_setup(coll_comm_t *comm, coll_cuda_comm_t *cc);
/* at destroy: close the other ranks' windows; free the own one only once every rank has closed
 * its mappings of it (coll_cuda_ipc_free, after the bootstrap's closing exchange) */
void coll_cuda_ipc_close(coll_cuda_comm_t *cc, int nranks, int me);
void coll_cuda_ipc_free(coll_cuda_comm_t *cc);

/* devop.c */
void          coll_devop_put(coll_devop_t *d);
void          coll_devop_track(coll_cuda_comm_t *cc, coll_devop_t *d); /* proxy, in call order */
void          coll_devop_engine_done(void *arg, coll_result_t st);     /* on_done of its request */
void          coll_devop_finish(coll_devop_t *d, coll_result_t st);
coll_result_t coll_devop_stage(coll_cuda_comm_t *cc, coll_devop_t *d); /* proxy only */
void          coll_devop_mpart_release(coll_cuda_comm_t *cc, coll_devop_t *d);

/* The proxy's copy of len bytes between device memory and host staging (to_device: host to
 * device), to its end on the copy stream; pageable: the host side is heap memory, copied
 * through the bounce halves (bounce.c). */
#define COLL_PROXY_BOUNCE_HALF ((size_t)1 << 20)
/* after the two halves, in the same pinned region: what the transports copy device memory
 * through (coll_cuda_copy_sync, cc->devmem.pin; an ib rendezvous bounce piece at once) */
#define COLL_PROXY_DEVMEM_PIN ((size_t)256 << 10)
#define COLL_PROXY_BOUNCE_LEN (2 * COLL_PROXY_BOUNCE_HALF + COLL_PROXY_DEVMEM_PIN)
cudaError_t coll_proxy_copy(coll_cuda_comm_t *cc, void *dst, const void *src, size_t len,
                            int to_device, int pageable);

#endif
