// RUN: ztc-opt %s --ztc-schedule-collectives=allgather-bucket-bytes=1024 | FileCheck %s --check-prefix=JOINED
// RUN: ztc-opt %s --ztc-schedule-collectives=allgather-bucket-elements=256 | FileCheck %s --check-prefix=JOINED
// RUN: ztc-opt %s --ztc-schedule-collectives=allgather-bucket-bytes=1023 | FileCheck %s --check-prefix=APART
// RUN: ztc-opt %s --ztc-schedule-collectives="allgather-bucket-bytes=1024 max-live-bytes=2047" | FileCheck %s --check-prefix=APART
// RUN: ztc-opt %s --ztc-schedule-collectives="allgather-bucket-bytes=1024 max-live-bytes=2048" | FileCheck %s --check-prefix=JOINED

// Two parameter gathers (the second after a cast of its block) join into
// one bucket of 2 x 128 gathered elements when 1024 bytes fit: both blocks
// are copied into the bucket's input, one all-gather runs where the first
// did, and each parameter's rows are sliced out of the gathered [2, 128]
// bucket right before the op that reads it. 1023 bytes keep the gathers
// apart, and so does a live bound under 2048 bytes: the gathered bucket
// (1024 bytes) lives beside the two parameters sliced from it.

// JOINED-LABEL: func.func @stage3
// JOINED: kernel.elementwise ins(%arg1 : memref<64xf32>) outs(%[[CAST:.+]] : memref<64xf32>)
// JOINED: %[[IN:.+]] = kernel.alloc : memref<128xf32>
// JOINED-NEXT: kernel.call "copy_into" ins(%arg0 : memref<64xf32>) outs(%[[IN]] : memref<128xf32>) {config = {axis = 0 : i64, offset = 0 : i64}}
// JOINED-NEXT: kernel.call "copy_into" ins(%[[CAST]] : memref<64xf32>) outs(%[[IN]] : memref<128xf32>) {config = {axis = 0 : i64, offset = 64 : i64}}
// JOINED-NEXT: %[[OUT:.+]] = kernel.alloc : memref<256xf32>
// JOINED: kernel.collective all_gather ins(%[[IN]] : memref<128xf32>) outs(%[[OUT]] : memref<256xf32>)
// JOINED-NOT: all_gather
// JOINED: %[[ROWS:.+]] = kernel.view %[[OUT]] : memref<256xf32> to memref<2x128xf32>
// JOINED: kernel.call "slice" ins(%[[ROWS]] : memref<2x128xf32>) outs(%{{.+}} : memref<2x64xf32>) {config = {sizes = array<i64: 2, 64>, starts = array<i64: 0, 0>, steps = array<i64: 1, 1>}}
// JOINED-NEXT: kernel.elementwise ins(%arg2,
// JOINED: kernel.call "slice" ins(%[[ROWS]] : memref<2x128xf32>) outs(%{{.+}} : memref<2x64xf32>) {config = {sizes = array<i64: 2, 64>, starts = array<i64: 0, 64>, steps = array<i64: 1, 1>}}
// JOINED-NEXT: kernel.elementwise
// JOINED-NOT: all_gather

// APART-LABEL: func.func @stage3
// APART: kernel.collective all_gather ins(%arg0
// APART-NOT: copy_into
// APART: kernel.collective all_gather ins(%
func.func @stage3(%p1: memref<64xf32>, %p2: memref<64xf32>, %x: memref<128xf32>) -> memref<128xf32> {
  %g1 = kernel.alloc : memref<128xf32>
  kernel.collective all_gather ins(%p1 : memref<64xf32>) outs(%g1 : memref<128xf32>) {world_size = 2 : i64}
  %y1 = kernel.alloc : memref<128xf32>
  kernel.elementwise ins(%x, %g1 : memref<128xf32>, memref<128xf32>) outs(%y1 : memref<128xf32>) {
  ^bb0(%a: f32, %b: f32):
    %r = arith.mulf %a, %b : f32
    kernel.yield %r : f32
  }
  %c2 = kernel.alloc : memref<64xf32>
  kernel.elementwise ins(%p2 : memref<64xf32>) outs(%c2 : memref<64xf32>) {
  ^bb0(%v: f32):
    %r = arith.negf %v : f32
    kernel.yield %r : f32
  }
  %g2 = kernel.alloc : memref<128xf32>
  kernel.collective all_gather ins(%c2 : memref<64xf32>) outs(%g2 : memref<128xf32>) {world_size = 2 : i64}
  %y2 = kernel.alloc : memref<128xf32>
  kernel.elementwise ins(%y1, %g2 : memref<128xf32>, memref<128xf32>) outs(%y2 : memref<128xf32>) {
  ^bb0(%a: f32, %b: f32):
    %r = arith.mulf %a, %b : f32
    kernel.yield %r : f32
  }
  return %y2 : memref<128xf32>
}
