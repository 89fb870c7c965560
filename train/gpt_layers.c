/* SPDX-License-Identifier: MIT */
/*
 * gpt_layers.c -- the layers of ctrain's GPT, forward and backward, on fp32 row-major arrays:
 * LayerNorm, linear (y = x W^T + b, W stored [out][in] as in PyTorch), GELU (tanh form),
 * causal multi-head attention, softmax + cross-entropy. Backward functions add into weight
 * gradients (so micro-batches accumulate) and overwrite input gradients unless told otherwise.
 */
#include "gpt_layers.h"

#include <math.h>
#include <string.h>

void layer_norm_fwd(float *out, float *mean, float *rstd, const float *inp, const float *w,
                    const float *b, int N, int C)
{
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C;
        float        m = 0.0f, v = 0.0f;
        for (int i = 0; i < C; i++) {
            m += x[i];
        }
        m /= C;
        for (int i = 0; i < C; i++) {
            float d = x[i] - m;
            v += d * d;
        }
        v /= C; /* biased variance, as torch.nn.LayerNorm */
        float  r = 1.0f / sqrtf(v + 1e-5f);
        float *o = out + (size_t)n * C;
        for (int i = 0; i < C; i++) {
            o[i] = (x[i] - m) * r * w[i] + b[i];
        }
        mean[n] = m;
        rstd[n] = r;
    }
}

/* dinp is accumulated into (it is the residual stream's gradient). */
void layer_norm_bwd(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                    const float *w, const float *mean, const float *rstd, int N, int C)
{
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * C, *dy = dout + (size_t)n * C;
        float        m = mean[n], r = rstd[n];
        float        sum_dn = 0.0f, sum_dn_n = 0.0f;
        for (int i = 0; i < C; i++) {
            float nrm = (x[i] - m) * r, dn = dy[i] * w[i];
            sum_dn += dn;
            sum_dn_n += dn * nrm;
        }
        sum_dn /= C;
        sum_dn_n /= C;
        float *dx = dinp + (size_t)n * C;
        for (int i = 0; i < C; i++) {
            float nrm = (x[i] - m) * r, dn = dy[i] * w[i];
            dx[i] += r * (dn - sum_dn - nrm * sum_dn_n);
            dw[i] += dy[i] * nrm;
            db[i] += dy[i];
        }
    }
}

void linear_fwd(float *out, const float *inp, const float *w, const float *b, int N, int Cin,
                int Cout)
{
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *x = inp + (size_t)n * Cin;
        float       *y = out + (size_t)n * Cout;
        for (int o = 0; o < Cout; o++) {
            const float *wr  = w + (size_t)o * Cin;
            float        acc = b != NULL ? b[o] : 0.0f;
            for (int i = 0; i < Cin; i++) {
                acc += x[i] * wr[i];
            }
            y[o] = acc;
        }
    }
}

/* dinp overwritten (may be NULL), dw and db accumulated (db may be NULL). */
void linear_bwd(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                const float *w, int N, int Cin, int Cout)
{
    if (dinp != NULL) {
        memset(dinp, 0, (size_t)N * Cin * sizeof(float));
#pragma omp parallel for schedule(static)
        for (int n = 0; n < N; n++) {
            float       *dx = dinp + (size_t)n * Cin;
            const float *dy = dout + (size_t)n * Cout;
            for (int o = 0; o < Cout; o++) {
                const float *wr = w + (size_t)o * Cin;
                float        g  = dy[o];
                for (int i = 0; i < Cin; i++) {
                    dx[i] += g * wr[i];
                }
            }
        }
    }
#pragma omp parallel for schedule(static)
    for (int o = 0; o < Cout; o++) {
        float *dwr = dw + (size_t)o * Cin;
        float  gb  = 0.0f;
        for (int n = 0; n < N; n++) {
            const float *x = inp + (size_t)n * Cin;
            float        g = dout[(size_t)n * Cout + o];
            gb += g;
            for (int i = 0; i < Cin; i++) {
                dwr[i] += g * x[i];
            }
        }
        if (db != NULL) {
            db[o] += gb;
        }
    }
}

#define GELU_S 0.7978845608028654f /* sqrt(2 / pi) */

void gelu_fwd(float *out, const float *inp, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        out[i]  = 0.5f * x * (1.0f + tanhf(GELU_S * (x + 0.044715f * x * x * x)));
    }
}

void gelu_bwd(float *dinp, const float *inp, const float *dout, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float x  = inp[i];
        float th = tanhf(GELU_S * (x + 0.044715f * x * x * x));
        float d  = 0.5f * (1.0f + th) +
                  0.5f * x * (1.0f - th * th) * GELU_S * (1.0f + 3.0f * 0.044715f * x * x);
        dinp[i] = d * dout[i];
    }
}

/* qkv: [B][T][3C] (q, k, v); att: [B][H][T][T] softmax weights; out: [B][T][C]. */
void attention_fwd(float *out, float *att, const float *qkv, int B, int T, int C, int H)
{
    int   hs    = C / H;
    float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < H; h++) {
            for (int t = 0; t < T; t++) {
                const float *q   = qkv + ((size_t)b * T + t) * 3 * C + h * hs;
                float       *a   = att + (((size_t)b * H + h) * T + t) * T;
                float        max = -INFINITY;
                for (int u = 0; u <= t; u++) {
                    const float *k = qkv + ((size_t)b * T + u) * 3 * C + C + h * hs;
                    float        s = 0.0f;
                    for (int i = 0; i < hs; i++) {
                        s += q[i] * k[i];
                    }
                    a[u] = s * scale;
                    max  = a[u] > max ? a[u] : max;
                }
                float sum = 0.0f;
                for (int u = 0; u <= t; u++) {
                    a[u] = expf(a[u] - max);
                    sum += a[u];
                }
                for (int u = 0; u < T; u++) {
                    a[u] = u <= t ? a[u] / sum : 0.0f;
                }
                float *y = out + ((size_t)b * T + t) * C + h * hs;
                memset(y, 0, hs * sizeof(float));
                for (int u = 0; u <= t; u++) {
                    const float *v = qkv + ((size_t)b * T + u) * 3 * C + 2 * C + h * hs;
                    for (int i = 0; i < hs; i++) {
                        y[i] += a[u] * v[i];
                    }
                }
            }
        }
    }
}

/* dqkv overwritten; datt is scratch of T floats. */
void attention_bwd(float *dqkv, float *datt, const float *dout, const float *qkv, const float *att,
                   int B, int T, int C, int H)
{
    int   hs    = C / H;
    float scale = 1.0f / sqrtf((float)hs);
    memset(dqkv, 0, (size_t)B * T * 3 * C * sizeof(float));
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < H; h++) {
            for (int t = 0; t < T; t++) {
                const float *a   = att + (((size_t)b * H + h) * T + t) * T;
                const float *dy  = dout + ((size_t)b * T + t) * C + h * hs;
                const float *q   = qkv + ((size_t)b * T + t) * 3 * C + h * hs;
                float       *dq  = dqkv + ((size_t)b * T + t) * 3 * C + h * hs;
                float        dot = 0.0f;
                for (int u = 0; u <= t; u++) {
                    const float *v  = qkv + ((size_t)b * T + u) * 3 * C + 2 * C + h * hs;
                    float       *dv = dqkv + ((size_t)b * T + u) * 3 * C + 2 * C + h * hs;
                    float        s  = 0.0f;
                    for (int i = 0; i < hs; i++) {
                        s += dy[i] * v[i];
                        dv[i] += a[u] * dy[i];
                    }
                    datt[u] = s;
                    dot += a[u] * s;
                }
                for (int u = 0; u <= t; u++) {
                    float        ds = a[u] * (datt[u] - dot) * scale; /* softmax backward */
                    const float *k  = qkv + ((size_t)b * T + u) * 3 * C + C + h * hs;
                    float       *dk = dqkv + ((size_t)b * T + u) * 3 * C + C + h * hs;
                    for (int i = 0; i < hs; i++) {
                        dq[i] += ds * k[i];
                        dk[i] += ds * q[i];
                    }
                }
            }
        }
    }
}

/* logits [N][V] become probabilities in place; returns the summed loss (targets may be NULL). */
double softmax_xent_fwd(float *probs, const uint8_t *targets, int N, int V)
{
    double loss = 0.0;
    for (int n = 0; n < N; n++) {
        float *p   = probs + (size_t)n * V;
        float  max = p[0], sum = 0.0f;
        for (int v = 1; v < V; v++) {
            max = p[v] > max ? p[v] : max;
        }
        for (int v = 0; v < V; v++) {
            p[v] = expf(p[v] - max);
            sum += p[v];
        }
        for (int v = 0; v < V; v++) {
            p[v] /= sum;
        }
        if (targets != NULL) {
            loss -= log(p[targets[n]]);
        }
    }
    return loss;
}
