//===- Artifact.cpp - a compiled model on disk ----------------------------===//
//
// Manifest parsing is strict about what the runtime uses (a wrong field is a
// compiler bug better caught here than as a crash in generated code) and
// ignores fields it does not use (memory-plan breakdown, the training config
// of a forward manifest).
//
//===----------------------------------------------------------------------===//

#include "runtime/Artifact.h"

#include "runtime/Error.h"
#include "runtime/File.h"
#include "runtime/SafeTensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>

#include <cstdlib>
#include <dlfcn.h>

namespace ztc::rt {

namespace {

using nlohmann::json;

constexpr BindingRole kRoles[] = {BindingRole::Input, BindingRole::Param,
                                  BindingRole::Constant, BindingRole::State,
                                  BindingRole::Hyper};

/// Reads typed fields of one JSON object, with errors naming `where`.
class ObjectReader {
public:
  ObjectReader(const json &object, std::string path, std::string where)
      : object_(object), path_(std::move(path)), where_(std::move(where)) {
    if (!object_.is_object())
      fail("is not an object");
  }

  [[noreturn]] void fail(const std::string &what) const {
    throw Error(path_ + ": " + where_ + " " + what);
  }

  const json &get(const char *key) const {
    auto it = object_.find(key);
    if (it == object_.end())
      fail(std::string("has no field '") + key + "'");
    return *it;
  }

  bool has(const char *key) const { return object_.contains(key); }

  std::string string(const char *key) const {
    const json &value = get(key);
    if (!value.is_string())
      fail(std::string("field '") + key + "' is not a string");
    return value.get<std::string>();
  }

  uint64_t unsignedInt(const char *key) const {
    const json &value = get(key);
    if (!value.is_number_unsigned())
      fail(std::string("field '") + key + "' is not a non-negative integer");
    return value.get<uint64_t>();
  }

  double number(const char *key) const {
    const json &value = get(key);
    if (!value.is_number())
      fail(std::string("field '") + key + "' is not a number");
    return value.get<double>();
  }

  // Optional fields: `fallback` when absent, the checks above otherwise.
  std::string stringOr(const char *key, const std::string &fallback) const {
    return has(key) ? string(key) : fallback;
  }
  uint64_t unsignedIntOr(const char *key, uint64_t fallback) const {
    return has(key) ? unsignedInt(key) : fallback;
  }
  double numberOr(const char *key, double fallback) const {
    return has(key) ? number(key) : fallback;
  }

  DType dtype() const {
    std::string name = string("dtype");
    std::optional<DType> dtype = parseDType(name);
    if (!dtype)
      fail("has unknown dtype '" + name + "'");
    return *dtype;
  }

  std::vector<int64_t> shape() const {
    const json &value = get("shape");
    if (!value.is_array())
      fail("field 'shape' is not an array");
    std::vector<int64_t> shape;
    for (const json &dim : value) {
      if (!dim.is_number_unsigned())
        fail("field 'shape' has a non-integer or negative entry");
      shape.push_back(dim.get<int64_t>());
    }
    return shape;
  }

  /// The "file" field, or the stem derived from `name`; must be a plain stem.
  std::string file(const std::string &name) const {
    std::string file = has("file") ? string("file") : fileStemFor(name);
    if (file.empty() || file != fileStemFor(file) || file == "." ||
        file == "..")
      fail("has invalid file stem '" + file + "'");
    return file;
  }

private:
  const json &object_;
  std::string path_;
  std::string where_;
};

/// "binding 3 ('fc1.weight')": how errors name an array entry.
std::string entryName(const char *kind, size_t index, const json &entry) {
  std::string name = std::string(kind) + " " + std::to_string(index);
  if (entry.is_object() && entry.contains("name") && entry["name"].is_string())
    name += " ('" + entry["name"].get<std::string>() + "')";
  return name;
}

size_t byteSizeOf(DType dtype, const std::vector<int64_t> &shape) {
  return static_cast<size_t>(
      checkedByteSize(shape, dtypeSize(dtype)).value_or(0));
}

/// Parses an array of outputs ("outputs", "grad_outputs"): each lies in the
/// arena and has its own file stem. `kind` names an entry in errors.
std::vector<Output> parseOutputs(const json &array, const std::string &path,
                                 const char *kind, uint64_t arenaBytes) {
  std::vector<Output> result;
  std::set<std::string> files;
  for (size_t i = 0; i < array.size(); ++i) {
    ObjectReader reader(array[i], path, entryName(kind, i, array[i]));
    Output output;
    output.name = reader.string("name");
    output.file = reader.file(output.name);
    output.dtype = reader.dtype();
    output.shape = reader.shape();
    output.offset = reader.unsignedInt("offset");
    if (!checkedByteSize(output.shape, dtypeSize(output.dtype)))
      reader.fail("has a shape too large to allocate");
    if (output.offset > arenaBytes ||
        output.byteSize() > arenaBytes - output.offset)
      reader.fail("(" + output.describe() + " at offset " +
                  std::to_string(output.offset) + ") lies outside the " +
                  std::to_string(arenaBytes) + "-byte arena");
    if (!files.insert(output.file).second)
      reader.fail("reuses output file '" + output.file + ".npy'");
    result.push_back(std::move(output));
  }
  return result;
}

/// Parses the "train" object.
TrainConfig parseTrainConfig(const json &object, const std::string &path) {
  ObjectReader reader(object, path, "train config");
  TrainConfig train;
  train.optimizer = reader.string("optimizer");
  train.loss = reader.stringOr("loss", "");
  ScheduleConfig &schedule = train.schedule;
  schedule.lr = reader.number("lr");
  std::string kind = reader.stringOr("lr_schedule", "constant");
  if (!parseScheduleKind(kind))
    reader.fail("has unknown lr_schedule '" + kind +
                "' (known: constant, warmup, warmup-decay, warmup-cosine)");
  schedule.kind = *parseScheduleKind(kind);
  std::string warmupType = reader.stringOr("warmup_type", "linear");
  if (!parseWarmupType(warmupType))
    reader.fail("has unknown warmup_type '" + warmupType +
                "' (known: linear, log)");
  schedule.warmupType = *parseWarmupType(warmupType);
  schedule.minLr = reader.numberOr("min_lr", 0.0);
  schedule.warmupSteps = reader.unsignedIntOr("warmup_steps", 0);
  schedule.totalSteps = reader.unsignedIntOr("total_steps", 0);
  schedule.warmupMinRatio = reader.numberOr("warmup_min_ratio", 0.0);
  for (double rate : {schedule.lr, schedule.minLr, schedule.warmupMinRatio})
    if (!(rate >= 0))
      reader.fail("has a negative lr, min_lr or warmup_min_ratio");
  train.batchSize = reader.unsignedIntOr("batch_size", 0);
  train.gradAccum = reader.unsignedIntOr("grad_accum", 1);
  if (train.gradAccum == 0)
    reader.fail("has grad_accum 0; it counts micro-batches per step (>= 1)");
  return train;
}

/// The checks that only a training manifest needs (see parseManifest).
void checkTrainManifest(const Manifest &manifest, const std::string &path) {
  auto fail = [&](const std::string &what) {
    throw Error(path + ": training manifest " + what);
  };
  int loss = manifest.outputIndex("loss");
  if (loss < 0)
    fail("has no output 'loss'");
  const Output &lossOutput = manifest.outputs[static_cast<size_t>(loss)];
  if (lossOutput.dtype != DType::Float32 || !lossOutput.shape.empty())
    fail("output 'loss' must be float32[], got " + lossOutput.describe());

  uint64_t batch = 0;
  try {
    batch = inputBatchSize(manifest);
  } catch (const Error &problem) {
    fail(problem.what());
  }
  if (manifest.train.batchSize != 0 && manifest.train.batchSize != batch)
    fail("has train.batch_size " + std::to_string(manifest.train.batchSize) +
         " but its inputs hold batches of " + std::to_string(batch));

  for (const Output &grad : manifest.gradOutputs) {
    // The grad entry's own loss (its arena place differs from the step's).
    if (grad.name == "loss") {
      if (grad.dtype != DType::Float32 || !grad.shape.empty())
        fail("grad output 'loss' is " + grad.describe() +
             "; expected float32[]");
      continue;
    }
    auto param =
        std::find_if(manifest.bindings.begin(), manifest.bindings.end(),
                     [&](const Binding &binding) {
                       return binding.role == BindingRole::Param &&
                              binding.name == grad.name;
                     });
    if (param == manifest.bindings.end())
      fail("grad output '" + grad.name + "' names no param");
    if (grad.dtype != DType::Float32 || grad.shape != param->shape)
      fail("grad output '" + grad.name + "' is " + grad.describe() +
           "; expected float32 in the param's shape " +
           describeType(DType::Float32, param->shape));
  }
  if (!manifest.gradOutputs.empty() && manifest.gradEntry.empty())
    fail("lists grad_outputs but names no grad_entry");
}

} // namespace

const char *roleName(BindingRole role) {
  switch (role) {
  case BindingRole::Input:
    return "input";
  case BindingRole::Param:
    return "param";
  case BindingRole::Constant:
    return "constant";
  case BindingRole::State:
    return "state";
  case BindingRole::Hyper:
    return "hyper";
  }
  return "?";
}

uint64_t inputBatchSize(const Manifest &manifest) {
  const Binding *first = nullptr;
  for (const Binding &binding : manifest.bindings) {
    if (binding.role != BindingRole::Input)
      continue;
    if (binding.shape.empty() || binding.shape[0] == 0)
      throw Error("input '" + binding.name + "' (" + binding.describe() +
                  ") has no batch dimension");
    if (first && binding.shape[0] != first->shape[0])
      throw Error("inputs disagree on the batch size: '" + first->name +
                  "' has " + std::to_string(first->shape[0]) + ", '" +
                  binding.name + "' has " + std::to_string(binding.shape[0]));
    if (!first)
      first = &binding;
  }
  if (!first)
    throw Error("has no input binding");
  return static_cast<uint64_t>(first->shape[0]);
}

int Manifest::outputIndex(const std::string &name) const {
  for (size_t i = 0; i < outputs.size(); ++i)
    if (outputs[i].name == name)
      return static_cast<int>(i);
  return -1;
}

size_t Binding::byteSize() const { return byteSizeOf(dtype, shape); }
size_t Output::byteSize() const { return byteSizeOf(dtype, shape); }

std::string fileStemFor(const std::string &name) {
  std::string stem = name;
  for (char &c : stem) {
    bool keep = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (!keep)
      c = '_';
  }
  return stem;
}

Manifest parseManifest(const std::string &text, const std::string &path) {
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception &error) {
    throw Error(path + ": invalid JSON: " + error.what());
  }
  ObjectReader top(root, path, "manifest");
  Manifest manifest;
  uint64_t format = top.unsignedInt("format");
  if (format != static_cast<uint64_t>(kManifestFormat))
    top.fail("has format " + std::to_string(format) + "; this runtime reads " +
             std::to_string(kManifestFormat));
  std::string target = top.string("target");
  if (!parseTarget(target))
    top.fail("has unknown target '" + target + "'");
  manifest.target = *parseTarget(target);
  manifest.entry = top.string("entry");
  manifest.source = top.string("source");
  manifest.arenaBytes = top.unsignedInt("arena_bytes");
  std::string kind = top.stringOr("kind", "forward");
  if (kind == "train")
    manifest.kind = ArtifactKind::Train;
  else if (kind != "forward")
    top.fail("has unknown kind '" + kind + "' (known: forward, train)");
  manifest.gradEntry = top.stringOr("grad_entry", "");
  manifest.accumEntry = top.stringOr("accum_entry", "");

  const json &bindings = top.get("bindings");
  const json &outputs = top.get("outputs");
  if (!bindings.is_array() || !outputs.is_array())
    top.fail("fields 'bindings' and 'outputs' must be arrays");

  std::set<std::string> inputFiles;
  for (size_t i = 0; i < bindings.size(); ++i) {
    ObjectReader reader(bindings[i], path,
                        entryName("binding", i, bindings[i]));
    Binding binding;
    std::string role = reader.string("role");
    auto known = std::find_if(
        std::begin(kRoles), std::end(kRoles),
        [&](BindingRole candidate) { return role == roleName(candidate); });
    if (known == std::end(kRoles))
      reader.fail("has unknown role '" + role + "'");
    binding.role = *known;
    binding.name = reader.string("name");
    binding.dtype = reader.dtype();
    binding.shape = reader.shape();
    if (!checkedByteSize(binding.shape, dtypeSize(binding.dtype)))
      reader.fail("has a shape too large to allocate");
    if (binding.role == BindingRole::Hyper && !binding.shape.empty())
      reader.fail("is a hyper of shape " + binding.describe() +
                  "; hypers are scalars");
    if (binding.role == BindingRole::Input) {
      binding.file = reader.file(binding.name);
      if (!inputFiles.insert(binding.file).second)
        reader.fail("reuses input file '" + binding.file + ".npy'");
    }
    manifest.bindings.push_back(std::move(binding));
  }

  manifest.outputs = parseOutputs(outputs, path, "output", manifest.arenaBytes);
  if (top.has("grad_outputs")) {
    const json &gradOutputs = top.get("grad_outputs");
    if (!gradOutputs.is_array())
      top.fail("field 'grad_outputs' must be an array");
    manifest.gradOutputs =
        parseOutputs(gradOutputs, path, "grad output", manifest.arenaBytes);
  }
  if (top.has("accum_outputs")) {
    const json &accumOutputs = top.get("accum_outputs");
    if (!accumOutputs.is_array())
      top.fail("field 'accum_outputs' must be an array");
    manifest.accumOutputs =
        parseOutputs(accumOutputs, path, "accum output", manifest.arenaBytes);
  }
  if (manifest.kind == ArtifactKind::Train) {
    manifest.train = parseTrainConfig(top.get("train"), path);
    checkTrainManifest(manifest, path);
  }
  return manifest;
}

namespace {

json printOutputs(const std::vector<Output> &outputs) {
  json array = json::array();
  for (const Output &output : outputs)
    array.push_back({{"name", output.name},
                     {"file", output.file},
                     {"dtype", dtypeName(output.dtype)},
                     {"shape", output.shape},
                     {"offset", output.offset}});
  return array;
}

json printTrainConfig(const TrainConfig &train) {
  const ScheduleConfig &schedule = train.schedule;
  json object = {{"optimizer", train.optimizer},
                 {"lr", schedule.lr},
                 {"lr_schedule", scheduleName(schedule.kind)},
                 {"min_lr", schedule.minLr},
                 {"warmup_steps", schedule.warmupSteps},
                 {"total_steps", schedule.totalSteps},
                 {"warmup_type", warmupTypeName(schedule.warmupType)},
                 {"warmup_min_ratio", schedule.warmupMinRatio},
                 {"grad_accum", train.gradAccum}};
  if (!train.loss.empty())
    object["loss"] = train.loss;
  if (train.batchSize != 0)
    object["batch_size"] = train.batchSize;
  return object;
}

} // namespace

std::string printManifest(const Manifest &manifest) {
  json root = {{"format", manifest.format},
               {"target", targetName(manifest.target)},
               {"entry", manifest.entry},
               {"source", manifest.source},
               {"arena_bytes", manifest.arenaBytes}};
  json bindings = json::array();
  for (const Binding &binding : manifest.bindings) {
    json entry = {{"role", roleName(binding.role)},
                  {"name", binding.name},
                  {"dtype", dtypeName(binding.dtype)},
                  {"shape", binding.shape}};
    if (binding.role == BindingRole::Input)
      entry["file"] = binding.file;
    bindings.push_back(std::move(entry));
  }
  root["bindings"] = std::move(bindings);
  root["outputs"] = printOutputs(manifest.outputs);
  // A forward manifest prints exactly as before training existed.
  if (manifest.kind == ArtifactKind::Train) {
    root["kind"] = "train";
    root["train"] = printTrainConfig(manifest.train);
  }
  if (!manifest.gradEntry.empty())
    root["grad_entry"] = manifest.gradEntry;
  if (!manifest.accumEntry.empty())
    root["accum_entry"] = manifest.accumEntry;
  if (!manifest.gradOutputs.empty())
    root["grad_outputs"] = printOutputs(manifest.gradOutputs);
  if (!manifest.accumOutputs.empty())
    root["accum_outputs"] = printOutputs(manifest.accumOutputs);
  return root.dump(2) + "\n";
}

Artifact Artifact::load(const std::string &directory) {
  Artifact artifact;
  artifact.directory_ = directory;
  std::string manifestPath = directory + "/manifest.json";
  artifact.manifest_ = parseManifest(readFile(manifestPath), manifestPath);

  std::string soPath = directory + "/step.so";
  // Idle OpenMP threads sleep instead of spinning (unless the user chose):
  // a step is a sequence of short parallel loops, and on a busy machine
  // spinning workers steal the cores the next loop needs. libgomp reads
  // this when the step loads it.
  ::setenv("OMP_WAIT_POLICY", "PASSIVE", /*overwrite=*/0);
  // RTLD_LOCAL: two artifacts in one process keep their own symbols.
  // RTLD_NODELETE: the step's OpenMP worker threads outlive the call (they
  // idle in libgomp until exit), so its code and libgomp must stay mapped
  // even after the Artifact is destroyed.
  artifact.handle_ =
      ::dlopen(soPath.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!artifact.handle_)
    throw Error(soPath + ": cannot load the compiled step: " + ::dlerror());
  auto resolve = [&](const std::string &name) -> EntryFn {
    if (name.empty())
      return nullptr;
    ::dlerror();
    void *symbol = ::dlsym(artifact.handle_, name.c_str());
    if (!symbol) {
      const char *message = ::dlerror();
      throw Error(soPath + ": entry '" + name +
                  "' not found: " + (message ? message : "null symbol"));
    }
    return reinterpret_cast<EntryFn>(symbol);
  };
  artifact.entry_ = resolve(artifact.manifest_.entry);
  artifact.gradEntry_ = resolve(artifact.manifest_.gradEntry);
  artifact.accumEntry_ = resolve(artifact.manifest_.accumEntry);
  return artifact;
}

Artifact::Artifact(Artifact &&other) noexcept { *this = std::move(other); }

Artifact &Artifact::operator=(Artifact &&other) noexcept {
  std::swap(directory_, other.directory_);
  std::swap(manifest_, other.manifest_);
  std::swap(handle_, other.handle_);
  std::swap(entry_, other.entry_);
  std::swap(gradEntry_, other.gradEntry_);
  std::swap(accumEntry_, other.accumEntry_);
  return *this;
}

Artifact::~Artifact() {
  if (handle_)
    ::dlclose(handle_);
}

std::map<std::string, Tensor> Artifact::loadInitialValues() const {
  // Inputs and hypers are written before each call; states start at zero
  // unless init.safetensors has a value.
  auto fromInit = [](const Binding &binding) {
    return binding.role == BindingRole::Param ||
           binding.role == BindingRole::Constant ||
           binding.role == BindingRole::State;
  };
  bool needed = false;
  for (const Binding &binding : manifest_.bindings)
    needed |= binding.role == BindingRole::Param ||
              binding.role == BindingRole::Constant;
  std::map<std::string, Tensor> values;
  if (!needed)
    return values;
  std::string path = initPath();
  SafeTensors init = readSafeTensors(path);
  for (const Binding &binding : manifest_.bindings) {
    if (!fromInit(binding))
      continue;
    auto it = init.tensors.find(binding.name);
    if (it == init.tensors.end() && binding.role == BindingRole::State)
      continue;
    if (it == init.tensors.end())
      throw Error(path + ": no tensor for " + roleName(binding.role) + " '" +
                  binding.name + "' (" + binding.describe() + ")");
    const Tensor &value = it->second;
    if (value.dtype != binding.dtype || value.shape != binding.shape)
      throw Error(path + ": " + roleName(binding.role) + " '" + binding.name +
                  "': expected " + binding.describe() + ", got " +
                  value.describe());
    values[binding.name] = std::move(it->second);
  }
  return values;
}

} // namespace ztc::rt
