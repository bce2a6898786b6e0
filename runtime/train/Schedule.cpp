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
};

/// Checks one rate of the configuration.
void checkRate(const char *field, double value) {
  if (!std::isfinite(value) || value < 0)
    throw Error(std::string("lr schedule: ") + field +
                " must be a finite non-negative number, got " +
                std::to_string(value));
}

} // namespace

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
  warmupNumSteps_ = std::max<uint64_t>(2, config.warmupSteps);
  std::string name = scheduleName(config.kind);
  if (config.kind == LrScheduleKind::WarmupDecay && config.totalSteps == 0)
    throw Error("lr schedule '" + name + "' needs total_steps > 0");
  if (config.kind == LrScheduleKind::WarmupCosine &&
      config.totalSteps <= warmupNumSteps_)
    throw Error("lr schedule '" + name + "' needs total_steps (" +
                std::to_string(config.totalSteps) +
                ") greater than its warmup (" +
                std::to_string(warmupNumSteps_) +
                " steps; DeepSpeed warms up over at least 2)");
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
      double span = static_cast<double>(c.totalSteps) -
                    static_cast<double>(warmupNumSteps_);
      double cosine = (1.0 + std::cos(M_PI * done / span)) / 2.0;
      ratio = std::max(0.0, cosMinRatio + (1.0 - cosMinRatio) * cosine);
    }
    return c.lr * ratio;
  }
  case LrScheduleKind::OneCycle: {
    double first = static_cast<double>(c.cycleFirstStepSize);
    double total = first + static_cast<double>(c.cycleSecondStepSize
                                                   ? c.cycleSecondStepSize
                                                   : c.cycleFirstStepSize);
    double i = static_cast<double>(iteration);
    if (i < total) {
      // DeepSpeed's _get_scale_factor: x runs over [0, 1) within the cycle,
      // one iteration ahead.
      double x = (i + 1.0) / total - std::floor((i + 1.0) / total);
      double stepRatio = first / total;
      double scale =
          x <= stepRatio ? x / stepRatio : (x - 1.0) / (stepRatio - 1.0);
      return c.minLr + (c.lr - c.minLr) * scale;
    }
    if (c.decayStepSize == 0 || c.decayLrRate == 0)
      return c.minLr;
    double interval = (i - total + 1.0) / static_cast<double>(c.decayStepSize);
    return c.minLr / (1.0 + c.decayLrRate * interval);
  }
  case LrScheduleKind::LrRangeTest: {
    double interval = (static_cast<double>(iteration) + 1.0) /
                      static_cast<double>(c.rangeStepSize);
    if (c.rangeStaircase)
      interval = std::floor(interval);
    return c.lr * (1.0 + c.rangeStepRate * interval);
  }
  }
  return c.lr;
}

double Schedule::lrAtStep(uint64_t step) const {
  if (step == 0)
    throw Error("lr schedule: optimizer steps count from 1");
  return lrAtIteration(step - 1);
}

} // namespace ztc::rt
