// RUN: ztc-opt %s --ztc-recompute=policy=none | FileCheck %s --check-prefix=NONE
// RUN: ztc-opt %s --ztc-recompute=policy=selective | FileCheck %s --check-prefix=SELECTIVE
// RUN: ztc-opt %s --ztc-recompute=policy=full | FileCheck %s --check-prefix=FULL

// ztc-recompute on a step whose backward is written by hand, not built by
// ztc-autodiff: the pass reads the forward (what the first result, the
// loss, depends on) and the backward (the ops after the loss) from the
// function alone. The model is recompute.mlir's two blocks of matmul ->
// tanh -> square; the backward reads t1 (the square's and the tanh's
// VJPs), o0 (w1's gradient) and t0, so the figures are those of the
// autodiff-built step.

// none: the pass reports and changes nothing. Saved: t0, o0, t1.
// NONE-LABEL: func.func @step
// NONE-SAME: train.recompute = {baseline_saved_bytes = 384 : i64, policy = "none", recompute_flops = 0 : i64, recomputed_ops = 0 : i64, saved_bytes = 384 : i64, step_flops = 3040 : i64}
// NONE-NOT: train.recomputed

// selective: the matmuls' outputs stay; t1 is recomputed before its first
// reader, and t0 with o0 before w1's gradient reads o0 (t0 then lives on
// to its own readers).
// SELECTIVE-LABEL: func.func @step
// SELECTIVE-SAME: (%[[X:[^:]+]]: tensor<4x8xf32> {{[^%]*}}, %[[W0:[^:]+]]: tensor<8x8xf32> {{[^%]*}}, %[[W1:[^:]+]]: tensor<8x8xf32>
// SELECTIVE-SAME: recompute_flops = 96 : i64, recomputed_ops = 3 : i64, saved_bytes = 256 : i64
// SELECTIVE: %[[H0:.+]] = nn.matmul %[[X]], %[[W0]] :
// SELECTIVE: %[[H1:.+]] = nn.matmul %{{.+}}, %[[W1]] :
// SELECTIVE: nn.reduce_sum
// SELECTIVE: %[[T1:.+]] = nn.tanh %[[H1]] {train.recomputed}
// SELECTIVE-NEXT: nn.mul %{{.+}}, %[[T1]] :
// SELECTIVE: %[[T0:.+]] = nn.tanh %[[H0]] {train.recomputed}
// SELECTIVE-NEXT: %[[O0:.+]] = nn.mul %[[T0]], %[[T0]] {train.recomputed}
// SELECTIVE-NEXT: nn.transpose %[[O0]]
// SELECTIVE: nn.mul %{{.+}}, %[[T0]] :

// full: each block keeps its input (x, o0) alone; its matmul and tanh are
// replayed right before the first backward op that reads the tanh.
// FULL-LABEL: func.func @step
// FULL-SAME: (%[[X:[^:]+]]: tensor<4x8xf32> {{[^%]*}}, %[[W0:[^:]+]]: tensor<8x8xf32> {{[^%]*}}, %[[W1:[^:]+]]: tensor<8x8xf32>
// FULL-SAME: recompute_flops = 1088 : i64, recomputed_ops = 4 : i64, saved_bytes = 128 : i64
// FULL: %[[O0:.+]] = nn.mul
// FULL: nn.reduce_sum
// FULL: arith.constant
// FULL-NEXT: %[[H1:.+]] = nn.matmul %[[O0]], %[[W1]] {train.recomputed}
// FULL-NEXT: %[[T1:.+]] = nn.tanh %[[H1]] {train.recomputed}
// FULL-NEXT: nn.mul %{{.+}}, %[[T1]] :
// FULL: nn.transpose %[[O0]]
// FULL: %[[H0:.+]] = nn.matmul %[[X]], %[[W0]] {train.recomputed}
// FULL-NEXT: %[[T0:.+]] = nn.tanh %[[H0]] {train.recomputed}
// FULL-NEXT: nn.mul %{{.+}}, %[[T0]] :
func.func @step(%x: tensor<4x8xf32> {train.binding = #train.binding<input "x">},
                %w0: tensor<8x8xf32> {train.binding = #train.binding<param "w0">},
                %w1: tensor<8x8xf32> {train.binding = #train.binding<param "w1">})
    -> (tensor<f32>, tensor<8x8xf32>, tensor<8x8xf32>) {
  %h0 = nn.matmul %x, %w0 : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32> loc("/blocks.0/fc/MatMul")
  %t0 = nn.tanh %h0 : tensor<4x8xf32> -> tensor<4x8xf32> loc("/blocks.0/act/Tanh")
  %o0 = nn.mul %t0, %t0 : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32> loc("/blocks.0/Mul")
  %h1 = nn.matmul %o0, %w1 : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32> loc("/blocks.1/fc/MatMul")
  %t1 = nn.tanh %h1 : tensor<4x8xf32> -> tensor<4x8xf32> loc("/blocks.1/act/Tanh")
  %o1 = nn.mul %t1, %t1 : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32> loc("/blocks.1/Mul")
  %l = nn.reduce_sum %o1 {axes = array<i64: 0, 1>, keepdims = false} : tensor<4x8xf32> -> tensor<f32> loc("/head/ReduceSum")
  %ones = arith.constant dense<1.0> : tensor<4x8xf32>
  %a1 = nn.mul %ones, %t1 : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %gt1 = nn.add %a1, %a1 : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %sq1 = nn.mul %t1, %t1 : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %d1 = nn.sub %ones, %sq1 : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %gh1 = nn.mul %gt1, %d1 : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %o0t = nn.transpose %o0 {perm = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<8x4xf32>
  %gw1 = nn.matmul %o0t, %gh1 : tensor<8x4xf32>, tensor<4x8xf32> -> tensor<8x8xf32>
  %w1t = nn.transpose %w1 {perm = array<i64: 1, 0>} : tensor<8x8xf32> -> tensor<8x8xf32>
  %go0 = nn.matmul %gh1, %w1t : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %a0 = nn.mul %go0, %t0 : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %gt0 = nn.add %a0, %a0 : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %sq0 = nn.mul %t0, %t0 : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %d0 = nn.sub %ones, %sq0 : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %gh0 = nn.mul %gt0, %d0 : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %xt = nn.transpose %x {perm = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<8x4xf32>
  %gw0 = nn.matmul %xt, %gh0 : tensor<8x4xf32>, tensor<4x8xf32> -> tensor<8x8xf32>
  return %l, %gw0, %gw1 : tensor<f32>, tensor<8x8xf32>, tensor<8x8xf32>
}
