/* SPDX-License-Identifier: MIT */
/*
 * ctrain_elastic.h -- ctrain --elastic: when a collective fails because a rank died (or timed
 * out, or the communicator was revoked), the survivors do not exit: the failing call's check
 * jumps back to the start of the training attempt (ctrain_fail), which releases what the
 * attempt built; the survivors revoke the communicator, shrink it (coll_comm_shrink, which
 * works without old rank 0 too) and train on from the newest checkpoint, the data and the ZeRO
 * state re-sharded for the new number of ranks.
 */
#ifndef CTRAIN_ELASTIC_H
#define CTRAIN_ELASTIC_H

#include <coll.h>

#include <setjmp.h>

/* Where a failed collective goes back to under --elastic (set by the attempt, with sigsetjmp,
 * before it builds anything), and whether it is set. */
extern sigjmp_buf ctrain_elastic_jmp;
extern int        ctrain_elastic_armed;

/* A libcoll call failed: print it and exit(1), or, armed and for a failure the survivors can
 * go on from (a dead, stuck or revoking rank), jump back to the attempt. */
void ctrain_fail(coll_result_t st, const char *what) __attribute__((noreturn));

/* After a failed attempt: revoke *world, shrink it, destroy it unless it is keep (the
 * communicator of coll_init, which coll_finalize destroys), and tell which ranks were lost.
 * Returns 0 with *world, *rank, *nranks those of the survivors, or -1 after a message (this
 * rank was left out, or the shrink failed). */
int ctrain_elastic_shrink(coll_comm_t **world, coll_comm_t *keep, int *rank, int *nranks,
                          int failed_step);

#endif
