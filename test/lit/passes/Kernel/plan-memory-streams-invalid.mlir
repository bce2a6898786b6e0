// RUN: ztc-opt %s --ztc-plan-memory -verify-diagnostics

// Work on stream 1 that stream 0 never waits for would race with the next
// call of the step.
// expected-error @+1 {{stream 1 has work that stream 0 does not wait for before the step ends (add a kernel.signal on it and a kernel.wait on stream 0)}}
func.func @unjoined(%x: memref<4xf32>) {
  %a = kernel.alloc : memref<4xf32>
  kernel.elementwise ins(%x : memref<4xf32>) outs(%a : memref<4xf32>) attributes {kernel.stream = 1 : i64} {
  ^bb0(%v: f32):
    kernel.yield %v : f32
  }
  return
}
