#!/bin/sh
# SPDX-License-Identifier: MIT
# make check-gpu: run the GPU tests given as arguments. Exit 0 when all pass, 77 (with the
# reason) when there is no CUDA device or libcoll was built without CUDA, 1 on any failure.
if [ $# -eq 0 ]; then
    echo "check-gpu: SKIP: libcoll was built without CUDA (configure found no nvcc; see --with-cuda)"
    exit 77
fi
failed=0 skipped=0 passed=0
for t in "$@"; do
    echo "== $t"
    ./$t
    rc=$?
    case $rc in
        0) passed=$((passed + 1)) ;;
        77) skipped=$((skipped + 1)) ;;
        *) failed=$((failed + 1)); echo "check-gpu: FAIL: $t (exit $rc)" ;;
    esac
done
echo "check-gpu: $passed passed, $skipped skipped, $failed failed"
if [ $failed -gt 0 ]; then
    exit 1
fi
if [ $passed -eq 0 ]; then
    echo "check-gpu: SKIP: no CUDA device here; nothing ran on a GPU"
    exit 77
fi
exit 0
