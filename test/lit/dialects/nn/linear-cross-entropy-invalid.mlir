// RUN: ztc-opt %s -split-input-file -verify-diagnostics

// Every diagnostic of nn.linear_cross_entropy and its backward, one case
// each.

// x is [N, D].
func.func @x_rank(%x: tensor<2x6x4xf32>, %w: tensor<4x10xf32>, %t: tensor<12xi64>) {
  // expected-error @+1 {{'nn.linear_cross_entropy' op expects x of rank 2 ([N, D]), got 'tensor<2x6x4xf32>'}}
  %l, %c = nn.linear_cross_entropy %x, %w, %t
         : tensor<2x6x4xf32>, tensor<4x10xf32>, tensor<12xi64> -> tensor<f32>, tensor<f32>
  return
}

// -----

// A half product's loss is f32, its compute type.
func.func @half_loss_type(%x: tensor<6x4xbf16>, %w: tensor<4x10xbf16>, %t: tensor<6xi64>) {
  // expected-error @+1 {{'nn.linear_cross_entropy' op result type 'tensor<bf16>', 'tensor<bf16>' differs from the inferred type 'tensor<f32>', 'tensor<f32>'}}
  %l, %c = nn.linear_cross_entropy %x, %w, %t
         : tensor<6x4xbf16>, tensor<4x10xbf16>, tensor<6xi64> -> tensor<bf16>, tensor<bf16>
  return
}

// -----

// w has x's element type.
func.func @w_type(%x: tensor<6x4xf32>, %w: tensor<4x10xf64>, %t: tensor<6xi64>) {
  // expected-error @+1 {{'nn.linear_cross_entropy' op expects w element type 'f32', got 'tensor<4x10xf64>'}}
  %l, %c = nn.linear_cross_entropy %x, %w, %t
         : tensor<6x4xf32>, tensor<4x10xf64>, tensor<6xi64> -> tensor<f32>, tensor<f32>
  return
}

// -----

// w is [D, V] ...
func.func @w_shape(%x: tensor<6x4xf32>, %w: tensor<10x4xf32>, %t: tensor<6xi64>) {
  // expected-error @+1 {{'nn.linear_cross_entropy' op expects w of shape [4, V], got 'tensor<10x4xf32>'}}
  %l, %c = nn.linear_cross_entropy %x, %w, %t
         : tensor<6x4xf32>, tensor<10x4xf32>, tensor<6xi64> -> tensor<f32>, tensor<f32>
  return
}

// -----

// ... or [V, D] with transpose_b.
func.func @w_shape_transposed(%x: tensor<6x4xf32>, %w: tensor<4x10xf32>, %t: tensor<6xi64>) {
  // expected-error @+1 {{'nn.linear_cross_entropy' op expects w of shape [V, 4] (transpose_b), got 'tensor<4x10xf32>'}}
  %l, %c = nn.linear_cross_entropy %x, %w, %t {transpose_b}
         : tensor<6x4xf32>, tensor<4x10xf32>, tensor<6xi64> -> tensor<f32>, tensor<f32>
  return
}

// -----

// One target per row of x.
func.func @target_shape(%x: tensor<6x4xf32>, %w: tensor<4x10xf32>, %t: tensor<2x3xi64>) {
  // expected-error @+1 {{'nn.linear_cross_entropy' op expects target of shape [6] (x's rows), got 'tensor<2x3xi64>'}}
  %l, %c = nn.linear_cross_entropy %x, %w, %t
         : tensor<6x4xf32>, tensor<4x10xf32>, tensor<2x3xi64> -> tensor<f32>, tensor<f32>
  return
}

// -----

// The backward's grad is the loss's type.
func.func @grad_type(%x: tensor<6x4xf32>, %w: tensor<4x10xf32>, %t: tensor<6xi64>, %g: tensor<1xf32>) {
  // expected-error @+1 {{'nn.linear_cross_entropy_backward' op expects grad of type 'tensor<f32>' (the loss's), got 'tensor<1xf32>'}}
  %dx, %dw, %l = nn.linear_cross_entropy_backward %x, %w, %t, %g
         : tensor<6x4xf32>, tensor<4x10xf32>, tensor<6xi64>, tensor<1xf32>
         -> tensor<6x4xf32>, tensor<4x10xf32>, tensor<f32>
  return
}
