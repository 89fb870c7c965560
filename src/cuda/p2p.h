/* SPDX-License-Identifier: MIT */
/*
 * The p2p path of device collectives (p2p.c): ranks of one host move a call's data between
 * their device windows, which every rank maps from every other once by CUDA IPC, with copy
 * engines and the reduction kernels; nothing goes through host memory. Internal to src/cuda/.
 */
#ifndef COLL_CUDA_P2P_H
#define COLL_CUDA_P2P_H

#include "cuda/devop.h"
#include "cuda/p2p_plan.h"

/* What every rank publishes at each exchange of a call. */
typedef struct coll_p2p_card {
    int32_t  status; /* COLL_OK, or this rank's first failure in the call */
    int32_t  coll;
    uint64_t print; /* the call's count, dtype, op and root: a mismatch is reported, not run */
} coll_p2p_card_t;

typedef struct coll_p2p_req {
    struct coll_devop *d;
    atomic_int         done;
    coll_result_t      status;
    coll_task_t       *req;  /* until it ends */
    coll_task_t       *gate; /* the same, kept to open it (a gated request is not freed before
                                it ends, even when a failure reaps it) */
} coll_p2p_req_t;

/* A device operation on the p2p path: its plan and its exchanges (gated engine all-gathers of
 * a card, numbered at the call). */
typedef struct coll_p2p_op {
    coll_p2p_plan_t     plan;
    coll_p2p_req_t     *x;        /* by exchange */
    coll_p2p_card_t    *mine;     /* by exchange */
    coll_p2p_card_t    *cards;    /* by exchange, then rank */
    char                why[256]; /* this rank's failure, for the message */
    struct coll_p2p_op *next_parked;
} coll_p2p_op_t;

/* Could a communicator use the path at all (COLL_CUDA_P2P, ranks on one host, 2 to
 * COLL_P2P_MAX_RANKS of them, their GPUs linked within COLL_CUDA_P2P_LEVEL: p2p_topo.h)? Decides
 * whether device windows are allocated with its device state. */
int coll_p2p_possible(const coll_comm_t *comm);

/* Log (INFO) the worst link between the ranks' GPUs, once the windows are mapped. */
void coll_p2p_log_links(const coll_comm_t *comm);

/* May this call take the path (equal on every rank making it: its buffers are device memory,
 * it is a collective, the communicator could: comm->cuda->p2p_possible, and its larger buffer
 * holds at least the ranks' agreed COLL_CUDA_P2P_MIN bytes, known once the windows are
 * mapped)? */
int coll_p2p_wanted(const coll_comm_t *comm, const coll_devop_t *d);

/* At the call (lock held; the windows mapped, cc->ipc_ok): plan the rounds, start every
 * exchange's gated request. */
coll_result_t coll_p2p_prepare(coll_comm_t *comm, coll_cuda_comm_t *cc, coll_devop_t *d);

/* Proxy: the work of the phase before exchange k, to its end. COLL_OK, or an error with
 * op->why set. */
coll_result_t coll_p2p_phase(coll_comm_t *comm, coll_cuda_comm_t *cc, coll_devop_t *d, int k);

/* Free a device operation's p2p state. */
void coll_p2p_op_free(coll_p2p_op_t *op);

#endif
