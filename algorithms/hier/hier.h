/* SPDX-License-Identifier: MIT */
/*
 * Hierarchical allreduce, reduce_scatter and allgather for communicators spanning hosts with
 * the same number of ranks on each: intra-host phases over shared memory and one inter-host
 * "rail" per local rank, each a sub-schedule of an existing algorithm (hier/compose.h).
 */
#ifndef COLL_HIER_H
#define COLL_HIER_H

#include "algo.h"

int           coll_hier_supported(int nranks, const coll_args_t *args);
double        coll_hier_cost(int nranks, const coll_args_t *args, const coll_model_t *m);
coll_result_t coll_hier_build(int rank, int nranks, const coll_args_t *args, coll_sched_t *s);

#endif
