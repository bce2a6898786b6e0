// RUN: ztc-opt %s -split-input-file --ztc-autodiff -verify-diagnostics
// RUN: not ztc-opt %s -split-input-file --ztc-autodiff="frozen=w,[b" 2>&1 | FileCheck %s --check-prefix=REGEX

// Every ztc-autodiff diagnostic, one case each.

// A frozen pattern must be a valid regular expression.
// REGEX: error: invalid regular expression '[b' in --freeze: brackets ([ ]) not balanced

// The first result is the loss: it must be a scalar.
// expected-error @+1 {{ztc-autodiff expects the first result to be the loss, a rank-0 float tensor, got 'tensor<4xf32>'}}
func.func @vector_loss(%w: tensor<4xf32> {train.binding = #train.binding<param "w">})
    -> tensor<4xf32> {
  %0 = nn.exp %w : tensor<4xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// ... and floating point.
// expected-error @+1 {{ztc-autodiff expects the first result to be the loss, a rank-0 float tensor, got 'tensor<i64>'}}
func.func @integer_loss(%w: tensor<4xf32> {train.binding = #train.binding<param "w">})
    -> tensor<i64> {
  %c = arith.constant dense<0> : tensor<i64>
  return %c : tensor<i64>
}

// -----

// A function that returns nothing has no loss.
// expected-error @+1 {{ztc-autodiff expects the loss as the first result, but the function returns nothing}}
func.func @no_result(%w: tensor<4xf32> {train.binding = #train.binding<param "w">}) {
  return
}

// -----

// The step is straight-line code.
// expected-error @+1 {{ztc-autodiff expects a function with one block}}
func.func @two_blocks(%w: tensor<f32> {train.binding = #train.binding<param "w">})
    -> tensor<f32> {
  return %w : tensor<f32>
^unreachable:
  return %w : tensor<f32>
}

// -----

// An op between a parameter and the loss must have a gradient; an arith op
// on tensors has none.
func.func @no_gradient(%w: tensor<4xf32> {train.binding = #train.binding<param "w">})
    -> tensor<f32> {
  // expected-error @+1 {{'arith.mulf' op has no gradient, but the loss depends on its result through a trainable parameter}}
  %0 = arith.mulf %w, %w : tensor<4xf32>
  %l = nn.reduce_sum %0 {axes = array<i64: 0>, keepdims = false}
         : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// An op may refuse to differentiate: max pooling's gradient has no gradient
// of its own.
func.func @second_order_max_pool(%x: tensor<1x1x2x2xf32>,
                                 %dy: tensor<1x1x1x1xf32> {train.binding = #train.binding<param "dy">})
    -> tensor<f32> {
  // expected-error @+1 {{'nn.max_pool2d_backward' op has no second-order gradient}}
  %0 = nn.max_pool2d_backward %x, %dy {kernel = array<i64: 2, 2>,
         strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>,
         dilations = array<i64: 1, 1>, ceil_mode = false}
         : tensor<1x1x2x2xf32>, tensor<1x1x1x1xf32> -> tensor<1x1x2x2xf32>
  %l = nn.reduce_sum %0 {axes = array<i64: 0, 1, 2, 3>, keepdims = false}
         : tensor<1x1x2x2xf32> -> tensor<f32>
  return %l : tensor<f32>
}
