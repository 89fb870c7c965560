/* SPDX-License-Identifier: MIT */
/*
 * DDP: registered gradients are grouped into buckets (reverse registration order, capped in
 * bytes); when backward reports the last gradient of a bucket ready, the bucket's all-reduce
 * is handed to the progress worker, so communication overlaps the rest of backward, and
 * coll_ddp_wait waits for the last ones. Optionally gradients travel as bf16/fp16 while fp32
 * master gradients stay in place. The optimizer is the caller's (ZeRO has one, zero.c).
 */
#include "config.h"
#include "train/train.h"
#include "error.h"
#include "log.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    void        *param;
    void        *grad; /* the caller's, or a view into the bucket's flat buffer */
    int          own;  /* 1: grad is a view (no copy in or out) */
    size_t       count;
    coll_dtype_t dtype;
    int          bucket;
    size_t       offset; /* elements from the start of the bucket's flat buffer */
    int          ready;
} ddp_param_t;

typedef struct {
    struct coll_ddp   *ddp;
    coll_dtype_t       dtype; /* of the gradients */
    size_t             count;
    void              *flat;                     /* gradients of the bucket, contiguous */
    void              *wire;                     /* wire-dtype copy when converting, else NULL */
    int                flat_shared, wire_shared; /* from coll_mem_alloc (coll_train_buffer_alloc) */
    int                lo, hi;                   /* parameter indices lo..hi (inclusive) */
    int                nready;
    int                launched;
    coll_bucket_comm_t comm_op;
    coll_compress_t   *compress; /* COLL_BUCKET_COMPRESSED: the bucket's compressor */
    train_op_t         op;
} ddp_bucket_t;

struct coll_ddp {
    coll_ddp_config_t cfg;
    train_worker_t    worker;
    ddp_param_t      *params;
    int               nparams;
    int               cap_params;
    ddp_bucket_t     *buckets;
    int               nbuckets; /* 0 until built */
    int               next_launch;
    int               sync;
    int               in_step; /* a parameter was reported ready since the last wait */
    double            t_first_ready;
    coll_ddp_stats_t  stats;
};

/* ---- arguments ---- */

static coll_result_t ddp_check(const coll_ddp_t *ddp, const char *fn)
{
    if (ddp == NULL) {
        return coll_train_error(COLL_ERR_INVALID_ARG, fn, "ddp is NULL");
    }
    return COLL_OK;
}

static coll_result_t ddp_check_index(const coll_ddp_t *ddp, int index, const char *fn)
{
    COLL_CHECK(ddp_check(ddp, fn));
    if (index < 0 || index >= ddp->nparams) {
        return coll_train_error(COLL_ERR_INVALID_ARG, fn,
                                "index %d out of range: expected 0 <= index < %d (registered)",
                                index, ddp->nparams);
    }
    return COLL_OK;
}

static coll_result_t ddp_check_config(const coll_ddp_config_t *c, const char *fn)
{
    if (c->size != sizeof(*c)) {
        return coll_train_error(COLL_ERR_INVALID_ARG, fn,
                                "config->size is %zu, expected sizeof(coll_ddp_config_t) = %zu "
                                "(use COLL_DDP_CONFIG_INITIALIZER)",
                                c->size, sizeof(*c));
    }
    if (c->wire_dtype != COLL_FLOAT32 && c->wire_dtype != COLL_BFLOAT16 &&
        c->wire_dtype != COLL_FLOAT16) {
        return coll_train_error(COLL_ERR_INVALID_ARG, fn,
                                "config->wire_dtype %d: expected COLL_FLOAT32, COLL_BFLOAT16 or "
                                "COLL_FLOAT16",
                                (int)c->wire_dtype);
    }
    if (c->comm_op != COLL_BUCKET_DENSE) { /* compressed: coll_ddp_set_bucket_compress */
        return coll_train_error(COLL_ERR_INVALID_ARG, fn,
                                "config->comm_op %d: expected COLL_BUCKET_DENSE", (int)c->comm_op);
    }
    return COLL_OK;
}

/* ---- create, register, destroy ---- */

COLL_API coll_result_t coll_ddp_create(coll_comm_t *comm, const coll_ddp_config_t *config,
                                       coll_ddp_t **ddp_p)
{
    static const coll_ddp_config_t defaults = COLL_DDP_CONFIG_INITIALIZER;
    const char                    *fn       = "coll_ddp_create";
    coll_ddp_t                    *ddp;
    coll_result_t                  st;

    if (comm == NULL || ddp_p == NULL) {
        return coll_train_error(COLL_ERR_INVALID_ARG, fn, "%s is NULL",
                                comm == NULL ? "comm" : "ddp_p");
    }
    *ddp_p = NULL;
    if (config != NULL) {
        COLL_CHECK(ddp_check_config(config, fn));
    }
    ddp = coll_calloc(1, sizeof(*ddp), "ddp");
    if (ddp == NULL) {
        return coll_train_error(COLL_ERR_NO_MEMORY, fn, "out of memory");
    }
    ddp->cfg = config != NULL ? *config : defaults;
    if (ddp->cfg.bucket_cap_bytes == 0) {
        ddp->cfg.bucket_cap_bytes = COLL_TRAIN_BUCKET_CAP_DEFAULT;
    }
    ddp->sync = 1;
    st        = coll_train_worker_init(&ddp->worker, comm, fn);
    if (st != COLL_OK) {
        coll_free(ddp);
        return st;
    }
    coll_debug(TRAIN, "ddp: bucket cap %zu bytes, wire %s, %s", ddp->cfg.bucket_cap_bytes,
               coll_dtype_name(ddp->cfg.wire_dtype),
               ddp->cfg.no_overlap ? "no overlap" : "overlap");
    *ddp_p = ddp;
    return COLL_OK;
}

static void ddp_free_buffers(coll_ddp_t *ddp)
{
    for (int b = 0; b < ddp->nbuckets && ddp->buckets != NULL; b++) {
        coll_train_buffer_free(ddp->buckets[b].flat, ddp->buckets[b].flat_shared);
        coll_train_buffer_free(ddp->buckets[b].wire, ddp->buckets[b].wire_shared);
    }
}

COLL_API coll_result_t coll_ddp_destroy(coll_ddp_t *ddp)
{
    coll_result_t st;

    COLL_CHECK(ddp_check(ddp, "coll_ddp_destroy"));
    if (ddp->in_step) {
        coll_ddp_wait(ddp); /* the peers expect the step's buckets */
    }
    for (int b = 0; b < ddp->nbuckets; b++) { /* local, and before their communicator goes */
        if (ddp->buckets[b].compress != NULL) {
            coll_compress_destroy(ddp->buckets[b].compress);
        }
    }
    st = coll_train_worker_fini(&ddp->worker); /* ends the buffers' registrations */
    ddp_free_buffers(ddp);
    coll_free(ddp->buckets);
    coll_free(ddp->params);
    coll_free(ddp);
    return st;
}

COLL_API coll_result_t coll_ddp_register(coll_ddp_t *ddp, void *param, void *grad, size_t count,
                                         coll_dtype_t dtype, int *index_p)
{
    const char *fn = "coll_ddp_register";

    COLL_CHECK(ddp_check(ddp, fn));
    if (ddp->nbuckets > 0) {
        return coll_train_error(COLL_ERR_INVALID_USAGE, fn,
                                "buckets are already built (after the first coll_ddp_grad, "
                                "grad_ready or wait): register every parameter before");
    }
    if (count == 0) {
        return coll_train_error(COLL_ERR_INVALID_ARG, fn, "count is 0: expected > 0");
    }
    if (dtype != COLL_FLOAT32 && dtype != COLL_FLOAT64 && dtype != COLL_FLOAT16 &&
        dtype != COLL_BFLOAT16) {
        return coll_train_error(COLL_ERR_INVALID_ARG, fn,
                                "dtype %d (%s): expected a floating type (FLOAT32, FLOAT64, "
                                "FLOAT16, BFLOAT16)",
                                (int)dtype, coll_dtype_name(dtype));
    }
    if (ddp->nparams == ddp->cap_params) {
        int   cap = ddp->cap_params > 0 ? 2 * ddp->cap_params : 16;
        void *p   = realloc(ddp->params, (size_t)cap * sizeof(*ddp->params));
        if (p == NULL) {
            return coll_train_error(COLL_ERR_NO_MEMORY, fn, "out of memory");
        }
        ddp->params     = p;
        ddp->cap_params = cap;
    }
    ddp_param_t *pp = &ddp->params[ddp->nparams];
    memset(pp, 0, sizeof(*pp));
    pp->param = param;
    pp->grad  = grad;
    pp->own   = grad == NULL;
    pp->count = count;
    pp->dtype = dtype;
    if (index_p != NULL) {
        *index_p = ddp->nparams;
    }
    ddp->nparams++;
    ddp->stats.param_bytes += count * coll_dtype_size(dtype);
    if (grad != NULL) {
        ddp->stats.grad_bytes += count * coll_dtype_size(dtype);
    }
    return COLL_OK;
}

/* ---- buckets ---- */

static void ddp_bucket_before(train_op_t *op)
{
    ddp_bucket_t *b  = op->arg;
    ddp_param_t  *ps = b->ddp->params;
    size_t        es = coll_dtype_size(b->dtype);
    for (int i = b->lo; i <= b->hi; i++) {
        if (!ps[i].own) {
            memcpy((char *)b->flat + ps[i].offset * es, ps[i].grad, ps[i].count * es);
        }
    }
    if (b->wire != NULL) {
        coll_train_to_half(b->wire, b->flat, b->count, op->dtype);
    }
}

static void ddp_bucket_after(train_op_t *op)
{
    ddp_bucket_t *b  = op->arg;
    ddp_param_t  *ps = b->ddp->params;
    size_t        es = coll_dtype_size(b->dtype);
    if (b->wire != NULL) {
        coll_train_from_half(b->flat, b->wire, b->count, op->dtype);
    }
    for (int i = b->lo; i <= b->hi; i++) {
        if (!ps[i].own) {
            memcpy(ps[i].grad, (char *)b->flat + ps[i].offset * es, ps[i].count * es);
        }
    }
}

static coll_result_t ddp_build(coll_ddp_t *ddp, const char *fn)
{
    int     n      = ddp->nparams;
    size_t *bytes  = coll_calloc((size_t)n + 1, sizeof(size_t), "ddp sizes");
    int    *key    = coll_calloc((size_t)n + 1, sizeof(int), "ddp keys");
    int    *bucket = coll_calloc((size_t)n + 1, sizeof(int), "ddp buckets");
    int     nb     = 0;

    if (n == 0) {
        coll_free(bytes), coll_free(key), coll_free(bucket);
        return coll_train_error(COLL_ERR_INVALID_USAGE, fn, "no parameter registered");
    }
    if (bytes == NULL || key == NULL || bucket == NULL) {
        goto oom;
    }
    for (int i = 0; i < n; i++) {
        bytes[i] = ddp->params[i].count * coll_dtype_size(ddp->params[i].dtype);
        key[i]   = (int)ddp->params[i].dtype; /* a bucket holds one dtype */
    }
    nb           = coll_train_assign_buckets(n, bytes, key, ddp->cfg.bucket_cap_bytes, bucket);
    ddp->buckets = coll_calloc((size_t)nb, sizeof(*ddp->buckets), "ddp buckets");
    if (ddp->buckets == NULL) {
        goto oom;
    }
    ddp->nbuckets = nb;
    for (int b = 0; b < nb; b++) {
        ddp->buckets[b].lo = n;
        ddp->buckets[b].hi = -1;
    }
    for (int i = 0; i < n; i++) {
        ddp_bucket_t *b       = &ddp->buckets[bucket[i]];
        b->ddp                = ddp;
        b->dtype              = ddp->params[i].dtype;
        b->lo                 = i < b->lo ? i : b->lo;
        b->hi                 = i > b->hi ? i : b->hi;
        b->comm_op            = ddp->cfg.comm_op;
        ddp->params[i].bucket = bucket[i];
        ddp->params[i].offset = b->count;
        b->count += ddp->params[i].count;
    }
    for (int k = 0; k < nb; k++) {
        ddp_bucket_t *b    = &ddp->buckets[k];
        size_t        es   = coll_dtype_size(b->dtype);
        int           wire = b->dtype == COLL_FLOAT32 && ddp->cfg.wire_dtype != COLL_FLOAT32;
        b->flat            = wire ? coll_calloc(b->count, es, "ddp bucket") /* not communicated */
                                  : coll_train_buffer_alloc(b->count * es, &b->flat_shared);
        if (b->flat == NULL) {
            goto oom;
        }
        ddp->stats.grad_bytes += b->count * es;
        for (int i = b->lo; i <= b->hi; i++) {
            if (ddp->params[i].own) {
                ddp->params[i].grad = (char *)b->flat + ddp->params[i].offset * es;
            } else {
                ddp->stats.buffer_bytes += ddp->params[i].count * es; /* staging copy */
                ddp->stats.grad_bytes -= ddp->params[i].count * es;
            }
        }
        if (wire) {
            b->wire = coll_train_buffer_alloc(b->count * 2, &b->wire_shared);
            if (b->wire == NULL) {
                goto oom;
            }
            ddp->stats.buffer_bytes += b->count * 2;
        }
    }
    /* all-reduced in place: registered, the direct path on one host. Every rank shares every
     * bucket (one that is heap memory somewhere is refused alike on every rank). */
    for (int k = 0; k < nb; k++) {
        ddp_bucket_t *b   = &ddp->buckets[k];
        void         *buf = b->wire != NULL ? b->wire : b->flat;
        size_t        es  = b->wire != NULL ? 2 : coll_dtype_size(b->dtype);
        if (coll_train_worker_share(&ddp->worker, buf, b->count * es) != COLL_OK) {
            goto oom;
        }
    }
    coll_info(TRAIN, "ddp: %d parameters in %d buckets (cap %zu bytes)", n, nb,
              ddp->cfg.bucket_cap_bytes);
    coll_free(bytes), coll_free(key), coll_free(bucket);
    return COLL_OK;
oom:
    coll_free(bytes), coll_free(key), coll_free(bucket);
    coll_train_worker_unshare(&ddp->worker);
    ddp_free_buffers(ddp);
    coll_free(ddp->buckets);
    ddp->buckets  = NULL;
    ddp->nbuckets = 0;
    return coll_train_error(COLL_ERR_NO_MEMORY, fn, "out of memory for the gradient buckets");
}

static coll_result_t ddp_ensure_built(coll_ddp_t *ddp, const char *fn)
{
    return ddp->nbuckets > 0 ? COLL_OK : ddp_build(ddp, fn);
}

static void ddp_launch(coll_ddp_t *ddp, ddp_bucket_t *b)
{
    int wire         = b->wire != NULL;
    b->op.kind       = b->compress != NULL ? TRAIN_OP_COMPRESS : TRAIN_OP_ALLREDUCE;
    b->op.compress   = b->compress;
    b->op.may_inline = 1;
    b->op.dtype      = wire ? ddp->cfg.wire_dtype : b->dtype;
    b->op.count      = b->count;
    b->op.redop      = ddp->cfg.sum ? COLL_SUM : COLL_AVG;
    b->op.sendbuf    = wire ? b->wire : b->flat;
    b->op.recvbuf    = wire ? b->wire : b->flat;
    b->op.before     = ddp_bucket_before;
    b->op.after      = ddp_bucket_after;
    b->op.arg        = b;
    b->launched      = 1;
    ddp->stats.payload_bytes += b->count * coll_dtype_size(b->op.dtype);
    coll_train_worker_submit(&ddp->worker, &b->op);
}

/* Buckets start in index order on every rank, whatever order they completed in. */
static void ddp_launch_ready(coll_ddp_t *ddp)
{
    while (ddp->next_launch < ddp->nbuckets) {
        ddp_bucket_t *b = &ddp->buckets[ddp->next_launch];
        if (b->nready < b->hi - b->lo + 1) {
            break;
        }
        ddp_launch(ddp, b);
        ddp->next_launch++;
    }
}

/* ---- the step ---- */

COLL_API coll_result_t coll_ddp_grad(coll_ddp_t *ddp, int index, void **grad_p)
{
    const char *fn = "coll_ddp_grad";
    COLL_CHECK(ddp_check_index(ddp, index, fn));
    if (grad_p == NULL) {
        return coll_train_error(COLL_ERR_INVALID_ARG, fn, "grad_p is NULL");
    }
    COLL_CHECK(ddp_ensure_built(ddp, fn));
    *grad_p = ddp->params[index].grad;
    return COLL_OK;
}

COLL_API coll_result_t coll_ddp_grad_ready(coll_ddp_t *ddp, int index)
{
    const char *fn = "coll_ddp_grad_ready";
    COLL_CHECK(ddp_check_index(ddp, index, fn));
    COLL_CHECK(ddp_ensure_built(ddp, fn));
    if (!ddp->sync) {
        return COLL_OK; /* accumulation step: gradients stay local */
    }
    ddp_param_t *p = &ddp->params[index];
    if (p->ready) {
        return coll_train_error(COLL_ERR_INVALID_USAGE, fn,
                                "parameter %d reported ready twice in one step", index);
    }
    if (!ddp->in_step) {
        ddp->in_step       = 1;
        ddp->t_first_ready = coll_train_time_s();
    }
    p->ready = 1;
    ddp->buckets[p->bucket].nready++;
    if (!ddp->cfg.no_overlap) {
        ddp_launch_ready(ddp);
    }
    return COLL_OK;
}

/* Communication time of the step (union of the in-flight intervals; buckets run one after
 * another in the worker, so they are ordered) and the part of it after t_wait. */
static void ddp_step_times(coll_ddp_t *ddp, double t_wait, double *comm_p, double *exposed_p)
{
    double comm = 0.0, exposed = 0.0, prev_end = 0.0;
    for (int k = 0; k < ddp->nbuckets; k++) {
        const train_op_t *op = &ddp->buckets[k].op;
        double            s  = op->t_start > prev_end ? op->t_start : prev_end;
        if (op->t_end > s) {
            comm += op->t_end - s;
            double es = s > t_wait ? s : t_wait;
            exposed += op->t_end > es ? op->t_end - es : 0.0;
        }
        prev_end = op->t_end > prev_end ? op->t_end : prev_end;
    }
    *comm_p    = comm;
    *exposed_p = exposed;
}

COLL_API coll_result_t coll_ddp_wait(coll_ddp_t *ddp)
{
    const char   *fn    = "coll_ddp_wait";
    coll_result_t first = COLL_OK;
    double        t_wait, comm, exposed;

    COLL_CHECK(ddp_check(ddp, fn));
    COLL_CHECK(ddp_ensure_built(ddp, fn));
    if (!ddp->sync) {
        ddp->stats.nosync_steps++;
        return COLL_OK;
    }
    t_wait = coll_train_time_s();
    if (!ddp->in_step) {
        ddp->t_first_ready = t_wait;
    }
    for (int i = 0; i < ddp->nparams; i++) {
        if (!ddp->params[i].ready) {
            ddp->params[i].ready = 1;
            ddp->buckets[ddp->params[i].bucket].nready++;
        }
    }
    ddp_launch_ready(ddp);
    for (int k = 0; k < ddp->nbuckets; k++) {
        coll_result_t st = coll_train_worker_wait(&ddp->worker, &ddp->buckets[k].op);
        if (st != COLL_OK && first == COLL_OK) {
            first = coll_train_error(st, fn, "all-reduce of bucket %d failed: %s", k,
                                     coll_comm_last_error(ddp->worker.comm));
        }
    }
    double t_end = coll_train_time_s();
    ddp_step_times(ddp, t_wait, &comm, &exposed);
    ddp->stats.steps++;
    ddp->stats.backward_s = t_wait - ddp->t_first_ready;
    ddp->stats.wait_s     = t_end - t_wait;
    ddp->stats.comm_s     = comm;
    ddp->stats.exposed_s  = exposed;
    ddp->stats.overlap    = comm > 0.0 ? 1.0 - exposed / comm : 0.0;
    ddp->stats.total_comm_s += comm;
    ddp->stats.total_exposed_s += exposed;
    ddp->stats.total_wait_s += ddp->stats.wait_s;
    for (int i = 0; i < ddp->nparams; i++) {
        ddp->params[i].ready = 0;
    }
    for (int k = 0; k < ddp->nbuckets; k++) {
        ddp->buckets[k].nready   = 0;
        ddp->buckets[k].launched = 0;
    }
    ddp->next_launch = 0;
    ddp->in_step     = 0;
    return first;
}

COLL_API coll_result_t coll_ddp_set_sync(coll_ddp_t *ddp, int sync)
{
    const char *fn = "coll_ddp_set_sync";
    COLL_CHECK(ddp_check(ddp, fn));
    if (sync != 0 && sync != 1) {
        return coll_train_error(COLL_ERR_INVALID_ARG, fn, "sync is %d: expected 0 or 1", sync);
    }
    if (ddp->in_step) {
        return coll_train_error(COLL_ERR_INVALID_USAGE, fn,
                                "a step is in progress: call coll_ddp_wait first");
    }
    ddp->sync = sync;
    return COLL_OK;
}

COLL_API coll_result_t coll_ddp_zero_grad(coll_ddp_t *ddp)
{
    const char *fn = "coll_ddp_zero_grad";
    COLL_CHECK(ddp_check(ddp, fn));
    COLL_CHECK(ddp_ensure_built(ddp, fn));
    if (ddp->in_step) {
        return coll_train_error(COLL_ERR_INVALID_USAGE, fn,
                                "a step is in progress: call coll_ddp_wait first");
    }
    for (int i = 0; i < ddp->nparams; i++) {
        memset(ddp->params[i].grad, 0,
               ddp->params[i].count * coll_dtype_size(ddp->params[i].dtype));
    }
    return COLL_OK;
}

COLL_API coll_result_t coll_ddp_broadcast_params(coll_ddp_t *ddp, int root)
{
    const char *fn = "coll_ddp_broadcast_params";
    COLL_CHECK(ddp_check(ddp, fn));
    if (root < 0 || root >= ddp->worker.nranks) {
        return coll_train_error(COLL_ERR_INVALID_ARG, fn, "root %d: expected 0 <= root < %d", root,
                                ddp->worker.nranks);
    }
    if (ddp->in_step) {
        return coll_train_error(COLL_ERR_INVALID_USAGE, fn,
                                "a step is in progress: call coll_ddp_wait first");
    }
    for (int i = 0; i < ddp->nparams; i++) {
        ddp_param_t *p = &ddp->params[i];
        if (p->param == NULL) {
            continue; /* equal on every rank: registration is */
        }
        /* the worker is idle between steps, so the main thread may use its communicator */
        COLL_CHECK(coll_broadcast(p->param, p->param, p->count, p->dtype, root, ddp->worker.comm));
    }
    return COLL_OK;
}

COLL_API coll_result_t coll_ddp_set_bucket_comm(coll_ddp_t *ddp, int bucket,
                                                coll_bucket_comm_t comm_op)
{
    const char *fn = "coll_ddp_set_bucket_comm";
    COLL_CHECK(ddp_check(ddp, fn));
    COLL_CHECK(ddp_ensure_built(ddp, fn));
    if (bucket < 0 || bucket >= ddp->nbuckets) {
        return coll_train_error(COLL_ERR_INVALID_ARG, fn, "bucket %d: expected 0 <= bucket < %d",
                                bucket, ddp->nbuckets);
    }
    if (comm_op != COLL_BUCKET_DENSE) {
        return coll_train_error(
            COLL_ERR_INVALID_ARG, fn,
            "comm_op %d: expected COLL_BUCKET_DENSE (a compressed bucket is set "
            "with coll_ddp_set_bucket_compress)",
            (int)comm_op);
    }
    return coll_ddp_set_bucket_compress(ddp, bucket, NULL);
}

COLL_API coll_result_t coll_ddp_set_bucket_compress(coll_ddp_t *ddp, int bucket,
                                                    const coll_compress_config_t *config)
{
    const char   *fn = "coll_ddp_set_bucket_compress";
    ddp_bucket_t *b;

    COLL_CHECK(ddp_check(ddp, fn));
    COLL_CHECK(ddp_ensure_built(ddp, fn));
    if (bucket < 0 || bucket >= ddp->nbuckets) {
        return coll_train_error(COLL_ERR_INVALID_ARG, fn, "bucket %d: expected 0 <= bucket < %d",
                                bucket, ddp->nbuckets);
    }
    if (ddp->in_step) {
        return coll_train_error(COLL_ERR_INVALID_USAGE, fn,
                                "a step is in progress: call coll_ddp_wait() first");
    }
    b = &ddp->buckets[bucket];
    if (config != NULL && (b->dtype != COLL_FLOAT32 || b->wire != NULL || ddp->cfg.sum)) {
        return coll_train_error(COLL_ERR_INVALID_ARG, fn,
                                "bucket %d: compression needs FLOAT32 gradients sent as FLOAT32 "
                                "and averaging (config sum = 0); it has %s gradients sent as %s%s",
                                bucket, coll_dtype_name(b->dtype),
                                coll_dtype_name(b->wire != NULL ? ddp->cfg.wire_dtype : b->dtype),
                                ddp->cfg.sum ? ", summed" : "");
    }
    if (b->compress != NULL) {
        coll_compress_destroy(b->compress);
        b->compress = NULL;
    }
    b->comm_op = COLL_BUCKET_DENSE;
    if (config == NULL) {
        return COLL_OK;
    }
    /* the worker is idle between steps, so the main thread may use its communicator */
    COLL_CHECK(coll_compress_create(ddp->worker.comm, config, b->count, &b->compress));
    b->comm_op = COLL_BUCKET_COMPRESSED;
    return COLL_OK;
}

COLL_API coll_result_t coll_ddp_get_stats(const coll_ddp_t *ddp, coll_ddp_stats_t *stats_p)
{
    const char *fn = "coll_ddp_get_stats";
    COLL_CHECK(ddp_check(ddp, fn));
    if (stats_p == NULL) {
        return coll_train_error(COLL_ERR_INVALID_ARG, fn, "stats_p is NULL");
    }
    *stats_p            = ddp->stats;
    stats_p->nbuckets   = ddp->nbuckets;
    stats_p->nparams    = ddp->nparams;
    stats_p->wire_bytes = atomic_load(&((coll_ddp_t *)ddp)->worker.wire_bytes);
    return COLL_OK;
}

COLL_API coll_result_t coll_ddp_arrival_stats(coll_ddp_t *ddp, char *buf, size_t len)
{
    const char *fn = "coll_ddp_arrival_stats";
    COLL_CHECK(ddp_check(ddp, fn));
    if (ddp->in_step) {
        return coll_train_error(COLL_ERR_INVALID_USAGE, fn,
                                "a step is in progress: call coll_ddp_wait first");
    }
    return coll_train_worker_arrival(&ddp->worker, fn, buf, len);
}

/* ---- the compressed buckets' state, for checkpoints: per such bucket its index, its size and
 * coll_compress_get_state's bytes ---- */

typedef struct {
    uint32_t bucket, pad;
    uint64_t bytes;
} ddp_cstate_hdr_t;

static coll_result_t ddp_cstate_check(const coll_ddp_t *ddp, const char *fn)
{
    COLL_CHECK(ddp_check(ddp, fn));
    if (ddp->in_step) {
        return coll_train_error(COLL_ERR_INVALID_USAGE, fn,
                                "a step is in progress: call coll_ddp_wait first");
    }
    return COLL_OK;
}

COLL_API coll_result_t coll_ddp_compress_state_size(const coll_ddp_t *ddp, size_t *bytes_p)
{
    const char *fn    = "coll_ddp_compress_state_size";
    size_t      total = 0, n;
    COLL_CHECK(ddp_cstate_check(ddp, fn));
    if (bytes_p == NULL) {
        return coll_train_error(COLL_ERR_INVALID_ARG, fn, "bytes_p is NULL");
    }
    for (int k = 0; k < ddp->nbuckets; k++) {
        if (ddp->buckets[k].compress != NULL) {
            COLL_CHECK(coll_compress_state_size(ddp->buckets[k].compress, &n));
            total += sizeof(ddp_cstate_hdr_t) + n;
        }
    }
    *bytes_p = total;
    return COLL_OK;
}

COLL_API coll_result_t coll_ddp_get_compress_state(const coll_ddp_t *ddp, void *buf, size_t len)
{
    const char *fn = "coll_ddp_get_compress_state";
    size_t      need, off = 0;
    COLL_CHECK(coll_ddp_compress_state_size(ddp, &need));
    if (buf == NULL || len != need) {
        return coll_train_error(COLL_ERR_INVALID_ARG, fn, "buf %s, len %zu: expected %zu bytes",
                                buf == NULL ? "NULL" : "set", len, need);
    }
    for (int k = 0; k < ddp->nbuckets; k++) {
        coll_compress_t *c = ddp->buckets[k].compress;
        ddp_cstate_hdr_t h = {(uint32_t)k, 0, 0};
        if (c == NULL) {
            continue;
        }
        size_t n;
        COLL_CHECK(coll_compress_state_size(c, &n));
        h.bytes = n;
        memcpy((char *)buf + off, &h, sizeof(h));
        COLL_CHECK(coll_compress_get_state(c, (char *)buf + off + sizeof(h), n));
        off += sizeof(h) + n;
    }
    return COLL_OK;
}

COLL_API coll_result_t coll_ddp_set_compress_state(coll_ddp_t *ddp, const void *buf, size_t len)
{
    const char *fn = "coll_ddp_set_compress_state";
    size_t      need, off = 0;
    COLL_CHECK(coll_ddp_compress_state_size(ddp, &need));
    if (buf == NULL || len != need) {
        return coll_train_error(COLL_ERR_INVALID_ARG, fn,
                                "buf %s, len %zu: expected %zu bytes (the state of another "
                                "bucket layout or compressor?)",
                                buf == NULL ? "NULL" : "set", len, need);
    }
    for (int k = 0; k < ddp->nbuckets; k++) {
        coll_compress_t *c = ddp->buckets[k].compress;
        ddp_cstate_hdr_t h;
        if (c == NULL) {
            continue;
        }
        memcpy(&h, (const char *)buf + off, sizeof(h));
        if (h.bucket != (uint32_t)k || h.bytes > len - off - sizeof(h)) {
            return coll_train_error(COLL_ERR_INVALID_ARG, fn,
                                    "entry at byte %zu is for bucket %u, expected bucket %d", off,
                                    h.bucket, k);
        }
        COLL_CHECK(coll_compress_set_state(c, (const char *)buf + off + sizeof(h), h.bytes));
        off += sizeof(h) + h.bytes;
    }
    return COLL_OK;
}
