/* SPDX-License-Identifier: MIT */
/*
 * Ring allreduce: a ring reduce-scatter phase followed by a ring allgather phase, each chunk of
 * each block pipelined through the 2(n-1) steps on its own. Also the layout, tag and chunked
 * copy helpers the other ring builders share. Builds one rank's schedule; runs nothing.
 */
#include "ring/ring.h"

#include "error.h"
#include "log.h"
#include "util.h"

coll_result_t coll_ring_layout_init(coll_ring_layout_t *l, int rank, int nranks,
                                    const coll_args_t *args, size_t count)
{
    size_t   esize = coll_dtype_size(args->dtype), largest;
    uint64_t nchunks;

    if (esize == 0 || nranks < 1 || rank < 0 || rank >= nranks) {
        coll_error(ALGO, "bad ring layout: dtype %d, rank %d of %d", (int)args->dtype, rank,
                   nranks);
        return COLL_ERR_INVALID_ARG;
    }
    l->rank        = rank;
    l->nranks      = nranks;
    l->order       = coll_ring_order(args, nranks);
    l->pos         = coll_ring_pos_of(args, nranks, rank);
    l->next        = coll_ring_rank_at(args, nranks, coll_ring_mod(l->pos + 1, nranks));
    l->prev        = coll_ring_rank_at(args, nranks, coll_ring_mod(l->pos - 1, nranks));
    l->esize       = esize;
    l->count       = count;
    l->chunk_elems = args->chunk_bytes / esize;
    if (l->chunk_elems == 0) {
        l->chunk_elems = 1; /* a chunk is never smaller than one element */
    }
    largest = count / (size_t)nranks + ((count % (size_t)nranks) != 0 ? 1 : 0);
    nchunks = largest / l->chunk_elems + ((largest % l->chunk_elems) != 0 ? 1 : 0);
    if (nchunks > UINT32_MAX) {
        coll_error(ALGO, "%zu elements need %llu chunks of %zu elements per block, too many", count,
                   (unsigned long long)nchunks, l->chunk_elems);
        return COLL_ERR_UNSUPPORTED;
    }
    l->nchunks = (uint32_t)nchunks;
    return COLL_OK;
}

/*
 * Blocks are named here by the ring position p of the rank they belong to (rank r's own block
 * is block r in memory, wherever r sits on the ring). Block p ends in recvbuf after the
 * reduce-scatter (its last RECV_REDUCE, then the DIV for AVG), and the allgather sends it first.
 * Out of place, the reduce-scatter reads the input from sendbuf and the one block it never reduces
 * locally (p-1) arrives in the allgather's first step. Data hazards between the phases: the
 * allgather's receive at step s writes block p-s-1, which the reduce-scatter's send at step s reads
 * (from recvbuf when s > 0, or in place; that send itself waited for the reduction that wrote the
 * block, so WAW is covered too).
 */
coll_result_t coll_ring_allreduce_build(int rank, int nranks, const coll_args_t *args,
                                        coll_sched_t *s)
{
    coll_ring_layout_t l;
    coll_ring_rs_t     rs;
    coll_ring_ag_t     ag;
    coll_buf_id_t      in       = args->in_place ? COLL_BUF_RECV : COLL_BUF_SEND;
    int               *send_idx = NULL, *final_idx = NULL;
    uint64_t           ntags;
    coll_result_t      st;

    COLL_CHECK(coll_ring_layout_init(&l, rank, nranks, args, args->count));
    if (args->count == 0) {
        return COLL_OK;
    }
    if (nranks == 1) {
        if (!args->in_place) { /* AVG over one rank divides by one: nothing to do */
            coll_sched_copy_chunked(s, args->chunk_bytes, COLL_BUF_RECV, 0, COLL_BUF_SEND, 0,
                                    (uint64_t)args->count * l.esize);
        }
        return s->build_error;
    }
    ntags = 2 * (uint64_t)(nranks - 1) * l.nchunks;
    COLL_CHECK(coll_sched_tags_fit(ntags, "ring allreduce"));

    send_idx  = coll_malloc((size_t)(nranks - 1) * l.nchunks * sizeof(int), "ring indices");
    final_idx = coll_malloc((size_t)l.nchunks * sizeof(int), "ring indices");
    if (send_idx == NULL || final_idx == NULL) {
        st = COLL_ERR_NO_MEMORY;
        goto out;
    }
    rs = (coll_ring_rs_t){.in_buf      = in,
                          .acc_buf     = COLL_BUF_RECV,
                          .acc_by_step = 0,
                          .out_buf     = COLL_BUF_RECV,
                          .out_off     = (uint64_t)coll_ring_block_start(&l, rank) * l.esize,
                          .avg_div     = (args->op == COLL_AVG),
                          .tag_base    = 0,
                          .send_idx    = send_idx,
                          .final_idx   = final_idx};
    COLL_CHECK_GOTO(coll_ring_rs_phase(s, &l, &rs), st, out);

    if (!args->in_place) {
        /* step 0's send read sendbuf: the first allgather receive needs no ordering */
        for (uint32_t c = 0; c < l.nchunks; c++) {
            send_idx[c] = -1;
        }
    }
    ag = (coll_ring_ag_t){.own_buf   = COLL_BUF_RECV,
                          .own_off   = rs.out_off,
                          .buf       = COLL_BUF_RECV,
                          .tag_base  = (uint32_t)(ntags / 2),
                          .first_dep = final_idx,
                          .war       = send_idx};
    COLL_CHECK_GOTO(coll_ring_ag_phase(s, &l, &ag), st, out);
    st = s->build_error;
out:
    coll_free(send_idx);
    coll_free(final_idx);
    return st;
}
