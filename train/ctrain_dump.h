/* SPDX-License-Identifier: MIT */
/*
 * ctrain_dump.h -- with --dump DIR, ctrain writes what an outside reference needs to replay its
 * run: the settings, the initial parameters, every batch, the first step's gradients and every
 * step's loss and gradient norm (tests/ctrain/torch_ref.py reads them).
 */
#ifndef CTRAIN_DUMP_H
#define CTRAIN_DUMP_H

#include "ctrain_opts.h"
#include "gpt.h"

typedef struct ctrain_dump ctrain_dump_t;

ctrain_dump_t *ctrain_dump_open(const char *dir, const ctrain_opts_t *o, const gpt_t *gpt);
void           ctrain_dump_batch(ctrain_dump_t *d, const uint8_t *in, const uint8_t *tg, int n);
void           ctrain_dump_grads(ctrain_dump_t *d, const gpt_t *gpt);
void           ctrain_dump_loss(ctrain_dump_t *d, int step, double loss, float norm);
void           ctrain_dump_close(ctrain_dump_t *d);

#endif
