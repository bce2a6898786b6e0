// RUN: ztc-opt %s --ztc-fuse-cross-entropy | FileCheck %s

// ztc-fuse-cross-entropy: the classifier's product, log-softmax and mean
// nll_loss as one nn.linear_cross_entropy, only when the logits have no
// other reader and the types are the kernels' (f32 or f64 throughout, or
// a half product widened to an f32 loss). Each rewrite has its positive
// case, then the negative ones.

// The loss --loss cross_entropy builds on the example GPT
// (examples/onnx/make_gpt.py), whose head is tied to the embedding: the
// fused op reads the embedding with transpose_b, h flattened to [N, D].
// CHECK-LABEL: func.func @tied
// CHECK-SAME: (%[[H:[^:]+]]: tensor<2x16x32xf32>, %[[WTE:[^:]+]]: tensor<64x32xf32>, %[[T:[^:]+]]: tensor<32xi64>)
// CHECK-NOT: nn.transpose
// CHECK: %[[X:.+]] = nn.reshape %[[H]] : tensor<2x16x32xf32> -> tensor<32x32xf32>
// CHECK-NEXT: %[[L:[^,]+]], %{{.+}} = nn.linear_cross_entropy %[[X]], %[[WTE]], %[[T]] {ignore_index = -100 : i64, transpose_b}
// CHECK-NEXT: return %[[L]] :
func.func @tied(%h: tensor<2x16x32xf32>, %wte: tensor<64x32xf32>,
                %t: tensor<32xi64>) -> tensor<f32> {
  %wt = nn.transpose %wte {perm = array<i64: 1, 0>}
      : tensor<64x32xf32> -> tensor<32x64xf32>
  %o = nn.matmul %h, %wt : tensor<2x16x32xf32>, tensor<32x64xf32>
      -> tensor<2x16x64xf32>
  %z = nn.reshape %o : tensor<2x16x64xf32> -> tensor<32x64xf32>
  %lp = nn.log_softmax %z {axis = 1 : i64}
      : tensor<32x64xf32> -> tensor<32x64xf32>
  %l = nn.nll_loss %lp, %t {reduction = "mean", ignore_index = -100 : i64}
      : tensor<32x64xf32>, tensor<32xi64> -> tensor<f32>
  return %l : tensor<f32>
}

// A product with its own [D, V] weight, rank 2 already, in f64, without an
// ignore index: no reshape, no transpose_b.
// CHECK-LABEL: func.func @untied
// CHECK-SAME: (%[[H:[^:]+]]: tensor<8x4xf64>, %[[W:[^:]+]]: tensor<4x10xf64>, %[[T:[^:]+]]: tensor<8xi64>)
// CHECK-NEXT: %[[L:[^,]+]], %{{.+}} = nn.linear_cross_entropy %[[H]], %[[W]], %[[T]] : tensor<8x4xf64>, tensor<4x10xf64>, tensor<8xi64> -> tensor<f64>, tensor<f64>
// CHECK-NEXT: return %[[L]] :
func.func @untied(%h: tensor<8x4xf64>, %w: tensor<4x10xf64>,
                  %t: tensor<8xi64>) -> tensor<f64> {
  %z = nn.matmul %h, %w : tensor<8x4xf64>, tensor<4x10xf64> -> tensor<8x10xf64>
  %lp = nn.log_softmax %z {axis = 1 : i64}
      : tensor<8x10xf64> -> tensor<8x10xf64>
  %l = nn.nll_loss %lp, %t {reduction = "mean"}
      : tensor<8x10xf64>, tensor<8xi64> -> tensor<f64>
  return %l : tensor<f64>
}

// A transpose something else reads stays for it.
// CHECK-LABEL: func.func @shared_transpose
// CHECK: %[[WT:.+]] = nn.transpose
// CHECK: %[[L:[^,]+]], %{{.+}} = nn.linear_cross_entropy %{{.+}}, %{{.+}}, %{{.+}} {transpose_b}
// CHECK: return %[[L]], %[[WT]]
func.func @shared_transpose(%h: tensor<8x4xf32>, %wte: tensor<10x4xf32>,
                            %t: tensor<8xi64>)
    -> (tensor<f32>, tensor<4x10xf32>) {
  %wt = nn.transpose %wte {perm = array<i64: 1, 0>}
      : tensor<10x4xf32> -> tensor<4x10xf32>
  %z = nn.matmul %h, %wt : tensor<8x4xf32>, tensor<4x10xf32> -> tensor<8x10xf32>
  %lp = nn.log_softmax %z {axis = 1 : i64}
      : tensor<8x10xf32> -> tensor<8x10xf32>
  %l = nn.nll_loss %lp, %t {reduction = "mean"}
      : tensor<8x10xf32>, tensor<8xi64> -> tensor<f32>
  return %l, %wt : tensor<f32>, tensor<4x10xf32>
}

// Negative: logits another op reads would have to be materialized.
// CHECK-LABEL: func.func @logits_read_twice
// CHECK-NOT: nn.linear_cross_entropy
// CHECK: nn.nll_loss
func.func @logits_read_twice(%h: tensor<8x4xf32>, %w: tensor<4x10xf32>,
                             %t: tensor<8xi64>)
    -> (tensor<f32>, tensor<8x10xf32>) {
  %z = nn.matmul %h, %w : tensor<8x4xf32>, tensor<4x10xf32> -> tensor<8x10xf32>
  %lp = nn.log_softmax %z {axis = 1 : i64}
      : tensor<8x10xf32> -> tensor<8x10xf32>
  %l = nn.nll_loss %lp, %t {reduction = "mean"}
      : tensor<8x10xf32>, tensor<8xi64> -> tensor<f32>
  return %l, %z : tensor<f32>, tensor<8x10xf32>
}

// Negative: a sum, and class weights, are not what the fused op computes.
// CHECK-LABEL: func.func @sum_and_weights
// CHECK-NOT: nn.linear_cross_entropy
// CHECK-COUNT-2: nn.nll_loss
func.func @sum_and_weights(%h: tensor<8x4xf32>, %w: tensor<4x10xf32>,
                           %t: tensor<8xi64>, %cw: tensor<10xf32>)
    -> (tensor<f32>, tensor<f32>) {
  %z = nn.matmul %h, %w : tensor<8x4xf32>, tensor<4x10xf32> -> tensor<8x10xf32>
  %lp = nn.log_softmax %z {axis = 1 : i64}
      : tensor<8x10xf32> -> tensor<8x10xf32>
  %l = nn.nll_loss %lp, %t {reduction = "sum"}
      : tensor<8x10xf32>, tensor<8xi64> -> tensor<f32>
  %z2 = nn.matmul %h, %w : tensor<8x4xf32>, tensor<4x10xf32> -> tensor<8x10xf32>
  %lp2 = nn.log_softmax %z2 {axis = 1 : i64}
      : tensor<8x10xf32> -> tensor<8x10xf32>
  %l2 = nn.nll_loss %lp2, %t, %cw {reduction = "mean"}
      : tensor<8x10xf32>, tensor<8xi64>, tensor<10xf32> -> tensor<f32>
  return %l, %l2 : tensor<f32>, tensor<f32>
}

// Mixed precision (--precision bf16): the tied head's bf16 product of the
// bf16 copies of h and the embedding, its logits widened to f32 and then
// flattened (what ztc-autocast and ztc-attach-loss build). The fused op
// reads the bf16 operands and gives an f32 loss; the widening goes with
// the chain, the casts of its operands stay.
// CHECK-LABEL: func.func @bf16_tied
// CHECK-SAME: (%[[H:[^:]+]]: tensor<2x4x8xf32>, %[[WTE:[^:]+]]: tensor<16x8xf32>, %[[T:[^:]+]]: tensor<8xi64>)
// CHECK: %[[WH:.+]] = nn.cast %[[WTE]] : tensor<16x8xf32> -> tensor<16x8xbf16>
// CHECK: %[[HH:.+]] = nn.cast %[[H]] : tensor<2x4x8xf32> -> tensor<2x4x8xbf16>
// CHECK-NOT: nn.transpose
// CHECK: %[[X:.+]] = nn.reshape %[[HH]] : tensor<2x4x8xbf16> -> tensor<8x8xbf16>
// CHECK-NEXT: %[[L:[^,]+]], %{{.+}} = nn.linear_cross_entropy %[[X]], %[[WH]], %[[T]] {transpose_b} : tensor<8x8xbf16>, tensor<16x8xbf16>, tensor<8xi64> -> tensor<f32>, tensor<f32>
// CHECK-NEXT: return %[[L]] : tensor<f32>
func.func @bf16_tied(%h: tensor<2x4x8xf32>, %wte: tensor<16x8xf32>,
                     %t: tensor<8xi64>) -> tensor<f32> {
  %wh = nn.cast %wte : tensor<16x8xf32> -> tensor<16x8xbf16>
  %hh = nn.cast %h : tensor<2x4x8xf32> -> tensor<2x4x8xbf16>
  %wt = nn.transpose %wh {perm = array<i64: 1, 0>}
      : tensor<16x8xbf16> -> tensor<8x16xbf16>
  %o = nn.matmul %hh, %wt : tensor<2x4x8xbf16>, tensor<8x16xbf16>
      -> tensor<2x4x16xbf16>
  %of = nn.cast %o : tensor<2x4x16xbf16> -> tensor<2x4x16xf32>
  %z = nn.reshape %of : tensor<2x4x16xf32> -> tensor<8x16xf32>
  %lp = nn.log_softmax %z {axis = 1 : i64}
      : tensor<8x16xf32> -> tensor<8x16xf32>
  %l = nn.nll_loss %lp, %t {reduction = "mean"}
      : tensor<8x16xf32>, tensor<8xi64> -> tensor<f32>
  return %l : tensor<f32>
}

// An f16 product flattened first, then widened: the other order.
// CHECK-LABEL: func.func @f16_flattened_then_widened
// CHECK-NOT: nn.cast
// CHECK: nn.linear_cross_entropy %{{.+}}, %{{.+}}, %{{.+}} : tensor<8x4xf16>, tensor<4x10xf16>, tensor<8xi64> -> tensor<f32>, tensor<f32>
// CHECK-NOT: nn.log_softmax
func.func @f16_flattened_then_widened(%h: tensor<2x4x4xf16>,
                                      %w: tensor<4x10xf16>,
                                      %t: tensor<8xi64>) -> tensor<f32> {
  %o = nn.matmul %h, %w : tensor<2x4x4xf16>, tensor<4x10xf16> -> tensor<2x4x10xf16>
  %zh = nn.reshape %o : tensor<2x4x10xf16> -> tensor<8x10xf16>
  %z = nn.cast %zh : tensor<8x10xf16> -> tensor<8x10xf32>
  %lp = nn.log_softmax %z {axis = 1 : i64}
      : tensor<8x10xf32> -> tensor<8x10xf32>
  %l = nn.nll_loss %lp, %t {reduction = "mean"}
      : tensor<8x10xf32>, tensor<8xi64> -> tensor<f32>
  return %l : tensor<f32>
}

// Negative: a half loss (log-softmax in bf16, no widening), a widening
// that is not from half (f32 logits to f64), a widened product read by
// something else, and a head with a bias stay as they are.
// CHECK-LABEL: func.func @bf16_loss_and_bias
// CHECK-NOT: nn.linear_cross_entropy
// CHECK-COUNT-4: nn.nll_loss
func.func @bf16_loss_and_bias(%h: tensor<8x4xbf16>, %w: tensor<4x10xbf16>,
                         %hf: tensor<8x4xf32>, %wf: tensor<4x10xf32>,
                         %bias: tensor<10xf32>, %t: tensor<8xi64>)
    -> (tensor<bf16>, tensor<f64>, tensor<f32>, tensor<f32>, tensor<8x10xf32>) {
  %zh = nn.matmul %h, %w : tensor<8x4xbf16>, tensor<4x10xbf16> -> tensor<8x10xbf16>
  %lph = nn.log_softmax %zh {axis = 1 : i64}
      : tensor<8x10xbf16> -> tensor<8x10xbf16>
  %lh = nn.nll_loss %lph, %t {reduction = "mean"}
      : tensor<8x10xbf16>, tensor<8xi64> -> tensor<bf16>
  %p64 = nn.matmul %hf, %wf : tensor<8x4xf32>, tensor<4x10xf32> -> tensor<8x10xf32>
  %z64 = nn.cast %p64 : tensor<8x10xf32> -> tensor<8x10xf64>
  %lp64 = nn.log_softmax %z64 {axis = 1 : i64}
      : tensor<8x10xf64> -> tensor<8x10xf64>
  %l64 = nn.nll_loss %lp64, %t {reduction = "mean"}
      : tensor<8x10xf64>, tensor<8xi64> -> tensor<f64>
  %zh2 = nn.matmul %h, %w : tensor<8x4xbf16>, tensor<4x10xbf16> -> tensor<8x10xbf16>
  %z2 = nn.cast %zh2 : tensor<8x10xbf16> -> tensor<8x10xf32>
  %lp2 = nn.log_softmax %z2 {axis = 1 : i64}
      : tensor<8x10xf32> -> tensor<8x10xf32>
  %l2 = nn.nll_loss %lp2, %t {reduction = "mean"}
      : tensor<8x10xf32>, tensor<8xi64> -> tensor<f32>
  %p = nn.matmul %hf, %wf : tensor<8x4xf32>, tensor<4x10xf32> -> tensor<8x10xf32>
  %zb = nn.add %p, %bias : tensor<8x10xf32>, tensor<10xf32> -> tensor<8x10xf32>
  %lpb = nn.log_softmax %zb {axis = 1 : i64}
      : tensor<8x10xf32> -> tensor<8x10xf32>
  %lb = nn.nll_loss %lpb, %t {reduction = "mean"}
      : tensor<8x10xf32>, tensor<8xi64> -> tensor<f32>
  return %lh, %l64, %l2, %lb, %z2
      : tensor<bf16>, tensor<f64>, tensor<f32>, tensor<f32>, tensor<8x10xf32>
}

// Negative: a log-softmax over another axis is not over the classes.
// CHECK-LABEL: func.func @other_axis
// CHECK-NOT: nn.linear_cross_entropy
func.func @other_axis(%h: tensor<2x3x4xf32>, %w: tensor<4x5xf32>,
                      %t: tensor<2x5xi64>) -> tensor<f32> {
  %o = nn.matmul %h, %w : tensor<2x3x4xf32>, tensor<4x5xf32> -> tensor<2x3x5xf32>
  %lp = nn.log_softmax %o {axis = 1 : i64}
      : tensor<2x3x5xf32> -> tensor<2x3x5xf32>
  %l = nn.nll_loss %lp, %t {reduction = "mean"}
      : tensor<2x3x5xf32>, tensor<2x5xi64> -> tensor<f32>
  return %l : tensor<f32>
}
