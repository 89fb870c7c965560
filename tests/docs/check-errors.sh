#!/bin/sh
# SPDX-License-Identifier: MIT
# check-errors.sh -- every code of COLL_RESULT_MAP in include/coll.h is documented, with its
# value, in the ERRORS section of man/man7/coll.7.in (and nothing else is), and every
# COLL_ERR_* name used in any man page is a real code. It does not check what each function
# returns; the man3 pages and the tests do that.
set -u
LC_ALL=C
export LC_ALL
srcdir=${srcdir:-$(dirname "$0")/../..}
hdr="$srcdir/include/coll.h"
man7="$srcdir/man/man7/coll.7.in"
for f in "$hdr" "$man7"; do
    if [ ! -r "$f" ]; then
        echo "check-errors: cannot read $f" >&2
        exit 99
    fi
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/check-errors.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT INT TERM

# The map's rows "X(ERR_TIMEOUT, -7, "timed out")" as "COLL_ERR_TIMEOUT<TAB>-7".
sed -n 's/^[[:blank:]]*X(\([A-Z_]*\),[[:blank:]]*\(-\{0,1\}[0-9]*\),.*/COLL_\1	\2/p' "$hdr" | sort > "$tmp/codes"
ncodes=$(wc -l < "$tmp/codes" | tr -d ' ')
if [ "$ncodes" -eq 0 ]; then
    echo "check-errors: no COLL_RESULT_MAP rows found in $hdr" >&2
    exit 99
fi

# ERRORS entries of coll.7: ".TP" then '.BR COLL_X " (value)"'.
awk '/^\.SH/ { on = ($0 ~ /^\.SH[ \t]+"?ERRORS"?[ \t]*$/); next } on' "$man7" |
    sed -e 's/\\-/-/g' |
    awk 'prev == ".TP" && $1 ~ /^\.BR?$/ && $2 ~ /^COLL_/ {
             v = $0; sub(/^[^"]*"[ \t]*\(/, "", v); sub(/\)".*$/, "", v)
             if (v == $0) v = "?"
             printf "%s\t%s\n", $2, v
         }
         { prev = $0 }' | sort > "$tmp/documented"

fail=0
dups=$(cut -f1 "$tmp/documented" | uniq -d)
if [ -n "$dups" ]; then
    echo "check-errors: documented more than once in coll.7 ERRORS: $dups" >&2
    fail=1
fi
while IFS='	' read -r name val; do
    doc=$(awk -F '\t' -v n="$name" '$1 == n { print $2; exit }' "$tmp/documented")
    if [ -z "$doc" ]; then
        echo "check-errors: $name ($val) is not documented in the ERRORS section of $man7" >&2
        fail=1
    elif [ "$doc" != "$val" ]; then
        echo "check-errors: $name is $val in coll.h but documented as ($doc) in coll.7" >&2
        fail=1
    fi
done < "$tmp/codes"
cut -f1 "$tmp/codes" > "$tmp/names"
for n in $(cut -f1 "$tmp/documented" | sort -u | comm -23 - "$tmp/names"); do
    echo "check-errors: $n is documented in coll.7 ERRORS but is not in COLL_RESULT_MAP" >&2
    fail=1
done

# Any COLL_ERR_* word in any page must be a code (catches typos and stale names).
for page in "$man7" "$srcdir"/man/man1/*.1.in "$srcdir"/man/man3/*.3; do
    [ -r "$page" ] || continue
    for w in $(grep -o 'COLL_ERR_[A-Z_]*[A-Z]' "$page" | sort -u | comm -23 - "$tmp/names"); do
        echo "check-errors: $page mentions $w, which is not in COLL_RESULT_MAP" >&2
        fail=1
    done
done

if [ "$fail" -ne 0 ]; then
    exit 1
fi
echo "check-errors: all $ncodes result codes of COLL_RESULT_MAP are documented in coll.7"
exit 0
