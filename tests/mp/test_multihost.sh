#!/bin/sh
# SPDX-License-Identifier: MIT
# Several emulated hosts on one machine (COLL_HOSTID per rank, set by the harness from
# COLL_TEST_RANKS_PER_HOST): every collective's correctness matrix with automatic transport
# choice, so each communicator mixes shm (within a host) and tcp (between hosts), including
# hosts with different rank counts (5 ranks, 2 per host).
set -u
top_builddir=${top_builddir:-.}
pass=0
fail=0
for t in allreduce reduce_scatter allgather broadcast reduce alltoall; do
    for n in 4 5; do
        log=$(mktemp /tmp/collmh.XXXXXX)
        if COLL_TEST_RANKS_PER_HOST=2 COLL_TEST_TRANSPORTS=auto \
            "$top_builddir/tests/mp/test_$t" -n "$n" >"$log" 2>&1; then
            pass=$((pass + 1)); echo "PASS: $t, $n ranks on 2-rank hosts (shm + tcp)"
        else
            fail=$((fail + 1)); echo "FAIL: $t, $n ranks on 2-rank hosts"; cat "$log"
        fi
        rm -f "$log"
    done
done
# Interleaved hosts (rank r on host r mod 2): the topology ring order makes the rings visit a
# host's ranks together, a non-identity order over the real transports.
for t in allreduce reduce_scatter allgather broadcast reduce; do
    for n in 4 5; do
        log=$(mktemp /tmp/collmh.XXXXXX)
        if COLL_TEST_INTERLEAVE_HOSTS=2 COLL_TEST_TRANSPORTS=auto \
            "$top_builddir/tests/mp/test_$t" -n "$n" >"$log" 2>&1; then
            pass=$((pass + 1)); echo "PASS: $t, $n ranks, rank r on host r mod 2 (shm + tcp)"
        else
            fail=$((fail + 1)); echo "FAIL: $t, $n ranks, rank r on host r mod 2"; cat "$log"
        fi
        rm -f "$log"
    done
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
