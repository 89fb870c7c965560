/* SPDX-License-Identifier: MIT */
/*
 * The algorithm registry and the tuner's choice: lookups, which algorithm the cost model picks
 * by size and by host count, and the overrides. Builds no schedule and runs nothing.
 * Usage: test_sched_registry [-v].
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "algo.h"
#include "coll_test.h"
#include "compiler.h"
#include "cost.h"

static int verbose;

/* ---- registry ---- */

/* Allreduce by size: recursive doubling for small, Rabenseifner for medium, ring for large. */

/* The default model, for the cost functions. */
static const coll_model_t *default_model(void)
{
    static coll_model_t m;
    coll_model_default(&m);
    return &m;
}
#define NULL_MODEL default_model()

/* The cost model's favourite for a call, by brute force over the registry. */
static const coll_algo_t *algo_cheapest(int n, const coll_args_t *a)
{
    const coll_algo_t *best      = NULL;
    double             best_cost = 0;
    for (int i = 0; i < coll_algo_registry_count(); i++) {
        const coll_algo_t *x = coll_algo_registry_get(i);
        if (!(x->colls & (1u << a->coll)) || !x->supported(n, a)) {
            continue;
        }
        double c = x->cost_us(n, a, NULL_MODEL);
        if (best == NULL || c < best_cost) {
            best      = x;
            best_cost = c;
        }
    }
    return best;
}

static void test_registry_sizes(void)
{
    static const int ns[] = {4, 6, 8, 16};
    coll_args_t      a    = {.coll        = COLL_OP_ALLREDUCE,
                             .dtype       = COLL_FLOAT32,
                             .op          = COLL_SUM,
                             .root        = -1,
                             .chunk_bytes = 512 << 10};

    for (size_t i = 0; i < COLL_ARRAY_SIZE(ns); i++) {
        const coll_algo_t *small, *medium, *large;

        a.count = 2; /* 8 bytes */
        small   = algo_cheapest(ns[i], &a);
        ASSERT_TRUE(coll_algo_select(ns[i], &a, NULL, NULL, NULL) == small);
        a.count = 64 << 10; /* 256 KiB */
        medium  = algo_cheapest(ns[i], &a);
        ASSERT_TRUE(coll_algo_select(ns[i], &a, NULL, NULL, NULL) == medium);
        a.count = 16 << 20; /* 64 MiB */
        large   = algo_cheapest(ns[i], &a);
        ASSERT_TRUE(coll_algo_select(ns[i], &a, NULL, NULL, NULL) == large);
        if (verbose) {
            printf("n=%d: 8 B %s, 256 KiB %s, 64 MiB %s\n", ns[i], small->name, medium->name,
                   large->name);
        }
        /* latency-bound: fewest rounds; bandwidth-bound: a bandwidth-optimal algorithm */
        ASSERT_TRUE(strcmp(small->name, "recursive_doubling") == 0);
        ASSERT_TRUE(strcmp(large->name, "ring") == 0 || strcmp(large->name, "rabenseifner") == 0);
    }
    a.count = 2;
    ASSERT_TRUE(coll_algo_select(8, &a, "allreduce:rabenseifner", NULL, NULL) ==
                coll_algo_registry_find("rabenseifner"));
}

/* Across hosts with a slow network the hierarchical algorithm takes the large messages; on one
 * host it never runs. */
static void test_registry_hosts(void)
{
    coll_model_t  m;
    coll_layout_t l2, l1;
    coll_args_t   a = {.coll        = COLL_OP_ALLREDUCE,
                       .count       = 4 << 20, /* 16 MiB */
                       .dtype       = COLL_FLOAT32,
                       .op          = COLL_SUM,
                       .root        = -1,
                       .chunk_bytes = 256 << 10};
    double        hier_cost, ring_cost;

    coll_model_default(&m);
    m.inter.beta_us_per_byte = 1e6 / 125e6; /* 1 Gbit/s */
    ASSERT_OK(coll_layout_init_blocks(&l2, 4, 2));
    ASSERT_OK(coll_layout_init_blocks(&l1, 4, 1));
    ASSERT_TRUE(l2.nhosts == 2 && l2.local_size == 2 && l2.contiguous);
    a.layout  = &l2;
    hier_cost = coll_algo_registry_find("hier")->cost_us(4, &a, &m);
    ring_cost = coll_algo_registry_find("ring")->cost_us(4, &a, &m);
    ASSERT_TRUE(strcmp(coll_algo_select(4, &a, NULL, &m, NULL)->name, "hier") == 0);
    /* the ring crosses the slow link with 2 (n-1)/n of the data, hier with the whole vector */
    ASSERT_TRUE(ring_cost > 1.3 * hier_cost);
    a.coll  = COLL_OP_REDUCE_SCATTER;
    a.count = 1 << 20;
    ASSERT_TRUE(strcmp(coll_algo_select(4, &a, NULL, &m, NULL)->name, "hier") == 0);
    a.layout = &l1;
    for (int c = 0; c < 2; c++) {
        a.coll = c == 0 ? COLL_OP_ALLREDUCE : COLL_OP_ALLGATHER;
        ASSERT_TRUE(strcmp(coll_algo_select(4, &a, NULL, &m, NULL)->name, "hier") != 0);
        ASSERT_TRUE(!coll_algo_registry_find("hier")->supported(4, &a));
    }
    coll_layout_fini(&l2);
    coll_layout_fini(&l1);
}

/* More ranks than CPUs on one host (m.sched_us > 0): a ring's steps wait on neighbours that
 * wait on their own, so from a few MiB Rabenseifner takes over; on free CPUs the ring keeps the
 * large messages, and the latency-bound choice does not change. */
static void test_registry_oversub(void)
{
    coll_model_t  m;
    coll_layout_t l;
    coll_args_t   a = {.coll        = COLL_OP_ALLREDUCE,
                       .dtype       = COLL_FLOAT32,
                       .op          = COLL_SUM,
                       .root        = -1,
                       .chunk_bytes = 256 << 10};

    for (int n = 4; n <= 8; n += 4) {
        ASSERT_OK(coll_layout_init_blocks(&l, n, 1));
        a.layout = &l;
        coll_model_default(&m);
        a.count = 2 << 20; /* 8 MiB */
        ASSERT_TRUE(strcmp(coll_algo_select(n, &a, NULL, &m, NULL)->name, "ring") == 0);
        m.sched_us              = 5.0 * (n - 2) / 2.0; /* n ranks on 2 CPUs */
        const coll_algo_t *over = coll_algo_select(n, &a, NULL, &m, NULL);
        ASSERT_TRUE(strcmp(over->name, "rabenseifner") == 0);
        ASSERT_TRUE(coll_algo_registry_find("ring")->cost_us(n, &a, &m) >
                    1.2 * over->cost_us(n, &a, &m));
        a.count = 2; /* 8 bytes: still the fewest rounds */
        ASSERT_TRUE(strcmp(coll_algo_select(n, &a, NULL, &m, NULL)->name, "recursive_doubling") ==
                    0);
        coll_layout_fini(&l);
    }
}

static void test_registry(void)
{
    coll_args_t        a    = {.coll        = COLL_OP_ALLREDUCE,
                               .count       = 1000,
                               .dtype       = COLL_FLOAT32,
                               .op          = COLL_SUM,
                               .root        = -1,
                               .chunk_bytes = 4096};
    const coll_algo_t *ring = coll_algo_registry_find("ring");

    ASSERT_TRUE(coll_algo_registry_count() >= 4);
    ASSERT_TRUE(ring != NULL);
    ASSERT_TRUE(coll_algo_registry_find("nope") == NULL);
    ASSERT_TRUE(coll_algo_registry_get(coll_algo_registry_count()) == NULL);
    ASSERT_TRUE(strcmp(coll_op_name(COLL_OP_REDUCE_SCATTER), "reduce_scatter") == 0);
    ASSERT_TRUE(strcmp(coll_op_name(COLL_OP_COUNT), "invalid") == 0);
    for (int op = 0; op < COLL_OP_COUNT; op++) {
        const coll_algo_t *sel;

        a.coll = (coll_op_t)op;
        a.root = (op == COLL_OP_SEND || op == COLL_OP_RECV || op == COLL_OP_BROADCAST) ? 1 : -1;
        a.root = (op == COLL_OP_REDUCE) ? 2 : a.root;
        sel    = coll_algo_select(4, &a, NULL, NULL, NULL);
        ASSERT_TRUE(sel != NULL && (sel->colls & (1u << op)) != 0);
        ASSERT_TRUE(sel->cost_us(4, &a, NULL_MODEL) >= 0.0);
        ASSERT_TRUE(coll_algo_select(4, &a, "ring", NULL, NULL) == ring ||
                    (ring->colls & (1u << op)) == 0);
    }
    a = (coll_args_t){.coll        = COLL_OP_ALLREDUCE,
                      .count       = 10,
                      .dtype       = COLL_FLOAT32,
                      .root        = -1,
                      .chunk_bytes = 64};
    ASSERT_TRUE(coll_algo_select(4, &a, "allreduce:ring", NULL, NULL) == ring);
    ASSERT_TRUE(coll_algo_select(4, &a, " allgather:ring , allreduce : ring", NULL, NULL) == ring);
    ASSERT_TRUE(coll_algo_select(4, &a, "pairwise", NULL, NULL) ==
                coll_algo_select(4, &a, NULL, NULL, NULL)); /* falls
                                     back */
    fprintf(stderr, "(one warning about an unknown algorithm is expected)\n");
    ASSERT_TRUE(coll_algo_select(4, &a, "bogus,nocoll:ring,allreduce:bogus", NULL, NULL) ==
                coll_algo_select(4, &a, NULL, NULL, NULL));
    test_registry_sizes();
    test_registry_hosts();
    a.coll     = COLL_OP_ALLTOALL;
    a.in_place = 1;
    ASSERT_TRUE(coll_algo_select(4, &a, NULL, NULL, NULL) ==
                NULL); /* alltoall in place: invalid call */
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        verbose |= strcmp(argv[i], "-v") == 0;
    }
    test_registry();
    test_registry_oversub();
    printf("test_sched_registry: ok\n");
    return 0;
}
