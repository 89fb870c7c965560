/* SPDX-License-Identifier: MIT */
/*
 * Placement decisions from the model: the NIC each GPU should use, a rank's placement record,
 * and the ring order that keeps hosts and sockets contiguous. Sorting is O(n log n), so the
 * ring order serves communicators of any size.
 */
#include "topo/place.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

_Static_assert(COLL_TOPO_MAX_NIC <= 32, "a NIC set is a 32-bit mask");

void coll_topo_gpu_nics(const coll_topo_t *t, int *nic_p, coll_topo_link_t *link_p)
{
    coll_topo_gpu_nics_among(t, ~(uint32_t)0, nic_p, link_p);
}

void coll_topo_gpu_nics_among(const coll_topo_t *t, uint32_t among, int *nic_p,
                              coll_topo_link_t *link_p)
{
    int load[COLL_TOPO_MAX_NIC] = {0};

    for (int g = 0; g < t->ngpu; g++) {
        int              best      = -1;
        coll_topo_link_t best_link = COLL_TOPO_LINK_COUNT;
        for (int n = 0; n < t->nnic; n++) {
            coll_topo_link_t l = coll_topo_gpu_nic_link(t, g, n);
            if ((among & (1u << n)) == 0) {
                continue;
            }
            if (l < best_link || (l == best_link && load[n] < load[best])) {
                best      = n;
                best_link = l;
            }
        }
        if (best >= 0) {
            load[best]++;
        }
        nic_p[g] = best;
        if (link_p != NULL) {
            link_p[g] = best_link;
        }
    }
}

/* A NIC for a rank without GPU: one on its NUMA node, else on its package, else the first. */
static int place_nic_of_numa(const coll_topo_t *t, int numa)
{
    int pkg = (numa >= 0) ? t->numa[numa].package : -1;

    for (int n = 0; n < t->nnic; n++) {
        if (numa >= 0 && t->nic[n].pci.numa == numa) {
            return n;
        }
    }
    for (int n = 0; n < t->nnic; n++) {
        if (pkg >= 0 && t->nic[n].pci.package == pkg) {
            return n;
        }
    }
    return (t->nnic > 0) ? 0 : -1;
}

void coll_topo_place_of(const coll_topo_t *t, uint64_t host, int gpu, int numa,
                        coll_topo_place_t *p)
{
    int pkg;

    memset(p, 0, sizeof(*p));
    p->host  = host;
    p->nic   = -1;
    p->known = 1;
    if (gpu >= 0 && gpu < t->ngpu) {
        int nics[COLL_TOPO_MAX_GPU];
        coll_topo_gpu_nics(t, nics, NULL);
        numa      = t->gpu[gpu].pci.numa;
        pkg       = t->gpu[gpu].pci.package;
        p->pci_sw = coll_topo_pci_switch(&t->gpu[gpu].pci);
        p->gpu    = t->gpu[gpu].pci.busid + 1;
        p->nic    = nics[gpu];
    } else {
        numa   = (numa >= 0 && numa < t->nnuma) ? numa : -1;
        pkg    = (numa >= 0) ? t->numa[numa].package : -1;
        p->nic = place_nic_of_numa(t, numa);
    }
    p->nic_mbps = (p->nic >= 0) ? t->nic[p->nic].speed_mbps : 0;
    p->numa     = (numa >= 0) ? t->numa[numa].os_index : -1;
    p->package  = (pkg >= 0) ? t->pkg[pkg].os_index : -1;
}

/* ---- ring order ---- */

typedef struct ring_key {
    uint64_t                 host;  /* host key, then host number (order of the lowest rank) */
    int                      first; /* lowest rank of the host */
    int                      rank;
    const coll_topo_place_t *p;
} ring_key_t;

static int ring_cmp_host(const void *a, const void *b)
{
    const ring_key_t *x = a, *y = b;

    if (x->host != y->host) {
        return (x->host < y->host) ? -1 : 1;
    }
    return x->rank - y->rank;
}

#define RING_CMP(_a, _b)                                                                           \
    do {                                                                                           \
        if ((_a) != (_b)) {                                                                        \
            return ((_a) < (_b)) ? -1 : 1;                                                         \
        }                                                                                          \
    } while (0)

static int ring_cmp_place(const void *a, const void *b)
{
    const ring_key_t *x = a, *y = b;

    RING_CMP(x->first, y->first);
    RING_CMP(x->p->package, y->p->package);
    RING_CMP(x->p->numa, y->p->numa);
    RING_CMP(x->p->pci_sw, y->p->pci_sw);
    RING_CMP(x->p->gpu, y->p->gpu);
    RING_CMP(x->rank, y->rank);
    return 0;
}

/* Hosts in order of their lowest rank, each host's ranks by place; with alternate, odd hosts
 * backwards (when rails are known). */
static void topo_order(const coll_topo_place_t *places, int n, int alternate, int *order)
{
    ring_key_t *k     = coll_calloc((size_t)n, sizeof(*k), "ring order");
    int         known = 0;

    if (k == NULL) { /* keep rank order rather than fail: it is still a ring */
        for (int i = 0; i < n; i++) {
            order[i] = i;
        }
        return;
    }
    for (int r = 0; r < n; r++) {
        k[r] = (ring_key_t){.host = places[r].host, .rank = r, .p = &places[r]};
        known |= places[r].known;
    }
    /* group by host key; the first of each group is its lowest rank */
    qsort(k, (size_t)n, sizeof(*k), ring_cmp_host);
    for (int i = 0; i < n; i++) {
        k[i].first = (i > 0 && k[i].host == k[i - 1].host) ? k[i - 1].first : k[i].rank;
    }
    qsort(k, (size_t)n, sizeof(*k), ring_cmp_place);
    for (int i = 0, h = 0; i < n; h++) {
        int end = i;
        while (end < n && k[end].first == k[i].first) {
            end++;
        }
        for (int j = i; j < end; j++) { /* odd hosts backwards, when rails are known */
            order[j] = (alternate && h % 2 == 1 && known) ? k[i + end - 1 - j].rank : k[j].rank;
        }
        i = end;
    }
    coll_free(k);
}

void coll_topo_ring_order(const coll_topo_place_t *places, int n, int *order)
{
    topo_order(places, n, 1, order);
}

void coll_topo_local_order(const coll_topo_place_t *places, int n, int *order)
{
    topo_order(places, n, 0, order);
}

void coll_topo_ring_crossings(const coll_topo_place_t *places, int n, const int *order,
                              int *hosts_p, int *packages_p)
{
    *hosts_p    = 0;
    *packages_p = 0;
    for (int i = 0; n > 1 && i < n; i++) {
        const coll_topo_place_t *a = &places[order[i]], *b = &places[order[(i + 1) % n]];
        if (a->host != b->host) {
            (*hosts_p)++;
        } else if (a->package != b->package) {
            (*packages_p)++;
        }
    }
}
