#!/usr/bin/env bash
# Checks that the executable $1 (ztc-train) contains nothing of MLIR or LLVM:
# no symbol in their namespaces (the libraries are static, so a linked
# piece shows as symbols) and no dynamic dependency on libLLVM or libMLIR.
# Fails, printing what it found, otherwise.
set -euo pipefail
binary="$1"
[[ -x "$binary" ]] || { echo "check_no_mlir: no executable at $binary" >&2; exit 1; }
all="$(nm -C "$binary" 2>/dev/null || true)"
symbols="$(grep -E ' (mlir|llvm)::' <<<"$all" || true)"
if [[ -n "$symbols" ]]; then
  echo "check_no_mlir: $binary links MLIR/LLVM code:" >&2
  echo "$symbols" | head -20 >&2
  exit 1
fi
libraries="$(ldd "$binary" | grep -iE 'libLLVM|libMLIR' || true)"
if [[ -n "$libraries" ]]; then
  echo "check_no_mlir: $binary loads LLVM/MLIR libraries:" >&2
  echo "$libraries" >&2
  exit 1
fi
# The check itself must see symbols: a stripped binary would pass vacuously.
grep -q 'ztc::rt::train' <<<"$all" || {
  echo "check_no_mlir: $binary has no symbol table to check" >&2; exit 1; }
echo "check_no_mlir: $binary has no MLIR or LLVM code ($(wc -l <<<"$all") symbols checked)"
