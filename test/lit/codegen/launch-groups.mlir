// A launch group (kernel.launch_group, from ztc-group-launches) is one
// CUDA kernel: its blocks are split among the loops, each loop taking the
// blocks it would have launched alone (8 for 2048 elements, 1 for 64),
// its pointers renamed m<k>_ and bound to their own names in its branch.
// The CPU, whose loops are calls, prints each loop as before.
//
// RUN: ztc-translate %s --ztc-kernel-to-cuda | FileCheck %s
// RUN: ztc-translate %s --ztc-kernel-to-cpu | FileCheck %s --check-prefix=CPU
//
// CHECK: __global__ void [[GROUP:ztc_step_kernel[0-9]+]](const float *m0_in0, const float *m0_in1, float *m0_out, const float *m1_in0, const float *m1_in1, float *m1_out) {
// CHECK-NEXT: int64_t block = blockIdx.x;
// CHECK-NEXT: if (block < 8) {
// CHECK-NEXT: const float *in0 = m0_in0;
// CHECK-NEXT: const float *in1 = m0_in1;
// CHECK-NEXT: float *out = m0_out;
// CHECK-NEXT: for (int64_t i = block * (int64_t)blockDim.x + threadIdx.x; i < 2048; i += (int64_t)8 * blockDim.x) {
// CHECK: out[i] = static_cast<float>(
// CHECK-NEXT: }
// CHECK-NEXT: return;
// CHECK-NEXT: }
// CHECK-NEXT: block -= 8;
// CHECK-NEXT: if (block < 1) {
// CHECK-NEXT: const float *in0 = m1_in0;
// CHECK: for (int64_t i = block * (int64_t)blockDim.x + threadIdx.x; i < 64; i += (int64_t)1 * blockDim.x) {
// CHECK: block -= 1;
// CHECK-NEXT: }
// The loop outside the group is a kernel of its own, launched after the
// group's, which is launched once, with the blocks of both.
// CHECK: __global__ void [[ALONE:ztc_step_kernel[0-9]+]](
// CHECK: extern "C" void ztc_step(
// CHECK: [[GROUP]]<<<9, 256, 0, stream>>>(b0, b2, b0, b1, b2, b1);
// CHECK-NEXT: // elementwise
// CHECK-NEXT: [[ALONE]]<<<8, 256, 0, stream>>>(
//
// CPU: ztc_elementwise{{[0-9]+}}(b0, b2, b0);
// CPU: ztc_elementwise{{[0-9]+}}(b1, b2, b1);
// CPU: ztc_elementwise{{[0-9]+}}(b0, b2, b0);

func.func @step(%p0: memref<2048xf32> {train.binding = #train.binding<param "p0">}, %p1: memref<64xf32> {train.binding = #train.binding<param "p1">}, %s: memref<f32> {train.binding = #train.binding<input "s">}) attributes {kernel.arena_bytes = 0 : i64} {
  kernel.elementwise ins(%p0, %s : memref<2048xf32>, memref<f32>) outs(%p0 : memref<2048xf32>) attributes {kernel.launch_group = 0 : i64} {
  ^bb0(%a: f32, %b: f32):
    %m = arith.mulf %a, %b : f32
    kernel.yield %m : f32
  }
  kernel.elementwise ins(%p1, %s : memref<64xf32>, memref<f32>) outs(%p1 : memref<64xf32>) attributes {kernel.launch_group = 0 : i64} {
  ^bb0(%a: f32, %b: f32):
    %m = arith.mulf %a, %b : f32
    kernel.yield %m : f32
  }
  kernel.elementwise ins(%p0, %s : memref<2048xf32>, memref<f32>) outs(%p0 : memref<2048xf32>) {
  ^bb0(%a: f32, %b: f32):
    %m = arith.addf %a, %b : f32
    kernel.yield %m : f32
  }
  return
}
