/* SPDX-License-Identifier: MIT */
/*
 * Communicator life cycle: creation from a unique id (bootstrap, peer exchange, transport
 * choice per peer, connection), destroy (collective), abort (any thread), queries, and the
 * sticky error state with its message.
 */
#include "api/comm.h"
#include "api/register.h"
#include "cuda/cuda.h"
#include "api/tune.h"
#include "bootstrap/bootstrap.h"
#include "topo/local.h"
#include "topo/nic.h"
#include "engine/engine.h"
#include "engine/diag.h"
#include "error.h"
#include "log.h"
#include "param.h"
#include "util.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

coll_result_t coll_comm_check_handle(const coll_comm_t *comm, const char *fn)
{
    if (comm == NULL) {
        return coll_set_last_error(COLL_ERR_INVALID_ARG, "%s: comm is NULL", fn);
    }
    if (comm->magic != COLL_COMM_MAGIC) {
        return coll_set_last_error(COLL_ERR_INVALID_USAGE,
                                   "%s: comm is not a live communicator (destroyed?)", fn);
    }
    return COLL_OK;
}

coll_result_t coll_comm_arg_error(coll_comm_t *comm, coll_result_t st, const char *fmt, ...)
{
    char    msg[480];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    snprintf(comm->last_error, sizeof(comm->last_error), "rank %d: %s", comm->rank, msg);
    coll_warn(COLL, "%s", msg);
    return coll_set_last_error(st, "%s", comm->last_error);
}

/* comm->last_error is written: publish st, log the line unless the caller did, wake waiters. */
static coll_result_t comm_fail_set(coll_comm_t *comm, coll_result_t st, int log)
{
    __atomic_store_n(&comm->error, st,
                     __ATOMIC_RELEASE); /* read without the lock by the CUDA proxy */
    if (log) {
        coll_error(COLL, "%s", comm->last_error);
    }
    coll_engine_wake(comm);
    return st;
}

coll_result_t coll_comm_fail(coll_comm_t *comm, coll_result_t st, const char *fmt, ...)
{
    va_list ap;
    if (comm->error != COLL_OK) {
        return comm->error;
    }
    va_start(ap, fmt);
    vsnprintf(comm->last_error, sizeof(comm->last_error), fmt, ap);
    va_end(ap);
    return comm_fail_set(comm, st, 1);
}

coll_result_t coll_comm_fail_logged(coll_comm_t *comm, coll_result_t st, const char *msg)
{
    if (comm->error != COLL_OK) {
        return comm->error;
    }
    snprintf(comm->last_error, sizeof(comm->last_error), "%s", msg);
    return comm_fail_set(comm, st, 0);
}

int coll_comm_tell_failed(coll_comm_t *comm, coll_result_t st, const char *why)
{
    if (st == COLL_ERR_ABORTED || st == COLL_ERR_REVOKED || comm->bs == NULL || comm->nranks < 2 ||
        coll_bootstrap_poll(comm->bs, NULL, 0) != COLL_OK ||
        atomic_exchange(&comm->told_failed, 1) != 0) {
        return 0;
    }
    char reason[500]; /* a notice's text is at most 511 bytes: cut, never refused */
    snprintf(reason, sizeof(reason), "%.499s", why);
    coll_bootstrap_failed(comm->bs, reason);
    return 1;
}

/* This rank's position among the ranks of its host, in rank order. */
static int comm_local_index(const coll_comm_t *comm)
{
    int local = 0;

    for (int r = 0; r < comm->rank; r++) {
        local += comm->peers[r].host_hash == comm->peers[comm->rank].host_hash;
    }
    return local;
}

/*
 * The NIC nearest the rank carries its TCP traffic when COLL_SOCKET_IFNAME is unset and the
 * ranks span several hosts (on one host TCP uses loopback); the place then records that NIC.
 * Without a choice (fewer than two usable NICs, none near) TCP keeps its own rule.
 */
static void comm_pick_nic(coll_comm_t *comm, const coll_topo_t *t, int slot,
                          coll_topo_place_t *mine)
{
    coll_topo_netif_t    ifs[COLL_TOPO_NETIF_MAX];
    coll_topo_nic_pick_t pick;
    int                  nifs, spread = 0;

    for (int r = 0; r < comm->nranks; r++) {
        spread |= comm->peers[r].host_hash != comm->peers[comm->rank].host_hash;
    }
    if (!spread || coll_param_str(COLL_P_SOCKET_IFNAME)[0] != '\0' ||
        coll_topo_netifs(ifs, COLL_TOPO_NETIF_MAX, &nifs) != COLL_OK) {
        return;
    }
    coll_topo_pick_nic(t, mine, slot, ifs, nifs, &pick);
    if (pick.nic < 0) {
        coll_info(TOPO, "rank %d: no NIC chosen by topology (%s); TCP takes the first interface",
                  comm->rank, pick.why);
        return;
    }
    mine->nic      = pick.nic;
    mine->nic_mbps = t->nic[pick.nic].speed_mbps;
    coll_strlcpy(comm->nic_if, t->nic[pick.nic].name, sizeof(comm->nic_if));
    coll_info(TOPO, "rank %d uses NIC %s (%s), %s", comm->rank, comm->nic_if, ifs[pick.netif].addr,
              pick.why);
}

/*
 * Where every rank sits: this rank's place from its host's model, then every rank's through
 * the bootstrap. Without a model only the host is known, and the rings keep rank order within
 * each host: a topology that cannot be read never fails the communicator.
 */
static coll_result_t comm_place(coll_comm_t *comm, double deadline)
{
    coll_topo_place_t mine = {
        .host = comm->peers[comm->rank].host_hash, .package = -1, .numa = -1, .nic = -1};
    const coll_topo_t *t;
    coll_topo_cpuset_t aff;
    uint64_t           busid = 0;
    char               bus[32];
    int                local = (int)coll_param_int(COLL_P_LOCAL_RANK);
    coll_result_t      st    = coll_topo_host(&t);

    if (st == COLL_OK) {
        int gpu;
        coll_cuda_current_busid(&busid);
        gpu = coll_topo_pick_gpu(t, (coll_topo_gpu_mode_t)coll_param_enum(COLL_P_TOPO_GPU), busid,
                                 local >= 0 ? local : comm_local_index(comm));
        coll_topo_place_self(t, mine.host, gpu, coll_topo_affinity(&aff) == COLL_OK ? &aff : NULL,
                             &mine);
        if (mine.numa < 0 && t->nnuma > 0 && coll_param_enum(COLL_P_BIND) != COLL_TOPO_BIND_NONE) {
            /* to be bound but neither GPU nor affinity tells where: spread the host's ranks */
            int node = (local >= 0 ? local : comm_local_index(comm)) % t->nnuma;
            coll_topo_place_of(t, mine.host, -1, node, &mine);
        }
        comm_pick_nic(comm, t, local >= 0 ? local : comm_local_index(comm), &mine);
        comm->topo = t;
        coll_info(TOPO, "rank %d: GPU %s, package %d, NUMA node %d, NIC %s", comm->rank,
                  gpu >= 0 ? coll_topo_busid_format(t->gpu[gpu].pci.busid, bus, sizeof(bus))
                           : "none",
                  mine.package, mine.numa, mine.nic >= 0 ? t->nic[mine.nic].name : "none");
    } else {
        coll_info(TOPO, "rank %d: the host's topology is unknown (%s); rings keep rank order",
                  comm->rank, coll_strerror(st));
    }
    return coll_bootstrap_allgather(comm->bs, &mine, sizeof(mine), comm->places, deadline);
}

/*
 * COLL_BIND: the calling thread, at the first communicator it creates, to the CPUs of its
 * rank's NUMA node, or to one core of them, a different one for each rank of the host on that
 * node (ranks in rank order). Binding is advice: when it cannot be done the rank runs as before.
 */
static void comm_bind(const coll_comm_t *comm)
{
    static __thread int      bound;
    coll_topo_bind_t         mode = (coll_topo_bind_t)coll_param_enum(COLL_P_BIND);
    const coll_topo_place_t *me   = &comm->places[comm->rank];
    coll_topo_cpuset_t       allowed, mask;
    int                      slot = 0, node;
    char                     cpus[256];

    if (mode == COLL_TOPO_BIND_NONE || bound || comm->topo == NULL) {
        return;
    }
    bound = 1;
    for (int r = 0; r < comm->rank; r++) {
        slot += comm->places[r].host == me->host && comm->places[r].numa == me->numa;
    }
    node = coll_topo_numa_logical(comm->topo, me->numa);
    if (coll_topo_affinity(&allowed) != COLL_OK ||
        coll_topo_bind_mask(comm->topo, mode, node, slot, &allowed, &mask) != 0) {
        coll_info(TOPO, "rank %d: COLL_BIND=%s, but no CPU of NUMA node %d is allowed; not bound",
                  comm->rank, coll_param_str(COLL_P_BIND), me->numa);
        return;
    }
    if (coll_topo_bind_thread(&mask) == COLL_OK) {
        coll_info(TOPO, "rank %d: bound to CPUs %s (NUMA node %d, COLL_BIND=%s)", comm->rank,
                  coll_topo_cpuset_format(&mask, cpus, sizeof(cpus)), me->numa,
                  coll_param_str(COLL_P_BIND));
    }
}

/* The names of the transports in a mask of registry places, for messages. */
static void comm_tp_names(uint32_t mask, char *buf, size_t len)
{
    size_t off = 0;
    buf[0]     = '\0';
    for (int i = 0; i < coll_tp_registry_count() && off < len; i++) {
        const coll_transport_ops_t *t = coll_tp_registry_get(i);
        if (t != NULL && (mask >> i) & 1u) {
            off += (size_t)snprintf(buf + off, len - off, "%s%s", off ? "," : "", t->name);
        }
    }
    if (buf[0] == '\0') {
        coll_strlcpy(buf, "none", len);
    }
}

/*
 * Which transport reaches each peer: COLL_TRANSPORT restricts the candidates, and of those
 * both ranks of a pair offer, the one that scores highest for the pair serves it. A
 * transport's score depends on the two ranks' hosts alone, and the ranks exchange what they
 * offer (a host without an HCA offers no ib), so both ranks of a pair pick the same one.
 */
/* Warns (once) of COLL_TRANSPORT entries that name no transport: they would be ignored. */
static void comm_check_transport_list(const char *want)
{
    static atomic_int warned;
    const char       *names = want + (want[0] == '^'); /* an excluded name must exist too */
    int               exact = names[0] == '=';
    char              list[256], one[64], *save = NULL;
    coll_strlcpy(list, names + exact, sizeof(list));
    for (char *e = strtok_r(list, ",", &save); e != NULL; e = strtok_r(NULL, ",", &save)) {
        int found = 0;
        snprintf(one, sizeof(one), "%s%s", exact ? "=" : "", e); /* the selection's own rule */
        for (int i = 0; i < coll_tp_registry_count() && !found; i++) {
            const coll_transport_ops_t *t = coll_tp_registry_get(i);
            found                         = t != NULL && coll_sock_ifname_match(one, t->name);
        }
        if (!found && atomic_exchange(&warned, 1) == 0) {
            coll_warn(INIT, "COLL_TRANSPORT=%s: '%s' names no transport (collinfo -t lists them)",
                      want, e);
        }
    }
}

static coll_result_t comm_pick_transports(coll_comm_t *comm, double deadline)
{
    const char   *want  = coll_param_str(COLL_P_TRANSPORT);
    int           autom = want == NULL || want[0] == '\0' || strcmp(want, "auto") == 0;
    uint32_t      mine  = 0, *offer;
    coll_result_t st;
    if (!autom) {
        comm_check_transport_list(want);
    }
    for (int i = 0; i < coll_tp_registry_count() && i < COLL_COMM_MAX_TP; i++) {
        const coll_transport_ops_t *t   = coll_tp_registry_get(i);
        const char                 *why = "";
        if (t == NULL) {
            continue;
        }
        if (!autom && !coll_sock_ifname_match(want, t->name)) {
            continue;
        }
        if (t->usable != NULL && !t->usable(&why)) {
            coll_info(INIT, "transport %s not usable: %s", t->name, why);
            continue;
        }
        comm->tp[comm->ntp].reg   = i;
        comm->tp[comm->ntp++].ops = t;
        mine |= 1u << i;
    }
    offer = coll_calloc((size_t)comm->nranks, sizeof(*offer), "transport offers");
    if (offer == NULL) {
        return COLL_ERR_NO_MEMORY;
    }
    st = coll_bootstrap_allgather(comm->bs, &mine, sizeof(mine), offer, deadline);
    for (int p = 0; p < comm->nranks && st == COLL_OK; p++) {
        int  best = -1, best_score = -1;
        char here[64], there[64];
        comm->ep_tp[p] = -1;
        if (p == comm->rank) {
            continue;
        }
        for (int t = 0; t < comm->ntp; t++) {
            int score = comm->tp[t].ops->reachable(&comm->peers[comm->rank], &comm->peers[p]);
            if ((offer[p] >> comm->tp[t].reg) & 1u && score > best_score) {
                best       = t;
                best_score = score;
            }
        }
        if (best < 0 || best_score < 0) {
            comm_tp_names(mine, here, sizeof(here));
            comm_tp_names(offer[p], there, sizeof(there));
            st = coll_set_last_error(COLL_ERR_UNSUPPORTED,
                                     "rank %d: no transport reaches rank %d on host %s "
                                     "(COLL_TRANSPORT=%s; offered here: %s, there: %s)",
                                     comm->rank, p, comm->peers[p].hostname, want, here, there);
            break;
        }
        comm->ep_tp[p] = (int8_t)best;
        comm->tp[best].npeers++;
    }
    coll_free(offer);
    return st;
}

/* The transports' view of the bootstrap's notices (coll_tp_notices_fn_t). */
static coll_result_t comm_tp_notices(void *arg, char *msg, size_t msglen)
{
    return coll_bootstrap_poll((coll_bootstrap_t *)arg, msg, msglen);
}

static coll_result_t comm_connect(coll_comm_t *comm, double deadline)
{
    coll_result_t  st      = COLL_OK;
    size_t         hsz     = COLL_TP_HANDLE_MAX * COLL_COMM_MAX_TP;
    char          *mine    = coll_calloc(1, hsz, "transport handles");
    char          *all     = coll_calloc((size_t)comm->nranks, hsz, "transport handles");
    int           *peers   = coll_calloc((size_t)comm->nranks, sizeof(int), "peer list");
    coll_tp_ep_t **eps     = coll_calloc((size_t)comm->nranks, sizeof(*eps), "endpoints");
    const void   **handles = coll_calloc((size_t)comm->nranks, sizeof(void *), "handles");
    if (mine == NULL || all == NULL || peers == NULL || eps == NULL || handles == NULL) {
        st = COLL_ERR_NO_MEMORY;
        goto out;
    }
    coll_tp_init_args_t ia = {.rank      = comm->rank,
                              .nranks    = comm->nranks,
                              .comm_id   = comm->comm_id,
                              .job_tag   = coll_bootstrap_job_tag(comm->bs),
                              .peers     = comm->peers,
                              .timeout_s = comm->timeout_s,
                              .mem_node1 =
                                  1 + coll_topo_mem_node(comm->topo, comm->places[comm->rank].numa),
                              .netif       = comm->nic_if,
                              .notices     = comm_tp_notices,
                              .notices_arg = comm->bs};
    coll_bootstrap_auth_key(comm->bs, "transport", comm->comm_id, &ia.auth_key);
    for (int t = 0; t < comm->ntp; t++) {
        size_t hlen = COLL_TP_HANDLE_MAX;
        if (comm->tp[t].npeers == 0) {
            continue;
        }
        COLL_CHECK_GOTO(comm->tp[t].ops->init(&ia, &comm->tp[t].ctx), st, out);
        COLL_CHECK_GOTO(comm->tp[t].ops->listen(comm->tp[t].ctx,
                                                mine + comm->tp[t].reg * COLL_TP_HANDLE_MAX, &hlen),
                        st, out);
    }
    COLL_CHECK_GOTO(coll_bootstrap_allgather(comm->bs, mine, hsz, all, deadline), st, out);
    for (int t = 0; t < comm->ntp; t++) {
        int n = 0;
        if (comm->tp[t].ctx == NULL) {
            continue;
        }
        for (int p = 0; p < comm->nranks; p++) {
            handles[p] = all + (size_t)p * hsz + (size_t)comm->tp[t].reg * COLL_TP_HANDLE_MAX;
            if (comm->ep_tp[p] == t) {
                peers[n++] = p;
            }
        }
        COLL_CHECK_GOTO(
            comm->tp[t].ops->connect_all(comm->tp[t].ctx, peers, n, handles, deadline, eps), st,
            out);
        for (int i = 0; i < n; i++) {
            comm->eps[peers[i]] = eps[i];
        }
        coll_info(INIT, "rank %d: %s to %d peer(s)", comm->rank, comm->tp[t].ops->name, n);
    }
    COLL_CHECK_GOTO(coll_bootstrap_barrier(comm->bs, deadline), st, out);
    for (int t = 0; t < comm->ntp; t++) {
        if (comm->tp[t].ctx != NULL && comm->tp[t].ops->established != NULL) {
            comm->tp[t].ops->established(comm->tp[t].ctx);
        }
    }
out:
    coll_free(mine);
    coll_free(all);
    coll_free(peers);
    coll_free(eps);
    coll_free(handles);
    return st;
}

static void comm_free(coll_comm_t *comm)
{
    coll_diag_unregister(comm);
    coll_cuda_comm_destroy(comm);
    /* endpoints exist only once transports were picked: a communicator that failed earlier
     * (perhaps for a huge nranks) has nothing to close */
    for (int p = 0; comm->eps != NULL && comm->ntp > 0 && p < comm->nranks; p++) {
        if (comm->eps[p] != NULL && comm->eps[p]->ops->ep_close != NULL) {
            comm->eps[p]->ops->ep_close(comm->eps[p]);
        }
    }
    for (int t = 0; t < comm->ntp; t++) {
        if (comm->tp[t].ctx != NULL) {
            comm->tp[t].ops->finalize(comm->tp[t].ctx);
        }
    }
    coll_engine_free_zombies(comm);
    coll_cuda_comm_free(comm); /* after the endpoints and every rank's destroy */
    coll_reg_free_all(comm);
    coll_engine_cache_clear(comm);
    coll_diag_stats_free(comm);
    pthread_mutex_destroy(&comm->lock);
    comm->magic = 0;
    coll_free(comm->peers);
    coll_free(comm->places);
    coll_free(comm->eps);
    coll_free(comm->ep_tp);
    coll_free(comm->send_seq);
    coll_free(comm->recv_seq);
    coll_free(comm->algo_override);
    free(comm->cma_tmp); /* posix_memalign's */
    coll_layout_fini(&comm->layout);
    coll_free(comm);
}

static coll_result_t comm_alloc(coll_comm_t **comm_p, int nranks, int rank,
                                const coll_config_t *config)
{
    coll_comm_t *comm = coll_calloc(1, sizeof(*comm), "communicator");
    if (comm == NULL) {
        return COLL_ERR_NO_MEMORY;
    }
    comm->magic     = COLL_COMM_MAGIC;
    comm->rank      = rank;
    comm->nranks    = nranks;
    comm->timeout_s = coll_param_time(COLL_P_TIMEOUT);
    if (config != NULL && config->size >= sizeof(coll_config_t)) {
        if (config->timeout_s > 0) {
            comm->timeout_s = config->timeout_s;
        }
        if (config->name != NULL) {
            coll_strlcpy(comm->name, config->name, sizeof(comm->name));
        }
    }
    pthread_mutex_init(&comm->lock, NULL);
    comm->peers         = coll_calloc((size_t)nranks, sizeof(*comm->peers), "peers");
    comm->places        = coll_calloc((size_t)nranks, sizeof(*comm->places), "places");
    comm->eps           = coll_calloc((size_t)nranks, sizeof(*comm->eps), "endpoints");
    comm->ep_tp         = coll_calloc((size_t)nranks, 1, "transport map");
    comm->send_seq      = coll_calloc((size_t)nranks, sizeof(uint32_t), "sequences");
    comm->recv_seq      = coll_calloc((size_t)nranks, sizeof(uint32_t), "sequences");
    const char *algo    = coll_param_str(COLL_P_ALGO);
    comm->algo_override = strdup(algo != NULL ? algo : "auto");
    if (comm->peers == NULL || comm->places == NULL || comm->eps == NULL || comm->ep_tp == NULL ||
        comm->send_seq == NULL || comm->recv_seq == NULL || comm->algo_override == NULL) {
        comm_free(comm);
        return COLL_ERR_NO_MEMORY;
    }
    *comm_p = comm;
    return COLL_OK;
}

coll_result_t coll_comm_create(coll_comm_t **comm_p, int nranks, const coll_unique_id_t *id,
                               int rank, const coll_config_t *config)
{
    coll_comm_t  *comm;
    coll_result_t st;
    double        deadline = coll_time_s() + coll_param_time(COLL_P_BOOTSTRAP_TIMEOUT);

    coll_set_last_error(COLL_OK, "%s", "");
    coll_log_clear_last_error();
    COLL_CHECK(comm_alloc(&comm, nranks, rank, config));
    COLL_CHECK_GOTO(coll_bootstrap_connect(id, rank, nranks, deadline, &comm->bs), st, err);
    coll_peer_info_t self = {.rank = rank, .pid = (int)getpid(), .host_hash = coll_host_hash()};
    coll_strlcpy(self.hostname, coll_hostname(), sizeof(self.hostname));
    COLL_CHECK_GOTO(coll_bootstrap_allgather(comm->bs, &self, sizeof(self), comm->peers, deadline),
                    st, err);
    comm->comm_id = coll_hash64(coll_bootstrap_seed(comm->bs) ^ (uint64_t)comm->peers[0].pid);
    COLL_CHECK_GOTO(coll_comm_agree_params(comm, deadline), st, err);
    COLL_CHECK_GOTO(comm_place(comm, deadline), st, err);
    comm_bind(comm);
    COLL_CHECK_GOTO(comm_pick_transports(comm, deadline), st, err);
    COLL_CHECK_GOTO(comm_connect(comm, deadline), st, err);
    COLL_CHECK_GOTO(coll_tune_init(comm, deadline), st, err);
    comm->last_progress = coll_time_s();
    coll_diag_register(comm);
    coll_info(INIT, "rank %d of %d ready (comm %016llx%s%s)", rank, nranks,
              (unsigned long long)comm->comm_id, comm->name[0] ? ", " : "", comm->name);
    *comm_p = comm;
    return COLL_OK;
err:
    if (coll_get_last_error()[0] == '\0') { /* say why even when the log is off */
        coll_set_last_error(st, "rank %d: %s", rank,
                            coll_log_last_error()[0] != '\0' ? coll_log_last_error()
                                                             : coll_strerror(st));
    }
    if (comm->bs != NULL) {
        coll_bootstrap_abort(comm->bs, coll_get_last_error());
        coll_bootstrap_close(comm->bs, coll_time_s() + 1.0);
        comm->bs = NULL;
    }
    comm_free(comm);
    return st;
}

COLL_API coll_result_t coll_comm_destroy(coll_comm_t *comm)
{
    COLL_CHECK(coll_comm_check_handle(comm, "coll_comm_destroy"));
    if (comm->is_world) { /* else coll_finalize would destroy it again */
        return coll_set_last_error(COLL_ERR_INVALID_USAGE,
                                   "coll_comm_destroy: rank %d: this is the communicator of "
                                   "coll_init; coll_finalize destroys it",
                                   comm->rank);
    }
    coll_cuda_comm_destroy(comm); /* lets queued device operations end first */
    pthread_mutex_lock(&comm->lock);
    int busy = comm->active != NULL && comm->error == COLL_OK;
    pthread_mutex_unlock(&comm->lock);
    if (busy) {
        coll_warn(COLL, "rank %d: destroying a communicator with operations still running",
                  comm->rank);
    }
    coll_result_t st = coll_bootstrap_close(comm->bs, coll_time_s() + comm->timeout_s);
    comm->bs         = NULL;
    if (st == COLL_OK && !busy && comm->error == COLL_OK) {
        /* every rank is past its last operation: nothing in flight can be lost */
        for (int t = 0; t < comm->ntp; t++) {
            if (comm->tp[t].ctx != NULL && comm->tp[t].ops->quiesce != NULL) {
                comm->tp[t].ops->quiesce(comm->tp[t].ctx);
            }
        }
    }
    comm_free(comm);
    return st == COLL_ERR_TIMEOUT || st == COLL_AGAIN ? COLL_OK : st;
}

void coll_comm_abort_record(coll_comm_t *comm)
{
    if (comm->error == COLL_OK) {
        snprintf(comm->last_error, sizeof(comm->last_error), "coll_comm_abort called on rank %d",
                 comm->rank);
        __atomic_store_n(&comm->error, COLL_ERR_ABORTED, __ATOMIC_RELEASE);
    }
}

void coll_comm_record_flags(coll_comm_t *comm)
{
    if (atomic_load(&comm->aborted)) {
        coll_comm_abort_record(comm);
    } else if (atomic_load(&comm->revoked)) {
        coll_comm_revoke_record(comm);
    }
}

COLL_API coll_result_t coll_comm_abort(coll_comm_t *comm)
{
    COLL_CHECK(coll_comm_check_handle(comm, "coll_comm_abort"));
    if (atomic_exchange(&comm->aborted, 1) != 0) {
        return COLL_OK;
    }
    char reason[128];
    snprintf(reason, sizeof(reason), "coll_comm_abort called on rank %d", comm->rank);
    /* A waiter may hold the lock while it sleeps in a transport: then it records the abort
     * itself at its next check (coll_engine_check sees the flag), so the error is never
     * written by two threads at once. */
    if (pthread_mutex_trylock(&comm->lock) == 0) {
        coll_comm_abort_record(comm);
        pthread_mutex_unlock(&comm->lock);
    }
    if (comm->bs != NULL) {
        coll_bootstrap_abort(comm->bs, reason);
    }
    coll_engine_wake(comm);
    return COLL_OK;
}

COLL_API coll_result_t coll_comm_rank(const coll_comm_t *comm, int *rank_p)
{
    COLL_CHECK(coll_comm_check_handle(comm, "coll_comm_rank"));
    if (rank_p == NULL) {
        return coll_set_last_error(COLL_ERR_INVALID_ARG, "coll_comm_rank: rank_p is NULL");
    }
    *rank_p = comm->rank;
    return COLL_OK;
}

COLL_API coll_result_t coll_comm_size(const coll_comm_t *comm, int *size_p)
{
    COLL_CHECK(coll_comm_check_handle(comm, "coll_comm_size"));
    if (size_p == NULL) {
        return coll_set_last_error(COLL_ERR_INVALID_ARG, "coll_comm_size: size_p is NULL");
    }
    *size_p = comm->nranks;
    return COLL_OK;
}

COLL_API coll_result_t coll_comm_nhosts(const coll_comm_t *comm, int *nhosts_p)
{
    COLL_CHECK(coll_comm_check_handle(comm, "coll_comm_nhosts"));
    if (nhosts_p == NULL) {
        return coll_set_last_error(COLL_ERR_INVALID_ARG, "coll_comm_nhosts: nhosts_p is NULL");
    }
    *nhosts_p = comm->layout.nhosts;
    return COLL_OK;
}

COLL_API coll_result_t coll_comm_get_error(const coll_comm_t *comm)
{
    COLL_CHECK(coll_comm_check_handle(comm, "coll_comm_get_error"));
    if (comm->error == COLL_OK && atomic_load(&comm->aborted)) {
        return COLL_ERR_ABORTED; /* a waiter has not recorded it yet */
    }
    if (comm->error == COLL_OK && atomic_load(&comm->revoked)) {
        return COLL_ERR_REVOKED;
    }
    return comm->error;
}

COLL_API const char *coll_comm_last_error(const coll_comm_t *comm)
{
    if (comm == NULL || comm->magic != COLL_COMM_MAGIC) {
        return coll_get_last_error();
    }
    return comm->last_error;
}
