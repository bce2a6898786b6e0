// RUN: ztc-opt %s -split-input-file --ztc-autodiff="loss-scale=0" | FileCheck %s --check-prefix=MARK
// RUN: ztc-opt %s -split-input-file --ztc-half-gradients | FileCheck %s

// ztc-autodiff marks the widening of each half-precision parameter
// gradient, and fp16's unscaling, with the parameter's name. The weight the
// forward transposed in f32 and then cast gets its gradient transposed in
// f16, so the cast comes last. An f32 parameter's gradient is unscaled
// right after the backward completes it, and not marked.
// MARK-LABEL: func.func @autodiff
// MARK: %[[INV:.+]] = nn.reciprocal %arg4
// MARK: %[[S:.+]] = nn.reduce_sum {{.*}} -> tensor<3xf32>
// MARK-NEXT: nn.mul %[[S]], %[[INV]] : tensor<3xf32>, tensor<f32> -> tensor<3xf32>
// MARK: %[[B:.+]] = nn.cast %{{.+}} {train.half_gradient_of = "b"} : tensor<3xf16> -> tensor<3xf32>
// MARK-NEXT: nn.mul %[[B]], %[[INV]] {train.half_gradient_of = "b"}
// MARK: %[[WT:.+]] = nn.transpose %{{.+}} {perm = array<i64: 1, 0>} : tensor<4x3xf16> -> tensor<3x4xf16>
// MARK-NEXT: %[[W:.+]] = nn.cast %[[WT]] {train.half_gradient_of = "w"} : tensor<3x4xf16> -> tensor<3x4xf32>
// MARK-NEXT: nn.mul %[[W]], %[[INV]] {train.half_gradient_of = "w"}
func.func @autodiff(%x: tensor<2x4xf32> {train.binding = #train.binding<input "x">},
                    %w: tensor<3x4xf32> {train.binding = #train.binding<param "w">},
                    %b: tensor<3xf32> {train.binding = #train.binding<param "b">},
                    %s: tensor<3xf32> {train.binding = #train.binding<param "s">})
    -> tensor<f32> {
  %wt = nn.transpose %w {perm = array<i64: 1, 0>} : tensor<3x4xf32> -> tensor<4x3xf32>
  %wh = nn.cast %wt : tensor<4x3xf32> -> tensor<4x3xf16>
  %bh = nn.cast %b : tensor<3xf32> -> tensor<3xf16>
  %xh = nn.cast %x : tensor<2x4xf32> -> tensor<2x4xf16>
  %y = nn.matmul %xh, %wh : tensor<2x4xf16>, tensor<4x3xf16> -> tensor<2x3xf16>
  %z = nn.add %y, %bh : tensor<2x3xf16>, tensor<3xf16> -> tensor<2x3xf16>
  %zf = nn.cast %z : tensor<2x3xf16> -> tensor<2x3xf32>
  %u = nn.mul %zf, %s : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  %l = nn.reduce_sum %u {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x3xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// ztc-half-gradients: the marked chain (cast, then unscale) is redone right
// before each reader, latest first; a reader that reads it twice gets one
// copy. What waits until the update is the bf16 gradient; the originals are
// gone, and the function lists the parameter.
// CHECK-LABEL: func.func @step
// CHECK-SAME: train.half_gradients = ["w"]
// CHECK: %[[G:.+]] = nn.neg
// CHECK-NEXT: %[[SUM:.+]] = nn.reduce_sum %arg0
// CHECK-NEXT: %[[C0:.+]] = nn.cast %[[G]] : tensor<4xbf16> -> tensor<4xf32>
// CHECK-NEXT: %[[U0:.+]] = nn.mul %[[C0]], %arg2 : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
// CHECK-NEXT: nn.reduce_sum %[[U0]]
// CHECK-NEXT: %[[C1:.+]] = nn.cast %[[G]] : tensor<4xbf16> -> tensor<4xf32>
// CHECK-NEXT: %[[U1:.+]] = nn.mul %[[C1]], %arg2 : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
// CHECK-NEXT: nn.mul %[[U1]], %[[U1]]
// CHECK-NOT: train.half_gradient_of
func.func @step(%x: tensor<4xf32>, %a: tensor<4xbf16>, %inv: tensor<f32>)
    -> (tensor<f32>, tensor<4xf32>) {
  %g = nn.neg %a : tensor<4xbf16> -> tensor<4xbf16>
  %wide = nn.cast %g {train.half_gradient_of = "w"} : tensor<4xbf16> -> tensor<4xf32>
  %unscaled = nn.mul %wide, %inv {train.half_gradient_of = "w"} : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  %other = nn.reduce_sum %x {axes = array<i64: 0>, keepdims = false} : tensor<4xf32> -> tensor<f32>
  %sum = nn.reduce_sum %unscaled {axes = array<i64: 0>, keepdims = false} : tensor<4xf32> -> tensor<f32>
  %sq = nn.mul %unscaled, %unscaled : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %sum, %sq : tensor<f32>, tensor<4xf32>
}
