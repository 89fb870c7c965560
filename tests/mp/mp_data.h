/* SPDX-License-Identifier: MIT */
/*
 * Test data for the multi-process correctness matrix: values as doubles stored into any dtype
 * (fp16/bf16 rounded to nearest even from fp32, like the library), input patterns chosen so
 * that every op's exact result is representable, and the expected result of each op.
 */
#ifndef COLL_TEST_MP_DATA_H
#define COLL_TEST_MP_DATA_H

#include <stddef.h>
#include "coll.h"

void   mp_store(coll_dtype_t dt, void *buf, size_t i, double v);
double mp_load(coll_dtype_t dt, const void *buf, size_t i);
/* Input element i of rank for op (small integers; 1 or 2 for prod). */
double mp_input(coll_redop_t op, int rank, size_t i);
/* Expected op over ranks 0..n-1 of mp_input, as the library computes it in dtype dt. */
double mp_expect(coll_dtype_t dt, coll_redop_t op, int n, size_t i);
/* Fill count elements of rank's input; compare count elements, returns wrong count and prints
 * the first mismatch with what. */
void   mp_fill(coll_dtype_t dt, coll_redop_t op, void *buf, size_t count, int rank,
               size_t index_base);
size_t mp_check(coll_dtype_t dt, const void *buf, size_t count, const char *what, int rank,
                double (*expect)(coll_dtype_t, coll_redop_t, int, size_t, void *), coll_redop_t op,
                int n, size_t index_base, void *ctx);

#endif
