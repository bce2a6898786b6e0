// RUN: ztc-opt %s -split-input-file -ztc-convert-onnx-to-nn | FileCheck %s

// ztc-convert-onnx-to-nn on the indexing converters of IndexOps.cpp, none of
// which is an nn op of its own. Gathers and scatters address the flattened
// data along axis 0 with a linear index: the ONNX index normalized (a
// negative one counts from the end, one outside its dimension becomes an
// index past the data, which the kernels' range check reports), times its
// stride, plus the constant coordinates of every other dimension. Their
// values are checked by the ONNX node tests (forward-conformance); their
// gradients by test/lit/driver/gradcheck-exported-ops.test.

// GatherElements along axis 0 of 3x4: index * 4 + column.
// CHECK-LABEL: func.func @gather_elements
// CHECK-SAME: (%[[X:.+]]: tensor<3x4xf32>, %[[I:.+]]: tensor<2x4xi64>) -> tensor<2x4xf32>
// CHECK-DAG: %[[OUTSIDE:.+]] = arith.constant dense<3> : tensor<i64>
// CHECK: %[[NEG:.+]] = nn.less %[[I]], %{{.+}} : tensor<2x4xi64>, tensor<i64> -> tensor<2x4xi1>
// CHECK: %[[VALID:.+]] = nn.and
// CHECK: %[[IDX:.+]] = nn.where %[[VALID]], %{{.+}}, %[[OUTSIDE]]
// CHECK: %[[SCALED:.+]] = nn.mul %[[IDX]], %{{.+}} : tensor<2x4xi64>, tensor<i64> -> tensor<2x4xi64>
// CHECK: %[[COLS:.+]] = arith.constant dense<{{\[\[}}0, 1, 2, 3], [0, 1, 2, 3]]> : tensor<2x4xi64>
// CHECK: %[[LINEAR:.+]] = nn.add %[[SCALED]], %[[COLS]]
// CHECK: %[[FLAT:.+]] = nn.reshape %[[X]] : tensor<3x4xf32> -> tensor<12xf32>
// CHECK: nn.gather %[[FLAT]], %[[LINEAR]] {axis = 0 : i64} : tensor<12xf32>, tensor<2x4xi64> -> tensor<2x4xf32>
func.func @gather_elements(%x: tensor<3x4xf32>, %i: tensor<2x4xi64>) -> none {
  %0 = onnx.node "GatherElements"(%x, %i) {opset = 13 : i64, attrs = {axis = 0 : i64}} : (tensor<3x4xf32>, tensor<2x4xi64>) -> none
  return %0 : none
}

// -----

// GatherND with pairs into 2x3x4: row * 3 + column over the data viewed as
// 6x4; an entry outside its dimension becomes 2 (times stride 3) or 6.
// CHECK-LABEL: func.func @gather_nd
// CHECK-SAME: (%[[X:.+]]: tensor<2x3x4xf32>, %[[I:.+]]: tensor<5x2xi64>) -> tensor<5x4xf32>
// CHECK-DAG: arith.constant dense<[2, 6]> : tensor<2xi64>
// CHECK-DAG: arith.constant dense<[2, 3]> : tensor<2xi64>
// CHECK: nn.slice %{{.+}} {sizes = array<i64: 5, 1>, starts = array<i64: 0, 0>, steps = array<i64: 1, 1>}
// CHECK: nn.slice %{{.+}} {sizes = array<i64: 5, 1>, starts = array<i64: 0, 1>, steps = array<i64: 1, 1>}
// CHECK: %[[LINEAR:.+]] = nn.add %{{.+}}, %{{.+}} : tensor<5xi64>, tensor<5xi64> -> tensor<5xi64>
// CHECK: %[[FLAT:.+]] = nn.reshape %[[X]] : tensor<2x3x4xf32> -> tensor<6x4xf32>
// CHECK: nn.gather %[[FLAT]], %[[LINEAR]] {axis = 0 : i64} : tensor<6x4xf32>, tensor<5xi64> -> tensor<5x4xf32>
func.func @gather_nd(%x: tensor<2x3x4xf32>, %i: tensor<5x2xi64>) -> none {
  %0 = onnx.node "GatherND"(%x, %i) {opset = 13 : i64} : (tensor<2x3x4xf32>, tensor<5x2xi64>) -> none
  return %0 : none
}

// -----

// ScatterND replacing rows: the updates summed into zeros where an index
// hits (a second scatter counts the hits), the data elsewhere.
// CHECK-LABEL: func.func @scatter_nd
// CHECK-SAME: (%[[X:.+]]: tensor<4x3xi64>, %[[I:.+]]: tensor<2x1xi64>, %[[U:.+]]: tensor<2x3xi64>) -> tensor<4x3xi64>
// CHECK: %[[WRITTEN:.+]] = nn.scatter_add %{{.+}}, %[[LINEAR:.+]], %[[U]] {axis = 0 : i64} : tensor<4x3xi64>, tensor<2xi64>, tensor<2x3xi64> -> tensor<4x3xi64>
// CHECK: %[[COUNTS:.+]] = nn.scatter_add %{{.+}}, %[[LINEAR]], %{{.+}} {axis = 0 : i64}
// CHECK: %[[HIT:.+]] = nn.greater %[[COUNTS]]
// CHECK: nn.where %[[HIT]], %[[WRITTEN]], %[[X]]
func.func @scatter_nd(%x: tensor<4x3xi64>, %i: tensor<2x1xi64>, %u: tensor<2x3xi64>) -> none {
  %0 = onnx.node "ScatterND"(%x, %i, %u) {opset = 16 : i64} : (tensor<4x3xi64>, tensor<2x1xi64>, tensor<2x3xi64>) -> none
  return %0 : none
}

// -----

// Pad: a negative pad crops (a slice), a constant pad concatenates the
// value; reflect gathers constant positions (row 1 above row 0, columns
// 0 1 0 1 after cropping the first).
// CHECK-LABEL: func.func @pad
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>)
// CHECK: %[[FILL:.+]] = arith.constant dense<5.000000e+00> : tensor<1x3xf32>
// CHECK: %[[ROWS:.+]] = nn.concat %[[FILL]], %[[X]] {axis = 0 : i64} : tensor<1x3xf32>, tensor<2x3xf32> -> tensor<3x3xf32>
// CHECK: %[[CROP:.+]] = nn.slice %[[ROWS]] {sizes = array<i64: 3, 2>, starts = array<i64: 0, 1>, steps = array<i64: 1, 1>}
// CHECK: %[[C:.+]] = nn.concat %[[CROP]], %{{.+}} {axis = 1 : i64} : tensor<3x2xf32>, tensor<3x2xf32> -> tensor<3x4xf32>
// CHECK: %[[RI:.+]] = arith.constant dense<[1, 0, 1]> : tensor<3xi64>
// CHECK: %[[R0:.+]] = nn.gather %[[X]], %[[RI]] {axis = 0 : i64}
// CHECK: %[[R1:.+]] = nn.slice %[[R0]]
// CHECK: %[[CI:.+]] = arith.constant dense<[0, 1, 0, 1]> : tensor<4xi64>
// CHECK: %[[R:.+]] = nn.gather %[[R1]], %[[CI]] {axis = 1 : i64} : tensor<3x2xf32>, tensor<4xi64> -> tensor<3x4xf32>
// CHECK: return %[[C]], %[[R]]
func.func @pad(%x: tensor<2x3xf32>) -> (none, none) {
  %p = onnx.constant dense<[1, -1, 0, 2]> : tensor<4xi64>
  %v = onnx.constant dense<5.0> : tensor<f32>
  %0 = onnx.node "Pad"(%x, %p, %v) {opset = 13 : i64} : (tensor<2x3xf32>, tensor<4xi64>, tensor<f32>) -> none
  %1 = onnx.node "Pad"(%x, %p) {opset = 13 : i64, attrs = {mode = "reflect"}} : (tensor<2x3xf32>, tensor<4xi64>) -> none
  return %0, %1 : none, none
}

// -----

// CumSum of 5 elements, exclusive and reversed: shifted by one toward the
// start first, then added to itself shifted by 1, 2 and 4.
// CHECK-LABEL: func.func @cumsum
// CHECK-SAME: (%[[X:.+]]: tensor<2x5xi32>) -> tensor<2x5xi32>
// CHECK: %[[S0:.+]] = nn.slice %[[X]] {sizes = array<i64: 2, 4>, starts = array<i64: 0, 1>
// CHECK: %[[E:.+]] = nn.concat %[[S0]], %{{.+}} {axis = 1 : i64} : tensor<2x4xi32>, tensor<2x1xi32> -> tensor<2x5xi32>
// CHECK: %[[A1:.+]] = nn.add %[[E]], %{{.+}} : tensor<2x5xi32>
// CHECK: nn.slice %[[A1]] {sizes = array<i64: 2, 3>, starts = array<i64: 0, 2>
// CHECK: %[[A2:.+]] = nn.add %[[A1]], %{{.+}} : tensor<2x5xi32>
// CHECK: nn.slice %[[A2]] {sizes = array<i64: 2, 1>, starts = array<i64: 0, 4>
// CHECK: %[[A4:.+]] = nn.add %[[A2]], %{{.+}} : tensor<2x5xi32>
// CHECK: return %[[A4]]
func.func @cumsum(%x: tensor<2x5xi32>) -> none {
  %a = onnx.constant dense<1> : tensor<i64>
  %0 = onnx.node "CumSum"(%x, %a) {opset = 14 : i64, attrs = {exclusive = 1 : i64, reverse = 1 : i64}} : (tensor<2x5xi32>, tensor<i64>) -> none
  return %0 : none
}

// -----

// Empty data with empty indices: an empty result (a zero stride must not
// be divided by).
// CHECK-LABEL: func.func @gathers_of_empty_data
// CHECK-SAME: -> (tensor<2x0xf32>, tensor<0x3xf32>)
func.func @gathers_of_empty_data(%x: tensor<2x0xf32>, %i: tensor<2x0xi64>, %y: tensor<2x0x3xf32>, %j: tensor<0x2xi64>) -> (none, none) {
  %0 = onnx.node "GatherElements"(%x, %i) {opset = 13 : i64, attrs = {axis = 0 : i64}} : (tensor<2x0xf32>, tensor<2x0xi64>) -> none
  %1 = onnx.node "GatherND"(%y, %j) {opset = 13 : i64} : (tensor<2x0x3xf32>, tensor<0x2xi64>) -> none
  return %0, %1 : none, none
}

// -----

// A reduction with no updates leaves the data as it is.
// CHECK-LABEL: func.func @scatter_nd_mul_nothing
// CHECK-SAME: (%[[X:.+]]: tensor<4x3xf32>
// CHECK: return %[[X]] : tensor<4x3xf32>
func.func @scatter_nd_mul_nothing(%x: tensor<4x3xf32>, %i: tensor<0x1xi64>, %u: tensor<0x3xf32>) -> none {
  %0 = onnx.node "ScatterND"(%x, %i, %u) {opset = 18 : i64, attrs = {reduction = "mul"}} : (tensor<4x3xf32>, tensor<0x1xi64>, tensor<0x3xf32>) -> none
  return %0 : none
}
