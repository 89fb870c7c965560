/* SPDX-License-Identifier: MIT */
/*
 * Small blocking all-reduces, all-gathers and reduce-scatters among ranks of one host, without a
 * schedule: every rank copies its input and the call's description into its own small-call slot
 * in shared memory, stores the slot's stamp, waits until every rank's slot holds this call, and
 * computes its output from all n slots: an all-reduce reduces them in rank order (so every rank
 * computes the same bits), an all-gather concatenates them, a reduce-scatter reduces block r of
 * each in rank order. Two slots per rank, used alternately, need no acknowledgement: a rank
 * that writes call k + 2 into the slot of call k has seen every rank's call k + 1, published
 * after that rank's last read of call k.
 *
 * Taken when the call is blocking, on host memory, its input (a reduce-scatter's whole input)
 * holds at most COLL_SMALL_MAX bytes (all-reduces) or COLL_SMALL_AGRS_MAX (all-gathers,
 * reduce-scatters), at most COLL_TP_SMALL_MAX either, every rank is on this host and
 * the shm windows are up (the same on every rank), and COLL_ALGO forces no algorithm for it.
 * Numbered with the other collectives (sequence and fingerprint as in the engine), recorded for
 * the arrival statistics, described by the diagnosis (pending dumps, timeouts, desyncs); a rank
 * that called another collective, count, dtype or op is reported at once. In-flight
 * non-blocking calls keep progressing while it waits.
 */
#include "engine.h"
#include "compiler.h"
#include "diag.h"
#include "error.h"
#include "log.h"
#include "param.h"
#include "reduce/reduce.h"
#include "util.h"

#include <sched.h>
#include <string.h>

#define SMALL_SLICE_S      0.02
#define SMALL_CLOCK_PASSES 32u
#define SMALL_TIGHT_S      50e-6 /* as wait.c: spin, then yield after each pass */
#define SMALL_TIGHT_PASSES 2048u /* before the first pause: a pause costs up to ~140 cycles */

int coll_small_slots(const coll_comm_t *comm)
{
    const coll_comm_tp_t *tp;
    if (comm->win_tp < 0 || comm->nranks < 2) {
        return 0;
    }
    tp = &comm->tp[comm->win_tp];
    return tp->ops->small_slot != NULL && tp->ops->small_poll != NULL &&
           tp->ops->small_publish != NULL;
}

int coll_small_call_free(coll_comm_t *comm, coll_args_t *a)
{
    a->layout = &comm->layout;
    /* COLL_ALGO forcing an algorithm on this call wins */
    return strcmp(comm->algo_override, "auto") == 0 ||
           !coll_algo_overridden(comm->nranks, a, comm->algo_override);
}

/* Bytes of a rank's slot payload: its input (0: not a collective of the slots). */
static size_t small_input_bytes(const coll_comm_t *comm, const coll_args_t *a)
{
    size_t bytes = a->count * coll_dtype_size(a->dtype);

    switch (a->coll) {
    case COLL_OP_ALLREDUCE:
    case COLL_OP_ALLGATHER:
        return bytes;
    case COLL_OP_REDUCE_SCATTER:
        return bytes * (size_t)comm->nranks;
    default:
        return 0;
    }
}

int coll_small_eligible(coll_comm_t *comm, coll_args_t *a)
{
    size_t bytes = small_input_bytes(comm, a);

    size_t max =
        coll_param_size(a->coll == COLL_OP_ALLREDUCE ? COLL_P_SMALL_MAX : COLL_P_SMALL_AGRS_MAX);

    return !a->device && bytes != 0 && bytes <= max && bytes <= COLL_TP_SMALL_MAX &&
           coll_small_slots(comm) && coll_small_call_free(comm, a);
}

/* The slot's op word: the operation, the collective and whether the slot holds the input, so
 * that an all-gather and an all-reduce of one count never pass for each other (the stamp's 8-bit
 * fingerprint alone could), nor one rank's input for another's description of the same call on
 * the direct path (ranks whose COLL_SMALL_MAX or COLL_SMALL_AGRS_MAX differ). */
static int32_t small_op_word(const coll_comm_t *comm, const coll_args_t *a)
{
    return (int32_t)((uint32_t)a->op | (uint32_t)a->coll << 8 | (uint32_t)comm->small_data << 16);
}

/* rank's slot holds this call: same collective, count, dtype and op, else fail the communicator
 * after the ranks' exchange of what they called (diag.c). */
static coll_result_t small_compare(coll_comm_t *comm, int rank, const coll_tp_small_t *s,
                                   const coll_args_t *a)
{
    uint64_t stamp = atomic_load_explicit(&s->stamp, memory_order_relaxed);
    if (s->count == a->count && s->dtype == (int32_t)a->dtype && s->op == small_op_word(comm, a) &&
        (uint8_t)stamp == coll_diag_fp8(a)) { /* the fingerprint tells the collective too */
        return COLL_OK;
    }
    comm->small_waiting = rank;
    coll_diag_small_mismatch(comm, rank);
    return comm->error;
}

/* Wait until every rank's slot `parity` holds call stamp; lock held. */
static coll_result_t small_wait(coll_comm_t *comm, const coll_comm_tp_t *tp, int parity,
                                uint64_t stamp, double *start_p)
{
    double        spin  = coll_param_time(COLL_P_SPIN_TIME);
    double        start = 0.0, next_check = 0.0, now = 0.0;
    unsigned      pass = 0;
    int           next = 0, arm = 0, polite = comm->oversubscribed;
    coll_result_t st;

    for (;;) {
        while (next < comm->nranks) {
            if (next == comm->rank) {
                next++;
                continue;
            }
            st = tp->ops->small_poll(tp->ctx, next, parity, stamp, arm);
            if (st == COLL_INPROGRESS) {
                break;
            }
            if (st < 0) {
                return coll_comm_fail(comm, st, "rank %d: %s op #%u: rank %d failed", comm->rank,
                                      coll_op_name(comm->small_args.coll), comm->small_seq, next);
            }
            next++;
        }
        if (next == comm->nranks) {
            return COLL_OK;
        }
        comm->small_waiting = next;
        if (comm->active != NULL) {
            coll_engine_progress(comm); /* non-blocking calls started earlier */
        }
        if (!polite && ++pass % SMALL_CLOCK_PASSES != 0) {
            if (pass > SMALL_TIGHT_PASSES) {
                coll_cpu_pause();
            }
            continue;
        }
        now = coll_time_s();
        if (start == 0.0) { /* the clock is read only once the first passes failed */
            start      = now;
            *start_p   = now;
            next_check = now + SMALL_SLICE_S;
        }
        polite |= now - start >= SMALL_TIGHT_S;
        if (now >= next_check || now - start >= spin) {
            comm->last_progress = start; /* the deadline counts from the wait */
            if (coll_engine_check(comm, NULL) != COLL_OK) {
                return comm->error;
            }
            next_check = now + SMALL_SLICE_S;
        }
        if (now - start >= spin) {
            if (!arm) { /* poll again, armed, before the first sleep */
                arm = 1;
                continue;
            }
            coll_engine_block(comm, SMALL_SLICE_S);
        } else if (polite) {
            sched_yield();
        }
    }
}

void coll_small_begin(coll_comm_t *comm, const coll_args_t *a)
{
    comm->small_seq    = comm->coll_seq++;
    comm->small_args   = *a;
    comm->small_active = 1;
    comm->small_data   = 0;
}

coll_result_t coll_small_round(coll_comm_t *comm, const coll_args_t *a, const void *payload,
                               size_t len, int *parity_p, double *t0_p)
{
    const coll_comm_tp_t *tp     = &comm->tp[comm->win_tp];
    int                   parity = (int)(comm->small_calls & 1);
    uint64_t              stamp  = ((comm->small_calls + 1) << 8) | coll_diag_fp8(a);
    coll_tp_small_t      *mine   = tp->ops->small_slot(tp->ctx, comm->rank, parity);
    double                t0     = 0.0;
    coll_result_t         st;

    comm->small_calls++;
    memcpy(mine->data, payload, len);
    mine->count = a->count;
    mine->dtype = (int32_t)a->dtype;
    mine->op    = small_op_word(comm, a);
    atomic_store_explicit(&mine->stamp, stamp, memory_order_release);
    tp->ops->small_publish(tp->ctx);
    st        = small_wait(comm, tp, parity, stamp, &t0);
    *parity_p = parity;
    if (t0 > 0.0 && *t0_p == 0.0) {
        *t0_p = t0;
    }
    return st;
}

const void *coll_small_payload(coll_comm_t *comm, int rank, int parity)
{
    const coll_comm_tp_t *tp = &comm->tp[comm->win_tp];
    return tp->ops->small_slot(tp->ctx, rank, parity)->data;
}

coll_result_t coll_small_check(coll_comm_t *comm, int parity, const coll_args_t *a)
{
    const coll_comm_tp_t *tp = &comm->tp[comm->win_tp];
    coll_result_t         st = COLL_OK;

    for (int r = 0; r < comm->nranks && st == COLL_OK; r++) {
        st = small_compare(comm, r, tp->ops->small_slot(tp->ctx, r, parity), a);
    }
    return st;
}

void coll_small_end(coll_comm_t *comm, const coll_args_t *a, double t0, coll_result_t st)
{
    if (st == COLL_OK) { /* arrival statistics: a rank that found every input there waited ~0 */
        if (t0 > 0.0) {
            comm->last_progress = coll_time_s();
        }
        coll_diag_record(comm, a->coll, comm->small_seq, t0 > 0.0 ? comm->last_progress - t0 : 0.0);
    }
    comm->small_active  = 0;
    comm->small_waiting = -1;
}

/* out[0, count) = x0 op x1 op ... in rank order, each xq count elements at byte offset off of
 * rank q's payload: the same bits on every rank. */
static void small_reduce(coll_comm_t *comm, const coll_args_t *a, int parity, size_t off, void *out)
{
    coll_redop_t op = (a->op == COLL_AVG) ? COLL_SUM : a->op;
    const char  *x0 = coll_small_payload(comm, 0, parity);
    const char  *x1 = coll_small_payload(comm, 1, parity);

    coll_reduce3(a->dtype, op, out, x0 + off, x1 + off, a->count);
    for (int r = 2; r < comm->nranks; r++) {
        const char *x = coll_small_payload(comm, r, parity);
        coll_reduce3(a->dtype, op, out, out, x + off, a->count);
    }
    if (a->op == COLL_AVG) {
        coll_reduce_div(a->dtype, out, a->count, comm->nranks);
    }
}

coll_result_t coll_small_run(coll_comm_t *comm, const coll_args_t *a, const void *sendbuf,
                             void *recvbuf)
{
    size_t        es     = coll_dtype_size(a->dtype);
    int           parity = 0;
    double        t0     = 0.0; /* when the wait began, if it was long enough to tell */
    coll_result_t st;

    /* sendbuf is the input in place too (an all-gather's own block of recvbuf, a reduce-scatter's
     * whole buffer), except an in-place all-reduce's, which is recvbuf */
    coll_small_begin(comm, a);
    comm->small_data = 1;
    st = coll_small_round(comm, a, a->coll == COLL_OP_ALLREDUCE && a->in_place ? recvbuf : sendbuf,
                          small_input_bytes(comm, a), &parity, &t0);
    if (st == COLL_OK) {
        st = coll_small_check(comm, parity, a);
    }
    if (st == COLL_OK && a->coll == COLL_OP_ALLGATHER) {
        for (int r = 0; r < comm->nranks; r++) { /* in place the own block is already there */
            if (r != comm->rank || !a->in_place) {
                memcpy((char *)recvbuf + (size_t)r * a->count * es,
                       coll_small_payload(comm, r, parity), a->count * es);
            }
        }
    } else if (st == COLL_OK) {
        size_t off = a->coll == COLL_OP_REDUCE_SCATTER ? (size_t)comm->rank * a->count * es : 0;
        small_reduce(comm, a, parity, off, recvbuf);
    }
    coll_small_end(comm, a, t0, st);
    return st;
}
