// RUN: ztc-opt %s -split-input-file --ztc-build-entries="entries=train_step,evaluate" --canonicalize | FileCheck %s

// nn.mode_select is its training operand in train_step and its inference
// operand in evaluate. evaluate returns the loss, as the model in
// evaluation mode computes it, then the rows whose label scores highest
// (`correct`) among those not ignored (`counted`), as f32 sums; the
// gradient and the running-statistics update are gone.

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<f32> {onnx.name = "loss"}, tensor<3x5xf32> {train.grad_of = "w"}, tensor<5xf32> {train.update_of = "stat"})
// CHECK: %[[T:.+]] = nn.mul %[[X:[a-z0-9]+]], %[[W:[a-z0-9]+]]
// CHECK-NOT: nn.mode_select
// CHECK: nn.log_softmax %[[T]]

// CHECK-LABEL: func.func @evaluate
// CHECK-SAME: -> (tensor<f32> {onnx.name = "loss"}, tensor<f32> {onnx.name = "correct"}, tensor<f32> {onnx.name = "counted"})
// CHECK-SAME: attributes {train.entry = "evaluate"}
// CHECK: %[[E:.+]] = nn.add
// CHECK-NOT: nn.mode_select
// CHECK: %[[LP:.+]] = nn.log_softmax %[[E]]
// CHECK: %[[LOSS:.+]] = nn.nll_loss %[[LP]], %[[L:[a-z0-9]+]] {ignore_index = -100 : i64}
// CHECK: %[[BEST:.+]] = nn.reduce_max %[[LP]] {axes = array<i64: 1>, keepdims = false}
// CHECK: %[[PICKED:.+]] = nn.nll_loss %[[LP]], %[[L]] {ignore_index = -100 : i64, reduction = "none"}
// CHECK: %[[AT:.+]] = nn.neg %[[PICKED]]
// CHECK: %[[HIT:.+]] = nn.equal %[[AT]], %[[BEST]]
// CHECK: %[[IGNORED:.+]] = nn.equal %[[L]], %{{.+}} : tensor<3xi64>, tensor<i64>
// CHECK: %[[COUNTED:.+]] = nn.not %[[IGNORED]]
// CHECK: %[[RIGHT:.+]] = nn.and %[[HIT]], %[[COUNTED]]
// CHECK: %[[R:.+]] = nn.cast %[[RIGHT]] : tensor<3xi1> -> tensor<3xf32>
// CHECK: %[[C:.+]] = nn.cast %[[COUNTED]] : tensor<3xi1> -> tensor<3xf32>
// CHECK: %[[NR:.+]] = nn.reduce_sum %[[R]]
// CHECK: %[[NC:.+]] = nn.reduce_sum %[[C]]
// CHECK: return %[[LOSS]], %[[NR]], %[[NC]] : tensor<f32>, tensor<f32>, tensor<f32>
func.func @main(%x: tensor<3x5xf32>, %labels: tensor<3xi64>,
                %w: tensor<3x5xf32> {train.binding = #train.binding<param "w">},
                %s: tensor<5xf32> {train.binding = #train.binding<buffer "stat">})
    -> (tensor<f32> {onnx.name = "loss"}, tensor<3x5xf32> {train.grad_of = "w"},
        tensor<5xf32> {train.update_of = "stat"}) {
  %trained = nn.mul %x, %w : tensor<3x5xf32>, tensor<3x5xf32> -> tensor<3x5xf32>
  %inferred = nn.add %x, %w : tensor<3x5xf32>, tensor<3x5xf32> -> tensor<3x5xf32>
  %y = nn.mode_select %trained, %inferred : tensor<3x5xf32>, tensor<3x5xf32> -> tensor<3x5xf32>
  %lp = nn.log_softmax %y {axis = 1 : i64} : tensor<3x5xf32> -> tensor<3x5xf32>
  %loss = nn.nll_loss %lp, %labels {ignore_index = -100 : i64, reduction = "mean"} : tensor<3x5xf32>, tensor<3xi64> -> tensor<f32>
  %gw = nn.mul %x, %y : tensor<3x5xf32>, tensor<3x5xf32> -> tensor<3x5xf32>
  %ns = nn.reduce_sum %y {axes = array<i64: 0>, keepdims = false} : tensor<3x5xf32> -> tensor<5xf32>
  return %loss, %gw, %ns : tensor<f32>, tensor<3x5xf32>, tensor<5xf32>
}

// -----

// A fused cross entropy (ztc-fuse-cross-entropy) counts its correct rows
// itself: evaluate returns its second result, and counts the rows from the
// labels as above.

// CHECK-LABEL: func.func @evaluate
// CHECK-SAME: -> (tensor<f32> {onnx.name = "loss"}, tensor<f32> {onnx.name = "correct"}, tensor<f32> {onnx.name = "counted"})
// CHECK: %[[LOSS:[^,]+]], %[[RIGHT:.+]] = nn.linear_cross_entropy %{{.+}}, %{{.+}}, %[[L:[a-z0-9]+]] {ignore_index = -100 : i64}
// CHECK-NOT: nn.log_softmax
// CHECK: %[[IGNORED:.+]] = nn.equal %[[L]], %{{.+}} : tensor<3xi64>, tensor<i64>
// CHECK: %[[COUNTED:.+]] = nn.not %[[IGNORED]]
// CHECK: %[[C:.+]] = nn.cast %[[COUNTED]] : tensor<3xi1> -> tensor<3xf32>
// CHECK: %[[NC:.+]] = nn.reduce_sum %[[C]]
// CHECK: return %[[LOSS]], %[[RIGHT]], %[[NC]] : tensor<f32>, tensor<f32>, tensor<f32>
func.func @main(%x: tensor<3x5xf32>, %labels: tensor<3xi64>,
                %w: tensor<5x7xf32> {train.binding = #train.binding<param "w">})
    -> (tensor<f32> {onnx.name = "loss"}, tensor<5x7xf32> {train.grad_of = "w"}) {
  %loss, %correct = nn.linear_cross_entropy %x, %w, %labels {ignore_index = -100 : i64} : tensor<3x5xf32>, tensor<5x7xf32>, tensor<3xi64> -> tensor<f32>, tensor<f32>
  %one = arith.constant dense<1.0> : tensor<f32>
  %gx, %gw, %l = nn.linear_cross_entropy_backward %x, %w, %labels, %one {ignore_index = -100 : i64} : tensor<3x5xf32>, tensor<5x7xf32>, tensor<3xi64>, tensor<f32> -> tensor<3x5xf32>, tensor<5x7xf32>, tensor<f32>
  return %loss, %gw : tensor<f32>, tensor<5x7xf32>
}
