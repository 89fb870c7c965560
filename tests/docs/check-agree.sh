#!/bin/sh
# SPDX-License-Identifier: MIT
# check-agree.sh -- the parameters that every rank of a communicator must set alike are listed
# in three places: the rows of src/api/agree.c (what creation compares), the Configuration
# paragraph of man/man7/coll.7.in and the Environment section of README.md. The three lists
# must name the same parameters.
set -u
LC_ALL=C
export LC_ALL
srcdir=${srcdir:-$(dirname "$0")/../..}
src="$srcdir/src/api/agree.c"
man7="$srcdir/man/man7/coll.7.in"
readme="$srcdir/README.md"
for f in "$src" "$man7" "$readme"; do
    if [ ! -r "$f" ]; then
        echo "check-agree: cannot read $f" >&2
        exit 99
    fi
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/check-agree.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT INT TERM

# agree.c: the {COLL_P_NAME, n} rows of agree_rows[]
awk '/agree_rows\[\] = \{/ { on = 1; next } on && /^\};/ { exit }
     on { while (match($0, /\{COLL_P_[A-Z0-9_]+,/)) {
              print "COLL_" substr($0, RSTART + 8, RLENGTH - 9); $0 = substr($0, RSTART + RLENGTH) } }' \
    "$src" | sort -u > "$tmp/src"
# coll(7): from "must be set alike on every rank" to "Communicator creation compares them"
awk '/must be set alike on every rank/ { on = 1 } /^Communicator creation compares them/ { exit }
     on { while (match($0, /COLL_[A-Z0-9_]+/)) {
              print substr($0, RSTART, RLENGTH); $0 = substr($0, RSTART + RLENGTH) } }' \
    "$man7" | sort -u > "$tmp/man"
# README: from "Some variables choose, on each rank alone" to "Every rank of a communicator must"
awk '/^Some variables choose, on each rank alone/ { on = 1 } /^Every rank of a communicator must/ { exit }
     on { while (match($0, /COLL_[A-Z0-9_]+/)) {
              print substr($0, RSTART, RLENGTH); $0 = substr($0, RSTART + RLENGTH) } }' \
    "$readme" | sort -u > "$tmp/readme"

fail=0
if [ ! -s "$tmp/src" ]; then
    echo "check-agree: no rows found in $src" >&2
    exit 99
fi
for doc in man readme; do
    if ! cmp -s "$tmp/src" "$tmp/$doc"; then
        echo "FAIL: $doc lists other parameters than agree.c (< agree.c, > $doc):"
        diff "$tmp/src" "$tmp/$doc" | grep '^[<>]'
        fail=1
    fi
done
[ "$fail" -eq 0 ] && echo "PASS: agree.c, coll(7) and README list the same $(wc -l < "$tmp/src") parameters"
exit "$fail"
