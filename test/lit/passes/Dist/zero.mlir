// RUN: ztc-opt %s -split-input-file --ztc-zero="world-size=2" | FileCheck %s --check-prefix=STAGE0
// RUN: ztc-opt %s -split-input-file --ztc-zero="world-size=2 stage=2" | FileCheck %s --check-prefix=STAGE2
// RUN: ztc-opt %s -split-input-file --ztc-zero="world-size=2 stage=2 reduce-bucket-bytes=16" | FileCheck %s --check-prefix=BUCKETS
// RUN: ztc-opt %s -split-input-file --ztc-zero="world-size=2 stage=1 reduce-bucket-bytes=16" | FileCheck %s --check-prefix=STAGE1
// RUN: ztc-opt %s -split-input-file --ztc-zero="world-size=2 stage=3 param-persistence-threshold=4" | FileCheck %s --check-prefix=STAGE3
// RUN: ztc-opt %s -split-input-file --ztc-zero="world-size=2 stage=2 comm-dtype=bf16" | FileCheck %s --check-prefix=COMM
// RUN: ztc-opt %s -split-input-file --ztc-zero="world-size=2 stage=3 param-persistence-threshold=0" | FileCheck %s --check-prefix=ALL

// Stage 0: the gradients, in the order the step computes them, form one
// bucket; it is all-reduced right after the last of them, and each update
// reads its slice scaled by 1/world-size (the mean).
// STAGE0-LABEL: func.func @step
// STAGE0-SAME: %[[PW:[^:]+]]: tensor<2x3xf32> {train.binding = #train.binding<param "w">}, %[[PB:[^:]+]]: tensor<3xf32> {train.binding = #train.binding<param "b">}
// STAGE0-SAME: dist.world_size = 2 : i64, dist.zero_stage = 0 : i64
// STAGE0: %[[GB:.+]] = nn.neg %[[PB]]
// STAGE0: %[[GW:.+]] = nn.neg %[[PW]]
// STAGE0: %[[FW:.+]] = nn.reshape %[[GW]] : tensor<2x3xf32> -> tensor<6xf32>
// STAGE0: %[[CAT:.+]] = nn.concat %[[GB]], %[[FW]] {axis = 0 : i64} : tensor<3xf32>, tensor<6xf32> -> tensor<9xf32>
// STAGE0: %[[SUM:.+]] = dist.all_reduce %[[CAT]] {world_size = 2 : i64} : tensor<9xf32> -> tensor<9xf32>
// STAGE0: %[[B:.+]] = nn.slice %[[SUM]] {sizes = array<i64: 3>, starts = array<i64: 0>
// STAGE0: %[[MB:.+]] = nn.mul %[[B]], %{{.+}} : tensor<3xf32>, tensor<f32> -> tensor<3xf32>
// STAGE0: %[[W:.+]] = nn.slice %[[SUM]] {sizes = array<i64: 6>, starts = array<i64: 3>
// STAGE0: %[[WW:.+]] = nn.reshape %[[W]] : tensor<6xf32> -> tensor<2x3xf32>
// STAGE0: %[[MW:.+]] = nn.mul %[[WW]], %{{.+}} : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xf32>
// STAGE0: train.sgd %[[PW]], %[[MW]],
// STAGE0: train.sgd %[[PB]], %[[MB]],

// Stage 2: each gradient is padded to 2 blocks and laid out as [2, block]
// (b: 3 -> 2x2, w: 6 -> 2x3); the bucket joins them along the blocks, so
// the reduce-scatter hands this rank block r of each. Each update runs on
// this rank's block of its parameter with a block of its momentum buffer
// (the states keep their names, with dist.full_shape); the updated blocks
// are all-gathered in the same layout and each parameter is written back
// whole.
// STAGE2-LABEL: func.func @step
// STAGE2-SAME: %[[LR:[^:]+]]: tensor<f32> {train.binding = #train.binding<hyper "lr">}, %[[WM:[^:]+]]: tensor<3xf32> {dist.full_shape = array<i64: 2, 3>, train.binding = #train.binding<state "w.momentum_buffer">}
// STAGE2-SAME: %[[BM:[^:]+]]: tensor<2xf32> {dist.full_shape = array<i64: 3>, train.binding = #train.binding<state "b.momentum_buffer">}
// STAGE2-SAME: tensor<2x3xf32> {train.update_of = "w"}, tensor<3xf32> {train.update_of = "w.momentum_buffer"}, tensor<3xf32> {train.update_of = "b"}, tensor<2xf32> {train.update_of = "b.momentum_buffer"}
// STAGE2: nn.concat %{{.+}}, %{{.+}} {axis = 1 : i64} : tensor<2x2xf32>, tensor<2x3xf32> -> tensor<2x5xf32>
// STAGE2: %[[MINE:.+]] = dist.reduce_scatter %{{.+}} {world_size = 2 : i64} : tensor<10xf32> -> tensor<5xf32>
// STAGE2: %[[P:.+]] = dist.shard %{{.+}} {world_size = 2 : i64} : tensor<6xf32> -> tensor<3xf32>
// STAGE2: %[[NEW:.+]], %[[BUF:.+]] = train.sgd %[[P]], %{{.+}}, %[[LR]], %[[WM]]
// STAGE2: dist.shard %{{.+}} {world_size = 2 : i64} : tensor<4xf32> -> tensor<2xf32>
// STAGE2: %[[NEWB:.+]], %[[BUFB:.+]] = train.sgd
// STAGE2: %[[JOIN:.+]] = nn.concat %[[NEWB]], %[[NEW]] {axis = 0 : i64}
// STAGE2: dist.all_gather %[[JOIN]] {world_size = 2 : i64} : tensor<5xf32> -> tensor<10xf32>
// STAGE2: return %{{.+}}, %{{.+}}, %[[BUF]], %{{.+}}, %[[BUFB]]

// Stage 2 with 16-byte buckets: each gradient is a bucket of its own,
// reduce-scattered right after it is computed.
// BUCKETS-LABEL: func.func @step
// BUCKETS-SAME: %[[PW:[^:]+]]: tensor<2x3xf32> {train.binding = #train.binding<param "w">}, %[[PB:[^:]+]]: tensor<3xf32> {train.binding = #train.binding<param "b">}
// BUCKETS: %[[GB:.+]] = nn.neg %[[PB]]
// BUCKETS: dist.reduce_scatter {{.+}} : tensor<4xf32> -> tensor<2xf32>
// BUCKETS: %[[GW:.+]] = nn.neg %[[PW]]
// BUCKETS: dist.reduce_scatter {{.+}} : tensor<6xf32> -> tensor<3xf32>
// BUCKETS: dist.all_gather {{.+}} : tensor<2xf32> -> tensor<4xf32>
// BUCKETS: dist.all_gather {{.+}} : tensor<3xf32> -> tensor<6xf32>

// Stage 1: the same collectives, but only once the backward is done: the
// whole gradients live until the update.
// STAGE1-LABEL: func.func @step
// STAGE1-SAME: %[[PW:[^:]+]]: tensor<2x3xf32> {train.binding = #train.binding<param "w">}, %[[PB:[^:]+]]: tensor<3xf32> {train.binding = #train.binding<param "b">}
// STAGE1: nn.neg %[[PB]]
// STAGE1: nn.neg %[[PW]]
// STAGE1: dist.reduce_scatter {{.+}} : tensor<4xf32> -> tensor<2xf32>
// STAGE1: dist.reduce_scatter {{.+}} : tensor<6xf32> -> tensor<3xf32>
// Stage 3 with a threshold of 4 elements: w (6) is sharded into blocks
// of 3, b (3) stays whole. w's block is gathered for each op that reads
// it; its gradient is reduce-scattered; its momentum buffer is a block
// too; b's gradient is all-reduced as in stage 0.
// STAGE3-LABEL: func.func @step
// STAGE3-SAME: %[[PW:[^:]+]]: tensor<3xf32> {dist.full_shape = array<i64: 2, 3>, train.binding = #train.binding<param "w">}
// STAGE3-SAME: %[[PB:[^:]+]]: tensor<3xf32> {train.binding = #train.binding<param "b">}
// STAGE3-SAME: %[[LR:[^:]+]]: tensor<f32> {train.binding = #train.binding<hyper "lr">}, %[[WM:[^:]+]]: tensor<3xf32> {dist.full_shape = array<i64: 2, 3>, train.binding = #train.binding<state "w.momentum_buffer">}
// STAGE3: dist.all_reduce {{.+}} : tensor<3xf32> -> tensor<3xf32>
// STAGE3: %[[G:.+]] = dist.all_gather %[[PW]] {dist.use = 0 : i64, world_size = 2 : i64} : tensor<3xf32> -> tensor<6xf32>
// STAGE3: %[[W:.+]] = nn.reshape %[[G]] : tensor<6xf32> -> tensor<2x3xf32>
// STAGE3: %[[GW:.+]] = nn.neg %[[W]]
// STAGE3: dist.reduce_scatter {{.+}} : tensor<6xf32> -> tensor<3xf32>
// STAGE3: train.sgd %[[PW]], {{.+}}, %[[LR]], %[[WM]] {momentum = 9.000000e-01 : f64} : tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<3xf32> -> tensor<3xf32>, tensor<3xf32>
// STAGE3: train.sgd %[[PB]],
// Stage 3 with every parameter sharded: the loss, computed from b alone
// here, is recomputed right before the return from its own gather of b.
// ALL-LABEL: func.func @step
// ALL-SAME: %[[PB:[^:]+]]: tensor<{{[^>]+}}> {{[^%]*}}<param "b">}
// ALL: %[[B:.+]] = dist.all_gather %[[PB]] {dist.use = {{[0-9]+}} : i64, world_size = 2 : i64} : tensor<2xf32> -> tensor<4xf32>
// ALL: %[[LOSS:.+]] = nn.reduce_sum
// ALL-NEXT: return %[[LOSS]],

// comm-dtype=bf16: the bucket is cast to bf16 for the reduce-scatter and
// its block back to f32 before the mean; the parameters' all-gather stays
// f32.
// COMM-LABEL: func.func @step
// COMM: %[[HALF:.+]] = nn.cast %{{.+}} : tensor<10xf32> -> tensor<10xbf16>
// COMM: %[[MINE:.+]] = dist.reduce_scatter %[[HALF]] {world_size = 2 : i64} : tensor<10xbf16> -> tensor<5xbf16>
// COMM: nn.cast %[[MINE]] : tensor<5xbf16> -> tensor<5xf32>
// COMM: dist.all_gather %{{.+}} {world_size = 2 : i64} : tensor<5xf32> -> tensor<10xf32>
func.func @step(%w: tensor<2x3xf32> {train.binding = #train.binding<param "w">},
                %b: tensor<3xf32> {train.binding = #train.binding<param "b">},
                %lr: tensor<f32> {train.binding = #train.binding<hyper "lr">},
                %wm: tensor<2x3xf32> {train.binding = #train.binding<state "w.momentum_buffer">},
                %bm: tensor<3xf32> {train.binding = #train.binding<state "b.momentum_buffer">})
    -> (tensor<f32> {onnx.name = "loss"},
        tensor<2x3xf32> {train.update_of = "w"}, tensor<2x3xf32> {train.update_of = "w.momentum_buffer"},
        tensor<3xf32> {train.update_of = "b"}, tensor<3xf32> {train.update_of = "b.momentum_buffer"})
    attributes {train.entry = "train_step"} {
  %loss = nn.reduce_sum %b {axes = array<i64: 0>, keepdims = false} : tensor<3xf32> -> tensor<f32>
  %gb = nn.neg %b : tensor<3xf32> -> tensor<3xf32>
  %gw = nn.neg %w : tensor<2x3xf32> -> tensor<2x3xf32>
  %w1:2 = train.sgd %w, %gw, %lr, %wm {momentum = 0.9 : f64}
      : tensor<2x3xf32>, tensor<2x3xf32>, tensor<f32>, tensor<2x3xf32> -> tensor<2x3xf32>, tensor<2x3xf32>
  %b1:2 = train.sgd %b, %gb, %lr, %bm {momentum = 0.9 : f64}
      : tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<3xf32> -> tensor<3xf32>, tensor<3xf32>
  return %loss, %w1#0, %w1#1, %b1#0, %b1#1
      : tensor<f32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<3xf32>, tensor<3xf32>
}

// -----

// Stage 3 under mixed precision: a parameter the forward reads as a bf16
// working copy (transposed in f32, then cast) keeps a bf16 block beside its
// f32 master block, a state that is a train.copy_of the parameter (the
// runtime writes it from the parameter's initial value). The copy is
// gathered from it in bf16, half the bytes of an f32 gather, then
// transposed; after the update the new master block, rounded, is returned
// as the block's new value.
// STAGE3-LABEL: func.func @half_copy
// STAGE3-SAME: %[[X:[^:]+]]: tensor<4x3xbf16> {train.binding = #train.binding<input "x">}, %[[PW:[^:]+]]: {{.*}}, %[[COPY:[^:]+]]: tensor<3xbf16> {dist.full_shape = array<i64: 2, 3>, train.binding = #train.binding<state "w.bf16">, train.copy_of = "w"}
// STAGE3-SAME: tensor<3xbf16> {train.update_of = "w.bf16"}
// STAGE3-NEXT: %[[G:.+]] = dist.all_gather %[[COPY]] {dist.use = 0 : i64, world_size = 2 : i64} : tensor<3xbf16> -> tensor<6xbf16>
// STAGE3-NEXT: %[[W:.+]] = nn.reshape %[[G]] : tensor<6xbf16> -> tensor<2x3xbf16>
// STAGE3-NEXT: %[[T:.+]] = nn.transpose %[[W]] {perm = array<i64: 1, 0>} : tensor<2x3xbf16> -> tensor<3x2xbf16>
// STAGE3-NEXT: nn.matmul %[[X]], %[[T]] : tensor<4x3xbf16>, tensor<3x2xbf16> -> tensor<4x2xbf16>
// STAGE3: %[[NEW:.+]], %[[M:.+]] = train.sgd %[[PW]],
// STAGE3-NEXT: %[[C:.+]] = nn.cast %[[NEW]] : tensor<3xf32> -> tensor<3xbf16>
// STAGE3-NEXT: return %{{.+}}, %[[NEW]], %[[M]], %[[C]] : tensor<f32>, tensor<3xf32>, tensor<3xf32>, tensor<3xbf16>
func.func @half_copy(%x: tensor<4x3xbf16> {train.binding = #train.binding<input "x">},
                     %w: tensor<2x3xf32> {train.binding = #train.binding<param "w">},
                     %lr: tensor<f32> {train.binding = #train.binding<hyper "lr">},
                     %wm: tensor<2x3xf32> {train.binding = #train.binding<state "w.momentum_buffer">})
    -> (tensor<f32> {onnx.name = "loss"},
        tensor<2x3xf32> {train.update_of = "w"}, tensor<2x3xf32> {train.update_of = "w.momentum_buffer"})
    attributes {train.entry = "train_step"} {
  %wt = nn.transpose %w {perm = array<i64: 1, 0>} : tensor<2x3xf32> -> tensor<3x2xf32>
  %wh = nn.cast %wt : tensor<3x2xf32> -> tensor<3x2xbf16>
  %y = nn.matmul %x, %wh : tensor<4x3xbf16>, tensor<3x2xbf16> -> tensor<4x2xbf16>
  %yf = nn.cast %y : tensor<4x2xbf16> -> tensor<4x2xf32>
  %loss = nn.reduce_sum %yf {axes = array<i64: 0, 1>, keepdims = false} : tensor<4x2xf32> -> tensor<f32>
  %gw = nn.neg %w : tensor<2x3xf32> -> tensor<2x3xf32>
  %w1:2 = train.sgd %w, %gw, %lr, %wm {momentum = 0.9 : f64}
      : tensor<2x3xf32>, tensor<2x3xf32>, tensor<f32>, tensor<2x3xf32> -> tensor<2x3xf32>, tensor<2x3xf32>
  return %loss, %w1#0, %w1#1 : tensor<f32>, tensor<2x3xf32>, tensor<2x3xf32>
}

// -----

// Another entry (here evaluate) keeps no bf16 block: only the training
// step updates one, so an entry that read it would depend on the step
// having run. It casts the master block to bf16 and gathers that.
// STAGE3-LABEL: func.func @half_copy_evaluate
// STAGE3-SAME: %[[PW:[^:]+]]: tensor<{{[^>]+}}> {{[^%]*}}<param "w">}
// STAGE3-NOT: train.copy_of
// STAGE3: %[[H:.+]] = nn.cast %[[PW]] : tensor<3xf32> -> tensor<3xbf16>
// STAGE3-NEXT: dist.all_gather %[[H]] {dist.use = 0 : i64, world_size = 2 : i64} : tensor<3xbf16> -> tensor<6xbf16>
func.func @half_copy_evaluate(%x: tensor<4x3xbf16> {train.binding = #train.binding<input "x">},
                              %w: tensor<2x3xf32> {train.binding = #train.binding<param "w">})
    -> (tensor<f32> {onnx.name = "loss"})
    attributes {train.entry = "evaluate"} {
  %wt = nn.transpose %w {perm = array<i64: 1, 0>} : tensor<2x3xf32> -> tensor<3x2xf32>
  %wh = nn.cast %wt : tensor<3x2xf32> -> tensor<3x2xbf16>
  %y = nn.matmul %x, %wh : tensor<4x3xbf16>, tensor<3x2xbf16> -> tensor<4x2xbf16>
  %yf = nn.cast %y : tensor<4x2xbf16> -> tensor<4x2xf32>
  %loss = nn.reduce_sum %yf {axes = array<i64: 0, 1>, keepdims = false} : tensor<4x2xf32> -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Stages 1 and 2 under mixed precision: a parameter read only as its bf16
// working copy keeps just this rank's block of its f32 master
// (dist.full_shape), the step gathers the copy in bf16 once, before its
// first reader, and every reader shares it; the update runs on the block
// and the new block is the result, with no f32 all-gather at the end (the
// ZeRO paper's 2 + 2 + 12/N bytes per parameter at stage 1).
// STAGE1-LABEL: func.func @half_master
// STAGE1-SAME: %[[X:[^:]+]]: tensor<4x3xbf16> {{.*}}, %[[PW:[^:]+]]: tensor<3xf32> {dist.full_shape = array<i64: 2, 3>, train.binding = #train.binding<param "w">}
// STAGE1: %[[H:.+]] = nn.cast %[[PW]] : tensor<3xf32> -> tensor<3xbf16>
// STAGE1-NEXT: %[[G:.+]] = dist.all_gather %[[H]] {dist.use = 0 : i64, world_size = 2 : i64} : tensor<3xbf16> -> tensor<6xbf16>
// STAGE1-NEXT: %[[W:.+]] = nn.reshape %[[G]] : tensor<6xbf16> -> tensor<2x3xbf16>
// STAGE1-NEXT: %[[T:.+]] = nn.transpose %[[W]] {perm = array<i64: 1, 0>} : tensor<2x3xbf16> -> tensor<3x2xbf16>
// STAGE1-NEXT: nn.matmul %[[X]], %[[T]]
// STAGE1-NEXT: nn.matmul %[[X]], %[[T]]
// STAGE1-NOT: dist.all_gather
// STAGE1: dist.reduce_scatter %{{.+}} : tensor<6xf32> -> tensor<3xf32>
// STAGE1: %[[NEW:.+]], %{{.+}} = train.sgd %[[PW]],
// STAGE1-NOT: dist.all_gather
// STAGE1: return %{{.+}}, %[[NEW]], %{{.+}} : tensor<f32>, tensor<3xf32>, tensor<3xf32>
// STAGE2-LABEL: func.func @half_master
// STAGE2-SAME: %[[X:[^:]+]]: tensor<4x3xbf16> {{.*}}, %[[PW:[^:]+]]: tensor<3xf32> {dist.full_shape = array<i64: 2, 3>, train.binding = #train.binding<param "w">}
// STAGE2: dist.all_gather %{{.+}} : tensor<3xbf16> -> tensor<6xbf16>
// STAGE2-NOT: dist.all_gather
// STAGE2: return
func.func @half_master(%x: tensor<4x3xbf16> {train.binding = #train.binding<input "x">},
                       %g: tensor<2x3xf32> {train.binding = #train.binding<input "g">},
                       %w: tensor<2x3xf32> {train.binding = #train.binding<param "w">},
                       %lr: tensor<f32> {train.binding = #train.binding<hyper "lr">},
                       %wm: tensor<2x3xf32> {train.binding = #train.binding<state "w.momentum_buffer">})
    -> (tensor<f32> {onnx.name = "loss"},
        tensor<2x3xf32> {train.update_of = "w"}, tensor<2x3xf32> {train.update_of = "w.momentum_buffer"})
    attributes {train.entry = "train_step"} {
  %wt = nn.transpose %w {perm = array<i64: 1, 0>} : tensor<2x3xf32> -> tensor<3x2xf32>
  %wh = nn.cast %wt : tensor<3x2xf32> -> tensor<3x2xbf16>
  %y = nn.matmul %x, %wh : tensor<4x3xbf16>, tensor<3x2xbf16> -> tensor<4x2xbf16>
  %y2 = nn.matmul %x, %wh : tensor<4x3xbf16>, tensor<3x2xbf16> -> tensor<4x2xbf16>
  %ys = nn.add %y, %y2 : tensor<4x2xbf16>, tensor<4x2xbf16> -> tensor<4x2xbf16>
  %yf = nn.cast %ys : tensor<4x2xbf16> -> tensor<4x2xf32>
  %loss = nn.reduce_sum %yf {axes = array<i64: 0, 1>, keepdims = false} : tensor<4x2xf32> -> tensor<f32>
  %w1:2 = train.sgd %w, %g, %lr, %wm {momentum = 0.9 : f64}
      : tensor<2x3xf32>, tensor<2x3xf32>, tensor<f32>, tensor<2x3xf32> -> tensor<2x3xf32>, tensor<2x3xf32>
  return %loss, %w1#0, %w1#1 : tensor<f32>, tensor<2x3xf32>, tensor<2x3xf32>
}

// -----

// Mixed precision: w's gradient is a half one that ztc-autodiff widened
// (marked train.half_gradient_of). The collective reduces it in bf16 (half
// the bytes) and the widening is redone on the result, followed by the
// 1/world-size mean, both marked, so ztc-half-gradients moves them to the
// readers and the reduced bf16 gradient waits for the update. Buckets hold
// one element type, so b's f32 gradient is reduced in a bucket of its own,
// as before.
// STAGE0-LABEL: func.func @half_gradient
// STAGE0-SAME: %[[X:[^:]+]]: tensor<2x4xbf16> {train.binding = #train.binding<input "x">}, %[[PW:[^:]+]]: tensor<4xf32> {train.binding = #train.binding<param "w">}, %[[PB:[^:]+]]: tensor<3xf32>
// STAGE0: %[[GH:.+]] = nn.reduce_sum %[[X]] {{.+}} -> tensor<4xbf16>
// STAGE0-NEXT: %[[SUM:.+]] = dist.all_reduce %[[GH]] {world_size = 2 : i64} : tensor<4xbf16> -> tensor<4xbf16>
// STAGE0-NEXT: %[[WIDE:.+]] = nn.cast %[[SUM]] {train.half_gradient_of = "w"} : tensor<4xbf16> -> tensor<4xf32>
// STAGE0: %[[MEAN:.+]] = nn.mul %[[WIDE]], %{{.+}} {train.half_gradient_of = "w"} : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
// STAGE0-NOT: nn.cast %[[GH]]
// STAGE0: dist.all_reduce %{{.+}} : tensor<3xf32> -> tensor<3xf32>
// STAGE0: train.sgd %[[PW]], %[[MEAN]],
// Stage 2: the bf16 gradient is laid out and reduce-scattered in bf16; this
// rank's block is widened and averaged.
// STAGE2-LABEL: func.func @half_gradient
// STAGE2: %[[MINE:.+]] = dist.reduce_scatter %{{.+}} {world_size = 2 : i64} : tensor<4xbf16> -> tensor<2xbf16>
// STAGE2-NEXT: %[[WIDE:.+]] = nn.cast %[[MINE]] {train.half_gradient_of = "w"} : tensor<2xbf16> -> tensor<2xf32>
// STAGE2: %[[MEAN:.+]] = nn.mul %[[WIDE]], %{{.+}} {train.half_gradient_of = "w"} : tensor<2xf32>, tensor<f32> -> tensor<2xf32>
// STAGE2: train.sgd %{{.+}}, %[[MEAN]],
func.func @half_gradient(%x: tensor<2x4xbf16> {train.binding = #train.binding<input "x">},
                         %w: tensor<4xf32> {train.binding = #train.binding<param "w">},
                         %b: tensor<3xf32> {train.binding = #train.binding<param "b">},
                         %lr: tensor<f32> {train.binding = #train.binding<hyper "lr">},
                         %wm: tensor<4xf32> {train.binding = #train.binding<state "w.momentum_buffer">},
                         %bm: tensor<3xf32> {train.binding = #train.binding<state "b.momentum_buffer">})
    -> (tensor<f32> {onnx.name = "loss"},
        tensor<4xf32> {train.update_of = "w"}, tensor<4xf32> {train.update_of = "w.momentum_buffer"},
        tensor<3xf32> {train.update_of = "b"}, tensor<3xf32> {train.update_of = "b.momentum_buffer"})
    attributes {train.entry = "train_step"} {
  %loss = nn.reduce_sum %b {axes = array<i64: 0>, keepdims = false} : tensor<3xf32> -> tensor<f32>
  %gh = nn.reduce_sum %x {axes = array<i64: 0>, keepdims = false} : tensor<2x4xbf16> -> tensor<4xbf16>
  %gw = nn.cast %gh {train.half_gradient_of = "w"} : tensor<4xbf16> -> tensor<4xf32>
  %gb = nn.neg %b : tensor<3xf32> -> tensor<3xf32>
  %w1:2 = train.sgd %w, %gw, %lr, %wm {momentum = 0.9 : f64}
      : tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<4xf32> -> tensor<4xf32>, tensor<4xf32>
  %b1:2 = train.sgd %b, %gb, %lr, %bm {momentum = 0.9 : f64}
      : tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<3xf32> -> tensor<3xf32>, tensor<3xf32>
  return %loss, %w1#0, %w1#1, %b1#0, %b1#1
      : tensor<f32>, tensor<4xf32>, tensor<4xf32>, tensor<3xf32>, tensor<3xf32>
}
