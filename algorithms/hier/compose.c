/* SPDX-License-Identifier: MIT */
/*
 * Schedule composition (see compose.h): sub-schedule construction with the tuner's pick, the
 * remapping of ranks, buffers, tags and scratch, and memory-hazard dependencies between parts.
 */
#include "hier/compose.h"

#include "error.h"
#include "log.h"

/* Byte range a step reads or writes in one buffer. */
typedef struct compose_range {
    int      buf; /* -1: none */
    uint64_t off;
    uint64_t len;
} compose_range_t;

static void compose_access(const coll_step_t *st, compose_range_t *rd, compose_range_t *wr)
{
    rd->buf = wr->buf = -1;
    rd->off = wr->off = 0;
    rd->len = wr->len = st->len;
    switch ((coll_step_kind_t)st->kind) {
    case COLL_STEP_SEND:
        rd->buf = st->src_buf;
        rd->off = st->src_off;
        break;
    case COLL_STEP_RECV:
        wr->buf = st->dst_buf;
        wr->off = st->dst_off;
        break;
    case COLL_STEP_RECV_REDUCE:
    case COLL_STEP_COPY:
    case COLL_STEP_REDUCE:
        rd->buf = st->src_buf;
        rd->off = st->src_off;
        wr->buf = st->dst_buf;
        wr->off = st->dst_off;
        break;
    case COLL_STEP_DIV:
        wr->buf = st->dst_buf;
        wr->off = st->dst_off;
        break;
    default:
        break;
    }
}

static int compose_overlap(const compose_range_t *a, const compose_range_t *b)
{
    return a->buf >= 0 && a->buf == b->buf && a->len > 0 && b->len > 0 &&
           a->off < b->off + b->len && b->off < a->off + a->len;
}

static int compose_conflict(const coll_step_t *a, const coll_step_t *b)
{
    compose_range_t ra, wa, rb, wb;

    compose_access(a, &ra, &wa);
    compose_access(b, &rb, &wb);
    /* a write of either against any access of the other (a step that reads its destination
     * writes it too); reads alone never conflict */
    return compose_overlap(&wa, &rb) || compose_overlap(&wa, &wb) || compose_overlap(&ra, &wb);
}

void coll_compose_hazards(coll_sched_t *s, coll_part_t earlier, coll_part_t later)
{
    for (uint32_t j = later.first; j < later.last; j++) {
        for (uint32_t i = earlier.first; i < earlier.last; i++) {
            if (compose_conflict(&s->steps[i], &s->steps[j])) {
                coll_sched_dep(s, (int)j, (int)i);
            }
        }
    }
}

/* The flat algorithm for a sub-communicator: the tuner's pick among those that need no layout. */
static const coll_algo_t *compose_pick(int nranks, const coll_args_t *sub_args,
                                       const coll_model_t *m)
{
    coll_args_t a = *sub_args;

    a.layout = NULL;
    a.model  = m;
    return coll_algo_select(nranks, &a, NULL, m, NULL);
}

/* A sub buffer reference in parent terms; the sub's scratch goes after the parent's. */
static void compose_map(const coll_embed_t *e, uint64_t scratch_base, uint8_t *buf, uint64_t *off)
{
    if (*buf == COLL_BUF_SCRATCH) {
        *off += scratch_base;
        return;
    }
    *off += e->off[*buf];
    *buf = (uint8_t)e->buf[*buf];
}

coll_result_t coll_compose(coll_sched_t *s, const coll_args_t *sub_args, const coll_embed_t *e,
                           const coll_model_t *m, uint32_t *tag_base, const coll_part_t *prev,
                           int nprev, coll_part_t *part_p)
{
    const coll_algo_t *algo = compose_pick(e->nranks, sub_args, m);
    coll_sched_t       sub;
    coll_args_t        a = *sub_args;
    coll_result_t      st;
    uint32_t           first = s->nsteps, maxtag = 0;
    uint64_t           scratch_base = s->scratch_bytes;

    if (algo == NULL) {
        coll_error(ALGO, "no algorithm for a %d-rank %s part", e->nranks, coll_op_name(a.coll));
        return COLL_ERR_INTERNAL;
    }
    if (*tag_base > UINT32_MAX - COLL_COMPOSE_TAG_SPAN) {
        coll_error(ALGO, "too many composed parts for the 32-bit tag space");
        return COLL_ERR_UNSUPPORTED;
    }
    a.layout = NULL;
    a.model  = m;
    coll_sched_init(&sub, e->rank, e->nranks, a.dtype, a.op);
    st = algo->build(e->rank, e->nranks, &a, &sub);
    if (st == COLL_OK) {
        st = sub.build_error;
    }
    if (st != COLL_OK) {
        coll_sched_destroy(&sub);
        return st;
    }
    for (uint32_t i = 0; i < sub.nsteps; i++) {
        coll_step_t step = sub.steps[i];
        int         idx;

        if (step.kind == COLL_STEP_SEND || step.kind == COLL_STEP_RECV ||
            step.kind == COLL_STEP_RECV_REDUCE) {
            step.peer = e->ranks[step.peer];
            if (step.tag > maxtag) {
                maxtag = step.tag;
            }
            step.tag += *tag_base;
        }
        compose_map(e, scratch_base, &step.src_buf, &step.src_off);
        compose_map(e, scratch_base, &step.dst_buf, &step.dst_off);
        step.ndeps = step.succ_start = step.succ_count = 0;
        idx                                            = coll_sched_append(s, &step);
        if (idx < 0) {
            coll_sched_destroy(&sub);
            return s->build_error;
        }
    }
    if (maxtag >= COLL_COMPOSE_TAG_SPAN) {
        coll_error(ALGO,
                   "%s part of %zu elements needs %u tags, more than %u; raise COLL_CHUNK_SIZE",
                   algo->name, a.count, maxtag + 1, COLL_COMPOSE_TAG_SPAN);
        coll_sched_destroy(&sub);
        return COLL_ERR_UNSUPPORTED;
    }
    for (uint32_t k = 0; k < sub.nedges; k++) {
        coll_sched_dep(s, (int)(first + sub.edges[2 * k + 1]), (int)(first + sub.edges[2 * k]));
    }
    s->scratch_bytes += sub.scratch_bytes;
    *tag_base += COLL_COMPOSE_TAG_SPAN;
    coll_sched_destroy(&sub);
    part_p->first = first;
    part_p->last  = s->nsteps;
    for (int p = 0; p < nprev; p++) {
        coll_compose_hazards(s, prev[p], *part_p);
    }
    return s->build_error;
}
