/* SPDX-License-Identifier: MIT */
/*
 * The CUDA reduction kernels against the host kernels (src/reduce/), bit for bit: every dtype x
 * op, counts from 1 to a million and odd, buffers aligned and offset by one element (the scalar
 * path), fresh random non-zero data each case (MIN/MAX: with -0/+0 ties); reduce_n with 1..16
 * sources against chained host reductions (fp16/bf16: an fp32 accumulator rounded once); AVG's
 * division. Exits 77 without a CUDA device.
 */
#include "coll_test.h"
#include "cuda/kernels.h"
#include "reduce/reduce.h"

#include <cuda_runtime.h>
#include <math.h>

#define CUDA_OK(_x)                                                                                \
    do {                                                                                           \
        cudaError_t _e = (_x);                                                                     \
        ASSERT_(_e == cudaSuccess, "%s: %s", #_x, cudaGetErrorString(_e));                         \
    } while (0)

static uint64_t seed = 0x5eed;

/* A random non-zero element: small magnitudes for PROD so products stay finite; for MIN and MAX
 * one in eight a signed zero, so that -0/+0 ties occur (the side kept must match the host). */
static void fill(coll_dtype_t dt, coll_redop_t op, void *buf, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t r = coll_test_rand(&seed);
        double   f = ((double)(r % 2000) + 1.0) / 1000.0 * ((r >> 20) & 1 ? 1 : -1);
        if (op == COLL_PROD) {
            f = 1.0 + (double)(r % 7) / 64.0;
        }
        if ((op == COLL_MIN || op == COLL_MAX) && (r >> 40) % 8 == 0) {
            f = (r >> 44) & 1 ? -0.0 : 0.0; /* ties of -0 and +0: equal operands give b */
        }
        switch (dt) {
        case COLL_INT8:
        case COLL_UINT8:
            ((uint8_t *)buf)[i] = (uint8_t)(r | 1);
            break;
        case COLL_INT32:
        case COLL_UINT32:
            ((uint32_t *)buf)[i] = (uint32_t)(r | 1);
            break;
        case COLL_INT64:
        case COLL_UINT64:
            ((uint64_t *)buf)[i] = r | 1;
            break;
        case COLL_FLOAT16:
            ((uint16_t *)buf)[i] = coll_float_to_half((float)f);
            break;
        case COLL_BFLOAT16:
            ((uint16_t *)buf)[i] = coll_float_to_bf16((float)f);
            break;
        case COLL_FLOAT32:
            ((float *)buf)[i] = (float)f;
            break;
        default:
            ((double *)buf)[i] = f;
        }
    }
}

static size_t compare(const void *got, const void *want, size_t n, size_t esz, const char *what)
{
    if (memcmp(got, want, n * esz) == 0) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        if (memcmp((const char *)got + i * esz, (const char *)want + i * esz, esz) != 0) {
            uint64_t g = 0, w = 0;
            memcpy(&g, (const char *)got + i * esz, esz);
            memcpy(&w, (const char *)want + i * esz, esz);
            fprintf(stderr, "%s: element %zu is 0x%" PRIx64 ", expected 0x%" PRIx64 "\n", what, i,
                    g, w);
            return 1;
        }
    }
    return 0;
}

/* Host reference of reduce_n: chained, except fp16/bf16 accumulate in fp32. */
static void host_reduce_n(coll_dtype_t dt, coll_redop_t op, void *dst, void *const *srcs, int ns,
                          size_t n)
{
    if (dt == COLL_FLOAT16 || dt == COLL_BFLOAT16) {
        for (size_t i = 0; i < n; i++) {
            float acc = 0;
            for (int k = 0; k < ns; k++) {
                uint16_t h = ((uint16_t *)srcs[k])[i];
                float    v = dt == COLL_FLOAT16 ? coll_half_to_float(h) : coll_bf16_to_float(h);
                if (k == 0) {
                    acc = v;
                } else {
                    coll_reduce3(COLL_FLOAT32, op, &acc, &acc, &v, 1);
                }
            }
            ((uint16_t *)dst)[i] =
                dt == COLL_FLOAT16 ? coll_float_to_half(acc) : coll_float_to_bf16(acc);
        }
        return;
    }
    memcpy(dst, srcs[0], n * coll_dtype_size(dt));
    for (int k = 1; k < ns; k++) {
        coll_reduce3(dt, op, dst, dst, srcs[k], n);
    }
}

int main(void)
{
    int         ndev = 0;
    cudaError_t e    = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0) {
        printf("SKIP: no CUDA device: %s\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return COLL_TEST_SKIP;
    }
    static const size_t counts[] = {1, 7, 8, 1000, 4097, (1u << 20) + 3};
    static const int    nsrcs[]  = {1, 2, 3, 8, 16};
    size_t              cases = 0, wrong = 0, maxn = (1u << 20) + 4;
    char               *h[COLL_CUDA_MAX_SRCS + 2], *d[COLL_CUDA_MAX_SRCS + 1];
    for (int k = 0; k < COLL_CUDA_MAX_SRCS + 2; k++) {
        h[k] = malloc(maxn * 8);
        ASSERT_TRUE(h[k] != NULL);
    }
    for (int k = 0; k < COLL_CUDA_MAX_SRCS + 1; k++) {
        CUDA_OK(cudaMalloc((void **)&d[k], maxn * 8));
    }
    char *want = h[COLL_CUDA_MAX_SRCS + 1];
    for (int dt = 0; dt < COLL_DTYPE_COUNT; dt++) {
        size_t esz = coll_dtype_size((coll_dtype_t)dt);
        for (int op = 0; op < COLL_AVG; op++) {
            for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
                for (int off = 0; off < 2; off++) {
                    size_t n = counts[ci], o = (size_t)off * esz;
                    char   what[128];
                    snprintf(what, sizeof(what), "reduce2 %s %s n=%zu offset=%d",
                             coll_dtype_name((coll_dtype_t)dt), coll_redop_name((coll_redop_t)op),
                             n, off);
                    fill((coll_dtype_t)dt, (coll_redop_t)op, h[0], n);
                    fill((coll_dtype_t)dt, (coll_redop_t)op, h[1], n);
                    CUDA_OK(cudaMemcpy(d[0] + o, h[0], n * esz, cudaMemcpyHostToDevice));
                    CUDA_OK(cudaMemcpy(d[1] + o, h[1], n * esz, cudaMemcpyHostToDevice));
                    ASSERT_EQ(coll_cuda_reduce2((coll_dtype_t)dt, (coll_redop_t)op, d[2] + o,
                                                d[0] + o, d[1] + o, n, NULL),
                              0);
                    CUDA_OK(cudaMemcpy(h[2], d[2] + o, n * esz, cudaMemcpyDeviceToHost));
                    coll_reduce3((coll_dtype_t)dt, (coll_redop_t)op, want, h[0], h[1], n);
                    wrong += compare(h[2], want, n, esz, what);
                    /* in place: dst aliases a */
                    ASSERT_EQ(coll_cuda_reduce2((coll_dtype_t)dt, (coll_redop_t)op, d[0] + o,
                                                d[0] + o, d[1] + o, n, NULL),
                              0);
                    CUDA_OK(cudaMemcpy(h[2], d[0] + o, n * esz, cudaMemcpyDeviceToHost));
                    wrong += compare(h[2], want, n, esz, what);
                    cases += 2;
                }
            }
            for (size_t si = 0; si < sizeof(nsrcs) / sizeof(nsrcs[0]); si++) {
                size_t      n = 4097 + si;
                const void *srcs[COLL_CUDA_MAX_SRCS];
                char        what[128];
                for (int k = 0; k < nsrcs[si]; k++) {
                    fill((coll_dtype_t)dt, (coll_redop_t)op, h[k], n);
                    CUDA_OK(cudaMemcpy(d[k], h[k], n * esz, cudaMemcpyHostToDevice));
                    srcs[k] = d[k];
                }
                snprintf(what, sizeof(what), "reduce_n %s %s n=%zu nsrc=%d",
                         coll_dtype_name((coll_dtype_t)dt), coll_redop_name((coll_redop_t)op), n,
                         nsrcs[si]);
                ASSERT_EQ(coll_cuda_reduce_n((coll_dtype_t)dt, (coll_redop_t)op,
                                             d[COLL_CUDA_MAX_SRCS], srcs, nsrcs[si], n, NULL),
                          0);
                CUDA_OK(cudaMemcpy(h[COLL_CUDA_MAX_SRCS], d[COLL_CUDA_MAX_SRCS], n * esz,
                                   cudaMemcpyDeviceToHost));
                host_reduce_n((coll_dtype_t)dt, (coll_redop_t)op, want, (void *const *)h, nsrcs[si],
                              n);
                wrong += compare(h[COLL_CUDA_MAX_SRCS], want, n, esz, what);
                cases++;
            }
        }
        for (int div = 2; div <= 7; div += 5) {
            size_t n = 100003;
            char   what[96];
            snprintf(what, sizeof(what), "div %s by %d", coll_dtype_name((coll_dtype_t)dt), div);
            fill((coll_dtype_t)dt, COLL_SUM, h[0], n);
            memcpy(want, h[0], n * esz);
            coll_reduce_div((coll_dtype_t)dt, want, n, div);
            CUDA_OK(cudaMemcpy(d[0], h[0], n * esz, cudaMemcpyHostToDevice));
            ASSERT_EQ(coll_cuda_div((coll_dtype_t)dt, d[0], n, div, NULL), 0);
            CUDA_OK(cudaMemcpy(h[1], d[0], n * esz, cudaMemcpyDeviceToHost));
            wrong += compare(h[1], want, n, esz, what);
            cases++;
        }
    }
    CUDA_OK(cudaDeviceSynchronize());
    printf("%zu kernel cases, %zu wrong\n", cases, wrong);
    return wrong == 0 ? 0 : 1;
}
