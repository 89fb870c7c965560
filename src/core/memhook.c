/* SPDX-License-Identifier: MIT */
/*
 * Memory hooks by symbol interposition: libcoll defines munmap, mremap, madvise and mmap with
 * default visibility, so that calls from the program and from other shared libraries resolve to
 * them (when libcoll comes first in the global lookup scope, which coll_memhook_effective
 * checks). munmap, mremap and madvise run the registered callbacks with the range about to go
 * away, then the real function found with dlsym(RTLD_NEXT); mmap runs them with the range it
 * mapped, after the real call: whatever was known of those addresses before is stale now, even
 * when the old mapping went away unseen. Not hooked: shmdt, brk, and the hidden calls glibc makes
 * from inside itself (its malloc): coll_memhook_keep_heap_mapped stops most of the latter (see
 * there what it cannot).
 *
 * Invariants: with no callback registered an interposer costs one relaxed atomic load; the
 * callbacks run under one mutex (so remove() waits for running calls), with errno preserved and
 * a per-thread guard so that memory they unmap goes straight to the real function. A forked
 * child starts with no callbacks.
 */
#include "config.h"
#include "memhook.h"
#include "log.h"

#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MEMHOOK_EXPORT __attribute__((visibility("default")))
/* A sanitizer's runtime intercepts these calls itself, and needs its own to run from the first
 * one (a definition of mmap in an executable built with -fsanitize=thread crashes it at start):
 * sanitizer builds have no hooks, and their caches stay off. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MEMHOOK_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) ||                         \
    __has_feature(memory_sanitizer)
#define MEMHOOK_SANITIZED 1
#endif
#endif
#define MEMHOOK_MAX 64

typedef int (*memhook_munmap_fn_t)(void *addr, size_t len);
typedef void *(*memhook_mremap_fn_t)(void *old, size_t old_len, size_t new_len, int flags, ...);
typedef int (*memhook_madvise_fn_t)(void *addr, size_t len, int advice);
typedef void *(*memhook_mmap_fn_t)(void *addr, size_t len, int prot, int flags, int fd, off_t off);

static struct {
    coll_memhook_fn_t fn;
    void             *arg;
} memhook_table[MEMHOOK_MAX];
static int             memhook_n;      /* entries of memhook_table, under memhook_lock */
static atomic_int      memhook_active; /* copy of memhook_n read without the lock */
static pthread_mutex_t memhook_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- callbacks ---- */

int coll_memhook_add(coll_memhook_fn_t fn, void *arg)
{
    int ret = -1;

    pthread_mutex_lock(&memhook_lock);
    if (memhook_n < MEMHOOK_MAX) {
        memhook_table[memhook_n].fn  = fn;
        memhook_table[memhook_n].arg = arg;
        memhook_n++;
        atomic_store_explicit(&memhook_active, memhook_n, memory_order_relaxed);
        ret = 0;
    }
    pthread_mutex_unlock(&memhook_lock);
    return ret;
}

void coll_memhook_remove(coll_memhook_fn_t fn, void *arg)
{
    int i;

    pthread_mutex_lock(&memhook_lock);
    for (i = 0; i < memhook_n; i++) {
        if (memhook_table[i].fn == fn && memhook_table[i].arg == arg) {
            memhook_table[i] = memhook_table[memhook_n - 1];
            memhook_n--;
            break;
        }
    }
    atomic_store_explicit(&memhook_active, memhook_n, memory_order_relaxed);
    pthread_mutex_unlock(&memhook_lock);
}

/* ---- the interposers ---- */
#ifndef MEMHOOK_SANITIZED

/* The next definitions in lookup order (libc's); NULL until the constructor ran, and then the
 * raw system call stands in. */
static _Atomic(memhook_munmap_fn_t)  memhook_real_munmap;
static _Atomic(memhook_mremap_fn_t)  memhook_real_mremap;
static _Atomic(memhook_madvise_fn_t) memhook_real_madvise;
static _Atomic(memhook_mmap_fn_t)    memhook_real_mmap;
static _Atomic(memhook_mmap_fn_t)    memhook_real_mmap64;

/* Set while this thread resolves symbols or runs callbacks: its own unmaps skip the hooks.
 * Read only once a callback exists (memhook_wanted), so that reaching it (a dlopen'ed
 * library's TLS may be allocated on first use) happens outside the fast path. Not
 * initial-exec: a library dlopen'ed late (from Python) finds no static TLS left. */
static __thread int memhook_busy;

static inline int memhook_wanted(size_t len)
{
    return atomic_load_explicit(&memhook_active, memory_order_relaxed) != 0 && len != 0 &&
           memhook_busy == 0;
}

static void memhook_notify(uintptr_t start, size_t len)
{
    int saved_errno = errno;
    int i;

    memhook_busy = 1;
    pthread_mutex_lock(&memhook_lock);
    for (i = 0; i < memhook_n; i++) {
        memhook_table[i].fn(memhook_table[i].arg, start, len);
    }
    pthread_mutex_unlock(&memhook_lock);
    memhook_busy = 0;
    errno        = saved_errno;
}

static int memhook_call_munmap(void *addr, size_t len)
{
    memhook_munmap_fn_t real = atomic_load_explicit(&memhook_real_munmap, memory_order_relaxed);

    if (real != NULL) {
        return real(addr, len);
    }
    return (int)syscall(SYS_munmap, addr, len); /* -1 and errno, as munmap */
}

MEMHOOK_EXPORT int munmap(void *addr, size_t len)
{
    if (memhook_wanted(len)) {
        memhook_notify((uintptr_t)addr, len);
    }
    return memhook_call_munmap(addr, len);
}

MEMHOOK_EXPORT void *mremap(void *old_addr, size_t old_len, size_t new_len, int flags, ...)
{
    memhook_mremap_fn_t real;
    void               *new_addr = NULL;
    va_list             ap;

    /* The fifth argument exists only with MREMAP_FIXED, as in the C library's own wrapper. */
    if ((flags & MREMAP_FIXED) != 0) {
        va_start(ap, flags);
        new_addr = va_arg(ap, void *);
        va_end(ap);
    }
    /* The old range goes away (or is resized in place: invalidating it is simply safe), and a
     * fixed destination replaces whatever was mapped there. */
    if (memhook_wanted(old_len)) {
        memhook_notify((uintptr_t)old_addr, old_len);
    }
    if ((flags & MREMAP_FIXED) != 0 && memhook_wanted(new_len)) {
        memhook_notify((uintptr_t)new_addr, new_len);
    }
    real = atomic_load_explicit(&memhook_real_mremap, memory_order_relaxed);
    if (real != NULL) {
        return real(old_addr, old_len, new_len, flags, new_addr);
    }
    return (void *)syscall(SYS_mremap, old_addr, old_len, new_len, flags, new_addr);
}

/* Advice that drops the pages (a later touch maps new ones); MADV_DONTFORK and the rest keep
 * them, so registrations stay valid. */
static int memhook_advice_discards(int advice)
{
    switch (advice) {
    case MADV_DONTNEED:
#ifdef MADV_FREE
    case MADV_FREE:
#endif
#ifdef MADV_REMOVE
    case MADV_REMOVE:
#endif
#ifdef MADV_DONTNEED_LOCKED
    case MADV_DONTNEED_LOCKED:
#endif
        return 1;
    default:
        return 0;
    }
}

MEMHOOK_EXPORT int madvise(void *addr, size_t len, int advice)
{
    memhook_madvise_fn_t real;

    if (memhook_wanted(len) && memhook_advice_discards(advice)) {
        memhook_notify((uintptr_t)addr, len);
    }
    real = atomic_load_explicit(&memhook_real_madvise, memory_order_relaxed);
    if (real != NULL) {
        return real(addr, len, advice);
    }
    return (int)syscall(SYS_madvise, addr, len, advice);
}

/* A new mapping: a registration of any of its addresses describes pages that are gone (their
 * unmapping may have been unseen: glibc's own, or mmap(MAP_FIXED) over them). */
static void *memhook_mmap_via(_Atomic(memhook_mmap_fn_t) *realp, void *addr, size_t len, int prot,
                              int flags, int fd, off_t off)
{
    memhook_mmap_fn_t real = atomic_load_explicit(realp, memory_order_relaxed);
    void             *p    = real != NULL ? real(addr, len, prot, flags, fd, off)
                                          : (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
    if (p != MAP_FAILED && memhook_wanted(len)) {
        memhook_notify((uintptr_t)p, len);
    }
    return p;
}

MEMHOOK_EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    return memhook_mmap_via(&memhook_real_mmap, addr, len, prot, flags, fd, off);
}

MEMHOOK_EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    return memhook_mmap_via(&memhook_real_mmap64, addr, len, prot, flags, fd, off);
}

/* Our own definitions, reached without the dynamic linker (a plain reference from position-
 * independent code would go through the GOT and find whichever definition comes first). Only
 * their addresses are taken; nothrow and leaf repeat the C library's declarations. */
#define MEMHOOK_SELF(_name) __attribute__((alias(#_name), visibility("hidden"), nothrow, leaf))
extern __typeof__(munmap) memhook_self_munmap   MEMHOOK_SELF(munmap);
extern __typeof__(mremap) memhook_self_mremap   MEMHOOK_SELF(mremap);
extern __typeof__(madvise) memhook_self_madvise MEMHOOK_SELF(madvise);
extern __typeof__(mmap) memhook_self_mmap       MEMHOOK_SELF(mmap);
extern __typeof__(mmap64) memhook_self_mmap64   MEMHOOK_SELF(mmap64);

/* fork: the child starts with no callbacks. Another thread of the parent may hold a lock a
 * callback needs (a cache's, in its get), forever in the child; and the child cannot use the
 * parent's registrations anyway. Holding memhook_lock across fork keeps the table consistent. */
static void memhook_fork_prepare(void)
{
    pthread_mutex_lock(&memhook_lock);
}

static void memhook_fork_parent(void)
{
    pthread_mutex_unlock(&memhook_lock);
}

static void memhook_fork_child(void)
{
    memhook_n = 0;
    atomic_store_explicit(&memhook_active, 0, memory_order_relaxed);
    pthread_mutex_unlock(&memhook_lock);
}

/* dlsym may allocate or unmap: the guard sends those calls to the system meanwhile. Never our
 * own definition (two copies of libcoll in one process): the system call then. */
/* The next definition of name in lookup order, never our own (self). */
static void *memhook_next(const char *name, void *self)
{
    void *f = dlsym(RTLD_NEXT, name);
    return f != self ? f : NULL;
}

__attribute__((constructor)) static void memhook_resolve(void)
{
    memhook_busy = 1;
    atomic_store(&memhook_real_munmap,
                 (memhook_munmap_fn_t)memhook_next("munmap", (void *)memhook_self_munmap));
    atomic_store(&memhook_real_mremap,
                 (memhook_mremap_fn_t)memhook_next("mremap", (void *)memhook_self_mremap));
    atomic_store(&memhook_real_madvise,
                 (memhook_madvise_fn_t)memhook_next("madvise", (void *)memhook_self_madvise));
    atomic_store(&memhook_real_mmap,
                 (memhook_mmap_fn_t)memhook_next("mmap", (void *)memhook_self_mmap));
    atomic_store(&memhook_real_mmap64,
                 (memhook_mmap_fn_t)memhook_next("mmap64", (void *)memhook_self_mmap64));
    memhook_busy = 0;
    pthread_atfork(memhook_fork_prepare, memhook_fork_parent, memhook_fork_child);
}

#endif /* MEMHOOK_SANITIZED */

/* ---- is anyone listening? ---- */

static pthread_once_t memhook_check_once = PTHREAD_ONCE_INIT;
static int            memhook_is_effective;
static char           memhook_why[320];

#ifdef MEMHOOK_SANITIZED
static void memhook_check(void)
{
    snprintf(memhook_why, sizeof(memhook_why),
             "libcoll was built with a sanitizer, whose interceptors of munmap, mremap, "
             "madvise and mmap come first: it has no memory hooks");
}
#else
static void memhook_check(void)
{
    const struct {
        const char *name;
        void       *self;
    } fns[] = {{"munmap", (void *)memhook_self_munmap},
               {"mremap", (void *)memhook_self_mremap},
               {"madvise", (void *)memhook_self_madvise},
               {"mmap", (void *)memhook_self_mmap}};
    size_t i;

    for (i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
        void       *found = dlsym(RTLD_DEFAULT, fns[i].name);
        const char *where = "nothing";
        Dl_info     info;

        if (found == fns[i].self) {
            continue;
        }
        if (found != NULL && dladdr(found, &info) != 0 && info.dli_fname != NULL) {
            where = info.dli_fname;
        }
        snprintf(memhook_why, sizeof(memhook_why),
                 "%s resolves to %s, not to libcoll's hook (libcoll loaded with RTLD_LOCAL, or "
                 "a sanitizer or another library interposes first)",
                 fns[i].name, where);
        return;
    }
    memhook_is_effective = 1;
}
#endif

int coll_memhook_effective(const char **why_p)
{
    pthread_once(&memhook_check_once, memhook_check);
    if (why_p != NULL) {
        *why_p = memhook_is_effective ? "" : memhook_why;
    }
    return memhook_is_effective;
}

/* ---- glibc's malloc ---- */

static pthread_once_t memhook_heap_once = PTHREAD_ONCE_INIT;

/* glibc frees large chunks and trims its heaps with internal calls no interposer sees; once
 * malloc never returns memory to the kernel, a freed and reused heap buffer keeps the pages
 * its cached registration points at. One arena: a thread's arena still maps a large request as
 * a chunk of its own (M_MMAP_MAX notwithstanding) and unmaps its heaps once empty, while the
 * main arena grows with brk and, untrimmed, keeps everything. Threads that are already using
 * an arena of their own keep it. Costs: freed memory stays in the process, and the threads'
 * mallocs share one lock. */
static void memhook_heap_setup(void)
{
#if defined(M_MMAP_MAX) && defined(M_TRIM_THRESHOLD) && defined(M_ARENA_MAX)
    int ok = mallopt(M_MMAP_MAX, 0) == 1;

    ok = ok && mallopt(M_TRIM_THRESHOLD, -1) == 1;
    ok = ok && mallopt(M_ARENA_MAX, 1) == 1;
    if (ok) {
        coll_info(MEM, "malloc keeps freed memory mapped from now on (M_MMAP_MAX 0, "
                       "M_TRIM_THRESHOLD -1, M_ARENA_MAX 1), so cached registrations of heap "
                       "buffers stay valid; chunks it mapped before, and arenas threads already "
                       "use, are still unmapped unseen");
    } else {
        coll_warn(MEM, "mallopt refused M_MMAP_MAX 0, M_TRIM_THRESHOLD -1 or M_ARENA_MAX 1: "
                       "freed heap memory may be unmapped unseen by the registration cache");
    }
#else
    coll_info(MEM, "no mallopt: freed heap memory may be unmapped unseen by the registration "
                   "cache");
#endif
}

void coll_memhook_keep_heap_mapped(void)
{
    pthread_once(&memhook_heap_once, memhook_heap_setup);
}
