// RUN: ztc-opt %s --ztc-merge-cross-entropy | FileCheck %s

// ztc-merge-cross-entropy: an entry with a fused cross entropy and its
// gradients takes the loss from the backward op, when the backward reads
// the same values (or their recomputation), every reader of the loss comes
// after it and nothing reads the forward's count. Each rewrite
// has its positive case, then the negative ones.

// The train step: the loss is recorded and returned after the backward.
// CHECK-LABEL: func.func @train_step
// CHECK-NOT: nn.linear_cross_entropy %
// CHECK: %{{.+}}, %{{.+}}, %[[LOSS:.+]] = nn.linear_cross_entropy_backward
// CHECK-NEXT: train.record_loss %[[LOSS]]
// CHECK-NEXT: return %[[LOSS]], %{{.+}}, %{{.+}} :
func.func @train_step(%x: tensor<8x4xf32>, %w: tensor<10x4xf32>,
                      %t: tensor<8xi64>, %g: tensor<f32>)
    -> (tensor<f32>, tensor<8x4xf32>, tensor<10x4xf32>) {
  %loss, %correct = nn.linear_cross_entropy %x, %w, %t
      {transpose_b, ignore_index = -100 : i64}
      : tensor<8x4xf32>, tensor<10x4xf32>, tensor<8xi64>
      -> tensor<f32>, tensor<f32>
  %dx, %dw, %l = nn.linear_cross_entropy_backward %x, %w, %t, %g
      {transpose_b, ignore_index = -100 : i64}
      : tensor<8x4xf32>, tensor<10x4xf32>, tensor<8xi64>, tensor<f32>
      -> tensor<8x4xf32>, tensor<10x4xf32>, tensor<f32>
  train.record_loss %loss : tensor<f32>
  return %loss, %dx, %dw : tensor<f32>, tensor<8x4xf32>, tensor<10x4xf32>
}

// A policy recomputed x for the backward (ztc-recompute's clone, marked
// train.recomputed): the same value, so the same loss.
// CHECK-LABEL: func.func @recomputed_x
// CHECK-NOT: nn.linear_cross_entropy %
// CHECK: %[[X:.+]] = nn.layer_norm %{{.+}} {axis = 1 : i64, epsilon = 1.000000e-05 : f64, train.recomputed}
// CHECK: %{{.+}}, %{{.+}}, %[[LOSS:.+]] = nn.linear_cross_entropy_backward %[[X]]
// CHECK-NEXT: return %[[LOSS]], %{{.+}} :
func.func @recomputed_x(%h: tensor<8x4xf32>, %s: tensor<4xf32>,
                        %w: tensor<4x10xf32>, %t: tensor<8xi64>,
                        %g: tensor<f32>) -> (tensor<f32>, tensor<8x4xf32>) {
  %x = nn.layer_norm %h, %s {axis = 1 : i64, epsilon = 1.0e-05 : f64}
      : tensor<8x4xf32>, tensor<4xf32> -> tensor<8x4xf32>
  %loss, %correct = nn.linear_cross_entropy %x, %w, %t
      : tensor<8x4xf32>, tensor<4x10xf32>, tensor<8xi64>
      -> tensor<f32>, tensor<f32>
  %x2 = nn.layer_norm %h, %s {axis = 1 : i64, epsilon = 1.0e-05 : f64, train.recomputed}
      : tensor<8x4xf32>, tensor<4xf32> -> tensor<8x4xf32>
  %dx, %dw, %l = nn.linear_cross_entropy_backward %x2, %w, %t, %g
      : tensor<8x4xf32>, tensor<4x10xf32>, tensor<8xi64>, tensor<f32>
      -> tensor<8x4xf32>, tensor<4x10xf32>, tensor<f32>
  return %loss, %dx : tensor<f32>, tensor<8x4xf32>
}

// Negative: a clone of another computation (another epsilon) is not x.
// CHECK-LABEL: func.func @other_x
// CHECK: nn.linear_cross_entropy %
func.func @other_x(%h: tensor<8x4xf32>, %s: tensor<4xf32>,
                   %w: tensor<4x10xf32>, %t: tensor<8xi64>,
                   %g: tensor<f32>) -> (tensor<f32>, tensor<8x4xf32>) {
  %x = nn.layer_norm %h, %s {axis = 1 : i64, epsilon = 1.0e-05 : f64}
      : tensor<8x4xf32>, tensor<4xf32> -> tensor<8x4xf32>
  %loss, %correct = nn.linear_cross_entropy %x, %w, %t
      : tensor<8x4xf32>, tensor<4x10xf32>, tensor<8xi64>
      -> tensor<f32>, tensor<f32>
  %x2 = nn.layer_norm %h, %s {axis = 1 : i64, epsilon = 1.0e-06 : f64, train.recomputed}
      : tensor<8x4xf32>, tensor<4xf32> -> tensor<8x4xf32>
  %dx, %dw, %l = nn.linear_cross_entropy_backward %x2, %w, %t, %g
      : tensor<8x4xf32>, tensor<4x10xf32>, tensor<8xi64>, tensor<f32>
      -> tensor<8x4xf32>, tensor<4x10xf32>, tensor<f32>
  return %loss, %dx : tensor<f32>, tensor<8x4xf32>
}

// Negative: evaluation reads the count.
// CHECK-LABEL: func.func @counted
// CHECK: nn.linear_cross_entropy %
func.func @counted(%x: tensor<8x4xf32>, %w: tensor<4x10xf32>,
                   %t: tensor<8xi64>, %g: tensor<f32>)
    -> (tensor<f32>, tensor<f32>, tensor<8x4xf32>) {
  %loss, %correct = nn.linear_cross_entropy %x, %w, %t
      : tensor<8x4xf32>, tensor<4x10xf32>, tensor<8xi64>
      -> tensor<f32>, tensor<f32>
  %dx, %dw, %l = nn.linear_cross_entropy_backward %x, %w, %t, %g
      : tensor<8x4xf32>, tensor<4x10xf32>, tensor<8xi64>, tensor<f32>
      -> tensor<8x4xf32>, tensor<4x10xf32>, tensor<f32>
  return %loss, %correct, %dx : tensor<f32>, tensor<f32>, tensor<8x4xf32>
}

// Negative: the backward's seed depends on the loss.
// CHECK-LABEL: func.func @seed_reads_loss
// CHECK: %[[LOSS:[^,]+]], %{{.+}} = nn.linear_cross_entropy %
// CHECK: nn.mul %[[LOSS]]
func.func @seed_reads_loss(%x: tensor<8x4xf32>, %w: tensor<4x10xf32>,
                           %t: tensor<8xi64>)
    -> (tensor<f32>, tensor<8x4xf32>) {
  %loss, %correct = nn.linear_cross_entropy %x, %w, %t
      : tensor<8x4xf32>, tensor<4x10xf32>, tensor<8xi64>
      -> tensor<f32>, tensor<f32>
  %g = nn.mul %loss, %loss : tensor<f32>, tensor<f32> -> tensor<f32>
  %dx, %dw, %l = nn.linear_cross_entropy_backward %x, %w, %t, %g
      : tensor<8x4xf32>, tensor<4x10xf32>, tensor<8xi64>, tensor<f32>
      -> tensor<8x4xf32>, tensor<4x10xf32>, tensor<f32>
  return %loss, %dx : tensor<f32>, tensor<8x4xf32>
}

// Negative: a backward of another loss (another ignore index) is not this
// one's.
// CHECK-LABEL: func.func @other_loss
// CHECK: nn.linear_cross_entropy %
func.func @other_loss(%x: tensor<8x4xf32>, %w: tensor<4x10xf32>,
                      %t: tensor<8xi64>, %g: tensor<f32>)
    -> (tensor<f32>, tensor<8x4xf32>) {
  %loss, %correct = nn.linear_cross_entropy %x, %w, %t
      {ignore_index = -100 : i64}
      : tensor<8x4xf32>, tensor<4x10xf32>, tensor<8xi64>
      -> tensor<f32>, tensor<f32>
  %dx, %dw, %l = nn.linear_cross_entropy_backward %x, %w, %t, %g
      : tensor<8x4xf32>, tensor<4x10xf32>, tensor<8xi64>, tensor<f32>
      -> tensor<8x4xf32>, tensor<4x10xf32>, tensor<f32>
  return %loss, %dx : tensor<f32>, tensor<8x4xf32>
}
