/* SPDX-License-Identifier: MIT */
/*
 * The tuner's inputs for a new communicator: its layout from the peers' host identities, and
 * its cost model from the COLL_INTRA_* / COLL_INTER_* / COLL_REDUCE_BW parameters or, for a
 * link whose parameters are not set, from ping-pong measurements between one pair of ranks of
 * the first host (intra) and between the first two hosts (inter), the fastest of several round
 * trips: a round trip disturbed by a process start or a page fault only ever looks slower,
 * never faster. Every rank gathers the measurements, so every rank holds the same model and
 * makes the same choices.
 * Also whether the ranks can share memory windows (tune_window).
 */
#include "api/tune.h"
#include "api/comm.h"
#include "topo/nic.h"
#include "error.h"
#include "log.h"
#include "param.h"
#include "reduce/reduce.h"
#include "util.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TUNE_SMALL_REPS  32
#define TUNE_LARGE_REPS  6
#define TUNE_LARGE       ((size_t)1 << 20)
#define TUNE_REDUCE      ((size_t)1 << 18) /* bytes per operand of the reduction measurement */
#define TUNE_REDUCE_REPS 8

/* What one rank measured; < 0: not measured by this rank. */
typedef struct tune_sample {
    double lat_us[2]; /* [0] intra, [1] inter */
    double beta[2];   /* us per byte */
    double gamma;     /* us per byte reduced */
} tune_sample_t;

/* A latency the model can use (finite, 0 to 1 s), else the default kept, with a warning. */
static void model_lat(coll_param_id_t id, double *alpha_us)
{
    static atomic_int warned[COLL_P_COUNT];
    double            t = coll_param_time(id);
    if (isfinite(t) && t >= 0.0 && t <= 1.0) {
        *alpha_us = t * 1e6;
    } else if (atomic_exchange(&warned[id], 1) == 0) {
        coll_warn(ALGO, "%s: %g s is no latency the tuner can use (0 to 1 s): using %g us",
                  coll_param_name(id), t, *alpha_us);
    }
}

/* A bandwidth the model can use (not 0), else the default kept, with a warning. */
static void model_bw(coll_param_id_t id, double *beta_us_per_byte)
{
    static atomic_int warned[COLL_P_COUNT];
    size_t            bw = coll_param_size(id);
    if (bw > 0) {
        *beta_us_per_byte = 1e6 / (double)bw;
    } else if (atomic_exchange(&warned[id], 1) == 0) {
        coll_warn(ALGO, "%s: 0 bytes per second is no bandwidth: using %.3g GB/s",
                  coll_param_name(id), 1e-3 / *beta_us_per_byte);
    }
}

void coll_model_from_params(coll_model_t *m)
{
    coll_model_default(m);
    model_lat(COLL_P_INTRA_LAT, &m->intra.alpha_us);
    model_bw(COLL_P_INTRA_BW, &m->intra.beta_us_per_byte);
    model_lat(COLL_P_INTER_LAT, &m->inter.alpha_us);
    model_bw(COLL_P_INTER_BW, &m->inter.beta_us_per_byte);
    model_bw(COLL_P_REDUCE_BW, &m->gamma_us_per_byte);
}

int coll_model_nic_bw(coll_model_t *m, const coll_topo_place_t *places, int n)
{
    double bw;

    if (coll_param_is_set(COLL_P_INTER_BW)) {
        return 0;
    }
    bw = coll_topo_inter_bw(places, n);
    if (bw <= 0.0) {
        return 0;
    }
    m->inter.beta_us_per_byte = 1e6 / bw;
    return 1;
}

/* The algorithms' chunk: 64 bytes to 1 GiB, so that offsets plus a chunk never wrap. */
size_t coll_tune_chunk_bytes(void)
{
    static atomic_int warned;
    size_t            chunk = coll_param_size(COLL_P_CHUNK_SIZE);

    if (chunk > COLL_TUNE_CHUNK_MAX) {
        if (atomic_exchange(&warned, 1) == 0) {
            coll_warn(ALGO, "COLL_CHUNK_SIZE %zu is over 1 GiB: using 1 GiB", chunk);
        }
        return COLL_TUNE_CHUNK_MAX;
    }
    return (chunk < 64) ? 64 : chunk;
}

/* The fastest of n round trips. A round trip is only ever made slower by what else runs (a
 * rank descheduled on an oversubscribed host, a page fault, a timer), never faster, so the
 * minimum estimates the link itself; a median still caught 1 ms "latencies" between two ranks of
 * a host when four ranks shared two cores. */
static double tune_min(const double *v, int n)
{
    double m = v[0];

    for (int i = 1; i < n; i++) {
        m = (v[i] < m) ? v[i] : m;
    }
    return m;
}

/* One round trip: bytes out, 8 bytes back (the initiator's view, in microseconds). */
static coll_result_t tune_roundtrip(coll_comm_t *comm, int peer, int initiator, char *buf,
                                    size_t bytes, double *us_p)
{
    double t0 = coll_time_s();

    if (initiator) {
        COLL_CHECK(coll_send(buf, bytes, COLL_UINT8, peer, comm));
        COLL_CHECK(coll_recv(buf, 8, COLL_UINT8, peer, comm));
    } else {
        COLL_CHECK(coll_recv(buf, bytes, COLL_UINT8, peer, comm));
        COLL_CHECK(coll_send(buf, 8, COLL_UINT8, peer, comm));
    }
    *us_p = (coll_time_s() - t0) * 1e6;
    return COLL_OK;
}

/* Latency (half the small round trip) and inverse bandwidth to peer; initiator's results. */
static coll_result_t tune_pair(coll_comm_t *comm, int peer, int initiator, char *buf, double *lat_p,
                               double *beta_p)
{
    double small[TUNE_SMALL_REPS], large[TUNE_LARGE_REPS], t;

    for (int i = 0; i < 4; i++) { /* warm-up: connections, caches, first-touch pages */
        COLL_CHECK(tune_roundtrip(comm, peer, initiator, buf, 8, &t));
    }
    COLL_CHECK(tune_roundtrip(comm, peer, initiator, buf, TUNE_LARGE, &t));
    for (int i = 0; i < TUNE_SMALL_REPS; i++) {
        COLL_CHECK(tune_roundtrip(comm, peer, initiator, buf, 8, &small[i]));
    }
    for (int i = 0; i < TUNE_LARGE_REPS; i++) {
        COLL_CHECK(tune_roundtrip(comm, peer, initiator, buf, TUNE_LARGE, &large[i]));
    }
    double rtt = tune_min(small, TUNE_SMALL_REPS);
    double big = tune_min(large, TUNE_LARGE_REPS);
    *lat_p     = rtt / 2.0;
    *beta_p    = (big - rtt) / (double)TUNE_LARGE;
    if (*beta_p <= 0) {
        /* the large round trip no slower than the small one: charge it all to bandwidth
         * rather than claim an unbounded rate */
        *beta_p = big / (double)TUNE_LARGE;
    }
    return COLL_OK;
}

/* Local reduction speed: the fastest of a few float sums of two 256 KiB operands into a
 * third, in us per byte of one operand (the unit of gamma). Operands of this size stay in the
 * caches, as a pipelined chunk does; the figure is the reduction kernel, not memory. */
static coll_result_t tune_gamma(double *gamma_p)
{
    size_t n    = TUNE_REDUCE / sizeof(float);
    float *buf  = coll_calloc(3 * n, sizeof(float), "reduction tuning buffer");
    double best = -1.0;

    if (buf == NULL) {
        return COLL_ERR_NO_MEMORY;
    }
    for (size_t i = 0; i < 2 * n; i++) {
        buf[n + i] = (float)(i & 1023);
    }
    for (int i = 0; i < TUNE_REDUCE_REPS + 1; i++) {
        double t0 = coll_time_s();
        coll_reduce3(COLL_FLOAT32, COLL_SUM, buf, buf + n, buf + 2 * n, n);
        double us = (coll_time_s() - t0) * 1e6;
        if (i > 0 && (best < 0 || us < best)) { /* the first one faults the pages in */
            best = us;
        }
    }
    coll_free(buf);
    *gamma_p = (best > 0 ? best : 1e-3) / (double)TUNE_REDUCE;
    return COLL_OK;
}

/*
 * The local rank of host h that local rank 0 measures the intra-host link with: the first on
 * another socket (or NUMA node) when the host's ranks span several, since the rings and trees
 * cross that link and it is the slower one; else local rank 1. Every rank holds the same places
 * and local order, so all agree.
 */
static int tune_far_local(const coll_comm_t *comm, int h)
{
    const coll_layout_t     *l  = &comm->layout;
    const coll_topo_place_t *p0 = &comm->places[coll_layout_rank(l, h, 0)];

    for (int i = 1, q; (q = coll_layout_rank(l, h, i)) >= 0; i++) {
        const coll_topo_place_t *p = &comm->places[q];
        if (p0->known && p->known &&
            (p->package != p0->package || (p->numa >= 0 && p->numa != p0->numa))) {
            if (comm->rank == coll_layout_rank(l, h, 0)) {
                coll_info(ALGO,
                          "rank %d: the intra-host link is measured between ranks %d and %d "
                          "(package %d NUMA node %d, package %d NUMA node %d)",
                          comm->rank, coll_layout_rank(l, h, 0), q, (int)p0->package, (int)p0->numa,
                          (int)p->package, (int)p->numa);
            }
            return i;
        }
    }
    return 1;
}

/*
 * This rank's part of the measurements. One pair per link, one link at a time, while every
 * other rank sleeps in the bootstrap: intra between local rank 0 of the first host that has two
 * and its farthest-placed local rank (tune_far_local), then (after a bootstrap barrier) inter
 * between the first ranks of hosts 0 and 1. Pairs measured at once on several hosts, or both links
 * at once, slowed each other wherever hosts share cores (namespaces or COLL_HOSTID on one machine):
 * four ranks spinning on two cores made one pair's round trips take the scheduler's time slice, 2
 * ms, so choices changed from run to run. Hosts are taken as alike; each link's figure comes from
 * its one initiator.
 */
static coll_result_t tune_measure(coll_comm_t *comm, const int want[3], double deadline,
                                  tune_sample_t *mine)
{
    const coll_layout_t *l = &comm->layout;
    int                  r = comm->rank, h = l->host_of[r], lr = l->local_rank[r], ih = -1, lp = 1;
    char                *buf;
    coll_result_t        st = COLL_OK;

    mine->lat_us[0] = mine->lat_us[1] = mine->beta[0] = mine->beta[1] = mine->gamma = -1.0;
    if (want[2] && r == 0) {
        COLL_CHECK(tune_gamma(&mine->gamma));
    }
    for (int k = 0; k < l->nhosts && ih < 0; k++) {
        ih = (coll_layout_rank(l, k, 1) >= 0) ? k : -1;
    }
    buf = coll_calloc(1, TUNE_LARGE, "tuning buffer");
    if (buf == NULL) {
        return COLL_ERR_NO_MEMORY;
    }
    if (ih >= 0) {
        lp = tune_far_local(comm, ih);
    }
    if (want[0] && h == ih && (lr == 0 || lr == lp)) {
        st = tune_pair(comm, coll_layout_rank(l, h, lr == 0 ? lp : 0), lr == 0, buf,
                       &mine->lat_us[0], &mine->beta[0]);
        if (lr != 0) {
            mine->lat_us[0] = mine->beta[0] = -1.0;
        }
    }
    if (st == COLL_OK && want[0] && want[1]) {
        st = coll_bootstrap_barrier(comm->bs, deadline);
    }
    if (st == COLL_OK && want[1] && lr == 0 && h <= 1) {
        st = tune_pair(comm, coll_layout_rank(l, 1 - h, 0), h == 0, buf, &mine->lat_us[1],
                       &mine->beta[1]);
        if (h != 0) {
            mine->lat_us[1] = mine->beta[1] = -1.0;
        }
    }
    coll_free(buf);
    return st;
}

/* The best of every rank's measurement of link k; untouched when nobody measured it. A latency
 * or bandwidth the user set (keep_lat, keep_bw) stays as set: only the other is measured. */
static void tune_agree(const tune_sample_t *all, int n, int k, coll_link_model_t *link,
                       int keep_lat, int keep_bw)
{
    double lat = -1.0, beta = -1.0;

    for (int r = 0; r < n; r++) {
        if (all[r].lat_us[k] >= 0 && (lat < 0 || all[r].lat_us[k] < lat)) {
            lat = all[r].lat_us[k];
        }
        if (all[r].beta[k] >= 0 && (beta < 0 || all[r].beta[k] < beta)) {
            beta = all[r].beta[k];
        }
    }
    if (lat >= 0 && beta >= 0) {
        if (!keep_lat) {
            link->alpha_us = lat;
        }
        if (!keep_bw) {
            link->beta_us_per_byte = beta;
        }
    }
}

static coll_result_t tune_model(coll_comm_t *comm, double deadline)
{
    const coll_layout_t *l = &comm->layout;
    tune_sample_t        mine, *all;
    coll_result_t        st;
    int                  want[3];

    coll_model_from_params(&comm->model);
    want[0] = l->nranks > l->nhosts &&
              !(coll_param_is_set(COLL_P_INTRA_LAT) && coll_param_is_set(COLL_P_INTRA_BW));
    want[1] = l->nhosts > 1 &&
              !(coll_param_is_set(COLL_P_INTER_LAT) && coll_param_is_set(COLL_P_INTER_BW));
    if (want[1] && !coll_param_bool(COLL_P_TUNE_MEASURE)) {
        /* not measured: the NICs' speeds say more than a fixed default */
        if (coll_model_nic_bw(&comm->model, comm->places, comm->nranks)) {
            coll_info(ALGO, "rank %d: inter-host bandwidth %.2f GB/s from the NICs' link speeds",
                      comm->rank, 1e-3 / comm->model.inter.beta_us_per_byte);
        }
    }
    want[2] = comm->nranks > 1 && !coll_param_is_set(COLL_P_REDUCE_BW);
    if (!coll_param_bool(COLL_P_TUNE_MEASURE) || (!want[0] && !want[1] && !want[2])) {
        return COLL_OK;
    }
    COLL_CHECK(tune_measure(comm, want, deadline, &mine));
    all = coll_calloc((size_t)comm->nranks, sizeof(*all), "tuning samples");
    if (all == NULL) {
        return COLL_ERR_NO_MEMORY;
    }
    st = coll_bootstrap_allgather(comm->bs, &mine, sizeof(mine), all, deadline);
    if (st == COLL_OK) {
        coll_link_model_t    *links[2] = {&comm->model.intra, &comm->model.inter};
        const coll_param_id_t lat[2]   = {COLL_P_INTRA_LAT, COLL_P_INTER_LAT};
        const coll_param_id_t bw[2]    = {COLL_P_INTRA_BW, COLL_P_INTER_BW};
        for (int k = 0; k < 2; k++) {
            if (want[k]) {
                tune_agree(all, comm->nranks, k, links[k], coll_param_is_set(lat[k]),
                           coll_param_is_set(bw[k]));
            }
        }
        if (want[2] && all[0].gamma > 0) {
            comm->model.gamma_us_per_byte = all[0].gamma;
        }
        /* the measurements were point-to-point traffic: user numbering starts afresh */
        memset(comm->send_seq, 0, (size_t)comm->nranks * sizeof(uint32_t));
        memset(comm->recv_seq, 0, (size_t)comm->nranks * sizeof(uint32_t));
    }
    coll_free(all);
    return st;
}

/*
 * Shared windows: every rank on one host, one transport serving every peer, and that transport
 * offering windows. Every rank sees the same host keys, transports and (agreed by the transport)
 * window size, so every rank decides alike and picks the same algorithms.
 */
static void tune_window(coll_comm_t *comm)
{
    const coll_transport_ops_t *ops;
    int                         t = -1;

    comm->win_tp = -1;
    if (comm->layout.nhosts != 1) {
        return;
    }
    for (int p = 0; p < comm->nranks; p++) {
        if (p == comm->rank) {
            continue;
        }
        if (t >= 0 && comm->ep_tp[p] != t) {
            return;
        }
        t = comm->ep_tp[p];
    }
    if (t < 0) { /* a single rank shares nothing and needs no window */
        comm->layout.shared_window = 1;
        return;
    }
    ops = comm->tp[t].ops;
    if (comm->tp[t].ctx == NULL || ops->win_size == NULL || ops->win_ptr == NULL ||
        ops->win_publish == NULL || ops->win_poll == NULL || ops->win_ack == NULL ||
        ops->win_acked == NULL || ops->win_size(comm->tp[t].ctx) == 0) {
        return;
    }
    comm->win_tp               = t;
    comm->layout.shared_window = 1;
    comm->layout.window_bytes  = ops->win_size(comm->tp[t].ctx);
}

/*
 * The order of the rings (coll_topo_ring_order): hosts contiguous, and within a host by socket,
 * NUMA node and PCIe switch. When no rank knows its host's topology that is rank order within
 * each host, hosts in order of their lowest rank: the identity where every host's ranks are
 * consecutive. Every rank holds the same places, so every rank builds the same ring.
 */
static coll_result_t tune_ring(coll_comm_t *comm)
{
    coll_layout_t *l     = &comm->layout;
    int           *order = coll_calloc((size_t)comm->nranks, sizeof(int), "ring order");
    int            known = 0, hosts, pkgs;
    coll_result_t  st;

    if (order == NULL) {
        return COLL_ERR_NO_MEMORY;
    }
    for (int r = 0; r < comm->nranks; r++) {
        known |= comm->places[r].known;
    }
    coll_topo_local_order(comm->places, comm->nranks, order);
    st = coll_layout_set_local(l, order);
    coll_topo_ring_order(comm->places, comm->nranks, order);
    if (st == COLL_OK) {
        st = coll_layout_set_ring(l, order);
    }
    coll_topo_ring_crossings(comm->places, comm->nranks, l->ring_order, &hosts, &pkgs);
    coll_info(TOPO, "rank %d: the ring crosses hosts %d time(s) and sockets %d time(s)%s",
              comm->rank, hosts, pkgs, known ? "" : " (topology unknown: rank order)");
    for (int i = 0; i < comm->nranks && comm->rank == 0; i++) {
        coll_debug(TOPO, "ring position %d: rank %d", i, l->ring_order[i]);
    }
    coll_free(order);
    return st;
}

/* Waits spin on a free CPU, and yield it when this host runs more ranks than it has CPUs
 * (src/engine/wait.c). Ranks bound one per core are not oversubscribed; CPUs counted online. */
static void tune_spin(coll_comm_t *comm)
{
    const coll_layout_t *l     = &comm->layout;
    int                  h     = l->host_of[comm->rank];
    long                 ncpu  = sysconf(_SC_NPROCESSORS_ONLN);
    int                  local = l->host_start[h + 1] - l->host_start[h];

    comm->oversubscribed = ncpu > 0 && local > ncpu;
    comm->oversub_factor = comm->oversubscribed ? (int)((local + ncpu - 1) / ncpu) : 1;
    coll_debug(ALGO, "rank %d: %d rank(s) on %ld online CPU(s): waits %s", comm->rank, local, ncpu,
               comm->oversubscribed ? "yield each pass" : "spin");
}

double coll_tune_sched_us(int local)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

    if (ncpu <= 0 || local <= ncpu) {
        return 0.0;
    }
    return coll_param_time(COLL_P_OVERSUB_STEP) * 1e6 * (double)(local - ncpu) / (double)ncpu;
}

coll_result_t coll_tune_init(coll_comm_t *comm, double deadline)
{
    uint64_t *keys = coll_calloc((size_t)comm->nranks, sizeof(*keys), "host keys");

    if (keys == NULL) {
        return COLL_ERR_NO_MEMORY;
    }
    for (int r = 0; r < comm->nranks; r++) {
        keys[r] = comm->peers[r].host_hash;
    }
    coll_result_t st = coll_layout_init(&comm->layout, comm->nranks, keys);
    coll_free(keys);
    COLL_CHECK(st);
    tune_spin(comm);
    COLL_CHECK(tune_ring(comm));
    tune_window(comm);
    COLL_CHECK(tune_model(comm, deadline));
    /* the cost model's step cost: on one host only, where every rank counts the same CPUs and
     * ranks (hosts may differ in CPUs, and the ranks must choose alike) */
    comm->model.sched_us = comm->layout.nhosts == 1 ? coll_tune_sched_us(comm->nranks) : 0.0;
    if (coll_log_enabled(COLL_LOG_INFO, COLL_SS_ALGO)) {
        char model[160];

        coll_model_format(&comm->model, model, sizeof(model));
        coll_info(ALGO, "rank %d: %d host(s), %d rank(s) per host; model: %s", comm->rank,
                  comm->layout.nhosts, comm->layout.local_size, model);
    }
    return COLL_OK;
}
