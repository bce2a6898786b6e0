// RUN: ztc-opt %s --canonicalize --cse | FileCheck %s

// Kernel ops declare their memory effects: canonicalize and CSE never drop
// a kernel that writes a buffer, even one nothing reads afterwards (an
// in-place update of an argument), and never merge two identical kernels
// that write (the second may see what the first wrote). An alloc no kernel
// uses is dead, and goes.

// CHECK-LABEL: func.func @writes_survive
// CHECK-SAME: (%[[X:.+]]: memref<4xf32>, %[[W:.+]]: memref<4xf32>)
// CHECK-NOT: kernel.alloc
// CHECK: kernel.elementwise ins(%[[X]], %[[W]] : memref<4xf32>, memref<4xf32>) outs(%[[W]] : memref<4xf32>)
// CHECK: kernel.elementwise ins(%[[X]], %[[W]] : memref<4xf32>, memref<4xf32>) outs(%[[W]] : memref<4xf32>)
// CHECK: kernel.call "softmax" ins(%[[X]] : memref<4xf32>) outs(%[[W]] : memref<4xf32>)
// CHECK: kernel.call "softmax" ins(%[[X]] : memref<4xf32>) outs(%[[W]] : memref<4xf32>)
// CHECK: return
func.func @writes_survive(%x: memref<4xf32>, %w: memref<4xf32>) {
  %unused = kernel.alloc : memref<4xf32>
  kernel.elementwise ins(%x, %w : memref<4xf32>, memref<4xf32>) outs(%w : memref<4xf32>) {
  ^bb0(%a: f32, %b: f32):
    %s = arith.addf %a, %b : f32
    kernel.yield %s : f32
  }
  kernel.elementwise ins(%x, %w : memref<4xf32>, memref<4xf32>) outs(%w : memref<4xf32>) {
  ^bb0(%a: f32, %b: f32):
    %s = arith.addf %a, %b : f32
    kernel.yield %s : f32
  }
  kernel.call "softmax" ins(%x : memref<4xf32>) outs(%w : memref<4xf32>) {config = {axis = 0 : i64}}
  kernel.call "softmax" ins(%x : memref<4xf32>) outs(%w : memref<4xf32>) {config = {axis = 0 : i64}}
  return
}

// A kernel writing an alloc that nothing reads still runs: its effect is on
// memory, and deciding it is dead is the planner's business, not a cleanup's.
// CHECK-LABEL: func.func @unread_alloc
// CHECK: %[[A:.+]] = kernel.alloc : memref<4xf32>
// CHECK: kernel.call "softmax" ins(%{{.+}} : memref<4xf32>) outs(%[[A]] : memref<4xf32>)
func.func @unread_alloc(%x: memref<4xf32>) {
  %a = kernel.alloc : memref<4xf32>
  kernel.call "softmax" ins(%x : memref<4xf32>) outs(%a : memref<4xf32>) {config = {axis = 0 : i64}}
  return
}
