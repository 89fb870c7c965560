/* SPDX-License-Identifier: MIT */
/*
 * model_mlp.c -- ctrain's MLP task: Fashion-MNIST (Debian's dataset-fashion-mnist, IDX files
 * gzipped, read with zlib) classified by 784 -> hidden (ReLU) -> 10 with softmax cross-entropy.
 * Training images are drawn by hashed global index from the 60000; validation uses the 10000
 * test images. Pixels are scaled to [0, 1].
 */
#include "gpt_layers.h"
#include "model.h"
#include "rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

enum { MLP_IN = 784, MLP_OUT = 10 };

typedef struct {
    model_t  base;
    uint8_t *train_x, *train_y, *test_x, *test_y;
    int      ntrain, ntest, H, cap;
    uint64_t seed;
    float   *x, *h, *hr, *logits, *dh; /* activations for cap samples */
    uint8_t *y;
} model_mlp_t;

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Read one gzipped IDX file: magic 0x801 (labels) or 0x803 (28x28 images). */
static uint8_t *idx_load(const char *dir, const char *name, uint32_t magic, int *n_p, char *err,
                         size_t errlen)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    gzFile f = gzopen(path, "rb");
    if (f == NULL) {
        snprintf(err, errlen, "cannot open %s (Debian: apt-get install dataset-fashion-mnist)",
                 path);
        return NULL;
    }
    uint8_t hdr[16];
    int     hlen = magic == 0x803 ? 16 : 8;
    if (gzread(f, hdr, hlen) != hlen || be32(hdr) != magic ||
        (magic == 0x803 && (be32(hdr + 8) != 28 || be32(hdr + 12) != 28))) {
        snprintf(err, errlen, "%s: not an IDX file of the expected kind", path);
        gzclose(f);
        return NULL;
    }
    uint32_t n   = be32(hdr + 4);
    size_t   per = magic == 0x803 ? MLP_IN : 1;
    uint8_t *buf = n > 0 && n <= 1000000 ? malloc((size_t)n * per) : NULL;
    if (buf == NULL || gzread(f, buf, (unsigned)(n * per)) != (int)(n * per)) {
        snprintf(err, errlen, "%s: truncated or too large", path);
        free(buf);
        gzclose(f);
        return NULL;
    }
    gzclose(f);
    *n_p = (int)n;
    return buf;
}

static int mlp_buffers(model_mlp_t *g, int B)
{
    if (B <= g->cap) {
        return 0;
    }
    float **f[] = {&g->x, &g->h, &g->hr, &g->logits, &g->dh};
    size_t  w[] = {MLP_IN, g->H, g->H, MLP_OUT, g->H};
    for (int i = 0; i < 5; i++) {
        free(*f[i]);
        *f[i] = malloc((size_t)B * w[i] * sizeof(float));
    }
    free(g->y);
    g->y   = malloc((size_t)B);
    g->cap = B;
    for (int i = 0; i < 5; i++) {
        g->cap = *f[i] == NULL ? 0 : g->cap;
    }
    return g->cap == B && g->y != NULL ? 0 : -1;
}

/* Forward over B samples already in g->x / g->y; returns the summed loss. */
static double mlp_forward(model_mlp_t *g, int B)
{
    model_t *m = &g->base;
    linear_fwd(g->h, g->x, m->params[0], m->params[1], B, MLP_IN, g->H);
    for (size_t i = 0; i < (size_t)B * g->H; i++) {
        g->hr[i] = g->h[i] > 0.0f ? g->h[i] : 0.0f;
    }
    linear_fwd(g->logits, g->hr, m->params[2], m->params[3], B, g->H, MLP_OUT);
    return softmax_xent_fwd(g->logits, g->y, B, MLP_OUT);
}

static void mlp_load(model_mlp_t *g, const uint8_t *img, uint8_t label, int b)
{
    for (int i = 0; i < MLP_IN; i++) {
        g->x[(size_t)b * MLP_IN + i] = img[i] / 255.0f;
    }
    g->y[b] = label;
}

static float mlp_train(model_t *m, uint64_t g0, int B, float scale, gpt_ready_fn_t ready, void *arg)
{
    model_mlp_t *g = (model_mlp_t *)m;
    if (mlp_buffers(g, B) != 0) {
        return -1.0f;
    }
    for (int b = 0; b < B; b++) {
        uint64_t k = rng_mix(rng_mix(g->seed) ^ ((g0 + b) * 0x9e3779b97f4a7c15ULL + 1));
        k %= (uint64_t)g->ntrain;
        mlp_load(g, g->train_x + k * MLP_IN, g->train_y[k], b);
    }
    double loss = mlp_forward(g, B);
    float *dl   = g->logits; /* probabilities become d(loss)/d(logits) in place */
    for (int b = 0; b < B; b++) {
        dl[b * MLP_OUT + g->y[b]] -= 1.0f;
        for (int v = 0; v < MLP_OUT; v++) {
            dl[b * MLP_OUT + v] *= scale / B;
        }
    }
    linear_bwd(g->dh, m->grads[2], m->grads[3], dl, g->hr, m->params[2], B, g->H, MLP_OUT);
    if (ready != NULL) {
        ready(arg, 2, 2);
    }
    for (size_t i = 0; i < (size_t)B * g->H; i++) {
        g->dh[i] = g->h[i] > 0.0f ? g->dh[i] : 0.0f;
    }
    linear_bwd(NULL, m->grads[0], m->grads[1], g->dh, g->x, m->params[0], B, MLP_IN, g->H);
    if (ready != NULL) {
        ready(arg, 0, 2);
    }
    return (float)(loss / B);
}

static double mlp_val(model_t *m, int j, int n, int *correct_p)
{
    model_mlp_t *g = (model_mlp_t *)m;
    int          k = (int)((int64_t)j * g->ntest / n);
    mlp_buffers(g, 1);
    mlp_load(g, g->test_x + (size_t)k * MLP_IN, g->test_y[k], 0);
    double loss = mlp_forward(g, 1);
    int    best = 0;
    for (int v = 1; v < MLP_OUT; v++) {
        best = g->logits[v] > g->logits[best] ? v : best;
    }
    *correct_p = best == g->y[0];
    return loss;
}

static void mlp_destroy(model_t *m)
{
    model_mlp_t *g = (model_mlp_t *)m;
    free(g->train_x), free(g->train_y), free(g->test_x), free(g->test_y);
    free(g->x), free(g->h), free(g->hr), free(g->logits), free(g->dh), free(g->y);
    free(m->sizes), free(m->params), free(m->grads), free(m->param_mem), free(m->grad_mem);
    free(g);
}

int model_mlp_create(const ctrain_opts_t *o, model_t **m_p, char *err, size_t errlen)
{
    model_mlp_t *g  = calloc(1, sizeof(*g));
    model_t     *m  = &g->base;
    const char  *d  = o->data_path;
    int          n1 = 0, n2 = 0;
    if (g == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    g->H = o->channels, g->seed = o->seed;
    g->train_x = idx_load(d, "train-images-idx3-ubyte.gz", 0x803, &g->ntrain, err, errlen);
    g->train_y =
        g->train_x ? idx_load(d, "train-labels-idx1-ubyte.gz", 0x801, &n1, err, errlen) : NULL;
    g->test_x =
        g->train_y ? idx_load(d, "t10k-images-idx3-ubyte.gz", 0x803, &g->ntest, err, errlen) : NULL;
    g->test_y =
        g->test_x ? idx_load(d, "t10k-labels-idx1-ubyte.gz", 0x801, &n2, err, errlen) : NULL;
    if (g->test_y == NULL || n1 != g->ntrain || n2 != g->ntest) {
        if (g->test_y != NULL) {
            snprintf(err, errlen, "%s: image and label counts differ", d);
        }
        mlp_destroy(m);
        return -1;
    }
    size_t sz[4] = {(size_t)g->H * MLP_IN, (size_t)g->H, (size_t)MLP_OUT * g->H, MLP_OUT};
    m->ntensors  = 4;
    m->sizes     = malloc(sizeof(sz));
    m->params    = calloc(4, sizeof(float *));
    m->grads     = calloc(4, sizeof(float *));
    m->nparams   = sz[0] + sz[1] + sz[2] + sz[3];
    m->param_mem = calloc(m->nparams, sizeof(float));
    m->grad_mem  = calloc(m->nparams, sizeof(float));
    if (m->sizes == NULL || m->params == NULL || m->grads == NULL || m->param_mem == NULL ||
        m->grad_mem == NULL) {
        snprintf(err, errlen, "out of memory");
        mlp_destroy(m);
        return -1;
    }
    memcpy(m->sizes, sz, sizeof(sz));
    rng_t rng;
    rng_seed(&rng, o->seed);
    for (size_t i = 0, off = 0; i < 4; off += sz[i], i++) {
        m->params[i] = m->param_mem + off, m->grads[i] = m->grad_mem + off;
        float std = i % 2 == 0 ? sqrtf(2.0f / (i == 0 ? MLP_IN : (float)g->H)) : 0.0f; /* He */
        for (size_t k = 0; k < sz[i]; k++) {
            m->params[i][k] = std > 0.0f ? std * rng_normal(&rng) : 0.0f;
        }
    }
    m->units = 1, m->train_micro = mlp_train, m->val_item = mlp_val, m->destroy = mlp_destroy;
    snprintf(m->desc, sizeof(m->desc),
             "mlp 784-%d-10: %zu parameters; data %s (%d train / %d test images)", g->H, m->nparams,
             d, g->ntrain, g->ntest);
    *m_p = m;
    return 0;
}
