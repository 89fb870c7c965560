/* SPDX-License-Identifier: MIT */
/*
 * Ring and chain algorithms: the block/chunk layout shared by every ring collective, the two
 * ring phases (reduce-scatter, allgather) that allreduce composes, and one builder per
 * collective. Pure schedule construction; the cost model and the algorithm table live in
 * registry.c.
 */
#ifndef COLL_ALGO_RING_H
#define COLL_ALGO_RING_H

#include "algo.h"

static inline int coll_ring_mod(long long x, int n)
{
    long long m = x % n;
    return (int)(m < 0 ? m + n : m);
}

/*
 * The ring visits the ranks in the layout's ring order (args->layout->ring_order: sockets and
 * hosts crossed as few times as possible), else in rank order. Below, "position" is a place
 * on the ring; the neighbours of a rank are the ranks at the positions beside its own.
 */
static inline const int *coll_ring_order(const coll_args_t *args, int nranks)
{
    return coll_layout_order(args->layout, nranks);
}

/* The rank at ring position i. */
static inline int coll_ring_rank_at(const coll_args_t *args, int nranks, int i)
{
    const int *order = coll_ring_order(args, nranks);
    return (order != NULL) ? order[i] : i;
}

/* The ring position of rank r. */
static inline int coll_ring_pos_of(const coll_args_t *args, int nranks, int r)
{
    return (coll_ring_order(args, nranks) != NULL) ? args->layout->ring_pos[r] : r;
}

/* A chain along the ring starting at root: rank's distance from the root (*pos_p, 0 for the
 * root) and its neighbours on the ring. */
static inline void coll_ring_chain(const coll_args_t *args, int nranks, int rank, int root,
                                   int *pos_p, int *next_p, int *prev_p)
{
    int p = coll_ring_pos_of(args, nranks, rank);

    *pos_p  = coll_ring_mod((long long)p - coll_ring_pos_of(args, nranks, root), nranks);
    *next_p = coll_ring_rank_at(args, nranks, coll_ring_mod((long long)p + 1, nranks));
    *prev_p = coll_ring_rank_at(args, nranks, coll_ring_mod((long long)p - 1, nranks));
}

/*
 * count elements cut into nranks blocks whose sizes differ by at most one element (the first
 * count % nranks blocks get the extra one), each block cut into chunks of chunk_elems elements
 * (the last chunk of a block may be shorter or, in a short block, empty). nchunks is the chunk
 * count of the largest block; it is the tag stride, so every rank derives the same tags.
 */
typedef struct coll_ring_layout {
    int        rank;
    int        nranks;
    int        pos;         /* ring position of rank */
    int        next, prev;  /* the ranks at positions pos + 1 and pos - 1 */
    const int *order;       /* ring order (block order[i] belongs to position i); NULL: identity */
    size_t     esize;       /* bytes per element */
    size_t     count;       /* elements over all blocks */
    size_t     chunk_elems; /* >= 1 */
    uint32_t   nchunks;     /* chunks of the largest block, >= 1 when count > 0 */
} coll_ring_layout_t;

static inline size_t coll_ring_block_start(const coll_ring_layout_t *l, int b)
{
    size_t q = l->count / (size_t)l->nranks, rem = l->count % (size_t)l->nranks;
    return (size_t)b * q + ((size_t)b < rem ? (size_t)b : rem);
}

static inline size_t coll_ring_block_count(const coll_ring_layout_t *l, int b)
{
    size_t q = l->count / (size_t)l->nranks, rem = l->count % (size_t)l->nranks;
    return q + ((size_t)b < rem ? 1 : 0);
}

/* The block that the rank at ring position i ends up with (its own rank's block). */
static inline int coll_ring_block_at(const coll_ring_layout_t *l, int i)
{
    return (l->order != NULL) ? l->order[i] : i;
}

/* Elements of chunk c of block b (0: empty, no step is built for it). */
static inline size_t coll_ring_chunk_count(const coll_ring_layout_t *l, int b, uint32_t c)
{
    size_t n = coll_ring_block_count(l, b), first = (size_t)c * l->chunk_elems;
    if (first >= n) {
        return 0;
    }
    return (n - first < l->chunk_elems) ? n - first : l->chunk_elems;
}

/* Byte offset of chunk c of block b from the start of a buffer laid out like the blocks. */
static inline uint64_t coll_ring_chunk_off(const coll_ring_layout_t *l, int b, uint32_t c)
{
    return (uint64_t)(coll_ring_block_start(l, b) + (size_t)c * l->chunk_elems) * l->esize;
}

/* Fills l for count elements in total, the ring in the order of args->layout; fails if dtype
 * or the chunk count is unusable. */
coll_result_t coll_ring_layout_init(coll_ring_layout_t *l, int rank, int nranks,
                                    const coll_args_t *args, size_t count);

/*
 * Ring reduce-scatter phase: n-1 steps; at step t the rank at position p sends the block of
 * position p-t-1 to the next rank and receives the block of position p-t-2 from the previous
 * one, reducing it with its own input (RECV_REDUCE), so that after the last step it holds its
 * own reduced block. Chunks flow independently; chunk c of step t uses tag
 * tag_base + t * nchunks + c.
 */
typedef struct coll_ring_rs {
    coll_buf_id_t in_buf;      /* own input: block b at coll_ring_chunk_off(b) */
    coll_buf_id_t acc_buf;     /* partial results of steps 0 .. n-3 */
    int           acc_by_step; /* 1: step t's partial at t * largest block bytes; 0: at block */
    coll_buf_id_t out_buf;     /* the finished own block r ... */
    uint64_t      out_off;     /* ... starting at this byte offset */
    int           avg_div;     /* 1: a DIV step on every finished chunk (AVG) */
    uint32_t      tag_base;
    int          *send_idx;  /* out or NULL: [t * nchunks + c] send step index, -1 none */
    int          *final_idx; /* out or NULL: [c] last step writing the own chunk, -1 none */
} coll_ring_rs_t;

coll_result_t coll_ring_rs_phase(coll_sched_t *s, const coll_ring_layout_t *l,
                                 const coll_ring_rs_t *p);

/*
 * Ring allgather phase: n-1 steps; at step s the rank at position p sends the block of
 * position p-s to the next rank (its own block at step 0, afterwards the block received at
 * step s-1) and receives the block of position p-s-1 from the previous one.
 * Tags tag_base + s * nchunks + c.
 */
typedef struct coll_ring_ag {
    coll_buf_id_t own_buf; /* step 0 sends the own block from here ... */
    uint64_t      own_off; /* ... starting at this byte offset */
    coll_buf_id_t buf;     /* received blocks land at coll_ring_chunk_off(b) */
    uint32_t      tag_base;
    const int    *first_dep; /* NULL or [c]: step 0's send of chunk c waits for this step */
    const int    *war;       /* NULL or [s * nchunks + c]: step s's receive waits for it */
} coll_ring_ag_t;

coll_result_t coll_ring_ag_phase(coll_sched_t *s, const coll_ring_layout_t *l,
                                 const coll_ring_ag_t *p);

/* Builders, one per collective (the caller finalizes). */
coll_result_t coll_ring_allreduce_build(int rank, int nranks, const coll_args_t *args,
                                        coll_sched_t *s);
coll_result_t coll_ring_reduce_scatter_build(int rank, int nranks, const coll_args_t *args,
                                             coll_sched_t *s);
coll_result_t coll_ring_allgather_build(int rank, int nranks, const coll_args_t *args,
                                        coll_sched_t *s);
coll_result_t coll_ring_broadcast_build(int rank, int nranks, const coll_args_t *args,
                                        coll_sched_t *s);
coll_result_t coll_ring_reduce_build(int rank, int nranks, const coll_args_t *args,
                                     coll_sched_t *s);

#endif
