/* SPDX-License-Identifier: MIT */
/*
 * This process on its host: the host's model, loaded once and shared by every communicator of
 * the process, the CPUs the process may run on, and the placement of a rank from them (its GPU
 * and NUMA node). The choices are pure functions of the model and their inputs, so tests run
 * them on the fixtures; only coll_topo_host and coll_topo_affinity touch the system.
 */
#ifndef COLL_TOPO_LOCAL_H
#define COLL_TOPO_LOCAL_H

#include "topo/place.h"

/* This host's model (coll_topo_load: COLL_TOPO_FILE, hwloc or sysfs), loaded at the first call
 * and kept until the process ends. A failure is remembered as well, so that later
 * communicators neither retry nor log it again. */
coll_result_t coll_topo_host(const coll_topo_t **topo_p);

/* The CPUs the calling thread may run on (sched_getaffinity). COLL_ERR_SYSTEM on failure. */
coll_result_t coll_topo_affinity(coll_topo_cpuset_t *set_p);

/* The NUMA node (logical index) whose CPUs hold every CPU of set; -1 when set is empty or
 * spans several nodes. */
int coll_topo_numa_of_cpus(const coll_topo_t *t, const coll_topo_cpuset_t *set);

/* The GPU (logical index) at PCI address busid, whatever the function number; -1: none. */
int coll_topo_gpu_by_busid(const coll_topo_t *t, uint64_t busid);

/* Which GPU a rank uses (COLL_TOPO_GPU). */
typedef enum {
    COLL_TOPO_GPU_AUTO,       /* the current CUDA device, if any (what NCCL users expect) */
    COLL_TOPO_GPU_LOCAL_RANK, /* that, else GPU local_rank mod the host's GPU count */
    COLL_TOPO_GPU_NONE        /* none: the rank is placed by its CPUs */
} coll_topo_gpu_mode_t;

/* The GPU of a rank: cuda_busid (the bus id of its current CUDA device, 0: none) when the
 * model knows it, else by mode and local_rank (< 0: unknown); -1 for none. */
int coll_topo_pick_gpu(const coll_topo_t *t, coll_topo_gpu_mode_t mode, uint64_t cuda_busid,
                       int local_rank);

/* This rank's place on host `host`: its GPU as coll_topo_pick_gpu chooses it, and the NUMA
 * node of its CPUs (affinity, may be NULL) when it has no GPU. */
void coll_topo_place_self(const coll_topo_t *t, uint64_t host, int gpu,
                          const coll_topo_cpuset_t *affinity, coll_topo_place_t *place_p);

/* The NUMA node (os index) for the memory of a rank on NUMA node numa (os index): numa itself
 * when the host has several nodes and numa is one of them; -1 (nothing to do) otherwise. */
int coll_topo_mem_node(const coll_topo_t *t, int numa);

/* How a rank is bound to CPUs (COLL_BIND). */
typedef enum {
    COLL_TOPO_BIND_NONE, /* left as it is */
    COLL_TOPO_BIND_CORE, /* one CPU of its NUMA node, a different one per rank of the node */
    COLL_TOPO_BIND_NUMA  /* every CPU of its NUMA node */
} coll_topo_bind_t;

/* The NUMA node (logical index) of os index os_index; -1: none. */
int coll_topo_numa_logical(const coll_topo_t *t, int os_index);

/*
 * The CPUs to bind a rank to under mode, within allowed (the CPUs it may use now): its NUMA
 * node numa (logical index)'s CPUs, or with COLL_TOPO_BIND_CORE one of them: the first PU of
 * the slot-th core in os order (slot: how many ranks of the host before it use the same node),
 * wrapping around when the node has fewer. 0, or -1 when there is nothing to bind to (mode
 * none, node unknown, or no allowed CPU in it).
 */
int coll_topo_bind_mask(const coll_topo_t *t, coll_topo_bind_t mode, int numa, int slot,
                        const coll_topo_cpuset_t *allowed, coll_topo_cpuset_t *mask_p);

/* Binds the calling thread to mask (sched_setaffinity); threads it creates later inherit it.
 * COLL_ERR_SYSTEM on failure. */
coll_result_t coll_topo_bind_thread(const coll_topo_cpuset_t *mask);

#endif
