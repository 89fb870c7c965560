/* SPDX-License-Identifier: MIT */
/*
 * gpt_layers.h -- forward and backward of the layers ctrain's models are made of (fp32, CPU).
 * Shapes are given per function in gpt_layers.c; N is the number of rows (batch x positions).
 */
#ifndef CTRAIN_GPT_LAYERS_H
#define CTRAIN_GPT_LAYERS_H

#include <stddef.h>
#include <stdint.h>

void layer_norm_fwd(float *out, float *mean, float *rstd, const float *inp, const float *w,
                    const float *b, int N, int C);
void layer_norm_bwd(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                    const float *w, const float *mean, const float *rstd, int N, int C);
void linear_fwd(float *out, const float *inp, const float *w, const float *b, int N, int Cin,
                int Cout);
void linear_bwd(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                const float *w, int N, int Cin, int Cout);
void gelu_fwd(float *out, const float *inp, size_t n);
void gelu_bwd(float *dinp, const float *inp, const float *dout, size_t n);
void attention_fwd(float *out, float *att, const float *qkv, int B, int T, int C, int H);
void attention_bwd(float *dqkv, float *datt, const float *dout, const float *qkv, const float *att,
                   int B, int T, int C, int H);
double softmax_xent_fwd(float *probs, const uint8_t *targets, int N, int V);

#endif
