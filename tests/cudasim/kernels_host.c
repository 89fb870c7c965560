/* SPDX-License-Identifier: MIT */
/*
 * The reduction kernels of src/cuda/kernels.h for cudasim: the same contract (enqueue on the
 * stream, return 0 or a cudaError_t), run by the stream's thread with the host reduction code.
 * Every pointer is checked against the device allocations (cudasim_view) when the kernel is
 * enqueued. Linked into the cudasim test programs in place of src/cuda/kernels.cu.
 */
#include "cuda/kernels.h"
#include "cudasim.h"
#include "reduce/reduce.h"

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    coll_dtype_t dt;
    coll_redop_t op;
    void        *dst;
    const void  *src[COLL_CUDA_MAX_SRCS];
    int          nsrc;
    int          divisor; /* > 0: a division kernel */
    size_t       n;
} kjob_t;

static float half_in(coll_dtype_t dt, uint16_t v)
{
    return dt == COLL_FLOAT16 ? coll_half_to_float(v) : coll_bf16_to_float(v);
}

static float op_f32(coll_redop_t op, float a, float b)
{
    switch (op) {
    case COLL_PROD:
        return a * b;
    case COLL_MIN:
        return (a < b || a != a) ? a : b;
    case COLL_MAX:
        return (a > b || a != a) ? a : b;
    default:
        return a + b;
    }
}

static void kjob_run(void *arg)
{
    kjob_t *k = arg;
    if (k->divisor > 0) {
        coll_reduce_div(k->dt, k->dst, k->n, k->divisor);
        return;
    }
    if ((k->dt == COLL_FLOAT16 || k->dt == COLL_BFLOAT16) && k->nsrc > 2) {
        /* widened to fp32 across every source, rounded once (as the device kernels) */
        uint16_t *d = k->dst;
        for (size_t i = 0; i < k->n; i++) {
            float acc = half_in(k->dt, ((const uint16_t *)k->src[0])[i]);
            for (int s = 1; s < k->nsrc; s++) {
                acc = op_f32(k->op, acc, half_in(k->dt, ((const uint16_t *)k->src[s])[i]));
            }
            d[i] = k->dt == COLL_FLOAT16 ? coll_float_to_half(acc) : coll_float_to_bf16(acc);
        }
        return;
    }
    size_t bytes = k->n * coll_dtype_size(k->dt);
    if (k->nsrc == 1) {
        if (k->dst != k->src[0]) {
            memmove(k->dst, k->src[0], bytes);
        }
        return;
    }
    if (k->nsrc == 2) {
        coll_reduce3(k->dt, k->op, k->dst, k->src[0], k->src[1], k->n);
        return;
    }
    /* chained through a buffer of its own: dst may be any source, and the device kernel reads
     * every source's element before it writes it */
    void *acc = malloc(bytes);
    if (acc == NULL) {
        fprintf(stderr, "kernels_host: out of memory\n");
        abort();
    }
    coll_reduce3(k->dt, k->op, acc, k->src[0], k->src[1], k->n);
    for (int s = 2; s < k->nsrc; s++) {
        coll_reduce3(k->dt, k->op, acc, acc, k->src[s], k->n);
    }
    memcpy(k->dst, acc, bytes);
    free(acc);
}

/* The device kernels' own refusals: ops other than these four (AVG is SUM, then a division)
 * and unknown types. */
static int kjob_valid(coll_dtype_t dt, coll_redop_t op)
{
    return coll_dtype_size(dt) != 0 &&
           (op == COLL_SUM || op == COLL_PROD || op == COLL_MIN || op == COLL_MAX);
}

/* Kernels loaded by coll_cuda_kernels_load: before that, a launch synchronises the device
 * first, as lazy loading's first launch of a kernel does. */
static int kernels_loaded;

/* Returns what the device launchers return: the launch's error, else any error left in the
 * thread by an earlier call (cudaGetLastError). */
static int kjob_launch(kjob_t *k, void *stream)
{
    if (!__atomic_load_n(&kernels_loaded, __ATOMIC_ACQUIRE)) {
        cudasim_device_sync();
    }
    int e    = cudasim_launch(stream, kjob_run, k);
    int last = (int)cudaGetLastError(); /* cleared, as the device launchers do */
    return e != 0 ? e : last;
}

int coll_cuda_reduce_n(coll_dtype_t dt, coll_redop_t op, void *dst, const void *const *srcs,
                       int nsrc, size_t n, void *stream)
{
    size_t bytes = n * coll_dtype_size(dt);
    if (nsrc < 1 || nsrc > COLL_CUDA_MAX_SRCS) {
        return (int)cudaErrorInvalidValue;
    }
    if (n == 0) {
        return 0;
    }
    if (!kjob_valid(dt, op)) {
        return (int)cudaErrorInvalidValue;
    }
    kjob_t *k = calloc(1, sizeof *k);
    if (k == NULL) {
        return (int)cudaErrorMemoryAllocation;
    }
    k->dt   = dt;
    k->op   = op;
    k->dst  = cudasim_view(dst, bytes, "reduce_n destination");
    k->nsrc = nsrc;
    k->n    = n;
    for (int s = 0; s < nsrc; s++) {
        k->src[s] = cudasim_view(srcs[s], bytes, "reduce_n source");
    }
    return kjob_launch(k, stream);
}

int coll_cuda_reduce2(coll_dtype_t dt, coll_redop_t op, void *dst, const void *a, const void *b,
                      size_t n, void *stream)
{
    const void *srcs[2] = {a, b};
    return coll_cuda_reduce_n(dt, op, dst, srcs, 2, n, stream);
}

int coll_cuda_div(coll_dtype_t dt, void *buf, size_t n, int divisor, void *stream)
{
    if (n == 0 || divisor <= 1) {
        return 0;
    }
    if (coll_dtype_size(dt) == 0) {
        return (int)cudaErrorInvalidValue;
    }
    kjob_t *k = calloc(1, sizeof *k);
    if (k == NULL) {
        return (int)cudaErrorMemoryAllocation;
    }
    k->dt      = dt;
    k->dst     = cudasim_view(buf, n * coll_dtype_size(dt), "division buffer");
    k->n       = n;
    k->divisor = divisor;
    return kjob_launch(k, stream);
}

int coll_cuda_kernels_load(void)
{
    __atomic_store_n(&kernels_loaded, 1, __ATOMIC_RELEASE);
    return 0;
}
