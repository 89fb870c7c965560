/* SPDX-License-Identifier: MIT */
/*
 * Binary tree broadcast and reduce rooted at args->root (the in-order tree rotated so that the
 * root is its top), cut into chunks that each rank forwards as soon as they are complete, so
 * the tree pipelines. Reduce keeps partial sums in scratch off the root (recvbuf is not
 * significant there). Builds one rank's schedule; runs nothing.
 */
#include "tree/tree.h"

#include "error.h"
#include "log.h"

/* Chunking and this rank's place in the tree rooted at args->root. */
static coll_result_t tree_setup(int rank, int nranks, const coll_args_t *args, const char *what,
                                coll_tree_node_t *nd, size_t *ce_p, uint32_t *nchunks_p)
{
    size_t   esize = coll_dtype_size(args->dtype), ce;
    uint64_t nchunks;

    if (esize == 0 || nranks < 1 || rank < 0 || rank >= nranks || args->root < 0 ||
        args->root >= nranks) {
        coll_error(ALGO, "bad tree %s: dtype %d, rank %d of %d, root %d", what, (int)args->dtype,
                   rank, nranks, args->root);
        return COLL_ERR_INVALID_ARG;
    }
    ce      = args->chunk_bytes / esize;
    ce      = (ce == 0) ? 1 : ce;
    nchunks = args->count / ce + (args->count % ce != 0 ? 1 : 0);
    COLL_CHECK(coll_sched_tags_fit(nchunks, what));
    coll_topo_tree_node(args->layout, rank, nranks, args->root, nd);
    *ce_p      = ce;
    *nchunks_p = (uint32_t)nchunks;
    return COLL_OK;
}

static uint64_t tree_chunk_len(const coll_args_t *args, size_t ce, uint32_t c)
{
    size_t e = (size_t)c * ce;

    return (uint64_t)((args->count - e < ce) ? args->count - e : ce) * coll_dtype_size(args->dtype);
}

static void tree_copy_in(coll_sched_t *s, const coll_args_t *args, size_t ce, uint32_t nchunks)
{
    uint64_t esize = coll_dtype_size(args->dtype);

    for (uint32_t c = 0; c < nchunks && !args->in_place; c++) {
        uint64_t off = (uint64_t)c * ce * esize;
        coll_sched_copy(s, COLL_BUF_RECV, off, COLL_BUF_SEND, off, tree_chunk_len(args, ce, c));
    }
}

coll_result_t coll_tree_broadcast_build(int rank, int nranks, const coll_args_t *args,
                                        coll_sched_t *s)
{
    coll_tree_node_t nd;
    size_t           ce;
    uint32_t         nchunks;
    uint64_t         esize = coll_dtype_size(args->dtype);

    COLL_CHECK(tree_setup(rank, nranks, args, "broadcast", &nd, &ce, &nchunks));
    for (uint32_t c = 0; c < nchunks; c++) {
        uint64_t      off = (uint64_t)c * ce * esize, len = tree_chunk_len(args, ce, c);
        coll_buf_id_t src = COLL_BUF_RECV;
        int           r   = -1;

        if (nd.parent >= 0) {
            r = coll_sched_recv(s, nd.parent, c, COLL_BUF_RECV, off, len);
        } else if (!args->in_place) {
            src = COLL_BUF_SEND;
        }
        for (int i = 0; i < nd.nchildren; i++) {
            coll_sched_dep(s, coll_sched_send(s, nd.child[i], c, src, off, len), r);
        }
    }
    if (nd.parent < 0) { /* after the sends, so the network starts first */
        tree_copy_in(s, args, ce, nchunks);
    }
    return s->build_error;
}

/*
 * The children's partial results are reduced on arrival, the first one with the own input,
 * into scratch (or recvbuf at the root, which then divides for AVG); then sent to the parent.
 */
coll_result_t coll_tree_reduce_build(int rank, int nranks, const coll_args_t *args, coll_sched_t *s)
{
    coll_tree_node_t nd;
    size_t           ce;
    uint32_t         nchunks;
    uint64_t         esize = coll_dtype_size(args->dtype);
    coll_buf_id_t    in    = args->in_place ? COLL_BUF_RECV : COLL_BUF_SEND;
    coll_buf_id_t    acc;

    COLL_CHECK(tree_setup(rank, nranks, args, "reduce", &nd, &ce, &nchunks));
    if (nranks == 1) { /* AVG over one rank divides by one: nothing to do */
        tree_copy_in(s, args, ce, nchunks);
        return s->build_error;
    }
    acc = (nd.parent < 0) ? COLL_BUF_RECV : COLL_BUF_SCRATCH;
    if (nd.parent >= 0 && nd.nchildren > 0) {
        s->scratch_bytes = args->count * esize;
    }
    for (uint32_t c = 0; c < nchunks; c++) {
        uint64_t      off = (uint64_t)c * ce * esize, len = tree_chunk_len(args, ce, c);
        coll_buf_id_t cur  = in;
        int           last = -1;

        for (int i = 0; i < nd.nchildren; i++) {
            int rr = coll_sched_recv_reduce(s, nd.child[i], c, acc, off, cur, off, len);
            coll_sched_dep(s, rr, last);
            last = rr;
            cur  = acc;
        }
        if (nd.parent >= 0) {
            coll_sched_dep(s, coll_sched_send(s, nd.parent, c, cur, off, len), last);
        } else if (args->op == COLL_AVG) {
            coll_sched_dep(s, coll_sched_div(s, COLL_BUF_RECV, off, len), last);
        }
    }
    return s->build_error;
}
