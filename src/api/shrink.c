/* SPDX-License-Identifier: MIT */
/*
 * Fault tolerance after a failure: coll_comm_revoke stops every rank's use of a communicator,
 * and coll_comm_shrink lets the survivors agree (through the bootstrap root, which saw every
 * death first-hand) on who is left and build a communicator of them, so that a job can go on
 * with fewer ranks instead of being torn down.
 */
#include "api/comm.h"
#include "bootstrap/bootstrap.h"
#include "engine/engine.h"
#include "error.h"
#include "log.h"
#include "util.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

COLL_API coll_result_t coll_comm_revoke(coll_comm_t *comm)
{
    char reason[64];
    COLL_CHECK(coll_comm_check_handle(comm, "coll_comm_revoke"));
    if (atomic_exchange(&comm->revoked, 1) != 0) {
        return COLL_OK;
    }
    snprintf(reason, sizeof(reason), "coll_comm_revoke called on rank %d", comm->rank);
    /* as coll_comm_abort: a waiter holding the lock records it at its next check */
    if (pthread_mutex_trylock(&comm->lock) == 0) {
        coll_comm_revoke_record(comm);
        pthread_mutex_unlock(&comm->lock);
    }
    if (comm->bs != NULL) {
        coll_bootstrap_revoke(comm->bs, reason);
    }
    coll_engine_wake(comm);
    return COLL_OK;
}

void coll_comm_revoke_record(coll_comm_t *comm)
{
    coll_comm_fail(comm, COLL_ERR_REVOKED, "rank %d: coll_comm_revoke called on rank %d",
                   comm->rank, comm->rank);
}

/* "1, 3" for the old ranks missing from survivors. */
static void shrink_missing(const int32_t *survivors, int n, int nranks, char *buf, size_t len)
{
    size_t used = 0;
    buf[0]      = '\0';
    for (int r = 0, k = 0; r < nranks && used + 16 < len; r++) {
        if (k < n && survivors[k] == r) {
            k++;
            continue;
        }
        used += (size_t)snprintf(buf + used, len - used, "%s%d", used > 0 ? ", " : "", r);
    }
}

COLL_API coll_result_t coll_comm_shrink(coll_comm_t *comm, coll_comm_t **newcomm_p)
{
    coll_unique_id_t id;
    int              n = 0, newrank = -1;
    char             missing[256];
    coll_result_t    st;

    COLL_CHECK(coll_comm_check_handle(comm, "coll_comm_shrink"));
    if (newcomm_p == NULL) {
        return coll_comm_arg_error(comm, COLL_ERR_INVALID_ARG,
                                   "coll_comm_shrink: newcomm_p is NULL");
    }
    *newcomm_p = NULL;
    if (comm->bs == NULL) {
        return coll_comm_arg_error(comm, COLL_ERR_INVALID_USAGE,
                                   "coll_comm_shrink: the communicator has no bootstrap");
    }
    int32_t *survivors = coll_calloc((size_t)comm->nranks, sizeof(int32_t), "shrink survivors");
    if (survivors == NULL) {
        return COLL_ERR_NO_MEMORY;
    }
    /* the root decides at most COLL_TIMEOUT after the first survivor asked */
    double deadline = coll_time_s() + 2 * comm->timeout_s + 5.0;
    st              = coll_bootstrap_shrink(comm->bs, deadline, survivors, &n, &id);
    if (st != COLL_OK) {
        goto out;
    }
    for (int i = 0; i < n; i++) {
        if (survivors[i] == comm->rank) {
            newrank = i;
        }
    }
    if (n == 0) {
        st = coll_set_last_error(COLL_ERR_REMOTE,
                                 "rank %d: the bootstrap root could not start the survivors' "
                                 "communicator",
                                 comm->rank);
        goto out;
    }
    if (newrank < 0) {
        st = coll_set_last_error(COLL_ERR_REMOTE,
                                 "rank %d: left out of the shrink: the survivors agreed without "
                                 "it (it asked after COLL_TIMEOUT)",
                                 comm->rank);
        goto out;
    }
    shrink_missing(survivors, n, comm->nranks, missing, sizeof(missing));
    coll_warn(COLL,
              "rank %d: shrink: %d of %d ranks continue (failed or left out: %s); this rank "
              "is now rank %d",
              comm->rank, n, comm->nranks, missing[0] ? missing : "none", newrank);
    /* the old communicator is done for: nothing more runs on it */
    if (comm->error == COLL_OK) {
        coll_comm_fail(comm, COLL_ERR_REVOKED, "rank %d: the communicator was shrunk", comm->rank);
    }
    coll_config_t cfg = COLL_CONFIG_INITIALIZER;
    cfg.timeout_s     = comm->timeout_s;
    st                = coll_comm_create(newcomm_p, n, &id, newrank, &cfg);
out:
    coll_free(survivors);
    if (st != COLL_OK) {
        snprintf(comm->last_error, sizeof(comm->last_error), "%s", coll_get_last_error());
    }
    return st;
}
