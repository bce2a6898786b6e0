// RUN: ztc-opt %s | ztc-opt | FileCheck %s

// Round-trip of every nn op: parse, print, parse again. Each case also
// exercises result-type inference, which the verifier compares against the
// written result type.

// Broadcasting arithmetic: shapes align from the right, size-1 and missing
// dimensions stretch.
// CHECK-LABEL: func.func @arithmetic
// CHECK-SAME: (%[[A:.+]]: tensor<2x3xf32>, %[[B:.+]]: tensor<3xf32>, %[[I:.+]]: tensor<4x1xi64>, %[[J:.+]]: tensor<3xi64>)
func.func @arithmetic(%a: tensor<2x3xf32>, %b: tensor<3xf32>,
                      %i: tensor<4x1xi64>, %j: tensor<3xi64>) {
  // CHECK: nn.add %[[A]], %[[B]] : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  %0 = nn.add %a, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  // CHECK: nn.sub %[[I]], %[[J]] : tensor<4x1xi64>, tensor<3xi64> -> tensor<4x3xi64>
  %1 = nn.sub %i, %j : tensor<4x1xi64>, tensor<3xi64> -> tensor<4x3xi64>
  // CHECK: nn.mul %[[B]], %[[A]] : tensor<3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  %2 = nn.mul %b, %a : tensor<3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  // CHECK: nn.div %[[J]], %[[J]] : tensor<3xi64>, tensor<3xi64> -> tensor<3xi64>
  %3 = nn.div %j, %j : tensor<3xi64>, tensor<3xi64> -> tensor<3xi64>
  // CHECK: nn.pow %[[A]], %[[A]] : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  %4 = nn.pow %a, %a : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  // CHECK: nn.max %[[A]], %[[B]] : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  %5 = nn.max %a, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  // CHECK: nn.min %[[I]], %[[J]] : tensor<4x1xi64>, tensor<3xi64> -> tensor<4x3xi64>
  %6 = nn.min %i, %j : tensor<4x1xi64>, tensor<3xi64> -> tensor<4x3xi64>
  return
}

// Comparisons give i1 in the broadcast shape; logic ops take i1.
// CHECK-LABEL: func.func @compare_and_logic
// CHECK-SAME: (%[[A:.+]]: tensor<2x3xf32>, %[[B:.+]]: tensor<f32>, %[[M:.+]]: tensor<2x3xi1>, %[[N:.+]]: tensor<3xi1>)
func.func @compare_and_logic(%a: tensor<2x3xf32>, %b: tensor<f32>,
                             %m: tensor<2x3xi1>, %n: tensor<3xi1>) {
  // CHECK: nn.equal %[[M]], %[[N]] : tensor<2x3xi1>, tensor<3xi1> -> tensor<2x3xi1>
  %0 = nn.equal %m, %n : tensor<2x3xi1>, tensor<3xi1> -> tensor<2x3xi1>
  // CHECK: nn.less %[[A]], %[[B]] : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xi1>
  %1 = nn.less %a, %b : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xi1>
  // CHECK: nn.greater %[[B]], %[[A]] : tensor<f32>, tensor<2x3xf32> -> tensor<2x3xi1>
  %2 = nn.greater %b, %a : tensor<f32>, tensor<2x3xf32> -> tensor<2x3xi1>
  // CHECK: nn.and %[[M]], %[[N]] : tensor<2x3xi1>, tensor<3xi1> -> tensor<2x3xi1>
  %3 = nn.and %m, %n : tensor<2x3xi1>, tensor<3xi1> -> tensor<2x3xi1>
  // CHECK: nn.or %[[N]], %[[N]] : tensor<3xi1>, tensor<3xi1> -> tensor<3xi1>
  %4 = nn.or %n, %n : tensor<3xi1>, tensor<3xi1> -> tensor<3xi1>
  // CHECK: nn.not %[[M]] : tensor<2x3xi1> -> tensor<2x3xi1>
  %5 = nn.not %m : tensor<2x3xi1> -> tensor<2x3xi1>
  return
}

// Unary ops keep the operand type; leaky_relu and gelu carry attributes,
// gelu's default "none" is elided.
// CHECK-LABEL: func.func @unary
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32>, %[[I:.+]]: tensor<4xi32>)
func.func @unary(%x: tensor<2x3xf32>, %i: tensor<4xi32>) {
  // CHECK: nn.neg %[[I]] : tensor<4xi32> -> tensor<4xi32>
  %0 = nn.neg %i : tensor<4xi32> -> tensor<4xi32>
  // CHECK: nn.exp %[[X]] : tensor<2x3xf32> -> tensor<2x3xf32>
  %1 = nn.exp %x : tensor<2x3xf32> -> tensor<2x3xf32>
  // CHECK: nn.log %[[X]]
  %2 = nn.log %x : tensor<2x3xf32> -> tensor<2x3xf32>
  // CHECK: nn.tanh %[[X]]
  %3 = nn.tanh %x : tensor<2x3xf32> -> tensor<2x3xf32>
  // CHECK: nn.sigmoid %[[X]]
  %4 = nn.sigmoid %x : tensor<2x3xf32> -> tensor<2x3xf32>
  // CHECK: nn.relu %[[I]] : tensor<4xi32> -> tensor<4xi32>
  %5 = nn.relu %i : tensor<4xi32> -> tensor<4xi32>
  // CHECK: nn.sqrt %[[X]]
  %6 = nn.sqrt %x : tensor<2x3xf32> -> tensor<2x3xf32>
  // CHECK: nn.reciprocal %[[X]]
  %7 = nn.reciprocal %x : tensor<2x3xf32> -> tensor<2x3xf32>
  // CHECK: nn.erf %[[X]]
  %8 = nn.erf %x : tensor<2x3xf32> -> tensor<2x3xf32>
  // CHECK: nn.abs %[[I]] : tensor<4xi32> -> tensor<4xi32>
  %9 = nn.abs %i : tensor<4xi32> -> tensor<4xi32>
  // CHECK: nn.softplus %[[X]]
  %10 = nn.softplus %x : tensor<2x3xf32> -> tensor<2x3xf32>
  // CHECK: nn.leaky_relu %[[X]] {alpha = 2.000000e-01 : f64} : tensor<2x3xf32> -> tensor<2x3xf32>
  %11 = nn.leaky_relu %x {alpha = 0.2 : f64} : tensor<2x3xf32> -> tensor<2x3xf32>
  // CHECK: nn.gelu %[[X]] : tensor<2x3xf32> -> tensor<2x3xf32>
  %12 = nn.gelu %x : tensor<2x3xf32> -> tensor<2x3xf32>
  // CHECK: nn.gelu %[[X]] {approximate = "tanh"} : tensor<2x3xf32> -> tensor<2x3xf32>
  %13 = nn.gelu %x {approximate = "tanh"} : tensor<2x3xf32> -> tensor<2x3xf32>
  // CHECK: nn.silu %[[X]] : tensor<2x3xf32> -> tensor<2x3xf32>
  %14 = nn.silu %x : tensor<2x3xf32> -> tensor<2x3xf32>
  // CHECK: nn.hard_swish %[[X]] : tensor<2x3xf32> -> tensor<2x3xf32>
  %15 = nn.hard_swish %x : tensor<2x3xf32> -> tensor<2x3xf32>
  // CHECK: nn.hard_sigmoid %[[X]] : tensor<2x3xf32> -> tensor<2x3xf32>
  %16 = nn.hard_sigmoid %x : tensor<2x3xf32> -> tensor<2x3xf32>
  // CHECK: nn.hard_sigmoid %[[X]] {alpha = 1.000000e-01 : f64, beta = 2.500000e-01 : f64} : tensor<2x3xf32> -> tensor<2x3xf32>
  %17 = nn.hard_sigmoid %x {alpha = 0.1 : f64, beta = 0.25 : f64} : tensor<2x3xf32> -> tensor<2x3xf32>
  return
}

// Cast changes the element type only; where broadcasts three ways.
// CHECK-LABEL: func.func @cast_and_where
// CHECK-SAME: (%[[C:.+]]: tensor<2x1xi1>, %[[A:.+]]: tensor<3xbf16>, %[[B:.+]]: tensor<bf16>)
func.func @cast_and_where(%c: tensor<2x1xi1>, %a: tensor<3xbf16>,
                          %b: tensor<bf16>) {
  // CHECK: nn.cast %[[A]] : tensor<3xbf16> -> tensor<3xi8>
  %0 = nn.cast %a : tensor<3xbf16> -> tensor<3xi8>
  // CHECK: nn.where %[[C]], %[[A]], %[[B]] : tensor<2x1xi1>, tensor<3xbf16>, tensor<bf16> -> tensor<2x3xbf16>
  %1 = nn.where %c, %a, %b : tensor<2x1xi1>, tensor<3xbf16>, tensor<bf16> -> tensor<2x3xbf16>
  return
}

// Batched matmul broadcasts the batch dimensions.
// CHECK-LABEL: func.func @matmul
// CHECK-SAME: (%[[A:.+]]: tensor<4x1x8x16xf16>, %[[B:.+]]: tensor<3x16x32xf16>)
func.func @matmul(%a: tensor<4x1x8x16xf16>, %b: tensor<3x16x32xf16>)
    -> tensor<4x3x8x32xf16> {
  // CHECK: nn.matmul %[[A]], %[[B]] : tensor<4x1x8x16xf16>, tensor<3x16x32xf16> -> tensor<4x3x8x32xf16>
  %0 = nn.matmul %a, %b : tensor<4x1x8x16xf16>, tensor<3x16x32xf16> -> tensor<4x3x8x32xf16>
  return %0 : tensor<4x3x8x32xf16>
}

// Convolution with and without bias; the grouped, strided, dilated case has
// output (9 + 1 + 2 - 2*2 - 1) / 2 + 1 = 4 rows and (9 - 5) / 2 + 1 = 3
// columns.
// CHECK-LABEL: func.func @conv2d
// CHECK-SAME: (%[[X:.+]]: tensor<1x4x9x9xf32>, %[[W:.+]]: tensor<6x2x3x3xf32>, %[[B:.+]]: tensor<6xf32>)
func.func @conv2d(%x: tensor<1x4x9x9xf32>, %w: tensor<6x2x3x3xf32>,
                  %b: tensor<6xf32>) {
  // CHECK: nn.conv2d %[[X]], %[[W]], %[[B]] {dilations = array<i64: 2, 2>, group = 2 : i64, pads = array<i64: 1, 0, 2, 0>, strides = array<i64: 2, 2>} : tensor<1x4x9x9xf32>, tensor<6x2x3x3xf32>, tensor<6xf32> -> tensor<1x6x4x3xf32>
  %0 = nn.conv2d %x, %w, %b {strides = array<i64: 2, 2>,
         pads = array<i64: 1, 0, 2, 0>, dilations = array<i64: 2, 2>,
         group = 2 : i64}
         : tensor<1x4x9x9xf32>, tensor<6x2x3x3xf32>, tensor<6xf32>
         -> tensor<1x6x4x3xf32>
  // CHECK: nn.conv2d %[[X]], %[[W]] {{{.*}}} : tensor<1x4x9x9xf32>, tensor<6x2x3x3xf32> -> tensor<1x6x9x9xf32>
  %1 = nn.conv2d %x, %w {strides = array<i64: 1, 1>,
         pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>,
         group = 2 : i64}
         : tensor<1x4x9x9xf32>, tensor<6x2x3x3xf32> -> tensor<1x6x9x9xf32>
  return
}

// Normalizations keep x's type; layer_norm's bias is optional, and so is
// rms; layer_norm_backward gives x's, the scale's and the bias's gradients.
// CHECK-LABEL: func.func @normalization
// CHECK-SAME: (%[[X:.+]]: tensor<2x4x8xf32>, %[[C:.+]]: tensor<4xf32>, %[[S:.+]]: tensor<4x8xf32>, %{{.+}}: tensor<8xf32>)
func.func @normalization(%x: tensor<2x4x8xf32>, %c: tensor<4xf32>,
                         %s: tensor<4x8xf32>, %l: tensor<8xf32>) {
  // CHECK: nn.batch_norm %[[X]], %[[C]], %[[C]], %[[C]], %[[C]] {epsilon = 1.000000e-05 : f64} : tensor<2x4x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32> -> tensor<2x4x8xf32>
  %0 = nn.batch_norm %x, %c, %c, %c, %c {epsilon = 1.0e-5 : f64}
         : tensor<2x4x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>,
           tensor<4xf32> -> tensor<2x4x8xf32>
  // With channels_last the channels are the last dimension.
  // CHECK: nn.batch_norm %[[X]], {{.*}} {channels_last, epsilon = 1.000000e-05 : f64} : tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<2x4x8xf32>
  %cl = nn.batch_norm %x, %l, %l, %l, %l {epsilon = 1.0e-5 : f64, channels_last}
         : tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>,
           tensor<8xf32> -> tensor<2x4x8xf32>
  // CHECK: nn.layer_norm %[[X]], %[[S]], %[[S]] {axis = 1 : i64, epsilon = 1.000000e-05 : f64} : tensor<2x4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32> -> tensor<2x4x8xf32>
  %1 = nn.layer_norm %x, %s, %s {axis = 1 : i64, epsilon = 1.0e-5 : f64}
         : tensor<2x4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
         -> tensor<2x4x8xf32>
  // CHECK: nn.layer_norm %[[X]], %[[S]] {axis = 1 : i64, epsilon = 1.000000e-05 : f64} : tensor<2x4x8xf32>, tensor<4x8xf32> -> tensor<2x4x8xf32>
  %2 = nn.layer_norm %x, %s {axis = 1 : i64, epsilon = 1.0e-5 : f64}
         : tensor<2x4x8xf32>, tensor<4x8xf32> -> tensor<2x4x8xf32>
  // CHECK: %{{.+}}, %{{.+}}, %{{.+}} = nn.layer_norm_backward %[[X]], %[[S]], %[[X]] {axis = 1 : i64, epsilon = 1.000000e-05 : f64} : tensor<2x4x8xf32>, tensor<4x8xf32>, tensor<2x4x8xf32> -> tensor<2x4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
  %3:3 = nn.layer_norm_backward %x, %s, %x {axis = 1 : i64, epsilon = 1.0e-5 : f64}
         : tensor<2x4x8xf32>, tensor<4x8xf32>, tensor<2x4x8xf32>
         -> tensor<2x4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
  // Root-mean-square normalization, and its gradients.
  // CHECK: nn.layer_norm %[[X]], %[[S]] {axis = 1 : i64, epsilon = 9.9999999999999995E-7 : f64, rms} : tensor<2x4x8xf32>, tensor<4x8xf32> -> tensor<2x4x8xf32>
  %4 = nn.layer_norm %x, %s {axis = 1 : i64, epsilon = 1.0e-6 : f64, rms}
         : tensor<2x4x8xf32>, tensor<4x8xf32> -> tensor<2x4x8xf32>
  // CHECK: nn.layer_norm_backward %[[X]], %[[S]], %[[X]] {axis = 1 : i64, epsilon = 9.9999999999999995E-7 : f64, rms}
  %5:3 = nn.layer_norm_backward %x, %s, %x {axis = 1 : i64, epsilon = 1.0e-6 : f64, rms}
         : tensor<2x4x8xf32>, tensor<4x8xf32>, tensor<2x4x8xf32>
         -> tensor<2x4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
  // batch_norm_training gives the result and the batch's mean and variance;
  // its backward the gradients of x, the scale and the bias.
  // CHECK: %{{.+}}, %{{.+}}, %{{.+}} = nn.batch_norm_training %[[X]], %[[C]], %[[C]] {epsilon = 1.000000e-05 : f64} : tensor<2x4x8xf32>, tensor<4xf32>, tensor<4xf32> -> tensor<2x4x8xf32>, tensor<4xf32>, tensor<4xf32>
  %6:3 = nn.batch_norm_training %x, %c, %c {epsilon = 1.0e-5 : f64}
           : tensor<2x4x8xf32>, tensor<4xf32>, tensor<4xf32>
           -> tensor<2x4x8xf32>, tensor<4xf32>, tensor<4xf32>
  // CHECK: %{{.+}}, %{{.+}}, %{{.+}} = nn.batch_norm_training_backward %[[X]], %[[C]], %[[C]], %[[C]], %[[X]] {epsilon = 1.000000e-05 : f64} : tensor<2x4x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<2x4x8xf32> -> tensor<2x4x8xf32>, tensor<4xf32>, tensor<4xf32>
  %7:3 = nn.batch_norm_training_backward %x, %c, %c, %c, %x {epsilon = 1.0e-5 : f64}
           : tensor<2x4x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>,
             tensor<2x4x8xf32>
           -> tensor<2x4x8xf32>, tensor<4xf32>, tensor<4xf32>
  return
}

// Pooling: floor mode gives (6 + 0 - 3) / 2 + 1 = 2; ceil mode gives 3, the
// last window starting at 4 < 6.  With pads [1, 1] ceil mode would give
// ceil((5 + 2 - 2) / 2) + 1 = 4, but the fourth window would start at
// 6 >= 5 + 1 and is dropped.
// CHECK-LABEL: func.func @pooling
// CHECK-SAME: (%[[X:.+]]: tensor<1x2x6x5xf32>)
func.func @pooling(%x: tensor<1x2x6x5xf32>) {
  // CHECK: nn.max_pool2d %[[X]] {ceil_mode = false, dilations = array<i64: 1, 1>, kernel = array<i64: 3, 3>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : tensor<1x2x6x5xf32> -> tensor<1x2x2x2xf32>
  %0 = nn.max_pool2d %x {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>,
         pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>,
         ceil_mode = false} : tensor<1x2x6x5xf32> -> tensor<1x2x2x2xf32>
  // CHECK: nn.max_pool2d %[[X]] {{{.*}}ceil_mode = true{{.*}}} : tensor<1x2x6x5xf32> -> tensor<1x2x3x2xf32>
  %1 = nn.max_pool2d %x {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>,
         pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>,
         ceil_mode = true} : tensor<1x2x6x5xf32> -> tensor<1x2x3x2xf32>
  // CHECK: nn.avg_pool2d %[[X]] {ceil_mode = true, count_include_pad = false, kernel = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : tensor<1x2x6x5xf32> -> tensor<1x2x4x3xf32>
  %2 = nn.avg_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>,
         pads = array<i64: 1, 1, 1, 1>, ceil_mode = true,
         count_include_pad = false} : tensor<1x2x6x5xf32> -> tensor<1x2x4x3xf32>
  return
}

// With channels_last (ztc-channels-last) the same poolings read and write
// NHWC: [1, 6, 5, 2] to [1, 2, 2, 2] and [1, 4, 3, 2].
// CHECK-LABEL: func.func @pooling_channels_last
// CHECK-SAME: (%[[X:.+]]: tensor<1x6x5x2xf32>)
func.func @pooling_channels_last(%x: tensor<1x6x5x2xf32>) {
  // CHECK: nn.max_pool2d %[[X]] {ceil_mode = false, channels_last, {{.*}}} : tensor<1x6x5x2xf32> -> tensor<1x2x2x2xf32>
  %0 = nn.max_pool2d %x {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>,
         pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>,
         ceil_mode = false, channels_last} : tensor<1x6x5x2xf32> -> tensor<1x2x2x2xf32>
  // CHECK: nn.avg_pool2d %[[X]] {ceil_mode = true, channels_last, {{.*}}} : tensor<1x6x5x2xf32> -> tensor<1x4x3x2xf32>
  %1 = nn.avg_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>,
         pads = array<i64: 1, 1, 1, 1>, ceil_mode = true,
         count_include_pad = false, channels_last} : tensor<1x6x5x2xf32> -> tensor<1x4x3x2xf32>
  return
}

// Softmax-like ops keep the type.
// CHECK-LABEL: func.func @softmax
// CHECK-SAME: (%[[X:.+]]: tensor<8x10xf32>)
func.func @softmax(%x: tensor<8x10xf32>) {
  // CHECK: nn.softmax %[[X]] {axis = 1 : i64} : tensor<8x10xf32> -> tensor<8x10xf32>
  %0 = nn.softmax %x {axis = 1 : i64} : tensor<8x10xf32> -> tensor<8x10xf32>
  // CHECK: nn.log_softmax %[[X]] {axis = 0 : i64} : tensor<8x10xf32> -> tensor<8x10xf32>
  %1 = nn.log_softmax %x {axis = 0 : i64} : tensor<8x10xf32> -> tensor<8x10xf32>
  return
}

// Reductions keep reduced dimensions as 1 or drop them; empty axes reduce
// nothing.
// CHECK-LABEL: func.func @reductions
// CHECK-SAME: (%[[X:.+]]: tensor<4x8x16xf32>)
func.func @reductions(%x: tensor<4x8x16xf32>) {
  // CHECK: nn.reduce_sum %[[X]] {axes = array<i64: 1>, keepdims = true} : tensor<4x8x16xf32> -> tensor<4x1x16xf32>
  %0 = nn.reduce_sum %x {axes = array<i64: 1>, keepdims = true}
         : tensor<4x8x16xf32> -> tensor<4x1x16xf32>
  // CHECK: nn.reduce_mean %[[X]] {axes = array<i64: 0, 2>, keepdims = false} : tensor<4x8x16xf32> -> tensor<8xf32>
  %1 = nn.reduce_mean %x {axes = array<i64: 0, 2>, keepdims = false}
         : tensor<4x8x16xf32> -> tensor<8xf32>
  // CHECK: nn.reduce_max %[[X]] {axes = array<i64: 0, 1, 2>, keepdims = false} : tensor<4x8x16xf32> -> tensor<f32>
  %2 = nn.reduce_max %x {axes = array<i64: 0, 1, 2>, keepdims = false}
         : tensor<4x8x16xf32> -> tensor<f32>
  // CHECK: nn.reduce_sum %[[X]] {axes = array<i64>, keepdims = false} : tensor<4x8x16xf32> -> tensor<4x8x16xf32>
  %3 = nn.reduce_sum %x {axes = array<i64>, keepdims = false}
         : tensor<4x8x16xf32> -> tensor<4x8x16xf32>
  return
}

// Data movement: reshape, transpose, concat, slice (with a backward step),
// gather (numpy take), broadcast_to and trilu.
// CHECK-LABEL: func.func @data_movement
// CHECK-SAME: (%[[X:.+]]: tensor<2x3x4xf32>, %[[Y:.+]]: tensor<2x1x4xf32>, %[[I:.+]]: tensor<5x2xi32>, %[[V:.+]]: tensor<3xi64>)
func.func @data_movement(%x: tensor<2x3x4xf32>, %y: tensor<2x1x4xf32>,
                         %i: tensor<5x2xi32>, %v: tensor<3xi64>) {
  // CHECK: nn.reshape %[[X]] : tensor<2x3x4xf32> -> tensor<6x4xf32>
  %0 = nn.reshape %x : tensor<2x3x4xf32> -> tensor<6x4xf32>
  // CHECK: nn.transpose %[[X]] {perm = array<i64: 2, 0, 1>} : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
  %1 = nn.transpose %x {perm = array<i64: 2, 0, 1>}
         : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
  // CHECK: nn.concat %[[X]], %[[Y]], %[[X]] {axis = 1 : i64} : tensor<2x3x4xf32>, tensor<2x1x4xf32>, tensor<2x3x4xf32> -> tensor<2x7x4xf32>
  %2 = nn.concat %x, %y, %x {axis = 1 : i64}
         : tensor<2x3x4xf32>, tensor<2x1x4xf32>, tensor<2x3x4xf32>
         -> tensor<2x7x4xf32>
  // CHECK: nn.slice %[[X]] {sizes = array<i64: 1, 0, 2>, starts = array<i64: 1, 5, 3>, steps = array<i64: 1, 1, -2>} : tensor<2x3x4xf32> -> tensor<1x0x2xf32>
  %3 = nn.slice %x {starts = array<i64: 1, 5, 3>, sizes = array<i64: 1, 0, 2>,
         steps = array<i64: 1, 1, -2>} : tensor<2x3x4xf32> -> tensor<1x0x2xf32>
  // CHECK: nn.gather %[[X]], %[[I]] {axis = 1 : i64} : tensor<2x3x4xf32>, tensor<5x2xi32> -> tensor<2x5x2x4xf32>
  %4 = nn.gather %x, %i {axis = 1 : i64}
         : tensor<2x3x4xf32>, tensor<5x2xi32> -> tensor<2x5x2x4xf32>
  // CHECK: nn.broadcast_to %[[Y]] {shape = array<i64: 5, 2, 3, 4>} : tensor<2x1x4xf32> -> tensor<5x2x3x4xf32>
  %5 = nn.broadcast_to %y {shape = array<i64: 5, 2, 3, 4>}
         : tensor<2x1x4xf32> -> tensor<5x2x3x4xf32>
  // CHECK: nn.trilu %[[X]] {diagonal = -1 : i64, upper = true} : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  %6 = nn.trilu %x {upper = true, diagonal = -1 : i64}
         : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  // CHECK: nn.gather %[[V]], %[[I]] {axis = 0 : i64} : tensor<3xi64>, tensor<5x2xi32> -> tensor<5x2xi64>
  %7 = nn.gather %v, %i {axis = 0 : i64}
         : tensor<3xi64>, tensor<5x2xi32> -> tensor<5x2xi64>
  return
}

// rotate_half turns the last dimension's halves, either way.
// CHECK-LABEL: func.func @rotate_half
// CHECK-SAME: (%[[X:.+]]: tensor<2x4x8xbf16>)
func.func @rotate_half(%x: tensor<2x4x8xbf16>) {
  // CHECK: nn.rotate_half %[[X]] {inverse = false} : tensor<2x4x8xbf16> -> tensor<2x4x8xbf16>
  %0 = nn.rotate_half %x {inverse = false} : tensor<2x4x8xbf16> -> tensor<2x4x8xbf16>
  // CHECK: nn.rotate_half %[[X]] {inverse = true} : tensor<2x4x8xbf16> -> tensor<2x4x8xbf16>
  %1 = nn.rotate_half %x {inverse = true} : tensor<2x4x8xbf16> -> tensor<2x4x8xbf16>
  return
}

// rotary: x * cos + rotate_half(x) * sin, the tables broadcast to x (of
// lower rank, or with unit dimensions), either form.
// CHECK-LABEL: func.func @rotary
// CHECK-SAME: (%[[X:.+]]: tensor<2x4x8x16xbf16>, %[[C:.+]]: tensor<8x16xbf16>, %[[S:.+]]: tensor<8x16xbf16>, %[[U:.+]]: tensor<2x8x1x16xbf16>)
func.func @rotary(%x: tensor<2x4x8x16xbf16>, %c: tensor<8x16xbf16>, %s: tensor<8x16xbf16>, %u: tensor<2x8x1x16xbf16>) {
  // CHECK: nn.rotary %[[X]], %[[C]], %[[S]] {inverse = false} : tensor<2x4x8x16xbf16>, tensor<8x16xbf16>, tensor<8x16xbf16> -> tensor<2x4x8x16xbf16>
  %0 = nn.rotary %x, %c, %s {inverse = false} : tensor<2x4x8x16xbf16>, tensor<8x16xbf16>, tensor<8x16xbf16> -> tensor<2x4x8x16xbf16>
  %y = nn.transpose %x {perm = array<i64: 0, 2, 1, 3>} : tensor<2x4x8x16xbf16> -> tensor<2x8x4x16xbf16>
  // CHECK: nn.rotary %{{.+}}, %[[U]], %[[U]] {inverse = true} : tensor<2x8x4x16xbf16>, tensor<2x8x1x16xbf16>, tensor<2x8x1x16xbf16> -> tensor<2x8x4x16xbf16>
  %1 = nn.rotary %y, %u, %u {inverse = true} : tensor<2x8x4x16xbf16>, tensor<2x8x1x16xbf16>, tensor<2x8x1x16xbf16> -> tensor<2x8x4x16xbf16>
  return
}

// NLL loss: "none" keeps the target shape, "sum" and "mean" give a scalar;
// the class weight and ignore_index are optional.
// CHECK-LABEL: func.func @nll_loss
// CHECK-SAME: (%[[LP:.+]]: tensor<8x10x3xf32>, %[[T:.+]]: tensor<8x3xi64>, %[[W:.+]]: tensor<10xf32>)
func.func @nll_loss(%lp: tensor<8x10x3xf32>, %t: tensor<8x3xi64>,
                    %w: tensor<10xf32>) {
  // CHECK: nn.nll_loss %[[LP]], %[[T]], %[[W]] {ignore_index = -100 : i64, reduction = "none"} : tensor<8x10x3xf32>, tensor<8x3xi64>, tensor<10xf32> -> tensor<8x3xf32>
  %0 = nn.nll_loss %lp, %t, %w {reduction = "none", ignore_index = -100 : i64}
         : tensor<8x10x3xf32>, tensor<8x3xi64>, tensor<10xf32>
         -> tensor<8x3xf32>
  // CHECK: nn.nll_loss %[[LP]], %[[T]] : tensor<8x10x3xf32>, tensor<8x3xi64> -> tensor<f32>
  %1 = nn.nll_loss %lp, %t : tensor<8x10x3xf32>, tensor<8x3xi64> -> tensor<f32>
  // CHECK: nn.nll_loss %[[LP]], %[[T]] {reduction = "sum"} : tensor<8x10x3xf32>, tensor<8x3xi64> -> tensor<f32>
  %2 = nn.nll_loss %lp, %t {reduction = "sum"}
         : tensor<8x10x3xf32>, tensor<8x3xi64> -> tensor<f32>
  return
}

// Random numbers: the key is a rank-0 i64, the result any static f32 or f64
// shape (rank 0 included); the stream is a signed 64-bit attribute.
// CHECK-LABEL: func.func @random_uniform
// CHECK-SAME: (%[[K:.+]]: tensor<i64>)
func.func @random_uniform(%key: tensor<i64>) {
  // CHECK: nn.random_uniform %[[K]] {stream = 7 : i64} : tensor<i64> -> tensor<8x16xf32>
  %0 = nn.random_uniform %key {stream = 7 : i64}
         : tensor<i64> -> tensor<8x16xf32>
  // CHECK: nn.random_uniform %[[K]] {stream = -3750763034362895579 : i64} : tensor<i64> -> tensor<f64>
  %1 = nn.random_uniform %key {stream = -3750763034362895579 : i64}
         : tensor<i64> -> tensor<f64>
  return
}
