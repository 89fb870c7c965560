/* SPDX-License-Identifier: MIT */
/*
 * Alpha-beta(-gamma) cost of every built-in algorithm: alpha per message on the link it uses,
 * beta per byte sent, gamma per byte reduced locally. Rounds of pairwise exchanges are charged
 * to the slowest link used in that round; rings and trees to the slowest link they contain.
 * The formulas follow the schedules the builders emit (message counts, bytes per rank). On a
 * host running more ranks than CPUs every dependent step (a rank waits for a peer) also costs
 * m->sched_us: the peer has to be scheduled first, so algorithms of few steps gain on the ring.
 */
#include "cost.h"

#include "ring/ring.h"
#include "tree/tree.h"

#include <stdio.h>

void coll_model_default(coll_model_t *m)
{
    m->intra.alpha_us         = 4.0;
    m->intra.beta_us_per_byte = 1e6 / 6e9; /* a copy into and out of a ring, ~6 GB/s */
    m->inter.alpha_us         = 30.0;
    m->inter.beta_us_per_byte = 1e6 / 1.1e9; /* 10 Gbit/s TCP */
    m->gamma_us_per_byte      = 1e6 / 8e9;
    m->inter_nics             = 1;
    m->sched_us               = 0.0;
}

double coll_model_inter_beta(const coll_model_t *m, int streams)
{
    int nics = (m->inter_nics > 1) ? m->inter_nics : 1;

    return (streams > nics) ? m->inter.beta_us_per_byte * streams / nics
                            : m->inter.beta_us_per_byte;
}

void coll_model_format(const coll_model_t *m, char *buf, size_t len)
{
    char nics[32] = "";

    char sched[48] = "";

    if (m->inter_nics > 1) {
        snprintf(nics, sizeof(nics), " x %d NICs", m->inter_nics);
    }
    if (m->sched_us > 0) {
        snprintf(sched, sizeof(sched), ", oversubscribed %.0f us per step", m->sched_us);
    }
    /* beta is us per byte, so 1e-3 / beta is bytes per ns = GB/s */
    snprintf(buf, len, "intra %.1f us %.2f GB/s, inter %.1f us %.2f GB/s%s, reduce %.2f GB/s%s",
             m->intra.alpha_us, 1e-3 / m->intra.beta_us_per_byte, m->inter.alpha_us,
             1e-3 / m->inter.beta_us_per_byte, nics, 1e-3 / m->gamma_us_per_byte, sched);
}

double coll_cost_bytes(const coll_args_t *args)
{
    return (double)args->count * (double)coll_dtype_size(args->dtype);
}

/* Messages of a chunked transfer of the call's data (at least one). */
static double cost_chunks(const coll_args_t *args)
{
    uint64_t bytes = (uint64_t)args->count * coll_dtype_size(args->dtype);
    uint64_t chunk = (args->chunk_bytes > 0) ? args->chunk_bytes : 1;
    uint64_t k     = bytes / chunk + (bytes % chunk != 0 ? 1 : 0);

    return (k < 1) ? 1.0 : (double)k;
}

static int cost_multihost(const coll_args_t *args)
{
    return args->layout != NULL && args->layout->nhosts > 1;
}

const coll_link_model_t *coll_cost_link(const coll_args_t *args, const coll_model_t *m, int a,
                                        int b)
{
    const coll_layout_t *l = args->layout;

    if (l == NULL || l->nhosts <= 1 || a < 0 || b < 0 || a >= l->nranks || b >= l->nranks) {
        return &m->intra;
    }
    return (l->host_of[a] == l->host_of[b]) ? &m->intra : &m->inter;
}

const coll_link_model_t *coll_cost_flat_link(const coll_args_t *args, const coll_model_t *m)
{
    return cost_multihost(args) ? &m->inter : &m->intra;
}

/* The slowest link of a round where every rank r < p with a partner q = peer(r) sends to it:
 * inter-host if any pair crosses hosts, with the busiest host's crossing streams sharing its
 * m->inter_nics network links. */
static coll_link_model_t cost_round_link(const coll_args_t *args, const coll_model_t *m, int p,
                                         int (*peer)(const coll_layout_t *l, int r, int arg),
                                         int arg)
{
    const coll_layout_t *l = args->layout;
    coll_link_model_t    link;
    int                  busiest = 0;

    if (!cost_multihost(args)) {
        return m->intra;
    }
    for (int h = 0; h < l->nhosts; h++) {
        int crossing = 0;
        for (int i = l->host_start[h]; i < l->host_start[h + 1]; i++) {
            int r = l->host_ranks[i], q = (r < p) ? peer(l, r, arg) : -1;
            crossing += q >= 0 && q < l->nranks && l->host_of[q] != h;
        }
        busiest = (crossing > busiest) ? crossing : busiest;
    }
    if (busiest == 0) {
        return m->intra;
    }
    link                  = m->inter;
    link.beta_us_per_byte = coll_model_inter_beta(m, busiest);
    return link;
}

static int cost_xor_peer(const coll_layout_t *l, int r, int dist)
{
    (void)l;
    return r ^ dist;
}

/* The next rank on the ring (in the layout's ring order). */
static int cost_ring_peer(const coll_layout_t *l, int r, int unused)
{
    (void)unused;
    return (l->ring_order != NULL) ? l->ring_order[(l->ring_pos[r] + 1) % l->nranks]
                                   : (r + 1) % l->nranks;
}

coll_link_model_t coll_cost_xor_link(const coll_args_t *args, const coll_model_t *m, int p,
                                     int dist)
{
    return cost_round_link(args, m, p, cost_xor_peer, dist);
}

/* ---- ring / chain ---- */

/* On a host running more ranks than CPUs, each step of a ring waits on a neighbour that waits
 * on its own: scheduling delays add up around the ring. Measured on 2 CPUs (4 and 8 ranks,
 * 1-16 MiB) the ring took 1.3-1.7x Rabenseifner's time, whose partners are fewer steps apart;
 * the ring's byte terms are charged this factor there. */
#define COST_RING_OVERSUB 1.5

static double cost_ring_stretch(const coll_model_t *m)
{
    return m->sched_us > 0 ? COST_RING_OVERSUB : 1.0;
}

/* Ring phases: every rank sends (n-1)/n of the data per phase in n-1 messages and reduces the
 * reduce-scatter's share. Chains: the pipeline fills in n-1 chunk times, then delivers one
 * chunk per chunk time. */
double coll_cost_ring(int nranks, const coll_args_t *args, const coll_model_t *m)
{
    coll_link_model_t        link = cost_round_link(args, m, nranks, cost_ring_peer, 0);
    const coll_link_model_t *l    = &link;
    double                   n = nranks, bytes = coll_cost_bytes(args), k, chunk;
    double                   stretch = cost_ring_stretch(m);

    if (nranks <= 1) {
        return 0.0;
    }
    switch (args->coll) {
    case COLL_OP_ALLREDUCE:
        return 2.0 * (n - 1.0) * (l->alpha_us + m->sched_us) +
               stretch * (2.0 * (n - 1.0) / n * bytes * l->beta_us_per_byte +
                          (n - 1.0) / n * bytes * m->gamma_us_per_byte);
    case COLL_OP_REDUCE_SCATTER: /* count is the per-rank block */
        return (n - 1.0) * (l->alpha_us + m->sched_us +
                            stretch * bytes * (l->beta_us_per_byte + m->gamma_us_per_byte));
    case COLL_OP_ALLGATHER:
        return (n - 1.0) * (l->alpha_us + m->sched_us + stretch * bytes * l->beta_us_per_byte);
    default:
        k     = cost_chunks(args);
        chunk = bytes / k;
        return (n - 1.0 + k - 1.0) * (l->alpha_us + m->sched_us + chunk * l->beta_us_per_byte);
    }
}

/* ---- recursive doubling / Rabenseifner ---- */

/* Rabenseifner's far partners stream worse than a ring's neighbours: its bandwidth term is
 * charged this factor, which leaves the largest messages to the ring on equal links. */
#define COST_RAB_BW_PENALTY 1.1

static int cost_log2(int nranks, int *p_p)
{
    int lg = 0;

    while ((2LL << lg) <= nranks) {
        lg++;
    }
    *p_p = 1 << lg;
    return lg;
}

/* The fold (n not a power of two): a vector down and the result back, over the flat link. */
static double cost_fold(int nranks, int p, double bytes, const coll_args_t *args,
                        const coll_model_t *m)
{
    const coll_link_model_t *l = coll_cost_flat_link(args, m);

    if (nranks == p) {
        return 0.0;
    }
    return 2.0 * (l->alpha_us + m->sched_us + bytes * l->beta_us_per_byte) +
           bytes * m->gamma_us_per_byte;
}

/* log2(p) full-vector exchanges, each reduced. */
double coll_cost_rd(int nranks, const coll_args_t *args, const coll_model_t *m)
{
    int    p, lg = cost_log2(nranks, &p);
    double bytes = coll_cost_bytes(args), t = 0.0;

    for (int k = 0; k < lg; k++) {
        coll_link_model_t        link = coll_cost_xor_link(args, m, p, 1 << k);
        const coll_link_model_t *l    = &link;
        t += l->alpha_us + m->sched_us + bytes * (l->beta_us_per_byte + m->gamma_us_per_byte);
    }
    return t + cost_fold(nranks, p, bytes, args, m);
}

/* Halving rounds at distance p/2, p/4, ... carry half the remaining data, then the doubling
 * rounds mirror them. */
double coll_cost_rab(int nranks, const coll_args_t *args, const coll_model_t *m)
{
    int    p, lg = cost_log2(nranks, &p);
    double bytes = coll_cost_bytes(args), t = 0.0, part = bytes;

    if (nranks <= 1) {
        return 0.0;
    }
    for (int k = lg - 1; k >= 0; k--) {
        coll_link_model_t        link = coll_cost_xor_link(args, m, p, 1 << k);
        const coll_link_model_t *l    = &link;
        part /= 2.0;
        t += 2.0 * (l->alpha_us + m->sched_us + COST_RAB_BW_PENALTY * part * l->beta_us_per_byte) +
             part * m->gamma_us_per_byte;
    }
    return t + cost_fold(nranks, p, bytes, args, m);
}

/* ---- trees ---- */

/*
 * Each half climbs and descends floor(log2 n) levels (the pipeline's fill and drain, one chunk
 * per level); meanwhile a rank sends about twice the vector (interior in one tree: one chunk up
 * and two down; a leaf in the other: one up) in one message per chunk, and reduces it once.
 */
double coll_cost_dbtree(int nranks, const coll_args_t *args, const coll_model_t *m)
{
    const coll_link_model_t *l     = coll_cost_flat_link(args, m);
    double                   bytes = coll_cost_bytes(args), k = cost_chunks(args), chunk;

    if (nranks <= 1) {
        return 0.0;
    }
    chunk = (bytes / 2.0 < (double)args->chunk_bytes) ? bytes / 2.0 : (double)args->chunk_bytes;
    return 2.0 * coll_tree_depth(nranks) *
               (l->alpha_us + m->sched_us + chunk * l->beta_us_per_byte) +
           (k + 1.0) * (l->alpha_us + m->sched_us) + 2.0 * bytes * l->beta_us_per_byte +
           bytes * m->gamma_us_per_byte;
}

/* floor(log2 n) levels to fill the pipeline, then one chunk per step; an interior rank sends
 * (broadcast) or receives (reduce) every chunk twice. */
double coll_cost_tree(int nranks, const coll_args_t *args, const coll_model_t *m)
{
    const coll_link_model_t *l = coll_cost_flat_link(args, m);
    double                   k = cost_chunks(args), chunk = coll_cost_bytes(args) / k;

    if (nranks <= 1) {
        return 0.0;
    }
    return 2.0 * (coll_tree_depth(nranks) + k - 1.0) *
           (l->alpha_us + m->sched_us + chunk * l->beta_us_per_byte);
}

/* ---- recursive halving reduce_scatter, Bruck allgather ---- */

/* log2(p) rounds at distance p/2, p/4, ... carrying half the remaining vector (count is the
 * per-rank block); the fold sends the whole vector down and one block back. */
double coll_cost_rh(int nranks, const coll_args_t *args, const coll_model_t *m)
{
    int                      p, lg = cost_log2(nranks, &p);
    double                   block = coll_cost_bytes(args), part = block * nranks, t = 0.0;
    const coll_link_model_t *fl = coll_cost_flat_link(args, m);

    if (nranks <= 1) {
        return 0.0;
    }
    for (int k = lg - 1; k >= 0; k--) {
        coll_link_model_t        link = coll_cost_xor_link(args, m, p, 1 << k);
        const coll_link_model_t *l    = &link;
        part /= 2.0;
        t += l->alpha_us + m->sched_us + part * (l->beta_us_per_byte + m->gamma_us_per_byte);
    }
    if (nranks != p) {
        t += 2.0 * (fl->alpha_us + m->sched_us) + (block * nranks + block) * fl->beta_us_per_byte +
             block * nranks * m->gamma_us_per_byte;
    }
    return t;
}

/* ceil(log2 n) messages carrying n-1 blocks, plus the local rotation of n-1 blocks. */
double coll_cost_bruck(int nranks, const coll_args_t *args, const coll_model_t *m)
{
    const coll_link_model_t *l      = coll_cost_flat_link(args, m);
    int                      rounds = 0;

    for (long long d = 1; d < nranks; d *= 2) {
        rounds++;
    }
    return rounds * (l->alpha_us + m->sched_us) +
           (nranks - 1) * coll_cost_bytes(args) * l->beta_us_per_byte +
           (nranks - 1) * coll_cost_bytes(args) * m->intra.beta_us_per_byte;
}

/* ---- alltoall, barrier, send/recv ---- */

double coll_cost_pairwise(int nranks, const coll_args_t *args, const coll_model_t *m)
{
    const coll_link_model_t *l = coll_cost_flat_link(args, m);

    return (nranks - 1) * ((l->alpha_us + m->sched_us) * cost_chunks(args) +
                           coll_cost_bytes(args) * l->beta_us_per_byte);
}

double coll_cost_dissemination(int nranks, const coll_args_t *args, const coll_model_t *m)
{
    const coll_link_model_t *l      = coll_cost_flat_link(args, m);
    int                      rounds = 0;

    for (long long d = 1; d < nranks; d *= 2) {
        rounds++;
    }
    return rounds * (l->alpha_us + m->sched_us);
}

double coll_cost_direct(int nranks, const coll_args_t *args, const coll_model_t *m)
{
    const coll_link_model_t *l = coll_cost_flat_link(args, m);

    (void)nranks;
    return l->alpha_us + m->sched_us + coll_cost_bytes(args) * l->beta_us_per_byte;
}

/* ---- shared windows ---- */

/*
 * A window put or get is one plain copy through shared memory: half of an intra-host message's
 * beta, which pays for the copy into a ring and the copy out of it. A reduction from a window
 * reads it (that copy) and reduces (gamma). A flag handoff costs about one intra-host latency.
 * The reuse acknowledgement (of the call before last) is free for back-to-back blocking calls:
 * a rank acknowledged that call before it published anything for the last one, which this
 * rank has already read. Not modelled: n ranks reading at once share the host's memory
 * bandwidth.
 */
static double cost_win_copy(const coll_model_t *m)
{
    return m->intra.beta_us_per_byte / 2.0;
}

/* Slowest rank (not rank 0): put the input, copy rank 0's, reduce the other n - 1. */
double coll_cost_oneshot(int nranks, const coll_args_t *args, const coll_model_t *m)
{
    double n = nranks, bytes = coll_cost_bytes(args), c = cost_win_copy(m);

    if (nranks <= 1) {
        return 0.0;
    }
    return m->intra.alpha_us + m->sched_us + 2.0 * bytes * c +
           (n - 1.0) * bytes * (c + m->gamma_us_per_byte);
}

/* Put the input; reduce the own segment (a copy and n - 1 reductions of bytes / n); put it;
 * copy the n - 1 other segments. Two handoffs: inputs, then reduced segments. */
double coll_cost_twoshot(int nranks, const coll_args_t *args, const coll_model_t *m)
{
    double n = nranks, bytes = coll_cost_bytes(args), seg = bytes / n, c = cost_win_copy(m);

    if (nranks <= 1) {
        return 0.0;
    }
    return 2.0 * (m->intra.alpha_us + m->sched_us) + bytes * c + seg * c +
           (n - 1.0) * seg * (c + m->gamma_us_per_byte) + seg * c + (n - 1.0) * seg * c;
}
