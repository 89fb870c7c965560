/* SPDX-License-Identifier: MIT */
/*
 * Unit test of the connection authentication: SHA-256 against FIPS 180-4's examples (also fed in
 * uneven pieces), HMAC-SHA-256 against RFC 4231's cases, and the challenge-response handshake of
 * src/core/auth.h: it succeeds with one key, and fails for another secret, another context, a
 * response replayed onto another challenge, a changed hello, a reflected message, a tampered proof
 * and a message that is not one.
 */
#include "auth.h"
#include "sha256.h"

#include <stdio.h>
#include <string.h>

#include "coll_test.h"

static void hex(const char *s, uint8_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        ASSERT_EQ(sscanf(s + 2 * i, "%2x", &v), 1);
        out[i] = (uint8_t)v;
    }
}

static void expect_digest(const uint8_t got[COLL_SHA256_LEN], const char *want_hex,
                          const char *what)
{
    uint8_t want[COLL_SHA256_LEN];
    hex(want_hex, want, sizeof(want));
    ASSERT_(memcmp(got, want, sizeof(want)) == 0, "%s: digest differs from the reference", what);
}

static void test_sha256(void)
{
    static uint8_t million[1000000];
    uint8_t        d[COLL_SHA256_LEN];
    coll_sha256_t  s;

    coll_sha256("abc", 3, d);
    expect_digest(d, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", "abc");
    coll_sha256("", 0, d);
    expect_digest(d, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", "empty");
    coll_sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56, d);
    expect_digest(d, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
                  "two blocks");
    memset(million, 'a', sizeof(million));
    coll_sha256(million, sizeof(million), d);
    expect_digest(d, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0",
                  "a million a");
    /* the same in pieces of 1, 63, 64, 65, ... bytes: block boundaries fall everywhere */
    coll_sha256_init(&s);
    size_t off = 0, piece = 1;
    while (off < sizeof(million)) {
        size_t n = piece < sizeof(million) - off ? piece : sizeof(million) - off;
        coll_sha256_update(&s, million + off, n);
        off += n;
        piece = piece * 7 % 131 + 1;
    }
    coll_sha256_final(&s, d);
    expect_digest(d, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0",
                  "a million a in pieces");
}

static void test_hmac(void)
{
    uint8_t key[131], data[50], d[COLL_SHA256_LEN];

    memset(key, 0x0b, 20);
    coll_hmac_sha256(key, 20, "Hi There", 8, d);
    expect_digest(d, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7",
                  "RFC 4231 case 1");
    coll_hmac_sha256("Jefe", 4, "what do ya want for nothing?", 28, d);
    expect_digest(d, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
                  "RFC 4231 case 2");
    memset(key, 0xaa, sizeof(key));
    memset(data, 0xdd, sizeof(data));
    coll_hmac_sha256(key, 20, data, sizeof(data), d);
    expect_digest(d, "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe",
                  "RFC 4231 case 3");
    coll_hmac_sha256(key, 131, "Test Using Larger Than Block-Size Key - Hash Key First", 54, d);
    expect_digest(d, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54",
                  "RFC 4231 case 6 (key longer than a block)");
}

static void test_equal_ct(void)
{
    uint8_t a[40], b[40];
    memset(a, 7, sizeof(a));
    memcpy(b, a, sizeof(b));
    ASSERT_TRUE(coll_mem_equal_ct(a, b, sizeof(a)));
    for (size_t i = 0; i < sizeof(a); i++) {
        b[i] ^= 0x80;
        ASSERT_TRUE(!coll_mem_equal_ct(a, b, sizeof(a)));
        b[i] ^= 0x80;
    }
}

typedef struct {
    coll_auth_state_t acc, con;
    uint8_t           challenge[COLL_AUTH_CHALLENGE_LEN];
    uint8_t           response[COLL_AUTH_RESPONSE_LEN];
    uint8_t           proof[COLL_AUTH_PROOF_LEN];
} shake_t;

static const uint8_t secret[16] = "0123456789abcde", other[16] = "0123456789abcdf";

static void test_handshake(void)
{
    coll_auth_key_t k, k_other, k_ctx, k_purpose;
    uint8_t         hello[40], hello2[40];
    shake_t         a, b;

    memset(hello, 0x5a, sizeof(hello));
    memcpy(hello2, hello, sizeof(hello));
    hello2[17] ^= 1; /* e.g. another from_rank */
    coll_auth_derive(secret, "transport", 42, &k);
    coll_auth_derive(other, "transport", 42, &k_other);
    coll_auth_derive(secret, "transport", 43, &k_ctx);
    coll_auth_derive(secret, "bootstrap", 42, &k_purpose);
    ASSERT_TRUE(memcmp(k.key, k_other.key, sizeof(k.key)) != 0);
    ASSERT_TRUE(memcmp(k.key, k_ctx.key, sizeof(k.key)) != 0);
    ASSERT_TRUE(memcmp(k.key, k_purpose.key, sizeof(k.key)) != 0);

    /* success, both ways */
    ASSERT_OK(coll_auth_challenge(&a.acc, a.challenge));
    ASSERT_OK(coll_auth_respond(&k, &a.con, a.challenge, hello, sizeof(hello), a.response));
    ASSERT_OK(coll_auth_check_response(&k, &a.acc, a.response, hello, sizeof(hello), a.proof));
    ASSERT_OK(coll_auth_check_proof(&k, &a.con, a.proof, hello, sizeof(hello)));

    /* fresh nonces per connection */
    ASSERT_OK(coll_auth_challenge(&b.acc, b.challenge));
    ASSERT_TRUE(memcmp(a.challenge, b.challenge, sizeof(a.challenge)) != 0);

    /* a connector without the secret, or with the secret of another context */
    uint8_t junk_proof[COLL_AUTH_PROOF_LEN];
    ASSERT_OK(coll_auth_respond(&k_other, &b.con, b.challenge, hello, sizeof(hello), b.response));
    ASSERT_EQ(coll_auth_check_response(&k, &b.acc, b.response, hello, sizeof(hello), junk_proof),
              COLL_ERR_TRANSPORT);
    ASSERT_OK(coll_auth_respond(&k_ctx, &b.con, b.challenge, hello, sizeof(hello), b.response));
    ASSERT_EQ(coll_auth_check_response(&k, &b.acc, b.response, hello, sizeof(hello), junk_proof),
              COLL_ERR_TRANSPORT);

    /* a valid response replayed onto another connection's challenge */
    ASSERT_EQ(coll_auth_check_response(&k, &b.acc, a.response, hello, sizeof(hello), junk_proof),
              COLL_ERR_TRANSPORT);

    /* the hello changed in flight */
    ASSERT_OK(coll_auth_respond(&k, &b.con, b.challenge, hello, sizeof(hello), b.response));
    ASSERT_EQ(coll_auth_check_response(&k, &b.acc, b.response, hello2, sizeof(hello2), junk_proof),
              COLL_ERR_TRANSPORT);

    /* not a response at all; a response's MAC tampered */
    uint8_t garbage[COLL_AUTH_RESPONSE_LEN];
    memset(garbage, 0xab, sizeof(garbage));
    ASSERT_EQ(coll_auth_check_response(&k, &b.acc, garbage, hello, sizeof(hello), junk_proof),
              COLL_ERR_INVALID_ARG);
    b.response[40] ^= 4;
    ASSERT_EQ(coll_auth_check_response(&k, &b.acc, b.response, hello, sizeof(hello), junk_proof),
              COLL_ERR_TRANSPORT);

    /* an acceptor without the secret cannot prove itself; nor can a tampered or reflected proof,
     * nor a proof for another hello */
    shake_t c;
    uint8_t fake[COLL_AUTH_PROOF_LEN];
    ASSERT_OK(coll_auth_challenge(&c.acc, c.challenge));
    ASSERT_OK(coll_auth_respond(&k, &c.con, c.challenge, hello, sizeof(hello), c.response));
    ASSERT_OK(coll_auth_check_response(&k, &c.acc, c.response, hello, sizeof(hello), c.proof));
    memcpy(fake, c.proof, sizeof(fake));
    fake[20] ^= 1;
    ASSERT_EQ(coll_auth_check_proof(&k, &c.con, fake, hello, sizeof(hello)), COLL_ERR_TRANSPORT);
    ASSERT_EQ(coll_auth_check_proof(&k, &c.con, c.proof, hello2, sizeof(hello2)),
              COLL_ERR_TRANSPORT);
    ASSERT_EQ(coll_auth_check_proof(&k_other, &c.con, c.proof, hello, sizeof(hello)),
              COLL_ERR_TRANSPORT);
    ASSERT_EQ(coll_auth_check_proof(&k, &c.con, c.response, hello, sizeof(hello)),
              COLL_ERR_TRANSPORT);
    ASSERT_EQ(coll_auth_check_proof(&k, &a.con, c.proof, hello, sizeof(hello)), COLL_ERR_TRANSPORT);
    ASSERT_OK(coll_auth_check_proof(&k, &c.con, c.proof, hello, sizeof(hello)));

    /* a challenge that is not one is refused by the connector */
    memset(garbage, 0, sizeof(garbage));
    ASSERT_EQ(coll_auth_respond(&k, &c.con, garbage, NULL, 0, c.response), COLL_ERR_TRANSPORT);

    /* the bootstrap's handshake binds nothing: it works with no bound bytes */
    ASSERT_OK(coll_auth_challenge(&c.acc, c.challenge));
    ASSERT_OK(coll_auth_respond(&k_purpose, &c.con, c.challenge, NULL, 0, c.response));
    ASSERT_OK(coll_auth_check_response(&k_purpose, &c.acc, c.response, NULL, 0, c.proof));
    ASSERT_OK(coll_auth_check_proof(&k_purpose, &c.con, c.proof, NULL, 0));
}

int main(void)
{
    test_sha256();
    test_hmac();
    test_equal_ct();
    test_handshake();
    printf("test_auth: SHA-256, HMAC-SHA-256 and the handshake ok\n");
    return 0;
}
