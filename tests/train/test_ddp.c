/* SPDX-License-Identifier: MIT */
/*
 * DDP: gradients of every rank after coll_ddp_wait equal the single-process gradients of the
 * same global batch -- exactly on integer-valued data (sum), within 1e-5 in fp32 (average),
 * within bf16/fp16 rounding with a half-precision wire -- across bucket caps (one bucket per
 * parameter .. one bucket), caller-owned and view gradients, rank-dependent ready orders and
 * gradient accumulation; then the layer's stats and its argument errors.
 */
#include "coll_test.h"
#include "coll_train.h"
#include "train_model.h"

#include <math.h>
#include <stdlib.h>

#define DIM    6
#define LAYERS 3
#define BATCH  4

typedef struct {
    int          ints;       /* integer data, summed: exact comparison */
    size_t       cap;        /* bucket cap in bytes */
    int          views;      /* gradients in the buckets' flat buffers */
    coll_dtype_t wire;       /* wire dtype */
    int          accumulate; /* micro-batches per step (sync off for all but the last) */
    int          shuffle;    /* rank-dependent order of grad_ready within a layer */
} ddp_case_t;

typedef struct {
    coll_ddp_t *ddp;
    int         rank;
    int         shuffle;
} ready_ctx_t;

static void ddp_layer_done(int layer, void *arg)
{
    ready_ctx_t *c = arg;
    int          w = 2 * layer, b = 2 * layer + 1; /* registered as w0 b0 w1 b1 ... */
    if (c->shuffle && (c->rank + layer) % 2 == 1) {
        ASSERT_OK(coll_ddp_grad_ready(c->ddp, w));
        ASSERT_OK(coll_ddp_grad_ready(c->ddp, b));
    } else {
        ASSERT_OK(coll_ddp_grad_ready(c->ddp, b));
        ASSERT_OK(coll_ddp_grad_ready(c->ddp, w));
    }
}

static void model_init(tm_model_t *m, int ints)
{
    m->nlayers = LAYERS;
    m->dim     = DIM;
    for (int l = 0; l < LAYERS; l++) {
        m->w[l] = calloc(DIM * DIM, sizeof(float));
        m->b[l] = calloc(DIM, sizeof(float));
        tm_fill(m->w[l], DIM * DIM, 100 + (uint64_t)l, ints);
        tm_fill(m->b[l], DIM, 200 + (uint64_t)l, ints);
    }
}

static void model_free(tm_model_t *m)
{
    for (int l = 0; l < LAYERS; l++) {
        free(m->w[l]);
        free(m->b[l]);
    }
}

static double tolerance(const ddp_case_t *c)
{
    if (c->ints) {
        return 0.0;
    }
    return c->wire == COLL_BFLOAT16 ? 2e-2 : c->wire == COLL_FLOAT16 ? 2e-3 : 1e-5;
}

static int ddp_case_rank(int rank, int n, coll_comm_t *comm, void *arg)
{
    const ddp_case_t *c   = arg;
    coll_ddp_config_t cfg = COLL_DDP_CONFIG_INITIALIZER;
    coll_ddp_t       *ddp;
    tm_model_t        m;
    float            *gw[LAYERS], *gb[LAYERS], *rw[LAYERS], *rb[LAYERS];
    int               micro  = c->accumulate > 0 ? c->accumulate : 1;
    int               gbatch = BATCH * n * micro;
    float            *x      = malloc(sizeof(float) * DIM * (size_t)gbatch);
    float            *t      = malloc(sizeof(float) * DIM * (size_t)gbatch);

    model_init(&m, c->ints);
    tm_fill(x, (size_t)DIM * (size_t)gbatch, 7, c->ints);
    tm_fill(t, (size_t)DIM * (size_t)gbatch, 8, c->ints);
    cfg.bucket_cap_bytes = c->cap;
    cfg.wire_dtype       = c->wire;
    cfg.sum              = c->ints;
    ASSERT_OK(coll_ddp_create(comm, &cfg, &ddp));
    for (int l = 0; l < LAYERS; l++) {
        rw[l] = calloc(DIM * DIM, sizeof(float));
        rb[l] = calloc(DIM, sizeof(float));
        gw[l] = c->views ? NULL : calloc(DIM * DIM, sizeof(float));
        gb[l] = c->views ? NULL : calloc(DIM, sizeof(float));
        ASSERT_OK(coll_ddp_register(ddp, m.w[l], gw[l], DIM * DIM, COLL_FLOAT32, NULL));
        ASSERT_OK(coll_ddp_register(ddp, m.b[l], gb[l], DIM, COLL_FLOAT32, NULL));
    }
    for (int l = 0; l < LAYERS && c->views; l++) {
        ASSERT_OK(coll_ddp_grad(ddp, 2 * l, (void **)&gw[l]));
        ASSERT_OK(coll_ddp_grad(ddp, 2 * l + 1, (void **)&gb[l]));
    }
    /* two steps, so that the reset between steps is exercised too */
    for (int step = 0; step < 2; step++) {
        ready_ctx_t rc = {ddp, rank, c->shuffle};
        ASSERT_OK(coll_ddp_zero_grad(ddp));
        for (int k = 0; k < micro; k++) {
            /* this rank's micro-batch k: samples [(k * n + rank) * BATCH, ... + BATCH) */
            size_t off   = ((size_t)k * (size_t)n + (size_t)rank) * BATCH * DIM;
            float  scale = c->ints ? 1.0f : 1.0f / (float)(BATCH * micro);
            ASSERT_OK(coll_ddp_set_sync(ddp, k == micro - 1));
            tm_backward(&m, x + off, t + off, BATCH, scale, gw, gb, ddp_layer_done, &rc);
            ASSERT_OK(coll_ddp_wait(ddp));
        }
        for (int l = 0; l < LAYERS; l++) {
            memset(rw[l], 0, sizeof(float) * DIM * DIM);
            memset(rb[l], 0, sizeof(float) * DIM);
        }
        tm_backward(&m, x, t, gbatch, c->ints ? 1.0f : 1.0f / (float)gbatch, rw, rb, NULL, NULL);
        double maxdiff = 0.0, tol = tolerance(c);
        for (int l = 0; l < LAYERS; l++) {
            for (int i = 0; i < DIM * DIM; i++) {
                maxdiff = fmax(maxdiff, fabs((double)gw[l][i] - rw[l][i]) / (1.0 + fabs(rw[l][i])));
            }
            for (int i = 0; i < DIM; i++) {
                maxdiff = fmax(maxdiff, fabs((double)gb[l][i] - rb[l][i]) / (1.0 + fabs(rb[l][i])));
            }
        }
        ASSERT_(maxdiff <= tol, "rank %d step %d: maxdiff %g > tolerance %g", rank, step, maxdiff,
                tol);
    }
    coll_ddp_stats_t st;
    ASSERT_OK(coll_ddp_get_stats(ddp, &st));
    ASSERT_EQ(st.steps, 2);
    ASSERT_EQ(st.nosync_steps, 2 * (micro - 1));
    ASSERT_EQ(st.nparams, 2 * LAYERS);
    ASSERT_TRUE(st.nbuckets >= 1 && st.nbuckets <= 2 * LAYERS);
    if (c->cap == 1) {
        ASSERT_EQ(st.nbuckets, 2 * LAYERS); /* a parameter larger than the cap is alone */
    }
    size_t welem = (size_t)LAYERS * (DIM * DIM + DIM);
    ASSERT_EQ(st.payload_bytes, 2 * welem * coll_dtype_size(c->wire));
    ASSERT_TRUE(st.overlap >= 0.0 && st.overlap <= 1.0);
    ASSERT_EQ(st.param_bytes, welem * 4);
    ASSERT_TRUE(st.grad_bytes >= welem * 4);
    ASSERT_OK(coll_ddp_destroy(ddp));
    for (int l = 0; l < LAYERS; l++) {
        free(rw[l]), free(rb[l]);
        if (!c->views) {
            free(gw[l]), free(gb[l]);
        }
    }
    model_free(&m);
    free(x), free(t);
    return 0;
}

/* Invalid arguments and usage: an error code and a message naming the argument. */
static int ddp_errors_rank(int rank, int n, coll_comm_t *comm, void *arg)
{
    char              text[1024];
    coll_ddp_config_t cfg = COLL_DDP_CONFIG_INITIALIZER;
    coll_ddp_t       *ddp;
    float             p[4] = {(float)rank, 1, 2, 3}, g[4] = {0};
    void             *v;

    (void)n, (void)arg;
    cfg.wire_dtype = COLL_INT32;
    ASSERT_EQ(coll_ddp_create(comm, &cfg, &ddp), COLL_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(coll_last_error(), "wire_dtype");
    cfg.wire_dtype = COLL_FLOAT32;
    cfg.comm_op    = COLL_BUCKET_COMPRESSED; /* set per bucket, with its compressor */
    ASSERT_EQ(coll_ddp_create(comm, &cfg, &ddp), COLL_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(coll_last_error(), "comm_op");
    cfg.comm_op = COLL_BUCKET_DENSE;
    cfg.size    = 3;
    ASSERT_EQ(coll_ddp_create(comm, &cfg, &ddp), COLL_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(coll_last_error(), "config->size");
    ASSERT_EQ(coll_ddp_create(NULL, NULL, &ddp), COLL_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(coll_last_error(), "comm");
    ASSERT_OK(coll_ddp_create(comm, NULL, &ddp));
    ASSERT_EQ(coll_ddp_wait(ddp), COLL_ERR_INVALID_USAGE); /* nothing registered */
    ASSERT_EQ(coll_ddp_register(ddp, p, g, 0, COLL_FLOAT32, NULL), COLL_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(coll_last_error(), "count");
    ASSERT_EQ(coll_ddp_register(ddp, p, g, 4, COLL_INT8, NULL), COLL_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(coll_last_error(), "dtype");
    ASSERT_EQ(coll_ddp_register(NULL, p, g, 4, COLL_FLOAT32, NULL), COLL_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(coll_last_error(), "ddp is NULL");
    ASSERT_OK(coll_ddp_register(ddp, p, g, 4, COLL_FLOAT32, NULL));
    ASSERT_OK(coll_ddp_register(ddp, p, NULL, 4, COLL_FLOAT32, NULL));
    ASSERT_EQ(coll_ddp_grad(ddp, 2, &v), COLL_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(coll_last_error(), "index 2");
    ASSERT_EQ(coll_ddp_grad(ddp, 0, NULL), COLL_ERR_INVALID_ARG);
    ASSERT_EQ(coll_ddp_grad_ready(ddp, -1), COLL_ERR_INVALID_ARG);
    ASSERT_OK(coll_ddp_grad_ready(ddp, 0));
    ASSERT_EQ(coll_ddp_grad_ready(ddp, 0), COLL_ERR_INVALID_USAGE);
    ASSERT_STR_CONTAINS(coll_last_error(), "twice");
    ASSERT_EQ(coll_ddp_arrival_stats(ddp, text, sizeof(text)), COLL_ERR_INVALID_USAGE);
    ASSERT_STR_CONTAINS(coll_last_error(), "coll_ddp_wait");
    ASSERT_EQ(coll_ddp_set_sync(ddp, 0), COLL_ERR_INVALID_USAGE);
    ASSERT_EQ(coll_ddp_register(ddp, p, g, 4, COLL_FLOAT32, NULL), COLL_ERR_INVALID_USAGE);
    ASSERT_OK(coll_ddp_wait(ddp));
    ASSERT_EQ(coll_ddp_set_sync(ddp, 2), COLL_ERR_INVALID_ARG);
    ASSERT_EQ(coll_ddp_set_bucket_comm(ddp, 5, COLL_BUCKET_DENSE), COLL_ERR_INVALID_ARG);
    ASSERT_EQ(coll_ddp_set_bucket_comm(ddp, 0, COLL_BUCKET_COMM_COUNT), COLL_ERR_INVALID_ARG);
    ASSERT_OK(coll_ddp_set_bucket_comm(ddp, 0, COLL_BUCKET_DENSE));
    ASSERT_EQ(coll_ddp_broadcast_params(ddp, 99), COLL_ERR_INVALID_ARG);
    ASSERT_OK(coll_ddp_broadcast_params(ddp, 0));
    ASSERT_TRUE(p[0] == 0.0f); /* rank 0's parameters everywhere */
    ASSERT_EQ(coll_ddp_get_stats(ddp, NULL), COLL_ERR_INVALID_ARG);
    ASSERT_EQ(coll_ddp_arrival_stats(ddp, NULL, 10), COLL_ERR_INVALID_ARG);
    ASSERT_EQ(coll_ddp_arrival_stats(NULL, text, sizeof(text)), COLL_ERR_INVALID_ARG);
    ASSERT_OK(coll_ddp_arrival_stats(ddp, text, sizeof(text))); /* collective, between steps */
    size_t xlen = 99;
    ASSERT_OK(coll_ddp_compress_state_size(ddp, &xlen));
    ASSERT_EQ(xlen, 0); /* no compressed bucket: no state */
    ASSERT_OK(coll_ddp_set_compress_state(ddp, text, 0));
    ASSERT_EQ(coll_ddp_set_compress_state(ddp, text, 8), COLL_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(coll_last_error(), "expected 0 bytes");
    ASSERT_STR_CONTAINS(text, "collectives seen by all");
    ASSERT_OK(coll_ddp_destroy(ddp));
    return 0;
}

int main(void)
{
    static const ddp_case_t cases[] = {
        {.ints = 1, .cap = 1, .wire = COLL_FLOAT32},
        {.ints = 1, .cap = 200, .views = 1, .wire = COLL_FLOAT32, .shuffle = 1},
        {.ints = 1, .cap = 0, .wire = COLL_FLOAT32, .accumulate = 3},
        {.ints = 0, .cap = 160, .wire = COLL_FLOAT32, .shuffle = 1},
        {.ints = 0, .cap = 160, .views = 1, .wire = COLL_BFLOAT16},
        {.ints = 0, .cap = 0, .wire = COLL_FLOAT16, .accumulate = 2},
    };
    static const int nranks[] = {2, 3, 4};
    const char      *tps[8];
    int              ntp = coll_test_transports(tps, 8), failed = 0;

    for (int t = 0; t < ntp; t++) {
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
            int              n = nranks[i % 3];
            coll_test_opts_t o = {
                .nranks = n, .want_comm = 1, .timeout_s = 60, .transport = tps[t]};
            int rc = coll_test_run_ranks(&o, ddp_case_rank, (void *)&cases[i]);
            printf("%s: ddp case %zu over %s, %d ranks\n", rc ? "FAIL" : "PASS", i, tps[t], n);
            failed += rc != 0;
        }
    }
    coll_test_opts_t o  = {.nranks = 2, .want_comm = 1, .timeout_s = 60};
    int              rc = coll_test_run_ranks(&o, ddp_errors_rank, NULL);
    printf("%s: ddp argument errors\n", rc ? "FAIL" : "PASS");
    failed += rc != 0;
    return failed ? 1 : 0;
}
