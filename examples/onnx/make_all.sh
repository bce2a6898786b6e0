#!/usr/bin/env bash
# Generates the small example models (mlp, cnn, cnn_train, gpt) into DIR
# (default: examples/onnx/models). Usage: examples/onnx/make_all.sh [DIR]
#
# With ZTC_EXAMPLE_MODELS naming a directory this script filled and marked
# complete (`.complete`: ctest's example-models fixture), it copies them
# from there instead of generating them again: a dozen tests share one set.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
OUT="${1:-$HERE/models}"
if [[ -n "${ZTC_EXAMPLE_MODELS:-}" && -f "$ZTC_EXAMPLE_MODELS/.complete" ]]; then
  mkdir -p "$OUT"
  cp -R "$ZTC_EXAMPLE_MODELS"/. "$OUT"/
  rm -f "$OUT/.complete"
  exit 0
fi
PY="$ROOT/.venv/bin/python"
[[ -x "$PY" ]] || { echo "make_all.sh: run scripts/setup.sh first" >&2; exit 1; }
for name in mlp cnn gpt; do
  "$PY" "$HERE/make_$name.py" --out "$OUT" --quiet
done
"$PY" "$HERE/make_cnn.py" --training --out "$OUT" --quiet
