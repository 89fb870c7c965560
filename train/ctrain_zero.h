/* SPDX-License-Identifier: MIT */
/*
 * ctrain_zero.h -- ctrain with --zero 1|2|3: the model's parameters and gradients live in a
 * coll_zero object (sharded optimizer state, and sharded gradients at stage 2) and
 * coll_zero_step runs AdamW shard-wise, with the schedule's learning rate (coll_zero_set_lr) and
 * global gradient-norm clipping (coll_zero_clip_grad_norm). Stage 3 (GPT only): the model's
 * parameters exist only as shards; the GPT's forward and backward gather each unit (embeddings,
 * a block, the final LayerNorm) through coll_zero_gather_layer when they reach it and release
 * it after.
 */
#ifndef CTRAIN_ZERO_H
#define CTRAIN_ZERO_H

#include "model.h"

#include <coll.h>
#include <coll_train.h>

/* Collective: create the object, register the model's tensors with their current values and
 * point model->params at the object's parameters. Exits with a message on failure. */
coll_zero_t *ctrain_zero_setup(coll_comm_t *world, const ctrain_opts_t *o, model_t *m);
/* Before a step's first micro-batch: point model->grads at this step's (zeroed) gradients. */
void ctrain_zero_begin(coll_zero_t *z, model_t *m);
/* gpt_ready_fn_t for backward: report tensors' gradients final. */
void ctrain_zero_ready(void *arg, int first, int n);
/* Collective, between steps: checkpoint into ckpt_dir/zero-step-NNNNNNNN (written as .tmp with
 * the library's checksummed shards and manifest, plus ctrain.meta; rank 0 renames it once every
 * shard is on disk). 0, or -1 after a message (training goes on). */
int ctrain_zero_save(coll_zero_t *z, coll_comm_t *world, const ctrain_opts_t *o, int step,
                     int rank);
/* Collective: load the newest loadable checkpoint of this run (ctrain_opts_run_hash) in ckpt_dir
 * (any rank count or stage), older ones when it is corrupt or another run's; its step, or 0 when
 * there is none. strict: exits (2) when every one skipped was another run's. */
int ctrain_zero_resume(coll_zero_t *z, model_t *m, const ctrain_opts_t *o, int rank, int strict);
/* One line: the bytes this rank holds (coll_zero_get_stats) against a replicated model. */
void ctrain_zero_report(coll_zero_t *z, const model_t *m);
/* Stage 3, collective: gather every unit and keep them (before rank 0 alone samples). */
void ctrain_zero_gather_all(coll_zero_t *z, model_t *m);
/* Reduce, clip to clip (0: off), update with lr, gather; re-point model->params. *norm_p: the
 * gradient norm before clipping. Returns bytes sent so far. */
uint64_t ctrain_zero_step(coll_zero_t *z, model_t *m, float lr, float clip, float *norm_p);

#endif
