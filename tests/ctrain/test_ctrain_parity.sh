#!/bin/sh
# SPDX-License-Identifier: MIT
#
# test_ctrain_parity.sh -- ctrain against the same GPT in PyTorch (torch_ref.py): from the same
# initial weights and batches, the first step's gradients and the loss of 10 steps (warm-up,
# cosine decay, clipping and weight decay all active) must match to 1e-4 relative.
# Exit 0 pass, 1 fail, 77 when Debian's python3-torch is absent, 99 harness error.
srcdir=${srcdir:-.}
CTRAIN=${top_builddir:-.}/ctrain
[ -x "$CTRAIN" ] || { echo "test_ctrain_parity: $CTRAIN not built" >&2; exit 99; }
PY=/usr/bin/python3
if ! "$PY" -c 'import torch' 2>/dev/null; then
    echo "test_ctrain_parity: /usr/bin/python3 has no torch (apt-get install python3-torch); skip"
    exit 77
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/test_ctrain_parity.XXXXXX") || exit 99
trap 'rm -rf "$T"' EXIT
"$CTRAIN" --data "$srcdir/tests/ctrain/moby_dick_200k.txt" --steps 10 --warmup 3 \
    --eval-every 0 --layers 2 --channels 32 --heads 4 --seqlen 32 --batch 4 --dump "$T/dump" \
    >"$T/ctrain.out" 2>&1 || { cat "$T/ctrain.out"; echo "test_ctrain_parity: ctrain failed"; exit 1; }
"$PY" "$srcdir/tests/ctrain/torch_ref.py" "$T/dump"
