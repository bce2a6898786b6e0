// RUN: ztc-opt %s -split-input-file -ztc-convert-onnx-to-nn -verify-diagnostics

// Diagnostics of ztc-convert-onnx-to-nn, one case each: the pass's own
// checks (unsupported operators, since-versions, domains, dynamic shapes and
// element types) and the errors of the elementwise converters, including
// shape errors found by nn's type inference. The neural and shape
// converters' errors are in convert-onnx-to-nn-neural-invalid.mlir and
// convert-onnx-to-nn-shape-invalid.mlir.
//
// Nodes carry a name (`loc("name")`) as imported nodes do, and every message
// starts with it; a bare name has no file position, so the diagnostics are
// expected `@unknown`.

// Every node without a converter is listed in one error at the first of
// them, grouped by op type (with the opset), before anything is converted.
func.func @unsupported_grouped(%x: tensor<2x3xf32>) -> (none, none, none) {
  // expected-error @unknown {{unsupported ONNX operators: TopK (opset 17) at node 'topk'; Einsum (opset 17) at nodes 'e1', 'e2'}}
  %0 = onnx.node "TopK"(%x) {opset = 17 : i64} : (tensor<2x3xf32>) -> none loc("topk")
  %1 = onnx.node "Einsum"(%x) {opset = 17 : i64} : (tensor<2x3xf32>) -> none loc("e1")
  %2 = onnx.node "Relu"(%x) {opset = 17 : i64} : (tensor<2x3xf32>) -> none loc("relu")
  %3 = onnx.node "Einsum"(%2) {opset = 17 : i64} : (none) -> none loc("e2")
  return %0, %1, %3 : none, none, none
}

// -----

// Past five nodes of one op type the list is cut short.
func.func @unsupported_many(%x: tensor<2x3xf32>) -> none {
  // expected-error @unknown {{unsupported ONNX operators: Tan (opset 17) at nodes 'c1', 'c2', 'c3', 'c4', 'c5' and 2 more}}
  %0 = onnx.node "Tan"(%x) {opset = 17 : i64} : (tensor<2x3xf32>) -> none loc("c1")
  %1 = onnx.node "Tan"(%0) {opset = 17 : i64} : (none) -> none loc("c2")
  %2 = onnx.node "Tan"(%1) {opset = 17 : i64} : (none) -> none loc("c3")
  %3 = onnx.node "Tan"(%2) {opset = 17 : i64} : (none) -> none loc("c4")
  %4 = onnx.node "Tan"(%3) {opset = 17 : i64} : (none) -> none loc("c5")
  %5 = onnx.node "Tan"(%4) {opset = 17 : i64} : (none) -> none loc("c6")
  %6 = onnx.node "Tan"(%5) {opset = 17 : i64} : (none) -> none loc("c7")
  return %6 : none
}

// -----

// Add at opset 6 resolves to since-version 6 (no implicit broadcasting),
// which has no converter.
func.func @unsupported_since_version(%x: tensor<2x3xf32>) -> none {
  // expected-error @unknown {{unsupported ONNX operators: Add (opset 6, unsupported opset version: since-version 6) at node 'add'}}
  %0 = onnx.node "Add"(%x, %x) {opset = 6 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> none loc("add")
  return %0 : none
}

// -----

// Gelu only exists from opset 20.
func.func @not_yet_an_operator(%x: tensor<2x3xf32>) -> none {
  // expected-error @unknown {{unsupported ONNX operators: Gelu (opset 17, not an ONNX operator at this opset) at node 'gelu'}}
  %0 = onnx.node "Gelu"(%x) {opset = 17 : i64} : (tensor<2x3xf32>) -> none loc("gelu")
  return %0 : none
}

// -----

// Only the default ONNX domain is converted.
func.func @other_domain(%x: tensor<2x3xf32>) -> none {
  // expected-error @unknown {{unsupported ONNX operators: Gelu (opset 1, domain 'com.microsoft') at node 'ms_gelu'}}
  %0 = onnx.node "Gelu"(%x) {domain = "com.microsoft", opset = 1 : i64} : (tensor<2x3xf32>) -> none loc("ms_gelu")
  return %0 : none
}

// -----

// The importer marks attributes it cannot represent (subgraphs, sparse
// tensors); such nodes are unsupported.
func.func @unsupported_attribute() -> none {
  // expected-error @unknown {{unsupported ONNX operators: Constant (opset 17, attribute 'sparse_value' <unsupported SPARSE_TENSOR>) at node 'sparse'}}
  %0 = onnx.node "Constant"() {opset = 17 : i64, attrs = {sparse_value = "<unsupported SPARSE_TENSOR>"}} : () -> none loc("sparse")
  return %0 : none
}

// -----

// Inputs must have static shapes (bind them at import).
func.func @dynamic_shape(%x: tensor<?x3xf32>) -> none {
  // expected-error @unknown {{node 'relu' (Relu, opset 17): input 0 has type 'tensor<?x3xf32>'; only tensors with static shapes are supported}}
  %0 = onnx.node "Relu"(%x) {opset = 17 : i64} : (tensor<?x3xf32>) -> none loc("relu")
  return %0 : none
}

// -----

// Unsigned integers are not an nn element type.
func.func @unsupported_element_type(%x: tensor<4xui8>) -> none {
  // expected-error @unknown {{node 'relu' (Relu, opset 17): input 0 has unsupported element type 'ui8' (nn supports f32, f64, f16, bf16, i64, i32, i8 and i1)}}
  %0 = onnx.node "Relu"(%x) {opset = 17 : i64} : (tensor<4xui8>) -> none loc("relu")
  return %0 : none
}

// -----

// Every input is checked, including the one CastLike only takes the type
// of.
func.func @unsupported_element_type_second(%x: tensor<3xf32>, %y: tensor<2xui8>) -> none {
  // expected-error @unknown {{node 'cast_like' (CastLike, opset 15): input 1 has unsupported element type 'ui8'}}
  %0 = onnx.node "CastLike"(%x, %y) {opset = 15 : i64} : (tensor<3xf32>, tensor<2xui8>) -> none loc("cast_like")
  return %0 : none
}

// -----

// An output the operator does not have is an error, not a dangling value:
// the schema's output count is checked before conversion.
func.func @used_output_not_produced(%x: tensor<4xf32>) -> none {
  // expected-error @unknown {{node 'relu' (Relu, opset 17): has 1 output, got 2}}
  %0:2 = onnx.node "Relu"(%x) {opset = 17 : i64} : (tensor<4xf32>) -> (none, none) loc("relu")
  return %0#1 : none
}

// -----

// Operands that do not broadcast are reported by nn's type inference at
// the node.
func.func @add_broadcast_mismatch(%a: tensor<2x3xf32>, %b: tensor<4xf32>) -> none {
  // expected-error @unknown {{node 'add' (Add, opset 14): cannot build nn.add: 'nn.add' op operands 'tensor<2x3xf32>' and 'tensor<4xf32>' are not broadcastable}}
  %0 = onnx.node "Add"(%a, %b) {opset = 14 : i64} : (tensor<2x3xf32>, tensor<4xf32>) -> none loc("add")
  return %0 : none
}

// -----

// Binary operands share one element type.
func.func @mul_element_types(%a: tensor<2x3xf32>, %b: tensor<3xf16>) -> none {
  // expected-error @unknown {{node 'mul' (Mul, opset 14): cannot build nn.mul: 'nn.mul' op expects rhs element type 'f32', got 'tensor<3xf16>'}}
  %0 = onnx.node "Mul"(%a, %b) {opset = 14 : i64} : (tensor<2x3xf32>, tensor<3xf16>) -> none loc("mul")
  return %0 : none
}

// -----

// Sub and Div infer the same way: the Sub converts, the Div does not
// broadcast.
func.func @div_broadcast_mismatch(%a: tensor<2xi64>, %b: tensor<3xi64>) -> none {
  %s = onnx.node "Sub"(%a, %a) {opset = 13 : i64} : (tensor<2xi64>, tensor<2xi64>) -> none loc("sub")
  // expected-error @unknown {{node 'div' (Div, opset 13): cannot build nn.div: 'nn.div' op operands 'tensor<2xi64>' and 'tensor<3xi64>' are not broadcastable}}
  %0 = onnx.node "Div"(%s, %b) {opset = 13 : i64} : (none, tensor<3xi64>) -> none loc("div")
  return %0 : none
}

// -----

// The exponent of Pow is cast to the base's type first, then broadcast.
func.func @pow_broadcast_mismatch(%x: tensor<3xf32>, %e: tensor<2xi64>) -> none {
  // expected-error @unknown {{node 'pow' (Pow, opset 15): cannot build nn.pow: 'nn.pow' op operands 'tensor<3xf32>' and 'tensor<2xf32>' are not broadcastable}}
  %0 = onnx.node "Pow"(%x, %e) {opset = 15 : i64} : (tensor<3xf32>, tensor<2xi64>) -> none loc("pow")
  return %0 : none
}

// -----

// Variadic Max checks every step: the third input does not broadcast.
func.func @max_third_input(%a: tensor<2x3xf32>, %b: tensor<3xf32>, %c: tensor<2xf32>) -> none {
  // expected-error @unknown {{node 'max' (Max, opset 13): cannot build nn.max: 'nn.max' op operands 'tensor<2x3xf32>' and 'tensor<2xf32>' are not broadcastable}}
  %0 = onnx.node "Max"(%a, %b, %c) {opset = 13 : i64} : (tensor<2x3xf32>, tensor<3xf32>, tensor<2xf32>) -> none loc("max")
  return %0 : none
}

// -----

// Min likewise.
func.func @min_mismatch(%a: tensor<4xf32>, %b: tensor<5xf32>) -> none {
  // expected-error @unknown {{node 'min' (Min, opset 8): cannot build nn.min: 'nn.min' op operands 'tensor<4xf32>' and 'tensor<5xf32>' are not broadcastable}}
  %0 = onnx.node "Min"(%a, %b) {opset = 8 : i64} : (tensor<4xf32>, tensor<5xf32>) -> none loc("min")
  return %0 : none
}

// -----

// Comparisons check broadcasting too.
func.func @equal_mismatch(%a: tensor<4xi64>, %b: tensor<5xi64>) -> none {
  // expected-error @unknown {{node 'equal' (Equal, opset 13): cannot build nn.equal: 'nn.equal' op operands 'tensor<4xi64>' and 'tensor<5xi64>' are not broadcastable}}
  %0 = onnx.node "Equal"(%a, %b) {opset = 13 : i64} : (tensor<4xi64>, tensor<5xi64>) -> none loc("equal")
  return %0 : none
}

// -----

// Less and Greater order numbers, not booleans.
func.func @less_of_bool(%x: tensor<3xi1>) -> none {
  // expected-error @unknown {{node 'less' (Less, opset 13): 'nn.less' op operand #0 must be statically shaped tensor of 32-bit float or 64-bit float or 16-bit float or bfloat16 type or 64-bit signless integer or 32-bit signless integer or 8-bit signless integer values, but got 'tensor<3xi1>'}}
  %0 = onnx.node "Less"(%x, %x) {opset = 13 : i64} : (tensor<3xi1>, tensor<3xi1>) -> none loc("less")
  return %0 : none
}

// -----

// Greater: shapes must broadcast.
func.func @greater_mismatch(%a: tensor<4xf32>, %b: tensor<2xf32>) -> none {
  // expected-error @unknown {{node 'greater' (Greater, opset 13): cannot build nn.greater: 'nn.greater' op operands 'tensor<4xf32>' and 'tensor<2xf32>' are not broadcastable}}
  %0 = onnx.node "Greater"(%a, %b) {opset = 13 : i64} : (tensor<4xf32>, tensor<2xf32>) -> none loc("greater")
  return %0 : none
}

// -----

// And, Or and Not take booleans.
func.func @and_of_float(%x: tensor<3xf32>) -> none {
  // expected-error @unknown {{node 'and' (And, opset 7): 'nn.and' op operand #0 must be statically shaped tensor of 1-bit signless integer values, but got 'tensor<3xf32>'}}
  %0 = onnx.node "And"(%x, %x) {opset = 7 : i64} : (tensor<3xf32>, tensor<3xf32>) -> none loc("and")
  return %0 : none
}

// -----

// Or: shapes must broadcast.
func.func @or_mismatch(%a: tensor<3xi1>, %b: tensor<2xi1>) -> none {
  // expected-error @unknown {{node 'or' (Or, opset 7): cannot build nn.or: 'nn.or' op operands 'tensor<3xi1>' and 'tensor<2xi1>' are not broadcastable}}
  %0 = onnx.node "Or"(%a, %b) {opset = 7 : i64} : (tensor<3xi1>, tensor<2xi1>) -> none loc("or")
  return %0 : none
}

// -----

// Not of a float.
func.func @not_of_float(%x: tensor<3xf32>) -> none {
  // expected-error @unknown {{node 'not' (Not, opset 1): 'nn.not' op operand #0 must be statically shaped tensor of 1-bit signless integer values, but got 'tensor<3xf32>'}}
  %0 = onnx.node "Not"(%x) {opset = 1 : i64} : (tensor<3xf32>) -> none loc("not")
  return %0 : none
}

// -----

// Transcendental ops take floats only; the nn verifier's complaint is
// reported at the node.
func.func @exp_of_integer(%x: tensor<3xi32>) -> none {
  // expected-error @unknown {{node 'exp' (Exp, opset 13): 'nn.exp' op operand #0 must be statically shaped tensor of 32-bit float or 64-bit float or 16-bit float or bfloat16 type values, but got 'tensor<3xi32>'}}
  %0 = onnx.node "Exp"(%x) {opset = 13 : i64} : (tensor<3xi32>) -> none loc("exp")
  return %0 : none
}

// -----

// Log takes floats only.
func.func @log_of_integer(%x: tensor<3xi64>) -> none {
  // expected-error @unknown {{node 'log' (Log, opset 13): 'nn.log' op operand #0 must be statically shaped tensor of 32-bit float}}
  %0 = onnx.node "Log"(%x) {opset = 13 : i64} : (tensor<3xi64>) -> none loc("log")
  return %0 : none
}

// -----

// Tanh takes floats only.
func.func @tanh_of_integer(%x: tensor<3xi64>) -> none {
  // expected-error @unknown {{node 'tanh' (Tanh, opset 13): 'nn.tanh' op operand #0 must be statically shaped tensor of 32-bit float}}
  %0 = onnx.node "Tanh"(%x) {opset = 13 : i64} : (tensor<3xi64>) -> none loc("tanh")
  return %0 : none
}

// -----

// Sigmoid takes floats only.
func.func @sigmoid_of_integer(%x: tensor<3xi64>) -> none {
  // expected-error @unknown {{node 'sigmoid' (Sigmoid, opset 13): 'nn.sigmoid' op operand #0 must be statically shaped tensor of 32-bit float}}
  %0 = onnx.node "Sigmoid"(%x) {opset = 13 : i64} : (tensor<3xi64>) -> none loc("sigmoid")
  return %0 : none
}

// -----

// Sqrt takes floats only.
func.func @sqrt_of_integer(%x: tensor<3xi64>) -> none {
  // expected-error @unknown {{node 'sqrt' (Sqrt, opset 13): 'nn.sqrt' op operand #0 must be statically shaped tensor of 32-bit float}}
  %0 = onnx.node "Sqrt"(%x) {opset = 13 : i64} : (tensor<3xi64>) -> none loc("sqrt")
  return %0 : none
}

// -----

// Reciprocal takes floats only.
func.func @reciprocal_of_integer(%x: tensor<3xi64>) -> none {
  // expected-error @unknown {{node 'reciprocal' (Reciprocal, opset 13): 'nn.reciprocal' op operand #0 must be statically shaped tensor of 32-bit float}}
  %0 = onnx.node "Reciprocal"(%x) {opset = 13 : i64} : (tensor<3xi64>) -> none loc("reciprocal")
  return %0 : none
}

// -----

// Erf takes floats only.
func.func @erf_of_integer(%x: tensor<3xi64>) -> none {
  // expected-error @unknown {{node 'erf' (Erf, opset 13): 'nn.erf' op operand #0 must be statically shaped tensor of 32-bit float}}
  %0 = onnx.node "Erf"(%x) {opset = 13 : i64} : (tensor<3xi64>) -> none loc("erf")
  return %0 : none
}

// -----

// Softplus takes floats only.
func.func @softplus_of_integer(%x: tensor<3xi64>) -> none {
  // expected-error @unknown {{node 'softplus' (Softplus, opset 13): 'nn.softplus' op operand #0 must be statically shaped tensor of 32-bit float}}
  %0 = onnx.node "Softplus"(%x) {opset = 13 : i64} : (tensor<3xi64>) -> none loc("softplus")
  return %0 : none
}

// -----

// Neg takes numbers, not booleans.
func.func @neg_of_bool(%x: tensor<3xi1>) -> none {
  // expected-error @unknown {{node 'neg' (Neg, opset 13): 'nn.neg' op operand #0 must be statically shaped tensor of 32-bit float or 64-bit float or 16-bit float or bfloat16 type or 64-bit signless integer or 32-bit signless integer or 8-bit signless integer values, but got 'tensor<3xi1>'}}
  %0 = onnx.node "Neg"(%x) {opset = 13 : i64} : (tensor<3xi1>) -> none loc("neg")
  return %0 : none
}

// -----

// Abs takes numbers, not booleans.
func.func @abs_of_bool(%x: tensor<3xi1>) -> none {
  // expected-error @unknown {{node 'abs' (Abs, opset 13): 'nn.abs' op operand #0 must be statically shaped tensor of 32-bit float or 64-bit float or 16-bit float or bfloat16 type or 64-bit signless integer or 32-bit signless integer or 8-bit signless integer values, but got 'tensor<3xi1>'}}
  %0 = onnx.node "Abs"(%x) {opset = 13 : i64} : (tensor<3xi1>) -> none loc("abs")
  return %0 : none
}

// -----

// LeakyRelu takes floats only.
func.func @leaky_relu_of_integer(%x: tensor<3xi32>) -> none {
  // expected-error @unknown {{node 'leaky' (LeakyRelu, opset 16): 'nn.leaky_relu' op operand #0 must be statically shaped tensor of 32-bit float}}
  %0 = onnx.node "LeakyRelu"(%x) {opset = 16 : i64} : (tensor<3xi32>) -> none loc("leaky")
  return %0 : none
}

// -----

// Gelu knows two approximations.
func.func @gelu_approximation(%x: tensor<2x3xf32>) -> none {
  // expected-error @unknown {{node 'gelu' (Gelu, opset 20): approximate must be "none" or "tanh", got "erf"}}
  %0 = onnx.node "Gelu"(%x) {opset = 20 : i64, attrs = {approximate = "erf"}} : (tensor<2x3xf32>) -> none loc("gelu")
  return %0 : none
}

// -----

// Clip's bounds must broadcast with its input.
func.func @clip_bound_shape(%x: tensor<2x3xf32>, %lo: tensor<4xf32>) -> none {
  // expected-error @unknown {{node 'clip' (Clip, opset 13): cannot build nn.max: 'nn.max' op operands 'tensor<2x3xf32>' and 'tensor<4xf32>' are not broadcastable}}
  %0 = onnx.node "Clip"(%x, %lo) {opset = 13 : i64} : (tensor<2x3xf32>, tensor<4xf32>) -> none loc("clip")
  return %0 : none
}

// -----

// Where's condition is boolean.
func.func @where_float_condition(%c: tensor<2x3xf32>, %a: tensor<2x3xf32>) -> none {
  // expected-error @unknown {{node 'where' (Where, opset 16): 'nn.where' op operand #0 must be statically shaped tensor of 1-bit signless integer values, but got 'tensor<2x3xf32>'}}
  %0 = onnx.node "Where"(%c, %a, %a) {opset = 16 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) -> none loc("where")
  return %0 : none
}

// -----

// Cast to ONNX data type 2 (uint8) has no nn element type.
func.func @cast_to_uint8(%x: tensor<2x3xf32>) -> none {
  // expected-error @unknown {{node 'cast' (Cast, opset 19): unsupported element type: cannot cast to ONNX data type 2 (supported: float, double, float16, bfloat16, int64, int32, int8, bool)}}
  %0 = onnx.node "Cast"(%x) {opset = 19 : i64, attrs = {to = 2 : i64}} : (tensor<2x3xf32>) -> none loc("cast")
  return %0 : none
}

// -----

// A training-mode Dropout's ratio must be known: it decides the scale.
func.func @dropout_ratio_not_constant(%x: tensor<2x3xf32>, %ratio: tensor<f32>) -> none {
  %training = onnx.constant dense<true> : tensor<i1>
  // expected-error @unknown {{node 'dropout' (Dropout, opset 13): the ratio of a training-mode Dropout must be a constant float}}
  %0 = onnx.node "Dropout"(%x, %ratio, %training) {opset = 13 : i64} : (tensor<2x3xf32>, tensor<f32>, tensor<i1>) -> none loc("dropout")
  return %0 : none
}

// -----

// A ratio is a probability.
func.func @dropout_ratio_out_of_range(%x: tensor<2x3xf32>) -> none {
  %ratio = onnx.constant dense<1.5> : tensor<f32>
  %training = onnx.constant dense<true> : tensor<i1>
  // expected-error @unknown {{node 'dropout' (Dropout, opset 13): ratio must be in [0, 1], got 1.5}}
  %0 = onnx.node "Dropout"(%x, %ratio, %training) {opset = 13 : i64} : (tensor<2x3xf32>, tensor<f32>, tensor<i1>) -> none loc("dropout")
  return %0 : none
}

// -----

// The random key is the argument named 'rng'; a graph input that already
// has the name is not taken for it.
func.func @dropout_rng_name_taken(%x: tensor<2x3xf32>, %rng: tensor<2xf32> {train.binding = #train.binding<input "rng">}) -> none {
  %training = onnx.constant dense<true> : tensor<i1>
  %none = onnx.none
  // expected-error @unknown {{node 'dropout' (Dropout, opset 13): the random key of training-mode Dropout is an argument named 'rng', but the graph already has an input of that name ('tensor<2xf32>')}}
  %0 = onnx.node "Dropout"(%x, %none, %training) {opset = 13 : i64} : (tensor<2x3xf32>, none, tensor<i1>) -> none loc("dropout")
  return %0 : none
}

// -----

// Whether Dropout trains must be known.
func.func @dropout_mode_not_constant(%x: tensor<2x3xf32>, %training: tensor<i1>) -> none {
  %ratio = onnx.constant dense<0.1> : tensor<f32>
  // expected-error @unknown {{node 'dropout' (Dropout, opset 13): training_mode must be a constant}}
  %0 = onnx.node "Dropout"(%x, %ratio, %training) {opset = 13 : i64} : (tensor<2x3xf32>, tensor<f32>, tensor<i1>) -> none loc("dropout")
  return %0 : none
}

// -----

// Input counts are checked against the operator's schema before the
// converter reads an input: a MatMul with one operand.
func.func @matmul_one_input(%a: tensor<2x2xf32>) -> none {
  // expected-error @unknown {{node 'mm' (MatMul, opset 17): takes 2 inputs, got 1}}
  %0 = onnx.node "MatMul"(%a) {opset = 17 : i64} : (tensor<2x2xf32>) -> none loc("mm")
  return %0 : none
}

// -----

// An attribute the operator's schema does not declare at the node's opset
// is refused, as ONNX's checker refuses it: a misspelt or misplaced
// attribute is never silently ignored.
func.func @undeclared_attribute(%x: tensor<2x3xf32>) -> none {
  // expected-error @unknown {{node 'relu' (Relu, opset 17): has no attribute 'alpha' at this opset}}
  %0 = onnx.node "Relu"(%x) {opset = 17 : i64, attrs = {alpha = 0.1 : f32}} : (tensor<2x3xf32>) -> none loc("relu")
  return %0 : none
}

// -----

// value_ints came with Constant-12.
func.func @attribute_of_a_later_version() -> none {
  // expected-error @unknown {{node 'c' (Constant, opset 11): has no attribute 'value_ints' at this opset}}
  %0 = onnx.node "Constant"() {opset = 11 : i64, attrs = {value_ints = [1, 2]}} : () -> none loc("c")
  return %0 : none
}
