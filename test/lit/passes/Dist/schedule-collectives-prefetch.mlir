// RUN: ztc-opt %s --ztc-schedule-collectives=prefetch-bytes=512 | FileCheck %s --check-prefix=AHEAD
// RUN: ztc-opt %s --ztc-schedule-collectives=prefetch-elements=128 | FileCheck %s --check-prefix=AHEAD
// RUN: ztc-opt %s --ztc-schedule-collectives=prefetch-bytes=511 | FileCheck %s --check-prefix=INPLACE
// RUN: ztc-opt %s --ztc-schedule-collectives="prefetch-bytes=512 max-live-bytes=1023" | FileCheck %s --check-prefix=INPLACE
// RUN: ztc-opt %s --ztc-schedule-collectives="prefetch-bytes=512 max-live-bytes=1024" | FileCheck %s --check-prefix=AHEAD
// RUN: ztc-opt %s --ztc-schedule-collectives="prefetch-elements=128 max-live-elements=255" | FileCheck %s --check-prefix=INPLACE
// RUN: ztc-opt %s --ztc-schedule-collectives | FileCheck %s --check-prefix=INPLACE

// ZeRO stage 3's shape: each parameter block is gathered (the second after
// a cast of the block) right before the op that reads it. A 512-byte
// prefetch budget lets the second gather, with its cast, start before the
// first product, so it runs while stream 0 computes; 511 bytes do not, nor
// does a bound of 1023 live gathered bytes (both gathered buffers, 512
// bytes each, would be alive during the first product).

// AHEAD-LABEL: func.func @stage3
// AHEAD: kernel.collective all_gather ins(%arg0
// AHEAD: kernel.elementwise ins(%arg1 : memref<64xf32>)
// AHEAD: kernel.collective all_gather ins(%[[CAST:.+]] : memref<64xf32>) outs(%[[G2:.+]] : memref<128xf32>)
// AHEAD-NEXT: %[[DONE2:.+]] = kernel.signal {kernel.stream = 1 : i64}
// AHEAD-NEXT: kernel.wait
// AHEAD-NEXT: kernel.elementwise ins(%arg2,
// AHEAD: kernel.wait %[[DONE2]]
// AHEAD-NEXT: kernel.elementwise ins({{.*}}, %[[G2]] :

// INPLACE-LABEL: func.func @stage3
// INPLACE: kernel.collective all_gather ins(%arg0
// INPLACE: kernel.elementwise ins(%arg2,
// INPLACE: kernel.elementwise ins(%arg1 : memref<64xf32>)
// INPLACE: kernel.collective all_gather
func.func @stage3(%p1: memref<64xf32>, %p2: memref<64xf32>, %x: memref<128xf32>) -> memref<128xf32> {
  %g1 = kernel.alloc : memref<128xf32>
  kernel.collective all_gather ins(%p1 : memref<64xf32>) outs(%g1 : memref<128xf32>) {world_size = 2 : i64}
  %y1 = kernel.alloc : memref<128xf32>
  kernel.elementwise ins(%x, %g1 : memref<128xf32>, memref<128xf32>) outs(%y1 : memref<128xf32>) {
  ^bb0(%a: f32, %b: f32):
    %r = arith.mulf %a, %b : f32
    kernel.yield %r : f32
  }
  %c2 = kernel.alloc : memref<64xf32>
  kernel.elementwise ins(%p2 : memref<64xf32>) outs(%c2 : memref<64xf32>) {
  ^bb0(%v: f32):
    %r = arith.negf %v : f32
    kernel.yield %r : f32
  }
  %g2 = kernel.alloc : memref<128xf32>
  kernel.collective all_gather ins(%c2 : memref<64xf32>) outs(%g2 : memref<128xf32>) {world_size = 2 : i64}
  %y2 = kernel.alloc : memref<128xf32>
  kernel.elementwise ins(%y1, %g2 : memref<128xf32>, memref<128xf32>) outs(%y2 : memref<128xf32>) {
  ^bb0(%a: f32, %b: f32):
    %r = arith.mulf %a, %b : f32
    kernel.yield %r : f32
  }
  return %y2 : memref<128xf32>
}
