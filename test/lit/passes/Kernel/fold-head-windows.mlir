// RUN: ztc-opt %s -split-input-file -ztc-fold-head-windows | FileCheck %s

// GPT-2's attention: one projection [2, 8, 96] cut into q, k and v of two
// heads of 16, read as [B, T, H, D] (bthd). Each call reads its window of
// the projection seen as [2, 8, 6, 16]; the slices and their buffers go.
// The backward writes dq, dk and dv into their concat's windows; the
// copies and the gradients' own buffers go, and the concat is allocated
// before the call.
// CHECK-LABEL: func.func @fused_projection
// CHECK-SAME: (%[[QKV:.+]]: memref<2x8x96xf32>, %[[G:.+]]: memref<2x8x2x16xf32>)
// CHECK-NOT: "slice"
// CHECK: %[[QW:.+]] = kernel.view %[[QKV]] : memref<2x8x96xf32> to memref<2x8x6x16xf32>
// CHECK: %[[KW:.+]] = kernel.view %[[QKV]] : memref<2x8x96xf32> to memref<2x8x6x16xf32>
// CHECK: %[[VW:.+]] = kernel.view %[[QKV]] : memref<2x8x96xf32> to memref<2x8x6x16xf32>
// CHECK: kernel.call "attention" ins(%[[QW]], %[[KW]], %[[VW]] : memref<2x8x6x16xf32>, memref<2x8x6x16xf32>, memref<2x8x6x16xf32>) outs(%[[O:.+]] : memref<2x8x2x16xf32>) {config = {bthd = 15 : i64, causal = true, head_starts = array<i64: 0, 2, 4, 0, 0, 0, 0, 0>, heads = 2 : i64, scale = 2.500000e-01 : f64}}
// CHECK: %[[D:.+]] = kernel.alloc : memref<2x8x96xf32>
// CHECK: %[[DQ:.+]] = kernel.view %[[D]] : memref<2x8x96xf32> to memref<2x8x6x16xf32>
// CHECK: %[[DK:.+]] = kernel.view %[[D]] : memref<2x8x96xf32> to memref<2x8x6x16xf32>
// CHECK: %[[DV:.+]] = kernel.view %[[D]] : memref<2x8x96xf32> to memref<2x8x6x16xf32>
// CHECK: kernel.call "attention_backward" ins(%{{.+}}, %{{.+}}, %{{.+}}, %[[O]], %[[G]] : memref<2x8x6x16xf32>, memref<2x8x6x16xf32>, memref<2x8x6x16xf32>, memref<2x8x2x16xf32>, memref<2x8x2x16xf32>) outs(%[[DQ]], %[[DK]], %[[DV]] : memref<2x8x6x16xf32>, memref<2x8x6x16xf32>, memref<2x8x6x16xf32>) {config = {bthd = 255 : i64, causal = true, head_starts = array<i64: 0, 2, 4, 0, 0, 0, 2, 4>, heads = 2 : i64, scale = 2.500000e-01 : f64}}
// CHECK-NOT: "copy_into"
// CHECK-NOT: kernel.alloc
// CHECK: return %[[O]], %[[D]]
func.func @fused_projection(%qkv: memref<2x8x96xf32>, %g: memref<2x8x2x16xf32>) -> (memref<2x8x2x16xf32>, memref<2x8x96xf32>) {
  %q = kernel.alloc : memref<2x8x32xf32>
  kernel.call "slice" ins(%qkv : memref<2x8x96xf32>) outs(%q : memref<2x8x32xf32>) {config = {sizes = array<i64: 2, 8, 32>, starts = array<i64: 0, 0, 0>, steps = array<i64: 1, 1, 1>}}
  %k = kernel.alloc : memref<2x8x32xf32>
  kernel.call "slice" ins(%qkv : memref<2x8x96xf32>) outs(%k : memref<2x8x32xf32>) {config = {sizes = array<i64: 2, 8, 32>, starts = array<i64: 0, 0, 32>, steps = array<i64: 1, 1, 1>}}
  %v = kernel.alloc : memref<2x8x32xf32>
  kernel.call "slice" ins(%qkv : memref<2x8x96xf32>) outs(%v : memref<2x8x32xf32>) {config = {sizes = array<i64: 2, 8, 32>, starts = array<i64: 0, 0, 64>, steps = array<i64: 1, 1, 1>}}
  %qh = kernel.view %q : memref<2x8x32xf32> to memref<2x8x2x16xf32>
  %kh = kernel.view %k : memref<2x8x32xf32> to memref<2x8x2x16xf32>
  %vh = kernel.view %v : memref<2x8x32xf32> to memref<2x8x2x16xf32>
  %o = kernel.alloc : memref<2x8x2x16xf32>
  kernel.call "attention" ins(%qh, %kh, %vh : memref<2x8x2x16xf32>, memref<2x8x2x16xf32>, memref<2x8x2x16xf32>) outs(%o : memref<2x8x2x16xf32>) {config = {bthd = 15 : i64, causal = true, scale = 2.500000e-01 : f64}}
  %dq = kernel.alloc : memref<2x8x2x16xf32>
  %dk = kernel.alloc : memref<2x8x2x16xf32>
  %dv = kernel.alloc : memref<2x8x2x16xf32>
  kernel.call "attention_backward" ins(%qh, %kh, %vh, %o, %g : memref<2x8x2x16xf32>, memref<2x8x2x16xf32>, memref<2x8x2x16xf32>, memref<2x8x2x16xf32>, memref<2x8x2x16xf32>) outs(%dq, %dk, %dv : memref<2x8x2x16xf32>, memref<2x8x2x16xf32>, memref<2x8x2x16xf32>) {config = {bthd = 255 : i64, causal = true, scale = 2.500000e-01 : f64}}
  %dq3 = kernel.view %dq : memref<2x8x2x16xf32> to memref<2x8x32xf32>
  %dk3 = kernel.view %dk : memref<2x8x2x16xf32> to memref<2x8x32xf32>
  %dv3 = kernel.view %dv : memref<2x8x2x16xf32> to memref<2x8x32xf32>
  %d = kernel.alloc : memref<2x8x96xf32>
  kernel.call "copy_into" ins(%dq3 : memref<2x8x32xf32>) outs(%d : memref<2x8x96xf32>) {config = {axis = 2 : i64, offset = 0 : i64}}
  kernel.call "copy_into" ins(%dk3 : memref<2x8x32xf32>) outs(%d : memref<2x8x96xf32>) {config = {axis = 2 : i64, offset = 32 : i64}}
  kernel.call "copy_into" ins(%dv3 : memref<2x8x32xf32>) outs(%d : memref<2x8x96xf32>) {config = {axis = 2 : i64, offset = 64 : i64}}
  return %o, %d : memref<2x8x2x16xf32>, memref<2x8x96xf32>
}

// -----

// Slices that stay: one stored [B, H, T, D] (its role's bthd bit clear),
// one not on whole heads (columns 8 to 40 of heads of 16), one another
// kernel reads too, and one of a projection written in place before the
// call reads it.
// CHECK-LABEL: func.func @slices_kept
// CHECK-COUNT-4: kernel.call "slice"
// CHECK-NOT: head_starts
func.func @slices_kept(%qkv: memref<2x8x96xf32>, %w: memref<2x8x96xf32>, %h: memref<2x2x8x16xf32>) -> (memref<2x8x2x16xf32>, memref<2x8x32xf32>) {
  %q = kernel.alloc : memref<2x8x32xf32>
  kernel.call "slice" ins(%qkv : memref<2x8x96xf32>) outs(%q : memref<2x8x32xf32>) {config = {sizes = array<i64: 2, 8, 32>, starts = array<i64: 0, 0, 0>, steps = array<i64: 1, 1, 1>}}
  %qh = kernel.view %q : memref<2x8x32xf32> to memref<2x2x8x16xf32>
  %k = kernel.alloc : memref<2x8x32xf32>
  kernel.call "slice" ins(%qkv : memref<2x8x96xf32>) outs(%k : memref<2x8x32xf32>) {config = {sizes = array<i64: 2, 8, 32>, starts = array<i64: 0, 0, 8>, steps = array<i64: 1, 1, 1>}}
  %kh = kernel.view %k : memref<2x8x32xf32> to memref<2x8x2x16xf32>
  %v = kernel.alloc : memref<2x8x32xf32>
  kernel.call "slice" ins(%qkv : memref<2x8x96xf32>) outs(%v : memref<2x8x32xf32>) {config = {sizes = array<i64: 2, 8, 32>, starts = array<i64: 0, 0, 64>, steps = array<i64: 1, 1, 1>}}
  %vh = kernel.view %v : memref<2x8x32xf32> to memref<2x8x2x16xf32>
  %copy = kernel.alloc : memref<2x8x32xf32>
  kernel.elementwise ins(%v : memref<2x8x32xf32>) outs(%copy : memref<2x8x32xf32>) {
  ^bb0(%x: f32):
    kernel.yield %x : f32
  }
  %o = kernel.alloc : memref<2x8x2x16xf32>
  kernel.call "attention" ins(%qh, %kh, %vh : memref<2x2x8x16xf32>, memref<2x8x2x16xf32>, memref<2x8x2x16xf32>) outs(%o : memref<2x8x2x16xf32>) {config = {bthd = 14 : i64, scale = 2.500000e-01 : f64}}
  %q2 = kernel.alloc : memref<2x8x32xf32>
  kernel.call "slice" ins(%w : memref<2x8x96xf32>) outs(%q2 : memref<2x8x32xf32>) {config = {sizes = array<i64: 2, 8, 32>, starts = array<i64: 0, 0, 0>, steps = array<i64: 1, 1, 1>}}
  %q2h = kernel.view %q2 : memref<2x8x32xf32> to memref<2x8x2x16xf32>
  kernel.elementwise ins(%qkv : memref<2x8x96xf32>) outs(%w : memref<2x8x96xf32>) {
  ^bb0(%x: f32):
    kernel.yield %x : f32
  }
  %o2 = kernel.alloc : memref<2x8x2x16xf32>
  kernel.call "attention" ins(%q2h, %q2h, %q2h : memref<2x8x2x16xf32>, memref<2x8x2x16xf32>, memref<2x8x2x16xf32>) outs(%o2 : memref<2x8x2x16xf32>) {config = {bthd = 15 : i64, scale = 2.500000e-01 : f64}}
  return %o2, %copy : memref<2x8x2x16xf32>, memref<2x8x32xf32>
}

// -----

// Copies that stay: the gradient is read by another kernel too, and the
// concat is read before the copy (so the call may not write it earlier).
// CHECK-LABEL: func.func @copies_kept
// CHECK-COUNT-2: kernel.call "copy_into"
// CHECK-NOT: head_starts
func.func @copies_kept(%q: memref<2x8x2x16xf32>, %g: memref<2x8x2x16xf32>) -> (memref<2x8x64xf32>, memref<2x8x2x16xf32>, memref<2x8x64xf32>, memref<2x8x64xf32>) {
  %dq = kernel.alloc : memref<2x8x2x16xf32>
  %dk = kernel.alloc : memref<2x8x2x16xf32>
  %dv = kernel.alloc : memref<2x8x2x16xf32>
  kernel.call "attention_backward" ins(%q, %q, %q, %g, %g : memref<2x8x2x16xf32>, memref<2x8x2x16xf32>, memref<2x8x2x16xf32>, memref<2x8x2x16xf32>, memref<2x8x2x16xf32>) outs(%dq, %dk, %dv : memref<2x8x2x16xf32>, memref<2x8x2x16xf32>, memref<2x8x2x16xf32>) {config = {bthd = 255 : i64, scale = 2.500000e-01 : f64}}
  %dq3 = kernel.view %dq : memref<2x8x2x16xf32> to memref<2x8x32xf32>
  %d = kernel.alloc : memref<2x8x64xf32>
  kernel.call "copy_into" ins(%dq3 : memref<2x8x32xf32>) outs(%d : memref<2x8x64xf32>) {config = {axis = 2 : i64, offset = 0 : i64}}
  %e = kernel.alloc : memref<2x8x64xf32>
  %early = kernel.alloc : memref<2x8x64xf32>
  kernel.elementwise ins(%e : memref<2x8x64xf32>) outs(%early : memref<2x8x64xf32>) {
  ^bb0(%x: f32):
    kernel.yield %x : f32
  }
  %dk3 = kernel.view %dk : memref<2x8x2x16xf32> to memref<2x8x32xf32>
  kernel.call "copy_into" ins(%dk3 : memref<2x8x32xf32>) outs(%e : memref<2x8x64xf32>) {config = {axis = 2 : i64, offset = 32 : i64}}
  return %d, %dq, %e, %early : memref<2x8x64xf32>, memref<2x8x2x16xf32>, memref<2x8x64xf32>, memref<2x8x64xf32>
}

// -----

// Grouped-query attention takes no windows: q of 4 heads and k, v of 2 cut
// from one projection [2, 8, 64] (Phi-3's qkv_proj with fewer key/value
// heads). The windows share one logical head count, which q and k do not.
// CHECK-LABEL: func.func @grouped_query_kept
// CHECK-COUNT-3: kernel.call "slice"
// CHECK-NOT: head_starts
func.func @grouped_query_kept(%qkv: memref<2x8x128xf32>) -> memref<2x8x4x16xf32> {
  %q = kernel.alloc : memref<2x8x64xf32>
  kernel.call "slice" ins(%qkv : memref<2x8x128xf32>) outs(%q : memref<2x8x64xf32>) {config = {sizes = array<i64: 2, 8, 64>, starts = array<i64: 0, 0, 0>, steps = array<i64: 1, 1, 1>}}
  %k = kernel.alloc : memref<2x8x32xf32>
  kernel.call "slice" ins(%qkv : memref<2x8x128xf32>) outs(%k : memref<2x8x32xf32>) {config = {sizes = array<i64: 2, 8, 32>, starts = array<i64: 0, 0, 64>, steps = array<i64: 1, 1, 1>}}
  %v = kernel.alloc : memref<2x8x32xf32>
  kernel.call "slice" ins(%qkv : memref<2x8x128xf32>) outs(%v : memref<2x8x32xf32>) {config = {sizes = array<i64: 2, 8, 32>, starts = array<i64: 0, 0, 96>, steps = array<i64: 1, 1, 1>}}
  %qh = kernel.view %q : memref<2x8x64xf32> to memref<2x8x4x16xf32>
  %kh = kernel.view %k : memref<2x8x32xf32> to memref<2x8x2x16xf32>
  %vh = kernel.view %v : memref<2x8x32xf32> to memref<2x8x2x16xf32>
  %o = kernel.alloc : memref<2x8x4x16xf32>
  kernel.call "attention" ins(%qh, %kh, %vh : memref<2x8x4x16xf32>, memref<2x8x2x16xf32>, memref<2x8x2x16xf32>) outs(%o : memref<2x8x4x16xf32>) {config = {bthd = 15 : i64, causal = true, scale = 2.500000e-01 : f64}}
  return %o : memref<2x8x4x16xf32>
}
