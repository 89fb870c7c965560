/* SPDX-License-Identifier: MIT */
/*
 * Ring allgather: the allgather phase shared with allreduce, and the allgather collective built
 * from it. Out of place the own block is sent straight from sendbuf while a local copy puts it
 * into recvbuf. Builds one rank's schedule; runs nothing.
 */
#include "ring/ring.h"

#include "error.h"
#include "log.h"
#include "util.h"

/*
 * At position p, step s forwards the block of position p-s: the own block at s = 0 (after
 * first_dep), later the block that step s-1 received (RAW edge). A receive writes the block of
 * position p-s-1, which no earlier step of this phase touched; what the caller's earlier phase did
 * to it is ordered through war[].
 */
coll_result_t coll_ring_ag_phase(coll_sched_t *s, const coll_ring_layout_t *l,
                                 const coll_ring_ag_t *p)
{
    int      n = l->nranks, pos = l->pos, next = l->next, prev = l->prev;
    uint32_t nc   = l->nchunks;
    int     *last = coll_malloc((size_t)nc * sizeof(int), "ring indices");

    if (last == NULL) {
        return COLL_ERR_NO_MEMORY;
    }
    for (int t = 0; t < n - 1; t++) {
        int sb = coll_ring_block_at(l, coll_ring_mod((long long)pos - t, n)),
            rb = coll_ring_block_at(l, coll_ring_mod((long long)pos - t - 1, n));

        for (uint32_t c = 0; c < nc; c++) {
            uint64_t slen = coll_ring_chunk_count(l, sb, c) * l->esize;
            uint64_t rlen = coll_ring_chunk_count(l, rb, c) * l->esize;
            uint32_t tag  = p->tag_base + (uint32_t)t * nc + c;
            int      i;

            if (slen > 0 && t == 0) {
                i = coll_sched_send(s, next, tag, p->own_buf,
                                    p->own_off + (uint64_t)c * l->chunk_elems * l->esize, slen);
                coll_sched_dep(s, i, (p->first_dep != NULL) ? p->first_dep[c] : -1);
            } else if (slen > 0) {
                i = coll_sched_send(s, next, tag, p->buf, coll_ring_chunk_off(l, sb, c), slen);
                coll_sched_dep(s, i, last[c]);
            }
            last[c] = -1;
            if (rlen > 0) {
                last[c] =
                    coll_sched_recv(s, prev, tag, p->buf, coll_ring_chunk_off(l, rb, c), rlen);
                coll_sched_dep(s, last[c], (p->war != NULL) ? p->war[(size_t)t * nc + c] : -1);
            }
        }
    }
    coll_free(last);
    return s->build_error;
}

coll_result_t coll_ring_allgather_build(int rank, int nranks, const coll_args_t *args,
                                        coll_sched_t *s)
{
    coll_ring_layout_t l;
    coll_ring_ag_t     ag;
    size_t             total = args->count * (size_t)nranks;
    uint64_t           own;

    if (nranks > 0 && total / (size_t)nranks != args->count) {
        coll_error(ALGO, "allgather of %zu x %d elements overflows", args->count, nranks);
        return COLL_ERR_INVALID_ARG;
    }
    COLL_CHECK(coll_ring_layout_init(&l, rank, nranks, args, total));
    if (args->count == 0) {
        return COLL_OK;
    }
    own = (uint64_t)rank * args->count * l.esize;
    if (!args->in_place) {
        coll_sched_copy_chunked(s, args->chunk_bytes, COLL_BUF_RECV, own, COLL_BUF_SEND, 0,
                                (uint64_t)args->count * l.esize);
    }
    if (nranks == 1) {
        return s->build_error;
    }
    COLL_CHECK(coll_sched_tags_fit((uint64_t)(nranks - 1) * l.nchunks, "ring allgather"));
    ag = (coll_ring_ag_t){.own_buf = args->in_place ? COLL_BUF_RECV : COLL_BUF_SEND,
                          .own_off = args->in_place ? own : 0,
                          .buf     = COLL_BUF_RECV};
    return coll_ring_ag_phase(s, &l, &ag);
}
