/* SPDX-License-Identifier: MIT */
/*
 * ctrain_opts.h -- ctrain's command line: every option with its default, parsed and checked in
 * one place (ctrain_opts.c); bad values get a message naming the option and exit status 2.
 */
#ifndef CTRAIN_OPTS_H
#define CTRAIN_OPTS_H

#include <coll.h>
#include <coll_train.h>

#include <stdint.h>
#include <stdio.h>

typedef struct {
    const char            *model;     /* "gpt" */
    const char            *data_path; /* byte-level text */
    int                    layers, channels, heads, seqlen;
    int                    steps, batch, grad_accum;
    float                  lr, min_lr_ratio, weight_decay, clip, beta1, beta2, eps;
    int                    warmup;
    int                    warmup_given; /* as given, before it is clamped to --steps */
    int                    zero;         /* only 0 (DDP) so far */
    double                 bucket_mb;
    coll_dtype_t           comm_dtype;
    coll_compress_config_t compress;          /* kind 0: dense */
    int                    compress_warmup;   /* first steps sent dense */
    int                    sparsity_warmup;   /* top-k: steps from 25% down to the ratio */
    int                    precision;         /* prec_t: fp32, bf16 or fp16 compute */
    float                  loss_scale;        /* fp16: initial loss scale */
    int                    loss_scale_window; /* fp16: good steps before it doubles */
    float                  topk_momentum;     /* top-k: DGC momentum correction factor, 0: off */
    uint64_t               seed;
    int                    deterministic;
    int                    eval_every, eval_batches;
    int                    sample;
    const char            *csv_path;
    const char            *dump_dir;   /* reference values for the PyTorch comparison */
    const char            *ckpt_dir;   /* checkpoints; NULL: none */
    int                    ckpt_every; /* steps between checkpoints */
    int                    resume;     /* start from the newest valid checkpoint in ckpt_dir */
    int                    elastic;    /* go on with the survivors after a rank fails */
    int                    kill_at;    /* fault injection: a rank SIGKILLs itself at this step */
    int                    kill_rank;  /* which one; -1: the last */
    int slow_rank; /* fault injection: this rank sleeps slow_ms before each step, -1: none */
    int slow_ms;
} ctrain_opts_t;

int  ctrain_opts_parse(int argc, char **argv, ctrain_opts_t *o);
void ctrain_usage(FILE *f);
/* The hash that checkpoints carry: equal for two runs whose training trajectories are equal. */
uint64_t ctrain_opts_run_hash(const ctrain_opts_t *o);

#endif
