/* SPDX-License-Identifier: MIT */
/*
 * Shared-window steps in the engine: epochs, PUT / GET / GET_REDUCE on the windows of the
 * transport that offers them, and the reuse rule. Calls that use windows get consecutive
 * epochs (the same numbers on every rank, since every rank starts the same calls in the same
 * order); epoch e uses half e % 2 of every window. A rank writes its half for epoch e only
 * after every rank acknowledged epoch e - 2, and acknowledges an epoch when its call and every
 * earlier one finished here (all its reads are done). Waiting never blocks: a step that cannot
 * run yet stays queued in its request and is polled on every progress pass (task.c).
 */
#include "engine.h"
#include "diag.h"
#include "cuda/cuda.h"
#include "error.h"
#include "log.h"
#include "reduce/reduce.h"

#include <inttypes.h>
#include <string.h>

_Static_assert(COLL_SCHED_WIN_SLOTS <= COLL_TP_WIN_SLOTS, "schedules name more window slots");

/* Out-of-order completions tracked beyond the acknowledged epoch (comm->win_done bits). */
#define WIN_DONE_BITS 64

coll_result_t coll_win_start(coll_task_t *req)
{
    coll_comm_t        *comm = req->comm;
    const coll_sched_t *s    = &req->entry->sched;

    if (s->nwin == 0) {
        return COLL_OK;
    }
    if (comm->win_tp < 0 || s->win_bytes > req->args.layout->window_bytes) {
        coll_error(COLL, "%s schedule needs %" PRIu64 " window bytes, the communicator has %zu",
                   req->entry->algo->name, s->win_bytes,
                   comm->win_tp < 0 ? (size_t)0 : req->args.layout->window_bytes);
        return COLL_ERR_INTERNAL;
    }
    req->win_epoch = ++comm->win_epoch;
    return COLL_OK;
}

/* May this rank write its half for the request's epoch? Caches what every rank acknowledged. */
static coll_result_t win_may_write(coll_task_t *req, const coll_comm_tp_t *tp, int *peer_p)
{
    coll_comm_t  *comm = req->comm;
    uint64_t      need = (req->win_epoch > 2) ? req->win_epoch - 2 : 0;
    coll_result_t st;

    if (need <= comm->win_all_acked) {
        return COLL_OK;
    }
    st = tp->ops->win_acked(tp->ctx, need, peer_p);
    if (st == COLL_OK) {
        comm->win_all_acked = need;
    }
    return st;
}

/* The flag value of the call: its epoch and fingerprint (a desync never reads another call's
 * data; see diag.h). */
static uint64_t win_stamp(const coll_task_t *req)
{
    return (req->win_epoch << 8) | coll_diag_fp8(&req->args);
}

coll_result_t coll_win_step(coll_task_t *req, uint32_t i)
{
    coll_comm_t          *comm   = req->comm;
    const coll_comm_tp_t *tp     = &comm->tp[comm->win_tp];
    const coll_sched_t   *s      = &req->entry->sched;
    const coll_step_t    *st     = &s->steps[i];
    int                   parity = (int)(req->win_epoch & 1);
    coll_result_t         r;
    char                 *win;

    if (st->kind == COLL_STEP_PUT) {
        req->ops[i].wait_peer = comm->rank;
        r                     = win_may_write(req, tp, &req->ops[i].wait_peer);
        if (r != COLL_OK) {
            return r;
        }
        if (req->args.device) {
            win = coll_cuda_win_ptr(comm, comm->rank, parity);
            r   = st->len > 0
                      ? coll_cuda_dev_copy(comm, win + st->win_off,
                                           (char *)req->bufs[st->src_buf] + st->src_off, st->len)
                      : COLL_OK;
            if (r != COLL_OK) {
                return r;
            }
        } else {
            win = tp->ops->win_ptr(tp->ctx, comm->rank, parity);
            if (st->len > 0) {
                memcpy(win + st->win_off, (char *)req->bufs[st->src_buf] + st->src_off, st->len);
            }
        }
        tp->ops->win_publish(tp->ctx, parity, st->tag, win_stamp(req));
        return COLL_OK;
    }
    req->ops[i].wait_peer = st->peer;
    r                     = tp->ops->win_poll(tp->ctx, st->peer, parity, st->tag, win_stamp(req));
    if (r != COLL_OK) {
        return r;
    }
    if (st->len == 0) {
        return COLL_OK;
    }
    if (req->args.device) {
        char *dst = (char *)req->bufs[st->dst_buf] + st->dst_off;
        win       = (char *)coll_cuda_win_ptr(comm, st->peer, parity) + st->win_off;
        if (st->kind == COLL_STEP_GET) {
            return coll_cuda_dev_copy(comm, dst, win, st->len);
        }
        return coll_cuda_dev_reduce(comm, s->dtype, s->op, dst,
                                    (char *)req->bufs[st->src_buf] + st->src_off, win,
                                    st->len / coll_dtype_size(s->dtype));
    }
    win = (char *)tp->ops->win_ptr(tp->ctx, st->peer, parity) + st->win_off;
    if (st->kind == COLL_STEP_GET) {
        memcpy((char *)req->bufs[st->dst_buf] + st->dst_off, win, st->len);
    } else {
        coll_reduce3(s->dtype, s->op, (char *)req->bufs[st->dst_buf] + st->dst_off,
                     (char *)req->bufs[st->src_buf] + st->src_off, win,
                     st->len / coll_dtype_size(s->dtype));
    }
    return COLL_OK;
}

void coll_win_end(coll_task_t *req)
{
    coll_comm_t          *comm = req->comm;
    const coll_comm_tp_t *tp;
    uint64_t              k;
    int                   moved = 0;

    if (req->win_epoch == 0 || req->win_ended) {
        return;
    }
    req->win_ended = 1;
    k              = req->win_epoch - comm->win_acked - 1;
    if (req->win_epoch <= comm->win_acked || k >= WIN_DONE_BITS) {
        /* a call cannot finish before its PUTs waited for epoch e - 2 here */
        coll_comm_fail(comm, COLL_ERR_INTERNAL,
                       "rank %d: window epoch %" PRIu64
                       " finished out of order (acknowledged %" PRIu64 ")",
                       comm->rank, req->win_epoch, comm->win_acked);
        return;
    }
    comm->win_done |= 1ull << k;
    while ((comm->win_done & 1) != 0) {
        comm->win_done >>= 1;
        comm->win_acked++;
        moved = 1;
    }
    if (moved) {
        tp = &comm->tp[comm->win_tp];
        tp->ops->win_ack(tp->ctx, comm->win_acked);
    }
}
