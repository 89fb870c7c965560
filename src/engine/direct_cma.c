/* SPDX-License-Identifier: MIT */
/*
 * The direct path on buffers nobody registered: the ranks of one host move the call's bytes
 * between each other's own buffers with cross-memory attach (process_vm_readv(2) and
 * process_vm_writev(2)), the addresses and process ids exchanged in the slots' first round
 * (direct.c decides, orders and ends the call; this file moves bytes). Same shapes as the
 * registered path, one kernel copy where that path copies through mappings:
 *
 *   all-reduce      rank r reads slice r of every peer's input, a block at a time, into a
 *                   buffer that stays in the cache, reduces it with its own (rank order) into
 *                   its output and writes the block into every peer's output.
 *   reduce-scatter  rank r reads block r of every peer's input and reduces into its output.
 *   all-gather      rank r reads every peer's input into its output.
 *
 * Whether a process may read and write another's memory is the kernel's decision (same user,
 * ptrace access mode: Yama, seccomp in containers): the first call that would take this path
 * probes every peer (a word on the peer's stack, published with its value) and the ranks agree
 * on one verdict for the communicator's life. A failed transfer later (a peer gone) fails the
 * communicator, naming the peer.
 */
#include "direct.h"
#include "compiler.h"
#include "error.h"
#include "log.h"
#include "param.h"
#include "reduce/reduce.h"
#include "util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

/* Bytes read from each peer, reduced and pushed while in the cache: an eighth of the L2 (three
 * such blocks and the own input's are in it at once), 32 KiB - 1 MiB, 256 KiB when the cache is
 * not known. 256 KiB against 64 KiB on a 2 MiB L2: 1.1-1.4x from 256 KiB to 16 MiB. */
static size_t cma_block_size(void)
{
    static size_t block;
    if (block == 0) {
        long   l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
        size_t b  = l2 > 0 ? (size_t)l2 / 8 : 262144;
        b         = b < 32768 ? 32768 : b > 1048576 ? 1048576 : b;
        block     = b / 4096 * 4096;
    }
    return block;
}
#define CMA_BLOCK cma_block_size()

/* One transfer of n bytes between here and rank q's [addr, addr + n): read into buf, or write
 * from it; retried on partial transfers. A failure is logged here and kept in comm->cma_fail for
 * the call's last round, which every rank still joins (direct.c): a peer may still be moving
 * bytes to or from this rank's buffers, and every rank then fails alike. */
static coll_result_t cma_move(coll_comm_t *comm, const coll_direct_peer_t *p, int q, int write,
                              void *buf, uint64_t addr, size_t n)
{
    size_t done = 0;

    while (done < n) {
        struct iovec local  = {(char *)buf + done, n - done};
        struct iovec remote = {(void *)(uintptr_t)(addr + done), n - done};
        ssize_t      got    = write ? process_vm_writev(p->pid, &local, 1, &remote, 1, 0)
                                    : process_vm_readv(p->pid, &local, 1, &remote, 1, 0);
        if (got <= 0) {
            int err = got == 0 ? EIO : errno;
            coll_error(ALGO,
                       "rank %d: %s op #%u: cannot %s %zu bytes %s rank %d (pid %d) at 0x%" PRIx64
                       " by cross-memory attach: %s",
                       comm->rank, coll_op_name(comm->small_args.coll), comm->small_seq,
                       write ? "write" : "read", n - done, write ? "into" : "of", q, (int)p->pid,
                       addr + done, strerror(err));
            comm->cma_fail.peer  = q;
            comm->cma_fail.err   = err;
            comm->cma_fail.write = write;
            return err == ESRCH ? COLL_ERR_REMOTE : COLL_ERR_TRANSPORT;
        }
        done += (size_t)got;
    }
    return COLL_OK;
}

/* All-reduces from COLL_DIRECT_CMA_MIN bytes (the engine's windows win below: 2 ranks on 2
 * CPUs, level at 16-32 KiB, 1.5x faster from 64 KiB); all-gathers and reduce-scatters from
 * COLL_DIRECT_CMA_AGRS_MIN bytes in all (count times size times ranks: one transfer per peer, no
 * push, 3x faster than the engine's rings from 4-16 KiB; reduce-scatters of 2-4 KiB at 4 ranks
 * on 2 CPUs: 42-65 us against the rings' 110-230). Up to COLL_SMALL_AGRS_MAX (32 KiB) of input
 * the small-call slots serve first, so this minimum matters only where that one is lowered. Where
 * ranks outnumber the CPUs both grow with the ranks per CPU: every rank's small blocks and system
 * calls wait for a CPU (4 and 8 ranks on 2 CPUs: level at 128 and 256 KiB for the all-reduce, 4-16
 * KiB at 4 ranks for the others). */
int coll_direct_cma_wanted(const coll_comm_t *comm, const coll_args_t *a)
{
    size_t bytes = a->count * coll_dtype_size(a->dtype);
    size_t min   = coll_param_size(COLL_P_DIRECT_CMA_MIN);
    if (a->coll != COLL_OP_ALLREDUCE) {
        bytes *= (size_t)comm->nranks;
        min = coll_param_size(COLL_P_DIRECT_CMA_AGRS_MIN);
    }
    size_t f = (size_t)(comm->oversub_factor > 1 ? comm->oversub_factor : 1);
    return comm->cma_state >= 0 && comm->nranks <= COLL_MAX_LOCAL_DIRECT &&
           coll_param_bool(COLL_P_DIRECT_CMA) &&
           bytes / f >= min; /* min * f could wrap: a threshold meant as never became 0 */
}

/* Read rank q's probe word and write it back (a filter may allow one direction only). */
static int cma_probe_one(coll_comm_t *comm, const coll_direct_peer_t *p, int q)
{
    uint64_t     word   = 0;
    struct iovec local  = {&word, sizeof(word)};
    struct iovec remote = {(void *)(uintptr_t)p->probe_addr, sizeof(word)};
    ssize_t      got    = process_vm_readv(p->pid, &local, 1, &remote, 1, 0);
    const char  *why    = NULL;

    if (got != (ssize_t)sizeof(word)) {
        why = got < 0 ? strerror(errno) : "short read";
    } else if (word != p->probe_val) {
        why = "the word read differs";
    } else if (process_vm_writev(p->pid, &local, 1, &remote, 1, 0) != (ssize_t)sizeof(word)) {
        why = strerror(errno);
    }
    if (why != NULL) {
        coll_info(ALGO,
                  "rank %d: cannot read and write rank %d's memory (pid %d) by cross-memory "
                  "attach (%s): unregistered buffers take the engine",
                  comm->rank, q, (int)p->pid, why);
    }
    return why == NULL;
}

char *coll_direct_cma_tmp(coll_comm_t *comm)
{
    if (comm->cma_tmp == NULL) {
        void *p = NULL;
        if (posix_memalign(&p, 64, 3 * CMA_BLOCK) == 0) {
            comm->cma_tmp = p;
        }
    }
    return comm->cma_tmp;
}

int coll_direct_cma_probe(coll_comm_t *comm, const coll_direct_peer_t *peers)
{
    for (int q = 0; q < comm->nranks; q++) {
        if (q != comm->rank && !cma_probe_one(comm, &peers[q], q)) {
            return 0;
        }
    }
    return 1;
}

/* dst[0, m) = x0 op x1 op ... op x(n-1), each xq the m elements at byte offset b of rank q's
 * input (the own one in place: mine), reduced in rank order so that every rank would compute the
 * same bits. In place with me >= 2 the own block is set aside first (the partial result
 * overwrites it before its turn). */
static coll_result_t cma_reduce_block(coll_comm_t *comm, const coll_args_t *a,
                                      const coll_direct_peer_t *peers, char *dst, const char *mine,
                                      size_t b, size_t m, char *tmp)
{
    int           n = comm->nranks, me = comm->rank;
    size_t        es = coll_dtype_size(a->dtype), bytes = m * es;
    coll_redop_t  op  = a->op == COLL_AVG ? COLL_SUM : a->op;
    const char   *own = mine, *first = NULL;
    coll_result_t st = COLL_OK;

    if (me >= 2 && dst == mine) {
        memcpy(tmp + 2 * CMA_BLOCK, mine, bytes);
        own = tmp + 2 * CMA_BLOCK;
    }
    for (int q = 0; q < n && st == COLL_OK; q++) {
        const char *src = own;
        if (q != me) { /* rank 0's block in the first buffer, every later one in the second */
            char *into = tmp + (q == 0 ? 0 : CMA_BLOCK);
            st         = cma_move(comm, &peers[q], q, 0, into, peers[q].in + b, bytes);
            src        = into;
        }
        if (q == 0) {
            first = src;
        } else if (st == COLL_OK) {
            coll_reduce3(a->dtype, op, dst, q == 1 ? first : dst, src, m);
        }
    }
    if (st == COLL_OK && a->op == COLL_AVG) {
        coll_reduce_div(a->dtype, dst, m, n);
    }
    return st;
}

coll_result_t coll_direct_cma_allreduce(coll_comm_t *comm, const coll_args_t *a,
                                        const coll_direct_peer_t *peers, const void *sendbuf,
                                        void *recvbuf)
{
    size_t        es = coll_dtype_size(a->dtype), block = CMA_BLOCK / es, lo, hi;
    const char   *in  = sendbuf; /* in place: recvbuf */
    char         *out = recvbuf, *tmp = comm->cma_tmp;
    coll_result_t st = COLL_OK; /* tmp made before the call (direct.c) */

    coll_direct_slice(a, comm->nranks, comm->rank, &lo, &hi);
    for (size_t i = lo; i < hi && st == COLL_OK; i += block) {
        size_t m = hi - i < block ? hi - i : block;
        st       = cma_reduce_block(comm, a, peers, out + i * es, in + i * es, i * es, m, tmp);
        for (int k = 1; k < comm->nranks && st == COLL_OK; k++) { /* pushed while in the cache */
            int q = (comm->rank + k) % comm->nranks;
            st    = cma_move(comm, &peers[q], q, 1, out + i * es, peers[q].out + i * es, m * es);
        }
    }
    return st;
}

coll_result_t coll_direct_cma_reduce_scatter(coll_comm_t *comm, const coll_args_t *a,
                                             const coll_direct_peer_t *peers, const void *sendbuf,
                                             void *recvbuf)
{
    size_t        es = coll_dtype_size(a->dtype), block = CMA_BLOCK / es;
    size_t        base = (size_t)comm->rank * a->count * es; /* the own block of every input */
    const char   *in   = sendbuf;                            /* in place: recvbuf - base */
    char         *out = recvbuf, *tmp = comm->cma_tmp;
    coll_result_t st = COLL_OK; /* tmp made before the call (direct.c) */

    for (size_t i = 0; i < a->count && st == COLL_OK; i += block) {
        size_t m = a->count - i < block ? a->count - i : block;
        st = cma_reduce_block(comm, a, peers, out + i * es, in + base + i * es, base + i * es, m,
                              tmp);
    }
    return st;
}

coll_result_t coll_direct_cma_allgather(coll_comm_t *comm, const coll_args_t *a,
                                        const coll_direct_peer_t *peers, const void *sendbuf,
                                        void *recvbuf)
{
    size_t        bytes = a->count * coll_dtype_size(a->dtype);
    size_t        at    = (size_t)comm->rank * bytes;
    coll_result_t st    = COLL_OK; /* in place: sendbuf is recvbuf + at */

    if (!a->in_place) {
        memcpy((char *)recvbuf + at, sendbuf, bytes);
    }
    /* pulled: each rank writes its own memory only (no faults taken in a peer's address space
     * on its behalf); 2 ranks, 256 MiB: 44-55 ms against 51-54 pushed, level below */
    for (int k = 1; k < comm->nranks && st == COLL_OK; k++) {
        int q = (comm->rank + k) % comm->nranks;
        st    = cma_move(comm, &peers[q], q, 0, (char *)recvbuf + (size_t)q * bytes, peers[q].in,
                         bytes);
    }
    return st;
}
