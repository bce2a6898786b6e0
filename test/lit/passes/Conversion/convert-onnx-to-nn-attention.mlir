// RUN: ztc-opt %s -split-input-file -ztc-convert-onnx-to-nn | FileCheck %s

// ztc-convert-onnx-to-nn on opset 23's transformer operators
// (AttentionOps.cpp), none of which is an nn op of its own: each becomes the
// ops of its ONNX function body, so its gradient is theirs. Their values are
// checked by the ONNX node tests (forward-conformance), their gradients by
// test/lit/driver/gradcheck-attention-ops.test, their errors by
// convert-onnx-to-nn-attention-invalid.mlir.

// RMSNormalization of bf16: the mean square over the last axis in f32 (the
// default stash_type), the quotient cast back, then the scale.
// CHECK-LABEL: func.func @rms
// CHECK: %[[X:.+]] = nn.cast %arg0 : tensor<2x3x4xbf16> -> tensor<2x3x4xf32>
// CHECK: %[[SQ:.+]] = nn.mul %[[X]], %[[X]]
// CHECK: %[[MEAN:.+]] = nn.reduce_mean %[[SQ]] {axes = array<i64: 2>, keepdims = true} : tensor<2x3x4xf32> -> tensor<2x3x1xf32>
// CHECK: %[[EPS:.+]] = arith.constant dense<1.000000e-03> : tensor<f32>
// CHECK: %[[SUM:.+]] = nn.add %[[MEAN]], %[[EPS]]
// CHECK: %[[RMS:.+]] = nn.sqrt %[[SUM]]
// CHECK: %[[N:.+]] = nn.div %[[X]], %[[RMS]]
// CHECK: %[[B:.+]] = nn.cast %[[N]] : tensor<2x3x4xf32> -> tensor<2x3x4xbf16>
// CHECK: nn.mul %[[B]], %arg1 : tensor<2x3x4xbf16>, tensor<4xbf16> -> tensor<2x3x4xbf16>
func.func @rms(%x: tensor<2x3x4xbf16>, %s: tensor<4xbf16>) -> none {
  %0 = onnx.node "RMSNormalization"(%x, %s) {opset = 23 : i64, attrs = {epsilon = 1.0e-3 : f32}} : (tensor<2x3x4xbf16>, tensor<4xbf16>) -> none
  return %0 : none
}

// -----

// Causal grouped-query attention, 4 query heads over 2 key/value heads of
// size 2: Q and K scaled by sqrt(1/sqrt(2)) = 0.8409 (K before its heads
// are repeated), each key/value head repeated in place ([h0, h0, h1, h1]),
// the causal bias a constant.
// CHECK-LABEL: func.func @attention
// CHECK: %[[ROOT:.+]] = arith.constant dense<0.840896427> : tensor<f32>
// CHECK: %[[Q:.+]] = nn.mul %arg0, %[[ROOT]]
// CHECK: %[[KS:.+]] = nn.mul %arg1, %[[ROOT]] : tensor<1x2x3x2xf32>, tensor<f32> -> tensor<1x2x3x2xf32>
// CHECK: %[[K1:.+]] = nn.reshape %[[KS]] : tensor<1x2x3x2xf32> -> tensor<1x2x1x3x2xf32>
// CHECK: %[[K2:.+]] = nn.broadcast_to %[[K1]] {shape = array<i64: 1, 2, 2, 3, 2>}
// CHECK: %[[K:.+]] = nn.reshape %[[K2]] : tensor<1x2x2x3x2xf32> -> tensor<1x4x3x2xf32>
// CHECK: %[[V:.+]] = nn.reshape %{{.+}} : tensor<1x2x2x3x2xf32> -> tensor<1x4x3x2xf32>
// CHECK: %[[KT:.+]] = nn.transpose %[[K]] {perm = array<i64: 0, 1, 3, 2>}
// CHECK: %[[S:.+]] = nn.matmul %[[Q]], %[[KT]] : tensor<1x4x3x2xf32>, tensor<1x4x2x3xf32> -> tensor<1x4x3x3xf32>
// CHECK: %[[BIAS:.+]] = arith.constant dense<{{\[\[}}0.000000e+00, 0xFF800000, 0xFF800000], [0.000000e+00, 0.000000e+00, 0xFF800000], [0.000000e+00, 0.000000e+00, 0.000000e+00]]> : tensor<3x3xf32>
// CHECK: %[[SB:.+]] = nn.add %[[S]], %[[BIAS]]
// CHECK: %[[P:.+]] = nn.softmax %[[SB]] {axis = 3 : i64}
// CHECK: nn.matmul %[[P]], %[[V]] : tensor<1x4x3x3xf32>, tensor<1x4x3x2xf32> -> tensor<1x4x3x2xf32>
func.func @attention(%q: tensor<1x4x3x2xf32>, %k: tensor<1x2x3x2xf32>) -> none {
  %0 = onnx.node "Attention"(%q, %k, %k) {opset = 23 : i64, attrs = {is_causal = 1 : i64}} : (tensor<1x4x3x2xf32>, tensor<1x2x3x2xf32>, tensor<1x2x3x2xf32>) -> none
  return %0 : none
}

// -----

// RotaryEmbedding of 4-D X: tokens first, the angles gathered at the
// position ids, the halves turned by one nn.rotary whose tables hold each
// angle twice, heads first again.
// CHECK-LABEL: func.func @rotary
// CHECK: %[[X:.+]] = nn.transpose %arg0 {perm = array<i64: 0, 2, 1, 3>} : tensor<1x2x3x4xf32> -> tensor<1x3x2x4xf32>
// CHECK: %[[COS:.+]] = nn.gather %arg1, %arg2 {axis = 0 : i64} : tensor<8x2xf32>, tensor<1x3xi64> -> tensor<1x3x2xf32>
// CHECK: %[[C:.+]] = nn.reshape %[[COS]] : tensor<1x3x2xf32> -> tensor<1x3x1x2xf32>
// CHECK: %[[S:.+]] = nn.reshape %{{.+}} : tensor<1x3x2xf32> -> tensor<1x3x1x2xf32>
// CHECK: %[[CT:.+]] = nn.concat %[[C]], %[[C]] {axis = 3 : i64} : tensor<1x3x1x2xf32>, tensor<1x3x1x2xf32> -> tensor<1x3x1x4xf32>
// CHECK: %[[ST:.+]] = nn.concat %[[S]], %[[S]] {axis = 3 : i64}
// CHECK: %[[R:.+]] = nn.rotary %[[X]], %[[CT]], %[[ST]] {inverse = false} : tensor<1x3x2x4xf32>, tensor<1x3x1x4xf32>, tensor<1x3x1x4xf32> -> tensor<1x3x2x4xf32>
// CHECK: nn.transpose %[[R]] {perm = array<i64: 0, 2, 1, 3>} : tensor<1x3x2x4xf32> -> tensor<1x2x3x4xf32>
func.func @rotary(%x: tensor<1x2x3x4xf32>, %c: tensor<8x2xf32>, %p: tensor<1x3xi64>) -> none {
  %0 = onnx.node "RotaryEmbedding"(%x, %c, %c, %p) {opset = 23 : i64} : (tensor<1x2x3x4xf32>, tensor<8x2xf32>, tensor<8x2xf32>, tensor<1x3xi64>) -> none
  return %0 : none
}

// -----

// 3-D X of 2 heads of 6, the first 4 features of each rotated (angles per
// token, no position ids): the rotary reads that slice and the other 2
// features follow it unturned.
// CHECK-LABEL: func.func @rotary_partial
// CHECK: %[[X:.+]] = nn.reshape %arg0 : tensor<1x3x12xf32> -> tensor<1x3x2x6xf32>
// CHECK: %[[CUT:.+]] = nn.slice %[[X]] {sizes = array<i64: 1, 3, 2, 4>, starts = array<i64: 0, 0, 0, 0>
// CHECK: %[[R:.+]] = nn.rotary %[[CUT]], %{{.+}}, %{{.+}} {inverse = false} : tensor<1x3x2x4xf32>, tensor<1x3x1x4xf32>, tensor<1x3x1x4xf32> -> tensor<1x3x2x4xf32>
// CHECK: %[[REST:.+]] = nn.slice %[[X]] {sizes = array<i64: 1, 3, 2, 2>, starts = array<i64: 0, 0, 0, 4>
// CHECK: %[[J:.+]] = nn.concat %[[R]], %[[REST]] {axis = 3 : i64}
// CHECK: nn.reshape %[[J]] : tensor<1x3x2x6xf32> -> tensor<1x3x12xf32>
func.func @rotary_partial(%x: tensor<1x3x12xf32>, %c: tensor<1x3x2xf32>) -> none {
  %0 = onnx.node "RotaryEmbedding"(%x, %c, %c) {opset = 23 : i64, attrs = {num_heads = 2 : i64, rotary_embedding_dim = 4 : i64}} : (tensor<1x3x12xf32>, tensor<1x3x2xf32>, tensor<1x3x2xf32>) -> none
  return %0 : none
}
