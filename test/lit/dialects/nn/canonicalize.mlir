// RUN: ztc-opt %s -canonicalize | FileCheck %s

// Folding of nn ops: constant evaluation of small tensors (materialized as
// arith.constant), identities, and the cases that must not fold.

// PyTorch's shape arithmetic (Shape -> Gather -> Unsqueeze -> Mul -> Concat)
// on a static shape collapses into one constant, ready to become a reshape.
// CHECK-LABEL: func.func @shape_chain
// CHECK-NEXT: %[[C:.+]] = arith.constant dense<[2, 12]> : tensor<2xi64>
// CHECK-NEXT: return %[[C]]
func.func @shape_chain() -> tensor<2xi64> {
  %shape = arith.constant dense<[2, 3, 4]> : tensor<3xi64>
  %i0 = arith.constant dense<0> : tensor<i64>
  %i1 = arith.constant dense<[1]> : tensor<1xi64>
  %i2 = arith.constant dense<[-1]> : tensor<1xi64>
  %d0 = nn.gather %shape, %i0 {axis = 0 : i64} : tensor<3xi64>, tensor<i64> -> tensor<i64>
  %d1 = nn.gather %shape, %i1 {axis = 0 : i64} : tensor<3xi64>, tensor<1xi64> -> tensor<1xi64>
  %d2 = nn.gather %shape, %i2 {axis = 0 : i64} : tensor<3xi64>, tensor<1xi64> -> tensor<1xi64>
  %u0 = nn.reshape %d0 : tensor<i64> -> tensor<1xi64>
  %p = nn.mul %d1, %d2 : tensor<1xi64>, tensor<1xi64> -> tensor<1xi64>
  %r = nn.concat %u0, %p {axis = 0 : i64} : tensor<1xi64>, tensor<1xi64> -> tensor<2xi64>
  return %r : tensor<2xi64>
}

// Integer arithmetic broadcasts; division truncates toward zero.
// CHECK-LABEL: func.func @int_arithmetic
// CHECK-DAG: arith.constant dense<{{\[}}[11, 21, 31], [12, 22, 32]]> : tensor<2x3xi64>
// CHECK-DAG: arith.constant dense<[-9, -19, -29]> : tensor<3xi64>
// CHECK-DAG: arith.constant dense<[-3, 3, -3]> : tensor<3xi32>
// CHECK-DAG: arith.constant dense<[70, 20, 30]> : tensor<3xi64>
// CHECK-DAG: arith.constant dense<[9, 1, 1]> : tensor<3xi64>
// CHECK-NOT: nn.
func.func @int_arithmetic() -> (tensor<2x3xi64>, tensor<3xi64>, tensor<3xi32>,
                                tensor<3xi64>, tensor<3xi64>) {
  %col = arith.constant dense<[[1], [2]]> : tensor<2x1xi64>
  %row = arith.constant dense<[10, 20, 30]> : tensor<3xi64>
  %one = arith.constant dense<1> : tensor<i64>
  %seven = arith.constant dense<[-7, 7, 7]> : tensor<3xi32>
  %two = arith.constant dense<[2, 2, -2]> : tensor<3xi32>
  %small = arith.constant dense<[70, 2, 0]> : tensor<3xi64>
  %0 = nn.add %col, %row : tensor<2x1xi64>, tensor<3xi64> -> tensor<2x3xi64>
  %1 = nn.sub %one, %row : tensor<i64>, tensor<3xi64> -> tensor<3xi64>
  %2 = nn.div %seven, %two : tensor<3xi32>, tensor<3xi32> -> tensor<3xi32>
  %3 = nn.max %small, %row : tensor<3xi64>, tensor<3xi64> -> tensor<3xi64>
  %m = nn.min %small, %row : tensor<3xi64>, tensor<3xi64> -> tensor<3xi64>
  %4 = nn.min %m, %small : tensor<3xi64>, tensor<3xi64> -> tensor<3xi64>
  %5 = nn.sub %4, %one : tensor<3xi64>, tensor<i64> -> tensor<3xi64>
  %6 = nn.max %5, %one : tensor<3xi64>, tensor<i64> -> tensor<3xi64>
  return %0, %1, %2, %3, %6 : tensor<2x3xi64>, tensor<3xi64>, tensor<3xi32>,
                              tensor<3xi64>, tensor<3xi64>
}

// Integer division by zero is left to run time.
// CHECK-LABEL: func.func @div_by_zero
// CHECK: nn.div
func.func @div_by_zero() -> tensor<2xi64> {
  %a = arith.constant dense<[4, 5]> : tensor<2xi64>
  %b = arith.constant dense<[2, 0]> : tensor<2xi64>
  %0 = nn.div %a, %b : tensor<2xi64>, tensor<2xi64> -> tensor<2xi64>
  return %0 : tensor<2xi64>
}

// Float arithmetic and negation fold too.
// CHECK-LABEL: func.func @float_arithmetic
// CHECK-DAG: arith.constant dense<[2.500000e+00, 3.500000e+00]> : tensor<2xf32>
// CHECK-DAG: arith.constant dense<[-1.000000e+00, -2.000000e+00]> : tensor<2xf32>
// CHECK-DAG: arith.constant dense<[1.000000e+00, 7.500000e-01]> : tensor<2xf32>
// CHECK-DAG: arith.constant dense<[-3, 4]> : tensor<2xi8>
// CHECK-NOT: nn.
func.func @float_arithmetic() -> (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>,
                                  tensor<2xi8>) {
  %a = arith.constant dense<1.5> : tensor<f32>
  %b = arith.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %i = arith.constant dense<[3, -4]> : tensor<2xi8>
  %0 = nn.add %a, %b : tensor<f32>, tensor<2xf32> -> tensor<2xf32>
  %1 = nn.neg %b : tensor<2xf32> -> tensor<2xf32>
  %2 = nn.div %a, %b : tensor<f32>, tensor<2xf32> -> tensor<2xf32>
  %3 = nn.mul %2, %b : tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>
  %4 = nn.sub %3, %a : tensor<2xf32>, tensor<f32> -> tensor<2xf32>
  %5 = nn.max %4, %2 : tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>
  %6 = nn.min %5, %b : tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>
  %7 = nn.neg %i : tensor<2xi8> -> tensor<2xi8>
  return %0, %1, %6, %7 : tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xi8>
}

// Comparisons and logic produce i1 constants.
// CHECK-LABEL: func.func @compare_and_logic
// CHECK-DAG: arith.constant dense<[false, true, false]> : tensor<3xi1>
// CHECK-DAG: arith.constant dense<[true, false, false]> : tensor<3xi1>
// CHECK-DAG: arith.constant dense<[false, false, true]> : tensor<3xi1>
// CHECK-DAG: arith.constant dense<[true, true, false]> : tensor<3xi1>
// CHECK-DAG: arith.constant dense<[true, false, true]> : tensor<3xi1>
// CHECK-NOT: nn.
func.func @compare_and_logic() -> (tensor<3xi1>, tensor<3xi1>, tensor<3xi1>,
                                   tensor<3xi1>, tensor<3xi1>) {
  %a = arith.constant dense<[1, 2, 3]> : tensor<3xi64>
  %b = arith.constant dense<2> : tensor<i64>
  %f = arith.constant dense<[-1.0, 0.0, 1.0]> : tensor<3xf32>
  %z = arith.constant dense<0.0> : tensor<f32>
  %eq = nn.equal %a, %b : tensor<3xi64>, tensor<i64> -> tensor<3xi1>
  %lt = nn.less %a, %b : tensor<3xi64>, tensor<i64> -> tensor<3xi1>
  %gt = nn.greater %f, %z : tensor<3xf32>, tensor<f32> -> tensor<3xi1>
  %or = nn.or %eq, %lt : tensor<3xi1>, tensor<3xi1> -> tensor<3xi1>
  %not = nn.not %eq : tensor<3xi1> -> tensor<3xi1>
  %and = nn.and %not, %not : tensor<3xi1>, tensor<3xi1> -> tensor<3xi1>
  return %eq, %lt, %gt, %or, %and : tensor<3xi1>, tensor<3xi1>, tensor<3xi1>,
                                    tensor<3xi1>, tensor<3xi1>
}

// where selects between constants with broadcasting; a uniform constant
// condition selects an operand of the result type whole.
// CHECK-LABEL: func.func @where
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32>, %[[Y:.+]]: tensor<2x3xf32>)
// CHECK: %[[C:.+]] = arith.constant dense<{{\[}}[1, 0, 1], [1, 0, 1]]> : tensor<2x3xi64>
// CHECK-NEXT: return %[[C]], %[[Y]]
func.func @where(%x: tensor<2x3xf32>, %y: tensor<2x3xf32>)
    -> (tensor<2x3xi64>, tensor<2x3xf32>) {
  %c = arith.constant dense<[true, false, true]> : tensor<3xi1>
  %a = arith.constant dense<1> : tensor<i64>
  %b = arith.constant dense<0> : tensor<2x1xi64>
  %0 = nn.where %c, %a, %b : tensor<3xi1>, tensor<i64>, tensor<2x1xi64> -> tensor<2x3xi64>
  %no = arith.constant dense<false> : tensor<i1>
  %1 = nn.where %no, %x, %y : tensor<i1>, tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  return %0, %1 : tensor<2x3xi64>, tensor<2x3xf32>
}

// Casts follow ONNX: floats truncate toward zero into integers, conversion to
// i1 tests for non-zero, i1 widens to 0 or 1; a cast to the same type is the
// operand.
// CHECK-LABEL: func.func @cast
// CHECK-SAME: (%[[X:.+]]: tensor<2xf32>)
// CHECK-DAG: arith.constant dense<[-2, 3]> : tensor<2xi32>
// CHECK-DAG: arith.constant dense<[-2.000000e+00, 3.000000e+00]> : tensor<2xf16>
// CHECK-DAG: arith.constant dense<[1, 0]> : tensor<2xi64>
// CHECK-DAG: arith.constant dense<[2.500000e-01, -3.000000e+00]> : tensor<2xf64>
// CHECK-NOT: nn.cast
// CHECK: return {{.*}}, %[[X]]
func.func @cast(%x: tensor<2xf32>) -> (tensor<2xi32>, tensor<2xf16>, tensor<2xi64>,
                                      tensor<2xf64>, tensor<2xf32>) {
  %f = arith.constant dense<[-2.7, 3.2]> : tensor<2xf32>
  %i = arith.constant dense<[-2, 0]> : tensor<2xi8>
  %q = arith.constant dense<[0.25, -3.0]> : tensor<2xf32>
  %0 = nn.cast %f : tensor<2xf32> -> tensor<2xi32>
  %1 = nn.cast %0 : tensor<2xi32> -> tensor<2xf16>
  %b = nn.cast %i : tensor<2xi8> -> tensor<2xi1>
  %2 = nn.cast %b : tensor<2xi1> -> tensor<2xi64>
  %3 = nn.cast %q : tensor<2xf32> -> tensor<2xf64>
  %4 = nn.cast %x : tensor<2xf32> -> tensor<2xf32>
  return %0, %1, %2, %3, %4 : tensor<2xi32>, tensor<2xf16>, tensor<2xi64>,
                              tensor<2xf64>, tensor<2xf32>
}

// A NaN has no integer value: the cast stays.
// CHECK-LABEL: func.func @cast_nan
// CHECK: nn.cast
func.func @cast_nan() -> tensor<1xi32> {
  %f = arith.constant dense<0x7FC00000> : tensor<1xf32>
  %0 = nn.cast %f : tensor<1xf32> -> tensor<1xi32>
  return %0 : tensor<1xi32>
}

// Data movement on constants: reshape, transpose, slice with a backward
// step, broadcast_to.
// CHECK-LABEL: func.func @data_movement
// CHECK-DAG: arith.constant dense<[1, 2, 3, 4, 5, 6]> : tensor<6xi64>
// CHECK-DAG: arith.constant dense<{{\[}}[1, 4], [2, 5], [3, 6]]> : tensor<3x2xi64>
// CHECK-DAG: arith.constant dense<{{\[}}[6, 4]]> : tensor<1x2xi64>
// CHECK-DAG: arith.constant dense<{{\[}}[1.000000e+00, 2.000000e+00], [1.000000e+00, 2.000000e+00]]> : tensor<2x2xf32>
// CHECK-NOT: nn.
func.func @data_movement() -> (tensor<6xi64>, tensor<3x2xi64>, tensor<1x2xi64>,
                               tensor<2x2xf32>) {
  %m = arith.constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi64>
  %v = arith.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %0 = nn.reshape %m : tensor<2x3xi64> -> tensor<6xi64>
  %1 = nn.transpose %m {perm = array<i64: 1, 0>} : tensor<2x3xi64> -> tensor<3x2xi64>
  %2 = nn.slice %m {starts = array<i64: 1, 2>, sizes = array<i64: 1, 2>,
         steps = array<i64: 1, -2>} : tensor<2x3xi64> -> tensor<1x2xi64>
  %3 = nn.broadcast_to %v {shape = array<i64: 2, 2>} : tensor<2xf32> -> tensor<2x2xf32>
  return %0, %1, %2, %3 : tensor<6xi64>, tensor<3x2xi64>, tensor<1x2xi64>,
                          tensor<2x2xf32>
}

// Concat of constants along an inner axis interleaves rows.
// CHECK-LABEL: func.func @concat
// CHECK-NEXT: %[[C:.+]] = arith.constant dense<{{\[}}[1, 2, 7], [3, 4, 8]]> : tensor<2x3xi32>
// CHECK-NEXT: return %[[C]]
func.func @concat() -> tensor<2x3xi32> {
  %a = arith.constant dense<[[1, 2], [3, 4]]> : tensor<2x2xi32>
  %b = arith.constant dense<[[7], [8]]> : tensor<2x1xi32>
  %0 = nn.concat %a, %b {axis = 1 : i64} : tensor<2x2xi32>, tensor<2x1xi32> -> tensor<2x3xi32>
  return %0 : tensor<2x3xi32>
}

// gather of constants takes rows (negative indices count from the end).
// CHECK-LABEL: func.func @gather
// CHECK-NEXT: %[[C:.+]] = arith.constant dense<{{\[}}{{\[}}[5, 6], [1, 2]]]> : tensor<1x2x2xi64>
// CHECK-NEXT: return %[[C]]
func.func @gather() -> tensor<1x2x2xi64> {
  %data = arith.constant dense<[[1, 2], [3, 4], [5, 6]]> : tensor<3x2xi64>
  %idx = arith.constant dense<[[-1, 0]]> : tensor<1x2xi32>
  %0 = nn.gather %data, %idx {axis = 0 : i64} : tensor<3x2xi64>, tensor<1x2xi32> -> tensor<1x2x2xi64>
  return %0 : tensor<1x2x2xi64>
}

// An out-of-range index is undefined: the gather stays.
// CHECK-LABEL: func.func @gather_out_of_range
// CHECK: nn.gather
func.func @gather_out_of_range() -> tensor<1xi64> {
  %data = arith.constant dense<[1, 2, 3]> : tensor<3xi64>
  %idx = arith.constant dense<[3]> : tensor<1xi64>
  %0 = nn.gather %data, %idx {axis = 0 : i64} : tensor<3xi64>, tensor<1xi64> -> tensor<1xi64>
  return %0 : tensor<1xi64>
}

// Integer reductions fold; empty axes reduce nothing.
// CHECK-LABEL: func.func @reductions
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32>)
// CHECK-DAG: arith.constant dense<{{\[}}[6], [15]]> : tensor<2x1xi64>
// CHECK-DAG: arith.constant dense<[4, 5, 6]> : tensor<3xi64>
// CHECK-DAG: arith.constant dense<21> : tensor<i64>
// CHECK-NOT: nn.
// CHECK: return {{.*}}, %[[X]]
func.func @reductions(%x: tensor<2x3xf32>) -> (tensor<2x1xi64>, tensor<3xi64>,
                                               tensor<i64>, tensor<2x3xf32>) {
  %m = arith.constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi64>
  %0 = nn.reduce_sum %m {axes = array<i64: 1>, keepdims = true} : tensor<2x3xi64> -> tensor<2x1xi64>
  %1 = nn.reduce_max %m {axes = array<i64: 0>, keepdims = false} : tensor<2x3xi64> -> tensor<3xi64>
  %2 = nn.reduce_sum %m {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x3xi64> -> tensor<i64>
  %3 = nn.reduce_sum %x {axes = array<i64>, keepdims = true} : tensor<2x3xf32> -> tensor<2x3xf32>
  return %0, %1, %2, %3 : tensor<2x1xi64>, tensor<3xi64>, tensor<i64>, tensor<2x3xf32>
}

// Float sums are not folded (they are model math, not shape math, and
// their rounding is the kernels').
// CHECK-LABEL: func.func @float_reduction
// CHECK: nn.reduce_sum
func.func @float_reduction() -> tensor<f32> {
  %v = arith.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %0 = nn.reduce_sum %v {axes = array<i64: 0>, keepdims = false} : tensor<2xf32> -> tensor<f32>
  return %0 : tensor<f32>
}

// A float maximum is exact, and NaN wins: it folds. An exported attention
// mask (opset 23's) asks which rows are fully masked; the answer, no row,
// folds the guards away: the comparison to -inf becomes a false splat,
// and each where picks its operand whole.
// CHECK-LABEL: func.func @mask_rows
// CHECK-SAME: (%[[P:.+]]: tensor<1x2x3x3xf32>)
// CHECK-DAG: %[[MASK:.+]] = arith.constant dense<{{\[\[\[}}[0.000000e+00, 0xFF800000, 0xFF800000], [0.000000e+00, 0.000000e+00, 0xFF800000], [0.000000e+00, 0.000000e+00, 0.000000e+00]]]]> : tensor<1x1x3x3xf32>
// CHECK-DAG: arith.constant dense<[{{\[\[}}0xFF800000, 0xFF800000, 0x7FC00000]]]> : tensor<1x1x3xf32>
// CHECK-NOT: nn.
// CHECK: return %[[MASK]], %[[P]], %{{.+}}
func.func @mask_rows(%p: tensor<1x2x3x3xf32>) -> (tensor<1x1x3x3xf32>, tensor<1x2x3x3xf32>, tensor<1x1x3xf32>) {
  %mask = arith.constant dense<[[[[0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0]]]]> : tensor<1x1x3x3xf32>
  %inf = arith.constant dense<0xFF800000> : tensor<f32>
  %zero = arith.constant dense<0.0> : tensor<f32>
  %max = nn.reduce_max %mask {axes = array<i64: 3>, keepdims = true} : tensor<1x1x3x3xf32> -> tensor<1x1x3x1xf32>
  %full = nn.equal %max, %inf : tensor<1x1x3x1xf32>, tensor<f32> -> tensor<1x1x3x1xi1>
  %m = nn.where %full, %zero, %mask : tensor<1x1x3x1xi1>, tensor<f32>, tensor<1x1x3x3xf32> -> tensor<1x1x3x3xf32>
  %g = nn.where %full, %zero, %p : tensor<1x1x3x1xi1>, tensor<f32>, tensor<1x2x3x3xf32> -> tensor<1x2x3x3xf32>
  // Along the middle axis: a row of -inf stays -inf, a NaN wins.
  %rows = arith.constant dense<[[[[0xFF800000, 0xFF800000, 1.0], [0xFF800000, 0xFF800000, 0x7FC00000]]]]> : tensor<1x1x2x3xf32>
  %cols = nn.reduce_max %rows {axes = array<i64: 2>, keepdims = false} : tensor<1x1x2x3xf32> -> tensor<1x1x3xf32>
  return %m, %g, %cols : tensor<1x1x3x3xf32>, tensor<1x2x3x3xf32>, tensor<1x1x3xf32>
}

// No-op data movement returns the operand.
// CHECK-LABEL: func.func @identities
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32>)
// CHECK-NOT: nn.
// CHECK: return %[[X]], %[[X]], %[[X]], %[[X]], %[[X]]
func.func @identities(%x: tensor<2x3xf32>)
    -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>,
        tensor<2x3xf32>) {
  %0 = nn.reshape %x : tensor<2x3xf32> -> tensor<2x3xf32>
  %1 = nn.transpose %x {perm = array<i64: 0, 1>} : tensor<2x3xf32> -> tensor<2x3xf32>
  %2 = nn.broadcast_to %x {shape = array<i64: 2, 3>} : tensor<2x3xf32> -> tensor<2x3xf32>
  %3 = nn.concat %x {axis = 0 : i64} : tensor<2x3xf32> -> tensor<2x3xf32>
  %4 = nn.slice %x {starts = array<i64: 0, 0>, sizes = array<i64: 2, 3>,
         steps = array<i64: 1, 1>} : tensor<2x3xf32> -> tensor<2x3xf32>
  return %0, %1, %2, %3, %4 : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>,
                              tensor<2x3xf32>, tensor<2x3xf32>
}

// Results over 65536 elements are never folded, even from splats.
// CHECK-LABEL: func.func @too_large
// CHECK: nn.add
// CHECK: nn.broadcast_to
func.func @too_large() -> (tensor<300x300xi64>, tensor<300x300xi64>) {
  %a = arith.constant dense<1> : tensor<300x300xi64>
  %s = arith.constant dense<2> : tensor<i64>
  %0 = nn.add %a, %s : tensor<300x300xi64>, tensor<i64> -> tensor<300x300xi64>
  %1 = nn.broadcast_to %s {shape = array<i64: 300, 300>} : tensor<i64> -> tensor<300x300xi64>
  return %0, %1 : tensor<300x300xi64>, tensor<300x300xi64>
}

// The gradient of a fused q/k/v projection split three ways: each piece's
// gradient written into zeros, then summed, is the pieces' concat. The sum
// may pair them in any order, and the zeros may still be broadcasts.
// CHECK-LABEL: func.func @split_gradient
// CHECK-SAME: (%[[Q:.+]]: tensor<2x4xf32>, %[[K:.+]]: tensor<2x4xf32>, %[[V:.+]]: tensor<2x4xf32>)
// CHECK-NEXT: %[[C:.+]] = nn.concat %[[Q]], %[[K]], %[[V]] {axis = 1 : i64} : tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x12xf32>
// CHECK-NEXT: return %[[C]]
func.func @split_gradient(%dq: tensor<2x4xf32>, %dk: tensor<2x4xf32>, %dv: tensor<2x4xf32>) -> tensor<2x12xf32> {
  %zero = arith.constant dense<0.0> : tensor<f32>
  %z = nn.broadcast_to %zero {shape = array<i64: 2, 12>} : tensor<f32> -> tensor<2x12xf32>
  %gv = nn.insert_slice %z, %dv {starts = array<i64: 0, 8>, steps = array<i64: 1, 1>} : tensor<2x12xf32>, tensor<2x4xf32> -> tensor<2x12xf32>
  %gq = nn.insert_slice %z, %dq {starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : tensor<2x12xf32>, tensor<2x4xf32> -> tensor<2x12xf32>
  %gk = nn.insert_slice %z, %dk {starts = array<i64: 0, 4>, steps = array<i64: 1, 1>} : tensor<2x12xf32>, tensor<2x4xf32> -> tensor<2x12xf32>
  %s = nn.add %gv, %gq : tensor<2x12xf32>, tensor<2x12xf32> -> tensor<2x12xf32>
  %r = nn.add %gk, %s : tensor<2x12xf32>, tensor<2x12xf32> -> tensor<2x12xf32>
  return %r : tensor<2x12xf32>
}

// Pieces that leave a gap keep zeros there, along any axis.
// CHECK-LABEL: func.func @pieces_with_gap
// CHECK-SAME: (%[[A:.+]]: tensor<1x3xf32>, %[[B:.+]]: tensor<2x3xf32>)
// CHECK-DAG: %[[Z1:.+]] = arith.constant dense<0.000000e+00> : tensor<1x3xf32>
// CHECK-DAG: %[[Z2:.+]] = arith.constant dense<0.000000e+00> : tensor<2x3xf32>
// CHECK: %[[C:.+]] = nn.concat %[[Z1]], %[[A]], %[[Z2]], %[[B]] {axis = 0 : i64} : tensor<1x3xf32>, tensor<1x3xf32>, tensor<2x3xf32>, tensor<2x3xf32> -> tensor<6x3xf32>
// CHECK-NEXT: return %[[C]]
func.func @pieces_with_gap(%a: tensor<1x3xf32>, %b: tensor<2x3xf32>) -> tensor<6x3xf32> {
  %z = arith.constant dense<0.0> : tensor<6x3xf32>
  %ga = nn.insert_slice %z, %a {starts = array<i64: 1, 0>, steps = array<i64: 1, 1>} : tensor<6x3xf32>, tensor<1x3xf32> -> tensor<6x3xf32>
  %gb = nn.insert_slice %z, %b {starts = array<i64: 4, 0>, steps = array<i64: 1, 1>} : tensor<6x3xf32>, tensor<2x3xf32> -> tensor<6x3xf32>
  %r = nn.add %ga, %gb : tensor<6x3xf32>, tensor<6x3xf32> -> tensor<6x3xf32>
  return %r : tensor<6x3xf32>
}

// Sums that are not side-by-side pieces stay sums: overlapping pieces,
// pieces along different axes, a strided slice, a slice into a non-zero
// tensor, a slice cut in two dimensions, and a broadcasting add.
// CHECK-LABEL: func.func @pieces_kept
// CHECK-COUNT-6: nn.add
// CHECK-NOT: nn.concat
func.func @pieces_kept(%a: tensor<2x8xf32>, %b: tensor<4x2xf32>, %c: tensor<2x2xf32>, %d: tensor<4x8xf32>, %e: tensor<8xf32>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %z = arith.constant dense<0.0> : tensor<4x8xf32>
  %p = nn.insert_slice %z, %b {starts = array<i64: 0, 2>, steps = array<i64: 1, 1>} : tensor<4x8xf32>, tensor<4x2xf32> -> tensor<4x8xf32>
  %q = nn.insert_slice %z, %b {starts = array<i64: 0, 3>, steps = array<i64: 1, 1>} : tensor<4x8xf32>, tensor<4x2xf32> -> tensor<4x8xf32>
  %r0 = nn.add %p, %q : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %rows = nn.insert_slice %z, %a {starts = array<i64: 2, 0>, steps = array<i64: 1, 1>} : tensor<4x8xf32>, tensor<2x8xf32> -> tensor<4x8xf32>
  %r1 = nn.add %rows, %p : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %p2 = nn.insert_slice %z, %b {starts = array<i64: 0, 6>, steps = array<i64: 1, 1>} : tensor<4x8xf32>, tensor<4x2xf32> -> tensor<4x8xf32>
  %s = nn.insert_slice %z, %b {starts = array<i64: 0, 1>, steps = array<i64: 1, 2>} : tensor<4x8xf32>, tensor<4x2xf32> -> tensor<4x8xf32>
  %r2 = nn.add %s, %p2 : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %n = nn.insert_slice %d, %b {starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : tensor<4x8xf32>, tensor<4x2xf32> -> tensor<4x8xf32>
  %r3 = nn.add %n, %p2 : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %two = nn.insert_slice %z, %c {starts = array<i64: 1, 1>, steps = array<i64: 1, 1>} : tensor<4x8xf32>, tensor<2x2xf32> -> tensor<4x8xf32>
  %r4 = nn.add %two, %p2 : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %r5 = nn.add %p2, %e : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  return %r0, %r1, %r2, %r3, %r4, %r5 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// A tied embedding's gradient: the head's gradient plus the embedding's
// rows scattered into zeros is the scatter into the head's gradient, on
// either side of the sum, the zeros still a broadcast or a constant.
// CHECK-LABEL: func.func @tied_gradient
// CHECK-SAME: (%[[H:.+]]: tensor<10x4xf32>, %[[IDS:.+]]: tensor<2x3xi64>, %[[U:.+]]: tensor<2x3x4xf32>, %[[G:.+]]: tensor<10x4xf32>)
// CHECK-NEXT: %[[A:.+]] = nn.scatter_add %[[H]], %[[IDS]], %[[U]] {axis = 0 : i64}
// CHECK-NEXT: %[[B:.+]] = nn.scatter_add %[[G]], %[[IDS]], %[[U]] {axis = 0 : i64}
// CHECK-NEXT: return %[[A]], %[[B]]
func.func @tied_gradient(%head: tensor<10x4xf32>, %ids: tensor<2x3xi64>, %u: tensor<2x3x4xf32>, %g: tensor<10x4xf32>)
    -> (tensor<10x4xf32>, tensor<10x4xf32>) {
  %zero = arith.constant dense<0.0> : tensor<f32>
  %z = nn.broadcast_to %zero {shape = array<i64: 10, 4>} : tensor<f32> -> tensor<10x4xf32>
  %s = nn.scatter_add %z, %ids, %u {axis = 0 : i64} : tensor<10x4xf32>, tensor<2x3xi64>, tensor<2x3x4xf32> -> tensor<10x4xf32>
  %r = nn.add %head, %s : tensor<10x4xf32>, tensor<10x4xf32> -> tensor<10x4xf32>
  %z2 = arith.constant dense<0.0> : tensor<10x4xf32>
  %t = nn.scatter_add %z2, %ids, %u {axis = 0 : i64} : tensor<10x4xf32>, tensor<2x3xi64>, tensor<2x3x4xf32> -> tensor<10x4xf32>
  %q = nn.add %t, %g : tensor<10x4xf32>, tensor<10x4xf32> -> tensor<10x4xf32>
  return %r, %q : tensor<10x4xf32>, tensor<10x4xf32>
}

// The sum stays where the scatter's data is not zeros, where the scatter
// has another use (it would run twice), and where the sum broadcasts.
// CHECK-LABEL: func.func @scatter_sums_kept
// CHECK-COUNT-3: nn.add
func.func @scatter_sums_kept(%d: tensor<10x4xf32>, %ids: tensor<3xi64>, %u: tensor<3x4xf32>, %row: tensor<4xf32>)
    -> (tensor<10x4xf32>, tensor<10x4xf32>, tensor<10x4xf32>, tensor<10x4xf32>) {
  %z = arith.constant dense<0.0> : tensor<10x4xf32>
  %one = arith.constant dense<1.0> : tensor<10x4xf32>
  %s1 = nn.scatter_add %one, %ids, %u {axis = 0 : i64} : tensor<10x4xf32>, tensor<3xi64>, tensor<3x4xf32> -> tensor<10x4xf32>
  %r1 = nn.add %d, %s1 : tensor<10x4xf32>, tensor<10x4xf32> -> tensor<10x4xf32>
  %s2 = nn.scatter_add %z, %ids, %u {axis = 0 : i64} : tensor<10x4xf32>, tensor<3xi64>, tensor<3x4xf32> -> tensor<10x4xf32>
  %r2 = nn.add %d, %s2 : tensor<10x4xf32>, tensor<10x4xf32> -> tensor<10x4xf32>
  %s3 = nn.scatter_add %z, %ids, %u {axis = 0 : i64} : tensor<10x4xf32>, tensor<3xi64>, tensor<3x4xf32> -> tensor<10x4xf32>
  %r3 = nn.add %s3, %row : tensor<10x4xf32>, tensor<4xf32> -> tensor<10x4xf32>
  return %r1, %r2, %s2, %r3 : tensor<10x4xf32>, tensor<10x4xf32>, tensor<10x4xf32>, tensor<10x4xf32>
}

// The cross-entropy's backward: each row's weight scattered to its label
// by a one-hot selection, then summed over the classes again by
// log-softmax's backward. The sum is the weight where the label is a class
// (0 <= label < 4), zero elsewhere, with no [rows, classes] tensor.
// CHECK-LABEL: func.func @sum_of_one_hot
// CHECK-SAME: (%[[L:.+]]: tensor<3x1xi64>, %[[W:.+]]: tensor<3x1xf32>)
// CHECK-NOT: nn.reduce_sum
// CHECK-DAG: %[[ZERO:.+]] = arith.constant dense<0> : tensor<i64>
// CHECK-DAG: %[[FOUR:.+]] = arith.constant dense<4> : tensor<i64>
// CHECK-DAG: %[[FZERO:.+]] = arith.constant dense<0.000000e+00> : tensor<f32>
// CHECK: %[[BELOW:.+]] = nn.less %[[L]], %[[ZERO]]
// CHECK: %[[UNDER:.+]] = nn.less %[[L]], %[[FOUR]]
// CHECK: %[[NOT:.+]] = nn.not %[[BELOW]]
// CHECK: %[[IN:.+]] = nn.and %[[NOT]], %[[UNDER]]
// CHECK: %[[S:.+]] = nn.where %[[IN]], %[[W]], %[[FZERO]] : tensor<3x1xi1>, tensor<3x1xf32>, tensor<f32> -> tensor<3x1xf32>
// CHECK-NOT: nn.reduce_sum
// CHECK: %[[R:.+]] = nn.reshape %{{.+}} : tensor<3x1xf32> -> tensor<3xf32>
// CHECK: return %[[S]], %[[R]]
func.func @sum_of_one_hot(%labels: tensor<3x1xi64>, %w: tensor<3x1xf32>) -> (tensor<3x1xf32>, tensor<3xf32>) {
  %iota = arith.constant dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>
  %zero = arith.constant dense<0.0> : tensor<f32>
  %hot = nn.equal %iota, %labels : tensor<1x4xi64>, tensor<3x1xi64> -> tensor<3x4xi1>
  %g = nn.where %hot, %w, %zero : tensor<3x4xi1>, tensor<3x1xf32>, tensor<f32> -> tensor<3x4xf32>
  %s = nn.reduce_sum %g {axes = array<i64: 1>, keepdims = true} : tensor<3x4xf32> -> tensor<3x1xf32>
  %r = nn.reduce_sum %g {axes = array<i64: 1>, keepdims = false} : tensor<3x4xf32> -> tensor<3xf32>
  return %s, %r : tensor<3x1xf32>, tensor<3xf32>
}

// Sums that stay: indices that are not 0, 1, ... in order, a sum along
// the axis the weight varies on, a selection of non-zeros, a sum over two
// axes, and indices that do not cover the axis (one index, 0, matched by
// all four columns the zeros stretch the selection to).
// CHECK-LABEL: func.func @sums_kept
// CHECK-COUNT-5: nn.reduce_sum
func.func @sums_kept(%labels: tensor<3x1xi64>, %w: tensor<3x1xf32>, %v: tensor<3x4xf32>, %one: tensor<f32>)
    -> (tensor<3x1xf32>, tensor<3x1xf32>, tensor<3x1xf32>, tensor<f32>, tensor<3x1xf32>) {
  %zero = arith.constant dense<0.0> : tensor<f32>
  %odd = arith.constant dense<[[0, 2, 1, 3]]> : tensor<1x4xi64>
  %iota = arith.constant dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>
  %h0 = nn.equal %odd, %labels : tensor<1x4xi64>, tensor<3x1xi64> -> tensor<3x4xi1>
  %g0 = nn.where %h0, %w, %zero : tensor<3x4xi1>, tensor<3x1xf32>, tensor<f32> -> tensor<3x4xf32>
  %s0 = nn.reduce_sum %g0 {axes = array<i64: 1>, keepdims = true} : tensor<3x4xf32> -> tensor<3x1xf32>
  %h1 = nn.equal %iota, %labels : tensor<1x4xi64>, tensor<3x1xi64> -> tensor<3x4xi1>
  %g1 = nn.where %h1, %v, %zero : tensor<3x4xi1>, tensor<3x4xf32>, tensor<f32> -> tensor<3x4xf32>
  %s1 = nn.reduce_sum %g1 {axes = array<i64: 1>, keepdims = true} : tensor<3x4xf32> -> tensor<3x1xf32>
  %g2 = nn.where %h1, %w, %one : tensor<3x4xi1>, tensor<3x1xf32>, tensor<f32> -> tensor<3x4xf32>
  %s2 = nn.reduce_sum %g2 {axes = array<i64: 1>, keepdims = true} : tensor<3x4xf32> -> tensor<3x1xf32>
  %s3 = nn.reduce_sum %g1 {axes = array<i64: 0, 1>, keepdims = false} : tensor<3x4xf32> -> tensor<f32>
  %first = arith.constant dense<[[0]]> : tensor<1x1xi64>
  %zeros = arith.constant dense<0.0> : tensor<3x4xf32>
  %h4 = nn.equal %first, %labels : tensor<1x1xi64>, tensor<3x1xi64> -> tensor<3x1xi1>
  %g4 = nn.where %h4, %w, %zeros : tensor<3x1xi1>, tensor<3x1xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
  %s4 = nn.reduce_sum %g4 {axes = array<i64: 1>, keepdims = true} : tensor<3x4xf32> -> tensor<3x1xf32>
  return %s0, %s1, %s2, %s3, %s4 : tensor<3x1xf32>, tensor<3x1xf32>, tensor<3x1xf32>, tensor<f32>, tensor<3x1xf32>
}

// GELU written out as arithmetic is nn.gelu of its input, whichever way
// the three factors are multiplied: the exact form as PyTorch's exporter
// writes nn.GELU before ONNX's Gelu (x * (erf(x / sqrt 2) + 1) * 0.5), by
// hand (0.5 * x * (1 + erf(x * 1/sqrt 2))), and the tanh form as Hugging
// Face's GPT-2 writes it (its cube a Pow, or x * x * x).
// CHECK-LABEL: func.func @gelu_steps
// CHECK-SAME: (%[[X:[^:]+]]: tensor<2x8xf32>)
// CHECK-NEXT: %[[A:.+]] = nn.gelu %[[X]] : tensor<2x8xf32> -> tensor<2x8xf32>
// CHECK-NEXT: %[[B:.+]] = nn.gelu %[[X]] : tensor<2x8xf32> -> tensor<2x8xf32>
// CHECK-NEXT: %[[C:.+]] = nn.gelu %[[X]] {approximate = "tanh"} : tensor<2x8xf32> -> tensor<2x8xf32>
// CHECK-NEXT: %[[D:.+]] = nn.gelu %[[X]] {approximate = "tanh"} : tensor<2x8xf32> -> tensor<2x8xf32>
// CHECK-NEXT: return %[[A]], %[[B]], %[[C]], %[[D]]
func.func @gelu_steps(%x: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) {
  %sqrt2 = arith.constant dense<1.41421354> : tensor<f32>
  %rsqrt2 = arith.constant dense<0.707106769> : tensor<f32>
  %one = arith.constant dense<1.0> : tensor<f32>
  %half = arith.constant dense<0.5> : tensor<f32>
  %three = arith.constant dense<3.0> : tensor<f32>
  %kappa = arith.constant dense<0.044715> : tensor<f32>
  %beta = arith.constant dense<0.797884583> : tensor<f32>
  %0 = nn.div %x, %sqrt2 : tensor<2x8xf32>, tensor<f32> -> tensor<2x8xf32>
  %1 = nn.erf %0 : tensor<2x8xf32> -> tensor<2x8xf32>
  %2 = nn.add %1, %one : tensor<2x8xf32>, tensor<f32> -> tensor<2x8xf32>
  %3 = nn.mul %x, %2 : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
  %a = nn.mul %3, %half : tensor<2x8xf32>, tensor<f32> -> tensor<2x8xf32>
  %4 = nn.mul %rsqrt2, %x : tensor<f32>, tensor<2x8xf32> -> tensor<2x8xf32>
  %5 = nn.erf %4 : tensor<2x8xf32> -> tensor<2x8xf32>
  %6 = nn.add %one, %5 : tensor<f32>, tensor<2x8xf32> -> tensor<2x8xf32>
  %7 = nn.mul %half, %x : tensor<f32>, tensor<2x8xf32> -> tensor<2x8xf32>
  %b = nn.mul %7, %6 : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
  %8 = nn.mul %x, %half : tensor<2x8xf32>, tensor<f32> -> tensor<2x8xf32>
  %9 = nn.pow %x, %three : tensor<2x8xf32>, tensor<f32> -> tensor<2x8xf32>
  %10 = nn.mul %9, %kappa : tensor<2x8xf32>, tensor<f32> -> tensor<2x8xf32>
  %11 = nn.add %x, %10 : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
  %12 = nn.mul %11, %beta : tensor<2x8xf32>, tensor<f32> -> tensor<2x8xf32>
  %13 = nn.tanh %12 : tensor<2x8xf32> -> tensor<2x8xf32>
  %14 = nn.add %13, %one : tensor<2x8xf32>, tensor<f32> -> tensor<2x8xf32>
  %c = nn.mul %8, %14 : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
  %15 = nn.mul %x, %x : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
  %16 = nn.mul %15, %x : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
  %17 = nn.mul %kappa, %16 : tensor<f32>, tensor<2x8xf32> -> tensor<2x8xf32>
  %18 = nn.add %17, %x : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
  %19 = nn.mul %beta, %18 : tensor<f32>, tensor<2x8xf32> -> tensor<2x8xf32>
  %20 = nn.tanh %19 : tensor<2x8xf32> -> tensor<2x8xf32>
  %21 = nn.add %one, %20 : tensor<f32>, tensor<2x8xf32> -> tensor<2x8xf32>
  %22 = nn.mul %21, %x : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
  %d = nn.mul %half, %22 : tensor<f32>, tensor<2x8xf32> -> tensor<2x8xf32>
  return %a, %b, %c, %d : tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>
}

// What is not GELU stays: another constant in place of 0.5 or of sqrt 2;
// erf of another value than the factor; a square for the cube; and a bf16
// constant, too coarse to tell sqrt 2 from its neighbours.
// CHECK-LABEL: func.func @not_gelu
// CHECK-NOT: nn.gelu
// CHECK: return
func.func @not_gelu(%x: tensor<2x8xf32>, %y: tensor<2x8xf32>, %h: tensor<2x8xbf16>) -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xbf16>) {
  %sqrt2 = arith.constant dense<1.41421354> : tensor<f32>
  %sqrt3 = arith.constant dense<1.73205078> : tensor<f32>
  %one = arith.constant dense<1.0> : tensor<f32>
  %half = arith.constant dense<0.5> : tensor<f32>
  %third = arith.constant dense<0.333333343> : tensor<f32>
  %two = arith.constant dense<2.0> : tensor<f32>
  %kappa = arith.constant dense<0.044715> : tensor<f32>
  %beta = arith.constant dense<0.797884583> : tensor<f32>
  %0 = nn.div %x, %sqrt2 : tensor<2x8xf32>, tensor<f32> -> tensor<2x8xf32>
  %1 = nn.erf %0 : tensor<2x8xf32> -> tensor<2x8xf32>
  %2 = nn.add %1, %one : tensor<2x8xf32>, tensor<f32> -> tensor<2x8xf32>
  %3 = nn.mul %x, %2 : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
  %a = nn.mul %3, %third : tensor<2x8xf32>, tensor<f32> -> tensor<2x8xf32>
  %4 = nn.div %x, %sqrt3 : tensor<2x8xf32>, tensor<f32> -> tensor<2x8xf32>
  %5 = nn.erf %4 : tensor<2x8xf32> -> tensor<2x8xf32>
  %6 = nn.add %5, %one : tensor<2x8xf32>, tensor<f32> -> tensor<2x8xf32>
  %7 = nn.mul %x, %6 : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
  %b = nn.mul %7, %half : tensor<2x8xf32>, tensor<f32> -> tensor<2x8xf32>
  %8 = nn.div %y, %sqrt2 : tensor<2x8xf32>, tensor<f32> -> tensor<2x8xf32>
  %9 = nn.erf %8 : tensor<2x8xf32> -> tensor<2x8xf32>
  %10 = nn.add %9, %one : tensor<2x8xf32>, tensor<f32> -> tensor<2x8xf32>
  %11 = nn.mul %x, %10 : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
  %c = nn.mul %11, %half : tensor<2x8xf32>, tensor<f32> -> tensor<2x8xf32>
  %12 = nn.pow %x, %two : tensor<2x8xf32>, tensor<f32> -> tensor<2x8xf32>
  %13 = nn.mul %12, %kappa : tensor<2x8xf32>, tensor<f32> -> tensor<2x8xf32>
  %14 = nn.add %x, %13 : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
  %15 = nn.mul %14, %beta : tensor<2x8xf32>, tensor<f32> -> tensor<2x8xf32>
  %16 = nn.tanh %15 : tensor<2x8xf32> -> tensor<2x8xf32>
  %17 = nn.add %16, %one : tensor<2x8xf32>, tensor<f32> -> tensor<2x8xf32>
  %18 = nn.mul %x, %half : tensor<2x8xf32>, tensor<f32> -> tensor<2x8xf32>
  %d = nn.mul %18, %17 : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
  %hsqrt2 = arith.constant dense<1.414> : tensor<bf16>
  %hone = arith.constant dense<1.0> : tensor<bf16>
  %hhalf = arith.constant dense<0.5> : tensor<bf16>
  %19 = nn.div %h, %hsqrt2 : tensor<2x8xbf16>, tensor<bf16> -> tensor<2x8xbf16>
  %20 = nn.erf %19 : tensor<2x8xbf16> -> tensor<2x8xbf16>
  %21 = nn.add %20, %hone : tensor<2x8xbf16>, tensor<bf16> -> tensor<2x8xbf16>
  %22 = nn.mul %h, %21 : tensor<2x8xbf16>, tensor<2x8xbf16> -> tensor<2x8xbf16>
  %e = nn.mul %22, %hhalf : tensor<2x8xbf16>, tensor<bf16> -> tensor<2x8xbf16>
  return %a, %b, %c, %d, %e : tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xbf16>
}

// x * sigmoid(x), either way round and in bf16 too, is nn.silu of x (the
// SiLU of Llama's SwiGLU as exporters write it). A sigmoid something else
// reads, or of another value than the factor, stays.
// CHECK-LABEL: func.func @silu
// CHECK-SAME: (%[[X:[^:]+]]: tensor<2x8xf32>, %[[Y:[^:]+]]: tensor<2x8xf32>, %[[H:[^:]+]]: tensor<2x8xbf16>)
// CHECK-NEXT: %[[A:.+]] = nn.silu %[[X]] : tensor<2x8xf32> -> tensor<2x8xf32>
// CHECK-NEXT: %[[B:.+]] = nn.silu %[[X]] : tensor<2x8xf32> -> tensor<2x8xf32>
// CHECK-NEXT: %[[C:.+]] = nn.silu %[[H]] : tensor<2x8xbf16> -> tensor<2x8xbf16>
// CHECK-NEXT: %[[S:.+]] = nn.sigmoid %[[Y]]
// CHECK-NEXT: %[[D:.+]] = nn.mul %[[Y]], %[[S]]
// CHECK-NEXT: %[[T:.+]] = nn.sigmoid %[[Y]]
// CHECK-NEXT: %[[E:.+]] = nn.mul %[[X]], %[[T]]
// CHECK-NEXT: return %[[A]], %[[B]], %[[C]], %[[D]], %[[S]], %[[E]]
func.func @silu(%x: tensor<2x8xf32>, %y: tensor<2x8xf32>, %h: tensor<2x8xbf16>) -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xbf16>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) {
  %0 = nn.sigmoid %x : tensor<2x8xf32> -> tensor<2x8xf32>
  %a = nn.mul %x, %0 : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
  %1 = nn.sigmoid %x : tensor<2x8xf32> -> tensor<2x8xf32>
  %b = nn.mul %1, %x : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
  %2 = nn.sigmoid %h : tensor<2x8xbf16> -> tensor<2x8xbf16>
  %c = nn.mul %h, %2 : tensor<2x8xbf16>, tensor<2x8xbf16> -> tensor<2x8xbf16>
  %3 = nn.sigmoid %y : tensor<2x8xf32> -> tensor<2x8xf32>
  %d = nn.mul %y, %3 : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
  %4 = nn.sigmoid %y : tensor<2x8xf32> -> tensor<2x8xf32>
  %e = nn.mul %x, %4 : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
  return %a, %b, %c, %d, %3, %e : tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xbf16>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>
}

// Llama's rotate_half, as exporters write it: two slices of the last
// dimension's halves, a negation and a concat, is nn.rotate_half; the
// concat of the upper half and the lower one negated (its gradient's
// form) is the inverse turn.
// CHECK-LABEL: func.func @rotate_half_slices
// CHECK-SAME: (%[[X:.+]]: tensor<2x3x8xf32>)
// CHECK-NEXT: %[[A:.+]] = nn.rotate_half %[[X]] {inverse = false} : tensor<2x3x8xf32> -> tensor<2x3x8xf32>
// CHECK-NEXT: %[[B:.+]] = nn.rotate_half %[[X]] {inverse = true} : tensor<2x3x8xf32> -> tensor<2x3x8xf32>
// CHECK-NEXT: return %[[A]], %[[B]]
func.func @rotate_half_slices(%x: tensor<2x3x8xf32>) -> (tensor<2x3x8xf32>, tensor<2x3x8xf32>) {
  %lo = nn.slice %x {starts = array<i64: 0, 0, 0>, sizes = array<i64: 2, 3, 4>, steps = array<i64: 1, 1, 1>} : tensor<2x3x8xf32> -> tensor<2x3x4xf32>
  %hi = nn.slice %x {starts = array<i64: 0, 0, 4>, sizes = array<i64: 2, 3, 4>, steps = array<i64: 1, 1, 1>} : tensor<2x3x8xf32> -> tensor<2x3x4xf32>
  %nhi = nn.neg %hi : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  %r = nn.concat %nhi, %lo {axis = 2 : i64} : tensor<2x3x4xf32>, tensor<2x3x4xf32> -> tensor<2x3x8xf32>
  %nlo = nn.neg %lo : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  %i = nn.concat %hi, %nlo {axis = 2 : i64} : tensor<2x3x4xf32>, tensor<2x3x4xf32> -> tensor<2x3x8xf32>
  return %r, %i : tensor<2x3x8xf32>, tensor<2x3x8xf32>
}

// Concats left as they are: the halves in their own order with the lower
// one negated (no turn); halves of different tensors; a slice of the
// upper half that skips every other column; along a dimension other than
// the last; a quarter rather than a half.
// CHECK-LABEL: func.func @rotate_half_kept
// CHECK-NOT: nn.rotate_half
// CHECK: return
func.func @rotate_half_kept(%x: tensor<2x8xf32>, %y: tensor<2x8xf32>, %z: tensor<4x2xf32>, %w: tensor<2x16xf32>)
    -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<4x2xf32>, tensor<2x8xf32>) {
  %lo = nn.slice %x {starts = array<i64: 0, 0>, sizes = array<i64: 2, 4>, steps = array<i64: 1, 1>} : tensor<2x8xf32> -> tensor<2x4xf32>
  %hi = nn.slice %x {starts = array<i64: 0, 4>, sizes = array<i64: 2, 4>, steps = array<i64: 1, 1>} : tensor<2x8xf32> -> tensor<2x4xf32>
  %nlo = nn.neg %lo : tensor<2x4xf32> -> tensor<2x4xf32>
  %0 = nn.concat %nlo, %hi {axis = 1 : i64} : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x8xf32>
  %ylo = nn.slice %y {starts = array<i64: 0, 0>, sizes = array<i64: 2, 4>, steps = array<i64: 1, 1>} : tensor<2x8xf32> -> tensor<2x4xf32>
  %nhi = nn.neg %hi : tensor<2x4xf32> -> tensor<2x4xf32>
  %1 = nn.concat %nhi, %ylo {axis = 1 : i64} : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x8xf32>
  %odd = nn.slice %x {starts = array<i64: 0, 1>, sizes = array<i64: 2, 4>, steps = array<i64: 1, 2>} : tensor<2x8xf32> -> tensor<2x4xf32>
  %nodd = nn.neg %odd : tensor<2x4xf32> -> tensor<2x4xf32>
  %2 = nn.concat %nodd, %lo {axis = 1 : i64} : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x8xf32>
  %top = nn.slice %z {starts = array<i64: 0, 0>, sizes = array<i64: 2, 2>, steps = array<i64: 1, 1>} : tensor<4x2xf32> -> tensor<2x2xf32>
  %bottom = nn.slice %z {starts = array<i64: 2, 0>, sizes = array<i64: 2, 2>, steps = array<i64: 1, 1>} : tensor<4x2xf32> -> tensor<2x2xf32>
  %nbottom = nn.neg %bottom : tensor<2x2xf32> -> tensor<2x2xf32>
  %3 = nn.concat %nbottom, %top {axis = 0 : i64} : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<4x2xf32>
  %q0 = nn.slice %w {starts = array<i64: 0, 0>, sizes = array<i64: 2, 4>, steps = array<i64: 1, 1>} : tensor<2x16xf32> -> tensor<2x4xf32>
  %q1 = nn.slice %w {starts = array<i64: 0, 4>, sizes = array<i64: 2, 4>, steps = array<i64: 1, 1>} : tensor<2x16xf32> -> tensor<2x4xf32>
  %nq1 = nn.neg %q1 : tensor<2x4xf32> -> tensor<2x4xf32>
  %4 = nn.concat %nq1, %q0 {axis = 1 : i64} : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x8xf32>
  return %0, %1, %2, %3, %4 : tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<4x2xf32>, tensor<2x8xf32>
}

// Llama's RMSNorm as PyTorch exports it: x * reciprocal(sqrt(mean(x^2) +
// eps)) times the weight is nn.layer_norm with rms and the weight as its
// scale. The same with x * x for the square, the quotient x / sqrt(...)
// (ONNX's RMSNormalization body), the factors in the other order and the
// mean over the last two dimensions; without a weight, the scale is ones.
// CHECK-LABEL: func.func @rms_norm_steps
// CHECK-SAME: (%[[X:.+]]: tensor<2x3x8xf32>, %[[W:.+]]: tensor<8xf32>, %[[V:.+]]: tensor<3x8xf32>)
// CHECK-DAG: %[[ONES:.+]] = arith.constant dense<1.000000e+00> : tensor<8xf32>
// CHECK-DAG: %[[A:.+]] = nn.layer_norm %[[X]], %[[W]] {axis = 2 : i64, epsilon = 9.9999999747524271E-7 : f64, rms} : tensor<2x3x8xf32>, tensor<8xf32> -> tensor<2x3x8xf32>
// CHECK-DAG: %[[B:.+]] = nn.layer_norm %[[X]], %[[W]] {axis = 2 : i64, epsilon = 9.9999997473787516E-6 : f64, rms}
// CHECK-DAG: %[[C:.+]] = nn.layer_norm %[[X]], %[[V]] {axis = 1 : i64, epsilon = 0.000000e+00 : f64, rms} : tensor<2x3x8xf32>, tensor<3x8xf32> -> tensor<2x3x8xf32>
// CHECK-DAG: %[[D:.+]] = nn.layer_norm %[[X]], %[[ONES]] {axis = 2 : i64, epsilon = 9.9999999747524271E-7 : f64, rms}
// CHECK-NOT: nn.reduce_mean
// CHECK: return %[[A]], %[[B]], %[[C]], %[[D]]
func.func @rms_norm_steps(%x: tensor<2x3x8xf32>, %w: tensor<8xf32>, %v: tensor<3x8xf32>)
    -> (tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>) {
  %two = arith.constant dense<2.0> : tensor<f32>
  %eps = arith.constant dense<1.0e-6> : tensor<f32>
  %eps5 = arith.constant dense<1.0e-5> : tensor<f32>
  %zero = arith.constant dense<0.0> : tensor<f32>
  %0 = nn.pow %x, %two : tensor<2x3x8xf32>, tensor<f32> -> tensor<2x3x8xf32>
  %1 = nn.reduce_mean %0 {axes = array<i64: 2>, keepdims = true} : tensor<2x3x8xf32> -> tensor<2x3x1xf32>
  %2 = nn.add %1, %eps : tensor<2x3x1xf32>, tensor<f32> -> tensor<2x3x1xf32>
  %3 = nn.sqrt %2 : tensor<2x3x1xf32> -> tensor<2x3x1xf32>
  %4 = nn.reciprocal %3 : tensor<2x3x1xf32> -> tensor<2x3x1xf32>
  %5 = nn.mul %x, %4 : tensor<2x3x8xf32>, tensor<2x3x1xf32> -> tensor<2x3x8xf32>
  %a = nn.mul %w, %5 : tensor<8xf32>, tensor<2x3x8xf32> -> tensor<2x3x8xf32>
  %10 = nn.mul %x, %x : tensor<2x3x8xf32>, tensor<2x3x8xf32> -> tensor<2x3x8xf32>
  %11 = nn.reduce_mean %10 {axes = array<i64: 2>, keepdims = true} : tensor<2x3x8xf32> -> tensor<2x3x1xf32>
  %12 = nn.add %eps5, %11 : tensor<f32>, tensor<2x3x1xf32> -> tensor<2x3x1xf32>
  %13 = nn.sqrt %12 : tensor<2x3x1xf32> -> tensor<2x3x1xf32>
  %14 = nn.reciprocal %13 : tensor<2x3x1xf32> -> tensor<2x3x1xf32>
  %15 = nn.mul %14, %x : tensor<2x3x1xf32>, tensor<2x3x8xf32> -> tensor<2x3x8xf32>
  %b = nn.mul %15, %w : tensor<2x3x8xf32>, tensor<8xf32> -> tensor<2x3x8xf32>
  %20 = nn.pow %x, %two : tensor<2x3x8xf32>, tensor<f32> -> tensor<2x3x8xf32>
  %21 = nn.reduce_mean %20 {axes = array<i64: 1, 2>, keepdims = true} : tensor<2x3x8xf32> -> tensor<2x1x1xf32>
  %22 = nn.add %21, %zero : tensor<2x1x1xf32>, tensor<f32> -> tensor<2x1x1xf32>
  %23 = nn.sqrt %22 : tensor<2x1x1xf32> -> tensor<2x1x1xf32>
  %24 = nn.div %x, %23 : tensor<2x3x8xf32>, tensor<2x1x1xf32> -> tensor<2x3x8xf32>
  %c = nn.mul %24, %v : tensor<2x3x8xf32>, tensor<3x8xf32> -> tensor<2x3x8xf32>
  %30 = nn.pow %x, %two : tensor<2x3x8xf32>, tensor<f32> -> tensor<2x3x8xf32>
  %31 = nn.reduce_mean %30 {axes = array<i64: 2>, keepdims = true} : tensor<2x3x8xf32> -> tensor<2x3x1xf32>
  %32 = nn.add %31, %eps : tensor<2x3x1xf32>, tensor<f32> -> tensor<2x3x1xf32>
  %33 = nn.sqrt %32 : tensor<2x3x1xf32> -> tensor<2x3x1xf32>
  %d = nn.div %x, %33 : tensor<2x3x8xf32>, tensor<2x3x1xf32> -> tensor<2x3x8xf32>
  return %a, %b, %c, %d : tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>
}

// Left as they are: the mean of another tensor's squares; a mean over a
// dimension that is not the last; a mean that drops its dimension; a
// negative shift; a shift that is not a constant; a cube for the square;
// x times another tensor for the square; the squares or the root mean
// square also read by another op (they would be computed twice). A layer norm of ones times a tensor of another shape keeps its
// product.
// CHECK-LABEL: func.func @rms_norm_kept
// CHECK-COUNT-2: nn.div %arg0
// CHECK: nn.div %arg4
// CHECK-COUNT-6: nn.div %arg0
// CHECK: %[[N:.+]] = nn.layer_norm %arg0, %{{.+}} {axis = 1 : i64, epsilon = 1.000000e-05 : f64, rms}
// CHECK-NEXT: nn.mul %[[N]], %arg3
// CHECK-NEXT: return
func.func @rms_norm_kept(%x: tensor<2x8xf32>, %y: tensor<2x8xf32>, %s: tensor<2x1xf32>, %w: tensor<2x8xf32>, %q: tensor<8x8xf32>)
    -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<8x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>,
        tensor<2x8xf32>, tensor<2x1xf32>, tensor<2x8xf32>) {
  %two = arith.constant dense<2.0> : tensor<f32>
  %three = arith.constant dense<3.0> : tensor<f32>
  %eps = arith.constant dense<1.0e-6> : tensor<f32>
  %neg = arith.constant dense<-1.0e-6> : tensor<f32>
  %ones = arith.constant dense<1.0> : tensor<8xf32>
  // Another tensor's squares.
  %0 = nn.pow %y, %two : tensor<2x8xf32>, tensor<f32> -> tensor<2x8xf32>
  %1 = nn.reduce_mean %0 {axes = array<i64: 1>, keepdims = true} : tensor<2x8xf32> -> tensor<2x1xf32>
  %2 = nn.add %1, %eps : tensor<2x1xf32>, tensor<f32> -> tensor<2x1xf32>
  %3 = nn.sqrt %2 : tensor<2x1xf32> -> tensor<2x1xf32>
  %a = nn.div %x, %3 : tensor<2x8xf32>, tensor<2x1xf32> -> tensor<2x8xf32>
  // Over the first dimension.
  %10 = nn.pow %x, %two : tensor<2x8xf32>, tensor<f32> -> tensor<2x8xf32>
  %11 = nn.reduce_mean %10 {axes = array<i64: 0>, keepdims = true} : tensor<2x8xf32> -> tensor<1x8xf32>
  %12 = nn.add %11, %eps : tensor<1x8xf32>, tensor<f32> -> tensor<1x8xf32>
  %13 = nn.sqrt %12 : tensor<1x8xf32> -> tensor<1x8xf32>
  %b = nn.div %x, %13 : tensor<2x8xf32>, tensor<1x8xf32> -> tensor<2x8xf32>
  // Without keepdims: row i's root mean square divides column i.
  %20 = nn.pow %q, %two : tensor<8x8xf32>, tensor<f32> -> tensor<8x8xf32>
  %21 = nn.reduce_mean %20 {axes = array<i64: 1>, keepdims = false} : tensor<8x8xf32> -> tensor<8xf32>
  %22 = nn.add %21, %eps : tensor<8xf32>, tensor<f32> -> tensor<8xf32>
  %23 = nn.sqrt %22 : tensor<8xf32> -> tensor<8xf32>
  %c = nn.div %q, %23 : tensor<8x8xf32>, tensor<8xf32> -> tensor<8x8xf32>
  // A negative shift.
  %30 = nn.pow %x, %two : tensor<2x8xf32>, tensor<f32> -> tensor<2x8xf32>
  %31 = nn.reduce_mean %30 {axes = array<i64: 1>, keepdims = true} : tensor<2x8xf32> -> tensor<2x1xf32>
  %32 = nn.add %31, %neg : tensor<2x1xf32>, tensor<f32> -> tensor<2x1xf32>
  %33 = nn.sqrt %32 : tensor<2x1xf32> -> tensor<2x1xf32>
  %d = nn.div %x, %33 : tensor<2x8xf32>, tensor<2x1xf32> -> tensor<2x8xf32>
  // A shift that varies.
  %40 = nn.pow %x, %two : tensor<2x8xf32>, tensor<f32> -> tensor<2x8xf32>
  %41 = nn.reduce_mean %40 {axes = array<i64: 1>, keepdims = true} : tensor<2x8xf32> -> tensor<2x1xf32>
  %42 = nn.add %41, %s : tensor<2x1xf32>, tensor<2x1xf32> -> tensor<2x1xf32>
  %43 = nn.sqrt %42 : tensor<2x1xf32> -> tensor<2x1xf32>
  %e = nn.div %x, %43 : tensor<2x8xf32>, tensor<2x1xf32> -> tensor<2x8xf32>
  // A cube.
  %50 = nn.pow %x, %three : tensor<2x8xf32>, tensor<f32> -> tensor<2x8xf32>
  %51 = nn.reduce_mean %50 {axes = array<i64: 1>, keepdims = true} : tensor<2x8xf32> -> tensor<2x1xf32>
  %52 = nn.add %51, %eps : tensor<2x1xf32>, tensor<f32> -> tensor<2x1xf32>
  %53 = nn.sqrt %52 : tensor<2x1xf32> -> tensor<2x1xf32>
  %f = nn.div %x, %53 : tensor<2x8xf32>, tensor<2x1xf32> -> tensor<2x8xf32>
  // x times y for the square.
  %80 = nn.mul %x, %y : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
  %81 = nn.reduce_mean %80 {axes = array<i64: 1>, keepdims = true} : tensor<2x8xf32> -> tensor<2x1xf32>
  %82 = nn.add %81, %eps : tensor<2x1xf32>, tensor<f32> -> tensor<2x1xf32>
  %83 = nn.sqrt %82 : tensor<2x1xf32> -> tensor<2x1xf32>
  %i = nn.div %x, %83 : tensor<2x8xf32>, tensor<2x1xf32> -> tensor<2x8xf32>
  // The squares read twice.
  %90 = nn.pow %x, %two : tensor<2x8xf32>, tensor<f32> -> tensor<2x8xf32>
  %91 = nn.reduce_mean %90 {axes = array<i64: 1>, keepdims = true} : tensor<2x8xf32> -> tensor<2x1xf32>
  %92 = nn.add %91, %eps : tensor<2x1xf32>, tensor<f32> -> tensor<2x1xf32>
  %93 = nn.sqrt %92 : tensor<2x1xf32> -> tensor<2x1xf32>
  %j = nn.div %x, %93 : tensor<2x8xf32>, tensor<2x1xf32> -> tensor<2x8xf32>
  // The root mean square read twice.
  %60 = nn.pow %x, %two : tensor<2x8xf32>, tensor<f32> -> tensor<2x8xf32>
  %61 = nn.reduce_mean %60 {axes = array<i64: 1>, keepdims = true} : tensor<2x8xf32> -> tensor<2x1xf32>
  %62 = nn.add %61, %eps : tensor<2x1xf32>, tensor<f32> -> tensor<2x1xf32>
  %63 = nn.sqrt %62 : tensor<2x1xf32> -> tensor<2x1xf32>
  %g = nn.div %x, %63 : tensor<2x8xf32>, tensor<2x1xf32> -> tensor<2x8xf32>
  // A unit-scaled layer norm times a tensor of x's shape.
  %70 = nn.layer_norm %x, %ones {axis = 1 : i64, epsilon = 1.0e-5 : f64, rms} : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32>
  %h = nn.mul %70, %w : tensor<2x8xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
  return %a, %b, %c, %d, %e, %f, %i, %j, %90, %g, %63, %h : tensor<2x8xf32>, tensor<2x8xf32>, tensor<8x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x1xf32>, tensor<2x8xf32>
}

// Nor when the shifted mean square or its reciprocal root is also read
// elsewhere.
// CHECK-LABEL: func.func @rms_norm_shared
// CHECK-NOT: nn.layer_norm
// CHECK: return
func.func @rms_norm_shared(%x: tensor<2x8xf32>) -> (tensor<2x8xf32>, tensor<2x1xf32>, tensor<2x8xf32>, tensor<2x1xf32>) {
  %two = arith.constant dense<2.0> : tensor<f32>
  %eps = arith.constant dense<1.0e-6> : tensor<f32>
  %0 = nn.pow %x, %two : tensor<2x8xf32>, tensor<f32> -> tensor<2x8xf32>
  %1 = nn.reduce_mean %0 {axes = array<i64: 1>, keepdims = true} : tensor<2x8xf32> -> tensor<2x1xf32>
  %2 = nn.add %1, %eps : tensor<2x1xf32>, tensor<f32> -> tensor<2x1xf32>
  %3 = nn.sqrt %2 : tensor<2x1xf32> -> tensor<2x1xf32>
  %a = nn.div %x, %3 : tensor<2x8xf32>, tensor<2x1xf32> -> tensor<2x8xf32>
  %10 = nn.pow %x, %two : tensor<2x8xf32>, tensor<f32> -> tensor<2x8xf32>
  %11 = nn.reduce_mean %10 {axes = array<i64: 1>, keepdims = true} : tensor<2x8xf32> -> tensor<2x1xf32>
  %12 = nn.add %11, %eps : tensor<2x1xf32>, tensor<f32> -> tensor<2x1xf32>
  %13 = nn.sqrt %12 : tensor<2x1xf32> -> tensor<2x1xf32>
  %14 = nn.reciprocal %13 : tensor<2x1xf32> -> tensor<2x1xf32>
  %b = nn.mul %x, %14 : tensor<2x8xf32>, tensor<2x1xf32> -> tensor<2x8xf32>
  return %a, %2, %b, %14 : tensor<2x8xf32>, tensor<2x1xf32>, tensor<2x8xf32>, tensor<2x1xf32>
}

// A layer norm's product with a tensor of its scale's shape stays a
// product when the scale is not ones, when the norm has a bias, and when
// the norm is also read elsewhere.
// CHECK-LABEL: func.func @scaled_norm_kept
// CHECK-COUNT-3: nn.mul %{{.+}}, %arg2
// CHECK-NEXT: return
func.func @scaled_norm_kept(%x: tensor<2x8xf32>, %s: tensor<8xf32>, %w: tensor<8xf32>)
    -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) {
  %ones = arith.constant dense<1.0> : tensor<8xf32>
  %0 = nn.layer_norm %x, %s {axis = 1 : i64, epsilon = 1.0e-5 : f64, rms} : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32>
  %a = nn.mul %0, %w : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32>
  %1 = nn.layer_norm %x, %ones, %s {axis = 1 : i64, epsilon = 1.0e-5 : f64} : tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<2x8xf32>
  %b = nn.mul %1, %w : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32>
  %2 = nn.layer_norm %x, %ones {axis = 1 : i64, epsilon = 1.0e-5 : f64} : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32>
  %c = nn.mul %2, %w : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32>
  return %a, %b, %c, %2 : tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>
}

// A plain layer norm of ones (elementwise_affine off) times the weight
// takes the weight as its scale too.
// CHECK-LABEL: func.func @scaled_layer_norm
// CHECK-SAME: (%[[X:.+]]: tensor<2x8xf32>, %[[W:.+]]: tensor<8xf32>)
// CHECK-NEXT: %[[N:.+]] = nn.layer_norm %[[X]], %[[W]] {axis = 1 : i64, epsilon = 1.000000e-05 : f64} : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32>
// CHECK-NEXT: return %[[N]]
func.func @scaled_layer_norm(%x: tensor<2x8xf32>, %w: tensor<8xf32>) -> tensor<2x8xf32> {
  %ones = arith.constant dense<1.0> : tensor<8xf32>
  %0 = nn.layer_norm %x, %ones {axis = 1 : i64, epsilon = 1.0e-5 : f64} : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32>
  %1 = nn.mul %w, %0 : tensor<8xf32>, tensor<2x8xf32> -> tensor<2x8xf32>
  return %1 : tensor<2x8xf32>
}

// Llama's rotary embedding, x * cos + rotate_half(x) * sin, is nn.rotary,
// whichever side of each sum and product its terms are written on.
// CHECK-LABEL: func.func @rotary_sum
// CHECK-SAME: (%[[X:.+]]: tensor<2x4x8x16xf32>, %[[C:.+]]: tensor<1x1x8x16xf32>, %[[S:.+]]: tensor<1x1x8x16xf32>)
// CHECK-NEXT: %[[A:.+]] = nn.rotary %[[X]], %[[C]], %[[S]] {inverse = false} : tensor<2x4x8x16xf32>, tensor<1x1x8x16xf32>, tensor<1x1x8x16xf32> -> tensor<2x4x8x16xf32>
// CHECK-NEXT: %[[B:.+]] = nn.rotary %[[X]], %[[S]], %[[C]] {inverse = false}
// CHECK-NEXT: return %[[A]], %[[B]]
func.func @rotary_sum(%x: tensor<2x4x8x16xf32>, %c: tensor<1x1x8x16xf32>, %s: tensor<1x1x8x16xf32>)
    -> (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) {
  %0 = nn.mul %x, %c : tensor<2x4x8x16xf32>, tensor<1x1x8x16xf32> -> tensor<2x4x8x16xf32>
  %1 = nn.rotate_half %x {inverse = false} : tensor<2x4x8x16xf32> -> tensor<2x4x8x16xf32>
  %2 = nn.mul %1, %s : tensor<2x4x8x16xf32>, tensor<1x1x8x16xf32> -> tensor<2x4x8x16xf32>
  %a = nn.add %0, %2 : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32> -> tensor<2x4x8x16xf32>
  %3 = nn.mul %s, %x : tensor<1x1x8x16xf32>, tensor<2x4x8x16xf32> -> tensor<2x4x8x16xf32>
  %4 = nn.rotate_half %x {inverse = false} : tensor<2x4x8x16xf32> -> tensor<2x4x8x16xf32>
  %5 = nn.mul %c, %4 : tensor<1x1x8x16xf32>, tensor<2x4x8x16xf32> -> tensor<2x4x8x16xf32>
  %b = nn.add %5, %3 : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32> -> tensor<2x4x8x16xf32>
  return %a, %b : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>
}

// Sums left as they are: the turn read elsewhere too (it would be
// computed twice); tables of different shapes; a table that widens x; the
// inverse turn; the turn of another tensor than the one the cosine scales.
// CHECK-LABEL: func.func @rotary_kept
// CHECK-NOT: nn.rotary
// CHECK: return
func.func @rotary_kept(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>, %c: tensor<4x8xf32>, %s: tensor<8xf32>, %w: tensor<2x4x8xf32>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<2x4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %t = nn.rotate_half %x {inverse = false} : tensor<4x8xf32> -> tensor<4x8xf32>
  %0 = nn.mul %x, %c : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %1 = nn.mul %t, %c : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %a = nn.add %0, %1 : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %u = nn.rotate_half %x {inverse = false} : tensor<4x8xf32> -> tensor<4x8xf32>
  %2 = nn.mul %x, %c : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %3 = nn.mul %u, %s : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %b = nn.add %2, %3 : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %v = nn.rotate_half %x {inverse = false} : tensor<4x8xf32> -> tensor<4x8xf32>
  %4 = nn.mul %x, %w : tensor<4x8xf32>, tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %5 = nn.mul %v, %w : tensor<4x8xf32>, tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %c2 = nn.add %4, %5 : tensor<2x4x8xf32>, tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %i = nn.rotate_half %x {inverse = true} : tensor<4x8xf32> -> tensor<4x8xf32>
  %6 = nn.mul %x, %c : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %7 = nn.mul %i, %c : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %d = nn.add %6, %7 : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %o = nn.rotate_half %y {inverse = false} : tensor<4x8xf32> -> tensor<4x8xf32>
  %8 = nn.mul %x, %c : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %9 = nn.mul %o, %c : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %e = nn.add %8, %9 : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  return %a, %b, %t, %c2, %d, %e : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<2x4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}
