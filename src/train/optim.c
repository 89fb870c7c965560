/* SPDX-License-Identifier: MIT */
/*
 * The optimizers ZeRO runs on each rank's shard: SGD with momentum and AdamW, both with
 * decoupled weight decay. Element-wise, so a shard updates exactly as the full tensor would.
 */
#include "config.h"
#include "train/zero.h"

#include <math.h>

void coll_train_optim_update(const coll_optim_config_t *c, uint64_t step, float *p, const float *g,
                             float **state, size_t n)
{
    float decay = 1.0f - c->lr * c->weight_decay;
    if (c->kind == COLL_OPTIM_SGD) {
        float *buf = state[0];
        for (size_t i = 0; i < n; i++) {
            buf[i] = c->momentum * buf[i] + g[i];
            p[i]   = p[i] * decay - c->lr * buf[i];
        }
        return;
    }
    /* AdamW: bias corrections folded into the step size and epsilon */
    float *m = state[0], *v = state[1];
    double bc1 = 1.0 - pow((double)c->beta1, (double)step);
    double bc2 = 1.0 - pow((double)c->beta2, (double)step);
    float  lr  = (float)((double)c->lr / bc1);
    float  sq2 = (float)sqrt(bc2);
    for (size_t i = 0; i < n; i++) {
        m[i] = c->beta1 * m[i] + (1.0f - c->beta1) * g[i];
        v[i] = c->beta2 * v[i] + (1.0f - c->beta2) * g[i] * g[i];
        p[i] = p[i] * decay - lr * m[i] / (sqrtf(v[i]) / sq2 + c->eps);
    }
}
