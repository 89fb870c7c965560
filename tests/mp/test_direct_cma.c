/* SPDX-License-Identifier: MIT */
/*
 * The direct path on unregistered buffers (src/engine/direct_cma.c): blocking all-reduce,
 * reduce-scatter and all-gather moved by cross-memory attach between malloc'ed buffers.
 *   (a) every collective, in place and out of place, sizes around the path's block and odd
 *       counts, several types and operations, exact values and untouched guard bytes; the
 *       info log shows the path ran (one line per collective) and a call below
 *       COLL_DIRECT_CMA_MIN did not take it;
 *   (b) one rank forbidden process_vm_readv/writev (a seccomp filter): every rank agrees on the
 *       engine, results stay exact, the probe runs once;
 *   (c) COLL_DIRECT_CMA=0: the engine, exact;
 *   (d) a rank killed while the others loop over large all-reduces: they return an error
 *       naming a rank (or the timeout) within the deadline, never hang;
 *   (e) huge pages (COLL_DIRECT_THP): after an all-reduce on 16 MiB buffers of small pages
 *       (marked MADV_NOHUGEPAGE first, so that THP "always" keeps them small too) the 2 MiB-aligned
 *       inside of both is on huge pages (/proc/self/smaps), or the kernel's refusal is logged;
 *       (f) with COLL_DIRECT_THP=0 the buffers keep their small pages.
 */
#include "coll_test.h"

#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CMA_MARK    "direct, cross-memory attach"
#define REFUSE_MARK "cannot read and write rank"
#define GUARD       64 /* bytes past each buffer that no call may touch */
#define GUARD_BYTE  0xa5

typedef enum { C_ALLREDUCE, C_REDUCE_SCATTER, C_ALLGATHER } cma_coll_t;

static const char *const cma_names[] = {"allreduce", "reduce_scatter", "allgather"};

/* count elements per rank block (reduce-scatter, all-gather) or in all (all-reduce) */
static const size_t cma_counts[] = {16384, 16385, 65537, 100003, 262147, 1u << 20};

static double cma_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Rank r's element i at call k: small integers, exact in every type used. */
static double cma_input(int rank, int call, size_t i)
{
    return (double)((i * 7 + (size_t)rank * 13 + (size_t)call * 5) % 61) - 30.0;
}

static double cma_reduced(coll_redop_t op, int n, int call, size_t i)
{
    double acc = cma_input(0, call, i);
    for (int r = 1; r < n; r++) {
        double v = cma_input(r, call, i);
        acc      = op == COLL_MAX ? (v > acc ? v : acc) : acc + v;
    }
    return op == COLL_AVG ? acc / n : acc;
}

static void cma_put(coll_dtype_t dt, void *buf, size_t i, double v)
{
    if (dt == COLL_FLOAT32) {
        ((float *)buf)[i] = (float)v;
    } else if (dt == COLL_FLOAT64) {
        ((double *)buf)[i] = v;
    } else {
        ((int32_t *)buf)[i] = (int32_t)v;
    }
}

static double cma_get(coll_dtype_t dt, const void *buf, size_t i)
{
    return dt == COLL_FLOAT32   ? ((const float *)buf)[i]
           : dt == COLL_FLOAT64 ? ((const double *)buf)[i]
                                : ((const int32_t *)buf)[i];
}

static size_t cma_esize(coll_dtype_t dt)
{
    return dt == COLL_FLOAT64 ? 8 : 4;
}

/* One call of coll on count elements; returns the number of wrong elements or touched guard
 * bytes. The buffers are malloc'ed afresh (never registered), send and receive apart. */
static size_t cma_one(coll_comm_t *comm, int rank, int n, cma_coll_t coll, coll_dtype_t dt,
                      coll_redop_t op, size_t count, int in_place, int call)
{
    size_t es = cma_esize(dt), in_n = coll == C_REDUCE_SCATTER ? count * (size_t)n : count;
    size_t out_n = coll == C_ALLGATHER ? count * (size_t)n : count, wrong = 0;
    size_t big  = in_n > out_n ? in_n : out_n;
    char  *sbuf = malloc(big * es + GUARD), *rbuf = malloc(big * es + GUARD);
    ASSERT_TRUE(sbuf != NULL && rbuf != NULL);
    memset(sbuf, GUARD_BYTE, big * es + GUARD);
    memset(rbuf, GUARD_BYTE, big * es + GUARD);

    /* the input where the collective's in-place layout wants it */
    char *in  = sbuf;
    char *out = rbuf;
    if (in_place) {
        in = coll == C_ALLGATHER ? rbuf + (size_t)rank * count * es : rbuf;
    }
    for (size_t i = 0; i < (coll == C_ALLGATHER ? count : in_n); i++) {
        cma_put(dt, in, i, cma_input(rank, call, i));
    }
    coll_result_t st;
    if (coll == C_ALLREDUCE) {
        st = coll_allreduce(in, out, count, dt, op, comm);
    } else if (coll == C_REDUCE_SCATTER) {
        out = in_place ? rbuf + (size_t)rank * count * es : rbuf;
        st  = coll_reduce_scatter(in, out, count, dt, op, comm);
    } else {
        st = coll_allgather(in, out, count, dt, comm);
    }
    ASSERT_OK(st);
    for (size_t i = 0; i < count && coll != C_ALLGATHER; i++) {
        size_t at   = coll == C_REDUCE_SCATTER ? (size_t)rank * count + i : i;
        double want = cma_reduced(op, n, call, at), got = cma_get(dt, out, i);
        double tol = op == COLL_AVG ? 1e-12 * (want < 0 ? -want : want) + 1e-12 : 0.0;
        if ((got - want > tol || want - got > tol) && wrong++ < 3) {
            fprintf(stderr, "rank %d: %s count %zu in_place %d: [%zu] = %g, want %g\n", rank,
                    cma_names[coll], count, in_place, i, got, want);
        }
    }
    for (size_t i = 0; coll == C_ALLGATHER && i < count * (size_t)n; i++) {
        double want = cma_input((int)(i / count), call, i % count), got = cma_get(dt, out, i);
        if (got != want && wrong++ < 3) {
            fprintf(stderr, "rank %d: allgather count %zu in_place %d: [%zu] = %g, want %g\n", rank,
                    count, in_place, i, got, want);
        }
    }
    /* nothing written past the receive buffer (nor past the send buffer by a peer) */
    for (size_t i = 0; i < GUARD; i++) {
        wrong += (unsigned char)rbuf[big * es + i] != GUARD_BYTE;
        wrong += (unsigned char)sbuf[big * es + i] != GUARD_BYTE;
    }
    if (!in_place) { /* the input stays as it was */
        for (size_t i = 0; i < (coll == C_ALLGATHER ? count : in_n); i++) {
            wrong += cma_get(dt, sbuf, i) != cma_input(rank, call, i);
        }
    }
    free(sbuf);
    free(rbuf);
    return wrong;
}

/* Log lines with mark, summed over the ranks (the sum's own 4-byte call is below every
 * threshold and adds none). */
static int cma_marks(coll_comm_t *comm, const char *mark)
{
    int32_t local = coll_test_log_count(mark), total = -1;
    ASSERT_OK(coll_allreduce(&local, &total, 1, COLL_INT32, COLL_SUM, comm));
    return total;
}

typedef struct {
    coll_dtype_t dt;
    coll_redop_t op;
} cma_type_t;

/* (a), (c): the sweep; expect_cma: the path's lines wanted (n per collective), else none. */
static int cma_sweep_main(int rank, int n, coll_comm_t *comm, void *arg)
{
    static const cma_type_t types[] = {
        {COLL_FLOAT32, COLL_SUM}, {COLL_INT32, COLL_MAX}, {COLL_FLOAT64, COLL_AVG}};
    int    expect_cma = *(const int *)arg, call = 0;
    size_t wrong = 0;

    /* below COLL_DIRECT_CMA_MIN (set to 64k by the driver) and COLL_DIRECT_CMA_AGRS_MIN (4k in
     * all): not the path */
    wrong += cma_one(comm, rank, n, C_ALLREDUCE, COLL_FLOAT32, COLL_SUM, 4096, 0, call++);
    wrong += cma_one(comm, rank, n, C_ALLGATHER, COLL_FLOAT32, COLL_SUM, 64, 0, call++);
    wrong += cma_one(comm, rank, n, C_REDUCE_SCATTER, COLL_FLOAT32, COLL_SUM, 64, 1, call++);
    ASSERT_EQ(cma_marks(comm, CMA_MARK), 0);
    for (int c = 0; c < 3; c++) {
        for (size_t k = 0; k < sizeof(cma_counts) / sizeof(cma_counts[0]); k++) {
            for (int ip = 0; ip < 2; ip++) {
                const cma_type_t *t = &types[(k + (size_t)ip) % 3];
                wrong += cma_one(comm, rank, n, (cma_coll_t)c, t->dt,
                                 c == C_ALLGATHER ? COLL_SUM : t->op, cma_counts[k], ip, call++);
            }
        }
    }
    int lines = cma_marks(comm, CMA_MARK);
    if (rank == 0) {
        printf("  %d ranks: %zu wrong, %d path lines\n", n, wrong, lines);
    }
    ASSERT_EQ(lines, expect_cma ? 3 * n : 0);
    ASSERT_EQ(wrong, 0);
    return 0;
}

/* (b): process_vm_readv and process_vm_writev fail with EPERM in this process from now on. */
#if defined(__x86_64__)
#define CMA_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define CMA_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

static int cma_forbid(void)
{
#ifndef CMA_AUDIT_ARCH
    return -ENOSYS;
#else
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, CMA_AUDIT_ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_readv, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_writev, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
    };
    struct sock_fprog prog = {(unsigned short)(sizeof(f) / sizeof(f[0])), f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
        return -errno;
    }
    return 0;
#endif
}

/* Does the filter work here (a child tries it on itself)? Kernels without seccomp filters, or
 * architectures this test does not know, cannot run (b). */
static int cma_forbid_works(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        uint64_t     word = 1, copy = 0;
        struct iovec l = {&copy, sizeof(copy)}, r = {&word, sizeof(word)};
        _exit(cma_forbid() == 0 && process_vm_readv(getpid(), &l, 1, &r, 1, 0) < 0 && errno == EPERM
                  ? 0
                  : 1);
    }
    int status = 0;
    return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
           WEXITSTATUS(status) == 0;
}

static int cma_refused_main(int rank, int n, coll_comm_t *comm, void *arg)
{
    int    forbidden = *(const int *)arg;
    size_t wrong     = 0;

    if (rank == forbidden) {
        int err = cma_forbid();
        if (err != 0) {
            fprintf(stderr, "rank %d: seccomp: %s\n", rank, strerror(-err));
            return 1;
        }
    }
    for (int it = 0; it < 4; it++) {
        wrong += cma_one(comm, rank, n, (cma_coll_t)(it % 3), COLL_FLOAT32, COLL_SUM, 100003,
                         it & 1, it);
    }
    ASSERT_EQ(cma_marks(comm, CMA_MARK), 0);
    ASSERT_EQ(cma_marks(comm, REFUSE_MARK), 1); /* one probe, one refusal, for the life */
    ASSERT_EQ(cma_marks(comm, "cross-memory attach refused between some ranks"), 1);
    ASSERT_EQ(wrong, 0);
    return 0;
}

/* (d) */
#define CMA_TIMEOUT_S 2.0

static void *cma_killer(void *arg)
{
    (void)arg;
    usleep(30000);
    raise(SIGKILL);
    return NULL;
}

static int cma_kill_main(int rank, int n, coll_comm_t *comm, void *arg)
{
    int           victim = *(const int *)arg;
    size_t        count  = 4u << 20;
    float        *s = malloc(count * sizeof(float)), *r = malloc(count * sizeof(float));
    coll_result_t st = COLL_OK;
    double        t0 = 0.0;
    pthread_t     th;
    (void)n;
    ASSERT_TRUE(s != NULL && r != NULL);
    for (size_t i = 0; i < count; i++) {
        s[i] = (float)(i % 17);
    }
    ASSERT_OK(coll_allreduce(s, r, count, COLL_FLOAT32, COLL_SUM, comm));
    ASSERT_TRUE(cma_marks(comm, CMA_MARK) >= 1);
    if (rank == victim) {
        pthread_create(&th, NULL, cma_killer, NULL);
    }
    for (int it = 0; it < 100000 && st == COLL_OK; it++) {
        t0 = cma_now();
        st = coll_allreduce(s, r, count, COLL_FLOAT32, COLL_SUM, comm);
    }
    double      dt  = cma_now() - t0;
    const char *msg = coll_comm_last_error(comm);
    printf("rank %d: %s %.2f s after entering the all-reduce: %s\n", rank, coll_strerror(st), dt,
           msg);
    fflush(stdout);
    ASSERT_TRUE(st == COLL_ERR_REMOTE || st == COLL_ERR_TRANSPORT || st == COLL_ERR_TIMEOUT);
    ASSERT_TRUE(dt < CMA_TIMEOUT_S + 3.0);
    char want[32];
    snprintf(want, sizeof(want), "rank %d", victim);
    ASSERT_STR_CONTAINS(msg, want); /* every survivor names the dead rank */
    /* later calls fail at once with the same error */
    t0 = cma_now();
    ASSERT_EQ(coll_allreduce(s, r, count, COLL_FLOAT32, COLL_SUM, comm), st);
    ASSERT_TRUE(cma_now() - t0 < 1.0);
    free(s);
    free(r);
    return 0;
}

/* (e), (f) */
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif
#define THP_2M ((uintptr_t)2 << 20)

/* The 2 MiB-aligned inside of [buf, buf + bytes). */
static void thp_inside(const void *buf, size_t bytes, uintptr_t *lo, uintptr_t *hi)
{
    *lo = ((uintptr_t)buf + THP_2M - 1) & ~(THP_2M - 1);
    *hi = ((uintptr_t)buf + bytes) & ~(THP_2M - 1);
}

/* Bytes of AnonHugePages in the mappings that overlap [lo, hi). */
static size_t thp_huge_bytes(uintptr_t lo, uintptr_t hi)
{
    FILE  *f = fopen("/proc/self/smaps", "r");
    char   line[512];
    int    in  = 0;
    size_t sum = 0;

    ASSERT_TRUE(f != NULL);
    while (fgets(line, sizeof(line), f) != NULL) {
        unsigned long a, b, kb;
        if (sscanf(line, "%lx-%lx ", &a, &b) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            in = a < hi && lo < b;
        } else if (in && sscanf(line, "AnonHugePages: %lu kB", &kb) == 1) {
            sum += (size_t)kb << 10;
        }
    }
    fclose(f);
    return sum;
}

/* THP's mode here: "always", "madvise" or "never". */
static const char *thp_mode(void)
{
    static char mode[16]  = "never";
    char        line[128] = "";
    FILE       *f         = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (f != NULL) {
        char *a = fgets(line, sizeof(line), f) != NULL ? strchr(line, '[') : NULL;
        char *b = a != NULL ? strchr(a, ']') : NULL;
        if (b != NULL && (size_t)(b - a - 1) < sizeof(mode)) {
            memcpy(mode, a + 1, (size_t)(b - a - 1));
            mode[b - a - 1] = '\0';
        }
        fclose(f);
    }
    return mode;
}

static int cma_thp_main(int rank, int n, coll_comm_t *comm, void *arg)
{
    int       advise = *(const int *)arg;
    size_t    count = (4u << 20) + 1021, bytes = count * sizeof(float);
    float    *s = malloc(bytes), *r = malloc(bytes);
    uintptr_t slo, shi, rlo, rhi;

    ASSERT_TRUE(s != NULL && r != NULL);
    thp_inside(s, bytes, &slo, &shi);
    thp_inside(r, bytes, &rlo, &rhi);
    ASSERT_TRUE(madvise((void *)slo, shi - slo, MADV_NOHUGEPAGE) == 0);
    ASSERT_TRUE(madvise((void *)rlo, rhi - rlo, MADV_NOHUGEPAGE) == 0);
    for (size_t i = 0; i < count; i++) { /* every page faulted in, small */
        s[i] = (float)(i % 1013) + (float)rank;
        r[i] = -1.0f;
    }
    size_t before = thp_huge_bytes(slo, shi) + thp_huge_bytes(rlo, rhi);
    ASSERT_OK(coll_allreduce(s, r, count, COLL_FLOAT32, COLL_SUM, comm));
    size_t after = thp_huge_bytes(slo, shi) + thp_huge_bytes(rlo, rhi);
    for (size_t i = 0; i < count; i++) {
        float want = (float)n * (float)(i % 1013) + (float)(n * (n - 1) / 2);
        ASSERT_TRUE(r[i] == want);
    }
    printf("rank %d: THP %s, COLL_DIRECT_THP=%d: huge pages %zu -> %zu KiB of %zu KiB inside\n",
           rank, thp_mode(), advise, before >> 10, after >> 10,
           (size_t)(shi - slo + rhi - rlo) >> 10);
    ASSERT_TRUE(cma_marks(comm, CMA_MARK) == n);
    ASSERT_EQ(before, 0);
    if (advise && strcmp(thp_mode(), "never") != 0) { /* huge, or the kernel's refusal logged */
        ASSERT_TRUE(after >= (shi - slo) + (rhi - rlo) ||
                    coll_test_log_count("madvise(MADV_COLLAPSE)") >= 1);
    } else { /* nothing advised: the pages stay small */
        ASSERT_EQ(after, 0);
    }
    free(s);
    free(r);
    return 0;
}

/* ---- driver ---- */

static int cma_run(const char *what, int n, int victim, coll_test_rank_fn_t fn, void *arg)
{
    coll_test_opts_t o = {
        .nranks = n, .want_comm = 1, .timeout_s = 120, .transport = "shm", .victim = victim};
    return coll_test_run_logged(what, &o, "cross-memory", fn, arg);
}

int main(void)
{
    static const int counts[] = {2, 3, 4, 5};
    int              failed = 0, total = 0, yes = 1, no = 0;

    if (!coll_test_direct_setup()) {
        return COLL_TEST_SKIP;
    }
    unsetenv("COLL_DIRECT_CMA");
    setenv("COLL_DIRECT_CMA_MIN", "64k", 1);
    setenv("COLL_DIRECT_CMA_AGRS_MIN", "4k", 1);
    for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
        failed += cma_run("(a) unregistered buffers by cross-memory attach", counts[i], 0,
                          cma_sweep_main, &yes);
        total++;
    }
    /* the shm transport's own single-copy receives off: the forbidden rank's reads are the
     * direct path's alone */
    setenv("COLL_SHM_CMA_MIN", "0", 1);
    int forbidden = 1;
    if (cma_forbid_works()) {
        failed +=
            cma_run("(b) one rank refused cross-memory attach", 3, 0, cma_refused_main, &forbidden);
        total++;
    } else {
        printf("SKIP: (b) one rank refused cross-memory attach: no seccomp filter here\n");
    }
    unsetenv("COLL_SHM_CMA_MIN");
    setenv("COLL_DIRECT_CMA", "0", 1);
    failed += cma_run("(c) COLL_DIRECT_CMA=0", 3, 0, cma_sweep_main, &no);
    unsetenv("COLL_DIRECT_CMA");
    total++;
    int n_kill = 3, victim = 2;
    setenv("COLL_TIMEOUT", "2", 1);
    failed += cma_run("(d) rank killed in a loop of direct all-reduces", n_kill, victim + 1,
                      cma_kill_main, &victim);
    unsetenv("COLL_TIMEOUT");
    total++;
    failed += cma_run("(e) huge pages for the buffers", 2, 0, cma_thp_main, &yes);
    total++;
    setenv("COLL_DIRECT_THP", "0", 1);
    failed += cma_run("(f) COLL_DIRECT_THP=0", 2, 0, cma_thp_main, &no);
    unsetenv("COLL_DIRECT_THP");
    total++;
    printf("%d passed, %d failed\n", total - failed, failed);
    return failed != 0;
}
