/* SPDX-License-Identifier: MIT */
/*
 * Copies that bypass the caches: non-temporal stores write whole lines to memory without first
 * reading them (a plain store reads the line it writes, one more transfer per byte), for
 * destinations too large to stay in the cache anyway.
 */
#include "reduce.h"

#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

void coll_copy_stream_lines(void *dst, const void *src, size_t n)
{
#if defined(__SSE2__)
    char       *d = dst;
    const char *s = src;
    for (; n >= 64; n -= 64, d += 64, s += 64) {
        __m128i x0 = _mm_loadu_si128((const __m128i *)s);
        __m128i x1 = _mm_loadu_si128((const __m128i *)(s + 16));
        __m128i x2 = _mm_loadu_si128((const __m128i *)(s + 32));
        __m128i x3 = _mm_loadu_si128((const __m128i *)(s + 48));
        _mm_stream_si128((__m128i *)d, x0);
        _mm_stream_si128((__m128i *)(d + 16), x1);
        _mm_stream_si128((__m128i *)(d + 32), x2);
        _mm_stream_si128((__m128i *)(d + 48), x3);
    }
    for (; n >= 16; n -= 16, d += 16, s += 16) {
        _mm_stream_si128((__m128i *)d, _mm_loadu_si128((const __m128i *)s));
    }
#else
    memcpy(dst, src, n);
#endif
}

void coll_copy_stream(void *dst, const void *src, size_t n)
{
#if defined(__SSE2__)
    char       *d    = dst;
    const char *s    = src;
    size_t      head = (size_t)(-(uintptr_t)d & 15u);

    if (n < 4096) {
        memcpy(dst, src, n);
        return;
    }
    memcpy(d, s, head);
    d += head;
    s += head;
    n -= head;
    coll_copy_stream_lines(d, s, n & ~(size_t)63);
    memcpy(d + (n & ~(size_t)63), s + (n & ~(size_t)63), n & 63);
    _mm_sfence(); /* the streamed lines are visible before anything published after */
#else
    memcpy(dst, src, n);
#endif
}
