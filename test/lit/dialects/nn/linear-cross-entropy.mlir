// RUN: ztc-opt %s | ztc-opt | FileCheck %s

// Round-trip of nn.linear_cross_entropy and its backward: parse, print,
// parse again. Each case also runs result-type inference.

// A head tied to the embedding ([V, D], transpose_b), with an ignore index.
// CHECK-LABEL: func.func @tied
// CHECK-SAME: (%[[X:.+]]: tensor<64x32xf32>, %[[W:.+]]: tensor<1000x32xf32>, %[[T:.+]]: tensor<64xi64>)
func.func @tied(%x: tensor<64x32xf32>, %w: tensor<1000x32xf32>,
                %t: tensor<64xi64>) -> (tensor<f32>, tensor<f32>) {
  // CHECK: %{{.+}}, %{{.+}} = nn.linear_cross_entropy %[[X]], %[[W]], %[[T]] {ignore_index = -100 : i64, transpose_b} : tensor<64x32xf32>, tensor<1000x32xf32>, tensor<64xi64> -> tensor<f32>, tensor<f32>
  %loss, %correct = nn.linear_cross_entropy %x, %w, %t
         {transpose_b, ignore_index = -100 : i64}
         : tensor<64x32xf32>, tensor<1000x32xf32>, tensor<64xi64>
         -> tensor<f32>, tensor<f32>
  return %loss, %correct : tensor<f32>, tensor<f32>
}

// The product's own right operand ([D, V]), f64, i32 targets.
// CHECK-LABEL: func.func @untied
// CHECK: nn.linear_cross_entropy %{{.+}}, %{{.+}}, %{{.+}} : tensor<6x4xf64>, tensor<4x10xf64>, tensor<6xi32> -> tensor<f64>, tensor<f64>
func.func @untied(%x: tensor<6x4xf64>, %w: tensor<4x10xf64>,
                  %t: tensor<6xi32>) -> tensor<f64> {
  %loss, %correct = nn.linear_cross_entropy %x, %w, %t
         : tensor<6x4xf64>, tensor<4x10xf64>, tensor<6xi32>
         -> tensor<f64>, tensor<f64>
  return %loss : tensor<f64>
}

// The backward: the gradients have the types of x and w, the loss the
// forward's.
// CHECK-LABEL: func.func @backward
// CHECK: %{{.+}}, %{{.+}}, %{{.+}} = nn.linear_cross_entropy_backward %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} {transpose_b} : tensor<64x32xf32>, tensor<1000x32xf32>, tensor<64xi64>, tensor<f32> -> tensor<64x32xf32>, tensor<1000x32xf32>, tensor<f32>
func.func @backward(%x: tensor<64x32xf32>, %w: tensor<1000x32xf32>,
                    %t: tensor<64xi64>, %g: tensor<f32>)
    -> (tensor<64x32xf32>, tensor<1000x32xf32>, tensor<f32>) {
  %dx, %dw, %l = nn.linear_cross_entropy_backward %x, %w, %t, %g {transpose_b}
         : tensor<64x32xf32>, tensor<1000x32xf32>, tensor<64xi64>, tensor<f32>
         -> tensor<64x32xf32>, tensor<1000x32xf32>, tensor<f32>
  return %dx, %dw, %l : tensor<64x32xf32>, tensor<1000x32xf32>, tensor<f32>
}

// Mixed precision: bf16 (and f16) x and w, the loss and `correct` in f32;
// the backward's gradients in the operands' type, its grad and loss f32.
// CHECK-LABEL: func.func @half
// CHECK: nn.linear_cross_entropy %{{.+}}, %{{.+}}, %{{.+}} {transpose_b} : tensor<8x4xbf16>, tensor<10x4xbf16>, tensor<8xi64> -> tensor<f32>, tensor<f32>
// CHECK: nn.linear_cross_entropy_backward %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} : tensor<8x4xf16>, tensor<4x10xf16>, tensor<8xi64>, tensor<f32> -> tensor<8x4xf16>, tensor<4x10xf16>, tensor<f32>
func.func @half(%x: tensor<8x4xbf16>, %w: tensor<10x4xbf16>,
                %xh: tensor<8x4xf16>, %wh: tensor<4x10xf16>,
                %t: tensor<8xi64>, %g: tensor<f32>)
    -> (tensor<f32>, tensor<8x4xf16>) {
  %loss, %correct = nn.linear_cross_entropy %x, %w, %t {transpose_b}
         : tensor<8x4xbf16>, tensor<10x4xbf16>, tensor<8xi64>
         -> tensor<f32>, tensor<f32>
  %dx, %dw, %l = nn.linear_cross_entropy_backward %xh, %wh, %t, %g
         : tensor<8x4xf16>, tensor<4x10xf16>, tensor<8xi64>, tensor<f32>
         -> tensor<8x4xf16>, tensor<4x10xf16>, tensor<f32>
  return %loss, %dx : tensor<f32>, tensor<8x4xf16>
}
