/* SPDX-License-Identifier: MIT */
/*
 * train_bench -- the training layer's benchmark: DDP step time with buckets all-reduced
 * during backward against the same step with every bucket all-reduced after backward
 * (blocking), the overlap measured by the layer, wire bytes per rank, and the bytes per rank
 * of ZeRO stages 0-3. Backward is emulated per layer, either by sleeping (a GPU kernel the CPU
 * waits for) or by spinning on arithmetic (CPU training, which competes with communication for
 * the cores). Reports medians over steps; bench/train_sweep.sh runs it in rounds. Public API
 * only; it does not train anything and does not compress gradients.
 * Run: collrun -n 2 ./train_bench --layers 8 --layer-mib 2 --compute-ms 25 --compute sleep
 */
#include "bench_time.h"
#include <coll_train.h>
/* defines: coll_ddp_*, coll_zero_* */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- options ---- */

typedef struct {
    int         layers;
    double      layer_mib;
    double      compute_ms;
    int         compute_spin; /* 1: busy arithmetic; 0: sleep (the default) */
    int         steps;
    int         wire_bf16;
    int         modes; /* bit 0: blocking, bit 1: overlapped */
    int         zero;  /* also run ZeRO stages 0-3 */
    const char *csv;   /* per-step rows of rank 0, or NULL */
} bench_opts_t;

#define MODE_BLOCKING   1
#define MODE_OVERLAPPED 2

static void usage(void)
{
    fprintf(stderr,
            "usage: train_bench [options]\n"
            "  --layers N          layers, one bucket each (16)\n"
            "  --layer-mib M       fp32 gradient MiB per layer (2)\n"
            "  --compute-ms T      emulated backward per layer, ms (20)\n"
            "  --compute spin|sleep  backward spins on arithmetic (CPU training) or sleeps\n"
            "                      (a GPU kernel the CPU waits for) (sleep)\n"
            "  --steps S           timed steps after one warm-up step (5)\n"
            "  --mode both|overlapped|blocking  DDP modes to run, blocking first (both)\n"
            "  --comm dense        bucket communication; only dense exists so far (dense)\n"
            "  --bf16              gradients travel as bf16\n"
            "  --no-zero           skip the ZeRO stage 0-3 run\n"
            "  --csv FILE          rank 0 writes one row per timed DDP step to FILE\n");
}

/* ---- emulated backward of one layer: compute_ms of spinning or of sleeping ---- */

static void compute(float *g, size_t n, double ms, int spin)
{
    double end = bench_now_s() + ms * 1e-3;
    float  a   = 1.0001f;
    if (!spin) {
        /* The gradient is written once (a kernel's output), then the CPU waits as it would
         * for a device: the cores stay free for the progress thread. */
        struct timespec ts;
        for (size_t i = 0; i < n; i++) {
            g[i] = g[i] * a + 1e-6f;
        }
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += (time_t)(ms * 1e-3);
        ts.tv_nsec += (long)((ms * 1e-3 - (double)(time_t)(ms * 1e-3)) * 1e9);
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
        }
        return;
    }
    do {
        for (size_t i = 0; i < n && i < 65536; i++) {
            g[i] = g[i] * a + 1e-6f;
        }
    } while (bench_now_s() < end);
}

/* ---- DDP: timed steps of one mode ---- */

typedef struct {
    double step, backward, comm, exposed, wait;
} step_times_t;

static void report_mode(const bench_opts_t *o, const char *mode, step_times_t *t, double wire_mib,
                        const coll_ddp_stats_t *st)
{
    double *v = malloc((size_t)o->steps * sizeof(double));
    double  med[5], mean = 0, best = 1e30;
    for (int f = 0; f < 5; f++) {
        for (int s = 0; s < o->steps; s++) {
            v[s] = ((double *)&t[s])[f];
        }
        med[f] = bench_median(v, o->steps);
    }
    for (int s = 0; s < o->steps; s++) {
        mean += t[s].step / o->steps;
        best = t[s].step < best ? t[s].step : best;
    }
    printf("ddp %-10s step %7.1f ms median (mean %7.1f, best %7.1f)  backward %7.1f  comm %7.1f"
           "  exposed %7.1f  overlap %5.1f%%  buckets %d  wire %.1f MiB/step/rank\n",
           mode, 1e3 * med[0], 1e3 * mean, 1e3 * best, 1e3 * med[1], 1e3 * med[2], 1e3 * med[3],
           med[2] > 0 ? 100.0 * (1.0 - med[3] / med[2]) : 0.0, st->nbuckets, wire_mib);
    free(v);
}

static int run_ddp(coll_comm_t *comm, const bench_opts_t *o, int no_overlap, int rank, FILE *csv)
{
    coll_ddp_config_t cfg  = COLL_DDP_CONFIG_INITIALIZER;
    const char       *mode = no_overlap ? "blocking" : "overlapped";
    coll_ddp_t       *ddp;
    coll_ddp_stats_t  st;
    size_t            n     = (size_t)(o->layer_mib * 1048576.0 / 4.0);
    uint64_t          wire0 = 0;
    float           **g     = calloc((size_t)o->layers, sizeof(float *));
    step_times_t     *t     = calloc((size_t)o->steps, sizeof(step_times_t));

    cfg.no_overlap       = no_overlap;
    cfg.bucket_cap_bytes = n * 4; /* one layer per bucket */
    cfg.wire_dtype       = o->wire_bf16 ? COLL_BFLOAT16 : COLL_FLOAT32;
    cfg.comm_op          = COLL_BUCKET_DENSE; /* --comm: compressed kinds go here */
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
    for (int s = 0; s <= o->steps; s++) { /* step 0 warms up and is left out of every figure */
        double t0 = bench_now_s();
        for (int l = o->layers - 1; l >= 0; l--) {
            compute(g[l], n, o->compute_ms, o->compute_spin);
            coll_ddp_grad_ready(ddp, l);
        }
        if (coll_ddp_wait(ddp) != COLL_OK) {
            fprintf(stderr, "%s\n", coll_last_error());
            return 1;
        }
        double dt = bench_now_s() - t0;
        coll_ddp_get_stats(ddp, &st);
        if (s > 0) {
            t[s - 1] = (step_times_t){dt, st.backward_s, st.comm_s, st.exposed_s, st.wait_s};
            if (csv != NULL) {
                fprintf(csv, "%s,%s,%d,%.3f,%.3f,%.3f,%.3f,%.3f,%llu\n", mode,
                        o->compute_spin ? "spin" : "sleep", s, 1e3 * dt, 1e3 * st.backward_s,
                        1e3 * st.comm_s, 1e3 * st.exposed_s, 1e3 * st.wait_s,
                        (unsigned long long)(st.wire_bytes - wire0));
            }
        }
        wire0 = st.wire_bytes;
    }
    if (rank == 0) {
        report_mode(o, mode, t, (double)(st.wire_bytes / (st.steps ? st.steps : 1)) / 1048576.0,
                    &st);
    }
    coll_ddp_destroy(ddp);
    free(t);
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
        double *steps = calloc((size_t)o->steps + 1, sizeof(double));
        for (int s = 0; s <= o->steps; s++) { /* step 0: warm-up (buffers built, pages touched) */
            t0 = bench_now_s();
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
            steps[s] = bench_now_s() - t0;
        }
        double dt = bench_median(steps + 1, o->steps); /* of the timed steps */
        free(steps);
        coll_zero_get_stats(z, &st);
        if (rank == 0) {
            size_t total = st.param_bytes + st.grad_bytes + st.optim_bytes;
            printf(
                "zero stage %d  step %8.1f ms median  params %8.1f grads %8.1f optim %8.1f = %8.1f "
                "MiB/rank  peak transient %7.1f MiB  wire %.1f MiB/step/rank\n",
                stage, 1e3 * dt, st.param_bytes / 1048576.0, st.grad_bytes / 1048576.0,
                st.optim_bytes / 1048576.0, total / 1048576.0, st.peak_working_bytes / 1048576.0,
                st.wire_bytes / 1048576.0 / (o->steps + 1));
        }
        coll_zero_destroy(z);
    }
    free(init);
    return 0;
}

/* ---- main ---- */

static int parse_args(int argc, char **argv, bench_opts_t *o)
{
    static const struct option longopts[] = {
        {"layers", 1, NULL, 'l'},  {"layer-mib", 1, NULL, 'm'}, {"compute-ms", 1, NULL, 'c'},
        {"compute", 1, NULL, 'C'}, {"steps", 1, NULL, 's'},     {"mode", 1, NULL, 'M'},
        {"comm", 1, NULL, 'x'},    {"bf16", 0, NULL, 'b'},      {"no-zero", 0, NULL, 'z'},
        {"csv", 1, NULL, 'o'},     {"help", 0, NULL, 'h'},      {NULL, 0, NULL, 0}};
    int c;

    while ((c = getopt_long(argc, argv, "l:m:c:s:bh", longopts, NULL)) != -1) {
        switch (c) {
        case 'l':
            o->layers = atoi(optarg);
            break;
        case 'm':
            o->layer_mib = atof(optarg);
            break;
        case 'c':
            o->compute_ms = atof(optarg);
            break;
        case 'C':
            if (strcmp(optarg, "spin") != 0 && strcmp(optarg, "sleep") != 0) {
                fprintf(stderr, "train_bench: --compute takes spin or sleep\n");
                return 2;
            }
            o->compute_spin = strcmp(optarg, "spin") == 0;
            break;
        case 's':
            o->steps = atoi(optarg);
            break;
        case 'M':
            o->modes = strcmp(optarg, "both") == 0         ? MODE_BLOCKING | MODE_OVERLAPPED
                       : strcmp(optarg, "blocking") == 0   ? MODE_BLOCKING
                       : strcmp(optarg, "overlapped") == 0 ? MODE_OVERLAPPED
                                                           : 0;
            if (o->modes == 0) {
                fprintf(stderr, "train_bench: --mode takes both, overlapped or blocking\n");
                return 2;
            }
            break;
        case 'x':
            /* the place for compressed bucket communication (coll_ddp_set_bucket_comm) */
            if (strcmp(optarg, "dense") != 0) {
                fprintf(stderr, "train_bench: --comm %s: only dense is implemented\n", optarg);
                return 2;
            }
            break;
        case 'b':
            o->wire_bf16 = 1;
            break;
        case 'z':
            o->zero = 0;
            break;
        case 'o':
            o->csv = optarg;
            break;
        default:
            usage();
            return c == 'h' ? 1 : 2;
        }
    }
    if (optind < argc || o->layers < 1 || o->layer_mib <= 0 || o->compute_ms < 0 || o->steps < 1) {
        usage();
        return 2;
    }
    return 0;
}

int main(int argc, char **argv)
{
    bench_opts_t o = {16, 2.0, 20.0, 0, 5, 0, MODE_BLOCKING | MODE_OVERLAPPED, 1, NULL};
    coll_comm_t *world;
    FILE        *csv = NULL;
    int          rank, size, rc;

    rc = parse_args(argc, argv, &o);
    if (rc != 0) {
        return rc == 1 ? 0 : rc;
    }
    if (coll_init(&argc, &argv, &world) != COLL_OK) {
        fprintf(stderr, "%s\n", coll_last_error());
        return 1;
    }
    coll_comm_rank(world, &rank);
    coll_comm_size(world, &size);
    if (rank == 0) {
        printf("# %d ranks, %d layers x %.2f MiB, backward %.1f ms per layer (%s), wire %s, "
               "%d steps\n",
               size, o.layers, o.layer_mib, o.compute_ms, o.compute_spin ? "spin" : "sleep",
               o.wire_bf16 ? "bf16" : "fp32", o.steps);
        if (o.csv != NULL) {
            csv = fopen(o.csv, "w");
            if (csv == NULL) {
                fprintf(stderr, "train_bench: cannot write %s: %s\n", o.csv, strerror(errno));
            } else {
                fprintf(csv, "mode,compute,step,step_ms,backward_ms,comm_ms,exposed_ms,wait_ms,"
                             "wire_bytes\n");
            }
        }
    }
    /* A file rank 0 cannot write fails the run at the end: stopping rank 0 now would leave
     * the other ranks in a collective alone until their timeout. */
    rc = o.csv != NULL && rank == 0 && csv == NULL;
    if (o.modes & MODE_BLOCKING) {
        rc |= run_ddp(world, &o, 1, rank, csv);
    }
    if (o.modes & MODE_OVERLAPPED) {
        rc |= run_ddp(world, &o, 0, rank, csv);
    }
    if (o.zero) {
        rc |= run_zero(world, &o, rank);
    }
    if (csv != NULL) {
        fclose(csv);
    }
    coll_finalize();
    return rc;
}
