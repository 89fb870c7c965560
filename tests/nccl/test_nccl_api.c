/* SPDX-License-Identifier: MIT */
/*
 * A program written only against nccl.h (as any NCCL program is) that exercises every function
 * of libcoll's NCCL-compatible library on host memory: N processes forked from one that made
 * the unique id run every collective (in and out of place, several types and operators, every
 * root), send/recv in a group (to the rank itself too), a PreMulSum operator, ncclCommSplit, the
 * error functions and the teardown calls; then one process drives three communicators made by
 * ncclCommInitAll from a single thread with groups (collectives, and splits made at ncclGroupEnd).
 */
#include <nccl.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "rank %d: %s:%d: %s failed (last error: %s)\n", g_rank, __FILE__,      \
                    __LINE__, #cond, ncclGetLastError(NULL));                                      \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)
#define NCCLCHECK(call) CHECK((call) == ncclSuccess)

static int g_rank = -1;

static void test_collectives(ncclComm_t comm, int rank, int n)
{
    enum { N = 1000 };
    float   *a = malloc(sizeof(float) * N * n), *b = malloc(sizeof(float) * N * n);
    double   d[N], dr[N];
    int32_t  x[N], xr[N];
    uint16_t h[4], hr[4];

    /* all-reduce: float sum out of place, int32 max in place, double avg, fp16 sum */
    for (int i = 0; i < N; i++) {
        a[i] = (float)(rank + 1) * (float)(i % 13);
        x[i] = rank * 1000 + i;
        d[i] = rank + 0.5 * i;
    }
    NCCLCHECK(ncclAllReduce(a, b, N, ncclFloat, ncclSum, comm, NULL));
    for (int i = 0; i < N; i++) {
        CHECK(b[i] == (float)(n * (n + 1) / 2) * (float)(i % 13));
    }
    NCCLCHECK(ncclAllReduce(x, x, N, ncclInt32, ncclMax, comm, NULL));
    for (int i = 0; i < N; i++) {
        CHECK(x[i] == (n - 1) * 1000 + i);
    }
    NCCLCHECK(ncclAllReduce(d, dr, N, ncclDouble, ncclAvg, comm, NULL));
    for (int i = 0; i < N; i++) {
        CHECK(fabs(dr[i] - ((n - 1) / 2.0 + 0.5 * i)) < 1e-12);
    }
    for (int i = 0; i < 4; i++) {
        h[i] = 0x3c00; /* 1.0 in binary16 */
    }
    NCCLCHECK(ncclAllReduce(h, hr, 4, ncclHalf, ncclSum, comm, NULL));
    CHECK(n != 2 || hr[0] == 0x4000); /* 2.0 */
    NCCLCHECK(ncclAllReduce(x, xr, N, ncclInt32, ncclMin, comm, NULL));
    NCCLCHECK(ncclAllReduce(x, xr, N, ncclInt32, ncclProd, comm, NULL));

    /* reduce-scatter and all-gather */
    for (int i = 0; i < N * n; i++) {
        a[i] = (float)(i + rank);
    }
    NCCLCHECK(ncclReduceScatter(a, b, N, ncclFloat, ncclSum, comm, NULL));
    for (int i = 0; i < N; i++) {
        CHECK(b[i] == (float)(n * (rank * N + i) + n * (n - 1) / 2));
    }
    for (int i = 0; i < N; i++) {
        a[i] = (float)(rank * N + i);
    }
    NCCLCHECK(ncclAllGather(a, b, N, ncclFloat, comm, NULL));
    for (int i = 0; i < N * n; i++) {
        CHECK(b[i] == (float)i);
    }
    /* in place all-gather: own part already at rank * N */
    for (int i = 0; i < N; i++) {
        b[rank * N + i] = (float)(-i);
    }
    NCCLCHECK(ncclAllGather(b + rank * N, b, N, ncclFloat, comm, NULL));
    CHECK(b[(n - 1) * N + 5] == -5.0f);

    /* broadcast and reduce from every root, ncclBcast in place */
    for (int root = 0; root < n; root++) {
        for (int i = 0; i < N; i++) {
            a[i] = rank == root ? (float)(root * 7 + i) : -1.0f;
        }
        NCCLCHECK(ncclBroadcast(a, b, N, ncclFloat, root, comm, NULL));
        CHECK(b[N - 1] == (float)(root * 7 + N - 1));
        NCCLCHECK(ncclBcast(a, N, ncclFloat, root, comm, NULL));
        CHECK(a[3] == (float)(root * 7 + 3));
        for (int i = 0; i < N; i++) {
            x[i] = rank + i;
        }
        NCCLCHECK(ncclReduce(x, xr, N, ncclInt32, ncclSum, root, comm, NULL));
        CHECK(rank != root || xr[10] == n * 10 + n * (n - 1) / 2);
    }
    free(a);
    free(b);
}

/* A ring exchange in one group (both directions at once), and a PreMulSum all-reduce. */
static void test_p2p_and_premul(ncclComm_t comm, int rank, int n)
{
    enum { N = 100000 }; /* large enough that unpaired blocking sends would wait */
    int32_t *s = malloc(sizeof(int32_t) * N), *r1 = malloc(sizeof(int32_t) * N);
    int32_t *r2    = malloc(sizeof(int32_t) * N);
    int      right = (rank + 1) % n, left = (rank + n - 1) % n;
    for (int i = 0; i < N; i++) {
        s[i] = rank * 10 + i;
    }
    NCCLCHECK(ncclGroupStart());
    NCCLCHECK(ncclSend(s, N, ncclInt32, right, comm, NULL));
    NCCLCHECK(ncclSend(s, N, ncclInt32, left, comm, NULL));
    NCCLCHECK(ncclRecv(r1, N, ncclInt32, left, comm, NULL));
    NCCLCHECK(ncclRecv(r2, N, ncclInt32, right, comm, NULL));
    NCCLCHECK(ncclGroupEnd());
    CHECK(r1[7] == left * 10 + 7 && r2[N - 1] == right * 10 + N - 1);

    /* all-to-all as NCCL's examples write it: every peer, the rank itself included */
    enum { B = 1000 };
    int32_t *a2a = malloc(sizeof(int32_t) * B * n), *got = malloc(sizeof(int32_t) * B * n);
    for (int i = 0; i < B * n; i++) {
        a2a[i] = rank * 1000000 + i;
    }
    NCCLCHECK(ncclGroupStart());
    for (int p = 0; p < n; p++) {
        NCCLCHECK(ncclSend(a2a + p * B, B, ncclInt32, p, comm, NULL));
        NCCLCHECK(ncclRecv(got + p * B, B, ncclInt32, p, comm, NULL));
    }
    NCCLCHECK(ncclGroupEnd());
    for (int p = 0; p < n; p++) {
        CHECK(got[p * B] == p * 1000000 + rank * B && got[p * B + B - 1] == got[p * B] + B - 1);
    }
    /* to itself: outside a group, without its receive, or of another size: refused */
    CHECK(ncclSend(a2a, B, ncclInt32, rank, comm, NULL) == ncclInvalidUsage);
    CHECK(strstr(ncclGetLastError(comm), "calling rank itself") != NULL);
    NCCLCHECK(ncclGroupStart());
    NCCLCHECK(ncclSend(a2a, B, ncclInt32, rank, comm, NULL));
    CHECK(ncclGroupEnd() == ncclInvalidUsage);
    CHECK(strstr(ncclGetLastError(comm), "no matching ncclRecv") != NULL);
    NCCLCHECK(ncclGroupStart());
    NCCLCHECK(ncclSend(a2a, B, ncclInt32, rank, comm, NULL));
    NCCLCHECK(ncclRecv(got, B - 1, ncclInt32, rank, comm, NULL));
    CHECK(ncclGroupEnd() == ncclInvalidArgument);
    free(a2a);
    free(got);

    /* sum of (scalar x input): scalar 0.5 read now, then one read at each call */
    float       scalar = 0.5f, in[64], out[64];
    ncclRedOp_t half, dev;
    NCCLCHECK(ncclRedOpCreatePreMulSum(&half, &scalar, ncclFloat, ncclScalarHostImmediate, comm));
    NCCLCHECK(ncclRedOpCreatePreMulSum(&dev, &scalar, ncclFloat, ncclScalarDevice, comm));
    CHECK((int)half >= (int)ncclNumOps && half != dev);
    for (int i = 0; i < 64; i++) {
        in[i] = (float)(rank + 1) * 2.0f;
    }
    scalar = 0.25f; /* immediate: still 0.5; through the pointer: now 0.25 */
    NCCLCHECK(ncclAllReduce(in, out, 64, ncclFloat, half, comm, NULL));
    CHECK(out[0] == (float)(n * (n + 1) / 2));
    NCCLCHECK(ncclAllReduce(in, out, 64, ncclFloat, dev, comm, NULL));
    CHECK(out[63] == (float)(n * (n + 1) / 2) * 0.5f);
    NCCLCHECK(ncclReduce(in, out, 64, ncclFloat, half, 0, comm, NULL));
    CHECK(rank != 0 || out[1] == (float)(n * (n + 1) / 2));
    CHECK(ncclAllReduce(in, out, 64, ncclDouble, half, comm, NULL) == ncclInvalidArgument);
    /* refused before any scaling: a count whose bytes overflow, memory the host cannot read
     * (a PROT_NONE page stands in for device memory); neither breaks the communicator */
    CHECK(ncclAllReduce(in, out, (size_t)1 << 62, ncclFloat, half, comm, NULL) ==
          ncclInvalidArgument);
    CHECK(strstr(ncclGetLastError(comm), "too large") != NULL);
    CHECK(ncclReduceScatter(in, out, (size_t)1 << 61, ncclFloat, half, comm, NULL) ==
          ncclInvalidArgument);
    void *none = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(none != MAP_FAILED);
    CHECK(ncclAllReduce(none, out, 64, ncclFloat, half, comm, NULL) == ncclInvalidArgument);
    CHECK(strstr(ncclGetLastError(comm), "not memory the host can read") != NULL);
    munmap(none, 4096);
    ncclResult_t async = ncclInternalError;
    NCCLCHECK(ncclCommGetAsyncError(comm, &async));
    CHECK(async == ncclSuccess);
    NCCLCHECK(ncclAllReduce(in, out, 64, ncclFloat, half, comm, NULL));
    CHECK(out[0] == (float)(n * (n + 1) / 2));
    NCCLCHECK(ncclRedOpDestroy(half, comm));
    NCCLCHECK(ncclRedOpDestroy(dev, comm));
    CHECK(ncclRedOpDestroy(half, comm) == ncclInvalidArgument);
    free(s);
    free(r1);
    free(r2);
}

static void test_errors_and_queries(ncclComm_t comm, int rank, int n)
{
    int          v = 0, dev = -1;
    ncclResult_t async;
    float        f = 0;
    CHECK(ncclCommCount(comm, &v) == ncclSuccess && v == n);
    CHECK(ncclCommUserRank(comm, &v) == ncclSuccess && v == rank);
    NCCLCHECK(ncclCommCuDevice(comm, &dev));
    CHECK(dev >= 0);
    CHECK(ncclAllReduce(&f, &f, 1, (ncclDataType_t)42, ncclSum, comm, NULL) == ncclInvalidArgument);
    CHECK(strstr(ncclGetLastError(comm), "datatype 42") != NULL);
    CHECK(ncclAllReduce(&f, &f, 1, ncclFloat, (ncclRedOp_t)17, comm, NULL) == ncclInvalidArgument);
    CHECK(ncclAllReduce(NULL, &f, 1, ncclFloat, ncclSum, comm, NULL) == ncclInvalidArgument);
    CHECK(ncclBroadcast(&f, &f, 1, ncclFloat, n + 3, comm, NULL) == ncclInvalidArgument);
    CHECK(ncclCommCount(NULL, &v) == ncclInvalidArgument);
    CHECK(ncclCommCount(comm, NULL) == ncclInvalidArgument);
    CHECK(ncclGroupEnd() == ncclInvalidUsage);
    NCCLCHECK(ncclCommGetAsyncError(comm, &async));
    CHECK(async == ncclSuccess); /* argument errors do not break the communicator */
    CHECK(strcmp(ncclGetErrorString(ncclSuccess), "no error") == 0);
    for (int r = ncclUnhandledCudaError; r < ncclNumResults; r++) {
        CHECK(strlen(ncclGetErrorString((ncclResult_t)r)) > 5);
    }
}

static void test_split(ncclComm_t comm, int rank, int n)
{
    ncclComm_t   sub = NULL, none = NULL;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    int          sr = -1, sn = -1;
    int          one = 1, sum = 0;
    NCCLCHECK(ncclCommSplit(comm, rank % 2, -rank, &sub, &cfg));
    NCCLCHECK(ncclCommCount(sub, &sn));
    NCCLCHECK(ncclCommUserRank(sub, &sr));
    CHECK(sn == (n + 1 - rank % 2) / 2);
    CHECK(sr == sn - 1 - rank / 2); /* key -rank reverses the order */
    NCCLCHECK(ncclAllReduce(&one, &sum, 1, ncclInt32, ncclSum, sub, NULL));
    CHECK(sum == sn);
    NCCLCHECK(ncclCommSplit(comm, rank == 0 ? NCCL_SPLIT_NOCOLOR : 1, 0, &none, NULL));
    CHECK((rank == 0) == (none == NULL));
    NCCLCHECK(ncclCommFinalize(sub));
    CHECK(ncclAllReduce(&one, &sum, 1, ncclInt32, ncclSum, sub, NULL) == ncclInvalidUsage);
    NCCLCHECK(ncclCommDestroy(sub));
    if (none != NULL) {
        NCCLCHECK(ncclCommAbort(none)); /* every member aborts: each returns at once */
    }
}

static int run_rank(ncclUniqueId id, int rank, int n)
{
    ncclComm_t   comm;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    g_rank           = rank;
    cfg.blocking     = 1;
    if (rank % 2 == 0) {
        NCCLCHECK(ncclCommInitRank(&comm, n, id, rank));
    } else {
        NCCLCHECK(ncclCommInitRankConfig(&comm, n, id, rank, &cfg));
    }
    test_collectives(comm, rank, n);
    test_p2p_and_premul(comm, rank, n);
    test_errors_and_queries(comm, rank, n);
    test_split(comm, rank, n);
    NCCLCHECK(ncclCommFinalize(comm));
    NCCLCHECK(ncclCommDestroy(comm));
    return 0;
}

/* One process, three communicators, one thread: everything in groups. */
static int run_init_all(void)
{
    enum { ND = 3, N = 4096 };
    ncclComm_t comms[ND];
    int        devs[ND] = {0, 0, 0}, dev = -1;
    float     *buf[ND];
    g_rank = 0;
    NCCLCHECK(ncclCommInitAll(comms, ND, devs));
    for (int i = 0; i < ND; i++) {
        int r = -1;
        NCCLCHECK(ncclCommUserRank(comms[i], &r));
        CHECK(r == i);
        NCCLCHECK(ncclCommCuDevice(comms[i], &dev));
        CHECK(dev == 0);
        buf[i] = malloc(sizeof(float) * N);
        for (int k = 0; k < N; k++) {
            buf[i][k] = (float)(i + 1);
        }
    }
    NCCLCHECK(ncclGroupStart());
    for (int i = 0; i < ND; i++) {
        NCCLCHECK(ncclAllReduce(buf[i], buf[i], N, ncclFloat, ncclSum, comms[i], NULL));
    }
    NCCLCHECK(ncclGroupEnd());
    for (int i = 0; i < ND; i++) {
        CHECK(buf[i][0] == 6.0f && buf[i][N - 1] == 6.0f);
    }
    /* nested groups: only the outermost end runs them */
    NCCLCHECK(ncclGroupStart());
    NCCLCHECK(ncclGroupStart());
    for (int i = 0; i < ND; i++) {
        NCCLCHECK(ncclBroadcast(buf[i], buf[i], N, ncclFloat, 2, comms[i], NULL));
    }
    NCCLCHECK(ncclGroupEnd());
    NCCLCHECK(ncclGroupEnd());
    /* splits from one thread: in a group, made at ncclGroupEnd (colors 0 1 0, keys reversed) */
    ncclComm_t sub[ND];
    NCCLCHECK(ncclGroupStart());
    for (int i = 0; i < ND; i++) {
        NCCLCHECK(ncclCommSplit(comms[i], i % 2, -i, &sub[i], NULL));
    }
    NCCLCHECK(ncclGroupEnd());
    for (int i = 0; i < ND; i++) {
        int sn = -1, sr = -1;
        CHECK(sub[i] != NULL);
        NCCLCHECK(ncclCommCount(sub[i], &sn));
        NCCLCHECK(ncclCommUserRank(sub[i], &sr));
        CHECK(sn == (i % 2 == 0 ? 2 : 1) && sr == (i == 0 ? 1 : 0));
        buf[i][0] = (float)(i + 1);
    }
    NCCLCHECK(ncclGroupStart());
    for (int i = 0; i < ND; i++) {
        NCCLCHECK(ncclAllReduce(buf[i], buf[i], 1, ncclFloat, ncclSum, sub[i], NULL));
    }
    NCCLCHECK(ncclGroupEnd());
    CHECK(buf[0][0] == 4.0f && buf[1][0] == 2.0f && buf[2][0] == 4.0f);
    for (int i = 0; i < ND; i++) {
        NCCLCHECK(ncclCommDestroy(sub[i]));
    }
    /* two splits of each parent in one group: made in call order, one communicator each */
    ncclComm_t all[ND], odd[ND];
    NCCLCHECK(ncclGroupStart());
    for (int i = 0; i < ND; i++) {
        NCCLCHECK(ncclCommSplit(comms[i], 0, i, &all[i], NULL));
        NCCLCHECK(ncclCommSplit(comms[i], i % 2 ? 1 : NCCL_SPLIT_NOCOLOR, 0, &odd[i], NULL));
    }
    NCCLCHECK(ncclGroupEnd());
    for (int i = 0; i < ND; i++) {
        int sn = -1;
        NCCLCHECK(ncclCommCount(all[i], &sn));
        CHECK(sn == ND && (odd[i] != NULL) == (i % 2 == 1));
        buf[i][0] = 1.0f;
    }
    NCCLCHECK(ncclGroupStart());
    for (int i = 0; i < ND; i++) {
        NCCLCHECK(ncclAllReduce(buf[i], buf[i], 1, ncclFloat, ncclSum, all[i], NULL));
    }
    NCCLCHECK(ncclGroupEnd());
    CHECK(buf[0][0] == (float)ND && buf[ND - 1][0] == (float)ND);
    for (int i = 0; i < ND; i++) { /* odd[1] alone: its destroy waits for nobody */
        NCCLCHECK(ncclCommDestroy(all[i]));
        if (odd[i] != NULL) {
            NCCLCHECK(ncclCommDestroy(odd[i]));
        }
    }
    /* NCCL's usual teardown, one communicator after the other from one thread */
    for (int i = 0; i < ND; i++) {
        NCCLCHECK(ncclCommFinalize(comms[i]));
        NCCLCHECK(ncclCommDestroy(comms[i]));
    }
    /* several ncclCommInitRank in one group: NCCL's other way to the same thing */
    ncclUniqueId id;
    NCCLCHECK(ncclGetUniqueId(&id));
    NCCLCHECK(ncclGroupStart());
    for (int i = 0; i < 2; i++) {
        NCCLCHECK(ncclCommInitRank(&comms[i], 2, id, i));
    }
    NCCLCHECK(ncclGroupEnd());
    NCCLCHECK(ncclGroupStart());
    for (int i = 0; i < 2; i++) {
        NCCLCHECK(ncclAllGather(buf[i], buf[2], 1, ncclFloat, comms[i], NULL));
    }
    NCCLCHECK(ncclGroupEnd());
    NCCLCHECK(ncclCommAbort(comms[0]));
    NCCLCHECK(ncclCommDestroy(comms[1]));
    for (int i = 0; i < ND; i++) {
        free(buf[i]);
    }
    return 0;
}

int main(int argc, char **argv)
{
    int          n = argc > 1 ? atoi(argv[1]) : 4, version = 0, failed = 0;
    ncclUniqueId id;
    NCCLCHECK(ncclGetVersion(&version));
    CHECK(version == NCCL_VERSION_CODE && version >= 21800);
    CHECK(ncclGetUniqueId(NULL) == ncclInvalidArgument);
    NCCLCHECK(ncclGetUniqueId(&id));
    fflush(stdout);
    for (int r = 0; r < n; r++) {
        if (fork() == 0) {
            _exit(run_rank(id, r, n));
        }
    }
    for (int r = 0; r < n; r++) {
        int st;
        wait(&st);
        failed |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
    printf("test_nccl_api: %d ranks in %d processes: %s\n", n, n, failed ? "FAIL" : "ok");
    fflush(stdout);
    pid_t p = fork();
    if (p == 0) {
        _exit(run_init_all());
    }
    int st;
    waitpid(p, &st, 0);
    int bad = !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    printf("test_nccl_api: ncclCommInitAll, 3 communicators from one thread: %s\n",
           bad ? "FAIL" : "ok");
    return failed || bad;
}
