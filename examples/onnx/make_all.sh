#!/usr/bin/env bash
# Generates the small example models (mlp, cnn, cnn_train, gpt) into DIR
# (default: examples/onnx/models). Usage: examples/onnx/make_all.sh [DIR]
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
OUT="${1:-$HERE/models}"
PY="$ROOT/.venv/bin/python"
[[ -x "$PY" ]] || { echo "make_all.sh: run scripts/setup.sh first" >&2; exit 1; }
for name in mlp cnn gpt; do
  "$PY" "$HERE/make_$name.py" --out "$OUT" --quiet
done
"$PY" "$HERE/make_cnn.py" --training --out "$OUT" --quiet
