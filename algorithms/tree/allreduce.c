/* SPDX-License-Identifier: MIT */
/*
 * Double binary tree allreduce: the first half of the vector is reduced up tree 0 and broadcast
 * back down it, the second half uses tree 1, chunk by chunk so both trees pipeline. The root of
 * a tree divides for AVG before its broadcast, so every rank ends with the root's bits. Builds
 * one rank's schedule; runs nothing.
 */
#include "tree/tree.h"

#include "error.h"
#include "log.h"

/* Per-call constants shared by every chunk. */
typedef struct dbt_ctx {
    coll_tree_node_t node[2];
    coll_buf_id_t    in; /* the input: SEND out of place, RECV in place */
    int              in_place;
    int              avg;
    uint32_t         nchunks; /* chunks of the larger half: the tag stride */
} dbt_ctx_t;

static uint32_t dbt_tag(const dbt_ctx_t *x, int tree, int down, uint32_t c)
{
    return (uint32_t)(2 * tree + down) * x->nchunks + c;
}

/*
 * One chunk through one tree. Up: the children's partial sums are reduced into recvbuf on
 * arrival (the first one with the own input), the result goes to the parent. Down: the value
 * from the parent (at the root: the sum, divided for AVG) overwrites recvbuf and is forwarded.
 */
static void dbt_chunk(coll_sched_t *s, const dbt_ctx_t *x, int tree, uint32_t c, uint64_t off,
                      uint64_t len)
{
    const coll_tree_node_t *nd   = &x->node[tree];
    coll_buf_id_t           cur  = x->in;
    int                     last = -1, up = -1, ready;

    for (int i = 0; i < nd->nchildren; i++) {
        int rr = coll_sched_recv_reduce(s, nd->child[i], dbt_tag(x, tree, 0, c), COLL_BUF_RECV, off,
                                        cur, off, len);
        coll_sched_dep(s, rr, last);
        last = rr;
        cur  = COLL_BUF_RECV;
    }
    if (nd->parent >= 0) {
        up = coll_sched_send(s, nd->parent, dbt_tag(x, tree, 0, c), cur, off, len);
        coll_sched_dep(s, up, last);
        ready = coll_sched_recv(s, nd->parent, dbt_tag(x, tree, 1, c), COLL_BUF_RECV, off, len);
        /* the result overwrites what the send up reads (in place, or a partial sum) */
        if (x->in_place || nd->nchildren > 0) {
            coll_sched_dep(s, ready, up);
        }
    } else {
        ready = last;
        if (x->avg) {
            ready = coll_sched_div(s, COLL_BUF_RECV, off, len);
            coll_sched_dep(s, ready, last);
        }
    }
    for (int i = 0; i < nd->nchildren; i++) {
        int sd = coll_sched_send(s, nd->child[i], dbt_tag(x, tree, 1, c), COLL_BUF_RECV, off, len);
        coll_sched_dep(s, sd, ready);
    }
}

coll_result_t coll_dbtree_allreduce_build(int rank, int nranks, const coll_args_t *args,
                                          coll_sched_t *s)
{
    size_t    esize = coll_dtype_size(args->dtype), ce, half[2];
    uint64_t  nchunks;
    dbt_ctx_t x;

    if (esize == 0 || nranks < 1 || rank < 0 || rank >= nranks) {
        coll_error(ALGO, "bad double binary tree call: dtype %d, rank %d of %d", (int)args->dtype,
                   rank, nranks);
        return COLL_ERR_INVALID_ARG;
    }
    if (args->count == 0) {
        return COLL_OK;
    }
    ce = args->chunk_bytes / esize;
    ce = (ce == 0) ? 1 : ce;
    if (nranks == 1) { /* AVG over one rank divides by one: nothing to do */
        if (!args->in_place) {
            coll_sched_copy_chunked(s, args->chunk_bytes, COLL_BUF_RECV, 0, COLL_BUF_SEND, 0,
                                    (uint64_t)args->count * esize);
        }
        return s->build_error;
    }
    half[0] = (args->count + 1) / 2;
    half[1] = args->count - half[0];
    nchunks = half[0] / ce + (half[0] % ce != 0 ? 1 : 0);
    COLL_CHECK(coll_sched_tags_fit(4 * nchunks, "double binary tree"));
    x.nchunks  = (uint32_t)nchunks;
    x.in_place = args->in_place;
    x.in       = args->in_place ? COLL_BUF_RECV : COLL_BUF_SEND;
    x.avg      = (args->op == COLL_AVG);
    coll_topo_dbtree_node(args->layout, rank, nranks, 0, &x.node[0]);
    coll_topo_dbtree_node(args->layout, rank, nranks, 1, &x.node[1]);
    for (uint32_t c = 0; c < x.nchunks; c++) {
        for (int t = 0; t < 2; t++) {
            size_t e = (size_t)c * ce, start = (t == 0) ? 0 : half[0];

            if (e >= half[t]) {
                continue;
            }
            dbt_chunk(s, &x, t, c, (uint64_t)(start + e) * esize,
                      (uint64_t)((half[t] - e < ce) ? half[t] - e : ce) * esize);
        }
    }
    return s->build_error;
}
