// RUN: ztc-opt %s -split-input-file -ztc-convert-onnx-to-nn -verify-diagnostics

// Diagnostics of ztc-convert-onnx-to-nn's indexing converters (IndexOps.cpp),
// GroupNormalization, InstanceNormalization and IsInf: one case each,
// every message naming the node.

// GatherElements' indices have the data's rank.
func.func @ge_rank(%x: tensor<3x4xf32>, %i: tensor<4xi64>) -> none {
  // expected-error @unknown {{node 'ge' (GatherElements, opset 13): indices have rank 1 but data has rank 2}}
  %0 = onnx.node "GatherElements"(%x, %i) {opset = 13 : i64} : (tensor<3x4xf32>, tensor<4xi64>) -> none loc("ge")
  return %0 : none
}

// -----

// GatherND's index tuples address at most the data's dimensions.
func.func @gnd_k(%x: tensor<2x3xf32>, %i: tensor<5x3xi64>) -> none {
  // expected-error @unknown {{node 'gnd' (GatherND, opset 13): the last dimension of indices is 3, expected 1 to 2 (data rank minus batch_dims)}}
  %0 = onnx.node "GatherND"(%x, %i) {opset = 13 : i64} : (tensor<2x3xf32>, tensor<5x3xi64>) -> none loc("gnd")
  return %0 : none
}

// -----

// A reduction ONNX does not define is refused by name.
func.func @snd_reduction(%x: tensor<4x3xf32>, %i: tensor<2x1xi64>, %u: tensor<2x3xf32>) -> none {
  // expected-error @unknown {{node 'snd' (ScatterND, opset 18): reduction 'mean' is not one of none, add, mul, max, min}}
  %0 = onnx.node "ScatterND"(%x, %i, %u) {opset = 18 : i64, attrs = {reduction = "mean"}} : (tensor<4x3xf32>, tensor<2x1xi64>, tensor<2x3xf32>) -> none loc("snd")
  return %0 : none
}

// -----

// The reductions mul, max and min build a one-hot of every update against
// every row: bounded like the index grids.
func.func @se_reduction_too_large(%x: tensor<4096x4096xf32>, %i: tensor<2x4096xi64>, %u: tensor<2x4096xf32>) -> none {
  // expected-error @unknown {{node 'se' (ScatterElements, opset 18): reduction 'max' matches 8192 updates with 16777216 data elements, more pairs than ztc builds (16777216)}}
  %0 = onnx.node "ScatterElements"(%x, %i, %u) {opset = 18 : i64, attrs = {reduction = "max"}} : (tensor<4096x4096xf32>, tensor<2x4096xi64>, tensor<2x4096xf32>) -> none loc("se")
  return %0 : none
}

// -----

// ScatterND's updates have the shape the indices select.
func.func @snd_updates(%x: tensor<4x3xf32>, %i: tensor<2x1xi64>, %u: tensor<2x2xf32>) -> none {
  // expected-error @unknown {{node 'snd' (ScatterND, opset 16): updates are 'tensor<2x2xf32>', expected 'tensor<2x3xf32>'}}
  %0 = onnx.node "ScatterND"(%x, %i, %u) {opset = 16 : i64} : (tensor<4x3xf32>, tensor<2x1xi64>, tensor<2x2xf32>) -> none loc("snd")
  return %0 : none
}

// -----

// Pad's wrap mode exists from opset 19.
func.func @pad_mode(%x: tensor<2x3xf32>) -> none {
  %p = onnx.constant dense<[1, 1, 1, 1]> : tensor<4xi64>
  // expected-error @unknown {{node 'pad' (Pad, opset 13): mode 'wrap' is not one of constant, reflect, edge}}
  %0 = onnx.node "Pad"(%x, %p) {opset = 13 : i64, attrs = {mode = "wrap"}} : (tensor<2x3xf32>, tensor<4xi64>) -> none loc("pad")
  return %0 : none
}

// -----

// Pad takes a begin and an end per padded axis.
func.func @pad_count(%x: tensor<2x3xf32>) -> none {
  %p = onnx.constant dense<[1, 1, 1]> : tensor<3xi64>
  // expected-error @unknown {{node 'pad' (Pad, opset 13): pads has 3 entries, expected 4 (a begin and an end per axis)}}
  %0 = onnx.node "Pad"(%x, %p) {opset = 13 : i64} : (tensor<2x3xf32>, tensor<3xi64>) -> none loc("pad")
  return %0 : none
}

// -----

// Negative pads crop, but not more than the axis holds.
func.func @pad_crop(%x: tensor<2x3xf32>) -> none {
  %p = onnx.constant dense<[0, -2, 0, -2]> : tensor<4xi64>
  // expected-error @unknown {{node 'pad' (Pad, opset 13): pads -2 and -2 remove more than the 3 elements of axis 1}}
  %0 = onnx.node "Pad"(%x, %p) {opset = 13 : i64} : (tensor<2x3xf32>, tensor<4xi64>) -> none loc("pad")
  return %0 : none
}

// -----

// Edge padding needs an element to repeat.
func.func @pad_edge_empty(%x: tensor<0x3xf32>) -> none {
  %p = onnx.constant dense<[1, 0, 1, 0]> : tensor<4xi64>
  // expected-error @unknown {{node 'pad' (Pad, opset 13): mode 'edge' cannot pad axis 0, which is empty}}
  %0 = onnx.node "Pad"(%x, %p) {opset = 13 : i64, attrs = {mode = "edge"}} : (tensor<0x3xf32>, tensor<4xi64>) -> none loc("pad")
  return %0 : none
}

// -----

// CumSum's axis decides the scan: it must be constant.
func.func @cumsum_axis(%x: tensor<2x3xf32>, %a: tensor<i64>) -> none {
  // expected-error @unknown {{node 'cs' (CumSum, opset 14): axis (input 1) must be a constant integer tensor once input shapes are static}}
  %0 = onnx.node "CumSum"(%x, %a) {opset = 14 : i64} : (tensor<2x3xf32>, tensor<i64>) -> none loc("cs")
  return %0 : none
}

// -----

// GroupNormalization's groups divide the channels.
func.func @gn_groups(%x: tensor<2x6x3xf32>, %s: tensor<6xf32>, %b: tensor<6xf32>) -> none {
  // expected-error @unknown {{node 'gn' (GroupNormalization, opset 21): num_groups 4 does not divide the 6 channels}}
  %0 = onnx.node "GroupNormalization"(%x, %s, %b) {opset = 21 : i64, attrs = {num_groups = 4 : i64}} : (tensor<2x6x3xf32>, tensor<6xf32>, tensor<6xf32>) -> none loc("gn")
  return %0 : none
}

// -----

// Before opset 21, scale and bias are per group.
func.func @gn_scale(%x: tensor<2x6x3xf32>, %s: tensor<6xf32>, %b: tensor<6xf32>) -> none {
  // expected-error @unknown {{node 'gn' (GroupNormalization, opset 18): scale is 'tensor<6xf32>', expected 3 elements (one per group)}}
  %0 = onnx.node "GroupNormalization"(%x, %s, %b) {opset = 18 : i64, attrs = {num_groups = 3 : i64}} : (tensor<2x6x3xf32>, tensor<6xf32>, tensor<6xf32>) -> none loc("gn")
  return %0 : none
}

// -----

// InstanceNormalization's scale and bias are per channel.
func.func @in_scale(%x: tensor<2x6x3xf32>, %s: tensor<3xf32>, %b: tensor<6xf32>) -> none {
  // expected-error @unknown {{node 'in' (InstanceNormalization, opset 6): scale is 'tensor<3xf32>', expected 6 elements (one per channel)}}
  %0 = onnx.node "InstanceNormalization"(%x, %s, %b) {opset = 6 : i64} : (tensor<2x6x3xf32>, tensor<3xf32>, tensor<6xf32>) -> none loc("in")
  return %0 : none
}

// -----

// InstanceNormalization needs spatial dimensions.
func.func @in_rank(%x: tensor<2x6xf32>, %s: tensor<6xf32>, %b: tensor<6xf32>) -> none {
  // expected-error @unknown {{node 'in' (InstanceNormalization, opset 6): input must have rank 3 or more ([N, C, D1, ...]), got 2}}
  %0 = onnx.node "InstanceNormalization"(%x, %s, %b) {opset = 6 : i64} : (tensor<2x6xf32>, tensor<6xf32>, tensor<6xf32>) -> none loc("in")
  return %0 : none
}

// -----

// Indices are integers.
func.func @ge_float_indices(%x: tensor<3x4xf32>, %i: tensor<3x4xf32>) -> none {
  // expected-error @unknown {{node 'ge' (GatherElements, opset 13): indices must be int32 or int64, got 'f32'}}
  %0 = onnx.node "GatherElements"(%x, %i) {opset = 13 : i64} : (tensor<3x4xf32>, tensor<3x4xf32>) -> none loc("ge")
  return %0 : none
}

// -----

// A gathering pad's positions are a constant: bounded.
func.func @pad_too_large(%x: tensor<2x3xf32>) -> none {
  %p = onnx.constant dense<[0, 0, 0, 16777216]> : tensor<4xi64>
  // expected-error @unknown {{node 'pad' (Pad, opset 13): mode 'edge' pads axis 1 to 16777219 elements, more than 16777216}}
  %0 = onnx.node "Pad"(%x, %p) {opset = 13 : i64, attrs = {mode = "edge"}} : (tensor<2x3xf32>, tensor<4xi64>) -> none loc("pad")
  return %0 : none
}

// -----

// An index grid is built as a constant: bounded at 2^24 positions.
func.func @ge_huge_indices(%x: tensor<2x4xf32>, %i: tensor<2x2199023255552xi64>) -> none {
  // expected-error @unknown {{node 'ge' (GatherElements, opset 13): indices address 4398046511104 positions; ztc builds their coordinates as a constant of at most 16777216}}
  %0 = onnx.node "GatherElements"(%x, %i) {opset = 13 : i64, attrs = {axis = 1 : i64}} : (tensor<2x4xf32>, tensor<2x2199023255552xi64>) -> none loc("ge")
  return %0 : none
}

// -----

// IsInf takes floats (ONNX's type constraint).
func.func @isinf_of_integers(%x: tensor<4xi64>) -> none {
  // expected-error @unknown {{node 'inf' (IsInf, opset 20): X must be a floating-point tensor, got 'i64'}}
  %0 = onnx.node "IsInf"(%x) {opset = 20 : i64} : (tensor<4xi64>) -> none loc("inf")
  return %0 : none
}
