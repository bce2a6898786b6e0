//===- Trainer.cpp - the training loop of `ztc train` ---------------------===//
//
// A TrainingRun (TrainingRun.h) owns the pieces of one run (artifact,
// runner, data, lr schedule, reporter) and performs its phases in order:
// restore, dump gradients, step, save. This file holds the loop and
// train(); the Trainer*.cpp files beside it hold the run's other parts.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/TrainingRun.h"

#include "runtime/Error.h"
#include "runtime/comm/Communicator.h"
#include "runtime/io/File.h"
#include "runtime/io/Npy.h"
#include "runtime/train/Checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <optional>

#include <unistd.h>

namespace ztc::rt::detail {

TrainResult TrainingRun::run() {
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
    if (evalLoader_ && (step == lastStep_ || (options_.evalEvery != 0 &&
                                              step % options_.evalEvery == 0)))
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
      planned +=
          (microBatches_ - 1) * manifest().dist.ringElements(accumulate->name);
    reporter.message(
        "communication: " +
        std::to_string(comm_.elementsMoved() / std::max<uint64_t>(steps, 1)) +
        " elements per rank per step (planned " + std::to_string(planned) +
        ")");
  }
  return result;
}

void TrainingRun::runStep(EntryPurpose purpose, uint64_t step, size_t variant) {
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

void TrainingRun::optimizerStep(uint64_t step, double lr) {
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

std::vector<double> TrainingRun::tokenWeights(
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

size_t TrainingRun::variantFor(uint64_t sequence) const {
  const std::vector<uint64_t> &lengths = manifest().train.seqBuckets;
  for (size_t i = 0; i + 1 < lengths.size(); ++i)
    if (lengths[i] == sequence)
      return i + 1;
  return 0;
}

void TrainingRun::dumpGradients(uint64_t step) {
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
  const Manifest &ran = variant ? buckets_[variant - 1].manifest() : manifest();
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

} // namespace ztc::rt::detail

namespace ztc::rt {

using detail::TrainingRun;

bool stderrIsTerminal() { return ::isatty(STDERR_FILENO) == 1; }

TrainResult train(const TrainOptions &options) {
  // auto: NCCL for a CUDA step that an MPI launcher started on several
  // ranks, MPI for a CPU one, else one local rank.
  std::string kind = options.comm;
  if (kind == "auto" && launchedByMpi()) {
    Manifest manifest =
        parseManifest(readFile(joinPath(options.artifactDir, "manifest.json")),
                      joinPath(options.artifactDir, "manifest.json"));
    kind = targetInfo(manifest.target).launchedCommunicator;
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
