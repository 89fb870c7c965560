/* SPDX-License-Identifier: MIT */
/*
 * data.h -- ctrain's byte-level text data: a file read whole, split into training (first 90%)
 * and validation (last 10%) bytes, and sequences of T+1 bytes picked by a global index, so the
 * stream a step sees does not depend on how many ranks share it.
 */
#ifndef CTRAIN_DATA_H
#define CTRAIN_DATA_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint8_t *bytes;
    size_t   len;
    size_t   ntrain; /* bytes [0, ntrain) train, [ntrain, len) validation */
    uint64_t seed;
} text_data_t;

/* Reads path; returns 0, or -1 with a message in err (too short for seqlen, unreadable). */
int  text_data_load(text_data_t *d, const char *path, int seqlen, uint64_t seed, char *err,
                    size_t errlen);
void text_data_free(text_data_t *d);
/* Training sequence number g (global over ranks and steps): T+1 bytes into seq. */
void text_data_train_seq(const text_data_t *d, uint64_t g, int T, uint8_t *seq);
/* Validation sequence j of n, evenly spaced over the validation bytes. */
void text_data_val_seq(const text_data_t *d, int j, int n, int T, uint8_t *seq);

#endif
