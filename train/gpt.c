/* SPDX-License-Identifier: MIT */
/*
 * gpt.c -- ctrain's GPT: parameter layout, GPT-2 style initialisation, forward and backward
 * over a batch, calling back as each block's gradients become final so that data-parallel
 * communication can overlap the rest of backward. The layers are in gpt_layers.c.
 */
#include "gpt.h"
#include "gpt_layers.h"
#include "rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct gpt_acts {
    float   *encoded;                   /* [N][C] */
    float   *ln1, *ln1_mean, *ln1_rstd; /* per layer */
    float   *qkv, *att, *atty, *res2;
    float   *ln2, *ln2_mean, *ln2_rstd;
    float   *fch, *fch_gelu, *res3;
    float   *lnf, *lnf_mean, *lnf_rstd, *probs;
    float   *dres, *dln, *dwide, *dwide2, *dqkv, *datty, *datt; /* backward scratch */
    uint8_t *inputs, *targets;
};

int gpt_tensor_index(const gpt_t *gpt, int layer, int which)
{
    (void)gpt;
    return 2 + layer * GPT_NBLOCK_TENSORS + which;
}

int gpt_tensor_unit(const gpt_t *gpt, int i)
{
    if (i < 2) {
        return 0;
    }
    if (i >= gpt->ntensors - 2) {
        return gpt->cfg.layers + 1;
    }
    return 1 + (i - 2) / GPT_NBLOCK_TENSORS;
}

/* The ZeRO-3 hook, if any (gpt_t.use). */
static void gpt_use(gpt_t *g, int unit, int gather)
{
    if (g->use != NULL) {
        g->use(g->use_arg, unit, gather);
    }
}

int gpt_create(const gpt_config_t *cfg, gpt_t **gpt_p)
{
    int    L = cfg->layers, C = cfg->channels;
    gpt_t *g = calloc(1, sizeof(*g));
    if (g == NULL || cfg->vocab <= 0 || cfg->ctx <= 0 || L <= 0 || cfg->heads <= 0 || C <= 0 ||
        C % cfg->heads != 0) {
        free(g);
        return -1;
    }
    g->cfg      = *cfg;
    g->ntensors = 2 + L * GPT_NBLOCK_TENSORS + 2;
    g->sizes    = calloc(g->ntensors, sizeof(size_t));
    g->params   = calloc(g->ntensors, sizeof(float *));
    g->grads    = calloc(g->ntensors, sizeof(float *));
    if (g->sizes == NULL || g->params == NULL || g->grads == NULL) {
        gpt_destroy(g);
        return -1;
    }
    size_t blk[GPT_NBLOCK_TENSORS] = {
        [GPT_LN1W]     = C,
        [GPT_LN1B]     = C,
        [GPT_QKVW]     = 3 * (size_t)C * C,
        [GPT_QKVB]     = 3 * C,
        [GPT_ATTPROJW] = (size_t)C * C,
        [GPT_ATTPROJB] = C,
        [GPT_LN2W]     = C,
        [GPT_LN2B]     = C,
        [GPT_FCW]      = 4 * (size_t)C * C,
        [GPT_FCB]      = 4 * C,
        [GPT_FCPROJW]  = 4 * (size_t)C * C,
        [GPT_FCPROJB]  = C,
    };
    g->sizes[0] = (size_t)cfg->vocab * C;
    g->sizes[1] = (size_t)cfg->ctx * C;
    for (int l = 0; l < L; l++) {
        memcpy(&g->sizes[gpt_tensor_index(g, l, 0)], blk, sizeof(blk));
    }
    g->sizes[g->ntensors - 2] = C;
    g->sizes[g->ntensors - 1] = C;
    for (int i = 0; i < g->ntensors; i++) {
        g->nparams += g->sizes[i];
    }
    g->param_mem = calloc(g->nparams, sizeof(float));
    g->grad_mem  = calloc(g->nparams, sizeof(float));
    if (g->param_mem == NULL || g->grad_mem == NULL) {
        gpt_destroy(g);
        return -1;
    }
    for (size_t i = 0, off = 0; i < (size_t)g->ntensors; off += g->sizes[i], i++) {
        g->params[i] = g->param_mem + off;
        g->grads[i]  = g->grad_mem + off;
    }
    *gpt_p = g;
    return 0;
}

static void gpt_acts_free(gpt_acts_t *a)
{
    if (a == NULL) {
        return;
    }
    float **f[] = {&a->encoded,  &a->ln1,      &a->ln1_mean, &a->ln1_rstd, &a->qkv,
                   &a->att,      &a->atty,     &a->res2,     &a->ln2,      &a->ln2_mean,
                   &a->ln2_rstd, &a->fch,      &a->fch_gelu, &a->res3,     &a->lnf,
                   &a->lnf_mean, &a->lnf_rstd, &a->probs,    &a->dres,     &a->dln,
                   &a->dwide,    &a->dwide2,   &a->dqkv,     &a->datty,    &a->datt};
    for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
        free(*f[i]);
    }
    free(a->inputs);
    free(a->targets);
    free(a);
}

void gpt_destroy(gpt_t *g)
{
    if (g == NULL) {
        return;
    }
    gpt_acts_free(g->acts);
    free(g->param_mem);
    free(g->grad_mem);
    free(g->sizes);
    free(g->params);
    free(g->grads);
    free(g);
}

void gpt_init_weights(gpt_t *g, uint64_t seed)
{
    rng_t rng;
    rng_seed(&rng, seed);
    float proj_std = 0.02f / sqrtf(2.0f * g->cfg.layers); /* residual projections scaled down */
    for (int i = 0; i < g->ntensors; i++) {
        int   which = (i - 2) % GPT_NBLOCK_TENSORS;
        int   block = i >= 2 && i < g->ntensors - 2;
        float std   = 0.02f;
        float fill  = 0.0f;
        if (i == g->ntensors - 2 || (block && (which == GPT_LN1W || which == GPT_LN2W))) {
            fill = 1.0f, std = 0.0f;
        } else if (i == g->ntensors - 1 || (block && which != GPT_QKVW && which != GPT_ATTPROJW &&
                                            which != GPT_FCW && which != GPT_FCPROJW)) {
            std = 0.0f; /* biases and LayerNorm shifts */
        } else if (block && (which == GPT_ATTPROJW || which == GPT_FCPROJW)) {
            std = proj_std;
        }
        for (size_t k = 0; k < g->sizes[i]; k++) {
            g->params[i][k] = std > 0.0f ? std * rng_normal(&rng) : fill;
        }
    }
}

#define ACT(_field, _count)                                                                        \
    do {                                                                                           \
        a->_field = calloc((_count), sizeof(float));                                               \
        if (a->_field == NULL) {                                                                   \
            goto fail;                                                                             \
        }                                                                                          \
    } while (0)

static int gpt_acts_alloc(gpt_t *g, int B, int T)
{
    if (g->acts != NULL && g->batch == B && g->seqlen == T) {
        return 0;
    }
    gpt_acts_free(g->acts);
    g->acts       = NULL;
    gpt_acts_t *a = calloc(1, sizeof(*a));
    if (a == NULL) {
        return -1;
    }
    size_t N = (size_t)B * T, C = g->cfg.channels, L = g->cfg.layers, H = g->cfg.heads;
    size_t V = g->cfg.vocab;
    ACT(encoded, N * C);
    ACT(ln1, L * N * C);
    ACT(ln1_mean, L * N);
    ACT(ln1_rstd, L * N);
    ACT(qkv, L * N * 3 * C);
    ACT(att, L * B * H * T * T);
    ACT(atty, L * N * C);
    ACT(res2, L * N * C);
    ACT(ln2, L * N * C);
    ACT(ln2_mean, L * N);
    ACT(ln2_rstd, L * N);
    ACT(fch, L * N * 4 * C);
    ACT(fch_gelu, L * N * 4 * C);
    ACT(res3, L * N * C);
    ACT(lnf, N * C);
    ACT(lnf_mean, N);
    ACT(lnf_rstd, N);
    ACT(probs, N * V);
    ACT(dres, N * C);
    ACT(dln, N * C);
    ACT(dwide, N * 4 * C);
    ACT(dwide2, N * 4 * C);
    ACT(dqkv, N * 3 * C);
    ACT(datty, N * C);
    ACT(datt, T);
    a->inputs  = malloc(N);
    a->targets = malloc(N);
    if (a->inputs == NULL || a->targets == NULL) {
        goto fail;
    }
    g->acts = a, g->batch = B, g->seqlen = T;
    return 0;
fail:
    gpt_acts_free(a);
    return -1;
}

float gpt_forward(gpt_t *g, const uint8_t *inputs, const uint8_t *targets, int B, int T)
{
    if (T > g->cfg.ctx || gpt_acts_alloc(g, B, T) != 0) {
        return -1.0f;
    }
    gpt_acts_t *a = g->acts;
    int         C = g->cfg.channels, H = g->cfg.heads, N = B * T, V = g->cfg.vocab;
    memcpy(a->inputs, inputs, (size_t)N);
    if (targets != NULL) {
        memcpy(a->targets, targets, (size_t)N);
    }
    gpt_use(g, 0, 1);             /* embeddings, and the tied head at the end */
    for (int n = 0; n < N; n++) { /* token + position embedding */
        const float *te = g->params[0] + (size_t)inputs[n] * C;
        const float *pe = g->params[1] + (size_t)(n % T) * C;
        for (int i = 0; i < C; i++) {
            a->encoded[(size_t)n * C + i] = te[i] + pe[i];
        }
    }
    const float *x = a->encoded;
    for (int l = 0; l < g->cfg.layers; l++) {
        gpt_use(g, l + 1, 1);
        float **p = &g->params[gpt_tensor_index(g, l, 0)];
        size_t  o = (size_t)l * N * C;
        layer_norm_fwd(a->ln1 + o, a->ln1_mean + (size_t)l * N, a->ln1_rstd + (size_t)l * N, x,
                       p[GPT_LN1W], p[GPT_LN1B], N, C);
        float *qkv = a->qkv + 3 * o, *att = a->att + (size_t)l * B * H * T * T;
        linear_fwd(qkv, a->ln1 + o, p[GPT_QKVW], p[GPT_QKVB], N, C, 3 * C);
        attention_fwd(a->atty + o, att, qkv, B, T, C, H);
        linear_fwd(a->res2 + o, a->atty + o, p[GPT_ATTPROJW], p[GPT_ATTPROJB], N, C, C);
        for (size_t i = 0; i < (size_t)N * C; i++) {
            a->res2[o + i] += x[i];
        }
        layer_norm_fwd(a->ln2 + o, a->ln2_mean + (size_t)l * N, a->ln2_rstd + (size_t)l * N,
                       a->res2 + o, p[GPT_LN2W], p[GPT_LN2B], N, C);
        linear_fwd(a->fch + 4 * o, a->ln2 + o, p[GPT_FCW], p[GPT_FCB], N, C, 4 * C);
        gelu_fwd(a->fch_gelu + 4 * o, a->fch + 4 * o, (size_t)N * 4 * C);
        linear_fwd(a->res3 + o, a->fch_gelu + 4 * o, p[GPT_FCPROJW], p[GPT_FCPROJB], N, 4 * C, C);
        for (size_t i = 0; i < (size_t)N * C; i++) {
            a->res3[o + i] += a->res2[o + i];
        }
        x = a->res3 + o;
        gpt_use(g, l + 1, 0);
    }
    gpt_use(g, g->cfg.layers + 1, 1);
    layer_norm_fwd(a->lnf, a->lnf_mean, a->lnf_rstd, x, g->params[g->ntensors - 2],
                   g->params[g->ntensors - 1], N, C);
    linear_fwd(a->probs, a->lnf, g->params[0], NULL, N, C, V); /* tied head */
    gpt_use(g, g->cfg.layers + 1, 0);
    gpt_use(g, 0, 0);
    double loss = softmax_xent_fwd(a->probs, targets, N, V);
    return targets != NULL ? (float)(loss / N) : 0.0f;
}

void gpt_backward(gpt_t *g, float scale, gpt_ready_fn_t ready, void *arg)
{
    gpt_acts_t *a = g->acts;
    int         B = g->batch, T = g->seqlen, N = B * T;
    int         C = g->cfg.channels, H = g->cfg.heads, V = g->cfg.vocab, L = g->cfg.layers;
    float      *dlogits = a->probs; /* reused in place: d(mean loss)/d(logits) */
    for (int n = 0; n < N; n++) {
        float *d = dlogits + (size_t)n * V;
        d[a->targets[n]] -= 1.0f;
        for (int v = 0; v < V; v++) {
            d[v] *= scale / N;
        }
    }
    gpt_use(g, 0, 1);
    linear_bwd(a->dln, g->grads[0], NULL, dlogits, a->lnf, g->params[0], N, C, V);
    gpt_use(g, 0, 0); /* the embeddings' backward needs no parameters */
    gpt_use(g, L + 1, 1);
    memset(a->dres, 0, (size_t)N * C * sizeof(float));
    const float *xlast = L > 0 ? a->res3 + (size_t)(L - 1) * N * C : a->encoded;
    layer_norm_bwd(a->dres, g->grads[g->ntensors - 2], g->grads[g->ntensors - 1], a->dln, xlast,
                   g->params[g->ntensors - 2], a->lnf_mean, a->lnf_rstd, N, C);
    gpt_use(g, L + 1, 0);
    if (ready != NULL) {
        ready(arg, g->ntensors - 2, 2);
    }
    for (int l = L - 1; l >= 0; l--) {
        gpt_use(g, l + 1, 1);
        int          ti = gpt_tensor_index(g, l, 0);
        float      **p = &g->params[ti], **d = &g->grads[ti];
        size_t       o = (size_t)l * N * C;
        const float *x = l == 0 ? a->encoded : a->res3 + o - (size_t)N * C;
        /* MLP branch: dres currently holds d(res3) */
        linear_bwd(a->dwide, d[GPT_FCPROJW], d[GPT_FCPROJB], a->dres, a->fch_gelu + 4 * o,
                   p[GPT_FCPROJW], N, 4 * C, C);
        gelu_bwd(a->dwide2, a->fch + 4 * o, a->dwide, (size_t)N * 4 * C);
        linear_bwd(a->dln, d[GPT_FCW], d[GPT_FCB], a->dwide2, a->ln2 + o, p[GPT_FCW], N, C, 4 * C);
        layer_norm_bwd(a->dres, d[GPT_LN2W], d[GPT_LN2B], a->dln, a->res2 + o, p[GPT_LN2W],
                       a->ln2_mean + (size_t)l * N, a->ln2_rstd + (size_t)l * N, N, C);
        /* attention branch: dres now holds d(res2) */
        linear_bwd(a->datty, d[GPT_ATTPROJW], d[GPT_ATTPROJB], a->dres, a->atty + o,
                   p[GPT_ATTPROJW], N, C, C);
        attention_bwd(a->dqkv, a->datt, a->datty, a->qkv + 3 * o,
                      a->att + (size_t)l * B * H * T * T, B, T, C, H);
        linear_bwd(a->dln, d[GPT_QKVW], d[GPT_QKVB], a->dqkv, a->ln1 + o, p[GPT_QKVW], N, C, 3 * C);
        layer_norm_bwd(a->dres, d[GPT_LN1W], d[GPT_LN1B], a->dln, x, p[GPT_LN1W],
                       a->ln1_mean + (size_t)l * N, a->ln1_rstd + (size_t)l * N, N, C);
        gpt_use(g, l + 1, 0);
        if (ready != NULL) {
            ready(arg, ti, GPT_NBLOCK_TENSORS);
        }
    }
    for (int n = 0; n < N; n++) { /* embeddings: dres holds d(encoded) */
        float *dte = g->grads[0] + (size_t)a->inputs[n] * C;
        float *dpe = g->grads[1] + (size_t)(n % T) * C;
        for (int i = 0; i < C; i++) {
            dte[i] += a->dres[(size_t)n * C + i];
            dpe[i] += a->dres[(size_t)n * C + i];
        }
    }
    if (ready != NULL) {
        ready(arg, 0, 2);
    }
}

const float *gpt_probs(const gpt_t *g, int t)
{
    return g->acts->probs + (size_t)t * g->cfg.vocab;
}
