//===- Schedule.h - learning-rate schedules ---------------------*- C++ -*-===//
//
// The learning rate the trainer writes into the `lr` hyper binding before
// every optimizer step. Two families, each reproducing its library step for
// step (test/fixtures/deepspeed/schedules.json holds the rates the real
// DeepSpeed engine and the real Trainer use; ScheduleTest checks them):
//
// DeepSpeed's (deepspeed/runtime/lr_schedules.py), at last_batch_iteration i:
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
//                                  (1 + cos(pi * p)) / 2, clamped at 0, with
//                                  p = min(1, (i - W + 1) / max(1, total - W));
//                                  cos_min_ratio is min_lr / lr
//   one-cycle      OneCycle:       min_lr (cycle_min_lr) rising linearly to
//                                  lr (cycle_max_lr) over cycle_first_step_size
//                                  iterations and falling back over
//                                  cycle_second_step_size (x = (i + 1) / both,
//                                  as DeepSpeed), in stairs when a stair count
//                                  is set; after the cycle,
//                                  min_lr / (1 + decay_lr_rate * d /
//                                  decay_step_size), d = i - both + 1
//                                  (min_lr when either is 0)
//   lr-range-test  LRRangeTest:    lr * (1 + step_rate * (i + 1) / step_size),
//                                  the quotient floored with staircase
//
// where W = max(2, warmup_steps) (DeepSpeed never warms up over fewer than 2
// steps), gamma_warmup(i) = i / W (linear) or log(i + 1) / log(W) (log), used
// while i < W. DeepSpeed's engine calls scheduler.step() after
// optimizer.step(), and the scheduler's constructor sets the rate of i = -1
// (min_lr; 0 for WarmupCosineLR): optimizer step 1 runs at that rate and step
// t >= 2 at iteration t - 2. So with WarmupLR linear over 5 steps to 1e-3,
// the engine's steps use 0, 0, 2e-4, 4e-4, ...
//
// The Hugging Face Trainer's (transformers' get_scheduler, a LambdaLR over
// the optimizer's lr, stepped after each optimizer step, so step t uses the
// factor of t - 1), with W = warmup_steps unclamped and T = total_steps:
//
//   trainer-constant               lr
//   trainer-constant-with-warmup   lr * s / max(1, W) while s < W, then lr
//   trainer-linear                 the same warmup, then
//                                  lr * max(0, (T - s) / max(1, T - W))
//   trainer-cosine                 the same warmup, then lr * max(0, (1 +
//                                  cos(pi * (s - W) / max(1, T - W))) / 2)
//
// With no warmup the Trainer's linear schedule starts at the full lr.
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
  LrRangeTest,
  TrainerConstant,
  TrainerConstantWithWarmup,
  TrainerLinear,
  TrainerCosine,
};

/// Whether `kind` is one of the Trainer's schedules (a LambdaLR), not
/// DeepSpeed's.
bool isTrainerSchedule(LrScheduleKind kind);

/// The manifest's `train.warmup_type` (DeepSpeed's `warmup_type`).
enum class WarmupType { Linear, Log };

/// "constant", "warmup", "warmup-decay", "warmup-cosine", "one-cycle",
/// "lr-range-test", and the Trainer's "trainer-constant",
/// "trainer-constant-with-warmup", "trainer-linear", "trainer-cosine".
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
  /// warmup-decay, warmup-cosine, trainer-linear and trainer-cosine: the
  /// length of the run in optimizer steps (DeepSpeed's total_num_steps, the
  /// Trainer's num_training_steps); must be set for them.
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
  /// one-cycle: stairs over the rise and the fall (0: a straight line),
  /// DeepSpeed's cycle_first_stair_count and cycle_second_stair_count.
  uint64_t cycleFirstStairCount = 0;
  uint64_t cycleSecondStairCount = 0;
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

  /// The learning rate optimizer step `step` (1-based, > 0) runs at, as
  /// the library's training loop steps its scheduler (see above).
  double lrAtStep(uint64_t step) const;

  /// DeepSpeed's get_lr() with last_batch_iteration = `iteration`; for the
  /// Trainer's schedules, lr times the LambdaLR factor of `iteration`.
  double lrAtIteration(uint64_t iteration) const;

  /// The rate DeepSpeed's scheduler sets at construction (i = -1): the
  /// first optimizer step's.
  double lrBeforeStart() const;

  const ScheduleConfig &config() const { return config_; }

private:
  /// DeepSpeed's warmup gamma in [0, 1) for iteration < warmupNumSteps_.
  double warmupGamma(uint64_t iteration) const;
  /// OneCycle's iterations up and down.
  double cycleTotal() const;
  /// OneCycle's _get_scale_factor at `iteration` within the cycle.
  double cycleScale(uint64_t iteration) const;
  /// The Trainer's LambdaLR factor at `iteration`.
  double trainerFactor(uint64_t iteration) const;

  ScheduleConfig config_;
  /// max(2, warmupSteps), as DeepSpeed (the Trainer's: warmupSteps).
  uint64_t warmupNumSteps_ = 2;
};

} // namespace ztc::rt

#endif // ZTC_RUNTIME_SCHEDULE_H
