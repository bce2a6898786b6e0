//===- ShardedCheckpoint.cpp - one checkpoint written by every rank ------===//

#include "runtime/train/ShardedCheckpoint.h"

#include "runtime/Error.h"
#include "runtime/io/File.h"
#include "runtime/io/SafeTensors.h"
#include "runtime/io/Sha256.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <system_error>
#include <unistd.h>
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

/// The identity metadata value `key` of a rank file, as a count.
std::optional<uint64_t> identityField(const Checkpoint &header,
                                      const char *key) {
  auto it = header.metadata.find(key);
  if (it == header.metadata.end() || it->second.empty() ||
      it->second.size() > 19 ||
      it->second.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  return std::stoull(it->second);
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

  // 1. Every rank's file, durable, with its digest; the file states whose
  // shard it is.
  std::string outcome;
  try {
    Checkpoint identified = mine;
    identified.metadata[kShardRankKey] = std::to_string(comm.rank());
    identified.metadata[kShardWorldSizeKey] = std::to_string(comm.worldSize());
    identified.metadata[kShardStageKey] =
        std::to_string(manifest.dist.zeroStage);
    saveCheckpoint(rankDir, identified);
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
  if (comm.rank() == 0) {
    prune(dir, step, std::max<uint64_t>(keep, 1));
    // What an earlier save killed while publishing left behind.
    removeDeadTemporaries(dir, {"latest"});
    removeDeadTemporaries(stepDir, {"index.json"});
  }
}

ShardedIndex readShardedIndex(const std::string &dir) {
  if (!isShardedCheckpoint(dir))
    throw Error(dir + " holds no sharded checkpoint (no " +
                joinPath(dir, "latest") + ")");
  std::string pointer = readFile(joinPath(dir, "latest"));
  while (!pointer.empty() && (pointer.back() == '\n' || pointer.back() == ' '))
    pointer.pop_back();
  if (pointer.rfind("step-", 0) != 0 || pointer.size() < 6 ||
      pointer.size() > 5 + 16 ||
      pointer.find_first_not_of("0123456789", 5) != std::string::npos)
    throw Error(joinPath(dir, "latest") + " names '" + printable(pointer) +
                "', not a step directory");
  ShardedIndex index;
  index.stepDir = joinPath(dir, pointer);
  index.indexPath = joinPath(index.stepDir, "index.json");
  const std::string &path = index.indexPath;
  try {
    json root = json::parse(readFile(path));
    if (root.at("format") == kShardedCheckpointFormat)
      index.identified = true;
    else if (root.at("format") != kShardedCheckpointFormat1)
      throw Error(path + ": format " + root.at("format").dump() +
                  "; this runtime reads '" + kShardedCheckpointFormat +
                  "' and '" + kShardedCheckpointFormat1 + "'");
    // Counters are JSON numbers; a negative or fractional one is damage,
    // named by its field.
    auto count = [&](const char *field, uint64_t most) {
      const json &value = root.at(field);
      if (!value.is_number_unsigned() || value.get<uint64_t>() > most)
        throw Error(path + ": field '" + field + "' is " + value.dump() +
                    ", expected an integer from 0 to " + std::to_string(most));
      return value.get<uint64_t>();
    };
    index.step = count("step", uint64_t(1) << 53);
    index.worldSize = count("world_size", uint64_t(1) << 20);
    index.zeroStage = count("zero_stage", 3);
    if (index.worldSize == 0)
      throw Error(path + ": field 'world_size' is 0");
    if (index.step != std::stoull(pointer.substr(5)))
      throw Error(path + ": field 'step' is " + std::to_string(index.step) +
                  ", but the index is in " + pointer);
    index.manifestHash = root.at("manifest_hash").get<std::string>();
    index.precision = root.at("precision").get<std::string>();
    const json &files = root.at("files");
    if (!files.is_array() || files.size() != index.worldSize)
      throw Error(path + ": field 'files' does not list one file per rank");
    for (size_t rank = 0; rank < files.size(); ++rank) {
      const json &file = files[rank];
      std::string name = file.at("path").get<std::string>();
      std::string expected = rankName(int(rank)) + "/checkpoint.safetensors";
      if (!file.at("rank").is_number_unsigned() ||
          file.at("rank").get<uint64_t>() != rank || name != expected)
        throw Error(path + ": entry " + std::to_string(rank) +
                    " of field 'files' is rank " + file.at("rank").dump() +
                    " at '" + printable(name) + "', expected rank " +
                    std::to_string(rank) + " at '" + expected + "'");
      index.files.push_back({joinPath(index.stepDir, name),
                             file.at("sha256").get<std::string>()});
    }
    std::set<std::string> names;
    for (const json &tensor : root.at("tensors")) {
      Binding binding;
      binding.name = tensor.at("name").get<std::string>();
      if (!names.insert(binding.name).second)
        throw Error(path + ": tensor '" + printable(binding.name) +
                    "' is listed twice");
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

void verifyShard(const ShardedIndex &index, size_t rank) {
  // References, not a structured binding: `check` below captures path.
  const std::string &path = index.files.at(rank).first;
  const std::string &digest = index.files.at(rank).second;
  if (sha256File(path) != digest)
    throw Error(path + ": SHA-256 differs from the index (the file is "
                       "corrupt or truncated)");
  if (!index.identified)
    return;
  Checkpoint header =
      loadCheckpointMetadata(std::filesystem::path(path).parent_path());
  auto check = [&](const char *key, uint64_t expected, const char *what) {
    std::optional<uint64_t> value = identityField(header, key);
    if (!value)
      throw Error(path + ": metadata '" + key +
                  "' is missing or not a count (format " +
                  kShardedCheckpointFormat + " records whose shard it is)");
    if (*value != expected)
      throw Error(path + ": holds " + what + " " + std::to_string(*value) +
                  "'s shard, but the index lists it as " + what + " " +
                  std::to_string(expected) + "'s");
  };
  check(kShardRankKey, rank, "rank");
  check(kShardWorldSizeKey, index.worldSize, "world size");
  check(kShardStageKey, index.zeroStage, "ZeRO stage");
  if (header.step != index.step)
    throw Error(path + ": holds step " + std::to_string(header.step) +
                ", but the index is of step " + std::to_string(index.step));
}

std::vector<std::unique_ptr<SafeTensorsReader>>
openShards(const ShardedIndex &index) {
  std::vector<std::unique_ptr<SafeTensorsReader>> readers;
  for (size_t rank = 0; rank < index.files.size(); ++rank) {
    verifyShard(index, rank);
    readers.push_back(
        std::make_unique<SafeTensorsReader>(index.files[rank].first));
  }
  // Every tensor of the index as each rank file holds it: the rank's
  // shape and type, and a block of its whole tensor's size. A step with
  // 8-bit optimizer states (int8 tensors: nothing else is) aligns its
  // blocks to 256 elements (ztc-zero's shard-alignment), except the
  // states' scales, whose blocks are those of whole blocks of 256.
  bool aligned256 = std::any_of(
      index.tensors.begin(), index.tensors.end(), [](const Binding &binding) {
        return binding.sharded() && binding.dtype == DType::Int8;
      });
  for (const Binding &binding : index.tensors) {
    for (size_t rank = 0; rank < readers.size(); ++rank) {
      const auto &entries = readers[rank]->entries();
      auto entry = entries.find(binding.name);
      if (entry == entries.end() || entry->second.dtype != binding.dtype ||
          entry->second.shape != binding.shape)
        throw Error(
            index.files[rank].first + ": " +
            (entry == entries.end()
                 ? "has no tensor '" + printable(binding.name) + "'"
                 : "tensor '" + printable(binding.name) + "' is " +
                       describeType(entry->second.dtype, entry->second.shape)) +
            ", where the index lists " +
            describeType(binding.dtype, binding.shape));
    }
    if (binding.sharded()) {
      uint64_t whole = uint64_t(*checkedByteSize(binding.fullShape, 1));
      uint64_t block = (whole + index.worldSize - 1) / index.worldSize;
      uint64_t aligned = aligned256 ? (block + 255) / 256 * 256 : block;
      if (uint64_t(binding.shape[0]) != block &&
          uint64_t(binding.shape[0]) != aligned)
        throw Error(index.indexPath + ": tensor '" + printable(binding.name) +
                    "' is a block of " + std::to_string(binding.shape[0]) +
                    " elements per rank, but its full shape " +
                    describeType(binding.dtype, binding.fullShape) + " on " +
                    std::to_string(index.worldSize) +
                    " ranks gives blocks of " + std::to_string(block) +
                    (aligned != block
                         ? " (" + std::to_string(aligned) + " aligned to 256)"
                         : std::string()));
    }
  }
  return readers;
}

namespace {

/// The identity keys, which a loaded rank file's metadata does not carry
/// on (a run resumed on another layout writes its own).
void dropIdentity(Checkpoint &checkpoint) {
  for (const char *key : {kShardRankKey, kShardWorldSizeKey, kShardStageKey})
    checkpoint.metadata.erase(key);
}

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
    readers_ = openShards(index);
    for (const Binding &binding : index.tensors) {
      shapes_[binding.name] = {
          binding.dtype, binding.sharded() ? binding.fullShape : binding.shape,
          binding.sharded() ? uint64_t(binding.shape[0]) : 0};
    }
    // The counters and data metadata of rank 0's file.
    counters_ = loadCheckpointMetadata(joinPath(index.stepDir, rankName(0)));
    dropIdentity(counters_);
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
  if (index.precision != manifest.train.precision)
    throw Error(index.indexPath + ": field 'precision' is '" +
                printable(index.precision) +
                "', but the artifact computes in " + manifest.train.precision);
  // The index's tensors are this artifact's checkpointed bindings.
  std::map<std::string, const Binding *> listed;
  for (const Binding &binding : index.tensors)
    listed[binding.name] = &binding;
  for (const Binding &binding : manifest.bindings) {
    if (!isCheckpointed(binding))
      continue;
    auto it = listed.find(binding.name);
    if (it == listed.end())
      throw Error(index.indexPath + ": field 'tensors' does not list " +
                  roleName(binding.role) + " '" + binding.name + "'");
    const Binding &entry = *it->second;
    if (entry.dtype != binding.dtype || entry.shape != binding.shape ||
        entry.fullShape != binding.fullShape)
      throw Error(index.indexPath + ": tensor '" + binding.name + "' is " +
                  describeType(entry.dtype, entry.shape) +
                  (entry.sharded()
                       ? " of " + describeType(entry.dtype, entry.fullShape)
                       : std::string()) +
                  ", but the artifact binds " +
                  describeType(binding.dtype, binding.shape) +
                  (binding.sharded()
                       ? " of " + describeType(binding.dtype, binding.fullShape)
                       : std::string()));
    listed.erase(it);
  }
  if (!listed.empty())
    throw Error(index.indexPath + ": field 'tensors' lists '" +
                printable(listed.begin()->first) +
                "', which the artifact does not checkpoint");
  verifyShard(index, size_t(comm.rank()));
  Checkpoint checkpoint =
      loadCheckpoint(joinPath(index.stepDir, rankName(comm.rank())), manifest);
  dropIdentity(checkpoint);
  return checkpoint;
}

} // namespace ztc::rt
