// RUN: ztc-opt %s -split-input-file --ztc-schedule-collectives | FileCheck %s

// Two gradient buckets. Each reduce-scatter runs on stream 1 once stream 0
// has signalled that its bucket is complete. The scaling of the first
// result moves down to where its result is read, so the second bucket is
// computed while the first is reduced; stream 0 waits for the first
// reduction before the second starts (at most two buckets in flight), and
// for the second right before its result is read.

// CHECK-LABEL: func.func @buckets
// CHECK: kernel.elementwise ins(%arg0
// CHECK: %[[READY1:.+]] = kernel.signal : !kernel.event
// CHECK-NEXT: kernel.wait %[[READY1]] {kernel.stream = 1 : i64}
// CHECK-NEXT: kernel.collective reduce_scatter ins(%[[B1:.+]] : memref<8xf32>) outs(%[[R1:.+]] : memref<4xf32>) {{.*}}kernel.stream = 1 : i64
// CHECK-NEXT: %[[DONE1:.+]] = kernel.signal {kernel.stream = 1 : i64}
// CHECK-NOT: kernel.wait %[[DONE1]]
// CHECK: kernel.elementwise ins(%arg1
// CHECK: kernel.wait %[[DONE1]]
// CHECK-NEXT: %[[READY2:.+]] = kernel.signal : !kernel.event
// CHECK-NEXT: kernel.wait %[[READY2]] {kernel.stream = 1 : i64}
// CHECK-NEXT: kernel.collective reduce_scatter {{.*}}outs(%[[R2:.+]] : memref<4xf32>) {{.*}}kernel.stream = 1 : i64
// CHECK-NEXT: %[[DONE2:.+]] = kernel.signal {kernel.stream = 1 : i64}
// CHECK: kernel.elementwise ins(%[[R1]] : memref<4xf32>)
// CHECK: kernel.wait %[[DONE2]]
// CHECK-NEXT: kernel.elementwise ins({{.*}}, %[[R2]], %arg2
// CHECK-NEXT: ^bb0
// CHECK: return
func.func @buckets(%g1: memref<8xf32>, %g2: memref<8xf32>, %w: memref<4xf32>) -> memref<4xf32> {
  %b1 = kernel.alloc : memref<8xf32>
  kernel.elementwise ins(%g1 : memref<8xf32>) outs(%b1 : memref<8xf32>) {
  ^bb0(%v: f32):
    %r = arith.negf %v : f32
    kernel.yield %r : f32
  }
  %r1 = kernel.alloc : memref<4xf32>
  kernel.collective reduce_scatter ins(%b1 : memref<8xf32>) outs(%r1 : memref<4xf32>) {world_size = 2 : i64}
  %s1 = kernel.alloc : memref<4xf32>
  kernel.elementwise ins(%r1 : memref<4xf32>) outs(%s1 : memref<4xf32>) {
  ^bb0(%v: f32):
    %h = arith.constant 5.000000e-01 : f32
    %r = arith.mulf %v, %h : f32
    kernel.yield %r : f32
  }
  %b2 = kernel.alloc : memref<8xf32>
  kernel.elementwise ins(%g2 : memref<8xf32>) outs(%b2 : memref<8xf32>) {
  ^bb0(%v: f32):
    %r = arith.negf %v : f32
    kernel.yield %r : f32
  }
  %r2 = kernel.alloc : memref<4xf32>
  kernel.collective reduce_scatter ins(%b2 : memref<8xf32>) outs(%r2 : memref<4xf32>) {world_size = 2 : i64}
  %u = kernel.alloc : memref<4xf32>
  kernel.elementwise ins(%s1, %r2, %w : memref<4xf32>, memref<4xf32>, memref<4xf32>) outs(%u : memref<4xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %t = arith.addf %a, %b : f32
    %r = arith.addf %t, %c : f32
    kernel.yield %r : f32
  }
  return %u : memref<4xf32>
}

// -----

// A collective whose input stream 0 overwrites later: stream 0 waits for
// it before the overwrite, even though nothing reads its result before,
// and computes what does not depend on it meanwhile.

// CHECK-LABEL: func.func @overwritten_input
// CHECK: kernel.collective all_reduce {{.*}}kernel.stream = 1 : i64
// CHECK-NEXT: %[[DONE:.+]] = kernel.signal {kernel.stream = 1 : i64}
// CHECK: kernel.elementwise ins(%arg0 : memref<4xf32>) outs(%{{.+}} : memref<4xf32>)
// CHECK: kernel.wait %[[DONE]]
// CHECK-NEXT: kernel.elementwise ins(%arg0 : memref<4xf32>) outs(%arg1
func.func @overwritten_input(%x: memref<4xf32>, %g: memref<4xf32>) -> (memref<4xf32>, memref<4xf32>) {
  %r = kernel.alloc : memref<4xf32>
  kernel.collective all_reduce ins(%g : memref<4xf32>) outs(%r : memref<4xf32>) {world_size = 2 : i64}
  %y = kernel.alloc : memref<4xf32>
  kernel.elementwise ins(%x : memref<4xf32>) outs(%y : memref<4xf32>) {
  ^bb0(%v: f32):
    %n = arith.negf %v : f32
    kernel.yield %n : f32
  }
  kernel.elementwise ins(%x : memref<4xf32>) outs(%g : memref<4xf32>) {
  ^bb0(%v: f32):
    kernel.yield %v : f32
  }
  return %r, %y : memref<4xf32>, memref<4xf32>
}

// -----

// Nothing to overlap: a collective whose result the very next op reads
// stays on stream 0 (a second stream would only add hand-overs), and
// waits for stream 1's earlier collective first, so collectives run one
// at a time, in program order.

// CHECK-LABEL: func.func @nothing_to_overlap
// CHECK: kernel.collective all_reduce ins(%arg0 {{.*}}kernel.stream = 1 : i64
// CHECK-NEXT: %[[DONE:.+]] = kernel.signal {kernel.stream = 1 : i64}
// CHECK: kernel.elementwise ins(%arg2
// CHECK: kernel.wait %[[DONE]]
// CHECK-NEXT: kernel.collective all_reduce ins(%arg1 : memref<4xf32>) outs(%{{.+}} : memref<4xf32>) {world_size = 2 : i64}
// CHECK-NOT: kernel.signal
// CHECK: return
func.func @nothing_to_overlap(%g1: memref<4xf32>, %g2: memref<4xf32>, %x: memref<4xf32>) -> (memref<4xf32>, memref<4xf32>, memref<4xf32>) {
  %r1 = kernel.alloc : memref<4xf32>
  kernel.collective all_reduce ins(%g1 : memref<4xf32>) outs(%r1 : memref<4xf32>) {world_size = 2 : i64}
  %y = kernel.alloc : memref<4xf32>
  kernel.elementwise ins(%x : memref<4xf32>) outs(%y : memref<4xf32>) {
  ^bb0(%v: f32):
    %n = arith.negf %v : f32
    kernel.yield %n : f32
  }
  %r2 = kernel.alloc : memref<4xf32>
  kernel.collective all_reduce ins(%g2 : memref<4xf32>) outs(%r2 : memref<4xf32>) {world_size = 2 : i64}
  %z = kernel.alloc : memref<4xf32>
  kernel.elementwise ins(%r2 : memref<4xf32>) outs(%z : memref<4xf32>) {
  ^bb0(%v: f32):
    %n = arith.negf %v : f32
    kernel.yield %n : f32
  }
  return %r1, %y, %z : memref<4xf32>, memref<4xf32>, memref<4xf32>
}

// -----

// No collectives: nothing changes.

// CHECK-LABEL: func.func @local
// CHECK-NOT: kernel.signal
// CHECK-NOT: kernel.stream
func.func @local(%x: memref<4xf32>) -> memref<4xf32> {
  %a = kernel.alloc : memref<4xf32>
  kernel.elementwise ins(%x : memref<4xf32>) outs(%a : memref<4xf32>) {
  ^bb0(%v: f32):
    %r = arith.negf %v : f32
    kernel.yield %r : f32
  }
  return %a : memref<4xf32>
}

// -----

// A shard takes this rank's block without communicating: it is compute a
// collective overlaps, like any kernel, and stays on stream 0.

// CHECK-LABEL: func.func @shard_is_compute
// CHECK: kernel.collective all_reduce ins(%arg0 {{.*}}kernel.stream = 1 : i64
// CHECK-NEXT: %[[DONE:.+]] = kernel.signal {kernel.stream = 1 : i64}
// CHECK: kernel.collective shard ins(%arg1 : memref<8xf32>) outs(%{{.+}} : memref<4xf32>) {world_size = 2 : i64}
// CHECK: kernel.wait %[[DONE]]
// CHECK-NEXT: return
func.func @shard_is_compute(%g: memref<4xf32>, %p: memref<8xf32>) -> (memref<4xf32>, memref<4xf32>) {
  %r = kernel.alloc : memref<4xf32>
  kernel.collective all_reduce ins(%g : memref<4xf32>) outs(%r : memref<4xf32>) {world_size = 2 : i64}
  %m = kernel.alloc : memref<4xf32>
  kernel.collective shard ins(%p : memref<8xf32>) outs(%m : memref<4xf32>) {world_size = 2 : i64}
  return %r, %m : memref<4xf32>, memref<4xf32>
}
