/* SPDX-License-Identifier: MIT */
/*
 * coll_train.h -- the training layer of libcoll: data-parallel gradient synchronisation (DDP:
 * buckets all-reduced while backward runs) and ZeRO stages 0-3 (sharded optimizer state,
 * gradients and parameters, shard-wise AdamW and SGD with momentum, re-shardable checkpoints).
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
    COLL_BUCKET_DENSE = 0, /* plain all-reduce (DDP) or reduce-scatter (ZeRO) */
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

#ifdef __cplusplus
}
#endif
#endif /* COLL_TRAIN_H */
