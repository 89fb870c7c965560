/* SPDX-License-Identifier: MIT */
/*
 * compress_bench -- step time and wire bytes of gradient averaging, dense (COLL_AVG all-reduce)
 * against the compressors of coll_train.h (top-k, 1-bit), for a few bucket sizes. Run under a
 * launcher (collrun, bench/compress_bench.sh); rank 0 prints one CSV row per (mode, size):
 *   mode,count,nranks,step_ms,wire_bytes,dense_bytes,saving
 * step_ms is the median over the timed steps of the slowest rank's step (compression included).
 * It does not train anything: the gradient is the same random vector every step.
 */
#include "bench_time.h"
#include "coll.h"
#include "coll_train.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- options ---- */

typedef struct {
    size_t sizes[16];
    int    nsizes;
    int    iters, warmup;
    double ratio;
    size_t chunk;
    char   modes[64];
} bench_opts_t;

static void usage(void)
{
    fprintf(stderr, "usage: compress_bench [--sizes N1,N2,... (floats, k/M suffixes; 4M,25M)]\n"
                    "  [--iters N (5)] [--warmup N (1)] [--ratio R (0.01)] [--chunk C (256)]\n"
                    "  [--modes dense,topk,onebit]\n");
}

static size_t parse_count(const char *s)
{
    char  *end;
    double v = strtod(s, &end);
    if (*end == 'k' || *end == 'K') {
        v *= 1e3;
    } else if (*end == 'M' || *end == 'm') {
        v *= 1e6;
    }
    return (size_t)v;
}

static int parse(int argc, char **argv, bench_opts_t *o)
{
    o->nsizes = 0;
    o->iters  = 5;
    o->warmup = 1;
    o->ratio  = 0.01;
    o->chunk  = 256;
    snprintf(o->modes, sizeof(o->modes), "dense,topk,onebit");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v == NULL) {
            return -1;
        }
        if (strcmp(a, "--sizes") == 0) {
            char buf[256], *tok, *save = NULL;
            snprintf(buf, sizeof(buf), "%s", v);
            for (tok = strtok_r(buf, ",", &save); tok != NULL && o->nsizes < 16;
                 tok = strtok_r(NULL, ",", &save)) {
                o->sizes[o->nsizes++] = parse_count(tok);
            }
        } else if (strcmp(a, "--iters") == 0) {
            o->iters = atoi(v);
        } else if (strcmp(a, "--warmup") == 0) {
            o->warmup = atoi(v);
        } else if (strcmp(a, "--ratio") == 0) {
            o->ratio = atof(v);
        } else if (strcmp(a, "--chunk") == 0) {
            o->chunk = (size_t)atol(v);
        } else if (strcmp(a, "--modes") == 0) {
            snprintf(o->modes, sizeof(o->modes), "%s", v);
        } else {
            return -1;
        }
        i++;
    }
    if (o->nsizes == 0) {
        o->sizes[o->nsizes++] = 4000000;
        o->sizes[o->nsizes++] = 25000000;
    }
    return o->iters > 0 ? 0 : -1;
}

/* One mode at one size: returns 0 and prints a row on rank 0. */
static int bench_one(coll_comm_t *comm, const bench_opts_t *o, const char *mode, size_t count,
                     const float *g, float *out)
{
    coll_compress_config_t cfg = COLL_COMPRESS_CONFIG_INITIALIZER;
    coll_compress_t       *c   = NULL;
    coll_compress_stats_t  st  = {0};
    double                 t[64];
    int                    rank, n, iters = o->iters < 64 ? o->iters : 64;
    uint64_t               wire = 0, dense;

    coll_comm_rank(comm, &rank);
    coll_comm_size(comm, &n);
    dense = 2 * (uint64_t)(n - 1) * 4 * count / (uint64_t)n;
    if (strcmp(mode, "dense") != 0) {
        cfg.kind  = strcmp(mode, "topk") == 0 ? COLL_COMPRESS_TOPK : COLL_COMPRESS_ONEBIT;
        cfg.ratio = o->ratio;
        cfg.chunk = cfg.kind == COLL_COMPRESS_ONEBIT ? o->chunk : 0;
        if (coll_compress_create(comm, &cfg, count, &c) != COLL_OK) {
            fprintf(stderr, "compress_bench: %s\n", coll_last_error());
            return 1;
        }
    }
    for (int i = -o->warmup; i < iters; i++) {
        double        t0, dt;
        coll_result_t rc;
        coll_barrier(comm);
        t0 = bench_now_s();
        rc = c != NULL ? coll_compress_allreduce(c, g, out)
                       : coll_allreduce(g, out, count, COLL_FLOAT32, COLL_AVG, comm);
        dt = bench_now_s() - t0;
        if (rc != COLL_OK) {
            fprintf(stderr, "compress_bench: %s step: %s\n", mode, coll_strerror(rc));
            return 1;
        }
        coll_allreduce(&dt, &dt, 1, COLL_FLOAT64, COLL_MAX, comm); /* the slowest rank */
        if (i >= 0) {
            t[i] = dt;
        }
    }
    if (c != NULL) {
        coll_compress_get_stats(c, &st);
        wire = st.wire_bytes;
        coll_compress_destroy(c);
    } else {
        wire = dense;
    }
    if (rank == 0) {
        printf("%s,%zu,%d,%.3f,%llu,%llu,%.1f\n", mode, count, n, 1e3 * bench_median(t, iters),
               (unsigned long long)wire, (unsigned long long)dense,
               wire > 0 ? (double)dense / (double)wire : 0.0);
        fflush(stdout);
    }
    return 0;
}

/* ---- main ---- */

int main(int argc, char **argv)
{
    bench_opts_t o;
    coll_comm_t *comm;
    int          rank, fail = 0;
    size_t       maxn = 0;
    float       *g, *out;
    uint64_t     s = 88172645463325252ull;

    if (parse(argc, argv, &o) != 0) {
        usage();
        return 2;
    }
    if (coll_init(&argc, &argv, &comm) != COLL_OK) {
        fprintf(stderr, "compress_bench: %s\n", coll_last_error());
        return 1;
    }
    coll_comm_rank(comm, &rank);
    for (int i = 0; i < o.nsizes; i++) {
        maxn = o.sizes[i] > maxn ? o.sizes[i] : maxn;
    }
    g   = malloc(maxn * sizeof(float));
    out = malloc(maxn * sizeof(float));
    if (g == NULL || out == NULL) {
        fprintf(stderr, "compress_bench: out of memory\n");
        return 1;
    }
    s += (uint64_t)rank;
    for (size_t i = 0; i < maxn; i++) { /* xorshift: a spread of magnitudes, no structure */
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        g[i] = (float)((double)(s >> 11) / 9007199254740992.0 - 0.5);
    }
    if (rank == 0) {
        printf("mode,count,nranks,step_ms,wire_bytes,dense_bytes,saving\n");
    }
    for (int i = 0; i < o.nsizes && !fail; i++) {
        char modes[64], *tok, *save = NULL;
        snprintf(modes, sizeof(modes), "%s", o.modes);
        for (tok = strtok_r(modes, ",", &save); tok != NULL && !fail;
             tok = strtok_r(NULL, ",", &save)) {
            fail = bench_one(comm, &o, tok, o.sizes[i], g, out);
        }
    }
    free(g);
    free(out);
    coll_finalize();
    return fail;
}
