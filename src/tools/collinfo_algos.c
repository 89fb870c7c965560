/* SPDX-License-Identifier: MIT */
/*
 * collinfo algos -n N: the tuner's view of a communicator that does not exist. For N ranks in
 * H hosts of N/H ranks and a sweep of sizes it prints, per collective, the algorithm the tuner
 * picks, its predicted time, and the predicted time of every algorithm that implements the
 * collective. It calls the library's own registry, selection and model-from-parameters code,
 * so what it prints is what a communicator of that shape would compute; it measures nothing
 * (collbench does) and starts no process. With --topo FILE the hosts are copies of an hwloc
 * XML machine and the model comes from its links (coll_model_from_topo); --ranks-list repeats
 * the table for several communicator sizes. Predictions are cost formulas over the layout, so
 * tens of thousands of ranks take no longer than eight.
 */
#include "collinfo.h"
#include "algo.h"
#include "api/tune.h"
#include "bootstrap/sock.h"
#include "param.h"
#include "shm/shm.h"
#include "topo/local.h"
#include "topo/topo.h"

#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CI_MAX_SIZES  64
#define CI_MAX_ALGOS  64
#define CI_MAX_RANKS  65536 /* the largest communicator the table describes */
#define CI_MAX_SHAPES 64
#define CI_DTYPE      COLL_FLOAT32

/* ---- options ---- */

/* One communicator the table describes: ranks on hosts of nranks / nhosts ranks each. */
typedef struct {
    int nranks, nhosts;
} ci_shape_t;

typedef struct {
    int         nranks;         /* -n; 0 until given */
    int         nhosts;         /* --hosts; 0 until given */
    int         ranks_per_host; /* --ranks-per-host; 0 until given */
    const char *topo;           /* --topo FILE */
    int         list[CI_MAX_SHAPES];
    int         nlist; /* --ranks-list: one table row group per communicator size */
    int         coll;  /* --coll, or -1 for every collective */
    size_t      sizes[CI_MAX_SIZES];
    int         nsizes; /* from --sizes, else 0 and the sweep min..max by factor */
    size_t      min, max, factor;
    int         sweep_set; /* --min, --max or --factor given */
    int         csv;
} ci_opts_t;

/* What every row shares: the shapes, the current one's layout and model, COLL_ALGO, chunk;
 * and the current table's columns. */
typedef struct {
    const ci_opts_t   *o;
    ci_shape_t         shapes[CI_MAX_SHAPES];
    int                nshapes;
    int                nranks, nhosts; /* the current shape */
    coll_topo_t       *topo;           /* --topo, else NULL */
    coll_tune_topo_t   tinfo;          /* what the model read from it */
    int                nic_bw;         /* no --topo: inter-host bandwidth from this host's NICs */
    coll_layout_t      layout;
    coll_model_t       model;
    const char        *override; /* COLL_ALGO as the library reads it */
    size_t             chunk;
    const coll_algo_t *cols[CI_MAX_ALGOS];
    int                ncols;
    int                choice_w; /* width of the choice column */
} ci_ctx_t;

/* One row: the tuner's choice and every column's prediction. */
typedef struct {
    size_t             size, count;
    const coll_algo_t *choice; /* NULL: nothing implements the call */
    int                forced; /* chosen by COLL_ALGO, not by cost */
    double             choice_us;
    int                ok[CI_MAX_ALGOS]; /* the column's algorithm can run the call */
    double             us[CI_MAX_ALGOS];
} ci_row_t;

static const struct option ci_longopts[] = {{"nranks", required_argument, NULL, 'n'},
                                            {"hosts", required_argument, NULL, 'H'},
                                            {"coll", required_argument, NULL, 'c'},
                                            {"sizes", required_argument, NULL, 's'},
                                            {"min", required_argument, NULL, 'b'},
                                            {"max", required_argument, NULL, 'e'},
                                            {"factor", required_argument, NULL, 'f'},
                                            {"csv", no_argument, NULL, 'C'},
                                            {"topo", required_argument, NULL, 'T'},
                                            {"ranks-per-host", required_argument, NULL, 'R'},
                                            {"ranks-list", required_argument, NULL, 'L'},
                                            {"help", no_argument, NULL, 'h'},
                                            {NULL, 0, NULL, 0}};

void collinfo_algos_usage(FILE *out)
{
    fprintf(out, "  -a, algos -n N [options]\n"
                 "  -a, algos --topo FILE --hosts H [options]\n"
                 "                    per size: the tuner's choice, its predicted time and the\n"
                 "                    predicted time of every algorithm (* = only via COLL_ALGO)\n"
                 "      -n, --nranks N     ranks of the communicator (at most 65536)\n"
                 "      -H, --hosts H      hosts, N/H ranks each; H must divide N (default 1)\n"
                 "      --topo FILE        hosts like this hwloc XML machine, one rank per GPU;\n"
                 "                         the model comes from its links and NICs\n"
                 "      --ranks-per-host P ranks on each host (default: the GPUs in FILE)\n"
                 "      --ranks-list LIST  one row group per communicator size, e.g.\n"
                 "                         8,16,32 (hosts of --ranks-per-host ranks)\n"
                 "      -c, --coll C       one collective (default: all of them)\n"
                 "      -s, --sizes LIST   comma-separated sizes in bytes (k, m, g suffixes)\n"
                 "      -b, --min B        first size of the sweep (default 8)\n"
                 "      -e, --max B        last size of the sweep (default 256m)\n"
                 "      -f, --factor F     multiplier between sizes (default 4)\n"
                 "      --csv              comma-separated values, one header line\n");
}

/* A usage error: says why on stderr and gives the exit status 2. */
__attribute__((format(printf, 1, 2))) static int ci_fail(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "collinfo algos: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(see collinfo --help)\n");
    return 2;
}

/* The collectives a table can show: every op up to and including barrier (not send/recv). */
static int ci_coll_find(const char *name)
{
    for (int op = 0; op <= COLL_OP_BARRIER; op++) {
        if (strcmp(name, coll_op_name((coll_op_t)op)) == 0) {
            return op;
        }
    }
    return -1;
}

/* "allreduce reduce_scatter ... barrier" for error messages. */
static const char *ci_coll_names(void)
{
    static char names[256];

    names[0] = '\0';
    for (int op = 0; op <= COLL_OP_BARRIER; op++) {
        strncat(names, " ", sizeof(names) - strlen(names) - 1);
        strncat(names, coll_op_name((coll_op_t)op), sizeof(names) - strlen(names) - 1);
    }
    return names;
}

static int ci_parse_int(const char *text, int lo, int hi, int *v_p)
{
    int64_t v;

    if (coll_parse_int(text, &v) != 0 || v < lo || v > hi) {
        return -1;
    }
    *v_p = (int)v;
    return 0;
}

/* Parses entry i of a comma-separated option value: 0, or a ci_fail status. */
typedef int (*ci_item_fn_t)(ci_opts_t *o, int i, const char *text);

/* The entries of a comma-separated value of option opt, at most max; *n_p gets their number. */
static int ci_parse_commas(ci_opts_t *o, const char *opt, const char *list, int max,
                           ci_item_fn_t item, int *n_p)
{
    char  buf[1024];
    char *save = NULL;
    int   n    = 0, st;

    if (strlen(list) >= sizeof(buf)) {
        return ci_fail("%s '%s' is too long", opt, list);
    }
    strcpy(buf, list);
    for (char *t = strtok_r(buf, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
        if (n == max) {
            return ci_fail("%s '%s' has more than %d entries", opt, list, max);
        }
        if ((st = item(o, n, t)) != 0) {
            return st;
        }
        n++;
    }
    *n_p = n;
    return n > 0 ? 0 : ci_fail("%s '%s' names nothing", opt, list);
}

static int ci_size_item(ci_opts_t *o, int i, const char *t)
{
    if (coll_parse_size(t, &o->sizes[i]) != 0) {
        return ci_fail("--sizes: '%s' is not a size (bytes, with an optional k, m or g)", t);
    }
    return 0;
}

static int ci_ranks_item(ci_opts_t *o, int i, const char *t)
{
    if (ci_parse_int(t, 1, CI_MAX_RANKS, &o->list[i]) != 0) {
        return ci_fail("--ranks-list: '%s' is not a number of ranks in 1..%d", t, CI_MAX_RANKS);
    }
    return 0;
}

static int ci_parse_sizes(ci_opts_t *o, const char *list)
{
    return ci_parse_commas(o, "--sizes", list, CI_MAX_SIZES, ci_size_item, &o->nsizes);
}

static int ci_parse_list(ci_opts_t *o, const char *list)
{
    return ci_parse_commas(o, "--ranks-list", list, CI_MAX_SHAPES, ci_ranks_item, &o->nlist);
}

static int ci_parse_opt(ci_opts_t *o, int c, const char *arg)
{
    int v;

    switch (c) {
    case 'n':
        if (ci_parse_int(arg, 1, CI_MAX_RANKS, &o->nranks) != 0) {
            return ci_fail("-n '%s': the number of ranks must be an integer in 1..%d", arg,
                           CI_MAX_RANKS);
        }
        return 0;
    case 'H':
        if (ci_parse_int(arg, 1, CI_MAX_RANKS, &o->nhosts) != 0) {
            return ci_fail("--hosts '%s': the number of hosts must be an integer in 1..%d", arg,
                           CI_MAX_RANKS);
        }
        return 0;
    case 'R':
        if (ci_parse_int(arg, 1, CI_MAX_RANKS, &o->ranks_per_host) != 0) {
            return ci_fail("--ranks-per-host '%s': expected an integer in 1..%d", arg,
                           CI_MAX_RANKS);
        }
        return 0;
    case 'T':
        o->topo = arg;
        return 0;
    case 'L':
        return ci_parse_list(o, arg);
    case 'c':
        o->coll = ci_coll_find(arg);
        return o->coll >= 0 ? 0
                            : ci_fail("--coll: unknown collective '%s' (expected one of%s)", arg,
                                      ci_coll_names());
    case 's':
        return ci_parse_sizes(o, arg);
    case 'b':
    case 'e':
        o->sweep_set = 1;
        if (coll_parse_size(arg, c == 'b' ? &o->min : &o->max) != 0) {
            return ci_fail("'%s' is not a size (bytes, with an optional k, m or g)", arg);
        }
        return 0;
    case 'f':
        o->sweep_set = 1;
        if (ci_parse_int(arg, 2, 1 << 20, &v) != 0) {
            return ci_fail("--factor '%s': expected an integer >= 2", arg);
        }
        o->factor = (size_t)v;
        return 0;
    case 'C':
        o->csv = 1;
        return 0;
    default:
        return ci_fail("invalid option");
    }
}

/* min, min*f, min*f^2, ... up to max, and max itself when the steps do not land on it. */
static int ci_sweep(ci_opts_t *o)
{
    if (o->min == 0 || o->min > o->max) {
        return ci_fail("the sweep needs 0 < --min <= --max (got %zu and %zu)", o->min, o->max);
    }
    for (size_t s = o->min;; s *= o->factor) {
        if (o->nsizes == CI_MAX_SIZES - 1) {
            return ci_fail("the sweep has more than 63 sizes; raise --factor");
        }
        o->sizes[o->nsizes++] = s;
        if (s > o->max / o->factor) {
            break;
        }
    }
    if (o->sizes[o->nsizes - 1] != o->max) {
        o->sizes[o->nsizes++] = o->max;
    }
    return 0;
}

static int ci_parse_args(int argc, char **argv, ci_opts_t *o)
{
    int c, st;

    *o     = (ci_opts_t){.coll = -1, .min = 8, .max = (size_t)256 << 20, .factor = 4};
    optind = 1;
    while ((c = getopt_long(argc, argv, "n:H:c:s:b:e:f:h", ci_longopts, NULL)) != -1) {
        if (c == '?') {
            return 2; /* getopt printed why */
        }
        if (c == 'h') {
            collinfo_algos_usage(stdout);
            return -1;
        }
        if ((st = ci_parse_opt(o, c, optarg)) != 0) {
            return st;
        }
    }
    if (optind < argc) {
        return ci_fail("unexpected argument '%s'", argv[optind]);
    }
    if (o->nranks == 0 && o->nlist == 0 && o->topo == NULL &&
        (o->nhosts == 0 || o->ranks_per_host == 0)) {
        return ci_fail("-n NRANKS is required for the prediction table (or --topo FILE, or "
                       "--hosts with --ranks-per-host)");
    }
    if (o->nranks > 0 && o->nlist > 0) {
        return ci_fail("-n and --ranks-list exclude each other");
    }
    if (o->nsizes > 0 && o->sweep_set) {
        return ci_fail("--sizes and --min/--max/--factor exclude each other");
    }
    return o->nsizes > 0 ? 0 : ci_sweep(o);
}

/* ---- shapes: the communicators to describe ---- */

/* Ranks per host when the options or the topology say; 0 otherwise. */
static int ci_rph(const ci_ctx_t *x)
{
    if (x->o->ranks_per_host > 0) {
        return x->o->ranks_per_host;
    }
    return (x->topo != NULL) ? x->topo->ngpu : 0;
}

static int ci_shape_add(ci_ctx_t *x, long long n, int hosts)
{
    if (n > CI_MAX_RANKS) {
        return ci_fail("--hosts %d x %lld ranks per host = %lld ranks: more than the %d ranks "
                       "collinfo describes",
                       hosts, n / hosts, n, CI_MAX_RANKS);
    }
    x->shapes[x->nshapes++] = (ci_shape_t){.nranks = (int)n, .nhosts = hosts};
    return 0;
}

/* --ranks-list: hosts of rph ranks (fewer ranks: one host), else --hosts hosts. */
static int ci_shapes_list(ci_ctx_t *x, int rph)
{
    const ci_opts_t *o = x->o;

    for (int i = 0; i < o->nlist; i++) {
        int n = o->list[i], h = (o->nhosts > 0) ? o->nhosts : 1;
        if (rph > 0 && n > rph && n % rph != 0) {
            return ci_fail("--ranks-list: %d is not a multiple of the %d ranks per host", n, rph);
        }
        if (rph > 0) {
            h = (n > rph) ? n / rph : 1;
        } else if (n % h != 0) {
            return ci_fail("--hosts %d does not divide %d of --ranks-list", h, n);
        }
        if (ci_shape_add(x, n, h) != 0) {
            return 2;
        }
    }
    return 0;
}

/* The shapes from -n, --hosts, --ranks-per-host, --ranks-list and the topology's GPUs. */
static int ci_shapes(ci_ctx_t *x)
{
    const ci_opts_t *o   = x->o;
    int              rph = ci_rph(x), h = o->nhosts;

    x->nshapes = 0;
    if (o->nlist > 0) {
        return ci_shapes_list(x, rph);
    }
    if (o->nranks == 0) { /* --hosts H with ranks per host from the option or the GPUs */
        if (rph == 0) {
            return ci_fail("--topo %s has no GPU: give --ranks-per-host or -n", o->topo);
        }
        h = (h > 0) ? h : 1;
        return ci_shape_add(x, (long long)h * rph, h);
    }
    if (h == 0) {
        h = (o->ranks_per_host > 0 && o->nranks % o->ranks_per_host == 0)
                ? o->nranks / o->ranks_per_host
                : 1;
    }
    if (o->nranks % h != 0) {
        return ci_fail("--hosts %d does not divide -n %d: every host holds the same number of "
                       "ranks",
                       h, o->nranks);
    }
    if (o->ranks_per_host > 0 && o->nranks != h * o->ranks_per_host) {
        return ci_fail("-n %d is not --hosts %d x --ranks-per-host %d", o->nranks, h,
                       o->ranks_per_host);
    }
    return ci_shape_add(x, o->nranks, h);
}

/* Hosts like this one (its model, GPU local_rank mod the GPU count, else NUMA node local_rank
 * mod the node count), L ranks each: the inter-host bandwidth their NICs give, when
 * COLL_INTER_BW is unset; 1 when applied. */
static int ci_nic_bw(coll_model_t *m, int L)
{
    const coll_topo_t *t;
    coll_topo_place_t *p;
    int                applied = 0;

    if (coll_topo_host(&t) != COLL_OK || (p = calloc((size_t)L, sizeof(*p))) == NULL) {
        return 0;
    }
    for (int lr = 0; lr < L; lr++) {
        int gpu = coll_topo_pick_gpu(t, COLL_TOPO_GPU_LOCAL_RANK, 0, lr);
        coll_topo_place_of(t, 0, gpu, (gpu < 0 && t->nnuma > 0) ? lr % t->nnuma : -1, &p[lr]);
    }
    applied = coll_model_nic_bw(m, p, L);
    free(p);
    return applied;
}

/* The shared windows of one host, as the tuner sets them (tune_window): the shm transport
 * serves every peer when COLL_TRANSPORT allows it and it is usable here, and its windows are
 * the size the transport gives them (shm_win_size_param, /dev/shm of this host). A single rank
 * needs none. With --topo the buffers are GPU memory, whose windows this table leaves out. */
static void ci_window(ci_ctx_t *x)
{
    const char *want  = coll_param_str(COLL_P_TRANSPORT);
    int         autom = want == NULL || want[0] == '\0' || strcmp(want, "auto") == 0;

    x->layout.shared_window = 0;
    x->layout.window_bytes  = 0;
    if (x->nhosts != 1 || x->topo != NULL) {
        return;
    }
    if (x->nranks == 1) {
        x->layout.shared_window = 1;
        return;
    }
    for (int i = 0; i < coll_tp_registry_count(); i++) {
        const coll_transport_ops_t *t   = coll_tp_registry_get(i);
        const char                 *why = "";

        if (t == NULL || strcmp(t->name, "shm") != 0 ||
            (!autom && !coll_sock_ifname_match(want, t->name)) ||
            (t->usable != NULL && !t->usable(&why))) {
            continue;
        }
        x->layout.window_bytes  = (size_t)shm_win_size_param(1, x->nranks, "/dev/shm");
        x->layout.shared_window = x->layout.window_bytes > 0;
    }
}

/* Makes shape i current: its layout and its model (the topology's, else the parameters'). */
static int ci_shape_set(ci_ctx_t *x, int i)
{
    x->nranks = x->shapes[i].nranks;
    x->nhosts = x->shapes[i].nhosts;
    coll_layout_fini(&x->layout);
    if (coll_layout_init_blocks(&x->layout, x->nranks, x->nhosts) != COLL_OK) {
        fprintf(stderr, "collinfo algos: out of memory for %d ranks\n", x->nranks);
        return 1;
    }
    ci_window(x);
    if (x->topo == NULL) {
        coll_model_from_params(&x->model);
        x->nic_bw = x->nhosts > 1 && ci_nic_bw(&x->model, x->nranks / x->nhosts);
        /* as the tuner: ranks outnumbering this machine's CPUs on one host */
        x->model.sched_us = x->nhosts == 1 ? coll_tune_sched_us(x->nranks) : 0.0;
    } else if (coll_model_from_topo(x->topo, x->nranks / x->nhosts, &x->model, &x->tinfo) !=
               COLL_OK) {
        fprintf(stderr, "collinfo algos: out of memory for %d ranks\n", x->nranks);
        return 1;
    }
    return 0;
}

/* ---- predictions ---- */

/* Elements per call for a size in bytes, as collbench counts them: size is the vector for
 * allreduce, broadcast and reduce, the whole send buffer of reduce_scatter and alltoall and
 * the whole receive buffer of allgather, so those divide it among the ranks. */
static size_t ci_count(int coll, size_t size, int nranks)
{
    size_t n = size / coll_dtype_size(CI_DTYPE);

    if (coll == COLL_OP_BARRIER) {
        return 0;
    }
    if (coll == COLL_OP_REDUCE_SCATTER || coll == COLL_OP_ALLGATHER || coll == COLL_OP_ALLTOALL) {
        n /= (size_t)nranks;
    }
    return (n == 0 && size > 0) ? 1 : n;
}

static void ci_row(const ci_ctx_t *x, int coll, size_t size, ci_row_t *r)
{
    int         n    = x->nranks;
    coll_args_t args = {.coll  = (coll_op_t)coll,
                        .count = ci_count(coll, size, n),
                        .dtype = CI_DTYPE,
                        .op    = COLL_SUM,
                        .root  = (coll == COLL_OP_BROADCAST || coll == COLL_OP_REDUCE) ? 0 : -1,
                        .chunk_bytes = x->chunk,
                        .layout      = &x->layout};
    double      cost;

    r->size  = size;
    r->count = args.count;
    for (int i = 0; i < x->ncols; i++) {
        r->ok[i] = coll_algo_applies(x->cols[i], n, &args);
        r->us[i] = r->ok[i] ? x->cols[i]->cost_us(n, &args, &x->model) : 0.0;
    }
    r->choice    = coll_algo_select(n, &args, x->override, &x->model, &cost);
    r->forced    = r->choice != NULL && cost < 0;
    r->choice_us = r->forced ? r->choice->cost_us(n, &args, &x->model) : cost;
}

/* The algorithm columns: every algorithm implementing one of the collectives in mask. */
static void ci_columns(ci_ctx_t *x, uint32_t mask)
{
    x->ncols    = 0;
    x->choice_w = 6;
    for (int i = 0; i < coll_algo_registry_count() && x->ncols < CI_MAX_ALGOS; i++) {
        const coll_algo_t *a = coll_algo_registry_get(i);
        /* room for "(forced)" when COLL_ALGO may force a choice */
        int w = (int)strlen(a->name) + (coll_param_is_set(COLL_P_ALGO) ? 8 : 0);

        if ((a->colls & mask) != 0) {
            x->cols[x->ncols++] = a;
            x->choice_w         = w > x->choice_w ? w : x->choice_w;
        }
    }
}

static int ci_col_width(const coll_algo_t *a)
{
    int w = (int)strlen(a->name) + (a->forced_only ? 1 : 0);

    return w < 10 ? 10 : w;
}

/* ---- output ---- */

static void ci_text_time(int ok, double us, int width)
{
    if (ok) {
        printf(" %*.2f", width, us);
    } else {
        printf(" %*s", width, "-");
    }
}

/* "float32 sum, root 0" and the like: what every row of collective coll computes. */
static void ci_text_call(int coll)
{
    if (coll != COLL_OP_BARRIER) {
        printf("; %s", coll_dtype_name(CI_DTYPE));
    }
    if (coll == COLL_OP_ALLREDUCE || coll == COLL_OP_REDUCE_SCATTER || coll == COLL_OP_REDUCE) {
        printf(" %s", coll_redop_name(COLL_SUM));
    }
    if (coll == COLL_OP_BROADCAST || coll == COLL_OP_REDUCE) {
        printf(", root 0");
    }
}

static void ci_text_rows(ci_ctx_t *x, int coll)
{
    const ci_opts_t *o = x->o;
    ci_row_t         r;
    char             name[80];

    for (int s = 0; s < (coll == COLL_OP_BARRIER ? 1 : o->nsizes); s++) {
        ci_row(x, coll, coll == COLL_OP_BARRIER ? 0 : o->sizes[s], &r);
        snprintf(name, sizeof(name), "%s%s", r.choice != NULL ? r.choice->name : "-",
                 r.forced ? "(forced)" : "");
        if (o->nlist > 0) {
            printf("%7d %6d ", x->nranks, x->nhosts);
        }
        printf("%12zu %11zu  %-*s", r.size, r.count, x->choice_w, name);
        ci_text_time(r.choice != NULL, r.choice_us, 11);
        for (int i = 0; i < x->ncols; i++) {
            ci_text_time(r.ok[i], r.us[i], ci_col_width(x->cols[i]));
        }
        printf("\n");
    }
}

/* One table: a row per size, and with --ranks-list a group of rows per communicator size. */
static int ci_text_table(ci_ctx_t *x, int coll)
{
    const ci_opts_t *o = x->o;
    char             name[80];

    ci_columns(x, 1u << coll);
    if (o->nlist > 0) {
        printf("# %s: %d to %d ranks", coll_op_name((coll_op_t)coll), x->shapes[0].nranks,
               x->shapes[x->nshapes - 1].nranks);
    } else {
        printf("# %s: %d ranks = %d host(s) x %d", coll_op_name((coll_op_t)coll), x->nranks,
               x->nhosts, x->nranks / x->nhosts);
    }
    ci_text_call(coll);
    printf("; chunk %zu B; predicted times in us\n", x->chunk);
    printf("#%s%11s %11s  %-*s %11s", o->nlist > 0 ? "  ranks  hosts " : "", "size", "count",
           x->choice_w, "choice", "time");
    for (int i = 0; i < x->ncols; i++) {
        snprintf(name, sizeof(name), "%s%s", x->cols[i]->name, x->cols[i]->forced_only ? "*" : "");
        printf(" %*s", ci_col_width(x->cols[i]), name);
    }
    printf("\n");
    for (int k = 0; k < x->nshapes; k++) {
        if (o->nlist > 0 && ci_shape_set(x, k) != 0) {
            return 1;
        }
        ci_text_rows(x, coll);
    }
    return 0;
}

static void ci_csv_time(int ok, double us)
{
    if (ok) {
        printf("%.2f", us);
    }
}

static void ci_csv_rows(ci_ctx_t *x, int c)
{
    const ci_opts_t *o = x->o;
    ci_row_t         r;

    for (int s = 0; s < (c == COLL_OP_BARRIER ? 1 : o->nsizes); s++) {
        ci_row(x, c, c == COLL_OP_BARRIER ? 0 : o->sizes[s], &r);
        printf("%s,%d,%d,%zu,%zu,%s,%d,", coll_op_name((coll_op_t)c), x->nranks, x->nhosts, r.size,
               r.count, r.choice != NULL ? r.choice->name : "", r.forced);
        ci_csv_time(r.choice != NULL, r.choice_us);
        for (int i = 0; i < x->ncols; i++) {
            printf(",");
            ci_csv_time(r.ok[i], r.us[i]);
        }
        printf("\n");
    }
}

static int ci_csv(ci_ctx_t *x)
{
    const ci_opts_t *o    = x->o;
    uint32_t         mask = 0;

    for (int c = 0; c <= COLL_OP_BARRIER; c++) {
        mask |= (o->coll < 0 || o->coll == c) ? 1u << c : 0;
    }
    ci_columns(x, mask);
    printf("coll,nranks,nhosts,size,count,choice,forced,time_us");
    for (int i = 0; i < x->ncols; i++) {
        printf(",%s%s", x->cols[i]->name, x->cols[i]->forced_only ? "*" : "");
    }
    printf("\n");
    for (int c = 0; c <= COLL_OP_BARRIER; c++) {
        for (int k = 0; (mask & (1u << c)) != 0 && k < x->nshapes; k++) {
            if (ci_shape_set(x, k) != 0) {
                return 1;
            }
            ci_csv_rows(x, c);
        }
    }
    return 0;
}

/* The hosts the topology describes and what the model took from them. */
static void ci_text_topo(const ci_ctx_t *x)
{
    const coll_tune_topo_t *ti = &x->tinfo;

    printf("# topology: %s: %d GPU(s), %d NIC(s); %d rank(s) per host", x->o->topo, x->topo->ngpu,
           x->topo->nnic, ti->ranks_per_host);
    if (ti->gpus > 0) {
        printf(" on %d GPU(s)", ti->gpus);
    }
    printf("\n# host ring: worst hop %s, %d crossing(s) between packages; ",
           ti->gpus > 1 ? coll_topo_link_name(ti->intra_link) : "shm", ti->ring_packages);
    if (ti->nics > 0) {
        printf("%d NIC(s) in use", ti->nics);
        if (ti->nic_mbps > 0) {
            printf(", %g Gb/s", ti->nic_mbps / 1000.0);
        } else {
            printf(", speed unknown");
        }
        printf(ti->rdma ? ", RDMA\n" : ", no RDMA\n");
    } else {
        printf("no NIC: COLL_INTER_* defaults\n");
    }
}

static int ci_text(ci_ctx_t *x)
{
    char model[160];
    int  any_forced_only = 0;

    if (x->topo != NULL) {
        ci_text_topo(x);
    }
    coll_model_format(&x->model, model, sizeof(model));
    printf("# model: %s\n", model);
    if (x->nic_bw) {
        printf("# inter-host bandwidth from this host's NIC link speeds (COLL_INTER_BW unset)\n");
    }
    for (int i = 0; i < coll_algo_registry_count(); i++) {
        any_forced_only |= coll_algo_registry_get(i)->forced_only;
    }
    printf("# %s- = cannot run the call\n",
           any_forced_only ? "* = forced-only: the tuner skips it, COLL_ALGO selects it; " : "");
    if (coll_param_is_set(COLL_P_ALGO)) {
        printf("# COLL_ALGO=%s: the choices it makes are marked (forced)\n", x->override);
    }
    for (int c = 0; c <= COLL_OP_BARRIER; c++) {
        if (x->o->coll < 0 || x->o->coll == c) {
            printf("\n");
            if (ci_text_table(x, c) != 0) {
                return 1;
            }
        }
    }
    return 0;
}

/* --topo: the file as the library reads it; a failure says why, naming the option. */
static int ci_load_topo(ci_ctx_t *x)
{
    coll_result_t st;
    const char   *why;

    if (x->o->topo == NULL) {
        return 0;
    }
    st = coll_topo_load_xml(x->o->topo, &x->topo);
    if (st != COLL_OK) {
        why = coll_last_error();
        fprintf(stderr, "collinfo algos: --topo %s: %s\n", x->o->topo,
                why[0] != '\0' ? why : coll_strerror(st));
        return 1;
    }
    return 0;
}

int collinfo_algos_main(int argc, char **argv)
{
    ci_opts_t o;
    ci_ctx_t  x  = {.o = &o};
    int       st = ci_parse_args(argc, argv, &o);

    if (st != 0) {
        return st < 0 ? 0 : st;
    }
    if ((st = ci_load_topo(&x)) != 0 || (st = ci_shapes(&x)) != 0) {
        coll_topo_free(x.topo);
        return st;
    }
    x.override = coll_param_str(COLL_P_ALGO);
    x.chunk    = coll_tune_chunk_bytes();
    /* the model of the last shape (the largest, in a rising list) heads the text */
    st = ci_shape_set(&x, x.nshapes - 1);
    if (st == 0) {
        st = o.csv ? ci_csv(&x) : ci_text(&x);
    }
    coll_layout_fini(&x.layout);
    coll_topo_free(x.topo);
    return st;
}
