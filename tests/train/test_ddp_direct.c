/* SPDX-License-Identifier: MIT */
/*
 * DDP among the ranks of one host (shm): the layer's buckets are registered with its
 * communicator, and its all-reduces run inline on the direct path, interleaved with ones the
 * engine runs in flight. Exact sums of integer-valued gradients over buckets of 16 B to 280 KB,
 * three steps, in three settings, each with the library's log checked for the path taken:
 *   (a) defaults: every bucket past the small-call limit on registered buffers;
 *   (b) COLL_DIRECT_MIN=64k: the 8-12 KB buckets on the engine, in flight while the others
 *       run inline (the worker ends them first, in submission order);
 *   (c) COLL_DIRECT=0: registrations unused, the large buckets by cross-memory attach;
 *   (d) bf16 on the wire: the wire-dtype copies registered, every bucket inline (small values,
 *       exact in bf16).
 */
#include "coll.h"
#include "coll_test.h"
#include "coll_train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REG_MARK "direct, registered buffers"
#define CMA_MARK "direct, cross-memory attach"
/* the engine's first all-reduce on a communicator logs its size and algorithm ("allreduce of
 * N bytes"); the direct path's first is the largest bucket, and the small-call path logs none:
 * the line with the size of bucket ENGINE_PARAM tells whether the engine ran it */
#define ENGINE_PARAM 4

static const size_t sizes[] = {8, 2000, 40000, 16, 3000, 70000, 4}; /* floats per parameter */
#define NPARAMS ((int)(sizeof(sizes) / sizeof(sizes[0])))
#define STEPS   3

typedef struct {
    const char  *mark;   /* the path's log line every rank must show, NULL: none */
    int          absent; /* 1: REG_MARK must not appear */
    int          engine; /* 1: bucket ENGINE_PARAM (12000 bytes in fp32) on the engine, 0: not */
    coll_dtype_t wire;   /* the buckets' wire dtype */
} direct_case_t;

/* integers; with a half-precision wire small enough to stay exact in bf16 and fp16 */
static float grad_value(int rank, int p, size_t i, int step, int half)
{
    size_t v = half ? (i + (size_t)p + (size_t)step) % 8 : (i % 97) + (size_t)p + (size_t)step;
    return (float)((rank + 1) * (int)v);
}

static int ddp_direct_rank(int rank, int n, coll_comm_t *comm, void *arg)
{
    const direct_case_t *c   = arg;
    coll_ddp_config_t    cfg = COLL_DDP_CONFIG_INITIALIZER;
    coll_ddp_t          *ddp;
    float               *param[NPARAMS], *grad[NPARAMS];
    size_t               wrong = 0;

    cfg.bucket_cap_bytes = 1; /* one bucket per parameter */
    cfg.sum              = 1;
    cfg.wire_dtype       = c->wire;
    ASSERT_OK(coll_ddp_create(comm, &cfg, &ddp));
    for (int p = 0; p < NPARAMS; p++) {
        param[p] = calloc(sizes[p], sizeof(float));
        ASSERT_TRUE(param[p] != NULL);
        ASSERT_OK(coll_ddp_register(ddp, param[p], NULL, sizes[p], COLL_FLOAT32, NULL));
    }
    for (int p = 0; p < NPARAMS; p++) {
        ASSERT_OK(coll_ddp_grad(ddp, p, (void **)&grad[p]));
    }
    for (int step = 0; step < STEPS; step++) {
        ASSERT_OK(coll_ddp_zero_grad(ddp));
        for (int p = NPARAMS - 1; p >= 0; p--) { /* as backward reports them */
            for (size_t i = 0; i < sizes[p]; i++) {
                grad[p][i] = grad_value(rank, p, i, step, c->wire != COLL_FLOAT32);
            }
            ASSERT_OK(coll_ddp_grad_ready(ddp, p));
        }
        ASSERT_OK(coll_ddp_wait(ddp));
        for (int p = 0; p < NPARAMS; p++) {
            for (size_t i = 0; i < sizes[p]; i++) {
                float want = 0.0f;
                for (int r = 0; r < n; r++) {
                    want += grad_value(r, p, i, step, c->wire != COLL_FLOAT32);
                }
                if (grad[p][i] != want && wrong++ < 3) {
                    fprintf(stderr, "rank %d step %d param %d [%zu] = %g, want %g\n", rank, step, p,
                            i, (double)grad[p][i], (double)want);
                }
            }
        }
    }
    ASSERT_OK(coll_ddp_destroy(ddp)); /* frees the registered buckets after their communicator */
    ASSERT_EQ(wrong, 0);
    if (c->mark != NULL) {
        ASSERT_TRUE(coll_test_log_count(c->mark) >= 1);
    }
    char engine_mark[64];
    snprintf(engine_mark, sizeof(engine_mark), "allreduce of %zu bytes",
             sizes[ENGINE_PARAM] * (c->wire == COLL_FLOAT32 ? 4 : 2));
    ASSERT_EQ(coll_test_log_count(engine_mark) > 0, c->engine);
    if (c->absent) {
        ASSERT_EQ(coll_test_log_count(REG_MARK), 0);
    }
    for (int p = 0; p < NPARAMS; p++) {
        free(param[p]);
    }
    return 0;
}

int main(void)
{
    static const direct_case_t reg   = {REG_MARK, 0, 0, COLL_FLOAT32},
                               mixed = {REG_MARK, 0, 1, COLL_FLOAT32},
                               cma   = {CMA_MARK, 1, 1, COLL_FLOAT32},
                               half  = {REG_MARK, 0, 0, COLL_BFLOAT16};
    int failed                       = 0;

    if (!coll_test_direct_setup()) {
        return COLL_TEST_SKIP;
    }
    for (int n = 2; n <= 3; n++) {
        coll_test_opts_t o = {.nranks = n, .want_comm = 1, .timeout_s = 120, .transport = "shm"};
        failed += coll_test_run_logged("(a) ddp buckets registered, inline", &o, "direct",
                                       ddp_direct_rank, (void *)&reg);
        setenv("COLL_DIRECT_MIN", "64k", 1);
        failed += coll_test_run_logged("(b) ddp buckets inline and in flight", &o, "direct",
                                       ddp_direct_rank, (void *)&mixed);
        unsetenv("COLL_DIRECT_MIN");
        setenv("COLL_DIRECT", "0", 1);
        failed += coll_test_run_logged("(c) ddp buckets by cross-memory attach", &o, "direct",
                                       ddp_direct_rank, (void *)&cma);
        unsetenv("COLL_DIRECT");
        failed += coll_test_run_logged("(d) ddp bf16 wire buffers registered, inline", &o, "direct",
                                       ddp_direct_rank, (void *)&half);
    }
    return failed != 0;
}
