/* SPDX-License-Identifier: MIT */
/*
 * The TCP transport's view of the interface choice (made by bootstrap/ifaddr.c, shared with
 * the bootstrap root) and the formatting of socket addresses for log lines. Opens no sockets.
 */
#include "tcp.h"
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include "compiler.h"
#include "log.h"
#include "param.h"
#include "util.h"
#include "error.h"
#include "bootstrap/sock.h"

coll_result_t coll_tcp_pick_addr(int all_local, const char *netif, coll_tcp_addr_t *addr_p,
                                 const char **why_p)
{
    const char     *user = coll_param_str(COLL_P_SOCKET_IFNAME);
    coll_sockaddr_t a;

    if (all_local || user[0] != '\0' || netif[0] == '\0' ||
        coll_sock_if_addr4(netif, &a, addr_p->ifname) != COLL_OK) {
        COLL_CHECK(coll_sock_pick_addr(all_local, &a, addr_p->ifname, why_p));
    } else if (why_p != NULL) {
        *why_p = "the NIC nearest the rank";
    }
    memset(&addr_p->sa, 0, sizeof(addr_p->sa));
    memcpy(&addr_p->sa, &a.ss, a.len);
    addr_p->salen = a.len;
    return COLL_OK;
}

const char *coll_tcp_sa_str(const struct sockaddr *sa, char *buf, size_t size)
{
    char host[INET6_ADDRSTRLEN] = "?";
    char scope[IF_NAMESIZE + 1] = "";

    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)(const void *)sa;
        inet_ntop(AF_INET, &s4->sin_addr, host, sizeof(host));
        snprintf(buf, size, "%s:%u", host, (unsigned)ntohs(s4->sin_port));
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)(const void *)sa;
        char                       ifn[IF_NAMESIZE];
        inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof(host));
        if (s6->sin6_scope_id != 0 && if_indextoname(s6->sin6_scope_id, ifn) != NULL) {
            snprintf(scope, sizeof(scope), "%%%s", ifn);
        }
        snprintf(buf, size, "[%s%s]:%u", host, scope, (unsigned)ntohs(s6->sin6_port));
    } else {
        snprintf(buf, size, "(family %d)", (int)sa->sa_family);
    }
    return buf;
}
