//===- Passes.td - dist passes -----------------------------*- tablegen -*-===//
//
// Data parallelism and ZeRO in nn, and the collectives' streams in kernel.
// Included by passes/Passes.td, in the order the training pipeline runs
// them.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_PASSES_DIST_PASSES_TD
#define ZTC_PASSES_DIST_PASSES_TD

include "mlir/Pass/PassBase.td"

def ZeroPass : Pass<"ztc-zero", "func::FuncOp"> {
  let summary = "Data parallelism and ZeRO sharding with dist collectives";
  let description = [{
    Runs on the training step (`train.entry = "train_step"`; at stage 3 on
    every entry; after
    `ztc-optimizer`, before `ztc-lower-train`) of a program every one of
    `world-size` ranks runs on its own micro-batch; other entries are left
    alone (`@accumulate` sums local gradients, so a step with accumulation
    reduces once per optimizer step). Gradients are grouped, in the order
    the backward completes them, into buckets of one element type and at
    most `reduce-bucket-bytes` (one tensor larger than that is a bucket
    alone); each bucket's collective is placed right after its last
    gradient. Under mixed precision a gradient `ztc-autodiff` widened from
    half precision (the ops marked `train.half_gradient_of`) is reduced in
    half, before the widening and fp16's unscaling, which are redone on the
    result with the mean, still marked, so that `ztc-half-gradients` moves
    them to the readers and the reduced half gradient waits for the update.

    - Stage 0 (data parallelism): each bucket is flattened, all-reduced and
      scaled by 1/world-size, the mean gradient of the global batch, and the
      updates stay as they were. The new values of BatchNorm's running
      statistics (`buffer`s) are averaged the same way, so every rank keeps
      the same buffers.
    - Stages 1 and 2: each bucket is flattened and padded to a multiple of
      world-size elements; rank r owns block r of every bucket, which a
      reduce-scatter hands it. Stage 2 reduce-scatters each bucket right
      after its last gradient, so whole gradients are freed as the backward
      goes; stage 1 keeps them all until the backward is done and
      reduce-scatters where the update starts.
      One `train.sgd` or `train.adam` updates this rank's blocks of the
      parameters, whose optimizer states are now flat shards
      (`zero.exp_avg`, `zero.exp_avg_sq`, `zero.momentum_buffer`: one block
      per bucket, in bucket order). Global-norm clipping sums squares over
      the shard and all-reduces the sum. Each bucket's updated block is
      all-gathered and every parameter is written back whole.

    - Stage 3: every entry holds each parameter of at least
      `param-persistence-threshold` elements as this rank's block
      (`dist.full_shape` on the argument) and gathers it right before each
      use, forward, backward and recomputed alike, so a whole parameter
      lives only as long as its use. Under mixed precision a use of the
      parameter's half working copy (its cast to bf16 or f16, perhaps after
      a transpose or reshape) casts the block and gathers it in half, half
      the bytes, then lays it out. The step reduce-scatters each such
      gradient's block (bucketed: gradients padded to [world-size, block]
      and joined along the blocks), keeps the optimizer states as blocks
      and updates blocks; the parameter is never gathered back. Smaller
      parameters stay whole and are updated as in stage 0.

    Every update op of the step must have the same kind and hyperparameters
    (the optimizer pass makes them so) for stages 1 and 2.
  }];
  let options = [
    Option<"stage", "stage", "::mlir::ztc::ZeroStage",
           /*default=*/"::mlir::ztc::ZeroStage::DataParallel",
           "ZeRO stage: 0 (data parallel), 1 (optimizer states sharded), "
           "2 (and gradients), 3 (and parameters)",
           "::mlir::ztc::closedSet(::mlir::ztc::kZeroStages)">,
    Option<"worldSize", "world-size", "int64_t", /*default=*/"1",
           "Ranks the step runs on">,
    Option<"reduceBucketBytes", "reduce-bucket-bytes", "int64_t",
           /*default=*/"26214400",
           "Gradient bytes per reduction bucket (default 25 MiB)">,
    Option<"reduceBucketElements", "reduce-bucket-elements", "int64_t",
           /*default=*/"0",
           "When positive: gradient elements per reduction bucket instead "
           "of bytes (DeepSpeed's reduce_bucket_size)">,
    Option<"commDtype", "comm-dtype", "::mlir::ztc::CommType",
           /*default=*/"::mlir::ztc::CommType::Auto",
           "Element type gradients are reduced in: fp32, fp16 or bf16, or "
           "auto (the gradients' own); sums accumulate in fp32",
           "::mlir::ztc::closedSet(::mlir::ztc::kCommTypes)">,
    Option<"paramPersistenceThreshold", "param-persistence-threshold",
           "int64_t", /*default=*/"100000",
           "Stage 3: parameters with fewer elements stay whole on every "
           "rank">,
    Option<"shardAlignment", "shard-alignment", "int64_t", /*default=*/"1",
           "Each rank's block of a sharded tensor is a multiple of this many "
           "elements (256 under adam8bit and adamw8bit, so that no block of "
           "an 8-bit state spans two ranks)">,
  ];
  let dependentDialects = ["::mlir::ztc::dist::DistDialect",
                           "::mlir::ztc::nn::NNDialect",
                           "::mlir::arith::ArithDialect"];
}

def ScheduleCollectivesPass : Pass<"ztc-schedule-collectives",
                                   "func::FuncOp"> {
  let summary = "Run collectives on a second stream, overlapping compute";
  let description = [{
    Runs after fusion and before memory planning, on steps with
    collectives (a `kernel.collective` that communicates: all_reduce,
    reduce_scatter, all_gather; a shard is compute like any kernel).

    1. Prefetch (`prefetch-bytes`): a parameter all-gather whose input the
       step computes from its arguments alone (ZeRO stage 3's gather of a
       block, of its persistent half block, or of the block's half cast)
       moves up, with the ops that compute its input and its buffer, to
       right before the first reader of an earlier gather, as far as the
       gathers issued but not yet read stay within `prefetch-bytes` (with
       it, the moved gather). Gathers stay in program order, so every rank
       issues the same sequence. A gather
       never moves above an op that writes a buffer its input reads, and
       never so far that the bytes of gathered buffers alive at some op
       would exceed `max-live-bytes`. `prefetch-elements` and
       `max-live-elements`, when positive, count elements instead
       (DeepSpeed's stage3_prefetch_bucket_size and
       stage3_max_live_parameters).
    2. Buckets (`allgather-bucket-bytes`): consecutive such gathers of one
       element type (after prefetching) join into one all-gather of at most
       that many gathered bytes, issued where the first was: each block is
       copied into the bucket's input, and each parameter's rows are sliced
       out of the gathered bucket right before the first op that reads it.
       The bytes moved are the same, the collectives fewer. The live bound
       holds here too.
    3. Streams: a collective is needed by the first op that reads or
       writes its result, writes its input, or returns; a gradient
       reduction also by the next reduction, so at most two reduction
       buckets are alive at once (double buffering). When compute lies
       between a collective and that op, the collective runs on stream 1
       (`kernel.stream = 1`), after a `kernel.wait` for a signal of stream
       0 right before it (so its input is complete), followed by a signal
       of its own that stream 0 waits for right before the op that needs
       it. Otherwise it stays on stream 0 (a second stream would only add
       hand-overs), after stream 0 waits for stream 1's last collective:
       collectives run one at a time, in the order every rank issues them.
       The memory planner keeps every buffer a stream may still touch.

    On CUDA stream 1 is a second cudaStream_t; on the CPU a thread of the
    runtime runs it, so a rank computes its next gradients while the last
    bucket is reduced.
  }];
  let options = [
    Option<"prefetchBytes", "prefetch-bytes", "int64_t", /*default=*/"0",
           "Gathered bytes issued ahead of their readers (0: none)">,
    Option<"prefetchElements", "prefetch-elements", "int64_t",
           /*default=*/"0",
           "When positive: gathered elements issued ahead, instead of "
           "bytes">,
    Option<"maxLiveBytes", "max-live-bytes", "int64_t", /*default=*/"0",
           "Bound on the gathered bytes alive at once that prefetching may "
           "reach (0: no bound)">,
    Option<"maxLiveElements", "max-live-elements", "int64_t",
           /*default=*/"0",
           "When positive: the bound in elements, instead of bytes">,
    Option<"bucketBytes", "allgather-bucket-bytes", "int64_t",
           /*default=*/"0",
           "Parameter gathers joined into one collective up to this many "
           "gathered bytes (0: each on its own)">,
    Option<"bucketElements", "allgather-bucket-elements", "int64_t",
           /*default=*/"0",
           "When positive: the bucket size in elements, instead of bytes">,
  ];
}

#endif // ZTC_PASSES_DIST_PASSES_TD
