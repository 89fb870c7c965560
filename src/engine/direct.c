/* SPDX-License-Identifier: MIT */
/*
 * The direct path: blocking all-reduce, reduce-scatter and all-gather among ranks of one host
 * whose buffers every rank registered (coll_comm_register), so that every rank has the others'
 * buffers mapped (to read and write). No staging and no messages.
 *
 *   all-reduce      rank r reduces slice r of every rank's input, in rank order, a block at a
 *                   time, into its own output and writes the block into every peer's output
 *                   while it is in the cache (pushed; input and output registered). Per rank:
 *                   reads S, writes S, the bound's bytes. With COLL_DIRECT_PUSH=0 it reduces
 *                   slice r into its output only and, after a round, copies the other slices
 *                   from their owners' outputs (reads S + S/2 at 2 ranks).
 *   reduce-scatter  rank r reduces block r of every rank's input into its output (inputs
 *                   registered).
 *   all-gather      rank r writes its input into every rank's output (pushed, outputs
 *                   registered), else copies every rank's input into its own output (inputs
 *                   registered).
 *
 * Rounds of the small-call slots (src/engine/small.c) order it: the first publishes where each
 * rank's buffers are (registration number and offset), the set of registrations it holds and
 * whether it pushes, and the process id and addresses for cross-memory attach; from these every
 * rank makes the same choice: registered, else cross-memory attach (direct_cma.c; where the
 * communicator's verdict on it is not made yet, a probe and one more round make it), else the
 * engine. A last round before returning keeps every buffer unchanged until no
 * other rank reads or writes it. Timeouts and dead ranks are those of the slots' waits. In place
 * works as each slice (block) is read and written by its owner alone: a pushed all-reduce block
 * is read from every input before it is written into every output.
 */
#include "config.h"

#include "direct.h"
#include "api/register.h"
#include "compiler.h"
#include "error.h"
#include "log.h"
#include "param.h"
#include "reduce/reduce.h"
#include "util.h"

#include <string.h>
#include <unistd.h>
#ifdef HAVE_VALGRIND_MEMCHECK_H
#include <valgrind/memcheck.h>
/* Bytes a peer wrote into this process (process_vm_writev) are defined; memcheck cannot see
 * that write. No effect outside valgrind. */
#define DIRECT_PEER_WROTE(p, n) ((void)VALGRIND_MAKE_MEM_DEFINED((p), (n)))
#else
#define DIRECT_PEER_WROTE(p, n) ((void)(p), (void)(n))
#endif

#define DIRECT_BLOCK      32768 /* bytes reduced from every input while they stay in the cache */
#define DIRECT_PUSH_BLOCK 65536 /* bytes reduced, then written to every output, at a time */

typedef struct direct_desc {
    int32_t  coll;
    int32_t  in_reg;  /* registration number of the input, -1: not registered */
    int32_t  out_reg; /* of the output */
    int32_t  pad;
    uint64_t in_off;
    uint64_t out_off;
    uint64_t live; /* the registrations this rank holds (a hash of their numbers) */
    int32_t  push; /* COLL_DIRECT_PUSH here */
    int32_t  cma;  /* cross-memory attach: -1 not wanted, 0 untried, 1 works (direct_cma.c) */
    int32_t  pid;
    int32_t  status;   /* last round: COLL_OK, or this rank's failed transfer (with bad_*) */
    int32_t  bad_peer; /* the rank it moved bytes to or from */
    int32_t  bad_errno;
    int32_t  bad_write;
    uint64_t in_addr; /* the buffers' own addresses, for cross-memory attach */
    uint64_t out_addr;
    uint64_t probe_addr;
    uint64_t probe_val;
} direct_desc_t;

int coll_direct_eligible(coll_comm_t *comm, coll_args_t *a)
{
    size_t bytes = a->count * coll_dtype_size(a->dtype);

    return (a->coll == COLL_OP_ALLREDUCE || a->coll == COLL_OP_REDUCE_SCATTER ||
            a->coll == COLL_OP_ALLGATHER) &&
           !a->device && bytes != 0 && coll_small_slots(comm) &&
           ((comm->regs_live != 0 && bytes >= coll_param_size(COLL_P_DIRECT_MIN) &&
             coll_param_bool(COLL_P_DIRECT)) ||
            coll_direct_cma_wanted(comm, a)) &&
           coll_small_call_free(comm, a);
}

/* Where rank q's registered bytes [off, off + len) of registration num are mapped here. */
static char *direct_at(const coll_comm_t *comm, int q, int32_t num, uint64_t off, size_t len)
{
    const coll_reg_t *reg = num >= 0 && num < comm->nregs ? comm->regs[num] : NULL;
    if (reg == NULL || reg->at[q] == NULL || off > reg->len[q] || len > reg->len[q] - off) {
        return NULL;
    }
    return reg->at[q] + off;
}

/* dst[0, count) = x[0] op x[1] op ... op x[n - 1] at element off of each input, in blocks
 * that stay in the cache. In place (dst is x[me] + off) with me >= 2, the own input is copied
 * aside first: the partial result x[0] op x[1] overwrites it before its turn. */
static void direct_reduce(const coll_args_t *a, int n, int me, char *dst, const char *const *x,
                          size_t off, size_t count)
{
    _Alignas(64) unsigned char own[DIRECT_BLOCK];
    size_t                     es    = coll_dtype_size(a->dtype);
    size_t                     block = n == 2 ? count : DIRECT_BLOCK / es;
    coll_redop_t               op    = a->op == COLL_AVG ? COLL_SUM : a->op;
    int                        aside = me >= 2 && dst == x[me] + off * es;

    for (size_t i = 0; i < count; i += block) {
        size_t m = count - i < block ? count - i : block;
        size_t b = (off + i) * es;
        if (aside) {
            memcpy(own, x[me] + b, m * es);
        }
        coll_reduce3(a->dtype, op, dst + i * es, x[0] + b, x[1] + b, m);
        for (int q = 2; q < n; q++) {
            coll_reduce3(a->dtype, op, dst + i * es, dst + i * es,
                         q == me && aside ? (const char *)own : x[q] + b, m);
        }
        if (a->op == COLL_AVG) {
            coll_reduce_div(a->dtype, dst + i * es, m, n);
        }
    }
}

void coll_direct_slice(const coll_args_t *a, int n, int r, size_t *lo, size_t *hi)
{
    size_t unit  = 64 / coll_dtype_size(a->dtype);
    size_t chunk = (a->count + (size_t)n - 1) / (size_t)n;
    chunk        = (chunk + unit - 1) / unit * unit;
    *lo          = (size_t)r * chunk < a->count ? (size_t)r * chunk : a->count;
    *hi          = *lo + chunk < a->count ? *lo + chunk : a->count;
}

/* Copy n bytes of a call whose output has total bytes: past the caches (non-temporal stores)
 * when the output is at least COLL_DIRECT_STREAM_MIN bytes. */
static void direct_copy(char *dst, const char *src, size_t n, size_t total)
{
    size_t min = coll_param_size(COLL_P_DIRECT_STREAM_MIN);
    if (min != 0 && total >= min) {
        coll_copy_stream(dst, src, n);
    } else {
        memcpy(dst, src, n);
    }
}

static void direct_log(coll_comm_t *comm, const coll_args_t *a, int cma)
{
    uint32_t bit = 1u << (a->coll + (cma ? COLL_OP_COUNT : 0));
    if ((comm->direct_logged & bit) == 0) {
        comm->direct_logged |= bit;
        coll_info(ALGO, "rank %d: %s of %zu bytes (%s): direct, %s", comm->rank,
                  coll_op_name(a->coll), a->count * coll_dtype_size(a->dtype),
                  coll_dtype_name(a->dtype),
                  cma ? "cross-memory attach (buffers not registered)" : "registered buffers");
    }
}

/* Out of place from COLL_DIRECT_STREAM_REDUCE_MIN written bytes: count elements from off of
 * every input (this rank's slice of an all-reduce, its block of a reduce-scatter), reduced in
 * rank order and streamed into the nout outputs y at once, when they are all 16-byte aligned;
 * 0 where not (the caller reduces in blocks). In place the own output's lines were just read
 * as the input and cost no extra read: the blocks are faster. */
static int direct_reduce_nt(coll_comm_t *comm, const coll_args_t *a, int n, const char *const *xin,
                            size_t off, size_t count, void *const *y, int nout, size_t out)
{
    size_t es = coll_dtype_size(a->dtype), min = coll_param_size(COLL_P_DIRECT_STREAM_REDUCE_MIN);
    const void *x[COLL_MAX_LOCAL_DIRECT];
    uint32_t    bit = 1u << (31 - a->coll); /* comm->direct_logged: above the per-path bits */

    if (a->in_place || min == 0 || out < min || !coll_reduce_nt_fits(y, nout)) {
        return 0;
    }
    for (int q = 0; q < n; q++) {
        x[q] = xin[q] + off * es;
    }
    coll_reduce_nt(a->dtype, a->op, x, n, y, nout, count);
    if ((comm->direct_logged & bit) == 0) {
        comm->direct_logged |= bit;
        coll_info(ALGO, "rank %d: %s of %zu bytes: direct, reduced and streamed", comm->rank,
                  coll_op_name(a->coll), out);
    }
    return 1;
}

/* The all-reduce, pushed: rank me reduces its slice block by block (while the block is in the
 * cache) into its own output and writes it into every peer's output. No round between: every
 * slice is read and written by its owner alone. */
static void direct_allreduce_push(coll_comm_t *comm, const coll_args_t *a, int n, int me,
                                  char *const *xout, const char *const *xin, size_t out)
{
    size_t es = coll_dtype_size(a->dtype), lo, hi, block = DIRECT_PUSH_BLOCK / es;
    coll_direct_slice(a, n, me, &lo, &hi);
    if (hi > lo) {
        void *y[COLL_MAX_LOCAL_DIRECT];
        for (int q = 0; q < n; q++) {
            y[q] = xout[(me + q) % n] + lo * es; /* outputs from the own one on */
        }
        if (direct_reduce_nt(comm, a, n, xin, lo, hi - lo, y, n, out)) {
            return;
        }
    }
    for (size_t i = lo; i < hi; i += block) {
        size_t m = hi - i < block ? hi - i : block;
        direct_reduce(a, n, me, xout[me] + i * es, xin, i, m);
        for (int k = 1; k < n; k++) {
            int q = (me + k) % n;
            direct_copy(xout[q] + i * es, xout[me] + i * es, m * es, out);
        }
    }
}

/* The all-gather, pushed: the own input, block by block, into every rank's output. */
static void direct_allgather_push(const coll_args_t *a, int n, int me, char *const *xout,
                                  const char *in, size_t bytes, size_t out)
{
    for (size_t i = 0; i < bytes; i += DIRECT_PUSH_BLOCK) {
        size_t m = bytes - i < DIRECT_PUSH_BLOCK ? bytes - i : DIRECT_PUSH_BLOCK;
        for (int k = a->in_place ? 1 : 0; k < n; k++) {
            int q = (me + k) % n;
            direct_copy(xout[q] + (size_t)me * bytes + i, in + i, m, out);
        }
    }
}

/* The registered path's moves, once every rank's buffers are mapped (xin, xout). */
static coll_result_t direct_registered(coll_comm_t *comm, const coll_args_t *a, direct_desc_t *mine,
                                       const char *const *xin, char *const *xout, int push,
                                       const void *sendbuf, void *recvbuf, int *parity_p,
                                       double *t0_p)
{
    int           n = comm->nranks, me = comm->rank;
    size_t        es  = coll_dtype_size(a->dtype);
    size_t        in  = a->count * es * (a->coll == COLL_OP_REDUCE_SCATTER ? (size_t)n : 1);
    size_t        out = a->count * es * (a->coll == COLL_OP_ALLGATHER ? (size_t)n : 1);
    coll_result_t st  = COLL_OK;

    switch (a->coll) {
    case COLL_OP_ALLREDUCE:
        if (push) {
            direct_allreduce_push(comm, a, n, me, xout, xin, out);
        } else { /* pulled: the own slice, a round, the others' slices from their outputs */
            size_t lo, hi;
            coll_direct_slice(a, n, me, &lo, &hi);
            if (hi > lo) {
                direct_reduce(a, n, me, (char *)recvbuf + lo * es, xin, lo, hi - lo);
            }
            st = coll_small_round(comm, a, mine, sizeof(*mine), parity_p, t0_p);
            for (int k = 1; k < n && st == COLL_OK; k++) {
                int q = (me + k) % n;
                coll_direct_slice(a, n, q, &lo, &hi);
                if (hi > lo) {
                    direct_copy((char *)recvbuf + lo * es, xout[q] + lo * es, (hi - lo) * es, out);
                }
            }
        }
        break;
    case COLL_OP_REDUCE_SCATTER:
        if (!direct_reduce_nt(comm, a, n, xin, (size_t)me * a->count, a->count, &recvbuf, 1, out)) {
            direct_reduce(a, n, me, recvbuf, xin, (size_t)me * a->count, a->count);
        }
        break;
    default:
        if (push) {
            direct_allgather_push(a, n, me, xout, sendbuf, in, out);
        } else { /* pulled: the peers' inputs, starting past the own block */
            for (int k = a->in_place ? 1 : 0; k < n; k++) {
                int q = (me + k) % n;
                direct_copy((char *)recvbuf + (size_t)q * in, xin[q], in, out);
            }
        }
        break;
    }
    return st;
}

/* Cross-memory attach, where the buffers are not all registered: *yes_p 1 when every rank takes
 * it for this call (the communicator's verdict is made, with one more round, at the first call
 * that asks for it), 0 for the engine; an error from that round. */
static coll_result_t direct_cma_agreed(coll_comm_t *comm, const coll_args_t *a, direct_desc_t *mine,
                                       const coll_direct_peer_t *peers, int untried, int refused,
                                       int *parity_p, double *t0_p, int *yes_p)
{
    coll_result_t st;
    direct_desc_t d;
    int           yes = 1;

    *yes_p = !refused && !untried;
    if (refused || !untried) {
        return COLL_OK;
    }
    mine->cma = coll_direct_cma_probe(comm, peers) ? 1 : -1;
    st        = coll_small_round(comm, a, mine, sizeof(*mine), parity_p, t0_p);
    if (st != COLL_OK) {
        return st;
    }
    for (int q = 0; q < comm->nranks; q++) {
        memcpy(&d, coll_small_payload(comm, q, *parity_p), sizeof(d));
        yes &= d.cma == 1;
    }
    comm->cma_state = yes ? 1 : -1; /* the same on every rank, for the communicator's life */
    if (!yes && comm->rank == 0) {
        coll_info(ALGO, "cross-memory attach refused between some ranks: calls on unregistered "
                        "buffers take the engine");
    }
    *yes_p = yes;
    return COLL_OK;
}

/* The cross-memory attach moves and the last round, which every rank joins even after a failed
 * transfer (a peer may still move bytes to or from its buffers); a failure anywhere then fails
 * the communicator alike on every rank, naming the rank that failed and its peer. */
static coll_result_t direct_cma_run(coll_comm_t *comm, const coll_args_t *a, direct_desc_t *mine,
                                    const coll_direct_peer_t *peers, const void *sendbuf,
                                    void *recvbuf, int *parity_p, double *t0_p)
{
    coll_result_t st;
    direct_desc_t d;

    if (a->coll == COLL_OP_ALLREDUCE) {
        st = coll_direct_cma_allreduce(comm, a, peers, sendbuf, recvbuf);
    } else if (a->coll == COLL_OP_REDUCE_SCATTER) {
        st = coll_direct_cma_reduce_scatter(comm, a, peers, sendbuf, recvbuf);
    } else {
        st = coll_direct_cma_allgather(comm, a, peers, sendbuf, recvbuf);
    }
    mine->status = st;
    if (st != COLL_OK) {
        mine->bad_peer  = comm->cma_fail.peer;
        mine->bad_errno = comm->cma_fail.err;
        mine->bad_write = comm->cma_fail.write;
    }
    st = coll_small_round(comm, a, mine, sizeof(*mine), parity_p, t0_p);
    for (int q = 0; q < comm->nranks && st == COLL_OK; q++) {
        memcpy(&d, coll_small_payload(comm, q, *parity_p), sizeof(d));
        if (d.status != COLL_OK) {
            st = coll_comm_fail(comm, (coll_result_t)d.status,
                                "rank %d: %s op #%u: rank %d cannot %s rank %d's buffers by "
                                "cross-memory attach: %s",
                                comm->rank, coll_op_name(a->coll), comm->small_seq, q,
                                d.bad_write ? "write into" : "read", d.bad_peer,
                                strerror(d.bad_errno));
        }
    }
    if (st == COLL_OK && a->coll == COLL_OP_ALLREDUCE) { /* the peers pushed their slices */
        size_t es = coll_dtype_size(a->dtype), lo, hi;
        for (int q = 0; q < comm->nranks; q++) {
            coll_direct_slice(a, comm->nranks, q, &lo, &hi);
            if (q != comm->rank && hi > lo) {
                DIRECT_PEER_WROTE((char *)recvbuf + lo * es, (hi - lo) * es);
            }
        }
    }
    return st;
}

/* This rank's descriptor of the call. */
static void direct_describe(coll_comm_t *comm, const coll_args_t *a, const void *sendbuf,
                            void *recvbuf, size_t in, size_t out, const volatile uint64_t *probe,
                            direct_desc_t *mine)
{
    memset(mine, 0, sizeof(*mine));
    mine->coll    = (int32_t)a->coll;
    mine->in_reg  = -1;
    mine->out_reg = -1;
    mine->live    = comm->regs_hash;
    mine->push    = coll_param_bool(COLL_P_DIRECT_PUSH);
    /* a rank without its blocks does not take cross-memory attach this time */
    mine->cma =
        coll_direct_cma_wanted(comm, a) && coll_direct_cma_tmp(comm) != NULL ? comm->cma_state : -1;
    mine->pid        = (int32_t)getpid();
    mine->in_addr    = (uint64_t)(uintptr_t)sendbuf;
    mine->out_addr   = (uint64_t)(uintptr_t)recvbuf;
    mine->probe_addr = (uint64_t)(uintptr_t)probe;
    mine->probe_val  = *probe;
    if (comm->nranks <= COLL_MAX_LOCAL_DIRECT) {
        coll_reg_find(comm, sendbuf, in, &mine->in_reg, &mine->in_off);
        coll_reg_find(comm, recvbuf, out, &mine->out_reg, &mine->out_off);
    }
    if (mine->cma >= 0) { /* before the peers move its pages (direct_thp.c) */
        if (mine->in_reg < 0) {
            coll_direct_thp_advise(sendbuf, in);
        }
        if (mine->out_reg < 0 && recvbuf != sendbuf) {
            coll_direct_thp_advise(recvbuf, out);
        }
    }
}

coll_result_t coll_direct_run(coll_comm_t *comm, const coll_args_t *a, const void *sendbuf,
                              void *recvbuf)
{
    int                n = comm->nranks, me = comm->rank, parity = 0;
    size_t             es  = coll_dtype_size(a->dtype);
    size_t             in  = a->count * es * (a->coll == COLL_OP_REDUCE_SCATTER ? (size_t)n : 1);
    size_t             out = a->count * es * (a->coll == COLL_OP_ALLGATHER ? (size_t)n : 1);
    direct_desc_t      mine, d;
    const char        *xin[COLL_MAX_LOCAL_DIRECT];
    char              *xout[COLL_MAX_LOCAL_DIRECT];
    coll_direct_peer_t peers[COLL_MAX_LOCAL_DIRECT];
    /* read and written back by the peers' cross-memory attach probe, unchanged */
    volatile uint64_t probe =
        ((uint64_t)(uint32_t)getpid() << 32 | (uint32_t)me) ^ (comm->small_calls << 40);
    double        t0 = 0.0;
    coll_result_t st;
    int           fits = n <= COLL_MAX_LOCAL_DIRECT, ok = fits, ins = ok, outs = ok, push = 1;
    int           untried = 0, refused = !fits, cma = 0;

    direct_describe(comm, a, sendbuf, recvbuf, in, out, &probe, &mine);
    coll_small_begin(comm, a);
    st = coll_small_round(comm, a, &mine, sizeof(mine), &parity, &t0);
    if (st == COLL_OK) {
        st = coll_small_check(comm, parity, a);
    }
    for (int q = 0; q < n && st == COLL_OK; q++) { /* every descriptor read before the next round */
        memcpy(&d, coll_small_payload(comm, q, parity), sizeof(d));
        if (d.coll != mine.coll) {
            st = coll_comm_fail(
                comm, COLL_ERR_MISMATCH, "rank %d: %s op #%u on the direct path: rank %d called %s",
                me, coll_op_name(a->coll), comm->small_seq, q,
                d.coll >= 0 && d.coll < COLL_OP_COUNT ? coll_op_name(d.coll) : "something else");
            break;
        }
        if (fits) {
            peers[q] = (coll_direct_peer_t){.pid        = d.pid,
                                            .in         = d.in_addr,
                                            .out        = d.out_addr,
                                            .probe_addr = d.probe_addr,
                                            .probe_val  = d.probe_val};
        }
        untried |= d.cma == 0;
        refused |= d.cma < 0;
        if (!ok || d.live != mine.live) {
            ok = ins = outs = 0;
            continue;
        }
        xin[q]  = direct_at(comm, q, d.in_reg, d.in_off, in);
        xout[q] = direct_at(comm, q, d.out_reg, d.out_off, out);
        ins &= xin[q] != NULL;
        outs &= xout[q] != NULL;
        push &= d.push != 0;
    }
    /* every rank sees the same descriptors, so decides alike: what the peers read (inputs) or
     * write (outputs) must be registered on every rank */
    switch (a->coll) {
    case COLL_OP_ALLREDUCE:
        ok = ins && outs;
        break;
    case COLL_OP_REDUCE_SCATTER:
        ok = ins;
        break;
    default:
        push &= outs;
        ok = push || ins;
        break;
    }
    ok &= coll_param_bool(COLL_P_DIRECT) && a->count * es >= coll_param_size(COLL_P_DIRECT_MIN);
    if (st == COLL_OK && !ok) { /* else cross-memory attach, if every rank can */
        st = direct_cma_agreed(comm, a, &mine, peers, untried, refused, &parity, &t0, &cma);
    }
    if (st != COLL_OK || (!ok && !cma)) { /* the engine, on every rank */
        coll_small_end(comm, a, t0, st != COLL_OK ? st : COLL_INPROGRESS);
        return st != COLL_OK ? st : COLL_INPROGRESS;
    }
    direct_log(comm, a, cma);
    if (cma) {
        st = direct_cma_run(comm, a, &mine, peers, sendbuf, recvbuf, &parity, &t0);
    } else {
        st = direct_registered(comm, a, &mine, xin, xout, push, sendbuf, recvbuf, &parity, &t0);
        if (st == COLL_OK) { /* nobody's buffers change while another rank reads or writes them */
            st = coll_small_round(comm, a, &mine, sizeof(mine), &parity, &t0);
        }
    }
    coll_small_end(comm, a, t0, st);
    return st;
}
