// RUN: ztc-opt %s -split-input-file -ztc-convert-onnx-to-nn | FileCheck %s

// ztc-convert-onnx-to-nn on the structured converters of NeuralOps.cpp:
// matrix products, convolution and pooling, normalization, softmax,
// reductions and losses. Each case shows how one of ONNX's spellings is
// normalized to the single form the nn op accepts.

// MatMul of batched matrices maps directly, the batch broadcasting.
// CHECK-LABEL: func.func @matmul
// CHECK-SAME: (%[[A:.+]]: tensor<2x8x16xf32>, %[[B:.+]]: tensor<16x4xf32>) -> tensor<2x8x4xf32>
// CHECK: %[[R:.+]] = nn.matmul %[[A]], %[[B]] : tensor<2x8x16xf32>, tensor<16x4xf32> -> tensor<2x8x4xf32>
// CHECK: return %[[R]]
func.func @matmul(%a: tensor<2x8x16xf32>, %b: tensor<16x4xf32>) -> none {
  %0 = onnx.node "MatMul"(%a, %b) {opset = 13 : i64} : (tensor<2x8x16xf32>, tensor<16x4xf32>) -> none
  return %0 : none
}

// -----

// A 1-D left operand is promoted to a row, and the row dimension dropped
// again from the result.
// CHECK-LABEL: func.func @matmul_vector_matrix
// CHECK-SAME: (%[[V:.+]]: tensor<16xf32>, %[[B:.+]]: tensor<16x4xf32>) -> tensor<4xf32>
// CHECK: %[[ROW:.+]] = nn.reshape %[[V]] : tensor<16xf32> -> tensor<1x16xf32>
// CHECK: %[[P:.+]] = nn.matmul %[[ROW]], %[[B]] : tensor<1x16xf32>, tensor<16x4xf32> -> tensor<1x4xf32>
// CHECK: %[[R:.+]] = nn.reshape %[[P]] : tensor<1x4xf32> -> tensor<4xf32>
// CHECK: return %[[R]]
func.func @matmul_vector_matrix(%v: tensor<16xf32>, %b: tensor<16x4xf32>) -> none {
  %0 = onnx.node "MatMul"(%v, %b) {opset = 13 : i64} : (tensor<16xf32>, tensor<16x4xf32>) -> none
  return %0 : none
}

// -----

// A 1-D right operand is promoted to a column against a batched matrix.
// CHECK-LABEL: func.func @matmul_matrix_vector
// CHECK-SAME: (%[[A:.+]]: tensor<2x8x16xf32>, %[[V:.+]]: tensor<16xf32>) -> tensor<2x8xf32>
// CHECK: %[[COL:.+]] = nn.reshape %[[V]] : tensor<16xf32> -> tensor<16x1xf32>
// CHECK: %[[P:.+]] = nn.matmul %[[A]], %[[COL]] : tensor<2x8x16xf32>, tensor<16x1xf32> -> tensor<2x8x1xf32>
// CHECK: nn.reshape %[[P]] : tensor<2x8x1xf32> -> tensor<2x8xf32>
func.func @matmul_matrix_vector(%a: tensor<2x8x16xf32>, %v: tensor<16xf32>) -> none {
  %0 = onnx.node "MatMul"(%a, %v) {opset = 13 : i64} : (tensor<2x8x16xf32>, tensor<16xf32>) -> none
  return %0 : none
}

// -----

// Two vectors give their dot product, a rank-0 tensor (MatMul 9).
// CHECK-LABEL: func.func @matmul_dot
// CHECK-SAME: (%[[V:.+]]: tensor<16xf32>) -> tensor<f32>
// CHECK: %[[P:.+]] = nn.matmul {{.*}} : tensor<1x16xf32>, tensor<16x1xf32> -> tensor<1x1xf32>
// CHECK: nn.reshape %[[P]] : tensor<1x1xf32> -> tensor<f32>
func.func @matmul_dot(%v: tensor<16xf32>) -> none {
  %0 = onnx.node "MatMul"(%v, %v) {opset = 9 : i64} : (tensor<16xf32>, tensor<16xf32>) -> none
  return %0 : none
}

// -----

// Gemm with the defaults is a matmul plus C; alpha = beta = 1 add no
// multiplications.
// CHECK-LABEL: func.func @gemm_defaults
// CHECK-SAME: (%[[A:.+]]: tensor<3x4xf32>, %[[B:.+]]: tensor<4x5xf32>, %[[C:.+]]: tensor<5xf32>) -> tensor<3x5xf32>
// CHECK-NOT: nn.transpose
// CHECK: %[[P:.+]] = nn.matmul %[[A]], %[[B]] : tensor<3x4xf32>, tensor<4x5xf32> -> tensor<3x5xf32>
// CHECK-NOT: nn.mul
// CHECK: %[[R:.+]] = nn.add %[[P]], %[[C]] : tensor<3x5xf32>, tensor<5xf32> -> tensor<3x5xf32>
// CHECK: return %[[R]]
func.func @gemm_defaults(%a: tensor<3x4xf32>, %b: tensor<4x5xf32>, %c: tensor<5xf32>) -> none {
  %0 = onnx.node "Gemm"(%a, %b, %c) {opset = 13 : i64} : (tensor<3x4xf32>, tensor<4x5xf32>, tensor<5xf32>) -> none
  return %0 : none
}

// -----

// Gemm with transA, transB, alpha and beta: both operands are transposed,
// the product scaled by alpha and C by beta.
// CHECK-LABEL: func.func @gemm_transposed_scaled
// CHECK-SAME: (%[[A:.+]]: tensor<4x3xf32>, %[[B:.+]]: tensor<5x4xf32>, %[[C:.+]]: tensor<5xf32>) -> tensor<3x5xf32>
// CHECK: %[[AT:.+]] = nn.transpose %[[A]] {perm = array<i64: 1, 0>} : tensor<4x3xf32> -> tensor<3x4xf32>
// CHECK: %[[BT:.+]] = nn.transpose %[[B]] {perm = array<i64: 1, 0>} : tensor<5x4xf32> -> tensor<4x5xf32>
// CHECK: %[[P:.+]] = nn.matmul %[[AT]], %[[BT]] : tensor<3x4xf32>, tensor<4x5xf32> -> tensor<3x5xf32>
// CHECK: %[[ALPHA:.+]] = arith.constant dense<2.000000e+00> : tensor<f32>
// CHECK: %[[SP:.+]] = nn.mul %[[P]], %[[ALPHA]] : tensor<3x5xf32>, tensor<f32> -> tensor<3x5xf32>
// CHECK: %[[BETA:.+]] = arith.constant dense<5.000000e-01> : tensor<f32>
// CHECK: %[[SC:.+]] = nn.mul %[[C]], %[[BETA]] : tensor<5xf32>, tensor<f32> -> tensor<5xf32>
// CHECK: %[[R:.+]] = nn.add %[[SP]], %[[SC]] : tensor<3x5xf32>, tensor<5xf32> -> tensor<3x5xf32>
// CHECK: return %[[R]]
func.func @gemm_transposed_scaled(%a: tensor<4x3xf32>, %b: tensor<5x4xf32>, %c: tensor<5xf32>) -> none {
  %0 = onnx.node "Gemm"(%a, %b, %c) {opset = 11 : i64, attrs = {transA = 1 : i64, transB = 1 : i64, alpha = 2.0 : f32, beta = 0.5 : f32}} : (tensor<4x3xf32>, tensor<5x4xf32>, tensor<5xf32>) -> none
  return %0 : none
}

// -----

// Gemm with beta = 0 ignores C altogether.
// CHECK-LABEL: func.func @gemm_beta_zero
// CHECK-SAME: (%[[A:.+]]: tensor<3x4xf32>, %[[B:.+]]: tensor<4x5xf32>, %[[C:.+]]: tensor<5xf32>)
// CHECK: %[[P:.+]] = nn.matmul %[[A]], %[[B]]
// CHECK-NOT: nn.add
// CHECK: return %[[P]] : tensor<3x5xf32>
func.func @gemm_beta_zero(%a: tensor<3x4xf32>, %b: tensor<4x5xf32>, %c: tensor<5xf32>) -> none {
  %0 = onnx.node "Gemm"(%a, %b, %c) {opset = 7 : i64, attrs = {beta = 0.0 : f32}} : (tensor<3x4xf32>, tensor<4x5xf32>, tensor<5xf32>) -> none
  return %0 : none
}

// -----

// Conv with explicit pads and strides: ONNX's [begin..., end...] pads are
// nn's [top, left, bottom, right]; kernel_shape agrees with the weight.
// CHECK-LABEL: func.func @conv
// CHECK-SAME: (%[[X:.+]]: tensor<1x3x32x32xf32>, %[[W:.+]]: tensor<16x3x3x3xf32>, %[[B:.+]]: tensor<16xf32>) -> tensor<1x16x16x16xf32>
// CHECK: nn.conv2d %[[X]], %[[W]], %[[B]]
// CHECK-SAME: dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>
// CHECK-SAME: -> tensor<1x16x16x16xf32>
func.func @conv(%x: tensor<1x3x32x32xf32>, %w: tensor<16x3x3x3xf32>, %b: tensor<16xf32>) -> none {
  %0 = onnx.node "Conv"(%x, %w, %b) {opset = 11 : i64, attrs = {pads = [1, 1, 1, 1], strides = [2, 2], kernel_shape = [3, 3]}} : (tensor<1x3x32x32xf32>, tensor<16x3x3x3xf32>, tensor<16xf32>) -> none
  return %0 : none
}

// -----

// auto_pad SAME_UPPER makes the output ceil(7 / 2) = 4 wide: 3 padding
// elements in all, the odd one at the end.
// CHECK-LABEL: func.func @conv_same_upper
// CHECK: nn.conv2d
// CHECK-SAME: pads = array<i64: 1, 1, 2, 2>, strides = array<i64: 2, 2>
// CHECK-SAME: -> tensor<1x8x4x4xf32>
func.func @conv_same_upper(%x: tensor<1x3x7x7xf32>, %w: tensor<8x3x4x4xf32>) -> none {
  %0 = onnx.node "Conv"(%x, %w) {opset = 11 : i64, attrs = {auto_pad = "SAME_UPPER", strides = [2, 2]}} : (tensor<1x3x7x7xf32>, tensor<8x3x4x4xf32>) -> none
  return %0 : none
}

// -----

// auto_pad SAME_LOWER puts the odd padding element at the beginning.
// CHECK-LABEL: func.func @conv_same_lower
// CHECK: nn.conv2d
// CHECK-SAME: pads = array<i64: 2, 2, 1, 1>
// CHECK-SAME: -> tensor<1x8x4x4xf32>
func.func @conv_same_lower(%x: tensor<1x3x7x7xf32>, %w: tensor<8x3x4x4xf32>) -> none {
  %0 = onnx.node "Conv"(%x, %w) {opset = 11 : i64, attrs = {auto_pad = "SAME_LOWER", strides = [2, 2]}} : (tensor<1x3x7x7xf32>, tensor<8x3x4x4xf32>) -> none
  return %0 : none
}

// -----

// auto_pad VALID drops any explicit pads.
// CHECK-LABEL: func.func @conv_valid
// CHECK: nn.conv2d
// CHECK-SAME: pads = array<i64: 0, 0, 0, 0>
// CHECK-SAME: -> tensor<1x8x5x5xf32>
func.func @conv_valid(%x: tensor<1x3x7x7xf32>, %w: tensor<8x3x3x3xf32>) -> none {
  %0 = onnx.node "Conv"(%x, %w) {opset = 1 : i64, attrs = {auto_pad = "VALID", pads = [1, 1, 1, 1]}} : (tensor<1x3x7x7xf32>, tensor<8x3x3x3xf32>) -> none
  return %0 : none
}

// -----

// A 1-D grouped, dilated conv runs as a 2-D one over a unit height: input
// and weight gain the height, the window attributes a leading 1 (pads a
// zero top and bottom), and the result loses the height again.
// CHECK-LABEL: func.func @conv_1d
// CHECK-SAME: (%[[X:.+]]: tensor<2x4x10xf32>, %[[W:.+]]: tensor<6x2x3xf32>) -> tensor<2x6x9xf32>
// CHECK: %[[X2:.+]] = nn.reshape %[[X]] : tensor<2x4x10xf32> -> tensor<2x4x1x10xf32>
// CHECK: %[[W2:.+]] = nn.reshape %[[W]] : tensor<6x2x3xf32> -> tensor<6x2x1x3xf32>
// CHECK: %[[Y:.+]] = nn.conv2d %[[X2]], %[[W2]]
// CHECK-SAME: dilations = array<i64: 1, 2>, group = 2 : i64, pads = array<i64: 0, 1, 0, 2>, strides = array<i64: 1, 1>
// CHECK-SAME: -> tensor<2x6x1x9xf32>
// CHECK: %[[R:.+]] = nn.reshape %[[Y]] : tensor<2x6x1x9xf32> -> tensor<2x6x9xf32>
// CHECK: return %[[R]]
func.func @conv_1d(%x: tensor<2x4x10xf32>, %w: tensor<6x2x3xf32>) -> none {
  %0 = onnx.node "Conv"(%x, %w) {opset = 22 : i64, attrs = {pads = [1, 2], group = 2 : i64, dilations = [2]}} : (tensor<2x4x10xf32>, tensor<6x2x3xf32>) -> none
  return %0 : none
}

// -----

// MaxPool with ceil_mode; the unused Indices output is fine.
// CHECK-LABEL: func.func @max_pool
// CHECK-SAME: (%[[X:.+]]: tensor<1x4x9x9xf32>) -> tensor<1x4x5x5xf32>
// CHECK: nn.max_pool2d %[[X]] {ceil_mode = true, dilations = array<i64: 1, 1>, kernel = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : tensor<1x4x9x9xf32> -> tensor<1x4x5x5xf32>
func.func @max_pool(%x: tensor<1x4x9x9xf32>) -> none {
  %0:2 = onnx.node "MaxPool"(%x) {opset = 12 : i64, attrs = {kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1], ceil_mode = 1 : i64}} : (tensor<1x4x9x9xf32>) -> (none, none)
  return %0#0 : none
}

// -----

// A 1-D MaxPool runs as a 2-D one over a unit height.
// CHECK-LABEL: func.func @max_pool_1d
// CHECK-SAME: (%[[X:.+]]: tensor<1x4x9xf32>) -> tensor<1x4x4xf32>
// CHECK: %[[X2:.+]] = nn.reshape %[[X]] : tensor<1x4x9xf32> -> tensor<1x4x1x9xf32>
// CHECK: %[[Y:.+]] = nn.max_pool2d %[[X2]]
// CHECK-SAME: kernel = array<i64: 1, 2>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 2>
// CHECK-SAME: -> tensor<1x4x1x4xf32>
// CHECK: nn.reshape %[[Y]] : tensor<1x4x1x4xf32> -> tensor<1x4x4xf32>
func.func @max_pool_1d(%x: tensor<1x4x9xf32>) -> none {
  %0 = onnx.node "MaxPool"(%x) {opset = 8 : i64, attrs = {kernel_shape = [2], strides = [2]}} : (tensor<1x4x9xf32>) -> none
  return %0 : none
}

// -----

// AveragePool carries count_include_pad.
// CHECK-LABEL: func.func @average_pool
// CHECK-SAME: (%[[X:.+]]: tensor<1x4x9x9xf32>) -> tensor<1x4x5x5xf32>
// CHECK: nn.avg_pool2d %[[X]] {ceil_mode = false, count_include_pad = true, kernel = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : tensor<1x4x9x9xf32> -> tensor<1x4x5x5xf32>
func.func @average_pool(%x: tensor<1x4x9x9xf32>) -> none {
  %0 = onnx.node "AveragePool"(%x) {opset = 19 : i64, attrs = {kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1], count_include_pad = 1 : i64}} : (tensor<1x4x9x9xf32>) -> none
  return %0 : none
}

// -----

// A 1-D AveragePool with auto_pad SAME_UPPER: padding goes left and right
// of the unit-height window.
// CHECK-LABEL: func.func @average_pool_1d_same
// CHECK-SAME: (%[[X:.+]]: tensor<1x4x9xf32>) -> tensor<1x4x9xf32>
// CHECK: %[[X2:.+]] = nn.reshape %[[X]] : tensor<1x4x9xf32> -> tensor<1x4x1x9xf32>
// CHECK: %[[Y:.+]] = nn.avg_pool2d %[[X2]]
// CHECK-SAME: count_include_pad = false, kernel = array<i64: 1, 3>, pads = array<i64: 0, 1, 0, 1>, strides = array<i64: 1, 1>
// CHECK: nn.reshape %[[Y]] : tensor<1x4x1x9xf32> -> tensor<1x4x9xf32>
func.func @average_pool_1d_same(%x: tensor<1x4x9xf32>) -> none {
  %0 = onnx.node "AveragePool"(%x) {opset = 11 : i64, attrs = {kernel_shape = [3], auto_pad = "SAME_UPPER"}} : (tensor<1x4x9xf32>) -> none
  return %0 : none
}

// -----

// GlobalAveragePool is a mean over the spatial dimensions, kept as size 1.
// CHECK-LABEL: func.func @global_average_pool
// CHECK-SAME: (%[[X:.+]]: tensor<2x8x5x5xf32>) -> tensor<2x8x1x1xf32>
// CHECK: nn.reduce_mean %[[X]] {axes = array<i64: 2, 3>, keepdims = true} : tensor<2x8x5x5xf32> -> tensor<2x8x1x1xf32>
func.func @global_average_pool(%x: tensor<2x8x5x5xf32>) -> none {
  %0 = onnx.node "GlobalAveragePool"(%x) {opset = 1 : i64} : (tensor<2x8x5x5xf32>) -> none
  return %0 : none
}

// -----

// BatchNormalization in inference uses the given statistics and keeps its
// f32 epsilon exactly.
// CHECK-LABEL: func.func @batch_norm
// CHECK-SAME: (%[[X:.+]]: tensor<2x4x8x8xf32>, %[[S:.+]]: tensor<4xf32>, %[[B:.+]]: tensor<4xf32>, %[[M:.+]]: tensor<4xf32>, %[[V:.+]]: tensor<4xf32>)
// CHECK: nn.batch_norm %[[X]], %[[S]], %[[B]], %[[M]], %[[V]] {epsilon = 0.0010000000474974513 : f64}
// CHECK-SAME: -> tensor<2x4x8x8xf32>
func.func @batch_norm(%x: tensor<2x4x8x8xf32>, %s: tensor<4xf32>, %b: tensor<4xf32>, %m: tensor<4xf32>, %v: tensor<4xf32>) -> none {
  %0 = onnx.node "BatchNormalization"(%x, %s, %b, %m, %v) {opset = 15 : i64, attrs = {epsilon = 1.0e-03 : f32}} : (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> none
  return %0 : none
}

// -----

// Training-mode BatchNormalization is one nn.batch_norm_training: the
// batch's biased statistics over every axis but the channels (its mean
// and var results), and the running statistics move toward them: running
// * momentum + batch * (1 - momentum). Running statistics that are
// initializers are returned as updates. The evaluate entry normalizes
// with the running statistics (nn.mode_select's second operand, an
// inference nn.batch_norm).
// CHECK-LABEL: func.func @batch_norm_training
// CHECK-SAME: (%[[X:[a-z0-9]+]]: tensor<2x4x8x8xf32>, %[[S:[a-z0-9]+]]: tensor<4xf32>, %[[B:[a-z0-9]+]]: tensor<4xf32>, %[[M:[a-z0-9]+]]: tensor<4xf32> {train.binding = #train.binding<param "bn.running_mean">}, %[[V:[a-z0-9]+]]: tensor<4xf32> {train.binding = #train.binding<param "bn.running_var">})
// CHECK-SAME: -> (tensor<2x4x8x8xf32>, tensor<4xf32> {train.update_of = "bn.running_mean"}, tensor<4xf32> {train.update_of = "bn.running_var"})
// CHECK: %[[TRAINED:.+]], %[[MEAN:.+]], %[[VAR:.+]] = nn.batch_norm_training %[[X]], %[[S]], %[[B]] {epsilon = 1.000000e-05 : f64} : tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32> -> tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>
// CHECK: %[[INFERRED:.+]] = nn.batch_norm %[[X]], %[[S]], %[[B]], %[[M]], %[[V]] {epsilon = {{.+}}}
// CHECK: %[[Y:.+]] = nn.mode_select %[[TRAINED]], %[[INFERRED]] : tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32> -> tensor<2x4x8x8xf32>
// CHECK: %[[MOM:.+]] = arith.constant dense<8.000000e-01> : tensor<f32>
// CHECK: %[[RM:.+]] = nn.mul %[[M]], %[[MOM]]
// CHECK: %[[REST:.+]] = arith.constant dense<0.199999988> : tensor<f32>
// CHECK: %[[BM:.+]] = nn.mul %[[MEAN]], %[[REST]]
// CHECK: %[[NM:.+]] = nn.add %[[RM]], %[[BM]]
// CHECK: %[[RV:.+]] = nn.mul %[[V]], %{{.+}}
// CHECK: %[[BV:.+]] = nn.mul %[[VAR]], %{{.+}}
// CHECK: %[[NV:.+]] = nn.add %[[RV]], %[[BV]]
// CHECK: return %[[Y]], %[[NM]], %[[NV]]
func.func @batch_norm_training(%x: tensor<2x4x8x8xf32>, %s: tensor<4xf32>, %b: tensor<4xf32>,
    %m: tensor<4xf32> {train.binding = #train.binding<param "bn.running_mean">},
    %v: tensor<4xf32> {train.binding = #train.binding<param "bn.running_var">}) -> none {
  %0:3 = onnx.node "BatchNormalization"(%x, %s, %b, %m, %v) {opset = 15 : i64, attrs = {training_mode = 1 : i64, momentum = 0.8 : f32}} : (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (none, none, none)
  return %0#0 : none
}

// -----

// BatchNormalization-9 in training mode (it has the statistics outputs) also
// returns the batch's mean and variance; statistics that are graph inputs
// are plain outputs, not updates.
// CHECK-LABEL: func.func @batch_norm_training_9
// CHECK: %{{.+}}, %[[SAVED:.+]], %{{.+}} = nn.batch_norm_training %{{.+}} : tensor<6x3xf32>, tensor<3xf32>, tensor<3xf32> -> tensor<6x3xf32>, tensor<3xf32>, tensor<3xf32>
// CHECK: return %{{.+}}, %{{.+}}, %[[SAVED]] : tensor<6x3xf32>, tensor<3xf32>, tensor<3xf32>
// CHECK-NOT: train.update_of
func.func @batch_norm_training_9(%x: tensor<6x3xf32>, %s: tensor<3xf32>, %m: tensor<3xf32>) -> (none, none, none) {
  %0:5 = onnx.node "BatchNormalization"(%x, %s, %s, %m, %s) {opset = 9 : i64} : (tensor<6x3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (none, none, none, none, none)
  return %0#0, %0#1, %0#3 : none, none, none
}

// -----

// LayerNormalization's default axis -1 becomes the last dimension.
// CHECK-LABEL: func.func @layer_norm
// CHECK-SAME: (%[[X:.+]]: tensor<2x8x64xf32>, %[[S:.+]]: tensor<64xf32>, %[[B:.+]]: tensor<64xf32>) -> tensor<2x8x64xf32>
// CHECK: nn.layer_norm %[[X]], %[[S]], %[[B]] {axis = 2 : i64, epsilon = 1.000000e-05 : f64}
func.func @layer_norm(%x: tensor<2x8x64xf32>, %s: tensor<64xf32>, %b: tensor<64xf32>) -> none {
  %0 = onnx.node "LayerNormalization"(%x, %s, %b) {opset = 17 : i64} : (tensor<2x8x64xf32>, tensor<64xf32>, tensor<64xf32>) -> none
  return %0 : none
}

// -----

// The Mean and InvStdDev outputs of LayerNormalization are computed in the
// stash type (f32) over the normalized axes, kept as size 1:
// mean(x), 1 / sqrt(mean((x - mean)^2) + epsilon).
// CHECK-LABEL: func.func @layer_norm_statistics
// CHECK-SAME: (%[[X:.+]]: tensor<2x8x64xf16>, %[[S:.+]]: tensor<8x64xf16>) -> (tensor<2x8x64xf16>, tensor<2x1x1xf32>, tensor<2x1x1xf32>)
// CHECK: %[[Y:.+]] = nn.layer_norm %[[X]], %[[S]] {axis = 1 : i64, epsilon = 9.9999999747524271E-7 : f64}
// CHECK: %[[XF:.+]] = nn.cast %[[X]] : tensor<2x8x64xf16> -> tensor<2x8x64xf32>
// CHECK: %[[MEAN:.+]] = nn.reduce_mean %[[XF]] {axes = array<i64: 1, 2>, keepdims = true} : tensor<2x8x64xf32> -> tensor<2x1x1xf32>
// CHECK: %[[D:.+]] = nn.sub %[[XF]], %[[MEAN]]
// CHECK: %[[SQ:.+]] = nn.mul %[[D]], %[[D]]
// CHECK: %[[VAR:.+]] = nn.reduce_mean %[[SQ]] {axes = array<i64: 1, 2>, keepdims = true}
// CHECK: %[[EPS:.+]] = arith.constant dense<9.99999997E-7> : tensor<f32>
// CHECK: %[[VE:.+]] = nn.add %[[VAR]], %[[EPS]]
// CHECK: %[[SD:.+]] = nn.sqrt %[[VE]]
// CHECK: %[[INV:.+]] = nn.reciprocal %[[SD]] : tensor<2x1x1xf32> -> tensor<2x1x1xf32>
// CHECK: return %[[Y]], %[[MEAN]], %[[INV]]
func.func @layer_norm_statistics(%x: tensor<2x8x64xf16>, %s: tensor<8x64xf16>) -> (none, none, none) {
  %0:3 = onnx.node "LayerNormalization"(%x, %s) {opset = 17 : i64, attrs = {axis = -2 : i64, epsilon = 1.0e-06 : f32}} : (tensor<2x8x64xf16>, tensor<8x64xf16>) -> (none, none, none)
  return %0#0, %0#1, %0#2 : none, none, none
}

// -----

// Softmax from opset 13 works on one axis, by default the last.
// CHECK-LABEL: func.func @softmax_13
// CHECK-SAME: (%[[X:.+]]: tensor<2x3x4xf32>)
// CHECK: nn.softmax %[[X]] {axis = 2 : i64} : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
func.func @softmax_13(%x: tensor<2x3x4xf32>) -> none {
  %0 = onnx.node "Softmax"(%x) {opset = 13 : i64} : (tensor<2x3x4xf32>) -> none
  return %0 : none
}

// -----

// Softmax before opset 13 coerces the input to 2-D at axis (default 1): a
// softmax over all of dimensions 1 and 2 together, reshaped back.
// CHECK-LABEL: func.func @softmax_11_coerced
// CHECK-SAME: (%[[X:.+]]: tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
// CHECK: %[[F:.+]] = nn.reshape %[[X]] : tensor<2x3x4xf32> -> tensor<2x12xf32>
// CHECK: %[[S:.+]] = nn.softmax %[[F]] {axis = 1 : i64} : tensor<2x12xf32> -> tensor<2x12xf32>
// CHECK: %[[R:.+]] = nn.reshape %[[S]] : tensor<2x12xf32> -> tensor<2x3x4xf32>
// CHECK: return %[[R]]
func.func @softmax_11_coerced(%x: tensor<2x3x4xf32>) -> none {
  %0 = onnx.node "Softmax"(%x) {opset = 11 : i64} : (tensor<2x3x4xf32>) -> none
  return %0 : none
}

// -----

// LogSoftmax follows the same rules: one axis from opset 13, coerced to 2-D
// before (here at the last axis, so the coercion is [6, 4]).
// CHECK-LABEL: func.func @log_softmax
// CHECK-SAME: (%[[X:.+]]: tensor<2x3x4xf32>)
// CHECK: nn.log_softmax %[[X]] {axis = 1 : i64} : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
// CHECK: %[[F:.+]] = nn.reshape %[[X]] : tensor<2x3x4xf32> -> tensor<6x4xf32>
// CHECK: %[[S:.+]] = nn.log_softmax %[[F]] {axis = 1 : i64} : tensor<6x4xf32> -> tensor<6x4xf32>
// CHECK: nn.reshape %[[S]] : tensor<6x4xf32> -> tensor<2x3x4xf32>
func.func @log_softmax(%x: tensor<2x3x4xf32>) -> (none, none) {
  %0 = onnx.node "LogSoftmax"(%x) {opset = 13 : i64, attrs = {axis = 1 : i64}} : (tensor<2x3x4xf32>) -> none
  %1 = onnx.node "LogSoftmax"(%x) {opset = 1 : i64, attrs = {axis = -1 : i64}} : (tensor<2x3x4xf32>) -> none
  return %0, %1 : none, none
}

// -----

// ReduceSum before opset 13 takes axes as an attribute.
// CHECK-LABEL: func.func @reduce_sum_attribute
// CHECK-SAME: (%[[X:.+]]: tensor<2x3x4xf32>) -> tensor<2x4xf32>
// CHECK: nn.reduce_sum %[[X]] {axes = array<i64: 1>, keepdims = false} : tensor<2x3x4xf32> -> tensor<2x4xf32>
func.func @reduce_sum_attribute(%x: tensor<2x3x4xf32>) -> none {
  %0 = onnx.node "ReduceSum"(%x) {opset = 11 : i64, attrs = {axes = [1], keepdims = 0 : i64}} : (tensor<2x3x4xf32>) -> none
  return %0 : none
}

// -----

// ReduceSum from opset 13 takes axes as a constant input; they are
// normalized and sorted.
// CHECK-LABEL: func.func @reduce_sum_input
// CHECK-SAME: (%[[X:.+]]: tensor<2x3x4xf32>) -> tensor<1x3x1xf32>
// CHECK: nn.reduce_sum %[[X]] {axes = array<i64: 0, 2>, keepdims = true} : tensor<2x3x4xf32> -> tensor<1x3x1xf32>
func.func @reduce_sum_input(%x: tensor<2x3x4xf32>) -> none {
  %axes = onnx.constant dense<[-1, 0]> : tensor<2xi64>
  %0 = onnx.node "ReduceSum"(%x, %axes) {opset = 13 : i64} : (tensor<2x3x4xf32>, tensor<2xi64>) -> none
  return %0 : none
}

// -----

// Without axes ReduceSum reduces everything, unless noop_with_empty_axes
// makes it the identity.
// CHECK-LABEL: func.func @reduce_sum_no_axes
// CHECK-SAME: (%[[X:.+]]: tensor<2x3x4xf32>) -> (tensor<f32>, tensor<2x3x4xf32>)
// CHECK: %[[ALL:.+]] = nn.reduce_sum %[[X]] {axes = array<i64: 0, 1, 2>, keepdims = false} : tensor<2x3x4xf32> -> tensor<f32>
// CHECK-NOT: nn.reduce_sum
// CHECK: return %[[ALL]], %[[X]]
func.func @reduce_sum_no_axes(%x: tensor<2x3x4xf32>) -> (none, none) {
  %none = onnx.none
  %0 = onnx.node "ReduceSum"(%x) {opset = 13 : i64, attrs = {keepdims = 0 : i64}} : (tensor<2x3x4xf32>) -> none
  %1 = onnx.node "ReduceSum"(%x, %none) {opset = 13 : i64, attrs = {noop_with_empty_axes = 1 : i64}} : (tensor<2x3x4xf32>, none) -> none
  return %0, %1 : none, none
}

// -----

// ReduceMean keeps axes as an attribute until opset 18, with keepdims
// defaulting to 1.
// CHECK-LABEL: func.func @reduce_mean_attribute
// CHECK-SAME: (%[[X:.+]]: tensor<2x3x4xf32>) -> tensor<2x1x4xf32>
// CHECK: nn.reduce_mean %[[X]] {axes = array<i64: 1>, keepdims = true} : tensor<2x3x4xf32> -> tensor<2x1x4xf32>
func.func @reduce_mean_attribute(%x: tensor<2x3x4xf32>) -> none {
  %0 = onnx.node "ReduceMean"(%x) {opset = 13 : i64, attrs = {axes = [-2]}} : (tensor<2x3x4xf32>) -> none
  return %0 : none
}

// -----

// ReduceMean and ReduceMax take axes as an input from opset 18.
// CHECK-LABEL: func.func @reduce_18_input
// CHECK-SAME: (%[[X:.+]]: tensor<2x3x4xf32>) -> (tensor<2x4xf32>, tensor<2x1x4xf32>)
// CHECK: nn.reduce_max %[[X]] {axes = array<i64: 1>, keepdims = false} : tensor<2x3x4xf32> -> tensor<2x4xf32>
// CHECK: nn.reduce_mean %[[X]] {axes = array<i64: 1>, keepdims = true} : tensor<2x3x4xf32> -> tensor<2x1x4xf32>
func.func @reduce_18_input(%x: tensor<2x3x4xf32>) -> (none, none) {
  %axes = onnx.constant dense<[1]> : tensor<1xi64>
  %0 = onnx.node "ReduceMax"(%x, %axes) {opset = 20 : i64, attrs = {keepdims = 0 : i64}} : (tensor<2x3x4xf32>, tensor<1xi64>) -> none
  %1 = onnx.node "ReduceMean"(%x, %axes) {opset = 18 : i64} : (tensor<2x3x4xf32>, tensor<1xi64>) -> none
  return %0, %1 : none, none
}

// -----

// ReduceMax with axes as an attribute (before opset 18).
// CHECK-LABEL: func.func @reduce_max_attribute
// CHECK-SAME: (%[[X:.+]]: tensor<4x8xi64>) -> tensor<4xi64>
// CHECK: nn.reduce_max %[[X]] {axes = array<i64: 1>, keepdims = false} : tensor<4x8xi64> -> tensor<4xi64>
func.func @reduce_max_attribute(%x: tensor<4x8xi64>) -> none {
  %0 = onnx.node "ReduceMax"(%x) {opset = 13 : i64, attrs = {axes = [1], keepdims = 0 : i64}} : (tensor<4x8xi64>) -> none
  return %0 : none
}

// -----

// SoftmaxCrossEntropyLoss is log_softmax over the classes, then nll_loss;
// the optional log_prob output is the log_softmax.
// CHECK-LABEL: func.func @softmax_cross_entropy
// CHECK-SAME: (%[[S:.+]]: tensor<8x10xf32>, %[[T:.+]]: tensor<8xi64>) -> (tensor<f32>, tensor<8x10xf32>)
// CHECK: %[[LP:.+]] = nn.log_softmax %[[S]] {axis = 1 : i64} : tensor<8x10xf32> -> tensor<8x10xf32>
// CHECK: %[[L:.+]] = nn.nll_loss %[[LP]], %[[T]] {reduction = "sum"} : tensor<8x10xf32>, tensor<8xi64> -> tensor<f32>
// CHECK: return %[[L]], %[[LP]]
func.func @softmax_cross_entropy(%s: tensor<8x10xf32>, %t: tensor<8xi64>) -> (none, none) {
  %0:2 = onnx.node "SoftmaxCrossEntropyLoss"(%s, %t) {opset = 13 : i64, attrs = {reduction = "sum"}} : (tensor<8x10xf32>, tensor<8xi64>) -> (none, none)
  return %0#0, %0#1 : none, none
}

// -----

// NegativeLogLikelihoodLoss with extra dimensions, class weights and
// ignore_index; "mean" is the default reduction.
// CHECK-LABEL: func.func @nll_loss
// CHECK-SAME: (%[[LP:.+]]: tensor<8x10x4xf32>, %[[T:.+]]: tensor<8x4xi64>, %[[W:.+]]: tensor<10xf32>) -> tensor<f32>
// CHECK: nn.nll_loss %[[LP]], %[[T]], %[[W]] {ignore_index = -100 : i64} : tensor<8x10x4xf32>, tensor<8x4xi64>, tensor<10xf32> -> tensor<f32>
func.func @nll_loss(%lp: tensor<8x10x4xf32>, %t: tensor<8x4xi64>, %w: tensor<10xf32>) -> none {
  %0 = onnx.node "NegativeLogLikelihoodLoss"(%lp, %t, %w) {opset = 13 : i64, attrs = {ignore_index = -100 : i64}} : (tensor<8x10x4xf32>, tensor<8x4xi64>, tensor<10xf32>) -> none
  return %0 : none
}

// -----

// reduction "none" gives one loss per target element.
// CHECK-LABEL: func.func @nll_loss_none
// CHECK: nn.nll_loss {{.*}} {reduction = "none"} : tensor<8x10xf32>, tensor<8xi64> -> tensor<8xf32>
func.func @nll_loss_none(%lp: tensor<8x10xf32>, %t: tensor<8xi64>) -> none {
  %0 = onnx.node "NegativeLogLikelihoodLoss"(%lp, %t) {opset = 12 : i64, attrs = {reduction = "none"}} : (tensor<8x10xf32>, tensor<8xi64>) -> none
  return %0 : none
}
