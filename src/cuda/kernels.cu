/* SPDX-License-Identifier: MIT */
/*
 * Reduction kernels for every dtype x op. Each element type T has a compute type C (fp32 for
 * fp16/bf16, the unsigned type for integers so that SUM/PROD wrap without undefined
 * behaviour). Threads move 16 bytes at a time when every pointer is 16-byte aligned, with a
 * grid-stride loop; the tail and misaligned buffers take the scalar path.
 */
#include "kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

namespace
{

template <typename T> struct elem {
    typedef T                 compute;
    __device__ static compute load(T v)
    {
        return v;
    }
    __device__ static T store(compute v)
    {
        return v;
    }
};
template <> struct elem<int8_t> {
    typedef uint8_t           compute;
    __device__ static compute load(int8_t v)
    {
        return (uint8_t)v;
    }
    __device__ static int8_t store(compute v)
    {
        return (int8_t)v;
    }
};
template <> struct elem<int32_t> {
    typedef uint32_t          compute;
    __device__ static compute load(int32_t v)
    {
        return (uint32_t)v;
    }
    __device__ static int32_t store(compute v)
    {
        return (int32_t)v;
    }
};
template <> struct elem<int64_t> {
    typedef uint64_t          compute;
    __device__ static compute load(int64_t v)
    {
        return (uint64_t)v;
    }
    __device__ static int64_t store(compute v)
    {
        return (int64_t)v;
    }
};
template <> struct elem<__half> {
    typedef float           compute;
    __device__ static float load(__half v)
    {
        return __half2float(v);
    }
    __device__ static __half store(float v)
    {
        return __float2half_rn(v);
    }
};
template <> struct elem<__nv_bfloat16> {
    typedef float           compute;
    __device__ static float load(__nv_bfloat16 v)
    {
        return __bfloat162float(v);
    }
    __device__ static __nv_bfloat16 store(float v)
    {
        return __float2bfloat16_rn(v);
    }
};

/* MIN/MAX compare in the natural order (signed stays signed; fp16/bf16 in fp32) */
template <typename T> struct ord {
    typedef T           type;
    __device__ static T load(T v)
    {
        return v;
    }
    __device__ static T store(T v)
    {
        return v;
    }
};
template <> struct ord<__half> : elem<__half> {
    typedef float type;
};
template <> struct ord<__nv_bfloat16> : elem<__nv_bfloat16> {
    typedef float type;
};

/* The accumulator of OP over T: wrapping arithmetic for SUM/PROD, natural order for MIN/MAX. */
template <typename T, int OP> struct acc {
    typedef elem<T>             E;
    typedef typename E::compute type;
    __device__ static type      load(T v)
    {
        return E::load(v);
    }
    __device__ static T store(type v)
    {
        return E::store(v);
    }
};
template <typename T> struct acc<T, COLL_MIN> : ord<T> {
};
template <typename T> struct acc<T, COLL_MAX> : ord<T> {
};

template <typename C> __device__ inline bool is_nan(C v)
{
    return false;
}
template <> __device__ inline bool is_nan<float>(float v)
{
    return v != v;
}
template <> __device__ inline bool is_nan<double>(double v)
{
    return v != v;
}

/* the host's rules: MIN/MAX return a if a is NaN, else b if b is NaN */
template <int OP, typename C> __device__ inline C apply(C a, C b)
{
    if (OP == COLL_SUM) {
        return (C)(a + b);
    }
    if (OP == COLL_PROD) {
        return (C)(a * b);
    }
    if (is_nan(a)) {
        return a;
    }
    if (is_nan(b)) {
        return b;
    }
    /* equal operands give b, as the host kernels (reduce.c): -0 and +0 compare equal */
    if (OP == COLL_MAX) {
        return a > b ? a : b;
    }
    return a < b ? a : b;
}

template <typename T, int OP> __device__ inline T reduce_one(T a, T b)
{
    typedef acc<T, OP> A;
    return A::store(apply<OP>(A::load(a), A::load(b)));
}

template <typename T, int OP>
__global__ void reduce2_kernel(T *dst, const T *a, const T *b, size_t n, int vec)
{
    size_t tid  = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    size_t nth  = (size_t)gridDim.x * blockDim.x;
    size_t done = 0;
    if (vec) {
        const size_t per = 16 / sizeof(T);
        size_t       nv  = n / per;
        for (size_t v = tid; v < nv; v += nth) {
            uint4 x  = reinterpret_cast<const uint4 *>(a)[v];
            uint4 y  = reinterpret_cast<const uint4 *>(b)[v];
            T    *xs = reinterpret_cast<T *>(&x);
            T    *ys = reinterpret_cast<T *>(&y);
#pragma unroll
            for (size_t k = 0; k < per; k++) {
                xs[k] = reduce_one<T, OP>(xs[k], ys[k]);
            }
            reinterpret_cast<uint4 *>(dst)[v] = x;
        }
        done = nv * per;
    }
    for (size_t i = done + tid; i < n; i += nth) {
        dst[i] = reduce_one<T, OP>(a[i], b[i]);
    }
}

struct srcs_t {
    const void *p[COLL_CUDA_MAX_SRCS];
};

template <typename T, int OP> __global__ void reducen_kernel(T *dst, srcs_t s, int ns, size_t n)
{
    typedef acc<T, OP> E;
    size_t             tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    size_t             nth = (size_t)gridDim.x * blockDim.x;
    for (size_t i = tid; i < n; i += nth) {
        typename E::type v = E::load(static_cast<const T *>(s.p[0])[i]);
        for (int k = 1; k < ns; k++) {
            v = apply<OP>(v, E::load(static_cast<const T *>(s.p[k])[i]));
        }
        dst[i] = E::store(v);
    }
}

__device__ inline int8_t div_one(int8_t v, int d)
{
    return (int8_t)((int)v / d);
}
__device__ inline uint8_t div_one(uint8_t v, int d)
{
    return (uint8_t)((unsigned)v / (unsigned)d);
}
__device__ inline int32_t div_one(int32_t v, int d)
{
    return v / d;
}
__device__ inline uint32_t div_one(uint32_t v, int d)
{
    return v / (uint32_t)d;
}
__device__ inline int64_t div_one(int64_t v, int d)
{
    return v / (int64_t)d;
}
__device__ inline uint64_t div_one(uint64_t v, int d)
{
    return v / (uint64_t)d;
}
__device__ inline float div_one(float v, int d)
{
    return v / (float)d;
}
__device__ inline double div_one(double v, int d)
{
    return v / (double)d;
}
__device__ inline __half div_one(__half v, int d)
{
    return __float2half_rn(__half2float(v) / (float)d);
}
__device__ inline __nv_bfloat16 div_one(__nv_bfloat16 v, int d)
{
    return __float2bfloat16_rn(__bfloat162float(v) / (float)d);
}

template <typename T> __global__ void div_kernel(T *buf, size_t n, int d)
{
    size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    size_t nth = (size_t)gridDim.x * blockDim.x;
    for (size_t i = tid; i < n; i += nth) {
        buf[i] = div_one(buf[i], d);
    }
}

const int THREADS = 512;

unsigned grid_for(size_t work)
{
    size_t b = (work + THREADS - 1) / THREADS;
    if (b > 65535) {
        b = 65535;
    }
    return (unsigned)(b == 0 ? 1 : b);
}

int aligned16(const void *p)
{
    return ((uintptr_t)p & 15u) == 0;
}

template <typename T, int OP>
int launch2(void *dst, const void *a, const void *b, size_t n, cudaStream_t st)
{
    int    vec  = aligned16(dst) && aligned16(a) && aligned16(b);
    size_t work = vec ? n / (16 / sizeof(T)) + 1 : n;
    reduce2_kernel<T, OP><<<grid_for(work), THREADS, 0, st>>>(
        static_cast<T *>(dst), static_cast<const T *>(a), static_cast<const T *>(b), n, vec);
    return (int)cudaGetLastError();
}

template <typename T, int OP>
int launchn(void *dst, const void *const *srcs, int ns, size_t n, cudaStream_t st)
{
    srcs_t s;
    for (int k = 0; k < ns; k++) {
        s.p[k] = srcs[k];
    }
    reducen_kernel<T, OP><<<grid_for(n), THREADS, 0, st>>>(static_cast<T *>(dst), s, ns, n);
    return (int)cudaGetLastError();
}

template <typename T>
int by_op2(coll_redop_t op, void *dst, const void *a, const void *b, size_t n, cudaStream_t st)
{
    switch (op) {
    case COLL_SUM:
        return launch2<T, COLL_SUM>(dst, a, b, n, st);
    case COLL_PROD:
        return launch2<T, COLL_PROD>(dst, a, b, n, st);
    case COLL_MAX:
        return launch2<T, COLL_MAX>(dst, a, b, n, st);
    case COLL_MIN:
        return launch2<T, COLL_MIN>(dst, a, b, n, st);
    default:
        return (int)cudaErrorInvalidValue;
    }
}

template <typename T>
int by_opn(coll_redop_t op, void *dst, const void *const *srcs, int ns, size_t n, cudaStream_t st)
{
    switch (op) {
    case COLL_SUM:
        return launchn<T, COLL_SUM>(dst, srcs, ns, n, st);
    case COLL_PROD:
        return launchn<T, COLL_PROD>(dst, srcs, ns, n, st);
    case COLL_MAX:
        return launchn<T, COLL_MAX>(dst, srcs, ns, n, st);
    case COLL_MIN:
        return launchn<T, COLL_MIN>(dst, srcs, ns, n, st);
    default:
        return (int)cudaErrorInvalidValue;
    }
}

template <typename T> int launch_div(void *buf, size_t n, int d, cudaStream_t st)
{
    div_kernel<T><<<grid_for(n), THREADS, 0, st>>>(static_cast<T *>(buf), n, d);
    return (int)cudaGetLastError();
}

/* Load every kernel of one type now (see coll_cuda_kernels_load). */
template <typename T> int load_type()
{
    cudaFuncAttributes a;
    cudaError_t        e = cudaSuccess;
#define LOAD(_k)                                                                                   \
    if (e == cudaSuccess) {                                                                        \
        e = cudaFuncGetAttributes(&a, _k);                                                         \
    }
    LOAD((reduce2_kernel<T, COLL_SUM>))
    LOAD((reduce2_kernel<T, COLL_PROD>))
    LOAD((reduce2_kernel<T, COLL_MAX>))
    LOAD((reduce2_kernel<T, COLL_MIN>))
    LOAD((reducen_kernel<T, COLL_SUM>))
    LOAD((reducen_kernel<T, COLL_PROD>))
    LOAD((reducen_kernel<T, COLL_MAX>))
    LOAD((reducen_kernel<T, COLL_MIN>))
    LOAD((div_kernel<T>))
#undef LOAD
    return (int)e;
}

} // namespace

extern "C" int coll_cuda_kernels_load(void)
{
    int e = load_type<int8_t>();
    e     = e ? e : load_type<uint8_t>();
    e     = e ? e : load_type<int32_t>();
    e     = e ? e : load_type<uint32_t>();
    e     = e ? e : load_type<int64_t>();
    e     = e ? e : load_type<uint64_t>();
    e     = e ? e : load_type<__half>();
    e     = e ? e : load_type<float>();
    e     = e ? e : load_type<double>();
    e     = e ? e : load_type<__nv_bfloat16>();
    return e;
}

#define KERNELS_BY_DTYPE(_dt, _call)                                                               \
    switch (_dt) {                                                                                 \
    case COLL_INT8:                                                                                \
        return _call(int8_t);                                                                      \
    case COLL_UINT8:                                                                               \
        return _call(uint8_t);                                                                     \
    case COLL_INT32:                                                                               \
        return _call(int32_t);                                                                     \
    case COLL_UINT32:                                                                              \
        return _call(uint32_t);                                                                    \
    case COLL_INT64:                                                                               \
        return _call(int64_t);                                                                     \
    case COLL_UINT64:                                                                              \
        return _call(uint64_t);                                                                    \
    case COLL_FLOAT16:                                                                             \
        return _call(__half);                                                                      \
    case COLL_FLOAT32:                                                                             \
        return _call(float);                                                                       \
    case COLL_FLOAT64:                                                                             \
        return _call(double);                                                                      \
    case COLL_BFLOAT16:                                                                            \
        return _call(__nv_bfloat16);                                                               \
    default:                                                                                       \
        return (int)cudaErrorInvalidValue;                                                         \
    }

extern "C" int coll_cuda_reduce2(coll_dtype_t dt, coll_redop_t op, void *dst, const void *a,
                                 const void *b, size_t n, void *stream)
{
    cudaStream_t st = static_cast<cudaStream_t>(stream);
    if (n == 0) {
        return 0;
    }
#define CALL2(_T) by_op2<_T>(op, dst, a, b, n, st)
    KERNELS_BY_DTYPE(dt, CALL2)
#undef CALL2
}

extern "C" int coll_cuda_reduce_n(coll_dtype_t dt, coll_redop_t op, void *dst,
                                  const void *const *srcs, int nsrc, size_t n, void *stream)
{
    cudaStream_t st = static_cast<cudaStream_t>(stream);
    if (nsrc < 1 || nsrc > COLL_CUDA_MAX_SRCS) {
        return (int)cudaErrorInvalidValue;
    }
    if (n == 0) {
        return 0;
    }
#define CALLN(_T) by_opn<_T>(op, dst, srcs, nsrc, n, st)
    KERNELS_BY_DTYPE(dt, CALLN)
#undef CALLN
}

extern "C" int coll_cuda_div(coll_dtype_t dt, void *buf, size_t n, int divisor, void *stream)
{
    cudaStream_t st = static_cast<cudaStream_t>(stream);
    if (n == 0 || divisor <= 1) {
        return 0;
    }
#define CALLD(_T) launch_div<_T>(buf, n, divisor, st)
    KERNELS_BY_DTYPE(dt, CALLD)
#undef CALLD
}
