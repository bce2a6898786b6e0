//===- RuntimeBridge.cpp - the driver's door into the runtime -------------===//
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
#include "runtime/kernels/Nf4.h"
#include "runtime/train/Checkpoint.h"
#include "runtime/train/ShardedCheckpoint.h"
#include "runtime/train/TokenDataset.h"
#include "runtime/train/Trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <unistd.h>

#include <nlohmann/json.hpp>

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
         (status.type() == fs::file_type::symlink   ? "a symbolic link"
          : status.type() == fs::file_type::regular ? "a file"
                                                    : "not a directory") +
         "): ztc replaces only its own artifacts; give another -o";
}

std::string bridge::checkBucketBindings(const rt::Manifest &bucket,
                                        const rt::Manifest &main,
                                        uint64_t length, uint64_t longest) {
  auto shared = [](rt::BindingRole role) {
    return role == rt::BindingRole::Param || role == rt::BindingRole::State ||
           role == rt::BindingRole::Buffer || role == rt::BindingRole::Hyper;
  };
  std::map<std::string, const rt::Binding *> mains;
  for (const rt::Binding &binding : main.bindings)
    mains[binding.name] = &binding;
  std::string where =
      "--seq-buckets: the step for length " + std::to_string(length) + " ";
  size_t sharedCount = 0;
  for (const rt::Binding &binding : bucket.bindings) {
    if (binding.role == rt::BindingRole::Constant)
      continue;
    auto it = mains.find(binding.name);
    const rt::Binding *other = it == mains.end() ? nullptr : it->second;
    if (!other || other->role != binding.role)
      return where + "has " + rt::roleName(binding.role) + " '" + binding.name +
             "', which the step for length " + std::to_string(longest) +
             " does not: the lengths change the "
             "model's parameters or state, so they cannot share them";
    if (shared(binding.role)) {
      ++sharedCount;
      if (binding.dtype != other->dtype || binding.shape != other->shape ||
          binding.fullShape != other->fullShape)
        return where + "has " + rt::roleName(binding.role) + " '" +
               binding.name + "' " + binding.describe() + ", the step for " +
               std::to_string(longest) + " " + other->describe() +
               ": a parameter or state whose shape depends on the sequence "
               "length cannot be shared";
      continue;
    }
    int64_t elements = 1, room = 1;
    for (int64_t d : binding.shape)
      elements *= d;
    for (int64_t d : other->shape)
      room *= d;
    if (binding.dtype != other->dtype ||
        binding.shape.size() != other->shape.size() || elements > room)
      return where + "takes " + rt::roleName(binding.role) + " '" +
             binding.name + "' " + binding.describe() +
             ", which does not fit the step for " + std::to_string(longest) +
             "'s " + other->describe();
  }
  size_t mainShared = 0;
  for (const rt::Binding &binding : main.bindings)
    mainShared += shared(binding.role);
  std::set<rt::EntryPurpose> purposes, mainPurposes;
  for (const rt::Entry &entry : bucket.entries)
    purposes.insert(entry.purpose);
  for (const rt::Entry &entry : main.entries)
    mainPurposes.insert(entry.purpose);
  if (sharedCount != mainShared || purposes != mainPurposes)
    return where + "has " + std::to_string(sharedCount) +
           " parameters, states and hypers and " +
           std::to_string(purposes.size()) + " entries, the step for " +
           std::to_string(longest) + " " + std::to_string(mainShared) +
           " and " + std::to_string(mainPurposes.size());
  return "";
}

std::string bridge::autoSeqBuckets(const std::string &data, uint64_t longest,
                                   std::vector<uint64_t> &lengths) {
  return guarded([&] {
    rt::TokenDataset dataset = rt::TokenDataset::open(data);
    std::vector<uint64_t> sizes;
    for (uint64_t d = 0; d < dataset.numDocuments(); ++d)
      sizes.push_back(dataset.length(d));
    if (sizes.empty())
      throw rt::Error("--seq-buckets auto: " + dataset.describe() +
                      " has no documents");
    std::sort(sizes.begin(), sizes.end());
    // Nearest-rank percentiles.
    for (double share : {0.5, 0.75, 0.9, 1.0}) {
      uint64_t rank = uint64_t(std::ceil(share * double(sizes.size())));
      uint64_t at =
          std::min<uint64_t>(sizes.size(), std::max<uint64_t>(rank, 1)) - 1;
      uint64_t length = std::max<uint64_t>(8, (sizes[at] + 7) / 8 * 8);
      if (longest)
        length = std::min(length, longest);
      if (lengths.empty() || length > lengths.back())
        lengths.push_back(length);
    }
  });
}

std::string bridge::documentIndexFile(const std::string &data) {
  return rt::documentIndexFile(data);
}

std::string bridge::readBucketPlans(const std::string &dir,
                                    std::vector<BucketPlan> &plans) {
  return guarded([&] {
    rt::Manifest main = rt::parseManifest(rt::readFile(dir + "/manifest.json"),
                                          dir + "/manifest.json");
    for (uint64_t length : main.train.seqBuckets) {
      std::string at = length == main.train.seqBuckets.back()
                           ? dir
                           : rt::bucketDirectory(dir, length);
      rt::Manifest manifest = rt::parseManifest(
          rt::readFile(at + "/manifest.json"), at + "/manifest.json");
      BucketPlan plan{length, manifest.arenaBytes, 0};
      for (const rt::Binding &binding : manifest.bindings)
        if (binding.role == rt::BindingRole::Constant)
          plan.constantBytes += binding.byteSize();
      plans.push_back(plan);
    }
  });
}

std::string bridge::writeArtifactAtomically(
    const std::string &dir, const mlir::ztc::ArtifactContents &artifact,
    bool build,
    const std::map<uint64_t, mlir::ztc::ArtifactContents> &buckets) {
  if (std::string refused = checkArtifactOutput(dir); !refused.empty())
    return refused;
  fs::path target = fs::absolute(dir);
  fs::path staging = target;
  staging += ".tmp-" + std::to_string(::getpid());
  removeDirectory(staging.string());
  std::string error;
  for (const auto &[length, bucket] : buckets) {
    // The main artifact's params and states serve every bucket: only the
    // bucket's own constants (its masks, positions) are stored with it.
    mlir::ztc::ArtifactContents own = bucket;
    own.initialValues.clear();
    for (const rt::Binding &binding : bucket.manifest.bindings)
      if (binding.role == rt::BindingRole::Constant)
        if (auto it = bucket.initialValues.find(binding.name);
            it != bucket.initialValues.end())
          own.initialValues.insert(*it);
    own.sourceModel.clear();
    error = writeAndBuildArtifact(rt::bucketDirectory(staging.string(), length),
                                  own, build);
    if (!error.empty())
      break;
  }
  if (error.empty())
    error = writeAndBuildArtifact(staging.string(), artifact, build);
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
/// What an export does with a LoRA step's adapters.
enum class LoraExport {
  Refuse, // the model file has no place for them
  Merge,  // folded into their base weights (--merge)
  Keep,   // as trained (--adapter)
};

/// Each LoRA base weight in `weights` becomes W + scale * B A (for a
/// Conv1D's [in, out] weight, its transpose), summed in double and rounded
/// once; the adapters leave `weights`.
void mergeLoraAdapters(const rt::LoraConfig &lora,
                       std::map<std::string, rt::Tensor> &weights) {
  auto element = [](const rt::Tensor &t, size_t i) {
    return t.dtype == rt::DType::Float64 ? t.data<double>()[i]
                                         : double(t.data<float>()[i]);
  };
  for (const rt::LoraAdapter &adapter : lora.adapters) {
    rt::Tensor &w = weights.at(adapter.base);
    const rt::Tensor &a = weights.at(adapter.a), &b = weights.at(adapter.b);
    if (w.shape.size() != 2 || a.shape.size() != 2 || b.shape.size() != 2 ||
        (w.dtype != rt::DType::Float32 && w.dtype != rt::DType::Float64) ||
        a.dtype != w.dtype || b.dtype != w.dtype)
      throw rt::Error("cannot merge adapter '" + adapter.a + "' into '" +
                      adapter.base + "': " + w.describe() + ", " +
                      a.describe() + ", " + b.describe());
    int64_t r = a.shape[0], in = a.shape[1], out = b.shape[0];
    bool outIn = adapter.layout == "out_in";
    if (b.shape[1] != r || w.shape != (outIn ? std::vector<int64_t>{out, in}
                                             : std::vector<int64_t>{in, out}))
      throw rt::Error("adapter '" + adapter.a + "' (" + a.describe() +
                      ") and '" + adapter.b + "' (" + b.describe() +
                      ") do not fit '" + adapter.base + "' (" + w.describe() +
                      ")");
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < in; ++i) {
        double sum = 0;
        for (int64_t k = 0; k < r; ++k)
          sum += element(b, size_t(o * r + k)) * element(a, size_t(k * in + i));
        size_t at = size_t(outIn ? o * in + i : i * out + o);
        double merged = element(w, at) + lora.scale * sum;
        if (w.dtype == rt::DType::Float64)
          w.data<double>()[at] = merged;
        else
          w.data<float>()[at] = float(merged);
      }
    weights.erase(adapter.a);
    weights.erase(adapter.b);
  }
}

/// QLoRA: each NF4 weight in `weights` (memory.json's nf4_shape) becomes
/// its float32 value again, as bitsandbytes' dequantize_4bit gives it, and
/// its parts leave `weights`.
void dequantizeNf4Weights(const std::string &artifactDir,
                          std::map<std::string, rt::Tensor> &weights) {
  std::ifstream report(artifactDir + "/memory.json");
  nlohmann::json memory = nlohmann::json::parse(report, nullptr, false);
  if (memory.is_discarded() || !memory.contains("weights"))
    return;
  const blockwise8bit::CodeTable &table = blockwise8bit::codeTable(true);
  for (const nlohmann::json &weight : memory["weights"]) {
    if (!weight.contains("nf4_shape"))
      continue;
    std::string name = weight["name"].get<std::string>();
    std::vector<int64_t> shape =
        weight["nf4_shape"].get<std::vector<int64_t>>();
    const auto &suffixes = nf4::kPartSuffixes;
    auto part = [&](const std::string &key) -> rt::Tensor & {
      auto it = weights.find(key);
      if (it == weights.end())
        throw rt::Error(artifactDir + ": no value for '" + key +
                        "', a part of the NF4 weight '" + name + "'");
      return it->second;
    };
    const rt::Tensor &packed = part(name), &codes = part(name + suffixes[0]),
                     &nested = part(name + suffixes[1]),
                     &offset = part(name + suffixes[2]);
    int64_t n = shape.size() == 2 ? shape[0] * shape[1] : 0;
    nf4::PartElements elements = nf4::partElements(n);
    if (n < 1 || packed.byteSize() != size_t(nf4::packedBytes(n)) ||
        codes.byteSize() != size_t(elements.absmax) ||
        nested.byteSize() != sizeof(float) * size_t(elements.nestedAbsmax) ||
        offset.byteSize() != sizeof(float) * size_t(elements.offset))
      throw rt::Error(artifactDir + ": the NF4 weight '" + name +
                      "' does not have the parts of its shape");
    rt::Tensor value(rt::DType::Float32, shape);
    nf4::dequantize(packed.bytes.data(), codes.bytes.data(),
                    reinterpret_cast<const float *>(nested.bytes.data()),
                    *reinterpret_cast<const float *>(offset.bytes.data()), n,
                    table, value.data<float>());
    for (const char *suffix : suffixes)
      weights.erase(name + suffix);
    weights[name] = std::move(value);
  }
}

std::map<std::string, rt::Tensor> loadCheckpointWeights(
    const std::string &artifactDir, const std::string &checkpointDir,
    std::string &sourceModel, LoraExport lora = LoraExport::Refuse) {
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
  if (const std::optional<rt::LoraConfig> &config =
          artifact.manifest().train.lora) {
    if (lora == LoraExport::Refuse)
      throw rt::Error(
          artifactDir + " trains LoRA adapters, which " + sourceModel +
          " has no place for: export with --merge (the adapters folded into "
          "the weights), or --adapter DIR (peft's adapter format)");
    if (lora == LoraExport::Merge) {
      dequantizeNf4Weights(artifactDir, weights);
      mergeLoraAdapters(*config, weights);
    }
  }
  return weights;
}

} // namespace

std::string bridge::readCheckpointForExport(
    const std::string &artifactDir, const std::string &checkpointDir,
    std::string &sourceModel,
    std::map<std::string, std::vector<uint8_t>> &params, bool merge) {
  return guarded([&] {
    for (auto &[name, tensor] :
         loadCheckpointWeights(artifactDir, checkpointDir, sourceModel,
                               merge ? LoraExport::Merge : LoraExport::Refuse))
      params[name] = std::move(tensor.bytes);
  });
}

std::string bridge::writeLoraAdapter(const std::string &artifactDir,
                                     const std::string &checkpointDir,
                                     const std::string &dir, size_t &tensors) {
  return guarded([&] {
    namespace fs = std::filesystem;
    std::string sourceModel;
    std::map<std::string, rt::Tensor> weights = loadCheckpointWeights(
        artifactDir, checkpointDir, sourceModel, LoraExport::Keep);
    rt::Artifact artifact = rt::Artifact::load(artifactDir);
    const std::optional<rt::LoraConfig> &lora = artifact.manifest().train.lora;
    if (!lora)
      throw rt::Error(artifactDir + " trains no LoRA adapters (compile with "
                                    "--lora to have some)");
    // What trains besides the adapters (biases, modules to save): the
    // memory report's list of weights.
    std::ifstream report(artifactDir + "/memory.json");
    nlohmann::json memory = nlohmann::json::parse(report, nullptr, false);
    if (memory.is_discarded() || !memory.contains("weights"))
      throw rt::Error(artifactDir + "/memory.json: no list of weights (an "
                                    "artifact of an older ztc?)");
    std::set<std::string> adapters, adaptedModules;
    std::vector<std::string> targets;
    bool conv1d = false;
    for (const rt::LoraAdapter &adapter : lora->adapters) {
      adapters.insert(adapter.a);
      adapters.insert(adapter.b);
      std::string module = adapter.base;
      if (module.size() > 7 && module.substr(module.size() - 7) == ".weight")
        module.resize(module.size() - 7);
      adaptedModules.insert(module);
      targets.push_back(module);
      conv1d |= adapter.layout == "in_out";
    }
    // peft's names: its prefix; a bias of an adapted module under its
    // base_layer; the rest as the model names them.
    const std::string prefix = "base_model.model.";
    rt::SafeTensors contents;
    contents.metadata["format"] = "pt";
    std::set<std::string> modulesToSave;
    for (const nlohmann::json &weight : memory["weights"]) {
      std::string name = weight.value("name", "");
      if (weight.value("role", "") != "trained" || !weights.count(name))
        continue;
      std::string module = name.substr(0, name.rfind('.'));
      std::string key = prefix + name;
      if (!adapters.count(name)) {
        bool isBias =
            name.find("bias") != std::string::npos && lora->bias != "none";
        if (isBias && adaptedModules.count(module))
          key = prefix + module + ".base_layer" + name.substr(module.size());
        else if (!isBias)
          modulesToSave.insert(module);
      }
      contents.tensors.emplace(key, weights.at(name));
    }
    nlohmann::json config = {
        {"peft_type", "LORA"},
        {"r", lora->r},
        {"lora_alpha", lora->alpha},
        {"lora_dropout", lora->dropout},
        {"use_rslora", lora->rslora},
        {"bias", lora->bias},
        {"target_modules", targets},
        {"modules_to_save",
         modulesToSave.empty()
             ? nlohmann::json(nullptr)
             : nlohmann::json(std::vector<std::string>(modulesToSave.begin(),
                                                       modulesToSave.end()))},
        {"fan_in_fan_out", conv1d},
        {"init_lora_weights", true},
        {"inference_mode", true},
        {"task_type", nullptr},
        {"base_model_name_or_path", nullptr}};
    // Nothing of the user's is replaced: a new or empty directory, or one
    // holding only what an earlier export wrote.
    std::error_code ec;
    if (fs::exists(dir, ec)) {
      if (!fs::is_directory(dir, ec))
        throw rt::Error("--adapter " + dir +
                        ": exists and is not a "
                        "directory; not replaced");
      for (const fs::directory_entry &entry : fs::directory_iterator(dir)) {
        std::string file = entry.path().filename().string();
        if (file != "adapter_model.safetensors" &&
            file != "adapter_config.json")
          throw rt::Error("--adapter " + dir + ": holds " + file +
                          ", which is not an adapter ztc wrote; not replaced");
      }
    } else if (!fs::create_directories(dir, ec) || ec) {
      throw rt::Error("--adapter " + dir +
                      ": cannot create it: " + ec.message());
    }
    rt::writeSafeTensors(dir + "/adapter_model.safetensors", contents);
    rt::AtomicFileWriter file(dir + "/adapter_config.json");
    std::string text = config.dump(2) + "\n";
    file.write(text.data(), text.size());
    file.commit();
    tensors = contents.tensors.size();
  });
}

std::string bridge::loraSpecFromConfig(const std::string &path,
                                       std::string &spec) {
  return guarded([&] {
    namespace fs = std::filesystem;
    std::error_code ec;
    std::string file = fs::is_directory(path, ec)
                           ? (fs::path(path) / "adapter_config.json").string()
                           : path;
    std::ifstream in(file);
    if (!in)
      throw rt::Error("--lora " + file +
                      ": cannot read it (a peft "
                      "adapter_config.json, or r=R,alpha=A,targets=REGEX)");
    nlohmann::json config = nlohmann::json::parse(in, nullptr, false);
    if (config.is_discarded() || !config.is_object())
      throw rt::Error(file + ": not a JSON object (peft's LoraConfig, as "
                             "save_pretrained writes adapter_config.json)");
    auto fail = [&](const std::string &key, const std::string &why) {
      throw rt::Error(file + ": '" + key + "' " + why);
    };
    auto present = [&](const char *key) {
      return config.contains(key) && !config[key].is_null();
    };
    if (present("peft_type") && config["peft_type"] != "LORA")
      fail("peft_type",
           "is " + config["peft_type"].dump() + "; ztc trains LORA adapters");
    // Features ztc does not build: refused rather than ignored.
    for (const char *key :
         {"use_dora", "use_qalora", "use_bdlora", "lora_bias"})
      if (present(key) && config[key] != false)
        fail(key, "is set; ztc builds plain LoRA");
    for (const char *key :
         {"layers_to_transform", "layers_pattern", "exclude_modules",
          "target_parameters", "trainable_token_indices", "layer_replication",
          "alora_invocation_tokens"})
      if (present(key) && !(config[key].is_array() && config[key].empty()))
        fail(key, "is set; ztc adapts every module target_modules names");
    for (const char *key : {"rank_pattern", "alpha_pattern"})
      if (present(key) && !config[key].empty())
        fail(key, "is set; ztc gives every adapter one r and alpha");
    if (present("init_lora_weights") && config["init_lora_weights"] != true)
      fail("init_lora_weights",
           "is " + config["init_lora_weights"].dump() +
               "; ztc draws peft's default (true), or takes --lora-init");
    auto number = [&](const char *key, double fallback) {
      if (!present(key))
        return fallback;
      if (!config[key].is_number())
        fail(key, "is not a number");
      return config[key].get<double>();
    };
    auto names = [&](const char *key) -> std::string {
      const nlohmann::json &value = config[key];
      if (value.is_string())
        return "^" + value.get<std::string>();
      if (!value.is_array() || value.empty())
        fail(key, "must be a list of module names or a regular expression");
      std::string alternation;
      for (const nlohmann::json &name : value) {
        if (!name.is_string() || name.get<std::string>().empty())
          fail(key, "holds " + name.dump() + ", not a module name");
        std::string escaped;
        for (char c : name.get<std::string>()) {
          if (std::strchr(".[]{}()\\*+?^$|", c))
            escaped += '\\';
          escaped += c;
        }
        alternation += (alternation.empty() ? "" : "|") + escaped;
      }
      return alternation;
    };
    if (!present("target_modules"))
      fail("target_modules", "is missing: ztc adapts the modules it names");
    auto text = [](double value) {
      std::ostringstream out;
      out.precision(17);
      out << value;
      return out.str();
    };
    double r = number("r", 8);
    if (r < 1 || r != std::floor(r))
      fail("r", "must be a positive integer");
    spec = "r=" + std::to_string(int64_t(r)) +
           ",alpha=" + text(number("lora_alpha", 8)) +
           ",dropout=" + text(number("lora_dropout", 0)) +
           ",targets=" + names("target_modules");
    if (present("use_rslora")) {
      if (!config["use_rslora"].is_boolean())
        fail("use_rslora", "is not true or false");
      spec += std::string(",rslora=") +
              (config["use_rslora"].get<bool>() ? "true" : "false");
    }
    if (present("bias")) {
      if (!config["bias"].is_string())
        fail("bias", "is not a string");
      spec += ",bias=" + config["bias"].get<std::string>();
    }
    if (present("modules_to_save"))
      spec += ",modules-to-save=" + names("modules_to_save");
  });
}

std::string bridge::loadLoraInit(const std::string &path,
                                 mlir::ztc::ArtifactContents &artifact,
                                 size_t &loaded) {
  return guarded([&] {
    namespace fs = std::filesystem;
    const std::optional<rt::LoraConfig> &lora = artifact.manifest.train.lora;
    if (!lora)
      throw rt::Error("--lora-init " + path +
                      ": the step has no adapters "
                      "(give --lora too)");
    std::string file = path;
    std::error_code ec;
    if (fs::is_directory(path, ec))
      file = (fs::path(path) / "adapter_model.safetensors").string();
    if (!fs::exists(file, ec))
      throw rt::Error("--lora-init " + path + ": no " + file +
                      " (a peft adapter directory, as save_pretrained "
                      "writes it, or its adapter_model.safetensors)");
    rt::SafeTensors contents = rt::readSafeTensors(file);
    // The adapters, and the other params that train (peft saves a
    // lora_only bias as <module>.base_layer.bias, and modules to save).
    std::map<std::string, const rt::Binding *> adapters, trained;
    for (const rt::LoraAdapter &adapter : lora->adapters)
      for (const std::string &name : {adapter.a, adapter.b})
        for (const rt::Binding &binding : artifact.manifest.bindings)
          if (binding.name == name)
            adapters[name] = &binding;
    for (const rt::Binding &binding : artifact.manifest.bindings)
      if (binding.role == rt::BindingRole::Param &&
          !artifact.frozenParams.count(binding.name) &&
          !adapters.count(binding.name))
        trained[binding.name] = &binding;
    std::set<std::string> set;
    for (auto &[key, tensor] : contents.tensors) {
      std::string name = key;
      static const std::string kPrefix = "base_model.model.";
      if (name.rfind(kPrefix, 0) == 0)
        name = name.substr(kPrefix.size());
      // peft's in-memory names carry the adapter's ("lora_A.default.weight").
      for (const char *part : {".lora_A.", ".lora_B."}) {
        size_t at = name.find(part);
        if (at == std::string::npos)
          continue;
        size_t next = name.find('.', at + std::strlen(part));
        if (next != std::string::npos && name.substr(next) == ".weight")
          name = name.substr(0, at + std::strlen(part)) + "weight";
      }
      auto endsWith = [](const std::string &text, const std::string &tail) {
        return text.size() >= tail.size() &&
               text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
      };
      bool isAdapter =
          endsWith(name, ".lora_A.weight") || endsWith(name, ".lora_B.weight");
      if (!isAdapter) {
        for (const char *wrapper : {".base_layer.", ".modules_to_save."}) {
          size_t at = name.find(wrapper);
          if (at == std::string::npos)
            continue;
          std::string rest = name.substr(at + std::strlen(wrapper));
          // modules_to_save.<adapter name>.weight
          if (std::string(wrapper) == ".modules_to_save.")
            rest = rest.substr(std::min(rest.size(), rest.find('.') + 1));
          name = name.substr(0, at + 1) + rest;
        }
      }
      const std::map<std::string, const rt::Binding *> &pool =
          isAdapter ? adapters : trained;
      std::vector<std::string> matches;
      for (auto &[candidate, binding] : pool)
        if (candidate == name || endsWith(candidate, "." + name) ||
            endsWith(name, "." + candidate))
          matches.push_back(candidate);
      if (matches.size() != 1)
        throw rt::Error(
            file + ": tensor '" + key + "' " +
            (matches.empty()
                 ? std::string(isAdapter
                                   ? "matches no adapter of the step (they "
                                     "are named like '" +
                                         adapters.begin()->first +
                                         "'; check --lora targets)"
                                   : "matches no parameter the step trains "
                                     "(check --lora bias and "
                                     "modules-to-save)")
                 : "matches " + std::to_string(matches.size()) +
                       " parameters ('" + matches[0] + "', '" + matches[1] +
                       "')"));
      const rt::Binding &binding = *pool.at(matches[0]);
      const std::vector<int64_t> &shape =
          binding.sharded() ? binding.fullShape : binding.shape;
      if (tensor.shape != shape || !rt::isFloat(tensor.dtype))
        throw rt::Error(file + ": tensor '" + key + "' is " +
                        tensor.describe() + ", but adapter '" + matches[0] +
                        "' is " + rt::describeType(binding.dtype, shape) +
                        " (another r, or another model?)");
      if (!set.insert(matches[0]).second)
        throw rt::Error(file + ": two tensors give adapter '" + matches[0] +
                        "'");
      rt::Tensor value(binding.dtype, shape);
      value.bytes =
          tensor.dtype == binding.dtype
              ? tensor.bytes
              : rt::convertFloats(tensor.bytes, tensor.dtype, binding.dtype);
      artifact.initialValues[matches[0]] = std::move(value);
    }
    for (auto &[adapter, binding] : adapters)
      if (!set.count(adapter))
        throw rt::Error(file + " has no value for adapter '" + adapter +
                        "' (its lora targets differ from --lora's?)");
    loaded = set.size();
  });
}

std::string bridge::writeStateDict(
    const std::string &artifactDir, const std::string &checkpointDir,
    const std::map<std::string, std::vector<std::string>> &tied,
    const std::string &path, size_t &tensors, bool merge) {
  return guarded([&] {
    std::string sourceModel;
    rt::SafeTensors contents;
    contents.metadata["format"] = "pt";
    for (auto &[name, tensor] : loadCheckpointWeights(
             artifactDir, checkpointDir, sourceModel,
             merge ? LoraExport::Merge : LoraExport::Refuse)) {
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
