// ztc-plan-scratch's diagnostics: an element type the CUDA library has no
// kernel for, and a negative reservation.
//
// RUN: ztc-opt %s -verify-diagnostics -ztc-plan-scratch
// RUN: not ztc-opt %s -ztc-plan-scratch=reserved-bytes=-1 2>&1 | FileCheck %s --check-prefix=NEGATIVE

// NEGATIVE: error: reserved-bytes must not be negative and input-sets at least 1, got -1 and 1
func.func @i16(%x: memref<65536x4xi16>, %y: memref<4xi16>) {
  // expected-error @+1 {{'kernel.call' op 'reduce_sum' over 'i16': the CUDA library has no such kernel to plan scratch for}}
  kernel.call "reduce_sum" ins(%x : memref<65536x4xi16>) outs(%y : memref<4xi16>) {config = {axes = array<i64: 0>, keepdims = false}}
  return
}
