#!/usr/bin/env bash
# Imports the PyTorch-exported example models (MLP, CNN with BatchNorm in
# inference and in training mode, small GPT) to the nn dialect with their batch dimension bound, and checks that
# every value in the result has a static shape and that each model's
# characteristic ops survived the conversion.
# Usage: import_examples.sh ZTC REPO_ROOT
set -euo pipefail
ZTC="$1"
ROOT="$2"
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
"$ROOT/examples/onnx/make_all.sh" "$OUT/models"

check() {
  local name="$1" shape="$2"; shift 2
  local ir="$OUT/$name.mlir"
  "$ZTC" import "$OUT/models/$name.onnx" --input-shape "$shape" --emit nn -o "$ir"
  if grep -qE 'tensor<[^>]*\?|tensor<\*|onnx\.(node|constant|none)' "$ir"; then
    echo "FAIL $name: dynamic shapes or unconverted onnx ops remain" >&2
    grep -nE 'tensor<[^>]*\?|tensor<\*|onnx\.(node|constant|none)' "$ir" | head -5 >&2
    exit 1
  fi
  for op in "$@"; do
    if ! grep -q "$op" "$ir"; then
      echo "FAIL $name: expected $op in the nn IR" >&2
      exit 1
    fi
  done
  echo "ok $name ($(grep -c ' = nn\.' "$ir") nn ops)"
}

check mlp x=8x64 nn.matmul nn.relu
check cnn x=8x1x8x8 nn.conv2d nn.batch_norm nn.max_pool2d nn.matmul
# Training mode: one nn.batch_norm_training (batch statistics), running
# statistics returned as updates.
check cnn_train x=8x1x8x8 nn.conv2d nn.batch_norm_training nn.max_pool2d \
  'train.update_of = "features.5.running_var"'
# The GPT's GELU, exported as Div, Erf, Add, Mul and Mul, is one nn.gelu.
check gpt tokens=4x16 nn.gather nn.layer_norm nn.softmax nn.gelu nn.where \
  'tensor<4x2x16x16xf32>'
