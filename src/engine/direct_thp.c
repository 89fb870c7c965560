/* SPDX-License-Identifier: MIT */
/*
 * Huge pages for the buffers cross-memory attach moves (direct_cma.c): the kernel pins and maps
 * every page of a peer's buffer it copies, and on 4 KiB pages that costs a third of the copy
 * (bench/README.md, "Cross-memory attach's own rate"); on 2 MiB pages it comes within a tenth of
 * memcpy. So a rank advises the 2 MiB-aligned inside of each buffer it hands to the path
 * (MADV_HUGEPAGE) and has the kernel rebuild what is there from huge pages (MADV_COLLAPSE,
 * Linux 6.1), at every call: a range already on huge pages costs the kernel a walk of its page
 * tables (about 10 us for 256 MiB), and a buffer freed and mapped again at the same address is
 * rebuilt as it should be. Only ranges the kernel refused are remembered, and not tried again.
 * Both are advice: the contents, and whether the memory is private or shared, stay as they were.
 * Not here: registered memory (shared, never moved by the kernel), buffers smaller than
 * COLL_DIRECT_THP_MIN.
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
#define THP_SIZE    ((uintptr_t)2 << 20)
#define THP_REFUSED 64 /* refused ranges remembered; the oldest is forgotten first */

static struct {
    pthread_mutex_t mu;
    int             state; /* 0 unknown, 1 advise, -1 THP off ("never" or no THP: once logged) */
    unsigned        next;
    uintptr_t       lo[THP_REFUSED], hi[THP_REFUSED];
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

/* Did the kernel refuse [lo, hi) or a range holding it before? Under thp.mu. */
static int thp_refused(uintptr_t lo, uintptr_t hi)
{
    for (unsigned i = 0; i < THP_REFUSED; i++) {
        if (thp.lo[i] <= lo && hi <= thp.hi[i]) {
            return 1;
        }
    }
    return 0;
}

static void thp_refusal(uintptr_t lo, uintptr_t hi, const char *what, int err)
{
    pthread_mutex_lock(&thp.mu);
    thp.lo[thp.next % THP_REFUSED] = lo;
    thp.hi[thp.next % THP_REFUSED] = hi;
    thp.next++;
    pthread_mutex_unlock(&thp.mu);
    /* a kernel before 6.1, or memory it cannot rebuild (EINVAL; EAGAIN, ENOMEM: no huge page
     * free): pages faulted from now on come huge where MADV_HUGEPAGE held */
    coll_info(MEM,
              "madvise(%s) of %zu MiB at %p: %s (pages already there stay small; not tried "
              "again for this range)",
              what, (size_t)(hi - lo) >> 20, (void *)lo, strerror(err));
}

void coll_direct_thp_advise(const void *buf, size_t bytes)
{
    uintptr_t lo = ((uintptr_t)buf + THP_SIZE - 1) & ~(THP_SIZE - 1);
    uintptr_t hi = ((uintptr_t)buf + bytes) & ~(THP_SIZE - 1);
    int       skip;

    if (buf == NULL || bytes < coll_param_size(COLL_P_DIRECT_THP_MIN) || hi <= lo ||
        !coll_param_bool(COLL_P_DIRECT_THP)) {
        return;
    }
    pthread_mutex_lock(&thp.mu);
    if (thp.state == 0) {
        thp.state = thp_allowed();
    }
    skip = thp.state < 0 || thp_refused(lo, hi);
    pthread_mutex_unlock(&thp.mu);
    if (skip) {
        return;
    }
    /* outside the lock: the first collapse of a range copies it, which takes a while */
    if (madvise((void *)lo, hi - lo, MADV_HUGEPAGE) != 0) {
        thp_refusal(lo, hi, "MADV_HUGEPAGE", errno);
    } else if (madvise((void *)lo, hi - lo, MADV_COLLAPSE) != 0) {
        thp_refusal(lo, hi, "MADV_COLLAPSE", errno);
    }
}
