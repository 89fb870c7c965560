/* SPDX-License-Identifier: MIT */
/*
 * collbench_out.c -- what collbench's rank 0 writes: the nccl-tests header, result lines and
 * footer with nccl-tests' exact formats, and the same results as CSV and JSON. It makes no
 * libcoll call and computes nothing; collbench.c measures and hands the numbers over.
 */
#include "collbench.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* nccl-tests' fit-to-width number format. */
static void cb_fmt(double v, int width, char *s)
{
    if (snprintf(s, (size_t)width + 1, "%*.2f", width, v) <= width ||
        snprintf(s, (size_t)width + 1, "%*.1f", width, v) <= width ||
        snprintf(s, (size_t)width + 1, "%*.0f", width, v) <= width) {
        return;
    }
    snprintf(s, (size_t)width + 1, width >= 7 ? "%*.1e" : "%*.0e", width, v);
}

static const char *cb_redop_col(const cb_coll_t *coll, coll_redop_t op)
{
    return coll->has_op ? cb_op_name(op) : "none";
}

/* ---- JSON ---- */

static void cb_json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s != '\0'; s++) {
        if (*s == '"' || *s == '\\') {
            fprintf(f, "\\%c", *s);
        } else if ((unsigned char)*s < 0x20) {
            fprintf(f, "\\u%04x", (unsigned char)*s);
        } else {
            fputc(*s, f);
        }
    }
    fputc('"', f);
}

static void cb_json_begin(cb_out_t *w, int argc, char **argv)
{
    const cb_opts_t *o = w->o;
    FILE            *f = w->json;
    int              i;

    fprintf(f, "{\n  \"tool\": \"collbench\",\n  \"version\": \"%d.%d.%d\",\n  \"args\": [",
            COLL_VERSION_MAJOR, COLL_VERSION_MINOR, COLL_VERSION_PATCH);
    for (i = 0; i < argc; i++) {
        fputs(i > 0 ? ", " : "", f);
        cb_json_str(f, argv[i]);
    }
    fprintf(f, "],\n  \"collective\": \"%s\",\n  \"nccl_name\": \"%s\",\n  \"nranks\": %d,\n",
            o->coll->name, o->coll->nccl_name, w->nranks);
    fputs("  \"algo\": ", f); /* what -A forces here: null when it forces nothing that runs */
    if (o->algo != NULL && !o->algo_none) {
        cb_json_str(f, o->algo);
    } else {
        fputs("null", f);
    }
    if (o->algo != NULL && o->algo_note[0] != '\0') {
        fputs(",\n  \"algo_requested\": ", f);
        cb_json_str(f, o->algo);
        fputs(",\n  \"algo_note\": ", f);
        cb_json_str(f, o->algo_note);
    }
    fprintf(f,
            ",\n  \"config\": {\"minimum_bytes\": %zu, \"maximum_bytes\": %zu, \"%s\": %zu, "
            "\"warmup_iters\": %d, \"iterations\": %d, \"validation\": %d, \"average\": %d, "
            "\"blocking\": %d, \"run_cycles\": %d},\n  \"results\": [",
            o->minbytes, o->maxbytes, o->stepfactor > 1 ? "step_factor" : "step_bytes",
            o->stepfactor > 1 ? (size_t)o->stepfactor : o->stepbytes, o->warmup, o->iters, o->check,
            o->average, o->blocking, o->cycles);
    w->json_first = 1;
}

static void cb_json_half(FILE *f, const cb_half_t *h, int checked)
{
    if (h->skipped) {
        fputs("null", f);
        return;
    }
    fprintf(f, "{\"time\": %.9g, \"alg_bw\": %.9g, \"bus_bw\": %.9g, \"nwrong\": ", h->time_us,
            h->algbw, h->busbw);
    if (checked) {
        fprintf(f, "%llu}", (unsigned long long)h->wrong);
    } else {
        fputs("null}", f);
    }
}

/* ---- files ---- */

int cb_out_open(cb_out_t *w, const cb_opts_t *o, int nranks, int argc, char **argv)
{
    memset(w, 0, sizeof(*w));
    w->o      = o;
    w->nranks = nranks;
    if (o->csv != NULL && (w->csv = fopen(o->csv, "w")) == NULL) {
        fprintf(stderr, "collbench: cannot write %s: %s\n", o->csv, strerror(errno));
        return -1;
    }
    if (o->json != NULL && (w->json = fopen(o->json, "w")) == NULL) {
        fprintf(stderr, "collbench: cannot write %s: %s\n", o->json, strerror(errno));
        return -1;
    }
    if (w->csv != NULL) {
        fprintf(w->csv, "collective,nranks,size,count,type,redop,root,oop_time_us,oop_algbw_gbs,"
                        "oop_busbw_gbs,oop_wrong,ip_time_us,ip_algbw_gbs,ip_busbw_gbs,"
                        "ip_wrong\n");
    }
    if (w->json != NULL) {
        cb_json_begin(w, argc, argv);
    }
    return 0;
}

/* ---- table ---- */

void cb_out_header(const cb_opts_t *o, int library_version)
{
    if (o->json != NULL) {
        printf("# Writing JSON output to %s\n", o->json);
    }
    printf("# collbench version %d.%d.%d libcoll-headers=%d libcoll-library=%d\n",
           COLL_VERSION_MAJOR, COLL_VERSION_MINOR, COLL_VERSION_PATCH, COLL_VERSION_CODE,
           library_version);
    printf("# Collective test starting: %s\n", o->coll->nccl_name);
    printf("# nThread 1 nGpus 1 minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d "
           "iters: %d agg iters: 1 validation: %d graph: 0 unalign: 0\n",
           o->minbytes, o->maxbytes, o->stepfactor > 1 ? (size_t)o->stepfactor : o->stepbytes,
           o->stepfactor > 1 ? "factor" : "bytes", o->warmup, o->iters, o->check);
    if (o->blocking == 1 || o->blocking == 3) {
        printf("# Blocking Enabled: barrier after each iteration%s \n",
               o->blocking == 3 ? "; time excludes barrier" : "");
    }
    if (o->algo != NULL) {
        printf("# Algorithm: COLL_ALGO=%s%s%s\n", o->algo, o->algo_note[0] != '\0' ? "; " : "",
               o->algo_note);
    }
    printf("#\n# Using devices\n");
}

void cb_out_rank(int rank, int pid, const char *host, const char *memory)
{
    printf("#  Rank %2d Group %2d Pid %6d on %10s %s\n", rank, 0, pid, host, memory);
}

/*
 * Bytes the host's memory must move at the least for one call of S bytes on n ranks, over S:
 * every input byte read once and every output byte written once. All-reduce and all-to-all:
 * n inputs and n outputs of S (2n); reduce-scatter and reduce: n inputs of S, outputs S in all
 * (n + 1); all-gather and broadcast: S of input, n outputs of S (n + 1).
 */
static double cb_bound_factor(const cb_coll_t *coll, int n)
{
    if (strcmp(coll->name, "allreduce") == 0 || strcmp(coll->name, "alltoall") == 0) {
        return 2.0 * n;
    }
    return n + 1.0;
}

void cb_out_columns(const cb_opts_t *o)
{
    const char *b1 = o->bound_gbs > 0.0 ? "  %bound" : "";
    const char *b2 = o->bound_gbs > 0.0 ? "  (oop)" : "";

    printf("#\n# %10s  %12s  %8s  %6s  %6s           out-of-place                       "
           "in-place          \n",
           "", "", "", "", "");
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "size",
           "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw",
           "busbw", "#wrong", (int)strlen(b1), b1);
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "(B)",
           "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "",
           (int)strlen(b2), b2);
    fflush(stdout);
}

void cb_out_line_begin(const cb_out_t *w, size_t bytes, const cb_test_t *t)
{
    printf("%12zu  %12zu  %8s  %6s  %6i", bytes, t->c.count, cb_dtype_name(t->dtype),
           cb_redop_col(w->o->coll, t->op), t->root);
    fflush(stdout);
}

void cb_out_half(const cb_out_t *w, const cb_half_t *h)
{
    char tm[8], alg[7], bus[7];

    cb_fmt(h->time_us, 7, tm);
    cb_fmt(h->algbw, 6, alg);
    cb_fmt(h->busbw, 6, bus);
    if (w->o->check > 0 && !h->skipped) {
        printf("  %7s  %6s  %6s  %6g", tm, alg, bus, (double)h->wrong);
    } else {
        printf("  %7s  %6s  %6s    N/A", tm, alg, bus);
    }
    fflush(stdout);
}

/* End the table line, and write the same result as a CSV row and a JSON object. */
void cb_out_line_end(cb_out_t *w, size_t bytes, const cb_test_t *t, const cb_half_t h[2])
{
    const char *type = cb_dtype_name(t->dtype);
    const char *op   = cb_redop_col(w->o->coll, t->op);
    int         i;

    if (w->o->bound_gbs > 0.0) { /* bound time / measured time = factor * S / B / (S / algbw) */
        char pct[7];
        cb_fmt(100.0 * cb_bound_factor(w->o->coll, w->nranks) * h[0].algbw / w->o->bound_gbs, 6,
               pct);
        printf("  %7s", pct);
    }
    printf("\n");
    fflush(stdout);
    if (w->csv != NULL) {
        fprintf(w->csv, "%s,%d,%zu,%zu,%s,%s,%d", w->o->coll->name, w->nranks, bytes, t->c.count,
                type, op, t->root);
        for (i = 0; i < 2; i++) {
            if (h[i].skipped) {
                fputs(",,,,", w->csv);
                continue;
            }
            fprintf(w->csv, ",%.6g,%.6g,%.6g,", h[i].time_us, h[i].algbw, h[i].busbw);
            if (w->o->check > 0) {
                fprintf(w->csv, "%llu", (unsigned long long)h[i].wrong);
            }
        }
        fputc('\n', w->csv);
    }
    if (w->json != NULL) {
        fprintf(w->json,
                "%s\n    {\"size\": %zu, \"count\": %zu, \"type\": \"%s\", \"redop\": \"%s\", "
                "\"root\": %d, \"out_of_place\": ",
                w->json_first ? "" : ",", bytes, t->c.count, type, op, t->root);
        cb_json_half(w->json, &h[0], w->o->check > 0);
        fputs(", \"in_place\": ", w->json);
        cb_json_half(w->json, &h[1], w->o->check > 0);
        fputc('}', w->json);
        w->json_first = 0;
    }
}

void cb_out_footer(cb_out_t *w, uint64_t errors, double avg_busbw)
{
    int bw_failed = cb_bw_failed(w->o, avg_busbw); /* 0 without NCCL_TESTS_MIN_BW */

    printf("# %-20s : %llu %s\n", "Out of bounds values", (unsigned long long)errors,
           errors != 0 ? "FAILED" : "OK");
    printf("# %-20s : %g %s\n", "Avg bus bandwidth", avg_busbw,
           w->o->min_bw < 0 ? ""
           : bw_failed      ? "FAILED"
                            : "OK");
    printf("#\n# Collective test concluded: %s\n", w->o->coll->nccl_name);
    fflush(stdout);
    if (w->csv != NULL) {
        fclose(w->csv);
    }
    if (w->json != NULL) {
        fprintf(w->json,
                "\n  ],\n  \"out_of_bounds\": {\"count\": %llu, \"okay\": %s},\n"
                "  \"average_bus_bandwidth\": {\"bandwidth\": %.9g%s}\n}\n",
                (unsigned long long)errors, errors != 0 ? "false" : "true", avg_busbw,
                w->o->min_bw < 0 ? ""
                : bw_failed      ? ", \"okay\": false"
                                 : ", \"okay\": true");
        fclose(w->json);
    }
}
