// RUN: ztc-opt %s --ztc-schedule-collectives=prefetch-bytes=4096 | FileCheck %s

// A gather never moves above an op that writes what it gathers: here the
// update of %p2 between the two gathers (the backward's gather of an
// updated parameter would otherwise read the old value).

// CHECK-LABEL: func.func @blocked
// CHECK: kernel.collective all_gather ins(%arg0
// CHECK: kernel.elementwise ins(%arg2, %{{.+}} : memref<128xf32>, memref<128xf32>)
// CHECK: kernel.elementwise ins(%arg3 : memref<64xf32>) outs(%arg1 : memref<64xf32>)
// CHECK: kernel.collective all_gather ins(%arg1
func.func @blocked(%p1: memref<64xf32>, %p2: memref<64xf32>, %x: memref<128xf32>, %new: memref<64xf32>) -> memref<128xf32> {
  %g1 = kernel.alloc : memref<128xf32>
  kernel.collective all_gather ins(%p1 : memref<64xf32>) outs(%g1 : memref<128xf32>) {world_size = 2 : i64}
  %y1 = kernel.alloc : memref<128xf32>
  kernel.elementwise ins(%x, %g1 : memref<128xf32>, memref<128xf32>) outs(%y1 : memref<128xf32>) {
  ^bb0(%a: f32, %b: f32):
    %r = arith.mulf %a, %b : f32
    kernel.yield %r : f32
  }
  kernel.elementwise ins(%new : memref<64xf32>) outs(%p2 : memref<64xf32>) {
  ^bb0(%v: f32):
    kernel.yield %v : f32
  }
  %g2 = kernel.alloc : memref<128xf32>
  kernel.collective all_gather ins(%p2 : memref<64xf32>) outs(%g2 : memref<128xf32>) {world_size = 2 : i64}
  %y2 = kernel.alloc : memref<128xf32>
  kernel.elementwise ins(%y1, %g2 : memref<128xf32>, memref<128xf32>) outs(%y2 : memref<128xf32>) {
  ^bb0(%a: f32, %b: f32):
    %r = arith.mulf %a, %b : f32
    kernel.yield %r : f32
  }
  return %y2 : memref<128xf32>
}
