/* SPDX-License-Identifier: MIT */
/*
 * Straggler attribution. Every finished collective leaves (sequence number, time from call to
 * completion) in a per-communicator window of the last COLL_STATS_WINDOW calls: two clock reads
 * per call and no traffic. coll_comm_stats gathers the windows and, for every call present on
 * all ranks, takes a rank's lateness as the longest wait of that call minus its own: a
 * collective completes at about the same moment everywhere, so whoever waited least arrived
 * last. No clock synchronisation is needed. For rooted calls (broadcast, reduce) completion is
 * less simultaneous and the figure is rougher.
 */
#include "diag.h"
#include "error.h"
#include "log.h"
#include "util.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define COLL_STATS_WINDOW 1024

struct coll_diag_stats {
    double   seq[COLL_STATS_WINDOW]; /* sequence number + 1 (0: empty slot); exact in a double */
    double   wait[COLL_STATS_WINDOW];
    uint64_t recorded;
};

void coll_diag_record(coll_comm_t *comm, coll_op_t coll, uint32_t seq, double wait_s)
{
    if (coll == COLL_OP_SEND || coll == COLL_OP_RECV) {
        return;
    }
    if (comm->stats == NULL) {
        comm->stats = coll_calloc(1, sizeof(*comm->stats), "arrival record");
        if (comm->stats == NULL) {
            return; /* diagnosis only: the call itself succeeded */
        }
    }
    uint32_t slot           = seq % COLL_STATS_WINDOW;
    comm->stats->seq[slot]  = (double)seq + 1.0;
    comm->stats->wait[slot] = wait_s;
    comm->stats->recorded++;
}

void coll_diag_stats_free(coll_comm_t *comm)
{
    coll_free(comm->stats);
    comm->stats = NULL;
}

size_t coll_diag_stats_bytes(void)
{
    return 2 * COLL_STATS_WINDOW * sizeof(double);
}

void coll_diag_stats_pack(coll_comm_t *comm, double *out)
{
    if (comm->stats == NULL) {
        memset(out, 0, coll_diag_stats_bytes());
        return;
    }
    memcpy(out, comm->stats->seq, sizeof(comm->stats->seq));
    memcpy(out + COLL_STATS_WINDOW, comm->stats->wait, sizeof(comm->stats->wait));
}

/* "Arrived last" counts only calls whose arrivals spread this much: within it the order is the
 * scheduler's, not a straggler's. The mean and max lateness count every call. */
#define STATS_SKEW_MIN_S 1e-4

/* all: every rank's packed window, rank r at r * 2 * COLL_STATS_WINDOW. */
void coll_diag_stats_summary(const double *all, int nranks, char *buf, size_t len)
{
    size_t  per = 2 * COLL_STATS_WINDOW, off = 0;
    double *late_sum = coll_calloc((size_t)nranks * 3, sizeof(double), "arrival summary");
    int     ncalls   = 0;
    if (late_sum == NULL) {
        snprintf(buf, len, "arrival summary: out of memory\n");
        return;
    }
    double *late_max = late_sum + nranks, *last = late_sum + 2 * nranks;
    int     nskewed = 0; /* calls whose last rank came STATS_SKEW_MIN_S or more after the first */
    for (int s = 0; s < COLL_STATS_WINDOW; s++) {
        double seq = all[s], wmax = -1, wmin = INFINITY;
        int    common = seq > 0, who = -1;
        for (int r = 0; r < nranks && common; r++) {
            double w = all[r * per + COLL_STATS_WINDOW + s];
            common   = all[r * per + s] == seq;
            wmax     = w > wmax ? w : wmax;
            if (w < wmin) {
                wmin = w;
                who  = r;
            }
        }
        if (!common) {
            continue;
        }
        ncalls++;
        if (wmax - wmin >= STATS_SKEW_MIN_S) { /* below it, who came last is noise */
            nskewed++;
            last[who] += 1;
        }
        for (int r = 0; r < nranks; r++) {
            double l = wmax - all[r * per + COLL_STATS_WINDOW + s];
            late_sum[r] += l;
            late_max[r] = l > late_max[r] ? l : late_max[r];
        }
    }
    off += (size_t)snprintf(buf, len,
                            "arrival over the last %d collectives seen by all %d ranks (%d with "
                            "arrivals %.1f ms or more apart)\n",
                            ncalls, nranks, nskewed, 1e3 * STATS_SKEW_MIN_S);
    for (int r = 0; r < nranks && ncalls > 0 && off < len; r++) {
        off += (size_t)snprintf(buf + off, len - off,
                                "rank %d arrived last in %.0f%% of collectives, mean +%.3f ms, max "
                                "+%.3f ms\n",
                                r, nskewed > 0 ? 100.0 * last[r] / nskewed : 0.0,
                                1e3 * late_sum[r] / ncalls, 1e3 * late_max[r]);
    }
    coll_free(late_sum);
}
