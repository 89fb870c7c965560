/* SPDX-License-Identifier: MIT */
/*
 * The direct path's internals shared by direct.c (the decision and the rounds) and direct_cma.c
 * (its transfers between unregistered buffers by cross-memory attach). Not installed.
 */
#ifndef COLL_ENGINE_DIRECT_H
#define COLL_ENGINE_DIRECT_H

#include "engine.h"

#include <stdint.h>

#define COLL_MAX_LOCAL_DIRECT 256 /* ranks; more take the engine */

/* What one rank published for a call taken by cross-memory attach. */
typedef struct coll_direct_peer {
    int32_t  pid;
    uint64_t in;         /* its sendbuf's address (in place too) */
    uint64_t out;        /* its output's address */
    uint64_t probe_addr; /* a word of its that holds probe_val during the call */
    uint64_t probe_val;
} coll_direct_peer_t;

/* The all-reduce's slice of rank r: [*lo, *hi) elements, 64-byte aligned boundaries. */
void coll_direct_slice(const coll_args_t *a, int n, int r, size_t *lo, size_t *hi);

/* direct_cma.c: may this call take cross-memory attach (COLL_DIRECT_CMA, COLL_DIRECT_CMA_MIN,
 * the communicator's verdict not "no")? Equal on every rank that makes the same call. */
int coll_direct_cma_wanted(const coll_comm_t *comm, const coll_args_t *a);
/* direct_thp.c: advise huge pages for the 2 MiB-aligned inside of a buffer of at least
 * COLL_DIRECT_THP_MIN bytes that cross-memory attach will move, and rebuild it from them
 * (COLL_DIRECT_THP). Advice only: a refusal is logged at INFO and that range not tried again. */
void coll_direct_thp_advise(const void *buf, size_t bytes);
/* The communicator's cache-resident blocks, made at the first call; NULL: out of memory. */
char *coll_direct_cma_tmp(coll_comm_t *comm);
/* Can this rank read and write every peer's probe word? 1 or 0 (logged at INFO). */
int coll_direct_cma_probe(coll_comm_t *comm, const coll_direct_peer_t *peers);
/* The transfers of each collective (coll_direct_cma_tmp made). A failed transfer is logged, kept
 * in comm->cma_fail and returned; the caller still joins the call's last round. */
coll_result_t coll_direct_cma_allreduce(coll_comm_t *comm, const coll_args_t *a,
                                        const coll_direct_peer_t *peers, const void *sendbuf,
                                        void *recvbuf);
coll_result_t coll_direct_cma_reduce_scatter(coll_comm_t *comm, const coll_args_t *a,
                                             const coll_direct_peer_t *peers, const void *sendbuf,
                                             void *recvbuf);
coll_result_t coll_direct_cma_allgather(coll_comm_t *comm, const coll_args_t *a,
                                        const coll_direct_peer_t *peers, const void *sendbuf,
                                        void *recvbuf);

#endif
