/* SPDX-License-Identifier: MIT */
/*
 * The network side of a rank's place: which of the host's NICs its TCP traffic should use (the
 * one nearest its GPU, else its NUMA node or package, among those with an IPv4 address that
 * are up), and what bandwidth between hosts the NICs of every host's ranks add up to. Both
 * choices are pure functions of the model, the gathered places and a list of interfaces, so
 * tests run them on the fixtures; only coll_topo_netifs reads the system.
 */
#ifndef COLL_TOPO_NIC_H
#define COLL_TOPO_NIC_H

#include "topo/place.h"

/* Share of a NIC's link speed that TCP payload gets: Ethernet, IP and TCP headers take about
 * 5% at a 1500-byte MTU, and the stack's copies some more. */
#define COLL_TOPO_NIC_EFFICIENCY 0.9

#define COLL_TOPO_NETIF_MAX 64 /* interfaces coll_topo_netifs lists */

/* A network interface as the system lists it. */
typedef struct coll_topo_netif {
    char name[32]; /* "eth1" */
    char addr[16]; /* its first IPv4 address, dotted; "": none */
    int  up;       /* administratively up and running (carrier) */
} coll_topo_netif_t;

/* The NIC chosen for a rank. */
typedef struct coll_topo_nic_pick {
    int              nic;     /* index in topo->nic; -1: no choice, keep the default rule */
    int              netif;   /* index in the interface list of its interface; -1: none */
    int              gpu;     /* the GPU (logical index) it is near; -1: chosen by CPU side */
    coll_topo_link_t link;    /* GPU to NIC when gpu >= 0 */
    char             why[64]; /* "PIX to GPU 3", "on NUMA node 1", or why there is no choice */
} coll_topo_nic_pick_t;

/*
 * The NIC for the rank at place among the interfaces ifs[0..nifs). Usable NICs have an
 * interface name that ifs lists as up with an IPv4 address; a choice is made only when the
 * host has two or more. A rank with a GPU gets coll_topo_gpu_nics_among's NIC for that GPU
 * (best link, then GPUs spread over equally near NICs). A rank without one gets a NIC on its
 * NUMA node, else on its package; slot (its local rank; < 0 counts as 0) picks among equally
 * near NICs, so a host's ranks spread over them. Farther NICs are not chosen (no choice).
 */
void coll_topo_pick_nic(const coll_topo_t *topo, const coll_topo_place_t *place, int slot,
                        const coll_topo_netif_t *ifs, int nifs, coll_topo_nic_pick_t *pick_p);

/* This host's interfaces (getifaddrs), loopback left out, at most max. COLL_ERR_SYSTEM when
 * they cannot be listed. */
coll_result_t coll_topo_netifs(coll_topo_netif_t *ifs, int max, int *n_p);

/* Bytes per second that TCP payload gets from a link of mbps Mb/s (COLL_TOPO_NIC_EFFICIENCY). */
double coll_topo_nic_bytes_per_s(int mbps);

/*
 * The bandwidth between hosts the NICs give, in bytes per second: for each host the sum over
 * the distinct NICs its ranks use (rails) of coll_topo_nic_bytes_per_s, and the least of the
 * hosts, since the slowest host paces every exchange. 0 (unknown) when some host's ranks use
 * no NIC of known speed.
 */
double coll_topo_inter_bw(const coll_topo_place_t *places, int n);

#endif
