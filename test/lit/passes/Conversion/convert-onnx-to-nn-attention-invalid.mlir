// RUN: ztc-opt %s -split-input-file -ztc-convert-onnx-to-nn -verify-diagnostics

// Diagnostics of the transformer converters (AttentionOps.cpp): RMSNormalization,
// RotaryEmbedding and Attention check what their ONNX schemas leave to the
// shapes, and name the node.

func.func @rms_scale_does_not_broadcast(%x: tensor<2x4xf32>, %s: tensor<3xf32>) -> none {
  // expected-error @unknown {{node 'rms' (RMSNormalization, opset 23): cannot build nn.mul: 'nn.mul' op operands 'tensor<2x4xf32>' and 'tensor<3xf32>' are not broadcastable}}
  %0 = onnx.node "RMSNormalization"(%x, %s) {opset = 23 : i64} : (tensor<2x4xf32>, tensor<3xf32>) -> none loc("rms")
  return %0 : none
}

// -----

// Scale broadcasts to X, not X to scale.
func.func @rms_scale_widens(%x: tensor<4xf32>, %s: tensor<2x4xf32>) -> none {
  // expected-error @unknown {{node 'rms' (RMSNormalization, opset 23): scale 'tensor<2x4xf32>' does not broadcast to X 'tensor<4xf32>'}}
  %0 = onnx.node "RMSNormalization"(%x, %s) {opset = 23 : i64} : (tensor<4xf32>, tensor<2x4xf32>) -> none loc("rms")
  return %0 : none
}

// -----

func.func @rms_stash_type(%x: tensor<2x4xf32>, %s: tensor<4xf32>) -> none {
  // expected-error @unknown {{node 'rms' (RMSNormalization, opset 23): stash_type 7 is not a floating-point type ztc computes in}}
  %0 = onnx.node "RMSNormalization"(%x, %s) {opset = 23 : i64, attrs = {stash_type = 7 : i64}} : (tensor<2x4xf32>, tensor<4xf32>) -> none loc("rms")
  return %0 : none
}

// -----

func.func @rotary_3d_without_heads(%x: tensor<1x3x8xf32>, %c: tensor<4x4xf32>, %p: tensor<1x3xi64>) -> none {
  // expected-error @unknown {{node 'rope' (RotaryEmbedding, opset 23): a 3-D X needs num_heads dividing its hidden size 8, got num_heads 0}}
  %0 = onnx.node "RotaryEmbedding"(%x, %c, %c, %p) {opset = 23 : i64} : (tensor<1x3x8xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<1x3xi64>) -> none loc("rope")
  return %0 : none
}

// -----

func.func @rotary_cache_too_narrow(%x: tensor<1x2x3x8xf32>, %c: tensor<4x2xf32>, %p: tensor<1x3xi64>) -> none {
  // expected-error @unknown {{node 'rope' (RotaryEmbedding, opset 23): cos_cache holds 2 angles per position, fewer than the 4 the rotation needs}}
  %0 = onnx.node "RotaryEmbedding"(%x, %c, %c, %p) {opset = 23 : i64} : (tensor<1x2x3x8xf32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<1x3xi64>) -> none loc("rope")
  return %0 : none
}

// -----

func.func @rotary_odd_dim(%x: tensor<1x2x3x8xf32>, %c: tensor<4x4xf32>, %p: tensor<1x3xi64>) -> none {
  // expected-error @unknown {{node 'rope' (RotaryEmbedding, opset 23): rotary_embedding_dim 3 must be even and at most the head size 8}}
  %0 = onnx.node "RotaryEmbedding"(%x, %c, %c, %p) {opset = 23 : i64, attrs = {rotary_embedding_dim = 3 : i64}} : (tensor<1x2x3x8xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<1x3xi64>) -> none loc("rope")
  return %0 : none
}

// -----

func.func @attention_heads_not_grouped(%q: tensor<1x3x4x8xf32>, %k: tensor<1x2x4x8xf32>) -> none {
  // expected-error @unknown {{node 'att' (Attention, opset 23): the 3 query heads are not a multiple of the 2 key/value heads}}
  %0 = onnx.node "Attention"(%q, %k, %k) {opset = 23 : i64} : (tensor<1x3x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> none loc("att")
  return %0 : none
}

// -----

func.func @attention_3d_without_heads(%q: tensor<1x4x8xf32>) -> none {
  // expected-error @unknown {{node 'att' (Attention, opset 23): 3-D Q, K and V need q_num_heads and kv_num_heads}}
  %0 = onnx.node "Attention"(%q, %q, %q) {opset = 23 : i64} : (tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> none loc("att")
  return %0 : none
}

// -----

func.func @attention_mask_type(%q: tensor<1x2x4x8xf32>, %m: tensor<4x4xi64>) -> none {
  // expected-error @unknown {{node 'att' (Attention, opset 23): attn_mask is 'tensor<4x4xi64>', expected booleans or elements of Q's type 'f32'}}
  %0 = onnx.node "Attention"(%q, %q, %q, %m) {opset = 23 : i64} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<4x4xi64>) -> none loc("att")
  return %0 : none
}

// -----

func.func @attention_past_alone(%q: tensor<1x2x4x8xf32>, %p: tensor<1x2x3x8xf32>) -> none {
  // expected-error @unknown {{node 'att' (Attention, opset 23): past_key and past_value must be given together}}
  %n = onnx.none
  %0 = onnx.node "Attention"(%q, %q, %q, %n, %p) {opset = 23 : i64} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, none, tensor<1x2x3x8xf32>) -> none loc("att")
  return %0 : none
}
