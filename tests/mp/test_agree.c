/* SPDX-License-Identifier: MIT */
/*
 * Ranks that set a path-choosing parameter differently fail at communicator creation, all of
 * them, at once, with COLL_ERR_MISMATCH and a message naming the parameter, two ranks and their
 * values (src/api/agree.c); values spelled differently but equal, and parameters that are each
 * rank's own, do not stop them.
 *   (a) COLL_SMALL_AGRS_MAX 0 on rank 1 only, 2 ranks;
 *   (b) COLL_ALGO=ring on ranks 2 and 3 of 4: "(and 1 more rank)";
 *   (c) COLL_REDUCE_BW set on rank 0 to its default value: where it is set it replaces what
 *       the ranks measure together at creation, so being set counts, not the value alone;
 *   (d) COLL_SMALL_MAX 1k against 1024, and COLL_SPIN_TIME, COLL_DIRECT_PUSH, COLL_DEBUG
 *       different on each rank: created, and an all-reduce and an all-gather (both on the
 *       small-call slots over shm) are right;
 *   (e) COLL_TRANSPORT=tcp on rank 1 of 3, auto on the others.
 * Without the check the three communicators of (a)-(c) are created and the ranks go on with
 * different rules; test_small (d) shows the call-time report that stays behind it for (a).
 */
#include "coll_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *needle[3]; /* in every rank's message */
} agree_case_t;

static void env_a(int rank, int n)
{
    (void)n;
    if (rank == 1) {
        setenv("COLL_SMALL_AGRS_MAX", "0", 1);
    }
}

static void env_b(int rank, int n)
{
    (void)n;
    if (rank >= 2) {
        setenv("COLL_ALGO", "ring", 1);
    }
}

static void env_c(int rank, int n)
{
    (void)n;
    if (rank == 0) {
        setenv("COLL_REDUCE_BW", "8g", 1);
    }
}

static void env_e(int rank, int n)
{
    (void)n;
    setenv("COLL_TRANSPORT", rank == 1 ? "tcp" : "auto", 1);
}

static void env_d(int rank, int n)
{
    static const char *const debug[] = {"warn", "error", "none", "info"};
    (void)n;
    setenv("COLL_SMALL_MAX", rank % 2 ? "1024" : "1k", 1);
    setenv("COLL_SPIN_TIME", rank % 2 ? "0" : "1ms", 1);
    setenv("COLL_DIRECT_PUSH", rank % 2 ? "0" : "1", 1);
    setenv("COLL_DEBUG", debug[rank % 4], 1);
}

/* Creation must fail on every rank with the case's words, well inside the bootstrap deadline. */
static int agree_fails(int rank, int n, coll_comm_t *unused, void *arg)
{
    const agree_case_t *c    = arg;
    coll_comm_t        *comm = NULL;
    coll_result_t       st;
    (void)unused;

    st = coll_test_comm_create(coll_test_rendezvous_dir(), rank, n, &comm);
    printf("rank %d: %s: %s\n", rank, coll_strerror(st), coll_last_error());
    fflush(stdout);
    if (comm != NULL) {
        coll_comm_destroy(comm);
    }
    ASSERT_EQ(st, COLL_ERR_MISMATCH);
    for (int i = 0; i < 3 && c->needle[i] != NULL; i++) {
        ASSERT_STR_CONTAINS(coll_last_error(), c->needle[i]);
    }
    return 0;
}

static int agree_works(int rank, int n, coll_comm_t *unused, void *arg)
{
    coll_comm_t *comm = NULL;
    float        x[200], y[200], g[400];
    (void)unused;
    (void)arg;

    ASSERT_OK(coll_test_comm_create(coll_test_rendezvous_dir(), rank, n, &comm));
    for (int i = 0; i < 200; i++) {
        x[i] = (float)(rank + 1) * (float)i;
    }
    ASSERT_OK(coll_allreduce(x, y, 200, COLL_FLOAT32, COLL_SUM, comm));
    ASSERT_OK(coll_allgather(x, g, 200, COLL_FLOAT32, comm));
    for (int i = 0; i < 200; i++) {
        ASSERT_EQ(y[i], 3.0f * (float)i);
        ASSERT_EQ(g[i], (float)i);
        ASSERT_EQ(g[200 + i], 2.0f * (float)i);
    }
    ASSERT_OK(coll_comm_destroy(comm));
    return 0;
}

static int agree_run(const char *what, int n, void (*env)(int, int), coll_test_rank_fn_t fn,
                     void *arg)
{
    coll_test_opts_t o  = {.nranks = n, .want_comm = 0, .timeout_s = 30, .before_comm = env};
    int              rc = coll_test_run_ranks(&o, fn, arg);
    printf("%s: %s, %d ranks\n", rc ? "FAIL" : "PASS", what, n);
    fflush(stdout);
    return rc != 0;
}

int main(void)
{
    agree_case_t a = {{"COLL_SMALL_AGRS_MAX is \"32k\" (default) on rank 0 but \"0\" on rank 1",
                       "must set it alike", NULL}};
    agree_case_t b = {{"COLL_ALGO is \"auto\" (default) on rank 0 but \"ring\" on rank 2",
                       "(and 1 more rank)", NULL}};
    agree_case_t c = {{"COLL_REDUCE_BW is \"8g\" on rank 0 but \"8g\" (default) on rank 1",
                       "or leave it unset", NULL}};
    agree_case_t e = {{"COLL_TRANSPORT is \"auto\" on rank 0 but \"tcp\" on rank 1", NULL, NULL}};
    int          failed = 0;

    unsetenv("COLL_ALGO");
    unsetenv("COLL_SMALL_MAX");
    unsetenv("COLL_SMALL_AGRS_MAX");
    unsetenv("COLL_REDUCE_BW");
    unsetenv("COLL_TRANSPORT");
    setenv("COLL_CONF_FILE", "/dev/null", 1); /* the defaults, whatever ~/.coll.conf says */
    setenv("COLL_BOOTSTRAP_TIMEOUT", "20", 1);
    failed += agree_run("(a) COLL_SMALL_AGRS_MAX differs", 2, env_a, agree_fails, &a);
    failed += agree_run("(b) COLL_ALGO differs on two ranks", 4, env_b, agree_fails, &b);
    failed += agree_run("(c) COLL_REDUCE_BW set on one rank", 2, env_c, agree_fails, &c);
    failed += agree_run("(d) equal values, own parameters", 2, env_d, agree_works, NULL);
    failed += agree_run("(e) COLL_TRANSPORT differs", 3, env_e, agree_fails, &e);
    printf("%s\n", failed ? "FAIL" : "PASS");
    return failed ? 1 : 0;
}
