/* SPDX-License-Identifier: MIT */
/*
 * ckpt.h -- ctrain's checkpoints (atomic, checksummed, one shard per rank; see ckpt.c).
 */
#ifndef CTRAIN_CKPT_H
#define CTRAIN_CKPT_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    float   *params, *m, *v; /* nparams each: the whole state (replicated under DDP) */
    size_t   nparams;
    uint64_t adam_t; /* optimizer steps taken */
    uint64_t seed;
    uint64_t run_hash; /* ctrain_opts_run_hash: save writes it, load skips other values */
    /* fp16's dynamic loss scaler (precision.h): its scale and counters continue on resume */
    float    loss_scale;
    uint64_t scale_good, scale_skipped;
    /* Optional: this rank's own state (the compressors' residuals), extra_len bytes, saved as
     * extra-R-of-N.bin; on load every rank's file is verified and this rank's copied in when
     * the checkpoint was made by nranks ranks (extra_loaded 1), else left alone (0). */
    void  *extra;
    size_t extra_len;
    int    rank, nranks; /* load: who reads */
    int    extra_loaded;
} ckpt_state_t;

/* This rank's slice of the state into root/step-NNNNNNNN/; 0 or -1 (message printed). */
int ckpt_save_shard(const char *root, uint64_t step, int rank, int nranks, const ckpt_state_t *s);
/* Rank 0, after every rank saved: write the manifest that makes the checkpoint valid. */
int ckpt_commit(const char *root, uint64_t step, int nranks);
/* Newest valid checkpoint of the run s->run_hash into s: 0 loaded (*step_p set), 1 none
 * usable, 2 none usable and at least one skipped as another run's (another run hash, or the
 * format of an older ctrain). s may be partly overwritten when 1 or 2 is returned. */
int ckpt_load_latest(const char *root, ckpt_state_t *s, uint64_t *step_p);
/* --resume found only another run's checkpoints in root: rank 0 says so, every rank exits 2
 * (training from step 0 would write over them). */
void ckpt_refuse_foreign(const char *root, int rank) __attribute__((noreturn));
/* The newest checkpoint directory in root (step-N or zero-step-N) into name: 1, or 0 if none. */
int ckpt_newest(const char *root, char *name, size_t len);

#endif
