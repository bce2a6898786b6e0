// RUN: ztc-opt %s | ztc-opt | FileCheck %s

// Every kernel op round-trips: planned allocs, constants, views, a fused
// elementwise body, a reduction and a library call.
// CHECK-LABEL: func.func @step
// CHECK: %[[A:.+]] = kernel.alloc {offset = 0 : i64} : memref<2x3xf32>
// CHECK: %[[K:.+]] = kernel.constant dense<1.000000e+00> : tensor<3xf32> : memref<3xf32>
// CHECK: kernel.elementwise ins(%[[X:.+]], %[[K]] : memref<2x3xf32>, memref<3xf32>) outs(%[[A]] : memref<2x3xf32>) {
// CHECK:   arith.addf
// CHECK:   kernel.yield %{{.+}} : f32
// CHECK: %[[V:.+]] = kernel.view %[[A]] : memref<2x3xf32> to memref<3x2xf32>
// CHECK: kernel.call "transpose" ins(%[[V]] : memref<3x2xf32>) outs(%{{.+}} : memref<2x3xf32>) {config = {perm = array<i64: 1, 0>}}
// CHECK: kernel.reduce mean ins(%[[X]], %[[K]] : memref<2x3xf32>, memref<3xf32>) outs(%{{.+}} : memref<1x3xf32>) attributes {axes = array<i64: 0>, space = array<i64: 2, 3>} {
// CHECK:   arith.mulf
// CHECK:   kernel.yield %{{.+}} : f32
// Several outputs sum side by side; the CUDA plan's partial sums go to
// scratch.
// CHECK: kernel.reduce sum ins(%[[X]] : memref<2x3xf32>) outs(%[[R0:.+]], %[[R1:.+]] : memref<3xf32>, memref<3xf32>) scratch(%[[S:.+]] : memref<64xi8>) attributes {axes = array<i64: 0>, space = array<i64: 2, 3>} {
// CHECK:   kernel.yield %{{.+}}, %{{.+}} : f32, f32
func.func @step(%x: memref<2x3xf32>) -> memref<2x3xf32> {
  %a = kernel.alloc {offset = 0 : i64} : memref<2x3xf32>
  %k = kernel.constant dense<1.0> : tensor<3xf32> : memref<3xf32>
  kernel.elementwise ins(%x, %k : memref<2x3xf32>, memref<3xf32>) outs(%a : memref<2x3xf32>) {
  ^bb0(%p: f32, %q: f32):
    %s = arith.addf %p, %q : f32
    kernel.yield %s : f32
  }
  %v = kernel.view %a : memref<2x3xf32> to memref<3x2xf32>
  %b = kernel.alloc {offset = 256 : i64} : memref<2x3xf32>
  kernel.call "transpose" ins(%v : memref<3x2xf32>) outs(%b : memref<2x3xf32>) {config = {perm = array<i64: 1, 0>}}
  %m = kernel.alloc {offset = 512 : i64} : memref<1x3xf32>
  kernel.reduce mean ins(%x, %k : memref<2x3xf32>, memref<3xf32>) outs(%m : memref<1x3xf32>) attributes {axes = array<i64: 0>, space = array<i64: 2, 3>} {
  ^bb0(%p: f32, %q: f32):
    %s = arith.mulf %p, %q : f32
    kernel.yield %s : f32
  }
  %r0 = kernel.alloc {offset = 768 : i64} : memref<3xf32>
  %r1 = kernel.alloc {offset = 1024 : i64} : memref<3xf32>
  %sc = kernel.alloc {offset = 1280 : i64} : memref<64xi8>
  kernel.reduce sum ins(%x : memref<2x3xf32>) outs(%r0, %r1 : memref<3xf32>, memref<3xf32>) scratch(%sc : memref<64xi8>) attributes {axes = array<i64: 0>, space = array<i64: 2, 3>} {
  ^bb0(%p: f32):
    %s = arith.mulf %p, %p : f32
    kernel.yield %p, %s : f32, f32
  }
  return %b : memref<2x3xf32>
}

// -----

// Streams: an event signalled on stream 1, waited for on stream 0.
// CHECK-LABEL: func.func @streams
// CHECK: %[[E:.+]] = kernel.signal {kernel.stream = 1 : i64} : !kernel.event
// CHECK: kernel.wait %[[E]]
func.func @streams() {
  %e = kernel.signal {kernel.stream = 1 : i64} : !kernel.event
  kernel.wait %e
  return
}

// -----

// Finite checks name their pass as a keyword, or quoted where it has a
// space.
// CHECK-LABEL: func.func @checks
// CHECK: kernel.check_finite forward %{{.+}} {node = "/h/Pow", op = "pow"} : memref<4xf16>
// CHECK: kernel.check_finite "recomputed forward" %{{.+}} {node = "/h/Pow", op = "pow"} : memref<4xf16>
// CHECK: kernel.check_finite update %{{.+}} {node = "", op = "sub"} : memref<4xf16>
func.func @checks(%h: memref<4xf16>) {
  kernel.check_finite forward %h {node = "/h/Pow", op = "pow"} : memref<4xf16>
  kernel.check_finite "recomputed forward" %h {node = "/h/Pow", op = "pow"} : memref<4xf16>
  kernel.check_finite update %h {node = "", op = "sub"} : memref<4xf16>
  return
}

// -----

// A call with the scratch memory its CUDA kernel works in
// (ztc-plan-scratch).
// CHECK-LABEL: func.func @scratch
// CHECK: %[[S:.+]] = kernel.alloc {offset = 0 : i64} : memref<512xi8>
// CHECK: kernel.call "reduce_sum" ins(%{{.+}} : memref<65536x4xf32>) outs(%{{.+}} : memref<4xf32>) scratch(%[[S]] : memref<512xi8>) {config = {axes = array<i64: 0>, keepdims = false}}
func.func @scratch(%x: memref<65536x4xf32>) -> memref<4xf32> {
  %s = kernel.alloc {offset = 0 : i64} : memref<512xi8>
  %y = kernel.alloc {offset = 512 : i64} : memref<4xf32>
  kernel.call "reduce_sum" ins(%x : memref<65536x4xf32>) outs(%y : memref<4xf32>) scratch(%s : memref<512xi8>) {config = {axes = array<i64: 0>, keepdims = false}}
  return %y : memref<4xf32>
}
