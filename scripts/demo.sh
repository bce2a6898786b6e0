#!/usr/bin/env bash
# The main job: sets up, builds, exports the example GPT with PyTorch, imports
# it with ztc (nn IR and a summary), then compiles and runs its forward step
# on the CPU and compares the logits with PyTorch's.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/build.sh" ztc
MODELS="$ROOT/examples/onnx/models"
if [[ ! -f "$MODELS/gpt.onnx" ]]; then
  "$ROOT/.venv/bin/python" "$ROOT/examples/onnx/make_gpt.py" --out "$MODELS"
fi
ZTC="$ROOT/build/bin/ztc"
"$ZTC" import "$MODELS/gpt.onnx" --input-shape tokens=4x16 --emit nn --summary
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
"$ZTC" run "$MODELS/gpt.onnx" --data "$MODELS/gpt_data" --output-dir "$OUT" \
  --repeat 20
"$ROOT/.venv/bin/python" - "$OUT/logits.npy" "$MODELS/gpt_ref/logits.npy" <<'PY'
import sys
import numpy as np
ztc, torch = np.load(sys.argv[1]), np.load(sys.argv[2])
error = np.abs(ztc - torch).max() / np.abs(torch).max()
print("logits %s: max relative difference to PyTorch %.1e" % (list(ztc.shape), error))
PY
