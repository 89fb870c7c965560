#!/bin/sh
# SPDX-License-Identifier: MIT
# Single-copy (COLL_SHM_CMA_MIN=64k, the default) against ring-only shm transfers
# (COLL_SHM_CMA_MIN=0): collbench runs interleaved A B A B ... for ROUNDS rounds, 2 ranks, float
# sum, and the median busbw of each (out-of-place and in-place) per size (bench/env_ab.sh).
# Usage (from the build tree): bench/shm_cma_compare.sh [ROUNDS] [COLLS] [MIN] [MAX]
set -eu
exec "$(dirname "$0")/env_ab.sh" COLL_SHM_CMA_MIN 0 64k "${1:-3}" \
    "${2:-allreduce allgather reduce_scatter}" "${3:-64K}" "${4:-256M}"
