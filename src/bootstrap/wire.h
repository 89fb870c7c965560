/* SPDX-License-Identifier: MIT */
/*
 * Bootstrap wire format: a fixed 32-byte header (magic, version, type, job tag, sender rank,
 * round, payload length) in front of every message, validated before anything else is read.
 * Also the layout of coll_unique_id_t. Little-endian hosts only (x86-64, aarch64).
 */
#ifndef COLL_BOOTSTRAP_WIRE_H
#define COLL_BOOTSTRAP_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include "coll.h"
#include "sock.h"

#define COLL_BOOT_MAGIC       0x424c4f43u /* "COLB" */
#define COLL_BOOT_VERSION     4 /* 2: authenticated; 3: standby addresses; 4: FAILED notice */
#define COLL_BOOT_MAX_PAYLOAD (1u << 20) /* per message from a rank */
#define COLL_BOOT_MAX_RANKS   (1 << 20)
#define COLL_UID_MAGIC        0x44495543u /* "CUID" */

typedef enum {
    COLL_BOOT_HELLO = 1, /* rank -> root: join (payload: coll_boot_hello_t) */
    COLL_BOOT_WELCOME,   /* root -> rank: everyone joined */
    COLL_BOOT_GATHER,    /* rank -> root: contribution of round; root -> rank: all of them */
    COLL_BOOT_ABORT,     /* rank -> root -> everyone: rank aborted (payload: reason text) */
    COLL_BOOT_DEATH,     /* root -> everyone: rank disconnected without BYE (payload: text) */
    COLL_BOOT_BYE,       /* rank -> root: done (payload: text when it leaves before WELCOME) */
    COLL_BOOT_FIN,       /* root -> rank: everyone said BYE, close */
    COLL_BOOT_ERROR,     /* root -> rank: job failed (payload: text), e.g. join deadline */
    COLL_BOOT_REVOKE,    /* rank -> root -> everyone: the communicator is revoked */
    COLL_BOOT_SHRINK,    /* rank -> root: this rank survives and asks to shrink */
    COLL_BOOT_SHRUNK,    /* root -> survivors: coll_boot_shrunk_t, then int32 old ranks */
    COLL_BOOT_FAILED,    /* rank -> root -> everyone: its communicator failed (payload: text) */
    COLL_BOOT_TYPE_MAX
} coll_boot_type_t;

typedef struct {
    uint32_t magic;
    uint16_t version;
    uint16_t type;
    uint64_t job_tag;
    int32_t  rank;  /* sender's rank; -1 from the root */
    uint32_t round; /* GATHER round number */
    uint32_t len;   /* payload bytes that follow */
    uint32_t reserved;
} coll_boot_hdr_t;

typedef struct {
    int32_t  nranks;
    int32_t  rank;
    uint64_t comm_nonce; /* must be equal across ranks: same unique id */
} coll_boot_hello_t;

/* The root's answer to a shrink: who survives and the unique id of their new communicator. */
typedef struct {
    int32_t          nsurvivors;
    int32_t          reserved;
    coll_unique_id_t id;
} coll_boot_shrunk_t;

/* A TCP address on the wire: in unique ids, and each rank's standby address (the bootstrap's
 * first round), where the survivors elect a new root when the root's process died. */
typedef struct {
    uint16_t family;
    uint16_t port;     /* network order */
    uint8_t  addr[16]; /* IPv4 (4 bytes) or IPv6 */
} coll_boot_addr_t;

/* Layout of coll_unique_id_t.internal (fits in COLL_UNIQUE_ID_BYTES). */
typedef struct {
    uint32_t         magic;
    uint32_t         version;
    uint8_t          secret[16];
    uint64_t         nonce; /* random per id: communicators from different ids never match */
    coll_boot_addr_t where; /* the root */
} coll_uid_t;

_Static_assert(sizeof(coll_uid_t) <= COLL_UNIQUE_ID_BYTES, "unique id layout too large");
_Static_assert(sizeof(coll_boot_hdr_t) == 32, "bootstrap header must be 32 bytes");

/* The tag every message of the job carries (derived, the secret itself never travels). */
uint64_t coll_boot_job_tag(const uint8_t secret[16]);

void coll_boot_hdr_fill(coll_boot_hdr_t *h, coll_boot_type_t type, uint64_t job_tag, int rank,
                        uint32_t round, uint32_t len);
/* Validate a received header; on failure writes the reason (for the log) into why. */
coll_result_t coll_boot_hdr_check(const coll_boot_hdr_t *h, uint64_t job_tag, uint32_t max_len,
                                  char *why, size_t why_len);
const char   *coll_boot_type_name(uint32_t type);
/* The payload of a HELLO whose header passed coll_boot_hdr_check: for this id, a sane rank. */
coll_result_t coll_boot_hello_parse(const coll_boot_hdr_t *h, const void *payload, uint64_t nonce,
                                    coll_boot_hello_t *hello, char *why, size_t why_len);

void coll_boot_addr_pack(const coll_sockaddr_t *addr, coll_boot_addr_t *w);
/* COLL_ERR_INVALID_ARG for a family other than IPv4 or IPv6. */
coll_result_t coll_boot_addr_unpack(const coll_boot_addr_t *w, coll_sockaddr_t *addr);
/* The payload of a SHRUNK (len bytes, already read): at most nranks survivors, in range, in
 * increasing order. survivors has room for nranks. */
coll_result_t coll_boot_shrunk_parse(const void *payload, uint32_t len, int nranks,
                                     int32_t *survivors, int *nsurvivors_p, coll_unique_id_t *id_p,
                                     char *why, size_t why_len);

#endif
