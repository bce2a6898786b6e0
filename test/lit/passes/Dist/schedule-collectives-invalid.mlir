// RUN: ztc-opt %s -split-input-file --ztc-schedule-collectives -verify-diagnostics
// RUN: not ztc-opt %s -split-input-file --ztc-schedule-collectives=prefetch-bytes=-1 2>&1 | FileCheck %s --check-prefix=NEGATIVE

// NEGATIVE: prefetch-bytes must not be negative, got -1

// The pass schedules one stream's step once.
func.func @twice(%g: memref<4xf32>) -> memref<4xf32> {
  %r = kernel.alloc : memref<4xf32>
  // expected-error @+1 {{is already scheduled on streams; ztc-schedule-collectives runs once, on one stream}}
  kernel.collective all_reduce ins(%g : memref<4xf32>) outs(%r : memref<4xf32>) {kernel.stream = 1 : i64, world_size = 2 : i64}
  %e = kernel.signal {kernel.stream = 1 : i64} : !kernel.event
  kernel.wait %e
  return %r : memref<4xf32>
}
