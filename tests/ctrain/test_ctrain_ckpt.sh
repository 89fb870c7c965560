#!/bin/sh
# SPDX-License-Identifier: MIT
#
# test_ctrain_ckpt.sh -- kill -9 and resume: 4 ranks checkpoint every 5 steps, the last rank
# SIGKILLs itself at step 13 (--kill-at); collrun must report the failure; the same command
# rerun resumes from step 10 and the loss curve (train and validation losses, lr, grad norm)
# must equal the uninterrupted run's bit for bit. Then the newest checkpoint is corrupted
# (one byte flipped): the rerun must detect it, use the previous one and again reproduce the
# curve. The same again with ZeRO-2 (the library's checksummed shards), whose last checkpoint
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
"$COLLRUN" -n 4 "$CTRAIN" $A --csv "$T/ref.csv" >"$T/ref.out" 2>&1 || { cat "$T/ref.out"; fail "reference run"; }
"$COLLRUN" -n 4 "$CTRAIN" $A $K --csv "$T/run.csv" >"$T/kill.out" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q "collrun: .*rank 3, signal 9" "$T/kill.out" || { cat "$T/kill.out"; fail "killed run: status $rc, collrun did not report rank 3 killed"; }
[ -f "$T/ckpt/step-00000010/manifest" ] && [ ! -d "$T/ckpt/step-00000015" ] || fail "expected checkpoints 5 and 10 only"
"$COLLRUN" -n 4 "$CTRAIN" $A $K --csv "$T/run.csv" >"$T/resume.out" 2>&1 || { cat "$T/resume.out"; fail "resumed run"; }
grep -q "resumed from .*step-00000010" "$T/resume.out" || fail "did not resume from step 10"
same_curve "kill -9 at step 13, resume"
# corrupt the newest checkpoint: flip one byte in the middle of a shard
f="$T/ckpt/step-00000020/shard-2-of-4.bin"
[ -f "$f" ] || fail "no checkpoint at step 20"
size=$(wc -c <"$f")
printf '\377' | dd of="$f" bs=1 seek=$((size / 2)) conv=notrunc 2>/dev/null
"$COLLRUN" -n 4 "$CTRAIN" $A $K --csv "$T/run.csv" >"$T/corrupt.out" 2>&1 || { cat "$T/corrupt.out"; fail "run after corruption"; }
grep -q "step-00000020: shard 2 is corrupt" "$T/corrupt.out" || fail "corruption not detected"
grep -q "resumed from .*step-00000015" "$T/corrupt.out" || fail "did not fall back to step 15"
same_curve "corrupt newest checkpoint, fall back"
# the same with ZeRO-2: the library's sharded checkpoints (checksummed shards, a manifest),
# saved synchronously into zero-step-N; then a resume on 3 ranks re-shards the state
AZ="$A --zero 2"
KZ="--ckpt-dir $T/zckpt --ckpt-every 5 --resume --kill-at 13"
"$COLLRUN" -n 4 "$CTRAIN" $AZ --csv "$T/ref.csv" >"$T/ref.out" 2>&1 || { cat "$T/ref.out"; fail "ZeRO reference run"; }
"$COLLRUN" -n 4 "$CTRAIN" $AZ $KZ --csv "$T/run.csv" >"$T/kill.out" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q "collrun: .*rank 3, signal 9" "$T/kill.out" || { cat "$T/kill.out"; fail "ZeRO killed run: status $rc"; }
[ -f "$T/zckpt/zero-step-00000010/manifest" ] && [ ! -d "$T/zckpt/zero-step-00000015" ] || fail "ZeRO: expected checkpoints 5 and 10 only"
"$COLLRUN" -n 4 "$CTRAIN" $AZ $KZ --csv "$T/run.csv" >"$T/resume.out" 2>&1 || { cat "$T/resume.out"; fail "ZeRO resumed run"; }
grep -q "resumed from .*zero-step-00000010" "$T/resume.out" || fail "ZeRO: did not resume from step 10"
same_curve "ZeRO-2: kill -9 at step 13, resume"
f="$T/zckpt/zero-step-00000020/rank-00002.bin"
[ -f "$f" ] || fail "ZeRO: no checkpoint at step 20"
size=$(wc -c <"$f")
printf '\377' | dd of="$f" bs=1 seek=$((size / 2)) conv=notrunc 2>/dev/null
"$COLLRUN" -n 4 "$CTRAIN" $AZ $KZ --csv "$T/run.csv" >"$T/corrupt.out" 2>&1 || { cat "$T/corrupt.out"; fail "ZeRO run after corruption"; }
grep -q "zero-step-00000020 unusable (.*checksum mismatch" "$T/corrupt.out" || fail "ZeRO: corruption not detected"
grep -q "resumed from .*zero-step-00000015" "$T/corrupt.out" || fail "ZeRO: did not fall back to step 15"
same_curve "ZeRO-2: corrupt newest checkpoint, fall back"
"$COLLRUN" -n 3 "$CTRAIN" $AZ --ckpt-dir "$T/zckpt" --resume --steps 25 >"$T/three.out" 2>&1 || { cat "$T/three.out"; fail "ZeRO resume on 3 ranks"; }
grep -q "resumed from .*zero-step-00000020" "$T/three.out" && grep -q "^step   25/25 " "$T/three.out" &&
    echo "ZeRO-2: the 4-rank checkpoint of step 20 resumed on 3 ranks to step 25" || fail "ZeRO: no resume on 3 ranks"
echo "test_ctrain_ckpt: $nfail failure(s)"
[ $nfail -eq 0 ]
