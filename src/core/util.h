/* SPDX-License-Identifier: MIT */
/*
 * Small platform helpers every layer uses: monotonic time, allocation wrappers (so out-of-memory
 * is always logged once), hashing for ids and tags, bounded string copy, random bytes.
 */
#ifndef COLL_CORE_UTIL_H
#define COLL_CORE_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include "coll.h"

static inline double coll_time_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline uint64_t coll_time_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Allocation: NULL on failure after logging what and how much (subsystem MEM). */
void *coll_malloc(size_t size, const char *what);
void *coll_calloc(size_t n, size_t size, const char *what);
void *coll_realloc(void *p, size_t size, const char *what);
void  coll_free(void *p);

/* 64-bit mixing hash (splitmix finaliser) and FNV-1a over bytes. */
static inline uint64_t coll_hash64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}
uint64_t coll_hash_bytes(const void *data, size_t len, uint64_t seed);

/* Fill buf with random bytes from getrandom(2) (or /dev/urandom). */
coll_result_t coll_random_bytes(void *buf, size_t len);

/* strncpy that always terminates; returns dst. */
char *coll_strlcpy(char *dst, const char *src, size_t size);

/* Host identity: COLL_HOSTID if set, else hostname + boot id; hashed for comparisons. */
/* Prefer NUMA node `node` (os index) for the pages of [addr, addr + len) not yet allocated
 * (mbind, MPOL_PREFERRED, through the raw system call: no libnuma). addr is page aligned.
 * COLL_ERR_SYSTEM (logged at INFO) where the kernel refuses. */
coll_result_t coll_mem_prefer_node(void *addr, size_t len, int node);

uint64_t    coll_host_hash(void);
const char *coll_hostname(void);

#endif
