// ztc-group-launches compares planned bytes: it needs ztc-plan-memory's
// offsets. A group holds at least one loop's pointers.
//
// RUN: ztc-opt %s -ztc-group-launches -verify-diagnostics
// RUN: not ztc-opt %s -ztc-group-launches=max-params=0 2>&1 | FileCheck %s --check-prefix=PARAMS
// PARAMS: error: max-params must be at least 1, got 0

func.func @unplanned(%x: memref<64xf32>) {
  %a = kernel.alloc : memref<64xf32>
  // expected-error @+1 {{has a buffer that is neither an argument, a constant nor a planned allocation (run ztc-plan-memory first)}}
  kernel.elementwise ins(%x : memref<64xf32>) outs(%a : memref<64xf32>) {
  ^bb0(%p: f32):
    kernel.yield %p : f32
  }
  return
}
