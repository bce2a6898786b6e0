//===- PipelineOptionsTest.cpp - pipeline options project onto passes -----===//
//
// `ztc compile`'s flags are the training pipeline's options; each pass has
// options of its own, declared in passes/Passes.td. The pipeline projects
// its options onto each pass's (TrainingPipelineOptions::zeroOptions and
// the like), so a default changed on one side and not the other would make
// `ztc compile` and `ztc-opt --ztc-<pass>` disagree. These tests hold the
// defaults of both sides equal, field by field, and check what a
// projection derives rather than copies.
//
//===----------------------------------------------------------------------===//

#include "passes/Pipelines/Pipelines.h"
#include "passes/Train/Recompute.h"

#include "gtest/gtest.h"

using namespace mlir::ztc;

namespace {

/// The pipeline's options as parsed from `text` (pipeline syntax).
std::unique_ptr<TrainingPipelineOptions> parsed(llvm::StringRef text) {
  auto options = std::make_unique<TrainingPipelineOptions>();
  EXPECT_TRUE(mlir::succeeded(options->parseFromString(text))) << text.str();
  return options;
}

#define EXPECT_SAME(field) EXPECT_EQ(projected.field, pass.field) << #field

TEST(PipelineOptionsTest, AttachLossDefaultsAgree) {
  AttachLossPassOptions projected =
      TrainingPipelineOptions().attachLossOptions();
  AttachLossPassOptions pass;
  EXPECT_SAME(loss);
  EXPECT_SAME(lossInput);
  EXPECT_SAME(labels);
  EXPECT_SAME(ignoreIndex);
  EXPECT_SAME(tokenWeighted);
}

TEST(PipelineOptionsTest, AutodiffDefaultsAgree) {
  // Without fp16 the backward runs on the loss as it is: the pass's own
  // defaults.
  AutodiffPassOptions projected = TrainingPipelineOptions().autodiffOptions();
  AutodiffPassOptions pass;
  EXPECT_EQ(std::vector<std::string>(projected.frozen.begin(),
                                     projected.frozen.end()),
            std::vector<std::string>(pass.frozen.begin(), pass.frozen.end()));
  EXPECT_SAME(lossScaleValue);
  EXPECT_SAME(initialScalePower);
  // fp16: the pipeline's scale (0, dynamic) and its starting power.
  AutodiffPassOptions fp16 = parsed("precision=fp16")->autodiffOptions();
  EXPECT_EQ(fp16.lossScaleValue, 0.0);
  EXPECT_EQ(fp16.initialScalePower, 16u);
}

TEST(PipelineOptionsTest, AutocastDefaultsAgree) {
  // The pass runs for bf16 and fp16 only; bf16 is its default.
  AutocastPassOptions projected = parsed("precision=bf16")->autocastOptions();
  AutocastPassOptions pass;
  EXPECT_SAME(precision);
  EXPECT_SAME(keepFp32);
  EXPECT_SAME(halfWeights);
}

TEST(PipelineOptionsTest, RecomputeDefaultsAgree) {
  RecomputePassOptions projected = TrainingPipelineOptions().recomputeOptions();
  RecomputePassOptions pass;
  EXPECT_SAME(policy);
  EXPECT_SAME(budget);
  EXPECT_SAME(blocks);
  EXPECT_SAME(searchNodes);
  // --recompute budget=... is the budget policy and its text.
  RecomputePassOptions budget =
      parsed("recompute=budget=0.6")->recomputeOptions();
  EXPECT_EQ(budget.policy, RecomputePolicy::Budget);
  EXPECT_EQ(budget.budget, "0.6");
  EXPECT_EQ(recomputeSpec(budget.policy, budget.budget), "budget=0.6");
  EXPECT_EQ(parsed("recompute=sqrt")->recomputeOptions().policy,
            RecomputePolicy::Sqrt);
}

TEST(PipelineOptionsTest, AccumulateDefaultsAgree) {
  AccumulatePassOptions projected =
      TrainingPipelineOptions().accumulateOptions();
  AccumulatePassOptions pass;
  EXPECT_SAME(microBatches);
  EXPECT_SAME(accumDtype);
}

TEST(PipelineOptionsTest, OptimizerDefaultsAgree) {
  OptimizerPassOptions projected = TrainingPipelineOptions().optimizerOptions();
  OptimizerPassOptions pass;
  EXPECT_SAME(optimizer);
  EXPECT_SAME(momentum);
  EXPECT_SAME(nesterov);
  EXPECT_SAME(weightDecay);
  EXPECT_SAME(beta1);
  EXPECT_SAME(beta2);
  EXPECT_SAME(eps);
  EXPECT_SAME(clipGradNorm);
  // --betas sets both.
  OptimizerPassOptions betas = parsed("betas=0.8,0.95")->optimizerOptions();
  EXPECT_EQ(betas.beta1, 0.8);
  EXPECT_EQ(betas.beta2, 0.95);
}

TEST(PipelineOptionsTest, ZeroDefaultsAgree) {
  ZeroPassOptions projected = TrainingPipelineOptions().zeroOptions();
  ZeroPassOptions pass;
  EXPECT_SAME(stage);
  EXPECT_SAME(worldSize);
  EXPECT_SAME(reduceBucketBytes);
  EXPECT_SAME(reduceBucketElements);
  EXPECT_SAME(commDtype);
  EXPECT_SAME(paramPersistenceThreshold);
  EXPECT_SAME(shardAlignment);
  // 8-bit optimizer states are quantized in blocks of 256 no rank splits.
  EXPECT_EQ(parsed("optimizer=adamw8bit")->zeroOptions().shardAlignment, 256);
  EXPECT_EQ(parsed("optimizer=adamw_bnb_8bit")->zeroOptions().shardAlignment,
            256);
}

TEST(PipelineOptionsTest, LossScaleDefaultsAgree) {
  LossScalePassOptions projected = TrainingPipelineOptions().lossScaleOptions();
  LossScalePassOptions pass;
  EXPECT_SAME(window);
  EXPECT_SAME(hysteresis);
  EXPECT_SAME(consecutiveHysteresis);
  EXPECT_SAME(minScale);
}

TEST(PipelineOptionsTest, ScheduleDefaultsAgree) {
  // The pass runs when communication overlaps on several ranks.
  EXPECT_FALSE(TrainingPipelineOptions().scheduleOptions());
  std::optional<ScheduleCollectivesPassOptions> scheduled =
      parsed("world-size=2 zero=3 overlap-comm=true")->scheduleOptions();
  ASSERT_TRUE(scheduled);
  const ScheduleCollectivesPassOptions &projected = *scheduled;
  ScheduleCollectivesPassOptions pass;
  EXPECT_SAME(prefetchBytes);
  EXPECT_SAME(prefetchElements);
  EXPECT_SAME(maxLiveBytes);
  EXPECT_SAME(maxLiveElements);
  EXPECT_SAME(bucketBytes);
  EXPECT_SAME(bucketElements);
}

TEST(PipelineOptionsTest, TheTargetSetsTheConvolutionLayout) {
  EXPECT_TRUE(TrainingPipelineOptions().channelsLast());
  EXPECT_FALSE(parsed("target=cuda")->channelsLast());
  EXPECT_FALSE(parsed("conv-layout=nchw")->channelsLast());
  // Both libraries take channels-last convolutions: CUDA's on cuDNN.
  auto cudaNhwc = parsed("target=cuda conv-layout=nhwc");
  std::string error;
  EXPECT_TRUE(mlir::succeeded(cudaNhwc->verify(error))) << error;
  EXPECT_TRUE(cudaNhwc->channelsLast());
  EXPECT_TRUE(cudaNhwc->kernelLowering().channelsLast);
  // cuDNN's take f16 and bf16 too; the CPU's fast ones (oneDNN's) are f32.
  EXPECT_TRUE(cudaNhwc->kernelLowering().channelsLastHalfTypes);
  EXPECT_FALSE(
      TrainingPipelineOptions().kernelLowering().channelsLastHalfTypes);
}

TEST(PipelineOptionsTest, ClosedSetsTakeTheirSpellingsOnly) {
  // Every closed set is registered for the driver's errors, with its
  // spellings, and its option's parser takes exactly those.
  TrainingPipelineOptions options;
  for (const char *name :
       {"loss", "base-dtype", "optimizer", "lr-schedule", "lr-scheduler-type",
        "warmup-type", "precision", "grad-accum-dtype", "zero", "comm-dtype",
        "conv-layout"}) {
    auto set = options.closedSets.find(name);
    ASSERT_NE(set, options.closedSets.end()) << name;
    for (const std::string &value : set->second) {
      TrainingPipelineOptions one;
      EXPECT_TRUE(
          mlir::succeeded(one.parseFromString(std::string(name) + "=" + value)))
          << name << "=" << value;
    }
    TrainingPipelineOptions bad;
    EXPECT_TRUE(
        mlir::failed(bad.parseFromString(std::string(name) + "=no-such-value")))
        << name;
  }
  // An alias is its value's: the manifest names the canonical spelling.
  EXPECT_EQ(parsed("optimizer=adamw_8bit")->optimizer.getValue(),
            OptimizerKind::Adamw8bit);
  EXPECT_EQ(spell(kOptimizerKinds, OptimizerKind::Adamw8bit), "adamw8bit");
  EXPECT_EQ(parsed("zero=3")->zeroStage.getValue(), ZeroStage::Parameters);
  EXPECT_EQ(listOfChoices(spellings(kConvLayouts)), "nhwc or nchw");
}

} // namespace
