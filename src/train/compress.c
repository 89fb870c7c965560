/* SPDX-License-Identifier: MIT */
/*
 * Gradient compressors (coll_compress_*): arguments, the agreement check between ranks, the
 * uncompressed warm-up steps, the step state machine (start, wait) and the byte counters.
 * The methods themselves are in topk.c and onebit.c. Everything goes through public coll.h
 * collectives on the caller's communicator, in the order the steps are called.
 */
#include "config.h"
#include "train/compress.h"
#include "error.h"
#include "log.h"
#include "util.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define COMPRESS_CHUNK_DEFAULT    256
#define COMPRESS_MOMENTUM_DEFAULT 0.9f

uint64_t coll_compress_gather_wire(const coll_compress_t *c, uint64_t block)
{
    return (uint64_t)(c->nranks - 1) * block;
}

uint64_t coll_compress_allreduce_wire(const coll_compress_t *c, uint64_t bytes)
{
    return 2 * (uint64_t)(c->nranks - 1) * bytes / (uint64_t)c->nranks;
}

/* ---- arguments ---- */

static coll_result_t compress_check_config(const coll_compress_config_t *cfg, size_t count,
                                           const char *fn)
{
    if (cfg->size != sizeof(*cfg)) {
        return compress_error(COLL_ERR_INVALID_ARG, fn,
                              "config->size is %zu, expected sizeof(coll_compress_config_t) = %zu "
                              "(use COLL_COMPRESS_CONFIG_INITIALIZER)",
                              cfg->size, sizeof(*cfg));
    }
    if (cfg->kind != COLL_COMPRESS_TOPK && cfg->kind != COLL_COMPRESS_ONEBIT) {
        return compress_error(COLL_ERR_INVALID_ARG, fn,
                              "config->kind %d: expected COLL_COMPRESS_TOPK or "
                              "COLL_COMPRESS_ONEBIT",
                              (int)cfg->kind);
    }
    if (count == 0 || count > UINT32_MAX) {
        return compress_error(COLL_ERR_INVALID_ARG, fn,
                              "count %zu: expected 1 <= count <= %u (indices travel as uint32)",
                              count, (unsigned)UINT32_MAX);
    }
    if (cfg->warmup_steps < 0 || cfg->sparsity_warmup_steps < 0) {
        return compress_error(
            COLL_ERR_INVALID_ARG, fn, "config->%s is %d: expected a step count >= 0",
            cfg->warmup_steps < 0 ? "warmup_steps" : "sparsity_warmup_steps",
            cfg->warmup_steps < 0 ? cfg->warmup_steps : cfg->sparsity_warmup_steps);
    }
    if (cfg->kind == COLL_COMPRESS_TOPK) {
        if (!(cfg->ratio > 0.0 && cfg->ratio <= 1.0)) { /* NaN fails too */
            return compress_error(COLL_ERR_INVALID_ARG, fn,
                                  "config->ratio %g: expected 0 < ratio <= 1 (fraction of the "
                                  "elements sent)",
                                  cfg->ratio);
        }
        if (cfg->momentum != 0 && cfg->momentum != 1) {
            return compress_error(COLL_ERR_INVALID_ARG, fn, "config->momentum %d: expected 0 or 1",
                                  cfg->momentum);
        }
        if (cfg->momentum && !(cfg->momentum_factor >= 0.0f && cfg->momentum_factor < 1.0f)) {
            return compress_error(COLL_ERR_INVALID_ARG, fn,
                                  "config->momentum_factor %g: expected 0 < factor < 1 (0 for "
                                  "the default 0.9)",
                                  (double)cfg->momentum_factor);
        }
        return COLL_OK;
    }
    if (cfg->chunk % 32 != 0) {
        return compress_error(COLL_ERR_INVALID_ARG, fn,
                              "config->chunk %zu: expected a multiple of 32 (0 for the default "
                              "%d)",
                              cfg->chunk, COMPRESS_CHUNK_DEFAULT);
    }
    if (cfg->momentum != 0 || cfg->sparsity_warmup_steps != 0) {
        return compress_error(COLL_ERR_INVALID_ARG, fn,
                              "config->%s is set: it applies to COLL_COMPRESS_TOPK only",
                              cfg->momentum != 0 ? "momentum" : "sparsity_warmup_steps");
    }
    return COLL_OK;
}

/* u as a value whose negation cannot overflow: bits 1..63 in bits 0..61, bit 0 in bit 62. */
static int64_t compress_agree_enc(uint64_t u)
{
    return (int64_t)((u >> 1) ^ ((u & 1) << 62));
}

/* Every rank must build the same compressor: the settings go through one MAX all-reduce as
 * (v, -v) pairs, which yields the largest and the smallest value of each at once. A rank whose
 * own arguments were wrong still takes part (ok = 0), so that no other rank is left waiting. */
static coll_result_t compress_check_agree(coll_comm_t *comm, const coll_compress_config_t *cfg,
                                          size_t count, int ok, const char *fn)
{
    enum { NV = 9 };
    static const char *what[NV] = {
        "kind",          "count",           "ratio",        "chunk",
        "momentum",      "momentum_factor", "warmup_steps", "sparsity_warmup_steps",
        "valid settings"};
    int64_t       v[NV], mm[2 * NV];
    coll_result_t st;
    uint32_t      mf;
    uint64_t      ratio_bits;

    memcpy(&mf, &cfg->momentum_factor, sizeof(mf));
    memcpy(&ratio_bits, &cfg->ratio, sizeof(ratio_bits));
    v[0] = cfg->kind;
    v[1] = compress_agree_enc(count);
    v[2] = compress_agree_enc(ratio_bits);
    v[3] = compress_agree_enc(cfg->chunk);
    v[4] = cfg->momentum;
    v[5] = mf;
    v[6] = cfg->warmup_steps;
    v[7] = cfg->sparsity_warmup_steps;
    v[8] = ok;
    for (int i = 0; i < NV; i++) {
        mm[i]      = v[i];
        mm[NV + i] = -v[i];
    }
    st = coll_allreduce(mm, mm, 2 * NV, COLL_INT64, COLL_MAX, comm);
    if (st != COLL_OK) {
        return compress_error(st, fn, "agreement all-reduce failed: %s",
                              coll_comm_last_error(comm));
    }
    if (!ok) {
        return COLL_ERR_INVALID_ARG; /* this rank's own error is already recorded */
    }
    if (-mm[NV + 8] == 0) {
        return compress_error(COLL_ERR_INVALID_ARG, fn,
                              "another rank passed invalid arguments (see its error)");
    }
    for (int i = 0; i < NV - 1; i++) {
        if (mm[i] != -mm[NV + i]) {
            return compress_error(COLL_ERR_MISMATCH, fn,
                                  "ranks passed different %s; every rank must create the "
                                  "compressor with the same count and settings",
                                  what[i]);
        }
    }
    return COLL_OK;
}

/* ---- create, destroy ---- */

static coll_result_t compress_alloc(coll_compress_t *c, const char *fn)
{
    c->residual = coll_calloc(c->count, sizeof(float), "compress residual");
    if (c->residual == NULL) {
        return compress_error(COLL_ERR_NO_MEMORY, fn, "out of memory (residual of %zu floats)",
                              c->count);
    }
    if (c->cfg.momentum) {
        c->velocity = coll_calloc(c->count, sizeof(float), "compress velocity");
        if (c->velocity == NULL) {
            return compress_error(COLL_ERR_NO_MEMORY, fn, "out of memory (velocity)");
        }
    }
    if (c->cfg.kind == COLL_COMPRESS_TOPK) {
        COLL_CHECK(coll_compress_topk_alloc(c));
    } else {
        COLL_CHECK(coll_compress_onebit_alloc(c));
    }
    return COLL_OK;
}

static void compress_free(coll_compress_t *c)
{
    coll_compress_topk_free(c);
    coll_compress_onebit_free(c);
    coll_free(c->residual);
    coll_free(c->velocity);
    coll_free(c->dense_send);
    coll_free(c);
}

COLL_API coll_result_t coll_compress_create(coll_comm_t *comm, const coll_compress_config_t *config,
                                            size_t count, coll_compress_t **c_p)
{
    static const coll_compress_config_t defaults = COLL_COMPRESS_CONFIG_INITIALIZER;
    const char                         *fn       = "coll_compress_create";
    const coll_compress_config_t       *cfg      = config != NULL ? config : &defaults;
    coll_compress_t                    *c;
    coll_result_t                       st;

    if (comm == NULL) {
        return compress_error(COLL_ERR_INVALID_ARG, fn, "comm is NULL");
    }
    if (c_p == NULL) {
        st = compress_error(COLL_ERR_INVALID_ARG, fn, "c_p is NULL");
    } else {
        *c_p = NULL;
        st   = compress_check_config(cfg, count, fn);
    }
    COLL_CHECK(compress_check_agree(comm, cfg, count, st == COLL_OK, fn));
    c = coll_calloc(1, sizeof(*c), "compress");
    if (c == NULL) {
        return compress_error(COLL_ERR_NO_MEMORY, fn, "out of memory");
    }
    c->cfg   = *cfg;
    c->comm  = comm;
    c->count = count;
    if (c->cfg.kind == COLL_COMPRESS_ONEBIT && c->cfg.chunk == 0) {
        c->cfg.chunk = COMPRESS_CHUNK_DEFAULT;
    }
    if (c->cfg.momentum && c->cfg.momentum_factor == 0.0f) {
        c->cfg.momentum_factor = COMPRESS_MOMENTUM_DEFAULT;
    }
    COLL_CHECK_GOTO(coll_comm_rank(comm, &c->rank), st, err);
    COLL_CHECK_GOTO(coll_comm_size(comm, &c->nranks), st, err);
    COLL_CHECK_GOTO(compress_alloc(c, fn), st, err);
    coll_debug(TRAIN, "compressor: %s, %zu elements, %d ranks",
               c->cfg.kind == COLL_COMPRESS_TOPK ? "top-k" : "1-bit", count, c->nranks);
    *c_p = c;
    return COLL_OK;

err:
    compress_free(c);
    return st;
}

COLL_API coll_result_t coll_compress_destroy(coll_compress_t *c)
{
    coll_result_t st = COLL_OK;

    if (c == NULL) {
        return compress_error(COLL_ERR_INVALID_ARG, "coll_compress_destroy", "c is NULL");
    }
    if (c->phase != COMPRESS_IDLE) {
        st = coll_compress_wait(c);
    }
    compress_free(c);
    return st;
}

/* ---- steps ---- */

/* residual += grad (or, with momentum correction, u = m u + grad; residual += u). */
static void compress_accumulate(coll_compress_t *c, const float *grad)
{
    float *r = c->residual, *u = c->velocity;

    if (u == NULL) {
        for (size_t i = 0; i < c->count; i++) {
            r[i] += grad[i];
        }
        return;
    }
    for (size_t i = 0; i < c->count; i++) {
        u[i] = c->cfg.momentum_factor * u[i] + grad[i];
        r[i] += u[i];
    }
}

/* Warm-up: the whole accumulated vector is all-reduced and the residual emptied. With
 * momentum correction the velocity is kept, so warm-up steps are plain momentum SGD. */
static coll_result_t compress_dense_start(coll_compress_t *c, const float *grad, const char *fn)
{
    uint64_t      bytes = (uint64_t)c->count * sizeof(float);
    coll_result_t st;

    if (c->dense_send == NULL) {
        c->dense_send = coll_malloc(c->count * sizeof(float), "compress dense");
        if (c->dense_send == NULL) {
            return compress_error(COLL_ERR_NO_MEMORY, fn, "out of memory (dense warm-up buffer)");
        }
    }
    compress_accumulate(c, grad);
    memcpy(c->dense_send, c->residual, bytes);
    st = coll_iallreduce(c->dense_send, c->out, c->count, COLL_FLOAT32, COLL_AVG, c->comm, &c->req);
    if (st != COLL_OK) { /* the residual keeps what was not sent */
        return compress_error(st, fn, "dense warm-up all-reduce: %s",
                              coll_comm_last_error(c->comm));
    }
    memset(c->residual, 0, bytes);
    c->stats.dense         = 1;
    c->stats.sent          = c->count;
    c->stats.payload_bytes = bytes;
    c->stats.wire_bytes    = coll_compress_allreduce_wire(c, bytes);
    return COLL_OK;
}

COLL_API coll_result_t coll_compress_start(coll_compress_t *c, const float *grad, float *out)
{
    const char   *fn = "coll_compress_start";
    coll_result_t st;

    if (c == NULL || grad == NULL || out == NULL) {
        return compress_error(COLL_ERR_INVALID_ARG, fn, "%s is NULL",
                              c == NULL      ? "c"
                              : grad == NULL ? "grad"
                                             : "out");
    }
    if (c->phase != COMPRESS_IDLE) {
        return compress_error(COLL_ERR_INVALID_USAGE, fn,
                              "a step is already in flight: call coll_compress_wait first");
    }
    c->out               = out;
    c->stats.dense       = 0;
    c->stats.dense_bytes = coll_compress_allreduce_wire(c, (uint64_t)c->count * sizeof(float));
    if (c->stats.steps < (uint64_t)c->cfg.warmup_steps) {
        st       = compress_dense_start(c, grad, fn);
        c->phase = COMPRESS_DENSE;
    } else if (c->cfg.kind == COLL_COMPRESS_TOPK) {
        compress_accumulate(c, grad);
        st       = coll_compress_topk_start(c);
        c->phase = COMPRESS_TOPK;
    } else {
        compress_accumulate(c, grad);
        st       = coll_compress_onebit_start(c);
        c->phase = COMPRESS_ONEBIT;
    }
    if (st != COLL_OK) {
        c->phase = COMPRESS_IDLE;
    }
    return st;
}

COLL_API coll_result_t coll_compress_wait(coll_compress_t *c)
{
    const char   *fn = "coll_compress_wait";
    coll_result_t st = COLL_OK;

    if (c == NULL) {
        return compress_error(COLL_ERR_INVALID_ARG, fn, "c is NULL");
    }
    switch (c->phase) {
    case COMPRESS_IDLE:
        return compress_error(COLL_ERR_INVALID_USAGE, fn,
                              "no step in flight: call coll_compress_start first");
    case COMPRESS_DENSE:
        st     = coll_wait(c->req);
        c->req = NULL;
        if (st != COLL_OK) {
            st = compress_error(st, fn, "dense warm-up all-reduce: %s",
                                coll_comm_last_error(c->comm));
        }
        break;
    case COMPRESS_TOPK:
        st = coll_compress_topk_finish(c);
        break;
    case COMPRESS_ONEBIT:
        st = coll_compress_onebit_finish(c);
        break;
    }
    c->phase      = COMPRESS_IDLE;
    c->sent_valid = st == COLL_OK;
    if (st == COLL_OK) {
        c->stats.steps++;
        c->stats.total_wire_bytes += c->stats.wire_bytes;
        c->stats.total_dense_bytes += c->stats.dense_bytes;
    }
    return st;
}

COLL_API coll_result_t coll_compress_allreduce(coll_compress_t *c, const float *grad, float *out)
{
    COLL_CHECK(coll_compress_start(c, grad, out));
    return coll_compress_wait(c);
}

/* ---- introspection ---- */

COLL_API coll_result_t coll_compress_get_stats(const coll_compress_t *c,
                                               coll_compress_stats_t *stats_p)
{
    if (c == NULL || stats_p == NULL) {
        return compress_error(COLL_ERR_INVALID_ARG, "coll_compress_get_stats", "%s is NULL",
                              c == NULL ? "c" : "stats_p");
    }
    *stats_p = c->stats;
    return COLL_OK;
}

COLL_API coll_result_t coll_compress_residual(const coll_compress_t *c, coll_compress_side_t side,
                                              const float **residual_p, size_t *offset_p,
                                              size_t *count_p)
{
    const char *fn = "coll_compress_residual";
    size_t      off, n;

    if (c == NULL || residual_p == NULL) {
        return compress_error(COLL_ERR_INVALID_ARG, fn, "%s is NULL",
                              c == NULL ? "c" : "residual_p");
    }
    if (side == COLL_COMPRESS_WORKER) {
        *residual_p = c->residual;
        off         = 0;
        n           = c->count;
    } else if (side == COLL_COMPRESS_SERVER && c->cfg.kind == COLL_COMPRESS_ONEBIT) {
        off         = (size_t)c->rank * c->shard;
        n           = off < c->count ? c->count - off : 0;
        n           = n < c->shard ? n : c->shard;
        *residual_p = c->server_res;
    } else {
        return compress_error(COLL_ERR_INVALID_ARG, fn,
                              "side %d: expected COLL_COMPRESS_WORKER, or COLL_COMPRESS_SERVER "
                              "with a COLL_COMPRESS_ONEBIT compressor",
                              (int)side);
    }
    if (offset_p != NULL) {
        *offset_p = off;
    }
    if (count_p != NULL) {
        *count_p = n;
    }
    return COLL_OK;
}

COLL_API coll_result_t coll_compress_sent(const coll_compress_t *c, float *sent)
{
    const char *fn = "coll_compress_sent";

    if (c == NULL || sent == NULL) {
        return compress_error(COLL_ERR_INVALID_ARG, fn, "%s is NULL", c == NULL ? "c" : "sent");
    }
    if (c->phase != COMPRESS_IDLE || !c->sent_valid) {
        return compress_error(COLL_ERR_INVALID_USAGE, fn,
                              "no completed step to report (a step is in flight, none ran since "
                              "creation or coll_compress_set_state, or the last one failed)");
    }
    if (c->stats.dense) {
        memcpy(sent, c->dense_send, c->count * sizeof(float));
    } else if (c->cfg.kind == COLL_COMPRESS_TOPK) {
        coll_compress_topk_sent(c, sent);
    } else {
        coll_compress_onebit_sent(c, sent);
    }
    return COLL_OK;
}

/* ---- state across steps, for checkpoints: a header, the worker residual, the velocity (top-k
 * with momentum correction) and the server residual (1-bit) ---- */

#define COMPRESS_STATE_MAGIC 0x534d4f43u /* "COMS" */

typedef struct {
    uint32_t magic, kind;
    uint64_t count, steps, nvel, nserver;
} compress_state_hdr_t;

static compress_state_hdr_t compress_state_hdr(const coll_compress_t *c)
{
    compress_state_hdr_t h = {COMPRESS_STATE_MAGIC,
                              (uint32_t)c->cfg.kind,
                              c->count,
                              c->stats.steps,
                              c->velocity != NULL ? c->count : 0,
                              c->server_res != NULL ? c->shard : 0};
    return h;
}

static size_t compress_state_len(const compress_state_hdr_t *h)
{
    return sizeof(*h) + (h->count + h->nvel + h->nserver) * sizeof(float);
}

COLL_API coll_result_t coll_compress_state_size(const coll_compress_t *c, size_t *bytes_p)
{
    const char *fn = "coll_compress_state_size";
    if (c == NULL || bytes_p == NULL) {
        return compress_error(COLL_ERR_INVALID_ARG, fn, "%s is NULL", c == NULL ? "c" : "bytes_p");
    }
    compress_state_hdr_t h = compress_state_hdr(c);
    *bytes_p               = compress_state_len(&h);
    return COLL_OK;
}

COLL_API coll_result_t coll_compress_get_state(const coll_compress_t *c, void *buf, size_t len)
{
    const char *fn = "coll_compress_get_state";
    if (c == NULL || buf == NULL) {
        return compress_error(COLL_ERR_INVALID_ARG, fn, "%s is NULL", c == NULL ? "c" : "buf");
    }
    compress_state_hdr_t h = compress_state_hdr(c);
    if (len != compress_state_len(&h)) {
        return compress_error(COLL_ERR_INVALID_ARG, fn, "len %zu: expected %zu bytes", len,
                              compress_state_len(&h));
    }
    if (c->phase != COMPRESS_IDLE) {
        return compress_error(COLL_ERR_INVALID_USAGE, fn, "a step is in progress");
    }
    char *p = buf;
    memcpy(p, &h, sizeof(h));
    p += sizeof(h);
    memcpy(p, c->residual, h.count * sizeof(float));
    p += h.count * sizeof(float);
    if (h.nvel > 0) {
        memcpy(p, c->velocity, h.nvel * sizeof(float));
        p += h.nvel * sizeof(float);
    }
    if (h.nserver > 0) {
        memcpy(p, c->server_res, h.nserver * sizeof(float));
    }
    return COLL_OK;
}

COLL_API coll_result_t coll_compress_set_state(coll_compress_t *c, const void *buf, size_t len)
{
    const char          *fn = "coll_compress_set_state";
    compress_state_hdr_t h, mine;
    if (c == NULL || buf == NULL) {
        return compress_error(COLL_ERR_INVALID_ARG, fn, "%s is NULL", c == NULL ? "c" : "buf");
    }
    if (c->phase != COMPRESS_IDLE) {
        return compress_error(COLL_ERR_INVALID_USAGE, fn, "a step is in progress");
    }
    mine = compress_state_hdr(c);
    if (len < sizeof(h)) {
        return compress_error(COLL_ERR_INVALID_ARG, fn, "len %zu: shorter than a header", len);
    }
    memcpy(&h, buf, sizeof(h));
    if (h.magic != COMPRESS_STATE_MAGIC || h.kind != mine.kind || h.count != mine.count ||
        h.nvel != mine.nvel || h.nserver != mine.nserver || len != compress_state_len(&h)) {
        return compress_error(COLL_ERR_INVALID_ARG, fn,
                              "the state is not of this compressor (kind %u, %llu elements, %zu "
                              "bytes; expected kind %u, %llu elements, %zu bytes)",
                              h.kind, (unsigned long long)h.count, len, mine.kind,
                              (unsigned long long)mine.count, compress_state_len(&mine));
    }
    const char *p = (const char *)buf + sizeof(h);
    memcpy(c->residual, p, h.count * sizeof(float));
    p += h.count * sizeof(float);
    if (h.nvel > 0) {
        memcpy(c->velocity, p, h.nvel * sizeof(float));
        p += h.nvel * sizeof(float);
    }
    if (h.nserver > 0) {
        memcpy(c->server_res, p, h.nserver * sizeof(float));
    }
    c->stats.steps = h.steps;
    c->sent_valid  = 0; /* the restored state says nothing of what was sent */
    return COLL_OK;
}
