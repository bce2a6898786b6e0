// RUN: ztc-opt %s -split-input-file --ztc-attach-loss="loss=mse" | FileCheck %s
// RUN: ztc-opt %s -split-input-file --ztc-attach-loss="loss=cross_entropy" | FileCheck %s --check-prefix=XENT

// The loss replaces the model's outputs; state updates (training-mode
// running statistics) stay, after it.
// CHECK-LABEL: func.func @step
// CHECK-SAME: %[[Y:[a-z0-9]+]]: tensor<2x3xf32> {train.binding = #train.binding<label "labels">}
// CHECK-SAME: -> (tensor<f32> {onnx.name = "loss"}, tensor<3xf32> {train.update_of = "bn.running_mean"})
// CHECK-SAME: attributes {train.loss = "mse"}
// CHECK: %[[D:.+]] = nn.sub %{{.+}}, %[[Y]]
// CHECK: %[[SQ:.+]] = nn.mul %[[D]], %[[D]]
// CHECK: %[[L:.+]] = nn.reduce_mean %[[SQ]] {axes = array<i64: 0, 1>, keepdims = false}
// CHECK: return %[[L]], %{{.+}} : tensor<f32>, tensor<3xf32>

// XENT-LABEL: func.func @step
// XENT-SAME: {train.binding = #train.binding<label "labels">}
// XENT-SAME: -> (tensor<f32> {onnx.name = "loss"}, tensor<3xf32> {train.update_of = "bn.running_mean"})
// XENT: nn.log_softmax
// XENT: nn.nll_loss
func.func @step(%x: tensor<2x3xf32> {train.binding = #train.binding<input "x">},
                %m: tensor<3xf32> {train.binding = #train.binding<param "bn.running_mean">})
    -> (tensor<2x3xf32> {onnx.name = "out"}, tensor<3xf32> {train.update_of = "bn.running_mean"}) {
  %0 = nn.mul %x, %m : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  %1 = nn.add %m, %m : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  return %0, %1 : tensor<2x3xf32>, tensor<3xf32>
}
