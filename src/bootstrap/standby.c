/* SPDX-License-Identifier: MIT */
/*
 * Standby roots (see standby.h): the election of a new root among the survivors when the
 * bootstrap root's process died, and the shrink it then runs.
 */
#include "standby.h"
#include "bootstrap.h"
#include "error.h"
#include "log.h"
#include "param.h"
#include "util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#define SB_CONNECT_TIMEOUT 5.0 /* a candidate that cannot be reached in this is taken for dead */
#define SB_ADMIT_TIMEOUT   2.0 /* an accepted connection must authenticate and ask in this */
#define SB_PROBE_TIMEOUT   0.5

enum { SB_UNKNOWN, SB_ALIVE, SB_DEAD, SB_JOINED };

static int sb_is_loopback(const coll_sockaddr_t *a)
{
    if (a->ss.ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)&a->ss;
        return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    }
    if (a->ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&a->ss;
        return IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
    }
    return 0;
}

coll_result_t coll_standby_open(coll_standby_t *sb, int root_fd, int rank, int nranks,
                                const uint8_t secret[16], uint64_t nonce, uint64_t job_tag,
                                coll_boot_addr_t *mine)
{
    memset(sb, 0, sizeof(*sb));
    sb->listen_fd = -1;
    sb->rank      = rank;
    sb->nranks    = nranks;
    sb->job_tag   = job_tag;
    sb->local.len = sizeof(sb->local.ss);
    if (getsockname(root_fd, (struct sockaddr *)&sb->local.ss, &sb->local.len) != 0) {
        coll_error(BOOTSTRAP, "rank %d: getsockname on the bootstrap connection: %s", rank,
                   strerror(errno));
        return COLL_ERR_SYSTEM;
    }
    /* Reached over loopback (a root name that resolves to 127.0.1.1 on the root's host, as
     * Debian's /etc/hosts has it), this address would send ranks of other hosts to their own
     * loopback, where a refusal reads as death: listen where the transports would instead. */
    coll_sockaddr_t pick;
    if (sb_is_loopback(&sb->local) && coll_sock_pick_addr(0, &pick, NULL, NULL) == COLL_OK) {
        sb->local = pick;
    }
    coll_sock_set_port(&sb->local, 0);
    /* backlog: every other rank may knock at once during an election */
    int backlog = nranks < 4096 ? nranks + 8 : 4096;
    COLL_CHECK(coll_sock_listen(&sb->local, backlog, &sb->listen_fd));
    coll_auth_derive(secret, "standby", nonce, &sb->key);
    coll_boot_addr_pack(&sb->local, mine);
    return COLL_OK;
}

coll_result_t coll_standby_set_table(coll_standby_t *sb, const coll_boot_addr_t *all)
{
    coll_sockaddr_t a;
    sb->table = coll_malloc(sizeof(*all) * (size_t)sb->nranks, "standby addresses");
    if (sb->table == NULL) {
        return COLL_ERR_NO_MEMORY;
    }
    memcpy(sb->table, all, sizeof(*all) * (size_t)sb->nranks);
    for (int r = 0; r < sb->nranks; r++) {
        if (sb->table[r].family != 0 && coll_boot_addr_unpack(&sb->table[r], &a) != COLL_OK) {
            coll_warn(BOOTSTRAP, "rank %d: rank %d's standby address has family %u: ignored",
                      sb->rank, r, sb->table[r].family);
            sb->table[r].family = 0;
        }
    }
    return COLL_OK;
}

void coll_standby_close(coll_standby_t *sb)
{
    if (sb->late_running) {
        if (write(sb->late_stop[1], "x", 1) < 0) {
            coll_debug(BOOTSTRAP, "standby: wake failed: %s", strerror(errno));
        }
        pthread_join(sb->late, NULL);
        close(sb->late_stop[0]);
        close(sb->late_stop[1]);
        sb->late_running = 0;
    }
    coll_free(sb->answer);
    sb->answer = NULL;
    if (sb->listen_fd >= 0) {
        close(sb->listen_fd);
    }
    sb->listen_fd = -1;
    coll_free(sb->table);
    sb->table = NULL;
    memset(&sb->key, 0, sizeof(sb->key));
}

coll_result_t coll_boot_read_shrunk(int fd, uint64_t job_tag, int rank, int nranks, double deadline,
                                    int32_t *survivors, int *nsurvivors_p, coll_unique_id_t *id_p)
{
    coll_boot_hdr_t h;
    char            why[200];
    uint32_t        max = (uint32_t)(sizeof(coll_boot_shrunk_t) + sizeof(int32_t) * (size_t)nranks);
    for (;;) {
        COLL_CHECK(coll_sock_recv_all(fd, &h, sizeof(h), deadline));
        if (coll_boot_hdr_check(&h, job_tag, COLL_BOOT_MAX_PAYLOAD, why, sizeof(why)) != COLL_OK) {
            return coll_set_last_error(
                COLL_ERR_TRANSPORT, "rank %d: bad message from the bootstrap root: %s", rank, why);
        }
        if (h.type == COLL_BOOT_SHRUNK) {
            break;
        }
        char skip[512]; /* notices of the failure that led here */
        for (uint32_t left = h.len; left > 0;) {
            uint32_t n = left < sizeof(skip) ? left : (uint32_t)sizeof(skip);
            COLL_CHECK(coll_sock_recv_all(fd, skip, n, deadline));
            left -= n;
        }
    }
    if (h.len > max) {
        return coll_set_last_error(COLL_ERR_TRANSPORT,
                                   "rank %d: shrink answer of %u bytes, at most %u expected", rank,
                                   h.len, max);
    }
    char *buf = coll_malloc(h.len > 0 ? h.len : 1, "shrink answer");
    if (buf == NULL) {
        return COLL_ERR_NO_MEMORY;
    }
    coll_result_t st = coll_sock_recv_all(fd, buf, h.len, deadline);
    if (st == COLL_OK && coll_boot_shrunk_parse(buf, h.len, nranks, survivors, nsurvivors_p, id_p,
                                                why, sizeof(why)) != COLL_OK) {
        st = coll_set_last_error(COLL_ERR_TRANSPORT, "rank %d: %s", rank, why);
    }
    coll_free(buf);
    return st;
}

/* Ask candidate c. COLL_ERR_REMOTE: c is dead (refused, or closed on us): try the next one. */
static coll_result_t sb_ask(coll_standby_t *sb, int c, double deadline, int32_t *survivors, int *n,
                            coll_unique_id_t *id)
{
    coll_sockaddr_t a;
    coll_boot_hdr_t h;
    char            abuf[80];
    int             fd;
    double          cdl = coll_time_s() + SB_CONNECT_TIMEOUT;
    coll_boot_addr_unpack(&sb->table[c], &a);
    coll_result_t st = coll_sock_connect_once(&a, cdl < deadline ? cdl : deadline, &fd, NULL);
    if (st != COLL_OK) {
        coll_debug(BOOTSTRAP, "rank %d: standby of rank %d at %s does not answer: dead", sb->rank,
                   c, coll_sock_str(&a, abuf, sizeof(abuf)));
        return COLL_ERR_REMOTE;
    }
    /* the candidate answers once it is in its own shrink: wait for it until the deadline */
    st = coll_boot_auth_connect(fd, &sb->key, deadline);
    if (st == COLL_ERR_TRANSPORT) {
        coll_warn(BOOTSTRAP, "rank %d: the standby of rank %d at %s failed authentication",
                  sb->rank, c, coll_sock_str(&a, abuf, sizeof(abuf)));
    } else if (st == COLL_ERR_INVALID_ARG) { /* no challenge: not a standby of this job */
        st = COLL_ERR_TRANSPORT;
    }
    if (st == COLL_OK) {
        coll_boot_hdr_fill(&h, COLL_BOOT_SHRINK, sb->job_tag, sb->rank, 0, 0);
        st = coll_sock_send_all(fd, &h, sizeof(h), deadline);
    }
    if (st == COLL_OK) {
        st = coll_boot_read_shrunk(fd, sb->job_tag, sb->rank, sb->nranks, deadline, survivors, n,
                                   id);
    }
    close(fd);
    if (st == COLL_OK) {
        coll_info(BOOTSTRAP, "rank %d: rank %d ran the shrink in place of the lost root", sb->rank,
                  c);
    }
    return st;
}

/* An accepted connection: authenticate it, read its SHRINK; its rank, or -1 (closed). */
static int sb_admit(coll_standby_t *sb, int fd, const unsigned char *state)
{
    coll_auth_state_t as;
    uint8_t           challenge[COLL_AUTH_CHALLENGE_LEN], response[COLL_AUTH_RESPONSE_LEN];
    uint8_t           proof[COLL_AUTH_PROOF_LEN];
    coll_boot_hdr_t   h;
    char              why[200];
    double            deadline = coll_time_s() + SB_ADMIT_TIMEOUT;
    coll_sock_nonblock(fd);
    if (coll_auth_challenge(&as, challenge) != COLL_OK ||
        coll_sock_send_all(fd, challenge, sizeof(challenge), deadline) != COLL_OK ||
        coll_sock_recv_all(fd, response, sizeof(response), deadline) != COLL_OK) {
        coll_debug(BOOTSTRAP, "rank %d: standby: a connection left before authenticating",
                   sb->rank);
        return -1;
    }
    if (coll_auth_check_response(&sb->key, &as, response, NULL, 0, proof) != COLL_OK) {
        coll_warn(BOOTSTRAP, "rank %d: standby: rejected a connection: authentication failed",
                  sb->rank);
        return -1;
    }
    if (coll_sock_send_all(fd, proof, sizeof(proof), deadline) != COLL_OK ||
        coll_sock_recv_all(fd, &h, sizeof(h), deadline) != COLL_OK) {
        return -1;
    }
    if (coll_boot_hdr_check(&h, sb->job_tag, 0, why, sizeof(why)) != COLL_OK ||
        h.type != COLL_BOOT_SHRINK || h.rank < 0 || h.rank >= sb->nranks || h.rank == sb->rank ||
        (state != NULL && state[h.rank] == SB_JOINED)) {
        coll_warn(BOOTSTRAP, "rank %d: standby: rejected a request (%s, rank %d)", sb->rank,
                  why[0] != '\0' ? why : coll_boot_type_name(h.type), h.rank);
        return -1;
    }
    return h.rank;
}

static void sb_send_answer(coll_standby_t *sb, int fd, int r, const void *buf, uint32_t len)
{
    coll_boot_hdr_t h;
    double          dl = coll_time_s() + SB_ADMIT_TIMEOUT;
    coll_boot_hdr_fill(&h, COLL_BOOT_SHRUNK, sb->job_tag, -1, 0, len);
    if (coll_sock_send_all(fd, &h, sizeof(h), dl) != COLL_OK ||
        coll_sock_send_all(fd, buf, len, dl) != COLL_OK) {
        coll_warn(BOOTSTRAP, "rank %d: could not send the shrink answer to rank %d", sb->rank, r);
    }
}

/* Late askers get the decided answer (without them) until the communicator is destroyed. */
static void *sb_late_main(void *arg)
{
    coll_standby_t *sb = arg;
    for (;;) {
        struct pollfd p[2] = {{.fd = sb->listen_fd, .events = POLLIN},
                              {.fd = sb->late_stop[0], .events = POLLIN}};
        if (poll(p, 2, -1) < 0 && errno != EINTR) {
            break;
        }
        if (p[1].revents != 0) {
            break;
        }
        if (p[0].revents == 0) {
            continue;
        }
        int fd = accept4(sb->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            continue;
        }
        int r = sb_admit(sb, fd, NULL);
        if (r >= 0) {
            coll_warn(BOOTSTRAP,
                      "rank %d: rank %d asked to shrink after it was decided: told it "
                      "was left out",
                      sb->rank, r);
            sb_send_answer(sb, fd, r, sb->answer, sb->answer_len);
        }
        close(fd);
    }
    return NULL;
}

/* The lowest live rank: wait for the others (until each has asked or is found dead, or
 * COLL_TIMEOUT), start their communicator's root and answer them. */
static coll_result_t sb_serve(coll_standby_t *sb, double deadline, int32_t *survivors, int *n,
                              coll_unique_id_t *id)
{
    int            nr    = sb->nranks;
    int           *fds   = coll_malloc(sizeof(int) * (size_t)nr, "standby connections");
    unsigned char *state = coll_calloc((size_t)nr, 1, "standby states");
    coll_result_t  st    = COLL_OK;
    if (fds == NULL || state == NULL) {
        coll_free(fds);
        coll_free(state);
        return COLL_ERR_NO_MEMORY;
    }
    for (int r = 0; r < nr; r++) {
        fds[r]   = -1;
        state[r] = r < sb->rank ? SB_DEAD : r == sb->rank ? SB_JOINED : SB_UNKNOWN;
    }
    coll_warn(BOOTSTRAP,
              "rank %d: the bootstrap root is gone; ranks below %d do not answer: this rank runs "
              "the shrink",
              sb->rank, sb->rank);
    double decide = coll_time_s() + coll_param_time(COLL_P_TIMEOUT);
    decide        = decide < deadline ? decide : deadline;
    for (;;) {
        int pending = 0;
        for (int r = sb->rank + 1; r < nr; r++) {
            if (state[r] == SB_UNKNOWN) { /* a dead process's port refuses: no need to wait */
                coll_sockaddr_t a;
                int             pfd;
                if (coll_boot_addr_unpack(&sb->table[r], &a) != COLL_OK) {
                    state[r] = SB_ALIVE; /* cannot tell: wait for it */
                    continue;
                }
                coll_result_t ps =
                    coll_sock_connect_once(&a, coll_time_s() + SB_PROBE_TIMEOUT, &pfd, NULL);
                if (ps == COLL_OK) {
                    close(pfd);
                }
                state[r] = ps == COLL_ERR_REMOTE ? SB_DEAD : SB_ALIVE;
            }
            pending += state[r] == SB_ALIVE;
        }
        if (pending == 0 || coll_time_s() >= decide) {
            break;
        }
        struct pollfd p = {.fd = sb->listen_fd, .events = POLLIN};
        if (poll(&p, 1, 100) <= 0) {
            continue;
        }
        int fd = accept4(sb->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            continue;
        }
        int r = sb_admit(sb, fd, state);
        if (r < 0) {
            close(fd);
            continue;
        }
        fds[r]   = fd;
        state[r] = SB_JOINED;
    }

    /* the answer, as the root would give it */
    size_t len = sizeof(coll_boot_shrunk_t) + sizeof(int32_t) * (size_t)nr;
    char  *buf = coll_calloc(1, len, "shrink answer");
    if (buf == NULL) {
        st = COLL_ERR_NO_MEMORY;
        goto out;
    }
    coll_boot_shrunk_t *head = (coll_boot_shrunk_t *)buf;
    int32_t            *list = (int32_t *)(buf + sizeof(*head));
    int                 left = 0;
    for (int r = 0; r < nr; r++) {
        if (state[r] == SB_JOINED) {
            list[head->nsurvivors++] = r;
        }
        left += state[r] == SB_ALIVE;
    }
    uint8_t         secret[16];
    uint64_t        nonce;
    coll_sockaddr_t bind = sb->local;
    coll_sock_set_port(&bind, 0);
    if (coll_random_bytes(secret, sizeof(secret)) != COLL_OK ||
        coll_random_bytes(&nonce, sizeof(nonce)) != COLL_OK ||
        coll_boot_root_start(&bind, &bind, secret, nonce, &head->id) != COLL_OK) {
        head->nsurvivors = 0; /* they learn that it failed */
    }
    memset(secret, 0, sizeof(secret));
    coll_warn(BOOTSTRAP,
              "rank %d: shrink decided without the root: %d of %d ranks continue (%d "
              "alive did not ask in time)",
              sb->rank, head->nsurvivors, nr, left);
    uint32_t plen = (uint32_t)(sizeof(*head) + sizeof(int32_t) * (size_t)head->nsurvivors);
    for (int r = 0; r < nr; r++) {
        if (fds[r] >= 0) {
            sb_send_answer(sb, fds[r], r, buf, plen);
        }
    }
    sb->answer     = buf;
    sb->answer_len = plen;
    if (pipe2(sb->late_stop, O_CLOEXEC) == 0) {
        if (pthread_create(&sb->late, NULL, sb_late_main, sb) == 0) {
            sb->late_running = 1;
        } else {
            close(sb->late_stop[0]);
            close(sb->late_stop[1]);
        }
    }
    *n  = head->nsurvivors;
    *id = head->id;
    memcpy(survivors, list, sizeof(int32_t) * (size_t)head->nsurvivors);
out:
    for (int r = 0; r < nr; r++) {
        if (fds[r] >= 0) {
            close(fds[r]);
        }
    }
    coll_free(fds);
    coll_free(state);
    return st;
}

coll_result_t coll_standby_shrink(coll_standby_t *sb, double deadline, int32_t *survivors,
                                  int *nsurvivors_p, coll_unique_id_t *id_p)
{
    if (sb->table == NULL) {
        return coll_set_last_error(COLL_ERR_REMOTE,
                                   "rank %d: cannot shrink: the bootstrap root is gone and this "
                                   "communicator has no standby addresses",
                                   sb->rank);
    }
    for (int c = 0; c < sb->nranks; c++) {
        if (c == sb->rank && sb->listen_fd >= 0) {
            return sb_serve(sb, deadline, survivors, nsurvivors_p, id_p);
        }
        if (sb->table[c].family == 0) { /* it could not listen: it cannot serve */
            continue;
        }
        coll_result_t st = sb_ask(sb, c, deadline, survivors, nsurvivors_p, id_p);
        if (st == COLL_OK) {
            return COLL_OK;
        }
        if (st == COLL_ERR_TIMEOUT) {
            return coll_set_last_error(st,
                                       "rank %d: the survivors did not agree before the deadline "
                                       "(rank %d is alive but never ran the shrink)",
                                       sb->rank, c);
        }
        if (st != COLL_ERR_REMOTE) {
            return st;
        }
    }
    return coll_set_last_error(COLL_ERR_REMOTE,
                               "rank %d: cannot shrink: the bootstrap root is gone and no rank "
                               "could run the shrink in its place",
                               sb->rank);
}
