/* SPDX-License-Identifier: MIT */
/*
 * Which GPUs the p2p path joins (p2p_topo.c): the worst link between the GPUs of a
 * communicator's ranks in the host's model, against COLL_CUDA_P2P_LEVEL, as NCCL's
 * NCCL_P2P_LEVEL does. Ranks on one GPU always qualify; NVLink (NV) is the closest link
 * between two GPUs, then one PCIe switch (PIX), several (PXB), the host bridge (PHB), two host
 * bridges of one package (NODE) and the link between packages (SYS). Plain C over the model,
 * so that the fixtures of tests/topologies can test it without GPUs.
 */
#ifndef COLL_CUDA_P2P_TOPO_H
#define COLL_CUDA_P2P_TOPO_H

#include "topo/place.h"
#include "topo/topo.h"

/* The worst link between the GPUs of places[0..n) (place.gpu: bus id + 1) in topo, and a pair
 * of ranks with it (*ra_p < *rb_p; both 0 when every rank shares one GPU). 1 when the model
 * holds every rank's GPU; 0 when not (a rank without a GPU, or a GPU the model lacks). */
int coll_p2p_worst_link(const coll_topo_t *topo, const coll_topo_place_t *places, int n,
                        coll_topo_link_t *worst_p, int *ra_p, int *rb_p);

/* May the p2p path join these ranks at the given level (a COLL_CUDA_P2P_LEVEL choice: 0 NV,
 * 1 PIX, 2 PXB, 3 PHB, 4 NODE, 5 SYS)? Ranks whose GPUs the model does not hold may: then the
 * CUDA IPC mapping of the windows decides. */
int coll_p2p_topo_allows(const coll_topo_t *topo, const coll_topo_place_t *places, int n,
                         int level);

#endif
