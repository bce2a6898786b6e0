// RUN: ztc-opt %s -split-input-file -verify-diagnostics

func.func @view_count(%x: memref<2x3xf32>) {
  // expected-error @+1 {{cannot view 'memref<2x3xf32>' as 'memref<7xf32>': element type and count must match}}
  %v = kernel.view %x : memref<2x3xf32> to memref<7xf32>
  return
}

// -----

func.func @constant_shape() {
  // expected-error @+1 {{value of type 'tensor<2xf32>' does not fit buffer 'memref<3xf32>'}}
  %k = kernel.constant dense<1.0> : tensor<2xf32> : memref<3xf32>
  return
}

// -----

func.func @no_broadcast(%x: memref<4xf32>) {
  %a = kernel.alloc : memref<2x3xf32>
  // expected-error @+1 {{input 0 of type 'memref<4xf32>' does not broadcast to 'memref<2x3xf32>'}}
  kernel.elementwise ins(%x : memref<4xf32>) outs(%a : memref<2x3xf32>) {
  ^bb0(%p: f32):
    kernel.yield %p : f32
  }
  return
}

// -----

func.func @body_arity(%x: memref<3xf32>) {
  %a = kernel.alloc : memref<3xf32>
  // expected-error @+1 {{body takes 2 scalars for 1 inputs}}
  kernel.elementwise ins(%x : memref<3xf32>) outs(%a : memref<3xf32>) {
  ^bb0(%p: f32, %q: f32):
    kernel.yield %p : f32
  }
  return
}

// -----

func.func @yield_type(%x: memref<3xf32>) {
  %a = kernel.alloc : memref<3xi1>
  // expected-error @+1 {{body yields 'f32' for output elements of type 'i1'}}
  kernel.elementwise ins(%x : memref<3xf32>) outs(%a : memref<3xi1>) {
  ^bb0(%p: f32):
    kernel.yield %p : f32
  }
  return
}

// -----

func.func @unknown_callee(%x: memref<3xf32>) {
  %a = kernel.alloc : memref<3xf32>
  // expected-error @+1 {{unknown library kernel 'fft'}}
  kernel.call "fft" ins(%x : memref<3xf32>) outs(%a : memref<3xf32>)
  return
}

// -----

func.func @callee_arity(%x: memref<3xf32>) {
  %a = kernel.alloc : memref<3xf32>
  // expected-error @+1 {{'matmul' takes 2 to 2 inputs and 1 outputs, got 1 and 1}}
  kernel.call "matmul" ins(%x : memref<3xf32>) outs(%a : memref<3xf32>)
  return
}
