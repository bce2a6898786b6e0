// RUN: ztc-opt %s -split-input-file -ztc-plan-memory | FileCheck %s
// RUN: ztc-opt %s -split-input-file -ztc-plan-memory=alignment=64 | FileCheck %s --check-prefix=A64

// A chain a -> b -> c: b and c overlap (c reads b), a dies when b is
// written, so c reuses a's bytes. Peak: two 1 KiB buffers, not three.
// CHECK-LABEL: func.func @chain
// CHECK-SAME: kernel.arena_bytes = 2048 : i64, kernel.unplanned_bytes = 3072 : i64
// CHECK: %[[A:.+]] = kernel.alloc {offset = 0 : i64} : memref<256xf32>
// CHECK: %[[B:.+]] = kernel.alloc {offset = 1024 : i64} : memref<256xf32>
// CHECK: %[[C:.+]] = kernel.alloc {offset = 0 : i64} : memref<256xf32>
// A64-LABEL: func.func @chain
// A64-SAME: kernel.arena_bytes = 2048 : i64
func.func @chain(%x: memref<256xf32>) -> memref<256xf32> {
  %a = kernel.alloc : memref<256xf32>
  kernel.elementwise ins(%x : memref<256xf32>) outs(%a : memref<256xf32>) {
  ^bb0(%p: f32):
    kernel.yield %p : f32
  }
  %b = kernel.alloc : memref<256xf32>
  kernel.elementwise ins(%a : memref<256xf32>) outs(%b : memref<256xf32>) {
  ^bb0(%p: f32):
    kernel.yield %p : f32
  }
  %c = kernel.alloc : memref<256xf32>
  kernel.elementwise ins(%b : memref<256xf32>) outs(%c : memref<256xf32>) {
  ^bb0(%p: f32):
    kernel.yield %p : f32
  }
  return %c : memref<256xf32>
}

// -----

// A view keeps its source alive: %a is read through %v by the last kernel,
// so %b cannot take its bytes. Small buffers start at aligned offsets; the
// arena ends where the last one does (512 + 16).
// CHECK-LABEL: func.func @view
// CHECK-SAME: kernel.arena_bytes = 528 : i64
// CHECK: kernel.alloc {offset = 0 : i64} : memref<4xf32>
// CHECK: kernel.alloc {offset = 256 : i64} : memref<4xf32>
// CHECK: kernel.alloc {offset = 512 : i64} : memref<1x4xf32>
// A64-LABEL: func.func @view
// A64-SAME: kernel.arena_bytes = 144 : i64
func.func @view(%x: memref<4xf32>) -> memref<1x4xf32> {
  %a = kernel.alloc : memref<4xf32>
  kernel.elementwise ins(%x : memref<4xf32>) outs(%a : memref<4xf32>) {
  ^bb0(%p: f32):
    kernel.yield %p : f32
  }
  %v = kernel.view %a : memref<4xf32> to memref<1x4xf32>
  %b = kernel.alloc : memref<4xf32>
  kernel.elementwise ins(%x : memref<4xf32>) outs(%b : memref<4xf32>) {
  ^bb0(%p: f32):
    kernel.yield %p : f32
  }
  %c = kernel.alloc : memref<1x4xf32>
  kernel.elementwise ins(%v, %b : memref<1x4xf32>, memref<4xf32>) outs(%c : memref<1x4xf32>) {
  ^bb0(%p: f32, %q: f32):
    %s = arith.addf %p, %q : f32
    kernel.yield %s : f32
  }
  return %c : memref<1x4xf32>
}
