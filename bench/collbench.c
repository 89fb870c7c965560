/* SPDX-License-Identifier: MIT */
/*
 * collbench.c -- nccl-tests-compatible benchmark of libcoll's collectives: the same flags,
 * sweep, timing, busbw formulas and output lines (plus --csv, --json and -A ALGO). One rank per
 * process, started by collrun like an MPI program; only rank 0 prints. This file parses the
 * options and measures; the collectives (counts, patterns, checks) are in collbench_ops.c and
 * the formatting in collbench_out.c. Public coll.h only. --memory cuda puts the buffers in device
 * memory and enqueues the timed calls on a stream, synchronised once per size as nccl-tests
 * does (collbench_cuda.c). nccl-tests' -m/-G/-I/... modes are not implemented: those options
 * are accepted at their defaults only. Over 800 lines: nccl-tests' whole flag set, each flag
 * with its check, is parsed here beside the sweep it drives; splitting the options into a file
 * of their own is the next step if it grows.
 */
#include "collbench.h"

#include <errno.h>
#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CB_MAX_WRONG_REPORTS 8 /* messages about wrong values per rank */

/* Long options without a letter (values above every char). */
enum { CB_OPT_CSV = 256, CB_OPT_CPUTIME };

/* Per-process state of the run. */
typedef struct {
    cb_opts_t    o;
    coll_comm_t *comm;
    int          rank, nranks;
    char        *salloc, *ralloc;   /* buffers with their guard zones */
    char        *dsalloc, *dralloc; /* --memory cuda: their device twins */
    coll_reg_t  *sreg, *rreg;       /* -R: their registrations */
    void        *stream;
    double       table[CB_PERIOD];
    cb_out_t     out; /* CSV and JSON files (rank 0) */
    double       bw_sum;
    long         bw_count;
    uint64_t     errors;  /* results with wrong values + values changed out of bounds */
    int          reports; /* wrong-value messages printed by this rank */
} cb_ctx_t;

/* ---- options ---- */

static void cb_usage(FILE *f, const char *prog)
{
    fprintf(f,
            "usage: collrun -n N %s [options]\n"
            "nccl-tests-compatible benchmark of libcoll collectives (only rank 0 prints).\n"
            "  -C, --coll NAME          allreduce|reduce_scatter|allgather|broadcast|reduce|"
            "alltoall\n"
            "                           (default allreduce, or from the program name, e.g. "
            "all_reduce_perf)\n"
            "  -b, --minbytes SIZE      smallest size, suffix K/M/G (default 32M)\n"
            "  -e, --maxbytes SIZE      largest size (default 32M)\n"
            "  -i, --stepbytes SIZE     additive step (default 1M)\n"
            "  -f, --stepfactor N       multiplicative step, used when > 1 (default off)\n"
            "  -n, --iters N            timed iterations per size (default 20)\n"
            "  -w, --warmup_iters N     warm-up iterations per size (default 1)\n"
            "  -N, --run_cycles N       repeat the sweep N times, 0 = forever (default 1)\n"
            "  -c, --check N            checked iterations, 0 disables checking (default 1)\n"
            "  -o, --op OP              sum|prod|min|max|avg|all (default sum)\n"
            "  -d, --datatype TYPE      int8|uint8|int32|uint32|int64|uint64|half|float|double|"
            "bfloat16|all\n"
            "                           (aliases char int fp16 float16 float32 float64 bf16; "
            "default float)\n"
            "  -r, --root R             root of broadcast/reduce, or all (default 0)\n"
            "  -M, --memory host|cuda   buffers in host or CUDA device memory; with cuda the\n"
            "                           calls are enqueued on a stream (default host)\n"
            "  -R, --local_register N   1 or 2: host buffers from coll_mem_alloc, registered\n"
            "                           with coll_comm_register (default 0: malloc'ed)\n"
            "  -a, --average N          time across ranks: 0 rank 0, 1 avg, 2 min, 3 max "
            "(default 1)\n"
            "  -z, --blocking N         1: barrier after every iteration, 3: likewise but not "
            "timed\n"
            "  -T, --timeout SEC        COLL_TIMEOUT for this run (and COLL_BOOTSTRAP_TIMEOUT if\n"
            "                           not set)\n"
            "  -A, --algo NAME          COLL_ALGO for this run, e.g. ring\n"
            "      --csv FILE           also write the results as CSV\n"
            "      --bound GBPS         add %%bound: time of the memory-bandwidth bound (GBPS =\n"
            "                           bench/membw copy GB/s, all threads) over measured time\n"
            "  -J, --json FILE          also write the results as JSON\n"
            "  -t 1, -g 1               accepted: one rank per process;  -h, --help  this help\n"
            "  -m 1, -p 0|1, -y 0, -G 0, -S 0, -u 0, -I 0, -K 0, -x 0, -D 0, -V N, -M 0, -C 0|1\n"
            "                           nccl-tests' options at values that change nothing\n",
            prog);
}

/* nccl-tests' size syntax: a number with an optional K, M or G (binary) suffix. */
static int cb_parse_size(const char *s, size_t *v_p)
{
    static const char units[] = "kKmMgG";
    double            v;
    char              unit[2] = "";
    int               n       = sscanf(s, "%lf %1s", &v, unit);
    const char       *u       = n == 2 ? strchr(units, unit[0]) : NULL;

    if (n < 1 || v < 0 || (n == 2 && u == NULL)) {
        return -1;
    }
    if (u != NULL) {
        v *= (double)(1ULL << (10 * (1 + (u - units) / 2)));
    }
    *v_p = (size_t)v;
    return 0;
}

static int cb_parse_int(const char *s, long lo, long hi, int *v_p)
{
    char *end;
    long  v;

    errno = 0;
    v     = strtol(s, &end, 0);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) {
        return -1;
    }
    *v_p = (int)v;
    return 0;
}

/* nccl-tests' long names, plus --coll, --algo, --csv and --json. */
static const struct option cb_longopts[] = {
    {"coll", required_argument, NULL, 'C'},
    {"minbytes", required_argument, NULL, 'b'},
    {"maxbytes", required_argument, NULL, 'e'},
    {"stepbytes", required_argument, NULL, 'i'},
    {"stepfactor", required_argument, NULL, 'f'},
    {"iters", required_argument, NULL, 'n'},
    {"warmup_iters", required_argument, NULL, 'w'},
    {"run_cycles", required_argument, NULL, 'N'},
    {"check", required_argument, NULL, 'c'},
    {"op", required_argument, NULL, 'o'},
    {"datatype", required_argument, NULL, 'd'},
    {"root", required_argument, NULL, 'r'},
    {"average", required_argument, NULL, 'a'},
    {"blocking", required_argument, NULL, 'z'},
    {"timeout", required_argument, NULL, 'T'},
    {"algo", required_argument, NULL, 'A'},
    {"csv", required_argument, NULL, CB_OPT_CSV},
    {"bound", required_argument, NULL, 'B'},
    {"json", required_argument, NULL, 'J'},
    {"output_file", required_argument, NULL, 'J'},
    {"nthreads", required_argument, NULL, 't'},
    {"ngpus", required_argument, NULL, 'g'},
    {"memory", required_argument, NULL, 'M'},
    {"local_register", required_argument, NULL, 'R'},
    {"agg_iters", required_argument, NULL, 'm'},
    {"parallel_init", required_argument, NULL, 'p'},
    {"stream_null", required_argument, NULL, 'y'},
    {"cudagraph", required_argument, NULL, 'G'},
    {"report_cputime", required_argument, NULL, CB_OPT_CPUTIME},
    {"report_timestamps", required_argument, NULL, 'S'},
    {"unalign", required_argument, NULL, 'u'},
    {"per_iter_timing", required_argument, NULL, 'I'},
    {"per_iter_skip", required_argument, NULL, 'K'},
    {"cta_policy", required_argument, NULL, 'x'},
    {"device_implementation", required_argument, NULL, 'D'},
    {"device_cta_count", required_argument, NULL, 'V'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}};

/* Integer options: letter, accepted range, field. */
static const struct {
    int    c;
    long   lo, hi;
    size_t off;
} cb_intopts[] = {
    {'n', 1, 1 << 30, offsetof(cb_opts_t, iters)},
    {'w', 0, 1 << 30, offsetof(cb_opts_t, warmup)},
    {'N', 0, 1 << 30, offsetof(cb_opts_t, cycles)},
    {'c', 0, 1 << 20, offsetof(cb_opts_t, check)},
    {'a', 0, 3, offsetof(cb_opts_t, average)},
    {'z', 0, 3, offsetof(cb_opts_t, blocking)},
    {'T', 0, 1 << 30, offsetof(cb_opts_t, timeout)},
    {'f', 0, 1 << 20, offsetof(cb_opts_t, stepfactor)},
    {'R', 0, 2, offsetof(cb_opts_t, reg)},
};

/* nccl-tests' options for what collbench does not do: accepted at the values that change
 * nothing (the defaults), refused at the others. */
static const struct {
    int         c;
    const char *name;   /* long name */
    long        lo, hi; /* the values accepted */
    const char *why;    /* what collbench does instead */
} cb_noopts[] = {
    {'m', "agg_iters", 1, 1, "every timed iteration is one call"},
    {'p', "parallel_init", 0, 1, "one rank per process, nothing to initialise in parallel"},
    {'y', "stream_null", 0, 0, "--memory cuda enqueues on a stream of its own"},
    {'G', "cudagraph", 0, 0, "no CUDA graph launches"},
    {CB_OPT_CPUTIME, "report_cputime", 0, 1, "the calls block, so CPU and GPU times agree"},
    {'S', "report_timestamps", 0, 0, "no timestamps"},
    {'u', "unalign", 0, 0, "buffers are page-aligned"},
    {'I', "per_iter_timing", 0, 0, "one time over all -n calls"},
    {'K', "per_iter_skip", 0, 0, "no per-iteration timing"},
    {'x', "cta_policy", -1, 0, "no CTA policy"},
    {'D', "device_implementation", 0, 0, "no device implementation"},
    {'V', "device_cta_count", 1, 128, "no device implementation"},
};

/* One of cb_noopts; returns 0, or -1 after printing why the value is refused. */
static int cb_parse_noop(int i, const char *arg)
{
    long lo = cb_noopts[i].lo, hi = cb_noopts[i].hi;
    int  v;

    if (cb_parse_int(arg, lo, hi, &v) == 0) {
        return 0;
    }
    if (cb_noopts[i].c < CB_OPT_CSV) {
        fprintf(stderr, "collbench: -%c %s (--%s)", cb_noopts[i].c, arg, cb_noopts[i].name);
    } else {
        fprintf(stderr, "collbench: --%s %s", cb_noopts[i].name, arg);
    }
    fprintf(stderr, " is not supported: %s; accepted: %ld", cb_noopts[i].why, lo);
    fprintf(stderr, hi == lo ? "\n" : hi == lo + 1 ? " or %ld\n" : " to %ld\n", hi);
    return -1;
}

/* One option that is not an integer; returns 1 if it is bad. */
static int cb_parse_other(cb_opts_t *o, int c, const char *arg)
{
    int v;

    switch (c) {
    case 'C': /* nccl-tests' -C 0/1 (report CPU time) is accepted: the calls block anyway */
        if (strcmp(arg, "0") == 0 || strcmp(arg, "1") == 0) {
            return 0;
        }
        return (o->coll = cb_coll_find(arg)) == NULL;
    case 'b':
        return cb_parse_size(arg, &o->minbytes) != 0;
    case 'e':
        return cb_parse_size(arg, &o->maxbytes) != 0;
    case 'i':
        return cb_parse_size(arg, &o->stepbytes) != 0;
    case 't':
        return cb_parse_int(arg, 1, 1, &v) != 0; /* and -g: one rank per process */
    case 'A':
        o->algo = arg;
        return 0;
    case CB_OPT_CSV:
        o->csv = arg;
        return 0;
    case 'J':
        o->json = arg;
        return 0;
    case 'B': {
        char *end    = NULL;
        o->bound_gbs = strtod(arg, &end);
        return end == arg || *end != '\0' || !(o->bound_gbs > 0.0 && o->bound_gbs < 1e6);
    }
    case 'M': /* also nccl-tests' -M 0 (no memory report): host memory */
        o->cuda = strcmp(arg, "cuda") == 0;
        return !o->cuda && strcmp(arg, "host") != 0 && strcmp(arg, "0") != 0;
    case 'o':
        o->op = strcmp(arg, "all") == 0 ? -1 : cb_op_parse(arg);
        return o->op == -1 && strcmp(arg, "all") != 0;
    case 'd':
        o->dtype = strcmp(arg, "all") == 0 ? -1 : cb_dtype_parse(arg);
        return o->dtype == -1 && strcmp(arg, "all") != 0;
    case 'r':
        o->root = -1;
        return strcmp(arg, "all") != 0 && cb_parse_int(arg, -1, 1 << 30, &o->root) != 0;
    default:
        return 1;
    }
}

/* One option; returns 0, or -1 after printing why the value is wrong. */
static int cb_parse_opt(cb_opts_t *o, int c, const char *arg)
{
    size_t i;
    int    bad = -1;

    for (i = 0; i < sizeof(cb_noopts) / sizeof(cb_noopts[0]); i++) {
        if (cb_noopts[i].c == c) {
            return cb_parse_noop((int)i, arg);
        }
    }
    for (i = 0; i < sizeof(cb_intopts) / sizeof(cb_intopts[0]) && bad < 0; i++) {
        if (cb_intopts[i].c == c) {
            bad = cb_parse_int(arg, cb_intopts[i].lo, cb_intopts[i].hi,
                               (int *)((char *)o + cb_intopts[i].off)) != 0;
        }
    }
    if (bad < 0) {
        bad = cb_parse_other(o, c == 'g' ? 't' : c, arg);
    }
    if (bad) {
        fprintf(stderr, "collbench: invalid value '%s' for -%c%s\n", arg, c,
                (c == 't' || c == 'g') ? " (one rank per process: use collrun -n)"
                : c == 'M' ? " (host or cuda; of nccl-tests' memory report, 0 (off) only)"
                           : "");
        return -1;
    }
    return 0;
}

/* ---- -A: the algorithms the library has ---- */

static void cb_trim(const char **s, size_t *len)
{
    for (; *len > 0 && (**s == ' ' || **s == '\t'); (*s)++, (*len)--) {
    }
    for (; *len > 0 && ((*s)[*len - 1] == ' ' || (*s)[*len - 1] == '\t'); (*len)--) {
    }
}

/* Does the comma list hold name (len bytes)? */
static int cb_list_has(const char *list, const char *name, size_t len)
{
    while (*list != '\0') {
        size_t n = strcspn(list, ",");

        if (n == len && strncmp(list, name, len) == 0) {
            return 1;
        }
        list += n + (list[n] == ',');
    }
    return 0;
}

/* One entry of -A (COLL_ALGO's syntax): "algo" or "coll:algo", white space trimmed; coll is
 * NULL in the first form. */
typedef struct {
    const char *coll, *name;
    size_t      clen, len;
} cb_algo_entry_t;

/* The entry at *p, moving *p past it; 0 at the end of the list. */
static int cb_algo_next(const char **p, cb_algo_entry_t *e)
{
    if (**p == '\0') {
        return 0;
    }
    size_t      len   = strcspn(*p, ",");
    const char *colon = memchr(*p, ':', len);
    e->coll           = NULL;
    e->clen           = 0;
    e->name           = *p;
    e->len            = len;
    if (colon != NULL) {
        e->coll = *p;
        e->clen = (size_t)(colon - *p);
        e->name = colon + 1;
        e->len  = len - e->clen - 1;
        cb_trim(&e->coll, &e->clen);
    }
    cb_trim(&e->name, &e->len);
    *p += len + ((*p)[len] == ',');
    return 1;
}

/* An empty entry or "auto": no choice, the library picks by cost. */
static int cb_algo_entry_auto(const cb_algo_entry_t *e)
{
    return e->len == 0 || (e->len == 4 && strncmp(e->name, "auto", 4) == 0);
}

/* The library's algorithm called name (len bytes) into *a_p: 0, or -1 when it has none. */
static int cb_algo_lookup(const char *name, size_t len, coll_algo_info_t *a_p)
{
    for (int i = 0; i < coll_algo_count(); i++) {
        if (coll_algo_get(i, a_p) == COLL_OK && strlen(a_p->name) == len &&
            strncmp(a_p->name, name, len) == 0) {
            return 0;
        }
    }
    return -1;
}

/* cb_algo_lookup, saying that the library has none (spec: the whole -A value). */
static int cb_algo_find(const char *spec, const char *name, size_t len, coll_algo_info_t *a_p)
{
    if (cb_algo_lookup(name, len, a_p) == 0) {
        return 0;
    }
    fprintf(stderr, "collbench: -A %s: libcoll has no algorithm %.*s; it has", spec, (int)len,
            name);
    for (int i = 0; i < coll_algo_count(); i++) {
        if (coll_algo_get(i, a_p) == COLL_OK) {
            fprintf(stderr, " %s", a_p->name);
        }
    }
    fputc('\n', stderr);
    return -1;
}

/*
 * -A takes COLL_ALGO's entries, "algo" or "coll:algo". The library skips an entry whose
 * algorithm it lacks or that does not implement the collective and picks by cost, while the
 * header and the JSON would name the entry: so every algorithm must exist and implement its
 * entry's collective, and one entry must force the collective under test. Returns 0, or -1
 * after printing why not.
 */
static int cb_check_algo(const cb_opts_t *o)
{
    coll_algo_info_t a;
    coll_algo_info_t miss = {NULL, NULL, NULL}; /* the first entry "algo" that lacks coll */
    const char      *p = o->algo, *coll = o->coll->name;
    int              forced = 0, found = 0;
    cb_algo_entry_t  e;

    while (cb_algo_next(&p, &e)) {
        if (cb_algo_entry_auto(&e)) {
            continue;
        }
        if (cb_algo_find(o->algo, e.name, e.len, &a) != 0) {
            return -1;
        }
        if (e.coll != NULL && !cb_list_has(a.colls, e.coll, e.clen)) {
            fprintf(stderr,
                    "collbench: -A %s: algorithm %s does not implement %.*s (it implements %s)\n",
                    o->algo, a.name, (int)e.clen, e.coll, a.colls);
            return -1;
        }
        forced++;
        if (e.coll == NULL ? cb_list_has(a.colls, coll, strlen(coll))
                           : e.clen == strlen(coll) && strncmp(e.coll, coll, e.clen) == 0) {
            found = 1;
        } else if (e.coll == NULL && miss.name == NULL) {
            miss = a;
        }
    }
    if (forced > 0 && !found) {
        if (miss.name != NULL) {
            fprintf(stderr,
                    "collbench: -A %s: algorithm %s does not implement %s (it implements %s)\n",
                    o->algo, miss.name, coll, miss.colls);
        } else {
            fprintf(stderr, "collbench: -A %s: forces no algorithm for %s\n", o->algo, coll);
        }
        return -1;
    }
    return 0;
}

/* Why algorithm name (len bytes) cannot run on a communicator of nranks ranks on nhosts hosts,
 * as far as the public API shows (coll_comm_nhosts), or NULL: hier needs 2 or more hosts of 2
 * or more ranks, the shared-window algorithms one host. Limits of single calls (sizes, window
 * room) are the library's to report: it warns once when a forced algorithm cannot run a call. */
static const char *cb_algo_cannot(const char *name, size_t len, int nranks, int nhosts)
{
    if (len == 4 && strncmp(name, "hier", 4) == 0 && (nhosts < 2 || nranks < 2 * nhosts)) {
        return "it needs 2 or more hosts of 2 or more ranks";
    }
    if (len == 7 && (strncmp(name, "oneshot", 7) == 0 || strncmp(name, "twoshot", 7) == 0) &&
        nhosts != 1) {
        return "it needs every rank on one host";
    }
    return NULL;
}

/*
 * -A against this communicator, in the library's order: the first "coll:algo" entry for the
 * collective under test that can run, else the first "algo" entry implementing it. Sets
 * o->algo_note when an entry that would have won cannot run here (and what runs instead) and
 * o->algo_none when no entry can, so the header and the JSON do not name an algorithm that
 * did not run.
 */
static void cb_algo_on_comm(cb_opts_t *o, int nranks, int nhosts)
{
    const char      *coll = o->coll->name, *why = NULL, *runs = NULL;
    char             skipped[64] = "";
    size_t           runs_len    = 0;
    coll_algo_info_t a;
    cb_algo_entry_t  e;

    for (int pass = 0; pass < 2 && runs == NULL; pass++) {
        for (const char *p = o->algo; runs == NULL && cb_algo_next(&p, &e);) {
            if ((pass == 0) != (e.coll != NULL) || cb_algo_entry_auto(&e) ||
                (e.coll != NULL &&
                 (e.clen != strlen(coll) || strncmp(e.coll, coll, e.clen) != 0))) {
                continue;
            }
            /* a generic entry counts for the collectives it implements */
            if (e.coll == NULL && (cb_algo_lookup(e.name, e.len, &a) != 0 ||
                                   !cb_list_has(a.colls, coll, strlen(coll)))) {
                continue;
            }
            const char *no = cb_algo_cannot(e.name, e.len, nranks, nhosts);
            if (no == NULL) {
                runs     = e.name;
                runs_len = e.len;
            } else if (why == NULL) {
                why = no;
                snprintf(skipped, sizeof(skipped), "%.*s", (int)e.len, e.name);
            }
        }
    }
    o->algo_none = runs == NULL && why != NULL;
    if (why != NULL && runs != NULL) {
        snprintf(o->algo_note, sizeof(o->algo_note),
                 "%s cannot run on this communicator (%s; %d ranks on %d host(s)): %.*s runs "
                 "instead",
                 skipped, why, nranks, nhosts, (int)runs_len, runs);
    } else if (why != NULL) {
        snprintf(o->algo_note, sizeof(o->algo_note),
                 "%s cannot run on this communicator (%s; %d ranks on %d host(s)): nothing is "
                 "forced, the library chooses by cost",
                 skipped, why, nranks, nhosts);
    }
}

/* nccl-tests' NCCL_TESTS_MIN_BW (GB/s): the pass mark of the average busbw; -1 when not set.
 * Returns 0, or -1 after printing why the value is wrong. */
static int cb_parse_min_bw(cb_opts_t *o)
{
    const char *s = getenv("NCCL_TESTS_MIN_BW");
    char       *end;

    o->min_bw = -1;
    if (s == NULL || s[0] == '\0') {
        return 0;
    }
    o->min_bw = strtod(s, &end);
    if (end == s || *end != '\0' || !(o->min_bw >= 0 && o->min_bw < 1e9)) {
        fprintf(stderr, "collbench: NCCL_TESTS_MIN_BW '%s' is not a bandwidth in GB/s\n", s);
        return -1;
    }
    return 0;
}

/* Returns 0 to run, 1 after -h, 2 on a usage error. */
static int cb_parse_args(int argc, char **argv, cb_opts_t *o)
{
    const char *prog = strrchr(argv[0], '/') != NULL ? strrchr(argv[0], '/') + 1 : argv[0];
    int         c;

    memset(o, 0, sizeof(*o));
    o->coll     = cb_coll_find(prog); /* all_reduce_perf & co. */
    o->minbytes = o->maxbytes = 32u << 20;
    o->stepbytes              = 1u << 20;
    o->stepfactor             = 1;
    o->iters                  = 20;
    o->warmup = o->check = o->cycles = o->average = 1;
    o->dtype                                      = COLL_FLOAT32;
    o->op                                         = COLL_SUM;
    while ((c = getopt_long(argc, argv,
                            "C:b:e:i:f:n:w:N:c:o:d:r:a:z:T:A:J:t:g:M:R:m:p:y:G:S:u:I:K:x:D:V:h",
                            cb_longopts, NULL)) != -1) {
        if (c == 'h') {
            cb_usage(stdout, prog);
            return 1;
        }
        if (c == '?' || cb_parse_opt(o, c, optarg) != 0) {
            cb_usage(stderr, prog);
            return 2;
        }
    }
    if (o->coll == NULL) {
        o->coll = &cb_colls[0];
    }
    if (cb_parse_min_bw(o) != 0 || (o->algo != NULL && cb_check_algo(o) != 0)) {
        return 2;
    }
    if (optind < argc || o->minbytes > o->maxbytes ||
        (o->stepfactor <= 1 && o->stepbytes == 0 && o->minbytes < o->maxbytes)) {
        fprintf(stderr, "collbench: %s\n",
                optind < argc               ? "unexpected argument"
                : o->minbytes > o->maxbytes ? "minbytes > maxbytes"
                                            : "step of 0 bytes");
        return 2;
    }
    return 0;
}

/* ---- helpers ---- */

static double cb_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A failed call leaves the communicator unusable: report it, tell the other ranks, stop. */
static void cb_fail(cb_ctx_t *x, const char *what, coll_result_t res)
{
    fprintf(stderr, "collbench: rank %d: %s failed: %s: %s\n", x->rank, what, coll_strerror(res),
            coll_comm_last_error(x->comm));
    fflush(stderr);
    coll_comm_abort(x->comm);
    exit(1);
}

static void cb_barrier(cb_ctx_t *x)
{
    coll_result_t res = coll_barrier(x->comm);

    if (res < 0) {
        cb_fail(x, "coll_barrier", res);
    }
}

static void cb_run(cb_ctx_t *x, const cb_test_t *t)
{
    coll_result_t res =
        t->stream != NULL ? x->o.coll->run_stream(t, x->comm) : x->o.coll->run(t, x->comm);

    if (res < 0) {
        cb_fail(x, x->o.coll->api_name, res);
    }
}

/* --memory cuda: wait for the enqueued calls; their errors come back as the communicator's. */
static void cb_sync(cb_ctx_t *x, const cb_test_t *t)
{
    coll_result_t res;

    if (t->stream == NULL) {
        return;
    }
    if (cb_cuda_sync(t->stream) != 0) {
        fprintf(stderr, "collbench: rank %d: waiting for the stream failed\n", x->rank);
        coll_comm_abort(x->comm);
        exit(1);
    }
    res = coll_comm_get_error(x->comm);
    if (res < 0) {
        cb_fail(x, x->o.coll->api_name, res);
    }
}

/* --memory cuda: move the whole allocations (guard zones included) to or from the device. */
static void cb_transfer(cb_ctx_t *x, const cb_test_t *t, int to_device)
{
    size_t len = x->o.maxbytes + 2 * CB_GUARD_BYTES;
    int    bad;

    if (t->stream == NULL) {
        return;
    }
    bad = to_device ? cb_cuda_upload(x->dsalloc, x->salloc, len) ||
                          cb_cuda_upload(x->dralloc, x->ralloc, len)
                    : cb_cuda_download(x->salloc, x->dsalloc, len) ||
                          cb_cuda_download(x->ralloc, x->dralloc, len);
    if (bad) {
        fprintf(stderr, "collbench: rank %d: copying buffers %s the device failed\n", x->rank,
                to_device ? "to" : "from");
        coll_comm_abort(x->comm);
        exit(1);
    }
}

/* Combine a time across ranks as -a says (0: rank 0's own value, which is what it prints). */
static double cb_combine(cb_ctx_t *x, double v)
{
    static const coll_redop_t ops[4] = {COLL_SUM, COLL_SUM, COLL_MIN, COLL_MAX};
    double                    out    = v;
    coll_result_t             res;

    if (x->o.average == 0) {
        return v;
    }
    res = coll_allreduce(&v, &out, 1, COLL_FLOAT64, ops[x->o.average], x->comm);
    if (res < 0) {
        cb_fail(x, "coll_allreduce (timing)", res);
    }
    return x->o.average == 1 ? out / x->nranks : out;
}

static void cb_sum_u64(cb_ctx_t *x, uint64_t *v, int n)
{
    uint64_t      out[4];
    coll_result_t res = coll_allreduce(v, out, (size_t)n, COLL_UINT64, COLL_SUM, x->comm);

    if (res < 0) {
        cb_fail(x, "coll_allreduce (check)", res);
    }
    memcpy(v, out, sizeof(uint64_t) * (size_t)n);
}

/* "Using devices" block: host and pid of every rank, gathered with coll_allgather (so a broken
 * allgather shows up here first). */
static void cb_print_ranks(cb_ctx_t *x)
{
    char          mine[64], *all;
    coll_result_t res;
    int           r, pid;

    memset(mine, 0, sizeof(mine));
    gethostname(mine, 55);
    mine[55] = '\0';
    pid      = (int)getpid();
    memcpy(mine + 56, &pid, sizeof(pid));
    all = calloc((size_t)x->nranks, sizeof(mine));
    if (all == NULL) {
        fprintf(stderr, "collbench: rank %d: out of memory\n", x->rank);
        coll_comm_abort(x->comm);
        exit(1);
    }
    res = coll_allgather(mine, all, sizeof(mine), COLL_UINT8, x->comm);
    if (res < 0) {
        cb_fail(x, "coll_allgather (rank list)", res);
    }
    for (r = 0; x->rank == 0 && r < x->nranks; r++) {
        memcpy(&pid, all + r * 64 + 56, sizeof(pid));
        cb_out_rank(r, pid, all + r * 64,
                    x->o.cuda  ? cb_cuda_device_name()
                    : x->o.reg ? "host memory, registered"
                               : "host memory");
    }
    free(all);
}

static void cb_print_header(cb_ctx_t *x)
{
    int version = 0;

    coll_get_version(&version);
    if (x->rank == 0) {
        cb_out_header(&x->o, version);
    }
    cb_print_ranks(x);
    if (x->rank == 0) {
        cb_out_columns(&x->o);
    }
}

/* ---- measurement ---- */

/* Point t->send / t->recv at the buffers of the chosen variant (NCCL's in-place layout). */
static void cb_place_in(cb_test_t *t, int in_place, int device)
{
    char *sb = device ? t->dsbuf : t->sbuf, *rb = device ? t->drbuf : t->rbuf;

    t->in_place = in_place;
    if (in_place) {
        t->send = rb + (size_t)t->rank * t->c.send_ip_off * t->esize;
        t->recv = rb + (size_t)t->rank * t->c.recv_ip_off * t->esize;
    } else {
        t->send = sb;
        t->recv = rb;
    }
}

/* The buffers the calls use: the device twins with --memory cuda. */
static void cb_place(cb_test_t *t, int in_place)
{
    cb_place_in(t, in_place, t->stream != NULL);
}

static void cb_report_wrong(cb_ctx_t *x, const cb_test_t *t, uint64_t wrong)
{
    size_t i;
    double want;

    if (x->reports++ >= CB_MAX_WRONG_REPORTS) {
        return;
    }
    for (i = 0; i < t->c.recv_count; i++) {
        if (x->o.coll->expect(t, i, &want) == CB_EXPECT_VALUE &&
            cb_load(t->recv, i, t->dtype) != want) {
            fprintf(stderr,
                    "collbench: rank %d: %s %s %s count %zu %s: %llu wrong, first at "
                    "element %zu: %g, expected %g\n",
                    x->rank, x->o.coll->name, cb_dtype_name(t->dtype),
                    x->o.coll->has_op ? cb_op_name(t->op) : "none", t->c.count,
                    t->in_place ? "in-place" : "out-of-place", (unsigned long long)wrong, i,
                    cb_load(t->recv, i, t->dtype), want);
            return;
        }
    }
    fprintf(stderr,
            "collbench: rank %d: %s count %zu: %llu receive elements written that "
            "must stay untouched\n",
            x->rank, x->o.coll->name, t->c.count, (unsigned long long)wrong);
}

/* -c checked calls: fresh inputs, one call, compare; wrong values and out-of-bounds changes
 * are summed over ranks. */
static uint64_t cb_verify(cb_ctx_t *x, cb_test_t *t)
{
    uint64_t v[2] = {0, 0};
    int      c;

    for (c = 0; c < x->o.check; c++) {
        cb_place_in(t, t->in_place, 0); /* data is made and checked in host memory */
        cb_init_data(t, x->o.coll);
        cb_transfer(x, t, 1);
        cb_place(t, t->in_place);
        cb_run(x, t);
        cb_sync(x, t);
        cb_transfer(x, t, 0);
        cb_place_in(t, t->in_place, 0);
        cb_check(t, x->o.coll, &v[0], &v[1]);
        if (v[0] > 0) { /* reads the host copy: device memory is not the host's */
            cb_report_wrong(x, t, v[0]);
        }
        cb_place(t, t->in_place);
        if (v[1] > 0) {
            fprintf(stderr,
                    "collbench: rank %d: %s count %zu %s: %llu values changed outside "
                    "the receive buffer\n",
                    x->rank, x->o.coll->name, t->c.count, t->in_place ? "in-place" : "out-of-place",
                    (unsigned long long)v[1]);
        }
        cb_sum_u64(x, v, 2);
        x->errors += v[1];
        if (v[0] > 0) {
            x->errors++;
            break;
        }
    }
    return v[0];
}

static void cb_bench_half(cb_ctx_t *x, cb_test_t *t, int in_place, cb_half_t *h)
{
    double t0, tsum = 0, sec;
    int    it;

    memset(h, 0, sizeof(*h));
    if (in_place && !x->o.coll->has_inplace) {
        h->skipped = 1;
        return;
    }
    cb_place_in(t, in_place, 0);
    cb_init_data(t, x->o.coll); /* defined data: no NaN or denormal arithmetic in the timing */
    cb_transfer(x, t, 1);
    cb_place(t, in_place);
    cb_run(x, t);
    cb_sync(x, t);
    cb_barrier(x);
    t0 = cb_now();
    for (it = 0; it < x->o.iters; it++) {
        double t1 = cb_now();

        cb_run(x, t);
        if (x->o.blocking == 1 || x->o.blocking == 3) { /* -z: per call */
            cb_sync(x, t);
        }
        tsum += cb_now() - t1;
        if (x->o.blocking == 1 || x->o.blocking == 3) {
            cb_barrier(x);
        }
    }
    cb_sync(x, t); /* stream-ordered calls: the time runs until the last one ended */
    sec        = (x->o.blocking == 3 ? tsum : cb_now() - t0) / x->o.iters;
    sec        = cb_combine(x, sec);
    h->time_us = sec * 1e6;
    h->algbw   = sec > 0 ? (double)t->c.bw_bytes / 1e9 / sec : 0;
    h->busbw   = h->algbw * x->o.coll->bus_factor(x->nranks);
    cb_barrier(x);
    h->wrong = cb_verify(x, t);
    x->bw_sum += h->busbw;
    x->bw_count++;
}

/* nccl-tests' next size; 0 grows to 1, and the sweep ends instead of overflowing. */
static size_t cb_next(size_t size, long factor, size_t step)
{
    if (factor > 1) {
        return size == 0 ? 1 : (size > SIZE_MAX / (size_t)factor ? SIZE_MAX : size * factor);
    }
    return size > SIZE_MAX - step ? SIZE_MAX : size + step;
}

/* One (dtype, op, root): warm-up over the sizes, then -N sweeps of result lines. */
static void cb_time_test(cb_ctx_t *x, coll_dtype_t dtype, coll_redop_t op, int root)
{
    const cb_opts_t *o = &x->o;
    cb_test_t        t;
    cb_half_t        h[2];
    size_t           size, next;
    int              cycle = 0, w, ip;

    memset(&t, 0, sizeof(t));
    t.dtype  = dtype;
    t.esize  = cb_dtype_size(dtype);
    t.op     = op;
    t.root   = o->coll->rooted ? root : -1;
    t.rank   = x->rank;
    t.nranks = x->nranks;
    t.sbuf   = x->salloc + CB_GUARD_BYTES;
    t.rbuf   = x->ralloc + CB_GUARD_BYTES;
    if (x->stream != NULL) {
        t.dsbuf  = x->dsalloc + CB_GUARD_BYTES;
        t.drbuf  = x->dralloc + CB_GUARD_BYTES;
        t.stream = x->stream;
    }
    t.cap = o->maxbytes;
    cb_pattern_init(&t, x->table);
    cb_barrier(x);
    for (size = o->minbytes; size <= o->maxbytes; size = next) {
        o->coll->get_counts(size / t.esize, t.esize, x->nranks, &t.c);
        cb_place(&t, 0);
        for (w = 0; w < o->warmup; w++) {
            cb_run(x, &t);
        }
        next = cb_next(size, 2, 0);
        if (next == size) {
            break;
        }
    }
    /* --memory cuda: the warm-up calls read and write the device buffers on the stream; the
     * uploads below are on the legacy stream, unordered with it */
    cb_sync(x, &t);
    do {
        for (size = o->minbytes; size <= o->maxbytes; size = next) {
            size_t bytes;

            o->coll->get_counts(size / t.esize, t.esize, x->nranks, &t.c);
            bytes = (t.c.send_count > t.c.recv_count ? t.c.send_count : t.c.recv_count) * t.esize;
            if (x->rank == 0) {
                cb_out_line_begin(&x->out, bytes, &t);
            }
            for (ip = 0; ip < 2; ip++) {
                cb_bench_half(x, &t, ip, &h[ip]);
                if (x->rank == 0) {
                    cb_out_half(&x->out, &h[ip]);
                }
            }
            if (x->rank == 0) {
                cb_out_line_end(&x->out, bytes, &t, h);
            }
            next = cb_next(size, o->stepfactor, o->stepbytes);
            if (next == size) {
                break;
            }
        }
    } while (o->cycles == 0 || ++cycle < o->cycles);
}

/* ---- main ---- */

static void cb_alloc(cb_ctx_t *x)
{
    size_t len = x->o.maxbytes + 2 * CB_GUARD_BYTES;
    void  *s = NULL, *r = NULL;

    if (x->o.reg) { /* -R: shareable memory, registered with the communicator */
        coll_result_t res = coll_mem_alloc(&s, len);
        if (res == COLL_OK) {
            res = coll_mem_alloc(&r, len);
        }
        if (res != COLL_OK) {
            fprintf(stderr, "collbench: rank %d: coll_mem_alloc of %zu bytes: %s\n", x->rank, len,
                    coll_last_error());
            coll_comm_abort(x->comm);
            exit(1);
        }
        res = coll_comm_register(x->comm, s, len, &x->sreg);
        if (res == COLL_OK) {
            res = coll_comm_register(x->comm, r, len, &x->rreg);
        }
        if (res != COLL_OK) {
            cb_fail(x, "coll_comm_register", res);
        }
    } else if (posix_memalign(&s, 4096, len) != 0 || posix_memalign(&r, 4096, len) != 0) {
        fprintf(stderr, "collbench: rank %d: cannot allocate 2 x %zu bytes\n", x->rank, len);
        coll_comm_abort(x->comm);
        exit(1);
    }
    memset(s, 0, len); /* touch every page before anything is timed */
    memset(r, 0, len);
    x->salloc = s;
    x->ralloc = r;
    if (x->o.cuda) {
        char        err[256];
        const char *lr = getenv("COLL_LOCAL_RANK");
        if (cb_cuda_setup(lr != NULL ? atoi(lr) : x->rank, len, &x->dsalloc, &x->dralloc,
                          &x->stream, err, sizeof(err)) != 0) {
            fprintf(stderr, "collbench: rank %d: --memory cuda: %s\n", x->rank, err);
            coll_comm_abort(x->comm);
            exit(1);
        }
    }
}

/* Every (dtype, op, root) the options select, in nccl-tests' order. */
static void cb_run_all(cb_ctx_t *x)
{
    const cb_opts_t *o = &x->o;
    int d0 = o->dtype < 0 ? 0 : o->dtype, d1 = o->dtype < 0 ? COLL_DTYPE_COUNT - 1 : o->dtype;
    int p0 = o->op < 0 ? 0 : o->op, p1 = o->op < 0 ? COLL_REDOP_COUNT - 1 : o->op;
    int r0 = o->root < 0 ? 0 : o->root, r1 = o->root < 0 ? x->nranks - 1 : o->root;
    int d, p, r;

    if (!o->coll->has_op) {
        p0 = p1 = COLL_SUM;
    }
    if (!o->coll->rooted) {
        r0 = r1 = 0;
    }
    for (d = d0; d <= d1; d++) {
        for (p = p0; p <= p1; p++) {
            for (r = r0; r <= r1; r++) {
                cb_time_test(x, (coll_dtype_t)d, (coll_redop_t)p, r);
            }
        }
    }
}

int main(int argc, char **argv)
{
    static cb_ctx_t x;
    coll_result_t   res;
    char            tmo[32];
    double          avg_busbw;
    int             rc;

    rc = cb_parse_args(argc, argv, &x.o);
    if (rc != 0) {
        return rc == 1 ? 0 : 2;
    }
    /* The tool, not the library, turns its flags into the library's environment. */
    if (x.o.algo != NULL) {
        setenv("COLL_ALGO", x.o.algo, 1);
    }
    if (x.o.timeout > 0) { /* and start-up, unless set: a rank that never joins fails it */
        snprintf(tmo, sizeof(tmo), "%d", x.o.timeout);
        setenv("COLL_TIMEOUT", tmo, 1);
        setenv("COLL_BOOTSTRAP_TIMEOUT", tmo, 0);
    }
    res = coll_init(&argc, &argv, &x.comm);
    if (res < 0) {
        fprintf(stderr, "collbench: coll_init failed: %s: %s\n", coll_strerror(res),
                coll_last_error());
        return 1;
    }
    coll_comm_rank(x.comm, &x.rank);
    coll_comm_size(x.comm, &x.nranks);
    if (x.o.coll->rooted && x.o.root >= x.nranks) {
        if (x.rank == 0) {
            fprintf(stderr, "collbench: root %d is not a rank (%d ranks)\n", x.o.root, x.nranks);
        }
        coll_finalize();
        return 2;
    }
    if (x.o.algo != NULL) {
        int nhosts = 1;
        coll_comm_nhosts(x.comm, &nhosts);
        cb_algo_on_comm(&x.o, x.nranks, nhosts);
    }
    cb_alloc(&x);
    if (x.rank == 0 && cb_out_open(&x.out, &x.o, x.nranks, argc, argv) != 0) {
        coll_comm_abort(x.comm);
        return 1;
    }
    cb_print_header(&x);
    cb_run_all(&x);
    avg_busbw = x.bw_count > 0 ? x.bw_sum / (double)x.bw_count : 0;
    /* rank 0's figure decides every rank's status under NCCL_TESTS_MIN_BW (with -a 0 each
     * rank's own times differ); on every rank, whatever its environment says */
    if (coll_broadcast(&avg_busbw, &avg_busbw, 1, COLL_FLOAT64, 0, x.comm) != COLL_OK) {
        fprintf(stderr, "collbench: rank %d: broadcast of the average failed: %s\n", x.rank,
                coll_comm_last_error(x.comm));
        coll_comm_abort(x.comm);
        return 1;
    }
    if (x.rank == 0) {
        cb_out_footer(&x.out, x.errors, avg_busbw);
    }
    if (x.o.reg) {
        coll_comm_deregister(x.comm, x.sreg);
        coll_comm_deregister(x.comm, x.rreg);
        coll_mem_free(x.salloc);
        coll_mem_free(x.ralloc);
    } else {
        free(x.salloc);
        free(x.ralloc);
    }
    res = coll_finalize();
    if (res < 0) {
        fprintf(stderr, "collbench: rank %d: coll_finalize failed: %s\n", x.rank,
                coll_strerror(res));
        return 1;
    }
    return x.errors != 0 || cb_bw_failed(&x.o, avg_busbw) ? 1 : 0;
}
