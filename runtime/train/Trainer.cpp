//===- Trainer.cpp - the training loop of `ztc train` ---------------------===//
//
// A TrainingRun owns the pieces of one run (artifact, runner, data, lr
// schedule, reporter) and performs its phases in order: restore, dump
// gradients, step, save. The Reporter keeps logging and the progress bar
// apart from the loop.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/Trainer.h"

#include "runtime/Artifact.h"
#include "runtime/Error.h"
#include "runtime/Runner.h"
#include "runtime/comm/Communicator.h"
#include "runtime/io/File.h"
#include "runtime/io/Npy.h"
#include "runtime/io/Sha256.h"
#include "runtime/train/Checkpoint.h"
#include "runtime/train/Consolidate.h"
#include "runtime/train/DataLoader.h"
#include "runtime/train/Schedule.h"
#include "runtime/train/ShardedCheckpoint.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <thread>

#include <unistd.h>

namespace ztc::rt {

namespace {

using Clock = std::chrono::steady_clock;

double secondsBetween(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

std::string printfString(const char *pattern, ...)
    __attribute__((format(printf, 1, 2)));

std::string printfString(const char *pattern, ...) {
  char buffer[512];
  va_list args;
  va_start(args, pattern);
  std::vsnprintf(buffer, sizeof buffer, pattern, args);
  va_end(args);
  return buffer;
}

/// "1:02:03" for a duration in seconds.
std::string formatDuration(double seconds) {
  auto total = static_cast<long long>(seconds + 0.5);
  return printfString("%lld:%02lld:%02lld", total / 3600, total / 60 % 60,
                      total % 60);
}

/// A scalar of `dtype` holding `value` (hypers).
Tensor scalarTensor(DType dtype, double value, const std::string &name) {
  Tensor tensor(dtype, {});
  switch (dtype) {
  case DType::Float32:
    *tensor.data<float>() = static_cast<float>(value);
    return tensor;
  case DType::Float64:
    *tensor.data<double>() = value;
    return tensor;
  case DType::Int64:
    *tensor.data<int64_t>() = static_cast<int64_t>(value);
    return tensor;
  case DType::Int32:
    *tensor.data<int32_t>() = static_cast<int32_t>(value);
    return tensor;
  default:
    throw Error("hyper '" + name + "' is " + tensor.describe() +
                "; hypers must be float32, float64, int64 or int32");
  }
}

/// Per-step reports: plain log lines every logEvery steps, or a progress
/// bar redrawn in place on stderr; other messages go to the log either way.
class Reporter {
public:
  Reporter(const TrainOptions &options, uint64_t lastStep,
           uint64_t samplesPerStep)
      : log_(options.log), bar_(options.progressBar),
        logEvery_(options.logEvery), lastStep_(lastStep),
        samplesPerStep_(double(samplesPerStep)) {
    if (!log_)
      log_ = [](const std::string &text) {
        std::fprintf(stderr, "%s\n", text.c_str());
      };
  }
  /// An error leaves the progress line too: end it.
  ~Reporter() { finish(); }
  Reporter(const Reporter &) = delete;
  Reporter &operator=(const Reporter &) = delete;

  /// Starts the clock at the first step of this run.
  void start(uint64_t firstStep) {
    start_ = lastLine_ = Clock::now();
    firstStep_ = lastLineStep_ = firstStep - 1;
  }

  void message(const std::string &text) {
    clearBar();
    log_(text);
  }

  /// Whether `step` reports: every logEvery steps and the last (plain
  /// lines), or when the bar is due for a redraw. Only then does the
  /// trainer read the loss from the device.
  bool due(uint64_t step) const {
    if (step == lastStep_)
      return true;
    if (bar_)
      return !drawn_ || secondsBetween(lastDraw_, Clock::now()) >= 0.1;
    return logEvery_ != 0 && step % logEvery_ == 0;
  }

  /// A token dataset: the real tokens (labels that count) and positions
  /// of every rank's rows since the last report, which the next report's
  /// line gives per second (and as a padding share) after samples/s.
  void tokens(uint64_t real, uint64_t positions) {
    real_ = real;
    positions_ = positions;
    haveTokens_ = true;
  }

  /// Reports a due step; `loss` is the mean over the steps since the last
  /// report.
  /// `extra` follows the learning rate (the loss scale, when there is one).
  void step(uint64_t step, float loss, double lr, const std::string &extra) {
    Clock::time_point now = Clock::now();
    if (bar_) {
      drawBar(step, loss, lr, extra, now);
      return;
    }
    double seconds = std::max(secondsBetween(lastLine_, now), 1e-9);
    double rate = samplesPerStep_ * double(step - lastLineStep_) / seconds;
    std::string tokens;
    if (haveTokens_)
      tokens = printfString(
          "  %.0f tokens/s (%.1f%% padding)", double(real_) / seconds,
          positions_ ? 100.0 * (1.0 - double(real_) / double(positions_))
                     : 0.0);
    log_(printfString("step %llu/%llu  loss %.6f  lr %.3e%s  %.1f samples/s%s",
                      static_cast<unsigned long long>(step),
                      static_cast<unsigned long long>(lastStep_), loss, lr,
                      extra.c_str(), rate, tokens.c_str()));
    lastLine_ = now;
    lastLineStep_ = step;
  }

  /// Ends the progress line so later output starts on a fresh line.
  void finish() {
    if (drawn_)
      std::fputs("\n", stderr);
    drawn_ = false;
  }

private:
  void drawBar(uint64_t step, float loss, double lr, const std::string &extra,
               Clock::time_point now) {
    constexpr int kWidth = 24;
    double elapsed = std::max(secondsBetween(start_, now), 1e-9);
    uint64_t done = step - firstStep_;
    double fraction = double(step) / double(lastStep_);
    int filled = static_cast<int>(fraction * kWidth);
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(kWidth, '.');
    double eta = elapsed / double(done) * double(lastStep_ - step);
    std::string line = printfString(
        "\rstep %llu/%llu [%s] loss %.6f  lr %.3e%s  %.1f samples/s  ETA %s"
        "\033[K",
        static_cast<unsigned long long>(step),
        static_cast<unsigned long long>(lastStep_), bar.c_str(), loss, lr,
        extra.c_str(), samplesPerStep_ * double(done) / elapsed,
        formatDuration(eta).c_str());
    std::fputs(line.c_str(), stderr);
    std::fflush(stderr);
    drawn_ = true;
    lastDraw_ = now;
  }

  void clearBar() {
    if (drawn_) {
      std::fputs("\r\033[K", stderr);
      std::fflush(stderr);
    }
    drawn_ = false;
  }

  std::function<void(const std::string &)> log_;
  bool bar_;
  uint64_t logEvery_;
  uint64_t lastStep_;
  double samplesPerStep_;
  uint64_t real_ = 0, positions_ = 0;
  bool haveTokens_ = false;
  uint64_t firstStep_ = 0, lastLineStep_ = 0;
  Clock::time_point start_, lastLine_, lastDraw_;
  bool drawn_ = false;
};

/// The next batch, gathered on a background thread while the step runs.
/// One reader thread lives as long as the run (a thread per batch costs
/// more than a small batch). Only one thread uses the loader at a time:
/// the reader while a batch is pending, the caller otherwise.
class Prefetcher {
public:
  Prefetcher(DataLoader &loader, bool enabled) : loader_(loader) {
    if (enabled)
      reader_ = std::thread([this] { read(); });
  }
  ~Prefetcher() {
    drain();
    if (reader_.joinable()) {
      {
        std::lock_guard<std::mutex> guard(mutex_);
        stop_ = true;
      }
      wake_.notify_all();
      reader_.join();
    }
  }
  Prefetcher(const Prefetcher &) = delete;
  Prefetcher &operator=(const Prefetcher &) = delete;

  /// Where the batch take() returns next comes from.
  DataPosition position() const {
    return pending_ ? pendingAt_ : loader_.position();
  }

  /// The next batch (and a token dataset's counts for its global batch);
  /// asks the reader for the one after it.
  std::vector<Tensor> take(BatchTokens &tokens) {
    std::vector<Tensor> batch = pending_ ? wait(tokens) : loader_.next(&tokens);
    if (reader_.joinable()) {
      pendingAt_ = loader_.position();
      std::lock_guard<std::mutex> guard(mutex_);
      pending_ = requested_ = true;
      wake_.notify_all();
    }
    return batch;
  }

  /// Waits for the batch being gathered and puts the loader back at its
  /// position, for the caller to use the loader itself.
  void drain() {
    if (!pending_)
      return;
    try {
      BatchTokens ignored;
      wait(ignored);
    } catch (...) {
      // take() would have rethrown it; the batch is read again.
    }
    loader_.seek(pendingAt_);
  }

private:
  /// The pending batch, or its reader's error.
  std::vector<Tensor> wait(BatchTokens &tokens) {
    std::unique_lock<std::mutex> lock(mutex_);
    wake_.wait(lock, [this] { return !requested_; });
    pending_ = false;
    if (failure_) {
      std::exception_ptr failure = std::exchange(failure_, nullptr);
      std::rethrow_exception(failure);
    }
    tokens = readyTokens_;
    return std::move(ready_);
  }

  void read() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      wake_.wait(lock, [this] { return requested_ || stop_; });
      if (stop_)
        return;
      lock.unlock();
      std::vector<Tensor> batch;
      BatchTokens tokens;
      std::exception_ptr failure;
      try {
        batch = loader_.next(&tokens);
      } catch (...) {
        failure = std::current_exception();
      }
      lock.lock();
      ready_ = std::move(batch);
      readyTokens_ = tokens;
      failure_ = failure;
      requested_ = false;
      wake_.notify_all();
    }
  }

  DataLoader &loader_;
  std::thread reader_;
  std::mutex mutex_;
  std::condition_variable wake_;
  /// requested_: the reader owes a batch; pending_: take() has not
  /// collected it (the caller's view).
  bool requested_ = false, stop_ = false, pending_ = false;
  std::vector<Tensor> ready_;
  BatchTokens readyTokens_;
  std::exception_ptr failure_;
  DataPosition pendingAt_;
};

/// Loads the artifact and checks that it is a training artifact.
Artifact loadTrainingArtifact(const std::string &directory) {
  Artifact artifact = Artifact::load(directory);
  if (artifact.manifest().kind != ArtifactKind::Train)
    throw Error(directory +
                ": not a training artifact (manifest kind 'forward')");
  return artifact;
}

/// --seq-buckets: the steps of the artifact's shorter sequence lengths.
std::vector<Artifact> loadBuckets(const Artifact &artifact) {
  std::vector<Artifact> buckets;
  const std::vector<uint64_t> &lengths = artifact.manifest().train.seqBuckets;
  for (size_t i = 0; i + 1 < lengths.size(); ++i)
    buckets.push_back(loadTrainingArtifact(
        bucketDirectory(artifact.directory(), lengths[i])));
  return buckets;
}

std::vector<const Artifact *> pointersTo(const std::vector<Artifact> &all) {
  std::vector<const Artifact *> pointers;
  for (const Artifact &artifact : all)
    pointers.push_back(&artifact);
  return pointers;
}

/// The smallest `count` of any rank (a collective: every rank calls it).
uint64_t fewestOnAnyRank(Communicator &comm, uint64_t count) {
  if (comm.worldSize() == 1)
    return count;
  uint64_t fewest = count;
  for (const std::string &theirs : comm.allGatherText(std::to_string(count)))
    fewest = std::min<uint64_t>(fewest, std::stoull(theirs));
  return fewest;
}

/// The data loader of this rank: its share of every global batch, and the
/// epoch length every rank can fill (the ranks agree on it at start-up).
DataLoader shardedLoader(const Manifest &manifest, const TrainOptions &options,
                         Communicator &comm) {
  // group: megabatches count in optimizer steps' batches (the Trainer's
  // per-device batch times its accumulation steps, on every rank), so that
  // the order is one for every split of a global batch into ranks and a
  // checkpoint resumes it on another world size.
  TokenBatching tokens = options.tokens;
  tokens.groupBatch = manifest.train.batchSize * manifest.train.gradAccum *
                      comm.worldSize();
  DataLoader loader(manifest, options.dataDir, options.seed, false, tokens);
  if (options.sequential)
    loader.setSequential();
  if (comm.worldSize() == 1)
    return loader;
  loader.setShard(comm.rank(), comm.worldSize());
  loader.setShard(comm.rank(), comm.worldSize(),
                  fewestOnAnyRank(comm, loader.batchesPerEpoch()));
  return loader;
}

/// One call of train().
class TrainingRun {
public:
  TrainingRun(const TrainOptions &options, Communicator &comm)
      : options_(options), comm_(comm),
        artifact_(loadTrainingArtifact(options.artifactDir)),
        buckets_(loadBuckets(artifact_)),
        runner_(
            artifact_,
            createBackend(artifact_.manifest().target, {options.commThread}),
            pointersTo(buckets_)),
        loader_(shardedLoader(manifest(), options, comm)),
        prefetcher_(loader_, options.prefetch &&
                                 batchBytes() >= options.prefetchMinBytes),
        microBatches_(manifest().train.gradAccum) {
    runner_.setCommunicator(comm.worldSize() > 1 ? &comm : nullptr);
    if (!buckets_.empty())
      loader_.setSequenceBuckets(manifest().train.seqBuckets);
    findHypers();
    setLossWeight(1.0);
    if (options_.config)
      applyConfig(*options_.config);

    if (microBatches_ > 1 && !artifact_.accumEntry())
      throw Error("train.grad_accum is " + std::to_string(microBatches_) +
                  ", but gradient accumulation needs an accum_entry the "
                  "artifact lacks");
    if (options.saveEvery != 0 && options.saveDir.empty())
      throw Error("--save-every needs --save DIR");
    if (!options.dumpGradsDir.empty() && !artifact_.gradEntry())
      throw Error("--dump-grads needs a grad_entry the artifact lacks");
    if (!options.evalDataDir.empty())
      openEvalData();
    lossIndex_ = static_cast<size_t>(manifest().main().outputIndex("loss"));
    lastStep_ = options.steps ? options.steps
                              : options.epochs *
                                    (loader_.batchesPerEpoch() / microBatches_);
    if (lastStep_ == 0)
      throw Error("nothing to train: 0 steps (steps " +
                  std::to_string(options.steps) + ", epochs " +
                  std::to_string(options.epochs) + ", " +
                  std::to_string(loader_.batchesPerEpoch()) +
                  " batches per epoch, grad_accum " +
                  std::to_string(microBatches_) + ")");
    ScheduleConfig schedule = manifest().train.schedule;
    if (schedule.totalSteps == 0)
      schedule.totalSteps = lastStep_;
    // The Trainer's warmup_ratio: a share of the whole run, rounded up.
    if (schedule.warmupSteps == 0 && schedule.warmupRatio > 0)
      schedule.warmupSteps = static_cast<uint64_t>(std::ceil(
          schedule.warmupRatio * static_cast<double>(schedule.totalSteps)));
    schedule_.emplace(schedule);
    if (lrHyper_ < 0 && schedule.kind != LrScheduleKind::Constant)
      throw Error("lr schedule '" + std::string(scheduleName(schedule.kind)) +
                  "' needs an 'lr' hyper binding the artifact lacks");
  }

  /// --config: the artifact must be what the config describes, on this
  /// many ranks; its 16-bit save turns on the consolidated weights.
  void applyConfig(const DeepSpeedConfig &config) {
    const TrainConfig &train = manifest().train;
    char lr[32];
    std::snprintf(lr, sizeof lr, "%.17g", train.schedule.lr);
    std::vector<std::pair<std::string, std::string>> compiled = {
        {"batch-size", std::to_string(train.batchSize)},
        {"grad-accum", std::to_string(train.gradAccum)},
        {"precision", train.precision},
        {"optimizer", train.optimizer},
        {"lr", lr},
        {"lr-schedule", scheduleName(train.schedule.kind)}};
    // What the step compiles in (weight decay, betas, the loss-scale
    // flags, ...), where the manifest records it.
    for (const auto &[flag, value] : train.compiledFlags)
      compiled.push_back({flag, value});
    // On one rank ZeRO shards nothing, and the artifact records no stage.
    if (manifest().dist.worldSize > 1)
      compiled.push_back({"zero", std::to_string(manifest().dist.zeroStage)});
    if (std::string error = checkCompiledAgainst(
            config, compiled, comm_.worldSize(), options_.artifactDir);
        !error.empty())
      throw Error(error);
    // Rank 0 says what the config asks for that ztc ignores, and what it
    // accepts without moving anything (offloading).
    std::vector<std::string> warnings, notes;
    if (comm_.rank() == 0) {
      DeepSpeedConfig worded = config;
      addOffloadNotices(worded, manifest().target == Target::Cuda);
      checkNotices(worded, /*strict=*/false, warnings, &notes);
    }
    auto say = [&](const char *level, const std::string &line) {
      if (options_.log)
        options_.log(level + (": " + line));
      else
        std::fprintf(stderr, "%s: %s\n", level, line.c_str());
    };
    for (const std::string &note : notes)
      say("note", note);
    for (const std::string &warning : warnings)
      say("warning", warning);
    if (config.gather16BitWeightsOnSave && options_.saveConsolidated.empty() &&
        !options_.saveDir.empty())
      options_.saveConsolidated =
          train.precision == "fp64" ? "fp32" : train.precision;
  }

  TrainResult run() {
    // One trainer per checkpoint directory: a second one would interleave
    // its saves with ours ("last writer wins").
    std::optional<CheckpointLock> lock;
    if (!options_.saveDir.empty() && comm_.rank() == 0)
      lock.emplace(options_.saveDir);
    agreeAcrossRanks();
    TrainOptions reporting = options_;
    // Every rank reads the state (a collective) at the same steps, so the
    // progress bar, which reads when its clock says, is one rank's only.
    if (comm_.worldSize() > 1)
      reporting.progressBar = false;
    if (comm_.rank() != 0) {
      // Only rank 0 reports; the others stay quiet unless they fail.
      reporting.log = [](const std::string &) {};
    }
    Reporter reporter(reporting, lastStep_,
                      loader_.batchSize() * microBatches_ * comm_.worldSize());
    reporter_ = &reporter;
    TrainResult result;
    uint64_t step = options_.resumeDir.empty() ? 0 : restore();
    openMetrics(step);
    result.firstStep = step + 1;
    result.finalStep = step;
    if (step >= lastStep_) {
      reporter.message("the checkpoint is at step " + std::to_string(step) +
                       "; nothing to do for " + std::to_string(lastStep_) +
                       " steps");
      return result;
    }
    reporter.message(describeRun(step + 1));
    if (options_.checkData)
      reporter.message(checkData());
    if (!options_.dumpGradsDir.empty())
      dumpGradients(step + 1);
    uint64_t savedStep = step;
    reporter.start(step + 1);
    intervalStart_ = step + 1;
    runner_.resetTrainState();
    while (step < lastStep_) {
      ++step;
      double lr = schedule_->lrAtStep(step);
      optimizerStep(step, lr);
      result.finalStep = step;
      // The loss stays on the device until a report, a metrics line or a
      // checkpoint needs it: no host synchronization in between.
      bool saving =
          shouldSave(step) || (step == lastStep_ && !options_.saveDir.empty());
      // Due on every rank alike (reading the state is a collective); rank
      // 0 writes the line.
      bool metricsDue = !options_.metricsFile.empty() &&
                        (step == lastStep_ || (options_.logEvery != 0 &&
                                               step % options_.logEvery == 0));
      // --check-finite reads the state after every step, so that a NaN or
      // infinity is named with the step it appeared in.
      bool reading = reporter.due(step) || saving || metricsDue;
      if (reading || checkingFinite()) {
        readState(step);
        ++result.stateReads;
      }
      if (reading) {
        float loss = takeLoss(step);
        result.losses.push_back(loss);
        result.loggedSteps.push_back(step);
        std::string extra = readLossScale(step);
        if (gradNormState_ >= 0)
          extra += printfString("  grad norm %.4g", stateValue(gradNormState_));
        if (loader_.tokenMode()) {
          reporter.tokens(lineReal_, linePositions_);
          lineReal_ = linePositions_ = 0;
        }
        reporter.step(step, loss, lr, extra);
        if (metricsDue && metrics_.is_open())
          writeMetrics(step, lr);
      } else if (checkingFinite()) {
        readLossScale(step); // stops at the step the scale fails
      }
      if (saving) {
        save(step);
        savedStep = step;
      }
      if (evalLoader_ &&
          (step == lastStep_ ||
           (options_.evalEvery != 0 && step % options_.evalEvery == 0)))
        result.evaluations.push_back(evaluate(step));
    }
    if (!options_.saveDir.empty() && savedStep != step)
      save(step);
    reporter.finish();
    // The bytes written equal the memory plan of the entries that ran (the
    // arena is the largest over all of them: a gradient entry may reach
    // further than the training step).
    result.arenaTouched = runner_.touchedArenaBytes();
    reporter.message("arena: " + std::to_string(plannedArena_) +
                     " bytes planned, " + std::to_string(result.arenaTouched) +
                     " written (high-water mark)");
    if (comm_.worldSize() > 1) {
      // What this rank's collectives moved, against the manifest's plan.
      uint64_t steps = result.finalStep - result.firstStep + 1;
      uint64_t planned = manifest().dist.ringElements(manifest().main().name);
      if (const Entry *accumulate = manifest().find(EntryPurpose::Accumulate))
        planned += (microBatches_ - 1) *
                   manifest().dist.ringElements(accumulate->name);
      reporter.message(
          "communication: " +
          std::to_string(comm_.elementsMoved() / std::max<uint64_t>(steps, 1)) +
          " elements per rank per step (planned " + std::to_string(planned) +
          ")");
    }
    return result;
  }

private:
  const Manifest &manifest() const { return artifact_.manifest(); }

  /// The bytes of one batch of every data input.
  uint64_t batchBytes() const {
    uint64_t bytes = 0;
    for (size_t index : loader_.bindingIndices())
      bytes += manifest().bindings[index].byteSize();
    return bytes;
  }

  void findHypers() {
    const std::vector<Binding> &bindings = manifest().bindings;
    for (size_t i = 0; i < bindings.size(); ++i) {
      if (bindings[i].role == BindingRole::State &&
          bindings[i].dtype == DType::Float32 && bindings[i].shape.empty()) {
        if (bindings[i].name == "loss_scale")
          scaleState_ = static_cast<int>(i);
        else if (bindings[i].name == "loss_scale.skipped_steps")
          skippedState_ = static_cast<int>(i);
        else if (bindings[i].name == "loss_scale.failed_at")
          failedState_ = static_cast<int>(i);
        else if (bindings[i].name == kGradNormState)
          gradNormState_ = static_cast<int>(i);
      }
      if (bindings[i].role != BindingRole::Hyper)
        continue;
      if (bindings[i].name == "lr")
        lrHyper_ = static_cast<int>(i);
      else if (bindings[i].name == "step")
        stepHyper_ = static_cast<int>(i);
      else if (bindings[i].name == "loss_weight")
        lossWeightHyper_ = static_cast<int>(i);
      else if (bindings[i].name != kRandomKeyHyper) // Runner::setRandomKey
        throw Error("hyper '" + bindings[i].name +
                    "' is not one the trainer writes (known: lr, step, "
                    "loss_weight, " +
                    kRandomKeyHyper + ")");
    }
  }

  /// Before the step's first collective: every rank runs the same artifact
  /// (the manifest's hash, the collective sequence's) on the same world
  /// size; a mismatch stops every rank, naming the ranks that differ from
  /// rank 0.
  void agreeAcrossRanks() {
    if (comm_.worldSize() == 1)
      return;
    // The whole manifest (training configuration included: ranks with
    // different learning rates would drift apart silently), the collective
    // sequence, the world size.
    std::vector<std::string> all =
        comm_.allGatherText(hexHash(manifestHash(manifest())) + " " +
                            hexHash(manifest().dist.hash()) + " " +
                            std::to_string(manifest().dist.worldSize));
    std::string differ;
    for (size_t r = 1; r < all.size(); ++r)
      if (all[r] != all[0])
        differ += (differ.empty() ? "" : ", ") + std::to_string(r);
    if (!differ.empty())
      throw Error("ranks run different artifacts: rank(s) " + differ +
                  " differ from rank 0 in the manifest (the step, its "
                  "training configuration, collectives or world size); give "
                  "every rank the same artifact");
    // What else must be equal: the replicas start from the same weights
    // (DeepSpeed and DDP broadcast rank 0's), split the samples by one
    // shuffle, stop at one step and save into one checkpoint.
    std::string weights;
    if (options_.resumeDir.empty()) {
      std::string init = joinPath(options_.artifactDir, "init.safetensors");
      std::error_code error;
      weights =
          std::filesystem::exists(init, error) ? sha256File(init) : "none";
    }
    const std::pair<const char *, std::string> fields[] = {
        {"the initial weights (the artifact's init.safetensors)", weights},
        {"--seed", std::to_string(options_.seed)},
        {"--sampler", options_.sequential ? "sequential" : "random"},
        {"the last step (--steps, --epochs)", std::to_string(lastStep_)},
        {"--save", options_.saveDir},
        {"--save-every", std::to_string(options_.saveEvery)},
        {"--save-total-limit", std::to_string(options_.saveTotalLimit)},
        {"--save-consolidated", options_.saveConsolidated},
        {"--resume", options_.resumeDir},
        // Data directories may differ (each rank its own copy or share);
        // the ranks agree on the epoch length instead.
        {"--eval-every", std::to_string(options_.evalEvery)},
    };
    for (const auto &[field, value] : fields) {
      std::vector<std::string> values = comm_.allGatherText(value);
      std::string disagree;
      for (size_t r = 1; r < values.size(); ++r)
        if (values[r] != values[0])
          disagree += std::string(disagree.empty() ? "" : ", ") + "rank " +
                      std::to_string(r) + " has '" + printable(values[r], 80) +
                      "'";
      if (!disagree.empty())
        throw Error(std::string("ranks disagree on ") + field +
                    ": rank 0 has '" + printable(values[0], 80) + "', " +
                    disagree +
                    "; start every rank with the same artifact and flags");
    }
  }

  std::string describeRun(uint64_t firstStep) const {
    const TrainConfig &train = manifest().train;
    std::string rows = " samples";
    if (loader_.tokenMode())
      rows = loader_.tokenBatching().mode == "pack"
                 ? " rows packed from " + loader_.tokenDescription()
                 : " rows, one per document of " + loader_.tokenDescription();
    std::string text = "training " + options_.artifactDir + ": " +
                       std::to_string(loader_.numSamples()) + rows +
                       ", batches of " + std::to_string(loader_.batchSize()) +
                       " (" + std::to_string(loader_.batchesPerEpoch()) +
                       " per epoch";
    if (microBatches_ > 1)
      text += ", " + std::to_string(microBatches_) + " per step";
    if (comm_.worldSize() > 1)
      text += ", on each of " + std::to_string(comm_.worldSize()) +
              " ranks: global batch " +
              std::to_string(loader_.batchSize() * microBatches_ *
                             comm_.worldSize()) +
              ", ZeRO stage " + std::to_string(manifest().dist.zeroStage);
    text += "), steps " + std::to_string(firstStep) + ".." +
            std::to_string(lastStep_) + ", optimizer " + train.optimizer +
            ", lr schedule " + scheduleName(train.schedule.kind);
    return text;
  }

  bool shouldSave(uint64_t step) const {
    return !options_.saveDir.empty() && options_.saveEvery != 0 &&
           step % options_.saveEvery == 0;
  }

  void setHypers(uint64_t step, double lr) {
    if (lrHyper_ >= 0) {
      size_t index = static_cast<size_t>(lrHyper_);
      runner_.setBinding(
          index, scalarTensor(manifest().bindings[index].dtype, lr, "lr"));
    }
    if (stepHyper_ >= 0) {
      size_t index = static_cast<size_t>(stepHyper_);
      runner_.setBinding(index,
                         scalarTensor(manifest().bindings[index].dtype,
                                      static_cast<double>(step), "step"));
    }
  }

  void uploadBatch(const std::vector<Tensor> &batch) {
    const std::vector<size_t> &indices = loader_.bindingIndices();
    for (size_t i = 0; i < indices.size(); ++i)
      runner_.setBinding(indices[i], batch[i]);
  }

  bool checkingFinite() const { return !manifest().finiteChecks.empty(); }

  /// "the forward of ONNX node '/Pow' (pow)": finite check `check`.
  std::string describeCheck(int64_t check) const {
    const std::vector<FiniteCheck> &checks = manifest().finiteChecks;
    if (check < 1 || uint64_t(check) > checks.size())
      return "finite check " + std::to_string(check) +
             ", which the manifest does not list";
    return checks[size_t(check - 1)].describe();
  }

  /// The mean loss of the calls since the last takeLoss, read by readState.
  float takeLoss(uint64_t step) {
    if (pendingCalls_ == 0)
      throw Error("step " + std::to_string(step) +
                  ": the step recorded no loss (an artifact compiled without "
                  "kernel.record_loss; recompile it)");
    float loss = static_cast<float>(pendingLossSum_ / double(pendingCalls_));
    pendingLossSum_ = 0;
    pendingCalls_ = 0;
    return loss;
  }

  /// Reads the device-side training state (and resets it); `step` is the
  /// step just run. A non-finite loss names the optimizer step it appeared
  /// at; a --check-finite note names the kernel that first wrote a NaN or
  /// an infinity.
  void readState(uint64_t step) {
    uint64_t first = intervalStart_;
    ztc_train_state state;
    try {
      state = runner_.trainState();
    } catch (const Error &failure) {
      // An asynchronous backend reports a failed call when the host waits.
      throw Error("steps " + std::to_string(first) + ".." +
                  std::to_string(step) + ": " + failure.what());
    }
    runner_.resetTrainState();
    intervalStart_ = step + 1;
    if (comm_.worldSize() > 1) {
      // The reported loss is the mean over ranks; a rank that diverged
      // stops every rank at the same report.
      double sums[3] = {state.loss_sum, double(state.calls),
                        state.first_nonfinite_call != 0 ? 1.0 : 0.0};
      comm_.allReduceSum(sums, 3);
      if (sums[2] > 0 && state.first_nonfinite_call == 0 && !dynamicScaling())
        throw Error("training diverged on another rank between steps " +
                    std::to_string(first) + " and " + std::to_string(step) +
                    " (that rank names the step and its batch)");
      state.loss_sum = sums[0];
      state.calls = int64_t(sums[1]);
    }
    metricsLossSum_ += state.loss_sum;
    metricsCalls_ += state.calls;
    pendingLossSum_ += state.loss_sum;
    pendingCalls_ += uint64_t(state.calls);
    if (state.first_nonfinite_check != 0) {
      std::string where = "the first NaN or infinity was written by " +
                          describeCheck(state.first_nonfinite_check);
      if (!dynamicScaling())
        throw Error("step " + std::to_string(step) +
                    " (--check-finite): " + where);
      // Under dynamic loss scaling the step was skipped; the note is kept
      // for the report should the scale fail at its minimum.
      lastOverflow_ = "step " + std::to_string(step) + ": " + where;
      reporter_->message(lastOverflow_ + " (an overflow: the update is "
                                         "skipped)");
    }
    std::vector<DataPosition> positions = std::move(callPositions_);
    callPositions_.clear();
    // Under dynamic loss scaling an overflowing step is skipped, not
    // trained on; the scaler's failure at its minimum is what stops a run.
    if (state.first_nonfinite_call != 0 && !dynamicScaling()) {
      uint64_t call = uint64_t(state.first_nonfinite_call - 1);
      uint64_t at = first + call / microBatches_;
      double loss = state.first_nonfinite_loss;
      std::string batch;
      if (call < positions.size())
        batch = " (its " + std::string(microBatches_ > 1 ? "micro-" : "") +
                "batch: samples " + listSamples(positions[call]) + ")";
      throw Error("training diverged at step " + std::to_string(at) +
                  ": the loss is " +
                  (loss != loss ? "nan"
                   : loss > 0   ? "inf"
                                : "-inf") +
                  batch);
    }
  }

  bool dynamicScaling() const {
    return scaleState_ >= 0 && skippedState_ >= 0 && failedState_ >= 0;
  }

  float stateValue(int index) const {
    Tensor value = runner_.binding(static_cast<size_t>(index));
    return *value.data<float>();
  }

  /// Under dynamic loss scaling, reads the scale and the skipped steps
  /// ("  loss scale 32768  skipped 3" for the log line) and stops the run
  /// when the scale failed at its minimum; else "". Read only when the
  /// loss is, so it costs no extra synchronization.
  std::string readLossScale(uint64_t step) {
    if (!dynamicScaling())
      return "";
    lossScale_ = stateValue(scaleState_);
    skippedSteps_ = static_cast<uint64_t>(stateValue(skippedState_));
    if (float failedAt = stateValue(failedState_); failedAt != 0) {
      auto at = static_cast<uint64_t>(failedAt);
      throw Error(
          "step " + std::to_string(at) +
          ": the gradients overflow in fp16 at the minimum loss scale (" +
          printfString("%.10g", lossScale_) +
          ") with no hysteresis left; training stops (" +
          (at == step
               ? "step " + std::to_string(at)
               : "steps " + std::to_string(at) + ".." + std::to_string(step)) +
          " applied no update, so the parameters are those after step " +
          std::to_string(at - 1) + "). " +
          (lastOverflow_.empty()
               ? std::string("Compile with --check-finite to name the ONNX "
                             "node that overflows, ")
               : "At " + lastOverflow_ + ". Compile ") +
          "with a lower --min-loss-scale, or with --precision bf16 "
          "(float32's range, no scaling)");
    }
    return printfString("  loss scale %.10g  skipped %llu", lossScale_,
                        static_cast<unsigned long long>(skippedSteps_));
  }

  /// --metrics FILE: truncated for a new run, appended to by a resumed one
  /// (its earlier lines describe the steps before the checkpoint).
  void openMetrics(uint64_t step) {
    if (options_.metricsFile.empty() || comm_.rank() != 0)
      return;
    metrics_.open(options_.metricsFile, options_.resumeDir.empty()
                                            ? std::ios::out | std::ios::trunc
                                            : std::ios::out | std::ios::app);
    if (!metrics_)
      throw Error("cannot write metrics file " + options_.metricsFile + ": " +
                  std::strerror(errno));
    metricsLast_ = Clock::now();
    metricsLastStep_ = step;
    // Tokens per sample: the labels' elements per sample when there is one
    // per position (a language model), else none.
    for (const Binding &binding : manifest().bindings)
      if (binding.role == BindingRole::Label && binding.shape.size() >= 2) {
        tokensPerSample_ = 1;
        for (size_t d = 1; d < binding.shape.size(); ++d)
          tokensPerSample_ *= uint64_t(binding.shape[d]);
      }
  }

  /// One JSON line per logged step, with the fields of the Hugging Face
  /// Trainer's log_history: the mean loss since the previous line, the
  /// learning rate, the epoch (fractional), throughput and the arena. The
  /// gradient norm (the logged step's, before clipping) is null unless the
  /// step clips, the loss scale unless it scales dynamically.
  /// One JSON line of --metrics, flushed.
  void appendMetrics(const nlohmann::ordered_json &line, uint64_t step) {
    metrics_ << line.dump() << "\n";
    metrics_.flush();
    if (!metrics_)
      throw Error("cannot write metrics file " + options_.metricsFile +
                  " at step " + std::to_string(step) + ": " +
                  std::strerror(errno));
  }

  void writeMetrics(uint64_t step, double lr) {
    Clock::time_point now = Clock::now();
    double seconds = std::max(secondsBetween(metricsLast_, now), 1e-9);
    double samples = double(step - metricsLastStep_) *
                     double(loader_.batchSize() * microBatches_);
    nlohmann::ordered_json line = {
        {"step", step},
        {"epoch", double(step * microBatches_) /
                      double(std::max<uint64_t>(1, loader_.batchesPerEpoch()))},
        {"loss", metricsCalls_ ? metricsLossSum_ / double(metricsCalls_) : 0.0},
        {"learning_rate", lr},
        {"grad_norm", gradNormState_ >= 0
                          ? nlohmann::ordered_json(stateValue(gradNormState_))
                          : nlohmann::ordered_json(nullptr)},
        {"loss_scale", dynamicScaling() ? nlohmann::ordered_json(lossScale_)
                                        : nlohmann::ordered_json(nullptr)},
        {"skipped_steps", skippedSteps_},
        {"samples_per_second", samples / seconds},
        {"arena_bytes", runner_.arenaBytes()}};
    line["tokens_per_second"] =
        tokensPerSample_ ? nlohmann::ordered_json(
                               samples * double(tokensPerSample_) / seconds)
                         : nlohmann::ordered_json(nullptr);
    if (loader_.tokenMode()) {
      // A token dataset: the labels that count, on every rank, and the
      // share of positions that are padding.
      line["real_tokens"] = metricsReal_;
      line["tokens_per_second"] = double(metricsReal_) / seconds;
      line["padding_fraction"] =
          metricsPositions_
              ? 1.0 - double(metricsReal_) / double(metricsPositions_)
              : 0.0;
    }
    metricsReal_ = metricsPositions_ = 0;
    appendMetrics(line, step);
    metricsLossSum_ = 0;
    metricsCalls_ = 0;
    metricsLast_ = now;
    metricsLastStep_ = step;
  }

  /// "3, 17, 22, 9": the samples of the batch at `position` (the first 16,
  /// then how many more).
  std::string listSamples(const DataPosition &position) const {
    // A pure function of the position: safe while the reader runs.
    std::vector<uint64_t> samples = loader_.samplesAt(position);
    std::string text;
    for (size_t i = 0; i < samples.size() && i < 16; ++i)
      text += (i ? ", " : "") + std::to_string(samples[i]);
    if (samples.size() > 16)
      text += " and " + std::to_string(samples.size() - 16) + " more";
    return text;
  }

  /// --check-data: scans the data; throws on the first bad sample.
  std::string checkData() const {
    DataCheck check;
    check.classes = manifest().train.classes;
    check.hasIgnore = manifest().train.ignoreIndex.has_value();
    check.ignoreIndex = manifest().train.ignoreIndex.value_or(0);
    std::string problem = loader_.check(check);
    if (!problem.empty())
      throw Error("data check: " + problem);
    std::string labels =
        check.classes ? ", labels in [0, " + std::to_string(check.classes) + ")"
                      : "";
    return "data check: " + std::to_string(loader_.numSamples()) +
           " samples, no NaN or infinity" + labels + ": ok";
  }

  /// --eval-data: the held-out samples, as many on every rank (the fewest
  /// any rank has), and the batches that cover them.
  void openEvalData() {
    const Entry *entry = manifest().find(EntryPurpose::Evaluate);
    evalEntry_ = artifact_.entry(EntryPurpose::Evaluate);
    if (!entry || !evalEntry_)
      throw Error("--eval-data needs an evaluate entry, which " +
                  options_.artifactDir +
                  " lacks (compiled by an older ztc or with --entries): "
                  "recompile it");
    try {
      evalLoader_.emplace(manifest(), options_.evalDataDir, loader_.seed(),
                          /*partialBatches=*/true, options_.tokens);
    } catch (const Error &failure) {
      throw Error("--eval-data: " + std::string(failure.what()));
    }
    evalSamples_ = fewestOnAnyRank(comm_, evalLoader_->numSamples());
    evalCorrect_ = entry->outputIndex("correct");
    evalCounted_ = entry->outputIndex("counted");
    uint64_t global = evalLoader_->batchSize() * comm_.worldSize();
    // A cross entropy pads the last global batch with ignored labels; any
    // other loss evaluates the whole global batches the samples fill.
    evalBatches_ = crossEntropyEval() ? (evalSamples_ + global - 1) / global
                                      : evalSamples_ / global;
    if (evalBatches_ == 0)
      throw Error("--eval-data " + options_.evalDataDir + ": " +
                  std::to_string(evalSamples_) +
                  " samples do not fill one global batch of " +
                  std::to_string(global) + " (" +
                  std::to_string(evalLoader_->batchSize()) + " x " +
                  std::to_string(comm_.worldSize()) +
                  " ranks); a loss other than cross entropy cannot pad one");
    if (!crossEntropyEval())
      evalSamples_ = evalBatches_ * global;
  }

  bool crossEntropyEval() const {
    return evalCorrect_ >= 0 && evalCounted_ >= 0;
  }

  /// Runs the evaluate entry over the held-out samples after step `step`
  /// (every rank the same number of calls: the entry may gather ZeRO-3
  /// shards) and reports the loss and accuracy over all ranks' samples.
  EvalReport evaluate(uint64_t step) {
    const Entry &entry = *manifest().find(EntryPurpose::Evaluate);
    plannedArena_ = std::max(plannedArena_, entry.arenaBytes);
    uint64_t batch = evalLoader_->batchSize();
    uint64_t global = batch * comm_.worldSize();
    int64_t ignore = manifest().train.ignoreIndex.value_or(-100);
    int lossOutput = entry.outputIndex("loss");
    // Weighted loss, weight, rows right, rows counted.
    double sums[4] = {0, 0, 0, 0};
    // Held-out rows are the artifact's full length; each batch's loss is
    // its mean.
    runner_.selectVariant(0);
    setLossWeight(1.0);
    auto scalar = [&](int index) {
      Tensor value = runner_.readArena(entry.outputs[size_t(index)]);
      return double(*value.data<float>());
    };
    for (uint64_t g = 0; g < evalBatches_; ++g) {
      std::vector<uint64_t> samples;
      uint64_t first = g * global + uint64_t(comm_.rank()) * batch;
      for (uint64_t k = first; k < first + batch && k < evalSamples_; ++k)
        samples.push_back(k);
      uploadBatch(evalLoader_->gather(samples, ignore));
      try {
        runner_.run(evalEntry_);
      } catch (const Error &failure) {
        throw Error("evaluation after step " + std::to_string(step) + ": " +
                    failure.what());
      }
      double loss = scalar(lossOutput);
      if (crossEntropyEval()) {
        double counted = scalar(evalCounted_);
        // A batch of padding alone has no loss (0 / 0).
        if (counted > 0) {
          sums[0] += loss * counted;
          sums[1] += counted;
        }
        sums[2] += scalar(evalCorrect_);
        sums[3] += counted;
      } else {
        sums[0] += loss;
        sums[1] += 1;
      }
    }
    if (comm_.worldSize() > 1)
      comm_.allReduceSum(sums, 4);
    EvalReport report;
    report.step = step;
    report.loss = sums[1] > 0 ? sums[0] / sums[1] : std::nan("");
    report.accuracy =
        crossEntropyEval() && sums[3] > 0 ? sums[2] / sums[3] : std::nan("");
    report.samples = evalSamples_;
    std::string text = printfString("eval after step %llu: loss %.6f",
                                    (unsigned long long)step, report.loss);
    if (crossEntropyEval())
      text += printfString("  accuracy %.2f%%", 100 * report.accuracy);
    text += "  (" + std::to_string(report.samples) + " samples of " +
            options_.evalDataDir + ")";
    reporter_->message(text);
    if (metrics_.is_open()) {
      nlohmann::ordered_json line = {{"step", step},
                                     {"eval_loss", report.loss},
                                     {"eval_samples", report.samples}};
      if (crossEntropyEval())
        line["eval_accuracy"] = report.accuracy;
      appendMetrics(line, step);
    }
    return report;
  }

  /// Runs the entry for `purpose` of `variant` (0: the artifact, else its
  /// sequence bucket variant - 1) for optimizer step `step`; a failure of
  /// the step (bad data a kernel found, a device error) names the step:
  ///   step 3: nll_loss: target 12 is outside [0, 10) (ignore_index -100)
  void runStep(EntryPurpose purpose, uint64_t step, size_t variant = 0) {
    const Artifact &artifact = variant ? buckets_[variant - 1] : artifact_;
    plannedArena_ =
        std::max(plannedArena_, artifact.manifest().find(purpose)->arenaBytes);
    EntryFn entry = purpose == artifact.manifest().main().purpose
                        ? artifact.entry()
                        : artifact.entry(purpose);
    runner_.selectVariant(variant);
    try {
      runner_.run(entry);
    } catch (const Error &failure) {
      throw Error("step " + std::to_string(step) + ": " + failure.what());
    }
  }

  /// One optimizer step over grad_accum micro-batches; each call records
  /// its loss on the device.
  void optimizerStep(uint64_t step, double lr) {
    setHypers(step, lr);
    // --token-weighted-loss: every micro-batch first, for the step's real
    // tokens on every rank.
    std::vector<std::pair<std::vector<Tensor>, BatchTokens>> taken;
    std::vector<double> weights;
    if (lossWeightHyper_ >= 0) {
      for (uint64_t micro = 0; micro < microBatches_; ++micro) {
        callPositions_.push_back(prefetcher_.position());
        BatchTokens tokens;
        std::vector<Tensor> batch = prefetcher_.take(tokens);
        taken.emplace_back(std::move(batch), tokens);
      }
      weights = tokenWeights(taken);
    }
    for (uint64_t micro = 0; micro < microBatches_; ++micro) {
      BatchTokens tokens;
      std::vector<Tensor> batch;
      if (lossWeightHyper_ >= 0) {
        batch = std::move(taken[micro].first);
        tokens = taken[micro].second;
        setLossWeight(weights[micro]);
      } else {
        callPositions_.push_back(prefetcher_.position());
        batch = prefetcher_.take(tokens);
      }
      for (uint64_t *count : {&lineReal_, &metricsReal_})
        *count += tokens.real;
      for (uint64_t *count : {&linePositions_, &metricsPositions_})
        *count += tokens.total;
      size_t variant = variantFor(tokens.sequence);
      runner_.selectVariant(variant);
      uploadBatch(batch);
      runner_.setRandomKey(randomKey(loader_.seed(), step, micro));
      bool last = micro + 1 == microBatches_;
      runStep(last ? manifest().main().purpose : EntryPurpose::Accumulate, step,
              variant);
    }
  }

  /// --token-weighted-loss: each micro-batch's loss weight, its real
  /// tokens (labels that are not the ignore index) times the calls that
  /// average into the step (micro-batches times ranks) over the step's
  /// real tokens on every rank. The step's gradient is then that of the
  /// mean over all its real tokens, and the logged loss (the mean of the
  /// calls') that mean.
  std::vector<double> tokenWeights(
      const std::vector<std::pair<std::vector<Tensor>, BatchTokens>> &taken) {
    int64_t ignore = manifest().train.ignoreIndex.value_or(-100);
    const std::vector<size_t> &indices = loader_.bindingIndices();
    std::vector<double> counts;
    double total = 0;
    for (const auto &[batch, tokens] : taken) {
      double count = 0;
      for (size_t i = 0; i < indices.size(); ++i) {
        if (manifest().bindings[indices[i]].role != BindingRole::Label)
          continue;
        const Tensor &labels = batch[i];
        for (int64_t e = 0; e < labels.numElements(); ++e)
          count += (labels.dtype == DType::Int32
                        ? int64_t(labels.data<int32_t>()[e])
                        : labels.data<int64_t>()[e]) != ignore;
      }
      counts.push_back(count);
      total += count;
    }
    if (comm_.worldSize() > 1)
      comm_.allReduceSum(&total, 1);
    double calls = double(taken.size() * comm_.worldSize());
    std::vector<double> weights;
    for (double count : counts)
      weights.push_back(total > 0 ? count * calls / total : 0.0);
    return weights;
  }

  void setLossWeight(double weight) {
    if (lossWeightHyper_ < 0)
      return;
    size_t index = size_t(lossWeightHyper_);
    runner_.setBinding(index, scalarTensor(manifest().bindings[index].dtype,
                                           weight, "loss_weight"));
  }

  /// The runner's variant for rows of `sequence` tokens: the sequence
  /// bucket the loader chose runs its own step (0: the artifact's).
  size_t variantFor(uint64_t sequence) const {
    const std::vector<uint64_t> &lengths = manifest().train.seqBuckets;
    for (size_t i = 0; i + 1 < lengths.size(); ++i)
      if (lengths[i] == sequence)
        return i + 1;
    return 0;
  }

  /// grad_entry on the batch the first update will use, with the random
  /// key of its first micro-batch: the gradients that micro-batch computes.
  void dumpGradients(uint64_t step) {
    prefetcher_.drain();
    DataPosition position = loader_.position();
    BatchTokens tokens;
    std::vector<Tensor> batch = loader_.next(&tokens);
    loader_.seek(position);
    size_t variant = variantFor(tokens.sequence);
    runner_.selectVariant(variant);
    uploadBatch(batch);
    setHypers(step, schedule_->lrAtStep(step));
    setLossWeight(1.0);
    runner_.setRandomKey(randomKey(loader_.seed(), step, 0));
    runStep(EntryPurpose::LossAndGrads, step, variant);
    const std::string &dir = options_.dumpGradsDir;
    createDirectories(joinPath(dir, "grad"));
    // The grad entry writes its loss where grad_outputs says, when it says.
    Tensor loss = runner_.output(lossIndex_);
    size_t grads = 0;
    const Manifest &ran =
        variant ? buckets_[variant - 1].manifest() : manifest();
    for (const Output &grad : ran.find(EntryPurpose::LossAndGrads)->outputs) {
      if (grad.name == "loss") {
        loss = runner_.readArena(grad);
        continue;
      }
      if (comm_.rank() == 0)
        writeNpy(joinPath(dir, "grad/" + grad.file + ".npy"),
                 runner_.readArena(grad));
      ++grads;
    }
    if (comm_.rank() != 0)
      return;
    writeNpy(joinPath(dir, "loss.npy"), loss);
    reporter_->message("wrote the loss and " + std::to_string(grads) +
                       " gradient(s) of step " + std::to_string(step) + " to " +
                       dir);
  }

  bool persistent(const Binding &binding) const {
    return isCheckpointed(binding);
  }

  /// Checkpoint metadata that must match on resume: the data layout.
  std::map<std::string, std::string> dataMetadata() const {
    return {{"batch_size", std::to_string(loader_.batchSize())},
            {"world_size", std::to_string(comm_.worldSize())},
            {"num_samples", std::to_string(loader_.numSamples())}};
  }

  /// Whether the ranks hold different state, so that each writes its own
  /// part (ShardedCheckpoint.h); otherwise rank 0 writes for all.
  bool shardedState() const {
    return comm_.worldSize() > 1 && manifest().dist.zeroStage > 0;
  }

  void save(uint64_t step) {
    if (comm_.rank() != 0 && !shardedState())
      return;
    Checkpoint checkpoint;
    checkpoint.step = step;
    checkpoint.epoch = prefetcher_.position().epoch;
    checkpoint.batch = prefetcher_.position().batch;
    checkpoint.seed = loader_.seed();
    checkpoint.metadata = dataMetadata();
    const std::vector<Binding> &bindings = manifest().bindings;
    for (size_t i = 0; i < bindings.size(); ++i)
      if (persistent(bindings[i]))
        checkpoint.tensors[bindings[i].name] = runner_.binding(i);
    if (shardedState())
      saveShardedCheckpoint(options_.saveDir, checkpoint, manifest(), comm_,
                            options_.saveTotalLimit);
    else
      saveCheckpoint(options_.saveDir, checkpoint);
    reporter_->message("saved checkpoint " + options_.saveDir + " at step " +
                       std::to_string(step));
    if (!options_.saveConsolidated.empty() && shardedState())
      saveConsolidated();
  }

  /// --save-consolidated: rank 0 streams the checkpoint just published into
  /// DIR/step-N/model.safetensors (Consolidate.h: one block in memory at a
  /// time, never the whole model); the others wait, so every rank returns
  /// with the file in place or the same error.
  void saveConsolidated() {
    std::string outcome = "ok";
    std::string path;
    if (comm_.rank() == 0) {
      try {
        path = joinPath(readShardedIndex(options_.saveDir).stepDir,
                        "model.safetensors");
        consolidate(options_.saveDir, path, options_.saveConsolidated);
      } catch (const std::exception &failure) {
        outcome = std::string("fail ") + failure.what();
      }
    }
    std::string first = comm_.allGatherText(outcome).front();
    if (first != "ok")
      throw Error("--save-consolidated: " + first.substr(5));
    if (comm_.rank() == 0)
      reporter_->message("wrote consolidated " + options_.saveConsolidated +
                         " weights " + path);
  }

  /// Restores params, states and the data position; returns the step.
  uint64_t restore() {
    const std::string &dir = options_.resumeDir;
    // The checkpoint's own layout when this run has it; else every binding
    // rebuilt from its whole tensor (another world size or stage).
    bool sharded = isShardedCheckpoint(dir);
    bool sameLayout = !sharded && !shardedState();
    if (sharded && shardedState()) {
      ShardedIndex index = readShardedIndex(dir);
      sameLayout = index.worldSize == uint64_t(comm_.worldSize()) &&
                   index.zeroStage == manifest().dist.zeroStage &&
                   index.manifestHash == hexHash(manifestHash(manifest()));
    }
    Checkpoint checkpoint;
    if (!sameLayout) {
      checkpoint = reshardCheckpoint(dir, manifest(), comm_.rank());
      reporter_->message("resharded the checkpoint in " + dir + " for " +
                         std::to_string(comm_.worldSize()) +
                         " rank(s) at ZeRO stage " +
                         std::to_string(manifest().dist.zeroStage));
    } else if (sharded) {
      checkpoint = loadShardedCheckpoint(dir, manifest(), comm_);
    } else {
      checkpoint = loadCheckpoint(dir, manifest());
    }
    checkDataPosition(checkpoint, loader_.batchesPerEpoch(),
                      checkpointPath(dir));
    if (checkpoint.seed != loader_.seed())
      throw Error("the checkpoint in " + dir + " was written with seed " +
                  std::to_string(checkpoint.seed) + "; this run has seed " +
                  std::to_string(loader_.seed()) +
                  " (the data order would differ)");
    // The same samples in the same global batches: the data position
    // counts global batches.
    auto written = [&](const char *key, const std::string &fallback) {
      auto it = checkpoint.metadata.find(key);
      return it == checkpoint.metadata.end() ? fallback : it->second;
    };
    std::string samples = std::to_string(loader_.numSamples());
    if (written("num_samples", samples) != samples)
      throw Error("the checkpoint in " + dir + " was written with " +
                  written("num_samples", "") + " samples; this run has " +
                  samples);
    uint64_t global = loader_.batchSize() * uint64_t(comm_.worldSize());
    uint64_t theirs = 0;
    try {
      theirs = std::stoull(written("batch_size", std::to_string(global))) *
               std::stoull(written("world_size", "1"));
    } catch (const std::exception &) {
      throw Error("the checkpoint in " + dir +
                  " has a malformed batch_size or world_size");
    }
    if (theirs != global)
      throw Error("the checkpoint in " + dir +
                  " was written with a global "
                  "batch of " +
                  std::to_string(theirs) +
                  " (batch_size x "
                  "world_size); this run has " +
                  std::to_string(global) + " (" +
                  std::to_string(loader_.batchSize()) + " x " +
                  std::to_string(comm_.worldSize()) + ")");
    try {
      loader_.seek({checkpoint.epoch, checkpoint.batch});
    } catch (const Error &failure) {
      throw Error("the checkpoint in " + dir + ": " + failure.what());
    }
    const std::vector<Binding> &bindings = manifest().bindings;
    for (size_t i = 0; i < bindings.size(); ++i)
      if (persistent(bindings[i]))
        runner_.setBinding(i, checkpoint.tensors.at(bindings[i].name));
    reporter_->message("resumed from " + dir + " at step " +
                       std::to_string(checkpoint.step) + " (epoch " +
                       std::to_string(checkpoint.epoch) + ", batch " +
                       std::to_string(checkpoint.batch) + ")");
    return checkpoint.step;
  }

  /// A copy: --config may fill in what the flags left out.
  TrainOptions options_;
  Communicator &comm_;
  Artifact artifact_;
  /// --seq-buckets: the steps of the shorter lengths, in order.
  std::vector<Artifact> buckets_;
  Runner runner_;
  DataLoader loader_;
  /// --eval-data: its samples (every rank the fewest any rank has), the
  /// global batches that cover them, the entry and its count outputs (-1:
  /// not a cross entropy).
  std::optional<DataLoader> evalLoader_;
  uint64_t evalSamples_ = 0, evalBatches_ = 0;
  EntryFn evalEntry_ = nullptr;
  int evalCorrect_ = -1, evalCounted_ = -1;
  /// After loader_: it stops its reader before the loader goes.
  Prefetcher prefetcher_;
  uint64_t microBatches_ = 1;
  size_t lossIndex_ = 0;
  uint64_t lastStep_ = 0;
  /// How far into the arena the entries called so far reach (their plans).
  uint64_t plannedArena_ = 0;
  /// The first optimizer step whose loss the device state holds, and the
  /// data position of every call since (to name a diverging batch).
  uint64_t intervalStart_ = 1;
  std::vector<DataPosition> callPositions_;
  int lrHyper_ = -1, stepHyper_ = -1, lossWeightHyper_ = -1;
  /// Dynamic loss scaling (ztc-loss-scale's states): the scale, the steps
  /// it skipped and the step it failed at (0: none); and their last reading.
  int scaleState_ = -1, skippedState_ = -1, failedState_ = -1;
  double lossScale_ = 0;
  /// The state the step writes its gradients' global norm to (with
  /// --clip-grad-norm), or -1.
  int gradNormState_ = -1;
  uint64_t skippedSteps_ = 0;
  /// --check-finite under dynamic scaling: the last overflow it named.
  std::string lastOverflow_;
  /// The losses read since the last logged one.
  double pendingLossSum_ = 0;
  uint64_t pendingCalls_ = 0;
  std::optional<Schedule> schedule_;
  Reporter *reporter_ = nullptr;
  /// --metrics: the file, the loss summed over the calls since its last
  /// line, and when that line was written.
  std::ofstream metrics_;
  double metricsLossSum_ = 0;
  uint64_t metricsCalls_ = 0;
  Clock::time_point metricsLast_;
  uint64_t metricsLastStep_ = 0;
  uint64_t tokensPerSample_ = 0;
  /// Token datasets: the real tokens (labels that count) and positions of
  /// the global batches since the last log line and metrics line.
  uint64_t lineReal_ = 0, linePositions_ = 0;
  uint64_t metricsReal_ = 0, metricsPositions_ = 0;
};

} // namespace

bool stderrIsTerminal() { return ::isatty(STDERR_FILENO) == 1; }

TrainResult train(const TrainOptions &options) {
  // auto: NCCL for a CUDA step that an MPI launcher started on several
  // ranks, MPI for a CPU one, else one local rank.
  std::string kind = options.comm;
  if (kind == "auto" && launchedByMpi()) {
    Manifest manifest =
        parseManifest(readFile(joinPath(options.artifactDir, "manifest.json")),
                      joinPath(options.artifactDir, "manifest.json"));
    kind = manifest.target == Target::Cuda ? "nccl" : "mpi";
  }
  setJoinTimeout(options.collectiveTimeout);
  std::unique_ptr<Communicator> comm = makeCommunicator(kind);
  comm->setTimeout(options.collectiveTimeout);
  if (comm->worldSize() == 1) {
    TrainingRun run(options, *comm);
    return run.run();
  }
  try {
    TrainingRun run(options, *comm);
    return run.run();
  } catch (const std::exception &failure) {
    // The other ranks would wait for this one in their next collective:
    // end them all now, saying which rank failed and why.
    std::fprintf(stderr, "error: rank %d of %d: %s\n", comm->rank(),
                 comm->worldSize(), failure.what());
    comm->abortAll(1);
  }
  return {}; // not reached: abortAll ends the process
}

} // namespace ztc::rt
