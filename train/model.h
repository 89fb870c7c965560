/* SPDX-License-Identifier: MIT */
/*
 * model.h -- what ctrain's training loop sees of a model and its data: a flat parameter and
 * gradient view (for DDP, AdamW and checkpoints) and two operations on items picked by global
 * index (so the data stream does not depend on the number of ranks). model_gpt.c: byte-level
 * GPT on text; model_mlp.c: MLP classifier on Fashion-MNIST.
 */
#ifndef CTRAIN_MODEL_H
#define CTRAIN_MODEL_H

#include "ctrain_opts.h"
#include "gpt.h"

#include <stddef.h>
#include <stdint.h>

typedef struct model model_t;
struct model {
    int     ntensors; /* tensors in registration (forward) order */
    size_t *sizes;
    float **params, **grads;
    float  *param_mem, *grad_mem; /* all tensors back to back */
    size_t  nparams;
    int     units; /* tokens (GPT: T) or samples (MLP: 1) per item */
    /* items g0 .. g0 + B - 1: forward, then backward adding scale * gradient; mean loss */
    float (*train_micro)(model_t *m, uint64_t g0, int B, float scale, gpt_ready_fn_t ready,
                         void *arg);
    /* summed loss of validation item j of n (and 1 in *correct_p if classified right) */
    double (*val_item)(model_t *m, int j, int n, int *correct_p);
    void (*destroy)(model_t *m);
    char           desc[256];         /* one line for the banner */
    gpt_t         *gpt;               /* GPT only: --dump and --sample */
    const uint8_t *last_in, *last_tg; /* GPT only: the last micro-batch, B * T bytes each */
};

/* 0, or -1 with a message in err. */
int model_gpt_create(const ctrain_opts_t *o, model_t **m_p, char *err, size_t errlen);
int model_mlp_create(const ctrain_opts_t *o, model_t **m_p, char *err, size_t errlen);
/* GPT only: print nbytes sampled after the first validation byte. */
void model_gpt_sample(model_t *m, int nbytes, uint64_t seed);

#endif
