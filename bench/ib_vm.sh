#!/bin/sh
# SPDX-License-Identifier: MIT
# collbench over the ib transport (QPs by rdma_cm and by the bootstrap path) next to tcp, two
# ranks in the Soft-RoCE VM: all-reduce and all-gather, 8 B .. 16 MiB, the configurations
# interleaved over ROUNDS rounds. CONFIGS picks them: TRANSPORT[-CM][-copy], where -copy sets
# COLL_IB_RNDV_MIN=0 (every message copied through the slot rings, no rendezvous) and -nocache
# COLL_IB_REG_CACHE=0 (rendezvous buffers registered and deregistered per message), e.g.
# CONFIGS="ib-rdmacm ib-rdmacm-copy ib-rdmacm-nocache tcp"; MINB sets the smallest size (8). Run from the build tree (after make):
#   bash tests/rdma/run-in-rxe-vm.sh --timeout 1800 "$PWD" "sh bench/ib_vm.sh rdma-run/bench"
# Writes OUT/<coll>-<config>-<round>.txt (collbench's table) and OUT/vm.txt (kernel, device).
# Soft-RoCE is the CPU emulating a NIC: the figures say nothing about real RDMA hardware.
out=${1:-rdma-run/bench}
rounds=${ROUNDS:-2}
mkdir -p "$out"
{
    uname -r
    ibv_devinfo -d rxe0 | grep -E "hca_id|fw_ver|active_mtu|link_layer"
    grep -m1 "model name" /proc/cpuinfo
    nproc
} >"$out/vm.txt" 2>&1
for r in $(seq 1 "$rounds"); do
    for coll in allreduce allgather; do
        for cfg in ${CONFIGS:-ib-rdmacm ib-bootstrap tcp}; do
            tp=${cfg%%-*}
            cm=$(echo "$cfg" | cut -d- -f2)
            [ "$tp" = tcp ] && cm=auto
            rndv=64k cache=1
            case $cfg in *-copy) rndv=0 ;; *-nocache) cache=0 ;; esac
            COLL_TRANSPORT=$tp COLL_IB_CM=$cm COLL_IB_RNDV_MIN=$rndv COLL_IB_REG_CACHE=$cache \
                timeout 600 \
                ./collrun -n 2 ./collbench -C "$coll" \
                -b "${MINB:-8}" -e 16M -f 2 -n 10 -w 2 >"$out/$coll-$cfg-$r.txt" 2>&1
            echo "$coll $cfg round $r: exit $?"
        done
    done
done
