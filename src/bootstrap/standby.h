/* SPDX-License-Identifier: MIT */
/*
 * Standby roots: the bootstrap root is a thread of the process that made the unique id (rank
 * 0's, as a rule), so it dies with that process, and with it the survivors' means of agreeing
 * on a shrink. Every rank therefore listens on a standby address of its own (a socket nobody
 * accepts on until it is needed; the addresses are exchanged in the bootstrap's first round).
 * When the root is gone, the survivors elect the lowest rank that still answers: each tries
 * the ranks in order, a refused connection meaning a dead process; the lowest live rank
 * reaches itself, accepts the others (authenticated with the job secret, like every other
 * connection), decides who is left as the root would, starts the root of their new
 * communicator and answers them.
 */
#ifndef COLL_BOOTSTRAP_STANDBY_H
#define COLL_BOOTSTRAP_STANDBY_H

#include <pthread.h>
#include <stdint.h>
#include "auth.h"
#include "coll.h"
#include "sock.h"
#include "wire.h"

typedef struct {
    int               listen_fd; /* -1: none */
    int               rank, nranks;
    uint64_t          job_tag;
    coll_auth_key_t   key;   /* purpose "standby", context the unique id's nonce */
    coll_sockaddr_t   local; /* where this rank listens */
    coll_boot_addr_t *table; /* every rank's standby address, once exchanged */
    /* after this rank ran a shrink: a thread gives its answer to ranks that ask late (they
     * learn that they were left out) until the communicator is destroyed */
    int       late_running;
    int       late_stop[2];
    pthread_t late;
    char     *answer;
    uint32_t  answer_len;
} coll_standby_t;

/* Listen on the local address of root_fd (the interface that reaches the root, so the other
 * ranks reach it too) at any port; mine gets the address to exchange. */
coll_result_t coll_standby_open(coll_standby_t *sb, int root_fd, int rank, int nranks,
                                const uint8_t secret[16], uint64_t nonce, uint64_t job_tag,
                                coll_boot_addr_t *mine);
/* Keep the exchanged table (nranks entries); COLL_ERR_TRANSPORT when an entry is not an
 * address. */
coll_result_t coll_standby_set_table(coll_standby_t *sb, const coll_boot_addr_t *all);
void          coll_standby_close(coll_standby_t *sb);

/* The election and the shrink without the root; same results as coll_bootstrap_shrink. */
coll_result_t coll_standby_shrink(coll_standby_t *sb, double deadline, int32_t *survivors,
                                  int *nsurvivors_p, coll_unique_id_t *id_p);

/* Read a SHRUNK answer from fd (notices before it are skipped). */
coll_result_t coll_boot_read_shrunk(int fd, uint64_t job_tag, int rank, int nranks, double deadline,
                                    int32_t *survivors, int *nsurvivors_p, coll_unique_id_t *id_p);

#endif
