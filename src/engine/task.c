/* SPDX-License-Identifier: MIT */
/*
 * Executing one schedule: dependency counting over the schedule's DAG, posting sends and
 * receives to the peer's endpoint, running local copies/reductions inline, and queueing the
 * shared-window steps that must wait (window.c runs them). Transport callbacks only queue the
 * finished step; the queue is drained here, never re-entrantly.
 */
#include "engine.h"
#include "cuda/cuda.h"
#include "cuda/devmem.h"
#include "error.h"
#include "log.h"
#include "util.h"
#include "reduce/reduce.h"

#include <inttypes.h>
#include <string.h>

/* Host memory standing in for device memory (COLL_IB_GDR=host). */
const coll_devmem_t coll_devmem_host = {.stream = NULL, .device = -1};

int coll_engine_peer_moves_device(void *comm_, int peer)
{
    const coll_comm_t  *comm = comm_;
    const coll_tp_ep_t *ep   = peer >= 0 && peer < comm->nranks ? comm->eps[peer] : NULL;
    return ep != NULL && ep->ops->ep_caps != NULL &&
           (ep->ops->ep_caps((coll_tp_ep_t *)ep) & COLL_TP_CAP_CUDA_MEM) != 0;
}

static void task_op_done(void *arg, coll_result_t status)
{
    coll_task_op_t *to  = arg;
    coll_task_t    *req = to->req;
    if (status < 0 && req->status == COLL_OK) {
        req->status    = status;
        req->fail_peer = req->entry->sched.steps[to->step].peer;
    }
    req->doneq[req->ndone++] = to->step;
    coll_engine_mark(req);
}

coll_result_t coll_task_init(coll_task_t *req)
{
    const coll_sched_t *s = &req->entry->sched;
    uint32_t            n = s->nsteps;
    req->nsteps           = n;
    req->ndeps_left       = coll_malloc(sizeof(uint32_t) * n * 4 + 1, "request step state");
    req->ops              = coll_malloc(sizeof(coll_task_op_t) * n + 1, "request ops");
    req->started          = coll_calloc(n + 1, 1, "request flags");
    if (req->ndeps_left == NULL || req->ops == NULL || req->started == NULL) {
        return COLL_ERR_NO_MEMORY;
    }
    req->ready = req->ndeps_left + n;
    req->doneq = req->ready + n;
    req->winq  = req->doneq + n;
    for (uint32_t i = 0; i < n; i++) {
        req->ndeps_left[i] = s->steps[i].ndeps;
        if (s->steps[i].ndeps == 0) {
            req->ready[req->nready++] = i;
        }
    }
    return COLL_OK;
}

void coll_task_release(coll_task_t *req)
{
    coll_free(req->ndeps_left);
    coll_free(req->ops);
    coll_free(req->started);
    coll_free(req->scratch);
    req->ndeps_left = NULL;
    req->ops        = NULL;
    req->started    = NULL;
    req->scratch    = NULL;
}

static void task_step_complete(coll_task_t *req, uint32_t i)
{
    const coll_sched_t *s  = &req->entry->sched;
    const coll_step_t  *st = &s->steps[i];
    req->ncomplete++;
    for (uint32_t k = 0; k < st->succ_count; k++) {
        uint32_t succ = s->succ[st->succ_start + k];
        if (--req->ndeps_left[succ] == 0) {
            req->ready[req->nready++] = succ;
        }
    }
}

/* Start step i; local steps complete at once. */
static coll_result_t task_step_start(coll_task_t *req, uint32_t i)
{
    const coll_sched_t *s    = &req->entry->sched;
    const coll_step_t  *st   = &s->steps[i];
    coll_comm_t        *comm = req->comm;
    char               *src  = (char *)req->bufs[st->src_buf] + st->src_off;
    char               *dst  = (char *)req->bufs[st->dst_buf] + st->dst_off;
    size_t              esz  = coll_dtype_size(s->dtype);

    req->started[i] = 1;
    if ((req->args.device || (req->dev != NULL && req->dev->device >= 0)) &&
        (st->kind == COLL_STEP_COPY || st->kind == COLL_STEP_REDUCE || st->kind == COLL_STEP_DIV)) {
        coll_result_t r = COLL_OK;
        if (st->kind == COLL_STEP_COPY && st->len > 0 && dst != src) {
            r = coll_cuda_dev_copy(comm, dst, src, st->len);
        } else if (st->kind == COLL_STEP_REDUCE) {
            r = coll_cuda_dev_reduce(comm, s->dtype, s->op, dst, dst, src, st->len / esz);
        } else if (st->kind == COLL_STEP_DIV) {
            r = coll_cuda_dev_div(comm, s->dtype, dst, st->len / esz, s->nranks);
        }
        if (r == COLL_OK) {
            task_step_complete(req, i);
        }
        return r;
    }
    switch (st->kind) {
    case COLL_STEP_COPY:
        if (st->len > 0 && dst != src) {
            memcpy(dst, src, st->len);
        }
        task_step_complete(req, i);
        return COLL_OK;
    case COLL_STEP_REDUCE:
        coll_reduce3(s->dtype, s->op, dst, dst, src, st->len / esz);
        task_step_complete(req, i);
        return COLL_OK;
    case COLL_STEP_DIV:
        coll_reduce_div(s->dtype, dst, st->len / esz, s->nranks);
        task_step_complete(req, i);
        return COLL_OK;
    case COLL_STEP_PUT:
    case COLL_STEP_GET:
    case COLL_STEP_GET_REDUCE: {
        coll_result_t r = coll_win_step(req, i);
        if (r == COLL_OK) {
            task_step_complete(req, i);
        } else if (r == COLL_INPROGRESS) {
            req->winq[req->nwinq++] = i;
        }
        return r < 0 ? r : COLL_OK;
    }
    default:
        break;
    }
    coll_task_op_t *to = &req->ops[i];
    coll_tp_ep_t   *ep = comm->eps[st->peer];
    if (req->dev != NULL && st->kind == COLL_STEP_RECV_REDUCE) {
        return coll_set_last_error(COLL_ERR_INTERNAL,
                                   "rank %d: a receive that reduces into "
                                   "device memory (step %u)",
                                   comm->rank, i);
    }
    memset(&to->op, 0, sizeof(to->op));
    to->op.dev  = req->dev;
    to->req     = req;
    to->step    = i;
    to->op.len  = st->len;
    to->op.tag  = req->tag_base | st->tag;
    to->op.done = task_op_done;
    to->op.arg  = to;
    if (st->kind == COLL_STEP_SEND) {
        to->op.buf = src;
        return ep->ops->isend(ep, &to->op);
    }
    to->op.buf = dst;
    if (st->kind == COLL_STEP_RECV_REDUCE) {
        to->op.operand = src;
        to->op.dtype   = s->dtype;
        to->op.op      = s->op;
    }
    return ep->ops->irecv(ep, &to->op);
}

static void task_fail(coll_task_t *req, uint32_t i, coll_result_t st)
{
    const coll_step_t *step = &req->entry->sched.steps[i];

    if (req->status == COLL_OK) {
        req->status    = st;
        req->fail_peer = coll_step_is_win(step->kind) ? req->ops[i].wait_peer : step->peer;
    }
}

/* Window steps that waited: run those whose flag or acknowledgement has come. */
static void task_win_poll(coll_task_t *req)
{
    uint32_t k = 0;

    while (k < req->nwinq && req->status == COLL_OK) {
        uint32_t      i  = req->winq[k];
        coll_result_t st = coll_win_step(req, i);

        if (st == COLL_INPROGRESS) {
            k++;
            continue;
        }
        req->winq[k] = req->winq[--req->nwinq];
        if (st < 0) {
            task_fail(req, i, st);
            return;
        }
        task_step_complete(req, i);
    }
}

void coll_task_progress(coll_task_t *req)
{
    if (atomic_load_explicit(&req->gate_closed, memory_order_acquire)) {
        return;
    }
    if (req->nwinq > 0 && req->status == COLL_OK) {
        task_win_poll(req);
    }
    while (req->status == COLL_OK && (req->nready > 0 || req->ndone > 0)) {
        while (req->ndone > 0) {
            task_step_complete(req, req->doneq[--req->ndone]);
        }
        if (req->nready > 0) {
            uint32_t      i  = req->ready[--req->nready];
            coll_result_t st = task_step_start(req, i);
            if (st < 0) {
                task_fail(req, i, st);
            }
        }
    }
    if (req->status == COLL_OK && req->ncomplete == req->nsteps) {
        req->finished = 1;
        coll_win_end(req);
    }
}

int coll_engine_waiting_peer(const coll_task_t *req)
{
    const coll_sched_t *s         = &req->entry->sched;
    int                 send_peer = -1;
    if (req->nwinq > 0 && req->ops != NULL) { /* a window flag or acknowledgement */
        return req->ops[req->winq[0]].wait_peer;
    }
    for (uint32_t i = 0; i < req->nsteps; i++) {
        const coll_step_t *st = &s->steps[i];
        if (!req->started[i] || req->ops == NULL) {
            continue;
        }
        int pending = (st->kind == COLL_STEP_RECV || st->kind == COLL_STEP_RECV_REDUCE ||
                       st->kind == COLL_STEP_SEND) &&
                      req->ops[i].op.bytes < st->len + (st->len == 0);
        if (!pending) {
            continue;
        }
        if (st->kind != COLL_STEP_SEND) {
            return st->peer;
        }
        if (send_peer < 0) {
            send_peer = st->peer;
        }
    }
    return send_peer;
}
