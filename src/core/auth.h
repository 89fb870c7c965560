/* SPDX-License-Identifier: MIT */
/*
 * Mutual authentication of a connection with the job secret (every rank of a job holds the
 * 16-byte secret of its unique id; it never travels). Challenge-response with HMAC-SHA-256:
 *
 *   acceptor  -> connector  challenge {magic "CAU1", 0, ns[16]}                     24 bytes
 *   connector -> acceptor   response  {magic "CAUR", 0, nc[16], mac_c[32]}          56 bytes
 *   acceptor  -> connector  proof     {magic "CAUP", 0, mac_s[32]}                  40 bytes
 *
 *   mac_c = HMAC(key, "coll-auth-connector" | ns | nc | bound)
 *   mac_s = HMAC(key, "coll-auth-acceptor"  | ns | nc | bound)
 *
 * key is derived from the secret for one purpose and one context (the unique id's nonce for
 * the bootstrap, the communicator id for transports), so a response is good for exactly one
 * connection of one communicator; both nonces are fresh per connection, so nothing can be
 * replayed; bound is the fixed-size message that follows (e.g. a transport hello), so it
 * cannot be swapped. The acceptor parses nothing from a connection before the response checks.
 */
#ifndef COLL_AUTH_H
#define COLL_AUTH_H

#include <stddef.h>
#include <stdint.h>
#include "coll.h"

#define COLL_AUTH_SECRET_LEN    16
#define COLL_AUTH_KEY_LEN       32
#define COLL_AUTH_NONCE_LEN     16
#define COLL_AUTH_CHALLENGE_LEN 24
#define COLL_AUTH_RESPONSE_LEN  56
#define COLL_AUTH_PROOF_LEN     40

typedef struct {
    uint8_t key[COLL_AUTH_KEY_LEN];
} coll_auth_key_t;

/* The per-connection state either side keeps between the messages. */
typedef struct {
    uint8_t ns[COLL_AUTH_NONCE_LEN]; /* acceptor's nonce */
    uint8_t nc[COLL_AUTH_NONCE_LEN]; /* connector's nonce */
} coll_auth_state_t;

/* key = HMAC(secret, "coll-auth-key" | purpose | ctx as 8 little-endian bytes). */
void coll_auth_derive(const uint8_t secret[COLL_AUTH_SECRET_LEN], const char *purpose, uint64_t ctx,
                      coll_auth_key_t *key);

/* Acceptor: a fresh challenge. */
coll_result_t coll_auth_challenge(coll_auth_state_t *st, uint8_t out[COLL_AUTH_CHALLENGE_LEN]);
/* Connector: answer a challenge (COLL_ERR_TRANSPORT when it is not one). */
coll_result_t coll_auth_respond(const coll_auth_key_t *key, coll_auth_state_t *st,
                                const uint8_t challenge[COLL_AUTH_CHALLENGE_LEN], const void *bound,
                                size_t bound_len, uint8_t out[COLL_AUTH_RESPONSE_LEN]);
/* Acceptor: COLL_OK when the response proves the key; then out is the proof to send.
 * COLL_ERR_INVALID_ARG: not a response at all; COLL_ERR_TRANSPORT: made with another key, or
 * for another challenge, or over other bound bytes. */
coll_result_t coll_auth_check_response(const coll_auth_key_t *key, coll_auth_state_t *st,
                                       const uint8_t response[COLL_AUTH_RESPONSE_LEN],
                                       const void *bound, size_t bound_len,
                                       uint8_t out[COLL_AUTH_PROOF_LEN]);
/* Connector: COLL_OK when the acceptor's proof shows it holds the key too. */
coll_result_t coll_auth_check_proof(const coll_auth_key_t *key, const coll_auth_state_t *st,
                                    const uint8_t proof[COLL_AUTH_PROOF_LEN], const void *bound,
                                    size_t bound_len);

#endif
