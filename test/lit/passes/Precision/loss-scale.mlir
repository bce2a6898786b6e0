// RUN: ztc-opt %s -split-input-file --ztc-loss-scale="loss-scale-window=3 hysteresis=2 min-loss-scale=0.5" | FileCheck %s
// RUN: ztc-opt %s -split-input-file --ztc-loss-scale="consecutive-hysteresis" | FileCheck %s --check-prefix=CONSECUTIVE
// RUN: ztc-opt %s -split-input-file --ztc-zero="world-size=2 stage=2" --ztc-loss-scale | FileCheck %s --check-prefix=STAGE2
// RUN: not ztc-opt %s --ztc-loss-scale="hysteresis=0" 2>&1 | FileCheck %s --check-prefix=BAD

// Dynamic loss scaling on a step with one Adam update (the gradient is
// already unscaled by ztc-autodiff). The finite check sums the gradient the
// update reads; the update's results are kept only when the sum minus
// itself is 0 and the scale has not failed; Adam's step count becomes the
// state optimizer.step, advanced by applied steps only; DeepSpeed's rule
// updates the scale and its states, all returned as updates.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[W:[a-z0-9]+]]: tensor<2x3xf32> {train.binding = #train.binding<param "w">}
// CHECK-SAME: %[[T:[a-z0-9]+]]: tensor<f32> {train.binding = #train.binding<hyper "step">}
// CHECK-SAME: %[[S:[a-z0-9]+]]: tensor<f32> {train.binding = #train.binding<state "loss_scale">, train.initial = dense<6.553600e+04> : tensor<f32>}
// CHECK-SAME: %[[GOOD:[a-z0-9]+]]: tensor<f32> {train.binding = #train.binding<state "loss_scale.good_steps">}
// CHECK-SAME: %[[USED:[a-z0-9]+]]: tensor<f32> {train.binding = #train.binding<state "loss_scale.hysteresis_used">}
// CHECK-SAME: %[[SKIP:[a-z0-9]+]]: tensor<f32> {train.binding = #train.binding<state "loss_scale.skipped_steps">}
// CHECK-SAME: %[[FAIL:[a-z0-9]+]]: tensor<f32> {train.binding = #train.binding<state "loss_scale.failed_at">}
// CHECK-SAME: %[[COUNT:[a-z0-9]+]]: tensor<f32> {train.binding = #train.binding<state "optimizer.step">}
// CHECK-SAME: {train.update_of = "loss_scale"}, tensor<f32> {train.update_of = "loss_scale.good_steps"}, tensor<f32> {train.update_of = "loss_scale.hysteresis_used"}, tensor<f32> {train.update_of = "loss_scale.skipped_steps"}, tensor<f32> {train.update_of = "loss_scale.failed_at"}, tensor<f32> {train.update_of = "optimizer.step"})
// CHECK: %[[G:.+]] = nn.neg %[[W]]
// CHECK: %[[SUM:.+]] = nn.reduce_sum %[[G]] {axes = array<i64: 0, 1>, keepdims = false}
// CHECK: %[[DIFF:.+]] = nn.sub %[[SUM]], %[[SUM]]
// CHECK: %[[FINITE:.+]] = nn.equal %[[DIFF]], %[[ZERO:[a-z0-9_]+]]
// CHECK: %[[ALIVE:.+]] = nn.equal %[[FAIL]], %[[ZERO]]
// CHECK: %[[APPLY:.+]] = nn.and %[[FINITE]], %[[ALIVE]]
// CHECK: %[[NEXT:.+]] = nn.add %[[COUNT]], %{{.+}}
// CHECK: %[[NEWCOUNT:.+]] = nn.where %[[APPLY]], %[[NEXT]], %[[COUNT]]
// CHECK: %[[UP:.+]], %[[UPM:.+]], %[[UPV:.+]] = train.adam %[[W]], %[[G]], %{{.+}}, %{{.+}}, %{{.+}}, %[[NEXT]]
// CHECK: %[[NEWW:.+]] = nn.where %[[APPLY]], %[[UP]], %[[W]]
// CHECK: nn.where %[[APPLY]], %[[UPM]],
// CHECK: nn.where %[[APPLY]], %[[UPV]],
// The rule: an overflow halves the scale (not below 0.5) once
// hysteresis_used reaches hysteresis - 1 = 1, else spends one; 3 finite
// steps in a row double it. A skipped step counts; an overflow at the
// minimum records the step.
// CHECK: %[[LEFT:.+]] = nn.less %[[USED]], %{{.+}}
// CHECK: %[[EXHAUSTED:.+]] = nn.not %[[LEFT]]
// CHECK: %[[HALF:.+]] = nn.mul %[[S]], %{{.+}}
// CHECK: %[[MIN:.+]] = arith.constant dense<5.000000e-01>
// CHECK: %[[HALVED:.+]] = nn.max %[[HALF]], %[[MIN]]
// CHECK: nn.where %[[EXHAUSTED]], %[[HALVED]], %[[S]]
// CHECK: %[[WINDOW:.+]] = arith.constant dense<3.000000e+00>
// CHECK: nn.less %{{.+}}, %[[WINDOW]]
// CHECK: nn.where %{{.+}}, %[[T]], %[[FAIL]]
// CHECK: nn.where %[[APPLY]], %[[SKIP]], %{{.+}}
// CHECK: return %{{.+}}, %[[NEWW]], {{.+}}, %[[NEWCOUNT]] :

// With consecutive hysteresis every finite step restores the hysteresis
// (hysteresis_used becomes 0 whether or not the scale grows).
// CONSECUTIVE-LABEL: func.func @train_step
// CONSECUTIVE-SAME: %[[USED:[a-z0-9]+]]: tensor<f32> {train.binding = #train.binding<state "loss_scale.hysteresis_used">}
// CONSECUTIVE: %[[ZERO:.+]] = arith.constant dense<0.000000e+00>
// CONSECUTIVE: %[[FINITE:.+]] = nn.equal %{{.+}}, %[[ZERO]]
// CONSECUTIVE: %[[OVERFLOW:.+]] = nn.where %{{.+}}, %[[USED]], %{{.+}} : tensor<i1>, tensor<f32>, tensor<f32> -> tensor<f32>
// CONSECUTIVE: nn.where %[[FINITE]], %[[ZERO]], %[[OVERFLOW]]

// Under ZeRO stage 2 the update reads this rank's gradient block: the sum
// is all-reduced so that every rank skips alike.
// STAGE2-LABEL: func.func @train_step
// STAGE2: %[[MINE:.+]] = dist.reduce_scatter
// STAGE2: %[[MEAN:.+]] = nn.mul %[[MINE]]
// STAGE2: %[[SUM:.+]] = nn.reduce_sum %[[MEAN]]
// STAGE2: %[[TOTAL:.+]] = dist.all_reduce %[[SUM]] {world_size = 2 : i64} : tensor<f32> -> tensor<f32>
// STAGE2: nn.sub %[[TOTAL]], %[[TOTAL]]
// STAGE2: train.adam

// BAD: error: dynamic loss scaling needs loss-scale-window >= 1, hysteresis >= 1 and min-loss-scale > 0; got 1000, 0 and 1
func.func @train_step(%w: tensor<2x3xf32> {train.binding = #train.binding<param "w">},
                      %lr: tensor<f32> {train.binding = #train.binding<hyper "lr">},
                      %step: tensor<f32> {train.binding = #train.binding<hyper "step">},
                      %m: tensor<2x3xf32> {train.binding = #train.binding<state "w.exp_avg">},
                      %v: tensor<2x3xf32> {train.binding = #train.binding<state "w.exp_avg_sq">},
                      %scale: tensor<f32> {train.binding = #train.binding<state "loss_scale">, train.initial = dense<65536.0> : tensor<f32>})
    -> (tensor<f32>, tensor<2x3xf32> {train.update_of = "w"},
        tensor<2x3xf32> {train.update_of = "w.exp_avg"},
        tensor<2x3xf32> {train.update_of = "w.exp_avg_sq"})
    attributes {train.entry = "train_step"} {
  %g = nn.neg %w : tensor<2x3xf32> -> tensor<2x3xf32>
  %l = nn.reduce_sum %w {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x3xf32> -> tensor<f32>
  %new:3 = train.adam %w, %g, %m, %v, %lr, %step {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64}
      : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<f32>, tensor<f32>
      -> tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>
  return %l, %new#0, %new#1, %new#2 : tensor<f32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>
}
