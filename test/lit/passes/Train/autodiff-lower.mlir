// RUN: ztc-opt %s --ztc-autodiff --ztc-lower-to-kernel-pipeline | FileCheck %s --implicit-check-not="= nn."

// The gradients of every differentiable op built from forward ops lower
// through the forward pipeline unchanged: after autodiff and the kernel
// pipeline, no nn op is left and every step has a memory plan. (The
// gradients that need backward ops are in autodiff-backward-ops.mlir.) The
// same functions feed autodiff-numeric.test, which compares their gradients
// with finite differences; the `gradient-check` lines give it the integer
// inputs.

// Elementwise binary ops, with broadcasting and Clip's constant bound.
// CHECK-LABEL: func.func @binary
// CHECK-SAME: train.grad_of
// CHECK-SAME: kernel.arena_bytes
func.func @binary(%a: tensor<2x3xf32> {train.binding = #train.binding<param "a">},
                  %b: tensor<3xf32> {train.binding = #train.binding<param "b">}) -> tensor<f32> {
  %one = arith.constant dense<1.0> : tensor<f32>
  %lo = arith.constant dense<-0.2> : tensor<f32>
  %0 = nn.add %a, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  %1 = nn.sub %a, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  %2 = nn.mul %0, %1 : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  %bb = nn.mul %b, %b : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  %den = nn.add %bb, %one : tensor<3xf32>, tensor<f32> -> tensor<3xf32>
  %3 = nn.div %2, %den : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  %aa = nn.mul %a, %a : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  %base = nn.add %aa, %one : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xf32>
  %4 = nn.pow %base, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  %5 = nn.max %a, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  %6 = nn.min %a, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  %7 = nn.max %a, %lo : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xf32>
  %8 = nn.min %lo, %a : tensor<f32>, tensor<2x3xf32> -> tensor<2x3xf32>
  %s0 = nn.add %3, %4 : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  %s1 = nn.add %s0, %5 : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  %s2 = nn.mul %s1, %6 : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  %s3 = nn.add %s2, %7 : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  %s4 = nn.mul %s3, %8 : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  %l = nn.reduce_sum %s4 {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x3xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// Every unary op; log, sqrt and reciprocal read positive values.
// CHECK-LABEL: func.func @unary
// CHECK-SAME: train.grad_of
// CHECK-SAME: kernel.arena_bytes
func.func @unary(%x: tensor<6xf32> {train.binding = #train.binding<param "x">}) -> tensor<f32> {
  %one = arith.constant dense<1.0> : tensor<f32>
  %xx = nn.mul %x, %x : tensor<6xf32>, tensor<6xf32> -> tensor<6xf32>
  %pos = nn.add %xx, %one : tensor<6xf32>, tensor<f32> -> tensor<6xf32>
  %0 = nn.neg %x : tensor<6xf32> -> tensor<6xf32>
  %1 = nn.exp %0 : tensor<6xf32> -> tensor<6xf32>
  %2 = nn.log %pos : tensor<6xf32> -> tensor<6xf32>
  %3 = nn.tanh %x : tensor<6xf32> -> tensor<6xf32>
  %4 = nn.sigmoid %x : tensor<6xf32> -> tensor<6xf32>
  %5 = nn.relu %x : tensor<6xf32> -> tensor<6xf32>
  %6 = nn.sqrt %pos : tensor<6xf32> -> tensor<6xf32>
  %7 = nn.reciprocal %pos : tensor<6xf32> -> tensor<6xf32>
  %8 = nn.erf %x : tensor<6xf32> -> tensor<6xf32>
  %9 = nn.abs %x : tensor<6xf32> -> tensor<6xf32>
  %10 = nn.softplus %x : tensor<6xf32> -> tensor<6xf32>
  %11 = nn.leaky_relu %x {alpha = 2.000000e-01 : f64} : tensor<6xf32> -> tensor<6xf32>
  %12 = nn.gelu %x : tensor<6xf32> -> tensor<6xf32>
  %13 = nn.gelu %x {approximate = "tanh"} : tensor<6xf32> -> tensor<6xf32>
  %c = nn.concat %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13 {axis = 0 : i64}
    : tensor<6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<6xf32>,
      tensor<6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<6xf32>,
      tensor<6xf32>, tensor<6xf32>, tensor<6xf32> -> tensor<78xf32>
  %sq = nn.mul %c, %c : tensor<78xf32>, tensor<78xf32> -> tensor<78xf32>
  %l = nn.reduce_sum %sq {axes = array<i64: 0>, keepdims = false} : tensor<78xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// Casts between floats, where, broadcast_to.
// CHECK-LABEL: func.func @select
// CHECK-SAME: train.grad_of
// CHECK-SAME: kernel.arena_bytes
func.func @select(%x: tensor<4xf32> {train.binding = #train.binding<param "x">},
                  %y: tensor<1xf32> {train.binding = #train.binding<param "y">}) -> tensor<f32> {
  %zero = arith.constant dense<0.0> : tensor<f32>
  %0 = nn.cast %x : tensor<4xf32> -> tensor<4xf64>
  %1 = nn.mul %0, %0 : tensor<4xf64>, tensor<4xf64> -> tensor<4xf64>
  %2 = nn.cast %1 : tensor<4xf64> -> tensor<4xf32>
  %c = nn.greater %x, %zero : tensor<4xf32>, tensor<f32> -> tensor<4xi1>
  %3 = nn.where %c, %2, %y : tensor<4xi1>, tensor<4xf32>, tensor<1xf32> -> tensor<4xf32>
  %4 = nn.broadcast_to %3 {shape = array<i64: 3, 4>} : tensor<4xf32> -> tensor<3x4xf32>
  %5 = nn.mul %4, %4 : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
  %l = nn.reduce_sum %5 {axes = array<i64: 0, 1>, keepdims = false} : tensor<3x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// Matrix products: a shared weight, batch broadcasting both ways.
// CHECK-LABEL: func.func @matmul
// CHECK-SAME: train.grad_of
// CHECK-SAME: kernel.arena_bytes
func.func @matmul(%a: tensor<2x3x4xf32> {train.binding = #train.binding<input "a">},
                  %w: tensor<4x5xf32> {train.binding = #train.binding<param "w">},
                  %v: tensor<1x5x2xf32> {train.binding = #train.binding<param "v">},
                  %u: tensor<3x2xf32> {train.binding = #train.binding<param "u">},
                  %e: tensor<2x2x4xf32> {train.binding = #train.binding<input "e">},
                  %u2: tensor<2x3xf32> {train.binding = #train.binding<param "u2">}) -> tensor<f32> {
  %0 = nn.matmul %a, %w : tensor<2x3x4xf32>, tensor<4x5xf32> -> tensor<2x3x5xf32>
  %1 = nn.matmul %0, %v : tensor<2x3x5xf32>, tensor<1x5x2xf32> -> tensor<2x3x2xf32>
  %2 = nn.matmul %u, %e : tensor<3x2xf32>, tensor<2x2x4xf32> -> tensor<2x3x4xf32>
  %3 = nn.matmul %2, %w : tensor<2x3x4xf32>, tensor<4x5xf32> -> tensor<2x3x5xf32>
  %s1 = nn.reduce_sum %1 {axes = array<i64: 0, 1, 2>, keepdims = false} : tensor<2x3x2xf32> -> tensor<f32>
  %sq = nn.mul %3, %3 : tensor<2x3x5xf32>, tensor<2x3x5xf32> -> tensor<2x3x5xf32>
  %s3 = nn.reduce_sum %sq {axes = array<i64: 0, 1, 2>, keepdims = false} : tensor<2x3x5xf32> -> tensor<f32>
  %p = nn.matmul %u, %u2 : tensor<3x2xf32>, tensor<2x3xf32> -> tensor<3x3xf32>
  %sp = nn.reduce_sum %p {axes = array<i64: 0, 1>, keepdims = false} : tensor<3x3xf32> -> tensor<f32>
  %s13 = nn.add %s1, %s3 : tensor<f32>, tensor<f32> -> tensor<f32>
  %l = nn.add %s13, %sp : tensor<f32>, tensor<f32> -> tensor<f32>
  return %l : tensor<f32>
}

// Normalizations, with and without bias; every operand of batch_norm
// depends on a parameter.
// CHECK-LABEL: func.func @normalization
// CHECK-SAME: train.grad_of
// CHECK-SAME: kernel.arena_bytes
func.func @normalization(%x: tensor<2x3x4xf32> {train.binding = #train.binding<input "x">},
                         %g: tensor<3x4xf32> {train.binding = #train.binding<param "g">},
                         %b: tensor<3x4xf32> {train.binding = #train.binding<param "b">},
                         %s: tensor<3xf32> {train.binding = #train.binding<param "s">},
                         %m: tensor<3xf32> {train.binding = #train.binding<param "m">},
                         %v: tensor<3xf32> {train.binding = #train.binding<param "v">},
                         %k: tensor<4xf32> {train.binding = #train.binding<param "k">}) -> tensor<f32> {
  %one = arith.constant dense<1.0> : tensor<f32>
  %0 = nn.layer_norm %x, %g, %b {axis = 1 : i64, epsilon = 1.000000e-05 : f64}
    : tensor<2x3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32> -> tensor<2x3x4xf32>
  %1 = nn.layer_norm %0, %k {axis = 2 : i64, epsilon = 1.000000e-05 : f64}
    : tensor<2x3x4xf32>, tensor<4xf32> -> tensor<2x3x4xf32>
  %vv = nn.mul %v, %v : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  %var = nn.add %vv, %one : tensor<3xf32>, tensor<f32> -> tensor<3xf32>
  %2 = nn.batch_norm %1, %s, %m, %m, %var {epsilon = 1.000000e-05 : f64}
    : tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32> -> tensor<2x3x4xf32>
  %3 = nn.mul %2, %x : tensor<2x3x4xf32>, tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  %l = nn.reduce_sum %3 {axes = array<i64: 0, 1, 2>, keepdims = false} : tensor<2x3x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// Root-mean-square normalizations (nn.layer_norm with rms), over the last
// two dimensions with a bias and over the last one without: no mean is
// subtracted, so the input's gradient has no mean(dn) term.
// CHECK-LABEL: func.func @rms_normalization
// CHECK-SAME: train.grad_of
// CHECK-SAME: kernel.arena_bytes
func.func @rms_normalization(%x: tensor<2x3x4xf32> {train.binding = #train.binding<param "x">},
                             %g: tensor<3x4xf32> {train.binding = #train.binding<param "g">},
                             %b: tensor<3x4xf32> {train.binding = #train.binding<param "b">},
                             %k: tensor<4xf32> {train.binding = #train.binding<param "k">}) -> tensor<f32> {
  %0 = nn.layer_norm %x, %g, %b {axis = 1 : i64, epsilon = 1.000000e-05 : f64, rms}
    : tensor<2x3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32> -> tensor<2x3x4xf32>
  %1 = nn.layer_norm %0, %k {axis = 2 : i64, epsilon = 1.000000e-01 : f64, rms}
    : tensor<2x3x4xf32>, tensor<4xf32> -> tensor<2x3x4xf32>
  %2 = nn.mul %1, %x : tensor<2x3x4xf32>, tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  %l = nn.reduce_sum %2 {axes = array<i64: 0, 1, 2>, keepdims = false} : tensor<2x3x4xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// Softmax and log-softmax along inner and outer axes.
// CHECK-LABEL: func.func @softmax
// CHECK-SAME: train.grad_of
// CHECK-SAME: kernel.arena_bytes
func.func @softmax(%x: tensor<3x5xf32> {train.binding = #train.binding<param "x">},
                   %c: tensor<3x5xf32> {train.binding = #train.binding<input "c">}) -> tensor<f32> {
  %0 = nn.softmax %x {axis = 1 : i64} : tensor<3x5xf32> -> tensor<3x5xf32>
  %1 = nn.log_softmax %x {axis = 0 : i64} : tensor<3x5xf32> -> tensor<3x5xf32>
  %2 = nn.add %0, %1 : tensor<3x5xf32>, tensor<3x5xf32> -> tensor<3x5xf32>
  %3 = nn.mul %2, %c : tensor<3x5xf32>, tensor<3x5xf32> -> tensor<3x5xf32>
  %l = nn.reduce_sum %3 {axes = array<i64: 0, 1>, keepdims = false} : tensor<3x5xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// Reductions with and without kept dimensions.
// CHECK-LABEL: func.func @reductions
// CHECK-SAME: train.grad_of
// CHECK-SAME: kernel.arena_bytes
func.func @reductions(%x: tensor<2x3x4xf32> {train.binding = #train.binding<param "x">},
                      %c: tensor<2x1x4xf32> {train.binding = #train.binding<input "c">}) -> tensor<f32> {
  %0 = nn.reduce_sum %x {axes = array<i64: 1>, keepdims = true} : tensor<2x3x4xf32> -> tensor<2x1x4xf32>
  %1 = nn.reduce_mean %x {axes = array<i64: 0, 2>, keepdims = false} : tensor<2x3x4xf32> -> tensor<3xf32>
  %2 = nn.reduce_max %x {axes = array<i64: 1>, keepdims = false} : tensor<2x3x4xf32> -> tensor<2x4xf32>
  %3 = nn.mul %0, %c : tensor<2x1x4xf32>, tensor<2x1x4xf32> -> tensor<2x1x4xf32>
  %4 = nn.mul %1, %1 : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  %5 = nn.mul %2, %2 : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
  %l3 = nn.reduce_sum %3 {axes = array<i64: 0, 1, 2>, keepdims = false} : tensor<2x1x4xf32> -> tensor<f32>
  %l4 = nn.reduce_sum %4 {axes = array<i64: 0>, keepdims = false} : tensor<3xf32> -> tensor<f32>
  %l5 = nn.reduce_sum %5 {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x4xf32> -> tensor<f32>
  %l34 = nn.add %l3, %l4 : tensor<f32>, tensor<f32> -> tensor<f32>
  %l = nn.add %l34, %l5 : tensor<f32>, tensor<f32> -> tensor<f32>
  return %l : tensor<f32>
}

// Data movement that lowers to existing kernels.
// CHECK-LABEL: func.func @movement
// CHECK-SAME: train.grad_of
// CHECK-SAME: kernel.arena_bytes
func.func @movement(%x: tensor<2x3x4xf32> {train.binding = #train.binding<param "x">},
                    %y: tensor<2x4x3xf32> {train.binding = #train.binding<param "y">},
                    %c: tensor<4x6xf32> {train.binding = #train.binding<input "c">}) -> tensor<f32> {
  %0 = nn.transpose %x {perm = array<i64: 0, 2, 1>} : tensor<2x3x4xf32> -> tensor<2x4x3xf32>
  %1 = nn.concat %0, %y {axis = 2 : i64} : tensor<2x4x3xf32>, tensor<2x4x3xf32> -> tensor<2x4x6xf32>
  %2 = nn.reshape %1 : tensor<2x4x6xf32> -> tensor<8x6xf32>
  %3 = nn.trilu %2 {upper = true, diagonal = 1 : i64} : tensor<8x6xf32> -> tensor<8x6xf32>
  %4 = nn.reshape %3 : tensor<8x6xf32> -> tensor<2x4x6xf32>
  %5 = nn.mul %4, %c : tensor<2x4x6xf32>, tensor<4x6xf32> -> tensor<2x4x6xf32>
  %l = nn.reduce_sum %5 {axes = array<i64: 0, 1, 2>, keepdims = false} : tensor<2x4x6xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// Llama's rotary embedding, x * cos + rotate_half(x) * sin, and the inverse
// turn: each turn's gradient is the other.
// CHECK-LABEL: func.func @rotary
// CHECK-SAME: train.grad_of
// CHECK-SAME: kernel.arena_bytes
func.func @rotary(%x: tensor<2x3x8xf32> {train.binding = #train.binding<param "x">},
                  %cos: tensor<3x8xf32> {train.binding = #train.binding<input "cos">},
                  %sin: tensor<3x8xf32> {train.binding = #train.binding<input "sin">}) -> tensor<f32> {
  %0 = nn.mul %x, %cos : tensor<2x3x8xf32>, tensor<3x8xf32> -> tensor<2x3x8xf32>
  %1 = nn.rotate_half %x {inverse = false} : tensor<2x3x8xf32> -> tensor<2x3x8xf32>
  %2 = nn.mul %1, %sin : tensor<2x3x8xf32>, tensor<3x8xf32> -> tensor<2x3x8xf32>
  %3 = nn.add %0, %2 : tensor<2x3x8xf32>, tensor<2x3x8xf32> -> tensor<2x3x8xf32>
  %4 = nn.rotate_half %3 {inverse = true} : tensor<2x3x8xf32> -> tensor<2x3x8xf32>
  %5 = nn.mul %4, %4 : tensor<2x3x8xf32>, tensor<2x3x8xf32> -> tensor<2x3x8xf32>
  %6 = nn.mul %5, %cos : tensor<2x3x8xf32>, tensor<3x8xf32> -> tensor<2x3x8xf32>
  %l = nn.reduce_sum %6 {axes = array<i64: 0, 1, 2>, keepdims = false} : tensor<2x3x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// nn.rotary, both forms, with tables that are parameters too (broadcast
// over the batch): x's gradient is the other form, each table's a sum of
// products over what it broadcasts to.
// CHECK-LABEL: func.func @rotary_op
// CHECK-SAME: train.grad_of
// CHECK-SAME: kernel.arena_bytes
func.func @rotary_op(%x: tensor<2x3x8xf32> {train.binding = #train.binding<param "x">},
                     %cos: tensor<3x8xf32> {train.binding = #train.binding<param "cos">},
                     %sin: tensor<3x8xf32> {train.binding = #train.binding<param "sin">}) -> tensor<f32> {
  %0 = nn.rotary %x, %cos, %sin {inverse = false} : tensor<2x3x8xf32>, tensor<3x8xf32>, tensor<3x8xf32> -> tensor<2x3x8xf32>
  %1 = nn.rotary %0, %sin, %cos {inverse = true} : tensor<2x3x8xf32>, tensor<3x8xf32>, tensor<3x8xf32> -> tensor<2x3x8xf32>
  %2 = nn.mul %1, %1 : tensor<2x3x8xf32>, tensor<2x3x8xf32> -> tensor<2x3x8xf32>
  %3 = nn.mul %2, %0 : tensor<2x3x8xf32>, tensor<2x3x8xf32> -> tensor<2x3x8xf32>
  %l = nn.reduce_sum %3 {axes = array<i64: 0, 1, 2>, keepdims = false} : tensor<2x3x8xf32> -> tensor<f32>
  return %l : tensor<f32>
}

// The negative log-likelihood in its three reductions, with class weights,
// ignore_index and a spatial dimension.
// CHECK-LABEL: func.func @loss
// CHECK-SAME: train.grad_of
// CHECK-SAME: kernel.arena_bytes
func.func @loss(%x: tensor<4x5xf32> {train.binding = #train.binding<param "x">},
                %t: tensor<4xi64> {train.binding = #train.binding<input "t">},
                %t2: tensor<4xi64> {train.binding = #train.binding<input "t2">},
                %wt: tensor<5xf32> {train.binding = #train.binding<input "wt">},
                %z: tensor<2x3x2xf32> {train.binding = #train.binding<param "z">},
                %tz: tensor<2x2xi32> {train.binding = #train.binding<input "tz">}) -> tensor<f32> {
  %lp = nn.log_softmax %x {axis = 1 : i64} : tensor<4x5xf32> -> tensor<4x5xf32>
  %0 = nn.nll_loss %lp, %t, %wt {reduction = "mean", ignore_index = -100 : i64}
    : tensor<4x5xf32>, tensor<4xi64>, tensor<5xf32> -> tensor<f32>
  %1 = nn.nll_loss %lp, %t2 {reduction = "sum", ignore_index = 1 : i64}
    : tensor<4x5xf32>, tensor<4xi64> -> tensor<f32>
  %2 = nn.nll_loss %lp, %t {reduction = "mean", ignore_index = -100 : i64}
    : tensor<4x5xf32>, tensor<4xi64> -> tensor<f32>
  %3 = nn.nll_loss %lp, %t2 {reduction = "mean"}
    : tensor<4x5xf32>, tensor<4xi64> -> tensor<f32>
  %4 = nn.nll_loss %z, %tz {reduction = "none"}
    : tensor<2x3x2xf32>, tensor<2x2xi32> -> tensor<2x2xf32>
  %5 = nn.mul %4, %4 : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
  %6 = nn.reduce_sum %5 {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x2xf32> -> tensor<f32>
  %s0 = nn.add %0, %1 : tensor<f32>, tensor<f32> -> tensor<f32>
  %s1 = nn.add %s0, %2 : tensor<f32>, tensor<f32> -> tensor<f32>
  %s2 = nn.add %s1, %3 : tensor<f32>, tensor<f32> -> tensor<f32>
  %l = nn.add %s2, %6 : tensor<f32>, tensor<f32> -> tensor<f32>
  return %l : tensor<f32>
}
// gradient-check @loss t2 = [1, 3, 1, 0]
// gradient-check @loss t = [0, 4, -100, 1]
// gradient-check @loss wt = [0.5, 1.0, 2.0, 1.5, 0.25]
// gradient-check @loss tz = [[0, 2], [1, 1]]
