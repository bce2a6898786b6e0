// RUN: ztc-opt %s --ztc-autodiff --ztc-recompute=policy=none | FileCheck %s --check-prefix=NONE
// RUN: ztc-opt %s --ztc-autodiff --ztc-recompute=policy=selective | FileCheck %s --check-prefix=SELECTIVE
// RUN: ztc-opt %s --ztc-autodiff --ztc-recompute=policy=full | FileCheck %s --check-prefix=FULL
// RUN: ztc-opt %s --ztc-autodiff --ztc-recompute="policy=full blocks=/blocks\.[0-9]+/fc" | FileCheck %s --check-prefix=BLOCKS
// RUN: ztc-opt %s --ztc-autodiff --ztc-recompute=policy=sqrt | FileCheck %s --check-prefix=SQRT
// RUN: ztc-opt %s --ztc-autodiff --ztc-recompute=policy=full --cse | FileCheck %s --check-prefix=CSE

// Two blocks of matmul -> tanh -> square, named as PyTorch names the nodes
// of a module list. The backward needs each tanh's output (the square's
// and the tanh's VJPs) and each matmul's input.
func.func @step(%x: tensor<4x8xf32> {train.binding = #train.binding<input "x">},
                %w0: tensor<8x8xf32> {train.binding = #train.binding<param "w0">},
                %w1: tensor<8x8xf32> {train.binding = #train.binding<param "w1">})
    -> tensor<f32> {
  %h0 = nn.matmul %x, %w0 : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32> loc("/blocks.0/fc/MatMul")
  %t0 = nn.tanh %h0 : tensor<4x8xf32> -> tensor<4x8xf32> loc("/blocks.0/act/Tanh")
  %o0 = nn.mul %t0, %t0 : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32> loc("/blocks.0/Mul")
  %h1 = nn.matmul %o0, %w1 : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32> loc("/blocks.1/fc/MatMul")
  %t1 = nn.tanh %h1 : tensor<4x8xf32> -> tensor<4x8xf32> loc("/blocks.1/act/Tanh")
  %o1 = nn.mul %t1, %t1 : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32> loc("/blocks.1/Mul")
  %l = nn.reduce_sum %o1 {axes = array<i64: 0, 1>, keepdims = false} : tensor<4x8xf32> -> tensor<f32> loc("/head/ReduceSum")
  return %l : tensor<f32>
}

// none: the pass reports and changes nothing. Saved: t0, o0, t1 (128 bytes
// each).
// NONE-LABEL: func.func @step
// NONE-SAME: train.recompute = {baseline_saved_bytes = 384 : i64, policy = "none", recompute_flops = 0 : i64, recomputed_ops = 0 : i64, saved_bytes = 384 : i64
// NONE-NOT: train.recomputed

// selective: the tanhs and squares are recomputed from the matmuls'
// outputs, each right before the first backward op that reads it (o0, for
// w1's gradient, with the tanh it needs, which then lives on to its own
// VJP).
// SELECTIVE-LABEL: func.func @step
// SELECTIVE-SAME: %[[X:[a-z0-9]+]]: tensor<4x8xf32> {train.binding = #train.binding<input "x">}, %[[W0:[a-z0-9]+]]: tensor<8x8xf32> {train.binding = #train.binding<param "w0">}, %[[W1:[a-z0-9]+]]: tensor<8x8xf32>
// SELECTIVE-SAME: recompute_flops = 96 : i64, recomputed_ops = 3 : i64, saved_bytes = 256 : i64
// SELECTIVE: %[[H0:.+]] = nn.matmul %[[X]], %[[W0]]
// SELECTIVE: %[[H1:.+]] = nn.matmul
// SELECTIVE: nn.reduce_sum
// SELECTIVE: %[[T1:.+]] = nn.tanh %[[H1]] {train.recomputed}
// SELECTIVE-NEXT: nn.mul %{{.+}}, %[[T1]]
// SELECTIVE: %[[T0:.+]] = nn.tanh %[[H0]] {train.recomputed}
// SELECTIVE-NEXT: %[[O0:.+]] = nn.mul %[[T0]], %[[T0]] {train.recomputed}
// SELECTIVE-NEXT: nn.transpose %[[O0]]
// SELECTIVE: nn.mul %{{.+}}, %[[T0]] :

// full: each block keeps its input (x, o0) alone and replays its matmul and
// tanh at the start of its backward.
// FULL-LABEL: func.func @step
// FULL-SAME: %[[X:[a-z0-9]+]]: tensor<4x8xf32> {train.binding = #train.binding<input "x">}, %[[W0:[a-z0-9]+]]: tensor<8x8xf32> {train.binding = #train.binding<param "w0">}, %[[W1:[a-z0-9]+]]: tensor<8x8xf32>
// FULL-SAME: recompute_flops = 1088 : i64, recomputed_ops = 4 : i64, saved_bytes = 128 : i64
// FULL: %[[O0:.+]] = nn.mul
// FULL: nn.reduce_sum
// FULL: %[[H1:.+]] = nn.matmul %[[O0]], %[[W1]] {train.recomputed}
// FULL-NEXT: %[[T1:.+]] = nn.tanh %[[H1]] {train.recomputed}
// FULL-NEXT: nn.mul %{{.+}}, %[[T1]]
// FULL: %[[H0:.+]] = nn.matmul %[[X]], %[[W0]] {train.recomputed}
// FULL-NEXT: %[[T0:.+]] = nn.tanh %[[H0]] {train.recomputed}
// FULL-NEXT: nn.mul %{{.+}}, %[[T0]]

// A blocks pattern: the text it matches names the block, so only the
// matmuls are in blocks (/blocks.0/fc, /blocks.1/fc); their outputs cross
// into the tanhs, so nothing is recomputed.
// BLOCKS-LABEL: func.func @step
// BLOCKS-SAME: recomputed_ops = 0 : i64, saved_bytes = 384 : i64

// sqrt: 6 forward ops, 3 segments, each cut within one op of its even
// position where the fewest bytes cross (ties: the earliest):
// {h0}, {t0, o0}, {h1, t1, o1}; t0, h1 and t1 are replayed.
// SQRT-LABEL: func.func @step
// SQRT-SAME: %[[X:[a-z0-9]+]]: tensor<4x8xf32> {train.binding = #train.binding<input "x">}, %[[W0:[a-z0-9]+]]: tensor<8x8xf32> {train.binding = #train.binding<param "w0">}, %[[W1:[a-z0-9]+]]: tensor<8x8xf32>
// SQRT-SAME: policy = "sqrt", recompute_flops = 576 : i64, recomputed_ops = 3 : i64, saved_bytes = 256 : i64
// SQRT: %[[O0:.+]] = nn.mul
// SQRT: nn.reduce_sum
// SQRT: %[[H1:.+]] = nn.matmul %[[O0]], %[[W1]] {train.recomputed}
// SQRT-NEXT: nn.tanh %[[H1]] {train.recomputed}
// SQRT: nn.tanh %{{.+}} {train.recomputed}

// CSE leaves the clones apart from the ops they recompute.
// CSE-LABEL: func.func @step
// CSE-COUNT-4: {train.recomputed}
