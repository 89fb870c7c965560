/* SPDX-License-Identifier: MIT */
/*
 * The structure the topology gives the schedules, read from the schedules themselves: the ring
 * collectives send only to the next rank of the layout's ring order, so on emulated hosts with
 * interleaved ranks the ring crosses each host boundary exactly twice, and on the 2-socket
 * machine (tests/topologies) it crosses the socket link exactly twice; the double binary trees
 * have logarithmic depth and, over consecutive ranks per host, few edges between hosts; the
 * tree schedules, built over the same order, have exactly as few host-crossing edges with
 * interleaved ranks as with consecutive ones, and cross the 2-socket machine's socket link at
 * most twice per tree.
 */
#include "config.h"
#include "algo.h"
#include "coll_test.h"
#include "topo/place.h"
#include "tree/tree.h"

#include <stdio.h>
#include <string.h>

#define MAXN   64
#define FIX_2S TOPO_DIR "/synthetic_2s8g4n.xml"

/* The one rank each rank's ring schedule for coll sends to (every send goes to one peer),
 * into next[r]; chains (broadcast, reduce) leave the last rank of the chain at -1. */
static void sched_next(const coll_layout_t *l, coll_op_t coll, int *next)
{
    int n = l->nranks;

    for (int r = 0; r < n; r++) {
        coll_args_t        args = {.coll  = coll,
                                   .count = 3 * (size_t)n + 1,
                                   .dtype = COLL_FLOAT32,
                                   .op    = COLL_SUM,
                                   .root =
                                (coll == COLL_OP_BROADCAST || coll == COLL_OP_REDUCE) ? n / 2 : -1,
                                   .chunk_bytes = 64,
                                   .layout      = l};
        const coll_algo_t *a    = coll_algo_registry_find("ring");
        coll_sched_t       s;

        next[r] = -1;
        coll_sched_init(&s, r, n, args.dtype, args.op);
        ASSERT_OK(a->build(r, n, &args, &s));
        ASSERT_OK(coll_sched_finalize(&s));
        for (uint32_t i = 0; i < s.nsteps; i++) {
            if (s.steps[i].kind == COLL_STEP_SEND) {
                ASSERT_TRUE(next[r] < 0 || next[r] == s.steps[i].peer);
                next[r] = s.steps[i].peer;
            }
        }
        coll_sched_destroy(&s);
    }
}

/* adj[r * n + q] = 1 where algorithm algo's schedule for coll on rank r sends to q. */
static void sched_edges(const coll_layout_t *l, const char *algo, coll_op_t coll, int root,
                        unsigned char *adj)
{
    int                n = l->nranks;
    const coll_algo_t *a = coll_algo_registry_find(algo);

    ASSERT_TRUE(a != NULL);
    memset(adj, 0, (size_t)n * (size_t)n);
    for (int r = 0; r < n; r++) {
        coll_args_t  args = {.coll        = coll,
                             .count       = 3 * (size_t)n + 1,
                             .dtype       = COLL_FLOAT32,
                             .op          = COLL_SUM,
                             .root        = root,
                             .chunk_bytes = 64,
                             .layout      = l};
        coll_sched_t s;

        coll_sched_init(&s, r, n, args.dtype, args.op);
        ASSERT_OK(a->build(r, n, &args, &s));
        ASSERT_OK(coll_sched_finalize(&s));
        for (uint32_t i = 0; i < s.nsteps; i++) {
            if (s.steps[i].kind == COLL_STEP_SEND) {
                adj[r * n + s.steps[i].peer] = 1;
            }
        }
        coll_sched_destroy(&s);
    }
}

/* Pairs of ranks that exchange data in the schedule and sit in different groups. */
static int cut_edges(const unsigned char *adj, int n, const int *group)
{
    int cut = 0;

    for (int r = 0; r < n; r++) {
        for (int q = r + 1; q < n; q++) {
            cut += (adj[r * n + q] || adj[q * n + r]) && group[r] != group[q];
        }
    }
    return cut;
}

/* The layout of n ranks placed at p[] (host keys from the places), with their local and ring
 * orders, as a communicator builds it. */
static void ring_layout(const coll_topo_place_t *p, int n, coll_layout_t *l)
{
    uint64_t keys[MAXN];
    int      order[MAXN];

    for (int r = 0; r < n; r++) {
        keys[r] = p[r].host;
    }
    ASSERT_OK(coll_layout_init(l, n, keys));
    coll_topo_local_order(p, n, order);
    ASSERT_OK(coll_layout_set_local(l, order));
    coll_topo_ring_order(p, n, order);
    ASSERT_OK(coll_layout_set_ring(l, order));
}

static const coll_op_t ring_colls[] = {COLL_OP_ALLREDUCE, COLL_OP_REDUCE_SCATTER, COLL_OP_ALLGATHER,
                                       COLL_OP_BROADCAST, COLL_OP_REDUCE};

/* Every rank on the ring exactly once, and on every host the ring leaves once and enters once;
 * the chains follow the same edges, so they cross each boundary at most twice. */
static void check_hosts(const coll_topo_place_t *p, int n, int nhosts)
{
    coll_layout_t l;
    int           next[MAXN];

    ring_layout(p, n, &l);
    for (size_t c = 0; c < sizeof(ring_colls) / sizeof(ring_colls[0]); c++) {
        int chain = ring_colls[c] == COLL_OP_BROADCAST || ring_colls[c] == COLL_OP_REDUCE;

        sched_next(&l, ring_colls[c], next);
        for (int h = 0; h < nhosts && n > 1; h++) {
            int cross = 0;
            for (int r = 0; r < n; r++) {
                if (next[r] >= 0 && p[r].host != p[next[r]].host &&
                    (p[r].host == (uint64_t)h || p[next[r]].host == (uint64_t)h)) {
                    cross++;
                }
            }
            if (chain) {
                ASSERT_TRUE(cross <= 2);
            } else {
                ASSERT_EQ(cross, nhosts > 1 ? 2 : 0);
            }
        }
        if (!chain && n > 1) { /* one ring through every rank */
            int x = 0, steps = 0;
            do {
                x = next[x];
                steps++;
            } while (x != 0 && steps <= n);
            ASSERT_EQ(steps, n);
        }
    }
    coll_layout_fini(&l);
}

/* COLL_HOSTID-style emulated hosts, rank r on host r mod h: no topology, only the hosts. */
static void test_emulated_hosts(void)
{
    coll_topo_place_t p[MAXN];

    for (int h = 1; h <= 3; h++) {
        for (int n = h; n <= 17; n++) {
            for (int r = 0; r < n; r++) {
                p[r] = (coll_topo_place_t){
                    .host = (uint64_t)(r % h), .package = -1, .numa = -1, .nic = -1};
            }
            check_hosts(p, n, h);
        }
    }
}

#ifdef HAVE_HWLOC
/* The 2-socket machine, 8 ranks on GPUs 3r mod 8 (rank order crosses the sockets often), then
 * the same with 2 emulated hosts of it and interleaved ranks. */
static void test_two_sockets(void)
{
    coll_topo_t      *t = NULL;
    coll_topo_place_t p[16];
    coll_layout_t     l;
    int               next[16];

    ASSERT_OK(coll_topo_load_xml(FIX_2S, &t));
    for (int r = 0; r < 8; r++) {
        coll_topo_place_of(t, 0, (3 * r) % 8, -1, &p[r]);
    }
    ring_layout(p, 8, &l);
    for (size_t c = 0; c < 3; c++) { /* the ring collectives */
        int sockets = 0;
        sched_next(&l, ring_colls[c], next);
        for (int r = 0; r < 8; r++) {
            sockets += p[r].package != p[next[r]].package;
        }
        ASSERT_EQ(sockets, 2);
    }
    {
        unsigned char adj[64];
        int           pkg[8];

        for (int r = 0; r < 8; r++) {
            pkg[r] = p[r].package;
        }
        sched_edges(&l, "tree", COLL_OP_BROADCAST, 0, adj); /* one tree */
        ASSERT_TRUE(cut_edges(adj, 8, pkg) <= 2);
        sched_edges(&l, "tree", COLL_OP_ALLREDUCE, -1, adj); /* both trees */
        ASSERT_TRUE(cut_edges(adj, 8, pkg) <= 4);
    }
    coll_layout_fini(&l);
    for (int r = 0; r < 16; r++) {
        coll_topo_place_of(t, (uint64_t)(r % 2), (r / 2 * 3) % 8, -1, &p[r]);
    }
    check_hosts(p, 16, 2);
    ring_layout(p, 16, &l);
    for (int i = 0; i < 8; i++) { /* rails: local rank i of both hosts on the same GPU */
        int a = coll_layout_rank(&l, 0, i), b = coll_layout_rank(&l, 1, i);
        ASSERT_TRUE(a >= 0 && b >= 0 && p[a].host != p[b].host);
        ASSERT_TRUE(p[a].gpu == p[b].gpu && p[a].nic == p[b].nic);
        ASSERT_TRUE(i == 0 || p[a].package >= p[coll_layout_rank(&l, 0, i - 1)].package);
    }
    sched_next(&l, COLL_OP_ALLREDUCE, next);
    for (int r = 0, sockets = 0; r < 16; r++) {
        sockets += p[r].host == p[next[r]].host && p[r].package != p[next[r]].package;
        ASSERT_TRUE(r < 15 || sockets == 2); /* once inside each host */
    }
    coll_layout_fini(&l);
    coll_topo_free(t);
}
#endif

/* ---- trees ---- */

static int tree_ceil_log2(int n)
{
    int lg = 0;

    while ((1 << lg) < n) {
        lg++;
    }
    return lg;
}

/* Both trees of the double binary tree over n ranks: one root, parents and children agree,
 * every rank reaches the root within ceil(log2 n) + 1 edges. Returns the edges that join
 * ranks of different hosts of per consecutive ranks. */
static int check_dbtree(int n, int per)
{
    int cross = 0;

    for (int tr = 0; tr < 2; tr++) {
        int roots = 0;
        for (int r = 0; r < n; r++) {
            coll_tree_node_t nd, up;
            int              depth = 0;

            coll_dbtree_node(r, n, tr, &nd);
            roots += nd.parent < 0;
            for (int c = 0; c < nd.nchildren; c++) {
                coll_dbtree_node(nd.child[c], n, tr, &up);
                ASSERT_EQ(up.parent, r);
            }
            if (nd.parent >= 0) {
                cross += nd.parent / per != r / per;
            }
            for (int x = r; nd.parent >= 0; depth++) {
                x = nd.parent;
                ASSERT_TRUE(depth <= tree_ceil_log2(n) + 1);
                coll_dbtree_node(x, n, tr, &nd);
            }
        }
        ASSERT_EQ(roots, 1);
    }
    return cross;
}

/* The tree collectives (double binary tree allreduce, tree broadcast and reduce at two roots)
 * on hosts of interleaved ranks (rank r on host r mod h), ordered by the topology, against the
 * same trees over hosts of consecutive ranks: the same number of edges between hosts, and
 * fewer than the trees over rank order would have. */
static void test_topo_trees(void)
{
    static unsigned char adj[MAXN * MAXN];
    static const struct {
        coll_op_t coll;
        int       root;
    } colls[] = {{COLL_OP_ALLREDUCE, -1},
                 {COLL_OP_BROADCAST, 0},
                 {COLL_OP_BROADCAST, 5},
                 {COLL_OP_REDUCE, 0},
                 {COLL_OP_REDUCE, 5}};

    for (int h = 2; h <= 4; h++) {
        for (int n = 2 * h; n <= 40; n += 3) {
            coll_topo_place_t p[MAXN];
            coll_layout_t     topo, blocks, flat;
            uint64_t          keys[MAXN];
            int               host[MAXN], bhost[MAXN];

            for (int r = 0; r < n; r++) {
                p[r] = (coll_topo_place_t){
                    .host = (uint64_t)(r % h), .package = -1, .numa = -1, .nic = -1};
                host[r] = r % h;
            }
            ring_layout(p, n, &topo);
            for (int i = 0; i < n; i++) { /* place i of the order, as consecutive ranks */
                bhost[i] = host[topo.ring_order[i]];
                keys[i]  = (uint64_t)bhost[i];
            }
            ASSERT_OK(coll_layout_init(&blocks, n, keys));
            for (int r = 0; r < n; r++) {
                keys[r] = (uint64_t)host[r];
            }
            ASSERT_OK(coll_layout_init(&flat, n, keys)); /* interleaved, rank order */
            for (size_t c = 0; c < sizeof(colls) / sizeof(colls[0]); c++) {
                int root  = (colls[c].root < 0) ? -1 : colls[c].root % n, cut_topo, cut_flat;
                int broot = (root < 0) ? -1 : topo.ring_pos[root];

                sched_edges(&topo, "tree", colls[c].coll, root, adj);
                cut_topo = cut_edges(adj, n, host);
                sched_edges(&blocks, "tree", colls[c].coll, broot, adj);
                ASSERT_EQ(cut_topo, cut_edges(adj, n, bhost));
                sched_edges(&flat, "tree", colls[c].coll, root, adj);
                cut_flat = cut_edges(adj, n, host);
                ASSERT_TRUE(cut_topo <= cut_flat);
                if (n >= 4 * h) {
                    ASSERT_TRUE(cut_topo < cut_flat);
                }
            }
            coll_layout_fini(&topo);
            coll_layout_fini(&blocks);
            coll_layout_fini(&flat);
        }
    }
}

static void test_trees(void)
{
    for (int n = 1; n <= 1024; n++) {
        int cross = check_dbtree(n, 8);
        /* hosts of 8 consecutive ranks: each tree keeps a host's lower levels inside it */
        if (n % 8 == 0) {
            ASSERT_TRUE(cross <= 2 * 2 * (n / 8));
        }
    }
}

int main(void)
{
    setenv("COLL_DEBUG", "none", 1);
    test_emulated_hosts();
#ifdef HAVE_HWLOC
    test_two_sockets();
#endif
    test_trees();
    test_topo_trees();
    printf("test_topo_ring: ok\n");
    return 0;
}
