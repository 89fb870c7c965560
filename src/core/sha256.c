/* SPDX-License-Identifier: MIT */
/*
 * SHA-256 after FIPS 180-4 section 6.2, HMAC after RFC 2104. Checked against the FIPS and
 * RFC 4231 vectors by tests/unit/test_auth.c.
 */
#include "sha256.h"

#include <string.h>

static const uint32_t sha256_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static inline uint32_t ror32(uint32_t x, unsigned n)
{
    return (x >> n) | (x << (32 - n));
}

static void sha256_block(uint32_t h[8], const uint8_t *p)
{
    uint32_t w[64], a, b, c, d, e, f, g, hh;
    int      t;

    for (t = 0; t < 16; t++) {
        w[t] = (uint32_t)p[4 * t] << 24 | (uint32_t)p[4 * t + 1] << 16 |
               (uint32_t)p[4 * t + 2] << 8 | (uint32_t)p[4 * t + 3];
    }
    for (t = 16; t < 64; t++) {
        uint32_t s0 = ror32(w[t - 15], 7) ^ ror32(w[t - 15], 18) ^ (w[t - 15] >> 3);
        uint32_t s1 = ror32(w[t - 2], 17) ^ ror32(w[t - 2], 19) ^ (w[t - 2] >> 10);
        w[t]        = w[t - 16] + s0 + w[t - 7] + s1;
    }
    a  = h[0];
    b  = h[1];
    c  = h[2];
    d  = h[3];
    e  = h[4];
    f  = h[5];
    g  = h[6];
    hh = h[7];
    for (t = 0; t < 64; t++) {
        uint32_t big1 = ror32(e, 6) ^ ror32(e, 11) ^ ror32(e, 25);
        uint32_t ch   = (e & f) ^ (~e & g);
        uint32_t t1   = hh + big1 + ch + sha256_k[t] + w[t];
        uint32_t big0 = ror32(a, 2) ^ ror32(a, 13) ^ ror32(a, 22);
        uint32_t maj  = (a & b) ^ (a & c) ^ (b & c);
        uint32_t t2   = big0 + maj;
        hh            = g;
        g             = f;
        f             = e;
        e             = d + t1;
        d             = c;
        c             = b;
        b             = a;
        a             = t1 + t2;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
    h[5] += f;
    h[6] += g;
    h[7] += hh;
}

void coll_sha256_init(coll_sha256_t *s)
{
    static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(s->h, iv, sizeof(iv));
    s->nbytes = 0;
    s->fill   = 0;
}

void coll_sha256_update(coll_sha256_t *s, const void *data, size_t len)
{
    const uint8_t *p = data;

    s->nbytes += len;
    if (s->fill > 0) {
        size_t take = 64 - s->fill < len ? 64 - s->fill : len;
        memcpy(s->block + s->fill, p, take);
        s->fill += take;
        p += take;
        len -= take;
        if (s->fill < 64) {
            return;
        }
        sha256_block(s->h, s->block);
        s->fill = 0;
    }
    for (; len >= 64; p += 64, len -= 64) {
        sha256_block(s->h, p);
    }
    memcpy(s->block, p, len);
    s->fill = len;
}

void coll_sha256_final(coll_sha256_t *s, uint8_t out[COLL_SHA256_LEN])
{
    uint64_t bits = s->nbytes * 8;
    int      i;

    s->block[s->fill++] = 0x80;
    if (s->fill > 56) {
        memset(s->block + s->fill, 0, 64 - s->fill);
        sha256_block(s->h, s->block);
        s->fill = 0;
    }
    memset(s->block + s->fill, 0, 56 - s->fill);
    for (i = 0; i < 8; i++) {
        s->block[56 + i] = (uint8_t)(bits >> (56 - 8 * i));
    }
    sha256_block(s->h, s->block);
    for (i = 0; i < 8; i++) {
        out[4 * i]     = (uint8_t)(s->h[i] >> 24);
        out[4 * i + 1] = (uint8_t)(s->h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(s->h[i] >> 8);
        out[4 * i + 3] = (uint8_t)s->h[i];
    }
    memset(s, 0, sizeof(*s));
}

void coll_sha256(const void *data, size_t len, uint8_t out[COLL_SHA256_LEN])
{
    coll_sha256_t s;
    coll_sha256_init(&s);
    coll_sha256_update(&s, data, len);
    coll_sha256_final(&s, out);
}

void coll_hmac_sha256_init(coll_hmac_sha256_t *m, const void *key, size_t keylen)
{
    uint8_t k[64], pad[64];
    int     i;

    memset(k, 0, sizeof(k));
    if (keylen > sizeof(k)) {
        coll_sha256(key, keylen, k);
    } else if (keylen > 0) {
        memcpy(k, key, keylen);
    }
    for (i = 0; i < 64; i++) {
        pad[i] = k[i] ^ 0x36;
    }
    coll_sha256_init(&m->inner);
    coll_sha256_update(&m->inner, pad, sizeof(pad));
    for (i = 0; i < 64; i++) {
        pad[i] = k[i] ^ 0x5c;
    }
    coll_sha256_init(&m->outer);
    coll_sha256_update(&m->outer, pad, sizeof(pad));
    memset(k, 0, sizeof(k));
    memset(pad, 0, sizeof(pad));
}

void coll_hmac_sha256_update(coll_hmac_sha256_t *m, const void *data, size_t len)
{
    coll_sha256_update(&m->inner, data, len);
}

void coll_hmac_sha256_final(coll_hmac_sha256_t *m, uint8_t out[COLL_SHA256_LEN])
{
    uint8_t ih[COLL_SHA256_LEN];
    coll_sha256_final(&m->inner, ih);
    coll_sha256_update(&m->outer, ih, sizeof(ih));
    coll_sha256_final(&m->outer, out);
}

void coll_hmac_sha256(const void *key, size_t keylen, const void *data, size_t len,
                      uint8_t out[COLL_SHA256_LEN])
{
    coll_hmac_sha256_t m;
    coll_hmac_sha256_init(&m, key, keylen);
    coll_hmac_sha256_update(&m, data, len);
    coll_hmac_sha256_final(&m, out);
}

int coll_mem_equal_ct(const void *a, const void *b, size_t n)
{
    const volatile uint8_t *x = a, *y = b;
    uint8_t                 d = 0;
    size_t                  i;

    for (i = 0; i < n; i++) {
        d |= (uint8_t)(x[i] ^ y[i]);
    }
    return d == 0;
}
