#!/bin/sh
# SPDX-License-Identifier: MIT
# make check-rdma: boots a throw-away qemu VM with a Soft-RoCE device (rdma_rxe on Debian's own
# kernel, emulated CPU: see tests/rdma/run-in-rxe-vm.sh) over this machine's root file system and
# runs the multi-process correctness matrix over the ib transport inside it: every collective,
# send/recv, and the failure tests (a killed rank reported by the survivors, an abort, a silent
# rank, garbage on the bootstrap port), each with the QPs connected by rdma_cm and by the
# bootstrap path (COLL_IB_CM), plus gid_error: a GID index the port does not have must stop
# communicator creation with an error naming COLL_IB_GID_INDEX, the device and its GID count,
# gdr_probe: each rank's GPUDirect RDMA decision and its reason (rxe has none), and mixed_offer:
# hosts that offer different transports (one rank without ib) pair up on what both offer;
# then (RDMA_TWO_NODE=1, the default) two VMs wired together run one rank each with either
# connection manager (tests/rdma/two_node.sh), so packets cross between two GIDs.
# Prints one line per run; exits 1 on a failure, 77 when the VM cannot be had here (qemu or
# busybox missing, or the VM did not boot). RDMA_TESTS picks programs (NAME runs with every
# COLL_IB_CM in RDMA_CMS, NAME@CM with that one; NAME+rndv sets COLL_IB_RNDV_MIN=1, so that
# every message goes by rendezvous: test_failures+rndv kills ranks amid RDMA READs; NAME+gdrhost
# sets COLL_IB_GDR=host, host memory standing in for device memory; ucx/NAME runs
# NAME over the ucx transport on UCX's rc_verbs, tcp carrying only its wireup and keepalive, where
# libcoll has UCX); the emulated CPU makes the whole matrix take 15 to 40 minutes, as loaded as
# the host is (README).
set -u
top=$(pwd)
src=$(cd "${srcdir:-$(dirname "$0")/../..}" && pwd)
if ! grep -q "define HAVE_IBVERBS 1" "$top/config.h" 2>/dev/null; then
    echo "check-rdma: libcoll was built without libibverbs (libibverbs-dev)"
    exit 77
fi
for p in qemu-system-x86_64 busybox cpio; do
    command -v "$p" >/dev/null 2>&1 || {
        echo "check-rdma: $p is missing: apt-get install -y qemu-system-x86 busybox-static cpio kmod ibverbs-providers"
        exit 77
    }
done
cms=${RDMA_CMS:-"rdmacm bootstrap"}
grep -q "define HAVE_RDMACM 1" "$top/config.h" || cms=$(echo "$cms" | sed 's/rdmacm//')
names=${RDMA_TESTS:-"test_allreduce test_reduce_scatter test_allgather test_broadcast test_reduce test_alltoall test_p2p test_failures test_failures+rndv test_p2p+gdrhost test_allgather+gdrhost test_broadcast+gdrhost test_alltoall+gdrhost gid_error gdr_probe mixed_offer ucx/test_p2p ucx/test_alltoall ucx/test_broadcast ucx/test_allgather ucx/test_failures"}
tests=
for t in $names; do
    case $t in
    gid_error | gdr_probe | mixed_offer) tests="$tests $t" ;;
    ucx/*) grep -q "define HAVE_UCX 1" "$top/config.h" && tests="$tests $t" ;;
    *@rdmacm) case $cms in *rdmacm*) tests="$tests $t" ;; esac ;;
    *@*) tests="$tests $t" ;;
    *) for c in $cms; do tests="$tests $t@$c"; done ;;
    esac
done
# The VM sees this machine's / read-only and its /tmp is its own: share the build tree itself
# (read-write, at its own path) and keep the run's files in it.
work=$top/rdma-run
rm -rf "$work"
mkdir -p "$work"
cat > "$work/matrix.sh" <<EOS
cd "$top" || exit 2
ibv_devinfo -d rxe0 | grep -E "hca_id|state|link_layer" | sed 's/^/check-rdma: /'
fail=0
for t in $tests; do
    s=\$(date +%s)
    log=$work/\$(echo \$t | tr / -).log
    if [ \$t = gid_error ] || [ \$t = gdr_probe ] || [ \$t = mixed_offer ]; then
        sh "$src/tests/rdma/\$t.sh" > \$log 2>&1
    elif [ "\${t#ucx/}" != \$t ]; then # UCX's rc_verbs on rxe0 (its tcp only for wireup)
        UCX_TLS=rc_verbs,tcp,self UCX_NET_DEVICES=rxe0:1,eth0 UCX_LOG_LEVEL=fatal \\
            COLL_TEST_TRANSPORTS=ucx COLL_DEBUG=none timeout 900 ./tests/mp/\${t#ucx/} > \$log 2>&1
    else
        p=\${t%@*} rndv=64k gdr=auto
        while :; do
            case \$p in
            *+rndv) p=\${p%+rndv} rndv=1 ;;
            *+gdrhost) p=\${p%+gdrhost} gdr=host ;;
            *) break ;;
            esac
        done
        COLL_IB_CM=\${t#*@} COLL_IB_RNDV_MIN=\$rndv COLL_IB_GDR=\$gdr COLL_TEST_TRANSPORTS=ib \\
            COLL_DEBUG=none timeout 900 ./tests/mp/\$p > \$log 2>&1
    fi
    rc=\$?
    over=ib
    [ "\${t#ucx/}" != \$t ] && over="ucx (rc_verbs)"
    echo "check-rdma: \$t over \$over: \$(grep -E 'passed|failed' \$log | tail -1) (exit \$rc, \$(( \$(date +%s) - s )) s)"
    [ \$rc = 0 ] || { grep -E "^FAIL|assert" \$log | head -5; fail=1; }
done
grep -h "^PASS: kill" $work/test_failures@*.log 2>/dev/null | sed 's/^/check-rdma: /'
grep -h "^PASS: COLL_IB_GDR=host" $work/gdr_probe.log 2>/dev/null | sed 's/^/check-rdma: /'
exit \$fail
EOS
start=$(date +%s)
bash "$src/tests/rdma/run-in-rxe-vm.sh" --timeout "${RDMA_TIMEOUT:-5400}" "$top" "sh $work/matrix.sh" \
    >"$work/vm.log" 2>&1
vm=$?
grep "check-rdma:\|^FAIL\|assert" "$work/vm.log"
two=0
if [ "${RDMA_TWO_NODE:-1}" = 1 ] && [ $vm != 125 ]; then
    bash "$src/tests/rdma/run-in-rxe-vm.sh" --nodes 2 --smp 1 --timeout 900 "$top" \
        "sh $src/tests/rdma/two_node.sh $work" >"$work/vm2.log" 2>&1
    two=$?
    grep "check-rdma:" "$work/vm2.log"
    [ $two = 0 ] || grep -h "ERROR\|FAIL" "$work"/two_node-*.log | head -5
fi
echo "check-rdma: finished in $(($(date +%s) - start)) s"
if [ $vm = 125 ]; then
    tail -5 "$work/vm.log"
    echo "check-rdma: the Soft-RoCE VM could not be brought up here"
    rm -rf "$work"
    exit 77
fi
ok=0
[ $two = 0 ] || ok=1
for t in $tests; do
    grep -qE "^[0-9]+ passed, 0 failed" "$work/$(echo "$t" | tr / -).log" 2>/dev/null || ok=1
done
rm -rf "$work"
exit $ok
