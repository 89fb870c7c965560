/* SPDX-License-Identifier: MIT */
/*
 * The parameters every rank of a communicator must set alike, compared when it is created.
 * Each of them decides, on each rank alone, which path or algorithm a call takes, or whether
 * the ranks measure their links together at creation. Ranks that differ would wait on each
 * other in different protocols until the timeout, or take one another's messages for something
 * else; here they all fail at once with COLL_ERR_MISMATCH, and every rank's message names the
 * parameter, two ranks that differ and their values.
 *
 * One bootstrap all-gather of a 64-bit digest per rank (of the values, not their spelling:
 * "1k" and "1024" agree); only when the digests differ, a second one of every row's digest and
 * text, to write the message.
 *
 * Not compared: what the ranks reconcile themselves (COLL_DIRECT_PUSH and COLL_CUDA_P2P_MIN
 * travel with each call or window exchange; tcp's handshake compares COLL_TCP_NSOCKS and
 * COLL_TCP_FRAG_SIZE), what only this rank uses (logging, binding, spinning, huge pages,
 * non-temporal stores, staging sizes) and what may differ by host (interfaces, HCAs,
 * COLL_TRANSPORT, timeouts).
 */
#include "api/comm.h"
#include "bootstrap/bootstrap.h"
#include "error.h"
#include "log.h"
#include "param.h"
#include "util.h"

#include <stdio.h>
#include <string.h>

#define AGREE_TEXT 48 /* a value as the message shows it: 31 bytes of its text at most */

static const struct {
    coll_param_id_t id;
    int             set_counts; /* set, even to the default, is not the same as unset */
} agree_rows[] = {
    /* the algorithm, its pipeline and the cost model that picks it (tune.c, tune_topo.c) */
    {COLL_P_ALGO, 0},
    {COLL_P_CHUNK_SIZE, 0},
    {COLL_P_TUNE_MEASURE, 0},
    {COLL_P_INTRA_LAT, 1},
    {COLL_P_INTRA_BW, 1},
    {COLL_P_INTER_LAT, 1},
    {COLL_P_INTER_BW, 1},
    {COLL_P_REDUCE_BW, 1},
    {COLL_P_OVERSUB_STEP, 0},
    /* the small-call slots and the direct path (small.c, direct.c, direct_cma.c) */
    {COLL_P_SMALL_MAX, 0},
    {COLL_P_SMALL_AGRS_MAX, 0},
    {COLL_P_DIRECT, 0},
    {COLL_P_DIRECT_MIN, 0},
    {COLL_P_DIRECT_CMA, 0},
    {COLL_P_DIRECT_CMA_MIN, 0},
    {COLL_P_DIRECT_CMA_AGRS_MIN, 0},
    /* device memory (src/cuda) */
    {COLL_P_CUDA_P2P, 0},
    {COLL_P_CUDA_P2P_LEVEL, 0},
    {COLL_P_CUDA_DIRECT, 0},
    {COLL_P_CUDA_CHUNK_SIZE, 0},
    {COLL_P_CUDA_WINDOW_SIZE, 0},
};
#define AGREE_NROWS ((int)(sizeof(agree_rows) / sizeof(agree_rows[0])))

/* What a rank sends when the digests differ. */
typedef struct {
    uint64_t digest[AGREE_NROWS];
    char     text[AGREE_NROWS][AGREE_TEXT];
} agree_rec_t;

static uint64_t agree_digest(int i)
{
    uint64_t d = coll_param_digest(agree_rows[i].id);
    return agree_rows[i].set_counts && coll_param_is_set(agree_rows[i].id) ? coll_hash64(d) : d;
}

/* Row i's value as the message shows it: "32k (default)", "0". */
static void agree_text(int i, char *out)
{
    coll_param_id_t id = agree_rows[i].id;
    char            v[32];
    size_t          n = strlen(coll_param_str(id));

    coll_strlcpy(v, coll_param_str(id), sizeof(v));
    if (n >= sizeof(v)) {
        memcpy(v + sizeof(v) - 4, "...", 4);
    }
    snprintf(out, AGREE_TEXT, "\"%s\"%s", v, coll_param_is_set(id) ? "" : " (default)");
}

/* The first row on which some rank differs from rank 0: the message, the same on every rank. */
static void agree_message(const coll_comm_t *comm, const agree_rec_t *all, char *msg, size_t len)
{
    for (int i = 0; i < AGREE_NROWS; i++) {
        int first = -1, others = 0;
        for (int r = 1; r < comm->nranks; r++) {
            if (all[r].digest[i] != all[0].digest[i]) {
                others += first >= 0;
                first = first >= 0 ? first : r;
            }
        }
        if (first < 0) {
            continue;
        }
        char more[48] = "";
        if (others > 0) {
            snprintf(more, sizeof(more), " (and %d more rank%s)", others, others > 1 ? "s" : "");
        }
        snprintf(msg, len, "%s is %s on rank 0 but %s on rank %d%s; %s",
                 coll_param_name(agree_rows[i].id), all[0].text[i], all[first].text[i], first, more,
                 agree_rows[i].set_counts
                     ? "set, even to its default, it replaces what the ranks measure together, "
                       "so all ranks of a communicator must set it alike or leave it unset"
                     : "it chooses how each call runs on every rank alone, so all ranks of a "
                       "communicator must set it alike");
        return;
    }
    /* the combined digests differed but no row does: a digest collision cannot cause this,
     * a rank whose rows differ from this build's can */
    snprintf(msg, len, "the ranks run libraries whose path-choosing parameters differ");
}

coll_result_t coll_comm_agree_params(coll_comm_t *comm, double deadline)
{
    uint64_t      mine = 0, *all;
    agree_rec_t   rec, *recs;
    int           alike = 1;
    char          msg[400];
    coll_result_t st;

    for (int i = 0; i < AGREE_NROWS; i++) {
        mine = coll_hash64(mine ^ agree_digest(i));
    }
    all = coll_calloc((size_t)comm->nranks, sizeof(*all), "parameter digests");
    if (all == NULL) {
        return COLL_ERR_NO_MEMORY;
    }
    st = coll_bootstrap_allgather(comm->bs, &mine, sizeof(mine), all, deadline);
    for (int r = 0; r < comm->nranks && st == COLL_OK; r++) {
        alike &= all[r] == mine;
    }
    coll_free(all);
    if (st != COLL_OK || alike) {
        return st;
    }
    memset(&rec, 0, sizeof(rec));
    for (int i = 0; i < AGREE_NROWS; i++) {
        rec.digest[i] = agree_digest(i);
        agree_text(i, rec.text[i]);
    }
    recs = coll_calloc((size_t)comm->nranks, sizeof(*recs), "parameter values");
    if (recs == NULL) {
        return COLL_ERR_NO_MEMORY;
    }
    st = coll_bootstrap_allgather(comm->bs, &rec, sizeof(rec), recs, deadline);
    if (st == COLL_OK) {
        agree_message(comm, recs, msg, sizeof(msg));
        coll_error(INIT, "rank %d: %s", comm->rank, msg);
        st = coll_set_last_error(COLL_ERR_MISMATCH, "rank %d: %s", comm->rank, msg);
    }
    coll_free(recs);
    return st;
}
