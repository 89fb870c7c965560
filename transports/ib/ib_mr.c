/* SPDX-License-Identifier: MIT */
/*
 * Registration cache: a list of cached registrations sorted by start address (it is small: 64
 * by default), least recently used unused entries evicted beyond the limits, and a dead list of
 * registrations that can no longer be hit (evicted, invalidated, or never cached) and wait for
 * their last reference to go.
 *
 * Locking: one mutex per cache, and nothing under it that could unmap memory. A memory hook
 * (any thread, possibly in the middle of our own free or dereg in another thread) only moves
 * entries to the dead list; registering, deregistering, allocating and freeing happen outside
 * the mutex, in get/put/destroy.
 */
#include "config.h"
#include "ib_mr.h"
#include "error.h"
#include "log.h"
#include "memhook.h"
#include "util.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

struct coll_ib_mreg {
    uintptr_t       start;    /* page aligned, as registered */
    uintptr_t       end;      /* page aligned, exclusive */
    void           *handle;   /* of ops.reg; NULL while being registered */
    int             refcount; /* gets not yet put */
    int             cached;   /* 1: in c->cached (can be hit), 0: in c->dead */
    uint64_t        last_use; /* c->tick at the last get or put: LRU order */
    coll_ib_mreg_t *next;
};

struct coll_ib_mrc {
    pthread_mutex_t   lock;
    coll_ib_mrc_ops_t ops;
    void             *cookie;
    int               max_entries;
    size_t            max_bytes;
    int               enabled; /* caching; 0 also when the memory hooks cannot see every unmap */
    int               hooked;  /* registered with coll_memhook_add */
    uintptr_t         page_mask;
    coll_ib_mreg_t   *cached;  /* sorted by start */
    int               ncached; /* entries of cached */
    size_t            nbytes;  /* bytes of cached */
    coll_ib_mreg_t   *dead;    /* not hit any more; deregistered at refcount 0 */
    uint64_t          tick;    /* LRU clock */
    atomic_uint_least64_t hits, misses, evictions, invalidations;
};

/* ---- lists (under c->lock) ---- */

static void mrc_unlink(coll_ib_mreg_t **head, coll_ib_mreg_t *r)
{
    coll_ib_mreg_t **pp = head;

    while (*pp != r) {
        pp = &(*pp)->next;
    }
    *pp = r->next;
}

static void mrc_kill(coll_ib_mrc_t *c, coll_ib_mreg_t *r)
{
    mrc_unlink(&c->cached, r);
    c->ncached--;
    c->nbytes -= r->end - r->start;
    r->cached = 0;
    r->next   = c->dead;
    c->dead   = r;
}

static void mrc_insert(coll_ib_mrc_t *c, coll_ib_mreg_t *r)
{
    coll_ib_mreg_t **pp = &c->cached;

    while (*pp != NULL && (*pp)->start < r->start) {
        pp = &(*pp)->next;
    }
    r->next   = *pp;
    *pp       = r;
    r->cached = 1;
    c->ncached++;
    c->nbytes += r->end - r->start;
}

/* Least recently used entries nobody holds leave the cache until it is within its limits. */
static void mrc_evict(coll_ib_mrc_t *c)
{
    while (c->ncached > c->max_entries || c->nbytes > c->max_bytes) {
        coll_ib_mreg_t *r, *lru = NULL;

        for (r = c->cached; r != NULL; r = r->next) {
            if (r->refcount == 0 && (lru == NULL || r->last_use < lru->last_use)) {
                lru = r;
            }
        }
        if (lru == NULL) {
            return; /* everything is in use: over the limits until puts */
        }
        mrc_kill(c, lru);
        atomic_fetch_add_explicit(&c->evictions, 1, memory_order_relaxed);
    }
}

/* Detaches the dead entries nobody holds, for mrc_release after unlocking. */
static coll_ib_mreg_t *mrc_collect(coll_ib_mrc_t *c)
{
    coll_ib_mreg_t **pp = &c->dead, *out = NULL;

    while (*pp != NULL) {
        coll_ib_mreg_t *r = *pp;

        if (r->refcount == 0) {
            *pp     = r->next;
            r->next = out;
            out     = r;
        } else {
            pp = &r->next;
        }
    }
    return out;
}

/* Outside the lock: dereg and free may unmap memory, which calls the hooks. */
static void mrc_release(coll_ib_mrc_t *c, coll_ib_mreg_t *list)
{
    while (list != NULL) {
        coll_ib_mreg_t *next = list->next;

        if (list->handle != NULL) { /* NULL: destroyed while registering */
            c->ops.dereg(c->cookie, list->handle);
        }
        coll_free(list);
        list = next;
    }
}

/* ---- create / destroy ---- */

static void mrc_memhook_cb(void *arg, uintptr_t start, size_t len)
{
    coll_ib_mrc_invalidate(arg, start, len);
}

/* Caching is only safe when every unmap of the process is seen. */
static int mrc_hook(coll_ib_mrc_t *c)
{
    const char *why = NULL;

    if (c->max_entries <= 0 || c->max_bytes == 0) {
        why = "it may hold no entry (COLL_IB_REG_CACHE_ENTRIES or COLL_IB_REG_CACHE_BYTES is 0)";
    } else if (!coll_memhook_effective(&why)) {
        /* why says which symbol resolves elsewhere */
    } else if (coll_memhook_add(mrc_memhook_cb, c) != 0) {
        why = "too many memory hooks in this process";
    } else {
        c->hooked = 1;
        coll_memhook_keep_heap_mapped();
        return 1;
    }
    coll_info(IB,
              "registration cache off: %s; every large message is registered and "
              "deregistered",
              why);
    return 0;
}

coll_result_t coll_ib_mrc_create(const coll_ib_mrc_ops_t *ops, void *cookie, int max_entries,
                                 size_t max_bytes, int enabled, coll_ib_mrc_t **mrc_p)
{
    coll_ib_mrc_t *c;
    long           page = sysconf(_SC_PAGESIZE);

    if (ops == NULL || ops->reg == NULL || ops->dereg == NULL || max_entries < 0) {
        coll_error(IB, "registration cache: invalid arguments");
        return COLL_ERR_INVALID_ARG;
    }
    c = coll_calloc(1, sizeof(*c), "registration cache");
    if (c == NULL) {
        return COLL_ERR_NO_MEMORY;
    }
    pthread_mutex_init(&c->lock, NULL);
    c->ops         = *ops;
    c->cookie      = cookie;
    c->max_entries = max_entries;
    c->max_bytes   = max_bytes;
    c->page_mask   = (uintptr_t)(page > 0 ? page : 4096) - 1;
    c->enabled     = enabled != 0 && mrc_hook(c);
    if (c->enabled) {
        coll_debug(IB, "registration cache: up to %d unused entries, %zu bytes", max_entries,
                   max_bytes);
    }
    *mrc_p = c;
    return COLL_OK;
}

void coll_ib_mrc_destroy(coll_ib_mrc_t *c)
{
    coll_ib_mreg_t *r, *all;
    int             busy = 0;

    if (c == NULL) {
        return;
    }
    if (c->hooked) {
        coll_memhook_remove(mrc_memhook_cb, c); /* no hook call runs after this */
    }
    pthread_mutex_lock(&c->lock);
    while (c->cached != NULL) {
        mrc_kill(c, c->cached);
    }
    for (r = c->dead; r != NULL; r = r->next) {
        busy += r->refcount > 0;
    }
    all     = c->dead;
    c->dead = NULL;
    pthread_mutex_unlock(&c->lock);
    if (busy > 0) {
        coll_warn(IB, "registration cache destroyed with %d registration(s) still in use", busy);
    }
    mrc_release(c, all);
    pthread_mutex_destroy(&c->lock);
    coll_free(c);
}

int coll_ib_mrc_enabled(const coll_ib_mrc_t *c)
{
    return c->enabled;
}

void coll_ib_mrc_stats(const coll_ib_mrc_t *c, uint64_t *hits_p, uint64_t *misses_p,
                       uint64_t *evictions_p, uint64_t *invalidations_p)
{
    if (hits_p != NULL) {
        *hits_p = atomic_load_explicit(&c->hits, memory_order_relaxed);
    }
    if (misses_p != NULL) {
        *misses_p = atomic_load_explicit(&c->misses, memory_order_relaxed);
    }
    if (evictions_p != NULL) {
        *evictions_p = atomic_load_explicit(&c->evictions, memory_order_relaxed);
    }
    if (invalidations_p != NULL) {
        *invalidations_p = atomic_load_explicit(&c->invalidations, memory_order_relaxed);
    }
}

/* ---- get / put / invalidate ---- */

static coll_ib_mreg_t *mrc_lookup(coll_ib_mrc_t *c, uintptr_t start, uintptr_t end)
{
    coll_ib_mreg_t *r;

    for (r = c->cached; r != NULL && r->start <= start; r = r->next) {
        if (r->end >= end && r->handle != NULL) {
            return r;
        }
    }
    return NULL;
}

/* A miss. The entry goes into the cache first, without a handle (lookups skip it), so that an
 * invalidation while ops.reg runs outside the lock moves it to the dead list like any other:
 * then the caller still gets it, and its put deregisters it. */
static coll_result_t mrc_register(coll_ib_mrc_t *c, uintptr_t start, uintptr_t end,
                                  coll_ib_mreg_t **reg_p)
{
    coll_ib_mreg_t *r, *garbage;
    void           *handle;

    r = coll_calloc(1, sizeof(*r), "registration cache entry");
    if (r == NULL) {
        return COLL_ERR_NO_MEMORY;
    }
    r->start    = start;
    r->end      = end;
    r->refcount = 1;
    pthread_mutex_lock(&c->lock);
    r->last_use = ++c->tick;
    if (c->enabled) {
        mrc_insert(c, r);
        mrc_evict(c);
    } else {
        r->next = c->dead;
        c->dead = r;
    }
    garbage = mrc_collect(c);
    pthread_mutex_unlock(&c->lock);
    mrc_release(c, garbage);

    handle = c->ops.reg(c->cookie, (void *)start, end - start);
    if (handle == NULL) {
        int err = errno;

        pthread_mutex_lock(&c->lock);
        if (r->cached) {
            mrc_kill(c, r);
        }
        mrc_unlink(&c->dead, r);
        pthread_mutex_unlock(&c->lock);
        coll_free(r);
        coll_error(IB, "cannot register %zu bytes at %p: %s", (size_t)(end - start), (void *)start,
                   strerror(err));
        return COLL_ERR_TRANSPORT;
    }
    pthread_mutex_lock(&c->lock);
    r->handle = handle;
    pthread_mutex_unlock(&c->lock);
    *reg_p = r;
    return COLL_OK;
}

coll_result_t coll_ib_mrc_get(coll_ib_mrc_t *c, void *addr, size_t len, coll_ib_mreg_t **reg_p,
                              void **handle_p)
{
    uintptr_t       start = (uintptr_t)addr & ~c->page_mask;
    uintptr_t       end   = (uintptr_t)addr + (len > 0 ? len : 1);
    coll_ib_mreg_t *r, *garbage;

    if (end < (uintptr_t)addr || end + c->page_mask < end) {
        coll_error(IB, "cannot register %zu bytes at %p: range wraps around", len, addr);
        return COLL_ERR_INVALID_ARG;
    }
    end = (end + c->page_mask) & ~c->page_mask;

    pthread_mutex_lock(&c->lock);
    r = c->enabled ? mrc_lookup(c, start, end) : NULL;
    if (r != NULL) {
        r->refcount++;
        r->last_use = ++c->tick;
    }
    garbage = mrc_collect(c);
    pthread_mutex_unlock(&c->lock);
    mrc_release(c, garbage);

    if (r != NULL) {
        atomic_fetch_add_explicit(&c->hits, 1, memory_order_relaxed);
    } else {
        atomic_fetch_add_explicit(&c->misses, 1, memory_order_relaxed);
        COLL_CHECK(mrc_register(c, start, end, &r));
    }
    *reg_p    = r;
    *handle_p = r->handle;
    return COLL_OK;
}

void coll_ib_mrc_put(coll_ib_mrc_t *c, coll_ib_mreg_t *reg)
{
    coll_ib_mreg_t *garbage;

    pthread_mutex_lock(&c->lock);
    if (reg->refcount <= 0) {
        pthread_mutex_unlock(&c->lock);
        coll_error(IB, "registration cache: put of an unreferenced registration");
        return;
    }
    reg->refcount--;
    reg->last_use = ++c->tick;
    if (reg->cached && reg->refcount == 0) {
        mrc_evict(c); /* it may have been over the limits while everything was in use */
    }
    garbage = mrc_collect(c);
    pthread_mutex_unlock(&c->lock);
    mrc_release(c, garbage);
}

void coll_ib_mrc_invalidate(coll_ib_mrc_t *c, uintptr_t start, size_t len)
{
    uintptr_t       end = start + len < start ? UINTPTR_MAX : start + len;
    coll_ib_mreg_t *r, *next;

    if (len == 0) {
        return;
    }
    pthread_mutex_lock(&c->lock);
    for (r = c->cached; r != NULL && r->start < end; r = next) {
        next = r->next;
        if (r->end > start) {
            mrc_kill(c, r);
            atomic_fetch_add_explicit(&c->invalidations, 1, memory_order_relaxed);
        }
    }
    pthread_mutex_unlock(&c->lock);
}
