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
# Six ports in a row below the kernel's ephemeral range that can be bound now (as
# test_launchers.sh does), one pair per case, so that no case meets another's TIME_WAIT.
ports_free() {
    command -v python3 >/dev/null 2>&1 || return 0
    python3 -c 'import socket, sys
for p in sys.argv[1:]:
    s = socket.socket()
    s.bind(("", int(p)))
    s.close()' "$@" 2>/dev/null
}
free_ports() { # prints the first
    _lo=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null)
    case $_lo in '' | *[!0-9]*) _lo=32768 ;; esac
    [ "$_lo" -gt 21000 ] || _lo=60000
    _p=$((20000 + $$ % (_lo - 20007)))
    _n=0
    while [ $_n -lt 200 ] && ! ports_free $(seq "$_p" $((_p + 5))); do
        _p=$((_p + 6))
        [ $_p -lt $((_lo - 6)) ] || _p=20000
        _n=$((_n + 1))
    done
    echo "$_p"
}
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
sizes="the ranks disagree on the number of ranks"
P=$(free_ports)

# ---- COLL_NRANKS 2 and 3 under one secret: both learn the two sizes ----
C="COLL_ROOT_ADDR=127.0.0.1:$P COLL_JOB_SECRET=00112233445566778899aabbccddeeff"
run_rank "$tmp/n0" $C COLL_RANK=0 COLL_NRANKS=2 &
p0=$!
run_rank "$tmp/n1" $C COLL_RANK=1 COLL_NRANKS=3 &
p1=$!
wait $p0; s0=$?
wait $p1; s1=$?
expect "COLL_NRANKS 2 vs 3: rank 0 told" "$tmp/n0" $s0 "$sizes" "given 2" "given 3"
expect "COLL_NRANKS 2 vs 3: rank 1 told" "$tmp/n1" $s1 "$sizes" "given 2" "given 3"

# ---- WORLD_SIZE 2 and 3 (torchrun variables): the sizes, not the secret, are blamed ----
T="MASTER_ADDR=127.0.0.1 MASTER_PORT=$((P + 1))" # rank 0 listens on MASTER_PORT + 1
run_rank "$tmp/w0" $T RANK=0 WORLD_SIZE=2 &
p0=$!
run_rank "$tmp/w1" $T RANK=1 WORLD_SIZE=3 &
p1=$!
wait $p0; s0=$?
wait $p1; s1=$?
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
