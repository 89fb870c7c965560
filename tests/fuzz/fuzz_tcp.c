/* SPDX-License-Identifier: MIT */
/*
 * TCP wire: the connection handshake (challenge, response + hello, proof + ack), hellos, listen
 * handles and data frame headers. The first byte picks the parser, the rest is its input.
 */
#include "fuzz.h"
#include "tcp/tcp.h"

#include <string.h>

static void fuzz_frames(const uint8_t *p, size_t n)
{
    coll_tcp_frame_t f;
    for (; n >= COLL_TCP_FRAME_HDR; p += COLL_TCP_FRAME_HDR, n -= COLL_TCP_FRAME_HDR) {
        if (coll_tcp_frame_parse(p, 65536, &f) == NULL) {
            FUZZ_REQUIRE(f.magic == COLL_TCP_FRAME_MAGIC);
            FUZZ_REQUIRE(f.len <= 65536 && f.total <= COLL_TCP_MAX_TOTAL);
            FUZZ_REQUIRE(f.off <= f.total && f.off + f.len <= f.total);
            FUZZ_REQUIRE(f.len > 0 || f.total == 0);
            FUZZ_REQUIRE(f.off % 8 == 0);
        }
    }
}

static void fuzz_hello(const uint8_t *p, size_t n)
{
    coll_tcp_ctx_t   ctx;
    coll_tcp_hello_t h;
    char             why[128];
    memset(&ctx, 0, sizeof(ctx));
    ctx.rank      = 5;
    ctx.nranks    = 8;
    ctx.job_tag   = 0xabcdef;
    ctx.comm_id   = 0x1234;
    ctx.nsocks    = 2;
    ctx.frag_size = 65536;
    if (n < COLL_TCP_HELLO_LEN) {
        return;
    }
    coll_tcp_hello_unpack(p, &h);
    if (coll_tcp_hello_check(&ctx, &h, why, sizeof(why)) == NULL) {
        FUZZ_REQUIRE(h.from_rank < (uint32_t)ctx.rank && h.to_rank == (uint32_t)ctx.rank);
        FUZZ_REQUIRE(h.nsocks != ctx.nsocks || h.sock_index < h.nsocks);
        FUZZ_REQUIRE(h.job_tag == ctx.job_tag && h.comm_id == ctx.comm_id);
    }
}

static void fuzz_handle(const uint8_t *p, size_t n)
{
    struct sockaddr_storage ss;
    socklen_t               len = 0;
    uint8_t                 buf[sizeof(coll_tcp_handle_t)];
    if (n < sizeof(buf)) {
        return;
    }
    memcpy(buf, p, sizeof(buf));
    if (coll_tcp_handle_unpack(buf, 3, &ss, &len) == COLL_OK) {
        FUZZ_REQUIRE(ss.ss_family == AF_INET || ss.ss_family == AF_INET6);
        FUZZ_REQUIRE(len > 0 && len <= sizeof(ss));
    }
}

static void fuzz_auth(const uint8_t *p, size_t n)
{
    static const uint8_t secret[16] = "fuzzing-secret!";
    coll_auth_key_t      key;
    coll_auth_state_t    st;
    uint8_t              out[COLL_AUTH_RESPONSE_LEN];
    coll_auth_derive(secret, "transport", 0x1234, &key);
    if (n >= COLL_AUTH_CHALLENGE_LEN) { /* connector reading a challenge */
        (void)coll_auth_respond(&key, &st, p, NULL, 0, out);
    }
    if (n >= COLL_AUTH_RESPONSE_LEN + COLL_TCP_HELLO_LEN) { /* acceptor: response + hello */
        memset(&st, 0, sizeof(st));
        /* a response nobody computed with the key must not pass */
        FUZZ_REQUIRE(coll_auth_check_response(&key, &st, p, p + COLL_AUTH_RESPONSE_LEN,
                                              COLL_TCP_HELLO_LEN, out) != COLL_OK);
    }
    if (n >= COLL_AUTH_PROOF_LEN) { /* connector: proof + ack */
        memset(&st, 0, sizeof(st));
        FUZZ_REQUIRE(coll_auth_check_proof(&key, &st, p, NULL, 0) != COLL_OK);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) {
        return 0;
    }
    switch (data[0] % 4) {
    case 0:
        fuzz_frames(data + 1, size - 1);
        break;
    case 1:
        fuzz_hello(data + 1, size - 1);
        break;
    case 2:
        fuzz_handle(data + 1, size - 1);
        break;
    default:
        fuzz_auth(data + 1, size - 1);
        break;
    }
    return 0;
}
