/* SPDX-License-Identifier: MIT */
/*
 * The fallback backend without hwloc: the model from Linux sysfs below a root directory ("/"
 * live; tests fabricate a tree). CPUs, packages and L3 caches from /sys/devices/system/cpu,
 * NUMA nodes and their distances from /sys/devices/system/node, GPUs and NICs from
 * /sys/bus/pci/devices, with the bridges above each device read from its path under
 * /sys/devices. It cannot read XML files; that needs hwloc.
 */
#include "topo/topo.h"
#include "error.h"
#include "log.h"
#include "util.h"

#include <dirent.h>
#include <stdarg.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Reads root/rel (printf-style) into buf, without the trailing newline; 0, or -1 if absent. */
static int sysfs_read(const char *root, char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int sysfs_read(const char *root, char *buf, size_t len, const char *fmt, ...)
{
    char    rel[PATH_MAX], path[PATH_MAX + 64];
    va_list ap;
    FILE   *f;
    size_t  n;

    va_start(ap, fmt);
    vsnprintf(rel, sizeof(rel), fmt, ap);
    va_end(ap);
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    f = fopen(path, "r");
    if (f == NULL) {
        return -1;
    }
    n = fread(buf, 1, len - 1, f);
    fclose(f);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' ')) {
        n--;
    }
    buf[n] = '\0';
    return 0;
}

/* A number read from root/rel (printf-style); dflt if absent. Decimal or 0x hex. */
static long sysfs_long(const char *root, long dflt, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static long sysfs_long(const char *root, long dflt, const char *fmt, ...)
{
    char    buf[64], rel[PATH_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(rel, sizeof(rel), fmt, ap);
    va_end(ap);
    return (sysfs_read(root, buf, sizeof(buf), "%s", rel) == 0) ? strtol(buf, NULL, 0) : dflt;
}

/* Packages and cores: a core is named by the first PU of its thread siblings. */
static void sysfs_fill_cpus(coll_topo_t *t, const char *root)
{
    coll_topo_cpuset_t online, cores;
    char               buf[4096];

    memset(&cores, 0, sizeof(cores));
    if (sysfs_read(root, buf, sizeof(buf), "sys/devices/system/cpu/online") != 0 ||
        coll_topo_cpuset_parse(buf, &online) != 0) {
        return;
    }
    for (int c = 0; c < COLL_TOPO_MAX_CPUS; c++) {
        coll_topo_cpuset_t sib;
        if (!coll_topo_cpuset_isset(&online, c)) {
            continue;
        }
        long pkg =
            sysfs_long(root, 0, "sys/devices/system/cpu/cpu%d/topology/physical_package_id", c);
        int p = 0;
        while (p < t->npkg && t->pkg[p].os_index != (int)pkg) {
            p++;
        }
        if (p == t->npkg) {
            if (t->npkg == COLL_TOPO_MAX_PKG) {
                continue;
            }
            t->pkg[t->npkg++].os_index = (int)pkg;
        }
        coll_topo_cpuset_set(&t->pkg[p].cpus, c);
        t->pkg[p].npus++;
        t->npus++;
        if (sysfs_read(root, buf, sizeof(buf),
                       "sys/devices/system/cpu/cpu%d/topology/thread_siblings_list", c) != 0 ||
            coll_topo_cpuset_parse(buf, &sib) != 0 || coll_topo_cpuset_first(&sib) < 0) {
            coll_topo_cpuset_set(&sib, c);
        }
        if (!coll_topo_cpuset_isset(&cores, coll_topo_cpuset_first(&sib))) {
            coll_topo_cpuset_set(&cores, coll_topo_cpuset_first(&sib));
            t->pkg[p].ncores++;
            t->ncores++;
        }
    }
    t->core_first = cores;
}

static int sysfs_cores_in(const coll_topo_t *t, const coll_topo_cpuset_t *set, const char *root)
{
    int  n = 0;
    char buf[256];

    for (int c = coll_topo_cpuset_first(set); c >= 0 && c < COLL_TOPO_MAX_CPUS; c++) {
        coll_topo_cpuset_t sib;
        if (!coll_topo_cpuset_isset(set, c)) {
            continue;
        }
        /* count a core at its first thread */
        if (sysfs_read(root, buf, sizeof(buf),
                       "sys/devices/system/cpu/cpu%d/topology/thread_siblings_list", c) != 0 ||
            coll_topo_cpuset_parse(buf, &sib) != 0 || coll_topo_cpuset_first(&sib) == c) {
            n++;
        }
    }
    return n;
}

/* NUMA nodes with their CPUs, memory and distances; one node for everything where the
 * kernel has no NUMA support. */
static void sysfs_fill_numa(coll_topo_t *t, const char *root)
{
    coll_topo_cpuset_t nodes;
    char               buf[4096];

    if (sysfs_read(root, buf, sizeof(buf), "sys/devices/system/node/online") != 0 ||
        coll_topo_cpuset_parse(buf, &nodes) != 0 || coll_topo_cpuset_count(&nodes) == 0) {
        memset(&nodes, 0, sizeof(nodes));
        coll_topo_cpuset_set(&nodes, 0);
    }
    for (int n = 0; n < COLL_TOPO_MAX_CPUS && t->nnuma < COLL_TOPO_MAX_NUMA; n++) {
        if (!coll_topo_cpuset_isset(&nodes, n)) {
            continue;
        }
        coll_topo_numa_t *node = &t->numa[t->nnuma++];
        char             *mem;
        node->os_index = n;
        node->package  = -1;
        if (sysfs_read(root, buf, sizeof(buf), "sys/devices/system/node/node%d/cpulist", n) != 0 ||
            coll_topo_cpuset_parse(buf, &node->cpus) != 0) {
            for (int p = 0; p < t->npkg; p++) { /* no NUMA in sysfs: every CPU */
                coll_topo_cpuset_or(&node->cpus, &t->pkg[p].cpus);
            }
        }
        node->npus   = coll_topo_cpuset_count(&node->cpus);
        node->ncores = sysfs_cores_in(t, &node->cpus, root);
        if (sysfs_read(root, buf, sizeof(buf), "sys/devices/system/node/node%d/meminfo", n) == 0 &&
            (mem = strstr(buf, "MemTotal:")) != NULL) {
            node->memory = (uint64_t)strtoull(mem + 9, NULL, 10) * 1024;
        }
    }
    for (int i = 0; i < t->nnuma; i++) {
        char *p = buf, *end;
        if (sysfs_read(root, buf, sizeof(buf), "sys/devices/system/node/node%d/distance",
                       t->numa[i].os_index) != 0) {
            continue;
        }
        for (int j = 0; j < t->nnuma; j++, p = end) {
            long d = strtol(p, &end, 10);
            if (end == p) {
                break;
            }
            t->numa_dist[i][j] = (uint16_t)d;
        }
    }
}

/* L3 caches, each once: named by the first CPU sharing it. */
static void sysfs_fill_l3(coll_topo_t *t, const char *root)
{
    coll_topo_cpuset_t seen;
    char               buf[4096];

    memset(&seen, 0, sizeof(seen));
    for (int p = 0; p < t->npkg; p++) {
        for (int c = 0; c < COLL_TOPO_MAX_CPUS && t->nl3 < COLL_TOPO_MAX_L3; c++) {
            coll_topo_cpuset_t shared;
            if (!coll_topo_cpuset_isset(&t->pkg[p].cpus, c)) {
                continue;
            }
            for (int i = 0; i < 8 && t->nl3 < COLL_TOPO_MAX_L3; i++) { /* indexes may skip */
                if (sysfs_read(root, buf, sizeof(buf),
                               "sys/devices/system/cpu/cpu%d/cache/index%d/level", c, i) != 0 ||
                    strcmp(buf, "3") != 0 ||
                    sysfs_read(root, buf, sizeof(buf),
                               "sys/devices/system/cpu/cpu%d/cache/index%d/shared_cpu_list", c,
                               i) != 0 ||
                    coll_topo_cpuset_parse(buf, &shared) != 0 ||
                    coll_topo_cpuset_isset(&seen, coll_topo_cpuset_first(&shared))) {
                    continue;
                }
                coll_topo_cpuset_set(&seen, coll_topo_cpuset_first(&shared));
                coll_topo_l3_t *l3 = &t->l3[t->nl3++];
                l3->package        = p;
                l3->ncores         = sysfs_cores_in(t, &shared, root);
                if (sysfs_read(root, buf, sizeof(buf),
                               "sys/devices/system/cpu/cpu%d/cache/index%d/size", c, i) == 0) {
                    char    *unit;
                    uint64_t v = strtoull(buf, &unit, 10);
                    l3->bytes  = v * (*unit == 'K' ? 1024 : *unit == 'M' ? 1024 * 1024 : 1);
                }
            }
        }
    }
}

/* The bridges above a device, from its path under /sys/devices: "pci0000:17" is the host
 * bridge, then every "0000:17:01.0"-like component up to the device itself. */
static void sysfs_fill_chain(const char *root, const char *dev, coll_topo_pci_t *pci)
{
    char     link[PATH_MAX * 2], real[PATH_MAX], *save = NULL, *tok, *p;
    unsigned dom, bus;
    uint64_t id;

    snprintf(link, sizeof(link), "%s/sys/bus/pci/devices/%s", root, dev);
    if (realpath(link, real) == NULL || (p = strstr(real, "/devices/pci")) == NULL) {
        return;
    }
    for (tok = strtok_r(p + 9, "/", &save); tok != NULL && pci->nchain < COLL_TOPO_MAX_CHAIN;
         tok = strtok_r(NULL, "/", &save)) {
        if (strcmp(tok, dev) == 0) {
            break;
        }
        if (pci->nchain == 0 && sscanf(tok, "pci%x:%x", &dom, &bus) == 2) {
            pci->chain[pci->nchain++] = COLL_TOPO_HOSTBRIDGE(dom, bus);
        } else if (pci->nchain > 0 && coll_topo_busid_parse(tok, &id) == 0) {
            pci->chain[pci->nchain++] = id;
        }
    }
}

/* The package holding every CPU of set, or -1. */
static int sysfs_package_of(const coll_topo_t *t, const coll_topo_cpuset_t *set)
{
    for (int p = 0; p < t->npkg; p++) {
        coll_topo_cpuset_t u = t->pkg[p].cpus;
        coll_topo_cpuset_or(&u, set);
        if (coll_topo_cpuset_count(set) > 0 &&
            coll_topo_cpuset_count(&u) == coll_topo_cpuset_count(&t->pkg[p].cpus)) {
            return p;
        }
    }
    return -1;
}

static void sysfs_fill_pci(coll_topo_t *t, const char *root, const char *dev, uint64_t busid,
                           coll_topo_pci_t *pci)
{
    char               buf[128];
    coll_topo_cpuset_t local;
    long               node = sysfs_long(root, -1, "sys/bus/pci/devices/%s/numa_node", dev);

    pci->busid    = busid;
    pci->vendor   = (uint16_t)sysfs_long(root, 0, "sys/bus/pci/devices/%s/vendor", dev);
    pci->device   = (uint16_t)sysfs_long(root, 0, "sys/bus/pci/devices/%s/device", dev);
    pci->class_id = (uint16_t)(sysfs_long(root, 0, "sys/bus/pci/devices/%s/class", dev) >> 8);
    pci->numa     = -1;
    pci->package  = -1;
    for (int n = 0; n < t->nnuma; n++) {
        if (t->numa[n].os_index == node) {
            pci->numa = n;
        }
    }
    if (pci->numa < 0 &&
        sysfs_read(root, buf, sizeof(buf), "sys/bus/pci/devices/%s/local_cpulist", dev) == 0 &&
        coll_topo_cpuset_parse(buf, &local) == 0) {
        pci->package = sysfs_package_of(t, &local);
    }
    if (sysfs_read(root, buf, sizeof(buf), "sys/bus/pci/devices/%s/current_link_speed", dev) == 0) {
        double gts   = strtod(buf, NULL);
        long   width = sysfs_long(root, 0, "sys/bus/pci/devices/%s/current_link_width", dev);
        /* 8b/10b encoding up to 5 GT/s, 128b/130b from 8 GT/s; 8 bits a byte */
        pci->link_gbs = (float)(gts * (double)width * (gts < 8 ? 0.8 : 128.0 / 130.0) / 8.0);
    }
    sysfs_fill_chain(root, dev, pci);
}

/* The model name the NVIDIA driver reports, else "vendor:device". */
static void sysfs_gpu_name(const char *root, const char *dev, coll_topo_gpu_t *g)
{
    char buf[1024], *model, *end;

    snprintf(g->name, sizeof(g->name), "%04x:%04x", g->pci.vendor, g->pci.device);
    if (sysfs_read(root, buf, sizeof(buf), "proc/driver/nvidia/gpus/%s/information", dev) == 0 &&
        (model = strstr(buf, "Model:")) != NULL) {
        model += 6;
        model += strspn(model, " \t");
        end = strchr(model, '\n');
        if (end != NULL) {
            *end = '\0';
        }
        coll_strlcpy(g->name, model, sizeof(g->name));
    }
}

static int sysfs_is_gpu(const coll_topo_pci_t *pci)
{
    int display = pci->class_id == 0x0300 || pci->class_id == 0x0302 || pci->class_id == 0x0380 ||
                  pci->class_id == 0x1200;

    return display && (pci->vendor == 0x10de || pci->vendor == 0x1002);
}

/* GPUs and NICs (network controllers) among the PCI devices. */
static void sysfs_fill_devices(coll_topo_t *t, const char *root)
{
    char           path[PATH_MAX];
    DIR           *d;
    struct dirent *e;

    snprintf(path, sizeof(path), "%s/sys/bus/pci/devices", root);
    d = opendir(path);
    if (d == NULL) {
        return;
    }
    while ((e = readdir(d)) != NULL) {
        coll_topo_pci_t pci;
        uint64_t        busid;
        if (coll_topo_busid_parse(e->d_name, &busid) != 0) {
            continue;
        }
        memset(&pci, 0, sizeof(pci));
        sysfs_fill_pci(t, root, e->d_name, busid, &pci);
        if (sysfs_is_gpu(&pci) && t->ngpu < COLL_TOPO_MAX_GPU) {
            coll_topo_gpu_t *g = &t->gpu[t->ngpu++];
            g->pci             = pci;
            sysfs_gpu_name(root, e->d_name, g);
        } else if ((pci.class_id >> 8) == 0x02 && t->nnic < COLL_TOPO_MAX_NIC) {
            t->nic[t->nnic++].pci = pci;
        }
    }
    closedir(d);
}

/* Names the NICs after the interfaces in root/sys/class/<cls> ("net": name, "infiniband":
 * ofa) whose device is, or sits below (virtio), one of their PCI functions. */
static void sysfs_name_nics(coll_topo_t *t, const char *root, const char *cls)
{
    char           path[PATH_MAX], real[PATH_MAX], *slash;
    DIR           *d;
    struct dirent *e;

    snprintf(path, sizeof(path), "%s/sys/class/%s", root, cls);
    d = opendir(path);
    if (d == NULL) {
        return;
    }
    while ((e = readdir(d)) != NULL) {
        uint64_t busid = 0;
        snprintf(path, sizeof(path), "%s/sys/class/%s/%s/device", root, cls, e->d_name);
        if (e->d_name[0] == '.' || realpath(path, real) == NULL) {
            continue;
        }
        /* the innermost component that is a PCI address */
        while ((slash = strrchr(real, '/')) != NULL &&
               coll_topo_busid_parse(slash + 1, &busid) != 0) {
            *slash = '\0';
        }
        for (int i = 0; slash != NULL && i < t->nnic; i++) {
            coll_topo_nic_t *n   = &t->nic[i];
            char            *dst = (strcmp(cls, "net") == 0) ? n->name : n->ofa;
            /* several interfaces on one function (ports): the first name in order */
            if (n->pci.busid == busid && (dst[0] == '\0' || strcmp(e->d_name, dst) < 0)) {
                coll_strlcpy(dst, e->d_name, sizeof(n->name));
            }
        }
    }
    closedir(d);
}

int coll_topo_sysfs_link_mbps(const char *root, const char *name, const char *ofa)
{
    char buf[128];

    if (ofa != NULL && ofa[0] != '\0' &&
        sysfs_read(root, buf, sizeof(buf), "sys/class/infiniband/%s/ports/1/rate", ofa) == 0) {
        return (int)(strtod(buf, NULL) * 1000); /* "400 Gb/sec (4X NDR)" */
    }
    if (name != NULL && name[0] != '\0') {
        long mbps = sysfs_long(root, 0, "sys/class/net/%s/speed", name); /* -1: link down */
        return (mbps > 0 && mbps < INT_MAX) ? (int)mbps : 0;
    }
    return 0;
}

void coll_topo_sysfs_nic_speed(coll_topo_t *t, const char *root)
{
    for (int i = 0; i < t->nnic; i++) {
        t->nic[i].speed_mbps = coll_topo_sysfs_link_mbps(root, t->nic[i].name, t->nic[i].ofa);
    }
}

/* The CPU model of every package: the first "model name" of /proc/cpuinfo (x86). */
static void sysfs_cpu_model(coll_topo_t *t, const char *root)
{
    char buf[8192], *m, *end;

    if (sysfs_read(root, buf, sizeof(buf), "proc/cpuinfo") != 0 ||
        (m = strstr(buf, "model name")) == NULL || (m = strchr(m, ':')) == NULL) {
        return;
    }
    m += 1 + strspn(m + 1, " \t");
    end = strchr(m, '\n');
    if (end != NULL) {
        *end = '\0';
    }
    for (int p = 0; p < t->npkg; p++) {
        coll_strlcpy(t->pkg[p].model, m, sizeof(t->pkg[p].model));
    }
}

coll_result_t coll_topo_sysfs_fill(coll_topo_t *t, const char *root)
{
    coll_strlcpy(t->source, "sysfs", sizeof(t->source));
    sysfs_fill_cpus(t, root);
    if (t->npus == 0) {
        coll_error(TOPO, "no CPU found in %s/sys/devices/system/cpu", root);
        return coll_set_last_error(COLL_ERR_SYSTEM, "no CPU found in %s/sys/devices/system/cpu",
                                   root);
    }
    sysfs_cpu_model(t, root);
    sysfs_fill_numa(t, root);
    sysfs_fill_l3(t, root);
    sysfs_fill_devices(t, root);
    sysfs_name_nics(t, root, "net");
    sysfs_name_nics(t, root, "infiniband");
    coll_topo_sysfs_nic_speed(t, root);
    return COLL_OK;
}
