// RUN: ztc-opt %s -split-input-file -verify-diagnostics

// Every diagnostic of the backward ops, one case each. Their inference
// rebuilds the forward op's result type from the attributes, so a gradient
// that does not fit its forward op is rejected.

// grad_output is [N, O, Ho, Wo].
func.func @data_grad_rank(%dy: tensor<6x4x3xf32>, %w: tensor<6x2x3x3xf32>) {
  // expected-error @+1 {{'nn.conv2d_backward_data' op expects grad_output of rank 4 ([N, O, Ho, Wo]), got 'tensor<6x4x3xf32>'}}
  %0 = nn.conv2d_backward_data %dy, %w {input_size = array<i64: 9, 9>,
         strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>,
         dilations = array<i64: 1, 1>, group = 1 : i64}
         : tensor<6x4x3xf32>, tensor<6x2x3x3xf32> -> tensor<1x2x9x9xf32>
  return
}

// -----

// The weight has grad_output's element type.
func.func @data_grad_element_type(%dy: tensor<1x6x7x7xf32>,
                                  %w: tensor<6x2x3x3xf16>) {
  // expected-error @+1 {{'nn.conv2d_backward_data' op expects weight element type 'f32', got 'tensor<6x2x3x3xf16>'}}
  %0 = nn.conv2d_backward_data %dy, %w {input_size = array<i64: 9, 9>,
         strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>,
         dilations = array<i64: 1, 1>, group = 1 : i64}
         : tensor<1x6x7x7xf32>, tensor<6x2x3x3xf16> -> tensor<1x2x9x9xf32>
  return
}

// -----

// input_size is [H, W].
func.func @data_grad_input_size(%dy: tensor<1x6x7x7xf32>,
                                %w: tensor<6x2x3x3xf32>) {
  // expected-error @+1 {{'nn.conv2d_backward_data' op expects 'input_size' to have 2 entries, got 4}}
  %0 = nn.conv2d_backward_data %dy, %w {input_size = array<i64: 1, 2, 9, 9>,
         strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>,
         dilations = array<i64: 1, 1>, group = 1 : i64}
         : tensor<1x6x7x7xf32>, tensor<6x2x3x3xf32> -> tensor<1x2x9x9xf32>
  return
}

// -----

// The conv attributes are checked as nn.conv2d checks them.
func.func @data_grad_group(%dy: tensor<1x6x7x7xf32>, %w: tensor<6x2x3x3xf32>) {
  // expected-error @+1 {{'nn.conv2d_backward_data' op expects group at least 1, got 0}}
  %0 = nn.conv2d_backward_data %dy, %w {input_size = array<i64: 9, 9>,
         strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>,
         dilations = array<i64: 1, 1>, group = 0 : i64}
         : tensor<1x6x7x7xf32>, tensor<6x2x3x3xf32> -> tensor<1x2x9x9xf32>
  return
}

// -----

// The weight's output channels split evenly into groups.
func.func @data_grad_groups_split(%dy: tensor<1x6x7x7xf32>,
                                  %w: tensor<6x2x3x3xf32>) {
  // expected-error @+1 {{'nn.conv2d_backward_data' op output channels (6) must be divisible by group (4)}}
  %0 = nn.conv2d_backward_data %dy, %w {input_size = array<i64: 9, 9>,
         strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>,
         dilations = array<i64: 1, 1>, group = 4 : i64}
         : tensor<1x6x7x7xf32>, tensor<6x2x3x3xf32> -> tensor<1x8x9x9xf32>
  return
}

// -----

// The forward input must hold the kernel.
func.func @data_grad_small_input(%dy: tensor<1x6x7x7xf32>,
                                 %w: tensor<6x2x3x3xf32>) {
  // expected-error @+1 {{'nn.conv2d_backward_data' op padded input height (2) is smaller than the dilated kernel (3)}}
  %0 = nn.conv2d_backward_data %dy, %w {input_size = array<i64: 2, 9>,
         strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>,
         dilations = array<i64: 1, 1>, group = 1 : i64}
         : tensor<1x6x7x7xf32>, tensor<6x2x3x3xf32> -> tensor<1x2x2x9xf32>
  return
}

// -----

// grad_output must be what the forward conv of that input size returns.
func.func @data_grad_mismatch(%dy: tensor<1x6x7x7xf32>,
                              %w: tensor<6x2x3x3xf32>) {
  // expected-error @+1 {{'nn.conv2d_backward_data' op expects grad_output of type 'tensor<1x6x8x7xf32>' (the forward result), got 'tensor<1x6x7x7xf32>'}}
  %0 = nn.conv2d_backward_data %dy, %w {input_size = array<i64: 10, 9>,
         strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>,
         dilations = array<i64: 1, 1>, group = 1 : i64}
         : tensor<1x6x7x7xf32>, tensor<6x2x3x3xf32> -> tensor<1x2x10x9xf32>
  return
}

// -----

// Both channel counts split evenly into groups.
func.func @filter_grad_groups(%x: tensor<1x3x9x9xf32>,
                              %dy: tensor<1x6x7x7xf32>) {
  // expected-error @+1 {{'nn.conv2d_backward_filter' op input channels (3) and output channels (6) must be divisible by group (2)}}
  %0 = nn.conv2d_backward_filter %x, %dy {kernel = array<i64: 3, 3>,
         strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>,
         dilations = array<i64: 1, 1>, group = 2 : i64}
         : tensor<1x3x9x9xf32>, tensor<1x6x7x7xf32> -> tensor<6x1x3x3xf32>
  return
}

// -----

// kernel is [kH, kW], each at least 1.
func.func @filter_grad_kernel(%x: tensor<1x3x9x9xf32>,
                              %dy: tensor<1x6x7x7xf32>) {
  // expected-error @+1 {{'nn.conv2d_backward_filter' op expects 'kernel' entries to be at least 1, got [0, 3]}}
  %0 = nn.conv2d_backward_filter %x, %dy {kernel = array<i64: 0, 3>,
         strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>,
         dilations = array<i64: 1, 1>, group = 1 : i64}
         : tensor<1x3x9x9xf32>, tensor<1x6x7x7xf32> -> tensor<6x3x0x3xf32>
  return
}

// -----

// grad_output must be the forward conv's result for that kernel.
func.func @filter_grad_mismatch(%x: tensor<1x3x9x9xf32>,
                                %dy: tensor<1x6x7x7xf32>) {
  // expected-error @+1 {{'nn.conv2d_backward_filter' op expects grad_output of type 'tensor<1x6x5x5xf32>' (the forward result), got 'tensor<1x6x7x7xf32>'}}
  %0 = nn.conv2d_backward_filter %x, %dy {kernel = array<i64: 5, 5>,
         strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>,
         dilations = array<i64: 1, 1>, group = 1 : i64}
         : tensor<1x3x9x9xf32>, tensor<1x6x7x7xf32> -> tensor<6x3x5x5xf32>
  return
}

// -----

// Pooling gradients are floating point.
func.func @max_pool_grad_integer(%x: tensor<1x2x6x6xi32>,
                                 %dy: tensor<1x2x3x3xi32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 32-bit float or 64-bit float or 16-bit float or bfloat16 type values}}
  %0 = nn.max_pool2d_backward %x, %dy {kernel = array<i64: 2, 2>,
         strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>,
         dilations = array<i64: 1, 1>, ceil_mode = false}
         : tensor<1x2x6x6xi32>, tensor<1x2x3x3xi32> -> tensor<1x2x6x6xi32>
  return
}

// -----

// grad_output must be the forward pooling's result (here ceil_mode would
// give 3 rows).
func.func @max_pool_grad_mismatch(%x: tensor<1x2x6x5xf32>,
                                  %dy: tensor<1x2x3x2xf32>) {
  // expected-error @+1 {{'nn.max_pool2d_backward' op expects grad_output of type 'tensor<1x2x2x2xf32>' (the forward result), got 'tensor<1x2x3x2xf32>'}}
  %0 = nn.max_pool2d_backward %x, %dy {kernel = array<i64: 3, 3>,
         strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>,
         dilations = array<i64: 1, 1>, ceil_mode = false}
         : tensor<1x2x6x5xf32>, tensor<1x2x3x2xf32> -> tensor<1x2x6x5xf32>
  return
}

// -----

// With channels_last the output gradient is NHWC too: an NCHW one is not
// the forward result.
func.func @max_pool_grad_channels_last_nchw(%x: tensor<1x6x6x2xf32>,
                                            %dy: tensor<1x2x3x3xf32>) {
  // expected-error @+1 {{'nn.max_pool2d_backward' op expects grad_output of type 'tensor<1x3x3x2xf32>' (the forward result), got 'tensor<1x2x3x3xf32>'}}
  %0 = nn.max_pool2d_backward %x, %dy {kernel = array<i64: 2, 2>,
         strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>,
         dilations = array<i64: 1, 1>, ceil_mode = false, channels_last}
         : tensor<1x6x6x2xf32>, tensor<1x2x3x3xf32> -> tensor<1x6x6x2xf32>
  return
}

// -----

// The pooling attributes are checked as nn.max_pool2d checks them.
func.func @max_pool_grad_pads(%x: tensor<1x2x6x6xf32>,
                              %dy: tensor<1x2x4x4xf32>) {
  // expected-error @+1 {{'nn.max_pool2d_backward' op expects pads smaller than the dilated kernel (2), got [2, 0, 0, 0]}}
  %0 = nn.max_pool2d_backward %x, %dy {kernel = array<i64: 2, 2>,
         strides = array<i64: 2, 2>, pads = array<i64: 2, 0, 0, 0>,
         dilations = array<i64: 1, 1>, ceil_mode = false}
         : tensor<1x2x6x6xf32>, tensor<1x2x4x4xf32> -> tensor<1x2x6x6xf32>
  return
}

// -----

// grad_output is [N, C, Ho, Wo].
func.func @avg_pool_grad_rank(%dy: tensor<8x3x3xf32>) {
  // expected-error @+1 {{'nn.avg_pool2d_backward' op expects grad_output of rank 4 ([N, C, Ho, Wo]), got 'tensor<8x3x3xf32>'}}
  %0 = nn.avg_pool2d_backward %dy {input_size = array<i64: 7, 7>,
         kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>,
         pads = array<i64: 0, 0, 0, 0>, ceil_mode = false,
         count_include_pad = false} : tensor<8x3x3xf32> -> tensor<1x8x7x7xf32>
  return
}

// -----

// grad_output must be the forward pooling's result for input_size.
func.func @avg_pool_grad_mismatch(%dy: tensor<1x8x3x3xf32>) {
  // expected-error @+1 {{'nn.avg_pool2d_backward' op expects grad_output of type 'tensor<1x8x4x3xf32>' (the forward result), got 'tensor<1x8x3x3xf32>'}}
  %0 = nn.avg_pool2d_backward %dy {input_size = array<i64: 8, 7>,
         kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>,
         pads = array<i64: 0, 0, 0, 0>, ceil_mode = false,
         count_include_pad = false}
         : tensor<1x8x3x3xf32> -> tensor<1x8x8x7xf32>
  return
}

// -----

// The axis is a dimension of data.
func.func @scatter_add_axis(%d: tensor<10x4xf32>, %i: tensor<3xi64>,
                            %u: tensor<3x4xf32>) {
  // expected-error @+1 {{'nn.scatter_add' op expects axis in [0, 2), got 2}}
  %0 = nn.scatter_add %d, %i, %u {axis = 2 : i64}
         : tensor<10x4xf32>, tensor<3xi64>, tensor<3x4xf32> -> tensor<10x4xf32>
  return
}

// -----

// updates have data's element type.
func.func @scatter_add_element_type(%d: tensor<10x4xf32>, %i: tensor<3xi64>,
                                    %u: tensor<3x4xf16>) {
  // expected-error @+1 {{'nn.scatter_add' op expects updates element type 'f32', got 'tensor<3x4xf16>'}}
  %0 = nn.scatter_add %d, %i, %u {axis = 0 : i64}
         : tensor<10x4xf32>, tensor<3xi64>, tensor<3x4xf16> -> tensor<10x4xf32>
  return
}

// -----

// updates have gather's result shape.
func.func @scatter_add_shape(%d: tensor<10x4xf32>, %i: tensor<3xi64>,
                             %u: tensor<4x3xf32>) {
  // expected-error @+1 {{'nn.scatter_add' op expects updates of shape [3, 4] (data[:axis] + indices + data[axis+1:]), got 'tensor<4x3xf32>'}}
  %0 = nn.scatter_add %d, %i, %u {axis = 0 : i64}
         : tensor<10x4xf32>, tensor<3xi64>, tensor<4x3xf32> -> tensor<10x4xf32>
  return
}

// -----

// source has dest's rank.
func.func @insert_slice_rank(%d: tensor<4x8xf32>, %s: tensor<4xf32>) {
  // expected-error @+1 {{'nn.insert_slice' op expects source of rank 2 (dest's rank), got 'tensor<4xf32>'}}
  %0 = nn.insert_slice %d, %s {starts = array<i64: 0, 0>,
         steps = array<i64: 1, 1>} : tensor<4x8xf32>, tensor<4xf32> -> tensor<4x8xf32>
  return
}

// -----

// One start and one step per dimension.
func.func @insert_slice_steps(%d: tensor<4x8xf32>, %s: tensor<4x4xf32>) {
  // expected-error @+1 {{'nn.insert_slice' op expects 'steps' to have 2 entries (one per dimension), got 1}}
  %0 = nn.insert_slice %d, %s {starts = array<i64: 0, 0>,
         steps = array<i64: 1>} : tensor<4x8xf32>, tensor<4x4xf32> -> tensor<4x8xf32>
  return
}

// -----

// Every written index lies inside dest.
func.func @insert_slice_bounds(%d: tensor<4x8xf32>, %s: tensor<4x4xf32>) {
  // expected-error @+1 {{'nn.insert_slice' op dimension 1 writes indices 6 to 12, outside [0, 8)}}
  %0 = nn.insert_slice %d, %s {starts = array<i64: 0, 6>,
         steps = array<i64: 1, 2>} : tensor<4x8xf32>, tensor<4x4xf32> -> tensor<4x8xf32>
  return
}

