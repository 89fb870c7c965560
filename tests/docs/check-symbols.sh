#!/bin/sh
# SPDX-License-Identifier: MIT
# check-symbols.sh -- the COLL_API functions declared in the installed headers (include/coll.h,
# include/coll_train.h) are exactly the functions the built .libs/libcoll.so exports (nm -D,
# type T; the memory hooks listed below aside), and each has a man3 page (and every man3 page belongs to one, or is the overview page
# of an object, e.g. coll_ddp.3 for coll_ddp_*). Skips (77) the export half when no shared
# library was built.
set -u
LC_ALL=C
export LC_ALL
srcdir=${srcdir:-$(dirname "$0")/../..}
hdr="$srcdir/include/coll.h"
hdrs="$hdr $srcdir/include/coll_train.h"
lib=${COLL_CHECK_LIB:-./.libs/libcoll.so}
if [ ! -r "$hdr" ]; then
    echo "check-symbols: cannot read $hdr" >&2
    exit 99
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/check-symbols.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT INT TERM

# Declared: drop comments and preprocessor lines, then the identifier just before the "(" that
# follows each COLL_API.
awk '
{ text = text $0 "\n" }
END {
    out = ""
    while ((i = index(text, "/*")) > 0) {
        out = out substr(text, 1, i - 1)
        rest = substr(text, i + 2)
        j = index(rest, "*/")
        text = (j > 0) ? substr(rest, j + 2) : ""
    }
    out = out text
    n = split(out, lines, "\n")
    body = ""
    for (k = 1; k <= n; k++) {
        if (lines[k] !~ /^[ \t]*#/) {
            body = body " " lines[k]
        }
    }
    while ((i = index(body, "COLL_API")) > 0) {
        body = substr(body, i + 8)
        p = index(body, "(")
        decl = substr(body, 1, p - 1)
        sub(/[ \t]+$/, "", decl)
        if (match(decl, /[A-Za-z_][A-Za-z0-9_]*$/)) {
            print substr(decl, RSTART, RLENGTH)
        }
    }
}' $hdrs | sort > "$tmp/declared"
ndecl=$(wc -l < "$tmp/declared" | tr -d ' ')
if [ "$ndecl" -eq 0 ]; then
    echo "check-symbols: no COLL_API declarations found in $hdr" >&2
    exit 99
fi
if [ -n "${COLL_CHECK_PRINT:-}" ]; then
    cat "$tmp/declared"
fi

fail=0
dups=$(uniq -d "$tmp/declared")
if [ -n "$dups" ]; then
    echo "check-symbols: declared more than once in the headers: $dups" >&2
    fail=1
fi

# One man3 page per function (a page of its own or a .so stub), and no page without a function.
for fn in $(cat "$tmp/declared"); do
    if [ ! -r "$srcdir/man/man3/$fn.3" ]; then
        echo "check-symbols: $fn has no man page man/man3/$fn.3" >&2
        fail=1
    fi
done
for page in "$srcdir"/man/man3/*.3; do
    [ -r "$page" ] || continue
    fn=$(basename "$page" .3)
    if ! grep -qx "$fn" "$tmp/declared" && ! grep -q "^${fn}_" "$tmp/declared"; then
        echo "check-symbols: man/man3/$fn.3 documents no COLL_API function of coll.h" >&2
        fail=1
    fi
done

if [ ! -r "$lib" ]; then
    if [ "$fail" -ne 0 ]; then
        exit 1
    fi
    echo "check-symbols: $lib not built (static-only build?): export check skipped;" \
        "all $ndecl functions have man pages"
    exit 77
fi
if ! command -v nm > /dev/null 2>&1; then
    echo "check-symbols: nm not found: export check skipped"
    exit 77
fi
nm -D --defined-only "$lib" > "$tmp/nm" || exit 99
# Exported on purpose besides COLL_API: the memory hooks of the ib transport's registration
# cache (src/core/memhook.c interposes these C library functions to see memory being unmapped);
# built with the ib transport only, so each is allowed, not required.
hooks="munmap mremap madvise mmap mmap64"
awk -v hooks="$hooks" '
BEGIN { n = split(hooks, h, " "); for (i = 1; i <= n; i++) allowed[h[i]] = 1 }
$2 == "T" && $3 != "_init" && $3 != "_fini" && !($3 in allowed) { print $3 }' "$tmp/nm" |
    sort -u > "$tmp/exported"

for s in $(comm -23 "$tmp/declared" "$tmp/exported"); do
    echo "check-symbols: $s is declared COLL_API but not exported by $lib" >&2
    fail=1
done
for s in $(comm -13 "$tmp/declared" "$tmp/exported"); do
    echo "check-symbols: $s is exported by $lib but not declared COLL_API in $hdrs" >&2
    fail=1
done
if [ "$fail" -ne 0 ]; then
    exit 1
fi
echo "check-symbols: $ndecl COLL_API functions: all exported by $lib, all with a man3 page"
exit 0
