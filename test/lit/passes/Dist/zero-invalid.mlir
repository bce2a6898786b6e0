// RUN: ztc-opt %s -split-input-file -verify-diagnostics --ztc-zero="world-size=2 stage=1"

// Buckets join gradients of one element type.
func.func @mixed(%w: tensor<4xf32> {train.binding = #train.binding<param "w">},
                 %b: tensor<4xf64> {train.binding = #train.binding<param "b">},
                 %lr: tensor<f32> {train.binding = #train.binding<hyper "lr">})
    -> (tensor<4xf32> {train.update_of = "w"}, tensor<4xf64> {train.update_of = "b"})
    attributes {train.entry = "train_step"} {
  %w1 = train.sgd %w, %w, %lr : tensor<4xf32>, tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  // expected-error @+1 {{ZeRO stage 1 needs the parameters of a step in one element type}}
  %b1 = train.sgd %b, %b, %lr : tensor<4xf64>, tensor<4xf64>, tensor<f32> -> tensor<4xf64>
  return %w1, %b1 : tensor<4xf32>, tensor<4xf64>
}

// -----

// expected-error @+1 {{ztc-zero found no optimizer update: run ztc-optimizer first}}
func.func @none(%w: tensor<4xf32>) -> tensor<4xf32> attributes {train.entry = "train_step"} {
  return %w : tensor<4xf32>
}
