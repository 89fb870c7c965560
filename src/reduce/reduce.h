/* SPDX-License-Identifier: MIT */
/*
 * Reduction kernels: dst = op(a, b) elementwise for every dtype x op, written as plain loops the
 * compiler vectorises (restrict-free aliasing is allowed: dst may equal a or b). fp16 and bf16
 * are widened to fp32, combined, and rounded back to nearest even. No state, no allocation.
 */
#ifndef COLL_REDUCE_H
#define COLL_REDUCE_H

#include <stddef.h>
#include <stdint.h>
#include "coll.h"

/* dst[i] = op(a[i], b[i]) for i < count. op is SUM, PROD, MIN or MAX (AVG: use SUM, then
 * coll_reduce_div). dst may alias a and/or b exactly (same pointer), never partially. */
void coll_reduce3(coll_dtype_t dtype, coll_redop_t op, void *dst, const void *a, const void *b,
                  size_t count);

/* buf[i] = buf[i] / n: the single division of AVG. Integers divide with truncation toward
 * zero; floats divide in their own precision (fp16/bf16 through fp32). */
void coll_reduce_div(coll_dtype_t dtype, void *buf, size_t count, int n);

/* copy.c: memcpy with non-temporal stores (where the target has them; memcpy elsewhere and
 * below 4 KiB), fenced: for destinations larger than the caches. */
void coll_copy_stream(void *dst, const void *src, size_t n);
/* Its loop alone: n bytes (a multiple of 16) into the 16-byte aligned dst, unfenced. */
void coll_copy_stream_lines(void *dst, const void *src, size_t n);

/* reduce_nt.c: out[k][i] = in[0][i] op in[1][i] op ... op in[nin - 1][i] (in that order, the same
 * bits as coll_reduce3 chained) for every k < nout and i < count, written with non-temporal
 * stores: for outputs too large to stay in the cache. AVG sums, then divides by nin. An output
 * may be one of the inputs exactly (each step reads its elements of every input before it
 * writes them); every output must be 16-byte aligned (coll_reduce_nt_fits). Fenced. */
void coll_reduce_nt(coll_dtype_t dtype, coll_redop_t op, const void *const *in, int nin,
                    void *const *out, int nout, size_t count);
int  coll_reduce_nt_fits(void *const *out, int nout);

/* Scalar conversions (round to nearest even; NaN stays NaN, overflow goes to infinity). */
float    coll_half_to_float(uint16_t h);
uint16_t coll_float_to_half(float f);
float    coll_bf16_to_float(uint16_t b);
uint16_t coll_float_to_bf16(float f);

#endif
