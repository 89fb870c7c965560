/* SPDX-License-Identifier: MIT */
/*
 * 1-bit compression with error feedback on both sides, as 1-bit Adam does it: every rank
 * compresses (gradient + worker residual) into signs and one fp32 scale per chunk (the mean of
 * |x| over the chunk, so the L1 norm is kept), and the difference stays in the worker residual.
 * A compressed reduce-scatter follows (an all-to-all of shards): the owner of each shard
 * decompresses and averages it, adds its server residual, compresses again (keeping the new
 * difference) and the compressed shards are all-gathered. Every rank decompresses the same bits.
 */
#include "config.h"
#include "train/compress.h"
#include "error.h"
#include "log.h"
#include "util.h"

#include <math.h>
#include <string.h>

/* Elements of block r that lie inside the bucket (the last shards are padded). */
static size_t onebit_valid(const coll_compress_t *c, size_t r)
{
    size_t lo = r * c->shard;

    if (lo >= c->count) {
        return 0;
    }
    return c->count - lo < c->shard ? c->count - lo : c->shard;
}

coll_result_t coll_compress_onebit_alloc(coll_compress_t *c)
{
    size_t n = (size_t)c->nranks, per_rank, bytes;

    if (c->cfg.kind != COLL_COMPRESS_ONEBIT) {
        return COLL_OK;
    }
    per_rank       = (c->count + n - 1) / n;
    c->shard       = (per_rank + c->cfg.chunk - 1) / c->cfg.chunk * c->cfg.chunk;
    c->block_words = c->shard / c->cfg.chunk + c->shard / 32; /* scales, then sign bits */
    bytes          = c->block_words * sizeof(uint32_t);
    c->wsend       = coll_malloc(n * bytes, "onebit worker blocks");
    c->wrecv       = coll_malloc(n * bytes, "onebit shard blocks");
    c->ssend       = coll_malloc(bytes, "onebit server block");
    c->srecv       = coll_malloc(n * bytes, "onebit gathered blocks");
    c->server_res  = coll_calloc(c->shard, sizeof(float), "onebit server residual");
    c->shard_sum   = coll_malloc(c->shard * sizeof(float), "onebit shard sum");
    if (c->wsend == NULL || c->wrecv == NULL || c->ssend == NULL || c->srecv == NULL ||
        c->server_res == NULL || c->shard_sum == NULL) {
        return compress_error(COLL_ERR_NO_MEMORY, "coll_compress_create",
                              "out of memory (1-bit buffers, %zu-element shards)", c->shard);
    }
    return COLL_OK;
}

void coll_compress_onebit_free(coll_compress_t *c)
{
    coll_free(c->wsend);
    coll_free(c->wrecv);
    coll_free(c->ssend);
    coll_free(c->srecv);
    coll_free(c->server_res);
    coll_free(c->shard_sum);
}

/* Compress x[0, valid) into blk and leave the compression error in x: x -= decompressed.
 * Bit i set means x[i] < 0 (so -0 and NaN count as positive; a NaN scale still shows). A chunk
 * is a whole number of 32-bit words, so each word belongs to one chunk. */
static void onebit_compress(const coll_compress_t *c, float *x, size_t valid, uint32_t *blk)
{
    size_t    chunk = c->cfg.chunk, nchunks = c->shard / chunk;
    uint32_t *bits = blk + nchunks;

    memset(bits, 0, c->shard / 8);
    for (size_t ch = 0; ch < nchunks; ch++) {
        size_t lo = ch * chunk, hi = lo + chunk < valid ? lo + chunk : valid;
        double sum = 0.0;
        float  s   = 0.0f;

        for (size_t i = lo; i < hi; i++) {
            sum += fabs((double)x[i]);
        }
        if (hi > lo) {
            s = (float)(sum / (double)(hi - lo));
        }
        memcpy(&blk[ch], &s, sizeof(s));
        for (size_t w = lo / 32; w * 32 < hi; w++) {
            size_t   end  = w * 32 + 32 < hi ? w * 32 + 32 : hi;
            uint32_t word = 0;
            for (size_t i = w * 32; i < end; i++) {
                uint32_t neg = x[i] < 0.0f;
                word |= neg << (i % 32);
                x[i] = neg ? x[i] + s : x[i] - s;
            }
            bits[w] = word;
        }
    }
}

/* dst[0, valid) (+)= decompressed blk. */
static void onebit_decode(const coll_compress_t *c, const uint32_t *blk, size_t valid, float *dst,
                          int add)
{
    size_t          chunk = c->cfg.chunk;
    const uint32_t *bits  = blk + c->shard / chunk;

    for (size_t lo = 0, ch = 0; lo < valid; lo += chunk, ch++) {
        size_t hi = lo + chunk < valid ? lo + chunk : valid;
        float  s;
        memcpy(&s, &blk[ch], sizeof(s));
        for (size_t i = lo; i < hi; i++) {
            float v = (bits[i / 32] >> (i % 32)) & 1u ? -s : s;
            dst[i]  = add ? dst[i] + v : v;
        }
    }
}

coll_result_t coll_compress_onebit_start(coll_compress_t *c)
{
    size_t        n = (size_t)c->nranks, bytes = c->block_words * sizeof(uint32_t);
    coll_result_t st;

    for (size_t r = 0; r < n; r++) {
        size_t valid = onebit_valid(c, r);
        onebit_compress(c, valid > 0 ? c->residual + r * c->shard : c->residual, valid,
                        c->wsend + r * c->block_words);
    }
    c->stats.sent          = n * c->shard;
    c->stats.payload_bytes = (n + 1) * bytes;
    c->stats.wire_bytes    = 2 * coll_compress_gather_wire(c, bytes);
    st = coll_ialltoall(c->wsend, c->wrecv, c->block_words, COLL_UINT32, c->comm, &c->req);
    if (st != COLL_OK) { /* nothing sent: what was compressed goes back into the residual */
        for (size_t r = 0; r < n; r++) {
            size_t valid = onebit_valid(c, r);
            if (valid > 0) {
                onebit_decode(c, c->wsend + r * c->block_words, valid, c->residual + r * c->shard,
                              1);
            }
        }
        return compress_error(st, "coll_compress_start", "1-bit all-to-all (reduce-scatter): %s",
                              coll_comm_last_error(c->comm));
    }
    return COLL_OK;
}

/* The owner's half of the compressed reduce-scatter: average the shard, add the server
 * residual, compress again into ssend, keep the new difference. */
static void onebit_server(coll_compress_t *c)
{
    size_t valid = onebit_valid(c, (size_t)c->rank);
    float  n     = (float)c->nranks;

    memset(c->shard_sum, 0, c->shard * sizeof(float));
    for (int p = 0; p < c->nranks; p++) {
        onebit_decode(c, c->wrecv + (size_t)p * c->block_words, valid, c->shard_sum, 1);
    }
    for (size_t i = 0; i < valid; i++) {
        c->server_res[i] += c->shard_sum[i] / n;
    }
    onebit_compress(c, c->server_res, valid, c->ssend);
}

coll_result_t coll_compress_onebit_finish(coll_compress_t *c)
{
    const char   *fn = "coll_compress_wait";
    coll_result_t st = coll_wait(c->req);

    c->req = NULL;
    if (st != COLL_OK) {
        return compress_error(st, fn, "1-bit all-to-all (reduce-scatter): %s",
                              coll_comm_last_error(c->comm));
    }
    onebit_server(c);
    st = coll_allgather(c->ssend, c->srecv, c->block_words, COLL_UINT32, c->comm);
    if (st != COLL_OK) {
        return compress_error(st, fn, "1-bit all-gather: %s", coll_comm_last_error(c->comm));
    }
    for (size_t r = 0; r < (size_t)c->nranks; r++) {
        size_t valid = onebit_valid(c, r);
        if (valid > 0) {
            onebit_decode(c, c->srecv + r * c->block_words, valid, c->out + r * c->shard, 0);
        }
    }
    return COLL_OK;
}

void coll_compress_onebit_sent(const coll_compress_t *c, float *sent)
{
    for (size_t r = 0; r < (size_t)c->nranks; r++) {
        size_t valid = onebit_valid(c, r);
        if (valid > 0) {
            onebit_decode(c, c->wsend + r * c->block_words, valid, sent + r * c->shard, 0);
        }
    }
}
