/* SPDX-License-Identifier: MIT */
/*
 * Registration cache of the ib transport: user buffers sent by zero-copy rendezvous are
 * registered once and reused while their pages stay mapped. Registration goes through callbacks
 * (ibv_reg_mr / ibv_dereg_mr in the transport, fakes in tests/unit/test_mr_cache.c), so this
 * file needs no verbs. Unmapped or discarded memory is forgotten through the memory hooks
 * (src/core/memhook.h); where they cannot see every unmap, the cache turns itself off.
 */
#ifndef COLL_IB_MR_H
#define COLL_IB_MR_H

#include <stddef.h>
#include <stdint.h>
#include "coll.h"

typedef struct coll_ib_mrc_ops {
    /* Register [addr, addr + len) (page aligned); the handle, or NULL with errno set. */
    void *(*reg)(void *cookie, void *addr, size_t len);
    /* Deregister a handle reg returned. Never called from a memory hook. */
    void (*dereg)(void *cookie, void *handle);
} coll_ib_mrc_ops_t;

typedef struct coll_ib_mrc  coll_ib_mrc_t;
typedef struct coll_ib_mreg coll_ib_mreg_t; /* one registration, opaque */

/* A cache of at most max_entries unused registrations and max_bytes registered bytes (entries
 * in use may exceed both for a while). enabled == 0, or memory hooks that cannot see every
 * unmap (logged at INFO), give a cache that registers at every get and deregisters at every
 * put. ops is copied. */
coll_result_t coll_ib_mrc_create(const coll_ib_mrc_ops_t *ops, void *cookie, int max_entries,
                                 size_t max_bytes, int enabled, coll_ib_mrc_t **mrc_p);

/* A registration covering [addr, addr + len): a cached one (hit), else a new one of the page-
 * aligned range (miss), cached when enabled. Returns a reference in *reg_p and reg's handle in
 * *handle_p. COLL_ERR_TRANSPORT (logged) when registering fails. */
coll_result_t coll_ib_mrc_get(coll_ib_mrc_t *c, void *addr, size_t len, coll_ib_mreg_t **reg_p,
                              void **handle_p);

/* Drops a reference of get. A registration that is not cached (disabled, evicted or
 * invalidated meanwhile) is deregistered at its last put. */
void coll_ib_mrc_put(coll_ib_mrc_t *c, coll_ib_mreg_t *reg);

/* Every cached registration overlapping [start, start + len) leaves the cache: it is never hit
 * again, and it is deregistered at the next get, put or destroy once unused. Safe from any
 * thread, from inside a memory hook (calls neither dereg nor free). */
void coll_ib_mrc_invalidate(coll_ib_mrc_t *c, uintptr_t start, size_t len);

/* 1 when registrations are cached (enabled and the memory hooks effective). */
int coll_ib_mrc_enabled(const coll_ib_mrc_t *c);

/* Counters since create; any pointer may be NULL. */
void coll_ib_mrc_stats(const coll_ib_mrc_t *c, uint64_t *hits_p, uint64_t *misses_p,
                       uint64_t *evictions_p, uint64_t *invalidations_p);

/* Deregisters every registration (warning about those still referenced) and frees the cache. */
void coll_ib_mrc_destroy(coll_ib_mrc_t *c);

#endif
