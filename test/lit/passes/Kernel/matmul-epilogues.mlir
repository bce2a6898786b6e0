// ztc-matmul-epilogues: a product's bias, and a residual after it, are
// added by the product's call as it stores, when a loop did nothing else
// with a product only it reads (directly or through a view); under mixed
// precision, f32 sums of half products too.
//
// RUN: ztc-opt %s -split-input-file -ztc-matmul-epilogues | FileCheck %s

// A linear layer (a bias, either way round) and a residual block's output
// ((p + bias) + r, the sums either way round). The product buffers go.
// CHECK-LABEL: func.func @layers
// CHECK: %[[H:.+]] = kernel.alloc : memref<2x4x16xf32>
// CHECK-NEXT: kernel.call "matmul" ins(%arg0, %arg1, %arg2 : memref<2x4x8xf32>, memref<16x8xf32>, memref<16xf32>) outs(%[[H]] : memref<2x4x16xf32>) {config = {transpose_b = true}}
// CHECK-NEXT: %[[Y:.+]] = kernel.alloc : memref<2x4x8xf32>
// CHECK-NEXT: kernel.call "matmul_add" ins(%[[H]], %arg3, %arg0, %arg4 : memref<2x4x16xf32>, memref<16x8xf32>, memref<2x4x8xf32>, memref<1x8xf32>) outs(%[[Y]] : memref<2x4x8xf32>){{$}}
// CHECK-NEXT: return %[[Y]]
func.func @layers(%x: memref<2x4x8xf32>, %w1: memref<16x8xf32>, %b1: memref<16xf32>, %w2: memref<16x8xf32>, %b2: memref<1x8xf32>) -> memref<2x4x8xf32> {
  %p = kernel.alloc : memref<2x4x16xf32>
  kernel.call "matmul" ins(%x, %w1 : memref<2x4x8xf32>, memref<16x8xf32>) outs(%p : memref<2x4x16xf32>) {config = {transpose_b = true}}
  %h = kernel.alloc : memref<2x4x16xf32>
  kernel.elementwise ins(%b1, %p : memref<16xf32>, memref<2x4x16xf32>) outs(%h : memref<2x4x16xf32>) {
  ^bb0(%b: f32, %v: f32):
    %r = arith.addf %b, %v : f32
    kernel.yield %r : f32
  }
  %q = kernel.alloc : memref<2x4x8xf32>
  kernel.call "matmul" ins(%h, %w2 : memref<2x4x16xf32>, memref<16x8xf32>) outs(%q : memref<2x4x8xf32>) {config = {}}
  %y = kernel.alloc : memref<2x4x8xf32>
  kernel.elementwise ins(%x, %q, %b2 : memref<2x4x8xf32>, memref<2x4x8xf32>, memref<1x8xf32>) outs(%y : memref<2x4x8xf32>) {
  ^bb0(%r: f32, %v: f32, %b: f32):
    %s = arith.addf %v, %b : f32
    %t = arith.addf %r, %s : f32
    kernel.yield %t : f32
  }
  return %y : memref<2x4x8xf32>
}

// -----

// Left alone: a product read again later (kept for a backward); a loop
// doing more than the sums (a ReLU after them); a bias along another
// dimension; (p + r) + bias, whose order the library does not keep; an
// input the product reads written between the call and the loop.
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-5: kernel.call "matmul" ins(%{{[^,]+}}, %{{[^ ]+}} : memref<4x8xf32>, memref<8x8xf32>)
// CHECK-NOT: matmul_add
func.func @kept(%x: memref<4x8xf32>, %w: memref<8x8xf32>, %b: memref<8xf32>, %c: memref<4x1xf32>, %r: memref<4x8xf32>) -> (memref<4x8xf32>, memref<4x8xf32>, memref<4x8xf32>, memref<4x8xf32>, memref<4x8xf32>, memref<4x8xf32>) {
  %p1 = kernel.alloc : memref<4x8xf32>
  kernel.call "matmul" ins(%x, %w : memref<4x8xf32>, memref<8x8xf32>) outs(%p1 : memref<4x8xf32>) {config = {}}
  %y1 = kernel.alloc : memref<4x8xf32>
  kernel.elementwise ins(%p1, %b : memref<4x8xf32>, memref<8xf32>) outs(%y1 : memref<4x8xf32>) {
  ^bb0(%v: f32, %u: f32):
    %s = arith.addf %v, %u : f32
    kernel.yield %s : f32
  }
  %p2 = kernel.alloc : memref<4x8xf32>
  kernel.call "matmul" ins(%x, %w : memref<4x8xf32>, memref<8x8xf32>) outs(%p2 : memref<4x8xf32>) {config = {}}
  %y2 = kernel.alloc : memref<4x8xf32>
  kernel.elementwise ins(%p2, %b : memref<4x8xf32>, memref<8xf32>) outs(%y2 : memref<4x8xf32>) {
  ^bb0(%v: f32, %u: f32):
    %s = arith.addf %v, %u : f32
    %z = arith.constant 0.0 : f32
    %m = arith.maximumf %s, %z : f32
    kernel.yield %m : f32
  }
  %p3 = kernel.alloc : memref<4x8xf32>
  kernel.call "matmul" ins(%x, %w : memref<4x8xf32>, memref<8x8xf32>) outs(%p3 : memref<4x8xf32>) {config = {}}
  %y3 = kernel.alloc : memref<4x8xf32>
  kernel.elementwise ins(%p3, %c : memref<4x8xf32>, memref<4x1xf32>) outs(%y3 : memref<4x8xf32>) {
  ^bb0(%v: f32, %u: f32):
    %s = arith.addf %v, %u : f32
    kernel.yield %s : f32
  }
  %p4 = kernel.alloc : memref<4x8xf32>
  kernel.call "matmul" ins(%x, %w : memref<4x8xf32>, memref<8x8xf32>) outs(%p4 : memref<4x8xf32>) {config = {}}
  %y4 = kernel.alloc : memref<4x8xf32>
  kernel.elementwise ins(%p4, %r, %b : memref<4x8xf32>, memref<4x8xf32>, memref<8xf32>) outs(%y4 : memref<4x8xf32>) {
  ^bb0(%v: f32, %t: f32, %u: f32):
    %s = arith.addf %v, %t : f32
    %o = arith.addf %s, %u : f32
    kernel.yield %o : f32
  }
  %x5 = kernel.alloc : memref<4x8xf32>
  %p5 = kernel.alloc : memref<4x8xf32>
  kernel.call "matmul" ins(%x5, %w : memref<4x8xf32>, memref<8x8xf32>) outs(%p5 : memref<4x8xf32>) {config = {}}
  kernel.elementwise ins(%r : memref<4x8xf32>) outs(%x5 : memref<4x8xf32>) {
  ^bb0(%v: f32):
    kernel.yield %v : f32
  }
  %y5 = kernel.alloc : memref<4x8xf32>
  kernel.elementwise ins(%p5, %b : memref<4x8xf32>, memref<8xf32>) outs(%y5 : memref<4x8xf32>) {
  ^bb0(%v: f32, %u: f32):
    %s = arith.addf %v, %u : f32
    kernel.yield %s : f32
  }
  return %y1, %p1, %y2, %y3, %y4, %y5 : memref<4x8xf32>, memref<4x8xf32>, memref<4x8xf32>, memref<4x8xf32>, memref<4x8xf32>, memref<4x8xf32>
}

// -----

// A linear layer's backward: the bias gradient (the sum of g's rows) joins
// the weight gradient's product, which reads g transposed through a view,
// at the later call; the input gradient's product between them only reads
// g. The sum may come before or after the product.
// CHECK-LABEL: func.func @bias_gradients
// CHECK: %[[DB:.+]] = kernel.alloc : memref<8xf32>
// CHECK-NEXT: %[[DX:.+]] = kernel.alloc : memref<2x4x16xf32>
// CHECK-NEXT: kernel.call "matmul" ins(%arg0, %arg2 : memref<2x4x8xf32>, memref<8x16xf32>) outs(%[[DX]] : memref<2x4x16xf32>)
// CHECK-NEXT: %[[G:.+]] = kernel.view %arg0 : memref<2x4x8xf32> to memref<8x8xf32>
// CHECK-NEXT: %[[X:.+]] = kernel.view %arg1 : memref<2x4x16xf32> to memref<8x16xf32>
// CHECK-NEXT: %[[DW:.+]] = kernel.alloc : memref<8x16xf32>
// CHECK-NEXT: kernel.call "matmul_bias_grad" ins(%[[G]], %[[X]] : memref<8x8xf32>, memref<8x16xf32>) outs(%[[DW]], %[[DB]] : memref<8x16xf32>, memref<8xf32>) {config = {transpose_a = true}}
// CHECK: %[[DW2:.+]] = kernel.alloc : memref<8x16xf32>
// CHECK-NEXT: %[[DB2:.+]] = kernel.alloc : memref<1x8xf32>
// CHECK-NEXT: kernel.call "matmul_bias_grad" ins(%arg3, %arg4 : memref<8x8xf32>, memref<8x16xf32>) outs(%[[DW2]], %[[DB2]] : memref<8x16xf32>, memref<1x8xf32>) {config = {transpose_a = true}}
// CHECK-NOT: reduce_sum
func.func @bias_gradients(%g: memref<2x4x8xf32>, %x: memref<2x4x16xf32>, %w: memref<8x16xf32>, %g2: memref<8x8xf32>, %x2: memref<8x16xf32>) -> (memref<8xf32>, memref<2x4x16xf32>, memref<8x16xf32>, memref<8x16xf32>, memref<1x8xf32>) {
  %db = kernel.alloc : memref<8xf32>
  kernel.call "reduce_sum" ins(%g : memref<2x4x8xf32>) outs(%db : memref<8xf32>) {config = {axes = array<i64: 0, 1>, keepdims = false}}
  %dx = kernel.alloc : memref<2x4x16xf32>
  kernel.call "matmul" ins(%g, %w : memref<2x4x8xf32>, memref<8x16xf32>) outs(%dx : memref<2x4x16xf32>) {config = {}}
  %gv = kernel.view %g : memref<2x4x8xf32> to memref<8x8xf32>
  %xv = kernel.view %x : memref<2x4x16xf32> to memref<8x16xf32>
  %dw = kernel.alloc : memref<8x16xf32>
  kernel.call "matmul" ins(%gv, %xv : memref<8x8xf32>, memref<8x16xf32>) outs(%dw : memref<8x16xf32>) {config = {transpose_a = true}}
  %dw2 = kernel.alloc : memref<8x16xf32>
  kernel.call "matmul" ins(%g2, %x2 : memref<8x8xf32>, memref<8x16xf32>) outs(%dw2 : memref<8x16xf32>) {config = {transpose_a = true}}
  %db2 = kernel.alloc : memref<1x8xf32>
  kernel.call "reduce_sum" ins(%g2 : memref<8x8xf32>) outs(%db2 : memref<1x8xf32>) {config = {axes = array<i64: 0>, keepdims = true}}
  return %db, %dx, %dw, %dw2, %db2 : memref<8xf32>, memref<2x4x16xf32>, memref<8x16xf32>, memref<8x16xf32>, memref<1x8xf32>
}

// -----

// Left alone: a sum read before the product (the norm of a gradient); a
// sum over other dimensions; a product that does not transpose g (it sums
// over another dimension); g written between the two calls; a product
// with a bias already.
// CHECK-LABEL: func.func @bias_gradients_kept
// CHECK-COUNT-5: kernel.call "reduce_sum"
// CHECK-NOT: matmul_bias_grad
func.func @bias_gradients_kept(%g1: memref<8x8xf32>, %g2: memref<8x8xf32>, %g3: memref<8x8xf32>, %g4: memref<8x8xf32>, %g5: memref<8x8xf32>, %x: memref<8x16xf32>, %b: memref<16xf32>) -> (memref<8xf32>, memref<8x16xf32>, memref<8xf32>, memref<8x16xf32>, memref<8xf32>, memref<8x8xf32>, memref<8xf32>, memref<8x16xf32>, memref<8xf32>, memref<8x16xf32>) {
  %s1 = kernel.alloc : memref<8xf32>
  kernel.call "reduce_sum" ins(%g1 : memref<8x8xf32>) outs(%s1 : memref<8xf32>) {config = {axes = array<i64: 0>, keepdims = false}}
  kernel.elementwise ins(%s1 : memref<8xf32>) outs(%s1 : memref<8xf32>) {
  ^bb0(%v: f32):
    %m = arith.mulf %v, %v : f32
    kernel.yield %m : f32
  }
  %w1 = kernel.alloc : memref<8x16xf32>
  kernel.call "matmul" ins(%g1, %x : memref<8x8xf32>, memref<8x16xf32>) outs(%w1 : memref<8x16xf32>) {config = {transpose_a = true}}
  %s2 = kernel.alloc : memref<8xf32>
  kernel.call "reduce_sum" ins(%g2 : memref<8x8xf32>) outs(%s2 : memref<8xf32>) {config = {axes = array<i64: 1>, keepdims = false}}
  %w2 = kernel.alloc : memref<8x16xf32>
  kernel.call "matmul" ins(%g2, %x : memref<8x8xf32>, memref<8x16xf32>) outs(%w2 : memref<8x16xf32>) {config = {transpose_a = true}}
  %s3 = kernel.alloc : memref<8xf32>
  kernel.call "reduce_sum" ins(%g3 : memref<8x8xf32>) outs(%s3 : memref<8xf32>) {config = {axes = array<i64: 0>, keepdims = false}}
  %w3 = kernel.alloc : memref<8x8xf32>
  kernel.call "matmul" ins(%g3, %g3 : memref<8x8xf32>, memref<8x8xf32>) outs(%w3 : memref<8x8xf32>) {config = {transpose_b = true}}
  %s4 = kernel.alloc : memref<8xf32>
  kernel.call "reduce_sum" ins(%g4 : memref<8x8xf32>) outs(%s4 : memref<8xf32>) {config = {axes = array<i64: 0>, keepdims = false}}
  kernel.elementwise ins(%g4 : memref<8x8xf32>) outs(%g4 : memref<8x8xf32>) {
  ^bb0(%v: f32):
    %m = arith.mulf %v, %v : f32
    kernel.yield %m : f32
  }
  %w4 = kernel.alloc : memref<8x16xf32>
  kernel.call "matmul" ins(%g4, %x : memref<8x8xf32>, memref<8x16xf32>) outs(%w4 : memref<8x16xf32>) {config = {transpose_a = true}}
  %s5 = kernel.alloc : memref<8xf32>
  kernel.call "reduce_sum" ins(%g5 : memref<8x8xf32>) outs(%s5 : memref<8xf32>) {config = {axes = array<i64: 0>, keepdims = false}}
  %w5 = kernel.alloc : memref<8x16xf32>
  kernel.call "matmul" ins(%g5, %x, %b : memref<8x8xf32>, memref<8x16xf32>, memref<16xf32>) outs(%w5 : memref<8x16xf32>) {config = {transpose_a = true}}
  return %s1, %w1, %s2, %w2, %s3, %w3, %s4, %w4, %s5, %w5 : memref<8xf32>, memref<8x16xf32>, memref<8xf32>, memref<8x16xf32>, memref<8xf32>, memref<8x8xf32>, memref<8xf32>, memref<8x16xf32>, memref<8xf32>, memref<8x16xf32>
}

// -----

// A residual block's input gradient: the layer norm's input gradient plus
// the residual's (either way round, the sum unrounded or not) is the layer
// norm's backward with the residual's gradient as its addend. The
// gradient's buffer goes; the call writes the loop's output, here the
// addend itself.
// CHECK-LABEL: func.func @residual_gradients
// CHECK-NEXT: %[[R:.+]] = kernel.alloc : memref<4x8xf32>
// CHECK-NEXT: kernel.call "matmul"
// CHECK-NEXT: %[[DS:.+]] = kernel.alloc : memref<8xf32>
// CHECK-NEXT: %[[DB:.+]] = kernel.alloc : memref<8xf32>
// CHECK-NEXT: %[[DS2:.+]] = kernel.alloc : memref<8xf32>
// CHECK-NEXT: %[[DB2:.+]] = kernel.alloc : memref<8xf32>
// CHECK-NEXT: kernel.call "layer_norm_backward" ins(%arg0, %arg1, %arg2, %[[R]] : memref<4x8xf32>, memref<8xf32>, memref<4x8xf32>, memref<4x8xf32>) outs(%[[R]], %[[DS]], %[[DB]] : memref<4x8xf32>, memref<8xf32>, memref<8xf32>) {config = {axis = 1 : i64, epsilon = 1.000000e-05 : f64}}
// CHECK-NEXT: %[[Y:.+]] = kernel.alloc : memref<4x8xf32>
// CHECK-NEXT: kernel.call "layer_norm_backward" ins(%arg0, %arg1, %arg3, %[[R]] : memref<4x8xf32>, memref<8xf32>, memref<4x8xf32>, memref<4x8xf32>) outs(%[[Y]], %[[DS2]], %[[DB2]] : memref<4x8xf32>, memref<8xf32>, memref<8xf32>)
// CHECK-NEXT: return %[[Y]], %[[DS]], %[[DB]], %[[DS2]], %[[DB2]]
func.func @residual_gradients(%x: memref<4x8xf32>, %s: memref<8xf32>, %dy: memref<4x8xf32>, %dy2: memref<4x8xf32>, %w: memref<8x8xf32>)
    -> (memref<4x8xf32>, memref<8xf32>, memref<8xf32>, memref<8xf32>, memref<8xf32>) {
  %r = kernel.alloc : memref<4x8xf32>
  kernel.call "matmul" ins(%dy, %w : memref<4x8xf32>, memref<8x8xf32>) outs(%r : memref<4x8xf32>) {config = {}}
  %g = kernel.alloc : memref<4x8xf32>
  %ds = kernel.alloc : memref<8xf32>
  %db = kernel.alloc : memref<8xf32>
  kernel.call "layer_norm_backward" ins(%x, %s, %dy : memref<4x8xf32>, memref<8xf32>, memref<4x8xf32>) outs(%g, %ds, %db : memref<4x8xf32>, memref<8xf32>, memref<8xf32>) {config = {axis = 1 : i64, epsilon = 1.0e-5 : f64}}
  %g2 = kernel.alloc : memref<4x8xf32>
  %ds2 = kernel.alloc : memref<8xf32>
  %db2 = kernel.alloc : memref<8xf32>
  kernel.call "layer_norm_backward" ins(%x, %s, %dy2 : memref<4x8xf32>, memref<8xf32>, memref<4x8xf32>) outs(%g2, %ds2, %db2 : memref<4x8xf32>, memref<8xf32>, memref<8xf32>) {config = {axis = 1 : i64, epsilon = 1.0e-5 : f64}}
  kernel.elementwise ins(%r, %g : memref<4x8xf32>, memref<4x8xf32>) outs(%r : memref<4x8xf32>) {
  ^bb0(%a: f32, %b: f32):
    %0 = arith.addf %a, %b {kernel.unrounded} : f32
    kernel.yield %0 : f32
  }
  %y = kernel.alloc : memref<4x8xf32>
  kernel.elementwise ins(%g2, %r : memref<4x8xf32>, memref<4x8xf32>) outs(%y : memref<4x8xf32>) {
  ^bb0(%a: f32, %b: f32):
    %0 = arith.addf %a, %b : f32
    kernel.yield %0 : f32
  }
  return %y, %ds, %db, %ds2, %db2 : memref<4x8xf32>, memref<8xf32>, memref<8xf32>, memref<8xf32>, memref<8xf32>
}

// -----

// Sums left as they are: the layer norm reads the loop's output (it would
// overwrite its own input); its scale's gradient is read before the loop
// (it would not be written yet); the gradient is returned too; the loop
// does more than add.
// CHECK-LABEL: func.func @residual_gradients_kept
// CHECK-COUNT-6: kernel.elementwise
// CHECK: return
func.func @residual_gradients_kept(%x: memref<4x8xf32>, %s: memref<8xf32>, %dy: memref<4x8xf32>, %r: memref<4x8xf32>)
    -> (memref<4x8xf32>, memref<4x8xf32>, memref<8xf32>, memref<4x8xf32>, memref<4x8xf32>, memref<4x8xf32>) {
  %ds = kernel.alloc : memref<8xf32>
  %db = kernel.alloc : memref<8xf32>
  // Reads its own output's buffer: dy.
  %dyc = kernel.alloc : memref<4x8xf32>
  kernel.elementwise ins(%dy : memref<4x8xf32>) outs(%dyc : memref<4x8xf32>) {
  ^bb0(%a: f32):
    kernel.yield %a : f32
  }
  %g1 = kernel.alloc : memref<4x8xf32>
  kernel.call "layer_norm_backward" ins(%x, %s, %dyc : memref<4x8xf32>, memref<8xf32>, memref<4x8xf32>) outs(%g1, %ds, %db : memref<4x8xf32>, memref<8xf32>, memref<8xf32>) {config = {axis = 1 : i64, epsilon = 1.0e-5 : f64}}
  kernel.elementwise ins(%g1, %r : memref<4x8xf32>, memref<4x8xf32>) outs(%dyc : memref<4x8xf32>) {
  ^bb0(%a: f32, %b: f32):
    %0 = arith.addf %a, %b : f32
    kernel.yield %0 : f32
  }
  // The scale's gradient is read between the call and the loop.
  %ds2 = kernel.alloc : memref<8xf32>
  %db2 = kernel.alloc : memref<8xf32>
  %g2 = kernel.alloc : memref<4x8xf32>
  kernel.call "layer_norm_backward" ins(%x, %s, %dy : memref<4x8xf32>, memref<8xf32>, memref<4x8xf32>) outs(%g2, %ds2, %db2 : memref<4x8xf32>, memref<8xf32>, memref<8xf32>) {config = {axis = 1 : i64, epsilon = 1.0e-5 : f64}}
  %dsc = kernel.alloc : memref<8xf32>
  kernel.elementwise ins(%ds2 : memref<8xf32>) outs(%dsc : memref<8xf32>) {
  ^bb0(%a: f32):
    kernel.yield %a : f32
  }
  %y2 = kernel.alloc : memref<4x8xf32>
  kernel.elementwise ins(%g2, %r : memref<4x8xf32>, memref<4x8xf32>) outs(%y2 : memref<4x8xf32>) {
  ^bb0(%a: f32, %b: f32):
    %0 = arith.addf %a, %b : f32
    kernel.yield %0 : f32
  }
  // The gradient is also returned.
  %ds3 = kernel.alloc : memref<8xf32>
  %db3 = kernel.alloc : memref<8xf32>
  %g3 = kernel.alloc : memref<4x8xf32>
  kernel.call "layer_norm_backward" ins(%x, %s, %dy : memref<4x8xf32>, memref<8xf32>, memref<4x8xf32>) outs(%g3, %ds3, %db3 : memref<4x8xf32>, memref<8xf32>, memref<8xf32>) {config = {axis = 1 : i64, epsilon = 1.0e-5 : f64}}
  %y3 = kernel.alloc : memref<4x8xf32>
  kernel.elementwise ins(%g3, %r : memref<4x8xf32>, memref<4x8xf32>) outs(%y3 : memref<4x8xf32>) {
  ^bb0(%a: f32, %b: f32):
    %0 = arith.addf %a, %b : f32
    kernel.yield %0 : f32
  }
  // The loop scales its sum.
  %ds4 = kernel.alloc : memref<8xf32>
  %db4 = kernel.alloc : memref<8xf32>
  %g4 = kernel.alloc : memref<4x8xf32>
  kernel.call "layer_norm_backward" ins(%x, %s, %dy : memref<4x8xf32>, memref<8xf32>, memref<4x8xf32>) outs(%g4, %ds4, %db4 : memref<4x8xf32>, memref<8xf32>, memref<8xf32>) {config = {axis = 1 : i64, epsilon = 1.0e-5 : f64}}
  %y4 = kernel.alloc : memref<4x8xf32>
  kernel.elementwise ins(%g4, %r : memref<4x8xf32>, memref<4x8xf32>) outs(%y4 : memref<4x8xf32>) {
  ^bb0(%a: f32, %b: f32):
    %0 = arith.addf %a, %b : f32
    %1 = arith.mulf %0, %b : f32
    kernel.yield %1 : f32
  }
  return %dyc, %y2, %dsc, %y3, %g3, %y4 : memref<4x8xf32>, memref<4x8xf32>, memref<8xf32>, memref<4x8xf32>, memref<4x8xf32>, memref<4x8xf32>
}

// -----

// Mixed precision: an f32 layer norm cast to bf16 (or f16) for the
// products is one layer_norm_narrow, with or without a bias; the f32
// result's buffer goes.
// CHECK-LABEL: func.func @narrow_norms
// CHECK-NEXT: %[[A:.+]] = kernel.alloc : memref<4x8xbf16>
// CHECK-NEXT: kernel.call "layer_norm_narrow" ins(%arg0, %arg1, %arg2 : memref<4x8xf32>, memref<8xf32>, memref<8xf32>) outs(%[[A]] : memref<4x8xbf16>) {config = {axis = 1 : i64, epsilon = 1.000000e-05 : f64}}
// CHECK-NEXT: %[[B:.+]] = kernel.alloc : memref<4x8xf16>
// CHECK-NEXT: kernel.call "layer_norm_narrow" ins(%arg0, %arg1 : memref<4x8xf32>, memref<8xf32>) outs(%[[B]] : memref<4x8xf16>)
// CHECK-NEXT: return %[[A]], %[[B]]
func.func @narrow_norms(%x: memref<4x8xf32>, %s: memref<8xf32>, %b: memref<8xf32>) -> (memref<4x8xbf16>, memref<4x8xf16>) {
  %y = kernel.alloc : memref<4x8xf32>
  kernel.call "layer_norm" ins(%x, %s, %b : memref<4x8xf32>, memref<8xf32>, memref<8xf32>) outs(%y : memref<4x8xf32>) {config = {axis = 1 : i64, epsilon = 1.0e-5 : f64}}
  %a = kernel.alloc : memref<4x8xbf16>
  kernel.elementwise ins(%y : memref<4x8xf32>) outs(%a : memref<4x8xbf16>) {
  ^bb0(%v: f32):
    %0 = arith.truncf %v : f32 to bf16
    kernel.yield %0 : bf16
  }
  %z = kernel.alloc : memref<4x8xf32>
  kernel.call "layer_norm" ins(%x, %s : memref<4x8xf32>, memref<8xf32>) outs(%z : memref<4x8xf32>) {config = {axis = 1 : i64, epsilon = 1.0e-5 : f64}}
  %h = kernel.alloc : memref<4x8xf16>
  kernel.elementwise ins(%z : memref<4x8xf32>) outs(%h : memref<4x8xf16>) {
  ^bb0(%v: f32):
    %0 = arith.truncf %v : f32 to f16
    kernel.yield %0 : f16
  }
  return %a, %h : memref<4x8xbf16>, memref<4x8xf16>
}

// -----

// Casts left as they are: the f32 result is also returned; the loop scales
// before it casts; f64 to f32 (f32's compute type is itself); an input of
// the layer norm is written between the two.
// CHECK-LABEL: func.func @narrow_norms_kept
// CHECK-NOT: layer_norm_narrow
// CHECK: return
func.func @narrow_norms_kept(%x: memref<4x8xf32>, %s: memref<8xf32>, %xd: memref<4x8xf64>, %sd: memref<8xf64>)
    -> (memref<4x8xbf16>, memref<4x8xf32>, memref<4x8xbf16>, memref<4x8xf32>, memref<4x8xbf16>) {
  %y = kernel.alloc : memref<4x8xf32>
  kernel.call "layer_norm" ins(%x, %s : memref<4x8xf32>, memref<8xf32>) outs(%y : memref<4x8xf32>) {config = {axis = 1 : i64, epsilon = 1.0e-5 : f64}}
  %a = kernel.alloc : memref<4x8xbf16>
  kernel.elementwise ins(%y : memref<4x8xf32>) outs(%a : memref<4x8xbf16>) {
  ^bb0(%v: f32):
    %0 = arith.truncf %v : f32 to bf16
    kernel.yield %0 : bf16
  }
  %z = kernel.alloc : memref<4x8xf32>
  kernel.call "layer_norm" ins(%x, %s : memref<4x8xf32>, memref<8xf32>) outs(%z : memref<4x8xf32>) {config = {axis = 1 : i64, epsilon = 1.0e-5 : f64}}
  %c = kernel.alloc : memref<4x8xbf16>
  kernel.elementwise ins(%z : memref<4x8xf32>) outs(%c : memref<4x8xbf16>) {
  ^bb0(%v: f32):
    %m = arith.mulf %v, %v : f32
    %0 = arith.truncf %m : f32 to bf16
    kernel.yield %0 : bf16
  }
  %w = kernel.alloc : memref<4x8xf64>
  kernel.call "layer_norm" ins(%xd, %sd : memref<4x8xf64>, memref<8xf64>) outs(%w : memref<4x8xf64>) {config = {axis = 1 : i64, epsilon = 1.0e-5 : f64}}
  %f = kernel.alloc : memref<4x8xf32>
  kernel.elementwise ins(%w : memref<4x8xf64>) outs(%f : memref<4x8xf32>) {
  ^bb0(%v: f64):
    %0 = arith.truncf %v : f64 to f32
    kernel.yield %0 : f32
  }
  %x2 = kernel.alloc : memref<4x8xf32>
  kernel.elementwise ins(%x : memref<4x8xf32>) outs(%x2 : memref<4x8xf32>) {
  ^bb0(%v: f32):
    kernel.yield %v : f32
  }
  %u = kernel.alloc : memref<4x8xf32>
  kernel.call "layer_norm" ins(%x2, %s : memref<4x8xf32>, memref<8xf32>) outs(%u : memref<4x8xf32>) {config = {axis = 1 : i64, epsilon = 1.0e-5 : f64}}
  kernel.elementwise ins(%s : memref<8xf32>) outs(%x2 : memref<4x8xf32>) {
  ^bb0(%v: f32):
    kernel.yield %v : f32
  }
  %e = kernel.alloc : memref<4x8xbf16>
  kernel.elementwise ins(%u : memref<4x8xf32>) outs(%e : memref<4x8xbf16>) {
  ^bb0(%v: f32):
    %0 = arith.truncf %v : f32 to bf16
    kernel.yield %0 : bf16
  }
  return %a, %y, %c, %f, %e : memref<4x8xbf16>, memref<4x8xf32>, memref<4x8xbf16>, memref<4x8xf32>, memref<4x8xbf16>
}

// -----

// Mixed precision: a layer norm's backward between the widening of the
// products' bf16 (or f16) gradient and the narrowing of its input's
// gradient for the products is one layer_norm_backward_narrow at the
// narrowing loop, with the residual's addend or without; the widened
// gradient's buffer goes.
// CHECK-LABEL: func.func @narrow_norm_gradients
// CHECK-NEXT: %[[DS:.+]] = kernel.alloc : memref<8xf32>
// CHECK-NEXT: %[[DB:.+]] = kernel.alloc : memref<8xf32>
// CHECK-NEXT: %[[G:.+]] = kernel.alloc : memref<4x8xf32>
// CHECK-NEXT: %[[N:.+]] = kernel.alloc : memref<4x8xbf16>
// CHECK-NEXT: kernel.call "layer_norm_backward_narrow" ins(%arg0, %arg1, %arg2, %arg3 : memref<4x8xf32>, memref<8xf32>, memref<4x8xbf16>, memref<4x8xf32>) outs(%[[G]], %[[DS]], %[[DB]], %[[N]] : memref<4x8xf32>, memref<8xf32>, memref<8xf32>, memref<4x8xbf16>) {config = {axis = 1 : i64, epsilon = 1.000000e-05 : f64}}
// CHECK: %[[H:.+]] = kernel.alloc : memref<4x8xf16>
// CHECK-NEXT: kernel.call "layer_norm_backward_narrow" ins(%arg0, %arg1, %arg4 : memref<4x8xf32>, memref<8xf32>, memref<4x8xf16>) outs(%{{.+}}, %{{.+}}, %{{.+}}, %[[H]] : memref<4x8xf32>, memref<8xf32>, memref<8xf32>, memref<4x8xf16>)
// CHECK-NOT: kernel.elementwise
// CHECK: return
func.func @narrow_norm_gradients(%x: memref<4x8xf32>, %s: memref<8xf32>, %dy: memref<4x8xbf16>, %r: memref<4x8xf32>, %dh: memref<4x8xf16>)
    -> (memref<4x8xf32>, memref<8xf32>, memref<8xf32>, memref<4x8xbf16>, memref<4x8xf32>, memref<4x8xf16>) {
  %w = kernel.alloc : memref<4x8xf32>
  kernel.elementwise ins(%dy : memref<4x8xbf16>) outs(%w : memref<4x8xf32>) {
  ^bb0(%v: bf16):
    %0 = arith.extf %v : bf16 to f32
    kernel.yield %0 : f32
  }
  %ds = kernel.alloc : memref<8xf32>
  %db = kernel.alloc : memref<8xf32>
  %g = kernel.alloc : memref<4x8xf32>
  kernel.call "layer_norm_backward" ins(%x, %s, %w, %r : memref<4x8xf32>, memref<8xf32>, memref<4x8xf32>, memref<4x8xf32>) outs(%g, %ds, %db : memref<4x8xf32>, memref<8xf32>, memref<8xf32>) {config = {axis = 1 : i64, epsilon = 1.0e-5 : f64}}
  %n = kernel.alloc : memref<4x8xbf16>
  kernel.elementwise ins(%g : memref<4x8xf32>) outs(%n : memref<4x8xbf16>) {
  ^bb0(%v: f32):
    %0 = arith.truncf %v : f32 to bf16
    kernel.yield %0 : bf16
  }
  %wh = kernel.alloc : memref<4x8xf32>
  kernel.elementwise ins(%dh : memref<4x8xf16>) outs(%wh : memref<4x8xf32>) {
  ^bb0(%v: f16):
    %0 = arith.extf %v : f16 to f32
    kernel.yield %0 : f32
  }
  %ds2 = kernel.alloc : memref<8xf32>
  %db2 = kernel.alloc : memref<8xf32>
  %g2 = kernel.alloc : memref<4x8xf32>
  kernel.call "layer_norm_backward" ins(%x, %s, %wh : memref<4x8xf32>, memref<8xf32>, memref<4x8xf32>) outs(%g2, %ds2, %db2 : memref<4x8xf32>, memref<8xf32>, memref<8xf32>) {config = {axis = 1 : i64, epsilon = 1.0e-5 : f64}}
  %h = kernel.alloc : memref<4x8xf16>
  kernel.elementwise ins(%g2 : memref<4x8xf32>) outs(%h : memref<4x8xf16>) {
  ^bb0(%v: f32):
    %0 = arith.truncf %v : f32 to f16
    kernel.yield %0 : f16
  }
  return %g, %ds, %db, %n, %g2, %h : memref<4x8xf32>, memref<8xf32>, memref<8xf32>, memref<4x8xbf16>, memref<4x8xf32>, memref<4x8xf16>
}

// -----

// The widening kept, the narrowing folded alone (layer_norm_backward_narrow_out,
// reading the f32 gradient): the widened gradient is also returned; the
// widening is from f16 but the narrowing to bf16; the bf16 gradient is
// written between the widening and the narrowing (the call moves past
// that write, as it reads the widened copy); no loop widens the gradient
// (an argument: a sum of several products' gradients). Both kept: the
// scale's gradient is read between the backward and the narrowing.
// CHECK-LABEL: func.func @narrow_norm_gradients_kept
// CHECK: %[[W1:.+]] = kernel.alloc : memref<4x8xf32>
// CHECK: %[[N1:.+]] = kernel.alloc : memref<4x8xbf16>
// CHECK-NEXT: kernel.call "layer_norm_backward_narrow_out" ins(%arg0, %arg1, %[[W1]] : memref<4x8xf32>, memref<8xf32>, memref<4x8xf32>) outs(%{{.+}}, %{{.+}}, %{{.+}}, %[[N1]] : memref<4x8xf32>, memref<8xf32>, memref<8xf32>, memref<4x8xbf16>)
// CHECK: kernel.call "layer_norm_backward" ins
// CHECK: kernel.elementwise ins(%{{.+}} : memref<8xf32>)
// CHECK: arith.truncf
// CHECK: arith.extf %{{.+}} : f16 to f32
// CHECK: kernel.call "layer_norm_backward_narrow_out"
// CHECK: arith.negf
// CHECK: kernel.call "layer_norm_backward_narrow_out"
// CHECK: kernel.call "layer_norm_backward_narrow_out" ins(%arg0, %arg1, %arg4 :
// CHECK-NOT: "layer_norm_backward_narrow"
// CHECK: return
func.func @narrow_norm_gradients_kept(%x: memref<4x8xf32>, %s: memref<8xf32>, %dy: memref<4x8xbf16>, %dh: memref<4x8xf16>, %df: memref<4x8xf32>)
    -> (memref<4x8xf32>, memref<4x8xbf16>, memref<8xf32>, memref<4x8xbf16>, memref<4x8xbf16>, memref<4x8xbf16>, memref<4x8xbf16>) {
  %w = kernel.alloc : memref<4x8xf32>
  kernel.elementwise ins(%dy : memref<4x8xbf16>) outs(%w : memref<4x8xf32>) {
  ^bb0(%v: bf16):
    %0 = arith.extf %v : bf16 to f32
    kernel.yield %0 : f32
  }
  %ds = kernel.alloc : memref<8xf32>
  %db = kernel.alloc : memref<8xf32>
  %g = kernel.alloc : memref<4x8xf32>
  kernel.call "layer_norm_backward" ins(%x, %s, %w : memref<4x8xf32>, memref<8xf32>, memref<4x8xf32>) outs(%g, %ds, %db : memref<4x8xf32>, memref<8xf32>, memref<8xf32>) {config = {axis = 1 : i64, epsilon = 1.0e-5 : f64}}
  %n = kernel.alloc : memref<4x8xbf16>
  kernel.elementwise ins(%g : memref<4x8xf32>) outs(%n : memref<4x8xbf16>) {
  ^bb0(%v: f32):
    %0 = arith.truncf %v : f32 to bf16
    kernel.yield %0 : bf16
  }
  %w2 = kernel.alloc : memref<4x8xf32>
  kernel.elementwise ins(%dy : memref<4x8xbf16>) outs(%w2 : memref<4x8xf32>) {
  ^bb0(%v: bf16):
    %0 = arith.extf %v : bf16 to f32
    kernel.yield %0 : f32
  }
  %ds2 = kernel.alloc : memref<8xf32>
  %db2 = kernel.alloc : memref<8xf32>
  %g2 = kernel.alloc : memref<4x8xf32>
  kernel.call "layer_norm_backward" ins(%x, %s, %w2 : memref<4x8xf32>, memref<8xf32>, memref<4x8xf32>) outs(%g2, %ds2, %db2 : memref<4x8xf32>, memref<8xf32>, memref<8xf32>) {config = {axis = 1 : i64, epsilon = 1.0e-5 : f64}}
  %dsc = kernel.alloc : memref<8xf32>
  kernel.elementwise ins(%ds2 : memref<8xf32>) outs(%dsc : memref<8xf32>) {
  ^bb0(%v: f32):
    kernel.yield %v : f32
  }
  %n2 = kernel.alloc : memref<4x8xbf16>
  kernel.elementwise ins(%g2 : memref<4x8xf32>) outs(%n2 : memref<4x8xbf16>) {
  ^bb0(%v: f32):
    %0 = arith.truncf %v : f32 to bf16
    kernel.yield %0 : bf16
  }
  %w3 = kernel.alloc : memref<4x8xf32>
  kernel.elementwise ins(%dh : memref<4x8xf16>) outs(%w3 : memref<4x8xf32>) {
  ^bb0(%v: f16):
    %0 = arith.extf %v : f16 to f32
    kernel.yield %0 : f32
  }
  %ds3 = kernel.alloc : memref<8xf32>
  %db3 = kernel.alloc : memref<8xf32>
  %g3 = kernel.alloc : memref<4x8xf32>
  kernel.call "layer_norm_backward" ins(%x, %s, %w3 : memref<4x8xf32>, memref<8xf32>, memref<4x8xf32>) outs(%g3, %ds3, %db3 : memref<4x8xf32>, memref<8xf32>, memref<8xf32>) {config = {axis = 1 : i64, epsilon = 1.0e-5 : f64}}
  %n3 = kernel.alloc : memref<4x8xbf16>
  kernel.elementwise ins(%g3 : memref<4x8xf32>) outs(%n3 : memref<4x8xbf16>) {
  ^bb0(%v: f32):
    %0 = arith.truncf %v : f32 to bf16
    kernel.yield %0 : bf16
  }
  %dyc = kernel.alloc : memref<4x8xbf16>
  kernel.elementwise ins(%dy : memref<4x8xbf16>) outs(%dyc : memref<4x8xbf16>) {
  ^bb0(%v: bf16):
    kernel.yield %v : bf16
  }
  %w4 = kernel.alloc : memref<4x8xf32>
  kernel.elementwise ins(%dyc : memref<4x8xbf16>) outs(%w4 : memref<4x8xf32>) {
  ^bb0(%v: bf16):
    %0 = arith.extf %v : bf16 to f32
    kernel.yield %0 : f32
  }
  %ds4 = kernel.alloc : memref<8xf32>
  %db4 = kernel.alloc : memref<8xf32>
  %g4 = kernel.alloc : memref<4x8xf32>
  kernel.call "layer_norm_backward" ins(%x, %s, %w4 : memref<4x8xf32>, memref<8xf32>, memref<4x8xf32>) outs(%g4, %ds4, %db4 : memref<4x8xf32>, memref<8xf32>, memref<8xf32>) {config = {axis = 1 : i64, epsilon = 1.0e-5 : f64}}
  kernel.elementwise ins(%dy : memref<4x8xbf16>) outs(%dyc : memref<4x8xbf16>) {
  ^bb0(%v: bf16):
    %0 = arith.negf %v : bf16
    kernel.yield %0 : bf16
  }
  %n4 = kernel.alloc : memref<4x8xbf16>
  kernel.elementwise ins(%g4 : memref<4x8xf32>) outs(%n4 : memref<4x8xbf16>) {
  ^bb0(%v: f32):
    %0 = arith.truncf %v : f32 to bf16
    kernel.yield %0 : bf16
  }
  %ds5 = kernel.alloc : memref<8xf32>
  %db5 = kernel.alloc : memref<8xf32>
  %g5 = kernel.alloc : memref<4x8xf32>
  kernel.call "layer_norm_backward" ins(%x, %s, %df : memref<4x8xf32>, memref<8xf32>, memref<4x8xf32>) outs(%g5, %ds5, %db5 : memref<4x8xf32>, memref<8xf32>, memref<8xf32>) {config = {axis = 1 : i64, epsilon = 1.0e-5 : f64}}
  %n5 = kernel.alloc : memref<4x8xbf16>
  kernel.elementwise ins(%g5 : memref<4x8xf32>) outs(%n5 : memref<4x8xbf16>) {
  ^bb0(%v: f32):
    %0 = arith.truncf %v : f32 to bf16
    kernel.yield %0 : bf16
  }
  return %w, %n, %dsc, %n2, %n3, %n4, %n5 : memref<4x8xf32>, memref<4x8xbf16>, memref<8xf32>, memref<4x8xbf16>, memref<4x8xbf16>, memref<4x8xbf16>, memref<4x8xbf16>
}

// -----

// Sums of products without a bias: a residual (p + r), a gradient summed
// from two products (one call adds the other's product as it stores), and
// one summed from three ((p1 + p2) + p3, q, k and v's common
// input; the inner sum unrounded, which in f32 rounds nothing): the first
// call's product, then the second adds it into its own buffer, the third
// adds that into the loop's output, the loop's order.
// CHECK-LABEL: func.func @product_sums
// CHECK-SAME: (%[[X:[^:]+]]: memref<4x8xf32>, %[[W:[^:]+]]: memref<8x8xf32>, %[[R:[^:]+]]: memref<4x8xf32>)
// CHECK: %[[Y1:.+]] = kernel.alloc : memref<4x8xf32>
// CHECK-NEXT: kernel.call "matmul_add" ins(%[[X]], %[[W]], %[[R]] : memref<4x8xf32>, memref<8x8xf32>, memref<4x8xf32>) outs(%[[Y1]] : memref<4x8xf32>){{$}}
// CHECK: %[[B:.+]] = kernel.alloc : memref<4x8xf32>
// CHECK-NEXT: kernel.call "matmul" ins(%[[X]], %[[W]] : memref<4x8xf32>, memref<8x8xf32>) outs(%[[B]] : memref<4x8xf32>) {config = {transpose_b = true}}
// CHECK-NEXT: %[[Y2:.+]] = kernel.alloc : memref<4x8xf32>
// CHECK-NEXT: kernel.call "matmul_add" ins(%[[R]], %[[W]], %[[B]] : memref<4x8xf32>, memref<8x8xf32>, memref<4x8xf32>) outs(%[[Y2]] : memref<4x8xf32>){{$}}
// CHECK: %[[P1:.+]] = kernel.alloc : memref<4x8xf32>
// CHECK-NEXT: kernel.call "matmul" ins(%[[X]], %[[W]] : memref<4x8xf32>, memref<8x8xf32>) outs(%[[P1]] : memref<4x8xf32>){{$}}
// CHECK-NEXT: %[[P2:.+]] = kernel.alloc : memref<4x8xf32>
// CHECK-NEXT: %[[Y3:.+]] = kernel.alloc : memref<4x8xf32>
// CHECK-NEXT: kernel.call "matmul_add" ins(%[[R]], %[[W]], %[[P1]] : memref<4x8xf32>, memref<8x8xf32>, memref<4x8xf32>) outs(%[[P2]] : memref<4x8xf32>) {config = {transpose_a = true}}
// CHECK-NEXT: kernel.call "matmul_add" ins(%[[Y1]], %[[W]], %[[P2]] : memref<4x8xf32>, memref<8x8xf32>, memref<4x8xf32>) outs(%[[Y3]] : memref<4x8xf32>){{$}}
// CHECK-NOT: kernel.elementwise
func.func @product_sums(%x: memref<4x8xf32>, %w: memref<8x8xf32>, %r: memref<4x8xf32>) -> (memref<4x8xf32>, memref<4x8xf32>, memref<4x8xf32>) {
  %p = kernel.alloc : memref<4x8xf32>
  kernel.call "matmul" ins(%x, %w : memref<4x8xf32>, memref<8x8xf32>) outs(%p : memref<4x8xf32>) {config = {}}
  %y1 = kernel.alloc : memref<4x8xf32>
  kernel.elementwise ins(%r, %p : memref<4x8xf32>, memref<4x8xf32>) outs(%y1 : memref<4x8xf32>) {
  ^bb0(%a: f32, %b: f32):
    %s = arith.addf %a, %b : f32
    kernel.yield %s : f32
  }
  %a = kernel.alloc : memref<4x8xf32>
  kernel.call "matmul" ins(%r, %w : memref<4x8xf32>, memref<8x8xf32>) outs(%a : memref<4x8xf32>) {config = {}}
  %b = kernel.alloc : memref<4x8xf32>
  kernel.call "matmul" ins(%x, %w : memref<4x8xf32>, memref<8x8xf32>) outs(%b : memref<4x8xf32>) {config = {transpose_b = true}}
  %y2 = kernel.alloc : memref<4x8xf32>
  kernel.elementwise ins(%a, %b : memref<4x8xf32>, memref<4x8xf32>) outs(%y2 : memref<4x8xf32>) {
  ^bb0(%u: f32, %v: f32):
    %s = arith.addf %u, %v {kernel.unrounded} : f32
    kernel.yield %s : f32
  }
  %p1 = kernel.alloc : memref<4x8xf32>
  kernel.call "matmul" ins(%x, %w : memref<4x8xf32>, memref<8x8xf32>) outs(%p1 : memref<4x8xf32>) {config = {}}
  %p2 = kernel.alloc : memref<4x8xf32>
  kernel.call "matmul" ins(%r, %w : memref<4x8xf32>, memref<8x8xf32>) outs(%p2 : memref<4x8xf32>) {config = {transpose_a = true}}
  %p3 = kernel.alloc : memref<4x8xf32>
  kernel.call "matmul" ins(%y1, %w : memref<4x8xf32>, memref<8x8xf32>) outs(%p3 : memref<4x8xf32>) {config = {}}
  %y3 = kernel.alloc : memref<4x8xf32>
  kernel.elementwise ins(%p3, %p1, %p2 : memref<4x8xf32>, memref<4x8xf32>, memref<4x8xf32>) outs(%y3 : memref<4x8xf32>) {
  ^bb0(%u: f32, %v: f32, %t: f32):
    %s = arith.addf %v, %t {kernel.unrounded} : f32
    %q = arith.addf %s, %u {kernel.unrounded} : f32
    kernel.yield %q : f32
  }
  return %y1, %y2, %y3 : memref<4x8xf32>, memref<4x8xf32>, memref<4x8xf32>
}

// -----

// Left alone: three bf16 products whose inner sum is unrounded (storing it
// would round it); three sums whose last term is no product; a product
// read again later; a sum written over its addend's buffer (the library
// reads the addend after the product); one written over the product's.
// CHECK-LABEL: func.func @product_sums_kept
// CHECK-NOT: matmul_add
// CHECK-COUNT-5: kernel.elementwise
// CHECK-NOT: matmul_add
func.func @product_sums_kept(%x: memref<4x8xbf16>, %w: memref<8x8xbf16>, %f: memref<4x8xf32>, %g: memref<8x8xf32>, %r: memref<4x8xf32>)
    -> (memref<4x8xbf16>, memref<4x8xf32>, memref<4x8xf32>, memref<4x8xf32>, memref<4x8xf32>) {
  %p1 = kernel.alloc : memref<4x8xbf16>
  kernel.call "matmul" ins(%x, %w : memref<4x8xbf16>, memref<8x8xbf16>) outs(%p1 : memref<4x8xbf16>) {config = {}}
  %p2 = kernel.alloc : memref<4x8xbf16>
  kernel.call "matmul" ins(%x, %w : memref<4x8xbf16>, memref<8x8xbf16>) outs(%p2 : memref<4x8xbf16>) {config = {transpose_b = true}}
  %p3 = kernel.alloc : memref<4x8xbf16>
  kernel.call "matmul" ins(%x, %w : memref<4x8xbf16>, memref<8x8xbf16>) outs(%p3 : memref<4x8xbf16>) {config = {transpose_a = true}}
  %y1 = kernel.alloc : memref<4x8xbf16>
  kernel.elementwise ins(%p3, %p1, %p2 : memref<4x8xbf16>, memref<4x8xbf16>, memref<4x8xbf16>) outs(%y1 : memref<4x8xbf16>) {
  ^bb0(%u: bf16, %v: bf16, %t: bf16):
    %s = arith.addf %v, %t {kernel.unrounded} : bf16
    %q = arith.addf %s, %u {kernel.unrounded} : bf16
    kernel.yield %q : bf16
  }
  %q1 = kernel.alloc : memref<4x8xf32>
  kernel.call "matmul" ins(%f, %g : memref<4x8xf32>, memref<8x8xf32>) outs(%q1 : memref<4x8xf32>) {config = {}}
  %q2 = kernel.alloc : memref<4x8xf32>
  kernel.call "matmul" ins(%f, %g : memref<4x8xf32>, memref<8x8xf32>) outs(%q2 : memref<4x8xf32>) {config = {transpose_b = true}}
  %y2 = kernel.alloc : memref<4x8xf32>
  kernel.elementwise ins(%q1, %q2, %r : memref<4x8xf32>, memref<4x8xf32>, memref<4x8xf32>) outs(%y2 : memref<4x8xf32>) {
  ^bb0(%u: f32, %v: f32, %t: f32):
    %s = arith.addf %u, %v : f32
    %q = arith.addf %s, %t : f32
    kernel.yield %q : f32
  }
  %q3 = kernel.alloc : memref<4x8xf32>
  kernel.call "matmul" ins(%f, %g : memref<4x8xf32>, memref<8x8xf32>) outs(%q3 : memref<4x8xf32>) {config = {}}
  %y3 = kernel.alloc : memref<4x8xf32>
  kernel.elementwise ins(%q3, %r : memref<4x8xf32>, memref<4x8xf32>) outs(%y3 : memref<4x8xf32>) {
  ^bb0(%u: f32, %v: f32):
    %s = arith.addf %u, %v : f32
    kernel.yield %s : f32
  }
  %q4 = kernel.alloc : memref<4x8xf32>
  kernel.call "matmul" ins(%f, %g : memref<4x8xf32>, memref<8x8xf32>) outs(%q4 : memref<4x8xf32>) {config = {}}
  %acc = kernel.alloc : memref<4x8xf32>
  kernel.call "transpose" ins(%r : memref<4x8xf32>) outs(%acc : memref<4x8xf32>) {config = {perm = array<i64: 0, 1>}}
  kernel.elementwise ins(%acc, %q4 : memref<4x8xf32>, memref<4x8xf32>) outs(%acc : memref<4x8xf32>) {
  ^bb0(%u: f32, %v: f32):
    %s = arith.addf %u, %v : f32
    kernel.yield %s : f32
  }
  %q5 = kernel.alloc : memref<4x8xf32>
  kernel.call "matmul" ins(%f, %g : memref<4x8xf32>, memref<8x8xf32>) outs(%q5 : memref<4x8xf32>) {config = {}}
  kernel.elementwise ins(%q5, %r : memref<4x8xf32>, memref<4x8xf32>) outs(%q5 : memref<4x8xf32>) {
  ^bb0(%u: f32, %v: f32):
    %s = arith.addf %u, %v : f32
    kernel.yield %s : f32
  }
  return %y1, %y2, %q3, %y3, %acc : memref<4x8xbf16>, memref<4x8xf32>, memref<4x8xf32>, memref<4x8xf32>, memref<4x8xf32>
}

// -----

// Under mixed precision, f32 sums of bf16 products: a residual stream in
// f32 adding a product through a view (GPT-2's [B*T, C] product read as
// [B, T, C], its bias already in the call) becomes matmul_add_wide, the
// stream and the output viewed as the product; the widened, unrounded sum
// of three products (p1 + p2) + p3 becomes matmul_wide of p1 into a new
// f32 buffer, then each next product added to the sum so far, the last
// into the loop's output; one product's widening alone becomes
// matmul_wide; a residual adding a product whose bias the loop adds in
// bf16 before widening (a linear layer's output under autocast) becomes
// matmul_add_wide with that bias.
// CHECK-LABEL: func.func @wide_sums
// CHECK-SAME: (%[[X:[^:]+]]: memref<8x16xbf16>, %[[W:[^:]+]]: memref<16x16xbf16>, %[[B:[^:]+]]: memref<16xbf16>, %[[R:[^:]+]]: memref<2x4x16xf32>, %[[G:[^:]+]]: memref<2x4x16xbf16>, %[[H:[^:]+]]: memref<2x4x16xbf16>)
// CHECK: %[[Y1:.+]] = kernel.alloc : memref<2x4x16xf32>
// CHECK-NEXT: %[[Y1V:.+]] = kernel.view %[[Y1]] : memref<2x4x16xf32> to memref<8x16xf32>
// CHECK-NEXT: %[[RV:.+]] = kernel.view %[[R]] : memref<2x4x16xf32> to memref<8x16xf32>
// CHECK-NEXT: kernel.call "matmul_add_wide" ins(%[[X]], %[[W]], %[[RV]], %[[B]] : memref<8x16xbf16>, memref<16x16xbf16>, memref<8x16xf32>, memref<16xbf16>) outs(%[[Y1V]] : memref<8x16xf32>) {config = {transpose_b = true}}
// CHECK-NEXT: %[[Y2:.+]] = kernel.alloc : memref<2x4x16xf32>
// CHECK-NEXT: %[[S1:.+]] = kernel.alloc : memref<2x4x16xf32>
// CHECK-NEXT: kernel.call "matmul_wide" ins(%[[G]], %[[W]] : memref<2x4x16xbf16>, memref<16x16xbf16>) outs(%[[S1]] : memref<2x4x16xf32>){{$}}
// CHECK-NEXT: %[[S2:.+]] = kernel.alloc : memref<2x4x16xf32>
// CHECK-NEXT: kernel.call "matmul_add_wide" ins(%[[G]], %[[W]], %[[S1]] : memref<2x4x16xbf16>, memref<16x16xbf16>, memref<2x4x16xf32>) outs(%[[S2]] : memref<2x4x16xf32>) {config = {transpose_b = true}}
// CHECK-NEXT: kernel.call "matmul_add_wide" ins(%[[H]], %[[W]], %[[S2]] : memref<2x4x16xbf16>, memref<16x16xbf16>, memref<2x4x16xf32>) outs(%[[Y2]] : memref<2x4x16xf32>){{$}}
// CHECK-NEXT: %[[Y3:.+]] = kernel.alloc : memref<8x16xf32>
// CHECK-NEXT: kernel.call "matmul_wide" ins(%[[X]], %[[W]] : memref<8x16xbf16>, memref<16x16xbf16>) outs(%[[Y3]] : memref<8x16xf32>){{$}}
// CHECK: %[[Y4:.+]] = kernel.alloc : memref<2x4x16xf32>
// CHECK-NEXT: %[[Y4V:.+]] = kernel.view %[[Y4]] : memref<2x4x16xf32> to memref<8x16xf32>
// CHECK-NEXT: %[[RV2:.+]] = kernel.view %[[R]] : memref<2x4x16xf32> to memref<8x16xf32>
// CHECK-NEXT: kernel.call "matmul_add_wide" ins(%[[X]], %[[W]], %[[RV2]], %[[B]] : memref<8x16xbf16>, memref<16x16xbf16>, memref<8x16xf32>, memref<16xbf16>) outs(%[[Y4V]] : memref<8x16xf32>) {config = {transpose_b = true}}
// CHECK-NOT: kernel.elementwise
// CHECK-NOT: memref<8x16xbf16>)
func.func @wide_sums(%x: memref<8x16xbf16>, %w: memref<16x16xbf16>, %b: memref<16xbf16>, %r: memref<2x4x16xf32>, %g: memref<2x4x16xbf16>, %h: memref<2x4x16xbf16>)
    -> (memref<2x4x16xf32>, memref<2x4x16xf32>, memref<2x4x16xf32>, memref<2x4x16xf32>) {
  %p = kernel.alloc : memref<8x16xbf16>
  kernel.call "matmul" ins(%x, %w, %b : memref<8x16xbf16>, memref<16x16xbf16>, memref<16xbf16>) outs(%p : memref<8x16xbf16>) {config = {transpose_b = true}}
  %pv = kernel.view %p : memref<8x16xbf16> to memref<2x4x16xbf16>
  %y1 = kernel.alloc : memref<2x4x16xf32>
  kernel.elementwise ins(%r, %pv : memref<2x4x16xf32>, memref<2x4x16xbf16>) outs(%y1 : memref<2x4x16xf32>) {
  ^bb0(%a: f32, %v: bf16):
    %e = arith.extf %v : bf16 to f32
    %s = arith.addf %e, %a : f32
    kernel.yield %s : f32
  }
  %p1 = kernel.alloc : memref<2x4x16xbf16>
  kernel.call "matmul" ins(%g, %w : memref<2x4x16xbf16>, memref<16x16xbf16>) outs(%p1 : memref<2x4x16xbf16>) {config = {}}
  %p2 = kernel.alloc : memref<2x4x16xbf16>
  kernel.call "matmul" ins(%g, %w : memref<2x4x16xbf16>, memref<16x16xbf16>) outs(%p2 : memref<2x4x16xbf16>) {config = {transpose_b = true}}
  %p3 = kernel.alloc : memref<2x4x16xbf16>
  kernel.call "matmul" ins(%h, %w : memref<2x4x16xbf16>, memref<16x16xbf16>) outs(%p3 : memref<2x4x16xbf16>) {config = {}}
  %y2 = kernel.alloc : memref<2x4x16xf32>
  kernel.elementwise ins(%p3, %p1, %p2 : memref<2x4x16xbf16>, memref<2x4x16xbf16>, memref<2x4x16xbf16>) outs(%y2 : memref<2x4x16xf32>) {
  ^bb0(%u: bf16, %v: bf16, %t: bf16):
    %s = arith.addf %v, %t {kernel.unrounded} : bf16
    %q = arith.addf %u, %s {kernel.unrounded} : bf16
    %e = arith.extf %q {kernel.unrounded} : bf16 to f32
    kernel.yield %e : f32
  }
  %p4 = kernel.alloc : memref<8x16xbf16>
  kernel.call "matmul" ins(%x, %w : memref<8x16xbf16>, memref<16x16xbf16>) outs(%p4 : memref<8x16xbf16>) {config = {}}
  %y3 = kernel.alloc : memref<8x16xf32>
  kernel.elementwise ins(%p4 : memref<8x16xbf16>) outs(%y3 : memref<8x16xf32>) {
  ^bb0(%v: bf16):
    %e = arith.extf %v {kernel.unrounded} : bf16 to f32
    kernel.yield %e : f32
  }
  %y3v = kernel.view %y3 : memref<8x16xf32> to memref<2x4x16xf32>
  %p5 = kernel.alloc : memref<8x16xbf16>
  kernel.call "matmul" ins(%x, %w : memref<8x16xbf16>, memref<16x16xbf16>) outs(%p5 : memref<8x16xbf16>) {config = {transpose_b = true}}
  %p5v = kernel.view %p5 : memref<8x16xbf16> to memref<2x4x16xbf16>
  %y4 = kernel.alloc : memref<2x4x16xf32>
  kernel.elementwise ins(%b, %p5v, %r : memref<16xbf16>, memref<2x4x16xbf16>, memref<2x4x16xf32>) outs(%y4 : memref<2x4x16xf32>) {
  ^bb0(%c: bf16, %v: bf16, %a: f32):
    %s = arith.addf %c, %v : bf16
    %e = arith.extf %s : bf16 to f32
    %t = arith.addf %a, %e : f32
    kernel.yield %t : f32
  }
  return %y1, %y2, %y3v, %y4 : memref<2x4x16xf32>, memref<2x4x16xf32>, memref<2x4x16xf32>, memref<2x4x16xf32>
}

// -----

// Left alone: a sum of two products rounded to bf16 before it is widened
// (the library would not round it); one adding an input that is no
// product; a product read again later; a residual written over its
// stream's buffer (the library reads the addend after the product); a
// bias after a view that moves the product's last dimension; a product
// widened alone but not right after it (a weight's gradient widened for
// the optimizer at the step's end: folded, the f32 copy would live from
// the product on, or the product's operands to the end); a bias added
// to a product whose call adds one already, or added unrounded.
// CHECK-LABEL: func.func @wide_sums_kept
// CHECK-NOT: wide
// CHECK-COUNT-8: kernel.elementwise
// CHECK-NOT: wide
// CHECK-NOT: matmul_add
func.func @wide_sums_kept(%x: memref<4x8xbf16>, %w: memref<8x8xbf16>, %r: memref<4x8xf32>, %g: memref<4x8xbf16>, %f: memref<4x8xf32>, %fw: memref<8x16xf32>, %b: memref<8xf32>, %hb: memref<8xbf16>)
    -> (memref<4x8xf32>, memref<4x8xf32>, memref<4x8xbf16>, memref<4x8xf32>, memref<4x8xf32>, memref<2x4x8xf32>, memref<4x8xf32>, memref<4x8xf32>, memref<4x8xf32>, memref<4x8xf32>) {
  %p1 = kernel.alloc : memref<4x8xbf16>
  kernel.call "matmul" ins(%x, %w : memref<4x8xbf16>, memref<8x8xbf16>) outs(%p1 : memref<4x8xbf16>) {config = {}}
  %p2 = kernel.alloc : memref<4x8xbf16>
  kernel.call "matmul" ins(%x, %w : memref<4x8xbf16>, memref<8x8xbf16>) outs(%p2 : memref<4x8xbf16>) {config = {transpose_b = true}}
  %y1 = kernel.alloc : memref<4x8xf32>
  kernel.elementwise ins(%p1, %p2 : memref<4x8xbf16>, memref<4x8xbf16>) outs(%y1 : memref<4x8xf32>) {
  ^bb0(%u: bf16, %v: bf16):
    %s = arith.addf %u, %v : bf16
    %e = arith.extf %s : bf16 to f32
    kernel.yield %e : f32
  }
  %p3 = kernel.alloc : memref<4x8xbf16>
  kernel.call "matmul" ins(%x, %w : memref<4x8xbf16>, memref<8x8xbf16>) outs(%p3 : memref<4x8xbf16>) {config = {}}
  %y2 = kernel.alloc : memref<4x8xf32>
  kernel.elementwise ins(%p3, %g : memref<4x8xbf16>, memref<4x8xbf16>) outs(%y2 : memref<4x8xf32>) {
  ^bb0(%u: bf16, %v: bf16):
    %s = arith.addf %u, %v {kernel.unrounded} : bf16
    %e = arith.extf %s {kernel.unrounded} : bf16 to f32
    kernel.yield %e : f32
  }
  %p4 = kernel.alloc : memref<4x8xbf16>
  kernel.call "matmul" ins(%x, %w : memref<4x8xbf16>, memref<8x8xbf16>) outs(%p4 : memref<4x8xbf16>) {config = {}}
  %y3 = kernel.alloc : memref<4x8xf32>
  kernel.elementwise ins(%r, %p4 : memref<4x8xf32>, memref<4x8xbf16>) outs(%y3 : memref<4x8xf32>) {
  ^bb0(%a: f32, %v: bf16):
    %e = arith.extf %v : bf16 to f32
    %s = arith.addf %a, %e : f32
    kernel.yield %s : f32
  }
  %acc = kernel.alloc : memref<4x8xf32>
  kernel.call "transpose" ins(%r : memref<4x8xf32>) outs(%acc : memref<4x8xf32>) {config = {perm = array<i64: 0, 1>}}
  %p5 = kernel.alloc : memref<4x8xbf16>
  kernel.call "matmul" ins(%x, %w : memref<4x8xbf16>, memref<8x8xbf16>) outs(%p5 : memref<4x8xbf16>) {config = {}}
  kernel.elementwise ins(%acc, %p5 : memref<4x8xf32>, memref<4x8xbf16>) outs(%acc : memref<4x8xf32>) {
  ^bb0(%a: f32, %v: bf16):
    %e = arith.extf %v : bf16 to f32
    %s = arith.addf %a, %e : f32
    kernel.yield %s : f32
  }
  %q = kernel.alloc : memref<4x16xf32>
  kernel.call "matmul" ins(%f, %fw : memref<4x8xf32>, memref<8x16xf32>) outs(%q : memref<4x16xf32>) {config = {}}
  %qv = kernel.view %q : memref<4x16xf32> to memref<2x4x8xf32>
  %y4 = kernel.alloc : memref<2x4x8xf32>
  kernel.elementwise ins(%qv, %b : memref<2x4x8xf32>, memref<8xf32>) outs(%y4 : memref<2x4x8xf32>) {
  ^bb0(%v: f32, %u: f32):
    %s = arith.addf %v, %u : f32
    kernel.yield %s : f32
  }
  %p6 = kernel.alloc : memref<4x8xbf16>
  kernel.call "matmul" ins(%x, %w : memref<4x8xbf16>, memref<8x8xbf16>) outs(%p6 : memref<4x8xbf16>) {config = {}}
  %t = kernel.alloc : memref<4x8xf32>
  kernel.call "transpose" ins(%r : memref<4x8xf32>) outs(%t : memref<4x8xf32>) {config = {perm = array<i64: 0, 1>}}
  %y6 = kernel.alloc : memref<4x8xf32>
  kernel.elementwise ins(%p6 : memref<4x8xbf16>) outs(%y6 : memref<4x8xf32>) {
  ^bb0(%v: bf16):
    %e = arith.extf %v {kernel.unrounded} : bf16 to f32
    kernel.yield %e : f32
  }
  %p7 = kernel.alloc : memref<4x8xbf16>
  kernel.call "matmul" ins(%x, %w, %hb : memref<4x8xbf16>, memref<8x8xbf16>, memref<8xbf16>) outs(%p7 : memref<4x8xbf16>) {config = {}}
  %y7 = kernel.alloc : memref<4x8xf32>
  kernel.elementwise ins(%r, %p7, %hb : memref<4x8xf32>, memref<4x8xbf16>, memref<8xbf16>) outs(%y7 : memref<4x8xf32>) {
  ^bb0(%a: f32, %v: bf16, %c: bf16):
    %s = arith.addf %v, %c : bf16
    %e = arith.extf %s : bf16 to f32
    %u = arith.addf %a, %e : f32
    kernel.yield %u : f32
  }
  %p8 = kernel.alloc : memref<4x8xbf16>
  kernel.call "matmul" ins(%x, %w : memref<4x8xbf16>, memref<8x8xbf16>) outs(%p8 : memref<4x8xbf16>) {config = {}}
  %y8 = kernel.alloc : memref<4x8xf32>
  kernel.elementwise ins(%r, %p8, %hb : memref<4x8xf32>, memref<4x8xbf16>, memref<8xbf16>) outs(%y8 : memref<4x8xf32>) {
  ^bb0(%a: f32, %v: bf16, %c: bf16):
    %s = arith.addf %v, %c {kernel.unrounded} : bf16
    %e = arith.extf %s : bf16 to f32
    %u = arith.addf %a, %e : f32
    kernel.yield %u : f32
  }
  return %y1, %y2, %p4, %y3, %acc, %y4, %t, %y6, %y7, %y8 : memref<4x8xf32>, memref<4x8xf32>, memref<4x8xbf16>, memref<4x8xf32>, memref<4x8xf32>, memref<2x4x8xf32>, memref<4x8xf32>, memref<4x8xf32>, memref<4x8xf32>, memref<4x8xf32>
}

// -----

// Through a view: an f32 residual after a product with its bias (GPT-2's
// [B*T, C] products, their sums in [B, T, C]) becomes matmul_add with the
// residual and the output viewed as the product; a layer norm's cast
// after a view, layer_norm_narrow storing into the cast's buffer viewed
// as the norm's result; a product's gradient widened and then viewed for
// a layer norm's backward, layer_norm_backward_narrow reading the product
// viewed.
// CHECK-LABEL: func.func @views
// CHECK-SAME: (%[[X:[^:]+]]: memref<8x16xf32>, %[[W:[^:]+]]: memref<16x16xf32>, %[[B:[^:]+]]: memref<16xf32>, %[[R:[^:]+]]: memref<2x4x16xf32>, %[[S:[^:]+]]: memref<16xf32>, %[[DY:[^:]+]]: memref<8x16xbf16>, %[[WB:[^:]+]]: memref<16x16xbf16>)
// CHECK: %[[Y:.+]] = kernel.alloc : memref<2x4x16xf32>
// CHECK-NEXT: %[[RV:.+]] = kernel.view %[[R]] : memref<2x4x16xf32> to memref<8x16xf32>
// CHECK-NEXT: %[[YV:.+]] = kernel.view %[[Y]] : memref<2x4x16xf32> to memref<8x16xf32>
// CHECK-NEXT: kernel.call "matmul_add" ins(%[[X]], %[[W]], %[[RV]], %[[B]] : memref<8x16xf32>, memref<16x16xf32>, memref<8x16xf32>, memref<16xf32>) outs(%[[YV]] : memref<8x16xf32>){{$}}
// CHECK-NEXT: %[[H:.+]] = kernel.alloc : memref<8x16xbf16>
// CHECK-NEXT: %[[HV:.+]] = kernel.view %[[H]] : memref<8x16xbf16> to memref<2x4x16xbf16>
// CHECK-NEXT: kernel.call "layer_norm_narrow" ins(%[[Y]], %[[S]], %[[B]] : {{.*}}) outs(%[[HV]] : memref<2x4x16xbf16>)
// CHECK-NEXT: %[[GP:.+]] = kernel.alloc : memref<8x16xbf16>
// CHECK-NEXT: kernel.call "matmul" ins(%[[DY]], %[[WB]] : memref<8x16xbf16>, memref<16x16xbf16>) outs(%[[GP]] : memref<8x16xbf16>){{$}}
// CHECK-COUNT-4: kernel.alloc
// CHECK-NEXT: %[[GV:.+]] = kernel.view %[[GP]] : memref<8x16xbf16> to memref<2x4x16xbf16>
// CHECK-NEXT: kernel.call "layer_norm_backward_narrow" ins(%[[Y]], %[[S]], %[[GV]] : memref<2x4x16xf32>, memref<16xf32>, memref<2x4x16xbf16>)
// CHECK-NOT: kernel.elementwise
func.func @views(%x: memref<8x16xf32>, %w: memref<16x16xf32>, %b: memref<16xf32>, %r: memref<2x4x16xf32>, %s: memref<16xf32>, %dy: memref<8x16xbf16>, %wb: memref<16x16xbf16>)
    -> (memref<2x4x16xf32>, memref<8x16xbf16>, memref<2x4x16xf32>, memref<16xf32>, memref<16xf32>, memref<2x4x16xbf16>) {
  %p = kernel.alloc : memref<8x16xf32>
  kernel.call "matmul" ins(%x, %w, %b : memref<8x16xf32>, memref<16x16xf32>, memref<16xf32>) outs(%p : memref<8x16xf32>) {config = {}}
  %pv = kernel.view %p : memref<8x16xf32> to memref<2x4x16xf32>
  %y1 = kernel.alloc : memref<2x4x16xf32>
  kernel.elementwise ins(%pv, %r : memref<2x4x16xf32>, memref<2x4x16xf32>) outs(%y1 : memref<2x4x16xf32>) {
  ^bb0(%v: f32, %a: f32):
    %t = arith.addf %v, %a : f32
    kernel.yield %t : f32
  }
  %n = kernel.alloc : memref<2x4x16xf32>
  kernel.call "layer_norm" ins(%y1, %s, %b : memref<2x4x16xf32>, memref<16xf32>, memref<16xf32>) outs(%n : memref<2x4x16xf32>) {config = {axis = 2 : i64, epsilon = 1.0e-5 : f64}}
  %nv = kernel.view %n : memref<2x4x16xf32> to memref<8x16xf32>
  %h = kernel.alloc : memref<8x16xbf16>
  kernel.elementwise ins(%nv : memref<8x16xf32>) outs(%h : memref<8x16xbf16>) {
  ^bb0(%v: f32):
    %t = arith.truncf %v : f32 to bf16
    kernel.yield %t : bf16
  }
  %gp = kernel.alloc : memref<8x16xbf16>
  kernel.call "matmul" ins(%dy, %wb : memref<8x16xbf16>, memref<16x16xbf16>) outs(%gp : memref<8x16xbf16>) {config = {}}
  %gw = kernel.alloc : memref<8x16xf32>
  kernel.elementwise ins(%gp : memref<8x16xbf16>) outs(%gw : memref<8x16xf32>) {
  ^bb0(%v: bf16):
    %t = arith.extf %v {kernel.unrounded} : bf16 to f32
    kernel.yield %t : f32
  }
  %gwv = kernel.view %gw : memref<8x16xf32> to memref<2x4x16xf32>
  %dx = kernel.alloc : memref<2x4x16xf32>
  %ds = kernel.alloc : memref<16xf32>
  %db = kernel.alloc : memref<16xf32>
  kernel.call "layer_norm_backward" ins(%y1, %s, %gwv : memref<2x4x16xf32>, memref<16xf32>, memref<2x4x16xf32>) outs(%dx, %ds, %db : memref<2x4x16xf32>, memref<16xf32>, memref<16xf32>) {config = {axis = 2 : i64, epsilon = 1.0e-5 : f64}}
  %dxn = kernel.alloc : memref<2x4x16xbf16>
  kernel.elementwise ins(%dx : memref<2x4x16xf32>) outs(%dxn : memref<2x4x16xbf16>) {
  ^bb0(%v: f32):
    %t = arith.truncf %v : f32 to bf16
    kernel.yield %t : bf16
  }
  return %y1, %h, %dx, %ds, %db, %dxn : memref<2x4x16xf32>, memref<8x16xbf16>, memref<2x4x16xf32>, memref<16xf32>, memref<16xf32>, memref<2x4x16xbf16>
}

// -----

// A layer computing x W + bias (GPT-2's Conv1D): the weight gradient xᵀ g
// reads g as its second operand, not transposed, through a view; the bias
// gradient joins it as matmul_bias_grad_b. One that reads g transposed
// sums another dimension and is left alone.
// CHECK-LABEL: func.func @bias_gradients_of_b
// CHECK: %[[DB:.+]] = kernel.alloc : memref<8xf32>
// CHECK-NEXT: %[[X:.+]] = kernel.view %arg1 : memref<2x4x16xf32> to memref<8x16xf32>
// CHECK-NEXT: %[[G:.+]] = kernel.view %arg0 : memref<2x4x8xf32> to memref<8x8xf32>
// CHECK-NEXT: %[[DW:.+]] = kernel.alloc : memref<16x8xf32>
// CHECK-NEXT: kernel.call "matmul_bias_grad_b" ins(%[[X]], %[[G]] : memref<8x16xf32>, memref<8x8xf32>) outs(%[[DW]], %[[DB]] : memref<16x8xf32>, memref<8xf32>) {config = {transpose_a = true}}
// CHECK: kernel.call "matmul" ins(%arg2, %arg3 : memref<16x8xf32>, memref<8x8xf32>)
// CHECK-NEXT: %[[DB2:.+]] = kernel.alloc : memref<8xf32>
// CHECK-NEXT: kernel.call "reduce_sum" ins(%arg3
func.func @bias_gradients_of_b(%g: memref<2x4x8xf32>, %x: memref<2x4x16xf32>, %x2: memref<16x8xf32>, %g2: memref<8x8xf32>)
    -> (memref<8xf32>, memref<16x8xf32>, memref<16x8xf32>, memref<8xf32>) {
  %db = kernel.alloc : memref<8xf32>
  kernel.call "reduce_sum" ins(%g : memref<2x4x8xf32>) outs(%db : memref<8xf32>) {config = {axes = array<i64: 0, 1>, keepdims = false}}
  %xv = kernel.view %x : memref<2x4x16xf32> to memref<8x16xf32>
  %gv = kernel.view %g : memref<2x4x8xf32> to memref<8x8xf32>
  %dw = kernel.alloc : memref<16x8xf32>
  kernel.call "matmul" ins(%xv, %gv : memref<8x16xf32>, memref<8x8xf32>) outs(%dw : memref<16x8xf32>) {config = {transpose_a = true}}
  %dw2 = kernel.alloc : memref<16x8xf32>
  kernel.call "matmul" ins(%x2, %g2 : memref<16x8xf32>, memref<8x8xf32>) outs(%dw2 : memref<16x8xf32>) {config = {transpose_b = true}}
  %db2 = kernel.alloc : memref<8xf32>
  kernel.call "reduce_sum" ins(%g2 : memref<8x8xf32>) outs(%db2 : memref<8xf32>) {config = {axes = array<i64: 0>, keepdims = false}}
  return %db, %dw, %dw2, %db2 : memref<8xf32>, memref<16x8xf32>, memref<16x8xf32>, memref<8xf32>
}
