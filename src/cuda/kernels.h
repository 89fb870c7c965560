/* SPDX-License-Identifier: MIT */
/*
 * Reduction kernels on device memory, callable from C. Each function only enqueues on stream (a
 * cudaStream_t; NULL is the legacy default stream) and returns 0, or the launch's cudaError_t.
 * Results are bit-identical with the host kernels of src/reduce/: integers wrap, MIN/MAX keep a
 * NaN operand, fp16/bf16 are widened to fp32 and rounded once to nearest even.
 */
#ifndef COLL_CUDA_KERNELS_H
#define COLL_CUDA_KERNELS_H

#include <stddef.h>
#include "coll.h"

#ifdef __cplusplus
extern "C" {
#endif

#define COLL_CUDA_MAX_SRCS 16

/* dst[i] = op(a[i], b[i]) for i < n; op is SUM, PROD, MIN or MAX. dst may alias a or b. */
int coll_cuda_reduce2(coll_dtype_t dt, coll_redop_t op, void *dst, const void *a, const void *b,
                      size_t n, void *stream);
/* dst[i] = op over k = 0..nsrc-1 of srcs[k][i] in index order; fp16/bf16 accumulate in fp32 and
 * round once. 1 <= nsrc <= COLL_CUDA_MAX_SRCS; srcs may be peers' memory mapped by IPC. */
int coll_cuda_reduce_n(coll_dtype_t dt, coll_redop_t op, void *dst, const void *const *srcs,
                       int nsrc, size_t n, void *stream);
/* buf[i] /= divisor (AVG): integers truncate toward zero; fp16/bf16 through fp32. */
int coll_cuda_div(coll_dtype_t dt, void *buf, size_t n, int divisor, void *stream);

/* Load every kernel into the current device's context now. With lazy loading (the default
 * since CUDA 12.2) a kernel's first launch may synchronise the context, which deadlocks while a
 * stream of the caller waits for a device operation that needs that kernel. 0 or cudaError_t. */
int coll_cuda_kernels_load(void);

#ifdef __cplusplus
}
#endif

#endif
