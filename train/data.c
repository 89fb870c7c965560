/* SPDX-License-Identifier: MIT */
/*
 * data.c -- loading and slicing ctrain's byte-level text (see data.h). Training sequences start
 * at offsets hashed from (seed, global index): deterministic, spread over the whole split and
 * identical whatever the number of ranks; validation sequences are fixed and evenly spaced.
 */
#include "data.h"
#include "rng.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int text_data_load(text_data_t *d, const char *path, int seqlen, uint64_t seed, char *err,
                   size_t errlen)
{
    memset(d, 0, sizeof(*d));
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    size_t cap = 1 << 20, len = 0, n;
    d->bytes = malloc(cap);
    while (d->bytes != NULL && (n = fread(d->bytes + len, 1, cap - len, f)) > 0) {
        len += n;
        if (len == cap) {
            uint8_t *nb = realloc(d->bytes, cap * 2);
            if (nb == NULL) {
                free(d->bytes);
                d->bytes = NULL;
            }
            d->bytes = nb, cap *= 2;
        }
    }
    int rd_err = ferror(f);
    fclose(f);
    if (d->bytes == NULL || rd_err) {
        snprintf(err, errlen, "cannot read %s", path);
        free(d->bytes);
        d->bytes = NULL;
        return -1;
    }
    d->len    = len;
    d->ntrain = len - len / 10;
    d->seed   = seed;
    if (len / 10 < (size_t)seqlen + 2) {
        snprintf(err, errlen, "%s has %zu bytes: too short for sequences of %d (needs %zu)", path,
                 len, seqlen, (size_t)(seqlen + 2) * 10);
        text_data_free(d);
        return -1;
    }
    return 0;
}

void text_data_free(text_data_t *d)
{
    free(d->bytes);
    memset(d, 0, sizeof(*d));
}

void text_data_train_seq(const text_data_t *d, uint64_t g, int T, uint8_t *seq)
{
    uint64_t span = d->ntrain - (size_t)T - 1;
    uint64_t off  = rng_mix(rng_mix(d->seed) ^ (g * 0x9e3779b97f4a7c15ULL + 1)) % span;
    memcpy(seq, d->bytes + off, (size_t)T + 1);
}

void text_data_val_seq(const text_data_t *d, int j, int n, int T, uint8_t *seq)
{
    size_t span = d->len - d->ntrain - (size_t)T - 1;
    size_t off  = d->ntrain + (n > 1 ? (size_t)j * span / (size_t)(n - 1) : 0);
    memcpy(seq, d->bytes + off, (size_t)T + 1);
}
