// RUN: ztc-opt %s -split-input-file --ztc-optimizer -verify-diagnostics

// expected-error @+1 {{the optimizer needs a function returning a scalar float loss first; run ztc-attach-loss and ztc-autodiff}}
func.func @no_loss(%w: tensor<4xf32> {train.binding = #train.binding<param "w">}) -> tensor<4xf32> {
  return %w : tensor<4xf32>
}

// -----

// expected-error @+1 {{result 1 is not a gradient of a parameter (train.grad_of)}}
func.func @not_a_gradient(%w: tensor<4xf32> {train.binding = #train.binding<param "w">}) -> (tensor<f32>, tensor<4xf32>) {
  %loss = arith.constant dense<1.0> : tensor<f32>
  return %loss, %w : tensor<f32>, tensor<4xf32>
}

// -----

// expected-error @+1 {{nothing to train: no parameter has a gradient}}
func.func @nothing(%w: tensor<4xf32> {train.binding = #train.binding<param "w">}) -> tensor<f32> {
  %loss = arith.constant dense<1.0> : tensor<f32>
  return %loss : tensor<f32>
}

// -----

// expected-error @+1 {{result 1 is the gradient of 'x', which names no argument}}
func.func @unknown(%w: tensor<4xf32> {train.binding = #train.binding<param "w">}) -> (tensor<f32>, tensor<4xf32> {train.grad_of = "x"}) {
  %loss = arith.constant dense<1.0> : tensor<f32>
  return %loss, %w : tensor<f32>, tensor<4xf32>
}

// -----

// expected-error @+1 {{parameter 'w' is float64: ztc trains float32 parameters (bf16 or fp16 copies with --precision); convert the model to float32 (ztc gradcheck checks float64 gradients)}}
func.func @float64(%w: tensor<4xf64> {train.binding = #train.binding<param "w">}) -> (tensor<f32>, tensor<4xf64> {train.grad_of = "w"}) {
  %loss = arith.constant dense<1.0> : tensor<f32>
  return %loss, %w : tensor<f32>, tensor<4xf64>
}
