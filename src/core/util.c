/* SPDX-License-Identifier: MIT */
/*
 * Platform helpers: logged allocation, hashing, random bytes, host identity. Host identity is
 * what decides "same host" (shared memory reachable): COLL_HOSTID if set, else the hostname
 * plus the kernel boot id, so two containers with one hostname on different machines differ.
 */
#include "util.h"
#include "log.h"
#include "param.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

void *coll_malloc(size_t size, const char *what)
{
    void *p = malloc(size == 0 ? 1 : size);
    if (p == NULL) {
        coll_error(MEM, "out of memory allocating %zu bytes for %s", size, what);
    }
    return p;
}

void *coll_calloc(size_t n, size_t size, const char *what)
{
    void *p = calloc(n == 0 ? 1 : n, size == 0 ? 1 : size);
    if (p == NULL) {
        coll_error(MEM, "out of memory allocating %zu x %zu bytes for %s", n, size, what);
    }
    return p;
}

void *coll_realloc(void *old, size_t size, const char *what)
{
    void *p = realloc(old, size == 0 ? 1 : size);
    if (p == NULL) {
        coll_error(MEM, "out of memory growing %s to %zu bytes", what, size);
    }
    return p;
}

void coll_free(void *p)
{
    free(p);
}

uint64_t coll_hash_bytes(const void *data, size_t len, uint64_t seed)
{
    const unsigned char *b = data;
    uint64_t             h = 0xcbf29ce484222325ull ^ seed;
    for (size_t i = 0; i < len; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return coll_hash64(h);
}

coll_result_t coll_random_bytes(void *buf, size_t len)
{
    unsigned char *p = buf;
    while (len > 0) {
        ssize_t n = getrandom(p, len, 0);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            coll_error(INIT, "getrandom failed: %s", strerror(errno));
            return COLL_ERR_SYSTEM;
        }
        p += n;
        len -= (size_t)n;
    }
    return COLL_OK;
}

char *coll_strlcpy(char *dst, const char *src, size_t size)
{
    if (size == 0) {
        return dst;
    }
    size_t n = strnlen(src, size - 1);
    memcpy(dst, src, n);
    dst[n] = '\0';
    return dst;
}

static pthread_once_t util_host_once = PTHREAD_ONCE_INIT;
static char           util_hostname[256];
static uint64_t       util_host_hash;

static void util_host_init(void)
{
    char boot_id[64] = "";
    if (gethostname(util_hostname, sizeof(util_hostname) - 1) != 0) {
        coll_strlcpy(util_hostname, "unknown", sizeof(util_hostname));
    }
    const char *override = coll_param_str(COLL_P_HOSTID);
    if (override != NULL && override[0] != '\0') {
        util_host_hash = coll_hash_bytes(override, strlen(override), 0x486f7374ull);
        return;
    }
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n              = read(fd, boot_id, sizeof(boot_id) - 1);
        boot_id[n > 0 ? n : 0] = '\0';
        close(fd);
    }
    util_host_hash = coll_hash_bytes(util_hostname, strlen(util_hostname), 0x486f7374ull) ^
                     coll_hash_bytes(boot_id, strlen(boot_id), 0x426f6f74ull);
}

uint64_t coll_host_hash(void)
{
    pthread_once(&util_host_once, util_host_init);
    return util_host_hash;
}

const char *coll_hostname(void)
{
    pthread_once(&util_host_once, util_host_init);
    return util_hostname;
}

#define COLL_MPOL_PREFERRED 1    /* <linux/mempolicy.h>: try this node first, fall back */
#define COLL_MEM_MAX_NODES  1024 /* bits of the node mask passed to the kernel */

coll_result_t coll_mem_prefer_node(void *addr, size_t len, int node)
{
#ifdef SYS_mbind
    unsigned long mask[COLL_MEM_MAX_NODES / (8 * sizeof(unsigned long))] = {0};
    const size_t  bits = 8 * sizeof(unsigned long);

    if (node < 0 || node >= COLL_MEM_MAX_NODES) {
        return COLL_ERR_INVALID_ARG;
    }
    mask[(size_t)node / bits] |= 1ul << ((size_t)node % bits);
    /* maxnode counts one more than the mask's bits: the kernel drops the last one */
    if (syscall(SYS_mbind, addr, len, COLL_MPOL_PREFERRED, mask, COLL_MEM_MAX_NODES + 1, 0) != 0) {
        coll_info(MEM, "mbind of %zu bytes to NUMA node %d failed: %s", len, node, strerror(errno));
        return COLL_ERR_SYSTEM;
    }
    return COLL_OK;
#else
    coll_info(MEM, "mbind is not available on this system: memory stays where the kernel puts it");
    return COLL_ERR_UNSUPPORTED;
#endif
}
