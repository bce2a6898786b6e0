//===- ScheduleTest.cpp - DeepSpeed learning-rate schedules ---------------===//
//
// Each expected value is worked out by hand from DeepSpeed's formulas
// (deepspeed/runtime/lr_schedules.py: WarmupLR, WarmupDecayLR,
// WarmupCosineLR) at last_batch_iteration i = step - 1, with W =
// max(2, warmup_steps); the comment above each value shows the arithmetic.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/Schedule.h"

#include "TestUtil.h"
#include "runtime/Error.h"

using namespace ztc::rt;

namespace {

ScheduleConfig config(LrScheduleKind kind, double lr, double minLr,
                      uint64_t warmup, uint64_t total,
                      WarmupType type = WarmupType::Linear) {
  ScheduleConfig config;
  config.kind = kind;
  config.lr = lr;
  config.minLr = minLr;
  config.warmupSteps = warmup;
  config.totalSteps = total;
  config.warmupType = type;
  return config;
}

constexpr double kTolerance = 1e-15;

} // namespace

TEST(ScheduleTest, Constant) {
  Schedule schedule(config(LrScheduleKind::Constant, 0.01, 0.5, 100, 0));
  EXPECT_EQ(schedule.lrAtStep(1), 0.01);
  EXPECT_EQ(schedule.lrAtStep(1000000), 0.01);
}

TEST(ScheduleTest, WarmupLinear) {
  Schedule schedule(config(LrScheduleKind::Warmup, 0.1, 0.01, 10, 0));
  // i = 0: gamma 0/10 -> min_lr.
  EXPECT_NEAR(schedule.lrAtStep(1), 0.01, kTolerance);
  // i = 5: 0.01 + 0.09 * 5/10.
  EXPECT_NEAR(schedule.lrAtStep(6), 0.055, kTolerance);
  // i = 9: 0.01 + 0.09 * 9/10.
  EXPECT_NEAR(schedule.lrAtStep(10), 0.091, kTolerance);
  // i >= 10: gamma 1.
  EXPECT_NEAR(schedule.lrAtStep(11), 0.1, kTolerance);
  EXPECT_NEAR(schedule.lrAtStep(5000), 0.1, kTolerance);
  EXPECT_EQ(schedule.lrAtIteration(5), schedule.lrAtStep(6));
}

TEST(ScheduleTest, WarmupLog) {
  Schedule schedule(
      config(LrScheduleKind::Warmup, 0.1, 0.0, 10, 0, WarmupType::Log));
  // i = 0: log(1) / log(10) = 0.
  EXPECT_NEAR(schedule.lrAtStep(1), 0.0, kTolerance);
  // i = 4: 0.1 * log(5) / log(10).
  EXPECT_NEAR(schedule.lrAtStep(5), 0.06989700043360188, kTolerance);
  // i = 9: log(10) / log(10) = 1.
  EXPECT_NEAR(schedule.lrAtStep(10), 0.1, kTolerance);
  EXPECT_NEAR(schedule.lrAtStep(11), 0.1, kTolerance);
}

TEST(ScheduleTest, WarmupShorterThanTwoStepsIsTwo) {
  // DeepSpeed: warmup_num_steps = max(2, warmup_num_steps).
  Schedule schedule(config(LrScheduleKind::Warmup, 0.2, 0.1, 0, 0));
  EXPECT_NEAR(schedule.lrAtStep(1), 0.1, kTolerance);  // 0.1 + 0.1 * 0/2
  EXPECT_NEAR(schedule.lrAtStep(2), 0.15, kTolerance); // 0.1 + 0.1 * 1/2
  EXPECT_NEAR(schedule.lrAtStep(3), 0.2, kTolerance);
}

TEST(ScheduleTest, WarmupDecay) {
  Schedule schedule(config(LrScheduleKind::WarmupDecay, 0.1, 0.0, 10, 110));
  // Warmup as WarmupLR: i = 5 -> 0.1 * 5/10.
  EXPECT_NEAR(schedule.lrAtStep(6), 0.05, kTolerance);
  // i = 10: (110 - 10) / (110 - 10) = 1.
  EXPECT_NEAR(schedule.lrAtStep(11), 0.1, kTolerance);
  // i = 60: (110 - 60) / 100.
  EXPECT_NEAR(schedule.lrAtStep(61), 0.05, kTolerance);
  // i = 109: 1 / 100.
  EXPECT_NEAR(schedule.lrAtStep(110), 0.001, kTolerance);
  // i >= 110: max(0, ...) = 0.
  EXPECT_NEAR(schedule.lrAtStep(111), 0.0, kTolerance);
  EXPECT_NEAR(schedule.lrAtStep(500), 0.0, kTolerance);

  // The decay ends at min_lr: 0.02 + (0.1 - 0.02) * 50/100.
  Schedule floor(config(LrScheduleKind::WarmupDecay, 0.1, 0.02, 10, 110));
  EXPECT_NEAR(floor.lrAtStep(61), 0.06, kTolerance);
  EXPECT_NEAR(floor.lrAtStep(500), 0.02, kTolerance);
}

TEST(ScheduleTest, WarmupCosine) {
  // cos_min_ratio = 0.001 / 0.1 = 0.01; warmup_min_ratio = 0.
  Schedule schedule(config(LrScheduleKind::WarmupCosine, 0.1, 0.001, 10, 110));
  // i = 0: ratio 0 + 0/10 * (1 - 0).
  EXPECT_NEAR(schedule.lrAtStep(1), 0.0, kTolerance);
  // i = 5: ratio 5/10.
  EXPECT_NEAR(schedule.lrAtStep(6), 0.05, kTolerance);
  // i = 10: real_last_step 1 of 100:
  // 0.1 * (0.01 + 0.99 * (1 + cos(pi / 100)) / 2).
  EXPECT_NEAR(schedule.lrAtStep(11), 0.09997557473810371, kTolerance);
  // i = 59: 50 of 100, cos(pi / 2) = 0: 0.1 * (0.01 + 0.99 * 0.5).
  EXPECT_NEAR(schedule.lrAtStep(60), 0.0505, kTolerance);
  // i = 84: 75 of 100: 0.1 * (0.01 + 0.99 * (1 + cos(0.75 pi)) / 2).
  EXPECT_NEAR(schedule.lrAtStep(85), 0.015498214331265903, kTolerance);
  // i = 109: 100 of 100, cos(pi) = -1: exactly min_lr.
  EXPECT_NEAR(schedule.lrAtStep(110), 0.001, kTolerance);

  // warmup_min_ratio 0.2, log warmup: i = 0 -> 0.1 * (0.2 + 0 * 0.8);
  // i = 4 -> 0.1 * (0.2 + 0.8 * log(5) / log(10)).
  ScheduleConfig withFloor =
      config(LrScheduleKind::WarmupCosine, 0.1, 0.0, 10, 110, WarmupType::Log);
  withFloor.warmupMinRatio = 0.2;
  Schedule floor(withFloor);
  EXPECT_NEAR(floor.lrAtStep(1), 0.02, kTolerance);
  EXPECT_NEAR(floor.lrAtStep(5), 0.1 * (0.2 + 0.8 * 0.6989700043360188),
              kTolerance);
}

TEST(ScheduleTest, Names) {
  for (LrScheduleKind kind :
       {LrScheduleKind::Constant, LrScheduleKind::Warmup,
        LrScheduleKind::WarmupDecay, LrScheduleKind::WarmupCosine})
    EXPECT_EQ(parseScheduleKind(scheduleName(kind)), kind);
  EXPECT_EQ(std::string(scheduleName(LrScheduleKind::WarmupCosine)),
            "warmup-cosine");
  EXPECT_FALSE(parseScheduleKind("cosine"));
  EXPECT_EQ(parseWarmupType("log"), WarmupType::Log);
  EXPECT_EQ(parseWarmupType("linear"), WarmupType::Linear);
  EXPECT_FALSE(parseWarmupType("exp"));
}

TEST(ScheduleTest, Errors) {
  auto error = [](const ScheduleConfig &config) {
    return ZTC_ERROR_MESSAGE(Schedule{config});
  };
  EXPECT_EQ(error(config(LrScheduleKind::WarmupDecay, 0.1, 0, 10, 0)),
            "lr schedule 'warmup-decay' needs total_steps > 0");
  EXPECT_EQ(error(config(LrScheduleKind::WarmupCosine, 0.1, 0, 10, 10)),
            "lr schedule 'warmup-cosine' needs total_steps (10) greater than "
            "its warmup (10 steps; DeepSpeed warms up over at least 2)");
  EXPECT_EQ(error(config(LrScheduleKind::WarmupCosine, 0.1, 0, 0, 2)),
            "lr schedule 'warmup-cosine' needs total_steps (2) greater than "
            "its warmup (2 steps; DeepSpeed warms up over at least 2)");
  EXPECT_EQ(error(config(LrScheduleKind::Constant, -1, 0, 0, 0)),
            "lr schedule: lr must be a finite non-negative number, got "
            "-1.000000");
  Schedule schedule(config(LrScheduleKind::Constant, 0.1, 0, 0, 0));
  EXPECT_EQ(ZTC_ERROR_MESSAGE(schedule.lrAtStep(0)),
            "lr schedule: optimizer steps count from 1");
}
