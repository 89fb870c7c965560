/* SPDX-License-Identifier: MIT */
/*
 * The p2p path: collectives on device memory among ranks of one host, with no copy through host
 * memory. Every rank has a device window of two halves of COLL_CUDA_WINDOW_SIZE bytes, mapped
 * by every other rank through CUDA IPC once, when the communicator's first such call is made
 * (ipc.c). A call runs in rounds of at most a window's worth; in each, every rank copies its
 * input into its own window (copy engine), and after an exchange the ranks read each other's
 * windows into their outputs (copy engine) or through the reduction kernels:
 *
 *   all-reduce      rank r reduces slice r of the round from every window, in rank order, into
 *                   the second half of its window and its output; after an exchange every rank
 *                   copies the other slices from their owners' second halves. Each slice is
 *                   computed once, so every rank holds bit-identical results.
 *   reduce-scatter  rank r reduces block r of every window into its output.
 *   all-gather      rank r copies every window into block q of its output.
 *   broadcast       the root copies its input into its window, every rank copies it out.
 *   reduce          the root reduces every window into its output.
 *   all-to-all      rank r copies block r of every window into block q of its output.
 *
 * Why windows and not the callers' buffers: mapping a caller's buffer by CUDA IPC at the call
 * (cudaIpcOpenMemHandle / cudaIpcCloseMemHandle on the proxy thread) hung on an H200 when the
 * caller's stream was waiting for the call, and keeping such mappings across calls hung the
 * first program that freed its buffer (CUDA leaves freeing an allocation that another process
 * maps undefined). The windows are mapped once, at the communicator's first call on device
 * memory, before any of its calls can make a stream wait, each freed only once every rank closed
 * its mappings (coll_cuda_comm_free), and the callers' buffers are never exported: they may be
 * freed, pool or managed memory, anything cudaMemcpy reaches. The price is one device copy of each
 * input, at device-copy bandwidth.
 *
 * The plan (rounds, phases, what each moves) is p2p_plan.c's; this file runs it on the device.
 *
 * Order and agreement: a call takes all its exchanges (gated engine all-gathers of a small
 * card) at the call, numbered like any other call, so device and host calls mix freely. The
 * proxy opens the first once the caller's stream reached the call, so its end means every
 * rank's inputs are ready and its outputs free; it runs the phase before each exchange to its
 * end (the stream synchronised) before opening that exchange. The cards carry each rank's
 * status and the call's fingerprint (with the window size): a rank that failed, or called
 * something else, is seen by every rank at the same exchange, and every rank fails the
 * communicator there with the same error code, naming that rank; the remaining exchanges are
 * reaped with it. Timeouts and dead peers are the engine's.
 */
#include "cuda/p2p.h"
#include "api/tune.h"
#include "cuda/kernels.h"
#include "cuda/p2p_topo.h"
#include "topo/local.h"
#include "error.h"
#include "log.h"
#include "param.h"
#include "util.h"

#include <string.h>

int coll_p2p_possible(const coll_comm_t *comm)
{
    const coll_topo_t *topo = NULL;

    if (!coll_param_bool(COLL_P_CUDA_P2P) || comm->layout.nhosts != 1 || comm->nranks < 2 ||
        comm->nranks > COLL_P2P_MAX_RANKS || comm->nranks > COLL_CUDA_MAX_SRCS) {
        return 0;
    }
    /* the same model and places on every rank: the same answer */
    return coll_topo_host(&topo) != COLL_OK || comm->places == NULL ||
           coll_p2p_topo_allows(topo, comm->places, comm->nranks,
                                coll_param_enum(COLL_P_CUDA_P2P_LEVEL));
}

void coll_p2p_log_links(const coll_comm_t *comm)
{
    const coll_topo_t *topo = NULL;
    coll_topo_link_t   w;
    int                a, b;

    if (coll_topo_host(&topo) != COLL_OK || comm->places == NULL ||
        !coll_p2p_worst_link(topo, comm->places, comm->nranks, &w, &a, &b)) {
        coll_info(COLL,
                  "rank %d: p2p: the host's model does not hold every rank's GPU; the CUDA "
                  "IPC mapping of the windows decides",
                  comm->rank);
    } else if (w == COLL_TOPO_LINK_X) {
        coll_info(COLL, "rank %d: p2p: every rank on one GPU", comm->rank);
    } else {
        coll_info(COLL, "rank %d: p2p: GPUs linked by %s at worst (ranks %d and %d)", comm->rank,
                  coll_topo_link_name(w), a, b);
    }
}

int coll_p2p_wanted(const coll_comm_t *comm, const coll_devop_t *d)
{
    coll_op_t c   = d->args.coll;
    size_t    big = d->send_bytes > d->recv_bytes ? d->send_bytes : d->recv_bytes;

    if (comm->cuda == NULL || !comm->cuda->p2p_possible || c == COLL_OP_SEND || c == COLL_OP_RECV ||
        c == COLL_OP_BARRIER || d->args.count == 0 || big < comm->cuda->p2p_min) {
        return 0;
    }
    return (d->send_bytes == 0 || d->send_dev) && (d->recv_bytes == 0 || d->recv_dev) &&
           (d->send_dev || d->recv_dev);
}

void coll_p2p_op_free(coll_p2p_op_t *op)
{
    if (op != NULL) {
        coll_free(op->x);
        coll_free(op->mine);
        coll_free(op->cards);
        coll_free(op);
    }
}

static void p2p_done(void *arg, coll_result_t st)
{
    coll_p2p_req_t *x = arg;
    x->status         = st;
    x->req            = NULL;
    atomic_store_explicit(&x->done, 1, memory_order_release);
}

static uint64_t p2p_print(const coll_args_t *a, size_t half)
{
    uint64_t v[5] = {(uint64_t)a->count, (uint64_t)a->dtype, (uint64_t)a->op,
                     (uint64_t)(int64_t)a->root, (uint64_t)half};
    return coll_hash_bytes(v, sizeof(v), 0);
}

coll_result_t coll_p2p_prepare(coll_comm_t *comm, coll_cuda_comm_t *cc, coll_devop_t *d)
{
    const coll_args_t *a  = &d->args;
    int                n  = comm->nranks;
    coll_p2p_op_t     *op = coll_calloc(1, sizeof(*op), "p2p call");
    coll_args_t        x;
    coll_result_t      st;

    if (op == NULL) {
        return COLL_ERR_NO_MEMORY;
    }
    coll_p2p_plan(&op->plan, a, n, comm->rank, cc->win_bytes);
    int nx    = op->plan.nx;
    op->x     = coll_calloc((size_t)nx, sizeof(*op->x), "p2p exchanges");
    op->mine  = coll_calloc((size_t)nx, sizeof(*op->mine), "p2p cards");
    op->cards = coll_calloc((size_t)nx * (size_t)n, sizeof(*op->cards), "p2p cards");
    if (nx == 0 || op->x == NULL || op->mine == NULL || op->cards == NULL) {
        coll_p2p_op_free(op);
        return nx == 0 ? coll_set_last_error(COLL_ERR_INTERNAL, "p2p call of nothing")
                       : COLL_ERR_NO_MEMORY;
    }
    d->p2p = op;
    if ((cc->p2p_logged & (1u << a->coll)) == 0) {
        cc->p2p_logged |= 1u << a->coll;
        coll_info(COLL,
                  "rank %d: %s of %zu bytes (%s) on device memory: p2p, CUDA IPC windows (%d "
                  "rounds)",
                  comm->rank, coll_op_name(a->coll), a->count * coll_dtype_size(a->dtype),
                  coll_dtype_name(a->dtype), op->plan.rounds);
    }

    memset(&x, 0, sizeof(x));
    x.coll         = COLL_OP_ALLGATHER;
    x.count        = sizeof(coll_p2p_card_t);
    x.dtype        = COLL_UINT8;
    x.op           = COLL_SUM;
    x.root         = -1;
    x.chunk_bytes  = coll_tune_chunk_bytes();
    uint64_t print = p2p_print(a, cc->win_bytes);
    for (int k = 0; k < nx; k++) {
        op->x[k].d        = d;
        op->mine[k].coll  = (int32_t)a->coll;
        op->mine[k].print = print;
        st = coll_engine_start_gated(comm, &x, &op->mine[k], &op->cards[(size_t)k * (size_t)n],
                                     p2p_done, &op->x[k], &op->x[k].req);
        op->x[k].gate = op->x[k].req;
        if (st != COLL_OK && k == 0) {
            d->p2p = NULL;
            coll_p2p_op_free(op);
            return st; /* nothing numbered: the call never started */
        }
        if (st != COLL_OK) {
            /* some are numbered: the communicator cannot go on alike. The call still goes to
             * the proxy, which finds the communicator failed and ends it with that error. */
            for (int j = k; j < nx; j++) {
                op->x[j].status = st;
                atomic_store(&op->x[j].done, 1);
            }
            coll_comm_fail(comm, st, "rank %d: %s on device memory: %s", comm->rank,
                           coll_op_name(a->coll), coll_last_error());
            break;
        }
    }
    d->req = op->x[0].gate; /* started */
    return COLL_OK;
}

/* ---- the plan's data movers on the device: the proxy's exec stream ---- */

static int p2p_io_copy(void *ctx, void *dst, const void *src, size_t len)
{
    return (int)cudaMemcpyAsync(dst, src, len, cudaMemcpyDefault, (cudaStream_t)ctx);
}

static int p2p_io_reduce(void *ctx, coll_dtype_t dt, coll_redop_t op, void *dst,
                         const void *const *srcs, int nsrc, size_t cnt)
{
    return coll_cuda_reduce_n(dt, op, dst, srcs, nsrc, cnt, ctx);
}

static int p2p_io_div(void *ctx, coll_dtype_t dt, void *buf, size_t cnt, int divisor)
{
    return coll_cuda_div(dt, buf, cnt, divisor, ctx);
}

coll_result_t coll_p2p_phase(coll_comm_t *comm, coll_cuda_comm_t *cc, coll_devop_t *d, int k)
{
    coll_p2p_op_t      *op   = d->p2p;
    const char         *what = "";
    const coll_p2p_io_t io   = {
          .ctx = cc->exec, .copy = p2p_io_copy, .reduce = p2p_io_reduce, .div = p2p_io_div};
    (void)comm;

    int r = coll_p2p_plan_phase(&op->plan, k, d->usend, d->urecv, cc->win, &io, &what);
    if (r != 0) {
        cudaGetLastError();
    }
    /* to its end, also after a failed launch: the exchange after it says the data is there */
    cudaError_t e = cudaStreamSynchronize(cc->exec);
    if (r == 0 && e != cudaSuccess) {
        cudaGetLastError();
        what = "waiting for the copies and kernels";
        r    = (int)e;
    }
    if (r == 0) {
        return COLL_OK;
    }
    snprintf(op->why, sizeof(op->why), "phase %d of %d (%s): %s", k, op->plan.nx, what,
             r > 0 ? cudaGetErrorString((cudaError_t)r) : "internal error");
    return COLL_ERR_CUDA;
}
