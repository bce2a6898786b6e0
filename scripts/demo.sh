#!/usr/bin/env bash
# The main job: sets up, builds, exports the example MLP with PyTorch,
# compiles its training step, trains it on scikit-learn's handwritten digits
# on the CPU, exports the trained model and measures its held-out accuracy
# with `ztc run`.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/build.sh" ztc
PY="$ROOT/.venv/bin/python"
ZTC="$ROOT/build/bin/ztc"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

"$PY" "$ROOT/examples/onnx/make_mlp.py" --out "$WORK" --quiet
"$PY" "$ROOT/examples/onnx/prepare_digits.py" --out "$WORK/digits"
"$ZTC" compile "$WORK/mlp.onnx" -o "$WORK/mlp.ztc" --batch-size 32 \
  --loss cross_entropy --optimizer adamw --lr 3e-3
"$ZTC" train "$WORK/mlp.ztc" --data "$WORK/digits/train" --epochs 30 \
  --log-every 200 --save "$WORK/checkpoint"
"$ZTC" export "$WORK/mlp.ztc" --checkpoint "$WORK/checkpoint" \
  -o "$WORK/trained.onnx"

mkdir -p "$WORK/test"
cp "$WORK/digits/test/x.npy" "$WORK/test/x.npy"
"$ZTC" run "$WORK/trained.onnx" --data "$WORK/test" --output-dir "$WORK/out"
"$PY" - "$WORK/out/logits.npy" "$WORK/digits/test/labels.npy" <<'PY'
import sys
import numpy as np
logits, labels = np.load(sys.argv[1]), np.load(sys.argv[2])
print("held-out accuracy: %.1f%% on %d digits" % (100 * (logits.argmax(-1) == labels).mean(), len(labels)))
PY
