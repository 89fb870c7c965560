/* SPDX-License-Identifier: MIT */
/*
 * The algorithm interface. An algorithm turns one collective call (coll_args_t) into a
 * schedule for one rank; it never sees transports, pointers or the network. The registry
 * lists them; the tuner (cost_us) and COLL_ALGO pick one per call.
 */
#ifndef COLL_ALGO_H
#define COLL_ALGO_H

#include "layout.h"
#include "model.h"
#include "sched.h"

typedef enum {
    COLL_OP_ALLREDUCE,
    COLL_OP_REDUCE_SCATTER,
    COLL_OP_ALLGATHER,
    COLL_OP_BROADCAST,
    COLL_OP_REDUCE,
    COLL_OP_ALLTOALL,
    COLL_OP_BARRIER,
    COLL_OP_SEND,
    COLL_OP_RECV,
    COLL_OP_COUNT
} coll_op_t;

const char *coll_op_name(coll_op_t op);

/* A collective call as the algorithm sees it. */
typedef struct coll_args {
    coll_op_t coll;
    size_t    count; /* elements as in the API: recvcount (reduce_scatter), sendcount
                        (allgather), per-peer count (alltoall), count otherwise */
    coll_dtype_t dtype;
    coll_redop_t op;          /* may be AVG */
    int          root;        /* broadcast/reduce root; send/recv peer; else -1 */
    int          in_place;    /* NCCL's in-place rule held for this call (see below) */
    size_t       chunk_bytes; /* pipeline chunk (COLL_CHUNK_SIZE), > 0 */
    /* The communicator's layout, or NULL for "every rank on one host, no shared windows".
     * Constant for a communicator, so not part of the schedule cache key. */
    const coll_layout_t *layout;
    /* The communicator's cost model (NULL: the default); composed algorithms pick their parts
     * with it. Equal on every rank and constant, so not part of the cache key either. */
    const coll_model_t *model;
    /* 1: the buffers are CUDA device memory that the schedule's window and local steps touch
     * directly (src/cuda/); windows are then the device windows. Part of the cache key. */
    int device;
} coll_args_t;

/*
 * Buffers in place: when args->in_place is set the schedule must reference only the buffer
 * that holds both roles, so the dependency analysis sees one memory:
 *   allreduce, broadcast, reduce: COLL_BUF_RECV only (it is also the input);
 *   reduce_scatter: COLL_BUF_SEND only; the result goes to offset rank * recvcount * esize;
 *   allgather: COLL_BUF_RECV only; the own block is already at rank * sendcount * esize.
 * alltoall in place is rejected by the API.
 */

typedef struct coll_algo {
    const char *name;  /* value accepted by COLL_ALGO: "ring", "chain", "pairwise", ... */
    const char *desc;  /* one line, printed by collinfo */
    uint32_t    colls; /* bitmask of (1u << coll_op_t) */
    /* 1: picked only when COLL_ALGO names it; the tuner skips it until measurements on real
     * runs show where it wins */
    int forced_only;
    /* Pure: can it run this call on nranks ranks? */
    int (*supported)(int nranks, const coll_args_t *args);
    /* Pure: predicted time in microseconds under model m (args->layout says which messages
     * cross hosts). */
    double (*cost_us)(int nranks, const coll_args_t *args, const coll_model_t *m);
    /* Build this rank's schedule into an initialised s (the caller finalizes it). */
    coll_result_t (*build)(int rank, int nranks, const coll_args_t *args, coll_sched_t *s);
} coll_algo_t;

int                coll_algo_registry_count(void);
const coll_algo_t *coll_algo_registry_get(int i);
const coll_algo_t *coll_algo_registry_find(const char *name);
/* The algorithm for a call: COLL_ALGO override if it names a supported one, else the cheapest
 * supported by cost_us under m (the default model when m is NULL). Never NULL for a valid
 * call. *cost_p (if not NULL) gets the predicted time, or -1 for an override. */
const coll_algo_t *coll_algo_select(int nranks, const coll_args_t *args, const char *override,
                                    const coll_model_t *m, double *cost_p);
/* Does override (COLL_ALGO's syntax) force an algorithm that can run this call? */
int coll_algo_overridden(int nranks, const coll_args_t *args, const char *override);

/* Is a usable on this call (implements the collective, supported for nranks and layout)? */
int coll_algo_applies(const coll_algo_t *a, int nranks, const coll_args_t *args);

#endif
