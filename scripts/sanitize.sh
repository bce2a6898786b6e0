#!/usr/bin/env bash
# Builds ztc with clang-22, AddressSanitizer and UndefinedBehaviorSanitizer
# into build-sanitize/ (with the libFuzzer targets of test/fuzz) and runs the
# test suite there (test/CMakeLists.txt leaves out or samples what repeats
# the release build's work without adding sanitizer coverage): any sanitizer
# finding fails its test.
# Usage: scripts/sanitize.sh [--build-only] [extra ctest arguments]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_ONLY=0
if [[ "${1:-}" == --build-only ]]; then
  BUILD_ONLY=1
  shift
fi
"$ROOT/scripts/setup.sh"
BUILD="$ROOT/build-sanitize"
if [[ ! -f "$BUILD/build.ninja" ]]; then
  cmake -G Ninja -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
    -DZTC_SANITIZE=ON -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit >/dev/null
fi
# (pipefail: a failed build fails the script, whatever grep finds.)
ninja -C "$BUILD" -j "${ZTC_JOBS:-2}" all ztc-unit-tests |
  { grep -vE '^\[[0-9]+/[0-9]+\] ' || true; }
((BUILD_ONLY)) && exit 0
cd "$BUILD"
# A finding in any process fails its test (lit passes *SAN_OPTIONS on).
source "$ROOT/scripts/sanitizer-options.sh"
# On failure, each failed test's failing lines again, at the end of the log.
ctest --output-on-failure -j "${ZTC_JOBS:-2}" "$@" ||
  { rc=$?; python3 "$ROOT/scripts/failure_digest.py" "$BUILD"; exit $rc; }
