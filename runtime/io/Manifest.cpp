//===- Manifest.cpp - manifest.json, parsed and printed -------------------===//
//
// Parsing is strict about what the runtime uses (a wrong field is a
// compiler bug better caught here than as a crash in generated code) and
// ignores fields it does not use (memory-plan breakdown, the training config
// of a forward manifest).
//
//===----------------------------------------------------------------------===//

#include "runtime/io/Manifest.h"

#include "runtime/Error.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <set>

namespace ztc::rt {

namespace {

using nlohmann::json;

/// Reads typed fields of one JSON object, with errors naming `where`.
class ObjectReader {
public:
  ObjectReader(const json &object, std::string path, std::string where)
      : object_(object), path_(std::move(path)), where_(std::move(where)) {
    if (!object_.is_object())
      fail("is not an object");
  }

  /// Names in a manifest are ONNX names: anything, of any length.
  [[noreturn]] void fail(const std::string &what) const {
    throw Error(path_ + ": " + printable(where_ + " " + what, 400));
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
  std::optional<int64_t> integerOr(const char *key) const {
    if (!has(key))
      return std::nullopt;
    const json &value = get(key);
    if (!value.is_number_integer())
      fail(std::string("field '") + key + "' is not an integer");
    return value.get<int64_t>();
  }

  DType dtype() const {
    std::string name = string("dtype");
    std::optional<DType> dtype = parseDType(name);
    if (!dtype)
      fail("has unknown dtype '" + name + "'");
    return *dtype;
  }

  std::vector<int64_t> shape(const char *key = "shape") const {
    const json &value = get(key);
    if (!value.is_array())
      fail("field '" + std::string(key) + "' is not an array");
    std::vector<int64_t> shape;
    for (const json &dim : value) {
      if (!dim.is_number_unsigned())
        fail("field '" + std::string(key) +
             "' has a non-integer or negative entry");
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
                "' (known: constant, warmup, warmup-decay, warmup-cosine, "
                "one-cycle, lr-range-test, trainer-constant, "
                "trainer-constant-with-warmup, trainer-linear, "
                "trainer-cosine)");
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
  schedule.warmupRatio = reader.numberOr("warmup_ratio", 0.0);
  schedule.cycleFirstStepSize =
      reader.unsignedIntOr("cycle_first_step_size", 2000);
  schedule.cycleSecondStepSize =
      reader.unsignedIntOr("cycle_second_step_size", 0);
  schedule.decayLrRate = reader.numberOr("decay_lr_rate", 0.0);
  schedule.decayStepSize = reader.unsignedIntOr("decay_step_size", 0);
  schedule.cycleFirstStairCount =
      reader.unsignedIntOr("cycle_first_stair_count", 0);
  schedule.cycleSecondStairCount =
      reader.unsignedIntOr("cycle_second_stair_count", 0);
  schedule.rangeStepSize =
      reader.unsignedIntOr("lr_range_test_step_size", 2000);
  schedule.rangeStepRate = reader.numberOr("lr_range_test_step_rate", 1.0);
  schedule.rangeStaircase =
      reader.unsignedIntOr("lr_range_test_staircase", 0) != 0;
  for (double rate :
       {schedule.lr, schedule.minLr, schedule.warmupMinRatio,
        schedule.warmupRatio, schedule.decayLrRate, schedule.rangeStepRate})
    if (!(rate >= 0))
      reader.fail("has a negative lr, min_lr, warmup_min_ratio, "
                  "warmup_ratio, decay_lr_rate or lr_range_test_step_rate");
  train.batchSize = reader.unsignedIntOr("batch_size", 0);
  train.gradAccum = reader.unsignedIntOr("grad_accum", 1);
  train.precision = reader.stringOr("precision", "fp32");
  if (train.gradAccum == 0)
    reader.fail("has grad_accum 0; it counts micro-batches per step (>= 1)");
  train.classes = reader.unsignedIntOr("classes", 0);
  train.ignoreIndex = reader.integerOr("ignore_index");
  if (reader.has("flags")) {
    const json &flags = reader.get("flags");
    if (!flags.is_object())
      reader.fail("has a 'flags' field that is not an object");
    for (auto it = flags.begin(); it != flags.end(); ++it) {
      if (!it.value().is_string())
        reader.fail("has flag '" + printable(it.key()) +
                    "' whose value is not a string");
      train.compiledFlags[it.key()] = it.value().get<std::string>();
    }
  }
  if (reader.has("recompute")) {
    ObjectReader report(reader.get("recompute"), path, "train recompute");
    RecomputeReport &recompute = train.recompute.emplace();
    recompute.policy = report.string("policy");
    recompute.savedBytes = report.unsignedInt("saved_activation_bytes");
    recompute.baselineSavedBytes =
        report.unsignedInt("baseline_saved_activation_bytes");
    recompute.recomputeFlops = report.unsignedInt("recompute_flops");
    recompute.stepFlops = report.unsignedInt("step_flops");
  }
  if (reader.has("seq_buckets")) {
    const json &buckets = reader.get("seq_buckets");
    if (!buckets.is_array() || buckets.empty())
      reader.fail("has a 'seq_buckets' field that is not a non-empty array");
    for (const json &bucket : buckets) {
      if (!bucket.is_number_unsigned() || bucket.get<uint64_t>() == 0 ||
          (!train.seqBuckets.empty() &&
           bucket.get<uint64_t>() <= train.seqBuckets.back()))
        reader.fail("has 'seq_buckets' that are not ascending positive "
                    "integers");
      train.seqBuckets.push_back(bucket.get<uint64_t>());
    }
  }
  if (reader.has("lora")) {
    ObjectReader object(reader.get("lora"), path, "train lora");
    LoraConfig &lora = train.lora.emplace();
    lora.r = int64_t(object.unsignedInt("r"));
    lora.alpha = object.number("alpha");
    lora.scale = object.number("scale");
    lora.dropout = object.numberOr("dropout", 0.0);
    lora.rslora = object.has("rslora") && object.get("rslora") == true;
    lora.bias = object.has("bias") ? object.string("bias") : "none";
    const json &adapters = object.get("adapters");
    if (!adapters.is_array() || lora.r < 1)
      object.fail("needs r >= 1 and an array 'adapters'");
    for (size_t i = 0; i < adapters.size(); ++i) {
      ObjectReader item(adapters[i], path,
                        "train lora adapter " + std::to_string(i));
      LoraAdapter adapter{item.string("base"), item.string("a"),
                          item.string("b"), item.string("layout")};
      if (adapter.layout != "out_in" && adapter.layout != "in_out")
        item.fail("has layout '" + printable(adapter.layout) +
                  "'; expected out_in or in_out");
      lora.adapters.push_back(std::move(adapter));
    }
  }
  return train;
}

/// Parses the "dist" object; every collective names an entry.
Distribution parseDistribution(const json &object, const Manifest &manifest,
                               const std::string &path) {
  ObjectReader reader(object, path, "dist");
  Distribution dist;
  dist.worldSize = reader.unsignedInt("world_size");
  if (dist.worldSize < 1 || dist.worldSize > (1u << 20))
    reader.fail("has world_size " + std::to_string(dist.worldSize) +
                "; expected 1 to 1048576");
  uint64_t stage = reader.unsignedInt("zero");
  if (stage > 3)
    reader.fail("has ZeRO stage " + std::to_string(stage) + "; expected 0-3");
  dist.zeroStage = static_cast<unsigned>(stage);
  const json &collectives = reader.get("collectives");
  if (!collectives.is_array())
    reader.fail("field 'collectives' must be an array");
  for (size_t i = 0; i < collectives.size(); ++i) {
    ObjectReader item(collectives[i], path,
                      "dist collective " + std::to_string(i));
    Collective collective;
    collective.entry = item.string("entry");
    std::string op = item.string("op");
    collective.dtype = item.dtype();
    collective.elements = item.unsignedInt("elements");
    std::optional<CollectiveOp> known = parseCollectiveOp(op);
    if (!known)
      item.fail("has unknown op '" + op +
                "' (known: all_reduce, reduce_scatter, all_gather)");
    collective.op = *known;
    if (!std::any_of(
            manifest.entries.begin(), manifest.entries.end(),
            [&](const Entry &e) { return e.name == collective.entry; }))
      item.fail("names no entry of the manifest ('" + collective.entry + "')");
    if (collective.op != CollectiveOp::AllReduce &&
        collective.elements % dist.worldSize != 0)
      item.fail("moves " + std::to_string(collective.elements) +
                " elements, not a multiple of the world size");
    dist.collectives.push_back(std::move(collective));
  }
  return dist;
}

/// Binding `index` is a copy of a param: that param exists, is a float of
/// the copy's layout.
void checkCopy(const Manifest &manifest, size_t index, const std::string &path,
               const std::string &where) {
  const Binding &copy = manifest.bindings[index];
  auto fail = [&](const std::string &what) {
    throw Error(path + ": " + printable(where + " " + what, 400));
  };
  auto source = std::find_if(
      manifest.bindings.begin(), manifest.bindings.end(),
      [&](const Binding &binding) { return binding.name == copy.copyOf; });
  if (source == manifest.bindings.end() || source->role != BindingRole::Param)
    fail("is a copy of '" + copy.copyOf + "', which is no param");
  if (!isFloat(copy.dtype) || !isFloat(source->dtype))
    fail("is a " + std::string(dtypeName(copy.dtype)) + " copy of the " +
         dtypeName(source->dtype) + " param '" + copy.copyOf +
         "'; copies are of floats, in floats");
  if (copy.shape != source->shape || copy.fullShape != source->fullShape)
    fail("has shape " + copy.describe() + (copy.sharded() ? " (a shard)" : "") +
         " but its param '" + copy.copyOf + "' has " + source->describe() +
         (source->sharded() ? " (a shard)" : "") +
         "; a copy has its param's layout");
}

/// The checks that only a training manifest needs (see parseManifest).
void checkTrainManifest(const Manifest &manifest, const std::string &path) {
  auto fail = [&](const std::string &what) {
    throw Error(path + ": training manifest " + printable(what, 400));
  };
  const Entry &step = manifest.entries.front();
  if (step.purpose != EntryPurpose::TrainStep &&
      step.purpose != EntryPurpose::Loss)
    fail("starts with a " + std::string(purposeName(step.purpose)) +
         " entry; expected train_step (or loss, for a gradient check)");
  int loss = step.outputIndex("loss");
  if (loss < 0)
    fail("has no output 'loss'");
  const Output &lossOutput = step.outputs[static_cast<size_t>(loss)];
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

  const Entry *grads = manifest.find(EntryPurpose::LossAndGrads);
  for (const Output &grad : grads ? grads->outputs : std::vector<Output>()) {
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
    // A shard's gradient (loss_and_grads) is the whole, local one.
    const std::vector<int64_t> &shape =
        param->sharded() ? param->fullShape : param->shape;
    if (grad.dtype != DType::Float32 || grad.shape != shape)
      fail("grad output '" + grad.name + "' is " + grad.describe() +
           "; expected float32 in the param's shape " +
           describeType(DType::Float32, shape));
  }
}

} // namespace

const char *roleName(BindingRole role) {
  switch (role) {
  case BindingRole::Input:
    return "input";
  case BindingRole::Label:
    return "label";
  case BindingRole::Param:
    return "param";
  case BindingRole::Buffer:
    return "buffer";
  case BindingRole::Constant:
    return "constant";
  case BindingRole::State:
    return "state";
  case BindingRole::Hyper:
    return "hyper";
  }
  return "?";
}

std::optional<BindingRole> parseRole(const std::string &name) {
  for (BindingRole role :
       {BindingRole::Input, BindingRole::Label, BindingRole::Param,
        BindingRole::Buffer, BindingRole::Constant, BindingRole::State,
        BindingRole::Hyper})
    if (name == roleName(role))
      return role;
  return std::nullopt;
}

uint64_t inputBatchSize(const Manifest &manifest) {
  const Binding *first = nullptr;
  for (const Binding &binding : manifest.bindings) {
    if (!isData(binding.role))
      continue;
    if (binding.shape.empty() || binding.shape[0] == 0)
      throw Error("input '" + printable(binding.name) + "' (" +
                  binding.describe() + ") has no batch dimension");
    if (first && binding.shape[0] != first->shape[0])
      throw Error("inputs disagree on the batch size: '" +
                  printable(first->name) + "' has " +
                  std::to_string(first->shape[0]) + ", '" +
                  printable(binding.name) + "' has " +
                  std::to_string(binding.shape[0]));
    if (!first)
      first = &binding;
  }
  if (!first)
    throw Error("has no input binding");
  return static_cast<uint64_t>(first->shape[0]);
}

const char *purposeName(EntryPurpose purpose) {
  switch (purpose) {
  case EntryPurpose::Forward:
    return "forward";
  case EntryPurpose::TrainStep:
    return "train_step";
  case EntryPurpose::Accumulate:
    return "accumulate";
  case EntryPurpose::LossAndGrads:
    return "loss_and_grads";
  case EntryPurpose::Loss:
    return "loss";
  case EntryPurpose::Evaluate:
    return "evaluate";
  }
  return "";
}

std::optional<EntryPurpose> parsePurpose(const std::string &name) {
  for (EntryPurpose purpose :
       {EntryPurpose::Forward, EntryPurpose::TrainStep,
        EntryPurpose::Accumulate, EntryPurpose::LossAndGrads,
        EntryPurpose::Loss, EntryPurpose::Evaluate})
    if (name == purposeName(purpose))
      return purpose;
  return std::nullopt;
}

const Entry *Manifest::find(EntryPurpose purpose) const {
  for (const Entry &entry : entries)
    if (entry.purpose == purpose)
      return &entry;
  return nullptr;
}

const Entry &Manifest::main() const {
  if (entries.empty())
    throw Error("the manifest lists no entry");
  return entries.front();
}

int Entry::outputIndex(const std::string &name) const {
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
    throw Error(path + ": invalid JSON: " + printable(error.what(), 200));
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
  uint64_t abi = top.unsignedInt("abi");
  if (abi != static_cast<uint64_t>(ZTC_STEP_ABI_VERSION))
    top.fail("was compiled for step ABI " + std::to_string(abi) +
             "; this runtime calls ABI " +
             std::to_string(ZTC_STEP_ABI_VERSION) + " (recompile the model)");
  manifest.abi = static_cast<int>(abi);
  manifest.source = top.string("source");
  manifest.arenaBytes = top.unsignedInt("arena_bytes");
  manifest.streams = top.unsignedInt("streams");
  manifest.events = top.unsignedInt("events");
  if (manifest.streams < 1 || manifest.streams > 64 || manifest.events > 4096)
    top.fail("has " + std::to_string(manifest.streams) + " streams and " +
             std::to_string(manifest.events) +
             " events; expected 1 to 64 streams and at most 4096 events");
  std::string kind = top.stringOr("kind", "forward");
  if (kind == "train")
    manifest.kind = ArtifactKind::Train;
  else if (kind != "forward")
    top.fail("has unknown kind '" + kind + "' (known: forward, train)");

  const json &bindings = top.get("bindings");
  const json &entries = top.get("entries");
  if (!bindings.is_array() || !entries.is_array())
    top.fail("fields 'bindings' and 'entries' must be arrays");
  if (entries.empty())
    top.fail("lists no entry");

  std::set<std::string> inputFiles;
  for (size_t i = 0; i < bindings.size(); ++i) {
    ObjectReader reader(bindings[i], path,
                        entryName("binding", i, bindings[i]));
    Binding binding;
    std::string role = reader.string("role");
    std::optional<BindingRole> known = parseRole(role);
    if (!known)
      reader.fail("has unknown role '" + role + "'");
    binding.role = *known;
    binding.name = reader.string("name");
    binding.dtype = reader.dtype();
    binding.shape = reader.shape();
    if (!checkedByteSize(binding.shape, dtypeSize(binding.dtype)))
      reader.fail("has a shape too large to allocate");
    if (reader.has("full_shape")) {
      binding.fullShape = reader.shape("full_shape");
      if (binding.shape.size() != 1 ||
          !checkedByteSize(binding.fullShape, dtypeSize(binding.dtype)))
        reader.fail("is a shard (full_shape) but not a 1-D block of a "
                    "tensor of allocatable size");
    }
    if (reader.has("copy_of")) {
      binding.copyOf = reader.string("copy_of");
      if (binding.role != BindingRole::State)
        reader.fail("is a copy (copy_of) but not a state");
    }
    if (binding.role == BindingRole::Hyper && !binding.shape.empty())
      reader.fail("is a hyper of shape " + binding.describe() +
                  "; hypers are scalars");
    if (isData(binding.role)) {
      binding.file = reader.file(binding.name);
      if (!inputFiles.insert(binding.file).second)
        reader.fail("reuses input file '" + binding.file + ".npy'");
    }
    manifest.bindings.push_back(std::move(binding));
  }
  for (size_t i = 0; i < bindings.size(); ++i)
    if (!manifest.bindings[i].copyOf.empty())
      checkCopy(manifest, i, path, entryName("binding", i, bindings[i]));

  std::set<std::string> names;
  for (size_t i = 0; i < entries.size(); ++i) {
    std::string where = entryName("entry", i, entries[i]);
    ObjectReader reader(entries[i], path, where);
    Entry entry;
    entry.name = reader.string("name");
    std::string purpose = reader.string("purpose");
    std::optional<EntryPurpose> known = parsePurpose(purpose);
    if (!known)
      reader.fail("has unknown purpose '" + purpose +
                  "' (known: forward, train_step, accumulate, "
                  "loss_and_grads, loss)");
    entry.purpose = *known;
    if (manifest.find(entry.purpose) || !names.insert(entry.name).second)
      reader.fail("repeats a purpose or name of an earlier entry");
    const json &outputs = reader.get("outputs");
    if (!outputs.is_array())
      reader.fail("field 'outputs' must be an array");
    entry.outputs = parseOutputs(outputs, path, (where + " output").c_str(),
                                 manifest.arenaBytes);
    entry.arenaBytes = reader.unsignedIntOr("arena_bytes", manifest.arenaBytes);
    if (entry.arenaBytes > manifest.arenaBytes)
      reader.fail("reaches " + std::to_string(entry.arenaBytes) +
                  " bytes into an arena of " +
                  std::to_string(manifest.arenaBytes));
    manifest.entries.push_back(std::move(entry));
  }
  if (top.has("dist"))
    manifest.dist = parseDistribution(top.get("dist"), manifest, path);
  if (top.has("finite_checks")) {
    const json &checks = top.get("finite_checks");
    if (!checks.is_array())
      top.fail("field 'finite_checks' must be an array");
    for (size_t i = 0; i < checks.size(); ++i) {
      ObjectReader item(checks[i], path, "finite check " + std::to_string(i));
      manifest.finiteChecks.push_back(
          {item.string("node"), item.string("op"), item.string("pass")});
    }
  }
  if (manifest.kind == ArtifactKind::Train) {
    manifest.train = parseTrainConfig(top.get("train"), path);
    checkTrainManifest(manifest, path);
  }
  return manifest;
}

std::string hexHash(uint64_t hash) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx",
                static_cast<unsigned long long>(hash));
  return text;
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
                 {"grad_accum", train.gradAccum},
                 {"precision", train.precision}};
  if (schedule.warmupRatio > 0)
    object["warmup_ratio"] = schedule.warmupRatio;
  if (schedule.kind == LrScheduleKind::OneCycle) {
    object["cycle_first_step_size"] = schedule.cycleFirstStepSize;
    object["cycle_second_step_size"] = schedule.cycleSecondStepSize;
    object["decay_lr_rate"] = schedule.decayLrRate;
    object["decay_step_size"] = schedule.decayStepSize;
    // Written only when set, so artifacts without stairs stay as they were.
    if (schedule.cycleFirstStairCount || schedule.cycleSecondStairCount) {
      object["cycle_first_stair_count"] = schedule.cycleFirstStairCount;
      object["cycle_second_stair_count"] = schedule.cycleSecondStairCount;
    }
  }
  if (schedule.kind == LrScheduleKind::LrRangeTest) {
    object["lr_range_test_step_size"] = schedule.rangeStepSize;
    object["lr_range_test_step_rate"] = schedule.rangeStepRate;
    object["lr_range_test_staircase"] = schedule.rangeStaircase ? 1 : 0;
  }
  if (!train.loss.empty())
    object["loss"] = train.loss;
  if (train.batchSize != 0)
    object["batch_size"] = train.batchSize;
  if (train.classes != 0)
    object["classes"] = train.classes;
  if (train.ignoreIndex)
    object["ignore_index"] = *train.ignoreIndex;
  if (!train.compiledFlags.empty())
    object["flags"] = train.compiledFlags;
  if (const std::optional<RecomputeReport> &recompute = train.recompute)
    object["recompute"] = {
        {"policy", recompute->policy},
        {"saved_activation_bytes", recompute->savedBytes},
        {"baseline_saved_activation_bytes", recompute->baselineSavedBytes},
        {"recompute_flops", recompute->recomputeFlops},
        {"step_flops", recompute->stepFlops}};
  if (!train.seqBuckets.empty())
    object["seq_buckets"] = train.seqBuckets;
  if (const std::optional<LoraConfig> &lora = train.lora) {
    json adapters = json::array();
    for (const LoraAdapter &adapter : lora->adapters)
      adapters.push_back({{"base", adapter.base},
                          {"a", adapter.a},
                          {"b", adapter.b},
                          {"layout", adapter.layout}});
    object["lora"] = {{"r", lora->r},           {"alpha", lora->alpha},
                      {"scale", lora->scale},   {"dropout", lora->dropout},
                      {"rslora", lora->rslora}, {"bias", lora->bias},
                      {"adapters", adapters}};
  }
  return object;
}

} // namespace

std::string bucketDirectory(const std::string &artifactDir, uint64_t seq) {
  return artifactDir + "/buckets/seq-" + std::to_string(seq);
}

std::string printManifest(const Manifest &manifest) {
  json root = {{"format", manifest.format},
               {"abi", manifest.abi},
               {"target", targetName(manifest.target)},
               {"source", manifest.source},
               {"arena_bytes", manifest.arenaBytes},
               {"streams", manifest.streams},
               {"events", manifest.events}};
  json bindings = json::array();
  for (const Binding &binding : manifest.bindings) {
    json entry = {{"role", roleName(binding.role)},
                  {"name", binding.name},
                  {"dtype", dtypeName(binding.dtype)},
                  {"shape", binding.shape}};
    if (binding.sharded())
      entry["full_shape"] = binding.fullShape;
    if (!binding.copyOf.empty())
      entry["copy_of"] = binding.copyOf;
    if (isData(binding.role))
      entry["file"] = binding.file;
    bindings.push_back(std::move(entry));
  }
  root["bindings"] = std::move(bindings);
  json entries = json::array();
  for (const Entry &entry : manifest.entries)
    entries.push_back({{"name", entry.name},
                       {"purpose", purposeName(entry.purpose)},
                       {"outputs", printOutputs(entry.outputs)},
                       {"arena_bytes", entry.arenaBytes}});
  root["entries"] = std::move(entries);
  if (manifest.dist.worldSize != 1 || manifest.dist.zeroStage != 0 ||
      !manifest.dist.collectives.empty()) {
    json collectives = json::array();
    for (const Collective &collective : manifest.dist.collectives)
      collectives.push_back({{"entry", collective.entry},
                             {"op", collectiveOpName(collective.op)},
                             {"dtype", dtypeName(collective.dtype)},
                             {"elements", collective.elements}});
    root["dist"] = {{"world_size", manifest.dist.worldSize},
                    {"zero", manifest.dist.zeroStage},
                    {"collectives", std::move(collectives)},
                    {"collective_hash", hexHash(manifest.dist.hash())}};
  }
  if (!manifest.finiteChecks.empty()) {
    json checks = json::array();
    for (const FiniteCheck &check : manifest.finiteChecks)
      checks.push_back(
          {{"node", check.node}, {"op", check.op}, {"pass", check.pass}});
    root["finite_checks"] = std::move(checks);
  }
  if (manifest.kind == ArtifactKind::Train) {
    root["kind"] = "train";
    root["train"] = printTrainConfig(manifest.train);
  }
  return root.dump(2) + "\n";
}

Tensor shardBlock(const Tensor &whole, const Binding &binding, uint64_t rank) {
  Tensor block(binding.dtype, binding.shape);
  size_t bytes = block.byteSize();
  size_t from = rank * bytes;
  // Past the tensor's end the block is padding: zeros.
  std::fill(block.bytes.begin(), block.bytes.end(), 0);
  if (from < whole.bytes.size())
    std::copy(whole.bytes.begin() + from,
              whole.bytes.begin() + std::min(whole.bytes.size(), from + bytes),
              block.bytes.begin());
  return block;
}

std::string FiniteCheck::describe() const {
  std::string text = "the " + pass + " of ";
  text += node.empty() ? std::string("ztc's own arithmetic")
                       : "ONNX node '" + node + "'";
  return text + " (" + op + ")";
}

const char *collectiveOpName(CollectiveOp op) {
  switch (op) {
  case CollectiveOp::AllReduce:
    return "all_reduce";
  case CollectiveOp::ReduceScatter:
    return "reduce_scatter";
  case CollectiveOp::AllGather:
    return "all_gather";
  }
  return "";
}

std::optional<CollectiveOp> parseCollectiveOp(const std::string &name) {
  for (CollectiveOp op : {CollectiveOp::AllReduce, CollectiveOp::ReduceScatter,
                          CollectiveOp::AllGather})
    if (name == collectiveOpName(op))
      return op;
  return std::nullopt;
}

uint64_t Collective::ringElements(uint64_t worldSize) const {
  uint64_t moved = elements * (worldSize - 1) / worldSize;
  return op == CollectiveOp::AllReduce ? 2 * moved : moved;
}

namespace {

/// FNV-1a 64 over text.
struct Fnv1a {
  uint64_t hash = 0xcbf29ce484222325ull;
  void bytes(const std::string &text) {
    for (unsigned char c : text) {
      hash ^= c;
      hash *= 0x100000001b3ull;
    }
  }
  /// A field ended by a separator byte no field contains, so fields cannot
  /// run into each other.
  void field(const std::string &text) { bytes(text + '\x1f'); }
};

} // namespace

uint64_t Distribution::hash() const {
  Fnv1a fnv;
  auto mix = [&](const std::string &text) { fnv.field(text); };
  mix(std::to_string(worldSize));
  mix(std::to_string(zeroStage));
  for (const Collective &collective : collectives) {
    mix(collective.entry);
    mix(collectiveOpName(collective.op));
    mix(dtypeName(collective.dtype));
    mix(std::to_string(collective.elements));
  }
  return fnv.hash;
}

uint64_t Distribution::ringElements(const std::string &entry) const {
  uint64_t total = 0;
  for (const Collective &collective : collectives)
    if (collective.entry == entry)
      total += collective.ringElements(worldSize);
  return total;
}

uint64_t manifestHash(const Manifest &manifest) {
  Fnv1a fnv;
  fnv.bytes(printManifest(manifest));
  return fnv.hash;
}

uint64_t interfaceHash(const Manifest &manifest) {
  Fnv1a fnv;
  auto mix = [&](const std::string &text) { fnv.field(text); };
  auto mixShape = [&](DType dtype, const std::vector<int64_t> &shape) {
    mix(describeType(dtype, shape));
  };
  mix(std::to_string(manifest.abi));
  mix(std::to_string(manifest.dist.hash()));
  mix(std::to_string(manifest.arenaBytes));
  mix(std::to_string(manifest.streams));
  mix(std::to_string(manifest.events));
  for (const Binding &binding : manifest.bindings) {
    mix(roleName(binding.role));
    mix(binding.name);
    mixShape(binding.dtype, binding.shape);
    if (binding.sharded())
      mixShape(binding.dtype, binding.fullShape);
  }
  for (const Entry &entry : manifest.entries) {
    mix(entry.name);
    mix(purposeName(entry.purpose));
    for (const Output &output : entry.outputs) {
      mix(output.name);
      mixShape(output.dtype, output.shape);
      mix(std::to_string(output.offset));
    }
  }
  return fnv.hash;
}

} // namespace ztc::rt
