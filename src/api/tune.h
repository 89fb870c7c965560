/* SPDX-License-Identifier: MIT */
/*
 * The tuner's inputs for one communicator: its layout (hosts) and the cost model (per-link
 * latency and bandwidth, local reduction speed), from parameters or measured at creation and
 * agreed by every rank; and the once-per-choice log of what the tuner picked.
 */
#ifndef COLL_API_TUNE_H
#define COLL_API_TUNE_H

#include "api/comm.h"

/* The model the parameters describe (defaults where unset); nothing measured. */
void coll_model_from_params(coll_model_t *m);

/* After the transports are connected: fills comm->layout and comm->model. Collective. */
coll_result_t coll_tune_init(coll_comm_t *comm, double deadline);

#endif
