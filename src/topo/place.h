/* SPDX-License-Identifier: MIT */
/*
 * Placement: which GPU and NIC a rank uses and where they sit (host, package, NUMA node, PCIe
 * switch), and what follows from it: the NIC closest to each GPU, and the order in which a
 * ring visits the ranks so that it crosses each host and socket boundary as few times as
 * possible. Pure functions of the model and of per-rank records: no discovery, no I/O.
 */
#ifndef COLL_TOPO_PLACE_H
#define COLL_TOPO_PLACE_H

#include "topo/topo.h"

/* Where one rank runs; gathered from every rank, so plain data of fixed size. */
typedef struct coll_topo_place {
    uint64_t host;     /* host key (equal on one host) */
    int32_t  package;  /* package os index; -1: unknown */
    int32_t  numa;     /* NUMA node os index; -1: unknown */
    uint64_t pci_sw;   /* PCIe switch of the rank's GPU, else of its NIC (coll_topo_pci_switch) */
    uint64_t gpu;      /* bus id of the rank's GPU + 1; 0: no GPU */
    int32_t  nic;      /* index of the rank's NIC on its host; -1: none */
    int32_t  known;    /* 1: from the host's model; 0: only host is known */
    int32_t  nic_mbps; /* link speed of that NIC in Mb/s; 0: unknown or none */
    int32_t  reserved; /* 0: the record has no padding, every byte sent is set */
} coll_topo_place_t;

/* For every GPU g, the NIC closest to it in nic_p[g] (-1 without NICs) and the link in
 * link_p[g] (may be NULL): the best link first, then the NIC serving the fewest GPUs so far,
 * then the lower index, so GPUs that see several equally close NICs spread over them. */
void coll_topo_gpu_nics(const coll_topo_t *topo, int *nic_p, coll_topo_link_t *link_p);
/* The same among the NICs whose bit (1u << index) is set in among only. */
void coll_topo_gpu_nics_among(const coll_topo_t *topo, uint32_t among, int *nic_p,
                              coll_topo_link_t *link_p);

/* The placement (known) of a rank of host `host` using GPU gpu (-1: none, then the rank is placed
 * by NUMA node numa, a logical index, or -1 for none). */
void coll_topo_place_of(const coll_topo_t *topo, uint64_t host, int gpu, int numa,
                        coll_topo_place_t *place_p);

/* The order of a ring over n ranks: order_p[i] = the rank at position i. Hosts stay in order
 * of their lowest rank and each host's ranks are contiguous, so the ring enters and leaves each
 * host once; within a host the ranks go by package, NUMA node, PCIe switch and GPU, so they
 * cross each socket boundary once each way; every other host runs its order backwards, so
 * consecutive hosts meet at GPUs of the same position (the same NIC rail). When no place is
 * known (no rank could read its host's model) that is rank order within each host. */
void coll_topo_ring_order(const coll_topo_place_t *places, int n, int *order_p);

/* The same order with every host's ranks forwards: local rank i of each host is the i-th by
 * package, NUMA node, PCIe switch and GPU, so ranks with the same local rank on different hosts
 * sit at the same place (the hierarchical algorithms' rails: the same GPU, the same NIC). */
void coll_topo_local_order(const coll_topo_place_t *places, int n, int *order_p);

/* How many consecutive pairs of the ring (the last back to the first included) differ in
 * host, and within one host in package. */
void coll_topo_ring_crossings(const coll_topo_place_t *places, int n, const int *order,
                              int *hosts_p, int *packages_p);

#endif
