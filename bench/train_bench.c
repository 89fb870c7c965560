/* SPDX-License-Identifier: MIT */
/*
 * train_bench -- the training layer's benchmark: DDP step time with buckets all-reduced
 * during backward against the same step with every bucket all-reduced after backward
 * (no_overlap), the overlap measured by the layer, wire bytes per rank, and the bytes per rank
 * of ZeRO stages 0-3. Backward is emulated by real arithmetic per layer. Public API only.
 * Run: collrun -n 2 ./train_bench --layers 16 --layer-mib 2 --compute-ms 20
 */
#include <coll_train.h>
/* defines: coll_ddp_*, coll_zero_* */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- options ---- */

typedef struct {
    int    layers;
    double layer_mib;
    double compute_ms;
    int    steps;
    int    wire_bf16;
} bench_opts_t;

static void usage(void)
{
    fprintf(stderr, "usage: train_bench [--layers N (16)] [--layer-mib M (2)] [--compute-ms T (20)]"
                    " [--steps S (5)] [--bf16]\n");
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- emulated backward: arithmetic on the gradient for compute_ms ---- */

static void compute(float *g, size_t n, double ms)
{
    double end = now_s() + ms * 1e-3;
    float  a   = 1.0001f;
    do {
        for (size_t i = 0; i < n && i < 65536; i++) {
            g[i] = g[i] * a + 1e-6f;
        }
    } while (now_s() < end);
}

static int run_ddp(coll_comm_t *comm, const bench_opts_t *o, int no_overlap, int rank)
{
    coll_ddp_config_t cfg = COLL_DDP_CONFIG_INITIALIZER;
    coll_ddp_t       *ddp;
    coll_ddp_stats_t  st, st0;
    size_t            n    = (size_t)(o->layer_mib * 1048576.0 / 4.0);
    double            best = 1e30, sum = 0;
    float           **g = calloc((size_t)o->layers, sizeof(float *));

    cfg.no_overlap       = no_overlap;
    cfg.bucket_cap_bytes = n * 4; /* one layer per bucket */
    cfg.wire_dtype       = o->wire_bf16 ? COLL_BFLOAT16 : COLL_FLOAT32;
    if (coll_ddp_create(comm, &cfg, &ddp) != COLL_OK) {
        fprintf(stderr, "%s\n", coll_last_error());
        return 1;
    }
    for (int l = 0; l < o->layers; l++) {
        coll_ddp_register(ddp, NULL, NULL, n, COLL_FLOAT32, NULL);
    }
    for (int l = 0; l < o->layers; l++) {
        coll_ddp_grad(ddp, l, (void **)&g[l]);
    }
    for (int s = 0; s <= o->steps; s++) { /* step 0 warms up */
        double t0 = now_s();
        for (int l = o->layers - 1; l >= 0; l--) {
            compute(g[l], n, o->compute_ms);
            coll_ddp_grad_ready(ddp, l);
        }
        if (coll_ddp_wait(ddp) != COLL_OK) {
            fprintf(stderr, "%s\n", coll_last_error());
            return 1;
        }
        double dt = now_s() - t0;
        if (s == 0) {
            coll_ddp_get_stats(ddp, &st0); /* the warm-up step is left out of every figure */
        } else {
            best = dt < best ? dt : best;
            sum += dt;
        }
    }
    coll_ddp_get_stats(ddp, &st);
    st.steps -= st0.steps;
    st.total_comm_s -= st0.total_comm_s;
    st.total_exposed_s -= st0.total_exposed_s;
    st.wire_bytes -= st0.wire_bytes;
    if (rank == 0) {
        printf("ddp %-10s step %8.1f ms (best %8.1f)  comm %7.1f ms  exposed %7.1f ms  "
               "overlap %5.1f%%  buckets %d  wire %.1f MiB/step/rank\n",
               no_overlap ? "blocking" : "overlapped", 1e3 * sum / o->steps, 1e3 * best,
               1e3 * st.total_comm_s / (double)st.steps,
               1e3 * st.total_exposed_s / (double)st.steps,
               100.0 * (1.0 - st.total_exposed_s / st.total_comm_s), st.nbuckets,
               (double)st.wire_bytes / (double)st.steps / 1048576.0);
    }
    coll_ddp_destroy(ddp);
    free(g);
    return 0;
}

static int run_zero(coll_comm_t *comm, const bench_opts_t *o, int rank)
{
    size_t n    = (size_t)(o->layer_mib * 1048576.0 / 4.0);
    float *init = calloc(n, sizeof(float));
    for (int stage = 0; stage <= 3; stage++) {
        coll_zero_config_t cfg = COLL_ZERO_CONFIG_INITIALIZER;
        coll_zero_t       *z;
        coll_zero_stats_t  st;
        double             t0;
        cfg.stage = stage;
        if (coll_zero_create(comm, &cfg, &z) != COLL_OK) {
            fprintf(stderr, "%s\n", coll_last_error());
            return 1;
        }
        for (int l = 0; l < o->layers; l++) {
            coll_zero_register(z, init, n, COLL_FLOAT32, l, NULL);
        }
        t0 = now_s();
        for (int l = 0; l < o->layers; l++) { /* forward */
            coll_zero_gather_layer(z, l);
            coll_zero_release_layer(z, l);
        }
        for (int l = o->layers - 1; l >= 0; l--) { /* backward */
            float *g;
            coll_zero_gather_layer(z, l);
            coll_zero_grad(z, l, &g);
            coll_zero_grad_ready(z, l);
            coll_zero_release_layer(z, l);
        }
        coll_zero_step(z);
        double dt = now_s() - t0;
        coll_zero_get_stats(z, &st);
        if (rank == 0) {
            size_t total = st.param_bytes + st.grad_bytes + st.optim_bytes;
            printf("zero stage %d  step %8.1f ms  params %8.1f grads %8.1f optim %8.1f = %8.1f "
                   "MiB/rank  peak transient %7.1f MiB  wire %.1f MiB/rank\n",
                   stage, 1e3 * dt, st.param_bytes / 1048576.0, st.grad_bytes / 1048576.0,
                   st.optim_bytes / 1048576.0, total / 1048576.0, st.peak_working_bytes / 1048576.0,
                   st.wire_bytes / 1048576.0);
        }
        coll_zero_destroy(z);
    }
    free(init);
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"layers", 1, NULL, 'l'}, {"layer-mib", 1, NULL, 'm'}, {"compute-ms", 1, NULL, 'c'},
        {"steps", 1, NULL, 's'},  {"bf16", 0, NULL, 'b'},      {"help", 0, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    bench_opts_t o = {16, 2.0, 20.0, 5, 0};
    coll_comm_t *world;
    int          c, rank, size, rc = 0;

    while ((c = getopt_long(argc, argv, "l:m:c:s:bh", longopts, NULL)) != -1) {
        switch (c) {
        case 'l':
            o.layers = atoi(optarg);
            break;
        case 'm':
            o.layer_mib = atof(optarg);
            break;
        case 'c':
            o.compute_ms = atof(optarg);
            break;
        case 's':
            o.steps = atoi(optarg);
            break;
        case 'b':
            o.wire_bf16 = 1;
            break;
        default:
            usage();
            return c == 'h' ? 0 : 2;
        }
    }
    if (o.layers < 1 || o.layer_mib <= 0 || o.steps < 1) {
        usage();
        return 2;
    }
    if (coll_init(&argc, &argv, &world) != COLL_OK) {
        fprintf(stderr, "%s\n", coll_last_error());
        return 1;
    }
    coll_comm_rank(world, &rank);
    coll_comm_size(world, &size);
    if (rank == 0) {
        printf("# %d ranks, %d layers x %.2f MiB, backward %.1f ms per layer, wire %s\n", size,
               o.layers, o.layer_mib, o.compute_ms, o.wire_bf16 ? "bf16" : "fp32");
    }
    rc |= run_ddp(world, &o, 1, rank);
    rc |= run_ddp(world, &o, 0, rank);
    rc |= run_zero(world, &o, rank);
    coll_finalize();
    return rc;
}
