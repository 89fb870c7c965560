#!/bin/sh
# SPDX-License-Identifier: MIT
# make check-fuzz: build the fuzz harnesses with clang's libFuzzer + ASan + UBSan in a copy of
# the source tree (fuzz-build/), fuzz each wire parser for FUZZ_SECONDS (default 60) starting
# from the committed seed corpus, and print the executions per parser. Fails on any finding
# (the crashing input is kept as fuzz-build/crash-*).
set -eu
srcdir=$(cd "${1:-.}" && pwd)
secs=${FUZZ_SECONDS:-60}
clang=${CLANG:-clang}
if ! command -v "$clang" >/dev/null 2>&1; then
    echo "check-fuzz: clang is needed for libFuzzer (apt-get install clang)" >&2
    exit 1
fi
top=$(pwd)/fuzz-build
mkdir -p "$top/src" "$top/work"
echo "check-fuzz: building with $clang in $top (log: $top/build.log)"
(cd "$srcdir" && git ls-files -z --cached --others --exclude-standard) |
    (cd "$srcdir" && xargs -0 tar cf -) | (cd "$top/src" && tar xf -)
cd "$top/src"
{
    autoreconf -fi &&
        ./configure CC="$clang" --enable-libfuzzer --without-cuda --disable-shared \
            CFLAGS="-g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined" \
            LDFLAGS="-fsanitize=address,undefined" &&
        make -j2 tests/fuzz/fuzz_boot tests/fuzz/fuzz_tcp tests/fuzz/fuzz_shm tests/fuzz/fuzz_ckpt
} >"$top/build.log" 2>&1 || {
    tail -30 "$top/build.log"
    echo "check-fuzz: build failed" >&2
    exit 1
}
status=0
printf '%-6s %12s %10s %8s %s\n' parser executions exec/s seconds result
for n in boot tcp shm ckpt; do
    mkdir -p "$top/work/$n"
    log="$top/fuzz_$n.log"
    if (cd "$top" && COLL_DEBUG=none "$top/src/tests/fuzz/fuzz_$n" -max_total_time="$secs" \
        -print_final_stats=1 -artifact_prefix="$top/crash-$n-" "$top/work/$n" \
        "$srcdir/tests/fuzz/corpus/$n" >"$log" 2>&1); then
        result=clean
    else
        result="FOUND (see $log)"
        status=1
    fi
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    printf '%-6s %12s %10s %8s %s\n' "$n" "${execs:-?}" "${rate:-?}" "$secs" "$result"
done
exit $status
