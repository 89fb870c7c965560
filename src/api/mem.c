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
#include <sys/stat.h>
#include <unistd.h>

typedef struct mem_block {
    char             *base;
    size_t            bytes; /* mapped (whole pages) */
    int               fd;
    uint64_t          dev, ino; /* of the memfd: a peer that opens it checks them */
    int               holds;    /* registrations of it (coll_mem_free refuses while any) */
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
                                   "coll_mem_alloc: bytes is %zu, expected 1 to %zu", bytes,
                                   SIZE_MAX - page);
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
    struct stat sb;
    b = fstat(fd, &sb) == 0 ? coll_calloc(1, sizeof(*b), "coll_mem_alloc") : NULL;
    if (b == NULL) {
        munmap(p, len);
        close(fd);
        return coll_set_last_error(COLL_ERR_NO_MEMORY, "coll_mem_alloc: out of memory");
    }
    b->base  = p;
    b->bytes = len;
    b->fd    = fd;
    b->dev   = (uint64_t)sb.st_dev;
    b->ino   = (uint64_t)sb.st_ino;
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
            b = *pp;
            if (b->holds > 0) {
                int holds = b->holds;
                pthread_mutex_unlock(&mem_lock);
                return coll_set_last_error(COLL_ERR_INVALID_USAGE,
                                           "coll_mem_free: %p is still registered (%d "
                                           "registration(s)): coll_comm_deregister first",
                                           ptr, holds);
            }
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

int coll_mem_hold(const void *ptr, size_t bytes, coll_mem_ref_t *ref)
{
    const char *p     = ptr;
    int         found = 0;

    pthread_mutex_lock(&mem_lock);
    for (mem_block_t *b = mem_blocks; b != NULL; b = b->next) {
        if (p >= b->base && p < b->base + b->bytes && bytes <= (size_t)(b->base + b->bytes - p)) {
            b->holds++;
            ref->base  = b->base;
            ref->fd    = b->fd;
            ref->off   = (uint64_t)(p - b->base);
            ref->dev   = b->dev;
            ref->ino   = b->ino;
            ref->fsize = b->bytes;
            found      = 1;
            break;
        }
    }
    pthread_mutex_unlock(&mem_lock);
    return found;
}

void coll_mem_release(const void *base)
{
    pthread_mutex_lock(&mem_lock);
    for (mem_block_t *b = mem_blocks; b != NULL; b = b->next) {
        if (b->base == base && b->holds > 0) {
            b->holds--;
            break;
        }
    }
    pthread_mutex_unlock(&mem_lock);
}
