/* SPDX-License-Identifier: MIT */
/*
 * Out-of-band bootstrap: a root (a thread in the process that made the unique id) that every
 * rank joins over TCP. It serves small all-gathers and barriers during communicator creation
 * and stays connected for the communicator's life as the control plane: it tells every rank
 * when another rank aborted or disconnected without finishing (died), and makes destroy
 * collective. Every connection to the root is authenticated with the job secret (auth.h) before
 * its first header is read. Ranks are discovered from the environment by env.c.
 */
#ifndef COLL_BOOTSTRAP_H
#define COLL_BOOTSTRAP_H

#include <stddef.h>
#include <stdint.h>
#include "auth.h"
#include "coll.h"
#include "sock.h"

typedef struct coll_bootstrap coll_bootstrap_t;
typedef struct coll_boot_root coll_boot_root_t;

/* Start a root listening on bind_addr (port 0 = any) for a new id made of secret and nonce. */
coll_result_t coll_boot_root_start(const coll_sockaddr_t *bind_addr,
                                   const coll_sockaddr_t *advertise_addr, const uint8_t secret[16],
                                   uint64_t nonce, coll_unique_id_t *id_p);
/* Build an id without starting a root (ranks other than the root under coll_init). */
void coll_boot_uid_make(const coll_sockaddr_t *addr, const uint8_t secret[16], uint64_t nonce,
                        coll_unique_id_t *id_p);
coll_result_t coll_boot_uid_parse(const coll_unique_id_t *id, coll_sockaddr_t *addr_p,
                                  uint8_t secret[16], uint64_t *nonce_p);

/* Seconds a joining rank waits past its deadline for the root's answer: the root's own join
 * deadline (counted from the id's creation) passes about when the ranks' do, and its message
 * names the ranks that never joined, which a rank's own timeout cannot. */
#define COLL_BOOT_JOIN_GRACE 2.0

/* Join: connect, say hello, wait until every rank has joined (until deadline, plus
 * COLL_BOOT_JOIN_GRACE for the root's verdict). A rank that gives up before every rank joined
 * says BYE, so the others do not hear of it as a failure. */
coll_result_t coll_bootstrap_connect(const coll_unique_id_t *id, int rank, int nranks,
                                     double deadline, coll_bootstrap_t **bs_p);
/* all receives nranks * len bytes, rank r's contribution at r * len. */
coll_result_t coll_bootstrap_allgather(coll_bootstrap_t *bs, const void *mine, size_t len,
                                       void *all, double deadline);
coll_result_t coll_bootstrap_barrier(coll_bootstrap_t *bs, double deadline);
/* Non-blocking: read control notices. Returns COLL_OK, or the job's failure (once known,
 * always the same) with the message in msg. */
coll_result_t coll_bootstrap_poll(coll_bootstrap_t *bs, char *msg, size_t msglen);
/* Tell every rank that this one aborted. */
void coll_bootstrap_abort(coll_bootstrap_t *bs, const char *reason);
/* Tell every rank that this rank's communicator failed (it joins no further round); they fail
 * with COLL_ERR_REMOTE naming it. */
void coll_bootstrap_failed(coll_bootstrap_t *bs, const char *reason);
/* Tell every rank that the communicator is revoked (they fail with COLL_ERR_REVOKED). */
void coll_bootstrap_revoke(coll_bootstrap_t *bs, const char *reason);
/* Survivors' agreement, through the root, even after a failure: returns the ordered old ranks
 * that continue (survivors has room for nranks) and the unique id of their communicator. */
coll_result_t coll_bootstrap_shrink(coll_bootstrap_t *bs, double deadline, int32_t *survivors,
                                    int *nsurvivors_p, coll_unique_id_t *id_p);
/* Collective close: BYE, then wait (until deadline) for every rank's BYE; frees bs. COLL_OK:
 * every rank finished (the root said FIN); COLL_AGAIN: the root is gone; or COLL_ERR_TIMEOUT. */
coll_result_t coll_bootstrap_close(coll_bootstrap_t *bs, double deadline);
/* The control socket (readable when a notice arrives). */
int      coll_bootstrap_fd(const coll_bootstrap_t *bs);
uint64_t coll_bootstrap_job_tag(const coll_bootstrap_t *bs);
/* Secret-derived 64-bit value, equal on all ranks (seed for comm ids of splits). */
uint64_t coll_bootstrap_seed(const coll_bootstrap_t *bs);

/* The key that authenticates connections of purpose ("transport") in context ctx (the
 * communicator id), derived from the job secret. */
void coll_bootstrap_auth_key(const coll_bootstrap_t *bs, const char *purpose, uint64_t ctx,
                             coll_auth_key_t *key);

/* The connector's side of the handshake (auth.h) on fd: COLL_OK; COLL_ERR_INVALID_ARG when
 * what came was no challenge; COLL_ERR_TRANSPORT when the peer's proof is wrong (it does not
 * hold the key); else the socket's error (COLL_ERR_TIMEOUT, COLL_ERR_REMOTE when closed, ...).
 * Used for the root and for a survivor's standby (standby.c). */
coll_result_t coll_boot_auth_connect(int fd, const coll_auth_key_t *key, double deadline);

/* root.c internals used by bootstrap.c */
/* The errno of the last failed accept of this process's root for nonce (out of descriptors or
 * memory), 0 if it accepts or runs elsewhere. */
int  coll_boot_root_accept_errno(uint64_t nonce);
void coll_boot_root_join(uint64_t nonce);

/* env.c: the job as the launcher describes it. */
typedef struct {
    int             rank, nranks, local_rank, local_nranks;
    coll_sockaddr_t root_addr;
    uint8_t         secret[16];
    const char     *launcher; /* "collrun", "torchrun", "slurm", "openmpi", "mpich" */
} coll_env_job_t;
coll_result_t coll_env_discover(coll_env_job_t *job);

#endif
