/* SPDX-License-Identifier: MIT */
/*
 * Entry points that create communicators: coll_get_unique_id (NCCL style), coll_comm_init_rank,
 * coll_init/coll_finalize (MPI style, from the launcher's environment) and coll_comm_split.
 */
#include "api/comm.h"
#include "bootstrap/wire.h"
#include "engine/engine.h"
#include "error.h"
#include "log.h"
#include "param.h"
#include "util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static coll_comm_t    *init_world;

static coll_result_t init_library(void)
{
    COLL_CHECK(coll_params_load());
    coll_log_init();
    return COLL_OK;
}

/* Wildcard address of the same family, port kept: a root reachable on every interface. */
static coll_sockaddr_t init_any_addr(const coll_sockaddr_t *like)
{
    coll_sockaddr_t any;
    memset(&any, 0, sizeof(any));
    any.ss.ss_family = like->ss.ss_family;
    any.len          = like->len;
    coll_sock_set_port(&any, coll_sock_port(like));
    return any;
}

COLL_API coll_result_t coll_get_unique_id(coll_unique_id_t *id_p)
{
    coll_sockaddr_t addr;
    uint8_t         secret[16];
    uint64_t        nonce;
    if (id_p == NULL) {
        return coll_set_last_error(COLL_ERR_INVALID_ARG, "coll_get_unique_id: id_p is NULL");
    }
    COLL_CHECK(init_library());
    COLL_CHECK(coll_sock_pick_addr(0, &addr, NULL, NULL));
    COLL_CHECK(coll_random_bytes(secret, sizeof(secret)));
    COLL_CHECK(coll_random_bytes(&nonce, sizeof(nonce)));
    coll_sockaddr_t any = init_any_addr(&addr);
    return coll_boot_root_start(&any, &addr, secret, nonce, id_p);
}

COLL_API coll_result_t coll_comm_init_rank_config(coll_comm_t **comm_p, int nranks,
                                                  coll_unique_id_t id, int rank,
                                                  const coll_config_t *config)
{
    COLL_CHECK(init_library());
    if (comm_p == NULL) {
        return coll_set_last_error(COLL_ERR_INVALID_ARG, "coll_comm_init_rank: comm_p is NULL");
    }
    *comm_p = NULL;
    if (nranks < 1) {
        return coll_set_last_error(COLL_ERR_INVALID_ARG,
                                   "coll_comm_init_rank: nranks is %d, expected >= 1", nranks);
    }
    if (nranks > COLL_BOOT_MAX_RANKS) {
        return coll_set_last_error(COLL_ERR_INVALID_ARG,
                                   "coll_comm_init_rank: nranks is %d, at most %d are supported",
                                   nranks, COLL_BOOT_MAX_RANKS);
    }
    if (rank < 0 || rank >= nranks) {
        return coll_set_last_error(COLL_ERR_INVALID_ARG,
                                   "coll_comm_init_rank: rank is %d, expected 0..%d", rank,
                                   nranks - 1);
    }
    if (config != NULL && config->size != sizeof(coll_config_t)) {
        return coll_set_last_error(COLL_ERR_INVALID_ARG,
                                   "coll_comm_init_rank: config->size is %zu, expected %zu "
                                   "(use COLL_CONFIG_INITIALIZER)",
                                   config->size, sizeof(coll_config_t));
    }
    return coll_comm_create(comm_p, nranks, &id, rank, config);
}

COLL_API coll_result_t coll_comm_init_rank(coll_comm_t **comm_p, int nranks, coll_unique_id_t id,
                                           int rank)
{
    return coll_comm_init_rank_config(comm_p, nranks, id, rank, NULL);
}

COLL_API coll_result_t coll_init(int *argc, char ***argv, coll_comm_t **world_p)
{
    coll_env_job_t   job;
    coll_unique_id_t id;
    coll_result_t    st;
    if (world_p == NULL) {
        return coll_set_last_error(COLL_ERR_INVALID_ARG, "coll_init: world_p is NULL");
    }
    COLL_CHECK(init_library());
    pthread_mutex_lock(&init_lock);
    if (init_world != NULL) {
        pthread_mutex_unlock(&init_lock);
        return coll_set_last_error(COLL_ERR_INVALID_USAGE, "coll_init called twice");
    }
    COLL_CHECK_GOTO(coll_env_discover(&job), st, out);
    coll_log_set_rank(job.rank);
    uint64_t nonce = coll_hash_bytes(job.secret, sizeof(job.secret), 0x6e6f6e6365ull);
    if (job.rank == 0) {
        coll_sockaddr_t any = init_any_addr(&job.root_addr);
        st                  = coll_boot_root_start(&any, &job.root_addr, job.secret, nonce, &id);
        if (st != COLL_OK) {
            char buf[80];
            coll_set_last_error(st,
                                "rank 0 cannot host the bootstrap root on port %d (%s): "
                                "set COLL_ROOT_ADDR or MASTER_PORT to a free port",
                                coll_sock_port(&job.root_addr),
                                coll_sock_str(&job.root_addr, buf, sizeof(buf)));
            goto out;
        }
    } else {
        coll_boot_uid_make(&job.root_addr, job.secret, nonce, &id);
    }
    COLL_CHECK_GOTO(coll_comm_create(&init_world, job.nranks, &id, job.rank, NULL), st, out);
    init_world->is_world = 1;
    *world_p             = init_world;
out:
    pthread_mutex_unlock(&init_lock);
    return st;
}

COLL_API coll_result_t coll_finalize(void)
{
    pthread_mutex_lock(&init_lock);
    coll_comm_t *w = init_world;
    init_world     = NULL;
    pthread_mutex_unlock(&init_lock);
    if (w == NULL) {
        return coll_set_last_error(COLL_ERR_INVALID_USAGE, "coll_finalize without coll_init");
    }
    w->is_world = 0;
    return coll_comm_destroy(w);
}

typedef struct {
    int32_t color;
    int32_t key;
    int32_t rank;
} split_entry_t;

static int split_cmp(const void *a, const void *b)
{
    const split_entry_t *x = a, *y = b;
    if (x->key != y->key) {
        return x->key < y->key ? -1 : 1;
    }
    return x->rank < y->rank ? -1 : x->rank > y->rank;
}

/* This rank joins no split round: tell the others (coll_comm_tell_failed), so that their split
 * fails now naming this rank instead of waiting for the round until COLL_BOOTSTRAP_TIMEOUT. */
static int split_tell_failed(coll_comm_t *comm, coll_result_t st, const char *why)
{
    char reason[500];
    snprintf(reason, sizeof(reason), "%.470s; it left coll_comm_split", why);
    return coll_comm_tell_failed(comm, st, reason);
}

/* The split was refused or failed on this rank while the others are in (or on their way to)
 * its round: comm->last_error and the thread's message say why (msg), and the others are told.
 * Told, they fail comm naming this rank, so comm is failed here too: the round it left can
 * never complete. */
static coll_result_t split_refused(coll_comm_t *comm, coll_result_t st, const char *msg)
{
    char line[480];
    snprintf(line, sizeof(line), "rank %d: %s", comm->rank, msg);
    pthread_mutex_lock(&comm->lock);
    int failed = comm->error != COLL_OK;
    if (!failed) {
        coll_strlcpy(comm->last_error, line, sizeof(comm->last_error));
    }
    pthread_mutex_unlock(&comm->lock);
    if (!failed && split_tell_failed(comm, st, line)) {
        pthread_mutex_lock(&comm->lock);
        coll_comm_fail_logged(comm, st, line);
        pthread_mutex_unlock(&comm->lock);
    }
    coll_warn(COLL, "%s", line);
    return coll_set_last_error(st, "%s", line);
}

COLL_API coll_result_t coll_comm_split(coll_comm_t *comm, int color, int key,
                                       coll_comm_t **newcomm_p)
{
    coll_result_t st;
    COLL_CHECK(coll_comm_check_handle(comm, "coll_comm_split"));
    pthread_mutex_lock(&comm->lock);
    coll_comm_record_flags(comm);
    char told[600];
    if ((st = comm->error) != COLL_OK) { /* failed, aborted or revoked: no round to join */
        snprintf(told, sizeof(told), "%s", comm->last_error);
        st = coll_set_last_error(st, "coll_comm_split: communicator already failed: %s",
                                 comm->last_error);
    }
    pthread_mutex_unlock(&comm->lock);
    if (st != COLL_OK) {
        split_tell_failed(comm, st, told);
        return st;
    }
    if (newcomm_p == NULL) {
        return split_refused(comm, COLL_ERR_INVALID_ARG, "coll_comm_split: newcomm_p is NULL");
    }
    if (color < 0 && color != COLL_SPLIT_NOCOLOR) {
        char msg[160];
        snprintf(msg, sizeof(msg),
                 "coll_comm_split: color %d is negative (only COLL_SPLIT_NOCOLOR may be)", color);
        return split_refused(comm, COLL_ERR_INVALID_ARG, msg);
    }
    *newcomm_p = NULL;
    coll_set_last_error(COLL_OK, "%s", ""); /* a failed step's own message, if any, is kept */
    errno                      = 0;
    double            deadline = coll_time_s() + coll_param_time(COLL_P_BOOTSTRAP_TIMEOUT);
    int               n        = comm->nranks;
    split_entry_t     mine     = {color, key, comm->rank};
    split_entry_t    *all      = coll_calloc((size_t)n, sizeof(*all), "split table");
    coll_unique_id_t *ids      = coll_calloc((size_t)n, sizeof(*ids), "split ids");
    coll_unique_id_t  myid;
    const char       *what = NULL; /* the local step that failed, the others waiting for it */
    memset(&myid, 0, sizeof(myid));
    if (all == NULL || ids == NULL) {
        st   = COLL_ERR_NO_MEMORY;
        what = "allocate the split's tables";
        goto out;
    }
    COLL_CHECK_GOTO(coll_bootstrap_allgather(comm->bs, &mine, sizeof(mine), all, deadline), st,
                    out);
    /* members of my color, ordered by (key, old rank); the first is the leader */
    int nmem = 0, newrank = -1, leader = -1;
    for (int i = 0; i < n; i++) {
        if (all[i].color == color && color != COLL_SPLIT_NOCOLOR) {
            all[nmem++] = all[i];
        }
    }
    qsort(all, (size_t)nmem, sizeof(*all), split_cmp);
    for (int i = 0; i < nmem; i++) {
        if (all[i].rank == comm->rank) {
            newrank = i;
        }
    }
    leader = nmem > 0 ? all[0].rank : -1;
    if (leader == comm->rank) {
        coll_sockaddr_t addr;
        uint8_t         secret[16];
        uint64_t        nonce;
        errno = 0; /* a step that fails without a message of its own: its errno */
        what  = "pick an address for the bootstrap root of the new communicator";
        COLL_CHECK_GOTO(coll_sock_pick_addr(0, &addr, NULL, NULL), st, out);
        what = "make the secret of the new communicator";
        COLL_CHECK_GOTO(coll_random_bytes(secret, sizeof(secret)), st, out);
        COLL_CHECK_GOTO(coll_random_bytes(&nonce, sizeof(nonce)), st, out);
        coll_sockaddr_t any = init_any_addr(&addr);
        what                = "start the bootstrap root of the new communicator";
        COLL_CHECK_GOTO(coll_boot_root_start(&any, &addr, secret, nonce, &myid), st, out);
        what = NULL;
    }
    COLL_CHECK_GOTO(coll_bootstrap_allgather(comm->bs, &myid, sizeof(myid), ids, deadline), st,
                    out);
    comm->nsplits++;
    if (newrank >= 0) {
        coll_config_t cfg = COLL_CONFIG_INITIALIZER;
        cfg.timeout_s     = comm->timeout_s;
        st                = coll_comm_create(newcomm_p, nmem, &ids[leader], newrank, &cfg);
    }
out:;
    int err = errno; /* of the failed step, before the frees */
    coll_free(all);
    coll_free(ids);
    char why[256];
    if (st != COLL_OK && coll_bootstrap_poll(comm->bs, why, sizeof(why)) != COLL_OK) {
        /* a rank aborted or died during the split: the parent failed with it, naming it */
        pthread_mutex_lock(&comm->lock);
        st = coll_comm_fail(comm, st, "rank %d: coll_comm_split: %s", comm->rank, why);
        pthread_mutex_unlock(&comm->lock);
        coll_set_last_error(st, "%s", comm->last_error);
    } else if (st != COLL_OK && what != NULL) {
        /* failed here before joining the round the others wait in: say what, and tell them */
        char        msg[420];
        const char *detail = coll_last_error()[0] != '\0'        ? coll_last_error()
                             : st == COLL_ERR_SYSTEM && err != 0 ? strerror(err)
                                                                 : coll_strerror(st);
        snprintf(msg, sizeof(msg), "coll_comm_split: cannot %s: %.300s", what, detail);
        st = split_refused(comm, st, msg);
    }
    return st;
}
