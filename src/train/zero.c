/* SPDX-License-Identifier: MIT */
/*
 * ZeRO stages 0-3 over buckets of parameters. Stage 0 replicates everything (all-reduce, full
 * optimizer: DDP with the optimizer inside). Stage 1 reduce-scatters the gradients, updates
 * this rank's shard with sharded optimizer state and all-gathers the parameters. Stage 2 also
 * keeps only the gradient shard: a bucket's full gradients exist from the first coll_zero_grad
 * until its reduce-scatter ends. Stage 3 also shards the parameters: each layer is a bucket,
 * gathered before use (the next one prefetched) and released after. Checkpoints: zero_ckpt.c.
 */
#include "config.h"
#include "train/zero.h"
#include "error.h"
#include "log.h"
#include "util.h"

#include <stdlib.h>
#include <math.h>
#include <string.h>

/* ---- accounting ---- */

static void zero_work_add(coll_zero_t *z, size_t bytes)
{
    size_t now  = atomic_fetch_add(&z->working, bytes) + bytes;
    size_t peak = atomic_load(&z->peak_working);
    while (now > peak && !atomic_compare_exchange_weak(&z->peak_working, &peak, now)) {
    }
}

static void zero_work_free(coll_zero_t *z, float **buf, size_t count)
{
    if (*buf != NULL) {
        coll_free(*buf);
        *buf = NULL;
        atomic_fetch_sub(&z->working, count * sizeof(float));
    }
}

static float *zero_work_alloc(coll_zero_t *z, size_t count)
{
    float *p = coll_calloc(count, sizeof(float), "zero working buffer");
    if (p != NULL) {
        zero_work_add(z, count * sizeof(float));
    }
    return p;
}

int coll_zero_nstate(const coll_zero_t *z)
{
    return z->cfg.optim.kind == COLL_OPTIM_ADAMW ? 2 : 1;
}

float *coll_zero_master(zero_bucket_t *b)
{
    return b->z->cfg.stage == 3 ? b->pshard : b->pfull + b->opt_lo;
}

coll_result_t coll_zero_idle(coll_zero_t *z, const char *fn)
{
    int nready = 0;

    for (int k = 0; k < z->nbuckets; k++) {
        nready += z->buckets[k].nready;
    }
    if (nready != 0) { /* program order: the same on every rank */
        return coll_train_error(COLL_ERR_INVALID_USAGE, fn,
                                "%d gradient(s) reported since the last coll_zero_step: call it "
                                "between steps",
                                nready);
    }
    coll_train_worker_drain(&z->worker); /* a stage-3 prefetch may still be gathering */
    return COLL_OK;
}

/* ---- arguments ---- */

static coll_result_t zero_check(const coll_zero_t *z, const char *fn)
{
    if (z == NULL) {
        return coll_train_error(COLL_ERR_INVALID_ARG, fn, "zero is NULL");
    }
    return COLL_OK;
}

static coll_result_t zero_check_index(const coll_zero_t *z, int index, const char *fn)
{
    COLL_CHECK(zero_check(z, fn));
    if (index < 0 || index >= z->nparams) {
        return coll_train_error(COLL_ERR_INVALID_ARG, fn,
                                "index %d out of range: expected 0 <= index < %d (registered)",
                                index, z->nparams);
    }
    return COLL_OK;
}

static coll_result_t zero_check_config(const coll_zero_config_t *c, const char *fn)
{
    const coll_optim_config_t *o = &c->optim;
    if (c->size != sizeof(*c)) {
        return coll_train_error(COLL_ERR_INVALID_ARG, fn,
                                "config->size is %zu, expected sizeof(coll_zero_config_t) = %zu "
                                "(use COLL_ZERO_CONFIG_INITIALIZER)",
                                c->size, sizeof(*c));
    }
    if (c->stage < 0 || c->stage > 3) {
        return coll_train_error(COLL_ERR_INVALID_ARG, fn, "config->stage %d: expected 0..3",
                                c->stage);
    }
    if ((unsigned)o->kind >= COLL_OPTIM_COUNT) {
        return coll_train_error(COLL_ERR_INVALID_ARG, fn,
                                "config->optim.kind %d: expected COLL_OPTIM_SGD or "
                                "COLL_OPTIM_ADAMW",
                                (int)o->kind);
    }
    if (!(o->lr > 0.0f) || !(o->weight_decay >= 0.0f)) {
        return coll_train_error(COLL_ERR_INVALID_ARG, fn,
                                "config->optim: lr %g must be > 0 and weight_decay %g >= 0",
                                (double)o->lr, (double)o->weight_decay);
    }
    if (o->kind == COLL_OPTIM_SGD && !(o->momentum >= 0.0f && o->momentum < 1.0f)) {
        return coll_train_error(COLL_ERR_INVALID_ARG, fn,
                                "config->optim.momentum %g: expected 0 <= momentum < 1",
                                (double)o->momentum);
    }
    if (o->kind == COLL_OPTIM_ADAMW && !(o->beta1 >= 0.0f && o->beta1 < 1.0f && o->beta2 >= 0.0f &&
                                         o->beta2 < 1.0f && o->eps > 0.0f)) {
        return coll_train_error(COLL_ERR_INVALID_ARG, fn,
                                "config->optim: beta1 %g and beta2 %g must be in [0, 1), eps %g "
                                "> 0",
                                (double)o->beta1, (double)o->beta2, (double)o->eps);
    }
    return COLL_OK;
}

/* ---- create, register, destroy ---- */

COLL_API coll_result_t coll_zero_create(coll_comm_t *comm, const coll_zero_config_t *config,
                                        coll_zero_t **zero_p)
{
    static const coll_zero_config_t defaults = COLL_ZERO_CONFIG_INITIALIZER;
    const char                     *fn       = "coll_zero_create";
    coll_zero_t                    *z;
    coll_result_t                   st;

    if (comm == NULL || zero_p == NULL) {
        return coll_train_error(COLL_ERR_INVALID_ARG, fn, "%s is NULL",
                                comm == NULL ? "comm" : "zero_p");
    }
    *zero_p = NULL;
    if (config != NULL) {
        COLL_CHECK(zero_check_config(config, fn));
    }
    z = coll_calloc(1, sizeof(*z), "zero");
    if (z == NULL) {
        return coll_train_error(COLL_ERR_NO_MEMORY, fn, "out of memory");
    }
    z->cfg = config != NULL ? *config : defaults;
    if (z->cfg.bucket_cap_bytes == 0) {
        z->cfg.bucket_cap_bytes = COLL_TRAIN_BUCKET_CAP_DEFAULT;
    }
    z->last_gathered = -1;
    st               = coll_train_worker_init(&z->worker, comm, fn);
    if (st != COLL_OK) {
        coll_free(z);
        return st;
    }
    z->rank   = z->worker.rank;
    z->nranks = z->worker.nranks;
    *zero_p   = z;
    return COLL_OK;
}

static void zero_bucket_free(coll_zero_t *z, zero_bucket_t *b)
{
    size_t padded = b->shard * (size_t)z->nranks;
    int    st     = z->cfg.stage;
    coll_free(st <= 2 ? b->pfull : NULL);
    coll_free(b->pshard);
    coll_free(st <= 1 ? b->gfull : NULL);
    coll_free(st >= 2 ? b->gshard : NULL);
    coll_free(b->state[0]);
    coll_free(b->state[1]);
    if (st == 3) {
        zero_work_free(z, &b->pfull, padded);
    }
    if (st >= 2) {
        zero_work_free(z, &b->gfull, padded);
    }
}

COLL_API coll_result_t coll_zero_destroy(coll_zero_t *zero)
{
    coll_result_t st;
    COLL_CHECK(zero_check(zero, "coll_zero_destroy"));
    /* in-flight operations finish before the thread stops; then buffers can go */
    st = coll_train_worker_fini(&zero->worker);
    for (int b = 0; b < zero->nbuckets; b++) {
        zero_bucket_free(zero, &zero->buckets[b]);
    }
    coll_free(zero->buckets);
    coll_free(zero->params);
    free(zero->init);
    coll_free(zero);
    return st;
}

COLL_API coll_result_t coll_zero_register(coll_zero_t *zero, const void *init, size_t count,
                                          coll_dtype_t dtype, int layer, int *index_p)
{
    const char *fn = "coll_zero_register";
    COLL_CHECK(zero_check(zero, fn));
    if (zero->nbuckets > 0) {
        return coll_train_error(COLL_ERR_INVALID_USAGE, fn,
                                "the shards are already built: register every parameter first");
    }
    if (init == NULL || count == 0) {
        return coll_train_error(COLL_ERR_INVALID_ARG, fn,
                                "%s: expected initial values (non-NULL "
                                "init) and count > 0",
                                init == NULL ? "init is NULL" : "count is 0");
    }
    if (dtype != COLL_FLOAT32) {
        return coll_train_error(COLL_ERR_INVALID_ARG, fn, "dtype %s: expected COLL_FLOAT32",
                                coll_dtype_name(dtype));
    }
    int prev = zero->nparams > 0 ? zero->params[zero->nparams - 1].layer : -1;
    if ((layer != prev && layer != prev + 1) || layer < 0) {
        return coll_train_error(COLL_ERR_INVALID_ARG, fn,
                                "layer %d: expected %d (same layer) or %d (next layer)", layer,
                                prev < 0 ? 0 : prev, prev + 1);
    }
    if (zero->nparams == zero->cap_params) {
        int   cap = zero->cap_params > 0 ? 2 * zero->cap_params : 16;
        void *p   = realloc(zero->params, (size_t)cap * sizeof(*zero->params));
        if (p == NULL) {
            return coll_train_error(COLL_ERR_NO_MEMORY, fn, "out of memory");
        }
        zero->params     = p;
        zero->cap_params = cap;
    }
    zero_param_t *pp = &zero->params[zero->nparams];
    memset(pp, 0, sizeof(*pp));
    pp->count  = count;
    pp->layer  = layer;
    pp->gstart = zero->nparams > 0 ? pp[-1].gstart + pp[-1].count : 0;
    /* the initial values wait in a staging copy until the shards are built */
    size_t need = pp->gstart + count;
    if (need > zero->init_cap) {
        size_t cap = need > 2 * zero->init_cap ? need : 2 * zero->init_cap;
        float *p   = realloc(zero->init, cap * sizeof(float));
        if (p == NULL) {
            return coll_train_error(COLL_ERR_NO_MEMORY, fn, "out of memory");
        }
        zero->init     = p;
        zero->init_cap = cap;
    }
    memcpy(zero->init + pp->gstart, init, count * sizeof(float));
    if (index_p != NULL) {
        *index_p = zero->nparams;
    }
    zero->nparams++;
    zero->nlayers = layer + 1;
    return COLL_OK;
}

/* ---- build: buckets, shards, optimizer state ---- */

static coll_result_t zero_bucket_alloc(coll_zero_t *z, zero_bucket_t *b)
{
    size_t n = (size_t)z->nranks, padded = b->shard * n;
    int    stage = z->cfg.stage;

    b->opt_lo = stage == 0 ? 0 : (size_t)z->rank * b->shard;
    b->opt_n  = stage == 0 ? padded : b->shard;
    if (stage <= 2) {
        b->pfull = coll_calloc(padded, sizeof(float), "zero parameters");
    } else {
        b->pshard = coll_calloc(b->shard, sizeof(float), "zero parameter shard");
    }
    if (stage <= 1) {
        b->gfull  = coll_calloc(padded, sizeof(float), "zero gradients");
        b->gshard = b->gfull + b->opt_lo;
    } else {
        b->gshard = coll_calloc(b->shard, sizeof(float), "zero gradient shard");
    }
    for (int k = 0; k < coll_zero_nstate(z); k++) {
        b->state[k] = coll_calloc(b->opt_n, sizeof(float), "zero optimizer state");
        if (b->state[k] == NULL) {
            return COLL_ERR_NO_MEMORY;
        }
    }
    if ((stage <= 2 ? b->pfull : b->pshard) == NULL ||
        (stage <= 1 ? b->gfull : b->gshard) == NULL) {
        return COLL_ERR_NO_MEMORY;
    }
    /* initial values: everything at stages 0-2, this rank's shard at stage 3 */
    const float *src = z->init + z->params[b->lo].gstart;
    if (stage <= 2) {
        memcpy(b->pfull, src, b->count * sizeof(float));
    } else if (b->opt_lo < b->count) {
        size_t len = b->count - b->opt_lo < b->shard ? b->count - b->opt_lo : b->shard;
        memcpy(b->pshard, src + b->opt_lo, len * sizeof(float));
    }
    return COLL_OK;
}

coll_result_t coll_zero_build(coll_zero_t *z, const char *fn)
{
    int     n      = z->nparams;
    size_t *bytes  = coll_calloc((size_t)n + 1, sizeof(size_t), "zero sizes");
    int    *key    = coll_calloc((size_t)n + 1, sizeof(int), "zero keys");
    int    *bucket = coll_calloc((size_t)n + 1, sizeof(int), "zero buckets");
    int     nb;

    if (z->nbuckets > 0) {
        coll_free(bytes), coll_free(key), coll_free(bucket);
        return COLL_OK;
    }
    if (n == 0 || bytes == NULL || key == NULL || bucket == NULL) {
        coll_free(bytes), coll_free(key), coll_free(bucket);
        return n == 0 ? coll_train_error(COLL_ERR_INVALID_USAGE, fn, "no parameter registered")
                      : coll_train_error(COLL_ERR_NO_MEMORY, fn, "out of memory");
    }
    for (int i = 0; i < n; i++) {
        bytes[i] = z->params[i].count * sizeof(float);
        key[i]   = z->params[i].layer;
    }
    /* stage 3 gathers per layer, so a bucket is exactly one layer */
    nb =
        coll_train_assign_buckets(n, bytes, z->cfg.stage == 3 ? key : NULL,
                                  z->cfg.stage == 3 ? (size_t)-1 : z->cfg.bucket_cap_bytes, bucket);
    coll_free(bytes), coll_free(key);
    z->buckets = coll_calloc((size_t)nb, sizeof(*z->buckets), "zero buckets");
    if (z->buckets == NULL) {
        coll_free(bucket);
        return coll_train_error(COLL_ERR_NO_MEMORY, fn, "out of memory");
    }
    z->nbuckets = nb;
    for (int k = 0; k < nb; k++) {
        z->buckets[k].lo = n;
        z->buckets[k].hi = -1;
    }
    for (int i = 0; i < n; i++) {
        zero_bucket_t *b    = &z->buckets[bucket[i]];
        b->z                = z;
        b->lo               = i < b->lo ? i : b->lo;
        b->hi               = i > b->hi ? i : b->hi;
        b->layer            = z->params[i].layer;
        z->params[i].bucket = bucket[i];
        z->params[i].offset = b->count;
        b->count += z->params[i].count;
    }
    coll_free(bucket);
    for (int k = 0; k < nb; k++) {
        zero_bucket_t *b = &z->buckets[k];
        b->shard         = (b->count + (size_t)z->nranks - 1) / (size_t)z->nranks;
        if (zero_bucket_alloc(z, b) != COLL_OK) { /* unbuilt again: a later call retries */
            for (int j = 0; j <= k; j++) {
                zero_bucket_free(z, &z->buckets[j]);
            }
            coll_free(z->buckets);
            z->buckets  = NULL;
            z->nbuckets = 0;
            return coll_train_error(COLL_ERR_NO_MEMORY, fn, "out of memory for bucket %d", k);
        }
    }
    free(z->init);
    z->init     = NULL;
    z->init_cap = 0;
    coll_info(TRAIN, "zero stage %d: %d parameters, %d layers, %d buckets over %d ranks",
              z->cfg.stage, n, z->nlayers, nb, z->nranks);
    return COLL_OK;
}

/* ---- gradients ---- */

static zero_bucket_t *zero_layer_bucket(coll_zero_t *z, int layer)
{
    /* stage 3: buckets hold one layer each, in reverse order */
    return &z->buckets[z->nlayers - 1 - layer];
}

COLL_API coll_result_t coll_zero_grad(coll_zero_t *zero, int index, float **grad_p)
{
    const char *fn = "coll_zero_grad";
    COLL_CHECK(zero_check_index(zero, index, fn));
    if (grad_p == NULL) {
        return coll_train_error(COLL_ERR_INVALID_ARG, fn, "grad_p is NULL");
    }
    COLL_CHECK(coll_zero_build(zero, fn));
    zero_param_t  *p = &zero->params[index];
    zero_bucket_t *b = &zero->buckets[p->bucket];
    if (b->launched) {
        return coll_train_error(COLL_ERR_INVALID_USAGE, fn,
                                "parameter %d: its bucket %d is already being reduced this step",
                                index, p->bucket);
    }
    if (b->gfull == NULL) { /* stages 2-3: the bucket's full gradients live until reduced */
        b->gfull = zero_work_alloc(zero, b->shard * (size_t)zero->nranks);
        if (b->gfull == NULL) {
            return coll_train_error(COLL_ERR_NO_MEMORY, fn, "out of memory for bucket %d",
                                    p->bucket);
        }
    }
    *grad_p = b->gfull + p->offset;
    return COLL_OK;
}

/* Stages 2-3: the full gradients of the bucket are released as soon as they are reduced. */
static void zero_rs_after(train_op_t *op)
{
    zero_bucket_t *b = op->arg;
    zero_work_free(b->z, &b->gfull, b->shard * (size_t)b->z->nranks);
}

static coll_result_t zero_launch(coll_zero_t *z, zero_bucket_t *b)
{
    if (b->gfull == NULL) { /* no gradient was written: it is zero */
        b->gfull = zero_work_alloc(z, b->shard * (size_t)z->nranks);
        if (b->gfull == NULL) {
            return coll_train_error(COLL_ERR_NO_MEMORY, "coll_zero_grad_ready",
                                    "out of memory for a bucket");
        }
    }
    memset(&b->rs_op, 0, sizeof(b->rs_op));
    b->rs_op.dtype   = COLL_FLOAT32;
    b->rs_op.redop   = COLL_AVG;
    b->rs_op.arg     = b;
    b->rs_op.sendbuf = b->gfull;
    if (z->cfg.stage == 0) {
        b->rs_op.kind    = TRAIN_OP_ALLREDUCE;
        b->rs_op.count   = b->shard * (size_t)z->nranks;
        b->rs_op.recvbuf = b->gfull;
    } else {
        b->rs_op.kind    = TRAIN_OP_REDUCE_SCATTER;
        b->rs_op.count   = b->shard;
        b->rs_op.recvbuf = b->gshard; /* stage 1: in place, inside gfull */
        b->rs_op.after   = z->cfg.stage >= 2 ? zero_rs_after : NULL;
    }
    b->launched = 1;
    coll_train_worker_submit(&z->worker, &b->rs_op);
    return COLL_OK;
}

static coll_result_t zero_launch_ready(coll_zero_t *z)
{
    while (z->next_launch < z->nbuckets) {
        zero_bucket_t *b = &z->buckets[z->next_launch];
        if (b->nready < b->hi - b->lo + 1) {
            break;
        }
        COLL_CHECK(zero_launch(z, b));
        z->next_launch++;
    }
    return COLL_OK;
}

COLL_API coll_result_t coll_zero_grad_ready(coll_zero_t *zero, int index)
{
    const char *fn = "coll_zero_grad_ready";
    COLL_CHECK(zero_check_index(zero, index, fn));
    COLL_CHECK(coll_zero_build(zero, fn));
    zero_param_t *p = &zero->params[index];
    if (p->ready) {
        return coll_train_error(COLL_ERR_INVALID_USAGE, fn,
                                "parameter %d reported ready twice in one step", index);
    }
    p->ready = 1;
    zero->buckets[p->bucket].nready++;
    return zero_launch_ready(zero);
}

static coll_result_t zero_gather_wait(coll_zero_t *z, zero_bucket_t *b, const char *fn);

/* ---- the step ---- */

static coll_result_t zero_wait_reductions(coll_zero_t *z, const char *fn)
{
    coll_result_t first = COLL_OK;
    for (int i = 0; i < z->nparams; i++) {
        if (!z->params[i].ready) {
            z->params[i].ready = 1;
            z->buckets[z->params[i].bucket].nready++;
        }
    }
    COLL_CHECK(zero_launch_ready(z));
    for (int k = 0; k < z->nbuckets; k++) {
        coll_result_t st = coll_train_worker_wait(&z->worker, &z->buckets[k].rs_op);
        if (st != COLL_OK && first == COLL_OK) {
            first = coll_train_error(st, fn, "gradient reduction of bucket %d failed: %s", k,
                                     coll_comm_last_error(z->worker.comm));
        }
    }
    return first;
}

coll_result_t coll_zero_gather_all(coll_zero_t *z, const char *fn)
{
    coll_result_t first = COLL_OK;
    if (z->cfg.stage == 0 || z->cfg.stage == 3) {
        return COLL_OK;
    }
    for (int k = 0; k < z->nbuckets; k++) {
        zero_bucket_t *b = &z->buckets[k];
        memset(&b->ag_op, 0, sizeof(b->ag_op));
        b->ag_op.kind    = TRAIN_OP_ALLGATHER;
        b->ag_op.dtype   = COLL_FLOAT32;
        b->ag_op.count   = b->shard;
        b->ag_op.sendbuf = b->pfull + b->opt_lo; /* in place */
        b->ag_op.recvbuf = b->pfull;
        coll_train_worker_submit(&z->worker, &b->ag_op);
    }
    for (int k = 0; k < z->nbuckets; k++) {
        coll_result_t st = coll_train_worker_wait(&z->worker, &z->buckets[k].ag_op);
        if (st != COLL_OK && first == COLL_OK) {
            first = coll_train_error(st, fn, "parameter all-gather of bucket %d failed: %s", k,
                                     coll_comm_last_error(z->worker.comm));
        }
    }
    return first;
}

coll_result_t coll_zero_drop_gathered(coll_zero_t *z, const char *fn)
{
    for (int k = 0; k < z->nbuckets && z->cfg.stage == 3; k++) {
        zero_bucket_t *b = &z->buckets[k];
        COLL_CHECK(zero_gather_wait(z, b, fn));
        zero_work_free(z, &b->pfull, b->shard * (size_t)z->nranks);
        b->gather = 0;
    }
    return COLL_OK;
}

COLL_API coll_result_t coll_zero_step(coll_zero_t *zero)
{
    const char *fn = "coll_zero_step";
    COLL_CHECK(zero_check(zero, fn));
    COLL_CHECK(coll_zero_build(zero, fn));
    COLL_CHECK(zero_wait_reductions(zero, fn));
    COLL_CHECK(coll_zero_drop_gathered(zero, fn)); /* they would be stale after the update */
    zero->steps++;
    for (int k = 0; k < zero->nbuckets; k++) {
        zero_bucket_t *b = &zero->buckets[k];
        coll_train_optim_update(&zero->cfg.optim, zero->steps, coll_zero_master(b), b->gshard,
                                b->state, b->opt_n);
    }
    COLL_CHECK(coll_zero_gather_all(zero, fn));
    for (int k = 0; k < zero->nbuckets; k++) {
        zero_bucket_t *b = &zero->buckets[k];
        if (zero->cfg.stage <= 1) {
            memset(b->gfull, 0, b->shard * (size_t)zero->nranks * sizeof(float));
        }
        b->nready   = 0;
        b->launched = 0;
    }
    for (int i = 0; i < zero->nparams; i++) {
        zero->params[i].ready = 0;
    }
    zero->next_launch = 0;
    return COLL_OK;
}

COLL_API coll_result_t coll_zero_set_lr(coll_zero_t *zero, float lr)
{
    const char *fn = "coll_zero_set_lr";
    COLL_CHECK(zero_check(zero, fn));
    if (!(lr > 0.0f) || !isfinite(lr)) {
        return coll_train_error(COLL_ERR_INVALID_ARG, fn, "lr %g: expected a finite lr > 0",
                                (double)lr);
    }
    zero->cfg.optim.lr = lr;
    return COLL_OK;
}

/* Collective: waits for the gradient reductions, then the L2 norm of the averaged gradients
 * over every rank's shard (stage 0: every rank holds them all), one all-reduce of a double
 * through the worker so it is ordered with the layer's other collectives. */
COLL_API coll_result_t coll_zero_clip_grad_norm(coll_zero_t *zero, float max_norm,
                                                double *total_norm_p)
{
    const char   *fn = "coll_zero_clip_grad_norm";
    double        sq = 0.0;
    train_op_t    op;
    coll_result_t st;

    COLL_CHECK(zero_check(zero, fn));
    if (!(max_norm >= 0.0f) || !isfinite(max_norm)) {
        return coll_train_error(COLL_ERR_INVALID_ARG, fn,
                                "max_norm %g: expected a finite max_norm >= 0 (0: no clipping)",
                                (double)max_norm);
    }
    COLL_CHECK(coll_zero_build(zero, fn));
    COLL_CHECK(zero_wait_reductions(zero, fn));
    for (int k = 0; k < zero->nbuckets; k++) {
        const zero_bucket_t *b = &zero->buckets[k];
        for (size_t i = 0; i < b->opt_n; i++) { /* padding holds zeros */
            sq += (double)b->gshard[i] * b->gshard[i];
        }
    }
    if (zero->cfg.stage > 0 && zero->nranks > 1) {
        memset(&op, 0, sizeof(op));
        op.kind    = TRAIN_OP_ALLREDUCE;
        op.dtype   = COLL_FLOAT64;
        op.redop   = COLL_SUM;
        op.count   = 1;
        op.sendbuf = &sq;
        op.recvbuf = &sq;
        coll_train_worker_submit(&zero->worker, &op);
        st = coll_train_worker_wait(&zero->worker, &op);
        if (st != COLL_OK) {
            return coll_train_error(st, fn, "gradient norm all-reduce failed: %s",
                                    coll_comm_last_error(zero->worker.comm));
        }
    }
    float norm = (float)sqrt(sq);
    if (max_norm > 0.0f && norm > max_norm) { /* torch.nn.utils.clip_grad_norm_ */
        float scale = max_norm / (norm + 1e-6f);
        for (int k = 0; k < zero->nbuckets; k++) {
            zero_bucket_t *b = &zero->buckets[k];
            for (size_t i = 0; i < b->opt_n; i++) {
                b->gshard[i] *= scale;
            }
        }
    }
    if (total_norm_p != NULL) {
        *total_norm_p = norm;
    }
    return COLL_OK;
}

/* ---- stage 3: layers ---- */

static coll_result_t zero_check_layer(coll_zero_t *z, int layer, const char *fn)
{
    COLL_CHECK(zero_check(z, fn));
    COLL_CHECK(coll_zero_build(z, fn));
    if (layer < 0 || layer >= z->nlayers) {
        return coll_train_error(COLL_ERR_INVALID_ARG, fn, "layer %d: expected 0 <= layer < %d",
                                layer, z->nlayers);
    }
    return COLL_OK;
}

static coll_result_t zero_prefetch(coll_zero_t *z, int layer, const char *fn)
{
    zero_bucket_t *b = zero_layer_bucket(z, layer);
    if (b->gather != 0) {
        return COLL_OK;
    }
    b->pfull = zero_work_alloc(z, b->shard * (size_t)z->nranks);
    if (b->pfull == NULL) {
        return coll_train_error(COLL_ERR_NO_MEMORY, fn, "out of memory for layer %d", layer);
    }
    memset(&b->ag_op, 0, sizeof(b->ag_op));
    b->ag_op.kind    = TRAIN_OP_ALLGATHER;
    b->ag_op.dtype   = COLL_FLOAT32;
    b->ag_op.count   = b->shard;
    b->ag_op.sendbuf = b->pshard;
    b->ag_op.recvbuf = b->pfull;
    b->gather        = 1;
    coll_train_worker_submit(&z->worker, &b->ag_op);
    return COLL_OK;
}

COLL_API coll_result_t coll_zero_prefetch_layer(coll_zero_t *zero, int layer)
{
    const char *fn = "coll_zero_prefetch_layer";
    COLL_CHECK(zero_check_layer(zero, layer, fn));
    return zero->cfg.stage == 3 ? zero_prefetch(zero, layer, fn) : COLL_OK;
}

static coll_result_t zero_gather_wait(coll_zero_t *z, zero_bucket_t *b, const char *fn)
{
    if (b->gather == 1) {
        coll_result_t st = coll_train_worker_wait(&z->worker, &b->ag_op);
        if (st != COLL_OK) {
            return coll_train_error(st, fn, "all-gather of layer %d failed: %s", b->layer,
                                    coll_comm_last_error(z->worker.comm));
        }
        b->gather = 2;
    }
    return COLL_OK;
}

COLL_API coll_result_t coll_zero_gather_layer(coll_zero_t *zero, int layer)
{
    const char *fn = "coll_zero_gather_layer";
    COLL_CHECK(zero_check_layer(zero, layer, fn));
    if (zero->cfg.stage != 3) {
        return COLL_OK;
    }
    /* forward goes up, backward comes down: prefetch the next layer the same way */
    if (layer != zero->last_gathered) {
        zero->direction = layer > zero->last_gathered ? 1 : -1;
    } else {
        zero->direction = -zero->direction;
    }
    zero->last_gathered = layer;
    COLL_CHECK(zero_prefetch(zero, layer, fn));
    int next = layer + zero->direction;
    if (!zero->cfg.no_prefetch && next >= 0 && next < zero->nlayers) {
        COLL_CHECK(zero_prefetch(zero, next, fn));
    }
    return zero_gather_wait(zero, zero_layer_bucket(zero, layer), fn);
}

COLL_API coll_result_t coll_zero_release_layer(coll_zero_t *zero, int layer)
{
    const char *fn = "coll_zero_release_layer";
    COLL_CHECK(zero_check_layer(zero, layer, fn));
    if (zero->cfg.stage != 3) {
        return COLL_OK;
    }
    zero_bucket_t *b = zero_layer_bucket(zero, layer);
    COLL_CHECK(zero_gather_wait(zero, b, fn));
    zero_work_free(zero, &b->pfull, b->shard * (size_t)zero->nranks);
    b->gather = 0;
    return COLL_OK;
}

COLL_API coll_result_t coll_zero_param(coll_zero_t *zero, int index, float **param_p)
{
    const char *fn = "coll_zero_param";
    COLL_CHECK(zero_check_index(zero, index, fn));
    if (param_p == NULL) {
        return coll_train_error(COLL_ERR_INVALID_ARG, fn, "param_p is NULL");
    }
    COLL_CHECK(coll_zero_build(zero, fn));
    zero_param_t  *p = &zero->params[index];
    zero_bucket_t *b = &zero->buckets[p->bucket];
    if (zero->cfg.stage == 3 && b->gather != 2) {
        return coll_train_error(COLL_ERR_INVALID_USAGE, fn,
                                "parameter %d: layer %d is not gathered (call "
                                "coll_zero_gather_layer first)",
                                index, p->layer);
    }
    *param_p = b->pfull + p->offset;
    return COLL_OK;
}

COLL_API coll_result_t coll_zero_get_stats(const coll_zero_t *zero, coll_zero_stats_t *stats_p)
{
    const char *fn = "coll_zero_get_stats";
    COLL_CHECK(zero_check(zero, fn));
    if (stats_p == NULL) {
        return coll_train_error(COLL_ERR_INVALID_ARG, fn, "stats_p is NULL");
    }
    coll_zero_t *z = (coll_zero_t *)zero;
    memset(stats_p, 0, sizeof(*stats_p));
    stats_p->stage    = z->cfg.stage;
    stats_p->nbuckets = z->nbuckets;
    stats_p->nparams  = z->nparams;
    stats_p->steps    = z->steps;
    for (int k = 0; k < z->nbuckets; k++) {
        const zero_bucket_t *b      = &z->buckets[k];
        size_t               padded = b->shard * (size_t)z->nranks;
        stats_p->param_bytes += (z->cfg.stage <= 2 ? padded : b->shard) * sizeof(float);
        stats_p->grad_bytes += (z->cfg.stage <= 1 ? padded : b->shard) * sizeof(float);
        stats_p->optim_bytes += (size_t)coll_zero_nstate(z) * b->opt_n * sizeof(float);
    }
    stats_p->working_bytes      = atomic_load(&z->working);
    stats_p->peak_working_bytes = atomic_load(&z->peak_working);
    stats_p->wire_bytes         = atomic_load(&z->worker.wire_bytes);
    return COLL_OK;
}

COLL_API coll_result_t coll_zero_arrival_stats(coll_zero_t *zero, char *buf, size_t len)
{
    const char *fn = "coll_zero_arrival_stats";
    COLL_CHECK(zero_check(zero, fn));
    return coll_train_worker_arrival(&zero->worker, fn, buf, len);
}
