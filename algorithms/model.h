/* SPDX-License-Identifier: MIT */
/*
 * The cost model the tuner feeds to every algorithm's cost function: an alpha-beta pair for
 * each kind of link (between ranks of one host, between hosts) and the local cost of reducing
 * or copying a byte. Values come from parameters or from measurements at communicator creation
 * (src/api/tune.c); every rank of a communicator holds the same values, so every rank makes
 * the same choice.
 */
#ifndef COLL_MODEL_H
#define COLL_MODEL_H

#include <stddef.h>

typedef struct coll_link_model {
    double alpha_us;         /* latency of one message */
    double beta_us_per_byte; /* inverse bandwidth of one stream */
} coll_link_model_t;

typedef struct coll_model {
    coll_link_model_t intra;             /* ranks on one host */
    coll_link_model_t inter;             /* ranks on different hosts */
    double            gamma_us_per_byte; /* reducing one byte into another (memory-bound) */
    /* Network links (NICs, "rails") per host: streams leaving one host at once share them, each
     * stream at most one link's bandwidth. < 1 counts as 1. */
    int inter_nics;
    /* Extra cost of each dependent step (a rank waits for a peer) when the host runs more ranks
     * than it has CPUs: the peer must first be scheduled. 0 when it does not. */
    double sched_us;
} coll_model_t;

/* The bandwidth share of each of `streams` streams leaving one host at once: inter beta times
 * streams / inter_nics, never below one link's beta. */
double coll_model_inter_beta(const coll_model_t *m, int streams);

/* The defaults: shm on a small host, TCP over a 10 Gbit/s-class network, one NIC per host. */
void coll_model_default(coll_model_t *m);

/* One line for logs and collinfo: "intra 4.0 us 6.00 GB/s, inter 30.0 us ..., reduce ...". */
void coll_model_format(const coll_model_t *m, char *buf, size_t len);

#endif
