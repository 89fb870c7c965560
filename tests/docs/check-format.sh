#!/bin/sh
# SPDX-License-Identifier: MIT
# Every C source and header is formatted as .clang-format says (make format-check, as a test).
srcdir=${srcdir:-$(dirname "$0")/../..}
command -v clang-format >/dev/null 2>&1 || { echo "SKIP: clang-format not installed"; exit 77; }
cd "$srcdir" || exit 99
files=$(find include src transports algorithms bench tests examples -name '*.[ch]' | sort)
out=$(clang-format --dry-run $files 2>&1 | grep 'warning:' | cut -d: -f1 | sort -u)
if [ -n "$out" ]; then
    echo "not clang-formatted (run clang-format -i on them):"
    echo "$out"
    exit 1
fi
echo "check-format: $(echo "$files" | wc -l) files ok"
