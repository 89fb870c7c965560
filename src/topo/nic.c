/* SPDX-License-Identifier: MIT */
/*
 * A rank's NIC for TCP and the hosts' NIC bandwidth, from the model and the gathered places
 * (pure), and the list of this host's interfaces (getifaddrs). Opens no sockets; the TCP
 * transport binds to the address of the interface chosen here.
 */
#include "topo/nic.h"
#include "topo/local.h"
#include "log.h"
#include "util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The interface of NIC nic in ifs when it is up with an IPv4 address; -1 otherwise. */
static int nic_netif(const coll_topo_nic_t *nic, const coll_topo_netif_t *ifs, int nifs)
{
    for (int i = 0; nic->name[0] != '\0' && i < nifs; i++) {
        if (strcmp(ifs[i].name, nic->name) == 0) {
            return (ifs[i].up && ifs[i].addr[0] != '\0') ? i : -1;
        }
    }
    return -1;
}

/* The package (logical index) of os index os_index; -1: none. */
static int nic_pkg_logical(const coll_topo_t *t, int os_index)
{
    for (int p = 0; os_index >= 0 && p < t->npkg; p++) {
        if (t->pkg[p].os_index == os_index) {
            return p;
        }
    }
    return -1;
}

/* A rank without GPU: the NICs on its NUMA node, else on its package, slot-th of them. */
static int nic_near_cpu(const coll_topo_t *t, const coll_topo_place_t *place, uint32_t usable,
                        int slot, char *why, size_t len)
{
    int numa = coll_topo_numa_logical(t, place->numa);
    int pkg  = nic_pkg_logical(t, place->package);

    if (pkg < 0 && numa >= 0) {
        pkg = t->numa[numa].package;
    }
    for (int level = 0; level < 2; level++) {
        int cand[COLL_TOPO_MAX_NIC], ncand = 0;
        for (int n = 0; n < t->nnic; n++) {
            const coll_topo_pci_t *pci = &t->nic[n].pci;
            int                    near =
                (level == 0) ? (numa >= 0 && pci->numa == numa) : (pkg >= 0 && pci->package == pkg);
            if ((usable & (1u << n)) != 0 && near) {
                cand[ncand++] = n;
            }
        }
        if (ncand > 0) {
            snprintf(why, len, level == 0 ? "on NUMA node %d" : "on package %d",
                     level == 0 ? place->numa : place->package);
            return cand[(slot < 0 ? 0 : slot) % ncand];
        }
    }
    snprintf(why, len, "no usable NIC on the rank's NUMA node or package");
    return -1;
}

void coll_topo_pick_nic(const coll_topo_t *t, const coll_topo_place_t *place, int slot,
                        const coll_topo_netif_t *ifs, int nifs, coll_topo_nic_pick_t *pick)
{
    int      netif[COLL_TOPO_MAX_NIC];
    uint32_t usable  = 0;
    int      nusable = 0, gpu;

    memset(pick, 0, sizeof(*pick));
    pick->nic = pick->netif = pick->gpu = -1;
    pick->link                          = COLL_TOPO_LINK_COUNT;
    if (t == NULL || place == NULL || !place->known) {
        snprintf(pick->why, sizeof(pick->why), "the host's topology is unknown");
        return;
    }
    for (int n = 0; n < t->nnic; n++) {
        netif[n] = nic_netif(&t->nic[n], ifs, nifs);
        if (netif[n] >= 0) {
            usable |= 1u << n;
            nusable++;
        }
    }
    if (nusable < 2) {
        snprintf(pick->why, sizeof(pick->why), "%d NIC(s) up with an IPv4 address", nusable);
        return;
    }
    gpu = (place->gpu != 0) ? coll_topo_gpu_by_busid(t, place->gpu - 1) : -1;
    if (gpu >= 0) {
        int              nics[COLL_TOPO_MAX_GPU];
        coll_topo_link_t links[COLL_TOPO_MAX_GPU];
        coll_topo_gpu_nics_among(t, usable, nics, links);
        pick->nic  = nics[gpu];
        pick->gpu  = gpu;
        pick->link = links[gpu];
        snprintf(pick->why, sizeof(pick->why), "%s to GPU %d", coll_topo_link_name(links[gpu]),
                 gpu);
    } else {
        pick->nic = nic_near_cpu(t, place, usable, slot, pick->why, sizeof(pick->why));
    }
    pick->netif = (pick->nic >= 0) ? netif[pick->nic] : -1;
}

coll_result_t coll_topo_netifs(coll_topo_netif_t *ifs, int max, int *n_p)
{
    struct ifaddrs *list, *ifa;
    int             n = 0;

    if (getifaddrs(&list) != 0) {
        coll_info(TOPO, "getifaddrs() failed: %s", strerror(errno));
        return COLL_ERR_SYSTEM;
    }
    for (ifa = list; ifa != NULL; ifa = ifa->ifa_next) {
        int i = 0;
        if (ifa->ifa_name == NULL || (ifa->ifa_flags & IFF_LOOPBACK) != 0) {
            continue;
        }
        while (i < n && strcmp(ifs[i].name, ifa->ifa_name) != 0) {
            i++;
        }
        if (i == n) { /* one entry per interface, whatever its number of addresses */
            if (n == max) {
                continue;
            }
            memset(&ifs[n], 0, sizeof(ifs[n]));
            coll_strlcpy(ifs[n].name, ifa->ifa_name, sizeof(ifs[n].name));
            ifs[n].up = (ifa->ifa_flags & IFF_UP) != 0 && (ifa->ifa_flags & IFF_RUNNING) != 0;
            n++;
        }
        if (ifa->ifa_addr != NULL && ifa->ifa_addr->sa_family == AF_INET &&
            ifs[i].addr[0] == '\0') {
            const struct sockaddr_in *s4 = (const struct sockaddr_in *)(void *)ifa->ifa_addr;
            inet_ntop(AF_INET, &s4->sin_addr, ifs[i].addr, sizeof(ifs[i].addr));
        }
    }
    freeifaddrs(list);
    *n_p = n;
    return COLL_OK;
}

/* ---- bandwidth between hosts ---- */

double coll_topo_nic_bytes_per_s(int mbps)
{
    return (mbps > 0) ? (double)mbps * 1e6 / 8.0 * COLL_TOPO_NIC_EFFICIENCY : 0.0;
}

static int nic_cmp_place(const void *a, const void *b)
{
    const coll_topo_place_t *x = *(const coll_topo_place_t *const *)a;
    const coll_topo_place_t *y = *(const coll_topo_place_t *const *)b;

    if (x->host != y->host) {
        return (x->host < y->host) ? -1 : 1;
    }
    return (x->nic > y->nic) - (x->nic < y->nic);
}

double coll_topo_inter_bw(const coll_topo_place_t *places, int n)
{
    const coll_topo_place_t **p     = coll_calloc((size_t)n, sizeof(*p), "NIC bandwidth");
    double                    least = 0.0;

    if (p == NULL) {
        return 0.0; /* unknown: the caller keeps its default */
    }
    for (int r = 0; r < n; r++) {
        p[r] = &places[r];
    }
    qsort(p, (size_t)n, sizeof(*p), nic_cmp_place); /* each host's ranks together, by NIC */
    for (int i = 0; i < n;) {
        double host = 0.0;
        int    end  = i;
        while (end < n && p[end]->host == p[i]->host) {
            const coll_topo_place_t *q = p[end];
            int dup = end > i && p[end - 1]->nic == q->nic; /* a NIC counts once per host */
            if (q->known && q->nic >= 0 && !dup) {
                host += coll_topo_nic_bytes_per_s(q->nic_mbps);
            }
            end++;
        }
        if (host <= 0.0) {
            least = 0.0;
            break;
        }
        least = (least == 0.0 || host < least) ? host : least;
        i     = end;
    }
    coll_free(p);
    return least;
}
