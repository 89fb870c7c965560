/* SPDX-License-Identifier: MIT */
/*
 * How two devices of one host are linked, in the vocabulary of nvidia-smi topo -m, from the
 * chains of PCI bridges above them and the packages they belong to; and PCI bus ids as text.
 * Pure functions of the model: no discovery here.
 */
#include "topo/topo.h"

#include <stdio.h>

static const char *const link_names[COLL_TOPO_LINK_COUNT] = {
    [COLL_TOPO_LINK_X] = "X",     [COLL_TOPO_LINK_NV] = "NV",   [COLL_TOPO_LINK_PIX] = "PIX",
    [COLL_TOPO_LINK_PXB] = "PXB", [COLL_TOPO_LINK_PHB] = "PHB", [COLL_TOPO_LINK_NODE] = "NODE",
    [COLL_TOPO_LINK_SYS] = "SYS",
};

static const char *const link_help[COLL_TOPO_LINK_COUNT] = {
    [COLL_TOPO_LINK_X]    = "the device itself",
    [COLL_TOPO_LINK_NV]   = "NVLink; # is the number of links between the two GPUs",
    [COLL_TOPO_LINK_PIX]  = "through one PCIe switch",
    [COLL_TOPO_LINK_PXB]  = "through several PCIe switches, not through a host bridge",
    [COLL_TOPO_LINK_PHB]  = "through a PCIe host bridge (the CPU's root complex)",
    [COLL_TOPO_LINK_NODE] = "between PCIe host bridges of one package",
    [COLL_TOPO_LINK_SYS]  = "across the link between packages (QPI/UPI, xGMI)",
};

const char *coll_topo_link_name(coll_topo_link_t link)
{
    return ((unsigned)link < COLL_TOPO_LINK_COUNT) ? link_names[link] : "?";
}

const char *coll_topo_link_help(coll_topo_link_t link)
{
    return ((unsigned)link < COLL_TOPO_LINK_COUNT) ? link_help[link] : "?";
}

uint64_t coll_topo_pci_switch(const coll_topo_pci_t *pci)
{
    /* The bridge two levels up is a switch's upstream port when the parent is one of its
     * downstream ports; a device right below a root port (or a switch drawn as one bridge)
     * gets its parent. Never the host bridge: devices on a root bus share no switch. */
    int i = pci->nchain - 2;

    if (i < 1) {
        i = 1;
    }
    return (i < pci->nchain) ? pci->chain[i] : 0;
}

/* Devices below different host bridges: within one package, or across packages. Where the
 * package is unknown, the NUMA node decides; where both are unknown, assume the worst. */
static coll_topo_link_t link_between_bridges(const coll_topo_pci_t *a, const coll_topo_pci_t *b)
{
    if (a->package >= 0 && b->package >= 0) {
        return (a->package == b->package) ? COLL_TOPO_LINK_NODE : COLL_TOPO_LINK_SYS;
    }
    if (a->numa >= 0 && a->numa == b->numa) {
        return COLL_TOPO_LINK_NODE;
    }
    return COLL_TOPO_LINK_SYS;
}

coll_topo_link_t coll_topo_pci_link(const coll_topo_pci_t *a, const coll_topo_pci_t *b)
{
    int common = 0;

    if (a == b || (a->busid == b->busid && a->nchain > 0 && a->nchain == b->nchain &&
                   a->chain[0] == b->chain[0])) {
        return COLL_TOPO_LINK_X;
    }
    if (a->nchain == 0 || b->nchain == 0 || a->chain[0] != b->chain[0]) {
        return link_between_bridges(a, b);
    }
    uint64_t sa = coll_topo_pci_switch(a);
    if (sa != 0 && sa == coll_topo_pci_switch(b)) {
        return COLL_TOPO_LINK_PIX;
    }
    while (common < a->nchain && common < b->nchain && a->chain[common] == b->chain[common]) {
        common++;
    }
    /* common >= 1: the host bridge; more means a PCI bridge above both */
    return (common > 1) ? COLL_TOPO_LINK_PXB : COLL_TOPO_LINK_PHB;
}

coll_topo_link_t coll_topo_gpu_link(const coll_topo_t *topo, int i, int j)
{
    if (i == j) {
        return COLL_TOPO_LINK_X;
    }
    if (topo->nvlinks[i][j] > 0) {
        return COLL_TOPO_LINK_NV;
    }
    return coll_topo_pci_link(&topo->gpu[i].pci, &topo->gpu[j].pci);
}

coll_topo_link_t coll_topo_gpu_nic_link(const coll_topo_t *topo, int g, int n)
{
    return coll_topo_pci_link(&topo->gpu[g].pci, &topo->nic[n].pci);
}

char *coll_topo_busid_format(uint64_t busid, char *buf, size_t len)
{
    unsigned dom = (unsigned)((busid >> 16) & 0xffffffffu), bus = (unsigned)((busid >> 8) & 0xff);

    if (COLL_TOPO_IS_HOSTBRIDGE(busid)) {
        snprintf(buf, len, "%04x:%02x", dom & 0xffffu, bus);
    } else {
        snprintf(buf, len, "%04x:%02x:%02x.%x", dom, bus, (unsigned)((busid >> 3) & 0x1f),
                 (unsigned)(busid & 7));
    }
    return buf;
}

int coll_topo_busid_parse(const char *text, uint64_t *busid_p)
{
    unsigned dom = 0, bus, dev, fn;
    char     tail;

    if (sscanf(text, "%x:%x:%x.%x%c", &dom, &bus, &dev, &fn, &tail) != 4) {
        dom = 0;
        if (sscanf(text, "%x:%x.%x%c", &bus, &dev, &fn, &tail) != 3) {
            return -1;
        }
    }
    if (bus > 0xff || dev > 0x1f || fn > 7) {
        return -1;
    }
    *busid_p = COLL_TOPO_BUSID(dom, bus, dev, fn);
    return 0;
}
