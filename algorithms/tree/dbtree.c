/* SPDX-License-Identifier: MIT */
/*
 * Tree construction: the in-order binary tree over positions 1..n (cut to n nodes), its rotation
 * so that any rank is the root, and the two complementary trees of the double binary tree. Pure
 * functions of (rank, n); no schedules are built here.
 */
#include "tree/tree.h"

/* Trailing zero bits of v > 0: the level of position v in the unbounded in-order tree. */
static int tree_level(unsigned v)
{
    return __builtin_ctz(v);
}

/* Parent of position v in the unbounded in-order tree. */
static unsigned tree_up(unsigned v)
{
    unsigned b = 1u << tree_level(v);

    return (v & (b << 1)) != 0 ? v - b : v + b;
}

static unsigned tree_top(unsigned n)
{
    unsigned p = 1;

    while (p <= n / 2) {
        p *= 2;
    }
    return p;
}

int coll_tree_depth(int nranks)
{
    int d = 0;

    while (nranks >= (2 << d)) {
        d++;
    }
    return d;
}

static int tree_mod(long long x, int n)
{
    long long m = x % n;

    return (int)(m < 0 ? m + n : m);
}

int coll_tree_root(int nranks, int shift)
{
    return tree_mod((long long)tree_top((unsigned)nranks) - 1 + shift, nranks);
}

/*
 * Positions above n are skipped: a node's parent is its first ancestor <= n, and its right
 * child the first node <= n down the left edge of its unbounded right subtree. Every ancestor
 * above n has the node in its left subtree, so both rules pick the same edges.
 */
void coll_tree_node(int rank, int nranks, int shift, coll_tree_node_t *out)
{
    unsigned n = (unsigned)nranks, v = (unsigned)tree_mod((long long)rank - shift, nranks) + 1;
    int      lv = tree_level(v);

    out->parent    = -1;
    out->child[0]  = -1;
    out->child[1]  = -1;
    out->nchildren = 0;
    if (v != tree_top(n)) {
        unsigned u = tree_up(v);

        while (u > n) {
            u = tree_up(u);
        }
        out->parent = tree_mod((long long)u - 1 + shift, nranks);
    }
    if (lv == 0) {
        return; /* odd positions are leaves */
    }
    out->child[out->nchildren++] = tree_mod((long long)v - (1u << (lv - 1)) - 1 + shift, nranks);
    for (unsigned c = v + (1u << (lv - 1));; c -= 1u << (tree_level(c) - 1)) {
        if (c <= n) {
            out->child[out->nchildren++] = tree_mod((long long)c - 1 + shift, nranks);
            break;
        }
        if (tree_level(c) == 0) {
            break;
        }
    }
}

void coll_dbtree_node(int rank, int nranks, int tree, coll_tree_node_t *out)
{
    coll_tree_node(rank, nranks, tree == 0 ? 0 : 1, out);
}

/* The node of rank at its place in the order, its neighbours mapped back to ranks. */
static void tree_node_ordered(const coll_layout_t *l, int rank, int nranks, int shift,
                              coll_tree_node_t *out)
{
    const int *order = coll_layout_order(l, nranks);

    if (order == NULL) {
        coll_tree_node(rank, nranks, shift, out);
        return;
    }
    coll_tree_node(l->ring_pos[rank], nranks, shift, out);
    if (out->parent >= 0) {
        out->parent = order[out->parent];
    }
    for (int c = 0; c < out->nchildren; c++) {
        out->child[c] = order[out->child[c]];
    }
}

void coll_topo_dbtree_node(const coll_layout_t *l, int rank, int nranks, int tree,
                           coll_tree_node_t *out)
{
    tree_node_ordered(l, rank, nranks, tree == 0 ? 0 : 1, out);
}

void coll_topo_tree_node(const coll_layout_t *l, int rank, int nranks, int root,
                         coll_tree_node_t *out)
{
    int place = (coll_layout_order(l, nranks) != NULL) ? l->ring_pos[root] : root;

    tree_node_ordered(l, rank, nranks, place - coll_tree_root(nranks, 0), out);
}
