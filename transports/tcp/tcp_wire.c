/* SPDX-License-Identifier: MIT */
/*
 * TCP wire formats: the hello a connector sends (pack, unpack and the checks that need no
 * connection state) and the listen handle published through the bootstrap. Little endian.
 */
#include "tcp.h"
#include <arpa/inet.h>
#include <stdio.h>
#include "log.h"

void coll_tcp_hello_pack(const coll_tcp_hello_t *h, uint8_t *buf)
{
    coll_tcp_put32(buf + 0, h->magic);
    coll_tcp_put16(buf + 4, h->version);
    coll_tcp_put16(buf + 6, h->sock_index);
    coll_tcp_put64(buf + 8, h->job_tag);
    coll_tcp_put32(buf + 16, h->from_rank);
    coll_tcp_put32(buf + 20, h->to_rank);
    coll_tcp_put64(buf + 24, h->comm_id);
    coll_tcp_put16(buf + 32, h->nsocks);
    coll_tcp_put16(buf + 34, h->reserved);
    coll_tcp_put32(buf + 36, h->frag_size);
}

void coll_tcp_hello_unpack(const uint8_t *buf, coll_tcp_hello_t *h)
{
    h->magic      = coll_tcp_get32(buf + 0);
    h->version    = coll_tcp_get16(buf + 4);
    h->sock_index = coll_tcp_get16(buf + 6);
    h->job_tag    = coll_tcp_get64(buf + 8);
    h->from_rank  = coll_tcp_get32(buf + 16);
    h->to_rank    = coll_tcp_get32(buf + 20);
    h->comm_id    = coll_tcp_get64(buf + 24);
    h->nsocks     = coll_tcp_get16(buf + 32);
    h->reserved   = coll_tcp_get16(buf + 34);
    h->frag_size  = coll_tcp_get32(buf + 36);
}

void coll_tcp_handle_pack(const coll_tcp_addr_t *a, uint8_t *buf)
{
    memset(buf, 0, sizeof(coll_tcp_handle_t));
    coll_tcp_put32(buf + 0, COLL_TCP_HANDLE_MAGIC);
    coll_tcp_put16(buf + 4, (uint16_t)a->sa.ss_family);
    if (a->sa.ss_family == AF_INET) {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)(const void *)&a->sa;
        coll_tcp_put16(buf + 6, ntohs(s4->sin_port));
        memcpy(buf + 12, &s4->sin_addr, 4);
    } else {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)(const void *)&a->sa;
        coll_tcp_put16(buf + 6, ntohs(s6->sin6_port));
        coll_tcp_put32(buf + 8, s6->sin6_scope_id);
        memcpy(buf + 12, &s6->sin6_addr, 16);
    }
}

coll_result_t coll_tcp_handle_unpack(const uint8_t *buf, int rank, struct sockaddr_storage *ss,
                                     socklen_t *len_p)
{
    uint16_t family = coll_tcp_get16(buf + 4);

    memset(ss, 0, sizeof(*ss));
    if (coll_tcp_get32(buf) != COLL_TCP_HANDLE_MAGIC || (family != AF_INET && family != AF_INET6)) {
        coll_error(TCP, "listen handle of rank %d is not a tcp handle", rank);
        return COLL_ERR_INVALID_ARG;
    }
    if (family == AF_INET) {
        struct sockaddr_in *s4 = (struct sockaddr_in *)(void *)ss;
        s4->sin_family         = AF_INET;
        s4->sin_port           = htons(coll_tcp_get16(buf + 6));
        memcpy(&s4->sin_addr, buf + 12, 4);
        *len_p = sizeof(*s4);
    } else {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)(void *)ss;
        s6->sin6_family         = AF_INET6;
        s6->sin6_port           = htons(coll_tcp_get16(buf + 6));
        s6->sin6_scope_id       = coll_tcp_get32(buf + 8);
        memcpy(&s6->sin6_addr, buf + 12, 16);
        *len_p = sizeof(*s6);
    }
    return COLL_OK;
}

const char *coll_tcp_hello_check(const coll_tcp_ctx_t *ctx, const coll_tcp_hello_t *h, char *why,
                                 size_t size)
{
    if (h->magic != COLL_TCP_HELLO_MAGIC) {
        snprintf(why, size, "bad magic 0x%08x", h->magic);
    } else if (h->version != COLL_TCP_VERSION) {
        snprintf(why, size, "protocol version %u, expected %u", h->version, COLL_TCP_VERSION);
    } else if (h->job_tag != ctx->job_tag) {
        snprintf(why, size, "job tag differs (another job?)");
    } else if (h->comm_id != ctx->comm_id) {
        snprintf(why, size, "communicator id 0x%016llx differs", (unsigned long long)h->comm_id);
    } else if (h->to_rank != (uint32_t)ctx->rank) {
        snprintf(why, size, "addressed to rank %u", h->to_rank);
    } else if (h->from_rank >= (uint32_t)ctx->rank) {
        snprintf(why, size, "from rank %u, but only lower ranks connect", h->from_rank);
    } else if (h->nsocks == ctx->nsocks && h->sock_index >= h->nsocks) {
        snprintf(why, size, "socket index %u out of range", h->sock_index);
    } else {
        return NULL;
    }
    return why;
}
