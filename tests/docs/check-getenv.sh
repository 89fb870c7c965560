#!/bin/sh
# SPDX-License-Identifier: MIT
# Fails when library code reads the environment directly: getenv( or secure_getenv( may appear
# only in src/core/param.c (every COLL_* variable is a params.def row; foreign variables go
# through coll_env_get()). Scans src/, transports/ and algorithms/; tools in src/tools/ are
# programs, not library code, and are not checked. Comments are ignored.
# Exit status: 0 clean, 1 offenders listed, 99 source tree not found.

srcdir=${srcdir:-$(dirname "$0")/../..}
if [ ! -f "$srcdir/src/core/param.c" ]; then
    echo "check-getenv: cannot find the source tree (srcdir=$srcdir)" >&2
    exit 99
fi

offenders=$(
    cd "$srcdir" || exit 99
    find src transports algorithms \
        \( -path src/tools -prune \) -o \
        -type f \( -name '*.c' -o -name '*.h' -o -name '*.def' -o -name '*.cu' \
                   -o -name '*.cc' -o -name '*.cpp' \) -print 2>/dev/null |
    LC_ALL=C sort |
    while IFS= read -r f; do
        [ "$f" = src/core/param.c ] && continue
        # Drop /* */ (also across lines) and // comments, then look for the calls.
        awk -v file="$f" '
            {
                line = $0; out = ""
                while (line != "") {
                    if (incomment) {
                        i = index(line, "*/")
                        if (i == 0) { line = ""; break }
                        line = substr(line, i + 2); incomment = 0
                    } else {
                        i = index(line, "/*"); j = index(line, "//")
                        if (j > 0 && (i == 0 || j < i)) {
                            out = out substr(line, 1, j - 1); line = ""; break
                        }
                        if (i == 0) { out = out line; line = ""; break }
                        out = out substr(line, 1, i - 1); line = substr(line, i + 2); incomment = 1
                    }
                }
                if (out ~ /(^|[^A-Za-z0-9_])(secure_)?getenv[ \t]*\(/)
                    printf "%s:%d: %s\n", file, FNR, $0
            }' "$f"
    done
)

if [ -n "$offenders" ]; then
    echo "check-getenv: getenv() outside src/core/param.c; use a params.def row or coll_env_get():"
    echo "$offenders"
    exit 1
fi
echo "check-getenv: ok"
exit 0
