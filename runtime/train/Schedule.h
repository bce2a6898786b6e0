//===- Schedule.h - learning-rate schedules ---------------------*- C++ -*-===//
//
// The learning rate the trainer writes into the `lr` hyper binding before
// every optimizer step. The schedules are DeepSpeed's (deepspeed/runtime/
// lr_schedules.py), reproduced formula for formula so a ztc run and a
// DeepSpeed run with the same configuration use the same learning rates:
//
//   constant       lr
//   warmup         WarmupLR:       min_lr + (lr - min_lr) * gamma_warmup(i),
//                                  then lr
//   warmup-decay   WarmupDecayLR:  the same warmup, then
//                                  min_lr + (lr - min_lr) *
//                                  max(0, (total - i) / max(1, total - W))
//   warmup-cosine  WarmupCosineLR: lr * ratio, ratio rising from
//                                  warmup_min_ratio to 1 by gamma_warmup(i),
//                                  then cos_min_ratio + (1 - cos_min_ratio) *
//                                  (1 + cos(pi * (i - W + 1) / (total - W)))
//                                  / 2, clamped at 0; cos_min_ratio is
//                                  min_lr / lr
//   one-cycle      OneCycle:       min_lr (cycle_min_lr) rising linearly to
//                                  lr (cycle_max_lr) over cycle_first_step_size
//                                  iterations and falling back over
//                                  cycle_second_step_size (x = (i + 1) / both,
//                                  as DeepSpeed); after the cycle,
//                                  min_lr / (1 + decay_lr_rate * d /
//                                  decay_step_size), d = i - both + 1
//                                  (min_lr when either is 0)
//   lr-range-test  LRRangeTest:    lr * (1 + step_rate * (i + 1) / step_size),
//                                  the quotient floored with staircase
//
// where i is DeepSpeed's `last_batch_iteration` (0-based), W =
// max(2, warmup_steps) (DeepSpeed never warms up over fewer than 2 steps),
// gamma_warmup(i) = i / W (linear) or log(i + 1) / log(W) (log), used while
// i < W.
//
// Optimizer step t (1-based) uses i = t - 1: step 1 runs at the warmup's
// start value and step W + 1 at the full lr; with warmup-cosine, step
// total_steps runs exactly at min_lr. (DeepSpeed's engine calls
// scheduler.step() after optimizer.step(), so there the first update runs at
// the value the scheduler set at construction, which is the same start
// value for warmup/warmup-decay, and every later update one iteration
// behind this mapping.)
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_SCHEDULE_H
#define ZTC_RUNTIME_SCHEDULE_H

#include <cstdint>
#include <optional>
#include <string>

namespace ztc::rt {

/// The manifest's `train.lr_schedule`.
enum class LrScheduleKind {
  Constant,
  Warmup,
  WarmupDecay,
  WarmupCosine,
  OneCycle,
  LrRangeTest
};

/// The manifest's `train.warmup_type` (DeepSpeed's `warmup_type`).
enum class WarmupType { Linear, Log };

/// "constant", "warmup", "warmup-decay", "warmup-cosine", "one-cycle",
/// "lr-range-test".
const char *scheduleName(LrScheduleKind kind);
std::optional<LrScheduleKind> parseScheduleKind(const std::string &name);

/// "linear", "log".
const char *warmupTypeName(WarmupType type);
std::optional<WarmupType> parseWarmupType(const std::string &name);

/// Everything a schedule depends on (the manifest's `train` fields).
struct ScheduleConfig {
  LrScheduleKind kind = LrScheduleKind::Constant;
  /// The peak (DeepSpeed: warmup_max_lr, the optimizer's lr for cosine,
  /// cycle_max_lr); lr-range-test: the start (lr_range_test_min_lr).
  double lr = 1e-3;
  /// warmup/warmup-decay: the warmup's start and the decay's end
  /// (warmup_min_lr); warmup-cosine: the cosine's end (cos_min_ratio * lr);
  /// one-cycle: the cycle's low end (cycle_min_lr).
  double minLr = 0.0;
  uint64_t warmupSteps = 0;
  /// warmup-decay and warmup-cosine: the length of the run in optimizer
  /// steps (DeepSpeed's total_num_steps); must be set for them.
  uint64_t totalSteps = 0;
  WarmupType warmupType = WarmupType::Linear;
  /// warmup-cosine only: the warmup's start as a fraction of lr.
  double warmupMinRatio = 0.0;
  /// When positive and warmupSteps is 0: the warmup is ceil(warmupRatio *
  /// totalSteps) steps (the Hugging Face Trainer's warmup_ratio), fixed once
  /// the run's length is known.
  double warmupRatio = 0.0;
  /// one-cycle: iterations rising and falling (second 0: as the first).
  uint64_t cycleFirstStepSize = 2000;
  uint64_t cycleSecondStepSize = 0;
  /// one-cycle, after the cycle: the rate and interval of the decay.
  double decayLrRate = 0.0;
  uint64_t decayStepSize = 0;
  /// lr-range-test: iterations per interval, growth per interval, and
  /// whether the interval count is floored.
  uint64_t rangeStepSize = 2000;
  double rangeStepRate = 1.0;
  bool rangeStaircase = false;
};

/// A validated schedule.
class Schedule {
public:
  /// Throws Error when `config` is unusable (negative or non-finite rates,
  /// a decaying schedule without total_steps, a cosine whose total_steps
  /// does not exceed its warmup).
  explicit Schedule(const ScheduleConfig &config);

  /// The learning rate of optimizer step `step` (1-based, > 0).
  double lrAtStep(uint64_t step) const;

  /// DeepSpeed's get_lr() with last_batch_iteration = `iteration`.
  double lrAtIteration(uint64_t iteration) const;

  const ScheduleConfig &config() const { return config_; }

private:
  /// DeepSpeed's warmup gamma in [0, 1) for iteration < warmupNumSteps_.
  double warmupGamma(uint64_t iteration) const;

  ScheduleConfig config_;
  /// max(2, warmupSteps), as DeepSpeed.
  uint64_t warmupNumSteps_ = 2;
};

} // namespace ztc::rt

#endif // ZTC_RUNTIME_SCHEDULE_H
