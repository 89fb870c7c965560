/* SPDX-License-Identifier: MIT */
/*
 * Polite waiting. A wait polls for COLL_SPIN_TIME, then sleeps inside the transports (futex
 * for shm, poll for tcp) in slices of at most 20 ms, checking between slices the bootstrap
 * control connection (another rank died or aborted), the abort flag, and the deadline: if no
 * step of the communicator completed for timeout_s, the wait fails naming the peer it waits on.
 * While it polls, a rank with a CPU to itself spins for WAIT_TIGHT_S (a pause per pass, the
 * clock read every WAIT_CLOCK_PASSES passes: a clock read costs as much as a pass), then yields
 * the CPU after each pass; a rank of a host with more ranks than CPUs yields from the start, so
 * that the peer it waits for can run.
 */
#include "engine.h"
#include "compiler.h"
#include "diag.h"
#include "error.h"
#include "log.h"
#include "param.h"
#include "util.h"

#include <sched.h>

#define WAIT_SLICE_S      0.02
#define WAIT_CLOCK_PASSES 32u
#define WAIT_TIGHT_S      50e-6 /* spinning without yields, where there is a CPU per rank */

/* Control plane and deadline checks; lock held. Returns the communicator's error if any. */
coll_result_t coll_engine_check(coll_comm_t *comm, coll_task_t *req)
{
    char msg[256];
    if (atomic_load(&comm->aborted)) {
        coll_comm_abort_record(comm); /* the aborting thread could not take the lock */
        return comm->error;
    }
    if (atomic_load(&comm->revoked)) {
        coll_comm_revoke_record(comm); /* likewise for the revoking thread */
    }
    if (comm->bs != NULL && comm->error == COLL_OK) {
        coll_result_t st = coll_bootstrap_poll(comm->bs, msg, sizeof(msg));
        if (st != COLL_OK) {
            coll_comm_fail(comm, st, "rank %d: %s", comm->rank, msg);
        }
    }
    coll_diag_poll_signal(comm);
    if (comm->error == COLL_OK && coll_time_s() - comm->last_progress > comm->timeout_s) {
        coll_diag_timeout(comm, req); /* names the peer waited on, and any desync */
    }
    return comm->error;
}

void coll_engine_block(coll_comm_t *comm, double slice)
{
    int nactive = 0;
    for (int t = 0; t < comm->ntp; t++) {
        nactive += comm->tp[t].ctx != NULL && comm->tp[t].ops->block != NULL;
    }
    for (int t = 0; t < comm->ntp; t++) {
        if (comm->tp[t].ctx != NULL && comm->tp[t].ops->block != NULL) {
            /* several transports: short alternating sleeps so neither starves */
            comm->tp[t].ops->block(comm->tp[t].ctx, nactive > 1 && slice > 0.0005 ? 0.0005 : slice);
        }
    }
    if (nactive == 0) {
        sched_yield();
    }
}

coll_result_t coll_engine_wait(coll_task_t *req)
{
    coll_comm_t  *comm       = req->comm;
    double        spin       = coll_param_time(COLL_P_SPIN_TIME);
    double        start      = coll_time_s();
    double        next_check = start + WAIT_SLICE_S;
    coll_result_t st;

    unsigned pass   = 0;
    int      polite = comm->oversubscribed; /* yield the CPU after each pass */

    pthread_mutex_lock(&comm->lock);
    for (;;) {
        coll_engine_progress(comm);
        if (req->finished || req->status < 0 || comm->error != COLL_OK) {
            break;
        }
        if (!polite && ++pass % WAIT_CLOCK_PASSES != 0) {
            coll_cpu_pause();
            continue;
        }
        double now = coll_time_s();
        polite |= now - start >= WAIT_TIGHT_S;
        if (now >= next_check || now - start >= spin) {
            if (coll_engine_check(comm, req) != COLL_OK) {
                break;
            }
            next_check = now + WAIT_SLICE_S;
        }
        if (now - start >= spin) {
            coll_engine_block(comm, WAIT_SLICE_S);
        } else if (polite) {
            sched_yield(); /* let the rank we wait for run */
        }
    }
    if (comm->error != COLL_OK) {
        coll_engine_fail_all(comm, comm->error);
    }
    st = coll_engine_reap(req);
    pthread_mutex_unlock(&comm->lock);
    return st;
}

int coll_engine_test(coll_task_t *req, coll_result_t *status_p)
{
    coll_comm_t *comm = req->comm;
    if (pthread_mutex_trylock(&comm->lock) != 0) {
        return 0; /* another thread is progressing this communicator */
    }
    coll_engine_progress(comm);
    if (!req->finished && req->status == COLL_OK && comm->error == COLL_OK) {
        coll_engine_check(comm, req);
    }
    if (!req->finished && req->status == COLL_OK && comm->error == COLL_OK) {
        pthread_mutex_unlock(&comm->lock);
        return 0;
    }
    if (comm->error != COLL_OK) {
        coll_engine_fail_all(comm, comm->error);
    }
    *status_p = coll_engine_reap(req);
    pthread_mutex_unlock(&comm->lock);
    return 1;
}

void coll_engine_wake(coll_comm_t *comm)
{
    for (int t = 0; t < comm->ntp; t++) {
        if (comm->tp[t].ctx != NULL && comm->tp[t].ops->wake != NULL) {
            comm->tp[t].ops->wake(comm->tp[t].ctx);
        }
    }
}
