/* SPDX-License-Identifier: MIT */
/*
 * Sends and receives on device memory, in flight together. The proxy serves collectives one at
 * a time, each to its end (they share the pinned staging); served that way, a send that goes by
 * rendezvous waits for its receive, which may sit behind the peer's own send in the peer's
 * proxy: isend then irecv on every rank of a ring hangs. So a send or receive does not hold the
 * proxy: it takes staging of its own at the call (a part of the pinned message staging, else
 * heap memory; devop.c), joins this list, and is started
 * here once the caller's stream reached it (its input copied to staging, its gate opened), in
 * call order; the proxy goes on with the next call meanwhile. They end as the engine is done
 * with them, in any order: a request's waiter goes on as soon as its own call ended, and the
 * callers' streams still see the calls end in call order (they wait on one counter of tickets,
 * which coll_devop_finish moves only past calls that all ended). The list is polled while the
 * proxy waits for anything else, also for a later call's stream, which may be waiting for them.
 * All of it runs on the proxy thread; the list is its own.
 */
#include "cuda/devop.h"
#include "error.h"
#include "log.h"
#include "param.h"
#include "util.h"
#include "api/comm.h"

#include <time.h>

#define MSG_BLOCK_S 0.0005 /* a sleep in the transports while every one is with the engine */

int coll_proxy_msg_is(const coll_devop_t *d)
{
    return d->p2p == NULL && !d->direct &&
           (d->args.coll == COLL_OP_SEND || d->args.coll == COLL_OP_RECV);
}

void coll_proxy_msg_add(coll_cuda_comm_t *cc, coll_devop_t *d)
{
    d->next      = NULL;
    d->msg_state = COLL_MSG_QUEUED;
    if (cc->msgs_tail != NULL) {
        cc->msgs_tail->next = d;
    } else {
        cc->msgs = d;
    }
    cc->msgs_tail = d;
    atomic_fetch_add(&cc->msgs_n, 1);
}

/* The caller's stream reached d: stage its input and open its gate. A failure fails the
 * communicator; the gate stays closed and progress reaps it with that error. */
static void msg_start(coll_cuda_comm_t *cc, coll_devop_t *d, cudaError_t ready)
{
    coll_comm_t  *comm = d->comm;
    coll_result_t st   = COLL_OK;

    /* failed meanwhile: no copy, the gate stays closed. Read without the lock, which a thread
     * waiting on the communicator holds for the whole wait (that wait may need this call). */
    coll_result_t failed = __atomic_load_n(&comm->error, __ATOMIC_ACQUIRE);
    if (ready == cudaSuccess && failed != COLL_OK) {
        st = failed;
    } else {
        st = coll_proxy_stage_in(cc, d, ready);
    }
    d->msg_status = st;
    d->msg_state  = COLL_MSG_STARTED;
}

/* The engine is done with d: its result to the device, then the call ends. */
static void msg_end(coll_cuda_comm_t *cc, coll_devop_t *d)
{
    coll_result_t st =
        coll_proxy_stage_out(cc, d, d->msg_status != COLL_OK ? d->msg_status : d->status);

    coll_devop_mpart_release(cc, d); /* copied out, or failed */
    if (st != COLL_OK) {
        coll_warn(COLL, "rank %d: %s on device memory failed: %s", d->comm->rank,
                  coll_op_name(d->args.coll), d->comm->last_error);
    }
    coll_devop_finish(d, st);
    coll_devop_put(d);
}

int coll_proxy_msg_poll(coll_cuda_comm_t *cc)
{
    int moved = 0;

    /* start in call order, as far as the callers' streams have come */
    for (coll_devop_t *d = cc->msgs; d != NULL; d = d->next) {
        if (d->msg_state != COLL_MSG_QUEUED) {
            continue;
        }
        cudaError_t e = cudaEventQuery(d->ready);
        if (e == cudaErrorNotReady) {
            break;
        }
        msg_start(cc, d, e);
        moved = 1;
    }
    /* end as the engine is done with them, in any order: a request's waiter goes on at once,
     * and the streams wait for the calls in order anyway (coll_devop_finish) */
    for (coll_devop_t *prev = NULL, *d = cc->msgs, *next; d != NULL; d = next) {
        next = d->next;
        if (d->msg_state != COLL_MSG_STARTED ||
            !atomic_load_explicit(&d->engine_done, memory_order_acquire)) {
            prev = d;
            continue;
        }
        if (prev != NULL) {
            prev->next = next;
        } else {
            cc->msgs = next;
        }
        if (cc->msgs_tail == d) {
            cc->msgs_tail = prev;
        }
        atomic_fetch_sub(&cc->msgs_n, 1);
        msg_end(cc, d);
        moved = 1;
    }
    /* the engine moves the started ones: progress, and the deadline and control checks */
    if (cc->msgs != NULL) {
        coll_comm_t *comm = cc->msgs->comm;
        if (pthread_mutex_trylock(&comm->lock) == 0) {
            coll_engine_progress(comm);
            double now = coll_time_s();
            /* only while the engine has one: waiting for a stream is not late */
            coll_task_t *late = NULL;
            for (coll_devop_t *d = cc->msgs; d != NULL && late == NULL; d = d->next) {
                late = d->msg_state == COLL_MSG_STARTED ? d->req : NULL;
            }
            if (now >= cc->msgs_next_check && late != NULL) {
                cc->msgs_next_check = now + COLL_PROXY_CHECK_S;
                coll_engine_check(comm, late);
                coll_engine_progress(comm); /* reaps them if the check failed the communicator */
            }
            pthread_mutex_unlock(&comm->lock);
        }
    }
    return moved;
}

void coll_proxy_msg_wait(coll_cuda_comm_t *cc, int until_call)
{
    double spin  = coll_param_time(COLL_P_SPIN_TIME);
    double start = coll_time_s();
    long   nap   = COLL_PROXY_NAP_MIN_NS;

    while (cc->msgs != NULL) {
        if (coll_proxy_msg_poll(cc)) {
            start = coll_time_s();
            nap   = COLL_PROXY_NAP_MIN_NS;
        }
        if (until_call) {
            pthread_mutex_lock(&cc->qlock);
            int call = cc->head != NULL || cc->stop;
            pthread_mutex_unlock(&cc->qlock);
            if (call) {
                return;
            }
        }
        if (cc->msgs == NULL) {
            return;
        }
        coll_comm_t *comm = cc->msgs->comm;
        if (coll_time_s() - start < spin) {
            coll_proxy_pause(comm);
            continue;
        }
        int queued = 0; /* one still waits for its stream: only the CUDA event tells */
        for (coll_devop_t *d = cc->msgs; d != NULL && !queued; d = d->next) {
            queued = d->msg_state == COLL_MSG_QUEUED;
        }
        if (!queued && pthread_mutex_trylock(&comm->lock) == 0) {
            /* all with the engine: sleep in the transports, which wake on arrivals and on a
             * new call for the proxy (coll_cuda_proxy_push) */
            coll_engine_block(comm, MSG_BLOCK_S);
            pthread_mutex_unlock(&comm->lock);
            /* let a thread blocked on the lock (the application's next call) have it first */
            struct timespec ts = {0, COLL_PROXY_NAP_MIN_NS};
            nanosleep(&ts, NULL);
        } else {
            coll_proxy_nap(cc, nap); /* a new call for the proxy ends it */
            nap = nap * 2 > COLL_PROXY_NAP_MAX_NS ? COLL_PROXY_NAP_MAX_NS : nap * 2;
        }
    }
}
