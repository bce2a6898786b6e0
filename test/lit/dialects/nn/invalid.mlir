// RUN: ztc-opt %s -split-input-file -verify-diagnostics

// Every nn diagnostic, one case each: ODS type constraints, result-type
// inference (which checks shapes and attributes) and the C++ verifiers.

// Operands must be statically shaped.
func.func @dynamic_shape(%a: tensor<?xf32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor}}
  %0 = nn.neg %a : tensor<?xf32> -> tensor<?xf32>
  return
}

// -----

// Transcendental ops take floats only.
func.func @exp_of_integer(%a: tensor<4xi32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 32-bit float or 64-bit float or 16-bit float or bfloat16 type values}}
  %0 = nn.exp %a : tensor<4xi32> -> tensor<4xi32>
  return
}

// -----

// Unary results have the operand's type.
func.func @unary_result_type(%a: tensor<4xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %0 = nn.tanh %a : tensor<4xf32> -> tensor<4xf16>
  return
}

// -----

// Binary operands share an element type.
func.func @binary_element_types(%a: tensor<4xf32>, %b: tensor<4xf16>) {
  // expected-error @+1 {{'nn.add' op expects rhs element type 'f32', got 'tensor<4xf16>'}}
  %0 = nn.add %a, %b : tensor<4xf32>, tensor<4xf16> -> tensor<4xf32>
  return
}

// -----

// Binary operand shapes broadcast.
func.func @binary_not_broadcastable(%a: tensor<2x3xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'nn.mul' op operands 'tensor<2x3xf32>' and 'tensor<4xf32>' are not broadcastable}}
  %0 = nn.mul %a, %b : tensor<2x3xf32>, tensor<4xf32> -> tensor<2x3xf32>
  return
}

// -----

// The written result type must be the inferred one.
func.func @binary_wrong_result(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{'nn.sub' op result type 'tensor<3xf32>' differs from the inferred type 'tensor<2x3xf32>'}}
  %0 = nn.sub %a, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<3xf32>
  return
}

// -----

// Comparisons return i1.
func.func @compare_result(%a: tensor<3xf32>) {
  // expected-error @+1 {{result #0 must be statically shaped tensor of 1-bit signless integer values}}
  %0 = nn.less %a, %a : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  return
}

// -----

// Logic ops take i1.
func.func @and_of_integers(%a: tensor<3xi8>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 1-bit signless integer values}}
  %0 = nn.and %a, %a : tensor<3xi8>, tensor<3xi8> -> tensor<3xi8>
  return
}

// -----

// gelu approximates with "none" or "tanh" only.
func.func @gelu_approximate(%a: tensor<3xf32>) {
  // expected-error @+1 {{'nn.gelu' op expects approximate "none" or "tanh", got "erf"}}
  %0 = nn.gelu %a {approximate = "erf"} : tensor<3xf32> -> tensor<3xf32>
  return
}

// -----

// cast keeps the shape.
func.func @cast_shape(%a: tensor<3xf32>) {
  // expected-error @+1 {{requires the same shape for all operands and results}}
  %0 = nn.cast %a : tensor<3xf32> -> tensor<4xi32>
  return
}

// -----

// where's value operands share an element type.
func.func @where_element_types(%c: tensor<3xi1>, %a: tensor<3xf32>, %b: tensor<3xi32>) {
  // expected-error @+1 {{'nn.where' op expects b element type 'f32', got 'tensor<3xi32>'}}
  %0 = nn.where %c, %a, %b : tensor<3xi1>, tensor<3xf32>, tensor<3xi32> -> tensor<3xf32>
  return
}

// -----

// where broadcasts all three operands.
func.func @where_not_broadcastable(%c: tensor<2xi1>, %a: tensor<3xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{'nn.where' op operands 'tensor<2xi1>', 'tensor<3xf32>' and 'tensor<3xf32>' are not broadcastable}}
  %0 = nn.where %c, %a, %b : tensor<2xi1>, tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  return
}

// -----

// matmul operands are at least matrices.
func.func @matmul_rank(%a: tensor<4xf32>, %b: tensor<4x2xf32>) {
  // expected-error @+1 {{'nn.matmul' op expects a of rank at least 2 ([..., M, K]), got 'tensor<4xf32>'}}
  %0 = nn.matmul %a, %b : tensor<4xf32>, tensor<4x2xf32> -> tensor<2xf32>
  return
}

// -----

// matmul operands share an element type.
func.func @matmul_element_types(%a: tensor<3x4xf32>, %b: tensor<4x2xf16>) {
  // expected-error @+1 {{'nn.matmul' op expects b element type 'f32', got 'tensor<4x2xf16>'}}
  %0 = nn.matmul %a, %b : tensor<3x4xf32>, tensor<4x2xf16> -> tensor<3x2xf32>
  return
}

// -----

// matmul contracts matching K.
func.func @matmul_contraction(%a: tensor<3x4xf32>, %b: tensor<5x2xf32>) {
  // expected-error @+1 {{'nn.matmul' op contraction sizes differ: 'tensor<3x4xf32>' has K = 4, 'tensor<5x2xf32>' has K = 5}}
  %0 = nn.matmul %a, %b : tensor<3x4xf32>, tensor<5x2xf32> -> tensor<3x2xf32>
  return
}

// -----

// matmul_nf4: each part has the size the weight's shape gives (Nf4.h).
func.func @matmul_nf4_parts(%x: tensor<8x64xf32>, %p: tensor<1000xi8>, %a: tensor<32xi8>, %n: tensor<1xf32>, %o: tensor<1xf32>) {
  // expected-error @+1 {{'nn.matmul_nf4' op expects packed of shape [1024] for a weight of 32x64, got 'tensor<1000xi8>'}}
  %0 = nn.matmul_nf4 %x, %p, %a, %n, %o {weight_shape = array<i64: 32, 64>, transpose_b = true} : tensor<8x64xf32>, tensor<1000xi8>, tensor<32xi8>, tensor<1xf32>, tensor<1xf32> -> tensor<8x32xf32>
  return
}

// -----

// matmul_nf4 contracts x's last dimension with op(W)'s first.
func.func @matmul_nf4_contraction(%x: tensor<8x64xf32>, %p: tensor<1024xi8>, %a: tensor<32xi8>, %n: tensor<1xf32>, %o: tensor<1xf32>) {
  // expected-error @+1 {{'nn.matmul_nf4' op contraction sizes differ: 'tensor<8x64xf32>' has K = 64, the weight 32x64 has K = 32}}
  %0 = nn.matmul_nf4 %x, %p, %a, %n, %o {weight_shape = array<i64: 32, 64>, transpose_b = false} : tensor<8x64xf32>, tensor<1024xi8>, tensor<32xi8>, tensor<1xf32>, tensor<1xf32> -> tensor<8x64xf32>
  return
}

// -----

// matmul batch dimensions broadcast.
func.func @matmul_batch(%a: tensor<2x3x4xf32>, %b: tensor<3x4x2xf32>) {
  // expected-error @+1 {{'nn.matmul' op batch dimensions of 'tensor<2x3x4xf32>' and 'tensor<3x4x2xf32>' are not broadcastable}}
  %0 = nn.matmul %a, %b : tensor<2x3x4xf32>, tensor<3x4x2xf32> -> tensor<2x3x2xf32>
  return
}

// -----

// conv2d input is NCHW.
func.func @conv_input_rank(%x: tensor<4x8x8xf32>, %w: tensor<2x4x3x3xf32>) {
  // expected-error @+1 {{'nn.conv2d' op expects input of rank 4 ([N, C, H, W]), got 'tensor<4x8x8xf32>'}}
  %0 = nn.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1 : i64}
         : tensor<4x8x8xf32>, tensor<2x4x3x3xf32> -> tensor<1x2x6x6xf32>
  return
}

// -----

// conv2d weight is [O, C / group, kH, kW].
func.func @conv_weight_rank(%x: tensor<1x4x8x8xf32>, %w: tensor<2x4x3xf32>) {
  // expected-error @+1 {{'nn.conv2d' op expects weight of rank 4 ([O, C / group, kH, kW]), got 'tensor<2x4x3xf32>'}}
  %0 = nn.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1 : i64}
         : tensor<1x4x8x8xf32>, tensor<2x4x3xf32> -> tensor<1x2x6x6xf32>
  return
}

// -----

// conv2d weight has the input's element type.
func.func @conv_element_types(%x: tensor<1x4x8x8xf32>, %w: tensor<2x4x3x3xf16>) {
  // expected-error @+1 {{'nn.conv2d' op expects weight element type 'f32', got 'tensor<2x4x3x3xf16>'}}
  %0 = nn.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1 : i64}
         : tensor<1x4x8x8xf32>, tensor<2x4x3x3xf16> -> tensor<1x2x6x6xf32>
  return
}

// -----

// conv2d strides have one entry per spatial dimension.
func.func @conv_strides_size(%x: tensor<1x4x8x8xf32>, %w: tensor<2x4x3x3xf32>) {
  // expected-error @+1 {{'nn.conv2d' op expects 'strides' to have 2 entries, got 1}}
  %0 = nn.conv2d %x, %w {strides = array<i64: 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1 : i64}
         : tensor<1x4x8x8xf32>, tensor<2x4x3x3xf32> -> tensor<1x2x6x6xf32>
  return
}

// -----

// conv2d strides are positive.
func.func @conv_strides_value(%x: tensor<1x4x8x8xf32>, %w: tensor<2x4x3x3xf32>) {
  // expected-error @+1 {{'nn.conv2d' op expects 'strides' entries to be at least 1, got [1, 0]}}
  %0 = nn.conv2d %x, %w {strides = array<i64: 1, 0>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1 : i64}
         : tensor<1x4x8x8xf32>, tensor<2x4x3x3xf32> -> tensor<1x2x6x6xf32>
  return
}

// -----

// conv2d pads are [top, left, bottom, right].
func.func @conv_pads_size(%x: tensor<1x4x8x8xf32>, %w: tensor<2x4x3x3xf32>) {
  // expected-error @+1 {{'nn.conv2d' op expects 'pads' to have 4 entries, got 2}}
  %0 = nn.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0>, dilations = array<i64: 1, 1>, group = 1 : i64}
         : tensor<1x4x8x8xf32>, tensor<2x4x3x3xf32> -> tensor<1x2x6x6xf32>
  return
}

// -----

// conv2d pads are non-negative.
func.func @conv_pads_value(%x: tensor<1x4x8x8xf32>, %w: tensor<2x4x3x3xf32>) {
  // expected-error @+1 {{'nn.conv2d' op expects 'pads' entries to be at least 0, got [0, -1, 0, 0]}}
  %0 = nn.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, -1, 0, 0>, dilations = array<i64: 1, 1>, group = 1 : i64}
         : tensor<1x4x8x8xf32>, tensor<2x4x3x3xf32> -> tensor<1x2x6x6xf32>
  return
}

// -----

// conv2d dilations are positive.
func.func @conv_dilations(%x: tensor<1x4x8x8xf32>, %w: tensor<2x4x3x3xf32>) {
  // expected-error @+1 {{'nn.conv2d' op expects 'dilations' entries to be at least 1, got [0, 1]}}
  %0 = nn.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 0, 1>, group = 1 : i64}
         : tensor<1x4x8x8xf32>, tensor<2x4x3x3xf32> -> tensor<1x2x6x6xf32>
  return
}

// -----

// conv2d group is positive.
func.func @conv_group_value(%x: tensor<1x4x8x8xf32>, %w: tensor<2x4x3x3xf32>) {
  // expected-error @+1 {{'nn.conv2d' op expects group at least 1, got 0}}
  %0 = nn.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 0 : i64}
         : tensor<1x4x8x8xf32>, tensor<2x4x3x3xf32> -> tensor<1x2x6x6xf32>
  return
}

// -----

// conv2d weight channels times group are the input channels.
func.func @conv_channels(%x: tensor<1x4x8x8xf32>, %w: tensor<2x4x3x3xf32>) {
  // expected-error @+1 {{'nn.conv2d' op input channels (4) must equal weight channels (4) times group (2)}}
  %0 = nn.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 2 : i64}
         : tensor<1x4x8x8xf32>, tensor<2x4x3x3xf32> -> tensor<1x2x6x6xf32>
  return
}

// -----

// conv2d group divides the output channels.
func.func @conv_output_channels(%x: tensor<1x4x8x8xf32>, %w: tensor<3x2x3x3xf32>) {
  // expected-error @+1 {{'nn.conv2d' op output channels (3) must be divisible by group (2)}}
  %0 = nn.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 2 : i64}
         : tensor<1x4x8x8xf32>, tensor<3x2x3x3xf32> -> tensor<1x3x6x6xf32>
  return
}

// -----

// conv2d bias has one entry per output channel.
func.func @conv_bias(%x: tensor<1x4x8x8xf32>, %w: tensor<2x4x3x3xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'nn.conv2d' op expects bias of shape [2], got 'tensor<4xf32>'}}
  %0 = nn.conv2d %x, %w, %b {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, group = 1 : i64}
         : tensor<1x4x8x8xf32>, tensor<2x4x3x3xf32>, tensor<4xf32> -> tensor<1x2x6x6xf32>
  return
}

// -----

// conv2d output dimensions are at least 1: the dilated kernel (5) must fit
// in the padded input (4).
func.func @conv_window(%x: tensor<1x4x4x8xf32>, %w: tensor<2x4x3x3xf32>) {
  // expected-error @+1 {{'nn.conv2d' op padded input height (4) is smaller than the dilated kernel (5)}}
  %0 = nn.conv2d %x, %w {strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 2, 2>, group = 1 : i64}
         : tensor<1x4x4x8xf32>, tensor<2x4x3x3xf32> -> tensor<1x2x1x4xf32>
  return
}

// -----

// batch_norm input has a channel dimension.
func.func @batch_norm_rank(%x: tensor<4xf32>, %c: tensor<4xf32>) {
  // expected-error @+1 {{'nn.batch_norm' op expects x of rank at least 2 ([N, C, ...]), got 'tensor<4xf32>'}}
  %0 = nn.batch_norm %x, %c, %c, %c, %c {epsilon = 1.0e-5 : f64}
         : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return
}

// -----

// batch_norm statistics have one entry per channel.
func.func @batch_norm_params(%x: tensor<2x4xf32>, %c: tensor<4xf32>, %v: tensor<2xf32>) {
  // expected-error @+1 {{'nn.batch_norm' op expects var of shape [4], got 'tensor<2xf32>'}}
  %0 = nn.batch_norm %x, %c, %c, %c, %v {epsilon = 1.0e-5 : f64}
         : tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<2xf32> -> tensor<2x4xf32>
  return
}

// -----

// batch_norm_training input has a channel dimension.
func.func @batch_norm_training_rank(%x: tensor<4xf32>, %c: tensor<4xf32>) {
  // expected-error @+1 {{'nn.batch_norm_training' op expects x of rank at least 2 ([N, C, ...]), got 'tensor<4xf32>'}}
  %0:3 = nn.batch_norm_training %x, %c, %c {epsilon = 1.0e-5 : f64}
           : tensor<4xf32>, tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  return
}

// -----

// batch_norm_training's scale and bias have one entry per channel.
func.func @batch_norm_training_params(%x: tensor<2x4x3xf32>, %c: tensor<4xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{'nn.batch_norm_training' op expects bias of shape [4], got 'tensor<3xf32>'}}
  %0:3 = nn.batch_norm_training %x, %c, %b {epsilon = 1.0e-5 : f64}
           : tensor<2x4x3xf32>, tensor<4xf32>, tensor<3xf32> -> tensor<2x4x3xf32>, tensor<4xf32>, tensor<4xf32>
  return
}

// -----

// batch_norm_training_backward's statistics have one entry per channel.
func.func @batch_norm_training_backward_stats(%x: tensor<2x4xf32>, %c: tensor<4xf32>, %v: tensor<2xf32>) {
  // expected-error @+1 {{'nn.batch_norm_training_backward' op expects var of shape [4], got 'tensor<2xf32>'}}
  %0:3 = nn.batch_norm_training_backward %x, %c, %c, %v, %x {epsilon = 1.0e-5 : f64}
           : tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<2xf32>, tensor<2x4xf32> -> tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>
  return
}

// -----

// batch_norm_training_backward's grad_output has x's type.
func.func @batch_norm_training_backward_grad(%x: tensor<2x4xf32>, %c: tensor<4xf32>, %g: tensor<2x4xf16>) {
  // expected-error @+1 {{'nn.batch_norm_training_backward' op expects grad_output of type 'tensor<2x4xf32>' (the forward result), got 'tensor<2x4xf16>'}}
  %0:3 = nn.batch_norm_training_backward %x, %c, %c, %c, %g {epsilon = 1.0e-5 : f64}
           : tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<2x4xf16> -> tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>
  return
}

// -----

// batch_norm statistics have x's element type.
func.func @batch_norm_element_type(%x: tensor<2x4xf32>, %c: tensor<4xf16>) {
  // expected-error @+1 {{'nn.batch_norm' op expects scale element type 'f32', got 'tensor<4xf16>'}}
  %0 = nn.batch_norm %x, %c, %c, %c, %c {epsilon = 1.0e-5 : f64}
         : tensor<2x4xf32>, tensor<4xf16>, tensor<4xf16>, tensor<4xf16>, tensor<4xf16> -> tensor<2x4xf32>
  return
}

// -----

// layer_norm axis is normalized (non-negative).
func.func @layer_norm_axis(%x: tensor<2x8xf32>, %s: tensor<8xf32>) {
  // expected-error @+1 {{'nn.layer_norm' op expects axis in [0, 2), got -1}}
  %0 = nn.layer_norm %x, %s {axis = -1 : i64, epsilon = 1.0e-5 : f64}
         : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32>
  return
}

// -----

// layer_norm scale covers the normalized dimensions.
func.func @layer_norm_scale(%x: tensor<2x8xf32>, %s: tensor<2x8xf32>) {
  // expected-error @+1 {{'nn.layer_norm' op expects scale of shape [8] (x.shape[axis:]), got 'tensor<2x8xf32>'}}
  %0 = nn.layer_norm %x, %s {axis = 1 : i64, epsilon = 1.0e-5 : f64}
         : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
  return
}

// -----

// layer_norm_backward: the scale covers the normalized dimensions, and the
// output gradient has the forward result's type (x's).
func.func @layer_norm_backward_scale(%x: tensor<2x8xf32>, %s: tensor<2xf32>) {
  // expected-error @+1 {{'nn.layer_norm_backward' op expects scale of shape [8] (x.shape[axis:]), got 'tensor<2xf32>'}}
  %0:3 = nn.layer_norm_backward %x, %s, %x {axis = 1 : i64, epsilon = 1.0e-5 : f64}
         : tensor<2x8xf32>, tensor<2xf32>, tensor<2x8xf32>
         -> tensor<2x8xf32>, tensor<2xf32>, tensor<2xf32>
  return
}

// -----

func.func @layer_norm_backward_grad(%x: tensor<2x8xf32>, %s: tensor<8xf32>, %g: tensor<2x4xf32>) {
  // expected-error @+1 {{'nn.layer_norm_backward' op expects grad_output of type 'tensor<2x8xf32>' (the forward result), got 'tensor<2x4xf32>'}}
  %0:3 = nn.layer_norm_backward %x, %s, %g {axis = 1 : i64, epsilon = 1.0e-5 : f64}
         : tensor<2x8xf32>, tensor<8xf32>, tensor<2x4xf32>
         -> tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>
  return
}

// -----

// layer_norm bias covers the normalized dimensions.
func.func @layer_norm_bias(%x: tensor<2x8xf32>, %s: tensor<8xf32>, %b: tensor<2xf32>) {
  // expected-error @+1 {{'nn.layer_norm' op expects bias of shape [8] (x.shape[axis:]), got 'tensor<2xf32>'}}
  %0 = nn.layer_norm %x, %s, %b {axis = 1 : i64, epsilon = 1.0e-5 : f64}
         : tensor<2x8xf32>, tensor<8xf32>, tensor<2xf32> -> tensor<2x8xf32>
  return
}

// -----

// Pooling input is NCHW.
func.func @pool_rank(%x: tensor<2x8x8xf32>) {
  // expected-error @+1 {{'nn.max_pool2d' op expects input of rank 4 ([N, C, H, W]), got 'tensor<2x8x8xf32>'}}
  %0 = nn.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = false}
         : tensor<2x8x8xf32> -> tensor<2x4x4xf32>
  return
}

// -----

// Pooling kernels are 2-D.
func.func @pool_kernel(%x: tensor<1x2x8x8xf32>) {
  // expected-error @+1 {{'nn.max_pool2d' op expects 'kernel' to have 2 entries, got 3}}
  %0 = nn.max_pool2d %x {kernel = array<i64: 2, 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = false}
         : tensor<1x2x8x8xf32> -> tensor<1x2x4x4xf32>
  return
}

// -----

// Pooling strides are positive.
func.func @pool_strides(%x: tensor<1x2x8x8xf32>) {
  // expected-error @+1 {{'nn.avg_pool2d' op expects 'strides' entries to be at least 1, got [0, 2]}}
  %0 = nn.avg_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 0, 2>, pads = array<i64: 0, 0, 0, 0>, ceil_mode = false, count_include_pad = false}
         : tensor<1x2x8x8xf32> -> tensor<1x2x4x4xf32>
  return
}

// -----

// Pooling pads are smaller than the kernel, so no window is all padding.
func.func @pool_pads(%x: tensor<1x2x8x8xf32>) {
  // expected-error @+1 {{'nn.avg_pool2d' op expects pads smaller than the dilated kernel (2), got [0, 2, 0, 0]}}
  %0 = nn.avg_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 2, 0, 0>, ceil_mode = false, count_include_pad = true}
         : tensor<1x2x8x8xf32> -> tensor<1x2x4x5xf32>
  return
}

// -----

// Pooling windows fit in the padded input.
func.func @pool_window(%x: tensor<1x2x8x2xf32>) {
  // expected-error @+1 {{'nn.max_pool2d' op padded input width (2) is smaller than the dilated kernel (3)}}
  %0 = nn.max_pool2d %x {kernel = array<i64: 3, 3>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = false}
         : tensor<1x2x8x2xf32> -> tensor<1x2x6x1xf32>
  return
}

// -----

// softmax axis is a dimension.
func.func @softmax_axis(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'nn.softmax' op expects axis in [0, 2), got 2}}
  %0 = nn.softmax %x {axis = 2 : i64} : tensor<2x8xf32> -> tensor<2x8xf32>
  return
}

// -----

// Reduction axes are dimensions.
func.func @reduce_axes_range(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'nn.reduce_sum' op expects axes in [0, 2), got [0, 2]}}
  %0 = nn.reduce_sum %x {axes = array<i64: 0, 2>, keepdims = false} : tensor<2x8xf32> -> tensor<f32>
  return
}

// -----

// Reduction axes are sorted and unique.
func.func @reduce_axes_order(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{'nn.reduce_max' op expects strictly increasing axes, got [1, 1]}}
  %0 = nn.reduce_max %x {axes = array<i64: 1, 1>, keepdims = true} : tensor<2x8xf32> -> tensor<2x1xf32>
  return
}

// -----

// reshape keeps the element type.
func.func @reshape_element_type(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'nn.reshape' op expects result element type 'f32', got 'tensor<6xf16>'}}
  %0 = nn.reshape %x : tensor<2x3xf32> -> tensor<6xf16>
  return
}

// -----

// reshape keeps the element count.
func.func @reshape_count(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'nn.reshape' op element count changes from 6 ('tensor<2x3xf32>') to 8 ('tensor<8xf32>')}}
  %0 = nn.reshape %x : tensor<2x3xf32> -> tensor<8xf32>
  return
}

// -----

// transpose perm is a permutation.
func.func @transpose_perm(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'nn.transpose' op expects perm to be a permutation of [0, 2), got [1, 1]}}
  %0 = nn.transpose %x {perm = array<i64: 1, 1>} : tensor<2x3xf32> -> tensor<3x3xf32>
  return
}

// -----

// concat has an operand (only the generic form can omit them all).
func.func @concat_empty() {
  // expected-error @+1 {{'nn.concat' op expects at least one operand}}
  %0 = "nn.concat"() {axis = 0 : i64} : () -> tensor<0xf32>
  return
}

// -----

// concat axis is a dimension.
func.func @concat_axis(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{'nn.concat' op expects axis in [0, 2), got 2}}
  %0 = nn.concat %a, %a {axis = 2 : i64} : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x6xf32>
  return
}

// -----

// concat operands share an element type.
func.func @concat_element_types(%a: tensor<2xf32>, %b: tensor<2xf16>) {
  // expected-error @+1 {{'nn.concat' op expects operand element type 'f32', got 'tensor<2xf16>'}}
  %0 = nn.concat %a, %b {axis = 0 : i64} : tensor<2xf32>, tensor<2xf16> -> tensor<4xf32>
  return
}

// -----

// concat operands agree outside the axis.
func.func @concat_shapes(%a: tensor<2x3xf32>, %b: tensor<2x4xf32>) {
  // expected-error @+1 {{'nn.concat' op operand 'tensor<2x4xf32>' does not match 'tensor<2x3xf32>' outside axis 0}}
  %0 = nn.concat %a, %b {axis = 0 : i64} : tensor<2x3xf32>, tensor<2x4xf32> -> tensor<4x3xf32>
  return
}

// -----

// slice attributes have one entry per dimension.
func.func @slice_entries(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'nn.slice' op expects 'steps' to have 2 entries (one per dimension), got 1}}
  %0 = nn.slice %x {starts = array<i64: 0, 0>, sizes = array<i64: 4, 8>, steps = array<i64: 1>} : tensor<4x8xf32> -> tensor<4x8xf32>
  return
}

// -----

// slice sizes are non-negative.
func.func @slice_size(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'nn.slice' op expects non-negative sizes, got [4, -1]}}
  %0 = nn.slice %x {starts = array<i64: 0, 0>, sizes = array<i64: 4, -1>, steps = array<i64: 1, 1>} : tensor<4x8xf32> -> tensor<4x8xf32>
  return
}

// -----

// slice steps are non-zero.
func.func @slice_step(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'nn.slice' op expects non-zero steps, got [1, 0]}}
  %0 = nn.slice %x {starts = array<i64: 0, 0>, sizes = array<i64: 4, 8>, steps = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<4x8xf32>
  return
}

// -----

// slice reads only inside the operand: 7 - 2 * 4 = -1 is out of range.
func.func @slice_bounds(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'nn.slice' op dimension 1 reads indices 7 to -1, outside [0, 8)}}
  %0 = nn.slice %x {starts = array<i64: 0, 7>, sizes = array<i64: 4, 5>, steps = array<i64: 1, -2>} : tensor<4x8xf32> -> tensor<4x5xf32>
  return
}

// -----

// gather axis is a dimension of data.
func.func @gather_axis(%x: tensor<4x8xf32>, %i: tensor<2xi64>) {
  // expected-error @+1 {{'nn.gather' op expects axis in [0, 2), got 3}}
  %0 = nn.gather %x, %i {axis = 3 : i64} : tensor<4x8xf32>, tensor<2xi64> -> tensor<4x2xf32>
  return
}

// -----

// gather indices are i32 or i64.
func.func @gather_indices(%x: tensor<4x8xf32>, %i: tensor<2xi8>) {
  // expected-error @+1 {{operand #1 must be statically shaped tensor of 32-bit signless integer or 64-bit signless integer values}}
  %0 = nn.gather %x, %i {axis = 0 : i64} : tensor<4x8xf32>, tensor<2xi8> -> tensor<2x8xf32>
  return
}

// -----

// broadcast_to follows numpy: size-1 or equal dimensions only.
func.func @broadcast_to(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'nn.broadcast_to' op cannot broadcast 'tensor<2x3xf32>' to shape [4, 3]}}
  %0 = nn.broadcast_to %x {shape = array<i64: 4, 3>} : tensor<2x3xf32> -> tensor<4x3xf32>
  return
}

// -----

// trilu works on matrices.
func.func @trilu_rank(%x: tensor<8xf32>) {
  // expected-error @+1 {{'nn.trilu' op expects x of rank at least 2 ([..., rows, columns]), got 'tensor<8xf32>'}}
  %0 = nn.trilu %x {upper = true, diagonal = 0 : i64} : tensor<8xf32> -> tensor<8xf32>
  return
}

// -----

// rotate_half cuts the last dimension in two halves.
func.func @rotate_half_odd(%x: tensor<2x7xf32>) {
  // expected-error @+1 {{'nn.rotate_half' op expects x's last dimension to be even (two halves), got 'tensor<2x7xf32>'}}
  %0 = nn.rotate_half %x {inverse = false} : tensor<2x7xf32> -> tensor<2x7xf32>
  return
}

// -----

func.func @rotate_half_scalar(%x: tensor<f32>) {
  // expected-error @+1 {{'nn.rotate_half' op expects x of rank at least 1 ([..., features]), got 'tensor<f32>'}}
  %0 = nn.rotate_half %x {inverse = false} : tensor<f32> -> tensor<f32>
  return
}

// -----

func.func @rotate_half_integers(%x: tensor<2x8xi64>) {
  // expected-error @+1 {{'nn.rotate_half' op operand #0 must be}}
  %0 = nn.rotate_half %x {inverse = false} : tensor<2x8xi64> -> tensor<2x8xi64>
  return
}

// -----

// rotary turns the last dimension's halves of x; its two tables have one
// type, x's element type, and broadcast to x without widening it.
func.func @rotary_odd(%x: tensor<2x7xf32>, %t: tensor<7xf32>) {
  // expected-error @+1 {{'nn.rotary' op expects x's last dimension to be even (two halves), got 'tensor<2x7xf32>'}}
  %0 = nn.rotary %x, %t, %t {inverse = false} : tensor<2x7xf32>, tensor<7xf32>, tensor<7xf32> -> tensor<2x7xf32>
  return
}

// -----

func.func @rotary_tables(%x: tensor<2x8xf32>, %c: tensor<8xf32>, %s: tensor<2x8xf32>) {
  // expected-error @+1 {{'nn.rotary' op expects cos and sin of one type, got 'tensor<8xf32>' and 'tensor<2x8xf32>'}}
  %0 = nn.rotary %x, %c, %s {inverse = false} : tensor<2x8xf32>, tensor<8xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
  return
}

// -----

func.func @rotary_element_type(%x: tensor<2x8xbf16>, %t: tensor<8xf32>) {
  // expected-error @+1 {{'nn.rotary' op expects cos and sin of x's element type, got 'tensor<8xf32>' for 'tensor<2x8xbf16>'}}
  %0 = nn.rotary %x, %t, %t {inverse = false} : tensor<2x8xbf16>, tensor<8xf32>, tensor<8xf32> -> tensor<2x8xbf16>
  return
}

// -----

func.func @rotary_widens(%x: tensor<1x8xf32>, %t: tensor<3x8xf32>) {
  // expected-error @+1 {{'nn.rotary' op expects cos and sin 'tensor<3x8xf32>' to broadcast to x's shape, got x 'tensor<1x8xf32>'}}
  %0 = nn.rotary %x, %t, %t {inverse = false} : tensor<1x8xf32>, tensor<3x8xf32>, tensor<3x8xf32> -> tensor<1x8xf32>
  return
}

// -----

func.func @rotary_rank(%x: tensor<8xf32>, %t: tensor<1x8xf32>) {
  // expected-error @+1 {{'nn.rotary' op expects cos and sin 'tensor<1x8xf32>' to broadcast to x's shape, got x 'tensor<8xf32>'}}
  %0 = nn.rotary %x, %t, %t {inverse = false} : tensor<8xf32>, tensor<1x8xf32>, tensor<1x8xf32> -> tensor<8xf32>
  return
}

// -----

func.func @rotary_mismatch(%x: tensor<2x8xf32>, %t: tensor<2x4xf32>) {
  // expected-error @+1 {{'nn.rotary' op expects cos and sin 'tensor<2x4xf32>' to broadcast to x's shape, got x 'tensor<2x8xf32>'}}
  %0 = nn.rotary %x, %t, %t {inverse = false} : tensor<2x8xf32>, tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x8xf32>
  return
}

// -----

// nll_loss log-probabilities are [N, C, ...].
func.func @nll_loss_rank(%lp: tensor<10xf32>, %t: tensor<i64>) {
  // expected-error @+1 {{'nn.nll_loss' op expects log_probs of rank at least 2 ([N, C, ...]), got 'tensor<10xf32>'}}
  %0 = nn.nll_loss %lp, %t : tensor<10xf32>, tensor<i64> -> tensor<f32>
  return
}

// -----

// nll_loss target is [N, d1, ...].
func.func @nll_loss_target(%lp: tensor<8x10x3xf32>, %t: tensor<8xi64>) {
  // expected-error @+1 {{'nn.nll_loss' op expects target of shape [8, 3] ([N, d1, ...]), got 'tensor<8xi64>'}}
  %0 = nn.nll_loss %lp, %t : tensor<8x10x3xf32>, tensor<8xi64> -> tensor<f32>
  return
}

// -----

// nll_loss weight has one entry per class.
func.func @nll_loss_weight(%lp: tensor<8x10xf32>, %t: tensor<8xi64>, %w: tensor<8xf32>) {
  // expected-error @+1 {{'nn.nll_loss' op expects weight of shape [10], got 'tensor<8xf32>'}}
  %0 = nn.nll_loss %lp, %t, %w : tensor<8x10xf32>, tensor<8xi64>, tensor<8xf32> -> tensor<f32>
  return
}

// -----

// nll_loss weight has the log-probabilities' element type.
func.func @nll_loss_weight_type(%lp: tensor<8x10xf32>, %t: tensor<8xi64>, %w: tensor<10xf16>) {
  // expected-error @+1 {{'nn.nll_loss' op expects weight element type 'f32', got 'tensor<10xf16>'}}
  %0 = nn.nll_loss %lp, %t, %w : tensor<8x10xf32>, tensor<8xi64>, tensor<10xf16> -> tensor<f32>
  return
}

// -----

// nll_loss reduction is "none", "sum" or "mean".
func.func @nll_loss_reduction(%lp: tensor<8x10xf32>, %t: tensor<8xi64>) {
  // expected-error @+1 {{'nn.nll_loss' op expects reduction "none", "sum" or "mean", got "max"}}
  %0 = nn.nll_loss %lp, %t {reduction = "max"} : tensor<8x10xf32>, tensor<8xi64> -> tensor<f32>
  return
}

// -----

// The random key is a rank-0 i64: not a vector of keys...
func.func @random_uniform_key_rank(%key: tensor<2xi64>) {
  // expected-error @+1 {{operand #0 must be 0D tensor of 64-bit signless integer values}}
  %0 = nn.random_uniform %key {stream = 0 : i64} : tensor<2xi64> -> tensor<4xf32>
  return
}

// -----

// ... nor a narrower integer.
func.func @random_uniform_key_type(%key: tensor<i32>) {
  // expected-error @+1 {{operand #0 must be 0D tensor of 64-bit signless integer values}}
  %0 = nn.random_uniform %key {stream = 0 : i64} : tensor<i32> -> tensor<4xf32>
  return
}

// -----

// Random values are f32 or f64: 16-bit floats would round values near 1 up
// to 1, outside [0, 1).
func.func @random_uniform_half(%key: tensor<i64>) {
  // expected-error @+1 {{result #0 must be statically shaped tensor of 32-bit float or 64-bit float values}}
  %0 = nn.random_uniform %key {stream = 0 : i64} : tensor<i64> -> tensor<4xf16>
  return
}

// -----

// The result shape is static, like every nn tensor.
func.func @random_uniform_dynamic(%key: tensor<i64>) {
  // expected-error @+1 {{result #0 must be statically shaped tensor of 32-bit float or 64-bit float values}}
  %0 = nn.random_uniform %key {stream = 0 : i64} : tensor<i64> -> tensor<?xf32>
  return
}

// -----

// The stream is required.
func.func @random_uniform_stream(%key: tensor<i64>) {
  // expected-error @+1 {{requires attribute 'stream'}}
  %0 = nn.random_uniform %key : tensor<i64> -> tensor<4xf32>
  return
}
