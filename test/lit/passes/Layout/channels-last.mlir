// RUN: ztc-opt %s -split-input-file -ztc-channels-last | FileCheck %s

// Two convolutions with a BatchNorm-style normalization and a ReLU between
// them: the first writes NHWC, the statistics reduce over the NHWC N, H, W
// (axes 0, 1, 2), the per-channel operands become [1, 1, 1, C] views, and
// the second reads the ReLU's NHWC result: the only transposes left are
// the input's and the result's.
// CHECK-LABEL: func.func @conv_bn_relu_conv
// CHECK: %[[X:.+]] = nn.transpose %arg0 {perm = array<i64: 0, 2, 3, 1>} : tensor<2x3x8x8xf32> -> tensor<2x8x8x3xf32>
// CHECK: %[[Y:.+]] = nn.conv2d %[[X]], %arg1 {channels_last, {{.*}}} : tensor<2x8x8x3xf32>, tensor<4x3x3x3xf32> -> tensor<2x8x8x4xf32>
// CHECK: %[[MEAN:.+]] = nn.reduce_mean %[[Y]] {axes = array<i64: 0, 1, 2>, keepdims = true} : tensor<2x8x8x4xf32> -> tensor<1x1x1x4xf32>
// CHECK: %[[C:.+]] = nn.sub %[[Y]], %[[MEAN]] : tensor<2x8x8x4xf32>, tensor<1x1x1x4xf32> -> tensor<2x8x8x4xf32>
// CHECK: %[[S:.+]] = nn.reshape %arg2 : tensor<4xf32> -> tensor<1x1x1x4xf32>
// CHECK: %[[N:.+]] = nn.mul %[[C]], %[[S]] : tensor<2x8x8x4xf32>, tensor<1x1x1x4xf32> -> tensor<2x8x8x4xf32>
// CHECK: %[[R:.+]] = nn.relu %[[N]] : tensor<2x8x8x4xf32> -> tensor<2x8x8x4xf32>
// CHECK: %[[Z:.+]] = nn.conv2d %[[R]], %arg3 {channels_last, {{.*}}} : tensor<2x8x8x4xf32>, tensor<4x4x3x3xf32> -> tensor<2x8x8x4xf32>
// CHECK: %[[OUT:.+]] = nn.transpose %[[Z]] {perm = array<i64: 0, 3, 1, 2>} : tensor<2x8x8x4xf32> -> tensor<2x4x8x8xf32>
// CHECK-NOT: nn.transpose
// CHECK: return %[[OUT]]
func.func @conv_bn_relu_conv(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %scale: tensor<4xf32>, %w2: tensor<4x4x3x3xf32>) -> tensor<2x4x8x8xf32> {
  %y = nn.conv2d %x, %w {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<2x4x8x8xf32>
  %mean = nn.reduce_mean %y {axes = array<i64: 0, 2, 3>, keepdims = true} : tensor<2x4x8x8xf32> -> tensor<1x4x1x1xf32>
  %c = nn.sub %y, %mean : tensor<2x4x8x8xf32>, tensor<1x4x1x1xf32> -> tensor<2x4x8x8xf32>
  %s = nn.reshape %scale : tensor<4xf32> -> tensor<1x4x1x1xf32>
  %n = nn.mul %c, %s : tensor<2x4x8x8xf32>, tensor<1x4x1x1xf32> -> tensor<2x4x8x8xf32>
  %r = nn.relu %n : tensor<2x4x8x8xf32> -> tensor<2x4x8x8xf32>
  %z = nn.conv2d %r, %w2 {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : tensor<2x4x8x8xf32>, tensor<4x4x3x3xf32> -> tensor<2x4x8x8xf32>
  return %z : tensor<2x4x8x8xf32>
}

// -----

// The gradients: the data gradient reads and writes NHWC, the filter
// gradient reads both activations NHWC and writes OIHW weights. Sums of
// the data gradient follow it: over N, H, W without keepdims (a bias
// gradient) and over H, W the kept dimensions are in NCHW order already;
// over N alone the NHWC [H, W, C] is transposed to the NCHW [C, H, W].
// CHECK-LABEL: func.func @gradients
// CHECK: %[[DY:.+]] = nn.transpose %arg0 {perm = array<i64: 0, 2, 3, 1>}
// CHECK: %[[DX:.+]] = nn.conv2d_backward_data %[[DY]], %arg1 {channels_last, {{.*}}} : tensor<2x8x8x4xf32>, tensor<4x3x3x3xf32> -> tensor<2x8x8x3xf32>
// CHECK: nn.conv2d_backward_filter %{{.+}}, %[[DY]] {channels_last, {{.*}}} : tensor<2x8x8x3xf32>, tensor<2x8x8x4xf32> -> tensor<4x3x3x3xf32>
// CHECK: %[[C:.+]] = nn.reduce_sum %[[DX]] {axes = array<i64: 0, 1, 2>, keepdims = false} : tensor<2x8x8x3xf32> -> tensor<3xf32>
// CHECK: %[[NC:.+]] = nn.reduce_sum %[[DX]] {axes = array<i64: 1, 2>, keepdims = false} : tensor<2x8x8x3xf32> -> tensor<2x3xf32>
// CHECK: %[[HWC:.+]] = nn.reduce_sum %[[DX]] {axes = array<i64: 0>, keepdims = false} : tensor<2x8x8x3xf32> -> tensor<8x8x3xf32>
// CHECK: %[[CHW:.+]] = nn.transpose %[[HWC]] {perm = array<i64: 2, 0, 1>} : tensor<8x8x3xf32> -> tensor<3x8x8xf32>
// CHECK: return %{{.+}}, %{{.+}}, %[[C]], %[[NC]], %[[CHW]]
func.func @gradients(%dy: tensor<2x4x8x8xf32>, %w: tensor<4x3x3x3xf32>, %x: tensor<2x3x8x8xf32>) -> (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<3xf32>, tensor<2x3xf32>, tensor<3x8x8xf32>) {
  %dx = nn.conv2d_backward_data %dy, %w {dilations = array<i64: 1, 1>, group = 1 : i64, input_size = array<i64: 8, 8>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : tensor<2x4x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<2x3x8x8xf32>
  %dw = nn.conv2d_backward_filter %x, %dy {dilations = array<i64: 1, 1>, group = 1 : i64, kernel = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : tensor<2x3x8x8xf32>, tensor<2x4x8x8xf32> -> tensor<4x3x3x3xf32>
  %c = nn.reduce_sum %dx {axes = array<i64: 0, 2, 3>, keepdims = false} : tensor<2x3x8x8xf32> -> tensor<3xf32>
  %nc = nn.reduce_sum %dx {axes = array<i64: 2, 3>, keepdims = false} : tensor<2x3x8x8xf32> -> tensor<2x3xf32>
  %chw = nn.reduce_sum %dx {axes = array<i64: 0>, keepdims = false} : tensor<2x3x8x8xf32> -> tensor<3x8x8xf32>
  return %dx, %dw, %c, %nc, %chw : tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<3xf32>, tensor<2x3xf32>, tensor<3x8x8xf32>
}

// -----

// The transpose stays before an op that also reads a full NCHW tensor of
// its own (moving it would transpose that one), and f64 convolutions keep
// NCHW.
// CHECK-LABEL: func.func @stays
// CHECK: %[[Y:.+]] = nn.conv2d %{{.+}}, %arg1 {channels_last, {{.*}} -> tensor<2x8x8x4xf32>
// CHECK: %[[T:.+]] = nn.transpose %[[Y]] {perm = array<i64: 0, 3, 1, 2>}
// CHECK: nn.add %[[T]], %arg2 : tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>
// CHECK: nn.conv2d %arg3, %arg4 {dilations
// CHECK-SAME: tensor<1x2x4x4xf64>
func.func @stays(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %other: tensor<2x4x8x8xf32>, %xd: tensor<1x2x4x4xf64>, %wd: tensor<2x2x1x1xf64>) -> (tensor<2x4x8x8xf32>, tensor<1x2x4x4xf64>) {
  %y = nn.conv2d %x, %w {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<2x4x8x8xf32>
  %sum = nn.add %y, %other : tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32> -> tensor<2x4x8x8xf32>
  %d = nn.conv2d %xd, %wd {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : tensor<1x2x4x4xf64>, tensor<2x2x1x1xf64> -> tensor<1x2x4x4xf64>
  return %sum, %d : tensor<2x4x8x8xf32>, tensor<1x2x4x4xf64>
}

// -----

// Half convolutions: NCHW by default (oneDNN's fast channels-last ones are
// f32); with half-types (the CUDA target's: cuDNN takes them) NHWC like
// f32's. f64 stays NCHW either way.
// RUN: ztc-opt %s -split-input-file -ztc-channels-last="half-types=true" | FileCheck %s --check-prefix=HALF
// CHECK-LABEL: func.func @half_types
// CHECK-NOT: channels_last
// CHECK: return
// HALF-LABEL: func.func @half_types
// HALF: nn.conv2d %{{.+}}, %{{.+}} {channels_last, {{.*}} : tensor<2x8x8x3xbf16>, tensor<4x3x3x3xbf16> -> tensor<2x8x8x4xbf16>
// HALF: nn.conv2d %{{.+}}, %{{.+}} {channels_last, {{.*}} : tensor<2x8x8x3xf16>, tensor<4x3x3x3xf16> -> tensor<2x8x8x4xf16>
// HALF: nn.conv2d %arg4, %arg5 {dilations
// HALF-SAME: tensor<1x2x4x4xf64>
func.func @half_types(%x: tensor<2x3x8x8xbf16>, %w: tensor<4x3x3x3xbf16>, %xh: tensor<2x3x8x8xf16>, %wh: tensor<4x3x3x3xf16>, %xd: tensor<1x2x4x4xf64>, %wd: tensor<2x2x1x1xf64>) -> (tensor<2x4x8x8xbf16>, tensor<2x4x8x8xf16>, tensor<1x2x4x4xf64>) {
  %y = nn.conv2d %x, %w {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : tensor<2x3x8x8xbf16>, tensor<4x3x3x3xbf16> -> tensor<2x4x8x8xbf16>
  %h = nn.conv2d %xh, %wh {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : tensor<2x3x8x8xf16>, tensor<4x3x3x3xf16> -> tensor<2x4x8x8xf16>
  %d = nn.conv2d %xd, %wd {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : tensor<1x2x4x4xf64>, tensor<2x2x1x1xf64> -> tensor<1x2x4x4xf64>
  return %y, %h, %d : tensor<2x4x8x8xbf16>, tensor<2x4x8x8xf16>, tensor<1x2x4x4xf64>
}

// -----

// Poolings between convolutions run NHWC too (channels_last), forward and
// backward: the max pool feeds the second convolution with no transpose
// between, an average pool whose result leaves the function is transposed
// after it (the pooled size), and max_pool2d_backward, whose output
// gradient comes in NCHW, transposes that (the pooled size) rather than the
// input.
// CHECK-LABEL: func.func @pools
// CHECK: %[[X:.+]] = nn.transpose %arg0 {perm = array<i64: 0, 2, 3, 1>}
// CHECK: %[[Y:.+]] = nn.conv2d %[[X]], %arg1 {channels_last, {{.*}}} : tensor<2x8x8x3xf32>, tensor<4x3x3x3xf32> -> tensor<2x8x8x4xf32>
// CHECK-NOT: nn.transpose
// CHECK: %[[P:.+]] = nn.max_pool2d %[[Y]] {ceil_mode = false, channels_last, {{.*}}} : tensor<2x8x8x4xf32> -> tensor<2x4x4x4xf32>
// CHECK-NOT: nn.transpose
// CHECK: %[[Z:.+]] = nn.conv2d %[[P]], %arg2 {channels_last, {{.*}}} : tensor<2x4x4x4xf32>, tensor<4x4x3x3xf32> -> tensor<2x4x4x4xf32>
// CHECK: %[[ZN:.+]] = nn.transpose %[[Z]] {perm = array<i64: 0, 3, 1, 2>}
// CHECK: %[[A:.+]] = nn.avg_pool2d %[[Y]] {ceil_mode = false, channels_last, {{.*}}} : tensor<2x8x8x4xf32> -> tensor<2x4x4x4xf32>
// CHECK: %[[AN:.+]] = nn.transpose %[[A]] {perm = array<i64: 0, 3, 1, 2>} : tensor<2x4x4x4xf32> -> tensor<2x4x4x4xf32>
// CHECK: %[[DY:.+]] = nn.transpose %arg3 {perm = array<i64: 0, 2, 3, 1>} : tensor<2x4x4x4xf32> -> tensor<2x4x4x4xf32>
// CHECK: %[[G:.+]] = nn.max_pool2d_backward %[[Y]], %[[DY]] {ceil_mode = false, channels_last, {{.*}}} : tensor<2x8x8x4xf32>, tensor<2x4x4x4xf32> -> tensor<2x8x8x4xf32>
// CHECK: %[[GN:.+]] = nn.transpose %[[G]] {perm = array<i64: 0, 3, 1, 2>} : tensor<2x8x8x4xf32> -> tensor<2x4x8x8xf32>
// CHECK: %[[H:.+]] = nn.avg_pool2d_backward %[[Z]] {ceil_mode = false, channels_last, count_include_pad = true, input_size = array<i64: 8, 8>, {{.*}}} : tensor<2x4x4x4xf32> -> tensor<2x8x8x4xf32>
// CHECK: %[[HN:.+]] = nn.transpose %[[H]] {perm = array<i64: 0, 3, 1, 2>} : tensor<2x8x8x4xf32> -> tensor<2x4x8x8xf32>
// CHECK: return %[[ZN]], %[[AN]], %[[GN]], %[[HN]]
func.func @pools(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %w2: tensor<4x4x3x3xf32>, %dy: tensor<2x4x4x4xf32>) -> (tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) {
  %y = nn.conv2d %x, %w {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<2x4x8x8xf32>
  %p = nn.max_pool2d %y {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = false} : tensor<2x4x8x8xf32> -> tensor<2x4x4x4xf32>
  %z = nn.conv2d %p, %w2 {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : tensor<2x4x4x4xf32>, tensor<4x4x3x3xf32> -> tensor<2x4x4x4xf32>
  %a = nn.avg_pool2d %y {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, ceil_mode = false, count_include_pad = false} : tensor<2x4x8x8xf32> -> tensor<2x4x4x4xf32>
  %g = nn.max_pool2d_backward %y, %dy {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = false} : tensor<2x4x8x8xf32>, tensor<2x4x4x4xf32> -> tensor<2x4x8x8xf32>
  %h = nn.avg_pool2d_backward %z {input_size = array<i64: 8, 8>, kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, ceil_mode = false, count_include_pad = true} : tensor<2x4x4x4xf32> -> tensor<2x4x8x8xf32>
  return %z, %a, %g, %h : tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>, tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>
}

// -----

// An inference batch norm (a model exported in eval mode) runs NHWC too,
// its [C] vectors as they are: no transpose between the convolutions.
// CHECK-LABEL: func.func @inference_batch_norm
// CHECK: %[[X:.+]] = nn.transpose %arg0 {perm = array<i64: 0, 2, 3, 1>}
// CHECK: %[[Y:.+]] = nn.conv2d %[[X]], %arg1 {channels_last, {{.*}}} : tensor<2x8x8x3xf32>, tensor<4x3x3x3xf32> -> tensor<2x8x8x4xf32>
// CHECK-NOT: nn.transpose
// CHECK: %[[N:.+]] = nn.batch_norm %[[Y]], %arg2, %arg2, %arg2, %arg2 {channels_last, epsilon = 1.000000e-05 : f64} : tensor<2x8x8x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32> -> tensor<2x8x8x4xf32>
// CHECK: %[[R:.+]] = nn.relu %[[N]] : tensor<2x8x8x4xf32>
// CHECK-NOT: nn.transpose
// CHECK: %[[Z:.+]] = nn.conv2d %[[R]], %arg3 {channels_last, {{.*}}} : tensor<2x8x8x4xf32>, tensor<4x4x3x3xf32> -> tensor<2x8x8x4xf32>
// CHECK: %[[OUT:.+]] = nn.transpose %[[Z]] {perm = array<i64: 0, 3, 1, 2>}
// CHECK: return %[[OUT]]
func.func @inference_batch_norm(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %c: tensor<4xf32>, %w2: tensor<4x4x3x3xf32>) -> tensor<2x4x8x8xf32> {
  %y = nn.conv2d %x, %w {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<2x4x8x8xf32>
  %n = nn.batch_norm %y, %c, %c, %c, %c {epsilon = 1.000000e-05 : f64} : tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32> -> tensor<2x4x8x8xf32>
  %r = nn.relu %n : tensor<2x4x8x8xf32> -> tensor<2x4x8x8xf32>
  %z = nn.conv2d %r, %w2 {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : tensor<2x4x8x8xf32>, tensor<4x4x3x3xf32> -> tensor<2x4x8x8xf32>
  return %z : tensor<2x4x8x8xf32>
}

// -----

// A global average pool's [N, 1, 1, C] result goes back to [N, C, 1, 1]
// through a reshape (a view), not a transpose.
// CHECK-LABEL: func.func @global_pool
// CHECK: %[[Y:.+]] = nn.conv2d %{{.+}}, %arg1 {channels_last, {{.*}}} : tensor<2x8x8x3xf32>, tensor<4x3x3x3xf32> -> tensor<2x8x8x4xf32>
// CHECK: %[[P:.+]] = nn.avg_pool2d %[[Y]] {{{.*}}channels_last{{.*}}} : tensor<2x8x8x4xf32> -> tensor<2x1x1x4xf32>
// CHECK: %[[R:.+]] = nn.reshape %[[P]] : tensor<2x1x1x4xf32> -> tensor<2x4x1x1xf32>
// CHECK: return %[[R]]
func.func @global_pool(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<2x4x1x1xf32> {
  %y = nn.conv2d %x, %w {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<2x4x8x8xf32>
  %p = nn.avg_pool2d %y {kernel = array<i64: 8, 8>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, ceil_mode = false, count_include_pad = false} : tensor<2x4x8x8xf32> -> tensor<2x4x1x1xf32>
  return %p : tensor<2x4x1x1xf32>
}
