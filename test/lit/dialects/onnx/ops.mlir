// RUN: ztc-opt %s | ztc-opt | FileCheck %s

// A generic node with attributes, an absent optional input and an untyped
// result round-trips unchanged.
// CHECK-LABEL: func.func @node
// CHECK: %[[NONE:.+]] = onnx.none
// CHECK: %[[R:.+]] = onnx.node "Clip"(%[[X:.+]], %[[NONE]], %[[NONE]]) {attrs = {tag = "t"}, opset = 17 : i64} : (tensor<2xf32>, none, none) -> none
// CHECK: onnx.node "Foo"(%[[R]]) {domain = "com.example", opset = 1 : i64} : (none) -> (tensor<2xf32>, none)
func.func @node(%x: tensor<2xf32>) -> tensor<2xf32> {
  %none = onnx.none
  %0 = onnx.node "Clip"(%x, %none, %none) {opset = 17 : i64, attrs = {tag = "t"}} : (tensor<2xf32>, none, none) -> none
  %1:2 = onnx.node "Foo"(%0) {domain = "com.example", opset = 1 : i64} : (none) -> (tensor<2xf32>, none)
  return %1#0 : tensor<2xf32>
}

// A constant carries its value and takes its type from it.
// CHECK-LABEL: func.func @constant
// CHECK: onnx.constant dense<[8, 64]> : tensor<2xi64>
func.func @constant() -> tensor<2xi64> {
  %0 = onnx.constant dense<[8, 64]> : tensor<2xi64>
  return %0 : tensor<2xi64>
}
