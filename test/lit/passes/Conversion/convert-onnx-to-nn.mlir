// RUN: ztc-opt %s -split-input-file -ztc-convert-onnx-to-nn | FileCheck %s

// ztc-convert-onnx-to-nn on the pass's own mechanics (signature rewrite,
// constants, absent inputs, PyTorch shape chains folding to constants) and
// on the elementwise converters of ElementwiseOps.cpp. The neural and shape
// converters have their own files (convert-onnx-to-nn-neural.mlir,
// convert-onnx-to-nn-shape.mlir); every diagnostic is in
// convert-onnx-to-nn-invalid.mlir.

// The untyped (`none`) results of imported nodes get their inferred types,
// and the function signature follows the returned values.
// CHECK-LABEL: func.func @signature
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: %[[R:.+]] = nn.relu %[[X]] : tensor<2x3xf32> -> tensor<2x3xf32>
// CHECK: return %[[R]] : tensor<2x3xf32>
func.func @signature(%x: tensor<2x3xf32>) -> none {
  %0 = onnx.node "Relu"(%x) {opset = 17 : i64} : (tensor<2x3xf32>) -> none
  return %0 : none
}

// -----

// "ai.onnx" is the default domain spelled out.
// CHECK-LABEL: func.func @default_domain_spelled_out
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: nn.tanh %[[X]] : tensor<2x3xf32> -> tensor<2x3xf32>
func.func @default_domain_spelled_out(%x: tensor<2x3xf32>) -> none {
  %0 = onnx.node "Tanh"(%x) {domain = "ai.onnx", opset = 13 : i64} : (tensor<2x3xf32>) -> none
  return %0 : none
}

// -----

// onnx.constant becomes arith.constant, and the onnx.none marking an absent
// optional input disappears once its node is converted.
// CHECK-LABEL: func.func @constants_and_none
// CHECK-SAME: (%[[X:.+]]: tensor<4xf32>) -> tensor<4xf32>
// CHECK-NOT: onnx.
// CHECK: %[[HI:.+]] = arith.constant dense<6.000000e+00> : tensor<f32>
// CHECK: %[[R:.+]] = nn.min %[[X]], %[[HI]] : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
// CHECK-NOT: onnx.
// CHECK: return %[[R]]
func.func @constants_and_none(%x: tensor<4xf32>) -> none {
  %none = onnx.none
  %hi = onnx.constant dense<6.0> : tensor<f32>
  %0 = onnx.node "Clip"(%x, %none, %hi) {opset = 13 : i64} : (tensor<4xf32>, none, tensor<f32>) -> none
  return %0 : none
}

// -----

// PyTorch's `x.view(x.size(0), -1)`: Shape -> Gather -> Unsqueeze -> Concat
// folds to a constant as it is built, so Reshape sees a constant shape and
// only one nn op is left.
// CHECK-LABEL: func.func @pytorch_shape_chain
// CHECK-SAME: (%[[X:.+]]: tensor<2x3x4xf32>) -> tensor<2x12xf32>
// CHECK-NOT: nn.gather
// CHECK-NOT: nn.concat
// CHECK: arith.constant dense<[2, -1]> : tensor<2xi64>
// CHECK-NEXT: %[[R:.+]] = nn.reshape %[[X]] : tensor<2x3x4xf32> -> tensor<2x12xf32>
// CHECK-NEXT: return %[[R]]
func.func @pytorch_shape_chain(%x: tensor<2x3x4xf32>) -> none {
  %shape = onnx.node "Shape"(%x) {opset = 17 : i64} : (tensor<2x3x4xf32>) -> none
  %zero = onnx.constant dense<0> : tensor<i64>
  %batch = onnx.node "Gather"(%shape, %zero) {opset = 17 : i64, attrs = {axis = 0 : i64}} : (none, tensor<i64>) -> none
  %axes = onnx.constant dense<[0]> : tensor<1xi64>
  %dim = onnx.node "Unsqueeze"(%batch, %axes) {opset = 17 : i64} : (none, tensor<1xi64>) -> none
  %rest = onnx.constant dense<[-1]> : tensor<1xi64>
  %target = onnx.node "Concat"(%dim, %rest) {opset = 17 : i64, attrs = {axis = 0 : i64}} : (none, tensor<1xi64>) -> none
  %0 = onnx.node "Reshape"(%x, %target) {opset = 17 : i64} : (tensor<2x3x4xf32>, none) -> none
  return %0 : none
}

// -----

// A chain with integer arithmetic on the gathered dimensions, as in
// `x.view(b * t, c)`: a negative Gather index, a Mul of two dimensions, and
// Unsqueeze 11's axes as an attribute all fold too.
// CHECK-LABEL: func.func @pytorch_shape_arithmetic
// CHECK-SAME: (%[[X:.+]]: tensor<2x3x4xf32>) -> tensor<6x4xf32>
// CHECK-NOT: nn.gather
// CHECK-NOT: nn.mul
// CHECK-NOT: nn.concat
// CHECK: arith.constant dense<[6, 4]> : tensor<2xi64>
// CHECK-NEXT: %[[R:.+]] = nn.reshape %[[X]] : tensor<2x3x4xf32> -> tensor<6x4xf32>
// CHECK-NEXT: return %[[R]]
func.func @pytorch_shape_arithmetic(%x: tensor<2x3x4xf32>) -> none {
  %shape = onnx.node "Shape"(%x) {opset = 11 : i64} : (tensor<2x3x4xf32>) -> none
  %i0 = onnx.constant dense<0> : tensor<i64>
  %i1 = onnx.constant dense<1> : tensor<i64>
  %last = onnx.constant dense<-1> : tensor<i64>
  %d0 = onnx.node "Gather"(%shape, %i0) {opset = 11 : i64} : (none, tensor<i64>) -> none
  %d1 = onnx.node "Gather"(%shape, %i1) {opset = 11 : i64} : (none, tensor<i64>) -> none
  %d2 = onnx.node "Gather"(%shape, %last) {opset = 11 : i64} : (none, tensor<i64>) -> none
  %rows = onnx.node "Mul"(%d0, %d1) {opset = 11 : i64} : (none, none) -> none
  %u0 = onnx.node "Unsqueeze"(%rows) {opset = 11 : i64, attrs = {axes = [0]}} : (none) -> none
  %u1 = onnx.node "Unsqueeze"(%d2) {opset = 11 : i64, attrs = {axes = [0]}} : (none) -> none
  %target = onnx.node "Concat"(%u0, %u1) {opset = 11 : i64, attrs = {axis = 0 : i64}} : (none, none) -> none
  %0 = onnx.node "Reshape"(%x, %target) {opset = 11 : i64} : (tensor<2x3x4xf32>, none) -> none
  return %0 : none
}

// -----

// Arithmetic broadcasts numpy-style at every since-version from 7 on
// (Add 7/13/14, Sub, Mul, Div).
// CHECK-LABEL: func.func @arithmetic
// CHECK-SAME: (%[[A:.+]]: tensor<2x3xf32>, %[[B:.+]]: tensor<3xf32>)
// CHECK: nn.add %[[A]], %[[B]] : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
// CHECK: nn.sub %[[A]], %[[B]] : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
// CHECK: nn.mul %[[B]], %[[A]] : tensor<3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
// CHECK: nn.div %[[A]], %[[B]] : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
func.func @arithmetic(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> (none, none, none, none) {
  %0 = onnx.node "Add"(%a, %b) {opset = 7 : i64} : (tensor<2x3xf32>, tensor<3xf32>) -> none
  %1 = onnx.node "Sub"(%a, %b) {opset = 13 : i64} : (tensor<2x3xf32>, tensor<3xf32>) -> none
  %2 = onnx.node "Mul"(%b, %a) {opset = 14 : i64} : (tensor<3xf32>, tensor<2x3xf32>) -> none
  %3 = onnx.node "Div"(%a, %b) {opset = 17 : i64} : (tensor<2x3xf32>, tensor<3xf32>) -> none
  return %0, %1, %2, %3 : none, none, none, none
}

// -----

// Pow with an integer exponent: the exponent is cast to the base's element
// type, since nn.pow takes one element type.
// CHECK-LABEL: func.func @pow_int_exponent
// CHECK-SAME: (%[[X:.+]]: tensor<4xf32>, %[[E:.+]]: tensor<i64>) -> tensor<4xf32>
// CHECK: %[[EF:.+]] = nn.cast %[[E]] : tensor<i64> -> tensor<f32>
// CHECK: %[[R:.+]] = nn.pow %[[X]], %[[EF]] : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
// CHECK: return %[[R]]
func.func @pow_int_exponent(%x: tensor<4xf32>, %e: tensor<i64>) -> none {
  %0 = onnx.node "Pow"(%x, %e) {opset = 15 : i64} : (tensor<4xf32>, tensor<i64>) -> none
  return %0 : none
}

// -----

// Pow with an exponent of the base's type needs no cast.
// CHECK-LABEL: func.func @pow_same_type
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32>, %[[E:.+]]: tensor<3xf32>)
// CHECK-NOT: nn.cast
// CHECK: nn.pow %[[X]], %[[E]] : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
func.func @pow_same_type(%x: tensor<2x3xf32>, %e: tensor<3xf32>) -> none {
  %0 = onnx.node "Pow"(%x, %e) {opset = 7 : i64} : (tensor<2x3xf32>, tensor<3xf32>) -> none
  return %0 : none
}

// -----

// Max and Min take any number of inputs; they fold left to right, each step
// broadcasting, and a single input is passed through.
// CHECK-LABEL: func.func @min_max_variadic
// CHECK-SAME: (%[[A:.+]]: tensor<2x3xf32>, %[[B:.+]]: tensor<3xf32>, %[[C:.+]]: tensor<2x1xf32>)
// CHECK: %[[M0:.+]] = nn.max %[[A]], %[[B]] : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
// CHECK: %[[M1:.+]] = nn.max %[[M0]], %[[C]] : tensor<2x3xf32>, tensor<2x1xf32> -> tensor<2x3xf32>
// CHECK: %[[N:.+]] = nn.min %[[B]], %[[C]] : tensor<3xf32>, tensor<2x1xf32> -> tensor<2x3xf32>
// CHECK: return %[[M1]], %[[N]], %[[B]]
func.func @min_max_variadic(%a: tensor<2x3xf32>, %b: tensor<3xf32>, %c: tensor<2x1xf32>) -> (none, none, none) {
  %0 = onnx.node "Max"(%a, %b, %c) {opset = 13 : i64} : (tensor<2x3xf32>, tensor<3xf32>, tensor<2x1xf32>) -> none
  %1 = onnx.node "Min"(%b, %c) {opset = 8 : i64} : (tensor<3xf32>, tensor<2x1xf32>) -> none
  %2 = onnx.node "Max"(%b) {opset = 12 : i64} : (tensor<3xf32>) -> none
  return %0, %1, %2 : none, none, none
}

// -----

// Comparisons give i1 in the broadcast shape; And, Or and Not take i1.
// CHECK-LABEL: func.func @compare_and_logic
// CHECK-SAME: (%[[A:.+]]: tensor<2x3xf32>, %[[B:.+]]: tensor<3xf32>, %[[M:.+]]: tensor<2x3xi1>, %[[N:.+]]: tensor<3xi1>)
// CHECK: nn.equal %[[A]], %[[B]] : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xi1>
// CHECK: nn.less %[[A]], %[[B]] : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xi1>
// CHECK: nn.greater %[[B]], %[[A]] : tensor<3xf32>, tensor<2x3xf32> -> tensor<2x3xi1>
// CHECK: nn.and %[[M]], %[[N]] : tensor<2x3xi1>, tensor<3xi1> -> tensor<2x3xi1>
// CHECK: nn.or %[[N]], %[[M]] : tensor<3xi1>, tensor<2x3xi1> -> tensor<2x3xi1>
// CHECK: nn.not %[[M]] : tensor<2x3xi1> -> tensor<2x3xi1>
func.func @compare_and_logic(%a: tensor<2x3xf32>, %b: tensor<3xf32>, %m: tensor<2x3xi1>, %n: tensor<3xi1>) -> (none, none, none, none, none, none) {
  %0 = onnx.node "Equal"(%a, %b) {opset = 19 : i64} : (tensor<2x3xf32>, tensor<3xf32>) -> none
  %1 = onnx.node "Less"(%a, %b) {opset = 13 : i64} : (tensor<2x3xf32>, tensor<3xf32>) -> none
  %2 = onnx.node "Greater"(%b, %a) {opset = 9 : i64} : (tensor<3xf32>, tensor<2x3xf32>) -> none
  %3 = onnx.node "And"(%m, %n) {opset = 7 : i64} : (tensor<2x3xi1>, tensor<3xi1>) -> none
  %4 = onnx.node "Or"(%n, %m) {opset = 7 : i64} : (tensor<3xi1>, tensor<2x3xi1>) -> none
  %5 = onnx.node "Not"(%m) {opset = 1 : i64} : (tensor<2x3xi1>) -> none
  return %0, %1, %2, %3, %4, %5 : none, none, none, none, none, none
}

// -----

// Unary ops map one to one and keep the operand type; Neg, Relu and Abs
// accept integers.
// CHECK-LABEL: func.func @unary
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32>, %[[I:.+]]: tensor<4xi32>)
// CHECK: nn.neg %[[I]] : tensor<4xi32> -> tensor<4xi32>
// CHECK: nn.exp %[[X]] : tensor<2x3xf32> -> tensor<2x3xf32>
// CHECK: nn.log %[[X]]
// CHECK: nn.tanh %[[X]]
// CHECK: nn.sigmoid %[[X]]
// CHECK: nn.relu %[[I]] : tensor<4xi32> -> tensor<4xi32>
// CHECK: nn.sqrt %[[X]]
// CHECK: nn.reciprocal %[[X]]
// CHECK: nn.erf %[[X]]
// CHECK: nn.abs %[[I]] : tensor<4xi32> -> tensor<4xi32>
// CHECK: nn.softplus %[[X]] : tensor<2x3xf32> -> tensor<2x3xf32>
func.func @unary(%x: tensor<2x3xf32>, %i: tensor<4xi32>) -> (none, none, none, none, none, none, none, none, none, none, none) {
  %0 = onnx.node "Neg"(%i) {opset = 13 : i64} : (tensor<4xi32>) -> none
  %1 = onnx.node "Exp"(%x) {opset = 6 : i64} : (tensor<2x3xf32>) -> none
  %2 = onnx.node "Log"(%x) {opset = 13 : i64} : (tensor<2x3xf32>) -> none
  %3 = onnx.node "Tanh"(%x) {opset = 13 : i64} : (tensor<2x3xf32>) -> none
  %4 = onnx.node "Sigmoid"(%x) {opset = 13 : i64} : (tensor<2x3xf32>) -> none
  %5 = onnx.node "Relu"(%i) {opset = 14 : i64} : (tensor<4xi32>) -> none
  %6 = onnx.node "Sqrt"(%x) {opset = 13 : i64} : (tensor<2x3xf32>) -> none
  %7 = onnx.node "Reciprocal"(%x) {opset = 13 : i64} : (tensor<2x3xf32>) -> none
  %8 = onnx.node "Erf"(%x) {opset = 9 : i64} : (tensor<2x3xf32>) -> none
  %9 = onnx.node "Abs"(%i) {opset = 13 : i64} : (tensor<4xi32>) -> none
  %10 = onnx.node "Softplus"(%x) {opset = 1 : i64} : (tensor<2x3xf32>) -> none
  return %0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10 : none, none, none, none, none, none, none, none, none, none, none
}

// -----

// LeakyRelu keeps its f32 alpha exactly as an f64 attribute, and ONNX's
// default 0.01 is nn's default (elided).
// CHECK-LABEL: func.func @leaky_relu
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32>)
// CHECK: nn.leaky_relu %[[X]] {alpha = 0.20000000298023224 : f64} : tensor<2x3xf32> -> tensor<2x3xf32>
// CHECK: nn.leaky_relu %[[X]] : tensor<2x3xf32> -> tensor<2x3xf32>
func.func @leaky_relu(%x: tensor<2x3xf32>) -> (none, none) {
  %0 = onnx.node "LeakyRelu"(%x) {opset = 16 : i64, attrs = {alpha = 2.0e-01 : f32}} : (tensor<2x3xf32>) -> none
  %1 = onnx.node "LeakyRelu"(%x) {opset = 6 : i64} : (tensor<2x3xf32>) -> none
  return %0, %1 : none, none
}

// -----

// Gelu (opset 20) carries its approximation; "none" is the default.
// CHECK-LABEL: func.func @gelu
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32>)
// CHECK: nn.gelu %[[X]] {approximate = "tanh"} : tensor<2x3xf32> -> tensor<2x3xf32>
// CHECK: nn.gelu %[[X]] : tensor<2x3xf32> -> tensor<2x3xf32>
func.func @gelu(%x: tensor<2x3xf32>) -> (none, none) {
  %0 = onnx.node "Gelu"(%x) {opset = 20 : i64, attrs = {approximate = "tanh"}} : (tensor<2x3xf32>) -> none
  %1 = onnx.node "Gelu"(%x) {opset = 20 : i64} : (tensor<2x3xf32>) -> none
  return %0, %1 : none, none
}

// -----

// Clip before opset 11 takes its bounds as attributes; they become scalar
// constants, max with the lower bound first, then min with the upper.
// CHECK-LABEL: func.func @clip_attributes
// CHECK-SAME: (%[[X:.+]]: tensor<4xf32>)
// CHECK-DAG: %[[LO:.+]] = arith.constant dense<-1.000000e+00> : tensor<f32>
// CHECK-DAG: %[[HI:.+]] = arith.constant dense<6.000000e+00> : tensor<f32>
// CHECK: %[[M:.+]] = nn.max %[[X]], %[[LO]] : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
// CHECK: %[[R:.+]] = nn.min %[[M]], %[[HI]] : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
// CHECK: return %[[R]]
func.func @clip_attributes(%x: tensor<4xf32>) -> none {
  %0 = onnx.node "Clip"(%x) {opset = 6 : i64, attrs = {min = -1.0 : f32, max = 6.0 : f32}} : (tensor<4xf32>) -> none
  return %0 : none
}

// -----

// Clip from opset 11 takes its bounds as inputs; an absent bound is no
// bound at all.
// CHECK-LABEL: func.func @clip_inputs
// CHECK-SAME: (%[[X:.+]]: tensor<4xf32>, %[[LO:.+]]: tensor<f32>, %[[HI:.+]]: tensor<f32>)
// CHECK: %[[M:.+]] = nn.max %[[X]], %[[LO]] : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
// CHECK: %[[R0:.+]] = nn.min %[[M]], %[[HI]] : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
// CHECK-NOT: nn.min
// CHECK: %[[R1:.+]] = nn.max %[[X]], %[[LO]]
// CHECK: return %[[R0]], %[[R1]]
func.func @clip_inputs(%x: tensor<4xf32>, %lo: tensor<f32>, %hi: tensor<f32>) -> (none, none) {
  %none = onnx.none
  %0 = onnx.node "Clip"(%x, %lo, %hi) {opset = 13 : i64} : (tensor<4xf32>, tensor<f32>, tensor<f32>) -> none
  %1 = onnx.node "Clip"(%x, %lo, %none) {opset = 13 : i64} : (tensor<4xf32>, tensor<f32>, none) -> none
  return %0, %1 : none, none
}

// -----

// Where broadcasts all three operands.
// CHECK-LABEL: func.func @where
// CHECK-SAME: (%[[C:.+]]: tensor<2x3xi1>, %[[A:.+]]: tensor<3xf32>, %[[B:.+]]: tensor<f32>) -> tensor<2x3xf32>
// CHECK: nn.where %[[C]], %[[A]], %[[B]] : tensor<2x3xi1>, tensor<3xf32>, tensor<f32> -> tensor<2x3xf32>
func.func @where(%c: tensor<2x3xi1>, %a: tensor<3xf32>, %b: tensor<f32>) -> none {
  %0 = onnx.node "Where"(%c, %a, %b) {opset = 16 : i64} : (tensor<2x3xi1>, tensor<3xf32>, tensor<f32>) -> none
  return %0 : none
}

// -----

// Cast maps ONNX data types (1 float, 9 bool) to element types; a cast to
// the operand's own type (7 int64) is no op at all.
// CHECK-LABEL: func.func @cast
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xi64>)
// CHECK: %[[F:.+]] = nn.cast %[[X]] : tensor<2x3xi64> -> tensor<2x3xf32>
// CHECK: %[[B:.+]] = nn.cast %[[X]] : tensor<2x3xi64> -> tensor<2x3xi1>
// CHECK: return %[[F]], %[[X]], %[[B]]
func.func @cast(%x: tensor<2x3xi64>) -> (none, none, none) {
  %0 = onnx.node "Cast"(%x) {opset = 19 : i64, attrs = {to = 1 : i64}} : (tensor<2x3xi64>) -> none
  %1 = onnx.node "Cast"(%x) {opset = 13 : i64, attrs = {to = 7 : i64}} : (tensor<2x3xi64>) -> none
  %2 = onnx.node "Cast"(%x) {opset = 6 : i64, attrs = {to = 9 : i64}} : (tensor<2x3xi64>) -> none
  return %0, %1, %2 : none, none, none
}

// -----

// CastLike takes the element type (not the shape) of its second input.
// CHECK-LABEL: func.func @cast_like
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xi64>, %[[Y:.+]]: tensor<5xf16>) -> tensor<2x3xf16>
// CHECK: nn.cast %[[X]] : tensor<2x3xi64> -> tensor<2x3xf16>
func.func @cast_like(%x: tensor<2x3xi64>, %y: tensor<5xf16>) -> none {
  %0 = onnx.node "CastLike"(%x, %y) {opset = 15 : i64} : (tensor<2x3xi64>, tensor<5xf16>) -> none
  return %0 : none
}

// -----

// Identity forwards its input.
// CHECK-LABEL: func.func @identity
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: return %[[X]] : tensor<2x3xf32>
func.func @identity(%x: tensor<2x3xf32>) -> none {
  %0 = onnx.node "Identity"(%x) {opset = 21 : i64} : (tensor<2x3xf32>) -> none
  return %0 : none
}

// -----

// Dropout in inference is the identity, and its used mask output keeps
// everything: an all-true i1 constant of the input's shape.
// CHECK-LABEL: func.func @dropout_mask
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xi1>)
// CHECK: %[[MASK:.+]] = arith.constant dense<true> : tensor<2x3xi1>
// CHECK: return %[[X]], %[[MASK]] : tensor<2x3xf32>, tensor<2x3xi1>
func.func @dropout_mask(%x: tensor<2x3xf32>) -> (none, none) {
  %0:2 = onnx.node "Dropout"(%x) {opset = 13 : i64} : (tensor<2x3xf32>) -> (none, none)
  return %0#0, %0#1 : none, none
}

// -----

// A training-mode Dropout (opset 12 on) whose ratio is the constant 0 drops
// nothing, so it is the identity too.
// CHECK-LABEL: func.func @dropout_zero_ratio
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: return %[[X]] : tensor<2x3xf32>
func.func @dropout_zero_ratio(%x: tensor<2x3xf32>) -> none {
  %ratio = onnx.constant dense<0.0> : tensor<f32>
  %training = onnx.constant dense<true> : tensor<i1>
  %0 = onnx.node "Dropout"(%x, %ratio, %training) {opset = 12 : i64} : (tensor<2x3xf32>, tensor<f32>, tensor<i1>) -> none
  return %0 : none
}

// -----

// Training-mode Dropout draws u = nn.random_uniform(rng) and keeps u >= ratio
// (spelled !(u < ratio)), scaling kept elements by 1 / (1 - ratio); the mask
// output is the kept elements. The key is one argument for the function,
// `rng`, a hyper the runtime writes; each node has its own stream: its seed
// attribute (5), else the FNV-1a hash of its name ("drop2"). The evaluate
// entry takes the input itself (nn.mode_select's second operand).
// CHECK-LABEL: func.func @dropout_training
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32>, %[[RNG:.+]]: tensor<i64> {train.binding = #train.binding<hyper "rng">}) -> (tensor<2x3xf32>, tensor<2x3xi1>, tensor<2x3xf32>)
// CHECK: %[[U:.+]] = nn.random_uniform %[[RNG]] {stream = 5 : i64} : tensor<i64> -> tensor<2x3xf32>
// CHECK: %[[RATIO:.+]] = arith.constant dense<2.500000e-01> : tensor<f32>
// CHECK: %[[DROP:.+]] = nn.less %[[U]], %[[RATIO]] : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xi1>
// CHECK: %[[KEEP:.+]] = nn.not %[[DROP]] : tensor<2x3xi1> -> tensor<2x3xi1>
// CHECK: %[[SCALE:.+]] = arith.constant dense<1.33333337> : tensor<f32>
// CHECK: %[[SCALED:.+]] = nn.mul %[[X]], %[[SCALE]] : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xf32>
// CHECK: %[[ZERO:.+]] = arith.constant dense<0.000000e+00> : tensor<f32>
// CHECK: %[[DROPPED:.+]] = nn.where %[[KEEP]], %[[SCALED]], %[[ZERO]] : tensor<2x3xi1>, tensor<2x3xf32>, tensor<f32> -> tensor<2x3xf32>
// CHECK: %[[Y:.+]] = nn.mode_select %[[DROPPED]], %[[X]] : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
// CHECK: %[[U2:.+]] = nn.random_uniform %[[RNG]] {stream = 7835719957706616186 : i64} : tensor<i64> -> tensor<2x3xf32>
// CHECK: %[[KEEP2:.+]] = nn.not
// CHECK: %[[DROPPED2:.+]] = nn.where %[[KEEP2]]
// CHECK: %[[Y2:.+]] = nn.mode_select %[[DROPPED2]], %[[X]]
// CHECK: return %[[Y]], %[[KEEP]], %[[Y2]] : tensor<2x3xf32>, tensor<2x3xi1>, tensor<2x3xf32>
func.func @dropout_training(%x: tensor<2x3xf32>) -> (none, none, none) {
  %ratio = onnx.constant dense<0.25> : tensor<f32>
  %training = onnx.constant dense<true> : tensor<i1>
  %0:2 = onnx.node "Dropout"(%x, %ratio, %training) {opset = 13 : i64, attrs = {seed = 5 : i64}} : (tensor<2x3xf32>, tensor<f32>, tensor<i1>) -> (none, none) loc("drop1")
  %1 = onnx.node "Dropout"(%x, %ratio, %training) {opset = 13 : i64} : (tensor<2x3xf32>, tensor<f32>, tensor<i1>) -> none loc("drop2")
  return %0#0, %0#1, %1 : none, none, none
}

// -----

// The default ratio is 0.5. The draws and the comparison are f32 whatever
// the data's type; the scale and the zeros have the data's type (f16).
// CHECK-LABEL: func.func @dropout_training_default_ratio_f16
// CHECK-SAME: (%[[X:.+]]: tensor<4xf16>, %[[RNG:.+]]: tensor<i64> {train.binding = #train.binding<hyper "rng">}) -> tensor<4xf16>
// CHECK: %[[U:.+]] = nn.random_uniform %[[RNG]] {{.*}} : tensor<i64> -> tensor<4xf32>
// CHECK: %[[RATIO:.+]] = arith.constant dense<5.000000e-01> : tensor<f32>
// CHECK: nn.less %[[U]], %[[RATIO]] : tensor<4xf32>, tensor<f32> -> tensor<4xi1>
// CHECK: %[[SCALE:.+]] = arith.constant dense<2.000000e+00> : tensor<f16>
// CHECK: nn.mul %[[X]], %[[SCALE]] : tensor<4xf16>, tensor<f16> -> tensor<4xf16>
// CHECK: nn.where {{.*}} : tensor<4xi1>, tensor<4xf16>, tensor<f16> -> tensor<4xf16>
func.func @dropout_training_default_ratio_f16(%x: tensor<4xf16>) -> none {
  %none = onnx.none
  %training = onnx.constant dense<true> : tensor<i1>
  %0 = onnx.node "Dropout"(%x, %none, %training) {opset = 22 : i64} : (tensor<4xf16>, none, tensor<i1>) -> none loc("d")
  return %0 : none
}

// -----

// A ratio of 1 drops everything: zeros and an all-false mask, with no random
// numbers (and so no key argument) and no infinite scale.
// CHECK-LABEL: func.func @dropout_training_ratio_one
// CHECK-SAME: (%{{.+}}: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xi1>)
// CHECK-NOT: nn.random_uniform
// CHECK-DAG: %[[ZEROS:.+]] = arith.constant dense<0.000000e+00> : tensor<2x3xf32>
// CHECK-DAG: %[[NONE:.+]] = arith.constant dense<false> : tensor<2x3xi1>
// CHECK: %[[Y:.+]] = nn.mode_select %[[ZEROS]], %{{.+}} : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
// CHECK: return %[[Y]], %[[NONE]] : tensor<2x3xf32>, tensor<2x3xi1>
func.func @dropout_training_ratio_one(%x: tensor<2x3xf32>) -> (none, none) {
  %ratio = onnx.constant dense<1.0> : tensor<f32>
  %training = onnx.constant dense<true> : tensor<i1>
  %0:2 = onnx.node "Dropout"(%x, %ratio, %training) {opset = 13 : i64} : (tensor<2x3xf32>, tensor<f32>, tensor<i1>) -> (none, none) loc("d")
  return %0#0, %0#1 : none, none
}

// -----

// Dropout 7 and 10 have only a ratio attribute and always run in inference.
// CHECK-LABEL: func.func @dropout_attribute
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: return %[[X]] : tensor<2x3xf32>
func.func @dropout_attribute(%x: tensor<2x3xf32>) -> none {
  %0 = onnx.node "Dropout"(%x) {opset = 10 : i64, attrs = {ratio = 0.5 : f32}} : (tensor<2x3xf32>) -> none
  return %0 : none
}

// -----

// Pow with an integer base and a float exponent (T1 may differ from T from
// opset 12): ONNX computes the power in floating point and casts the result
// to the base's type, so Pow([4, 9], 0.5) is [2, 3]. The exponent must not
// be truncated to an integer (that would give 4^0 = 1).
// CHECK-LABEL: func.func @pow_int_base_float_exponent
// CHECK-SAME: (%[[X:.+]]: tensor<2xi64>, %[[E:.+]]: tensor<2xf32>) -> tensor<2xi64>
// CHECK-NOT: nn.cast %[[E]] : tensor<2xf32> -> tensor<2xi64>
// CHECK: %[[P:.+]] = nn.pow {{.*}} -> tensor<2xf{{[0-9]+}}>
// CHECK: %[[R:.+]] = nn.cast %[[P]] : tensor<2xf{{[0-9]+}}> -> tensor<2xi64>
// CHECK: return %[[R]] : tensor<2xi64>
func.func @pow_int_base_float_exponent(%x: tensor<2xi64>, %e: tensor<2xf32>) -> none {
  %0 = onnx.node "Pow"(%x, %e) {opset = 15 : i64} : (tensor<2xi64>, tensor<2xf32>) -> none
  return %0 : none
}

// -----

// Gemm on integers (int32 is a valid T) with fractional alpha and beta:
// ONNX computes alpha * A * B + beta * C in floating point and casts the
// result back, so [[3, 4]] x [[1], [1]] with alpha = beta = 0.5 and C = [5]
// is [[6]]. The factors must not be truncated to the integer 0.
// CHECK-LABEL: func.func @gemm_integer_fractional_scale
// CHECK-SAME: -> tensor<1x1xi32>
// CHECK-NOT: arith.constant dense<0> : tensor<i32>
// CHECK: nn.mul {{.*}} -> tensor<1x1xf{{[0-9]+}}>
// CHECK: nn.cast {{.*}} -> tensor<1x1xi32>
func.func @gemm_integer_fractional_scale(%a: tensor<1x2xi32>, %b: tensor<2x1xi32>, %c: tensor<1xi32>) -> none {
  %0 = onnx.node "Gemm"(%a, %b, %c) {opset = 13 : i64, attrs = {alpha = 0.5 : f32, beta = 0.5 : f32}} : (tensor<1x2xi32>, tensor<2x1xi32>, tensor<1xi32>) -> none
  return %0 : none
}

// -----

// Dropout 7 (opsets 7 to 9) types its mask output like the data (T); bool
// masks start with Dropout 10. In inference the mask keeps everything: ones
// of the data's type.
// CHECK-LABEL: func.func @dropout_7_mask
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>)
// CHECK: %[[MASK:.+]] = arith.constant dense<1.000000e+00> : tensor<2x3xf32>
// CHECK: return %[[X]], %[[MASK]] : tensor<2x3xf32>, tensor<2x3xf32>
func.func @dropout_7_mask(%x: tensor<2x3xf32>) -> (none, none) {
  %0:2 = onnx.node "Dropout"(%x) {opset = 9 : i64, attrs = {ratio = 0.5 : f32}} : (tensor<2x3xf32>) -> (none, none)
  return %0#0, %0#1 : none, none
}

// -----

// Sin and Cos are nn ops; LessOrEqual and GreaterOrEqual are the strict
// comparison or equality (false where either side is NaN, which
// not(a > b) would get wrong); IsNaN is x != x.
// CHECK-LABEL: func.func @comparisons_and_trigonometry
// CHECK-SAME: (%[[A:.+]]: tensor<4xf32>, %[[B:.+]]: tensor<4xf32>)
// CHECK: nn.sin %[[A]] : tensor<4xf32> -> tensor<4xf32>
// CHECK: nn.cos %[[A]] : tensor<4xf32> -> tensor<4xf32>
// CHECK: %[[LT:.+]] = nn.less %[[A]], %[[B]]
// CHECK: %[[EQ:.+]] = nn.equal %[[A]], %[[B]]
// CHECK: nn.or %[[LT]], %[[EQ]] : tensor<4xi1>, tensor<4xi1> -> tensor<4xi1>
// CHECK: %[[GT:.+]] = nn.greater %[[A]], %[[B]]
// CHECK: %[[EQ2:.+]] = nn.equal %[[A]], %[[B]]
// CHECK: nn.or %[[GT]], %[[EQ2]]
// CHECK: %[[SAME:.+]] = nn.equal %[[A]], %[[A]]
// CHECK: nn.not %[[SAME]] : tensor<4xi1> -> tensor<4xi1>
func.func @comparisons_and_trigonometry(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (none, none, none, none, none) {
  %0 = onnx.node "Sin"(%a) {opset = 7 : i64} : (tensor<4xf32>) -> none
  %1 = onnx.node "Cos"(%a) {opset = 22 : i64} : (tensor<4xf32>) -> none
  %2 = onnx.node "LessOrEqual"(%a, %b) {opset = 16 : i64} : (tensor<4xf32>, tensor<4xf32>) -> none
  %3 = onnx.node "GreaterOrEqual"(%a, %b) {opset = 12 : i64} : (tensor<4xf32>, tensor<4xf32>) -> none
  %4 = onnx.node "IsNaN"(%a) {opset = 20 : i64} : (tensor<4xf32>) -> none
  return %0, %1, %2, %3, %4 : none, none, none, none, none
}

// -----

// HardSwish and HardSigmoid are one op each, as PyTorch's hardswish and
// hardsigmoid (their backward keeps x alone); HardSigmoid keeps ONNX's
// alpha and beta (0.2 and 0.5 by default).
// CHECK-LABEL: func.func @hard_swish
// CHECK-SAME: (%[[X:.+]]: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
// CHECK-NEXT: nn.hard_swish %[[X]] : tensor<4xf32> -> tensor<4xf32>
// CHECK-NEXT: nn.hard_sigmoid %[[X]] {alpha = 0.1666666716337204 : f64} : tensor<4xf32> -> tensor<4xf32>
// CHECK-NEXT: nn.hard_sigmoid %[[X]] : tensor<4xf32> -> tensor<4xf32>
func.func @hard_swish(%x: tensor<4xf32>) -> (none, none, none) {
  %0 = onnx.node "HardSwish"(%x) {opset = 14 : i64} : (tensor<4xf32>) -> none
  %1 = onnx.node "HardSigmoid"(%x) {opset = 6 : i64, attrs = {alpha = 0.166666672 : f32}} : (tensor<4xf32>) -> none
  %2 = onnx.node "HardSigmoid"(%x) {opset = 6 : i64} : (tensor<4xf32>) -> none
  return %0, %1, %2 : none, none, none
}

// -----

// Mish is x * tanh(softplus(x)), at opset 18 and 22 alike.
// CHECK-LABEL: func.func @mish
// CHECK-SAME: (%[[X:.+]]: tensor<4xf32>, %[[H:.+]]: tensor<4xbf16>)
// CHECK-NEXT: %[[S:.+]] = nn.softplus %[[X]] : tensor<4xf32> -> tensor<4xf32>
// CHECK-NEXT: %[[T:.+]] = nn.tanh %[[S]] : tensor<4xf32> -> tensor<4xf32>
// CHECK-NEXT: nn.mul %[[X]], %[[T]] : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
// CHECK-NEXT: %[[SH:.+]] = nn.softplus %[[H]] : tensor<4xbf16> -> tensor<4xbf16>
// CHECK-NEXT: %[[TH:.+]] = nn.tanh %[[SH]] : tensor<4xbf16> -> tensor<4xbf16>
// CHECK-NEXT: nn.mul %[[H]], %[[TH]] : tensor<4xbf16>, tensor<4xbf16> -> tensor<4xbf16>
func.func @mish(%x: tensor<4xf32>, %h: tensor<4xbf16>) -> (none, none) {
  %0 = onnx.node "Mish"(%x) {opset = 18 : i64} : (tensor<4xf32>) -> none
  %1 = onnx.node "Mish"(%h) {opset = 22 : i64} : (tensor<4xbf16>) -> none
  return %0, %1 : none, none
}
