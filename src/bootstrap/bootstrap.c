/* SPDX-License-Identifier: MIT */
/*
 * Bootstrap client: joins the root, runs gather rounds, and watches the control connection
 * for notices (another rank aborted or died, the join failed). The first failure is kept and
 * returned by every later call, so all layers above see one consistent cause.
 */
#include "auth.h"
#include "bootstrap.h"
#include "standby.h"
#include "error.h"
#include "log.h"
#include "util.h"
#include "wire.h"

#include <errno.h>
#include <stdarg.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/socket.h>
#include <string.h>
#include <unistd.h>

struct coll_bootstrap {
    int            fd;
    int            rank;
    int            nranks;
    uint64_t       job_tag;
    uint64_t       nonce;
    uint64_t       seed;
    uint8_t        secret[16];
    uint32_t       round;
    coll_result_t  failed;
    char           fail_msg[256];
    coll_standby_t standby; /* for a shrink after the root died */
    /* One message at a time on fd: coll_comm_abort (ABORT, any thread) may send while the
     * communicator's thread sends a round or a FAILED notice. */
    pthread_mutex_t send_lock;
};

static coll_result_t boot_fail(coll_bootstrap_t *bs, coll_result_t st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static coll_result_t boot_fail(coll_bootstrap_t *bs, coll_result_t st, const char *fmt, ...)
{
    if (bs->failed == COLL_OK) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(bs->fail_msg, sizeof(bs->fail_msg), fmt, ap);
        va_end(ap);
        bs->failed = st;
        coll_error(BOOTSTRAP, "%s", bs->fail_msg);
    }
    return bs->failed;
}

/* One message on the root connection, under the send lock; the socket's status. */
static coll_result_t boot_send_raw(coll_bootstrap_t *bs, coll_boot_type_t type, uint32_t round,
                                   const void *payload, uint32_t len, double deadline)
{
    coll_boot_hdr_t h;
    coll_result_t   st = COLL_OK;
    coll_boot_hdr_fill(&h, type, bs->job_tag, bs->rank, round, len);
    while (pthread_mutex_trylock(&bs->send_lock) != 0) {
        if (coll_time_s() >= deadline) {
            return COLL_ERR_TIMEOUT; /* the other sender is stuck on a full socket */
        }
        usleep(200);
    }
    st = coll_sock_send_all(bs->fd, &h, sizeof(h), deadline);
    if (st == COLL_OK && len > 0) {
        st = coll_sock_send_all(bs->fd, payload, len, deadline);
    }
    pthread_mutex_unlock(&bs->send_lock);
    return st;
}

static coll_result_t boot_send(coll_bootstrap_t *bs, coll_boot_type_t type, uint32_t round,
                               const void *payload, uint32_t len, double deadline)
{
    coll_result_t st = boot_send_raw(bs, type, round, payload, len, deadline);
    if (st != COLL_OK && type != COLL_BOOT_BYE && type != COLL_BOOT_ABORT &&
        type != COLL_BOOT_FAILED) {
        return boot_fail(bs, st == COLL_ERR_TIMEOUT ? st : COLL_ERR_REMOTE,
                         "lost the bootstrap root (rank 0's process died?) while sending %s",
                         coll_boot_type_name(type));
    }
    return st;
}

/* Read one message; payload (if any) into buf of cap bytes. */
static coll_result_t boot_recv(coll_bootstrap_t *bs, coll_boot_hdr_t *h, void *buf, size_t cap,
                               double deadline)
{
    char          why[200];
    char          scratch[512];
    coll_result_t st = coll_sock_recv_all(bs->fd, h, sizeof(*h), deadline);
    if (st == COLL_ERR_TIMEOUT) {
        return st;
    }
    if (st != COLL_OK) {
        return boot_fail(bs, COLL_ERR_REMOTE,
                         "lost the connection to the bootstrap root (rank 0's process died?)");
    }
    if (coll_boot_hdr_check(h, bs->job_tag, UINT32_MAX, why, sizeof(why)) != COLL_OK) {
        return boot_fail(bs, COLL_ERR_TRANSPORT, "bad message from the bootstrap root: %s", why);
    }
    int   is_notice = h->type != COLL_BOOT_GATHER;
    void *dst       = is_notice ? scratch : buf;
    if (h->len > (is_notice ? sizeof(scratch) - 1 : cap)) {
        return boot_fail(bs, COLL_ERR_TRANSPORT, "bootstrap %s of %u bytes is too large",
                         coll_boot_type_name(h->type), h->len);
    }
    st = coll_sock_recv_all(bs->fd, dst, h->len, deadline);
    if (st != COLL_OK) {
        return boot_fail(bs, COLL_ERR_REMOTE, "lost the bootstrap root mid-message");
    }
    if (is_notice) {
        scratch[h->len] = '\0';
        switch (h->type) {
        case COLL_BOOT_DEATH:
            return boot_fail(bs, COLL_ERR_REMOTE, "%s", scratch);
        case COLL_BOOT_ABORT:
            return boot_fail(bs, COLL_ERR_REMOTE, "rank %d aborted the communicator: %s", h->rank,
                             scratch);
        case COLL_BOOT_ERROR:
            return boot_fail(bs, COLL_ERR_REMOTE, "bootstrap failed: %s", scratch);
        case COLL_BOOT_REVOKE:
            return boot_fail(bs, COLL_ERR_REVOKED, "rank %d revoked the communicator: %s", h->rank,
                             scratch);
        case COLL_BOOT_FAILED:
            return boot_fail(bs, COLL_ERR_REMOTE, "rank %d's communicator failed: %s", h->rank,
                             scratch);
        default:
            break; /* WELCOME, FIN: the caller looks at the type */
        }
    }
    return COLL_OK;
}

coll_result_t coll_boot_auth_connect(int fd, const coll_auth_key_t *key, double deadline)
{
    coll_auth_state_t as;
    uint8_t           challenge[COLL_AUTH_CHALLENGE_LEN], response[COLL_AUTH_RESPONSE_LEN];
    uint8_t           proof[COLL_AUTH_PROOF_LEN];

    COLL_CHECK(coll_sock_recv_all(fd, challenge, sizeof(challenge), deadline));
    if (coll_auth_respond(key, &as, challenge, NULL, 0, response) != COLL_OK) {
        return COLL_ERR_INVALID_ARG;
    }
    COLL_CHECK(coll_sock_send_all(fd, response, sizeof(response), deadline));
    COLL_CHECK(coll_sock_recv_all(fd, proof, sizeof(proof), deadline));
    return coll_auth_check_proof(key, &as, proof, NULL, 0) == COLL_OK ? COLL_OK
                                                                      : COLL_ERR_TRANSPORT;
}

/* Did the peer close fd before sending anything (waits for its first byte until deadline)? */
static int boot_closed_unchallenged(int fd, double deadline)
{
    char          b;
    struct pollfd p  = {.fd = fd, .events = POLLIN};
    double        ms = (deadline - coll_time_s()) * 1e3;
    if (ms <= 0 || poll(&p, 1, (int)ms + 1) <= 0) {
        return 0;
    }
    ssize_t n = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* Answer the root's challenge and check its proof: both sides hold the job secret. */
static coll_result_t boot_authenticate(coll_bootstrap_t *bs, const coll_sockaddr_t *addr,
                                       double deadline)
{
    coll_auth_key_t key;
    char            abuf[80];

    coll_auth_derive(bs->secret, "bootstrap", bs->nonce, &key);
    coll_result_t st = coll_boot_auth_connect(bs->fd, &key, deadline);
    if (st == COLL_ERR_INVALID_ARG) {
        return coll_set_last_error(COLL_ERR_TRANSPORT,
                                   "rank %d: %s is not a libcoll bootstrap root of this "
                                   "version (no authentication challenge)",
                                   bs->rank, coll_sock_str(addr, abuf, sizeof(abuf)));
    }
    if (st == COLL_ERR_TRANSPORT) {
        return coll_set_last_error(COLL_ERR_TRANSPORT,
                                   "rank %d: the bootstrap root at %s failed authentication: it "
                                   "does not hold this job's secret",
                                   bs->rank, coll_sock_str(addr, abuf, sizeof(abuf)));
    }
    int e = st != COLL_OK ? coll_boot_root_accept_errno(bs->nonce) : 0;
    if (e != 0) { /* the root is this process's, and cannot take the connection */
        return coll_set_last_error(st == COLL_ERR_TIMEOUT ? st : COLL_ERR_TRANSPORT,
                                   "rank %d: the bootstrap root at %s (in this process) cannot "
                                   "accept connections: %s",
                                   bs->rank, coll_sock_str(addr, abuf, sizeof(abuf)), strerror(e));
    }
    if (st != COLL_OK) {
        return coll_set_last_error(st == COLL_ERR_TIMEOUT ? st : COLL_ERR_TRANSPORT,
                                   "rank %d: authentication with the bootstrap root at %s failed "
                                   "(%s): the root rejected this rank's job secret, is "
                                   "another job's, or cannot accept connections (its log says "
                                   "which)",
                                   bs->rank, coll_sock_str(addr, abuf, sizeof(abuf)),
                                   st == COLL_ERR_TIMEOUT ? "timed out" : "connection closed");
    }
    return COLL_OK;
}

/* Round 0: every rank's standby address (family 0 where it could not listen). */
static coll_result_t boot_standby_exchange(coll_bootstrap_t *bs, double deadline)
{
    coll_boot_addr_t mine, *all;
    if (bs->nranks < 2) {
        return COLL_OK;
    }
    memset(&mine, 0, sizeof(mine));
    if (coll_standby_open(&bs->standby, bs->fd, bs->rank, bs->nranks, bs->secret, bs->nonce,
                          bs->job_tag, &mine) != COLL_OK) {
        coll_warn(BOOTSTRAP,
                  "rank %d: no standby address: if the root dies, this rank cannot "
                  "run the shrink in its place",
                  bs->rank);
        coll_standby_close(&bs->standby);
        memset(&mine, 0, sizeof(mine));
    }
    all = coll_malloc(sizeof(*all) * (size_t)bs->nranks, "standby addresses");
    if (all == NULL) {
        return COLL_ERR_NO_MEMORY;
    }
    coll_result_t st = coll_bootstrap_allgather(bs, &mine, sizeof(mine), all, deadline);
    if (st == COLL_OK) {
        st = coll_standby_set_table(&bs->standby, all);
    } else {
        coll_set_last_error(st, "rank %d: %s", bs->rank, bs->fail_msg);
    }
    coll_free(all);
    return st;
}

coll_result_t coll_bootstrap_connect(const coll_unique_id_t *id, int rank, int nranks,
                                     double deadline, coll_bootstrap_t **bs_p)
{
    coll_sockaddr_t   addr;
    uint8_t           secret[16];
    char              abuf[80];
    coll_boot_hdr_t   h;
    coll_result_t     st;
    int               said_hello = 0, welcomed = 0;
    coll_bootstrap_t *bs = coll_calloc(1, sizeof(*bs), "bootstrap");
    if (bs == NULL) {
        return COLL_ERR_NO_MEMORY;
    }
    bs->fd                = -1;
    bs->standby.listen_fd = -1;
    pthread_mutex_init(&bs->send_lock, NULL);
    COLL_CHECK_GOTO(coll_boot_uid_parse(id, &addr, secret, &bs->nonce), st, err);
    bs->rank    = rank;
    bs->nranks  = nranks;
    bs->job_tag = coll_boot_job_tag(secret);
    memcpy(bs->secret, secret, sizeof(bs->secret));
    bs->seed = coll_hash_bytes(secret, 16, 0x73656564ull);
    for (;;) {
        st = coll_sock_connect(&addr, deadline, &bs->fd);
        if (st != COLL_OK) {
            coll_set_last_error(st, "rank %d cannot reach the bootstrap root at %s", rank,
                                coll_sock_str(&addr, abuf, sizeof(abuf)));
            goto err;
        }
        /* A root that closes before its challenge is going away, not refusing this rank (a
         * refusal comes after the answer): the root of a communicator this process just
         * finalised, on the address of the next. Try again until the new one listens. */
        if (!boot_closed_unchallenged(bs->fd, deadline) || coll_time_s() >= deadline) {
            break;
        }
        close(bs->fd);
        bs->fd = -1;
        usleep(20000);
    }
    COLL_CHECK_GOTO(boot_authenticate(bs, &addr, deadline), st, err);
    coll_boot_hello_t hello = {.nranks = nranks, .rank = rank, .comm_nonce = bs->nonce};
    COLL_CHECK_GOTO(boot_send(bs, COLL_BOOT_HELLO, 0, &hello, sizeof(hello), deadline), st, err);
    said_hello = 1;
    do { /* past the deadline the root names who is missing: give its answer time to come */
        st = boot_recv(bs, &h, NULL, 0, deadline + COLL_BOOT_JOIN_GRACE);
        if (st == COLL_ERR_TIMEOUT) {
            coll_set_last_error(st,
                                "rank %d: not every rank joined within COLL_BOOTSTRAP_TIMEOUT, "
                                "and the bootstrap root did not say which (it started later "
                                "than this rank, or it is stalled)",
                                rank);
            goto err;
        }
        if (st != COLL_OK) {
            coll_set_last_error(st, "rank %d: %s", rank, bs->fail_msg);
            goto err;
        }
    } while (h.type != COLL_BOOT_WELCOME);
    welcomed = 1;
    COLL_CHECK_GOTO(boot_standby_exchange(bs, deadline), st, err);
    coll_debug(BOOTSTRAP, "rank %d joined the bootstrap at %s", rank,
               coll_sock_str(&addr, abuf, sizeof(abuf)));
    *bs_p = bs;
    return COLL_OK;

err:
    if (said_hello && !welcomed) {
        /* leaving before the welcome is no failure of this rank for the others to hear of;
         * the payload tells a root that welcomed everyone meanwhile that this rank left
         * unwelcomed (it then reports it to the others, who would wait for it) */
        static const char why[] = "gave up joining before it heard that every rank had";
        boot_send(bs, COLL_BOOT_BYE, 0, why, (uint32_t)sizeof(why), coll_time_s() + 0.5);
    }
    if (bs->fd >= 0) {
        close(bs->fd);
    }
    coll_standby_close(&bs->standby);
    /* A root in this process ends too: after what it is sending now (the others may be
     * learning why the job failed), rather than with the process, mid-message. */
    coll_boot_root_join(bs->nonce);
    memset(bs->secret, 0, sizeof(bs->secret));
    pthread_mutex_destroy(&bs->send_lock);
    coll_free(bs);
    return st;
}

coll_result_t coll_bootstrap_allgather(coll_bootstrap_t *bs, const void *mine, size_t len,
                                       void *all, double deadline)
{
    coll_boot_hdr_t h;
    size_t          total = len * (size_t)bs->nranks;
    if (bs->failed != COLL_OK) {
        return bs->failed;
    }
    if (len > COLL_BOOT_MAX_PAYLOAD) {
        coll_error(BOOTSTRAP, "bootstrap all-gather of %zu bytes exceeds %u", len,
                   COLL_BOOT_MAX_PAYLOAD);
        return COLL_ERR_INVALID_ARG;
    }
    COLL_CHECK(boot_send(bs, COLL_BOOT_GATHER, bs->round, mine, (uint32_t)len, deadline));
    for (;;) {
        coll_result_t st = boot_recv(bs, &h, all, total, deadline);
        if (st == COLL_ERR_TIMEOUT) {
            return boot_fail(bs, st, "bootstrap round %u: not every rank arrived in time",
                             bs->round);
        }
        if (st != COLL_OK) {
            return st;
        }
        if (h.type == COLL_BOOT_GATHER) {
            if (h.round != bs->round || h.len != total) {
                return boot_fail(bs, COLL_ERR_MISMATCH,
                                 "bootstrap round %u: got round %u with %u bytes, expected %zu",
                                 bs->round, h.round, h.len, total);
            }
            bs->round++;
            return COLL_OK;
        }
    }
}

coll_result_t coll_bootstrap_barrier(coll_bootstrap_t *bs, double deadline)
{
    return coll_bootstrap_allgather(bs, NULL, 0, NULL, deadline);
}

coll_result_t coll_bootstrap_poll(coll_bootstrap_t *bs, char *msg, size_t msglen)
{
    coll_boot_hdr_t h;
    while (bs->failed == COLL_OK) {
        struct pollfd p = {.fd = bs->fd, .events = POLLIN};
        if (poll(&p, 1, 0) <= 0) {
            break;
        }
        /* the root writes notices whole: a short deadline is enough */
        if (boot_recv(bs, &h, NULL, 0, coll_time_s() + 2.0) != COLL_OK) {
            break;
        }
    }
    if (bs->failed != COLL_OK && msg != NULL) {
        coll_strlcpy(msg, bs->fail_msg, msglen);
    }
    return bs->failed;
}

void coll_bootstrap_abort(coll_bootstrap_t *bs, const char *reason)
{
    boot_send(bs, COLL_BOOT_ABORT, 0, reason, (uint32_t)strlen(reason) + 1, coll_time_s() + 1.0);
}

void coll_bootstrap_failed(coll_bootstrap_t *bs, const char *reason)
{
    boot_send(bs, COLL_BOOT_FAILED, 0, reason, (uint32_t)strlen(reason) + 1, coll_time_s() + 1.0);
}

coll_result_t coll_bootstrap_close(coll_bootstrap_t *bs, double deadline)
{
    coll_boot_hdr_t h;
    coll_result_t   st = boot_send(bs, COLL_BOOT_BYE, 0, NULL, 0, deadline);
    while (st == COLL_OK) {
        st = coll_sock_recv_all(bs->fd, &h, sizeof(h), deadline);
        if (st == COLL_OK && h.len > 0) {
            char skip[512];
            st = h.len <= sizeof(skip) ? coll_sock_recv_all(bs->fd, skip, h.len, deadline)
                                       : COLL_ERR_TRANSPORT;
        }
        if (st == COLL_OK && h.type == COLL_BOOT_FIN) {
            break;
        }
    }
    if (st == COLL_ERR_TIMEOUT) {
        coll_warn(BOOTSTRAP, "rank %d: not every rank finished before the deadline; closing",
                  bs->rank);
    }
    /* the root said FIN (or is gone): close at once, leaving no TIME_WAIT behind, so that
     * thousands of communicators in a row do not exhaust the port range */
    struct linger l = {.l_onoff = 1, .l_linger = 0};
    if (st == COLL_OK) {
        setsockopt(bs->fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
    }
    close(bs->fd);
    coll_standby_close(&bs->standby);
    coll_boot_root_join(bs->nonce);
    pthread_mutex_destroy(&bs->send_lock);
    coll_free(bs);
    return st == COLL_OK ? COLL_OK : st == COLL_ERR_TIMEOUT ? st : COLL_AGAIN;
}

int coll_bootstrap_fd(const coll_bootstrap_t *bs)
{
    return bs->fd;
}

uint64_t coll_bootstrap_job_tag(const coll_bootstrap_t *bs)
{
    return bs->job_tag;
}

uint64_t coll_bootstrap_seed(const coll_bootstrap_t *bs)
{
    return bs->seed;
}

void coll_bootstrap_auth_key(const coll_bootstrap_t *bs, const char *purpose, uint64_t ctx,
                             coll_auth_key_t *key)
{
    coll_auth_derive(bs->secret, purpose, ctx, key);
}

void coll_bootstrap_revoke(coll_bootstrap_t *bs, const char *reason)
{
    boot_send(bs, COLL_BOOT_REVOKE, 0, reason, (uint32_t)strlen(reason) + 1, coll_time_s() + 1.0);
}

coll_result_t coll_bootstrap_shrink(coll_bootstrap_t *bs, double deadline, int32_t *survivors,
                                    int *nsurvivors_p, coll_unique_id_t *id_p)
{
    coll_result_t st;

    /* no failure handling: a root that is gone is expected here (the standby takes over) */
    st = boot_send_raw(bs, COLL_BOOT_SHRINK, 0, NULL, 0, deadline);
    if (st == COLL_OK) {
        st = coll_boot_read_shrunk(bs->fd, bs->job_tag, bs->rank, bs->nranks, deadline, survivors,
                                   nsurvivors_p, id_p);
    }
    if (st == COLL_ERR_TIMEOUT) {
        return coll_set_last_error(st, "rank %d: the survivors did not agree before the deadline",
                                   bs->rank);
    }
    if (st != COLL_ERR_REMOTE && st != COLL_ERR_SYSTEM) {
        return st;
    }
    /* the root is gone (it runs in the process that made the unique id, rank 0's as a rule):
     * the survivors elect one of them to run the shrink */
    coll_warn(BOOTSTRAP, "rank %d: lost the bootstrap root; electing a survivor to run the shrink",
              bs->rank);
    return coll_standby_shrink(&bs->standby, deadline, survivors, nsurvivors_p, id_p);
}
