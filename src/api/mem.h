/* SPDX-License-Identifier: MIT */
/*
 * Shareable memory (src/api/mem.c): the allocations of coll_mem_alloc, looked up by address.
 */
#ifndef COLL_API_MEM_H
#define COLL_API_MEM_H

#include <stddef.h>
#include <stdint.h>
#include "coll.h"

/* The allocation behind a registered buffer. */
typedef struct coll_mem_ref {
    const void *base;            /* of the allocation: for coll_mem_release */
    int         fd;              /* its memfd */
    uint64_t    off;             /* of the buffer in it */
    uint64_t    dev, ino, fsize; /* what a peer that opens the memfd must find */
} coll_mem_ref_t;

/* Does [ptr, ptr + bytes) lie in one coll_mem_alloc allocation? 1 with *ref filled and the
 * allocation held (coll_mem_free refuses it until coll_mem_release(ref->base)); 0 not. */
int  coll_mem_hold(const void *ptr, size_t bytes, coll_mem_ref_t *ref);
void coll_mem_release(const void *base);

#endif
