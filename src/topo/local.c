/* SPDX-License-Identifier: MIT */
/*
 * The host model of this process, loaded once, and where a rank of this process sits: the GPU
 * it drives and the NUMA node of its CPUs. Loading may fail (no sysfs in a container, a bad
 * COLL_TOPO_FILE); callers then place the rank by its host alone.
 */
#include "topo/local.h"
#include "error.h"
#include "log.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>

static pthread_mutex_t local_lock = PTHREAD_MUTEX_INITIALIZER;
static coll_topo_t    *local_topo;
static coll_result_t   local_status;
static int             local_tried;

coll_result_t coll_topo_host(const coll_topo_t **topo_p)
{
    coll_result_t st;

    pthread_mutex_lock(&local_lock);
    if (!local_tried) {
        local_tried  = 1;
        local_status = coll_topo_load(&local_topo);
        if (local_status == COLL_OK) {
            coll_info(TOPO, "%s: %d package(s), %d NUMA node(s), %d core(s), %d GPU(s), %d NIC(s)",
                      local_topo->source, local_topo->npkg, local_topo->nnuma, local_topo->ncores,
                      local_topo->ngpu, local_topo->nnic);
        }
    }
    st      = local_status;
    *topo_p = local_topo;
    pthread_mutex_unlock(&local_lock);
    return st;
}

coll_result_t coll_topo_affinity(coll_topo_cpuset_t *set_p)
{
    cpu_set_t mask;

    CPU_ZERO(&mask);
    if (sched_getaffinity(0, sizeof(mask), &mask) != 0) {
        coll_info(TOPO, "sched_getaffinity failed: %s", strerror(errno));
        return COLL_ERR_SYSTEM;
    }
    memset(set_p, 0, sizeof(*set_p));
    for (int c = 0; c < CPU_SETSIZE && c < COLL_TOPO_MAX_CPUS; c++) {
        if (CPU_ISSET(c, &mask)) {
            coll_topo_cpuset_set(set_p, c);
        }
    }
    return COLL_OK;
}

int coll_topo_numa_of_cpus(const coll_topo_t *t, const coll_topo_cpuset_t *set)
{
    int found = -1;

    for (int n = 0; n < t->nnuma; n++) {
        int inside = 0, outside = 0;
        for (size_t i = 0; i < COLL_TOPO_MAX_CPUS / 64; i++) {
            inside += __builtin_popcountll(set->w[i] & t->numa[n].cpus.w[i]);
            outside += __builtin_popcountll(set->w[i] & ~t->numa[n].cpus.w[i]);
        }
        if (inside > 0 && outside == 0) {
            found = n;
        } else if (inside > 0) {
            return -1; /* a node holds some of the CPUs but not all: several nodes */
        }
    }
    return found;
}

int coll_topo_gpu_by_busid(const coll_topo_t *t, uint64_t busid)
{
    for (int g = 0; g < t->ngpu; g++) {
        if ((t->gpu[g].pci.busid & ~(uint64_t)7) == (busid & ~(uint64_t)7)) {
            return g;
        }
    }
    return -1;
}

int coll_topo_pick_gpu(const coll_topo_t *t, coll_topo_gpu_mode_t mode, uint64_t cuda_busid,
                       int local_rank)
{
    int g = (cuda_busid != 0) ? coll_topo_gpu_by_busid(t, cuda_busid) : -1;

    if (mode == COLL_TOPO_GPU_NONE) {
        return -1;
    }
    if (g < 0 && mode == COLL_TOPO_GPU_LOCAL_RANK && local_rank >= 0 && t->ngpu > 0) {
        g = local_rank % t->ngpu;
    }
    return g;
}

void coll_topo_place_self(const coll_topo_t *t, uint64_t host, int gpu,
                          const coll_topo_cpuset_t *affinity, coll_topo_place_t *place_p)
{
    int numa = (affinity != NULL) ? coll_topo_numa_of_cpus(t, affinity) : -1;

    coll_topo_place_of(t, host, gpu, numa, place_p);
}

int coll_topo_mem_node(const coll_topo_t *t, int numa)
{
    if (t == NULL || t->nnuma <= 1) {
        return -1; /* one node: every page is local already */
    }
    return (coll_topo_numa_logical(t, numa) >= 0) ? numa : -1;
}

/* ---- binding ---- */

int coll_topo_numa_logical(const coll_topo_t *t, int os_index)
{
    for (int n = 0; os_index >= 0 && n < t->nnuma; n++) {
        if (t->numa[n].os_index == os_index) {
            return n;
        }
    }
    return -1;
}

int coll_topo_bind_mask(const coll_topo_t *t, coll_topo_bind_t mode, int numa, int slot,
                        const coll_topo_cpuset_t *allowed, coll_topo_cpuset_t *mask_p)
{
    coll_topo_cpuset_t m;
    int                count, k;

    if (mode == COLL_TOPO_BIND_NONE || numa < 0 || numa >= t->nnuma) {
        return -1;
    }
    for (size_t i = 0; i < COLL_TOPO_MAX_CPUS / 64; i++) {
        m.w[i] = t->numa[numa].cpus.w[i] & allowed->w[i];
    }
    count = coll_topo_cpuset_count(&m);
    if (count == 0) {
        return -1;
    }
    if (mode == COLL_TOPO_BIND_CORE) {
        coll_topo_cpuset_t cores;
        for (size_t i = 0; i < COLL_TOPO_MAX_CPUS / 64; i++) {
            cores.w[i] = m.w[i] & t->core_first.w[i];
        }
        if (coll_topo_cpuset_count(&cores) > 0) { /* one PU per core, where cores are known */
            m     = cores;
            count = coll_topo_cpuset_count(&m);
        }
        k = (slot < 0 ? 0 : slot) % count;
        for (int c = 0; c < COLL_TOPO_MAX_CPUS; c++) {
            if (coll_topo_cpuset_isset(&m, c) && k-- == 0) {
                memset(&m, 0, sizeof(m));
                coll_topo_cpuset_set(&m, c);
                break;
            }
        }
    }
    *mask_p = m;
    return 0;
}

coll_result_t coll_topo_bind_thread(const coll_topo_cpuset_t *mask)
{
    cpu_set_t set;

    CPU_ZERO(&set);
    for (int c = 0; c < CPU_SETSIZE && c < COLL_TOPO_MAX_CPUS; c++) {
        if (coll_topo_cpuset_isset(mask, c)) {
            CPU_SET(c, &set);
        }
    }
    if (sched_setaffinity(0, sizeof(set), &set) != 0) {
        coll_warn(TOPO, "sched_setaffinity failed: %s", strerror(errno));
        return COLL_ERR_SYSTEM;
    }
    return COLL_OK;
}
