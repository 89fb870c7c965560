/* SPDX-License-Identifier: MIT */
/*
 * Gradient compressors (coll_compress_*) on fork-based ranks: the error-feedback invariant
 * (sent + residual = accumulated) bit for bit for top-k and for the 1-bit worker side, the 1-bit
 * server side against a reference, top-k with k = count equal to the dense all-reduce, that
 * compressed gradient descent reaches the optimum of a least-squares problem, warm-up steps,
 * byte counters, and argument errors. Not a performance test (bench/compress_bench.c is).
 */
#include "coll_test.h"
#include "coll_train.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static float *alloc_f(size_t n)
{
    float *p = calloc(n ? n : 1, sizeof(float));
    ASSERT_TRUE(p != NULL);
    return p;
}

/* Values in [-1, 1) with a few exact ties and zeros; integer-valued in [-lim, lim] if lim > 0. */
static void fill(float *g, size_t n, uint64_t *seed, int lim)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t r = coll_test_rand(seed);
        if (lim > 0) {
            g[i] = (float)((int)(r % (uint64_t)(2 * lim + 1)) - lim);
        } else {
            g[i] = (r % 97 == 0) ? 0.5f : (float)((double)(r >> 11) / 4503599627370496.0 - 1.0);
        }
    }
}

/* The average over ranks of every rank's `sent`, summed in rank order (the library's order). */
static void average_of(coll_comm_t *comm, int n, const float *sent, size_t count, float *avg)
{
    float *all = alloc_f(count * (size_t)n);
    ASSERT_OK(coll_allgather(sent, all, count, COLL_FLOAT32, comm));
    for (size_t i = 0; i < count; i++) {
        float s = 0.0f;
        for (int p = 0; p < n; p++) {
            s += all[(size_t)p * count + i];
        }
        avg[i] = n > 1 ? s / (float)n : s;
    }
    free(all);
}

/* ---- top-k: invariant, exact selection, result = average of what was sent ---- */

static void topk_check_step(size_t count, size_t k, const float *acc, const float *sent,
                            const float *res)
{
    size_t nsent    = 0;
    float  min_sent = INFINITY, max_kept = 0.0f;
    for (size_t i = 0; i < count; i++) {
        ASSERT_TRUE(sent[i] + res[i] == acc[i]); /* error feedback, exactly */
        if (res[i] == 0.0f && sent[i] == acc[i] && acc[i] != 0.0f) {
            nsent++;
            min_sent = fminf(min_sent, fabsf(sent[i]));
        } else {
            ASSERT_TRUE(sent[i] == 0.0f && res[i] == acc[i]);
            max_kept = fmaxf(max_kept, fabsf(res[i]));
        }
    }
    ASSERT_EQ(nsent, k);               /* the data has no zeros among the top k */
    ASSERT_TRUE(min_sent >= max_kept); /* the k largest magnitudes, exactly */
}

static int topk_rank(int rank, int n, coll_comm_t *comm, void *arg)
{
    size_t                 count = *(const size_t *)arg, k = (count + 99) / 100;
    coll_compress_config_t cfg = COLL_COMPRESS_CONFIG_INITIALIZER;
    coll_compress_t       *c;
    coll_compress_stats_t  st;
    float *g = alloc_f(count), *acc = alloc_f(count), *sent = alloc_f(count), *out = alloc_f(count),
          *avg = alloc_f(count);
    const float *res;
    uint64_t     seed = 1000 + (uint64_t)rank;

    cfg.ratio = 0.01;
    ASSERT_OK(coll_compress_create(comm, &cfg, count, &c));
    for (int step = 0; step < 4; step++) {
        fill(g, count, &seed, 0);
        ASSERT_OK(coll_compress_residual(c, COLL_COMPRESS_WORKER, &res, NULL, NULL));
        for (size_t i = 0; i < count; i++) {
            acc[i] = res[i] + g[i];
        }
        ASSERT_OK(coll_compress_allreduce(c, g, out));
        ASSERT_OK(coll_compress_sent(c, sent));
        ASSERT_OK(coll_compress_residual(c, COLL_COMPRESS_WORKER, &res, NULL, NULL));
        topk_check_step(count, k, acc, sent, res);
        average_of(comm, n, sent, count, avg);
        ASSERT_TRUE(memcmp(avg, out, count * sizeof(float)) == 0);
        ASSERT_OK(coll_compress_get_stats(c, &st));
        ASSERT_EQ(st.sent, k);
        ASSERT_EQ(st.wire_bytes, (uint64_t)(n - 1) * 8 * k);
        ASSERT_EQ(st.dense_bytes, 2 * (uint64_t)(n - 1) * 4 * count / (uint64_t)n);
    }
    ASSERT_EQ(st.steps, 4);
    ASSERT_OK(coll_compress_destroy(c));
    free(g), free(acc), free(sent), free(out), free(avg);
    return 0;
}

/* k = count: every element is sent, so the result is the dense average, bit for bit. */
static int topk_dense_rank(int rank, int n, coll_comm_t *comm, void *arg)
{
    size_t                 count = 1031;
    coll_compress_config_t cfg   = COLL_COMPRESS_CONFIG_INITIALIZER;
    coll_compress_t       *c;
    float                 *g = alloc_f(count), *out = alloc_f(count), *ref = alloc_f(count);
    uint64_t               seed = 7 + (uint64_t)rank;

    cfg.ratio = 1.0;
    ASSERT_OK(coll_compress_create(comm, &cfg, count, &c));
    for (int step = 0; step < 3; step++) {
        fill(g, count, &seed, 1000);
        ASSERT_OK(coll_allreduce(g, ref, count, COLL_FLOAT32, COLL_AVG, comm));
        ASSERT_OK(coll_compress_allreduce(c, g, g)); /* in place */
        ASSERT_TRUE(memcmp(g, ref, count * sizeof(float)) == 0);
    }
    ASSERT_OK(coll_compress_destroy(c));
    free(g), free(out), free(ref);
    return 0;
}

/* ---- through DDP: a compressed bucket gives what a compressor of its own gives ---- */

/* Two parameters in two buckets (cap = one parameter); bucket 1 (the first parameter: buckets
 * fill in reverse registration order) goes through a compressor. Over steps, its gradients must
 * equal those of a standalone compressor of the same settings fed the same gradients, and the
 * dense bucket must equal the dense average. */
static int ddp_rank(int rank, int n, coll_comm_t *comm, void *arg)
{
    const coll_compress_config_t *cfg   = arg;
    size_t                        count = 4099;
    coll_ddp_config_t             dc    = COLL_DDP_CONFIG_INITIALIZER;
    coll_ddp_t                   *ddp;
    coll_compress_t              *ref_c;
    coll_ddp_stats_t              st;
    float   *p0 = alloc_f(count), *p1 = alloc_f(count), *g0 = alloc_f(count), *g1 = alloc_f(count);
    float   *ref0 = alloc_f(count), *ref1 = alloc_f(count);
    uint64_t seed = 11 + (uint64_t)rank;
    int      i0, i1, bucket = -1;

    (void)n;
    dc.bucket_cap_bytes = count * sizeof(float);
    ASSERT_OK(coll_ddp_create(comm, &dc, &ddp));
    ASSERT_OK(coll_ddp_register(ddp, p0, g0, count, COLL_FLOAT32, &i0));
    ASSERT_OK(coll_ddp_register(ddp, p1, g1, count, COLL_FLOAT32, &i1));
    ASSERT_OK(coll_ddp_get_stats(ddp, &st));
    ASSERT_TRUE(coll_ddp_set_bucket_compress(ddp, 2, cfg) == COLL_ERR_INVALID_ARG);
    ASSERT_TRUE(strstr(coll_last_error(), "bucket 2") != NULL);
    ASSERT_TRUE(coll_ddp_set_bucket_comm(ddp, 0, COLL_BUCKET_COMPRESSED) == COLL_ERR_INVALID_ARG);
    /* the bucket of parameter i0: buckets are numbered from the last registered parameter */
    bucket = 1;
    ASSERT_OK(coll_ddp_set_bucket_compress(ddp, bucket, cfg));
    ASSERT_OK(coll_compress_create(comm, cfg, count, &ref_c));
    for (int step = 0; step < 4; step++) {
        fill(g0, count, &seed, 0);
        fill(g1, count, &seed, 0);
        memcpy(ref0, g0, count * sizeof(float));
        ASSERT_OK(coll_allreduce(g1, ref1, count, COLL_FLOAT32, COLL_AVG, comm));
        ASSERT_OK(coll_compress_allreduce(ref_c, ref0, ref0));
        ASSERT_OK(coll_ddp_grad_ready(ddp, i1));
        ASSERT_OK(coll_ddp_grad_ready(ddp, i0));
        ASSERT_OK(coll_ddp_wait(ddp));
        ASSERT_TRUE(memcmp(g0, ref0, count * sizeof(float)) == 0);
        ASSERT_TRUE(memcmp(g1, ref1, count * sizeof(float)) == 0);
    }
    ASSERT_OK(coll_ddp_get_stats(ddp, &st));
    /* 4 steps of the dense bucket alone put 4 * 2 (n-1)/n * count * 4 bytes on the wire */
    ASSERT_TRUE(n == 1 || st.wire_bytes < 2 * 4 * 2 * (uint64_t)(n - 1) * count * 4 / (uint64_t)n);
    ASSERT_OK(coll_ddp_set_bucket_compress(ddp, bucket, NULL)); /* back to dense */
    fill(g0, count, &seed, 0);
    fill(g1, count, &seed, 0);
    ASSERT_OK(coll_allreduce(g0, ref0, count, COLL_FLOAT32, COLL_AVG, comm));
    ASSERT_OK(coll_ddp_grad_ready(ddp, i1));
    ASSERT_OK(coll_ddp_grad_ready(ddp, i0));
    ASSERT_OK(coll_ddp_wait(ddp));
    ASSERT_TRUE(memcmp(g0, ref0, count * sizeof(float)) == 0);
    ASSERT_OK(coll_compress_destroy(ref_c));
    ASSERT_OK(coll_ddp_destroy(ddp));
    free(p0), free(p1), free(g0), free(g1), free(ref0), free(ref1);
    return 0;
}

/* ---- 1-bit: worker and server error feedback ---- */

static int onebit_rank(int rank, int n, coll_comm_t *comm, void *arg)
{
    int                    integer = *(const int *)arg;
    size_t                 count   = integer ? (size_t)n * 32 * 5 : 1000, off, scount;
    coll_compress_config_t cfg     = COLL_COMPRESS_CONFIG_INITIALIZER;
    coll_compress_t       *c;
    coll_compress_stats_t  st;
    float *g = alloc_f(count), *acc = alloc_f(count), *sent = alloc_f(count), *out = alloc_f(count),
          *avg = alloc_f(count), *sres = alloc_f(count);
    const float *res;
    uint64_t     seed = 55 + (uint64_t)rank;

    cfg.kind  = COLL_COMPRESS_ONEBIT;
    cfg.chunk = 32;
    ASSERT_OK(coll_compress_create(comm, &cfg, count, &c));
    /* integer data stays on a grid fp32 holds exactly for 3 steps: the invariant is exact */
    for (int step = 0; step < (integer ? 3 : 5); step++) {
        fill(g, count, &seed, integer ? 16 : 0);
        ASSERT_OK(coll_compress_residual(c, COLL_COMPRESS_WORKER, &res, NULL, NULL));
        for (size_t i = 0; i < count; i++) {
            acc[i] = res[i] + g[i];
        }
        ASSERT_OK(coll_compress_residual(c, COLL_COMPRESS_SERVER, &res, &off, &scount));
        memcpy(sres, res, scount * sizeof(float));
        ASSERT_OK(coll_compress_allreduce(c, g, out));
        ASSERT_OK(coll_compress_sent(c, sent));
        ASSERT_OK(coll_compress_residual(c, COLL_COMPRESS_WORKER, &res, NULL, NULL));
        for (size_t i = 0; i < count; i++) {
            ASSERT_TRUE(res[i] == acc[i] - sent[i]); /* the residual is the rounded difference */
            if (integer) {
                ASSERT_TRUE(sent[i] + res[i] == acc[i]);
            }
        }
        /* server: its shard of the average of what was sent, plus its old residual, is split
         * into what it sent (the result) and its new residual */
        average_of(comm, n, sent, count, avg);
        ASSERT_OK(coll_compress_residual(c, COLL_COMPRESS_SERVER, &res, &off, &scount));
        size_t shard = ((count + (size_t)n - 1) / (size_t)n + 31) / 32 * 32;
        ASSERT_EQ(off, (size_t)rank * shard);
        for (size_t i = 0; i < scount; i++) {
            float z = sres[i] + avg[off + i];
            ASSERT_TRUE(res[i] == z - out[off + i]);
            if (integer) {
                ASSERT_TRUE(out[off + i] + res[i] == z);
            }
        }
        ASSERT_OK(coll_compress_get_stats(c, &st));
        /* one scale and 32 sign bits per 32 elements, through an all-to-all and an all-gather */
        ASSERT_EQ(st.wire_bytes, 2 * (uint64_t)(n - 1) * 4 * (shard / 32 + shard / 32));
    }
    ASSERT_OK(coll_compress_destroy(c));
    free(g), free(acc), free(sent), free(out), free(avg), free(sres);
    return 0;
}

/* ---- compressed gradient descent on least squares ----
 * Rank r holds A_r (m x d) and b_r = A_r x*: the ranks' gradients differ, their optimum is the
 * same x*, so error feedback must carry each rank to it exactly, not to a neighbourhood.
 * Gradient descent with the compressed average must reach |x - x*| / |x*| < 1e-4 (top-k 1%
 * at step 0.02: about 700-1600 steps; 1-bit at step 0.2: about 500-1400). */

typedef struct {
    coll_compress_config_t cfg;
    int                    max_steps;
    double                 tol;
    float                  lr;
} sgd_case_t;

static int sgd_rank(int rank, int n, coll_comm_t *comm, void *arg)
{
    const sgd_case_t *sc = arg;
    enum { D = 200, M = 8 * D };
    float *h = alloc_f(D * D), *cv = alloc_f(D), *x = alloc_f(D), *g = alloc_f(D), *u = alloc_f(D),
          *a              = alloc_f(M * D), xs[D];
    uint64_t         seed = 99, rseed = 1234 + (uint64_t)rank;
    coll_compress_t *c;
    double           err = INFINITY, norm = 0.0;
    int              step;

    for (int j = 0; j < D; j++) { /* the same x* everywhere */
        xs[j] = (float)((double)(coll_test_rand(&seed) >> 11) / 4503599627370496.0 - 1.0);
        norm += (double)xs[j] * xs[j];
    }
    for (size_t i = 0; i < (size_t)M * D; i++) { /* variance 1: H_r is close to I */
        a[i] = (float)(((double)(coll_test_rand(&rseed) >> 11) / 4503599627370496.0 - 1.0) *
                       sqrt(3.0));
    }
    for (int i = 0; i < D; i++) { /* H_r = A^T A / m, c_r = H_r x* */
        for (int j = 0; j < D; j++) {
            double s = 0.0;
            for (int r = 0; r < M; r++) {
                s += (double)a[r * D + i] * a[r * D + j];
            }
            h[i * D + j] = (float)(s / M);
        }
    }
    for (int i = 0; i < D; i++) {
        double s = 0.0;
        for (int j = 0; j < D; j++) {
            s += (double)h[i * D + j] * xs[j];
        }
        cv[i] = (float)s;
    }
    ASSERT_OK(coll_compress_create(comm, &sc->cfg, D, &c));
    for (step = 0; step < sc->max_steps; step++) {
        for (int i = 0; i < D; i++) {
            double s = -(double)cv[i];
            for (int j = 0; j < D; j++) {
                s += (double)h[i * D + j] * x[j];
            }
            g[i] = (float)s;
        }
        ASSERT_OK(coll_compress_allreduce(c, g, u));
        err = 0.0;
        for (int j = 0; j < D; j++) {
            x[j] -= sc->lr * u[j];
            err += ((double)x[j] - xs[j]) * ((double)x[j] - xs[j]);
        }
        err = sqrt(err / norm);
        if (err < sc->tol) { /* x is identical on every rank: they all stop here */
            break;
        }
    }
    if (rank == 0) {
        if (sc->cfg.kind == COLL_COMPRESS_TOPK) {
            printf("  top-k ratio %g momentum %d:", sc->cfg.ratio, sc->cfg.momentum);
        } else {
            printf("  1-bit chunk %zu:", sc->cfg.chunk);
        }
        printf(" |x - x*| / |x*| = %.2e after %d steps\n", err, step + 1);
    }
    ASSERT_TRUE(err < sc->tol);
    ASSERT_OK(coll_compress_destroy(c));
    free(h), free(cv), free(x), free(g), free(u), free(a);
    return 0;
}

/* ---- warm-up and argument errors ---- */

#define EXPECT_ERR(_call, _code, _needle)                                                          \
    do {                                                                                           \
        coll_result_t _st = (_call);                                                               \
        ASSERT_EQ(_st, (_code));                                                                   \
        ASSERT_STR_CONTAINS(coll_last_error(), (_needle));                                         \
    } while (0)

static int args_rank(int rank, int n, coll_comm_t *comm, void *arg)
{
    coll_compress_config_t cfg = COLL_COMPRESS_CONFIG_INITIALIZER;
    coll_compress_t       *c   = NULL;
    coll_compress_stats_t  st;
    float                  g[64] = {0}, out[64];
    const float           *res;

    EXPECT_ERR(coll_compress_create(NULL, &cfg, 64, &c), COLL_ERR_INVALID_ARG, "comm is NULL");
    EXPECT_ERR(coll_compress_create(comm, &cfg, 64, NULL), COLL_ERR_INVALID_ARG, "c_p is NULL");
    cfg.ratio = 0.0;
    EXPECT_ERR(coll_compress_create(comm, &cfg, 64, &c), COLL_ERR_INVALID_ARG, "ratio 0");
    cfg.ratio = 1.5;
    EXPECT_ERR(coll_compress_create(comm, &cfg, 64, &c), COLL_ERR_INVALID_ARG, "0 < ratio <= 1");
    cfg.ratio = NAN;
    EXPECT_ERR(coll_compress_create(comm, &cfg, 64, &c), COLL_ERR_INVALID_ARG, "ratio");
    cfg.ratio = 0.5;
    EXPECT_ERR(coll_compress_create(comm, &cfg, 0, &c), COLL_ERR_INVALID_ARG, "count 0");
    cfg.kind = (coll_compress_kind_t)7;
    EXPECT_ERR(coll_compress_create(comm, &cfg, 64, &c), COLL_ERR_INVALID_ARG, "kind 7");
    cfg.kind  = COLL_COMPRESS_ONEBIT;
    cfg.chunk = 33;
    EXPECT_ERR(coll_compress_create(comm, &cfg, 64, &c), COLL_ERR_INVALID_ARG, "multiple of 32");
    cfg.chunk    = 0;
    cfg.momentum = 1;
    EXPECT_ERR(coll_compress_create(comm, &cfg, 64, &c), COLL_ERR_INVALID_ARG, "TOPK only");
    cfg = (coll_compress_config_t)COLL_COMPRESS_CONFIG_INITIALIZER;
    cfg.size--;
    EXPECT_ERR(coll_compress_create(comm, &cfg, 64, &c), COLL_ERR_INVALID_ARG, "config->size");
    /* ranks that disagree, or one rank with bad settings: every rank returns, none hangs */
    cfg       = (coll_compress_config_t)COLL_COMPRESS_CONFIG_INITIALIZER;
    cfg.ratio = rank == 0 ? 0.1 : 0.2;
    EXPECT_ERR(coll_compress_create(comm, &cfg, 64, &c), COLL_ERR_MISMATCH, "different ratio");
    cfg.ratio = rank == 0 ? 0.1 : 0.0;
    EXPECT_ERR(coll_compress_create(comm, &cfg, 64, &c), COLL_ERR_INVALID_ARG,
               rank == 0 ? "another rank" : "ratio 0");
    ASSERT_TRUE(c == NULL);

    /* usage errors on a working compressor; two dense warm-up steps first */
    cfg.ratio        = 0.1;
    cfg.warmup_steps = 2;
    ASSERT_OK(coll_compress_create(comm, &cfg, 64, &c));
    EXPECT_ERR(coll_compress_allreduce(c, NULL, out), COLL_ERR_INVALID_ARG, "grad is NULL");
    EXPECT_ERR(coll_compress_wait(c), COLL_ERR_INVALID_USAGE, "no step in flight");
    EXPECT_ERR(coll_compress_sent(c, out), COLL_ERR_INVALID_USAGE, "no completed step");
    EXPECT_ERR(coll_compress_residual(c, COLL_COMPRESS_SERVER, &res, NULL, NULL),
               COLL_ERR_INVALID_ARG, "side 1");
    for (int step = 0; step < 3; step++) {
        for (int i = 0; i < 64; i++) {
            g[i] = (float)(i + rank);
        }
        ASSERT_OK(coll_compress_start(c, g, out));
        EXPECT_ERR(coll_compress_start(c, g, out), COLL_ERR_INVALID_USAGE, "already in flight");
        ASSERT_OK(coll_compress_wait(c));
        ASSERT_OK(coll_compress_get_stats(c, &st));
        ASSERT_EQ(st.dense, step < 2);
        if (step < 2) { /* dense: the plain average, nothing left behind */
            for (int i = 0; i < 64; i++) {
                ASSERT_TRUE(out[i] == (float)i + (float)(n - 1) / 2.0f);
            }
            ASSERT_EQ(st.wire_bytes, st.dense_bytes);
        } else {
            ASSERT_EQ(st.sent, 7); /* ceil(0.1 * 64) */
        }
    }
    { /* restored state: steps counted, but nothing of this object's was sent yet */
        size_t bytes = 0;
        void  *blob;
        ASSERT_OK(coll_compress_sent(c, out));
        ASSERT_OK(coll_compress_state_size(c, &bytes));
        blob = malloc(bytes);
        ASSERT_TRUE(blob != NULL);
        ASSERT_OK(coll_compress_get_state(c, blob, bytes));
        ASSERT_OK(coll_compress_set_state(c, blob, bytes));
        free(blob);
        EXPECT_ERR(coll_compress_sent(c, out), COLL_ERR_INVALID_USAGE, "no completed step");
    }
    ASSERT_OK(coll_compress_destroy(c));
    EXPECT_ERR(coll_compress_destroy(NULL), COLL_ERR_INVALID_ARG, "c is NULL");
    return 0;
}

/* ---- driver ---- */

static const char *only; /* argv[1]: run the cases whose name contains it */

static int run(const char *what, int nranks, coll_test_rank_fn_t fn, void *arg, int *failed)
{
    coll_test_opts_t o = {.nranks = nranks, .want_comm = 1, .timeout_s = 120};
    int              rc;

    if (only != NULL && strstr(what, only) == NULL) {
        return 0;
    }
    rc = coll_test_run_ranks(&o, fn, arg);
    printf("%s: %s, %d ranks\n", rc ? "FAIL" : "PASS", what, nranks);
    fflush(stdout);
    *failed += rc != 0;
    return rc;
}

int main(int argc, char **argv)
{
    int        failed = 0, one = 1, zero = 0;
    size_t     small = 1000, large = 200000; /* exact selection; sampled threshold */
    sgd_case_t topk  = {COLL_COMPRESS_CONFIG_INITIALIZER, 20000, 1e-4, 0.02f};
    sgd_case_t topkm = topk, onebit = topk;

    topk.cfg.ratio                  = 0.01;
    topkm.cfg.momentum              = 1;
    topkm.cfg.momentum_factor       = 0.5f;
    topkm.cfg.warmup_steps          = 5;
    topkm.cfg.sparsity_warmup_steps = 20;
    onebit.cfg.kind                 = COLL_COMPRESS_ONEBIT;
    /* The training layer's worker runs on a communicator split from the test's: bit-equality
     * with the test's own all-reduces needs both to pick the same algorithm, so neither may
     * tune on timings measured under load. */
    setenv("COLL_TUNE_MEASURE", "0", 1);
    onebit.cfg.chunk = 32;
    onebit.max_steps = 5000;
    only             = argc > 1 ? argv[1] : NULL;
    setvbuf(stdout, NULL, _IOLBF, 0);
    run("argument errors, warm-up", 2, args_rank, NULL, &failed);
    run("top-k invariant, 1000 elements", 2, topk_rank, &small, &failed);
    run("top-k invariant, 1000 elements", 3, topk_rank, &small, &failed);
    run("top-k invariant, 200000 elements", 2, topk_rank, &large, &failed);
    for (int n = 1; n <= 4; n++) {
        run("top-k with k = count is the dense all-reduce", n, topk_dense_rank, NULL, &failed);
    }
    run("1-bit invariants, integer data", 2, onebit_rank, &one, &failed);
    run("1-bit invariants, integer data", 4, onebit_rank, &one, &failed);
    run("1-bit invariants", 3, onebit_rank, &zero, &failed);
    for (int n = 2; n <= 4; n += 2) {
        run("least squares, top-k 1%", n, sgd_rank, &topk, &failed);
        run("least squares, top-k 1%, momentum correction, warm-up", n, sgd_rank, &topkm, &failed);
        run("least squares, 1-bit", n, sgd_rank, &onebit, &failed);
    }
    for (int n = 2; n <= 3; n++) {
        run("DDP bucket through top-k", n, ddp_rank, &topk.cfg, &failed);
        run("DDP bucket through 1-bit", n, ddp_rank, &onebit.cfg, &failed);
    }
    printf("%d failed\n", failed);
    return failed != 0;
}
