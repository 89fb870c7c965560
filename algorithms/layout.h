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
    int  nranks;
    int  nhosts;
    int *host_of;    /* by rank: host index; hosts are numbered in order of their lowest rank */
    int *local_rank; /* by rank: position among the ranks of its host, in rank order */
    int *host_start; /* by host, nhosts + 1 entries: its ranks are host_ranks[start[h]..[h+1]) */
    int *host_ranks; /* ranks grouped by host, within a host in rank order unless
                        coll_layout_set_local set another */
    int local_size;  /* ranks per host when every host has the same number, else 0 */
    int contiguous;  /* every host's ranks are consecutive and in order
                        (rank = host * local_size + local) */
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
/* Each host's ranks relisted in the order they appear in order[0..nranks) (a permutation, else
 * COLL_ERR_INVALID_ARG and nothing changes): local ranks, host_ranks and contiguous follow. With
 * a topology order (coll_topo_local_order) local rank i of every host sits at the same place,
 * so the hierarchical algorithms' rails join like GPUs and NICs, and their intra-host phases
 * meet the ranks socket by socket. */
coll_result_t coll_layout_set_local(coll_layout_t *l, const int *order);

/* The layout's topology order over nranks ranks (l->ring_order: hosts, then sockets, NUMA nodes
 * and PCIe switches kept together), or NULL for rank order (no layout, or one of another size).
 * The rings walk it, the trees are built over it and each host's ranks are listed in it. */
static inline const int *coll_layout_order(const coll_layout_t *l, int nranks)
{
    return (l != NULL && l->nranks == nranks && l->ring_order != NULL) ? l->ring_order : NULL;
}

/* The rank at position local on host h (or -1 if the host has fewer ranks). */
static inline int coll_layout_rank(const coll_layout_t *l, int h, int local)
{
    int n = l->host_start[h + 1] - l->host_start[h];
    return (local >= 0 && local < n) ? l->host_ranks[l->host_start[h] + local] : -1;
}

#endif
