/* SPDX-License-Identifier: MIT */
/*
 * The correctness matrix of one collective (chosen at build time by MP_COLL): every algorithm
 * the library registers for it (coll_algo_get) and the automatic choice, over every transport in
 * COLL_TEST_TRANSPORTS with 1..8 ranks, then on emulated hosts of 3+3 and 4+3 ranks. Each run
 * forks the ranks once and checks every output element exactly, and that nothing past the
 * output was written: at 6 and 7 ranks and on emulated hosts a reduced set of cases (every op in
 * fp32 at odd sizes no rank count divides), elsewhere every dtype x op x size {0, 1, 7, chunk+3,
 * several chunks+odd} x {out of place, in place}. What ran is read from the library's info log;
 * the test fails when a registered algorithm never ran, or ran at 5 ranks but not at 6 and 7.
 * Usage: test_<coll> [-n NRANKS] [-t TRANSPORT] (either one: no coverage check)
 */
#include "coll_test.h"
#include "mp_data.h"

#include <dirent.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define GUARD 64

enum { MP_ALLREDUCE, MP_REDUCE_SCATTER, MP_ALLGATHER, MP_BROADCAST, MP_REDUCE, MP_ALLTOALL };
#ifndef MP_COLL
#define MP_COLL MP_ALLREDUCE
#endif

typedef struct {
    int    rank, root;
    size_t count;
} mp_ctx_t;

static int mp_is_reduction(void)
{
    return MP_COLL == MP_ALLREDUCE || MP_COLL == MP_REDUCE_SCATTER || MP_COLL == MP_REDUCE;
}

static double a2a_value(int from, int to, size_t j)
{
    return (double)(((size_t)from * 7 + (size_t)to * 3 + j) % 100 + 1);
}

/* expected element idx of this rank's output */
static double mp_expect_out(coll_dtype_t dt, coll_redop_t op, int n, size_t idx, void *vctx)
{
    mp_ctx_t *c = vctx;
    uint64_t  tmp[1];
    double    v;
    switch (MP_COLL) {
    case MP_REDUCE_SCATTER:
        return mp_expect(dt, op, n, (size_t)c->rank * c->count + idx);
    case MP_ALLGATHER:
        v = mp_input(COLL_SUM, (int)(idx / (c->count ? c->count : 1)),
                     idx % (c->count ? c->count : 1));
        break;
    case MP_BROADCAST:
        v = mp_input(COLL_SUM, c->root, idx);
        break;
    case MP_ALLTOALL:
        v = a2a_value((int)(idx / c->count), c->rank, idx % c->count);
        break;
    default:
        return mp_expect(dt, op, n, idx);
    }
    mp_store(dt, tmp, 0, v);
    return mp_load(dt, tmp, 0);
}

/* sizes in elements of this rank's input and output buffers */
static void mp_sizes(size_t count, int n, size_t *in, size_t *out)
{
    switch (MP_COLL) {
    case MP_REDUCE_SCATTER:
        *in  = count * (size_t)n;
        *out = count;
        break;
    case MP_ALLGATHER:
        *in  = count;
        *out = count * (size_t)n;
        break;
    case MP_ALLTOALL:
        *in = *out = count * (size_t)n;
        break;
    default:
        *in = *out = count;
    }
}

static void mp_fill_input(coll_dtype_t dt, coll_redop_t op, char *in, size_t count, int rank, int n)
{
    size_t esz = coll_dtype_size(dt);
    if (MP_COLL == MP_ALLTOALL) {
        for (int p = 0; p < n; p++) {
            for (size_t j = 0; j < count; j++) {
                mp_store(dt, in, (size_t)p * count + j, a2a_value(rank, p, j));
            }
        }
    } else if (MP_COLL == MP_ALLGATHER || MP_COLL == MP_BROADCAST) {
        mp_fill(dt, COLL_SUM, in, count, rank, 0);
    } else {
        size_t in_n, out_n;
        mp_sizes(count, n, &in_n, &out_n);
        mp_fill(dt, op, in, in_n, rank, 0);
    }
    (void)esz;
}

static coll_result_t mp_call(coll_comm_t *comm, const void *s, void *r, size_t count,
                             coll_dtype_t dt, coll_redop_t op, int root)
{
    switch (MP_COLL) {
    case MP_REDUCE_SCATTER:
        return coll_reduce_scatter(s, r, count, dt, op, comm);
    case MP_ALLGATHER:
        return coll_allgather(s, r, count, dt, comm);
    case MP_BROADCAST:
        return coll_broadcast(s, r, count, dt, root, comm);
    case MP_REDUCE:
        return coll_reduce(s, r, count, dt, op, root, comm);
    case MP_ALLTOALL:
        return coll_alltoall(s, r, count, dt, comm);
    default:
        return coll_allreduce(s, r, count, dt, op, comm);
    }
}

/* One call; returns the number of wrong elements (or 1 on a call error). */
static size_t mp_case(coll_comm_t *comm, int rank, int n, coll_dtype_t dt, coll_redop_t op,
                      size_t count, int in_place, int root)
{
    size_t esz = coll_dtype_size(dt), in_n, out_n, wrong = 0;
    mp_sizes(count, n, &in_n, &out_n);
    size_t big  = (in_n > out_n ? in_n : out_n) * esz;
    char  *sbuf = malloc(big + GUARD), *rbuf = malloc(big + GUARD);
    char  *send = sbuf, *recv = rbuf, *out;
    memset(sbuf, 0x5a, big + GUARD);
    memset(rbuf, 0xa5, big + GUARD);
    mp_ctx_t ctx = {rank, root, count};
    if (!in_place) {
        mp_fill_input(dt, op, send, count, rank, n);
        out = recv;
    } else if (MP_COLL == MP_REDUCE_SCATTER) {
        mp_fill_input(dt, op, sbuf, count, rank, n);
        send = sbuf;
        recv = sbuf + (size_t)rank * count * esz;
        out  = recv;
    } else if (MP_COLL == MP_ALLGATHER) {
        mp_fill(dt, COLL_SUM, rbuf + (size_t)rank * count * esz, count, rank, 0);
        send = rbuf + (size_t)rank * count * esz;
        recv = rbuf;
        out  = recv;
    } else {
        mp_fill_input(dt, op, rbuf, count, rank, n);
        send = recv = rbuf;
        out         = rbuf;
    }
    coll_result_t st = mp_call(comm, send, recv, count, dt, op, root);
    if (st != COLL_OK) {
        fprintf(stderr, "rank %d: call failed: %s: %s\n", rank, coll_strerror(st),
                coll_comm_last_error(comm));
        exit(5);
    }
    int significant = !(MP_COLL == MP_REDUCE && rank != root);
    if (significant) {
        char what[128];
        snprintf(what, sizeof(what), "n=%d count=%zu %s root=%d", n, count,
                 in_place ? "in-place" : "out-of-place", root);
        wrong += mp_check(dt, out, out_n, what, rank, mp_expect_out, op, n, 0, &ctx);
        /* nothing written past the output (guard of the buffer holding it) */
        const char *end =
            (in_place && MP_COLL == MP_REDUCE_SCATTER) ? sbuf + big : out + out_n * esz;
        const char   *gbase = (in_place && MP_COLL == MP_REDUCE_SCATTER) ? sbuf : rbuf;
        unsigned char gval  = gbase == sbuf ? 0x5a : 0xa5;
        for (int g = 0; g < GUARD; g++) {
            if ((unsigned char)end[g] != gval) {
                fprintf(stderr, "rank %d: %s: byte %d past the output was written\n", rank, what,
                        g);
                wrong++;
                break;
            }
        }
    }
    free(sbuf);
    free(rbuf);
    return wrong;
}

/* Which cases a run checks: the full matrix, or (reduced) every op in fp32 at sizes 0, 7, chunk+3
 * and 3 chunks+11 (odd, and no rank count from 3 to 8 divides the last two), plus sum in a 2-byte
 * and an 8-byte type at 0, 7 and 3 chunks+11, both in and out of place. */
typedef struct {
    int reduced;
} mp_plan_t;

static int mp_plan_has(const mp_plan_t *p, int dt, int op, size_t s)
{
    if (!p->reduced) {
        return 1;
    }
    if (s == 1) {
        return 0;
    }
    if (dt == COLL_FLOAT32) {
        return 1;
    }
    return (dt == COLL_FLOAT16 || dt == COLL_INT64) && op == COLL_SUM && s != 3;
}

static int mp_rank_main(int rank, int n, coll_comm_t *comm, void *arg)
{
    const mp_plan_t *plan  = arg;
    size_t           chunk = 4096;
    const char      *cs    = getenv("COLL_CHUNK_SIZE");
    if (cs != NULL && atol(cs) > 0) {
        chunk = (size_t)atol(cs) * (strchr(cs, 'k') ? 1024 : 1);
    }
    size_t wrong = 0, cases = 0;
    int    nops = mp_is_reduction() ? COLL_REDOP_COUNT : 1;
    for (int dt = 0; dt < COLL_DTYPE_COUNT; dt++) {
        size_t ce      = chunk / coll_dtype_size((coll_dtype_t)dt);
        size_t sizes[] = {0, 1, 7, ce + 3, 3 * ce + 11};
        for (int op = 0; op < nops; op++) {
            for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
                if (!mp_plan_has(plan, dt, op, s)) {
                    continue;
                }
                for (int ip = 0; ip < (MP_COLL == MP_ALLTOALL ? 1 : 2); ip++) {
                    int root = (int)((cases + (size_t)dt) % (size_t)n);
                    wrong += mp_case(comm, rank, n, (coll_dtype_t)dt, (coll_redop_t)op, sizes[s],
                                     ip, root);
                    cases++;
                }
            }
        }
    }
    if (wrong != 0) {
        fprintf(stderr, "rank %d: %zu wrong elements over %zu cases\n", rank, wrong, cases);
        return 1;
    }
    if (rank == 0) {
        printf("  %d ranks: %zu cases ok\n", n, cases);
    }
    return 0;
}

/* ---- the matrix: algorithms from the library's registry x layouts x rank counts ---- */

#define MP_MAX_ALGOS   32
#define MP_MAX_LAYOUTS 9
#define MP_MAX_N       8

static const char *const mp_coll_names[] = {"allreduce", "reduce_scatter", "allgather",
                                            "broadcast", "reduce",         "alltoall"};

/* One way of placing the ranks: one host over one transport, or emulated hosts of ceil(n/2)
 * ranks (4 ranks: 2+2, 6: 3+3, 7: 4+3) with shm inside a host and tcp between hosts. */
typedef struct {
    const char *transport;
    int         hosts;
} mp_layout_t;

typedef struct {
    int           nalgos;
    const char   *algos[MP_MAX_ALGOS]; /* [0] is NULL: the automatic choice */
    mp_layout_t   layouts[MP_MAX_LAYOUTS];
    int           nlayouts;
    unsigned char ran[MP_MAX_ALGOS][MP_MAX_LAYOUTS][MP_MAX_N + 1];
    unsigned char fell_back[MP_MAX_ALGOS][MP_MAX_LAYOUTS];
} mp_matrix_t;

/* Is name one of the entries of the comma-separated list? */
static int mp_list_has(const char *list, const char *name)
{
    size_t len = strlen(name);
    for (const char *p = list; p != NULL && *p != '\0';) {
        const char *end = strchr(p, ',');
        size_t      n   = end != NULL ? (size_t)(end - p) : strlen(p);
        if (n == len && strncmp(p, name, len) == 0) {
            return 1;
        }
        p = end != NULL ? end + 1 : NULL;
    }
    return 0;
}

/* Every algorithm the library registers for this collective, so a new one is tested at once. */
static int mp_algos_load(mp_matrix_t *m)
{
    m->algos[0] = NULL;
    m->nalgos   = 1;
    for (int i = 0; i < coll_algo_count(); i++) {
        coll_algo_info_t info;
        if (coll_algo_get(i, &info) != COLL_OK) {
            fprintf(stderr, "coll_algo_get(%d) failed: %s\n", i, coll_last_error());
            return -1;
        }
        if (!mp_list_has(info.colls, mp_coll_names[MP_COLL])) {
            continue;
        }
        if (m->nalgos == MP_MAX_ALGOS) {
            fprintf(stderr, "more than %d algorithms: raise MP_MAX_ALGOS\n", MP_MAX_ALGOS - 1);
            return -1;
        }
        m->algos[m->nalgos++] = info.name;
    }
    return m->nalgos > 1 ? 0 : -1;
}

static int mp_algo_index(const mp_matrix_t *m, const char *name, size_t len)
{
    for (int a = 1; a < m->nalgos; a++) {
        if (strlen(m->algos[a]) == len && strncmp(m->algos[a], name, len) == 0) {
            return a;
        }
    }
    return -1;
}

/* The most host crossings any rank logged in "the ring crosses hosts N time(s)" (the communicator's
 * INFO line), -1 before any: with interleaved emulated hosts the ring must still cross only as
 * many times as there are hosts. */
static int mp_ring_hosts = -1;

/* Read one run's logs (COLL_DEBUG=info): the engine logs every algorithm it builds this
 * collective with, once per communicator, as "rank R: <coll> of B bytes (<dtype>): <algo>, ...".
 * Marks what ran in ran_p[algo], appends the names to what, prints warnings and errors. */
static void mp_logs_read(const mp_matrix_t *m, const char *dir, unsigned char *ran_p, char *what,
                         size_t what_len, int show_all)
{
    char key[64], line[1024];
    snprintf(key, sizeof(key), ": %s of ", mp_coll_names[MP_COLL]);
    DIR *d = opendir(dir);
    if (d == NULL) {
        return;
    }
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        char path[PATH_MAX + 264];
        if (e->d_name[0] == '.') {
            continue;
        }
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "r");
        while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
            const char *k = strstr(line, key), *name = k != NULL ? strstr(k, "): ") : NULL;
            const char *rc = strstr(line, "the ring crosses hosts ");
            if (rc != NULL) {
                int c         = atoi(rc + strlen("the ring crosses hosts "));
                mp_ring_hosts = (mp_ring_hosts < 0 || c > mp_ring_hosts) ? c : mp_ring_hosts;
            }
            if (show_all || strstr(line, " WARN ") != NULL || strstr(line, " ERROR ") != NULL) {
                fputs(line, stderr);
            }
            if (strstr(line, " ALGO ") == NULL || name == NULL) {
                continue;
            }
            name += 3;
            int a = mp_algo_index(m, name, strcspn(name, ", \n"));
            if (a > 0 && !ran_p[a]) {
                ran_p[a]    = 1;
                size_t used = strlen(what);
                snprintf(what + used, what_len - used, "%s%s", used ? "," : "", m->algos[a]);
            }
        }
        if (f != NULL) {
            fclose(f);
        }
        unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

/* One run: the ranks of layout l, algorithm a forced (0: automatic), what ran recorded. */
static int mp_run(mp_matrix_t *m, int a, int l, int n, int keep_rph)
{
    const mp_layout_t *lay  = &m->layouts[l];
    mp_plan_t          plan = {.reduced = n == 6 || n == 7 || lay->hosts};
    const char        *tmp  = getenv("TMPDIR");
    char               dir[PATH_MAX], file[PATH_MAX + 16], spec[128], what[512] = "";
    unsigned char      ran[MP_MAX_ALGOS] = {0};

    snprintf(dir, sizeof(dir), "%s/collalgo.XXXXXX", tmp != NULL ? tmp : "/tmp");
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return -1;
    }
    snprintf(file, sizeof(file), "%s/log.%%p", dir);
    setenv("COLL_DEBUG_FILE", file, 1);
    if (a > 0) {
        snprintf(spec, sizeof(spec), "%s:%s", mp_coll_names[MP_COLL], m->algos[a]);
        setenv("COLL_ALGO", spec, 1);
    } else {
        unsetenv("COLL_ALGO");
    }
    if (lay->hosts) {
        snprintf(spec, sizeof(spec), "%d", (n + 1) / 2);
        setenv("COLL_TEST_RANKS_PER_HOST", spec, 1);
    } else if (!keep_rph) {
        unsetenv("COLL_TEST_RANKS_PER_HOST");
    }
    /* shm, 4 ranks: a window smaller than the larger sizes, whose all-reduces fall back; odd
     * rank counts send every message single-copy (RTS/FIN, process_vm_readv), even ones only
     * those of at least the default COLL_SHM_CMA_MIN, so both paths carry the whole matrix */
    if (strcmp(lay->transport, "shm") == 0) {
        setenv("COLL_SHM_WINDOW_SIZE", n == 4 ? "4k" : "1m", 1);
        if (n % 2 == 1) {
            setenv("COLL_SHM_CMA_MIN", "1", 1);
        } else {
            unsetenv("COLL_SHM_CMA_MIN");
        }
    }
    /* ib: likewise, odd rank counts send every message by rendezvous (RTS, RDMA READ straight
     * into the receive buffer or through the bounce buffer when it reduces, FIN), even ones
     * only those of at least the default COLL_IB_RNDV_MIN */
    if (strcmp(lay->transport, "ib") == 0) {
        if (n % 2 == 1) {
            setenv("COLL_IB_RNDV_MIN", "1", 1);
        } else {
            unsetenv("COLL_IB_RNDV_MIN");
        }
    }
    coll_test_opts_t o = {
        .nranks = n, .want_comm = 1, .timeout_s = 300, .transport = lay->transport};
    const char *aname = a > 0 ? m->algos[a] : "auto";
    const char *where = lay->hosts ? "hosts" : lay->transport;
    printf("%s over %s, algorithm %s:\n", mp_coll_names[MP_COLL], where, aname);
    fflush(stdout);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = coll_test_run_ranks(&o, mp_rank_main, &plan);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    fflush(stderr);
    mp_ring_hosts = -1;
    mp_logs_read(m, dir, ran, what, sizeof(what), 0);
    const char *ilv = getenv("COLL_TEST_INTERLEAVE_HOSTS");
    if (ilv != NULL && atoi(ilv) > 1 && n > 1 && rc == 0) {
        int want = atoi(ilv) < n ? atoi(ilv) : n;
        if (mp_ring_hosts != want) {
            fprintf(stderr, "ring over %d interleaved hosts: crosses hosts %d time(s), want %d\n",
                    want, mp_ring_hosts, want);
            rc = 1;
        }
    }
    for (int i = 1; i < m->nalgos; i++) {
        m->ran[i][l][n] |= ran[i];
    }
    /* forced but not run: it does not apply to this layout (mp_wanted) */
    if (a > 0 && n >= 2 && !ran[a]) {
        m->fell_back[a][l] = 1;
    }
    printf("%s: %s, %d ranks%s, %s: %s (ran: %s; %.2f s)\n", rc ? "FAIL" : "PASS", where, n,
           plan.reduced ? " (reduced)" : "", aname, rc ? "failed" : "ok", what,
           (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9);
    return rc != 0;
}

/* Every registered algorithm ran somewhere; one that ran at 5 ranks on a layout also ran at 6
 * and 7 there (a silent fallback at those counts fails). */
static int mp_coverage_check(const mp_matrix_t *m)
{
    int bad = 0;
    for (int a = 1; a < m->nalgos; a++) {
        int any = 0;
        printf("coverage: %s %s ran on", mp_coll_names[MP_COLL], m->algos[a]);
        for (int l = 0; l < m->nlayouts; l++) {
            printf(" %s:", m->layouts[l].hosts ? "hosts" : m->layouts[l].transport);
            for (int n = 1; n <= MP_MAX_N; n++) {
                if (m->ran[a][l][n]) {
                    printf("%d", n);
                    any = 1;
                }
            }
            if (m->ran[a][l][5] && (!m->ran[a][l][6] || !m->ran[a][l][7])) {
                printf("\nFAIL: %s %s ran at 5 ranks over %s but not at 6 and 7\n",
                       mp_coll_names[MP_COLL], m->algos[a], m->layouts[l].transport);
                bad++;
            }
        }
        printf("\n");
        if (!any) {
            printf("FAIL: %s %s is registered but never ran in the matrix\n",
                   mp_coll_names[MP_COLL], m->algos[a]);
            bad++;
        }
    }
    return bad;
}

/* Does run (algorithm a, layout l, n ranks) belong to the matrix? A forced algorithm that fell
 * back on a layout is not tried again there (the automatic runs cover the fallback). Emulated
 * hosts (3+3 and 4+3 ranks) run the automatic choice and the algorithms that ran nowhere on
 * one host (those that need several); test_multihost.sh and test_netns.sh run the rest. */
static int mp_wanted(const mp_matrix_t *m, int a, int l, int n, int only_n)
{
    if ((only_n > 0 && n != only_n) || m->fell_back[a][l]) {
        return 0;
    }
    if (!m->layouts[l].hosts) {
        return 1;
    }
    if (n != 6 && n != 7) {
        return 0;
    }
    for (int k = 0; k < l && a > 0; k++) {
        for (int c = 1; c <= MP_MAX_N; c++) {
            if (m->ran[a][k][c]) {
                return 0;
            }
        }
    }
    return 1;
}

int main(int argc, char **argv)
{
    static mp_matrix_t m;
    int                only_n = 0, opt, failed = 0, total = 0;
    const char        *only_t = NULL, *tps[8];
    while ((opt = getopt(argc, argv, "n:t:")) != -1) {
        if (opt == 'n') {
            only_n = atoi(optarg);
        } else if (opt == 't') {
            only_t = optarg;
        } else {
            fprintf(stderr, "usage: %s [-n nranks] [-t transport]\n", argv[0]);
            return COLL_TEST_HARD;
        }
    }
    if (mp_algos_load(&m) != 0) {
        fprintf(stderr, "no algorithm of %s is registered\n", mp_coll_names[MP_COLL]);
        return 1;
    }
    int ntp = only_t != NULL ? 1 : coll_test_transports(tps, 8);
    if (only_t != NULL) {
        tps[0] = only_t;
    }
    /* The whole matrix (and its coverage check) unless one count, transport or an emulated
     * host size (test_multihost.sh) is asked for. */
    int keep_rph =
        getenv("COLL_TEST_RANKS_PER_HOST") != NULL || getenv("COLL_TEST_INTERLEAVE_HOSTS") != NULL;
    int full = only_n == 0 && only_t == NULL && !keep_rph;
    for (int t = 0; t < ntp && t < MP_MAX_LAYOUTS - 1; t++) {
        m.layouts[m.nlayouts++] = (mp_layout_t){.transport = tps[t], .hosts = 0};
    }
    if (full) {
        m.layouts[m.nlayouts++] = (mp_layout_t){.transport = "auto", .hosts = 1};
    }
    /* the algorithm logs its choices at info level; keep a more verbose level if asked for */
    const char *dbg = getenv("COLL_DEBUG");
    if (dbg == NULL || (strcasecmp(dbg, "debug") != 0 && strcasecmp(dbg, "trace") != 0)) {
        setenv("COLL_DEBUG", "info", 1);
    }
    /* layouts outer, so the emulated hosts (last) know what already ran on one host */
    for (int l = 0; l < m.nlayouts; l++) {
        for (int a = 0; a < m.nalgos; a++) {
            for (int n = 1; n <= MP_MAX_N; n++) {
                if (!mp_wanted(&m, a, l, n, only_n)) {
                    continue;
                }
                int rc = mp_run(&m, a, l, n, keep_rph);
                if (rc < 0) {
                    return COLL_TEST_HARD;
                }
                failed += rc;
                total++;
            }
        }
    }
    printf("%d passed, %d failed\n", total - failed, failed);
    if (full) {
        failed += mp_coverage_check(&m);
    }
    return failed ? 1 : 0;
}
