/* SPDX-License-Identifier: MIT */
/*
 * Sharded ZeRO checkpoints. Each rank writes rank-NNNNN.bin: a header, a table of segments
 * (ranges of the model's flat element space, registration order, padding excluded) and, per
 * segment, the master parameters followed by each optimizer state array. Rank 0 writes the
 * manifest (text) naming the rank count, optimizer, step and every parameter's size. Each shard
 * ends with the FNV-1a 64 of every byte before it, checked before anything of it is used.
 * Loading maps each rank's new shard onto the old segments, so any rank count and stage can
 * load it.
 */
#include "config.h"
#include "train/zero.h"
#include "error.h"
#include "log.h"
#include "util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Range of bucket b this rank holds master values and optimizer state for, clipped to the
 * unpadded elements: [lo, lo + *len_p) relative to the bucket. */
static size_t ckpt_range(const zero_bucket_t *b, size_t *len_p)
{
    size_t lo = b->opt_lo, hi = b->opt_lo + b->opt_n;
    hi     = hi < b->count ? hi : b->count;
    *len_p = hi > lo ? hi - lo : 0;
    return lo;
}

#define CKPT_FNV_OFFSET 0xcbf29ce484222325ull
#define CKPT_FNV_PRIME  0x100000001b3ull

static uint64_t ckpt_fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h = (h ^ b[i]) * CKPT_FNV_PRIME;
    }
    return h;
}

/* fwrite of n items, folded into *hash; 1 when all were written. */
static int ckpt_put(FILE *f, const void *p, size_t size, size_t n, uint64_t *hash)
{
    *hash = ckpt_fnv(*hash, p, size * n);
    return fwrite(p, size, n, f) == n;
}

/* The trailer of a shard of size bytes (trailer included) matches its content? */
static int ckpt_verify(FILE *f, long size)
{
    unsigned char buf[65536];
    uint64_t      h    = CKPT_FNV_OFFSET, want;
    long          left = size - (long)sizeof(want);

    if (left < 0 || fseek(f, 0, SEEK_SET) != 0) {
        return 0;
    }
    while (left > 0) {
        size_t n = (size_t)(left < (long)sizeof(buf) ? left : (long)sizeof(buf));
        if (fread(buf, 1, n, f) != n) {
            return 0;
        }
        h = ckpt_fnv(h, buf, n);
        left -= (long)n;
    }
    return fread(&want, sizeof(want), 1, f) == 1 && want == h && fseek(f, 0, SEEK_SET) == 0;
}

static coll_result_t ckpt_write(coll_zero_t *z, const char *path, const char *fn)
{
    FILE                   *f = fopen(path, "wb");
    coll_zero_ckpt_header_t h = {
        COLL_ZERO_CKPT_MAGIC, COLL_ZERO_CKPT_VERSION,        (uint32_t)z->rank,
        (uint32_t)z->nranks,  (uint32_t)coll_zero_nstate(z), (uint64_t)z->nbuckets};
    int ok;

    if (f == NULL) {
        return coll_train_error(COLL_ERR_SYSTEM, fn, "cannot create %s: %s", path, strerror(errno));
    }
    uint64_t hash = CKPT_FNV_OFFSET;
    ok            = ckpt_put(f, &h, sizeof(h), 1, &hash);
    for (int k = 0; k < z->nbuckets && ok; k++) {
        zero_bucket_t *b = &z->buckets[k];
        size_t         len, lo = ckpt_range(b, &len);
        /* a rank holding padding only: an empty segment at the bucket's end, inside the model */
        coll_zero_ckpt_seg_t s = {z->params[b->lo].gstart + (lo < b->count ? lo : b->count), len};
        ok                     = ckpt_put(f, &s, sizeof(s), 1, &hash);
    }
    for (int k = 0; k < z->nbuckets && ok; k++) {
        zero_bucket_t *b = &z->buckets[k];
        size_t         len, lo = ckpt_range(b, &len);
        float         *master = coll_zero_master(b);
        ok                    = ckpt_put(f, master + (lo - b->opt_lo), sizeof(float), len, &hash);
        for (int s = 0; s < coll_zero_nstate(z) && ok; s++) {
            ok = ckpt_put(f, b->state[s] + (lo - b->opt_lo), sizeof(float), len, &hash);
        }
    }
    ok = ok && fwrite(&hash, sizeof(hash), 1, f) == 1;
    ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
    if (fclose(f) != 0 || !ok) {
        return coll_train_error(COLL_ERR_SYSTEM, fn, "cannot write %s: %s", path, strerror(errno));
    }
    return COLL_OK;
}

static coll_result_t ckpt_write_manifest(coll_zero_t *z, const char *dir, const char *fn)
{
    char  path[4096];
    FILE *f;
    snprintf(path, sizeof(path), "%s/manifest", dir);
    f = fopen(path, "w");
    if (f == NULL) {
        return coll_train_error(COLL_ERR_SYSTEM, fn, "cannot create %s: %s", path, strerror(errno));
    }
    fprintf(f, "coll-zero-checkpoint %d\nnranks %d\nstage %d\noptim %d\nstep %llu\nnparams %d\n",
            COLL_ZERO_CKPT_VERSION, z->nranks, z->cfg.stage, (int)z->cfg.optim.kind,
            (unsigned long long)z->steps, z->nparams);
    for (int i = 0; i < z->nparams; i++) {
        fprintf(f, "param %d %zu %d\n", i, z->params[i].count, z->params[i].layer);
    }
    for (int r = 0; r < z->nranks; r++) {
        fprintf(f, "file rank-%05d.bin\n", r);
    }
    if (fclose(f) != 0) {
        return coll_train_error(COLL_ERR_SYSTEM, fn, "cannot write %s: %s", path, strerror(errno));
    }
    return COLL_OK;
}

COLL_API coll_result_t coll_zero_save(coll_zero_t *zero, const char *dir)
{
    const char   *fn = "coll_zero_save";
    char          path[4096];
    coll_result_t st, all;
    int           bad, anybad;

    if (zero == NULL || dir == NULL) {
        return coll_train_error(COLL_ERR_INVALID_ARG, fn, "%s is NULL",
                                zero == NULL ? "zero" : "dir");
    }
    COLL_CHECK(coll_zero_build(zero, fn));
    COLL_CHECK(coll_zero_idle(zero, fn));
    snprintf(path, sizeof(path), "%s/rank-%05d.bin", dir, zero->rank);
    st = ckpt_write(zero, path, fn);
    if (st == COLL_OK && zero->rank == 0) {
        st = ckpt_write_manifest(zero, dir, fn);
    }
    /* every rank learns whether every file was written (the worker is idle between steps) */
    bad = st != COLL_OK;
    all = coll_allreduce(&bad, &anybad, 1, COLL_INT32, COLL_MAX, zero->worker.comm);
    if (all != COLL_OK) {
        return coll_train_error(all, fn, "agreeing on the result failed: %s",
                                coll_comm_last_error(zero->worker.comm));
    }
    if (st == COLL_OK && anybad) {
        return coll_train_error(COLL_ERR_REMOTE, fn, "another rank failed to write its shard");
    }
    return st;
}

/* ---- load ---- */

typedef struct {
    int                nranks, stage, optim, nparams;
    unsigned long long step;
} ckpt_manifest_t;

static coll_result_t ckpt_read_manifest(coll_zero_t *z, const char *dir, ckpt_manifest_t *m,
                                        const char *fn)
{
    char  path[4096];
    int   version = 0, ok;
    FILE *f;
    snprintf(path, sizeof(path), "%s/manifest", dir);
    f = fopen(path, "r");
    if (f == NULL) {
        return coll_train_error(COLL_ERR_SYSTEM, fn, "cannot open %s: %s", path, strerror(errno));
    }
    ok = fscanf(f, "coll-zero-checkpoint %d nranks %d stage %d optim %d step %llu nparams %d",
                &version, &m->nranks, &m->stage, &m->optim, &m->step, &m->nparams) == 6;
    if (!ok || version != COLL_ZERO_CKPT_VERSION || m->nranks < 1) {
        fclose(f);
        return coll_train_error(COLL_ERR_INVALID_ARG, fn,
                                "%s is not a version %d checkpoint manifest", path,
                                COLL_ZERO_CKPT_VERSION);
    }
    if (m->nparams != z->nparams || m->optim != (int)z->cfg.optim.kind) {
        fclose(f);
        return coll_train_error(COLL_ERR_INVALID_ARG, fn,
                                "%s has %d parameters and optimizer %d; this object has %d and %d",
                                path, m->nparams, m->optim, z->nparams, (int)z->cfg.optim.kind);
    }
    for (int i = 0; i < m->nparams; i++) {
        int    idx, layer;
        size_t count;
        if (fscanf(f, " param %d %zu %d", &idx, &count, &layer) != 3 || idx != i ||
            count != z->params[i].count) {
            fclose(f);
            return coll_train_error(COLL_ERR_INVALID_ARG, fn,
                                    "%s: parameter %d differs from the registered one (%zu "
                                    "elements)",
                                    path, i, z->params[i].count);
        }
    }
    fclose(f);
    return COLL_OK;
}

coll_result_t coll_zero_ckpt_read_table(FILE *f, uint64_t file_size, uint32_t nstate,
                                        uint64_t nelems, coll_zero_ckpt_header_t *h,
                                        coll_zero_ckpt_seg_t **segs_p, char *why, size_t why_len)
{
    coll_zero_ckpt_seg_t *segs;
    uint64_t              data = 0;

    *segs_p = NULL;
    if (fread(h, sizeof(*h), 1, f) != 1) {
        snprintf(why, why_len, "shorter than a shard header");
        return COLL_ERR_INVALID_ARG;
    }
    if (h->magic != COLL_ZERO_CKPT_MAGIC || h->version != COLL_ZERO_CKPT_VERSION) {
        snprintf(why, why_len, "not a shard of a version %d checkpoint", COLL_ZERO_CKPT_VERSION);
        return COLL_ERR_INVALID_ARG;
    }
    if (h->nstate != nstate || h->nranks < 1 || h->rank >= h->nranks ||
        h->nseg > COLL_ZERO_CKPT_MAX_SEGS) {
        snprintf(why, why_len, "header says rank %u of %u, %u optimizer states, %llu segments",
                 h->rank, h->nranks, h->nstate, (unsigned long long)h->nseg);
        return COLL_ERR_INVALID_ARG;
    }
    if (h->nseg * sizeof(*segs) > file_size - sizeof(*h) || file_size < sizeof(*h)) {
        snprintf(why, why_len, "truncated segment table");
        return COLL_ERR_INVALID_ARG;
    }
    segs = coll_calloc(h->nseg + 1, sizeof(*segs), "checkpoint segments");
    if (segs == NULL) {
        snprintf(why, why_len, "out of memory");
        return COLL_ERR_NO_MEMORY;
    }
    if (fread(segs, sizeof(*segs), h->nseg, f) != h->nseg) {
        coll_free(segs);
        snprintf(why, why_len, "truncated segment table");
        return COLL_ERR_INVALID_ARG;
    }
    for (uint64_t s = 0; s < h->nseg; s++) {
        if (segs[s].len == 0 && segs[s].gstart > nelems) {
            segs[s].gstart = nelems; /* empty: earlier writers put one past the model's end */
        }
        if (segs[s].len > nelems || segs[s].gstart > nelems - segs[s].len) {
            snprintf(why, why_len,
                     "segment %llu [%llu, +%llu) lies outside the model's %llu elements",
                     (unsigned long long)s, (unsigned long long)segs[s].gstart,
                     (unsigned long long)segs[s].len, (unsigned long long)nelems);
            coll_free(segs);
            return COLL_ERR_INVALID_ARG;
        }
        data += (uint64_t)(nstate + 1) * segs[s].len * sizeof(float); /* <= 3 * 4 * nelems each */
    }
    if (data > file_size - sizeof(*h) - h->nseg * sizeof(*segs)) {
        snprintf(why, why_len, "%llu bytes of data announced, the file is %llu bytes",
                 (unsigned long long)data, (unsigned long long)file_size);
        coll_free(segs);
        return COLL_ERR_INVALID_ARG;
    }
    *segs_p = segs;
    return COLL_OK;
}

/* Copy from one old rank's file every piece of its segments inside this rank's ranges. */
static coll_result_t ckpt_read_rank(coll_zero_t *z, const char *dir, int r, int nstate,
                                    const char *fn)
{
    char                    path[4096], why[200];
    coll_zero_ckpt_header_t h;
    FILE                   *f;
    coll_zero_ckpt_seg_t   *segs = NULL;
    long                    data, size;
    coll_result_t           st = COLL_OK;
    uint64_t nelems            = z->params[z->nparams - 1].gstart + z->params[z->nparams - 1].count;

    snprintf(path, sizeof(path), "%s/rank-%05d.bin", dir, r);
    f = fopen(path, "rb");
    if (f == NULL) {
        return coll_train_error(COLL_ERR_SYSTEM, fn, "cannot open %s: %s", path, strerror(errno));
    }
    if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        st = coll_train_error(COLL_ERR_SYSTEM, fn, "cannot read %s: %s", path, strerror(errno));
        goto out;
    }
    if (!ckpt_verify(f, size)) {
        st = coll_train_error(COLL_ERR_INVALID_ARG, fn,
                              "%s: checksum mismatch (corrupt or truncated shard)", path);
        goto out;
    }
    size -= (long)sizeof(uint64_t); /* the trailer */
    if (coll_zero_ckpt_read_table(f, (uint64_t)size, (uint32_t)nstate, nelems, &h, &segs, why,
                                  sizeof(why)) != COLL_OK) {
        st = coll_train_error(COLL_ERR_INVALID_ARG, fn, "%s: %s", path, why);
        goto out;
    }
    data = (long)(sizeof(h) + h.nseg * sizeof(*segs));
    for (uint64_t s = 0; s < h.nseg && st == COLL_OK; s++) {
        for (int k = 0; k < z->nbuckets && st == COLL_OK; k++) {
            zero_bucket_t *b = &z->buckets[k];
            size_t         len, lo = ckpt_range(b, &len);
            uint64_t       g0 = z->params[b->lo].gstart + lo, g1 = g0 + len;
            uint64_t       a = segs[s].gstart > g0 ? segs[s].gstart : g0;
            uint64_t e = segs[s].gstart + segs[s].len < g1 ? segs[s].gstart + segs[s].len : g1;
            if (a >= e) {
                continue;
            }
            for (int arr = 0; arr <= nstate; arr++) {
                float *dst = arr == 0 ? coll_zero_master(b) : b->state[arr - 1];
                long   off = data + (long)(((uint64_t)arr * segs[s].len + (a - segs[s].gstart)) *
                                         sizeof(float));
                dst += (a - g0) + (lo - b->opt_lo);
                if (fseek(f, off, SEEK_SET) != 0 ||
                    fread(dst, sizeof(float), (size_t)(e - a), f) != (size_t)(e - a)) {
                    st = coll_train_error(COLL_ERR_SYSTEM, fn, "%s: truncated data", path);
                    break;
                }
            }
        }
        data += (long)((uint64_t)(nstate + 1) * segs[s].len * sizeof(float));
    }
out:
    coll_free(segs);
    fclose(f);
    return st;
}

COLL_API coll_result_t coll_zero_load(coll_zero_t *zero, const char *dir)
{
    const char     *fn = "coll_zero_load";
    ckpt_manifest_t m;

    if (zero == NULL || dir == NULL) {
        return coll_train_error(COLL_ERR_INVALID_ARG, fn, "%s is NULL",
                                zero == NULL ? "zero" : "dir");
    }
    COLL_CHECK(coll_zero_build(zero, fn));
    COLL_CHECK(coll_zero_idle(zero, fn));
    COLL_CHECK(coll_zero_drop_gathered(zero, fn)); /* copies of the parameters before the load */
    coll_result_t st = ckpt_read_manifest(zero, dir, &m, fn), all;
    for (int r = 0; st == COLL_OK && r < m.nranks; r++) {
        st = ckpt_read_rank(zero, dir, r, coll_zero_nstate(zero), fn);
    }
    /* every rank learns whether every rank could read it, so that none goes on alone into the
     * gather below (the worker is idle before training) */
    int bad = st != COLL_OK, anybad = 0;
    all = coll_allreduce(&bad, &anybad, 1, COLL_INT32, COLL_MAX, zero->worker.comm);
    if (all != COLL_OK) {
        return coll_train_error(all, fn, "agreeing on the result failed: %s",
                                coll_comm_last_error(zero->worker.comm));
    }
    if (st != COLL_OK) {
        return st; /* its message stays the last error */
    }
    if (anybad) {
        return coll_train_error(COLL_ERR_REMOTE, fn, "another rank could not read %s", dir);
    }
    zero->steps = m.step;
    coll_info(TRAIN, "zero: loaded %s (written by %d ranks at stage %d, step %llu)", dir, m.nranks,
              m.stage, m.step);
    return coll_zero_gather_all(zero, fn);
}
