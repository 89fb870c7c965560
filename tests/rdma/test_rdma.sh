#!/bin/sh
# SPDX-License-Identifier: MIT
# The default suite's part of make check-rdma, in the Soft-RoCE VM (about 3 minutes): send/recv
# and the failure tests over the ib transport with the QPs connected both by rdma_cm and by the
# bootstrap path (COLL_IB_CM), all-to-all with the one and broadcast with the other, the failure
# tests again with every message by rendezvous (RDMA READ) over rdma_cm, a bad
# COLL_IB_GID_INDEX, the GPUDirect RDMA probe (gdr_probe.sh), ranks of hosts that offer different
# transports (mixed_offer.sh), send/recv and all-to-all on the
# device-memory path with host memory standing in (COLL_IB_GDR=host), and send/recv over the ucx
# transport on UCX's rc_verbs (where built); not
# the two-VM run (make check-rdma has it). Skipped (77) where the VM cannot run (no qemu, no
# busybox, or it does not boot).
RDMA_TWO_NODE=0 RDMA_TESTS="test_p2p test_alltoall@rdmacm test_broadcast@bootstrap test_failures test_failures+rndv@rdmacm test_p2p+gdrhost@rdmacm test_alltoall+gdrhost@bootstrap gid_error gdr_probe mixed_offer ucx/test_p2p" \
    exec "$(cd "${srcdir:-$(dirname "$0")/../..}" && pwd)/tests/rdma/check-rdma.sh"
