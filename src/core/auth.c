/* SPDX-License-Identifier: MIT */
/* Challenge-response authentication with the job secret; the protocol is described in auth.h. */
#include "auth.h"
#include "error.h"
#include "sha256.h"
#include "util.h"

#include <string.h>

#define AUTH_MAGIC_CHALLENGE 0x31554143u /* "CAU1" */
#define AUTH_MAGIC_RESPONSE  0x52554143u /* "CAUR" */
#define AUTH_MAGIC_PROOF     0x50554143u /* "CAUP" */

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void coll_auth_derive(const uint8_t secret[COLL_AUTH_SECRET_LEN], const char *purpose, uint64_t ctx,
                      coll_auth_key_t *key)
{
    static const char  label[] = "coll-auth-key";
    coll_hmac_sha256_t m;
    uint8_t            c[8];
    int                i;

    for (i = 0; i < 8; i++) {
        c[i] = (uint8_t)(ctx >> (8 * i));
    }
    coll_hmac_sha256_init(&m, secret, COLL_AUTH_SECRET_LEN);
    coll_hmac_sha256_update(&m, label, sizeof(label));
    coll_hmac_sha256_update(&m, purpose, strlen(purpose) + 1);
    coll_hmac_sha256_update(&m, c, sizeof(c));
    coll_hmac_sha256_final(&m, key->key);
}

static void auth_mac(const coll_auth_key_t *key, const char *role, const coll_auth_state_t *st,
                     const void *bound, size_t bound_len, uint8_t out[COLL_SHA256_LEN])
{
    coll_hmac_sha256_t m;
    coll_hmac_sha256_init(&m, key->key, sizeof(key->key));
    coll_hmac_sha256_update(&m, role, strlen(role) + 1);
    coll_hmac_sha256_update(&m, st->ns, sizeof(st->ns));
    coll_hmac_sha256_update(&m, st->nc, sizeof(st->nc));
    if (bound_len > 0) {
        coll_hmac_sha256_update(&m, bound, bound_len);
    }
    coll_hmac_sha256_final(&m, out);
}

coll_result_t coll_auth_challenge(coll_auth_state_t *st, uint8_t out[COLL_AUTH_CHALLENGE_LEN])
{
    memset(st, 0, sizeof(*st));
    COLL_CHECK(coll_random_bytes(st->ns, sizeof(st->ns)));
    put32(out, AUTH_MAGIC_CHALLENGE);
    put32(out + 4, 0);
    memcpy(out + 8, st->ns, sizeof(st->ns));
    return COLL_OK;
}

coll_result_t coll_auth_respond(const coll_auth_key_t *key, coll_auth_state_t *st,
                                const uint8_t challenge[COLL_AUTH_CHALLENGE_LEN], const void *bound,
                                size_t bound_len, uint8_t out[COLL_AUTH_RESPONSE_LEN])
{
    if (get32(challenge) != AUTH_MAGIC_CHALLENGE || get32(challenge + 4) != 0) {
        return COLL_ERR_TRANSPORT;
    }
    memcpy(st->ns, challenge + 8, sizeof(st->ns));
    COLL_CHECK(coll_random_bytes(st->nc, sizeof(st->nc)));
    put32(out, AUTH_MAGIC_RESPONSE);
    put32(out + 4, 0);
    memcpy(out + 8, st->nc, sizeof(st->nc));
    auth_mac(key, "coll-auth-connector", st, bound, bound_len, out + 24);
    return COLL_OK;
}

coll_result_t coll_auth_check_response(const coll_auth_key_t *key, coll_auth_state_t *st,
                                       const uint8_t response[COLL_AUTH_RESPONSE_LEN],
                                       const void *bound, size_t bound_len,
                                       uint8_t out[COLL_AUTH_PROOF_LEN])
{
    uint8_t mac[COLL_SHA256_LEN];
    if (get32(response) != AUTH_MAGIC_RESPONSE || get32(response + 4) != 0) {
        return COLL_ERR_INVALID_ARG;
    }
    memcpy(st->nc, response + 8, sizeof(st->nc));
    auth_mac(key, "coll-auth-connector", st, bound, bound_len, mac);
    if (!coll_mem_equal_ct(mac, response + 24, sizeof(mac))) {
        return COLL_ERR_TRANSPORT;
    }
    put32(out, AUTH_MAGIC_PROOF);
    put32(out + 4, 0);
    auth_mac(key, "coll-auth-acceptor", st, bound, bound_len, out + 8);
    return COLL_OK;
}

coll_result_t coll_auth_check_proof(const coll_auth_key_t *key, const coll_auth_state_t *st,
                                    const uint8_t proof[COLL_AUTH_PROOF_LEN], const void *bound,
                                    size_t bound_len)
{
    uint8_t mac[COLL_SHA256_LEN];
    if (get32(proof) != AUTH_MAGIC_PROOF || get32(proof + 4) != 0) {
        return COLL_ERR_TRANSPORT;
    }
    auth_mac(key, "coll-auth-acceptor", st, bound, bound_len, mac);
    return coll_mem_equal_ct(mac, proof + 8, sizeof(mac)) ? COLL_OK : COLL_ERR_TRANSPORT;
}
