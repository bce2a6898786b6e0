// RUN: ztc-opt %s -split-input-file -verify-diagnostics

func.func @empty_op_type(%x: tensor<2xf32>) {
  // expected-error @+1 {{needs a non-empty op_type}}
  %0 = onnx.node ""(%x) {opset = 17 : i64} : (tensor<2xf32>) -> none
  return
}

// -----

func.func @bad_opset(%x: tensor<2xf32>) {
  // expected-error @+1 {{opset must be at least 1, got 0}}
  %0 = onnx.node "Relu"(%x) {opset = 0 : i64} : (tensor<2xf32>) -> none
  return
}

// -----

func.func @unranked_constant() {
  // expected-error @+1 {{'onnx.constant' op result #0 must be ranked tensor of any type values}}
  %0 = "onnx.constant"() {value = dense<1> : tensor<2xi64>} : () -> tensor<*xi64>
  return
}
