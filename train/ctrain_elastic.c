/* SPDX-License-Identifier: MIT */
/*
 * ctrain_elastic.c -- the failure path of ctrain (see ctrain_elastic.h): which failures the
 * survivors go on from, and the shrink that lets them.
 */
#include "ctrain_elastic.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

sigjmp_buf ctrain_elastic_jmp;
int        ctrain_elastic_armed;

void ctrain_fail(coll_result_t st, const char *what)
{
    int recoverable = st == COLL_ERR_REMOTE || st == COLL_ERR_REVOKED || st == COLL_ERR_TIMEOUT ||
                      st == COLL_ERR_TRANSPORT || st == COLL_ERR_ABORTED;
    fprintf(stderr, "ctrain: %s failed: %s (%s)%s\n", what, coll_strerror(st), coll_last_error(),
            ctrain_elastic_armed && recoverable ? "; --elastic: shrinking to the survivors" : "");
    if (ctrain_elastic_armed && recoverable) {
        ctrain_elastic_armed = 0;
        siglongjmp(ctrain_elastic_jmp, 1);
    }
    exit(1);
}

int ctrain_elastic_shrink(coll_comm_t **world, coll_comm_t *keep, int *rank, int *nranks,
                          int failed_step)
{
    coll_comm_t  *old = *world, *nc = NULL;
    int           oldrank = *rank, oldn = *nranks, newrank = -1, newn = 0;
    coll_result_t st;

    coll_comm_revoke(old); /* the ranks still inside a collective stop too */
    st = coll_comm_shrink(old, &nc);
    if (st != COLL_OK) {
        fprintf(stderr, "ctrain: rank %d: elastic: cannot go on: %s (%s)\n", oldrank,
                coll_strerror(st), coll_comm_last_error(old));
        return -1;
    }
    if (old != keep) {
        coll_comm_destroy(old);
    }
    coll_comm_rank(nc, &newrank);
    coll_comm_size(nc, &newn);
    /* who is gone: the survivors' old ranks */
    int32_t *olds = calloc((size_t)newn, sizeof(int32_t)), mine = oldrank;
    if (olds == NULL || coll_allgather(&mine, olds, 1, COLL_INT32, nc) != COLL_OK) {
        fprintf(stderr, "ctrain: rank %d: elastic: the survivors' communicator failed at once\n",
                oldrank);
        free(olds);
        return -1;
    }
    if (newrank == 0) {
        char   lost[256] = "";
        size_t used      = 0;
        for (int r = 0, k = 0; r < oldn && used + 16 < sizeof(lost); r++) {
            if (k < newn && olds[k] == r) {
                k++;
            } else {
                used += (size_t)snprintf(lost + used, sizeof(lost) - used, "%s%d",
                                         used > 0 ? ", " : "", r);
            }
        }
        printf("ctrain: elastic: lost rank%s %s of %d at step %d; %d rank%s go on (old rank %d "
               "is now rank 0)\n",
               oldn - newn > 1 ? "s" : "", lost, oldn, failed_step + 1, newn, newn > 1 ? "s" : "",
               olds[0]);
        fflush(stdout);
    }
    free(olds);
    *world  = nc;
    *rank   = newrank;
    *nranks = newn;
    return 0;
}
