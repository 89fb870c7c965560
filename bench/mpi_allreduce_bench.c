/* SPDX-License-Identifier: MIT */
/*
 * mpi_allreduce_bench.c -- MPI_Allreduce (MPI_SUM) measured the way collbench measures
 * coll_allreduce: the same size sweep, warm-up, timing, busbw formula and output columns, so
 * the two tables can be read side by side. Built with mpicc (make bench-mpi); it does not link
 * libcoll and covers allreduce only, with float, double or int.
 */
#include <errno.h>
#include <getopt.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MB_GUARD 64 /* guard bytes checked after the receive buffer */

typedef struct {
    size_t       minbytes, maxbytes, stepbytes;
    long         stepfactor;
    int          iters, warmup, check, average;
    MPI_Datatype dtype;
    const char  *dname;
    size_t       esize;
} mb_opts_t;

typedef struct {
    double   time_us, algbw, busbw;
    uint64_t wrong;
} mb_half_t;

static int mb_rank, mb_nranks;

static void mb_usage(FILE *f, const char *prog)
{
    fprintf(f,
            "usage: mpirun -np N %s [options]\n"
            "MPI_Allreduce (MPI_SUM) with collbench's sweep and columns (only rank 0 prints).\n"
            "  -b SIZE   smallest size, suffix K/M/G (default 32M)\n"
            "  -e SIZE   largest size (default 32M)\n"
            "  -i SIZE   additive step (default 1M)\n"
            "  -f N      multiplicative step, used when > 1\n"
            "  -n N      timed iterations per size (default 20)\n"
            "  -w N      warm-up iterations per size (default 1)\n"
            "  -c N      checked iterations, 0 disables checking (default 1)\n"
            "  -a N      time across ranks: 0 rank 0, 1 avg, 2 min, 3 max (default 1)\n"
            "  -d TYPE   float|double|int (default float)\n"
            "  -h        this help\n",
            prog);
}

static int mb_parse_size(const char *s, size_t *v_p)
{
    double v;
    char   unit[2] = "";
    int    n       = sscanf(s, "%lf %1s", &v, unit);
    double mult    = 1;

    if (n < 1 || v < 0) {
        return -1;
    }
    if (n == 2) {
        switch (unit[0]) {
        case 'K':
        case 'k':
            mult = 1024.0;
            break;
        case 'M':
        case 'm':
            mult = 1024.0 * 1024.0;
            break;
        case 'G':
        case 'g':
            mult = 1024.0 * 1024.0 * 1024.0;
            break;
        default:
            return -1;
        }
    }
    *v_p = (size_t)(v * mult);
    return 0;
}

static int mb_parse_int(const char *s, long lo, long hi, long *v_p)
{
    char *end;
    long  v;

    errno = 0;
    v     = strtol(s, &end, 0);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) {
        return -1;
    }
    *v_p = v;
    return 0;
}

static int mb_parse_type(mb_opts_t *o, const char *s)
{
    if (strcmp(s, "float") == 0 || strcmp(s, "float32") == 0) {
        o->dtype = MPI_FLOAT, o->dname = "float", o->esize = sizeof(float);
    } else if (strcmp(s, "double") == 0 || strcmp(s, "float64") == 0) {
        o->dtype = MPI_DOUBLE, o->dname = "double", o->esize = sizeof(double);
    } else if (strcmp(s, "int") == 0 || strcmp(s, "int32") == 0) {
        o->dtype = MPI_INT, o->dname = "int32", o->esize = sizeof(int);
    } else {
        return -1;
    }
    return 0;
}

/* Returns 0 to run, 1 after -h, 2 on a usage error. */
static int mb_parse_args(int argc, char **argv, mb_opts_t *o)
{
    long v = 0;
    int  c, bad;

    memset(o, 0, sizeof(*o));
    o->minbytes = o->maxbytes = 32u << 20;
    o->stepbytes              = 1u << 20;
    o->stepfactor             = 1;
    o->iters                  = 20;
    o->warmup = o->check = o->average = 1;
    mb_parse_type(o, "float");
    while ((c = getopt(argc, argv, "b:e:i:f:n:w:c:a:d:h")) != -1) {
        switch (c) {
        case 'b':
            bad = mb_parse_size(optarg, &o->minbytes);
            break;
        case 'e':
            bad = mb_parse_size(optarg, &o->maxbytes);
            break;
        case 'i':
            bad = mb_parse_size(optarg, &o->stepbytes);
            break;
        case 'f':
            bad = mb_parse_int(optarg, 0, 1 << 20, &o->stepfactor);
            break;
        case 'n':
            bad = mb_parse_int(optarg, 1, 1 << 30, &v), o->iters = (int)v;
            break;
        case 'w':
            bad = mb_parse_int(optarg, 0, 1 << 30, &v), o->warmup = (int)v;
            break;
        case 'c':
            bad = mb_parse_int(optarg, 0, 1 << 20, &v), o->check = (int)v;
            break;
        case 'a':
            bad = mb_parse_int(optarg, 0, 3, &v), o->average = (int)v;
            break;
        case 'd':
            bad = mb_parse_type(o, optarg);
            break;
        case 'h':
            mb_usage(stdout, argv[0]);
            return 1;
        default:
            bad = 1;
            break;
        }
        if (bad) {
            mb_usage(stderr, argv[0]);
            return 2;
        }
    }
    if (optind < argc || o->minbytes > o->maxbytes ||
        (o->stepfactor <= 1 && o->stepbytes == 0 && o->minbytes < o->maxbytes)) {
        fprintf(stderr, "mpi_allreduce_bench: bad sizes or extra arguments\n");
        return 2;
    }
    return 0;
}

/* nccl-tests' fit-to-width number format. */
static void mb_fmt(double v, int width, char *s)
{
    if (snprintf(s, (size_t)width + 1, "%*.2f", width, v) <= width ||
        snprintf(s, (size_t)width + 1, "%*.1f", width, v) <= width ||
        snprintf(s, (size_t)width + 1, "%*.0f", width, v) <= width) {
        return;
    }
    snprintf(s, (size_t)width + 1, width >= 7 ? "%*.1e" : "%*.0e", width, v);
}

/* Small integers: every sum is exact in all three types, and depends on every rank. */
static double mb_value(int rank, size_t i)
{
    return (double)((long)((i * 7 + (size_t)rank * 3) % 13) - 6);
}

static void mb_store(const mb_opts_t *o, void *buf, size_t i, double v)
{
    if (o->dtype == MPI_FLOAT) {
        ((float *)buf)[i] = (float)v;
    } else if (o->dtype == MPI_DOUBLE) {
        ((double *)buf)[i] = v;
    } else {
        ((int *)buf)[i] = (int)v;
    }
}

static double mb_load(const mb_opts_t *o, const void *buf, size_t i)
{
    if (o->dtype == MPI_FLOAT) {
        return ((const float *)buf)[i];
    }
    return o->dtype == MPI_DOUBLE ? ((const double *)buf)[i] : ((const int *)buf)[i];
}

static void mb_init(const mb_opts_t *o, char *sbuf, char *rbuf, size_t count, int in_place)
{
    size_t i;

    memset(rbuf, 0xff, count * o->esize);
    memset(rbuf + count * o->esize, 0xa5, MB_GUARD);
    for (i = 0; i < count; i++) {
        mb_store(o, in_place ? rbuf : sbuf, i, mb_value(mb_rank, i));
    }
}

/* Wrong elements plus changed guard bytes on this rank. */
static uint64_t mb_verify(const mb_opts_t *o, const char *rbuf, size_t count)
{
    uint64_t bad = 0;
    double   want;
    size_t   i;
    int      r;

    for (i = 0; i < count; i++) {
        for (want = 0, r = 0; r < mb_nranks; r++) {
            want += mb_value(r, i);
        }
        bad += (mb_load(o, rbuf, i) != want);
    }
    for (i = 0; i < MB_GUARD; i++) {
        bad += ((unsigned char)rbuf[count * o->esize + i] != 0xa5);
    }
    return bad;
}

static double mb_combine(const mb_opts_t *o, double v)
{
    static const MPI_Op ops[4] = {MPI_SUM, MPI_SUM, MPI_MIN, MPI_MAX};
    double              out    = v;

    if (o->average == 0) {
        return v;
    }
    MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, ops[o->average], MPI_COMM_WORLD);
    return o->average == 1 ? out / mb_nranks : out;
}

static void mb_half(const mb_opts_t *o, char *sbuf, char *rbuf, size_t count, int in_place,
                    mb_half_t *h)
{
    const void *send = in_place ? MPI_IN_PLACE : sbuf;
    double      t0, sec;
    uint64_t    bad = 0, total = 0;
    int         it, c;

    mb_init(o, sbuf, rbuf, count, in_place);
    MPI_Allreduce(send, rbuf, (int)count, o->dtype, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    for (it = 0; it < o->iters; it++) {
        MPI_Allreduce(send, rbuf, (int)count, o->dtype, MPI_SUM, MPI_COMM_WORLD);
    }
    sec        = mb_combine(o, (MPI_Wtime() - t0) / o->iters);
    h->time_us = sec * 1e6;
    h->algbw   = sec > 0 ? (double)(count * o->esize) / 1e9 / sec : 0;
    h->busbw   = h->algbw * 2.0 * (mb_nranks - 1) / mb_nranks;
    h->wrong   = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    for (c = 0; c < o->check && total == 0; c++) {
        mb_init(o, sbuf, rbuf, count, in_place);
        MPI_Allreduce(send, rbuf, (int)count, o->dtype, MPI_SUM, MPI_COMM_WORLD);
        bad = mb_verify(o, rbuf, count);
        MPI_Allreduce(&bad, &total, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    }
    h->wrong = total;
}

static void mb_print_half(const mb_opts_t *o, const mb_half_t *h)
{
    char tm[8], alg[7], bus[7];

    mb_fmt(h->time_us, 7, tm);
    mb_fmt(h->algbw, 6, alg);
    mb_fmt(h->busbw, 6, bus);
    if (o->check > 0) {
        printf("  %7s  %6s  %6s  %6g", tm, alg, bus, (double)h->wrong);
    } else {
        printf("  %7s  %6s  %6s    N/A", tm, alg, bus);
    }
}

static void mb_header(const mb_opts_t *o)
{
    char lib[MPI_MAX_LIBRARY_VERSION_STRING], host[64], *all = NULL, *nl;
    int  len, r, pid                                         = (int)getpid();
    char mine[64];

    MPI_Get_library_version(lib, &len);
    if ((nl = strchr(lib, '\n')) != NULL) {
        *nl = '\0';
    }
    memset(mine, 0, sizeof(mine));
    gethostname(host, sizeof(host));
    host[55] = '\0';
    memcpy(mine, host, strlen(host));
    memcpy(mine + 56, &pid, sizeof(pid));
    if (mb_rank == 0 && (all = malloc((size_t)mb_nranks * sizeof(mine))) == NULL) {
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Gather(mine, sizeof(mine), MPI_BYTE, all, sizeof(mine), MPI_BYTE, 0, MPI_COMM_WORLD);
    if (mb_rank != 0) {
        return;
    }
    printf("# mpi_allreduce_bench: MPI_Allreduce (MPI_SUM) of %s\n", lib);
    printf("# Collective test starting: mpi_allreduce_bench\n");
    printf("# nThread 1 nGpus 1 minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d "
           "iters: %d agg iters: 1 validation: %d graph: 0 unalign: 0\n",
           o->minbytes, o->maxbytes, o->stepfactor > 1 ? (size_t)o->stepfactor : o->stepbytes,
           o->stepfactor > 1 ? "factor" : "bytes", o->warmup, o->iters, o->check);
    printf("#\n# Using devices\n");
    for (r = 0; r < mb_nranks; r++) {
        memcpy(&pid, all + r * 64 + 56, sizeof(pid));
        printf("#  Rank %2d Group %2d Pid %6d on %10s host memory\n", r, 0, pid, all + r * 64);
    }
    free(all);
    printf("#\n# %10s  %12s  %8s  %6s  %6s           out-of-place                       "
           "in-place          \n",
           "", "", "", "", "");
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "size",
           "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw",
           "busbw", "#wrong", 0, "");
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "(B)",
           "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "",
           0, "");
    fflush(stdout);
}

static size_t mb_next(size_t size, long factor, size_t step)
{
    if (factor > 1) {
        return size == 0 ? 1 : (size > SIZE_MAX / (size_t)factor ? SIZE_MAX : size * factor);
    }
    return size > SIZE_MAX - step ? SIZE_MAX : size + step;
}

/* Warm-up over doubling sizes, then one line per size; returns the failures seen. */
static uint64_t mb_sweep(const mb_opts_t *o, char *sbuf, char *rbuf, double *bw_avg_p)
{
    mb_half_t h[2];
    uint64_t  errors = 0;
    size_t    size, next, count;
    double    bw_sum = 0;
    int       w, lines = 0;

    for (size = o->minbytes; size <= o->maxbytes; size = next) {
        for (w = 0; w < o->warmup; w++) {
            MPI_Allreduce(sbuf, rbuf, (int)(size / o->esize), o->dtype, MPI_SUM, MPI_COMM_WORLD);
        }
        if ((next = mb_next(size, 2, 0)) == size) {
            break;
        }
    }
    for (size = o->minbytes; size <= o->maxbytes; size = next) {
        count = size / o->esize;
        mb_half(o, sbuf, rbuf, count, 0, &h[0]);
        mb_half(o, sbuf, rbuf, count, 1, &h[1]);
        errors += (h[0].wrong != 0) + (h[1].wrong != 0);
        bw_sum += h[0].busbw + h[1].busbw;
        lines++;
        if (mb_rank == 0) {
            printf("%12zu  %12zu  %8s  %6s  %6i", count * o->esize, count, o->dname, "sum", -1);
            mb_print_half(o, &h[0]);
            mb_print_half(o, &h[1]);
            printf("\n");
            fflush(stdout);
        }
        if ((next = mb_next(size, o->stepfactor, o->stepbytes)) == size) {
            break;
        }
    }
    *bw_avg_p = lines > 0 ? bw_sum / (2.0 * lines) : 0;
    return errors;
}

int main(int argc, char **argv)
{
    mb_opts_t o;
    char     *sbuf, *rbuf;
    uint64_t  errors;
    double    bw_avg;
    int       rc = mb_parse_args(argc, argv, &o);

    if (rc != 0) {
        return rc == 1 ? 0 : 2;
    }
    if ((size_t)(int)(o.maxbytes / o.esize) != o.maxbytes / o.esize) {
        fprintf(stderr, "mpi_allreduce_bench: maxbytes too large for an int count\n");
        return 2;
    }
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &mb_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &mb_nranks);
    sbuf = calloc(1, o.maxbytes + MB_GUARD);
    rbuf = calloc(1, o.maxbytes + MB_GUARD);
    if (sbuf == NULL || rbuf == NULL) {
        fprintf(stderr, "mpi_allreduce_bench: rank %d: out of memory\n", mb_rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    mb_header(&o);
    errors = mb_sweep(&o, sbuf, rbuf, &bw_avg);
    if (mb_rank == 0) {
        printf("# %-20s : %llu %s\n", "Out of bounds values", (unsigned long long)errors,
               errors != 0 ? "FAILED" : "OK");
        printf("# %-20s : %g %s\n", "Avg bus bandwidth", bw_avg, "");
        printf("#\n# Collective test concluded: mpi_allreduce_bench\n");
    }
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return errors != 0 ? 1 : 0;
}
