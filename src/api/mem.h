/* SPDX-License-Identifier: MIT */
/*
 * Shareable memory (src/api/mem.c): the allocations of coll_mem_alloc, looked up by address.
 */
#ifndef COLL_API_MEM_H
#define COLL_API_MEM_H

#include <stddef.h>
#include <stdint.h>
#include "coll.h"

/* Does [ptr, ptr + bytes) lie in one coll_mem_alloc allocation? 1 with its memfd and the offset
 * of ptr in it; 0 not. */
int coll_mem_find(const void *ptr, size_t bytes, int *fd_p, uint64_t *off_p);

#endif
