#!/bin/sh
# SPDX-License-Identifier: MIT
#
# test_ctrain_ckpt.sh -- kill -9 and resume: 4 ranks checkpoint every 5 steps, the last rank
# SIGKILLs itself at step 13 (--kill-at); collrun must report the failure; the same command
# rerun resumes from step 10 and the loss curve (train and validation losses, lr, grad norm)
# must equal the uninterrupted run's bit for bit. Then the newest checkpoint is corrupted
# (one byte flipped): the rerun must detect it, use the previous one and again reproduce the
# curve. The same with top-k compression (whose residuals are checkpointed per rank) and with ZeRO-2 (the library's checksummed shards), whose last checkpoint
# then resumes on 3 ranks. Exit 0 pass, 1 fail, 99 harness error.
srcdir=${srcdir:-.}
CTRAIN=${top_builddir:-.}/ctrain
COLLRUN=${COLLRUN:-${top_builddir:-.}/collrun}
[ -x "$CTRAIN" ] && [ -x "$COLLRUN" ] || { echo "test_ctrain_ckpt: ctrain/collrun not built" >&2; exit 99; }
T=$(mktemp -d "${TMPDIR:-/tmp}/test_ctrain_ckpt.XXXXXX") || exit 99
trap 'rm -rf "$T"' EXIT
A="--data $srcdir/tests/ctrain/moby_dick_200k.txt --steps 20 --warmup 3 --eval-every 5 --layers 2 --channels 32 --heads 4 --seqlen 32 --batch 2 --deterministic"
K="--ckpt-dir $T/ckpt --ckpt-every 5 --resume --kill-at 13"
nfail=0
fail() { echo "FAIL: $*"; nfail=$((nfail + 1)); }
same_curve() { # columns step..grad_norm (step_s is a timing)
    cut -d, -f1-5 "$T/ref.csv" >"$T/a" && cut -d, -f1-5 "$T/run.csv" >"$T/b"
    if cmp -s "$T/a" "$T/b" && [ "$(wc -l <"$T/a")" -eq 21 ]; then
        echo "$1: loss curve identical to the uninterrupted run (20 steps)"
    else
        fail "$1: loss curve differs"; diff "$T/a" "$T/b" | head -5
    fi
}
# kill_resume NAME "ctrain args" CKPTDIR DIRPREFIX SHARD2 "corruption message": reference run,
# kill -9 of rank 3 at step 13, resume from step 10, then a flipped byte in rank 2's shard of
# step 20 and a resume from step 15; both curves must equal the reference bit for bit.
kill_resume() {
    name=$1 args=$2 dir=$3 pre=$4 shard=$5 msg=$6
    k="--ckpt-dir $dir --ckpt-every 5 --resume --kill-at 13"
    "$COLLRUN" -n 4 "$CTRAIN" $args --csv "$T/ref.csv" >"$T/ref.out" 2>&1 || { cat "$T/ref.out"; fail "$name: reference run"; }
    "$COLLRUN" -n 4 "$CTRAIN" $args $k --csv "$T/run.csv" >"$T/kill.out" 2>&1
    rc=$?
    [ $rc -ne 0 ] && grep -q "collrun: .*rank 3, signal 9" "$T/kill.out" || { cat "$T/kill.out"; fail "$name: killed run: status $rc, collrun did not report rank 3 killed"; }
    [ -f "$dir/${pre}00000010/manifest" ] && [ ! -d "$dir/${pre}00000015" ] || fail "$name: expected checkpoints 5 and 10 only"
    "$COLLRUN" -n 4 "$CTRAIN" $args $k --csv "$T/run.csv" >"$T/resume.out" 2>&1 || { cat "$T/resume.out"; fail "$name: resumed run"; }
    grep -q "resumed from .*${pre}00000010" "$T/resume.out" || fail "$name: did not resume from step 10"
    same_curve "$name: kill -9 at step 13, resume"
    f="$dir/${pre}00000020/$shard" # flip one byte in the middle of a shard
    [ -f "$f" ] || fail "$name: no checkpoint at step 20"
    size=$(wc -c <"$f")
    printf '\377' | dd of="$f" bs=1 seek=$((size / 2)) conv=notrunc 2>/dev/null
    "$COLLRUN" -n 4 "$CTRAIN" $args $k --csv "$T/run.csv" >"$T/corrupt.out" 2>&1 || { cat "$T/corrupt.out"; fail "$name: run after corruption"; }
    grep -q "$msg" "$T/corrupt.out" || fail "$name: corruption not detected"
    grep -q "resumed from .*${pre}00000015" "$T/corrupt.out" || fail "$name: did not fall back to step 15"
    same_curve "$name: corrupt newest checkpoint, fall back"
}
kill_resume DDP "$A" "$T/ckpt" step- shard-2-of-4.bin "step-00000020: shard 2 is corrupt"
# top-k 1% with DGC's momentum correction and warm-ups: each rank's compressor state (residual,
# velocity, step count) goes into extra-R-of-N.bin, so the resumed curve is exact too
kill_resume "top-k 1%" "$A --compress topk:0.01 --compress-warmup 2 --sparsity-warmup 5 --topk-momentum 0.9" "$T/cckpt" step- shard-2-of-4.bin "step-00000020: shard 2 is corrupt"
# ZeRO-2: the library's sharded checkpoints (checksummed shards, a manifest), saved
# synchronously into zero-step-N; then the last one resumes on 3 ranks, re-sharded
AZ="$A --zero 2"
kill_resume ZeRO-2 "$AZ" "$T/zckpt" zero-step- rank-00002.bin "zero-step-00000020 unusable (.*checksum mismatch"
"$COLLRUN" -n 3 "$CTRAIN" $AZ --ckpt-dir "$T/zckpt" --resume --steps 25 >"$T/three.out" 2>&1 || { cat "$T/three.out"; fail "ZeRO resume on 3 ranks"; }
grep -q "resumed from .*zero-step-00000020" "$T/three.out" && grep -q "^step   25/25 " "$T/three.out" &&
    echo "ZeRO-2: the 4-rank checkpoint of step 20 resumed on 3 ranks to step 25" || fail "ZeRO: no resume on 3 ranks"
echo "test_ctrain_ckpt: $nfail failure(s)"
[ $nfail -eq 0 ]
