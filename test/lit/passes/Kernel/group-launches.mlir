// ztc-group-launches gives consecutive fused loops of one stream that share
// no byte one of them writes the same kernel.launch_group, which the CUDA
// emitter launches as one kernel. It runs on planned steps: arena buffers
// conflict when their planned bytes overlap.
//
// RUN: ztc-opt %s -split-input-file -ztc-group-launches | FileCheck %s
// RUN: ztc-opt %s -split-input-file -ztc-group-launches=max-params=6 | FileCheck %s --check-prefix=PARAMS

// Three in-place updates of different arguments, reading one shared
// gradient scale: one group. Allocations between them do not end it.
// CHECK-LABEL: func.func @updates
// CHECK: kernel.elementwise {{.*}} attributes {kernel.launch_group = 0 : i64}
// CHECK: kernel.alloc
// CHECK: kernel.elementwise {{.*}} attributes {kernel.launch_group = 0 : i64}
// CHECK: kernel.elementwise {{.*}} attributes {kernel.launch_group = 0 : i64}
// With at most 6 pointers a kernel, the third update (3 more) starts a new
// group, which has one loop and so no attribute.
// PARAMS-LABEL: func.func @updates
// PARAMS: kernel.elementwise {{.*}} attributes {kernel.launch_group = 0 : i64}
// PARAMS: kernel.elementwise {{.*}} attributes {kernel.launch_group = 0 : i64}
// PARAMS: kernel.elementwise
// PARAMS-NOT: launch_group
// PARAMS-SAME: {
func.func @updates(%p0: memref<64xf32>, %p1: memref<32xf32>, %p2: memref<16xf32>, %s: memref<f32>) {
  kernel.elementwise ins(%p0, %s : memref<64xf32>, memref<f32>) outs(%p0 : memref<64xf32>) {
  ^bb0(%a: f32, %b: f32):
    %m = arith.mulf %a, %b : f32
    kernel.yield %m : f32
  }
  %unused = kernel.alloc {offset = 0 : i64} : memref<4xf32>
  kernel.elementwise ins(%p1, %s : memref<32xf32>, memref<f32>) outs(%p1 : memref<32xf32>) {
  ^bb0(%a: f32, %b: f32):
    %m = arith.mulf %a, %b : f32
    kernel.yield %m : f32
  }
  kernel.elementwise ins(%p2, %s : memref<16xf32>, memref<f32>) outs(%p2 : memref<16xf32>) {
  ^bb0(%a: f32, %b: f32):
    %m = arith.mulf %a, %b : f32
    kernel.yield %m : f32
  }
  return
}

// -----

// The second loop reads what the first writes: two launches, in order.
// CHECK-LABEL: func.func @dependent
// CHECK-NOT: launch_group
// CHECK: return
func.func @dependent(%x: memref<64xf32>, %y: memref<64xf32>) {
  %a = kernel.alloc {offset = 0 : i64} : memref<64xf32>
  kernel.elementwise ins(%x : memref<64xf32>) outs(%a : memref<64xf32>) {
  ^bb0(%p: f32):
    kernel.yield %p : f32
  }
  kernel.elementwise ins(%a : memref<64xf32>) outs(%y : memref<64xf32>) {
  ^bb0(%p: f32):
    kernel.yield %p : f32
  }
  return
}

// -----

// The second loop reads %a, the first's output: two launches. The plan
// gave the third loop's output %b the bytes of %a (offset 0), dead after
// the second loop: run together, the third could overwrite what the
// second still reads, so it starts a launch of its own. The fourth's
// output lies bytes apart (offset 256): it joins the third.
// CHECK-LABEL: func.func @reused_bytes
// CHECK: kernel.elementwise
// CHECK-NOT: launch_group
// CHECK-SAME: {
// CHECK: kernel.elementwise
// CHECK-NOT: launch_group
// CHECK-SAME: {
// CHECK: kernel.elementwise {{.*}} attributes {kernel.launch_group = 0 : i64}
// CHECK: kernel.elementwise {{.*}} attributes {kernel.launch_group = 0 : i64}
func.func @reused_bytes(%x: memref<64xf32>, %y: memref<64xf32>) {
  %a = kernel.alloc {offset = 0 : i64} : memref<64xf32>
  kernel.elementwise ins(%x : memref<64xf32>) outs(%a : memref<64xf32>) {
  ^bb0(%p: f32):
    kernel.yield %p : f32
  }
  kernel.elementwise ins(%a : memref<64xf32>) outs(%x : memref<64xf32>) {
  ^bb0(%p: f32):
    kernel.yield %p : f32
  }
  %b = kernel.alloc {offset = 0 : i64} : memref<64xf32>
  kernel.elementwise ins(%y : memref<64xf32>) outs(%b : memref<64xf32>) {
  ^bb0(%p: f32):
    kernel.yield %p : f32
  }
  %c = kernel.alloc {offset = 256 : i64} : memref<64xf32>
  kernel.elementwise ins(%y : memref<64xf32>) outs(%c : memref<64xf32>) {
  ^bb0(%p: f32):
    kernel.yield %p : f32
  }
  return
}

// -----

// Writing an argument through a view conflicts with reading it directly;
// two loops writing the same argument conflict too.
// CHECK-LABEL: func.func @views_and_arguments
// CHECK-NOT: launch_group
// CHECK: return
func.func @views_and_arguments(%x: memref<8x8xf32>, %y: memref<64xf32>, %z: memref<8x8xf32>, %w: memref<8x8xf32>) {
  %v = kernel.view %x : memref<8x8xf32> to memref<64xf32>
  kernel.elementwise ins(%y : memref<64xf32>) outs(%v : memref<64xf32>) {
  ^bb0(%p: f32):
    kernel.yield %p : f32
  }
  kernel.elementwise ins(%x : memref<8x8xf32>) outs(%z : memref<8x8xf32>) {
  ^bb0(%p: f32):
    kernel.yield %p : f32
  }
  kernel.elementwise ins(%w : memref<8x8xf32>) outs(%z : memref<8x8xf32>) {
  ^bb0(%p: f32):
    kernel.yield %p : f32
  }
  return
}

// -----

// A library call between two loops ends the run, and so does a change of
// stream; constants are only read, so two loops reading one may share a
// launch.
// CHECK-LABEL: func.func @boundaries
// CHECK: kernel.elementwise
// CHECK-NOT: launch_group
// CHECK-SAME: {
// CHECK: kernel.call "softmax"
// CHECK: kernel.elementwise {{.*}} attributes {kernel.launch_group = 0 : i64}
// CHECK: kernel.elementwise {{.*}} attributes {kernel.launch_group = 0 : i64}
// CHECK: kernel.elementwise
// CHECK-NOT: launch_group
// CHECK-SAME: kernel.stream = 1
func.func @boundaries(%x: memref<64xf32>, %y: memref<64xf32>, %z: memref<64xf32>, %w: memref<64xf32>) {
  %k = kernel.constant dense<2.0> : tensor<64xf32> : memref<64xf32>
  kernel.elementwise ins(%k : memref<64xf32>) outs(%x : memref<64xf32>) {
  ^bb0(%p: f32):
    kernel.yield %p : f32
  }
  kernel.call "softmax" ins(%x : memref<64xf32>) outs(%y : memref<64xf32>) {config = {axis = 0 : i64}}
  kernel.elementwise ins(%k : memref<64xf32>) outs(%z : memref<64xf32>) {
  ^bb0(%p: f32):
    kernel.yield %p : f32
  }
  kernel.elementwise ins(%k : memref<64xf32>) outs(%x : memref<64xf32>) {
  ^bb0(%p: f32):
    kernel.yield %p : f32
  }
  kernel.elementwise ins(%k : memref<64xf32>) outs(%w : memref<64xf32>) attributes {kernel.stream = 1 : i64} {
  ^bb0(%p: f32):
    kernel.yield %p : f32
  }
  return
}
