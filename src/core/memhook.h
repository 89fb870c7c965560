/* SPDX-License-Identifier: MIT */
/*
 * Memory hooks: learn that the process is about to unmap or discard memory, so that a cache of
 * RDMA registrations (transports/ib/ib_mr.c) can forget registrations of pages that go away.
 * The library exports its own munmap, mremap, madvise and mmap; each tells the registered
 * callbacks the affected range (mmap: the range it mapped, after the call) and calls the real
 * function. This header is internal (not COLL_API).
 * It does not see what glibc's malloc unmaps with its own hidden calls: see
 * coll_memhook_keep_heap_mapped().
 */
#ifndef COLL_CORE_MEMHOOK_H
#define COLL_CORE_MEMHOOK_H

#include <stddef.h>
#include <stdint.h>

/* Called with [start, start + len) before that range is unmapped, remapped or discarded (after
 * a new mapping of it), in
 * whichever thread does it. Never re-entered from its own thread: memory the callback itself
 * unmaps goes straight to the system. It must not call coll_memhook_add/remove. */
typedef void (*coll_memhook_fn_t)(void *arg, uintptr_t start, size_t len);

/* 0, or -1 when the (small, fixed) table is full. A forked child starts with an empty table. */
int coll_memhook_add(coll_memhook_fn_t fn, void *arg);

/* Removes (fn, arg); on return no call of it is running or will start. */
void coll_memhook_remove(coll_memhook_fn_t fn, void *arg);

/* 1 when munmap, mremap, madvise and mmap called anywhere in the process (the program, any shared
 * library) reach the hooks. 0 otherwise (libcoll loaded with RTLD_LOCAL, a sanitizer or another
 * library interposing first), with a static string saying why in *why_p (may be NULL). */
int coll_memhook_effective(const char **why_p);

/* Once per process: make glibc's malloc keep freed memory mapped (no mmap'ed chunks, no trim,
 * one arena), because the unmapping it does itself never reaches the hooks. Chunks mapped
 * before, and arenas threads already use, stay out of reach. Logged once under MEM. */
void coll_memhook_keep_heap_mapped(void);

#endif
