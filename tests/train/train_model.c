/* SPDX-License-Identifier: MIT */
/* The deep linear network of train_model.h (reference gradients for the training tests). */
#include "train_model.h"

#include <stdlib.h>
#include <string.h>

void tm_fill(float *v, size_t n, uint64_t seed, int ints)
{
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        v[i] = ints ? (float)((int)(s % 3) - 1)
                    : (float)((double)(s >> 11) / 4503599627370496.0 - 1.0);
    }
}

void tm_backward(const tm_model_t *m, const float *x, const float *t, int batch, float scale,
                 float **gw, float **gb, tm_layer_done_fn_t done, void *arg)
{
    int    L = m->nlayers, d = m->dim;
    float *h  = calloc((size_t)(L + 1) * (size_t)batch * (size_t)d, sizeof(float));
    float *g  = calloc((size_t)batch * (size_t)d, sizeof(float));
    float *gp = calloc((size_t)d, sizeof(float));

    memcpy(h, x, (size_t)batch * (size_t)d * sizeof(float));
    for (int l = 0; l < L; l++) {
        for (int s = 0; s < batch; s++) {
            const float *in  = h + ((size_t)l * (size_t)batch + (size_t)s) * (size_t)d;
            float       *out = h + ((size_t)(l + 1) * (size_t)batch + (size_t)s) * (size_t)d;
            for (int i = 0; i < d; i++) {
                float acc = m->b[l][i];
                for (int j = 0; j < d; j++) {
                    acc += m->w[l][i * d + j] * in[j];
                }
                out[i] = acc;
            }
        }
    }
    for (int s = 0; s < batch; s++) {
        for (int i = 0; i < d; i++) {
            g[s * d + i] =
                h[((size_t)L * (size_t)batch + (size_t)s) * (size_t)d + (size_t)i] - t[s * d + i];
        }
    }
    for (int l = L - 1; l >= 0; l--) {
        for (int s = 0; s < batch; s++) {
            const float *in = h + ((size_t)l * (size_t)batch + (size_t)s) * (size_t)d;
            float       *gs = g + (size_t)s * (size_t)d;
            for (int i = 0; i < d; i++) {
                gb[l][i] += scale * gs[i];
                for (int j = 0; j < d; j++) {
                    gw[l][i * d + j] += scale * gs[i] * in[j];
                }
            }
            for (int j = 0; j < d; j++) {
                float acc = 0;
                for (int i = 0; i < d; i++) {
                    acc += m->w[l][i * d + j] * gs[i];
                }
                gp[j] = acc;
            }
            memcpy(gs, gp, (size_t)d * sizeof(float));
        }
        if (done != NULL) {
            done(l, arg);
        }
    }
    free(h);
    free(g);
    free(gp);
}
