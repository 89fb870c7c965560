/* SPDX-License-Identifier: MIT */
/*
 * Composing schedules: build an existing algorithm's schedule on a subset of the ranks (a
 * sub-communicator given as a rank list), then embed it into a parent schedule with its ranks,
 * buffers, tags and scratch remapped. Dependencies between embedded parts come from the memory
 * they touch (read-after-write, write-after-read, write-after-write), chunk by chunk, so a
 * later phase starts on a chunk as soon as the earlier phase has finished with it.
 */
#ifndef COLL_HIER_COMPOSE_H
#define COLL_HIER_COMPOSE_H

#include "algo.h"

/* Tags per part: a fixed span (not the part's own count, which may differ between ranks when
 * some ranks have empty blocks), so every rank numbers the parts' tags alike. */
#define COLL_COMPOSE_TAG_SPAN (1u << 27)

typedef struct coll_embed {
    const int *ranks;  /* sub rank -> parent rank */
    int        nranks; /* ranks in the sub-communicator */
    int        rank;   /* this rank's sub rank */
    /* SEND and RECV of the part -> parent buffer and byte offset; the part's own SCRATCH always
     * goes to a fresh range of the parent's scratch */
    coll_buf_id_t buf[COLL_BUF_COUNT];
    uint64_t      off[COLL_BUF_COUNT];
} coll_embed_t;

/* Steps [first, last) of a parent schedule: one embedded part. */
typedef struct coll_part {
    uint32_t first;
    uint32_t last;
} coll_part_t;

/*
 * Build sub_args with the algorithm the tuner picks for nranks = e->nranks under m (never a
 * composed one), and append it to s: peers mapped through e->ranks, buffers through e->buf/off,
 * tags shifted by *tag_base (which advances by COLL_COMPOSE_TAG_SPAN), its scratch placed after the
 * parent's current scratch (which grows). Every step of the part also depends on the steps of
 * earlier parts listed in prev[0..nprev) whose memory it conflicts with.
 */
coll_result_t coll_compose(coll_sched_t *s, const coll_args_t *sub_args, const coll_embed_t *e,
                           const coll_model_t *m, uint32_t *tag_base, const coll_part_t *prev,
                           int nprev, coll_part_t *part_p);

/* Add to steps of part `later` the dependencies on conflicting steps of part `earlier`. */
void coll_compose_hazards(coll_sched_t *s, coll_part_t earlier, coll_part_t later);

#endif
