/* SPDX-License-Identifier: MIT */
/*
 * Hang and desync diagnosis (see diag.h). Each call carries its sequence number and the
 * fingerprint (collective, count, dtype, op, root); a timed-out wait gathers every rank's
 * oldest pending call through the bootstrap and names who disagrees. The pending-operation
 * dump serves coll_comm_dump_pending and SIGUSR1. The data path only pays for fp8 at start.
 */
#include "diag.h"
#include "error.h"
#include "log.h"
#include "param.h"
#include "util.h"

#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define DIAG_MAGIC      0x44534e43u /* "DSNC": a rank's answer in the desync exchange */
#define DIAG_EXCHANGE_S 0.5         /* how long the ranks that timed out wait for each other */
#define DIAG_MAX_COMMS  256

/* One rank's pending call, as exchanged (fixed size, the same on every rank). */
typedef struct {
    uint32_t magic;
    int32_t  coll; /* -1: no collective pending */
    uint32_t seq;
    int32_t  dtype;
    int32_t  op;
    int32_t  root;
    int32_t  waiting; /* peer it waits on, -1 unknown */
    int32_t  small;   /* 1: a blocking call on the small-call slots (small.c) */
    uint64_t count;
} diag_rec_t;

static const char *diag_dtype_short(coll_dtype_t d)
{
    static const char *const names[COLL_DTYPE_COUNT] = {
        [COLL_INT8] = "i8",      [COLL_UINT8] = "u8",    [COLL_INT32] = "i32",
        [COLL_UINT32] = "u32",   [COLL_INT64] = "i64",   [COLL_UINT64] = "u64",
        [COLL_FLOAT16] = "f16",  [COLL_FLOAT32] = "f32", [COLL_FLOAT64] = "f64",
        [COLL_BFLOAT16] = "bf16"};
    return (int)d >= 0 && d < COLL_DTYPE_COUNT ? names[d] : "?";
}

uint8_t coll_diag_fp8(const coll_args_t *a)
{
    uint64_t h = coll_hash64(((uint64_t)a->coll << 56) ^ ((uint64_t)a->dtype << 48) ^
                             ((uint64_t)a->op << 40) ^ (uint64_t)(uint32_t)a->root);
    h          = coll_hash64(h ^ (uint64_t)a->count);
    return (uint8_t)(h ^ (h >> 8) ^ (h >> 16) ^ (h >> 24));
}

static void diag_describe_raw(int coll, uint64_t count, int dtype, int op, int root, char *buf,
                              size_t len)
{
    const char *name = coll >= 0 && coll < COLL_OP_COUNT ? coll_op_name(coll) : "nothing";
    const char *dt   = diag_dtype_short(dtype);
    switch (coll) {
    case COLL_OP_ALLREDUCE:
    case COLL_OP_REDUCE_SCATTER:
        snprintf(buf, len, "%s(%" PRIu64 " x %s, %s)", name, count, dt, coll_redop_name(op));
        break;
    case COLL_OP_REDUCE:
        snprintf(buf, len, "%s(%" PRIu64 " x %s, %s, root %d)", name, count, dt,
                 coll_redop_name(op), root);
        break;
    case COLL_OP_BROADCAST:
        snprintf(buf, len, "%s(%" PRIu64 " x %s, root %d)", name, count, dt, root);
        break;
    case COLL_OP_BARRIER:
        snprintf(buf, len, "%s()", name);
        break;
    case COLL_OP_SEND:
    case COLL_OP_RECV:
        snprintf(buf, len, "%s(%" PRIu64 " x %s, peer %d)", name, count, dt, root);
        break;
    case -1:
        snprintf(buf, len, "no collective");
        break;
    default:
        snprintf(buf, len, "%s(%" PRIu64 " x %s)", name, count, dt);
    }
}

void coll_diag_describe(const coll_args_t *a, char *buf, size_t len)
{
    diag_describe_raw(a->coll, a->count, a->dtype, a->op, a->root, buf, len);
}

static int diag_is_coll(const coll_task_t *req)
{
    return req->args.coll != COLL_OP_SEND && req->args.coll != COLL_OP_RECV;
}

coll_task_t *coll_diag_oldest(coll_comm_t *comm)
{
    coll_task_t *best = NULL;
    for (coll_task_t *r = comm->active; r != NULL; r = r->next) {
        /* sequence numbers wrap: compare by signed distance */
        if (diag_is_coll(r) && !r->finished &&
            (best == NULL || (int32_t)(r->seq - best->seq) < 0)) {
            best = r;
        }
    }
    return best;
}

/* "rank 3", "ranks 0-2", "ranks 0,2,5-7": the ranks r with sel[r] == v. */
static size_t diag_ranks_str(const int *sel, int n, int v, char *buf, size_t len)
{
    size_t off = 0;
    int    cnt = 0;
    for (int r = 0; r < n; r++) {
        cnt += sel[r] == v;
    }
    off += (size_t)snprintf(buf, len, "%s ", cnt == 1 ? "rank" : "ranks");
    for (int r = 0, first = 1; r < n && off < len; r++) {
        if (sel[r] != v || (r > 0 && sel[r - 1] == v)) {
            continue;
        }
        int e = r;
        while (e + 1 < n && sel[e + 1] == v) {
            e++;
        }
        off += (size_t)snprintf(buf + off, len - off, e > r ? "%s%d-%d" : "%s%d", first ? "" : ",",
                                r, e);
        first = 0;
    }
    return off < len ? off : len - 1;
}

static int diag_rec_same(const diag_rec_t *a, const diag_rec_t *b)
{
    return a->coll == b->coll && a->seq == b->seq && a->count == b->count && a->dtype == b->dtype &&
           a->op == b->op && a->root == b->root && a->small == b->small;
}

/* The call of a record; a blocking call on the small-call slots says so, since it does not match a
 * non-blocking call of the same arguments (as in MPI). */
static void diag_rec_describe(const diag_rec_t *a, int mark, char *buf, size_t len)
{
    diag_describe_raw(a->coll, a->count, a->dtype, a->op, a->root, buf, len);
    if (mark && a->small) {
        size_t l = strlen(buf);
        snprintf(buf + l, len - l, " blocking, on the small-call slots,");
    }
}

/*
 * Group the answers: group[r] = index of the first rank with the same call, or -1 for a rank
 * that did not answer. Returns the number of distinct calls.
 */
static int diag_group(const diag_rec_t *all, int n, int *group)
{
    int ncalls = 0;
    for (int r = 0; r < n; r++) {
        group[r] = -1;
        if (all[r].magic != DIAG_MAGIC) {
            continue;
        }
        for (int q = 0; q < r && group[r] < 0; q++) {
            if (group[q] == q && diag_rec_same(&all[q], &all[r])) {
                group[r] = q;
            }
        }
        if (group[r] < 0) {
            group[r] = r;
            ncalls++;
        }
    }
    return ncalls;
}

/*
 * "rank 3 called allgather(1024 x f32) as op #57; ranks 0-2 called allreduce(4096 x f32, sum)":
 * minorities first, the largest group last (its op number only when it differs).
 */
static void diag_mismatch_msg(const diag_rec_t *all, int n, const int *group, char *msg, size_t len)
{
    int   *size = coll_calloc((size_t)n, sizeof(int), "desync report"), major = -1;
    size_t off = 0;
    char   desc[128];
    if (size == NULL) {
        snprintf(msg, len, "ranks disagree on the operation");
        return;
    }
    for (int r = 0; r < n; r++) {
        if (group[r] >= 0) {
            size[group[r]]++;
        }
    }
    for (int g = 0; g < n; g++) {
        if (size[g] > 0 && (major < 0 || size[g] > size[major])) {
            major = g;
        }
    }
    int mark = 0; /* some answering ranks are in a blocking call on the slots, others not */
    for (int r = 0; r < n; r++) {
        mark |= group[r] >= 0 && all[r].small != all[major].small;
    }
    uint32_t shown_seq = all[major].seq + 1; /* no op number shown yet */
    for (int g = 0; g < n && off < len; g++) {
        if (size[g] == 0 || g == major) {
            continue;
        }
        const diag_rec_t *a = &all[g];
        diag_rec_describe(a, mark, desc, sizeof(desc));
        off += diag_ranks_str(group, n, g, msg + off, len - off);
        off += (size_t)snprintf(msg + off, len - off, " called %s as op #%u; ", desc, a->seq);
        shown_seq = a->seq;
    }
    if (off < len) {
        const diag_rec_t *a = &all[major];
        diag_rec_describe(a, mark, desc, sizeof(desc));
        off += diag_ranks_str(group, n, major, msg + off, len - off);
        off += (size_t)snprintf(msg + off, len - off, " called %s", desc);
        if (off < len && shown_seq != a->seq) {
            off += (size_t)snprintf(msg + off, len - off, " as op #%u", a->seq);
        }
    }
    if (off < len && size[major] < n) {
        int silent = 0;
        for (int r = 0; r < n; r++) {
            silent += group[r] < 0;
        }
        if (silent > 0) {
            off += (size_t)snprintf(msg + off, len - off, "; ");
            off += diag_ranks_str(group, n, -1, msg + off, len - off);
            snprintf(msg + off, len - off, " did not answer");
        }
    }
    coll_free(size);
}

static void diag_fill(coll_comm_t *comm, diag_rec_t *me)
{
    coll_task_t *old = coll_diag_oldest(comm);
    memset(me, 0, sizeof(*me));
    me->magic   = DIAG_MAGIC;
    me->coll    = -1;
    me->seq     = comm->coll_seq;
    me->waiting = -1;
    if (old == NULL && comm->small_active) {
        me->coll    = comm->small_args.coll;
        me->seq     = comm->small_seq;
        me->count   = comm->small_args.count;
        me->dtype   = comm->small_args.dtype;
        me->op      = comm->small_args.op;
        me->root    = comm->small_args.root;
        me->waiting = comm->small_waiting;
        me->small   = 1;
    } else if (old != NULL) {
        me->coll    = old->args.coll;
        me->seq     = old->seq;
        me->count   = old->args.count;
        me->dtype   = old->args.dtype;
        me->op      = old->args.op;
        me->root    = old->args.root;
        me->waiting = coll_engine_waiting_peer(old);
    }
    /* fields that do not define the call are zeroed so that equal calls compare equal */
    if (me->coll != COLL_OP_ALLREDUCE && me->coll != COLL_OP_REDUCE_SCATTER &&
        me->coll != COLL_OP_REDUCE) {
        me->op = 0;
    }
    if (me->coll != COLL_OP_BROADCAST && me->coll != COLL_OP_REDUCE) {
        me->root = 0;
    }
    if (me->coll == COLL_OP_BARRIER || me->coll == -1) {
        me->count = 0;
        me->dtype = 0;
    }
}

/* Log msg (this rank's own line), then gather every rank's pending call through the bootstrap
 * and fail the communicator: COLL_ERR_MISMATCH naming the disagreeing ranks, else `alone` with
 * msg (and `same` appended when every rank answered with the same call). */
static void diag_exchange(coll_comm_t *comm, const char *msg, coll_result_t alone, const char *same)
{
    diag_rec_t *all   = NULL;
    int        *group = NULL;
    diag_rec_t  me;

    if (comm->bs == NULL || comm->nranks < 2) {
        coll_comm_fail(comm, alone, "%s", msg);
        return;
    }
    coll_error(COLL, "%s", msg); /* every rank's own line, before the exchange */
    diag_fill(comm, &me);
    all   = coll_calloc((size_t)comm->nranks, sizeof(*all), "desync exchange");
    group = coll_calloc((size_t)comm->nranks, sizeof(*group), "desync exchange");
    if (all == NULL || group == NULL ||
        coll_bootstrap_allgather(comm->bs, &me, sizeof(me), all, coll_time_s() + DIAG_EXCHANGE_S) !=
            COLL_OK) {
        /* some rank is not waiting in this communicator (stopped, busy elsewhere): the line
         * above is what there is, logged once */
        coll_free(all);
        coll_free(group);
        coll_comm_fail_logged(comm, alone, msg);
        return;
    }
    int ncalls = diag_group(all, comm->nranks, group);
    if (ncalls > 1) {
        char why[sizeof(comm->last_error) - 64];
        diag_mismatch_msg(all, comm->nranks, group, why, sizeof(why));
        coll_comm_fail(comm, COLL_ERR_MISMATCH, "rank %d: collective mismatch: %s", comm->rank,
                       why);
    } else {
        coll_comm_fail(comm, alone, "%s%s", msg, same);
    }
    coll_free(all);
    coll_free(group);
}

/* The pending call on the shared windows with the lowest epoch, or NULL. */
static coll_task_t *diag_oldest_window(coll_comm_t *comm)
{
    coll_task_t *best = NULL;
    for (coll_task_t *r = comm->active; r != NULL; r = r->next) {
        if (r->win_epoch > 0 && !r->finished && (best == NULL || r->win_epoch < best->win_epoch)) {
            best = r;
        }
    }
    return best;
}

void coll_diag_timeout(coll_comm_t *comm, coll_task_t *req)
{
    char         desc[128], moved[64] = "", behind[48] = "", msg[sizeof(comm->last_error)];
    int          peer        = req != NULL ? coll_engine_waiting_peer(req) : comm->small_waiting;
    double       moved_s     = req != NULL ? comm->last_progress - req->t_start : 0.0;
    coll_task_t *oldest      = req != NULL && req->win_epoch > 0 ? diag_oldest_window(comm) : NULL;
    int          behind_peer = oldest != NULL ? coll_engine_waiting_peer(oldest) : -1;

    /* A call on the shared windows waits for every earlier one (their epochs): one waited for
     * out of order waits on some rank's acknowledgement (this rank's own, or the lowest rank's
     * that lags), so name whom the oldest window call waits on */
    if (oldest != NULL && oldest->win_epoch < req->win_epoch && behind_peer >= 0) {
        peer = behind_peer;
        snprintf(behind, sizeof(behind), " (behind op #%u)", oldest->seq);
    }

    coll_diag_describe(req != NULL ? &req->args : &comm->small_args, desc, sizeof(desc));
    if (moved_s >= 0.01) {
        /* a call that moved for a while before it stalled (a sender filling a stopped peer's
         * socket buffers) is told apart from one stuck from its start */
        snprintf(moved, sizeof(moved), " after moving for %.2f s", moved_s);
    }
    snprintf(msg, sizeof(msg),
             "rank %d: %s op #%u made no progress for %.1f s (COLL_TIMEOUT)%s; waiting on rank "
             "%d%s",
             comm->rank, desc, req != NULL ? req->seq : comm->small_seq, comm->timeout_s, moved,
             peer, behind);
    diag_exchange(comm, msg, COLL_ERR_TIMEOUT, " (every rank is in this call)");
}

void coll_diag_small_mismatch(coll_comm_t *comm, int rank)
{
    char desc[128], msg[sizeof(comm->last_error)];

    coll_diag_describe(&comm->small_args, desc, sizeof(desc));
    snprintf(msg, sizeof(msg),
             "rank %d: %s op #%u: rank %d made another call with the same number (collective, "
             "count, dtype or op differ, or the path: COLL_SMALL_MAX or COLL_SMALL_AGRS_MAX "
             "differ between ranks)",
             comm->rank, desc, comm->small_seq, rank);
    diag_exchange(comm, msg, COLL_ERR_MISMATCH, "");
}

size_t coll_diag_pending(coll_comm_t *comm, char *buf, size_t len)
{
    size_t off = 0;
    char   desc[128], line[320];
    double now = coll_time_s();

    if (len > 0) {
        buf[0] = '\0';
    }
    for (coll_task_t *r = comm->active; r != NULL; r = r->next) {
        if (r->finished) {
            continue;
        }
        coll_diag_describe(&r->args, desc, sizeof(desc));
        int n = snprintf(line, sizeof(line),
                         "rank %d%s%s: %s op #%u pending for %.3f s, %u/%u steps done, waiting "
                         "on rank %d%s\n",
                         comm->rank, comm->name[0] ? " comm " : "", comm->name, desc, r->seq,
                         now - r->t_start, r->ncomplete, r->nsteps, coll_engine_waiting_peer(r),
                         r->status < 0 ? " (failed)" : "");
        if (off + (size_t)n < len) {
            memcpy(buf + off, line, (size_t)n + 1);
        }
        off += (size_t)n;
    }
    if (comm->small_active) {
        coll_diag_describe(&comm->small_args, desc, sizeof(desc));
        int n = snprintf(line, sizeof(line),
                         "rank %d%s%s: %s op #%u (small-call slots) pending, waiting on rank %d\n",
                         comm->rank, comm->name[0] ? " comm " : "", comm->name, desc,
                         comm->small_seq, comm->small_waiting);
        if (off + (size_t)n < len) {
            memcpy(buf + off, line, (size_t)n + 1);
        }
        off += (size_t)n;
    }
    if (off == 0) {
        int n = snprintf(line, sizeof(line), "rank %d%s%s: no pending operation (next op #%u)\n",
                         comm->rank, comm->name[0] ? " comm " : "", comm->name, comm->coll_seq);
        if ((size_t)n < len) {
            memcpy(buf, line, (size_t)n + 1);
        }
        off = (size_t)n;
    }
    return off;
}

/* ---- SIGUSR1: a flag set by the handler, the dump done by the next wait pass ---- */

static pthread_mutex_t       diag_lock = PTHREAD_MUTEX_INITIALIZER;
static coll_comm_t          *diag_comms[DIAG_MAX_COMMS];
static volatile sig_atomic_t diag_signalled;
static int                   diag_installed;

static void diag_on_signal(int sig)
{
    (void)sig;
    diag_signalled = 1;
}

/* Only where the application left SIGUSR1 at its default (which would kill the process). */
static void diag_install(void)
{
    struct sigaction old, sa;
    if (diag_installed || !coll_param_bool(COLL_P_DUMP_SIGNAL)) {
        return;
    }
    diag_installed = 1;
    if (sigaction(SIGUSR1, NULL, &old) != 0 || old.sa_handler != SIG_DFL) {
        coll_debug(COLL, "SIGUSR1 has a handler already: no pending-operation dump on it");
        return;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = diag_on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, NULL);
}

void coll_diag_register(coll_comm_t *comm)
{
    pthread_mutex_lock(&diag_lock);
    diag_install();
    for (int i = 0; i < DIAG_MAX_COMMS; i++) {
        if (diag_comms[i] == NULL) {
            diag_comms[i] = comm;
            break;
        }
    }
    pthread_mutex_unlock(&diag_lock);
}

void coll_diag_unregister(coll_comm_t *comm)
{
    pthread_mutex_lock(&diag_lock);
    for (int i = 0; i < DIAG_MAX_COMMS; i++) {
        if (diag_comms[i] == comm) {
            diag_comms[i] = NULL;
        }
    }
    pthread_mutex_unlock(&diag_lock);
}

static void diag_dump_one(coll_comm_t *c)
{
    char buf[4096];
    coll_diag_pending(c, buf, sizeof(buf));
    for (char *line = buf, *nl; *line != '\0'; line = nl + 1) {
        nl = strchr(line, '\n');
        if (nl == NULL) {
            break;
        }
        *nl = '\0';
        coll_warn(COLL, "pending: %s", line);
    }
}

void coll_diag_poll_signal(coll_comm_t *comm)
{
    if (!diag_signalled) {
        return;
    }
    diag_signalled = 0;
    pthread_mutex_lock(&diag_lock);
    for (int i = 0; i < DIAG_MAX_COMMS; i++) {
        coll_comm_t *c = diag_comms[i];
        if (c == NULL) {
            continue;
        }
        if (c == comm) {
            diag_dump_one(c);
        } else if (pthread_mutex_trylock(&c->lock) == 0) {
            diag_dump_one(c);
            pthread_mutex_unlock(&c->lock);
        } else {
            coll_warn(COLL, "pending: rank %d: communicator busy in another thread", c->rank);
        }
    }
    pthread_mutex_unlock(&diag_lock);
}
