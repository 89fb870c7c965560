/* SPDX-License-Identifier: MIT */
/*
 * One simulated case of the schedule tests: an algorithm x collective x rank count x count x
 * in/out/mixed place x dtype x op, built for all ranks, checked with coll_sched_check, run in
 * the simulator and compared with a plain reference (sched_case.c). Shared by the matrix and
 * bit-identity tests; no sweeps here.
 */
#ifndef COLL_TEST_SCHED_CASE_H
#define COLL_TEST_SCHED_CASE_H

#include <stdint.h>
#include "algo.h"
#include "sched.h"
#include "sim.h"

#define MAX_RANKS 16

extern int      verbose;         /* -v: one line per case */
extern uint64_t ncases, nevents; /* cases run and simulator events, for the summary */

typedef struct {
    const coll_algo_t *algo;
    coll_args_t        args;
    int                nranks;
    uint64_t           seed;
} tcase_t;

/* args.in_place == TIP_MIXED: odd ranks in place, even ranks not (the flag is per rank). */
#define TIP_MIXED 2

/* Buffers and inputs of one rank. */
typedef struct {
    char  *buf[COLL_BUF_COUNT];
    size_t size[COLL_BUF_COUNT];
    char  *in; /* this rank's input, kept for the reference */
} trank_t;

int tip(const tcase_t *tc, int r);
/* Input element i of rank (small integers), stored into and read from any dtype. */
int    tvalue(const tcase_t *tc, int rank, size_t i);
void   tset(coll_dtype_t dt, void *base, size_t i, int v);
double tget(coll_dtype_t dt, const void *base, size_t i);
void   tbuf_alloc(trank_t *t, int b, size_t bytes);
void   trank_setup(const tcase_t *tc, int r, trank_t *t);
void   trank_free(trank_t *t);
/* Simulator participant p runs schedule s on rank t's buffers, with scratch allocated for it. */
void tproc_bind(sim_proc_t *p, const coll_sched_t *s, trank_t *t);
/* The expected output of every rank, from the inputs (caller frees). */
char *treference(const tcase_t *tc, trank_t *ranks);
void  tdescribe(const tcase_t *tc, char *buf, size_t len);
/* Compare elems elements of rank r's output with the reference; aborts on a mismatch. */
void tcompare(const tcase_t *tc, int r, const char *what, const char *got, const char *want,
              size_t elems);
/* Build and check every rank's schedule; aborts on failure. */
void tbuild(const tcase_t *tc, coll_sched_t *s);
/* Build, simulate under the case's seed and verify; aborts on failure. */
void run_case(const tcase_t *tc);
/* One host whose ranks share windows large enough for every case here. */
void window_layout(coll_layout_t *l, int n);
/* An algorithm that runs only where the ranks share windows. */
int needs_window(const coll_algo_t *a);

#endif
