#!/bin/sh
# SPDX-License-Identifier: MIT
# coll_init bootstraps from each launcher's environment: collbench (an MPI-style program) runs
# under Open MPI's mpirun, under torchrun-style variables and under Slurm-style variables
# (processes started by hand with what those launchers export), and checks its results.
set -u
top_builddir=${top_builddir:-.}
bench=$top_builddir/collbench
pass=0
fail=0
skip=0
tmp=$(mktemp -d /tmp/colllaunch.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
# shellcheck source=tests/tools/ports_lib.sh
. "$(dirname "$0")/ports_lib.sh"
# A MASTER_PORT for torchrun-style variables: rank 0 listens on MASTER_PORT + 1
# (COLL_BOOTSTRAP_PORT_OFFSET), only once it runs, so both must be free.
check() { # name status logfile
    if [ "$2" -eq 0 ] && grep -q "Out of bounds values : 0 OK" "$3"; then
        pass=$((pass + 1)); echo "PASS: $1"
    else
        fail=$((fail + 1)); echo "FAIL: $1 (status $2)"; cat "$3"
    fi
}
# by hand: N processes with per-rank variables given by a function
launch() { # name n setvars-function
    name=$1; n=$2; fn=$3; pids=""
    r=0
    while [ $r -lt "$n" ]; do
        ( $fn $r; exec "$bench" -b 1K -e 256K -f 4 -o all -d float ) >"$tmp/$name.$r" 2>&1 &
        pids="$pids $!"
        r=$((r + 1))
    done
    st=0
    for p in $pids; do wait "$p" || st=$?; done
    cat "$tmp/$name".* >"$tmp/$name.all"
    check "$name" "$st" "$tmp/$name.all"
}
MPORT=$(free_ports 2)
torch_vars() { export RANK=$1 WORLD_SIZE=3 LOCAL_RANK=$1 LOCAL_WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=$MPORT; }
launch torchrun-env 3 torch_vars
SJOB=$(( $$ % 100000 ))
slurm_vars() { export SLURM_PROCID=$1 SLURM_NTASKS=2 SLURM_LOCALID=$1 SLURM_JOB_ID=$SJOB SLURM_STEP_ID=0 SLURM_NODELIST=localhost; }
launch slurm-env 2 slurm_vars
if command -v mpirun >/dev/null 2>&1 && mpirun --version 2>/dev/null | grep -q "Open MPI"; then
    timeout 120 mpirun --allow-run-as-root --oversubscribe -np 3 "$bench" -b 1K -e 256K -f 4 \
        >"$tmp/mpirun" 2>&1
    check "mpirun (Open MPI)" $? "$tmp/mpirun"
else
    skip=$((skip + 1)); echo "SKIP: mpirun (Open MPI) not installed"
fi
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
