#!/usr/bin/env bash
# The main job: sets up, builds, generates the example GPT with PyTorch and
# imports it with ztc, printing its nn IR and a summary.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/build.sh" ztc
MODELS="$ROOT/examples/onnx/models"
if [[ ! -f "$MODELS/gpt.onnx" ]]; then
  "$ROOT/.venv/bin/python" "$ROOT/examples/onnx/make_gpt.py" --out "$MODELS"
fi
"$ROOT/build/bin/ztc" import "$MODELS/gpt.onnx" --input-shape tokens=4x16 \
  --emit nn --summary
