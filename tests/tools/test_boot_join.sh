#!/bin/sh
# SPDX-License-Identifier: MIT
# A job that cannot form is explained on every rank that reached the bootstrap root: ranks
# given different numbers of ranks (COLL_NRANKS under one secret, WORLD_SIZE under torchrun
# variables) all learn the two sizes at once; a WORLD_SIZE above the bootstrap's limit is
# refused as such; a rank that is never started is named by every rank that did start, also
# when the others started before rank 0 (their deadlines then pass before the root's).
set -u
top_builddir=${top_builddir:-.}
bench=$top_builddir/collbench
pass=0
fail=0
tmp=$(mktemp -d /tmp/collboot.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
# shellcheck source=tests/tools/ports_lib.sh
. "$(dirname "$0")/ports_lib.sh"
expect() { # name file status pattern...: a non-zero status and every pattern in the file
    _name=$1; _f=$2; _st=$3; shift 3
    _ok=1
    [ "$_st" -ne 0 ] || _ok=0
    for _pat in "$@"; do
        grep -q -- "$_pat" "$_f" || _ok=0
    done
    if [ $_ok -eq 1 ]; then
        pass=$((pass + 1)); echo "PASS: $_name"
    else
        fail=$((fail + 1)); echo "FAIL: $_name (status $_st; expected: $*)"; cat "$_f"
    fi
}
run_rank() { # out-file env...: collbench with the environment given, bounded in time
    _out=$1; shift
    env COLL_BOOTSTRAP_TIMEOUT=3 "$@" timeout 60 "$bench" -b 4 -e 4 >"$_out" 2>&1
}
run_pair() { # name env-of-rank-0 env-of-rank-1: both at once into $tmp/name0, name1; s0, s1
    # shellcheck disable=SC2086 # the environments are lists of words
    run_rank "$tmp/${1}0" $2 &
    _p0=$!
    # shellcheck disable=SC2086
    run_rank "$tmp/${1}1" $3 &
    _p1=$!
    wait $_p0; s0=$?
    wait $_p1; s1=$?
}
sizes="the ranks disagree on the number of ranks"
P=$(free_ports 6) # one pair per case, so that no case meets another's TIME_WAIT

# ---- COLL_NRANKS 2 and 3 under one secret: both learn the two sizes ----
C="COLL_ROOT_ADDR=127.0.0.1:$P COLL_JOB_SECRET=00112233445566778899aabbccddeeff"
run_pair n "$C COLL_RANK=0 COLL_NRANKS=2" "$C COLL_RANK=1 COLL_NRANKS=3"
expect "COLL_NRANKS 2 vs 3: rank 0 told" "$tmp/n0" $s0 "$sizes" "given 2" "given 3"
expect "COLL_NRANKS 2 vs 3: rank 1 told" "$tmp/n1" $s1 "$sizes" "given 2" "given 3"

# ---- WORLD_SIZE 2 and 3 (torchrun variables): the sizes, not the secret, are blamed ----
T="MASTER_ADDR=127.0.0.1 MASTER_PORT=$((P + 1))" # rank 0 listens on MASTER_PORT + 1
run_pair w "$T RANK=0 WORLD_SIZE=2" "$T RANK=1 WORLD_SIZE=3"
expect "WORLD_SIZE 2 vs 3: rank 0 told" "$tmp/w0" $s0 "$sizes"
expect "WORLD_SIZE 2 vs 3: rank 1 told" "$tmp/w1" $s1 "$sizes"

# ---- a WORLD_SIZE beyond the bootstrap's limit ----
for ws in 2000000 2147483647; do
    run_rank "$tmp/big" MASTER_ADDR=127.0.0.1 MASTER_PORT=$((P + 3)) RANK=0 WORLD_SIZE=$ws
    expect "WORLD_SIZE=$ws refused" "$tmp/big" $? "invalid argument" "at most 1048576"
done

# ---- WORLD_SIZE=3, rank 2 never started, rank 1 started before rank 0 ----
T="MASTER_ADDR=127.0.0.1 MASTER_PORT=$((P + 4)) WORLD_SIZE=3"
run_rank "$tmp/m1" $T RANK=1 &
p1=$!
sleep 1
run_rank "$tmp/m0" $T RANK=0 &
p0=$!
wait $p0; s0=$?
wait $p1; s1=$?
expect "rank 2 never started: rank 0 names it" "$tmp/m0" $s0 "rank 2 never joined"
expect "rank 2 never started: rank 1 names it" "$tmp/m1" $s1 "rank 2 never joined"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
