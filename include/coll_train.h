/* SPDX-License-Identifier: MIT */
/*
 * coll_train.h -- the training layer of libcoll: data-parallel gradient synchronisation (DDP:
 * buckets all-reduced while backward runs) and ZeRO stages 0-3 (sharded optimizer state,
 * gradients and parameters, shard-wise AdamW and SGD with momentum, re-shardable checkpoints),
 * and per-bucket gradient compressors (top-k with error feedback and optional momentum
 * correction; 1-bit sign + scale with error feedback on both sides of a compressed
 * reduce-scatter + all-gather).
 * Everything here is built on the public coll.h API. C99 and C++ safe; failures return
 * coll_result_t and coll_last_error() names the argument or the step that failed.
 */
#ifndef COLL_TRAIN_H
#define COLL_TRAIN_H

#include <coll.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- per-bucket communication ---- */

/**
 * @brief How one bucket is communicated. DENSE sends the gradients as they are (in the
 *        configured wire dtype); other values are reserved for gradient compression.
 */
typedef enum {
    COLL_BUCKET_DENSE      = 0, /* plain all-reduce (DDP) or reduce-scatter (ZeRO) */
    COLL_BUCKET_COMPRESSED = 1, /* DDP: through a compressor, see coll_ddp_set_bucket_compress */
    COLL_BUCKET_COMM_COUNT
} coll_bucket_comm_t;

/** @brief Default bucket cap in bytes (25 MiB, PyTorch's default). */
#define COLL_TRAIN_BUCKET_CAP_DEFAULT ((size_t)25 << 20)

/* ---- DDP: data-parallel gradient synchronisation ---- */

/** @brief Opaque DDP object: registered parameters, buckets, a progress thread. */
typedef struct coll_ddp coll_ddp_t;

/** @brief DDP settings. Zero fields take the default named in the comment. */
typedef struct {
    size_t       size;             /* sizeof(coll_ddp_config_t) */
    size_t       bucket_cap_bytes; /* bucket cap in gradient bytes; 0: 25 MiB */
    coll_dtype_t wire_dtype;       /* FLOAT32 gradients travel as this: FLOAT32 (default),
                                      BFLOAT16 or FLOAT16 (fp32 master gradients kept) */
    int sum;                       /* 0 (default): average over ranks; 1: sum without dividing */
    int no_overlap;                /* 0 (default): a bucket starts when complete; 1: every
                                      bucket starts in coll_ddp_wait (the blocking baseline) */
    coll_bucket_comm_t comm_op;    /* communication of every bucket, COLL_BUCKET_DENSE */
} coll_ddp_config_t;

/** @brief Initialiser giving every field its default. */
#define COLL_DDP_CONFIG_INITIALIZER                                                                \
    {                                                                                              \
        sizeof(coll_ddp_config_t), 0, COLL_FLOAT32, 0, 0, COLL_BUCKET_DENSE                        \
    }

/** @brief Counters and timings of a DDP object; times in seconds. */
typedef struct {
    uint64_t steps;         /* synchronised steps completed (coll_ddp_wait with sync on) */
    uint64_t nosync_steps;  /* coll_ddp_wait calls with sync off (gradient accumulation) */
    int      nbuckets;      /* buckets built from the registered parameters */
    int      nparams;       /* registered parameters */
    uint64_t payload_bytes; /* bytes all-reduced by this rank, in the wire dtype */
    uint64_t wire_bytes;    /* bytes this rank sent, ring model: 2 (n-1)/n per all-reduce */
    double   backward_s;    /* last step: first coll_ddp_grad_ready .. entry of coll_ddp_wait */
    double   comm_s;        /* last step: time with a bucket's all-reduce in flight */
    double   wait_s;        /* last step: time spent inside coll_ddp_wait */
    double   exposed_s;     /* last step: communication time after coll_ddp_wait was entered */
    double   overlap;       /* last step: 1 - exposed_s / comm_s, in [0, 1] */
    double   total_comm_s;  /* sums over all synchronised steps */
    double   total_exposed_s;
    double   total_wait_s;
    size_t   param_bytes;  /* memory accounting: registered parameters */
    size_t   grad_bytes;   /* gradients (flat bucket storage plus caller-owned gradients) */
    size_t   buffer_bytes; /* wire-dtype staging buffers */
} coll_ddp_stats_t;

/**
 * @brief Collective over comm: create a DDP object. It communicates on a communicator split
 *        from comm, from a progress thread of its own, so comm stays free for the caller.
 * @param [in] comm    communicator of the data-parallel group
 * @param [in] config  settings, NULL for the defaults
 * @param [out] ddp_p  the new object
 */
COLL_API coll_result_t coll_ddp_create(coll_comm_t *comm, const coll_ddp_config_t *config,
                                       coll_ddp_t **ddp_p);

/** @brief Collective: stop the progress thread and free the object (not the caller's buffers). */
COLL_API coll_result_t coll_ddp_destroy(coll_ddp_t *ddp);

/**
 * @brief Register one parameter (in forward order; index = registration order). Buckets are
 *        built at the first call that needs them, after which registering fails.
 * @param [in] param  the parameter (read by coll_ddp_broadcast_params only); may be NULL
 * @param [in] grad   its gradient, count elements; NULL: the gradient lives in the bucket's
 *                    flat buffer and coll_ddp_grad() returns the view
 * @param [in] count  elements, > 0
 * @param [in] dtype  FLOAT32, FLOAT64, FLOAT16 or BFLOAT16
 * @param [out] index_p  the parameter's index; may be NULL
 */
COLL_API coll_result_t coll_ddp_register(coll_ddp_t *ddp, void *param, void *grad, size_t count,
                                         coll_dtype_t dtype, int *index_p);

/** @brief The gradient buffer of parameter index (the caller's, or a view into its bucket). */
COLL_API coll_result_t coll_ddp_grad(coll_ddp_t *ddp, int index, void **grad_p);

/**
 * @brief Parameter index's gradient is final for this step. When its bucket is complete, the
 *        bucket's all-reduce starts (buckets start in order), overlapping the rest of backward.
 *        With sync off this does nothing.
 */
COLL_API coll_result_t coll_ddp_grad_ready(coll_ddp_t *ddp, int index);

/**
 * @brief Wait for every bucket of the step (parameters not reported ready are taken as ready)
 *        and leave the averaged gradients in place; call before the optimizer.
 */
COLL_API coll_result_t coll_ddp_wait(coll_ddp_t *ddp);

/**
 * @brief sync 0: following steps only accumulate local gradients (no communication); sync 1
 *        (the default): the next coll_ddp_wait all-reduces the accumulated gradients.
 */
COLL_API coll_result_t coll_ddp_set_sync(coll_ddp_t *ddp, int sync);

/** @brief Set every registered gradient to zero. */
COLL_API coll_result_t coll_ddp_zero_grad(coll_ddp_t *ddp);

/** @brief Collective: copy root's registered parameters to every rank. */
COLL_API coll_result_t coll_ddp_broadcast_params(coll_ddp_t *ddp, int root);

/** @brief Set the communication of one bucket (0 <= bucket < stats.nbuckets). */
COLL_API coll_result_t coll_ddp_set_bucket_comm(coll_ddp_t *ddp, int bucket,
                                                coll_bucket_comm_t comm_op);

/** @brief Counters, timings (overlap) and memory accounting. */
COLL_API coll_result_t coll_ddp_get_stats(const coll_ddp_t *ddp, coll_ddp_stats_t *stats_p);

/**
 * @brief Collective, between steps: coll_comm_stats(3)'s arrival summary of the gradient
 *        all-reduces ("rank 2 arrived last in 87% of collectives, mean +14.000 ms ...").
 */
COLL_API coll_result_t coll_ddp_arrival_stats(coll_ddp_t *ddp, char *buf, size_t len);

/**
 * @brief The state of every compressed bucket (coll_compress_get_state), as one blob for a
 *        checkpoint: its size, a copy (len must equal the size) and a restore into the same
 *        bucket layout and compressors. Between steps; each rank's state is its own.
 */
COLL_API coll_result_t coll_ddp_compress_state_size(const coll_ddp_t *ddp, size_t *bytes_p);
COLL_API coll_result_t coll_ddp_get_compress_state(const coll_ddp_t *ddp, void *buf, size_t len);
COLL_API coll_result_t coll_ddp_set_compress_state(coll_ddp_t *ddp, const void *buf, size_t len);

/* ---- ZeRO: sharded optimizer state, gradients and parameters ---- */

/** @brief Opaque ZeRO object: parameters, gradients and optimizer state, sharded by stage. */
typedef struct coll_zero coll_zero_t;

/** @brief Optimizers run shard-wise by coll_zero_step(). */
typedef enum {
    COLL_OPTIM_SGD   = 0, /* SGD with momentum (and decoupled weight decay) */
    COLL_OPTIM_ADAMW = 1, /* AdamW with bias correction */
    COLL_OPTIM_COUNT
} coll_optim_t;

/** @brief Optimizer hyper-parameters. */
typedef struct {
    coll_optim_t kind;         /* COLL_OPTIM_SGD or COLL_OPTIM_ADAMW */
    float        lr;           /* learning rate, > 0 */
    float        momentum;     /* SGD: momentum in [0, 1) */
    float        beta1;        /* AdamW: in [0, 1) */
    float        beta2;        /* AdamW: in [0, 1) */
    float        eps;          /* AdamW: > 0 */
    float        weight_decay; /* decoupled: p -= lr * wd * p, >= 0 */
} coll_optim_config_t;

/** @brief ZeRO settings. */
typedef struct {
    size_t size;               /* sizeof(coll_zero_config_t) */
    int    stage;              /* 0 (replicated, like DDP), 1, 2 or 3 */
    size_t bucket_cap_bytes;   /* stages 0-2; 0: 25 MiB. Stage 3: one layer each */
    int    no_prefetch;        /* stage 3: 0 (default) gathers the next layer in
                                  the current direction while the caller computes */
    coll_optim_config_t optim; /* the optimizer */
} coll_zero_config_t;

/** @brief Initialiser: stage 1, AdamW(lr 1e-3, 0.9, 0.999, 1e-8, wd 0.01). */
#define COLL_ZERO_CONFIG_INITIALIZER                                                               \
    {                                                                                              \
        sizeof(coll_zero_config_t), 1, 0, 0,                                                       \
        {                                                                                          \
            COLL_OPTIM_ADAMW, 1e-3f, 0.0f, 0.9f, 0.999f, 1e-8f, 0.01f                              \
        }                                                                                          \
    }

/** @brief Memory accounting (bytes held now by this rank) and counters of a ZeRO object. */
typedef struct {
    int      stage;              /* the configured stage */
    int      nbuckets;           /* shard units (stage 3: layers) */
    int      nparams;            /* registered parameters */
    uint64_t steps;              /* coll_zero_step calls completed */
    size_t   param_bytes;        /* persistent parameters (full, or this rank's shard at stage 3) */
    size_t   grad_bytes;         /* persistent gradients (full, or shard at stages 2-3) */
    size_t   optim_bytes;        /* optimizer state (full at stage 0, else this rank's shard) */
    size_t   working_bytes;      /* transient now: gathered layers, bucket gradients in flight */
    size_t   peak_working_bytes; /* largest working_bytes seen */
    uint64_t wire_bytes;         /* bytes this rank sent, ring model */
} coll_zero_stats_t;

/** @brief Collective over comm: create a ZeRO object (on a communicator split from comm). */
COLL_API coll_result_t coll_zero_create(coll_comm_t *comm, const coll_zero_config_t *config,
                                        coll_zero_t **zero_p);
/** @brief Collective: free the object and every buffer it holds. */
COLL_API coll_result_t coll_zero_destroy(coll_zero_t *zero);

/**
 * @brief Register one parameter of a layer, in forward order. The object owns the parameter:
 *        init (count floats, equal on every rank) is copied and may be freed.
 * @param [in] init   initial values, count elements of dtype
 * @param [in] count  elements, > 0
 * @param [in] dtype  COLL_FLOAT32
 * @param [in] layer  layer of the parameter: 0 for the first, then equal or one more than
 *                    the previous parameter's
 * @param [out] index_p  the parameter's index; may be NULL
 */
COLL_API coll_result_t coll_zero_register(coll_zero_t *zero, const void *init, size_t count,
                                          coll_dtype_t dtype, int layer, int *index_p);

/** @brief Full parameter index (stage 3: only while its layer is gathered). */
COLL_API coll_result_t coll_zero_param(coll_zero_t *zero, int index, float **param_p);

/**
 * @brief Where backward writes parameter index's gradient (zeroed at each step). Stages 2-3:
 *        valid from this call until the parameter's bucket is reported ready.
 */
COLL_API coll_result_t coll_zero_grad(coll_zero_t *zero, int index, float **grad_p);

/** @brief The gradient of index is final: a complete bucket starts its reduction. */
COLL_API coll_result_t coll_zero_grad_ready(coll_zero_t *zero, int index);

/**
 * @brief Finish the gradient reductions, update this rank's shard with the optimizer, and
 *        (stages 0-2) all-gather the parameters. Collective.
 */
COLL_API coll_result_t coll_zero_step(coll_zero_t *zero);

/** @brief Stage 3: make layer's full parameters available (prefetching the next). Else no-op. */
COLL_API coll_result_t coll_zero_gather_layer(coll_zero_t *zero, int layer);
/** @brief Stage 3: start gathering layer now, without waiting. Else no-op. */
COLL_API coll_result_t coll_zero_prefetch_layer(coll_zero_t *zero, int layer);
/** @brief Stage 3: free layer's full parameters. Else no-op. */
COLL_API coll_result_t coll_zero_release_layer(coll_zero_t *zero, int layer);

/** @brief Memory accounting and counters. */
COLL_API coll_result_t coll_zero_get_stats(const coll_zero_t *zero, coll_zero_stats_t *stats_p);

/** @brief The learning rate of the following coll_zero_step() calls (a schedule sets it each
 *         step); > 0. */
COLL_API coll_result_t coll_zero_set_lr(coll_zero_t *zero, float lr);

/**
 * @brief Collective, after backward and before coll_zero_step(): waits for the gradient
 *        reductions and computes the L2 norm of the averaged gradients over all parameters
 *        (*total_norm_p, may be NULL); if max_norm > 0 and the norm exceeds it, scales the
 *        gradients by max_norm / (norm + 1e-6), as torch.nn.utils.clip_grad_norm_.
 */
COLL_API coll_result_t coll_zero_clip_grad_norm(coll_zero_t *zero, float max_norm,
                                                double *total_norm_p);

/** @brief Collective, between steps: the arrival summary of the object's collectives. */
COLL_API coll_result_t coll_zero_arrival_stats(coll_zero_t *zero, char *buf, size_t len);

/**
 * @brief Collective: write dir/rank-NNNNN.bin (this rank's shard: parameters and optimizer
 *        state) and, on rank 0, dir/manifest. dir must exist and be shared by the ranks.
 */
COLL_API coll_result_t coll_zero_save(coll_zero_t *zero, const char *dir);

/**
 * @brief Collective: load a checkpoint written by coll_zero_save on any number of ranks and
 *        any stage; the parameters registered must match the manifest's.
 */
COLL_API coll_result_t coll_zero_load(coll_zero_t *zero, const char *dir);

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
 * @brief The state a compressor carries from step to step (error-feedback residuals, the
 *        momentum-correction velocity, the step count that drives warm-ups), as bytes to keep
 *        in a checkpoint: its size, a copy into buf (len must equal the size), and a restore
 *        into a compressor of the same kind and count. Between steps only.
 */
COLL_API coll_result_t coll_compress_state_size(const coll_compress_t *c, size_t *bytes_p);
COLL_API coll_result_t coll_compress_get_state(const coll_compress_t *c, void *buf, size_t len);
COLL_API coll_result_t coll_compress_set_state(coll_compress_t *c, const void *buf, size_t len);

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

/**
 * @brief Collective over the DDP object's ranks, between steps: from the next step on, bucket
 *        is averaged through a compressor made with config (top-k or 1-bit, with its own
 *        residuals), on the DDP object's communicator, instead of a dense all-reduce. config
 *        NULL returns the bucket to dense. The bucket must hold FLOAT32 gradients sent as
 *        FLOAT32 and the DDP object must average (sum = 0). Its wire bytes count in the DDP
 *        statistics.
 */
COLL_API coll_result_t coll_ddp_set_bucket_compress(coll_ddp_t *ddp, int bucket,
                                                    const coll_compress_config_t *config);

#ifdef __cplusplus
}
#endif
#endif /* COLL_TRAIN_H */
