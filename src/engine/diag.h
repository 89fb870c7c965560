/* SPDX-License-Identifier: MIT */
/*
 * Hang and desync diagnosis: the fingerprint of a collective call (what every rank must agree
 * on), the exchange of each rank's pending call when a wait times out (so the ranks that
 * called something else are named), the text of pending operations (coll_comm_dump_pending,
 * SIGUSR1), and the per-call arrival record behind coll_comm_stats. Not the engine's data path.
 */
#ifndef COLL_ENGINE_DIAG_H
#define COLL_ENGINE_DIAG_H

#include "engine.h"

#include <stddef.h>
#include <stdint.h>

/* 8 bits of the call's fingerprint, folded into its wire tags: a rank that called another
 * collective (or another count, dtype, op, root) posts receives that never match, so the
 * mismatch stalls into the diagnosis below instead of mixing data. */
uint8_t coll_diag_fp8(const coll_args_t *a);
/* "allreduce(4096 x f32, sum)", "broadcast(16 x i32, root 2)", "barrier()". */
void coll_diag_describe(const coll_args_t *a, char *buf, size_t len);
/* The oldest unfinished collective of comm (not point-to-point), or NULL. Lock held. */
coll_task_t *coll_diag_oldest(coll_comm_t *comm);
/* A wait on req (NULL: the call on the small-call slots in progress, small.c) ran past the
 * deadline: log this rank's one line (op, seq, peer waited on), then gather every rank's pending
 * call through the bootstrap for at most about 1 s and fail the communicator with COLL_ERR_MISMATCH
 * naming the disagreeing ranks, or COLL_ERR_TIMEOUT. Lock held. */
void coll_diag_timeout(coll_comm_t *comm, coll_task_t *req);
/* The call on the small-call slots in progress found rank's slot holding another call of the
 * same number: the same exchange, failing with COLL_ERR_MISMATCH. Lock held. */
void coll_diag_small_mismatch(coll_comm_t *comm, int rank);
/* One line per unfinished operation of comm into buf (always terminated); returns the length
 * the whole text needs. Lock held. */
size_t coll_diag_pending(coll_comm_t *comm, char *buf, size_t len);

/* Communicators alive in the process, for the SIGUSR1 dump. */
void coll_diag_register(coll_comm_t *comm);
void coll_diag_unregister(coll_comm_t *comm);
/* Called from waits: if SIGUSR1 arrived since the last call, log the pending operations of
 * every communicator (comm's lock is held by the caller; others are tried). */
void coll_diag_poll_signal(coll_comm_t *comm);

/* stats.c: arrival record. A finished collective of this rank waited wait_s from call to
 * completion (lock held). */
void coll_diag_record(coll_comm_t *comm, coll_op_t coll, uint32_t seq, double wait_s);
void coll_diag_stats_free(coll_comm_t *comm);
/* Bytes of one rank's packed record (equal on every rank), and packing it (lock held). */
size_t coll_diag_stats_bytes(void);
void   coll_diag_stats_pack(coll_comm_t *comm, double *out);
/* From every rank's packed record: "rank 2 arrived last in 87% of collectives, mean +14.000
 * ms, max ..." lines. */
void coll_diag_stats_summary(const double *all, int nranks, char *buf, size_t len);

#endif
