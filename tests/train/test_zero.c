/* SPDX-License-Identifier: MIT */
/*
 * ZeRO: parameters after K steps of stages 0-3 (AdamW and SGD with momentum) equal those of
 * DDP followed by a reference optimizer written here, within fp32 tolerance; the layer's own
 * accounting shows each stage's promise (optimizer state, gradients, parameters divided by
 * the rank count; stage 3 at 4 ranks <= 1/4 of stage 0 + 5%; transient buffers released);
 * a checkpoint written at one rank count and stage loads at another and training continues
 * as if uninterrupted, also where a rank's shard of a layer is padding only; a checkpoint
 * inside a step is refused; argument errors name the argument.
 */
#include "coll_test.h"
#include "coll_train.h"
#include "train_model.h"

#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#define DIM    8
#define LAYERS 4
#define GBATCH 24 /* global batch, split over 1, 2, 3 or 4 ranks */
#define NPARAM (2 * LAYERS)

typedef struct {
    int          stage;
    coll_optim_t optim;
    int          steps;
    int          save_after; /* > 0: save to dir after this many steps, then stop */
    int          load;       /* 1: load from dir first */
    const char  *dir;
} zero_case_t;

static coll_optim_config_t optim_config(coll_optim_t kind)
{
    coll_optim_config_t o = {kind, 0.01f, 0.9f, 0.9f, 0.999f, 1e-8f, 0.01f};
    return o;
}

static size_t param_count(int i)
{
    return i % 2 == 0 ? DIM * DIM : DIM;
}

static void initial_params(float **p)
{
    for (int i = 0; i < NPARAM; i++) {
        p[i] = calloc(param_count(i), sizeof(float));
        tm_fill(p[i], param_count(i), 300 + (uint64_t)i, 0);
        for (size_t k = 0; k < param_count(i); k++) {
            p[i][k] *= 0.5f;
        }
    }
}

static void model_view(tm_model_t *m, float **p)
{
    m->nlayers = LAYERS;
    m->dim     = DIM;
    for (int l = 0; l < LAYERS; l++) {
        m->w[l] = p[2 * l];
        m->b[l] = p[2 * l + 1];
    }
}

/* The reference optimizer: the textbook formulas, element by element. */
static void ref_update(const coll_optim_config_t *o, int t, float *p, const float *g, float *m,
                       float *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        p[i] -= o->lr * o->weight_decay * p[i];
        if (o->kind == COLL_OPTIM_SGD) {
            m[i] = o->momentum * m[i] + g[i];
            p[i] -= o->lr * m[i];
        } else {
            m[i]        = o->beta1 * m[i] + (1 - o->beta1) * g[i];
            v[i]        = o->beta2 * v[i] + (1 - o->beta2) * g[i] * g[i];
            double mhat = m[i] / (1 - pow(o->beta1, t)), vhat = v[i] / (1 - pow(o->beta2, t));
            p[i] -= (float)(o->lr * mhat / (sqrt(vhat) + o->eps));
        }
    }
}

static void batch(float **x, float **t)
{
    *x = malloc(sizeof(float) * DIM * GBATCH);
    *t = malloc(sizeof(float) * DIM * GBATCH);
    tm_fill(*x, DIM * GBATCH, 11, 0);
    tm_fill(*t, DIM * GBATCH, 12, 0);
}

/* Single process: full-batch gradients and the reference optimizer, K steps. */
static void reference_run(coll_optim_t kind, int steps, float **p)
{
    coll_optim_config_t o = optim_config(kind);
    float              *g[NPARAM], *m[NPARAM], *v[NPARAM], *x, *t;
    tm_model_t          mod;
    batch(&x, &t);
    initial_params(p);
    for (int i = 0; i < NPARAM; i++) {
        g[i] = calloc(param_count(i), sizeof(float));
        m[i] = calloc(param_count(i), sizeof(float));
        v[i] = calloc(param_count(i), sizeof(float));
    }
    model_view(&mod, p);
    for (int s = 1; s <= steps; s++) {
        float *gw[LAYERS], *gb[LAYERS];
        for (int l = 0; l < LAYERS; l++) {
            gw[l] = g[2 * l], gb[l] = g[2 * l + 1];
            memset(gw[l], 0, sizeof(float) * DIM * DIM), memset(gb[l], 0, sizeof(float) * DIM);
        }
        tm_backward(&mod, x, t, GBATCH, 1.0f / GBATCH, gw, gb, NULL, NULL);
        for (int i = 0; i < NPARAM; i++) {
            ref_update(&o, s, p[i], g[i], m[i], v[i], param_count(i));
        }
    }
    for (int i = 0; i < NPARAM; i++) {
        free(g[i]), free(m[i]), free(v[i]);
    }
    free(x), free(t);
}

/* DDP + the reference optimizer on this rank's share of the batch. */
static void ddp_run(coll_comm_t *comm, int rank, int n, coll_optim_t kind, int steps, float **p)
{
    coll_optim_config_t o = optim_config(kind);
    coll_ddp_t         *ddp;
    float              *g[NPARAM], *m[NPARAM], *v[NPARAM], *x, *t;
    tm_model_t          mod;
    int                 lb = GBATCH / n;
    batch(&x, &t);
    initial_params(p);
    ASSERT_OK(coll_ddp_create(comm, NULL, &ddp));
    for (int i = 0; i < NPARAM; i++) {
        ASSERT_OK(coll_ddp_register(ddp, p[i], NULL, param_count(i), COLL_FLOAT32, NULL));
        m[i] = calloc(param_count(i), sizeof(float));
        v[i] = calloc(param_count(i), sizeof(float));
    }
    for (int i = 0; i < NPARAM; i++) {
        ASSERT_OK(coll_ddp_grad(ddp, i, (void **)&g[i]));
    }
    model_view(&mod, p);
    for (int s = 1; s <= steps; s++) {
        float *gw[LAYERS], *gb[LAYERS];
        for (int l = 0; l < LAYERS; l++) {
            gw[l] = g[2 * l], gb[l] = g[2 * l + 1];
        }
        ASSERT_OK(coll_ddp_zero_grad(ddp));
        tm_backward(&mod, x + rank * lb * DIM, t + rank * lb * DIM, lb, 1.0f / (float)lb, gw, gb,
                    NULL, NULL);
        ASSERT_OK(coll_ddp_wait(ddp));
        for (int i = 0; i < NPARAM; i++) {
            ref_update(&o, s, p[i], g[i], m[i], v[i], param_count(i));
        }
    }
    ASSERT_OK(coll_ddp_destroy(ddp));
    for (int i = 0; i < NPARAM; i++) {
        free(m[i]), free(v[i]);
    }
    free(x), free(t);
}

typedef struct {
    coll_zero_t *z;
    float       *gw[LAYERS], *gb[LAYERS]; /* local gradients of the step */
} zero_bwd_t;

/* Backward reached layer l: (stage 3) gather it, hand its gradients over, release it. */
static void zero_layer_done(int l, void *arg)
{
    zero_bwd_t *c = arg;
    float      *g;
    ASSERT_OK(coll_zero_gather_layer(c->z, l));
    ASSERT_OK(coll_zero_grad(c->z, 2 * l, &g));
    memcpy(g, c->gw[l], sizeof(float) * DIM * DIM);
    ASSERT_OK(coll_zero_grad(c->z, 2 * l + 1, &g));
    memcpy(g, c->gb[l], sizeof(float) * DIM);
    ASSERT_OK(coll_zero_grad_ready(c->z, 2 * l + 1));
    ASSERT_OK(coll_zero_grad_ready(c->z, 2 * l));
    ASSERT_OK(coll_zero_release_layer(c->z, l));
}

/* Copy the full parameters out (gathering each layer at stage 3). */
static void zero_params(coll_zero_t *z, float **out)
{
    for (int l = 0; l < LAYERS; l++) {
        float *p;
        ASSERT_OK(coll_zero_gather_layer(z, l));
        for (int i = 2 * l; i <= 2 * l + 1; i++) {
            ASSERT_OK(coll_zero_param(z, i, &p));
            memcpy(out[i], p, param_count(i) * sizeof(float));
        }
        ASSERT_OK(coll_zero_release_layer(z, l));
    }
}

static coll_zero_t *zero_run(coll_comm_t *comm, int rank, int n, const zero_case_t *c, float **p)
{
    coll_zero_config_t cfg = COLL_ZERO_CONFIG_INITIALIZER;
    coll_zero_t       *z;
    float             *init[NPARAM], *x, *t;
    zero_bwd_t         bw;
    tm_model_t         mod;
    int                lb = GBATCH / n, steps = c->save_after > 0 ? c->save_after : c->steps;

    cfg.stage            = c->stage;
    cfg.optim            = optim_config(c->optim);
    cfg.bucket_cap_bytes = 300; /* several buckets at stages 0-2 */
    batch(&x, &t);
    initial_params(init);
    ASSERT_OK(coll_zero_create(comm, &cfg, &z));
    for (int i = 0; i < NPARAM; i++) {
        ASSERT_OK(coll_zero_register(z, init[i], param_count(i), COLL_FLOAT32, i / 2, NULL));
        free(init[i]);
        p[i] = calloc(param_count(i), sizeof(float));
    }
    if (c->load) {
        ASSERT_OK(coll_zero_load(z, c->dir));
    }
    bw.z = z;
    for (int l = 0; l < LAYERS; l++) {
        bw.gw[l] = calloc(DIM * DIM, sizeof(float));
        bw.gb[l] = calloc(DIM, sizeof(float));
    }
    model_view(&mod, p);
    for (int s = 0; s < steps; s++) {
        zero_params(z, p); /* the forward pass: each layer gathered, used, released */
        for (int l = 0; l < LAYERS; l++) {
            memset(bw.gw[l], 0, sizeof(float) * DIM * DIM),
                memset(bw.gb[l], 0, sizeof(float) * DIM);
        }
        tm_backward(&mod, x + rank * lb * DIM, t + rank * lb * DIM, lb, 1.0f / (float)lb, bw.gw,
                    bw.gb, zero_layer_done, &bw);
        ASSERT_OK(coll_zero_step(z));
    }
    if (c->save_after > 0) {
        ASSERT_OK(coll_zero_save(z, c->dir));
    }
    zero_params(z, p);
    for (int l = 0; l < LAYERS; l++) {
        free(bw.gw[l]), free(bw.gb[l]);
    }
    free(x), free(t);
    return z;
}

static double maxdiff(float **a, float **b)
{
    double d = 0;
    for (int i = 0; i < NPARAM; i++) {
        for (size_t k = 0; k < param_count(i); k++) {
            d = fmax(d, fabs((double)a[i][k] - b[i][k]) / (1.0 + fabs(b[i][k])));
        }
    }
    return d;
}

static void free_params(float **p)
{
    for (int i = 0; i < NPARAM; i++) {
        free(p[i]);
    }
}

/* ZeRO stage s == DDP + reference optimizer after K steps. */
static int zero_equiv_rank(int rank, int n, coll_comm_t *comm, void *arg)
{
    const zero_case_t *c = arg;
    float             *pd[NPARAM], *pz[NPARAM];
    ddp_run(comm, rank, n, c->optim, c->steps, pd);
    coll_zero_t *z = zero_run(comm, rank, n, c, pz);
    double       d = maxdiff(pz, pd);
    ASSERT_(d <= 2e-5, "rank %d stage %d optim %d: maxdiff %g vs DDP", rank, c->stage,
            (int)c->optim, d);
    coll_zero_stats_t st;
    ASSERT_OK(coll_zero_get_stats(z, &st));
    ASSERT_EQ(st.steps, c->steps);
    ASSERT_EQ(st.working_bytes, c->stage == 3 ? 0 : 0); /* every transient buffer released */
    ASSERT_OK(coll_zero_destroy(z));
    free_params(pd), free_params(pz);
    return 0;
}

/* Bytes per rank by stage, from the layer's own accounting, at 4 ranks. */
static int zero_memory_rank(int rank, int n, coll_comm_t *comm, void *arg)
{
    size_t            P = LAYERS * (DIM * DIM + DIM) * sizeof(float), total[4];
    coll_zero_stats_t st[4];
    (void)arg;
    ASSERT_EQ(n, 4);
    for (int s = 0; s < 4; s++) {
        zero_case_t  c = {.stage = s, .optim = COLL_OPTIM_ADAMW, .steps = 1};
        float       *p[NPARAM];
        coll_zero_t *z = zero_run(comm, rank, n, &c, p);
        ASSERT_OK(coll_zero_get_stats(z, &st[s]));
        total[s] = st[s].param_bytes + st[s].grad_bytes + st[s].optim_bytes;
        if (rank == 0) {
            printf("stage %d: params %zu grads %zu optim %zu = %zu bytes/rank, peak transient "
                   "%zu\n",
                   s, st[s].param_bytes, st[s].grad_bytes, st[s].optim_bytes, total[s],
                   st[s].peak_working_bytes);
            fflush(stdout);
        }
        ASSERT_EQ(st[s].working_bytes, 0);
        ASSERT_OK(coll_zero_destroy(z));
        free_params(p);
    }
    ASSERT_EQ(st[0].param_bytes, P);
    ASSERT_EQ(st[0].grad_bytes, P);
    ASSERT_EQ(st[0].optim_bytes, 2 * P);
    ASSERT_TRUE(st[1].optim_bytes <= 2 * P / 4 + 64 && st[1].grad_bytes >= P);
    ASSERT_TRUE(st[2].grad_bytes <= P / 4 + 64 && st[2].param_bytes >= P);
    ASSERT_TRUE(st[3].param_bytes <= P / 4 + 64);
    ASSERT_(total[3] * 100 <= total[0] * 105 / 4, "stage 3 %zu > 1/4 of stage 0 %zu + 5%%",
            total[3], total[0]);
    /* stage 3 never holds more than three layers' full buffers at once (two gathered, the
     * gradients of the one in backward) */
    ASSERT_TRUE(st[3].peak_working_bytes <= 3 * (DIM * DIM + DIM) * sizeof(float) * 2);
    return 0;
}

/* Save at one rank count and stage, load at another, finish: equals uninterrupted. */
static int zero_ckpt_rank(int rank, int n, coll_comm_t *comm, void *arg)
{
    const zero_case_t *c = arg;
    float             *pz[NPARAM], *pr[NPARAM];
    coll_zero_t       *z = zero_run(comm, rank, n, c, pz);
    ASSERT_OK(coll_zero_destroy(z));
    if (c->load) {
        reference_run(c->optim, 3, pr);
        double d = maxdiff(pz, pr);
        ASSERT_(d <= 5e-5, "rank %d: after load and a step, maxdiff %g vs the reference", rank, d);
        free_params(pr);
    }
    free_params(pz);
    return 0;
}

/* A shard with one flipped byte: every rank's load fails naming the checksum. */
static int zero_corrupt_rank(int rank, int n, coll_comm_t *comm, void *arg)
{
    const char        *dir = arg;
    coll_zero_config_t cfg = COLL_ZERO_CONFIG_INITIALIZER;
    coll_zero_t       *z;
    float             *init[NPARAM];
    (void)rank, (void)n;
    cfg.stage = 1;
    cfg.optim = optim_config(COLL_OPTIM_ADAMW);
    initial_params(init);
    ASSERT_OK(coll_zero_create(comm, &cfg, &z));
    for (int i = 0; i < NPARAM; i++) {
        ASSERT_OK(coll_zero_register(z, init[i], param_count(i), COLL_FLOAT32, i / 2, NULL));
        free(init[i]);
    }
    ASSERT_EQ(coll_zero_load(z, dir), COLL_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(coll_last_error(), "checksum mismatch");
    ASSERT_OK(coll_zero_destroy(z));
    return 0;
}

/* Stage 3, 3 ranks, layers of 30 and 1 elements: rank 2 holds only padding of the 1-element
 * layer (its shard starts past the model's end) and still writes a checkpoint that loads. A save
 * inside a step (a gradient reported, its reduction in flight) is refused; one after the step
 * goes through, and a fresh object loads what the step made: SGD with lr 1 moves every value by
 * the averaged gradient (n + 1) / 2. */
static int zero_pad_ckpt_rank(int rank, int n, coll_comm_t *comm, void *arg)
{
    const char        *dir = arg;
    coll_zero_config_t cfg = COLL_ZERO_CONFIG_INITIALIZER;
    coll_zero_t       *z;
    size_t             cnt[2] = {30, 1};
    float              init[30], zeros[30] = {0}, *g, *p;

    for (int i = 0; i < 30; i++) {
        init[i] = 0.5f * (float)i + 1.0f;
    }
    cfg.stage              = 3;
    cfg.optim              = optim_config(COLL_OPTIM_SGD);
    cfg.optim.lr           = 1.0f;
    cfg.optim.momentum     = 0.0f;
    cfg.optim.weight_decay = 0.0f;
    ASSERT_OK(coll_zero_create(comm, &cfg, &z));
    for (int i = 0; i < 2; i++) {
        ASSERT_OK(coll_zero_register(z, init, cnt[i], COLL_FLOAT32, i, NULL));
    }
    for (int i = 1; i >= 0; i--) { /* backward order */
        ASSERT_OK(coll_zero_grad(z, i, &g));
        for (size_t j = 0; j < cnt[i]; j++) {
            g[j] = (float)(rank + 1);
        }
        ASSERT_OK(coll_zero_grad_ready(z, i));
        if (i == 1) {
            ASSERT_EQ(coll_zero_save(z, dir), COLL_ERR_INVALID_USAGE);
            ASSERT_STR_CONTAINS(coll_last_error(), "between steps");
        }
    }
    ASSERT_OK(coll_zero_step(z));
    ASSERT_OK(coll_zero_save(z, dir));
    ASSERT_OK(coll_zero_destroy(z));

    ASSERT_OK(coll_zero_create(comm, &cfg, &z));
    for (int i = 0; i < 2; i++) {
        ASSERT_OK(coll_zero_register(z, zeros, cnt[i], COLL_FLOAT32, i, NULL));
    }
    ASSERT_OK(coll_zero_gather_layer(z, 0)); /* a copy of the zeros, dropped by the load */
    ASSERT_OK(coll_zero_load(z, dir));
    for (int i = 0; i < 2; i++) {
        ASSERT_OK(coll_zero_gather_layer(z, i));
        ASSERT_OK(coll_zero_param(z, i, &p));
        for (size_t j = 0; j < cnt[i]; j++) {
            float want = init[j] - (float)(n + 1) / 2.0f;
            ASSERT_(p[j] == want, "rank %d: layer %d [%zu] = %g after load, expected %g", rank, i,
                    j, (double)p[j], (double)want);
        }
        ASSERT_OK(coll_zero_release_layer(z, i));
    }
    ASSERT_OK(coll_zero_destroy(z));
    return 0;
}

static int zero_errors_rank(int rank, int n, coll_comm_t *comm, void *arg)
{
    coll_zero_config_t cfg = COLL_ZERO_CONFIG_INITIALIZER;
    coll_zero_t       *z;
    float              v[4] = {1, 2, 3, 4}, *p;
    (void)rank, (void)n, (void)arg;
    cfg.stage = 4;
    ASSERT_EQ(coll_zero_create(comm, &cfg, &z), COLL_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(coll_last_error(), "stage");
    cfg.stage    = 3;
    cfg.optim.lr = -1;
    ASSERT_EQ(coll_zero_create(comm, &cfg, &z), COLL_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(coll_last_error(), "lr");
    cfg.optim.lr = 0.1f;
    ASSERT_OK(coll_zero_create(comm, &cfg, &z));
    ASSERT_EQ(coll_zero_register(z, v, 4, COLL_FLOAT16, 0, NULL), COLL_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(coll_last_error(), "dtype");
    ASSERT_EQ(coll_zero_register(z, v, 4, COLL_FLOAT32, 1, NULL), COLL_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(coll_last_error(), "layer 1");
    ASSERT_EQ(coll_zero_register(z, v, 4, COLL_FLOAT32, -1, NULL), COLL_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(coll_last_error(), "layer -1");
    ASSERT_EQ(coll_zero_register(z, NULL, 4, COLL_FLOAT32, 0, NULL), COLL_ERR_INVALID_ARG);
    ASSERT_OK(coll_zero_register(z, v, 4, COLL_FLOAT32, 0, NULL));
    ASSERT_EQ(coll_zero_param(z, 0, &p), COLL_ERR_INVALID_USAGE); /* not gathered */
    ASSERT_STR_CONTAINS(coll_last_error(), "not gathered");
    ASSERT_EQ(coll_zero_param(z, 1, &p), COLL_ERR_INVALID_ARG);
    ASSERT_EQ(coll_zero_gather_layer(z, 1), COLL_ERR_INVALID_ARG);
    ASSERT_EQ(coll_zero_load(z, "/nonexistent-dir"), COLL_ERR_SYSTEM);
    ASSERT_STR_CONTAINS(coll_last_error(), "manifest");
    ASSERT_OK(coll_zero_gather_layer(z, 0));
    ASSERT_OK(coll_zero_param(z, 0, &p));
    ASSERT_TRUE(p[3] == 4.0f);
    ASSERT_OK(coll_zero_release_layer(z, 0));
    ASSERT_OK(coll_zero_destroy(z));
    return 0;
}

/* coll_zero_clip_grad_norm + coll_zero_set_lr at every stage: rank r's gradient is
 * (r + 1) * (i + 1), so the averaged one is (n + 1) / 2 * (i + 1) and its norm known; clipping to
 * half of it, then plain SGD with lr 2, moves each parameter by -2 * clipped gradient. */
static int zero_clip_rank(int rank, int n, coll_comm_t *comm, void *arg)
{
    enum { N = 37 };
    const zero_case_t *c   = arg;
    coll_zero_config_t cfg = COLL_ZERO_CONFIG_INITIALIZER;
    coll_zero_t       *z;
    float              init[N], *g, *p;
    double             sq = 0.0, norm = -1.0, want;

    for (int i = 0; i < N; i++) {
        init[i] = 0.5f * (float)i;
        sq += (double)(i + 1) * (i + 1);
    }
    want                   = (n + 1) / 2.0 * sqrt(sq);
    cfg.stage              = c->stage;
    cfg.optim              = optim_config(COLL_OPTIM_SGD);
    cfg.optim.momentum     = 0.0f;
    cfg.optim.weight_decay = 0.0f;
    ASSERT_OK(coll_zero_create(comm, &cfg, &z));
    ASSERT_OK(coll_zero_register(z, init, N, COLL_FLOAT32, 0, NULL));
    ASSERT_EQ(coll_zero_set_lr(z, 0.0f), COLL_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(coll_last_error(), "lr");
    ASSERT_EQ(coll_zero_set_lr(z, NAN), COLL_ERR_INVALID_ARG);
    ASSERT_EQ(coll_zero_clip_grad_norm(z, -1.0f, NULL), COLL_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(coll_last_error(), "max_norm");
    ASSERT_OK(coll_zero_set_lr(z, 2.0f));
    ASSERT_OK(coll_zero_grad(z, 0, &g));
    for (int i = 0; i < N; i++) {
        g[i] = (float)((rank + 1) * (i + 1));
    }
    ASSERT_OK(coll_zero_grad_ready(z, 0));
    ASSERT_OK(coll_zero_clip_grad_norm(z, (float)(want / 2), &norm));
    ASSERT_(fabs(norm - want) <= 1e-5 * want, "stage %d: norm %.9g, expected %.9g", c->stage, norm,
            want);
    ASSERT_OK(coll_zero_step(z));
    ASSERT_OK(coll_zero_gather_layer(z, 0));
    ASSERT_OK(coll_zero_param(z, 0, &p));
    float scale = (float)(want / 2) / ((float)norm + 1e-6f);
    for (int i = 0; i < N; i++) {
        double expect = 0.5 * i - 2.0 * scale * (n + 1) / 2.0 * (i + 1);
        ASSERT_(fabs(p[i] - expect) <= 1e-4 * (1.0 + fabs(expect)),
                "stage %d: p[%d] = %.7g, expected %.7g", c->stage, i, (double)p[i], expect);
    }
    ASSERT_OK(coll_zero_release_layer(z, 0));
    ASSERT_OK(coll_zero_destroy(z));
    return 0;
}

static int run(int n, coll_test_rank_fn_t fn, const zero_case_t *c, const char *what)
{
    coll_test_opts_t o  = {.nranks = n, .want_comm = 1, .timeout_s = 60};
    int              rc = coll_test_run_ranks(&o, fn, (void *)c);
    printf("%s: %s, %d ranks\n", rc ? "FAIL" : "PASS", what, n);
    return rc != 0;
}

int main(void)
{
    char dir[]  = "/tmp/coll-zero-ckpt.XXXXXX";
    int  failed = 0;
    for (int s = 0; s <= 3; s++) {
        zero_case_t c = {.stage = s, .optim = COLL_OPTIM_ADAMW, .steps = 3};
        char        what[64];
        snprintf(what, sizeof(what), "zero stage %d adamw == ddp", s);
        failed += run(s == 1 ? 3 : 2 + s % 3, zero_equiv_rank, &c, what);
    }
    for (int s = 1; s <= 3; s += 2) {
        zero_case_t c = {.stage = s, .optim = COLL_OPTIM_SGD, .steps = 3};
        failed += run(4, zero_equiv_rank, &c,
                      s == 1 ? "zero stage 1 sgd == ddp" : "zero stage 3 sgd == ddp");
    }
    failed += run(4, zero_memory_rank, NULL, "zero bytes per rank by stage");
    if (mkdtemp(dir) == NULL) {
        return COLL_TEST_HARD;
    }
    zero_case_t save = {.stage = 3, .optim = COLL_OPTIM_ADAMW, .save_after = 2, .dir = dir};
    zero_case_t load = {.stage = 1, .optim = COLL_OPTIM_ADAMW, .steps = 1, .load = 1, .dir = dir};
    failed += run(2, zero_ckpt_rank, &save, "zero checkpoint saved at stage 3");
    failed += run(3, zero_ckpt_rank, &load, "zero checkpoint loaded at stage 1");
    load.stage = 2;
    failed += run(4, zero_ckpt_rank, &load, "zero checkpoint loaded at stage 2");
    load.stage = 0;
    failed += run(1, zero_ckpt_rank, &load, "zero checkpoint loaded at stage 0");
    { /* flip one byte in the middle of rank 1's shard */
        char  shard[256];
        FILE *f;
        snprintf(shard, sizeof(shard), "%s/rank-00001.bin", dir);
        f = fopen(shard, "r+b");
        if (f == NULL || fseek(f, 0, SEEK_END) != 0) {
            return COLL_TEST_HARD;
        }
        long size = ftell(f);
        int  c;
        fseek(f, size / 2, SEEK_SET);
        c = fgetc(f);
        fseek(f, size / 2, SEEK_SET);
        fputc(c ^ 0x10, f);
        fclose(f);
        coll_test_opts_t o  = {.nranks = 2, .want_comm = 1, .timeout_s = 60};
        int              rc = coll_test_run_ranks(&o, zero_corrupt_rank, dir);
        printf("%s: zero checkpoint with a flipped byte refused, 2 ranks\n", rc ? "FAIL" : "PASS");
        failed += rc != 0;
    }
    for (int r = 0; r < 2; r++) {
        char path[256];
        snprintf(path, sizeof(path), "%s/rank-%05d.bin", dir, r);
        unlink(path);
    }
    char manifest[256];
    snprintf(manifest, sizeof(manifest), "%s/manifest", dir);
    unlink(manifest);
    { /* a rank holding padding only; a save inside a step */
        coll_test_opts_t o  = {.nranks = 3, .want_comm = 1, .timeout_s = 60};
        int              rc = coll_test_run_ranks(&o, zero_pad_ckpt_rank, dir);
        printf("%s: zero checkpoint with a padding-only shard, save inside a step refused, "
               "3 ranks\n",
               rc ? "FAIL" : "PASS");
        failed += rc != 0;
        for (int r = 0; r < 3; r++) {
            char path[256];
            snprintf(path, sizeof(path), "%s/rank-%05d.bin", dir, r);
            unlink(path);
        }
        unlink(manifest);
    }
    rmdir(dir);
    failed += run(2, zero_errors_rank, NULL, "zero argument errors");
    for (int s = 0; s <= 3; s++) {
        zero_case_t c = {.stage = s};
        char        what[64];
        snprintf(what, sizeof(what), "zero stage %d: clipping and lr", s);
        failed += run(3, zero_clip_rank, &c, what);
    }
    return failed ? 1 : 0;
}
