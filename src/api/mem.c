/* SPDX-License-Identifier: MIT */
/*
 * Shareable memory (coll_mem_alloc, coll_mem_free): each allocation is a memfd of its own, mapped
 * shared, so that another process of the host can map the same pages (it opens the memfd through
 * /proc/<pid>/fd, src/api/register.c). The process keeps a table of its allocations to tell
 * whether a buffer lies in one, and which file and offset back it.
 */
#include "api/mem.h"
#include "error.h"
#include "log.h"
#include "util.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct mem_block {
    char             *base;
    size_t            bytes; /* mapped (whole pages) */
    int               fd;
    struct mem_block *next;
} mem_block_t;

static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;
static mem_block_t    *mem_blocks;

COLL_API coll_result_t coll_mem_alloc(void **ptr_p, size_t bytes)
{
    size_t       page = (size_t)sysconf(_SC_PAGESIZE);
    size_t       len;
    mem_block_t *b;
    void        *p;
    int          fd;

    if (ptr_p == NULL) {
        return coll_set_last_error(COLL_ERR_INVALID_ARG, "coll_mem_alloc: ptr_p is NULL");
    }
    if (bytes == 0 || bytes > SIZE_MAX - page) {
        return coll_set_last_error(COLL_ERR_INVALID_ARG,
                                   "coll_mem_alloc: bytes is %zu, expected at least 1", bytes);
    }
    len = (bytes + page - 1) / page * page;
    fd  = memfd_create("coll-mem", MFD_CLOEXEC);
    if (fd < 0) {
        return coll_set_last_error(COLL_ERR_SYSTEM, "coll_mem_alloc: memfd_create: %s",
                                   strerror(errno));
    }
    if (ftruncate(fd, (off_t)len) != 0) {
        int e = errno;
        close(fd);
        return coll_set_last_error(e == ENOMEM || e == ENOSPC ? COLL_ERR_NO_MEMORY
                                                              : COLL_ERR_SYSTEM,
                                   "coll_mem_alloc: ftruncate to %zu bytes: %s", len, strerror(e));
    }
    p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        int e = errno;
        close(fd);
        return coll_set_last_error(e == ENOMEM ? COLL_ERR_NO_MEMORY : COLL_ERR_SYSTEM,
                                   "coll_mem_alloc: mmap of %zu bytes: %s", len, strerror(e));
    }
    b = coll_calloc(1, sizeof(*b), "coll_mem_alloc");
    if (b == NULL) {
        munmap(p, len);
        close(fd);
        return coll_set_last_error(COLL_ERR_NO_MEMORY, "coll_mem_alloc: out of memory");
    }
    b->base  = p;
    b->bytes = len;
    b->fd    = fd;
    pthread_mutex_lock(&mem_lock);
    b->next    = mem_blocks;
    mem_blocks = b;
    pthread_mutex_unlock(&mem_lock);
    coll_debug(COLL, "coll_mem_alloc: %zu bytes at %p (memfd %d)", len, p, fd);
    *ptr_p = p;
    return COLL_OK;
}

COLL_API coll_result_t coll_mem_free(void *ptr)
{
    mem_block_t **pp, *b = NULL;

    if (ptr == NULL) {
        return COLL_OK;
    }
    pthread_mutex_lock(&mem_lock);
    for (pp = &mem_blocks; *pp != NULL; pp = &(*pp)->next) {
        if ((*pp)->base == ptr) {
            b   = *pp;
            *pp = b->next;
            break;
        }
    }
    pthread_mutex_unlock(&mem_lock);
    if (b == NULL) {
        return coll_set_last_error(COLL_ERR_INVALID_ARG,
                                   "coll_mem_free: %p is not memory from coll_mem_alloc", ptr);
    }
    munmap(b->base, b->bytes);
    close(b->fd);
    coll_free(b);
    return COLL_OK;
}

int coll_mem_find(const void *ptr, size_t bytes, int *fd_p, uint64_t *off_p)
{
    const char *p     = ptr;
    int         found = 0;

    pthread_mutex_lock(&mem_lock);
    for (const mem_block_t *b = mem_blocks; b != NULL; b = b->next) {
        if (p >= b->base && p < b->base + b->bytes && bytes <= (size_t)(b->base + b->bytes - p)) {
            *fd_p  = b->fd;
            *off_p = (uint64_t)(p - b->base);
            found  = 1;
            break;
        }
    }
    pthread_mutex_unlock(&mem_lock);
    return found;
}
