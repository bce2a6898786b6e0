// RUN: ztc-opt %s -split-input-file --ztc-promote-f64 -verify-diagnostics | FileCheck %s

// ztc-promote-f64 widens every f32, f16 and bf16 tensor of a function to
// f64 (ztc gradcheck's double-precision step); integer and boolean tensors,
// and f64 ones, stay as they are.

// Arguments and results are promoted with their attributes; a float
// constant keeps its values exactly (0.1 in f32 is 0.10000000149011612);
// an op with inferred types is re-created on the f64 operands.
// CHECK-LABEL: func.func @signature
// CHECK-SAME: (%[[X:.+]]: tensor<4xf64> {train.binding = #train.binding<input "x">}, %[[W:.+]]: tensor<4xf64> {train.binding = #train.binding<param "w">})
// CHECK-SAME: -> (tensor<4xf64> {onnx.name = "y"})
// CHECK: %[[C:.+]] = arith.constant dense<[5.000000e-01, 1.000000e+00, 0.10000000149011612, 3.000000e+00]> : tensor<4xf64>
// CHECK: %[[M:.+]] = nn.mul %[[X]], %[[C]] : tensor<4xf64>, tensor<4xf64> -> tensor<4xf64>
// CHECK: %[[A:.+]] = nn.add %[[M]], %[[W]] : tensor<4xf64>, tensor<4xf64> -> tensor<4xf64>
// CHECK: return %[[A]] : tensor<4xf64>
func.func @signature(%x: tensor<4xf32> {train.binding = #train.binding<input "x">},
                     %w: tensor<4xf32> {train.binding = #train.binding<param "w">})
    -> (tensor<4xf32> {onnx.name = "y"}) {
  %c = arith.constant dense<[0.5, 1.0, 0.1, 3.0]> : tensor<4xf32>
  %0 = nn.mul %x, %c : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %1 = nn.add %0, %w : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// f16 and bf16 widen too, splat constants included; ops whose result is
// not a float (comparisons) keep their result type.
// CHECK-LABEL: func.func @half
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf64>, %[[Y:.+]]: tensor<3xf64>) -> (tensor<2x3xf64>, tensor<2x3xi1>)
// CHECK: %[[C:.+]] = arith.constant dense<2.500000e-01> : tensor<f64>
// CHECK: %[[E:.+]] = nn.exp %[[X]] : tensor<2x3xf64> -> tensor<2x3xf64>
// CHECK: %[[M:.+]] = nn.mul %[[E]], %[[C]] : tensor<2x3xf64>, tensor<f64> -> tensor<2x3xf64>
// CHECK: %[[L:.+]] = nn.less %[[M]], %[[Y]] : tensor<2x3xf64>, tensor<3xf64> -> tensor<2x3xi1>
// CHECK: return %[[M]], %[[L]]
func.func @half(%x: tensor<2x3xf16>, %y: tensor<3xbf16>)
    -> (tensor<2x3xf16>, tensor<2x3xi1>) {
  %c = arith.constant dense<0.25> : tensor<f16>
  %0 = nn.exp %x : tensor<2x3xf16> -> tensor<2x3xf16>
  %1 = nn.mul %0, %c : tensor<2x3xf16>, tensor<f16> -> tensor<2x3xf16>
  %2 = nn.cast %y : tensor<3xbf16> -> tensor<3xf16>
  %3 = nn.less %1, %2 : tensor<2x3xf16>, tensor<3xf16> -> tensor<2x3xi1>
  return %1, %3 : tensor<2x3xf16>, tensor<2x3xi1>
}

// -----

// Random numbers (whose result type is given) become f64 with the same
// values; their i64 key stays, and the ratio they are compared with keeps
// its f32 value, so a promoted dropout keeps its masks.
// CHECK-LABEL: func.func @random
// CHECK-SAME: (%[[K:.+]]: tensor<i64> {train.binding = #train.binding<hyper "rng">}) -> tensor<2x3xi1>
// CHECK: %[[R:.+]] = arith.constant dense<0.30000001192092896> : tensor<f64>
// CHECK: %[[U:.+]] = nn.random_uniform %[[K]] {stream = 3 : i64} : tensor<i64> -> tensor<2x3xf64>
// CHECK: nn.less %[[U]], %[[R]] : tensor<2x3xf64>, tensor<f64> -> tensor<2x3xi1>
func.func @random(%key: tensor<i64> {train.binding = #train.binding<hyper "rng">})
    -> tensor<2x3xi1> {
  %r = arith.constant dense<0.3> : tensor<f32>
  %u = nn.random_uniform %key {stream = 3 : i64} : tensor<i64> -> tensor<2x3xf32>
  %0 = nn.less %u, %r : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xi1>
  return %0 : tensor<2x3xi1>
}

// -----

// Casts: to a float type they become casts to f64, and a cast between two
// float types vanishes (both sides are f64 now); casts to and between
// integers stay. Reshapes, whose result type is given, are promoted too.
// CHECK-LABEL: func.func @casts
// CHECK-SAME: (%[[X:.+]]: tensor<4xf64>, %[[I:.+]]: tensor<4xi64>)
// CHECK: %[[F:.+]] = nn.cast %[[I]] : tensor<4xi64> -> tensor<4xf64>
// CHECK-NOT: nn.cast %[[X]]
// CHECK: %[[S:.+]] = nn.add %[[X]], %[[F]] : tensor<4xf64>, tensor<4xf64> -> tensor<4xf64>
// CHECK: %[[R:.+]] = nn.reshape %[[S]] : tensor<4xf64> -> tensor<2x2xf64>
// CHECK: %[[N:.+]] = nn.cast %[[R]] : tensor<2x2xf64> -> tensor<2x2xi32>
// CHECK: %[[J:.+]] = nn.cast %[[I]] : tensor<4xi64> -> tensor<4xi32>
// CHECK: return %[[R]], %[[N]], %[[J]] : tensor<2x2xf64>, tensor<2x2xi32>, tensor<4xi32>
func.func @casts(%x: tensor<4xf32>, %i: tensor<4xi64>)
    -> (tensor<2x2xf16>, tensor<2x2xi32>, tensor<4xi32>) {
  %0 = nn.cast %i : tensor<4xi64> -> tensor<4xf16>
  %1 = nn.cast %x : tensor<4xf32> -> tensor<4xf16>
  %2 = nn.add %1, %0 : tensor<4xf16>, tensor<4xf16> -> tensor<4xf16>
  %3 = nn.reshape %2 : tensor<4xf16> -> tensor<2x2xf16>
  %4 = nn.cast %3 : tensor<2x2xf16> -> tensor<2x2xi32>
  %5 = nn.cast %i : tensor<4xi64> -> tensor<4xi32>
  return %3, %4, %5 : tensor<2x2xf16>, tensor<2x2xi32>, tensor<4xi32>
}

// -----

// A loss over integer labels: the labels and the integer constant stay,
// the float path becomes f64.
// CHECK-LABEL: func.func @loss
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf64>, %[[T:.+]]: tensor<2xi64>) -> tensor<f64>
// CHECK: %[[K:.+]] = arith.constant dense<[1, 0]> : tensor<2xi64>
// CHECK: %[[LP:.+]] = nn.log_softmax %[[X]] {axis = 1 : i64} : tensor<2x3xf64> -> tensor<2x3xf64>
// CHECK: %[[S:.+]] = nn.add %[[T]], %[[K]] : tensor<2xi64>, tensor<2xi64> -> tensor<2xi64>
// CHECK: nn.nll_loss %[[LP]], %[[S]] {ignore_index = -100 : i64} : tensor<2x3xf64>, tensor<2xi64> -> tensor<f64>
func.func @loss(%x: tensor<2x3xf32>, %t: tensor<2xi64>) -> tensor<f32> {
  %k = arith.constant dense<[1, 0]> : tensor<2xi64>
  %0 = nn.log_softmax %x {axis = 1 : i64} : tensor<2x3xf32> -> tensor<2x3xf32>
  %1 = nn.add %t, %k : tensor<2xi64>, tensor<2xi64> -> tensor<2xi64>
  %2 = nn.nll_loss %0, %1 {ignore_index = -100 : i64, reduction = "mean"}
         : tensor<2x3xf32>, tensor<2xi64> -> tensor<f32>
  return %2 : tensor<f32>
}

// -----

// Negative: a function already in f64, or without floats, is unchanged.
// CHECK-LABEL: func.func @already_f64
// CHECK-SAME: (%[[X:.+]]: tensor<4xf64>, %[[I:.+]]: tensor<4xi64>) -> (tensor<4xf64>, tensor<4xi64>)
// CHECK: %[[C:.+]] = arith.constant dense<1.000000e+00> : tensor<f64>
// CHECK: %[[A:.+]] = nn.add %[[X]], %[[C]] : tensor<4xf64>, tensor<f64> -> tensor<4xf64>
// CHECK: %[[N:.+]] = nn.neg %[[I]] : tensor<4xi64> -> tensor<4xi64>
// CHECK: return %[[A]], %[[N]]
func.func @already_f64(%x: tensor<4xf64>, %i: tensor<4xi64>)
    -> (tensor<4xf64>, tensor<4xi64>) {
  %c = arith.constant dense<1.0> : tensor<f64>
  %0 = nn.add %x, %c : tensor<4xf64>, tensor<f64> -> tensor<4xf64>
  %1 = nn.neg %i : tensor<4xi64> -> tensor<4xi64>
  return %0, %1 : tensor<4xf64>, tensor<4xi64>
}

// -----

// Negative: ops of other dialects are not promoted; one that carries an
// f32 tensor is an error (its semantics in f64 are not the pass's to
// decide), reported before anything is rewritten.
func.func @foreign(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = nn.relu %x : tensor<4xf32> -> tensor<4xf32>
  // expected-error @+1 {{'arith.mulf' op computes on 'tensor<4xf32>'; ztc-promote-f64 promotes only nn ops, arith.constant and func.return}}
  %1 = arith.mulf %0, %0 : tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// A call's result would keep its callee's f32 type: an error too.
func.func private @callee(tensor<4xf32>) -> tensor<4xf32>

func.func @call(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'func.call' op computes on 'tensor<4xf32>'; ztc-promote-f64 promotes only nn ops, arith.constant and func.return}}
  %0 = func.call @callee(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A constant whose value is not dense elements (a resource blob) has no
// values the pass can read: an error.
func.func @resource() -> tensor<2xf32> {
  // expected-error @+1 {{'arith.constant' op has a value ztc-promote-f64 cannot convert to f64: dense_resource<blob> : tensor<2xf32>}}
  %0 = arith.constant dense_resource<blob> : tensor<2xf32>
  return %0 : tensor<2xf32>
}

{-#
  dialect_resources: {
    builtin: {
      blob: "0x040000000000803F00000040"
    }
  }
#-}
