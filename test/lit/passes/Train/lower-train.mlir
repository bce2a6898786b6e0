// RUN: ztc-opt %s -split-input-file --ztc-lower-train | FileCheck %s

// Each train op becomes torch.optim's arithmetic in nn ops; no train op
// is left.

// SGD with L2 weight decay and Nesterov momentum:
//   g = grad + wd * p;  b' = momentum * b + g;  p' = p - lr * (g + momentum * b')
// CHECK-LABEL: func.func @sgd
// CHECK-SAME: (%[[P:[a-z0-9]+]]: tensor<4xf32>, %[[G:[a-z0-9]+]]: tensor<4xf32>, %[[LR:[a-z0-9]+]]: tensor<f32>, %[[B:[a-z0-9]+]]: tensor<4xf32>)
// CHECK: %[[WD:.+]] = arith.constant dense<1.000000e-01> : tensor<f32>
// CHECK: %[[PWD:.+]] = nn.mul %[[P]], %[[WD]]
// CHECK: %[[GD:.+]] = nn.add %[[G]], %[[PWD]]
// CHECK: %[[MU:.+]] = arith.constant dense<0.899999976> : tensor<f32>
// CHECK: %[[BM:.+]] = nn.mul %[[B]], %[[MU]]
// CHECK: %[[NB:.+]] = nn.add %[[BM]], %[[GD]]
// CHECK: %[[MU2:.+]] = arith.constant dense<0.899999976> : tensor<f32>
// CHECK: %[[NBM:.+]] = nn.mul %[[NB]], %[[MU2]]
// CHECK: %[[D:.+]] = nn.add %[[GD]], %[[NBM]]
// CHECK: %[[STEP:.+]] = nn.mul %[[D]], %[[LR]]
// CHECK: %[[NP:.+]] = nn.sub %[[P]], %[[STEP]]
// CHECK: return %[[NP]], %[[NB]]
// CHECK-NOT: train.
func.func @sgd(%p: tensor<4xf32>, %g: tensor<4xf32>, %lr: tensor<f32>, %b: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0:2 = train.sgd %p, %g, %lr, %b {momentum = 0.9 : f64, nesterov, weight_decay = 0.1 : f64}
      : tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<4xf32> -> tensor<4xf32>, tensor<4xf32>
  return %0#0, %0#1 : tensor<4xf32>, tensor<4xf32>
}

// -----

// AdamW: p is decayed by lr * wd first; bias corrections from the step.
// CHECK-LABEL: func.func @adamw
// CHECK-SAME: (%[[P:[a-z0-9]+]]: tensor<4xf32>, %[[G:[a-z0-9]+]]: tensor<4xf32>, %[[M:[a-z0-9]+]]: tensor<4xf32>, %[[V:[a-z0-9]+]]: tensor<4xf32>, %[[LR:[a-z0-9]+]]: tensor<f32>, %[[T:[a-z0-9]+]]: tensor<f32>)
// CHECK: %[[LRWD:.+]] = nn.mul %[[LR]], %{{.+}} : tensor<f32>, tensor<f32>
// CHECK: %[[DEC:.+]] = nn.mul %[[P]], %[[LRWD]]
// CHECK: %[[PD:.+]] = nn.sub %[[P]], %[[DEC]]
// CHECK: nn.mul %[[M]], %{{.+}}
// CHECK: nn.mul %[[G]], %{{.+}}
// CHECK: %[[NM:.+]] = nn.add
// CHECK: nn.mul %[[V]], %{{.+}}
// CHECK: nn.mul %[[G]], %[[G]]
// CHECK: %[[NV:.+]] = nn.add
// CHECK: nn.pow %{{.+}}, %[[T]]
// CHECK: %[[BC1:.+]] = nn.sub
// CHECK: nn.pow %{{.+}}, %[[T]]
// CHECK: %[[BC2:.+]] = nn.sub
// CHECK: %[[SV:.+]] = nn.sqrt %[[NV]]
// CHECK: %[[SBC2:.+]] = nn.sqrt %[[BC2]]
// CHECK: %[[Q:.+]] = nn.div %[[SV]], %[[SBC2]]
// CHECK: %[[DEN:.+]] = nn.add %[[Q]], %{{.+}}
// CHECK: %[[SS:.+]] = nn.div %[[LR]], %[[BC1]]
// CHECK: %[[R:.+]] = nn.div %[[NM]], %[[DEN]]
// CHECK: %[[U:.+]] = nn.mul %[[R]], %[[SS]]
// CHECK: %[[NP:.+]] = nn.sub %[[PD]], %[[U]]
// CHECK: return %[[NP]], %[[NM]], %[[NV]]
func.func @adamw(%p: tensor<4xf32>, %g: tensor<4xf32>, %m: tensor<4xf32>, %v: tensor<4xf32>, %lr: tensor<f32>, %t: tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %0:3 = train.adam %p, %g, %m, %v, %lr, %t {decoupled, weight_decay = 0.01 : f64}
      : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32> -> tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  return %0#0, %0#1, %0#2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// Adam's weight decay is L2: added to the gradient, p is not decayed.
// CHECK-LABEL: func.func @adam_l2
// CHECK-SAME: (%[[P:[a-z0-9]+]]: tensor<4xf32>, %[[G:[a-z0-9]+]]: tensor<4xf32>
// CHECK: %[[PWD:.+]] = nn.mul %[[P]], %{{.+}}
// CHECK: %[[GD:.+]] = nn.add %[[G]], %[[PWD]]
// CHECK: nn.mul %[[GD]], %[[GD]]
// CHECK: nn.sub %[[P]], %{{.+}}
func.func @adam_l2(%p: tensor<4xf32>, %g: tensor<4xf32>, %m: tensor<4xf32>, %v: tensor<4xf32>, %lr: tensor<f32>, %t: tensor<f32>) -> tensor<4xf32> {
  %0:3 = train.adam %p, %g, %m, %v, %lr, %t {weight_decay = 0.01 : f64}
      : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32> -> tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  return %0#0 : tensor<4xf32>
}

// -----

// Clipping: one norm over every gradient, factor min(max / (norm + 1e-6), 1);
// the norm is a result too (the trainer's grad_norm).
// CHECK-LABEL: func.func @clip
// CHECK-SAME: (%[[A:[a-z0-9]+]]: tensor<4xf32>, %[[B:[a-z0-9]+]]: tensor<2x3xf32>)
// CHECK: %[[A2:.+]] = nn.mul %[[A]], %[[A]]
// CHECK: %[[SA:.+]] = nn.reduce_sum %[[A2]] {axes = array<i64: 0>, keepdims = false}
// CHECK: %[[B2:.+]] = nn.mul %[[B]], %[[B]]
// CHECK: %[[SB:.+]] = nn.reduce_sum %[[B2]] {axes = array<i64: 0, 1>, keepdims = false}
// CHECK: %[[TOT:.+]] = nn.add %[[SA]], %[[SB]]
// CHECK: %[[NORM:.+]] = nn.sqrt %[[TOT]]
// CHECK: %[[SH:.+]] = nn.add %[[NORM]], %{{.+}}
// CHECK: %[[F0:.+]] = nn.div %{{.+}}, %[[SH]]
// CHECK: %[[F:.+]] = nn.min %[[F0]], %{{.+}}
// CHECK: %[[CA:.+]] = nn.mul %[[A]], %[[F]]
// CHECK: %[[CB:.+]] = nn.mul %[[B]], %[[F]]
// CHECK: return %[[NORM]], %[[CA]], %[[CB]]
func.func @clip(%a: tensor<4xf32>, %b: tensor<2x3xf32>) -> (tensor<f32>, tensor<4xf32>, tensor<2x3xf32>) {
  %0:3 = train.clip_by_global_norm %a, %b {max_norm = 2.0 : f64}
      : tensor<4xf32>, tensor<2x3xf32> -> tensor<f32>, tensor<4xf32>, tensor<2x3xf32>
  return %0#0, %0#1, %0#2 : tensor<f32>, tensor<4xf32>, tensor<2x3xf32>
}
