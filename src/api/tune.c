/* SPDX-License-Identifier: MIT */
/*
 * Building a communicator's layout from the peers' host identities (and whether its ranks can
 * share memory windows) and its cost model from the COLL_INTRA_* / COLL_INTER_* /
 * COLL_REDUCE_BW parameters.
 */
#include "api/tune.h"
#include "error.h"
#include "log.h"
#include "param.h"
#include "util.h"

static void tune_from_params(coll_model_t *m)
{
    coll_model_default(m);
    m->intra.alpha_us         = coll_param_time(COLL_P_INTRA_LAT) * 1e6;
    m->intra.beta_us_per_byte = 1e6 / (double)coll_param_size(COLL_P_INTRA_BW);
    m->inter.alpha_us         = coll_param_time(COLL_P_INTER_LAT) * 1e6;
    m->inter.beta_us_per_byte = 1e6 / (double)coll_param_size(COLL_P_INTER_BW);
    m->gamma_us_per_byte      = 1e6 / (double)coll_param_size(COLL_P_REDUCE_BW);
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

coll_result_t coll_tune_init(coll_comm_t *comm, double deadline)
{
    uint64_t *keys = coll_calloc((size_t)comm->nranks, sizeof(*keys), "host keys");

    (void)deadline;
    if (keys == NULL) {
        return COLL_ERR_NO_MEMORY;
    }
    for (int r = 0; r < comm->nranks; r++) {
        keys[r] = comm->peers[r].host_hash;
    }
    coll_result_t st = coll_layout_init(&comm->layout, comm->nranks, keys);
    coll_free(keys);
    COLL_CHECK(st);
    tune_window(comm);
    tune_from_params(&comm->model);
    coll_info(ALGO,
              "rank %d: %d host(s), %d rank(s) per host, shared windows of %zu bytes; model: "
              "intra %.1f us %.2f GB/s, inter %.1f us %.2f GB/s, reduce %.2f GB/s",
              comm->rank, comm->layout.nhosts, comm->layout.local_size, comm->layout.window_bytes,
              comm->model.intra.alpha_us, 1e-3 / comm->model.intra.beta_us_per_byte,
              comm->model.inter.alpha_us, 1e-3 / comm->model.inter.beta_us_per_byte,
              1e-3 / comm->model.gamma_us_per_byte);
    return COLL_OK;
}
