//===- Checkpoint.cpp - training state on disk ----------------------------===//
//
// A checkpoint is one safetensors file; atomicity comes from
// writeSafeTensors (temporary file, fsync, rename, directory fsync).
//
//===----------------------------------------------------------------------===//

#include "runtime/train/Checkpoint.h"

#include "runtime/Error.h"
#include "runtime/io/File.h"
#include "runtime/io/SafeTensors.h"
#include "runtime/io/Sha256.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

namespace ztc::rt {

namespace {

constexpr char kFileName[] = "checkpoint.safetensors";
/// Metadata keys the checkpoint itself owns.
constexpr const char *kReservedKeys[] = {"format", "step", "epoch",
                                         "batch",  "seed", "sha256"};

/// The digest `sha256` records: every metadata entry but itself, then every
/// tensor, each field length-prefixed so that none runs into the next.
std::string contentsDigest(const std::map<std::string, std::string> &metadata,
                           const std::map<std::string, Tensor> &tensors) {
  Sha256 hash;
  for (const auto &[key, value] : metadata)
    if (key != "sha256") {
      hash.updateField(key);
      hash.updateField(value);
    }
  for (const auto &[name, tensor] : tensors) {
    hash.updateField(name);
    hash.updateField(tensor.describe());
    hash.updateField(tensor.bytes.data(), tensor.bytes.size());
  }
  return hash.hexDigest();
}

uint64_t metadataInteger(const std::map<std::string, std::string> &metadata,
                         const std::string &path, const char *key) {
  auto it = metadata.find(key);
  if (it == metadata.end())
    throw Error(path + ": metadata '" + key + "' is missing");
  const std::string &text = it->second;
  if (text.empty() || text.size() > 20 ||
      text.find_first_not_of("0123456789") != std::string::npos)
    throw Error(path + ": metadata '" + key +
                "' is not a non-negative integer: '" + printable(text) + "'");
  try {
    return std::stoull(text);
  } catch (const std::exception &) {
    throw Error(path + ": metadata '" + key +
                "' is not a non-negative integer: '" + printable(text) + "'");
  }
}

} // namespace

std::string checkpointPath(const std::string &dir) {
  return (std::filesystem::path(dir) / kFileName).string();
}

void saveCheckpoint(const std::string &dir, const Checkpoint &checkpoint) {
  SafeTensors contents;
  contents.tensors = checkpoint.tensors;
  contents.metadata = checkpoint.metadata;
  for (const char *key : kReservedKeys)
    if (checkpoint.metadata.count(key))
      throw Error(std::string("checkpoint metadata '") + key + "' is reserved");
  contents.metadata["format"] = kCheckpointFormat;
  contents.metadata["step"] = std::to_string(checkpoint.step);
  contents.metadata["epoch"] = std::to_string(checkpoint.epoch);
  contents.metadata["batch"] = std::to_string(checkpoint.batch);
  contents.metadata["seed"] = std::to_string(checkpoint.seed);
  contents.metadata["sha256"] =
      contentsDigest(contents.metadata, contents.tensors);
  createDirectories(dir);
  removeDeadTemporaries(dir, {kFileName});
  writeSafeTensors(checkpointPath(dir), contents);
}

Checkpoint loadCheckpointMetadata(const std::string &dir) {
  std::string path = checkpointPath(dir);
  std::error_code error;
  if (!std::filesystem::exists(path, error)) {
    std::string reason = std::filesystem::is_directory(dir, error)
                             ? path + " does not exist"
                             : "directory " + dir + " does not exist";
    throw Error("no checkpoint in " + dir + " (" + reason + ")");
  }
  std::map<std::string, std::string> metadata =
      SafeTensorsReader(path).metadata();
  auto format = metadata.find("format");
  if (format == metadata.end())
    throw Error(path +
                ": not a ztc checkpoint (metadata 'format' is "
                "missing; expected '" +
                std::string(kCheckpointFormat) + "')");
  if (format->second != kCheckpointFormat &&
      format->second != kCheckpointFormatWithoutHash)
    throw Error(path + ": checkpoint format '" + printable(format->second) +
                "'; this runtime reads '" + kCheckpointFormat + "' and '" +
                kCheckpointFormatWithoutHash + "'");
  if (format->second == kCheckpointFormat && !metadata.count("sha256"))
    throw Error(path + ": metadata 'sha256' is missing, which format '" +
                kCheckpointFormat + "' records: the file was damaged");
  Checkpoint checkpoint;
  checkpoint.step = metadataInteger(metadata, path, "step");
  checkpoint.epoch = metadataInteger(metadata, path, "epoch");
  checkpoint.batch = metadataInteger(metadata, path, "batch");
  checkpoint.seed = metadataInteger(metadata, path, "seed");
  for (const char *key : kReservedKeys)
    metadata.erase(key);
  checkpoint.metadata = std::move(metadata);
  return checkpoint;
}

Checkpoint loadCheckpoint(const std::string &dir) {
  Checkpoint checkpoint = loadCheckpointMetadata(dir);
  SafeTensors contents = readSafeTensors(checkpointPath(dir));
  auto recorded = contents.metadata.find("sha256");
  if (recorded != contents.metadata.end() &&
      recorded->second != contentsDigest(contents.metadata, contents.tensors))
    throw Error(checkpointPath(dir) +
                ": its contents do not match the SHA-256 it records: the "
                "file was changed or damaged after it was written");
  checkpoint.tensors = std::move(contents.tensors);
  return checkpoint;
}

Checkpoint loadCheckpoint(const std::string &dir, const Manifest &manifest) {
  Checkpoint checkpoint = loadCheckpoint(dir);
  checkCheckpointMatches(checkpoint, manifest, checkpointPath(dir));
  return checkpoint;
}

void checkDataPosition(const Checkpoint &checkpoint, uint64_t batchesPerEpoch,
                       const std::string &path) {
  if (checkpoint.batch >= batchesPerEpoch)
    throw Error(path + ": batch " + std::to_string(checkpoint.batch) +
                " is outside an epoch of this data (" +
                std::to_string(batchesPerEpoch) + " batches)");
  // No run gets near 2^53 steps or batches: larger counters are damage.
  constexpr uint64_t kMaxCount = uint64_t(1) << 53;
  if (checkpoint.epoch > (kMaxCount - checkpoint.batch) / batchesPerEpoch)
    throw Error(path + ": epoch " + std::to_string(checkpoint.epoch) +
                " is out of range (the data position, in batches of this "
                "data, must be at most 2^53)");
  if (checkpoint.step > kMaxCount)
    throw Error(path + ": step " + std::to_string(checkpoint.step) +
                " is out of range (at most 2^53)");
}

void checkCheckpointMatches(const Checkpoint &checkpoint,
                            const Manifest &manifest, const std::string &path) {
  std::vector<std::string> problems;
  std::set<std::string> expected;
  for (const Binding &binding : manifest.bindings) {
    if (!isCheckpointed(binding))
      continue;
    expected.insert(binding.name);
    std::string what =
        std::string(roleName(binding.role)) + " '" + binding.name + "'";
    auto it = checkpoint.tensors.find(binding.name);
    if (it == checkpoint.tensors.end())
      problems.push_back("missing " + what + " (" + binding.describe() + ")");
    else if (it->second.dtype != binding.dtype ||
             it->second.shape != binding.shape)
      problems.push_back(what + ": expected " + binding.describe() + ", got " +
                         it->second.describe());
  }
  for (const auto &[name, tensor] : checkpoint.tensors)
    if (!expected.count(name))
      problems.push_back("unexpected tensor '" + printable(name) + "' (" +
                         tensor.describe() + ")");
  if (problems.empty())
    return;
  std::string message = path + " does not match the artifact: ";
  for (size_t i = 0; i < problems.size(); ++i)
    message += (i ? "; " : "") + problems[i];
  throw Error(message);
}

CheckpointLock::CheckpointLock(const std::string &directory) {
  createDirectories(directory);
  std::string path = directory + "/.ztc-lock";
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw Error("cannot lock " + directory + ": " + path + ": " +
                std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    int reason = errno;
    char owner[32] = {};
    ssize_t read = ::pread(fd_, owner, sizeof owner - 1, 0);
    ::close(fd_);
    fd_ = -1;
    if (reason != EWOULDBLOCK)
      throw Error("cannot lock " + directory + ": " + std::strerror(reason));
    std::string pid = read > 0 ? std::string(owner, size_t(read)) : "";
    pid.erase(pid.find_last_not_of(" \n") + 1);
    throw Error(directory + " is being written by another trainer" +
                (pid.empty() ? "" : " (pid " + pid + ")") +
                "; give this run its own --save directory");
  }
  // The owner, for the message above; the lock itself is what counts.
  std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) == 0)
    (void)!::pwrite(fd_, pid.data(), pid.size(), 0);
}

CheckpointLock::~CheckpointLock() {
  if (fd_ >= 0)
    ::close(fd_); // releases the flock
}

} // namespace ztc::rt
