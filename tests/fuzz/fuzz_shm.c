/* SPDX-License-Identifier: MIT */
/*
 * Shared-memory control blocks, which a peer process writes and this one reads: a ring's
 * contents and head (the consumer walks frames until it must wait or refuses one), a peer's
 * listen handle and its segment header. The first byte picks the parser.
 */
#include "fuzz.h"
#include "shm/shm.h"

#include <string.h>

#define RING 4096u /* data bytes: small, so frames, pads and wrap-around are all reachable */

static void fuzz_ring(const uint8_t *p, size_t n)
{
    static _Alignas(64) uint8_t mem[SHM_RING_CTRL_SIZE + RING];
    shm_ring_t                  r;
    shm_frame_t                 f;
    const void                 *payload;
    uint64_t                    head, start;

    if (n < 16) {
        return;
    }
    memcpy(&start, p, 8);
    memcpy(&head, p + 8, 8);
    memset(mem, 0, sizeof(mem));
    memcpy(mem + SHM_RING_CTRL_SIZE, p + 16, n - 16 < RING ? n - 16 : RING);
    shm_ring_view(&r, mem, RING, 1);
    /* the consumer's private position is always its own: a multiple of the alignment */
    r.pos   = (start % (4 * RING)) & ~(uint64_t)(SHM_ALIGN - 1);
    r.other = r.pos;
    atomic_store(&r.ctrl->head, r.pos + head % (2 * RING));
    for (int i = 0; i < 64; i++) {
        if (shm_ring_peek(&r, &f, &payload) != COLL_OK) {
            break;
        }
        const uint8_t *pl = payload, *lo = mem + SHM_RING_CTRL_SIZE;
        if (f.magic == SHM_RTS_MAGIC || f.magic == SHM_FIN_MAGIC) {
            /* single-copy control frames: a header only, the offset field is an address */
            FUZZ_REQUIRE(pl == NULL && f.len == 0 && f.total > 0 && f.total <= SHM_TOTAL_MAX);
        } else {
            FUZZ_REQUIRE(f.magic == SHM_FRAME_MAGIC);
            FUZZ_REQUIRE(pl >= lo + SHM_FRAME_HDR && pl + f.len <= lo + RING);
            FUZZ_REQUIRE(f.len <= r.frag && f.offset + f.len <= f.total);
        }
        shm_ring_consume(&r, &f);
    }
}

static struct coll_tp_ctx fuzz_ctx(void)
{
    struct coll_tp_ctx ctx;
    memset(&ctx, 0, sizeof(ctx));
    ctx.rank    = 0;
    ctx.nranks  = 4;
    ctx.nlocal  = 4;
    ctx.job_tag = 0xabcdef;
    ctx.comm_id = 0x1234;
    return ctx;
}

static void fuzz_handle(const uint8_t *p, size_t n)
{
    struct coll_tp_ctx ctx = fuzz_ctx();
    shm_handle_t       h;
    char               name[SHM_NAME_MAX];
    if (n < sizeof(h)) {
        return;
    }
    memcpy(&h, p, sizeof(h));
    shm_seg_name(name, sizeof(name), ctx.comm_id, 2);
    if (shm_seg_check_handle(&ctx, &h, 2, name) == COLL_OK) {
        FUZZ_REQUIRE(h.nslots == 3 && h.ring_size >= SHM_RING_MIN && h.ring_size <= SHM_RING_MAX);
        FUZZ_REQUIRE((h.ring_size & (h.ring_size - 1)) == 0 && h.win_size <= SHM_WIN_MAX);
        FUZZ_REQUIRE(h.seg_size == shm_seg_size(h.nslots, h.ring_size, h.win_size));
        FUZZ_REQUIRE(memchr(h.name, '\0', sizeof(h.name)) != NULL);
    }
}

static void fuzz_seg(const uint8_t *p, size_t n)
{
    struct coll_tp_ctx ctx = fuzz_ctx();
    shm_seg_hdr_t      hdr;
    shm_handle_t       h;
    shm_seg_t          seg;
    if (n < sizeof(hdr) + sizeof(h)) {
        return;
    }
    memcpy(&hdr, p, sizeof(hdr));
    memcpy(&h, p + sizeof(hdr), sizeof(h));
    memset(&seg, 0, sizeof(seg));
    seg.hdr = &hdr;
    snprintf(seg.name, sizeof(seg.name), "/fuzz");
    if (shm_seg_check_mapped(&ctx, &seg, &h, 2) == COLL_OK) {
        FUZZ_REQUIRE(hdr.job_tag == ctx.job_tag && hdr.comm_id == ctx.comm_id && hdr.rank == 2);
        FUZZ_REQUIRE(hdr.seg_size == h.seg_size && hdr.ring_size == h.ring_size);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) {
        return 0;
    }
    switch (data[0] % 3) {
    case 0:
        fuzz_ring(data + 1, size - 1);
        break;
    case 1:
        fuzz_handle(data + 1, size - 1);
        break;
    default:
        fuzz_seg(data + 1, size - 1);
        break;
    }
    return 0;
}
