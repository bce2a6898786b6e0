// RUN: ztc-opt %s -split-input-file -ztc-convert-onnx-to-nn -verify-diagnostics

// Diagnostics of ztc-convert-onnx-to-nn's shape and data-movement converters
// (ShapeOps.cpp), one case each: shape operands that are not constant,
// invalid shapes, axes and sizes.
//
// Nodes carry a name (`loc("name")`) as imported nodes do, and every message
// starts with it; a bare name has no file position, so the diagnostics are
// expected `@unknown`.

// Reshape infers at most one dimension.
func.func @reshape_two_minus_one(%x: tensor<2x3x4xf32>) -> none {
  %shape = onnx.constant dense<[-1, -1]> : tensor<2xi64>
  // expected-error @unknown {{node 'reshape' (Reshape, opset 14): shape has more than one -1}}
  %0 = onnx.node "Reshape"(%x, %shape) {opset = 14 : i64} : (tensor<2x3x4xf32>, tensor<2xi64>) -> none loc("reshape")
  return %0 : none
}

// -----

// Reshape's shape must be constant once input shapes are static.
func.func @reshape_shape_not_constant(%x: tensor<2x3x4xf32>, %shape: tensor<2xi64>) -> none {
  // expected-error @unknown {{node 'reshape' (Reshape, opset 14): shape (input 1) must be a constant integer tensor once input shapes are static}}
  %0 = onnx.node "Reshape"(%x, %shape) {opset = 14 : i64} : (tensor<2x3x4xf32>, tensor<2xi64>) -> none loc("reshape")
  return %0 : none
}

// -----

// The element count is kept.
func.func @reshape_count(%x: tensor<2x3x4xf32>) -> none {
  %shape = onnx.constant dense<[5, 5]> : tensor<2xi64>
  // expected-error @unknown {{node 'reshape' (Reshape, opset 14): cannot reshape 'tensor<2x3x4xf32>' (24 elements) to 25 elements}}
  %0 = onnx.node "Reshape"(%x, %shape) {opset = 14 : i64} : (tensor<2x3x4xf32>, tensor<2xi64>) -> none loc("reshape")
  return %0 : none
}

// -----

// -1 must divide evenly.
func.func @reshape_minus_one_indivisible(%x: tensor<2x3x4xf32>) -> none {
  %shape = onnx.constant dense<[5, -1]> : tensor<2xi64>
  // expected-error @unknown {{node 'reshape' (Reshape, opset 14): cannot reshape 'tensor<2x3x4xf32>' with -1 in the target shape}}
  %0 = onnx.node "Reshape"(%x, %shape) {opset = 14 : i64} : (tensor<2x3x4xf32>, tensor<2xi64>) -> none loc("reshape")
  return %0 : none
}

// -----

// A 0 copies a dimension the input must have.
func.func @reshape_zero_past_rank(%x: tensor<24xf32>) -> none {
  %shape = onnx.constant dense<[4, 0]> : tensor<2xi64>
  // expected-error @unknown {{node 'reshape' (Reshape, opset 14): shape entry 1 is 0 (copy) but the input has rank 1}}
  %0 = onnx.node "Reshape"(%x, %shape) {opset = 14 : i64} : (tensor<24xf32>, tensor<2xi64>) -> none loc("reshape")
  return %0 : none
}

// -----

// Negative entries other than -1 are invalid.
func.func @reshape_negative_entry(%x: tensor<24xf32>) -> none {
  %shape = onnx.constant dense<[-2, 12]> : tensor<2xi64>
  // expected-error @unknown {{node 'reshape' (Reshape, opset 14): shape entry 0 is -2}}
  %0 = onnx.node "Reshape"(%x, %shape) {opset = 14 : i64} : (tensor<24xf32>, tensor<2xi64>) -> none loc("reshape")
  return %0 : none
}

// -----

// Transpose needs a permutation.
func.func @transpose_perm(%x: tensor<2x3xf32>) -> none {
  // expected-error @unknown {{node 'transpose' (Transpose, opset 13): cannot build nn.transpose: 'nn.transpose' op expects perm to be a permutation of [0, 2), got [0, 0]}}
  %0 = onnx.node "Transpose"(%x) {opset = 13 : i64, attrs = {perm = [0, 0]}} : (tensor<2x3xf32>) -> none loc("transpose")
  return %0 : none
}

// -----

// Flatten's axis lies in [-rank, rank].
func.func @flatten_axis(%x: tensor<2x3xf32>) -> none {
  // expected-error @unknown {{node 'flatten' (Flatten, opset 13): axis 3 is out of range for rank 2}}
  %0 = onnx.node "Flatten"(%x) {opset = 13 : i64, attrs = {axis = 3 : i64}} : (tensor<2x3xf32>) -> none loc("flatten")
  return %0 : none
}

// -----

// Squeeze only drops dimensions of size 1.
func.func @squeeze_size(%x: tensor<1x3xf32>) -> none {
  %axes = onnx.constant dense<[1]> : tensor<1xi64>
  // expected-error @unknown {{node 'squeeze' (Squeeze, opset 13): cannot squeeze axis 1 of size 3}}
  %0 = onnx.node "Squeeze"(%x, %axes) {opset = 13 : i64} : (tensor<1x3xf32>, tensor<1xi64>) -> none loc("squeeze")
  return %0 : none
}

// -----

// An axis may be listed once (0 and -2 are the same here).
func.func @squeeze_axis_twice(%x: tensor<1x3xf32>) -> none {
  // expected-error @unknown {{node 'squeeze' (Squeeze, opset 11): axis -2 is listed twice}}
  %0 = onnx.node "Squeeze"(%x) {opset = 11 : i64, attrs = {axes = [0, -2]}} : (tensor<1x3xf32>) -> none loc("squeeze")
  return %0 : none
}

// -----

// Squeeze's axes input must be constant.
func.func @squeeze_axes_not_constant(%x: tensor<1x3xf32>, %axes: tensor<1xi64>) -> none {
  // expected-error @unknown {{node 'squeeze' (Squeeze, opset 13): axes (input 1) must be a constant integer tensor once input shapes are static}}
  %0 = onnx.node "Squeeze"(%x, %axes) {opset = 13 : i64} : (tensor<1x3xf32>, tensor<1xi64>) -> none loc("squeeze")
  return %0 : none
}

// -----

// Unsqueeze needs axes: since opset 13 an input the schema requires.
func.func @unsqueeze_no_axes(%x: tensor<3xf32>) -> none {
  // expected-error @unknown {{node 'unsqueeze' (Unsqueeze, opset 13): takes 2 inputs, got 1}}
  %0 = onnx.node "Unsqueeze"(%x) {opset = 13 : i64} : (tensor<3xf32>) -> none loc("unsqueeze")
  return %0 : none
}

// -----

// Unsqueeze's axes count in the output rank (2 here).
func.func @unsqueeze_axis(%x: tensor<3xf32>) -> none {
  %axes = onnx.constant dense<[2]> : tensor<1xi64>
  // expected-error @unknown {{node 'unsqueeze' (Unsqueeze, opset 13): axes entry 2 is out of range for rank 2}}
  %0 = onnx.node "Unsqueeze"(%x, %axes) {opset = 13 : i64} : (tensor<3xf32>, tensor<1xi64>) -> none loc("unsqueeze")
  return %0 : none
}

// -----

// Concat needs an axis.
func.func @concat_no_axis(%a: tensor<2x3xf32>) -> none {
  // expected-error @unknown {{node 'concat' (Concat, opset 13): axis is required}}
  %0 = onnx.node "Concat"(%a, %a) {opset = 13 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> none loc("concat")
  return %0 : none
}

// -----

// Concat's operands agree outside the axis.
func.func @concat_mismatch(%a: tensor<2x3xf32>, %b: tensor<3x3xf32>) -> none {
  // expected-error @unknown {{node 'concat' (Concat, opset 13): cannot build nn.concat: 'nn.concat' op operand 'tensor<3x3xf32>' does not match 'tensor<2x3xf32>' outside axis 1}}
  %0 = onnx.node "Concat"(%a, %b) {opset = 13 : i64, attrs = {axis = 1 : i64}} : (tensor<2x3xf32>, tensor<3x3xf32>) -> none loc("concat")
  return %0 : none
}

// -----

// Split sizes must add up to the dimension.
func.func @split_sizes_sum(%x: tensor<2x6xf32>) -> (none, none) {
  %sizes = onnx.constant dense<[2, 3]> : tensor<2xi64>
  // expected-error @unknown {{node 'split' (Split, opset 13): split sizes do not add up to dimension 1 (size 6) over 2 outputs}}
  %0:2 = onnx.node "Split"(%x, %sizes) {opset = 13 : i64, attrs = {axis = 1 : i64}} : (tensor<2x6xf32>, tensor<2xi64>) -> (none, none) loc("split")
  return %0#0, %0#1 : none, none
}

// -----

// Before opset 18 equal parts must be equal.
func.func @split_uneven_before_18(%x: tensor<7x2xf32>) -> (none, none) {
  // expected-error @unknown {{node 'split' (Split, opset 13): cannot split size 7 into 2 equal parts}}
  %0:2 = onnx.node "Split"(%x) {opset = 13 : i64} : (tensor<7x2xf32>) -> (none, none) loc("split")
  return %0#0, %0#1 : none, none
}

// -----

// num_outputs must be the number of outputs.
func.func @split_num_outputs(%x: tensor<6x2xf32>) -> (none, none) {
  // expected-error @unknown {{node 'split' (Split, opset 18): num_outputs is 3 but the node has 2 outputs}}
  %0:2 = onnx.node "Split"(%x) {opset = 18 : i64, attrs = {num_outputs = 3 : i64}} : (tensor<6x2xf32>) -> (none, none) loc("split")
  return %0#0, %0#1 : none, none
}

// -----

// Split's sizes input must be constant.
func.func @split_sizes_not_constant(%x: tensor<6x2xf32>, %sizes: tensor<2xi64>) -> (none, none) {
  // expected-error @unknown {{node 'split' (Split, opset 13): split (input 1) must be a constant integer tensor once input shapes are static}}
  %0:2 = onnx.node "Split"(%x, %sizes) {opset = 13 : i64} : (tensor<6x2xf32>, tensor<2xi64>) -> (none, none) loc("split")
  return %0#0, %0#1 : none, none
}

// -----

// Split's axis must be in range.
func.func @split_axis(%x: tensor<6x2xf32>) -> (none, none) {
  // expected-error @unknown {{node 'split' (Split, opset 13): axis 2 is out of range for rank 2}}
  %0:2 = onnx.node "Split"(%x) {opset = 13 : i64, attrs = {axis = 2 : i64}} : (tensor<6x2xf32>) -> (none, none) loc("split")
  return %0#0, %0#1 : none, none
}

// -----

// A slice step of 0 is invalid.
func.func @slice_step_zero(%x: tensor<4xf32>) -> none {
  %starts = onnx.constant dense<[0]> : tensor<1xi64>
  %ends = onnx.constant dense<[4]> : tensor<1xi64>
  %steps = onnx.constant dense<[0]> : tensor<1xi64>
  // expected-error @unknown {{node 'slice' (Slice, opset 13): slice step is 0 on axis 0}}
  %0 = onnx.node "Slice"(%x, %starts, %ends, %starts, %steps) {opset = 13 : i64} : (tensor<4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> none loc("slice")
  return %0 : none
}

// -----

// starts, ends, axes and steps go together.
func.func @slice_lengths(%x: tensor<4x4xf32>) -> none {
  %starts = onnx.constant dense<[0, 0]> : tensor<2xi64>
  %ends = onnx.constant dense<[4]> : tensor<1xi64>
  // expected-error @unknown {{node 'slice' (Slice, opset 13): starts, ends, axes and steps differ in length}}
  %0 = onnx.node "Slice"(%x, %starts, %ends) {opset = 13 : i64} : (tensor<4x4xf32>, tensor<2xi64>, tensor<1xi64>) -> none loc("slice")
  return %0 : none
}

// -----

// Slice bounds must be constant.
func.func @slice_starts_not_constant(%x: tensor<4xf32>, %starts: tensor<1xi64>) -> none {
  %ends = onnx.constant dense<[4]> : tensor<1xi64>
  // expected-error @unknown {{node 'slice' (Slice, opset 13): starts (input 1) must be a constant integer tensor once input shapes are static}}
  %0 = onnx.node "Slice"(%x, %starts, %ends) {opset = 13 : i64} : (tensor<4xf32>, tensor<1xi64>, tensor<1xi64>) -> none loc("slice")
  return %0 : none
}

// -----

// Slice axes must be in range.
func.func @slice_axis(%x: tensor<4xf32>) -> none {
  %starts = onnx.constant dense<[0]> : tensor<1xi64>
  %ends = onnx.constant dense<[4]> : tensor<1xi64>
  %axes = onnx.constant dense<[1]> : tensor<1xi64>
  // expected-error @unknown {{node 'slice' (Slice, opset 13): axes entry 1 is out of range for rank 1}}
  %0 = onnx.node "Slice"(%x, %starts, %ends, %axes) {opset = 13 : i64} : (tensor<4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> none loc("slice")
  return %0 : none
}

// -----

// Gather's axis must be in range.
func.func @gather_axis(%x: tensor<4xf32>, %i: tensor<2xi64>) -> none {
  // expected-error @unknown {{node 'gather' (Gather, opset 13): axis 1 is out of range for rank 1}}
  %0 = onnx.node "Gather"(%x, %i) {opset = 13 : i64, attrs = {axis = 1 : i64}} : (tensor<4xf32>, tensor<2xi64>) -> none loc("gather")
  return %0 : none
}

// -----

// Gather's indices are integers.
func.func @gather_float_indices(%x: tensor<4xf32>, %i: tensor<2xf32>) -> none {
  // expected-error @unknown {{node 'gather' (Gather, opset 13): 'nn.gather' op operand #1 must be statically shaped tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<2xf32>'}}
  %0 = onnx.node "Gather"(%x, %i) {opset = 13 : i64} : (tensor<4xf32>, tensor<2xf32>) -> none loc("gather")
  return %0 : none
}

// -----

// Expand broadcasts only sizes 1.
func.func @expand_mismatch(%x: tensor<3x2xf32>) -> none {
  %shape = onnx.constant dense<[4, 4]> : tensor<2xi64>
  // expected-error @unknown {{node 'expand' (Expand, opset 13): cannot expand 'tensor<3x2xf32>' to the requested shape: dimension 0 is 3 vs 4}}
  %0 = onnx.node "Expand"(%x, %shape) {opset = 13 : i64} : (tensor<3x2xf32>, tensor<2xi64>) -> none loc("expand")
  return %0 : none
}

// -----

// Expand's shape must be constant.
func.func @expand_shape_not_constant(%x: tensor<3x2xf32>, %shape: tensor<2xi64>) -> none {
  // expected-error @unknown {{node 'expand' (Expand, opset 13): shape (input 1) must be a constant integer tensor once input shapes are static}}
  %0 = onnx.node "Expand"(%x, %shape) {opset = 13 : i64} : (tensor<3x2xf32>, tensor<2xi64>) -> none loc("expand")
  return %0 : none
}

// -----

// Tile repeats every dimension.
func.func @tile_rank(%x: tensor<3x2xf32>) -> none {
  %repeats = onnx.constant dense<[2]> : tensor<1xi64>
  // expected-error @unknown {{node 'tile' (Tile, opset 13): repeats has 1 entries but the input 'tensor<3x2xf32>' has rank 2}}
  %0 = onnx.node "Tile"(%x, %repeats) {opset = 13 : i64} : (tensor<3x2xf32>, tensor<1xi64>) -> none loc("tile")
  return %0 : none
}

// -----

// Tile by 0 would give an empty tensor.
func.func @tile_zero(%x: tensor<3x2xf32>) -> none {
  %repeats = onnx.constant dense<[2, 0]> : tensor<2xi64>
  // expected-error @unknown {{node 'tile' (Tile, opset 13): repeats entry 1 is 0 (an empty result; ztc takes repeats of 1 or more)}}
  %0 = onnx.node "Tile"(%x, %repeats) {opset = 13 : i64} : (tensor<3x2xf32>, tensor<2xi64>) -> none loc("tile")
  return %0 : none
}

// -----

// Tile's result stays within 2^48 elements.
func.func @tile_too_large(%x: tensor<16777216x16777216xf32>) -> none {
  %repeats = onnx.constant dense<[16777216, 1]> : tensor<2xi64>
  // expected-error @unknown {{node 'tile' (Tile, opset 13): repeats [16777216, 1] make the result larger than 2^48 elements}}
  %0 = onnx.node "Tile"(%x, %repeats) {opset = 13 : i64} : (tensor<16777216x16777216xf32>, tensor<2xi64>) -> none loc("tile")
  return %0 : none
}

// -----

// Tile's repeats must be constant.
func.func @tile_not_constant(%x: tensor<3x2xf32>, %repeats: tensor<2xi64>) -> none {
  // expected-error @unknown {{node 'tile' (Tile, opset 13): repeats (input 1) must be a constant integer tensor once input shapes are static}}
  %0 = onnx.node "Tile"(%x, %repeats) {opset = 13 : i64} : (tensor<3x2xf32>, tensor<2xi64>) -> none loc("tile")
  return %0 : none
}

// -----

// Resize's scales are constant.
func.func @resize_scales(%x: tensor<1x1x2x2xf32>, %scales: tensor<4xf32>) -> none {
  %none = onnx.none
  // expected-error @unknown {{node 'resize' (Resize, opset 13): scales (input 2) or sizes (input 3) must be a constant tensor once input shapes are static}}
  %0 = onnx.node "Resize"(%x, %none, %scales) {opset = 13 : i64, attrs = {mode = "linear"}} : (tensor<1x1x2x2xf32>, none, tensor<4xf32>) -> none loc("resize")
  return %0 : none
}

// -----

// TensorFlow's crop and resize is not converted.
func.func @resize_crop(%x: tensor<1x1x2x2xf32>) -> none {
  %roi = onnx.constant dense<[0.0, 0.0, 0.1, 0.1, 1.0, 1.0, 0.9, 0.9]> : tensor<8xf32>
  %scales = onnx.constant dense<[1.0, 1.0, 2.0, 2.0]> : tensor<4xf32>
  // expected-error @unknown {{node 'resize' (Resize, opset 13): coordinate_transformation_mode 'tf_crop_and_resize' is not supported (ztc takes half_pixel, pytorch_half_pixel, align_corners, asymmetric and half_pixel_symmetric)}}
  %0 = onnx.node "Resize"(%x, %roi, %scales) {opset = 13 : i64, attrs = {mode = "linear", coordinate_transformation_mode = "tf_crop_and_resize"}} : (tensor<1x1x2x2xf32>, tensor<8xf32>, tensor<4xf32>) -> none loc("resize")
  return %0 : none
}

// -----

// Scales give every axis a size of at least one.
func.func @resize_empty(%x: tensor<1x1x2x2xf32>) -> none {
  %none = onnx.none
  %scales = onnx.constant dense<[1.0, 1.0, 0.25, 1.0]> : tensor<4xf32>
  // expected-error @unknown {{node 'resize' (Resize, opset 13): scales entry 2.500000e-01 for axis 2 makes its size 5.000000e-01}}
  %0 = onnx.node "Resize"(%x, %none, %scales) {opset = 13 : i64, attrs = {mode = "nearest"}} : (tensor<1x1x2x2xf32>, none, tensor<4xf32>) -> none loc("resize")
  return %0 : none
}

// -----

// Shape cannot become a constant when its input's shape is not static;
// the pass's static-shape check reports it.
func.func @shape_of_dynamic(%x: tensor<?x4xf32>) -> none {
  // expected-error @unknown {{node 'shape' (Shape, opset 15): input 0 has type 'tensor<?x4xf32>'; only tensors with static shapes are supported}}
  %0 = onnx.node "Shape"(%x) {opset = 15 : i64} : (tensor<?x4xf32>) -> none loc("shape")
  return %0 : none
}

// -----

// Constant has exactly one value attribute.
func.func @constant_two_values() -> none {
  // expected-error @unknown {{node 'const' (Constant, opset 13): exactly one value attribute is required}}
  %0 = onnx.node "Constant"() {opset = 13 : i64, attrs = {value_int = 1 : i64, value_float = 1.0 : f32}} : () -> none loc("const")
  return %0 : none
}

// -----

// Strings are not nn values.
func.func @constant_string() -> none {
  // expected-error @unknown {{node 'const' (Constant, opset 13): constant attribute 'value_string' is not supported}}
  %0 = onnx.node "Constant"() {opset = 13 : i64, attrs = {value_string = "hi"}} : () -> none loc("const")
  return %0 : none
}

// -----

// ConstantOfShape's shape must be constant.
func.func @constant_of_shape_not_constant(%shape: tensor<2xi64>) -> none {
  // expected-error @unknown {{node 'fill' (ConstantOfShape, opset 20): shape (input 0) must be a constant integer tensor once input shapes are static}}
  %0 = onnx.node "ConstantOfShape"(%shape) {opset = 20 : i64} : (tensor<2xi64>) -> none loc("fill")
  return %0 : none
}

// -----

// ConstantOfShape's value holds one element.
func.func @constant_of_shape_value() -> none {
  %shape = onnx.constant dense<[2, 3]> : tensor<2xi64>
  // expected-error @unknown {{node 'fill' (ConstantOfShape, opset 20): value must hold exactly one element}}
  %0 = onnx.node "ConstantOfShape"(%shape) {opset = 20 : i64, attrs = {value = dense<[1.0, 2.0]> : tensor<2xf32>}} : (tensor<2xi64>) -> none loc("fill")
  return %0 : none
}

// -----

// Range needs constant bounds.
func.func @range_not_constant(%start: tensor<i64>) -> none {
  %five = onnx.constant dense<5> : tensor<i64>
  // expected-error @unknown {{node 'range' (Range, opset 11): start, limit and delta must be constant scalars}}
  %0 = onnx.node "Range"(%start, %five, %five) {opset = 11 : i64} : (tensor<i64>, tensor<i64>, tensor<i64>) -> none loc("range")
  return %0 : none
}

// -----

// Range's delta is not 0.
func.func @range_delta_zero() -> none {
  %start = onnx.constant dense<0> : tensor<i64>
  %limit = onnx.constant dense<5> : tensor<i64>
  %delta = onnx.constant dense<0> : tensor<i64>
  // expected-error @unknown {{node 'range' (Range, opset 11): delta is 0}}
  %0 = onnx.node "Range"(%start, %limit, %delta) {opset = 11 : i64} : (tensor<i64>, tensor<i64>, tensor<i64>) -> none loc("range")
  return %0 : none
}

// -----

// Trilu's k must be constant.
func.func @trilu_k_not_constant(%x: tensor<4x4xf32>, %k: tensor<i64>) -> none {
  // expected-error @unknown {{node 'trilu' (Trilu, opset 14): k (input 1) must be a constant integer tensor once input shapes are static}}
  %0 = onnx.node "Trilu"(%x, %k) {opset = 14 : i64} : (tensor<4x4xf32>, tensor<i64>) -> none loc("trilu")
  return %0 : none
}

// -----

// Trilu works on matrices.
func.func @trilu_rank(%x: tensor<4xf32>) -> none {
  // expected-error @unknown {{node 'trilu' (Trilu, opset 14): cannot build nn.trilu: 'nn.trilu' op expects x of rank at least 2 ([..., rows, columns]), got 'tensor<4xf32>'}}
  %0 = onnx.node "Trilu"(%x) {opset = 14 : i64} : (tensor<4xf32>) -> none loc("trilu")
  return %0 : none
}
