/* SPDX-License-Identifier: MIT */
/*
 * ZeRO internals shared by zero.c (stages, step, layer gathering) and zero_ckpt.c (sharded
 * checkpoints). A bucket is the unit of sharding: its flat buffer is padded to a multiple of
 * the rank count and rank r owns elements [r * shard, (r + 1) * shard).
 */
#ifndef COLL_TRAIN_ZERO_H
#define COLL_TRAIN_ZERO_H

#include "train/train.h"

#include <stdio.h>

typedef struct {
    size_t count;
    int    layer;
    int    bucket;
    size_t offset; /* elements from the start of its bucket */
    size_t gstart; /* elements from the start of the model (registration order) */
    int    ready;
} zero_param_t;

typedef struct {
    struct coll_zero *z;
    int               lo, hi;   /* parameters lo..hi */
    int               layer;    /* stage 3: the bucket's single layer */
    size_t            count;    /* elements */
    size_t            shard;    /* elements per rank, padded = shard * nranks */
    float            *pfull;    /* full parameters: stages 0-2 always, stage 3 when gathered */
    float            *pshard;   /* stage 3: this rank's master parameters */
    float            *gfull;    /* full gradients: stages 0-1 always, 2-3 until reduced */
    float            *gshard;   /* reduced shard (stage 1: inside gfull) */
    float            *state[2]; /* optimizer state over [opt_lo, opt_lo + opt_n) */
    size_t            opt_lo, opt_n;
    int               nready;
    int               launched;
    int               gather; /* stage 3: 0 released, 1 in flight, 2 available */
    train_op_t        rs_op;
    train_op_t        ag_op;
} zero_bucket_t;

struct coll_zero {
    coll_zero_config_t cfg;
    train_worker_t     worker;
    int                rank, nranks;
    zero_param_t      *params;
    int                nparams, cap_params;
    zero_bucket_t     *buckets;
    int                nbuckets;
    int                nlayers;
    int                next_launch;
    int                last_gathered; /* stage 3: direction of the prefetch */
    int                direction;
    uint64_t           steps;
    float             *init; /* initial values until the build (realloc'd, not coll_malloc) */
    size_t             init_cap;
    atomic_size_t      working;
    atomic_size_t      peak_working;
};

int coll_zero_nstate(const coll_zero_t *z);

/* Shard files of a checkpoint (zero_ckpt.c): this header, nseg segments, then per segment the
 * master parameters and each optimizer state array (floats), then the FNV-1a 64 of all that. */
#define COLL_ZERO_CKPT_MAGIC    0x4b43485a4c4c4f43ull /* "COLLZHCK" */
#define COLL_ZERO_CKPT_VERSION  2                     /* 2: FNV-1a 64 trailer */
#define COLL_ZERO_CKPT_MAX_SEGS (1u << 24)

typedef struct {
    uint64_t magic;
    uint32_t version;
    uint32_t rank;
    uint32_t nranks;
    uint32_t nstate;
    uint64_t nseg;
} coll_zero_ckpt_header_t;

typedef struct {
    uint64_t gstart; /* first element in the model's flat space */
    uint64_t len;
} coll_zero_ckpt_seg_t;

/* Read and validate a shard's header and segment table from f (file_size bytes, positioned at
 * 0) for a model of nelems elements: every segment inside the model (an empty one past its end
 * is moved to the end), the data it announces inside the file. *segs_p is coll_free'd by the
 * caller. On failure, why says what is wrong. */
coll_result_t coll_zero_ckpt_read_table(FILE *f, uint64_t file_size, uint32_t nstate,
                                        uint64_t nelems, coll_zero_ckpt_header_t *h,
                                        coll_zero_ckpt_seg_t **segs_p, char *why, size_t why_len);
/* Master parameters and gradient shard of this rank in bucket b, aligned with opt_lo. */
float        *coll_zero_master(zero_bucket_t *b);
coll_result_t coll_zero_build(coll_zero_t *z, const char *fn);
/* Between steps (no gradient reported since the last coll_zero_step; else
 * COLL_ERR_INVALID_USAGE, logged for fn): waits for the worker's collectives in flight (a
 * prefetch), then COLL_OK. Checkpoints use the worker's communicator from the caller's thread. */
coll_result_t coll_zero_idle(coll_zero_t *z, const char *fn);
/* Stage 3: every layer's gathered copy (done or in flight) waited for and dropped; the next
 * gather reads the owners' shards again. */
coll_result_t coll_zero_drop_gathered(coll_zero_t *z, const char *fn);
/* Stages 1-2: all-gather every bucket's parameters from the owners' shards. */
coll_result_t coll_zero_gather_all(coll_zero_t *z, const char *fn);

/* Shard-wise optimizer update of n elements; step counts from 1. */
void coll_train_optim_update(const coll_optim_config_t *c, uint64_t step, float *p, const float *g,
                             float **state, size_t n);

#endif
