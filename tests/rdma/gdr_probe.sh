#!/bin/sh
# SPDX-License-Identifier: MIT
# Run by check-rdma.sh inside the Soft-RoCE VM, in the build tree: the ib transport's GPUDirect
# RDMA decision (ib_gdr.c). rxe imports no dma-buf and the VM has no nvidia_peermem, so every
# rank must say why it has none (the reason of this build: no CUDA, the provider, rendezvous
# off, or COLL_IB_GDR=0), COLL_IB_GDR=1 must warn and still run, and calls must work either way.
pass=0
fail=0
if grep -q "define HAVE_CUDA 1" config.h; then
    auto="the provider imports no dma-buf and nvidia_peermem is not loaded"
    norndv="rendezvous is off"
else
    auto="libcoll was built without CUDA"
    norndv=$auto
fi
check() { # NAME PATTERN ENV...
    name=$1 pat=$2
    shift 2
    out=$(env "$@" COLL_TRANSPORT=ib COLL_DEBUG=info COLL_DEBUG_SUBSYS=IB timeout 120 \
        ./collrun -n 2 ./collbench -b 64k -e 64k -n 2 -w 1 2>&1)
    rc=$?
    n=$(echo "$out" | grep -c "$pat")
    if [ $rc = 0 ] && [ "$n" -ge 2 ] && echo "$out" | grep -q "Out of bounds values : 0 OK"; then
        echo "PASS: $name: both ranks say \"$pat\", results correct"
        pass=$((pass + 1))
    else
        echo "FAIL: $name: exit $rc, $n lines with \"$pat\":"
        echo "$out" | grep -i "gpudirect\|error" | head -5
        fail=$((fail + 1))
    fi
}
check auto "no GPUDirect RDMA on rxe0: $auto"
check "COLL_IB_GDR=0" "no GPUDirect RDMA on rxe0: COLL_IB_GDR=0" COLL_IB_GDR=0
check "COLL_IB_GDR=1" "WARN.*COLL_IB_GDR=1 but no GPUDirect RDMA on rxe0: $auto" COLL_IB_GDR=1
check "COLL_IB_RNDV_MIN=0" "no GPUDirect RDMA on rxe0: $norndv" COLL_IB_RNDV_MIN=0
echo "$pass passed, $fail failed"
[ $fail = 0 ]
