#!/bin/sh
# SPDX-License-Identifier: MIT
# Run by check-rdma.sh inside the Soft-RoCE VM, in the build tree: hosts that offer different
# transports. Three ranks, each its own host (COLL_HOSTID); rank 1's COLL_IB_HCA names no device,
# so it offers no ib. The pairs 0-2 must take ib, the pairs with rank 1 the next transport
# COLL_TRANSPORT allows. With "ib,ucx" (where UCX is built) rank 1 offers only ucx, which comes
# after ib in the registry: a handle placed by its rank's own list of transports instead of the
# registry's would be read from the wrong place. Every case all-reduces and all-gathers 1 MiB
# with checked results.
pass=0
fail=0
lists="ib,tcp"
grep -q "define HAVE_UCX 1" config.h && lists="$lists ib,ucx"
for list in $lists; do
    other=${list#ib,}
    for coll in allreduce allgather; do
        out=$(COLL_TRANSPORT=$list COLL_DEBUG=info UCX_TLS=rc_verbs,tcp,self \
            UCX_NET_DEVICES=rxe0:1,eth0 UCX_LOG_LEVEL=fatal timeout 120 \
            ./collrun -n 3 -x COLL_TRANSPORT -x COLL_DEBUG -x UCX_TLS -x UCX_NET_DEVICES \
            -x UCX_LOG_LEVEL sh -c 'export COLL_HOSTID=mixed$COLL_RANK
                [ "$COLL_RANK" = 1 ] && export COLL_IB_HCA=nosuch
                exec ./collbench -C '"$coll"' -b 1M -e 1M -n 2 -w 1 -c 1' 2>&1)
        rc=$?
        # rank 0 and rank 2: ib to one peer, the other transport to one; rank 1: the other to two
        if [ $rc = 0 ] &&
            echo "$out" | grep -q "rank 0: ib to 1 peer(s)" &&
            echo "$out" | grep -q "rank 0: $other to 1 peer(s)" &&
            echo "$out" | grep -q "rank 2: ib to 1 peer(s)" &&
            echo "$out" | grep -q "rank 1: $other to 2 peer(s)" &&
            ! echo "$out" | grep -q "rank 1: ib to"; then
            echo "PASS: COLL_TRANSPORT=$list $coll, rank 1 without ib: ib between 0 and 2, $other with 1, results checked"
            pass=$((pass + 1))
        else
            echo "FAIL: COLL_TRANSPORT=$list $coll, rank 1 without ib: exit $rc"
            echo "$out" | grep -E "peer\(s\)|ERROR|wrong|collrun" | head -12
            fail=$((fail + 1))
        fi
    done
done
echo "$pass passed, $fail failed"
[ $fail = 0 ]
