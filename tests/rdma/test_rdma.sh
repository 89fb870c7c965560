#!/bin/sh
# SPDX-License-Identifier: MIT
# The default suite's part of make check-rdma: send/recv, all-to-all, broadcast and the failure
# tests over the ib transport in the Soft-RoCE VM (about 4 minutes). Skipped (77) where the VM
# cannot run (no qemu, no busybox, or it does not boot).
RDMA_TESTS="test_p2p test_alltoall test_broadcast test_failures" \
    exec "$(cd "${srcdir:-$(dirname "$0")/../..}" && pwd)/tests/rdma/check-rdma.sh"
