//===- RuntimeBridge.cpp - the driver's door into the runtime -----*- C++
//-*-===//
//
// Compiled with exceptions: every entry catches the runtime's errors (and
// the standard library's) and returns their message.
//
//===----------------------------------------------------------------------===//

#include "tools/ztc/RuntimeBridge.h"

#include "runtime/Artifact.h"
#include "runtime/Error.h"
#include "runtime/Runner.h"
#include "runtime/backend/Compile.h"
#include "runtime/io/File.h"
#include "runtime/io/Npy.h"
#include "runtime/io/SafeTensors.h"
#include "runtime/train/Checkpoint.h"
#include "runtime/train/ShardedCheckpoint.h"
#include "runtime/train/Trainer.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace fs = std::filesystem;
using namespace ztc;

namespace {

/// Runs `fn`, returning the message of whatever it throws.
template <typename Fn> std::string guarded(Fn &&fn) noexcept {
  try {
    fn();
    return "";
  } catch (const std::exception &e) {
    return e.what();
  } catch (...) {
    return "unknown error";
  }
}

} // namespace

std::string bridge::cacheDirectory() { return rt::defaultCacheDir(); }

std::string
bridge::writeAndBuildArtifact(const std::string &dir,
                              const mlir::ztc::ArtifactContents &artifact,
                              bool build) {
  return guarded([&] {
    rt::createDirectories(dir);
    std::string sourcePath = dir + "/" + artifact.manifest.source;
    {
      std::ofstream source(sourcePath, std::ios::binary | std::ios::trunc);
      source << artifact.source;
      if (!source.flush())
        throw rt::Error("cannot write " + sourcePath);
    }
    rt::SafeTensors init;
    init.tensors = artifact.initialValues;
    rt::writeSafeTensors(dir + "/init.safetensors", init);
    // How this machine builds the step, for whoever builds it elsewhere
    // (the runtime rebuilds a missing step.so from the source by itself).
    {
      std::ofstream command(dir + "/step.build", std::ios::trunc);
      for (const std::string &word :
           rt::compileCommand(artifact.manifest.source,
                              artifact.manifest.target, "step.so", {}))
        command << word << "\n";
      if (!command.flush())
        throw rt::Error("cannot write " + dir + "/step.build");
    }
    if (build)
      rt::buildStep(dir, artifact.manifest);
    if (!artifact.sourceModel.empty()) {
      std::ofstream model(dir + "/source-model", std::ios::trunc);
      model << artifact.sourceModel << "\n";
    }
    if (!artifact.memoryReport.empty()) {
      std::ofstream memory(dir + "/memory.json", std::ios::trunc);
      memory << artifact.memoryReport;
      if (!memory.flush())
        throw rt::Error("cannot write " + dir + "/memory.json");
    }
    // The manifest goes last: a directory with a manifest is complete.
    std::ofstream manifest(dir + "/manifest.json", std::ios::trunc);
    manifest << rt::printManifest(artifact.manifest);
    if (!manifest.flush())
      throw rt::Error("cannot write " + dir + "/manifest.json");
  });
}

std::string bridge::checkArtifactOutput(const std::string &dir) {
  std::error_code error;
  fs::file_status status = fs::symlink_status(dir, error);
  if (error || status.type() == fs::file_type::not_found)
    return "";
  if (status.type() == fs::file_type::directory) {
    if (fs::is_regular_file(fs::path(dir) / "manifest.json", error) ||
        fs::is_empty(dir, error))
      return "";
    return dir +
           " is a directory that is not a ztc artifact (no manifest.json): "
           "ztc replaces only its own artifacts; give another -o";
  }
  return dir + " exists and is not a ztc artifact (" +
         (status.type() == fs::file_type::symlink ? "a symbolic link"
          : status.type() == fs::file_type::regular ? "a file"
                                                     : "not a directory") +
         "): ztc replaces only its own artifacts; give another -o";
}

std::string
bridge::writeArtifactAtomically(const std::string &dir,
                                const mlir::ztc::ArtifactContents &artifact,
                                bool build) {
  if (std::string refused = checkArtifactOutput(dir); !refused.empty())
    return refused;
  fs::path target = fs::absolute(dir);
  fs::path staging = target;
  staging += ".tmp-" + std::to_string(::getpid());
  removeDirectory(staging.string());
  std::string error = writeAndBuildArtifact(staging.string(), artifact, build);
  if (error.empty())
    error = guarded([&] {
      removeDirectory(target.string());
      fs::rename(staging, target);
    });
  if (!error.empty())
    removeDirectory(staging.string());
  return error;
}

namespace {

/// The weights (params and buffers) of a checkpoint, whole, checked against
/// the artifact's manifest; the model it was compiled from in `sourceModel`.
std::map<std::string, rt::Tensor>
loadCheckpointWeights(const std::string &artifactDir,
                      const std::string &checkpointDir,
                      std::string &sourceModel) {
  rt::Artifact artifact = rt::Artifact::load(artifactDir);
  std::ifstream model(artifactDir + "/source-model");
  if (!std::getline(model, sourceModel) || sourceModel.empty())
    throw rt::Error(artifactDir +
                    ": not a training artifact (no source-model file)");
  // A sharded checkpoint, or an artifact that holds blocks (ZeRO on
  // several ranks): the whole tensors, reassembled.
  rt::Manifest whole = artifact.manifest();
  bool blocks = false;
  for (rt::Binding &binding : whole.bindings)
    if (binding.sharded()) {
      binding.shape = binding.fullShape;
      binding.fullShape.clear();
      blocks = true;
    }
  rt::Checkpoint checkpoint =
      blocks || rt::isShardedCheckpoint(checkpointDir)
          ? rt::reshardCheckpoint(checkpointDir, whole, 0)
          : rt::loadCheckpoint(checkpointDir, artifact.manifest());
  std::map<std::string, rt::Tensor> weights;
  for (const rt::Binding &binding : artifact.manifest().bindings)
    if (rt::isWeight(binding.role)) {
      auto it = checkpoint.tensors.find(binding.name);
      if (it == checkpoint.tensors.end())
        throw rt::Error(checkpointDir + ": no value for parameter '" +
                        binding.name + "'");
      weights.emplace(binding.name, std::move(it->second));
    }
  return weights;
}

} // namespace

std::string bridge::readCheckpointForExport(
    const std::string &artifactDir, const std::string &checkpointDir,
    std::string &sourceModel,
    std::map<std::string, std::vector<uint8_t>> &params) {
  return guarded([&] {
    for (auto &[name, tensor] :
         loadCheckpointWeights(artifactDir, checkpointDir, sourceModel))
      params[name] = std::move(tensor.bytes);
  });
}

std::string bridge::writeStateDict(
    const std::string &artifactDir, const std::string &checkpointDir,
    const std::map<std::string, std::vector<std::string>> &tied,
    const std::string &path, size_t &tensors) {
  return guarded([&] {
    std::string sourceModel;
    rt::SafeTensors contents;
    contents.metadata["format"] = "pt";
    for (auto &[name, tensor] :
         loadCheckpointWeights(artifactDir, checkpointDir, sourceModel)) {
      auto others = tied.find(name);
      if (others != tied.end())
        for (const std::string &other : others->second)
          contents.tensors.emplace(other, tensor);
      contents.tensors.emplace(name, std::move(tensor));
    }
    tensors = contents.tensors.size();
    rt::writeSafeTensors(path, contents);
  });
}

std::string bridge::runArtifact(const std::string &dir,
                                const std::string &dataDir,
                                const std::string &outputDir, uint64_t seed,
                                unsigned repeat, StepTimes &times) {
  return guarded([&] {
    rt::Artifact artifact = rt::Artifact::load(dir);
    rt::Runner runner(artifact, rt::createBackend(artifact.manifest().target));
    runner.loadInputs(dataDir);
    runner.setRandomKey(rt::randomKey(seed, 0, 0));
    runner.run();
    runner.writeOutputs(outputDir);
    std::vector<double> samples;
    for (unsigned i = 0; i < repeat; ++i) {
      auto start = std::chrono::steady_clock::now();
      runner.run();
      samples.push_back(std::chrono::duration<double, std::milli>(
                            std::chrono::steady_clock::now() - start)
                            .count());
    }
    if (samples.empty())
      return;
    std::sort(samples.begin(), samples.end());
    times.runs = samples.size();
    times.min = samples.front();
    times.median = samples[samples.size() / 2];
  });
}

std::optional<std::vector<int64_t>> bridge::npyShape(const std::string &path,
                                                     std::string &error) {
  std::optional<std::vector<int64_t>> shape;
  error = guarded([&] {
    if (!fs::exists(path))
      throw rt::Error(path + " is missing");
    shape = rt::readNpy(path).shape;
  });
  return error.empty() ? shape : std::nullopt;
}

std::string bridge::fileStem(const std::string &name) {
  return rt::fileStemFor(name);
}

std::string bridge::makeTemporaryDirectory(std::string &error) {
  std::string result;
  error = guarded([&] {
    std::string base = cacheDirectory() + "/runs";
    rt::createDirectories(base);
    std::string pattern = base + "/run-XXXXXX";
    std::vector<char> buffer(pattern.begin(), pattern.end());
    buffer.push_back('\0');
    if (!mkdtemp(buffer.data()))
      throw rt::Error("cannot create a directory under " + base);
    result = buffer.data();
  });
  return result;
}

void bridge::removeDirectory(const std::string &dir) {
  std::error_code ignored;
  fs::remove_all(dir, ignored);
}

struct bridge::StepSession::State {
  std::unique_ptr<rt::Artifact> artifact;
  std::unique_ptr<rt::Runner> runner;
};

bridge::StepSession::StepSession() = default;
bridge::StepSession::~StepSession() = default;

std::string bridge::StepSession::open(const std::string &dir) {
  return guarded([&] {
    auto state = std::make_unique<State>();
    state->artifact = std::make_unique<rt::Artifact>(rt::Artifact::load(dir));
    state->runner = std::make_unique<rt::Runner>(
        *state->artifact,
        rt::createBackend(state->artifact->manifest().target));
    state_ = std::move(state);
  });
}

const rt::Manifest &bridge::StepSession::manifest() const {
  return state_->artifact->manifest();
}

std::string bridge::StepSession::setBinding(size_t index,
                                            const rt::Tensor &value) {
  return guarded([&] { state_->runner->setBinding(index, value); });
}

std::string bridge::StepSession::setRandomKey(uint64_t seed) {
  return guarded(
      [&] { state_->runner->setRandomKey(rt::randomKey(seed, 0, 0)); });
}

std::string bridge::StepSession::run(bool gradEntry) {
  return guarded([&] {
    if (!gradEntry) {
      state_->runner->run();
      return;
    }
    if (!state_->artifact->gradEntry())
      throw rt::Error(state_->artifact->directory() +
                      ": the artifact has no grad_entry");
    state_->runner->run(state_->artifact->gradEntry());
  });
}

std::string bridge::StepSession::read(const rt::Output &spec,
                                      rt::Tensor &value) const {
  return guarded([&] { value = state_->runner->readArena(spec); });
}
