// Every error of the emitter (codegen/Emit.cpp), from planned kernel IR
// that the kernel dialect accepts but no step can be printed from: one case
// each, with the message a user would see from `ztc compile`.
//
// Both targets give the same errors.
//
// RUN: ztc-translate %s --ztc-kernel-to-cpu --split-input-file --verify-diagnostics
// RUN: ztc-translate %s --ztc-kernel-to-cuda --split-input-file --verify-diagnostics

// The emitter prints planned functions only.
// expected-error @+1 {{the step has no memory plan; run ztc-plan-memory}}
func.func @unplanned(%x: memref<2xf32> {train.binding = #train.binding<input "x">}) {
  return
}

// -----

// expected-error @+1 {{argument 0 has no train.binding: the runtime cannot bind it}}
func.func @unbound(%x: memref<2xf32>) attributes {kernel.arena_bytes = 0 : i64} {
  return
}

// -----

// expected-error @+1 {{argument 'x' has element type 'i16', which the runtime does not support}}
func.func @odd_argument(%x: memref<2xi16> {train.binding = #train.binding<input "x">}) attributes {kernel.arena_bytes = 0 : i64} {
  return
}

// -----

func.func @first(%x: memref<2xf32> {train.binding = #train.binding<input "x">}) attributes {kernel.arena_bytes = 0 : i64} {
  return
}
// expected-error @+1 {{argument 0 ('x') differs from the binding of the same name in another entry}}
func.func @second(%x: memref<3xf32> {train.binding = #train.binding<input "x">}) attributes {kernel.arena_bytes = 0 : i64} {
  return
}

// -----

func.func @odd_constant() attributes {kernel.arena_bytes = 0 : i64} {
  // expected-error @+1 {{a constant has element type 'i16', which the runtime does not support}}
  %0 = kernel.constant dense<1> : tensor<2xi16> : memref<2xi16>
  return
}

// -----

func.func @unplanned_buffer() attributes {kernel.arena_bytes = 64 : i64} {
  // expected-error @+1 {{'kernel.alloc' op has no planned offset}}
  %0 = kernel.alloc : memref<2xf32>
  return
}

// -----

func.func @scalar_op(%x: memref<2xf32> {train.binding = #train.binding<input "x">}) attributes {kernel.arena_bytes = 64 : i64} {
  %0 = kernel.alloc {offset = 0 : i64} : memref<2xf32>
  kernel.elementwise ins(%x : memref<2xf32>) outs(%0 : memref<2xf32>) {
  ^bb0(%a: f32):
    // expected-error @+1 {{the emitter cannot print this scalar op}}
    %1 = math.tan %a : f32
    kernel.yield %1 : f32
  }
  return
}

// -----

func.func @ungrouped(%x: memref<2x2x2x2xf32> {train.binding = #train.binding<input "x">}) attributes {kernel.arena_bytes = 64 : i64} {
  %0 = kernel.alloc {offset = 0 : i64} : memref<2x2xf32>
  // expected-error @+1 {{'kernel.reduce' op reduces axes that do not group as [reduced, kept, reduced], which the emitter has no loops for}}
  kernel.reduce sum ins(%x : memref<2x2x2x2xf32>) outs(%0 : memref<2x2xf32>) attributes {axes = array<i64: 1, 3>, space = array<i64: 2, 2, 2, 2>} {
  ^bb0(%a: f32):
    kernel.yield %a : f32
  }
  return
}

// -----

// The kept group is dimensions 1 and 2; the input has only the first.
func.func @unbroadcast(%x: memref<3x1x5xf32> {train.binding = #train.binding<input "x">}) attributes {kernel.arena_bytes = 64 : i64} {
  %0 = kernel.alloc {offset = 0 : i64} : memref<3x4xf32>
  // expected-error @+1 {{'kernel.reduce' op input of type 3-d does not broadcast group by group}}
  kernel.reduce sum ins(%x : memref<3x1x5xf32>) outs(%0 : memref<3x4xf32>) attributes {axes = array<i64: 0, 3>, space = array<i64: 2, 3, 4, 5>} {
  ^bb0(%a: f32):
    kernel.yield %a : f32
  }
  return
}

// -----

func.func @outside(%x: memref<2xf32> {train.binding = #train.binding<input "x">}) -> memref<2xf32> attributes {kernel.arena_bytes = 0 : i64} {
  // expected-error @+1 {{'func.return' op returns a buffer outside the arena}}
  return %x : memref<2xf32>
}

// -----

func.func @odd_output() -> (memref<2xi16> {onnx.name = "y"}) attributes {kernel.arena_bytes = 64 : i64} {
  %0 = kernel.alloc {offset = 0 : i64} : memref<2xi16>
  // expected-error @+1 {{output 'y' has element type 'i16', which the runtime does not support}}
  return %0 : memref<2xi16>
}

// -----

func.func @foreign() attributes {kernel.arena_bytes = 0 : i64} {
  // expected-error @+1 {{'arith.constant' op the emitter cannot print this op}}
  %0 = arith.constant 1 : i64
  return
}

