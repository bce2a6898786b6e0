//===- ShardedCheckpoint.cpp - one checkpoint written by every rank ------===//

#include "runtime/train/ShardedCheckpoint.h"

#include "runtime/Error.h"
#include "runtime/io/File.h"
#include "runtime/io/SafeTensors.h"
#include "runtime/io/Sha256.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <system_error>
#include <vector>

namespace ztc::rt {
namespace {

using json = nlohmann::json;

std::string stepName(uint64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%08llu",
                static_cast<unsigned long long>(step));
  return name;
}

std::string rankName(int rank) {
  char name[32];
  std::snprintf(name, sizeof name, "rank-%05d", rank);
  return name;
}

/// Throws, on every rank alike, the first failure among `outcomes`: each
/// rank's "ok DETAIL" or "fail MESSAGE" of a phase (allGatherText).
void throwFirstFailure(const std::vector<std::string> &outcomes,
                       const std::string &what) {
  for (size_t rank = 0; rank < outcomes.size(); ++rank)
    if (outcomes[rank].rfind("fail ", 0) == 0)
      throw Error(what + ": rank " + std::to_string(rank) + ": " +
                  outcomes[rank].substr(5));
}

/// Removes all but the `keep` newest step directories other than `latest`.
void prune(const std::string &dir, const std::string &latest, uint64_t keep) {
  std::vector<std::string> steps;
  std::error_code error;
  for (const auto &entry : std::filesystem::directory_iterator(dir, error)) {
    std::string name = entry.path().filename().string();
    if (name.rfind("step-", 0) == 0 && entry.is_directory(error))
      steps.push_back(name);
  }
  std::sort(steps.begin(), steps.end());
  // The newest `keep` names, the latest one included, stay.
  size_t kept = 0;
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    if (*it == latest || kept < keep) {
      ++kept;
      continue;
    }
    std::filesystem::remove_all(joinPath(dir, *it), error);
  }
}

} // namespace

bool isShardedCheckpoint(const std::string &dir) {
  std::error_code error;
  return std::filesystem::exists(joinPath(dir, "latest"), error);
}

void saveShardedCheckpoint(const std::string &dir, const Checkpoint &mine,
                           const Manifest &manifest, Communicator &comm,
                           uint64_t keep) {
  std::string step = stepName(mine.step);
  std::string stepDir = joinPath(dir, step);
  std::string rankDir = joinPath(stepDir, rankName(comm.rank()));
  std::string what = "checkpoint at step " + std::to_string(mine.step) +
                     " not saved (the previous checkpoint in " + dir +
                     " stays)";

  // 1. Every rank's file, durable, with its digest.
  std::string outcome;
  try {
    saveCheckpoint(rankDir, mine);
    outcome = "ok " + sha256File(checkpointPath(rankDir));
  } catch (const std::exception &failure) {
    outcome = std::string("fail ") + failure.what();
  }
  std::vector<std::string> outcomes = comm.allGatherText(outcome);
  throwFirstFailure(outcomes, what);

  // 2. Rank 0 publishes: the index, then `latest`.
  outcome = "ok";
  if (comm.rank() == 0) {
    try {
      json files = json::array();
      for (size_t rank = 0; rank < outcomes.size(); ++rank)
        files.push_back(
            {{"rank", rank},
             {"path", rankName(int(rank)) + "/checkpoint.safetensors"},
             {"sha256", outcomes[rank].substr(3)}});
      json tensors = json::array();
      for (const Binding &binding : manifest.bindings) {
        if (!mine.tensors.count(binding.name))
          continue;
        json tensor = {{"name", binding.name},
                       {"role", roleName(binding.role)},
                       {"dtype", dtypeName(binding.dtype)},
                       {"shape", binding.shape}};
        if (binding.sharded())
          tensor["full_shape"] = binding.fullShape;
        tensors.push_back(std::move(tensor));
      }
      json index = {{"format", kShardedCheckpointFormat},
                    {"step", mine.step},
                    {"world_size", comm.worldSize()},
                    {"zero_stage", manifest.dist.zeroStage},
                    {"precision", manifest.train.precision},
                    {"epoch", mine.epoch},
                    {"batch", mine.batch},
                    {"seed", mine.seed},
                    {"manifest_hash", hexHash(manifestHash(manifest))},
                    {"files", std::move(files)},
                    {"tensors", std::move(tensors)}};
      std::string text = index.dump(2) + "\n";
      AtomicFileWriter indexFile(joinPath(stepDir, "index.json"));
      indexFile.write(text.data(), text.size());
      indexFile.commit();
      std::string pointer = step + "\n";
      AtomicFileWriter latest(joinPath(dir, "latest"));
      latest.write(pointer.data(), pointer.size());
      latest.commit();
    } catch (const std::exception &failure) {
      outcome = std::string("fail ") + failure.what();
    }
  }
  throwFirstFailure(comm.allGatherText(outcome), what);
  if (comm.rank() == 0)
    prune(dir, step, std::max<uint64_t>(keep, 1));
}

ShardedIndex readShardedIndex(const std::string &dir) {
  if (!isShardedCheckpoint(dir))
    throw Error(dir + " holds no sharded checkpoint (no " +
                joinPath(dir, "latest") + ")");
  std::string pointer = readFile(joinPath(dir, "latest"));
  while (!pointer.empty() && (pointer.back() == '\n' || pointer.back() == ' '))
    pointer.pop_back();
  if (pointer.rfind("step-", 0) != 0 || pointer.size() < 6 ||
      pointer.find_first_not_of("0123456789", 5) != std::string::npos)
    throw Error(joinPath(dir, "latest") + " names '" + printable(pointer) +
                "', not a step directory");
  ShardedIndex index;
  index.stepDir = joinPath(dir, pointer);
  index.indexPath = joinPath(index.stepDir, "index.json");
  const std::string &path = index.indexPath;
  try {
    json root = json::parse(readFile(path));
    if (root.at("format") != kShardedCheckpointFormat)
      throw Error(path + ": format " + root.at("format").dump() +
                  "; this runtime reads '" + kShardedCheckpointFormat + "'");
    index.step = root.at("step").get<uint64_t>();
    index.worldSize = root.at("world_size").get<uint64_t>();
    index.zeroStage = root.at("zero_stage").get<uint64_t>();
    index.manifestHash = root.at("manifest_hash").get<std::string>();
    const json &files = root.at("files");
    if (!files.is_array() || files.size() != index.worldSize)
      throw Error(path + ": field 'files' does not list one file per rank");
    for (const json &file : files) {
      std::string name = file.at("path").get<std::string>();
      if (name.find("..") != std::string::npos || name.empty() ||
          name[0] == '/')
        throw Error(path + ": file path '" + printable(name) +
                    "' leaves the step directory");
      index.files.push_back({joinPath(index.stepDir, name),
                             file.at("sha256").get<std::string>()});
    }
    for (const json &tensor : root.at("tensors")) {
      Binding binding;
      binding.name = tensor.at("name").get<std::string>();
      std::optional<BindingRole> role =
          parseRole(tensor.at("role").get<std::string>());
      std::optional<DType> dtype =
          parseDType(tensor.at("dtype").get<std::string>());
      if (!role || !dtype)
        throw Error(path + ": tensor '" + printable(binding.name) +
                    "' has an unknown role or dtype");
      binding.role = *role;
      binding.dtype = *dtype;
      binding.shape = tensor.at("shape").get<std::vector<int64_t>>();
      if (tensor.contains("full_shape"))
        binding.fullShape = tensor.at("full_shape").get<std::vector<int64_t>>();
      for (const std::vector<int64_t> *shape :
           {&binding.shape, &binding.fullShape})
        if (!checkedByteSize(*shape, dtypeSize(binding.dtype)))
          throw Error(path + ": tensor '" + printable(binding.name) +
                      "' has an invalid shape");
      if (binding.sharded() && binding.shape.size() != 1)
        throw Error(path + ": tensor '" + printable(binding.name) +
                    "' is a block but not 1-D");
      index.tensors.push_back(std::move(binding));
    }
  } catch (const json::exception &failure) {
    throw Error(path + ": not a sharded checkpoint index (" +
                printable(failure.what(), 200) + ")");
  }
  return index;
}

namespace {

/// The whole tensors of a checkpoint (sharded or whole), one at a time.
class WholeTensors {
public:
  explicit WholeTensors(const std::string &dir) {
    if (!isShardedCheckpoint(dir)) {
      counters_ = loadCheckpoint(dir);
      tensors_ = std::move(counters_.tensors);
      counters_.tensors.clear();
      for (const auto &[name, tensor] : tensors_)
        shapes_[name] = {tensor.dtype, tensor.shape, 0};
      return;
    }
    ShardedIndex index = readShardedIndex(dir);
    for (const auto &[path, digest] : index.files) {
      if (sha256File(path) != digest)
        throw Error(path + ": SHA-256 differs from the index (the file is "
                           "corrupt or truncated)");
      readers_.push_back(std::make_unique<SafeTensorsReader>(path));
    }
    for (const Binding &binding : index.tensors)
      shapes_[binding.name] = {
          binding.dtype, binding.sharded() ? binding.fullShape : binding.shape,
          binding.sharded() ? uint64_t(binding.shape[0]) : 0};
    // The counters and data metadata of rank 0's file.
    counters_ = loadCheckpointMetadata(joinPath(index.stepDir, rankName(0)));
  }

  /// Step, data position, seed and metadata; no tensors.
  const Checkpoint &counters() const { return counters_; }

  struct Shape {
    DType dtype;
    std::vector<int64_t> whole;
    /// Elements of each rank's block; 0: every rank holds it whole.
    uint64_t block;
  };
  const std::map<std::string, Shape> &shapes() const { return shapes_; }

  /// Tensor `name` whole, flattened: its first `elements` elements (a
  /// one-rank stage-1 state is stored as a flat block).
  std::vector<unsigned char> flat(const std::string &name, uint64_t elements) {
    const Shape &shape = shapes_.at(name);
    uint64_t bytes = elements * dtypeSize(shape.dtype);
    std::vector<unsigned char> out(bytes);
    if (readers_.empty()) {
      const Tensor &tensor = tensors_.at(name);
      std::memcpy(out.data(), tensor.bytes.data(),
                  std::min<size_t>(bytes, tensor.bytes.size()));
    } else if (shape.block == 0) {
      readers_.front()->read(name, 0, bytes, out.data());
    } else {
      // Block r of rank r, up to the tensor's end.
      uint64_t block = shape.block * dtypeSize(shape.dtype);
      for (size_t rank = 0; rank < readers_.size() && rank * block < bytes;
           ++rank)
        readers_[rank]->read(name, 0, std::min(block, bytes - rank * block),
                             out.data() + rank * block);
    }
    return out;
  }

private:
  Checkpoint counters_;
  /// A whole-format checkpoint's tensors; empty for a sharded one, read
  /// through readers_ instead.
  std::map<std::string, Tensor> tensors_;
  std::vector<std::unique_ptr<SafeTensorsReader>> readers_;
  std::map<std::string, Shape> shapes_;
};

} // namespace

Checkpoint reshardCheckpoint(const std::string &dir, const Manifest &manifest,
                             int rank) {
  WholeTensors source(dir);
  Checkpoint result = source.counters();
  std::string problems;
  auto problem = [&](const std::string &text) {
    problems += (problems.empty() ? "" : "; ") + text;
  };
  for (const Binding &binding : manifest.bindings) {
    if (!isCheckpointed(binding))
      continue;
    const std::vector<int64_t> &whole =
        binding.sharded() ? binding.fullShape : binding.shape;
    auto it = source.shapes().find(binding.name);
    if (it == source.shapes().end()) {
      problem(std::string("missing ") + roleName(binding.role) + " '" +
              binding.name + "' (" + describeType(binding.dtype, whole) + ")");
      continue;
    }
    // A flat one-rank block of a state has the whole tensor's elements.
    uint64_t want = uint64_t(*checkedByteSize(whole, 1));
    uint64_t have = uint64_t(*checkedByteSize(it->second.whole, 1));
    // Another shape is accepted only as a flat block of the same elements
    // (how one rank at stage 1 or 2 stores a state), never a reshaped one.
    bool flatBlock = it->second.whole.size() == 1 && want == have;
    if (it->second.dtype != binding.dtype ||
        (it->second.whole != whole && !flatBlock)) {
      problem(std::string(roleName(binding.role)) + " '" + binding.name +
              "': " + describeType(binding.dtype, whole) +
              " whole, the checkpoint has " +
              describeType(it->second.dtype, it->second.whole));
      continue;
    }
    std::vector<unsigned char> bytes = source.flat(binding.name, want);
    Tensor value(binding.dtype, whole);
    value.bytes = std::move(bytes);
    result.tensors[binding.name] =
        binding.sharded() ? shardBlock(value, binding, uint64_t(rank))
                          : std::move(value);
  }
  if (!problems.empty())
    throw Error(dir + ": the checkpoint does not match this run: " + problems);
  return result;
}

Checkpoint loadShardedCheckpoint(const std::string &dir,
                                 const Manifest &manifest, Communicator &comm) {
  ShardedIndex index = readShardedIndex(dir);
  if (index.worldSize != uint64_t(comm.worldSize()) ||
      index.zeroStage != manifest.dist.zeroStage)
    throw Error(index.indexPath + ": written by " +
                std::to_string(index.worldSize) + " ranks at ZeRO stage " +
                std::to_string(index.zeroStage) + "; this run has " +
                std::to_string(comm.worldSize()) + " ranks at stage " +
                std::to_string(manifest.dist.zeroStage) +
                " (reshardCheckpoint loads it for another layout)");
  if (index.manifestHash != hexHash(manifestHash(manifest)))
    throw Error(index.indexPath +
                ": written by another artifact (its manifest hash differs: "
                "another model, batch size, optimizer or layout)");
  const auto &[path, digest] = index.files.at(size_t(comm.rank()));
  if (sha256File(path) != digest)
    throw Error(path + ": SHA-256 differs from the index (the file is "
                       "corrupt or truncated)");
  return loadCheckpoint(joinPath(index.stepDir, rankName(comm.rank())),
                        manifest);
}

} // namespace ztc::rt
