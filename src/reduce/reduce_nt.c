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
#include <emmintrin.h> /* _mm_sfence */
#endif

#define STREAM_CHUNK 512 /* bytes per step: 2-4 KiB were slower on the machine measured */

int coll_reduce_nt_fits(void *const *out, int nout)
{
    for (int k = 0; k < nout; k++) {
        if (((uintptr_t)out[k] & 15u) != 0) {
            return 0;
        }
    }
    return 1;
}

void coll_reduce_nt(coll_dtype_t dtype, coll_redop_t op, const void *const *in, int nin,
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
        if (op == COLL_AVG) {
            coll_reduce_div(dtype, acc, m, nin);
        }
        size_t whole = len & ~(size_t)15; /* a tail under 16 bytes is stored plainly */
        for (int k = 0; k < nout; k++) {
            coll_copy_stream_lines((char *)out[k] + b, acc, whole);
            memcpy((char *)out[k] + b + whole, acc + whole, len - whole);
        }
    }
#if defined(__SSE2__)
    _mm_sfence(); /* the streamed lines are visible before anything published after */
#endif
}
