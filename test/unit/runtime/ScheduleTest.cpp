//===- ScheduleTest.cpp - DeepSpeed's and the Trainer's schedules ---------===//
//
// Two kinds of checks. The formulas: each expected value is worked out by
// hand from DeepSpeed's (deepspeed/runtime/lr_schedules.py: WarmupLR,
// WarmupDecayLR, WarmupCosineLR, OneCycle, LRRangeTest) at
// last_batch_iteration i, with W = max(2, warmup_steps); the comment above
// each value shows the arithmetic. The steps: every case of
// test/fixtures/deepspeed/schedules.json, the rates the real DeepSpeed
// engine's optimizer and the real Trainer's scheduler used at each of 200
// optimizer steps (recorded by test/fixtures/deepspeed/record.py), to 1e-12.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/Schedule.h"

#include "TestUtil.h"
#include "runtime/Error.h"
#include "runtime/io/File.h"
#include "runtime/train/DeepSpeedConfig.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <map>

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

/// OneCycle from cycle_min_lr 0.01 to cycle_max_lr 0.1 over 20 iterations
/// and back over 30.
ScheduleConfig oneCycle20Up30Down() {
  ScheduleConfig c = config(LrScheduleKind::OneCycle, 0.1, 0.01, 0, 0);
  c.cycleFirstStepSize = 20;
  c.cycleSecondStepSize = 30;
  return c;
}

constexpr double kTolerance = 1e-15;

} // namespace

TEST(ScheduleTest, Constant) {
  Schedule schedule(config(LrScheduleKind::Constant, 0.01, 0.5, 100, 0));
  EXPECT_EQ(schedule.lrAtIteration(0), 0.01);
  EXPECT_EQ(schedule.lrAtIteration(999999), 0.01);
}

TEST(ScheduleTest, WarmupLinear) {
  Schedule schedule(config(LrScheduleKind::Warmup, 0.1, 0.01, 10, 0));
  // i = 0: gamma 0/10 -> min_lr.
  EXPECT_NEAR(schedule.lrAtIteration(0), 0.01, kTolerance);
  // i = 5: 0.01 + 0.09 * 5/10.
  EXPECT_NEAR(schedule.lrAtIteration(5), 0.055, kTolerance);
  // i = 9: 0.01 + 0.09 * 9/10.
  EXPECT_NEAR(schedule.lrAtIteration(9), 0.091, kTolerance);
  // i >= 10: gamma 1.
  EXPECT_NEAR(schedule.lrAtIteration(10), 0.1, kTolerance);
  EXPECT_NEAR(schedule.lrAtIteration(4999), 0.1, kTolerance);
  
}

TEST(ScheduleTest, WarmupLog) {
  Schedule schedule(
      config(LrScheduleKind::Warmup, 0.1, 0.0, 10, 0, WarmupType::Log));
  // i = 0: log(1) / log(10) = 0.
  EXPECT_NEAR(schedule.lrAtIteration(0), 0.0, kTolerance);
  // i = 4: 0.1 * log(5) / log(10).
  EXPECT_NEAR(schedule.lrAtIteration(4), 0.06989700043360188, kTolerance);
  // i = 9: log(10) / log(10) = 1.
  EXPECT_NEAR(schedule.lrAtIteration(9), 0.1, kTolerance);
  EXPECT_NEAR(schedule.lrAtIteration(10), 0.1, kTolerance);
}

TEST(ScheduleTest, WarmupShorterThanTwoStepsIsTwo) {
  // DeepSpeed: warmup_num_steps = max(2, warmup_num_steps).
  Schedule schedule(config(LrScheduleKind::Warmup, 0.2, 0.1, 0, 0));
  EXPECT_NEAR(schedule.lrAtIteration(0), 0.1, kTolerance);  // 0.1 + 0.1 * 0/2
  EXPECT_NEAR(schedule.lrAtIteration(1), 0.15, kTolerance); // 0.1 + 0.1 * 1/2
  EXPECT_NEAR(schedule.lrAtIteration(2), 0.2, kTolerance);
}

TEST(ScheduleTest, WarmupDecay) {
  Schedule schedule(config(LrScheduleKind::WarmupDecay, 0.1, 0.0, 10, 110));
  // Warmup as WarmupLR: i = 5 -> 0.1 * 5/10.
  EXPECT_NEAR(schedule.lrAtIteration(5), 0.05, kTolerance);
  // i = 10: (110 - 10) / (110 - 10) = 1.
  EXPECT_NEAR(schedule.lrAtIteration(10), 0.1, kTolerance);
  // i = 60: (110 - 60) / 100.
  EXPECT_NEAR(schedule.lrAtIteration(60), 0.05, kTolerance);
  // i = 109: 1 / 100.
  EXPECT_NEAR(schedule.lrAtIteration(109), 0.001, kTolerance);
  // i >= 110: max(0, ...) = 0.
  EXPECT_NEAR(schedule.lrAtIteration(110), 0.0, kTolerance);
  EXPECT_NEAR(schedule.lrAtIteration(499), 0.0, kTolerance);

  // The decay ends at min_lr: 0.02 + (0.1 - 0.02) * 50/100.
  Schedule floor(config(LrScheduleKind::WarmupDecay, 0.1, 0.02, 10, 110));
  EXPECT_NEAR(floor.lrAtIteration(60), 0.06, kTolerance);
  EXPECT_NEAR(floor.lrAtIteration(499), 0.02, kTolerance);
}

TEST(ScheduleTest, WarmupCosine) {
  // cos_min_ratio = 0.001 / 0.1 = 0.01; warmup_min_ratio = 0.
  Schedule schedule(config(LrScheduleKind::WarmupCosine, 0.1, 0.001, 10, 110));
  // i = 0: ratio 0 + 0/10 * (1 - 0).
  EXPECT_NEAR(schedule.lrAtIteration(0), 0.0, kTolerance);
  // i = 5: ratio 5/10.
  EXPECT_NEAR(schedule.lrAtIteration(5), 0.05, kTolerance);
  // i = 10: real_last_step 1 of 100:
  // 0.1 * (0.01 + 0.99 * (1 + cos(pi / 100)) / 2).
  EXPECT_NEAR(schedule.lrAtIteration(10), 0.09997557473810371, kTolerance);
  // i = 59: 50 of 100, cos(pi / 2) = 0: 0.1 * (0.01 + 0.99 * 0.5).
  EXPECT_NEAR(schedule.lrAtIteration(59), 0.0505, kTolerance);
  // i = 84: 75 of 100: 0.1 * (0.01 + 0.99 * (1 + cos(0.75 pi)) / 2).
  EXPECT_NEAR(schedule.lrAtIteration(84), 0.015498214331265903, kTolerance);
  // i = 109: 100 of 100, cos(pi) = -1: exactly min_lr.
  EXPECT_NEAR(schedule.lrAtIteration(109), 0.001, kTolerance);

  // warmup_min_ratio 0.2, log warmup: i = 0 -> 0.1 * (0.2 + 0 * 0.8);
  // i = 4 -> 0.1 * (0.2 + 0.8 * log(5) / log(10)).
  ScheduleConfig withFloor =
      config(LrScheduleKind::WarmupCosine, 0.1, 0.0, 10, 110, WarmupType::Log);
  withFloor.warmupMinRatio = 0.2;
  Schedule floor(withFloor);
  EXPECT_NEAR(floor.lrAtIteration(0), 0.02, kTolerance);
  EXPECT_NEAR(floor.lrAtIteration(4), 0.1 * (0.2 + 0.8 * 0.6989700043360188),
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
  EXPECT_EQ(error(config(LrScheduleKind::WarmupCosine, 0.1, 0, 10, 0)),
            "lr schedule 'warmup-cosine' needs total_steps > 0");
  EXPECT_EQ(error(config(LrScheduleKind::TrainerLinear, 0.1, 0, 10, 0)),
            "lr schedule 'trainer-linear' needs total_steps > 0");
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
  ScheduleConfig c = oneCycle20Up30Down();
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
  EXPECT_NEAR(continuous.lrAtIteration(0), 1e-4 * 1.4, kTolerance);
  EXPECT_NEAR(continuous.lrAtIteration(9), 1e-4 * 5.0, kTolerance);
  // Staircase: floor((i + 1) / 5).
  c.rangeStaircase = true;
  Schedule staircase(c);
  EXPECT_NEAR(staircase.lrAtIteration(3), 1e-4, kTolerance);
  EXPECT_NEAR(staircase.lrAtIteration(4), 3e-4, kTolerance);
  EXPECT_NEAR(staircase.lrAtIteration(8), 3e-4, kTolerance);
  EXPECT_NEAR(staircase.lrAtIteration(9), 5e-4, kTolerance);
  c.rangeStepSize = 0;
  EXPECT_NE(ZTC_ERROR_MESSAGE(Schedule{c}).find("lr_range_test_step_size"),
            std::string::npos);
}

TEST(ScheduleTest, CosineWithinItsWarmup) {
  // DeepSpeed takes a total within the warmup (it warns): after the warmup
  // the progress is clamped at 1, so the rate stays at cos_min_ratio.
  Schedule schedule(config(LrScheduleKind::WarmupCosine, 0.1, 0.01, 10, 5));
  EXPECT_NEAR(schedule.lrAtIteration(9), 0.09, kTolerance);
  EXPECT_NEAR(schedule.lrAtIteration(10), 0.01, kTolerance);
  EXPECT_NEAR(schedule.lrAtIteration(500), 0.01, kTolerance);
}

TEST(ScheduleTest, OneCycleStairs) {
  // cycle_first_stair_count 4 over 20 rising iterations, 3 over 30 falling:
  // the scale is floor(position) / stairs, the position counted from the
  // iteration within the cycle, (i + 1) mod 50.
  ScheduleConfig c = oneCycle20Up30Down();
  c.cycleFirstStairCount = 4;
  c.cycleSecondStairCount = 3;
  Schedule schedule(c);
  // i = 3: (3 + 1) * 4 / 20 = 0.8, floor 0: cycle_min_lr.
  EXPECT_NEAR(schedule.lrAtIteration(3), 0.01, kTolerance);
  // i = 4: 5 * 4 / 20 = 1: a quarter of the way up.
  EXPECT_NEAR(schedule.lrAtIteration(4), 0.01 + 0.09 * 0.25, kTolerance);
  // i = 19: 20 * 4 / 20 = 4: the peak.
  EXPECT_NEAR(schedule.lrAtIteration(19), 0.1, kTolerance);
  // i = 30: falling, (50 - 31) * 3 / 30 = 1.9, floor 1: a third.
  EXPECT_NEAR(schedule.lrAtIteration(30), 0.01 + 0.09 / 3, kTolerance);
}

TEST(ScheduleTest, DeepSpeedEngineSteps) {
  // The engine's first update runs at the rate the constructor set (i =
  // -1: min_lr, 0 for WarmupCosineLR), step t >= 2 at i = t - 2.
  Schedule warmup(config(LrScheduleKind::Warmup, 1e-3, 0.0, 5, 0));
  EXPECT_EQ(warmup.lrAtStep(1), 0.0);
  EXPECT_EQ(warmup.lrAtStep(2), 0.0);
  EXPECT_NEAR(warmup.lrAtStep(3), 2e-4, kTolerance);
  EXPECT_NEAR(warmup.lrAtStep(7), 1e-3, kTolerance);
  Schedule floor(config(LrScheduleKind::WarmupDecay, 1e-3, 1e-4, 5, 100));
  EXPECT_EQ(floor.lrAtStep(1), 1e-4);
  EXPECT_EQ(floor.lrAtStep(40), floor.lrAtIteration(38));
  ScheduleConfig cosineConfig =
      config(LrScheduleKind::WarmupCosine, 1e-3, 0, 5, 100);
  cosineConfig.warmupMinRatio = 0.5;
  EXPECT_EQ(Schedule(cosineConfig).lrAtStep(1), 0.0);
}

TEST(ScheduleTest, TrainerSteps) {
  // The Trainer's linear schedule without warmup starts at the full lr
  // (step t uses the factor of t - 1) and reaches 0 at the end.
  Schedule linear(config(LrScheduleKind::TrainerLinear, 1e-3, 0, 0, 100));
  EXPECT_EQ(linear.lrAtStep(1), 1e-3);
  EXPECT_NEAR(linear.lrAtStep(51), 5e-4, kTolerance);
  EXPECT_NEAR(linear.lrAtStep(101), 0.0, kTolerance);
  // With 10 warmup steps: 0, 1e-4, ... then the decay from the full lr.
  Schedule warm(config(LrScheduleKind::TrainerLinear, 1e-3, 0, 10, 100));
  EXPECT_EQ(warm.lrAtStep(1), 0.0);
  EXPECT_NEAR(warm.lrAtStep(2), 1e-4, kTolerance);
  EXPECT_NEAR(warm.lrAtStep(11), 1e-3, kTolerance);
  // Cosine: half way through the decay, half the lr.
  Schedule cosine(config(LrScheduleKind::TrainerCosine, 1e-3, 0, 10, 110));
  EXPECT_NEAR(cosine.lrAtStep(61), 5e-4, kTolerance);
  Schedule constant(config(LrScheduleKind::TrainerConstant, 1e-3, 0, 10, 0));
  EXPECT_EQ(constant.lrAtStep(1), 1e-3);
  Schedule constantWarm(
      config(LrScheduleKind::TrainerConstantWithWarmup, 1e-3, 0, 4, 0));
  EXPECT_NEAR(constantWarm.lrAtStep(3), 5e-4, kTolerance);
  EXPECT_EQ(constantWarm.lrAtStep(5), 1e-3);
}

namespace {

/// The schedule a DeepSpeed config (its optimizer and scheduler sections)
/// compiles to: the config reader's settings, with the flags' defaults for
/// the rest, as `ztc compile --config` resolves them.
ScheduleConfig fromDeepSpeed(const nlohmann::json &sections) {
  DeepSpeedConfig ds = parseDeepSpeedConfig("case.json", sections.dump());
  std::map<std::string, std::string> flags;
  for (const ConfigSetting &setting : ds.settings)
    if (setting.source != ConfigSource::Auto)
      flags[setting.flag] = setting.value;
  auto number = [&](const char *flag, double fallback) {
    return flags.count(flag) ? std::stod(flags[flag]) : fallback;
  };
  auto count = [&](const char *flag, uint64_t fallback) {
    return flags.count(flag) ? std::stoull(flags[flag]) : fallback;
  };
  ScheduleConfig c;
  c.kind = *parseScheduleKind(flags.count("lr-schedule") ? flags["lr-schedule"]
                                                          : "constant");
  c.warmupType = *parseWarmupType(
      flags.count("warmup-type") ? flags["warmup-type"] : "linear");
  c.lr = number("lr", 1e-3);
  c.minLr = flags.count("cos-min-ratio") ? number("cos-min-ratio", 0) * c.lr
                                         : number("min-lr", 0);
  c.warmupSteps = count("warmup-steps", 0);
  c.totalSteps = count("total-steps", 0);
  c.warmupMinRatio = number("warmup-min-ratio", 0);
  c.cycleFirstStepSize = count("cycle-first-step-size", 2000);
  c.cycleSecondStepSize = count("cycle-second-step-size", 0);
  c.cycleFirstStairCount = count("cycle-first-stair-count", 0);
  c.cycleSecondStairCount =
      count("cycle-second-stair-count", c.cycleFirstStairCount);
  c.decayLrRate = number("decay-lr-rate", 0);
  c.decayStepSize = count("decay-step-size", 0);
  c.rangeStepSize = count("lr-range-test-step-size", 2000);
  c.rangeStepRate = number("lr-range-test-step-rate", 1);
  c.rangeStaircase = flags.count("lr-range-test-staircase") &&
                     flags["lr-range-test-staircase"] == "true";
  return c;
}

/// The schedule of the Trainer's arguments, as --lr-scheduler-type,
/// --warmup-steps or --warmup-ratio and --total-steps give it.
ScheduleConfig fromTrainer(const nlohmann::json &trainer) {
  static const std::map<std::string, LrScheduleKind> kinds = {
      {"linear", LrScheduleKind::TrainerLinear},
      {"cosine", LrScheduleKind::TrainerCosine},
      {"constant", LrScheduleKind::TrainerConstant},
      {"constant_with_warmup", LrScheduleKind::TrainerConstantWithWarmup}};
  ScheduleConfig c;
  c.kind = kinds.at(trainer.at("lr_scheduler_type").get<std::string>());
  c.lr = trainer.at("learning_rate").get<double>();
  c.totalSteps = trainer.at("max_steps").get<uint64_t>();
  // transformers 5: a warmup_steps below 1 is a share of the run, which is
  // --warmup-ratio; ztc-train rounds it up as the Trainer does.
  auto number = [&](const char *key) {
    return trainer.contains(key) && trainer[key].is_number()
               ? trainer[key].get<double>()
               : 0.0;
  };
  double warmup = number("warmup_steps");
  double ratio = number("warmup_ratio");
  if (warmup > 0 && warmup < 1)
    ratio = warmup;
  c.warmupSteps = warmup >= 1 ? uint64_t(warmup)
                              : uint64_t(std::ceil(ratio * double(c.totalSteps)));
  EXPECT_EQ(c.warmupSteps, trainer.at("resolved_warmup_steps").get<uint64_t>());
  return c;
}

} // namespace

TEST(ScheduleTest, MatchesDeepSpeedAndTheTrainer) {
  nlohmann::json fixture = nlohmann::json::parse(
      readFile(ZTC_TEST_FIXTURES_DIR "/deepspeed/schedules.json"));
  size_t cases = 0;
  for (const nlohmann::json &item : fixture.at("cases")) {
    std::string name = item.at("name").get<std::string>();
    SCOPED_TRACE(name);
    bool trainer = item.at("source") == "transformers";
    if (item.at("lrs").is_null()) {
      // DeepSpeed refused the config (warmup_num_steps 0): so does ztc.
      EXPECT_NE(ZTC_ERROR_MESSAGE(fromDeepSpeed(item.at("config"))), "")
          << item.value("error", "");
      continue;
    }
    Schedule schedule(trainer ? fromTrainer(item.at("trainer"))
                              : fromDeepSpeed(item.at("config")));
    const nlohmann::json &lrs = item.at("lrs");
    ASSERT_EQ(lrs.size(), 200u);
    for (size_t step = 1; step <= lrs.size(); ++step) {
      double expected = lrs[step - 1].get<double>();
      double got = schedule.lrAtStep(step);
      ASSERT_LE(std::fabs(got - expected),
                1e-12 * std::max(std::fabs(expected), 1e-300))
          << "step " << step << ": ztc " << got << ", reference " << expected;
    }
    ++cases;
  }
  // Every schedule ztc offers, DeepSpeed's five and the Trainer's four.
  EXPECT_GE(cases, 20u);
}
