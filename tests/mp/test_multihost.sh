#!/bin/sh
# SPDX-License-Identifier: MIT
# Several emulated hosts on one machine (COLL_HOSTID per rank, set by the harness from
# COLL_TEST_RANKS_PER_HOST, or COLL_TEST_INTERLEAVE_HOSTS): every collective's correctness matrix with automatic transport
# choice, so each communicator mixes shm (within a host) and tcp (between hosts), including
# hosts with different rank counts (5 ranks, 2 per host).
set -u
top_builddir=${top_builddir:-.}
pass=0
fail=0
# run_case VAR=VALUE WHAT COLL N: one collective's matrix with the emulated hosts VAR sets.
run_case() {
    log=$(mktemp /tmp/collmh.XXXXXX)
    if env "$1" COLL_TEST_TRANSPORTS=auto "$top_builddir/tests/mp/test_$3" -n "$4" >"$log" 2>&1; then
        pass=$((pass + 1)); echo "PASS: $3, $4 ranks, $2 (shm + tcp)"
    else
        fail=$((fail + 1)); echo "FAIL: $3, $4 ranks, $2"; cat "$log"
    fi
    rm -f "$log"
}
for t in allreduce reduce_scatter allgather broadcast reduce alltoall; do
    for n in 4 5; do
        run_case COLL_TEST_RANKS_PER_HOST=2 "on 2-rank hosts" "$t" "$n"
    done
done
# Interleaved hosts (rank r on host r mod 2): the topology ring order makes the rings visit a
# host's ranks together, a non-identity order over the real transports.
for t in allreduce reduce_scatter allgather broadcast reduce; do
    for n in 4 5; do
        run_case COLL_TEST_INTERLEAVE_HOSTS=2 "rank r on host r mod 2" "$t" "$n"
    done
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
