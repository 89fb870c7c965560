/* SPDX-License-Identifier: MIT */
/*
 * SHA-256 (FIPS 180-4) and HMAC-SHA-256 (RFC 2104), small and dependency-free: the
 * authentication handshakes and checksums need nothing more. Plus a constant-time compare.
 */
#ifndef COLL_SHA256_H
#define COLL_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define COLL_SHA256_LEN 32

typedef struct {
    uint32_t h[8];
    uint64_t nbytes; /* hashed so far */
    uint8_t  block[64];
    size_t   fill; /* bytes waiting in block */
} coll_sha256_t;

void coll_sha256_init(coll_sha256_t *s);
void coll_sha256_update(coll_sha256_t *s, const void *data, size_t len);
void coll_sha256_final(coll_sha256_t *s, uint8_t out[COLL_SHA256_LEN]);
void coll_sha256(const void *data, size_t len, uint8_t out[COLL_SHA256_LEN]);

typedef struct {
    coll_sha256_t inner, outer;
} coll_hmac_sha256_t;

void coll_hmac_sha256_init(coll_hmac_sha256_t *m, const void *key, size_t keylen);
void coll_hmac_sha256_update(coll_hmac_sha256_t *m, const void *data, size_t len);
void coll_hmac_sha256_final(coll_hmac_sha256_t *m, uint8_t out[COLL_SHA256_LEN]);
void coll_hmac_sha256(const void *key, size_t keylen, const void *data, size_t len,
                      uint8_t out[COLL_SHA256_LEN]);

/* 1 when the n bytes are equal; the time taken does not depend on where they differ. */
int coll_mem_equal_ct(const void *a, const void *b, size_t n);

#endif
