/* SPDX-License-Identifier: MIT */
/*
 * precision.h -- ctrain's mixed precision, emulated on the CPU: fp32 master weights and
 * optimizer state; forward and backward read a copy of the weights rounded to bf16 or fp16
 * (round to nearest even; fp16 overflows to infinity), and gradients are rounded the same way
 * when backward finishes them, as if they had been computed in that format. fp16 scales the
 * loss dynamically, as PyTorch's GradScaler: gradients are computed for loss * scale; a step
 * whose averaged gradients hold an inf or NaN (equal on every rank, since they are averaged) is
 * skipped and the scale halved; after `window` good steps in a row the scale doubles.
 */
#ifndef CTRAIN_PRECISION_H
#define CTRAIN_PRECISION_H

#include <stddef.h>

typedef enum { PREC_FP32 = 0, PREC_BF16, PREC_FP16 } prec_t;

/* x rounded to the nearest value of the format (PREC_FP32: x). */
float prec_round(prec_t p, float x);
void  prec_round_array(prec_t p, float *x, size_t n);
/* 1 if every x[i] is finite. */
int prec_all_finite(const float *x, size_t n);

typedef struct {
    float scale;   /* fp16: the current loss scale; else 1 */
    int   window;  /* good steps before the scale doubles */
    int   good;    /* good steps since the last change */
    int   skipped; /* steps skipped so far */
} loss_scaler_t;

/* After the step's gradients were averaged: 1 if the step may go on (the gradients were
 * divided by the scale), 0 if it is skipped (the scale was halved). Updates the counters. */
int loss_scaler_update(loss_scaler_t *s, float *grads, size_t n);

#endif
