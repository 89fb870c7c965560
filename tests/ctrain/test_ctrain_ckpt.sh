#!/bin/sh
# SPDX-License-Identifier: MIT
#
# test_ctrain_ckpt.sh -- kill -9 and resume: 4 ranks checkpoint every 5 steps, the last rank
# SIGKILLs itself at step 13 (--kill-at); collrun must report the failure; the same command
# rerun resumes from step 10 and the loss curve (train and validation losses, lr, grad norm)
# must equal the uninterrupted run's bit for bit. Then the newest checkpoint is corrupted
# (one byte flipped): the rerun must detect it, use the previous one and again reproduce the
# curve. Exit 0 pass, 1 fail, 99 harness error.
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
echo "test_ctrain_ckpt: $nfail failure(s)"
[ $nfail -eq 0 ]
