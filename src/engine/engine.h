/* SPDX-License-Identifier: MIT */
/*
 * The engine runs schedules without blocking: a started operation (a request) posts every
 * step whose dependencies are complete to the peer's transport, reduces and copies locally,
 * and completes when all steps have. Progress is driven by coll_wait/coll_test (and, later, a
 * progress thread). Waiting spins briefly and then sleeps in the transports (futex/poll), with
 * the communicator's deadline; a silent peer becomes COLL_ERR_TIMEOUT naming it. Calls whose
 * schedules use shared windows are numbered (epochs) and their window steps wait, without
 * blocking, for flags and acknowledgements (window.c).
 */
#ifndef COLL_ENGINE_H
#define COLL_ENGINE_H

#include "api/comm.h"
#include "algo.h"
#include "transport.h"

#include <stdatomic.h>

typedef struct coll_sched_entry {
    coll_args_t        args;
    const coll_algo_t *algo;
    coll_sched_t       sched;
    int                refs; /* requests using it + 1 while cached */
    uint64_t           used; /* LRU clock */
} coll_sched_entry_t;

typedef struct coll_task_op {
    coll_tp_op_t         op;
    struct coll_request *req;
    uint32_t             step;
    int                  wait_peer; /* window steps: the rank last waited for */
} coll_task_op_t;

#define COLL_REQUEST_MAGIC 0x52455155u /* "REQU": live; cleared when released */

typedef struct coll_request {
    uint32_t            magic; /* COLL_REQUEST_MAGIC until coll_wait/coll_test release it */
    coll_comm_t        *comm;
    coll_sched_entry_t *entry;
    coll_args_t         args;
    void               *bufs[COLL_BUF_COUNT];
    void               *scratch;
    size_t              scratch_cap;
    uint64_t            tag_base;
    uint32_t            seq;
    double              t_start;  /* when the call started (diagnosis, arrival record) */
    int                 recorded; /* its completion is in the arrival record */
    uint32_t            nsteps;
    uint32_t            ncomplete;
    uint32_t           *ndeps_left;
    uint32_t           *ready; /* stack of steps ready to start */
    uint32_t            nready;
    uint32_t           *doneq; /* steps finished by transport callbacks */
    uint32_t            ndone;
    uint32_t           *winq; /* window steps started that wait for a flag or an ack */
    uint32_t            nwinq;
    uint64_t            win_epoch; /* 0: the call uses no window */
    int                 win_ended; /* its epoch was counted as finished here */
    uint8_t            *started;
    coll_task_op_t     *ops;
    coll_result_t       status;    /* OK while running; error once failed */
    int                 fail_peer; /* peer of the first failed step, -1 if none */
    int                 finished;
    /* Gated requests (device operations, src/cuda/) are numbered and built at the call but post
     * nothing until another thread opens the gate; detached ones are reaped by progress, which
     * then calls on_done once with the result (lock held). */
    atomic_int gate_closed;
    int        detached;
    void (*on_done)(void *arg, coll_result_t status);
    void              *done_arg;
    struct coll_devop *devop; /* a device operation's public handle (src/cuda/), else NULL */
    /* Set before the gate opens: the buffers are device memory that the transports move
     * themselves (GPUDirect RDMA, coll_sched_device_fits); local steps run on the device, and
     * the transports' copies by this (src/cuda/devmem.h). NULL otherwise. */
    const struct coll_devmem *dev;
    struct coll_request      *next; /* comm->active */
    struct coll_request      *prev;
    int                       linked; /* on comm->active */
    /* comm->runq: a transport finished one of its operations, or it polls (window steps, a
     * closed gate, detached); runq_pass is the round that last visited it. comm->parked: its
     * window steps wait for an epoch this rank has not acknowledged yet (by epoch). */
    int                  on_runq; /* 0, RUNQ_QUEUED or RUNQ_PARKED (engine.c) */
    uint64_t             runq_pass;
    struct coll_request *runq_next;
    struct coll_request *runq_prev;
} coll_task_t;

/* Does the endpoint of peer move device memory (COLL_TP_CAP_CUDA_MEM in its ep_caps)? comm is
 * a coll_comm_t; the shape of coll_sched_device_fits' peer_ok. */
int coll_engine_peer_moves_device(void *comm, int peer);
/* Host memory standing in for device memory (COLL_IB_GDR=host): a request's dev for tests. */
extern const struct coll_devmem coll_devmem_host;

/* Start an operation: picks the algorithm, builds (or reuses) the schedule, posts ready steps.
 * On success *req_p is running (maybe already finished). */
coll_result_t coll_engine_start(coll_comm_t *comm, const coll_args_t *args, const void *sendbuf,
                                void *recvbuf, coll_task_t **req_p);
/* The same, gated and detached (see coll_task_t): nothing is posted before
 * coll_engine_open_gate; on_done(arg, status) runs once at the end. */
coll_result_t coll_engine_start_gated(coll_comm_t *comm, const coll_args_t *args,
                                      const void *sendbuf, void *recvbuf,
                                      void (*on_done)(void *arg, coll_result_t status), void *arg,
                                      coll_task_t **req_p);
/* Let a gated request run (any thread, no lock needed); progress then posts its steps. */
void coll_engine_open_gate(coll_task_t *req);
/* Control plane and deadline checks for a wait on req (lock held); the communicator's error. */
coll_result_t coll_engine_check(coll_comm_t *comm, coll_task_t *req);
/* small.c: does comm have small-call slots (every rank on this host, windows up, the transport
 * offers them)? Equal on every rank. */
int coll_small_slots(const coll_comm_t *comm);
/* Does COLL_ALGO leave this call to a path of its own (it forces no algorithm on it)? Sets
 * a->layout. */
int coll_small_call_free(coll_comm_t *comm, coll_args_t *a);
/* small.c: may this blocking call run through the small-call slots (equal on every rank that
 * makes the same call)? Sets a->layout. */
int coll_small_eligible(coll_comm_t *comm, coll_args_t *a);
/* Run it; lock held, arguments checked. */
coll_result_t coll_small_run(coll_comm_t *comm, const coll_args_t *a, const void *sendbuf,
                             void *recvbuf);
/* small.c: the slots' rounds, for other calls that use them (direct.c, src/api/register.c); comm
 * locked, windows up (comm->win_tp >= 0 with small_* ops). begin numbers the call and shows it
 * to the diagnosis; a round copies len (<= COLL_TP_SMALL_MAX) bytes of payload and a's
 * description into the own slot, publishes it and waits for every rank's (timeouts and dead
 * ranks fail the communicator); the payloads stay readable (coll_small_payload) until the next
 * round; check compares every rank's count, dtype and op with a's; end records the arrival. */
void          coll_small_begin(coll_comm_t *comm, const coll_args_t *a);
coll_result_t coll_small_round(coll_comm_t *comm, const coll_args_t *a, const void *payload,
                               size_t len, int *parity_p, double *t0_p);
const void   *coll_small_payload(coll_comm_t *comm, int rank, int parity);
coll_result_t coll_small_check(coll_comm_t *comm, int parity, const coll_args_t *a);
void          coll_small_end(coll_comm_t *comm, const coll_args_t *a, double t0, coll_result_t st);

/* direct.c: blocking all-reduce, reduce-scatter and all-gather on buffers every rank registered
 * (coll_comm_register): eligible is equal on every rank; run returns COLL_INPROGRESS, having
 * done nothing but a round of the slots, when some rank's buffers are not registered (the call
 * then goes to the engine on every rank). */
int           coll_direct_eligible(coll_comm_t *comm, coll_args_t *a);
coll_result_t coll_direct_run(coll_comm_t *comm, const coll_args_t *a, const void *sendbuf,
                              void *recvbuf);
/* Sleep in the transports for at most slice_s (lock held). */
void coll_engine_block(coll_comm_t *comm, double slice_s);
/* One progress pass over every transport and active request (comm->lock held). */
coll_result_t coll_engine_progress(coll_comm_t *comm);
/* Block until req finishes; returns its status and frees it. */
coll_result_t coll_engine_wait(coll_task_t *req);
/* Non-blocking: 1 if finished (status in *status_p, req freed), else 0. */
int coll_engine_test(coll_task_t *req, coll_result_t *status_p);
/* Fail every active request of comm with st (comm->lock held). */
void coll_engine_fail_all(coll_comm_t *comm, coll_result_t st);
/* Unlink a finished or failed request; frees it unless transports may still reference it
 * (failed: parked until destroy). Returns its status. Lock held. */
coll_result_t coll_engine_reap(coll_task_t *req);
/* Free parked failed requests and the requests still active (never waited), after the
 * transports are finalized. */
void coll_engine_free_zombies(coll_comm_t *comm);
/* Free cached schedules (destroy). */
void coll_engine_cache_clear(coll_comm_t *comm);
/* Wake any thread sleeping in a wait on comm (abort). */
void coll_engine_wake(coll_comm_t *comm);
/* Peer a request is blocked on (a window flag or acknowledgement it waits for, else the first
 * started, unfinished receive, else send), or -1. */
int coll_engine_waiting_peer(const coll_task_t *req);

/* Queue req for the next progress pass (a transport finished one of its operations); lock held.
 * Requests no longer active (parked failures) are not queued. */
void coll_engine_mark(coll_task_t *req);

/* task.c */
coll_result_t coll_task_init(coll_task_t *req);
void          coll_task_progress(coll_task_t *req);
void          coll_task_release(coll_task_t *req);

/* window.c: shared-window steps */
/* Give the call its epoch if its schedule uses windows (after coll_task_init). */
coll_result_t coll_win_start(coll_task_t *req);
/* Run window step i: COLL_OK done, COLL_INPROGRESS waits (poll again), < 0 failed; the rank
 * waited for or failed is left in req->ops[i].wait_peer. */
coll_result_t coll_win_step(coll_task_t *req, uint32_t i);
/* The call finished: acknowledge its epoch once every earlier one has finished too. */
void coll_win_end(coll_task_t *req);

#endif
