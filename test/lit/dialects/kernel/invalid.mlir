// RUN: ztc-opt %s -split-input-file -verify-diagnostics

func.func @view_count(%x: memref<2x3xf32>) {
  // expected-error @+1 {{cannot view 'memref<2x3xf32>' as 'memref<7xf32>': element type and count must match}}
  %v = kernel.view %x : memref<2x3xf32> to memref<7xf32>
  return
}

// -----

func.func @constant_shape() {
  // expected-error @+1 {{value of type 'tensor<2xf32>' does not fit buffer 'memref<3xf32>'}}
  %k = kernel.constant dense<1.0> : tensor<2xf32> : memref<3xf32>
  return
}

// -----

func.func @no_broadcast(%x: memref<4xf32>) {
  %a = kernel.alloc : memref<2x3xf32>
  // expected-error @+1 {{input 0 of type 'memref<4xf32>' does not broadcast to 'memref<2x3xf32>'}}
  kernel.elementwise ins(%x : memref<4xf32>) outs(%a : memref<2x3xf32>) {
  ^bb0(%p: f32):
    kernel.yield %p : f32
  }
  return
}

// -----

func.func @body_arity(%x: memref<3xf32>) {
  %a = kernel.alloc : memref<3xf32>
  // expected-error @+1 {{body takes 2 scalars for 1 inputs}}
  kernel.elementwise ins(%x : memref<3xf32>) outs(%a : memref<3xf32>) {
  ^bb0(%p: f32, %q: f32):
    kernel.yield %p : f32
  }
  return
}

// -----

func.func @yield_type(%x: memref<3xf32>) {
  %a = kernel.alloc : memref<3xi1>
  // expected-error @+1 {{body yields 'f32' for output elements of type 'i1'}}
  kernel.elementwise ins(%x : memref<3xf32>) outs(%a : memref<3xi1>) {
  ^bb0(%p: f32):
    kernel.yield %p : f32
  }
  return
}

// -----

func.func @yield_count(%x: memref<3xf32>, %y: memref<3xf32>) {
  // expected-error @+1 {{body yields 1 scalars for 2 outputs}}
  kernel.elementwise ins(%x : memref<3xf32>) outs(%x, %y : memref<3xf32>, memref<3xf32>) {
  ^bb0(%p: f32):
    kernel.yield %p : f32
  }
  return
}

// -----

func.func @output_shapes(%x: memref<3xf32>, %y: memref<1x3xf32>) {
  // expected-error @+1 {{output 1 of type 'memref<1x3xf32>' is not the shape of output 0, 'memref<3xf32>'}}
  kernel.elementwise ins(%x : memref<3xf32>) outs(%x, %y : memref<3xf32>, memref<1x3xf32>) {
  ^bb0(%p: f32):
    kernel.yield %p, %p : f32, f32
  }
  return
}

// -----

func.func @unknown_callee(%x: memref<3xf32>) {
  %a = kernel.alloc : memref<3xf32>
  // expected-error @+1 {{unknown library kernel 'fft'}}
  kernel.call "fft" ins(%x : memref<3xf32>) outs(%a : memref<3xf32>)
  return
}

// -----

func.func @callee_arity(%x: memref<3xf32>) {
  %a = kernel.alloc : memref<3xf32>
  // expected-error @+1 {{'matmul' takes 2 to 3 inputs and 1 outputs, got 1 and 1}}
  kernel.call "matmul" ins(%x : memref<3xf32>) outs(%a : memref<3xf32>)
  return
}

// -----

// Typed library calls: each callee's operand element types and
// configuration come from one table (dialects/Kernel/IR/KernelOps.cpp).

func.func @operand_type(%x: memref<4x3xf32>, %i: memref<2xf32>) {
  %a = kernel.alloc : memref<2x3xf32>
  // expected-error @+1 {{'gather' input 1 has 'f32', expected an integer type}}
  kernel.call "gather" ins(%x, %i : memref<4x3xf32>, memref<2xf32>) outs(%a : memref<2x3xf32>) {config = {axis = 0 : i64}}
  return
}

// -----

func.func @operand_like_output(%x: memref<2x3xf16>, %w: memref<3x4xf32>) {
  %a = kernel.alloc : memref<2x4xf32>
  // expected-error @+1 {{'matmul' input 0 has 'f16', expected the kernel's T 'f32'}}
  kernel.call "matmul" ins(%x, %w : memref<2x3xf16>, memref<3x4xf32>) outs(%a : memref<2x4xf32>)
  return
}

// -----

// A kernel without T outputs takes T from its first T input; its C
// operands are T's compute type: f32 for bf16.
func.func @compute_type(%x: memref<6x4xbf16>, %w: memref<4x10xbf16>, %t: memref<6xi64>) {
  %l = kernel.alloc : memref<bf16>
  %c = kernel.alloc : memref<f32>
  // expected-error @+1 {{'linear_cross_entropy' output 0 has 'bf16', expected 'f32', the compute type of its T 'bf16'}}
  kernel.call "linear_cross_entropy" ins(%x, %w, %t : memref<6x4xbf16>, memref<4x10xbf16>, memref<6xi64>) outs(%l, %c : memref<bf16>, memref<f32>)
  return
}

// -----

func.func @misspelt_config(%x: memref<2x3xf32>) {
  %a = kernel.alloc : memref<2x3xf32>
  // expected-error @+1 {{'softmax' has no config attribute 'axes'}}
  kernel.call "softmax" ins(%x : memref<2x3xf32>) outs(%a : memref<2x3xf32>) {config = {axis = 1 : i64, axes = 1 : i64}}
  return
}

// -----

func.func @config_kind(%x: memref<2x3xf32>, %y: memref<3x4xf32>) {
  %a = kernel.alloc : memref<2x4xf32>
  // expected-error @+1 {{'matmul' config 'transpose_b' must be a bool, got 1 : i64}}
  kernel.call "matmul" ins(%x, %y : memref<2x3xf32>, memref<3x4xf32>) outs(%a : memref<2x4xf32>) {config = {transpose_b = 1 : i64}}
  return
}

// -----

func.func @missing_config(%x: memref<2x3xf32>) {
  %a = kernel.alloc : memref<3x2xf32>
  // expected-error @+1 {{'transpose' needs config 'perm'}}
  kernel.call "transpose" ins(%x : memref<2x3xf32>) outs(%a : memref<3x2xf32>)
  return
}

// -----

// Streams: a wait orders two streams; the stream attribute is checked.

func.func @wait_own_stream() {
  %e = kernel.signal {kernel.stream = 1 : i64} : !kernel.event
  // expected-error @+1 {{waits for an event of its own stream 1, which orders nothing}}
  kernel.wait %e {kernel.stream = 1 : i64}
  return
}

// -----

func.func @negative_stream() {
  // expected-error @+1 {{'kernel.stream' must be a non-negative i64}}
  %e = kernel.signal {kernel.stream = -1 : i64} : !kernel.event
  return
}

// -----

func.func @stream_on_other_op() {
  // expected-error @+1 {{'kernel.stream' belongs on a kernel op}}
  %c = arith.constant {kernel.stream = 1 : i64} 0.0 : f32
  return
}

// -----

func.func @launch_group_on_call(%x: memref<4xf32>, %y: memref<4xf32>) {
  // expected-error @+1 {{'kernel.launch_group' is a non-negative i64 on a kernel.elementwise}}
  kernel.call "softmax" ins(%x : memref<4xf32>) outs(%y : memref<4xf32>) {config = {axis = 0 : i64}, kernel.launch_group = 0 : i64}
  return
}

// -----

// expected-error @+1 {{unknown kernel attribute 'kernel.streams'}}
func.func @unknown_attr() attributes {kernel.streams = 2 : i64} {
  return
}

// -----

func.func @unrounded_outside_a_kernel(%x: f32) -> f32 {
  // expected-error @+1 {{'kernel.unrounded' is a unit attribute of an op in a kernel.elementwise or kernel.reduce body}}
  %0 = arith.negf %x {kernel.unrounded} : f32
  return %0 : f32
}

// -----

func.func @reduce_kind(%x: memref<4x3xf32>, %y: memref<3xf32>) {
  // expected-error @+1 {{custom op 'kernel.reduce' expected string or keyword containing one of the following enum values for attribute 'kind' [sum, mean]}}
  kernel.reduce max ins(%x : memref<4x3xf32>) outs(%y : memref<3xf32>) attributes {axes = array<i64: 0>, space = array<i64: 4, 3>} {
  ^bb0(%a: f32):
    kernel.yield %a : f32
  }
  return
}

// -----

func.func @reduce_no_axis(%x: memref<4x3xf32>, %y: memref<4x3xf32>) {
  // expected-error @+1 {{'kernel.reduce' op reduces no axis}}
  kernel.reduce sum ins(%x : memref<4x3xf32>) outs(%y : memref<4x3xf32>) attributes {axes = array<i64>, space = array<i64: 4, 3>} {
  ^bb0(%a: f32):
    kernel.yield %a : f32
  }
  return
}

// -----

func.func @reduce_axes_order(%x: memref<4x3xf32>, %y: memref<f32>) {
  // expected-error @+1 {{'kernel.reduce' op axes must be increasing dimensions of the 2-d space}}
  kernel.reduce sum ins(%x : memref<4x3xf32>) outs(%y : memref<f32>) attributes {axes = array<i64: 1, 0>, space = array<i64: 4, 3>} {
  ^bb0(%a: f32):
    kernel.yield %a : f32
  }
  return
}

// -----

func.func @reduce_output_shape(%x: memref<4x3xf32>, %y: memref<4xf32>) {
  // expected-error @+1 {{'kernel.reduce' op output 'memref<4xf32>' is not the space reduced along the axes}}
  kernel.reduce sum ins(%x : memref<4x3xf32>) outs(%y : memref<4xf32>) attributes {axes = array<i64: 0>, space = array<i64: 4, 3>} {
  ^bb0(%a: f32):
    kernel.yield %a : f32
  }
  return
}

// -----

func.func @reduce_input_shape(%x: memref<5x3xf32>, %y: memref<3xf32>) {
  // expected-error @+1 {{'kernel.reduce' op input 0 of type 'memref<5x3xf32>' does not broadcast to the space}}
  kernel.reduce sum ins(%x : memref<5x3xf32>) outs(%y : memref<3xf32>) attributes {axes = array<i64: 0>, space = array<i64: 4, 3>} {
  ^bb0(%a: f32):
    kernel.yield %a : f32
  }
  return
}

// -----

func.func @reduce_integer(%x: memref<4x3xi32>, %y: memref<3xi32>) {
  // expected-error @+1 {{'kernel.reduce' op output elements must be floats, got 'i32'}}
  kernel.reduce sum ins(%x : memref<4x3xi32>) outs(%y : memref<3xi32>) attributes {axes = array<i64: 0>, space = array<i64: 4, 3>} {
  ^bb0(%a: i32):
    kernel.yield %a : i32
  }
  return
}

// -----

func.func @reduce_yield_type(%x: memref<4x3xf32>, %y: memref<3xbf16>) {
  // expected-error @+1 {{'kernel.reduce' op body yields 'f32' for output elements of type 'bf16'}}
  kernel.reduce sum ins(%x : memref<4x3xf32>) outs(%y : memref<3xbf16>) attributes {axes = array<i64: 0>, space = array<i64: 4, 3>} {
  ^bb0(%a: f32):
    kernel.yield %a : f32
  }
  return
}

// -----

func.func @reduce_yield_count(%x: memref<4x3xf32>, %y: memref<3xf32>, %z: memref<3xf32>) {
  // expected-error @+1 {{'kernel.reduce' op body must end in a kernel.yield of one value per output (2)}}
  kernel.reduce sum ins(%x : memref<4x3xf32>) outs(%y, %z : memref<3xf32>, memref<3xf32>) attributes {axes = array<i64: 0>, space = array<i64: 4, 3>} {
  ^bb0(%a: f32):
    kernel.yield %a : f32
  }
  return
}

// -----

func.func @reduce_mixed_outputs(%x: memref<4x3xf32>, %y: memref<3xf32>, %z: memref<3xbf16>) {
  // expected-error @+1 {{'kernel.reduce' op outputs must share one element type, got 'f32' and 'bf16'}}
  kernel.reduce sum ins(%x : memref<4x3xf32>) outs(%y, %z : memref<3xf32>, memref<3xbf16>) attributes {axes = array<i64: 0>, space = array<i64: 4, 3>} {
  ^bb0(%a: f32):
    %b = arith.truncf %a : f32 to bf16
    kernel.yield %a, %b : f32, bf16
  }
  return
}

// -----

func.func @reduce_second_output_shape(%x: memref<4x3xf32>, %y: memref<3xf32>, %z: memref<4xf32>) {
  // expected-error @+1 {{'kernel.reduce' op output 'memref<4xf32>' is not the space reduced along the axes}}
  kernel.reduce sum ins(%x : memref<4x3xf32>) outs(%y, %z : memref<3xf32>, memref<4xf32>) attributes {axes = array<i64: 0>, space = array<i64: 4, 3>} {
  ^bb0(%a: f32):
    kernel.yield %a, %a : f32, f32
  }
  return
}

// -----

func.func @reduce_scratch_is_an_input(%x: memref<4x3xf32>, %y: memref<3xf32>, %s: memref<64xi8>) {
  // expected-error @+1 {{'kernel.reduce' op scratch must be a buffer of its own}}
  kernel.reduce sum ins(%x, %s : memref<4x3xf32>, memref<64xi8>) outs(%y : memref<3xf32>) scratch(%s : memref<64xi8>) attributes {axes = array<i64: 0>, space = array<i64: 4, 3>} {
  ^bb0(%a: f32, %b: i8):
    kernel.yield %a : f32
  }
  return
}

// -----

func.func @scratch_of_a_kernel_without(%a: memref<4x8xf32>, %b: memref<8x4xf32>, %c: memref<4x4xf32>, %s: memref<64xi8>) {
  // expected-error @+1 {{'kernel.call' op 'matmul' takes no scratch memory (Library.def has no ZTC_SCRATCH row for it)}}
  kernel.call "matmul" ins(%a, %b : memref<4x8xf32>, memref<8x4xf32>) outs(%c : memref<4x4xf32>) scratch(%s : memref<64xi8>) {config = {}}
  return
}

// -----

func.func @scratch_of_floats(%x: memref<65536x4xf32>, %y: memref<4xf32>, %s: memref<128xf32>) {
  // expected-error @+1 {{'kernel.call' op operand #2 must be 1-D static memref of i8}}
  kernel.call "reduce_sum" ins(%x : memref<65536x4xf32>) outs(%y : memref<4xf32>) scratch(%s : memref<128xf32>) {config = {axes = array<i64: 0>, keepdims = false}}
  return
}

// -----

func.func @config_bits_kind(%q: memref<1x2x3x4xf32>) {
  %a = kernel.alloc : memref<1x2x3x4xf32>
  // expected-error @+1 {{'attention' config 'bthd' must be an integer, got true}}
  kernel.call "attention" ins(%q, %q, %q : memref<1x2x3x4xf32>, memref<1x2x3x4xf32>, memref<1x2x3x4xf32>) outs(%a : memref<1x2x3x4xf32>) {config = {bthd = true, scale = 5.000000e-01 : f64}}
  return
}

// -----

// Windows of heads (ztc-fold-head-windows) come with a head count.
func.func @head_starts_alone(%q: memref<1x2x6x4xf32>) {
  %a = kernel.alloc : memref<1x2x2x4xf32>
  // expected-error @+1 {{'attention' takes 'heads' and 'head_starts' together}}
  kernel.call "attention" ins(%q, %q, %q : memref<1x2x6x4xf32>, memref<1x2x6x4xf32>, memref<1x2x6x4xf32>) outs(%a : memref<1x2x2x4xf32>) {config = {bthd = 15 : i64, head_starts = array<i64: 0, 2, 4, 0, 0, 0, 0, 0>, scale = 5.000000e-01 : f64}}
  return
}

// -----

func.func @head_starts_per_role(%q: memref<1x2x6x4xf32>) {
  %a = kernel.alloc : memref<1x2x2x4xf32>
  // expected-error @+1 {{'attention' needs one 'head_starts' entry per operand role (8), got 3}}
  kernel.call "attention" ins(%q, %q, %q : memref<1x2x6x4xf32>, memref<1x2x6x4xf32>, memref<1x2x6x4xf32>) outs(%a : memref<1x2x2x4xf32>) {config = {bthd = 15 : i64, heads = 2 : i64, head_starts = array<i64: 0, 2, 4>, scale = 5.000000e-01 : f64}}
  return
}

// -----

func.func @heads_positive(%q: memref<1x2x6x4xf32>) {
  %a = kernel.alloc : memref<1x2x2x4xf32>
  // expected-error @+1 {{'attention' needs 'heads' of at least 1, got 0}}
  kernel.call "attention" ins(%q, %q, %q : memref<1x2x6x4xf32>, memref<1x2x6x4xf32>, memref<1x2x6x4xf32>) outs(%a : memref<1x2x2x4xf32>) {config = {bthd = 15 : i64, heads = 0 : i64, head_starts = array<i64: 0, 2, 4, 0, 0, 0, 0, 0>, scale = 5.000000e-01 : f64}}
  return
}

// -----

// v's window, heads 5 and 6, lies past the 6 heads its buffer holds.
func.func @window_outside(%q: memref<1x2x6x4xf32>) {
  %a = kernel.alloc : memref<1x2x2x4xf32>
  // expected-error @+1 {{'attention' operand 2 has heads [0, 6), not the window [5, 7)}}
  kernel.call "attention" ins(%q, %q, %q : memref<1x2x6x4xf32>, memref<1x2x6x4xf32>, memref<1x2x6x4xf32>) outs(%a : memref<1x2x2x4xf32>) {config = {bthd = 15 : i64, heads = 2 : i64, head_starts = array<i64: 0, 2, 5, 0, 0, 0, 0, 0>, scale = 5.000000e-01 : f64}}
  return
}

// -----

func.func @window_rank(%q: memref<2x6x4xf32>) {
  %a = kernel.alloc : memref<2x6x4xf32>
  // expected-error @+1 {{'attention' reads windows of heads from rank-4 operands only; operand 0 has rank 3}}
  kernel.call "attention" ins(%q, %q, %q : memref<2x6x4xf32>, memref<2x6x4xf32>, memref<2x6x4xf32>) outs(%a : memref<2x6x4xf32>) {config = {heads = 1 : i64, head_starts = array<i64: 0, 0, 0, 0, 0, 0, 0, 0>, scale = 5.000000e-01 : f64}}
  return
}
