#!/bin/sh
# SPDX-License-Identifier: MIT
# Run by check-rdma.sh in each of two Soft-RoCE VMs wired together (run-in-rxe-vm.sh --nodes 2),
# in the build tree: one rank per VM, so RoCE v2 packets cross between two rxe devices with
# different GIDs. A checked all-reduce sweep over ib with the QPs connected by each COLL_IB_CM
# built in; the log of each run goes to OUT (the first argument). Exits 1 when a run fails.
out=${1:-rdma-run}
cms=bootstrap
grep -q "define HAVE_RDMACM 1" config.h && cms="rdmacm bootstrap"
fail=0
port=29517
for cm in $cms; do
    COLL_RANK=$RXE_NODE COLL_NRANKS=2 COLL_LOCAL_RANK=0 COLL_LOCAL_NRANKS=1 \
        COLL_ROOT_ADDR=10.0.2.15:$port COLL_JOB_SECRET=00112233445566778899aabbccddeeff \
        COLL_TRANSPORT=ib COLL_IB_CM=$cm COLL_DEBUG=info COLL_DEBUG_SUBSYS=IB timeout 300 \
        ./collbench -b 8 -e 4M -f 8 -n 3 -w 1 >"$out/two_node-$RXE_NODE-$cm.log" 2>&1
    rc=$?
    echo "check-rdma: two hosts, node $RXE_NODE, COLL_IB_CM=$cm: exit $rc"
    [ $rc = 0 ] || fail=1
    port=$((port + 1)) # a fresh root port: no wait on the last one's TIME_WAIT
done
exit $fail
