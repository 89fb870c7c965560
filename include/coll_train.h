/* SPDX-License-Identifier: MIT */
/*
 * coll_train.h -- the training layer of libcoll, built on the public coll.h API only.
 * This header holds the gradient compression section: per-bucket compressors (top-k with
 * error feedback and optional momentum correction, 1-bit sign + scale with error feedback on
 * both sides of a compressed reduce-scatter + all-gather). C99 and C++ safe; failures return
 * coll_result_t and coll_last_error() names the argument or the step that failed.
 */
#ifndef COLL_TRAIN_H
#define COLL_TRAIN_H

#include <coll.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- gradient compression ----
 * A compressor belongs to one bucket of count fp32 gradients on one communicator. Each step
 * adds the new gradient to the compressor's residual (error feedback), sends a compressed
 * form and returns the average over the ranks of what was sent; what was not sent stays in the
 * residual for later steps. The first warmup_steps steps are dense (a plain COLL_AVG
 * all-reduce). Every step reports the bytes it put on the wire next to a dense all-reduce's. */

/** @brief Compression methods. */
typedef enum {
    COLL_COMPRESS_TOPK   = 1, /* k largest |g + residual| per rank, (index, value) all-gather */
    COLL_COMPRESS_ONEBIT = 2, /* signs + one fp32 scale per chunk, reduce-scatter + all-gather */
    COLL_COMPRESS_KIND_COUNT
} coll_compress_kind_t;

/** @brief Compressor settings. Zero fields take the default named in the comment. */
typedef struct {
    size_t               size;   /* sizeof(coll_compress_config_t) */
    coll_compress_kind_t kind;   /* COLL_COMPRESS_TOPK (default) or COLL_COMPRESS_ONEBIT */
    double               ratio;  /* TOPK: fraction of the elements each rank sends,
                                    0 < ratio <= 1; k = ceil(ratio * count) */
    size_t chunk;                /* ONEBIT: elements sharing one scale, a multiple of 32; 0: 256 */
    int    momentum;             /* TOPK: 1 = momentum correction with factor masking (DGC):
                                    the residual accumulates velocity, not gradient */
    float momentum_factor;       /* TOPK with momentum: 0 < factor < 1; 0: 0.9 */
    int   warmup_steps;          /* first steps sent uncompressed (dense all-reduce) */
    int   sparsity_warmup_steps; /* TOPK: after the dense steps, the sent fraction falls
                                    exponentially from 25% to ratio over this many steps */
} coll_compress_config_t;

/** @brief Initialiser: top-k 1%, no momentum correction, no warm-up. */
#define COLL_COMPRESS_CONFIG_INITIALIZER                                                           \
    {                                                                                              \
        sizeof(coll_compress_config_t), COLL_COMPRESS_TOPK, 0.01, 0, 0, 0.0f, 0, 0                 \
    }

/** @brief Which error-feedback residual coll_compress_residual() returns. */
typedef enum {
    COLL_COMPRESS_WORKER = 0, /* this rank's residual: count elements */
    COLL_COMPRESS_SERVER = 1  /* ONEBIT: the residual of the shard this rank reduces */
} coll_compress_side_t;

/**
 * @brief Bytes counted per step. Wire bytes are what this rank sends in the collectives the
 *        step makes, in the ring model: (n-1) x the per-rank block for an all-gather or an
 *        all-to-all, 2 (n-1)/n x the buffer for an all-reduce. dense_bytes is what a dense fp32
 *        all-reduce of the same bucket would send; dense_bytes / wire_bytes is the saving.
 */
typedef struct {
    uint64_t steps;            /* steps completed */
    int      dense;            /* 1: the last step was an uncompressed warm-up step */
    size_t   sent;             /* last step: elements this rank sent as (index, value)
                                  pairs (TOPK) or as signs (ONEBIT, padded count) */
    uint64_t payload_bytes;    /* last step: bytes this rank handed to the collectives */
    uint64_t wire_bytes;       /* last step: bytes this rank sent (ring model) */
    uint64_t dense_bytes;      /* last step: the same for a dense fp32 all-reduce */
    uint64_t total_wire_bytes; /* sums over all steps */
    uint64_t total_dense_bytes;
} coll_compress_stats_t;

/** @brief Opaque compressor: residuals, wire buffers and counters of one bucket. */
typedef struct coll_compress coll_compress_t;

/**
 * @brief Collective over comm: create a compressor for a bucket of count fp32 elements.
 *        Every rank must pass the same count and settings (checked: COLL_ERR_MISMATCH).
 * @param [in] comm     communicator of the data-parallel group; the compressor's collectives
 *                      run on it, in the order the steps are called
 * @param [in] config   settings, NULL for COLL_COMPRESS_CONFIG_INITIALIZER
 * @param [in] count    elements in the bucket, 1 <= count < 2^32
 * @param [out] c_p     the compressor
 * @return COLL_OK, COLL_ERR_INVALID_ARG (coll_last_error() names the field), COLL_ERR_MISMATCH.
 */
COLL_API coll_result_t coll_compress_create(coll_comm_t *comm, const coll_compress_config_t *config,
                                            size_t count, coll_compress_t **c_p);

/** @brief Free a compressor (local; a step in flight is waited for first). */
COLL_API coll_result_t coll_compress_destroy(coll_compress_t *c);

/**
 * @brief Collective: one compressed step. out = average over the ranks of what each sent,
 *        grad + residual is split into what is sent and the new residual.
 * @param [in] grad  count fp32 gradients of this rank (may equal out)
 * @param [out] out  count fp32 elements, identical on every rank
 */
COLL_API coll_result_t coll_compress_allreduce(coll_compress_t *c, const float *grad, float *out);

/**
 * @brief Non-blocking step: compress and start the exchange; grad is read before the call
 *        returns, out is written by coll_compress_wait(). One step in flight per compressor.
 */
COLL_API coll_result_t coll_compress_start(coll_compress_t *c, const float *grad, float *out);
/** @brief Finish the step begun by coll_compress_start(); returns its result. */
COLL_API coll_result_t coll_compress_wait(coll_compress_t *c);

/** @brief Counters: last step and totals. */
COLL_API coll_result_t coll_compress_get_stats(const coll_compress_t *c,
                                               coll_compress_stats_t *stats_p);

/**
 * @brief The error-feedback residual left by the last step (read-only view, valid until the
 *        next step or destroy). WORKER: count elements. SERVER (ONEBIT only): the residual of
 *        the shard this rank reduces, *count_p elements starting at element *offset_p.
 */
COLL_API coll_result_t coll_compress_residual(const coll_compress_t *c, coll_compress_side_t side,
                                              const float **residual_p, size_t *offset_p,
                                              size_t *count_p);

/**
 * @brief Dense form of what this rank sent in the last step (its own message decompressed):
 *        count elements into sent. With the residual, sent + residual = grad + old residual.
 */
COLL_API coll_result_t coll_compress_sent(const coll_compress_t *c, float *sent);

#ifdef __cplusplus
}
#endif
#endif /* COLL_TRAIN_H */
