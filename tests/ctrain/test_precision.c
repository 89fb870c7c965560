/* SPDX-License-Identifier: MIT */
/*
 * test_precision.c -- ctrain's bf16/fp16 rounding (round to nearest, ties to even; fp16
 * subnormals and overflow) against values worked out by hand, and the dynamic loss scaler:
 * overflow halves the scale and skips, good steps unscale and double it after the window.
 */
#include "precision.h"

#include <math.h>
#include <stdio.h>

static int nfail;

static void expect(const char *what, float got, float want)
{
    if (!(got == want || (isnan(got) && isnan(want)))) {
        printf("FAIL: %s: got %.10g, expected %.10g\n", what, (double)got, (double)want);
        nfail++;
    }
}

int main(void)
{
    /* bf16: 8 bits of mantissa precision, spacing 2^-7 at 1 */
    expect("bf16 1", prec_round(PREC_BF16, 1.0f), 1.0f);
    expect("bf16 1/3", prec_round(PREC_BF16, 1.0f / 3.0f), 0.333984375f);
    expect("bf16 tie to even (down)", prec_round(PREC_BF16, 1.0f + ldexpf(1, -8)), 1.0f);
    expect("bf16 tie to even (up)", prec_round(PREC_BF16, 1.0f + 3 * ldexpf(1, -8)),
           1.0f + ldexpf(1, -6));
    expect("bf16 -2.75", prec_round(PREC_BF16, -2.75f), -2.75f);
    expect("bf16 inf", prec_round(PREC_BF16, INFINITY), INFINITY);
    /* fp16: 11 bits, largest 65504, subnormals of 2^-24 */
    expect("fp16 1/3", prec_round(PREC_FP16, 1.0f / 3.0f), 0.333251953125f);
    expect("fp16 65504", prec_round(PREC_FP16, 65504.0f), 65504.0f);
    expect("fp16 65519", prec_round(PREC_FP16, 65519.0f), 65504.0f);
    expect("fp16 65520 overflows", prec_round(PREC_FP16, 65520.0f), INFINITY);
    expect("fp16 -1e6 overflows", prec_round(PREC_FP16, -1e6f), -INFINITY);
    expect("fp16 2^-24", prec_round(PREC_FP16, ldexpf(1, -24)), ldexpf(1, -24));
    expect("fp16 2^-25 ties to 0", prec_round(PREC_FP16, ldexpf(1, -25)), 0.0f);
    expect("fp16 3*2^-25 ties to 2^-23", prec_round(PREC_FP16, 3 * ldexpf(1, -25)), ldexpf(1, -23));
    expect("fp16 1+2^-11 ties to 1", prec_round(PREC_FP16, 1.0f + ldexpf(1, -11)), 1.0f);
    expect("fp32 unchanged", prec_round(PREC_FP32, 1.0f / 3.0f), 1.0f / 3.0f);
    /* the loss scaler */
    loss_scaler_t s    = {1024.0f, 2, 0, 0};
    float         g[3] = {2048.0f, INFINITY, 0.0f};
    if (loss_scaler_update(&s, g, 3) != 0 || s.scale != 512.0f || s.skipped != 1) {
        printf("FAIL: an inf did not skip and halve (scale %g)\n", (double)s.scale);
        nfail++;
    }
    g[1] = 512.0f;
    if (loss_scaler_update(&s, g, 3) != 1 || g[0] != 4.0f || g[1] != 1.0f || s.scale != 512.0f) {
        printf("FAIL: a good step was not unscaled (g0 %g, scale %g)\n", (double)g[0],
               (double)s.scale);
        nfail++;
    }
    if (loss_scaler_update(&s, g, 3) != 1 || s.scale != 1024.0f || s.good != 0) {
        printf("FAIL: the scale did not double after the window (scale %g)\n", (double)s.scale);
        nfail++;
    }
    printf("%s: %d failure(s)\n", nfail ? "FAIL" : "PASS", nfail);
    return nfail != 0;
}
