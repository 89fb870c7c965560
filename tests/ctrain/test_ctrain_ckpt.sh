#!/bin/sh
# SPDX-License-Identifier: MIT
#
# test_ctrain_ckpt.sh -- kill -9 and resume: 4 ranks checkpoint every 5 steps, the last rank
# SIGKILLs itself at step 13 (--kill-at); collrun must report the failure; the same command
# rerun resumes from step 10 and the loss curve (train and validation losses, lr, grad norm)
# must equal the uninterrupted run's bit for bit. Then the newest checkpoint is corrupted
# (one byte flipped): the rerun must detect it, use the previous one and again reproduce the
# curve. The same with top-k compression (whose residuals are checkpointed per rank) and with ZeRO-2 (the library's checksummed shards), whose last checkpoint
# then resumes on 3 ranks; and with fp16 loss scaling (the scaler's state is checkpointed).
# A checkpoint is only resumed by its own run: other model or schedule options, or the format
# of an older ctrain, make --resume exit 2 rather than train from step 0 over it; a run resumed
# past its --steps has nothing to do; a fresh run into a directory with checkpoints warns.
# Exit 0 pass, 1 fail, 99 harness error.
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
# refused: a checkpoint is resumed by the run that wrote it only (run hash in the shard header)
# refused CKPTDIR "ctrain args" "changed args" "message": --resume exits 2 naming why, and
# writes nothing
refused() {
    before=$(find "$1" -type f | sort | xargs cat | cksum)
    "$COLLRUN" -n 2 "$CTRAIN" $2 $3 --ckpt-dir "$1" --ckpt-every 5 --resume >"$T/refused.out" 2>&1
    rc=$?
    if [ $rc -eq 2 ] && grep -q "$4" "$T/refused.out" && grep -q "no checkpoint in $1 is of this run" "$T/refused.out" &&
        [ "$(find "$1" -type f | sort | xargs cat | cksum)" = "$before" ]; then
        echo "--resume '$3' against $(basename "$1"): status 2, $4"
    else
        cat "$T/refused.out"; fail "--resume '$3' against $(basename "$1"): status $rc, not refused"
    fi
}
refused "$T/ckpt" "$A" "--channels 64" "written by another run (run hash"
refused "$T/ckpt" "$A" "--lr 2e-3" "written by another run (run hash"
refused "$T/ckpt" "$A" "--batch 4 --grad-accum 2" "written by another run (run hash"
mkdir "$T/old" && cp -r "$T/ckpt/step-00000005" "$T/old/" && for f in "$T"/old/step-00000005/shard-*; do
    printf 'CTRCKPT1' | dd of="$f" bs=1 conv=notrunc 2>/dev/null; done # the magic of format 1
refused "$T/old" "$A" "" "written by an older ctrain"
# resumed past --steps: nothing to do (exit 0, no step trained, no "done: -5 steps")
"$COLLRUN" -n 2 "$CTRAIN" $A --ckpt-dir "$T/ckpt" --resume --steps 15 >"$T/past.out" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q "nothing to do: checkpoint step 20 >= --steps 15" "$T/past.out" && ! grep -q "^step \|^done" "$T/past.out"; then
    echo "resumed at step 20 with --steps 15: nothing to do"
else
    cat "$T/past.out"; fail "resume past --steps: status $rc"
fi
# a fresh run (no --resume) into a directory of checkpoints warns, naming the newest
"$COLLRUN" -n 2 "$CTRAIN" $A --steps 1 --eval-every 0 --ckpt-dir "$T/ckpt" --ckpt-every 5 >"$T/fresh.out" 2>&1 || { cat "$T/fresh.out"; fail "fresh run into a checkpoint directory"; }
grep -q "warning: .*checkpoints, the newest $T/ckpt/step-00000020" "$T/fresh.out" &&
    echo "fresh run into $T/ckpt: warned about step-00000020" || { cat "$T/fresh.out"; fail "no warning for a fresh run over checkpoints"; }
# extending a run whose --warmup (3) was clamped to its --steps (2): the same run, resumed
"$COLLRUN" -n 2 "$CTRAIN" $A --steps 2 --eval-every 0 --ckpt-dir "$T/short" --ckpt-every 2 >"$T/short.out" 2>&1 || { cat "$T/short.out"; fail "2-step run"; }
"$COLLRUN" -n 2 "$CTRAIN" $A --steps 4 --eval-every 0 --ckpt-dir "$T/short" --resume >"$T/longer.out" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q "resumed from $T/short/step-00000002" "$T/longer.out"; then
    echo "a 2-step run (warm-up clamped to 2) extended to 4 steps: resumed"
else
    cat "$T/longer.out"; fail "extending a run with a clamped warm-up: status $rc"
fi
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
refused "$T/zckpt" "$AZ" "--channels 64" "written by another run (run hash"
mkdir "$T/zold" && cp -r "$T/zckpt/zero-step-00000005" "$T/zold/" && sed -i '/^run /d' "$T/zold/zero-step-00000005/ctrain.meta"
refused "$T/zold" "$AZ" "" "written by an older ctrain"
# fp16: the loss scaler (scale, good steps, skipped steps) is in the checkpoint; with a window
# of 3 the scale doubles and overflows several times in 20 steps, and the resumed run must
# still give the uninterrupted curve and the same final scale
AF="$A --precision fp16 --loss-scale-window 3"
"$COLLRUN" -n 4 "$CTRAIN" $AF --csv "$T/ref.csv" >"$T/ref.out" 2>&1 || { cat "$T/ref.out"; fail "fp16: reference run"; }
"$COLLRUN" -n 4 "$CTRAIN" $AF --ckpt-dir "$T/fckpt" --ckpt-every 5 --resume --kill-at 13 --csv "$T/run.csv" >"$T/kill.out" 2>&1 && fail "fp16: the killed run succeeded"
"$COLLRUN" -n 4 "$CTRAIN" $AF --ckpt-dir "$T/fckpt" --ckpt-every 5 --resume --kill-at 13 --csv "$T/run.csv" >"$T/resume.out" 2>&1 || { cat "$T/resume.out"; fail "fp16: resumed run"; }
grep -q "resumed from .*step-00000010" "$T/resume.out" || fail "fp16: did not resume from step 10"
same_curve "fp16, loss scale window 3: kill -9 at step 13, resume"
grep "^fp16: " "$T/ref.out" >"$T/a" && grep "^fp16: " "$T/resume.out" >"$T/b" && cmp -s "$T/a" "$T/b" &&
    sed 's/^/  /' "$T/b" || { cat "$T/a" "$T/b"; fail "fp16: skipped steps or final scale differ after resume"; }
echo "test_ctrain_ckpt: $nfail failure(s)"
[ $nfail -eq 0 ]
