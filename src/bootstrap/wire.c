/* SPDX-License-Identifier: MIT */
/*
 * Bootstrap wire helpers: fill and validate message headers. A header that fails a check is
 * never trusted further: its length is not used to read a payload.
 */
#include "wire.h"
#include "util.h"

#include <stdio.h>
#include <string.h>

uint64_t coll_boot_job_tag(const uint8_t secret[16])
{
    return coll_hash_bytes(secret, 16, 0x6a6f62746167ull);
}

void coll_boot_hdr_fill(coll_boot_hdr_t *h, coll_boot_type_t type, uint64_t job_tag, int rank,
                        uint32_t round, uint32_t len)
{
    memset(h, 0, sizeof(*h));
    h->magic   = COLL_BOOT_MAGIC;
    h->version = COLL_BOOT_VERSION;
    h->type    = (uint16_t)type;
    h->job_tag = job_tag;
    h->rank    = rank;
    h->round   = round;
    h->len     = len;
}

const char *coll_boot_type_name(uint32_t type)
{
    static const char *const names[] = {"?",      "HELLO",  "WELCOME", "GATHER", "ABORT",
                                        "DEATH",  "BYE",    "FIN",     "ERROR",  "REVOKE",
                                        "SHRINK", "SHRUNK", "FAILED"};
    return type < COLL_BOOT_TYPE_MAX ? names[type] : "?";
}

coll_result_t coll_boot_hdr_check(const coll_boot_hdr_t *h, uint64_t job_tag, uint32_t max_len,
                                  char *why, size_t why_len)
{
    if (h->magic != COLL_BOOT_MAGIC) {
        snprintf(why, why_len, "bad magic 0x%08x (not a libcoll bootstrap peer)", h->magic);
        return COLL_ERR_TRANSPORT;
    }
    if (h->version != COLL_BOOT_VERSION) {
        snprintf(why, why_len, "protocol version %u, expected %u (mixed libcoll versions?)",
                 h->version, COLL_BOOT_VERSION);
        return COLL_ERR_TRANSPORT;
    }
    if (h->job_tag != job_tag) {
        snprintf(why, why_len, "job tag mismatch (a peer of another job or unique id)");
        return COLL_ERR_TRANSPORT;
    }
    if (h->type == 0 || h->type >= COLL_BOOT_TYPE_MAX) {
        snprintf(why, why_len, "unknown message type %u", h->type);
        return COLL_ERR_TRANSPORT;
    }
    if (h->len > max_len) {
        snprintf(why, why_len, "%s payload of %u bytes exceeds the limit of %u",
                 coll_boot_type_name(h->type), h->len, max_len);
        return COLL_ERR_TRANSPORT;
    }
    return COLL_OK;
}

coll_result_t coll_boot_hello_parse(const coll_boot_hdr_t *h, const void *payload, uint64_t nonce,
                                    coll_boot_hello_t *hello, char *why, size_t why_len)
{
    if (h->type != COLL_BOOT_HELLO || h->len != sizeof(*hello)) {
        snprintf(why, why_len, "first message is %s of %u bytes, expected HELLO",
                 coll_boot_type_name(h->type), h->len);
        return COLL_ERR_TRANSPORT;
    }
    memcpy(hello, payload, sizeof(*hello));
    if (hello->comm_nonce != nonce) {
        snprintf(why, why_len, "hello for another unique id");
        return COLL_ERR_TRANSPORT;
    }
    if (hello->nranks < 1 || hello->nranks > COLL_BOOT_MAX_RANKS || hello->rank < 0 ||
        hello->rank >= hello->nranks) {
        snprintf(why, why_len, "hello with rank %d of %d", hello->rank, hello->nranks);
        return COLL_ERR_TRANSPORT;
    }
    return COLL_OK;
}

void coll_boot_addr_pack(const coll_sockaddr_t *addr, coll_boot_addr_t *w)
{
    memset(w, 0, sizeof(*w));
    w->family = addr->ss.ss_family;
    if (addr->ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&addr->ss;
        memcpy(w->addr, &in6->sin6_addr, 16);
        w->port = in6->sin6_port;
    } else {
        const struct sockaddr_in *in = (const struct sockaddr_in *)&addr->ss;
        memcpy(w->addr, &in->sin_addr, 4);
        w->port = in->sin_port;
    }
}

coll_result_t coll_boot_addr_unpack(const coll_boot_addr_t *w, coll_sockaddr_t *addr)
{
    memset(addr, 0, sizeof(*addr));
    if (w->family == AF_INET6) {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&addr->ss;
        in6->sin6_family         = AF_INET6;
        memcpy(&in6->sin6_addr, w->addr, 16);
        in6->sin6_port = w->port;
        addr->len      = sizeof(*in6);
        return COLL_OK;
    }
    if (w->family == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *)&addr->ss;
        in->sin_family         = AF_INET;
        memcpy(&in->sin_addr, w->addr, 4);
        in->sin_port = w->port;
        addr->len    = sizeof(*in);
        return COLL_OK;
    }
    return COLL_ERR_INVALID_ARG;
}

coll_result_t coll_boot_shrunk_parse(const void *payload, uint32_t len, int nranks,
                                     int32_t *survivors, int *nsurvivors_p, coll_unique_id_t *id_p,
                                     char *why, size_t why_len)
{
    coll_boot_shrunk_t head;
    if (len < sizeof(head)) {
        snprintf(why, why_len, "shrink answer of %u bytes, expected at least %zu", len,
                 sizeof(head));
        return COLL_ERR_TRANSPORT;
    }
    memcpy(&head, payload, sizeof(head));
    if (head.nsurvivors < 0 || head.nsurvivors > nranks ||
        len != sizeof(head) + sizeof(int32_t) * (size_t)head.nsurvivors) {
        snprintf(why, why_len, "shrink answer names %d survivors in %u bytes (of %d ranks)",
                 head.nsurvivors, len, nranks);
        return COLL_ERR_TRANSPORT;
    }
    memcpy(survivors, (const char *)payload + sizeof(head),
           sizeof(int32_t) * (size_t)head.nsurvivors);
    for (int i = 0; i < head.nsurvivors; i++) {
        if (survivors[i] < 0 || survivors[i] >= nranks ||
            (i > 0 && survivors[i] <= survivors[i - 1])) {
            snprintf(why, why_len, "shrink answer lists rank %d out of order or range",
                     survivors[i]);
            return COLL_ERR_TRANSPORT;
        }
    }
    *nsurvivors_p = head.nsurvivors;
    *id_p         = head.id;
    return COLL_OK;
}
