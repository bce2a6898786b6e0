//===- Pipelines.h - ztc's typed pass pipelines -----------------*- C++ -*-===//
//
// The pass order of every compile, in one place. `ztc compile`, `ztc run`,
// `ztc gradcheck` and `ztc-opt --ztc-training-pipeline='...'` all build their
// pass managers here, so the driver does no IR work of its own and ztc-opt
// reproduces any compile. Each training option is declared once, in
// TrainingPipelineOptions; the driver's flags are generated from it.
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_PASSES_PIPELINES_PIPELINES_H
#define ZTC_PASSES_PIPELINES_PIPELINES_H

#include "passes/Passes.h"
#include "runtime/backend/Target.h"
#include "runtime/train/Schedule.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "llvm/ADT/StringMap.h"

#include <optional>

#include <string>
#include <vector>

namespace mlir::ztc {

/// `--lr-schedule`: DeepSpeed's schedulers (the manifest's names).
inline constexpr Spelling<::ztc::rt::LrScheduleKind> kDeepSpeedSchedules[] = {
    {::ztc::rt::LrScheduleKind::Constant, "constant", "the peak throughout"},
    {::ztc::rt::LrScheduleKind::Warmup, "warmup", "WarmupLR"},
    {::ztc::rt::LrScheduleKind::WarmupDecay, "warmup-decay", "WarmupDecayLR"},
    {::ztc::rt::LrScheduleKind::WarmupCosine, "warmup-cosine",
     "WarmupCosineLR"},
    {::ztc::rt::LrScheduleKind::OneCycle, "one-cycle", "OneCycle"},
    {::ztc::rt::LrScheduleKind::LrRangeTest, "lr-range-test", "LRRangeTest"}};

/// `--lr-scheduler-type`: the Hugging Face Trainer's schedules built.
inline constexpr Spelling<::ztc::rt::LrScheduleKind> kTrainerSchedules[] = {
    {::ztc::rt::LrScheduleKind::TrainerLinear, "linear", "linear decay to 0"},
    {::ztc::rt::LrScheduleKind::TrainerCosine, "cosine", "cosine decay to 0"},
    {::ztc::rt::LrScheduleKind::TrainerConstant, "constant", "no warmup"},
    {::ztc::rt::LrScheduleKind::TrainerConstantWithWarmup,
     "constant_with_warmup", "a linear warmup, then constant"}};

/// `--warmup-type`.
inline constexpr Spelling<::ztc::rt::WarmupType> kWarmupTypes[] = {
    {::ztc::rt::WarmupType::Linear, "linear", "a straight rise"},
    {::ztc::rt::WarmupType::Log, "log", "a logarithmic rise"}};

/// What buildNNToKernelPipeline runs besides lowering, fusing and
/// planning.
struct KernelLoweringOptions {
  /// ztc-check-finite: a finite check after every op.
  bool checkFinite = false;
  /// ztc-schedule-collectives, with these options.
  std::optional<ScheduleCollectivesPassOptions> schedule;
  /// ztc-channels-last: f32 convolutions' activations NHWC (and those of
  /// f16 and bf16 ones, with `channelsLastHalfTypes`).
  bool channelsLast = false;
  bool channelsLastHalfTypes = false;
  /// ztc-plan-scratch, recording these reserved bytes and input sets: the
  /// target's kernels work in planned scratch (TargetInfo::plannedScratch).
  std::optional<int64_t> plannedScratch;
  int64_t inputSets = 1;
  /// ztc-group-launches after planning: the target launches each fused
  /// loop (TargetInfo::groupsLaunches).
  bool groupLaunches = false;
  /// ztc-tf32, where either of its options is set.
  Tf32PassOptions tf32;

  /// The defaults for `target` (its scratch, its launches, the types of its
  /// channels-last convolutions).
  static KernelLoweringOptions forTarget(::ztc::rt::Target target);
};

/// How a model trains. The options of `--ztc-training-pipeline` and, one for
/// one, the flags of `ztc compile` (tools/ztc/Commands.h maps each flag to the
/// option of the same name).
struct TrainingPipelineOptions
    : public PassPipelineOptions<TrainingPipelineOptions> {
  /// For each option with a closed set of values: its spellings, which the
  /// driver checks a flag's value against to name them in its error.
  llvm::StringMap<std::vector<std::string>> closedSets;
  /// An option whose values are the spellings of a table (OptionEnums.h).
  template <typename E> struct ClosedOption : Option<E> {
    template <size_t N, typename... Modifiers>
    ClosedOption(TrainingPipelineOptions &parent, llvm::StringRef arg,
                 const Spelling<E> (&table)[N], Modifiers &&...modifiers)
        : Option<E>(parent, arg, std::forward<Modifiers>(modifiers)...,
                    closedSet(table)) {
      parent.closedSets[arg] = spellings(table);
    }
    using Option<E>::operator=;
  };

  // --- Loss (ztc-attach-loss) ---------------------------------------------
  ClosedOption<LossKind> loss{
      *this, "loss", kLossKinds,
      llvm::cl::desc("cross_entropy, mse, none, or auto (none for a model "
                     "returning one scalar float; otherwise say which)"),
      llvm::cl::init(LossKind::Auto)};
  Option<std::string> lossInput{
      *this, "loss-input",
      llvm::cl::desc("The model output the loss reads (default: the first)")};
  Option<std::string> labels{*this, "labels",
                             llvm::cl::desc("Name of the labels input"),
                             llvm::cl::init("labels")};
  Option<int64_t> ignoreIndex{
      *this, "ignore-index",
      llvm::cl::desc("Label that contributes no loss (cross_entropy)"),
      llvm::cl::init(-100)};
  Option<bool> tokenWeightedLoss{
      *this, "token-weighted-loss",
      llvm::cl::desc(
          "cross_entropy: normalize the loss over the optimizer step's real "
          "tokens (labels that are not the ignore index, over every "
          "micro-batch and rank), as the Hugging Face Trainer does since "
          "transformers 4.46, instead of averaging each micro-batch's mean; "
          "the two differ when micro-batches hold different numbers of "
          "real tokens (padded variable-length text)"),
      llvm::cl::init(false)};

  // --- Gradients (ztc-autodiff) -------------------------------------------
  ListOption<std::string> freeze{
      *this, "freeze",
      llvm::cl::desc("Freeze parameters whose ONNX name matches REGEX (a "
                     "whole-name extended POSIX match; repeatable)")};

  // --- Adapters (ztc-lora) --------------------------------------------------
  Option<std::string> lora{
      *this, "lora",
      llvm::cl::desc(
          "Train low-rank adapters on the matrix products of the modules "
          "TARGETS names and freeze the rest: "
          "r=R,alpha=A,dropout=P,targets=REGEX[,rslora=true]"
          "[,bias=none|all|lora_only][,modules-to-save=REGEX][,seed=N] "
          "(peft's LoraConfig; defaults r=8, alpha=8, dropout=0)")};
  ClosedOption<BaseType> baseDtype{
      *this, "base-dtype", kBaseTypes,
      llvm::cl::desc("With --lora: nf4 holds the frozen base weights of the "
                     "matrix products in bitsandbytes' 4-bit NormalFloat "
                     "(QLoRA), dequantized inside the products' kernels; "
                     "model: as the model has them"),
      llvm::cl::init(BaseType::Model)};

  // --- Optimizer (ztc-optimizer) ------------------------------------------
  ClosedOption<OptimizerKind> optimizer{
      *this, "optimizer", kOptimizerKinds,
      llvm::cl::desc("sgd, adam, adamw, adam8bit or adamw8bit (bitsandbytes' "
                     "8-bit states; also adamw_bnb_8bit and adamw_8bit)"),
      llvm::cl::init(OptimizerKind::Adamw)};
  Option<double> momentum{*this, "momentum", llvm::cl::desc("SGD momentum"),
                          llvm::cl::init(0.0)};
  Option<bool> nesterov{*this, "nesterov",
                        llvm::cl::desc("SGD with Nesterov momentum"),
                        llvm::cl::init(false)};
  Option<double> weightDecay{
      *this, "weight-decay",
      llvm::cl::desc("Weight decay (negative: the optimizer's default, 0.01 "
                     "for adamw and adamw8bit, 0 otherwise)"),
      llvm::cl::init(-1.0)};
  ListOption<double> betas{*this, "betas",
                           llvm::cl::desc("Adam betas B1,B2 (default "
                                          "0.9,0.999)")};
  Option<double> eps{*this, "eps", llvm::cl::desc("Adam epsilon"),
                     llvm::cl::init(1e-8)};
  Option<double> clipGradNorm{
      *this, "clip-grad-norm",
      llvm::cl::desc("Clip gradients to this global L2 norm (0: no clipping)"),
      llvm::cl::init(0.0)};

  // --- Accumulation (ztc-accumulate) --------------------------------------
  Option<unsigned> gradAccum{*this, "grad-accum",
                             llvm::cl::desc("Micro-batches per optimizer step"),
                             llvm::cl::init(1)};

  // --- Schedule: inputs the runtime computes the learning rate from --------
  // No pass reads these: the step takes `lr` as a hyper written before every
  // call, so a schedule costs no recompilation. They travel to the manifest.
  Option<double> lr{*this, "lr", llvm::cl::desc("Learning rate (peak)"),
                    llvm::cl::init(1e-3)};
  ClosedOption<::ztc::rt::LrScheduleKind> lrSchedule{
      *this, "lr-schedule", kDeepSpeedSchedules,
      llvm::cl::desc("constant, warmup, warmup-decay, warmup-cosine, "
                     "one-cycle or lr-range-test (DeepSpeed's WarmupLR, "
                     "WarmupDecayLR, WarmupCosineLR, OneCycle, LRRangeTest)"),
      llvm::cl::init(::ztc::rt::LrScheduleKind::Constant)};
  ClosedOption<::ztc::rt::LrScheduleKind> lrSchedulerType{
      *this, "lr-scheduler-type", kTrainerSchedules,
      llvm::cl::desc("The Hugging Face Trainer's schedule, instead of "
                     "--lr-schedule, with the Trainer's formulas: linear, "
                     "cosine, constant or constant_with_warmup (a linear "
                     "warmup from 0, none by default)"),
      llvm::cl::init(::ztc::rt::LrScheduleKind::TrainerLinear)};
  Option<uint64_t> warmupSteps{
      *this, "warmup-steps", llvm::cl::desc("Warmup length in optimizer steps"),
      llvm::cl::init(0)};
  Option<double> warmupRatio{
      *this, "warmup-ratio",
      llvm::cl::desc("Warmup as a share of the schedule's length, rounded up "
                     "(the Trainer's warmup_ratio; --warmup-steps wins)"),
      llvm::cl::init(0.0)};
  ClosedOption<::ztc::rt::WarmupType> warmupType{
      *this, "warmup-type", kWarmupTypes,
      llvm::cl::desc("How the warmup rises: linear or log (DeepSpeed's "
                     "warmup_type)"),
      llvm::cl::init(::ztc::rt::WarmupType::Linear)};
  Option<uint64_t> totalSteps{
      *this, "total-steps",
      llvm::cl::desc("Schedule length in optimizer steps (0: the run's "
                     "length, from ztc-train's --steps or --epochs)"),
      llvm::cl::init(0)};
  Option<double> minLr{*this, "min-lr",
                       llvm::cl::desc("Schedule's lowest learning rate "
                                      "(one-cycle: cycle_min_lr)"),
                       llvm::cl::init(0.0)};
  Option<double> warmupMinRatio{
      *this, "warmup-min-ratio",
      llvm::cl::desc("warmup-cosine: the warmup's start as a share of --lr "
                     "(DeepSpeed's warmup_min_ratio)"),
      llvm::cl::init(0.0)};
  Option<double> cosMinRatio{
      *this, "cos-min-ratio",
      llvm::cl::desc("warmup-cosine: the cosine's end as a share of --lr, "
                     "instead of --min-lr (DeepSpeed's cos_min_ratio)"),
      llvm::cl::init(0.0)};
  Option<uint64_t> cycleFirstStepSize{
      *this, "cycle-first-step-size",
      llvm::cl::desc("one-cycle: steps rising from --min-lr to --lr"),
      llvm::cl::init(2000)};
  Option<uint64_t> cycleSecondStepSize{
      *this, "cycle-second-step-size",
      llvm::cl::desc("one-cycle: steps falling back (0: as the rise)"),
      llvm::cl::init(0)};
  Option<double> decayLrRate{
      *this, "decay-lr-rate",
      llvm::cl::desc("one-cycle, after the cycle: lr = min-lr / (1 + rate * "
                     "steps / decay-step-size)"),
      llvm::cl::init(0.0)};
  Option<uint64_t> decayStepSize{
      *this, "decay-step-size",
      llvm::cl::desc("one-cycle: the decay's interval in steps (0: no decay)"),
      llvm::cl::init(0)};
  Option<uint64_t> cycleFirstStairCount{
      *this, "cycle-first-stair-count",
      llvm::cl::desc("one-cycle: stairs in the rise (0: a straight line; "
                     "DeepSpeed's cycle_first_stair_count)"),
      llvm::cl::init(0)};
  Option<uint64_t> cycleSecondStairCount{
      *this, "cycle-second-stair-count",
      llvm::cl::desc("one-cycle: stairs in the fall (default: as the rise)"),
      llvm::cl::init(0)};
  Option<uint64_t> lrRangeTestStepSize{
      *this, "lr-range-test-step-size",
      llvm::cl::desc("lr-range-test: steps per interval; lr = --lr * (1 + "
                     "rate * intervals)"),
      llvm::cl::init(2000)};
  Option<double> lrRangeTestStepRate{
      *this, "lr-range-test-step-rate",
      llvm::cl::desc("lr-range-test: growth per interval"),
      llvm::cl::init(1.0)};
  Option<bool> lrRangeTestStaircase{
      *this, "lr-range-test-staircase",
      llvm::cl::desc("lr-range-test: whole intervals only"),
      llvm::cl::init(false)};

  // --- Entries (ztc-build-entries) ----------------------------------------
  ListOption<std::string> entries{
      *this, "entries",
      llvm::cl::desc("Entries of the step: train_step, loss_and_grads, loss, "
                     "evaluate (default: train_step,loss_and_grads,evaluate; "
                     "grad-accum > 1 adds accumulate)")};

  // --- Slots -----------------------------------------------------------
  // Where the mission's passes plug in; see docs/architecture.md. Each slot
  // accepts today only what is built.
  /// Precision slot, before the loss and autodiff: `fp32` computes as the
  /// model is written; `fp64` promotes every float to double first (what
  /// `ztc gradcheck` compiles); `bf16` and `fp16` run ztc-autocast (half
  /// matrix products and convolutions, f32 master weights); fp16 also
  /// scales the loss (ztc-autodiff's seed, ztc-loss-scale).
  ClosedOption<Precision> precision{
      *this, "precision", kPrecisions,
      llvm::cl::desc("fp32 (as the model is written); bf16 or fp16 (mixed "
                     "precision: matrix products and convolutions in half "
                     "precision, softmax, normalizations, sums and the loss "
                     "in f32, f32 master weights; fp16 with loss scaling); "
                     "fp64 (every float promoted to double, for gradient "
                     "checks)"),
      llvm::cl::init(Precision::Fp32)};
  Option<std::string> keepFp32{
      *this, "keep-fp32",
      llvm::cl::desc("For --precision bf16 or fp16: a regular expression; "
                     "matrix products and convolutions whose op name "
                     "(nn.matmul, nn.conv2d) or ONNX node name it matches "
                     "stay in f32")};
  Option<bool> halfWeights{
      *this, "half-weights",
      llvm::cl::desc("For --precision bf16 or fp16: every parameter is read "
                     "as its half working copy, as DeepSpeed's fp16/bf16 "
                     "modes and FSDP's param_dtype hold the model (ops that "
                     "compute in f32 read it widened); gradients wait in "
                     "half and the f32 masters are the optimizer's alone, so "
                     "ZeRO stages 1 and 2 shard all of them"),
      llvm::cl::init(false)};
  /// Debugging: every kernel's output scanned for NaN and infinity.
  Option<bool> checkFinite{
      *this, "check-finite",
      llvm::cl::desc("Scan every op's output for NaN and infinity as the "
                     "step runs; ztc-train names the first ONNX node that "
                     "produced one (node, op, forward or backward, step). "
                     "Slower: for finding where a run overflows"),
      llvm::cl::init(false)};
  ClosedOption<AccumType> gradAccumDtype{
      *this, "grad-accum-dtype", kAccumTypes,
      llvm::cl::desc("With --grad-accum > 1: the element type gradients are "
                     "summed in across micro-batches: fp32 (the default, "
                     "whatever --precision), bf16 or fp16 (half the "
                     "accumulators' memory; each sum rounded once)"),
      llvm::cl::init(AccumType::Fp32)};
  /// Loss scaling for --precision fp16, with DeepSpeed's names and
  /// defaults (its "fp16" section).
  Option<double> lossScale{
      *this, "loss-scale",
      llvm::cl::desc("For --precision fp16: 0 for dynamic loss scaling (the "
                     "default), or a static scale (no overflow check, as in "
                     "DeepSpeed)"),
      llvm::cl::init(0.0)};
  Option<unsigned> initialScalePower{
      *this, "initial-scale-power",
      llvm::cl::desc("Dynamic loss scaling: the first scale is 2^this"),
      llvm::cl::init(16)};
  Option<int64_t> lossScaleWindow{
      *this, "loss-scale-window",
      llvm::cl::desc("Dynamic loss scaling: finite steps before the scale "
                     "doubles"),
      llvm::cl::init(1000)};
  Option<int64_t> hysteresis{
      *this, "hysteresis",
      llvm::cl::desc("Dynamic loss scaling: overflows tolerated before the "
                     "scale halves"),
      llvm::cl::init(2)};
  Option<bool> consecutiveHysteresis{
      *this, "consecutive-hysteresis",
      llvm::cl::desc("Dynamic loss scaling: restore the hysteresis after "
                     "every finite step"),
      llvm::cl::init(false)};
  Option<double> minLossScale{
      *this, "min-loss-scale",
      llvm::cl::desc("Dynamic loss scaling: the scale never goes below this; "
                     "an overflow at it stops training"),
      llvm::cl::init(1.0)};
  /// Recompute slot, after autodiff: ztc-recompute chooses what the
  /// backward recomputes instead of keeping.
  Option<std::string> recompute{
      *this, "recompute",
      llvm::cl::desc("Activation recomputation (gradient checkpointing): "
                     "none; selective (keep matrix products and "
                     "convolutions, recompute the cheap ops between them); "
                     "full (keep only each block's input); sqrt (Chen et "
                     "al.'s sqrt(n) checkpoints); budget=BYTES or "
                     "budget=FRACTION (the least recomputation whose planned "
                     "peak fits: 8GiB, 0.6 or 60% of the peak with none)"),
      llvm::cl::init("none")};
  Option<int64_t> recomputeSearchNodes{
      *this, "recompute-search-nodes",
      llvm::cl::desc("For --recompute budget=...: branch-and-bound nodes "
                     "each integer program may explore (a bound on work, not "
                     "time, so the same inputs compile to the same plan on "
                     "any machine at any load)"),
      llvm::cl::init(10000)};
  Option<std::string> recomputeBlocks{
      *this, "recompute-blocks",
      llvm::cl::desc("For --recompute full: a regular expression whose first "
                     "match in an ONNX node name names the node's block "
                     "(default: the name's first numbered scope, such as "
                     "/h.3 or /layer1)")};
  /// ZeRO slot, after the optimizer and before lowering: ztc-zero shards
  /// optimizer state and gradients over world-size ranks.
  ClosedOption<ZeroStage> zeroStage{
      *this, "zero", kZeroStages,
      llvm::cl::desc(
          "ZeRO stage: 0 data parallel (gradients all-reduced), "
          "1 optimizer states sharded, 2 gradients too, 3 parameters too"),
      llvm::cl::init(ZeroStage::DataParallel)};
  Option<unsigned> worldSize{
      *this, "world-size",
      llvm::cl::desc("Ranks the step runs on (mpirun -np N); --batch-size "
                     "is per rank, so the global batch is batch size x "
                     "accumulation x world size"),
      llvm::cl::init(1)};
  Option<int64_t> reduceBucketBytes{
      *this, "reduce-bucket-bytes",
      llvm::cl::desc("Gradient bytes reduced per collective (DeepSpeed's "
                     "reduce_bucket_size, in bytes)"),
      llvm::cl::init(26214400)};
  Option<int64_t> reduceBucketElements{
      *this, "reduce-bucket-elements",
      llvm::cl::desc("Gradient elements reduced per collective, instead of "
                     "--reduce-bucket-bytes (DeepSpeed's reduce_bucket_size "
                     "counts elements; 0: bytes decide)"),
      llvm::cl::init(0)};
  ClosedOption<CommType> commDtype{
      *this, "comm-dtype", kCommTypes,
      llvm::cl::desc("Element type gradients are reduced in across ranks: "
                     "fp32, fp16 or bf16 (DeepSpeed's "
                     "communication_data_type), or auto: the gradients' "
                     "own (the default); the sums accumulate in fp32"),
      llvm::cl::init(CommType::Auto)};
  Option<int64_t> paramPersistenceThreshold{
      *this, "param-persistence-threshold",
      llvm::cl::desc("ZeRO stage 3: parameters with fewer elements stay "
                     "whole on every rank (DeepSpeed's "
                     "stage3_param_persistence_threshold)"),
      llvm::cl::init(100000)};
  /// Kernel slot, before memory planning: ztc-schedule-collectives.
  Option<bool> overlapComm{
      *this, "overlap-comm",
      llvm::cl::desc("Run collectives that compute can overlap on a second "
                     "stream (a CUDA stream; on the CPU a thread with "
                     "ztc-train --comm-thread), so a bucket is reduced while "
                     "the backward goes on and stage-3 gathers run ahead of "
                     "their readers (DeepSpeed's overlap_comm)"),
      llvm::cl::init(true)};
  Option<int64_t> prefetchBytes{
      *this, "prefetch-bytes",
      llvm::cl::desc("ZeRO stage 3: parameter bytes gathered ahead of the "
                     "op that reads them, with --overlap-comm (0: each "
                     "right before its reader)"),
      llvm::cl::init(0)};
  Option<int64_t> prefetchElements{
      *this, "prefetch-elements",
      llvm::cl::desc("ZeRO stage 3: parameter elements gathered ahead, "
                     "instead of --prefetch-bytes (DeepSpeed's "
                     "stage3_prefetch_bucket_size; 0: bytes decide)"),
      llvm::cl::init(0)};
  Option<int64_t> maxLiveBytes{
      *this, "max-live-bytes",
      llvm::cl::desc("ZeRO stage 3: prefetching never makes the gathered "
                     "parameter bytes alive at once exceed this (0: no "
                     "bound)"),
      llvm::cl::init(0)};
  Option<int64_t> maxLiveElements{
      *this, "max-live-elements",
      llvm::cl::desc("ZeRO stage 3: the bound in elements, instead of "
                     "--max-live-bytes (DeepSpeed's "
                     "stage3_max_live_parameters; 0: bytes decide)"),
      llvm::cl::init(0)};

  Option<int64_t> allgatherBucketBytes{
      *this, "allgather-bucket-bytes",
      llvm::cl::desc("ZeRO stage 3: consecutive parameter gathers joined "
                     "into one all-gather of at most this many gathered "
                     "bytes, with --overlap-comm (0: each on its own)"),
      llvm::cl::init(0)};
  Option<int64_t> allgatherBucketElements{
      *this, "allgather-bucket-elements",
      llvm::cl::desc("ZeRO stage 3: the all-gather bucket in elements, "
                     "instead of --allgather-bucket-bytes (DeepSpeed's "
                     "allgather_bucket_size; 0: bytes decide)"),
      llvm::cl::init(0)};

  // --- Target (runtime/backend/Target.h) ---------------------------------
  Option<::ztc::rt::Target> target{
      *this, "target",
      llvm::cl::desc("Where the step runs: its defaults (--conv-layout) and "
                     "what its kernels take"),
      llvm::cl::init(::ztc::rt::Target::Cpu),
      llvm::cl::values(
          clEnumValN(::ztc::rt::Target::Cpu, "cpu",
                     ::ztc::rt::targetInfo(::ztc::rt::Target::Cpu).description),
          clEnumValN(
              ::ztc::rt::Target::Cuda, "cuda",
              ::ztc::rt::targetInfo(::ztc::rt::Target::Cuda).description))};

  // --- Layout (ztc-channels-last) ----------------------------------------
  ClosedOption<ConvLayout> convLayout{
      *this, "conv-layout", kConvLayouts,
      llvm::cl::desc(
          "Layout of f32 convolutions' activations (with --target cuda "
          "f16 and bf16 ones too): nhwc (channels last, which oneDNN's and "
          "cuDNN's convolutions read and write without reordering; the "
          "CPU's default) or nchw (ONNX's; the default with --target cuda)"),
      llvm::cl::init(ConvLayout::Nhwc)};
  // --- TF32 (ztc-tf32; CUDA only) -------------------------------------------
  Option<bool> allowTf32{
      *this, "allow-tf32",
      llvm::cl::desc("CUDA: f32 matrix products may run on TF32 tensor cores "
                     "(inputs rounded to 10 mantissa bits), as PyTorch's "
                     "torch.backends.cuda.matmul.allow_tf32; off by default, "
                     "as there; no effect on the CPU"),
      llvm::cl::init(false)};
  Option<bool> convTf32{
      *this, "conv-tf32",
      llvm::cl::desc("CUDA: f32 convolutions and their gradients may run on "
                     "TF32 tensor cores, as PyTorch's "
                     "torch.backends.cudnn.allow_tf32; on by default, as "
                     "there (--conv-tf32=false: exact f32); no effect on "
                     "the CPU"),
      llvm::cl::init(true)};

  /// Whether convolutions run channels-last: --conv-layout when given,
  /// else the target's default.
  bool channelsLast() const {
    return (convLayout.hasValue()
                ? convLayout.getValue()
                : parseSpelling(
                      kConvLayouts,
                      ::ztc::rt::targetInfo(target).defaultConvLayout)) ==
           ConvLayout::Nhwc;
  }
  /// How the step's nn entries lower to planned kernels, from these
  /// options and the target.
  KernelLoweringOptions kernelLowering() const;

  // --- Attention (ztc-fuse-attention) ------------------------------------
  ClosedOption<FuseAttention> fuseAttention{
      *this, "fuse-attention", kFuseAttention,
      llvm::cl::desc(
          "Run scaled-dot-product attention (softmax(q k^T * scale + "
          "causal or constant mask) v, as PyTorch models write it) as one "
          "fused op and kernel, forward and backward, that never holds the "
          "scores: on, off, or auto (on with --target cuda, off on the "
          "CPU)"),
      llvm::cl::init(FuseAttention::Auto)};
  /// Whether ztc-fuse-attention runs: --fuse-attention, with auto the
  /// target's default.
  bool fusesAttention() const {
    return fuseAttention == FuseAttention::Auto
               ? ::ztc::rt::targetInfo(target).fusesAttention
               : fuseAttention == FuseAttention::On;
  }
  // --- The loss (ztc-fuse-cross-entropy) ---------------------------------
  ClosedOption<FuseCrossEntropy> fuseCrossEntropy{
      *this, "fuse-cross-entropy", kFuseCrossEntropy,
      llvm::cl::desc(
          "Compute cross_entropy's logits (an f32 or f64 matrix product of "
          "the last hidden states and the classifier's weight) and the loss "
          "in one op and kernel, forward and backward, in chunks of rows "
          "that never hold the [tokens, classes] logits: on, off, or auto "
          "(on with --target cuda, off on the CPU)"),
      llvm::cl::init(FuseCrossEntropy::Auto)};
  /// Whether ztc-fuse-cross-entropy runs: --fuse-cross-entropy, with auto
  /// the target's default.
  bool fusesCrossEntropy() const {
    return fuseCrossEntropy == FuseCrossEntropy::Auto
               ? ::ztc::rt::targetInfo(target).fusesCrossEntropy
               : fuseCrossEntropy == FuseCrossEntropy::On;
  }
  /// Whether the precision is bf16 or fp16 (ztc-autocast runs).
  bool mixedPrecision() const {
    return precision == Precision::Bf16 || precision == Precision::Fp16;
  }

  /// The options of ztc-schedule-collectives these ask for (null: the
  /// pass does not run).
  std::optional<ScheduleCollectivesPassOptions> scheduleOptions() const;

  // Each pass's options as these set them: the pipeline's options project
  // onto the passes' (as upstream's sparse-compiler options do), here and
  // nowhere else; PipelineOptionsTest checks that the defaults agree.
  AttachLossPassOptions attachLossOptions() const;
  /// fp16's loss scale for the backward; the pass's defaults otherwise.
  AutodiffPassOptions autodiffOptions() const;
  /// For bf16 and fp16 (the pass does not run otherwise).
  AutocastPassOptions autocastOptions() const;
  RecomputePassOptions recomputeOptions() const;
  AccumulatePassOptions accumulateOptions() const;
  OptimizerPassOptions optimizerOptions() const;
  ZeroPassOptions zeroOptions() const;
  LossScalePassOptions lossScaleOptions() const;

  /// The entries to build: `entries`, or the default.
  std::vector<std::string> entryKinds() const;
  /// Adam's (beta1, beta2): `betas`, or PyTorch's default.
  std::pair<double, double> adamBetas() const;
  /// The learning-rate schedule the options ask for, with
  /// --lr-scheduler-type resolved; the options must verify.
  ::ztc::rt::ScheduleConfig scheduleConfig() const;

  /// The ztc-lora options `lora` spells; std::nullopt with `error` set when
  /// it does not parse. Without `lora`, options whose targets are empty.
  std::optional<LoraPassOptions> loraOptions(std::string &error) const;

  /// Checks values no single pass can (a slot asked for what is not built,
  /// two betas, a known schedule). On failure, `error` says which option and
  /// why, naming it as the flag `--NAME`.
  LogicalResult verify(std::string &error) const;

  /// The option named `name` (its flag name), or null. Lets the driver make
  /// one flag per option without spelling it again.
  llvm::cl::Option *findOption(llvm::StringRef name);
  /// The names of all options, sorted.
  std::vector<std::string> optionNames() const;
};

/// Adds the passes that take an imported onnx module to the `nn` dialect.
void buildOnnxToNNPipeline(OpPassManager &pm);

/// Adds the passes that lower nn entries to planned kernels.
void buildNNToKernelPipeline(OpPassManager &pm,
                             const KernelLoweringOptions &options = {});

/// The whole training compile, from an imported onnx module to planned
/// kernel entries (`ztc compile`): buildTrainingNNPipeline, then
/// buildNNToKernelPipeline. `options` must verify.
void buildTrainingPipeline(OpPassManager &pm,
                           const TrainingPipelineOptions &options);

/// The training compile up to nn entries with their optimizer (everything
/// before the lowering to kernels); `ztc gradcheck` reads the entries at
/// this point (which indices each integer input takes) before lowering.
void buildTrainingNNPipeline(OpPassManager &pm,
                             const TrainingPipelineOptions &options);

/// Stages 5 and 6 of the training compile, after the recompute slot:
/// entries, accumulation and the optimizer, in nn.
void buildTrainingEntriesPipeline(OpPassManager &pm,
                                  const TrainingPipelineOptions &options);

/// The forward compile, from an imported onnx module to a planned
/// `@forward` entry (`ztc run`, `ztc emit`).
void buildForwardPipeline(OpPassManager &pm,
                          const KernelLoweringOptions &lowering = {});

} // namespace mlir::ztc

#endif // ZTC_PASSES_PIPELINES_PIPELINES_H
