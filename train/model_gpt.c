/* SPDX-License-Identifier: MIT */
/*
 * model_gpt.c -- ctrain's GPT task: byte-level text (data.c) fed to the GPT (gpt.c) by global
 * sequence index; validation sequences evenly spaced over the held-out tail; sampling.
 */
#include "data.h"
#include "model.h"
#include "rng.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    model_t     base;
    text_data_t data;
    int         T;
    uint8_t    *seq, *in, *tg;
    int         cap; /* sequences in / tg hold */
} model_gpt_t;

static int gpt_task_buffers(model_gpt_t *g, int B)
{
    if (B <= g->cap) {
        return 0;
    }
    free(g->in), free(g->tg);
    g->in  = malloc((size_t)B * g->T);
    g->tg  = malloc((size_t)B * g->T);
    g->cap = g->in != NULL && g->tg != NULL ? B : 0;
    return g->cap == B ? 0 : -1;
}

static float gpt_task_train(model_t *m, uint64_t g0, int B, float scale, gpt_ready_fn_t ready,
                            void *arg)
{
    model_gpt_t *g = (model_gpt_t *)m;
    int          T = g->T;
    if (gpt_task_buffers(g, B) != 0) {
        return -1.0f;
    }
    for (int b = 0; b < B; b++) {
        text_data_train_seq(&g->data, g0 + (uint64_t)b, T, g->seq);
        memcpy(g->in + (size_t)b * T, g->seq, T);
        memcpy(g->tg + (size_t)b * T, g->seq + 1, T);
    }
    m->last_in = g->in, m->last_tg = g->tg;
    float loss = gpt_forward(m->gpt, g->in, g->tg, B, T);
    if (loss < 0.0f) {
        return -1.0f; /* activations could not be allocated */
    }
    gpt_backward(m->gpt, scale, ready, arg);
    return loss;
}

static double gpt_task_val(model_t *m, int j, int n, int *correct_p)
{
    model_gpt_t *g = (model_gpt_t *)m;
    text_data_val_seq(&g->data, j, n, g->T, g->seq);
    *correct_p = 0;
    return (double)gpt_forward(m->gpt, g->seq, g->seq + 1, 1, g->T) * g->T;
}

static void gpt_task_destroy(model_t *m)
{
    model_gpt_t *g = (model_gpt_t *)m;
    gpt_destroy(m->gpt);
    text_data_free(&g->data);
    free(g->seq), free(g->in), free(g->tg);
    free(g);
}

int model_gpt_create(const ctrain_opts_t *o, model_t **m_p, char *err, size_t errlen)
{
    model_gpt_t *g = calloc(1, sizeof(*g));
    if (g == NULL || (g->seq = malloc((size_t)o->seqlen + 1)) == NULL) {
        snprintf(err, errlen, "out of memory");
        free(g);
        return -1;
    }
    g->T = o->seqlen;
    if (text_data_load(&g->data, o->data_path, o->seqlen, o->seed, err, errlen) != 0) {
        free(g->seq), free(g);
        return -1;
    }
    gpt_config_t mc = {.vocab    = 256,
                       .ctx      = o->seqlen,
                       .layers   = o->layers,
                       .heads    = o->heads,
                       .channels = o->channels};
    model_t     *m  = &g->base;
    if (gpt_create(&mc, &m->gpt) != 0) {
        snprintf(err, errlen, "cannot build the model (out of memory?)");
        text_data_free(&g->data);
        free(g->seq), free(g);
        return -1;
    }
    gpt_init_weights(m->gpt, o->seed);
    gpt_t *t    = m->gpt;
    m->ntensors = t->ntensors, m->sizes = t->sizes, m->params = t->params, m->grads = t->grads;
    m->param_mem = t->param_mem, m->grad_mem = t->grad_mem, m->nparams = t->nparams;
    m->units       = o->seqlen;
    m->train_micro = gpt_task_train;
    m->val_item    = gpt_task_val;
    m->destroy     = gpt_task_destroy;
    snprintf(m->desc, sizeof(m->desc),
             "gpt %d layers, %d channels, %d heads, ctx %d: %zu parameters; data %s (%zu train / "
             "%zu val bytes)",
             o->layers, o->channels, o->heads, o->seqlen, t->nparams, o->data_path, g->data.ntrain,
             g->data.len - g->data.ntrain);
    *m_p = m;
    return 0;
}

void model_gpt_sample(model_t *m, int nbytes, uint64_t seed)
{
    model_gpt_t *g   = (model_gpt_t *)m;
    gpt_t       *gpt = m->gpt;
    int          T = gpt->cfg.ctx, len = 1;
    uint8_t     *buf = calloc((size_t)T, 1);
    rng_t        rng;
    if (buf == NULL) {
        return;
    }
    rng_seed(&rng, seed ^ 0x5a5a);
    buf[0] = g->data.bytes[g->data.ntrain]; /* prompt: the first validation byte */
    printf("sample: %c", buf[0]);
    for (int k = 0; k < nbytes; k++) {
        int start = len > T ? len - T : 0, n = len - start;
        gpt_forward(gpt, buf + start, NULL, 1, n);
        const float *p = gpt_probs(gpt, n - 1);
        float        u = rng_uniform(&rng), c = 0.0f;
        int          next = gpt->cfg.vocab - 1;
        for (int v = 0; v < gpt->cfg.vocab; v++) {
            c += p[v];
            if (u <= c) {
                next = v;
                break;
            }
        }
        if (len == T) {
            memmove(buf, buf + 1, (size_t)T - 1);
            len--;
        }
        buf[len++] = (uint8_t)next;
        putchar(next);
    }
    printf("\n");
    free(buf);
}
