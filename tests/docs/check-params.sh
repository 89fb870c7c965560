#!/bin/sh
# SPDX-License-Identifier: MIT
# check-params.sh -- every row of src/core/params.def is documented in the ENVIRONMENT section
# of man/man7/coll.7.in with its type, default (and choices), and every COLL_* name mentioned in
# an ENVIRONMENT section of any man page is a parameter or a coll.h identifier. It checks the
# documentation only; whether the library reads the rows is test_params' job.
set -u
LC_ALL=C
export LC_ALL
srcdir=${srcdir:-$(dirname "$0")/../..}
def="$srcdir/src/core/params.def"
man7="$srcdir/man/man7/coll.7.in"
hdr="$srcdir/include/coll.h"
for f in "$def" "$man7" "$hdr"; do
    if [ ! -r "$f" ]; then
        echo "check-params: cannot read $f" >&2
        exit 99
    fi
done
tmp=$(mktemp -d "${TMPDIR:-/tmp}/check-params.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT INT TERM

# params.def rows: NAME<TAB>type<TAB>default<TAB>choices (choices empty unless ENUM).
awk '
/^COLL_PARAM\(/ {
    line = $0
    sub(/^COLL_PARAM\([ \t]*/, "", line)
    n = index(line, ","); name = substr(line, 1, n - 1); line = substr(line, n + 1)
    sub(/^[ \t]*/, "", line)
    n = index(line, ","); type = tolower(substr(line, 1, n - 1)); line = substr(line, n + 1)
    sub(/^[ \t]*"/, "", line)
    n = index(line, "\""); deflt = substr(line, 1, n - 1); line = substr(line, n + 1)
    sub(/^[ \t]*,[ \t]*[A-Z_]+[ \t]*,[ \t]*/, "", line)
    choices = ""
    if (substr(line, 1, 1) == "\"") {
        line = substr(line, 2); n = index(line, "\""); choices = substr(line, 1, n - 1)
    }
    gsub(/[ \t]/, "", name); gsub(/[ \t]/, "", type)
    printf "COLL_%s\t%s\t%s\t%s\n", name, type, deflt, choices
}' "$def" > "$tmp/params"
sort -u "$tmp/params" | cut -f1 > "$tmp/param-names"
nparams=$(wc -l < "$tmp/params" | tr -d ' ')
if [ "$nparams" -eq 0 ]; then
    echo "check-params: no COLL_PARAM rows found in $def" >&2
    exit 99
fi

# Identifiers coll.h defines (constants, macros, result codes): COLL_* words that are not
# parameters but may be mentioned in an ENVIRONMENT section, such as COLL_ERR_TIMEOUT.
{
    grep -o 'COLL_[A-Z0-9_]*' "$hdr"
    sed -n 's/^[[:blank:]]*X(\([A-Z_]*\),.*/COLL_\1/p' "$hdr"
} | sort -u > "$tmp/hdr-names"

# The ENVIRONMENT section of a page, roff escapes for minus and backslash undone.
env_section() {
    awk '/^\.SH/ { on = ($0 ~ /^\.SH[ \t]+"?ENVIRONMENT"?[ \t]*$/) ; next } on' "$1" |
        sed -e 's/\\-/-/g' -e 's/\\e/\\/g' -e 's/\\f[BIRP]//g' -e 's/\\&//g'
}

fail=0
env_section "$man7" > "$tmp/env7"

# Entries: ".TP", then ".B COLL_X", then "(type[: choices], default value)".
awk '
prev == ".TP" && $1 == ".B" && $2 ~ /^COLL_/ { name = $2; want = 1; prev = $0; next }
want == 1 { printf "%s\t%s\n", name, $0; want = 0 }
{ prev = $0 }' "$tmp/env7" > "$tmp/entries"
cut -f1 "$tmp/entries" | sort > "$tmp/entry-names"

dups=$(uniq -d "$tmp/entry-names")
if [ -n "$dups" ]; then
    echo "check-params: documented more than once in coll.7 ENVIRONMENT: $dups" >&2
    fail=1
fi
for n in $(comm -23 "$tmp/param-names" "$tmp/entry-names"); do
    echo "check-params: $n (params.def) has no entry in the ENVIRONMENT section of $man7" >&2
    fail=1
done
for n in $(sort -u "$tmp/entry-names" | comm -23 - "$tmp/param-names"); do
    echo "check-params: $n is documented in coll.7 ENVIRONMENT but is not in params.def" >&2
    fail=1
done

# Type, choices and default as params.def has them.
while IFS='	' read -r name type deflt choices; do
    line=$(awk -F '\t' -v n="$name" '$1 == n { print $2; exit }' "$tmp/entries")
    [ -n "$line" ] || continue
    shown=${deflt:-empty}
    if [ "$type" = enum ]; then
        want="(enum: $choices, default $shown)"
    else
        want="($type, default $shown)"
    fi
    if [ "$line" != "$want" ]; then
        echo "check-params: $name: coll.7 says '$line', params.def gives '$want'" >&2
        fail=1
    fi
done < "$tmp/params"

# Every COLL_* word in an ENVIRONMENT section (coll.7 and every other page) must exist.
for page in "$man7" "$srcdir"/man/man1/*.1.in "$srcdir"/man/man3/*.3; do
    [ -r "$page" ] || continue
    env_section "$page" | grep -o 'COLL_[A-Z0-9_]*[A-Z0-9]' | sort -u > "$tmp/words"
    for w in $(comm -23 "$tmp/words" "$tmp/param-names" | comm -23 - "$tmp/hdr-names"); do
        echo "check-params: $page: $w in ENVIRONMENT is neither in params.def nor in coll.h" >&2
        fail=1
    done
done

if [ "$fail" -ne 0 ]; then
    exit 1
fi
echo "check-params: all $nparams parameters of params.def are documented in coll.7"
exit 0
