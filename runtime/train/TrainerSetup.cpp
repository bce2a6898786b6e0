//===- TrainerSetup.cpp - a training run's start-up checks ----------------===//
//
// Building a TrainingRun: the artifact and its sequence buckets, the
// runner and this rank's data, the lr schedule; and what is checked before
// the first step: the flags against the artifact, --config against what it
// compiled in, and that every rank runs the same artifact and flags.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/TrainingRun.h"

#include "runtime/Error.h"
#include "runtime/io/File.h"
#include "runtime/io/Sha256.h"
#include "runtime/train/DeepSpeedConfig.h"

#include <cmath>
#include <cstdio>
#include <filesystem>

namespace ztc::rt::detail {

namespace {

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

} // namespace

TrainingRun::TrainingRun(const TrainOptions &options, Communicator &comm)
    : options_(options), comm_(comm),
      artifact_(loadTrainingArtifact(options.artifactDir)),
      buckets_(loadBuckets(artifact_)),
      runner_(artifact_,
              createBackend(artifact_.manifest().target, {options.commThread}),
              pointersTo(buckets_)),
      loader_(shardedLoader(manifest(), options, comm)),
      prefetcher_(loader_,
                  options.prefetch && batchBytes() >= options.prefetchMinBytes),
      microBatches_(manifest().train.gradAccum) {
  runner_.setCommunicator(comm.worldSize() > 1 ? &comm : nullptr);
  runner_.setGraphs(options.cudaGraphs);
  runner_.setNotice([this](const std::string &notice) {
    if (reporter_)
      reporter_->message(notice);
    else if (options_.log)
      options_.log(notice);
  });
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

void TrainingRun::applyConfig(const DeepSpeedConfig &config) {
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

void TrainingRun::agreeAcrossRanks() {
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
    weights = std::filesystem::exists(init, error) ? sha256File(init) : "none";
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
      throw Error(std::string("ranks disagree on ") + field + ": rank 0 has '" +
                  printable(values[0], 80) + "', " + disagree +
                  "; start every rank with the same artifact and flags");
  }
}

std::string TrainingRun::describeRun(uint64_t firstStep) const {
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

} // namespace ztc::rt::detail
