#!/bin/sh
# SPDX-License-Identifier: MIT
# Run by check-rdma.sh inside the Soft-RoCE VM, in the build tree: the ib transport's GPUDirect
# RDMA decision (ib_gdr.c). rxe imports no dma-buf and the VM has no nvidia_peermem, so every
# rank must say why it has none (the reason of this build: no CUDA, the provider, rendezvous
# off, or COLL_IB_GDR=0), COLL_IB_GDR=1 must warn and still run, and calls must work either way.
# Then COLL_IB_GDR=host (host memory standing in for device memory): an all-gather sweep and a
# broadcast sweep must take the device-memory path on every rank (each registers its large
# messages, none fails; short ones are copied through the slots), with correct results.
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
    name=$1 pat=$2 ranks=2
    shift 2
    out=$(env "$@" COLL_TRANSPORT=ib COLL_DEBUG=info COLL_DEBUG_SUBSYS=IB timeout 120 \
        ./collrun -n 2 ./collbench -b 64k -e 64k -n 2 -w 1 2>&1)
    checked
}
checked() { # right after out=$(...): its exit status; every one of $ranks ranks says $pat
    rc=$?
    n=$(echo "$out" | grep -c "$pat")
    if [ $rc = 0 ] && [ "$n" = "$ranks" ] && echo "$out" | grep -q "Out of bounds values : 0 OK"; then
        echo "PASS: $name: the ranks say \"$pat\", results correct"
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
# host memory standing in: every size from 8 bytes (copied) to 1 MiB (registered), both sides
for c in allgather broadcast; do
    pat="GPUDirect RDMA on rxe0: host memory standing in for device memory"
    name="COLL_IB_GDR=host $c" ranks=3
    out=$(COLL_IB_GDR=host COLL_TRANSPORT=ib COLL_DEBUG=info COLL_DEBUG_SUBSYS=IB timeout 300 \
        ./collrun -n 3 ./collbench -C $c -b 8 -e 1M -f 4 -n 3 -w 1 -c 1 2>&1)
    checked
    # one line per rank (a rank that did nothing prints none): registrations, failures, copies
    regs=$(echo "$out" | sed -n 's/.*GPUDirect RDMA: \([0-9]*\) registrations of device memory, \([0-9]*\) failed; \([0-9]*\) sends copied.*/\1 \2 \3/p')
    if [ $rc = 0 ] && [ "$(echo "$regs" | grep -c .)" = 3 ] &&
        echo "$regs" | awk '$1 == 0 || $2 != 0 { bad = 1 } { c += $3 } END { exit bad || c == 0 }'; then
        echo "PASS: $name: registrations on every rank, none failed, copies (per rank:" \
            "registrations failures copies) $(echo "$regs" | tr '\n' ',')"
        pass=$((pass + 1))
    else
        echo "FAIL: $name: exit $rc; per rank (registrations failures copies): $regs"
        fail=$((fail + 1))
    fi
done
echo "$pass passed, $fail failed"
[ $fail = 0 ]
