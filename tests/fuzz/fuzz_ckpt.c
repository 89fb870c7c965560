/* SPDX-License-Identifier: MIT */
/*
 * Checkpoint shards as read back from disk: the header and segment table of a ZeRO shard file
 * (any bytes may be there after a crash or by accident), for a model of 4096 elements with two
 * optimizer states.
 */
#include "fuzz.h"
#include "train/zero.h"
#include "util.h"

#include <string.h>

#define NELEMS 4096u
#define NSTATE 2u

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    coll_zero_ckpt_header_t h;
    coll_zero_ckpt_seg_t   *segs = NULL;
    char                    why[256];
    FILE                   *f;

    if (size == 0) {
        return 0;
    }
    f = fmemopen((void *)data, size, "rb");
    if (f == NULL) {
        return 0;
    }
    if (coll_zero_ckpt_read_table(f, size, NSTATE, NELEMS, &h, &segs, why, sizeof(why)) ==
        COLL_OK) {
        uint64_t bytes = sizeof(h) + h.nseg * sizeof(*segs);
        FUZZ_REQUIRE(h.magic == COLL_ZERO_CKPT_MAGIC && h.rank < h.nranks);
        for (uint64_t s = 0; s < h.nseg; s++) {
            FUZZ_REQUIRE(segs[s].gstart + segs[s].len <= NELEMS);
            bytes += (NSTATE + 1) * segs[s].len * sizeof(float);
        }
        FUZZ_REQUIRE(bytes <= size);
        coll_free(segs);
    } else {
        FUZZ_REQUIRE(segs == NULL && strlen(why) > 0);
    }
    fclose(f);
    return 0;
}
