/* SPDX-License-Identifier: MIT */
/*
 * cma_bw -- cross-memory attach against memcpy: the copy rate of process_vm_readv(2) and
 * process_vm_writev(2) between this process and a forked child's buffer, in blocks of a given
 * size, beside memcpy between two buffers of this process in blocks of that size and in one
 * call (memcpy1: glibc streams a copy that large past the caches), one thread. The direct path on
 * buffers nobody registered (src/engine/direct_cma.c) moves its bytes with these calls, so
 * their rate, not memcpy's, bounds it (bench/README, "Cross-memory attach"). Buffers are
 * advised to use transparent huge pages, or not (-H 0), and written before timing.
 * Prints "kind MiB block_KiB huge GB/s" lines, GB/s = bytes copied / s (1e9), the median of
 * the repetitions.
 * Run: bench/cma_bw [-m MIB] [-b BLOCK_KIB] [-r REPS] [-H 0|1]
 */
#include "bench_time.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#define CB_MAX_REPS 64

static char *cb_alloc(size_t bytes, int huge)
{
    void *p = NULL;
    if (posix_memalign(&p, (size_t)2 << 20, bytes) != 0) {
        return NULL;
    }
#ifdef MADV_HUGEPAGE
    (void)madvise(p, bytes, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
#endif
    memset(p, 1, bytes);
    return p;
}

/* One pass of bytes between local and the child's remote, block bytes per call. */
static int cb_pass(pid_t child, int write, char *local, uintptr_t remote, size_t bytes,
                   size_t block)
{
    for (size_t off = 0; off < bytes; off += block) {
        size_t       n = bytes - off < block ? bytes - off : block;
        struct iovec l = {local + off, n}, r = {(void *)(remote + off), n};
        ssize_t      got = write ? process_vm_writev(child, &l, 1, &r, 1, 0)
                                 : process_vm_readv(child, &l, 1, &r, 1, 0);
        if (got != (ssize_t)n) {
            fprintf(stderr, "cma_bw: process_vm_%s: %s\n", write ? "writev" : "readv",
                    got < 0 ? strerror(errno) : "short transfer");
            return -1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    size_t mib = 128, block_kib = 256;
    int    reps = 5, huge = 1, c, pfd[2];

    while ((c = getopt(argc, argv, "m:b:r:H:h")) != -1) {
        switch (c) {
        case 'm':
            mib = strtoull(optarg, NULL, 10);
            break;
        case 'b':
            block_kib = strtoull(optarg, NULL, 10);
            break;
        case 'r':
            reps = atoi(optarg);
            break;
        case 'H':
            huge = atoi(optarg) != 0;
            break;
        default:
            fprintf(stderr, "usage: cma_bw [-m MIB] [-b BLOCK_KIB] [-r REPS] [-H 0|1]\n");
            return c == 'h' ? 0 : 2;
        }
    }
    if (optind != argc || mib < 1 || mib > 65536 || block_kib < 4 || block_kib > mib * 1024 ||
        reps < 1 || reps > CB_MAX_REPS) {
        fprintf(stderr, "cma_bw: -m 1..65536, -b 4..MIB*1024, -r 1..%d\n", CB_MAX_REPS);
        return 2;
    }
    size_t bytes = mib << 20, block = block_kib << 10;
    if (pipe(pfd) != 0) {
        perror("cma_bw: pipe");
        return 1;
    }
    pid_t child = fork();
    if (child < 0) {
        perror("cma_bw: fork");
        return 1;
    }
    if (child == 0) { /* holds its buffer and waits to be killed */
        char     *x    = cb_alloc(bytes, huge);
        uintptr_t addr = (uintptr_t)x;
        if (write(pfd[1], &addr, sizeof(addr)) != (ssize_t)sizeof(addr) || x == NULL) {
            _exit(1);
        }
        for (;;) {
            pause();
        }
    }
    uintptr_t remote = 0;
    char     *a = cb_alloc(bytes, huge), *b = cb_alloc(bytes, huge);
    int       rc = 0;
    if (read(pfd[0], &remote, sizeof(remote)) != (ssize_t)sizeof(remote) || remote == 0 ||
        a == NULL || b == NULL) {
        fprintf(stderr, "cma_bw: no buffer (out of memory?)\n");
        rc = 1;
    }
    static const char *const kinds[4] = {"readv", "writev", "memcpy", "memcpy1"};
    for (int k = 0; k < 4 && rc == 0; k++) {
        double gbs[CB_MAX_REPS];
        for (int i = 0; i < reps && rc == 0; i++) {
            double t0 = bench_now_s();
            if (k == 3) {
                memcpy(a, b, bytes);
            } else if (k == 2) {
                for (size_t off = 0; off < bytes; off += block) {
                    memcpy(a + off, b + off, bytes - off < block ? bytes - off : block);
                }
            } else {
                rc = cb_pass(child, k == 1, a, remote, bytes, block);
            }
            gbs[i] = (double)bytes / (bench_now_s() - t0) / 1e9;
        }
        if (rc == 0) {
            printf("%-7s %zu %zu %d %.2f\n", kinds[k], mib, block_kib, huge,
                   bench_median(gbs, reps));
        }
    }
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    free(a);
    free(b);
    return rc;
}
