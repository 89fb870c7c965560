/* SPDX-License-Identifier: MIT */
/*
 * ckpt.c -- ctrain's checkpoints: DIR/step-NNNNNNNN/shard-R-of-N.bin, each rank writing its
 * 1/N slice of the parameters and AdamW moments with the step (which fixes the data position
 * and the schedule), the hash of the options that set the trajectory and fp16's loss scaler,
 * then a manifest written by rank 0 once every shard is on disk. Every file is written to a
 * temporary name, fsynced and renamed (atomic) and carries an FNV-1a checksum (the shard header
 * one of its own too); a checkpoint with a missing or corrupt file, or of another run, is
 * skipped for the one before.
 * A rank may add its own state (the compressors' residuals) as extra-R-of-N.bin, checksummed
 * the same way and verified by every rank on load. ctrain calls ckpt_save_shard from a
 * background thread, on a copy of the state.
 */
#include "ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CKPT_MAGIC       0x3254504b43525443ULL /* "CTRCKPT2": run hash, loss scaler */
#define CKPT_MAGIC_V1    0x3154504b43525443ULL /* "CTRCKPT1": refused, named */
#define CKPT_EXTRA_MAGIC 0x3158504b43525443ULL /* "CTRCKPX1" */

typedef struct {
    uint64_t magic, len, checksum;
} extra_header_t;

typedef struct {
    uint64_t magic, step, nparams, off, count, adam_t, seed, nranks, rank;
    uint64_t run_hash;
    uint64_t scale_bits, scale_good, scale_skipped; /* the fp16 loss scale's float bits */
    uint64_t head_checksum; /* of the header alone: its run hash is trusted before the data */
    uint64_t checksum;      /* of the header (this field 0) and the data */
} ckpt_header_t;

static uint64_t fnv1a(uint64_t h, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    for (size_t i = 0; i < len; i++) {
        h = (h ^ p[i]) * 0x100000001b3ULL;
    }
    return h;
}

/* Write len bytes of parts to path atomically: tmp file, fsync, rename, fsync directory. */
static int write_atomic(const char *dir, const char *name, const void *const *parts,
                        const size_t *lens, int nparts)
{
    char tmp[4200], path[4200];
    snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", dir, name);
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        fprintf(stderr, "ctrain: checkpoint: cannot create %s: %s\n", tmp, strerror(errno));
        return -1;
    }
    for (int i = 0; i < nparts; i++) {
        const char *p = parts[i];
        for (size_t done = 0; done < lens[i];) {
            ssize_t n = write(fd, p + done, lens[i] - done);
            if (n < 0 && errno == EINTR) {
                continue;
            }
            if (n <= 0) {
                fprintf(stderr, "ctrain: checkpoint: write %s: %s\n", tmp, strerror(errno));
                close(fd);
                return -1;
            }
            done += (size_t)n;
        }
    }
    if (fsync(fd) != 0 || close(fd) != 0 || rename(tmp, path) != 0) {
        fprintf(stderr, "ctrain: checkpoint: finishing %s: %s\n", path, strerror(errno));
        return -1;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return 0;
}

int ckpt_save_shard(const char *root, uint64_t step, int rank, int nranks, const ckpt_state_t *s)
{
    char dir[4200], name[64];
    snprintf(dir, sizeof(dir), "%s/step-%08llu", root, (unsigned long long)step);
    if ((mkdir(root, 0755) != 0 && errno != EEXIST) || (mkdir(dir, 0755) != 0 && errno != EEXIST)) {
        fprintf(stderr, "ctrain: checkpoint: mkdir %s: %s\n", dir, strerror(errno));
        return -1;
    }
    size_t   off = s->nparams * (size_t)rank / nranks;
    size_t   cnt = s->nparams * (size_t)(rank + 1) / nranks - off;
    uint32_t scale;
    memcpy(&scale, &s->loss_scale, sizeof(scale));
    ckpt_header_t h       = {.magic         = CKPT_MAGIC,
                             .step          = step,
                             .nparams       = s->nparams,
                             .off           = off,
                             .count         = cnt,
                             .adam_t        = s->adam_t,
                             .seed          = s->seed,
                             .nranks        = (uint64_t)nranks,
                             .rank          = (uint64_t)rank,
                             .run_hash      = s->run_hash,
                             .scale_bits    = scale,
                             .scale_good    = s->scale_good,
                             .scale_skipped = s->scale_skipped};
    h.head_checksum       = fnv1a(0xcbf29ce484222325ULL, &h, sizeof(h));
    uint64_t c            = fnv1a(0xcbf29ce484222325ULL, &h, sizeof(h));
    c                     = fnv1a(c, s->params + off, cnt * sizeof(float));
    c                     = fnv1a(c, s->m + off, cnt * sizeof(float));
    c                     = fnv1a(c, s->v + off, cnt * sizeof(float));
    h.checksum            = c;
    const void  *parts[4] = {&h, s->params + off, s->m + off, s->v + off};
    const size_t lens[4]  = {sizeof(h), cnt * 4, cnt * 4, cnt * 4};
    snprintf(name, sizeof(name), "shard-%d-of-%d.bin", rank, nranks);
    if (write_atomic(dir, name, parts, lens, 4) != 0) {
        return -1;
    }
    if (s->extra_len == 0) {
        return 0;
    }
    extra_header_t x = {CKPT_EXTRA_MAGIC, s->extra_len, 0};
    x.checksum       = fnv1a(fnv1a(0xcbf29ce484222325ULL, &x, sizeof(x)), s->extra, s->extra_len);
    const void  *xparts[2] = {&x, s->extra};
    const size_t xlens[2]  = {sizeof(x), s->extra_len};
    snprintf(name, sizeof(name), "extra-%d-of-%d.bin", rank, nranks);
    return write_atomic(dir, name, xparts, xlens, 2);
}

/* Every rank's extra file of a checkpoint made by nranks ranks verifies; this rank's into s. */
static int ckpt_load_extras(const char *dir, int nranks, ckpt_state_t *s)
{
    char  path[4300];
    void *buf = malloc(s->extra_len + 1);
    int   rc  = buf != NULL ? 0 : -1;
    for (int r = 0; r < nranks && rc == 0; r++) {
        extra_header_t x;
        snprintf(path, sizeof(path), "%s/extra-%d-of-%d.bin", dir, r, nranks);
        FILE *f  = fopen(path, "rb");
        int   ok = f != NULL && fread(&x, sizeof(x), 1, f) == 1 && x.magic == CKPT_EXTRA_MAGIC &&
                 x.len == s->extra_len && fread(buf, 1, x.len, f) == x.len && fgetc(f) == EOF;
        if (f != NULL) {
            fclose(f);
        }
        uint64_t want = ok ? x.checksum : 0;
        x.checksum    = 0;
        if (!ok || fnv1a(fnv1a(0xcbf29ce484222325ULL, &x, sizeof(x)), buf, s->extra_len) != want) {
            fprintf(stderr, "ctrain: checkpoint %s: extra state of rank %d missing or corrupt\n",
                    dir, r);
            rc = -1;
        } else if (r == s->rank) {
            memcpy(s->extra, buf, s->extra_len);
        }
    }
    free(buf);
    return rc;
}

int ckpt_commit(const char *root, uint64_t step, int nranks)
{
    char dir[4200], text[128];
    snprintf(dir, sizeof(dir), "%s/step-%08llu", root, (unsigned long long)step);
    int n =
        snprintf(text, sizeof(text), "step %llu\nshards %d\n", (unsigned long long)step, nranks);
    const void  *parts[1] = {text};
    const size_t lens[1]  = {(size_t)n};
    return write_atomic(dir, "manifest", parts, lens, 1);
}

/* The header of shard r: 0, -1 missing or corrupt, -2 of another run or an older ctrain. */
static int ckpt_read_header(FILE *f, const char *dir, int r, const ckpt_state_t *s,
                            ckpt_header_t *h)
{
    if (f == NULL || fread(h, sizeof(*h), 1, f) != 1) {
        fprintf(stderr, "ctrain: checkpoint %s: shard %d missing or truncated\n", dir, r);
        return -1;
    }
    if (h->magic == CKPT_MAGIC_V1) {
        fprintf(stderr, "ctrain: checkpoint %s: written by an older ctrain (format 1), not read\n",
                dir);
        return -2;
    }
    uint64_t want = h->head_checksum, sum = h->checksum;
    h->head_checksum = 0, h->checksum = 0;
    uint64_t c       = fnv1a(0xcbf29ce484222325ULL, h, sizeof(*h));
    h->head_checksum = want, h->checksum = sum;
    if (h->magic != CKPT_MAGIC || c != want) {
        fprintf(stderr, "ctrain: checkpoint %s: shard %d is corrupt (header)\n", dir, r);
        return -1;
    }
    if (h->run_hash != s->run_hash) {
        fprintf(stderr,
                "ctrain: checkpoint %s: written by another run (run hash %016llx, this run's "
                "%016llx: other model, data, schedule, batch, precision, compression or seed)\n",
                dir, (unsigned long long)h->run_hash, (unsigned long long)s->run_hash);
        return -2;
    }
    return 0;
}

/* Read and verify every shard of one checkpoint into s (sized for s->nparams): 0, -1 missing
 * or corrupt, -2 another run's. */
static int ckpt_load_dir(const char *dir, ckpt_state_t *s, uint64_t *step_p)
{
    char               path[4300];
    int                nranks = 0;
    unsigned long long step;
    snprintf(path, sizeof(path), "%s/manifest", dir);
    FILE *f = fopen(path, "r");
    if (f == NULL || fscanf(f, "step %llu shards %d", &step, &nranks) != 2 || nranks <= 0) {
        if (f != NULL) {
            fclose(f);
        }
        return -1; /* never committed */
    }
    fclose(f);
    for (int r = 0; r < nranks; r++) {
        snprintf(path, sizeof(path), "%s/shard-%d-of-%d.bin", dir, r, nranks);
        ckpt_header_t h;
        f      = fopen(path, "rb");
        int hr = ckpt_read_header(f, dir, r, s, &h);
        if (hr == 0 && (h.nparams != s->nparams || h.step != step || h.nranks != (uint64_t)nranks ||
                        h.off + h.count > s->nparams)) {
            fprintf(stderr, "ctrain: checkpoint %s: shard %d does not match its manifest\n", dir,
                    r);
            hr = -1;
        }
        if (hr != 0) {
            if (f != NULL) {
                fclose(f);
            }
            return hr;
        }
        int ok = fread(s->params + h.off, 4, h.count, f) == h.count &&
                 fread(s->m + h.off, 4, h.count, f) == h.count &&
                 fread(s->v + h.off, 4, h.count, f) == h.count && fgetc(f) == EOF;
        fclose(f);
        uint64_t want = h.checksum;
        h.checksum    = 0;
        uint64_t c    = fnv1a(0xcbf29ce484222325ULL, &h, sizeof(h)); /* head_checksum in it */
        c             = fnv1a(c, s->params + h.off, h.count * 4);
        c             = fnv1a(c, s->m + h.off, h.count * 4);
        c             = fnv1a(c, s->v + h.off, h.count * 4);
        if (!ok || c != want) {
            fprintf(stderr, "ctrain: checkpoint %s: shard %d is corrupt (checksum)\n", dir, r);
            return -1;
        }
        uint32_t scale = (uint32_t)h.scale_bits;
        memcpy(&s->loss_scale, &scale, sizeof(scale));
        s->adam_t = h.adam_t, s->seed = h.seed;
        s->scale_good = h.scale_good, s->scale_skipped = h.scale_skipped;
    }
    s->extra_loaded = 0;
    if (s->extra_len > 0 && nranks == s->nranks) { /* per-rank state maps onto the same ranks */
        if (ckpt_load_extras(dir, nranks, s) != 0) {
            return -1;
        }
        s->extra_loaded = 1;
    }
    *step_p = step;
    return 0;
}

static int ckpt_cmp_desc(const void *a, const void *b)
{
    return strcmp(*(char *const *)b, *(char *const *)a);
}

/* The names in root that begin with prefix, newest first (fixed-width numbers); *n_p of them. */
static char **ckpt_list(const char *root, const char *prefix, size_t *n_p)
{
    DIR *d = opendir(root);
    *n_p   = 0;
    if (d == NULL) {
        return NULL; /* nothing saved yet */
    }
    char         **names = NULL;
    size_t         n = 0, plen = strlen(prefix);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, prefix, plen) == 0 && strchr(e->d_name, '.') == NULL) {
            char **nn = realloc(names, (n + 1) * sizeof(char *));
            if (nn == NULL) {
                break;
            }
            names      = nn;
            names[n++] = strdup(e->d_name);
        }
    }
    closedir(d);
    if (names != NULL) {
        qsort(names, n, sizeof(char *), ckpt_cmp_desc);
    }
    *n_p = n;
    return names;
}

static void ckpt_list_free(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(names[i]);
    }
    free(names);
}

int ckpt_load_latest(const char *root, ckpt_state_t *s, uint64_t *step_p)
{
    size_t n;
    char **names = ckpt_list(root, "step-", &n);
    int    rc = 1, foreign = 0;
    for (size_t i = 0; i < n && rc != 0; i++) {
        char dir[4200];
        snprintf(dir, sizeof(dir), "%s/%s", root, names[i]);
        int lr = ckpt_load_dir(dir, s, step_p);
        if (lr == 0) {
            rc = 0;
        } else {
            foreign |= lr == -2;
            fprintf(stderr, "ctrain: checkpoint %s unusable, trying the previous one\n", dir);
        }
    }
    ckpt_list_free(names, n);
    return rc == 0 ? 0 : foreign ? 2 : 1;
}

int ckpt_newest(const char *root, char *name, size_t len)
{
    size_t      n, nz;
    char      **names = ckpt_list(root, "step-", &n), **znames = ckpt_list(root, "zero-step-", &nz);
    const char *best = n > 0 ? names[0] : NULL; /* the larger number; fixed width in both */
    if (nz > 0 && (best == NULL || strcmp(znames[0] + 10, best + 5) > 0)) {
        best = znames[0];
    }
    if (best != NULL) {
        snprintf(name, len, "%s/%s", root, best);
    }
    ckpt_list_free(names, n);
    ckpt_list_free(znames, nz);
    return best != NULL;
}

void ckpt_refuse_foreign(const char *root, int rank)
{
    if (rank == 0) {
        fprintf(stderr,
                "ctrain: --resume: no checkpoint in %s is of this run (run hash mismatch: "
                "written with other options, or by an older ctrain); rerun with the options "
                "they were made with, or use another --ckpt-dir\n",
                root);
    }
    exit(2);
}
