/* SPDX-License-Identifier: MIT */
/*
 * Bootstrap wire: the input is a stream as a rank or a stray would send it to the root after
 * authentication (a header, then its payload, again and again; the first must be a HELLO of
 * this unique id), followed by what the root's reply parser and coll_boot_uid_parse see, a
 * standby address from the first round, and a shrink answer as a rank reads it.
 */
#include "fuzz.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/wire.h"

#include <string.h>

#define JOB_TAG 0x1122334455667788ull
#define NONCE   0x0102030405060708ull

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t          pos    = 0;
    int             joined = 0;
    char            why[256];
    coll_boot_hdr_t h;

    /* root side: messages until the stream ends or one is refused */
    while (size - pos >= sizeof(h)) {
        memcpy(&h, data + pos, sizeof(h));
        pos += sizeof(h);
        if (coll_boot_hdr_check(&h, JOB_TAG, COLL_BOOT_MAX_PAYLOAD, why, sizeof(why)) != COLL_OK) {
            FUZZ_REQUIRE(strlen(why) > 0);
            break;
        }
        FUZZ_REQUIRE(h.len <= COLL_BOOT_MAX_PAYLOAD && h.type > 0 && h.type < COLL_BOOT_TYPE_MAX);
        if (h.len > size - pos) {
            break; /* the root would wait for the rest */
        }
        if (!joined) {
            coll_boot_hello_t hello;
            if (coll_boot_hello_parse(&h, data + pos, NONCE, &hello, why, sizeof(why)) != COLL_OK) {
                break;
            }
            FUZZ_REQUIRE(hello.nranks >= 1 && hello.nranks <= COLL_BOOT_MAX_RANKS);
            FUZZ_REQUIRE(hello.rank >= 0 && hello.rank < hello.nranks);
            FUZZ_REQUIRE(hello.comm_nonce == NONCE);
            joined = 1;
        }
        pos += h.len;
    }

    /* a rank's side: any header, any type, as read from the root (no upper bound but the
     * receiver's buffer, which it checks itself) */
    if (size >= sizeof(h)) {
        memcpy(&h, data + size - sizeof(h), sizeof(h));
        if (coll_boot_hdr_check(&h, JOB_TAG, UINT32_MAX, why, sizeof(why)) == COLL_OK) {
            FUZZ_REQUIRE(h.magic == COLL_BOOT_MAGIC && h.version == COLL_BOOT_VERSION);
            FUZZ_REQUIRE(h.job_tag == JOB_TAG);
        }
    }

    /* a unique id as a user hands it over */
    if (size >= sizeof(coll_unique_id_t)) {
        coll_unique_id_t id;
        coll_sockaddr_t  addr;
        uint8_t          secret[16];
        uint64_t         nonce;
        memcpy(&id, data, sizeof(id));
        if (coll_boot_uid_parse(&id, &addr, secret, &nonce) == COLL_OK) {
            FUZZ_REQUIRE(addr.ss.ss_family == AF_INET || addr.ss.ss_family == AF_INET6);
            FUZZ_REQUIRE(addr.len <= sizeof(addr.ss));
        }
    }
    /* a standby address as another rank sends it in the bootstrap's first round */
    if (size >= sizeof(coll_boot_addr_t)) {
        coll_boot_addr_t w;
        coll_sockaddr_t  addr;
        memcpy(&w, data + size - sizeof(w), sizeof(w));
        if (coll_boot_addr_unpack(&w, &addr) == COLL_OK) {
            FUZZ_REQUIRE(addr.ss.ss_family == AF_INET || addr.ss.ss_family == AF_INET6);
            FUZZ_REQUIRE(addr.len <= sizeof(addr.ss));
        }
    }

    /* the payload of a SHRUNK, from the root or from the survivor that ran the shrink */
    {
        int32_t          survivors[8];
        int              n = -1;
        coll_unique_id_t id;
        if (size <= UINT32_MAX && coll_boot_shrunk_parse(data, (uint32_t)size, 8, survivors, &n,
                                                         &id, why, sizeof(why)) == COLL_OK) {
            FUZZ_REQUIRE(n >= 0 && n <= 8);
            FUZZ_REQUIRE(size == sizeof(coll_boot_shrunk_t) + sizeof(int32_t) * (size_t)n);
            for (int i = 0; i < n; i++) {
                FUZZ_REQUIRE(survivors[i] >= 0 && survivors[i] < 8);
                FUZZ_REQUIRE(i == 0 || survivors[i] > survivors[i - 1]);
            }
        }
    }
    return 0;
}
