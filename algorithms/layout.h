/* SPDX-License-Identifier: MIT */
/*
 * Where the ranks of a communicator live: which host each rank is on and its index there.
 * Built once per communicator from a per-rank host key; the hierarchical algorithms cut the
 * communicator along it, the cost model charges host-crossing messages to the inter-host link,
 * and the shared-window algorithms need every rank on one host. It also holds the order in
 * which the rings visit the ranks (src/api/tune.c derives it from the topology).
 */
#ifndef COLL_LAYOUT_H
#define COLL_LAYOUT_H

#include <stdint.h>
#include "coll.h"

typedef struct coll_layout {
    int    nranks;
    int    nhosts;
    int   *host_of;    /* by rank: host index; hosts are numbered in order of their lowest rank */
    int   *local_rank; /* by rank: position among the ranks of its host, in rank order */
    int   *host_start; /* by host, nhosts + 1 entries: its ranks are host_ranks[start[h]..[h+1]) */
    int   *host_ranks; /* ranks grouped by host, ascending within a host */
    int    local_size; /* ranks per host when every host has the same number, else 0 */
    int    contiguous; /* every host's ranks are consecutive (rank = host * local_size + local) */
    int    shared_window; /* one host, and the shm transport offers windows to every rank */
    size_t window_bytes;  /* with shared_window: bytes of each rank's window one call may use
                             (0 with a single rank, which needs none) */
    int *ring_order;      /* by ring position: the rank there (identity unless set) */
    int *ring_pos;        /* by rank: its ring position; ring_order[ring_pos[r]] == r */
} coll_layout_t;

/* host_key[r]: equal for ranks on one host. COLL_OK or COLL_ERR_NO_MEMORY. */
coll_result_t coll_layout_init(coll_layout_t *l, int nranks, const uint64_t *host_key);
/* A layout of nranks ranks in nhosts hosts of nranks / nhosts consecutive ranks (tests, collinfo).
 */
coll_result_t coll_layout_init_blocks(coll_layout_t *l, int nranks, int nhosts);
void          coll_layout_fini(coll_layout_t *l);
/* The rings visit the ranks in order[0..nranks): a permutation, else COLL_ERR_INVALID_ARG
 * and the order is left as it was. */
coll_result_t coll_layout_set_ring(coll_layout_t *l, const int *order);

/* The rank at position local on host h (or -1 if the host has fewer ranks). */
static inline int coll_layout_rank(const coll_layout_t *l, int h, int local)
{
    int n = l->host_start[h + 1] - l->host_start[h];
    return (local >= 0 && local < n) ? l->host_ranks[l->host_start[h] + local] : -1;
}

#endif
