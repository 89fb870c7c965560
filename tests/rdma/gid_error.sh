#!/bin/sh
# SPDX-License-Identifier: MIT
# Run by check-rdma.sh inside the Soft-RoCE VM, in the build tree: a GID index that rxe0's port
# does not have (an empty entry of its table, or past its end) must stop communicator creation,
# with either connection manager, with an error naming COLL_IB_GID_INDEX, the device, its port
# and how many GIDs it has.
pass=0
fail=0
cms=bootstrap
grep -q "define HAVE_RDMACM 1" config.h && cms="rdmacm bootstrap"
for cm in $cms; do
    for idx in 999 70000; do
        out=$(COLL_TRANSPORT=ib COLL_IB_CM=$cm COLL_IB_GID_INDEX=$idx timeout 120 \
            ./collrun -n 2 ./collbench -b 8 -e 8 -n 1 -w 0 2>&1)
        rc=$?
        if [ $rc != 0 ] && [ $rc != 124 ] && echo "$out" |
            grep -q "COLL_IB_GID_INDEX=$idx is not a GID of device rxe0 port 1: .* has [0-9]* GIDs in use"; then
            echo "PASS: COLL_IB_CM=$cm COLL_IB_GID_INDEX=$idx fails (exit $rc) naming the GID count"
            pass=$((pass + 1))
        else
            echo "FAIL: COLL_IB_CM=$cm COLL_IB_GID_INDEX=$idx: exit $rc, without the expected error:"
            echo "$out" | tail -5
            fail=$((fail + 1))
        fi
    done
done
echo "$pass passed, $fail failed"
[ $fail = 0 ]
