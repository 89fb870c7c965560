/* SPDX-License-Identifier: MIT */
/*
 * The tuner's inputs for one communicator: its layout (hosts) and the cost model (per-link
 * latency and bandwidth, local reduction speed), from parameters or measured at creation and
 * agreed by every rank; and the once-per-choice log of what the tuner picked. collinfo calls
 * the same functions, so its predictions are the tuner's.
 */
#ifndef COLL_API_TUNE_H
#define COLL_API_TUNE_H

#include <stddef.h>
#include "coll.h"
#include "model.h"
#include "topo/place.h"

/* The model the parameters describe (defaults where unset); nothing measured. */
void coll_model_from_params(coll_model_t *m);

/* After the transports are connected: fills comm->layout and comm->model. Collective. */
coll_result_t coll_tune_init(coll_comm_t *comm, double deadline);

/* The default model overridden by COLL_INTRA_LAT, COLL_INTRA_BW, COLL_INTER_LAT, COLL_INTER_BW
 * and COLL_REDUCE_BW: the only place these parameters are read. */
void coll_model_from_params(coll_model_t *m);

/* Unless COLL_INTER_BW is set, the inter-host bandwidth of m from the link speeds of the NICs
 * the ranks at places[0..n) use (coll_topo_inter_bw); 1 when applied, 0 when unknown. */
int coll_model_nic_bw(coll_model_t *m, const coll_topo_place_t *places, int n);

/* The pipeline chunk every call's arguments carry: COLL_CHUNK_SIZE, at least 64 bytes. */
size_t coll_tune_chunk_bytes(void);

#endif
