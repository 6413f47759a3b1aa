#!/usr/bin/env bash
# Regenerates user/python/layout_3XY.inc, the offsets looptrace reads in a
# CPython process, from the interpreter's own headers (python3.X-dev):
#   scripts/python-offsets.sh [3.11]
set -euo pipefail
cd "$(dirname "$0")/.."
ver=${1:-3.11}
inc=/usr/include/python$ver
if [ ! -f "$inc/internal/pycore_frame.h" ]; then
  echo "python-offsets: $inc/internal/pycore_frame.h missing: apt-get install python$ver-dev" >&2
  exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -I"$inc" -o "$tmp/offsets" scripts/python-offsets.c
out=user/python/layout_${ver/./}.inc
"$tmp/offsets" >"$out"
echo "python-offsets: wrote $out" >&2
