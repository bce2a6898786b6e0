//===- Pipelines.cpp - ztc's typed pass pipelines -------------------------===//
//
// The pass order of every compile and the registration of passes, dialects
// and named pipelines, so that `ztc-opt --ztc-training-pipeline='...'`
// reproduces what `ztc compile` runs. The order, with the slots the
// mission's passes fill, is drawn in docs/architecture.md.
//
//===----------------------------------------------------------------------===//

#include "passes/Pipelines/Pipelines.h"
#include "passes/Kernel/Footprint.h"
#include "passes/Passes.h"
#include "passes/Train/Recompute.h"

#include "dialects/Onnx/IR/OnnxOps.h"
#include "runtime/train/Schedule.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringSet.h"

#include <algorithm>
#include <cmath>
#include <sstream>

using namespace mlir;
using namespace mlir::ztc;

std::vector<std::string> TrainingPipelineOptions::entryKinds() const {
  if (!entries.empty())
    return {entries.begin(), entries.end()};
  return {"train_step", "loss_and_grads", "evaluate"};
}

std::pair<double, double> TrainingPipelineOptions::adamBetas() const {
  if (betas.size() == 2)
    return {betas[0], betas[1]};
  return {0.9, 0.999};
}

::ztc::rt::ScheduleConfig TrainingPipelineOptions::scheduleConfig() const {
  ::ztc::rt::ScheduleConfig config;
  if (lrSchedulerType.hasValue()) {
    config.kind = lrSchedulerType;
    config.warmupType = ::ztc::rt::WarmupType::Linear;
  } else {
    config.kind = lrSchedule;
    config.warmupType = warmupType;
  }
  config.lr = lr;
  config.minLr = cosMinRatio.hasValue() ? cosMinRatio * lr : double(minLr);
  config.warmupSteps = warmupSteps;
  config.warmupRatio = warmupRatio;
  config.totalSteps = totalSteps;
  config.warmupMinRatio = warmupMinRatio;
  config.cycleFirstStepSize = cycleFirstStepSize;
  config.cycleSecondStepSize = cycleSecondStepSize;
  config.decayLrRate = decayLrRate;
  config.decayStepSize = decayStepSize;
  config.cycleFirstStairCount = cycleFirstStairCount;
  // DeepSpeed: cycle_second_stair_count None is the first's.
  config.cycleSecondStairCount = cycleSecondStairCount.hasValue()
                                     ? uint64_t(cycleSecondStairCount)
                                     : uint64_t(cycleFirstStairCount);
  config.rangeStepSize = lrRangeTestStepSize;
  config.rangeStepRate = lrRangeTestStepRate;
  config.rangeStaircase = lrRangeTestStaircase;
  return config;
}

std::optional<LoraPassOptions>
TrainingPipelineOptions::loraOptions(std::string &error) const {
  LoraPassOptions options;
  StringRef spec = lora;
  if (spec.empty())
    return options;
  // KEY=VALUE pieces split at each comma that starts a KEY= (a lowercase
  // word), so that a regular expression may hold commas ({1,3}).
  static constexpr StringLiteral kKeys[] = {
      "r",      "alpha", "dropout",         "targets",
      "rslora", "bias",  "modules-to-save", "seed"};
  auto startsKey = [&](StringRef rest) {
    size_t word = rest.find_first_not_of("abcdefghijklmnopqrstuvwxyz_-");
    return word != 0 && word != StringRef::npos && rest[word] == '=';
  };
  llvm::StringSet<> seen;
  while (!spec.empty()) {
    size_t end = 0;
    while ((end = spec.find(',', end)) != StringRef::npos &&
           !startsKey(spec.drop_front(end + 1)))
      ++end;
    StringRef piece = spec.take_front(end);
    spec = end == StringRef::npos ? StringRef() : spec.drop_front(end + 1);
    auto [key, value] = piece.split('=');
    auto fail = [&](const Twine &why) {
      error = ("--lora '" + lora + "': " + why).str();
      return std::nullopt;
    };
    if (!piece.contains('=') || !llvm::is_contained(kKeys, key))
      return fail("'" + piece +
                  "' is not KEY=VALUE with KEY one of r, alpha, "
                  "dropout, targets, rslora, bias, modules-to-save, seed");
    if (!seen.insert(key).second)
      return fail("'" + key + "' is given twice");
    auto number = [value = value](double &out) {
      return !value.getAsDouble(out) && std::isfinite(out);
    };
    if (key == "r") {
      if (value.getAsInteger(10, options.rank) || options.rank < 1)
        return fail("r must be a positive integer, got '" + value + "'");
    } else if (key == "alpha") {
      double alpha;
      if (!number(alpha) || alpha <= 0)
        return fail("alpha must be a positive number, got '" + value + "'");
      options.alpha = alpha;
    } else if (key == "dropout") {
      double dropout;
      if (!number(dropout) || dropout < 0 || dropout >= 1)
        return fail("dropout must be in [0, 1), got '" + value + "'");
      options.dropout = dropout;
    } else if (key == "targets") {
      options.targets = value.str();
    } else if (key == "rslora") {
      if (value != "true" && value != "false")
        return fail("rslora must be true or false, got '" + value + "'");
      options.rslora = value == "true";
    } else if (key == "bias") {
      std::optional<LoraBias> bias = parseSpelling(kLoraBiases, value);
      if (!bias)
        return fail("bias must be " + listOfChoices(spellings(kLoraBiases)) +
                    ", got '" + value + "'");
      options.bias = *bias;
    } else if (key == "modules-to-save") {
      options.modulesToSave = value.str();
    } else if (value.getAsInteger(10, options.seed)) {
      return fail("seed must be an integer, got '" + value + "'");
    }
  }
  if (options.targets.empty()) {
    error = "--lora '" + lora +
            "': targets=REGEX is required (the modules to adapt, for example "
            "q_proj|v_proj, or c_attn for GPT-2)";
    return std::nullopt;
  }
  return options;
}

LogicalResult TrainingPipelineOptions::verify(std::string &error) const {
  auto fail = [&](const std::string &message) {
    error = message;
    return failure();
  };
  if (!betas.empty() && betas.size() != 2)
    return fail("--betas expects B1,B2 (e.g. 0.9,0.999), got " +
                std::to_string(betas.size()) + " values");
  if (gradAccum < 1)
    return fail("--grad-accum must be at least 1");
  if (gradAccumDtype.hasValue() && gradAccum == 1)
    return fail("--grad-accum-dtype applies with --grad-accum > 1");
  if (lrSchedulerType.hasValue() && lrSchedule.hasValue())
    return fail("--lr-scheduler-type and --lr-schedule both name the "
                "schedule: give one");
  if (!(warmupRatio >= 0 && warmupRatio <= 1))
    return fail("--warmup-ratio must be within [0, 1], got " +
                std::to_string(warmupRatio));
  for (auto [name, value] : {std::pair<const char *, double>{"lr", lr},
                             {"min-lr", minLr},
                             {"warmup-min-ratio", warmupMinRatio},
                             {"cos-min-ratio", cosMinRatio},
                             {"decay-lr-rate", decayLrRate},
                             {"lr-range-test-step-rate", lrRangeTestStepRate}})
    if (!(value >= 0) || !std::isfinite(value))
      return fail(std::string("--") + name +
                  " must be a finite non-negative number, got " +
                  std::to_string(value));
  if (cosMinRatio.hasValue() && minLr.hasValue())
    return fail("--cos-min-ratio and --min-lr both set the cosine's end: "
                "give one");
  if (cycleFirstStepSize < 1)
    return fail("--cycle-first-step-size must be at least 1");
  if (lrRangeTestStepSize < 1)
    return fail("--lr-range-test-step-size must be at least 1");
  std::string precisionName = spell(kPrecisions, precision.getValue()).str();
  if (!keepFp32.empty() && !mixedPrecision())
    return fail("--keep-fp32 applies to --precision bf16 or fp16, not '" +
                precisionName + "'");
  if (halfWeights && !mixedPrecision())
    return fail("--half-weights applies to --precision bf16 or fp16, not '" +
                precisionName + "'");
  // Loss scaling is fp16's; bf16 has f32's range and needs none.
  std::pair<const char *, bool> scaling[] = {
      {"loss-scale", lossScale.hasValue()},
      {"initial-scale-power", initialScalePower.hasValue()},
      {"loss-scale-window", lossScaleWindow.hasValue()},
      {"hysteresis", hysteresis.hasValue()},
      {"consecutive-hysteresis", consecutiveHysteresis.hasValue()},
      {"min-loss-scale", minLossScale.hasValue()}};
  for (auto [name, given] : scaling)
    if (given && precision != Precision::Fp16)
      return fail(std::string("--") + name +
                  " applies to --precision fp16 (loss scaling), not '" +
                  precisionName + "'");
  if (!(lossScale >= 0) || !std::isfinite(lossScale)) {
    std::ostringstream given;
    given << double(lossScale);
    return fail("--loss-scale must be 0 (dynamic) or a positive scale, got " +
                given.str());
  }
  if (initialScalePower > 126)
    return fail("--initial-scale-power " + std::to_string(initialScalePower) +
                " is beyond float32's range (at most 126)");
  if (lossScaleWindow < 1)
    return fail("--loss-scale-window must be at least 1");
  if (hysteresis < 1)
    return fail("--hysteresis must be at least 1");
  if (!(minLossScale > 0))
    return fail("--min-loss-scale must be positive");
  if (!loraOptions(error))
    return failure();
  if (baseDtype == BaseType::Nf4) {
    if (lora.empty())
      return fail("--base-dtype nf4 quantizes the frozen base of a LoRA "
                  "step: give --lora too");
    if (zeroStage == ZeroStage::Parameters)
      return fail("--base-dtype nf4 with --zero 3: NF4 weights stay whole on "
                  "every rank (ZeRO stages 1 and 2 shard the adapters' "
                  "gradients and optimizer state)");
  }
  if (!parseRecomputeSpec(recompute, error))
    return failure();
  if (recomputeSearchNodes < 0)
    return fail("--recompute-search-nodes must be 0 or more, got " +
                std::to_string(recomputeSearchNodes));
  if (!recomputeBlocks.empty() && recompute != "full")
    return fail("--recompute-blocks applies to --recompute full, not '" +
                recompute + "'");
  if (paramPersistenceThreshold < 0)
    return fail("--param-persistence-threshold must not be negative");
  if (worldSize < 1)
    return fail("--world-size must be at least 1");
  if (reduceBucketElements < 0)
    return fail("--reduce-bucket-elements must not be negative, got " +
                std::to_string(reduceBucketElements));
  if (reduceBucketElements > 0 && reduceBucketBytes.hasValue())
    return fail("--reduce-bucket-elements and --reduce-bucket-bytes both "
                "size the buckets: give one");
  if (reduceBucketBytes < 1)
    return fail("--reduce-bucket-bytes must be positive, got " +
                std::to_string(reduceBucketBytes));
  for (auto [flag, value] :
       {std::pair<const char *, int64_t>{"prefetch-bytes", prefetchBytes},
        {"prefetch-elements", prefetchElements},
        {"max-live-bytes", maxLiveBytes},
        {"max-live-elements", maxLiveElements},
        {"allgather-bucket-bytes", allgatherBucketBytes},
        {"allgather-bucket-elements", allgatherBucketElements}})
    if (value < 0)
      return fail(std::string("--") + flag + " must not be negative, got " +
                  std::to_string(value));
  if (prefetchElements > 0 && prefetchBytes > 0)
    return fail("--prefetch-elements and --prefetch-bytes both size the "
                "prefetch: give one");
  if (maxLiveElements > 0 && maxLiveBytes > 0)
    return fail("--max-live-elements and --max-live-bytes both bound the "
                "gathered parameters: give one");
  bool elements = prefetchElements > 0 || maxLiveElements > 0 ||
                  allgatherBucketElements > 0;
  bool bytes =
      prefetchBytes > 0 || maxLiveBytes > 0 || allgatherBucketBytes > 0;
  if (elements && bytes)
    return fail("--prefetch-elements, --max-live-elements and "
                "--allgather-bucket-elements count elements, the -bytes "
                "flags bytes: give the gather limits in one unit");
  if (allgatherBucketElements > 0 && allgatherBucketBytes > 0)
    return fail("--allgather-bucket-elements and --allgather-bucket-bytes "
                "both size the buckets: give one");
  if (!overlapComm && (prefetchBytes > 0 || prefetchElements > 0 ||
                       allgatherBucketBytes > 0 || allgatherBucketElements > 0))
    return fail("--prefetch-bytes, --prefetch-elements and "
                "--allgather-bucket-* need --overlap-comm (gathers issued "
                "ahead run on the communication stream)");
  return success();
}

llvm::cl::Option *TrainingPipelineOptions::findOption(llvm::StringRef name) {
  return OptionsMap.lookup(name);
}

std::vector<std::string> TrainingPipelineOptions::optionNames() const {
  std::vector<std::string> names;
  for (const auto &entry : OptionsMap)
    names.push_back(entry.first.str());
  std::sort(names.begin(), names.end());
  return names;
}

void mlir::ztc::buildOnnxToNNPipeline(OpPassManager &pm) {
  // Convert node by node; the converters fold shape subgraphs as they go.
  pm.addNestedPass<func::FuncOp>(createConvertOnnxToNNPass());
  // Canonicalize folds what only becomes constant after conversion and drops
  // dead shape computations; CSE merges repeated constants.
  pm.addNestedPass<func::FuncOp>(createCanonicalizerPass());
  pm.addNestedPass<func::FuncOp>(createCSEPass());
}

KernelLoweringOptions
KernelLoweringOptions::forTarget(::ztc::rt::Target target) {
  KernelLoweringOptions options;
  const ::ztc::rt::TargetInfo &info = ::ztc::rt::targetInfo(target);
  if (info.plannedScratch)
    options.plannedScratch = info.reservedBytes;
  options.inputSets = info.inputSets;
  options.groupLaunches = info.groupsLaunches;
  options.channelsLastHalfTypes = info.channelsLastHalfTypes;
  return options;
}

KernelLoweringOptions TrainingPipelineOptions::kernelLowering() const {
  KernelLoweringOptions lowering = KernelLoweringOptions::forTarget(target);
  lowering.checkFinite = checkFinite;
  lowering.schedule = scheduleOptions();
  lowering.channelsLast = channelsLast();
  // TF32 is a CUDA matter: the CPU's step stays as it was.
  if (target == ::ztc::rt::Target::Cuda) {
    lowering.tf32.products = allowTf32;
    lowering.tf32.convolutions = convTf32;
  }
  return lowering;
}

void mlir::ztc::buildNNToKernelPipeline(OpPassManager &pm,
                                        const KernelLoweringOptions &options) {
  // Expand optimizer updates into nn arithmetic (mixed precision: with each
  // half gradient widened at its readers), bufferize, let matmuls read
  // transposed operands in place, fuse elementwise chains (fewer buffers to
  // place), then place what is left in the arena. --check-finite scans
  // every op's result right after its kernels.
  pm.addNestedPass<func::FuncOp>(createLowerTrainPass());
  pm.addNestedPass<func::FuncOp>(createHalfGradientsPass());
  // Each expanded update computes its step's scalars (bias corrections,
  // the decayed learning rate) from the same hyperparameters: CSE keeps one
  // of each for the whole step instead of one kernel each per parameter.
  pm.addNestedPass<func::FuncOp>(createCSEPass());
  // Training batch norms, whole through autodiff, written out after CSE,
  // which would merge their repeated subtractions of the mean.
  pm.addNestedPass<func::FuncOp>(createExpandBatchNormPass());
  if (options.channelsLast)
    pm.addNestedPass<func::FuncOp>(
        createChannelsLastPass({options.channelsLastHalfTypes}));
  if (options.checkFinite)
    pm.addNestedPass<func::FuncOp>(createCheckFinitePass());
  pm.addNestedPass<func::FuncOp>(createConvertNNToKernelPass());
  if (options.tf32.products || options.tf32.convolutions)
    pm.addNestedPass<func::FuncOp>(createTf32Pass(options.tf32));
  pm.addNestedPass<func::FuncOp>(createFoldTransposesPass());
  // Attention reads q, k and v inside a fused projection and writes their
  // gradients into its gradient's concat, now that its head splits read in
  // place.
  pm.addNestedPass<func::FuncOp>(createFoldHeadWindowsPass());
  pm.addNestedPass<func::FuncOp>(createFusePass());
  // A product adds its bias (and a residual) as it stores, instead of a
  // loop reading it again.
  pm.addNestedPass<func::FuncOp>(createMatmulEpiloguesPass());
  // Collectives on their own stream, before planning so the planner keeps
  // what the streams may still touch.
  if (options.schedule)
    pm.addNestedPass<func::FuncOp>(
        createScheduleCollectivesPass(*options.schedule));
  // A result over an input nothing reads after it (the logits under their
  // log-softmax, a gradient under the loop that consumes it), once the
  // streams are known.
  pm.addNestedPass<func::FuncOp>(createWriteInPlacePass());
  // The scratch the target's kernels work in, as buffers the plan places.
  if (options.plannedScratch) {
    PlanScratchPassOptions scratch;
    scratch.reservedBytes = *options.plannedScratch;
    scratch.inputSets = options.inputSets;
    pm.addNestedPass<func::FuncOp>(createPlanScratchPass(scratch));
  }
  pm.addNestedPass<func::FuncOp>(createPlanMemoryPass());
  // Independent loops in a row (an optimizer's updates) as one launch.
  if (options.groupLaunches)
    pm.addNestedPass<func::FuncOp>(createGroupLaunchesPass());
}

std::optional<ScheduleCollectivesPassOptions>
TrainingPipelineOptions::scheduleOptions() const {
  if (!overlapComm || worldSize <= 1)
    return std::nullopt;
  ScheduleCollectivesPassOptions schedule;
  schedule.prefetchBytes = prefetchBytes;
  schedule.prefetchElements = prefetchElements;
  schedule.maxLiveBytes = maxLiveBytes;
  schedule.maxLiveElements = maxLiveElements;
  schedule.bucketBytes = allgatherBucketBytes;
  schedule.bucketElements = allgatherBucketElements;
  return schedule;
}

AttachLossPassOptions TrainingPipelineOptions::attachLossOptions() const {
  AttachLossPassOptions loss;
  loss.loss = this->loss.getValue();
  loss.lossInput = lossInput;
  loss.labels = labels;
  loss.ignoreIndex = ignoreIndex;
  loss.tokenWeighted = tokenWeightedLoss;
  return loss;
}

AutodiffPassOptions TrainingPipelineOptions::autodiffOptions() const {
  AutodiffPassOptions autodiff;
  autodiff.frozen.assign(freeze.begin(), freeze.end());
  // fp16: the backward runs on the scaled loss (dynamic: ztc-loss-scale,
  // after ZeRO, keeps the scale).
  if (precision == Precision::Fp16) {
    autodiff.lossScaleValue = lossScale;
    autodiff.initialScalePower = initialScalePower;
  }
  return autodiff;
}

AutocastPassOptions TrainingPipelineOptions::autocastOptions() const {
  AutocastPassOptions autocast;
  autocast.precision =
      precision == Precision::Fp16 ? HalfType::Fp16 : HalfType::Bf16;
  autocast.keepFp32 = keepFp32;
  autocast.halfWeights = halfWeights;
  return autocast;
}

RecomputePassOptions TrainingPipelineOptions::recomputeOptions() const {
  RecomputePassOptions recompute;
  std::string error;
  if (std::optional<RecomputeSpec> spec =
          parseRecomputeSpec(this->recompute, error)) {
    recompute.policy = spec->policy;
    recompute.budget = spec->budget;
  }
  recompute.blocks = recomputeBlocks;
  recompute.searchNodes = recomputeSearchNodes;
  return recompute;
}

AccumulatePassOptions TrainingPipelineOptions::accumulateOptions() const {
  AccumulatePassOptions accumulate;
  accumulate.microBatches = gradAccum;
  accumulate.accumDtype = gradAccumDtype.getValue();
  return accumulate;
}

OptimizerPassOptions TrainingPipelineOptions::optimizerOptions() const {
  OptimizerPassOptions optimizer;
  optimizer.optimizer = this->optimizer.getValue();
  optimizer.momentum = momentum;
  optimizer.nesterov = nesterov;
  optimizer.weightDecay = weightDecay;
  std::tie(optimizer.beta1, optimizer.beta2) = adamBetas();
  optimizer.eps = eps;
  optimizer.clipGradNorm = clipGradNorm;
  return optimizer;
}

ZeroPassOptions TrainingPipelineOptions::zeroOptions() const {
  ZeroPassOptions zero;
  zero.stage = zeroStage.getValue();
  zero.worldSize = worldSize;
  zero.reduceBucketBytes = reduceBucketBytes;
  zero.reduceBucketElements = reduceBucketElements;
  zero.paramPersistenceThreshold = paramPersistenceThreshold;
  zero.commDtype = commDtype.getValue();
  // 8-bit states are quantized in blocks no rank may split.
  if (optimizer == OptimizerKind::Adam8bit ||
      optimizer == OptimizerKind::Adamw8bit)
    zero.shardAlignment = train::k8bitBlock;
  return zero;
}

LossScalePassOptions TrainingPipelineOptions::lossScaleOptions() const {
  LossScalePassOptions lossScale;
  lossScale.window = lossScaleWindow;
  lossScale.hysteresis = hysteresis;
  lossScale.consecutiveHysteresis = consecutiveHysteresis;
  lossScale.minScale = minLossScale;
  return lossScale;
}

void mlir::ztc::buildForwardPipeline(OpPassManager &pm,
                                     const KernelLoweringOptions &lowering) {
  buildOnnxToNNPipeline(pm);
  BuildEntriesPassOptions entries;
  entries.entries.push_back("forward");
  pm.addPass(createBuildEntriesPass(entries));
  pm.addNestedPass<func::FuncOp>(createCanonicalizerPass());
  buildNNToKernelPipeline(pm, lowering);
}

void mlir::ztc::buildTrainingPipeline(OpPassManager &pm,
                                      const TrainingPipelineOptions &options) {
  buildTrainingNNPipeline(pm, options);
  // 7. Kernels, fused and planned.
  buildNNToKernelPipeline(pm, options.kernelLowering());
}

void mlir::ztc::buildTrainingNNPipeline(
    OpPassManager &pm, const TrainingPipelineOptions &options) {
  // 1. The model in nn, static shapes.
  buildOnnxToNNPipeline(pm);

  // 1b. Adapters, before the precision slot casts their products too.
  std::string loraError;
  std::optional<LoraPassOptions> lora = options.loraOptions(loraError);
  if (lora && !lora->targets.empty()) {
    lora->baseDtype = options.baseDtype.getValue();
    pm.addNestedPass<func::FuncOp>(createLoraPass(*lora));
  }

  // 1c. Attention as one op, before the precision slot gives it a compute
  // type and before autodiff builds its one backward op.
  if (options.fusesAttention())
    pm.addNestedPass<func::FuncOp>(createFuseAttentionPass());

  // 2. [precision slot] fp64 promotes before the loss, so the loss and every
  // gradient op are built in double too.
  // bf16 and fp16 give each op a compute type before the loss, which is
  // then built on the model's f32 outputs.
  if (options.precision == Precision::Fp64)
    pm.addNestedPass<func::FuncOp>(createPromoteF64Pass());
  if (options.mixedPrecision()) {
    pm.addNestedPass<func::FuncOp>(
        createAutocastPass(options.autocastOptions()));
  }

  // 3. Loss and gradients; canonicalize and CSE fold the seed's broadcasts
  // and merge the backward's repeated constants.
  pm.addNestedPass<func::FuncOp>(
      createAttachLossPass(options.attachLossOptions()));
  // The classifier's product and the loss as one op, whose VJP is one
  // backward op: neither holds the logits.
  if (options.fusesCrossEntropy())
    pm.addNestedPass<func::FuncOp>(createFuseCrossEntropyPass());
  pm.addNestedPass<func::FuncOp>(createAutodiffPass(options.autodiffOptions()));
  pm.addNestedPass<func::FuncOp>(createCanonicalizerPass());
  pm.addNestedPass<func::FuncOp>(createCSEPass());

  // 4. [recompute slot] What the backward keeps and what it recomputes, on
  // the forward/backward graph before it is split into entries (with
  // `none`, the pass only reports the saved activations). Budget mode
  // measures each plan it weighs by planning the rest of the step on a
  // copy: stages 5 to 7.
  RecomputePassOptions recompute = options.recomputeOptions();
  auto tail = std::make_shared<TrainingPipelineOptions>();
  tail->copyOptionValuesFrom(options);
  pm.addPass(createRecomputePass(
      recompute, [tail](ModuleOp module) -> FailureOr<uint64_t> {
        PassManager pm(module.getContext());
        buildTrainingEntriesPipeline(pm, *tail);
        buildNNToKernelPipeline(pm, tail->kernelLowering());
        if (failed(pm.run(module)))
          return failure();
        FailureOr<StepFootprint> footprint = measureFootprint(module);
        if (failed(footprint))
          return failure();
        return footprint->total();
      }));
  buildTrainingEntriesPipeline(pm, options);
}

void mlir::ztc::buildTrainingEntriesPipeline(
    OpPassManager &pm, const TrainingPipelineOptions &options) {
  // 5. Entries, accumulation, the optimizer on @train_step; the cleanup
  // kills what an entry does not return (the loss entry's backward).
  BuildEntriesPassOptions entries;
  std::vector<std::string> kinds = options.entryKinds();
  entries.entries.assign(kinds.begin(), kinds.end());
  pm.addPass(createBuildEntriesPass(entries));
  // An entry with a fused cross entropy's gradients takes the loss from
  // the backward op, which recomputes the logits anyway.
  pm.addNestedPass<func::FuncOp>(createMergeCrossEntropyPass());
  pm.addPass(createAccumulatePass(options.accumulateOptions()));
  pm.addNestedPass<func::FuncOp>(
      createOptimizerPass(options.optimizerOptions()));
  pm.addNestedPass<func::FuncOp>(createCanonicalizerPass());
  pm.addNestedPass<func::FuncOp>(createCSEPass());

  // 6. ZeRO: whole updates are still visible (ztc-lower-train has not
  // expanded them), so ztc-zero can shard them.
  pm.addNestedPass<func::FuncOp>(createZeroPass(options.zeroOptions()));
  // Dynamic loss scaling checks the gradients the updates read (whole or,
  // after ZeRO, shards) and skips an overflowing step.
  pm.addNestedPass<func::FuncOp>(
      createLossScalePass(options.lossScaleOptions()));
  pm.addNestedPass<func::FuncOp>(createCanonicalizerPass());
  pm.addNestedPass<func::FuncOp>(createCSEPass());
  // 6b. QLoRA: the frozen base in 4 bits, now that the backward and the
  // updates are built on its float form.
  if (options.baseDtype == BaseType::Nf4)
    pm.addNestedPass<func::FuncOp>(createNf4WeightsPass());
}

void mlir::ztc::registerAllPasses() {
  registerZtcPasses();
  PassPipelineRegistration<>(
      "ztc-import-pipeline",
      "Take an imported onnx module to the nn dialect (ztc import --emit nn)",
      [](OpPassManager &pm) { buildOnnxToNNPipeline(pm); });
  PassPipelineRegistration<>(
      "ztc-lower-to-kernel-pipeline",
      "Lower nn entries to fused kernels with a memory plan",
      [](OpPassManager &pm) { buildNNToKernelPipeline(pm); });
  PassPipelineRegistration<>(
      "ztc-forward-pipeline",
      "Compile an imported onnx module's forward step to planned kernels "
      "(ztc run)",
      [](OpPassManager &pm) { buildForwardPipeline(pm); });
  // Registered by hand rather than with PassPipelineRegistration so that
  // option values no pass checks fail the pipeline with a message.
  registerPassPipeline(
      "ztc-training-pipeline",
      "Compile an imported onnx module's training step to planned kernels "
      "(ztc compile)",
      [](OpPassManager &pm, StringRef text,
         function_ref<LogicalResult(const Twine &)> errorHandler) {
        TrainingPipelineOptions options;
        if (failed(options.parseFromString(text)))
          return failure();
        std::string error;
        if (failed(options.verify(error)))
          return errorHandler(error);
        buildTrainingPipeline(pm, options);
        return success();
      },
      [](function_ref<void(const detail::PassOptions &)> handler) {
        handler(TrainingPipelineOptions());
      });
}

void mlir::ztc::registerAllDialects(DialectRegistry &registry) {
  registry.insert<func::FuncDialect, arith::ArithDialect, math::MathDialect,
                  onnx::OnnxDialect, nn::NNDialect, train::TrainDialect,
                  kernel::KernelDialect, dist::DistDialect>();
}
