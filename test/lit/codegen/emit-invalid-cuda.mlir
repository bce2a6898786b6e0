// The emitter's error that depends on the target: CUDA has no
// channels-last convolutions. The pipeline refuses --conv-layout nhwc with
// target=cuda first (pipelines/training-pipeline.test); this is the
// emitter's backstop. The CPU prints the same call.
//
// RUN: ztc-translate %s --ztc-kernel-to-cuda --verify-diagnostics
// RUN: ztc-translate %s --ztc-kernel-to-cpu | FileCheck %s
// CHECK: ztc::cpu::conv2d<float>(b0, ztc::cpu::Dims{1, 4, 4, 1}, b1, ztc::cpu::Dims{1, 1, 1, 1}, nullptr, ztc::cpu::Dims{}, v{{[0-9]+}}, ztc::cpu::Dims{1, 4, 4, 1}, ztc::Conv2dParams{ztc::Ints{c0, 2}, ztc::Ints{c1, 4}, ztc::Ints{c2, 2}, 1, true, false});

func.func @channels_last(%x: memref<1x4x4x1xf32> {train.binding = #train.binding<input "x">}, %w: memref<1x1x1x1xf32> {train.binding = #train.binding<param "w">}) attributes {kernel.arena_bytes = 64 : i64} {
  %0 = kernel.alloc {offset = 0 : i64} : memref<1x4x4x1xf32>
  // expected-error @+1 {{'kernel.call' op 'conv2d' over channels-last tensors: the CUDA kernels take NCHW (compile with --conv-layout nchw)}}
  kernel.call "conv2d" ins(%x, %w : memref<1x4x4x1xf32>, memref<1x1x1x1xf32>) outs(%0 : memref<1x4x4x1xf32>) {config = {channels_last = true, dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>}}
  return
}
