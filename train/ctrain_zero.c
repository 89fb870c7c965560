/* SPDX-License-Identifier: MIT */
/*
 * ctrain_zero.c -- the ZeRO path of ctrain (see ctrain_zero.h): registration, per-step gradient
 * views, readiness from backward, and the sharded optimizer step.
 */
#include "ctrain_zero.h"

#include <stdio.h>
#include <stdlib.h>

static void zero_check(coll_result_t st, const char *what)
{
    if (st != COLL_OK) {
        fprintf(stderr, "ctrain: %s failed: %s (%s)\n", what, coll_strerror(st), coll_last_error());
        exit(1);
    }
}

static void zero_point_params(coll_zero_t *z, model_t *m)
{
    for (int i = 0; i < m->ntensors; i++) {
        zero_check(coll_zero_param(z, i, &m->params[i]), "coll_zero_param");
    }
}

coll_zero_t *ctrain_zero_setup(coll_comm_t *world, const ctrain_opts_t *o, model_t *m)
{
    coll_zero_config_t cfg = COLL_ZERO_CONFIG_INITIALIZER;
    coll_zero_t       *z;
    cfg.stage              = o->zero;
    cfg.bucket_cap_bytes   = (size_t)(o->bucket_mb * 1048576.0);
    cfg.optim.kind         = COLL_OPTIM_ADAMW;
    cfg.optim.lr           = o->lr;
    cfg.optim.beta1        = o->beta1;
    cfg.optim.beta2        = o->beta2;
    cfg.optim.eps          = o->eps;
    cfg.optim.weight_decay = o->weight_decay;
    zero_check(coll_zero_create(world, &cfg, &z), "coll_zero_create");
    for (int i = 0; i < m->ntensors; i++) { /* one "layer" per tensor: buckets by size */
        zero_check(coll_zero_register(z, m->params[i], m->sizes[i], COLL_FLOAT32, i, NULL),
                   "coll_zero_register");
    }
    zero_point_params(z, m);
    return z;
}

void ctrain_zero_begin(coll_zero_t *z, model_t *m)
{
    for (int i = 0; i < m->ntensors; i++) {
        zero_check(coll_zero_grad(z, i, &m->grads[i]), "coll_zero_grad");
    }
}

void ctrain_zero_ready(void *arg, int first, int n)
{
    for (int i = first + n - 1; i >= first; i--) {
        zero_check(coll_zero_grad_ready(arg, i), "coll_zero_grad_ready");
    }
}

uint64_t ctrain_zero_step(coll_zero_t *z, model_t *m, float lr, float clip, float *norm_p)
{
    coll_zero_stats_t st;
    double            norm = 0.0;
    zero_check(coll_zero_clip_grad_norm(z, clip, &norm), "coll_zero_clip_grad_norm");
    zero_check(coll_zero_set_lr(z, lr), "coll_zero_set_lr");
    zero_check(coll_zero_step(z), "coll_zero_step");
    *norm_p = (float)norm;
    zero_point_params(z, m);
    zero_check(coll_zero_get_stats(z, &st), "coll_zero_get_stats");
    return st.wire_bytes;
}
