//===- Schedule.cpp - learning-rate schedules -----------------------------===//
//
// Computed in double, as DeepSpeed computes in Python floats; the trainer
// rounds to the hyper binding's type only when it writes the value.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/Schedule.h"

#include "runtime/Error.h"

#include <algorithm>
#include <cmath>

namespace ztc::rt {

namespace {

struct ScheduleName {
  LrScheduleKind kind;
  const char *name;
};

constexpr ScheduleName kScheduleNames[] = {
    {LrScheduleKind::Constant, "constant"},
    {LrScheduleKind::Warmup, "warmup"},
    {LrScheduleKind::WarmupDecay, "warmup-decay"},
    {LrScheduleKind::WarmupCosine, "warmup-cosine"},
    {LrScheduleKind::OneCycle, "one-cycle"},
    {LrScheduleKind::LrRangeTest, "lr-range-test"},
    {LrScheduleKind::TrainerConstant, "trainer-constant"},
    {LrScheduleKind::TrainerConstantWithWarmup, "trainer-constant-with-warmup"},
    {LrScheduleKind::TrainerLinear, "trainer-linear"},
    {LrScheduleKind::TrainerCosine, "trainer-cosine"},
};

/// Checks one rate of the configuration.
void checkRate(const char *field, double value) {
  if (!std::isfinite(value) || value < 0)
    throw Error(std::string("lr schedule: ") + field +
                " must be a finite non-negative number, got " +
                std::to_string(value));
}

} // namespace

bool isTrainerSchedule(LrScheduleKind kind) {
  return kind == LrScheduleKind::TrainerConstant ||
         kind == LrScheduleKind::TrainerConstantWithWarmup ||
         kind == LrScheduleKind::TrainerLinear ||
         kind == LrScheduleKind::TrainerCosine;
}

const char *scheduleName(LrScheduleKind kind) {
  for (const ScheduleName &entry : kScheduleNames)
    if (entry.kind == kind)
      return entry.name;
  return "?";
}

std::optional<LrScheduleKind> parseScheduleKind(const std::string &name) {
  for (const ScheduleName &entry : kScheduleNames)
    if (name == entry.name)
      return entry.kind;
  return std::nullopt;
}

const char *warmupTypeName(WarmupType type) {
  return type == WarmupType::Linear ? "linear" : "log";
}

std::optional<WarmupType> parseWarmupType(const std::string &name) {
  if (name == "linear")
    return WarmupType::Linear;
  if (name == "log")
    return WarmupType::Log;
  return std::nullopt;
}

Schedule::Schedule(const ScheduleConfig &config) : config_(config) {
  checkRate("lr", config.lr);
  checkRate("min_lr", config.minLr);
  checkRate("warmup_min_ratio", config.warmupMinRatio);
  checkRate("warmup_ratio", config.warmupRatio);
  checkRate("decay_lr_rate", config.decayLrRate);
  checkRate("lr_range_test_step_rate", config.rangeStepRate);
  if (config.warmupRatio > 1)
    throw Error("lr schedule: warmup_ratio must be at most 1, got " +
                std::to_string(config.warmupRatio));
  if (config.kind == LrScheduleKind::OneCycle && config.cycleFirstStepSize == 0)
    throw Error("lr schedule 'one-cycle' needs cycle_first_step_size > 0");
  if (config.kind == LrScheduleKind::LrRangeTest && config.rangeStepSize == 0)
    throw Error("lr schedule 'lr-range-test' needs lr_range_test_step_size "
                "> 0");
  warmupNumSteps_ = isTrainerSchedule(config.kind)
                       ? config.warmupSteps
                       : std::max<uint64_t>(2, config.warmupSteps);
  std::string name = scheduleName(config.kind);
  // DeepSpeed's WarmupCosineLR takes a total within the warmup (it warns,
  // and the rate stays at cos_min_ratio after the warmup); a total of 0
  // would mean the run's length was never filled in.
  if ((config.kind == LrScheduleKind::WarmupDecay ||
       config.kind == LrScheduleKind::WarmupCosine ||
       config.kind == LrScheduleKind::TrainerLinear ||
       config.kind == LrScheduleKind::TrainerCosine) &&
      config.totalSteps == 0)
    throw Error("lr schedule '" + name + "' needs total_steps > 0");
}

double Schedule::warmupGamma(uint64_t iteration) const {
  if (config_.warmupType == WarmupType::Log)
    return std::log(static_cast<double>(iteration) + 1.0) /
           std::log(static_cast<double>(warmupNumSteps_));
  return static_cast<double>(iteration) / static_cast<double>(warmupNumSteps_);
}

double Schedule::lrAtIteration(uint64_t iteration) const {
  const ScheduleConfig &c = config_;
  const bool warming = iteration < warmupNumSteps_;
  switch (c.kind) {
  case LrScheduleKind::Constant:
    return c.lr;
  case LrScheduleKind::Warmup:
    return c.minLr + (c.lr - c.minLr) * (warming ? warmupGamma(iteration) : 1);
  case LrScheduleKind::WarmupDecay: {
    double gamma;
    if (warming) {
      gamma = warmupGamma(iteration);
    } else {
      double remaining =
          static_cast<double>(c.totalSteps) - static_cast<double>(iteration);
      double span = std::max(1.0, static_cast<double>(c.totalSteps) -
                                      static_cast<double>(warmupNumSteps_));
      gamma = std::max(0.0, remaining / span);
    }
    return c.minLr + (c.lr - c.minLr) * gamma;
  }
  case LrScheduleKind::WarmupCosine: {
    double ratio;
    if (warming) {
      ratio =
          c.warmupMinRatio + warmupGamma(iteration) * (1.0 - c.warmupMinRatio);
    } else {
      double cosMinRatio = c.lr > 0 ? c.minLr / c.lr : 0.0;
      double done = static_cast<double>(iteration) -
                    static_cast<double>(warmupNumSteps_) + 1.0;
      double span = std::max(1.0, static_cast<double>(c.totalSteps) -
                                      static_cast<double>(warmupNumSteps_));
      // DeepSpeed clamps the progress: past the end the rate stays at
      // cos_min_ratio instead of rising again.
      double progress = std::min(1.0, done / span);
      double cosine = (1.0 + std::cos(M_PI * progress)) / 2.0;
      ratio = std::max(0.0, cosMinRatio + (1.0 - cosMinRatio) * cosine);
    }
    return c.lr * ratio;
  }
  case LrScheduleKind::OneCycle: {
    double i = static_cast<double>(iteration);
    if (i < cycleTotal())
      return c.minLr + (c.lr - c.minLr) * cycleScale(iteration);
    if (c.decayStepSize == 0 || c.decayLrRate == 0)
      return c.minLr;
    double interval =
        (i - cycleTotal() + 1.0) / static_cast<double>(c.decayStepSize);
    return c.minLr / (1.0 + c.decayLrRate * interval);
  }
  case LrScheduleKind::LrRangeTest: {
    double interval = (static_cast<double>(iteration) + 1.0) /
                      static_cast<double>(c.rangeStepSize);
    if (c.rangeStaircase)
      interval = std::floor(interval);
    return c.lr * (1.0 + c.rangeStepRate * interval);
  }
  case LrScheduleKind::TrainerConstant:
  case LrScheduleKind::TrainerConstantWithWarmup:
  case LrScheduleKind::TrainerLinear:
  case LrScheduleKind::TrainerCosine:
    // LambdaLR: the optimizer's lr times the factor.
    return c.lr * trainerFactor(iteration);
  }
  return c.lr;
}

double Schedule::cycleTotal() const {
  const ScheduleConfig &c = config_;
  return static_cast<double>(c.cycleFirstStepSize) +
         static_cast<double>(c.cycleSecondStepSize ? c.cycleSecondStepSize
                                                   : c.cycleFirstStepSize);
}

double Schedule::cycleScale(uint64_t iteration) const {
  const ScheduleConfig &c = config_;
  // DeepSpeed's _get_scale_factor: x runs over [0, 1) within the cycle, one
  // iteration ahead.
  double first = static_cast<double>(c.cycleFirstStepSize);
  double total = cycleTotal();
  double batch = static_cast<double>(iteration) + 1.0;
  double cycle = std::floor(1.0 + batch / total);
  double x = 1.0 + batch / total - cycle;
  double stepRatio = first / total;
  bool rising = x <= stepRatio;
  double scale = rising ? x / stepRatio : (x - 1.0) / (stepRatio - 1.0);
  uint64_t stairs =
      rising ? c.cycleFirstStairCount : c.cycleSecondStairCount;
  if (stairs == 0)
    return scale;
  // Stairs hold the rate flat over whole steps of the half cycle, counted
  // from the integer position in the cycle as DeepSpeed does.
  uint64_t totalSteps = static_cast<uint64_t>(total);
  uint64_t within = (iteration + 1) % totalSteps;
  double position =
      within <= c.cycleFirstStepSize
          ? static_cast<double>(within) * static_cast<double>(stairs) / first
          : static_cast<double>(totalSteps - within) *
                static_cast<double>(stairs) / (total - first);
  return std::floor(position) / static_cast<double>(stairs);
}

double Schedule::trainerFactor(uint64_t iteration) const {
  const ScheduleConfig &c = config_;
  double s = static_cast<double>(iteration);
  double warmup = static_cast<double>(c.warmupSteps);
  if (c.kind == LrScheduleKind::TrainerConstant)
    return 1.0;
  if (iteration < c.warmupSteps)
    return s / std::max(1.0, warmup);
  if (c.kind == LrScheduleKind::TrainerConstantWithWarmup)
    return 1.0;
  // max(1, T - W) in integers, as the Trainer computes it.
  double span = static_cast<double>(
      c.totalSteps > c.warmupSteps ? c.totalSteps - c.warmupSteps : 1);
  if (c.kind == LrScheduleKind::TrainerLinear) {
    double remaining =
        static_cast<double>(c.totalSteps) - static_cast<double>(iteration);
    return std::max(0.0, remaining / span);
  }
  double progress = (s - warmup) / span;
  return std::max(0.0, 0.5 * (1.0 + std::cos(M_PI * 0.5 * 2.0 * progress)));
}

double Schedule::lrBeforeStart() const {
  const ScheduleConfig &c = config_;
  switch (c.kind) {
  case LrScheduleKind::Warmup:
  case LrScheduleKind::WarmupDecay:
  case LrScheduleKind::OneCycle:
    return c.minLr;
  case LrScheduleKind::WarmupCosine:
    return 0.0;
  case LrScheduleKind::LrRangeTest:
  case LrScheduleKind::Constant:
    return c.lr;
  default:
    // A LambdaLR's constructor sets the factor of step 0.
    return lrAtIteration(0);
  }
}

double Schedule::lrAtStep(uint64_t step) const {
  if (step == 0)
    throw Error("lr schedule: optimizer steps count from 1");
  if (isTrainerSchedule(config_.kind))
    return lrAtIteration(step - 1);
  // DeepSpeed's engine: the constructor's rate, then one iteration behind.
  return step == 1 ? lrBeforeStart() : lrAtIteration(step - 2);
}

} // namespace ztc::rt
