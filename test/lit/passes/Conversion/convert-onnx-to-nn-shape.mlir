// RUN: ztc-opt %s -split-input-file -ztc-convert-onnx-to-nn | FileCheck %s

// ztc-convert-onnx-to-nn on the data-movement and shape converters of
// ShapeOps.cpp. With static input shapes, shape-computing operators become
// constants, and reshapes, slices and broadcasts get fully resolved
// attributes (no 0/-1 placeholders, no clamping, no negative axes).

// Reshape resolves 0 (copy the input's dimension) and -1 (whatever is left).
// CHECK-LABEL: func.func @reshape_zero_and_minus_one
// CHECK-SAME: (%[[X:.+]]: tensor<2x3x4xf32>) -> (tensor<2x12xf32>, tensor<4x3x2x1xf32>)
// CHECK: %[[A:.+]] = nn.reshape %[[X]] : tensor<2x3x4xf32> -> tensor<2x12xf32>
// CHECK: %[[B:.+]] = nn.reshape %[[X]] : tensor<2x3x4xf32> -> tensor<4x3x2x1xf32>
// CHECK: return %[[A]], %[[B]]
func.func @reshape_zero_and_minus_one(%x: tensor<2x3x4xf32>) -> (none, none) {
  %s0 = onnx.constant dense<[0, -1]> : tensor<2xi64>
  %0 = onnx.node "Reshape"(%x, %s0) {opset = 14 : i64} : (tensor<2x3x4xf32>, tensor<2xi64>) -> none
  %s1 = onnx.constant dense<[4, 0, 2, -1]> : tensor<4xi64>
  %1 = onnx.node "Reshape"(%x, %s1) {opset = 5 : i64} : (tensor<2x3x4xf32>, tensor<4xi64>) -> none
  return %0, %1 : none, none
}

// -----

// With allowzero (opset 14) a 0 in the shape is a real empty dimension.
// CHECK-LABEL: func.func @reshape_allowzero
// CHECK-SAME: (%[[X:.+]]: tensor<0x3xf32>) -> tensor<3x0xf32>
// CHECK: nn.reshape %[[X]] : tensor<0x3xf32> -> tensor<3x0xf32>
func.func @reshape_allowzero(%x: tensor<0x3xf32>) -> none {
  %s = onnx.constant dense<[3, 0]> : tensor<2xi64>
  %0 = onnx.node "Reshape"(%x, %s) {opset = 14 : i64, attrs = {allowzero = 1 : i64}} : (tensor<0x3xf32>, tensor<2xi64>) -> none
  return %0 : none
}

// -----

// Transpose with a permutation, and without one (reversed dimensions).
// CHECK-LABEL: func.func @transpose
// CHECK-SAME: (%[[X:.+]]: tensor<2x3x4xf32>) -> (tensor<2x4x3xf32>, tensor<4x3x2xf32>)
// CHECK: nn.transpose %[[X]] {perm = array<i64: 0, 2, 1>} : tensor<2x3x4xf32> -> tensor<2x4x3xf32>
// CHECK: nn.transpose %[[X]] {perm = array<i64: 2, 1, 0>} : tensor<2x3x4xf32> -> tensor<4x3x2xf32>
func.func @transpose(%x: tensor<2x3x4xf32>) -> (none, none) {
  %0 = onnx.node "Transpose"(%x) {opset = 13 : i64, attrs = {perm = [0, 2, 1]}} : (tensor<2x3x4xf32>) -> none
  %1 = onnx.node "Transpose"(%x) {opset = 1 : i64} : (tensor<2x3x4xf32>) -> none
  return %0, %1 : none, none
}

// -----

// Flatten is a reshape to [prod(shape[:axis]), prod(shape[axis:])]; axis
// defaults to 1, may be negative, and 0 gives a leading 1.
// CHECK-LABEL: func.func @flatten
// CHECK-SAME: (%[[X:.+]]: tensor<2x3x4xf32>)
// CHECK: nn.reshape %[[X]] : tensor<2x3x4xf32> -> tensor<2x12xf32>
// CHECK: nn.reshape %[[X]] : tensor<2x3x4xf32> -> tensor<6x4xf32>
// CHECK: nn.reshape %[[X]] : tensor<2x3x4xf32> -> tensor<1x24xf32>
func.func @flatten(%x: tensor<2x3x4xf32>) -> (none, none, none) {
  %0 = onnx.node "Flatten"(%x) {opset = 13 : i64} : (tensor<2x3x4xf32>) -> none
  %1 = onnx.node "Flatten"(%x) {opset = 11 : i64, attrs = {axis = -1 : i64}} : (tensor<2x3x4xf32>) -> none
  %2 = onnx.node "Flatten"(%x) {opset = 21 : i64, attrs = {axis = 0 : i64}} : (tensor<2x3x4xf32>) -> none
  return %0, %1, %2 : none, none, none
}

// -----

// Squeeze without axes drops every dimension of size 1.
// CHECK-LABEL: func.func @squeeze_all
// CHECK-SAME: (%[[X:.+]]: tensor<1x3x1x4xf32>) -> tensor<3x4xf32>
// CHECK: nn.reshape %[[X]] : tensor<1x3x1x4xf32> -> tensor<3x4xf32>
func.func @squeeze_all(%x: tensor<1x3x1x4xf32>) -> none {
  %0 = onnx.node "Squeeze"(%x) {opset = 13 : i64} : (tensor<1x3x1x4xf32>) -> none
  return %0 : none
}

// -----

// Squeeze axes are an input from opset 13 (here negative) and an attribute
// before.
// CHECK-LABEL: func.func @squeeze_axes
// CHECK-SAME: (%[[X:.+]]: tensor<1x3x1x4xf32>) -> (tensor<1x3x4xf32>, tensor<3x1x4xf32>)
// CHECK: nn.reshape %[[X]] : tensor<1x3x1x4xf32> -> tensor<1x3x4xf32>
// CHECK: nn.reshape %[[X]] : tensor<1x3x1x4xf32> -> tensor<3x1x4xf32>
func.func @squeeze_axes(%x: tensor<1x3x1x4xf32>) -> (none, none) {
  %axes = onnx.constant dense<[-2]> : tensor<1xi64>
  %0 = onnx.node "Squeeze"(%x, %axes) {opset = 13 : i64} : (tensor<1x3x1x4xf32>, tensor<1xi64>) -> none
  %1 = onnx.node "Squeeze"(%x) {opset = 11 : i64, attrs = {axes = [0]}} : (tensor<1x3x1x4xf32>) -> none
  return %0, %1 : none, none
}

// -----

// Unsqueeze axes count in the output's rank, so -1 is the new last
// dimension; before opset 13 they are an attribute.
// CHECK-LABEL: func.func @unsqueeze
// CHECK-SAME: (%[[X:.+]]: tensor<3x4xf32>) -> (tensor<1x3x4x1xf32>, tensor<3x1x4xf32>)
// CHECK: nn.reshape %[[X]] : tensor<3x4xf32> -> tensor<1x3x4x1xf32>
// CHECK: nn.reshape %[[X]] : tensor<3x4xf32> -> tensor<3x1x4xf32>
func.func @unsqueeze(%x: tensor<3x4xf32>) -> (none, none) {
  %axes = onnx.constant dense<[-1, 0]> : tensor<2xi64>
  %0 = onnx.node "Unsqueeze"(%x, %axes) {opset = 13 : i64} : (tensor<3x4xf32>, tensor<2xi64>) -> none
  %1 = onnx.node "Unsqueeze"(%x) {opset = 11 : i64, attrs = {axes = [1]}} : (tensor<3x4xf32>) -> none
  return %0, %1 : none, none
}

// -----

// Concat's negative axis is normalized.
// CHECK-LABEL: func.func @concat
// CHECK-SAME: (%[[A:.+]]: tensor<2x3xf32>, %[[B:.+]]: tensor<2x5xf32>) -> tensor<2x8xf32>
// CHECK: nn.concat %[[A]], %[[B]] {axis = 1 : i64} : tensor<2x3xf32>, tensor<2x5xf32> -> tensor<2x8xf32>
func.func @concat(%a: tensor<2x3xf32>, %b: tensor<2x5xf32>) -> none {
  %0 = onnx.node "Concat"(%a, %b) {opset = 13 : i64, attrs = {axis = -1 : i64}} : (tensor<2x3xf32>, tensor<2x5xf32>) -> none
  return %0 : none
}

// -----

// Split (opset 13) with sizes as a constant input: one slice per output.
// CHECK-LABEL: func.func @split_sizes_input
// CHECK-SAME: (%[[X:.+]]: tensor<2x6xf32>) -> (tensor<2x2xf32>, tensor<2x4xf32>)
// CHECK: %[[A:.+]] = nn.slice %[[X]] {sizes = array<i64: 2, 2>, starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : tensor<2x6xf32> -> tensor<2x2xf32>
// CHECK: %[[B:.+]] = nn.slice %[[X]] {sizes = array<i64: 2, 4>, starts = array<i64: 0, 2>, steps = array<i64: 1, 1>} : tensor<2x6xf32> -> tensor<2x4xf32>
// CHECK: return %[[A]], %[[B]]
func.func @split_sizes_input(%x: tensor<2x6xf32>) -> (none, none) {
  %sizes = onnx.constant dense<[2, 4]> : tensor<2xi64>
  %0:2 = onnx.node "Split"(%x, %sizes) {opset = 13 : i64, attrs = {axis = 1 : i64}} : (tensor<2x6xf32>, tensor<2xi64>) -> (none, none)
  return %0#0, %0#1 : none, none
}

// -----

// Split (opset 18) into num_outputs parts of ceil(7 / 3) = 3; the last part
// is smaller.
// CHECK-LABEL: func.func @split_num_outputs_uneven
// CHECK-SAME: (%[[X:.+]]: tensor<7x2xf32>) -> (tensor<3x2xf32>, tensor<3x2xf32>, tensor<1x2xf32>)
// CHECK: nn.slice %[[X]] {sizes = array<i64: 3, 2>, starts = array<i64: 0, 0>
// CHECK: nn.slice %[[X]] {sizes = array<i64: 3, 2>, starts = array<i64: 3, 0>
// CHECK: nn.slice %[[X]] {sizes = array<i64: 1, 2>, starts = array<i64: 6, 0>
func.func @split_num_outputs_uneven(%x: tensor<7x2xf32>) -> (none, none, none) {
  %0:3 = onnx.node "Split"(%x) {opset = 18 : i64, attrs = {num_outputs = 3 : i64}} : (tensor<7x2xf32>) -> (none, none, none)
  return %0#0, %0#1, %0#2 : none, none, none
}

// -----

// Split before opset 13: equal parts by default, or the split attribute.
// CHECK-LABEL: func.func @split_attribute
// CHECK-SAME: (%[[X:.+]]: tensor<6x2xf32>) -> (tensor<3x2xf32>, tensor<3x2xf32>, tensor<1x2xf32>, tensor<5x2xf32>)
// CHECK: nn.slice %[[X]] {sizes = array<i64: 3, 2>, starts = array<i64: 0, 0>
// CHECK: nn.slice %[[X]] {sizes = array<i64: 3, 2>, starts = array<i64: 3, 0>
// CHECK: nn.slice %[[X]] {sizes = array<i64: 1, 2>, starts = array<i64: 0, 0>
// CHECK: nn.slice %[[X]] {sizes = array<i64: 5, 2>, starts = array<i64: 1, 0>
func.func @split_attribute(%x: tensor<6x2xf32>) -> (none, none, none, none) {
  %0:2 = onnx.node "Split"(%x) {opset = 11 : i64} : (tensor<6x2xf32>) -> (none, none)
  %1:2 = onnx.node "Split"(%x) {opset = 2 : i64, attrs = {split = [1, 5]}} : (tensor<6x2xf32>) -> (none, none)
  return %0#0, %0#1, %1#0, %1#1 : none, none, none, none
}

// -----

// Slice with negative steps: start -1 is the last row, an end of INT64_MIN
// means "through the first", and a start past the end clamps to dim - 1
// (columns 9, 6, 3; the end 2 is excluded).
// CHECK-LABEL: func.func @slice_negative_steps
// CHECK-SAME: (%[[X:.+]]: tensor<4x10xf32>) -> tensor<4x3xf32>
// CHECK: nn.slice %[[X]] {sizes = array<i64: 4, 3>, starts = array<i64: 3, 9>, steps = array<i64: -1, -3>} : tensor<4x10xf32> -> tensor<4x3xf32>
func.func @slice_negative_steps(%x: tensor<4x10xf32>) -> none {
  %starts = onnx.constant dense<[-1, 20]> : tensor<2xi64>
  %ends = onnx.constant dense<[-9223372036854775808, 2]> : tensor<2xi64>
  %axes = onnx.constant dense<[0, 1]> : tensor<2xi64>
  %steps = onnx.constant dense<[-1, -3]> : tensor<2xi64>
  %0 = onnx.node "Slice"(%x, %starts, %ends, %axes, %steps) {opset = 13 : i64} : (tensor<4x10xf32>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>) -> none
  return %0 : none
}

// -----

// A step of INT64_MAX (or INT64_MIN) takes the first element of a
// non-empty range, without overflowing in the size computation.
// CHECK-LABEL: func.func @slice_extreme_steps
// CHECK-SAME: (%[[X:.+]]: tensor<2x1x4xf32>) -> tensor<2x1x1xf32>
// CHECK: nn.slice %[[X]] {sizes = array<i64: 2, 1, 1>, starts = array<i64: 0, 0, 3>, steps = array<i64: 1, 9223372036854775807, -9223372036854775808>} : tensor<2x1x4xf32> -> tensor<2x1x1xf32>
func.func @slice_extreme_steps(%x: tensor<2x1x4xf32>) -> none {
  %starts = onnx.constant dense<[0, 3]> : tensor<2xi64>
  %ends = onnx.constant dense<[9223372036854775807, -9223372036854775808]> : tensor<2xi64>
  %axes = onnx.constant dense<[1, 2]> : tensor<2xi64>
  %steps = onnx.constant dense<[9223372036854775807, -9223372036854775808]> : tensor<2xi64>
  %0 = onnx.node "Slice"(%x, %starts, %ends, %axes, %steps) {opset = 13 : i64} : (tensor<2x1x4xf32>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>, tensor<2xi64>) -> none
  return %0 : none
}

// -----

// Slice clamps an end past the dimension; a negative axis is normalized,
// the other dimensions are kept whole, and absent steps are 1.
// CHECK-LABEL: func.func @slice_clamped
// CHECK-SAME: (%[[X:.+]]: tensor<4x10xf32>) -> tensor<4x8xf32>
// CHECK: nn.slice %[[X]] {sizes = array<i64: 4, 8>, starts = array<i64: 0, 2>, steps = array<i64: 1, 1>} : tensor<4x10xf32> -> tensor<4x8xf32>
func.func @slice_clamped(%x: tensor<4x10xf32>) -> none {
  %none = onnx.none
  %starts = onnx.constant dense<[2]> : tensor<1xi64>
  %ends = onnx.constant dense<[100]> : tensor<1xi64>
  %axes = onnx.constant dense<[-1]> : tensor<1xi64>
  %0 = onnx.node "Slice"(%x, %starts, %ends, %axes, %none) {opset = 13 : i64} : (tensor<4x10xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, none) -> none
  return %0 : none
}

// -----

// Slice before opset 10 takes starts and ends as attributes.
// CHECK-LABEL: func.func @slice_attributes
// CHECK-SAME: (%[[X:.+]]: tensor<4x10xf32>) -> tensor<2x3xf32>
// CHECK: nn.slice %[[X]] {sizes = array<i64: 2, 3>, starts = array<i64: 0, 7>, steps = array<i64: 1, 1>}
func.func @slice_attributes(%x: tensor<4x10xf32>) -> none {
  %0 = onnx.node "Slice"(%x) {opset = 9 : i64, attrs = {starts = [0, -3], ends = [2, 1000]}} : (tensor<4x10xf32>) -> none
  return %0 : none
}

// -----

// A slice whose start is past its end is empty.
// CHECK-LABEL: func.func @slice_empty
// CHECK-SAME: (%[[X:.+]]: tensor<4x10xf32>) -> tensor<0x10xf32>
// CHECK: nn.slice %[[X]] {sizes = array<i64: 0, 10>, starts = array<i64: 0, 0>, steps = array<i64: 1, 1>}
func.func @slice_empty(%x: tensor<4x10xf32>) -> none {
  %starts = onnx.constant dense<[3]> : tensor<1xi64>
  %ends = onnx.constant dense<[1]> : tensor<1xi64>
  %0 = onnx.node "Slice"(%x, %starts, %ends) {opset = 13 : i64} : (tensor<4x10xf32>, tensor<1xi64>, tensor<1xi64>) -> none
  return %0 : none
}

// -----

// Gather along a negative axis inserts the indices' shape there.
// CHECK-LABEL: func.func @gather
// CHECK-SAME: (%[[X:.+]]: tensor<4x5xf32>, %[[I:.+]]: tensor<2x3xi64>) -> tensor<4x2x3xf32>
// CHECK: nn.gather %[[X]], %[[I]] {axis = 1 : i64} : tensor<4x5xf32>, tensor<2x3xi64> -> tensor<4x2x3xf32>
func.func @gather(%x: tensor<4x5xf32>, %i: tensor<2x3xi64>) -> none {
  %0 = onnx.node "Gather"(%x, %i) {opset = 13 : i64, attrs = {axis = -1 : i64}} : (tensor<4x5xf32>, tensor<2x3xi64>) -> none
  return %0 : none
}

// -----

// Expand broadcasts both ways: a requested 1 keeps the input's dimension,
// an input 1 takes the requested one, and missing leading dimensions are
// added.
// CHECK-LABEL: func.func @expand_bidirectional
// CHECK-SAME: (%[[X:.+]]: tensor<3x1xf32>) -> tensor<2x3x4xf32>
// CHECK: nn.broadcast_to %[[X]] {shape = array<i64: 2, 3, 4>} : tensor<3x1xf32> -> tensor<2x3x4xf32>
func.func @expand_bidirectional(%x: tensor<3x1xf32>) -> none {
  %shape = onnx.constant dense<[2, 1, 4]> : tensor<3xi64>
  %0 = onnx.node "Expand"(%x, %shape) {opset = 13 : i64} : (tensor<3x1xf32>, tensor<3xi64>) -> none
  return %0 : none
}

// -----

// A requested shape of lower rank than the input only broadcasts the
// trailing dimensions; here nothing changes, so nothing is built.
// CHECK-LABEL: func.func @expand_noop
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NOT: nn.broadcast_to
// CHECK: return %[[X]]
func.func @expand_noop(%x: tensor<2x3xf32>) -> none {
  %shape = onnx.constant dense<[1]> : tensor<1xi64>
  %0 = onnx.node "Expand"(%x, %shape) {opset = 8 : i64} : (tensor<2x3xf32>, tensor<1xi64>) -> none
  return %0 : none
}

// -----

// Tile is a broadcast over a dimension of 1 put before each repeated
// dimension, then a reshape merging each pair: BLOOM's ALiBi biases,
// [H, 1, T] repeated over the batch.
// CHECK-LABEL: func.func @tile
// CHECK-SAME: (%[[X:.+]]: tensor<4x1x8xf32>) -> tensor<8x1x16xf32>
// CHECK: %[[SPREAD:.+]] = nn.reshape %[[X]] : tensor<4x1x8xf32> -> tensor<1x4x1x1x8xf32>
// CHECK: %[[COPIES:.+]] = nn.broadcast_to %[[SPREAD]] {shape = array<i64: 2, 4, 1, 2, 8>} : tensor<1x4x1x1x8xf32> -> tensor<2x4x1x2x8xf32>
// CHECK: %[[TILED:.+]] = nn.reshape %[[COPIES]] : tensor<2x4x1x2x8xf32> -> tensor<8x1x16xf32>
// CHECK: return %[[TILED]]
func.func @tile(%x: tensor<4x1x8xf32>) -> none {
  %repeats = onnx.constant dense<[2, 1, 2]> : tensor<3xi64>
  %0 = onnx.node "Tile"(%x, %repeats) {opset = 13 : i64} : (tensor<4x1x8xf32>, tensor<3xi64>) -> none
  return %0 : none
}

// -----

// Tile by ones is the input itself.
// CHECK-LABEL: func.func @tile_ones
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xi64>) -> tensor<2x3xi64>
// CHECK-NOT: nn.
// CHECK: return %[[X]]
func.func @tile_ones(%x: tensor<2x3xi64>) -> none {
  %repeats = onnx.constant dense<[1, 1]> : tensor<2xi64>
  %0 = onnx.node "Tile"(%x, %repeats) {opset = 6 : i64} : (tensor<2x3xi64>, tensor<2xi64>) -> none
  return %0 : none
}

// -----

// Past the rank limit (8), one dimension at a time: a rank-5 input
// repeated in all five.
// CHECK-LABEL: func.func @tile_high_rank
// CHECK: nn.broadcast_to %{{.+}} {shape = array<i64: 1, 2, 1, 1>} : tensor<1x1x1x1xf32> -> tensor<1x2x1x1xf32>
// CHECK: nn.broadcast_to %{{.+}} {shape = array<i64: 2, 2, 1, 1>} : tensor<2x1x1x1xf32> -> tensor<2x2x1x1xf32>
// CHECK: nn.broadcast_to %{{.+}} {shape = array<i64: 4, 2, 1, 1>} : tensor<4x1x1x1xf32> -> tensor<4x2x1x1xf32>
// CHECK: nn.broadcast_to %{{.+}} {shape = array<i64: 8, 2, 1, 1>} : tensor<8x1x1x1xf32> -> tensor<8x2x1x1xf32>
// CHECK: nn.broadcast_to %{{.+}} {shape = array<i64: 16, 2, 1, 1>} : tensor<16x1x1x1xf32> -> tensor<16x2x1x1xf32>
// CHECK: %[[TILED:.+]] = nn.reshape %{{.+}} : tensor<16x2x1x1xf32> -> tensor<2x2x2x2x2xf32>
// CHECK: return %[[TILED]]
func.func @tile_high_rank(%x: tensor<1x1x1x1x1xf32>) -> none {
  %repeats = onnx.constant dense<[2, 2, 2, 2, 2]> : tensor<5xi64>
  %0 = onnx.node "Tile"(%x, %repeats) {opset = 13 : i64} : (tensor<1x1x1x1x1xf32>, tensor<5xi64>) -> none
  return %0 : none
}

// -----

// Resize, nearest (asymmetric, floor: PyTorch's nearest upsampling) to
// given sizes: one gather of constant positions per resized axis.
// CHECK-LABEL: func.func @resize_nearest
// CHECK: %[[ROWS:.+]] = arith.constant dense<[0, 0, 1, 1]> : tensor<4xi64>
// CHECK: %[[H:.+]] = nn.gather %{{.+}}, %[[ROWS]] {axis = 2 : i64} : tensor<1x1x2x2xf32>, tensor<4xi64> -> tensor<1x1x4x2xf32>
// CHECK: %[[COLS:.+]] = arith.constant dense<[0, 0, 1]> : tensor<3xi64>
// CHECK: %[[W:.+]] = nn.gather %[[H]], %[[COLS]] {axis = 3 : i64} : tensor<1x1x4x2xf32>, tensor<3xi64> -> tensor<1x1x4x3xf32>
// CHECK: return %[[W]]
func.func @resize_nearest(%x: tensor<1x1x2x2xf32>) -> none {
  %none = onnx.none
  %sizes = onnx.constant dense<[1, 1, 4, 3]> : tensor<4xi64>
  %0 = onnx.node "Resize"(%x, %none, %none, %sizes) {opset = 13 : i64, attrs = {mode = "nearest", coordinate_transformation_mode = "asymmetric", nearest_mode = "floor"}} : (tensor<1x1x2x2xf32>, none, none, tensor<4xi64>) -> none
  return %0 : none
}

// -----

// Linear (half_pixel, PyTorch's bilinear without align_corners), twice
// the rows: the two positions each output row reads (clamped at the
// edges), weighted and summed; the columns, scale 1, stay.
// CHECK-LABEL: func.func @resize_linear
// CHECK: %[[TAPS:.+]] = arith.constant dense<{{\[}}[0, 0], [0, 1], [0, 1], [1, 1]]> : tensor<4x2xi64>
// CHECK: %[[READ:.+]] = nn.gather %{{.+}}, %[[TAPS]] {axis = 2 : i64} : tensor<1x1x2x2xf32>, tensor<4x2xi64> -> tensor<1x1x4x2x2xf32>
// CHECK: %[[W:.+]] = arith.constant dense<{{.*}}[2.500000e-01], [7.500000e-01]], {{.*}}[7.500000e-01], [2.500000e-01]]]]]> : tensor<1x1x4x2x1xf32>
// CHECK: %[[WEIGHTED:.+]] = nn.mul %[[READ]], %[[W]]
// CHECK: %[[SUM:.+]] = nn.reduce_sum %[[WEIGHTED]] {axes = array<i64: 3>, keepdims = false} : tensor<1x1x4x2x2xf32> -> tensor<1x1x4x2xf32>
// CHECK-NOT: nn.gather
// CHECK: return %[[SUM]]
func.func @resize_linear(%x: tensor<1x1x2x2xf32>) -> none {
  %none = onnx.none
  %scales = onnx.constant dense<[1.0, 1.0, 2.0, 1.0]> : tensor<4xf32>
  %0 = onnx.node "Resize"(%x, %none, %scales) {opset = 13 : i64, attrs = {mode = "linear"}} : (tensor<1x1x2x2xf32>, none, tensor<4xf32>) -> none
  return %0 : none
}

// -----

// Shape and Size are constants; Shape's start and end (opset 15) select a
// range of dimensions.
// CHECK-LABEL: func.func @shape_and_size
// CHECK-SAME: (%[[X:.+]]: tensor<2x3x4xf32>) -> (tensor<3xi64>, tensor<2xi64>, tensor<1xi64>, tensor<i64>)
// CHECK-DAG: %[[ALL:.+]] = arith.constant dense<[2, 3, 4]> : tensor<3xi64>
// CHECK-DAG: %[[TAIL:.+]] = arith.constant dense<[3, 4]> : tensor<2xi64>
// CHECK-DAG: %[[MID:.+]] = arith.constant dense<3> : tensor<1xi64>
// CHECK-DAG: %[[SIZE:.+]] = arith.constant dense<24> : tensor<i64>
// CHECK: return %[[ALL]], %[[TAIL]], %[[MID]], %[[SIZE]]
func.func @shape_and_size(%x: tensor<2x3x4xf32>) -> (none, none, none, none) {
  %0 = onnx.node "Shape"(%x) {opset = 13 : i64} : (tensor<2x3x4xf32>) -> none
  %1 = onnx.node "Shape"(%x) {opset = 15 : i64, attrs = {start = -2 : i64}} : (tensor<2x3x4xf32>) -> none
  %2 = onnx.node "Shape"(%x) {opset = 19 : i64, attrs = {start = 1 : i64, end = -1 : i64}} : (tensor<2x3x4xf32>) -> none
  %3 = onnx.node "Size"(%x) {opset = 13 : i64} : (tensor<2x3x4xf32>) -> none
  return %0, %1, %2, %3 : none, none, none, none
}

// -----

// Constant nodes become arith.constant, from a tensor or from the scalar
// and list attributes.
// CHECK-LABEL: func.func @constant
// CHECK-DAG: %[[T:.+]] = arith.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
// CHECK-DAG: %[[F:.+]] = arith.constant dense<3.000000e+00> : tensor<f32>
// CHECK-DAG: %[[I:.+]] = arith.constant dense<7> : tensor<i64>
// CHECK-DAG: %[[FS:.+]] = arith.constant dense<[5.000000e-01, 1.500000e+00]> : tensor<2xf32>
// CHECK-DAG: %[[IS:.+]] = arith.constant dense<[1, 2, 3]> : tensor<3xi64>
// CHECK: return %[[T]], %[[F]], %[[I]], %[[FS]], %[[IS]]
func.func @constant() -> (none, none, none, none, none) {
  %0 = onnx.node "Constant"() {opset = 13 : i64, attrs = {value = dense<[1.0, 2.0]> : tensor<2xf32>}} : () -> none
  %1 = onnx.node "Constant"() {opset = 13 : i64, attrs = {value_float = 3.0 : f32}} : () -> none
  %2 = onnx.node "Constant"() {opset = 12 : i64, attrs = {value_int = 7 : i64}} : () -> none
  %3 = onnx.node "Constant"() {opset = 21 : i64, attrs = {value_floats = [0.5 : f32, 1.5 : f32]}} : () -> none
  %4 = onnx.node "Constant"() {opset = 12 : i64, attrs = {value_ints = [1, 2, 3]}} : () -> none
  return %0, %1, %2, %3, %4 : none, none, none, none, none
}

// -----

// ConstantOfShape fills the shape (here itself computed by Shape) with the
// value attribute's element, by default an f32 zero.
// CHECK-LABEL: func.func @constant_of_shape
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32>) -> (tensor<2x3xi64>, tensor<2x3xf32>)
// CHECK-DAG: %[[ONES:.+]] = arith.constant dense<1> : tensor<2x3xi64>
// CHECK-DAG: %[[ZEROS:.+]] = arith.constant dense<0.000000e+00> : tensor<2x3xf32>
// CHECK: return %[[ONES]], %[[ZEROS]]
func.func @constant_of_shape(%x: tensor<2x3xf32>) -> (none, none) {
  %shape = onnx.node "Shape"(%x) {opset = 13 : i64} : (tensor<2x3xf32>) -> none
  %0 = onnx.node "ConstantOfShape"(%shape) {opset = 20 : i64, attrs = {value = dense<1> : tensor<1xi64>}} : (none) -> none
  %1 = onnx.node "ConstantOfShape"(%shape) {opset = 9 : i64} : (none) -> none
  return %0, %1 : none, none
}

// -----

// An empty shape gives a scalar.
// CHECK-LABEL: func.func @constant_of_shape_scalar
// CHECK: %[[C:.+]] = arith.constant dense<2.500000e+00> : tensor<f32>
// CHECK: return %[[C]] : tensor<f32>
func.func @constant_of_shape_scalar() -> none {
  %shape = onnx.constant dense<> : tensor<0xi64>
  %0 = onnx.node "ConstantOfShape"(%shape) {opset = 21 : i64, attrs = {value = dense<2.5> : tensor<1xf32>}} : (tensor<0xi64>) -> none
  return %0 : none
}

// -----

// Range of constants is a constant, in the inputs' element type: a negative
// integer step, and a float step.
// CHECK-LABEL: func.func @range
// CHECK-SAME: () -> (tensor<3xi64>, tensor<3xf32>)
// CHECK-DAG: %[[I:.+]] = arith.constant dense<[10, 7, 4]> : tensor<3xi64>
// CHECK-DAG: %[[F:.+]] = arith.constant dense<[5.000000e-01, 1.000000e+00, 1.500000e+00]> : tensor<3xf32>
// CHECK: return %[[I]], %[[F]]
func.func @range() -> (none, none) {
  %start = onnx.constant dense<10> : tensor<i64>
  %limit = onnx.constant dense<1> : tensor<i64>
  %delta = onnx.constant dense<-3> : tensor<i64>
  %0 = onnx.node "Range"(%start, %limit, %delta) {opset = 11 : i64} : (tensor<i64>, tensor<i64>, tensor<i64>) -> none
  %fstart = onnx.node "Constant"() {opset = 13 : i64, attrs = {value_float = 0.5 : f32}} : () -> none
  %flimit = onnx.node "Constant"() {opset = 13 : i64, attrs = {value_float = 2.0 : f32}} : () -> none
  %1 = onnx.node "Range"(%fstart, %flimit, %fstart) {opset = 11 : i64} : (none, none, none) -> none
  return %0, %1 : none, none
}

// -----

// Trilu keeps the upper triangle by default; k, a constant input, moves
// the diagonal.
// CHECK-LABEL: func.func @trilu
// CHECK-SAME: (%[[X:.+]]: tensor<4x4xf32>)
// CHECK: nn.trilu %[[X]] {diagonal = 1 : i64, upper = false} : tensor<4x4xf32> -> tensor<4x4xf32>
// CHECK: nn.trilu %[[X]] {diagonal = 0 : i64, upper = true} : tensor<4x4xf32> -> tensor<4x4xf32>
func.func @trilu(%x: tensor<4x4xf32>) -> (none, none) {
  %k = onnx.constant dense<1> : tensor<i64>
  %0 = onnx.node "Trilu"(%x, %k) {opset = 14 : i64, attrs = {upper = 0 : i64}} : (tensor<4x4xf32>, tensor<i64>) -> none
  %1 = onnx.node "Trilu"(%x) {opset = 14 : i64} : (tensor<4x4xf32>) -> none
  return %0, %1 : none, none
}
