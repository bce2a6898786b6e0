// ztc-write-in-place: a kernel writes its result over an input that nothing
// reads after it (an arena buffer used only before, on the kernel's
// stream), when the two have one type; library calls only where
// Library.def has a ZTC_IN_PLACE row for the kernel.
//
// RUN: ztc-opt %s -split-input-file -ztc-write-in-place | FileCheck %s
// RUN: ztc-opt %s -split-input-file -ztc-write-in-place -ztc-plan-memory | FileCheck %s --check-prefix=PLAN

// The logits of a cross-entropy: log-softmax, their only reader, writes
// over them (through the view that flattens them), and the loop reading
// the log-probabilities last writes over them in turn. One buffer is left.
// CHECK-LABEL: func.func @logits
// CHECK: %[[L:.+]] = kernel.alloc : memref<2x4x8xf32>
// CHECK-NEXT: kernel.call "matmul"
// CHECK-NEXT: %[[V:.+]] = kernel.view %[[L]]
// CHECK-NEXT: kernel.call "log_softmax" ins(%[[V]] : memref<8x8xf32>) outs(%[[V]] : memref<8x8xf32>)
// CHECK-NEXT: kernel.elementwise ins(%[[V]] : memref<8x8xf32>) outs(%[[V]] : memref<8x8xf32>)
// CHECK-NEXT: ^bb0
// CHECK: %[[BACK:.+]] = kernel.view %[[V]] : memref<8x8xf32> to memref<2x4x8xf32>
// CHECK-NEXT: return %[[BACK]]
// PLAN-LABEL: func.func @logits
// PLAN-SAME: kernel.arena_bytes = 256 : i64
func.func @logits(%h: memref<2x4x16xf32>, %w: memref<16x8xf32>) -> memref<2x4x8xf32> {
  %l = kernel.alloc : memref<2x4x8xf32>
  kernel.call "matmul" ins(%h, %w : memref<2x4x16xf32>, memref<16x8xf32>) outs(%l : memref<2x4x8xf32>) {config = {}}
  %v = kernel.view %l : memref<2x4x8xf32> to memref<8x8xf32>
  %p = kernel.alloc : memref<8x8xf32>
  kernel.call "log_softmax" ins(%v : memref<8x8xf32>) outs(%p : memref<8x8xf32>) {config = {axis = 1 : i64}}
  %e = kernel.alloc : memref<8x8xf32>
  kernel.elementwise ins(%p : memref<8x8xf32>) outs(%e : memref<8x8xf32>) {
  ^bb0(%x: f32):
    %r = math.exp %x : f32
    kernel.yield %r : f32
  }
  %back = kernel.view %e : memref<8x8xf32> to memref<2x4x8xf32>
  return %back : memref<2x4x8xf32>
}

// -----

// Nothing moves when the input is read later, is an argument, or is a
// constant; when the types differ (a broadcast input, a cast); and for a
// call without a ZTC_IN_PLACE row (a transpose reads other rows' elements).
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-5: kernel.alloc
// CHECK-NOT: kernel.alloc
func.func @kept(%x: memref<4x8xf32>, %b: memref<8xf32>) -> (memref<4x8xf32>, memref<4x8xf32>, memref<4x8xf16>, memref<8x4xf32>) {
  %a = kernel.alloc : memref<4x8xf32>
  kernel.elementwise ins(%x, %b : memref<4x8xf32>, memref<8xf32>) outs(%a : memref<4x8xf32>) {
  ^bb0(%u: f32, %v: f32):
    %r = arith.addf %u, %v : f32
    kernel.yield %r : f32
  }
  // %a is read again below.
  %s = kernel.alloc : memref<4x8xf32>
  kernel.call "softmax" ins(%a : memref<4x8xf32>) outs(%s : memref<4x8xf32>) {config = {axis = 1 : i64}}
  // A cast: f16 out of f32.
  %c = kernel.alloc : memref<4x8xf16>
  kernel.elementwise ins(%a : memref<4x8xf32>) outs(%c : memref<4x8xf16>) {
  ^bb0(%u: f32):
    %r = arith.truncf %u : f32 to f16
    kernel.yield %r : f16
  }
  // A transpose.
  %t = kernel.alloc : memref<8x4xf32>
  kernel.call "transpose" ins(%s : memref<4x8xf32>) outs(%t : memref<8x4xf32>) {config = {perm = array<i64: 1, 0>}}
  // The input is an argument: the loop writes a buffer of its own.
  %d = kernel.alloc : memref<4x8xf32>
  kernel.elementwise ins(%x : memref<4x8xf32>) outs(%d : memref<4x8xf32>) {
  ^bb0(%u: f32):
    %r = arith.negf %u : f32
    kernel.yield %r : f32
  }
  return %d, %a, %c, %t : memref<4x8xf32>, memref<4x8xf32>, memref<4x8xf16>, memref<8x4xf32>
}

// -----

// A use on another stream, even an earlier one, keeps the input: stream 1
// may still be reading it when stream 0's kernel writes.
// CHECK-LABEL: func.func @other_stream
// CHECK: %[[A:.+]] = kernel.alloc : memref<256xf32>
// CHECK: %[[B:.+]] = kernel.alloc : memref<256xf32>
// CHECK: %[[C:.+]] = kernel.alloc : memref<256xf32>
// CHECK: kernel.elementwise ins(%[[A]] : memref<256xf32>) outs(%[[C]] : memref<256xf32>)
func.func @other_stream(%x: memref<256xf32>) -> (memref<256xf32>, memref<256xf32>) {
  %a = kernel.alloc : memref<256xf32>
  kernel.elementwise ins(%x : memref<256xf32>) outs(%a : memref<256xf32>) {
  ^bb0(%v: f32):
    %r = arith.negf %v : f32
    kernel.yield %r : f32
  }
  %b = kernel.alloc : memref<256xf32>
  kernel.elementwise ins(%a : memref<256xf32>) outs(%b : memref<256xf32>) attributes {kernel.stream = 1 : i64} {
  ^bb0(%v: f32):
    %r = arith.addf %v, %v : f32
    kernel.yield %r : f32
  }
  %e = kernel.signal {kernel.stream = 1 : i64} : !kernel.event
  %c = kernel.alloc : memref<256xf32>
  kernel.elementwise ins(%a : memref<256xf32>) outs(%c : memref<256xf32>) {
  ^bb0(%v: f32):
    %r = arith.mulf %v, %v : f32
    kernel.yield %r : f32
  }
  kernel.wait %e
  return %b, %c : memref<256xf32>, memref<256xf32>
}

// -----

// A loop with two outputs and two dying inputs writes each output over one
// of them; a loop that reads its input twice (x * x) still writes over it.
// A returned result is not written over a view (it stays a buffer).
// CHECK-LABEL: func.func @several
// CHECK: %[[A:.+]] = kernel.alloc : memref<64xf32>
// CHECK: %[[B:.+]] = kernel.alloc : memref<64xf32>
// CHECK-NEXT: kernel.elementwise
// CHECK: kernel.elementwise ins(%[[A]], %[[B]] : memref<64xf32>, memref<64xf32>) outs(%[[A]], %[[B]] : memref<64xf32>, memref<64xf32>)
// CHECK: kernel.elementwise ins(%[[A]], %[[A]] : memref<64xf32>, memref<64xf32>) outs(%[[A]] : memref<64xf32>)
// CHECK: %[[V:.+]] = kernel.view %[[B]]
// CHECK-NEXT: %[[R:.+]] = kernel.alloc : memref<8x8xf32>
// CHECK-NEXT: kernel.elementwise ins(%[[V]] : memref<8x8xf32>) outs(%[[R]] : memref<8x8xf32>)
// CHECK: return %[[A]], %[[R]]
func.func @several(%x: memref<64xf32>) -> (memref<64xf32>, memref<8x8xf32>) {
  %a = kernel.alloc : memref<64xf32>
  %b = kernel.alloc : memref<64xf32>
  kernel.elementwise ins(%x : memref<64xf32>) outs(%a, %b : memref<64xf32>, memref<64xf32>) {
  ^bb0(%v: f32):
    %r = arith.negf %v : f32
    kernel.yield %r, %v : f32, f32
  }
  %c = kernel.alloc : memref<64xf32>
  %d = kernel.alloc : memref<64xf32>
  kernel.elementwise ins(%a, %b : memref<64xf32>, memref<64xf32>) outs(%c, %d : memref<64xf32>, memref<64xf32>) {
  ^bb0(%u: f32, %v: f32):
    %s = arith.addf %u, %v : f32
    %p = arith.mulf %u, %v : f32
    kernel.yield %s, %p : f32, f32
  }
  %e = kernel.alloc : memref<64xf32>
  kernel.elementwise ins(%c, %c : memref<64xf32>, memref<64xf32>) outs(%e : memref<64xf32>) {
  ^bb0(%u: f32, %v: f32):
    %s = arith.mulf %u, %v : f32
    kernel.yield %s : f32
  }
  %w = kernel.view %d : memref<64xf32> to memref<8x8xf32>
  %r = kernel.alloc : memref<8x8xf32>
  kernel.elementwise ins(%w : memref<8x8xf32>) outs(%r : memref<8x8xf32>) {
  ^bb0(%v: f32):
    %s = math.sqrt %v : f32
    kernel.yield %s : f32
  }
  return %e, %r : memref<64xf32>, memref<8x8xf32>
}

// -----

// A scatter_add (the gather's gradient into a tied head's gradient) writes
// over its data, the head's gradient, which nothing reads after it; not
// over data that is read later.
// CHECK-LABEL: func.func @scatter
// CHECK: %[[G:.+]] = kernel.alloc : memref<10x4xf32>
// CHECK-NEXT: kernel.call "matmul"
// CHECK-NEXT: kernel.call "scatter_add" ins(%[[G]], %{{.+}}, %{{.+}} : memref<10x4xf32>, memref<3xi64>, memref<3x4xf32>) outs(%[[G]] : memref<10x4xf32>)
// CHECK-NEXT: %[[K:.+]] = kernel.alloc : memref<10x4xf32>
// CHECK-NEXT: kernel.call "scatter_add" ins(%[[G]], %{{.+}}, %{{.+}} : memref<10x4xf32>, memref<3xi64>, memref<3x4xf32>) outs(%[[K]] : memref<10x4xf32>)
func.func @scatter(%a: memref<10x2xf32>, %b: memref<2x4xf32>, %ids: memref<3xi64>, %u: memref<3x4xf32>) -> (memref<10x4xf32>, memref<10x4xf32>) {
  %g = kernel.alloc : memref<10x4xf32>
  kernel.call "matmul" ins(%a, %b : memref<10x2xf32>, memref<2x4xf32>) outs(%g : memref<10x4xf32>) {config = {}}
  %s = kernel.alloc : memref<10x4xf32>
  kernel.call "scatter_add" ins(%g, %ids, %u : memref<10x4xf32>, memref<3xi64>, memref<3x4xf32>) outs(%s : memref<10x4xf32>) {config = {axis = 0 : i64}}
  %k = kernel.alloc : memref<10x4xf32>
  kernel.call "scatter_add" ins(%s, %ids, %u : memref<10x4xf32>, memref<3xi64>, memref<3x4xf32>) outs(%k : memref<10x4xf32>) {config = {axis = 0 : i64}}
  return %k, %s : memref<10x4xf32>, memref<10x4xf32>
}

// -----

// Of two inputs that die at a loop, the loop writes over the one whose
// buffer was last used furthest back: %g is read by the loop just before
// it as well, %u only by the loop that wrote it, so the second loop writes
// over %u and still depends on the first only through what it reads
// (ztc-group-launches may launch the two together).
// CHECK-LABEL: func.func @oldest_first
// CHECK: %[[U:.+]] = kernel.alloc : memref<4x8xf32>
// CHECK: %[[G:.+]] = kernel.alloc : memref<4x8xf32>
// CHECK: kernel.elementwise ins(%[[G]], %{{.+}} : memref<4x8xf32>, memref<4x8xf32>) outs(%{{.+}} : memref<4x8xf32>)
// CHECK: kernel.elementwise ins(%[[G]], %[[U]] : memref<4x8xf32>, memref<4x8xf32>) outs(%[[U]] : memref<4x8xf32>)
func.func @oldest_first(%x: memref<4x8xf32>, %y: memref<4x8xf32>) -> (memref<4x8xf32>, memref<4x8xf32>) {
  %u = kernel.alloc : memref<4x8xf32>
  kernel.elementwise ins(%x : memref<4x8xf32>) outs(%u : memref<4x8xf32>) {
  ^bb0(%a: f32):
    %r = math.exp %a : f32
    kernel.yield %r : f32
  }
  %g = kernel.alloc : memref<4x8xf32>
  kernel.elementwise ins(%y : memref<4x8xf32>) outs(%g : memref<4x8xf32>) {
  ^bb0(%a: f32):
    %r = math.exp %a : f32
    kernel.yield %r : f32
  }
  %d = kernel.alloc : memref<4x8xf32>
  kernel.elementwise ins(%g, %x : memref<4x8xf32>, memref<4x8xf32>) outs(%d : memref<4x8xf32>) {
  ^bb0(%a: f32, %b: f32):
    %r = arith.mulf %a, %b : f32
    kernel.yield %r : f32
  }
  %e = kernel.alloc : memref<4x8xf32>
  kernel.elementwise ins(%g, %u : memref<4x8xf32>, memref<4x8xf32>) outs(%e : memref<4x8xf32>) {
  ^bb0(%a: f32, %b: f32):
    %r = arith.mulf %a, %b : f32
    kernel.yield %r : f32
  }
  return %d, %e : memref<4x8xf32>, memref<4x8xf32>
}
