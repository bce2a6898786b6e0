// RUN: ztc-opt %s | ztc-opt | FileCheck %s

// Round-trip of the backward ops ztc-autodiff builds: parse, print, parse
// again. Each case also exercises result-type inference, which recomputes the
// forward op's result shape and checks it against grad_output.

// The input size is an attribute: with stride 2, inputs of height 8 and 9
// give the same 4-row output.
// CHECK-LABEL: func.func @conv2d_backward_data
// CHECK-SAME: (%[[DY:.+]]: tensor<1x6x4x3xf32>, %[[W:.+]]: tensor<6x2x3x3xf32>)
func.func @conv2d_backward_data(%dy: tensor<1x6x4x3xf32>,
                                %w: tensor<6x2x3x3xf32>) {
  // CHECK: nn.conv2d_backward_data %[[DY]], %[[W]] {dilations = array<i64: 2, 2>, group = 2 : i64, input_size = array<i64: 9, 9>, pads = array<i64: 1, 0, 2, 0>, strides = array<i64: 2, 2>} : tensor<1x6x4x3xf32>, tensor<6x2x3x3xf32> -> tensor<1x4x9x9xf32>
  %0 = nn.conv2d_backward_data %dy, %w {input_size = array<i64: 9, 9>,
         strides = array<i64: 2, 2>, pads = array<i64: 1, 0, 2, 0>,
         dilations = array<i64: 2, 2>, group = 2 : i64}
         : tensor<1x6x4x3xf32>, tensor<6x2x3x3xf32> -> tensor<1x4x9x9xf32>
  // CHECK: nn.conv2d_backward_data %[[DY]], %[[W]] {{{.*}}} : tensor<1x6x4x3xf32>, tensor<6x2x3x3xf32> -> tensor<1x4x8x9xf32>
  %1 = nn.conv2d_backward_data %dy, %w {input_size = array<i64: 8, 9>,
         strides = array<i64: 2, 2>, pads = array<i64: 1, 0, 2, 0>,
         dilations = array<i64: 2, 2>, group = 2 : i64}
         : tensor<1x6x4x3xf32>, tensor<6x2x3x3xf32> -> tensor<1x4x8x9xf32>
  return
}

// The filter gradient has the weight's shape [O, C / group, kH, kW].
// CHECK-LABEL: func.func @conv2d_backward_filter
// CHECK-SAME: (%[[X:.+]]: tensor<1x4x9x9xf32>, %[[DY:.+]]: tensor<1x6x4x3xf32>)
func.func @conv2d_backward_filter(%x: tensor<1x4x9x9xf32>,
                                  %dy: tensor<1x6x4x3xf32>) {
  // CHECK: nn.conv2d_backward_filter %[[X]], %[[DY]] {dilations = array<i64: 2, 2>, group = 2 : i64, kernel = array<i64: 3, 3>, pads = array<i64: 1, 0, 2, 0>, strides = array<i64: 2, 2>} : tensor<1x4x9x9xf32>, tensor<1x6x4x3xf32> -> tensor<6x2x3x3xf32>
  %0 = nn.conv2d_backward_filter %x, %dy {kernel = array<i64: 3, 3>,
         strides = array<i64: 2, 2>, pads = array<i64: 1, 0, 2, 0>,
         dilations = array<i64: 2, 2>, group = 2 : i64}
         : tensor<1x4x9x9xf32>, tensor<1x6x4x3xf32> -> tensor<6x2x3x3xf32>
  return
}

// Pooling gradients; ceil_mode is part of the forward shape they check.
// CHECK-LABEL: func.func @pool_backward
// CHECK-SAME: (%[[X:.+]]: tensor<1x2x6x5xf32>, %[[DY:.+]]: tensor<1x2x3x2xf32>, %[[DA:.+]]: tensor<1x8x3x3xbf16>)
func.func @pool_backward(%x: tensor<1x2x6x5xf32>, %dy: tensor<1x2x3x2xf32>,
                         %da: tensor<1x8x3x3xbf16>) {
  // CHECK: nn.max_pool2d_backward %[[X]], %[[DY]] {ceil_mode = true, dilations = array<i64: 1, 1>, kernel = array<i64: 3, 3>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : tensor<1x2x6x5xf32>, tensor<1x2x3x2xf32> -> tensor<1x2x6x5xf32>
  %0 = nn.max_pool2d_backward %x, %dy {kernel = array<i64: 3, 3>,
         strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>,
         dilations = array<i64: 1, 1>, ceil_mode = true}
         : tensor<1x2x6x5xf32>, tensor<1x2x3x2xf32> -> tensor<1x2x6x5xf32>
  // CHECK: nn.avg_pool2d_backward %[[DA]] {ceil_mode = false, count_include_pad = false, input_size = array<i64: 7, 7>, kernel = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : tensor<1x8x3x3xbf16> -> tensor<1x8x7x7xbf16>
  %1 = nn.avg_pool2d_backward %da {input_size = array<i64: 7, 7>,
         kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>,
         pads = array<i64: 0, 0, 0, 0>, ceil_mode = false,
         count_include_pad = false}
         : tensor<1x8x3x3xbf16> -> tensor<1x8x7x7xbf16>
  return
}

// With channels_last every operand and the result are NHWC.
// CHECK-LABEL: func.func @pool_backward_channels_last
// CHECK: nn.max_pool2d_backward %{{.+}}, %{{.+}} {ceil_mode = true, channels_last, {{.*}}} : tensor<1x6x5x2xf32>, tensor<1x3x2x2xf32> -> tensor<1x6x5x2xf32>
// CHECK: nn.avg_pool2d_backward %{{.+}} {ceil_mode = false, channels_last, {{.*}}} : tensor<1x3x3x8xbf16> -> tensor<1x7x7x8xbf16>
func.func @pool_backward_channels_last(%x: tensor<1x6x5x2xf32>,
                                       %dy: tensor<1x3x2x2xf32>,
                                       %da: tensor<1x3x3x8xbf16>) {
  %0 = nn.max_pool2d_backward %x, %dy {kernel = array<i64: 3, 3>,
         strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>,
         dilations = array<i64: 1, 1>, ceil_mode = true, channels_last}
         : tensor<1x6x5x2xf32>, tensor<1x3x2x2xf32> -> tensor<1x6x5x2xf32>
  %1 = nn.avg_pool2d_backward %da {input_size = array<i64: 7, 7>,
         kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>,
         pads = array<i64: 0, 0, 0, 0>, ceil_mode = false,
         count_include_pad = false, channels_last}
         : tensor<1x3x3x8xbf16> -> tensor<1x7x7x8xbf16>
  return
}

// scatter_add takes updates of gather's result shape, along any axis.
// CHECK-LABEL: func.func @scatter_add
// CHECK-SAME: (%[[T:.+]]: tensor<100x16xf32>, %[[I:.+]]: tensor<4x8xi64>, %[[U:.+]]: tensor<4x8x16xf32>, %[[D:.+]]: tensor<2x5x3xi32>, %[[J:.+]]: tensor<4xi32>, %[[V:.+]]: tensor<2x4x3xi32>)
func.func @scatter_add(%table: tensor<100x16xf32>, %ids: tensor<4x8xi64>,
                       %dy: tensor<4x8x16xf32>, %d: tensor<2x5x3xi32>,
                       %j: tensor<4xi32>, %v: tensor<2x4x3xi32>) {
  // CHECK: nn.scatter_add %[[T]], %[[I]], %[[U]] {axis = 0 : i64} : tensor<100x16xf32>, tensor<4x8xi64>, tensor<4x8x16xf32> -> tensor<100x16xf32>
  %0 = nn.scatter_add %table, %ids, %dy {axis = 0 : i64}
         : tensor<100x16xf32>, tensor<4x8xi64>, tensor<4x8x16xf32>
         -> tensor<100x16xf32>
  // CHECK: nn.scatter_add %[[D]], %[[J]], %[[V]] {axis = 1 : i64} : tensor<2x5x3xi32>, tensor<4xi32>, tensor<2x4x3xi32> -> tensor<2x5x3xi32>
  %1 = nn.scatter_add %d, %j, %v {axis = 1 : i64}
         : tensor<2x5x3xi32>, tensor<4xi32>, tensor<2x4x3xi32>
         -> tensor<2x5x3xi32>
  return
}

// insert_slice writes through the same strided window nn.slice reads,
// negative steps included.
// CHECK-LABEL: func.func @insert_slice
// CHECK-SAME: (%[[D:.+]]: tensor<4x8xf32>, %[[S:.+]]: tensor<4x4xf32>)
func.func @insert_slice(%dest: tensor<4x8xf32>, %src: tensor<4x4xf32>) {
  // CHECK: nn.insert_slice %[[D]], %[[S]] {starts = array<i64: 0, 7>, steps = array<i64: 1, -2>} : tensor<4x8xf32>, tensor<4x4xf32> -> tensor<4x8xf32>
  %0 = nn.insert_slice %dest, %src {starts = array<i64: 0, 7>,
         steps = array<i64: 1, -2>}
         : tensor<4x8xf32>, tensor<4x4xf32> -> tensor<4x8xf32>
  return
}
