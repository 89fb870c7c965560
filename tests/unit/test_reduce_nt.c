/* SPDX-License-Identifier: MIT */
/*
 * Unit test of the streamed reductions (src/reduce/reduce_nt.c): coll_reduce_nt against the
 * kernels chained (coll_reduce3, checked against a reference in test_reduce.c), bit for bit,
 * for every dtype x op, 1-5 inputs, 1 and 3 outputs, sizes with tails under 16 bytes and
 * several 512-byte steps, outputs that are inputs (as where ranks run in place), the bytes after
 * every output untouched; and coll_reduce_nt_fits refusing an output off the 16-byte grid.
 */
#include "reduce/reduce.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_test.h"

#define GUARD 64
#define FILL  0xa5

static long     nt_checks;
static uint64_t nt_seed = 0x5eedc0115eedull;

/* Random bytes: every bit pattern, NaNs and infinities included; both sides reduce the same
 * bits with the same kernels, so the results compare byte for byte. */
static void nt_fill(void *p, size_t bytes)
{
    uint8_t *b = p;
    for (size_t i = 0; i < bytes; i++) {
        nt_seed ^= nt_seed << 13;
        nt_seed ^= nt_seed >> 7;
        nt_seed ^= nt_seed << 17;
        b[i] = (uint8_t)(nt_seed >> 24);
    }
}

static void *nt_alloc(size_t bytes)
{
    void *p = NULL;
    ASSERT_TRUE(posix_memalign(&p, 64, bytes + GUARD) == 0);
    memset((uint8_t *)p + bytes, FILL, GUARD);
    return p;
}

/* nin inputs of n elements into nout outputs; with alias, output 0 is input 0 and the last
 * output the last input. */
static void nt_case(coll_dtype_t dt, coll_redop_t op, int nin, int nout, size_t n, int alias)
{
    size_t       es = coll_dtype_size(dt), bytes = n * es;
    void        *in[5], *out[3], *own[3] = {NULL, NULL, NULL};
    uint8_t     *want  = nt_alloc(bytes);
    coll_redop_t plain = op == COLL_AVG ? COLL_SUM : op;

    for (int q = 0; q < nin; q++) {
        in[q] = nt_alloc(bytes);
        nt_fill(in[q], bytes);
    }
    if (nin == 1) {
        memcpy(want, in[0], bytes);
    } else {
        coll_reduce3(dt, plain, want, in[0], in[1], n);
    }
    for (int q = 2; q < nin; q++) {
        coll_reduce3(dt, plain, want, want, in[q], n);
    }
    if (op == COLL_AVG) {
        coll_reduce_div(dt, want, n, nin);
    }
    for (int k = 0; k < nout; k++) {
        if (alias && (k == 0 || k == nout - 1)) {
            out[k] = k == 0 ? in[0] : in[nin - 1];
        } else {
            out[k] = own[k] = nt_alloc(bytes);
            memset(out[k], 0x5a, bytes);
        }
    }
    ASSERT_TRUE(coll_reduce_nt_fits(out, nout));
    coll_reduce_nt(dt, op, (const void *const *)in, nin, out, nout, n);
    for (int k = 0; k < nout; k++) {
        ASSERT_(memcmp(out[k], want, bytes) == 0,
                "dtype %d op %d: %d inputs, output %d of %d, n=%zu%s: differs from the kernels "
                "chained",
                (int)dt, (int)op, nin, k, nout, n, alias ? " (outputs are inputs)" : "");
        for (size_t i = 0; i < GUARD; i++) {
            ASSERT_(((uint8_t *)out[k])[bytes + i] == FILL,
                    "dtype %d: write past element %zu of output %d", (int)dt, n, k);
        }
        nt_checks++;
    }
    for (int q = 0; q < nin; q++) {
        free(in[q]);
    }
    for (int k = 0; k < nout; k++) {
        free(own[k]);
    }
    free(want);
}

int main(void)
{
    static const size_t       sizes[] = {0, 1, 7, 127, 128, 129, 1000, 4099};
    static const coll_redop_t ops[]   = {COLL_SUM, COLL_PROD, COLL_MIN, COLL_MAX, COLL_AVG};
    static const int          nins[]  = {1, 2, 3, 5};

    for (int dt = 0; dt < COLL_DTYPE_COUNT; dt++) {
        for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
            for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
                for (size_t k = 0; k < sizeof(nins) / sizeof(nins[0]); k++) {
                    nt_case((coll_dtype_t)dt, ops[o], nins[k], 1, sizes[s], 0);
                    nt_case((coll_dtype_t)dt, ops[o], nins[k], 3, sizes[s], nins[k] >= 2);
                }
            }
        }
    }
    /* an output off the 16-byte grid is refused, not streamed */
    _Alignas(16) char buf[64];
    void             *odd[2] = {buf, buf + 4};
    ASSERT_TRUE(coll_reduce_nt_fits(odd, 1) && !coll_reduce_nt_fits(odd, 2));
    printf("test_reduce_nt: ok, %ld outputs compared\n", nt_checks);
    return 0;
}
