// RUN: ztc-opt %s --ztc-optimizer="optimizer=sgd momentum=0.9 nesterov=true clip-grad-norm=1.0" | FileCheck %s --check-prefix=SGD
// RUN: ztc-opt %s --ztc-optimizer | FileCheck %s --check-prefix=ADAMW
// RUN: ztc-opt %s --ztc-optimizer="optimizer=adam weight-decay=0.1 beta1=0.8 beta2=0.95 eps=1e-6" | FileCheck %s --check-prefix=ADAM
// RUN: not ztc-opt %s --ztc-optimizer="optimizer=rmsprop" 2>&1 | FileCheck %s --check-prefix=UNKNOWN

// The optimizer adds the hypers lr and step, one state per moment, one
// train op per parameter, and returns the loss and the tagged updates;
// an update tagged before it (a gradient accumulator) passes through last.

// SGD-LABEL: func.func @step
// SGD-SAME: %[[W:[a-z0-9]+]]: tensor<4xf32> {train.binding = #train.binding<param "w">}
// SGD-SAME: %[[V:[a-z0-9]+]]: tensor<2x2xf32> {train.binding = #train.binding<param "v">}
// SGD-SAME: %[[ACC:[a-z0-9]+]]: tensor<4xf32> {train.binding = #train.binding<state "w.grad_accum">}
// SGD-SAME: %[[LR:[a-z0-9]+]]: tensor<f32> {train.binding = #train.binding<hyper "lr">}
// SGD-SAME: %{{[a-z0-9]+}}: tensor<f32> {train.binding = #train.binding<hyper "step">}
// SGD-SAME: %{{[a-z0-9]+}}: tensor<f32> {train.binding = #train.binding<state "grad_norm">}
// SGD-SAME: %[[BW:[a-z0-9]+]]: tensor<4xf32> {train.binding = #train.binding<state "w.momentum_buffer">}
// SGD-SAME: %[[BV:[a-z0-9]+]]: tensor<2x2xf32> {train.binding = #train.binding<state "v.momentum_buffer">}
// SGD-SAME: -> (tensor<f32> {onnx.name = "loss"}, tensor<4xf32> {train.update_of = "w.momentum_buffer"}, tensor<4xf32> {train.update_of = "w"}, tensor<2x2xf32> {train.update_of = "v.momentum_buffer"}, tensor<2x2xf32> {train.update_of = "v"}, tensor<4xf32> {train.update_of = "w.grad_accum"}, tensor<f32> {train.update_of = "grad_norm"})
// SGD: %[[NORM:.+]], %[[C:.+]]:2 = train.clip_by_global_norm %[[GW:.+]], %[[GV:.+]] {max_norm = 1.000000e+00 : f64}
// SGD: %[[NW:.+]], %[[NBW:.+]] = train.sgd %[[W]], %[[C]]#0, %[[LR]], %[[BW]] {momentum = 9.000000e-01 : f64, nesterov} :
// SGD: %[[NV:.+]], %[[NBV:.+]] = train.sgd %[[V]], %[[C]]#1, %[[LR]], %[[BV]]
// SGD: return %{{.+}}, %[[NBW]], %[[NW]], %[[NBV]], %[[NV]], %{{.+}}, %[[NORM]] :

// ADAMW-LABEL: func.func @step
// ADAMW-SAME: {train.binding = #train.binding<state "w.exp_avg">}
// ADAMW-SAME: {train.binding = #train.binding<state "w.exp_avg_sq">}
// ADAMW-SAME: {train.binding = #train.binding<state "v.exp_avg">}
// ADAMW-SAME: {train.binding = #train.binding<state "v.exp_avg_sq">}
// ADAMW-SAME: {train.update_of = "w"}, tensor<4xf32> {train.update_of = "w.exp_avg"}, tensor<4xf32> {train.update_of = "w.exp_avg_sq"}
// ADAMW-NOT: clip_by_global_norm
// ADAMW: train.adam {{.+}} {decoupled, weight_decay = 1.000000e-02 : f64} :
// ADAMW: train.adam

// ADAM: train.adam {{.+}} {beta1 = 8.000000e-01 : f64, beta2 = 0.9499{{9+}}6 : f64, eps = {{.+}}E-7 : f64, weight_decay = 1.000000e-01 : f64} :

// UNKNOWN: for the --optimizer option: Cannot find option named 'rmsprop'!
func.func @step(%x: tensor<4xf32>,
                %w: tensor<4xf32> {train.binding = #train.binding<param "w">},
                %v: tensor<2x2xf32> {train.binding = #train.binding<param "v">},
                %acc: tensor<4xf32> {train.binding = #train.binding<state "w.grad_accum">})
    -> (tensor<f32>, tensor<4xf32> {train.grad_of = "w"},
        tensor<2x2xf32> {train.grad_of = "v"},
        tensor<4xf32> {train.update_of = "w.grad_accum"}) {
  %loss = arith.constant dense<1.0> : tensor<f32>
  %gw = nn.mul %x, %w : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %gv = nn.mul %v, %v : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
  return %loss, %gw, %gv, %acc : tensor<f32>, tensor<4xf32>, tensor<2x2xf32>, tensor<4xf32>
}
