/* SPDX-License-Identifier: MIT */
/*
 * ctrain_dump.c -- writing the replay files of --dump DIR (see ctrain_dump.h): config.txt
 * (key value lines), params.bin (fp32, tensors in registration order), batches.bin (inputs then
 * targets of each step, bytes), grads0.bin (fp32, first step) and losses.txt.
 */
#include "ctrain_dump.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct ctrain_dump {
    char  dir[4096];
    FILE *batches, *losses;
};

static FILE *dump_fopen(const char *dir, const char *name)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (f == NULL) {
        fprintf(stderr, "ctrain: cannot write %s: %s\n", path, strerror(errno));
        exit(2);
    }
    return f;
}

ctrain_dump_t *ctrain_dump_open(const char *dir, const ctrain_opts_t *o, const gpt_t *gpt)
{
    ctrain_dump_t *d = calloc(1, sizeof(*d));
    if (d == NULL || (mkdir(dir, 0755) != 0 && errno != EEXIST)) {
        fprintf(stderr, "ctrain: cannot create %s: %s\n", dir, strerror(errno));
        exit(2);
    }
    snprintf(d->dir, sizeof(d->dir), "%s", dir);
    FILE *f = dump_fopen(dir, "config.txt");
    fprintf(f,
            "vocab %d\nctx %d\nlayers %d\nheads %d\nchannels %d\nbatch %d\nseqlen %d\n"
            "steps %d\nlr %.9g\nwarmup %d\nmin_lr_ratio %.9g\nweight_decay %.9g\nclip %.9g\n"
            "beta1 %.9g\nbeta2 %.9g\neps %.9g\n",
            gpt->cfg.vocab, gpt->cfg.ctx, gpt->cfg.layers, gpt->cfg.heads, gpt->cfg.channels,
            o->batch, o->seqlen, o->steps, o->lr, o->warmup, o->min_lr_ratio, o->weight_decay,
            o->clip, o->beta1, o->beta2, o->eps);
    fclose(f);
    f = dump_fopen(dir, "params.bin");
    fwrite(gpt->param_mem, sizeof(float), gpt->nparams, f);
    fclose(f);
    d->batches = dump_fopen(dir, "batches.bin");
    d->losses  = dump_fopen(dir, "losses.txt");
    return d;
}

void ctrain_dump_batch(ctrain_dump_t *d, const uint8_t *in, const uint8_t *tg, int n)
{
    fwrite(in, 1, (size_t)n, d->batches);
    fwrite(tg, 1, (size_t)n, d->batches);
}

void ctrain_dump_grads(ctrain_dump_t *d, const gpt_t *gpt)
{
    FILE *f = dump_fopen(d->dir, "grads0.bin");
    fwrite(gpt->grad_mem, sizeof(float), gpt->nparams, f);
    fclose(f);
}

void ctrain_dump_loss(ctrain_dump_t *d, int step, double loss, float norm)
{
    fprintf(d->losses, "%d %.9g %.9g\n", step, loss, norm);
}

void ctrain_dump_close(ctrain_dump_t *d)
{
    fclose(d->batches);
    fclose(d->losses);
    free(d);
}
