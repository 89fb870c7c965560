/* SPDX-License-Identifier: MIT */
/*
 * Registered buffers (src/api/register.c), as the direct path (src/engine/direct.c) reads them.
 */
#ifndef COLL_API_REGISTER_H
#define COLL_API_REGISTER_H

#include <stddef.h>
#include <stdint.h>
#include "coll.h"

struct coll_reg {
    uint32_t     magic;
    coll_comm_t *comm;
    int          num; /* registration number, alike on every rank */
    char        *buf; /* this rank's */
    size_t       bytes;
    char       **at;  /* by rank: where its registered buffer is mapped here (read and write) */
    size_t      *len; /* by rank: bytes it registered */
    void       **map; /* by rank: the mapping of a peer's buffer, to unmap */
    size_t      *map_len;
    const void  *held; /* the coll_mem_alloc allocation held (coll_mem_release) */
};

/* Is [ptr, ptr + bytes) inside one of comm's live registrations (of this rank)? 1 with its
 * number and the offset of ptr in it. comm locked. */
int coll_reg_find(const coll_comm_t *comm, const void *ptr, size_t bytes, int32_t *num_p,
                  uint64_t *off_p);
/* At destroy: unmap and free every registration. */
void coll_reg_free_all(coll_comm_t *comm);

#endif
