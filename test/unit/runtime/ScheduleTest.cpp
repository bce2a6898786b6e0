//===- ScheduleTest.cpp - DeepSpeed learning-rate schedules ---------------===//
//
// Each expected value is worked out by hand from DeepSpeed's formulas
// (deepspeed/runtime/lr_schedules.py: WarmupLR, WarmupDecayLR,
// WarmupCosineLR, OneCycle, LRRangeTest) at last_batch_iteration i = step - 1,
// with W = max(2, warmup_steps); the comment above each value shows the
// arithmetic.
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
        LrScheduleKind::WarmupDecay, LrScheduleKind::WarmupCosine,
        LrScheduleKind::OneCycle, LrScheduleKind::LrRangeTest})
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

TEST(ScheduleTest, OneCycle) {
  // DeepSpeed's OneCycle (the newer lr_schedules.py): cycle_min_lr 0.01,
  // cycle_max_lr 0.1, 20 iterations up and 30 down (total 50, step_ratio
  // 0.4), then decay_lr_rate 0.5 every decay_step_size 10.
  ScheduleConfig c = config(LrScheduleKind::OneCycle, 0.1, 0.01, 0, 0);
  c.cycleFirstStepSize = 20;
  c.cycleSecondStepSize = 30;
  c.decayLrRate = 0.5;
  c.decayStepSize = 10;
  Schedule schedule(c);
  // i = 0: x = 1/50 = 0.02, scale 0.02/0.4 = 0.05: 0.01 + 0.09 * 0.05.
  EXPECT_NEAR(schedule.lrAtIteration(0), 0.0145, kTolerance);
  // i = 19: x = 20/50 = 0.4, scale 1: the peak.
  EXPECT_NEAR(schedule.lrAtIteration(19), 0.1, kTolerance);
  // i = 34: x = 35/50 = 0.7, scale (0.7 - 1)/(0.4 - 1) = 0.5.
  EXPECT_NEAR(schedule.lrAtIteration(34), 0.055, 1e-12);
  // i = 49 < 50: x = 50/50 - 1 = 0, scale 0: back at cycle_min_lr.
  EXPECT_NEAR(schedule.lrAtIteration(49), 0.01, kTolerance);
  // i = 50: decay, d = 1, interval 0.1: 0.01 / (1 + 0.5 * 0.1).
  EXPECT_NEAR(schedule.lrAtIteration(50), 0.01 / 1.05, kTolerance);
  // i = 69: d = 20, interval 2: 0.01 / 2.
  EXPECT_NEAR(schedule.lrAtIteration(69), 0.005, kTolerance);
  // Without decay_step_size the cycle ends at cycle_min_lr; the second
  // half defaults to the first.
  c.decayStepSize = 0;
  c.cycleSecondStepSize = 0;
  Schedule plain(c);
  // i = 9: x = 10/40 = 0.25, step_ratio 0.5, scale 0.5.
  EXPECT_NEAR(plain.lrAtIteration(9), 0.055, 1e-12);
  EXPECT_NEAR(plain.lrAtIteration(500), 0.01, kTolerance);
}

TEST(ScheduleTest, LrRangeTest) {
  // DeepSpeed's LRRangeTest: lr_range_test_min_lr 1e-4, step_size 5,
  // step_rate 2: lr = 1e-4 * (1 + 2 * (i + 1) / 5).
  ScheduleConfig c = config(LrScheduleKind::LrRangeTest, 1e-4, 0, 0, 0);
  c.rangeStepSize = 5;
  c.rangeStepRate = 2.0;
  Schedule continuous(c);
  EXPECT_NEAR(continuous.lrAtStep(1), 1e-4 * 1.4, kTolerance);
  EXPECT_NEAR(continuous.lrAtStep(10), 1e-4 * 5.0, kTolerance);
  // Staircase: floor((i + 1) / 5).
  c.rangeStaircase = true;
  Schedule staircase(c);
  EXPECT_NEAR(staircase.lrAtStep(4), 1e-4, kTolerance);
  EXPECT_NEAR(staircase.lrAtStep(5), 3e-4, kTolerance);
  EXPECT_NEAR(staircase.lrAtStep(9), 3e-4, kTolerance);
  EXPECT_NEAR(staircase.lrAtStep(10), 5e-4, kTolerance);
  c.rangeStepSize = 0;
  EXPECT_NE(ZTC_ERROR_MESSAGE(Schedule{c}).find("lr_range_test_step_size"),
            std::string::npos);
}
