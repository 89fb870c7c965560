/* SPDX-License-Identifier: MIT */
/*
 * ctrain -- the reference data-parallel trainer of libcoll: a byte-level GPT trained on real
 * text (Moby Dick) or an MLP on Fashion-MNIST, gradients averaged across ranks by the training
 * layer (coll_ddp, optionally compressed per bucket), AdamW with warm-up and cosine decay and
 * gradient clipping, one progress line per step, a validation loss and a loss CSV. Uses only coll.h
 * and coll_train.h. Checkpoints are atomic and checksummed, one shard per rank written in the
 * background, with resume (ckpt.c), refused for another run's options.
 * --zero 1|2|3 runs the optimizer sharded (ctrain_zero.c), with the same schedule and clipping
 * and checkpoints of its own; --precision bf16|fp16 computes in reduced precision (precision.c).
 * Run: collrun -n 4 ./ctrain --data data/moby_dick.txt
 */
#include <coll.h>       /* defines: coll_init, coll_allreduce, coll_comm_rank/size */
#include <coll_train.h> /* defines: coll_ddp_*, coll_compress_config_t */

#include "ckpt.h" /* defines: ckpt_save_shard, _commit, _load_latest, _newest, _refuse_foreign */
#include "ctrain_opts.h"    /* defines: ctrain_opts_t, ctrain_opts_parse, ctrain_usage */
#include "ctrain_dump.h"    /* defines: ctrain_dump_* (reference values for the tests) */
#include "ctrain_elastic.h" /* defines: ctrain_fail, ctrain_elastic_shrink (--elastic) */
#include "ctrain_zero.h"    /* defines: ctrain_zero_setup, _begin, _ready, _step (--zero 1|2|3) */
#include "model.h"          /* defines: model_t, model_gpt_create, model_mlp_create */
#include "precision.h"      /* defines: prec_round, loss_scaler_t (--precision bf16|fp16) */

#include <limits.h>
#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- helpers ---- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Exits, or under --elastic goes back to the start of the attempt (ctrain_elastic.h). */
#define CHECK_COLL(_expr, _what)                                                                   \
    do {                                                                                           \
        coll_result_t _st = (_expr);                                                               \
        if (_st != COLL_OK) {                                                                      \
            ctrain_fail(_st, (_what));                                                             \
        }                                                                                          \
    } while (0)

/* ---- learning-rate schedule: linear warm-up, then cosine decay to min_lr_ratio * lr ---- */

static float lr_at(const ctrain_opts_t *o, int step)
{
    if (step < o->warmup) {
        return o->lr * (float)(step + 1) / (float)o->warmup;
    }
    int   span  = o->steps - o->warmup;
    float frac  = span > 0 ? (float)(step - o->warmup) / (float)span : 1.0f;
    float coeff = 0.5f * (1.0f + cosf(3.14159265358979f * frac));
    return o->lr * (o->min_lr_ratio + (1.0f - o->min_lr_ratio) * coeff);
}

/* ---- AdamW with gradient clipping over the flat parameter array ---- */

typedef struct {
    float *m, *v;
    int    t;
} adamw_t;

/* Returns the gradient norm before clipping. */
static float adamw_step(adamw_t *opt, const ctrain_opts_t *o, float *p, float *g, size_t n,
                        float lr)
{
    double sq = 0.0;
    for (size_t i = 0; i < n; i++) {
        sq += (double)g[i] * g[i];
    }
    float norm = (float)sqrt(sq);
    float clip = 1.0f;
    if (o->clip > 0.0f && norm > o->clip) {
        clip = o->clip / (norm + 1e-6f); /* torch.nn.utils.clip_grad_norm_ */
    }
    opt->t++;
    float bc1 = 1.0f - powf(o->beta1, (float)opt->t), bc2 = 1.0f - powf(o->beta2, (float)opt->t);
    for (size_t i = 0; i < n; i++) {
        float gi = g[i] * clip;
        p[i] *= 1.0f - lr * o->weight_decay; /* decoupled decay first, as torch.optim.AdamW */
        opt->m[i] = o->beta1 * opt->m[i] + (1.0f - o->beta1) * gi;
        opt->v[i] = o->beta2 * opt->v[i] + (1.0f - o->beta2) * gi * gi;
        float mh = opt->m[i] / bc1, vh = opt->v[i] / bc2;
        p[i] -= lr * mh / (sqrtf(vh) + o->eps);
    }
    return norm;
}

/* ---- data-parallel glue: tensor i of the model is DDP parameter i ---- */

/* --precision bf16|fp16: the model whose finished gradients are rounded to the format */
static model_t *lowp_model;
static prec_t   lowp_prec;

static void on_grads_ready(void *arg, int first, int n)
{
    coll_ddp_t *ddp = arg;
    for (int i = first + n - 1; i >= first; i--) {
        if (lowp_model != NULL) { /* as if backward had produced them in that format */
            prec_round_array(lowp_prec, lowp_model->grads[i], lowp_model->sizes[i]);
        }
        CHECK_COLL(coll_ddp_grad_ready(ddp, i), "coll_ddp_grad_ready");
    }
}

static coll_ddp_t *ddp_setup(coll_comm_t *world, const ctrain_opts_t *o, model_t *gpt)
{
    coll_ddp_config_t cfg = COLL_DDP_CONFIG_INITIALIZER;
    coll_ddp_t       *ddp;
    cfg.bucket_cap_bytes = (size_t)(o->bucket_mb * 1048576.0);
    cfg.wire_dtype       = o->comm_dtype;
    CHECK_COLL(coll_ddp_create(world, &cfg, &ddp), "coll_ddp_create");
    for (int i = 0; i < gpt->ntensors; i++) {
        CHECK_COLL(coll_ddp_register(ddp, gpt->params[i], gpt->grads[i], gpt->sizes[i],
                                     COLL_FLOAT32, NULL),
                   "coll_ddp_register");
    }
    CHECK_COLL(coll_ddp_broadcast_params(ddp, 0), "coll_ddp_broadcast_params");
    if (o->compress.kind != 0) {
        coll_ddp_stats_t st; /* the buckets exist once a call needs them: zero_grad does */
        CHECK_COLL(coll_ddp_zero_grad(ddp), "coll_ddp_zero_grad");
        CHECK_COLL(coll_ddp_get_stats(ddp, &st), "coll_ddp_get_stats");
        if (st.nbuckets <= 0) {
            fprintf(stderr, "ctrain: no gradient buckets to compress\n");
            exit(1);
        }
        for (int b = 0; b < st.nbuckets; b++) {
            CHECK_COLL(coll_ddp_set_bucket_compress(ddp, b, &o->compress),
                       "coll_ddp_set_bucket_compress");
        }
    }
    return ddp;
}

/* ---- evaluation: mean loss (and accuracy) over fixed validation items shared out ---- */

static float evaluate(model_t *m, const ctrain_opts_t *o, int rank, int nranks, coll_comm_t *world,
                      float *acc_p)
{
    int    n      = o->eval_batches * o->batch * o->grad_accum * nranks;
    double acc[3] = {0.0, 0.0, 0.0}; /* summed loss, units, correct */
    for (int j = rank; j < n; j += nranks) {
        int correct;
        acc[0] += m->val_item(m, j, n, &correct);
        acc[1] += m->units;
        acc[2] += correct;
    }
    CHECK_COLL(coll_allreduce(acc, acc, 3, COLL_FLOAT64, COLL_SUM, world), "validation allreduce");
    *acc_p = (float)(acc[2] / n);
    return (float)(acc[0] / acc[1]);
}

/* ---- checkpoints: resume from the newest valid one; save one shard per rank ---- */

/* strict: exit 2 when every checkpoint there is another run's (else start from step 0). */
static int resume_state(const ctrain_opts_t *o, model_t *gpt, adamw_t *opt, loss_scaler_t *scaler,
                        coll_ddp_t *ddp, int rank, int nranks, int strict)
{
    size_t   n = gpt->nparams, xlen = 0;
    uint64_t step = 0;
    int      rc   = -1;
    CHECK_COLL(coll_ddp_compress_state_size(ddp, &xlen), "coll_ddp_compress_state_size");
    ckpt_state_t s = {.params    = malloc(n * 4),
                      .m         = malloc(n * 4),
                      .v         = malloc(n * 4),
                      .nparams   = n,
                      .run_hash  = ctrain_opts_run_hash(o),
                      .extra     = xlen > 0 ? malloc(xlen) : NULL,
                      .extra_len = xlen,
                      .rank      = rank,
                      .nranks    = nranks};
    if (s.params != NULL && s.m != NULL && s.v != NULL && (xlen == 0 || s.extra != NULL)) {
        rc = ckpt_load_latest(o->ckpt_dir, &s, &step);
    }
    if (rc == 2 && strict) { /* training from step 0 would write over that run's checkpoints */
        ckpt_refuse_foreign(o->ckpt_dir, rank);
    }
    if (rc == 0) { /* copy only a fully verified checkpoint */
        memcpy(gpt->param_mem, s.params, n * 4);
        memcpy(opt->m, s.m, n * 4);
        memcpy(opt->v, s.v, n * 4);
        opt->t = (int)s.adam_t;
        if (o->precision == PREC_FP16) { /* the loss scale goes on where it was */
            scaler->scale   = s.loss_scale;
            scaler->good    = (int)s.scale_good;
            scaler->skipped = (int)s.scale_skipped;
        }
        if (s.extra_loaded) { /* the compressors' residuals, velocity and step counts */
            CHECK_COLL(coll_ddp_set_compress_state(ddp, s.extra, xlen),
                       "coll_ddp_set_compress_state");
        }
        if (rank == 0) {
            printf("ctrain: resumed from %s/step-%08llu\n", o->ckpt_dir, (unsigned long long)step);
            if (xlen > 0 && !s.extra_loaded) { /* said, not hidden: not bit-exact then */
                printf("ctrain: the checkpoint was made by another number of ranks: the "
                       "compressors' residuals restart from zero\n");
            }
        }
    }
    free(s.params), free(s.m), free(s.v), free(s.extra);
    return rc == 0 ? (int)step : 0;
}

/* A checkpoint is written in the background: the state is copied (cheap next to a step),
 * a thread writes this rank's shard while the next step runs, and at the end of that step
 * every rank joins its thread, the ranks vote and rank 0 commits the manifest. */
typedef struct {
    pthread_t    thread;
    int          busy, step, rank, nranks, rc;
    const char  *dir;
    ckpt_state_t snap;
} ckpt_writer_t;

static void *ckpt_writer_main(void *arg)
{
    ckpt_writer_t *w = arg;
    w->rc            = ckpt_save_shard(w->dir, (uint64_t)w->step, w->rank, w->nranks, &w->snap);
    return NULL;
}

static void ckpt_start(ckpt_writer_t *w, const ctrain_opts_t *o, model_t *m, adamw_t *opt,
                       const loss_scaler_t *scaler, coll_ddp_t *ddp, int step)
{
    size_t xlen = 0; /* this rank's compressor state, if any bucket is compressed */
    CHECK_COLL(coll_ddp_compress_state_size(ddp, &xlen), "coll_ddp_compress_state_size");
    if (xlen > 0 && w->snap.extra == NULL && (w->snap.extra = malloc(xlen)) == NULL) {
        fprintf(stderr, "ctrain: out of memory for a checkpoint\n");
        exit(1);
    }
    if (xlen > 0) {
        CHECK_COLL(coll_ddp_get_compress_state(ddp, w->snap.extra, xlen),
                   "coll_ddp_get_compress_state");
    }
    w->snap.extra_len = xlen;
    size_t n          = m->nparams * sizeof(float);
    if (w->snap.params == NULL) {
        w->snap.params = malloc(n), w->snap.m = malloc(n), w->snap.v = malloc(n);
        if (w->snap.params == NULL || w->snap.m == NULL || w->snap.v == NULL) {
            fprintf(stderr, "ctrain: out of memory for a checkpoint\n");
            exit(1);
        }
    }
    memcpy(w->snap.params, m->param_mem, n);
    memcpy(w->snap.m, opt->m, n);
    memcpy(w->snap.v, opt->v, n);
    w->snap.nparams = m->nparams, w->snap.adam_t = (uint64_t)opt->t, w->snap.seed = o->seed;
    w->snap.run_hash   = ctrain_opts_run_hash(o);
    w->snap.loss_scale = scaler->scale, w->snap.scale_good = (uint64_t)scaler->good;
    w->snap.scale_skipped = (uint64_t)scaler->skipped;
    w->step = step, w->dir = o->ckpt_dir, w->rc = 0;
    if (pthread_create(&w->thread, NULL, ckpt_writer_main, w) != 0) {
        ckpt_writer_main(w); /* no thread: write it now */
        w->busy = -1;
        return;
    }
    w->busy = 1;
}

/* Collective when a checkpoint is in flight on every rank (the same steps everywhere). */
static void ckpt_finish(ckpt_writer_t *w, coll_comm_t *world)
{
    if (w->busy == 0) {
        return;
    }
    if (w->busy == 1) {
        pthread_join(w->thread, NULL);
    }
    w->busy = 0;
    int bad = w->rc != 0;
    CHECK_COLL(coll_allreduce(&bad, &bad, 1, COLL_INT32, COLL_SUM, world), "checkpoint vote");
    if (bad == 0 && w->rank == 0 && ckpt_commit(w->dir, (uint64_t)w->step, w->nranks) != 0) {
        bad = 1;
    }
    if (bad != 0) {
        fprintf(stderr, "ctrain: rank %d: checkpoint at step %d not complete; training goes on\n",
                w->rank, w->step);
    }
}

/* On resume, keep the loss CSV's lines up to the checkpoint and append from there. */
static FILE *csv_open(const char *path, int start_step)
{
    FILE *f;
    if (start_step == 0 || (f = fopen(path, "r")) == NULL) {
        f = fopen(path, "w");
        if (f != NULL) {
            fprintf(f, "step,train_loss,val_loss,lr,grad_norm,step_s\n");
        }
        return f;
    }
    char   line[512], *keep = NULL;
    size_t len = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (atoi(line) <= start_step) { /* the header parses as 0 */
            size_t l = strlen(line);
            char  *k = realloc(keep, len + l + 1);
            if (k == NULL) {
                break;
            }
            keep = k;
            memcpy(keep + len, line, l + 1);
            len += l;
        }
    }
    fclose(f);
    f = fopen(path, "w");
    if (f != NULL && keep != NULL) {
        fputs(keep, f);
    }
    free(keep);
    return f;
}

/* ---- OpenMP: the CPUs of this host shared among its ranks ---- */

/* Threads per rank: OMP_NUM_THREADS if set, else the online CPUs over the ranks on this host
 * (collrun, torchrun, Open MPI, Slurm say how many; 1 rank when none does). The parallel loops
 * keep every sum's order, so the result does not depend on the thread count. */
static int ctrain_threads(void)
{
#ifdef _OPENMP
    static const char *const vars[] = {"COLL_LOCAL_NRANKS",          "LOCAL_WORLD_SIZE",
                                       "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS",
                                       "SLURM_NTASKS_PER_NODE",      "SLURM_TASKS_PER_NODE"};
    const char              *env    = getenv("OMP_NUM_THREADS");
    long                     ncpu = sysconf(_SC_NPROCESSORS_ONLN), local = 1;
    if (env != NULL && atoi(env) > 0) {
        return omp_get_max_threads();
    }
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        if ((env = getenv(vars[i])) != NULL && atol(env) > 0) {
            local = atol(env);
            break;
        }
    }
    int t = ncpu > local ? (int)(ncpu / local) : 1;
    omp_set_num_threads(t);
    return t;
#else
    return 1;
#endif
}

/* ---- mixed precision: the model reads a rounded copy of the fp32 master weights ---- */

static void lowp_refresh(model_t *m, float *lowp, prec_t p)
{
    for (size_t i = 0; i < m->nparams; i++) {
        lowp[i] = prec_round(p, m->param_mem[i]);
    }
}

/* Point the model's tensors at lowp (same layout as param_mem, which stays the master). */
static void lowp_attach(model_t *m, float *lowp)
{
    for (int i = 0; i < m->ntensors; i++) {
        m->params[i] = lowp + (m->params[i] - m->param_mem);
    }
}

/* ---- stragglers: who arrived last at the gradient collectives (collective, between steps) ---- */

static void print_stragglers(coll_zero_t *zero, coll_ddp_t *ddp, int rank, int full)
{
    char          text[2048];
    coll_result_t st = zero != NULL ? coll_zero_arrival_stats(zero, text, sizeof(text))
                                    : coll_ddp_arrival_stats(ddp, text, sizeof(text));
    if (st != COLL_OK) {
        fprintf(stderr, "ctrain: rank %d: arrival summary failed: %s (%s)\n", rank,
                coll_strerror(st), coll_last_error());
        return;
    }
    if (rank != 0) {
        return;
    }
    /* the whole summary, or (at evaluations) the line of the rank latest on average */
    char  *latest = NULL;
    double worst  = -1.0;
    for (char *line = strtok(text, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        int    r, pct;
        double mean;
        if (full) {
            printf("stragglers: %s\n", line);
        } else if (sscanf(line, "rank %d arrived last in %d%% of collectives, mean +%lf", &r, &pct,
                          &mean) == 3 &&
                   mean > worst) {
            worst  = mean;
            latest = line;
        }
    }
    if (latest != NULL) {
        printf("stragglers: latest on average: %s\n", latest);
    }
    fflush(stdout);
}

/* ---- one training attempt (the whole run, unless --elastic goes on after a failure) ---- */

typedef struct {
    ctrain_opts_t o;
    coll_comm_t  *world;
    int           rank, nranks, threads;
    int           attempt;     /* 0, then one more after each failure survived */
    int           failed_step; /* the step an attempt was in when it failed */
    /* what an attempt builds; train_release frees it, after a failure too */
    model_t       *gpt;
    coll_ddp_t    *ddp;
    coll_zero_t   *zero;
    adamw_t        opt;
    float         *lowp;
    FILE          *csv;
    ctrain_dump_t *dump;
    ckpt_writer_t  writer;
} ctrain_t;

/* Free what the attempt built. After a failure the communicator is broken: the objects are
 * destroyed without checking (they fail at once rather than wait), and nothing is collective. */
static void train_release(ctrain_t *c, int failed)
{
    if (c->writer.busy == 1) {
        pthread_join(c->writer.thread, NULL);
    }
    free(c->writer.snap.params), free(c->writer.snap.m), free(c->writer.snap.v);
    free(c->writer.snap.extra);
    memset(&c->writer, 0, sizeof(c->writer));
    if (c->dump != NULL) {
        ctrain_dump_close(c->dump);
    }
    if (c->csv != NULL) {
        fclose(c->csv);
    }
    if (c->ddp != NULL) {
        coll_result_t st = coll_ddp_destroy(c->ddp);
        if (!failed) {
            CHECK_COLL(st, "coll_ddp_destroy");
        }
    }
    if (c->zero != NULL) {
        coll_result_t st = coll_zero_destroy(c->zero);
        if (!failed) {
            CHECK_COLL(st, "coll_zero_destroy");
        }
    }
    if (c->gpt != NULL) {
        c->gpt->destroy(c->gpt);
    }
    free(c->opt.m), free(c->opt.v), free(c->lowp);
    lowp_model = NULL;
    c->gpt = NULL, c->ddp = NULL, c->zero = NULL, c->lowp = NULL, c->csv = NULL, c->dump = NULL;
    memset(&c->opt, 0, sizeof(c->opt));
}

/* 0 when the run is complete, 2 for an unusable setup, -1 when a collective failed and
 * --elastic is on (c->failed_step says where). */
static int train(ctrain_t *c)
{
    if (sigsetjmp(ctrain_elastic_jmp, 0) != 0) {
        return -1; /* ctrain_fail: nothing of this frame is used any more */
    }
    ctrain_elastic_armed      = c->o.elastic;
    const ctrain_opts_t o     = c->o;
    coll_comm_t        *world = c->world;
    int                 rank = c->rank, nranks = c->nranks, threads = c->threads;

    model_t *gpt;
    char     err[512];
    int      rc = strcmp(o.model, "mlp") == 0 ? model_mlp_create(&o, &gpt, err, sizeof(err))
                                              : model_gpt_create(&o, &gpt, err, sizeof(err));
    if (rc != 0) {
        fprintf(stderr, "ctrain: %s\n", err);
        return 2;
    }
    c->gpt           = gpt;
    coll_ddp_t  *ddp = c->ddp = o.zero == 0 ? ddp_setup(world, &o, gpt) : NULL;
    coll_zero_t *zero = c->zero = o.zero > 0 ? ctrain_zero_setup(world, &o, gpt) : NULL;
    size_t       nopt           = zero != NULL ? 0 : gpt->nparams; /* ZeRO holds its own, sharded */
    c->opt        = (adamw_t){calloc(nopt + 1, sizeof(float)), calloc(nopt + 1, sizeof(float)), 0};
    adamw_t *popt = &c->opt;
    int      B    = o.batch;
    FILE    *csv  = NULL;
    if (popt->m == NULL || popt->v == NULL) {
        fprintf(stderr, "ctrain: out of memory\n");
        return 2;
    }
    loss_scaler_t scaler = {o.precision == PREC_FP16 ? o.loss_scale : 1.0f, o.loss_scale_window, 0,
                            0};
    int           strict = c->attempt == 0; /* an elastic restart may have no checkpoint yet */
    int           start  = !o.resume      ? 0
                           : zero != NULL ? ctrain_zero_resume(zero, gpt, &o, rank, strict)
                                          : resume_state(&o, gpt, popt, &scaler, ddp, rank, nranks, strict);
    float        *lowp   = NULL;
    if (start >= o.steps) { /* a finished run resumed: nothing is trained or written */
        if (rank == 0) {
            printf("ctrain: nothing to do: checkpoint step %d >= --steps %d\n", start, o.steps);
        }
        ctrain_elastic_armed = 0;
        return 0;
    }
    if (c->attempt > 0 && rank == 0) { /* what --elastic did, in one line */
        printf("ctrain: elastic: %d ranks continue from %s", nranks,
               start > 0 ? "the checkpoint of step " : "step 0 (no checkpoint yet)");
        if (start > 0) {
            printf("%d", start);
        }
        if (zero != NULL && start > 0) {
            printf(", the ZeRO-%d state re-sharded for %d ranks", o.zero, nranks);
        }
        printf("; global batch now %d x %d sequences\n", nranks, B * o.grad_accum);
        fflush(stdout);
    }
    if (o.precision != PREC_FP32) {
        if ((lowp = c->lowp = malloc(gpt->nparams * sizeof(float) + 1)) == NULL) {
            fprintf(stderr, "ctrain: out of memory\n");
            return 2;
        }
        lowp_refresh(gpt, lowp, (prec_t)o.precision);
        lowp_attach(gpt, lowp);
        lowp_model = gpt;
        lowp_prec  = (prec_t)o.precision;
    }
    if (rank == 0 && o.csv_path != NULL && (csv = c->csv = csv_open(o.csv_path, start)) == NULL) {
        perror(o.csv_path);
        return 2;
    }
    if (rank == 0) {
        printf("ctrain: %s; %d ranks x batch %d x accum %d, %d thread%s per rank\n", gpt->desc,
               nranks, B, o.grad_accum, threads, threads > 1 ? "s" : "");
    }
    ctrain_dump_t *dump = c->dump =
        o.dump_dir != NULL && gpt->gpt != NULL ? ctrain_dump_open(o.dump_dir, &o, gpt->gpt) : NULL;

    double t_start = now_s(), comm_total = 0.0, t_ckpt[2] = {0, 0}; /* step time: without, with */
    int    n_ckpt[2]       = {0, 0};
    ckpt_writer_t *pwriter = &c->writer;
    pwriter->rank          = rank;
    pwriter->nranks        = nranks;
    uint64_t wire_prev     = 0;
    float    val_loss = NAN, val_acc = NAN;
    for (int step = start; step < o.steps; step++) {
        double t0        = now_s();
        int    in_flight = pwriter->busy != 0; /* a checkpoint is being written during this step */
        c->failed_step   = step;
        if (o.kill_at > 0 && c->attempt == 0 && start == 0 && step + 1 == o.kill_at &&
            rank == (o.kill_rank >= 0 ? o.kill_rank : nranks - 1)) {
            raise(SIGKILL); /* --kill-at: a rank dies hard in the middle of the run */
        }
        if (rank == o.slow_rank && o.slow_ms > 0) {
            usleep((useconds_t)o.slow_ms * 1000u); /* --slow-rank: a straggler */
        }
        if (zero != NULL) {
            ctrain_zero_begin(zero, gpt);
        } else {
            CHECK_COLL(coll_ddp_zero_grad(ddp), "coll_ddp_zero_grad");
        }
        double loss_acc = 0.0;
        for (int micro = 0; micro < o.grad_accum; micro++) {
            int last = micro == o.grad_accum - 1;
            if (ddp != NULL) {
                CHECK_COLL(coll_ddp_set_sync(ddp, last), "coll_ddp_set_sync");
            }
            /* the global item index fixes the data, whatever the number of ranks */
            uint64_t       g0    = (((uint64_t)step * o.grad_accum + micro) * nranks + rank) * B;
            gpt_ready_fn_t ready = zero != NULL ? ctrain_zero_ready : on_grads_ready;
            float l = gpt->train_micro(gpt, g0, B, scaler.scale / o.grad_accum, last ? ready : NULL,
                                       zero != NULL ? (void *)zero : (void *)ddp);
            if (l < 0.0f) {
                fprintf(stderr, "ctrain: rank %d: out of memory for a batch of %d\n", rank, B);
                return 1;
            }
            loss_acc += l;
            if (dump != NULL) {
                ctrain_dump_batch(dump, gpt->last_in, gpt->last_tg, B * o.seqlen);
            }
        }
        double   comm_s = 0.0, tz = now_s();
        uint64_t wire_now;
        float    lr = lr_at(&o, step), norm = NAN;
        if (zero != NULL) { /* reduce-scatter, shard-wise AdamW, all-gather */
            wire_now = ctrain_zero_step(zero, gpt, lr, o.clip, &norm);
            comm_s   = now_s() - tz;
        } else {
            coll_ddp_stats_t st;
            CHECK_COLL(coll_ddp_wait(ddp), "coll_ddp_wait");
            CHECK_COLL(coll_ddp_get_stats(ddp, &st), "coll_ddp_get_stats");
            comm_s   = st.wait_s;
            wire_now = st.wire_bytes;
        }
        double loss = loss_acc / o.grad_accum;
        CHECK_COLL(coll_allreduce(&loss, &loss, 1, COLL_FLOAT64, COLL_SUM, world),
                   "loss allreduce");
        loss /= nranks;
        if (dump != NULL && step == 0) {
            ctrain_dump_grads(dump, gpt->gpt);
        }
        int skipped = 0; /* fp16: inf or NaN in the averaged gradients */
        if (o.precision == PREC_FP16) {
            skipped = !loss_scaler_update(&scaler, gpt->grad_mem, gpt->nparams);
        }
        if (zero == NULL && !skipped) {
            norm = adamw_step(popt, &o, gpt->param_mem, gpt->grad_mem, gpt->nparams, lr);
        }
        if (lowp != NULL && !skipped) {
            lowp_refresh(gpt, lowp, (prec_t)o.precision);
        }
        if (dump != NULL) {
            ctrain_dump_loss(dump, step, loss, norm);
        }
        int do_eval = o.eval_every > 0 && ((step + 1) % o.eval_every == 0 || step + 1 == o.steps);
        if (do_eval) {
            val_loss = evaluate(gpt, &o, rank, nranks, world, &val_acc);
            print_stragglers(zero, ddp, rank, step + 1 == o.steps);
        }
        double dt = now_s() - t0; /* the step's time, before any checkpoint work */
        t_ckpt[in_flight] += dt;
        n_ckpt[in_flight]++;
        ckpt_finish(pwriter, world); /* commit the one written during this step */
        if (o.ckpt_every > 0 && (step + 1) % o.ckpt_every == 0) {
            if (zero != NULL) { /* synchronous: coll_zero_save is collective */
                ctrain_zero_save(zero, world, &o, step + 1, rank);
            } else {
                ckpt_start(pwriter, &o, gpt, popt, &scaler, ddp, step + 1);
            }
        }
        comm_total += comm_s;
        if (rank == 0) {
            double eta = (now_s() - t_start) / (step + 1 - start) * (o.steps - step - 1);
            printf("step %4d/%d | loss %.4f | lr %.2e | norm %.3f | %.0f %s/s | comm %4.1f%% | "
                   "wire %.2f MB | eta %dm%02ds",
                   step + 1, o.steps, loss, lr, norm,
                   (double)B * gpt->units * o.grad_accum * nranks / dt,
                   gpt->units == 1 ? "samples" : "tok", 100.0 * comm_s / dt,
                   (wire_now - wire_prev) / 1e6, (int)eta / 60, (int)eta % 60);
            if (do_eval) {
                printf(" | val %.4f", val_loss);
                if (gpt->units == 1) {
                    printf(" acc %.1f%%", 100.0 * val_acc);
                }
            }
            if (in_flight) {
                printf(" | ckpt written meanwhile");
            }
            if (o.precision == PREC_FP16) {
                printf(" | scale %g%s", (double)scaler.scale, skipped ? " (step skipped)" : "");
            }
            printf("\n");
            fflush(stdout);
        }
        if (zero != NULL && rank == 0 && step == start) {
            ctrain_zero_report(zero, gpt); /* the object's buckets exist from the first step */
        }
        wire_prev = wire_now;
        if (csv != NULL) {
            fprintf(csv, "%d,%.6f,%s%.6f,%.6e,%.6f,%.6f\n", step + 1, loss, "",
                    do_eval ? val_loss : NAN, lr, norm, dt);
            fflush(csv);
        }
    }
    ckpt_finish(pwriter, world);
    ctrain_elastic_armed = 0; /* the run is complete: what follows is no reason to go back */
    if (rank == 0 && n_ckpt[1] > 0) {
        printf("step time: %.1f ms without a checkpoint in flight (%d steps), %.1f ms with one "
               "(%d steps)\n",
               1e3 * t_ckpt[0] / (n_ckpt[0] > 0 ? n_ckpt[0] : 1), n_ckpt[0],
               1e3 * t_ckpt[1] / n_ckpt[1], n_ckpt[1]);
    }
    if (zero != NULL && o.sample > 0) {
        ctrain_zero_gather_all(zero, gpt); /* stage 3: rank 0 samples alone */
    }
    if (rank == 0) {
        double total = now_s() - t_start;
        printf("done: %d steps in %.1f s, final val loss %.4f, %.1f%% of the time waiting on "
               "communication\n",
               o.steps - start, total, val_loss, 100.0 * comm_total / total);
        if (o.precision == PREC_FP16) {
            printf("fp16: %d of %d steps skipped for inf/NaN gradients, final loss scale %g\n",
                   scaler.skipped, o.steps, (double)scaler.scale); /* counted across resumes */
        }
        if (o.sample > 0) {
            if (gpt->gpt != NULL) {
                model_gpt_sample(gpt, o.sample, o.seed);
            }
        }
    }
    return 0;
}

/* ---- main: set up, train (again on fewer ranks under --elastic), report ---- */

int main(int argc, char **argv)
{
    static ctrain_t c; /* static: it outlives every attempt's frame */
    if (ctrain_opts_parse(argc, argv, &c.o) != 0) {
        return 2;
    }
    c.threads = ctrain_threads();
    if (c.o.deterministic) {
        /* The arithmetic is deterministic on the CPU; what could vary between two runs is which
         * algorithm (so which summation order) a collective gets, when the tuner measures the
         * links under whatever load there is. Fixed costs make the choice a function of the
         * sizes alone (unless the user set the variable). */
        setenv("COLL_TUNE_MEASURE", "0", 0);
    }
    coll_comm_t *init_world;
    CHECK_COLL(coll_init(&argc, &argv, &init_world), "coll_init");
    c.world = init_world;
    coll_comm_rank(c.world, &c.rank);
    coll_comm_size(c.world, &c.nranks);
    if (c.o.dump_dir != NULL && (c.nranks != 1 || c.o.grad_accum != 1)) {
        fprintf(stderr, "ctrain: --dump needs 1 rank and --grad-accum 1\n");
        return 2;
    }
    double gbatch = (double)c.o.batch * c.o.grad_accum * c.nranks;   /* no int product overflows */
    if (c.o.eval_every > 0 && c.o.eval_batches * gbatch > INT_MAX) { /* evaluate() counts in int */
        fprintf(stderr,
                "ctrain: --eval-batches %d x global batch %.0f = %.0f validation sequences, "
                "more than %d\n",
                c.o.eval_batches, gbatch, c.o.eval_batches * gbatch, INT_MAX);
        return 2;
    }
    if (c.rank == 0 && !c.o.resume && c.o.ckpt_every > 0) {
        char newest[4300];
        if (ckpt_newest(c.o.ckpt_dir, newest, sizeof(newest))) {
            fprintf(stderr,
                    "ctrain: warning: %s already holds checkpoints, the newest %s; this run is "
                    "not resumed (--resume) and writes over those of the steps it saves\n",
                    c.o.ckpt_dir, newest);
        }
    }
    for (;;) {
        int rc = train(&c);
        train_release(&c, rc != 0);
        if (rc >= 0) {
            if (rc > 0) {
                return rc;
            }
            break;
        }
        /* --elastic: a collective failed; the survivors shrink and go on from the newest
         * checkpoint (re-sharded for their number) */
        if (ctrain_elastic_shrink(&c.world, init_world, &c.rank, &c.nranks, c.failed_step) != 0) {
            return 1;
        }
        c.attempt++;
        c.o.resume = 1;
    }
    if (c.world != init_world) {
        CHECK_COLL(coll_comm_destroy(c.world), "coll_comm_destroy");
    }
    coll_finalize();
    return 0;
}
