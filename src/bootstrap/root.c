/* SPDX-License-Identifier: MIT */
/*
 * The bootstrap root: one thread per unique id, in the process that created the id. It
 * accepts ranks (validating every header; strays are logged and dropped without disturbing
 * the job), runs gather rounds, relays ABORT, turns a member's disconnect before BYE into a
 * DEATH notice for everyone else, enforces the join deadline (naming the ranks that never
 * joined), tells a rank it turns away why (and everyone, when the ranks disagree on the number
 * of ranks), relays REVOKE, runs a shrink
 * (the survivors ask, it waits for every rank still connected or the deadline, starts the root
 * of their new communicator and tells them who they are), and ends after every BYE.
 */
#include "auth.h"
#include "bootstrap.h"
#include "error.h"
#include "log.h"
#include "param.h"
#include "util.h"
#include "wire.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ROOT_HELLO_TIMEOUT  10.0 /* a connection must say hello within this */
#define ROOT_LIST_MAX       8    /* ranks named in the join deadline's message */
#define ROOT_ACCEPT_BACKOFF 0.1  /* s without accepting after running out of descriptors */

/* What the root knows of each rank before the welcome (seen[]). by_rank[] only holds the
 * connections open now, so it cannot tell a rank that never came from one that left. */
enum { ROOT_NEVER = 0, ROOT_JOINED, ROOT_LEFT };

typedef struct root_conn {
    int               fd;
    int               rank; /* -1 until HELLO accepted */
    int               said_bye;
    int               asked_shrink;
    double            opened;
    coll_sockaddr_t   from;
    int               authed; /* the response proved the job secret */
    coll_auth_state_t auth;
    uint8_t           auth_buf[COLL_AUTH_RESPONSE_LEN];
    size_t            auth_got;
    coll_boot_hdr_t   hdr;
    size_t            hdr_got;
    char             *payload;
    size_t            pay_got;
} root_conn_t;

struct coll_boot_root {
    int               listen_fd;
    int               wake[2];
    uint64_t          job_tag;
    uint64_t          nonce;
    coll_auth_key_t   key;
    coll_sockaddr_t   bind_addr, adv_addr; /* port 0: for the root of a shrunk communicator */
    double            shrink_deadline;     /* 0: nobody asked to shrink yet */
    char             *shrunk;              /* the answer, once decided: payload of SHRUNK */
    uint32_t          shrunk_len;
    int               nranks;     /* from the first accepted hello */
    int               first_rank; /* the rank of that hello */
    root_conn_t     **conns;
    int               nconns;
    root_conn_t     **by_rank;
    uint8_t          *seen;   /* ROOT_NEVER, ROOT_JOINED or ROOT_LEFT per rank */
    int               failed; /* the join can no longer succeed: fail_msg is why */
    char              fail_msg[256];
    int               joined;
    int               byes;
    int               welcomed;
    uint32_t          round;
    int               gathered;
    uint32_t          gather_len;
    char             *gather_buf;
    double            join_deadline;
    int               accept_errno;  /* the last accept4 failed for lack of a resource: why */
    int               accept_logged; /* said so once */
    double            accept_resume; /* the listener is left out of poll until then */
    pthread_t         thread;
    int               done;
    coll_boot_root_t *next;
};

static pthread_mutex_t   root_list_lock = PTHREAD_MUTEX_INITIALIZER;
static coll_boot_root_t *root_list;
static pthread_once_t    root_atfork_once = PTHREAD_ONCE_INIT;

/* A forked child has none of the parent's root threads: forget them there (their memory is the
 * parent's business), so that a child's destroy never waits on a thread it does not have. */
static void root_atfork_child(void)
{
    pthread_mutex_init(&root_list_lock, NULL);
    root_list = NULL;
}

static void root_atfork_register(void)
{
    pthread_atfork(NULL, NULL, root_atfork_child);
}

static void root_send(coll_boot_root_t *r, root_conn_t *c, coll_boot_type_t type, int from,
                      uint32_t round, const void *payload, uint32_t len)
{
    coll_boot_hdr_t h;
    double          deadline = coll_time_s() + 10.0;
    if (c == NULL || c->fd < 0) {
        return;
    }
    coll_boot_hdr_fill(&h, type, r->job_tag, from, round, len);
    if (coll_sock_send_all(c->fd, &h, sizeof(h), deadline) != COLL_OK ||
        (len > 0 && coll_sock_send_all(c->fd, payload, len, deadline) != COLL_OK)) {
        coll_debug(BOOTSTRAP, "root: could not send %s to rank %d", coll_boot_type_name(type),
                   c->rank);
    }
}

static void root_broadcast(coll_boot_root_t *r, coll_boot_type_t type, int from, uint32_t round,
                           const void *payload, uint32_t len, int except)
{
    for (int i = 0; i < r->nranks; i++) {
        if (i != except && r->by_rank[i] != NULL) {
            root_send(r, r->by_rank[i], type, from, round, payload, len);
        }
    }
}

static void root_drop(coll_boot_root_t *r, int idx)
{
    root_conn_t *c = r->conns[idx];
    if (c->rank >= 0 && r->by_rank != NULL && r->by_rank[c->rank] == c) {
        r->by_rank[c->rank] = NULL;
        if (!r->welcomed) { /* its slot is free again: the welcome waits for it */
            r->seen[c->rank] = ROOT_LEFT;
            r->joined--;
        }
    }
    close(c->fd);
    coll_free(c->payload);
    coll_free(c);
    r->conns[idx] = r->conns[--r->nconns];
}

/* The job cannot form: every rank joined so far is told why, and so is every later one. */
static void root_fail(coll_boot_root_t *r, const char *msg, int except)
{
    coll_error(BOOTSTRAP, "root: %s", msg);
    coll_strlcpy(r->fail_msg, msg, sizeof(r->fail_msg));
    r->failed = 1;
    root_broadcast(r, COLL_BOOT_ERROR, -1, 0, msg, (uint32_t)strlen(msg) + 1, except);
}

/* 0: joined; -1: rejected for why; -2: rejected, and the job cannot form (tell everyone). */
static int root_hello(coll_boot_root_t *r, root_conn_t *c, char *why, size_t whylen)
{
    coll_boot_hello_t h;
    if (coll_boot_hello_parse(&c->hdr, c->payload, r->nonce, &h, why, whylen) != COLL_OK) {
        return -1;
    }
    if (r->failed) {
        coll_strlcpy(why, r->fail_msg, whylen);
        return -1;
    }
    if (r->nranks < 0) {
        r->by_rank = coll_calloc((size_t)h.nranks, sizeof(*r->by_rank), "bootstrap ranks");
        r->seen    = coll_calloc((size_t)h.nranks, 1, "bootstrap ranks");
        if (r->by_rank == NULL || r->seen == NULL) {
            coll_free(r->by_rank);
            coll_free(r->seen);
            r->by_rank = NULL;
            r->seen    = NULL;
            snprintf(why, whylen, "the bootstrap root is out of memory for %d ranks", h.nranks);
            return -1;
        }
        r->nranks     = h.nranks;
        r->first_rank = h.rank;
    } else if (h.nranks != r->nranks) {
        snprintf(why, whylen,
                 "the ranks disagree on the number of ranks: rank %d was given %d, rank %d was "
                 "given %d (COLL_NRANKS, WORLD_SIZE or coll_comm_init_rank's nranks)",
                 h.rank, h.nranks, r->first_rank, r->nranks);
        return -2;
    }
    if (r->by_rank[h.rank] != NULL) {
        snprintf(why, whylen, "rank %d joined twice", h.rank);
        return -1;
    }
    c->rank            = h.rank;
    r->by_rank[h.rank] = c;
    r->seen[h.rank]    = ROOT_JOINED;
    if (++r->joined == r->nranks) {
        root_broadcast(r, COLL_BOOT_WELCOME, -1, 0, NULL, 0, -1);
        r->welcomed = 1;
        coll_debug(BOOTSTRAP, "root: all %d ranks joined", r->nranks);
    }
    return 0;
}

static void root_gather(coll_boot_root_t *r, root_conn_t *c)
{
    char msg[160];
    if (c->hdr.round != r->round || (r->gathered > 0 && c->hdr.len != r->gather_len)) {
        snprintf(msg, sizeof(msg),
                 "rank %d sent %u bytes for bootstrap round %u; others sent %u for round %u",
                 c->rank, c->hdr.len, c->hdr.round, r->gather_len, r->round);
        coll_error(BOOTSTRAP, "%s", msg);
        root_broadcast(r, COLL_BOOT_ERROR, -1, 0, msg, (uint32_t)strlen(msg) + 1, -1);
        return;
    }
    if (r->gathered == 0) {
        r->gather_len = c->hdr.len;
        coll_free(r->gather_buf);
        r->gather_buf = coll_malloc((size_t)r->nranks * c->hdr.len, "bootstrap gather");
        if (r->gather_buf == NULL) {
            return;
        }
    }
    memcpy(r->gather_buf + (size_t)c->rank * r->gather_len, c->payload, c->hdr.len);
    if (++r->gathered == r->nranks) {
        root_broadcast(r, COLL_BOOT_GATHER, -1, r->round, r->gather_buf,
                       (uint32_t)((size_t)r->nranks * r->gather_len), -1);
        r->gathered = 0;
        r->round++;
    }
}

/* A rank finished (BYE) or is gone; after the last one everybody gets FIN. */
static void root_count_finished(coll_boot_root_t *r)
{
    if (++r->byes == r->nranks) {
        root_broadcast(r, COLL_BOOT_FIN, -1, 0, NULL, 0, -1);
        r->done = 1;
    }
}

/* Decide the shrink once nobody is left to ask (every rank still connected has asked, or has
 * finished or died) or the deadline passed; then start the survivors' root and answer them. */
static void root_shrink_check(coll_boot_root_t *r)
{
    int      pending = 0, n = 0;
    uint64_t nonce;
    uint8_t  secret[16];
    if (r->shrink_deadline == 0 || r->shrunk != NULL || r->nranks < 1) {
        return;
    }
    for (int i = 0; i < r->nranks; i++) {
        root_conn_t *c = r->by_rank[i];
        pending += c != NULL && !c->said_bye && !c->asked_shrink;
    }
    if (pending > 0 && coll_time_s() < r->shrink_deadline) {
        return;
    }
    size_t len = sizeof(coll_boot_shrunk_t) + sizeof(int32_t) * (size_t)r->nranks;
    char  *buf = coll_calloc(1, len, "shrink answer");
    if (buf == NULL) {
        return;
    }
    coll_boot_shrunk_t *h    = (coll_boot_shrunk_t *)buf;
    int32_t            *list = (int32_t *)(buf + sizeof(*h));
    for (int i = 0; i < r->nranks; i++) {
        if (r->by_rank[i] != NULL && r->by_rank[i]->asked_shrink && !r->by_rank[i]->said_bye) {
            list[n++] = i;
        }
    }
    h->nsurvivors = n;
    if (coll_random_bytes(secret, sizeof(secret)) != COLL_OK ||
        coll_random_bytes(&nonce, sizeof(nonce)) != COLL_OK ||
        coll_boot_root_start(&r->bind_addr, &r->adv_addr, secret, nonce, &h->id) != COLL_OK) {
        h->nsurvivors = 0; /* the survivors learn that it failed */
    }
    r->shrunk     = buf;
    r->shrunk_len = (uint32_t)(sizeof(*h) + sizeof(int32_t) * (size_t)n);
    coll_info(BOOTSTRAP, "root: shrink decided: %d of %d ranks continue (%d did not ask in time)",
              n, r->nranks, pending);
    for (int i = 0; i < r->nranks; i++) {
        if (r->by_rank[i] != NULL && r->by_rank[i]->asked_shrink && !r->by_rank[i]->said_bye) {
            root_send(r, r->by_rank[i], COLL_BOOT_SHRUNK, -1, 0, r->shrunk, r->shrunk_len);
        }
    }
}

static void root_shrink_ask(coll_boot_root_t *r, root_conn_t *c)
{
    c->asked_shrink = 1;
    if (r->shrunk != NULL) { /* too late: it was decided without this rank */
        root_send(r, c, COLL_BOOT_SHRUNK, -1, 0, r->shrunk, r->shrunk_len);
        return;
    }
    if (r->shrink_deadline == 0) {
        r->shrink_deadline = coll_time_s() + coll_param_time(COLL_P_TIMEOUT);
    }
    root_shrink_check(r);
}

static void root_lost(coll_boot_root_t *r, root_conn_t *c, const char *cause);

/* Returns -1 when the connection is to be dropped (a rank that leaves before the welcome). */
static int root_message(coll_boot_root_t *r, root_conn_t *c)
{
    switch (c->hdr.type) {
    case COLL_BOOT_GATHER:
        root_gather(r, c);
        break;
    case COLL_BOOT_ABORT:
    case COLL_BOOT_REVOKE:
    case COLL_BOOT_FAILED:
        root_broadcast(r, (coll_boot_type_t)c->hdr.type, c->rank, 0, c->payload, c->hdr.len,
                       c->rank);
        break;
    case COLL_BOOT_SHRINK:
        root_shrink_ask(r, c);
        break;
    case COLL_BOOT_BYE:
        if (!r->welcomed) { /* it gave up waiting (its own deadline, or it was told why) */
            coll_debug(BOOTSTRAP, "root: rank %d left before every rank had joined", c->rank);
            return -1;
        }
        if (c->hdr.len > 0) { /* sent before it heard the WELCOME that crossed it */
            root_lost(r, c, "it gave up joining at its deadline just as the last rank joined");
            return -1;
        }
        c->said_bye = 1;
        root_count_finished(r);
        break;
    default:
        coll_warn(BOOTSTRAP, "root: unexpected %s from rank %d ignored",
                  coll_boot_type_name(c->hdr.type), c->rank);
    }
    return 0;
}

/* Member disconnected: before BYE that is a failure everyone must hear about. */
static void root_lost(coll_boot_root_t *r, root_conn_t *c, const char *cause)
{
    char msg[200];
    if (c->rank < 0 || c->said_bye || (!r->welcomed && r->failed)) {
        return; /* the job already failed: the others were told why */
    }
    snprintf(msg, sizeof(msg), "rank %d disconnected from the bootstrap without finishing (%s)",
             c->rank, cause);
    if (!r->welcomed) { /* the job can no longer form: tell later ranks too */
        root_fail(r, msg, c->rank);
        return;
    }
    coll_warn(BOOTSTRAP, "root: %s", msg);
    root_broadcast(r, COLL_BOOT_DEATH, c->rank, 0, msg, (uint32_t)strlen(msg) + 1, c->rank);
    c->said_bye = 1; /* it will never say BYE itself */
    root_count_finished(r);
    root_shrink_check(r);
}

/* Before anything else a connection must answer the challenge with the job secret; nothing it
 * sends is parsed until then. Returns 1 when authenticated, 0 for more bytes, -1 to drop. */
static int root_auth(coll_boot_root_t *r, root_conn_t *c)
{
    uint8_t proof[COLL_AUTH_PROOF_LEN];
    char    addr[80];
    ssize_t n = recv(c->fd, c->auth_buf + c->auth_got, sizeof(c->auth_buf) - c->auth_got, 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        if (c->auth_got > 0 || n < 0) {
            coll_warn(BOOTSTRAP, "root: connection from %s closed during authentication",
                      coll_sock_str(&c->from, addr, sizeof(addr)));
        }
        return -1;
    }
    c->auth_got += n > 0 ? (size_t)n : 0;
    if (c->auth_got < sizeof(c->auth_buf)) {
        return 0;
    }
    coll_result_t st = coll_auth_check_response(&r->key, &c->auth, c->auth_buf, NULL, 0, proof);
    if (st != COLL_OK) {
        coll_warn(BOOTSTRAP, "root: rejected connection from %s: authentication failed: %s",
                  coll_sock_str(&c->from, addr, sizeof(addr)),
                  st == COLL_ERR_INVALID_ARG
                      ? "not an authentication response (not libcoll, or another version)"
                      : "the peer does not hold this job's secret (another job, or a replay)");
        return -1;
    }
    if (coll_sock_send_all(c->fd, proof, sizeof(proof), coll_time_s() + 2.0) != COLL_OK) {
        return -1;
    }
    c->authed = 1;
    return 1;
}

/* Read what is available; returns -1 when the connection must be dropped. */
static int root_read(coll_boot_root_t *r, root_conn_t *c)
{
    char why[256], addr[80];
    while (!c->authed) {
        int a = root_auth(r, c);
        if (a <= 0) {
            return a;
        }
    }
    for (;;) {
        void *dst =
            c->hdr_got < sizeof(c->hdr) ? (char *)&c->hdr + c->hdr_got : c->payload + c->pay_got;
        size_t want =
            c->hdr_got < sizeof(c->hdr) ? sizeof(c->hdr) - c->hdr_got : c->hdr.len - c->pay_got;
        ssize_t n = want > 0 ? recv(c->fd, dst, want, 0) : 0;
        if (want > 0 && n == 0) {
            root_lost(r, c, "connection closed; process died?");
            return -1;
        }
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
                return 0;
            }
            root_lost(r, c, strerror(errno));
            return -1;
        }
        if (c->hdr_got < sizeof(c->hdr)) {
            c->hdr_got += (size_t)n;
            if (c->hdr_got < sizeof(c->hdr)) {
                continue;
            }
            if (coll_boot_hdr_check(&c->hdr, r->job_tag, COLL_BOOT_MAX_PAYLOAD, why, sizeof(why)) !=
                COLL_OK) {
                coll_warn(BOOTSTRAP, "root: rejected %s from %s: %s",
                          c->rank < 0 ? "connection" : "message",
                          coll_sock_str(&c->from, addr, sizeof(addr)), why);
                root_lost(r, c, "sent a malformed message");
                return -1;
            }
            coll_free(c->payload);
            c->payload = coll_malloc(c->hdr.len, "bootstrap message");
            c->pay_got = 0;
            if (c->payload == NULL) {
                return -1;
            }
        } else {
            c->pay_got += (size_t)n;
        }
        if (c->pay_got < c->hdr.len) {
            continue;
        }
        c->hdr_got = 0;
        if (c->rank < 0) {
            int joined = root_hello(r, c, why, sizeof(why));
            if (joined < 0) {
                coll_warn(BOOTSTRAP, "root: rejected connection from %s: %s",
                          coll_sock_str(&c->from, addr, sizeof(addr)), why);
                /* it proved the job secret: it may learn why, instead of guessing */
                root_send(r, c, COLL_BOOT_ERROR, -1, 0, why, (uint32_t)strlen(why) + 1);
                if (joined == -2) {
                    root_fail(r, why, -1);
                }
                return -1;
            }
        } else if (root_message(r, c) < 0) {
            return -1;
        }
    }
}

static void root_accept(coll_boot_root_t *r)
{
    for (;;) {
        coll_sockaddr_t from = {.len = sizeof(from.ss)};
        int             fd   = accept4(r->listen_fd, (struct sockaddr *)&from.ss, &from.len,
                                       SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
            int e = errno;
            if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM) {
                /* the connection stays in the backlog and the listener stays readable: wait a
                 * little before trying again instead of spinning until the join deadline */
                if (!r->accept_logged) {
                    coll_error(BOOTSTRAP, "root: cannot accept connections: %s", strerror(e));
                    r->accept_logged = 1;
                }
                __atomic_store_n(&r->accept_errno, e, __ATOMIC_RELEASE);
                r->accept_resume = coll_time_s() + ROOT_ACCEPT_BACKOFF;
            }
            return;
        }
        __atomic_store_n(&r->accept_errno, 0, __ATOMIC_RELEASE);
        root_conn_t **grown = coll_realloc(r->conns, sizeof(*grown) * (size_t)(r->nconns + 1),
                                           "bootstrap connections");
        root_conn_t  *c     = coll_calloc(1, sizeof(*c), "bootstrap connection");
        if (grown == NULL || c == NULL) {
            coll_free(c);
            close(fd);
            if (grown != NULL) {
                r->conns = grown;
            }
            return;
        }
        coll_sock_nonblock(fd);
        uint8_t challenge[COLL_AUTH_CHALLENGE_LEN];
        /* a fresh socket's send buffer is empty: the whole challenge goes at once or never */
        if (coll_auth_challenge(&c->auth, challenge) != COLL_OK ||
            send(fd, challenge, sizeof(challenge), MSG_NOSIGNAL) != (ssize_t)sizeof(challenge)) {
            coll_free(c);
            close(fd);
            r->conns = grown;
            continue;
        }
        c->fd                 = fd;
        c->rank               = -1;
        c->opened             = coll_time_s();
        c->from               = from;
        r->conns              = grown;
        r->conns[r->nconns++] = c;
    }
}

/* Append " and " / ", " then "rank 3" or "ranks 2, 5, ... (N in all)" for the ranks in state. */
static void root_list_ranks(const coll_boot_root_t *r, int state, const char *what, char *msg,
                            size_t len)
{
    int    n = 0, shown = 0;
    size_t o = strlen(msg);
    for (int i = 0; i < r->nranks; i++) {
        n += r->seen[i] == state;
    }
    if (n == 0 || o >= len) {
        return;
    }
    o += (size_t)snprintf(msg + o, len - o, "%s%s", o > 0 ? "; " : "", n == 1 ? "rank" : "ranks");
    for (int i = 0; i < r->nranks && shown < ROOT_LIST_MAX && o < len; i++) {
        if (r->seen[i] == state) {
            o += (size_t)snprintf(msg + o, len - o, "%s %d", shown++ > 0 ? "," : "", i);
        }
    }
    if (o < len && shown < n) {
        o += (size_t)snprintf(msg + o, len - o, ", ... (%d in all)", n);
    }
    if (o < len) {
        snprintf(msg + o, len - o, " %s", what);
    }
}

/* "ranks 2, 3 never joined; rank 1 left early (only 1 of 4 ranks joined within ...)" */
static void root_join_timeout_msg(const coll_boot_root_t *r, char *msg, size_t len)
{
    size_t o;
    if (r->nranks < 0) {
        snprintf(msg, len, "no rank joined within COLL_BOOTSTRAP_TIMEOUT");
        return;
    }
    msg[0] = '\0';
    root_list_ranks(r, ROOT_NEVER, "never joined", msg, len);
    root_list_ranks(r, ROOT_LEFT, "joined but left before the others (gave up or failed)", msg,
                    len);
    o = strlen(msg);
    if (o < len) {
        snprintf(msg + o, len - o, " (%d of %d ranks joined within COLL_BOOTSTRAP_TIMEOUT)",
                 r->joined, r->nranks);
    }
}

static void root_expire(coll_boot_root_t *r)
{
    char   msg[256], addr[80];
    double now = coll_time_s();
    root_shrink_check(r);
    for (int i = r->nconns - 1; i >= 0; i--) {
        root_conn_t *c = r->conns[i];
        if (c->rank < 0 && now - c->opened > ROOT_HELLO_TIMEOUT) {
            coll_warn(BOOTSTRAP, "root: connection from %s sent no %s in %.0f s: closed",
                      coll_sock_str(&c->from, addr, sizeof(addr)),
                      c->authed ? "hello" : "authentication", ROOT_HELLO_TIMEOUT);
            root_drop(r, i);
        }
    }
    if (!r->welcomed && now > r->join_deadline) {
        if (!r->failed) {
            int e = __atomic_load_n(&r->accept_errno, __ATOMIC_ACQUIRE);
            if (e != 0) { /* the ranks still waiting were never accepted: say why */
                int o = snprintf(msg, sizeof(msg), "cannot accept connections: %s; ", strerror(e));
                root_join_timeout_msg(r, msg + o, sizeof(msg) - (size_t)o);
            } else {
                root_join_timeout_msg(r, msg, sizeof(msg));
            }
            root_fail(r, msg, -1);
        }
        r->done = 1;
    }
}

static void *root_main(void *arg)
{
    coll_boot_root_t *r   = arg;
    struct pollfd    *pfd = NULL;
    while (!r->done) {
        pfd = coll_realloc(pfd, sizeof(*pfd) * (size_t)(r->nconns + 2), "bootstrap poll set");
        if (pfd == NULL) {
            break;
        }
        int paused = r->accept_resume > coll_time_s();
        pfd[0]     = (struct pollfd){.fd = paused ? -1 : r->listen_fd, .events = POLLIN};
        pfd[1]     = (struct pollfd){.fd = r->wake[0], .events = POLLIN};
        int n      = r->nconns;
        for (int i = 0; i < n; i++) {
            pfd[i + 2] = (struct pollfd){.fd = r->conns[i]->fd, .events = POLLIN};
        }
        if (poll(pfd, (nfds_t)n + 2, paused ? (int)(ROOT_ACCEPT_BACKOFF * 1000) : 200) < 0 &&
            errno != EINTR) {
            break;
        }
        if (pfd[1].revents != 0) { /* asked to stop before everyone finished */
            const char msg[] = "the bootstrap root's process left before every rank finished "
                               "(it destroyed the communicator or gave up waiting)";
            root_broadcast(r, COLL_BOOT_ERROR, -1, 0, msg, sizeof(msg), -1);
            break;
        }
        for (int i = n - 1; i >= 0; i--) {
            if (pfd[i + 2].revents != 0 && root_read(r, r->conns[i]) < 0) {
                root_drop(r, i);
            }
        }
        if (pfd[0].revents != 0) {
            root_accept(r);
        }
        root_expire(r);
    }
    coll_free(pfd);
    while (r->nconns > 0) {
        root_drop(r, r->nconns - 1);
    }
    return NULL;
}

void coll_boot_uid_make(const coll_sockaddr_t *addr, const uint8_t secret[16], uint64_t nonce,
                        coll_unique_id_t *id_p)
{
    coll_uid_t u;
    memset(id_p, 0, sizeof(*id_p));
    memset(&u, 0, sizeof(u));
    u.magic   = COLL_UID_MAGIC;
    u.version = COLL_BOOT_VERSION;
    memcpy(u.secret, secret, 16);
    u.nonce = nonce;
    coll_boot_addr_pack(addr, &u.where);
    memcpy(id_p->internal, &u, sizeof(u));
}

coll_result_t coll_boot_uid_parse(const coll_unique_id_t *id, coll_sockaddr_t *addr_p,
                                  uint8_t secret[16], uint64_t *nonce_p)
{
    coll_uid_t u;
    memcpy(&u, id->internal, sizeof(u));
    if (u.magic != COLL_UID_MAGIC || u.version != COLL_BOOT_VERSION ||
        coll_boot_addr_unpack(&u.where, addr_p) != COLL_OK) {
        return coll_set_last_error(COLL_ERR_INVALID_ARG,
                                   "unique id is not valid (not made by coll_get_unique_id, or "
                                   "from another libcoll version)");
    }
    memcpy(secret, u.secret, 16);
    *nonce_p = u.nonce;
    return COLL_OK;
}

coll_result_t coll_boot_root_start(const coll_sockaddr_t *bind_addr,
                                   const coll_sockaddr_t *advertise_addr, const uint8_t secret[16],
                                   uint64_t nonce, coll_unique_id_t *id_p)
{
    coll_boot_root_t *r    = coll_calloc(1, sizeof(*r), "bootstrap root");
    coll_sockaddr_t   addr = *bind_addr, adv = *advertise_addr;
    coll_result_t     st;
    pthread_once(&root_atfork_once, root_atfork_register);
    if (r == NULL) {
        return COLL_ERR_NO_MEMORY;
    }
    r->nranks    = -1;
    r->job_tag   = coll_boot_job_tag(secret);
    r->nonce     = nonce;
    r->bind_addr = addr;
    r->adv_addr  = adv;
    coll_sock_set_port(&r->bind_addr, 0);
    coll_sock_set_port(&r->adv_addr, 0);
    coll_auth_derive(secret, "bootstrap", nonce, &r->key);
    r->join_deadline = coll_time_s() + coll_param_time(COLL_P_BOOTSTRAP_TIMEOUT);
    COLL_CHECK_GOTO(coll_sock_listen(&addr, 1024, &r->listen_fd), st, err_free);
    if (pipe2(r->wake, O_CLOEXEC) != 0) {
        st = COLL_ERR_SYSTEM;
        goto err_close;
    }
    coll_sock_set_port(&adv, coll_sock_port(&addr));
    if (pthread_create(&r->thread, NULL, root_main, r) != 0) {
        coll_error(BOOTSTRAP, "cannot start the bootstrap root thread: %s", strerror(errno));
        st = COLL_ERR_SYSTEM;
        goto err_pipe;
    }
    pthread_mutex_lock(&root_list_lock);
    r->next   = root_list;
    root_list = r;
    pthread_mutex_unlock(&root_list_lock);
    coll_boot_uid_make(&adv, secret, nonce, id_p);
    return COLL_OK;

err_pipe:
    close(r->wake[0]);
    close(r->wake[1]);
err_close:
    close(r->listen_fd);
err_free:
    coll_free(r);
    return st;
}

int coll_boot_root_accept_errno(uint64_t nonce)
{
    int e = 0;
    pthread_mutex_lock(&root_list_lock);
    for (coll_boot_root_t *r = root_list; r != NULL; r = r->next) {
        if (r->nonce == nonce) {
            e = __atomic_load_n(&r->accept_errno, __ATOMIC_ACQUIRE);
            break;
        }
    }
    pthread_mutex_unlock(&root_list_lock);
    return e;
}

void coll_boot_root_join(uint64_t nonce)
{
    coll_boot_root_t **pp, *r = NULL;
    pthread_mutex_lock(&root_list_lock);
    for (pp = &root_list; *pp != NULL; pp = &(*pp)->next) {
        if ((*pp)->nonce == nonce) {
            r   = *pp;
            *pp = r->next;
            break;
        }
    }
    pthread_mutex_unlock(&root_list_lock);
    if (r == NULL) {
        return;
    }
    if (write(r->wake[1], "x", 1) < 0) {
        coll_debug(BOOTSTRAP, "root wake failed: %s", strerror(errno));
    }
    pthread_join(r->thread, NULL);
    close(r->wake[0]);
    close(r->wake[1]);
    close(r->listen_fd);
    coll_free(r->by_rank);
    coll_free(r->seen);
    coll_free(r->shrunk);
    coll_free(r->gather_buf);
    coll_free(r->conns);
    coll_free(r);
}
