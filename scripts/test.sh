#!/usr/bin/env bash
# Sets up, builds and runs every test: lit (IR and driver behaviour),
# GoogleTest units, and the end-to-end checks (import conformance over the
# ONNX backend node tests, the PyTorch example models), all through ctest;
# then the suite in the sanitizer build (scripts/sanitize.sh: ASan +
# UBSan, generated steps included) and every fuzz target for
# ZTC_FUZZ_SECONDS seconds (default 30; scripts/fuzz.sh).
# Usage: scripts/test.sh [--quick]   --quick: the first suite only
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
QUICK=0
case "${1:-}" in
  --quick) QUICK=1 ;;
  "") ;;
  *) echo "test.sh: unknown argument: $1 (usage: scripts/test.sh [--quick])" >&2; exit 2 ;;
esac
"$ROOT/scripts/build.sh" all ztc-unit-tests
# On failure, each failed test's failing lines again, at the end of the log.
(cd "$ROOT/build" && ctest --output-on-failure -j "${ZTC_JOBS:-2}") ||
  { rc=$?; python3 "$ROOT/scripts/failure_digest.py" "$ROOT/build"; exit $rc; }
((QUICK)) && exit 0
echo "test.sh: the suite again under AddressSanitizer and UndefinedBehaviorSanitizer"
"$ROOT/scripts/sanitize.sh"
echo "test.sh: fuzzing"
"$ROOT/scripts/fuzz.sh" "${ZTC_FUZZ_SECONDS:-30}"
