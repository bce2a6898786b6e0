// RUN: ztc-opt %s | ztc-opt | FileCheck %s

// Round-trip of nn.attention and nn.attention_backward: parse, print, parse
// again. Each case also runs result-type inference.

// Causal, 4-D (batch, heads), v with its own head size.
// CHECK-LABEL: func.func @causal
// CHECK-SAME: (%[[Q:.+]]: tensor<2x4x16x8xf32>, %[[K:.+]]: tensor<2x4x16x8xf32>, %[[V:.+]]: tensor<2x4x16x6xf32>)
func.func @causal(%q: tensor<2x4x16x8xf32>, %k: tensor<2x4x16x8xf32>,
                  %v: tensor<2x4x16x6xf32>) -> tensor<2x4x16x6xf32> {
  // CHECK: nn.attention %[[Q]], %[[K]], %[[V]] {causal, scale = 3.535530e-01 : f64} : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x6xf32> -> tensor<2x4x16x6xf32>
  %o = nn.attention %q, %k, %v {scale = 0.353553 : f64, causal}
         : tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x6xf32>
         -> tensor<2x4x16x6xf32>
  return %o : tensor<2x4x16x6xf32>
}

// An additive mask that repeats over the heads, more keys than queries.
// CHECK-LABEL: func.func @masked
// CHECK-SAME: %[[M:[^:]+]]: tensor<2x1x3x5xbf16>
func.func @masked(%q: tensor<2x4x3x8xbf16>, %k: tensor<2x4x5x8xbf16>,
                  %v: tensor<2x4x5x8xbf16>, %m: tensor<2x1x3x5xbf16>)
    -> tensor<2x4x3x8xbf16> {
  // CHECK: nn.attention %{{.+}}, %{{.+}}, %{{.+}}, %[[M]] {scale = 1.250000e-01 : f64} : {{.*}} -> tensor<2x4x3x8xbf16>
  %o = nn.attention %q, %k, %v, %m {scale = 0.125 : f64}
         : tensor<2x4x3x8xbf16>, tensor<2x4x5x8xbf16>, tensor<2x4x5x8xbf16>,
           tensor<2x1x3x5xbf16> -> tensor<2x4x3x8xbf16>
  return %o : tensor<2x4x3x8xbf16>
}

// The backward: the three gradients have the types of q, k and v.
// CHECK-LABEL: func.func @backward
func.func @backward(%q: tensor<3x7x4xf32>, %k: tensor<3x9x4xf32>,
                    %v: tensor<3x9x2xf32>, %o: tensor<3x7x2xf32>,
                    %g: tensor<3x7x2xf32>, %m: tensor<1x7x9xf32>)
    -> (tensor<3x7x4xf32>, tensor<3x9x4xf32>, tensor<3x9x2xf32>) {
  // CHECK: %{{.+}}, %{{.+}}, %{{.+}} = nn.attention_backward %{{.+}} {causal, scale = 5.000000e-01 : f64} : tensor<3x7x4xf32>, tensor<3x9x4xf32>, tensor<3x9x2xf32>, tensor<3x7x2xf32>, tensor<3x7x2xf32>, tensor<1x7x9xf32> -> tensor<3x7x4xf32>, tensor<3x9x4xf32>, tensor<3x9x2xf32>
  %dq, %dk, %dv = nn.attention_backward %q, %k, %v, %o, %g, %m
         {scale = 0.5 : f64, causal}
         : tensor<3x7x4xf32>, tensor<3x9x4xf32>, tensor<3x9x2xf32>,
           tensor<3x7x2xf32>, tensor<3x7x2xf32>, tensor<1x7x9xf32>
         -> tensor<3x7x4xf32>, tensor<3x9x4xf32>, tensor<3x9x2xf32>
  return %dq, %dk, %dv
      : tensor<3x7x4xf32>, tensor<3x9x4xf32>, tensor<3x9x2xf32>
}

// Grouped-query attention: k and v with 2 heads for q's 6; the gradients
// of k and v have their types.
// CHECK-LABEL: func.func @grouped_query
func.func @grouped_query(%q: tensor<2x6x5x8xf32>, %k: tensor<2x2x7x8xf32>,
                         %v: tensor<2x2x7x4xf32>, %g: tensor<2x6x5x4xf32>)
    -> (tensor<2x6x5x4xf32>, tensor<2x2x7x8xf32>, tensor<2x2x7x4xf32>) {
  // CHECK: nn.attention %{{.+}}, %{{.+}}, %{{.+}} {scale = 5.000000e-01 : f64} : tensor<2x6x5x8xf32>, tensor<2x2x7x8xf32>, tensor<2x2x7x4xf32> -> tensor<2x6x5x4xf32>
  %o = nn.attention %q, %k, %v {scale = 0.5 : f64}
         : tensor<2x6x5x8xf32>, tensor<2x2x7x8xf32>, tensor<2x2x7x4xf32>
         -> tensor<2x6x5x4xf32>
  // CHECK: nn.attention_backward {{.*}} -> tensor<2x6x5x8xf32>, tensor<2x2x7x8xf32>, tensor<2x2x7x4xf32>
  %dq, %dk, %dv = nn.attention_backward %q, %k, %v, %o, %g {scale = 0.5 : f64}
         : tensor<2x6x5x8xf32>, tensor<2x2x7x8xf32>, tensor<2x2x7x4xf32>,
           tensor<2x6x5x4xf32>, tensor<2x6x5x4xf32>
         -> tensor<2x6x5x8xf32>, tensor<2x2x7x8xf32>, tensor<2x2x7x4xf32>
  return %o, %dk, %dv : tensor<2x6x5x4xf32>, tensor<2x2x7x8xf32>, tensor<2x2x7x4xf32>
}

// Capped scores (softcap) each way.
// CHECK-LABEL: func.func @capped
func.func @capped(%q: tensor<3x7x4xf32>, %k: tensor<3x9x4xf32>, %v: tensor<3x9x2xf32>,
                  %g: tensor<3x7x2xf32>)
    -> (tensor<3x7x4xf32>, tensor<3x9x4xf32>, tensor<3x9x2xf32>) {
  // CHECK: nn.attention %{{.+}} {scale = 5.000000e-01 : f64, softcap = 5.000000e+01 : f64}
  %o = nn.attention %q, %k, %v {scale = 0.5 : f64, softcap = 50.0 : f64}
         : tensor<3x7x4xf32>, tensor<3x9x4xf32>, tensor<3x9x2xf32> -> tensor<3x7x2xf32>
  // CHECK: nn.attention_backward %{{.+}} {scale = 5.000000e-01 : f64, softcap = 5.000000e+01 : f64}
  %dq, %dk, %dv = nn.attention_backward %q, %k, %v, %o, %g {scale = 0.5 : f64, softcap = 50.0 : f64}
         : tensor<3x7x4xf32>, tensor<3x9x4xf32>, tensor<3x9x2xf32>, tensor<3x7x2xf32>, tensor<3x7x2xf32>
         -> tensor<3x7x4xf32>, tensor<3x9x4xf32>, tensor<3x9x2xf32>
  return %dq, %dk, %dv : tensor<3x7x4xf32>, tensor<3x9x4xf32>, tensor<3x9x2xf32>
}
