/* SPDX-License-Identifier: MIT */
/*
 * Internals of the gradient compressors (coll_compress_*): the object shared by compress.c
 * (arguments, warm-up, dense steps, counters), topk.c and onebit.c (one method each). Only the
 * public coll.h calls move data; from the library the platform layer alone is used.
 */
#ifndef COLL_TRAIN_COMPRESS_H
#define COLL_TRAIN_COMPRESS_H

#include "coll_train.h"
#include "train/train.h"

#include <stdint.h>

typedef enum { COMPRESS_IDLE, COMPRESS_DENSE, COMPRESS_TOPK, COMPRESS_ONEBIT } compress_phase_t;

struct coll_compress {
    coll_compress_config_t cfg;
    coll_comm_t           *comm;
    int                    rank;
    int                    nranks;
    size_t                 count;
    float                 *residual; /* worker residual (TOPK: accumulated minus sent) */
    float                 *velocity; /* TOPK with momentum: u = m u + g, NULL otherwise */
    /* the step in flight */
    compress_phase_t phase;
    int              sent_valid; /* a step completed in this object: coll_compress_sent */
    coll_request_t  *req;
    float           *out;
    float           *dense_send; /* dense step: accumulated values (one step, count elements) */
    /* TOPK */
    size_t    kmax;     /* largest k of the schedule: sizes the pair buffers */
    size_t    k;        /* k of the last step */
    uint32_t *pairs;    /* this rank's (index, value bits) pairs, 2 kmax words */
    uint32_t *gathered; /* every rank's pairs, nranks x 2 kmax words */
    uint32_t *keys;     /* selection scratch: |value| bits, count words (allocated on demand) */
    uint32_t *cand;     /* candidate indices of the sampled threshold, (cand_cap) words */
    uint32_t *cand_key; /* their keys (partitioned in place by the selection) */
    size_t    cand_cap;
    /* ONEBIT: shard = elements reduced by one rank, block = one shard compressed */
    size_t    shard;       /* elements per shard, a multiple of chunk */
    size_t    block_words; /* uint32 words per block: chunk scales, then sign bits */
    uint32_t *wsend;       /* worker blocks, nranks x block_words */
    uint32_t *wrecv;       /* blocks of this rank's shard from every rank */
    uint32_t *ssend;       /* server block of this rank's shard */
    uint32_t *srecv;       /* server blocks of every shard (the all-gather) */
    float    *server_res;  /* residual of this rank's shard, shard elements */
    float    *shard_sum;   /* the shard's decompressed sum over the ranks */
    /* counters */
    coll_compress_stats_t stats;
};

/* Errors: the training layer's one helper (train.h). */
#define compress_error(_st, _fn, ...) coll_train_error(_st, _fn, __VA_ARGS__)

/* Bytes a rank sends in the ring model: all-gather / all-to-all of `block` bytes per rank,
 * all-reduce of `bytes`. */
uint64_t coll_compress_gather_wire(const coll_compress_t *c, uint64_t block);
uint64_t coll_compress_allreduce_wire(const coll_compress_t *c, uint64_t bytes);

/* The methods: start compresses c->residual (grad + residual, already accumulated) in place
 * and starts the exchange; finish completes it and writes c->out. */

/* Top-k (topk.c). k for the step number `step` counted from the end of the dense warm-up. */
size_t        coll_compress_topk_k(const coll_compress_config_t *cfg, size_t count, uint64_t step);
coll_result_t coll_compress_topk_alloc(coll_compress_t *c);
void          coll_compress_topk_free(coll_compress_t *c);
coll_result_t coll_compress_topk_start(coll_compress_t *c);
coll_result_t coll_compress_topk_finish(coll_compress_t *c);
void          coll_compress_topk_sent(const coll_compress_t *c, float *sent);

/* 1-bit (onebit.c). */
coll_result_t coll_compress_onebit_alloc(coll_compress_t *c);
void          coll_compress_onebit_free(coll_compress_t *c);
coll_result_t coll_compress_onebit_start(coll_compress_t *c);
coll_result_t coll_compress_onebit_finish(coll_compress_t *c);
void          coll_compress_onebit_sent(const coll_compress_t *c, float *sent);

#endif
