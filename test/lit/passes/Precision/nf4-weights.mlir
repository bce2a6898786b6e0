// RUN: ztc-opt %s -split-input-file -verify-diagnostics --ztc-nf4-weights | FileCheck %s

// ztc-nf4-weights: a weight tagged train.nf4 becomes its packed codes
// (i8 [ceil(32 * 64 / 2)]) and three frozen params named after it; each
// product that reads it, through autocast's bf16 copy and a transpose (the
// forward of a Linear) or through the copy alone (the backward's read,
// whose two transposes cancelled), becomes nn.matmul_nf4 in bf16 with
// transpose_b saying which; the copy and the transpose go.
// CHECK-LABEL: func.func @linear
// CHECK-SAME: %[[W:[^:]+]]: tensor<1024xi8> {train.binding = #train.binding<param "q.weight">, train.frozen, train.nf4 = array<i64: 32, 64>}
// CHECK-SAME: %[[ABSMAX:[^:]+]]: tensor<32xi8> {train.binding = #train.binding<param "q.weight.absmax">, train.frozen}
// CHECK-SAME: %[[NESTED:[^:]+]]: tensor<1xf32> {train.binding = #train.binding<param "q.weight.nested_absmax">, train.frozen}
// CHECK-SAME: %[[OFFSET:[^:]+]]: tensor<1xf32> {train.binding = #train.binding<param "q.weight.offset">, train.frozen}
// CHECK-NOT: nn.cast
// CHECK-NOT: nn.transpose
// CHECK: %[[Y:.+]] = nn.matmul_nf4 %{{.+}}, %[[W]], %[[ABSMAX]], %[[NESTED]], %[[OFFSET]] {transpose_b = true, weight_shape = array<i64: 32, 64>} : tensor<2x8x64xbf16>, tensor<1024xi8>, tensor<32xi8>, tensor<1xf32>, tensor<1xf32> -> tensor<2x8x32xbf16>
// CHECK: %[[DX:.+]] = nn.matmul_nf4 %{{.+}}, %[[W]], %[[ABSMAX]], %[[NESTED]], %[[OFFSET]] {transpose_b = false, weight_shape = array<i64: 32, 64>} : tensor<16x32xbf16>, {{.+}} -> tensor<16x64xbf16>
// CHECK: return %[[Y]], %[[DX]]
func.func @linear(%x: tensor<2x8x64xbf16> {train.binding = #train.binding<input "x">},
                  %g: tensor<16x32xbf16> {train.binding = #train.binding<input "g">},
                  %w: tensor<32x64xf32> {train.binding = #train.binding<param "q.weight">, train.frozen, train.nf4 = array<i64: 32, 64>})
    -> (tensor<2x8x32xbf16>, tensor<16x64xbf16>) {
  %c = nn.cast %w : tensor<32x64xf32> -> tensor<32x64xbf16>
  %t = nn.transpose %c {perm = array<i64: 1, 0>} : tensor<32x64xbf16> -> tensor<64x32xbf16>
  %y = nn.matmul %x, %t : tensor<2x8x64xbf16>, tensor<64x32xbf16> -> tensor<2x8x32xbf16>
  %dx = nn.matmul %g, %c : tensor<16x32xbf16>, tensor<32x64xbf16> -> tensor<16x64xbf16>
  return %y, %dx : tensor<2x8x32xbf16>, tensor<16x64xbf16>
}

// -----

// A read that is not a product: the weight cannot be held in 4 bits.
func.func @gathered(%i: tensor<4xi64> {train.binding = #train.binding<input "i">},
                    %w: tensor<32x64xf32> {train.binding = #train.binding<param "emb.weight">, train.frozen, train.nf4 = array<i64: 32, 64>})
    -> tensor<4x64xf32> {
  // expected-error @+1 {{--base-dtype nf4: 'emb.weight' is read by nn.gather, not only by matrix products, so it cannot be held in 4 bits}}
  %r = nn.gather %w, %i {axis = 0 : i64} : tensor<32x64xf32>, tensor<4xi64> -> tensor<4x64xf32>
  return %r : tensor<4x64xf32>
}

// -----

// --half-weights: the product reads W rounded to bf16 and widened again;
// an NF4 weight is read in the product's own type, so this is refused.
func.func @half_weights(%x: tensor<8x64xf32> {train.binding = #train.binding<input "x">},
                        %w: tensor<64x32xf32> {train.binding = #train.binding<param "fc.weight">, train.frozen, train.nf4 = array<i64: 64, 32>})
    -> tensor<8x32xf32> {
  %h = nn.cast %w : tensor<64x32xf32> -> tensor<64x32xbf16>
  %f = nn.cast %h : tensor<64x32xbf16> -> tensor<64x32xf32>
  // expected-error @+1 {{--base-dtype nf4: 'fc.weight' is rounded to 16 bits before this 32-bit product reads it (--half-weights?); NF4 weights are read in the product's own type}}
  %y = nn.matmul %x, %f : tensor<8x64xf32>, tensor<64x32xf32> -> tensor<8x32xf32>
  return %y : tensor<8x32xf32>
}
