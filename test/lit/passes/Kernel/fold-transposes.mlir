// RUN: ztc-opt %s -split-input-file -ztc-fold-transposes | FileCheck %s

// A weight transposed for the product dx = dy W^T: the matmul reads W as
// stored, and the copy and its buffer go.
// CHECK-LABEL: func.func @weight
// CHECK-SAME: (%[[DY:.+]]: memref<8x64xf32>, %[[W:.+]]: memref<32x64xf32>)
// CHECK-NOT: "transpose"
// CHECK: %[[DX:.+]] = kernel.alloc : memref<8x32xf32>
// CHECK-NOT: kernel.alloc
// CHECK: kernel.call "matmul" ins(%[[DY]], %[[W]] : memref<8x64xf32>, memref<32x64xf32>) outs(%[[DX]] : memref<8x32xf32>) {config = {transpose_b = true}}
func.func @weight(%dy: memref<8x64xf32>, %w: memref<32x64xf32>) -> memref<8x32xf32> {
  %t = kernel.alloc : memref<64x32xf32>
  kernel.call "transpose" ins(%w : memref<32x64xf32>) outs(%t : memref<64x32xf32>) {config = {perm = array<i64: 1, 0>}}
  %dx = kernel.alloc : memref<8x32xf32>
  kernel.call "matmul" ins(%dy, %t : memref<8x64xf32>, memref<64x32xf32>) outs(%dx : memref<8x32xf32>) {config = {}}
  return %dx : memref<8x32xf32>
}

// -----

// A batched left operand (dW = x^T dy over a batch of 3), read by two
// matmuls: both read it in place.
// CHECK-LABEL: func.func @batched_left
// CHECK-SAME: (%[[X:.+]]: memref<3x8x16xf32>, %[[DY:.+]]: memref<3x8x4xf32>)
// CHECK-NOT: "transpose"
// CHECK: kernel.call "matmul" ins(%[[X]], %[[DY]] : memref<3x8x16xf32>, memref<3x8x4xf32>) outs(%{{.+}} : memref<3x16x4xf32>) {config = {transpose_a = true}}
// CHECK: kernel.call "matmul" ins(%[[X]], %[[DY]] : memref<3x8x16xf32>, memref<3x8x4xf32>) outs(%{{.+}} : memref<3x16x4xf32>) {config = {transpose_a = true}}
func.func @batched_left(%x: memref<3x8x16xf32>, %dy: memref<3x8x4xf32>) -> (memref<3x16x4xf32>, memref<3x16x4xf32>) {
  %t = kernel.alloc : memref<3x16x8xf32>
  kernel.call "transpose" ins(%x : memref<3x8x16xf32>) outs(%t : memref<3x16x8xf32>) {config = {perm = array<i64: 0, 2, 1>}}
  %a = kernel.alloc : memref<3x16x4xf32>
  kernel.call "matmul" ins(%t, %dy : memref<3x16x8xf32>, memref<3x8x4xf32>) outs(%a : memref<3x16x4xf32>) {config = {}}
  %b = kernel.alloc : memref<3x16x4xf32>
  kernel.call "matmul" ins(%t, %dy : memref<3x16x8xf32>, memref<3x8x4xf32>) outs(%b : memref<3x16x4xf32>) {config = {}}
  return %a, %b : memref<3x16x4xf32>, memref<3x16x4xf32>
}

// -----

// Another kernel reads the transposed copy: it stays.
// CHECK-LABEL: func.func @other_reader
// CHECK: kernel.call "transpose"
// CHECK: kernel.call "matmul" ins(%{{.+}}, %{{.+}} : memref<8x64xf32>, memref<64x32xf32>) outs(%{{.+}} : memref<8x32xf32>){{$}}
func.func @other_reader(%dy: memref<8x64xf32>, %w: memref<32x64xf32>) -> (memref<8x32xf32>, memref<64x32xf32>) {
  %t = kernel.alloc : memref<64x32xf32>
  kernel.call "transpose" ins(%w : memref<32x64xf32>) outs(%t : memref<64x32xf32>) {config = {perm = array<i64: 1, 0>}}
  %dx = kernel.alloc : memref<8x32xf32>
  kernel.call "matmul" ins(%dy, %t : memref<8x64xf32>, memref<64x32xf32>) outs(%dx : memref<8x32xf32>) {config = {}}
  %r = kernel.alloc : memref<64x32xf32>
  kernel.elementwise ins(%t : memref<64x32xf32>) outs(%r : memref<64x32xf32>) {
  ^bb0(%v: f32):
    kernel.yield %v : f32
  }
  return %dx, %r : memref<8x32xf32>, memref<64x32xf32>
}

// -----

// The weight is updated in place (through a view) between the transpose
// and the matmul: the matmul must read the copy of the old value.
// CHECK-LABEL: func.func @overwritten
// CHECK: kernel.call "transpose"
// CHECK: kernel.call "matmul" {{.+}}){{$}}
func.func @overwritten(%dy: memref<8x64xf32>, %w: memref<32x64xf32>, %nw: memref<2048xf32>) -> memref<8x32xf32> {
  %t = kernel.alloc : memref<64x32xf32>
  kernel.call "transpose" ins(%w : memref<32x64xf32>) outs(%t : memref<64x32xf32>) {config = {perm = array<i64: 1, 0>}}
  %flat = kernel.view %w : memref<32x64xf32> to memref<2048xf32>
  kernel.elementwise ins(%nw : memref<2048xf32>) outs(%flat : memref<2048xf32>) {
  ^bb0(%v: f32):
    kernel.yield %v : f32
  }
  %dx = kernel.alloc : memref<8x32xf32>
  kernel.call "matmul" ins(%dy, %t : memref<8x64xf32>, memref<64x32xf32>) outs(%dx : memref<8x32xf32>) {config = {}}
  return %dx : memref<8x32xf32>
}

// -----

// Only swaps of the last two dimensions fold; attention's head transposes
// stay.
// CHECK-LABEL: func.func @other_perm
// CHECK: kernel.call "transpose"
// CHECK: kernel.call "matmul" {{.+}}){{$}}
func.func @other_perm(%x: memref<2x4x8xf32>, %y: memref<4x8x2xf32>) -> memref<4x2x2xf32> {
  %t = kernel.alloc : memref<4x2x8xf32>
  kernel.call "transpose" ins(%x : memref<2x4x8xf32>) outs(%t : memref<4x2x8xf32>) {config = {perm = array<i64: 1, 0, 2>}}
  %c = kernel.alloc : memref<4x2x2xf32>
  kernel.call "matmul" ins(%t, %y : memref<4x2x8xf32>, memref<4x8x2xf32>) outs(%c : memref<4x2x2xf32>) {config = {}}
  return %c : memref<4x2x2xf32>
}

// -----

// A weight transposed for the forward product y = x W^T and transposed
// back for the backward one dx = dy (W^T)^T: once the second transpose
// folds, the first one's copy is read only by matmuls and folds too; the
// backward matmul reads W as stored, as the two transposes cancel.
// CHECK-LABEL: func.func @cancel
// CHECK-SAME: (%[[X:.+]]: memref<8x32xf32>, %[[DY:.+]]: memref<8x64xf32>, %[[W:.+]]: memref<64x32xf32>)
// CHECK-NOT: "transpose"
// CHECK: kernel.call "matmul" ins(%[[X]], %[[W]] : memref<8x32xf32>, memref<64x32xf32>) outs(%{{.+}} : memref<8x64xf32>) {config = {transpose_b = true}}
// CHECK: kernel.call "matmul" ins(%[[DY]], %[[W]] : memref<8x64xf32>, memref<64x32xf32>) outs(%{{.+}} : memref<8x32xf32>){{$}}
func.func @cancel(%x: memref<8x32xf32>, %dy: memref<8x64xf32>, %w: memref<64x32xf32>) -> (memref<8x64xf32>, memref<8x32xf32>) {
  %wt = kernel.alloc : memref<32x64xf32>
  kernel.call "transpose" ins(%w : memref<64x32xf32>) outs(%wt : memref<32x64xf32>) {config = {perm = array<i64: 1, 0>}}
  %y = kernel.alloc : memref<8x64xf32>
  kernel.call "matmul" ins(%x, %wt : memref<8x32xf32>, memref<32x64xf32>) outs(%y : memref<8x64xf32>) {config = {}}
  %wtt = kernel.alloc : memref<64x32xf32>
  kernel.call "transpose" ins(%wt : memref<32x64xf32>) outs(%wtt : memref<64x32xf32>) {config = {perm = array<i64: 1, 0>}}
  %dx = kernel.alloc : memref<8x32xf32>
  kernel.call "matmul" ins(%dy, %wtt : memref<8x64xf32>, memref<64x32xf32>) outs(%dx : memref<8x32xf32>) {config = {}}
  return %y, %dx : memref<8x64xf32>, memref<8x32xf32>
}

// -----

// A weight gradient computed as (W^T)' = x^T dy and transposed into W's
// layout: the matmul writes it transposed, dW = dy^T x, into the
// transpose's buffer, which it now allocates first.
// CHECK-LABEL: func.func @product
// CHECK-SAME: (%[[X:.+]]: memref<8x32xf32>, %[[DY:.+]]: memref<8x64xf32>)
// CHECK-NOT: "transpose"
// CHECK: %[[DW:.+]] = kernel.alloc : memref<64x32xf32>
// CHECK-NOT: kernel.alloc
// CHECK: kernel.call "matmul" ins(%[[DY]], %[[X]] : memref<8x64xf32>, memref<8x32xf32>) outs(%[[DW]] : memref<64x32xf32>) {config = {transpose_a = true}}
// CHECK: return %[[DW]]
func.func @product(%x: memref<8x32xf32>, %dy: memref<8x64xf32>) -> memref<64x32xf32> {
  %xt = kernel.alloc : memref<32x8xf32>
  kernel.call "transpose" ins(%x : memref<8x32xf32>) outs(%xt : memref<32x8xf32>) {config = {perm = array<i64: 1, 0>}}
  %g = kernel.alloc : memref<32x64xf32>
  kernel.call "matmul" ins(%xt, %dy : memref<32x8xf32>, memref<8x64xf32>) outs(%g : memref<32x64xf32>) {config = {}}
  %dw = kernel.alloc : memref<64x32xf32>
  kernel.call "transpose" ins(%g : memref<32x64xf32>) outs(%dw : memref<64x32xf32>) {config = {perm = array<i64: 1, 0>}}
  return %dw : memref<64x32xf32>
}

// -----

// The product is read by another kernel too: the matmul keeps writing it,
// and the transpose stays.
// CHECK-LABEL: func.func @product_read_twice
// CHECK: kernel.call "matmul" ins(%{{.+}}, %{{.+}} : memref<32x8xf32>, memref<8x64xf32>) outs(%{{.+}} : memref<32x64xf32>)
// CHECK: kernel.call "transpose"
func.func @product_read_twice(%xt: memref<32x8xf32>, %dy: memref<8x64xf32>) -> (memref<64x32xf32>, memref<32x64xf32>) {
  %g = kernel.alloc : memref<32x64xf32>
  kernel.call "matmul" ins(%xt, %dy : memref<32x8xf32>, memref<8x64xf32>) outs(%g : memref<32x64xf32>) {config = {}}
  %dw = kernel.alloc : memref<64x32xf32>
  kernel.call "transpose" ins(%g : memref<32x64xf32>) outs(%dw : memref<64x32xf32>) {config = {perm = array<i64: 1, 0>}}
  %r = kernel.alloc : memref<32x64xf32>
  kernel.elementwise ins(%g : memref<32x64xf32>) outs(%r : memref<32x64xf32>) {
  ^bb0(%v: f32):
    kernel.yield %v : f32
  }
  return %dw, %r : memref<64x32xf32>, memref<32x64xf32>
}

// -----

// Attention's head splits, forward: q, k and v transposed from the
// projections' [B, T, H, D] into [B, H, T, D], and the result transposed
// back. The call reads the projections as stored and writes the final
// buffer, each role's bthd bit set (q 1, k 2, v 4, the result 8): no copy
// is left, and the result's buffer is allocated before the call.
// CHECK-LABEL: func.func @attention_heads
// CHECK-SAME: (%[[Q:[^:]+]]: memref<2x8x4x16xf32>, %[[K:[^:]+]]: memref<2x8x4x16xf32>, %[[V:[^:]+]]: memref<2x8x4x16xf32>)
// CHECK-NOT: "transpose"
// CHECK: %[[Y:.+]] = kernel.alloc : memref<2x8x4x16xf32>
// CHECK-NEXT: kernel.call "attention" ins(%[[Q]], %[[K]], %[[V]] : memref<2x8x4x16xf32>, memref<2x8x4x16xf32>, memref<2x8x4x16xf32>) outs(%[[Y]] : memref<2x8x4x16xf32>) {config = {bthd = 15 : i64, causal = true, scale = 2.500000e-01 : f64}}
// CHECK-NOT: "transpose"
// CHECK: return %[[Y]]
func.func @attention_heads(%q: memref<2x8x4x16xf32>, %k: memref<2x8x4x16xf32>, %v: memref<2x8x4x16xf32>) -> memref<2x8x4x16xf32> {
  %qt = kernel.alloc : memref<2x4x8x16xf32>
  kernel.call "transpose" ins(%q : memref<2x8x4x16xf32>) outs(%qt : memref<2x4x8x16xf32>) {config = {perm = array<i64: 0, 2, 1, 3>}}
  %kt = kernel.alloc : memref<2x4x8x16xf32>
  kernel.call "transpose" ins(%k : memref<2x8x4x16xf32>) outs(%kt : memref<2x4x8x16xf32>) {config = {perm = array<i64: 0, 2, 1, 3>}}
  %vt = kernel.alloc : memref<2x4x8x16xf32>
  kernel.call "transpose" ins(%v : memref<2x8x4x16xf32>) outs(%vt : memref<2x4x8x16xf32>) {config = {perm = array<i64: 0, 2, 1, 3>}}
  %o = kernel.alloc : memref<2x4x8x16xf32>
  kernel.call "attention" ins(%qt, %kt, %vt : memref<2x4x8x16xf32>, memref<2x4x8x16xf32>, memref<2x4x8x16xf32>) outs(%o : memref<2x4x8x16xf32>) {config = {causal = true, scale = 2.500000e-01 : f64}}
  %y = kernel.alloc : memref<2x8x4x16xf32>
  kernel.call "transpose" ins(%o : memref<2x4x8x16xf32>) outs(%y : memref<2x8x4x16xf32>) {config = {perm = array<i64: 0, 2, 1, 3>}}
  return %y : memref<2x8x4x16xf32>
}

// -----

// The backward reads the forward's result too: it reads the final buffer
// in the same layout (bit 8 of its bthd), the result gradient as stored
// (bit 16), and writes dq in [B, T, H, D] (bit 32); k, v and the other
// gradients keep [B, H, T, D].
// CHECK-LABEL: func.func @attention_backward_heads
// CHECK-SAME: (%[[Q:[^:]+]]: memref<2x4x8x16xf32>, %[[K:[^:]+]]: memref<2x4x8x16xf32>, %[[V:[^:]+]]: memref<2x4x8x16xf32>, %[[G:[^:]+]]: memref<2x8x4x16xf32>)
// CHECK-NOT: "transpose"
// CHECK: kernel.call "attention" ins(%[[Q]], %[[K]], %[[V]] : {{.+}}) outs(%[[Y:.+]] : memref<2x8x4x16xf32>) {config = {bthd = 8 : i64, scale = 2.500000e-01 : f64}}
// CHECK-NOT: "transpose"
// CHECK: kernel.call "attention_backward" ins(%[[Q]], %[[K]], %[[V]], %[[Y]], %[[G]] : {{.+}}) outs(%[[DQ:.+]], %{{.+}}, %{{.+}} : memref<2x8x4x16xf32>, memref<2x4x8x16xf32>, memref<2x4x8x16xf32>) {config = {bthd = 56 : i64, scale = 2.500000e-01 : f64}}
// CHECK-NOT: "transpose"
func.func @attention_backward_heads(%q: memref<2x4x8x16xf32>, %k: memref<2x4x8x16xf32>, %v: memref<2x4x8x16xf32>, %g: memref<2x8x4x16xf32>) -> (memref<2x8x4x16xf32>, memref<2x8x4x16xf32>, memref<2x4x8x16xf32>, memref<2x4x8x16xf32>) {
  %o = kernel.alloc : memref<2x4x8x16xf32>
  kernel.call "attention" ins(%q, %k, %v : memref<2x4x8x16xf32>, memref<2x4x8x16xf32>, memref<2x4x8x16xf32>) outs(%o : memref<2x4x8x16xf32>) {config = {scale = 2.500000e-01 : f64}}
  %y = kernel.alloc : memref<2x8x4x16xf32>
  kernel.call "transpose" ins(%o : memref<2x4x8x16xf32>) outs(%y : memref<2x8x4x16xf32>) {config = {perm = array<i64: 0, 2, 1, 3>}}
  %gt = kernel.alloc : memref<2x4x8x16xf32>
  kernel.call "transpose" ins(%g : memref<2x8x4x16xf32>) outs(%gt : memref<2x4x8x16xf32>) {config = {perm = array<i64: 0, 2, 1, 3>}}
  %dq = kernel.alloc : memref<2x4x8x16xf32>
  %dk = kernel.alloc : memref<2x4x8x16xf32>
  %dv = kernel.alloc : memref<2x4x8x16xf32>
  kernel.call "attention_backward" ins(%q, %k, %v, %o, %gt : memref<2x4x8x16xf32>, memref<2x4x8x16xf32>, memref<2x4x8x16xf32>, memref<2x4x8x16xf32>, memref<2x4x8x16xf32>) outs(%dq, %dk, %dv : memref<2x4x8x16xf32>, memref<2x4x8x16xf32>, memref<2x4x8x16xf32>) {config = {scale = 2.500000e-01 : f64}}
  %dqt = kernel.alloc : memref<2x8x4x16xf32>
  kernel.call "transpose" ins(%dq : memref<2x4x8x16xf32>) outs(%dqt : memref<2x8x4x16xf32>) {config = {perm = array<i64: 0, 2, 1, 3>}}
  return %y, %dqt, %dk, %dv : memref<2x8x4x16xf32>, memref<2x8x4x16xf32>, memref<2x4x8x16xf32>, memref<2x4x8x16xf32>
}

// -----

// Negative: the head split's copy is read by something else too (an
// elementwise kernel), and the projection is updated in place before the
// attention call: both copies stay.
// CHECK-LABEL: func.func @attention_heads_kept
// CHECK: kernel.call "transpose" ins(%{{.+}} : memref<2x8x4x16xf32>) outs(%[[QT:.+]] : memref<2x4x8x16xf32>)
// CHECK: kernel.call "transpose" ins(%[[KS:.+]] : memref<2x8x4x16xf32>) outs(%[[KT:.+]] : memref<2x4x8x16xf32>)
// CHECK: kernel.call "attention" ins(%[[QT]], %[[KT]], %{{.+}} : {{.+}}) outs(%{{.+}} : memref<2x4x8x16xf32>) {config = {scale = 2.500000e-01 : f64}}
func.func @attention_heads_kept(%q: memref<2x8x4x16xf32>, %k: memref<2x8x4x16xf32>, %v: memref<2x4x8x16xf32>) -> (memref<2x4x8x16xf32>, memref<2x4x8x16xf32>) {
  %qt = kernel.alloc : memref<2x4x8x16xf32>
  kernel.call "transpose" ins(%q : memref<2x8x4x16xf32>) outs(%qt : memref<2x4x8x16xf32>) {config = {perm = array<i64: 0, 2, 1, 3>}}
  %kt = kernel.alloc : memref<2x4x8x16xf32>
  kernel.call "transpose" ins(%k : memref<2x8x4x16xf32>) outs(%kt : memref<2x4x8x16xf32>) {config = {perm = array<i64: 0, 2, 1, 3>}}
  kernel.elementwise ins(%k : memref<2x8x4x16xf32>) outs(%k : memref<2x8x4x16xf32>) {
  ^bb0(%x: f32):
    %0 = arith.negf %x : f32
    kernel.yield %0 : f32
  }
  %r = kernel.alloc : memref<2x4x8x16xf32>
  kernel.elementwise ins(%qt : memref<2x4x8x16xf32>) outs(%r : memref<2x4x8x16xf32>) {
  ^bb0(%x: f32):
    kernel.yield %x : f32
  }
  %o = kernel.alloc : memref<2x4x8x16xf32>
  kernel.call "attention" ins(%qt, %kt, %v : memref<2x4x8x16xf32>, memref<2x4x8x16xf32>, memref<2x4x8x16xf32>) outs(%o : memref<2x4x8x16xf32>) {config = {scale = 2.500000e-01 : f64}}
  return %o, %r : memref<2x4x8x16xf32>, memref<2x4x8x16xf32>
}

// -----

// Negative: the final buffer is updated in place before the backward reads
// the forward's result: redirected there, the backward would read the
// update. The result's transpose stays.
// CHECK-LABEL: func.func @attention_result_overwritten
// CHECK: kernel.call "attention" ins({{.+}}) outs(%[[O:.+]] : memref<2x4x8x16xf32>) {config = {scale = 2.500000e-01 : f64}}
// CHECK: kernel.call "transpose" ins(%[[O]] : memref<2x4x8x16xf32>)
// CHECK: kernel.call "attention_backward" ins(%{{.+}}, %{{.+}}, %{{.+}}, %[[O]], %{{.+}} : {{.+}})
func.func @attention_result_overwritten(%q: memref<2x4x8x16xf32>, %k: memref<2x4x8x16xf32>, %v: memref<2x4x8x16xf32>, %g: memref<2x4x8x16xf32>) -> (memref<2x8x4x16xf32>, memref<2x4x8x16xf32>, memref<2x4x8x16xf32>, memref<2x4x8x16xf32>) {
  %o = kernel.alloc : memref<2x4x8x16xf32>
  kernel.call "attention" ins(%q, %k, %v : memref<2x4x8x16xf32>, memref<2x4x8x16xf32>, memref<2x4x8x16xf32>) outs(%o : memref<2x4x8x16xf32>) {config = {scale = 2.500000e-01 : f64}}
  %y = kernel.alloc : memref<2x8x4x16xf32>
  kernel.call "transpose" ins(%o : memref<2x4x8x16xf32>) outs(%y : memref<2x8x4x16xf32>) {config = {perm = array<i64: 0, 2, 1, 3>}}
  kernel.elementwise ins(%y : memref<2x8x4x16xf32>) outs(%y : memref<2x8x4x16xf32>) {
  ^bb0(%x: f32):
    %0 = arith.negf %x : f32
    kernel.yield %0 : f32
  }
  %dq = kernel.alloc : memref<2x4x8x16xf32>
  %dk = kernel.alloc : memref<2x4x8x16xf32>
  %dv = kernel.alloc : memref<2x4x8x16xf32>
  kernel.call "attention_backward" ins(%q, %k, %v, %o, %g : memref<2x4x8x16xf32>, memref<2x4x8x16xf32>, memref<2x4x8x16xf32>, memref<2x4x8x16xf32>, memref<2x4x8x16xf32>) outs(%dq, %dk, %dv : memref<2x4x8x16xf32>, memref<2x4x8x16xf32>, memref<2x4x8x16xf32>) {config = {scale = 2.500000e-01 : f64}}
  return %y, %dq, %dk, %dv : memref<2x8x4x16xf32>, memref<2x4x8x16xf32>, memref<2x4x8x16xf32>, memref<2x4x8x16xf32>
}
