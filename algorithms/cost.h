/* SPDX-License-Identifier: MIT */
/*
 * Predicted times of the built-in algorithms under a coll_model_t, and the helpers they share:
 * which link a message between two ranks uses, and whether a round of pairwise exchanges at a
 * given distance crosses hosts. Pure functions; the registry points at them.
 */
#ifndef COLL_COST_H
#define COLL_COST_H

#include "algo.h"

double coll_cost_bytes(const coll_args_t *args);
/* The link between ranks a and b. */
const coll_link_model_t *coll_cost_link(const coll_args_t *args, const coll_model_t *m, int a,
                                        int b);
/* The slowest link a ring or tree over every rank uses: inter-host once the ranks span hosts. */
const coll_link_model_t *coll_cost_flat_link(const coll_args_t *args, const coll_model_t *m);
/* The link of a round in which rank r talks to r ^ dist, for r < p: inter-host if any pair
 * crosses hosts, its bandwidth shared by the busiest host's crossing streams. */
coll_link_model_t coll_cost_xor_link(const coll_args_t *args, const coll_model_t *m, int p,
                                     int dist);

double coll_cost_ring(int nranks, const coll_args_t *args, const coll_model_t *m);
double coll_cost_rd(int nranks, const coll_args_t *args, const coll_model_t *m);
double coll_cost_rab(int nranks, const coll_args_t *args, const coll_model_t *m);
double coll_cost_dbtree(int nranks, const coll_args_t *args, const coll_model_t *m);
double coll_cost_tree(int nranks, const coll_args_t *args, const coll_model_t *m);
double coll_cost_rh(int nranks, const coll_args_t *args, const coll_model_t *m);
double coll_cost_bruck(int nranks, const coll_args_t *args, const coll_model_t *m);
double coll_cost_pairwise(int nranks, const coll_args_t *args, const coll_model_t *m);
double coll_cost_dissemination(int nranks, const coll_args_t *args, const coll_model_t *m);
double coll_cost_direct(int nranks, const coll_args_t *args, const coll_model_t *m);
double coll_cost_oneshot(int nranks, const coll_args_t *args, const coll_model_t *m);
double coll_cost_twoshot(int nranks, const coll_args_t *args, const coll_model_t *m);

#endif
