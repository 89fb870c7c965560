/* SPDX-License-Identifier: MIT */
/*
 * Soak: many small collectives on one communicator, then many communicator create/destroy
 * cycles (coll_comm_split of the world, each a fresh bootstrap, transport connections and
 * /dev/shm segments), checking on every rank that resident memory, open file descriptors and
 * mapped /dev/shm segments stay flat, and that every segment a destroyed communicator mapped
 * is gone from /dev/shm; then a shm job with a rank killed by SIGKILL, after which none of the
 * segments its ranks mapped may be left in /dev/shm. The default counts suit make check; the
 * full soak is
 *   tests/mp/test_soak --colls 1000000 --cycles 10000
 * Usage: test_soak [--colls N] [--cycles M] [--ranks R]
 */
#include "coll_test.h"

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#define SOAK_RSS_SLACK (1024 * 1024) /* allocator noise allowed over the run, bytes */
/* AddressSanitizer's quarantine holds freed memory back (RSS grows by design there); its own
 * leak check covers that build, and fds and segments are still checked. */
#if defined(__SANITIZE_ADDRESS__)
#define SOAK_RSS_OK(_base, _end) 1
#else
#define SOAK_RSS_OK(_base, _end) ((_end).rss - (_base).rss <= SOAK_RSS_SLACK)
#endif
#define SOAK_MAX_SEGS 64

typedef struct {
    long colls;
    long cycles;
} soak_args_t;

typedef struct {
    long rss; /* bytes */
    int  fds;
    int  segs; /* /dev/shm/coll-* mappings of this process */
} soak_sample_t;

static double now_s(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + 1e-6 * (double)tv.tv_usec;
}

/* The distinct /dev/shm/coll-* files this process maps; names into names[] if not NULL. */
static int soak_segs(char names[][64], int max)
{
    char  line[512], seen[SOAK_MAX_SEGS][64];
    int   n = 0;
    FILE *f = fopen("/proc/self/maps", "r");
    if (f == NULL) {
        return -1;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        char *p = strstr(line, "/dev/shm/coll-");
        if (p == NULL) {
            continue;
        }
        char name[64];
        sscanf(p + strlen("/dev/shm/"), "%63s", name);
        int dup = 0;
        for (int i = 0; i < n; i++) {
            dup |= strcmp(seen[i], name) == 0;
        }
        if (!dup && n < SOAK_MAX_SEGS) {
            strcpy(seen[n], name);
            if (names != NULL && n < max) {
                strcpy(names[n], name);
            }
            n++;
        }
    }
    fclose(f);
    return n;
}

static soak_sample_t soak_sample(void)
{
    soak_sample_t s = {0, 0, 0};
    long          pages_total, pages_rss;
    FILE         *f = fopen("/proc/self/statm", "r");
    if (f != NULL) {
        if (fscanf(f, "%ld %ld", &pages_total, &pages_rss) == 2) {
            s.rss = pages_rss * sysconf(_SC_PAGESIZE);
        }
        fclose(f);
    }
    DIR *d = opendir("/proc/self/fd");
    if (d != NULL) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            s.fds += e->d_name[0] != '.';
        }
        closedir(d);
        s.fds--; /* the directory stream itself */
    }
    s.segs = soak_segs(NULL, 0);
    return s;
}

static void soak_print(int rank, const char *what, const soak_sample_t *a, const soak_sample_t *b)
{
    printf("rank %d %s: rss %ld -> %ld KiB, fds %d -> %d, shm segments %d -> %d\n", rank, what,
           a->rss / 1024, b->rss / 1024, a->fds, b->fds, a->segs, b->segs);
    fflush(stdout);
}

/* ---- 1: small all-reduces on the world communicator ---- */
static int soak_colls(int rank, int n, coll_comm_t *comm, long colls)
{
    float         x[8], y[8];
    soak_sample_t base, end;
    for (int i = 0; i < 8; i++) {
        x[i] = (float)(rank + i);
    }
    for (int i = 0; i < 1000; i++) { /* warm up: caches, spare buffers, schedules */
        ASSERT_OK(coll_allreduce(x, y, 8, COLL_FLOAT32, COLL_SUM, comm));
    }
    base      = soak_sample();
    double t0 = now_s();
    for (long i = 0; i < colls; i++) {
        ASSERT_OK(coll_allreduce(x, y, 8, COLL_FLOAT32, COLL_SUM, comm));
        if ((i & 1023) == 0) {
            ASSERT_EQ(y[7], (float)(n * 7 + n * (n - 1) / 2));
        }
    }
    double dt = now_s() - t0;
    end       = soak_sample();
    if (rank == 0) {
        printf("%ld all-reduces of 8 floats on %d ranks in %.1f s (%.1f us each)\n", colls, n, dt,
               1e6 * dt / (double)(colls > 0 ? colls : 1));
    }
    soak_print(rank, "after the collectives", &base, &end);
    ASSERT_TRUE(SOAK_RSS_OK(base, end));
    ASSERT_EQ(end.fds, base.fds);
    ASSERT_EQ(end.segs, base.segs);
    return 0;
}

/* ---- 2: communicators made and destroyed; every segment gone after each destroy ---- */
static int soak_cycle(int rank, coll_comm_t *world)
{
    char         before[SOAK_MAX_SEGS][64], during[SOAK_MAX_SEGS][64], path[128];
    coll_comm_t *sub = NULL;
    int          nb = soak_segs(before, SOAK_MAX_SEGS), x = 1, y = 0, size = 0;
    ASSERT_OK(coll_comm_split(world, 0, rank, &sub));
    ASSERT_OK(coll_comm_size(sub, &size));
    ASSERT_OK(coll_allreduce(&x, &y, 1, COLL_INT32, COLL_SUM, sub));
    ASSERT_EQ(y, size);
    int nd = soak_segs(during, SOAK_MAX_SEGS);
    ASSERT_OK(coll_comm_destroy(sub));
    for (int i = 0; i < nd; i++) {
        int old = 0;
        for (int j = 0; j < nb; j++) {
            old |= strcmp(during[i], before[j]) == 0;
        }
        snprintf(path, sizeof(path), "/dev/shm/%.63s", during[i]);
        ASSERT_TRUE(old || access(path, F_OK) != 0); /* the new communicator's: removed */
    }
    return 0;
}

static int soak_cycles(int rank, coll_comm_t *world, long cycles)
{
    soak_sample_t base, end;
    long          warm = cycles < 20 ? cycles : 20;
    for (long i = 0; i < warm; i++) {
        ASSERT_EQ(soak_cycle(rank, world), 0);
    }
    base      = soak_sample();
    double t0 = now_s();
    for (long i = warm; i < cycles; i++) {
        if (soak_cycle(rank, world) != 0) {
            printf("rank %d: cycle %ld of %ld failed\n", rank, i, cycles);
            return 1;
        }
    }
    end = soak_sample();
    if (rank == 0) {
        printf("%ld communicator create/destroy cycles in %.1f s\n", cycles, now_s() - t0);
    }
    soak_print(rank, "after the cycles", &base, &end);
    ASSERT_TRUE(SOAK_RSS_OK(base, end));
    ASSERT_EQ(end.fds, base.fds);
    ASSERT_EQ(end.segs, base.segs);
    return 0;
}

static int soak_rank(int rank, int n, coll_comm_t *comm, void *arg)
{
    const soak_args_t *a = arg;
    ASSERT_EQ(soak_colls(rank, n, comm, a->colls), 0);
    ASSERT_EQ(soak_cycles(rank, comm, a->cycles), 0);
    return 0;
}

/* ---- 3: a job with a killed rank leaves no /dev/shm segment behind ---- */
static int soak_killed(int rank, int n, coll_comm_t *comm, void *arg)
{
    const char *list = arg;
    char        names[SOAK_MAX_SEGS][64];
    int         x = 1, y = 0, nseg = soak_segs(names, SOAK_MAX_SEGS);
    FILE       *f = fopen(list, "a");
    ASSERT_TRUE(f != NULL);
    for (int i = 0; i < nseg; i++) {
        fprintf(f, "%s\n", names[i]);
    }
    fclose(f);
    ASSERT_OK(coll_barrier(comm)); /* every rank listed its segments */
    /* The barrier returning here says every rank entered it, not that every rank has seen it
     * complete: the last rank dies only once the others say they are past it. */
    char passed[256];
    snprintf(passed, sizeof(passed), "%s.passed", list);
    if (rank < n - 1) {
        f = fopen(passed, "a");
        ASSERT_TRUE(f != NULL);
        fprintf(f, "%d\n", rank);
        fclose(f);
    } else {
        int seen = 0;
        for (int tries = 0; seen < n - 1 && tries < 30000; tries++) {
            int r;
            seen = 0;
            f    = fopen(passed, "r");
            while (f != NULL && fscanf(f, "%d", &r) == 1) {
                seen++;
            }
            if (f != NULL) {
                fclose(f);
            }
            if (seen < n - 1) {
                usleep(1000);
            }
        }
        ASSERT_EQ(seen, n - 1);
        raise(SIGKILL);
    }
    coll_result_t st = coll_allreduce(&x, &y, 1, COLL_INT32, COLL_SUM, comm);
    ASSERT_TRUE(st == COLL_ERR_REMOTE || st == COLL_ERR_TRANSPORT);
    return 0;
}

/* After the job: none of the listed segments may exist. Returns the number left over. */
static int soak_leftovers(const char *list, int *listed_p)
{
    char  name[128], path[200];
    int   left = 0;
    FILE *f    = fopen(list, "r");
    *listed_p  = 0;
    if (f == NULL) {
        return 0;
    }
    while (fscanf(f, "%127s", name) == 1) {
        snprintf(path, sizeof(path), "/dev/shm/%s", name);
        (*listed_p)++;
        if (access(path, F_OK) == 0) {
            printf("left over after the killed job: %s\n", path);
            left++;
        }
    }
    fclose(f);
    return left;
}

static long soak_count(const char *s, long max)
{
    char *end;
    long  v = strtol(s, &end, 10);
    if (*end != '\0' || v < 0 || v > max) {
        fprintf(stderr, "test_soak: '%s' is not a count in 0..%ld\n", s, max);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    soak_args_t a      = {.colls = 20000, .cycles = 100};
    int         nranks = 3, failed = 0;
    const char *tps[8];
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--colls") == 0 && i + 1 < argc) {
            a.colls = soak_count(argv[++i], 100000000);
        } else if (strcmp(argv[i], "--cycles") == 0 && i + 1 < argc) {
            a.cycles = soak_count(argv[++i], 1000000);
        } else if (strcmp(argv[i], "--ranks") == 0 && i + 1 < argc) {
            nranks = (int)soak_count(argv[++i], 64);
        } else {
            fprintf(stderr, "usage: test_soak [--colls N] [--cycles M] [--ranks R]\n");
            return 2;
        }
    }
    if (nranks < 1) {
        fprintf(stderr, "test_soak: --ranks must be at least 1\n");
        return 2;
    }
    setenv("COLL_TUNE_MEASURE", "0", 0); /* creation cost without the link measurement */
    int ntp = coll_test_transports(tps, 8);
    for (int t = 0; t < ntp; t++) {
        coll_test_opts_t o = {
            .nranks = nranks, .want_comm = 1, .timeout_s = 3000, .transport = tps[t]};
        int rc = coll_test_run_ranks(&o, soak_rank, &a);
        printf("%s: soak over %s, %d ranks, %ld collectives, %ld cycles\n", rc ? "FAIL" : "PASS",
               tps[t], nranks, a.colls, a.cycles);
        fflush(stdout);
        failed += rc != 0;
    }
    /* the shm transport's segments, with a rank killed while the job runs */
    char list[] = "/tmp/test_soak.XXXXXX";
    int  fd = mkstemp(list), listed = 0;
    if (fd < 0) {
        perror("test_soak: mkstemp");
        return 99;
    }
    close(fd);
    coll_test_opts_t k = {
        .nranks = nranks < 2 ? 2 : nranks, .want_comm = 1, .timeout_s = 60, .transport = "shm"};
    k.victim = k.nranks; /* 1 + the last rank */
    int rc   = coll_test_run_ranks(&k, soak_killed, list);
    int left = soak_leftovers(list, &listed);
    printf("%s: killed shm job, %d segments mapped, %d left in /dev/shm\n",
           rc != 0 || left != 0 || listed == 0 ? "FAIL" : "PASS", listed, left);
    failed += rc != 0 || left != 0 || listed == 0;
    unlink(list);
    char passed[256];
    snprintf(passed, sizeof(passed), "%s.passed", list);
    unlink(passed);
    return failed != 0;
}
