// RUN: ztc-opt %s -split-input-file --ztc-build-entries="entries=train_step,loss_and_grads" | FileCheck %s
// RUN: ztc-opt %s -split-input-file --ztc-build-entries="entries=loss" --canonicalize | FileCheck %s --check-prefix=LOSS
// RUN: ztc-opt %s -split-input-file --ztc-build-entries="entries=forward" | FileCheck %s --check-prefix=FORWARD
// RUN: not ztc-opt %s --ztc-build-entries="entries=train_step,train_step" 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not ztc-opt %s --ztc-build-entries="entries=eval" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not ztc-opt %s --ztc-build-entries 2>&1 | FileCheck %s --check-prefix=NONE

// A loss-and-gradients function with a running-statistics update becomes
// the entries asked for, in order: the training step keeps everything,
// loss_and_grads drops the update and names each gradient after its
// parameter, loss keeps the loss alone, forward drops only the update.

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<f32>, tensor<4xf32> {train.grad_of = "w"}, tensor<4xf32> {train.update_of = "stat"})
// CHECK-SAME: attributes {train.entry = "train_step"}
// CHECK: %[[G:.+]] = nn.mul
// CHECK: %[[U:.+]] = nn.add
// CHECK: return %{{.+}}, %[[G]], %[[U]]
// CHECK-LABEL: func.func @loss_and_grads
// CHECK-SAME: -> (tensor<f32>, tensor<4xf32> {onnx.name = "w", train.grad_of = "w"})
// CHECK-SAME: attributes {train.entry = "loss_and_grads"}
// CHECK-NOT: nn.add
// CHECK: return
// CHECK-NOT: func.func @main

// LOSS-LABEL: func.func @loss
// LOSS-SAME: -> tensor<f32> attributes {train.entry = "loss"}
// LOSS-NOT: nn.mul
// LOSS: return %{{.+}} : tensor<f32>

// FORWARD-LABEL: func.func @forward
// FORWARD-SAME: -> (tensor<f32>, tensor<4xf32> {train.grad_of = "w"})
// FORWARD-SAME: attributes {train.entry = "forward"}

// TWICE: entry 'train_step' is listed twice
// NONE: ztc-build-entries needs at least one entry
// UNKNOWN: unknown entry 'eval'; expected forward, train_step, loss_and_grads, loss or evaluate (ztc-accumulate builds accumulate)
func.func @main(%x: tensor<4xf32>,
                %w: tensor<4xf32> {train.binding = #train.binding<param "w">},
                %s: tensor<4xf32> {train.binding = #train.binding<param "stat">})
    -> (tensor<f32>, tensor<4xf32> {train.grad_of = "w"},
        tensor<4xf32> {train.update_of = "stat"}) {
  %loss = arith.constant dense<1.0> : tensor<f32>
  %gw = nn.mul %x, %w : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %ns = nn.add %s, %x : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %loss, %gw, %ns : tensor<f32>, tensor<4xf32>, tensor<4xf32>
}
