/* SPDX-License-Identifier: MIT */
/*
 * The p2p path of device collectives (src/cuda/p2p.c: ranks of one host move data between
 * device windows they map from each other by CUDA IPC), several ranks sharing one GPU, with
 * windows of 2 x 64 KiB so that most calls take many rounds:
 *   (d) pool memory (cudaMallocAsync), first: it takes the path too (the callers' buffers are
 *       never exported), the all-reduce's "p2p, CUDA IPC windows" line is logged, results exact;
 *   (a) every other collective but send/recv takes it: each logs its line once per
 *       communicator (read from the library's info log); with COLL_CUDA_P2P=0 none does;
 *   (b) fresh buffers at every call, freed as soon as the call returned: exact;
 *   (c) stream-ordered all-reduces on fresh buffers, no host synchronisation between them;
 * all of these with COLL_CUDA_P2P_MIN=0. With COLL_CUDA_P2P=0 and COLL_CUDA_DIRECT=1, (b)
 * takes the direct path, which logs its first all-reduce (so the check in (f) can fail).
 * Then, with COLL_CUDA_P2P left to the library (on by default) and COLL_CUDA_DIRECT=1:
 *   (e) the last rank sets COLL_CUDA_P2P_MIN=64k, the others 16k; every rank logs the agreed
 *       65536 (the largest, not the first rank's) and that the direct path stays unused (it
 *       keeps the windows by other rules); a call of 32 KiB is staged on every rank (a rank
 *       that took the path alone would fail or hang the call), calls of 64 KiB take the path;
 *       an all-gather is measured by what it receives;
 *   (f) staged and p2p all-reduces alternate on one stream, no host synchronisation: exact,
 *       and no call took the direct path.
 * The correctness matrix of every collective on this path is test_device_colls's; the plan's
 * rounds and phases are checked on host memory by tests/unit/test_p2p_plan. Exits 77 without
 * a CUDA device.
 */
#include "coll_test.h"
#include "gpu_probe.h"

#include <cuda_runtime.h>
#include <limits.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define P2P_MARK "p2p, CUDA IPC windows"

#define CUDA_OK(_x)                                                                                \
    do {                                                                                           \
        cudaError_t _e = (_x);                                                                     \
        ASSERT_(_e == cudaSuccess, "%s: %s", #_x, cudaGetErrorString(_e));                         \
    } while (0)

static int p2p_log_count(void)
{
    return coll_test_log_count(P2P_MARK);
}

/* p2p lines logged since `before`, summed over the ranks (a host all-reduce: logs none). */
static int p2p_lines_since(coll_comm_t *comm, int before)
{
    int32_t local = (int32_t)(p2p_log_count() - before), total = -1;
    ASSERT_OK(coll_allreduce(&local, &total, 1, COLL_INT32, COLL_SUM, comm));
    return total;
}

static float p2p_value(int rank, size_t i, int salt)
{
    return (float)(rank + 1 + (int)((i + (size_t)salt) % 13));
}

/* Fill count floats of rank's input on the host, then the expected all-reduce sum. */
static void p2p_fill(float *h, size_t count, int rank, int salt)
{
    for (size_t i = 0; i < count; i++) {
        h[i] = p2p_value(rank, i, salt);
    }
}

static size_t p2p_check(const float *h, size_t count, int n, int salt, int rank, const char *what)
{
    size_t wrong = 0;
    for (size_t i = 0; i < count; i++) {
        float want = 0;
        for (int r = 0; r < n; r++) {
            want += p2p_value(r, i, salt);
        }
        if (h[i] != want) {
            if (wrong++ < 3) {
                fprintf(stderr, "rank %d: %s: element %zu is %g, expected %g\n", rank, what, i,
                        (double)h[i], (double)want);
            }
        }
    }
    return wrong;
}

/* One blocking all-reduce of count floats on buffers from alloc (0: cudaMalloc, 1: pool). */
static size_t p2p_allreduce_once(coll_comm_t *comm, int rank, int n, size_t count, int salt,
                                 int pool, int in_place, cudaStream_t stream, const char *what)
{
    float *h = malloc(count * sizeof(float)), *ds, *dr;
    size_t wrong;
    if (pool) {
        CUDA_OK(cudaMallocAsync((void **)&ds, count * sizeof(float), stream));
        CUDA_OK(cudaMallocAsync((void **)&dr, count * sizeof(float), stream));
        CUDA_OK(cudaStreamSynchronize(stream));
    } else {
        CUDA_OK(cudaMalloc((void **)&ds, count * sizeof(float)));
        CUDA_OK(cudaMalloc((void **)&dr, count * sizeof(float)));
    }
    p2p_fill(h, count, rank, salt);
    CUDA_OK(cudaMemcpy(ds, h, count * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(dr, 0xff, count * sizeof(float)));
    ASSERT_OK(coll_allreduce(ds, in_place ? ds : dr, count, COLL_FLOAT32, COLL_SUM, comm));
    CUDA_OK(cudaMemcpy(h, in_place ? ds : dr, count * sizeof(float), cudaMemcpyDeviceToHost));
    wrong = p2p_check(h, count, n, salt, rank, what);
    if (pool) {
        CUDA_OK(cudaFreeAsync(ds, stream));
        CUDA_OK(cudaFreeAsync(dr, stream));
        CUDA_OK(cudaStreamSynchronize(stream));
    } else {
        CUDA_OK(cudaFree(ds));
        CUDA_OK(cudaFree(dr));
    }
    free(h);
    return wrong;
}

/* (a) one call of each collective on cudaMalloc memory; returns the p2p lines they logged */
static int p2p_every_coll(coll_comm_t *comm, int rank, int n)
{
    const size_t count = 4099;
    size_t       all   = count * (size_t)n * sizeof(float);
    char        *ds, *dr;
    int          before = p2p_log_count();
    CUDA_OK(cudaMalloc((void **)&ds, all));
    CUDA_OK(cudaMalloc((void **)&dr, all));
    CUDA_OK(cudaMemset(ds, 0, all));
    ASSERT_OK(coll_allreduce(ds, dr, count, COLL_FLOAT32, COLL_SUM, comm));
    ASSERT_OK(coll_reduce_scatter(ds, dr, count, COLL_FLOAT32, COLL_SUM, comm));
    ASSERT_OK(coll_allgather(ds, dr, count, COLL_FLOAT32, comm));
    ASSERT_OK(coll_broadcast(ds, dr, count, COLL_FLOAT32, n - 1, comm));
    ASSERT_OK(coll_reduce(ds, dr, count, COLL_FLOAT32, COLL_MAX, 0, comm));
    ASSERT_OK(coll_alltoall(ds, dr, count, COLL_FLOAT32, comm));
    CUDA_OK(cudaFree(ds));
    CUDA_OK(cudaFree(dr));
    return p2p_lines_since(comm, before);
}

static int p2p_rank_main(int rank, int n, coll_comm_t *comm, void *arg)
{
    int          p2p_on = *(int *)arg, lines;
    size_t       wrong  = 0;
    cudaStream_t stream;

    CUDA_OK(cudaSetDevice(0));
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

    /* (d) first, on a fresh communicator: pool memory takes the path */
    int before = p2p_log_count();
    wrong += p2p_allreduce_once(comm, rank, n, 65536 + 5, 1, 1, 0, stream, "(d) pool memory");
    lines = p2p_lines_since(comm, before);
    if (lines != (p2p_on ? n : 0)) {
        fprintf(stderr, "rank %d: (d) pool memory: %d p2p lines, expected %d\n", rank, lines,
                p2p_on ? n : 0);
        wrong++;
    }

    /* (a) the all-reduce's line is logged already */
    lines = p2p_every_coll(comm, rank, n);
    if (lines != (p2p_on ? 5 * n : 0)) {
        fprintf(stderr,
                "rank %d: (a) %d p2p lines from 5 more collectives on %d ranks, "
                "expected %d\n",
                rank, lines, n, p2p_on ? 5 * n : 0);
        wrong++;
    }

    /* (b) fresh buffers every call, freed right after it */
    for (int it = 0; it < 24; it++) {
        size_t count = (size_t)1 << (10 + it % 9); /* 1k .. 256k floats */
        wrong += p2p_allreduce_once(comm, rank, n, count + (size_t)it, it, 0, it % 3 == 0, stream,
                                    "(b) fresh buffers");
    }

    /* (c) stream-ordered on fresh buffers, no host synchronisation between the calls */
    enum { ROUNDS = 6, N = 300007 };
    float *bufs[ROUNDS], *h[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        h[r] = malloc(N * sizeof(float));
        p2p_fill(h[r], N, rank, 100 + r);
        CUDA_OK(cudaMalloc((void **)&bufs[r], N * sizeof(float)));
    }
    for (int r = 0; r < ROUNDS; r++) {
        CUDA_OK(cudaMemcpyAsync(bufs[r], h[r], N * sizeof(float), cudaMemcpyHostToDevice, stream));
        ASSERT_OK(coll_allreduce_stream(bufs[r], bufs[r], N, COLL_FLOAT32, COLL_SUM, comm, stream));
        CUDA_OK(cudaMemcpyAsync(h[r], bufs[r], N * sizeof(float), cudaMemcpyDeviceToHost, stream));
    }
    CUDA_OK(cudaStreamSynchronize(stream));
    ASSERT_OK(coll_comm_get_error(comm));
    for (int r = 0; r < ROUNDS; r++) {
        wrong += p2p_check(h[r], N, n, 100 + r, rank, "(c) stream-ordered, fresh buffers");
        CUDA_OK(cudaFree(bufs[r]));
        free(h[r]);
    }
    CUDA_OK(cudaStreamDestroy(stream));
    /* with COLL_CUDA_P2P=0 and COLL_CUDA_DIRECT=1, (b)'s all-reduces that fit a window take the
     * direct path, which logs its first */
    ASSERT_EQ(coll_test_log_count("on device memory: direct path"), p2p_on ? 0 : 1);
    if (wrong != 0) {
        fprintf(stderr, "rank %d: %zu wrong\n", rank, wrong);
        return 1;
    }
    if (rank == 0) {
        printf("  %d ranks, COLL_CUDA_P2P=%d: (a)-(d) ok\n", n, p2p_on);
    }
    return 0;
}

/* (e) and (f): the agreed COLL_CUDA_P2P_MIN, calls on both sides of it */
static void p2p_min_env(int rank, int n)
{
    setenv("COLL_CUDA_P2P_MIN", rank == n - 1 ? "64k" : "16k", 1);
}

/* One all-gather (gather) or all-reduce on count floats of cudaMalloc memory (the input zero); the
 * p2p lines that the ranks logged for it. */
static int p2p_one_call(coll_comm_t *comm, int gather, size_t count, int n)
{
    size_t all    = count * (size_t)n * sizeof(float);
    int    before = p2p_log_count();
    char  *ds, *dr;
    CUDA_OK(cudaMalloc((void **)&ds, all));
    CUDA_OK(cudaMalloc((void **)&dr, all));
    CUDA_OK(cudaMemset(ds, 0, all));
    if (gather) {
        ASSERT_OK(coll_allgather(ds, dr, count, COLL_FLOAT32, comm));
    } else {
        ASSERT_OK(coll_allreduce(ds, dr, count, COLL_FLOAT32, COLL_SUM, comm));
    }
    CUDA_OK(cudaFree(ds));
    CUDA_OK(cudaFree(dr));
    return p2p_lines_since(comm, before);
}

static int p2p_min_main(int rank, int n, coll_comm_t *comm, void *arg)
{
    size_t       wrong = 0;
    cudaStream_t stream;
    (void)arg;

    CUDA_OK(cudaSetDevice(0));
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    /* (e) 32 KiB: below the last rank's 64k, above the others' 16k. A collective logs its p2p
     * line at its first call on the path: none at 32 KiB, every rank's at 64 KiB. */
    ASSERT_EQ(p2p_one_call(comm, 0, 8192, n), 0);
    ASSERT_EQ(coll_test_log_count("p2p: collectives from 65536 bytes"), 1);
    ASSERT_EQ(coll_test_log_count("COLL_CUDA_DIRECT=1 unused"), 1);
    ASSERT_EQ(p2p_one_call(comm, 0, 16384, n), n);
    /* an all-gather's size is what it receives (its larger buffer): 16 KiB from each of 2-3
     * ranks is staged; then each sends less than 64 KiB and receives at least that */
    ASSERT_EQ(p2p_one_call(comm, 1, 4096, n), 0);
    ASSERT_EQ(p2p_one_call(comm, 1, (16384 + (size_t)n - 1) / (size_t)n, n), n);
    wrong += p2p_allreduce_once(comm, rank, n, 8192, 7, 0, 0, stream, "(e) staged");
    wrong += p2p_allreduce_once(comm, rank, n, 70001, 8, 0, 1, stream, "(e) p2p");

    /* (f) staged (4 KiB) and p2p (1 MiB, many window rounds) calls alternating on one stream */
    enum { CALLS = 8 };
    float *bufs[CALLS], *h[CALLS];
    size_t cnt[CALLS];
    for (int c = 0; c < CALLS; c++) {
        cnt[c] = c % 2 ? (size_t)262144 + (size_t)c : (size_t)1024 + (size_t)c;
        h[c]   = malloc(cnt[c] * sizeof(float));
        p2p_fill(h[c], cnt[c], rank, 200 + c);
        CUDA_OK(cudaMalloc((void **)&bufs[c], cnt[c] * sizeof(float)));
    }
    for (int c = 0; c < CALLS; c++) {
        CUDA_OK(
            cudaMemcpyAsync(bufs[c], h[c], cnt[c] * sizeof(float), cudaMemcpyHostToDevice, stream));
        ASSERT_OK(
            coll_allreduce_stream(bufs[c], bufs[c], cnt[c], COLL_FLOAT32, COLL_SUM, comm, stream));
        CUDA_OK(
            cudaMemcpyAsync(h[c], bufs[c], cnt[c] * sizeof(float), cudaMemcpyDeviceToHost, stream));
    }
    CUDA_OK(cudaStreamSynchronize(stream));
    ASSERT_OK(coll_comm_get_error(comm));
    /* the small ones staged, none on the direct path */
    ASSERT_EQ(coll_test_log_count("on device memory: direct path"), 0);
    for (int c = 0; c < CALLS; c++) {
        wrong += p2p_check(h[c], cnt[c], n, 200 + c, rank, "(f) staged and p2p alternating");
        CUDA_OK(cudaFree(bufs[c]));
        free(h[c]);
    }
    CUDA_OK(cudaStreamDestroy(stream));
    if (wrong != 0) {
        fprintf(stderr, "rank %d: %zu wrong\n", rank, wrong);
        return 1;
    }
    if (rank == 0) {
        printf("  %d ranks, the path by default, COLL_CUDA_P2P_MIN 16k/64k: (e)-(f) ok\n", n);
    }
    return 0;
}

int main(void)
{
    int  failed = 0, total = 0;
    char logpat[PATH_MAX];
    if (!gpu_probe_forked()) {
        return COLL_TEST_SKIP;
    }
    snprintf(logpat, sizeof(logpat), "/tmp/coll_test_p2p.%d.%%p.log", (int)getpid());
    setenv("COLL_DEBUG", "info", 1);
    setenv("COLL_DEBUG_SUBSYS", "all", 1);
    setenv("COLL_DEBUG_FILE", logpat, 1);
    setenv("COLL_CUDA_WINDOW_SIZE", "64k", 1);
    unsetenv("COLL_CUDA_DIRECT");
    setenv("COLL_CUDA_P2P_MIN", "0", 1);
    static const int counts[] = {2, 3, 4};
    for (int on = 1; on >= 0; on--) {
        setenv("COLL_CUDA_P2P", on ? "1" : "0", 1);
        setenv("COLL_CUDA_DIRECT", on ? "0" : "1", 1);
        for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
            if (!on && counts[i] != 2) {
                continue;
            }
            coll_test_opts_t o = {
                .nranks = counts[i], .want_comm = 1, .timeout_s = 120, .transport = "shm"};
            int rc = coll_test_run_ranks(&o, p2p_rank_main, &on);
            total++;
            failed += rc != 0;
            printf("%s: %d ranks, COLL_CUDA_P2P=%d\n", rc ? "FAIL" : "PASS", counts[i], on);
            fflush(stdout);
        }
    }
    unsetenv("COLL_CUDA_P2P");
    unsetenv("COLL_CUDA_P2P_MIN");
    setenv("COLL_CUDA_DIRECT", "1", 1);
    for (int n = 2; n <= 3; n++) {
        coll_test_opts_t o  = {.nranks      = n,
                               .want_comm   = 1,
                               .timeout_s   = 120,
                               .transport   = "shm",
                               .before_comm = p2p_min_env};
        int              rc = coll_test_run_ranks(&o, p2p_min_main, NULL);
        total++;
        failed += rc != 0;
        printf("%s: %d ranks, the path by default, COLL_CUDA_P2P_MIN differing\n",
               rc ? "FAIL" : "PASS", n);
        fflush(stdout);
    }
    /* the logs of this run's ranks */
    char cmd[PATH_MAX + 64];
    snprintf(cmd, sizeof(cmd), "rm -f /tmp/coll_test_p2p.%d.*.log", (int)getpid());
    if (system(cmd) != 0) {
        fprintf(stderr, "could not remove the logs (%s)\n", cmd);
    }
    printf("%d passed, %d failed\n", total - failed, failed);
    return failed ? 1 : 0;
}
