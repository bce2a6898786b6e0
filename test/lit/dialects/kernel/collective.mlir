// RUN: ztc-opt %s | ztc-opt | FileCheck %s
// RUN: ztc-opt %s --canonicalize --cse | FileCheck %s --check-prefix=KEPT

// Every kind of kernel.collective round-trips: its kind as a keyword, the
// buffers it reads and writes, the ranks it spans.
// CHECK-LABEL: func.func @kinds
// CHECK-SAME: (%[[G:.+]]: memref<8xf32>, %[[H:.+]]: memref<8xbf16>, %[[P:.+]]: memref<4xf64>)
// CHECK: kernel.collective all_reduce ins(%[[G]] : memref<8xf32>) outs(%[[S:.+]] : memref<8xf32>) {world_size = 2 : i64}
// CHECK: kernel.collective reduce_scatter ins(%[[H]] : memref<8xbf16>) outs(%{{.+}} : memref<4xbf16>) {world_size = 2 : i64}
// CHECK: kernel.collective all_gather ins(%[[P]] : memref<4xf64>) outs(%{{.+}} : memref<16xf64>) {world_size = 4 : i64}
// CHECK: kernel.collective shard ins(%[[S]] : memref<8xf32>) outs(%{{.+}} : memref<2xf32>) {kernel.stream = 1 : i64, world_size = 4 : i64}
func.func @kinds(%g: memref<8xf32>, %h: memref<8xbf16>, %p: memref<4xf64>) {
  %s = kernel.alloc : memref<8xf32>
  kernel.collective all_reduce ins(%g : memref<8xf32>) outs(%s : memref<8xf32>) {world_size = 2 : i64}
  %r = kernel.alloc : memref<4xbf16>
  kernel.collective reduce_scatter ins(%h : memref<8xbf16>) outs(%r : memref<4xbf16>) {world_size = 2 : i64}
  %a = kernel.alloc : memref<16xf64>
  kernel.collective all_gather ins(%p : memref<4xf64>) outs(%a : memref<16xf64>) {world_size = 4 : i64}
  %b = kernel.alloc : memref<2xf32>
  kernel.collective shard ins(%s : memref<8xf32>) outs(%b : memref<2xf32>) {kernel.stream = 1 : i64, world_size = 4 : i64}
  return
}

// A collective writes its output, so cleanups keep it even when nothing
// reads what it wrote, and never merge two alike: every rank must issue
// each one.
// KEPT-LABEL: func.func @kept
// KEPT: kernel.collective all_reduce ins(%[[X:.+]] : memref<4xf32>) outs(%[[X]] : memref<4xf32>)
// KEPT-NEXT: kernel.collective all_reduce ins(%[[X]] : memref<4xf32>) outs(%[[X]] : memref<4xf32>)
// KEPT-NEXT: return
func.func @kept(%x: memref<4xf32>) {
  kernel.collective all_reduce ins(%x : memref<4xf32>) outs(%x : memref<4xf32>) {world_size = 2 : i64}
  kernel.collective all_reduce ins(%x : memref<4xf32>) outs(%x : memref<4xf32>) {world_size = 2 : i64}
  return
}
