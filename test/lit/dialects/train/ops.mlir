// RUN: ztc-opt %s | ztc-opt | FileCheck %s

// Every train op and every train attribute round-trips.

// CHECK-LABEL: func.func @step
// CHECK-SAME: {train.binding = #train.binding<hyper "lr">}
// CHECK-SAME: {train.binding = #train.binding<state "w.momentum_buffer">}
// CHECK-SAME: -> (tensor<f32>, tensor<4xf32> {train.update_of = "w"}, tensor<4xf32> {train.update_of = "w.momentum_buffer"}, tensor<2x2xf32> {train.grad_of = "v"})
// CHECK-SAME: attributes {train.buffers = ["bn.running_mean"], train.loss = "cross_entropy", train.no_grad = ["unused"]}
// CHECK: %{{.+}}, %[[C:.+]]:2 = train.clip_by_global_norm %{{.+}}, %{{.+}} {max_norm = 1.000000e+00 : f64} : tensor<4xf32>, tensor<2x2xf32> -> tensor<f32>, tensor<4xf32>, tensor<2x2xf32>
// CHECK: train.sgd %{{.+}}, %[[C]]#0, %{{.+}}, %{{.+}} {momentum = 9.000000e-01 : f64, nesterov, weight_decay = 1.000000e-04 : f64} : tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<4xf32> -> tensor<4xf32>, tensor<4xf32>
// CHECK: train.sgd %{{.+}}, %[[C]]#1, %{{.+}} : tensor<2x2xf32>, tensor<2x2xf32>, tensor<f32> -> tensor<2x2xf32>
// CHECK: train.adam %{{.+}} {beta1 = 8.000000e-01 : f64, decoupled, eps = {{.+}} : f64} : tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<f32>, tensor<f32> -> tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>
func.func @step(%w: tensor<4xf32> {train.binding = #train.binding<param "w">},
                %v: tensor<2x2xf32> {train.binding = #train.binding<param "v">},
                %gw: tensor<4xf32>, %gv: tensor<2x2xf32>,
                %lr: tensor<f32> {train.binding = #train.binding<hyper "lr">},
                %step: tensor<f32> {train.binding = #train.binding<hyper "step">},
                %buf: tensor<4xf32> {train.binding = #train.binding<state "w.momentum_buffer">},
                %m: tensor<2x2xf32> {train.binding = #train.binding<state "v.exp_avg">},
                %s: tensor<2x2xf32> {train.binding = #train.binding<state "v.exp_avg_sq">})
    -> (tensor<f32>, tensor<4xf32> {train.update_of = "w"},
        tensor<4xf32> {train.update_of = "w.momentum_buffer"},
        tensor<2x2xf32> {train.grad_of = "v"})
    attributes {train.loss = "cross_entropy", train.buffers = ["bn.running_mean"],
                train.no_grad = ["unused"]} {
  %c:3 = train.clip_by_global_norm %gw, %gv {max_norm = 1.0 : f64}
      : tensor<4xf32>, tensor<2x2xf32> -> tensor<f32>, tensor<4xf32>, tensor<2x2xf32>
  %w1, %b1 = train.sgd %w, %c#1, %lr, %buf
      {momentum = 0.9 : f64, nesterov, weight_decay = 1.0e-4 : f64}
      : tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<4xf32>
      -> tensor<4xf32>, tensor<4xf32>
  %v1 = train.sgd %v, %c#2, %lr
      : tensor<2x2xf32>, tensor<2x2xf32>, tensor<f32> -> tensor<2x2xf32>
  %v2, %m2, %s2 = train.adam %v1, %gv, %m, %s, %lr, %step
      {beta1 = 0.8 : f64, eps = 1.0e-6 : f64, decoupled}
      : tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>,
        tensor<f32>, tensor<f32> -> tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>
  %loss = arith.constant dense<0.0> : tensor<f32>
  return %loss, %w1, %b1, %v2 : tensor<f32>, tensor<4xf32>, tensor<4xf32>, tensor<2x2xf32>
}
