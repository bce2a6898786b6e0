// RUN: ztc-opt %s -split-input-file --ztc-plan-memory | FileCheck %s

// Two streams: stream 1 writes %a while stream 0 computes %b. In program
// order %a's last use comes before %b exists, but stream 0 has not waited
// for stream 1 yet, so %b must not take %a's bytes. After stream 0 waits
// for stream 1's signal, %a is free: %c reuses its offset.

// CHECK-LABEL: func.func @two_streams
// CHECK-SAME: kernel.arena_bytes = 2048 : i64
// CHECK: %[[A:.+]] = kernel.alloc {offset = 0 : i64} : memref<256xf32>
// CHECK: kernel.signal {kernel.stream = 1 : i64}
// CHECK: %[[B:.+]] = kernel.alloc {offset = 1024 : i64} : memref<256xf32>
// CHECK: kernel.wait
// CHECK: %[[C:.+]] = kernel.alloc {offset = 0 : i64} : memref<256xf32>
func.func @two_streams(%x: memref<256xf32>) -> memref<256xf32> {
  %a = kernel.alloc : memref<256xf32>
  kernel.elementwise ins(%x : memref<256xf32>) outs(%a : memref<256xf32>) attributes {kernel.stream = 1 : i64} {
  ^bb0(%v: f32):
    %r = arith.negf %v : f32
    kernel.yield %r : f32
  }
  %e = kernel.signal {kernel.stream = 1 : i64} : !kernel.event
  %b = kernel.alloc : memref<256xf32>
  kernel.elementwise ins(%x : memref<256xf32>) outs(%b : memref<256xf32>) {
  ^bb0(%v: f32):
    %r = arith.addf %v, %v : f32
    kernel.yield %r : f32
  }
  kernel.wait %e
  %c = kernel.alloc : memref<256xf32>
  kernel.elementwise ins(%b : memref<256xf32>) outs(%c : memref<256xf32>) {
  ^bb0(%v: f32):
    %r = arith.mulf %v, %v : f32
    kernel.yield %r : f32
  }
  return %c : memref<256xf32>
}

// -----

// The same schedule on one stream: %b may take %a's bytes at once.
// CHECK-LABEL: func.func @one_stream
// CHECK: kernel.alloc {offset = 0 : i64}
// CHECK: kernel.alloc {offset = 0 : i64}
// CHECK: kernel.alloc {offset = 1024 : i64}
func.func @one_stream(%x: memref<256xf32>) -> memref<256xf32> {
  %a = kernel.alloc : memref<256xf32>
  kernel.elementwise ins(%x : memref<256xf32>) outs(%a : memref<256xf32>) {
  ^bb0(%v: f32):
    %r = arith.negf %v : f32
    kernel.yield %r : f32
  }
  %b = kernel.alloc : memref<256xf32>
  kernel.elementwise ins(%x : memref<256xf32>) outs(%b : memref<256xf32>) {
  ^bb0(%v: f32):
    %r = arith.addf %v, %v : f32
    kernel.yield %r : f32
  }
  %c = kernel.alloc : memref<256xf32>
  kernel.elementwise ins(%b : memref<256xf32>) outs(%c : memref<256xf32>) {
  ^bb0(%v: f32):
    %r = arith.mulf %v, %v : f32
    kernel.yield %r : f32
  }
  return %c : memref<256xf32>
}
