// ztc-plan-scratch gives the calls whose CUDA kernel works in scratch
// (Library.def's ZTC_SCRATCH rows) a buffer of the bytes
// runtime/kernels/cuda/Scratch.h computes, right before the call, and
// records the library's reserved bytes on the entry.
//
// RUN: ztc-opt %s -split-input-file -ztc-plan-scratch=reserved-bytes=33554432 | FileCheck %s
// RUN: ztc-opt %s -split-input-file -ztc-plan-scratch -ztc-plan-memory | FileCheck %s --check-prefix=PLAN

// A long reduction: 65536 elements into each of 4 outputs, 16 segments
// each (at least 4096 elements a segment), so 4 * 16 partial sums; sums
// accumulate in f64, the maximum in f32.
// CHECK-LABEL: func.func @reductions
// CHECK-SAME: kernel.input_sets = 1 : i64, kernel.reserved_bytes = 33554432 : i64
// CHECK: %[[SUM:.+]] = kernel.alloc : memref<512xi8>
// CHECK-NEXT: kernel.call "reduce_sum" ins(%{{.+}}) outs(%{{.+}}) scratch(%[[SUM]] : memref<512xi8>)
// CHECK: %[[MAX:.+]] = kernel.alloc : memref<256xi8>
// CHECK-NEXT: kernel.call "reduce_max" ins(%{{.+}}) outs(%{{.+}}) scratch(%[[MAX]] : memref<256xi8>)
// A short one (each output's 4 elements fit a thread) has none.
// CHECK: kernel.call "reduce_sum" ins(%{{.+}} : memref<65536x4xf32>) outs(%{{.+}} : memref<65536xf32>) {config
// A bias gradient of GPT-2-small at batch 8 sums 8192 rows into 768
// outputs down the columns: 128 segments of 64 rows (about 131072
// threads), 768 * 128 partial sums in f64.
// CHECK: %[[BIAS:.+]] = kernel.alloc : memref<786432xi8>
// CHECK-NEXT: kernel.call "reduce_sum" ins(%{{.+}} : memref<8192x768xf32>) outs(%{{.+}}) scratch(%[[BIAS]] : memref<786432xi8>)
// The scratch is a buffer of the plan, live for its call alone: the two
// share bytes.
// PLAN: kernel.alloc {offset = [[OFF:[0-9]+]] : i64} : memref<512xi8>
// PLAN: kernel.alloc {offset = [[OFF]] : i64} : memref<256xi8>
func.func @reductions(%x: memref<65536x4xf32>, %g: memref<8192x768xf32>) -> (memref<4xf32>, memref<4xf32>, memref<65536xf32>, memref<768xf32>) {
  %s = kernel.alloc : memref<4xf32>
  kernel.call "reduce_sum" ins(%x : memref<65536x4xf32>) outs(%s : memref<4xf32>) {config = {axes = array<i64: 0>, keepdims = false}}
  %m = kernel.alloc : memref<4xf32>
  kernel.call "reduce_max" ins(%x : memref<65536x4xf32>) outs(%m : memref<4xf32>) {config = {axes = array<i64: 0>, keepdims = false}}
  %r = kernel.alloc : memref<65536xf32>
  kernel.call "reduce_sum" ins(%x : memref<65536x4xf32>) outs(%r : memref<65536xf32>) {config = {axes = array<i64: 1>, keepdims = false}}
  %b = kernel.alloc : memref<768xf32>
  kernel.call "reduce_sum" ins(%g : memref<8192x768xf32>) outs(%b : memref<768xf32>) {config = {axes = array<i64: 0>, keepdims = false}}
  return %s, %m, %r, %b : memref<4xf32>, memref<4xf32>, memref<65536xf32>, memref<768xf32>
}

// -----

// conv2d's columns: 8 channels x 3 x 3 taps x 7 x 6 pixels of f32 per
// image, both images at once (under the 256 MiB budget), which is also
// cuDNN's workspace. A 1x1 window over 40 channels multiplies the input as
// is, and a 2-channel 3x3 patch (18 taps) is summed directly: ztc's own
// kernels need no scratch there, and cuDNN gets the batch's columns' worth
// (2 x 40 x 42 and 2 x 2 x 9 x 42 f32). An integer convolution never goes
// to cuDNN and sums directly, and a matmul's kernel takes no scratch.
// CHECK-LABEL: func.func @convolutions
// CHECK: %[[COLS:.+]] = kernel.alloc : memref<24192xi8>
// CHECK-NEXT: kernel.call "conv2d" {{.+}} scratch(%[[COLS]] : memref<24192xi8>)
// CHECK: %[[ONE:.+]] = kernel.alloc : memref<13440xi8>
// CHECK-NEXT: kernel.call "conv2d" {{.+}} scratch(%[[ONE]] : memref<13440xi8>)
// CHECK: %[[SHORT:.+]] = kernel.alloc : memref<6048xi8>
// CHECK-NEXT: kernel.call "conv2d" {{.+}} scratch(%[[SHORT]] : memref<6048xi8>)
// CHECK: kernel.call "conv2d" ins(%{{.+}} : memref<2x8x7x6xi32>, memref<5x8x3x3xi32>) outs(%{{.+}} : memref<2x5x7x6xi32>) {config = {{.+}}}{{$}}
// CHECK: kernel.call "matmul" ins(%{{.+}}) outs(%{{.+}} : memref<4x4xf32>){{$}}
func.func @convolutions(%x: memref<2x8x7x6xf32>, %w: memref<5x8x3x3xf32>, %x40: memref<2x40x7x6xf32>, %w1: memref<5x40x1x1xf32>, %x2: memref<2x2x7x6xf32>, %w2: memref<5x2x3x3xf32>, %xi: memref<2x8x7x6xi32>, %wi: memref<5x8x3x3xi32>, %a: memref<4x8xf32>, %b: memref<8x4xf32>) -> (memref<2x5x7x6xf32>, memref<2x5x7x6xf32>, memref<2x5x7x6xf32>, memref<2x5x7x6xi32>, memref<4x4xf32>) {
  %y = kernel.alloc : memref<2x5x7x6xf32>
  kernel.call "conv2d" ins(%x, %w : memref<2x8x7x6xf32>, memref<5x8x3x3xf32>) outs(%y : memref<2x5x7x6xf32>) {config = {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>}}
  %y1 = kernel.alloc : memref<2x5x7x6xf32>
  kernel.call "conv2d" ins(%x40, %w1 : memref<2x40x7x6xf32>, memref<5x40x1x1xf32>) outs(%y1 : memref<2x5x7x6xf32>) {config = {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>}}
  %y2 = kernel.alloc : memref<2x5x7x6xf32>
  kernel.call "conv2d" ins(%x2, %w2 : memref<2x2x7x6xf32>, memref<5x2x3x3xf32>) outs(%y2 : memref<2x5x7x6xf32>) {config = {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>}}
  %yi = kernel.alloc : memref<2x5x7x6xi32>
  kernel.call "conv2d" ins(%xi, %wi : memref<2x8x7x6xi32>, memref<5x8x3x3xi32>) outs(%yi : memref<2x5x7x6xi32>) {config = {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>}}
  %c = kernel.alloc : memref<4x4xf32>
  kernel.call "matmul" ins(%a, %b : memref<4x8xf32>, memref<8x4xf32>) outs(%c : memref<4x4xf32>) {config = {}}
  return %y, %y1, %y2, %yi, %c : memref<2x5x7x6xf32>, memref<2x5x7x6xf32>, memref<2x5x7x6xf32>, memref<2x5x7x6xi32>, memref<4x4xf32>
}

// -----

// The gradients: the data gradient's columns in f32; in f16 ztc's kernel
// sums directly, and cuDNN gets the columns' worth in f16 (2 x 8 x 9 x 42 x
// 2 bytes). The filter gradient's columns (8 * 9 rows x 2 * 42 pixels),
// then, 256-byte aligned, the output gradient's images side by side
// (5 x 2 * 42 f32): 24320 + 1680 bytes, more than cuDNN's 24192.
// CHECK-LABEL: func.func @gradients
// CHECK: %[[DATA:.+]] = kernel.alloc : memref<24192xi8>
// CHECK-NEXT: kernel.call "conv2d_backward_data" {{.+}} scratch(%[[DATA]] : memref<24192xi8>)
// CHECK: %[[HALF:.+]] = kernel.alloc : memref<12096xi8>
// CHECK-NEXT: kernel.call "conv2d_backward_data" {{.+}} scratch(%[[HALF]] : memref<12096xi8>)
// CHECK: %[[FILTER:.+]] = kernel.alloc : memref<26000xi8>
// CHECK-NEXT: kernel.call "conv2d_backward_filter" {{.+}} scratch(%[[FILTER]] : memref<26000xi8>)
func.func @gradients(%gy: memref<2x5x7x6xf32>, %w: memref<5x8x3x3xf32>, %gyh: memref<2x5x7x6xf16>, %wh: memref<5x8x3x3xf16>, %x: memref<2x8x7x6xf32>) -> (memref<2x8x7x6xf32>, memref<2x8x7x6xf16>, memref<5x8x3x3xf32>) {
  %gx = kernel.alloc : memref<2x8x7x6xf32>
  kernel.call "conv2d_backward_data" ins(%gy, %w : memref<2x5x7x6xf32>, memref<5x8x3x3xf32>) outs(%gx : memref<2x8x7x6xf32>) {config = {dilations = array<i64: 1, 1>, group = 1 : i64, input_size = array<i64: 7, 6>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>}}
  %gxh = kernel.alloc : memref<2x8x7x6xf16>
  kernel.call "conv2d_backward_data" ins(%gyh, %wh : memref<2x5x7x6xf16>, memref<5x8x3x3xf16>) outs(%gxh : memref<2x8x7x6xf16>) {config = {dilations = array<i64: 1, 1>, group = 1 : i64, input_size = array<i64: 7, 6>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>}}
  %gw = kernel.alloc : memref<5x8x3x3xf32>
  kernel.call "conv2d_backward_filter" ins(%x, %gy : memref<2x8x7x6xf32>, memref<2x5x7x6xf32>) outs(%gw : memref<5x8x3x3xf32>) {config = {dilations = array<i64: 1, 1>, group = 1 : i64, kernel = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>}}
  return %gx, %gxh, %gw : memref<2x8x7x6xf32>, memref<2x8x7x6xf16>, memref<5x8x3x3xf32>
}

// -----

// An NF4 product dequantizes a tile of K x tileColumns(K, N) of the weight
// at a time: K = 8 rows, all 2 columns (under 2^18 elements), in bf16.
// CHECK-LABEL: func.func @nf4
// CHECK: %[[TILE:.+]] = kernel.alloc : memref<32xi8>
// CHECK-NEXT: kernel.call "matmul_nf4" {{.+}} scratch(%[[TILE]] : memref<32xi8>)
func.func @nf4(%x: memref<2x8xbf16>, %codes: memref<8xi8>, %absmax: memref<1xi8>, %nested: memref<1xf32>, %offset: memref<f32>) -> memref<2x2xbf16> {
  %y = kernel.alloc : memref<2x2xbf16>
  kernel.call "matmul_nf4" ins(%x, %codes, %absmax, %nested, %offset : memref<2x8xbf16>, memref<8xi8>, memref<1xi8>, memref<1xf32>, memref<f32>) outs(%y : memref<2x2xbf16>) {config = {transpose_b = false, weight_shape = array<i64: 8, 2>}}
  return %y : memref<2x2xbf16>
}

// -----

// A fused reduction gets the partial sums of the blocks its outputs split
// over (groupReducePlan), f32 accumulators, one per output element, block
// and output: BatchNorm's backward sums at batch 256 (256 x 64 x 16 x 16,
// 65536 terms a channel) take 16 blocks a channel (at least 4096 terms
// each), 2 x 64 x 16 x 4 bytes; NHWC statistics (65536 rows of 64
// channels) 1024 segments of 64 rows a channel, 64 x 1024 x 4 bytes. A
// short one (each output's 200 terms fit a thread) has none.
// CHECK-LABEL: func.func @fused_reductions
// CHECK: %[[SUMS:.+]] = kernel.alloc : memref<8192xi8>
// CHECK-NEXT: kernel.reduce sum ins({{.+}}) outs({{.+}}) scratch(%[[SUMS]] : memref<8192xi8>)
// CHECK: %[[NHWC:.+]] = kernel.alloc : memref<262144xi8>
// CHECK-NEXT: kernel.reduce mean ins({{.+}}) outs({{.+}}) scratch(%[[NHWC]] : memref<262144xi8>)
// CHECK-NOT: scratch
func.func @fused_reductions(%g: memref<256x64x16x16xf32>, %x: memref<256x64x16x16xf32>, %m: memref<1x64x1x1xf32>, %h: memref<256x16x16x64xf32>, %s: memref<200x40xf32>) -> (memref<64xf32>, memref<64xf32>, memref<64xf32>, memref<40xf32>) {
  %a = kernel.alloc : memref<64xf32>
  %b = kernel.alloc : memref<64xf32>
  kernel.reduce sum ins(%g, %x, %m : memref<256x64x16x16xf32>, memref<256x64x16x16xf32>, memref<1x64x1x1xf32>) outs(%a, %b : memref<64xf32>, memref<64xf32>) attributes {axes = array<i64: 0, 2, 3>, space = array<i64: 256, 64, 16, 16>} {
  ^bb0(%p: f32, %q: f32, %r: f32):
    %d = arith.subf %q, %r : f32
    %e = arith.mulf %p, %d : f32
    kernel.yield %p, %e : f32, f32
  }
  %c = kernel.alloc : memref<64xf32>
  kernel.reduce mean ins(%h : memref<256x16x16x64xf32>) outs(%c : memref<64xf32>) attributes {axes = array<i64: 0, 1, 2>, space = array<i64: 256, 16, 16, 64>} {
  ^bb0(%p: f32):
    kernel.yield %p : f32
  }
  %t = kernel.alloc : memref<40xf32>
  kernel.reduce sum ins(%s : memref<200x40xf32>) outs(%t : memref<40xf32>) attributes {axes = array<i64: 0>, space = array<i64: 200, 40>} {
  ^bb0(%p: f32):
    kernel.yield %p : f32
  }
  return %a, %b, %c, %t : memref<64xf32>, memref<64xf32>, memref<64xf32>, memref<40xf32>
}
