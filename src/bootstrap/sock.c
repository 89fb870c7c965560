/* SPDX-License-Identifier: MIT */
/*
 * Socket helpers: parse/print addresses, pick an interface, listen, connect with retries and
 * move whole buffers with deadlines. Every failure is logged once with strerror and the peer.
 */
#include "sock.h"
#include "log.h"
#include "param.h"
#include "util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

coll_result_t coll_sock_parse(const char *text, coll_sockaddr_t *addr_p)
{
    char        host[256];
    const char *colon = strrchr(text, ':');
    if (colon == NULL || colon == text || colon[1] == '\0') {
        coll_error(BOOTSTRAP, "address '%s' is not host:port", text);
        return COLL_ERR_INVALID_ARG;
    }
    size_t hlen = (size_t)(colon - text);
    if (text[0] == '[' && hlen >= 2 && text[hlen - 1] == ']') {
        text++;
        hlen -= 2;
    }
    if (hlen >= sizeof(host)) {
        coll_error(BOOTSTRAP, "host name in '%s' is too long", text);
        return COLL_ERR_INVALID_ARG;
    }
    memcpy(host, text, hlen);
    host[hlen] = '\0';
    char *end  = NULL;
    long  port = strtol(colon + 1, &end, 10);
    if (*end != '\0' || port <= 0 || port > 65535) {
        coll_error(BOOTSTRAP, "port in '%s' is not a number in 1..65535", text);
        return COLL_ERR_INVALID_ARG;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int             rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc != 0 || res == NULL) {
        coll_error(BOOTSTRAP, "cannot resolve host '%s': %s", host, gai_strerror(rc));
        return COLL_ERR_INVALID_ARG;
    }
    memset(addr_p, 0, sizeof(*addr_p));
    memcpy(&addr_p->ss, res->ai_addr, res->ai_addrlen);
    addr_p->len = res->ai_addrlen;
    freeaddrinfo(res);
    coll_sock_set_port(addr_p, (int)port);
    return COLL_OK;
}

const char *coll_sock_str(const coll_sockaddr_t *addr, char *buf, size_t len)
{
    char host[INET6_ADDRSTRLEN] = "?";
    if (addr->ss.ss_family == AF_INET) {
        inet_ntop(AF_INET, &((const struct sockaddr_in *)&addr->ss)->sin_addr, host, sizeof(host));
        snprintf(buf, len, "%s:%d", host, coll_sock_port(addr));
    } else if (addr->ss.ss_family == AF_INET6) {
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)&addr->ss)->sin6_addr, host,
                  sizeof(host));
        snprintf(buf, len, "[%s]:%d", host, coll_sock_port(addr));
    } else {
        snprintf(buf, len, "(family %d)", addr->ss.ss_family);
    }
    return buf;
}

int coll_sock_port(const coll_sockaddr_t *addr)
{
    if (addr->ss.ss_family == AF_INET6) {
        return ntohs(((const struct sockaddr_in6 *)&addr->ss)->sin6_port);
    }
    return ntohs(((const struct sockaddr_in *)&addr->ss)->sin_port);
}

void coll_sock_set_port(coll_sockaddr_t *addr, int port)
{
    if (addr->ss.ss_family == AF_INET6) {
        ((struct sockaddr_in6 *)&addr->ss)->sin6_port = htons((uint16_t)port);
    } else {
        ((struct sockaddr_in *)&addr->ss)->sin_port = htons((uint16_t)port);
    }
}

void coll_sock_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL, 0);
    if (fl >= 0) {
        fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

coll_result_t coll_sock_listen(coll_sockaddr_t *addr, int backlog, int *fd_p)
{
    char buf[80];
    int  fd = socket(addr->ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        coll_error(BOOTSTRAP, "socket failed: %s", strerror(errno));
        return COLL_ERR_SYSTEM;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)&addr->ss, addr->len) != 0 || listen(fd, backlog) != 0) {
        int err = errno;
        coll_error(BOOTSTRAP, "cannot listen on %s: %s", coll_sock_str(addr, buf, sizeof(buf)),
                   strerror(err));
        close(fd);
        return err == EADDRINUSE ? COLL_ERR_INVALID_USAGE : COLL_ERR_SYSTEM;
    }
    addr->len = sizeof(addr->ss);
    getsockname(fd, (struct sockaddr *)&addr->ss, &addr->len);
    coll_sock_nonblock(fd);
    *fd_p = fd;
    return COLL_OK;
}

/* Waits for a non-blocking connect on fd to finish: 0 or its errno, or -1 at the deadline. */
static int sock_connect_wait(int fd, double deadline)
{
    for (;;) {
        double left = deadline - coll_time_s();
        if (left <= 0) {
            return -1;
        }
        struct pollfd p  = {.fd = fd, .events = POLLOUT};
        int           ms = left > 1.0 ? 1000 : (int)(left * 1000) + 1;
        int           rc = poll(&p, 1, ms);
        if (rc < 0 && errno != EINTR) {
            return errno;
        }
        if (rc > 0) {
            int       err = 0;
            socklen_t len = sizeof(err);
            if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
                err = errno;
            }
            return err;
        }
    }
}

coll_result_t coll_sock_connect_once(const coll_sockaddr_t *addr, double deadline, int *fd_p,
                                     int *err_p)
{
    int fd = socket(addr->ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int err;
    if (fd < 0) {
        coll_error(BOOTSTRAP, "socket failed: %s", strerror(errno));
        return COLL_ERR_SYSTEM;
    }
    /* A blocking connect() to an address that drops SYNs (a full accept queue, a firewall, a
     * dead host) would sit in the kernel's SYN retries for minutes, past any deadline. */
    err = connect(fd, (const struct sockaddr *)&addr->ss, addr->len) == 0 ? 0 : errno;
    if (err == EINPROGRESS || err == EINTR) { /* EINTR: the connection still goes on */
        err = sock_connect_wait(fd, deadline);
    }
    if (err != 0) {
        close(fd);
        if (err_p != NULL) {
            *err_p = err < 0 ? ETIMEDOUT : err;
        }
        return err < 0 ? COLL_ERR_TIMEOUT : COLL_ERR_REMOTE;
    }
    coll_sock_nonblock(fd);
    *fd_p = fd;
    return COLL_OK;
}

coll_result_t coll_sock_connect(const coll_sockaddr_t *addr, double deadline, int *fd_p)
{
    char   buf[80];
    double backoff = 0.001;
    for (;;) {
        int           err = 0;
        coll_result_t st  = coll_sock_connect_once(addr, deadline, fd_p, &err);
        if (st == COLL_OK || st == COLL_ERR_SYSTEM) {
            return st;
        }
        if (st == COLL_ERR_TIMEOUT) {
            coll_error(BOOTSTRAP, "cannot connect to %s before the deadline: no answer",
                       coll_sock_str(addr, buf, sizeof(buf)));
            return COLL_ERR_TIMEOUT;
        }
        /* refused: the root may not listen yet (ranks start in any order), so retry */
        if (err != ECONNREFUSED && err != ETIMEDOUT && err != ENETUNREACH && err != EAGAIN &&
            err != ECONNRESET) {
            coll_error(BOOTSTRAP, "cannot connect to %s: %s", coll_sock_str(addr, buf, sizeof(buf)),
                       strerror(err));
            return COLL_ERR_SYSTEM;
        }
        if (coll_time_s() + backoff > deadline) {
            coll_error(BOOTSTRAP, "cannot connect to %s before the deadline: %s",
                       coll_sock_str(addr, buf, sizeof(buf)), strerror(err));
            return COLL_ERR_TIMEOUT;
        }
        usleep((useconds_t)(backoff * 1e6));
        backoff = backoff < 0.1 ? backoff * 2 : 0.1;
    }
}

static coll_result_t sock_wait(int fd, short events, double deadline)
{
    double left = deadline - coll_time_s();
    if (left <= 0) {
        return COLL_ERR_TIMEOUT;
    }
    struct pollfd p  = {.fd = fd, .events = events};
    int           ms = left > 1.0 ? 1000 : (int)(left * 1000) + 1;
    if (poll(&p, 1, ms) < 0 && errno != EINTR) {
        return COLL_ERR_SYSTEM;
    }
    return COLL_OK;
}

coll_result_t coll_sock_send_all(int fd, const void *buf, size_t len, double deadline)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            coll_result_t st = sock_wait(fd, POLLOUT, deadline);
            if (st != COLL_OK) {
                return st;
            }
            continue;
        }
        return (n < 0 && (errno == EPIPE || errno == ECONNRESET)) ? COLL_ERR_REMOTE
                                                                  : COLL_ERR_SYSTEM;
    }
    return COLL_OK;
}

coll_result_t coll_sock_recv_all(int fd, void *buf, size_t len, double deadline)
{
    char *p = buf;
    while (len > 0) {
        ssize_t n = recv(fd, p, len, 0);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n == 0) {
            return COLL_ERR_REMOTE;
        }
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
            coll_result_t st = sock_wait(fd, POLLIN, deadline);
            if (st != COLL_OK) {
                return st;
            }
            continue;
        }
        return errno == ECONNRESET ? COLL_ERR_REMOTE : COLL_ERR_SYSTEM;
    }
    return COLL_OK;
}
