//===- TrainerData.cpp - the data side of a training run ------------------===//
//
// Each rank's share of the data (shardedLoader), the Prefetcher that
// gathers the next batch while the step runs, --check-data, and the
// samples of a batch that a diverging step names.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/TrainingRun.h"

#include "runtime/Error.h"

#include <algorithm>
#include <utility>

namespace ztc::rt::detail {

uint64_t fewestOnAnyRank(Communicator &comm, uint64_t count) {
  if (comm.worldSize() == 1)
    return count;
  uint64_t fewest = count;
  for (const std::string &theirs : comm.allGatherText(std::to_string(count)))
    fewest = std::min<uint64_t>(fewest, std::stoull(theirs));
  return fewest;
}

DataLoader shardedLoader(const Manifest &manifest, const TrainOptions &options,
                         Communicator &comm) {
  // group: megabatches count in optimizer steps' batches (the Trainer's
  // per-device batch times its accumulation steps, on every rank), so that
  // the order is one for every split of a global batch into ranks and a
  // checkpoint resumes it on another world size.
  TokenBatching tokens = options.tokens;
  tokens.groupBatch =
      manifest.train.batchSize * manifest.train.gradAccum * comm.worldSize();
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

Prefetcher::~Prefetcher() {
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

std::vector<Tensor> Prefetcher::take(BatchTokens &tokens) {
  std::vector<Tensor> batch = pending_ ? wait(tokens) : loader_.next(&tokens);
  if (reader_.joinable()) {
    pendingAt_ = loader_.position();
    std::lock_guard<std::mutex> guard(mutex_);
    pending_ = requested_ = true;
    wake_.notify_all();
  }
  return batch;
}

void Prefetcher::drain() {
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

std::vector<Tensor> Prefetcher::wait(BatchTokens &tokens) {
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

void Prefetcher::read() {
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

uint64_t TrainingRun::batchBytes() const {
  uint64_t bytes = 0;
  for (size_t index : loader_.bindingIndices())
    bytes += manifest().bindings[index].byteSize();
  return bytes;
}

std::string TrainingRun::listSamples(const DataPosition &position) const {
  // A pure function of the position: safe while the reader runs.
  std::vector<uint64_t> samples = loader_.samplesAt(position);
  std::string text;
  for (size_t i = 0; i < samples.size() && i < 16; ++i)
    text += (i ? ", " : "") + std::to_string(samples[i]);
  if (samples.size() > 16)
    text += " and " + std::to_string(samples.size() - 16) + " more";
  return text;
}

std::string TrainingRun::checkData() const {
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

} // namespace ztc::rt::detail
