/* SPDX-License-Identifier: MIT */
/*
 * Top-k compression with error feedback: each rank sends the k entries of largest magnitude of
 * (residual + gradient) as (uint32 index, fp32 value) pairs through one all-gather; every rank
 * sums the pairs into a dense vector and divides by the rank count. Sent entries leave the
 * residual (set to exactly 0, and their velocity too with momentum correction, as DGC masks
 * it); the others keep their accumulated value bit for bit. Selection is exact (ties go to the
 * lower index) and linear: a sampled threshold picks candidates, a quickselect finishes.
 */
#include "config.h"
#include "train/compress.h"
#include "error.h"
#include "log.h"
#include "util.h"

#include <math.h>
#include <string.h>

#define TOPK_SAMPLES     8192u      /* keys sampled to estimate the threshold */
#define TOPK_SAMPLE_MIN  (1u << 16) /* below this count the exact path is as cheap */
#define TOPK_OVERSAMPLE  2.0        /* the sampled threshold aims at 2k candidates */
#define TOPK_DENSITY_MAX 0.25       /* the sparsity warm-up starts here (DGC's first stage) */

size_t coll_compress_topk_k(const coll_compress_config_t *cfg, size_t count, uint64_t step)
{
    double density = cfg->ratio, k;
    int    w       = cfg->sparsity_warmup_steps;

    if ((uint64_t)w > step && density < TOPK_DENSITY_MAX) {
        /* exponential decay from TOPK_DENSITY_MAX: reaches ratio at the last warm-up step */
        density = TOPK_DENSITY_MAX * pow(cfg->ratio / TOPK_DENSITY_MAX, (double)(step + 1) / w);
    }
    k = ceil(density * (double)count - 1e-9); /* 0.01 * 100 must give 1, not 2 */
    if (k < 1.0) {
        return 1;
    }
    return k > (double)count ? count : (size_t)k;
}

coll_result_t coll_compress_topk_alloc(coll_compress_t *c)
{
    const char *fn = "coll_compress_create";
    size_t      n  = (size_t)c->nranks;

    if (c->cfg.kind != COLL_COMPRESS_TOPK) {
        return COLL_OK;
    }
    c->kmax     = coll_compress_topk_k(&c->cfg, c->count, 0);
    c->cand_cap = 4 * c->kmax + TOPK_SAMPLES;
    c->pairs    = coll_malloc(2 * c->kmax * sizeof(uint32_t), "topk pairs");
    c->gathered = coll_malloc(n * 2 * c->kmax * sizeof(uint32_t), "topk gathered");
    c->cand     = coll_malloc(c->cand_cap * sizeof(uint32_t), "topk candidates");
    c->cand_key = coll_malloc(c->cand_cap * sizeof(uint32_t), "topk candidate keys");
    if (c->pairs == NULL || c->gathered == NULL || c->cand == NULL || c->cand_key == NULL) {
        return compress_error(COLL_ERR_NO_MEMORY, fn, "out of memory (top-k buffers, k = %zu)",
                              c->kmax);
    }
    return COLL_OK;
}

void coll_compress_topk_free(coll_compress_t *c)
{
    coll_free(c->pairs);
    coll_free(c->gathered);
    coll_free(c->keys);
    coll_free(c->cand);
    coll_free(c->cand_key);
}

/* ---- selection ---- */

/* Magnitude as an ordered integer: the bits of |x| compare like |x| (NaN above infinity, so a
 * NaN gradient is sent and shows in the result rather than hiding in the residual). */
static inline uint32_t topk_key(float x)
{
    uint32_t u;

    memcpy(&u, &x, sizeof(u));
    return u & 0x7fffffffu;
}

static inline uint64_t topk_rand(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

/* Value of rank `want` (0 = largest) among a[0, m); a is permuted. Three-way partitions keep
 * runs of equal keys (zeros are common) linear. */
static uint32_t topk_nth_largest(uint32_t *a, size_t m, size_t want)
{
    uint64_t seed = 0x2545f4914f6cdd1dull ^ m;
    size_t   lo = 0, hi = m;

    while (hi - lo > 1) {
        uint32_t x = a[lo + topk_rand(&seed) % (hi - lo)], y = a[lo + topk_rand(&seed) % (hi - lo)],
                 z  = a[lo + topk_rand(&seed) % (hi - lo)];
        uint32_t p  = x > y ? (y > z ? y : (x > z ? z : x)) : (x > z ? x : (y > z ? z : y));
        size_t   gt = lo, i = lo, lt = hi;

        while (i < lt) { /* [lo, gt) > p, [gt, i) == p, [lt, hi) < p */
            uint32_t v = a[i];
            if (v > p) {
                a[i++]  = a[gt];
                a[gt++] = v;
            } else if (v < p) {
                a[i]  = a[--lt];
                a[lt] = v;
            } else {
                i++;
            }
        }
        if (want < gt) {
            hi = gt;
        } else if (want < lt) {
            return p;
        } else {
            lo = lt;
        }
    }
    return a[lo];
}

/* Threshold by sampling: the q-th largest of TOPK_SAMPLES keys, q aimed at TOPK_OVERSAMPLE x k
 * elements above it. Candidates are every index whose key reaches it; returns their number,
 * or 0 when the guess failed (too many, or fewer than k) and the exact path must run. */
static size_t topk_candidates(coll_compress_t *c, const float *acc, size_t k)
{
    uint64_t seed = 0x9e3779b97f4a7c15ull + c->stats.steps;
    double   q    = ceil(TOPK_OVERSAMPLE * (double)k * TOPK_SAMPLES / (double)c->count) + 8;
    uint32_t t_lo;
    size_t   m = 0;

    if (c->count < TOPK_SAMPLE_MIN || k > c->count / 16 || q >= TOPK_SAMPLES) {
        return 0;
    }
    for (size_t s = 0; s < TOPK_SAMPLES; s++) {
        c->cand_key[s] = topk_key(acc[topk_rand(&seed) % c->count]);
    }
    t_lo = topk_nth_largest(c->cand_key, TOPK_SAMPLES, (size_t)q - 1);
    for (size_t i = 0; i < c->count; i++) {
        uint32_t key = topk_key(acc[i]);
        if (key >= t_lo) {
            if (m == c->cand_cap) {
                return 0;
            }
            c->cand[m]     = (uint32_t)i;
            c->cand_key[m] = key;
            m++;
        }
    }
    return m >= k ? m : 0;
}

/* Writes the k indices of the largest |acc| in increasing order; ties at the threshold go to
 * the lower indices, so the choice does not depend on the algorithm's path. */
static coll_result_t topk_select(coll_compress_t *c, const float *acc, size_t k, uint32_t *idx)
{
    size_t   m = topk_candidates(c, acc, k), ngt = 0, ties, j = 0;
    uint32_t t;

    if (m > 0) { /* every key above the k-th largest is a candidate */
        t = topk_nth_largest(c->cand_key, m, k - 1);
        for (size_t i = 0; i < m; i++) {
            ngt += c->cand_key[i] > t;
        }
        ties = k - ngt;
        for (size_t i = 0; i < m && j < k; i++) {
            uint32_t key = topk_key(acc[c->cand[i]]);
            if (key > t || (key == t && ties > 0 && ties--)) {
                idx[j++] = c->cand[i];
            }
        }
        return COLL_OK;
    }
    if (c->keys == NULL) {
        c->keys = coll_malloc(c->count * sizeof(uint32_t), "topk keys");
        if (c->keys == NULL) {
            return compress_error(COLL_ERR_NO_MEMORY, "coll_compress_start",
                                  "out of memory (top-k selection of %zu keys)", c->count);
        }
    }
    for (size_t i = 0; i < c->count; i++) {
        c->keys[i] = topk_key(acc[i]);
    }
    t = topk_nth_largest(c->keys, c->count, k - 1);
    for (size_t i = 0; i < c->count; i++) {
        ngt += c->keys[i] > t;
    }
    ties = k - ngt;
    for (size_t i = 0; i < c->count && j < k; i++) {
        uint32_t key = topk_key(acc[i]);
        if (key > t || (key == t && ties > 0 && ties--)) {
            idx[j++] = (uint32_t)i;
        }
    }
    return COLL_OK;
}

/* ---- one step ---- */

coll_result_t coll_compress_topk_start(coll_compress_t *c)
{
    const char *fn = "coll_compress_start";
    float      *r  = c->residual;
    size_t      k =
        coll_compress_topk_k(&c->cfg, c->count, c->stats.steps - (uint64_t)c->cfg.warmup_steps);
    coll_result_t st;

    COLL_CHECK(topk_select(c, r, k, c->pairs));
    /* indices -> (index, value bits) pairs, from the end so nothing is overwritten early */
    for (size_t j = k; j-- > 0;) {
        uint32_t i      = c->pairs[j];
        c->pairs[2 * j] = i;
        memcpy(&c->pairs[2 * j + 1], &r[i], sizeof(float));
    }
    st = coll_iallgather(c->pairs, c->gathered, 2 * k, COLL_UINT32, c->comm, &c->req);
    if (st != COLL_OK) { /* nothing sent: the residual and the velocity stay whole */
        return compress_error(st, fn, "top-k all-gather of %zu pairs: %s", k,
                              coll_comm_last_error(c->comm));
    }
    for (size_t j = 0; j < k; j++) { /* the all-gather reads the pairs only */
        uint32_t i = c->pairs[2 * j];
        r[i]       = 0.0f; /* sent + residual == accumulated, exactly */
        if (c->velocity != NULL) {
            c->velocity[i] = 0.0f; /* momentum factor masking */
        }
    }
    c->k                   = k;
    c->stats.sent          = k;
    c->stats.payload_bytes = 2 * k * sizeof(uint32_t);
    c->stats.wire_bytes    = coll_compress_gather_wire(c, c->stats.payload_bytes);
    return COLL_OK;
}

coll_result_t coll_compress_topk_finish(coll_compress_t *c)
{
    const char   *fn  = "coll_compress_wait";
    size_t        k   = c->k;
    float        *out = c->out;
    coll_result_t st  = coll_wait(c->req);

    c->req = NULL;
    if (st != COLL_OK) {
        return compress_error(st, fn, "top-k all-gather: %s", coll_comm_last_error(c->comm));
    }
    memset(out, 0, c->count * sizeof(float));
    for (int p = 0; p < c->nranks; p++) { /* rank order: every rank sums identically */
        const uint32_t *pp = c->gathered + (size_t)p * 2 * k;
        for (size_t j = 0; j < k; j++) {
            float v;
            if (pp[2 * j] >= c->count) {
                return compress_error(COLL_ERR_INTERNAL, fn,
                                      "rank %d sent index %u, beyond the bucket's %zu elements", p,
                                      pp[2 * j], c->count);
            }
            memcpy(&v, &pp[2 * j + 1], sizeof(v));
            out[pp[2 * j]] += v;
        }
    }
    if (c->nranks > 1) {
        const float n = (float)c->nranks;
        for (size_t i = 0; i < c->count; i++) {
            out[i] /= n; /* COLL_AVG divides once, as the dense all-reduce does */
        }
    }
    return COLL_OK;
}

void coll_compress_topk_sent(const coll_compress_t *c, float *sent)
{
    memset(sent, 0, c->count * sizeof(float));
    for (size_t j = 0; j < c->k; j++) {
        memcpy(&sent[c->pairs[2 * j]], &c->pairs[2 * j + 1], sizeof(float));
    }
}
