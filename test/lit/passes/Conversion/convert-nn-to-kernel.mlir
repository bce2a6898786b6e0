// RUN: ztc-opt %s -split-input-file -ztc-convert-nn-to-kernel | FileCheck %s

// Arguments become buffers; an elementwise op becomes a one-op kernel
// writing a fresh alloc; a structured op becomes a library call carrying its
// attributes; a reshape is a view.
// CHECK-LABEL: func.func @mixed
// CHECK-SAME: (%[[X:.+]]: memref<2x3xf32>, %[[W:.+]]: memref<3x4xf32>) -> memref<8xf32>
// CHECK: %[[R:.+]] = kernel.alloc : memref<2x3xf32>
// CHECK: kernel.elementwise ins(%[[X]] : memref<2x3xf32>) outs(%[[R]] : memref<2x3xf32>)
// CHECK:   arith.maximumf
// CHECK: %[[M:.+]] = kernel.alloc : memref<2x4xf32>
// CHECK: kernel.call "matmul" ins(%[[R]], %[[W]] : memref<2x3xf32>, memref<3x4xf32>) outs(%[[M]] : memref<2x4xf32>)
// CHECK: %[[V:.+]] = kernel.view %[[M]] : memref<2x4xf32> to memref<8xf32>
// CHECK: return %[[V]] : memref<8xf32>
func.func @mixed(%x: tensor<2x3xf32>, %w: tensor<3x4xf32>) -> tensor<8xf32> {
  %0 = nn.relu %x : tensor<2x3xf32> -> tensor<2x3xf32>
  %1 = nn.matmul %0, %w : tensor<2x3xf32>, tensor<3x4xf32> -> tensor<2x4xf32>
  %2 = nn.reshape %1 : tensor<2x4xf32> -> tensor<8xf32>
  return %2 : tensor<8xf32>
}

// -----

// Random numbers are a library call on the key's buffer, the stream in the
// call's config.
// CHECK-LABEL: func.func @random
// CHECK-SAME: (%[[K:.+]]: memref<i64>) -> memref<4x8xf32>
// CHECK: %[[U:.+]] = kernel.alloc : memref<4x8xf32>
// CHECK: kernel.call "random_uniform" ins(%[[K]] : memref<i64>) outs(%[[U]] : memref<4x8xf32>) {config = {stream = -2 : i64}}
// CHECK: return %[[U]] : memref<4x8xf32>
func.func @random(%key: tensor<i64>) -> tensor<4x8xf32> {
  %0 = nn.random_uniform %key {stream = -2 : i64} : tensor<i64> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// Concat writes each input at its offset along the axis.
// CHECK-LABEL: func.func @concat
// CHECK: %[[C:.+]] = kernel.alloc : memref<2x5xf32>
// CHECK: kernel.call "copy_into" ins(%{{.+}} : memref<2x2xf32>) outs(%[[C]] : memref<2x5xf32>) {config = {axis = 1 : i64, offset = 0 : i64}}
// CHECK: kernel.call "copy_into" ins(%{{.+}} : memref<2x3xf32>) outs(%[[C]] : memref<2x5xf32>) {config = {axis = 1 : i64, offset = 2 : i64}}
func.func @concat(%a: tensor<2x2xf32>, %b: tensor<2x3xf32>) -> tensor<2x5xf32> {
  %0 = nn.concat %a, %b {axis = 1 : i64} : tensor<2x2xf32>, tensor<2x3xf32> -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}

// -----

// A returned input (or constant) is copied into the arena, so every output
// is read at an arena offset; constants become kernel.constant.
// CHECK-LABEL: func.func @passthrough
// CHECK: %[[K:.+]] = kernel.constant dense<[1, 2]> : tensor<2xi64> : memref<2xi64>
// CHECK: %[[A:.+]] = kernel.alloc : memref<2xf32>
// CHECK: kernel.elementwise ins(%{{.+}} : memref<2xf32>) outs(%[[A]] : memref<2xf32>)
// CHECK-NEXT: ^bb0(%[[S:.+]]: f32):
// CHECK-NEXT: kernel.yield %[[S]] : f32
// CHECK: %[[B:.+]] = kernel.alloc : memref<2xi64>
// CHECK: return %[[A]], %[[B]]
func.func @passthrough(%x: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xi64>) {
  %c = arith.constant dense<[1, 2]> : tensor<2xi64>
  return %x, %c : tensor<2xf32>, tensor<2xi64>
}

// -----

// Comparisons, casts and selects get their scalar forms.
// CHECK-LABEL: func.func @scalars
// CHECK: arith.cmpf olt
// CHECK: arith.sitofp
// CHECK: arith.select
func.func @scalars(%a: tensor<4xf32>, %b: tensor<4xf32>, %i: tensor<4xi64>) -> tensor<4xf32> {
  %0 = nn.less %a, %b : tensor<4xf32>, tensor<4xf32> -> tensor<4xi1>
  %1 = nn.cast %i : tensor<4xi64> -> tensor<4xf32>
  %2 = nn.where %0, %1, %a : tensor<4xi1>, tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %2 : tensor<4xf32>
}

// -----

// An update is written straight into its argument's buffer unless a kernel
// after it still reads the old value, through a view too: here the reshape
// (a view made before the update) is read after it, so the new value goes
// to an alloc and is copied in at the end. Where(apply, new, old), whose
// kernel is the last to read the old value, writes in place.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[V:.+]] = kernel.view %arg0 : memref<4xf32> to memref<2x2xf32>
// CHECK: %[[NEW:.+]] = kernel.alloc : memref<4xf32>
// CHECK-NEXT: kernel.elementwise ins(%arg0 : memref<4xf32>) outs(%[[NEW]] : memref<4xf32>)
// CHECK: kernel.call "reduce_sum" ins(%[[V]] : memref<2x2xf32>)
// CHECK: kernel.elementwise ins(%{{.+}}, %{{.+}}, %arg1 : memref<i1>, memref<4xf32>, memref<4xf32>) outs(%arg1 : memref<4xf32>)
// CHECK: kernel.elementwise ins(%[[NEW]] : memref<4xf32>) outs(%arg0 : memref<4xf32>)
// CHECK: return
func.func @train_step(%w: tensor<4xf32> {train.binding = #train.binding<param "w">},
                      %m: tensor<4xf32> {train.binding = #train.binding<state "m">},
                      %apply: tensor<i1> {train.binding = #train.binding<input "apply">})
    -> (tensor<f32>, tensor<4xf32> {train.update_of = "w"}, tensor<4xf32> {train.update_of = "m"})
    attributes {train.entry = "train_step"} {
  %v = nn.reshape %w : tensor<4xf32> -> tensor<2x2xf32>
  %new = nn.neg %w : tensor<4xf32> -> tensor<4xf32>
  %r = nn.reduce_sum %v {axes = array<i64: 0, 1>, keepdims = false} : tensor<2x2xf32> -> tensor<f32>
  %m1 = nn.exp %m : tensor<4xf32> -> tensor<4xf32>
  %m2 = nn.where %apply, %m1, %m : tensor<i1>, tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %r, %new, %m2 : tensor<f32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// One value updating two arguments (accumulators that CSE found equal): the
// kernel writes the first in place, and the second is copied from it.
// CHECK-LABEL: func.func @accumulate
// CHECK: kernel.elementwise ins(%arg0 : memref<4xf32>) outs(%arg0 : memref<4xf32>)
// CHECK: kernel.elementwise ins(%arg0 : memref<4xf32>) outs(%arg1 : memref<4xf32>)
// CHECK: return
func.func @accumulate(%a: tensor<4xf32> {train.binding = #train.binding<state "a">},
                      %b: tensor<4xf32> {train.binding = #train.binding<state "b">})
    -> (tensor<f32>, tensor<4xf32> {train.update_of = "a"}, tensor<4xf32> {train.update_of = "b"})
    attributes {train.entry = "accumulate"} {
  %new = nn.neg %a : tensor<4xf32> -> tensor<4xf32>
  %r = nn.reduce_sum %new {axes = array<i64: 0>, keepdims = false} : tensor<4xf32> -> tensor<f32>
  return %r, %new, %new : tensor<f32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// An op ztc-autodiff made (its location tagged "train.gradient") keeps its
// half-precision intermediates in float: every scalar op of its body is
// kernel.unrounded. A forward op's body rounds each result.
// CHECK-LABEL: func.func @gradient_rounding
// CHECK: kernel.elementwise
// CHECK-NOT: kernel.unrounded
// CHECK: arith.mulf
// CHECK-NOT: kernel.unrounded
// CHECK: kernel.yield
// CHECK: kernel.elementwise
// CHECK: math.exp %{{.+}} {kernel.unrounded} : bf16
// CHECK: kernel.yield
func.func @gradient_rounding(%x: tensor<4xbf16>) -> tensor<4xbf16> {
  %0 = nn.mul %x, %x : tensor<4xbf16>, tensor<4xbf16> -> tensor<4xbf16>
  %1 = nn.exp %0 : tensor<4xbf16> -> tensor<4xbf16> loc(fused<"train.gradient">["g"])
  return %1 : tensor<4xbf16>
}

// -----

// Each dist collective becomes a kernel.collective of its kind over the
// buffers, with its world size.
// CHECK-LABEL: func.func @collectives
// CHECK-SAME: (%[[G:.+]]: memref<8xf32>, %[[P:.+]]: memref<2xbf16>)
// CHECK: %[[S:.+]] = kernel.alloc : memref<8xf32>
// CHECK-NEXT: kernel.collective all_reduce ins(%[[G]] : memref<8xf32>) outs(%[[S]] : memref<8xf32>) {world_size = 4 : i64}
// CHECK: kernel.collective reduce_scatter ins(%[[S]] : memref<8xf32>) outs(%{{.+}} : memref<2xf32>) {world_size = 4 : i64}
// CHECK: kernel.collective shard ins(%[[G]] : memref<8xf32>) outs(%{{.+}} : memref<2xf32>) {world_size = 4 : i64}
// CHECK: kernel.collective all_gather ins(%[[P]] : memref<2xbf16>) outs(%{{.+}} : memref<8xbf16>) {world_size = 4 : i64}
func.func @collectives(%g: tensor<8xf32>, %p: tensor<2xbf16>)
    -> (tensor<8xf32>, tensor<2xf32>, tensor<2xf32>, tensor<8xbf16>) {
  %s = dist.all_reduce %g {world_size = 4 : i64} : tensor<8xf32> -> tensor<8xf32>
  %r = dist.reduce_scatter %s {world_size = 4 : i64} : tensor<8xf32> -> tensor<2xf32>
  %m = dist.shard %g {world_size = 4 : i64} : tensor<8xf32> -> tensor<2xf32>
  %a = dist.all_gather %p {world_size = 4 : i64, dist.use = 0 : i64} : tensor<2xbf16> -> tensor<8xbf16>
  return %s, %r, %m, %a : tensor<8xf32>, tensor<2xf32>, tensor<2xf32>, tensor<8xbf16>
}

// -----

// The fused cross entropy's backward: both gradients and the loss when
// grad_w is read; when nothing reads it (a frozen classifier), the kernel
// without w's gradient, and no buffer for it. The unit attribute
// transpose_b is the flag true.
// CHECK-LABEL: func.func @cross_entropy_gradients
// CHECK-SAME: (%[[X:.+]]: memref<8x4xbf16>, %[[W:.+]]: memref<10x4xbf16>, %[[T:.+]]: memref<8xi64>, %[[G:.+]]: memref<f32>)
// CHECK: %[[DX:.+]] = kernel.alloc : memref<8x4xbf16>
// CHECK-NEXT: %[[DW:.+]] = kernel.alloc : memref<10x4xbf16>
// CHECK-NEXT: %[[L:.+]] = kernel.alloc : memref<f32>
// CHECK-NEXT: kernel.call "linear_cross_entropy_backward" ins(%[[X]], %[[W]], %[[T]], %[[G]] : memref<8x4xbf16>, memref<10x4xbf16>, memref<8xi64>, memref<f32>) outs(%[[DX]], %[[DW]], %[[L]] : memref<8x4xbf16>, memref<10x4xbf16>, memref<f32>) {config = {ignore_index = -100 : i64, transpose_b = true}}
// CHECK: %[[DX2:.+]] = kernel.alloc : memref<8x4xbf16>
// CHECK-NEXT: %[[L2:.+]] = kernel.alloc : memref<f32>
// CHECK-NEXT: kernel.call "linear_cross_entropy_backward_x" ins(%[[X]], %[[W]], %[[T]], %[[G]] : memref<8x4xbf16>, memref<10x4xbf16>, memref<8xi64>, memref<f32>) outs(%[[DX2]], %[[L2]] : memref<8x4xbf16>, memref<f32>) {config = {ignore_index = -100 : i64, transpose_b = true}}
func.func @cross_entropy_gradients(%x: tensor<8x4xbf16>, %w: tensor<10x4xbf16>,
                                   %t: tensor<8xi64>, %g: tensor<f32>)
    -> (tensor<8x4xbf16>, tensor<10x4xbf16>, tensor<f32>, tensor<8x4xbf16>) {
  %dx, %dw, %l = nn.linear_cross_entropy_backward %x, %w, %t, %g
         {transpose_b, ignore_index = -100 : i64}
         : tensor<8x4xbf16>, tensor<10x4xbf16>, tensor<8xi64>, tensor<f32>
         -> tensor<8x4xbf16>, tensor<10x4xbf16>, tensor<f32>
  %dx2, %dw2, %l2 = nn.linear_cross_entropy_backward %x, %w, %t, %g
         {transpose_b, ignore_index = -100 : i64}
         : tensor<8x4xbf16>, tensor<10x4xbf16>, tensor<8xi64>, tensor<f32>
         -> tensor<8x4xbf16>, tensor<10x4xbf16>, tensor<f32>
  return %dx, %dw, %l, %dx2 : tensor<8x4xbf16>, tensor<10x4xbf16>, tensor<f32>, tensor<8x4xbf16>
}

// -----

// A root-mean-square normalization and its backward are the layer norm
// kernels, configured with rms (the unit attribute becomes the flag true);
// a plain layer norm's config has no rms.
// CHECK-LABEL: func.func @rms_norm
// CHECK: kernel.call "layer_norm" ins(%{{.+}}, %{{.+}} : memref<2x8xf32>, memref<8xf32>) outs(%{{.+}} : memref<2x8xf32>) {config = {axis = 1 : i64, epsilon = 9.9999999999999995E-7 : f64, rms = true}}
// CHECK: kernel.call "layer_norm_backward" ins({{.+}}) outs({{.+}}) {config = {axis = 1 : i64, epsilon = 9.9999999999999995E-7 : f64, rms = true}}
// CHECK: kernel.call "layer_norm" ins({{.+}}) outs({{.+}}) {config = {axis = 1 : i64, epsilon = 1.000000e-05 : f64}}
func.func @rms_norm(%x: tensor<2x8xf32>, %s: tensor<8xf32>)
    -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<8xf32>, tensor<2x8xf32>) {
  %0 = nn.layer_norm %x, %s {axis = 1 : i64, epsilon = 1.0e-6 : f64, rms}
         : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32>
  %1:3 = nn.layer_norm_backward %x, %s, %0 {axis = 1 : i64, epsilon = 1.0e-6 : f64, rms}
         : tensor<2x8xf32>, tensor<8xf32>, tensor<2x8xf32>
         -> tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>
  %2 = nn.layer_norm %x, %s {axis = 1 : i64, epsilon = 1.0e-5 : f64}
         : tensor<2x8xf32>, tensor<8xf32> -> tensor<2x8xf32>
  return %0, %1#0, %1#1, %2 : tensor<2x8xf32>, tensor<2x8xf32>, tensor<8xf32>, tensor<2x8xf32>
}
