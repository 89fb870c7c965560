/* SPDX-License-Identifier: MIT */
/*
 * A small deep linear network for the training-layer tests: L layers h' = W h + b with a
 * squared loss, forward and backward over a batch, and a hook called after each layer's
 * gradients are final (where a test reports them ready). Data are integer-valued or uniform.
 */
#ifndef TRAIN_MODEL_H
#define TRAIN_MODEL_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int    nlayers;
    int    dim;
    float *w[16]; /* w[l]: dim x dim, row-major */
    float *b[16]; /* b[l]: dim */
} tm_model_t;

/* Called after layer l's gradients (gw, gb) are complete, in order L-1 .. 0. */
typedef void (*tm_layer_done_fn_t)(int layer, void *arg);

/* Fill n values from seed: integer-valued in {-1, 0, 1} if ints, else uniform in [-1, 1). */
void tm_fill(float *v, size_t n, uint64_t seed, int ints);

/* Forward and backward of samples x[0..batch) (dim each) with targets t; gradients of
 * scale * sum of 0.5 |out - t|^2 are added into gw[l], gb[l]. */
void tm_backward(const tm_model_t *m, const float *x, const float *t, int batch, float scale,
                 float **gw, float **gb, tm_layer_done_fn_t done, void *arg);

#endif
