#!/bin/sh
# SPDX-License-Identifier: MIT
#
# test_ctrain_elastic.sh -- ctrain --elastic under collrun --keep-going: 4 ranks checkpoint
# every 5 steps and one rank SIGKILLs itself at step 13; the 3 survivors must shrink, say which
# rank they lost, resume from the checkpoint of step 10 and finish the 20 steps, and collrun
# must exit 0. Their loss curve must equal, bit for bit, the reference: the same 4 ranks up to
# step 10, then a separate 3-rank run resumed from that checkpoint. Done for DDP losing rank 3,
# DDP losing rank 0 (the bootstrap root's process: the survivors elect another to shrink),
# ZeRO-2 losing rank 0 and ZeRO-3 losing rank 2 (their sharded state re-sharded from 4 to 3
# ranks). Without --elastic the same failure must still end the job with an error.
# Exit 0 pass, 1 fail, 99 harness error.
srcdir=${srcdir:-.}
CTRAIN=${top_builddir:-.}/ctrain
COLLRUN=${COLLRUN:-${top_builddir:-.}/collrun}
[ -x "$CTRAIN" ] && [ -x "$COLLRUN" ] || { echo "test_ctrain_elastic: ctrain/collrun not built" >&2; exit 99; }
T=$(mktemp -d "${TMPDIR:-/tmp}/test_ctrain_elastic.XXXXXX") || exit 99
trap 'rm -rf "$T"' EXIT
A="--data $srcdir/tests/ctrain/moby_dick_200k.txt --steps 20 --warmup 3 --eval-every 5 --layers 2 --channels 32 --heads 4 --seqlen 32 --batch 2 --deterministic"
nfail=0
fail() { echo "FAIL: $*"; nfail=$((nfail + 1)); }

# reference ARGS PREFIX: 4 ranks to step 20 (checkpoints every 5), then only the checkpoint of
# step 10 kept and 3 ranks resumed from it, the CSV's first 10 steps those of the 4 ranks
reference() {
    rm -rf "$T/r4" "$T/r3"
    "$COLLRUN" -n 4 "$CTRAIN" $1 --ckpt-dir "$T/r4" --ckpt-every 5 --csv "$T/ref.csv" >"$T/ref4.out" 2>&1 ||
        { cat "$T/ref4.out"; fail "reference: 4 ranks"; }
    mkdir -p "$T/r3" && cp -r "$T/r4/${2}00000010" "$T/r3/" || fail "reference: no checkpoint of step 10"
    "$COLLRUN" -n 3 "$CTRAIN" $1 --ckpt-dir "$T/r3" --resume --csv "$T/ref.csv" >"$T/ref3.out" 2>&1 ||
        { cat "$T/ref3.out"; fail "reference: 3 ranks resumed"; }
}

# elastic NAME ARGS PREFIX VICTIM
elastic() {
    name=$1 args=$2 pre=$3 victim=$4
    reference "$args" "$pre"
    rm -rf "$T/ck"
    "$COLLRUN" --keep-going -n 4 "$CTRAIN" $args --ckpt-dir "$T/ck" --ckpt-every 5 --elastic \
        --kill-at 13 --kill-rank "$victim" --csv "$T/run.csv" >"$T/run.out" 2>&1
    rc=$?
    [ $rc -eq 0 ] || { cat "$T/run.out"; fail "$name: collrun --keep-going exited $rc"; }
    grep -q "collrun: rank $victim .*signal 9.*the other 3 ranks continue" "$T/run.out" ||
        fail "$name: collrun did not report rank $victim killed"
    grep -q "ctrain: elastic: lost rank $victim of 4 at step 13; 3 ranks go on" "$T/run.out" ||
        fail "$name: the survivors did not say which rank they lost"
    grep -q "ctrain: elastic: 3 ranks continue from the checkpoint of step 10" "$T/run.out" ||
        fail "$name: no resume from the checkpoint of step 10"
    grep -q "^step   20/20 " "$T/run.out" || fail "$name: the survivors did not finish"
    cut -d, -f1-5 "$T/ref.csv" >"$T/a" && cut -d, -f1-5 "$T/run.csv" >"$T/b"
    if cmp -s "$T/a" "$T/b" && [ "$(wc -l <"$T/a")" -eq 21 ]; then
        echo "$name: rank $victim killed at step 13, 3 ranks went on from step 10; loss curve identical to 4 ranks then 3 resumed"
    else
        fail "$name: loss curve differs from the reference"
        diff "$T/a" "$T/b" | head -5
    fi
}

elastic DDP "$A" step- 3
elastic "DDP, the root's rank" "$A" step- 0
elastic ZeRO-2 "$A --zero 2" zero-step- 0
elastic ZeRO-3 "$A --zero 3" zero-step- 2

# without --elastic the survivors fail (and so does the job), as before
"$COLLRUN" --keep-going -n 4 "$CTRAIN" $A --kill-at 13 >"$T/plain.out" 2>&1
rc=$?
if [ $rc -ne 0 ] && grep -q "coll_ddp_wait failed: remote rank failed" "$T/plain.out" &&
    ! grep -q "elastic" "$T/plain.out"; then
    echo "without --elastic: the survivors report the failure and exit, collrun exits $rc"
else
    cat "$T/plain.out"
    fail "without --elastic: status $rc"
fi
echo "test_ctrain_elastic: $nfail failure(s)"
[ $nfail -eq 0 ]
