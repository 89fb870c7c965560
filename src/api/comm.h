/* SPDX-License-Identifier: MIT */
/*
 * The communicator object: identity, peers, the transport chosen for each peer, the engine's
 * state (sequence numbers, active operations, schedule cache) and the error state shared by
 * every operation on it. Internal; the public type is opaque.
 */
#ifndef COLL_API_COMM_H
#define COLL_API_COMM_H

#include <pthread.h>
#include <stdatomic.h>
#include "coll.h"
#include "transport.h"
#include "algo.h"
#include "bootstrap/bootstrap.h"
#include "topo/place.h"

#define COLL_COMM_MAGIC  0x434f4d4du /* "COMM" */
#define COLL_COMM_MAX_TP 8
#define COLL_SCHED_CACHE 16

struct coll_request;
struct coll_sched_entry;

typedef struct coll_comm_tp {
    const coll_transport_ops_t *ops;
    coll_tp_ctx_t              *ctx; /* NULL if no peer uses it */
    int                         npeers;
    int reg; /* its place in the registry: where its handle goes in the exchange (comm.c) */
} coll_comm_tp_t;

struct coll_comm {
    uint32_t           magic;
    int                rank;
    int                nranks;
    uint64_t           comm_id;
    char               name[64];
    double             timeout_s;
    coll_bootstrap_t  *bs;
    coll_peer_info_t  *peers;
    coll_topo_place_t *places;     /* by rank: where it sits (gathered at creation) */
    const coll_topo_t *topo;       /* this host's model (shared by the process), NULL: unknown */
    char               nic_if[32]; /* interface of the NIC chosen for TCP; "": none chosen */
    coll_comm_tp_t     tp[COLL_COMM_MAX_TP];
    int                ntp;
    coll_tp_ep_t     **eps;     /* by rank; NULL for self */
    int8_t            *ep_tp;   /* transport index by rank; -1 for self */
    int                nsplits; /* splits made from this communicator so far */

    /* engine */
    pthread_mutex_t          lock;
    uint32_t                 coll_seq;
    uint32_t                *send_seq; /* per peer: user sends posted */
    uint32_t                *recv_seq; /* per peer: user receives posted */
    struct coll_request     *active;   /* started, not finished */
    struct coll_request     *zombies;  /* failed, parked until destroy */
    struct coll_request     *runq;     /* active ones a progress pass visits (engine.c) */
    struct coll_request     *runq_tail;
    struct coll_request     *parked; /* active ones whose window epoch cannot start yet */
    struct coll_request     *parked_tail;
    uint64_t                 runq_pass; /* progress rounds made (engine.c) */
    struct coll_sched_entry *cache[COLL_SCHED_CACHE];
    uint64_t                 cache_clock;
    double                   last_progress;  /* when any step last completed */
    int                      oversubscribed; /* more ranks on this host than online CPUs: waits
                                                yield each pass instead of spinning */
    int oversub_factor; /* ranks on this host per online CPU, rounded up; 1 if not more */
    /* small blocking calls through shared slots (src/engine/small.c) */
    uint64_t      small_calls;    /* calls made; slot (small_calls & 1) is the next one's */
    uint32_t      small_seq;      /* the op number (coll_seq) of the current or last one */
    int           small_active;   /* one is waiting */
    int           small_data;     /* its slots hold the input (coll_small_run), not a path's */
    int           small_waiting;  /* the rank it waits for, -1: none */
    coll_args_t   small_args;     /* its arguments, for the diagnosis */
    double        notices_polled; /* when colls_start last read bootstrap notices */
    uint32_t      notices_calls;  /* calls since: the clock is read every 16th */
    void         *scratch_spare;  /* a finished request's scratch, kept for reuse */
    size_t        scratch_spare_cap;
    char         *algo_override;
    coll_layout_t layout;                        /* hosts of the ranks (src/api/tune.c) */
    coll_model_t  model;                         /* the tuner's link costs, equal on every rank */
    uint32_t      choices_logged[COLL_OP_COUNT]; /* by collective: registry bits already logged */
    /* shared windows (src/engine/window.c): epochs are numbered alike on every rank */
    int      win_tp;        /* index in tp[] of the transport offering windows, -1: none */
    uint64_t win_epoch;     /* the last epoch given to a call */
    uint64_t win_acked;     /* every epoch <= this finished here, and acknowledged */
    uint64_t win_done;      /* bit k: epoch win_acked + 1 + k finished here (out of order) */
    uint64_t win_all_acked; /* every rank acknowledged every epoch <= this (cache) */

    struct coll_diag_stats *stats; /* arrival record (src/engine/stats.c), made at first use */

    struct coll_cuda_comm *cuda; /* device operations (src/cuda/), made at the first one */

    /* registered buffers (src/api/register.c), numbered alike on every rank */
    struct coll_reg **regs;          /* by number; NULL once deregistered */
    int               nregs;         /* numbers given */
    int               regs_cap;      /* entries of regs */
    int               regs_live;     /* not deregistered */
    uint64_t          regs_hash;     /* of the live numbers: equal on ranks holding the same */
    uint32_t          direct_logged; /* bit by collective: the direct path was logged */
    int   cma_state; /* direct path by cross-memory attach: 0 untried, 1 works, -1 refused */
    void *cma_tmp;   /* its cache-resident blocks (src/engine/direct_cma.c), made at first use */
    struct {
        int peer, err, write; /* the last failed transfer: with which rank, errno, direction */
    } cma_fail;

    int is_world; /* made by coll_init: coll_finalize destroys it */

    /* errors: first failure wins and is sticky */
    atomic_int    aborted;
    atomic_int    revoked;
    atomic_int    told_failed; /* this rank's failure was announced through the bootstrap */
    coll_result_t error;
    char          last_error[512];
};

/* Validate the handle itself (NULL, destroyed). */
coll_result_t coll_comm_check_handle(const coll_comm_t *comm, const char *fn);
/* Record an argument error on the communicator (and the thread), return st. */
coll_result_t coll_comm_arg_error(coll_comm_t *comm, coll_result_t st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Mark the communicator failed (first call wins), log once, wake waiters; returns st. */
coll_result_t coll_comm_fail(coll_comm_t *comm, coll_result_t st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same for an error whose line the caller has logged already: msg is not logged again. */
coll_result_t coll_comm_fail_logged(coll_comm_t *comm, coll_result_t st, const char *msg);
/* This rank's communicator failed (st) of a cause the others cannot see (a split refused here, a
 * send and a receive that disagree): unless they heard of it already (an abort or revoke is
 * announced when made, a failure the bootstrap reported came from it), announce it through the
 * bootstrap, once, so that their calls fail now naming this rank instead of waiting for it to
 * their timeout. why is the text they are given. Returns 1 when it told them. */
int coll_comm_tell_failed(coll_comm_t *comm, coll_result_t st, const char *why);

/* This rank's coll_comm_abort as the communicator's error, unless it has one (lock held). */
void coll_comm_abort_record(coll_comm_t *comm);
/* Likewise for this rank's coll_comm_revoke (shrink.c; lock held). */
void coll_comm_revoke_record(coll_comm_t *comm);
/* An abort or revoke of this rank that its thread could not record yet, recorded (lock held). */
void coll_comm_record_flags(coll_comm_t *comm);

/* agree.c: at creation, COLL_ERR_MISMATCH on every rank when the ranks set a parameter that
 * chooses a call's path differently (the message names it, two ranks and their values). */
coll_result_t coll_comm_agree_params(coll_comm_t *comm, double deadline);

/* comm.c: create from a unique id (used by init and split). */
coll_result_t coll_comm_create(coll_comm_t **comm_p, int nranks, const coll_unique_id_t *id,
                               int rank, const coll_config_t *config);

#endif
