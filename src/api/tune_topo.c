/* SPDX-License-Identifier: MIT */
/*
 * The tuner's cost model derived from a host's topology instead of measured: the intra-host
 * link from the class of the worst hop of the host's ring (NVLink, PCIe, across sockets), the
 * inter-host link from the NICs' speed and kind, and how many NICs the host's ranks spread
 * over. The constants below are stated assumptions, not measurements; a COLL_INTRA_*,
 * COLL_INTER_* or COLL_REDUCE_BW parameter that is set replaces the value it names. collinfo
 * simulates communicators of many such hosts with it; nothing here talks to other ranks.
 */
#include "api/tune.h"
#include "param.h"
#include "topo/place.h"
#include "util.h"

#include <string.h>

/* Intra-host latency per link class (us): one message between two GPUs of a host. */
#define TUNE_LAT_NV   1.0 /* NVLink or NVSwitch */
#define TUNE_LAT_PCI  2.0 /* PIX, PXB: through PCIe switches */
#define TUNE_LAT_HOST 2.5 /* PHB, NODE: through the CPU's root complex */
#define TUNE_LAT_SYS  3.0 /* across the link between sockets */
/* A stream over NVLink gets 80% of NVLink 4's 25 GB/s per link and direction. */
#define TUNE_NVLINK_BPS 20e9
/* A PCIe peer-to-peer stream gets 80% of the slower endpoint's link (12 GB/s when the file does
 * not say); across sockets half of that, staged through host memory. */
#define TUNE_PCIE_EFF     0.8
#define TUNE_PCIE_BPS     12e9
#define TUNE_SYS_FRACTION 0.5
/* Inter-host: an RDMA NIC (one with a verbs device) answers in about 4 us, a plain Ethernet
 * one through TCP in the COLL_INTER_LAT default; a stream carries 90% of the line rate. */
#define TUNE_LAT_RDMA 4.0
#define TUNE_NIC_EFF  0.9
/* A GPU reduces with a kernel reading two vectors and writing one from HBM. */
#define TUNE_GPU_REDUCE_BPS 300e9

/* Latency and bandwidth of one hop between the GPUs a and b of t. */
static void tune_topo_hop(const coll_topo_t *t, int a, int b, double *lat_p, double *bps_p)
{
    coll_topo_link_t link = coll_topo_gpu_link(t, a, b);
    double           pcie = TUNE_PCIE_BPS;
    float            ga = t->gpu[a].pci.link_gbs, gb = t->gpu[b].pci.link_gbs;

    if (ga > 0 && gb > 0) {
        pcie = TUNE_PCIE_EFF * 1e9 * (ga < gb ? ga : gb);
    }
    switch (link) {
    case COLL_TOPO_LINK_X:
        *lat_p = 0.0;
        *bps_p = 0.0; /* ranks sharing a GPU: no link, never the worst */
        return;
    case COLL_TOPO_LINK_NV:
        *lat_p = TUNE_LAT_NV;
        *bps_p = TUNE_NVLINK_BPS * t->nvlinks[a][b];
        return;
    case COLL_TOPO_LINK_PIX:
    case COLL_TOPO_LINK_PXB:
        *lat_p = TUNE_LAT_PCI;
        *bps_p = pcie;
        return;
    case COLL_TOPO_LINK_PHB:
    case COLL_TOPO_LINK_NODE:
        *lat_p = TUNE_LAT_HOST;
        *bps_p = pcie;
        return;
    default:
        *lat_p = TUNE_LAT_SYS;
        *bps_p = pcie * TUNE_SYS_FRACTION;
        return;
    }
}

/* The host's ring over its ranks (place.h's order) and its worst hop: the slowest latency and
 * bandwidth of any pair of neighbours, the wrap-around included. */
static void tune_topo_ring(const coll_topo_t *t, const coll_topo_place_t *pl, const int *gpu,
                           int rph, coll_tune_topo_t *info, coll_link_model_t *intra)
{
    int   *order = coll_calloc((size_t)rph, sizeof(int), "ring order");
    double lat = 0.0, bps = 0.0;

    info->intra_link = COLL_TOPO_LINK_X;
    if (order == NULL) {
        return;
    }
    coll_topo_ring_order(pl, rph, order);
    coll_topo_ring_crossings(pl, rph, order, &info->ring_hosts, &info->ring_packages);
    for (int i = 0; i < rph && t->ngpu > 0 && rph > 1; i++) {
        int    a = gpu[order[i]], b = gpu[order[(i + 1) % rph]];
        double l, w;

        tune_topo_hop(t, a, b, &l, &w);
        if (w > 0 && (bps == 0.0 || w < bps)) {
            bps = w;
        }
        lat = (l > lat) ? l : lat;
        if (a != b && coll_topo_gpu_link(t, a, b) > info->intra_link) {
            info->intra_link = coll_topo_gpu_link(t, a, b);
        }
    }
    if (bps > 0) {
        intra->alpha_us         = lat;
        intra->beta_us_per_byte = 1e6 / bps;
    }
    coll_free(order);
}

/* The NICs the ranks use (each GPU's nearest, else one per NUMA node): how many, the slowest
 * known speed, and whether all of them do RDMA. */
static void tune_topo_nics(const coll_topo_t *t, const coll_topo_place_t *pl, int rph,
                           coll_tune_topo_t *info)
{
    int used[COLL_TOPO_MAX_NIC] = {0};

    info->nics     = 0;
    info->nic_mbps = 0;
    info->rdma     = 1;
    for (int r = 0; r < rph; r++) {
        int n = pl[r].nic;
        if (n < 0 || n >= t->nnic || used[n]) {
            continue;
        }
        used[n] = 1;
        info->nics++;
        if (t->nic[n].speed_mbps > 0 &&
            (info->nic_mbps == 0 || t->nic[n].speed_mbps < info->nic_mbps)) {
            info->nic_mbps = t->nic[n].speed_mbps;
        }
        info->rdma &= t->nic[n].ofa[0] != '\0';
    }
    info->rdma &= info->nics > 0;
}

/* Parameters that are set win over what the topology says. */
static void tune_topo_params(coll_model_t *m)
{
    coll_model_t p;

    coll_model_from_params(&p);
    if (coll_param_is_set(COLL_P_INTRA_LAT)) {
        m->intra.alpha_us = p.intra.alpha_us;
    }
    if (coll_param_is_set(COLL_P_INTRA_BW)) {
        m->intra.beta_us_per_byte = p.intra.beta_us_per_byte;
    }
    if (coll_param_is_set(COLL_P_INTER_LAT)) {
        m->inter.alpha_us = p.inter.alpha_us;
    }
    if (coll_param_is_set(COLL_P_INTER_BW)) {
        m->inter.beta_us_per_byte = p.inter.beta_us_per_byte;
    }
    if (coll_param_is_set(COLL_P_REDUCE_BW)) {
        m->gamma_us_per_byte = p.gamma_us_per_byte;
    }
}

coll_result_t coll_model_from_topo(const coll_topo_t *t, int rph, coll_model_t *m,
                                   coll_tune_topo_t *info_p)
{
    coll_topo_place_t *pl  = coll_calloc((size_t)rph, sizeof(*pl), "placements");
    int               *gpu = coll_calloc((size_t)rph, sizeof(int), "placements");
    coll_tune_topo_t   info;

    if (pl == NULL || gpu == NULL) {
        coll_free(pl);
        coll_free(gpu);
        return COLL_ERR_NO_MEMORY;
    }
    memset(&info, 0, sizeof(info));
    coll_model_from_params(m); /* the defaults, for what the topology does not say */
    /* rank r of the host uses GPU r mod ngpu, else NUMA node r mod nnuma */
    for (int r = 0; r < rph; r++) {
        gpu[r] = (t->ngpu > 0) ? r % t->ngpu : -1;
        coll_topo_place_of(t, 0, gpu[r], (t->nnuma > 0) ? r % t->nnuma : -1, &pl[r]);
    }
    info.ranks_per_host = rph;
    info.gpus           = (t->ngpu < rph) ? t->ngpu : rph;
    tune_topo_ring(t, pl, gpu, rph, &info, &m->intra);
    tune_topo_nics(t, pl, rph, &info);
    if (info.nic_mbps > 0) {
        m->inter.beta_us_per_byte = 1e6 / (TUNE_NIC_EFF * info.nic_mbps * 1e6 / 8.0);
    }
    if (info.rdma) {
        m->inter.alpha_us = TUNE_LAT_RDMA;
    }
    m->inter_nics = (info.nics > 1) ? info.nics : 1;
    if (info.gpus > 0) {
        m->gamma_us_per_byte = 1e6 / TUNE_GPU_REDUCE_BPS;
    }
    tune_topo_params(m);
    coll_free(pl);
    coll_free(gpu);
    if (info_p != NULL) {
        *info_p = info;
    }
    return COLL_OK;
}
