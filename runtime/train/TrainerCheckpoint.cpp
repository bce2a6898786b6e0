//===- TrainerCheckpoint.cpp - a training run's checkpoints ---------------===//
//
// Saving the params, states and data position (one file from rank 0, or
// every rank's part of a sharded checkpoint, with --save-consolidated
// weights), and restoring them, resharded when the layout differs.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/TrainingRun.h"

#include "runtime/Error.h"
#include "runtime/io/File.h"
#include "runtime/train/Checkpoint.h"
#include "runtime/train/Consolidate.h"
#include "runtime/train/ShardedCheckpoint.h"

#include <exception>

namespace ztc::rt::detail {

std::map<std::string, std::string> TrainingRun::dataMetadata() const {
  return {{"batch_size", std::to_string(loader_.batchSize())},
          {"world_size", std::to_string(comm_.worldSize())},
          {"num_samples", std::to_string(loader_.numSamples())}};
}

void TrainingRun::save(uint64_t step) {
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

void TrainingRun::saveConsolidated() {
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

uint64_t TrainingRun::restore() {
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
  checkDataPosition(checkpoint, loader_.batchesPerEpoch(), checkpointPath(dir));
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

} // namespace ztc::rt::detail
