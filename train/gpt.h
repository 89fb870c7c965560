/* SPDX-License-Identifier: MIT */
/*
 * gpt.h -- the GPT model of ctrain: token + position embeddings, pre-LayerNorm blocks (causal
 * self-attention, GELU MLP), final LayerNorm and a head tied to the token embedding. fp32 on
 * the CPU, forward and backward written out by hand. Not a library: no batching across calls,
 * no KV cache, no mixed precision.
 */
#ifndef CTRAIN_GPT_H
#define CTRAIN_GPT_H

#include <stddef.h>
#include <stdint.h>

/* Tensors per block, in registration (forward) order. */
enum {
    GPT_LN1W,
    GPT_LN1B,
    GPT_QKVW,
    GPT_QKVB,
    GPT_ATTPROJW,
    GPT_ATTPROJB,
    GPT_LN2W,
    GPT_LN2B,
    GPT_FCW,
    GPT_FCB,
    GPT_FCPROJW,
    GPT_FCPROJB,
    GPT_NBLOCK_TENSORS
};

typedef struct {
    int vocab;  /* 256 for bytes */
    int ctx;    /* maximum sequence length T */
    int layers; /* blocks */
    int heads;  /* attention heads; channels % heads == 0 */
    int channels;
} gpt_config_t;

typedef struct gpt_acts gpt_acts_t;

typedef struct {
    gpt_config_t cfg;
    int          ntensors;  /* 2 + 12 * layers + 2 */
    size_t      *sizes;     /* elements of each tensor */
    float      **params;    /* tensor i's parameters (views into param_mem) */
    float      **grads;     /* tensor i's gradients (views into grad_mem) */
    float       *param_mem; /* every parameter, tensors back to back */
    float       *grad_mem;
    size_t       nparams;
    int          batch, seqlen; /* shape of the allocated activations */
    gpt_acts_t  *acts;
    /* Optional (ZeRO-3): called with gather 1 before forward or backward reads the parameters
     * of a unit (0: embeddings, 1..layers: block l - 1, layers + 1: final LayerNorm; see
     * gpt_tensor_unit), with gather 0 once it no longer needs them. The hook sets params[i]
     * for the unit's tensors. NULL: every parameter is always there. */
    void (*use)(void *arg, int unit, int gather);
    void *use_arg;
} gpt_t;

/* Called in backward as soon as tensors [first, first + n) have their final gradient. */
typedef void (*gpt_ready_fn_t)(void *arg, int first, int n);

int  gpt_create(const gpt_config_t *cfg, gpt_t **gpt_p);
void gpt_destroy(gpt_t *gpt);
void gpt_init_weights(gpt_t *gpt, uint64_t seed);
int  gpt_tensor_index(const gpt_t *gpt, int layer, int which);
/* The unit (see gpt_t.use) tensor i belongs to; units are numbered in registration order. */
int gpt_tensor_unit(const gpt_t *gpt, int i);
/* Forward over B x T tokens; targets may be NULL (no loss). Returns the mean loss, or -1. */
float gpt_forward(gpt_t *gpt, const uint8_t *inputs, const uint8_t *targets, int B, int T);
/* Adds d(loss)/d(params) * scale to the gradients; needs the last forward with targets. */
void gpt_backward(gpt_t *gpt, float scale, gpt_ready_fn_t ready, void *arg);
/* Probabilities of the next token after position t of sequence 0 of the last forward. */
const float *gpt_probs(const gpt_t *gpt, int t);

#endif
