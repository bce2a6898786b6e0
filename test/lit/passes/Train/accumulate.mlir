// RUN: ztc-opt %s -split-input-file --ztc-accumulate="micro-batches=2" | FileCheck %s
// RUN: ztc-opt %s -split-input-file --ztc-accumulate | FileCheck %s --check-prefix=ONE
// RUN: ztc-opt %s -split-input-file --ztc-accumulate="micro-batches=2 accum-dtype=bf16" | FileCheck %s --check-prefix=BF16

// With two micro-batches, each gradient gets an accumulator state: the
// accumulate entry returns loss, the running-statistics update and
// accumulator + gradient; the step hands the optimizer the mean and resets
// the accumulator to zero after its other updates.

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[ACC:[a-z0-9]+]]: tensor<4xf32> {train.binding = #train.binding<state "w.grad_accum">}
// CHECK-SAME: -> (tensor<f32>, tensor<4xf32> {train.grad_of = "w"}, tensor<4xf32> {train.update_of = "stat"}, tensor<4xf32> {train.update_of = "w.grad_accum"})
// CHECK: %[[G:.+]] = nn.mul %{{.+}}, %{{.+}} :
// CHECK: %[[SUM:.+]] = nn.add %[[ACC]], %[[G]]
// CHECK: %[[HALF:.+]] = arith.constant dense<5.000000e-01>
// CHECK: %[[MEAN:.+]] = nn.mul %[[SUM]], %[[HALF]]
// CHECK: %[[ZERO:.+]] = arith.constant dense<0.000000e+00>
// CHECK: %[[RESET:.+]] = nn.broadcast_to %[[ZERO]]
// CHECK: return %{{.+}}, %[[MEAN]], %{{.+}}, %[[RESET]]
// CHECK-LABEL: func.func @accumulate
// CHECK-SAME: %[[ACC2:[a-z0-9]+]]: tensor<4xf32> {train.binding = #train.binding<state "w.grad_accum">}
// CHECK-SAME: -> (tensor<f32>, tensor<4xf32> {train.update_of = "w.grad_accum"}, tensor<4xf32> {train.update_of = "stat"})
// CHECK-SAME: attributes {train.entry = "accumulate"}
// CHECK: %[[SUM2:.+]] = nn.add %[[ACC2]], %{{.+}}
// CHECK: return %{{.+}}, %[[SUM2]], %{{.+}}

// bf16 accumulators: widened, summed with the f32 gradient, rounded once;
// the step's mean stays f32 and the reset is a bf16 zero.
// BF16-LABEL: func.func @train_step
// BF16-SAME: %[[ACC:[a-z0-9]+]]: tensor<4xbf16> {train.binding = #train.binding<state "w.grad_accum">}
// BF16-SAME: -> (tensor<f32>, tensor<4xf32> {train.grad_of = "w"}, tensor<4xf32> {train.update_of = "stat"}, tensor<4xbf16> {train.update_of = "w.grad_accum"})
// BF16: %[[WIDE:.+]] = nn.cast %[[ACC]] : tensor<4xbf16> -> tensor<4xf32>
// BF16: %[[SUM:.+]] = nn.add %[[WIDE]], %{{.+}} : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
// BF16: nn.mul %[[SUM]], %{{.+}} : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
// BF16: %[[ZERO:.+]] = arith.constant dense<0.000000e+00> : tensor<bf16>
// BF16: nn.broadcast_to %[[ZERO]] {{.*}} -> tensor<4xbf16>
// BF16-LABEL: func.func @accumulate
// BF16: %[[WIDE2:.+]] = nn.cast %{{.+}} : tensor<4xbf16> -> tensor<4xf32>
// BF16: %[[SUM2:.+]] = nn.add %[[WIDE2]], %{{.+}}
// BF16: %[[NARROW:.+]] = nn.cast %[[SUM2]] : tensor<4xf32> -> tensor<4xbf16>
// BF16: return %{{.+}}, %[[NARROW]], %{{.+}}

// One micro-batch: nothing changes.
// ONE-LABEL: func.func @train_step
// ONE-SAME: -> (tensor<f32>, tensor<4xf32> {train.grad_of = "w"}, tensor<4xf32> {train.update_of = "stat"})
// ONE-NOT: func.func @accumulate
func.func @train_step(%x: tensor<4xf32>,
                      %w: tensor<4xf32> {train.binding = #train.binding<param "w">},
                      %s: tensor<4xf32> {train.binding = #train.binding<param "stat">})
    -> (tensor<f32>, tensor<4xf32> {train.grad_of = "w"},
        tensor<4xf32> {train.update_of = "stat"})
    attributes {train.entry = "train_step"} {
  %loss = arith.constant dense<1.0> : tensor<f32>
  %gw = nn.mul %x, %w : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %ns = nn.add %s, %x : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %loss, %gw, %ns : tensor<f32>, tensor<4xf32>, tensor<4xf32>
}
