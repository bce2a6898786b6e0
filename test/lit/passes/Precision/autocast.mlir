// RUN: ztc-opt %s --ztc-autocast=precision=bf16 | FileCheck %s
// RUN: ztc-opt %s --ztc-autocast="precision=bf16 keep-fp32=/fc2/" | FileCheck %s --check-prefix=KEEP
// RUN: not ztc-opt %s --ztc-autocast="precision=bf16 keep-fp32=/fc[" 2>&1 | FileCheck %s --check-prefix=REGEX
// RUN: not ztc-opt %s --ztc-autocast=precision=fp8 2>&1 | FileCheck %s --check-prefix=TYPE

// Two products of one weight, a bias, a softmax, and a residual: the
// products compute in bf16 on one cast of the weight, the bias follows the
// product's type, the softmax computes in f32, the residual add takes the
// widest of its activations, and the result keeps its declared type.
func.func @step(%x: tensor<4x8xf32> {train.binding = #train.binding<input "x">},
                %w: tensor<8x8xf32> {train.binding = #train.binding<param "w">},
                %b: tensor<8xf32> {train.binding = #train.binding<param "b">})
    -> tensor<4x8xf32> {
  %h = nn.matmul %x, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32> loc("/fc1/MatMul")
  %hb = nn.add %h, %b : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32> loc("/fc1/Add")
  %t = nn.tanh %hb : tensor<4x8xf32> -> tensor<4x8xf32> loc("/act/Tanh")
  %s = nn.softmax %t {axis = 1 : i64} : tensor<4x8xf32> -> tensor<4x8xf32> loc("/Softmax")
  %h2 = nn.matmul %s, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32> loc("/fc2/MatMul")
  %r = nn.add %h2, %x : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32> loc("/Add")
  return %r : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @step
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4x8xf32> {{.*}}, %[[W:[^:]+]]: tensor<8x8xf32> {{.*}}, %[[B:[^:]+]]: tensor<8xf32>
// CHECK-DAG: %[[WH:.+]] = nn.cast %[[W]] : tensor<8x8xf32> -> tensor<8x8xbf16>
// CHECK-DAG: %[[BH:.+]] = nn.cast %[[B]] : tensor<8xf32> -> tensor<8xbf16>
// CHECK-DAG: %[[XH:.+]] = nn.cast %[[X]] : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK: %[[H:.+]] = nn.matmul %[[XH]], %[[WH]] : tensor<4x8xbf16>, tensor<8x8xbf16> -> tensor<4x8xbf16>
// CHECK: %[[HB:.+]] = nn.add %[[H]], %[[BH]] : tensor<4x8xbf16>, tensor<8xbf16> -> tensor<4x8xbf16>
// CHECK: %[[T:.+]] = nn.tanh %[[HB]] : tensor<4x8xbf16> -> tensor<4x8xbf16>
// CHECK: %[[TF:.+]] = nn.cast %[[T]] : tensor<4x8xbf16> -> tensor<4x8xf32>
// CHECK: %[[S:.+]] = nn.softmax %[[TF]] {axis = 1 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK: %[[SH:.+]] = nn.cast %[[S]] : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK: %[[H2:.+]] = nn.matmul %[[SH]], %[[WH]] : tensor<4x8xbf16>, tensor<8x8xbf16> -> tensor<4x8xbf16>
// CHECK: %[[H2F:.+]] = nn.cast %[[H2]] : tensor<4x8xbf16> -> tensor<4x8xf32>
// CHECK: %[[R:.+]] = nn.add %[[H2F]], %[[X]] : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK: return %[[R]] : tensor<4x8xf32>
// CHECK-NOT: nn.cast %[[W]]

// KEEP: nn.matmul {{.*}} -> tensor<4x8xbf16>
// KEEP: nn.softmax
// KEEP: nn.matmul {{.*}} : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>

// REGEX: error: --keep-fp32 '/fc[' is not a valid regular expression: brackets ([ ]) not balanced
// TYPE: for the --precision option: Cannot find option named 'fp8'!
