// The emitter launches a group's loops together, at the place of its last:
// with anything that runs between them, that would reorder the step.
//
// RUN: ztc-translate %s --ztc-kernel-to-cuda --verify-diagnostics

func.func @split_group(%p0: memref<64xf32> {train.binding = #train.binding<param "p0">}, %p1: memref<64xf32> {train.binding = #train.binding<param "p1">}) attributes {kernel.arena_bytes = 0 : i64} {
  kernel.elementwise ins(%p0 : memref<64xf32>) outs(%p0 : memref<64xf32>) attributes {kernel.launch_group = 0 : i64} {
  ^bb0(%a: f32):
    kernel.yield %a : f32
  }
  kernel.call "softmax" ins(%p0 : memref<64xf32>) outs(%p1 : memref<64xf32>) {config = {axis = 0 : i64}}
  // expected-error @+1 {{'kernel.elementwise' op is in launch group 0, whose loops are not consecutive (only allocations, views and constants may lie between them)}}
  kernel.elementwise ins(%p1 : memref<64xf32>) outs(%p1 : memref<64xf32>) attributes {kernel.launch_group = 0 : i64} {
  ^bb0(%a: f32):
    kernel.yield %a : f32
  }
  return
}
