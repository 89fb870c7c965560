/* SPDX-License-Identifier: MIT */
/*
 * The parameters every rank of a communicator must set alike, compared when it is created.
 * Each of them decides, on each rank alone, which transport, path or algorithm a call takes,
 * or whether the ranks measure their links together at creation. Ranks that differ would wait
 * on each other in different protocols until the timeout, or take one another's messages for
 * something else; here they all fail at once with COLL_ERR_MISMATCH, and every rank's message
 * names the parameter, rank 0 and the first rank that differs, and both values. README.md and
 * coll(7) list the rows too (tests/docs/check-agree.sh keeps the three alike).
 *
 * The common case is one bootstrap all-gather of a 64-bit digest per rank (of the values, not
 * their spelling: "1k" and "1024" agree; strings as written). Only when the digests differ:
 * a second all-gather of each row's digest, which names the row and the rank, and a third of
 * that row's text, for the message. Every rank sees the same answers, so all decide alike.
 *
 * Not compared: what the ranks reconcile or check themselves (COLL_DIRECT_PUSH travels with
 * each call; COLL_SHM_WINDOW_SIZE and COLL_CUDA_P2P_MIN are agreed at the window exchange;
 * ranks whose COLL_CUDA_WINDOW_SIZE differ stage device calls; tcp's handshake refuses
 * differing COLL_TCP_NSOCKS or COLL_TCP_FRAG_SIZE, naming them; the ib transport's bootstrap
 * connection mode compares its slots), what the sender decides and every receiver follows
 * (COLL_SHM_CMA_MIN, COLL_IB_RNDV_MIN, COLL_IB_GDR), what only this rank uses (logging,
 * binding, spinning, huge pages, non-temporal stores, staging sizes) and what may differ by
 * host (interfaces, HCAs and their ports, timeouts).
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
    /* the transports a rank allows: windows and paths assume every rank allows the same ones
     * (what a host can offer may differ: comm.c picks, for each pair, one both offer) */
    {COLL_P_TRANSPORT, 0},
    /* the ib transport's receive rings: rdma_cm's connection does not carry them */
    {COLL_P_IB_NQPS, 0},
    {COLL_P_IB_SLOTS, 0},
    {COLL_P_IB_SLOT_SIZE, 0},
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
    /* whether a rank joins the device windows' exchange, and the device path's chunks */
    {COLL_P_CUDA_P2P, 0},
    {COLL_P_CUDA_P2P_LEVEL, 0},
    {COLL_P_CUDA_DIRECT, 0},
    {COLL_P_CUDA_CHUNK_SIZE, 0},
};
#define AGREE_NROWS ((int)(sizeof(agree_rows) / sizeof(agree_rows[0])))

static uint64_t agree_digest(int i)
{
    uint64_t d = coll_param_digest(agree_rows[i].id);
    return agree_rows[i].set_counts && coll_param_is_set(agree_rows[i].id) ? coll_hash64(d) : d;
}

/* Row i's value as the message shows it: "32k" (default), "0". */
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

/* The first row on which some rank differs from rank 0 (digests: nranks rows of AGREE_NROWS),
 * with that rank and how many more differ; -1 when none does (ranks of other builds). */
static int agree_first(const coll_comm_t *comm, const uint64_t *digests, int *first_p,
                       int *others_p)
{
    for (int i = 0; i < AGREE_NROWS; i++) {
        int first = -1, others = 0;
        for (int r = 1; r < comm->nranks; r++) {
            if (digests[(size_t)r * AGREE_NROWS + i] != digests[i]) {
                others += first >= 0;
                first = first >= 0 ? first : r;
            }
        }
        if (first >= 0) {
            *first_p  = first;
            *others_p = others;
            return i;
        }
    }
    return -1;
}

static void agree_message(int i, const char *text0, const char *text1, int first, int others,
                          char *msg, size_t len)
{
    char more[48] = "";
    if (others > 0) {
        snprintf(more, sizeof(more), " (and %d more rank%s)", others, others > 1 ? "s" : "");
    }
    snprintf(msg, len, "%s is %s on rank 0 but %s on rank %d%s; %s",
             coll_param_name(agree_rows[i].id), text0, text1, first, more,
             agree_rows[i].set_counts
                 ? "set, even to its default, it replaces what the ranks measure together, so "
                   "all ranks of a communicator must set it alike or leave it unset"
                 : "it chooses how each call runs on every rank alone, so all ranks of a "
                   "communicator must set it alike");
}

/* The rows' digests, then the differing row's text: the message, the same on every rank. */
static coll_result_t agree_report(coll_comm_t *comm, double deadline)
{
    uint64_t      mine[AGREE_NROWS], *digests;
    char          text[AGREE_TEXT], *texts = NULL, msg[400];
    int           i = -1, first = 0, others = 0;
    coll_result_t st;

    for (int k = 0; k < AGREE_NROWS; k++) {
        mine[k] = agree_digest(k);
    }
    digests = coll_calloc((size_t)comm->nranks, sizeof(mine), "parameter digests");
    if (digests == NULL) {
        return COLL_ERR_NO_MEMORY;
    }
    st = coll_bootstrap_allgather(comm->bs, mine, sizeof(mine), digests, deadline);
    if (st == COLL_OK) {
        i = agree_first(comm, digests, &first, &others);
    }
    coll_free(digests);
    if (st != COLL_OK) {
        return st;
    }
    if (i < 0) {
        snprintf(msg, sizeof(msg), "the ranks run libraries whose parameters differ");
    } else {
        memset(text, 0, sizeof(text));
        agree_text(i, text);
        texts = coll_calloc((size_t)comm->nranks, sizeof(text), "parameter values");
        if (texts == NULL) {
            return COLL_ERR_NO_MEMORY;
        }
        st = coll_bootstrap_allgather(comm->bs, text, sizeof(text), texts, deadline);
        if (st == COLL_OK) {
            agree_message(i, texts, texts + (size_t)first * AGREE_TEXT, first, others, msg,
                          sizeof(msg));
        }
        coll_free(texts);
        if (st != COLL_OK) {
            return st;
        }
    }
    coll_error(INIT, "rank %d: %s", comm->rank, msg);
    return coll_set_last_error(COLL_ERR_MISMATCH, "rank %d: %s", comm->rank, msg);
}

coll_result_t coll_comm_agree_params(coll_comm_t *comm, double deadline)
{
    uint64_t      mine  = 0, *all;
    int           alike = 1;
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
    return st != COLL_OK || alike ? st : agree_report(comm, deadline);
}
