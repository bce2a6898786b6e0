// RUN: ztc-opt %s --ztc-autodiff | FileCheck %s
// RUN: ztc-opt %s --ztc-autodiff --ztc-lower-to-kernel-pipeline | FileCheck %s --check-prefix=LOWER --implicit-check-not="= nn."

// Gradients that need the backward ops: convolution, pooling, slices and
// gathers, and the backward ops' own VJPs (second order). The first RUN
// checks which ops the gradients use; the second that they lower to the
// runtime kernels of the same names. autodiff-numeric.test checks their
// values against finite differences (the `gradient-check` lines give it
// integer inputs).

// Convolution (strided, padded, dilated, grouped, with bias) and pooling
// (max with padding, average in ceil mode with and without the padding in
// the divisor).
// CHECK-LABEL: func.func @conv_pool
// LOWER-LABEL: func.func @conv_pool
// LOWER-SAME: kernel.arena_bytes
// CHECK-DAG: nn.avg_pool2d_backward %{{.+}} {ceil_mode = true, count_include_pad = false, input_size = array<i64: 4, 3>
// CHECK-DAG: nn.avg_pool2d_backward %{{.+}} {ceil_mode = false, count_include_pad = true, input_size = array<i64: 4, 3>
// CHECK-DAG: nn.max_pool2d_backward
// CHECK-DAG: nn.conv2d_backward_data %{{.+}} {dilations = array<i64: 2, 2>, group = 2 : i64, input_size = array<i64: 9, 9>, pads = array<i64: 1, 0, 2, 0>, strides = array<i64: 2, 2>} : tensor<1x6x4x3xf32>, tensor<6x2x3x3xf32> -> tensor<1x4x9x9xf32>
// CHECK-DAG: nn.conv2d_backward_filter %{{.+}} {dilations = array<i64: 2, 2>, group = 2 : i64, kernel = array<i64: 3, 3>, pads = array<i64: 1, 0, 2, 0>, strides = array<i64: 2, 2>} : tensor<1x4x9x9xf32>, tensor<1x6x4x3xf32> -> tensor<6x2x3x3xf32>
// CHECK: return
func.func @conv_pool(%x: tensor<1x4x9x9xf32> {train.binding = #train.binding<param "x">},
                     %w: tensor<6x2x3x3xf32> {train.binding = #train.binding<param "w">},
                     %b: tensor<6xf32> {train.binding = #train.binding<param "b">}) -> tensor<f32> {
  %0 = nn.conv2d %x, %w, %b {strides = array<i64: 2, 2>, pads = array<i64: 1, 0, 2, 0>,
         dilations = array<i64: 2, 2>, group = 2 : i64}
         : tensor<1x4x9x9xf32>, tensor<6x2x3x3xf32>, tensor<6xf32> -> tensor<1x6x4x3xf32>
  %1 = nn.max_pool2d %0 {kernel = array<i64: 2, 2>, strides = array<i64: 1, 1>,
         pads = array<i64: 0, 0, 1, 1>, dilations = array<i64: 1, 1>, ceil_mode = false}
         : tensor<1x6x4x3xf32> -> tensor<1x6x4x3xf32>
  %2 = nn.avg_pool2d %1 {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>,
         pads = array<i64: 1, 1, 1, 1>, ceil_mode = true, count_include_pad = false}
         : tensor<1x6x4x3xf32> -> tensor<1x6x3x2xf32>
  %3 = nn.avg_pool2d %1 {kernel = array<i64: 3, 2>, strides = array<i64: 1, 2>,
         pads = array<i64: 1, 0, 1, 1>, ceil_mode = false, count_include_pad = true}
         : tensor<1x6x4x3xf32> -> tensor<1x6x4x2xf32>
  %4 = nn.mul %2, %2 : tensor<1x6x3x2xf32>, tensor<1x6x3x2xf32> -> tensor<1x6x3x2xf32>
  %5 = nn.mul %3, %3 : tensor<1x6x4x2xf32>, tensor<1x6x4x2xf32> -> tensor<1x6x4x2xf32>
  %l4 = nn.reduce_sum %4 {axes = array<i64: 0, 1, 2, 3>, keepdims = false} : tensor<1x6x3x2xf32> -> tensor<f32>
  %l5 = nn.reduce_sum %5 {axes = array<i64: 0, 1, 2, 3>, keepdims = false} : tensor<1x6x4x2xf32> -> tensor<f32>
  %l = nn.add %l4, %l5 : tensor<f32>, tensor<f32> -> tensor<f32>
  return %l : tensor<f32>
}

// Slices (strided, backwards) and gathers (repeated and negative indices,
// along either axis).
// CHECK-LABEL: func.func @slice_gather
// LOWER-LABEL: func.func @slice_gather
// LOWER-SAME: kernel.arena_bytes
// CHECK-DAG: nn.insert_slice %{{.+}}, %{{.+}} {starts = array<i64: 1, 7>, steps = array<i64: 2, -2>} : tensor<4x8xf32>, tensor<2x4xf32> -> tensor<4x8xf32>
// CHECK-DAG: nn.scatter_add %{{.+}}, %{{.+}}, %{{.+}} {axis = 0 : i64} : tensor<5x3xf32>, tensor<2x3xi64>, tensor<2x3x3xf32> -> tensor<5x3xf32>
// CHECK-DAG: nn.scatter_add %{{.+}}, %{{.+}}, %{{.+}} {axis = 1 : i64} : tensor<5x3xf32>, tensor<2xi32>, tensor<5x2xf32> -> tensor<5x3xf32>
// CHECK: return
func.func @slice_gather(%x: tensor<4x8xf32> {train.binding = #train.binding<param "x">},
                        %e: tensor<5x3xf32> {train.binding = #train.binding<param "e">},
                        %i: tensor<2x3xi64> {train.binding = #train.binding<input "i">},
                        %j: tensor<2xi32> {train.binding = #train.binding<input "j">}) -> tensor<f32> {
  %0 = nn.slice %x {starts = array<i64: 1, 7>, sizes = array<i64: 2, 4>, steps = array<i64: 2, -2>}
         : tensor<4x8xf32> -> tensor<2x4xf32>
  %g = nn.gather %e, %i {axis = 0 : i64} : tensor<5x3xf32>, tensor<2x3xi64> -> tensor<2x3x3xf32>
  %h = nn.gather %e, %j {axis = 1 : i64} : tensor<5x3xf32>, tensor<2xi32> -> tensor<5x2xf32>
  %hh = nn.reshape %h : tensor<5x2xf32> -> tensor<10xf32>
  %hs = nn.slice %hh {starts = array<i64: 0>, sizes = array<i64: 3>, steps = array<i64: 1>} : tensor<10xf32> -> tensor<3xf32>
  %1 = nn.mul %g, %hs : tensor<2x3x3xf32>, tensor<3xf32> -> tensor<2x3x3xf32>
  %2 = nn.mul %0, %0 : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
  %3 = nn.mul %1, %1 : tensor<2x3x3xf32>, tensor<2x3x3xf32> -> tensor<2x3x3xf32>
  %l2 = nn.reduce_sum %2 {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x4xf32> -> tensor<f32>
  %l3 = nn.reduce_sum %3 {axes = array<i64: 0, 1, 2>, keepdims = false} : tensor<2x3x3xf32> -> tensor<f32>
  %l = nn.add %l2, %l3 : tensor<f32>, tensor<f32> -> tensor<f32>
  return %l : tensor<f32>
}
// gradient-check @slice_gather i = [[0, 4, -1], [2, 0, 0]]
// gradient-check @slice_gather j = [2, -3]

// Backward ops as forward ops: their own VJPs (second order) are forward
// ops and the other backward ops.
// CHECK-LABEL: func.func @second_order
// LOWER-LABEL: func.func @second_order
// LOWER-SAME: kernel.arena_bytes
// CHECK-DAG: nn.conv2d %{{.+}}, %{{.+}} {dilations = array<i64: 1, 1>, group = 2 : i64, pads = array<i64: 1, 1, 0, 0>, strides = array<i64: 1, 1>} : tensor<1x2x3x3xf32>, tensor<4x1x2x2xf32> -> tensor<1x4x3x3xf32>
// CHECK-DAG: nn.conv2d_backward_data
// CHECK-DAG: nn.conv2d_backward_filter
// CHECK-DAG: nn.avg_pool2d %{{.+}} {ceil_mode = false, count_include_pad = false, kernel = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : tensor<1x4x4x4xf32> -> tensor<1x4x3x3xf32>
// CHECK-DAG: nn.gather %{{.+}}, %{{.+}} {axis = 0 : i64} : tensor<5x3xf32>, tensor<4xi64> -> tensor<4x3xf32>
// CHECK-DAG: nn.slice %{{.+}} {sizes = array<i64: 2, 2>, starts = array<i64: 4, 0>, steps = array<i64: -2, 2>} : tensor<5x3xf32> -> tensor<2x2xf32>
// CHECK: return
func.func @second_order(%dy: tensor<1x4x3x3xf32> {train.binding = #train.binding<param "dy">},
                        %w: tensor<4x1x2x2xf32> {train.binding = #train.binding<param "w">},
                        %x: tensor<1x2x3x3xf32> {train.binding = #train.binding<param "x">},
                        %d: tensor<5x3xf32> {train.binding = #train.binding<param "d">},
                        %u: tensor<4x3xf32> {train.binding = #train.binding<param "u">},
                        %i: tensor<4xi64> {train.binding = #train.binding<input "i">},
                        %s: tensor<2x2xf32> {train.binding = #train.binding<param "s">},
                        %c: tensor<1x2x3x3xf32> {train.binding = #train.binding<input "c">}) -> tensor<f32> {
  %0 = nn.conv2d_backward_data %dy, %w {input_size = array<i64: 3, 3>,
         strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 0, 0>,
         dilations = array<i64: 1, 1>, group = 2 : i64}
         : tensor<1x4x3x3xf32>, tensor<4x1x2x2xf32> -> tensor<1x2x3x3xf32>
  %1 = nn.conv2d_backward_filter %x, %dy {kernel = array<i64: 2, 2>,
         strides = array<i64: 1, 1>, pads = array<i64: 1, 1, 0, 0>,
         dilations = array<i64: 1, 1>, group = 2 : i64}
         : tensor<1x2x3x3xf32>, tensor<1x4x3x3xf32> -> tensor<4x1x2x2xf32>
  %2 = nn.avg_pool2d_backward %dy {input_size = array<i64: 4, 4>,
         kernel = array<i64: 2, 2>, strides = array<i64: 1, 1>,
         pads = array<i64: 0, 0, 0, 0>, ceil_mode = false, count_include_pad = false}
         : tensor<1x4x3x3xf32> -> tensor<1x4x4x4xf32>
  %3 = nn.scatter_add %d, %i, %u {axis = 0 : i64}
         : tensor<5x3xf32>, tensor<4xi64>, tensor<4x3xf32> -> tensor<5x3xf32>
  %4 = nn.insert_slice %3, %s {starts = array<i64: 4, 0>, steps = array<i64: -2, 2>}
         : tensor<5x3xf32>, tensor<2x2xf32> -> tensor<5x3xf32>
  %m0 = nn.mul %0, %c : tensor<1x2x3x3xf32>, tensor<1x2x3x3xf32> -> tensor<1x2x3x3xf32>
  %m1 = nn.mul %1, %1 : tensor<4x1x2x2xf32>, tensor<4x1x2x2xf32> -> tensor<4x1x2x2xf32>
  %m2 = nn.mul %2, %2 : tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32> -> tensor<1x4x4x4xf32>
  %m4 = nn.mul %4, %4 : tensor<5x3xf32>, tensor<5x3xf32> -> tensor<5x3xf32>
  %l0 = nn.reduce_sum %m0 {axes = array<i64: 0, 1, 2, 3>, keepdims = false} : tensor<1x2x3x3xf32> -> tensor<f32>
  %l1 = nn.reduce_sum %m1 {axes = array<i64: 0, 1, 2, 3>, keepdims = false} : tensor<4x1x2x2xf32> -> tensor<f32>
  %l2 = nn.reduce_sum %m2 {axes = array<i64: 0, 1, 2, 3>, keepdims = false} : tensor<1x4x4x4xf32> -> tensor<f32>
  %l4 = nn.reduce_sum %m4 {axes = array<i64: 0, 1>, keepdims = false} : tensor<5x3xf32> -> tensor<f32>
  %s01 = nn.add %l0, %l1 : tensor<f32>, tensor<f32> -> tensor<f32>
  %s012 = nn.add %s01, %l2 : tensor<f32>, tensor<f32> -> tensor<f32>
  %l = nn.add %s012, %l4 : tensor<f32>, tensor<f32> -> tensor<f32>
  return %l : tensor<f32>
}
// gradient-check @second_order i = [1, 3, 1, -1]
