/* SPDX-License-Identifier: MIT */
/*
 * membw -- this machine's memory bandwidth, the ceiling of every intra-host collective:
 * read (sum of doubles), write (store a constant), copy (b = a) and add (c = a + b), and the
 * last three again with non-temporal stores (write_nt, copy_nt, add_nt: whole lines to memory
 * without reading them first, as libcoll's streamed copies do) over arrays far larger than the
 * caches, with 1..T threads each on its own arrays. Prints the
 * median over repetitions of the aggregate bandwidth in GB/s (1e9 bytes), counting every
 * byte read and every byte written. bench/README.md derives the all-reduce bound from it.
 * Run: bench/membw [-t THREADS] [-m MIB_PER_ARRAY] [-r REPS]
 */
#include "bench_time.h"

#include <pthread.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <stdio.h>
#include <string.h>
#include <unistd.h>

enum { MB_READ, MB_WRITE, MB_COPY, MB_ADD, MB_WRITE_NT, MB_COPY_NT, MB_ADD_NT, MB_NKERNELS };
static const char *const mb_names[MB_NKERNELS] = {"read",     "write",   "copy",  "add",
                                                  "write_nt", "copy_nt", "add_nt"};
/* arrays touched per element */
static const int mb_streams[MB_NKERNELS] = {1, 1, 2, 3, 1, 2, 3};

typedef struct {
    double            *a, *b, *c;
    size_t             n;
    int                kernel;
    pthread_barrier_t *bar;
    double             sink;
} mb_thread_t;

static void mb_run_kernel(mb_thread_t *t)
{
    double *restrict a = t->a, *restrict b = t->b, *restrict c = t->c;
    double s = 0.0;
    switch (t->kernel) {
    case MB_READ: {
        double s1 = 0.0, s2 = 0.0, s3 = 0.0; /* four chains: the adds do not limit */
        size_t i = 0;
        for (; i + 4 <= t->n; i += 4) {
            s += a[i];
            s1 += a[i + 1];
            s2 += a[i + 2];
            s3 += a[i + 3];
        }
        for (; i < t->n; i++)
            s += a[i];
        s += s1 + s2 + s3;
        break;
    }
    case MB_WRITE:
        for (size_t i = 0; i < t->n; i++)
            a[i] = 1.0;
        break;
    case MB_COPY:
        memcpy(b, a, t->n * sizeof(*a));
        break;
    case MB_ADD:
        for (size_t i = 0; i < t->n; i++)
            c[i] = a[i] + b[i];
        break;
#if defined(__SSE2__)
    /* arrays from malloc are 16-byte aligned; n is a multiple of 8 (whole MiB) */
    case MB_WRITE_NT: {
        __m128d one = _mm_set1_pd(1.0);
        for (size_t i = 0; i < t->n; i += 2)
            _mm_stream_pd(a + i, one);
        _mm_sfence();
        break;
    }
    case MB_COPY_NT:
        for (size_t i = 0; i < t->n; i += 2)
            _mm_stream_pd(b + i, _mm_load_pd(a + i));
        _mm_sfence();
        break;
    default:
        for (size_t i = 0; i < t->n; i += 2)
            _mm_stream_pd(c + i, _mm_add_pd(_mm_load_pd(a + i), _mm_load_pd(b + i)));
        _mm_sfence();
        break;
#else
    default: /* no non-temporal stores here: the plain kernels again */
        if (t->kernel == MB_WRITE_NT) {
            for (size_t i = 0; i < t->n; i++)
                a[i] = 1.0;
        } else if (t->kernel == MB_COPY_NT) {
            memcpy(b, a, t->n * sizeof(*a));
        } else {
            for (size_t i = 0; i < t->n; i++)
                c[i] = a[i] + b[i];
        }
        break;
#endif
    }
    t->sink += s;
}

static void *mb_thread(void *arg)
{
    mb_thread_t *t = arg;
    pthread_barrier_wait(t->bar);
    mb_run_kernel(t);
    pthread_barrier_wait(t->bar);
    return NULL;
}

/* One timed pass of kernel k on nt threads; returns GB/s. */
static double mb_pass(mb_thread_t *th, int nt, int k, pthread_barrier_t *bar)
{
    pthread_t tid[64];
    for (int i = 1; i < nt; i++) {
        th[i].kernel = k;
        if (pthread_create(&tid[i], NULL, mb_thread, &th[i]) != 0) {
            fprintf(stderr, "membw: cannot start a thread\n");
            exit(1);
        }
    }
    th[0].kernel = k;
    pthread_barrier_wait(bar);
    double t0 = bench_now_s();
    mb_run_kernel(&th[0]);
    pthread_barrier_wait(bar);
    double dt = bench_now_s() - t0;
    for (int i = 1; i < nt; i++)
        pthread_join(tid[i], NULL);
    return (double)nt * (double)th[0].n * sizeof(double) * mb_streams[k] / dt / 1e9;
}

int main(int argc, char **argv)
{
    long tmax = 2, mib = 128, reps = 7;
    int  c;
    while ((c = getopt(argc, argv, "t:m:r:h")) != -1) {
        char *end = NULL;
        long  v   = optarg ? strtol(optarg, &end, 10) : 0;
        if (c == 'h') {
            printf("usage: %s [-t THREADS (2)] [-m MIB_PER_ARRAY (128)] [-r REPS (7)]\n", argv[0]);
            return 0;
        }
        if (c == '?' || end == optarg || *end != '\0' || v < 1 || (c == 't' && v > 64) ||
            (c == 'm' && v > 65536) || v > 1000000) {
            fprintf(stderr, "membw: bad option (-t 1..64, -m 1..65536, -r >= 1)\n");
            return 2;
        }
        if (c == 't')
            tmax = v;
        else if (c == 'm')
            mib = v;
        else
            reps = v;
    }
    if (optind != argc) {
        fprintf(stderr, "membw: unexpected argument %s\n", argv[optind]);
        return 2;
    }
    size_t      n = (size_t)mib * 1024 * 1024 / sizeof(double);
    mb_thread_t th[64];
    memset(th, 0, sizeof(th));
    for (long i = 0; i < tmax; i++) {
        th[i].n = n;
        if ((th[i].a = malloc(n * sizeof(double))) == NULL ||
            (th[i].b = malloc(n * sizeof(double))) == NULL ||
            (th[i].c = malloc(n * sizeof(double))) == NULL) {
            fprintf(stderr, "membw: out of memory (%ld MiB x 3 x %ld threads)\n", mib, tmax);
            return 1;
        }
        for (size_t j = 0; j < n; j++) /* touch every page before timing */
            th[i].a[j] = th[i].b[j] = th[i].c[j] = (double)(j & 7);
    }
    double *v = malloc((size_t)reps * sizeof(double));
    if (v == NULL)
        return 1;
    printf("# membw: %ld MiB per array, median of %ld passes, GB/s = 1e9 bytes read+written/s\n",
           mib, reps);
    printf("%-8s %7s %10s\n", "kernel", "threads", "GB/s");
    for (int k = 0; k < MB_NKERNELS; k++) {
        for (int nt = 1; nt <= tmax; nt++) {
            pthread_barrier_t bar;
            pthread_barrier_init(&bar, NULL, (unsigned)nt);
            for (int i = 0; i < nt; i++)
                th[i].bar = &bar;
            for (long r = 0; r < reps; r++)
                v[r] = mb_pass(th, nt, k, &bar);
            pthread_barrier_destroy(&bar);
            printf("%-8s %7d %10.2f\n", mb_names[k], nt, bench_median(v, (int)reps));
        }
    }
    double s = 0.0;
    for (long i = 0; i < tmax; i++)
        s += th[i].sink;
    return s < -1.0; /* keeps the read loop alive */
}
