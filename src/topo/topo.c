/* SPDX-License-Identifier: MIT */
/*
 * Which source describes this host (COLL_TOPO_FILE, hwloc, sysfs), and what every backend
 * leaves to be done after it: a stable device numbering (by bus id) and the packages and NUMA
 * nodes that can be derived from others. The backends themselves are topo_hwloc.c and
 * topo_sysfs.c; without hwloc the XML entry points refuse with a clear message.
 */
#include "config.h"
#include "topo/topo.h"
#include "error.h"
#include "log.h"
#include "param.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

static coll_result_t topo_new(coll_topo_t **topo_p)
{
    coll_topo_t *t = coll_calloc(1, sizeof(*t), "topology");

    if (t == NULL) {
        return COLL_ERR_NO_MEMORY;
    }
    coll_strlcpy(t->hostname, coll_hostname(), sizeof(t->hostname));
    *topo_p = t;
    return COLL_OK;
}

void coll_topo_free(coll_topo_t *topo)
{
    coll_free(topo);
}

/* Sorts n records of size bytes at base by their leading bus id (insertion sort: n is small),
 * and returns in perm[new] = old the permutation applied. */
static void topo_sort_by_busid(void *base, int n, size_t size, int *perm)
{
    char *a = base,
         tmp[sizeof(coll_topo_gpu_t) > sizeof(coll_topo_nic_t) ? sizeof(coll_topo_gpu_t)
                                                               : sizeof(coll_topo_nic_t)];

    for (int i = 0; i < n; i++) {
        perm[i] = i;
    }
    for (int i = 1; i < n; i++) {
        int j = i;
        while (j > 0 && ((const coll_topo_pci_t *)(a + (size_t)(j - 1) * size))->busid >
                            ((const coll_topo_pci_t *)(a + (size_t)j * size))->busid) {
            int p;
            memcpy(tmp, a + (size_t)j * size, size);
            memcpy(a + (size_t)j * size, a + (size_t)(j - 1) * size, size);
            memcpy(a + (size_t)(j - 1) * size, tmp, size);
            p           = perm[j];
            perm[j]     = perm[j - 1];
            perm[j - 1] = p;
            j--;
        }
    }
}

/* The package whose CPUs include cpu, or -1. */
static int topo_package_of_cpu(const coll_topo_t *t, int cpu)
{
    for (int p = 0; p < t->npkg; p++) {
        if (coll_topo_cpuset_isset(&t->pkg[p].cpus, cpu)) {
            return p;
        }
    }
    return -1;
}

/* A device's NUMA node and package where the backend could not tell: the only one there is,
 * or the package of its NUMA node. */
static void topo_finish_pci(const coll_topo_t *t, coll_topo_pci_t *pci)
{
    if (pci->numa < 0 && t->nnuma == 1) {
        pci->numa = 0;
    }
    if (pci->package < 0 && pci->numa >= 0) {
        pci->package = t->numa[pci->numa].package;
    }
    if (pci->package < 0 && t->npkg == 1) {
        pci->package = 0;
    }
}

void coll_topo_finish(coll_topo_t *t)
{
    int     perm[COLL_TOPO_MAX_GPU > COLL_TOPO_MAX_NIC ? COLL_TOPO_MAX_GPU : COLL_TOPO_MAX_NIC];
    uint8_t nv[COLL_TOPO_MAX_GPU][COLL_TOPO_MAX_GPU];

    topo_sort_by_busid(t->gpu, t->ngpu, sizeof(t->gpu[0]), perm);
    memcpy(nv, t->nvlinks, sizeof(nv));
    for (int i = 0; i < t->ngpu; i++) {
        for (int j = 0; j < t->ngpu; j++) {
            t->nvlinks[i][j] = nv[perm[i]][perm[j]];
        }
    }
    topo_sort_by_busid(t->nic, t->nnic, sizeof(t->nic[0]), perm);
    for (int p = 0; p < t->npkg; p++) { /* CPUID pads model names with blanks */
        size_t len = strlen(t->pkg[p].model);
        while (len > 0 && t->pkg[p].model[len - 1] == ' ') {
            t->pkg[p].model[--len] = '\0';
        }
    }
    for (int n = 0; n < t->nnuma; n++) {
        if (t->numa[n].package < 0) {
            t->numa[n].package = topo_package_of_cpu(t, coll_topo_cpuset_first(&t->numa[n].cpus));
        }
    }
    if (t->nnuma == 1 && t->numa_dist[0][0] == 0) {
        t->numa_dist[0][0] = 10; /* the only node is local to itself */
    }
    for (int g = 0; g < t->ngpu; g++) {
        topo_finish_pci(t, &t->gpu[g].pci);
    }
    for (int n = 0; n < t->nnic; n++) {
        topo_finish_pci(t, &t->nic[n].pci);
    }
}

static coll_result_t topo_load_with(coll_result_t (*fill)(coll_topo_t *, const char *),
                                    const char *arg, coll_topo_t **topo_p)
{
    coll_topo_t  *t;
    coll_result_t st;

    COLL_CHECK(topo_new(&t));
    st = fill(t, arg);
    if (st != COLL_OK) {
        coll_topo_free(t);
        return st;
    }
    coll_topo_finish(t);
    coll_debug(TOPO, "%s: %d package(s), %d NUMA node(s), %d core(s), %d GPU(s), %d NIC(s)",
               t->source, t->npkg, t->nnuma, t->ncores, t->ngpu, t->nnic);
    *topo_p = t;
    return COLL_OK;
}

coll_result_t coll_topo_load_sysfs(const char *root, coll_topo_t **topo_p)
{
    return topo_load_with(coll_topo_sysfs_fill, root, topo_p);
}

#ifdef HAVE_HWLOC
/* This machine through hwloc, and the NICs' speeds, which only sysfs knows. */
static coll_result_t topo_hwloc_live(coll_topo_t *t, const char *unused)
{
    COLL_CHECK(coll_topo_hwloc_fill(t, NULL));
    coll_topo_sysfs_nic_speed(t, "/");
    return COLL_OK;
}

coll_result_t coll_topo_load_xml(const char *path, coll_topo_t **topo_p)
{
    return topo_load_with(coll_topo_hwloc_fill, path, topo_p);
}

coll_result_t coll_topo_export_xml(const char *src, const char *path)
{
    return coll_topo_hwloc_export(src, path);
}
#else
static coll_result_t topo_no_hwloc(const char *what, const char *path)
{
    coll_error(TOPO,
               "%s %s needs hwloc, and this libcoll was built without it "
               "(install hwloc's development files and run configure --with-hwloc)",
               what, path);
    return coll_set_last_error(COLL_ERR_UNSUPPORTED, "%s %s needs hwloc (configure --with-hwloc)",
                               what, path);
}

coll_result_t coll_topo_load_xml(const char *path, coll_topo_t **topo_p)
{
    return topo_no_hwloc("reading the topology file", path);
}

coll_result_t coll_topo_export_xml(const char *src, const char *path)
{
    return topo_no_hwloc("writing the topology as XML to", path);
}
#endif

coll_result_t coll_topo_load(coll_topo_t **topo_p)
{
    const char *file = coll_param_str(COLL_P_TOPO_FILE);

    if (file[0] != '\0') {
        return coll_topo_load_xml(file, topo_p);
    }
#ifdef HAVE_HWLOC
    if (topo_load_with(topo_hwloc_live, NULL, topo_p) == COLL_OK) {
        return COLL_OK;
    }
    coll_warn(TOPO, "hwloc could not discover this machine; reading sysfs instead");
#endif
    return coll_topo_load_sysfs("/", topo_p);
}
