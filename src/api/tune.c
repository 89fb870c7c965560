/* SPDX-License-Identifier: MIT */
/*
 * Building a communicator's layout from the peers' host identities and its cost model from
 * the COLL_INTRA_* / COLL_INTER_* / COLL_REDUCE_BW parameters.
 */
#include "api/tune.h"
#include "api/comm.h"
#include "error.h"
#include "log.h"
#include "param.h"
#include "util.h"

void coll_model_from_params(coll_model_t *m)
{
    coll_model_default(m);
    m->intra.alpha_us         = coll_param_time(COLL_P_INTRA_LAT) * 1e6;
    m->intra.beta_us_per_byte = 1e6 / (double)coll_param_size(COLL_P_INTRA_BW);
    m->inter.alpha_us         = coll_param_time(COLL_P_INTER_LAT) * 1e6;
    m->inter.beta_us_per_byte = 1e6 / (double)coll_param_size(COLL_P_INTER_BW);
    m->gamma_us_per_byte      = 1e6 / (double)coll_param_size(COLL_P_REDUCE_BW);
}

size_t coll_tune_chunk_bytes(void)
{
    size_t chunk = coll_param_size(COLL_P_CHUNK_SIZE);

    return (chunk < 64) ? 64 : chunk;
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
    coll_model_from_params(&comm->model);
    if (coll_log_enabled(COLL_LOG_INFO, COLL_SS_ALGO)) {
        char model[160];

        coll_model_format(&comm->model, model, sizeof(model));
        coll_info(ALGO, "rank %d: %d host(s), %d rank(s) per host; model: %s", comm->rank,
                  comm->layout.nhosts, comm->layout.local_size, model);
    }
    return COLL_OK;
}
