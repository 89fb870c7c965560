/* SPDX-License-Identifier: MIT */
/*
 * Going on after a failure, over every transport: after a kill -9 the survivors' pending
 * all-reduce fails, coll_comm_shrink gives them a communicator of the survivors in their old
 * order, and all-reduces on it are right; coll_comm_revoke from one rank makes every other
 * rank's blocked call fail with COLL_ERR_REVOKED naming it, and all of them shrink to a
 * communicator of the same size; a rank that never asks is left out after COLL_TIMEOUT and
 * told so when it asks late; with rank 0 (the bootstrap root's process) dead, the survivors
 * elect the lowest live rank to run the shrink in the root's place and go on as well.
 */
#include "coll_test.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* All-reduce of each rank's old rank + 1 on the new communicator: the sum of the survivors. */
static void check_new_comm(coll_comm_t *nc, int oldrank, int want_size, int want_rank, int want_sum)
{
    int size = -1, rank = -1, x = oldrank + 1, sum = 0;
    ASSERT_OK(coll_comm_size(nc, &size));
    ASSERT_OK(coll_comm_rank(nc, &rank));
    ASSERT_EQ(size, want_size);
    ASSERT_EQ(rank, want_rank);
    for (int it = 0; it < 20; it++) {
        ASSERT_OK(coll_allreduce(&x, &sum, 1, COLL_INT32, COLL_SUM, nc));
        ASSERT_EQ(sum, want_sum);
    }
    float big[4096], out[4096];
    for (int i = 0; i < 4096; i++) {
        big[i] = (float)(oldrank + i % 5);
    }
    ASSERT_OK(coll_allreduce(big, out, 4096, COLL_FLOAT32, COLL_SUM, nc));
    ASSERT_EQ(out[7], (float)(want_sum - want_size + 2 * want_size));
}

/* 4 ranks; rank 2 dies; 0, 1, 3 become 0, 1, 2 */
static int kill_then_shrink(int rank, int n, coll_comm_t *comm, void *arg)
{
    int           x = 1, y = 0;
    coll_comm_t  *nc;
    coll_result_t st = COLL_OK;
    ASSERT_OK(coll_allreduce(&x, &y, 1, COLL_INT32, COLL_SUM, comm));
    for (int it = 0; it < 1000 && st == COLL_OK; it++) {
        if (rank == 2 && it == 3) {
            raise(SIGKILL);
        }
        st = coll_allreduce(&x, &y, 1, COLL_INT32, COLL_SUM, comm);
    }
    ASSERT_TRUE(st == COLL_ERR_REMOTE || st == COLL_ERR_TRANSPORT);
    double t0 = now_s();
    ASSERT_OK(coll_comm_shrink(comm, &nc));
    printf("rank %d: shrunk in %.2f s after: %s\n", rank, now_s() - t0, coll_comm_last_error(comm));
    check_new_comm(nc, rank, 3, rank < 2 ? rank : rank - 1, 1 + 2 + 4);
    ASSERT_OK(coll_comm_destroy(nc));
    return 0;
}

/* 3 ranks; rank 1 revokes while 0 and 2 wait in an all-reduce it never joins */
static int revoke_then_shrink(int rank, int n, coll_comm_t *comm, void *arg)
{
    int          x = 1, y = 0;
    coll_comm_t *nc;
    if (rank == 1) {
        usleep(200000);
        ASSERT_OK(coll_comm_revoke(comm));
        ASSERT_EQ(coll_allreduce(&x, &y, 1, COLL_INT32, COLL_SUM, comm), COLL_ERR_REVOKED);
    } else {
        double        t0 = now_s();
        coll_result_t st = coll_allreduce(&x, &y, 1, COLL_INT32, COLL_SUM, comm);
        printf("rank %d: %s after %.2f s: %s\n", rank, coll_strerror(st), now_s() - t0,
               coll_comm_last_error(comm));
        ASSERT_EQ(st, COLL_ERR_REVOKED);
        ASSERT_STR_CONTAINS(coll_comm_last_error(comm), "rank 1 revoked");
        ASSERT_TRUE(now_s() - t0 < 5.0);
    }
    ASSERT_OK(coll_comm_shrink(comm, &nc));
    check_new_comm(nc, rank, 3, rank, 1 + 2 + 3);
    ASSERT_OK(coll_comm_destroy(nc));
    return 0;
}

/* 4 ranks; rank 3 stays away past COLL_TIMEOUT: the others continue as 3, it is told later */
static int late_rank(int rank, int n, coll_comm_t *comm, void *arg)
{
    coll_comm_t *nc = NULL;
    if (rank == 3) {
        usleep(2500000); /* COLL_TIMEOUT is 1.5 s here */
        ASSERT_EQ(coll_comm_shrink(comm, &nc), COLL_ERR_REMOTE);
        ASSERT_STR_CONTAINS(coll_comm_last_error(comm), "left out of the shrink");
        ASSERT_TRUE(nc == NULL);
        return 0;
    }
    ASSERT_OK(coll_comm_revoke(comm));
    double t0 = now_s();
    ASSERT_OK(coll_comm_shrink(comm, &nc));
    printf("rank %d: shrunk without rank 3 in %.2f s\n", rank, now_s() - t0);
    check_new_comm(nc, rank, 3, rank, 1 + 2 + 3);
    ASSERT_OK(coll_comm_destroy(nc));
    sleep(2); /* the root (in rank 0) stays up to answer rank 3 */
    return 0;
}

/* All-reduces until rank 0 kills itself (taking the bootstrap root along); the survivors'
 * failing result. */
static coll_result_t until_rank0_dies(int rank, coll_comm_t *comm)
{
    int           x = 1, y = 0;
    coll_result_t st = COLL_OK;
    for (int it = 0; it < 1000 && st == COLL_OK; it++) {
        if (rank == 0 && it == 3) {
            raise(SIGKILL);
        }
        st = coll_allreduce(&x, &y, 1, COLL_INT32, COLL_SUM, comm);
    }
    return st;
}

/* 3 or 4 ranks; rank 0 dies, and with it the bootstrap root: rank 1 runs the shrink */
static int root_dies(int rank, int n, coll_comm_t *comm, void *arg)
{
    coll_comm_t *nc = NULL;
    ASSERT_TRUE(until_rank0_dies(rank, comm) != COLL_OK);
    double t0 = now_s();
    ASSERT_OK(coll_comm_shrink(comm, &nc));
    printf("rank %d: shrunk without the root in %.2f s\n", rank, now_s() - t0);
    /* every survivor asked: nobody waited for COLL_TIMEOUT (1.5 s) */
    ASSERT_TRUE(now_s() - t0 < 1.4);
    int sum = 0;
    for (int r = 1; r < n; r++) {
        sum += r + 1;
    }
    check_new_comm(nc, rank, n - 1, rank - 1, sum);
    ASSERT_OK(coll_comm_destroy(nc));
    return 0;
}

/* 4 ranks; rank 0 dies, rank 2 stays away past COLL_TIMEOUT: rank 1 waits for it that long
 * (it is alive: its port answers), then 1 and 3 go on, and 2, asking late, is told by rank 1
 * that it was left out */
static int root_dies_late_rank(int rank, int n, coll_comm_t *comm, void *arg)
{
    coll_comm_t *nc = NULL;
    ASSERT_TRUE(until_rank0_dies(rank, comm) != COLL_OK);
    if (rank == 2) {
        usleep(2500000);
        double t0 = now_s();
        ASSERT_EQ(coll_comm_shrink(comm, &nc), COLL_ERR_REMOTE);
        printf("rank 2: told in %.2f s: %s\n", now_s() - t0, coll_comm_last_error(comm));
        ASSERT_STR_CONTAINS(coll_comm_last_error(comm), "left out of the shrink");
        ASSERT_TRUE(now_s() - t0 < 1.0);
        ASSERT_TRUE(nc == NULL);
        return 0;
    }
    double t0 = now_s();
    ASSERT_OK(coll_comm_shrink(comm, &nc));
    printf("rank %d: shrunk without the root and rank 2 in %.2f s\n", rank, now_s() - t0);
    check_new_comm(nc, rank, 2, rank == 1 ? 0 : 1, 2 + 4);
    ASSERT_OK(coll_comm_destroy(nc));
    sleep(2); /* rank 1, which ran the shrink, stays up to answer rank 2 */
    return 0;
}

static int run(const char *what, const char *tp, coll_test_opts_t o, coll_test_rank_fn_t fn)
{
    o.transport = tp;
    int rc      = coll_test_run_ranks(&o, fn, NULL);
    printf("%s: %s over %s, %d ranks\n", rc ? "FAIL" : "PASS", what, tp, o.nranks);
    fflush(stdout);
    return rc != 0;
}

int main(void)
{
    const char *tps[8];
    int         ntp = coll_test_transports(tps, 8), failed = 0;
    setenv("COLL_TIMEOUT", "1.5", 1);
    for (int t = 0; t < ntp; t++) {
        coll_test_opts_t k = {.nranks = 4, .want_comm = 1, .timeout_s = 60, .victim = 3};
        failed += run("kill -9, shrink, go on", tps[t], k, kill_then_shrink);
        coll_test_opts_t r = {.nranks = 3, .want_comm = 1, .timeout_s = 60};
        failed += run("revoke, shrink, go on", tps[t], r, revoke_then_shrink);
        coll_test_opts_t l = {.nranks = 4, .want_comm = 1, .timeout_s = 60};
        failed += run("a rank left out of the shrink", tps[t], l, late_rank);
        for (int nr = 3; nr <= 4; nr++) {
            coll_test_opts_t d = {.nranks = nr, .want_comm = 1, .timeout_s = 60, .victim = 1};
            failed += run("rank 0 and the root die, shrink, go on", tps[t], d, root_dies);
        }
        coll_test_opts_t dl = {.nranks = 4, .want_comm = 1, .timeout_s = 60, .victim = 1};
        failed += run("without the root, a rank left out", tps[t], dl, root_dies_late_rank);
    }
    return failed != 0;
}
