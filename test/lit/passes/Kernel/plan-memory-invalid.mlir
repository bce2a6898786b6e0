// RUN: ztc-opt %s -ztc-plan-memory=alignment=3 -verify-diagnostics

// The alignment must be a power of two.
// expected-error @+1 {{alignment must be a power of two, got 3}}
func.func @step(%x: memref<4xf32>) -> memref<4xf32> {
  %a = kernel.alloc : memref<4xf32>
  kernel.elementwise ins(%x : memref<4xf32>) outs(%a : memref<4xf32>) {
  ^bb0(%p: f32):
    kernel.yield %p : f32
  }
  return %a : memref<4xf32>
}
