/* SPDX-License-Identifier: MIT */
/*
 * The shared-window side of schedules and algorithms, without a network: coll_sched_check on
 * window steps (slots, owners, a slot put twice), the printer, when the one-shot and two-shot
 * all-reduce apply (and fall back), the steps they emit, and what the tuner picks on a host
 * with windows. Correctness of the results under the simulator is in test_sched_matrix.
 */
#include <stdio.h>
#include <string.h>
#include "algo.h"
#include "coll_test.h"

static coll_layout_t window_layout(int n, size_t bytes)
{
    coll_layout_t l;

    ASSERT_OK(coll_layout_init_blocks(&l, n, 1));
    l.shared_window = 1;
    l.window_bytes  = bytes;
    return l;
}

static void expect_invalid(coll_sched_t *s, const char *needle)
{
    char msg[256];

    ASSERT_OK(coll_sched_finalize(s));
    ASSERT_EQ(coll_sched_check(s, msg, sizeof(msg)), COLL_ERR_INTERNAL);
    ASSERT_STR_CONTAINS(msg, needle);
    coll_sched_destroy(s);
}

static void test_check(void)
{
    coll_sched_t s;
    char         msg[256], out[4096];
    FILE        *f;

    coll_sched_init(&s, 1, 3, COLL_FLOAT32, COLL_SUM);
    coll_sched_put(&s, COLL_SCHED_WIN_SLOTS, 0, COLL_BUF_SEND, 0, 8);
    expect_invalid(&s, "slot");

    coll_sched_init(&s, 1, 3, COLL_FLOAT32, COLL_SUM);
    coll_sched_put(&s, 4, 0, COLL_BUF_SEND, 0, 8);
    coll_sched_put(&s, 4, 8, COLL_BUF_SEND, 8, 8);
    expect_invalid(&s, "two puts use window slot 4");

    coll_sched_init(&s, 1, 3, COLL_FLOAT32, COLL_SUM);
    coll_sched_get(&s, 3, 0, 0, COLL_BUF_RECV, 0, 8);
    expect_invalid(&s, "window owner 3");

    coll_sched_init(&s, 1, 3, COLL_FLOAT32, COLL_SUM);
    coll_sched_get_reduce(&s, 0, 0, 0, COLL_BUF_RECV, 0, COLL_BUF_RECV, 4, 8);
    expect_invalid(&s, "overlap");

    /* a valid one: self as owner, window bytes from the furthest step, and the printer */
    coll_sched_init(&s, 1, 3, COLL_FLOAT32, COLL_SUM);
    int p = coll_sched_put(&s, 2, 64, COLL_BUF_SEND, 0, 16);
    coll_sched_dep(&s, coll_sched_get(&s, 1, 2, 64, COLL_BUF_RECV, 0, 16), p);
    coll_sched_get_reduce(&s, 2, 2, 64, COLL_BUF_RECV, 16, COLL_BUF_SEND, 16, 16);
    ASSERT_OK(coll_sched_finalize(&s));
    ASSERT_OK(coll_sched_check(&s, msg, sizeof(msg)));
    ASSERT_EQ(s.nwin, 3);
    ASSERT_EQ(s.win_bytes, 80);
    f = fmemopen(out, sizeof(out), "w");
    ASSERT_TRUE(f != NULL);
    coll_sched_print(&s, f);
    fclose(f);
    ASSERT_STR_CONTAINS(out, "put         slot 2 win+64 <- send+0");
    ASSERT_STR_CONTAINS(out, "get_reduce  peer 2 slot 2 recv+16 = op(send+16, win+64)");
    ASSERT_STR_CONTAINS(out, "window 80 bytes");
    coll_sched_destroy(&s);
}

static void test_supported(void)
{
    const coll_algo_t *one = coll_algo_registry_find("oneshot");
    const coll_algo_t *two = coll_algo_registry_find("twoshot");
    coll_layout_t      l = window_layout(4, 4096), hosts, big = window_layout(130, 1 << 20);
    coll_args_t        a = {.coll        = COLL_OP_ALLREDUCE,
                            .count       = 1024,
                            .dtype       = COLL_FLOAT32,
                            .op          = COLL_SUM,
                            .root        = -1,
                            .chunk_bytes = 4096,
                            .layout      = &l};

    ASSERT_TRUE(one != NULL && two != NULL && !one->forced_only && !two->forced_only);
    ASSERT_TRUE(one->supported(4, &a) && two->supported(4, &a)); /* exactly fits */
    a.count++;
    ASSERT_TRUE(!one->supported(4, &a) && !two->supported(4, &a));
    a.count = 0; /* nothing to put */
    ASSERT_TRUE(one->supported(4, &a) && two->supported(4, &a));
    a.count  = 10;
    a.layout = NULL;
    ASSERT_TRUE(!one->supported(4, &a) && !two->supported(4, &a));
    l.shared_window = 0;
    a.layout        = &l;
    ASSERT_TRUE(!one->supported(4, &a) && !two->supported(4, &a));
    ASSERT_OK(coll_layout_init_blocks(&hosts, 4, 2));
    a.layout = &hosts;
    ASSERT_TRUE(!one->supported(4, &a) && !two->supported(4, &a));
    a.layout = &big; /* two-shot needs two slots per rank */
    ASSERT_TRUE(one->supported(130, &a) && !two->supported(130, &a));
    a.coll = COLL_OP_REDUCE_SCATTER;
    ASSERT_TRUE(!coll_algo_applies(one, 130, &a) && !coll_algo_applies(two, 130, &a));
    coll_layout_fini(&l);
    coll_layout_fini(&hosts);
    coll_layout_fini(&big);
}

/* Steps of each kind in rank's schedule. */
static void count_steps(const char *algo, int rank, int n, size_t count, size_t chunk,
                        int c[COLL_STEP_KIND_COUNT], uint64_t *win_p)
{
    coll_layout_t l = window_layout(n, 1 << 20);
    coll_args_t   a = {.coll        = COLL_OP_ALLREDUCE,
                       .count       = count,
                       .dtype       = COLL_INT32,
                       .op          = COLL_SUM,
                       .root        = -1,
                       .chunk_bytes = chunk,
                       .layout      = &l};
    coll_sched_t  s;
    char          msg[256];

    coll_sched_init(&s, rank, n, a.dtype, a.op);
    ASSERT_OK(coll_algo_registry_find(algo)->build(rank, n, &a, &s));
    ASSERT_OK(coll_sched_finalize(&s));
    ASSERT_OK(coll_sched_check(&s, msg, sizeof(msg)));
    memset(c, 0, sizeof(int) * COLL_STEP_KIND_COUNT);
    for (uint32_t i = 0; i < s.nsteps; i++) {
        c[s.steps[i].kind]++;
    }
    *win_p = s.win_bytes;
    coll_sched_destroy(&s);
    coll_layout_fini(&l);
}

static void test_structure(void)
{
    int      c[COLL_STEP_KIND_COUNT];
    uint64_t win;

    /* one-shot, one piece: rank 0 starts from its input, the others copy rank 0's */
    count_steps("oneshot", 0, 4, 1000, 4096, c, &win);
    ASSERT_TRUE(c[COLL_STEP_PUT] == 1 && c[COLL_STEP_GET] == 0 && c[COLL_STEP_GET_REDUCE] == 3);
    ASSERT_EQ(win, 4000);
    count_steps("oneshot", 2, 4, 1000, 4096, c, &win);
    ASSERT_TRUE(c[COLL_STEP_PUT] == 1 && c[COLL_STEP_GET] == 1 && c[COLL_STEP_GET_REDUCE] == 3);
    /* more pieces than slots: the pieces grow instead */
    count_steps("oneshot", 1, 3, 100000, 64, c, &win);
    ASSERT_EQ(c[COLL_STEP_PUT], COLL_SCHED_WIN_SLOTS);
    ASSERT_EQ(win, 400000);
    /* two-shot, 4 segments of 250: put 4 inputs (rank 0: 3) and the own reduced segment */
    count_steps("twoshot", 2, 4, 1000, 4096, c, &win);
    ASSERT_TRUE(c[COLL_STEP_PUT] == 5 && c[COLL_STEP_GET] == 4 && c[COLL_STEP_GET_REDUCE] == 3);
    count_steps("twoshot", 0, 4, 1000, 4096, c, &win);
    ASSERT_TRUE(c[COLL_STEP_PUT] == 4 && c[COLL_STEP_GET] == 3 && c[COLL_STEP_GET_REDUCE] == 3);
    /* fewer elements than ranks: empty segments have no steps */
    count_steps("twoshot", 4, 5, 3, 4096, c, &win);
    ASSERT_TRUE(c[COLL_STEP_PUT] == 3 && c[COLL_STEP_GET] == 3 && c[COLL_STEP_GET_REDUCE] == 0);
    /* one rank: a copy, no window */
    count_steps("twoshot", 0, 1, 1000, 4096, c, &win);
    ASSERT_TRUE(c[COLL_STEP_COPY] == 1 && win == 0);
}

/* On a host with windows the tuner takes them for small and medium messages, and never for
 * one that does not fit. */
static void test_choice(void)
{
    coll_layout_t l = window_layout(4, 1 << 20);
    coll_args_t   a = {.coll        = COLL_OP_ALLREDUCE,
                       .dtype       = COLL_FLOAT32,
                       .op          = COLL_SUM,
                       .root        = -1,
                       .chunk_bytes = 256 << 10,
                       .layout      = &l};

    a.count = 2;
    ASSERT_TRUE(strcmp(coll_algo_select(4, &a, NULL, NULL, NULL)->name, "oneshot") == 0);
    a.count = 64 << 10; /* 256 KiB */
    ASSERT_TRUE(strcmp(coll_algo_select(4, &a, NULL, NULL, NULL)->name, "twoshot") == 0);
    a.count = 16 << 20; /* 64 MiB */
    ASSERT_TRUE(strstr(coll_algo_select(4, &a, NULL, NULL, NULL)->name, "shot") == NULL);
    ASSERT_TRUE(strstr(coll_algo_select(4, &a, "allreduce:oneshot", NULL, NULL)->name, "shot") ==
                NULL); /* forced but cannot run: the cheapest that can */
    coll_layout_fini(&l);
}

int main(void)
{
    test_check();
    test_supported();
    test_structure();
    test_choice();
    printf("test_win_sched: ok\n");
    return 0;
}
