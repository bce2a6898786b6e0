// RUN: ztc-opt %s -split-input-file -ztc-fuse | FileCheck %s

// add then relu over the same shape fuse into one kernel, and the sum's
// buffer disappears.
// CHECK-LABEL: func.func @chain
// CHECK: %[[OUT:.+]] = kernel.alloc : memref<4xf32>
// CHECK-NOT: kernel.alloc
// CHECK: kernel.elementwise ins(%[[A:.+]], %[[B:.+]] : memref<4xf32>, memref<4xf32>) outs(%[[OUT]] : memref<4xf32>)
// CHECK: arith.addf
// CHECK: arith.maximumf
// CHECK-NOT: kernel.elementwise
func.func @chain(%a: memref<4xf32>, %b: memref<4xf32>) -> memref<4xf32> {
  %s = kernel.alloc : memref<4xf32>
  kernel.elementwise ins(%a, %b : memref<4xf32>, memref<4xf32>) outs(%s : memref<4xf32>) {
  ^bb0(%x: f32, %y: f32):
    %0 = arith.addf %x, %y : f32
    kernel.yield %0 : f32
  }
  %out = kernel.alloc : memref<4xf32>
  kernel.elementwise ins(%s : memref<4xf32>) outs(%out : memref<4xf32>) {
  ^bb0(%x: f32):
    %c0 = arith.constant 0.0 : f32
    %0 = arith.maximumf %x, %c0 : f32
    kernel.yield %0 : f32
  }
  return %out : memref<4xf32>
}

// -----

// A producer whose result is also returned (or read twice by different
// kernels) must stay: fusing would lose or recompute it.
// CHECK-LABEL: func.func @shared
// CHECK-COUNT-2: kernel.elementwise
func.func @shared(%a: memref<4xf32>) -> (memref<4xf32>, memref<4xf32>) {
  %s = kernel.alloc : memref<4xf32>
  kernel.elementwise ins(%a : memref<4xf32>) outs(%s : memref<4xf32>) {
  ^bb0(%x: f32):
    %0 = math.exp %x : f32
    kernel.yield %0 : f32
  }
  %out = kernel.alloc : memref<4xf32>
  kernel.elementwise ins(%s : memref<4xf32>) outs(%out : memref<4xf32>) {
  ^bb0(%x: f32):
    %0 = arith.negf %x : f32
    kernel.yield %0 : f32
  }
  return %s, %out : memref<4xf32>, memref<4xf32>
}

// -----

// A producer over a smaller shape (broadcast by the consumer) is not fused:
// it would be recomputed for every broadcast element.
// CHECK-LABEL: func.func @broadcast
// CHECK-COUNT-2: kernel.elementwise
func.func @broadcast(%a: memref<4xf32>, %b: memref<3x4xf32>) -> memref<3x4xf32> {
  %s = kernel.alloc : memref<4xf32>
  kernel.elementwise ins(%a : memref<4xf32>) outs(%s : memref<4xf32>) {
  ^bb0(%x: f32):
    %0 = math.exp %x : f32
    kernel.yield %0 : f32
  }
  %out = kernel.alloc : memref<3x4xf32>
  kernel.elementwise ins(%s, %b : memref<4xf32>, memref<3x4xf32>) outs(%out : memref<3x4xf32>) {
  ^bb0(%x: f32, %y: f32):
    %0 = arith.mulf %x, %y : f32
    kernel.yield %0 : f32
  }
  return %out : memref<3x4xf32>
}

// -----

// A consumer that reads a value its producer also reads reuses the
// producer's argument (2 inputs, not 3): a chain of kernels over one value
// does not grow an input per link (and fusing a chain stays linear in its
// length).
// CHECK-LABEL: func.func @shared_input
// CHECK: kernel.elementwise ins(%[[X:[a-z0-9]+]], %[[X]] : memref<4xf32>, memref<4xf32>) outs(%{{.+}} : memref<4xf32>)
// CHECK-NEXT: ^bb0(%[[A:.+]]: f32, %[[B:.+]]: f32):
// CHECK-NEXT: %[[S:.+]] = arith.addf %[[A]], %[[B]] : f32
// CHECK-NEXT: %[[T:.+]] = arith.mulf %[[S]], %[[A]] : f32
// CHECK-NEXT: kernel.yield %[[T]] : f32
func.func @shared_input(%x: memref<4xf32>) -> memref<4xf32> {
  %a = kernel.alloc : memref<4xf32>
  kernel.elementwise ins(%x, %x : memref<4xf32>, memref<4xf32>) outs(%a : memref<4xf32>) {
  ^bb0(%u: f32, %v: f32):
    %s = arith.addf %u, %v : f32
    kernel.yield %s : f32
  }
  %b = kernel.alloc : memref<4xf32>
  kernel.elementwise ins(%a, %x : memref<4xf32>, memref<4xf32>) outs(%b : memref<4xf32>) {
  ^bb0(%u: f32, %v: f32):
    %t = arith.mulf %u, %v : f32
    kernel.yield %t : f32
  }
  return %b : memref<4xf32>
}
