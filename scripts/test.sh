#!/usr/bin/env bash
# Sets up, builds and runs every test: lit (IR and driver behaviour),
# GoogleTest units, and the end-to-end checks (import conformance over the
# ONNX backend node tests, the PyTorch example models), all through ctest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/build.sh" all ztc-unit-tests
cd "$ROOT/build"
ctest --output-on-failure -j "${ZTC_JOBS:-2}"
