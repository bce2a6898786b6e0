// A channels-last convolution (ztc-channels-last's NHWC activations, OIHW
// weights) prints the same call on both targets: the CPU's on oneDNN, the
// CUDA one on cuDNN (runtime/kernels/cuda/Conv.cuh). So does a
// channels-last pooling (both libraries' Pool kernels take NHWC).
//
// RUN: ztc-translate %s --ztc-kernel-to-cpu | FileCheck %s --check-prefix=CPU
// RUN: ztc-translate %s --ztc-kernel-to-cuda | FileCheck %s --check-prefix=CUDA
// CPU: ztc::cpu::conv2d<float>(b0, ztc::cpu::Dims{1, 4, 4, 1}, b1, ztc::cpu::Dims{1, 1, 1, 1}, nullptr, ztc::cpu::Dims{}, v{{[0-9]+}}, ztc::cpu::Dims{1, 4, 4, 1}, ztc::Conv2dParams{ztc::Ints{c0, 2}, ztc::Ints{c1, 4}, ztc::Ints{c2, 2}, 1, true, false});
// CUDA: ztc::cuda::conv2d<float>(b0, ztc::cuda::Dims{1, 4, 4, 1}, b1, ztc::cuda::Dims{1, 1, 1, 1}, nullptr, ztc::cuda::Dims{}, v{{[0-9]+}}, ztc::cuda::Dims{1, 4, 4, 1}, ztc::Conv2dParams{ztc::Ints{c0, 2}, ztc::Ints{c1, 4}, ztc::Ints{c2, 2}, 1, true, false}
// CPU: ztc::cpu::maxPool2d<float>(v{{[0-9]+}}, ztc::cpu::Dims{1, 4, 4, 1}, v{{[0-9]+}}, ztc::cpu::Dims{1, 2, 2, 1}, ztc::MaxPool2dParams{{{.*}}, false, true});
// CUDA: ztc::cuda::maxPool2d<float>(v{{[0-9]+}}, ztc::cuda::Dims{1, 4, 4, 1}, v{{[0-9]+}}, ztc::cuda::Dims{1, 2, 2, 1}, ztc::MaxPool2dParams{{{.*}}, false, true}, stream);

func.func @channels_last(%x: memref<1x4x4x1xf32> {train.binding = #train.binding<input "x">}, %w: memref<1x1x1x1xf32> {train.binding = #train.binding<param "w">}) attributes {kernel.arena_bytes = 128 : i64} {
  %0 = kernel.alloc {offset = 0 : i64} : memref<1x4x4x1xf32>
  kernel.call "conv2d" ins(%x, %w : memref<1x4x4x1xf32>, memref<1x1x1x1xf32>) outs(%0 : memref<1x4x4x1xf32>) {config = {channels_last = true, dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>}}
  %1 = kernel.alloc {offset = 64 : i64} : memref<1x2x2x1xf32>
  kernel.call "max_pool2d" ins(%0 : memref<1x4x4x1xf32>) outs(%1 : memref<1x2x2x1xf32>) {config = {ceil_mode = false, channels_last = true, dilations = array<i64: 1, 1>, kernel = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>}}
  return
}
