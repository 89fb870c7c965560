#!/bin/sh
# SPDX-License-Identifier: MIT
# The multi-process correctness matrix (every collective, send/recv, failures) over the ucx
# transport, once on UCX's TCP transport and once on its shared memory (UCX_TLS). Exits 77 when
# libcoll was built without UCX (configure did not find libucx-dev).
set -u
top=$(pwd)
if ! grep -q "define HAVE_UCX 1" "$top/config.h" 2>/dev/null; then
    echo "test_ucx: skipped: libcoll was built without UCX (install libucx-dev, rerun configure)"
    exit 77
fi
fail=0
for tls in tcp,self shm,self; do
    for t in test_allreduce test_reduce_scatter test_allgather test_broadcast test_reduce \
        test_alltoall test_p2p test_failures; do
        out=$(UCX_TLS=$tls UCX_LOG_LEVEL=fatal COLL_TEST_TRANSPORTS=ucx COLL_DEBUG=none \
            "$top/tests/mp/$t" 2>&1)
        rc=$?
        line=$(printf '%s\n' "$out" | grep -E "passed|failed" | tail -1)
        echo "test_ucx: UCX_TLS=$tls $t: ${line:-no summary} (exit $rc)"
        if [ $rc != 0 ]; then
            printf '%s\n' "$out" | grep -E "^FAIL|assertion" | head -5
            fail=1
        fi
    done
done
exit $fail
