// RUN: ztc-opt %s --ztc-autocast="precision=bf16 half-weights=true" | FileCheck %s
// RUN: ztc-opt %s --ztc-autocast="precision=bf16 half-weights=true" | FileCheck %s --check-prefix=USES
// RUN: ztc-opt %s --ztc-autocast=precision=bf16 | FileCheck %s --check-prefix=MIXED

// An embedding, a LayerNorm and a product of a transposed weight: with
// half-weights every parameter is cast to bf16 once, at the entry, and
// nothing else reads it. The ops keep the compute types they have without
// the flag: the gather feeds the f32 residual stream from the widened
// table, the LayerNorm reads its weight and bias widened, and the product
// reads the bf16 copy, transposed in bf16 (a widened copy is never
// narrowed again).
func.func @step(%ids: tensor<4xi64> {train.binding = #train.binding<input "ids">},
                %wte: tensor<16x8xf32> {train.binding = #train.binding<param "wte">},
                %g: tensor<8xf32> {train.binding = #train.binding<param "ln.weight">},
                %beta: tensor<8xf32> {train.binding = #train.binding<param "ln.bias">},
                %w: tensor<6x8xf32> {train.binding = #train.binding<param "fc.weight">})
    -> (tensor<4x6xf32>, tensor<8xf32>) {
  %e = nn.gather %wte, %ids {axis = 0 : i64} : tensor<16x8xf32>, tensor<4xi64> -> tensor<4x8xf32> loc("/wte/Gather")
  %n = nn.layer_norm %e, %g, %beta {axis = 1 : i64, epsilon = 1.000000e-05 : f64} : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<4x8xf32> loc("/ln/LayerNormalization")
  %r = nn.add %n, %e : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32> loc("/Add")
  %wt = nn.transpose %w {perm = array<i64: 1, 0>} : tensor<6x8xf32> -> tensor<8x6xf32> loc("/fc/Transpose")
  %y = nn.matmul %r, %wt : tensor<4x8xf32>, tensor<8x6xf32> -> tensor<4x6xf32> loc("/fc/MatMul")
  return %y, %g : tensor<4x6xf32>, tensor<8xf32>
}

// CHECK-LABEL: func.func @step
// CHECK-SAME: (%[[IDS:[^:]+]]: tensor<4xi64> {{.*}}, %[[WTE:[^:]+]]: tensor<16x8xf32> {{.*}}, %[[G:[^:]+]]: tensor<8xf32> {{.*}}, %[[BETA:[^:]+]]: tensor<8xf32> {{.*}}, %[[W:[^:]+]]: tensor<6x8xf32>
// CHECK-DAG: %[[WTEH:.+]] = nn.cast %[[WTE]] : tensor<16x8xf32> -> tensor<16x8xbf16>
// CHECK-DAG: %[[GH:.+]] = nn.cast %[[G]] : tensor<8xf32> -> tensor<8xbf16>
// CHECK-DAG: %[[BETAH:.+]] = nn.cast %[[BETA]] : tensor<8xf32> -> tensor<8xbf16>
// CHECK-DAG: %[[WH:.+]] = nn.cast %[[W]] : tensor<6x8xf32> -> tensor<6x8xbf16>
// CHECK-DAG: %[[WTEF:.+]] = nn.cast %[[WTEH]] : tensor<16x8xbf16> -> tensor<16x8xf32>
// CHECK-DAG: %[[GF:.+]] = nn.cast %[[GH]] : tensor<8xbf16> -> tensor<8xf32>
// CHECK-DAG: %[[BETAF:.+]] = nn.cast %[[BETAH]] : tensor<8xbf16> -> tensor<8xf32>
// CHECK: %[[E:.+]] = nn.gather %[[WTEF]], %[[IDS]] {axis = 0 : i64} : tensor<16x8xf32>, tensor<4xi64> -> tensor<4x8xf32>
// CHECK: %[[N:.+]] = nn.layer_norm %[[E]], %[[GF]], %[[BETAF]] {{.*}} -> tensor<4x8xf32>
// CHECK: %[[R:.+]] = nn.add %[[N]], %[[E]] : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK: %[[RH:.+]] = nn.cast %[[R]] : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK: %[[WTH:.+]] = nn.transpose %[[WH]] {perm = array<i64: 1, 0>} : tensor<6x8xbf16> -> tensor<8x6xbf16>
// CHECK: nn.matmul %[[RH]], %[[WTH]] : tensor<4x8xbf16>, tensor<8x6xbf16> -> tensor<4x6xbf16>
// The output that returns a parameter returns its widened copy.
// CHECK: return %{{.+}}, %[[GF]] : tensor<4x6xf32>, tensor<8xf32>

// Nothing but the four casts reads a parameter.
// USES-COUNT-4: nn.cast %arg{{[1-4]}} :
// USES-NOT: %arg{{[1-4]}}

// Without the flag the f32 readers read the parameters themselves, and
// only the product's weight has a bf16 copy.
// MIXED: nn.gather %arg1, %arg0
// MIXED: nn.layer_norm %{{.+}}, %arg2, %arg3
// MIXED: return %{{.+}}, %arg2
