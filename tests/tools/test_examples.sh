#!/bin/sh
# SPDX-License-Identifier: MIT
# Install libcoll into a temporary prefix, build examples/ against it with pkg-config only,
# and run each under collrun. Checks that the installed header, library and coll.pc work.
set -eu
srcdir=${srcdir:-$(dirname "$0")/../..}
top_builddir=${top_builddir:-.}
tmp=$(mktemp -d /tmp/collex.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
make -s -C "$top_builddir" install DESTDIR="$tmp" >"$tmp/install.log" 2>&1 || {
    cat "$tmp/install.log"; echo "FAIL: make install"; exit 1; }
pc=$(find "$tmp" -name coll.pc | head -n 1)
[ -n "$pc" ] || { echo "FAIL: coll.pc not installed"; exit 1; }
export PKG_CONFIG_PATH=$(dirname "$pc") PKG_CONFIG_SYSROOT_DIR=$tmp
libdir=$(pkg-config --variable=libdir coll)
case $libdir in "$tmp"/*) ;; *) libdir=$tmp$libdir ;; esac  # pkgconf applies the sysroot
bindir=$(dirname "$libdir")/bin
mkdir "$tmp/ex"
cp "$srcdir"/examples/*.c "$srcdir"/examples/Makefile "$tmp/ex/"
make -s -C "$tmp/ex" >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; echo "FAIL: build"; exit 1; }
export LD_LIBRARY_PATH=$libdir
pass=0
fail=0
for ex in ex_allreduce:4 ex_ring:4 ex_unique_id:3; do
    prog=${ex%%:*}
    n=${ex##*:}
    if "$bindir/collrun" --timeout 60 -n "$n" "$tmp/ex/$prog" >"$tmp/$prog.out" 2>&1; then
        pass=$((pass + 1)); echo "PASS: $prog on $n ranks"
    else
        fail=$((fail + 1)); echo "FAIL: $prog on $n ranks"; cat "$tmp/$prog.out"
    fi
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
