/* SPDX-License-Identifier: MIT */
/*
 * Public diagnosis calls: the pending-operation text (coll_comm_dump_pending) and the arrival
 * summary (coll_comm_stats). The work is in src/engine/diag.c and stats.c; this file checks
 * arguments and takes the communicator's lock.
 */
#include "api/comm.h"
#include "engine/diag.h"
#include "error.h"
#include "util.h"

#include <string.h>

COLL_API coll_result_t coll_comm_dump_pending(coll_comm_t *comm, char *buf, size_t len)
{
    COLL_CHECK(coll_comm_check_handle(comm, "coll_comm_dump_pending"));
    if (buf == NULL || len == 0) {
        return coll_comm_arg_error(comm, COLL_ERR_INVALID_ARG,
                                   "coll_comm_dump_pending: buf is NULL or len is 0");
    }
    pthread_mutex_lock(&comm->lock);
    size_t need = coll_diag_pending(comm, buf, len);
    pthread_mutex_unlock(&comm->lock);
    if (need >= len) { /* cut at the last whole line that fits */
        char *nl                                     = strrchr(buf, '\n');
        buf[nl != NULL ? (size_t)(nl - buf) + 1 : 0] = '\0';
    }
    return COLL_OK;
}

COLL_API coll_result_t coll_comm_stats(coll_comm_t *comm, char *buf, size_t len)
{
    COLL_CHECK(coll_comm_check_handle(comm, "coll_comm_stats"));
    if (buf == NULL || len == 0) {
        return coll_comm_arg_error(comm, COLL_ERR_INVALID_ARG,
                                   "coll_comm_stats: buf is NULL or len is 0");
    }
    size_t        bytes = coll_diag_stats_bytes();
    double       *mine  = coll_malloc(bytes, "arrival record");
    double       *all   = coll_malloc(bytes * (size_t)comm->nranks, "arrival record");
    coll_result_t st    = COLL_ERR_NO_MEMORY;
    if (mine != NULL && all != NULL) {
        pthread_mutex_lock(&comm->lock);
        coll_diag_stats_pack(comm, mine);
        pthread_mutex_unlock(&comm->lock);
        st = coll_allgather(mine, all, bytes / sizeof(double), COLL_FLOAT64, comm);
        if (st == COLL_OK) {
            coll_diag_stats_summary(all, comm->nranks, buf, len);
        }
    }
    coll_free(mine);
    coll_free(all);
    return st;
}
