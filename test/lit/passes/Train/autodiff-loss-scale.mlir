// RUN: ztc-opt %s --ztc-autodiff="loss-scale=0" | FileCheck %s
// RUN: ztc-opt %s --ztc-autodiff="loss-scale=1024" | FileCheck %s --check-prefix=STATIC

// Dynamic loss scaling seeds the backward with the `loss_scale` state
// itself, so the first VJP built is the loss op's, with nothing created
// before it: the loss's gradient is built exactly once (a sweep that
// visited the loss op again doubled every gradient) and each parameter
// gradient is unscaled right after it is complete.
// CHECK-LABEL: func.func @step
// CHECK-SAME: %arg2: tensor<f32> {train.binding = #train.binding<state "loss_scale">, train.initial = dense<6.553600e+04> : tensor<f32>}
// CHECK: %[[INV:.+]] = nn.reciprocal %arg2
// CHECK-NEXT: %[[R:.+]] = nn.reshape %arg2 : tensor<f32> -> tensor<1xf32>
// CHECK-NEXT: %[[B:.+]] = nn.broadcast_to %[[R]]
// CHECK-NEXT: %[[G:.+]] = nn.mul %[[B]], %arg0
// CHECK-NEXT: %[[U:.+]] = nn.mul %[[G]], %[[INV]]
// CHECK-NEXT: return %{{.+}}, %[[U]]
// STATIC-LABEL: func.func @step
// STATIC: nn.reciprocal
// STATIC-COUNT-1: nn.broadcast_to
// STATIC-NOT: nn.broadcast_to
func.func @step(%x: tensor<4xf32> {train.binding = #train.binding<input "x">},
                %w: tensor<4xf32> {train.binding = #train.binding<param "w">})
    -> tensor<f32> {
  %y = nn.mul %x, %w : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %l = nn.reduce_sum %y {axes = array<i64: 0>, keepdims = false} : tensor<4xf32> -> tensor<f32>
  return %l : tensor<f32>
}
