/* SPDX-License-Identifier: MIT */
/*
 * Starting operations and driving them: algorithm choice, the per-communicator schedule cache
 * (schedules depend only on the call's shape, never on pointers), wire tags, the list of
 * active requests, and one progress pass over transports and requests.
 */
#include "engine.h"
#include "diag.h"
#include "cuda/cuda.h"
#include "cuda/devmem.h"
#include "error.h"
#include "log.h"
#include "param.h"
#include "util.h"

#include <inttypes.h>
#include <string.h>
#include <time.h>

static void engine_free(coll_task_t *req);

/* The call just finished: note how long this rank waited in it (once). */
static void engine_record(coll_task_t *req)
{
    if (req->finished && !req->recorded) {
        req->recorded = 1;
        coll_diag_record(req->comm, req->args.coll, req->seq, coll_time_s() - req->t_start);
    }
}

static int engine_args_equal(const coll_args_t *a, const coll_args_t *b)
{
    return a->coll == b->coll && a->count == b->count && a->dtype == b->dtype && a->op == b->op &&
           a->root == b->root && a->in_place == b->in_place && a->chunk_bytes == b->chunk_bytes &&
           a->device == b->device;
}

static void engine_entry_put(coll_sched_entry_t *e)
{
    if (--e->refs == 0) {
        coll_sched_destroy(&e->sched);
        coll_free(e);
    }
}

void coll_engine_free_zombies(coll_comm_t *comm)
{
    while (comm->zombies != NULL) {
        coll_task_t *req = comm->zombies;
        comm->zombies    = req->next;
        engine_free(req);
    }
    /* requests never waited or tested to their end (destroy with operations still running):
     * the caller may no longer use them, and no transport holds their operations any more */
    comm->runq = comm->runq_tail = comm->parked = comm->parked_tail = NULL;
    while (comm->active != NULL) {
        coll_task_t *req = comm->active;
        comm->active     = req->next;
        req->magic       = 0;
        engine_free(req);
    }
}

void coll_engine_cache_clear(coll_comm_t *comm)
{
    coll_free(comm->scratch_spare);
    comm->scratch_spare     = NULL;
    comm->scratch_spare_cap = 0;
    for (int i = 0; i < COLL_SCHED_CACHE; i++) {
        if (comm->cache[i] != NULL) {
            engine_entry_put(comm->cache[i]);
            comm->cache[i] = NULL;
        }
    }
}

/* COLL_DEBUG=INFO: each (collective, algorithm) choice once per communicator, with the size
 * that first led to it and the prediction behind it. */
static void engine_log_choice(coll_comm_t *comm, const coll_args_t *args, const coll_algo_t *algo,
                              double cost)
{
    int idx = -1;

    for (int i = 0; i < coll_algo_registry_count() && i < 32; i++) {
        if (coll_algo_registry_get(i) == algo) {
            idx = i;
        }
    }
    if (idx < 0 || (unsigned)args->coll >= COLL_OP_COUNT ||
        (comm->choices_logged[args->coll] & (1u << idx)) != 0) {
        return;
    }
    comm->choices_logged[args->coll] |= 1u << idx;
    if (cost < 0) {
        coll_info(ALGO, "rank %d: %s of %zu bytes (%s): %s, forced by COLL_ALGO", comm->rank,
                  coll_op_name(args->coll), args->count * coll_dtype_size(args->dtype),
                  coll_dtype_name(args->dtype), algo->name);
    } else {
        coll_info(ALGO, "rank %d: %s of %zu bytes (%s): %s, predicted %.1f us (%d ranks, %d hosts)",
                  comm->rank, coll_op_name(args->coll), args->count * coll_dtype_size(args->dtype),
                  coll_dtype_name(args->dtype), algo->name, cost, comm->nranks,
                  comm->layout.nhosts);
    }
}

static coll_result_t engine_build(coll_comm_t *comm, const coll_args_t *args,
                                  coll_sched_entry_t **entry_p)
{
    double             cost = -1;
    const coll_algo_t *algo =
        args->device
            ? coll_cuda_dev_algo(comm, args, &cost)
            : coll_algo_select(comm->nranks, args, comm->algo_override, &comm->model, &cost);
    coll_result_t st;
    char          msg[256];
    if (algo == NULL) {
        return coll_comm_fail(comm, COLL_ERR_INTERNAL, "no algorithm implements %s",
                              coll_op_name(args->coll));
    }
    engine_log_choice(comm, args, algo, cost);
    coll_sched_entry_t *e = coll_calloc(1, sizeof(*e), "schedule");
    if (e == NULL) {
        return COLL_ERR_NO_MEMORY;
    }
    e->args = *args;
    e->algo = algo;
    e->refs = 1;
    coll_sched_init(&e->sched, comm->rank, comm->nranks, args->dtype, args->op);
    COLL_CHECK_GOTO(algo->build(comm->rank, comm->nranks, args, &e->sched), st, err);
    COLL_CHECK_GOTO(coll_sched_finalize(&e->sched), st, err);
    if (coll_log_enabled(COLL_LOG_DEBUG, COLL_SS_ALGO)) {
        st = coll_sched_check(&e->sched, msg, sizeof(msg));
        if (st != COLL_OK) {
            coll_error(ALGO, "%s %s schedule is invalid: %s", algo->name, coll_op_name(args->coll),
                       msg);
            goto err;
        }
    }
    coll_debug(ALGO, "%s: %s of %zu x %s, %u steps", algo->name, coll_op_name(args->coll),
               args->count, coll_dtype_name(args->dtype), e->sched.nsteps);
    *entry_p = e;
    return COLL_OK;
err:
    coll_sched_destroy(&e->sched);
    coll_free(e);
    return st;
}

/* A cached schedule for args (one reference for the caller). */
static coll_result_t engine_sched_get(coll_comm_t *comm, const coll_args_t *args,
                                      coll_sched_entry_t **entry_p)
{
    int victim = 0;
    for (int i = 0; i < COLL_SCHED_CACHE; i++) {
        coll_sched_entry_t *e = comm->cache[i];
        if (e != NULL && engine_args_equal(&e->args, args)) {
            e->used = ++comm->cache_clock;
            e->refs++;
            *entry_p = e;
            return COLL_OK;
        }
        if (e == NULL || (comm->cache[victim] != NULL && e->used < comm->cache[victim]->used)) {
            victim = i;
        }
    }
    coll_sched_entry_t *e;
    COLL_CHECK(engine_build(comm, args, &e));
    if (comm->cache[victim] != NULL) {
        engine_entry_put(comm->cache[victim]);
    }
    e->used = ++comm->cache_clock;
    e->refs++;
    comm->cache[victim] = e;
    *entry_p            = e;
    return COLL_OK;
}

/*
 * The run queue. A progress pass visits the active requests a transport finished an operation
 * of since the last pass and those that poll, not every active one: with thousands of
 * non-blocking operations outstanding, a wait for each in turn would otherwise cost a walk over
 * all of them per pass (quadratic in the operations). Requests whose window steps cannot run
 * before this rank acknowledges an earlier epoch are parked, in epoch order, instead of polled.
 */
enum { RUNQ_QUEUED = 1, RUNQ_PARKED = 2 };

static void runq_remove(coll_comm_t *comm, coll_task_t *req)
{
    coll_task_t **head = req->on_runq == RUNQ_PARKED ? &comm->parked : &comm->runq;
    coll_task_t **tail = req->on_runq == RUNQ_PARKED ? &comm->parked_tail : &comm->runq_tail;

    if (!req->on_runq) {
        return;
    }
    if (req->runq_prev != NULL) {
        req->runq_prev->runq_next = req->runq_next;
    } else {
        *head = req->runq_next;
    }
    if (req->runq_next != NULL) {
        req->runq_next->runq_prev = req->runq_prev;
    } else {
        *tail = req->runq_prev;
    }
    req->runq_next = req->runq_prev = NULL;
    req->on_runq                    = 0;
}

/* Put req after `after` (NULL: first) in the list of head and tail. */
static void runq_insert(coll_task_t **head, coll_task_t **tail, coll_task_t *after,
                        coll_task_t *req)
{
    req->runq_prev = after;
    req->runq_next = after != NULL ? after->runq_next : *head;
    if (req->runq_next != NULL) {
        req->runq_next->runq_prev = req;
    } else {
        *tail = req;
    }
    if (after != NULL) {
        after->runq_next = req;
    } else {
        *head = req;
    }
}

void coll_engine_mark(coll_task_t *req)
{
    coll_comm_t *comm = req->comm;
    if (!req->linked || req->on_runq == RUNQ_QUEUED) {
        return;
    }
    runq_remove(comm, req); /* parked: a transport finished one of its other operations */
    runq_insert(&comm->runq, &comm->runq_tail, comm->runq_tail, req);
    req->on_runq = RUNQ_QUEUED;
}

/* Window steps of epoch e run after every rank acknowledged e - 2 (window.c): not before this
 * rank has, and the peers' flags of epoch e wait for the same. */
static int engine_parks(const coll_comm_t *comm, const coll_task_t *req)
{
    return req->nwinq > 0 && !req->detached && req->win_epoch > comm->win_acked + 2;
}

static void engine_park(coll_comm_t *comm, coll_task_t *req)
{
    coll_task_t *after = comm->parked_tail;
    while (after != NULL && after->win_epoch > req->win_epoch) {
        after = after->runq_prev;
    }
    runq_insert(&comm->parked, &comm->parked_tail, after, req);
    req->on_runq = RUNQ_PARKED;
}

/* Does req need a visit every pass, whatever its transports do? Window steps wait for flags, a
 * gated request for another thread, a detached one for its end or the communicator's error. */
static int engine_polls(const coll_task_t *req)
{
    return req->nwinq > 0 || req->detached ||
           atomic_load_explicit(&req->gate_closed, memory_order_acquire);
}

/* After a visit (or the start): park it, queue it to poll, or leave it to its transports. */
static void engine_requeue(coll_comm_t *comm, coll_task_t *req)
{
    if (req->on_runq) {
        return; /* queued again during the visit */
    }
    if (engine_parks(comm, req)) {
        engine_park(comm, req);
    } else if (engine_polls(req)) {
        coll_engine_mark(req);
    }
}

static void engine_unlink(coll_comm_t *comm, coll_task_t *req)
{
    runq_remove(comm, req);
    req->linked = 0;
    if (req->prev != NULL) {
        req->prev->next = req->next;
    } else if (comm->active == req) {
        comm->active = req->next;
    }
    if (req->next != NULL) {
        req->next->prev = req->prev;
    }
    req->next = req->prev = NULL;
}

/*
 * Scratch buffers are reused across requests: fresh heap memory of a large size comes straight
 * from the kernel and costs a page fault per page on first touch, every call. The communicator
 * keeps the largest released buffer.
 */
static void *engine_scratch_get(coll_comm_t *comm, size_t need, size_t *cap_p)
{
    if (comm->scratch_spare != NULL && comm->scratch_spare_cap >= need) {
        void *p                 = comm->scratch_spare;
        *cap_p                  = comm->scratch_spare_cap;
        comm->scratch_spare     = NULL;
        comm->scratch_spare_cap = 0;
        return p;
    }
    *cap_p = need;
    return coll_malloc(need, "scratch buffer");
}

static void engine_scratch_put(coll_comm_t *comm, coll_task_t *req)
{
    if (req->scratch == NULL) {
        return;
    }
    if (comm->scratch_spare_cap < req->scratch_cap) {
        coll_free(comm->scratch_spare);
        comm->scratch_spare     = req->scratch;
        comm->scratch_spare_cap = req->scratch_cap;
    } else {
        coll_free(req->scratch);
    }
    req->scratch     = NULL;
    req->scratch_cap = 0;
}

static void engine_free(coll_task_t *req)
{
    engine_scratch_put(req->comm, req);
    coll_task_release(req);
    if (req->entry != NULL) {
        engine_entry_put(req->entry);
    }
    coll_free(req);
}

/*
 * A step failed. When a peer's connection broke, the root cause is often another rank's death
 * (a cascade: a survivor that gave up closes its connections too). The bootstrap root sees
 * every death first-hand, so listen to it for a moment and prefer its account.
 */
static void engine_report_failure(coll_comm_t *comm, coll_task_t *req)
{
    char   msg[256];
    double until = coll_time_s() + 0.3; /* the root relays a death within milliseconds */
    if (req->status == COLL_ERR_REMOTE || req->status == COLL_ERR_TRANSPORT) {
        while (comm->bs != NULL && coll_time_s() < until) {
            coll_result_t st = coll_bootstrap_poll(comm->bs, msg, sizeof(msg));
            if (st != COLL_OK) {
                coll_comm_fail(comm, st, "rank %d: %s", comm->rank, msg);
                req->status = comm->error; /* the call returns what the communicator reports */
                return;
            }
            struct timespec ts = {0, 5000000};
            nanosleep(&ts, NULL);
        }
    }
    const char *why = req->status == COLL_ERR_REMOTE ? "connection lost (process died?)"
                                                     : coll_strerror(req->status);
    coll_comm_fail(comm, req->status, "rank %d: %s #%u failed talking to rank %d: %s", comm->rank,
                   coll_op_name(req->args.coll), req->seq, req->fail_peer, why);
    req->status = comm->error;
    /* A send and a receive that disagree are seen by the receiving side alone; the sender (a
     * single-copy send waits for its receiver) would wait for it to its timeout. Collectives'
     * mismatches are named by every rank's own diagnosis instead (diag.c). */
    if (req->status == COLL_ERR_MISMATCH &&
        (req->args.coll == COLL_OP_SEND || req->args.coll == COLL_OP_RECV)) {
        coll_comm_tell_failed(comm, req->status, comm->last_error);
    }
}

static coll_result_t engine_start(coll_comm_t *comm, const coll_args_t *args, const void *sendbuf,
                                  void *recvbuf, coll_task_t *req, coll_task_t **req_p)
{
    coll_result_t st;
    req->comm                = comm;
    req->args                = *args;
    req->args.layout         = args->device ? coll_cuda_dev_layout(comm) : &comm->layout;
    req->args.model          = &comm->model;
    req->bufs[COLL_BUF_SEND] = (void *)sendbuf;
    req->bufs[COLL_BUF_RECV] = recvbuf;
    COLL_CHECK_GOTO(engine_sched_get(comm, &req->args, &req->entry), st, err);
    if (req->entry->sched.scratch_bytes > 0) {
        req->scratch = engine_scratch_get(comm, req->entry->sched.scratch_bytes, &req->scratch_cap);
        if (req->scratch == NULL) {
            st = COLL_ERR_NO_MEMORY;
            goto err;
        }
        req->bufs[COLL_BUF_SCRATCH] = req->scratch;
    }
    if (args->coll == COLL_OP_SEND) {
        req->seq      = comm->send_seq[args->root]++;
        req->tag_base = COLL_TAG_P2P | ((uint64_t)(req->seq & 0x7fffffffu) << 32);
    } else if (args->coll == COLL_OP_RECV) {
        req->seq      = comm->recv_seq[args->root]++;
        req->tag_base = COLL_TAG_P2P | ((uint64_t)(req->seq & 0x7fffffffu) << 32);
    } else {
        /* bits 40..62: sequence; 32..39: the call's fingerprint, so that ranks in different
         * calls never match each other's messages (diag.h) */
        req->seq = comm->coll_seq++;
        req->tag_base =
            ((uint64_t)(req->seq & 0x7fffffu) << 40) | ((uint64_t)coll_diag_fp8(&req->args) << 32);
    }
    req->fail_peer = -1;
    req->t_start   = coll_time_s();
    COLL_CHECK_GOTO(coll_task_init(req), st, err);
    COLL_CHECK_GOTO(coll_win_start(req), st, err);
    /* COLL_IB_GDR=host: host calls take the transports' device-memory path where they could if
     * they were device memory (a devop may still point dev at its device later) */
    if (!args->device && coll_param_enum(COLL_P_IB_GDR) == COLL_GDR_HOST &&
        coll_sched_device_fits(&req->entry->sched, coll_engine_peer_moves_device, comm, NULL, 0)) {
        req->dev = &coll_devmem_host;
    }
    req->next = comm->active;
    if (comm->active != NULL) {
        comm->active->prev = req;
    }
    comm->active        = req;
    req->linked         = 1;
    comm->last_progress = req->t_start;
    coll_task_progress(req);
    engine_requeue(comm, req);
    if (req->status < 0) {
        engine_report_failure(comm, req);
    }
    *req_p = req;
    return COLL_OK;
err:
    engine_free(req);
    return st;
}

coll_result_t coll_engine_start(coll_comm_t *comm, const coll_args_t *args, const void *sendbuf,
                                void *recvbuf, coll_task_t **req_p)
{
    coll_task_t *req = coll_calloc(1, sizeof(*req), "request");
    if (req == NULL) {
        return COLL_ERR_NO_MEMORY;
    }
    req->magic = COLL_REQUEST_MAGIC;
    return engine_start(comm, args, sendbuf, recvbuf, req, req_p);
}

coll_result_t coll_engine_start_gated(coll_comm_t *comm, const coll_args_t *args,
                                      const void *sendbuf, void *recvbuf,
                                      void (*on_done)(void *arg, coll_result_t status), void *arg,
                                      coll_task_t **req_p)
{
    coll_task_t *req = coll_calloc(1, sizeof(*req), "request");
    if (req == NULL) {
        return COLL_ERR_NO_MEMORY;
    }
    atomic_init(&req->gate_closed, 1);
    req->detached = 1;
    req->on_done  = on_done;
    req->done_arg = arg;
    return engine_start(comm, args, sendbuf, recvbuf, req, req_p);
}

void coll_engine_open_gate(coll_task_t *req)
{
    coll_comm_t *comm = req->comm; /* req may be reaped by another thread once open */
    atomic_store_explicit(&req->gate_closed, 0, memory_order_release);
    coll_engine_wake(comm);
}

/* A detached request that ended: report it and free it (lock held). */
static void engine_detached_end(coll_task_t *req)
{
    coll_comm_t *comm                 = req->comm;
    void (*fn)(void *, coll_result_t) = req->on_done;
    void         *arg                 = req->done_arg;
    coll_result_t st;

    if (!req->finished && req->status == COLL_OK) {
        req->status = comm->error != COLL_OK ? comm->error : COLL_ERR_INTERNAL;
    }
    req->on_done = NULL;
    st           = coll_engine_reap(req); /* frees req when it finished */
    if (fn != NULL) {
        fn(arg, st);
    }
}

/* Progress rounds per pass at most (each visits the queue once). */
#define ENGINE_ROUNDS_MAX 8

/* May the oldest parked call's epoch start now? */
static int engine_parked_ready(const coll_comm_t *comm)
{
    return comm->parked != NULL && !engine_parks(comm, comm->parked);
}

/* Did round `pass` leave work for another: a parked call whose epoch may start, a request
 * queued but not visited in it, or one visited with finished steps still to account? */
static int engine_has_work_after(const coll_comm_t *comm, uint64_t pass)
{
    if (engine_parked_ready(comm)) {
        return 1;
    }
    for (const coll_task_t *r = comm->runq; r != NULL; r = r->runq_next) {
        if (r->runq_pass != pass ||
            (r->status == COLL_OK && (r->ndone > 0 || r->nready > 0) &&
             !atomic_load_explicit(&r->gate_closed, memory_order_acquire))) {
            return 1;
        }
    }
    return 0;
}

coll_result_t coll_engine_progress(coll_comm_t *comm)
{
    int moved = 0;
    for (int t = 0; t < comm->ntp; t++) {
        if (comm->tp[t].ctx != NULL) {
            int r = comm->tp[t].ops->progress(comm->tp[t].ctx);
            if (r > 0) {
                moved = 1;
            }
        }
    }
    /* Requests queued during a round (a visit's transport calls finish other requests'
     * operations) are visited in it; one visited already ends the round. Another round runs
     * while the rounds leave work behind: parked calls whose epoch may start now, or a queued
     * request with finished steps to account (a waiter must not sleep on work of its own). */
    for (int round = 0;
         round < ENGINE_ROUNDS_MAX && (round == 0 || engine_has_work_after(comm, comm->runq_pass));
         round++) {
        uint64_t pass = ++comm->runq_pass;
        while (engine_parked_ready(comm)) {
            coll_engine_mark(comm->parked);
        }
        for (coll_task_t *req = comm->runq; req != NULL && req->runq_pass != pass;
             req              = comm->runq) {
            uint32_t before = req->ncomplete;
            runq_remove(comm, req);
            req->runq_pass = pass;
            coll_task_progress(req);
            if (req->ncomplete != before) {
                moved = 1;
                engine_record(req);
            }
            if (req->status < 0 && comm->error == COLL_OK) {
                engine_report_failure(comm, req);
            }
            if (req->detached && (req->finished || req->status < 0 || comm->error != COLL_OK)) {
                engine_detached_end(req); /* may free it */
            } else {
                engine_requeue(comm, req);
            }
        }
    }
    if (moved) {
        comm->last_progress = coll_time_s();
    }
    return comm->error;
}

void coll_engine_fail_all(coll_comm_t *comm, coll_result_t st)
{
    for (coll_task_t *req = comm->active; req != NULL; req = req->next) {
        if (req->status == COLL_OK && !req->finished) {
            req->status = st;
        }
    }
}

/* Finished or failed: unlink and free; returns its status. Lock held. */
coll_result_t coll_engine_reap(coll_task_t *req)
{
    coll_comm_t  *comm = req->comm;
    coll_result_t st   = req->finished ? COLL_OK : req->status;
    if (!req->finished && st == COLL_OK) {
        st = comm->error != COLL_OK ? comm->error : COLL_ERR_INTERNAL;
    }
    engine_unlink(comm, req);
    req->magic = 0; /* released: a second coll_wait or coll_test on it is refused */
    /* A failed request may still have operations inside transports: they are owned by the
     * endpoints until the communicator is destroyed, so its memory must stay. */
    if (req->finished) {
        engine_record(req);
        engine_free(req);
    } else {
        req->status   = st;
        req->next     = comm->zombies;
        comm->zombies = req;
    }
    return st;
}
