// RUN: ztc-opt %s -split-input-file -ztc-convert-onnx-to-nn -verify-diagnostics

// Diagnostics of ztc-convert-onnx-to-nn's neural converters (NeuralOps.cpp),
// one case each: attributes ONNX allows but ztc does not support, training
// modes, and shape errors found by nn's type inference.
//
// Nodes carry a name (`loc("name")`) as imported nodes do, and every message
// starts with it; a bare name has no file position, so the diagnostics are
// expected `@unknown`.

// MatMul's contraction sizes must agree.
func.func @matmul_k_mismatch(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) -> none {
  // expected-error @unknown {{node 'matmul' (MatMul, opset 13): cannot build nn.matmul: 'nn.matmul' op contraction sizes differ: 'tensor<2x3xf32>' has K = 3, 'tensor<4x5xf32>' has K = 4}}
  %0 = onnx.node "MatMul"(%a, %b) {opset = 13 : i64} : (tensor<2x3xf32>, tensor<4x5xf32>) -> none loc("matmul")
  return %0 : none
}

// -----

// A vector operand is promoted before the check, so the message names the
// promoted type.
func.func @matmul_vector_mismatch(%a: tensor<3xf32>, %b: tensor<4x5xf32>) -> none {
  // expected-error @unknown {{node 'matmul' (MatMul, opset 13): cannot build nn.matmul: 'nn.matmul' op contraction sizes differ: 'tensor<1x3xf32>' has K = 3, 'tensor<4x5xf32>' has K = 4}}
  %0 = onnx.node "MatMul"(%a, %b) {opset = 13 : i64} : (tensor<3xf32>, tensor<4x5xf32>) -> none loc("matmul")
  return %0 : none
}

// -----

// MatMul has no scalar form.
func.func @matmul_scalar(%a: tensor<f32>, %b: tensor<4x5xf32>) -> none {
  // expected-error @unknown {{node 'matmul' (MatMul, opset 13): MatMul operands must have rank at least 1}}
  %0 = onnx.node "MatMul"(%a, %b) {opset = 13 : i64} : (tensor<f32>, tensor<4x5xf32>) -> none loc("matmul")
  return %0 : none
}

// -----

// Gemm multiplies matrices only.
func.func @gemm_rank(%a: tensor<2x3x4xf32>, %b: tensor<4x5xf32>) -> none {
  // expected-error @unknown {{node 'gemm' (Gemm, opset 13): Gemm operands must be matrices}}
  %0 = onnx.node "Gemm"(%a, %b) {opset = 13 : i64} : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> none loc("gemm")
  return %0 : none
}

// -----

// transB applies before the contraction check.
func.func @gemm_transposed_mismatch(%a: tensor<3x4xf32>, %b: tensor<4x5xf32>) -> none {
  // expected-error @unknown {{node 'gemm' (Gemm, opset 13): cannot build nn.matmul: 'nn.matmul' op contraction sizes differ: 'tensor<3x4xf32>' has K = 4, 'tensor<5x4xf32>' has K = 5}}
  %0 = onnx.node "Gemm"(%a, %b) {opset = 13 : i64, attrs = {transB = 1 : i64}} : (tensor<3x4xf32>, tensor<4x5xf32>) -> none loc("gemm")
  return %0 : none
}

// -----

// C must broadcast to the product's [M, N].
func.func @gemm_bias_mismatch(%a: tensor<3x4xf32>, %b: tensor<4x5xf32>, %c: tensor<3xf32>) -> none {
  // expected-error @unknown {{node 'gemm' (Gemm, opset 13): cannot build nn.add: 'nn.add' op operands 'tensor<3x5xf32>' and 'tensor<3xf32>' are not broadcastable}}
  %0 = onnx.node "Gemm"(%a, %b, %c) {opset = 13 : i64} : (tensor<3x4xf32>, tensor<4x5xf32>, tensor<3xf32>) -> none loc("gemm")
  return %0 : none
}

// -----

// Conv's weight has the input's rank.
func.func @conv_weight_rank(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3xf32>) -> none {
  // expected-error @unknown {{node 'conv' (Conv, opset 11): weight rank 3 differs from input rank 4}}
  %0 = onnx.node "Conv"(%x, %w) {opset = 11 : i64} : (tensor<1x3x8x8xf32>, tensor<4x3x3xf32>) -> none loc("conv")
  return %0 : none
}

// -----

// 3-D windows are not supported.
func.func @conv_3d(%x: tensor<1x3x8x8x8xf32>, %w: tensor<4x3x3x3x3xf32>) -> none {
  // expected-error @unknown {{node 'conv' (Conv, opset 11): only 1-D and 2-D windows are supported, input has rank 5}}
  %0 = onnx.node "Conv"(%x, %w) {opset = 11 : i64} : (tensor<1x3x8x8x8xf32>, tensor<4x3x3x3x3xf32>) -> none loc("conv")
  return %0 : none
}

// -----

// kernel_shape, when given, must be the weight's spatial shape.
func.func @conv_kernel_shape(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> none {
  // expected-error @unknown {{node 'conv' (Conv, opset 11): kernel_shape disagrees with the weight's shape}}
  %0 = onnx.node "Conv"(%x, %w) {opset = 11 : i64, attrs = {kernel_shape = [5, 5]}} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> none loc("conv")
  return %0 : none
}

// -----

// Window attributes have one entry per spatial dimension.
func.func @conv_strides_length(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> none {
  // expected-error @unknown {{node 'conv' (Conv, opset 11): strides has 3 entries, expected 2}}
  %0 = onnx.node "Conv"(%x, %w) {opset = 11 : i64, attrs = {strides = [1, 1, 1]}} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> none loc("conv")
  return %0 : none
}

// -----

// auto_pad is NOTSET, SAME_UPPER, SAME_LOWER or VALID.
func.func @conv_auto_pad(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> none {
  // expected-error @unknown {{node 'conv' (Conv, opset 11): unknown auto_pad "SAME"}}
  %0 = onnx.node "Conv"(%x, %w) {opset = 11 : i64, attrs = {auto_pad = "SAME"}} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> none loc("conv")
  return %0 : none
}

// -----

// Channels must match the weight times the group.
func.func @conv_channels(%x: tensor<1x3x8x8xf32>, %w: tensor<4x2x3x3xf32>) -> none {
  // expected-error @unknown {{node 'conv' (Conv, opset 11): cannot build nn.conv2d: 'nn.conv2d' op input channels (3) must equal weight channels (2) times group (1)}}
  %0 = onnx.node "Conv"(%x, %w) {opset = 11 : i64} : (tensor<1x3x8x8xf32>, tensor<4x2x3x3xf32>) -> none loc("conv")
  return %0 : none
}

// -----

// MaxPool's Indices output is not supported when used.
func.func @max_pool_indices(%x: tensor<1x3x8x8xf32>) -> (none, none) {
  // expected-error @unknown {{node 'pool' (MaxPool, opset 12): the Indices output (output 1) is not supported}}
  %0:2 = onnx.node "MaxPool"(%x) {opset = 12 : i64, attrs = {kernel_shape = [2, 2]}} : (tensor<1x3x8x8xf32>) -> (none, none) loc("pool")
  return %0#0, %0#1 : none, none
}

// -----

// storage_order only matters for Indices, and only row-major is
// supported.
func.func @max_pool_storage_order(%x: tensor<1x3x8x8xf32>) -> none {
  // expected-error @unknown {{node 'pool' (MaxPool, opset 12): storage_order 1 is not supported}}
  %0 = onnx.node "MaxPool"(%x) {opset = 12 : i64, attrs = {kernel_shape = [2, 2], storage_order = 1 : i64}} : (tensor<1x3x8x8xf32>) -> none loc("pool")
  return %0 : none
}

// -----

// MaxPool needs kernel_shape.
func.func @max_pool_kernel(%x: tensor<1x3x8x8xf32>) -> none {
  // expected-error @unknown {{node 'pool' (MaxPool, opset 12): kernel_shape is required}}
  %0 = onnx.node "MaxPool"(%x) {opset = 12 : i64} : (tensor<1x3x8x8xf32>) -> none loc("pool")
  return %0 : none
}

// -----

// AveragePool needs kernel_shape.
func.func @average_pool_kernel(%x: tensor<1x3x8x8xf32>) -> none {
  // expected-error @unknown {{node 'pool' (AveragePool, opset 19): kernel_shape is required}}
  %0 = onnx.node "AveragePool"(%x) {opset = 19 : i64} : (tensor<1x3x8x8xf32>) -> none loc("pool")
  return %0 : none
}

// -----

// Dilated average pooling (opset 19) is not supported.
func.func @average_pool_dilations(%x: tensor<1x3x8x8xf32>) -> none {
  // expected-error @unknown {{node 'pool' (AveragePool, opset 19): dilated average pooling is not supported}}
  %0 = onnx.node "AveragePool"(%x) {opset = 19 : i64, attrs = {kernel_shape = [2, 2], dilations = [2, 2]}} : (tensor<1x3x8x8xf32>) -> none loc("pool")
  return %0 : none
}

// -----

// Pads as large as the kernel are rejected by nn's inference.
func.func @average_pool_pads(%x: tensor<1x3x8x8xf32>) -> none {
  // expected-error @unknown {{node 'pool' (AveragePool, opset 19): cannot build nn.avg_pool2d: 'nn.avg_pool2d' op expects pads smaller than the dilated kernel (2), got [2, 2, 2, 2]}}
  %0 = onnx.node "AveragePool"(%x) {opset = 19 : i64, attrs = {kernel_shape = [2, 2], pads = [2, 2, 2, 2]}} : (tensor<1x3x8x8xf32>) -> none loc("pool")
  return %0 : none
}

// -----

// GlobalAveragePool needs spatial dimensions.
func.func @global_average_pool_rank(%x: tensor<3x8xf32>) -> none {
  // expected-error @unknown {{node 'gap' (GlobalAveragePool, opset 1): input must have rank at least 3}}
  %0 = onnx.node "GlobalAveragePool"(%x) {opset = 1 : i64} : (tensor<3x8xf32>) -> none loc("gap")
  return %0 : none
}

// -----

// Training-mode BatchNormalization: per-channel operands have the channel
// count and the input's type.
func.func @batch_norm_training_channels(%x: tensor<2x4x8x8xf32>, %s: tensor<3xf32>) -> none {
  // expected-error @unknown {{node 'bn' (BatchNormalization, opset 15): scale (input 1) must be a vector of the 4 channels of type 'f32', got 'tensor<3xf32>'}}
  %0 = onnx.node "BatchNormalization"(%x, %s, %s, %s, %s) {opset = 15 : i64, attrs = {training_mode = 1 : i64}} : (tensor<2x4x8x8xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> none loc("bn")
  return %0 : none
}

// -----

// Training-mode BatchNormalization needs a channel dimension.
func.func @batch_norm_training_rank(%x: tensor<4xf32>, %s: tensor<4xf32>) -> none {
  // expected-error @unknown {{node 'bn' (BatchNormalization, opset 15): expects an input of rank 2 or more ([N, C, ...]), got 'tensor<4xf32>'}}
  %0 = onnx.node "BatchNormalization"(%x, %s, %s, %s, %s) {opset = 15 : i64, attrs = {training_mode = 1 : i64}} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> none loc("bn")
  return %0 : none
}

// -----

// One initializer cannot receive two updates in one step.
func.func @batch_norm_shared_statistics(%x: tensor<2x4xf32>, %s: tensor<4xf32>,
    %m: tensor<4xf32> {train.binding = #train.binding<param "m">}) -> (none, none) {
  %0:3 = onnx.node "BatchNormalization"(%x, %s, %s, %m, %s) {opset = 15 : i64, attrs = {training_mode = 1 : i64}} : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (none, none, none) loc("bn1")
  // expected-error @unknown {{node 'bn2' (BatchNormalization, opset 15): initializer 'm' (input 3) is already updated by another node}}
  %1:3 = onnx.node "BatchNormalization"(%x, %s, %s, %m, %s) {opset = 15 : i64, attrs = {training_mode = 1 : i64}} : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (none, none, none) loc("bn2")
  return %0#0, %1#0 : none, none
}

// -----

// The running statistics outputs are not produced.
func.func @batch_norm_running_mean(%x: tensor<2x4x8x8xf32>, %s: tensor<4xf32>) -> (none, none) {
  // expected-error @unknown {{node 'bn' (BatchNormalization, opset 15): a running-statistics output (output 1) is not supported}}
  %0:3 = onnx.node "BatchNormalization"(%x, %s, %s, %s, %s) {opset = 15 : i64} : (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (none, none, none) loc("bn")
  return %0#0, %0#1 : none, none
}

// -----

// Per-channel operands have the channel count.
func.func @batch_norm_channels(%x: tensor<2x4x8x8xf32>, %s: tensor<3xf32>) -> none {
  // expected-error @unknown {{node 'bn' (BatchNormalization, opset 9): cannot build nn.batch_norm: 'nn.batch_norm' op expects scale of shape [4], got 'tensor<3xf32>'}}
  %0 = onnx.node "BatchNormalization"(%x, %s, %s, %s, %s) {opset = 9 : i64} : (tensor<2x4x8x8xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> none loc("bn")
  return %0 : none
}

// -----

// LayerNormalization's axis must be in range.
func.func @layer_norm_axis(%x: tensor<2x8xf32>, %s: tensor<8xf32>) -> none {
  // expected-error @unknown {{node 'ln' (LayerNormalization, opset 17): axis 2 is out of range for rank 2}}
  %0 = onnx.node "LayerNormalization"(%x, %s) {opset = 17 : i64, attrs = {axis = 2 : i64}} : (tensor<2x8xf32>, tensor<8xf32>) -> none loc("ln")
  return %0 : none
}

// -----

// The scale has the normalized shape.
func.func @layer_norm_scale(%x: tensor<2x8xf32>, %s: tensor<4xf32>) -> none {
  // expected-error @unknown {{node 'ln' (LayerNormalization, opset 17): cannot build nn.layer_norm: 'nn.layer_norm' op expects scale of shape [8] (x.shape[axis:]), got 'tensor<4xf32>'}}
  %0 = onnx.node "LayerNormalization"(%x, %s) {opset = 17 : i64} : (tensor<2x8xf32>, tensor<4xf32>) -> none loc("ln")
  return %0 : none
}

// -----

// Softmax's axis must be in range.
func.func @softmax_axis(%x: tensor<2x8xf32>) -> none {
  // expected-error @unknown {{node 'softmax' (Softmax, opset 13): axis -3 is out of range for rank 2}}
  %0 = onnx.node "Softmax"(%x) {opset = 13 : i64, attrs = {axis = -3 : i64}} : (tensor<2x8xf32>) -> none loc("softmax")
  return %0 : none
}

// -----

// LogSoftmax takes floats only.
func.func @log_softmax_integer(%x: tensor<2x8xi64>) -> none {
  // expected-error @unknown {{node 'log_softmax' (LogSoftmax, opset 13): 'nn.log_softmax' op operand #0 must be statically shaped tensor of 32-bit float}}
  %0 = onnx.node "LogSoftmax"(%x) {opset = 13 : i64} : (tensor<2x8xi64>) -> none loc("log_softmax")
  return %0 : none
}

// -----

// ReduceSum's axes input must be constant once shapes are static.
func.func @reduce_sum_axes_not_constant(%x: tensor<2x8xf32>, %axes: tensor<1xi64>) -> none {
  // expected-error @unknown {{node 'sum' (ReduceSum, opset 13): axes (input 1) must be a constant integer tensor once input shapes are static}}
  %0 = onnx.node "ReduceSum"(%x, %axes) {opset = 13 : i64} : (tensor<2x8xf32>, tensor<1xi64>) -> none loc("sum")
  return %0 : none
}

// -----

// Reduction axes must be in range.
func.func @reduce_mean_axis(%x: tensor<2x8xf32>) -> none {
  // expected-error @unknown {{node 'mean' (ReduceMean, opset 13): axes entry 2 is out of range for rank 2}}
  %0 = onnx.node "ReduceMean"(%x) {opset = 13 : i64, attrs = {axes = [2]}} : (tensor<2x8xf32>) -> none loc("mean")
  return %0 : none
}

// -----

// Axes are integers.
func.func @reduce_max_float_axes(%x: tensor<2x8xf32>) -> none {
  %axes = onnx.constant dense<[0.0]> : tensor<1xf32>
  // expected-error @unknown {{node 'max' (ReduceMax, opset 18): axes (input 1) must be a constant integer tensor once input shapes are static}}
  %0 = onnx.node "ReduceMax"(%x, %axes) {opset = 18 : i64} : (tensor<2x8xf32>, tensor<1xf32>) -> none loc("max")
  return %0 : none
}

// -----

// SoftmaxCrossEntropyLoss needs class scores [N, C, ...].
func.func @softmax_cross_entropy_rank(%s: tensor<8xf32>, %t: tensor<8xi64>) -> none {
  // expected-error @unknown {{node 'sce' (SoftmaxCrossEntropyLoss, opset 13): scores must have rank at least 2 ([N, C, ...])}}
  %0 = onnx.node "SoftmaxCrossEntropyLoss"(%s, %t) {opset = 13 : i64} : (tensor<8xf32>, tensor<8xi64>) -> none loc("sce")
  return %0 : none
}

// -----

// The reduction is none, sum or mean.
func.func @softmax_cross_entropy_reduction(%s: tensor<8x10xf32>, %t: tensor<8xi64>) -> none {
  // expected-error @unknown {{node 'sce' (SoftmaxCrossEntropyLoss, opset 13): reduction must be none, sum or mean, got "avg"}}
  %0 = onnx.node "SoftmaxCrossEntropyLoss"(%s, %t) {opset = 13 : i64, attrs = {reduction = "avg"}} : (tensor<8x10xf32>, tensor<8xi64>) -> none loc("sce")
  return %0 : none
}

// -----

// The target has the scores' shape without the class dimension.
func.func @nll_loss_target(%lp: tensor<8x10xf32>, %t: tensor<4xi64>) -> none {
  // expected-error @unknown {{node 'nll' (NegativeLogLikelihoodLoss, opset 13): cannot build nn.nll_loss: 'nn.nll_loss' op expects target of shape [8] ([N, d1, ...]), got 'tensor<4xi64>'}}
  %0 = onnx.node "NegativeLogLikelihoodLoss"(%lp, %t) {opset = 13 : i64} : (tensor<8x10xf32>, tensor<4xi64>) -> none loc("nll")
  return %0 : none
}
