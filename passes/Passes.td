//===- Passes.td - every ztc pass --------------------------*- tablegen -*-===//
//
// The records of all ztc passes, grouped by stage of the flow in
// docs/architecture.md. Each pass has one .cpp and one lit file named after
// its flag.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_PASSES_PASSES_TD
#define ZTC_PASSES_PASSES_TD

include "mlir/Pass/PassBase.td"

//===----------------------------------------------------------------------===//
// Conversions
//===----------------------------------------------------------------------===//

def ConvertOnnxToNNPass : Pass<"ztc-convert-onnx-to-nn", "func::FuncOp"> {
  let summary = "Give imported ONNX nodes their meaning as typed nn ops";
  let description = [{
    1. Resolves every `onnx.node` to its operator's since-version (from the
       model opset and the ONNX operator history) and finds the converter
       registered for that (op type, since-version). Every node without one
       is listed in a single error, grouped by op type.
    2. Converts nodes in graph order. Operands are already `nn` values with
       static shapes, so each converter computes exact types; shape
       subgraphs (Shape, Gather, Concat, ...) fold to constants as they are
       built. A training-mode Dropout draws its mask with
       `nn.random_uniform` from the function's random key, an argument
       `rng` (rank-0 i64, bound as a `hyper`) added on first use.
    3. Rewrites the function type to the inferred result types.

    Example:

    ```mlir
    %0 = onnx.node "Relu"(%x) {opset = 17 : i64}
           : (tensor<8x64xf32>) -> none
    // becomes
    %0 = nn.relu %x : tensor<8x64xf32>
    ```
  }];
  let dependentDialects = ["::mlir::ztc::nn::NNDialect",
                           "::mlir::ztc::train::TrainDialect",
                           "::mlir::arith::ArithDialect"];
}

def ConvertNNToKernelPass : Pass<"ztc-convert-nn-to-kernel", "func::FuncOp"> {
  let summary = "Bufferize a step: nn ops become kernels on arena buffers";
  let description = [{
    1. Function arguments (inputs, parameters) become memref buffers.
    2. Every `nn` op writes a new `kernel.alloc`: elementwise ops become a
       one-op `kernel.elementwise` whose body is the op's scalar formula,
       structured ops a `kernel.call` into the runtime library (the op's
       attributes are its config), concat one `copy_into` call per input,
       `dist` collectives a `kernel.collective` of their kind.
    3. Reshapes become `kernel.view` (no copy); tensor constants become
       `kernel.constant`; `train.record_loss` becomes `kernel.record_loss`
       of the loss's buffer.
    4. Returned values that are not arena buffers (inputs, parameters,
       constants) are copied into one, so outputs are read at arena offsets.
    5. Records on the function `kernel.tensor_bytes`, the bytes of every
       intermediate nn value as its own buffer: the baseline the memory
       plan is measured against.
    6. The scalar ops of an op `ztc-autodiff` made (its location tagged
       `train.gradient`) are marked `kernel.unrounded`: the emitter leaves
       their half-precision results in float, so a fused gradient formula
       rounds only where it stores or casts. A forward op's results round
       as the op alone would, so recomputing it gives the saved bits.

    Example:

    ```mlir
    %0 = nn.relu %x : tensor<8xf32> -> tensor<8xf32>
    // becomes
    %0 = kernel.alloc : memref<8xf32>
    kernel.elementwise ins(%x : memref<8xf32>) outs(%0 : memref<8xf32>) {
    ^bb0(%a: f32):
      %c0 = arith.constant 0.0 : f32
      %r = arith.maximumf %a, %c0 : f32
      kernel.yield %r : f32
    }
    ```
  }];
  let dependentDialects = ["::mlir::ztc::kernel::KernelDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect"];
}

//===----------------------------------------------------------------------===//
// Kernel-level transforms
//===----------------------------------------------------------------------===//

def FoldTransposesPass : Pass<"ztc-fold-transposes", "func::FuncOp"> {
  let summary = "Let matmul read transposed operands in place";
  let description = [{
    A `kernel.call "transpose"` that swaps only the last two dimensions and
    whose result only matmuls read (weights in a backward step: dx = dy W^T;
    keys in attention: q k^T) is removed: each matmul reads the transpose's
    input instead, with `transpose_a` or `transpose_b` set in its config, and
    the runtime's GEMM reads the operand as stored. Nothing is folded when
    another kernel writes the input between the transpose and a matmul (an
    in-place parameter update), so every matmul still reads what the
    transpose would have copied. The copy and its arena buffer go. A matmul
    that already reads the result transposed reads the input as stored (a
    weight transposed for the forward product and back for the backward
    one: both copies go).

    A transpose whose input is a matmul's product that nothing else reads
    (a weight gradient x^T dy transposed into the weight's layout) goes
    too: the matmul writes the transposed product, (A B)^T = B^T A^T, into
    the transpose's buffer, its operands swapped and their flags flipped.
    The pass repeats until nothing folds.

    Example:

    ```mlir
    %t = kernel.alloc : memref<64x32xf32>
    kernel.call "transpose" ins(%w : memref<32x64xf32>) outs(%t : memref<64x32xf32>)
        {config = {perm = array<i64: 1, 0>}}
    kernel.call "matmul" ins(%dy, %t : memref<8x64xf32>, memref<64x32xf32>)
        outs(%dx : memref<8x32xf32>) {config = {}}
    // becomes
    kernel.call "matmul" ins(%dy, %w : memref<8x64xf32>, memref<32x64xf32>)
        outs(%dx : memref<8x32xf32>) {config = {transpose_b = true}}
    ```
  }];
}

def FusePass : Pass<"ztc-fuse", "func::FuncOp"> {
  let summary = "Fuse chains of elementwise kernels, and their reductions, into one loop";
  let description = [{
    1. Visits kernel.elementwise ops once, in program order. A producer
       fuses into a consumer when the producer's output is an alloc that
       only the producer writes and only that consumer reads, both iterate
       over the same shape (so no element is computed twice), and no op
       between them writes what the producer reads (an in-place update of
       an argument it read would otherwise be read fused).
    2. Fusing moves the producer's body into a new kernel, followed by the
       consumer's ops reading the producer's value in place of the
       consumer's scalar argument; the consumer's other inputs come first
       (those the producer already reads reuse its argument), then the
       producer's. The producer, consumer and buffer are erased.
       Nothing is cloned, so a chain of n kernels fuses in time linear in
       n.
    3. Multi-output fusion: a producer whose output is a step argument the
       consumer reads whole (an optimizer state written in place) moves
       into the consumer, which then writes that argument too, when no op
       between them reads what the producer writes or writes what it
       reads or writes. A producer with several outputs fuses as in 1
       under the same check. AdamW's moment updates thus run inside the
       parameter's update: one loop over the four buffers.
    4. The fused kernel absorbs fusible producers until none is left (a
       fusion may expose the producer's own producers); producers come
       before their consumers, so one pass finds every fusion. Locations
       merge so every fused kernel still names the ONNX nodes it computes.
    5. Then reductions: a float `reduce_sum` or `reduce_mean` call and the
       single-output elementwise kernel whose output only it reads become
       one `kernel.reduce` with the kernel's body, when the kernel can run
       where the call is (as in 3), reads nothing the call writes, and
       the space groups as [reduced, kept, reduced] with every input
       broadcast over whole groups (the emitter's loops). BatchNorm's
       variance then reads its input and mean instead of stored squares,
       and its gradient's sums read dy and the normalized input.

    Example: `relu(add(a, b))` becomes one kernel whose body adds and takes
    the maximum with zero, and the buffer of the sum disappears.
  }];
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

def PlanMemoryPass : Pass<"ztc-plan-memory", "func::FuncOp"> {
  let summary = "Place every arena buffer at a byte offset";
  let description = [{
    1. Numbers the ops of the step and computes each alloc's live range:
       from the alloc to the last op that uses it or a view of it; returned
       buffers live to the end. With several streams (`kernel.stream`), a
       use ends only where every stream that runs later work is ordered
       after it: at the latest of the first covering waits (a
       `kernel.wait` on that stream for a `kernel.signal` on the user's
       stream after the use), or at the end when a stream has none. A step
       whose stream other than 0 is not waited for by stream 0 before the
       end is an error (the next call would race with it).
    2. Places buffers largest first, each at the lowest aligned offset whose
       bytes no already-placed buffer with an overlapping live range uses
       (best-fit offset assignment).
    3. Records `offset` on every alloc, and on the function
       `kernel.arena_bytes` (the peak: the highest end of a buffer, the
       exact size the runtime allocates and, once every entry ran, its
       measured high-water mark) and `kernel.unplanned_bytes` (the sum of
       all buffer sizes, each rounded up to the alignment, for comparison).
  }];
  let options = [
    Option<"alignment", "alignment", "int64_t", /*default=*/"256",
           "Byte alignment of every buffer (256 suits CUDA and AVX-512)">,
  ];
}

//===----------------------------------------------------------------------===//
// Loss
//===----------------------------------------------------------------------===//

def AttachLossPass : Pass<"ztc-attach-loss", "func::FuncOp"> {
  let summary = "Turn the model's function into one returning a scalar loss";
  let description = [{
    1. Picks the model output the loss reads (`loss-input`, an ONNX output
       name; default: the first output).
    2. `cross_entropy`: adds an integer labels argument (`labels`, after the
       graph inputs, shaped like the output without its last dimension),
       flattens the output to [rows, classes], and returns the mean of
       -log_softmax at the label over rows whose label is not
       `ignore-index`, exactly as torch.nn.functional.cross_entropy, and
       records the class count on the function (`train.classes`).
       `mse`: adds a labels argument shaped like the output and returns the
       mean squared error. `none`: the output itself is the loss and must be
       a scalar float.
    3. `token-weighted` (cross_entropy only): the mean is multiplied by a
       scalar hyper `loss_weight` the trainer writes before each call: the
       call's share of the optimizer step's real tokens (labels that are
       not `ignore-index`, over every micro-batch and rank) times the
       calls that average into the step, so that the step's gradient is
       that of the mean over all its real tokens (the Hugging Face
       Trainer's normalization since transformers 4.46).
    4. The function then returns the loss (tagged `onnx.name = "loss"`)
       and the state updates (results tagged `train.update_of`, such as
       training-mode running statistics); the other outputs are dropped, so
       their computation dies.

    Example: `(x, W) -> logits` becomes `(x, labels, W) -> loss`.
  }];
  let options = [
    Option<"loss", "loss", "::mlir::ztc::LossKind",
           /*default=*/"::mlir::ztc::LossKind::Auto",
           "cross_entropy, mse, none, or auto (none for a model returning "
           "one scalar float; an error otherwise, naming the choices)",
           "::mlir::ztc::closedSet(::mlir::ztc::kLossKinds)">,
    Option<"lossInput", "loss-input", "std::string", /*default=*/"\"\"",
           "The ONNX output the loss reads (default: the first)">,
    Option<"labels", "labels", "std::string", /*default=*/"\"labels\"",
           "Name of the labels input the loss adds">,
    Option<"ignoreIndex", "ignore-index", "int64_t", /*default=*/"-100",
           "Label value that contributes nothing (cross_entropy)">,
    Option<"tokenWeighted", "token-weighted", "bool", /*default=*/"false",
           "cross_entropy: weight the loss by a `loss_weight` hyper (each "
           "call's share of the optimizer step's real tokens)">,
  ];
  let dependentDialects = ["::mlir::ztc::nn::NNDialect",
                           "::mlir::ztc::train::TrainDialect",
                           "::mlir::arith::ArithDialect"];
}

//===----------------------------------------------------------------------===//
// Optimizer
//===----------------------------------------------------------------------===//

def OptimizerPass : Pass<"ztc-optimizer", "func::FuncOp"> {
  let summary = "Append the optimizer update to a loss-and-gradients function";
  let description = [{
    Input: a function returning the scalar loss followed by gradients, each
    result tagged `train.grad_of = "<parameter name>"` (what ztc-autodiff
    produces). Output: the training step, written with `train` ops. In a
    module of entries (`ztc-build-entries`) only `train.entry =
    "train_step"` is updated; the other entries keep their gradients.

    1. Adds the hyperparameter arguments `lr` and `step` (rank-0 f32, the
       1-based optimizer step; bound as `hyper`s), written by the runtime
       before every call, so learning-rate schedules cost no recompilation.
    2. Clips gradients by their global L2 norm when `clip-grad-norm` > 0:
       one `train.clip_by_global_norm` over every gradient.
    3. Per parameter, adds its state arguments (bound as `state`s, named
       `<param>.momentum_buffer`, `<param>.exp_avg`, `<param>.exp_avg_sq`,
       zero-initialized by the runtime) and one `train.sgd` or `train.adam`
       (AdamW: `decoupled`) with PyTorch's defaults: weight decay 0.01 for
       AdamW, 0 otherwise. `adam8bit` and `adamw8bit` (bitsandbytes'
       Adam8bit and AdamW8bit; the Hugging Face Trainer's `adamw_bnb_8bit`
       and `adamw_8bit` name the latter) give each float32 parameter of at
       least 4096 elements 8-bit moments: `<param>.exp_avg` and
       `<param>.exp_avg_sq` as one i8 code per element, and
       `<param>.exp_avg_absmax` and `<param>.exp_avg_sq_absmax`, one f32
       scale per 256 elements, updated by one `train.adam8bit`; smaller
       parameters keep f32 moments and `train.adam`, with decoupled weight
       decay as bitsandbytes applies it in both optimizers.
    4. Returns the loss, then the new value of every updated parameter and
       state, tagged `train.update_of = "<argument name>"`; bufferization
       writes them into the argument's own buffer (an in-place update).
       Results already tagged `train.update_of` (gradient accumulators,
       BatchNorm running statistics) pass through after them.

    Example (SGD, no momentum):

    ```mlir
    func.func @step(%w: tensor<4xf32> {train.binding = #train.binding<param "w">})
        -> (tensor<f32>, tensor<4xf32> {train.grad_of = "w"})
    // becomes
    func.func @step(%w: ..., %lr: tensor<f32> {train.binding = #train.binding<hyper "lr">},
                    %step: tensor<f32> {train.binding = #train.binding<hyper "step">})
        -> (tensor<f32> {onnx.name = "loss"},
            tensor<4xf32> {train.update_of = "w"}) {
      %new = train.sgd %w, %g, %lr
          : tensor<4xf32>, tensor<4xf32>, tensor<f32> -> tensor<4xf32>
      ...
    ```
  }];
  let options = [
    Option<"optimizer", "optimizer", "::mlir::ztc::OptimizerKind",
           /*default=*/"::mlir::ztc::OptimizerKind::Adamw",
           "sgd, adam, adamw, adam8bit or adamw8bit (bitsandbytes' 8-bit "
           "states; also adamw_bnb_8bit and adamw_8bit)",
           "::mlir::ztc::closedSet(::mlir::ztc::kOptimizerKinds)">,
    Option<"momentum", "momentum", "double", /*default=*/"0.0",
           "SGD momentum">,
    Option<"nesterov", "nesterov", "bool", /*default=*/"false",
           "SGD with Nesterov momentum">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"-1.0",
           "Weight decay (negative: the optimizer's default, 0.01 for "
           "adamw and adamw8bit, 0 otherwise)">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9", "Adam beta1">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999", "Adam beta2">,
    Option<"eps", "eps", "double", /*default=*/"1e-8", "Adam epsilon">,
    Option<"clipGradNorm", "clip-grad-norm", "double", /*default=*/"0.0",
           "Clip gradients to this global L2 norm (0: no clipping)">,
  ];
  let dependentDialects = ["::mlir::ztc::train::TrainDialect"];
}

//===----------------------------------------------------------------------===//
// ZeRO
//===----------------------------------------------------------------------===//

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

def CheckFinitePass : Pass<"ztc-check-finite", "func::FuncOp"> {
  let summary = "Mark every op with a float result for a finite check";
  let description = [{
    `--check-finite`: runs on the nn entries after `ztc-lower-train`, so
    the optimizer's arithmetic is checked too. Every `nn` or `dist` op with
    a float tensor result (a reshape excepted: it is a view) gets
    `train.finite_check = {node, op, pass}`: the first ONNX node its
    location names ("" for ztc's own arithmetic: the optimizer, ZeRO, the
    loss scale), the op's name without `nn.`, and `forward` (the loss
    depends on it; every op of a forward entry), `recomputed forward`
    (a clone `ztc-recompute` placed in the backward), `update` (ztc's own
    arithmetic after the loss) or `backward`. `ztc-convert-nn-to-kernel`
    places a `kernel.check_finite` of the result right after the op's
    kernels; at run time the first check that finds a NaN or an infinity
    is noted in the training state, and the trainer names it.
  }];
}

def LossScalePass : Pass<"ztc-loss-scale", "func::FuncOp"> {
  let summary = "Dynamic loss scaling: finite check, skipped steps, scale rule";
  let description = [{
    Runs on the training step (`train.entry = "train_step"`) when it has
    the `loss_scale` state `ztc-autodiff` adds for dynamic scaling (`loss-
    scale` 0); after `ztc-zero`, before `ztc-lower-train`, so it sees the
    gradients (or gradient shards) the updates read. Everything happens on
    the device: the trainer reads the states only when it logs.

    1. The finite check (DeepSpeed's): the sum of every gradient the
       `train.sgd`/`train.adam` updates read, in f32; with ZeRO stages 1-3
       the shard sums are all-reduced, so every rank decides alike. The
       step applies when the total minus itself is 0 (not inf or NaN) and
       the scale has not failed.
    2. A skipped step keeps everything the updates would write: each
       result becomes `nn.where(apply, new, old)`. Adam's step count is the
       state `optimizer.step`, advanced only by applied steps.
    3. DeepSpeed's `DynamicLossScaler.update_scale` on the states
       `loss_scale`, `loss_scale.good_steps` (finite steps since the last
       overflow or growth), `loss_scale.hysteresis_used` (overflows forgiven
       since the hysteresis was restored), `loss_scale.skipped_steps` and
       `loss_scale.failed_at`. An overflow with hysteresis left spends one;
       else it halves the scale, not below `min-loss-scale`; an overflow
       with the scale already at the minimum records the `step` hyper in
       `failed_at`, after which nothing changes and the trainer stops.
       `loss-scale-window` consecutive finite steps double the scale and
       restore the hysteresis; with `consecutive-hysteresis` every finite
       step restores it.
  }];
  let options = [
    Option<"window", "loss-scale-window", "int64_t", /*default=*/"1000",
           "Finite steps before the scale doubles">,
    Option<"hysteresis", "hysteresis", "int64_t", /*default=*/"2",
           "Overflows tolerated before the scale halves">,
    Option<"consecutiveHysteresis", "consecutive-hysteresis", "bool",
           /*default=*/"false",
           "Restore the hysteresis after every finite step">,
    Option<"minScale", "min-loss-scale", "double", /*default=*/"1.0",
           "The scale never goes below this; an overflow there fails">,
  ];
  let dependentDialects = ["::mlir::ztc::nn::NNDialect",
                           "::mlir::ztc::dist::DistDialect",
                           "::mlir::arith::ArithDialect"];
}

def ChannelsLastPass : Pass<"ztc-channels-last", "func::FuncOp"> {
  let summary = "Store the activations of f32 convolutions NHWC";
  let description = [{
    ONNX convolutions are NCHW; oneDNN's fast f32 convolutions want their
    channels innermost (blocked or NHWC), and reordering every input and
    output into and out of that layout was a quarter of a small CNN's step
    on the CPU. Runs on the training step's nn ops, after
    `ztc-lower-train` and `ztc-half-gradients`.

    1. Every f32 `nn.conv2d`, `nn.conv2d_backward_data` and
       `nn.conv2d_backward_filter` gets `channels_last`: its activations
       (input, output, output gradient, input gradient) are NHWC, read
       through an NCHW-to-NHWC transpose and written through the inverse.
       Weights stay [O, C / group, kH, kW].
    2. An NHWC-to-NCHW transpose moves past an elementwise op that reads
       it when the op's other operands cost no large transpose (another
       such transpose, a single element, a broadcast operand at most an
       eighth of the result, or a broadcast_to of one): the op is rebuilt
       on NHWC values. It moves past a reduction too, whose axes follow
       (BatchNorm's statistics and gradient sums over N, H, W become sums
       over the NHWC N, H, W). An NCHW-to-NHWC transpose of its inverse's
       result is that value. Repeated until nothing moves.
    3. Transposes, reshapes and broadcasts nothing reads go.

    Between convolutions a BatchNorm, ReLU and residual add thus run on
    NHWC data with no transpose left; what remains transposes the input
    image and the pooled features (small). Other element types keep NCHW
    (the CUDA target too: `ztc compile --target cuda` turns it off).

    Example:

    ```mlir
    %y = nn.conv2d %x, %w ... : tensor<8x3x32x32xf32>, ... -> tensor<8x16x32x32xf32>
    %r = nn.relu %y
    // becomes
    %t = nn.transpose %x {perm = array<i64: 0, 2, 3, 1>}
    %y = nn.conv2d %t, %w {channels_last, ...} -> tensor<8x32x32x16xf32>
    %r = nn.relu %y : tensor<8x32x32x16xf32>
    %n = nn.transpose %r {perm = array<i64: 0, 3, 1, 2>}
    ```
  }];
}

def HalfGradientsPass : Pass<"ztc-half-gradients", "func::FuncOp"> {
  let summary = "Keep half-precision gradients in half until their readers";
  let description = [{
    Mixed precision: the backward computes the gradient of a parameter
    that the forward reads in bf16 or f16 in that half type, and
    `ztc-autodiff` widens it to the f32 master's type (fp16: and unscales
    it) as soon as it is complete, marking those ops
    `train.half_gradient_of`. Left there, every f32 gradient would be live
    from the backward to the optimizer: 4 bytes per parameter where the
    half gradient needs 2.

    Runs after `ztc-lower-train`, when the optimizer, the clip, the loss
    scale's finite check and ZeRO's collectives are all plain readers. Each
    marked op (a chain, latest first) is cloned right before each op that
    reads it and then erased, so the half gradient is what waits, and each
    f32 copy lives only for its reader (and fuses into it where the reader
    is elementwise). The values are unchanged, bit for bit. The parameters
    whose gradients stay half are listed in the function attribute
    `train.half_gradients`, which the memory report counts at 2 bytes.

    Example:

    ```mlir
    %g = nn.cast %gh {train.half_gradient_of = "w"}
        : tensor<4xbf16> -> tensor<4xf32>
    ... the rest of the backward ...
    %m = nn.add %m0, %g ...
    %v = nn.mul %g, %g ...
    // becomes
    ... the rest of the backward ...
    %g0 = nn.cast %gh : tensor<4xbf16> -> tensor<4xf32>
    %m = nn.add %m0, %g0 ...
    %g1 = nn.cast %gh : tensor<4xbf16> -> tensor<4xf32>
    %v = nn.mul %g1, %g1 ...
    ```
  }];
}

def LowerTrainPass : Pass<"ztc-lower-train", "func::FuncOp"> {
  let summary = "Expand train ops into nn arithmetic";
  let description = [{
    Rewrites `train.sgd`, `train.adam` and `train.clip_by_global_norm` into
    elementwise `nn` ops and reductions with the formulas of torch.optim's
    single-tensor implementations (see each op), so that the update fuses
    and bufferizes like the rest of the step. Scalars are f32 constants.
    Runs first in the lowering to kernels; passes that need whole updates
    (ZeRO sharding, loss scaling) run before it.

    Example:

    ```mlir
    %new = train.sgd %w, %g, %lr
        : tensor<4xf32>, tensor<4xf32>, tensor<f32> -> tensor<4xf32>
    // becomes
    %0 = nn.mul %g, %lr : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
    %new = nn.sub %w, %0 : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
    ```
  }];
  let dependentDialects = ["::mlir::ztc::nn::NNDialect",
                           "::mlir::arith::ArithDialect"];
}

//===----------------------------------------------------------------------===//
// Training
//===----------------------------------------------------------------------===//

def LoraPass : Pass<"ztc-lora", "func::FuncOp"> {
  let summary = "Add low-rank adapters (LoRA) to matrix products; freeze the "
                "rest";
  let description = [{
    Parameter-efficient fine-tuning as Hugging Face `peft` does it with a
    `LoraConfig`, on a function of `nn` ops before its loss and gradients.

    1. A module is a `param`'s binding name without its last `.weight`
       (`model.layers.0.self_attn.q_proj` for
       `model.layers.0.self_attn.q_proj.weight`). A param is a target when
       `targets` matches its module's whole name or a tail of it that
       starts after a `.` (`q_proj|v_proj` matches every `...q_proj`, as
       `peft`'s list of module names does); a `targets` starting with `^`
       must match the whole name (`peft`'s regular-expression form).
    2. Each target must be the weight of a matrix product: a rank-2 float
       param read as `nn.matmul %x, %W` (W is [in, out], GPT-2's Conv1D) or
       as `nn.matmul %x, (nn.transpose %W {perm = [1, 0]})` (W is
       [out, in], a Linear); other uses keep W alone. A target that no
       matrix product reads is an error naming it; so is a `targets` that
       matches nothing.
    3. For each target, two new float params: `<module>.lora_A.weight`
       ([r, in], from uniform values in [-1/sqrt(in), 1/sqrt(in)], which
       is `peft`'s Kaiming-uniform with a = sqrt(5)) and
       `<module>.lora_B.weight` ([out, r], zeros), both tagged
       `train.initial_uniform` with a seed from `seed` and the name.
       Every matrix product y = x W becomes
       y + s * ((dropout(x) A^T) B^T), with s = alpha / r (alpha / sqrt(r)
       with `rslora`). With `dropout` p > 0, dropout(x) is training-mode
       dropout (the function's `rng` key, a stream per module); the
       evaluate entry drops nothing.
    4. Freezes every other float param (`train.frozen`, which
       ztc-autodiff honours), but: with `bias` = `all` every param whose
       name contains `bias`, with `lora_only` each target module's
       `<module>.bias`; and every param of a module that
       `modules-to-save` matches (as `targets` does).
    5. Records the adapters on the function, for the manifest and
       `ztc export --adapter`: `train.lora = {r, alpha, scale, dropout,
       rslora, bias, adapters = [[base, A, B, layout], ...]}` with layout
       `out_in` or `in_out`.
    6. With `base-dtype` = `nf4` (QLoRA), tags every frozen rank-2 float
       param that only matrix products read (as step 2 finds them) with
       `train.nf4 = array<i64: rows, cols>`, for `ztc-nf4-weights` to hold
       in 4 bits after the gradients are built; but the output layer's (a
       product whose result reaches the function's results through
       reshapes, transposes and additions alone), which stays as it is, as
       Hugging Face's 4-bit loading keeps `lm_head`.

    Example (r = 2, alpha = 4, targets = `q`):

    ```mlir
    %t = nn.transpose %W {perm = array<i64: 1, 0>}
    %y = nn.matmul %x, %t      // x: [4, 8], W: [16, 8] (out, in)
    // becomes
    %y  = nn.matmul %x, %t
    %xa = nn.matmul %x, (nn.transpose %A)        // A: [2, 8]
    %xb = nn.matmul %xa, (nn.transpose %B)       // B: [16, 2]
    %y2 = nn.add %y, (nn.mul %xb, 2.0)
    ```
  }];
  let options = [
    Option<"rank", "r", "int64_t", /*default=*/"8",
           "The adapters' rank (peft's r)">,
    Option<"alpha", "alpha", "double", /*default=*/"8.0",
           "Scale numerator (peft's lora_alpha): the update is scaled by "
           "alpha / r">,
    Option<"dropout", "dropout", "double", /*default=*/"0.0",
           "Dropout probability on the adapters' input, in [0, 1)">,
    Option<"targets", "targets", "std::string", /*default=*/"\"\"",
           "Modules to adapt: an extended regular expression matched "
           "against a module's name or a tail of it after a '.' ('^' "
           "first: the whole name only)">,
    Option<"rslora", "rslora", "bool", /*default=*/"false",
           "Scale by alpha / sqrt(r) (rank-stabilized LoRA)">,
    Option<"bias", "bias", "::mlir::ztc::LoraBias",
           /*default=*/"::mlir::ztc::LoraBias::None",
           "Biases that train: none, all, or lora_only",
           "::mlir::ztc::closedSet(::mlir::ztc::kLoraBiases)">,
    Option<"modulesToSave", "modules-to-save", "std::string",
           /*default=*/"\"\"",
           "Modules trained whole (peft's modules_to_save), matched as "
           "targets are">,
    Option<"seed", "seed", "int64_t", /*default=*/"0",
           "Seed of the lora_A initial values">,
    Option<"baseDtype", "base-dtype", "::mlir::ztc::BaseType",
           /*default=*/"::mlir::ztc::BaseType::Model",
           "nf4: mark the frozen base weights of the matrix products for "
           "ztc-nf4-weights (QLoRA); model: as the model has them",
           "::mlir::ztc::closedSet(::mlir::ztc::kBaseTypes)">,
  ];
  let dependentDialects = ["::mlir::ztc::nn::NNDialect",
                           "::mlir::ztc::train::TrainDialect",
                           "::mlir::arith::ArithDialect"];
}

def Nf4WeightsPass : Pass<"ztc-nf4-weights", "func::FuncOp"> {
  let summary = "Hold tagged frozen weights in 4-bit NormalFloat (QLoRA)";
  let description = [{
    Each param tagged `train.nf4 = array<i64: rows, cols>` (ztc-lora with
    `base-dtype=nf4`) becomes bitsandbytes' NF4 with double quantization
    (`runtime/kernels/Nf4.h`): the argument itself turns into the packed
    4-bit codes (i8 `[ceil(n / 2)]`, n = rows * cols), and three frozen
    params follow, `<name>.absmax` (i8 `[ceil(n / 64)]`, the block scales'
    8-bit codes), `<name>.nested_absmax` (f32 `[ceil(n / 16384)]`) and
    `<name>.offset` (f32 `[1]`): the names of bitsandbytes' `Linear4bit`
    state dict. `ztc compile` quantizes the model's values into them.

    Every read of the weight must be a matrix product's right operand,
    through any chain of `nn.transpose {perm = [1, 0]}` and widening or
    narrowing `nn.cast`s (autocast's working copy, the backward's
    transposed read); each product `nn.matmul %x, op(W)` becomes
    `nn.matmul_nf4 %x, <parts> {weight_shape, transpose_b}` computing in
    the product's element type, and the chain goes. A chain that rounds W
    to a narrower type than its product computes in (`--half-weights`), or
    any other read (a ZeRO stage-3 gather), is an error naming the param.
    Runs after the gradients and the optimizer are built, so neither sees
    anything but a frozen float weight.

    Example:

    ```mlir
    // %W: tensor<32x64xf32> {train.nf4 = array<i64: 32, 64>}
    %c = nn.cast %W : tensor<32x64xf32> -> tensor<32x64xbf16>
    %t = nn.transpose %c {perm = array<i64: 1, 0>}
    %y = nn.matmul %x, %t : tensor<8x64xbf16>, tensor<64x32xbf16> -> ...
    // becomes, with %W: tensor<1024xi8>
    %y = nn.matmul_nf4 %x, %W, %absmax, %nested, %offset
           {weight_shape = array<i64: 32, 64>, transpose_b = true}
    ```
  }];
  let dependentDialects = ["::mlir::ztc::nn::NNDialect",
                           "::mlir::ztc::train::TrainDialect"];
}

def AutodiffPass : Pass<"ztc-autodiff", "func::FuncOp"> {
  let summary = "Append the gradient of the loss w.r.t. every trainable param";
  let description = [{
    Reverse-mode automatic differentiation of a step function whose first
    result is a scalar float loss (a rank-0 tensor). Every `nn` op states
    its vector-Jacobian product (the `GradientOpInterface`), built from `nn`
    ops, so the backward step lowers and runs like the forward one.

    1. Checks the function: one block, and a first result that is a rank-0
       float tensor (the loss).
    2. Selects the trainable parameters: arguments bound as `param`
       with a float element type whose binding name matches none of the
       `frozen` regular expressions (each must match the whole name) and
       that carry no `train.frozen` attribute (ztc-lora's frozen base).
       Batch-norm running statistics (buffers PyTorch exports as
       initializers: parameters whose only uses are the `mean` and `var`
       operands of `nn.batch_norm`, or that the step itself updates, named
       by a result tagged `train.update_of`) are not trained, as in PyTorch;
       their bindings become `buffer`s and they are listed in the function
       attribute `train.buffers`.
    3. Prunes: a value needs a gradient when it depends on a selected
       parameter (forward, through float values) and the loss depends on it
       (backward, through float values). Nothing else gets gradient work.
    4. Seeds the loss's gradient with 1 (with `loss-scale`: the scale; see
       below) and visits the ops in reverse
       program order. An op with a result that needs a gradient builds its
       VJP from its results' gradients (null where zero); an operand
       gradient is kept when the operand needs one, and gradients of a value
       with several uses are summed with `nn.add`. An op on the path without
       the interface is an error naming the op.
    5. Returns the parameter gradients after the original results, in
       argument order, each tagged `train.grad_of = "<onnx name>"`.
       Selected parameters that get no gradient (the loss does not depend on
       them) are listed in the function attribute `train.no_grad`.
    6. Erases the backward ops nothing uses (operand gradients that were
       built but not needed).

    Loss scaling (mixed precision in fp16): with `loss-scale` S > 0 the
    seed is the constant S; with `loss-scale` 0 it is a new rank-0 f32
    `state` argument `loss_scale` whose `train.initial` is
    2^`initial-scale-power` (`ztc-loss-scale` updates it). Either way each
    parameter gradient is multiplied by 1/scale right after the backward
    completes it, so gradients leave the backward unscaled and an overflow
    inside it stays inf or NaN.

    Mixed precision: a gradient that is the widening cast of a half-
    precision one (the VJP of the forward's cast of an f32 parameter to
    bf16 or f16) has that cast, and its unscaling, marked
    `train.half_gradient_of = "<onnx name>"`; `ztc-half-gradients` redoes
    them at each reader.

    Backward ops carry the location of the forward op they differentiate,
    so reports about them name the ONNX node, tagged `train.gradient` (a
    FusedLoc's metadata; `train::isGradientLoc`): their elementwise work
    keeps half-precision intermediates in float (see
    `ztc-convert-nn-to-kernel`).

    Example:

    ```mlir
    func.func @step(%x: tensor<4xf32>,
                    %w: tensor<4xf32> {train.binding = #train.binding<param "w">})
        -> tensor<f32> {
      %y = nn.mul %x, %w : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
      %l = nn.reduce_sum %y {axes = array<i64: 0>, keepdims = false}
             : tensor<4xf32> -> tensor<f32>
      return %l : tensor<f32>
    }
    // becomes
    func.func @step(...) -> (tensor<f32>,
                             tensor<4xf32> {train.grad_of = "w"}) {
      ...
      %one = arith.constant dense<1.0> : tensor<f32>
      %g = nn.reshape %one : tensor<f32> -> tensor<1xf32>
      %gy = nn.broadcast_to %g {shape = array<i64: 4>}
              : tensor<1xf32> -> tensor<4xf32>
      %gw = nn.mul %gy, %x : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
      return %l, %gw : tensor<f32>, tensor<4xf32>
    }
    ```
  }];
  let options = [
    ListOption<"frozen", "frozen", "std::string",
               "Parameters to keep fixed: comma-separated regular "
               "expressions (llvm::Regex, extended POSIX), each matched "
               "against the whole binding name">,
    Option<"lossScaleValue", "loss-scale", "double", /*default=*/"1.0",
           "Seed the backward with this scale and unscale the gradients: "
           "1 (no scaling), a positive static scale, or 0 (dynamic: the "
           "`loss_scale` state, which ztc-loss-scale updates)">,
    Option<"initialScalePower", "initial-scale-power", "unsigned",
           /*default=*/"16",
           "Dynamic scaling: the first scale is 2^this">,
  ];
  let dependentDialects = ["::mlir::ztc::nn::NNDialect",
                           "::mlir::ztc::train::TrainDialect",
                           "::mlir::arith::ArithDialect"];
}

def RecomputePass : Pass<"ztc-recompute", "ModuleOp"> {
  let summary = "Recompute activations in the backward instead of keeping them";
  let description = [{
    Gradient checkpointing on the function `ztc-autodiff` built (loss first,
    then gradients). The forward is what the loss depends on; the backward
    is every op after the loss that computes gradients; an activation is a
    forward op's result, and the backward keeps it alive (a saved
    activation) unless the policy recomputes it.

    1. The policy chooses the activations to recompute:
       - `none`: nothing (the pass only reports);
       - `selective`: the results of cheap ops (elementwise, normalization,
         softmax, reshapes, and matrix products of two activations, as in
         attention), as in Megatron's selective recomputation. Kept: the
         products with a weight operand and convolutions, values several
         forward ops read (a residual stream), and values whose replay
         would clone more than 32 ops;
       - `full`: per block, as `gradient_checkpointing_enable()` does per
         layer: only values that cross a block's boundary are kept. Blocks
         are the numbered scope of each node name (`/h.3/...`,
         `/blocks.0/...`, `/layer1/...`), or the text `blocks` (a regular
         expression) matches in it; ops in no block keep their results;
       - `sqrt`: Chen et al.'s √n checkpoints: the forward ops cut into
         ⌈√n⌉ segments, each cut where the fewest bytes cross it within
         half a segment of its even position, then as `full`;
       - `budget`, with `budget=BYTES` or `budget=FRACTION` (of the peak
         with `none`; `--recompute budget=...` in the pipeline):
         the least recomputation (in FLOPs) whose planned peak — the
         bytes per rank `ztc inspect` reports — fits. Plans are weighed
         by planning the rest of the step on a copy of the module, with
         the planner the training pipeline hands the pass (run alone, the
         pass refuses budgets). The candidates are the fixed policies and
         the plans of a 0-1 integer program, solved by COIN-OR CBC within
         `search-nodes` branch-and-bound nodes each: one column per decided value (keep
         it) and per forward op (recompute it); rows say that what the
         backward reads is kept or recomputed, that a recomputed op's
         operands are kept or recomputed in its own segment (a block of
         the node names' scopes, else a √n segment), and that the bytes
         alive in each interval of the backward — kept values until
         their last read, a segment's clones in the span of its backward
         uses, everything else as it lives in nn — stay under a capacity;
         the objective is the recompute FLOPs. Solved for 24 capacities
         spread between the smallest reachable and that of keeping
         everything (the same candidates whatever the budget, so a larger
         budget never costs more), the cheapest candidate that fits wins;
         when none does, the error states the smallest planned peak.
    2. Every backward use of a recomputed value reads a clone built right
       before the first backward op that needs it (its recomputed operands
       cloned first), so its buffer lives from there to its last backward
       use; the forward value dies after its last forward use. Clones are
       tagged `train.recomputed`, which also keeps CSE from merging them
       back. Recomputing is exact: ops are pure, random numbers are a
       function of the key and the stream, and running statistics are
       updated by the forward's ops alone.
    3. Tags the function with `train.recompute`: the policy, the saved
       activation bytes with it and with `none` (each buffer once; a
       reshape is a view), the FLOPs of the clones and of the step (the
       cost each nn op declares, NN_CostOpInterface); with a
       budget also the budget, the plan's planned bytes and how it was
       chosen (which candidate, the integer program's size and its gap).

    Example (`policy=selective`): the backward's use of `%t` reads a clone.

    ```mlir
    %h = nn.matmul %x, %wt : ...
    %t = nn.tanh %h : ...
    ... loss ...
    %g = nn.mul %dy, %t : ...      // the tanh's VJP
    // becomes
    %t2 = nn.tanh %h {train.recomputed} : ...
    %g = nn.mul %dy, %t2 : ...
    ```
  }];
  let options = [
    Option<"policy", "policy", "::mlir::ztc::RecomputePolicy",
           /*default=*/"::mlir::ztc::RecomputePolicy::None",
           "none, selective, full, sqrt, or budget (with `budget`)",
           "::mlir::ztc::closedSet(::mlir::ztc::kRecomputePolicies)">,
    Option<"budget", "budget", "std::string", /*default=*/"\"\"",
           "For policy budget: BYTES (8GiB, 6e9) or FRACTION (0.6, 60%) of "
           "the planned peak with none">,
    Option<"blocks", "blocks", "std::string", /*default=*/"\"\"",
           "For full: a regular expression whose first match in a node name "
           "names the node's block (default: its numbered scope)">,
    Option<"searchNodes", "search-nodes", "int64_t", /*default=*/"10000",
           "For budget: branch-and-bound nodes each integer program may "
           "explore (a bound on work, not time: the same inputs give the "
           "same plan on any machine)">,
  ];
  let dependentDialects = ["::mlir::ztc::train::TrainDialect"];
}

//===----------------------------------------------------------------------===//
// Entries
//===----------------------------------------------------------------------===//

def BuildEntriesPass : Pass<"ztc-build-entries", "ModuleOp"> {
  let summary = "Make the compiled step's entry functions from the model's";
  let description = [{
    Input: a module holding one function, the model's step (after
    `ztc-attach-loss` and `ztc-autodiff` for every entry but `forward`).
    Output: one function per requested entry, in the order of `entries`,
    each named after its kind and tagged `train.entry`; the model's function
    is gone. The emitter prints each as the C entry `ztc_<kind>`.

    1. Checks the module: exactly one function; for the training entries,
       a first result that is a scalar float loss.
    2. Per entry kind:
       - `forward`: the model's outputs; results tagged `train.update_of`
         (running statistics) are dropped, so a forward run leaves the model
         as it was;
       - `train_step`: the function as it is: loss, gradients (for
         `ztc-optimizer` to consume) and state updates, plus a
         `train.record_loss` of the loss for the trainer's logs;
       - `loss_and_grads`: loss and gradients, state updates dropped; each
         gradient result is named (`onnx.name`) after its parameter, the
         name the runtime writes it under;
       - `loss`: the loss alone; every gradient op dies in the next cleanup;
       - `evaluate`: the loss as `model.eval()` computes it, and for a
         cross entropy the f32 counts `correct` (rows whose label has the
         highest score; a tie counts) and `counted` (rows whose label is
         not `ignore-index`); state updates dropped.
       Every `nn.mode_select` becomes its `inference` operand in
       `evaluate` and its `training` operand elsewhere.
    3. Erases the model's function.

    Example (`entries=train_step,loss_and_grads`):

    ```mlir
    func.func @main(%w: tensor<4xf32> {train.binding = #train.binding<param "w">}, ...)
        -> (tensor<f32>, tensor<4xf32> {train.grad_of = "w"})
    // becomes
    func.func @train_step(...) -> (tensor<f32>,
                                    tensor<4xf32> {train.grad_of = "w"})
        attributes {train.entry = "train_step"} {
      ...
      train.record_loss %loss : tensor<f32>
      return ...
    }
    func.func @loss_and_grads(...) -> (tensor<f32>,
        tensor<4xf32> {onnx.name = "w", train.grad_of = "w"})
        attributes {train.entry = "loss_and_grads"}
    ```
  }];
  let options = [
    ListOption<"entries", "entries", "std::string",
               "Entries to build, in order: forward, train_step, "
               "loss_and_grads, loss">,
  ];
  let dependentDialects = ["::mlir::ztc::train::TrainDialect"];
}

def AccumulatePass : Pass<"ztc-accumulate", "ModuleOp"> {
  let summary = "Gradient accumulation: an accumulate entry and a mean step";
  let description = [{
    With `micro-batches` K > 1, one optimizer step spans K calls: K - 1 of
    `@accumulate`, then one of `@train_step`. Input: a module with
    `@train_step` returning the loss, gradients (`train.grad_of`) and state
    updates (`train.update_of`), before `ztc-optimizer`. With K = 1 nothing
    changes.

    1. Per gradient of `@train_step`, adds a state argument
       `<param>.grad_accum` (bound as a `state`; the runtime zeroes it).
    2. Clones `@train_step` into `@accumulate` (`train.entry =
       "accumulate"`), which returns the loss, its state updates (running
       statistics change every micro-batch) and accumulator + gradient as
       the update of each accumulator.
    3. Rewrites `@train_step` to hand the optimizer (accumulator + gradient)
       / K in place of each gradient, and to reset every accumulator to
       zero (updates after the others), so the next optimizer step starts
       from nothing.

    A result of `@train_step` that is neither the loss, a gradient nor an
    update is an error naming its index.

    Accumulators of f32 gradients have the element type `accum-dtype`
    (default fp32, whatever the training precision: DeepSpeed's bf16 mode
    accumulates in bf16, which loses precision); a narrower one is cast to
    f32, added to the gradient and rounded back once per micro-batch.

    Example (K = 2):

    ```mlir
    func.func @train_step(%w: ...) -> (tensor<f32>,
                                       tensor<4xf32> {train.grad_of = "w"})
    // becomes
    func.func @train_step(%w: ..., %acc: tensor<4xf32>
                          {train.binding = #train.binding<state "w.grad_accum">})
        -> (tensor<f32>, tensor<4xf32> {train.grad_of = "w"},
            tensor<4xf32> {train.update_of = "w.grad_accum"})
    func.func @accumulate(%w: ..., %acc: ...)
        -> (tensor<f32>, tensor<4xf32> {train.update_of = "w.grad_accum"})
    ```
  }];
  let options = [
    Option<"microBatches", "micro-batches", "unsigned", /*default=*/"1",
           "Micro-batches per optimizer step (1: no accumulation)">,
    Option<"accumDtype", "accum-dtype", "::mlir::ztc::AccumType",
           /*default=*/"::mlir::ztc::AccumType::Fp32",
           "Element type of the accumulators of f32 gradients: fp32, bf16 "
           "or fp16 (each micro-batch's sum is computed in f32 and rounded "
           "once)",
           "::mlir::ztc::closedSet(::mlir::ztc::kAccumTypes)">,
  ];
  let dependentDialects = ["::mlir::ztc::nn::NNDialect",
                           "::mlir::ztc::train::TrainDialect",
                           "::mlir::arith::ArithDialect"];
}

//===----------------------------------------------------------------------===//
// Numerics
//===----------------------------------------------------------------------===//

def AutocastPass : Pass<"ztc-autocast", "func::FuncOp"> {
  let summary = "Mixed precision: give every nn op a compute type, cast between them";
  let description = [{
    The precision slot's pass for `--precision bf16` (and `fp16`), on the
    model's function before the loss is attached. Each `nn` op gets a
    compute type from the autocast class it declares
    (dialects/NN/IR/OpFacts.td), PyTorch's autocast lists being the anchor:
    - half (`NN_HalfCompute`): `nn.matmul` and `nn.conv2d`;
    - f32, the model's own type (`NN_WideCompute`): exp, log, pow,
      reciprocal, softplus, sin, cos, softmax, log-softmax, layer and batch
      normalization (their statistics), sums and means, the loss (attached
      after this pass, on the model's f32 outputs);
    - the rest (`NN_FollowCompute`): the widest type among its activation
      operands (values that depend on the step's data); weights and
      constants follow it, as PyTorch's type promotion ignores scalars, so
      a bias added to a half product is cast to half. An op of weights
      alone keeps the widest of its operands;
    - `nn.cast` and `nn.random_uniform` (`NN_OwnCompute`) state their
      result types and stay as they are.
    `keep-fp32` (a regular expression) moves the half ops whose op name
    (`nn.matmul`) or ONNX node name it matches to f32.

    Casts are inserted where an operand's type differs from its op's
    compute type, one per value and type, right after the value is
    defined: each weight is cast to half once per step, whatever its uses.
    The function's results are cast back to their declared types. Parameters
    stay f32 (the master weights); their gradients come back through the
    casts' VJPs in f32. Kernels compute half ops in f32 and round the
    result once, to nearest even.

    `half-weights` holds the whole model in half, as DeepSpeed's fp16 and
    bf16 modes and FSDP's `param_dtype` do: each parameter is cast to half
    once, at the entry, and every op reads that copy; an op that computes
    in f32 (a normalization's weight, an embedding gathered into the f32
    residual stream) reads the copy widened. Compute types are the same as
    without it. Each parameter's gradient then comes back through one
    widening of a half gradient, so it waits for the optimizer in half
    (ztc-half-gradients), and the f32 masters are read by the optimizer
    alone, which lets ZeRO stages 1 and 2 shard every one of them.

    Example (`precision=bf16`):

    ```mlir
    %h = nn.matmul %x, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
    %t = nn.tanh %h : ...
    // becomes
    %xb = nn.cast %x : tensor<4x8xf32> -> tensor<4x8xbf16>
    %wb = nn.cast %w : tensor<8x8xf32> -> tensor<8x8xbf16>
    %h = nn.matmul %xb, %wb : ... -> tensor<4x8xbf16>
    %t = nn.tanh %h : tensor<4x8xbf16> -> tensor<4x8xbf16>
    ```
  }];
  let options = [
    Option<"precision", "precision", "::mlir::ztc::HalfType",
           /*default=*/"::mlir::ztc::HalfType::Bf16",
           "The half type: bf16 or fp16",
           "::mlir::ztc::closedSet(::mlir::ztc::kHalfTypes)">,
    Option<"keepFp32", "keep-fp32", "std::string", /*default=*/"\"\"",
           "A regular expression: half ops whose op name or ONNX node name "
           "it matches compute in f32">,
    Option<"halfWeights", "half-weights", "bool", /*default=*/"false",
           "Every parameter is read through its half working copy; ops "
           "that compute in f32 read the copy widened">,
  ];
  let dependentDialects = ["::mlir::ztc::nn::NNDialect"];
}

def PromoteF64Pass : Pass<"ztc-promote-f64", "func::FuncOp"> {
  let summary = "Compute a function in f64: every f32, f16 and bf16 tensor";
  let description = [{
    Rewrites a function of `nn` ops so that all its floating-point work
    happens in double precision, for numerical checks (`ztc gradcheck`
    compares gradients with finite differences, which f32 rounding would
    drown). Integer and boolean tensors are untouched, and so is a function
    declaration (its callers' types depend on its signature).

    1. Checks that every op carrying an f32, f16 or bf16 tensor is an `nn`
       op, an `arith.constant` with a dense value, or the `func.return`;
       anything else is an error naming the op, and nothing is rewritten.
    2. Promotes the float tensor arguments (their attributes stay).
    3. Visits the ops in order. A float `arith.constant` is re-created with
       its values converted to f64 (exactly: every f32, f16 and bf16 value
       is a double). An `nn` op is re-created on its promoted operands with
       the same attributes; its result types come from its own type
       inference, or, for `nn.reshape`, `nn.cast` and `nn.random_uniform`
       whose result type is given, from promoting the old one (random
       numbers keep their values: 24-bit fractions are exact in f64, and
       the i64 key is untouched). A cast between two float types
       becomes a cast from f64 to f64 and disappears.
    4. Sets the function type from the promoted arguments and returned
       values.

    Example:

    ```mlir
    func.func @f(%x: tensor<4xf32>, %i: tensor<4xi64>) -> tensor<4xf16> {
      %c = arith.constant dense<0.5> : tensor<4xf32>
      %0 = nn.mul %x, %c : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
      %1 = nn.cast %0 : tensor<4xf32> -> tensor<4xf16>
      return %1 : tensor<4xf16>
    }
    // becomes
    func.func @f(%x: tensor<4xf64>, %i: tensor<4xi64>) -> tensor<4xf64> {
      %c = arith.constant dense<5.000000e-01> : tensor<4xf64>
      %0 = nn.mul %x, %c : tensor<4xf64>, tensor<4xf64> -> tensor<4xf64>
      return %0 : tensor<4xf64>
    }
    ```
  }];
  let dependentDialects = ["::mlir::ztc::nn::NNDialect",
                           "::mlir::arith::ArithDialect"];
}

#endif // ZTC_PASSES_PASSES_TD
