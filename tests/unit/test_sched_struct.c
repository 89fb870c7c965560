/* SPDX-License-Identifier: MIT */
/*
 * Schedule structure without simulation: step counts of the ring and chains, the trees'
 * shapes, sched.c's error paths, the tag-space limit and the simulator's own error detection.
 * The simulated matrix is test_sched_matrix.c, the registry and costs test_sched_registry.c.
 * Usage: test_sched_struct [-v].
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "algo.h"
#include "coll_test.h"
#include "compiler.h"
#include "sched.h"
#include "sim.h"
#include "tree/tree.h"

/* args.in_place == TIP_MIXED: odd ranks in place, even ranks not (the flag is per rank). */
#define TIP_MIXED 2

/* ---- structure ---- */

/* Builds rank's schedule (fp32, 64-byte chunks) with the selected algorithm; returns the
 * number of steps of each kind in c[] and the scratch size. */
static size_t build_count(coll_op_t coll, int rank, int n, size_t count, coll_redop_t op, int root,
                          int ip, int c[COLL_STEP_KIND_COUNT])
{
    coll_args_t        args = {.coll        = coll,
                               .count       = count,
                               .dtype       = COLL_FLOAT32,
                               .op          = op,
                               .root        = root,
                               .in_place    = ip,
                               .chunk_bytes = 64};
    const coll_algo_t *a =
        coll_algo_select(n, &args, "ring", NULL, NULL); /* the counts below are ring's */
    coll_sched_t s;
    char         msg[256];
    size_t       scratch;

    ASSERT_TRUE(a != NULL);
    coll_sched_init(&s, rank, n, args.dtype, args.op);
    ASSERT_OK(a->build(rank, n, &args, &s));
    ASSERT_OK(coll_sched_finalize(&s));
    ASSERT_OK(coll_sched_check(&s, msg, sizeof(msg)));
    memset(c, 0, sizeof(int) * COLL_STEP_KIND_COUNT);
    for (uint32_t i = 0; i < s.nsteps; i++) {
        c[s.steps[i].kind]++;
    }
    scratch = s.scratch_bytes;
    coll_sched_destroy(&s);
    return scratch;
}

static void test_structure(void)
{
    static const int ns[] = {2, 3, 5, 8};
    const size_t     ce   = 64 / sizeof(float);
    int              c[COLL_STEP_KIND_COUNT];

    for (size_t ni = 0; ni < COLL_ARRAY_SIZE(ns); ni++) {
        for (int k = 1, n = ns[ni]; k <= 3; k += 2) {
            for (int r = 0; r < n; r++) {
                for (int ip = 0; ip <= TIP_MIXED;
                     ip++) { /* ring allreduce: 2(n-1) sends per chunk */
                    ASSERT_EQ(build_count(COLL_OP_ALLREDUCE, r, n, n * k * ce, COLL_AVG, -1, ip, c),
                              0);
                    ASSERT_EQ(c[COLL_STEP_SEND], 2 * (n - 1) * k);
                    ASSERT_EQ(c[COLL_STEP_RECV_REDUCE], (n - 1) * k);
                    ASSERT_EQ(c[COLL_STEP_RECV], (n - 1) * k);
                    ASSERT_EQ(c[COLL_STEP_DIV], k);
                    ASSERT_EQ(c[COLL_STEP_COPY] + c[COLL_STEP_REDUCE], 0);
                }
                ASSERT_EQ(build_count(COLL_OP_REDUCE_SCATTER, r, n, k * ce, COLL_SUM, -1, 0, c),
                          (size_t)(n - 2) * k * ce * sizeof(float));
                ASSERT_EQ(c[COLL_STEP_SEND], (n - 1) * k);
                ASSERT_EQ(c[COLL_STEP_RECV_REDUCE], (n - 1) * k);
                build_count(COLL_OP_ALLGATHER, r, n, k * ce, COLL_SUM, -1, 1, c);
                ASSERT_EQ(c[COLL_STEP_SEND], (n - 1) * k);
                ASSERT_EQ(c[COLL_STEP_RECV], (n - 1) * k);
                ASSERT_EQ(c[COLL_STEP_COPY], 0);
                build_count(COLL_OP_ALLTOALL, r, n, k * ce, COLL_SUM, -1, 0, c);
                ASSERT_EQ(c[COLL_STEP_SEND], (n - 1) * k);
                ASSERT_EQ(c[COLL_STEP_RECV], (n - 1) * k);
                ASSERT_EQ(c[COLL_STEP_COPY], k);
                for (int root = 0; root < n; root++) { /* chains: the root never receives */
                    build_count(COLL_OP_BROADCAST, r, n, k * ce, COLL_SUM, root, 0, c);
                    ASSERT_EQ(c[COLL_STEP_RECV] + c[COLL_STEP_RECV_REDUCE], r == root ? 0 : k);
                    ASSERT_EQ(c[COLL_STEP_SEND], r == (root - 1 + n) % n ? 0 : k);
                    build_count(COLL_OP_REDUCE, r, n, k * ce, COLL_AVG, root, 0, c);
                    ASSERT_EQ(c[COLL_STEP_SEND], r == root ? 0 : k);
                    ASSERT_EQ(c[COLL_STEP_RECV_REDUCE], r == (root + 1) % n ? 0 : k);
                    ASSERT_EQ(c[COLL_STEP_DIV], r == root ? k : 0);
                }
            }
        }
    }
}

/* ---- trees ---- */

/* One tree: every rank once, parent and child links agree, one root, depth floor(log2 n). */
static void check_tree(int n, const coll_tree_node_t *nd, int root, int *interior)
{
    int depth_max = 0;

    for (int r = 0; r < n; r++) {
        int depth = 0, p = r;

        ASSERT_TRUE(nd[r].nchildren >= 0 && nd[r].nchildren <= 2);
        ASSERT_EQ(nd[r].parent < 0, r == root);
        for (int i = 0; i < nd[r].nchildren; i++) { /* each child names r as its parent */
            int ch = nd[r].child[i];
            ASSERT_TRUE(ch >= 0 && ch < n && ch != r && nd[ch].parent == r);
        }
        if (nd[r].parent >= 0) { /* r is a child of its parent, exactly once */
            const coll_tree_node_t *pn = &nd[nd[r].parent];
            ASSERT_EQ((pn->nchildren > 0 && pn->child[0] == r) +
                          (pn->nchildren > 1 && pn->child[1] == r),
                      1);
        }
        while (nd[p].parent >= 0) { /* reaches the root: no cycle, so every rank once */
            p = nd[p].parent;
            ASSERT_TRUE(++depth < n);
        }
        ASSERT_EQ(p, root);
        depth_max = depth > depth_max ? depth : depth_max;
        interior[r] += nd[r].nchildren > 0;
    }
    ASSERT_EQ(depth_max, coll_tree_depth(n));
}

static void test_trees(void)
{
    coll_tree_node_t nd[2][64];
    int              interior[64];

    for (int n = 1; n <= 64; n++) {
        int lg = 0;

        while ((1 << lg) < n) {
            lg++;
        }
        ASSERT_TRUE(coll_tree_depth(n) <= lg + 1);
        memset(interior, 0, sizeof(interior));
        for (int t = 0; t < 2; t++) {
            int root = -1;

            for (int r = 0; r < n; r++) {
                coll_dbtree_node(r, n, t, &nd[t][r]);
                root = (nd[t][r].parent < 0) ? r : root;
            }
            check_tree(n, nd[t], root, interior);
        }
        for (int r = 0; r < n; r++) { /* complementary: interior in at most one tree */
            ASSERT_TRUE(interior[r] <= 1);
        }
        for (int root = 0; root < n; root++) { /* rotated trees for broadcast and reduce */
            int shift = root - coll_tree_root(n, 0);

            ASSERT_EQ(coll_tree_root(n, shift), root);
            for (int r = 0; r < n; r++) {
                coll_tree_node(r, n, shift, &nd[0][r]);
            }
            check_tree(n, nd[0], root, interior);
        }
    }
}

/* ---- sched.c error paths ---- */

static void expect_check_fails(coll_sched_t *s, const char *needle)
{
    char        msg[256] = "";
    const char *m        = msg; /* a pointer, for ASSERT_STR_CONTAINS */

    ASSERT_OK(coll_sched_finalize(s));

    ASSERT_TRUE(coll_sched_check(s, msg, sizeof(msg)) == COLL_ERR_INTERNAL);
    ASSERT_STR_CONTAINS(m, needle);
    coll_sched_destroy(s);
}

static void test_sched_errors(void)
{
    coll_sched_t s;
    char         msg[256], *text = NULL;
    size_t       textlen = 0;
    FILE        *mem;

    coll_sched_init(&s, 0, 4, COLL_INT32, COLL_AVG);
    ASSERT_EQ(s.op, COLL_SUM);
    ASSERT_TRUE(coll_sched_check(&s, msg, sizeof(msg)) != COLL_OK); /* not finalized */
    coll_sched_send(&s, 1, 5, COLL_BUF_SEND, 0, 8);
    coll_sched_send(&s, 1, 5, COLL_BUF_SEND, 8, 8);
    expect_check_fails(&s, "tag");

    coll_sched_init(&s, 0, 4, COLL_INT32, COLL_SUM); /* same tag, other direction: fine */
    coll_sched_send(&s, 1, 5, COLL_BUF_SEND, 0, 8);
    coll_sched_recv(&s, 1, 5, COLL_BUF_RECV, 0, 8);
    coll_sched_recv(&s, 2, 5, COLL_BUF_RECV, 8, 8);
    ASSERT_OK(coll_sched_finalize(&s));
    ASSERT_OK(coll_sched_check(&s, msg, sizeof(msg)));
    coll_sched_destroy(&s);

    coll_sched_init(&s, 1, 4, COLL_INT32, COLL_SUM);
    coll_sched_send(&s, 1, 0, COLL_BUF_SEND, 0, 8);
    expect_check_fails(&s, "peer");
    coll_sched_init(&s, 1, 4, COLL_INT32, COLL_SUM);
    coll_sched_recv(&s, 4, 0, COLL_BUF_RECV, 0, 8);
    expect_check_fails(&s, "peer");
    coll_sched_init(&s, 0, 4, COLL_INT32, COLL_SUM);
    coll_sched_copy(&s, COLL_BUF_RECV, 0, COLL_BUF_SEND, 0, 6);
    expect_check_fails(&s, "multiple");
    coll_sched_init(&s, 0, 4, COLL_INT32, COLL_SUM);
    s.scratch_bytes = 4;
    coll_sched_recv(&s, 1, 0, COLL_BUF_SCRATCH, 0, 8);
    expect_check_fails(&s, "scratch");
    coll_sched_init(&s, 0, 4, COLL_INT32, COLL_SUM);
    coll_sched_copy(&s, COLL_BUF_RECV, 0, COLL_BUF_RECV, 4, 8);
    expect_check_fails(&s, "overlap");
    coll_sched_init(&s, 0, 4, COLL_INT32, COLL_SUM);
    coll_sched_div(&s, (coll_buf_id_t)7, 0, 8);
    expect_check_fails(&s, "destination");

    /* dependencies: only on earlier steps; duplicates collapse; -1 is ignored */
    coll_sched_init(&s, 0, 4, COLL_INT32, COLL_SUM);
    coll_sched_copy(&s, COLL_BUF_RECV, 0, COLL_BUF_SEND, 0, 8);
    coll_sched_div(&s, COLL_BUF_RECV, 0, 8);
    coll_sched_dep(&s, 1, 0);
    coll_sched_dep(&s, 1, 0);
    coll_sched_dep(&s, 1, -1);
    ASSERT_OK(coll_sched_finalize(&s));
    ASSERT_OK(coll_sched_check(&s, msg, sizeof(msg)));
    ASSERT_EQ(s.steps[1].ndeps, 1);
    ASSERT_EQ(s.nsucc, 1);
    ASSERT_EQ(s.steps[0].succ_count, 1);
    ASSERT_TRUE(coll_sched_copy(&s, COLL_BUF_RECV, 0, COLL_BUF_SEND, 0, 8) < 0); /* immutable */
    mem = open_memstream(&text, &textlen);
    ASSERT_TRUE(mem != NULL);
    coll_sched_print(&s, mem);
    fclose(mem);
    ASSERT_STR_CONTAINS(text, "copy");
    ASSERT_STR_CONTAINS(text, "div");
    free(text);
    coll_sched_destroy(&s);

    coll_sched_init(&s, 0, 4, COLL_INT32, COLL_SUM);
    coll_sched_copy(&s, COLL_BUF_RECV, 0, COLL_BUF_SEND, 0, 8);
    coll_sched_div(&s, COLL_BUF_RECV, 0, 8);
    coll_sched_dep(&s, 0, 1); /* backwards: rejected, remembered */
    ASSERT_TRUE(s.build_error == COLL_ERR_INTERNAL);
    ASSERT_TRUE(coll_sched_div(&s, COLL_BUF_RECV, 0, 8) < 0);
    ASSERT_TRUE(coll_sched_finalize(&s) == COLL_ERR_INTERNAL);
    coll_sched_destroy(&s);
    ASSERT_TRUE(strcmp(coll_step_kind_name(COLL_STEP_RECV_REDUCE), "recv_reduce") == 0);
    ASSERT_TRUE(strcmp(coll_step_kind_name((coll_step_kind_t)99), "invalid") == 0);
}
/* Tag space: a call needing more than 2^32 tags is refused before anything is allocated. */
static void test_tag_limits(void)
{
    coll_args_t  a = {.coll        = COLL_OP_ALLREDUCE,
                      .count       = (size_t)3 << 31,
                      .dtype       = COLL_INT32,
                      .op          = COLL_SUM,
                      .root        = -1,
                      .chunk_bytes = 4};
    coll_sched_t s;

    if (sizeof(size_t) < 8) {
        return;
    }
    fprintf(stderr, "(two errors about tag and chunk limits are expected)\n");
    coll_sched_init(&s, 0, 3, a.dtype, a.op);
    ASSERT_TRUE(coll_algo_registry_find("ring")->build(0, 3, &a, &s) == COLL_ERR_UNSUPPORTED);
    ASSERT_EQ(s.nsteps, 0);
    coll_sched_destroy(&s);
    a.count = (size_t)1 << 34;
    coll_sched_init(&s, 0, 2, a.dtype, a.op);
    ASSERT_TRUE(coll_algo_registry_find("ring")->build(0, 2, &a, &s) == COLL_ERR_UNSUPPORTED);
    coll_sched_destroy(&s);
}
/* ---- which schedules run on device memory moved by the transports (GPUDirect RDMA) ---- */

static int peer_any(void *arg, int peer)
{
    (void)arg;
    (void)peer;
    return 1;
}

static int peer_but(void *arg, int peer)
{
    return peer != *(const int *)arg;
}

/* Builds rank's schedule of args with algorithm a into s (finalized and checked). */
static void build_with(const coll_algo_t *a, int rank, int n, const coll_args_t *args,
                       coll_sched_t *s)
{
    char msg[256];
    coll_sched_init(s, rank, n, args->dtype, args->op);
    ASSERT_OK(a->build(rank, n, args, s));
    ASSERT_OK(coll_sched_finalize(s));
    ASSERT_OK(coll_sched_check(s, msg, sizeof(msg)));
}

static void test_device_fits(void)
{
    /* collectives that only move data: every host algorithm of theirs fits, out of place */
    static const coll_op_t moving[] = {COLL_OP_ALLGATHER, COLL_OP_BROADCAST, COLL_OP_ALLTOALL,
                                       COLL_OP_SEND, COLL_OP_RECV};
    static const int       ns[]     = {2, 3, 4, 5, 8};
    int                    fits = 0, refused = 0, ring_fits = 0, verbose_fits = 1;
    char                   why[160];

    for (size_t ni = 0; ni < COLL_ARRAY_SIZE(ns); ni++) {
        int n = ns[ni];
        for (size_t ci = 0; ci < COLL_ARRAY_SIZE(moving); ci++) {
            for (int k = 0; k < coll_algo_registry_count(); k++) {
                const coll_algo_t *a = coll_algo_registry_get(k);
                for (int r = 0; r < n; r++) {
                    coll_args_t  args = {.coll        = moving[ci],
                                         .count       = (size_t)n * 3000,
                                         .dtype       = COLL_FLOAT32,
                                         .op          = COLL_SUM,
                                         .root        = (r + 1) % n, /* send/recv: the peer */
                                         .chunk_bytes = 4096};
                    coll_sched_t s;
                    if (!coll_algo_applies(a, n, &args)) {
                        continue;
                    }
                    build_with(a, r, n, &args, &s);
                    if (!coll_sched_device_fits(&s, peer_any, NULL, why, sizeof(why))) {
                        /* only staging through scratch memory (Bruck's rotation) may refuse */
                        if (strstr(why, "scratch") == NULL || s.scratch_bytes == 0) {
                            fprintf(stderr, "FAIL %s by %s, rank %d of %d: %s\n",
                                    coll_op_name(args.coll), a->name, r, n, why);
                            abort();
                        }
                        if (verbose_fits && r == 0) {
                            printf("  staged: %s by %s on %d ranks (%s)\n", coll_op_name(args.coll),
                                   a->name, n, why);
                        }
                        coll_sched_destroy(&s);
                        continue;
                    }
                    fits++;
                    if (strcmp(a->name, "ring") == 0 || args.coll == COLL_OP_SEND ||
                        args.coll == COLL_OP_RECV) {
                        ring_fits++;
                    }
                    /* one peer over a transport that cannot move device memory: refused,
                     * naming it */
                    for (uint32_t i = 0; i < s.nsteps; i++) {
                        const coll_step_t *st = &s.steps[i];
                        if (st->kind == COLL_STEP_SEND || st->kind == COLL_STEP_RECV) {
                            int  p = st->peer;
                            char want[32];
                            ASSERT_EQ(coll_sched_device_fits(&s, peer_but, &p, why, sizeof(why)),
                                      0);
                            snprintf(want, sizeof(want), "rank %d,", p);
                            ASSERT_TRUE(strstr(why, want) != NULL);
                            refused++;
                            break;
                        }
                    }
                    coll_sched_destroy(&s);
                }
            }
        }
        /* a ring all-reduce reduces on receipt, a ring reduce-scatter too: staged */
        for (int ip = 0; ip <= 1; ip++) {
            coll_op_t ops[] = {COLL_OP_ALLREDUCE, COLL_OP_REDUCE_SCATTER};
            for (size_t oi = 0; oi < COLL_ARRAY_SIZE(ops); oi++) {
                coll_args_t  args = {.coll        = ops[oi],
                                     .count       = (size_t)n * 3000,
                                     .dtype       = COLL_FLOAT32,
                                     .op          = COLL_SUM,
                                     .root        = -1,
                                     .in_place    = ip,
                                     .chunk_bytes = 4096};
                coll_sched_t s;
                build_with(coll_algo_registry_find("ring"), 0, n, &args, &s);
                ASSERT_EQ(coll_sched_device_fits(&s, peer_any, NULL, why, sizeof(why)), 0);
                ASSERT_TRUE(strstr(why, "recv_reduce") != NULL || strstr(why, "scratch") != NULL);
                coll_sched_destroy(&s);
                refused++;
            }
        }
    }
    ASSERT_TRUE(fits > 100);
    ASSERT_TRUE(ring_fits > 50); /* ring all-gather, ring broadcast, send and recv */
    printf("device fits: %d schedules fit, %d refused as expected\n", fits, refused);
}

int main(void)
{
    char err[512];

    fprintf(stderr, "(two errors about a finalized schedule and a bad dependency are expected)\n");
    test_sched_errors();
    if (sim_selftest(err, sizeof(err)) != 0) {
        fprintf(stderr, "FAIL simulator self-test: %s\n", err);
        abort();
    }
    test_tag_limits();
    test_structure();
    test_trees();
    test_device_fits();
    printf("test_sched_struct: ok\n");
    return 0;
}
