/* SPDX-License-Identifier: MIT */
/*
 * Binary trees over ranks: the in-order tree that the tree collectives use, rotated so any rank
 * can be its root, and the double binary tree (two such trees in which every rank is interior
 * in at most one). Pure functions and the builders; the cost model lives in registry.c.
 */
#ifndef COLL_ALGO_TREE_H
#define COLL_ALGO_TREE_H

#include "algo.h"

/* One rank's place in a tree: ranks, -1 where absent; children fill child[0] first. */
typedef struct coll_tree_node {
    int parent;
    int child[2];
    int nchildren;
} coll_tree_node_t;

/*
 * The in-order tree over n ranks with rank ids rotated by shift: rank r sits at position
 * ((r - shift) mod n) + 1 of the in-order binary tree over positions 1..n (a position's level is
 * its number of trailing zero bits; odd positions are leaves, even ones interior). Its root is
 * the rank at the largest power of two <= n and its depth is floor(log2 n) edges.
 */
void coll_tree_node(int rank, int nranks, int shift, coll_tree_node_t *out);

/* Root rank of coll_tree_node()'s tree with this shift. */
int coll_tree_root(int nranks, int shift);

/* floor(log2 n): the depth in edges of every tree above (0 for n <= 1). */
int coll_tree_depth(int nranks);

/*
 * Double binary tree: tree 0 uses shift 0, tree 1 shift 1. Interior positions are the even
 * ones, so tree 0's interior ranks are the odd ranks and tree 1's are the even ranks >= 2, plus
 * rank 0 when n is even: no rank is interior in both trees, for any n.
 */
void coll_dbtree_node(int rank, int nranks, int tree, coll_tree_node_t *out);

/*
 * The same trees built over the layout's topology order (coll_layout_order) instead of rank
 * order: positions of the tree map to the ranks at those places of the order, so a subtree over
 * consecutive positions stays inside one host (socket, PCIe switch) as far as its size allows
 * and few edges cross between them. l NULL (or of another size) gives the rank-order trees.
 * Broadcast and reduce are rooted at root's place: coll_topo_tree_node(l, r, n, root, out).
 */
void coll_topo_dbtree_node(const coll_layout_t *l, int rank, int nranks, int tree,
                           coll_tree_node_t *out);
void coll_topo_tree_node(const coll_layout_t *l, int rank, int nranks, int root,
                         coll_tree_node_t *out);

coll_result_t coll_dbtree_allreduce_build(int rank, int nranks, const coll_args_t *args,
                                          coll_sched_t *s);
coll_result_t coll_tree_broadcast_build(int rank, int nranks, const coll_args_t *args,
                                        coll_sched_t *s);
coll_result_t coll_tree_reduce_build(int rank, int nranks, const coll_args_t *args,
                                     coll_sched_t *s);

#endif
