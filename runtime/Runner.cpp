//===- Runner.cpp - run a compiled forward step ---------------------------===//
//
// Inputs are checked before anything runs, so a wrong file never reaches
// generated code (which trusts its static shapes).
//
//===----------------------------------------------------------------------===//

#include "runtime/Runner.h"

#include "runtime/kernels/StepError.h"

#include "runtime/Error.h"
#include "runtime/io/File.h"
#include "runtime/io/Npy.h"
#include "runtime/kernels/Random.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>

namespace ztc::rt {

namespace {

/// Bytes after the arena filled with a pattern and checked after each call.
constexpr size_t kGuardBytes = 64;
constexpr unsigned char kGuardPattern = 0xA5;
/// Bytes the arena is filled and scanned in at a time.
constexpr uint64_t kScanChunk = uint64_t(1) << 20;

} // namespace

int64_t randomKey(uint64_t seed, uint64_t step, uint64_t microBatch) {
  return static_cast<int64_t>(
      random::combine(random::combine(seed, step), microBatch));
}

Runner::Runner(const Artifact &artifact, std::unique_ptr<Backend> backend,
               const std::vector<const Artifact *> &variants)
    : artifact_(artifact), backend_(std::move(backend)) {
  if (backend_->target() != manifest().target)
    throw Error(artifact_.directory() + ": the artifact targets " +
                targetName(manifest().target) + ", the backend runs " +
                targetName(backend_->target()));
  arenaBytes_ = manifest().arenaBytes;
  uint64_t streams = manifest().streams, events = manifest().events;
  for (const Artifact *variant : variants) {
    arenaBytes_ = std::max(arenaBytes_, variant->manifest().arenaBytes);
    streams = std::max(streams, variant->manifest().streams);
    events = std::max(events, variant->manifest().events);
  }
  checkDeviceMemory();
  arena_ = DeviceBuffer(*backend_, arenaBytes_ + kGuardBytes);
  // The arena and its guard band start filled with the pattern: the guard
  // catches overruns, and the highest byte that no longer holds it is the
  // high-water mark (touchedArenaBytes). No kernel may read arena bytes
  // it did not write, so the pattern changes no result.
  std::vector<unsigned char> pattern(
      std::min<uint64_t>(arenaBytes_ + kGuardBytes, kScanChunk), kGuardPattern);
  for (uint64_t at = 0; at < arenaBytes_ + kGuardBytes; at += kScanChunk)
    backend_->copyIn(
        static_cast<char *>(arena_.data()) + at, pattern.data(),
        std::min<uint64_t>(kScanChunk, arenaBytes_ + kGuardBytes - at));

  streams_ = backend_->streams(streams);
  events_ = backend_->events(events);
  // The training state and the error slot start zeroed, like every buffer.
  trainState_ = DeviceBuffer(*backend_, sizeof(ztc_train_state));
  errorSlot_ = DeviceBuffer(*backend_, sizeof(ztc_step_error));

  // Each param's copies, found once (the manifest checked their names).
  const std::vector<Binding> &all = manifest().bindings;
  copies_.resize(all.size());
  for (size_t i = 0; i < all.size(); ++i)
    if (!all[i].copyOf.empty())
      for (size_t j = 0; j < all.size(); ++j)
        if (all[j].name == all[i].copyOf)
          copies_[j].push_back(i);

  // Buffers start zeroed: states without an initial value stay so. The
  // values are read one at a time, each only while it is copied in.
  Artifact::InitialValues initial(artifact_, /*constantsOnly=*/false);
  for (const Binding &binding : manifest().bindings) {
    buffers_.emplace_back(*backend_, binding.byteSize());
    pointers_.push_back(buffers_.back().data());
    inputSet_.push_back(!isPerCall(binding.role));
    if (isData(binding.role))
      continue;
    if (binding.sharded()) {
      std::optional<Tensor> value = initial.next(binding);
      if (!value)
        continue;
      // Rank 0's block until setCommunicator says which rank this is.
      Tensor block = shardBlock(*value, binding, 0);
      backend_->copyIn(buffers_.back().data(), block.bytes.data(),
                       block.byteSize());
      wholeValues_[binding.name] = std::move(*value);
      continue;
    }
    auto *buffer = static_cast<uint8_t *>(buffers_.back().data());
    initial.stream(binding,
                   [&](uint64_t offset, const void *bytes, uint64_t count) {
                     backend_->copyIn(buffer + offset, bytes, count);
                   });
  }
  writeAllCopies();
  staged_ = backend_->asynchronous();
  if (staged_)
    allocateStaging();
  for (const Artifact *variant : variants)
    addVariant(*variant);
}

void Runner::allocateStaging() {
  const std::vector<Binding> &bindings = manifest().bindings;
  stagedOf_.assign(bindings.size(), -1);
  size_t stagingBytes = 0;
  for (size_t i = 0; i < bindings.size(); ++i) {
    if (!isPerCall(bindings[i].role))
      continue;
    stagedOf_[i] = static_cast<int>(stagedIndices_.size());
    stagedIndices_.push_back(i);
    stagingOffsets_.push_back(stagingBytes);
    // 64-byte steps keep every value aligned for its copy.
    stagingBytes += (buffers_[i].size() + 63) / 64 * 64;
    secondSet_.emplace_back(*backend_, buffers_[i].size());
  }
  latest_.resize(stagedIndices_.size());
  for (HostBuffer &staging : staging_)
    staging = HostBuffer(*backend_, stagingBytes);
  for (size_t i = 0; i < bindings.size(); ++i)
    secondPointers_.push_back(bufferFor(i, 1));
}

void *Runner::bufferFor(size_t index, unsigned slot) const {
  if (slot == 0 || !staged_ || stagedOf_[index] < 0)
    return buffers_[index].data();
  return secondSet_[size_t(stagedOf_[index])].data();
}

unsigned Runner::uploadStaged() {
  unsigned slot = nextSlot_;
  nextSlot_ ^= 1u;
  // The upload from this slot two calls back must have read its staging
  // buffer before it is written again.
  backend_->waitUploadRead(slot);
  auto *staging = static_cast<uint8_t *>(staging_[slot].data());
  std::vector<Backend::UploadCopy> copies;
  for (size_t k = 0; k < stagedIndices_.size(); ++k) {
    const std::vector<uint8_t> &bytes = latest_[k];
    if (bytes.empty())
      continue;
    uint8_t *host = staging + stagingOffsets_[k];
    std::memcpy(host, bytes.data(), bytes.size());
    copies.push_back({bufferFor(stagedIndices_[k], slot), host, bytes.size()});
  }
  backend_->upload(slot, copies);
  lastSlot_ = slot;
  return slot;
}

Runner::~Runner() = default;

void Runner::addVariant(const Artifact &artifact) {
  Variant &variant = variants_.emplace_back();
  variant.artifact = &artifact;
  std::map<std::string, size_t> mains;
  for (size_t i = 0; i < manifest().bindings.size(); ++i)
    mains[manifest().bindings[i].name] = i;
  std::map<std::string, Tensor> constants =
      artifact.loadInitialValues(/*constantsOnly=*/true);
  for (const Binding &binding : artifact.manifest().bindings) {
    if (binding.role == BindingRole::Constant) {
      DeviceBuffer &buffer =
          variant.constants.emplace_back(*backend_, binding.byteSize());
      const Tensor &value = constants.at(binding.name);
      backend_->copyIn(buffer.data(), value.bytes.data(), value.byteSize());
      variant.pointers.push_back(buffer.data());
      if (staged_)
        variant.secondPointers.push_back(buffer.data());
      continue;
    }
    // ztc compile checked that the rest are the main step's (same role,
    // dtype, shape; inputs no larger): check the cheap part again.
    auto it = mains.find(binding.name);
    if (it == mains.end() ||
        manifest().bindings[it->second].role != binding.role ||
        buffers_[it->second].size() < binding.byteSize())
      throw Error(artifact.directory() + ": " + roleName(binding.role) + " '" +
                  binding.name + "' " + binding.describe() +
                  " does not fit the bindings of " + artifact_.directory() +
                  " (recompile the artifact)");
    variant.pointers.push_back(buffers_[it->second].data());
    if (staged_)
      variant.secondPointers.push_back(bufferFor(it->second, 1));
    if (isData(binding.role))
      variant.inputs[it->second] = &binding;
  }
}

void Runner::selectVariant(size_t variant) {
  if (variant > variants_.size())
    throw Error("variant " + std::to_string(variant) + " of " +
                std::to_string(variants_.size()));
  selected_ = variant;
}

void Runner::checkDeviceMemory() const {
  std::optional<std::pair<uint64_t, uint64_t>> memory =
      backend_->deviceMemory();
  if (!memory)
    return;
  // What the constructor allocates: the arena, every binding, the training
  // state and the error slot, and what the kernel library reserves once
  // (cuBLAS's workspace). The plan is static, and the kernels' scratch is
  // in the arena, so this is all of it. An asynchronous backend's second
  // set of per-call bindings (allocateStaging) counts too, as the plan
  // counts it (TargetInfo::inputSets).
  uint64_t bindings = 0;
  for (const Binding &binding : manifest().bindings)
    bindings += binding.byteSize() *
                (backend_->asynchronous() && isPerCall(binding.role) ? 2 : 1);
  uint64_t reserved = targetInfo(manifest().target).reservedBytes;
  uint64_t needed = arenaBytes_ + kGuardBytes + bindings + reserved +
                    sizeof(ztc_train_state) + sizeof(ztc_step_error);
  auto [free, total] = *memory;
  if (needed <= free)
    return;
  throw Error(
      artifact_.directory() + ": the step needs " + std::to_string(needed) +
      " bytes of device memory per rank (" + std::to_string(arenaBytes_) +
      " in its arena, " + std::to_string(bindings) +
      " in parameters, optimizer state and data, " + std::to_string(reserved) +
      " for the kernel library), but the device has " + std::to_string(free) +
      " bytes free of " + std::to_string(total) +
      ": compile it with a higher --zero stage, for more ranks, or "
      "with --recompute budget=BYTES (`ztc inspect` shows the plan)");
}

void Runner::uploadInput(size_t index, const Tensor &value) {
  if (staged_ && stagedOf_[index] >= 0) {
    // Uploaded with the next call (uploadStaged).
    const uint8_t *bytes = value.bytes.data();
    latest_[size_t(stagedOf_[index])].assign(bytes, bytes + value.byteSize());
  } else {
    backend_->copyIn(buffers_[index].data(), value.bytes.data(),
                     value.byteSize());
  }
  inputSet_[index] = true;
}

void Runner::setInput(const std::string &name, const Tensor &value) {
  const std::vector<Binding> &bindings = manifest().bindings;
  for (size_t i = 0; i < bindings.size(); ++i) {
    if (!isData(bindings[i].role) || bindings[i].name != name)
      continue;
    if (value.dtype != bindings[i].dtype || value.shape != bindings[i].shape)
      throw Error("input '" + name + "': expected " + bindings[i].describe() +
                  ", got " + value.describe());
    uploadInput(i, value);
    return;
  }
  throw Error("the artifact has no input '" + name + "'");
}

void Runner::loadInputs(const std::string &dataDir) {
  std::error_code error;
  if (!std::filesystem::is_directory(dataDir, error))
    throw Error("data directory " + dataDir + " does not exist");

  const std::vector<Binding> &bindings = manifest().bindings;
  std::set<std::string> expected;
  std::string missing;
  for (const Binding &binding : bindings) {
    if (!isData(binding.role))
      continue;
    std::string file = binding.file + ".npy";
    expected.insert(file);
    if (!std::filesystem::is_regular_file(joinPath(dataDir, file), error))
      missing += (missing.empty() ? "" : ", ") + file + " (input '" +
                 binding.name + "', " + binding.describe() + ")";
  }
  if (!missing.empty())
    throw Error("missing input file(s) in " + dataDir + ": " + missing);

  std::vector<std::string> extra;
  for (const auto &entry :
       std::filesystem::directory_iterator(dataDir, error)) {
    std::string file = entry.path().filename().string();
    if (entry.path().extension() == ".npy" && !expected.count(file))
      extra.push_back(file);
  }
  if (!extra.empty()) {
    std::sort(extra.begin(), extra.end());
    std::string message =
        "unexpected file(s) in " + dataDir + " match no input: ";
    for (size_t i = 0; i < extra.size(); ++i)
      message += (i ? ", " : "") + extra[i];
    if (expected.empty()) {
      message += " (the artifact has no inputs)";
    } else {
      message += " (expected: ";
      size_t i = 0;
      for (const std::string &file : expected)
        message += (i++ ? ", " : "") + file;
      message += ")";
    }
    throw Error(message);
  }

  for (size_t i = 0; i < bindings.size(); ++i) {
    const Binding &binding = bindings[i];
    if (!isData(binding.role))
      continue;
    std::string path = joinPath(dataDir, binding.file + ".npy");
    Tensor value;
    try {
      value = readNpy(path);
    } catch (const Error &failure) {
      throw Error("input '" + binding.name + "': " + failure.what());
    }
    if (value.dtype != binding.dtype || value.shape != binding.shape)
      throw Error("input '" + binding.name + "' (" + path + "): expected " +
                  binding.describe() + ", got " + value.describe());
    uploadInput(i, value);
  }
}

void Runner::setBinding(size_t index, const Tensor &value) {
  const Binding *selected = &manifest().bindings.at(index);
  if (selected_ != 0)
    if (auto it = variants_[selected_ - 1].inputs.find(index);
        it != variants_[selected_ - 1].inputs.end())
      selected = it->second;
  const Binding &binding = *selected;
  if (value.dtype != binding.dtype || value.shape != binding.shape)
    throw Error(std::string(roleName(binding.role)) + " '" + binding.name +
                "': expected " + binding.describe() + ", got " +
                value.describe());
  uploadInput(index, value);
  writeCopies(index, value);
}

void Runner::writeCopies(size_t source, const Tensor &value) {
  for (size_t copy : copies_[source]) {
    std::vector<uint8_t> bytes = convertFloats(value.bytes, value.dtype,
                                               manifest().bindings[copy].dtype);
    backend_->copyIn(buffers_[copy].data(), bytes.data(), bytes.size());
  }
}

void Runner::writeAllCopies() {
  const std::vector<Binding> &bindings = manifest().bindings;
  backend_->synchronize();
  for (size_t i = 0; i < bindings.size(); ++i) {
    if (copies_[i].empty())
      continue;
    Tensor value(bindings[i].dtype, bindings[i].shape);
    backend_->copyOut(value.bytes.data(), buffers_[i].data(), value.byteSize());
    writeCopies(i, value);
  }
}

Tensor Runner::binding(size_t index) const {
  const Binding &spec = manifest().bindings.at(index);
  Tensor value(spec.dtype, spec.shape);
  if (staged_ && stagedOf_[index] >= 0) {
    // What the host set last, which the next call uploads; a variant's
    // shorter input is read from the slot of the last call.
    const std::vector<uint8_t> &bytes = latest_[size_t(stagedOf_[index])];
    if (bytes.size() == value.byteSize()) {
      std::copy(bytes.begin(), bytes.end(), value.bytes.begin());
      return value;
    }
  }
  synchronize();
  backend_->copyOut(value.bytes.data(), bufferFor(index, lastSlot_),
                    value.byteSize());
  return value;
}

void Runner::setRandomKey(int64_t key) {
  const std::vector<Binding> &bindings = manifest().bindings;
  for (size_t i = 0; i < bindings.size(); ++i) {
    if (bindings[i].role != BindingRole::Hyper ||
        bindings[i].name != kRandomKeyHyper)
      continue;
    Tensor value(DType::Int64, {});
    *value.data<int64_t>() = key;
    setBinding(i, value);
  }
}

void Runner::setCommunicator(Communicator *comm) {
  uint64_t want = manifest().dist.worldSize;
  uint64_t have = comm ? comm->worldSize() : 1;
  if (want != have) {
    // Name the launcher the ranks came from: a Slurm job step has an id.
    bool slurm = std::getenv("SLURM_STEP_ID") != nullptr;
    std::string launcher = slurm ? "srun" : "mpirun";
    throw Error("the step was compiled for " + std::to_string(want) + " rank" +
                (want == 1 ? "" : "s") + " (--world-size " +
                std::to_string(want) + "), but runs on " +
                std::to_string(have) + ": start it with " + launcher +
                (slurm ? " -n " : " -np ") + std::to_string(want) +
                (want == 1 ? " or without " + launcher : "") +
                ", or recompile with --world-size " + std::to_string(have));
  }
  comm_ = comm;
  // Shards start as this rank's block of their initial value.
  const std::vector<Binding> &bindings = manifest().bindings;
  for (size_t i = 0; i < bindings.size(); ++i) {
    auto whole = wholeValues_.find(bindings[i].name);
    if (whole == wholeValues_.end())
      continue;
    Tensor block =
        shardBlock(whole->second, bindings[i], comm ? comm->rank() : 0);
    backend_->copyIn(buffers_[i].data(), block.bytes.data(), block.byteSize());
  }
  wholeValues_.clear();
  writeAllCopies();
}

void Runner::run() { run(artifact_.entry()); }

void Runner::run(EntryFn entry) {
  const std::vector<Binding> &bindings = manifest().bindings;
  for (size_t i = 0; i < bindings.size(); ++i)
    if (!inputSet_[i])
      throw Error(std::string(roleName(bindings[i].role)) + " '" +
                  bindings[i].name + "' was not set");
  unsigned slot = staged_ ? uploadStaged() : 0;
  ztc_step_context context{};
  if (selected_ != 0)
    context.bindings = slot ? variants_[selected_ - 1].secondPointers.data()
                            : variants_[selected_ - 1].pointers.data();
  else
    context.bindings = slot ? secondPointers_.data() : pointers_.data();
  context.arena = static_cast<char *>(arena_.data());
  context.streams = streams_.data();
  context.stream_count = static_cast<int32_t>(streams_.size());
  context.events = events_.data();
  context.event_count = static_cast<int32_t>(events_.size());
  if (!comm_ && manifest().dist.worldSize != 1)
    setCommunicator(nullptr); // throws: the step needs its ranks
  context.comm = comm_ ? comm_->table() : nullptr;
  context.rank = comm_ ? comm_->rank() : 0;
  context.world_size = comm_ ? comm_->worldSize() : 1;
  context.state = static_cast<ztc_train_state *>(trainState_.data());
  context.error = static_cast<ztc_step_error *>(errorSlot_.data());
  // A recorded graph replays the collectives' device work but none of the
  // communicator's host work, so a step with collectives is recorded only
  // where the communicator allows it.
  bool replayable = graphs_ && (manifest().dist.worldSize == 1 ||
                                (comm_ && comm_->graphCapturable()));
  // The collectives' host code counts what they move: once per call, which
  // a replay does not run and a failed recording runs once too often.
  const uint64_t movedBefore = comm_ ? comm_->elementsMoved() : 0;
  unsigned hostRuns = 1;
  if (replayable)
    hostRuns = backend_->replay(entry, context);
  else
    backend_->call(entry, context);
  if (comm_ && hostRuns > 0) {
    const uint64_t moved = (comm_->elementsMoved() - movedBefore) / hostRuns;
    movedPerCall_[entry] = moved;
    comm_->adjustMoved(-int64_t(moved) * int64_t(hostRuns - 1));
  } else if (comm_) {
    comm_->adjustMoved(int64_t(movedPerCall_[entry]));
  }
  if (staged_)
    backend_->releaseUpload(slot);
  for (const std::string &notice : backend_->takeNotices()) {
    if (notice_)
      notice_(notice);
    else
      std::fprintf(stderr, "note: %s\n", notice.c_str());
  }
  // A synchronous backend has finished: check now, so a failure names the
  // call that caused it. An asynchronous one is checked when the host next
  // waits (synchronize).
  if (!backend_->asynchronous()) {
    checkGuard();
    checkStepError();
  }
}

void Runner::synchronize() const {
  backend_->synchronize();
  checkGuard();
  checkStepError();
}

void Runner::checkStepError() const {
  ztc_step_error error;
  backend_->copyOut(&error, errorSlot_.data(), sizeof(error));
  if (error.kind == ZTC_ERROR_NONE)
    return;
  // The next call starts clean even if the caller goes on.
  ztc_step_error none{};
  backend_->copyIn(errorSlot_.data(), &none, sizeof(none));
  std::string message = describeStepError(error);
  if (error.kind == ZTC_ERROR_COLLECTIVE && comm_ &&
      !comm_->lastError().empty())
    message += ": " + comm_->lastError();
  throw Error(message);
}

ztc_train_state Runner::trainState() const {
  synchronize();
  ztc_train_state state;
  backend_->copyOut(&state, trainState_.data(), sizeof(state));
  return state;
}

void Runner::resetTrainState() {
  ztc_train_state zero{};
  backend_->copyIn(trainState_.data(), &zero, sizeof(zero));
}

void Runner::checkGuard() const {
  unsigned char guard[kGuardBytes];
  backend_->copyOut(guard, static_cast<char *>(arena_.data()) + arenaBytes_,
                    kGuardBytes);
  if (std::any_of(guard, guard + kGuardBytes,
                  [](unsigned char byte) { return byte != kGuardPattern; }))
    throw Error(artifact_.directory() +
                ": generated code wrote past the end of the " +
                std::to_string(arenaBytes_) + "-byte arena");
}

uint64_t Runner::touchedArenaBytes() const {
  synchronize();
  std::vector<unsigned char> chunk;
  for (uint64_t end = arenaBytes_; end > 0;) {
    uint64_t begin = end > kScanChunk ? end - kScanChunk : 0;
    chunk.resize(end - begin);
    backend_->copyOut(chunk.data(), static_cast<char *>(arena_.data()) + begin,
                      chunk.size());
    for (uint64_t i = chunk.size(); i > 0; --i)
      if (chunk[i - 1] != kGuardPattern)
        return begin + i;
    end = begin;
  }
  return 0;
}

Tensor Runner::output(size_t index) const {
  return readArena(manifest().main().outputs.at(index));
}

Tensor Runner::readArena(const Output &spec) const {
  if (spec.offset > arenaBytes_ || spec.byteSize() > arenaBytes_ - spec.offset)
    throw Error("output '" + spec.name + "' lies outside the arena");
  synchronize();
  Tensor value(spec.dtype, spec.shape);
  backend_->copyOut(value.bytes.data(),
                    static_cast<char *>(arena_.data()) + spec.offset,
                    value.byteSize());
  return value;
}

void Runner::writeOutputs(const std::string &outputDir) const {
  createDirectories(outputDir);
  const std::vector<Output> &outputs = manifest().main().outputs;
  for (size_t i = 0; i < outputs.size(); ++i) {
    try {
      writeNpy(joinPath(outputDir, outputs[i].file + ".npy"), output(i));
    } catch (const Error &failure) {
      throw Error("output '" + outputs[i].name + "': " + failure.what());
    }
  }
}

void runForward(const std::string &artifactDir, const std::string &dataDir,
                const std::string &outputDir, uint64_t seed) {
  Artifact artifact = Artifact::load(artifactDir);
  Runner runner(artifact, createBackend(artifact.manifest().target));
  runner.loadInputs(dataDir);
  runner.setRandomKey(randomKey(seed, 0, 0));
  runner.run();
  runner.writeOutputs(outputDir);
}

bool tryRunForward(const std::string &artifactDir, const std::string &dataDir,
                   const std::string &outputDir, std::string &error,
                   uint64_t seed) noexcept {
  try {
    runForward(artifactDir, dataDir, outputDir, seed);
    return true;
  } catch (const std::exception &failure) {
    error = failure.what();
    return false;
  }
}

} // namespace ztc::rt
