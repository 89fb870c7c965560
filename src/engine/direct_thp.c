/* SPDX-License-Identifier: MIT */
/*
 * Huge pages for the buffers cross-memory attach moves (direct_cma.c): the kernel pins and maps
 * every page of a peer's buffer it copies, and on 4 KiB pages that costs a third of the copy
 * (bench/README.md, "Cross-memory attach's own rate"); on 2 MiB pages it comes within a tenth of
 * memcpy. So a rank advises the 2 MiB-aligned inside of each buffer it hands to the path
 * (MADV_HUGEPAGE) and has the kernel rebuild what is already there from huge pages at once
 * (MADV_COLLAPSE, Linux 6.1), the first time it sees the range. Both are advice: the contents,
 * and whether the memory is private or shared, stay as they were. Not here: registered memory
 * (shared, never moved by the kernel), buffers smaller than COLL_DIRECT_THP_MIN.
 */
#include "direct.h"
#include "log.h"
#include "param.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25 /* Linux 6.1; older kernels answer EINVAL */
#endif
#define THP_SIZE ((uintptr_t)2 << 20)
#define THP_SEEN 64 /* ranges remembered; the oldest is forgotten first */

static struct {
    pthread_mutex_t mu;
    int             state; /* 0 unknown, 1 advise, -1 THP off ("never" or no THP: once logged) */
    unsigned        next;
    uintptr_t       lo[THP_SEEN], hi[THP_SEEN];
} thp = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* The administrator's "never" is kept: MADV_COLLAPSE would ignore it. */
static int thp_allowed(void)
{
    char  line[128] = "";
    FILE *f         = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");

    if (f != NULL) {
        if (fgets(line, sizeof(line), f) == NULL) {
            line[0] = '\0';
        }
        fclose(f);
    }
    if (f == NULL || strstr(line, "[never]") != NULL) {
        coll_info(MEM,
                  "transparent huge pages %s: buffers moved by cross-memory attach stay on "
                  "the pages they have",
                  f == NULL ? "are not in this kernel" : "are set to \"never\"");
        return -1;
    }
    return 1;
}

/* Has [lo, hi) been advised already? If not, remember it (under thp.mu). */
static int thp_seen(uintptr_t lo, uintptr_t hi)
{
    for (unsigned i = 0; i < THP_SEEN; i++) {
        if (thp.lo[i] <= lo && hi <= thp.hi[i]) {
            return 1;
        }
    }
    thp.lo[thp.next % THP_SEEN] = lo;
    thp.hi[thp.next % THP_SEEN] = hi;
    thp.next++;
    return 0;
}

void coll_direct_thp_advise(const void *buf, size_t bytes)
{
    uintptr_t lo = ((uintptr_t)buf + THP_SIZE - 1) & ~(THP_SIZE - 1);
    uintptr_t hi = ((uintptr_t)buf + bytes) & ~(THP_SIZE - 1);
    int       seen;

    if (buf == NULL || bytes < coll_param_size(COLL_P_DIRECT_THP_MIN) || hi <= lo ||
        !coll_param_bool(COLL_P_DIRECT_THP)) {
        return;
    }
    pthread_mutex_lock(&thp.mu);
    if (thp.state == 0) {
        thp.state = thp_allowed();
    }
    seen = thp.state < 0 || thp_seen(lo, hi);
    pthread_mutex_unlock(&thp.mu);
    if (seen) {
        return;
    }
    /* outside the lock: a collapse copies the range once, which takes a while */
    if (madvise((void *)lo, hi - lo, MADV_HUGEPAGE) != 0) {
        coll_info(MEM, "madvise(MADV_HUGEPAGE) of %zu MiB at %p: %s", (size_t)(hi - lo) >> 20,
                  (void *)lo, strerror(errno));
        return;
    }
    /* a kernel before 6.1, or memory it cannot rebuild (EINVAL; EAGAIN, ENOMEM: no huge page
     * free): pages faulted from now on come huge, those already there stay as they are */
    if (madvise((void *)lo, hi - lo, MADV_COLLAPSE) != 0) {
        coll_info(MEM,
                  "madvise(MADV_COLLAPSE) of %zu MiB at %p: %s (pages already there stay "
                  "small)",
                  (size_t)(hi - lo) >> 20, (void *)lo, strerror(errno));
        return;
    }
    coll_debug(MEM, "huge pages for %zu MiB at %p, of a buffer moved by cross-memory attach",
               (size_t)(hi - lo) >> 20, (void *)lo);
}
