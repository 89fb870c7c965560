/* SPDX-License-Identifier: MIT */
/*
 * coll_comm_split: even/odd colors with reversed keys, a NOCOLOR rank, collectives on the
 * children and the parent interleaved, and destroy of children before the parent.
 * coll_comm_nhosts of the parent and the children, on one host and on emulated hosts of 2 ranks
 * (COLL_TEST_RANKS_PER_HOST); its NULL output refused; a split of an aborted communicator and
 * of one that failed on one rank only; a split refused on one rank for an invalid color, and one
 * that fails on one rank out of file descriptors: the others fail at once, naming that rank.
 */
#include "coll_test.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Ranks per emulated host (0: one host), and the hosts among the ranks of color (-1: all). */
static int split_rph;

static int split_color(int r, int n)
{
    return r == n - 1 && n > 2 ? COLL_SPLIT_NOCOLOR : r % 2;
}

static int split_hosts(int n, int color)
{
    int hosts = 0, last = -1;
    for (int r = 0; r < n; r++) { /* hosts hold consecutive ranks */
        int h = split_rph > 0 ? r / split_rph : 0;
        if ((color < 0 || split_color(r, n) == color) && h != last) {
            hosts++;
            last = h;
        }
    }
    return hosts;
}

static int split_rank(int rank, int n, coll_comm_t *comm, void *arg)
{
    coll_comm_t *child = NULL;
    int          color = split_color(rank, n), nh = -1;
    ASSERT_OK(coll_comm_nhosts(comm, &nh));
    ASSERT_EQ(nh, split_hosts(n, -1));
    ASSERT_TRUE(coll_comm_nhosts(comm, NULL) == COLL_ERR_INVALID_ARG);
    ASSERT_OK(coll_comm_split(comm, color, -rank, &child));
    if (color == COLL_SPLIT_NOCOLOR) {
        ASSERT_TRUE(child == NULL);
    } else {
        int crank, csize, expect_size = 0, expect_rank = 0;
        for (int r = 0; r < n; r++) {
            int c = split_color(r, n);
            if (c == color) {
                expect_size++;
                expect_rank += r > rank; /* key = -rank: higher old ranks come first */
            }
        }
        ASSERT_OK(coll_comm_rank(child, &crank));
        ASSERT_OK(coll_comm_size(child, &csize));
        ASSERT_EQ(csize, expect_size);
        ASSERT_EQ(crank, expect_rank);
        ASSERT_OK(coll_comm_nhosts(child, &nh));
        ASSERT_EQ(nh, split_hosts(n, color));
        int sum = 0, one = rank;
        ASSERT_OK(coll_allreduce(&one, &sum, 1, COLL_INT32, COLL_SUM, child));
        int want = 0;
        for (int r = 0; r < n; r++) {
            int c = split_color(r, n);
            want += c == color ? r : 0;
        }
        ASSERT_EQ(sum, want);
    }
    int total = 0, me = 1;
    ASSERT_OK(coll_allreduce(&me, &total, 1, COLL_INT32, COLL_SUM, comm));
    ASSERT_EQ(total, n);
    if (child != NULL) {
        ASSERT_OK(coll_comm_destroy(child));
    }
    return 0;
}

/* NCCL style with a non-member creator: the parent makes the id and forks the ranks; the
 * children inherit the id but not the root thread, which keeps serving from the parent. */
static coll_unique_id_t parent_id;

static int parent_id_rank(int rank, int n, coll_comm_t *unused, void *arg)
{
    coll_comm_t *comm;
    int          x = rank + 1, sum = 0;
    ASSERT_OK(coll_comm_init_rank(&comm, n, parent_id, rank));
    ASSERT_OK(coll_allreduce(&x, &sum, 1, COLL_INT32, COLL_SUM, comm));
    ASSERT_EQ(sum, n * (n + 1) / 2);
    ASSERT_OK(coll_comm_destroy(comm));
    return 0;
}

/* coll_comm_split on an aborted communicator: the rank that aborted is refused at once with
 * COLL_ERR_ABORTED; the other learns in the split's round who aborted (COLL_ERR_REMOTE naming
 * rank 1), and the parent is failed with it. */
static int split_aborted_rank(int rank, int n, coll_comm_t *comm, void *arg)
{
    coll_comm_t  *child = NULL;
    coll_result_t st;
    double        t0;
    (void)n, (void)arg;
    if (rank == 1) {
        ASSERT_OK(coll_comm_abort(comm));
    }
    t0 = now_s();
    st = coll_comm_split(comm, 0, rank, &child);
    printf("rank %d: split returned %s after %.2f s: %s\n", rank, coll_strerror(st), now_s() - t0,
           coll_last_error());
    ASSERT_TRUE(child == NULL);
    if (rank == 1) {
        ASSERT_EQ(st, COLL_ERR_ABORTED);
        ASSERT_TRUE(now_s() - t0 < 5.0); /* no round joined: at once (it waited COLL_TIMEOUT) */
    } else {
        ASSERT_EQ(st, COLL_ERR_REMOTE);
        ASSERT_STR_CONTAINS(coll_last_error(), "rank 1 aborted");
        ASSERT_EQ(coll_comm_get_error(comm), COLL_ERR_REMOTE);
        ASSERT_STR_CONTAINS(coll_comm_last_error(comm), "rank 1 aborted");
    }
    return 0;
}

/* coll_comm_split when rank 1's communicator failed there only (a receive of 1 element matched
 * a send of 4):
 * rank 1 is refused at once with that error and tells the others, so rank 0, already waiting in
 * the split's round, fails within seconds naming rank 1 (it waited COLL_BOOTSTRAP_TIMEOUT). */
static int split_failed_rank(int rank, int n, coll_comm_t *comm, void *arg)
{
    coll_comm_t  *child = NULL;
    coll_result_t st;
    int32_t       v = 0;
    (void)n, (void)arg;
    double  t0      = now_s();
    int32_t four[4] = {1, 2, 3, 4};
    if (rank == 0) {
        ASSERT_OK(coll_send(four, 4, COLL_INT32, 1, comm));
    } else {
        ASSERT_EQ(coll_recv(&v, 1, COLL_INT32, 0, comm), COLL_ERR_MISMATCH); /* 4 sent */
    }
    st = coll_comm_split(comm, 0, rank, &child);
    printf("rank %d: split returned %s after %.2f s: %s\n", rank, coll_strerror(st), now_s() - t0,
           coll_last_error());
    ASSERT_TRUE(child == NULL);
    ASSERT_TRUE(now_s() - t0 < 20.0);
    if (rank == 1) {
        ASSERT_EQ(st, COLL_ERR_MISMATCH);
    } else {
        ASSERT_EQ(st, COLL_ERR_REMOTE);
        ASSERT_STR_CONTAINS(coll_last_error(), "rank 1's communicator failed");
        ASSERT_STR_CONTAINS(coll_last_error(), "recv #0");
        ASSERT_EQ(coll_comm_get_error(comm), COLL_ERR_REMOTE);
    }
    return 0;
}

/* coll_comm_split with an invalid color on rank 1: rank 1 is refused at once with
 * COLL_ERR_INVALID_ARG and tells the others, so rank 0, already waiting in the split's round,
 * fails within seconds naming rank 1 and the color (it waited COLL_BOOTSTRAP_TIMEOUT, 30 s
 * here, and then timed out naming no rank). */
static int split_bad_color_rank(int rank, int n, coll_comm_t *comm, void *arg)
{
    coll_comm_t  *child = NULL;
    coll_result_t st;
    (void)n, (void)arg;
    double t0 = now_s();
    st        = coll_comm_split(comm, rank == 1 ? -7 : 0, rank, &child);
    printf("rank %d: split returned %s after %.2f s: %s\n", rank, coll_strerror(st), now_s() - t0,
           coll_last_error());
    ASSERT_TRUE(child == NULL);
    ASSERT_TRUE(now_s() - t0 < 5.0);
    if (rank == 1) {
        ASSERT_EQ(st, COLL_ERR_INVALID_ARG);
        ASSERT_STR_CONTAINS(coll_comm_last_error(comm), "color -7 is negative");
    } else {
        ASSERT_EQ(st, COLL_ERR_REMOTE);
        ASSERT_STR_CONTAINS(coll_last_error(), "rank 1's communicator failed");
        ASSERT_STR_CONTAINS(coll_last_error(), "color -7 is negative");
        ASSERT_EQ(coll_comm_get_error(comm), COLL_ERR_REMOTE);
    }
    return 0;
}

/* coll_comm_split when its leader, rank 0, has no file descriptor left to set up the bootstrap
 * root of the new communicator: rank 0 fails with a message that says what failed, and tells
 * the others, so rank 1 fails within seconds naming rank 0 (the message was empty, and rank 1
 * waited COLL_BOOTSTRAP_TIMEOUT in the split's second round). */
static int split_no_fd_rank(int rank, int n, coll_comm_t *comm, void *arg)
{
    coll_comm_t  *child = NULL;
    coll_result_t st;
    struct rlimit old, low;
    int           fds[256], nfds = 0, hi = 0;
    (void)n, (void)arg;
    if (rank == 0) { /* no descriptor free: the limit just above the highest, the gaps filled */
        DIR           *d = opendir("/proc/self/fd");
        struct dirent *e;
        ASSERT_TRUE(d != NULL);
        while ((e = readdir(d)) != NULL) {
            hi = atoi(e->d_name) > hi ? atoi(e->d_name) : hi;
        }
        closedir(d);
        ASSERT_TRUE(getrlimit(RLIMIT_NOFILE, &old) == 0);
        low          = old;
        low.rlim_cur = (rlim_t)hi + 1;
        ASSERT_TRUE(setrlimit(RLIMIT_NOFILE, &low) == 0);
        while (nfds < 256 && (fds[nfds] = dup(2)) >= 0) {
            nfds++;
        }
    }
    double t0 = now_s();
    st        = coll_comm_split(comm, 0, rank, &child);
    double dt = now_s() - t0;
    if (rank == 0) {
        while (nfds > 0) {
            close(fds[--nfds]);
        }
        ASSERT_TRUE(setrlimit(RLIMIT_NOFILE, &old) == 0);
    }
    printf("rank %d: split returned %s after %.2f s: %s\n", rank, coll_strerror(st), dt,
           coll_last_error());
    ASSERT_TRUE(child == NULL);
    ASSERT_TRUE(dt < 5.0);
    if (rank == 0) {
        ASSERT_EQ(st, COLL_ERR_SYSTEM);
        ASSERT_STR_CONTAINS(coll_last_error(), "coll_comm_split: cannot ");
        ASSERT_STR_CONTAINS(coll_last_error(), "Too many open files");
        ASSERT_STR_CONTAINS(coll_comm_last_error(comm), "Too many open files");
    } else {
        ASSERT_EQ(st, COLL_ERR_REMOTE);
        ASSERT_STR_CONTAINS(coll_last_error(), "rank 0's communicator failed");
        ASSERT_STR_CONTAINS(coll_last_error(), "Too many open files");
        ASSERT_EQ(coll_comm_get_error(comm), COLL_ERR_REMOTE);
    }
    return 0;
}

int main(void)
{
    const char      *tps[8];
    int              ntp = coll_test_transports(tps, 8), failed = 0, total = 0;
    static const int counts[] = {1, 2, 4, 5};
    for (int t = 0; t < ntp; t++) {
        for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
            coll_test_opts_t o = {
                .nranks = counts[i], .want_comm = 1, .timeout_s = 120, .transport = tps[t]};
            int rc = coll_test_run_ranks(&o, split_rank, NULL);
            printf("%s: split over %s, %d ranks\n", rc ? "FAIL" : "PASS", tps[t], counts[i]);
            total++;
            failed += rc != 0;
        }
    }
    /* emulated hosts of 2 ranks: 5 ranks on 3 hosts, children of 2 ranks on 2 */
    for (int n = 4; n <= 5; n++) {
        coll_test_opts_t o = {.nranks = n, .want_comm = 1, .timeout_s = 120};
        setenv("COLL_TEST_RANKS_PER_HOST", "2", 1);
        split_rph = 2;
        int rc    = coll_test_run_ranks(&o, split_rank, NULL);
        unsetenv("COLL_TEST_RANKS_PER_HOST");
        split_rph = 0;
        printf("%s: split, %d ranks on hosts of 2 ranks\n", rc ? "FAIL" : "PASS", n);
        total++;
        failed += rc != 0;
    }
    ASSERT_OK(coll_get_unique_id(&parent_id));
    coll_test_opts_t po  = {.nranks = 3, .want_comm = 0, .timeout_s = 60};
    int              prc = coll_test_run_ranks(&po, parent_id_rank, NULL);
    printf("%s: communicator from an id made by the (non-member) parent\n", prc ? "FAIL" : "PASS");
    total++;
    failed += prc != 0;
    coll_test_opts_t ao  = {.nranks = 2, .want_comm = 1, .timeout_s = 60};
    int              arc = coll_test_run_ranks(&ao, split_aborted_rank, NULL);
    printf("%s: split of an aborted communicator\n", arc ? "FAIL" : "PASS");
    total++;
    failed += arc != 0;
    coll_test_opts_t fo  = {.nranks = 2, .want_comm = 1, .timeout_s = 60};
    int              frc = coll_test_run_ranks(&fo, split_failed_rank, NULL);
    printf("%s: split of a communicator failed on one rank\n", frc ? "FAIL" : "PASS");
    total++;
    failed += frc != 0;
    /* a refused or failed split on one rank: the others fail fast, well before this deadline */
    setenv("COLL_BOOTSTRAP_TIMEOUT", "30", 1);
    coll_test_opts_t bo  = {.nranks = 2, .want_comm = 1, .timeout_s = 60};
    int              brc = coll_test_run_ranks(&bo, split_bad_color_rank, NULL);
    printf("%s: split refused on one rank for an invalid color\n", brc ? "FAIL" : "PASS");
    total++;
    failed += brc != 0;
    int erc = coll_test_run_ranks(&bo, split_no_fd_rank, NULL);
    printf("%s: split failed on one rank out of file descriptors\n", erc ? "FAIL" : "PASS");
    total++;
    failed += erc != 0;
    unsetenv("COLL_BOOTSTRAP_TIMEOUT");
    printf("%d passed, %d failed\n", total - failed, failed);
    return failed != 0;
}
