/* SPDX-License-Identifier: MIT */
/*
 * ctrain_zero.c -- the ZeRO path of ctrain (see ctrain_zero.h): registration, per-step gradient
 * views, readiness from backward, and the sharded optimizer step.
 */
#include "ctrain_zero.h"
#include "ckpt.h"
#include "ctrain_elastic.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Exits, or under --elastic goes back to the start of the attempt (ctrain_elastic.h). */
static void zero_check(coll_result_t st, const char *what)
{
    if (st != COLL_OK) {
        ctrain_fail(st, what);
    }
}

static void zero_point_params(coll_zero_t *z, model_t *m)
{
    coll_zero_stats_t st;
    zero_check(coll_zero_get_stats(z, &st), "coll_zero_get_stats");
    for (int i = 0; i < m->ntensors; i++) { /* stage 3: only while a unit is gathered */
        if (st.stage == 3) {
            m->params[i] = NULL;
        } else {
            zero_check(coll_zero_param(z, i, &m->params[i]), "coll_zero_param");
        }
    }
}

/* Stage 3: the GPT's hook (gpt_t.use). A unit is a ZeRO layer; gathering one prefetches the
 * next in the same direction (coll_zero_gather_layer). */
static coll_zero_t *use_zero;
static model_t     *use_model;

static void zero_use(void *arg, int unit, int gather)
{
    (void)arg;
    if (gather) {
        zero_check(coll_zero_gather_layer(use_zero, unit), "coll_zero_gather_layer");
    } else {
        zero_check(coll_zero_release_layer(use_zero, unit), "coll_zero_release_layer");
    }
    for (int i = 0; i < use_model->ntensors; i++) {
        if (gpt_tensor_unit(use_model->gpt, i) == unit) {
            if (gather) {
                zero_check(coll_zero_param(use_zero, i, &use_model->params[i]), "coll_zero_param");
            } else {
                use_model->params[i] = NULL;
            }
        }
    }
}

void ctrain_zero_gather_all(coll_zero_t *z, model_t *m)
{
    if (m->gpt == NULL || m->gpt->use == NULL) {
        return;
    }
    for (int u = 0; u <= m->gpt->cfg.layers + 1; u++) {
        zero_use(NULL, u, 1);
    }
    m->gpt->use = NULL; /* everything stays gathered from now on */
    (void)z;
}

coll_zero_t *ctrain_zero_setup(coll_comm_t *world, const ctrain_opts_t *o, model_t *m)
{
    coll_zero_config_t cfg = COLL_ZERO_CONFIG_INITIALIZER;
    coll_zero_t       *z;
    cfg.stage              = o->zero;
    cfg.bucket_cap_bytes   = (size_t)(o->bucket_mb * 1048576.0);
    cfg.optim.kind         = COLL_OPTIM_ADAMW;
    cfg.optim.lr           = o->lr;
    cfg.optim.beta1        = o->beta1;
    cfg.optim.beta2        = o->beta2;
    cfg.optim.eps          = o->eps;
    cfg.optim.weight_decay = o->weight_decay;
    zero_check(coll_zero_create(world, &cfg, &z), "coll_zero_create");
    for (int i = 0; i < m->ntensors; i++) {
        /* stages 1-2: one "layer" per tensor, buckets by size; stage 3: the GPT's units */
        int layer = o->zero == 3 ? gpt_tensor_unit(m->gpt, i) : i;
        zero_check(coll_zero_register(z, m->params[i], m->sizes[i], COLL_FLOAT32, layer, NULL),
                   "coll_zero_register");
    }
    if (o->zero == 3) { /* the object holds this rank's shard: the full copy can go */
        free(m->gpt->param_mem);
        m->gpt->param_mem = m->param_mem = NULL;
        use_zero                         = z;
        use_model                        = m;
        m->gpt->use                      = zero_use;
    }
    zero_point_params(z, m);
    return z;
}

void ctrain_zero_begin(coll_zero_t *z, model_t *m)
{
    for (int i = 0; i < m->ntensors; i++) {
        zero_check(coll_zero_grad(z, i, &m->grads[i]), "coll_zero_grad");
    }
}

void ctrain_zero_ready(void *arg, int first, int n)
{
    for (int i = first + n - 1; i >= first; i--) {
        zero_check(coll_zero_grad_ready(arg, i), "coll_zero_grad_ready");
    }
}

uint64_t ctrain_zero_step(coll_zero_t *z, model_t *m, float lr, float clip, float *norm_p)
{
    coll_zero_stats_t st;
    double            norm = 0.0;
    zero_check(coll_zero_clip_grad_norm(z, clip, &norm), "coll_zero_clip_grad_norm");
    zero_check(coll_zero_set_lr(z, lr), "coll_zero_set_lr");
    zero_check(coll_zero_step(z), "coll_zero_step");
    *norm_p = (float)norm;
    zero_point_params(z, m);
    zero_check(coll_zero_get_stats(z, &st), "coll_zero_get_stats");
    return st.wire_bytes;
}

void ctrain_zero_report(coll_zero_t *z, const model_t *m)
{
    coll_zero_stats_t st;
    zero_check(coll_zero_get_stats(z, &st), "coll_zero_get_stats");
    printf("zero: stage %d, this rank holds params %.2f MB, gradients %.2f MB, optimizer %.2f MB "
           "(replicated: %.2f, %.2f and %.2f MB)\n",
           st.stage, st.param_bytes / 1e6, st.grad_bytes / 1e6, st.optim_bytes / 1e6,
           m->nparams * 4 / 1e6, m->nparams * 4 / 1e6, m->nparams * 8 / 1e6);
    fflush(stdout);
}

/* ---- checkpoints: DIR/zero-step-NNNNNNNN, the library's shards plus ctrain.meta ---- */

static void zero_ckpt_path(char *buf, size_t len, const char *root, int step, const char *sfx)
{
    snprintf(buf, len, "%s/zero-step-%08d%s", root, step, sfx);
}

/* Rank 0: an empty directory path (a leftover of a crash is emptied first). */
static int zero_ckpt_fresh_dir(const char *path)
{
    DIR *d = opendir(path);
    if (d != NULL) {
        struct dirent *e;
        char           f[4608];
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] != '.') {
                snprintf(f, sizeof(f), "%s/%s", path, e->d_name);
                unlink(f);
            }
        }
        closedir(d);
        return 0;
    }
    return mkdir(path, 0777) == 0 ? 0 : -1;
}

int ctrain_zero_save(coll_zero_t *z, coll_comm_t *world, const ctrain_opts_t *o, int step, int rank)
{
    char dir[4096], tmp[4096], meta[4200];
    int  bad = 0;
    zero_ckpt_path(dir, sizeof(dir), o->ckpt_dir, step, "");
    zero_ckpt_path(tmp, sizeof(tmp), o->ckpt_dir, step, ".tmp");
    if (rank == 0) {
        if ((mkdir(o->ckpt_dir, 0777) != 0 && errno != EEXIST) || zero_ckpt_fresh_dir(tmp) != 0) {
            fprintf(stderr, "ctrain: cannot create %s: %s\n", tmp, strerror(errno));
            bad = 1;
        }
    }
    zero_check(coll_allreduce(&bad, &bad, 1, COLL_INT32, COLL_MAX, world), "checkpoint vote");
    if (bad) {
        return -1;
    }
    coll_result_t st = coll_zero_save(z, tmp); /* collective: every rank learns the outcome */
    if (st != COLL_OK) {
        if (rank == 0) {
            fprintf(stderr, "ctrain: checkpoint at step %d not written: %s\n", step,
                    coll_last_error());
        }
        return -1;
    }
    if (rank == 0) { /* the seed and run hash, then the rename that makes it count */
        snprintf(meta, sizeof(meta), "%s/ctrain.meta", tmp);
        FILE *f  = fopen(meta, "w");
        int   ok = f != NULL &&
                 fprintf(f, "seed %llu\nrun %016llx\n", (unsigned long long)o->seed,
                         (unsigned long long)ctrain_opts_run_hash(o)) > 0 &&
                 fflush(f) == 0 && fsync(fileno(f)) == 0;
        ok = (f != NULL && fclose(f) == 0) && ok;
        struct stat sb;
        if (ok && stat(dir, &sb) == 0) { /* an older save of this step (a rerun): replaced */
            zero_ckpt_fresh_dir(dir);
            rmdir(dir);
        }
        if (!ok || rename(tmp, dir) != 0) {
            fprintf(stderr, "ctrain: checkpoint at step %d not committed: %s\n", step,
                    strerror(errno));
            return -1;
        }
        int dfd = open(o->ckpt_dir, O_RDONLY | O_DIRECTORY);
        if (dfd >= 0) {
            fsync(dfd);
            close(dfd);
        }
    }
    return 0;
}

static int zero_step_cmp(const void *a, const void *b)
{
    return *(const int *)b - *(const int *)a; /* newest first */
}

/* ctrain.meta of dir: 0 this run's, -1 unreadable, -2 another run's or an older ctrain's. */
static int zero_ckpt_meta(const char *dir, uint64_t want, int rank)
{
    char               meta[4200];
    unsigned long long seed = 0, run = 0;
    snprintf(meta, sizeof(meta), "%s/ctrain.meta", dir);
    FILE *f = fopen(meta, "r");
    int   n = f != NULL ? fscanf(f, "seed %llu run %llx", &seed, &run) : -1;
    if (f != NULL) {
        fclose(f);
    }
    char why[128] = "";
    if (n == 1) {
        snprintf(why, sizeof(why), "written by an older ctrain (no run hash)");
    } else if (n != 2) {
        snprintf(why, sizeof(why), "ctrain.meta missing or unreadable");
    } else if (run != want) {
        snprintf(why, sizeof(why), "written by another run (run hash %016llx, this run's %016llx)",
                 run, (unsigned long long)want);
    }
    if (why[0] != '\0' && rank == 0) {
        fprintf(stderr, "ctrain: %s: %s; trying an older one\n", dir, why);
    }
    return why[0] == '\0' ? 0 : n == 1 || n == 2 ? -2 : -1;
}

int ctrain_zero_resume(coll_zero_t *z, model_t *m, const ctrain_opts_t *o, int rank, int strict)
{
    DIR     *d     = opendir(o->ckpt_dir);
    int     *steps = NULL, n = 0, cap = 0, found = 0, foreign = 0;
    uint64_t want = ctrain_opts_run_hash(o);
    if (d == NULL) {
        return 0;
    }
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        int  s;
        char tail;
        if (sscanf(e->d_name, "zero-step-%d%c", &s, &tail) == 1 && s > 0) {
            if (n == cap) {
                int *t = realloc(steps, (size_t)(cap = cap ? 2 * cap : 16) * sizeof(int));
                if (t == NULL) {
                    break;
                }
                steps = t;
            }
            steps[n++] = s;
        }
    }
    closedir(d);
    qsort(steps, (size_t)n, sizeof(int), zero_step_cmp);
    for (int i = 0; i < n && !found; i++) { /* every rank sees the same list: same order */
        char dir[4096];
        zero_ckpt_path(dir, sizeof(dir), o->ckpt_dir, steps[i], "");
        int mr = zero_ckpt_meta(dir, want, rank); /* before the load: another shape fails it */
        if (mr != 0) {
            foreign |= mr == -2;
            continue;
        }
        if (coll_zero_load(z, dir) != COLL_OK) {
            if (rank == 0) {
                fprintf(stderr, "ctrain: %s unusable (%s); trying an older one\n", dir,
                        coll_last_error());
            }
            continue;
        }
        zero_point_params(z, m);
        if (rank == 0) {
            printf("ctrain: resumed from %s\n", dir);
        }
        found = steps[i];
    }
    free(steps);
    if (found == 0 && foreign && strict) { /* step 0 would write over that run's checkpoints */
        ckpt_refuse_foreign(o->ckpt_dir, rank);
    }
    return found;
}
