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
#include "topo/topo.h"

/* The model the parameters describe (defaults where unset); nothing measured. */
void coll_model_from_params(coll_model_t *m);
/* The cost model's step cost (coll_model_t.sched_us) for `local` ranks on this host: 0 unless
 * they outnumber its online CPUs (COLL_OVERSUB_STEP). */
double coll_tune_sched_us(int local);

/* After the transports are connected: fills comm->layout and comm->model. Collective. */
coll_result_t coll_tune_init(coll_comm_t *comm, double deadline);

/* The default model overridden by COLL_INTRA_LAT, COLL_INTRA_BW, COLL_INTER_LAT, COLL_INTER_BW
 * and COLL_REDUCE_BW: the only place these parameters are read. */
void coll_model_from_params(coll_model_t *m);

/* What coll_model_from_topo read from a host's topology. */
typedef struct coll_tune_topo {
    int              ranks_per_host;
    int              gpus;          /* GPUs the ranks use; 0: none (ranks placed by NUMA node) */
    coll_topo_link_t intra_link;    /* the worst hop of the host's ring; X: one GPU or none */
    int              ring_hosts;    /* host crossings of the host's ring (0: one host) */
    int              ring_packages; /* its crossings between packages */
    int              nics;          /* NICs the ranks use (each GPU's nearest); 0: none */
    int              nic_mbps;      /* the slowest of them in Mb/s; 0: unknown */
    int              rdma;          /* every one of them has a verbs device */
} coll_tune_topo_t;

/* The model for hosts like t, each running ranks_per_host ranks (rank r on GPU r mod ngpu):
 * intra link from the worst hop of the host's ring, inter link and NIC count from the NICs
 * the ranks use, GPU reduction speed; defaults where t says nothing, and every COLL_INTRA_*,
 * COLL_INTER_* and COLL_REDUCE_BW parameter that is set wins. info_p may be NULL. */
coll_result_t coll_model_from_topo(const coll_topo_t *t, int ranks_per_host, coll_model_t *m,
                                   coll_tune_topo_t *info_p);
/* Unless COLL_INTER_BW is set, the inter-host bandwidth of m from the link speeds of the NICs
 * the ranks at places[0..n) use (coll_topo_inter_bw); 1 when applied, 0 when unknown. */
int coll_model_nic_bw(coll_model_t *m, const coll_topo_place_t *places, int n);

/* The pipeline chunk every call's arguments carry: COLL_CHUNK_SIZE, from 64 bytes to 1 GiB. */
#define COLL_TUNE_CHUNK_MAX ((size_t)1 << 30)
size_t coll_tune_chunk_bytes(void);

#endif
