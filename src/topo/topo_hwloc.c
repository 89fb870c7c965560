/* SPDX-License-Identifier: MIT */
/*
 * The hwloc backend (built only when configure found hwloc): fills the model from this machine
 * or from an hwloc XML file, keeping the I/O objects that matter (GPUs, NICs and the bridges
 * above them), and writes a topology back as XML. Everything hwloc-specific stays here; the
 * rest of libcoll sees only coll_topo_t.
 */
#include "config.h"
#include "topo/topo.h"
#include "error.h"
#include "log.h"
#include "util.h"

#include <errno.h>
#include <hwloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HWLOC_NVLINK_MBPS 25000 /* bandwidth of one NVLink (versions 2 to 4), one way */

/* Opens this machine (xml == NULL) or an XML file, with the important I/O objects. */
static coll_result_t hwloc_open(const char *xml, hwloc_topology_t *topo_p)
{
    hwloc_topology_t topo;

    if (xml != NULL && access(xml, R_OK) != 0) {
        coll_error(TOPO, "cannot read topology file %s: %s", xml, strerror(errno));
        return coll_set_last_error(COLL_ERR_INVALID_ARG, "cannot read topology file %s: %s", xml,
                                   strerror(errno));
    }
    if (hwloc_topology_init(&topo) != 0) {
        coll_error(TOPO, "hwloc_topology_init failed: %s", strerror(errno));
        return COLL_ERR_SYSTEM;
    }
    hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if ((xml != NULL && hwloc_topology_set_xml(topo, xml) != 0) || hwloc_topology_load(topo) != 0) {
        int err = errno;
        hwloc_topology_destroy(topo);
        if (xml != NULL) {
            coll_error(TOPO, "%s is not an hwloc XML topology (%s)", xml, strerror(err));
            return coll_set_last_error(COLL_ERR_INVALID_ARG, "%s is not an hwloc XML topology",
                                       xml);
        }
        coll_error(TOPO, "hwloc could not discover this machine: %s", strerror(err));
        return coll_set_last_error(COLL_ERR_SYSTEM, "hwloc could not discover this machine: %s",
                                   strerror(err));
    }
    *topo_p = topo;
    return COLL_OK;
}

static void hwloc_cpuset(hwloc_const_bitmap_t set, coll_topo_cpuset_t *out)
{
    unsigned i;

    memset(out, 0, sizeof(*out));
    hwloc_bitmap_foreach_begin(i, set)
    {
        coll_topo_cpuset_set(out, (int)i);
    }
    hwloc_bitmap_foreach_end();
}

static int hwloc_count(hwloc_topology_t topo, hwloc_const_cpuset_t set, hwloc_obj_type_t type)
{
    return hwloc_get_nbobjs_inside_cpuset_by_type(topo, set, type);
}

/* The logical index of the package containing obj's CPUs, or -1. */
static int hwloc_package_of(hwloc_topology_t topo, hwloc_obj_t obj)
{
    hwloc_obj_t pkg = NULL;

    if (obj->cpuset == NULL || hwloc_bitmap_iszero(obj->cpuset)) {
        return -1;
    }
    while ((pkg = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_PACKAGE, pkg)) != NULL) {
        if ((int)pkg->logical_index < COLL_TOPO_MAX_PKG &&
            hwloc_bitmap_isincluded(obj->cpuset, pkg->cpuset)) {
            return (int)pkg->logical_index;
        }
    }
    return -1;
}

static void hwloc_fill_cpus(hwloc_topology_t topo, coll_topo_t *t)
{
    hwloc_obj_t root = hwloc_get_root_obj(topo), o = NULL;

    t->ncores = hwloc_count(topo, root->cpuset, HWLOC_OBJ_CORE);
    t->npus   = hwloc_count(topo, root->cpuset, HWLOC_OBJ_PU);
    while ((o = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_CORE, o)) != NULL) {
        coll_topo_cpuset_set(&t->core_first, hwloc_bitmap_first(o->cpuset));
    }
    while ((o = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_PACKAGE, o)) != NULL &&
           t->npkg < COLL_TOPO_MAX_PKG) {
        coll_topo_pkg_t *p     = &t->pkg[t->npkg++];
        const char      *model = hwloc_obj_get_info_by_name(o, "CPUModel");
        p->os_index            = (int)o->os_index;
        p->ncores              = hwloc_count(topo, o->cpuset, HWLOC_OBJ_CORE);
        p->npus                = hwloc_count(topo, o->cpuset, HWLOC_OBJ_PU);
        coll_strlcpy(p->model, model != NULL ? model : "", sizeof(p->model));
        hwloc_cpuset(o->cpuset, &p->cpus);
    }
    if (t->npkg == 0) { /* no package level (some VMs): the machine is one */
        t->npkg          = 1;
        t->pkg[0].ncores = t->ncores;
        t->pkg[0].npus   = t->npus;
        hwloc_cpuset(root->cpuset, &t->pkg[0].cpus);
    }
    o = NULL;
    while ((o = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_NUMANODE, o)) != NULL &&
           t->nnuma < COLL_TOPO_MAX_NUMA) {
        coll_topo_numa_t *n = &t->numa[t->nnuma++];
        n->os_index         = (int)o->os_index;
        n->package          = hwloc_package_of(topo, o);
        n->memory           = o->attr->numanode.local_memory;
        n->ncores           = hwloc_count(topo, o->cpuset, HWLOC_OBJ_CORE);
        n->npus             = hwloc_count(topo, o->cpuset, HWLOC_OBJ_PU);
        hwloc_cpuset(o->cpuset, &n->cpus);
    }
    o = NULL;
    while ((o = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_L3CACHE, o)) != NULL &&
           t->nl3 < COLL_TOPO_MAX_L3) {
        coll_topo_l3_t *c = &t->l3[t->nl3++];
        c->bytes          = o->attr->cache.size;
        c->package        = hwloc_package_of(topo, o);
        c->ncores         = hwloc_count(topo, o->cpuset, HWLOC_OBJ_CORE);
    }
}

/* NUMA latencies, when the OS (or the XML file) gives them. */
static void hwloc_fill_numa_dist(hwloc_topology_t topo, coll_topo_t *t)
{
    struct hwloc_distances_s *d  = NULL;
    unsigned                  nr = 1;

    if (hwloc_distances_get_by_type(topo, HWLOC_OBJ_NUMANODE, &nr, &d,
                                    HWLOC_DISTANCES_KIND_MEANS_LATENCY, 0) != 0 ||
        nr == 0) {
        return;
    }
    for (unsigned i = 0; i < d->nbobjs; i++) {
        for (unsigned j = 0; j < d->nbobjs; j++) {
            unsigned a = d->objs[i]->logical_index, b = d->objs[j]->logical_index;
            if (a < COLL_TOPO_MAX_NUMA && b < COLL_TOPO_MAX_NUMA) {
                t->numa_dist[a][b] = (uint16_t)d->values[i * d->nbobjs + j];
            }
        }
    }
    hwloc_distances_release(topo, d);
}

/* Where a PCI device is: address, ids, bridges above it, NUMA node and package. */
static void hwloc_fill_pci(hwloc_topology_t topo, hwloc_obj_t dev, coll_topo_pci_t *pci)
{
    const struct hwloc_pcidev_attr_s *a = &dev->attr->pcidev;
    uint64_t                          up[64];
    int                               n = 0;
    hwloc_obj_t                       nonio;

    pci->busid    = COLL_TOPO_BUSID(a->domain, a->bus, a->dev, a->func);
    pci->vendor   = a->vendor_id;
    pci->device   = a->device_id;
    pci->class_id = a->class_id;
    pci->link_gbs = a->linkspeed;
    for (hwloc_obj_t b = dev->parent; b != NULL && b->type == HWLOC_OBJ_BRIDGE && n < 64;
         b             = b->parent) {
        const struct hwloc_bridge_attr_s *ba = &b->attr->bridge;
        up[n++] =
            (ba->upstream_type == HWLOC_OBJ_BRIDGE_HOST)
                ? COLL_TOPO_HOSTBRIDGE(ba->downstream.pci.domain, ba->downstream.pci.secondary_bus)
                : COLL_TOPO_BUSID(ba->upstream.pci.domain, ba->upstream.pci.bus,
                                  ba->upstream.pci.dev, ba->upstream.pci.func);
    }
    while (n > 0 && pci->nchain < COLL_TOPO_MAX_CHAIN) { /* top-down */
        pci->chain[pci->nchain++] = up[--n];
    }
    nonio        = hwloc_get_non_io_ancestor_obj(topo, dev);
    pci->numa    = -1;
    pci->package = (nonio != NULL) ? hwloc_package_of(topo, nonio) : -1;
    if (nonio != NULL && nonio->nodeset != NULL && hwloc_bitmap_weight(nonio->nodeset) == 1) {
        hwloc_obj_t node =
            hwloc_get_numanode_obj_by_os_index(topo, (unsigned)hwloc_bitmap_first(nonio->nodeset));
        if (node != NULL && node->logical_index < COLL_TOPO_MAX_NUMA) {
            pci->numa = (int)node->logical_index;
        }
    }
}

/* The first OS device of one of the given types below dev, or NULL. */
static hwloc_obj_t hwloc_osdev(hwloc_obj_t dev, hwloc_obj_osdev_type_t t1,
                               hwloc_obj_osdev_type_t t2)
{
    for (hwloc_obj_t c = dev->io_first_child; c != NULL; c = c->next_sibling) {
        if (c->type == HWLOC_OBJ_OS_DEVICE &&
            (c->attr->osdev.type == t1 || c->attr->osdev.type == t2)) {
            return c;
        }
    }
    return NULL;
}

static int hwloc_is_gpu(hwloc_obj_t dev)
{
    const struct hwloc_pcidev_attr_s *a = &dev->attr->pcidev;
    int display = a->class_id == 0x0300 || a->class_id == 0x0302 || a->class_id == 0x0380 ||
                  a->class_id == 0x1200;

    if (hwloc_osdev(dev, HWLOC_OBJ_OSDEV_COPROC, HWLOC_OBJ_OSDEV_GPU) != NULL && display) {
        return 1;
    }
    return display && (a->vendor_id == 0x10de || a->vendor_id == 0x1002);
}

static int hwloc_is_nic(hwloc_obj_t dev)
{
    return (dev->attr->pcidev.class_id >> 8) == 0x02 ||
           hwloc_osdev(dev, HWLOC_OBJ_OSDEV_NETWORK, HWLOC_OBJ_OSDEV_OPENFABRICS) != NULL;
}

static void hwloc_fill_gpu(hwloc_topology_t topo, hwloc_obj_t dev, coll_topo_gpu_t *g)
{
    hwloc_obj_t os    = hwloc_osdev(dev, HWLOC_OBJ_OSDEV_COPROC, HWLOC_OBJ_OSDEV_GPU);
    const char *model = (os != NULL) ? hwloc_obj_get_info_by_name(os, "GPUModel") : NULL;

    hwloc_fill_pci(topo, dev, &g->pci);
    if (model == NULL) {
        model = hwloc_obj_get_info_by_name(dev, "PCIDevice");
    }
    if (model != NULL) {
        coll_strlcpy(g->name, model, sizeof(g->name));
    } else {
        snprintf(g->name, sizeof(g->name), "%04x:%04x", g->pci.vendor, g->pci.device);
    }
    coll_strlcpy(g->osdev, (os != NULL && os->name != NULL) ? os->name : "", sizeof(g->osdev));
}

static void hwloc_fill_nic(hwloc_topology_t topo, hwloc_obj_t dev, coll_topo_nic_t *n)
{
    hwloc_obj_t net = hwloc_osdev(dev, HWLOC_OBJ_OSDEV_NETWORK, HWLOC_OBJ_OSDEV_NETWORK);
    hwloc_obj_t ofa = hwloc_osdev(dev, HWLOC_OBJ_OSDEV_OPENFABRICS, HWLOC_OBJ_OSDEV_OPENFABRICS);

    hwloc_fill_pci(topo, dev, &n->pci);
    coll_strlcpy(n->name, (net != NULL && net->name != NULL) ? net->name : "", sizeof(n->name));
    coll_strlcpy(n->ofa, (ofa != NULL && ofa->name != NULL) ? ofa->name : "", sizeof(n->ofa));
    for (hwloc_obj_t os = dev->io_first_child; os != NULL; os = os->next_sibling) {
        const char *speed = hwloc_obj_get_info_by_name(os, COLL_TOPO_XML_SPEED);
        if (speed != NULL && n->speed_mbps == 0) {
            n->speed_mbps = atoi(speed);
        }
    }
}

/* The GPU (index in t->gpu) an object of a distance matrix stands for, or -1. */
static int hwloc_gpu_index(const coll_topo_t *t, hwloc_obj_t o)
{
    while (o != NULL && o->type != HWLOC_OBJ_PCI_DEVICE) {
        o = o->parent;
    }
    for (int g = 0; o != NULL && g < t->ngpu; g++) {
        const struct hwloc_pcidev_attr_s *a = &o->attr->pcidev;
        if (t->gpu[g].pci.busid == COLL_TOPO_BUSID(a->domain, a->bus, a->dev, a->func)) {
            return g;
        }
    }
    return -1;
}

/* NVLinks from hwloc's NVML bandwidth matrix: direct GPU pairs, and pairs that both reach one
 * NVSwitch (any other object of the matrix), through the narrower of their two links. */
static void hwloc_fill_nvlinks(hwloc_topology_t topo, coll_topo_t *t)
{
    struct hwloc_distances_s *d  = NULL;
    unsigned                  nr = 1;

    if (hwloc_distances_get_by_name(topo, "NVLinkBandwidth", &nr, &d, 0) != 0 || nr == 0) {
        return;
    }
    unsigned n = d->nbobjs, gpu_of[COLL_TOPO_MAX_GPU * 4];
    if (n > sizeof(gpu_of) / sizeof(gpu_of[0])) {
        hwloc_distances_release(topo, d);
        return;
    }
    for (unsigned i = 0; i < n; i++) {
        gpu_of[i] = (unsigned)hwloc_gpu_index(t, d->objs[i]); /* -1: a switch */
    }
    for (unsigned i = 0; i < n; i++) {
        for (unsigned j = 0; j < n; j++) {
            if (gpu_of[i] >= (unsigned)t->ngpu || gpu_of[j] >= (unsigned)t->ngpu || i == j) {
                continue;
            }
            uint64_t bw = d->values[i * n + j];
            for (unsigned k = 0; k < n; k++) {
                uint64_t ik = d->values[i * n + k], jk = d->values[j * n + k];
                uint64_t via = (ik < jk) ? ik : jk;
                if (gpu_of[k] >= (unsigned)t->ngpu && via > bw) {
                    bw = via;
                }
            }
            uint64_t links = (bw + HWLOC_NVLINK_MBPS / 2) / HWLOC_NVLINK_MBPS;
            if (bw > 0) {
                t->nvlinks[gpu_of[i]][gpu_of[j]] = (uint8_t)(links == 0    ? 1
                                                             : links > 255 ? 255
                                                                           : links);
            }
        }
    }
    hwloc_distances_release(topo, d);
}

coll_result_t coll_topo_hwloc_fill(coll_topo_t *t, const char *xml)
{
    hwloc_topology_t topo;
    hwloc_obj_t      dev = NULL;

    COLL_CHECK(hwloc_open(xml, &topo));
    if (xml != NULL) {
        const char *host = hwloc_obj_get_info_by_name(hwloc_get_root_obj(topo), "HostName");
        snprintf(t->source, sizeof(t->source), "hwloc XML %s", xml);
        coll_strlcpy(t->hostname, host != NULL ? host : "", sizeof(t->hostname));
    } else {
        coll_strlcpy(t->source, "hwloc", sizeof(t->source));
    }
    hwloc_fill_cpus(topo, t);
    hwloc_fill_numa_dist(topo, t);
    while ((dev = hwloc_get_next_pcidev(topo, dev)) != NULL) {
        if (hwloc_is_gpu(dev) && t->ngpu < COLL_TOPO_MAX_GPU) {
            hwloc_fill_gpu(topo, dev, &t->gpu[t->ngpu++]);
        } else if (hwloc_is_nic(dev) && t->nnic < COLL_TOPO_MAX_NIC) {
            hwloc_fill_nic(topo, dev, &t->nic[t->nnic++]);
        }
    }
    hwloc_fill_nvlinks(topo, t);
    hwloc_topology_destroy(topo);
    return COLL_OK;
}

/* Keeps each live NIC's link speed in the XML (as an info of its network or verbs device), so
 * that a file read back says what this host said. */
static void hwloc_note_speeds(hwloc_topology_t topo)
{
    hwloc_obj_t dev = NULL;

    while ((dev = hwloc_get_next_pcidev(topo, dev)) != NULL) {
        hwloc_obj_t net = hwloc_osdev(dev, HWLOC_OBJ_OSDEV_NETWORK, HWLOC_OBJ_OSDEV_NETWORK);
        hwloc_obj_t ofa =
            hwloc_osdev(dev, HWLOC_OBJ_OSDEV_OPENFABRICS, HWLOC_OBJ_OSDEV_OPENFABRICS);
        char text[32];
        int  mbps = coll_topo_sysfs_link_mbps("/", net != NULL ? net->name : NULL,
                                             ofa != NULL ? ofa->name : NULL);
        if (mbps > 0) {
            snprintf(text, sizeof(text), "%d", mbps);
            hwloc_obj_add_info(net != NULL ? net : ofa, COLL_TOPO_XML_SPEED, text);
        }
    }
}

coll_result_t coll_topo_hwloc_export(const char *src, const char *path)
{
    hwloc_topology_t topo;
    coll_result_t    st = COLL_OK;

    COLL_CHECK(hwloc_open(src, &topo));
    if (src == NULL) {
        hwloc_note_speeds(topo);
    }
    if (hwloc_topology_export_xml(topo, path, 0) != 0) {
        coll_error(TOPO, "cannot write topology XML to %s: %s", path, strerror(errno));
        st = coll_set_last_error(COLL_ERR_SYSTEM, "cannot write %s: %s", path, strerror(errno));
    }
    hwloc_topology_destroy(topo);
    return st;
}
