#!/bin/sh
# SPDX-License-Identifier: MIT
# check-man.sh -- lints every man page (mandoc -Tlint, else groff -ww; skips with 77 if neither
# is installed) and checks their shape: .so stubs point at a page that names the function,
# man3 pages have all sections in order, the version in static .TH lines is configure.ac's,
# cross references to sections 3 and 7 resolve, and the EXAMPLES of man3 pages compile.
# The .in pages are checked after substituting @PACKAGE_VERSION@ and @COLL_DATE@, so this
# works before configure has run. It does not judge whether the text is right.
set -u
LC_ALL=C
export LC_ALL
srcdir=${srcdir:-$(dirname "$0")/../..}
man="$srcdir/man"
if [ ! -d "$man/man3" ]; then
    echo "check-man: no $man/man3" >&2
    exit 99
fi

# ---- linter: $MANLINT (set by configure) if it names one, else whatever is installed ----
lint=""
for cand in ${MANLINT:-} mandoc groff; do
    if command -v "$cand" > /dev/null 2>&1; then
        case $(basename "$cand") in
        mandoc*) lint=mandoc; lintcmd=$cand; break ;;
        groff*) lint=groff; lintcmd=$cand; break ;;
        esac
    fi
done
if [ -z "$lint" ]; then
    echo "check-man: neither mandoc nor groff is installed: man pages not linted"
    exit 77
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/check-man.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT INT TERM
fail=0
err() {
    echo "check-man: $*" >&2
    fail=1
}

version=$(sed -n 's/^AC_INIT(\[[^]]*\],[[:blank:]]*\[\([^]]*\)\].*/\1/p' "$srcdir/configure.ac" \
    2> /dev/null)
version=${version:-0.0.0}

# ---- section helpers ----
# Section names of a page, one per line, quotes removed.
sections() {
    sed -n 's/^\.SH[[:blank:]]*//p' "$1" | tr -d '"'
}
# Body of section $2 of page $1.
section() {
    awk -v want="$2" '/^\.SH/ { s = $0; sub(/^\.SH[ \t]*/, "", s); gsub(/"/, "", s)
                               on = (s == want); next } on' "$1"
}
# Known sections must appear in this relative order; others (EXIT STATUS, NOTES...) may go anywhere.
order="NAME|SYNOPSIS|DESCRIPTION|OPTIONS|RETURN VALUE|ERRORS|ENVIRONMENT|FILES|EXAMPLES|SEE ALSO"
check_order() {
    sections "$1" | awk -v order="$order" -v page="$2" '
        BEGIN { n = split(order, o, "|"); for (i = 1; i <= n; i++) rank[o[i]] = i }
        ($0 in rank) {
            if (rank[$0] < last) { printf "%s: section %s is out of order\n", page, $0; bad = 1 }
            last = rank[$0]
        }
        END { exit bad }' >&2 || fail=1
}

lint_page() {
    if [ "$lint" = mandoc ]; then
        out=$("$lintcmd" -Tlint -W warning "$1" 2>&1)
    else
        out=$("$lintcmd" -t -man -ww -z "$1" 2>&1)
    fi
    rc=$?
    if [ "$rc" -ne 0 ] || [ -n "$out" ]; then
        err "$2: $lint reports:"
        printf '%s\n' "$out" >&2
    fi
}

# ---- man3: static pages and .so stubs ----
npages=0
nstubs=0
for page in "$man"/man3/*.3; do
    [ -r "$page" ] || continue
    fn=$(basename "$page" .3)
    rel="man3/$fn.3"
    first=$(sed -n '1p' "$page")
    case $first in
    .so\ *)
        nstubs=$((nstubs + 1))
        target=${first#.so }
        if [ "$(wc -l < "$page" | tr -d ' ')" -ne 1 ]; then
            err "$rel: a .so stub must be one line"
        fi
        case $target in
        man3/*.3) ;;
        *) err "$rel: .so target '$target' is not man3/NAME.3" ;;
        esac
        if [ ! -r "$man/$target" ]; then
            err "$rel: .so target $target does not exist"
            continue
        fi
        if sed -n '1p' "$man/$target" | grep -q '^\.so'; then
            err "$rel: .so target $target is itself a stub"
            continue
        fi
        section "$man/$target" NAME | grep -qw "$fn" ||
            err "$rel: $target does not name $fn in NAME"
        section "$man/$target" SYNOPSIS | grep -q "[ *]$fn(" ||
            err "$rel: $target has no prototype of $fn in SYNOPSIS"
        continue
        ;;
    esac
    npages=$((npages + 1))
    lint_page "$page" "$rel"
    upper=$(echo "$fn" | tr 'a-z' 'A-Z')
    th=$(sed -n '/^\.TH/{p;q;}' "$page")
    case $th in
    ".TH $upper 3 \"20"[0-9][0-9]-[0-9][0-9]-[0-9][0-9]"\" \"libcoll $version\" \"libcoll Manual\"") ;;
    *) err "$rel: expected '.TH $upper 3 \"YYYY-MM-DD\" \"libcoll $version\" \"libcoll Manual\"', got '$th'" ;;
    esac
    want="NAME SYNOPSIS DESCRIPTION RETURN VALUE ERRORS ENVIRONMENT EXAMPLES SEE ALSO"
    have=$(sections "$page" | tr '\n' ' ' | sed 's/ $//')
    [ "$have" = "$want" ] || err "$rel: sections are '$have', expected '$want'"
    section "$page" NAME | grep -qw "$fn" || err "$rel: NAME does not mention $fn"
    # an object's overview page (coll_ddp.3) has the prototypes of its functions (coll_ddp_*)
    section "$page" SYNOPSIS | grep -q "[ *]$fn(\|[ *]${fn}_[a-z_0-9]*(" ||
        err "$rel: no prototype of $fn in SYNOPSIS"
    section "$page" SYNOPSIS | grep -q '#include <coll\(_train\)\{0,1\}.h>' ||
        err "$rel: SYNOPSIS lacks #include <coll.h> (or <coll_train.h>)"
done

# ---- .in pages (man1, man7): substitute, lint, check order ----
for src in "$man"/man7/*.7.in "$man"/man1/*.1.in; do
    [ -r "$src" ] || continue
    base=$(basename "$src" .in)
    sub=$(basename "$(dirname "$src")")
    mkdir -p "$tmp/$sub"
    sed -e "s/@PACKAGE_VERSION@/$version/g" -e 's/@COLL_DATE@/2026-01-01/g' "$src" \
        > "$tmp/$sub/$base"
    npages=$((npages + 1))
    lint_page "$tmp/$sub/$base" "$sub/$base.in"
    grep '^\.TH' "$src" | grep -q '@PACKAGE_VERSION@' ||
        err "$sub/$base.in: .TH should carry @PACKAGE_VERSION@ and @COLL_DATE@"
    check_order "$tmp/$sub/$base" "$sub/$base.in"
done

# ---- cross references to libcoll pages of sections 3 and 7 ----
for page in "$man"/man3/*.3 "$man"/man7/*.7.in "$man"/man1/*.1.in; do
    [ -r "$page" ] || continue
    refs=$(grep -o '^\.BR coll[a-z_0-9]* ([37])' "$page" | sed 's/^\.BR \([a-z_0-9]*\) (\([37]\))/\1.\2/' |
        sort -u)
    for r in $refs; do
        n=${r%.*}
        s=${r##*.}
        if [ ! -r "$man/man$s/$n.$s" ] && [ ! -r "$man/man$s/$n.$s.in" ]; then
            err "$(basename "$page"): reference to $n($s), which has no page"
        fi
    done
done

# ---- EXAMPLES of man3 pages compile against coll.h ----
cc=""
for cand in "${CC:-}" cc gcc clang; do
    [ -n "$cand" ] || continue
    set -- $cand
    if command -v "$1" > /dev/null 2>&1; then
        cc=$cand
        break
    fi
done
nex=0
if [ -z "$cc" ]; then
    echo "check-man: no C compiler found: EXAMPLES not compiled"
else
    for page in "$man"/man3/*.3; do
        sed -n '1p' "$page" | grep -q '^\.so' && continue
        fn=$(basename "$page" .3)
        section "$page" EXAMPLES |
            awk '/^\.EE/ { on = 0 } on { print } /^\.EX/ { on = 1 }' |
            sed -e 's/\\-/-/g' -e "s/\\\\(aq/'/g" -e 's/\\(dq/"/g' -e 's/\\&//g' \
                -e 's/\\e/\\/g' > "$tmp/ex_$fn.c"
        if [ ! -s "$tmp/ex_$fn.c" ]; then
            err "man3/$fn.3: EXAMPLES has no .EX/.EE code block"
            continue
        fi
        nex=$((nex + 1))
        if ! out=$($cc -std=gnu11 -Wall -Wextra -Werror -fsyntax-only -I"$srcdir/include" \
            "$tmp/ex_$fn.c" 2>&1); then
            err "man3/$fn.3: the example does not compile with $cc:"
            printf '%s\n' "$out" >&2
        fi
    done
fi

if [ "$fail" -ne 0 ]; then
    exit 1
fi
echo "check-man: $npages pages clean with $lint ($nstubs .so stubs checked), $nex examples compile"
exit 0
