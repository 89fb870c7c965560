/* SPDX-License-Identifier: MIT */
/*
 * Reductions whose result goes past the caches: the inputs are reduced a few hundred bytes at a
 * time into a buffer that stays in the first-level cache, then written to every output with
 * non-temporal stores. A plain store reads each line it writes first (one more transfer per
 * byte); a kernel that reduces and streams in one loop keeps reads and writes interleaved at a
 * fine grain, which is what lets memory run near its copy rate (bench/README, "Streamed
 * reductions").
 */
#include "reduce.h"

#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define STREAM_CHUNK 512 /* bytes per step: 2-4 KiB were slower on the machine measured */

/* n bytes (a multiple of 16) from the cached src to the 16-byte aligned dst, unfenced. */
static void stream_chunk(char *dst, const char *src, size_t n)
{
#if defined(__SSE2__)
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        __m128i x0 = _mm_load_si128((const __m128i *)(src + i));
        __m128i x1 = _mm_load_si128((const __m128i *)(src + i + 16));
        __m128i x2 = _mm_load_si128((const __m128i *)(src + i + 32));
        __m128i x3 = _mm_load_si128((const __m128i *)(src + i + 48));
        _mm_stream_si128((__m128i *)(dst + i), x0);
        _mm_stream_si128((__m128i *)(dst + i + 16), x1);
        _mm_stream_si128((__m128i *)(dst + i + 32), x2);
        _mm_stream_si128((__m128i *)(dst + i + 48), x3);
    }
    for (; i < n; i += 16) {
        _mm_stream_si128((__m128i *)(dst + i), _mm_load_si128((const __m128i *)(src + i)));
    }
#else
    memcpy(dst, src, n);
#endif
}

int coll_reduce_nt_fits(void *const *out, int nout)
{
    for (int k = 0; k < nout; k++) {
        if (((uintptr_t)out[k] & 15u) != 0) {
            return 0;
        }
    }
    return 1;
}

void coll_reduce_nt(coll_dtype_t dtype, coll_redop_t op, const void *const *in, int nin, int avg,
                    void *const *out, int nout, size_t count)
{
    _Alignas(64) unsigned char acc[STREAM_CHUNK];
    size_t                     es    = coll_dtype_size(dtype);
    size_t                     step  = STREAM_CHUNK / es;
    coll_redop_t               plain = op == COLL_AVG ? COLL_SUM : op;

    for (size_t i = 0; i < count; i += step) {
        size_t m = count - i < step ? count - i : step;
        size_t b = i * es, len = m * es;
        if (nin == 1) {
            memcpy(acc, (const char *)in[0] + b, len);
        } else {
            coll_reduce3(dtype, plain, acc, (const char *)in[0] + b, (const char *)in[1] + b, m);
        }
        for (int q = 2; q < nin; q++) {
            coll_reduce3(dtype, plain, acc, acc, (const char *)in[q] + b, m);
        }
        if (op == COLL_AVG && avg > 1) {
            coll_reduce_div(dtype, acc, m, avg);
        }
        size_t whole = len & ~(size_t)15; /* a tail under 16 bytes is stored plainly */
        for (int k = 0; k < nout; k++) {
            stream_chunk((char *)out[k] + b, (const char *)acc, whole);
            memcpy((char *)out[k] + b + whole, acc + whole, len - whole);
        }
    }
#if defined(__SSE2__)
    _mm_sfence(); /* the streamed lines are visible before anything published after */
#endif
}
