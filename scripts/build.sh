#!/usr/bin/env bash
# Sets up the machine (scripts/setup.sh) and builds ztc into build/.
# Usage: scripts/build.sh [extra ninja targets]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/setup.sh"
BUILD="$ROOT/build"
if [[ ! -f "$BUILD/build.ninja" ]]; then
  cmake -G Ninja -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit >/dev/null
fi
# Two compile jobs at most: MLIR translation units need about 1 GB each.
# (pipefail: a failed build fails the script, whatever grep finds.)
ninja -C "$BUILD" -j "${ZTC_JOBS:-2}" "$@" |
  { grep -vE '^\[[0-9]+/[0-9]+\] ' || true; }
