/* SPDX-License-Identifier: MIT */
/*
 * Writes the seed corpus of the fuzz harnesses (tests/fuzz/corpus/NAME/) from the library's
 * own structures and packers, so that every seed is a valid message the parser accepts:
 *   cc -I include -I src/core -I src -I transports ... tests/fuzz/make_seeds.c (see README).
 * The corpus is committed; rerun this after a wire format changes.
 */
#include "bootstrap/bootstrap.h"
#include "bootstrap/wire.h"
#include "shm/shm.h"
#include "tcp/tcp.h"
#include "train/zero.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *dir;

static void put(const char *name, int n, const void *a, size_t alen, const void *b, size_t blen)
{
    char  path[512];
    FILE *f;
    snprintf(path, sizeof(path), "%s/%s/seed-%02d", dir, name, n);
    f = fopen(path, "wb");
    if (f == NULL) {
        perror(path);
        exit(1);
    }
    fwrite(a, 1, alen, f);
    if (blen > 0) {
        fwrite(b, 1, blen, f);
    }
    fclose(f);
}

static void boot_seeds(void)
{
    uint8_t           buf[512];
    size_t            n = 0;
    coll_boot_hdr_t   h;
    coll_boot_hello_t hello = {.nranks = 4, .rank = 2, .comm_nonce = 0x0102030405060708ull};
    coll_boot_hdr_fill(&h, COLL_BOOT_HELLO, 0x1122334455667788ull, 2, 0, sizeof(hello));
    memcpy(buf, &h, sizeof(h));
    memcpy(buf + sizeof(h), &hello, sizeof(hello));
    n = sizeof(h) + sizeof(hello);
    put("boot", 0, buf, n, NULL, 0);
    coll_boot_hdr_fill(&h, COLL_BOOT_GATHER, 0x1122334455667788ull, 2, 0, 16);
    memcpy(buf + n, &h, sizeof(h));
    memset(buf + n + sizeof(h), 0x42, 16);
    n += sizeof(h) + 16;
    coll_boot_hdr_fill(&h, COLL_BOOT_BYE, 0x1122334455667788ull, 2, 0, 0);
    memcpy(buf + n, &h, sizeof(h));
    n += sizeof(h);
    put("boot", 1, buf, n, NULL, 0);

    coll_unique_id_t id;
    coll_sockaddr_t  addr;
    uint8_t          secret[16] = "0123456789abcde";
    coll_sock_parse("127.0.0.1:29500", &addr);
    coll_boot_uid_make(&addr, secret, 77, &id);
    put("boot", 2, &id, sizeof(id), NULL, 0);

    struct {
        coll_boot_shrunk_t head;
        int32_t            list[3];
    } shrunk = {.head = {.nsurvivors = 3, .id = id}, .list = {0, 2, 5}};
    put("boot", 3, &shrunk, sizeof(shrunk), NULL, 0);
    coll_boot_addr_t where;
    coll_boot_addr_pack(&addr, &where);
    put("boot", 4, &h, sizeof(h), &where, sizeof(where));
}

static void tcp_seeds(void)
{
    uint8_t          b[1 + 4 * COLL_TCP_FRAME_HDR];
    coll_tcp_hello_t h            = {.magic      = COLL_TCP_HELLO_MAGIC,
                                     .version    = COLL_TCP_VERSION,
                                     .sock_index = 1,
                                     .job_tag    = 0xabcdef,
                                     .from_rank  = 2,
                                     .to_rank    = 5,
                                     .comm_id    = 0x1234,
                                     .nsocks     = 2,
                                     .frag_size  = 65536};
    uint64_t         frames[4][3] = {{4096, 0, 8192}, {4096, 4096, 8192}, {0, 0, 0}, {100, 0, 100}};
    b[0]                          = 0;
    for (int i = 0; i < 4; i++) {
        uint8_t *p = b + 1 + i * COLL_TCP_FRAME_HDR;
        coll_tcp_put32(p, COLL_TCP_FRAME_MAGIC);
        coll_tcp_put32(p + 4, (uint32_t)frames[i][0]);
        coll_tcp_put64(p + 8, 7);
        coll_tcp_put64(p + 16, frames[i][2]);
        coll_tcp_put64(p + 24, frames[i][1]);
    }
    put("tcp", 0, b, sizeof(b), NULL, 0);
    b[0] = 1;
    coll_tcp_hello_pack(&h, b + 1);
    put("tcp", 1, b, 1 + COLL_TCP_HELLO_LEN, NULL, 0);
    b[0] = 2;
    memset(b + 1, 0, sizeof(coll_tcp_handle_t));
    coll_tcp_put32(b + 1, COLL_TCP_HANDLE_MAGIC);
    coll_tcp_put16(b + 5, AF_INET);
    coll_tcp_put16(b + 7, 4242);
    b[13] = 127;
    b[16] = 1;
    put("tcp", 2, b, 1 + sizeof(coll_tcp_handle_t), NULL, 0);

    /* a real exchange: challenge, then a response + hello made with the fuzzer's key */
    static const uint8_t secret[16] = "fuzzing-secret!";
    coll_auth_key_t      key;
    coll_auth_state_t    acc, con;
    uint8_t              ch[COLL_AUTH_CHALLENGE_LEN], m[1 + COLL_AUTH_RESPONSE_LEN + 40];
    coll_auth_derive(secret, "transport", 0x1234, &key);
    coll_auth_challenge(&acc, ch);
    m[0] = 3;
    coll_tcp_hello_pack(&h, m + 1 + COLL_AUTH_RESPONSE_LEN);
    coll_auth_respond(&key, &con, ch, m + 1 + COLL_AUTH_RESPONSE_LEN, 40, m + 1);
    put("tcp", 3, m, sizeof(m), NULL, 0);
    m[0] = 3;
    memcpy(m + 1, ch, sizeof(ch));
    put("tcp", 4, m, 1 + sizeof(ch), NULL, 0);
}

static void shm_seeds(void)
{
    static uint8_t b[1 + 16 + 4096];
    shm_frame_t    f;
    uint64_t       start = 0, head = 0;
    size_t         off = 0;
    memset(b, 0, sizeof(b));
    b[0] = 0;
    for (uint64_t i = 0; i < 3; i++) { /* three frames of one 2000-byte message */
        memset(&f, 0, sizeof(f));
        f.magic  = SHM_FRAME_MAGIC;
        f.len    = i < 2 ? 768 : 464;
        f.tag    = 9;
        f.total  = 2000;
        f.offset = i * 768;
        f.seqno  = i;
        memcpy(b + 17 + off, &f, sizeof(f));
        off += SHM_FRAME_HDR + ((f.len + 63) & ~63u);
    }
    head = off;
    memcpy(b + 1, &start, 8);
    memcpy(b + 9, &head, 8);
    put("shm", 0, b, sizeof(b), NULL, 0);

    /* single-copy: an RTS (tag, length, the sender's address) and a FIN, headers only */
    memset(b, 0, sizeof(b));
    for (uint64_t i = 0; i < 2; i++) {
        memset(&f, 0, sizeof(f));
        f.magic  = i == 0 ? SHM_RTS_MAGIC : SHM_FIN_MAGIC;
        f.tag    = 11 + i;
        f.total  = (uint64_t)1 << 20;
        f.offset = i == 0 ? 0x7f0000001000ull : 0;
        f.seqno  = i;
        memcpy(b + 17 + i * SHM_FRAME_HDR, &f, sizeof(f));
    }
    head = 2 * SHM_FRAME_HDR;
    memcpy(b + 1, &start, 8);
    memcpy(b + 9, &head, 8);
    put("shm", 3, b, 17 + 2 * SHM_FRAME_HDR, NULL, 0);

    shm_handle_t h;
    memset(&h, 0, sizeof(h));
    h.magic     = SHM_HANDLE_MAGIC;
    h.version   = SHM_SEG_VERSION;
    h.ring_size = SHM_RING_MIN;
    h.nslots    = 3;
    h.rank      = 2;
    h.pid       = 1000;
    h.win_size  = 0;
    h.seg_size  = shm_seg_size(3, SHM_RING_MIN, 0);
    shm_seg_name(h.name, sizeof(h.name), 0x1234, 2);
    b[0] = 1;
    memcpy(b + 1, &h, sizeof(h));
    put("shm", 1, b, 1 + sizeof(h), NULL, 0);

    shm_seg_hdr_t s;
    memset(&s, 0, sizeof(s));
    s.magic     = SHM_SEG_MAGIC;
    s.version   = SHM_SEG_VERSION;
    s.nslots    = 3;
    s.job_tag   = 0xabcdef;
    s.comm_id   = 0x1234;
    s.ring_size = h.ring_size;
    s.seg_size  = h.seg_size;
    s.rank      = 2;
    s.pid       = 1000;
    b[0]        = 2;
    memcpy(b + 1, &s, sizeof(s));
    memcpy(b + 1 + sizeof(s), &h, sizeof(h));
    put("shm", 2, b, 1 + sizeof(s) + sizeof(h), NULL, 0);
}

static void ckpt_seeds(void)
{
    static uint8_t          b[8192];
    coll_zero_ckpt_header_t h    = {COLL_ZERO_CKPT_MAGIC, COLL_ZERO_CKPT_VERSION, 1, 2, 2, 2};
    coll_zero_ckpt_seg_t    s[2] = {{0, 100}, {2048, 300}};
    size_t                  n    = 0;
    memcpy(b, &h, sizeof(h));
    n += sizeof(h);
    memcpy(b + n, s, sizeof(s));
    n += sizeof(s);
    n += 3 * 400 * sizeof(float);
    put("ckpt", 0, b, n, NULL, 0);
}

int main(int argc, char **argv)
{
    static const char *const names[] = {"boot", "tcp", "shm", "ckpt"};
    char                     path[512];
    dir = argc > 1 ? argv[1] : "tests/fuzz/corpus";
    mkdir(dir, 0755);
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        mkdir(path, 0755);
    }
    boot_seeds();
    tcp_seeds();
    shm_seeds();
    ckpt_seeds();
    return 0;
}
