// ztc-tf32 marks the f32 products (`products`) and convolutions
// (`convolutions`) the CUDA library may run on TF32 tensor cores; other
// element types and other kernels stay as they are, and without an option
// nothing changes.
//
// RUN: ztc-opt %s -ztc-tf32="products=true convolutions=true" | FileCheck %s --check-prefix=BOTH
// RUN: ztc-opt %s -ztc-tf32="convolutions=true" | FileCheck %s --check-prefix=CONV
// RUN: ztc-opt %s -ztc-tf32="products=true" | FileCheck %s --check-prefix=PRODUCTS
// RUN: ztc-opt %s -ztc-tf32 | FileCheck %s --check-prefix=NONE

// BOTH-LABEL: func.func @step
// BOTH: kernel.call "matmul" {{.+}} : memref<4x4xf32>) {config = {tf32 = true, transpose_b = true}}
// BOTH: kernel.call "matmul" {{.+}} : memref<4x4xf64>){{$}}
// BOTH: kernel.call "conv2d" {{.+}} : memref<2x5x7x6xf32>) {config = {{{.+}}, tf32 = true}}
// BOTH: kernel.call "conv2d_backward_data" {{.+}} : memref<2x8x7x6xf32>) {config = {{{.+}}, tf32 = true}}
// BOTH: kernel.call "conv2d_backward_filter" {{.+}} : memref<5x8x3x3xf32>) {config = {{{.+}}, tf32 = true}}
// BOTH: kernel.call "conv2d" {{.+}} : memref<2x5x7x6xbf16>) {config = {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>}}
// BOTH: kernel.call "softmax" {{.+}} {config = {axis = 1 : i64}}
//
// CONV-LABEL: func.func @step
// CONV: kernel.call "matmul" {{.+}} : memref<4x4xf32>) {config = {transpose_b = true}}
// CONV: kernel.call "conv2d" {{.+}} : memref<2x5x7x6xf32>) {config = {{{.+}}, tf32 = true}}
//
// PRODUCTS-LABEL: func.func @step
// PRODUCTS: kernel.call "matmul" {{.+}} : memref<4x4xf32>) {config = {tf32 = true, transpose_b = true}}
// PRODUCTS-NOT: tf32
//
// NONE-NOT: tf32
func.func @step(%a: memref<4x8xf32>, %b: memref<4x8xf32>, %ad: memref<4x8xf64>, %bd: memref<8x4xf64>,
                %x: memref<2x8x7x6xf32>, %w: memref<5x8x3x3xf32>, %gy: memref<2x5x7x6xf32>,
                %xh: memref<2x8x7x6xbf16>, %wh: memref<5x8x3x3xbf16>) {
  %c = kernel.alloc : memref<4x4xf32>
  kernel.call "matmul" ins(%a, %b : memref<4x8xf32>, memref<4x8xf32>) outs(%c : memref<4x4xf32>) {config = {transpose_b = true}}
  %cd = kernel.alloc : memref<4x4xf64>
  kernel.call "matmul" ins(%ad, %bd : memref<4x8xf64>, memref<8x4xf64>) outs(%cd : memref<4x4xf64>) {config = {}}
  %y = kernel.alloc : memref<2x5x7x6xf32>
  kernel.call "conv2d" ins(%x, %w : memref<2x8x7x6xf32>, memref<5x8x3x3xf32>) outs(%y : memref<2x5x7x6xf32>) {config = {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>}}
  %gx = kernel.alloc : memref<2x8x7x6xf32>
  kernel.call "conv2d_backward_data" ins(%gy, %w : memref<2x5x7x6xf32>, memref<5x8x3x3xf32>) outs(%gx : memref<2x8x7x6xf32>) {config = {dilations = array<i64: 1, 1>, group = 1 : i64, input_size = array<i64: 7, 6>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>}}
  %gw = kernel.alloc : memref<5x8x3x3xf32>
  kernel.call "conv2d_backward_filter" ins(%x, %gy : memref<2x8x7x6xf32>, memref<2x5x7x6xf32>) outs(%gw : memref<5x8x3x3xf32>) {config = {dilations = array<i64: 1, 1>, group = 1 : i64, kernel = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>}}
  %yh = kernel.alloc : memref<2x5x7x6xbf16>
  kernel.call "conv2d" ins(%xh, %wh : memref<2x8x7x6xbf16>, memref<5x8x3x3xbf16>) outs(%yh : memref<2x5x7x6xbf16>) {config = {dilations = array<i64: 1, 1>, group = 1 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>}}
  %s = kernel.alloc : memref<4x4xf32>
  kernel.call "softmax" ins(%c : memref<4x4xf32>) outs(%s : memref<4x4xf32>) {config = {axis = 1 : i64}}
  return
}
