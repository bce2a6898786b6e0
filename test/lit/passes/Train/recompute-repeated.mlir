// RUN: ztc-opt %s --ztc-autodiff --ztc-recompute=policy=full | FileCheck %s

// `full` without numbered scopes: the blocks are the repeated structure,
// three runs of matmul -> tanh -> mul (names as an exporter without module
// lists writes them). Each block keeps only its output, which the next
// block reads; the backward recomputes each block's matmul and tanh.

func.func @step(%x: tensor<4x8xf32> {train.binding = #train.binding<input "x">},
                %w0: tensor<8x8xf32> {train.binding = #train.binding<param "w0">},
                %w1: tensor<8x8xf32> {train.binding = #train.binding<param "w1">},
                %w2: tensor<8x8xf32> {train.binding = #train.binding<param "w2">})
    -> tensor<f32> {
  %h0 = nn.matmul %x, %w0 : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32> loc("/first/MatMul")
  %t0 = nn.tanh %h0 : tensor<4x8xf32> -> tensor<4x8xf32> loc("/first/Tanh")
  %o0 = nn.mul %t0, %t0 : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32> loc("/first/Mul")
  %h1 = nn.matmul %o0, %w1 : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32> loc("/second/MatMul")
  %t1 = nn.tanh %h1 : tensor<4x8xf32> -> tensor<4x8xf32> loc("/second/Tanh")
  %o1 = nn.mul %t1, %t1 : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32> loc("/second/Mul")
  %h2 = nn.matmul %o1, %w2 : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32> loc("/third/MatMul")
  %t2 = nn.tanh %h2 : tensor<4x8xf32> -> tensor<4x8xf32> loc("/third/Tanh")
  %o2 = nn.mul %t2, %t2 : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32> loc("/third/Mul")
  %l = nn.reduce_sum %o2 {axes = array<i64: 0, 1>, keepdims = false} : tensor<4x8xf32> -> tensor<f32> loc("/ReduceSum")
  return %l : tensor<f32>
}

// CHECK-LABEL: func.func @step
// CHECK-SAME: policy = "full"
// CHECK-SAME: recomputed_ops = 6 : i64
// CHECK: %[[O0:.+]] = nn.mul
// CHECK: %[[O1:.+]] = nn.mul
// CHECK: nn.reduce_sum
// CHECK: %[[H2:.+]] = nn.matmul %[[O1]], %arg3 {train.recomputed}
// CHECK-NEXT: %[[T2:.+]] = nn.tanh %[[H2]] {train.recomputed}
// CHECK: %[[H1:.+]] = nn.matmul %[[O0]], %arg2 {train.recomputed}
// CHECK-NEXT: %[[T1:.+]] = nn.tanh %[[H1]] {train.recomputed}
// CHECK: %[[H0:.+]] = nn.matmul %arg0, %arg1 {train.recomputed}
// CHECK-NEXT: %[[T0:.+]] = nn.tanh %[[H0]] {train.recomputed}

