//===- TrainingRun.h - one run of `ztc train`, in parts ---------*- C++ -*-===//
//
// The class behind train() (Trainer.h) and the two helpers it owns: the
// Reporter (log lines, the progress bar) and the Prefetcher (the next batch
// on a reader thread). Private to the trainer. TrainingRun's member
// functions are defined by concept: start-up checks (TrainerSetup.cpp),
// the loop (Trainer.cpp), device state and bindings (TrainerState.cpp),
// reports and --metrics (TrainerMetrics.cpp), data (TrainerData.cpp),
// --eval-data (TrainerEval.cpp) and checkpoints (TrainerCheckpoint.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef ZTC_RUNTIME_TRAIN_TRAININGRUN_H
#define ZTC_RUNTIME_TRAIN_TRAININGRUN_H

#include "runtime/Artifact.h"
#include "runtime/Runner.h"
#include "runtime/Tensor.h"
#include "runtime/comm/Communicator.h"
#include "runtime/train/DataLoader.h"
#include "runtime/train/Schedule.h"
#include "runtime/train/Trainer.h"

#include <nlohmann/json_fwd.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace ztc::rt::detail {

using Clock = std::chrono::steady_clock;

/// printf into a string (TrainerMetrics.cpp).
std::string printfString(const char *pattern, ...)
    __attribute__((format(printf, 1, 2)));

/// The smallest `count` of any rank (a collective: every rank calls it).
uint64_t fewestOnAnyRank(Communicator &comm, uint64_t count);

/// The data loader of this rank: its share of every global batch, and the
/// epoch length every rank can fill (the ranks agree on it at start-up).
DataLoader shardedLoader(const Manifest &manifest, const TrainOptions &options,
                         Communicator &comm);

/// Per-step reports: plain log lines every logEvery steps, or a progress
/// bar redrawn in place on stderr; other messages go to the log either way.
class Reporter {
public:
  Reporter(const TrainOptions &options, uint64_t lastStep,
           uint64_t samplesPerStep);
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
  bool due(uint64_t step) const;

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
  void step(uint64_t step, float loss, double lr, const std::string &extra);

  /// Ends the progress line so later output starts on a fresh line.
  void finish() {
    if (drawn_)
      std::fputs("\n", stderr);
    drawn_ = false;
  }

private:
  void drawBar(uint64_t step, float loss, double lr, const std::string &extra,
               Clock::time_point now);

  void clearBar();

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
  ~Prefetcher();
  Prefetcher(const Prefetcher &) = delete;
  Prefetcher &operator=(const Prefetcher &) = delete;

  /// Where the batch take() returns next comes from.
  DataPosition position() const {
    return pending_ ? pendingAt_ : loader_.position();
  }

  /// The next batch (and a token dataset's counts for its global batch);
  /// asks the reader for the one after it.
  std::vector<Tensor> take(BatchTokens &tokens);

  /// Waits for the batch being gathered and puts the loader back at its
  /// position, for the caller to use the loader itself.
  void drain();

private:
  /// The pending batch, or its reader's error.
  std::vector<Tensor> wait(BatchTokens &tokens);

  void read();

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

/// One call of train().
class TrainingRun {
public:
  // Start-up (TrainerSetup.cpp).

  TrainingRun(const TrainOptions &options, Communicator &comm);

  /// --config: the artifact must be what the config describes, on this
  /// many ranks; its 16-bit save turns on the consolidated weights.
  void applyConfig(const DeepSpeedConfig &config);

  // The loop (Trainer.cpp).

  TrainResult run();

private:
  const Manifest &manifest() const { return artifact_.manifest(); }

  // Start-up (TrainerSetup.cpp).

  /// Before the step's first collective: every rank runs the same artifact
  /// (the manifest's hash, the collective sequence's) on the same world
  /// size; a mismatch stops every rank, naming the ranks that differ from
  /// rank 0.
  void agreeAcrossRanks();

  std::string describeRun(uint64_t firstStep) const;

  // The loop (Trainer.cpp).

  bool shouldSave(uint64_t step) const {
    return !options_.saveDir.empty() && options_.saveEvery != 0 &&
           step % options_.saveEvery == 0;
  }

  /// Runs the entry for `purpose` of `variant` (0: the artifact, else its
  /// sequence bucket variant - 1) for optimizer step `step`; a failure of
  /// the step (bad data a kernel found, a device error) names the step:
  ///   step 3: nll_loss: target 12 is outside [0, 10) (ignore_index -100)
  void runStep(EntryPurpose purpose, uint64_t step, size_t variant = 0);

  /// One optimizer step over grad_accum micro-batches; each call records
  /// its loss on the device.
  void optimizerStep(uint64_t step, double lr);

  /// --token-weighted-loss: each micro-batch's loss weight, its real
  /// tokens (labels that are not the ignore index) times the calls that
  /// average into the step (micro-batches times ranks) over the step's
  /// real tokens on every rank. The step's gradient is then that of the
  /// mean over all its real tokens, and the logged loss (the mean of the
  /// calls') that mean.
  std::vector<double> tokenWeights(
      const std::vector<std::pair<std::vector<Tensor>, BatchTokens>> &taken);

  /// The runner's variant for rows of `sequence` tokens: the sequence
  /// bucket the loader chose runs its own step (0: the artifact's).
  size_t variantFor(uint64_t sequence) const;

  /// grad_entry on the batch the first update will use, with the random
  /// key of its first micro-batch: the gradients that micro-batch computes.
  void dumpGradients(uint64_t step);

  // Device state and bindings (TrainerState.cpp).

  void findHypers();

  void setHypers(uint64_t step, double lr);

  void uploadBatch(const std::vector<Tensor> &batch);

  void setLossWeight(double weight);

  bool checkingFinite() const { return !manifest().finiteChecks.empty(); }

  /// "the forward of ONNX node '/Pow' (pow)": finite check `check`.
  std::string describeCheck(int64_t check) const;

  /// The mean loss of the calls since the last takeLoss, read by readState.
  float takeLoss(uint64_t step);

  /// Reads the device-side training state (and resets it); `step` is the
  /// step just run. A non-finite loss names the optimizer step it appeared
  /// at; a --check-finite note names the kernel that first wrote a NaN or
  /// an infinity.
  void readState(uint64_t step);

  bool dynamicScaling() const {
    return scaleState_ >= 0 && skippedState_ >= 0 && failedState_ >= 0;
  }

  float stateValue(int index) const;

  /// Under dynamic loss scaling, reads the scale and the skipped steps
  /// ("  loss scale 32768  skipped 3" for the log line) and stops the run
  /// when the scale failed at its minimum; else "". Read only when the
  /// loss is, so it costs no extra synchronization.
  std::string readLossScale(uint64_t step);

  // Metrics (TrainerMetrics.cpp).

  /// --metrics FILE: truncated for a new run, appended to by a resumed one
  /// (its earlier lines describe the steps before the checkpoint).
  void openMetrics(uint64_t step);

  /// One JSON line of --metrics, flushed.
  void appendMetrics(const nlohmann::ordered_json &line, uint64_t step);

  /// One JSON line per logged step, with the fields of the Hugging Face
  /// Trainer's log_history: the mean loss since the previous line, the
  /// learning rate, the epoch (fractional), throughput and the arena. The
  /// gradient norm (the logged step's, before clipping) is null unless the
  /// step clips, the loss scale unless it scales dynamically.
  void writeMetrics(uint64_t step, double lr);

  // Data (TrainerData.cpp).

  /// The bytes of one batch of every data input.
  uint64_t batchBytes() const;

  /// "3, 17, 22, 9": the samples of the batch at `position` (the first 16,
  /// then how many more).
  std::string listSamples(const DataPosition &position) const;

  /// --check-data: scans the data; throws on the first bad sample.
  std::string checkData() const;

  // Evaluation (TrainerEval.cpp).

  /// --eval-data: the held-out samples, as many on every rank (the fewest
  /// any rank has), and the batches that cover them.
  void openEvalData();

  bool crossEntropyEval() const {
    return evalCorrect_ >= 0 && evalCounted_ >= 0;
  }

  /// Runs the evaluate entry over the held-out samples after step `step`
  /// (every rank the same number of calls: the entry may gather ZeRO-3
  /// shards) and reports the loss and accuracy over all ranks' samples.
  EvalReport evaluate(uint64_t step);

  // Checkpoints (TrainerCheckpoint.cpp).

  bool persistent(const Binding &binding) const {
    return isCheckpointed(binding);
  }

  /// Checkpoint metadata that must match on resume: the data layout.
  std::map<std::string, std::string> dataMetadata() const;

  /// Whether the ranks hold different state, so that each writes its own
  /// part (ShardedCheckpoint.h); otherwise rank 0 writes for all.
  bool shardedState() const {
    return comm_.worldSize() > 1 && manifest().dist.zeroStage > 0;
  }

  void save(uint64_t step);

  /// --save-consolidated: rank 0 streams the checkpoint just published into
  /// DIR/step-N/model.safetensors (Consolidate.h: one block in memory at a
  /// time, never the whole model); the others wait, so every rank returns
  /// with the file in place or the same error.
  void saveConsolidated();

  /// Restores params, states and the data position; returns the step.
  uint64_t restore();

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

} // namespace ztc::rt::detail

#endif // ZTC_RUNTIME_TRAIN_TRAININGRUN_H
