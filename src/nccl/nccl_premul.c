/* SPDX-License-Identifier: MIT */
/*
 * ncclRedOpCreatePreMulSum: sum of (scalar x input). The input is scaled into a temporary host
 * buffer, which is then summed; the scalar is read once (ncclScalarHostImmediate) or through
 * its pointer at every call (ncclScalarDevice: here a pointer the host can read, i.e. host or
 * managed memory).
 */
#include "nccl_internal.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NCCL_SHIM_VISIBLE __attribute__((visibility("default")))

static size_t dt_size(ncclDataType_t dt)
{
    static const size_t sz[ncclNumTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};
    return (unsigned)dt < ncclNumTypes ? sz[dt] : 0;
}

static float half_to_float(uint16_t h)
{
    int   e = (h >> 10) & 0x1f, m = h & 0x3ff;
    float v = e == 0    ? ldexpf((float)m, -24)
              : e == 31 ? (m ? NAN : INFINITY)
                        : ldexpf((float)(m | 0x400), e - 25);
    return (h & 0x8000) ? -v : v;
}

static uint16_t float_to_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000, exp = (x >> 23) & 0xff, man = x & 0x7fffff;
    if (exp == 0xff) {
        return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
    }
    int e = (int)exp - 127 + 15;
    if (e >= 31) {
        return (uint16_t)(sign | 0x7c00);
    }
    if (e <= 0) { /* subnormal half: shift with round to nearest even */
        if (e < -10) {
            return (uint16_t)sign;
        }
        man |= 0x800000;
        int      shift = 14 - e;
        uint32_t half = man >> shift, rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
        half += rem > mid || (rem == mid && (half & 1));
        return (uint16_t)(sign | half);
    }
    uint32_t half = (uint32_t)e << 10 | man >> 13, rem = man & 0x1fff;
    half += rem > 0x1000 || (rem == 0x1000 && (half & 1));
    return (uint16_t)(sign | half);
}

static float bf16_to_float(uint16_t b)
{
    uint32_t x = (uint32_t)b << 16;
    float    f;
    memcpy(&f, &x, 4);
    return f;
}

static uint16_t float_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffff) > 0x7f800000) {
        return (uint16_t)((x >> 16) | 0x40);
    }
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

/* The scalar as a double (floating types) and as an int64 (integer types). */
static void scalar_read(ncclDataType_t dt, const void *p, double *d, int64_t *i)
{
    switch (dt) {
    case ncclInt8:
        *i = *(const int8_t *)p;
        break;
    case ncclUint8:
        *i = *(const uint8_t *)p;
        break;
    case ncclInt32:
        *i = *(const int32_t *)p;
        break;
    case ncclUint32:
        *i = *(const uint32_t *)p;
        break;
    case ncclInt64:
        *i = *(const int64_t *)p;
        break;
    case ncclUint64:
        *i = (int64_t) * (const uint64_t *)p;
        break;
    case ncclFloat16:
        *d = half_to_float(*(const uint16_t *)p);
        break;
    case ncclFloat32:
        *d = *(const float *)p;
        break;
    case ncclFloat64:
        *d = *(const double *)p;
        break;
    case ncclBfloat16:
        *d = bf16_to_float(*(const uint16_t *)p);
        break;
    default:
        break;
    }
}

static void scale(ncclDataType_t dt, const void *src, void *dst, size_t n, double d, int64_t k)
{
    for (size_t j = 0; j < n; j++) {
        switch (dt) {
        case ncclInt8:
            ((int8_t *)dst)[j] = (int8_t)(((const int8_t *)src)[j] * k);
            break;
        case ncclUint8:
            ((uint8_t *)dst)[j] = (uint8_t)(((const uint8_t *)src)[j] * (uint64_t)k);
            break;
        case ncclInt32:
            ((int32_t *)dst)[j] = (int32_t)(((const int32_t *)src)[j] * k);
            break;
        case ncclUint32:
            ((uint32_t *)dst)[j] = (uint32_t)(((const uint32_t *)src)[j] * (uint64_t)k);
            break;
        case ncclInt64:
            ((int64_t *)dst)[j] = (int64_t)((uint64_t)((const int64_t *)src)[j] * (uint64_t)k);
            break;
        case ncclUint64:
            ((uint64_t *)dst)[j] = ((const uint64_t *)src)[j] * (uint64_t)k;
            break;
        case ncclFloat16:
            ((uint16_t *)dst)[j] =
                float_to_half((float)(half_to_float(((const uint16_t *)src)[j]) * d));
            break;
        case ncclFloat32:
            ((float *)dst)[j] = (float)(((const float *)src)[j] * d);
            break;
        case ncclFloat64:
            ((double *)dst)[j] = ((const double *)src)[j] * d;
            break;
        case ncclBfloat16:
            ((uint16_t *)dst)[j] =
                float_to_bf16((float)(bf16_to_float(((const uint16_t *)src)[j]) * d));
            break;
        default:
            break;
        }
    }
}

NCCL_SHIM_VISIBLE ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar,
                                                        ncclDataType_t        datatype,
                                                        ncclScalarResidence_t residence,
                                                        ncclComm_t            comm)
{
    ncclResult_t r = nccl_check_comm(comm, "ncclRedOpCreatePreMulSum");
    if (r != ncclSuccess) {
        return r;
    }
    if (op == NULL || scalar == NULL || dt_size(datatype) == 0 ||
        (residence != ncclScalarDevice && residence != ncclScalarHostImmediate)) {
        return nccl_fail(comm, ncclInvalidArgument,
                         "ncclRedOpCreatePreMulSum: op %p, scalar %p, datatype %d, residence %d: "
                         "expected pointers, a datatype < %d and a residence of 0 or 1",
                         (void *)op, scalar, (int)datatype, (int)residence, ncclNumTypes);
    }
    for (int i = 0; i < NCCL_SHIM_MAX_OPS; i++) {
        nccl_premul_t *p = &comm->ops[i];
        if (p->used) {
            continue;
        }
        memset(p, 0, sizeof(*p));
        p->used      = 1;
        p->dtype     = datatype;
        p->residence = residence;
        p->ptr       = scalar;
        if (residence == ncclScalarHostImmediate) {
            memcpy(p->raw, scalar, dt_size(datatype));
        }
        *op = (ncclRedOp_t)(ncclNumOps + i);
        return ncclSuccess;
    }
    return nccl_fail(comm, ncclInvalidUsage,
                     "ncclRedOpCreatePreMulSum: %d operators are alive on this communicator; "
                     "destroy some with ncclRedOpDestroy",
                     NCCL_SHIM_MAX_OPS);
}

NCCL_SHIM_VISIBLE ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm)
{
    ncclResult_t r = nccl_check_comm(comm, "ncclRedOpDestroy");
    if (r != ncclSuccess) {
        return r;
    }
    int i = (int)op - ncclNumOps;
    if (i < 0 || i >= NCCL_SHIM_MAX_OPS || !comm->ops[i].used) {
        return nccl_fail(comm, ncclInvalidArgument,
                         "ncclRedOpDestroy: op %d is not an operator made by "
                         "ncclRedOpCreatePreMulSum on this communicator",
                         (int)op);
    }
    comm->ops[i].used = 0;
    return ncclSuccess;
}

ncclResult_t nccl_premul_apply(ncclComm_t comm, const char *fn, ncclRedOp_t op, ncclDataType_t dt,
                               size_t count, cudaStream_t stream, const void **sendbuff_p,
                               void **tmp_p, coll_redop_t *cop_p)
{
    *tmp_p = NULL;
    if ((int)op >= 0 && (int)op < ncclNumOps) {
        *cop_p = (coll_redop_t)op;
        return ncclSuccess;
    }
    int i = (int)op - ncclNumOps;
    if (i < 0 || i >= NCCL_SHIM_MAX_OPS || !comm->ops[i].used) {
        return nccl_fail(comm, ncclInvalidArgument,
                         "%s: op %d is neither a built-in operator nor one made by "
                         "ncclRedOpCreatePreMulSum on this communicator",
                         fn, (int)op);
    }
    const nccl_premul_t *p = &comm->ops[i];
    if (p->dtype != dt) {
        return nccl_fail(comm, ncclInvalidArgument,
                         "%s: op %d was made for datatype %d, the call uses datatype %d", fn,
                         (int)op, (int)p->dtype, (int)dt);
    }
    size_t es = dt_size(dt);
    if (count > ((size_t)1 << 47) / es) { /* libcoll's own limit on a call's bytes */
        return nccl_fail(NULL, ncclInvalidArgument,
                         "%s: count %zu of datatype %d is too large (byte size overflows)", fn,
                         count, (int)dt);
    }
    if (count > 0 && *sendbuff_p == NULL) {
        return nccl_fail(NULL, ncclInvalidArgument, "%s: sendbuff is NULL", fn);
    }
    if (count > 0 && !nccl_host_readable(*sendbuff_p, count * es)) {
        return nccl_fail(NULL, ncclInvalidArgument,
                         "%s: sendbuff %p is not memory the host can read (device memory?): a "
                         "PreMulSum operator scales on the host, so it takes host, pinned or "
                         "managed memory",
                         fn, *sendbuff_p);
    }
    nccl_stream_sync(stream); /* the input, and a device-resident scalar, as the stream left them */
    double  d = 0;
    int64_t k = 0;
    scalar_read(dt, p->residence == ncclScalarHostImmediate ? (const void *)p->raw : p->ptr, &d,
                &k);
    void *tmp = malloc(count > 0 ? count * es : 1);
    if (tmp == NULL) { /* this call's failure only: the communicator stays usable */
        return nccl_fail(NULL, ncclSystemError, "%s: out of memory for a PreMulSum of %zu elements",
                         fn, count);
    }
    scale(dt, *sendbuff_p, tmp, count, d, k);
    *sendbuff_p = tmp;
    *tmp_p      = tmp;
    *cop_p      = COLL_SUM;
    return ncclSuccess;
}
